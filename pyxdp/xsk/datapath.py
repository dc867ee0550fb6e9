"""AF_XDP sockets on pyxdp's datapath: ``net/xdp/xsk.c``, ``xsk_buff_pool.c``, ``xskmap.c``.

:class:`PyxdpXskSocket` is an :class:`~pyxdp.xsk.xsk.XskSocket` (the same
batch API as :class:`~pyxdp.xsk.linux.LinuxXskSocket`) bound to a queue of a
pyxdp device (:class:`~pyxdp.net.netdevice.NetDevice`). Its four rings live
in anonymous shared memory: the user drives its side with the libxdp-style
producer/consumer of :mod:`pyxdp.xsk.queue`, the datapath the kernel's lazy
side (:class:`~pyxdp.xsk.queue.KernelRingCons`/``KernelRingProd``) of the
same bytes.

Modelled as Linux 6.18 does it (and as measured there, see
``tests/kernel/test_xsk_datapath_kernel.py``):

* ``bind`` (``xsk_bind``/``xp_assign_dev``), errnos in the kernel's order:
  EINVAL for unknown flags, EBUSY when already bound, ENODEV, EINVAL without
  rx and tx rings, ``XDP_SHARED_UMEM`` with other flags, with a UMEM of its
  own or (same queue) with fill/completion rings of its own; EBADF when the
  socket shared with is not bound; EINVAL without UMEM or fill/completion
  rings, for ``XDP_COPY`` with ``XDP_ZEROCOPY`` and for a queue id past
  ``max(rx, tx queues)``; EBUSY when the queue has a buffer pool already;
  EOPNOTSUPP for ``XDP_ZEROCOPY`` where the device cannot (pyxdp veth, like
  Linux veth; pyxdp NICs can, into aligned UMEMs without ``XDP_USE_SG``);
  no mode flag tries zero-copy and falls back to copy. ``XDP_SHARED_UMEM``
  on the same device and queue shares the buffer pool (fill and completion
  rings), elsewhere it makes a pool of its own over the same UMEM, in the
  UMEM's mode.
* receive, copy mode (``xsk_rcv_check`` + ``__xsk_rcv``), one numpy pass per
  socket and batch: not bound -ENXIO; another device or queue -EINVAL; a
  frame longer than ``chunk_size - headroom - 256`` -ENOSPC (``rx_dropped``);
  then a buffer from the pool (its free list, then the fill ring; invalid
  fill addresses are skipped): none -ENOMEM (``rx_dropped`` and
  ``rx_fill_ring_empty_descs``); then an rx slot: none -ENOBUFS
  (``rx_ring_full``) and the buffer stays in the fill ring (6.18 consumes
  no fill entry for it, measured). Metadata and data are copied to
  ``chunk + headroom + 256`` (metadata just before), the rx descriptors are
  published at ``xdp_do_flush`` (``xsk_flush``, which also publishes the fill
  ring's consumer index). With ``XDP_USE_SG`` a longer frame is split over
  several buffers (``XDP_PKT_CONTD``).
* receive, zero-copy (pyxdp NICs): the queue takes its buffers from the
  socket's fill ring instead of its page pool (``MEM_TYPE_XSK_BUFF_POOL``):
  the NIC's DMA writes each frame at ``chunk + headroom + 256`` of a UMEM
  chunk, the program runs on the UMEM in place (the UMEM is a region of the
  host's page memory, :class:`UmemPages`), ``XDP_REDIRECT`` to the socket
  hands the chunk over as it is (``xsk_rcv_zc``: the descriptor points at
  ``data``, wherever the program moved it), ``XDP_DROP`` recycles it in the
  pool (``xsk_buff_free``), ``XDP_PASS`` copies it into an skb and
  ``XDP_TX``/redirect elsewhere into an order-0 page
  (``xdp_convert_zc_to_xdp_frame``). A frame that finds no buffer is dropped
  by the NIC (``rx_dropped`` of the device, one
  ``rx_fill_ring_empty_descs`` per DMA batch) and, with need-wakeup, the fill
  ring's ``XDP_RING_NEED_WAKEUP`` is set until buffers come.
* transmit, copy mode (``__xsk_generic_xmit``), per kick (``sendto``/
  ``poll``): at most ``max_tx_budget`` (32, ``set_tx_budget``) descriptors,
  then -EAGAIN; a full completion ring -EAGAIN; the drain that empties the
  ring counts one ``tx_ring_empty_descs``; an invalid descriptor
  (``xp_validate_desc``) takes a completion slot, is counted in
  ``tx_invalid_descs``, *completes* (6.18 puts its address on the completion
  ring, measured) and ends the call; each packet becomes an skb that the
  device transmits (``dev.xmit_skbs``: a veth's peer receives it), and its
  addresses complete once it is sent; a veth whose peer is down or too small
  an MTU drops it (-EBUSY, completed). ``XDP_PKT_CONTD`` chains make one
  packet; ``XDP_TX_METADATA`` needs ``tx_metadata_len`` (else -EINVAL and
  the ring is stuck on that descriptor), asks for a software checksum
  (``XDP_TXMD_FLAGS_CHECKSUM``) or a completion timestamp.
* transmit, zero-copy (``xsk_tx_peek_release_desc_batch``): a wakeup makes
  the NIC send up to its ring size of descriptors straight from the UMEM;
  invalid descriptors are skipped without completing; the ring keeps
  ``XDP_RING_NEED_WAKEUP`` (the NIC needs a kick for every burst).
* in machine code: with the host's native loop, a queue with exactly one
  socket receives in :mod:`pyxdp.net.napi_native` (copy and zero-copy,
  errors included) by the same rules (:class:`NativeRx` carries the state;
  ``tests/test_xsk_native.py`` checks both paths give the same descriptors,
  bytes, statistics and trace counters).
* what the user writes is checked before use, here and in machine code alike:
  fill entries outside the UMEM or naming a chunk the datapath holds (pool
  ``kown``: in a buffer, on the free list, in an unconsumed rx slot; zero-copy:
  the kernel's on another queue) are skipped and counted invalid; a producer
  more than a ring ahead is believed for a ring's worth per load; an rx or
  completion consumer outside what was produced is ignored
  (``docs/SEMANTICS.md``, ``tests/test_xsk_hostile.py``).
* need-wakeup: copy mode never flags the fill ring and always flags tx;
  ``XDP_STATISTICS`` as ``xsk_getsockopt`` fills it; ``XDP_OPTIONS``.
* ``poll``: copy-mode tx is driven as by ``sendto``; POLLIN when the rx ring
  has entries, POLLOUT while the tx ring is at most half full; with a
  timeout and nothing ready, one softirq round of the host runs first
  (pyxdp's NAPI runs in the caller's thread).

pyxdp has no file descriptors: a socket gets an ``fd``, a number its
host's userspace backend resolves in XSKMAP updates (as a program's id is
its "fd" in a devmap). Closing a socket removes it from every XSKMAP
(``xsk_delete_from_maps``).

**bpf_redirect_xsk** (a pyxdp extension: the bpf-next series of January
2021, never merged): ``bind`` registers the first socket with an rx ring
bound to an rx queue on that queue (``netdev_rx_queue``), and the helper
``bpf_redirect_xsk(ctx, flags)`` (id :data:`~pyxdp.net.filter.BPF_FUNC_REDIRECT_XSK`)
redirects to it, or returns ``flags & 3`` when the queue has none. The
redirect reaches :func:`xsk_map_redirect` with no map (map id 0), the queue
as index. The kernel refuses the helper id (``invalid func``): programs
using it run on pyxdp only.

Simplified: one CPU per thread, no busy polling, no ``XDP_MAX_TX_SKB_BUDGET``
above the tx ring size check; a pool is released at once when its last
socket closes (the kernel defers it ~15 ms); a copy-mode tx chain whose last
descriptor still has ``XDP_PKT_CONTD`` is left in the ring until its end
arrives (the kernel consumes it into a pending skb); an invalid descriptor
inside a chain drops the whole chain (each counted invalid and completed);
a zero-copy frame's ``data_hard_start`` is its chunk's start (the UMEM
headroom counts as XDP headroom); zero-copy tx of a pool shared by several
sockets drains them one after the other (not 32 each round robin); sockets
without an rx ring refuse redirected frames with -ENOBUFS.
"""

from __future__ import annotations

import errno as _errno
import mmap
import struct
import time
from typing import TYPE_CHECKING, Any, Final, TypeVar

import numpy as np
import numpy.typing as npt

from pyxdp.net.frames import KIND_BUFF, KIND_FRAME, Frames
from pyxdp.net.page_pool import (
    DIRECT_MAP_BASE,
    MAX_REGION_PAGES,
    PFN_REGION_SHIFT,
    REGION_ADDR_SHIFT,
    PageMemory,
)
from pyxdp.net.stack import SkbBatch
from pyxdp.net.xdp import XDP_FRAME_SIZE, XDP_PACKET_HEADROOM
from pyxdp.net.xdp_mem import xdp_convert_zc_to_xdp_frame
from pyxdp.net.xdp_umem import XskError, add_offset_to_addr
from pyxdp.net.xsk_queue import (
    KERNEL,
    RX_RING,
    USER,
    KernelRingCons,
    KernelRingProd,
    Ring,
    RingKind,
    ring_bytes,
)
from pyxdp.uapi.if_xdp import (
    XDP_OPTIONS_ZEROCOPY,
    XDP_RING_NEED_WAKEUP,
    XdpBindFlag,
    XdpDescOption,
    XdpStatistics,
    XdpTxmdFlag,
)
from pyxdp.xsk.queue import RingCons, RingProd
from pyxdp.xsk.umem import Umem
from pyxdp.xsk.xsk import ChunkPool, XskSocket, bind_flags

if TYPE_CHECKING:
    from pyxdp.net.napi import BulkQueues
    from pyxdp.net.netdevice import Host, NetDevice, NetdevRxQueue

__all__ = [
    "DEFAULT_RING_SIZE",
    "TX_BATCH_SIZE",
    "PyxdpXskSocket",
    "UmemPages",
    "XskBuffPool",
    "xsk_flush",
    "xsk_free_frames",
    "xsk_generic_redirect",
    "xsk_map_redirect",
    "xsk_native_fold",
    "xsk_native_rx",
    "xsk_native_socket",
    "xsk_zc_dma",
    "xsk_zc_to_frames",
]

DEFAULT_RING_SIZE: Final = 2048  # XSK_RING_{PROD,CONS}__DEFAULT_NUM_DESCS
TX_BATCH_SIZE: Final = 32  # net/xdp/xsk.c: descriptors one copy-mode sendto sends
XDP_WAKEUP_RX: Final = 1 << 0
XDP_WAKEUP_TX: Final = 1 << 1
MAX_SKB_FRAGS: Final = 17
XSK_TX_METADATA_SIZE: Final = 24  # struct xsk_tx_metadata
_TXMD_VALID: Final = int(XdpTxmdFlag.XDP_TXMD_FLAGS_TIMESTAMP | XdpTxmdFlag.XDP_TXMD_FLAGS_CHECKSUM
                         | XdpTxmdFlag.XDP_TXMD_FLAGS_LAUNCH_TIME)
_CONTD: Final = int(XdpDescOption.XDP_PKT_CONTD)
_TX_META: Final = int(XdpDescOption.XDP_TX_METADATA)
_BIND_FLAGS: Final = int(XdpBindFlag.XDP_SHARED_UMEM | XdpBindFlag.XDP_COPY
                         | XdpBindFlag.XDP_ZEROCOPY | XdpBindFlag.XDP_USE_NEED_WAKEUP
                         | XdpBindFlag.XDP_USE_SG)
_ZC_FEATURE: Final = 1 << 3  # NETDEV_XDP_ACT_XSK_ZEROCOPY
NIC_TX_RING: Final = 1024  # descriptors a zero-copy NIC sends per wakeup
POLLIN: Final = 0x001
POLLOUT: Final = 0x004
VLAN_HLEN: Final = 4

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]
_R = TypeVar("_R", bound=Ring)

READY, BOUND, UNBOUND = 0, 1, 2  # xs->state


def _err(op: str, err: int, detail: str = "") -> XskError:
    return XskError(op, err, detail)


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

    def __init__(self, umem: Umem, host: Host, name: str) -> None:  # noqa: D107
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


# --------------------------------------------------------------------------
# Ring memory shared by the user and the datapath
# --------------------------------------------------------------------------

class _RingMem:
    """One ring's memory with its user view and its kernel view; shared rings count users."""

    def __init__(self, entries: int, kind: RingKind, user: type[Ring],
                 kernel: type[Ring]) -> None:
        self.mm = mmap.mmap(-1, ring_bytes(entries, kind))
        self.user = user(self.mm, entries, kind)
        self.kernel = kernel(self.mm, entries, kind)
        self.users = 1

    def put(self) -> None:
        self.users -= 1
        if self.users == 0:
            self.user.close()
            self.kernel.close()
            self.mm.close()


def _view(mem: _RingMem | None, side: str, cls: type[_R]) -> _R | None:
    return None if mem is None else _side(mem, side, cls)


def _side(mem: _RingMem, side: str, cls: type[_R]) -> _R:
    ring = mem.user if side == "user" else mem.kernel
    assert isinstance(ring, cls)
    return ring


class _KUmem:
    """``struct xdp_umem``: one registration of a UMEM (shared by XDP_SHARED_UMEM sockets)."""

    def __init__(self, umem: Umem) -> None:
        self.umem = umem
        self.zc = False
        self.sg = False
        self.regions: dict[int, UmemPages] = {}  # zero-copy region per host (by id)


# --------------------------------------------------------------------------
# The buffer pool
# --------------------------------------------------------------------------

class XskBuffPool:
    """``struct xsk_buff_pool``: a UMEM on one device queue, its fill and completion rings.

    ``fq``/``cq`` are the datapath's side of the fill and completion rings;
    ``free_list`` holds buffers the datapath took from the fill ring and gave
    back (``xsk_buff_free``), reused first (last freed first).
    """

    def __init__(self, kumem: _KUmem, fq: _RingMem, cq: _RingMem) -> None:
        self.kumem = kumem
        self.umem = kumem.umem
        self._fq_mem, self._cq_mem = fq, cq
        fq.users += 1
        cq.users += 1
        self.fq = _side(fq, "kernel", KernelRingCons)
        self.cq = _side(cq, "kernel", KernelRingProd)
        self.dev: NetDevice | None = None
        self.queue_id = 0
        self.uses_need_wakeup = False
        self.cached_need_wakeup = 0
        self.zc = False
        self.region: UmemPages | None = None
        self.xsks: list[PyxdpXskSocket] = []  # xsk_tx_list: sockets with a tx ring
        self.socks: list[PyxdpXskSocket] = []  # every socket bound through this pool
        self.users = 1
        self._free = np.zeros(max(self.umem.nchunks, 1), np.uint64)
        self._nfree = 0
        # Who holds each chunk (pyxdp.xsk.queue USER/KERNEL/RX_RING): a chunk is taken
        # from the fill ring only while the user holds it, so the free list, the
        # NIC's buffers and the rx ring never hold one chunk twice.
        self.kown = np.zeros(max(self.umem.nchunks, 1), np.uint8)
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
    @property
    def free_list_cnt(self) -> int:
        return self._nfree

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
        k = min(n, self._nfree)
        parts = [self._free[self._nfree - k:self._nfree][::-1].copy()]
        self._nfree -= k
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
        if self._nfree:
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
        if self._nfree >= count:
            return True
        return self.fq.nb_entries(count - self._nfree) >= count - self._nfree

    def free(self, addrs: U64) -> None:
        """``xsk_buff_free``: buffers back on the free list (still the kernel's)."""
        k = len(addrs)
        if k:
            self._free[self._nfree:self._nfree + k] = addrs
            self._nfree += k

    def check(self) -> None:
        """Raise :class:`~pyxdp.net.page_pool.PageAccountingError` unless ``kown``
        says where every chunk is: the kernel's are on the free list or held by the
        NIC (each in one place), the rx ring's are each in one unconsumed rx slot."""
        from pyxdp.net.page_pool import PageAccountingError

        def bad(why: str, chunks: I64) -> PageAccountingError:
            return PageAccountingError(f"AF_XDP pool of {self.umem!r}: {why}",
                                       pages=chunks[:16].tolist(), owner="xsk_buff_pool")

        free = self.chunks_of(self._free[:self._nfree])
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

def _zc_enable(pool: XskBuffPool, dev: NetDevice, queue: int) -> None:
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
    if queue < len(dev.rx):
        rq = dev.rx[queue]
        # The queue is reset: frames the NIC had in page pool pages go back.
        with host.lock:
            rest = rq.ring.consume(len(rq.ring))
            host.drop_frames(rest, rq, direct=False)
            rq.native = None
            rq.xsk = pool


def _zc_disable(pool: XskBuffPool, dev: NetDevice) -> None:
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
    if region is not None:
        region.kernel[pool.kown == KERNEL] = 0  # the pool's buffers are nobody's now
        region.users -= 1
        if region.users == 0:
            region.detach()
            pool.kumem.regions.pop(id(host), None)


def _rx_data_offset(umem: Umem) -> int:
    return umem.headroom + XDP_PACKET_HEADROOM


def xsk_zc_dma(rq: NetdevRxQueue, batch: SkbBatch) -> int:
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


def _umem_chunks(pool: XskBuffPool, pfns: I64) -> I64:
    region = pool.region
    assert region is not None
    return pfns - region.pfn_base


def xsk_free_frames(host: Host, rq: NetdevRxQueue, frames: Frames, *,
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
            from pyxdp.net.page_pool import PageAccountingError
            raise PageAccountingError(f"{region.name}: a UMEM chunk freed that the datapath "
                                      "does not hold", pages=frames.pfn[mine][:16].tolist(),
                                      owner=region.name)
        region.held[chunks] = 0
        pool.free(chunks.astype(np.uint64) * np.uint64(pool.umem.chunk_size))
    if not mine.all():
        rq.pool.put_pages(frames.pfn[~mine & (frames.kind == KIND_BUFF)], allow_direct=direct)


def xsk_zc_to_frames(host: Host, rq: NetdevRxQueue | None, mem: PageMemory, frames: Frames,
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


def _pool_of_region(host: Host, mem: PageMemory) -> XskBuffPool | None:
    for pool in host.xsk_pools.values():
        if isinstance(pool, XskBuffPool) and pool.region is mem:
            return pool
    return None


# --------------------------------------------------------------------------
# Redirect and flush
# --------------------------------------------------------------------------

def xsk_map_redirect(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, xskmap: Any,
                     frames: Frames, idx: I64, bq: BulkQueues) -> I64:
    """``__xsk_map_redirect`` for a batch: each frame to the socket of XSKMAP slot
    ``idx`` (``xskmap`` None: ``bpf_redirect_xsk``, the socket registered on queue
    ``idx`` of ``dev``); 0 or -errno per frame. Every frame is consumed: copied
    and freed, handed over (zero-copy), or freed after a refusal."""
    n = len(frames)
    err = np.zeros(n, np.int64)
    queue = rq.index if rq is not None else 0
    handed = np.zeros(n, np.bool_)
    if (idx == idx[0]).all():  # the usual poll: one socket
        groups = [(int(idx[0]), np.arange(n))]
    else:
        keys, inv = np.unique(idx, return_inverse=True)
        groups = [(int(key), np.flatnonzero(inv == k)) for k, key in enumerate(keys.tolist())]
    for key, sel in groups:
        if xskmap is None:
            xs = host.xsk_rx.get((dev.ifindex, key))
        else:
            xs = xskmap.socket_at(key)
        if not isinstance(xs, PyxdpXskSocket):
            # The slot (or the queue's registration) went away after the helper ran.
            err[sel] = -_errno.EINVAL
            continue
        e, h = xs._rcv(dev, rq, queue, frames.select(sel))
        err[sel] = e
        handed[sel] = h
        if (e == 0).any() and xs not in bq.xsk:
            bq.xsk.append(xs)  # the flush list (list_add: flushed last queued first)
    if not handed.all():
        host.drop_frames(frames.select(~handed), rq, direct=rq is not None)
    return err


def xsk_flush(host: Host, bq: BulkQueues) -> None:
    """``__xsk_map_flush``: publish each socket's rx descriptors and its pool's fill
    ring consumer index (``xsk_flush``), last queued first."""
    socks, bq.xsk = bq.xsk, []
    for xs in reversed(socks):
        if isinstance(xs, PyxdpXskSocket):
            xs._flush()


def xsk_generic_redirect(dev: NetDevice, xs: Any, batch: SkbBatch) -> I64:
    """``xsk_generic_rcv`` for skbs (generic XDP): checked and copied like native
    copy mode, published per packet; 0 or -errno per skb (the caller frees them all)."""
    n = len(batch)
    if not isinstance(xs, PyxdpXskSocket):
        return np.full(n, -_errno.EINVAL, np.int64)
    err = np.zeros(n, np.int64)
    for q in np.unique(batch.queue).tolist():
        sel = np.flatnonzero(batch.queue == q)
        sub = SkbBatch(batch.data[sel], batch.length[sel], batch.ifindex[sel],
                       batch.queue[sel], [batch.meta[i] if i < len(batch.meta) else b""
                                          for i in sel.tolist()])
        err[sel] = xs._rcv_skbs(dev, int(q), sub)
    return err


# --------------------------------------------------------------------------
# Receive in the native poll loop (pyxdp.net.xsk_native)
# --------------------------------------------------------------------------

class NativeRx:
    """What a native poll call needs to receive into a queue's one AF_XDP socket:
    the control array (:class:`pyxdp.net.xsk_native.X`) and views of the rings,
    free list, UMEM and the program's XSKMAPs. Made once per (socket, maps) and
    kept by the queue; :meth:`refresh` loads what changes between calls."""

    def __init__(self, sock: PyxdpXskSocket, pool: XskBuffPool, maps: list[Any]) -> None:
        from pyxdp.net.xsk_native import X
        umem = pool.umem
        rx = sock.krx
        assert rx is not None
        fq = pool.fq
        self.sock, self.pool, self.maps = sock, pool, maps
        self.key = (sock, pool, tuple(m.id for m in maps))
        self.ids = [m.id for m in maps] + [0]  # per xs_cnt slot: the map id traced
        xc = np.zeros(X.SIZE_, np.int64)
        xc[X.ON] = 2 if pool.region is not None else 1
        xc[X.FD] = sock.fd
        xc[X.QUEUE] = sock.queue_id
        xc[X.CHUNK], xc[X.OFF], xc[X.SIZE] = umem.chunk_size, umem.rx_data_offset, umem.size
        xc[X.UNALIGNED] = int(umem.unaligned)
        xc[X.FRAME] = umem.rx_frame_size
        xc[X.SHIFT] = umem.chunk_size.bit_length() - 1  # used when aligned only
        # The arrays the helpers reach by address (kept alive by this object).
        self.kown = pool.kown
        self.slots = rx.slot_chunk
        self.held = pool.region.held if pool.region is not None else np.zeros(1, np.uint8)
        self.zown = pool.region.kernel if pool.region is not None else None
        xc[X.KOWN], xc[X.SLOTS] = self.kown.ctypes.data, self.slots.ctypes.data
        xc[X.RX_CONS] = rx._consumer.ctypes.data
        xc[X.ZOWN] = self.zown.ctypes.data if self.zown is not None else 0
        self.xc = xc  # the rest: refresh()
        self.fq = (fq._producer, fq._consumer, fq.entries, fq._flags)
        self.rx = (rx._producer, rx._consumer, rx.entries.view(np.uint64).reshape(-1, 2))
        self.xfree = pool._free
        self.umem = umem.buf
        self.xm_ids = np.array([m.id for m in maps], np.int64)
        self.xm_n = np.array([m.max_entries for m in maps], np.int64)
        self.xm_off = np.cumsum(np.concatenate([[0], self.xm_n]))[:-1].astype(np.int64)
        self.xm_ent = np.zeros(max(int(self.xm_n.sum()), 1), np.uint32)
        self.xs_cnt = np.zeros(len(maps) + 1, np.int64)

    def copy_args(self) -> tuple[Any, ...]:
        """The AF_XDP arguments of :func:`pyxdp.net.napi_native.native_polls`."""
        return (self.xc, *self.fq[:3], self.xfree, *self.rx, self.umem, self.xm_ids,
                self.xm_off, self.xm_n, self.xm_ent, self.xs_cnt)

    def zc_args(self) -> tuple[Any, ...]:
        """The AF_XDP arguments of :func:`pyxdp.net.napi_native.native_polls_zc`."""
        return (self.xc, *self.fq, self.xfree, *self.rx, self.held, self.xm_ids, self.xm_off,
                self.xm_n, self.xm_ent, self.xs_cnt)

    def refresh(self) -> None:
        """The ring indices, free list, registration and XSKMAP slots as they are now;
        the counters zeroed."""
        from pyxdp.net.xsk_native import X
        xc, sock, pool = self.xc, self.sock, self.pool
        rx = sock.krx
        assert rx is not None
        fq = pool.fq
        # One slice store (X.RX_CP .. X.PFN_BASE), counters zeroed with it.
        xc[X.RX_CP:X.PFN_BASE + 1] = (
            rx.cached_prod, rx.cached_cons, rx.mask, fq.cached_prod, fq.cached_cons, fq.mask,
            pool._nfree, 0, 0, 0, 0, int(pool.uses_need_wakeup),
            int(bool(pool.cached_need_wakeup & XDP_WAKEUP_RX)), 0, 0, 0,
            pool.region.pfn_base if pool.region is not None else 0)
        xc[X.DEV_DROPPED] = 0
        xc[X.REG] = 1 if sock.host.xsk_rx.get((sock.ifindex, sock.queue_id)) is sock else 0
        for m, o, k in zip(self.maps, self.xm_off.tolist(), self.xm_n.tolist(), strict=True):
            self.xm_ent[o:o + k] = m.fds
        self.xs_cnt[:] = 0


def xsk_native_socket(rq: NetdevRxQueue) -> PyxdpXskSocket | None:
    """The socket the native poll loop receives into on ``rq``: the one socket with an
    rx ring bound to it (through its pool) without ``XDP_USE_SG``; else None
    (AF_XDP redirects then take the Python path)."""
    dev = rq.dev
    pool = dev.host.xsk_pools.get((dev.ifindex, rq.index))
    if not isinstance(pool, XskBuffPool) or len(pool.socks) != 1:
        return None
    sock = pool.socks[0]
    if sock.state != BOUND or sock.krx is None or sock.sg or sock.dev is not dev:
        return None
    return sock


def xsk_native_rx(rq: NetdevRxQueue, maps: list[Any], last: NativeRx | None) -> NativeRx | None:
    """The native receive state for ``rq``'s :func:`xsk_native_socket`, or None.
    ``maps``: the program's XSKMAPs; ``last``: what the previous call used,
    refreshed when it still applies."""
    sock = xsk_native_socket(rq)
    if sock is None:
        return None
    pool = sock.xpool
    assert pool is not None
    if last is None or last.key != (sock, pool, tuple(m.id for m in maps)):
        last = NativeRx(sock, pool, maps)
    last.refresh()
    return last


def xsk_native_fold(nat: NativeRx, dev: NetDevice, prog_id: int) -> None:
    """What a native call did, into the socket, pool, device and trace counters."""
    from pyxdp.net.xsk_native import X
    sock, pool = nat.sock, nat.pool
    xc = nat.xc.tolist()  # Python ints at once
    rx = sock.krx
    assert rx is not None
    rx.cached_prod, rx.cached_cons = xc[X.RX_CP], xc[X.RX_CC]
    fq = pool.fq
    fq.cached_prod, fq.cached_cons = xc[X.FQ_CP], xc[X.FQ_CC]
    pool._nfree = xc[X.NFREE]
    fq.invalid_descs += xc[X.FQ_INVALID]
    fq.queue_empty_descs += xc[X.FQ_EMPTY]
    sock.rx_dropped += xc[X.RX_DROPPED]
    sock.rx_queue_full += xc[X.RX_FULL]
    dev.stats.rx_dropped += xc[X.DEV_DROPPED]
    if xc[X.WAKE_SET]:
        pool.cached_need_wakeup |= XDP_WAKEUP_RX
    else:
        pool.cached_need_wakeup &= ~XDP_WAKEUP_RX
    tr = dev.host.tracer
    for slot, n in enumerate(nat.xs_cnt.tolist()):
        if n:
            tr.xdp_redirect._add((dev.ifindex, 0, nat.ids[slot]), n, [])
    for col, err in ((X.E_NOSPC, _errno.ENOSPC), (X.E_NOMEM, _errno.ENOMEM),
                     (X.E_NOBUFS, _errno.ENOBUFS)):
        if xc[col]:
            tr.xdp_redirect_err._add((dev.ifindex, -err), xc[col], [])


# --------------------------------------------------------------------------
# The socket
# --------------------------------------------------------------------------

class PyxdpXskSocket(XskSocket):
    """An AF_XDP socket of pyxdp's datapath, with its UMEM and rings.

    ``dev``/``queue_id``: the device (a :class:`~pyxdp.net.netdevice.NetDevice`)
    and queue to bind to right away (``dev=None``: unbound, then ``host`` is
    required; call :meth:`bind`). ``umem``: the UMEM to register (default: a
    new one of ``fill_size + comp_size`` chunks, owned and closed by the
    socket). ``mode``: ``"copy"`` (``XDP_COPY``), ``"zerocopy"``
    (``XDP_ZEROCOPY``) or None (zero-copy where the device can, else copy).
    ``need_wakeup`` binds with ``XDP_USE_NEED_WAKEUP``, ``sg`` with
    ``XDP_USE_SG``. A ring size of 0 leaves that ring out. ``shared``: a bound
    socket whose UMEM this one shares (``XDP_SHARED_UMEM``): on the same
    device and queue it shares the fill and completion rings too.
    """

    def __init__(self, dev: NetDevice | None = None, queue_id: int = 0,
                 umem: Umem | None = None, *, host: Host | None = None,
                 mode: str | None = "copy", need_wakeup: bool = True, sg: bool = False,
                 fill_size: int = DEFAULT_RING_SIZE, comp_size: int = DEFAULT_RING_SIZE,
                 rx_size: int = DEFAULT_RING_SIZE, tx_size: int = DEFAULT_RING_SIZE,
                 shared: PyxdpXskSocket | None = None) -> None:
        if mode not in ("copy", "zerocopy", None):
            raise ValueError(f"mode {mode!r}: 'copy', 'zerocopy' or None")
        h = dev.host if dev is not None else host if host is not None else \
            shared.host if shared is not None else None
        if h is None:
            raise ValueError("an unbound socket needs host=")
        self.host: Host = h
        self.mode = mode
        self.sg = sg
        self.state = READY
        self.dev: NetDevice | None = None
        self.ifindex = 0
        self.queue_id = 0
        self.zc = False
        self.rx_dropped = 0
        self.rx_queue_full = 0
        self.max_tx_budget = TX_BATCH_SIZE
        self.xpool: XskBuffPool | None = None
        self.shared_with = shared
        self._maps: list[Any] = []  # XSKMAPs holding this socket
        self._mems: list[_RingMem] = []
        self._owned_umem: Umem | None = None
        self.kumem: _KUmem
        self._fq_mem: _RingMem | None
        self._cq_mem: _RingMem | None
        if shared is not None:
            if shared.state != BOUND:
                raise _err("bind", _errno.EBADF, "the socket to share a UMEM with is not bound")
            umem, cpool, self.kumem = shared.umem, shared.pool, shared.kumem
            need_wakeup = shared.need_wakeup
            share_rings = (dev is not None and dev is shared.dev
                           and queue_id == shared.queue_id)
        else:
            if umem is None:
                umem = self._owned_umem = Umem(max(fill_size + comp_size, 1))
            self.kumem = _KUmem(umem)
            cpool = ChunkPool(umem)
            share_rings = False
        for size in (fill_size, comp_size, rx_size, tx_size):
            if size < 0 or (size and size & (size - 1)):
                raise _err("setsockopt(ring size)", _errno.EINVAL,
                           f"ring size {size} is not a power of two")
        rx = self._ring(rx_size, "desc", RingCons, KernelRingProd)
        tx = self._ring(tx_size, "desc", RingProd, KernelRingCons)
        if tx is not None:  # "Tx needs to be explicitly woken up the first time"
            tx.user.set_flags(XDP_RING_NEED_WAKEUP)
        self._rx_mem, self._tx_mem = rx, tx
        if share_rings:
            assert shared is not None
            self._fq_mem, self._cq_mem = shared._fq_mem, shared._cq_mem
            for m in (self._fq_mem, self._cq_mem):
                if m is not None:
                    m.users += 1
                    self._mems.append(m)
            self._own_fq = False
        else:
            self._fq_mem = self._ring(fill_size, "addr", RingProd, KernelRingCons)
            self._cq_mem = self._ring(comp_size, "addr", RingCons, KernelRingProd)
            self._own_fq = True
        self.krx = _view(rx, "kernel", KernelRingProd)
        self.ktx = _view(tx, "kernel", KernelRingCons)
        super().__init__(umem, cpool, _view(self._fq_mem, "user", RingProd),
                         _view(self._cq_mem, "user", RingCons), _view(rx, "user", RingCons),
                         _view(tx, "user", RingProd), need_wakeup=need_wakeup)
        self.fd = self.host.backend.xsk_register(self)
        if dev is not None:
            try:
                self.bind(dev, queue_id)
            except BaseException:
                self.close()
                raise

    def _ring(self, entries: int, kind: RingKind, user: type[Ring],
              kernel: type[Ring]) -> _RingMem | None:
        if not entries:
            return None
        m = _RingMem(entries, kind, user, kernel)
        self._mems.append(m)
        return m

    # -- bind -----------------------------------------------------------------------
    def bind_flags(self) -> XdpBindFlag:
        """The ``sxdp_flags`` :meth:`bind` passes for this socket's settings."""
        return bind_flags(self.shared_with is not None, self.mode, self.need_wakeup, self.sg)

    @property
    def bound(self) -> bool:
        return self.state == BOUND

    def bind(self, dev: NetDevice | str | int, queue_id: int = 0,
             flags: int | None = None) -> None:
        """``bind(sockaddr_xdp)`` to queue ``queue_id`` of ``dev`` (a device of this
        socket's host, or its name or ifindex); raises :class:`XskError` with the
        kernel's errno. ``flags`` overrides :meth:`bind_flags`."""
        fl = int(self.bind_flags() if flags is None else flags)
        op = f"bind(AF_XDP {getattr(dev, 'name', dev)} queue {queue_id})"
        if fl & ~_BIND_FLAGS:
            raise _err(op, _errno.EINVAL, f"unknown flags {fl & ~_BIND_FLAGS:#x}")
        if self.state != READY:
            raise _err(op, _errno.EBUSY, "the socket is already bound")
        d = self._device(dev, op)
        if self.rx is None and self.tx is None:
            raise _err(op, _errno.EINVAL, "the socket has neither an rx nor a tx ring")
        if not 0 <= queue_id <= 0xFFFF_FFFF:
            raise _err(op, _errno.EINVAL, f"queue id {queue_id} is not a u32")
        host = self.host
        with host.lock:
            if fl & XdpBindFlag.XDP_SHARED_UMEM:
                pool = self._bind_shared(d, queue_id, fl, op)
            else:
                if self.shared_with is not None or self._fq_mem is None or self._cq_mem is None:
                    raise _err(op, _errno.EINVAL, "a socket with its own UMEM needs fill and "
                                                  "completion rings")
                pool = XskBuffPool(self.kumem, self._fq_mem, self._cq_mem)
                try:
                    _assign_dev(pool, d, queue_id, fl, op)
                except BaseException:
                    pool.release()
                    raise
            self.xpool = pool
            if self.krx is not None:
                self.krx.track(pool.kown)
            self.dev = d
            self.ifindex = d.ifindex
            self.queue_id = queue_id
            self.zc = self.kumem.zc
            self.sg = self.kumem.sg
            if self.tx is not None:
                pool.xsks.append(self)
            pool.socks.append(self)
            self.state = BOUND
            # bpf_redirect_xsk: the first socket bound to an rx queue is registered on it.
            key = (d.ifindex, queue_id)
            if self.rx is not None and queue_id < len(d.rx) and key not in host.xsk_rx:
                host.xsk_rx[key] = self
                _table_set(host, d.ifindex, queue_id, True)
        for m in self._maps:
            m.socket_changed(self)

    def _device(self, dev: NetDevice | str | int, op: str) -> NetDevice:
        if isinstance(dev, (str, int)):
            d = next((x for x in self.host.devices.values()
                      if x.name == dev or x.ifindex == dev), None)
            if d is None:
                raise _err(op, _errno.ENODEV, f"no device {dev!r} on host {self.host.name}")
            return d
        if self.host.devices.get(dev.ifindex) is not dev:
            raise _err(op, _errno.ENODEV, f"{dev.name} is not a device of host {self.host.name}")
        return dev

    def _bind_shared(self, d: NetDevice, queue_id: int, fl: int, op: str) -> XskBuffPool:
        if fl != int(XdpBindFlag.XDP_SHARED_UMEM):
            raise _err(op, _errno.EINVAL, "XDP_SHARED_UMEM takes no other flag")
        other = self.shared_with
        if other is None:
            raise _err(op, _errno.EINVAL, "XDP_SHARED_UMEM on a socket that registered its "
                                          "own UMEM")
        if other.state != BOUND or other.xpool is None:
            raise _err(op, _errno.EBADF, "the socket to share a UMEM with is not bound")
        if other.dev is not d or other.queue_id != queue_id:
            # Another device or queue: a pool of its own over the same UMEM.
            if not self._own_fq or self._fq_mem is None or self._cq_mem is None:
                raise _err(op, _errno.EINVAL, "one fill and completion ring is needed per "
                                              "queue")
            pool = XskBuffPool(self.kumem, self._fq_mem, self._cq_mem)
            sflags = int(XdpBindFlag.XDP_ZEROCOPY if self.kumem.zc else XdpBindFlag.XDP_COPY)
            if other.xpool.uses_need_wakeup:
                sflags |= int(XdpBindFlag.XDP_USE_NEED_WAKEUP)
            try:
                _assign_dev(pool, d, queue_id, sflags, op)
            except BaseException:
                pool.release()
                raise
            return pool
        if self._own_fq and (self._fq_mem is not None or self._cq_mem is not None):
            raise _err(op, _errno.EINVAL, "sharing a queue's pool, the socket may not have "
                                          "fill or completion rings of its own")
        pool = other.xpool
        pool.users += 1
        return pool

    # -- receive (datapath side) -------------------------------------------------------
    def _check(self, dev: NetDevice, queue: int, lens: I64) -> tuple[I64, BoolArray]:
        """``xsk_rcv_check`` per frame: 0 or -errno, and which passed."""
        n = len(lens)
        err = np.zeros(n, np.int64)
        if self.state != BOUND:
            err[:] = -_errno.ENXIO
        elif self.dev is not dev or self.queue_id != queue:
            err[:] = -_errno.EINVAL
        elif not self.sg:
            big = lens > self.umem.rx_frame_size
            if big.any():
                err[big] = -_errno.ENOSPC
                self.rx_dropped += int(big.sum())
        return err, err == 0

    def _rcv(self, dev: NetDevice, rq: NetdevRxQueue | None, queue: int, frames: Frames
             ) -> tuple[I64, BoolArray]:
        """``xsk_rcv`` for frames of one poll: -errno per frame, and which buffers were
        handed over (zero-copy; the caller frees the rest)."""
        n = len(frames)
        err, ok = self._check(dev, queue, frames.length)
        handed = np.zeros(n, np.bool_)
        pos = np.flatnonzero(ok)
        if not len(pos):
            return err, handed
        pool = self.xpool
        assert pool is not None
        if self.krx is None:
            err[pos] = -_errno.ENOBUFS
            return err, handed
        if rq is not None and rq.xsk is pool and pool.region is not None:
            e, h = self._rcv_zc(pool, frames.select(pos))
            err[pos] = e
            handed[pos] = h
            return err, handed
        err[pos] = self._rcv_copy(pool, frames.select(pos))
        return err, handed

    def _rcv_zc(self, pool: XskBuffPool, frames: Frames) -> tuple[I64, BoolArray]:
        """``xsk_rcv_zc``: descriptors for the buffers as they are; -ENOBUFS when full."""
        rx = self.krx
        assert rx is not None and pool.region is not None
        m = len(frames)
        err = np.zeros(m, np.int64)
        k = rx.nb_free(m)
        chunks = _umem_chunks(pool, frames.pfn[:k])
        addr = chunks.astype(np.uint64) * np.uint64(pool.umem.chunk_size) \
            + frames.data[:k].astype(np.uint64)
        idx = rx.cached_prod
        rx.produce_descs(addr, frames.length[:k].astype(np.uint32), 0)
        rx.own(idx, chunks)
        pool.region.held[chunks] = 0
        pool.region.kernel[chunks] = 0
        if k < m:
            err[k:] = -_errno.ENOBUFS
            self.rx_queue_full += m - k
        handed = np.zeros(m, np.bool_)
        handed[:k] = True
        return err, handed

    def _rcv_copy(self, pool: XskBuffPool, frames: Frames) -> I64:
        """``__xsk_rcv``: buffers from the pool, metadata and data copied in."""
        err, addrs, seg, nd = self._place(pool, frames.length)
        ok = np.flatnonzero(err == 0)
        if len(ok):
            f = frames.select(ok)
            meta = np.maximum(f.meta, 0)
            src_pfn, src_off, mlen = _spread(f.pfn, f.data, meta, seg, nd)
            dst = self.umem.data_addr(addrs).astype(np.int64)
            for mem, pos, rows in self.host.memmap.split(src_pfn):
                src = rows * mem.page_size + src_off[pos] - mlen[pos]
                _scatter(self.umem.buf, dst[pos] - mlen[pos], mem.buf, src,
                         seg[pos] + mlen[pos])
        return err

    def _place(self, pool: XskBuffPool, lens: I64) -> tuple[I64, U64, I64, I64]:
        """Buffers and rx slots for packets of ``lens`` bytes, in order; descriptors
        produced (not yet visible). Returns -errno per packet, and for the placed
        ones their descriptors' addresses and lengths and the count per packet."""
        rx = self.krx
        assert rx is not None
        m = len(lens)
        err = np.zeros(m, np.int64)
        fs = self.umem.rx_frame_size
        if not (lens > fs).any():
            want = rx.nb_free(m)
            bufs = pool.alloc(want)
            if len(bufs) < m:
                bufs = self._place_rest(pool, err, bufs, want)
            addrs = self.umem.rx_addr(bufs)
            seg = lens[err == 0].astype(np.int64)
            idx = rx.cached_prod
            rx.produce_descs(addrs, seg.astype(np.uint32), 0)
            rx.own(idx, pool.chunks_of(bufs))
            return err, addrs, seg, np.ones(len(bufs), np.int64)
        # XDP_USE_SG with frames longer than a buffer: each packet is judged whole
        # (xsk_buff_can_alloc, then room for all its descriptors), so one step per
        # packet - only here, where packets need several buffers.
        all_addrs: list[U64] = []
        all_seg: list[I64] = []
        counts: list[int] = []
        for i, ln in enumerate(lens.tolist()):
            nd = max(1, -(-ln // fs))
            if not (pool.can_alloc_one() if nd == 1 else pool.can_alloc(nd)):
                err[i] = -_errno.ENOMEM
                self.rx_dropped += 1
                if nd == 1:
                    pool.fq.queue_empty_descs += 1
                continue
            if rx.nb_free(nd) < nd:
                err[i] = -_errno.ENOBUFS
                self.rx_queue_full += 1
                continue
            bufs = pool.alloc(nd)
            if len(bufs) < nd:  # invalid fill entries: fewer than the ring counted
                pool.free(bufs)
                err[i] = -_errno.ENOMEM
                self.rx_dropped += 1
                continue
            addrs = self.umem.rx_addr(bufs)
            part = np.minimum(fs, ln - fs * np.arange(nd, dtype=np.int64))
            opts = np.full(nd, _CONTD, np.uint32)
            opts[-1] = 0
            idx = rx.cached_prod
            rx.produce_descs(addrs, part.astype(np.uint32), opts)
            rx.own(idx, pool.chunks_of(bufs))
            all_addrs.append(addrs)
            all_seg.append(part)
            counts.append(nd)
        if not counts:
            return err, np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        return (err, np.concatenate(all_addrs), np.concatenate(all_seg),
                np.array(counts, np.int64))

    def _place_rest(self, pool: XskBuffPool, err: I64, bufs: U64, want: int) -> U64:
        """The frames :meth:`_place`'s one allocation left without a buffer, judged
        one by one as ``__xsk_rcv`` does: a buffer search (-ENOMEM: ``rx_dropped``
        and ``rx_fill_ring_empty_descs``), then an rx slot (-ENOBUFS:
        ``rx_queue_full``, the buffer stays in the fill ring). ``err`` is filled in;
        returns the buffers of the placed frames, in order. A search that failed
        without skipping anything fails the same way for every later frame."""
        m = len(err)
        got = [bufs]
        placed = i = len(bufs)
        failed = placed < want  # the allocation's search for frame i found nothing
        while i < m:
            if not failed:
                if placed < want:
                    b = pool.alloc(1)
                    if len(b):
                        got.append(b)
                        placed += 1
                        i += 1
                        continue
                elif pool.can_alloc_one():
                    # The rx ring is full, and stays full for this batch.
                    err[i:] = -_errno.ENOBUFS
                    self.rx_queue_full += m - i
                    break
            failed = False
            stop = m if pool.dry_skipped == 0 else i + 1
            err[i:stop] = -_errno.ENOMEM
            self.rx_dropped += stop - i
            pool.fq.queue_empty_descs += stop - i
            i = stop
        return np.concatenate(got) if len(got) > 1 else bufs

    def _rcv_skbs(self, dev: NetDevice, queue: int, batch: SkbBatch) -> I64:
        """``xsk_generic_rcv`` for skbs of one queue (copied, then published at once)."""
        err, ok = self._check(dev, queue, batch.length)
        pos = np.flatnonzero(ok)
        if not len(pos):
            return err
        pool = self.xpool
        assert pool is not None
        if self.krx is None:
            err[pos] = -_errno.ENOBUFS
            return err
        e, addrs, seg, nd = self._place(pool, batch.length[pos])
        err[pos] = e
        good = pos[e == 0]
        if len(good):
            width = batch.data.shape[1]
            rows, off, _ = _spread(good.astype(np.int64), np.zeros(len(good), np.int64),
                                   np.zeros(len(good), np.int64), seg, nd)
            dst = self.umem.data_addr(addrs).astype(np.int64)
            flat = np.ascontiguousarray(batch.data).reshape(-1)
            _scatter(self.umem.buf, dst, flat, rows * width + off, seg)
            first = np.cumsum(nd) - nd
            for i, r in enumerate(good.tolist()):  # metadata: rare in generic XDP
                mb = batch.meta[r] if r < len(batch.meta) else b""
                if mb:
                    a = int(dst[first[i]])
                    self.umem.buf[a - len(mb):a] = np.frombuffer(mb, np.uint8)
        self._flush()
        return err

    def _flush(self) -> None:
        """``xsk_flush``: rx descriptors visible, the fill ring's consumer published."""
        if self.krx is not None:
            self.krx.submit()
        if self.xpool is not None:
            self.xpool.fq.release_publish()

    # -- transmit (datapath side) -----------------------------------------------------
    def _tx_check(self, op: str) -> None:
        if self.state != BOUND or self.dev is None:
            raise _err(op, _errno.ENXIO, "the socket is not bound")
        if not self.dev.up:
            raise _err(op, _errno.ENETDOWN, "the interface is down")

    def _kick_tx(self) -> bool:
        op = "sendto(AF_XDP)"
        self._tx_check(op)
        if self.ktx is None:
            raise _err(op, _errno.ENOBUFS, "the socket has no tx ring")
        pool = self.xpool
        assert pool is not None
        if not pool.cached_need_wakeup & XDP_WAKEUP_TX:
            return False
        dev = self.dev
        assert dev is not None  # _tx_check
        if self.zc and self.queue_id >= dev.num_tx_queues:
            # ndo_xsk_wakeup of a queue without a tx side (i40e: -ENXIO)
            raise _err(op, _errno.ENXIO, f"queue {self.queue_id} has no tx side for "
                                         "zero-copy transmit")
        with self.host.lock:
            if self.zc:
                return _zc_xmit(pool)
            e = self._generic_xmit()
        if e in (-_errno.EAGAIN, -_errno.EBUSY):
            return True
        if e:
            raise _err(op, -e, "the ring is stuck on a descriptor the kernel cannot build "
                               "(XDP_TX_METADATA without tx_metadata_len, or bad metadata)")
        return False

    def _generic_xmit(self) -> int:
        """``__xsk_generic_xmit``: 0 or -errno (EAGAIN: budget or completion ring; EBUSY:
        the device dropped a packet; EINVAL: a descriptor the kernel cannot build)."""
        dev = self.dev
        tx, pool = self.ktx, self.xpool
        assert dev is not None and tx is not None and pool is not None
        if self.queue_id >= dev.num_tx_queues:
            return 0
        cq = pool.cq
        if tx.present() == 0:
            tx.get_entries()
        avail = tx.present()
        budget = self.max_tx_budget
        look = min(avail, budget + 1)
        descs = tx.read(tx.cached_cons, look)
        valid = self.umem.validate_desc(descs)
        bad_meta = self._bad_tx_meta(descs, valid)
        # Where the per-descriptor loop stops, checks in the kernel's order: the ring
        # is empty, the budget is spent, the completion ring is full, the descriptor
        # is invalid, its metadata is refused (min() keeps the first of equals).
        stops = [(avail, "empty"), (budget, "budget"), (cq.nb_free(look + 1), "cq")]
        for mask, why in ((~valid, "invalid"), (bad_meta & valid, "meta")):
            hit = np.flatnonzero(mask)
            if len(hit):
                stops.append((int(hit[0]), why))
        stop, why = min(stops, key=lambda s: s[0])
        body = descs[:stop]
        ends = np.flatnonzero((body["options"] & _CONTD) == 0).astype(np.int64) + 1
        starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
        nfrag = ends - starts
        big = nfrag > MAX_SKB_FRAGS + 1  # EOVERFLOW: the packet is dropped, counted invalid
        fine = np.flatnonzero(~big)
        sent, err = self._transmit(dev, self._build_packets(body, starts[fine], ends[fine]))
        if err:  # the device dropped packet fine[sent - 1]: consumed, the rest waits
            last = int(fine[sent - 1])
            take = int(ends[last])
            invalid = int(nfrag[:last + 1][big[:last + 1]].sum())
        else:
            # A chain still open at the stop waits in the ring; with an invalid
            # descriptor it is dropped along with it.
            take = int(ends[-1]) if len(ends) else 0
            invalid = int(nfrag[big].sum())
            if why == "invalid":
                invalid += stop + 1 - take
                take = stop + 1
        tx.invalid_descs += invalid
        if take:
            # Completions, in ring order (6.18 completes invalid descriptors too).
            cq.produce_addrs(descs["addr"][:take])
            cq.submit()
            self._tx_timestamps(descs[:take])
            tx.release(take)
        tx.release_publish()
        if err:
            return err
        if why == "empty":
            tx.queue_empty_descs += 1
        elif why in ("budget", "cq"):
            return -_errno.EAGAIN
        elif why == "meta":
            return -_errno.EINVAL
        return 0

    def _bad_tx_meta(self, descs: np.ndarray, valid: BoolArray) -> BoolArray:
        """``xsk_skb_metadata``'s refusals for descriptors with ``XDP_TX_METADATA``."""
        want = (descs["options"] & _TX_META) != 0
        bad = np.zeros(len(descs), np.bool_)
        if not want.any():
            return bad
        md = self.umem.tx_metadata_len
        if md < XSK_TX_METADATA_SIZE:
            bad[want] = True
            return bad
        buf = self.umem.buf
        for i in np.flatnonzero(want & valid).tolist():
            a = int(self.umem.data_addr(descs["addr"][i])) - md
            flags, start, off = struct.unpack_from("<QHH", buf.data, a)
            if flags & ~_TXMD_VALID:
                bad[i] = True
            elif flags & XdpTxmdFlag.XDP_TXMD_FLAGS_CHECKSUM and \
                    start + off + 2 > int(descs["len"][i]):
                bad[i] = True
        return bad

    def _build_packets(self, body: np.ndarray, start: I64, end: I64) -> SkbBatch:
        """The skbs of packets ``[start, end)`` of descriptors ``body``, copied out of
        the UMEM; software checksums asked for in tx metadata filled in."""
        umem = self.umem
        npk = len(end)
        if not npk:
            return SkbBatch(np.zeros((0, 1), np.uint8), np.zeros(0, np.int64),
                            np.zeros(0, np.int64), np.zeros(0, np.int64), [])
        nd = end - start
        idx = np.repeat(start - np.concatenate([[0], np.cumsum(nd)[:-1]]), nd) \
            + np.arange(int(nd.sum()), dtype=np.int64)
        d = body[idx]
        seg = d["len"].astype(np.int64)
        first = np.cumsum(nd) - nd
        plen = np.add.reduceat(seg, first)
        width = max(int(plen.max()), 1)
        out = np.zeros((npk, width), np.uint8)
        rows, off, _ = _spread(np.arange(npk, dtype=np.int64), np.zeros(npk, np.int64),
                               np.zeros(npk, np.int64), seg, nd)
        _scatter(out.reshape(-1), rows * width + off, umem.buf,
                 umem.data_addr(d["addr"]).astype(np.int64), seg)
        meta = np.flatnonzero((body["options"][start] & _TX_META) != 0)
        if len(meta):
            _tx_checksums(umem, body[start[meta]], out, meta)
        return SkbBatch(out, plen.astype(np.int64), np.full(npk, self.ifindex, np.int64),
                        np.full(npk, self.queue_id, np.int64), [b""] * npk)

    def _transmit(self, dev: NetDevice, pkts: SkbBatch) -> tuple[int, int]:
        """``__dev_direct_xmit`` of each packet in order: (packets consumed, 0 or -EBUSY)."""
        n = len(pkts)
        limit, err = n, 0
        peer = getattr(dev, "peer", None)
        if dev.kind == "veth" and peer is not None and n:
            # veth_xmit -> __dev_forward_skb: the peer must be up and the frame fit its
            # MTU, else NET_XMIT_DROP: sendto answers EBUSY after that packet.
            drop = pkts.length > peer.mtu + 14 + VLAN_HLEN
            if not peer.up:
                drop[:] = True
            fails = np.flatnonzero(drop)
            if len(fails):
                limit, err = int(fails[0]) + 1, -_errno.EBUSY
                dev.stats.tx_dropped += 1
        go = limit - (1 if err else 0)
        if go:
            dev.xmit_skbs(SkbBatch(pkts.data[:go], pkts.length[:go], pkts.ifindex[:go],
                                   pkts.queue[:go], [b""] * go))
        return limit, err

    def _tx_timestamps(self, descs: np.ndarray) -> None:
        """Completion timestamps asked for in tx metadata (``xsk_tx_metadata_complete``)."""
        want = (descs["options"] & _TX_META) != 0
        if not want.any() or self.umem.tx_metadata_len < XSK_TX_METADATA_SIZE:
            return
        want &= self.umem.validate_desc(descs)  # an invalid one completes, unsent
        md = self.umem.tx_metadata_len
        buf = self.umem.buf
        for a in descs["addr"][want].tolist():
            m = int(self.umem.data_addr(a)) - md
            (flags,) = struct.unpack_from("<Q", buf.data, m)
            if flags & XdpTxmdFlag.XDP_TXMD_FLAGS_TIMESTAMP:
                struct.pack_into("<Q", buf.data, m + 8, time.monotonic_ns())

    def set_tx_budget(self, budget: int) -> None:
        """``XDP_MAX_TX_SKB_BUDGET``: descriptors one copy-mode kick may send (EACCES
        outside ``[32, tx ring size]``, as 6.18 answers)."""
        if self.tx is None or not TX_BATCH_SIZE <= budget <= self.tx.size:
            raise _err("setsockopt(XDP_MAX_TX_SKB_BUDGET)", _errno.EACCES,
                       "budget outside [32, tx ring size]")
        self.max_tx_budget = budget

    # -- the user's hooks -------------------------------------------------------------
    def _wakeup_rx(self) -> None:
        # recvfrom(MSG_DONTWAIT): ENXIO unbound; a device down (ENETDOWN) just gives
        # nothing, as LinuxXskSocket treats it.
        if self.state != BOUND or self.dev is None:
            raise _err("recvfrom(AF_XDP)", _errno.ENXIO, "the socket is not bound")
        pool = self.xpool
        assert pool is not None
        if self.dev.up and self.zc and pool.cached_need_wakeup & XDP_WAKEUP_RX:
            with self.host.lock:  # the fill ring's datapath side belongs to the NAPI
                _zc_wakeup_rx(pool)

    def poll(self, timeout_ms: int = 0) -> int:
        """``xsk_poll``: ``POLLIN`` (rx entries), ``POLLOUT`` (tx ring at most half full).

        Copy-mode tx is driven as by ``sendto``. With a timeout and nothing
        ready, the host runs one softirq round first (its NAPI runs here).
        """
        if self.state != BOUND or self.dev is None or not self.dev.up:
            return 0
        pool = self.xpool
        assert pool is not None
        if pool.cached_need_wakeup:
            with self.host.lock:
                if self.zc:
                    if pool.cached_need_wakeup & XDP_WAKEUP_RX:
                        _zc_wakeup_rx(pool)
                    if self.ktx is not None:
                        _zc_xmit(pool)
                elif self.ktx is not None:
                    self._generic_xmit()
        ev = self._events()
        if not ev & POLLIN and timeout_ms:
            self.host.poll()
            ev = self._events()
        return ev

    def _events(self) -> int:
        ev = 0
        if self.krx is not None and self.krx.producer != self.krx.consumer:
            ev |= POLLIN
        if self.ktx is not None and self.ktx.present() <= self.ktx.size // 2:
            ev |= POLLOUT
        return ev

    def statistics(self) -> XdpStatistics:
        """``XDP_STATISTICS`` as ``xsk_getsockopt`` fills the 48-byte form."""
        pool = self.xpool
        return XdpStatistics(
            rx_dropped=self.rx_dropped,
            rx_invalid_descs=0,  # the rx ring is produced by the datapath: never invalid
            tx_invalid_descs=self.ktx.invalid_descs if self.ktx is not None else 0,
            rx_ring_full=self.rx_queue_full,
            rx_fill_ring_empty_descs=pool.fq.queue_empty_descs if pool is not None else 0,
            tx_ring_empty_descs=self.ktx.queue_empty_descs if self.ktx is not None else 0)

    def options(self) -> int:
        """``XDP_OPTIONS``: ``XDP_OPTIONS_ZEROCOPY`` when bound zero-copy."""
        return XDP_OPTIONS_ZEROCOPY if self.zc else 0

    @property
    def zerocopy(self) -> bool:
        return self.zc

    # -- lifetime -----------------------------------------------------------------------
    def _close_backend(self) -> None:
        """``xsk_release``: out of every XSKMAP, unbound, rings and pool released."""
        host = self.host
        with host.lock:
            for m in list(self._maps):
                m.remove_socket(self)
            self._maps = []
            host.backend.xsk_unregister(self.fd)
            if self.state == BOUND:
                self._unbind()
            for mem in self._mems:
                mem.put()
            self._mems = []
        if self._owned_umem is not None:
            self._owned_umem.close()

    def _unbind(self) -> None:
        host = self.host
        self.state = UNBOUND
        dev = self.dev
        if dev is not None:
            key = (dev.ifindex, self.queue_id)
            if host.xsk_rx.get(key) is self:
                del host.xsk_rx[key]
                _table_set(host, dev.ifindex, self.queue_id, False)
            if self.queue_id < len(dev.rx):
                # The native poll state holds views of this socket's rings: let go.
                dev.rx[self.queue_id].native = None
        pool = self.xpool
        if self.krx is not None:
            self.krx.track(None)
        if pool is not None:
            if self in pool.xsks:
                pool.xsks.remove(self)
            if self in pool.socks:
                pool.socks.remove(self)
            pool.release()

    def xsk_map_added(self, m: Any) -> None:
        """An XSKMAP now holds this socket (``xsk_map_sock_add``)."""
        if m not in self._maps:
            self._maps.append(m)

    def xsk_map_removed(self, m: Any) -> None:
        """An XSKMAP no longer holds this socket anywhere."""
        if m in self._maps:
            self._maps.remove(m)

    def __repr__(self) -> str:
        where = (f"{self.dev.name} queue {self.queue_id}" if self.state == BOUND
                 and self.dev is not None else "unbound")
        mode = "zero-copy" if self.zc else "copy"
        return f"PyxdpXskSocket(fd {self.fd}, {where}, {mode}, {self.umem!r})"


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def _spread(pfn: I64, data: I64, meta: I64, seg: I64, nd: I64) -> tuple[I64, I64, I64]:
    """Per descriptor of packets split ``nd`` ways into ``seg``-byte parts: the packet's
    ``pfn`` (or row), where its part starts (``data`` + earlier parts) and how much
    metadata goes before it (the packet's ``meta`` before its first part only)."""
    if len(seg) == len(nd):  # one descriptor per packet
        return pfn, data, meta
    first = np.cumsum(nd) - nd
    csum = np.cumsum(seg) - seg
    off = csum - np.repeat(csum[first], nd)
    j = np.arange(len(seg), dtype=np.int64) - np.repeat(first, nd)
    mlen = np.where(j == 0, np.repeat(meta, nd), 0)
    return np.repeat(pfn, nd), np.repeat(data, nd) + off, mlen


def _scatter(dst: npt.NDArray[np.uint8], dst_off: I64, src: npt.NDArray[np.uint8],
             src_off: I64, length: I64) -> None:
    """``dst[dst_off[i]:+length[i]] = src[src_off[i]:+length[i]]`` for every i, in one
    numpy gather/scatter (one 2-D copy when all lengths are equal)."""
    if not len(length):
        return
    ln = length.astype(np.int64)
    if (ln == ln[0]).all():
        w = int(ln[0])
        if w:
            cols = np.arange(w, dtype=np.int64)
            dst[dst_off[:, None] + cols] = src[src_off[:, None] + cols]
        return
    total = int(ln.sum())
    starts = np.cumsum(ln) - ln
    rel = np.arange(total, dtype=np.int64) - np.repeat(starts, ln)
    dst[np.repeat(dst_off, ln) + rel] = src[np.repeat(src_off, ln) + rel]


def _tx_checksums(umem: Umem, first: np.ndarray, out: npt.NDArray[np.uint8],
                  rows: I64) -> None:
    """``XDP_TXMD_FLAGS_CHECKSUM``: the 16-bit one's complement sum from ``csum_start``
    to the end, stored at ``csum_start + csum_offset`` (what checksum offload does)."""
    md = umem.tx_metadata_len
    buf = umem.buf
    for i, a in enumerate(first["addr"].tolist()):
        m = int(umem.data_addr(a)) - md
        flags, start, off = struct.unpack_from("<QHH", buf.data, m)
        if not flags & XdpTxmdFlag.XDP_TXMD_FLAGS_CHECKSUM:
            continue
        r = int(rows[i])
        body = out[r, start:int(first["len"][i])]
        if len(body) % 2:
            body = np.concatenate([body, np.zeros(1, np.uint8)])
        s = int(body.view(">u2").astype(np.uint64).sum())
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        out[r, start + off:start + off + 2] = np.frombuffer(struct.pack(">H", ~s & 0xFFFF),
                                                            np.uint8)


def _assign_dev(pool: XskBuffPool, d: NetDevice, queue_id: int, flags: int, op: str) -> None:
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


def _table_set(host: Host, ifindex: int, queue: int, on: bool) -> None:
    """Keep the host's native table of registered queues (per ifindex, one bit per
    queue below 64) in step with ``host.xsk_rx``."""
    table = host.xsk_table
    if ifindex >= len(table) or queue >= 64:
        return
    bit = np.uint64(1 << queue)
    table[ifindex] = (table[ifindex] | bit) if on else (table[ifindex] & ~bit)


def _zc_wakeup_rx(pool: XskBuffPool) -> None:
    """``ndo_xsk_wakeup(XDP_WAKEUP_RX)``: the NIC's NAPI refills from the fill ring; the
    flag is cleared when it finds buffers."""
    if pool.can_alloc_one():
        pool.clear_rx_need_wakeup()


def _zc_xmit(pool: XskBuffPool) -> bool:
    """``ndo_xsk_wakeup(XDP_WAKEUP_TX)`` on a zero-copy NIC: up to its ring of
    descriptors per socket, sent from the UMEM and completed; True when more wait."""
    dev = pool.dev
    assert dev is not None
    umem = pool.umem
    cq = pool.cq
    more = False
    if pool.queue_id >= dev.num_tx_queues:
        return False
    for xs in list(pool.xsks):
        tx = xs.ktx
        if tx is None:
            continue
        nb = tx.nb_entries(NIC_TX_RING)
        nb = cq.nb_free(nb) if nb else 0
        if not nb:
            continue
        descs = tx.read_desc_batch(nb, umem.validate_desc)
        tx.release_publish()  # __xskq_cons_release
        more = more or tx.nb_entries(1) > 0
        if not len(descs):
            continue
        cq.produce_addrs(descs["addr"])
        if dev.up:
            data = umem.data_addr(descs["addr"]).astype(np.int64)
            ln = descs["len"].astype(np.int64)
            width = max(int(ln.max()), 1)
            out = np.zeros((len(descs), width), np.uint8)
            _scatter(out.reshape(-1), np.arange(len(descs), dtype=np.int64) * width,
                     umem.buf, data, ln)
            dev.xmit_skbs(SkbBatch(out, ln, np.full(len(descs), dev.ifindex, np.int64),
                                   np.full(len(descs), pool.queue_id, np.int64),
                                   [b""] * len(descs)))
        cq.submit()  # xsk_tx_completed: the NIC sent them
    if pool.uses_need_wakeup:
        for xs in pool.xsks:
            if xs.ktx is not None:
                xs.ktx.set_flags(XDP_RING_NEED_WAKEUP)
    return more
