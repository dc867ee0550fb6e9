"""The base helper functions of ``kernel/bpf/helpers.c`` (what every program type gets).

A helper is a Python function ``fn(vm, r1, r2, r3, r4, r5) -> r0`` registered
under its Linux id; ``vm.context`` is the :class:`RunContext` of the run (CPU
number, trace log, random state, redirect state, the packet) and ``vm.mem``
the checked memory. Program-type specific helpers (the XDP ones of
``net/core/filter.c``) live with the network layer's ``filter`` module,
which merges them into its own table. Maps are reached from the handle a
program passes (:func:`pyxdp.vm.map_space.map_at`). Return values follow the
kernel: a negative errno as an unsigned 64-bit value.
"""

from __future__ import annotations

import errno
import os
import struct
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyxdp.asm.opcodes import MAX_CALL_FRAMES
from pyxdp.errors import HelperFault
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.vm.context import (
    BASE_HELPERS,
    M64,
    TRACE_RING_BYTES,
    RunContext,
    TraceLog,
    helper,
    neg,
)
from pyxdp.vm.jiffies import jiffies64, jiffies64_ir
from pyxdp.vm.jit.abi import SLOW, Natives
from pyxdp.vm.jit.ir import Text, c64, ret_if
from pyxdp.vm.jit.natives import HelperNative, register_helper
from pyxdp.vm.map_space import map_at
from pyxdp.vm.random32 import prandom_u32_ir

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["BASE_HELPERS", "RunContext", "TraceLog", "helper", "neg"]


def _ctx(vm: Interpreter) -> RunContext:
    ctx = vm.context
    if not isinstance(ctx, RunContext):
        raise HelperFault("helper needs a program run context (run through a Program)")
    return ctx


# -- maps -----------------------------------------------------------------------------------

@helper(1, "map_lookup_elem")
def _map_lookup_elem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    m = map_at(r1)
    key = vm.mem.read(r2, m.key_size)
    return m.lookup_addr(key, _ctx(vm).cpu)


@helper(2, "map_update_elem")
def _map_update_elem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    m = map_at(r1)
    key = vm.mem.read(r2, m.key_size)
    value = vm.mem.read(r3, m.value_size)
    return m.try_update(key, value, r4, cpu=_ctx(vm).cpu) & M64


@helper(3, "map_delete_elem")
def _map_delete_elem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    m = map_at(r1)
    return m.try_delete(vm.mem.read(r2, m.key_size)) & M64


_BLOOM_FILTER = int(BpfMapType.BPF_MAP_TYPE_BLOOM_FILTER)


@helper(87, "map_push_elem")
def _map_push_elem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    m = map_at(r1)
    return m.try_push(vm.mem.read(r2, m.value_size), r3) & M64


def _pop_or_peek(vm: Interpreter, r1: int, r2: int, pop: bool) -> int:
    m = map_at(r1)
    try:
        value = m.pop() if pop else m.peek()
    except Exception as e:  # MapError carries the errno the helper returns
        err = getattr(e, "errno", None)
        if err is None:
            raise
        return neg(err)
    if value is None:
        return neg(errno.ENOENT)
    vm.mem.write(r2, value)
    return 0


@helper(88, "map_pop_elem")
def _map_pop_elem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _pop_or_peek(vm, r1, r2, True)


@helper(89, "map_peek_elem")
def _map_peek_elem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    m = map_at(r1)
    if m.map_type == _BLOOM_FILTER:  # the value is the question, not the answer
        peek_value: Callable[[bytes], int] = getattr(m, "try_peek_value")  # noqa: B009
        return peek_value(vm.mem.read(r2, m.value_size)) & M64
    return _pop_or_peek(vm, r1, r2, False)


@helper(195, "map_lookup_percpu_elem")
def _map_lookup_percpu_elem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int,
                            r5: int) -> int:
    m = map_at(r1)
    cpu = r3 & 0xFFFF_FFFF
    if not m.percpu or cpu >= m.nr_cpus:
        return 0
    return m.lookup_addr(vm.mem.read(r2, m.key_size), cpu)


# -- time, randomness, cpu ----------------------------------------------------------------

@helper(5, "ktime_get_ns")
def _ktime_get_ns(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _ctx(vm).clock_ns() if isinstance(vm.context, RunContext) else time.monotonic_ns()


@helper(125, "ktime_get_boot_ns")
def _ktime_get_boot_ns(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return time.clock_gettime_ns(_CLOCK_BOOTTIME)


@helper(160, "ktime_get_coarse_ns")
def _ktime_get_coarse_ns(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return time.clock_gettime_ns(_CLOCK_MONOTONIC_COARSE)


@helper(208, "ktime_get_tai_ns")
def _ktime_get_tai_ns(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return time.clock_gettime_ns(time.CLOCK_TAI)


# Linux clock id 6; Python exposes it only on some builds.
_CLOCK_MONOTONIC_COARSE: int = getattr(time, "CLOCK_MONOTONIC_COARSE", 6)
_CLOCK_BOOTTIME: int = getattr(time, "CLOCK_BOOTTIME", 7)


@helper(118, "jiffies64")
def _jiffies64(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return jiffies64()


@helper(7, "get_prandom_u32")
def _get_prandom_u32(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _ctx(vm).rnd.u32()


def _prandom_fn(natives: Natives) -> str:
    """bpf_get_prandom_u32's twin: ``prandom_u32_state`` over the run context's words
    (the ``rnd`` word of the native run context; 0: Python draws)."""
    f = Text()
    f.at("entry")
    state = f.cget("%ctx", "rnd", "ptr")
    ret_if(f, f.ins(f"icmp eq ptr {state}, null"), SLOW)
    f.do(f"ret i64 {prandom_u32_ir(f, state)}")
    return f.text("define internal i64 @prandom_u32(ptr %ctx) nounwind")


register_helper(7, HelperNative("prandom_u32", 0, _prandom_fn))


def _clock_fn(kind: str, clock: int) -> Callable[[Natives], str]:
    """The clock helpers' twins: ``clock_gettime(clock)`` in ns, as their Python reads it."""
    def define(natives: Natives) -> str:
        f = Text()
        f.at("entry")
        ts = f.ins("alloca { i64, i64 }, align 8")
        f.do(f"call i32 @clock_gettime(i32 {clock}, ptr {ts})")
        sec = f.ins(f"load i64, ptr {ts}, align 8")
        nsec = f.ins(f"load i64, ptr {f.gep(ts, 8)}, align 8")
        ns = f.ins(f"add i64 {f.ins(f'mul i64 {sec}, 1000000000')}, {nsec}")
        f.do(f"ret i64 {ns}")
        return f.text(f"define internal i64 @{kind}(ptr %ctx) nounwind")
    return define


def _zero_fn(natives: Natives) -> str:
    """bpf_get_numa_node_id's twin: node 0, as its Python."""
    return "define internal i64 @numa_node_id(ptr %ctx) nounwind {\nentry:\n  ret i64 0\n}\n"


register_helper(125, HelperNative("ktime_boot", 0, _clock_fn("ktime_boot", _CLOCK_BOOTTIME)))
register_helper(160, HelperNative("ktime_coarse", 0,
                                  _clock_fn("ktime_coarse", _CLOCK_MONOTONIC_COARSE)))
register_helper(208, HelperNative("ktime_tai", 0, _clock_fn("ktime_tai", time.CLOCK_TAI)))


def _jiffies_fn(natives: Natives) -> str:
    f = Text()
    f.at("entry")
    f.do(f"ret i64 {jiffies64_ir(f)}")
    return f.text("define internal i64 @jiffies64(ptr %ctx) nounwind")


register_helper(118, HelperNative("jiffies64", 0, _jiffies_fn))
register_helper(42, HelperNative("numa_node_id", 0, _zero_fn))


@helper(8, "get_smp_processor_id")
def _get_smp_processor_id(vm: Interpreter, r1: int, r2: int, r3: int, r4: int,
                          r5: int) -> int:
    return _ctx(vm).cpu


@helper(14, "get_current_pid_tgid")
def _get_current_pid_tgid(vm: Interpreter, r1: int, r2: int, r3: int, r4: int,
                          r5: int) -> int:
    """``tgid << 32 | pid`` of ``current``: in BPF_PROG_TEST_RUN the calling task; in
    pyxdp's datapath the thread that runs the NAPI poll (Linux's softirq reports the
    task it interrupted)."""
    return os.getpid() << 32 | threading.get_native_id()


@helper(42, "get_numa_node_id")
def _get_numa_node_id(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return 0


# -- control flow -------------------------------------------------------------------------

BPF_MAX_LOOPS = 1 << 23


@helper(181, "loop")
def _loop(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    nr_loops = r1 & 0xFFFF_FFFF
    if r4:
        return neg(errno.EINVAL)
    if nr_loops > BPF_MAX_LOOPS:
        return neg(errno.E2BIG)
    for i in range(nr_loops):
        if vm.call_function(r2, i, r3):
            return i + 1
    return nr_loops


def _loop_fn(natives: Natives) -> str:
    """bpf_loop's twin (reference: :func:`_loop`): the callback (its entry in ``%cb``, its
    frame at ``%depth``) called natively with (i, ctx) until it returns non-zero."""
    f = Text()
    f.at("entry")
    ret_if(f, f.ins("icmp ne i64 %r4, 0"), neg(errno.EINVAL))
    n = f.ins("and i64 %r1, 4294967295")
    ret_if(f, f.ins(f"icmp ugt i64 {n}, {BPF_MAX_LOOPS}"), neg(errno.E2BIG))
    ret_if(f, f.ins(f"icmp uge i64 %depth, {MAX_CALL_FRAMES}"), SLOW)  # Python refuses it
    pre = f.cur
    f.br("head")
    f.at("head")
    i, i1 = f.tmp(), f.tmp()
    f.lines.append(f"  {i} = phi i64 [ 0, %{pre} ], [ {i1}, %next ]")
    f.cbr(f.ins(f"icmp ult i64 {i}, {n}"), "body", "done")
    f.at("body")
    r0 = f.ins(f"call i64 %cb(ptr %ctx, i64 %depth, i64 {i}, i64 %r3, i64 0, i64 0, i64 0)")
    f.lines.append(f"  {i1} = add i64 {i}, 1")
    f.cbr(f.ins(f"icmp ne i64 {f.cget('%ctx', 'status')}, 0"), "stopped", "went")
    f.at("stopped")  # the callback faulted or threw: the call site unwinds
    f.do("ret i64 0")
    f.at("went")
    f.cbr(f.ins(f"icmp ne i64 {r0}, 0"), "broke", "next")
    f.at("broke")
    f.do(f"ret i64 {i1}")
    f.at("next")
    f.br("head")
    f.at("done")
    f.do(f"ret i64 {n}")
    return f.text("define internal i64 @loop(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, i64 %r4, "
                  "ptr %cb, i64 %depth) nounwind")


register_helper(181, HelperNative("loop", 4, _loop_fn, callback=2))


@helper(12, "tail_call")
def _tail_call(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    # Reached only when the engine could not perform the tail call (the
    # interpreter special-cases a successful one); the kernel then simply
    # continues with the next instruction.
    return neg(errno.ENOENT)


# -- spin locks: runs of one program are serialised per context -----------------------------

@helper(93, "spin_lock")
def _spin_lock(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    vm.mem.read(r1, 4)  # the lock must be program memory (a map value)
    return 0


@helper(94, "spin_unlock")
def _spin_unlock(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    vm.mem.read(r1, 4)
    return 0


def _lock_fn(kind: str) -> Callable[[Natives], str]:
    """bpf_spin_lock's and bpf_spin_unlock's twin: as Python's, only the lock's bytes
    are checked to be program memory (SLOW else: Python faults)."""
    def define(natives: Natives) -> str:
        f = Text()
        f.at("entry")
        p = f.ins("call ptr @translate(ptr %ctx, i64 %r1, i64 4, i1 false)")
        ret_if(f, f.ins(f"icmp eq ptr {p}, null"), SLOW)
        f.do("ret i64 0")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1) nounwind")
    return define


register_helper(93, HelperNative("spin_lock", 1, _lock_fn("spin_lock"), ("translate",)))
register_helper(94, HelperNative("spin_unlock", 1, _lock_fn("spin_unlock"), ("translate",)))


# -- trace_printk ---------------------------------------------------------------------------

def _c_string(vm: Interpreter, addr: int, limit: int = 4096) -> bytes:
    out = bytearray()
    while len(out) < limit:
        b = vm.mem.read(addr + len(out), 1)
        if b == b"\0":
            break
        out += b
    return bytes(out)


def _trace_line(vm: Interpreter, fmt_addr: int, fmt_size: int, args: list[int]) -> int:
    """bpf_bprintf_prepare (the format NUL-terminated within ``fmt_size``), then a
    1024-byte bstr_printf, the formatted text going to the trace log."""
    from pyxdp.vm.helpers_more import MAX_BPRINTF_BUF, bpf_bprintf, memory_reader
    fmt = vm.mem.read(fmt_addr, fmt_size)
    if b"\0" not in fmt:
        return neg(errno.EINVAL)
    count, text = bpf_bprintf(fmt, args, memory_reader(vm), MAX_BPRINTF_BUF)
    if count < 0:
        return count & M64
    _ctx(vm).trace.write_raw(text)
    return count & M64


@helper(6, "trace_printk")
def _trace_printk(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_trace_printk``: three arguments in registers."""
    return _trace_line(vm, r1, r2 & 0xFFFF_FFFF, [r3, r4, r5])


@helper(177, "trace_vprintk")
def _trace_vprintk(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_trace_vprintk`` (kernel/trace/bpf_trace.c): up to 12 u64 arguments in memory
    (``data_len`` a multiple of 8, not past 96, the array not NULL unless empty:
    -EINVAL before the format is looked at), else as ``bpf_trace_printk``."""
    from pyxdp.vm.helpers_more import MAX_BPRINTF_VARARGS
    data_len = r4 & 0xFFFF_FFFF
    if data_len % 8 or data_len > MAX_BPRINTF_VARARGS * 8 or (data_len and not r3):
        return neg(errno.EINVAL)
    raw = vm.mem.read(r3, data_len) if data_len else b""
    return _trace_line(vm, r1, r2 & 0xFFFF_FFFF, list(struct.unpack(f"<{data_len // 8}Q", raw)))


def _trace_fn(name: str, vargs: bool) -> Callable[[Natives], str]:
    """The twin of ``bpf_trace_printk`` (reference: :func:`_trace_printk`) or, with
    ``vargs``, of ``bpf_trace_vprintk`` (:func:`_trace_vprintk`): the format checked
    for a NUL within its size, formatted by the shared ``@bprintf`` (the 3 register
    arguments, or the ``data_len / 8`` of the array) into a 1024-byte buffer and
    appended to the run's :class:`TraceLog` ring. SLOW (the Python helper, which drains
    the ring first) for a run without a ring, a full ring, an unreadable format or
    array and what ``@bprintf`` leaves to Python."""
    def define(natives: Natives) -> str:
        from pyxdp.vm.helpers_more import bprintf_varargs
        f = Text()
        f.at("entry")
        ob = f.ins("alloca [1024 x i8]")
        if vargs:
            dlen, args = bprintf_varargs(f, "%r3", "%r4")
            nargs = f.ins(f"lshr i64 {dlen}, 3")
        else:
            args = f.ins("alloca [3 x i64]")
            for slot, r in enumerate(("%r3", "%r4", "%r5")):
                f.do(f"store i64 {r}, ptr {f.gep(args, 8 * slot)}")
            nargs = "3"
        ring = f.cget("%ctx", "trace")
        ret_if(f, f.ins(f"icmp eq i64 {ring}, 0"), SLOW)
        fsz = f.ins("and i64 %r2, 4294967295")
        fp = f.ins(f"call ptr @translate(ptr %ctx, i64 %r1, i64 {fsz}, i1 false)")
        ret_if(f, f.ins(f"icmp eq ptr {fp}, null"), SLOW)
        # The format must hold a NUL within its size.
        before = f.cur
        f.br("scan")
        f.at("scan")
        k = f.ins(f"phi i64 [ 0, %{before} ], [ %knext, %more ]")
        ret_if(f, f.ins(f"icmp eq i64 {k}, {fsz}"), (-errno.EINVAL) & M64)
        byte = f.ins(f"load i8, ptr {f.gep(fp, k)}")
        f.cbr(f.ins(f"icmp eq i8 {byte}, 0"), "found", "more")
        f.at("more")
        f.do(f"%knext = add i64 {k}, 1")
        f.br("scan")
        f.at("found")
        n = f.ins(f"call i64 @bprintf(ptr %ctx, i64 %r1, ptr {args}, i64 {nargs}, ptr {ob}, "
                  "i64 1023, i64 1024)")
        ret_if(f, f.ins(f"icmp eq i64 {n}, {c64(SLOW)}"), SLOW)
        f.cbr(f.ins(f"icmp slt i64 {n}, 0"), "err", "ok")
        f.at("err")
        f.do(f"ret i64 {n}")
        f.at("ok")
        m = f.ins(f"select i1 {f.ins(f'icmp ult i64 {n}, 1023')}, i64 {n}, i64 1023")
        rec = f.ins(f"add i64 {m}, 1")
        need = f.ins(f"add i64 {rec}, 2")
        rp = f.ins(f"inttoptr i64 {ring} to ptr")
        used = f.ins(f"load i64, ptr {rp}")
        end = f.ins(f"add i64 {f.ins(f'add i64 {used}, {need}')}, 8")
        ret_if(f, f.ins(f"icmp ugt i64 {end}, {TRACE_RING_BYTES}"), SLOW)
        at = f.gep(rp, f.ins(f"add i64 {used}, 8"))
        f.do(f"store i16 {f.ins(f'trunc i64 {rec} to i16')}, ptr {at}, align 1")
        body = f.gep(at, 2)
        f.memmove(body, ob, m)
        f.do(f"store i8 0, ptr {f.gep(body, m)}")
        f.do(f"store i64 {f.ins(f'add i64 {used}, {need}')}, ptr {rp}")
        f.do(f"ret i64 {n}")
        return f.text(f"define internal i64 @{name}(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                      "i64 %r4, i64 %r5) nounwind")
    return define


# The ring has no atomics: a program calling them runs on one CPU at a time.
register_helper(6, HelperNative("trace_printk", 5, _trace_fn("trace_printk", False),
                                ("translate", "bprintf"), serial=True))
register_helper(177, HelperNative("trace_vprintk", 5, _trace_fn("trace_vprintk", True),
                                  ("translate", "bprintf"), serial=True))


# -- strncmp ----------------------------------------------------------------------------

@helper(182, "strncmp")
def _strncmp(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    s1 = vm.mem.read(r1, r2 & 0xFFFF_FFFF)
    s2 = _c_string(vm, r3)
    for a, b in zip(s1 + b"\0", s2 + b"\0", strict=False):
        if a != b:
            return (a - b) & M64 if a > b else neg(b - a)
        if a == 0:
            return 0
    return 0


from pyxdp.vm import bpf_trace as _bpf_trace  # noqa: E402,F401  (bpf_probe_read_kernel{,_str})
from pyxdp.vm import helpers_more as _helpers_more  # noqa: E402,F401  (registers more)
from pyxdp.vm import memalloc as _memalloc  # noqa: E402,F401  (registers bpf_kptr_xchg)
from pyxdp.vm import memalloc_percpu as _percpu  # noqa: E402,F401  (bpf_{per,this}_cpu_ptr)
