"""A page pool's scalar state (``struct page_pool``'s counters and ``page_pool_stats``) and
the page allocator's, each in one record Python and machine code share, its lock word
among them. Kept apart from :mod:`pyxdp.net.page_pool` so that the locks' native
operations (:mod:`pyxdp.net.page_pool_lock`) need not import the pool.
"""

from __future__ import annotations

from pyxdp.net.record import Field, Record

__all__ = ["AllocState", "PoolState"]


class PoolState(Record):
    """A page pool's scalar state and ``page_pool_stats``, one record that the Python
    methods and the native poll loop both update in place."""

    count = Field()  # alloc.count: pages in the alloc cache
    ring_head = Field()
    ring_len = Field()
    nr_free = Field()  # pages left in the pool's share of the page allocator
    nr_in_use = Field()
    hold_cnt = Field()  # pages_state_hold_cnt
    release_cnt = Field()  # pages_state_release_cnt
    fast = Field()
    slow = Field()
    empty = Field()
    refill = Field()
    cached = Field()
    cache_full = Field()
    ring = Field()
    ring_full = Field()
    slow_high_order = Field()
    waive = Field()
    released_refcnt = Field()
    error = Field()  # native code met a page returned that was not in use (its row + 1)
    # Pages given back to the ring or the page allocator (any context, under the lock);
    # nr_in_use less this is the pages out. nr_in_use is the owner's alone.
    put_cnt = Field()
    lock = Field()  # the ring's lock (ptr_ring's producer/consumer lock): 0 free, 1 held


class AllocState(Record):
    """A page allocator's scalars, one record for Python and native code (the native
    poll loop clones broadcast frames into these pages and frees them at tx
    completion): free pages (the top of the free stack), pages handed out and
    pages freed, ever; and the lock of the free stack and the reference counts
    (the zone lock: polls on several CPUs allocate and free at once)."""

    nr_free = Field()
    allocated = Field()
    freed = Field()
    lock = Field()  # 0 free, 1 held
