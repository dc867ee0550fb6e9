"""AF_XDP buffer pools: ``net/xdp/xsk_buff_pool.c`` (and the UMEM's registration,
``struct xdp_umem``), with the zero-copy driver side of a pyxdp NIC.

:class:`XskBuffPool` is a UMEM on one device queue with its fill and
completion rings (the datapath's side of them, :mod:`pyxdp.net.xsk_queue`):
buffers come from its free list, last freed first, then from the fill ring
(``xsk_buff_alloc``), and go back to the free list (``xsk_buff_free``).
Every address the user writes into the fill ring is checked before it is
used (inside the UMEM, and naming a chunk the user holds: ``kown``);
:meth:`XskBuffPool.check` proves where every chunk is. ``xp_assign_dev``
(:func:`xp_assign_dev`) registers a pool on a queue, zero-copy where the
device can.

Zero-copy (pyxdp NICs, ``MEM_TYPE_XSK_BUFF_POOL``): the UMEM becomes a region
of the host's page memory (:class:`UmemPages`, one "page" per chunk, as
``xp_dma_map`` maps it), the queue takes its buffers from the pool
(:func:`xsk_zc_dma`: the NIC's DMA into ``chunk + headroom + 256``), frees
them back (:func:`xsk_free_frames`) and converts them to order-0 pages
for XDP_TX and redirects elsewhere (:func:`xsk_zc_to_frames`,
``xdp_convert_zc_to_xdp_frame``).

The host, its devices and queues are seen through the protocols
:class:`XskHost`, :class:`XskNetDevice` and :class:`XskRxQueue`
(:mod:`pyxdp.net.netdevice` has the classes), so that AF_XDP sits below the
device model in the import graph.
"""

from __future__ import annotations

import errno as _errno
import mmap
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final, Protocol

import numpy as np
import numpy.typing as npt

from pyxdp.net.frames import KIND_BUFF, KIND_FRAME, Frames
from pyxdp.net.page_pool import (
    DIRECT_MAP_BASE,
    MAX_REGION_PAGES,
    PFN_REGION_SHIFT,
    REGION_ADDR_SHIFT,
    MemMap,
    PageAccountingError,
    PageMemory,
    PagePool,
)
from pyxdp.net.record import Alias, Field, Record
from pyxdp.net.stats import NetdevStats
from pyxdp.net.xdp import XDP_FRAME_SIZE, XDP_PACKET_HEADROOM
from pyxdp.net.xdp_mem import xdp_convert_zc_to_xdp_frame
from pyxdp.net.xdp_umem import UmemArea, XskError, add_offset_to_addr
from pyxdp.net.xsk_queue import (
    KERNEL,
    RX_RING,
    USER,
    KernelRingCons,
    KernelRingProd,
    RingMem,
    ring_side,
)
from pyxdp.uapi.if_xdp import XDP_RING_NEED_WAKEUP, XdpBindFlag

if TYPE_CHECKING:  # the stack's native code (numba) is not needed to load a program
    from pyxdp.net.stack import SkbBatch

__all__ = [
    "XDP_WAKEUP_RX",
    "XDP_WAKEUP_TX",
    "UmemPages",
    "XdpUmem",
    "XskBuffPool",
    "XskHost",
    "XskNetDevice",
    "XskPoolSock",
    "XskPoolState",
    "XskRxQueue",
    "xp_assign_dev",
    "xsk_free_frames",
    "xsk_zc_dma",
    "xsk_zc_to_frames",
]

XDP_WAKEUP_RX: Final = 1 << 0
XDP_WAKEUP_TX: Final = 1 << 1
_ZC_FEATURE: Final = 1 << 3  # NETDEV_XDP_ACT_XSK_ZEROCOPY

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]


def _err(op: str, err: int, detail: str = "") -> XskError:
    return XskError(op, err, detail)


# --------------------------------------------------------------------------
# What AF_XDP uses of the host, its devices and queues
# --------------------------------------------------------------------------

class XskHost(Protocol):
    """A host (``pyxdp.net.netdevice.Host``) as AF_XDP's kernel side uses it."""

    @property
    def name(self) -> str: ...
    @property
    def lock(self) -> AbstractContextManager[Any]: ...
    @property
    def memmap(self) -> MemMap: ...
    @property
    def devices(self) -> Mapping[int, XskNetDevice]: ...
    @property
    def backend(self) -> Any: ...  # xsk_register/xsk_unregister: a socket's "fd"
    @property
    def tracer(self) -> Any: ...
    @property
    def xsk_pools(self) -> dict[tuple[int, int], Any]: ...  # XskBuffPool by (ifindex, queue)
    @property
    def xsk_rx(self) -> dict[tuple[int, int], Any]: ...  # bpf_redirect_xsk's registrations
    @property
    def xsk_table(self) -> npt.NDArray[np.uint64]: ...
    @property
    def native(self) -> bool: ...  # machine code where it can (Host(native=...))
    @property
    def closed(self) -> bool: ...  # Host.close() ran: its devices are gone
    def poll(self, budget: int = ...) -> int: ...
    def drop_frames(self, frames: Frames, rq: Any, *, direct: bool,
                    frames_direct: bool | None = ...) -> None: ...
    def frames_to_skbs(self, frames: Frames, ifindex: int) -> Any: ...  # an SkbBatch


class XskNetDevice(Protocol):
    """A device (``pyxdp.net.netdevice.NetDevice``) as AF_XDP's kernel side uses it."""

    @property
    def host(self) -> XskHost: ...
    @property
    def ifindex(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def up(self) -> bool: ...
    @property
    def mtu(self) -> int: ...
    @property
    def xdp_features(self) -> int: ...
    @property
    def num_tx_queues(self) -> int: ...
    @property
    def rx(self) -> Sequence[XskRxQueue]: ...
    @property
    def stats(self) -> NetdevStats: ...
    @property
    def wire(self) -> Sequence[Any]: ...  # sinks shown what the device transmits
    def xmit_skbs(self, batch: SkbBatch) -> None: ...


class XskRxQueue(Protocol):
    """An rx queue (``pyxdp.net.netdevice.NetdevRxQueue``) as AF_XDP uses it: ``xsk``
    is its zero-copy buffer pool, ``native`` the native poll loop's state."""

    xsk: Any
    native: Any

    @property
    def dev(self) -> XskNetDevice: ...
    @property
    def index(self) -> int: ...
    @property
    def pool(self) -> PagePool: ...
    @property
    def ring(self) -> Any: ...  # the descriptor ring (FrameRing)
    @property
    def ctx(self) -> Any: ...  # the queue's RunContext


class XskPoolSock(Protocol):
    """A socket bound through a pool, as the pool sees it: its rings' kernel sides."""

    @property
    def krx(self) -> KernelRingProd | None: ...
    @property
    def ktx(self) -> KernelRingCons | None: ...


# --------------------------------------------------------------------------
# The UMEM as page memory (zero-copy)
# --------------------------------------------------------------------------

class UmemPages(PageMemory):
    """A UMEM seen as a region of the host's page memory: one "page" per chunk.

    Zero-copy queues put frames in UMEM chunks; the datapath names them by pfn
    like any page, runs programs on ``pages`` (the UMEM's ``(nchunks,
    chunk_size)`` view, in place) and copies out of them. ``held[i]`` is set
    while the NIC/datapath owns chunk ``i`` (between its DMA and its hand-over
    to the socket or its return to the pool): :meth:`check` reports chunks a
    test left held.
    """

    kind = "xsk_umem"

    def __init__(self, umem: UmemArea, host: XskHost, name: str) -> None:  # noqa: D107
        # Not PageMemory.__init__: the memory is the UMEM's, not a new mapping.
        if umem.unaligned or umem.nchunks > MAX_REGION_PAGES:
            raise ValueError("zero-copy UMEM regions are aligned and at most 2**20 chunks")
        self.umem = umem
        self.npages = umem.nchunks
        self.page_size = umem.chunk_size
        self.page_shift = umem.chunk_size.bit_length() - 1
        self.nbytes = umem.size
        self.order = 0
        self.strict = True
        self.memmap = host.memmap
        self.raw = mmap.mmap(-1, mmap.PAGESIZE)  # no xdp_frame ever lives in a UMEM
        self.buf = umem.buf
        self.pages = umem.buf.reshape(umem.nchunks, umem.chunk_size)
        self.words = umem.buf.view(np.uint32).reshape(umem.nchunks, -1)
        self.qwords = umem.buf.view(np.int64).reshape(umem.nchunks, -1)
        self.region_id = self.memmap._attach(self)
        self.pfn_base = self.region_id << PFN_REGION_SHIFT
        self.addr_base = DIRECT_MAP_BASE + (self.region_id << REGION_ADDR_SHIFT)
        self.name = name
        self.held = np.zeros(umem.nchunks, np.uint8)
        # Chunks a pool on this region holds as KERNEL (its free list or buffers):
        # queues sharing the UMEM take from the user only chunks nobody holds.
        self.kernel = np.zeros(umem.nchunks, np.uint8)
        self.users = 1

    def in_use(self) -> I64:
        return np.flatnonzero(self.held).astype(np.int64) + self.pfn_base

    def in_use_mask(self, local: I64) -> BoolArray:
        mask: BoolArray = self.held[local] != 0
        return mask

    def detach(self) -> None:
        self.memmap._detach(self)
        self.raw.close()



class XdpUmem:
    """``struct xdp_umem``: one registration of a UMEM (shared by XDP_SHARED_UMEM sockets)."""

    def __init__(self, umem: UmemArea) -> None:
        self.umem = umem
        self.zc = False
        self.sg = False
        self.regions: dict[int, UmemPages] = {}  # zero-copy region per host (by id)


# --------------------------------------------------------------------------
# The buffer pool
# --------------------------------------------------------------------------

class XskPoolState(Record):
    """``struct xsk_buff_pool``'s scalars, shared in place with native code
    (:mod:`pyxdp.net.xsk_native`): the free list's count, need-wakeup, the UMEM's
    geometry and the addresses of the pool's arrays."""

    free_list_cnt = Field()
    nchunks = Field()  # the free list's room
    uses_need_wakeup = Field()
    cached_need_wakeup = Field()  # XDP_WAKEUP_RX/TX: the flags set in the rings
    chunk_size = Field()
    chunk_shift = Field()  # aligned UMEMs: log2(chunk_size), chunks found by shift
    unaligned = Field()
    size = Field()  # the UMEM's bytes
    rx_data_offset = Field()  # headroom + XDP_PACKET_HEADROOM
    rx_frame_size = Field()
    tx_metadata_len = Field()
    pfn_base = Field()  # zero-copy: the first pfn of the UMEM's page region
    umem_at = Field()  # addresses: the UMEM, the free list (u64), kown (u8)
    free_at = Field()
    kown_at = Field()
    zown_at = Field()  # zero-copy: the region's chunks some pool holds (u8), else 0
    held_at = Field()  # zero-copy: the region's chunks the NIC holds (u8), else 0


class XskBuffPool:
    """``struct xsk_buff_pool``: a UMEM on one device queue, its fill and completion rings.

    ``fq``/``cq`` are the datapath's side of the fill and completion rings;
    ``free_list`` holds buffers the datapath took from the fill ring and gave
    back (``xsk_buff_free``), reused first (last freed first). The scalars are
    :class:`XskPoolState` ``state``.
    """

    free_list_cnt = Alias(XskPoolState, "free_list_cnt")
    uses_need_wakeup = Alias(XskPoolState, "uses_need_wakeup")
    cached_need_wakeup = Alias(XskPoolState, "cached_need_wakeup")

    def __init__(self, kumem: XdpUmem, fq: RingMem, cq: RingMem) -> None:
        self.kumem = kumem
        self.umem = kumem.umem
        self._fq_mem, self._cq_mem = fq, cq
        fq.users += 1
        cq.users += 1
        self.fq = ring_side(fq, "kernel", KernelRingCons)
        self.cq = ring_side(cq, "kernel", KernelRingProd)
        self.dev: XskNetDevice | None = None
        self.queue_id = 0
        umem = self.umem
        self._free = np.zeros(max(umem.nchunks, 1), np.uint64)
        # Who holds each chunk (pyxdp.net.xsk_queue USER/KERNEL/RX_RING): a chunk is taken
        # from the fill ring only while the user holds it, so the free list, the
        # NIC's buffers and the rx ring never hold one chunk twice.
        self.kown = np.zeros(max(umem.nchunks, 1), np.uint8)
        self.state = XskPoolState(
            nchunks=len(self._free), chunk_size=umem.chunk_size,
            chunk_shift=umem.chunk_size.bit_length() - 1, unaligned=int(umem.unaligned),
            size=umem.size, rx_data_offset=umem.rx_data_offset,
            rx_frame_size=umem.rx_frame_size, tx_metadata_len=umem.tx_metadata_len,
            umem_at=umem.buf.ctypes.data, free_at=self._free.ctypes.data,
            kown_at=self.kown.ctypes.data)
        self.zc = False
        self.region: UmemPages | None = None
        self.xsks: list[XskPoolSock] = []  # xsk_tx_list: sockets with a tx ring
        self.socks: list[XskPoolSock] = []  # every socket bound through this pool
        self.users = 1
        self.dry_skipped = 0  # entries the last search that found nothing skipped
        size = self.umem.size
        self._size = np.uint64(size)
        self._chunk = np.uint64(self.umem.chunk_size)

    # -- buffers ------------------------------------------------------------------
    # Every address the user writes into the fill ring is checked before it is used:
    # inside the UMEM (xp_check_aligned/xp_check_unaligned), and naming a chunk the
    # user holds (``kown``, pyxdp's own rule: Linux takes a chunk it already holds
    # again). Entries failing either are consumed and counted in the fill ring's
    # invalid_descs. A search for one buffer loads the fill producer at most once
    # (a ring full of invalid entries costs one ring's worth per buffer), as
    # pyxdp.net.xsk_native.fq_peek does.
    def _check_addrs(self, addrs: U64) -> tuple[U64, BoolArray]:
        """``xp_check_aligned``/``xp_check_unaligned``: the buffer base, and validity."""
        if self.umem.unaligned:
            base = add_offset_to_addr(addrs)
            ok = (base < self._size) & (base + self._chunk <= self._size)
            return base, np.asarray(ok, np.bool_)
        base = addrs & ~(self._chunk - np.uint64(1))
        return base, np.asarray(base < self._size, np.bool_)

    def _usable(self, addrs: U64) -> tuple[U64, I64, BoolArray]:
        """Fill entries in ring order: their buffer bases, chunks, and which may be
        taken (a valid address of a chunk the user holds, its first time in
        ``addrs``). A chunk whose rx descriptor may have been consumed since the rx
        consumer was last loaded is looked up there first."""
        base, ok = self._check_addrs(addrs)
        loc = np.where(ok, base // self._chunk, 0).astype(np.int64)
        st = self.kown[loc]
        if (ok & (st == RX_RING)).any():
            self.reclaim_rx()
            st = self.kown[loc]
        ok &= st == USER
        if self.region is not None:  # zero-copy: not the kernel's on another queue either
            ok &= self.region.kernel[loc] == 0
        pos = np.flatnonzero(ok)
        if len(pos) > 1:  # the same chunk twice: the first is taken, the others invalid
            first = np.unique(loc[pos], return_index=True)[1]
            if len(first) < len(pos):
                ok[:] = False
                ok[pos[first]] = True
        return base, loc, ok

    def reclaim_rx(self) -> None:
        """Load the rx consumer of each socket of the pool: chunks consumed there are
        the user's again."""
        for xs in self.socks:
            if xs.krx is not None:
                xs.krx.reload_consumer()

    def alloc(self, n: int) -> U64:
        """Up to ``n`` buffers (base addresses): free list first, then the fill ring,
        until a search for one finds none."""
        if n <= 0:
            return np.zeros(0, np.uint64)
        k = min(n, self.free_list_cnt)
        parts = [self._free[self.free_list_cnt - k:self.free_list_cnt][::-1].copy()]
        self.free_list_cnt -= k
        need = n - k
        fq = self.fq
        loaded = False  # the current search loaded the producer
        skipped = 0  # entries the current search skipped
        while need > 0:
            if fq.present() == 0:
                if loaded:
                    break
                fq.get_entries()  # __xskq_cons_release + __xskq_cons_peek
                loaded = True
            avail = min(fq.present(), need)
            if avail == 0:
                break
            base, loc, ok = self._usable(fq.read_addrs(fq.cached_cons, avail))
            fq.release(avail)
            pos = np.flatnonzero(ok)
            fq.invalid_descs += avail - len(pos)  # not in XDP_STATISTICS, as in Linux
            if len(pos):
                loaded = False
                skipped = avail - 1 - int(pos[-1])
                self.kown[loc[pos]] = KERNEL
                if self.region is not None:
                    self.region.kernel[loc[pos]] = 1
                parts.append(base[pos])
                need -= len(pos)
            else:
                skipped += avail
        self.dry_skipped = skipped
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def can_alloc_one(self) -> bool:
        """Whether one more buffer is there (without taking it; invalid fill entries
        met on the way are skipped and counted as an allocation would)."""
        if self.free_list_cnt:
            return True
        fq = self.fq
        loaded = False
        self.dry_skipped = 0
        while True:
            if fq.present() == 0:
                if loaded:
                    return False
                fq.get_entries()
                loaded = True
                if fq.present() == 0:
                    return False
            n = fq.present()
            _, _, ok = self._usable(fq.read_addrs(fq.cached_cons, n))
            skip = int(np.argmax(ok)) if ok.any() else n
            if skip:
                fq.release(skip)
                fq.invalid_descs += skip
                self.dry_skipped += skip
            if skip < n:
                return True

    def can_alloc(self, count: int) -> bool:
        """``xp_can_alloc``: ``count`` buffers between the free list and the fill ring."""
        if self.free_list_cnt >= count:
            return True
        return self.fq.nb_entries(count - self.free_list_cnt) >= count - self.free_list_cnt

    def free(self, addrs: U64) -> None:
        """``xsk_buff_free``: buffers back on the free list (still the kernel's)."""
        k = len(addrs)
        if k:
            self._free[self.free_list_cnt:self.free_list_cnt + k] = addrs
            self.free_list_cnt += k

    def check(self) -> None:
        """Raise :class:`~pyxdp.net.page_pool.PageAccountingError` unless ``kown``
        says where every chunk is: the kernel's are on the free list or held by the
        NIC (each in one place), the rx ring's are each in one unconsumed rx slot."""
        def bad(why: str, chunks: I64) -> PageAccountingError:
            return PageAccountingError(f"AF_XDP pool of {self.umem!r}: {why}",
                                       pages=chunks[:16].tolist(), owner="xsk_buff_pool")

        free = self.chunks_of(self._free[:self.free_list_cnt])
        if len(np.unique(free)) != len(free):
            raise bad("a chunk is twice on the free list", free)
        held = (np.flatnonzero(self.region.held) if self.region is not None
                else np.zeros(0, np.int64))
        kernel = np.flatnonzero(self.kown == KERNEL)
        mine = np.union1d(free, held)
        if len(np.intersect1d(free, held)):
            raise bad("a chunk is on the free list and held", np.intersect1d(free, held))
        if len(np.setdiff1d(free, kernel)) or len(np.setdiff1d(kernel, mine)):
            raise bad("the kernel's chunks are not its free list and held buffers",
                      np.setxor1d(kernel, np.intersect1d(mine, kernel)))
        slots = [xs.krx.slot_chunk[(xs.krx.cached_cons + np.arange(
                     (xs.krx.cached_prod - xs.krx.cached_cons) & 0xFFFF_FFFF)) & xs.krx.mask]
                 for xs in self.socks if xs.krx is not None]
        in_rx = np.concatenate(slots) if slots else np.zeros(0, np.int64)
        if len(np.unique(in_rx)) != len(in_rx):
            raise bad("a chunk is in two rx slots", in_rx)
        if not np.array_equal(np.sort(in_rx), np.flatnonzero(self.kown == RX_RING)):
            raise bad("the rx ring's chunks are not the unconsumed rx slots'",
                      np.setxor1d(in_rx, np.flatnonzero(self.kown == RX_RING)))

    def chunks_of(self, bases: U64) -> I64:
        """The chunk (``kown`` index) of each buffer base."""
        return (bases // self._chunk).astype(np.int64)

    # -- need wakeup --------------------------------------------------------------
    def set_rx_need_wakeup(self) -> None:
        if self.cached_need_wakeup & XDP_WAKEUP_RX:
            return
        self.fq.set_flags(XDP_RING_NEED_WAKEUP)
        self.cached_need_wakeup |= XDP_WAKEUP_RX

    def clear_rx_need_wakeup(self) -> None:
        if not self.cached_need_wakeup & XDP_WAKEUP_RX:
            return
        self.fq.clear_flags(XDP_RING_NEED_WAKEUP)
        self.cached_need_wakeup &= ~XDP_WAKEUP_RX

    def release(self) -> None:
        """``xp_put_pool``: the last user unregisters the pool from its queue."""
        self.users -= 1
        if self.users:
            return
        dev = self.dev
        if dev is not None:
            host = dev.host
            host.xsk_pools.pop((dev.ifindex, self.queue_id), None)
            if self.zc:
                _zc_disable(self, dev)
        self._fq_mem.put()
        self._cq_mem.put()


# --------------------------------------------------------------------------
# Zero-copy queues (pyxdp NICs)
# --------------------------------------------------------------------------

def _zc_enable(pool: XskBuffPool, dev: XskNetDevice, queue: int) -> None:
    """``ndo_bpf(XDP_SETUP_XSK_POOL)``: the queue's buffers now come from the pool."""
    host = dev.host
    kumem = pool.kumem
    region = kumem.regions.get(id(host))
    if region is None or region.memmap is not host.memmap:
        region = UmemPages(pool.umem, host, f"{dev.name}-xsk{queue}")
        kumem.regions[id(host)] = region
    else:
        region.users += 1
    pool.region = region
    pool.zc = True
    st = pool.state
    st.pfn_base = region.pfn_base
    st.zown_at = region.kernel.ctypes.data
    st.held_at = region.held.ctypes.data
    if queue < len(dev.rx):
        rq = dev.rx[queue]
        # The queue is reset: frames the NIC had in page pool pages go back.
        with host.lock:
            rest = rq.ring.consume(len(rq.ring))
            host.drop_frames(rest, rq, direct=False)
            rq.native = None
            rq.xsk = pool


def _zc_disable(pool: XskBuffPool, dev: XskNetDevice) -> None:
    host = dev.host
    q = pool.queue_id
    if q < len(dev.rx) and dev.rx[q].xsk is pool:
        rq = dev.rx[q]
        with host.lock:
            rest = rq.ring.consume(len(rq.ring))
            if len(rest):
                xsk_free_frames(host, rq, rest)
            rq.xsk = None
            rq.ctx.xdp = None  # the last run's buffer was a UMEM chunk
    region = pool.region
    pool.region = None
    st = pool.state
    st.pfn_base = st.zown_at = st.held_at = 0
    if region is not None:
        region.kernel[pool.kown == KERNEL] = 0  # the pool's buffers are nobody's now
        region.users -= 1
        if region.users == 0:
            region.detach()
            pool.kumem.regions.pop(id(host), None)


def _rx_data_offset(umem: UmemArea) -> int:
    return umem.headroom + XDP_PACKET_HEADROOM


def xsk_zc_dma(rq: XskRxQueue, batch: SkbBatch) -> int:
    """A zero-copy NIC queue receiving ``batch``: each frame DMA'd into a UMEM chunk
    from the pool (``xsk_buff_alloc_batch``) and queued for the next poll; frames
    without a buffer (or longer than a buffer takes) are dropped. Returns how
    many were taken."""
    dev = rq.dev
    pool: XskBuffPool = rq.xsk
    region = pool.region
    assert region is not None
    umem = pool.umem
    n = min(len(batch), rq.ring.free)
    if n < len(batch):
        dev.stats.rx_dropped += len(batch) - n
    if n <= 0:
        return 0
    lens = batch.length[:n]
    off = _rx_data_offset(umem)
    fits = lens <= umem.chunk_size - off
    if not fits.all():  # longer than a buffer: the NIC drops it (no multi-buffer zc)
        dev.stats.rx_dropped += int((~fits).sum())
    pick = np.flatnonzero(fits)
    bufs = pool.alloc(len(pick))
    g = len(bufs)
    if g < len(pick):
        dev.stats.rx_dropped += len(pick) - g
        pool.fq.queue_empty_descs += 1  # xp_alloc_batch found the fill ring empty
        if pool.uses_need_wakeup:
            pool.set_rx_need_wakeup()
    elif pool.uses_need_wakeup:
        pool.clear_rx_need_wakeup()
    if not g:
        return 0
    pick = pick[:g]
    chunks = (bufs // np.uint64(umem.chunk_size)).astype(np.int64)
    width = min(batch.data.shape[1], umem.chunk_size - off)
    region.pages[chunks, off:off + width] = batch.data[pick, :width]
    region.held[chunks] = 1
    rq.ring.produce(Frames.make(chunks + region.pfn_base, off, lens[pick]))
    return g


def xsk_free_frames(host: XskHost, rq: XskRxQueue, frames: Frames, *,
                    direct: bool = False) -> None:
    """Free a zero-copy queue's own buffers (``xsk_buff_free``: back to the pool's
    free list); other frames (page pool pages) as ``host.drop_frames`` frees them."""
    pool: XskBuffPool = rq.xsk
    region = pool.region
    if region is None:
        return
    mine = (frames.pfn >> PFN_REGION_SHIFT) == region.region_id
    if mine.any():
        chunks = frames.pfn[mine] - region.pfn_base
        if (region.held[chunks] == 0).any():
            raise PageAccountingError(f"{region.name}: a UMEM chunk freed that the datapath "
                                      "does not hold", pages=frames.pfn[mine][:16].tolist(),
                                      owner=region.name)
        region.held[chunks] = 0
        pool.free(chunks.astype(np.uint64) * np.uint64(pool.umem.chunk_size))
    if not mine.all():
        rq.pool.put_pages(frames.pfn[~mine & (frames.kind == KIND_BUFF)], allow_direct=direct)


def xsk_zc_to_frames(host: XskHost, rq: XskRxQueue | None, mem: PageMemory, frames: Frames,
                     pos: npt.NDArray[np.intp]) -> npt.NDArray[np.int32]:
    """``xdp_convert_buff_to_frame`` of zero-copy buffers (``frames`` at ``pos``, all in
    UMEM ``mem``): ``xdp_convert_zc_to_xdp_frame`` copies each into an order-0 page
    and frees the buffer; ``frames`` is rewritten in place for those converted.
    Returns 0 or -errno per frame (failed ones stay UMEM buffers, for the caller
    to free)."""
    assert isinstance(mem, UmemPages)
    rows = frames.pfn[pos] - mem.pfn_base
    data = rows * mem.page_size + frames.data[pos]
    pfns, status = xdp_convert_zc_to_xdp_frame(mem.buf, data, frames.length[pos],
                                               frames.meta[pos], memmap=host.memmap)
    ok = status == 0
    if ok.any():
        p = pos[ok]
        pool = rq.xsk if rq is not None and rq.xsk is not None else _pool_of_region(host, mem)
        mem.held[rows[ok]] = 0
        if pool is not None:
            pool.free(rows[ok].astype(np.uint64) * np.uint64(mem.page_size))
        frames.pfn[p] = pfns[ok]
        frames.data[p] = XDP_FRAME_SIZE + np.maximum(frames.meta[p], 0)
        frames.kind[p] = KIND_FRAME
    return status


def _pool_of_region(host: XskHost, mem: PageMemory) -> XskBuffPool | None:
    for pool in host.xsk_pools.values():
        if isinstance(pool, XskBuffPool) and pool.region is mem:
            return pool
    return None


# --------------------------------------------------------------------------
# Binding a pool to a queue
# --------------------------------------------------------------------------

def xp_assign_dev(pool: XskBuffPool, d: XskNetDevice, queue_id: int, flags: int, op: str) -> None:
    """``xp_assign_dev``: register the pool on the queue, zero-copy if asked and possible."""
    force_zc = bool(flags & XdpBindFlag.XDP_ZEROCOPY)
    force_copy = bool(flags & XdpBindFlag.XDP_COPY)
    if force_zc and force_copy:
        raise _err(op, _errno.EINVAL, "XDP_COPY and XDP_ZEROCOPY together")
    host = d.host
    if (d.ifindex, queue_id) in host.xsk_pools:
        raise _err(op, _errno.EBUSY, "a socket is already bound to that queue")
    if queue_id >= max(len(d.rx), d.num_tx_queues):
        raise _err(op, _errno.EINVAL, f"queue id {queue_id} is past {d.name}'s queues")
    pool.dev = d
    pool.queue_id = queue_id
    host.xsk_pools[(d.ifindex, queue_id)] = pool
    if flags & XdpBindFlag.XDP_USE_SG:
        pool.kumem.sg = True
    if flags & XdpBindFlag.XDP_USE_NEED_WAKEUP:
        pool.uses_need_wakeup = True
    pool.cached_need_wakeup = XDP_WAKEUP_TX  # tx is kicked at least the first time
    if force_copy:
        return
    why = ""
    if not d.xdp_features & _ZC_FEATURE:
        why = f"{d.name} ({d.kind}) cannot do zero-copy: bind with XDP_COPY"
    elif flags & XdpBindFlag.XDP_USE_SG:
        why = f"{d.name} does zero-copy with one buffer per frame (no XDP_USE_SG)"
    elif pool.umem.unaligned:
        why = f"{d.name} does zero-copy into aligned UMEMs only"
    elif queue_id >= len(d.rx):
        why = f"queue {queue_id} of {d.name} has no rx side to give buffers to"
    if why:
        if force_zc:
            host.xsk_pools.pop((d.ifindex, queue_id), None)
            pool.dev = None
            raise _err(op, _errno.EOPNOTSUPP, why)
        return  # no mode flag: copy mode
    pool.kumem.zc = True
    _zc_enable(pool, d, queue_id)
