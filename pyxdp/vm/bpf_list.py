"""The BPF linked list: the ``bpf_list_push_front_impl``/``bpf_list_push_back_impl``,
``bpf_list_pop_front``/``bpf_list_pop_back`` and ``bpf_list_front``/``bpf_list_back``
kfuncs and ``bpf_list_head_free`` of ``kernel/bpf/helpers.c`` (Linux 6.18).

A ``struct bpf_list_head`` (16 bytes, in a map value, global data or an object) is the
kernel's ``struct list_head`` (next, prev); a ``struct bpf_list_node`` (24 bytes,
in an object of :mod:`pyxdp.vm.memalloc`) is a ``list_head`` and its owner (the
head it is on, NULL when on none). A zeroed head is an empty list, made a
circular one the first time a kfunc sees it. The pointers are the fake addresses
programs see, so both engines and user space walk the same lists: the JIT's
twins below do in native code what the Python kfuncs do.

The verifier (``pyxdp.verifier``) makes every call hold the head's
``bpf_spin_lock`` and hand over owned objects only, which are on no list
unless they are refcounted (``bpf_refcount_acquire``: one object on two lists,
or pushed twice, when the push fails); it also gives the pops' and peeks' node
pointers the offset of the node in its struct, from which the program finds
the object.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyxdp.errors import HelperFault
from pyxdp.vm.context import neg
from pyxdp.vm.jit.abi import SLOW, Natives
from pyxdp.vm.jit.ir import Text, ret_if
from pyxdp.vm.jit.natives import HelperNative, host_or_slow, register_kfunc
from pyxdp.vm.memalloc import ARENA_BASE, ARENA_SIZE, arena, map_arena, register_root_free

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["LIST_KFUNCS", "free_lists"]

_NEXT, _PREV, _OWNER = 0, 8, 16  # struct bpf_list_node_kern


def _head(vm: Interpreter, h: int) -> tuple[int, int]:
    """The head's (next, prev), a zeroed one made empty first (INIT_LIST_HEAD)."""
    nxt = vm.mem.load(h + _NEXT, 8)
    if not nxt:
        vm.mem.store(h + _NEXT, 8, h)
        vm.mem.store(h + _PREV, 8, h)
        return h, h
    return nxt, vm.mem.load(h + _PREV, 8)


def _push(tail: bool) -> Callable[..., int]:
    def push(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        """__bpf_list_add: node ``r2`` after the head (front) or before it (back); a
        node already on a list (a refcounted object's) is not added, its object is
        dropped and the push is -EINVAL."""
        a = map_arena(vm)
        if vm.mem.load(r2 + _OWNER, 8):
            a.drop(a.object_at(r2))
            return neg(errno.EINVAL)
        nxt, prv = _head(vm, r1)
        before, after = (prv, r1) if tail else (r1, nxt)
        vm.mem.store(after + _PREV, 8, r2)
        vm.mem.store(r2 + _NEXT, 8, after)
        vm.mem.store(r2 + _PREV, 8, before)
        vm.mem.store(before + _NEXT, 8, r2)
        vm.mem.store(r2 + _OWNER, 8, r1)
        return 0
    return push


def _pop(tail: bool) -> Callable[..., int]:
    def pop(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        """__bpf_list_del: the first (last) node taken off, or NULL for an empty list."""
        map_arena(vm)
        nxt, prv = _head(vm, r1)
        n = prv if tail else nxt
        if n == r1 or vm.mem.load(n + _OWNER, 8) != r1:
            return 0
        a, b = vm.mem.load(n + _NEXT, 8), vm.mem.load(n + _PREV, 8)
        vm.mem.store(b + _NEXT, 8, a)
        vm.mem.store(a + _PREV, 8, b)
        vm.mem.store(n + _NEXT, 8, n)
        vm.mem.store(n + _PREV, 8, n)
        vm.mem.store(n + _OWNER, 8, 0)
        return n
    return pop


def _peek(tail: bool) -> Callable[..., int]:
    def peek(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        """bpf_list_front/back: the first (last) node, left on the list; NULL if none."""
        map_arena(vm)
        nxt = vm.mem.load(r1 + _NEXT, 8)
        if not nxt or nxt == r1:
            return 0
        return vm.mem.load(r1 + _PREV, 8) if tail else nxt
    return peek


def free_lists(buf: Any, base: int, stride: int, heads: tuple[tuple[int, int], ...]) -> None:
    """``bpf_list_head_free`` of every head in the values in ``buf`` (the region at
    ``base``, values ``stride`` bytes apart): each is (offset in the value, offset of
    the node in the objects); the objects still on the list are dropped and the head
    left zeroed (empty)."""
    a = arena()
    words = a.u64
    for at in range(0, len(buf) - stride + 1, stride):
        for off, node_off in heads:
            h = base + at + off
            n = int.from_bytes(buf[at + off:at + off + 8], "little")
            buf[at + off:at + off + 16] = bytes(16)
            for _ in range(ARENA_SIZE // 32):  # at most as many objects as fit
                if not n or n == h:
                    break
                rel = n - ARENA_BASE
                if not 0 <= rel < ARENA_SIZE - 24:
                    raise HelperFault(f"list node {n:#x} is not in the object arena")
                nxt = int(words[rel >> 3])
                a.drop(n - node_off)
                n = nxt


# -- native twins (the JIT) ---------------------------------------------------------------

def _load(f: Text, p: str, off: int) -> str:
    return f.ins(f"load i64, ptr {f.gep(p, off)}, align 8")


def _store(f: Text, p: str, off: int, v: str) -> None:
    f.do(f"store i64 {v}, ptr {f.gep(p, off)}, align 8")


def _head_ir(f: Text, hp: str) -> tuple[str, str]:
    """INIT_LIST_HEAD of a zeroed head; its (next, prev)."""
    n0 = _load(f, hp, _NEXT)
    z = f.ins(f"icmp eq i64 {n0}, 0")
    nxt = f.ins(f"select i1 {z}, i64 %r1, i64 {n0}")
    prv = f.ins(f"select i1 {z}, i64 %r1, i64 {_load(f, hp, _PREV)}")
    _store(f, hp, _NEXT, nxt)
    _store(f, hp, _PREV, prv)
    return nxt, prv


def _push_fn(kind: str, tail: bool) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        f = Text()
        f.at("entry")
        hp = host_or_slow(f, "%r1", 16)
        np_ = host_or_slow(f, "%r2", 24)
        # a node on a list already: Python drops its object (the failure is rare)
        ret_if(f, f.ins(f"icmp ne i64 {_load(f, np_, _OWNER)}, 0"), SLOW)
        n0 = _load(f, hp, _NEXT)
        # the neighbour the node goes beside (the head itself while the list is empty)
        other = _load(f, hp, _PREV) if tail else n0
        other = f.ins(f"select i1 {f.ins(f'icmp eq i64 {n0}, 0')}, i64 %r1, i64 {other}")
        op = host_or_slow(f, other, 16)
        nxt, prv = _head_ir(f, hp)
        if tail:
            before, after, bp, ap = prv, "%r1", op, hp
        else:
            before, after, bp, ap = "%r1", nxt, hp, op
        _store(f, ap, _PREV, "%r2")
        _store(f, np_, _NEXT, after)
        _store(f, np_, _PREV, before)
        _store(f, bp, _NEXT, "%r2")
        _store(f, np_, _OWNER, "%r1")
        f.do("ret i64 0")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2) nounwind")
    return define


def _pop_fn(kind: str, tail: bool) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        f = Text()
        f.at("entry")
        hp = host_or_slow(f, "%r1", 16)
        nxt, prv = _head_ir(f, hp)
        n = prv if tail else nxt
        ret_if(f, f.ins(f"icmp eq i64 {n}, %r1"), 0)
        np_ = host_or_slow(f, n, 24)
        ret_if(f, f.ins(f"icmp ne i64 {_load(f, np_, _OWNER)}, %r1"), 0)
        a, b = _load(f, np_, _NEXT), _load(f, np_, _PREV)
        ap, bp = host_or_slow(f, a, 16), host_or_slow(f, b, 16)
        _store(f, bp, _NEXT, a)
        _store(f, ap, _PREV, b)
        _store(f, np_, _NEXT, n)
        _store(f, np_, _PREV, n)
        _store(f, np_, _OWNER, "0")
        f.do(f"ret i64 {n}")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1) nounwind")
    return define


def _peek_fn(kind: str, tail: bool) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        f = Text()
        f.at("entry")
        hp = host_or_slow(f, "%r1", 16)
        nxt = _load(f, hp, _NEXT)
        empty = f.ins(f"or i1 {f.ins(f'icmp eq i64 {nxt}, 0')}, "
                      f"{f.ins(f'icmp eq i64 {nxt}, %r1')}")
        ret_if(f, empty, 0)
        f.do(f"ret i64 {_load(f, hp, _PREV) if tail else nxt}")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1) nounwind")
    return define


LIST_KFUNCS: dict[str, Callable[..., int]] = {}
for _name, _make, _fn, _nargs in (
        ("push_front_impl", _push, _push_fn, 2), ("push_back_impl", _push, _push_fn, 2),
        ("pop_front", _pop, _pop_fn, 1), ("pop_back", _pop, _pop_fn, 1),
        ("front", _peek, _peek_fn, 1), ("back", _peek, _peek_fn, 1)):
    _tail = "back" in _name
    _kind = "list_" + _name.removesuffix("_impl")
    LIST_KFUNCS["bpf_list_" + _name] = _py = _make(_tail)
    register_kfunc("bpf_list_" + _name, _py,
                   HelperNative(_kind, _nargs, _fn(_kind, _tail), ("translate",)))
# an object holding a bpf_list_head empties it when dropped (bpf_obj_free_fields)
register_root_free("bpf_list_head", free_lists)
