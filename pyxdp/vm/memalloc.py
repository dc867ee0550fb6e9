"""Program-allocated objects: ``bpf_global_ma`` of ``kernel/bpf/memalloc.c`` and the
``bpf_obj_new_impl``/``bpf_obj_drop_impl`` kfuncs and ``bpf_kptr_xchg`` helper of
``kernel/bpf/helpers.c`` (Linux 6.18).

``bpf_obj_new(type)`` gives a program a zeroed object of one of its own BTF
structs (the verifier hands the kfunc the type's size); ``bpf_obj_drop``
frees it; ``bpf_kptr_xchg(&value->field, p)`` swaps an object into a
``__kptr`` field of a map value and returns the one that was there, which is
how an object outlives the run that made it.

Objects live in one arena of fake address space shared by every program of
the process (the kernel's ``bpf_global_ma`` is global too: an object one
program stored in a map another program may take out and drop). The arena is
a :class:`~pyxdp.vm.memory.Region` the engines bounds-check like any other;
its allocator state is kept in the arena's own first bytes so that Python
(allocation, on both engines) and native code (the JIT's ``bpf_obj_drop``
twin) share it. Like ``bpf_mem_alloc``, a request takes the smallest of
Linux's size classes that holds it and an 8-byte header in front of the
object (the kernel's ``llist_node``/cache pointer, here the class and a live
bit); a freed block goes on its class's free list, and an object the classes
cannot hold (more than 4088 bytes) or one the arena has no room for is NULL.
The header also names what Linux's verifier hands the kfuncs in the struct's
``btf_struct_meta``: its refcount's offset and its graph roots, whose lists and
trees a drop empties first (``bpf_obj_free_fields``, by the functions
:mod:`pyxdp.vm.bpf_list` and :mod:`pyxdp.vm.bpf_rbtree` register).
Arena operations are not atomic: programs that allocate run under the
host's lock (:mod:`pyxdp.net.napi`), one engine at a time.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from pyxdp.btf.btf import Btf, BtfKind
from pyxdp.errors import HelperFault
from pyxdp.uapi.bpf import BpfFuncId
from pyxdp.vm.context import helper
from pyxdp.vm.jit.abi import SLOW, Natives
from pyxdp.vm.jit.ir import Text, c64, ret_if
from pyxdp.vm.jit.natives import HelperNative, register_helper, register_kfunc
from pyxdp.vm.memory import Region

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["ARENA_BASE", "ARENA_SIZE", "ARENA_USERS", "DROP_NATIVE", "OBJ_KFUNCS", "ObjArena",
           "arena", "drop_kptr", "make_obj_new", "map_arena", "obj_drop", "record_index",
           "register_kernel_kptrs", "register_root_free", "uses_arena"]

ARENA_BASE = 0x0000_5800_0000_0000
ARENA_SIZE = 4 << 20
# bpf_mem_alloc's size classes (sizes[] of kernel/bpf/memalloc.c), header included.
SIZES = (16, 32, 64, 96, 128, 192, 256, 512, 1024, 2048, 4096)
_HDR = 8                 # the hidden header in front of every object
_LIVE = 1 << 8           # header bit: the block holds an object (else it is free)
# header bits 16-31: the object's bpf_refcount offset + 1 (0: not refcounted), what
# Linux's verifier hands the kfuncs in the struct's btf_struct_meta
_RC_SHIFT = 16
# header bits 32-47: the object's graph roots (its record in _RECORDS + 1; 0: none), which
# the drop empties first (bpf_obj_free_fields)
_REC_SHIFT = 32
# The arena's first bytes: word 0 the first never-used offset, word 1 + c the first
# free block of class c (0: none); a free block keeps the next one in its object's
# first word.
_HEAD = 128
_BUMP = 0


# A struct's graph roots as the drop frees them: (root kind, ((offset, node offset in the
# elements), ...)) per kind; interned for the process, as the arena is.
Record = tuple[tuple[str, tuple[tuple[int, int], ...]], ...]
_RECORDS: list[Record] = []
_RECORDS_LOCK = threading.Lock()
# bpf_list_head_free, bpf_rb_root_free by root kind (registered by their modules): each
# takes (buffer, its address, value stride, ((offset, node offset), ...)).
_ROOT_FREE: dict[str, Callable[[Any, int, int, tuple[tuple[int, int], ...]], None]] = {}


def register_root_free(kind: str,
                       fn: Callable[[Any, int, int, tuple[tuple[int, int], ...]], None]
                       ) -> None:
    """The function that empties a graph root of ``kind`` when its object is freed."""
    _ROOT_FREE[kind] = fn


def record_index(rec: Record) -> int:
    """The header's number for an object whose graph roots are ``rec`` (0: none)."""
    if not rec:
        return 0
    with _RECORDS_LOCK:
        if rec not in _RECORDS:
            if len(_RECORDS) >= 0xFFFF:
                raise HelperFault("too many structs with graph roots for the object arena")
            _RECORDS.append(rec)
        return _RECORDS.index(rec) + 1


def _cls(size: int) -> int:
    """bpf_mem_cache_idx(size + LLIST_NODE_SZ): the class, or -1 when none fits."""
    c = bisect_left(SIZES, size + _HDR)
    return c if c < len(SIZES) else -1


class ObjArena:
    """The objects' memory: one region, its allocator state inside it."""

    def __init__(self, size: int = ARENA_SIZE) -> None:
        self.buf = np.zeros(size, dtype=np.uint8)
        self.u64 = self.buf.view("<u8")  # blocks are 8-aligned: word n at byte 8n
        self.words = self.u64[:_HEAD // 8]
        self.words[_BUMP] = _HEAD
        self.region = Region("bpf_obj arena", ARENA_BASE, self.buf.data)
        self._lock = threading.Lock()

    def _word(self, off: int) -> int:
        return int(self.u64[off >> 3])

    def _set(self, off: int, v: int) -> None:
        self.u64[off >> 3] = v

    def alloc(self, size: int, refcount_off: int = -1, record: int = 0) -> int:
        """``bpf_mem_alloc``: a zeroed object of ``size`` bytes, its address; 0 when no
        class holds it or the arena is full. An object with a ``bpf_refcount`` at
        ``refcount_off`` starts with one reference (``bpf_obj_init``); ``record`` is
        :func:`record_index`'s number for its graph roots."""
        c = _cls(size)
        if c < 0 or size <= 0:
            return 0
        with self._lock:
            block = int(self.words[1 + c])
            if block:
                self.words[1 + c] = self._word(block + _HDR)
            else:
                block = int(self.words[_BUMP])
                if block + SIZES[c] > len(self.buf):
                    return 0
                self.words[_BUMP] = block + SIZES[c]
            self._set(block, c | _LIVE | (refcount_off + 1) << _RC_SHIFT |
                      record << _REC_SHIFT)
            self.buf[block + _HDR:block + SIZES[c]] = 0
            if refcount_off >= 0:
                self.buf[block + _HDR + refcount_off] = 1
        return ARENA_BASE + block + _HDR

    def _refcount(self, addr: int) -> int:
        """The byte offset in the arena of the live object's refcount (-1: none)."""
        block = addr - ARENA_BASE - _HDR
        if not (_HEAD <= block < int(self.words[_BUMP]) and addr % 8 == 0):
            raise HelperFault(f"{addr:#x} is not an object bpf_obj_new allocated")
        h = self._word(block)
        if not h & _LIVE:
            raise HelperFault(f"{addr:#x} is not a live object (freed twice?)")
        rc = h >> _RC_SHIFT & 0xFFFF
        return block + _HDR + rc - 1 if rc else -1

    def drop(self, addr: int) -> None:
        """``__bpf_obj_drop_impl``: a refcounted object loses a reference and is freed
        at the last; any other is freed."""
        with self._lock:
            at = self._refcount(addr)
            if at >= 0:
                n = int(self.buf[at:at + 4].view("<u4")[0]) - 1
                self.buf[at:at + 4].view("<u4")[0] = n
                if n:
                    return
            rec = self._word(addr - ARENA_BASE - _HDR) >> _REC_SHIFT & 0xFFFF
        if rec:  # bpf_obj_free_fields: what its lists and trees hold is dropped first
            self._free_roots(addr, _RECORDS[rec - 1])
        self.free(addr)

    def _free_roots(self, addr: int, rec: Record) -> None:
        """The graph roots of the object at ``addr`` emptied (the arena's lock not held:
        the objects they held are dropped, and may hold roots too)."""
        end = max(off for _, roots in rec for off, _ in roots) + 16
        rel = addr - ARENA_BASE
        view = self.buf.data[rel:rel + end]
        for kind, roots in rec:
            _ROOT_FREE[kind](view, addr, end, roots)

    def acquire(self, addr: int) -> int:
        """``bpf_refcount_acquire``: one more reference to a refcounted object, its
        address; NULL when the count already fell to zero (refcount_inc_not_zero)."""
        with self._lock:
            at = self._refcount(addr)
            if at < 0:
                raise HelperFault(f"{addr:#x} is not a refcounted object")
            n = int(self.buf[at:at + 4].view("<u4")[0])
            if not n:
                return 0
            self.buf[at:at + 4].view("<u4")[0] = n + 1
        return addr

    def object_at(self, addr: int) -> int:
        """The live object whose bytes hold ``addr``, its address; 0 when none does."""
        with self._lock:
            off, end = _HEAD, int(self.words[_BUMP])
            rel = addr - ARENA_BASE
            while off < end:
                h = self._word(off)
                size = SIZES[h & 0xFF]
                if off + _HDR <= rel < off + size:
                    return ARENA_BASE + off + _HDR if h & _LIVE else 0
                off += size
        return 0

    def block_size(self, addr: int) -> int:
        """The size class (header included: the kmalloc size Linux's bpf_mem_alloc asks
        for) of the block, live or free, whose bytes hold ``addr``; 0 outside every block."""
        with self._lock:
            off, end = _HEAD, int(self.words[_BUMP])
            rel = addr - ARENA_BASE
            while off < end:
                size = SIZES[self._word(off) & 0xFF]
                if off <= rel < off + size:
                    return size
                off += size
        return 0

    def free(self, addr: int) -> None:
        """``bpf_mem_free``: the object at ``addr`` goes back on its class's list."""
        block = addr - ARENA_BASE - _HDR
        with self._lock:
            if not (_HEAD <= block < int(self.words[_BUMP]) and addr % 8 == 0):
                raise HelperFault(f"{addr:#x} is not an object bpf_obj_new allocated")
            h = self._word(block)
            if not h & _LIVE or h & 0xFF >= len(SIZES):
                raise HelperFault(f"{addr:#x} is not a live object (freed twice?)")
            c = h & 0xFF
            self._set(block, c)
            self._set(block + _HDR, int(self.words[1 + c]))
            self.words[1 + c] = block

    def live(self) -> int:
        """Objects allocated and not freed (for tests and leak checks)."""
        with self._lock:
            free = 0
            for c in range(len(SIZES)):
                b = int(self.words[1 + c])
                while b:
                    free += 1
                    b = self._word(b + _HDR)
            used, off = 0, _HEAD
            end = int(self.words[_BUMP])
            while off < end:
                used += 1
                off += SIZES[self._word(off) & 0xFF]
            return used - free


_ARENA: ObjArena | None = None
_ARENA_LOCK = threading.Lock()


def arena() -> ObjArena:
    """The process's object arena (made on first use)."""
    global _ARENA
    with _ARENA_LOCK:
        if _ARENA is None:
            _ARENA = ObjArena()
        return _ARENA


# Kernel objects a referenced __kptr field may hold besides the arena's (a task or cgroup
# of pyxdp.vm.task_kfuncs), by the fake address range they live in: (base, end, the
# function that drops one reference, the function giving the region the run maps).
_KERNEL_KPTRS: list[tuple[int, int, Callable[[int], None], Callable[[], Region]]] = []


def register_kernel_kptrs(base: int, size: int, put: Callable[[int], None],
                          region: Callable[[], Region]) -> None:
    """Objects at ``[base, base + size)`` are kernel objects whose last reference a map's
    __kptr field may hold: ``put`` drops one (their destructor kfunc, as
    ``bpf_obj_free_fields`` calls it), ``region`` is the memory a run reads them in."""
    _KERNEL_KPTRS.append((base, base + size, put, region))


def _kernel_kptr(addr: int) -> tuple[Callable[[int], None], Callable[[], Region]] | None:
    for base, end, put, region in _KERNEL_KPTRS:
        if base <= addr < end:
            return put, region
    return None


def drop_kptr(addr: int) -> None:
    """What a map does to the object a referenced __kptr field held when the element or
    the map goes: a kernel object loses the field's reference, an arena object is
    dropped."""
    kern = _kernel_kptr(addr)
    if kern is not None:
        kern[0](addr)
    else:
        arena().drop(addr)


def map_arena(vm: Interpreter) -> ObjArena:
    """The arena, added to the run's memory if the run does not see it yet."""
    a = arena()
    if not any(r is a.region for r in vm.mem.regions):
        vm.mem.add(a.region)
    return a


def make_obj_new(btf: Btf | None) -> Callable[..., int]:
    """``bpf_obj_new_impl(local_type_id__k, meta__ign)`` for a program whose BTF is
    ``btf``: the verifier made the id a struct of it (Linux passes the kfunc its size)."""
    sizes: dict[int, tuple[int, int, int]] = {}

    def obj_new(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        got = sizes.get(r1)
        if got is None:
            t = btf.type_by_id(r1) if btf is not None and 0 < r1 < len(btf.types) else None
            if t is None or t.kind is not BtfKind.STRUCT:
                raise HelperFault(f"bpf_obj_new: {r1} is not the id of a struct of the "
                                  "program's BTF")
            assert btf is not None
            rc = dict(btf.obj_fields(r1)).get("bpf_refcount", -1)
            rec = tuple((kind, tuple(sorted((off, node) for off, (_, node) in
                                            btf.graph_roots(r1, kind).items())))
                        for kind in ("bpf_list_head", "bpf_rb_root"))
            got = sizes[r1] = (t.size_type, rc, record_index(tuple(r for r in rec if r[1])))
        return map_arena(vm).alloc(*got)

    return obj_new


def obj_drop(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_obj_drop_impl(p__alloc, meta__ign)``: the object is dropped (freed, or
    for a refcounted one, freed when its last reference goes)."""
    map_arena(vm).drop(r1)
    return 0


def refcount_acquire(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_refcount_acquire_impl(p__refcounted_kptr, meta__ign)``."""
    return map_arena(vm).acquire(r1)


@helper(int(BpfFuncId.BPF_FUNC_kptr_xchg), "kptr_xchg")
def _kptr_xchg(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_kptr_xchg(dst, ptr)``: ``*dst = ptr``, the old value returned (an xchg)."""
    old = vm.mem.load(r1, 8)
    vm.mem.store(r1, 8, r2)
    if old:  # the run may read the object it took out
        kern = _kernel_kptr(old)
        if kern is None:
            map_arena(vm)
        elif not any(r is kern[1]() for r in vm.mem.regions):
            vm.mem.add(kern[1]())
    return old


def _drop_fn(natives: Natives) -> str:
    """bpf_obj_drop's twin: the block onto its class's free list (SLOW for anything but
    a live arena object: Python faults)."""
    f = Text()
    f.at("entry")
    block = f.ins(f"sub i64 %r1, {c64(ARENA_BASE + _HDR)}")
    ret_if(f, f.ins(f"icmp ult i64 {block}, {_HEAD}"), SLOW)
    ret_if(f, f.ins(f"icmp uge i64 {block}, {ARENA_SIZE}"), SLOW)
    ret_if(f, f.ins(f"icmp ne i64 {f.ins('and i64 %r1, 7')}, 0"), SLOW)
    hp = f.ins(f"call ptr @translate(ptr %ctx, i64 {f.ins(f'sub i64 %r1, {_HDR}')}, "
               "i64 16, i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {hp}, null"), SLOW)
    words = f.ins(f"call ptr @translate(ptr %ctx, i64 {c64(ARENA_BASE)}, i64 {_HEAD}, "
                  "i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {words}, null"), SLOW)
    h = f.ins(f"load i64, ptr {hp}, align 8")
    c = f.ins(f"and i64 {h}, 255")
    live = f.ins(f"icmp ne i64 {f.ins(f'and i64 {h}, {_LIVE}')}, 0")
    ok = f.ins(f"and i1 {live}, {f.ins(f'icmp ult i64 {c}, {len(SIZES)}')}")
    ret_if(f, f.ins(f"xor i1 {ok}, true"), SLOW)
    # an object holding lists or trees: Python drops what they hold (bpf_obj_free_fields)
    ret_if(f, f.ins(f"icmp uge i64 {h}, {1 << _REC_SHIFT}"), SLOW)
    _unref(f, hp, h)
    headp = f.gep(words, f.ins(f"shl i64 {f.ins(f'add i64 {c}, 1')}, 3"))
    first = f.ins(f"load i64, ptr {headp}, align 8")
    f.do(f"store i64 {c}, ptr {hp}, align 8")
    f.do(f"store i64 {first}, ptr {f.gep(hp, _HDR)}, align 8")
    f.do(f"store i64 {block}, ptr {headp}, align 8")
    f.do("ret i64 0")
    return f.text("define internal i64 @obj_drop(ptr %ctx, i64 %r1) nounwind")


def _unref(f: Text, hp: str, h: str) -> None:
    """A refcounted object's count (header ``h`` at ``hp``) decremented; the twin
    returns unless it fell to zero."""
    rc = f.ins(f"and i64 {f.ins(f'lshr i64 {h}, {_RC_SHIFT}')}, 65535")
    counted, done, on = f.label("rc"), f.label("rcz"), f.label("free")
    f.cbr(f.ins(f"icmp ne i64 {rc}, 0"), counted, on)
    f.at(counted)
    cp = f.gep(hp, f.ins(f"add i64 {rc}, {_HDR - 1}"))
    n = f.ins(f"sub i32 {f.ins(f'load i32, ptr {cp}, align 4')}, 1")
    f.do(f"store i32 {n}, ptr {cp}, align 4")
    f.cbr(f.ins(f"icmp eq i32 {n}, 0"), on, done)
    f.at(done)
    f.do("ret i64 0")
    f.at(on)


def _acquire_fn(natives: Natives) -> str:
    """bpf_refcount_acquire's twin: refcount_inc_not_zero of a live refcounted object
    (SLOW for anything else: Python faults)."""
    f = Text()
    f.at("entry")
    block = f.ins(f"sub i64 %r1, {c64(ARENA_BASE + _HDR)}")
    ret_if(f, f.ins(f"icmp ult i64 {block}, {_HEAD}"), SLOW)
    ret_if(f, f.ins(f"icmp uge i64 {block}, {ARENA_SIZE}"), SLOW)
    hp = f.ins(f"call ptr @translate(ptr %ctx, i64 {f.ins(f'sub i64 %r1, {_HDR}')}, "
               "i64 16, i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {hp}, null"), SLOW)
    h = f.ins(f"load i64, ptr {hp}, align 8")
    rc = f.ins(f"and i64 {f.ins(f'lshr i64 {h}, {_RC_SHIFT}')}, 65535")
    dead = f.ins(f"icmp eq i64 {f.ins(f'and i64 {h}, {_LIVE}')}, 0")
    bad = f.ins(f"or i1 {f.ins(f'icmp eq i64 {rc}, 0')}, {dead}")
    ret_if(f, bad, SLOW)
    at = f.ins(f"add i64 %r1, {f.ins(f'sub i64 {rc}, 1')}")  # the count's address
    cp = f.ins(f"call ptr @translate(ptr %ctx, i64 {at}, i64 4, i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {cp}, null"), SLOW)
    n = f.ins(f"load i32, ptr {cp}, align 4")
    ret_if(f, f.ins(f"icmp eq i32 {n}, 0"), 0)
    f.do(f"store i32 {f.ins(f'add i32 {n}, 1')}, ptr {cp}, align 4")
    f.do("ret i64 %r1")
    return f.text("define internal i64 @refcount_acquire(ptr %ctx, i64 %r1) nounwind")


def _kptr_xchg_fn(natives: Natives) -> str:
    """bpf_kptr_xchg's twin: an atomic exchange of the 8 bytes at %r1."""
    f = Text()
    f.at("entry")
    p = f.ins("call ptr @translate(ptr %ctx, i64 %r1, i64 8, i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {p}, null"), SLOW)
    f.do(f"ret i64 {f.ins(f'atomicrmw xchg ptr {p}, i64 %r2 seq_cst, align 8')}")
    return f.text("define internal i64 @kptr_xchg(ptr %ctx, i64 %r1, i64 %r2) nounwind")


# The kfuncs by name; bpf_obj_new_impl is bound per program (make_obj_new: its BTF).
OBJ_KFUNCS: dict[str, Callable[..., int]] = {"bpf_obj_drop_impl": obj_drop,
                                             "bpf_refcount_acquire_impl": refcount_acquire}
# (bpf_percpu_obj_drop frees its per-CPU block with the same twin)
DROP_NATIVE = HelperNative("obj_drop", 1, _drop_fn, ("translate",))
register_kfunc("bpf_obj_drop_impl", obj_drop, DROP_NATIVE)
register_kfunc("bpf_refcount_acquire_impl", refcount_acquire,
               HelperNative("refcount_acquire", 1, _acquire_fn, ("translate",)))
register_helper(int(BpfFuncId.BPF_FUNC_kptr_xchg),
                HelperNative("kptr_xchg", 2, _kptr_xchg_fn, ("translate",)))
# What makes a program see the arena: the kfuncs that give it objects, the helper too.
ARENA_USERS = frozenset({"bpf_obj_new_impl", "bpf_obj_drop_impl", "kptr_xchg",
                         "bpf_refcount_acquire_impl",
                         "bpf_list_push_front_impl", "bpf_list_push_back_impl",
                         "bpf_list_pop_front", "bpf_list_pop_back", "bpf_list_front",
                         "bpf_list_back", "bpf_rbtree_add_impl", "bpf_rbtree_remove",
                         "bpf_rbtree_first", "bpf_rbtree_root", "bpf_rbtree_left",
                         "bpf_rbtree_right",
                         "bpf_percpu_obj_new_impl", "bpf_percpu_obj_drop_impl", "per_cpu_ptr",
                         "this_cpu_ptr"})


def uses_arena(names: set[str]) -> bool:
    """Whether a program whose helpers and kfuncs are ``names`` reads objects."""
    return bool(names & ARENA_USERS)
