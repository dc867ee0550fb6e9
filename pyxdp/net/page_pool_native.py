"""``page_pool_alloc_pages`` and ``page_pool_put_page`` in machine code
(``net/core/page_pool.c``): the allocation the native NAPI loop and AF_XDP's native
transmit share, and the put into the ring (or, ring full, the page allocator) that
every context giving a page back makes, over a pool's records in place
(:class:`~pyxdp.net.page_pool.PoolState`, the alloc cache, the ring and the free
stack). The ring and the free stack change under the pool's lock word
(:mod:`pyxdp.net.page_pool_lock`, ``cmpxchg``), which Python's
:class:`~pyxdp.net.page_pool.PagePool` takes too: with threaded NAPI a veth's poll gives
another device's pages back into that device's ring while its poll refills from it.
The Python reference is :meth:`~pyxdp.net.page_pool.PagePool.alloc`/``put_page``.
"""

from __future__ import annotations

from pyxdp.net import page_pool as _pp
from pyxdp.net.native import njit
from pyxdp.net.page_pool import PP_ALLOC_CACHE_REFILL, PP_ALLOC_CACHE_SIZE, PoolState
from pyxdp.net.page_pool_lock import pool_lock_ir as _lock
from pyxdp.net.page_pool_lock import pool_unlock_ir as _unlock

__all__ = ["_alloc", "_put_ring", "_recycle"]

# numba reads module-level integers as constants.
P_COUNT = PoolState.index("count")
P_RHEAD = PoolState.index("ring_head")
P_RLEN = PoolState.index("ring_len")
P_NFREE = PoolState.index("nr_free")
P_NUSE = PoolState.index("nr_in_use")
P_HOLD = PoolState.index("hold_cnt")
P_FAST = PoolState.index("fast")
P_SLOW = PoolState.index("slow")
P_EMPTY = PoolState.index("empty")
P_REFILL = PoolState.index("refill")
P_RING = PoolState.index("ring")
P_RING_FULL = PoolState.index("ring_full")
P_RELEASE = PoolState.index("release_cnt")
P_ERROR = PoolState.index("error")
P_PUT = PoolState.index("put_cnt")
P_CACHED = PoolState.index("cached")
P_CACHE_FULL = PoolState.index("cache_full")
REFILL = PP_ALLOC_CACHE_REFILL
_FREE, _CACHE, _RING, _INUSE = _pp._FREE, _pp._CACHE, _pp._RING, _pp._INUSE


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _put_ring(psc, ring, free, state, loc):  # type: ignore[no-untyped-def]
    """``page_pool_put_page`` without direct recycling, from any context: the ring,
    else the page allocator, under the pool's lock (``ptr_ring_produce``'s, per
    page); counted in ``put_cnt``, not in the owner's ``nr_in_use``."""
    if state[loc] != _INUSE:
        if psc[P_ERROR] == 0:
            psc[P_ERROR] = loc + 1
        return
    _lock(psc)
    psc[P_PUT] += 1
    size = len(ring)
    if psc[P_RLEN] < size:
        ring[(psc[P_RHEAD] + psc[P_RLEN]) % size] = loc
        psc[P_RLEN] += 1
        state[loc] = _RING
        psc[P_RING] += 1
    else:
        psc[P_RING_FULL] += 1
        state[loc] = _FREE
        free[psc[P_NFREE]] = loc
        psc[P_NFREE] += 1
        psc[P_RELEASE] += 1
    _unlock(psc)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _recycle(psc, cache, ring, free, state, loc):  # type: ignore[no-untyped-def]
    """``page_pool_recycle_direct``: alloc cache, else ring, else the free list."""
    if state[loc] != _INUSE:
        if psc[P_ERROR] == 0:
            psc[P_ERROR] = loc + 1
        return
    c = psc[P_COUNT]
    if c < PP_ALLOC_CACHE_SIZE:
        psc[P_NUSE] -= 1
        cache[c] = loc
        psc[P_COUNT] = c + 1
        state[loc] = _CACHE
        psc[P_CACHED] += 1
        return
    psc[P_CACHE_FULL] += 1
    _put_ring(psc, ring, free, state, loc)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _alloc(psc, cache, ring, free, state):  # type: ignore[no-untyped-def]
    """``page_pool_alloc``: alloc cache, then a refill from the ring, then 64 fresh
    pages from the free list (both under the pool's lock: other threads put pages
    there). Returns the page row, or -1."""
    c = psc[P_COUNT]
    if c > 0:
        c -= 1
        psc[P_COUNT] = c
        loc = cache[c]
        psc[P_FAST] += 1
        state[loc] = _INUSE
        psc[P_NUSE] += 1
        return loc
    _lock(psc)
    if psc[P_RLEN] > 0:
        k = min(psc[P_RLEN], REFILL)
        size = len(ring)
        h = psc[P_RHEAD]
        for j in range(k):
            r = ring[(h + j) % size]
            cache[j] = r
            state[r] = _CACHE
        psc[P_RHEAD] = (h + k) % size
        psc[P_RLEN] -= k
        psc[P_COUNT] = k - 1
        psc[P_REFILL] += 1
        loc = cache[k - 1]
    else:
        psc[P_EMPTY] += 1
        k = min(psc[P_NFREE], REFILL)
        if k == 0:
            _unlock(psc)
            return -1
        nf = psc[P_NFREE]
        for j in range(k):
            r = free[nf - k + j]
            cache[j] = r
            state[r] = _CACHE
        psc[P_NFREE] = nf - k
        psc[P_HOLD] += k
        psc[P_COUNT] = k - 1
        psc[P_SLOW] += 1
        loc = cache[k - 1]
    _unlock(psc)
    state[loc] = _INUSE
    psc[P_NUSE] += 1
    return loc
