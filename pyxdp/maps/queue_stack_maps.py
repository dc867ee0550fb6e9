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
from collections.abc import Iterator
from typing import Any

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

__all__ = ["QueueMap", "StackMap"]

QUEUE_STACK_CREATE_FLAG_MASK = int(MapFlag.BPF_F_NUMA_NODE) | BPF_F_ACCESS_MASK
HEAD, TAIL = 0, 1


class _QueueStack(Map):
    lifo = False

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
        if key is not None and len(key) != 0:
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
