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
program's own (:func:`pyxdp.net.xdp_metadata.bind_kfuncs`).
"""

from __future__ import annotations

import errno
from collections.abc import Callable

from pyxdp.errors import HelperFault
from pyxdp.net.fib import dev_net
from pyxdp.net.nf_conntrack import (
    AF_INET,
    AF_INET6,
    CT_SLOT,
    DEFAULT_ZONE,
    HZ,
    IP_CT_DIR_ORIGINAL,
    IPPROTO_TCP,
    IPPROTO_UDP,
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
    ct = table.conns.get(off // CT_SLOT) if table is not None and off % CT_SLOT == 0 else None
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


# The kfuncs by name (bound as private helpers, like the RX metadata kfuncs).
CT_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_xdp_ct_lookup": _entry(_lookup),
    "bpf_xdp_ct_alloc": _entry(_alloc),
    "bpf_ct_insert_entry": ct_insert_entry,
    "bpf_ct_release": ct_release,
    "bpf_ct_set_timeout": ct_set_timeout,
    "bpf_ct_change_timeout": ct_change_timeout,
    "bpf_ct_set_status": ct_change_status,
    "bpf_ct_change_status": ct_change_status,
    "bpf_ct_set_nat_info": ct_set_nat_info,
}
