"""A NIC receiving frames longer than a page's packet room (``NetDevice._dma_frags``):
the machine code (:func:`pyxdp.net.skbuff_native.bufs_dma`) against the Python
reference (:func:`pyxdp.net.xdp_mem.xdp_buff_copy_in`, a host without native polls):
the same heads and frags in the same pages, the same bytes, the same pool records
(cache, ring, free list, counters) and ``rx_dropped``, around the head's 3520 bytes,
at a page, at 9000 bytes, past ``MAX_SKB_FRAGS`` frags and with the pool running dry."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pyxdp.net.frames import KIND_BUFF, KIND_FRAGS
from pyxdp.net.netdevice import MAX_LINEAR, Host
from pyxdp.net.page_pool import PAGE_SIZE
from pyxdp.net.trace import Tracer
from pyxdp.net.xdp import MAX_SKB_FRAGS
from pyxdp.net.xdp_mem import xdp_buff_frags, xdp_buff_packet

# The longest frame MAX_SKB_FRAGS frags hold, and one byte more (dropped).
LONGEST = MAX_LINEAR + MAX_SKB_FRAGS * PAGE_SIZE
SIZES = (60, 3519, 3520, 3521, 4096, 7616, 7617, 9000, 9014, LONGEST, LONGEST + 1, 1500)


def _frames(sizes: tuple[int, ...]) -> list[bytes]:
    rng = np.random.default_rng(len(sizes))
    return [rng.integers(0, 256, s, dtype=np.uint8).tobytes() for s in sizes]


def _pool_records(pool: Any) -> tuple[Any, ...]:
    return (pool.state.words.tolist(), pool._state.tobytes(), pool.cached_pages().tolist(),
            pool.ring_pages().tolist(), pool._free[:pool._nfree].tolist())


def _receive(native: bool, sizes: tuple[int, ...], *, left: int | None = None,
             direct: bool = False, rounds: int = 1) -> tuple[Any, ...]:
    """``rounds`` receives of frames of ``sizes`` on a 9000-MTU NIC; with ``left``,
    only that many pages of the pool free (on its ring); ``direct``: the receive
    runs as the pool's NAPI (page_pool_napi_local), so pages a dropped frame took
    go back to the alloc cache. Returns what the ring holds, each frame's bytes and
    frags, the pool's records and the device's counters."""
    frames = _frames(sizes)
    with Host(tracer=Tracer(), native=native) as h:
        nic = h.add_device("eth0", mtu=9000)
        rq = nic.rx[0]
        pool = rq.pool
        held = np.zeros(0, np.int64)
        if left is not None:
            held = pool.alloc_bulk(pool.npages)
            pool.put_pages(held[:left])
            held = held[left:]
        took = []
        pool.napi_local = direct
        try:
            for _ in range(rounds):
                took.append(nic.receive(frames))
        finally:
            pool.napi_local = False
        got = rq.ring.consume(len(rq.ring))
        out = []
        for i in range(len(got)):
            pfn, ln = int(got.pfn[i]), int(got.length[i])
            frags = xdp_buff_frags(pfn, False, memmap=h.memmap)[2] \
                if got.kind[i] & KIND_FRAGS else []
            out.append((pfn, int(got.data[i]), ln, int(got.kind[i]), frags,
                        xdp_buff_packet(pfn, False, int(got.data[i]), ln, memmap=h.memmap)
                        if frags else h.memmap.find(pfn).read(pfn, int(got.data[i]), ln)))
        res = (took, out, _pool_records(pool), nic.stats.rx_dropped, nic.stats.rx_packets)
        h.drop_frames(got, rq, direct=False)
        pool.put_pages(held)
    return res


def test_long_frames_native_is_python() -> None:
    nat = _receive(True, SIZES)
    assert nat == _receive(False, SIZES)
    took, out, _, dropped, _ = nat
    frames = _frames(SIZES)
    # Every frame but the one past MAX_SKB_FRAGS frags, whole, frags where the head ends.
    assert took == [len(SIZES) - 1] and dropped == 1
    want = [f for f in frames if len(f) <= LONGEST]
    assert [o[5] for o in out] == want
    for (_, data, ln, kind, frags, _), f in zip(out, want, strict=True):
        assert data == 256 and ln == len(f)
        assert kind == (KIND_BUFF | KIND_FRAGS if ln > MAX_LINEAR else KIND_BUFF)
        rest = ln - min(ln, MAX_LINEAR)
        assert [fl for _, fl, _ in frags] == \
            [min(PAGE_SIZE, rest - PAGE_SIZE * j) for j in range(-(-rest // PAGE_SIZE))]


@pytest.mark.parametrize("direct", [False, True], ids=["ring", "direct"])
@pytest.mark.parametrize("left", [0, 1, 2, 3, 5, 40, 70])
def test_a_pool_running_dry_drops_frames_the_same(left: int, direct: bool) -> None:
    """Too few pages: the frame is dropped, the pages it took go back (to the ring,
    or as the pool's NAPI to its alloc cache), later shorter frames may still fit."""
    sizes = (9014, 1000, 9000, 60, 4096, 3521, 9014, 200)
    nat = _receive(True, sizes, left=left, direct=direct, rounds=3)
    assert nat == _receive(False, sizes, left=left, direct=direct, rounds=3)
    assert nat[3] > 0 or left == 70


def test_a_ring_with_room_for_part_of_the_batch() -> None:
    """More frames than the rx ring has descriptors: the rest are rx_dropped first."""
    sizes = (9014,) * 700
    nat = _receive(True, sizes, rounds=2)
    assert nat == _receive(False, sizes, rounds=2)
    assert nat[0] == [700, 324] and nat[3] == 376


def test_frames_to_skbs_copies_frags_wherever_they_lie() -> None:
    """The skb of a multi-buffer frame (XDP_PASS, a wire, cpumap) is the whole packet:
    machine code for frags in the head's pool, the vector reference for frags in
    another pool, frames and buffers, linear frames beside them - each as
    xdp_buff_packet reads it, zeros past its end."""
    from pyxdp.net.frames import KIND_FRAME, Frames
    from pyxdp.net.xdp_mem import (
        MEM_TYPE_PAGE_POOL,
        xdp_buff_set_frags,
        xdp_buffs_pages,
        xdp_convert_buff_to_frame,
        xdp_return_frag_pages,
        xdp_return_frames,
    )
    rng = np.random.default_rng(3)
    with Host(tracer=Tracer()) as h:
        a = h.add_device("eth0", mtu=9000).rx[0].pool
        b = h.add_device("eth1", mtu=9000).rx[0].pool
        rows = []
        for i, (nfr, foreign, frame) in enumerate(((2, False, False), (0, False, False),
                                                   (3, True, False), (1, False, True),
                                                   (4, True, True), (17, False, False))):
            head = int(a.alloc_bulk(1)[0])
            hl = 200 + 300 * i
            a.write(head, 256, rng.integers(0, 256, hl, dtype=np.uint8).tobytes())
            fr = [int((b if foreign and j % 2 else a).alloc_bulk(1)[0]) for j in range(nfr)]
            fl = [int(x) for x in rng.integers(1, 4097, nfr)]
            fo = [int(rng.integers(0, 4097 - n)) for n in fl]
            for p, n, o in zip(fr, fl, fo, strict=True):
                h.memmap.find(p).write(p, o, rng.integers(0, 256, n, dtype=np.uint8).tobytes())
            flags = xdp_buff_set_frags(head, fr, fl, fo, memmap=h.memmap) if nfr else 0
            kind = KIND_FRAGS if nfr else 0
            if frame:
                assert xdp_convert_buff_to_frame([head], 256, hl, mem_type=MEM_TYPE_PAGE_POOL,
                                                 flags=flags, memmap=h.memmap).tolist() == [0]
                kind |= KIND_FRAME
            rows.append((head, hl + sum(fl), kind | (0 if frame else KIND_BUFF)))
        frames = Frames(np.array([r[0] for r in rows]), np.full(len(rows), 256),
                        np.array([r[1] for r in rows]), np.zeros(len(rows), np.int64),
                        np.array([r[2] for r in rows]))
        skbs = h.frames_to_skbs(frames, 2)
        for i, (head, ln, kind) in enumerate(rows):
            want = xdp_buff_packet(head, bool(kind & KIND_FRAME), 256, ln, memmap=h.memmap) \
                if kind & KIND_FRAGS else a.read(head, 256, ln)
            assert skbs.data[i, :ln].tobytes() == want
            assert not skbs.data[i, ln:].any()
        own = (frames.kind & KIND_FRAME) == 0
        xdp_return_frag_pages(xdp_buffs_pages(frames.pfn[own], (frames.kind[own] & KIND_FRAGS)
                                              != 0, memmap=h.memmap), memmap=h.memmap)
        xdp_return_frames(frames.pfn[~own], memmap=h.memmap)
