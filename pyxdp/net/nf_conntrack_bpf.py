"""The conntrack kfuncs of ``net/netfilter/nf_conntrack_bpf.c`` and ``nf_nat_bpf.c``.

``bpf_xdp_ct_lookup``, ``bpf_xdp_ct_alloc``, ``bpf_ct_insert_entry``,
``bpf_ct_release``, ``bpf_ct_set_timeout``, ``bpf_ct_change_timeout``,
``bpf_ct_set_status``, ``bpf_ct_change_status`` and ``bpf_ct_set_nat_info``
over the run's namespace's table (:class:`pyxdp.net.nf_conntrack.NfConntrack`,
``RunContext.fib.conntrack``), with Linux 6.18's argument checks in its order:

* ``struct bpf_ct_opts`` of 16 bytes (``ct_zone_id``, ``ct_zone_dir``,
  ``reserved[3]`` that must be 0) or of the older 12 (``ct_zone_id`` must then
  be 0), else -EINVAL; ``l4proto`` TCP or UDP (-EPROTO); ``netns_id`` -1 (the
  caller's namespace), an id the namespace gave another (``peers``) or
  -ENONET, below -1 -EINVAL; a tuple of ``sizeof(ipv4)`` (12) or
  ``sizeof(ipv6)`` (36) bytes (-EAFNOSUPPORT); a 16-byte ``opts`` with
  ``ct_zone_dir`` 0 gets ``NF_CT_DEFAULT_ZONE_DIR`` (3) written back. A lookup
  that finds nothing is -ENOENT. Errors go to ``opts->error`` (when
  ``opts__sz`` covers it: 8 bytes or more) and the kfunc returns NULL; a
  found entry's direction goes to ``opts->dir``.
* ``bpf_xdp_ct_alloc`` makes an unconfirmed entry with a 10 s timeout;
  ``bpf_ct_insert_entry`` confirms it (timeout made absolute) or frees it
  (NULL) when a tuple is taken; ``bpf_ct_release`` drops a reference.

A returned ``struct nf_conn *`` points into the table's buffer, mapped
read-only into the run. pyxdp's engines call these as helpers of the
program's own (:func:`pyxdp.net.xdp_metadata.bind_kfuncs`); on the JIT, all
but ``bpf_ct_set_nat_info`` run as native twins over the same table (its
buffer, buckets, chains and free slots, :data:`~pyxdp.net.nf_conntrack.CT_DESC`,
which the XDP runtime hands them as the run context's ``ct`` word). They give
Python the call (``SLOW``, before changing anything) for what is rare: an
``opts__sz`` other than 12 or 16, a peer namespace's table or entry, a table the
gc must sweep first (an entry may have expired) or whose clock is not
``jiffies64``, the release that drops the last reference.
"""

from __future__ import annotations

import errno
from collections.abc import Callable

from pyxdp.errors import HelperFault
from pyxdp.net.fib import dev_net
from pyxdp.net.nf_conntrack import (
    AF_INET,
    AF_INET6,
    CT_DESC,
    CT_FLAGS,
    CT_SEQ,
    CT_SLOT,
    CTF_ALLOCATED,
    CTF_IN_TABLE,
    DEFAULT_ZONE,
    INT_MAX,
    IP_CT_DIR_ORIGINAL,
    IPPROTO_TCP,
    IPPROTO_UDP,
    IPS_MAX_BIT,
    IPS_UNCHANGEABLE_MASK,
    NF_CONN_LAYOUT,
    NF_CT_DEFAULT_ZONE_DIR,
    TABLES,
    ConntrackError,
    CtTuple,
    IpsStatus,
    NfConn,
    NfConntrack,
    Zone,
    msecs_to_jiffies,
)
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.jiffies import HZ, jiffies64_ir
from pyxdp.vm.jit.abi import NF_XDP, SLOW, Natives
from pyxdp.vm.jit.ir import Text, c64, ret_if, s32
from pyxdp.vm.jit.natives import HelperNative, register_kfunc
from pyxdp.vm.memory import Region

__all__ = ["CT_KFUNCS", "NF_BPF_CT_OPTS_SZ"]

NF_BPF_CT_OPTS_SZ = 16
NF_BPF_CT_OPTS_OLD_SZ = 12
BPF_F_CURRENT_NETNS = -1
M32 = 0xFFFF_FFFF
M64 = 0xFFFF_FFFF_FFFF_FFFF
_OPTS_ERROR_END = 8  # offsetofend(struct bpf_ct_opts, error)
ALLOC_TIMEOUT = 10 * HZ  # __bpf_nf_ct_alloc_entry(..., 10): seconds


def _s32(v: int) -> int:
    v &= M32
    return v - (1 << 32) if v & (1 << 31) else v


def _conn(vm: Interpreter, addr: int) -> NfConn:
    """The entry a ``struct nf_conn *`` argument points at."""
    table = TABLES.get(addr & ~0xFFFF_FFFF)
    off = addr - (addr & ~0xFFFF_FFFF)
    ct = table.conn_at(off // CT_SLOT) if table is not None and off % CT_SLOT == 0 else None
    if ct is None:
        raise HelperFault(f"{addr:#x} is not a struct nf_conn pointer of this run")
    return ct


def _map(vm: Interpreter, ct: NfConn) -> int:
    """Map the entry's table for the program (once per run); the entry's address."""
    table = ct.table
    if not any(r.base == table.base for r in vm.mem.regions):
        vm.mem.add(Region("nf_conntrack table", table.base, table.buf, writable=False))
    return ct.addr


def _opts_u8(vm: Interpreter, opts: int, off: int) -> int:
    return vm.mem.load(opts + off, 1)


def _parse(vm: Interpreter, tup: int, size: int, proto: int, direction: int
           ) -> CtTuple | int:
    """``bpf_nf_ct_tuple_parse``: the tuple (reply direction: inverted), or -errno."""
    if proto not in (IPPROTO_TCP, IPPROTO_UDP):
        return -errno.EPROTO
    if size == 12:
        raw = vm.mem.read(tup, 12)
        t = CtTuple(AF_INET, proto, raw[0:4].ljust(16, b"\0"), int.from_bytes(raw[8:10], "big"),
                    raw[4:8].ljust(16, b"\0"), int.from_bytes(raw[10:12], "big"))
    elif size == 36:
        raw = vm.mem.read(tup, 36)
        t = CtTuple(AF_INET6, proto, raw[0:16], int.from_bytes(raw[32:34], "big"),
                    raw[16:32], int.from_bytes(raw[34:36], "big"))
    else:
        return -errno.EAFNOSUPPORT
    return t if direction == IP_CT_DIR_ORIGINAL else t.invert()


def _opts(vm: Interpreter, tup: int, opts: int, size: int) -> tuple[int, int, int, int] | int:
    """The size and reserved checks; (netns_id, l4proto, zone_id, zone_dir) or -errno."""
    if not opts or not tup:
        return -errno.EINVAL
    if size not in (NF_BPF_CT_OPTS_SZ, NF_BPF_CT_OPTS_OLD_SZ):
        return -errno.EINVAL
    netns_id = _s32(vm.mem.load(opts, 4))
    l4proto = _opts_u8(vm, opts, 8)
    zone_id = vm.mem.load(opts + 10, 2)
    zone_dir = 0
    if size == NF_BPF_CT_OPTS_SZ:
        zone_dir = _opts_u8(vm, opts, 12)
        if any(vm.mem.read(opts + 13, 3)):
            return -errno.EINVAL
    elif zone_id:
        return -errno.EINVAL
    return netns_id, l4proto, zone_id, zone_dir


def _zone(vm: Interpreter, opts: int, size: int, zone_id: int, zone_dir: int) -> Zone:
    if size != NF_BPF_CT_OPTS_SZ:
        return DEFAULT_ZONE
    if zone_dir == 0:
        zone_dir = NF_CT_DEFAULT_ZONE_DIR
        vm.mem.store(opts + 12, 1, zone_dir)
    return Zone(zone_id, zone_dir)


def _peer(net: NfConntrack, netns_id: int) -> NfConntrack | int:
    if netns_id < 0:
        return net
    other = net.peers.get(netns_id)
    return other if other is not None else -errno.ENONET


def _lookup(vm: Interpreter, net: NfConntrack, tup: int, tsz: int, opts: int, osz: int
            ) -> NfConn | int:
    """``__bpf_nf_ct_lookup``."""
    got = _opts(vm, tup, opts, osz)
    if isinstance(got, int):
        return got
    netns_id, l4proto, zone_id, zone_dir = got
    if l4proto not in (IPPROTO_TCP, IPPROTO_UDP):
        return -errno.EPROTO
    if netns_id < BPF_F_CURRENT_NETNS:
        return -errno.EINVAL
    t = _parse(vm, tup, tsz, l4proto, IP_CT_DIR_ORIGINAL)
    if isinstance(t, int):
        return t
    table = _peer(net, netns_id)
    if isinstance(table, int):
        return table
    found = table.find(t, _zone(vm, opts, osz, zone_id, zone_dir))
    if found is None:
        return -errno.ENOENT
    ct, direction = found
    ct.use += 1
    vm.mem.store(opts + 9, 1, direction)
    return ct


def _alloc(vm: Interpreter, net: NfConntrack, tup: int, tsz: int, opts: int, osz: int
           ) -> NfConn | int:
    """``__bpf_nf_ct_alloc_entry``."""
    got = _opts(vm, tup, opts, osz)
    if isinstance(got, int):
        return got
    netns_id, l4proto, zone_id, zone_dir = got
    if netns_id < BPF_F_CURRENT_NETNS:
        return -errno.EINVAL
    orig = _parse(vm, tup, tsz, l4proto, IP_CT_DIR_ORIGINAL)
    if isinstance(orig, int):
        return orig
    reply = _parse(vm, tup, tsz, l4proto, 1)
    assert not isinstance(reply, int)
    table = _peer(net, netns_id)
    if isinstance(table, int):
        return table
    zone = _zone(vm, opts, osz, zone_id, zone_dir)
    try:
        return table.alloc(orig, reply, zone, ALLOC_TIMEOUT)
    except ConntrackError as e:
        return -e.errno


def _entry(fn: Callable[[Interpreter, NfConntrack, int, int, int, int], NfConn | int]
           ) -> Callable[..., int]:
    def call(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        table = dev_net(vm.context, r1, "conntrack kfunc")[0].conntrack
        got = fn(vm, table, r2, r3 & M32, r4, r5 & M32)
        if isinstance(got, int):
            # bpf_ct_opts_result: only into an opts that holds ``error``
            if r4 and r5 & M32 >= _OPTS_ERROR_END:
                vm.mem.store(r4 + 4, 4, got & M32)
            return 0
        return _map(vm, got)
    return call


def ct_insert_entry(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_ct_insert_entry``: the entry confirmed and hashed, or freed and NULL."""
    ct = _conn(vm, r1)
    table = ct.table
    if not ct.confirmed:
        ct.timeout = ct.timeout + table.stamp()
    ct.status |= IpsStatus.CONFIRMED
    try:
        table.insert(ct)
    except ConntrackError:
        table.free(ct)
        return 0
    ct.use = 2  # the table's reference and the caller's
    return _map(vm, ct)


def ct_release(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_ct_release``: ``nf_ct_put``."""
    ct = _conn(vm, r1)
    ct.use = max(ct.use - 1, 0)
    if ct.use == 0:
        ct.table.free(ct)
    return 0


def ct_set_timeout(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    ct = _conn(vm, r1)
    ct.table.set_timeout(ct, msecs_to_jiffies(r2))
    return 0


def ct_change_timeout(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    ct = _conn(vm, r1)
    return ct.table.change_timeout(ct, msecs_to_jiffies(r2)) & M32


def ct_change_status(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_ct_set_status`` and ``bpf_ct_change_status``: ``nf_ct_change_status_common``."""
    return NfConntrack.change_status(_conn(vm, r1), r2 & M32) & M32


def ct_set_nat_info(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_ct_set_nat_info(nfct, addr, port, manip)``: a port > 0 is the port range."""
    ct = _conn(vm, r1)
    if ct.orig.l3num not in (AF_INET, AF_INET6):
        return (-errno.EINVAL) & M32
    addr = vm.mem.read(r2, 16)
    port = _s32(r3)
    return ct.table.nat_setup(ct, addr, port & 0xFFFF if port > 0 else None,
                              r4 & M32) & M32


# -- native twins (the JIT) ---------------------------------------------------------------

def _desc(f: Text) -> str:
    """The run's table descriptor (CT_DESC words); SLOW when the run has none."""
    d = f.cget("%ctx", "ct")
    ret_if(f, f.ins(f"icmp eq i64 {d}, 0"), SLOW)
    return f.ins(f"inttoptr i64 {d} to ptr")


def _load(f: Text, p: str, off: int | str, ty: str) -> str:
    v = f.ins(f"load {ty}, ptr {f.gep(p, off)}, align 1")
    return v if ty == "i64" else f.ins(f"zext {ty} {v} to i64")


def _key_words(f: Text, tp: str, v6: bool, proto: str) -> list[str]:
    """The 5 little-endian words of the packed tuple (``CtTuple.pack``, ``dir`` 0) of the
    ``bpf_sock_tuple`` at ``tp``: addresses padded to 16 bytes, ports as on the wire."""
    def sh(v: str, n: int) -> str:
        return f.ins(f"shl i64 {v}, {n}")

    def orr(*vs: str) -> str:
        acc = vs[0]
        for v in vs[1:]:
            acc = f.ins(f"or i64 {acc}, {v}")
        return acc

    if v6:
        sport, dport = _load(f, tp, 32, "i16"), _load(f, tp, 34, "i16")
        return [_load(f, tp, 0, "i64"), _load(f, tp, 8, "i64"),
                orr(sport, c64(AF_INET6 << 16), sh(_load(f, tp, 16, "i32"), 32)),
                _load(f, tp, 20, "i64"),
                orr(_load(f, tp, 28, "i32"), sh(dport, 32), sh(proto, 48))]
    sport, dport = _load(f, tp, 8, "i16"), _load(f, tp, 10, "i16")
    return [_load(f, tp, 0, "i32"), "0",
            orr(sport, c64(AF_INET << 16), sh(_load(f, tp, 4, "i32"), 32)), "0",
            orr(sh(dport, 32), sh(proto, 48))]


def _bucket_ir(f: Text, dp: str, words: list[str]) -> str:
    """``NfConntrack._bucket`` of a key's words."""
    h = "0"
    for w in words:
        h = f.ins(f"mul i64 {f.ins(f'xor i64 {h}, {w}')}, {c64(0x9E37_79B9_7F4A_7C15)}")
    h = f.ins(f"xor i64 {h}, {f.ins(f'lshr i64 {h}, 32')}")
    return f.ins(f"and i64 {h}, {f.word(dp, CT_DESC['mask'], 'i64', '')}")


def _ptr(f: Text, dp: str, name: str) -> str:
    return f.ins(f"inttoptr i64 {f.word(dp, CT_DESC[name], 'i64', '')} to ptr")


def _zid(f: Text, idv: str, dirv: str, d: str) -> str:
    """``Zone.id_for(d)``: the id when the zone's directions hold d, else 0."""
    on = f.ins(f"and i64 {f.ins(f'lshr i64 {dirv}, {d}')}, 1")
    return f.ins(f"select i1 {f.ins(f'icmp ne i64 {on}, 0')}, i64 {idv}, i64 0")


def _tuple_rel(f: Text, d: str) -> str:
    """The offset of ``tuplehash[d].tuple`` in an entry."""
    dd = f.ins(f"mul i64 {d}, {NF_CONN_LAYOUT['tuplehash_size']}")
    return f.ins(f"add i64 {dd}, {NF_CONN_LAYOUT['tuplehash'] + NF_CONN_LAYOUT['tuple']}")


def _find(f: Text, dp: str, words: list[str], qid: str, qdir: str,
          hit: str, miss: str, bucket_zone: str | None = None) -> tuple[str, str]:
    """Walk the key's chain as ``NfConntrack._matches`` does: branch to ``hit`` with
    (slot offset, direction) of the first entry whose tuple and zone id match (and
    whose zone id is ``bucket_zone`` when given), else to ``miss``."""
    b = _bucket_ir(f, dp, words)
    buckets, links, buf = _ptr(f, dp, "buckets"), _ptr(f, dp, "next"), _ptr(f, dp, "buf")
    first = f.ins(f"zext i32 {f.at_index(buckets, b, 'i32', 4)} to i64")
    before = f.cur
    loop, body, step = f.label("walk"), f.label("node"), f.label("step")
    f.br(loop)
    f.at(loop)
    node = f.tmp()
    f.lines.append(f"  {node} = phi i64 [ {first}, %{before} ], [ %NEXT, %STEP ]")
    at_phi = len(f.lines) - 1
    f.cbr(f.ins(f"icmp eq i64 {node}, 0"), miss, body)
    f.at(body)
    n = f.ins(f"sub i64 {node}, 1")
    off = f.ins(f"mul i64 {f.ins(f'lshr i64 {n}, 1')}, {CT_SLOT}")
    d = f.ins(f"and i64 {n}, 1")
    tp = f.gep(buf, f.ins(f"add i64 {off}, {_tuple_rel(f, d)}"))
    same = "true"
    for i, w in enumerate(words):
        e = _load(f, tp, 8 * i, "i64")
        if i == 4:
            e = f.ins(f"and i64 {e}, {c64((1 << 56) - 1)}")
        same = f.ins(f"and i1 {same}, {f.ins(f'icmp eq i64 {e}, {w}')}")
    z = _load(f, f.gep(buf, off), NF_CONN_LAYOUT["zone"], "i32")
    cz = _zid(f, f.ins(f"and i64 {z}, 65535"), f.ins(f"lshr i64 {z}, 24"), d)
    same = f.ins(f"and i1 {same}, {f.ins(f'icmp eq i64 {cz}, {_zid(f, qid, qdir, d)}')}")
    if bucket_zone is not None:
        same = f.ins(f"and i1 {same}, {f.ins(f'icmp eq i64 {cz}, {bucket_zone}')}")
    f.cbr(same, hit, step)
    f.at(step)
    nxt = f.ins(f"zext i32 {f.at_index(links, n, 'i32', 4)} to i64")
    f.br(loop)
    f.lines[at_phi] = f.lines[at_phi].replace("%NEXT", nxt).replace("%STEP", "%" + step)
    f.at(hit)
    return off, d


def _append_ir(f: Text, dp: str, words: list[str], n: str) -> None:
    """Node ``n`` onto the end of its key's chain (``NfConntrack._hash_in``)."""
    buckets, links = _ptr(f, dp, "buckets"), _ptr(f, dp, "next")
    f.put_index(links, n, "0", "i32", 4)
    b = _bucket_ir(f, dp, words)
    head = f.ins(f"zext i32 {f.at_index(buckets, b, 'i32', 4)} to i64")
    n1 = f.ins(f"trunc i64 {f.ins(f'add i64 {n}, 1')} to i32")
    empty, walk, loop, end, linked = (f.label(x) for x in ("empty", "tail", "loop", "end",
                                                          "linked"))
    f.cbr(f.ins(f"icmp eq i64 {head}, 0"), empty, walk)
    f.at(empty)
    f.put_index(buckets, b, n1, "i32", 4)
    f.br(linked)
    f.at(walk)
    f.br(loop)
    f.at(loop)
    cur = f.tmp()
    f.lines.append(f"  {cur} = phi i64 [ {head}, %{walk} ], [ %NXT, %{loop} ]")
    at_phi = len(f.lines) - 1
    idx = f.ins(f"sub i64 {cur}, 1")
    nxt = f.ins(f"zext i32 {f.at_index(links, idx, 'i32', 4)} to i64")
    f.lines[at_phi] = f.lines[at_phi].replace("%NXT", nxt)
    f.cbr(f.ins(f"icmp eq i64 {nxt}, 0"), end, loop)
    f.at(end)
    f.put_index(links, idx, n1, "i32", 4)
    f.br(linked)
    f.at(linked)


class _Args:
    """What the lookup's and the allocation's shared checks leave (IR values)."""

    def __init__(self, f: Text, dp: str, op: str, tp: str, v6: str, l4: str, qid: str,
                 qdir: str) -> None:
        self.f, self.dp, self.op, self.tp, self.v6 = f, dp, op, tp, v6
        self.l4, self.qid, self.qdir = l4, qid, qdir

    def fail(self, err: int) -> None:
        """``opts->error = -err``, return NULL (the block ends)."""
        self.f.do(f"store i32 {-err}, ptr {self.f.gep(self.op, 4)}, align 1")
        self.f.do("ret i64 0")


def _expiry_guard(f: Text, dp: str) -> str:
    """The stamp (u32 jiffies); SLOW first for a clock that is not jiffies64, or when a
    hashed entry may have expired (Python's gc sweeps the table first)."""
    ret_if(f, f.ins(f"icmp eq i64 {f.word(dp, CT_DESC['clock'], 'i64', '')}, 0"), SLOW)
    stamp = f.ins(f"and i64 {jiffies64_ir(f)}, 4294967295")
    left = s32(f, f.ins(f"sub i64 {f.word(dp, CT_DESC['earliest'], 'i64', '')}, {stamp}"))
    live = f.ins(f"icmp ne i64 {f.word(dp, CT_DESC['live'], 'i64', '')}, 0")
    ret_if(f, f.ins(f"and i1 {live}, {f.ins(f'icmp sle i64 {left}, 0')}"), SLOW)
    return stamp


def _prologue(f: Text, natives: Natives, alloc: bool) -> _Args:
    """``_entry`` and ``_opts``/``_parse``/``_peer``/``_zone`` of ``_lookup`` or ``_alloc``:
    every check in its order, errors written, the zone direction written back."""
    ok = f.flag(NF_XDP)
    ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp eq i64 %r1, {c64(natives.ctx_base)}')}")
    ret_if(f, f.ins(f"xor i1 {ok}, true"), SLOW)
    dp = _desc(f)
    osz = f.ins("and i64 %r5, 4294967295")
    tsz = f.ins("and i64 %r3, 4294967295")
    is16 = f.ins(f"icmp eq i64 {osz}, {NF_BPF_CT_OPTS_SZ}")
    is12 = f.ins(f"icmp eq i64 {osz}, {NF_BPF_CT_OPTS_OLD_SZ}")
    ret_if(f, f.ins(f"xor i1 {f.ins(f'or i1 {is16}, {is12}')}, true"), SLOW)
    ret_if(f, f.ins("icmp eq i64 %r4, 0"), SLOW)
    op = f.ins(f"call ptr @translate(ptr %ctx, i64 %r4, i64 {osz}, i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {op}, null"), SLOW)

    def fail(cond: str, err: int) -> None:
        yes, no = f.label("err"), f.label("ok")
        f.cbr(cond, yes, no)
        f.at(yes)
        f.do(f"store i32 {-err}, ptr {f.gep(op, 4)}, align 1")
        f.do("ret i64 0")
        f.at(no)

    fail(f.ins("icmp eq i64 %r2, 0"), errno.EINVAL)
    netns = f.ins(f"sext i32 {f.ins(f'load i32, ptr {op}, align 1')} to i64")
    l4 = _load(f, op, 8, "i8")
    zone_id = _load(f, op, 10, "i16")
    w12 = _load(f, op, 12, "i32")
    zdir = f.ins(f"select i1 {is16}, i64 {f.ins(f'and i64 {w12}, 255')}, i64 0")
    bad = f.ins(f"select i1 {is16}, i1 {f.ins(f'icmp ugt i64 {w12}, 255')}, "
                f"i1 {f.ins(f'icmp ne i64 {zone_id}, 0')}")
    fail(bad, errno.EINVAL)
    tcp = f.ins(f"icmp eq i64 {l4}, {IPPROTO_TCP}")
    udp = f.ins(f"icmp eq i64 {l4}, {IPPROTO_UDP}")
    checks = [(f.ins(f"xor i1 {f.ins(f'or i1 {tcp}, {udp}')}, true"), errno.EPROTO),
              (f.ins(f"icmp slt i64 {netns}, -1"), errno.EINVAL)]
    # a lookup checks l4proto before netns_id, an allocation after (as Linux orders them)
    for cond, err in (checks[::-1] if alloc else checks):
        fail(cond, err)
    v4 = f.ins(f"icmp eq i64 {tsz}, 12")
    v6 = f.ins(f"icmp eq i64 {tsz}, 36")
    fail(f.ins(f"xor i1 {f.ins(f'or i1 {v4}, {v6}')}, true"), errno.EAFNOSUPPORT)
    tp = f.ins(f"call ptr @translate(ptr %ctx, i64 %r2, i64 {tsz}, i1 false)")
    ret_if(f, f.ins(f"icmp eq ptr {tp}, null"), SLOW)
    ret_if(f, f.ins(f"icmp sge i64 {netns}, 0"), SLOW)  # a peer's table
    _expiry_guard(f, dp)
    # _zone: a 16-byte opts with ct_zone_dir 0 gets the default directions back
    dflt = f.ins(f"and i1 {is16}, {f.ins(f'icmp eq i64 {zdir}, 0')}")
    wb, go = f.label("wb"), f.label("go")
    f.cbr(dflt, wb, go)
    f.at(wb)
    f.do(f"store i8 {NF_CT_DEFAULT_ZONE_DIR}, ptr {f.gep(op, 12)}, align 1")
    f.br(go)
    f.at(go)
    qid = f.ins(f"select i1 {is16}, i64 {zone_id}, i64 0")
    given = f.ins(f"and i1 {is16}, {f.ins(f'icmp ne i64 {zdir}, 0')}")
    qdir = f.ins(f"select i1 {given}, i64 {zdir}, i64 {NF_CT_DEFAULT_ZONE_DIR}")
    return _Args(f, dp, op, tp, v6, l4, qid, qdir)


def _lookup_fn(kind: str) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        f = Text()
        f.at("entry")
        a = _prologue(f, natives, False)
        buf = _ptr(f, a.dp, "buf")
        labels = [(f.label("v4"), f.label("miss")), (f.label("v6"), f.label("miss"))]
        f.cbr(a.v6, labels[1][0], labels[0][0])
        for fam6, (fam_l, miss) in zip((False, True), labels, strict=True):
            f.at(fam_l)
            words = _key_words(f, a.tp, fam6, a.l4)
            off, d = _find(f, a.dp, words, a.qid, a.qdir, f.label("hit"), miss)
            cp = f.gep(buf, off)
            use = f.ins(f"load i32, ptr {cp}, align 4")
            f.do(f"store i32 {f.ins(f'add i32 {use}, 1')}, ptr {cp}, align 4")
            f.do(f"store i8 {f.ins(f'trunc i64 {d} to i8')}, ptr {f.gep(a.op, 9)}, align 1")
            base = f.word(a.dp, CT_DESC["base"], "i64", "")
            f.do(f"ret i64 {f.ins(f'add i64 {base}, {off}')}")
            f.at(miss)
            a.fail(errno.ENOENT)
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                      "i64 %r4, i64 %r5) nounwind")
    return define


def _put_tuple(f: Text, tp: str, at: str, v6: bool, proto: str, reply: bool) -> None:
    """``CtTuple.pack`` of the ``bpf_sock_tuple`` at ``tp`` (inverted for the reply)
    into the zeroed tuple at ``at``."""
    n = 16 if v6 else 4
    src, dst = tp, f.gep(tp, n)
    sport, dport = f.gep(tp, 2 * n), f.gep(tp, 2 * n + 2)
    if reply:
        src, dst, sport, dport = dst, src, dport, sport
    for to, frm in ((0, src), (20, dst)):
        if v6:
            f.memmove(f.gep(at, to), frm, 16)
        else:
            v = f.ins(f"load i32, ptr {frm}, align 1")
            f.do(f"store i32 {v}, ptr {f.gep(at, to)}, align 1")
    for to, frm in ((16, sport), (36, dport)):
        v = f.ins(f"load i16, ptr {frm}, align 1")
        f.do(f"store i16 {v}, ptr {f.gep(at, to)}, align 1")
    f.do(f"store i16 {AF_INET6 if v6 else AF_INET}, ptr {f.gep(at, 18)}, align 1")
    f.do(f"store i8 {f.ins(f'trunc i64 {proto} to i8')}, ptr {f.gep(at, 38)}, align 1")
    f.do(f"store i8 {int(reply)}, ptr {f.gep(at, 39)}, align 1")


def _alloc_fn(kind: str) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """``__bpf_nf_ct_alloc_entry``: ``NfConntrack.alloc`` over the shared slots."""
        f = Text()
        f.at("entry")
        a = _prologue(f, natives, True)
        dp = a.dp
        count = f.word(dp, CT_DESC["count"], "i64", "")
        full, room = f.label("full"), f.label("room")
        f.cbr(f.ins(f"icmp uge i64 {count}, {f.word(dp, CT_DESC['nslots'], 'i64', '')}"),
              full, room)
        f.at(full)
        a.fail(errno.ENOMEM)
        f.at(room)
        nfree = f.word(dp, CT_DESC["nfree"], "i64", "")
        pop, fresh, got = f.label("pop"), f.label("fresh"), f.label("slot")
        f.cbr(f.ins(f"icmp ne i64 {nfree}, 0"), pop, fresh)
        f.at(pop)
        top = f.ins(f"sub i64 {nfree}, 1")
        f.set_word(dp, CT_DESC["nfree"], top, "i64", "")
        s_pop = f.ins(f"zext i32 {f.at_index(_ptr(f, dp, 'free'), top, 'i32', 4)} to i64")
        pop_end = f.cur
        f.br(got)
        f.at(fresh)
        s_new = f.word(dp, CT_DESC["next_slot"], "i64", "")
        f.set_word(dp, CT_DESC["next_slot"], f.ins(f"add i64 {s_new}, 1"), "i64", "")
        f.br(got)
        f.at(got)
        slot = f.ins(f"phi i64 [ {s_pop}, %{pop_end} ], [ {s_new}, %{fresh} ]")
        off = f.ins(f"mul i64 {slot}, {CT_SLOT}")
        cp = f.gep(_ptr(f, dp, "buf"), off)
        f.memset(cp, CT_SLOT)
        f.do(f"store i8 {CTF_ALLOCATED}, ptr {f.gep(cp, CT_FLAGS)}, align 1")
        seq = f.word(dp, CT_DESC["seq"], "i64", "")
        f.do(f"store i32 {f.ins(f'trunc i64 {seq} to i32')}, ptr {f.gep(cp, CT_SEQ)}, "
             "align 4")
        seq1 = f.ins(f"and i64 {f.ins(f'add i64 {seq}, 1')}, {M32}")
        f.set_word(dp, CT_DESC["seq"], seq1, "i64", "")
        f.set_word(dp, CT_DESC["count"], f.ins(f"add i64 {count}, 1"), "i64", "")
        zone = f.ins(f"or i64 {a.qid}, {f.ins(f'shl i64 {a.qdir}, 24')}")
        f.do(f"store i32 {f.ins(f'trunc i64 {zone} to i32')}, "
             f"ptr {f.gep(cp, NF_CONN_LAYOUT['zone'])}, align 4")
        f.do(f"store i32 {min(ALLOC_TIMEOUT, INT_MAX)}, "
             f"ptr {f.gep(cp, NF_CONN_LAYOUT['timeout'])}, align 4")
        t0 = NF_CONN_LAYOUT["tuplehash"] + NF_CONN_LAYOUT["tuple"]
        t1 = t0 + NF_CONN_LAYOUT["tuplehash_size"]
        l4, l6, done = f.label("a4"), f.label("a6"), f.label("made")
        f.cbr(a.v6, l6, l4)
        for lab, fam6 in ((l4, False), (l6, True)):
            f.at(lab)
            _put_tuple(f, a.tp, f.gep(cp, t0), fam6, a.l4, False)
            _put_tuple(f, a.tp, f.gep(cp, t1), fam6, a.l4, True)
            f.br(done)
        f.at(done)
        base = f.word(dp, CT_DESC["base"], "i64", "")
        f.do(f"ret i64 {f.ins(f'add i64 {base}, {off}')}")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                      "i64 %r4, i64 %r5) nounwind")
    return define


def _note_expiry_ir(f: Text, dp: str, t32: str) -> None:
    """``NfConntrack._note_expiry`` of a hashed entry's timeout ``t32`` (i32)."""
    e_at = f.gep(dp, 8 * CT_DESC["earliest"])
    e = f.ins(f"load i64, ptr {e_at}, align 8")
    live = f.word(dp, CT_DESC["live"], "i64", "")
    t64 = f.ins(f"zext i32 {t32} to i64")
    before = f.ins(f"icmp slt i64 {s32(f, f.ins(f'sub i64 {t64}, {e}'))}, 0")
    lower = f.ins(f"or i1 {f.ins(f'icmp ule i64 {live}, 1')}, {before}")
    f.do(f"store i64 {f.ins(f'select i1 {lower}, i64 {t64}, i64 {e}')}, ptr {e_at}, align 8")


def _insert_fn(kind: str) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """``bpf_ct_insert_entry``: confirmed and hashed (use 2), or freed and NULL when
        a tuple is tracked in the zone (``nf_conntrack_hash_check_insert``)."""
        f = Text()
        f.at("entry")
        dp = _desc(f)
        cp = _conn_ir(f, dp)
        flags = _load(f, cp, CT_FLAGS, "i8")
        ret_if(f, f.ins(f"icmp ne i64 {f.ins(f'and i64 {flags}, {CTF_IN_TABLE}')}, 0"), SLOW)
        stamp = _expiry_guard(f, dp)
        st_at = f.gep(cp, NF_CONN_LAYOUT["status"])
        status = f.ins(f"load i64, ptr {st_at}, align 8")
        conf = f.ins(f"and i64 {status}, {int(IpsStatus.CONFIRMED)}")
        to_at = f.gep(cp, NF_CONN_LAYOUT["timeout"])
        t = f.ins(f"load i32, ptr {to_at}, align 4")
        later = f.ins(f"add i32 {t}, {f.ins(f'trunc i64 {stamp} to i32')}")
        t = f.ins(f"select i1 {f.ins(f'icmp ne i64 {conf}, 0')}, i32 {t}, i32 {later}")
        f.do(f"store i32 {t}, ptr {to_at}, align 4")
        confirmed = f.ins(f"or i64 {status}, {int(IpsStatus.CONFIRMED)}")
        f.do(f"store i64 {confirmed}, ptr {st_at}, align 8")
        z = _load(f, cp, NF_CONN_LAYOUT["zone"], "i32")
        zid, zdir = f.ins(f"and i64 {z}, 65535"), f.ins(f"lshr i64 {z}, 24")
        exists = f.label("exists")
        keys = []
        for d in (0, 1):
            tp = f.gep(cp, NF_CONN_LAYOUT["tuplehash"] + d * NF_CONN_LAYOUT["tuplehash_size"]
                       + NF_CONN_LAYOUT["tuple"])
            words = [_load(f, tp, 8 * i, "i64") for i in range(5)]
            words[4] = f.ins(f"and i64 {words[4]}, {c64((1 << 56) - 1)}")
            keys.append(words)
            clear = f.label("clear")
            _find(f, dp, words, zid, zdir, f.label("taken"), clear, _zid(f, zid, zdir, str(d)))
            f.br(exists)
            f.at(clear)
        rel = f.ins(f"sub i64 %r1, {f.word(dp, CT_DESC['base'], 'i64', '')}")
        slot = f.ins(f"udiv i64 {rel}, {CT_SLOT}")
        for d in (0, 1):
            _append_ir(f, dp, keys[d], f.ins(f"add i64 {f.ins(f'shl i64 {slot}, 1')}, {d}"))
        hashed = f.ins(f"trunc i64 {f.ins(f'or i64 {flags}, {CTF_IN_TABLE}')} to i8")
        f.do(f"store i8 {hashed}, ptr {f.gep(cp, CT_FLAGS)}, align 1")
        live = f.word(dp, CT_DESC["live"], "i64", "")
        f.set_word(dp, CT_DESC["live"], f.ins(f"add i64 {live}, 1"), "i64", "")
        _note_expiry_ir(f, dp, t)
        f.do(f"store i32 2, ptr {cp}, align 4")  # the table's reference and the caller's
        f.do("ret i64 %r1")
        f.at(exists)
        # table.free(ct): the slot leaves the allocated ones, onto the free stack
        f.do(f"store i8 0, ptr {f.gep(cp, CT_FLAGS)}, align 1")
        rel2 = f.ins(f"sub i64 %r1, {f.word(dp, CT_DESC['base'], 'i64', '')}")
        slot2 = f.ins(f"trunc i64 {f.ins(f'udiv i64 {rel2}, {CT_SLOT}')} to i32")
        nfree = f.word(dp, CT_DESC["nfree"], "i64", "")
        f.put_index(_ptr(f, dp, "free"), nfree, slot2, "i32", 4)
        f.set_word(dp, CT_DESC["nfree"], f.ins(f"add i64 {nfree}, 1"), "i64", "")
        count = f.word(dp, CT_DESC["count"], "i64", "")
        f.set_word(dp, CT_DESC["count"], f.ins(f"sub i64 {count}, 1"), "i64", "")
        f.do("ret i64 0")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1) nounwind")
    return define


def _conn_ir(f: Text, dp: str) -> str:
    """``_conn``: a host pointer to the entry of the run's table ``%r1`` points at; SLOW
    for anything else (a peer's entry, a bad pointer: Python decides)."""
    off = f.ins(f"sub i64 %r1, {f.word(dp, CT_DESC['base'], 'i64', '')}")
    size = f.ins(f"mul i64 {f.word(dp, CT_DESC['nslots'], 'i64', '')}, {CT_SLOT}")
    ret_if(f, f.ins(f"icmp uge i64 {off}, {size}"), SLOW)
    ret_if(f, f.ins(f"icmp ne i64 {f.ins(f'and i64 {off}, {CT_SLOT - 1}')}, 0"), SLOW)
    cp = f.gep(f.ins(f"inttoptr i64 {f.word(dp, CT_DESC['buf'], 'i64', '')} to ptr"), off)
    flags = _load(f, cp, CT_FLAGS, "i8")
    ret_if(f, f.ins(f"icmp eq i64 {f.ins(f'and i64 {flags}, {CTF_ALLOCATED}')}, 0"), SLOW)
    return cp


def _release_fn(kind: str) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """nf_ct_put of an entry of the run's table that keeps a reference; else SLOW."""
        f = Text()
        f.at("entry")
        cp = _conn_ir(f, _desc(f))
        use = f.ins(f"load i32, ptr {cp}, align 4")
        ret_if(f, f.ins(f"icmp ult i32 {use}, 2"), SLOW)  # the last one: Python frees
        f.do(f"store i32 {f.ins(f'sub i32 {use}, 1')}, ptr {cp}, align 4")
        f.do("ret i64 0")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1) nounwind")
    return define


def _set_timeout_ir(f: Text, dp: str, cp: str, status: str) -> None:
    """``__nf_ct_set_timeout(ct, msecs_to_jiffies(r2))``, the table's earliest expiry
    lowered for a hashed entry (``_Timeout``); SLOW first when a confirmed entry needs
    the clock and it is not jiffies64."""
    ms = f.ins("and i64 %r2, 4294967295")
    step = 1000 // HZ
    j = f.ins(f"udiv i64 {f.ins(f'add i64 {ms}, {step - 1}')}, {step}")
    j = f.ins(f"select i1 {f.ins(f'icmp uge i64 {ms}, {1 << 31}')}, i64 {INT_MAX}, i64 {j}")
    j = f.ins(f"select i1 {f.ins(f'icmp ugt i64 {j}, {INT_MAX}')}, i64 {INT_MAX}, i64 {j}")
    confirmed = f.ins(f"icmp ne i64 {f.ins(f'and i64 {status}, {int(IpsStatus.CONFIRMED)}')}, 0")
    rel, absl, done = f.label("rel"), f.label("abs"), f.label("set")
    f.cbr(confirmed, absl, rel)
    f.at(absl)
    clock = f.word(dp, CT_DESC["clock"], "i64", "")
    ret_if(f, f.ins(f"icmp eq i64 {clock}, 0"), SLOW)
    t_abs = f.ins(f"add i64 {jiffies64_ir(f)}, {j}")
    abs_end = f.cur
    f.br(done)
    f.at(rel)
    f.br(done)
    f.at(done)
    t = f.ins(f"phi i64 [ {t_abs}, %{abs_end} ], [ {j}, %{rel} ]")
    t32 = f.ins(f"trunc i64 {t} to i32")
    f.do(f"store i32 {t32}, ptr {f.gep(cp, NF_CONN_LAYOUT['timeout'])}, align 4")
    flags = _load(f, cp, CT_FLAGS, "i8")
    hashed = f.ins(f"icmp ne i64 {f.ins(f'and i64 {flags}, {CTF_IN_TABLE}')}, 0")
    note, out = f.label("note"), f.label("noted")
    f.cbr(hashed, note, out)
    f.at(note)
    _note_expiry_ir(f, dp, t32)
    f.br(out)
    f.at(out)


def _timeout_fn(kind: str, change: bool) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """``bpf_ct_set_timeout`` (0) or ``bpf_ct_change_timeout`` (-EPERM for a fixed
        timeout, -ETIME for a dying entry, as u32)."""
        f = Text()
        f.at("entry")
        dp = _desc(f)
        cp = _conn_ir(f, dp)
        status = f.ins(f"load i64, ptr {f.gep(cp, NF_CONN_LAYOUT['status'])}, align 8")
        if change:
            fixed = f.ins(f"and i64 {status}, {int(IpsStatus.FIXED_TIMEOUT)}")
            ret_if(f, f.ins(f"icmp ne i64 {fixed}, 0"), -errno.EPERM & M32)
        _set_timeout_ir(f, dp, cp, status)
        if change:
            dying = f.ins(f"and i64 {status}, {int(IpsStatus.DYING)}")
            ret_if(f, f.ins(f"icmp ne i64 {dying}, 0"), -errno.ETIME & M32)
        f.do("ret i64 0")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2) nounwind")
    return define


def _status_fn(kind: str) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """``nf_ct_change_status_common``: 0 or -EBUSY (u32); bits only set."""
        f = Text()
        f.at("entry")
        cp = _conn_ir(f, _desc(f))
        at = f.gep(cp, NF_CONN_LAYOUT["status"])
        old = f.ins(f"load i64, ptr {at}, align 8")
        new = f.ins("and i64 %r2, 4294967295")
        d = f.ins(f"xor i64 {old}, {new}")
        fixed = int(IpsStatus.EXPECTED | IpsStatus.CONFIRMED | IpsStatus.DYING)
        busy = f.ins(f"icmp ne i64 {f.ins(f'and i64 {d}, {fixed}')}, 0")
        for bit in (int(IpsStatus.SEEN_REPLY), int(IpsStatus.ASSURED)):
            cleared = f.ins(f"and i64 {f.ins(f'and i64 {d}, {bit}')}, "
                            f"{f.ins(f'xor i64 {new}, {bit}')}")
            busy = f.ins(f"or i1 {busy}, {f.ins(f'icmp ne i64 {cleared}, 0')}")
        ret_if(f, busy, -errno.EBUSY & M32)
        on = f.ins(f"and i64 {new}, {~IPS_UNCHANGEABLE_MASK & ((1 << IPS_MAX_BIT) - 1)}")
        f.do(f"store i64 {f.ins(f'or i64 {old}, {on}')}, ptr {at}, align 8")
        f.do("ret i64 0")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2) nounwind")
    return define


ct_lookup = _entry(_lookup)
ct_alloc = _entry(_alloc)
register_kfunc("bpf_xdp_ct_lookup", ct_lookup,
               HelperNative("ct_lookup", 5, _lookup_fn("ct_lookup"), ("translate",),
                            serial=True))
register_kfunc("bpf_xdp_ct_alloc", ct_alloc,
               HelperNative("ct_alloc", 5, _alloc_fn("ct_alloc"), ("translate",),
                            serial=True))
register_kfunc("bpf_ct_insert_entry", ct_insert_entry,
               HelperNative("ct_insert", 1, _insert_fn("ct_insert"), serial=True))
register_kfunc("bpf_ct_release", ct_release,
               HelperNative("ct_release", 1, _release_fn("ct_release"), serial=True))
register_kfunc("bpf_ct_set_timeout", ct_set_timeout,
               HelperNative("ct_set_timeout", 2, _timeout_fn("ct_set_timeout", False),
                            serial=True))
register_kfunc("bpf_ct_change_timeout", ct_change_timeout,
               HelperNative("ct_change_timeout", 2, _timeout_fn("ct_change_timeout", True),
                            serial=True))
for _name in ("bpf_ct_set_status", "bpf_ct_change_status"):
    _kind = _name.removeprefix("bpf_")
    register_kfunc(_name, ct_change_status, HelperNative(_kind, 2, _status_fn(_kind), serial=True))

def skb_ct_unreachable(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_skb_ct_lookup``/``_alloc`` (the same set, for TC): their context argument is
    a trusted ``struct __sk_buff``, which an XDP program never holds - the verifier takes
    a call only in a global function whose ``__arg_trusted`` argument its caller cannot
    pass but as NULL, which the callee must test first - so no run reaches one."""
    raise HelperFault("bpf_skb_ct_lookup/bpf_skb_ct_alloc reached without a struct __sk_buff")


# The kfuncs by name (bound as private helpers, like the RX metadata kfuncs).
CT_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_skb_ct_lookup": skb_ct_unreachable,
    "bpf_skb_ct_alloc": skb_ct_unreachable,
    "bpf_xdp_ct_lookup": ct_lookup,
    "bpf_xdp_ct_alloc": ct_alloc,
    "bpf_ct_insert_entry": ct_insert_entry,
    "bpf_ct_release": ct_release,
    "bpf_ct_set_timeout": ct_set_timeout,
    "bpf_ct_change_timeout": ct_change_timeout,
    "bpf_ct_set_status": ct_change_status,
    "bpf_ct_change_status": ct_change_status,
    "bpf_ct_set_nat_info": ct_set_nat_info,
}
