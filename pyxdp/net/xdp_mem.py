"""XDP memory models and the ``xdp_frame`` return API: ``net/core/xdp.c`` and the
frame parts of ``include/net/xdp.h`` (Linux >= 6.14 layout).

What is modelled:

- **Memory model registration** (``xdp_rxq_info_reg``,
  ``xdp_rxq_info_reg_mem_model``, ``xdp_unreg_mem_model``,
  ``xdp_reg_page_pool``...), with the kernel's errnos, its cyclic mem id
  allocator (ids 1..0xFFFD: ``ida_alloc_range(next, MEM_ID_MAX - 1)``) and
  the ``mem_connect``/``mem_disconnect`` tracepoints as callback lists on an
  :class:`XdpMemRegistry` (``registry.on_connect``/``on_disconnect``).
- **``struct xdp_frame``** written in place at ``data_hard_start`` (the
  start of the frame's page), 40 bytes at the kernel's offsets (see
  :data:`XDP_FRAME_DTYPE`); multi-buffer frags in the ``skb_shared_info``
  at the end of the frame (``nr_frags`` at +2, ``xdp_frags_size`` at +40,
  ``frags[]`` at +48, 16 bytes each), also at the kernel's offsets.
- **Conversions**: ``xdp_convert_buff_to_frame`` for a whole batch
  (page pfns, data offsets, lengths, metadata lengths) writes every header
  with numpy and returns a status per frame (``-EOVERFLOW`` for the
  kernel's ``NULL``); ``xdp_convert_frame_to_buff`` reads them back;
  ``xdp_convert_zc_to_xdp_frame`` copies AF_XDP buffers into order-0 pages.
- **Returning memory**: ``xdp_return_frame``, ``xdp_return_frame_rx_napi``
  (direct recycling, downgraded while ``xdp_return_frame_no_direct()`` is
  set as in cpumap and test_run), ``xdp_return_buff``, and the bulk
  ``XdpFrameBulk`` with ``xdp_return_frame_bulk``/``xdp_flush_frame_bulk``
  (16 pages, page_pool frames only, others returned at once). Each has a
  batch form taking a numpy array of frame pfns (``xdp_return_frames``,
  ``xdp_return_frames_rx_napi``, ``xdp_return_buffs``,
  ``xdp_return_frames_bulk``) that leaves pools in the same state, with the
  same counters, as the equivalent sequence of single calls.
- ``xdpf_clone`` and ``xdp_build_skb_from_frame`` (as a plain
  :class:`XdpSkb` record).

A frame is named by the pfn of its page (:class:`XdpFrame` is a thin view of
one); the page's allocator is found from the address in ``xdp_frame.data``
(``virt_to_page``), as the kernel finds ``page->pp``.

Simplified: ``dev_rx`` holds an ifindex, not a ``net_device`` pointer (and,
as in the kernel, the conversion leaves it alone: cpumap sets it); a frame
header always sits at the start of a page (no page fragments shared by two
frames); ``MEM_TYPE_XSK_BUFF_POOL`` buffers are freed by the AF_XDP layer,
so returning one raises :class:`~pyxdp.errors.NotSupportedError`;
``xdpf_clone`` refuses a frame with frags (the kernel copies the frags flag
without the frags); ``xdp_build_skb_from_frame`` copies the packet into the
record and gives the pages back at once, as the skb's eventual free would.
WARN()s are logged.
"""

from __future__ import annotations

import array
import errno
import logging
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from pyxdp.errors import NotSupportedError
from pyxdp.net.page_pool import (
    MEMMAP,
    PAGE_SIZE,
    PFN_REGION_SHIFT,
    MemMap,
    PageAccountingError,
    PageAllocator,
    PageMemory,
    PagePool,
)
from pyxdp.net.xdp import (
    ETH_HLEN,
    MAX_SKB_FRAGS,
    SKB_SHARED_INFO_SIZE,
    XDP_FLAGS_HAS_FRAGS,
    XDP_FRAME_SIZE,
    XDP_PACKET_HEADROOM,
    RxQueue,
)

__all__ = [
    "MEM_ID_MAX",
    "MEM_ID_MIN",
    "MEM_TYPE_MAX",
    "MEM_TYPE_PAGE_ORDER0",
    "MEM_TYPE_PAGE_POOL",
    "MEM_TYPE_PAGE_SHARED",
    "MEM_TYPE_XSK_BUFF_POOL",
    "SKB_FRAG_DTYPE",
    "XDP_BULK_QUEUE_SIZE",
    "XDP_FRAME_DTYPE",
    "XDP_MEM",
    "XdpBuffBatch",
    "XdpFrame",
    "XdpFrameBulk",
    "XdpMemAllocator",
    "XdpMemInfo",
    "XdpMemRegistry",
    "XdpMemType",
    "XdpRxqInfo",
    "XdpSkb",
    "return_frame_no_direct",
    "xdp_buff_copy_in",
    "xdp_buff_frags",
    "xdp_buff_packet",
    "xdp_buff_set_frags",
    "xdp_buffs_packets",
    "xdp_buffs_pages",
    "xdp_frags_head_len",
    "xdp_frags_shinfo",
    "xdp_frames_have_frags",
    "xdp_return_frag_pages",
    "xdp_build_skb_from_frame",
    "xdp_build_skb_from_frames",
    "xdp_clear_return_frame_no_direct",
    "xdp_convert_buff_to_frame",
    "xdp_convert_frame_to_buff",
    "xdp_convert_zc_to_xdp_frame",
    "xdp_flush_frame_bulk",
    "xdp_frame_bulk_init",
    "xdp_frames_set_dev_rx",
    "xdp_reg_mem_model",
    "xdp_reg_page_pool",
    "xdp_return_buff",
    "xdp_return_buffs",
    "xdp_return_frame",
    "xdp_return_frame_bulk",
    "xdp_return_frame_no_direct",
    "xdp_return_frame_rx_napi",
    "xdp_return_frames",
    "xdp_return_frames_bulk",
    "xdp_return_frames_rx_napi",
    "xdp_rxq_info_attach_mem_model",
    "xdp_rxq_info_attach_page_pool",
    "xdp_rxq_info_detach_mem_model",
    "xdp_rxq_info_is_reg",
    "xdp_rxq_info_reg",
    "xdp_rxq_info_reg_mem_model",
    "xdp_rxq_info_unreg",
    "xdp_rxq_info_unreg_mem_model",
    "xdp_rxq_info_unused",
    "xdp_set_return_frame_no_direct",
    "xdp_unreg_mem_model",
    "xdp_unreg_page_pool",
    "xdpf_clone",
    "xdpf_clones",
]

log = logging.getLogger(__name__)

_I64 = np.int64


class XdpMemType(IntEnum):
    """``enum xdp_mem_type``."""

    MEM_TYPE_PAGE_SHARED = 0
    MEM_TYPE_PAGE_ORDER0 = 1
    MEM_TYPE_PAGE_POOL = 2
    MEM_TYPE_XSK_BUFF_POOL = 3
    MEM_TYPE_MAX = 4


MEM_TYPE_PAGE_SHARED = XdpMemType.MEM_TYPE_PAGE_SHARED
MEM_TYPE_PAGE_ORDER0 = XdpMemType.MEM_TYPE_PAGE_ORDER0
MEM_TYPE_PAGE_POOL = XdpMemType.MEM_TYPE_PAGE_POOL
MEM_TYPE_XSK_BUFF_POOL = XdpMemType.MEM_TYPE_XSK_BUFF_POOL
MEM_TYPE_MAX = XdpMemType.MEM_TYPE_MAX

# Plain-int copies for the hot paths: numpy compares an array with an IntEnum
# member several times slower than with an int.
_SHARED, _ORDER0, _PP, _XSK = 0, 1, 2, 3

MEM_ID_MIN = 1
MEM_ID_MAX = 0xFFFE  # ids are handed out up to MEM_ID_MAX - 1, as the kernel does

REG_STATE_NEW = 0
REG_STATE_REGISTERED = 1
REG_STATE_UNREGISTERED = 2
REG_STATE_UNUSED = 3

XDP_BULK_QUEUE_SIZE = 16

# struct xdp_frame (>= 6.14): offsets of its fields.
XDP_FRAME_OFF_DATA = 0
XDP_FRAME_OFF_LEN = 8
XDP_FRAME_OFF_HEADROOM = 12
XDP_FRAME_OFF_METASIZE = 16
XDP_FRAME_OFF_MEM_TYPE = 20
XDP_FRAME_OFF_DEV_RX = 24
XDP_FRAME_OFF_FRAME_SZ = 32
XDP_FRAME_OFF_FLAGS = 36

# Pointers are read as signed 64-bit: the model's fake addresses stay below
# 2**63, and int64 arithmetic never silently turns into float64 as
# uint64/int64 mixes do.
XDP_FRAME_DTYPE = np.dtype({
    "names": ["data", "len", "headroom", "metasize", "mem_type", "dev_rx", "frame_sz", "flags"],
    "formats": ["<i8", "<u4", "<u4", "<u4", "<u4", "<i8", "<u4", "<u4"],
    "offsets": [XDP_FRAME_OFF_DATA, XDP_FRAME_OFF_LEN, XDP_FRAME_OFF_HEADROOM,
                XDP_FRAME_OFF_METASIZE, XDP_FRAME_OFF_MEM_TYPE, XDP_FRAME_OFF_DEV_RX,
                XDP_FRAME_OFF_FRAME_SZ, XDP_FRAME_OFF_FLAGS],
    "itemsize": XDP_FRAME_SIZE,
})
_HDR = struct.Struct("<qIIIIqII")  # the same 40 bytes, for one frame at a time

# struct skb_shared_info (320 bytes at data_hard_start + frame_sz - 320).
SHINFO_OFF_NR_FRAGS = 2
SHINFO_OFF_XDP_FRAGS_SIZE = 40
SHINFO_OFF_XDP_FRAGS_TRUESIZE = 44
SHINFO_OFF_FRAGS = 48
SKB_FRAG_SIZE = 16
# skb_frag_t: netmem (here the frag page's pfn), len, offset.
SKB_FRAG_DTYPE = np.dtype({"names": ["netmem", "len", "offset"],
                           "formats": ["<i8", "<u4", "<u4"], "offsets": [0, 8, 12],
                           "itemsize": SKB_FRAG_SIZE})
_FRAG = struct.Struct("<qII")

# eth_type_trans
ETH_P_802_3 = 0x0001
ETH_P_802_2 = 0x0004
ETH_P_802_3_MIN = 0x0600
PACKET_HOST, PACKET_BROADCAST, PACKET_MULTICAST, PACKET_OTHERHOST = 0, 1, 2, 3


# -- memory model registration ------------------------------------------------------

@dataclass
class XdpMemInfo:
    """``struct xdp_mem_info``."""

    type: int = 0
    id: int = 0


@dataclass(eq=False)
class XdpRxqInfo(RxQueue):
    """``struct xdp_rxq_info``: an :class:`~pyxdp.net.xdp.RxQueue` with its
    registration state and memory model (usable wherever an ``RxQueue`` is)."""

    ifindex: int = 0  # the rxq's dev; 0 until xdp_rxq_info_reg
    frag_size: int = 0
    reg_state: int = REG_STATE_NEW
    mem: XdpMemInfo = field(default_factory=XdpMemInfo)
    napi_id: int = 0


@dataclass(frozen=True)
class XdpMemAllocator:
    """``struct xdp_mem_allocator``: one entry of the mem id table."""

    id: int
    type: int
    allocator: object


ConnectHook = Callable[[int, int, object, int], None]
DisconnectHook = Callable[[int, int, object], None]


class XdpMemRegistry:
    """The kernel's mem id table (``mem_id_ht``) and id allocator (``mem_id_pool``).

    ``on_connect`` callables get ``(mem_id, mem_type, allocator, ifindex)``
    where the kernel fires ``trace_mem_connect``; ``on_disconnect`` ones get
    ``(mem_id, mem_type, allocator)`` at ``trace_mem_disconnect``.
    """

    def __init__(self) -> None:
        self.on_connect: list[ConnectHook] = []
        self.on_disconnect: list[DisconnectHook] = []
        self._table: dict[int, XdpMemAllocator] = {}
        self._next = MEM_ID_MIN

    def lookup(self, mem_id: int) -> XdpMemAllocator | None:
        return self._table.get(mem_id)

    def __len__(self) -> int:
        return len(self._table)

    def __contains__(self, mem_id: object) -> bool:
        return mem_id in self._table

    def _id_get(self) -> int:
        """``__mem_id_cyclic_get``: the lowest free id from ``next``, wrapping once."""
        for _ in range(2):
            for mem_id in range(self._next, MEM_ID_MAX):
                if mem_id not in self._table:
                    self._next = mem_id + 1
                    return mem_id
            self._next = MEM_ID_MIN
        return -errno.ENOSPC

    def _reg(self, mem: XdpMemInfo, mem_type: int,
             allocator: object | None) -> tuple[int, XdpMemAllocator | None]:
        """``__xdp_reg_mem_model``: (0 or -errno, the new table entry if any)."""
        if not 0 <= mem_type < MEM_TYPE_MAX:
            return -errno.EOPNOTSUPP, None
        mem.type = mem_type  # set before the allocator check, as in the kernel
        if allocator is None:
            if mem_type == MEM_TYPE_PAGE_POOL:
                return -errno.EINVAL, None  # setup-time check: page_pool needs its pool
            return 0, None
        if mem_type == MEM_TYPE_PAGE_POOL and not isinstance(allocator, PagePool):
            raise TypeError(f"MEM_TYPE_PAGE_POOL needs a PagePool, not {type(allocator).__name__}")
        mem_id = self._id_get()
        if mem_id < 0:
            return mem_id, None
        mem.id = mem_id
        xa = XdpMemAllocator(mem_id, mem_type, allocator)
        self._table[mem_id] = xa
        if isinstance(allocator, PagePool) and mem_type == MEM_TYPE_PAGE_POOL:
            allocator.use_xdp_mem(self._allocator_disconnect, mem_id)
        return 0, xa

    def _allocator_disconnect(self, allocator: object) -> None:
        """``mem_allocator_disconnect``: drop every entry of a released allocator."""
        for xa in [x for x in self._table.values() if x.allocator is allocator]:
            for hook in self.on_disconnect:
                hook(xa.id, xa.type, xa.allocator)
            del self._table[xa.id]  # ida_free: the id can be handed out again


XDP_MEM = XdpMemRegistry()  # the default table, used when no registry is given


def _registry(registry: XdpMemRegistry | None) -> XdpMemRegistry:
    return registry if registry is not None else XDP_MEM


def xdp_rxq_info_reg(rxq: XdpRxqInfo, ifindex: int, queue_index: int, napi_id: int = 0,
                     frag_size: int = 0, *, registry: XdpMemRegistry | None = None) -> int:
    """``__xdp_rxq_info_reg``: 0, ``-ENODEV`` (no device) or ``-EINVAL`` (marked unused)."""
    if ifindex <= 0:
        log.warning("xdp_rxq_info_reg: Missing net_device from driver")
        return -errno.ENODEV
    if rxq.reg_state == REG_STATE_UNUSED:
        log.warning("xdp_rxq_info_reg: Driver promised not to register this")
        return -errno.EINVAL
    if rxq.reg_state == REG_STATE_REGISTERED:
        log.warning("xdp_rxq_info_reg: Missing unregister, handled but fix driver")
        xdp_rxq_info_unreg(rxq, registry=registry)
    # xdp_rxq_info_init: the struct is zeroed, memory model included.
    rxq.mem = XdpMemInfo()
    rxq.ifindex = ifindex
    rxq.queue_index = queue_index
    rxq.napi_id = napi_id
    rxq.frag_size = frag_size
    rxq.reg_state = REG_STATE_REGISTERED
    return 0


def xdp_rxq_info_unreg(rxq: XdpRxqInfo, *, registry: XdpMemRegistry | None = None) -> None:
    """``xdp_rxq_info_unreg``: unregister the memory model, then the queue."""
    if rxq.reg_state == REG_STATE_UNUSED:
        return
    xdp_rxq_info_unreg_mem_model(rxq, registry=registry)
    rxq.reg_state = REG_STATE_UNREGISTERED
    rxq.ifindex = 0


def xdp_rxq_info_unused(rxq: XdpRxqInfo) -> None:
    rxq.reg_state = REG_STATE_UNUSED


def xdp_rxq_info_is_reg(rxq: XdpRxqInfo) -> bool:
    return rxq.reg_state == REG_STATE_REGISTERED


def xdp_reg_mem_model(mem: XdpMemInfo, mem_type: int, allocator: object | None, *,
                      registry: XdpMemRegistry | None = None) -> int:
    """``xdp_reg_mem_model``: register without an rxq (no ``mem_connect``)."""
    err, _ = _registry(registry)._reg(mem, mem_type, allocator)
    return err


def xdp_unreg_mem_model(mem: XdpMemInfo, *, registry: XdpMemRegistry | None = None) -> None:
    """``xdp_unreg_mem_model``: reset ``mem``; a page_pool drops its reference.

    As in the kernel, only page_pool models are looked up: an id registered
    with any other allocator stays in the table.
    """
    mem_type, mem_id = mem.type, mem.id
    mem.type = mem.id = 0
    if mem_id == 0:
        return
    if mem_type == MEM_TYPE_PAGE_POOL:
        xa = _registry(registry).lookup(mem_id)
        if xa is None:
            raise PageAccountingError(f"mem id {mem_id} is not registered (unregistered twice, "
                                      f"or its page_pool is already gone)")
        assert isinstance(xa.allocator, PagePool)  # _reg only records pools for this type
        xa.allocator.destroy()


def xdp_rxq_info_reg_mem_model(rxq: XdpRxqInfo, mem_type: int, allocator: object | None, *,
                               registry: XdpMemRegistry | None = None) -> int:
    """``xdp_rxq_info_reg_mem_model``: 0 or ``-EFAULT`` (rxq not registered),
    ``-EOPNOTSUPP`` (unknown type), ``-EINVAL`` (page_pool without a pool),
    ``-ENOSPC`` (ids exhausted). Fires ``mem_connect`` when an allocator is given."""
    if rxq.reg_state != REG_STATE_REGISTERED:
        log.warning("xdp_rxq_info_reg_mem_model: Missing register, driver bug")
        return -errno.EFAULT
    reg = _registry(registry)
    err, xa = reg._reg(rxq.mem, mem_type, allocator)
    if err:
        return err
    if xa is not None:
        for hook in reg.on_connect:
            hook(xa.id, xa.type, xa.allocator, rxq.ifindex)
    return 0


def xdp_rxq_info_unreg_mem_model(rxq: XdpRxqInfo, *,
                                 registry: XdpMemRegistry | None = None) -> None:
    if rxq.reg_state != REG_STATE_REGISTERED:
        log.warning("xdp_rxq_info_unreg_mem_model: Missing register, driver bug")
        return
    xdp_unreg_mem_model(rxq.mem, registry=registry)


def xdp_rxq_info_attach_mem_model(rxq: XdpRxqInfo, mem: XdpMemInfo) -> None:
    rxq.mem = XdpMemInfo(mem.type, mem.id)


def xdp_rxq_info_detach_mem_model(rxq: XdpRxqInfo) -> None:
    rxq.mem = XdpMemInfo()


def xdp_reg_page_pool(pool: PagePool, *, registry: XdpMemRegistry | None = None) -> int:
    """``xdp_reg_page_pool``: give a pool a mem id shared by several rx queues."""
    return xdp_reg_mem_model(XdpMemInfo(), MEM_TYPE_PAGE_POOL, pool, registry=registry)


def xdp_unreg_page_pool(pool: PagePool, *, registry: XdpMemRegistry | None = None) -> None:
    xdp_unreg_mem_model(XdpMemInfo(MEM_TYPE_PAGE_POOL, pool.xdp_mem_id), registry=registry)


def xdp_rxq_info_attach_page_pool(rxq: XdpRxqInfo, pool: PagePool) -> None:
    xdp_rxq_info_attach_mem_model(rxq, XdpMemInfo(MEM_TYPE_PAGE_POOL, pool.xdp_mem_id))


# -- the "no direct recycling" context flag -------------------------------------------

class _RedirectInfo(threading.local):
    """Per-thread (per-CPU in the kernel) ``BPF_RI_F_RF_NO_DIRECT``."""

    no_direct: bool = False


_ri = _RedirectInfo()


def xdp_set_return_frame_no_direct() -> None:
    """Set by cpumap's kthread and by test_run: no direct recycling into pools."""
    _ri.no_direct = True


def xdp_clear_return_frame_no_direct() -> None:
    _ri.no_direct = False


def xdp_return_frame_no_direct() -> bool:
    return _ri.no_direct


@contextmanager
def return_frame_no_direct() -> Iterator[None]:
    """``with return_frame_no_direct():`` set the flag for a block, then restore it."""
    prev = _ri.no_direct
    _ri.no_direct = True
    try:
        yield
    finally:
        _ri.no_direct = prev


# -- frames ------------------------------------------------------------------------------

class XdpFrame:
    """A view of one ``struct xdp_frame`` stored at the start of page ``pfn``.

    Holds no packet state of its own: every field is read from page memory.
    """

    __slots__ = ("mem", "offset", "pfn")

    def __init__(self, pfn: int, memmap: MemMap | None = None) -> None:
        mem = (memmap if memmap is not None else MEMMAP).find(pfn)
        self.mem = mem
        self.pfn = pfn
        self.offset = (pfn - mem.pfn_base) * mem.page_size  # byte offset in mem.buf

    @classmethod
    def at(cls, mem: PageMemory, pfn: int) -> XdpFrame:
        """The frame in page ``pfn`` of ``mem`` (no region lookup)."""
        self = cls.__new__(cls)
        self.mem = mem
        self.pfn = pfn
        self.offset = mem._local1(pfn) * mem.page_size
        return self

    def __repr__(self) -> str:
        d, ln, hr, ms, mt, dev, fs, fl = self.header()
        return (f"<XdpFrame pfn={self.pfn:#x} data=+{d - self.mem.page_address(self.pfn)} "
                f"len={ln} headroom={hr} metasize={ms} mem_type={mt} dev_rx={dev} "
                f"frame_sz={fs} flags={fl:#x}>")

    def header(self) -> tuple[int, int, int, int, int, int, int, int]:
        """(data, len, headroom, metasize, mem_type, dev_rx, frame_sz, flags)."""
        return _HDR.unpack_from(self.mem.raw, self.offset)

    def _u32(self, off: int) -> int:
        return int.from_bytes(self.mem.raw[self.offset + off:self.offset + off + 4], "little")

    @property
    def data(self) -> int:
        """The fake kernel address of the packet data."""
        return int(_HDR.unpack_from(self.mem.raw, self.offset)[0])

    @property
    def len(self) -> int:
        return self._u32(XDP_FRAME_OFF_LEN)

    @property
    def headroom(self) -> int:
        """Headroom left in front of ``data`` after the 40-byte frame itself."""
        return self._u32(XDP_FRAME_OFF_HEADROOM)

    @property
    def metasize(self) -> int:
        return self._u32(XDP_FRAME_OFF_METASIZE) & 0xFF  # only the low 8 bits are used

    @property
    def mem_type(self) -> int:
        return self._u32(XDP_FRAME_OFF_MEM_TYPE)

    @property
    def dev_rx(self) -> int:
        return int(_HDR.unpack_from(self.mem.raw, self.offset)[5])

    @property
    def frame_sz(self) -> int:
        return self._u32(XDP_FRAME_OFF_FRAME_SZ)

    @property
    def flags(self) -> int:
        return self._u32(XDP_FRAME_OFF_FLAGS)

    @property
    def has_frags(self) -> bool:
        return bool(self.flags & XDP_FLAGS_HAS_FRAGS)

    @property
    def data_offset(self) -> int:
        """``data`` as an offset from the start of the page."""
        return self.data - self.mem.page_address(self.pfn)

    def _shinfo_offset(self) -> int:
        d, _, hr, _, _, _, fs, _ = self.header()
        return d - hr - XDP_FRAME_SIZE - self.mem.addr_base + fs - SKB_SHARED_INFO_SIZE

    def frags(self) -> list[tuple[int, int, int]]:
        """``(pfn, len, offset)`` of each frag (empty without ``XDP_FLAGS_HAS_FRAGS``)."""
        if not self.has_frags:
            return []
        return _read_frags1(self.mem, self._shinfo_offset())

    def frame_len(self) -> int:
        """``xdp_get_frame_len``: linear length plus frags."""
        if not self.has_frags:
            return self.len
        return self.len + int.from_bytes(
            self.mem.raw[self._shinfo_offset() + SHINFO_OFF_XDP_FRAGS_SIZE:][:4], "little")

    def packet(self) -> bytes:
        """The packet bytes: linear part, then each frag."""
        off = self.data - self.mem.addr_base
        out = [self.mem.buf[off:off + self.len].tobytes()]
        mm = self.mem.memmap
        for pfn, ln, foff in self.frags():
            fm = mm.find(pfn)
            out.append(fm.read(pfn, foff, ln))
        return b"".join(out)

    def metadata(self) -> bytes:
        off = self.data - self.mem.addr_base
        ms = self.metasize
        return self.mem.buf[off - ms:off].tobytes()


def _read_frags1(mem: PageMemory, shinfo: int) -> list[tuple[int, int, int]]:
    nr = mem.raw[shinfo + SHINFO_OFF_NR_FRAGS]
    base = shinfo + SHINFO_OFF_FRAGS
    return [_FRAG.unpack_from(mem.raw, base + SKB_FRAG_SIZE * i)
            for i in range(nr)]


@dataclass(frozen=True)
class XdpBuffBatch:
    """A batch of ``xdp_buff`` pointers as offsets from the start of each page.

    What ``xdp_convert_frame_to_buff`` gives back: ``data_hard_start``,
    ``data``, ``data_end``, ``data_meta`` (all page offsets), ``frame_sz``,
    ``flags``. ``rxq``/``txq`` are the caller's, as in the kernel.
    """

    pfns: NDArray[np.int64]
    data_hard_start: NDArray[np.int64]
    data: NDArray[np.int64]
    data_end: NDArray[np.int64]
    data_meta: NDArray[np.int64]
    frame_sz: NDArray[np.int64]
    flags: NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.pfns.size)


Arg = int | NDArray[np.int64]


def _arg(x: npt.ArrayLike, n: int, name: str) -> Arg:
    """A per-frame argument: a scalar stays an int (numpy broadcasts it), else an array."""
    if isinstance(x, int):
        return x
    a = np.asarray(x, dtype=_I64).reshape(-1)
    if a.size == 1 and n != 1:
        return int(a[0])
    if a.size != n:
        raise ValueError(f"{name} has {a.size} entries for {n} frames")
    return a


def _lo(x: Arg) -> int:
    return x if isinstance(x, int) else int(x.min())


def _pick(x: Arg, sel: NDArray[np.intp] | NDArray[np.bool_]) -> Arg:
    return x if isinstance(x, int) else x[sel]


def _vec(x: npt.ArrayLike, n: int, name: str) -> NDArray[np.int64]:
    a = np.asarray(x, dtype=_I64).reshape(-1)
    if a.size == 1 and n != 1:
        return np.full(n, a[0], dtype=_I64)
    if a.size != n:
        raise ValueError(f"{name} has {a.size} entries for {n} frames")
    return a


def _read_headers(mem: PageMemory, rows: NDArray[np.int64]) -> NDArray[np.void]:
    raw = mem.pages[rows, :XDP_FRAME_SIZE]  # fancy indexing: a (n, 40) copy
    return raw.view(XDP_FRAME_DTYPE)[:, 0]


def _require_kind(mem: PageMemory, mem_type: int) -> None:
    """A frame's memory type must match the allocator its page belongs to."""
    if mem_type == MEM_TYPE_PAGE_POOL:
        if not isinstance(mem, PagePool):
            raise PageAccountingError(f"MEM_TYPE_PAGE_POOL frame in a page of {mem.name}, "
                                      f"which is not a page_pool", owner=mem.name)
    elif mem_type in (MEM_TYPE_PAGE_ORDER0, MEM_TYPE_PAGE_SHARED):
        if not isinstance(mem, PageAllocator):
            raise PageAccountingError(f"{XdpMemType(mem_type).name} frame in a page of "
                                      f"{mem.name}, which is not a page allocator",
                                      owner=mem.name)


def xdp_convert_buff_to_frame(pfns: npt.ArrayLike, data: npt.ArrayLike, length: npt.ArrayLike,
                              metasize: npt.ArrayLike = 0, *, mem_type: int,
                              frame_sz: npt.ArrayLike | None = None, flags: npt.ArrayLike = 0,
                              memmap: MemMap | None = None) -> NDArray[np.int32]:
    """``xdp_convert_buff_to_frame`` for a batch: write each ``xdp_frame`` in place.

    Buffer ``i`` has its ``data_hard_start`` at the start of page
    ``pfns[i]``, packet data at offset ``data[i]`` (= its headroom),
    ``length[i]`` bytes long, ``metasize[i]`` bytes of metadata in front
    (negative means unsupported, as ``data_meta > data``); ``frame_sz``
    defaults to the page size; ``mem_type`` is the rx queue's
    ``rxq->mem.type``. Returns 0 or ``-EOVERFLOW`` per buffer: the kernel's
    ``NULL`` when ``headroom - metasize < 40`` or when ``data_end`` runs into
    the reserved tailroom (the "missing reserved tailroom" driver bug,
    logged). ``dev_rx`` is left untouched, as the kernel leaves it.
    """
    if mem_type == MEM_TYPE_XSK_BUFF_POOL:
        raise ValueError("AF_XDP buffers are copied out with xdp_convert_zc_to_xdp_frame")
    if mem_type not in (MEM_TYPE_PAGE_SHARED, MEM_TYPE_PAGE_ORDER0, MEM_TYPE_PAGE_POOL):
        raise ValueError(f"unknown memory type {mem_type}")
    mm = memmap if memmap is not None else MEMMAP
    p = np.asarray(pfns, dtype=_I64).reshape(-1)
    n = p.size
    d, ln, fl = _arg(data, n, "data"), _arg(length, n, "length"), _arg(flags, n, "flags")
    m = _arg(metasize, n, "metasize")
    meta: Arg = max(m, 0) if isinstance(m, int) else np.maximum(m, 0)  # data_meta > data: 0
    fsz = None if frame_sz is None else _arg(frame_sz, n, "frame_sz")
    if n and (_lo(d) < 0 or _lo(ln) < 0):
        raise ValueError("data offsets and lengths must be >= 0")
    status = np.zeros(n, dtype=np.int32)
    tailroom_bugs = 0
    groups = mm.split(p)
    for mem, pos, rows in groups:
        _require_kind(mem, mem_type)
        if mem.strict and not mem.in_use_mask(rows).all():
            mem.require_in_use(p[pos], "xdp_convert_buff_to_frame")  # names the pages
        one = len(groups) == 1  # then every argument already lines up with rows
        dd, ll, ms, ff = (x if one else _pick(x, pos) for x in (d, ln, meta, fl))
        fs: Arg = mem.page_size if fsz is None else fsz if one else _pick(fsz, pos)
        if (fs if isinstance(fs, int) else int(fs.max())) > mem.page_size:
            raise ValueError(f"frame_sz larger than the {mem.page_size}-byte pages of {mem.name}")
        # Arguments may be scalars: keep these numpy booleans (``~`` on a Python
        # bool is integer negation).
        short = np.less(dd - ms, XDP_FRAME_SIZE)  # no room for the frame before the metadata
        tail = np.logical_and(~short, np.greater(dd + ll, fs - SKB_SHARED_INFO_SIZE))
        bad = short | tail
        if bad.ndim == 0:  # scalar arguments: every buffer of the group alike
            if bad:
                tailroom_bugs += rows.size if tail else 0
                status[pos] = -errno.EOVERFLOW
                continue
        elif bad.any():
            tailroom_bugs += int(np.count_nonzero(np.broadcast_to(tail, rows.shape)))
            status[pos[bad]] = -errno.EOVERFLOW
            ok = ~bad
            rows = rows[ok]
            dd, ll, ms, ff = (_pick(x, ok) for x in (dd, ll, ms, ff))
            fs = _pick(fs, ok)
            if not rows.size:
                continue
        # One gather-store per field, straight into the page words.
        w = mem.words
        mem.qwords[rows, XDP_FRAME_OFF_DATA // 8] = mem.addr_base + rows * mem.page_size + dd
        w[rows, XDP_FRAME_OFF_LEN // 4] = ll
        w[rows, XDP_FRAME_OFF_HEADROOM // 4] = dd - XDP_FRAME_SIZE
        w[rows, XDP_FRAME_OFF_METASIZE // 4] = ms
        w[rows, XDP_FRAME_OFF_MEM_TYPE // 4] = int(mem_type)
        w[rows, XDP_FRAME_OFF_FRAME_SZ // 4] = fs
        w[rows, XDP_FRAME_OFF_FLAGS // 4] = ff
    if tailroom_bugs:
        log.warning("XDP_WARN: xdp_update_frame_from_buff: Driver BUG: missing reserved "
                    "tailroom (%d buffer(s))", tailroom_bugs)
    return status


def xdp_convert_frame_to_buff(pfns: npt.ArrayLike, *,
                              memmap: MemMap | None = None) -> XdpBuffBatch:
    """``xdp_convert_frame_to_buff`` for a batch: the buffers' pointers, read back."""
    mm = memmap if memmap is not None else MEMMAP
    p = np.asarray(pfns, dtype=_I64).reshape(-1)
    n = p.size
    cols = {k: np.zeros(n, dtype=_I64) for k in
            ("data_hard_start", "data", "data_end", "data_meta", "frame_sz", "flags")}
    for mem, pos, rows in mm.split(p):
        h = _read_headers(mem, rows)
        data = h["data"] - (mem.addr_base + rows * mem.page_size)
        cols["data"][pos] = data
        cols["data_hard_start"][pos] = data - h["headroom"].astype(_I64) - XDP_FRAME_SIZE
        cols["data_end"][pos] = data + h["len"].astype(_I64)
        cols["data_meta"][pos] = data - h["metasize"].astype(_I64)
        cols["frame_sz"][pos] = h["frame_sz"]
        cols["flags"][pos] = h["flags"]
    return XdpBuffBatch(pfns=p, **cols)


def xdp_frames_set_dev_rx(pfns: npt.ArrayLike, ifindex: npt.ArrayLike, *,
                          memmap: MemMap | None = None) -> None:
    """Write ``xdpf->dev_rx`` (cpumap's enqueue records the receiving device)."""
    mm = memmap if memmap is not None else MEMMAP
    p = np.asarray(pfns, dtype=_I64).reshape(-1)
    dev = _vec(ifindex, p.size, "ifindex")
    for mem, pos, rows in mm.split(p):
        raw = mem.pages[rows, :XDP_FRAME_SIZE]
        raw.view(XDP_FRAME_DTYPE)[:, 0]["dev_rx"] = dev[pos]
        mem.pages[rows, :XDP_FRAME_SIZE] = raw


def xdp_convert_zc_to_xdp_frame(umem: NDArray[np.uint8], data: npt.ArrayLike,
                                length: npt.ArrayLike, metasize: npt.ArrayLike = 0, *,
                                allocator: PageAllocator | None = None,
                                memmap: MemMap | None = None
                                ) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
    """``xdp_convert_zc_to_xdp_frame`` for a batch of AF_XDP buffers.

    ``data`` are byte offsets of the packets in the flat ``umem``. Each is
    copied (metadata included) into a fresh order-0 page behind a zeroed
    frame: ``headroom`` 0, ``frame_sz`` ``PAGE_SIZE``, ``MEM_TYPE_PAGE_ORDER0``.
    Returns (pfns, status): status is ``-EOVERFLOW`` when ``40 + len +
    metasize > PAGE_SIZE`` and ``-ENOMEM`` when no page is left (pfn 0).
    Freeing the AF_XDP buffers (``xsk_buff_free``) is the caller's part.
    """
    mm = memmap if memmap is not None else MEMMAP
    alloc = allocator if allocator is not None else mm.system
    if alloc.page_size != PAGE_SIZE:
        raise ValueError("xdp frames from AF_XDP buffers need order-0 pages")
    src = np.asarray(umem, dtype=np.uint8).reshape(-1)
    d = np.asarray(data, dtype=_I64).reshape(-1)
    n = d.size
    ln = _vec(length, n, "length")
    meta = np.maximum(_vec(metasize, n, "metasize"), 0)
    tot = ln + meta
    status = np.zeros(n, dtype=np.int32)
    out = np.zeros(n, dtype=_I64)
    if n and (int((d - meta).min()) < 0 or int((d + ln).max()) > src.size):
        raise ValueError("AF_XDP buffers outside the umem")
    big = XDP_FRAME_SIZE + tot > PAGE_SIZE
    status[big] = -errno.EOVERFLOW
    want = np.flatnonzero(~big)
    pages = alloc.alloc_pages_bulk(want.size)
    status[want[pages.size:]] = -errno.ENOMEM
    want = want[:pages.size]
    if not want.size:
        return out, status
    out[want] = pages
    rows = alloc.local(pages)
    m = int(tot[want].max())
    # Copy the longest packet's length for every row: bytes past a packet's
    # end are unspecified in a fresh page anyway, and one gather beats a loop.
    idx = np.minimum((d[want] - meta[want])[:, None] + np.arange(m), src.size - 1)
    alloc.pages[rows, XDP_FRAME_SIZE:XDP_FRAME_SIZE + m] = src[idx]
    hdr = np.zeros(want.size, dtype=XDP_FRAME_DTYPE)
    hdr["data"] = alloc.addr_base + rows * PAGE_SIZE + XDP_FRAME_SIZE + meta[want]
    hdr["len"] = ln[want]
    hdr["metasize"] = meta[want]
    hdr["frame_sz"] = PAGE_SIZE
    hdr["mem_type"] = _ORDER0
    alloc.pages[rows, :XDP_FRAME_SIZE] = hdr.view(np.uint8).reshape(-1, XDP_FRAME_SIZE)
    return out, status


# -- frags ---------------------------------------------------------------------------------

# A page's packet room past XDP_PACKET_HEADROOM and before the skb_shared_info.
_HEAD_ROOM = PAGE_SIZE - XDP_PACKET_HEADROOM - SKB_SHARED_INFO_SIZE


def xdp_buff_copy_in(mem: PageAllocator | PagePool, alloc: Callable[[int], NDArray[np.int64]],
                     pkt: NDArray[np.uint8], length: int, off: int, *,
                     memmap: MemMap | None = None) -> int | None:
    """A packet of ``length`` bytes copied into pages of ``mem`` (``alloc(n)``: up to
    ``n`` of them) as ``skb_pp_cow_data`` lays it out: the first bytes of a page's
    packet room at ``off`` of the head, the rest in page frags listed in the head's
    ``skb_shared_info`` (``XDP_FLAGS_HAS_FRAGS``). The head's pfn, or None - more
    than ``MAX_SKB_FRAGS`` frags, or fewer pages than it needs (given back). One
    packet at a time: the reference a NIC's DMA in machine code
    (:func:`pyxdp.net.skbuff_native.bufs_dma`) is tested against."""
    nf = -(-(length - _HEAD_ROOM) // PAGE_SIZE) if length > _HEAD_ROOM else 0
    if nf > MAX_SKB_FRAGS:
        return None
    pfns = alloc(1 + nf)
    if len(pfns) < 1 + nf:
        mem.put_pages(pfns)
        return None
    head = min(length, _HEAD_ROOM)
    mem.write(int(pfns[0]), off, pkt[:head].tobytes())
    if nf:
        flen = [min(PAGE_SIZE, length - head - PAGE_SIZE * j) for j in range(nf)]
        pos = head
        for fp, fl in zip(pfns[1:].tolist(), flen, strict=True):
            mem.write(fp, 0, pkt[pos:pos + fl].tobytes())
            pos += fl
        xdp_buff_set_frags(int(pfns[0]), pfns[1:].tolist(), flen, memmap=memmap)
    return int(pfns[0])


def xdp_buff_set_frags(pfn: int, frag_pfns: Sequence[int], lens: Sequence[int],
                       offsets: Sequence[int] | None = None, *, frame_sz: int | None = None,
                       truesize: int | None = None, memmap: MemMap | None = None) -> int:
    """Describe a multi-buffer packet: fill the ``skb_shared_info`` of buffer ``pfn``.

    Writes ``nr_frags``, ``xdp_frags_size``, ``xdp_frags_truesize`` (default
    ``nr_frags * frame_sz``) and ``frags[]`` at the end of the frame, as a
    driver building frags with ``xdp_buff_add_frag`` does. Returns
    ``XDP_FLAGS_HAS_FRAGS``, for the caller to OR into the buffer's flags.
    """
    mm = memmap if memmap is not None else MEMMAP
    mem = mm.find(pfn)
    fs = frame_sz if frame_sz is not None else mem.page_size
    nr = len(frag_pfns)
    offs = list(offsets) if offsets is not None else [0] * nr
    if not 0 < nr <= MAX_SKB_FRAGS or len(lens) != nr or len(offs) != nr:
        raise ValueError(f"1..{MAX_SKB_FRAGS} frags with one length and offset each")
    if fs > mem.page_size:
        raise ValueError(f"frame_sz {fs} larger than the page")
    for fp, ln, off in zip(frag_pfns, lens, offs, strict=True):
        fmem = mm.find(fp)
        if off < 0 or ln < 0 or off + ln > fmem.page_size:
            raise ValueError(f"frag {fp:#x}: {ln} bytes at {off} overflow its page")
        fmem.require_in_use([fp], "xdp_buff_set_frags")
    sh = (pfn - mem.pfn_base) * mem.page_size + fs - SKB_SHARED_INFO_SIZE
    buf = mem.raw
    buf[sh + SHINFO_OFF_NR_FRAGS] = nr
    struct.pack_into("<II", buf, sh + SHINFO_OFF_XDP_FRAGS_SIZE, sum(lens),
                     truesize if truesize is not None else nr * fs)
    for i, (fp, ln, off) in enumerate(zip(frag_pfns, lens, offs, strict=True)):
        _FRAG.pack_into(buf, sh + SHINFO_OFF_FRAGS + SKB_FRAG_SIZE * i, fp, ln, off)
    return XDP_FLAGS_HAS_FRAGS


def xdp_buff_frags(pfn: int, is_frame: bool, *, memmap: MemMap | None = None
                   ) -> tuple[PageMemory, int, list[tuple[int, int, int]]]:
    """A multi-buffer packet's ``skb_shared_info``: its page memory, byte offset in
    ``mem.raw`` and ``(pfn, len, offset)`` per frag. ``is_frame``: an
    ``xdp_frame`` (``frame_sz`` from its header), else a pool page's ``xdp_buff``
    (``frame_sz`` = the page)."""
    mm = memmap if memmap is not None else MEMMAP
    mem = mm.find(pfn)
    if is_frame:
        sh = XdpFrame.at(mem, pfn)._shinfo_offset()
    else:
        sh = mem._local1(pfn) * mem.page_size + mem.page_size - SKB_SHARED_INFO_SIZE
    return mem, sh, _read_frags1(mem, sh)


def xdp_buff_packet(pfn: int, is_frame: bool, data: int, length: int, *,
                    memmap: MemMap | None = None) -> bytes:
    """A multi-buffer packet ``length`` bytes long in all, its head at page offset
    ``data``: the head's bytes, then each frag's (what ``skb_copy_bits`` reads)."""
    mm = memmap if memmap is not None else MEMMAP
    mem, _, frags = xdp_buff_frags(pfn, is_frame, memmap=mm)
    head = length - sum(f[1] for f in frags)
    out = [mem.read(pfn, data, head)]
    out.extend(mm.find(fp).read(fp, off, ln) for fp, ln, off in frags)
    return b"".join(out)


def xdp_frags_shinfo(pfns: npt.ArrayLike, is_frame: npt.ArrayLike, *,
                     memmap: MemMap | None = None
                     ) -> list[tuple[PageMemory, NDArray[np.intp], NDArray[np.int64]]]:
    """:func:`_shinfos` for callers outside this module (a list)."""
    mm = memmap if memmap is not None else MEMMAP
    return list(_shinfos(mm, np.asarray(pfns, _I64).reshape(-1),
                         np.asarray(is_frame, np.bool_).reshape(-1)))


def _shinfos(mm: MemMap, p: NDArray[np.int64], is_frame: NDArray[np.bool_]
             ) -> Iterator[tuple[PageMemory, NDArray[np.intp], NDArray[np.int64]]]:
    """For multi-buffer packets with heads at pfns ``p``: per region, (its memory, the
    packets' positions, their ``skb_shared_info`` byte offsets in ``mem.buf``) - at the
    end of the frame for an ``xdp_frame`` (``frame_sz`` from its header), of the page
    for a pool page's ``xdp_buff`` (as :func:`xdp_buff_frags`)."""
    for mem, pos, rows in mm.split(p):
        sh = rows * mem.page_size + (mem.page_size - SKB_SHARED_INFO_SIZE)
        fr = is_frame[pos]
        if fr.any():
            r = rows[fr]
            w = mem.words
            sh[fr] = (mem.qwords[r, XDP_FRAME_OFF_DATA // 8] - mem.addr_base
                      - w[r, XDP_FRAME_OFF_HEADROOM // 4].astype(_I64) - XDP_FRAME_SIZE
                      + w[r, XDP_FRAME_OFF_FRAME_SZ // 4].astype(_I64) - SKB_SHARED_INFO_SIZE)
        yield mem, pos, sh


def _u32_at(mem: PageMemory, off: NDArray[np.int64]) -> NDArray[np.int64]:
    """Little-endian u32s at byte offsets ``off`` of ``mem.buf``."""
    b = mem.buf[off[:, None] + np.arange(4)].astype(_I64)
    out: NDArray[np.int64] = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16) | (b[:, 3] << 24)
    return out


def xdp_frags_head_len(pfns: NDArray[np.int64], length: NDArray[np.int64],
                       is_frame: NDArray[np.bool_], *, memmap: MemMap | None = None
                       ) -> NDArray[np.int64]:
    """The linear part of multi-buffer packets ``length`` bytes long in all
    (``xdp_get_buff_len`` minus ``xdp_frags_size``)."""
    mm = memmap if memmap is not None else MEMMAP
    p = np.asarray(pfns, _I64).reshape(-1)
    out = np.asarray(length, _I64).copy()
    for mem, pos, sh in _shinfos(mm, p, np.asarray(is_frame, np.bool_).reshape(-1)):
        out[pos] -= _u32_at(mem, sh + SHINFO_OFF_XDP_FRAGS_SIZE)
    return out


def xdp_buffs_packets(pfns: npt.ArrayLike, is_frame: npt.ArrayLike, data: npt.ArrayLike,
                      length: npt.ArrayLike, out: NDArray[np.uint8], *,
                      memmap: MemMap | None = None) -> None:
    """Batch :func:`xdp_buff_packet`: multi-buffer packet ``i`` (``length[i]`` bytes in
    all, its head at page offset ``data[i]``) into ``out[i, :length[i]]``, the head's
    bytes then each frag's (``skb_copy_bits``); ``out`` is at least as wide as the
    longest. At most ``MAX_SKB_FRAGS`` vector rounds, none per packet."""
    mm = memmap if memmap is not None else MEMMAP
    p = np.asarray(pfns, _I64).reshape(-1)
    d = _vec(data, p.size, "data")
    ln = _vec(length, p.size, "length")
    fr = np.asarray(is_frame, np.bool_).reshape(-1)
    for mem, pos, sh in _shinfos(mm, p, fr):
        nr = mem.buf[sh + SHINFO_OFF_NR_FRAGS].astype(_I64)
        width = int(nr.max()) if nr.size else 0
        idx = (sh[:, None, None] + SHINFO_OFF_FRAGS
               + SKB_FRAG_SIZE * np.arange(width)[:, None] + np.arange(SKB_FRAG_SIZE))
        tab = np.ascontiguousarray(mem.buf[idx]).view(SKB_FRAG_DTYPE)[..., 0]
        have = np.arange(width) < nr[:, None]
        flen = np.where(have, tab["len"].astype(_I64), 0)
        at = ln[pos] - flen.sum(axis=1)  # the head's length: where the first frag goes
        rows = mem.local(p[pos])
        _gather_into(mem, rows, d[pos], at, out, pos, np.zeros(pos.size, _I64))
        for j in range(width):  # frag j of every packet that has one
            k = np.flatnonzero(have[:, j])
            fp = tab["netmem"][k, j].astype(_I64)
            fl = flen[k, j]
            for fmem, fpos, frows in mm.split(fp):
                kk = k[fpos]
                _gather_into(fmem, frows, tab["offset"][kk, j].astype(_I64), fl[fpos], out,
                             pos[kk], at[kk])
            at[k] += fl


def _gather_into(mem: PageMemory, rows: NDArray[np.int64], off: NDArray[np.int64],
                 n: NDArray[np.int64], out: NDArray[np.uint8], dst_rows: NDArray[np.intp],
                 dst_col: NDArray[np.int64]) -> None:
    """``n[i]`` bytes at ``off[i]`` of page ``rows[i]`` of ``mem`` into
    ``out[dst_rows[i], dst_col[i]:]``: one gather and one scatter for all."""
    if not rows.size:
        return
    m = int(n.max())
    if m <= 0:
        return
    cols = np.arange(m)
    keep = cols[None, :] < n[:, None]
    src = rows[:, None] * mem.page_size + off[:, None] + cols
    r = np.broadcast_to(dst_rows[:, None], keep.shape)[keep]
    out[r, (dst_col[:, None] + cols)[keep]] = mem.buf[src[keep]]


def xdp_frames_have_frags(pfns: npt.ArrayLike, *, memmap: MemMap | None = None
                          ) -> NDArray[np.bool_]:
    """``xdp_frame_has_frags`` for frames whose kind a ring did not keep."""
    mm = memmap if memmap is not None else MEMMAP
    p = np.asarray(pfns, dtype=_I64).reshape(-1)
    out = np.zeros(p.size, np.bool_)
    for mem, pos, rows in mm.split(p):
        out[pos] = (mem.words[rows, XDP_FRAME_OFF_FLAGS // 4] & XDP_FLAGS_HAS_FRAGS) != 0
    return out


def xdp_return_frag_pages(pfns: Sequence[int] | NDArray[np.int64], *,
                          memmap: MemMap | None = None) -> None:
    """Frags ``bpf_xdp_adjust_tail`` released (``__xdp_return``, never direct): each
    page back to its pool or allocator, in order (one vector call per region)."""
    mm = memmap if memmap is not None else MEMMAP
    p = np.asarray(pfns, dtype=_I64).reshape(-1)
    if not p.size:
        return
    mtypes = np.empty(p.size, _I64)
    for mem, pos, _ in mm.split(p):
        mtypes[pos] = _PP if isinstance(mem, PagePool) else _ORDER0
    _xdp_return(mm, p, mtypes, False)


def xdp_buffs_pages(pfns: npt.ArrayLike, flags: npt.ArrayLike, *,
                    memmap: MemMap | None = None) -> NDArray[np.int64]:
    """The pages of page-sized ``xdp_buff`` s in the kernel's return order (each
    buffer's frags, then its head)."""
    mm = memmap if memmap is not None else MEMMAP
    p = np.asarray(pfns, dtype=_I64).reshape(-1)
    return _buffs_pages(mm, p, _vec(flags, p.size, "flags"), None)


def _read_frags(mem: PageMemory, shinfo: NDArray[np.int64]
                ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """For shared-info byte offsets in ``mem.buf``: (nr_frags, frag pfns (n, max nr))."""
    nr = mem.buf[shinfo + SHINFO_OFF_NR_FRAGS].astype(_I64)
    width = int(nr.max()) if nr.size else 0
    if not width:
        return nr, np.zeros((nr.size, 0), dtype=_I64)
    idx = (shinfo[:, None, None] + SHINFO_OFF_FRAGS + SKB_FRAG_SIZE * np.arange(width)[:, None]
           + np.arange(SKB_FRAG_SIZE))
    frags = np.ascontiguousarray(mem.buf[idx]).view(SKB_FRAG_DTYPE)[..., 0]
    return nr, frags["netmem"].astype(_I64)


def _page_sequence(heads: NDArray[np.int64], nfrags: NDArray[np.int64],
                   frag_pfns: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Pages in the kernel's return order (each frame's frags, then its head).

    Returns (pages, owner): ``owner[k]`` is the frame index of ``pages[k]``.
    """
    n = heads.size
    if not n or not frag_pfns.shape[1]:
        return heads, np.arange(n)
    counts = nfrags + 1
    start = np.cumsum(counts) - counts
    pages = np.empty(int(counts.sum()), dtype=_I64)
    pages[start + nfrags] = heads
    for j in range(frag_pfns.shape[1]):  # at most MAX_SKB_FRAGS rounds, never one per packet
        sel = nfrags > j
        pages[start[sel] + j] = frag_pfns[sel, j]
    return pages, np.repeat(np.arange(n), counts)


def _frames_pages(mm: MemMap, p: NDArray[np.int64]
                  ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Every page a batch of frames holds, in return order, with its memory type."""
    groups = mm.split(p)
    if len(groups) == 1:
        mem, _, rows = groups[0]
        _, mt1, heads1, fr1 = _group_pages(mem, rows)
        if fr1 is None:
            return heads1, mt1
        pages1, owner1 = _page_sequence(heads1, *fr1)
        return pages1, mt1[owner1]
    n = p.size
    mtype = np.empty(n, dtype=_I64)
    heads = np.empty(n, dtype=_I64)
    nfr = np.zeros(n, dtype=_I64)
    frag_cols: list[tuple[NDArray[np.intp], NDArray[np.int64]]] = []
    for mem, pos, rows in groups:
        _, mt, hd, fr = _group_pages(mem, rows)
        mtype[pos] = mt
        heads[pos] = hd
        if fr is not None:
            nfr[pos] = fr[0]
            frag_cols.append((pos, fr[1]))
    width = max((cols.shape[1] for _, cols in frag_cols), default=0)
    frags = np.zeros((n, width), dtype=_I64)
    for where, cols in frag_cols:
        frags[where, :cols.shape[1]] = cols
    pages, owner = _page_sequence(heads, nfr, frags)
    return pages, mtype[owner]


def _group_pages(mem: PageMemory, rows: NDArray[np.int64]
                 ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64],
                            tuple[NDArray[np.int64], NDArray[np.int64]] | None]:
    """For frames in rows of one region: data, mem_type, the data pages
    (``virt_to_page(xdpf->data)``) and, if any has frags, (nr_frags, frag pfns)."""
    w = mem.words
    data = mem.qwords[rows, XDP_FRAME_OFF_DATA // 8]
    mtype = w[rows, XDP_FRAME_OFF_MEM_TYPE // 4].astype(_I64)
    flags = w[rows, XDP_FRAME_OFF_FLAGS // 4]
    rel = data - mem.addr_base
    if int(rel.view(np.uint64).max()) < mem.nbytes:  # data in the frame's own region
        heads = (rel >> mem.page_shift) + mem.pfn_base
    else:
        heads = mem.memmap.virt_to_pages(data)
    has = (flags & XDP_FLAGS_HAS_FRAGS) != 0
    if not has.any():
        return data, mtype, heads, None
    hard = (rel[has] - w[rows[has], XDP_FRAME_OFF_HEADROOM // 4].astype(_I64)
            - XDP_FRAME_SIZE)
    nr, fp = _read_frags(mem, hard + w[rows[has], XDP_FRAME_OFF_FRAME_SZ // 4].astype(_I64)
                         - SKB_SHARED_INFO_SIZE)
    nfr = np.zeros(rows.size, dtype=_I64)
    nfr[has] = nr
    frags = np.zeros((rows.size, fp.shape[1]), dtype=_I64)
    frags[has] = fp
    return data, mtype, heads, (nfr, frags)


def _buffs_pages(mm: MemMap, p: NDArray[np.int64], flags: NDArray[np.int64],
                 frame_sz: NDArray[np.int64] | None) -> NDArray[np.int64]:
    has = (flags & XDP_FLAGS_HAS_FRAGS) != 0
    if not has.any():
        return p
    n = p.size
    nfr = np.zeros(n, dtype=_I64)
    cols: list[tuple[NDArray[np.intp], NDArray[np.int64]]] = []
    idx = np.flatnonzero(has)
    for mem, pos, rows in mm.split(p[idx]):
        where = idx[pos]
        fs = np.full(pos.size, mem.page_size, dtype=_I64) if frame_sz is None \
            else frame_sz[where]
        nr, fp = _read_frags(mem, rows * mem.page_size + fs - SKB_SHARED_INFO_SIZE)
        nfr[where] = nr
        cols.append((where, fp))
    width = max(fp.shape[1] for _, fp in cols)
    frags = np.zeros((n, width), dtype=_I64)
    for where, fp in cols:
        frags[where, :fp.shape[1]] = fp
    return _page_sequence(p, nfr, frags)[0]


# -- returning memory ------------------------------------------------------------------

def _as_pool(mem: PageMemory) -> PagePool:
    if not isinstance(mem, PagePool):
        raise PageAccountingError(f"MEM_TYPE_PAGE_POOL page of {mem.name}, which is not a "
                                  f"page_pool", owner=mem.name)
    return mem


def _as_allocator(mem: PageMemory, mem_type: int) -> PageAllocator:
    if not isinstance(mem, PageAllocator):
        raise PageAccountingError(f"{XdpMemType(mem_type).name} page of {mem.name}, which is "
                                  f"not a page allocator", owner=mem.name)
    return mem


_XSK_MSG = ("MEM_TYPE_XSK_BUFF_POOL memory goes back through the AF_XDP buffer pool "
            "(xsk_buff_free), and a frame never holds it")


def _xdp_return1(mm: MemMap, pfn: int, mem_type: int, napi_direct: bool) -> None:
    """``__xdp_return`` for one page."""
    if mem_type == _PP:
        if napi_direct and _ri.no_direct:
            napi_direct = False
        _as_pool(mm.find(pfn)).put_page(pfn, napi_direct)
    elif mem_type == _ORDER0 or mem_type == _SHARED:
        # PAGE_SHARED is page_frag_free(data): the reference of the page holding it.
        _as_allocator(mm.find(pfn), mem_type).put_page(pfn)
    elif mem_type == _XSK:
        raise NotSupportedError(_XSK_MSG)
    else:
        # Not reachable through registration; the kernel WARNs and leaks the page.
        log.warning("Incorrect XDP memory type (%d) usage", mem_type)


def _xdp_return(mm: MemMap, pages: NDArray[np.int64], mtypes: NDArray[np.int64],
                napi_direct: bool) -> None:
    """``__xdp_return`` for many pages, each pool seeing its pages in order."""
    if not pages.size:
        return
    first = int(mtypes[0])
    kinds = [first] if not (mtypes != first).any() else np.unique(mtypes).tolist()
    if _XSK in kinds:
        raise NotSupportedError(_XSK_MSG)
    for t in kinds:
        sel = pages[mtypes == t] if len(kinds) > 1 else pages
        if t == _PP:
            direct = napi_direct and not _ri.no_direct
            for mem, _, rows in mm.split(sel):
                _as_pool(mem).put_rows(rows, direct)
        elif t == _ORDER0 or t == _SHARED:
            for mem, pos, _ in mm.split(sel):
                _as_allocator(mem, t).put_pages(sel[pos])
        else:
            log.warning("Incorrect XDP memory type (%d) usage (%d page(s))", t, sel.size)


def _data_page(mem: PageMemory, data: int) -> int:
    """``virt_to_page(xdpf->data)``: normally a page of the frame's own region."""
    rel = data - mem.addr_base
    if 0 <= rel < mem.nbytes:
        return mem.pfn_base + (rel >> mem.page_shift)
    return mem.memmap.virt_to_page(data)


def _return_frame1(xdpf: XdpFrame, napi_direct: bool) -> None:
    mem = xdpf.mem
    data, _, headroom, _, mem_type, _, frame_sz, flags = _HDR.unpack_from(mem.raw, xdpf.offset)
    mm = mem.memmap
    if flags & XDP_FLAGS_HAS_FRAGS:
        sh = data - headroom - XDP_FRAME_SIZE - mem.addr_base + frame_sz - SKB_SHARED_INFO_SIZE
        for fpfn, _, _ in _read_frags1(mem, sh):
            _xdp_return1(mm, fpfn, mem_type, napi_direct)
    pfn = _data_page(mem, data)
    if mem_type == _PP and type(mem) is PagePool and pfn >> PFN_REGION_SHIFT \
            == mem.region_id:
        # The common case, without the region lookup: the frame's own pool.
        mem.put_page(pfn, napi_direct and not _ri.no_direct)
        return
    _xdp_return1(mm, pfn, mem_type, napi_direct)


def xdp_return_frame(xdpf: XdpFrame) -> None:
    """``xdp_return_frame``: give a frame's pages (frags, then head) back."""
    _return_frame1(xdpf, False)


def xdp_return_frame_rx_napi(xdpf: XdpFrame) -> None:
    """``xdp_return_frame_rx_napi``: the same from the pool's NAPI context
    (direct recycling unless ``xdp_return_frame_no_direct()``)."""
    _return_frame1(xdpf, True)


def xdp_return_frames(pfns: npt.ArrayLike, *, memmap: MemMap | None = None) -> None:
    """Batch ``xdp_return_frame``: one call for a numpy array of frame pfns."""
    mm = memmap if memmap is not None else MEMMAP
    pages, mtypes = _frames_pages(mm, np.asarray(pfns, dtype=_I64).reshape(-1))
    _xdp_return(mm, pages, mtypes, False)


def xdp_return_frames_rx_napi(pfns: npt.ArrayLike, *, memmap: MemMap | None = None) -> None:
    """Batch ``xdp_return_frame_rx_napi``."""
    mm = memmap if memmap is not None else MEMMAP
    pages, mtypes = _frames_pages(mm, np.asarray(pfns, dtype=_I64).reshape(-1))
    _xdp_return(mm, pages, mtypes, True)


def xdp_return_buff(pfn: int, rxq: XdpRxqInfo, *, flags: int = 0, frame_sz: int | None = None,
                    memmap: MemMap | None = None) -> None:
    """``xdp_return_buff``: free an ``xdp_buff`` (e.g. on ``XDP_DROP``) with direct
    recycling; ``rxq.mem.type`` says how, ``flags`` whether it has frags."""
    mm = memmap if memmap is not None else MEMMAP
    mem_type = rxq.mem.type
    if flags & XDP_FLAGS_HAS_FRAGS:
        mem = mm.find(pfn)
        fs = frame_sz if frame_sz is not None else mem.page_size
        sh = (pfn - mem.pfn_base) * mem.page_size + fs - SKB_SHARED_INFO_SIZE
        for fpfn, _, _ in _read_frags1(mem, sh):
            _xdp_return1(mm, fpfn, mem_type, True)
    _xdp_return1(mm, pfn, mem_type, True)


def xdp_return_buffs(pfns: npt.ArrayLike, rxq: XdpRxqInfo, *, flags: npt.ArrayLike = 0,
                     frame_sz: npt.ArrayLike | None = None,
                     memmap: MemMap | None = None) -> None:
    """Batch ``xdp_return_buff`` (a NAPI poll's ``XDP_DROP`` verdicts in one call)."""
    mm = memmap if memmap is not None else MEMMAP
    p = np.asarray(pfns, dtype=_I64).reshape(-1)
    fl = _vec(flags, p.size, "flags")
    fs = None if frame_sz is None else _vec(frame_sz, p.size, "frame_sz")
    pages = _buffs_pages(mm, p, fl, fs)
    _xdp_return(mm, pages, np.full(pages.size, rxq.mem.type, dtype=_I64), True)


class XdpFrameBulk:
    """``struct xdp_frame_bulk``: up to 16 page_pool pages waiting for one bulk put."""

    __slots__ = ("_qa", "count", "memmap", "q")

    def __init__(self, memmap: MemMap | None = None) -> None:
        self.memmap = memmap if memmap is not None else MEMMAP
        self.count = 0
        # The queue as an array.array (cheap one-page stores) and a numpy view of it.
        self._qa = array.array("q", bytes(8 * XDP_BULK_QUEUE_SIZE))
        self.q: NDArray[np.int64] = np.frombuffer(self._qa, dtype=_I64)

    def __repr__(self) -> str:
        return f"<XdpFrameBulk {self.count} queued>"


def xdp_frame_bulk_init(bq: XdpFrameBulk) -> None:
    bq.count = 0


def _pp_put_bulks(mm: MemMap, pages: NDArray[np.int64]) -> None:
    """``page_pool_put_netmem_bulk`` once per 16 pages, as one vector call per pool.

    Bulk ``k`` is ``pages[16k:16k + 16]``; each pool is told which bulk each
    of its pages came from, which matters only to count a full ring per bulk.
    """
    for mem, pos, rows in mm.split(pages):
        _as_pool(mem).put_rows(rows, bulk=True, calls=pos // XDP_BULK_QUEUE_SIZE)


def xdp_flush_frame_bulk(bq: XdpFrameBulk) -> None:
    """``xdp_flush_frame_bulk``: put the queued pages back into their pools."""
    if not bq.count:
        return
    pages = bq._qa[:bq.count].tolist()
    bq.count = 0
    mm = bq.memmap
    # 16 pages at most: group them by pool in plain Python, cheaper than numpy here.
    if min(pages) >> PFN_REGION_SHIFT == max(pages) >> PFN_REGION_SHIFT:
        _as_pool(mm.find(pages[0])).put_page_bulk(pages)
        return
    groups: dict[int, list[int]] = {}
    for p in pages:
        groups.setdefault(p >> PFN_REGION_SHIFT, []).append(p)
    for grp in groups.values():
        _as_pool(mm.find(grp[0])).put_page_bulk(grp)


def xdp_return_frame_bulk(xdpf: XdpFrame, bq: XdpFrameBulk) -> None:
    """``xdp_return_frame_bulk``: queue a page_pool frame's pages (flushing each 16);
    any other frame is returned at once."""
    mem = xdpf.mem
    if mem.memmap is not bq.memmap:
        raise ValueError("frame and bulk queue belong to different memmaps")
    data, _, headroom, _, mem_type, _, frame_sz, flags = _HDR.unpack_from(mem.raw, xdpf.offset)
    if mem_type != _PP:
        _return_frame1(xdpf, False)
        return
    q = bq._qa
    if bq.count == XDP_BULK_QUEUE_SIZE:
        xdp_flush_frame_bulk(bq)
    if flags & XDP_FLAGS_HAS_FRAGS:
        sh = data - headroom - XDP_FRAME_SIZE - mem.addr_base + frame_sz - SKB_SHARED_INFO_SIZE
        for fpfn, _, _ in _read_frags1(mem, sh):
            q[bq.count] = fpfn
            bq.count += 1
            if bq.count == XDP_BULK_QUEUE_SIZE:
                xdp_flush_frame_bulk(bq)
    rel = data - mem.addr_base  # _data_page, inlined: this runs once per frame
    q[bq.count] = mem.pfn_base + (rel >> mem.page_shift) if 0 <= rel < mem.nbytes \
        else mem.memmap.virt_to_page(data)
    bq.count += 1


def xdp_return_frames_bulk(pfns: npt.ArrayLike, bq: XdpFrameBulk) -> None:
    """Batch ``xdp_return_frame_bulk``: the whole array in one call.

    Pools end up exactly as after one ``xdp_return_frame_bulk`` per frame:
    the same pages go back in the same bulks of 16 (counted as separate
    bulk calls), and the last, partial bulk stays queued for
    ``xdp_flush_frame_bulk``.
    """
    mm = bq.memmap
    pages, mtypes = _frames_pages(mm, np.asarray(pfns, dtype=_I64).reshape(-1))
    pp = mtypes == _PP
    if not pp.all():
        _xdp_return(mm, pages[~pp], mtypes[~pp], False)
        pages = pages[pp]
    queue = np.concatenate((bq.q[:bq.count], pages)) if bq.count else pages
    total = queue.size
    # A full queue is flushed only when another page arrives, so the last
    # 1..16 pages stay queued.
    flushed = XDP_BULK_QUEUE_SIZE * ((total - 1) // XDP_BULK_QUEUE_SIZE) if total else 0
    bq.count = 0
    if flushed:
        _pp_put_bulks(mm, queue[:flushed])
    rest = queue[flushed:]
    bq.q[:rest.size] = rest
    bq.count = rest.size


# -- clones ----------------------------------------------------------------------------

def xdpf_clone(xdpf: XdpFrame, allocator: PageAllocator | None = None) -> XdpFrame | None:
    """``xdpf_clone``: copy frame, headroom and data into a new order-0 page.

    ``None`` when ``40 + headroom + len > PAGE_SIZE``, when no page is left,
    or for a frame with frags (which the kernel would clone without them).
    """
    mem = xdpf.mem
    data, ln, headroom, _, _, _, _, flags = _HDR.unpack_from(mem.raw, xdpf.offset)
    if flags & XDP_FLAGS_HAS_FRAGS:
        return None
    head = headroom + XDP_FRAME_SIZE
    total = head + ln
    if total > PAGE_SIZE:
        return None
    alloc = allocator if allocator is not None else mem.memmap.system
    if alloc.page_size != PAGE_SIZE:
        raise ValueError("xdpf_clone needs an allocator of order-0 pages")
    pfn = alloc.alloc_page()
    if pfn is None:
        return None
    src = data - head - mem.addr_base
    dst = (pfn - alloc.pfn_base) * PAGE_SIZE
    alloc.raw[dst:dst + total] = mem.raw[src:src + total]
    struct.pack_into("<q", alloc.raw, dst + XDP_FRAME_OFF_DATA, alloc.addr_base + dst + head)
    struct.pack_into("<I", alloc.raw, dst + XDP_FRAME_OFF_MEM_TYPE, MEM_TYPE_PAGE_ORDER0)
    struct.pack_into("<I", alloc.raw, dst + XDP_FRAME_OFF_FRAME_SZ, PAGE_SIZE)
    return XdpFrame.at(alloc, pfn)


def xdpf_clones(pfns: npt.ArrayLike, allocator: PageAllocator | None = None, *,
                memmap: MemMap | None = None) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
    """Batch ``dev_map_enqueue_clone``'s ``xdpf_clone``: (new pfns, status); a failed
    clone has pfn 0 and ``-EOPNOTSUPP`` for a frags frame (refused before cloning),
    else ``-ENOMEM`` (what ``dev_map_enqueue_clone`` reports for ``NULL``)."""
    mm = memmap if memmap is not None else MEMMAP
    alloc = allocator if allocator is not None else mm.system
    if alloc.page_size != PAGE_SIZE:
        raise ValueError("xdpf_clone needs an allocator of order-0 pages")
    p = np.asarray(pfns, dtype=_I64).reshape(-1)
    n = p.size
    out = np.zeros(n, dtype=_I64)
    status = np.zeros(n, dtype=np.int32)
    for mem, pos, rows in mm.split(p):
        h = _read_headers(mem, rows)
        head = h["headroom"].astype(_I64) + XDP_FRAME_SIZE
        total = head + h["len"].astype(_I64)
        frags = (h["flags"] & XDP_FLAGS_HAS_FRAGS) != 0
        ok = (total <= PAGE_SIZE) & ~frags
        want = np.flatnonzero(ok)
        pages = alloc.alloc_pages_bulk(want.size)
        status[pos[np.flatnonzero(~ok)]] = -errno.ENOMEM
        status[pos[np.flatnonzero(frags)]] = -errno.EOPNOTSUPP
        status[pos[want[pages.size:]]] = -errno.ENOMEM
        want = want[:pages.size]
        if not want.size:
            continue
        out[pos[want]] = pages
        src = h["data"][want] - head[want] - mem.addr_base
        m = int(total[want].max())
        # Copy the longest frame's bytes for all: past each frame's end the
        # new page is unspecified anyway (the kernel copies into a dirty page).
        idx = np.minimum(src[:, None] + np.arange(m), mem.buf.size - 1)
        rows = alloc.local(pages)
        alloc.pages[rows, :m] = mem.buf[idx]
        raw = alloc.pages[rows, :XDP_FRAME_SIZE]
        nh = raw.view(XDP_FRAME_DTYPE)[:, 0]
        nh["data"] = alloc.addr_base + rows * PAGE_SIZE + head[want]
        nh["frame_sz"] = PAGE_SIZE
        nh["mem_type"] = _ORDER0
        alloc.pages[rows, :XDP_FRAME_SIZE] = raw
    return out, status


# -- skbs --------------------------------------------------------------------------------

@dataclass(frozen=True)
class XdpSkb:
    """What ``__xdp_build_skb_from_frame`` leaves in an skb, as plain data.

    ``data`` is the packet from its Ethernet header on (linear part, then
    frags); ``protocol``/``pkt_type`` are ``eth_type_trans``'s (protocol in
    host order); ``headroom`` is the skb headroom before the Ethernet pull
    (``40 + xdpf->headroom``); ``pp_recycle`` is ``skb_mark_for_recycle``.
    No checksum, hash or rx queue is carried over, as in the kernel.
    """

    data: bytes
    metadata: bytes
    dev: int
    protocol: int
    pkt_type: int
    headroom: int
    frame_sz: int
    nr_frags: int
    data_len: int
    mem_type: int
    pp_recycle: bool


def _eth_type_trans(pkt: bytes, dev_addr: bytes) -> tuple[int, int]:
    dst = pkt[:6]
    if dev_addr and dst == dev_addr:
        pkt_type = PACKET_HOST
    elif dst and dst[0] & 1:
        pkt_type = PACKET_BROADCAST if dst == b"\xff" * 6 else PACKET_MULTICAST
    else:
        pkt_type = PACKET_OTHERHOST if dev_addr else PACKET_HOST
    proto = int.from_bytes(pkt[12:14], "big")
    if proto >= ETH_P_802_3_MIN:
        return proto, pkt_type
    if pkt[ETH_HLEN:ETH_HLEN + 2] == b"\xff\xff":  # raw 802.3 (IPX)
        return ETH_P_802_3, pkt_type
    return ETH_P_802_2, pkt_type


def _skb_record(xdpf: XdpFrame, dev: int, dev_addr: bytes) -> XdpSkb:
    data, ln, headroom, meta, mem_type, _, frame_sz, flags = xdpf.header()
    frags = xdpf.frags()
    pkt = xdpf.packet()
    proto, pkt_type = _eth_type_trans(pkt, dev_addr)
    return XdpSkb(data=pkt, metadata=xdpf.metadata() if meta else b"", dev=dev,
                  protocol=proto, pkt_type=pkt_type, headroom=headroom + XDP_FRAME_SIZE,
                  frame_sz=frame_sz, nr_frags=len(frags), data_len=sum(f[1] for f in frags),
                  mem_type=mem_type, pp_recycle=mem_type == MEM_TYPE_PAGE_POOL)


def _scrub(mem: PageMemory, rows: NDArray[np.int64]) -> None:
    """``xdp_scrub_frame``: clear ``data`` and ``dev_rx`` of frames turned into skbs."""
    raw = mem.pages[rows, :XDP_FRAME_SIZE]
    h = raw.view(XDP_FRAME_DTYPE)[:, 0]
    h["data"] = 0
    h["dev_rx"] = 0
    mem.pages[rows, :XDP_FRAME_SIZE] = raw


def xdp_build_skb_from_frame(xdpf: XdpFrame, dev: int, *, dev_addr: bytes = b"") -> XdpSkb:
    """``xdp_build_skb_from_frame``: the skb data of a frame arriving on ``dev``.

    The frame is consumed: its header is scrubbed and its pages go back to
    their allocators (no direct recycling), as freeing the skb would do.
    ``dev_addr`` (the device MAC) lets ``pkt_type`` tell host from other-host.
    """
    return xdp_build_skb_from_frames([xdpf.pfn], dev, dev_addr=dev_addr,
                                     memmap=xdpf.mem.memmap)[0]


def xdp_build_skb_from_frames(pfns: npt.ArrayLike, dev: int, *, dev_addr: bytes = b"",
                              memmap: MemMap | None = None) -> list[XdpSkb]:
    """Batch ``xdp_build_skb_from_frame`` (cpumap's list of skbs); one record per
    frame, the pages returned in one vector call."""
    mm = memmap if memmap is not None else MEMMAP
    p = np.asarray(pfns, dtype=_I64).reshape(-1)
    # The records hold bytes, so one Python object per packet is the output itself.
    skbs = [_skb_record(XdpFrame(int(pfn), mm), dev, dev_addr) for pfn in p.tolist()]
    pages, mtypes = _frames_pages(mm, p)
    for mem, _, rows in mm.split(p):
        _scrub(mem, rows)
    _xdp_return(mm, pages, mtypes, False)
    return skbs
