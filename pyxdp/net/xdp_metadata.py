"""The XDP RX metadata kfuncs of ``net/core/xdp.c`` and a device's ``struct xdp_metadata_ops``.

``bpf_xdp_metadata_rx_timestamp(ctx, &ts)``, ``bpf_xdp_metadata_rx_hash(ctx,
&hash, &rss_type)`` and ``bpf_xdp_metadata_rx_vlan_tag(ctx, &proto, &tci)``
ask the driver what its receive descriptor says about the frame. As in
Linux 6.18:

* only a *device-bound* program may call them (``prog_ifindex`` and
  ``BPF_F_XDP_DEV_BOUND_ONLY`` at load; otherwise the load fails with
  "metadata kfuncs require device-bound program"), and BPF_PROG_TEST_RUN
  refuses a device-bound program (EINVAL);
* at load each call is bound to the device's op (``bpf_dev_bound_resolve_kfunc``);
  a device without that op leaves the default, which returns -EOPNOTSUPP;
* an op returns -ENODATA when it has no value for this frame.

A pyxdp device supplies them through ``NetDevice.xdp_metadata_ops``: an
:class:`XdpMetadataOps` whose callables get the frame's
:class:`~pyxdp.net.xdp.XdpBuff` and return the values (``None``: no data
for this frame), so values can be set per device and per frame.

pyxdp's engines call a bound kfunc as a helper of the program's own: the
loader rewrites each ``call`` of a kfunc (``src_reg`` 2) into a call of a
helper id of the range below, private to that program.
"""

from __future__ import annotations

import dataclasses
import errno
from collections.abc import Callable
from dataclasses import dataclass

from pyxdp.asm import opcodes as op
from pyxdp.btf.btf import Btf
from pyxdp.errors import HelperFault, InvalidProgram, NotSupportedError
from pyxdp.net.bpf_fs_kfuncs import FS_KFUNCS
from pyxdp.net.filter import FILTER_KFUNCS, XDP_HELPERS
from pyxdp.net.nf_conntrack_bpf import CT_KFUNCS
from pyxdp.net.nf_flow_table_bpf import FLOWTABLE_KFUNCS
from pyxdp.net.xdp import CTX_BASE, XdpBuff
from pyxdp.net.xdp_dynptr import CRYPTO_KFUNCS, DYNPTR_KFUNCS
from pyxdp.net.xdp_kern_ctx import KERN_CTX_KFUNCS
from pyxdp.net.xfrm_state_bpf import XFRM_KFUNCS
from pyxdp.spec import BPF_F_XDP_DEV_BOUND_ONLY, ProgramSpec
from pyxdp.verifier.helpers import SYSCALL_MODELLED
from pyxdp.vm.bpf_exception import EXCEPTION_KFUNCS
from pyxdp.vm.bpf_iter import ITER_KFUNCS
from pyxdp.vm.bpf_key import KEY_KFUNCS
from pyxdp.vm.bpf_list import LIST_KFUNCS
from pyxdp.vm.bpf_rbtree import RBTREE_KFUNCS
from pyxdp.vm.bpf_task_work import TASK_WORK_KFUNCS
from pyxdp.vm.bpf_wq import WQ_KFUNCS
from pyxdp.vm.helpers import RunContext, neg
from pyxdp.vm.interpreter import Helper, HelperTable, Interpreter
from pyxdp.vm.map_iter import MAP_ITER_KFUNCS
from pyxdp.vm.memalloc import OBJ_KFUNCS, make_obj_new
from pyxdp.vm.memalloc_percpu import PERCPU_OBJ_KFUNCS, make_percpu_obj_new
from pyxdp.vm.rcu_preempt import RCU_PREEMPT_KFUNCS
from pyxdp.vm.rqspinlock import RES_SPIN_LOCK_KFUNCS
from pyxdp.vm.slab_common import SLAB_KFUNCS
from pyxdp.vm.stream import STREAM_KFUNCS
from pyxdp.vm.string_kfuncs import STRING_KFUNCS
from pyxdp.vm.task_kfuncs import TASK_KFUNCS
from pyxdp.vm.test_run_kfuncs import TEST_RUN_KFUNCS

__all__ = ["KFUNC_HELPER_BASE", "METADATA_KFUNCS", "XdpMetadataOps", "bind_kfuncs"]

# Helper ids standing for a program's kfunc calls: above every Linux helper and
# pyxdp's extensions, below the JIT's helper table limit (1 << 16).
KFUNC_HELPER_BASE = 0x7F00

TimestampOp = Callable[[XdpBuff], int | None]
PairOp = Callable[[XdpBuff], tuple[int, int] | None]


@dataclass(frozen=True)
class XdpMetadataOps:
    """``struct xdp_metadata_ops``: what a driver can tell about a received frame.

    ``rx_timestamp`` gives nanoseconds; ``rx_hash`` ``(hash, enum xdp_rss_hash_type)``;
    ``rx_vlan_tag`` ``(vlan_proto as on the wire, tci)``. An absent op makes the
    kfunc return -EOPNOTSUPP, a ``None`` result -ENODATA.
    """

    rx_timestamp: TimestampOp | None = None
    rx_hash: PairOp | None = None
    rx_vlan_tag: PairOp | None = None


def _xdp(vm: Interpreter, r1: int) -> XdpBuff:
    ctx = vm.context
    if not isinstance(ctx, RunContext) or ctx.xdp is None:
        raise HelperFault("XDP metadata kfunc called outside an XDP run")
    if r1 != CTX_BASE:
        raise HelperFault(f"first argument {r1:#x} is not the xdp_md context")
    xdp: XdpBuff = ctx.xdp
    return xdp


def _timestamp(fn: TimestampOp | None) -> Callable[..., int]:
    def call(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        xdp = _xdp(vm, r1)
        if fn is None:
            return neg(errno.EOPNOTSUPP)
        ts = fn(xdp)
        if ts is None:
            return neg(errno.ENODATA)
        vm.mem.store(r2, 8, ts & 0xFFFF_FFFF_FFFF_FFFF)
        return 0
    return call


def _pair(fn: PairOp | None, sizes: tuple[int, int], be_first: bool) -> Callable[..., int]:
    def call(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        xdp = _xdp(vm, r1)
        if fn is None:
            return neg(errno.EOPNOTSUPP)
        got = fn(xdp)
        if got is None:
            return neg(errno.ENODATA)
        a, b = got
        if be_first:  # __be16 vlan_proto: stored in network order
            a = int.from_bytes((a & 0xFFFF).to_bytes(2, "big"), "little")
        vm.mem.store(r2, sizes[0], a & ((1 << (8 * sizes[0])) - 1))
        vm.mem.store(r3, sizes[1], b & ((1 << (8 * sizes[1])) - 1))
        return 0
    return call


# The kfuncs by name, each with how to build its helper from a device's ops.
METADATA_KFUNCS: dict[str, Callable[[XdpMetadataOps], Callable[..., int]]] = {
    "bpf_xdp_metadata_rx_timestamp": lambda ops: _timestamp(ops.rx_timestamp),
    "bpf_xdp_metadata_rx_hash": lambda ops: _pair(ops.rx_hash, (4, 4), False),
    "bpf_xdp_metadata_rx_vlan_tag": lambda ops: _pair(ops.rx_vlan_tag, (2, 2), True),
}


def bind_kfuncs(spec: ProgramSpec, ops: XdpMetadataOps | None, btf: Btf | None = None,
                nr_cpus: int = 1) -> tuple[ProgramSpec, HelperTable]:
    """``spec`` with its kfunc calls turned into calls of helpers of its own, and the
    helper table to run it with; ``ops`` are the bound device's (None: none), ``btf``
    the program's (``bpf_obj_new`` allocates its structs), ``nr_cpus`` the CPUs it runs
    on (``bpf_percpu_obj_new`` makes a copy for each)."""
    # a syscall program gets the helpers pyxdp gives syscall programs (as XdpProg does)
    helpers = XDP_HELPERS.copy()
    if spec.prog_type == "syscall":
        helpers = HelperTable({fid: helpers[fid] for fid in helpers if fid in SYSCALL_MODELLED})
    insns = list(spec.insns)
    ids: dict[str, int] = {}
    bound = bool(spec.ifindex and spec.flags & BPF_F_XDP_DEV_BOUND_ONLY)
    # Each subsystem's kfuncs, as the kernel's BTF_ID sets register them per program type.
    plain_tables = (DYNPTR_KFUNCS, CT_KFUNCS, ITER_KFUNCS, FILTER_KFUNCS, XFRM_KFUNCS,
                    FLOWTABLE_KFUNCS,
                    KERN_CTX_KFUNCS, STRING_KFUNCS, RCU_PREEMPT_KFUNCS, WQ_KFUNCS,
                    OBJ_KFUNCS, LIST_KFUNCS, RBTREE_KFUNCS, PERCPU_OBJ_KFUNCS,
                    RES_SPIN_LOCK_KFUNCS, EXCEPTION_KFUNCS, MAP_ITER_KFUNCS,
                    TEST_RUN_KFUNCS, TASK_KFUNCS, KEY_KFUNCS, SLAB_KFUNCS, FS_KFUNCS,
                    STREAM_KFUNCS, TASK_WORK_KFUNCS, CRYPTO_KFUNCS)
    for k in spec.kfuncs:
        make = METADATA_KFUNCS.get(k.name)
        plain = next((t[k.name] for t in plain_tables if k.name in t), None)
        if k.name == "bpf_obj_new_impl":  # per program: the sizes of its BTF's structs
            plain = make_obj_new(btf)
        elif k.name == "bpf_percpu_obj_new_impl":
            plain = make_percpu_obj_new(btf, nr_cpus)
        if make is None and plain is None:
            raise NotSupportedError(f"program {spec.name!r} calls kfunc {k.name!r} (pc "
                                    f"{k.pc}), which pyxdp's engines do not provide")
        if make is not None and not bound:
            raise InvalidProgram(f"{spec.name}: metadata kfuncs require device-bound program "
                                 f"({k.name} at pc {k.pc})", pc=k.pc, rule="kfunc")
        hid = ids.get(k.name)
        if hid is None:
            hid = ids[k.name] = KFUNC_HELPER_BASE + len(ids)
            fn = make(ops or XdpMetadataOps()) if make is not None else plain
            assert fn is not None
            helpers[hid] = Helper(hid, k.name, fn)
        insns[k.pc] = dataclasses.replace(insns[k.pc], src=int(op.CallSrc.BPF_HELPER_CALL),
                                          imm=hid, off=0)
    return dataclasses.replace(spec, insns=tuple(insns), kfuncs=()), helpers
