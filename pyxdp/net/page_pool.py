"""Page memory for the userspace datapath: ``net/core/page_pool.c`` and the page
allocator under it (``alloc_page``/``put_page``/``page_frag_free``).

Packets live in flat numpy memory. A :class:`PageMemory` is one region: a
single ``uint8`` buffer of ``npages * page_size`` bytes (``.pages`` views it as
one row per page). Every page has a global *page frame number* (pfn), the
model's ``struct page *``: the region id in the high bits, the page index in
the low :data:`PFN_REGION_SHIFT` bits. A :class:`MemMap` (the kernel's
memmap) finds the region of any pfn, and turns the fake kernel addresses
stored in ``xdp_frame.data`` back into pfns (``virt_to_page``), so a frame
can be returned to the right allocator with nothing but its address, even
after a redirect moved it to another device's queue.

Two kinds of region:

- :class:`PagePool` (``struct page_pool``): the per-rx-queue recycling
  allocator. Allocation takes from the 128-entry direct alloc cache, then
  refills up to 64 pages from the ``ptr_ring``, then falls back to the slow
  path (64 fresh pages at a time). A returned page goes to the alloc cache
  when direct recycling is allowed, else to the ring, else (ring full) back
  to the page allocator. ``alloc_bulk``/``put_pages``/``put_page_bulk``
  do the same for whole numpy arrays of pages and keep the kernel's
  counters exactly as the equivalent sequence of single calls would.
- :class:`PageAllocator`: refcounted order-0 pages, the memory of
  ``MEM_TYPE_PAGE_ORDER0`` and ``MEM_TYPE_PAGE_SHARED`` frames and of
  ``xdpf_clone``. Each :class:`MemMap` has one, ``memmap.system``.

Strict accounting (the default) checks every return: a page returned twice,
a page of another region or a page never handed out raises
:class:`PageAccountingError` naming the pages, and ``check()``/``close()``
raise when pages are still out (a leak), listing them.

Simplified against the kernel: a pool owns its region, so its "page
allocator" is that region's free list (the slow path and
``page_pool_return_page`` use it); no DMA mapping or syncing, no NUMA
(``waive`` stays 0), no page fragments (``page_pool_alloc_frag``) and no
elevated page refcounts in pools (a pool page is always recyclable, so
``released_refcnt`` stays 0); direct recycling happens when the caller says
``allow_direct`` or the pool's ``napi_local`` flag is set (the model of
``page_pool_napi_local``: the datapath sets it while it runs the pool's NAPI poll, for
the thread - the CPU - running it). After ``page_pool_destroy`` with pages still out,
each returning page is released at once and the pool is finally freed with the last one
(the kernel's delayed ``page_pool_release_retry`` work, without the delay). One
thread stands for one CPU; as in the kernel, only the ring is shared between
them and locked (``ptr_ring``'s lock: once per page on the single-page path,
once per call on the bulk and vector paths), while the alloc cache belongs to
the pool's NAPI context. The lock is a word of the pool's :class:`PoolState`
taken with ``cmpxchg`` (:mod:`pyxdp.net.page_pool_lock`), so Python and the
native loops on other threads exclude each other with it; it also covers the
pool's share of the page allocator, where a put finding the ring full releases
its page. Pages given back that way are counted apart (``put_cnt``) from the
owner's ``nr_in_use``, as the kernel keeps ``pages_state_hold_cnt`` with the
owner and ``pages_state_release_cnt`` atomic: the owner's NAPI loop keeps its
count in registers while other threads return pages.
"""

from __future__ import annotations

import array
import logging
import mmap
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from pyxdp.errors import PyxdpError
from pyxdp.net.pool_state import AllocState, PoolState
from pyxdp.net.record import Alias

__all__ = [
    "DIRECT_MAP_BASE",
    "MEMMAP",
    "PAGE_POOL_DEFAULT_RING_SIZE",
    "PAGE_POOL_MAX_RING_SIZE",
    "PAGE_SIZE",
    "PFN_REGION_SHIFT",
    "PP_ALLOC_CACHE_REFILL",
    "AllocState",
    "PoolState",
    "PP_ALLOC_CACHE_SIZE",
    "MemMap",
    "PageAccountingError",
    "PageAllocator",
    "PageMemory",
    "PagePool",
    "PagePoolStats",
]

log = logging.getLogger(__name__)

PAGE_SIZE = 4096
MAX_PAGE_ORDER = 10
PP_ALLOC_CACHE_SIZE = 128  # pool->alloc.cache entries
PP_ALLOC_CACHE_REFILL = 64  # pages moved per refill from the ring or the page allocator
PAGE_POOL_DEFAULT_RING_SIZE = 1024  # ring size when page_pool_params.pool_size is 0
PAGE_POOL_MAX_RING_SIZE = 16384  # page_pool_init clamps pool_size to this

# A pfn is (region id << PFN_REGION_SHIFT) | page index. Region ids are never
# reused, so a stale pfn of a freed region is caught instead of hitting a new one.
PFN_REGION_SHIFT = 20
MAX_REGION_PAGES = 1 << PFN_REGION_SHIFT
# Fake kernel virtual addresses (what xdp_frame.data holds): each region gets a
# 64 GiB window. Kept below 2**63 so addresses fit int64 numpy arrays.
DIRECT_MAP_BASE = 0x0000_5000_0000_0000
REGION_ADDR_SHIFT = 36
_ADDR_MASK = (1 << REGION_ADDR_SHIFT) - 1

# PagePool page states (one byte per page).
_FREE, _CACHE, _RING, _INUSE = 0, 1, 2, 3
_STATE_NAMES = {_FREE: "free", _CACHE: "in the alloc cache", _RING: "in the ring",
                _INUSE: "in use"}

_I64 = np.int64
# Below this many pages a plain Python loop beats numpy's fixed cost per call.
_SMALL = 24


class PageAccountingError(PyxdpError):
    """A page was returned twice, never handed out, belongs elsewhere, or leaked.

    ``pages`` holds the pfns concerned (empty for lifetime errors such as use
    after ``destroy``); ``owner`` names the region.
    """

    def __init__(self, message: str, *, pages: Iterable[int] = (), owner: str = "") -> None:
        self.pages = tuple(int(p) for p in pages)
        self.owner = owner
        super().__init__(f"{owner}: {message}" if owner else message)


def _as_pfns(pfns: npt.ArrayLike) -> NDArray[np.int64]:
    return np.ascontiguousarray(pfns, dtype=_I64).reshape(-1)


class MemMap:
    """The pages of one simulated machine: region ids, pfns and fake addresses.

    ``system`` is its order-0 page allocator (``dev_alloc_page``), created on
    first use with ``system_pages`` pages (memory is committed only as pages
    are touched, so an idle allocator costs next to nothing).
    """

    def __init__(self, *, system_pages: int = 16384) -> None:
        self._regions: dict[int, PageMemory] = {}
        self._next_id = 1
        self._system_pages = system_pages
        self._system: PageAllocator | None = None
        # Threaded NAPI polls (and cpumap kthreads) may be the first to use ``system``
        # at once: without this lock each made an allocator of its own, and pages one
        # took were freed into, or checked against, the other.
        self._lock = threading.RLock()

    # -- regions -------------------------------------------------------------------
    def _attach(self, mem: PageMemory) -> int:
        with self._lock:
            rid = self._next_id
            self._next_id += 1
            self._regions[rid] = mem
        return rid

    def _detach(self, mem: PageMemory) -> None:
        with self._lock:
            self._regions.pop(mem.region_id, None)

    @property
    def regions(self) -> list[PageMemory]:
        return list(self._regions.values())

    @property
    def system(self) -> PageAllocator:
        """The order-0 page allocator of this machine (``alloc_page``/``put_page``)."""
        system = self._system
        if system is None:
            with self._lock:
                if self._system is None:
                    self._system = PageAllocator(self._system_pages, memmap=self,
                                                 name="system")
                system = self._system
        return system

    def find(self, pfn: int) -> PageMemory:
        """The live region holding ``pfn`` (the kernel's ``pfn_to_page``)."""
        mem = self._regions.get(pfn >> PFN_REGION_SHIFT)
        if mem is None or not 0 <= pfn - mem.pfn_base < mem.npages:
            raise PageAccountingError(f"pfn {pfn:#x} is not a page of any live memory region",
                                      pages=(pfn,))
        return mem

    def split(self, pfns: NDArray[np.int64]
              ) -> list[tuple[PageMemory, NDArray[np.intp], NDArray[np.int64]]]:
        """Group ``pfns`` by region: ``(region, positions, rows)`` in first-seen order.

        ``rows`` are the pages' row numbers in the region, checked to exist.
        Positions keep their order inside a group, so a per-region return sees
        pages in the order the caller gave them.
        """
        if pfns.size == 0:
            return []
        r0 = int(pfns[0]) >> PFN_REGION_SHIFT
        mem = self._regions.get(r0)
        if mem is not None:
            rows = pfns - mem.pfn_base
            # One test for "all in this region": a page of any other region has a
            # row that is negative (huge as unsigned) or at least 2**20 >= npages.
            if int(rows.view(np.uint64).max()) < mem.npages:
                return [(mem, np.arange(pfns.size), rows)]
        rid = pfns >> PFN_REGION_SHIFT
        uniq, first, inv = np.unique(rid, return_index=True, return_inverse=True)
        return [self._group(int(uniq[k]), pfns[pos], pos)
                for k in np.argsort(first, kind="stable") if (pos := np.flatnonzero(inv == k)).size]

    def _group(self, rid: int, pfns: NDArray[np.int64], pos: NDArray[np.intp]
               ) -> tuple[PageMemory, NDArray[np.intp], NDArray[np.int64]]:
        mem = self._region_or_raise(rid, pfns)
        rows = pfns - mem.pfn_base
        if int(rows.max()) >= mem.npages:
            bad = pfns[rows >= mem.npages]
            raise PageAccountingError(f"{_fmt_pfns(bad)} past the end of {mem.name}",
                                      pages=bad[:16].tolist(), owner=mem.name)
        return mem, pos, rows

    def _region_or_raise(self, rid: int, pfns: NDArray[np.int64]) -> PageMemory:
        mem = self._regions.get(rid)
        if mem is None:
            raise PageAccountingError(
                f"{_fmt_pfns(pfns)} not page(s) of any live memory region "
                f"(region {rid} is unknown or freed)", pages=pfns[:16].tolist())
        return mem

    # -- addresses -----------------------------------------------------------------
    def virt_to_page(self, addr: int) -> int:
        """``virt_to_page``: the pfn of the page holding fake address ``addr``."""
        rel = addr - DIRECT_MAP_BASE
        mem = self._regions.get(rel >> REGION_ADDR_SHIFT) if rel >= 0 else None
        if mem is None:
            raise PageAccountingError(f"address {addr:#x} is not in any live memory region")
        idx = (rel & _ADDR_MASK) // mem.page_size
        if idx >= mem.npages:
            raise PageAccountingError(f"address {addr:#x} is past the end of {mem.name}")
        return mem.pfn_base + idx

    def virt_to_pages(self, addrs: NDArray[np.int64]) -> NDArray[np.int64]:
        """Vector ``virt_to_page``."""
        rel = addrs - DIRECT_MAP_BASE
        rid = rel >> REGION_ADDR_SHIFT
        out = np.empty(addrs.size, dtype=_I64)
        if not rid.size:
            return out
        lo, hi = int(rid.min()), int(rid.max())
        for r in [lo] if lo == hi else np.unique(rid).tolist():
            mem = self._regions.get(r)
            sel = rid == r if lo != hi else slice(None)
            if mem is None:
                bad = addrs[sel][:4].tolist()
                raise PageAccountingError(
                    "address(es) " + ", ".join(f"{a:#x}" for a in bad)
                    + " not in any live memory region")
            idx = (rel[sel] & _ADDR_MASK) >> (mem.page_size.bit_length() - 1)
            if idx.size and int(idx.max()) >= mem.npages:
                raise PageAccountingError(f"address past the end of {mem.name}")
            out[sel] = mem.pfn_base + idx
        return out

    # -- accounting ----------------------------------------------------------------
    def outstanding(self) -> dict[str, NDArray[np.int64]]:
        """Pages still handed out, per region name (empty regions left out)."""
        return {m.name: p for m in self._regions.values() if (p := m.in_use()).size}

    def check(self) -> None:
        """Raise :class:`PageAccountingError` if any region has pages out."""
        for mem in list(self._regions.values()):
            mem.check()


MEMMAP = MemMap()  # the default machine, used when no memmap is given


def _fmt_pfns(pfns: NDArray[np.int64] | list[int], limit: int = 8) -> str:
    vals = [int(p) for p in (pfns.tolist() if isinstance(pfns, np.ndarray) else pfns)]
    shown = ", ".join(f"{p:#x}" for p in vals[:limit])
    more = f" and {len(vals) - limit} more" if len(vals) > limit else ""
    return f"{len(vals)} page(s) [pfn {shown}{more}]"


class PageMemory:
    """One region of page memory: a flat ``uint8`` buffer, one row per page.

    ``buf`` is the whole buffer, ``pages`` the ``(npages, page_size)`` view,
    ``words``/``qwords`` the same as 32/64-bit words and ``raw`` the memory
    itself (an anonymous ``mmap``, for ``struct``). Pages are named by pfn;
    ``local(pfns)`` gives their row numbers.
    """

    kind = "memory"

    def __init__(self, npages: int, page_size: int = PAGE_SIZE, *, memmap: MemMap | None = None,
                 name: str = "", strict: bool = True) -> None:
        if not 0 < npages <= MAX_REGION_PAGES:
            raise ValueError(f"npages must be in 1..{MAX_REGION_PAGES}, not {npages}")
        order = (page_size // PAGE_SIZE).bit_length() - 1
        if page_size < PAGE_SIZE or page_size != PAGE_SIZE << order or order > MAX_PAGE_ORDER:
            raise ValueError(f"page_size must be {PAGE_SIZE} << order with order <= "
                             f"{MAX_PAGE_ORDER}, not {page_size}")
        if npages * page_size > 1 << REGION_ADDR_SHIFT:
            raise ValueError(f"a region holds at most {1 << REGION_ADDR_SHIFT} bytes")
        self.npages = npages
        self.page_size = page_size
        self.page_shift = page_size.bit_length() - 1
        self.nbytes = npages * page_size
        self.order = order
        self.strict = strict
        self.memmap = memmap if memmap is not None else MEMMAP
        # One anonymous mapping (zeroed, committed only where touched), two
        # views: ``raw`` for struct and scalar access on one-frame paths,
        # ``buf``/``pages`` for numpy batches.
        self.raw = mmap.mmap(-1, npages * page_size)
        self.buf: NDArray[np.uint8] = np.frombuffer(self.raw, dtype=np.uint8)
        self.pages: NDArray[np.uint8] = self.buf.reshape(npages, page_size)
        # The same pages as 32- and 64-bit words: one gather reads a header field.
        self.words: NDArray[np.uint32] = self.buf.view(np.uint32).reshape(npages, -1)
        self.qwords: NDArray[np.int64] = self.buf.view(np.int64).reshape(npages, -1)
        self.region_id = self.memmap._attach(self)
        self.pfn_base = self.region_id << PFN_REGION_SHIFT
        self.addr_base = DIRECT_MAP_BASE + (self.region_id << REGION_ADDR_SHIFT)
        self.name = name or f"{self.kind}{self.region_id}"

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name!r} {self.npages} x {self.page_size} B, "
                f"{self.in_use().size} in use>")

    # -- addressing -----------------------------------------------------------------
    def local(self, pfns: npt.ArrayLike) -> NDArray[np.int64]:
        """Row numbers of ``pfns`` in ``pages``; raises if any is not in this region."""
        loc = _as_pfns(pfns) - self.pfn_base
        if loc.size and (int(loc.min()) < 0 or int(loc.max()) >= self.npages):
            bad = _as_pfns(pfns)[(loc < 0) | (loc >= self.npages)]
            raise PageAccountingError(f"{_fmt_pfns(bad)} not in this region",
                                      pages=bad[:16].tolist(), owner=self.name)
        return loc

    def pfns(self, local: npt.ArrayLike) -> NDArray[np.int64]:
        """The pfns of page rows ``local``."""
        return np.asarray(local, dtype=_I64) + self.pfn_base

    def page(self, pfn: int) -> NDArray[np.uint8]:
        """A writable view of one page."""
        row: NDArray[np.uint8] = self.pages[self._local1(pfn)]
        return row

    def page_address(self, pfn: int) -> int:
        """``page_address``: the fake kernel address of the page's first byte."""
        return self.addr_base + self._local1(pfn) * self.page_size

    def page_addresses(self, pfns: npt.ArrayLike) -> NDArray[np.int64]:
        return self.addr_base + self.local(pfns) * self.page_size

    def write(self, pfn: int, offset: int, data: bytes) -> None:
        """Copy ``data`` into page ``pfn`` at ``offset`` (a driver's DMA write)."""
        if offset < 0 or offset + len(data) > self.page_size:
            raise ValueError(f"{len(data)} bytes at offset {offset} overflow a "
                             f"{self.page_size}-byte page")
        row = self.page(pfn)
        row[offset:offset + len(data)] = np.frombuffer(data, dtype=np.uint8)

    def read(self, pfn: int, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.page_size:
            raise ValueError(f"{length} bytes at offset {offset} are outside the page")
        return self.page(pfn)[offset:offset + length].tobytes()

    def _local1(self, pfn: int) -> int:
        loc = pfn - self.pfn_base
        if not 0 <= loc < self.npages:
            raise PageAccountingError(f"pfn {pfn:#x} is not in this region", pages=(pfn,),
                                      owner=self.name)
        return loc

    # -- accounting (subclasses) -----------------------------------------------------
    def in_use(self) -> NDArray[np.int64]:
        """Pfns of the pages handed out and not yet returned."""
        raise NotImplementedError

    def in_use_mask(self, local: NDArray[np.int64]) -> NDArray[np.bool_]:
        """For rows ``local``: is each page handed out (writable by its holder)?"""
        raise NotImplementedError

    def require_in_use(self, pfns: npt.ArrayLike, what: str) -> None:
        """Strict mode: raise unless every page of ``pfns`` is handed out."""
        if not self.strict:
            return
        loc = self.local(pfns)
        bad = loc[~self.in_use_mask(loc)]
        if bad.size:
            raise PageAccountingError(f"{what}: {_fmt_pfns(self.pfns(bad))} not allocated",
                                      pages=self.pfns(bad[:16]).tolist(), owner=self.name)

    def check(self) -> None:
        """Raise :class:`PageAccountingError` naming every page still out (a leak)."""
        out = self.in_use()
        if out.size:
            raise PageAccountingError(
                f"leak: {_fmt_pfns(out)} never returned "
                f"(rows {', '.join(str(int(r)) for r in (out[:8] - self.pfn_base))}"
                f"{'...' if out.size > 8 else ''})", pages=out[:64].tolist(), owner=self.name)


class PageAllocator(PageMemory):
    """Refcounted order-0 pages: ``alloc_page``, ``get_page``, ``put_page``.

    Memory of ``MEM_TYPE_PAGE_ORDER0`` and ``MEM_TYPE_PAGE_SHARED`` frames
    (``page_frag_free`` drops the reference of the page holding an address)
    and of ``xdpf_clone``. Pages come back with the bytes they had: like
    ``alloc_page`` without ``__GFP_ZERO``, nothing is cleared. The scalars
    live in :attr:`state` (:class:`AllocState`); :attr:`native_arrays` gives
    native code the record, the free stack and the reference counts.
    """

    kind = "pages"
    _nfree = Alias(AllocState, "nr_free")
    allocated = Alias(AllocState, "allocated")  # pages handed out, ever
    freed = Alias(AllocState, "freed")  # pages whose last reference went, ever

    def __init__(self, npages: int, page_size: int = PAGE_SIZE, *, memmap: MemMap | None = None,
                 name: str = "", strict: bool = True) -> None:
        super().__init__(npages, page_size, memmap=memmap, name=name, strict=strict)
        self.refcount: NDArray[np.int32] = np.zeros(npages, dtype=np.int32)
        # Free stack, top at the end; built descending so the first pages out are 0, 1, 2...
        self._free_a = array.array("q", range(npages - 1, -1, -1))
        self._free = np.frombuffer(self._free_a, dtype=_I64)
        self.state = AllocState(nr_free=npages)

    @property
    def native_arrays(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int32]]:
        """(state record, free stack, reference counts), used in place by native code."""
        return self.state.words, self._free, self.refcount

    @property
    def native_args(self) -> tuple[Any, ...]:
        """The allocator for a native call (:mod:`pyxdp.net.skbuff_native`, the polls):
        pages, their word views, address base, :attr:`native_arrays`, pfn base."""
        return (self.pages, self.words, self.qwords, self.addr_base, *self.native_arrays,
                self.pfn_base)

    @property
    def nr_free(self) -> int:
        return self._nfree

    def _lock(self) -> None:
        """The allocator's lock (:mod:`pyxdp.net.page_pool_lock`): native polls on other
        CPUs allocate and free here while Python does."""
        from pyxdp.net.page_pool_lock import alloc_lock  # numba: only once used
        alloc_lock(self.state.words)

    def _unlock(self) -> None:
        from pyxdp.net.page_pool_lock import alloc_unlock
        alloc_unlock(self.state.words)

    def alloc_page(self) -> int | None:
        """``alloc_page``: a pfn with refcount 1, or ``None`` when memory is exhausted."""
        self._lock()
        try:
            if not self._nfree:
                return None
            self._nfree -= 1
            loc = self._free_a[self._nfree]
            self.refcount[loc] = 1
            self.allocated += 1
        finally:
            self._unlock()
        return self.pfn_base + loc

    def alloc_pages_bulk(self, n: int) -> NDArray[np.int64]:
        """``alloc_pages_bulk``: up to ``n`` pages (fewer when memory runs out)."""
        self._lock()
        try:
            k = min(n, self._nfree)
            loc = self._free[self._nfree - k:self._nfree][::-1].copy()
            self._nfree -= k
            self.refcount[loc] = 1
            self.allocated += k
        finally:
            self._unlock()
        return loc + self.pfn_base

    def get_page(self, pfn: int) -> None:
        """``get_page``: take another reference to an allocated page."""
        loc = self._local1(pfn)
        self._lock()
        try:
            if self.strict and self.refcount[loc] <= 0:
                raise PageAccountingError(f"get_page on free page {pfn:#x}", pages=(pfn,),
                                          owner=self.name)
            self.refcount[loc] += 1
        finally:
            self._unlock()

    def page_ref_count(self, pfn: int) -> int:
        return int(self.refcount[self._local1(pfn)])

    def put_page(self, pfn: int) -> None:
        """``put_page``: drop one reference; the page is freed with the last one."""
        loc = self._local1(pfn)
        self._lock()
        try:
            rc = int(self.refcount[loc]) - 1
            if rc < 0:
                # Without strict mode this still has to stop: a negative count
                # would hand the page out twice.
                raise PageAccountingError(f"double free: page {pfn:#x} is already free",
                                          pages=(pfn,), owner=self.name)
            self.refcount[loc] = rc
            if rc == 0:
                self._free_a[self._nfree] = loc
                self._nfree += 1
                self.freed += 1
        finally:
            self._unlock()

    def put_pages(self, pfns: npt.ArrayLike) -> None:
        """Vector ``put_page``: one reference dropped per entry (repeats allowed)."""
        loc = self.local(pfns)
        if not loc.size:
            return
        uniq, counts = np.unique(loc, return_counts=True)
        self._lock()
        try:
            rc = self.refcount[uniq].astype(_I64) - counts
            if (rc < 0).any():
                bad = self.pfns(uniq[rc < 0])
                raise PageAccountingError(f"double free: {_fmt_pfns(bad)} already free",
                                          pages=bad[:16].tolist(), owner=self.name)
            self.refcount[uniq] = rc
            gone = uniq[rc == 0]
            self._free[self._nfree:self._nfree + gone.size] = gone
            self._nfree += gone.size
            self.freed += gone.size
        finally:
            self._unlock()

    def page_frag_free(self, addr: int) -> None:
        """``page_frag_free``: drop the reference of the page holding ``addr``."""
        self.put_page(self.memmap.virt_to_page(addr))

    def in_use(self) -> NDArray[np.int64]:
        return np.flatnonzero(self.refcount > 0).astype(_I64) + self.pfn_base

    def in_use_mask(self, local: NDArray[np.int64]) -> NDArray[np.bool_]:
        return self.refcount[local] > 0


@dataclass
class PagePoolStats:
    """``struct page_pool_stats``: alloc and recycle counters, kernel names.

    ``fast``: allocations served from the alloc cache; ``slow`` /
    ``slow_high_order``: slow-path allocations (order 0 / higher);
    ``empty``: refills attempted on an empty ring; ``refill``: allocations
    that refilled the cache from the ring; ``waive``: pages dropped on NUMA
    mismatch (never here). ``cached``: pages recycled into the alloc cache;
    ``cache_full``: direct recycles that found it full; ``ring``: pages
    recycled into the ring; ``ring_full``: ring-full events (one per page on
    the single-page path, one per bulk call on the bulk path);
    ``released_refcnt``: pages released for an elevated refcount (never here).
    """

    fast: int = 0
    slow: int = 0
    slow_high_order: int = 0
    empty: int = 0
    refill: int = 0
    waive: int = 0
    cached: int = 0
    cache_full: int = 0
    ring: int = 0
    ring_full: int = 0
    released_refcnt: int = 0


DisconnectHook = Callable[["PagePool"], None]

class _PoolStats:
    """``pool.stats``: the counters of the pool's :class:`PoolState`, as attributes."""

    __slots__ = ("state",)

    def __init__(self, state: PoolState) -> None:
        self.state = state

    fast = Alias(PoolState, "fast")
    slow = Alias(PoolState, "slow")
    slow_high_order = Alias(PoolState, "slow_high_order")
    empty = Alias(PoolState, "empty")
    refill = Alias(PoolState, "refill")
    waive = Alias(PoolState, "waive")
    cached = Alias(PoolState, "cached")
    cache_full = Alias(PoolState, "cache_full")
    ring = Alias(PoolState, "ring")
    ring_full = Alias(PoolState, "ring_full")
    released_refcnt = Alias(PoolState, "released_refcnt")


class PagePool(PageMemory):
    """``struct page_pool``: a recycling page allocator over its own region.

    ``PagePool(npages, page_size=4096, pool_size=0)``: ``pool_size`` is the
    ring size (0 means the kernel default of 1024; clamped to 16384).
    """

    kind = "page_pool"

    def __init__(self, npages: int, page_size: int = PAGE_SIZE, *, pool_size: int = 0,
                 memmap: MemMap | None = None, name: str = "", strict: bool = True,
                 napi_local: bool = False) -> None:
        self.state = PoolState()
        super().__init__(npages, page_size, memmap=memmap, name=name, strict=strict)
        if pool_size < 0:
            raise ValueError(f"pool_size must be >= 0, not {pool_size}")
        self.ring_size = min(pool_size, PAGE_POOL_MAX_RING_SIZE) if pool_size \
            else PAGE_POOL_DEFAULT_RING_SIZE
        self.napi_local = napi_local
        self.stats = _PoolStats(self.state)
        self.user_cnt = 1  # page_pool_create's reference; xdp mem models add theirs
        self.xdp_mem_id = 0
        self._disconnect: DisconnectHook | None = None
        self._destroyed = False  # page_pool_destroy dropped the last user reference
        self._released = False  # ... and every page is back: the pool is gone
        # One byte of state per page; the bytearray serves scalar paths, the
        # numpy view the vector ones (same memory).
        self._state_b = bytearray(npages)
        self._state = np.frombuffer(self._state_b, dtype=np.uint8)
        self._free_a = array.array("q", range(npages - 1, -1, -1))
        self._free = np.frombuffer(self._free_a, dtype=_I64)
        self._nfree = npages
        self._cache_a = array.array("q", bytes(8 * PP_ALLOC_CACHE_SIZE))
        self._cache = np.frombuffer(self._cache_a, dtype=_I64)
        self._scratch = np.zeros(npages, dtype=_I64)  # for the duplicate test
        self._ring_a = array.array("q", bytes(8 * self.ring_size))
        self._ring = np.frombuffer(self._ring_a, dtype=_I64)

    _napi_thread = 0  # the thread running the pool's NAPI poll now (0: none)

    @property
    def napi_local(self) -> bool:
        """``page_pool_napi_local``: the caller runs the pool's NAPI poll - true on the
        thread that set it (the pool's CPU), false on others (a cpumap kthread's
        returns while that poll runs must not touch the alloc cache)."""
        return self._napi_thread == threading.get_ident()

    @napi_local.setter
    def napi_local(self, on: bool) -> None:
        self._napi_thread = threading.get_ident() if on else 0

    # The scalar state, kept in :attr:`state` (shared in place with native code).
    _count = Alias(PoolState, "count")
    _rhead = Alias(PoolState, "ring_head")
    _rlen = Alias(PoolState, "ring_len")
    _nfree = Alias(PoolState, "nr_free")
    _nuse = Alias(PoolState, "nr_in_use")
    _nput = Alias(PoolState, "put_cnt")
    hold_cnt = Alias(PoolState, "hold_cnt")
    release_cnt = Alias(PoolState, "release_cnt")

    @property
    def native_arrays(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64],
                                     NDArray[np.int64], NDArray[np.uint8]]:
        """(state words, alloc cache, ring, free list, page states): the pool as native
        code runs it, in place."""
        return self.state.words, self._cache, self._ring, self._free, self._state

    # -- introspection ---------------------------------------------------------------
    def get_stats(self) -> PagePoolStats:
        """``page_pool_get_stats``: a snapshot of the counters."""
        st = self.state
        return PagePoolStats(**{f.name: getattr(st, f.name) for f in fields(PagePoolStats)})

    def inflight(self) -> int:
        """``page_pool_inflight``: pages the pool holds from the page allocator.

        Counts cached and ringed pages too, as the kernel does; after
        ``destroy`` (which empties cache and ring) it is the pages still out.
        """
        return self.hold_cnt - self.release_cnt

    @property
    def alloc_count(self) -> int:
        """Pages in the direct alloc cache."""
        return self._count

    @property
    def ring_count(self) -> int:
        return self._rlen

    @property
    def nr_in_use(self) -> int:
        return self._nuse - self._nput

    def _lock(self) -> None:
        """``spin_lock`` of the ring (and the allocator share under it), the word
        native code takes too."""
        from pyxdp.net.page_pool_lock import pool_lock  # numba: only once used
        pool_lock(self.state.words)

    def _unlock(self) -> None:
        from pyxdp.net.page_pool_lock import pool_unlock
        pool_unlock(self.state.words)

    @property
    def destroyed(self) -> bool:
        return self._destroyed

    @property
    def released(self) -> bool:
        return self._released

    def in_use(self) -> NDArray[np.int64]:
        return np.flatnonzero(self._state == _INUSE).astype(_I64) + self.pfn_base

    def in_use_mask(self, local: NDArray[np.int64]) -> NDArray[np.bool_]:
        mask: NDArray[np.bool_] = self._state[local] == _INUSE
        return mask

    def cached_pages(self) -> NDArray[np.int64]:
        """Pfns in the alloc cache, bottom to top (the next allocation is the last)."""
        return self._cache[:self._count] + self.pfn_base

    def ring_pages(self) -> NDArray[np.int64]:
        """Pfns in the ring, oldest first (the next refill takes them in this order)."""
        idx = (self._rhead + np.arange(self._rlen)) % self.ring_size
        return self._ring[idx] + self.pfn_base

    # -- allocation ------------------------------------------------------------------
    def alloc(self) -> int | None:
        """``page_pool_dev_alloc_pages``: one page (pfn), or ``None`` when exhausted."""
        if self._destroyed:
            self._use_after_destroy("alloc")
        c = self._count
        if c:
            c -= 1
            self._count = c
            loc = self._cache_a[c]
            self.stats.fast += 1
        else:
            loc = self._refill()
            if loc < 0:
                loc = self._alloc_slow()
                if loc < 0:
                    return None
        self._state_b[loc] = _INUSE
        self._nuse += 1
        return self.pfn_base + loc

    def alloc_bulk(self, n: int) -> NDArray[np.int64]:
        """``n`` allocations at once: up to ``n`` pfns, fewer when memory runs out.

        Same pages, same order and same counters as ``n`` calls of ``alloc``.
        """
        if self._destroyed:
            self._use_after_destroy("alloc_bulk")
        out = np.empty(max(n, 0), dtype=_I64)
        got = 0
        while got < n:
            c = self._count
            if c:
                k = min(c, n - got)
                out[got:got + k] = self._cache[c - k:c][::-1]
                self._count = c - k
                self.stats.fast += k
                got += k
                continue
            loc = self._refill()
            if loc < 0:
                loc = self._alloc_slow()
                if loc < 0:
                    break
            out[got] = loc
            got += 1
        res = out[:got]
        self._state[res] = _INUSE
        self._nuse += got
        return res + self.pfn_base

    def _refill(self) -> int:
        """``page_pool_refill_alloc_cache``: move up to 64 ring pages into the cache."""
        self._lock()  # the ring's consumer side: ptr_ring's consumer lock
        try:
            if not self._rlen:
                self.stats.empty += 1
                return -1
            k = min(self._rlen, PP_ALLOC_CACHE_REFILL)
            got = self._ring_pop(k)
        finally:
            self._unlock()
        self._cache[:k] = got
        self._state[got] = _CACHE
        self._count = k - 1
        self.stats.refill += 1
        return int(got[k - 1])

    def _alloc_slow(self) -> int:
        """``__page_pool_alloc_netmems_slow``: fresh pages from the page allocator
        (whose free list puts on other threads extend: under the lock)."""
        self._lock()
        try:
            return self._alloc_slow_locked()
        finally:
            self._unlock()

    def _alloc_slow_locked(self) -> int:
        if self.order:
            # The kernel has no bulk allocation for high-order pages: one at a time.
            if not self._nfree:
                return -1
            self._nfree -= 1
            self.hold_cnt += 1
            self.stats.slow_high_order += 1
            return self._free_a[self._nfree]
        k = min(self._nfree, PP_ALLOC_CACHE_REFILL)
        if not k:
            return -1
        fresh = self._free[self._nfree - k:self._nfree]
        self._cache[:k] = fresh
        self._state[fresh] = _CACHE
        self._nfree -= k
        self.hold_cnt += k
        self._count = k - 1
        self.stats.slow += 1
        return int(self._cache_a[k - 1])

    # -- return ----------------------------------------------------------------------
    def put_page(self, pfn: int, allow_direct: bool = False) -> None:
        """``page_pool_put_full_page``: recycle one page (cache, ring, or release)."""
        loc = pfn - self.pfn_base
        if self.strict and (not 0 <= loc < self.npages or self._state_b[loc] != _INUSE):
            self._check_one(pfn, loc)
        if self._destroyed:
            self._nuse -= 1
            self._release_one(loc)
            self._maybe_finish()
            return
        if allow_direct or self.napi_local:
            if self._count < PP_ALLOC_CACHE_SIZE:
                self._nuse -= 1
                self._cache_a[self._count] = loc
                self._count += 1
                self._state_b[loc] = _CACHE
                self.stats.cached += 1
                return
            self.stats.cache_full += 1
        self._lock()  # ptr_ring_produce: the ring's producer lock, per page
        try:
            self._nput += 1
            if self._rlen < self.ring_size:
                self._ring_a[(self._rhead + self._rlen) % self.ring_size] = loc
                self._rlen += 1
                self._state_b[loc] = _RING
                self.stats.ring += 1
                return
            self.stats.ring_full += 1
            self._release_one(loc)
        finally:
            self._unlock()

    def recycle_direct(self, pfn: int) -> None:
        """``page_pool_recycle_direct``: return from the pool's own NAPI context."""
        self.put_page(pfn, True)

    recycle = recycle_direct

    def put_pages(self, pfns: npt.ArrayLike, allow_direct: bool = False) -> None:
        """Vector ``put_page``: same effect and counters as one call per page, in order.

        A refused call (double return, foreign page) of more than a few pages
        changes nothing; a short one, run as a plain loop, keeps the pages
        before the bad one returned.
        """
        direct = allow_direct or self.napi_local
        if isinstance(pfns, list) and len(pfns) <= _SMALL:
            self._put_small(pfns, direct, None)
            return
        p = _as_pfns(pfns)
        if p.size <= _SMALL:
            self._put_small(p.tolist(), direct, None)
        else:
            self.put_rows(self.local(p), allow_direct)

    def put_page_bulk(self, pfns: npt.ArrayLike, *,
                      calls: NDArray[np.int64] | None = None) -> None:
        """``page_pool_put_page_bulk``: recycle a bulk of pages into the ring.

        As in the kernel, direct recycling is only used when the pool is
        ``napi_local``, and a full ring counts one ``ring_full`` per call.
        ``calls`` (one entry per page, nondecreasing) says which of several
        consecutive bulk calls each page belongs to, so one vector call can
        stand for many (``xdp_flush_frame_bulk`` every 16 pages).
        """
        if isinstance(pfns, list) and len(pfns) <= _SMALL:
            self._put_small(pfns, self.napi_local,
                            [0] * len(pfns) if calls is None else calls.tolist())
            return
        p = _as_pfns(pfns)
        if p.size <= _SMALL:
            self._put_small(p.tolist(), self.napi_local,
                            [0] * p.size if calls is None else calls.tolist())
        else:
            self.put_rows(self.local(p), bulk=True, calls=calls)

    def put_rows(self, rows: NDArray[np.int64], allow_direct: bool = False, *,
                 bulk: bool = False, calls: NDArray[np.int64] | None = None) -> None:
        """``put_pages`` (or, with ``bulk``, ``put_page_bulk``) for page rows of
        this pool that are known to exist (``MemMap.split`` gives them)."""
        if rows.size <= _SMALL:
            pfns = (rows + self.pfn_base).tolist()
            if bulk:
                self._put_small(pfns, self.napi_local,
                                [0] * rows.size if calls is None else calls.tolist())
            else:
                self._put_small(pfns, allow_direct or self.napi_local, None)
            return
        self._check_rows(rows, "put_page_bulk" if bulk else "put_pages")
        if bulk:
            self._put_locals(rows, self.napi_local, True, calls)
        else:
            self._put_locals(rows, allow_direct or self.napi_local, False, None)

    def _put_locals(self, loc: NDArray[np.int64], direct: bool, bulk: bool,
                    calls: NDArray[np.int64] | None) -> None:
        n = loc.size
        if not n:
            return
        if self._destroyed:
            self._nuse -= n
            self._release(loc)
            self._maybe_finish()
            return
        i = 0
        if direct:
            i = min(PP_ALLOC_CACHE_SIZE - self._count, n)
            self._cache[self._count:self._count + i] = loc[:i]
            self._state[loc[:i]] = _CACHE
            self._count += i
            self._nuse -= i
            self.stats.cached += i
            self.stats.cache_full += n - i
        rest = loc[i:]
        if not rest.size:
            return
        self._lock()
        try:
            self._nput += rest.size
            k = min(self.ring_size - self._rlen, rest.size)
            if k:
                self._ring_push(rest[:k])
                self._state[rest[:k]] = _RING
                self.stats.ring += k
            over = rest[k:]
            if over.size:
                if not bulk:
                    self.stats.ring_full += over.size
                elif calls is None:
                    self.stats.ring_full += 1
                else:
                    # page_pool_recycle_ring_bulk stops at the first full slot and
                    # counts once per call; every later page of that call is released.
                    self.stats.ring_full += int(np.unique(calls[i + k:]).size)
                self._release(over)
        finally:
            self._unlock()

    def _check_rows(self, loc: NDArray[np.int64], what: str) -> None:
        """Strict mode: every row handed out, none twice; else refuse the whole call."""
        if not self.strict:
            return
        st = self._state[loc]
        bad = st != _INUSE
        if bad.any():
            bl = loc[bad]
            states = sorted({_STATE_NAMES[int(s)] for s in st[bad]})
            raise PageAccountingError(
                f"{what}: double return: {_fmt_pfns(self.pfns(bl))} not handed out "
                f"(already {' / '.join(states)})", pages=self.pfns(bl[:16]).tolist(),
                owner=self.name)
        if loc.size > 1:
            # O(n) duplicate test without sorting: each page writes its position
            # into a scratch row; a repeated page keeps only its last position.
            pos = np.arange(loc.size)
            self._scratch[loc] = pos
            if (self._scratch[loc] != pos).any():
                uniq, counts = np.unique(loc, return_counts=True)
                dup = self.pfns(uniq[counts > 1])
                raise PageAccountingError(f"{what}: double return: {_fmt_pfns(dup)} "
                                          f"returned more than once in one call",
                                          pages=dup[:16].tolist(), owner=self.name)

    def _put_small(self, pfns: list[int], direct: bool, calls: list[int] | None) -> None:
        """``_put_locals`` for a few pages: the kernel's loop, one page at a time.

        Checking and placing are one pass: a page given twice is caught when
        its second copy finds it already recycled. A refused call has then
        returned the pages before the bad one, as a loop of ``put_page`` would.
        """
        base, npages, st, strict = self.pfn_base, self.npages, self._state_b, self.strict
        if self._destroyed:
            for p in pfns:
                loc = p - base
                if strict and (not 0 <= loc < npages or st[loc] != _INUSE):
                    self._check_one(p, loc)
                self._nuse -= 1
                self._release_one(loc)
            self._maybe_finish()
            return
        # One acquisition of the ring's producer lock for the whole call, as
        # page_pool_put_netmem_bulk takes it once per bulk.
        self._lock()
        cache, c = self._cache_a, self._count
        ring, size, head, rlen = self._ring_a, self.ring_size, self._rhead, self._rlen
        stats = self.stats
        done = cached = cache_full = 0
        over: list[int] = []
        try:
            for p in pfns:
                loc = p - base
                if strict and (not 0 <= loc < npages or st[loc] != _INUSE):
                    self._check_one(p, loc)
                done += 1
                if direct:
                    if c < PP_ALLOC_CACHE_SIZE:
                        cache[c] = loc
                        c += 1
                        st[loc] = _CACHE
                        cached += 1
                        continue
                    cache_full += 1
                if rlen < size:
                    ring[(head + rlen) % size] = loc
                    rlen += 1
                    st[loc] = _RING
                else:
                    over.append(done - 1)
                    st[loc] = _FREE  # released below; marked now so a repeat is caught
        finally:
            self._nuse -= cached
            self._nput += done - cached
            stats.ring += rlen - self._rlen
            self._count, self._rlen = c, rlen
            stats.cached += cached
            stats.cache_full += cache_full
            if over:
                if calls is None:
                    stats.ring_full += len(over)
                else:
                    stats.ring_full += len({calls[i] for i in over})
                for i in over:
                    self._release_one(pfns[i] - base)
            self._unlock()

    def _check_one(self, pfn: int, loc: int) -> None:
        if not 0 <= loc < self.npages:
            raise PageAccountingError(f"pfn {pfn:#x} is not a page of this pool", pages=(pfn,),
                                      owner=self.name)
        st = self._state_b[loc]
        if st != _INUSE:
            raise PageAccountingError(
                f"double return: page {pfn:#x} (row {loc}) is {_STATE_NAMES[st]}, "
                f"not handed out", pages=(pfn,), owner=self.name)

    # -- the page allocator side -----------------------------------------------------
    def _release_one(self, loc: int) -> None:
        """``page_pool_return_page``: give a page back to the page allocator."""
        self._state_b[loc] = _FREE
        self._free_a[self._nfree] = loc
        self._nfree += 1
        self.release_cnt += 1

    def _release(self, loc: NDArray[np.int64]) -> None:
        self._state[loc] = _FREE
        self._free[self._nfree:self._nfree + loc.size] = loc
        self._nfree += loc.size
        self.release_cnt += loc.size

    def _ring_push(self, loc: NDArray[np.int64]) -> None:
        k, size = loc.size, self.ring_size
        start = (self._rhead + self._rlen) % size
        first = min(k, size - start)
        self._ring[start:start + first] = loc[:first]
        if k > first:
            self._ring[:k - first] = loc[first:]
        self._rlen += k

    def _ring_pop(self, k: int) -> NDArray[np.int64]:
        size = self.ring_size
        idx = (self._rhead + np.arange(k)) % size
        out = self._ring[idx].copy()
        self._rhead = (self._rhead + k) % size
        self._rlen -= k
        return out

    # -- lifetime --------------------------------------------------------------------
    def use_xdp_mem(self, disconnect: DisconnectHook, mem_id: int) -> None:
        """``page_pool_use_xdp_mem``: an xdp mem model takes a user reference."""
        if self._destroyed:
            self._use_after_destroy("use_xdp_mem")
        self.user_cnt += 1
        self._disconnect = disconnect
        self.xdp_mem_id = mem_id

    def destroy(self) -> None:
        """``page_pool_destroy``: drop a user reference; the last one frees the pool.

        Cache and ring are emptied at once; if pages are still out, the pool
        (and its ``mem_disconnect``) goes away when the last one comes back.
        """
        if self.user_cnt <= 0:
            self._use_after_destroy("destroy")
        self.user_cnt -= 1
        if self.user_cnt:
            return
        self.napi_local = False  # page_pool_disable_direct_recycling
        self._scrub()
        self._destroyed = True
        self._maybe_finish()

    def close(self) -> None:
        """``destroy``, then (strict mode) raise if any page never came back."""
        if self.user_cnt > 0:
            self.destroy()
        if self.strict:
            self.check()

    def __enter__(self) -> PagePool:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        if et is None:  # do not hide the error that is already on its way out
            self.close()

    def _scrub(self) -> None:
        """``page_pool_scrub``: empty the alloc cache and the ring into the allocator."""
        self._lock()
        try:
            if self._count:
                self._release(self._cache[:self._count].copy())
                self._count = 0
            if self._rlen:
                self._release(self._ring_pop(self._rlen))
        finally:
            self._unlock()

    def _maybe_finish(self) -> None:
        if self._destroyed and not self._released and self.nr_in_use == 0:
            self._released = True
            if self._disconnect is not None:
                self._disconnect(self)  # mem_allocator_disconnect: fires mem_disconnect
            self.memmap._detach(self)

    def _use_after_destroy(self, what: str) -> None:
        raise PageAccountingError(f"{what} on a destroyed page pool", owner=self.name)
