"""Seed 4 (xdp_frame and the return API, bpf-next 2018): the "no regression" claim as
a ratio inside pyxdp. Bulk return of page_pool frames must cost no more than
returning them one by one.

Each round returns N page_pool frames (kept in the pages' headroom, as the
kernel keeps them) in one of four ways, on a pool prepared identically:

  per-frame    xdp_return_frame(f) for each frame
  bulk         xdp_return_frame_bulk(f, bq) for each, then xdp_flush_frame_bulk(bq)
  batch        xdp_return_frames(pfns[i:i + budget]), one call per NAPI budget
  batch bulk   xdp_return_frames_bulk(pfns[i:i + budget], bq), then a flush

The ring holds every returned page, so no round hits the page allocator. The
ways take turns inside each repetition; the figure is the median over
repetitions, in million frames per second, with each way's ratio to
per-frame. The seed's claim is judged on the first two (the kernel's
one-frame API); the batch forms are shown beside them.

:func:`frame_return_rates` measures; ``bench/bench_frame_return.py`` prints the
table and ``pyxdp bench seeds`` judges the claim.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from pyxdp.net.page_pool import MemMap, PagePool
from pyxdp.net.xdp_mem import (
    MEM_TYPE_PAGE_POOL,
    XdpFrame,
    XdpFrameBulk,
    xdp_convert_buff_to_frame,
    xdp_flush_frame_bulk,
    xdp_return_frame,
    xdp_return_frame_bulk,
    xdp_return_frames,
    xdp_return_frames_bulk,
)

Way = Callable[[list[XdpFrame], NDArray[np.int64], XdpFrameBulk, int], None]


def per_frame(frames: list[XdpFrame], pfns: NDArray[np.int64], bq: XdpFrameBulk,
              budget: int) -> None:
    for f in frames:
        xdp_return_frame(f)


def bulk(frames: list[XdpFrame], pfns: NDArray[np.int64], bq: XdpFrameBulk,
         budget: int) -> None:
    for f in frames:
        xdp_return_frame_bulk(f, bq)
    xdp_flush_frame_bulk(bq)


def batch(frames: list[XdpFrame], pfns: NDArray[np.int64], bq: XdpFrameBulk,
          budget: int) -> None:
    mm = bq.memmap
    for i in range(0, pfns.size, budget):
        xdp_return_frames(pfns[i:i + budget], memmap=mm)


def batch_bulk(frames: list[XdpFrame], pfns: NDArray[np.int64], bq: XdpFrameBulk,
               budget: int) -> None:
    for i in range(0, pfns.size, budget):
        xdp_return_frames_bulk(pfns[i:i + budget], bq)
    xdp_flush_frame_bulk(bq)


WAYS: list[tuple[str, Way]] = [
    ("per-frame  xdp_return_frame", per_frame),
    ("bulk       xdp_return_frame_bulk+flush", bulk),
    ("batch      xdp_return_frames", batch),
    ("batch bulk xdp_return_frames_bulk+flush", batch_bulk),
]


def prepare(pool: PagePool, n: int) -> tuple[list[XdpFrame], NDArray[np.int64]]:
    """Take every page out of the pool and make each a 64-byte frame."""
    pfns = pool.alloc_bulk(n)
    assert pfns.size == n and pool.nr_in_use == n
    status = xdp_convert_buff_to_frame(pfns, 256, 64, mem_type=MEM_TYPE_PAGE_POOL,
                                       memmap=pool.memmap)
    assert not status.any()
    return [XdpFrame.at(pool, p) for p in pfns.tolist()], pfns


def frame_return_rates(frames: int = 16384, repeat: int = 7, budget: int = 64,
                       strict: bool = True) -> dict[str, float]:
    """Median Mpps of each way in :data:`WAYS` (the ways take turns in each repetition)."""
    n = min(frames, 16384)  # the largest page_pool ring: every return fits in it
    mm = MemMap()
    pools = {name: PagePool(n, pool_size=n, memmap=mm, strict=strict) for name, _ in WAYS}
    rates: dict[str, list[float]] = {name: [] for name, _ in WAYS}
    for _ in range(repeat):
        for name, way in WAYS:
            pool = pools[name]
            frames_, pfns = prepare(pool, n)
            bq = XdpFrameBulk(mm)
            t = time.perf_counter()
            way(frames_, pfns, bq, budget)
            rates[name].append(n / (time.perf_counter() - t) / 1e6)
            assert pool.nr_in_use == 0, f"{name} left pages out"
    for pool in pools.values():
        pool.close()
    return {name: statistics.median(r) for name, r in rates.items()}
