"""``include/uapi/linux/if_xdp.h``: the AF_XDP socket ABI, with the kernel's names.

Socket options, bind flags, UMEM flags, ring flags, mmap page offsets,
descriptor option bits and the layouts of the structures that cross the
``setsockopt``/``getsockopt``/``bind`` boundary (as :mod:`struct` formats)
or live in shared ring memory (as numpy dtypes). Every value is ABI as of
Linux 6.18; the ring offsets a 64-bit kernel reports were measured with
``getsockopt(XDP_MMAP_OFFSETS)`` (producer 0, consumer 128, desc 320,
flags 196: ``struct xdp_ring`` puts each index on its own cache line).
Pure data: no I/O here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import Final

import numpy as np

__all__ = [
    "AF_XDP",
    "PF_XDP",
    "SOCKADDR_XDP_STRUCT",
    "SOL_XDP",
    "XDP_COPY",
    "XDP_DESC_DTYPE",
    "XDP_MAX_TX_SKB_BUDGET",
    "XDP_MMAP_OFFSETS",
    "XDP_MMAP_OFFSETS_SIZE",
    "XDP_MMAP_OFFSETS_V1_SIZE",
    "XDP_OPTIONS",
    "XDP_OPTIONS_ZEROCOPY",
    "XDP_PGOFF_RX_RING",
    "XDP_PGOFF_TX_RING",
    "XDP_PKT_CONTD",
    "XDP_RING_NEED_WAKEUP",
    "XDP_RING_OFFSET_DEFAULT",
    "XDP_RX_RING",
    "XDP_SHARED_UMEM",
    "XDP_STATISTICS",
    "XDP_STATISTICS_DTYPE",
    "XDP_STATISTICS_SIZE",
    "XDP_STATISTICS_V1_SIZE",
    "XDP_TX_METADATA",
    "XDP_TX_RING",
    "XDP_UMEM_COMPLETION_RING",
    "XDP_UMEM_FILL_RING",
    "XDP_UMEM_FLAGS_VALID",
    "XDP_UMEM_MIN_CHUNK_SIZE",
    "XDP_UMEM_PGOFF_COMPLETION_RING",
    "XDP_UMEM_PGOFF_FILL_RING",
    "XDP_UMEM_REG",
    "XDP_UMEM_REG_STRUCT",
    "XDP_UMEM_REG_V1_STRUCT",
    "XDP_UMEM_UNALIGNED_CHUNK_FLAG",
    "XDP_USE_NEED_WAKEUP",
    "XDP_USE_SG",
    "XDP_ZEROCOPY",
    "XSK_UNALIGNED_BUF_ADDR_MASK",
    "XSK_UNALIGNED_BUF_OFFSET_SHIFT",
    "XdpBindFlag",
    "XdpDescOption",
    "XdpMmapOffsets",
    "XdpPgoff",
    "XdpRingOffset",
    "XdpSockopt",
    "XdpStatistics",
    "XdpTxmdFlag",
    "XdpUmemFlag",
]

AF_XDP: Final = 44
PF_XDP: Final = AF_XDP
SOL_XDP: Final = 283


class XdpSockopt(IntEnum):
    """``SOL_XDP`` option names."""

    XDP_MMAP_OFFSETS = 1
    XDP_RX_RING = 2
    XDP_TX_RING = 3
    XDP_UMEM_REG = 4
    XDP_UMEM_FILL_RING = 5
    XDP_UMEM_COMPLETION_RING = 6
    XDP_STATISTICS = 7
    XDP_OPTIONS = 8
    XDP_MAX_TX_SKB_BUDGET = 9  # Linux 6.17+: copy-mode descriptors per sendmsg


class XdpBindFlag(IntFlag):
    """``sockaddr_xdp.sxdp_flags``."""

    XDP_SHARED_UMEM = 1 << 0
    XDP_COPY = 1 << 1  # force copy mode
    XDP_ZEROCOPY = 1 << 2  # force zero-copy mode
    XDP_USE_NEED_WAKEUP = 1 << 3  # the kernel sets XDP_RING_NEED_WAKEUP for us to read
    XDP_USE_SG = 1 << 4  # multi-buffer packets (XDP_PKT_CONTD)


# The same values as plain module constants, under the header's names.
XDP_MMAP_OFFSETS: Final = XdpSockopt.XDP_MMAP_OFFSETS
XDP_RX_RING: Final = XdpSockopt.XDP_RX_RING
XDP_TX_RING: Final = XdpSockopt.XDP_TX_RING
XDP_UMEM_REG: Final = XdpSockopt.XDP_UMEM_REG
XDP_UMEM_FILL_RING: Final = XdpSockopt.XDP_UMEM_FILL_RING
XDP_UMEM_COMPLETION_RING: Final = XdpSockopt.XDP_UMEM_COMPLETION_RING
XDP_STATISTICS: Final = XdpSockopt.XDP_STATISTICS
XDP_OPTIONS: Final = XdpSockopt.XDP_OPTIONS
XDP_MAX_TX_SKB_BUDGET: Final = XdpSockopt.XDP_MAX_TX_SKB_BUDGET
XDP_SHARED_UMEM: Final = XdpBindFlag.XDP_SHARED_UMEM
XDP_COPY: Final = XdpBindFlag.XDP_COPY
XDP_ZEROCOPY: Final = XdpBindFlag.XDP_ZEROCOPY
XDP_USE_NEED_WAKEUP: Final = XdpBindFlag.XDP_USE_NEED_WAKEUP
XDP_USE_SG: Final = XdpBindFlag.XDP_USE_SG


class XdpUmemFlag(IntFlag):
    """``xdp_umem_reg.flags``."""

    XDP_UMEM_UNALIGNED_CHUNK_FLAG = 1 << 0
    XDP_UMEM_TX_SW_CSUM = 1 << 1  # Linux 6.8+
    XDP_UMEM_TX_METADATA_LEN = 1 << 2  # Linux 6.8+: honour tx_metadata_len


XDP_UMEM_UNALIGNED_CHUNK_FLAG: Final = XdpUmemFlag.XDP_UMEM_UNALIGNED_CHUNK_FLAG
XDP_UMEM_FLAGS_VALID: Final = int(XdpUmemFlag.XDP_UMEM_UNALIGNED_CHUNK_FLAG
                               | XdpUmemFlag.XDP_UMEM_TX_SW_CSUM
                               | XdpUmemFlag.XDP_UMEM_TX_METADATA_LEN)
XDP_UMEM_MIN_CHUNK_SIZE: Final = 2048  # net/xdp/xdp_umem.c

XDP_RING_NEED_WAKEUP: Final = 1 << 0  # bit of the ring's ``flags`` word
XDP_OPTIONS_ZEROCOPY: Final = 1 << 0  # bit of ``struct xdp_options.flags``


class XdpPgoff(IntEnum):
    """mmap(2) offsets selecting a ring of an AF_XDP socket."""

    XDP_PGOFF_RX_RING = 0
    XDP_PGOFF_TX_RING = 0x80000000
    XDP_UMEM_PGOFF_FILL_RING = 0x100000000
    XDP_UMEM_PGOFF_COMPLETION_RING = 0x180000000


XDP_PGOFF_RX_RING: Final = XdpPgoff.XDP_PGOFF_RX_RING
XDP_PGOFF_TX_RING: Final = XdpPgoff.XDP_PGOFF_TX_RING
XDP_UMEM_PGOFF_FILL_RING: Final = XdpPgoff.XDP_UMEM_PGOFF_FILL_RING
XDP_UMEM_PGOFF_COMPLETION_RING: Final = XdpPgoff.XDP_UMEM_PGOFF_COMPLETION_RING


XSK_UNALIGNED_BUF_OFFSET_SHIFT: Final = 48
XSK_UNALIGNED_BUF_ADDR_MASK: Final = (1 << XSK_UNALIGNED_BUF_OFFSET_SHIFT) - 1


class XdpDescOption(IntFlag):
    """``xdp_desc.options`` bits."""

    XDP_PKT_CONTD = 1 << 0  # more fragments of this packet follow
    XDP_TX_METADATA = 1 << 1  # struct xsk_tx_metadata precedes the data


XDP_PKT_CONTD: Final = XdpDescOption.XDP_PKT_CONTD
XDP_TX_METADATA: Final = XdpDescOption.XDP_TX_METADATA


class XdpTxmdFlag(IntFlag):
    """``xsk_tx_metadata.flags`` (the request half of the TX metadata)."""

    XDP_TXMD_FLAGS_TIMESTAMP = 1 << 0
    XDP_TXMD_FLAGS_CHECKSUM = 1 << 1
    XDP_TXMD_FLAGS_LAUNCH_TIME = 1 << 2


# --------------------------------------------------------------------------
# Structures
# --------------------------------------------------------------------------

XDP_DESC_DTYPE: Final = np.dtype([("addr", "=u8"), ("len", "=u4"), ("options", "=u4")])
"""``struct xdp_desc`` (16 bytes): an RX or TX ring entry."""

_STAT_FIELDS: Final = ("rx_dropped", "rx_invalid_descs", "tx_invalid_descs",
                       "rx_ring_full", "rx_fill_ring_empty_descs", "tx_ring_empty_descs")
XDP_STATISTICS_DTYPE: Final = np.dtype([(f, "=u8") for f in _STAT_FIELDS])
"""``struct xdp_statistics`` (48 bytes; the v1 form is the first 24)."""
XDP_STATISTICS_SIZE: Final = 48
XDP_STATISTICS_V1_SIZE: Final = 24

XDP_UMEM_REG_STRUCT: Final = struct.Struct("=QQIIII")
"""``struct xdp_umem_reg``: addr, len, chunk_size, headroom, flags, tx_metadata_len (32 bytes)."""
XDP_UMEM_REG_V1_STRUCT: Final = struct.Struct("=QQII")
"""The 24-byte v1 ``xdp_umem_reg`` (no flags, no tx_metadata_len)."""

SOCKADDR_XDP_STRUCT: Final = struct.Struct("=HHIII")
"""``struct sockaddr_xdp``: family, flags, ifindex, queue_id, shared_umem_fd (16 bytes)."""

XDP_MMAP_OFFSETS_SIZE: Final = 128  # 4 x struct xdp_ring_offset {producer, consumer, desc, flags}
XDP_MMAP_OFFSETS_V1_SIZE: Final = 96  # without flags (kernels before 5.4)
_MMAP_OFFSETS: Final = struct.Struct("=16Q")


@dataclass(frozen=True, slots=True)
class XdpRingOffset:
    """``struct xdp_ring_offset``: byte offsets in a ring's mmap of its four parts."""

    producer: int
    consumer: int
    desc: int
    flags: int


XDP_RING_OFFSET_DEFAULT: Final = XdpRingOffset(producer=0, consumer=128, desc=320, flags=196)
"""What Linux 6.18 on x86-64 reports for every ring (measured); pyxdp's own rings use it."""


@dataclass(frozen=True, slots=True)
class XdpMmapOffsets:
    """``struct xdp_mmap_offsets``: the layout of the rx, tx, fill and completion rings."""

    rx: XdpRingOffset
    tx: XdpRingOffset
    fr: XdpRingOffset
    cr: XdpRingOffset

    @classmethod
    def unpack(cls, raw: bytes) -> XdpMmapOffsets:
        """Parse the 128-byte answer of ``getsockopt(XDP_MMAP_OFFSETS)``."""
        v = _MMAP_OFFSETS.unpack_from(raw)
        rings = [XdpRingOffset(v[i], v[i + 1], v[i + 2], v[i + 3]) for i in range(0, 16, 4)]
        return cls(*rings)

    def pack(self) -> bytes:
        return _MMAP_OFFSETS.pack(*(x for r in (self.rx, self.tx, self.fr, self.cr)
                                    for x in (r.producer, r.consumer, r.desc, r.flags)))


@dataclass(frozen=True, slots=True)
class XdpStatistics:
    """``struct xdp_statistics`` (``getsockopt(XDP_STATISTICS)``), fields in kernel order."""

    rx_dropped: int = 0
    rx_invalid_descs: int = 0
    tx_invalid_descs: int = 0
    rx_ring_full: int = 0
    rx_fill_ring_empty_descs: int = 0
    tx_ring_empty_descs: int = 0

    @classmethod
    def unpack(cls, raw: bytes) -> XdpStatistics:
        """Parse 48 bytes (or the 24-byte v1 prefix; the missing fields read 0)."""
        vals = np.frombuffer(raw[:XDP_STATISTICS_SIZE].ljust(XDP_STATISTICS_SIZE, b"\0"),
                             XDP_STATISTICS_DTYPE)[0]
        return cls(*(int(vals[f]) for f in _STAT_FIELDS))

    def pack(self) -> bytes:
        return struct.pack("=6Q", *(getattr(self, f) for f in _STAT_FIELDS))

    def __sub__(self, other: XdpStatistics) -> XdpStatistics:
        return XdpStatistics(*(getattr(self, f) - getattr(other, f) for f in _STAT_FIELDS))
