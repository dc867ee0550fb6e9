"""The lock of a page pool's ring (``ptr_ring``'s lock, and the pool's share of the page
allocator under it): a word of its :class:`~pyxdp.net.pool_state.PoolState` taken with
``cmpxchg``, in machine code for the native loops and for Python's
:class:`~pyxdp.net.page_pool.PagePool` alike, so each excludes the others across threads.
Kept apart from :mod:`pyxdp.net.page_pool` so that importing the pool imports no numba.
"""

from __future__ import annotations

from pyxdp.net.atomic import spin_lock, spin_unlock
from pyxdp.net.native import njit
from pyxdp.net.pool_state import PoolState

__all__ = ["pool_lock", "pool_lock_ir", "pool_unlock", "pool_unlock_ir"]

_LOCK = PoolState.index("lock")


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
