"""The user-space consumer of a kernel ``BPF_MAP_TYPE_RINGBUF`` (``kernel/bpf/ringbuf.c``).

The map is read through two mappings of its descriptor, as libbpf's
``ring_buffer__add`` makes them: the consumer page (read-write, offset 0)
holding ``consumer_pos``, and, read-only from one page on, the producer page
(``producer_pos``) followed by the data area mapped twice in a row, so a record
that wraps around the end reads as one contiguous slice. Each record starts
with an 8-byte header: the length with ``BPF_RINGBUF_BUSY_BIT`` (bit 31, still
being written) and ``BPF_RINGBUF_DISCARD_BIT`` (bit 30, discarded), then the
page offset; records are 8-byte aligned. Waiting is ``poll(2)`` on the map
descriptor (the kernel wakes it on submit).
"""

from __future__ import annotations

import mmap
import os
import select
import struct

from pyxdp.errors import KernelError
from pyxdp.kernel.syscall import Fd, map_create
from pyxdp.uapi.bpf import BpfMapType

__all__ = ["RingBuffer"]

_BUSY = 1 << 31
_DISCARD = 1 << 30
_HDR = 8
_U64 = struct.Struct("=Q")
_U32 = struct.Struct("=I")


class RingBuffer:
    """A new ring buffer map of ``size`` bytes (a power of two, whole pages) and its reader,
    or with ``map_fd`` the reader of an existing one (through a duplicate of the
    descriptor, which stays the caller's)."""

    def __init__(self, size: int, name: str = "ringbuf", map_fd: int | None = None) -> None:
        page = mmap.PAGESIZE
        if size < page or size & (size - 1):
            raise KernelError("ringbuf", 22, f"size {size} is not a power-of-two number of "
                                             "pages")
        self.size = size
        self.fd: Fd = map_create(BpfMapType.BPF_MAP_TYPE_RINGBUF, 0, 0, size, name=name) \
            if map_fd is None else Fd(os.dup(map_fd), "map")
        try:
            self._cons = mmap.mmap(self.fd.fileno(), page, mmap.MAP_SHARED,
                                   mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
            self._prod = mmap.mmap(self.fd.fileno(), page + 2 * size, mmap.MAP_SHARED,
                                   mmap.PROT_READ, offset=page)
        except OSError as e:
            self.fd.close()
            raise KernelError("mmap ringbuf", e.errno or 0, str(e)) from None
        self._data = memoryview(self._prod)[page:]
        self._poll = select.poll()
        self._poll.register(self.fd.fileno(), select.POLLIN)

    def wait(self, timeout_s: float) -> None:
        """Block until the kernel submits something (or ``timeout_s`` passes)."""
        self._poll.poll(max(0, int(timeout_s * 1000)))

    def read(self, limit: int = 1 << 30) -> list[bytes]:
        """The committed records not read yet (at most ``limit``), in order; discarded
        records are skipped."""
        cons = _U64.unpack_from(self._cons, 0)[0]
        prod = _U64.unpack_from(self._prod, 0)[0]
        mask = self.size - 1
        out: list[bytes] = []
        while cons < prod and len(out) < limit:
            at = cons & mask
            (word,) = _U32.unpack_from(self._data, at)
            if word & _BUSY:
                break
            length = word & ~(_BUSY | _DISCARD)
            if not word & _DISCARD:
                out.append(bytes(self._data[at + _HDR:at + _HDR + length]))
            cons += (length + _HDR + 7) & ~7
        _U64.pack_into(self._cons, 0, cons)
        return out

    def close(self) -> None:
        self._data.release()
        self._prod.close()
        self._cons.close()
        self.fd.close()

    def __enter__(self) -> RingBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
