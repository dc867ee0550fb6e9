"""The open-coded iterator kfuncs: the numbers iterator of ``kernel/bpf/bpf_iter.c``
(``bpf_iter_num_new``, ``_next``, ``_destroy``: what libbpf's ``bpf_for`` and
``bpf_repeat`` expand to) and the bits iterator of ``kernel/bpf/helpers.c``
(``bpf_iter_bits_new``, ``_next``, ``_destroy``).

The iterator is the program's 8-byte ``struct bpf_iter_num`` on its stack,
read as ``struct bpf_iter_num_kern { int cur; int end; }``:

* ``new(it, start, end)``: -EINVAL when ``start > end``, -E2BIG when the range
  holds more than ``BPF_MAX_LOOPS`` numbers (both leave ``cur = end = 0``);
  else ``cur = start - 1``, ``end = end`` and 0;
* ``next(it)``: NULL (and ``cur = end = 0``) once ``cur + 1 >= end``, else
  ``cur`` one up and a pointer to it;
* ``destroy(it)``: ``cur = end = 0``.

``cur`` wraps as the kernel's 32-bit ``int`` does.

The bits iterator is the program's 16-byte ``struct bpf_iter_bits``, read as
``struct bpf_iter_bits_kern { union { u64 *bits; u64 bits_copy; }; int nr_bits;
int bit; }``:

* ``new(it, unsafe_ptr__ign, nr_words)`` first sets ``bits_copy = 0, nr_bits = 0,
  bit = -1``; -EINVAL for a NULL pointer or no words, -E2BIG above 511 words
  (``BITS_ITER_NR_WORDS_MAX``, what one ``bpf_mem_alloc`` object holds). One word
  is copied into ``bits_copy`` (-EFAULT when it cannot be read: ``-ERANGE``
  included); more are copied into an allocated array (the read's own -ERANGE or
  -EFAULT, see :mod:`pyxdp.vm.maccess`). ``nr_bits = 64 * nr_words`` on success.
  The iteration walks the copy: later changes to the source do not show.
* ``next(it)``: NULL once ``nr_bits`` is 0 or ``bit >= nr_bits``; else the next set
  bit after ``bit`` (``find_next_bit``) goes into ``bit`` and a pointer to it comes
  back, or ``bit = nr_bits`` and NULL when there is none.
* ``destroy(it)`` frees the array of a multi-word iterator.

Here the allocated arrays of multi-word iterators live in a store of
:data:`BITS_SLOTS` slots per engine (the JIT's run context scratch memory, else
an array of the interpreter's), one slot per iterator address: ``{u64 key; u64
nr_bits; u64 words[511]}``, key 0 when free. ``new`` takes the slot already keyed
by the iterator's address (a new iterator there replaces its copy) or the first
free one; with none free it fails as ``bpf_mem_alloc`` does, -ENOMEM (before the
source is read, as in Linux). The word Linux keeps the array's address in holds
the iterator's own address.

pyxdp's engines call these as helpers of the program's own
(:func:`pyxdp.net.xdp_metadata.bind_kfuncs`); each has a native twin for the JIT over
the same bytes and the same store, so ``bpf_for`` and ``bpf_for_each(bits, ...)``
loops on the JIT run no Python per iteration.
"""

from __future__ import annotations

import errno
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from pyxdp.vm.jit.abi import SLOW, Natives
from pyxdp.vm.jit.ir import Text, c64, ret_if
from pyxdp.vm.jit.natives import HelperNative, register_kfunc, register_shared
from pyxdp.vm.maccess import nofault_allowed_ir, read_nofault

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["BITS_ITER_NR_WORDS_MAX", "BITS_SCRATCH", "BITS_SLOTS", "BPF_MAX_LOOPS",
           "ITER_KFUNCS"]

BPF_MAX_LOOPS = 8 * 1024 * 1024
BITS_ITER_NR_WORDS_MAX = 511
# Multi-word iterators an engine holds at once, and the store's size in bytes.
BITS_SLOTS = 16
_SLOT_WORDS = 2 + BITS_ITER_NR_WORDS_MAX
BITS_SCRATCH = BITS_SLOTS * _SLOT_WORDS * 8
M32 = 0xFFFF_FFFF
M64 = 0xFFFF_FFFF_FFFF_FFFF


def _s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def _err(e: int) -> int:
    """A kfunc's ``int`` error return: zero-extended in r0 (measured on Linux 6.18's
    x86 JIT: r0's upper half is 0 after ``return -EINVAL``)."""
    return -e & M32


def _set(vm: Interpreter, it: int, cur: int, end: int) -> None:
    vm.mem.store(it, 8, (cur & M32) | (end & M32) << 32)


def iter_num_new(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_iter_num_new(it, start, end)``."""
    start, end = _s32(r2), _s32(r3)
    if start > end:
        _set(vm, r1, 0, 0)
        return _err(errno.EINVAL)
    if end - start > BPF_MAX_LOOPS:
        _set(vm, r1, 0, 0)
        return _err(errno.E2BIG)
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


# -- the bits iterator ------------------------------------------------------------------------

U64s = npt.NDArray[np.uint64]
# The stores of engines without run context scratch memory (the interpreter).
_STORES: weakref.WeakKeyDictionary[object, U64s] = weakref.WeakKeyDictionary()


def _store(vm: Interpreter) -> U64s:
    """The engine's multi-word iterator slots, ``(BITS_SLOTS, 2 + 511)`` u64."""
    scratch = getattr(vm, "scratch", None)
    if not isinstance(scratch, np.ndarray) or scratch.size * 8 < BITS_SCRATCH:
        scratch = _STORES.get(vm)
        if scratch is None:
            scratch = _STORES[vm] = np.zeros(BITS_SCRATCH // 8, np.uint64)
    out: U64s = scratch[:BITS_SCRATCH // 8].reshape(BITS_SLOTS, _SLOT_WORDS)
    return out


def _slot(store: U64s, key: int, alloc: bool) -> int:
    """The slot keyed ``key``, else (``alloc``) the first free one; -1 for none."""
    keys = store[:, 0]
    hit = np.flatnonzero(keys == np.uint64(key))
    if hit.size:
        return int(hit[0])
    free = np.flatnonzero(keys == 0) if alloc else hit
    return int(free[0]) if free.size else -1


def iter_bits_new(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_iter_bits_new(it, unsafe_ptr__ign, nr_words)``."""
    vm.mem.store(r1, 8, 0)
    vm.mem.store(r1 + 8, 8, M32 << 32)  # nr_bits = 0, bit = -1
    nr_words = r3 & M32
    if not r2 or not nr_words:
        return _err(errno.EINVAL)
    if nr_words > BITS_ITER_NR_WORDS_MAX:
        return _err(errno.E2BIG)
    nr_bits = nr_words * 64
    if nr_words == 1:
        got = read_nofault(vm.mem, r2, 8)
        if isinstance(got, int):
            return _err(errno.EFAULT)
        vm.mem.store(r1, 8, int.from_bytes(got, "little"))
    else:
        store = _store(vm)
        k = _slot(store, r1, True)
        if k < 0:
            return _err(errno.ENOMEM)  # bpf_mem_alloc failed (before the read)
        got = read_nofault(vm.mem, r2, nr_words * 8)
        if isinstance(got, int):
            return _err(-got)
        store[k, 0], store[k, 1] = r1, nr_bits
        store[k, 2:2 + nr_words] = np.frombuffer(got, "<u8")
        vm.mem.store(r1, 8, r1)  # the kernel keeps the array's address here
    vm.mem.store(r1 + 8, 4, nr_bits)
    return 0


def iter_bits_next(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_iter_bits_next(it)``: a pointer to the next set bit's number, or NULL."""
    nr_bits = _s32(vm.mem.load(r1 + 8, 4))
    bit = _s32(vm.mem.load(r1 + 12, 4))
    if not nr_bits or bit >= nr_bits:
        return 0
    if nr_bits == 64:
        bits = vm.mem.load(r1, 8)
    else:
        store = _store(vm)
        k = _slot(store, r1, False)
        if k < 0 or int(store[k, 1]) != nr_bits:  # no array of ours: a forged iterator
            return 0
        bits = int.from_bytes(store[k, 2:2 + nr_bits // 64].tobytes(), "little")
    start = (bit + 1) & M64  # find_next_bit's offset is an unsigned long
    rest = bits >> start if start < nr_bits else 0
    bit = start + ((rest & -rest).bit_length() - 1) if rest else nr_bits
    vm.mem.store(r1 + 12, 4, bit & M32)
    return r1 + 12 if bit < nr_bits else 0


def iter_bits_destroy(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_iter_bits_destroy(it)``: frees a multi-word iterator's array."""
    if _s32(vm.mem.load(r1 + 8, 4)) > 64:
        store = _store(vm)
        k = _slot(store, r1, False)
        if k >= 0:
            store[k, 0] = 0
    return 0


# -- native twins: the same, over the translated bytes ----------------------------------------

def _iter_ptr(f: Text, size: int = 8) -> str:
    """The host address of the iterator at %r1 (SLOW unless ``size`` writable bytes are
    there: the Python kfunc then faults as the interpreter does)."""
    p = f.ins(f"call ptr @translate(ptr %ctx, i64 %r1, i64 {size}, i1 true)")
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
    err = f.ins(f"select i1 {bad}, i64 {_err(errno.EINVAL)}, i64 {_err(errno.E2BIG)}")
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


def _bits_slot_fn(natives: Natives) -> str:
    """``bits_slot(ctx, key, alloc) -> slot or null``: :func:`_slot` over the run
    context's scratch memory (the caller checked it is there)."""
    f = Text()
    f.at("entry")
    base = f.cget("%ctx", "scratch", "ptr")
    f.br("find")
    for name, want, nxt in (("find", "%key", "more"), ("free", "0", "none")):
        f.at(name)
        i = f"%{name}.i"
        f.do(f"{i} = phi i64 [ 0, %{'entry' if name == 'find' else 'more'} ], "
             f"[ {i}1, %{name}.next ]")
        slot = f.gep(base, f.ins(f"mul i64 {i}, {8 * _SLOT_WORDS}"))
        key = f.ins(f"load i64, ptr {slot}, align 8")
        f.cbr(f.ins(f"icmp eq i64 {key}, {want}"), f"{name}.hit", f"{name}.next")
        f.at(f"{name}.hit")
        f.do(f"ret ptr {slot}")
        f.at(f"{name}.next")
        f.do(f"{i}1 = add i64 {i}, 1")
        f.cbr(f.ins(f"icmp ult i64 {i}1, {BITS_SLOTS}"), name, nxt)
    f.at("more")
    f.cbr("%alloc", "free", "none")
    f.at("none")
    f.do("ret ptr null")
    return f.text("define internal ptr @bits_slot(ptr %ctx, i64 %key, i1 %alloc) nounwind")


def _scratch_guard(f: Text) -> None:
    """SLOW unless the run context has the slots (an engine without: the Python store)."""
    have = f.ins(f"icmp uge i64 {f.cget('%ctx', 'scratch_size')}, {BITS_SCRATCH}")
    ret_if(f, f.ins(f"xor i1 {have}, true"), SLOW)


def _bits_new_fn(natives: Natives) -> str:
    """One word into ``bits_copy``, more into the iterator's slot of the store."""
    f = Text()
    f.at("entry")
    p = _iter_ptr(f, 16)
    words = f.ins("and i64 %r3, 4294967295")
    bad = f.ins(f"or i1 {f.ins('icmp eq i64 %r2, 0')}, {f.ins(f'icmp eq i64 {words}, 0')}")
    big = f.ins(f"icmp ugt i64 {words}, {BITS_ITER_NR_WORDS_MAX}")
    fail, chk, one, multi = f.label("fail"), f.label("chk"), f.label("one"), f.label("multi")
    f.cbr(f.ins(f"or i1 {bad}, {big}"), fail, chk)
    f.at(fail)
    f.do(f"store i64 0, ptr {p}, align 4")
    f.do(f"store i64 {c64(M32 << 32)}, ptr {f.gep(p, 8)}, align 4")
    err = f.ins(f"select i1 {bad}, i64 {_err(errno.EINVAL)}, i64 {_err(errno.E2BIG)}")
    f.do(f"ret i64 {err}")
    f.at(chk)
    f.cbr(f.ins(f"icmp eq i64 {words}, 1"), one, multi)
    f.at(one)
    src = f.ins("call ptr @translate(ptr %ctx, i64 %r2, i64 8, i1 false)")
    f.do(f"store i64 0, ptr {p}, align 4")
    f.do(f"store i64 {c64(M32 << 32)}, ptr {f.gep(p, 8)}, align 4")
    ret_if(f, f.ins(f"icmp eq ptr {src}, null"), _err(errno.EFAULT))
    f.do(f"store i64 {f.ins(f'load i64, ptr {src}, align 1')}, ptr {p}, align 4")
    f.do(f"store i64 {c64(M32 << 32 | 64)}, ptr {f.gep(p, 8)}, align 4")
    f.do("ret i64 0")
    f.at(multi)
    _scratch_guard(f)
    f.do(f"store i64 0, ptr {p}, align 4")
    f.do(f"store i64 {c64(M32 << 32)}, ptr {f.gep(p, 8)}, align 4")
    slot = f.ins("call ptr @bits_slot(ptr %ctx, i64 %r1, i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {slot}, null"), _err(errno.ENOMEM))
    nbytes = f.ins(f"shl i64 {words}, 3")
    src = f.ins(f"call ptr @translate(ptr %ctx, i64 %r2, i64 {nbytes}, i1 false)")
    read, unread = f.label("read"), f.label("unread")
    f.cbr(f.ins(f"icmp eq ptr {src}, null"), unread, read)
    f.at(unread)
    ok = nofault_allowed_ir(f, "%r2")
    f.do(f"ret i64 {f.ins(f'select i1 {ok}, i64 {_err(errno.EFAULT)}, i64 {_err(errno.ERANGE)}')}")
    f.at(read)
    f.memmove(f.gep(slot, 16), src, nbytes)
    nr_bits = f.ins(f"shl i64 {words}, 6")
    f.do(f"store i64 %r1, ptr {slot}, align 8")
    f.do(f"store i64 {nr_bits}, ptr {f.gep(slot, 8)}, align 8")
    f.do(f"store i64 %r1, ptr {p}, align 4")
    f.do(f"store i64 {f.ins(f'or i64 {nr_bits}, {c64(M32 << 32)}')}, ptr {f.gep(p, 8)}, align 4")
    f.do("ret i64 0")
    return f.text("define internal i64 @iter_bits_new(ptr %ctx, i64 %r1, i64 %r2, i64 %r3) "
                  "nounwind")


def _bits_next_fn(natives: Natives) -> str:
    """``find_next_bit`` over ``bits_copy`` or the iterator's slot."""
    f = Text()
    f.at("entry")
    p = _iter_ptr(f, 16)
    nr = f.ins(f"load i32, ptr {f.gep(p, 8)}, align 4")
    bitp = f.gep(p, 12)
    bit = f.ins(f"load i32, ptr {bitp}, align 4")
    over = f.ins(f"or i1 {f.ins(f'icmp eq i32 {nr}, 0')}, {f.ins(f'icmp sge i32 {bit}, {nr}')}")
    ret_if(f, over, 0)
    nrb = f.ins(f"sext i32 {nr} to i64")
    start = f.ins(f"add i64 {f.ins(f'sext i32 {bit} to i64')}, 1")
    one, multi, scan, none, found = (f.label(n) for n in ("one", "multi", "scan", "none",
                                                          "found"))
    f.cbr(f.ins(f"icmp eq i32 {nr}, 64"), one, multi)
    # one word: bits_copy
    f.at(one)
    f.cbr(f.ins(f"icmp uge i64 {start}, 64"), none, scan)
    f.at(scan)
    rest = f.ins(f"lshr i64 {f.ins(f'load i64, ptr {p}, align 4')}, {start}")
    nz = f.label("nz")
    f.cbr(f.ins(f"icmp eq i64 {rest}, 0"), none, nz)
    f.at(nz)
    b1 = f.ins(f"add i64 {start}, {f.ins(f'call i64 @llvm.cttz.i64(i64 {rest}, i1 true)')}")
    f.br(found)
    # more words: the slot keyed by the iterator's address, if it holds nr_bits bits
    f.at(multi)
    _scratch_guard(f)
    slot = f.ins("call ptr @bits_slot(ptr %ctx, i64 %r1, i1 false)")
    ret_if(f, f.ins(f"icmp eq ptr {slot}, null"), 0)
    ret_if(f, f.ins(f"icmp ne i64 {f.ins(f'load i64, ptr {f.gep(slot, 8)}, align 8')}, {nrb}"),
           0)
    words = f.gep(slot, 16)
    first, loop, word_nz = f.label("first"), f.label("loop"), f.label("wnz")
    f.cbr(f.ins(f"icmp uge i64 {start}, {nrb}"), none, first)
    f.at(first)
    w0 = f.ins(f"lshr i64 {start}, 6")
    v0 = f.ins(f"lshr i64 {f.at_index(words, w0, 'i64', 8)}, {f.ins(f'and i64 {start}, 63')}")
    f0nz = f.label("f0nz")
    f.cbr(f.ins(f"icmp ne i64 {v0}, 0"), f0nz, loop)
    f.at(f0nz)
    b2 = f.ins(f"add i64 {start}, {f.ins(f'call i64 @llvm.cttz.i64(i64 {v0}, i1 true)')}")
    f.br(found)
    f.at(loop)
    k = f.tmp()
    f.do(f"{k} = phi i64 [ {w0}, %{first} ], [ {k}.1, %{word_nz}.no ]")
    f.do(f"{k}.1 = add i64 {k}, 1")
    f.cbr(f.ins(f"icmp uge i64 {f.ins(f'shl i64 {k}.1, 6')}, {nrb}"), none, word_nz)
    f.at(word_nz)
    v = f.at_index(words, f"{k}.1", "i64", 8)
    wyes = f.label("wyes")
    f.cbr(f.ins(f"icmp ne i64 {v}, 0"), wyes, f"{word_nz}.no")
    f.at(f"{word_nz}.no")
    f.br(loop)
    f.at(wyes)
    b3 = f.ins(f"add i64 {f.ins(f'shl i64 {k}.1, 6')}, "
               f"{f.ins(f'call i64 @llvm.cttz.i64(i64 {v}, i1 true)')}")
    f.br(found)
    f.at(none)
    f.do(f"store i32 {nr}, ptr {bitp}, align 4")
    f.do("ret i64 0")
    f.at(found)
    nb = f.ins(f"phi i64 [ {b1}, %{nz} ], [ {b2}, %{f0nz} ], [ {b3}, %{wyes} ]")
    f.do(f"store i32 {f.ins(f'trunc i64 {nb} to i32')}, ptr {bitp}, align 4")
    f.do(f"ret i64 {f.ins('add i64 %r1, 12')}")
    return f.text("define internal i64 @iter_bits_next(ptr %ctx, i64 %r1) nounwind")


def _bits_destroy_fn(natives: Natives) -> str:
    """Nothing to free for one word; a multi-word iterator's slot is freed."""
    f = Text()
    f.at("entry")
    p = _iter_ptr(f, 16)
    nr = f.ins(f"load i32, ptr {f.gep(p, 8)}, align 4")
    ret_if(f, f.ins(f"icmp sle i32 {nr}, 64"), 0)
    _scratch_guard(f)
    slot = f.ins("call ptr @bits_slot(ptr %ctx, i64 %r1, i1 false)")
    ret_if(f, f.ins(f"icmp eq ptr {slot}, null"), 0)
    f.do(f"store i64 0, ptr {slot}, align 8")
    f.do("ret i64 0")
    return f.text("define internal i64 @iter_bits_destroy(ptr %ctx, i64 %r1) nounwind")


# The kfuncs by name (bound as private helpers, like the dynptr and conntrack kfuncs).
ITER_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_iter_num_new": iter_num_new,
    "bpf_iter_num_next": iter_num_next,
    "bpf_iter_num_destroy": iter_num_destroy,
    "bpf_iter_bits_new": iter_bits_new,
    "bpf_iter_bits_next": iter_bits_next,
    "bpf_iter_bits_destroy": iter_bits_destroy,
}
register_kfunc("bpf_iter_num_new", iter_num_new,
               HelperNative("iter_num_new", 3, _new_fn, ("translate",)))
register_kfunc("bpf_iter_num_next", iter_num_next,
               HelperNative("iter_num_next", 1, _next_fn, ("translate",)))
register_kfunc("bpf_iter_num_destroy", iter_num_destroy,
               HelperNative("iter_num_destroy", 1, _destroy_fn, ("translate",)))
_BITS_NEEDS = ("translate", "bits_slot")
register_shared("bits_slot", _bits_slot_fn)
register_kfunc("bpf_iter_bits_new", iter_bits_new,
               HelperNative("iter_bits_new", 3, _bits_new_fn, _BITS_NEEDS, BITS_SCRATCH))
register_kfunc("bpf_iter_bits_next", iter_bits_next,
               HelperNative("iter_bits_next", 1, _bits_next_fn, _BITS_NEEDS, BITS_SCRATCH))
register_kfunc("bpf_iter_bits_destroy", iter_bits_destroy,
               HelperNative("iter_bits_destroy", 1, _bits_destroy_fn, _BITS_NEEDS,
                            BITS_SCRATCH))
