"""The numbers iterator kfuncs of ``kernel/bpf/bpf_iter.c``: ``bpf_iter_num_new``,
``bpf_iter_num_next`` and ``bpf_iter_num_destroy`` (what libbpf's ``bpf_for`` and
``bpf_repeat`` expand to).

The iterator is the program's 8-byte ``struct bpf_iter_num`` on its stack,
read as ``struct bpf_iter_num_kern { int cur; int end; }``:

* ``new(it, start, end)``: -EINVAL when ``start > end``, -E2BIG when the range
  holds more than ``BPF_MAX_LOOPS`` numbers (both leave ``cur = end = 0``);
  else ``cur = start - 1``, ``end = end`` and 0;
* ``next(it)``: NULL (and ``cur = end = 0``) once ``cur + 1 >= end``, else
  ``cur`` one up and a pointer to it;
* ``destroy(it)``: ``cur = end = 0``.

``cur`` wraps as the kernel's 32-bit ``int`` does. pyxdp's engines call these
as helpers of the program's own (:func:`pyxdp.net.xdp_metadata.bind_kfuncs`);
each has a native twin for the JIT over the same 8 bytes, so a ``bpf_for``
loop on the JIT runs no Python per iteration.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyxdp.vm.helpers import neg
from pyxdp.vm.jit.abi import SLOW, Natives
from pyxdp.vm.jit.ir import Text, c64, ret_if
from pyxdp.vm.jit.natives import HelperNative, register_kfunc

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["BPF_MAX_LOOPS", "ITER_KFUNCS"]

BPF_MAX_LOOPS = 8 * 1024 * 1024
M32 = 0xFFFF_FFFF
M64 = 0xFFFF_FFFF_FFFF_FFFF


def _s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def _set(vm: Interpreter, it: int, cur: int, end: int) -> None:
    vm.mem.store(it, 8, (cur & M32) | (end & M32) << 32)


def iter_num_new(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_iter_num_new(it, start, end)``."""
    start, end = _s32(r2), _s32(r3)
    if start > end:
        _set(vm, r1, 0, 0)
        return neg(errno.EINVAL)
    if end - start > BPF_MAX_LOOPS:
        _set(vm, r1, 0, 0)
        return neg(errno.E2BIG)
    _set(vm, r1, start - 1, end)
    return 0


def iter_num_next(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_iter_num_next(it)``: a pointer to ``cur``, or NULL when done."""
    cur = _s32(vm.mem.load(r1, 4) + 1)
    end = _s32(vm.mem.load(r1 + 4, 4))
    if cur >= end:
        _set(vm, r1, 0, 0)
        return 0
    vm.mem.store(r1, 4, cur & M32)
    return r1


def iter_num_destroy(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_iter_num_destroy(it)`` (void: r0 is left 0)."""
    _set(vm, r1, 0, 0)
    return 0


# -- native twins: the same, over the translated 8 bytes ------------------------------------

def _iter_ptr(f: Text) -> str:
    """The host address of the iterator at %r1 (SLOW unless 8 writable bytes are there:
    the Python kfunc then faults as the interpreter does)."""
    p = f.ins("call ptr @translate(ptr %ctx, i64 %r1, i64 8, i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {p}, null"), SLOW)
    f.cset("%ctx", "stack_dirty", "-1")  # translate only reads; the frame is written
    return p


def _new_fn(natives: Natives) -> str:
    f = Text()
    f.at("entry")
    p = _iter_ptr(f)
    start = f.ins("sext i32 " + f.ins("trunc i64 %r2 to i32") + " to i64")
    end = f.ins("sext i32 " + f.ins("trunc i64 %r3 to i32") + " to i64")
    bad = f.ins(f"icmp sgt i64 {start}, {end}")
    big = f.ins(f"icmp sgt i64 {f.ins(f'sub i64 {end}, {start}')}, {BPF_MAX_LOOPS}")
    ok, fail = f.label("ok"), f.label("fail")
    f.cbr(f.ins(f"or i1 {bad}, {big}"), fail, ok)
    f.at(fail)
    f.do(f"store i64 0, ptr {p}, align 4")
    err = f.ins(f"select i1 {bad}, i64 {c64(-errno.EINVAL)}, i64 {c64(-errno.E2BIG)}")
    f.do(f"ret i64 {err}")
    f.at(ok)
    cur = f.ins(f"and i64 {f.ins(f'sub i64 {start}, 1')}, {M32}")
    word = f.ins(f"or i64 {cur}, {f.ins(f'shl i64 {end}, 32')}")
    f.do(f"store i64 {word}, ptr {p}, align 4")
    f.do("ret i64 0")
    return f.text("define internal i64 @iter_num_new(ptr %ctx, i64 %r1, i64 %r2, i64 %r3) "
                  "nounwind")


def _next_fn(natives: Natives) -> str:
    f = Text()
    f.at("entry")
    p = _iter_ptr(f)
    cur = f.ins(f"add i32 {f.ins(f'load i32, ptr {p}, align 4')}, 1")
    end = f.ins(f"load i32, ptr {f.gep(p, 4)}, align 4")
    done, more = f.label("done"), f.label("more")
    f.cbr(f.ins(f"icmp sge i32 {cur}, {end}"), done, more)
    f.at(done)
    f.do(f"store i64 0, ptr {p}, align 4")
    f.do("ret i64 0")
    f.at(more)
    f.do(f"store i32 {cur}, ptr {p}, align 4")
    f.do("ret i64 %r1")
    return f.text("define internal i64 @iter_num_next(ptr %ctx, i64 %r1) nounwind")


def _destroy_fn(natives: Natives) -> str:
    f = Text()
    f.at("entry")
    p = _iter_ptr(f)
    f.do(f"store i64 0, ptr {p}, align 4")
    f.do("ret i64 0")
    return f.text("define internal i64 @iter_num_destroy(ptr %ctx, i64 %r1) nounwind")


# The kfuncs by name (bound as private helpers, like the dynptr and conntrack kfuncs).
ITER_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_iter_num_new": iter_num_new,
    "bpf_iter_num_next": iter_num_next,
    "bpf_iter_num_destroy": iter_num_destroy,
}
register_kfunc("bpf_iter_num_new", iter_num_new,
               HelperNative("iter_num_new", 3, _new_fn, ("translate",)))
register_kfunc("bpf_iter_num_next", iter_num_next,
               HelperNative("iter_num_next", 1, _next_fn, ("translate",)))
register_kfunc("bpf_iter_num_destroy", iter_num_destroy,
               HelperNative("iter_num_destroy", 1, _destroy_fn, ("translate",)))
