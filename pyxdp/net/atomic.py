"""Memory ordering on words of numpy arrays (``smp_load_acquire``/``smp_store_release``
of ``asm-generic/barrier.h`` on 64- and 32-bit words, ``cpu_relax``), a 64-bit
compare-and-swap (``cmpxchg``, what ``spin_lock`` is built on), views of memory
by address and ``memcpy``, for state that machine code on several threads
shares in place.

Native workers (a NAPI poll loop, a cpumap kthread) run without the
interpreter lock, so an index they share - a ``ptr_ring``'s producer and
consumer - is published with a release store and read with an acquire load,
as the kernel does; an AF_XDP ring's u32 indices likewise (the kernel's A/B/C/D
pairs of ``net/xdp/xsk_queue.h``: the compiler may not move descriptor writes
past the producer store). The functions are numba intrinsics for native code.
"""

from __future__ import annotations

import platform
from typing import Any

from llvmlite import ir  # type: ignore[import-untyped]
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from pyxdp.net.native import njit

__all__ = [
    "call_by_address",
    "cas_acquire64",
    "cpu_relax",
    "i64_view",
    "load_acquire32",
    "load_acquire32_at",
    "load_acquire64",
    "memcpy",
    "spin_lock",
    "spin_unlock",
    "store_release32",
    "store_release32_at",
    "store_release64",
    "u32_view",
    "u8_view",
]

_X86 = platform.machine() in ("x86_64", "AMD64")


def _ptr(context, builder, aryty, ary, idx):  # type: ignore[no-untyped-def]
    a = context.make_array(aryty)(context, builder, ary)
    return cgutils.get_item_pointer(context, builder, aryty, a, [idx])  # type: ignore[no-untyped-call]


def _load_acquire64(typingctx, ary, idx):  # type: ignore[no-untyped-def]
    """``smp_load_acquire(&ary[idx])`` of an int64 array."""
    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        p = _ptr(context, builder, signature.args[0], args[0], args[1])  # type: ignore[no-untyped-call]
        return builder.load_atomic(p, "acquire", 8)

    return types.int64(ary, idx), codegen


def _store_release64(typingctx, ary, idx, val):  # type: ignore[no-untyped-def]
    """``smp_store_release(&ary[idx], val)`` of an int64 array."""
    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        p = _ptr(context, builder, signature.args[0], args[0], args[1])  # type: ignore[no-untyped-call]
        v = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(v, p, "release", 8)
        return context.get_dummy_value()

    return types.void(ary, idx, val), codegen


def _cas_acquire64(typingctx, ary, idx, old, new):  # type: ignore[no-untyped-def]
    """``try_cmpxchg_acquire(&ary[idx], old, new)`` of an int64 array: True when the
    word held ``old`` and now holds ``new`` (acquire ordering on success)."""
    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        p = _ptr(context, builder, signature.args[0], args[0], args[1])  # type: ignore[no-untyped-call]
        o = context.cast(builder, args[2], signature.args[2], types.int64)
        n = context.cast(builder, args[3], signature.args[3], types.int64)
        res = builder.cmpxchg(p, o, n, "acquire", "monotonic")
        return builder.extract_value(res, 1)

    return types.boolean(ary, idx, old, new), codegen


def _cpu_relax(typingctx):  # type: ignore[no-untyped-def]
    """``cpu_relax()``: x86's ``pause`` in a spin loop (a compiler barrier elsewhere)."""
    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        if _X86:
            fn = cgutils.get_or_insert_function(  # type: ignore[no-untyped-call]
                builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause")
            builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


def _view_of(dtype: Any, size: int) -> Any:
    def _view(typingctx, addr, rows, cols):  # type: ignore[no-untyped-def]
        arrty = types.Array(dtype, 2, "C")

        def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
            ary = context.make_array(arrty)(context, builder)
            i64 = ir.IntType(64)
            data = builder.inttoptr(args[0], ir.IntType(8 * size).as_pointer())
            shape = [args[1], args[2]]
            strides = [builder.mul(args[2], ir.Constant(i64, size)), ir.Constant(i64, size)]
            context.populate_array(ary, data=data, shape=shape, strides=strides,
                                   itemsize=ir.Constant(i64, size), meminfo=None)
            return ary._getvalue()

        return arrty(addr, rows, cols), codegen

    return _view


# A C-contiguous ``rows x cols`` array over the memory at ``addr`` (no reference
# counting: the owner of that memory keeps it alive): int64 words, uint32 words (a
# devmap's entries, which the native loop reads where the map keeps them).
_i64_view = _view_of(types.int64, 8)
_u32_view = _view_of(types.uint32, 4)
_u8_view = _view_of(types.uint8, 1)  # pages and page states of another page pool


# -- 32-bit words (AF_XDP ring indices) and memcpy ------------------------------------

def _load_acquire32(typingctx, ary, idx):  # type: ignore[no-untyped-def]
    """``smp_load_acquire(&ary[idx])`` of a uint32 array, as int64."""
    sig = types.int64(ary, idx)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        p = _ptr(context, builder, signature.args[0], args[0], args[1])  # type: ignore[no-untyped-call]
        v = builder.load_atomic(p, "acquire", 4)
        return builder.zext(v, ir.IntType(64))

    return sig, codegen


load_acquire32: Any = intrinsic(_load_acquire32)


def _store_release32(typingctx, ary, idx, val):  # type: ignore[no-untyped-def]
    """``smp_store_release(&ary[idx], val)`` of a uint32 array."""
    sig = types.void(ary, idx, val)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        p = _ptr(context, builder, signature.args[0], args[0], args[1])  # type: ignore[no-untyped-call]
        builder.store_atomic(builder.trunc(args[2], ir.IntType(32)), p, "release", 4)
        return context.get_dummy_value()

    return sig, codegen


store_release32: Any = intrinsic(_store_release32)


def _memcpy(typingctx, dst, src, n):  # type: ignore[no-untyped-def]
    """``memcpy((void *)dst, (void *)src, n)``: byte loops over arrays the compiler
    must assume alias are not vectorised (a 64-byte frame cost 45 ns that way)."""
    sig = types.void(dst, src, n)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        p8 = ir.IntType(8).as_pointer()
        cgutils.raw_memcpy(builder, builder.inttoptr(args[0], p8),  # type: ignore[no-untyped-call]
                           builder.inttoptr(args[1], p8), args[2], 1)
        return context.get_dummy_value()

    return sig, codegen


memcpy: Any = intrinsic(_memcpy)


def _load_acquire32_at(typingctx, addr):  # type: ignore[no-untyped-def]
    """``smp_load_acquire((u32 *)addr)``, as int64."""
    sig = types.int64(addr)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        p = builder.inttoptr(args[0], ir.IntType(32).as_pointer())
        return builder.zext(builder.load_atomic(p, "acquire", 4), ir.IntType(64))

    return sig, codegen


load_acquire32_at: Any = intrinsic(_load_acquire32_at)


def _store_release32_at(typingctx, addr, val):  # type: ignore[no-untyped-def]
    """``smp_store_release((u32 *)addr, val)``."""
    sig = types.void(addr, val)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        p = builder.inttoptr(args[0], ir.IntType(32).as_pointer())
        builder.store_atomic(builder.trunc(args[1], ir.IntType(32)), p, "release", 4)
        return context.get_dummy_value()

    return sig, codegen


store_release32_at: Any = intrinsic(_store_release32_at)


load_acquire64: Any = intrinsic(_load_acquire64)
i64_view: Any = intrinsic(_i64_view)
u32_view: Any = intrinsic(_u32_view)
u8_view: Any = intrinsic(_u8_view)
store_release64: Any = intrinsic(_store_release64)
cpu_relax: Any = intrinsic(_cpu_relax)
cas_acquire64: Any = intrinsic(_cas_acquire64)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def spin_lock(words, i):  # type: ignore[no-untyped-def]
    """``spin_lock`` on the word ``words[i]`` (0 free, 1 held): what is written under it
    is seen by the next holder (the acquire here, the release in :func:`spin_unlock`)."""
    while not cas_acquire64(words, i, 0, 1):
        cpu_relax()


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def spin_unlock(words, i):  # type: ignore[no-untyped-def]
    """``spin_unlock`` of ``words[i]``: the holder's changes published with the release."""
    store_release64(words, i, 0)


def call_by_address(kinds: str) -> tuple[Any, Any]:
    """The signature and code of an intrinsic ``fn(addr, *args) -> int64`` that calls the
    machine code at ``addr`` (a function another layer compiled, e.g. with
    :func:`pyxdp.vm.jit.engine.native_function`): ``kinds`` says per argument whether
    the callee takes it as a pointer (``"p"``) or an i64 (``"i"``). A typer with the
    arguments spelled out returns these (numba's intrinsics take no ``*args``)."""
    i64, p8 = ir.IntType(64), ir.IntType(8).as_pointer()
    fnty = ir.FunctionType(i64, [p8 if k == "p" else i64 for k in kinds])

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        f = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(f, [builder.inttoptr(a, p8) if k == "p" else a
                                for k, a in zip(kinds, args[1:], strict=True)])

    return types.int64(*([types.int64] * (len(kinds) + 1))), codegen
