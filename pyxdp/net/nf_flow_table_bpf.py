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
"""

from __future__ import annotations

import errno
from collections.abc import Callable

from pyxdp.net.fib import dev_net
from pyxdp.net.nf_conntrack import AF_INET, AF_INET6
from pyxdp.net.nf_flow_table import NfFlowtable
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.memory import Region

__all__ = ["FLOWTABLE_KFUNCS", "NF_BPF_FLOWTABLE_OPTS_SZ"]

NF_BPF_FLOWTABLE_OPTS_SZ = 4
FIB_LOOKUP_SIZE = 64  # sizeof(struct bpf_fib_lookup)
M32 = 0xFFFF_FFFF


def _map(vm: Interpreter, table: NfFlowtable, ct_base: int, ct_buf: bytearray) -> None:
    """Map the table's flows and the conntrack table their ``ct`` points into (once)."""
    have = {r.base for r in vm.mem.regions}
    if table.base not in have:
        vm.mem.add(Region("nf_flowtable flows", table.base, table.buf, writable=False))
    if ct_base not in have:
        vm.mem.add(Region("nf_conntrack table", ct_base, ct_buf, writable=False))


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
    _map(vm, table, flow.ct.table.base, flow.ct.table.buf)
    return flow.tuple_addr(direction)


# The kfunc by name (bound as a private helper, like the conntrack kfuncs).
FLOWTABLE_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_xdp_flow_lookup": xdp_flow_lookup,
}
