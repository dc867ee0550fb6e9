"""BPF_PROG_TEST_RUN for XDP: ``bpf_prog_test_run_xdp`` of ``net/bpf/test_run.c``
(and for SEC("syscall") programs, ``bpf_prog_test_run_syscall``: see
:func:`bpf_prog_test_run_syscall`).

The kernel's rules (Linux 6.18), checked in the kernel's order and with its
errnos: the optional ``xdp_md`` context (the first ``ctx.data`` bytes of the
input are metadata, at most 216 - 256 bytes of headroom less a ``struct
xdp_frame`` - and a multiple of 4; ``data_meta`` and ``egress_ifindex`` must
be 0, bytes past the 24-byte struct must be zero; ``data_end``, metadata
included, may be below the input size: it is the linear part's length and the
rest of the input goes into frags, even for a program without frags support,
and down to no packet byte at all; a zeroed context, as ``ctx_out`` alone
gives, means a linear part of 0), inputs shorter than an Ethernet header
(metadata aside) refused, 256 bytes of headroom (less the metadata), 320 of
tailroom, the linear part capped at ``4096 - headroom - tailroom`` bytes and
the rest of the input in page frags, the buffer *not* reset between
repetitions, and
the output copy with its ENOSPC rule. Live-frames mode belongs to the
datapath and is not offered here.
"""

from __future__ import annotations

import dataclasses
import errno
import struct
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from pyxdp.asm.insn import Instruction
from pyxdp.backend import TestRunResult
from pyxdp.errors import KernelError, ProgramFault, TestRunTruncated
from pyxdp.net.prog import XdpProg
from pyxdp.net.xdp import (
    ETH_HLEN,
    MAX_SKB_FRAGS,
    PAGE_SIZE,
    SKB_SHARED_INFO_SIZE,
    XDP_FRAME_SIZE,
    XDP_PACKET_HEADROOM,
    RxQueue,
    XdpBuff,
)
from pyxdp.smp import current_cpu
from pyxdp.uapi.bpf import BpfAttachType, XdpAction
from pyxdp.vm.helpers import RunContext, TraceLog

if TYPE_CHECKING:
    from pyxdp.net.fib import Fib
    from pyxdp.net.xdp_metadata import XdpMetadataOps
    from pyxdp.vm.bpf_task_work import TaskWorkQueue

__all__ = ["NetdevInfo", "bpf_prog_test_run_syscall", "bpf_prog_test_run_xdp"]

_XDP_MD = struct.Struct("<6I")
XDP_MD_SIZE = _XDP_MD.size


class NetdevInfo(NamedTuple):
    """What test_run needs to know of a device named by ``ingress_ifindex`` (a named
    tuple: a frozen dataclass compiles six methods from source when its class is made,
    which every first test_run would pay)."""

    ifindex: int
    name: str = ""
    real_num_rx_queues: int = 1
    # struct xdp_metadata_ops (pyxdp.net.xdp_metadata.XdpMetadataOps), for device-bound
    # programs' metadata kfuncs; None: the device has none.
    xdp_metadata_ops: XdpMetadataOps | None = None


_FIB_LOCK = threading.Lock()


class _Namespace:
    """``TestRunEnv.fib``: the namespace, made on its first read when none was given (the
    routing model loads with it, not with every test run); setting it replaces it."""

    @overload
    def __get__(self, env: None, owner: Any = None) -> None: ...
    @overload
    def __get__(self, env: TestRunEnv, owner: Any = None) -> Fib: ...

    def __get__(self, env: TestRunEnv | None, owner: Any = None) -> Fib | None:
        if env is None:
            return None  # the dataclass's default: none given
        fib: Fib | None = env.__dict__.get("_fib")
        if fib is None:
            from pyxdp.net.fib import Fib
            with _FIB_LOCK:  # two first readers get the same namespace
                fib = env.__dict__.get("_fib")
                if fib is None:
                    fib = env.__dict__["_fib"] = Fib()
        return fib

    def __set__(self, env: TestRunEnv, fib: Fib | None) -> None:
        env.__dict__["_fib"] = fib


@dataclass
class TestRunEnv:
    """The surroundings of a userspace test_run: devices, CPU, trace log."""

    __test__ = False

    netdevs: Mapping[int, NetdevInfo] = field(
        default_factory=lambda: {1: NetdevInfo(1, "lo", 1)})
    # The CPU the program runs on; None: the caller's, as Linux's BPF_PROG_TEST_RUN runs
    # it where the syscall runs (bpf_test_run: migrate_disable(), no CPU chosen for XDP).
    cpu: int | None = 0
    trace: TraceLog = field(default_factory=TraceLog)
    # Devices, routes and neighbours for bpf_fib_lookup / bpf_check_mtu (the network
    # namespace; None: a loopback-only one, made when first read).
    fib: _Namespace = _Namespace()

    def run_context(self, cpu: int) -> RunContext:
        """A run's context in this environment: its namespace is this one's, the one
        made for it if a helper needs one first."""
        return RunContext(cpu=cpu, trace=self.trace, fib=self.__dict__.get("_fib"),
                          net_of=self)


def _task_work() -> TaskWorkQueue | None:
    """The process's task work queue, if its module is loaded (the task_work kfuncs load
    it: before them nothing can have been scheduled)."""
    mod = sys.modules.get("pyxdp.vm.bpf_task_work")
    return None if mod is None else mod.TASK_WORK


def _run_cpu(env: TestRunEnv) -> int:
    return current_cpu() if env.cpu is None else env.cpu


def _fail(err: int, detail: str) -> KernelError:
    return KernelError("BPF_PROG_TEST_RUN", err, detail)


def bpf_prog_test_run_xdp(prog: XdpProg, data_in: bytes, *, ctx_in: bytes | None = None,
                          data_size_out: int = 0, ctx_size_out: int = 0, repeat: int = 1,
                          env: TestRunEnv | None = None, trace: bool = False,
                          clock: Callable[[], int] = time.perf_counter_ns) -> TestRunResult:
    """Run ``prog`` on ``data_in`` with the kernel's BPF_PROG_TEST_RUN rules."""
    env = env or TestRunEnv()
    if prog.spec.expected_attach_type in (BpfAttachType.BPF_XDP_DEVMAP,
                                          BpfAttachType.BPF_XDP_CPUMAP):
        raise _fail(errno.EINVAL, "devmap and cpumap programs cannot be test-run")
    size = len(data_in)
    md = [0] * 6
    if ctx_in is not None:
        if len(ctx_in) > XDP_MD_SIZE and any(ctx_in[XDP_MD_SIZE:]):
            raise _fail(errno.E2BIG, "ctx_in has non-zero bytes past struct xdp_md")
        md = list(_XDP_MD.unpack(ctx_in[:XDP_MD_SIZE].ljust(XDP_MD_SIZE, b"\0")))
    has_ctx = ctx_in is not None or ctx_size_out > 0
    meta_len, data_end, data_meta = md[0], md[1], md[2]
    headroom = XDP_PACKET_HEADROOM
    # Without a context the whole input is linear (up to the page); with one, its
    # data_end (metadata included) is: the rest of the input goes into frags.
    linear = size
    if has_ctx:
        if data_meta or data_end > size or meta_len > data_end:
            raise _fail(errno.EINVAL, "xdp_md must have data_meta 0 and data <= data_end <= "
                                      "the input size")
        if meta_len % 4 or meta_len > 255 or meta_len > headroom - XDP_FRAME_SIZE:
            raise _fail(errno.EINVAL, f"metadata length (xdp_md.data) {meta_len} must be "
                                      f"4-aligned and <= {headroom - XDP_FRAME_SIZE}")
        headroom -= meta_len
        linear = data_end
    max_linear = PAGE_SIZE - headroom - SKB_SHARED_INFO_SIZE
    linear = min(linear, max_linear)
    if size - meta_len < ETH_HLEN:
        raise _fail(errno.EINVAL, f"input of {size - meta_len} bytes past the metadata is "
                                  f"shorter than an Ethernet header")
    ingress, rx_queue, egress = md[3], md[4], md[5]
    if egress:
        raise _fail(errno.EINVAL, "egress_ifindex must be 0")
    if not ingress and rx_queue:
        raise _fail(errno.EINVAL, "rx_queue_index needs ingress_ifindex")
    if ingress:
        dev = env.netdevs.get(ingress)
        if dev is None:
            raise _fail(errno.ENODEV, f"no device with ifindex {ingress}")
        if rx_queue >= dev.real_num_rx_queues:
            raise _fail(errno.EINVAL, f"rx queue {rx_queue} >= {dev.real_num_rx_queues} queues")
        rxq = RxQueue(ingress, rx_queue, PAGE_SIZE)
    else:
        rxq = RxQueue(1, 0, PAGE_SIZE)
    xdp = XdpBuff.prepare(data_in[:linear], headroom=headroom, meta_len=meta_len,
                          frame_sz=PAGE_SIZE, rxq=rxq)
    rest = data_in[linear:]
    while rest:
        if len(xdp.frags) == MAX_SKB_FRAGS:
            raise _fail(errno.ENOMEM, "input needs more than 17 frags")
        xdp.frags.append(bytearray(rest[:PAGE_SIZE]))
        rest = rest[PAGE_SIZE:]

    ctx = env.run_context(_run_cpu(env))
    start_lines = len(env.trace.lines)
    steps: list[str] = []
    tracer = _tracer(steps, prog.spec.insns) if trace else None
    iterations = max(repeat, 1)
    fault: str | None = None
    t0 = clock()
    retval = 0
    me = threading.get_native_id()  # current: the task of the syscall
    for i in range(iterations):
        ctx.tail_call_cnt = 0
        try:
            retval = prog.run(xdp, ctx, tracer)
        except ProgramFault as e:
            retval = int(XdpAction.XDP_ABORTED)
            fault = f"{prog.spec.name}: {e}"
            break
        if i + 1 < iterations and (tw := _task_work()) is not None \
                and tw.signal_pending(me):
            tw.run()  # bpf_test_timer_continue: -EINTR, back to user space
            raise _fail(errno.EINTR, "task work scheduled with TWA_SIGNAL on the "
                                     "test run's task interrupted it")
    duration = (clock() - t0) // iterations
    if (tw := _task_work()) is not None:
        tw.run()  # the syscall returns to user space: the task's task work runs

    out = bytes(xdp.frame[xdp.data_meta if xdp.meta_supported else xdp.data:xdp.data_end]) \
        + b"".join(xdp.frags)
    ctx_out = None
    if has_ctx:
        md_out = [xdp.data - (xdp.data_meta if xdp.meta_supported else xdp.data),
                  xdp.data_end - (xdp.data_meta if xdp.meta_supported else xdp.data),
                  0, ingress, rx_queue, 0]
        ctx_out = _XDP_MD.pack(*md_out)
    result = TestRunResult(
        retval=retval, data_out=out, ctx_out=ctx_out, duration_ns=min(duration, 0xFFFF_FFFF),
        redirect=ctx.ri.describe() if ctx.ri is not None and
        retval == XdpAction.XDP_REDIRECT else None,
        trace=tuple(env.trace.lines[start_lines:]), fault=fault, insn_trace=tuple(steps))
    return _test_finish(result, out, sum(len(f) for f in xdp.frags), ctx_out,
                        data_size_out, ctx_size_out)


def _test_finish(result: TestRunResult, out: bytes, frags_size: int, ctx_out: bytes | None,
                 data_size_out: int, ctx_size_out: int) -> TestRunResult:
    """bpf_test_finish, then bpf_ctx_finish: what reaches the caller's buffers.

    A ``data_size_out`` below the output cuts the *linear* part (the frags follow it
    whole); one below the frags alone leaves every buffer, and retval, as they were
    (Linux returns before writing any; the caller's zeroed buffers are what a
    kernel-backend run reads back). Data that did not fit leaves the context
    buffer untouched too (bpf_ctx_finish is not reached)."""
    untouched_ctx = bytes(ctx_size_out) if ctx_size_out else None
    if data_size_out and len(out) > data_size_out:
        linear = data_size_out - frags_size
        if linear < 0:
            cut = dataclasses.replace(result, retval=0, data_out=bytes(data_size_out),
                                      ctx_out=untouched_ctx, duration_ns=0)
            raise TestRunTruncated(cut, data_size_out, ctx_size_out)
        cut = dataclasses.replace(result, data_out=out[:linear] + out[len(out) - frags_size:],
                                  ctx_out=untouched_ctx)
        raise TestRunTruncated(cut, len(out), ctx_size_out)
    if ctx_out is not None and ctx_size_out and len(ctx_out) > ctx_size_out:
        cut = dataclasses.replace(result, ctx_out=ctx_out[:ctx_size_out])
        raise TestRunTruncated(cut, len(out), len(ctx_out))
    return result


# bpf_prog_test_run_syscall: a context of at most U16_MAX bytes
_SYSCALL_CTX_MAX = 0xFFFF


def bpf_prog_test_run_syscall(prog: XdpProg, ctx_in: bytes | None, *,
                              env: TestRunEnv | None = None,
                              trace: bool = False) -> TestRunResult:
    """Run a SEC("syscall") program once with the kernel's rules: a context shorter than
    the program's furthest context access (``max_ctx_offset``) or longer than U16_MAX
    bytes is EINVAL; the program runs on a copy of ``ctx_in`` (none: r1 NULL), which
    comes back as ``ctx_out``; ``retval`` is r0's low 32 bits. A fault (which Linux's
    verifier rules out) ends the run with ``retval`` 0 and ``fault`` set."""
    env = env or TestRunEnv()
    size = len(ctx_in) if ctx_in is not None else 0
    if size < prog.max_ctx_offset or size > _SYSCALL_CTX_MAX:
        raise _fail(errno.EINVAL, f"a context of {size} bytes (the program reaches byte "
                                  f"{prog.max_ctx_offset}; at most {_SYSCALL_CTX_MAX})")
    buf = bytearray(ctx_in or b"")
    ctx = env.run_context(_run_cpu(env))
    start_lines = len(env.trace.lines)
    steps: list[str] = []
    tracer = _tracer(steps, prog.spec.insns) if trace else None
    fault: str | None = None
    try:
        retval = prog.run_syscall(buf, ctx, tracer)
    except ProgramFault as e:
        retval, fault = 0, f"{prog.spec.name}: {e}"
    return TestRunResult(retval=retval, data_out=b"", ctx_out=bytes(buf) if size else None,
                         duration_ns=0, trace=tuple(env.trace.lines[start_lines:]),
                         fault=fault, insn_trace=tuple(steps))


def _tracer(steps: list[str], insns: tuple[Instruction, ...]
            ) -> Callable[[int, Instruction, list[int]], None]:
    from pyxdp.asm.disasm import format_insn

    def step(pc: int, insn: Instruction, regs: list[int]) -> None:
        live = " ".join(f"r{n}={v:#x}" for n, v in enumerate(regs[:10]) if v)
        steps.append(f"{pc:5d}: {format_insn(insns, pc):<40} ; {live}")
    return step
