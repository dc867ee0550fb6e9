"""AF_XDP rings, UMEM and the socket's batch logic, no root: pyxdp.xsk.queue/umem/xsk.

The ring protocol both ways (user side as libxdp, kernel side as
xsk_queue.h with its lazy publishing), index wrap-around at 2**32, the
XDP_UMEM_REG rules and xp_validate_desc with the verdicts Linux 6.18 gave
(tests/kernel/test_xsk_linux.py replays them on the kernel), the socket API
over an in-process loopback datapath, and a two-process stress test on
rings and a UMEM in SharedMemory.
"""

from __future__ import annotations

import errno
import mmap
import multiprocessing as mp
import random
import time
from multiprocessing import shared_memory

import numpy as np
import pytest

from pyxdp.errors import KernelError
from pyxdp.net.xdp_umem import (
    XskError,
    add_offset_to_addr,
    encode_unaligned,
    extract_addr,
    extract_offset,
    validate_desc,
    validate_umem_reg,
)
from pyxdp.net.xsk_queue import (
    KERNEL,
    RX_RING,
    USER,
    KernelRingCons,
    KernelRingProd,
    ring_bytes,
)
from pyxdp.uapi.if_xdp import (
    XDP_DESC_DTYPE,
    XDP_RING_NEED_WAKEUP,
    XDP_RING_OFFSET_DEFAULT,
    XdpMmapOffsets,
    XdpStatistics,
    XdpUmemFlag,
)
from pyxdp.xsk.queue import RingCons, RingProd
from pyxdp.xsk.umem import Umem
from pyxdp.xsk.xsk import ChunkAccountingError, ChunkState, XskSocket

OFF = XDP_RING_OFFSET_DEFAULT
NEAR_WRAP = 2**32 - 5


def set_indices(buf: bytearray | memoryview, prod: int, cons: int, base: int = 0) -> None:
    np.frombuffer(buf, np.uint32, 1, base + OFF.producer)[0] = prod
    np.frombuffer(buf, np.uint32, 1, base + OFF.consumer)[0] = cons


def pair(entries: int, kind: str = "addr", start: int = 0) -> tuple[bytearray, RingProd, RingCons]:
    buf = bytearray(ring_bytes(entries, kind))  # type: ignore[arg-type]
    set_indices(buf, start, start)
    return (buf, RingProd(buf, entries, kind),  # type: ignore[arg-type]
            RingCons(buf, entries, kind))  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------

def test_layout_constants() -> None:
    assert XDP_DESC_DTYPE.itemsize == 16
    assert (OFF.producer, OFF.consumer, OFF.flags, OFF.desc) == (0, 128, 196, 320)
    assert ring_bytes(8, "addr") == 320 + 64 and ring_bytes(8, "desc") == 320 + 128
    offs = XdpMmapOffsets(OFF, OFF, OFF, OFF)
    assert XdpMmapOffsets.unpack(offs.pack()) == offs
    st = XdpStatistics(1, 2, 3, 4, 5, 6)
    assert XdpStatistics.unpack(st.pack()) == st
    assert XdpStatistics.unpack(st.pack()[:24]) == XdpStatistics(1, 2, 3)


@pytest.mark.parametrize("n", [0, 3, 6, 2**32])
def test_ring_size_power_of_two(n: int) -> None:
    with pytest.raises(ValueError):
        RingProd(bytearray(4096), n, "addr")


# --------------------------------------------------------------------------
# User side: reserve/submit, peek/release
# --------------------------------------------------------------------------

@pytest.mark.parametrize("start", [0, NEAR_WRAP, 2**32 - 1])
def test_produce_consume_in_order_across_wrap(start: int) -> None:
    _, prod, cons = pair(8, start=start)
    seq = 0
    got: list[int] = []
    rng = random.Random(1)
    for _ in range(200):
        idx, k = prod.reserve(rng.randint(1, 8))
        prod.write(idx, np.arange(seq, seq + k, dtype=np.uint64))
        prod.submit(k)
        seq += k
        idx, k = cons.peek(rng.randint(1, 8))
        got.extend(cons.read_addrs(idx, k).tolist())
        cons.release(k)
    idx, k = cons.peek(8)
    got.extend(cons.read_addrs(idx, k).tolist())
    cons.release(k)
    assert got == list(range(seq))
    assert prod.producer == (start + seq) % 2**32 == cons.consumer


def test_full_and_empty() -> None:
    _, prod, cons = pair(4)
    assert cons.peek(4) == (0, 0)
    idx, k = prod.reserve(10)
    assert (idx, k) == (0, 4)
    prod.write(idx, [1, 2, 3, 4])
    prod.submit(4)
    assert prod.reserve(1) == (4, 0)  # full
    assert prod.reserve(1, exact=True) == (4, 0)
    idx, k = cons.peek(3)
    cons.release(k)
    idx, k = prod.reserve(4, exact=True)
    assert k == 0  # only 3 free: all or nothing
    idx, k = prod.reserve(4)
    assert (idx, k) == (4, 3)


def test_cached_indices_touch_shared_words_only_when_needed() -> None:
    buf, prod, cons = pair(8)
    prod.produce(np.arange(4, dtype=np.uint64))
    idx, k = cons.peek(2)
    assert k == 2 and cons.cached_prod == 4  # loaded once
    prod.produce([9, 9])
    idx, k = cons.peek(8)
    assert k == 2  # the cache still held entries: producer not reloaded
    idx, k = cons.peek(8)
    assert k == 2 and cons.cached_prod == 6
    # Producer: sees the consumer only when the cache says "not enough room".
    cons.release(6)
    assert prod.cached_cons == 0
    assert prod.nb_free(2) == 2  # 8 - 6 cached as free: enough, no reload
    assert prod.cached_cons == 0
    assert prod.nb_free(3) == 8
    assert prod.cached_cons == 6


def test_submit_release_cancel_bounds() -> None:
    _, prod, cons = pair(8)
    idx, k = prod.reserve(3)
    prod.cancel(1)
    with pytest.raises(ValueError):
        prod.submit(3)
    prod.write(idx, [5, 6])
    prod.submit(2)
    idx, k = cons.peek(8)
    assert k == 2
    cons.cancel(1)
    with pytest.raises(ValueError):
        cons.release(2)
    cons.release(1)
    assert cons.peek(8)[1] == 1


def test_desc_ring_wrap_write_and_read() -> None:
    _, prod, cons = pair(4, "desc", start=NEAR_WRAP)
    prod.produce(np.zeros(3, XDP_DESC_DTYPE))
    cons.release(cons.peek(3)[1])
    idx, k = prod.reserve(4)
    assert k == 4 and idx & 3 == 2  # slots 2, 3, then 0, 1: two slices
    prod.write_descs(idx, [10, 20, 30, 40], [1, 2, 3, 4], 1)
    prod.submit(4)
    addr, ln, opt = cons.read_descs(*cons.peek(4))
    assert addr.tolist() == [10, 20, 30, 40] and ln.tolist() == [1, 2, 3, 4]
    assert opt.tolist() == [1, 1, 1, 1]


def test_need_wakeup_flag() -> None:
    buf, prod, cons = pair(4)
    kernel = KernelRingCons(buf, 4, "addr")
    assert not prod.needs_wakeup()
    kernel.set_flags(XDP_RING_NEED_WAKEUP)
    assert prod.needs_wakeup() and prod.flags == 1
    kernel.clear_flags(XDP_RING_NEED_WAKEUP)
    assert not prod.needs_wakeup()


# --------------------------------------------------------------------------
# Kernel side: lazy publishing
# --------------------------------------------------------------------------

@pytest.mark.parametrize("start", [0, NEAR_WRAP])
def test_kernel_producer_publishes_at_submit(start: int) -> None:
    buf = bytearray(ring_bytes(8, "desc"))
    set_indices(buf, start, start)
    kp = KernelRingProd(buf, 8, "desc")
    user = RingCons(buf, 8, "desc")
    assert kp.produce_descs([100, 200, 300], 60) == 3
    assert user.peek(8)[1] == 0  # not flushed yet
    kp.submit()
    idx, k = user.peek(8)
    addr, ln, _ = user.read_descs(idx, k)
    assert addr.tolist() == [100, 200, 300] and ln.tolist() == [60] * 3
    user.release(k)
    assert kp.produce_descs(np.arange(10), 60) == 8  # rest: rx_queue_full for the caller
    assert kp.is_full()
    # Completion-style: reserve now, write and publish later with submit_n.
    cq = bytearray(ring_bytes(4, "addr"))
    set_indices(cq, start, start)
    kc = KernelRingProd(cq, 4, "addr")
    uc = RingCons(cq, 4, "addr")
    assert kc.reserve(2)[1] == 2
    kc.write_at_producer([7, 8])
    assert uc.peek(4)[1] == 0
    kc.submit_n(1)
    assert uc.consume(4).tolist() == [7]
    kc.submit_n(1)
    assert uc.consume(4).tolist() == [8]


@pytest.mark.parametrize("start", [0, NEAR_WRAP])
def test_kernel_consumer_publishes_lazily(start: int) -> None:
    buf = bytearray(ring_bytes(8, "addr"))
    set_indices(buf, start, start)
    user = RingProd(buf, 8, "addr")
    kc = KernelRingCons(buf, 8, "addr")
    user.produce([1, 2, 3, 4])
    assert kc.peek_addrs(3).tolist() == [1, 2, 3]
    kc.release(3)
    assert user.consumer == start % 2**32  # consumed privately, not published
    assert kc.peek_addrs(8).tolist() == [4]  # the cache still has one: no refresh
    kc.release(1)
    assert user.consumer == start % 2**32
    assert kc.peek_addrs(8).size == 0  # empty cache: publish, then reload producer
    assert user.consumer == (start + 4) % 2**32
    user.produce([5])
    assert kc.nb_entries(4) == 1
    kc.release(1)
    kc.release_publish()
    assert user.consumer == (start + 5) % 2**32


@pytest.mark.parametrize("start", [0, NEAR_WRAP])
def test_kernel_consumer_believes_one_ring_per_producer_load(start: int) -> None:
    """A user producer far ahead (or behind: a huge u32 distance) shows a full ring,
    the same slots again at the next load; never more entries than the ring has."""
    buf = bytearray(ring_bytes(8, "addr"))
    set_indices(buf, start, start)
    user = RingProd(buf, 8, "addr")
    kc = KernelRingCons(buf, 8, "addr")
    user.produce(list(range(10, 18)))
    for far in (10_000, 2**31, 2**32 - 1):
        user._producer[0] = (kc.cached_cons + far) & 0xFFFF_FFFF
        assert kc.peek_addrs(64).tolist() == list(range(10, 18))
        assert kc.present() == 8 and kc.nb_entries(100) == 8
        kc.release(8)
    d = KernelRingCons(bytearray(ring_bytes(4, "desc")), 4, "desc")
    d._producer[0] = 1000
    assert len(d.read_desc_batch(100, lambda x: np.ones(len(x), np.bool_))) == 4


@pytest.mark.parametrize("start", [0, NEAR_WRAP])
def test_kernel_producer_ignores_impossible_consumers(start: int) -> None:
    """An rx consumer behind the cached one or past what was produced is not believed;
    one that moves on gives the slots' chunks back to the user."""
    buf = bytearray(ring_bytes(8, "desc"))
    set_indices(buf, start, start)
    kp = KernelRingProd(buf, 8, "desc")
    kown = np.zeros(16, np.uint8)
    kp.track(kown)
    idx = kp.cached_prod
    assert kp.produce_descs(np.arange(8, dtype=np.uint64) * 2048, 60) == 8
    kp.own(idx, np.arange(8) + 4)
    kp.submit()
    assert (kown[4:12] == RX_RING).all()
    for bad in (start + 9, start - 1, start + 2**31):
        kp._consumer[0] = bad & 0xFFFF_FFFF
        assert kp.nb_free(1) == 0 and kp.cached_cons == start % 2**32
    assert (kown[4:12] == RX_RING).all()
    kp._consumer[0] = (start + 3) & 0xFFFF_FFFF
    assert kp.nb_free(8) == 3
    assert kown[4:7].tolist() == [USER] * 3 and (kown[7:12] == RX_RING).all()
    assert KERNEL not in kown.tolist()


def test_kernel_read_desc_batch_counts_invalid_and_empty() -> None:
    buf = bytearray(ring_bytes(8, "desc"))
    user = RingProd(buf, 8, "desc")
    kc = KernelRingCons(buf, 8, "desc")
    umem_like = {"umem_size": 8 * 2048, "chunk_size": 2048}

    def valid(d: np.ndarray) -> np.ndarray:
        return validate_desc(d["addr"], d["len"], d["options"], **umem_like)

    idx, k = user.reserve(4)
    user.write_descs(idx, [0, 2048, 99999, 4096], [60, 0, 60, 60])
    user.submit(4)
    out = kc.read_desc_batch(8, valid)
    assert out["addr"].tolist() == [0, 4096]
    assert kc.invalid_descs == 2 and kc.queue_empty_descs == 0
    assert kc.read_desc_batch(8, valid).size == 0
    assert kc.queue_empty_descs == 1
    assert user.nb_free(8) == 8  # the empty peek published the consumer


# --------------------------------------------------------------------------
# UMEM
# --------------------------------------------------------------------------

UNALIGNED = int(XdpUmemFlag.XDP_UMEM_UNALIGNED_CHUNK_FLAG)
MDLEN = int(XdpUmemFlag.XDP_UMEM_TX_METADATA_LEN)
UMEM_REG_CASES = [
    # (name, addr, len, chunk, headroom, flags, tx_metadata_len, errno or 0): Linux 6.18
    ("ok", 0, 16 * 4096, 2048, 0, 0, 0, 0),
    ("chunk 2047", 0, 16 * 4096, 2047, 0, UNALIGNED, 0, errno.EINVAL),
    ("chunk > page", 0, 16 * 8192, 8192, 0, 0, 0, errno.EINVAL),
    ("chunk 3000 aligned", 0, 16 * 4096, 3000, 0, 0, 0, errno.EINVAL),
    ("chunk 3000 unaligned", 0, 16 * 4096, 3000, 0, UNALIGNED, 0, 0),
    ("unknown flag", 0, 16 * 4096, 2048, 0, 8, 0, errno.EINVAL),
    ("addr not page-aligned", 1, 16 * 4096, 2048, 0, 0, 0, errno.EINVAL),
    ("wraps", 2**64 - 4096, 8192, 2048, 0, 0, 0, errno.EINVAL),
    ("len 0", 0, 0, 2048, 0, 0, 0, errno.EINVAL),
    ("less than a chunk", 0, 1000, 2048, 0, UNALIGNED, 0, errno.EINVAL),
    ("remainder aligned", 0, 16 * 4096 + 1024, 2048, 0, 0, 0, errno.EINVAL),
    ("remainder unaligned", 0, 16 * 4096 + 1024, 2048, 0, UNALIGNED, 0, 0),
    ("headroom 2048-704", 0, 16 * 4096, 2048, 1344, 0, 0, 0),
    ("headroom 2048-703", 0, 16 * 4096, 2048, 1345, 0, 0, errno.EINVAL),
    ("headroom 4096-704", 0, 16 * 4096, 4096, 3392, 0, 0, 0),
    ("headroom 4096-703", 0, 16 * 4096, 4096, 3393, 0, 0, errno.EINVAL),
    ("md 248", 0, 16 * 4096, 2048, 0, MDLEN, 248, 0),
    ("md 256", 0, 16 * 4096, 2048, 0, MDLEN, 256, errno.EINVAL),
    ("md 7", 0, 16 * 4096, 2048, 0, MDLEN, 7, errno.EINVAL),
    ("md 7 without its flag", 0, 16 * 4096, 2048, 0, 0, 7, 0),
    ("tx sw csum", 0, 16 * 4096, 2048, 0, 2, 0, 0),
]


@pytest.mark.parametrize("case", UMEM_REG_CASES, ids=[c[0] for c in UMEM_REG_CASES])
def test_validate_umem_reg(case: tuple[str, int, int, int, int, int, int, int]) -> None:
    _, addr, length, chunk, head, flags, md, err = case
    if not err:
        validate_umem_reg(addr, length, chunk, head, flags, md, page_size=4096)
        return
    with pytest.raises(XskError) as e:
        validate_umem_reg(addr, length, chunk, head, flags, md, page_size=4096)
    assert e.value.errno == err and isinstance(e.value, KernelError)
    assert "XDP_UMEM_REG" in str(e.value)


def test_umem_reg_option_size() -> None:
    with pytest.raises(XskError):
        validate_umem_reg(0, 4096, 2048, 0, optlen=20)
    # v1 (24..31 bytes): flags not read, so a bad flag passes
    validate_umem_reg(0, 4096, 2048, 0, 8, optlen=28)


def test_umem_geometry_and_errors() -> None:
    with Umem(8, 2048, headroom=64) as u:
        assert u.size == 8 * 2048 and u.address % 4096 == 0
        assert u.rx_frame_size == 2048 - 64 - 256 and u.rx_data_offset == 320
        assert u.rx_addr([2048, 4100]).tolist() == [2048 + 320, 4096 + 320]
        assert u.chunk_index([0, 2047, 2048, 4095 + 320]).tolist() == [0, 0, 1, 2]
        assert len(u.reg_bytes()) == 32
    with pytest.raises(XskError) as e:
        Umem(8, 3000)
    assert e.value.errno == errno.EINVAL
    # Over an existing mapping (a page pool's memory): the same bytes, left mapped.
    mm = mmap.mmap(-1, 8 * 4096)
    with Umem(8, 4096, memory=mm) as u:
        assert u.address == np.frombuffer(mm, np.uint8).ctypes.data
        u.buf[5] = 7
    assert mm[5] == 7 and not mm.closed
    with pytest.raises(ValueError, match="holds 32768 bytes, the geometry needs 65536"):
        Umem(16, 4096, memory=mm)


def test_unaligned_handles() -> None:
    base = np.array([0, 4096, 2**47 + 1], np.uint64)
    off = np.array([256, 300, 65535], np.uint64)
    h = encode_unaligned(base, off)
    assert extract_addr(h).tolist() == base.tolist()
    assert extract_offset(h).tolist() == off.tolist()
    assert add_offset_to_addr(h).tolist() == (base + off).tolist()
    assert int(encode_unaligned(4096, 256)) == 4096 | 256 << 48
    with Umem(8, 3000, unaligned=True) as u:
        rx = u.rx_addr([3000, 6001])
        assert u.data_addr(rx).tolist() == [3256, 6257]
        assert u.chunk_index(rx).tolist() == [1, 2]


# xp_validate_desc verdicts measured on Linux 6.18 (64 chunks of 2048, no metadata):
# (addr, len, options, valid)
TX_DESC_CASES = [
    (0, 60, 0, True),
    (2048, 60, 0, True),
    (4096 + 1000, 1048, 0, True),  # ends exactly at the chunk end
    (4096 + 1000, 1049, 0, False),  # crosses into the next chunk
    (0, 0, 0, False),  # empty
    (64 * 2048, 60, 0, False),  # past the UMEM
    (64 * 2048 - 60, 60, 0, True),
    (8192, 2048, 0, True),
    (8192, 2049, 0, False),
    (6144, 60, 0x4, False),  # unknown option bits, low or high
    (6144, 60, 0x8000, False),
    (6144, 60, 0x10000, False),
    (6144, 60, 0x1, True),  # XDP_PKT_CONTD
    (6144, 60, 0x2, True),  # XDP_TX_METADATA (sendto then fails with EINVAL without md)
]


def test_validate_desc_aligned() -> None:
    a, ln, op, want = (np.array(c) for c in zip(*TX_DESC_CASES, strict=True))
    got = validate_desc(a, ln, op, umem_size=64 * 2048, chunk_size=2048)
    assert got.tolist() == want.tolist()


def test_validate_desc_metadata_and_unaligned() -> None:
    kw = {"umem_size": 8 * 2048, "chunk_size": 2048, "tx_metadata_len": 16}
    got = validate_desc([16, 8, 2048 + 16, 16], [2032, 60, 2033, 2033], 0, **kw)
    assert got.tolist() == [True, False, False, False]
    kw = {"umem_size": 8 * 3000, "chunk_size": 3000, "unaligned": True}
    h = encode_unaligned([100, 24000 - 60, 24000 - 59, 0], [0, 0, 0, 100])
    got = validate_desc(h, [3000, 60, 60, 2900], 0, **kw)
    assert got.tolist() == [True, True, False, True]
    assert not validate_desc([100], [3001], 0, **kw)[0]


def test_umem_packets_gather_write() -> None:
    with Umem(8, 2048) as u:
        addrs = np.array([0, 2048, 4096 + 100], np.uint64)
        pk = [b"abc", b"", b"hello world"]
        assert u.write_packets(addrs, pk).tolist() == [3, 0, 11]
        assert u.packets(addrs, [3, 0, 11]) == pk
        arr = u.gather(addrs, [3, 0, 11])
        assert arr.shape == (3, 11) and bytes(arr[0, :4]) == b"abc\0"
        rows = np.arange(12, dtype=np.uint8).reshape(2, 6)
        u.write_packets(addrs[:2], rows)
        assert u.packets(addrs[:2], [6, 6]) == [bytes(range(6)), bytes(range(6, 12))]
        same = [b"x" * 5, b"y" * 5]
        u.write_packets(addrs[:2], same)
        assert u.packets(addrs[:2], [5, 5]) == same


def test_shared_umem_attach_by_name() -> None:
    u = Umem(4, 2048, shared=True)
    try:
        assert u.name
        v = Umem.attach(u.name, 4, 2048)
        v.buf[100] = 42
        assert u.buf[100] == 42
        v.close()
        with pytest.raises(XskError):
            Umem.attach(u.name, 8, 2048)  # bigger than the segment
    finally:
        u.close()
        u.unlink()


# --------------------------------------------------------------------------
# The socket's batch logic over an in-process loopback datapath
# --------------------------------------------------------------------------

class LoopXsk(XskSocket):
    """A socket whose 'kernel' is here: tx frames are looped back to rx in copy mode."""

    def __init__(self, umem: Umem, size: int = 16) -> None:
        self.mem = {k: bytearray(ring_bytes(size, "desc" if k in ("rx", "tx") else "addr"))
                    for k in ("fill", "comp", "rx", "tx")}
        for buf in self.mem.values():
            set_indices(buf, NEAR_WRAP, NEAR_WRAP)
        self.kfill = KernelRingCons(self.mem["fill"], size, "addr")
        self.kcomp = KernelRingProd(self.mem["comp"], size, "addr")
        self.krx = KernelRingProd(self.mem["rx"], size, "desc")
        self.ktx = KernelRingCons(self.mem["tx"], size, "desc")
        self.kicks = 0
        self.rx_queue_full = 0
        self.kernel_free: list[int] = []  # fill buffers the kernel took and could not use
        from pyxdp.xsk.xsk import ChunkPool
        super().__init__(umem, ChunkPool(umem), RingProd(self.mem["fill"], size, "addr"),
                         RingCons(self.mem["comp"], size, "addr"),
                         RingCons(self.mem["rx"], size, "desc"),
                         RingProd(self.mem["tx"], size, "desc"), need_wakeup=False)

    def _kick_tx(self) -> bool:
        self.kicks += 1
        descs = self.ktx.read_desc_batch(8, self.umem.validate_desc)
        for d in descs:
            data = self.umem.buf[int(d["addr"]):int(d["addr"]) + int(d["len"])].copy()
            addrs = self.kfill.peek_addrs(1)
            if addrs.size:
                self.kfill.release(1)
                rx = self.umem.rx_addr(addrs)
                self.umem.buf[int(rx[0]):int(rx[0]) + len(data)] = data
                if self.krx.produce_descs(rx, len(data)) == 0:
                    self.rx_queue_full += 1
                    self.kernel_free.append(int(addrs[0]))
            self.kcomp.reserve(1)
            self.kcomp.write_at_producer([d["addr"]])
            self.kcomp.submit_n(1)
        self.krx.submit()
        self.kfill.release_publish()
        self.ktx.release_publish()
        return self.ktx.has_descs() or self.ktx.nb_entries(1) > 0

    def _wakeup_rx(self) -> None:
        pass

    def poll(self, timeout_ms: int = 0) -> int:
        return 0

    def statistics(self) -> XdpStatistics:
        return XdpStatistics(tx_invalid_descs=self.ktx.invalid_descs,
                             rx_ring_full=self.rx_queue_full)

    def options(self) -> int:
        return 0

    def _close_backend(self) -> None:
        for r in (self.fill_ring, self.comp_ring, self.rx, self.tx):
            assert r is not None
            r.close()


def test_socket_loopback_send_recv_release_accounting() -> None:
    with Umem(32, 2048) as umem, LoopXsk(umem) as s:
        assert s.fill(8) == 8
        acc = s.check_accounting()
        assert acc["fill"] == 8 and acc["fill_ring"] == 8 and acc["free"] == 24
        pk = [bytes([i]) * (60 + i) for i in range(5)]
        assert s.send(pk) == 5
        batch = s.recv(64)
        assert batch.packets() == pk
        assert len(batch) == 5 and batch.len.tolist() == [60 + i for i in range(5)]
        assert bytes(batch.view(1)) == pk[1]
        assert batch.array().shape == (5, 64)
        acc = s.check_accounting()
        assert acc["rx"] == 5 and acc["tx"] == 0 and acc["fill"] == 3
        s.release(batch, refill=True)
        acc = s.check_accounting()
        assert acc["fill"] == 8 and acc["rx"] == 0
        with pytest.raises(ChunkAccountingError):
            s.release(batch)
        # numpy rows, mixed lengths
        rows = np.arange(3 * 100, dtype=np.uint8).reshape(3, 100)
        assert s.send(rows, lengths=[100, 50, 10]) == 3
        b2 = s.recv()
        assert b2.packets() == [rows[0].tobytes(), rows[1, :50].tobytes(),
                                rows[2, :10].tobytes()]
        s.release(b2)
        acc = s.check_accounting()
        assert (acc["free"], acc["fill"], acc["rx"]) == (27, 5, 0)


def test_socket_detects_bad_chunks() -> None:
    with Umem(16, 2048) as umem, LoopXsk(umem) as s:
        s.fill(4)
        # A "kernel" handing back a chunk the user never gave it.
        s.krx.produce_descs(umem.rx_addr([10 * 2048]), 60)
        s.krx.submit()
        with pytest.raises(ChunkAccountingError, match="expected FILL"):
            s.recv()
        # A completion for a chunk never sent.
        s.kcomp.reserve(1)
        s.kcomp.write_at_producer([5 * 2048])
        s.kcomp.submit_n(1)
        with pytest.raises(ChunkAccountingError, match="expected TX"):
            s.complete()


def test_socket_tx_backpressure_and_free_shortage() -> None:
    with Umem(6, 2048) as umem, LoopXsk(umem, size=4) as s:
        # no fill: looped frames are dropped (kernel would count rx_dropped)
        assert s.send([b"a" * 60] * 10) == 4  # the tx ring holds 4
        assert s.check_accounting()["free"] == 6
        assert s.send([b"b" * 60] * 6, kick=False) == 4
        assert s.check_accounting()["tx_ring"] == 4
        assert s.send([b"c" * 60] * 3, kick=False) == 0  # ring full
        s.flush()
        assert s.check_accounting()["free"] == 6


# --------------------------------------------------------------------------
# Two processes: the user and a "kernel", rings and UMEM in SharedMemory
# --------------------------------------------------------------------------

STRESS_N = 100_000
RING = 64
CHUNKS = 96
CHUNK = 2048
HEADROOM = 0
DATA_OFF = HEADROOM + 256


def _kernel_side(ring_name: str, umem_name: str, seed: int, total: int) -> None:
    """Consume fill addresses, write a sequence number into each chunk, produce rx."""
    shm = shared_memory.SharedMemory(ring_name)  # spawned: the parent's tracker, no leak
    umem = Umem.attach(umem_name, CHUNKS, CHUNK, HEADROOM)
    assert shm.buf is not None
    fill = KernelRingCons(shm.buf, RING, "addr", base=0)
    rx = KernelRingProd(shm.buf, RING, "desc", base=4096)
    words = umem.buf.view(np.uint64)
    rng = random.Random(seed)
    seq = 0
    while seq < total:
        n = min(rng.randint(1, 48), total - seq)
        addrs = fill.peek_addrs(n)
        k = min(len(addrs), rx.nb_free(len(addrs)))
        if k:
            data = umem.rx_addr(addrs[:k])
            words[(data // np.uint64(8)).astype(np.intp)] = np.arange(seq, seq + k,
                                                                     dtype=np.uint64)
            rx.produce_descs(data, 8 + np.arange(seq, seq + k) % 100, 0)
            fill.release(k)
            seq += k
        if not k or rng.random() < 0.3:  # flush only now and then: lazy publishing
            rx.submit()
            fill.release_publish()
        if rng.random() < 0.1:
            time.sleep(rng.random() * 1e-4)
        elif not k:
            time.sleep(0)
    rx.submit()
    fill.release_publish()
    fill.close()
    rx.close()
    del words
    umem.close()
    shm.close()


def test_two_process_stress_rings_and_umem() -> None:
    ctx = mp.get_context("spawn")
    shm = shared_memory.SharedMemory(create=True, size=8192)
    umem = Umem(CHUNKS, CHUNK, HEADROOM, shared=True)
    try:
        assert shm.buf is not None
        set_indices(shm.buf, NEAR_WRAP - 3, NEAR_WRAP - 3, base=0)  # wrap at 2**32 early on
        set_indices(shm.buf, NEAR_WRAP, NEAR_WRAP, base=4096)
        fill = RingProd(shm.buf, RING, "addr", base=0)
        rx = RingCons(shm.buf, RING, "desc", base=4096)
        free = list(range(CHUNKS))
        held: list[int] = []
        seen: list[np.ndarray] = []
        words = umem.buf.view(np.uint64)
        child = ctx.Process(target=_kernel_side, args=(shm.name, umem.name, 7, STRESS_N))
        child.start()
        rng = random.Random(11)
        received = 0
        deadline = time.monotonic() + 30
        while received < STRESS_N:
            assert time.monotonic() < deadline, f"stuck at {received}"
            assert child.is_alive() or rx.nb_avail(1) or received >= STRESS_N, \
                f"kernel side died: exit {child.exitcode}"
            n = min(rng.randint(1, 40), len(free))
            idx, k = fill.reserve(n)
            if k:
                fill.write(idx, np.array(free[:k], np.uint64) * CHUNK)
                del free[:k]
                fill.submit(k)
            idx, k = rx.peek(rng.randint(1, 64))
            if k:
                addr, ln, opt = rx.read_descs(idx, k)
                rx.release(k)
                seqs = words[(addr // np.uint64(8)).astype(np.intp)]
                seen.append(seqs.copy())
                assert (ln == 8 + seqs % 100).all() and not opt.any()
                assert ((addr - DATA_OFF) % CHUNK == 0).all()
                held.extend(((addr - DATA_OFF) // CHUNK).tolist())
                received += k
            if held and rng.random() < 0.5:  # hand chunks back in random-size lumps
                cut = rng.randint(1, len(held))
                free.extend(held[:cut])
                del held[:cut]
            if rng.random() < 0.05:
                time.sleep(rng.random() * 1e-4)
        child.join(10)
        assert child.exitcode == 0
        allseq = np.concatenate(seen)
        assert np.array_equal(allseq, np.arange(STRESS_N))  # none lost, doubled or reordered
        # Every chunk is in exactly one place: free, held, or the fill ring's window.
        cons, count = fill.window()
        in_ring = (fill.read_addrs(cons, count) // CHUNK).astype(int).tolist()
        everywhere = sorted(free + held + in_ring)
        assert everywhere == list(range(CHUNKS))
        assert rx.window()[1] == 0
        fill.close()
        rx.close()
        del words
    finally:
        shm.close()
        shm.unlink()
        umem.close()
        umem.unlink()


def test_chunk_state_names() -> None:
    assert [s.name for s in ChunkState] == ["FREE", "FILL", "RX", "TX"]


def test_send_refuses_oversized_packets_before_writing() -> None:
    with Umem(4, 2048, tx_metadata_len=16) as umem, LoopXsk(umem, size=4) as s:
        umem.buf[:] = 7
        with pytest.raises(ValueError, match="2032 bytes"):
            s.send([b"x" * 2033])
        with pytest.raises(ValueError, match="longer than its row"):
            s.send(np.zeros((1, 10), np.uint8), lengths=[11])
        assert (umem.buf == 7).all()  # nothing written
        assert s.check_accounting()["free"] == 4
        assert s.send([b"y" * 2032]) == 1
        assert s.check_accounting()["free"] == 4
