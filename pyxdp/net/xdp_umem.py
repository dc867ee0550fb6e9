"""The UMEM as the kernel registers it: ``net/xdp/xdp_umem.c`` and the address
helpers of ``net/xdp/xsk_buff_pool.c`` (``xp_validate_desc``).

Modelled exactly:

* the ``XDP_UMEM_REG`` checks of ``xdp_umem_reg`` as Linux 6.18 applies them
  (:func:`validate_umem_reg`, all EINVAL): chunk size in ``[2048,
  PAGE_SIZE]`` and a power of two unless ``XDP_UMEM_UNALIGNED_CHUNK_FLAG``;
  no unknown flags; a page-aligned address without wrap-around; at most
  2**32 - 1 pages; ``1 <= len / chunk_size < 2**32``, no remainder in aligned
  mode; ``headroom <= chunk_size - 704`` (measured: 6.18 keeps
  ``XDP_PACKET_HEADROOM`` 256 + ``skb_shared_info`` 320 + 128 free, where
  older trees only required ``headroom < chunk_size - 256``); with
  ``XDP_UMEM_TX_METADATA_LEN`` a ``tx_metadata_len`` below 256 and a
  multiple of 8 (ignored without the flag); an option shorter than the
  24-byte v1 struct;
* addresses: aligned masking (``xp_aligned_extract_addr``), the unaligned
  ``base | offset << 48`` handle (``xp_get_handle``,
  ``xsk_umem__extract_addr``/``__extract_offset``/``__add_offset_to_addr``)
  and ``xp_validate_desc`` for TX descriptors, all vectorised over numpy
  arrays.

The memory itself is the user's (the AF_XDP user API's ``Umem`` allocates
it); the kernel's side reads it through :class:`UmemArea`, what a
registration exposes.

Simplified: page pinning and ``RLIMIT_MEMLOCK`` accounting (``ENOBUFS``)
are the kernel's business; the zero-copy "crosses non-contiguous pages"
check needs DMA mappings and is never true in copy mode, so it is left out.
"""

from __future__ import annotations

import errno as _errno
import mmap
from typing import Final, Protocol

import numpy as np
import numpy.typing as npt

from pyxdp.errors import KernelError
from pyxdp.uapi.if_xdp import (
    XDP_UMEM_FLAGS_VALID,
    XDP_UMEM_MIN_CHUNK_SIZE,
    XDP_UMEM_REG_STRUCT,
    XDP_UMEM_REG_V1_STRUCT,
    XSK_UNALIGNED_BUF_ADDR_MASK,
    XSK_UNALIGNED_BUF_OFFSET_SHIFT,
    XdpDescOption,
    XdpUmemFlag,
)

__all__ = [
    "PAGE_SIZE",
    "UMEM_RESERVED_TAILROOM",
    "UmemArea",
    "XskError",
    "add_offset_to_addr",
    "aligned_extract_addr",
    "encode_unaligned",
    "extract_addr",
    "extract_offset",
    "validate_desc",
    "validate_umem_reg",
]

PAGE_SIZE: Final = mmap.PAGESIZE
U32_MAX: Final = 0xFFFF_FFFF
UMEM_RESERVED_TAILROOM: Final = 704
"""Bytes of a chunk 6.18 keeps from the headroom: 256 + 320 + 128 (measured)."""
TX_VALID_OPTIONS: Final = int(XdpDescOption.XDP_PKT_CONTD | XdpDescOption.XDP_TX_METADATA)

U64Array = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]


class XskError(KernelError):
    """An AF_XDP operation refused with the kernel's errno (``.op``, ``.errno``).

    Raised alike by the kernel backend (the syscall's answer plus a hint)
    and by pyxdp's own checks that mirror the kernel's (same errno), so
    code handles both backends the same way.
    """


# --------------------------------------------------------------------------
# XDP_UMEM_REG
# --------------------------------------------------------------------------

def validate_umem_reg(addr: int, length: int, chunk_size: int, headroom: int, flags: int = 0,
                      tx_metadata_len: int = 0, *, optlen: int = XDP_UMEM_REG_STRUCT.size,
                      page_size: int = PAGE_SIZE) -> None:
    """``xsk_setsockopt(XDP_UMEM_REG)`` + ``xdp_umem_reg``: raise :class:`XskError` (EINVAL).

    ``optlen`` is the option's size: below 24 is EINVAL, below 32 the v1
    struct (``flags`` and ``tx_metadata_len`` are then not read).
    """
    def bad(why: str) -> XskError:
        return XskError("setsockopt(XDP_UMEM_REG)", _errno.EINVAL, why)

    if optlen < XDP_UMEM_REG_V1_STRUCT.size:
        raise bad(f"option of {optlen} bytes, less than the 24-byte xdp_umem_reg_v1")
    if optlen < XDP_UMEM_REG_STRUCT.size:
        flags, tx_metadata_len = 0, 0
    unaligned = bool(flags & XdpUmemFlag.XDP_UMEM_UNALIGNED_CHUNK_FLAG)
    if not XDP_UMEM_MIN_CHUNK_SIZE <= chunk_size <= page_size:
        raise bad(f"chunk_size {chunk_size} outside [{XDP_UMEM_MIN_CHUNK_SIZE}, {page_size}]")
    if flags & ~XDP_UMEM_FLAGS_VALID:
        raise bad(f"unknown UMEM flags {flags & ~XDP_UMEM_FLAGS_VALID:#x}")
    if not unaligned and chunk_size & (chunk_size - 1):
        raise bad(f"chunk_size {chunk_size} is not a power of two (unaligned mode allows it)")
    if addr % page_size:
        raise bad(f"address {addr:#x} is not page-aligned")
    if addr + length > 0xFFFF_FFFF_FFFF_FFFF:
        raise bad("address + length wraps around")
    if -(-length // page_size) > U32_MAX:
        raise bad("more than 2**32 - 1 pages")
    chunks, rem = divmod(length, chunk_size)
    if not 0 < chunks <= U32_MAX:  # a negative length too: the kernel's is a __u64
        raise bad(f"length {length} holds {chunks} chunks of {chunk_size}")
    if not unaligned and rem:
        raise bad(f"length {length} is not a multiple of chunk_size {chunk_size}")
    if not 0 <= headroom <= chunk_size - UMEM_RESERVED_TAILROOM:  # a __u32
        raise bad(f"headroom {headroom} outside 0..chunk_size - {UMEM_RESERVED_TAILROOM}")
    if flags & XdpUmemFlag.XDP_UMEM_TX_METADATA_LEN and (tx_metadata_len >= 256
                                                         or tx_metadata_len % 8):
        raise bad(f"tx_metadata_len {tx_metadata_len} not a multiple of 8 below 256")


# --------------------------------------------------------------------------
# Addresses (vectorised: ints or numpy arrays in, numpy arrays out)
# --------------------------------------------------------------------------

def _u64(a: npt.ArrayLike) -> U64Array:
    return np.asarray(a, dtype=np.uint64)


_MASK48: Final = np.uint64(XSK_UNALIGNED_BUF_ADDR_MASK)
_SHIFT: Final = np.uint64(XSK_UNALIGNED_BUF_OFFSET_SHIFT)


def extract_addr(addr: npt.ArrayLike) -> U64Array:
    """``xsk_umem__extract_addr``: the base of an unaligned handle (low 48 bits)."""
    return _u64(addr) & _MASK48


def extract_offset(addr: npt.ArrayLike) -> U64Array:
    """``xsk_umem__extract_offset``: the offset of an unaligned handle (high 16 bits)."""
    return _u64(addr) >> _SHIFT


def add_offset_to_addr(addr: npt.ArrayLike) -> U64Array:
    """``xsk_umem__add_offset_to_addr``: where an unaligned handle's data is."""
    a = _u64(addr)
    return (a & _MASK48) + (a >> _SHIFT)


def encode_unaligned(base: npt.ArrayLike, offset: npt.ArrayLike) -> U64Array:
    """``xp_get_handle`` in unaligned mode: ``base | offset << 48``."""
    return (_u64(base) & _MASK48) | (_u64(offset) << _SHIFT)


def aligned_extract_addr(addr: npt.ArrayLike, chunk_size: int) -> U64Array:
    """``xp_aligned_extract_addr``: the chunk an aligned-mode address is in."""
    return _u64(addr) & ~np.uint64(chunk_size - 1)


def validate_desc(addr: npt.ArrayLike, length: npt.ArrayLike, options: npt.ArrayLike, *,
                  umem_size: int, chunk_size: int, unaligned: bool = False,
                  tx_metadata_len: int = 0) -> BoolArray:
    """``xp_validate_desc``, vectorised: True where a TX descriptor is valid.

    Aligned: ``len != 0``, ``addr >= md``, the data (and the metadata before
    it) inside one chunk, ``addr - md`` inside the UMEM. Unaligned: ``len +
    md <= chunk_size`` and ``[data - md, data + len)`` inside the UMEM. Both:
    no option bits but ``XDP_PKT_CONTD`` and ``XDP_TX_METADATA``. ``md`` is
    ``tx_metadata_len``; all arithmetic is u64 with the kernel's overflow
    checks.
    """
    a = _u64(addr)
    ln = _u64(length)
    opt = _u64(options)
    md = np.uint64(tx_metadata_len)
    size = np.uint64(umem_size)
    chunk = np.uint64(chunk_size)
    ok = (ln != 0) & ((opt & ~np.uint64(TX_VALID_OPTIONS)) == 0)
    if not unaligned:
        ok &= a >= md
        base = a - md  # wraps where a < md; masked out above
        offset = base & (chunk - np.uint64(1))
        ok &= ln <= chunk
        ok &= offset + ln + md <= chunk
        ok &= base < size
        return np.asarray(ok, np.bool_)
    total = ln + md
    ok &= total <= chunk
    data = add_offset_to_addr(a)
    ok &= data >= md
    base = data - md
    ok &= base < size
    end = base + total  # no u64 overflow: base < size and total <= chunk
    ok &= end <= size
    return np.asarray(ok, np.bool_)


# --------------------------------------------------------------------------
# What the kernel's side reads of a registered UMEM
# --------------------------------------------------------------------------

class UmemArea(Protocol):
    """A registered UMEM as the datapath uses it: the geometry ``XDP_UMEM_REG``
    gave, the bytes (``buf``, a ``uint8`` view of all of it) and its address
    arithmetic (the user API's ``Umem`` is one)."""

    @property
    def buf(self) -> npt.NDArray[np.uint8]: ...
    @property
    def nchunks(self) -> int: ...
    @property
    def chunk_size(self) -> int: ...
    @property
    def headroom(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def unaligned(self) -> bool: ...
    @property
    def tx_metadata_len(self) -> int: ...
    @property
    def rx_frame_size(self) -> int: ...
    @property
    def rx_data_offset(self) -> int: ...
    def data_addr(self, addr: npt.ArrayLike) -> U64Array: ...
    def rx_addr(self, fill_addr: npt.ArrayLike, offset: int | None = None) -> U64Array: ...
    def validate_desc(self, descs: np.ndarray) -> BoolArray: ...
