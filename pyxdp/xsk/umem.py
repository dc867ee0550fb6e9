"""The UMEM, the user's side: the memory an AF_XDP program registers with ``XDP_UMEM_REG``.

A :class:`Umem` is one contiguous, page-aligned buffer cut into chunks that
packets are received into and sent from. It lives either in an anonymous
shared ``mmap`` (what the kernel pins on ``XDP_UMEM_REG``; inherited across
``fork``) or in a named ``multiprocessing.shared_memory.SharedMemory`` that
another process attaches to with :meth:`Umem.attach`. Its geometry is
checked as the kernel checks a registration, and its addresses computed as
the kernel computes them: both are :mod:`pyxdp.net.xdp_umem`
(``net/xdp/xdp_umem.c``), shared with the datapath; the copy-mode receive
layout (data at ``chunk + headroom + 256``) is here.
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

from pyxdp.args import Array, checked, short
from pyxdp.errors import BadArgument
from pyxdp.net.xdp_umem import (
    XskError,
    add_offset_to_addr,
    aligned_extract_addr,
    encode_unaligned,
    extract_addr,
    validate_desc,
    validate_umem_reg,
)
from pyxdp.uapi.bpf import XDP_PACKET_HEADROOM
from pyxdp.uapi.if_xdp import XDP_DESC_DTYPE, XDP_UMEM_REG_STRUCT, XdpUmemFlag

__all__ = ["Umem"]

_SHM_DIR: Final = "/dev/shm"  # where Linux keeps POSIX shared memory names

U64Array = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]


def _u64(a: npt.ArrayLike) -> U64Array:
    return np.asarray(a, dtype=np.uint64)


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
    ``shared`` puts the memory in a named ``SharedMemory`` (``.name``);
    ``memory`` cuts an existing page-aligned mapping into the chunks instead (a
    page pool's pages: the UMEM is then that pool's memory; not unmapped by
    :meth:`close`).
    The geometry is checked as the kernel's ``XDP_UMEM_REG`` checks it.

    ``buf`` is a ``uint8`` view of the whole UMEM and ``address`` its
    virtual address in this process (what ``XDP_UMEM_REG`` takes).
    """

    @checked
    def __init__(self, nchunks: int = 4096, chunk_size: int = 4096, headroom: int = 0, *,
                 unaligned: bool = False, tx_metadata_len: int = 0, tx_sw_csum: bool = False,
                 shared: bool = False, name: str | None = None, _attach: bool = False,
                 memory: mmap.mmap | None = None) -> None:
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
        if memory is not None:
            if len(memory) < size:
                raise ValueError(f"the memory holds {len(memory)} bytes, the geometry needs "
                                 f"{size}")
            self.buf: npt.NDArray[np.uint8] = np.frombuffer(memory, np.uint8, size)
        elif _attach:
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
            self.buf = np.frombuffer(self._mmap, np.uint8, size)
        elif shared or name is not None:
            try:
                shm = shared_memory.SharedMemory(name, create=True, size=size)
            except OSError as e:  # a name taken, no memory: what mmap would say
                raise XskError("UMEM", e.errno or _errno.ENOMEM,
                               f"{size} bytes shared as {name!r}: {e.strerror}") from None
            self._shm = shm
            self.name = shm.name
            # Our own mapping of the segment, and SharedMemory's closed at once: its
            # __del__ would raise BufferError (printed at exit) for a UMEM never closed
            # while our views of it lived; only its name stays, for unlink().
            try:
                fd = os.open(os.path.join(_SHM_DIR, shm.name.lstrip("/")), os.O_RDWR)
                try:
                    self._mmap = mmap.mmap(fd, size)
                finally:
                    os.close(fd)
            finally:
                shm.close()
            self.buf = np.frombuffer(self._mmap, np.uint8, size)
        else:
            try:
                self._mmap = mmap.mmap(-1, size)  # MAP_SHARED | MAP_ANONYMOUS, page-aligned
            except OSError as e:
                raise XskError("UMEM", e.errno or _errno.ENOMEM,
                               f"{size} bytes: {e.strerror}") from None
            self.buf = np.frombuffer(self._mmap, np.uint8, size)
        self.address: int = int(self.buf.ctypes.data)
        self._closed = False
        # Sockets registered on this UMEM (libxdp's umem->refcount): close() waits for
        # them, as xsk_umem__delete refuses (EBUSY) while a socket holds the UMEM.
        self._users = 0
        self._close_pending = False

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

    @checked(addr=Array())
    def chunk_index(self, addr: npt.ArrayLike) -> U64Array:
        """The chunk each address (aligned address or unaligned handle) falls in."""
        if self.unaligned:
            return extract_addr(addr) // np.uint64(self.chunk_size)
        return _u64(addr) >> self._shift  # aligned: chunk_size is a power of two

    @checked(index=Array())
    def chunk_base(self, index: npt.ArrayLike) -> U64Array:
        """The base address of each chunk index."""
        if self.unaligned:
            return _u64(index) * np.uint64(self.chunk_size)
        return _u64(index) << self._shift

    @checked(addr=Array())
    def data_addr(self, addr: npt.ArrayLike) -> U64Array:
        """Where an RX descriptor's data starts in the UMEM (handles decoded)."""
        return add_offset_to_addr(addr) if self.unaligned else _u64(addr)

    @checked(fill_addr=Array(), offset=(0, 0xFFFF))
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
        if not isinstance(descs, np.ndarray) or descs.dtype != XDP_DESC_DTYPE \
                or descs.ndim != 1:
            raise BadArgument(f"Umem.validate_desc: descs must be a 1-d XDP_DESC_DTYPE "
                              f"array, not {short(descs)}")
        return validate_desc(descs["addr"], descs["len"], descs["options"],
                             umem_size=self.size, chunk_size=self.chunk_size,
                             unaligned=self.unaligned,
                             tx_metadata_len=self.tx_metadata_len)

    # -- data ---------------------------------------------------------------------

    def _spans(self, what: str, addr: U64Array, length: npt.NDArray[np.int64]) -> None:
        """Each ``(addr, len)`` lies in the UMEM, one length per address."""
        if self._closed:
            raise XskError(f"Umem.{what}", _errno.EBADF, "the UMEM is closed")
        if length.ndim and len(length) != len(addr):
            raise BadArgument(f"Umem.{what}: {len(length)} lengths for {len(addr)} addresses")
        if len(addr) and (addr.max() >= self.size
                          or (addr.astype(np.int64) + length).max() > self.size):
            raise BadArgument(f"Umem.{what}: a packet lies beyond the UMEM's {self.size} bytes")

    @checked(data_addr=Array(scalar=False), length=Array(np.uint32))
    def packets(self, data_addr: npt.ArrayLike, length: npt.ArrayLike) -> list[bytes]:
        """The bytes at each ``(data_addr, len)``, one ``bytes`` per packet."""
        a64: U64Array = data_addr  # type: ignore[assignment]  # checked
        self._spans("packets", a64, np.asarray(length, np.int64))
        ln64 = np.broadcast_to(np.asarray(length, np.int64), a64.shape)
        a, ln = a64.tolist(), ln64.tolist()
        buf = self.buf
        return [buf[x:x + n].tobytes() for x, n in zip(a, ln, strict=True)]

    @checked(data_addr=Array(scalar=False), length=Array(np.uint32), maxlen=(0, 1 << 16))
    def gather(self, data_addr: npt.ArrayLike, length: npt.ArrayLike,
               maxlen: int | None = None) -> npt.NDArray[np.uint8]:
        """An ``(n, maxlen)`` copy of the packets, zero past each length."""
        a = _u64(data_addr).astype(np.int64)
        self._spans("gather", a.astype(np.uint64), np.asarray(length, np.int64))
        ln = np.broadcast_to(np.asarray(length, np.int64), a.shape)
        width = int(ln.max(initial=0)) if maxlen is None else maxlen
        cols = np.arange(width, dtype=np.int64)
        idx = np.minimum(a[:, None] + cols, self.size - 1)
        out: npt.NDArray[np.uint8] = self.buf[idx]
        out[cols[None, :] >= ln[:, None]] = 0
        return out

    @checked(data_addr=Array(scalar=False), lengths=Array(np.uint32, none_ok=True))
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
                raise BadArgument(f"Umem.write_packets: a packet array of shape {rows.shape} "
                                  f"for {len(a)} addresses")
            width = rows.shape[1]
            self._spans("write_packets", a.astype(np.uint64),
                        np.full(len(a), width, np.int64))
            ln = np.asarray(width if lengths is None else lengths, np.int64)
            if ln.ndim and len(ln) != len(a):
                raise BadArgument(f"Umem.write_packets: {len(ln)} lengths for {len(a)} "
                                  f"addresses")
            ln = np.broadcast_to(ln, a.shape)
            if width and len(a):
                self.buf[a[:, None] + np.arange(width)] = rows  # one scatter, full rows
            return ln.astype(np.uint32)
        if not isinstance(packets, list | tuple) or not all(
                isinstance(p, bytes | bytearray | memoryview) for p in packets):
            raise BadArgument(f"Umem.write_packets: packets must be a list of bytes-like "
                              f"objects or a 2-d uint8 array, not {short(packets)}")
        ln = np.fromiter((len(p) for p in packets), np.int64, len(packets))
        if len(ln) != len(a):
            raise BadArgument(f"Umem.write_packets: {len(ln)} packets for {len(a)} addresses")
        self._spans("write_packets", a.astype(np.uint64), ln)
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

    @property
    def closed(self) -> bool:
        return self._closed

    def get(self, op: str) -> None:
        """A socket registers this UMEM (``XDP_UMEM_REG``, or sharing it): it is in use
        until :meth:`put`. A closed UMEM's memory is gone: EBADF."""
        if self._closed:
            raise XskError(op, _errno.EBADF, "the UMEM is closed")
        self._users += 1

    def put(self) -> None:
        """A socket of this UMEM is closed; the last one ends a close the ``with``
        block left pending."""
        self._users -= 1
        if not self._users and self._close_pending:
            self.close()

    def close(self) -> None:
        """Unmap this process's view (a registered UMEM stays pinned by the kernel).
        Refused (EBUSY) while sockets use it, as libxdp's ``xsk_umem__delete``: the
        datapath still writes their packets into this memory."""
        if self._closed:
            return
        if self._users:
            raise XskError("Umem.close", _errno.EBUSY,
                           f"the UMEM is in use by {self._users} socket(s): close them first")
        self._closed = True
        self.buf = np.zeros(0, np.uint8)
        try:
            if self._mmap is not None:
                self._mmap.close()
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
        if exc is not None and self._users:
            # Leaving on an exception with sockets still open: the last socket's close
            # unmaps the memory (raising here would hide the exception).
            self._close_pending = True
            return
        self.close()

    def __repr__(self) -> str:
        mode = "unaligned" if self.unaligned else "aligned"
        where = f"shm {self.name}" if self.name else "anon"
        return (f"Umem({self.nchunks} x {self.chunk_size}, headroom {self.headroom}, {mode}, "
                f"tx_metadata_len {self.tx_metadata_len}, {where})")

