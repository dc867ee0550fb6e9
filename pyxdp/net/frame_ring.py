"""The locked operations on a :class:`~pyxdp.net.frames.FrameRing` (a NIC's rx ring, veth's
``xdp_ring``), in machine code for the native loop and for Python's ``produce``/``consume``
alike: veth's ptr_ring takes ``producer_lock`` around ``__ptr_ring_produce``; here the
consumer takes the same lock around each take, since the cursor is a head and a count both
ends write. Kept apart from :mod:`pyxdp.net.frames` so that importing frames imports no numba
(a program on the interpreter never waits for it).
"""

from __future__ import annotations

from pyxdp.net.atomic import spin_lock, spin_unlock
from pyxdp.net.native import njit
from pyxdp.net.ring_cursor import RING_COLS, RingCursor

__all__ = ["consume", "produce", "ring_lock", "ring_put", "ring_unlock"]

_HEAD = RingCursor.index("head")
_COUNT = RingCursor.index("count")
_LOCK = RingCursor.index("lock")


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def ring_lock(cur):  # type: ignore[no-untyped-def]
    """``spin_lock`` of the ring whose cursor words are ``cur``."""
    spin_lock(cur, _LOCK)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def ring_unlock(cur):  # type: ignore[no-untyped-def]
    """``spin_unlock``: the cursor's changes published with the release."""
    spin_unlock(cur, _LOCK)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def ring_put(cols, cur, pfn, data, length, meta, kind):  # type: ignore[no-untyped-def]
    """``__ptr_ring_produce`` of one frame at the tail (the caller holds the lock);
    False when the ring is full."""
    size = cols.shape[1]
    n = cur[_COUNT]
    if n >= size:
        return False
    pos = (cur[_HEAD] + n) % size
    cols[0, pos] = pfn
    cols[1, pos] = data
    cols[2, pos] = length
    cols[3, pos] = meta
    cols[4, pos] = kind
    cur[_COUNT] = n + 1
    return True


@njit(cache=True, nogil=True, _nrt=False)
def produce(cols, cur, pfn, data, length, meta, kind):  # type: ignore[no-untyped-def]
    ring_lock(cur)
    k = 0
    while k < len(pfn) and ring_put(cols, cur, pfn[k], data[k], length[k], meta[k], kind[k]):
        k += 1
    ring_unlock(cur)
    return k


@njit(cache=True, nogil=True, _nrt=False)
def consume(cols, cur, out, n):  # type: ignore[no-untyped-def]
    ring_lock(cur)
    size = cols.shape[1]
    k = min(n, cur[_COUNT])
    head = cur[_HEAD]
    for j in range(k):
        for c in range(RING_COLS):
            out[c, j] = cols[c, head]
        head = (head + 1) % size
    cur[_HEAD] = head
    cur[_COUNT] -= k
    ring_unlock(cur)
    return k
