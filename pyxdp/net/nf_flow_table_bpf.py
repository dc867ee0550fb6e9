"""The flowtable kfunc of ``net/netfilter/nf_flow_table_bpf.c``.

``bpf_xdp_flow_lookup(ctx, fib_tuple, opts, opts_len)`` (``KF_TRUSTED_ARGS |
KF_RET_NULL``, XDP) over the flowtables of the run's namespace
(:class:`pyxdp.net.nf_flow_table.NfFlowtables`, ``RunContext.fib.flowtables``),
in Linux 6.18's order:

* ``opts_len`` not 4 (``NF_BPF_FLOWTABLE_OPTS_SZ``): ``opts->error`` -EINVAL;
* ``fib_tuple->family`` neither ``AF_INET`` nor ``AF_INET6``: -EAFNOSUPPORT;
* no flowtable bound to the receiving device (``nf_flowtable_by_dev(xdp->rxq->dev)``),
  or no live flow with the tuple: -ENOENT.

The tuple looked up is ``fib_tuple``'s addresses (4 or 16 bytes), ``sport``,
``dport``, ``ifindex`` (the flow's input ifindex), ``family`` and
``l4_protocol``, without encapsulation: a flow that arrives inside a VLAN or
PPPoE tag is never found. A found flow's timeout is refreshed
(``flow_offload_refresh``) and ``opts->error`` left alone; the kfunc returns
the address of the matching ``struct flow_offload_tuple_rhash``
(``flow->tuplehash[dir]``), whose table is mapped read-only into the run (and
the conntrack table its ``ct`` points into). It takes no reference: the
pointer is the verifier's plain ``PTR_TO_BTF_ID``. pyxdp's engines call it as a
helper of the program's own (:func:`pyxdp.net.xdp_metadata.bind_kfuncs`).

On the JIT a native twin answers once the Python kfunc has mapped the
namespace's :class:`~pyxdp.net.nf_flow_table.FlowIndex` (at
:data:`~pyxdp.net.nf_flow_table.FT_INDEX`) into the run, that is from a batch's
second lookup on: it finds the receiving device's table and probes the index
with the same hash, checks the flow's ``NF_FLOW_TEARDOWN`` and its entry's
``IPS_DYING`` in their buffers, refreshes the timeout from ``CLOCK_BOOTTIME``
as :func:`pyxdp.net.nf_conntrack.jiffies64` reads it, and writes the errors;
anything it cannot translate is SLOW (the Python kfunc decides).
"""

from __future__ import annotations

import errno
from collections.abc import Callable

from pyxdp.net.fib import dev_net
from pyxdp.net.nf_conntrack import (
    AF_INET,
    AF_INET6,
    NF_CONN_LAYOUT,
    IpsStatus,
    NfConntrack,
)
from pyxdp.net.nf_flow_table import (
    FLOW_OFFLOAD_LAYOUT,
    FT_INDEX,
    FT_SLOT,
    NF_FLOW_TIMEOUT,
    ROUND,
    FlowFlag,
    FlowIndex,
    NfFlowtables,
)
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.jiffies import HZ
from pyxdp.vm.jit.abi import SLOW, Natives
from pyxdp.vm.jit.ir import Text, c64, ret_if
from pyxdp.vm.jit.natives import HelperNative, register_kfunc, xdp_guard
from pyxdp.vm.memory import Region

__all__ = ["FLOWTABLE_KFUNCS", "NF_BPF_FLOWTABLE_OPTS_SZ"]

NF_BPF_FLOWTABLE_OPTS_SZ = 4
FIB_LOOKUP_SIZE = 64  # sizeof(struct bpf_fib_lookup)
M32 = 0xFFFF_FFFF


def _map(vm: Interpreter, tables: NfFlowtables, cts: NfConntrack) -> None:
    """Map the namespace's flows, its index (where the native twin finds it) and the
    conntrack table a flow's ``ct`` points into, once; another namespace's index
    leaves (a run sees one namespace)."""
    index = tables.index.buf
    for r in list(vm.mem.regions):
        if r.base == FT_INDEX and r.buf is not index:
            vm.mem.remove(r)
    have = {r.base for r in vm.mem.regions}
    if tables.base not in have:
        vm.mem.add(Region("nf_flowtable flows", tables.base, tables.buf, writable=False))
    if FT_INDEX not in have or not any(r.buf is index for r in vm.mem.regions):
        vm.mem.add(Region("nf_flowtable index", FT_INDEX, index, writable=False))
    if cts.base not in have:
        vm.mem.add(Region("nf_conntrack table", cts.base, cts.buf, writable=False))


def _key(raw: bytes) -> bytes | int:
    """The ``struct flow_offload_tuple`` bytes the lookup compares, from a ``struct
    bpf_fib_lookup``; -EAFNOSUPPORT for another family."""
    family = raw[0]
    if family == AF_INET:
        src, dst = raw[16:20].ljust(16, b"\0"), raw[32:36].ljust(16, b"\0")
    elif family == AF_INET6:
        src, dst = raw[16:32], raw[32:48]
    else:
        return -errno.EAFNOSUPPORT
    # src, dst, src_port, dst_port (network order as given), iifidx, l3proto, l4proto,
    # encap[2] (none)
    return src + dst + raw[2:6] + raw[8:12] + bytes((family, raw[1])) + bytes(8)


def xdp_flow_lookup(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_xdp_flow_lookup``: the tuple's address, or NULL with ``opts->error`` set."""
    fib, ifindex = dev_net(vm.context, r1, "bpf_xdp_flow_lookup")
    # mapped whatever the answer, so that the native twin answers from now on
    _map(vm, fib.flowtables, fib.conntrack)

    def fail(err: int) -> int:
        vm.mem.store(r3, 4, err & M32)
        return 0

    if r4 & M32 != NF_BPF_FLOWTABLE_OPTS_SZ:
        return fail(-errno.EINVAL)
    key = _key(vm.mem.read(r2, FIB_LOOKUP_SIZE))
    if isinstance(key, int):
        return fail(key)
    table = fib.flowtables.by_dev(ifindex)
    got = table.lookup_key(key) if table is not None else None
    if table is None or got is None:
        return fail(-errno.ENOENT)
    flow, direction = got
    table.refresh(flow)
    _map(vm, fib.flowtables, flow.ct.table)  # an entry of another namespace's table
    return flow.tuple_addr(direction)


# -- the native twin ------------------------------------------------------------------
_L = FLOW_OFFLOAD_LAYOUT
CLOCK_BOOTTIME = 7
M64 = 0xFFFF_FFFF_FFFF_FFFF


def _fail(f: Text, opts: str, err: int) -> None:
    f.do(f"store i32 {-err}, ptr {opts}, align 1")
    f.do("ret i64 0")


def _lookup_fn(natives: Natives) -> str:
    """``bpf_xdp_flow_lookup``'s native twin (see the module docstring)."""
    f = Text()
    f.at("entry")
    xdp_guard(f, natives.ctx_base, False)
    opts = f.ins("call ptr @translate(ptr %ctx, i64 %r3, i64 4, i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {opts}, null"), SLOW)
    fib = f.ins("call ptr @translate(ptr %ctx, i64 %r2, i64 64, i1 false)")
    ret_if(f, f.ins(f"icmp eq ptr {fib}, null"), SLOW)
    idx = f.ins(f"call ptr @translate(ptr %ctx, i64 {c64(FT_INDEX)}, i64 {FlowIndex.SIZE}, "
                "i1 false)")
    ret_if(f, f.ins(f"icmp eq ptr {idx}, null"), SLOW)
    f.cset("%ctx", "stack_dirty", "-1")  # opts is written below (translate only reads)
    einval, go = f.label("einval"), f.label("sz")
    f.cbr(f.ins(f"icmp ne i64 {f.ins('and i64 %r4, 4294967295')}, 4"), einval, go)
    f.at(einval)
    _fail(f, opts, errno.EINVAL)
    f.at(go)

    def ld(ty: str, off: int) -> str:
        v = f.ins(f"load {ty}, ptr {f.gep(fib, off)}, align 1")
        return v if ty == "i64" else f.ins(f"zext {ty} {v} to i64")

    fam = ld("i8", 0)
    is4 = f.ins(f"icmp eq i64 {fam}, {AF_INET}")
    is6 = f.ins(f"icmp eq i64 {fam}, {AF_INET6}")
    noaf, known = f.label("noaf"), f.label("af")
    f.cbr(f.ins(f"or i1 {is4}, {is6}"), known, noaf)
    f.at(noaf)
    _fail(f, opts, errno.EAFNOSUPPORT)
    f.at(known)
    # the key's words, as nf_flow_table.key_words reads a tuple's first 56 bytes
    words = [f.ins(f"select i1 {is4}, i64 {ld('i32', 16)}, i64 {ld('i64', 16)}"),
             f.ins(f"select i1 {is4}, i64 0, i64 {ld('i64', 24)}"),
             f.ins(f"select i1 {is4}, i64 {ld('i32', 32)}, i64 {ld('i64', 32)}"),
             f.ins(f"select i1 {is4}, i64 0, i64 {ld('i64', 40)}"),
             f.ins(f"or i64 {ld('i32', 2)}, {f.ins('shl i64 ' + ld('i32', 8) + ', 32')}"),
             f.ins(f"or i64 {fam}, {f.ins('shl i64 ' + ld('i8', 1) + ', 8')}"),
             "0"]
    flows = f.word(idx, 0, "i64", "")
    mask = f.word(idx, 1, "i64", "")
    ndev = f.word(idx, 2, "i64", "")
    ifindex = f.word(f.cget("%ctx", "ctx_values", "ptr"), 3, "i64", "")
    # nf_flowtable_by_dev: the first binding of the receiving device
    f.br("dev")
    f.at("dev")
    f.do("%di = phi i64 [ 0, %" + known + " ], [ %di1, %dnext ]")
    f.cbr(f.ins(f"icmp ult i64 %di, {ndev}"), "dbody", "enoent")
    f.at("dbody")
    ent = f.gep(idx, f.ins(f"add i64 {FlowIndex.DEVS}, {f.ins('shl i64 %di, 4')}"))
    f.cbr(f.ins(f"icmp eq i64 {f.word(ent, 0, 'i64', '')}, {ifindex}"), "dfound", "dnext")
    f.at("dnext")
    f.do("%di1 = add i64 %di, 1")
    f.br("dev")
    f.at("dfound")
    tag = f.word(ent, 1, "i64", "")
    h = tag
    for w in words:
        h = f.ins(f"mul i64 {f.ins(f'xor i64 {h}, {w}')}, {c64(ROUND)}")
    h = f.ins(f"xor i64 {h}, {f.ins(f'lshr i64 {h}, 29')}")
    start = f.ins(f"and i64 {h}, {mask}")
    f.br("probe")
    f.at("probe")
    f.do(f"%bi = phi i64 [ {start}, %dfound ], [ %bi1, %pnext ]")
    b = f.gep(idx, f.ins(f"add i64 {FlowIndex.BUCKETS}, {f.ins('shl i64 %bi, 6')}"))
    v = f.word(b, 7, "i64", "")
    f.cbr(f.ins(f"icmp eq i64 {v}, 0"), "enoent", "pcmp")
    f.at("pcmp")
    same = f.ins(f"icmp eq i64 {f.ins(f'lshr i64 {v}, 32')}, {tag}")
    for k, w in enumerate(words):
        have = f.word(b, k, "i64", "")
        same = f.ins(f"and i1 {same}, {f.ins(f'icmp eq i64 {have}, {w}')}")
    f.cbr(same, "hit", "pnext")
    f.at("pnext")
    f.do(f"%bi1 = and i64 {f.ins('add i64 %bi, 1')}, {mask}")
    f.br("probe")
    f.at("hit")
    off = f.ins(f"sub i64 {f.ins(f'and i64 {v}, 4294967295')}, 1")
    slot = f.ins(f"and i64 {off}, {c64(M64 & ~(FT_SLOT - 1))}")
    fl = f.ins(f"call ptr @translate(ptr %ctx, i64 {f.ins(f'add i64 {flows}, {slot}')}, "
               f"i64 {FT_SLOT}, i1 false)")
    ret_if(f, f.ins(f"icmp eq ptr {fl}, null"), SLOW)
    flags = f.ins(f"load i64, ptr {f.gep(fl, _L['flags'])}, align 1")
    torn = f.ins(f"icmp ne i64 {f.ins(f'and i64 {flags}, {int(FlowFlag.TEARDOWN)}')}, 0")
    ct = f.ins(f"load i64, ptr {f.gep(fl, _L['ct'])}, align 1")
    status_at = f.ins(f"add i64 {ct}, {NF_CONN_LAYOUT['status']}")
    st = f.ins(f"call ptr @translate(ptr %ctx, i64 {status_at}, i64 8, i1 false)")
    ret_if(f, f.ins(f"icmp eq ptr {st}, null"), SLOW)
    status = f.ins(f"load i64, ptr {st}, align 1")
    dying = f.ins(f"icmp ne i64 {f.ins(f'and i64 {status}, {int(IpsStatus.DYING)}')}, 0")
    f.cbr(f.ins(f"or i1 {torn}, {dying}"), "enoent", "live")
    f.at("live")
    # flow_offload_refresh: jiffies from CLOCK_BOOTTIME (HZ 250: 4 ms each)
    ts = f.ins("alloca { i64, i64 }")
    f.do(f"call i32 @clock_gettime(i32 {CLOCK_BOOTTIME}, ptr {ts})")
    sec = f.ins(f"load i64, ptr {ts}, align 8")
    nsec = f.ins(f"load i64, ptr {f.gep(ts, 8)}, align 8")
    now = f.ins(f"add i64 {f.ins(f'mul i64 {sec}, {HZ}')}, "
                f"{f.ins(f'udiv i64 {nsec}, {1_000_000_000 // HZ}')}")
    fresh = f.ins(f"trunc i64 {f.ins(f'add i64 {now}, {NF_FLOW_TIMEOUT}')} to i32")
    tp = f.gep(fl, _L["timeout"])
    old = f.ins(f"load i32, ptr {tp}, align 1")
    gain = f.ins(f"icmp ugt i32 {f.ins(f'sub i32 {fresh}, {old}')}, {HZ}")
    f.cbr(gain, "move", "done")
    f.at("move")
    f.do(f"store i32 {fresh}, ptr {tp}, align 1")
    f.br("done")
    f.at("done")
    f.do(f"ret i64 {f.ins(f'add i64 {flows}, {off}')}")
    f.at("enoent")
    _fail(f, opts, errno.ENOENT)
    return f.text("define internal i64 @xdp_flow_lookup(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                  "i64 %r4) nounwind")


# The kfunc by name (bound as a private helper, like the conntrack kfuncs).
FLOWTABLE_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_xdp_flow_lookup": xdp_flow_lookup,
}
register_kfunc("bpf_xdp_flow_lookup", xdp_flow_lookup,
               HelperNative("xdp_flow_lookup", 4, _lookup_fn, ("translate",)))
