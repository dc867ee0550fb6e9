"""The UMEM: ``net/xdp/xdp_umem.c`` plus the user-visible part of ``net/xdp/xsk_buff_pool.c``.

A :class:`Umem` is one contiguous, page-aligned buffer cut into chunks that
packets are received into and sent from. It lives either in an anonymous
shared ``mmap`` (what the kernel pins on ``XDP_UMEM_REG``; inherited across
``fork``) or in a named ``multiprocessing.shared_memory.SharedMemory`` that
another process attaches to with :meth:`Umem.attach`.

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
  ``xsk_umem__extract_addr``/``__extract_offset``/``__add_offset_to_addr``),
  the copy-mode receive layout (data at ``chunk + headroom + 256``) and
  ``xp_validate_desc`` for TX descriptors, all vectorised over numpy arrays.

Simplified: page pinning and ``RLIMIT_MEMLOCK`` accounting (``ENOBUFS``)
are the kernel's business; the zero-copy "crosses non-contiguous pages"
check needs DMA mappings and is never true in copy mode, so it is left out.
"""

from __future__ import annotations

import errno as _errno
import mmap
import os
from multiprocessing import shared_memory
from types import TracebackType
from typing import Final, Self

import numpy as np
import numpy.typing as npt

from pyxdp.errors import KernelError
from pyxdp.uapi.bpf import XDP_PACKET_HEADROOM
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
    "Umem",
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
_SHM_DIR: Final = "/dev/shm"  # where Linux keeps POSIX shared memory names
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
    if not chunks or chunks > U32_MAX:
        raise bad(f"length {length} holds {chunks} chunks of {chunk_size}")
    if not unaligned and rem:
        raise bad(f"length {length} is not a multiple of chunk_size {chunk_size}")
    if headroom > chunk_size - UMEM_RESERVED_TAILROOM:
        raise bad(f"headroom {headroom} > chunk_size - {UMEM_RESERVED_TAILROOM}")
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
# The UMEM
# --------------------------------------------------------------------------

class Umem:
    """``nchunks`` chunks of ``chunk_size`` bytes, registered geometry included.

    ``headroom`` is the UMEM headroom the kernel leaves before each received
    packet (after it, ``XDP_PACKET_HEADROOM`` more); ``unaligned`` sets
    ``XDP_UMEM_UNALIGNED_CHUNK_FLAG`` (chunk size need not be a power of two,
    addresses are handles); ``tx_metadata_len`` (with
    ``XDP_UMEM_TX_METADATA_LEN``) reserves that many bytes before TX data.
    ``shared`` puts the memory in a named ``SharedMemory`` (``.name``).
    The geometry is checked as the kernel's ``XDP_UMEM_REG`` checks it.

    ``buf`` is a ``uint8`` view of the whole UMEM and ``address`` its
    virtual address in this process (what ``XDP_UMEM_REG`` takes).
    """

    def __init__(self, nchunks: int = 4096, chunk_size: int = 4096, headroom: int = 0, *,
                 unaligned: bool = False, tx_metadata_len: int = 0, tx_sw_csum: bool = False,
                 shared: bool = False, name: str | None = None, _attach: bool = False) -> None:
        flags = 0
        if unaligned:
            flags |= XdpUmemFlag.XDP_UMEM_UNALIGNED_CHUNK_FLAG
        if tx_metadata_len:
            flags |= XdpUmemFlag.XDP_UMEM_TX_METADATA_LEN
        if tx_sw_csum:
            flags |= XdpUmemFlag.XDP_UMEM_TX_SW_CSUM
        size = nchunks * chunk_size
        # Page-aligned start is given by mmap; check the rest before allocating.
        validate_umem_reg(0, size, chunk_size, headroom, flags, tx_metadata_len)
        self.nchunks = nchunks
        self.chunk_size = chunk_size
        self.headroom = headroom
        self.flags = flags
        self.unaligned = unaligned
        self.tx_metadata_len = tx_metadata_len
        self.size = size
        self._shift = np.uint64(chunk_size.bit_length() - 1)
        self._shm: shared_memory.SharedMemory | None = None
        self._mmap: mmap.mmap | None = None
        self.name: str | None = None
        if _attach:
            assert name is not None
            # Map the segment ourselves: SharedMemory(name) would register it with
            # this process's resource tracker, which unlinks it when we exit.
            try:
                fd = os.open(os.path.join(_SHM_DIR, name.lstrip("/")), os.O_RDWR)
            except OSError as e:
                raise XskError("attach UMEM", e.errno or _errno.ENOENT, name) from None
            try:
                have = os.fstat(fd).st_size
                if have < size:
                    raise XskError("attach UMEM", _errno.EINVAL,
                                   f"{name}: {have} bytes, the geometry needs {size}")
                self._mmap = mmap.mmap(fd, size)
            finally:
                os.close(fd)
            self.name = name
            self.buf: npt.NDArray[np.uint8] = np.frombuffer(self._mmap, np.uint8, size)
        elif shared or name is not None:
            shm = shared_memory.SharedMemory(name, create=True, size=size)
            self._shm = shm
            self.name = shm.name
            assert shm.buf is not None
            self.buf = np.frombuffer(shm.buf, np.uint8, size)
        else:
            self._mmap = mmap.mmap(-1, size)  # MAP_SHARED | MAP_ANONYMOUS, page-aligned
            self.buf = np.frombuffer(self._mmap, np.uint8, size)
        self.address: int = int(self.buf.ctypes.data)
        self._closed = False

    @classmethod
    def attach(cls, name: str, nchunks: int, chunk_size: int = 4096, headroom: int = 0, *,
               unaligned: bool = False, tx_metadata_len: int = 0) -> Umem:
        """The UMEM another process created with ``shared=True``, by its ``name``."""
        return cls(nchunks, chunk_size, headroom, unaligned=unaligned,
                   tx_metadata_len=tx_metadata_len, name=name, _attach=True)

    # -- geometry -----------------------------------------------------------------

    @property
    def rx_frame_size(self) -> int:
        """Largest packet one chunk receives (``xsk_pool_get_rx_frame_size``)."""
        return self.chunk_size - self.headroom - XDP_PACKET_HEADROOM

    @property
    def rx_data_offset(self) -> int:
        """Where copy-mode receive puts packet data in a chunk: headroom + 256."""
        return self.headroom + XDP_PACKET_HEADROOM

    def reg_bytes(self) -> bytes:
        """``struct xdp_umem_reg`` for this UMEM at ``address``."""
        return XDP_UMEM_REG_STRUCT.pack(self.address, self.size, self.chunk_size,
                                        self.headroom, self.flags, self.tx_metadata_len)

    def chunk_addrs(self) -> U64Array:
        """The base address of every chunk, in order."""
        return np.arange(self.nchunks, dtype=np.uint64) * np.uint64(self.chunk_size)

    def chunk_index(self, addr: npt.ArrayLike) -> U64Array:
        """The chunk each address (aligned address or unaligned handle) falls in."""
        if self.unaligned:
            return extract_addr(addr) // np.uint64(self.chunk_size)
        return _u64(addr) >> self._shift  # aligned: chunk_size is a power of two

    def chunk_base(self, index: npt.ArrayLike) -> U64Array:
        """The base address of each chunk index."""
        if self.unaligned:
            return _u64(index) * np.uint64(self.chunk_size)
        return _u64(index) << self._shift

    def data_addr(self, addr: npt.ArrayLike) -> U64Array:
        """Where an RX descriptor's data starts in the UMEM (handles decoded)."""
        return add_offset_to_addr(addr) if self.unaligned else _u64(addr)

    def rx_addr(self, fill_addr: npt.ArrayLike, offset: int | None = None) -> U64Array:
        """The RX descriptor address for a fill-ring address, data at ``offset`` in its
        buffer (default: headroom + 256, copy mode): masked chunk + offset when
        aligned, ``base | offset << 48`` when unaligned (``xp_get_handle``)."""
        off = self.rx_data_offset if offset is None else offset
        if self.unaligned:
            return encode_unaligned(fill_addr, off)
        return aligned_extract_addr(fill_addr, self.chunk_size) + np.uint64(off)

    def validate_desc(self, descs: np.ndarray) -> BoolArray:
        """``xp_validate_desc`` of ``XDP_DESC_DTYPE`` records against this UMEM."""
        return validate_desc(descs["addr"], descs["len"], descs["options"],
                             umem_size=self.size, chunk_size=self.chunk_size,
                             unaligned=self.unaligned,
                             tx_metadata_len=self.tx_metadata_len)

    # -- data ---------------------------------------------------------------------

    def packets(self, data_addr: npt.ArrayLike, length: npt.ArrayLike) -> list[bytes]:
        """The bytes at each ``(data_addr, len)``, one ``bytes`` per packet."""
        a = _u64(data_addr).tolist()
        ln = np.asarray(length, np.int64).tolist()
        buf = self.buf
        return [buf[x:x + n].tobytes() for x, n in zip(a, ln, strict=True)]

    def gather(self, data_addr: npt.ArrayLike, length: npt.ArrayLike,
               maxlen: int | None = None) -> npt.NDArray[np.uint8]:
        """An ``(n, maxlen)`` copy of the packets, zero past each length."""
        a = _u64(data_addr).astype(np.int64)
        ln = np.asarray(length, np.int64)
        width = int(ln.max(initial=0)) if maxlen is None else maxlen
        cols = np.arange(width, dtype=np.int64)
        idx = np.minimum(a[:, None] + cols, self.size - 1)
        out: npt.NDArray[np.uint8] = self.buf[idx]
        out[cols[None, :] >= ln[:, None]] = 0
        return out

    def write_packets(self, data_addr: npt.ArrayLike,
                      packets: list[bytes] | npt.NDArray[np.uint8],
                      lengths: npt.ArrayLike | None = None) -> npt.NDArray[np.uint32]:
        """Copy packets to ``data_addr`` (one per packet); returns their lengths.

        ``packets`` is a list of bytes-like objects or an ``(n, L)`` uint8
        array (every packet ``L`` bytes, or ``lengths[i]`` of its row).
        """
        a = _u64(data_addr).astype(np.int64)
        if isinstance(packets, np.ndarray):
            rows = np.asarray(packets, np.uint8)
            if rows.ndim != 2 or rows.shape[0] != len(a):
                raise ValueError(f"packet array of shape {rows.shape} for {len(a)} addresses")
            width = rows.shape[1]
            ln = (np.full(len(a), width, np.int64) if lengths is None
                  else np.asarray(lengths, np.int64))
            if width and len(a):
                self.buf[a[:, None] + np.arange(width)] = rows  # one scatter, full rows
            return ln.astype(np.uint32)
        ln = np.fromiter((len(p) for p in packets), np.int64, len(packets))
        if len(ln) != len(a):
            raise ValueError(f"{len(ln)} packets for {len(a)} addresses")
        if len(ln) and (ln == ln[0]).all():
            flat = np.frombuffer(b"".join(packets), np.uint8)
            if ln[0]:
                self.buf[a[:, None] + np.arange(ln[0])] = flat.reshape(len(ln), int(ln[0]))
            return ln.astype(np.uint32)
        # Mixed sizes: one scatter of the joined bytes to per-byte destinations.
        flat = np.frombuffer(b"".join(packets), np.uint8)
        starts = np.cumsum(ln) - ln
        dst = np.repeat(a - starts, ln) + np.arange(int(ln.sum()), dtype=np.int64)
        self.buf[dst] = flat
        return ln.astype(np.uint32)

    # -- lifetime -----------------------------------------------------------------

    def close(self) -> None:
        """Unmap this process's view (a registered UMEM stays pinned by the kernel)."""
        if self._closed:
            return
        self._closed = True
        self.buf = np.zeros(0, np.uint8)
        try:
            if self._mmap is not None:
                self._mmap.close()
            if self._shm is not None:
                self._shm.close()
        except BufferError:
            # A view of the memory is still alive somewhere (a datapath that ran a
            # program on it in place keeps its last buffer): the mapping goes with it.
            pass

    def unlink(self) -> None:
        """Remove the shared-memory name (creator's job; attached views stay valid)."""
        if self._shm is not None:
            self._shm.unlink()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "unaligned" if self.unaligned else "aligned"
        where = f"shm {self.name}" if self.name else "anon"
        return (f"Umem({self.nchunks} x {self.chunk_size}, headroom {self.headroom}, {mode}, "
                f"tx_metadata_len {self.tx_metadata_len}, {where})")

