"""``page_pool_alloc_pages`` in machine code (``net/core/page_pool.c``): the allocation
the native NAPI loop and AF_XDP's native transmit share, over a pool's records in
place (:class:`~pyxdp.net.page_pool.PoolState`, the alloc cache, the ring and the
free stack). The Python reference is :meth:`~pyxdp.net.page_pool.PagePool.alloc`.
"""

from __future__ import annotations

from pyxdp.net import page_pool as _pp
from pyxdp.net.native import njit
from pyxdp.net.page_pool import PP_ALLOC_CACHE_REFILL, PoolState

__all__ = ["_alloc"]

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
REFILL = PP_ALLOC_CACHE_REFILL
_CACHE, _INUSE = _pp._CACHE, _pp._INUSE


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _alloc(psc, cache, ring, free, state):  # type: ignore[no-untyped-def]
    """``page_pool_alloc``: alloc cache, then a refill from the ring, then 64 fresh
    pages from the free list. Returns the page row, or -1."""
    c = psc[P_COUNT]
    if c > 0:
        c -= 1
        psc[P_COUNT] = c
        loc = cache[c]
        psc[P_FAST] += 1
    elif psc[P_RLEN] > 0:
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
    state[loc] = _INUSE
    psc[P_NUSE] += 1
    return loc
