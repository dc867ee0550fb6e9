"""net/core/xdp.c in flat memory: mem model registration (errnos, ids, mem_connect /
mem_disconnect hooks), the xdp_frame written byte-exact in the headroom, conversion
failures, the return API (rx_napi downgrade, bulk flush at 16, batch forms equal to
the one-frame forms), frags, clones, skb records, and end-to-end page accounting."""

from __future__ import annotations

import errno
import logging
import struct
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyxdp.errors import NotSupportedError
from pyxdp.net.page_pool import MemMap, PageAccountingError, PageAllocator, PagePool
from pyxdp.net.xdp import SKB_SHARED_INFO_SIZE, XDP_FLAGS_HAS_FRAGS, XDP_FRAME_SIZE, XdpBuff
from pyxdp.net.xdp_mem import (
    MEM_ID_MAX,
    MEM_TYPE_PAGE_ORDER0,
    MEM_TYPE_PAGE_POOL,
    MEM_TYPE_PAGE_SHARED,
    MEM_TYPE_XSK_BUFF_POOL,
    REG_STATE_REGISTERED,
    REG_STATE_UNREGISTERED,
    XDP_BULK_QUEUE_SIZE,
    XDP_FRAME_DTYPE,
    XdpFrame,
    XdpFrameBulk,
    XdpMemInfo,
    XdpMemRegistry,
    XdpRxqInfo,
    return_frame_no_direct,
    xdp_buff_frags,
    xdp_buff_packet,
    xdp_buff_set_frags,
    xdp_buffs_packets,
    xdp_build_skb_from_frame,
    xdp_build_skb_from_frames,
    xdp_clear_return_frame_no_direct,
    xdp_convert_buff_to_frame,
    xdp_convert_frame_to_buff,
    xdp_convert_zc_to_xdp_frame,
    xdp_flush_frame_bulk,
    xdp_frags_head_len,
    xdp_frames_set_dev_rx,
    xdp_reg_mem_model,
    xdp_reg_page_pool,
    xdp_return_buff,
    xdp_return_buffs,
    xdp_return_frag_pages,
    xdp_return_frame,
    xdp_return_frame_bulk,
    xdp_return_frame_no_direct,
    xdp_return_frame_rx_napi,
    xdp_return_frames,
    xdp_return_frames_bulk,
    xdp_return_frames_rx_napi,
    xdp_rxq_info_attach_page_pool,
    xdp_rxq_info_is_reg,
    xdp_rxq_info_reg,
    xdp_rxq_info_reg_mem_model,
    xdp_rxq_info_unreg,
    xdp_rxq_info_unreg_mem_model,
    xdp_rxq_info_unused,
    xdp_set_return_frame_no_direct,
    xdp_unreg_mem_model,
    xdp_unreg_page_pool,
    xdpf_clone,
    xdpf_clones,
)

ETH_IP = bytes.fromhex("020000000002" "020000000001" "0800")


@pytest.fixture(autouse=True)
def _no_direct_flag_is_clear() -> Iterator[None]:
    xdp_clear_return_frame_no_direct()
    yield
    xdp_clear_return_frame_no_direct()


def frames(pool: PagePool, n: int, *, data: int = 256, length: int = 64, meta: int = 0,
           payload: bytes = b"") -> np.ndarray:
    """Allocate ``n`` pages, write a packet in each and convert them to frames."""
    pfns = pool.alloc_bulk(n)
    rows = pool.local(pfns)
    body = payload or ETH_IP + bytes(i & 0xFF for i in range(length))
    pkt = body[:length].ljust(length, b"\0")
    pool.pages[rows, data:data + length] = np.frombuffer(pkt, np.uint8)
    st_ = xdp_convert_buff_to_frame(pfns, data, length, meta, mem_type=MEM_TYPE_PAGE_POOL,
                                    memmap=pool.memmap)
    assert not st_.any()
    return pfns


def state(pool: PagePool) -> tuple[object, ...]:
    return (pool.get_stats(), pool.local(pool.cached_pages()).tolist(),
            pool.local(pool.ring_pages()).tolist(), pool.local(pool.in_use()).tolist())


# -- registration -----------------------------------------------------------------------------

def test_reg_mem_model_errnos() -> None:
    reg = XdpMemRegistry()
    pool = PagePool(16, memmap=MemMap())
    rxq = XdpRxqInfo()
    assert xdp_rxq_info_reg_mem_model(rxq, MEM_TYPE_PAGE_POOL, pool, registry=reg) \
        == -errno.EFAULT  # rxq itself not registered
    assert xdp_rxq_info_reg(rxq, 0, 0) == -errno.ENODEV
    assert xdp_rxq_info_reg(rxq, 3, 1, frag_size=4096) == 0
    assert xdp_rxq_info_is_reg(rxq) and (rxq.ifindex, rxq.queue_index) == (3, 1)
    assert xdp_rxq_info_reg_mem_model(rxq, 4, None, registry=reg) == -errno.EOPNOTSUPP
    assert xdp_rxq_info_reg_mem_model(rxq, 99, pool, registry=reg) == -errno.EOPNOTSUPP
    assert xdp_rxq_info_reg_mem_model(rxq, MEM_TYPE_PAGE_POOL, None, registry=reg) \
        == -errno.EINVAL
    assert rxq.mem == XdpMemInfo(MEM_TYPE_PAGE_POOL, 0)  # the kernel sets type before failing
    assert xdp_rxq_info_reg_mem_model(rxq, MEM_TYPE_PAGE_ORDER0, None, registry=reg) == 0
    assert rxq.mem == XdpMemInfo(MEM_TYPE_PAGE_ORDER0, 0) and len(reg) == 0
    with pytest.raises(TypeError):
        xdp_rxq_info_reg_mem_model(rxq, MEM_TYPE_PAGE_POOL, object(), registry=reg)
    unused = XdpRxqInfo()
    xdp_rxq_info_unused(unused)
    assert xdp_rxq_info_reg(unused, 3, 0) == -errno.EINVAL


def test_mem_connect_and_disconnect_hooks() -> None:
    reg = XdpMemRegistry()
    conn: list[tuple[object, ...]] = []
    disc: list[tuple[object, ...]] = []
    reg.on_connect.append(lambda *a: conn.append(a))
    reg.on_disconnect.append(lambda *a: disc.append(a))
    pool = PagePool(64, memmap=MemMap())
    rxq = XdpRxqInfo()
    xdp_rxq_info_reg(rxq, 5, 0)
    assert xdp_rxq_info_reg_mem_model(rxq, MEM_TYPE_PAGE_POOL, pool, registry=reg) == 0
    assert rxq.mem == XdpMemInfo(MEM_TYPE_PAGE_POOL, 1)
    assert conn == [(1, MEM_TYPE_PAGE_POOL, pool, 5)]
    assert pool.user_cnt == 2 and pool.xdp_mem_id == 1
    held = pool.alloc_bulk(2)
    xdp_rxq_info_unreg(rxq, registry=reg)  # drops the mem model's pool reference
    assert rxq.reg_state == REG_STATE_UNREGISTERED and rxq.mem == XdpMemInfo()
    assert pool.user_cnt == 1 and disc == []
    pool.destroy()  # the driver's own reference: pool goes, but 2 pages are still out
    assert disc == [] and 1 in reg
    pool.put_pages(held)  # the last page back releases the pool: mem_disconnect fires
    assert disc == [(1, MEM_TYPE_PAGE_POOL, pool)] and 1 not in reg


def test_mem_ids_are_cyclic_and_wrap_to_the_lowest_free() -> None:
    reg = XdpMemRegistry()
    mm = MemMap()
    pools = [PagePool(4, memmap=mm) for _ in range(3)]
    mems = [XdpMemInfo() for _ in pools]
    for mem, pool in zip(mems, pools, strict=True):
        assert xdp_reg_mem_model(mem, MEM_TYPE_PAGE_POOL, pool, registry=reg) == 0
    assert [m.id for m in mems] == [1, 2, 3]
    xdp_unreg_mem_model(mems[0], registry=reg)
    pools[0].destroy()  # released: id 1 is free again
    assert 1 not in reg
    again = XdpMemInfo()
    xdp_reg_mem_model(again, MEM_TYPE_PAGE_POOL, PagePool(4, memmap=mm), registry=reg)
    assert again.id == 4  # cyclic: the next id, not the freed one
    # Fill every id up to MEM_ID_MAX - 1 (0xFFFD): the allocator wraps to 1, then runs out.
    reg._next = MEM_ID_MAX - 1
    last = XdpMemInfo()
    xdp_reg_mem_model(last, MEM_TYPE_XSK_BUFF_POOL, object(), registry=reg)
    assert last.id == 0xFFFD
    wrapped = XdpMemInfo()
    xdp_reg_mem_model(wrapped, MEM_TYPE_XSK_BUFF_POOL, object(), registry=reg)
    assert wrapped.id == 1
    for mem_id in range(5, MEM_ID_MAX - 1):
        reg._table[mem_id] = reg._table[1]
    assert xdp_reg_mem_model(XdpMemInfo(), MEM_TYPE_PAGE_ORDER0, object(), registry=reg) \
        == -errno.ENOSPC


def test_shared_page_pool_on_two_queues_and_xsk_ids_stay() -> None:
    reg = XdpMemRegistry()
    conn: list[tuple[object, ...]] = []
    reg.on_connect.append(lambda *a: conn.append(a))
    pool = PagePool(16, memmap=MemMap())
    assert xdp_reg_page_pool(pool, registry=reg) == 0
    assert conn == []  # xdp_reg_mem_model has no rxq, so no mem_connect
    q0, q1 = XdpRxqInfo(), XdpRxqInfo()
    for i, q in enumerate((q0, q1)):
        xdp_rxq_info_reg(q, 2, i)
        xdp_rxq_info_attach_page_pool(q, pool)
        assert q.mem == XdpMemInfo(MEM_TYPE_PAGE_POOL, pool.xdp_mem_id)
    xdp_unreg_page_pool(pool, registry=reg)
    pool.destroy()
    assert pool.released and len(reg) == 0
    # An XSK model with an allocator gets an id that unregistering leaves behind (kernel quirk).
    xsk = XdpRxqInfo()
    xdp_rxq_info_reg(xsk, 2, 3)
    marker = object()
    assert xdp_rxq_info_reg_mem_model(xsk, MEM_TYPE_XSK_BUFF_POOL, marker, registry=reg) == 0
    assert conn == [(xsk.mem.id, MEM_TYPE_XSK_BUFF_POOL, marker, 2)]
    mem_id = xsk.mem.id
    xdp_rxq_info_unreg_mem_model(xsk, registry=reg)
    assert xsk.mem == XdpMemInfo() and mem_id in reg


def test_reregister_warns_and_resets(caplog: pytest.LogCaptureFixture) -> None:
    reg = XdpMemRegistry()
    pool = PagePool(16, memmap=MemMap())
    rxq = XdpRxqInfo()
    xdp_rxq_info_reg(rxq, 2, 0)
    xdp_rxq_info_reg_mem_model(rxq, MEM_TYPE_PAGE_POOL, pool, registry=reg)
    with caplog.at_level(logging.WARNING):
        assert xdp_rxq_info_reg(rxq, 2, 1, registry=reg) == 0
    assert "Missing unregister" in caplog.text
    assert rxq.mem == XdpMemInfo() and rxq.reg_state == REG_STATE_REGISTERED
    assert pool.user_cnt == 1  # the old model was unregistered on the way
    with pytest.raises(PageAccountingError, match="not registered"):
        xdp_unreg_mem_model(XdpMemInfo(MEM_TYPE_PAGE_POOL, 77), registry=reg)


def test_rxq_info_is_an_rxqueue_for_xdp_buff() -> None:
    rxq = XdpRxqInfo()
    xdp_rxq_info_reg(rxq, 4, 2, frag_size=4096)
    buff = XdpBuff.prepare(bytes(64), rxq=rxq)
    assert buff.rxq.ifindex == 4 and buff.rxq.queue_index == 2


# -- the frame in the headroom ----------------------------------------------------------------

def test_frame_dtype_is_the_kernel_layout() -> None:
    assert XDP_FRAME_DTYPE.itemsize == XDP_FRAME_SIZE == 40
    fields = XDP_FRAME_DTYPE.fields
    assert fields is not None
    offs = {name: spec[1] for name, spec in fields.items()}
    assert offs == {"data": 0, "len": 8, "headroom": 12, "metasize": 16, "mem_type": 20,
                    "dev_rx": 24, "frame_sz": 32, "flags": 36}


def test_conversion_writes_the_frame_byte_exact_in_place() -> None:
    pool = PagePool(8, memmap=MemMap())
    pfns = pool.alloc_bulk(3)
    rows = pool.local(pfns)
    pool.pages[rows, 24:32] = 0xAB  # dev_rx: the conversion must leave it alone
    pool.pages[rows, 40:256] = 0xCC  # the rest of the headroom too
    status = xdp_convert_buff_to_frame(pfns, [256, 128, 300], [60, 1000, 14], [0, 8, -1],
                                       mem_type=MEM_TYPE_PAGE_POOL, frame_sz=[4096, 3072, 4096],
                                       flags=[0, 0, 0], memmap=pool.memmap)
    assert status.tolist() == [0, 0, 0]
    for pfn, data, ln, meta, fsz in zip(pfns.tolist(), [256, 128, 300], [60, 1000, 14],
                                        [0, 8, 0], [4096, 3072, 4096], strict=True):
        raw = pool.read(pfn, 0, 40)
        assert struct.unpack_from("<Q", raw, 0)[0] == pool.page_address(pfn) + data
        assert struct.unpack_from("<IIII", raw, 8) == (ln, data - 40, meta, MEM_TYPE_PAGE_POOL)
        assert raw[24:32] == b"\xab" * 8
        assert struct.unpack_from("<II", raw, 32) == (fsz, 0)
        assert pool.read(pfn, 40, 88) == b"\xcc" * 88
    f = XdpFrame(int(pfns[1]), pool.memmap)
    assert (f.len, f.headroom, f.metasize, f.frame_sz, f.data_offset) == (1000, 88, 8, 3072, 128)
    buffs = xdp_convert_frame_to_buff(pfns, memmap=pool.memmap)
    assert buffs.data_hard_start.tolist() == [0, 0, 0]
    assert buffs.data.tolist() == [256, 128, 300]
    assert buffs.data_end.tolist() == [316, 1128, 314]
    assert buffs.data_meta.tolist() == [256, 120, 300]
    assert buffs.frame_sz.tolist() == [4096, 3072, 4096]
    xdp_frames_set_dev_rx(pfns, [7, 8, 9], memmap=pool.memmap)
    assert [XdpFrame(int(p), pool.memmap).dev_rx for p in pfns] == [7, 8, 9]


def test_conversion_overflow_cases(caplog: pytest.LogCaptureFixture) -> None:
    pool = PagePool(8, memmap=MemMap())
    pfns = pool.alloc_bulk(6)
    before = pool.pages[pool.local(pfns), :40].copy()
    with caplog.at_level(logging.WARNING):
        status = xdp_convert_buff_to_frame(
            pfns,
            [40, 39, 64, 63, 256, 256],
            [100, 100, 100, 100, 4096 - 320 - 256, 4096 - 320 - 255],
            [0, 0, 24, 24, 0, 0], mem_type=MEM_TYPE_PAGE_POOL, memmap=pool.memmap)
    E = -errno.EOVERFLOW
    # headroom - metasize < 40 -> NULL; data_end past data_hard_end -> NULL (driver bug)
    assert status.tolist() == [0, E, 0, E, 0, E]
    assert "missing reserved tailroom (1 buffer(s))" in caplog.text
    after = pool.pages[pool.local(pfns), :40]
    assert (after[[1, 3, 5]] == before[[1, 3, 5]]).all()  # failed frames are not written


def test_conversion_scalar_and_per_frame_arguments_agree_across_pools(
        caplog: pytest.LogCaptureFixture) -> None:
    mm = MemMap()
    p1, p2 = PagePool(16, memmap=mm), PagePool(16, memmap=mm)
    a, b = p1.alloc_bulk(3), p2.alloc_bulk(3)
    mixed = np.array([a[0], b[0], a[1], b[1], a[2], b[2]])
    st1 = xdp_convert_buff_to_frame(mixed, 200, 100, -1, mem_type=MEM_TYPE_PAGE_POOL,
                                    memmap=mm)
    h1 = [XdpFrame(int(x), mm).header() for x in mixed]
    st2 = xdp_convert_buff_to_frame(mixed, [200] * 6, np.full(6, 100), [-1] * 6,
                                    mem_type=MEM_TYPE_PAGE_POOL, frame_sz=[4096] * 6,
                                    flags=np.zeros(6, int), memmap=mm)
    assert st1.tolist() == st2.tolist() == [0] * 6
    assert h1 == [XdpFrame(int(x), mm).header() for x in mixed]
    # per-frame failures inside a mixed batch land on the right frames
    st3 = xdp_convert_buff_to_frame(mixed, [200, 30, 200, 200, 60, 200], 100, [0, 0, 0, 0, 24, 0],
                                    mem_type=MEM_TYPE_PAGE_POOL, memmap=mm)
    assert st3.tolist() == [0, -errno.EOVERFLOW, 0, 0, -errno.EOVERFLOW, 0]
    # scalar arguments that fail fail for every buffer, and the tailroom bug is logged
    with caplog.at_level(logging.WARNING):
        st4 = xdp_convert_buff_to_frame(mixed, 256, 3600, mem_type=MEM_TYPE_PAGE_POOL,
                                        memmap=mm)
    assert st4.tolist() == [-errno.EOVERFLOW] * 6 and "(6 buffer(s))" in caplog.text
    assert xdp_convert_buff_to_frame([], 256, 64, mem_type=MEM_TYPE_PAGE_POOL,
                                     memmap=mm).size == 0
    xdp_return_frames(mixed, memmap=mm)
    mm.check()


def test_conversion_checks_memory() -> None:
    mm = MemMap()
    pool = PagePool(8, memmap=mm)
    pfn = pool.alloc()
    assert pfn is not None
    with pytest.raises(PageAccountingError, match="not allocated"):
        xdp_convert_buff_to_frame([pool.pfn_base + 5], 256, 60, mem_type=MEM_TYPE_PAGE_POOL,
                                  memmap=mm)
    with pytest.raises(PageAccountingError, match="not a page allocator"):
        xdp_convert_buff_to_frame([pfn], 256, 60, mem_type=MEM_TYPE_PAGE_ORDER0, memmap=mm)
    with pytest.raises(ValueError, match="zc"):
        xdp_convert_buff_to_frame([pfn], 256, 60, mem_type=MEM_TYPE_XSK_BUFF_POOL, memmap=mm)
    with pytest.raises(ValueError, match="3 entries"):
        xdp_convert_buff_to_frame([pfn], 256, [1, 2, 3], mem_type=MEM_TYPE_PAGE_POOL, memmap=mm)


# -- returning frames -------------------------------------------------------------------------

def test_return_frame_goes_to_the_ring_rx_napi_to_the_cache() -> None:
    pool = PagePool(128, memmap=MemMap())
    pfns = frames(pool, 64)
    cache0 = pool.alloc_count
    xdp_return_frame(XdpFrame(int(pfns[0]), pool.memmap))
    assert pool.ring_count == 1 and pool.alloc_count == cache0
    xdp_return_frame_rx_napi(XdpFrame(int(pfns[1]), pool.memmap))
    assert pool.alloc_count == cache0 + 1 and pool.get_stats().cached == 1


def test_rx_napi_is_downgraded_in_no_direct_context() -> None:
    pool = PagePool(128, memmap=MemMap())
    pfns = frames(pool, 6)
    rxq = XdpRxqInfo()
    xdp_rxq_info_reg(rxq, 1, 0)
    rxq.mem = XdpMemInfo(MEM_TYPE_PAGE_POOL, 0)
    xdp_set_return_frame_no_direct()  # cpumap kthread / test_run
    assert xdp_return_frame_no_direct()
    xdp_return_frame_rx_napi(XdpFrame(int(pfns[0]), pool.memmap))
    xdp_return_frames_rx_napi(pfns[1:2], memmap=pool.memmap)
    xdp_return_buff(int(pfns[2]), rxq, memmap=pool.memmap)
    assert pool.get_stats().cached == 0 and pool.ring_count == 3
    xdp_clear_return_frame_no_direct()
    with return_frame_no_direct():
        xdp_return_buffs(pfns[3:4], rxq, memmap=pool.memmap)
    assert not xdp_return_frame_no_direct()
    assert pool.get_stats().cached == 0 and pool.ring_count == 4
    xdp_return_buffs(pfns[4:], rxq, memmap=pool.memmap)  # direct again
    assert pool.get_stats().cached == 2
    pool.close()


def test_bulk_flushes_when_a_17th_page_arrives() -> None:
    pool = PagePool(128, memmap=MemMap())
    pfns = frames(pool, 40)
    bq = XdpFrameBulk(pool.memmap)
    for p in pfns[:XDP_BULK_QUEUE_SIZE]:
        xdp_return_frame_bulk(XdpFrame(int(p), pool.memmap), bq)
    assert bq.count == 16 and pool.nr_in_use == 40 and pool.ring_count == 0
    xdp_return_frame_bulk(XdpFrame(int(pfns[16]), pool.memmap), bq)
    assert bq.count == 1 and pool.ring_count == 16 and pool.nr_in_use == 24
    assert pool.local(pool.ring_pages()).tolist() == pool.local(pfns[:16]).tolist()
    xdp_flush_frame_bulk(bq)
    assert bq.count == 0 and pool.ring_count == 17
    xdp_flush_frame_bulk(bq)  # empty: nothing happens
    xdp_return_frames_bulk(pfns[17:], bq)  # 23 pages: one bulk of 16, 7 stay queued
    assert bq.count == 7 and pool.ring_count == 33
    xdp_flush_frame_bulk(bq)
    pool.close()


def test_bulk_returns_non_page_pool_frames_at_once() -> None:
    mm = MemMap()
    pool = PagePool(32, memmap=mm)
    pfns = frames(pool, 2)
    clone = xdpf_clone(XdpFrame(int(pfns[0]), mm))
    assert clone is not None and clone.mem_type == MEM_TYPE_PAGE_ORDER0
    bq = XdpFrameBulk(mm)
    xdp_return_frame_bulk(clone, bq)
    assert bq.count == 0 and mm.system.in_use().size == 0
    clone2 = xdpf_clone(XdpFrame(int(pfns[0]), mm))
    assert clone2 is not None
    xdp_return_frames_bulk([clone2.pfn, pfns[1], pfns[0]], bq)
    assert bq.count == 2 and mm.system.in_use().size == 0
    xdp_flush_frame_bulk(bq)
    mm.check()


def _twin_pools(n: int, ring: int) -> tuple[PagePool, PagePool, np.ndarray, np.ndarray]:
    a, b = PagePool(n, pool_size=ring, memmap=MemMap()), PagePool(n, pool_size=ring,
                                                                  memmap=MemMap())
    return a, b, frames(a, n), frames(b, n)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=8), st.sampled_from([8, 50, 1024]),
       st.sampled_from(["plain", "rx_napi", "bulk"]))
def test_batch_returns_equal_one_frame_returns(chunks: list[int], ring: int, how: str) -> None:
    a, b, fa, fb = _twin_pools(sum(chunks), ring)
    bqa, bqb = XdpFrameBulk(a.memmap), XdpFrameBulk(b.memmap)
    pos = 0
    for c in chunks:
        for p in fa[pos:pos + c]:
            f = XdpFrame(int(p), a.memmap)
            if how == "plain":
                xdp_return_frame(f)
            elif how == "rx_napi":
                xdp_return_frame_rx_napi(f)
            else:
                xdp_return_frame_bulk(f, bqa)
        part = fb[pos:pos + c]
        if how == "plain":
            xdp_return_frames(part, memmap=b.memmap)
        elif how == "rx_napi":
            xdp_return_frames_rx_napi(part, memmap=b.memmap)
        else:
            xdp_return_frames_bulk(part, bqb)
        assert bqa.count == bqb.count
        assert state(a) == state(b)
        pos += c
    xdp_flush_frame_bulk(bqa)
    xdp_flush_frame_bulk(bqb)
    assert state(a) == state(b)
    a.close()
    b.close()


def test_frames_of_two_pools_in_one_batch() -> None:
    mm = MemMap()
    p1, p2 = PagePool(16, memmap=mm), PagePool(16, memmap=mm)
    f1, f2 = frames(p1, 4), frames(p2, 4)
    mixed = np.array([f1[0], f2[0], f1[1], f2[1], f2[2], f1[2], f1[3], f2[3]])
    xdp_return_frames(mixed[:4], memmap=mm)
    bq = XdpFrameBulk(mm)
    xdp_return_frames_bulk(mixed[4:], bq)
    xdp_flush_frame_bulk(bq)
    assert p1.local(p1.ring_pages()).tolist() == [0, 1, 2, 3]
    assert p2.local(p2.ring_pages()).tolist() == [0, 1, 2, 3]
    mm.check()


def test_xsk_memory_is_not_returned_here() -> None:
    pool = PagePool(8, memmap=MemMap())
    pfn = int(frames(pool, 1)[0])
    struct.pack_into("<I", pool.raw, pool.local([pfn])[0] * 4096 + 20, MEM_TYPE_XSK_BUFF_POOL)
    with pytest.raises(NotSupportedError, match="xsk_buff_free"):
        xdp_return_frame(XdpFrame(pfn, pool.memmap))
    with pytest.raises(NotSupportedError):
        xdp_return_frames([pfn], memmap=pool.memmap)
    assert pool.nr_in_use == 1  # nothing half-returned


# -- frags ------------------------------------------------------------------------------------

def frag_frame(pool: PagePool, nfrags: int) -> tuple[int, list[int]]:
    head = pool.alloc()
    frags = pool.alloc_bulk(nfrags).tolist()
    assert head is not None
    pool.write(head, 256, ETH_IP + bytes(50))
    for i, f in enumerate(frags):
        pool.write(f, 0, bytes([i + 1]) * 100)
    flags = xdp_buff_set_frags(head, frags, [100] * nfrags, memmap=pool.memmap) if frags else 0
    assert flags == (XDP_FLAGS_HAS_FRAGS if frags else 0)
    st_ = xdp_convert_buff_to_frame([head], 256, 64, mem_type=MEM_TYPE_PAGE_POOL, flags=flags,
                                    memmap=pool.memmap)
    assert st_.tolist() == [0]
    return head, frags


def test_shared_info_layout_and_frame_with_frags() -> None:
    pool = PagePool(32, memmap=MemMap())
    head, frags = frag_frame(pool, 3)
    sh = 4096 - SKB_SHARED_INFO_SIZE
    assert pool.read(head, sh + 2, 1) == b"\x03"  # nr_frags
    assert struct.unpack_from("<II", pool.read(head, sh + 40, 8)) == (300, 3 * 4096)
    assert struct.unpack_from("<qII", pool.read(head, sh + 48 + 16, 16)) == (frags[1], 100, 0)
    f = XdpFrame(head, pool.memmap)
    assert f.has_frags and f.frags() == [(p, 100, 0) for p in frags]
    assert f.frame_len() == 364
    assert f.packet() == ETH_IP + bytes(50) + b"\x01" * 100 + b"\x02" * 100 + b"\x03" * 100
    xdp_return_frame(f)
    # frags first, then the head, each page once
    assert pool.local(pool.ring_pages()).tolist() == pool.local(frags + [head]).tolist()
    pool.close()


def test_frags_in_every_return_path_return_every_page_once() -> None:
    a, b = PagePool(256, memmap=MemMap()), PagePool(256, memmap=MemMap())
    heads_a = [frag_frame(a, k)[0] for k in (0, 2, 17, 5, 1, 9)]
    heads_b = [frag_frame(b, k)[0] for k in (0, 2, 17, 5, 1, 9)]
    bqa, bqb = XdpFrameBulk(a.memmap), XdpFrameBulk(b.memmap)
    for h in heads_a[:4]:
        xdp_return_frame_bulk(XdpFrame(h, a.memmap), bqa)
    xdp_return_frames_bulk(heads_b[:4], bqb)
    assert bqa.count == bqb.count and state(a) == state(b)
    xdp_flush_frame_bulk(bqa)
    xdp_flush_frame_bulk(bqb)
    for h in heads_a[4:]:
        xdp_return_frame_rx_napi(XdpFrame(h, a.memmap))
    xdp_return_frames_rx_napi(heads_b[4:], memmap=b.memmap)
    assert state(a) == state(b)
    a.close()
    b.close()


def test_return_buff_with_frags() -> None:
    pool = PagePool(64, memmap=MemMap())
    rxq = XdpRxqInfo()
    xdp_rxq_info_reg(rxq, 1, 0)
    rxq.mem = XdpMemInfo(MEM_TYPE_PAGE_POOL, 0)
    heads = []
    for k in (2, 0, 3):
        h = pool.alloc()
        assert h is not None
        fr = pool.alloc_bulk(k).tolist()
        flags = xdp_buff_set_frags(h, fr, [10] * k, memmap=pool.memmap) if k else 0
        heads.append((h, flags))
    xdp_return_buff(heads[0][0], rxq, flags=heads[0][1], memmap=pool.memmap)
    xdp_return_buffs([h for h, _ in heads[1:]], rxq, flags=[f for _, f in heads[1:]],
                     memmap=pool.memmap)
    assert pool.get_stats().cached == 8
    pool.close()


def test_batch_frags_reads_equal_one_packet_reads() -> None:
    """xdp_frags_head_len and xdp_buffs_packets over frames and pool buffers of two pools
    (frags of odd lengths and offsets, some in the other pool) read what
    xdp_buff_frags and xdp_buff_packet read one packet at a time; xdp_return_frag_pages
    gives pages back to each pool in order."""
    mm = MemMap()
    a, b = PagePool(64, memmap=mm), PagePool(64, memmap=mm)
    rng = np.random.default_rng(7)
    heads, is_frame, data, lens = [], [], [], []
    for i, (pool, k) in enumerate(((a, 3), (b, 0), (a, 17), (b, 1), (a, 2), (b, 5))):
        h = pool.alloc()
        assert h is not None
        other = b if pool is a else a
        fr = [int((other if j % 2 else pool).alloc()) for j in range(k)]
        fl = [int(x) for x in rng.integers(1, 4000, k)]
        fo = [int(rng.integers(0, 4096 - n)) for n in fl]
        for p, n, o in zip(fr, fl, fo, strict=True):
            mm.find(p).write(p, o, rng.integers(0, 256, n, dtype=np.uint8).tobytes())
        hl = 100 + 37 * i
        pool.write(h, 256, rng.integers(0, 256, hl, dtype=np.uint8).tobytes())
        flags = xdp_buff_set_frags(h, fr, fl, fo, memmap=mm) if k else 0
        frame = i % 2 == 0
        if frame:
            assert xdp_convert_buff_to_frame([h], 256, hl, mem_type=MEM_TYPE_PAGE_POOL,
                                             flags=flags, memmap=mm).tolist() == [0]
        heads.append(h)
        is_frame.append(frame)
        data.append(256)
        lens.append(hl + sum(fl))
    p, fr_, ln = np.array(heads), np.array(is_frame), np.array(lens)
    want_head = [ln_ - sum(f[1] for f in xdp_buff_frags(h, f_, memmap=mm)[2])
                 for h, f_, ln_ in zip(heads, is_frame, lens, strict=True)]
    assert xdp_frags_head_len(p, ln, fr_, memmap=mm).tolist() == want_head
    out = np.full((len(heads), max(lens) + 5), 0xAA, np.uint8)
    xdp_buffs_packets(p, fr_, data, ln, out, memmap=mm)
    for i, h in enumerate(heads):
        assert out[i, :lens[i]].tobytes() == xdp_buff_packet(h, is_frame[i], 256, lens[i],
                                                             memmap=mm)
    frags = xdp_buff_frags(heads[2], True, memmap=mm)[2]
    xdp_return_frag_pages([f for f, _, _ in frags], memmap=mm)
    assert a.ring_pages().tolist() == [f for f, _, _ in frags if mm.find(f) is a]
    assert b.ring_pages().tolist() == [f for f, _, _ in frags if mm.find(f) is b]


def test_set_frags_validates() -> None:
    pool = PagePool(32, memmap=MemMap())
    h = pool.alloc()
    assert h is not None
    with pytest.raises(ValueError):
        xdp_buff_set_frags(h, list(range(18)), [1] * 18, memmap=pool.memmap)
    with pytest.raises(PageAccountingError, match="not allocated"):
        xdp_buff_set_frags(h, [pool.pfn_base + 30], [10], memmap=pool.memmap)


# -- clones and skbs --------------------------------------------------------------------------

def test_clone_copies_frame_headroom_and_data_into_an_order0_page() -> None:
    mm = MemMap()
    pool = PagePool(16, memmap=mm)
    pfn = int(frames(pool, 1, data=200, length=100, meta=8)[0])
    pool.write(pfn, 192, b"METADATA")
    xdp_frames_set_dev_rx([pfn], 6, memmap=mm)
    src = XdpFrame(pfn, mm)
    clone = xdpf_clone(src)
    assert clone is not None and isinstance(clone.mem, PageAllocator)
    assert clone.mem is mm.system
    assert (clone.len, clone.headroom, clone.metasize, clone.dev_rx) == (100, 160, 8, 6)
    assert (clone.frame_sz, clone.mem_type, clone.data_offset) == (4096, MEM_TYPE_PAGE_ORDER0, 200)
    assert clone.packet() == src.packet() and clone.metadata() == b"METADATA"
    assert clone.mem.read(clone.pfn, 40, 300 - 40) == pool.read(pfn, 40, 300 - 40)
    xdp_return_frame(clone)
    assert mm.system.in_use().size == 0 and pool.nr_in_use == 1
    with pytest.raises(PageAccountingError, match="double free"):
        xdp_return_frame(clone)
    xdp_return_frame(src)
    mm.check()


def test_clone_refusals() -> None:
    mm = MemMap(system_pages=1)
    pool = PagePool(32, memmap=mm)
    # In a 4096-byte frame the tailroom rule keeps 40 + headroom + len within a page;
    # only frames of larger pages can be too big to clone.
    order1 = PagePool(4, page_size=8192, memmap=mm)
    big = int(frames(order1, 1, data=256, length=5000)[0])
    assert xdpf_clone(XdpFrame(big, mm)) is None  # 40 + 216 + 5000 > 4096
    head, _ = frag_frame(pool, 1)
    assert xdpf_clone(XdpFrame(head, mm)) is None  # frags are not cloned
    ok = int(frames(pool, 1)[0])
    first = xdpf_clone(XdpFrame(ok, mm))
    assert first is not None and xdpf_clone(XdpFrame(ok, mm)) is None  # no page left
    pfns, status = xdpf_clones([ok, big, head], memmap=mm)
    # dev_map_enqueue_clone refuses a frags frame before cloning: -EOPNOTSUPP
    assert pfns.tolist() == [0, 0, 0]
    assert status.tolist() == [-errno.ENOMEM, -errno.ENOMEM, -errno.EOPNOTSUPP]
    xdp_return_frame(first)
    xdp_return_frames([ok, big, head], memmap=mm)
    mm.check()


def test_batch_clones_equal_single_clones() -> None:
    mm = MemMap()
    pool = PagePool(64, memmap=mm)
    pfns = np.concatenate([frames(pool, 3, data=256, length=60),
                           frames(pool, 2, data=100, length=1400, meta=16)])
    singles = [xdpf_clone(XdpFrame(int(p), mm)) for p in pfns]
    batch, status = xdpf_clones(pfns, memmap=mm)
    assert not status.any()
    for s, b in zip(singles, batch.tolist(), strict=True):
        assert s is not None
        fb = XdpFrame(b, mm)
        assert s.header()[1:] == fb.header()[1:]
        assert s.data_offset == fb.data_offset and s.packet() == fb.packet()
    xdp_return_frames(batch, memmap=mm)
    xdp_return_frames([s.pfn for s in singles if s is not None], memmap=mm)
    xdp_return_frames(pfns, memmap=mm)
    mm.check()


def test_build_skb_record_consumes_the_frame() -> None:
    mm = MemMap()
    pool = PagePool(16, memmap=mm)
    pfn = int(frames(pool, 1, data=256, length=64, meta=4)[0])
    pool.write(pfn, 252, b"meta")
    skb = xdp_build_skb_from_frame(XdpFrame(pfn, mm), 9, dev_addr=ETH_IP[:6])
    assert skb.data[:14] == ETH_IP and len(skb.data) == 64 and skb.metadata == b"meta"
    assert (skb.dev, skb.protocol, skb.pkt_type, skb.headroom) == (9, 0x0800, 0, 256)
    assert skb.pp_recycle and skb.nr_frags == 0 and skb.frame_sz == 4096
    assert pool.nr_in_use == 0 and XdpFrame(pfn, mm).data == 0  # scrubbed, returned
    head, frags = frag_frame(pool, 2)
    other = int(frames(pool, 1, payload=b"\xff" * 6 + bytes(6) + b"\x00\x2e" + b"\xff\xff",
                       length=60)[0])
    skbs = xdp_build_skb_from_frames([head, other], 3, memmap=mm)
    assert skbs[0].nr_frags == 2 and skbs[0].data_len == 200 and len(skbs[0].data) == 264
    assert (skbs[1].protocol, skbs[1].pkt_type) == (0x0001, 1)  # raw 802.3, broadcast
    mm.check()


def test_zc_conversion_copies_into_order0_frames() -> None:
    mm = MemMap()
    umem = np.zeros(4 * 2048, np.uint8)
    umem[2048 + 256 - 8:2048 + 256] = np.frombuffer(b"xskmeta!", np.uint8)
    umem[2048 + 256:2048 + 256 + 60] = 7
    pfns, status = xdp_convert_zc_to_xdp_frame(umem, [2048 + 256, 0], [60, 4060], [8, 0],
                                               memmap=mm)
    assert status.tolist() == [0, -errno.EOVERFLOW] and pfns[1] == 0
    f = XdpFrame(int(pfns[0]), mm)
    assert (f.headroom, f.metasize, f.len, f.frame_sz, f.flags) == (0, 8, 60, 4096, 0)
    assert f.mem_type == MEM_TYPE_PAGE_ORDER0 and f.data_offset == 48
    assert f.metadata() == b"xskmeta!" and f.packet() == bytes([7]) * 60
    xdp_return_frames(pfns[:1], memmap=mm)
    mm.check()


# -- end-to-end accounting --------------------------------------------------------------------

def test_every_page_returned_exactly_once_across_all_paths() -> None:
    mm = MemMap()
    reg = XdpMemRegistry()
    pool = PagePool(512, memmap=mm)
    rxq = XdpRxqInfo()
    xdp_rxq_info_reg(rxq, 2, 0)
    assert xdp_rxq_info_reg_mem_model(rxq, MEM_TYPE_PAGE_POOL, pool, registry=reg) == 0
    shared = PageAllocator(32, memmap=mm, name="driver-frags")
    for _round in range(3):
        pfns = frames(pool, 64)
        drop, tx, redirect, napi = pfns[:16], pfns[16:32], pfns[32:48], pfns[48:]
        xdp_return_buffs(drop, rxq, memmap=mm)  # XDP_DROP
        clones, status = xdpf_clones(redirect[:8], memmap=mm)  # broadcast copies
        assert not status.any()
        bq = XdpFrameBulk(mm)
        for p in tx:  # XDP_TX completion, one frame at a time
            xdp_return_frame_bulk(XdpFrame(int(p), mm), bq)
        xdp_return_frames_bulk(np.concatenate([redirect, clones]), bq)  # devmap completion
        xdp_flush_frame_bulk(bq)
        for p in napi[:8]:
            xdp_return_frame_rx_napi(XdpFrame(int(p), mm))
        xdp_return_frames(napi[8:], memmap=mm)
        # PAGE_SHARED frames: a driver page split by refcount, freed by page_frag_free
        sp = shared.alloc_page()
        assert sp is not None
        shared.get_page(sp)
        xdp_convert_buff_to_frame([sp], 256, 60, mem_type=MEM_TYPE_PAGE_SHARED, memmap=mm)
        xdp_return_frame(XdpFrame(sp, mm))
        assert shared.page_ref_count(sp) == 1
        shared.put_page(sp)
        mm.check()
    with pytest.raises(PageAccountingError, match="double return"):
        xdp_return_frames(pfns[:1], memmap=mm)
    leaked = frames(pool, 3)
    with pytest.raises(PageAccountingError, match="leak") as e:
        mm.check()
    assert set(e.value.pages) == set(leaked.tolist())
    xdp_return_frames(leaked, memmap=mm)
    xdp_rxq_info_unreg(rxq, registry=reg)
    pool.close()
    assert pool.released and len(reg) == 0
