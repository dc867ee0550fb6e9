"""Queue and stack maps, as ``kernel/bpf/queue_stack_maps.c``.

``BPF_MAP_TYPE_QUEUE`` (FIFO) and ``BPF_MAP_TYPE_STACK`` (LIFO) share one ring
of ``max_entries + 1`` value slots with ``head`` (next push) and ``tail``
(oldest), as the kernel's ``bpf_queue_stack``. Checks
(``queue_stack_map_alloc_check``): ``key_size`` 0, ``value_size`` and
``max_entries`` non-zero, no flags but NUMA and access bits (EINVAL);
``value_size > KMALLOC_MAX_SIZE`` is E2BIG.

Operations and errnos: push (``bpf_map_push_elem``, or BPF_MAP_UPDATE_ELEM
with no key) takes ``BPF_ANY`` or ``BPF_EXIST``; a full map is E2BIG, except
with ``BPF_EXIST``, which drops the oldest element to make room (for a stack
too: the bottom one). ``BPF_NOEXIST`` or any other flag is EINVAL. Pop and
peek of an empty map are ENOENT (user space: BPF_MAP_LOOKUP_AND_DELETE_ELEM /
BPF_MAP_LOOKUP_ELEM with no key, flags must be 0). Delete and get_next_key
are EINVAL.

Storage (numpy, for native code): ``elements`` ``uint8[(max_entries + 1) *
value_size]`` and ``hdr`` ``uint32[2]`` = head, tail; empty when head ==
tail, full when ``(head + 1) % size == tail``. No program-visible region:
values are copied in and out by the helpers.
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import numpy as np

from pyxdp.maps.base import (
    BPF_ANY,
    BPF_EXIST,
    BPF_F_ACCESS_MASK,
    BPF_NOEXIST,
    KMALLOC_MAX_SIZE,
    MAX_STORAGE_BYTES,
    Map,
    MapError,
    MapSpec,
    U8Array,
    access_ok,
    einval,
)
from pyxdp.uapi.bpf import BpfMapType, MapFlag
from pyxdp.vm.jit.abi import MapInfo
from pyxdp.vm.jit.ir import Text, ret_if
from pyxdp.vm.jit.natives import MapNative, map_desc, register_map

__all__ = ["QueueMap", "StackMap"]

QUEUE_STACK_CREATE_FLAG_MASK = int(MapFlag.BPF_F_NUMA_NODE) | BPF_F_ACCESS_MASK
HEAD, TAIL = 0, 1


class _QueueStack(Map):
    lifo = False
    batch_ops: ClassVar[frozenset[str]] = frozenset()  # queue_map_ops, stack_map_ops: none

    def __init__(self, spec: MapSpec) -> None:
        op = "map_create"
        if (spec.max_entries == 0 or spec.key_size != 0 or spec.value_size == 0
                or spec.map_flags & ~QUEUE_STACK_CREATE_FLAG_MASK
                or not access_ok(spec.map_flags)):
            raise einval(op, "queue/stack: key_size 0, value_size and max_entries > 0")
        if spec.value_size > KMALLOC_MAX_SIZE:
            raise MapError(op, _errno.E2BIG, "value_size above KMALLOC_MAX_SIZE")
        if (spec.max_entries + 1) * spec.value_size > MAX_STORAGE_BYTES:
            raise MapError(op, _errno.ENOMEM, "queue/stack storage too large")
        super().__init__(spec)
        self.size = self.max_entries + 1
        self.elements: U8Array = np.zeros(self.size * self.value_size, np.uint8)
        self.hdr = np.zeros(2, np.uint32)

    # -- ring ---------------------------------------------------------------------------
    def _count(self) -> int:
        head, tail = int(self.hdr[HEAD]), int(self.hdr[TAIL])
        return head - tail if head >= tail else head + self.size - tail

    def _slot(self, i: int) -> bytes:
        vs = self.value_size
        return self.elements[i * vs:(i + 1) * vs].tobytes()

    def _top_index(self) -> int:
        """Slot that pop/peek read: the tail (queue) or the one below head (stack)."""
        if self.lifo:
            head = int(self.hdr[HEAD])
            return head - 1 if head else self.size - 1
        return int(self.hdr[TAIL])

    # -- program-side operations --------------------------------------------------------
    def push(self, value: bytes, flags: int = BPF_ANY) -> None:
        """``bpf_map_push_elem``: BPF_EXIST on a full map overwrites the oldest element."""
        if flags & BPF_NOEXIST or flags > BPF_EXIST:
            raise einval("push", f"flags {flags:#x}: BPF_ANY or BPF_EXIST only")
        data = self._value(value, None, "push")
        if self._count() == self.max_entries:
            if not flags & BPF_EXIST:
                raise MapError("push", _errno.E2BIG, "map is full")
            self.hdr[TAIL] = (int(self.hdr[TAIL]) + 1) % self.size
        head = int(self.hdr[HEAD])
        vs = self.value_size
        self.elements[head * vs:(head + 1) * vs] = np.frombuffer(data, np.uint8)
        self.hdr[HEAD] = (head + 1) % self.size

    def peek(self) -> bytes | None:
        """``bpf_map_peek_elem``: the next value to pop, None when empty (ENOENT)."""
        if self._count() == 0:
            return None
        return self._slot(self._top_index())

    def pop(self) -> bytes | None:
        """``bpf_map_pop_elem``: remove and return the next value, None when empty (ENOENT)."""
        if self._count() == 0:
            return None
        i = self._top_index()
        value = self._slot(i)
        if self.lifo:
            self.hdr[HEAD] = i
        else:
            self.hdr[TAIL] = (i + 1) % self.size
        return value

    def try_pop(self) -> tuple[int, bytes | None]:
        value = self.pop()
        return (0, value) if value is not None else (-_errno.ENOENT, None)

    def try_peek(self) -> tuple[int, bytes | None]:
        value = self.peek()
        return (0, value) if value is not None else (-_errno.ENOENT, None)

    # -- the bpf(2) view -------------------------------------------------------------------
    def _no_key(self, key: bytes | None, op: str) -> None:
        if key is not None and (not isinstance(key, bytes | bytearray | memoryview)
                                or len(key) != 0):
            raise einval(op, "queue/stack maps take no key")

    def lookup(self, key: bytes | None = None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        self._no_key(key, "lookup")
        if flags:
            raise einval("lookup", f"unknown flags {flags:#x}")
        return self.peek()

    def update(self, key: bytes | None, value: bytes, flags: int = BPF_ANY, *,
               cpu: int | None = None) -> None:
        self._no_key(key, "update")
        self.push(value, flags)

    def lookup_and_delete(self, key: bytes | None = None, flags: int = 0) -> bytes | None:
        self._no_key(key, "lookup_and_delete")
        if flags:
            raise einval("lookup_and_delete", f"unknown flags {flags:#x}")
        return self.pop()

    def delete(self, key: bytes | None = None) -> None:
        raise einval("delete", "queue/stack elements are popped, not deleted")

    def get_next_key(self, key: bytes | None) -> bytes | None:
        raise einval("get_next_key", "queue/stack maps have no keys")

    # -- Python API -----------------------------------------------------------------------
    def contents(self) -> list[bytes]:
        """The values in pop order, without popping them."""
        n = self._count()
        idx = np.arange(n)
        if self.lifo:
            slots = (int(self.hdr[HEAD]) - 1 - idx) % self.size
        else:
            slots = (int(self.hdr[TAIL]) + idx) % self.size
        rows = self.elements.reshape(self.size, self.value_size)[slots]
        return [r.tobytes() for r in rows]

    def __iter__(self) -> Iterator[Any]:
        """Decoded values in pop order (a queue/stack has no keys)."""
        for raw in self.contents():
            yield self.codec.decode_value(self, raw)

    def items(self) -> list[tuple[Any, Any]]:
        raise einval("items", "queue/stack maps have no keys")

    def __len__(self) -> int:
        return self._count()

    def clear(self) -> None:
        self.hdr[:] = 0

    def append(self, value: object) -> None:
        """Push a Python value (``BPF_ANY``)."""
        self.push(self.codec.encode_value(self, value))

    def popleft(self) -> Any:
        """Pop a Python value; IndexError when empty."""
        raw = self.pop()
        if raw is None:
            raise IndexError("pop from an empty map")
        return self.codec.decode_value(self, raw)


class QueueMap(_QueueStack):
    """``BPF_MAP_TYPE_QUEUE``: first in, first out."""

    map_type = int(BpfMapType.BPF_MAP_TYPE_QUEUE)


class StackMap(_QueueStack):
    """``BPF_MAP_TYPE_STACK``: last in, first out."""

    map_type = int(BpfMapType.BPF_MAP_TYPE_STACK)
    lifo = True


# --- native code: the JIT's twins of push, pop and peek -----------------------------------
# _QueueStack is the reference path; native code moves the same ring (its descriptor's
# value_data = elements, hdr = head, tail) in place.

def _ring(f: Text, m: MapInfo) -> tuple[str, str, str, str]:
    """The ring's elements pointer, its header pointer, head and tail (i64)."""
    hdr = map_desc(f, m, "hdr")
    head = f.ins(f"zext i32 {f.ins(f'load i32, ptr {hdr}, align 4')} to i64")
    tail = f.ins(f"zext i32 {f.ins(f'load i32, ptr {f.gep(hdr, 4)}, align 4')} to i64")
    return map_desc(f, m, "value_data"), hdr, head, tail


def _count(f: Text, size: int, head: str, tail: str) -> str:
    """_count: elements between tail and head."""
    wrapped = f.ins(f"sub i64 {f.ins(f'add i64 {head}, {size}')}, {tail}")
    return f.ins(f"select i1 {f.ins(f'icmp uge i64 {head}, {tail}')}, "
                 f"i64 {f.ins(f'sub i64 {head}, {tail}')}, i64 {wrapped}")


def _push_fn(tag: str, m: MapInfo) -> str:
    """_QueueStack.try_push: 0, -EINVAL (flags), -E2BIG (full without BPF_EXIST)."""
    size, vs = m.max_entries + 1, m.value_size
    f = Text()
    f.at("entry")
    noexist = f.ins(f"and i64 %flags, {BPF_NOEXIST}")
    bad = f.ins(f"or i1 {f.ins(f'icmp ne i64 {noexist}, 0')}, "
                f"{f.ins(f'icmp ugt i64 %flags, {BPF_EXIST}')}")
    ret_if(f, bad, -_errno.EINVAL)
    elems, hdr, head, tail = _ring(f, m)
    full = f.ins(f"icmp eq i64 {_count(f, size, head, tail)}, {m.max_entries}")
    exist = f.ins(f"icmp ne i64 {f.ins(f'and i64 %flags, {BPF_EXIST}')}, 0")
    ret_if(f, f.ins(f"and i1 {full}, {f.ins(f'xor i1 {exist}, true')}"), -_errno.E2BIG)
    # full with BPF_EXIST: the oldest element dropped first
    tail1 = f.ins(f"urem i64 {f.ins(f'add i64 {tail}, 1')}, {size}")
    new_tail = f.ins(f"select i1 {full}, i64 {tail1}, i64 {tail}")
    f.do(f"store i32 {f.ins(f'trunc i64 {new_tail} to i32')}, ptr {f.gep(hdr, 4)}, align 4")
    f.memmove(f.gep(elems, f.ins(f"mul i64 {head}, {vs}")), "%val", vs)
    head1 = f.ins(f"urem i64 {f.ins(f'add i64 {head}, 1')}, {size}")
    f.do(f"store i32 {f.ins(f'trunc i64 {head1} to i32')}, ptr {hdr}, align 4")
    f.do("ret i64 0")
    return f.text(f"define internal i64 @{tag}_push{m.slot}(ptr %ctx, ptr %val, i64 %flags) "
                  "nounwind")


def _take_fn(what: str, lifo: bool) -> Callable[[str, MapInfo], str]:
    """_QueueStack.pop / peek into ``%dst``: 0, or -ENOENT when empty."""
    def build(tag: str, m: MapInfo) -> str:
        size, vs = m.max_entries + 1, m.value_size
        f = Text()
        f.at("entry")
        elems, hdr, head, tail = _ring(f, m)
        ret_if(f, f.ins(f"icmp eq i64 {_count(f, size, head, tail)}, 0"), -_errno.ENOENT)
        if lifo:  # _top_index: the slot below head
            below = f.ins(f"sub i64 {head}, 1")
            top = f.ins(f"select i1 {f.ins(f'icmp eq i64 {head}, 0')}, i64 {size - 1}, "
                        f"i64 {below}")
        else:
            top = tail
        f.memmove("%dst", f.gep(elems, f.ins(f"mul i64 {top}, {vs}")), vs)
        if what == "pop":
            if lifo:
                f.do(f"store i32 {f.ins(f'trunc i64 {top} to i32')}, ptr {hdr}, align 4")
            else:
                nxt = f.ins(f"urem i64 {f.ins(f'add i64 {top}, 1')}, {size}")
                f.do(f"store i32 {f.ins(f'trunc i64 {nxt} to i32')}, ptr {f.gep(hdr, 4)}, "
                     "align 4")
        f.do("ret i64 0")
        return f.text(f"define internal i64 @{tag}_{what}{m.slot}(ptr %ctx, ptr %dst) "
                      "nounwind")
    return build


def _describe(m: Any) -> dict[str, int]:
    return {"value_data": int(m.elements.ctypes.data), "hdr": int(m.hdr.ctypes.data)}


for _cls, _lifo in ((QueueMap, False), (StackMap, True)):
    register_map(_cls.map_type, MapNative(
        "ring", (_cls,), _describe,
        functions={"push": _push_fn, "pop": _take_fn("pop", _lifo),
                   "peek": _take_fn("peek", _lifo)}))
