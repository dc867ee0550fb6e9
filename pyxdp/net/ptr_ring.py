"""``struct ptr_ring`` (``include/linux/ptr_ring.h``) of xdp_frames, in flat memory that
Python and machine code on two threads use in place.

A cpumap entry's queue is a ptr_ring: NAPI polls produce into it (under the
producer lock), the entry's kthread consumes from it on another CPU. Here a
ring is one record: ``slots`` (columns pfn, data offset, length, metadata
length; ``size`` rows of it) and ``idx``, the producer and consumer
counters, each on its own cache line as the kernel keeps ``producer`` and
``consumer_head`` apart. The counters only grow (the slot is the counter
modulo ``size``); the producer publishes with a release store after writing
the slots and reads the consumer with an acquire load, and the consumer
mirrors that, so one producer and one consumer need no lock. Several
producers (NAPI polls on several CPUs, native or not, with or without the
host's lock) take ``producer_lock``, a word beside the producer counter
(:func:`ring_produce_locked`, ``ptr_ring_produce``); several consumers take
``consumer_lock``, a word beside the consumer counter
(:func:`ring_consume_locked`, ``ptr_ring_consume_batched``). Both locks are
taken with ``cmpxchg`` by machine code and by Python's :class:`PtrRing` alike.
A cpumap entry's queue has one consumer, its kthread, which takes frames
unlocked (``__ptr_ring_consume_batched``) as the kernel's does.

The same functions serve both sides: :class:`PtrRing`'s methods call the
native ones (one call per batch), and the native NAPI loop and kthread inline
them.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pyxdp.net.atomic import load_acquire64, spin_lock, spin_unlock, store_release64
from pyxdp.net.native import njit

__all__ = ["IDX_CONS", "IDX_CONS_LOCK", "IDX_PROD", "IDX_PROD_LOCK", "PtrRing", "ring_consume",
           "ring_consume_locked", "ring_count", "ring_produce", "ring_produce_locked"]

I64 = npt.NDArray[np.int64]

IDX_PROD = 0
IDX_PROD_LOCK = 1  # producer_lock, on the producer's cache line
IDX_CONS = 8  # 64 bytes further: another cache line
IDX_CONS_LOCK = 9  # consumer_lock
_IDX_WORDS = 16


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def ring_produce(slots, idx, src, k):  # type: ignore[no-untyped-def]
    """``__ptr_ring_produce`` of the ``k`` frames in columns ``src[:, :k]``, in order,
    as many as fit; returns how many were taken (the rest are the caller's)."""
    size = slots.shape[1]
    prod = idx[IDX_PROD]
    room = size - (prod - load_acquire64(idx, IDX_CONS))
    k = min(k, room)
    for j in range(k):
        s = (prod + j) % size
        for c in range(slots.shape[0]):
            slots[c, s] = src[c, j]
    if k > 0:
        store_release64(idx, IDX_PROD, prod + k)
    return max(k, 0)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def ring_consume(slots, idx, dst, n):  # type: ignore[no-untyped-def]
    """``__ptr_ring_consume_batched``: up to ``n`` frames into ``dst[:, :k]``; returns k."""
    size = slots.shape[1]
    cons = idx[IDX_CONS]
    k = min(n, load_acquire64(idx, IDX_PROD) - cons)
    for j in range(k):
        s = (cons + j) % size
        for c in range(slots.shape[0]):
            dst[c, j] = slots[c, s]
    if k > 0:
        store_release64(idx, IDX_CONS, cons + k)
    return max(k, 0)


# Called, not inlined: their spin loops kept out of the poll loops' code.
@njit(cache=True, nogil=True, _nrt=False)
def ring_produce_locked(slots, idx, src, k):  # type: ignore[no-untyped-def]
    """``ptr_ring_produce`` of a batch: :func:`ring_produce` under ``producer_lock``."""
    spin_lock(idx, IDX_PROD_LOCK)
    k = ring_produce(slots, idx, src, k)
    spin_unlock(idx, IDX_PROD_LOCK)
    return k


@njit(cache=True, nogil=True, _nrt=False)
def ring_consume_locked(slots, idx, dst, n):  # type: ignore[no-untyped-def]
    """``ptr_ring_consume_batched``: :func:`ring_consume` under ``consumer_lock``."""
    spin_lock(idx, IDX_CONS_LOCK)
    k = ring_consume(slots, idx, dst, n)
    spin_unlock(idx, IDX_CONS_LOCK)
    return k


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def ring_count(idx):  # type: ignore[no-untyped-def]
    return load_acquire64(idx, IDX_PROD) - load_acquire64(idx, IDX_CONS)


@njit(cache=True, nogil=True, _nrt=False)
def _count(idx):  # type: ignore[no-untyped-def]
    return ring_count(idx)


class PtrRing:
    """A ring of ``size`` entries of ``cols`` int64 columns (see the module docstring)."""

    def __init__(self, size: int, cols: int = 4) -> None:
        if size <= 0:
            raise ValueError(f"ring size must be > 0, not {size}")
        self.size = size
        self.slots: I64 = np.zeros((cols, size), np.int64)
        self.idx: I64 = np.zeros(_IDX_WORDS, np.int64)

    def __len__(self) -> int:
        return int(_count(self.idx))

    def produce(self, cols: I64) -> int:
        """Queue the columns ``cols`` (``cols x k``) as far as they fit, under the
        producer lock; returns how many."""
        k = cols.shape[1]
        if not k:
            return 0
        return int(ring_produce_locked(self.slots, self.idx,
                                       np.ascontiguousarray(cols, np.int64), k))

    def consume(self, n: int) -> I64:
        """Up to ``n`` entries, oldest first (``cols x k``), under the consumer lock."""
        out = np.empty((self.slots.shape[0], max(n, 0)), np.int64)
        k = int(ring_consume_locked(self.slots, self.idx, out, n)) if n > 0 else 0
        return out[:, :k]
