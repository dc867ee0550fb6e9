"""Page memory: the page_pool's alloc cache / ring / slow path with the kernel's counters,
the vector forms against the one-page forms, strict accounting (double returns, foreign
pages, leaks), pool lifetime, the refcounted order-0 page allocator and the memmap."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyxdp.errors import PyxdpError
from pyxdp.net.page_pool import (
    PAGE_POOL_DEFAULT_RING_SIZE,
    PAGE_POOL_MAX_RING_SIZE,
    PP_ALLOC_CACHE_REFILL,
    PP_ALLOC_CACHE_SIZE,
    MemMap,
    PageAccountingError,
    PageAllocator,
    PagePool,
)


def make_pool(npages: int = 512, **kw: object) -> PagePool:
    return PagePool(npages, memmap=MemMap(), **kw)  # type: ignore[arg-type]


def rows(pool: PagePool, pfns: object) -> list[int]:
    out: list[int] = pool.local(pfns).tolist()  # type: ignore[arg-type]
    return out


# -- allocation -------------------------------------------------------------------------------

def test_first_alloc_takes_the_slow_path_then_the_cache_serves_63() -> None:
    pool = make_pool()
    first = pool.alloc()
    assert first is not None and rows(pool, [first]) == [0]
    s = pool.get_stats()
    assert (s.empty, s.slow, s.fast) == (1, 1, 0)
    assert pool.alloc_count == PP_ALLOC_CACHE_REFILL - 1
    assert pool.hold_cnt == PP_ALLOC_CACHE_REFILL  # the whole slow-path bulk is held
    more = [pool.alloc() for _ in range(63)]
    assert rows(pool, more) == list(range(1, 64))
    assert pool.get_stats().fast == 63
    pool.alloc()  # the 65th: cache empty, ring empty -> slow path again
    s = pool.get_stats()
    assert (s.empty, s.slow, s.fast) == (2, 2, 63)


def test_alloc_bulk_matches_single_allocs() -> None:
    a, b = make_pool(300), make_pool(300)
    single = [a.alloc() for _ in range(150)]
    bulk = b.alloc_bulk(150)
    assert rows(a, single) == rows(b, bulk)
    assert a.get_stats() == b.get_stats()
    assert a.nr_in_use == b.nr_in_use == 150


def test_refill_moves_up_to_64_ring_pages_into_the_cache() -> None:
    pool = make_pool()
    pages = pool.alloc_bulk(128)  # two slow-path bulks, cache now empty
    assert pool.alloc_count == 0
    pool.put_pages(pages[:100])  # not direct: all go to the ring
    assert pool.ring_count == 100 and pool.get_stats().ring == 100
    got = pool.alloc()
    s = pool.get_stats()
    assert s.refill == 1 and pool.ring_count == 100 - PP_ALLOC_CACHE_REFILL
    assert pool.alloc_count == PP_ALLOC_CACHE_REFILL - 1
    # FIFO from the ring into the cache, the last one consumed handed out first
    assert got == pages[PP_ALLOC_CACHE_REFILL - 1]
    assert pool.cached_pages().tolist() == pages[:PP_ALLOC_CACHE_REFILL - 1].tolist()


def test_exhaustion_returns_none_and_short_bulks() -> None:
    pool = make_pool(70)
    got = pool.alloc_bulk(100)
    assert got.size == 70 and pool.alloc() is None
    assert pool.alloc_bulk(5).size == 0
    pool.put_pages(got)
    pool.close()


def test_high_order_pages_come_one_at_a_time() -> None:
    pool = make_pool(8, page_size=8192)
    assert pool.order == 1 and pool.pages.shape == (8, 8192)
    pool.alloc_bulk(3)
    s = pool.get_stats()
    assert (s.slow_high_order, s.slow, s.empty) == (3, 0, 3)


def test_ring_size_defaults_and_clamp() -> None:
    assert make_pool().ring_size == PAGE_POOL_DEFAULT_RING_SIZE
    assert make_pool(pool_size=100).ring_size == 100
    assert make_pool(pool_size=10**6).ring_size == PAGE_POOL_MAX_RING_SIZE


@pytest.mark.parametrize("kw", [{"npages": 0}, {"npages": 4, "page_size": 6000},
                                {"npages": 4, "page_size": 2048}, {"npages": 4, "pool_size": -1}])
def test_bad_parameters(kw: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        PagePool(memmap=MemMap(), **kw)  # type: ignore[arg-type]


# -- recycling --------------------------------------------------------------------------------

def test_direct_recycle_fills_the_cache_then_counts_cache_full() -> None:
    pool = make_pool(400)
    pages = pool.alloc_bulk(200)
    assert pool.alloc_count == 56  # 256 taken by slow path, 200 handed out
    for p in pages[:72]:
        pool.recycle_direct(int(p))
    assert pool.alloc_count == PP_ALLOC_CACHE_SIZE
    s = pool.get_stats()
    assert (s.cached, s.cache_full, s.ring) == (72, 0, 0)
    pool.recycle(int(pages[72]))  # cache full: counted, then the ring takes it
    s = pool.get_stats()
    assert (s.cached, s.cache_full, s.ring) == (72, 1, 1)


def test_napi_local_pool_recycles_directly_without_being_asked() -> None:
    pool = make_pool(napi_local=True)
    p = pool.alloc()
    assert p is not None
    pool.put_page(p)
    assert pool.get_stats().cached == 1 and pool.ring_count == 0


def test_ring_full_releases_pages_one_count_per_page_or_per_bulk_call() -> None:
    single = make_pool(200, pool_size=10)
    bulk = make_pool(200, pool_size=10)
    a, b = single.alloc_bulk(30), bulk.alloc_bulk(30)
    single.put_pages(a)
    bulk.put_page_bulk(b)
    assert single.ring_count == bulk.ring_count == 10
    assert single.get_stats().ring_full == 20  # page_pool_put_unrefed_netmem: per page
    assert bulk.get_stats().ring_full == 1  # page_pool_recycle_ring_bulk: once per call
    assert single.release_cnt == bulk.release_cnt == 20


def test_put_page_bulk_calls_split_ring_full_counts() -> None:
    pool = make_pool(200, pool_size=4)
    pages = pool.alloc_bulk(48)
    pool.put_page_bulk(pages, calls=np.arange(48) // 16)  # three bulks of 16
    s = pool.get_stats()
    assert s.ring == 4 and s.ring_full == 3


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["alloc", "put", "direct", "bulk"]),
                          st.integers(1, 90), st.integers(0, 10**6)), max_size=25),
       st.sampled_from([0, 40, 300]), st.booleans())
def test_vector_ops_equal_single_ops(ops: list[tuple[str, int, int]], ring: int,
                                     napi_local: bool) -> None:
    a = make_pool(600, pool_size=ring, napi_local=napi_local)
    b = make_pool(600, pool_size=ring, napi_local=napi_local)
    held_a: list[int] = []
    held_b: list[int] = []
    for op, n, seed in ops:
        if op == "alloc":
            got_a = [p for p in (a.alloc() for _ in range(n)) if p is not None]
            got_b = b.alloc_bulk(n).tolist()
            assert rows(a, got_a) == rows(b, got_b)
            held_a += got_a
            held_b += got_b
            continue
        order = np.random.default_rng(seed).permutation(len(held_a))[:n].tolist()
        ra = [held_a[i] for i in order]
        rb = [held_b[i] for i in order]
        for i in sorted(order, reverse=True):
            del held_a[i], held_b[i]
        before = a.stats.ring_full
        for p in ra:
            a.put_page(p, op == "direct")
        if op == "bulk":
            b.put_page_bulk(rb)
            # The bulk path counts a full ring once per call, not once per page.
            overflowed = a.stats.ring_full - before
            assert b.stats.ring_full - before == (1 if overflowed else 0)
            a.stats.ring_full = b.stats.ring_full
        else:
            b.put_pages(rb, op == "direct")
    assert a.get_stats() == b.get_stats()
    assert rows(a, a.cached_pages()) == rows(b, b.cached_pages())
    assert rows(a, a.ring_pages()) == rows(b, b.ring_pages())
    assert rows(a, a.in_use()) == rows(b, b.in_use())
    assert (a.hold_cnt, a.release_cnt) == (b.hold_cnt, b.release_cnt)


# -- strict accounting ------------------------------------------------------------------------

def test_double_return_is_caught_and_names_the_page() -> None:
    pool = make_pool()
    p = pool.alloc()
    assert p is not None
    pool.put_page(p)
    with pytest.raises(PageAccountingError, match=f"{p:#x}.*in the ring") as e:
        pool.put_page(p)
    assert e.value.pages == (p,) and e.value.owner == pool.name
    assert isinstance(e.value, PyxdpError)


def test_double_return_in_vector_paths() -> None:
    pool = make_pool()
    pages = pool.alloc_bulk(100)
    # A long call (numpy) is refused as a whole.
    twice = np.concatenate([pages[:40], pages[:1]])
    with pytest.raises(PageAccountingError, match="more than once in one call") as e:
        pool.put_page_bulk(twice)
    assert e.value.pages == (int(pages[0]),) and pool.nr_in_use == 100
    # A short one runs as the kernel's loop: the repeat is caught when it comes round.
    with pytest.raises(PageAccountingError, match=r"0x[0-9a-f]+ \(row 0\) is in the ring"):
        pool.put_page_bulk([pages[0], pages[1], pages[0]])
    assert pool.nr_in_use == 98 and pool.ring_count == 2
    pool.put_pages(pages[2:4], allow_direct=True)
    with pytest.raises(PageAccountingError, match="alloc cache") as e:
        pool.put_pages(pages[3:5])
    assert e.value.pages == (int(pages[3]),)
    with pytest.raises(PageAccountingError, match="double return"):
        pool.put_pages(pages[2:60])
    assert pool.nr_in_use == 96


def test_never_allocated_and_foreign_pages_are_refused() -> None:
    mm = MemMap()
    pool, other = PagePool(64, memmap=mm), PagePool(64, memmap=mm)
    with pytest.raises(PageAccountingError, match="free"):
        pool.put_page(pool.pfn_base + 3)
    q = other.alloc()
    assert q is not None
    with pytest.raises(PageAccountingError, match="not a page of this pool"):
        pool.put_page(q)
    with pytest.raises(PageAccountingError, match="not (a page of this pool|in this region)"):
        pool.put_pages([q])
    with pytest.raises(PageAccountingError, match="not in this region"):
        pool.put_pages(np.array([q] * 30))


def test_leak_at_check_and_close_names_the_pages() -> None:
    pool = make_pool()
    pages = pool.alloc_bulk(10)
    pool.put_pages(pages[:8])
    with pytest.raises(PageAccountingError, match=r"leak: 2 page\(s\)") as e:
        pool.check()
    assert e.value.pages == tuple(pages[8:].tolist())
    assert f"{int(pages[8]):#x}" in str(e.value)
    with pytest.raises(PageAccountingError, match="never returned"):
        pool.close()
    pool.put_pages(pages[8:])  # late returns are still accepted
    assert pool.released
    pool.check()


def test_context_manager_closes_but_does_not_mask_errors() -> None:
    with make_pool() as pool:
        pool.put_page_bulk(pool.alloc_bulk(3))
    assert pool.released
    with pytest.raises(KeyError), make_pool() as leaky:
        leaky.alloc()
        raise KeyError("the real error")


def test_non_strict_close_does_not_raise_on_leak() -> None:
    pool = make_pool(strict=False)
    pool.alloc()
    pool.close()
    assert pool.destroyed and not pool.released


# -- lifetime ---------------------------------------------------------------------------------

def test_destroy_with_pages_out_defers_the_release_to_the_last_return() -> None:
    mm = MemMap()
    pool = PagePool(128, memmap=mm)
    seen: list[PagePool] = []
    pool.use_xdp_mem(seen.append, 7)
    pages = pool.alloc_bulk(5)
    pool.put_page(int(pages[0]), True)
    pool.destroy()
    assert pool.user_cnt == 1 and not pool.destroyed  # the mem model still holds it
    pool.destroy()
    assert pool.destroyed and not pool.released and seen == []
    assert pool.alloc_count == 0 and pool.inflight() == 4  # cache scrubbed
    pool.put_pages(pages[1:3], allow_direct=True)  # returned straight to the allocator
    assert pool.alloc_count == 0 and pool.inflight() == 2
    pool.put_page(int(pages[3]))
    assert not pool.released
    pool.put_page(int(pages[4]))
    assert pool.released and seen == [pool] and pool.inflight() == 0
    with pytest.raises(PageAccountingError):
        mm.find(int(pages[0]))  # the region is gone from the memmap
    with pytest.raises(PageAccountingError, match="destroyed"):
        pool.alloc()
    with pytest.raises(PageAccountingError, match="destroyed"):
        pool.destroy()


def test_destroy_scrubs_cache_and_ring() -> None:
    pool = make_pool()
    pages = pool.alloc_bulk(100)
    pool.put_pages(pages[:50], allow_direct=True)
    pool.put_pages(pages[50:])
    assert pool.inflight() == 128
    pool.destroy()
    assert pool.released and pool.inflight() == 0 and pool.release_cnt == 128


# -- page allocator and memmap ----------------------------------------------------------------

def test_page_allocator_refcounts() -> None:
    alloc = PageAllocator(8, memmap=MemMap())
    p = alloc.alloc_page()
    assert p is not None and alloc.page_ref_count(p) == 1
    alloc.get_page(p)
    alloc.put_page(p)
    assert alloc.nr_free == 7
    alloc.put_page(p)
    assert alloc.nr_free == 8 and alloc.freed == 1
    with pytest.raises(PageAccountingError, match="double free"):
        alloc.put_page(p)
    with pytest.raises(PageAccountingError, match="free page"):
        alloc.get_page(p)


def test_page_allocator_vector_put_with_repeats() -> None:
    alloc = PageAllocator(8, memmap=MemMap())
    a, b = alloc.alloc_pages_bulk(2).tolist()
    alloc.get_page(a)
    alloc.put_pages([a, b, a])
    assert alloc.in_use().size == 0
    c = alloc.alloc_page()
    assert c is not None
    with pytest.raises(PageAccountingError, match="double free"):
        alloc.put_pages([c, c])
    assert alloc.page_ref_count(c) == 1  # refused as a whole
    with pytest.raises(PageAccountingError, match="leak"):
        alloc.check()


def test_page_frag_free_finds_the_page_from_an_address() -> None:
    alloc = PageAllocator(4, memmap=MemMap())
    p = alloc.alloc_page()
    assert p is not None
    alloc.page_frag_free(alloc.page_address(p) + 1000)
    assert alloc.page_ref_count(p) == 0


def test_memmap_split_and_addresses() -> None:
    mm = MemMap()
    a, b = PagePool(16, memmap=mm), PagePool(16, page_size=8192, memmap=mm)
    pa, pb = a.alloc_bulk(3), b.alloc_bulk(2)
    mixed = np.array([pb[0], pa[0], pa[1], pb[1], pa[2]])
    groups = mm.split(mixed)
    assert [g[0] for g in groups] == [b, a]
    assert [g[1].tolist() for g in groups] == [[0, 3], [1, 2, 4]]
    addrs = np.array([a.page_address(int(pa[1])) + 100, b.page_address(int(pb[1])) + 8000])
    assert mm.virt_to_pages(addrs).tolist() == [pa[1], pb[1]]
    assert mm.virt_to_page(int(addrs[1])) == pb[1]
    with pytest.raises(PageAccountingError, match="not in any live"):
        mm.virt_to_page(12345)
    with pytest.raises(PageAccountingError, match="not page"):
        mm.split(np.array([pa[0], 999 << 20]))
    a.put_pages(pa)
    b.put_pages(pb)
    mm.check()
    assert mm.outstanding() == {}


def test_page_read_write_and_views_share_memory() -> None:
    pool = make_pool(4)
    p = pool.alloc()
    assert p is not None
    pool.write(p, 256, b"hello")
    assert pool.read(p, 256, 5) == b"hello"
    assert bytes(pool.raw[pool.local([p])[0] * 4096 + 256:][:5]) == b"hello"
    assert pool.page(p)[256] == ord("h")
    with pytest.raises(ValueError):
        pool.write(p, 4094, b"abc")


def test_threads_first_using_the_system_allocator_share_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``MemMap.system`` is made on first use, which threaded NAPI polls may reach at
    once: each must get the same allocator (one made under the memmap's lock), or
    pages one thread takes are freed into, or checked against, another."""
    import threading
    import time
    from typing import Any

    import pyxdp.net.page_pool as pp

    class Slow(pp.PageAllocator):
        def __init__(self, *a: Any, **kw: Any) -> None:
            time.sleep(0.05)  # a wide window for the other thread
            super().__init__(*a, **kw)
    monkeypatch.setattr(pp, "PageAllocator", Slow)
    mm = MemMap()
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(mm.system)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got[0] is got[1] is mm.system
    assert [m.name for m in mm.regions] == ["system"]
