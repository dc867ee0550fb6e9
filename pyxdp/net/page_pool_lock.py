"""The locks of the page memories: a page pool's ring (``ptr_ring``'s lock, and the pool's
share of the page allocator under it), a word of its
:class:`~pyxdp.net.pool_state.PoolState`, and the page allocator's (the zone lock
over its free stack and reference counts), a word of its
:class:`~pyxdp.net.pool_state.AllocState`; each taken with ``cmpxchg``, in machine
code for the native loops and for Python's :class:`~pyxdp.net.page_pool.PagePool`
and :class:`~pyxdp.net.page_pool.PageAllocator` alike, so each excludes the others
across threads. The allocator's ``alloc_page`` and ``put_page`` for native code are
here too, under its lock. Kept apart from :mod:`pyxdp.net.page_pool` so that
importing the pool imports no numba.
"""

from __future__ import annotations

from pyxdp.net.atomic import spin_lock, spin_unlock
from pyxdp.net.native import njit
from pyxdp.net.pool_state import AllocState, PoolState

__all__ = ["alloc_lock", "alloc_page_ir", "alloc_unlock", "pool_lock", "pool_lock_ir",
           "pool_unlock", "pool_unlock_ir", "put_page_ir"]

_LOCK = PoolState.index("lock")
_A_LOCK = AllocState.index("lock")
_A_NFREE = AllocState.index("nr_free")
_A_ALLOCATED = AllocState.index("allocated")
_A_FREED = AllocState.index("freed")


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def pool_lock_ir(psc):  # type: ignore[no-untyped-def]
    """``spin_lock`` of the pool whose state words are ``psc`` (inlined in native code)."""
    spin_lock(psc, _LOCK)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def pool_unlock_ir(psc):  # type: ignore[no-untyped-def]
    """``spin_unlock``: the ring's changes published with the release."""
    spin_unlock(psc, _LOCK)


@njit(cache=True, nogil=True, _nrt=False)
def pool_lock(psc):  # type: ignore[no-untyped-def]
    """:func:`pool_lock_ir` for Python (the interpreter lock released while it spins)."""
    pool_lock_ir(psc)


@njit(cache=True, nogil=True, _nrt=False)
def pool_unlock(psc):  # type: ignore[no-untyped-def]
    pool_unlock_ir(psc)


@njit(cache=True, nogil=True, _nrt=False)
def alloc_lock(st):  # type: ignore[no-untyped-def]
    """The page allocator's lock (``st``: its state words), for Python."""
    spin_lock(st, _A_LOCK)


@njit(cache=True, nogil=True, _nrt=False)
def alloc_unlock(st):  # type: ignore[no-untyped-def]
    spin_unlock(st, _A_LOCK)


# Called, not inlined: their spin loops kept out of the poll loops' code.
@njit(cache=True, nogil=True, _nrt=False)
def alloc_page_ir(st, free, ref):  # type: ignore[no-untyped-def]
    """``alloc_page`` from the allocator whose state words, free stack and reference
    counts are given: a row with one reference, or -1 when memory ran out."""
    spin_lock(st, _A_LOCK)
    nf = st[_A_NFREE]
    row = -1
    if nf != 0:
        nf -= 1
        row = free[nf]
        st[_A_NFREE] = nf
        st[_A_ALLOCATED] += 1
        ref[row] = 1
    spin_unlock(st, _A_LOCK)
    return row


@njit(cache=True, nogil=True, _nrt=False)
def put_page_ir(st, free, ref, row):  # type: ignore[no-untyped-def]
    """``put_page`` of page ``row``: freed with its last reference (onto the top of the
    free stack)."""
    spin_lock(st, _A_LOCK)
    rc = ref[row] - 1
    ref[row] = rc
    if rc == 0:
        free[st[_A_NFREE]] = row
        st[_A_NFREE] += 1
        st[_A_FREED] += 1
    spin_unlock(st, _A_LOCK)
