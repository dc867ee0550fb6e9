"""BPF ring buffers, as ``kernel/bpf/ringbuf.c`` (``BPF_MAP_TYPE_RINGBUF``), and a consumer.

Producer side (the helpers): ``bpf_ringbuf_reserve`` / ``submit`` /
``discard`` / ``output`` / ``query`` with the kernel's record format. Each
record starts with an 8-byte header ``struct bpf_ringbuf_hdr { u32 len; u32
pg_off; }``: ``len`` is the sample size with ``BPF_RINGBUF_BUSY_BIT`` (1 <<
31) set while reserved and ``BPF_RINGBUF_DISCARD_BIT`` (1 << 30) set when
discarded; ``pg_off`` is the page offset of the header from the start of the
kernel's ``struct bpf_ringbuf``, whose data area begins 3 pages in (measured
on 6.18: the first record's ``pg_off`` is 3). Records are ``round_up(len +
8, 8)`` bytes; a reservation fails (NULL, or -EAGAIN for ``output``) when the
producer would get ``size - 1`` or more bytes ahead of the consumer or of the
oldest uncommitted record, so at most ``size - 8`` bytes are in flight
(measured: 4088 of 4096).

Consumer side (libbpf's ``ring_buffer__consume``): :meth:`RingBuf.consume`
and :class:`RingBuffer` walk committed records from the consumer position,
stop at the first busy one, skip discarded ones and hand each sample to a
callback (a negative return stops and is returned); :meth:`RingBuf.records`
yields samples as bytes.

Checks (``ringbuf_map_alloc``, all EINVAL): key_size and value_size 0,
``max_entries`` a power of 2 and a multiple of the page size, no flag but
``BPF_F_NUMA_NODE``. Element operations from user space are ENOTSUPP (524).

Storage (numpy, for native code): ``data`` ``uint8[2 * size]`` and ``pos``
``uint64[3]`` = consumer, producer, pending positions (they only grow; the
offset is ``pos & (size - 1)``). The kernel maps the data pages twice in a
row so that a record crossing the end is contiguous; pyxdp's region is the
``2 * size`` buffer: a reservation crossing the end gets the ring's start
copied past ``size`` (what the kernel's second mapping shows there), and on
commit the part of a record written past ``size`` is copied to the start, so
``data[:size]`` always holds the ring as the kernel's pages would.

Headers out of the program's reach: in Linux the verifier confines a
program to its sample, so the header words it cannot touch are the
kernel's truth. Here the program sees the whole data region, so the
producer and consumer keep each record's length word in ``lens`` (one per
8-byte slot, outside any region) and read only that; the header in
``data`` is written from it at reserve and commit. A program that forges
a header changes nothing, and one that commits anything but a reserved
sample faults (``bpf_ringbuf_submit``/``discard``), as the verifier would
have refused it. Simplified: no wakeups, no epoll, no overwrite
mode, no user-space producer (``USER_RINGBUF``).
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from pyxdp.maps.base import (
    MAX_STORAGE_BYTES,
    PAGE_SIZE,
    Map,
    MapError,
    MapSpec,
    U8Array,
    einval,
    round_up,
)
from pyxdp.uapi.bpf import BpfMapType, MapFlag

__all__ = ["BPF_RINGBUF_BUSY_BIT", "BPF_RINGBUF_DISCARD_BIT", "BPF_RINGBUF_HDR_SZ",
           "RINGBUF_DATA_PGOFF", "RingBuf", "RingBuffer"]

BPF_RINGBUF_BUSY_BIT = 1 << 31
BPF_RINGBUF_DISCARD_BIT = 1 << 30
BPF_RINGBUF_HDR_SZ = 8
RINGBUF_DATA_PGOFF = 3
RINGBUF_MAX_RECORD_SZ = 0xFFFF_FFFF // 4
BPF_RB_NO_WAKEUP = 1
BPF_RB_FORCE_WAKEUP = 2
BPF_RB_AVAIL_DATA, BPF_RB_RING_SIZE, BPF_RB_CONS_POS, BPF_RB_PROD_POS = 0, 1, 2, 3
CONS, PROD, PEND = 0, 1, 2

SampleFn = Callable[[bytes], "int | None"]


class RingBuf(Map):
    """``BPF_MAP_TYPE_RINGBUF``: ``max_entries`` bytes of records."""

    map_type = int(BpfMapType.BPF_MAP_TYPE_RINGBUF)

    def __init__(self, spec: MapSpec) -> None:
        n = spec.max_entries
        if spec.map_flags & ~int(MapFlag.BPF_F_NUMA_NODE):
            raise einval("map_create", "ringbuf: only BPF_F_NUMA_NODE")
        if spec.key_size or spec.value_size or n == 0 or n & (n - 1) or n % PAGE_SIZE:
            raise einval("map_create", "ringbuf: key/value 0, size a power-of-2 page multiple")
        if 2 * n > MAX_STORAGE_BYTES:
            raise MapError("map_create", _errno.ENOMEM, "ring buffer too large")
        super().__init__(spec)
        self.size = n
        self.mask = n - 1
        self.data: U8Array = np.zeros(2 * n, np.uint8)
        self.pos = np.zeros(3, np.uint64)
        self._hdr = self.data[:n].view("<u4")  # len at [2k], pg_off at [2k+1]
        self.lens = np.zeros(n // BPF_RINGBUF_HDR_SZ, np.uint32)  # the length words' truth
        self._make_regions([self.data])

    def _storage_bytes(self) -> int:
        return 2 * self.max_entries

    # -- producer -----------------------------------------------------------------------
    def _len_at(self, pos: int) -> int:
        return int(self.lens[(pos & self.mask) >> 3])

    def _set_len(self, off: int, word: int) -> None:
        self.lens[off >> 3] = word
        self._hdr[off >> 2] = word

    def reserve(self, size: int, flags: int = 0) -> int:
        """``bpf_ringbuf_reserve``: the sample's address in the data region, 0 for NULL."""
        if flags or size > RINGBUF_MAX_RECORD_SZ or size < 0:
            return 0
        total = round_up(size + BPF_RINGBUF_HDR_SZ, 8)
        if total > self.size:
            return 0
        cons, prod, pend = (int(x) for x in self.pos)
        # Move the pending position past records already committed.
        while pend < prod:
            ln = self._len_at(pend)
            if ln & BPF_RINGBUF_BUSY_BIT:
                break
            pend += round_up((ln & ~BPF_RINGBUF_DISCARD_BIT) + BPF_RINGBUF_HDR_SZ, 8)
        self.pos[PEND] = pend
        new_prod = prod + total
        if new_prod - cons > self.mask or new_prod - pend > self.mask:
            return 0
        off = prod & self.mask
        end = off + total
        if end > self.size:
            # A sample crossing the end: the kernel's second mapping shows the ring's
            # start there, so what the program reads before writing is the same.
            self.data[self.size:end] = self.data[:end - self.size]
        self._set_len(off, size | BPF_RINGBUF_BUSY_BIT)
        self._hdr[(off >> 2) + 1] = RINGBUF_DATA_PGOFF + (off >> 12)
        self.pos[PROD] = new_prod
        return self.value_region().base + off + BPF_RINGBUF_HDR_SZ

    def _commit(self, addr: int, discard: bool) -> None:
        off = addr - self.value_region().base - BPF_RINGBUF_HDR_SZ
        if not 0 <= off < self.size or off % 8:
            raise einval("ringbuf_commit", f"{addr:#x} is not a reserved sample")
        ln = int(self.lens[off >> 3])
        cons, prod = int(self.pos[CONS]), int(self.pos[PROD])
        # Only a record between the consumer and the producer can be one in flight.
        if not ln & BPF_RINGBUF_BUSY_BIT or (off - cons) & self.mask >= prod - cons:
            raise einval("ringbuf_commit", f"sample at {addr:#x} is not reserved")
        size = ln & ~BPF_RINGBUF_BUSY_BIT
        end = off + BPF_RINGBUF_HDR_SZ + size
        if end > self.size:
            # The sample crossed the end: fold the tail into the ring's start.
            self.data[:end - self.size] = self.data[self.size:end]
        self._set_len(off, size | (BPF_RINGBUF_DISCARD_BIT if discard else 0))

    def submit(self, addr: int, flags: int = 0) -> None:
        """``bpf_ringbuf_submit``: make the reserved sample visible to the consumer."""
        self._commit(addr, False)

    def discard(self, addr: int, flags: int = 0) -> None:
        """``bpf_ringbuf_discard``: release the reservation; the consumer skips it."""
        self._commit(addr, True)

    def output(self, data: bytes, flags: int = 0) -> None:
        """``bpf_ringbuf_output``: reserve, copy and submit; EAGAIN when there is no room."""
        if flags & ~(BPF_RB_NO_WAKEUP | BPF_RB_FORCE_WAKEUP):
            raise einval("ringbuf_output", f"unknown flags {flags:#x}")
        addr = self.reserve(len(data))
        if not addr:
            raise MapError("ringbuf_output", _errno.EAGAIN, "no room in the ring buffer")
        off = addr - self.value_region().base
        self.data[off:off + len(data)] = np.frombuffer(bytes(data), np.uint8)
        self._commit(addr, False)

    def try_output(self, data: bytes, flags: int = 0) -> int:
        """:meth:`output` returning 0 or ``-errno`` (the helper's r0)."""
        try:
            self.output(data, flags)
        except MapError as e:
            return -e.errno
        return 0

    def query(self, flags: int) -> int:
        """``bpf_ringbuf_query``."""
        cons, prod = int(self.pos[CONS]), int(self.pos[PROD])
        if flags == BPF_RB_AVAIL_DATA:
            return prod - cons
        if flags == BPF_RB_RING_SIZE:
            return self.size
        if flags == BPF_RB_CONS_POS:
            return cons
        if flags == BPF_RB_PROD_POS:
            return prod
        return 0

    # -- consumer -----------------------------------------------------------------------
    def _sample(self, pos: int, size: int) -> bytes:
        start = (pos & self.mask) + BPF_RINGBUF_HDR_SZ
        if start + size <= self.size:
            return self.data[start:start + size].tobytes()
        # Read the ring as the kernel's pages hold it (wrapped).
        idx = (np.arange(start, start + size) & self.mask)
        return bytes(self.data[idx].tobytes())

    def consume(self, callback: SampleFn | None = None, limit: int = 0) -> int:
        """Hand committed samples to ``callback``; returns how many (or its negative return)."""
        count = 0
        cons = int(self.pos[CONS])
        while True:
            got_new = False
            prod = int(self.pos[PROD])
            while cons < prod:
                ln = self._len_at(cons)
                if ln & BPF_RINGBUF_BUSY_BIT:
                    return count
                got_new = True
                size = ln & ~BPF_RINGBUF_DISCARD_BIT
                here = cons
                cons += round_up(size + BPF_RINGBUF_HDR_SZ, 8)
                if not ln & BPF_RINGBUF_DISCARD_BIT:
                    rc = callback(self._sample(here, size)) if callback else None
                    self.pos[CONS] = cons
                    if rc is not None and rc < 0:
                        return rc
                    count += 1
                    if limit and count >= limit:
                        return count
                self.pos[CONS] = cons
            if not got_new:
                return count

    def records(self) -> Iterator[bytes]:
        """Committed samples as bytes, consuming each as it is yielded."""
        while True:
            got: list[bytes] = []
            if self.consume(got.append, limit=1) <= 0:
                return
            yield got[0]

    def __len__(self) -> int:
        """Bytes produced and not yet consumed (``BPF_RB_AVAIL_DATA``)."""
        return self.query(BPF_RB_AVAIL_DATA)

    def __iter__(self) -> Iterator[Any]:
        return self.records()

    def clear(self) -> None:
        self.pos[:] = 0
        self.lens[:] = 0

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d.update(consumer_pos=int(self.pos[CONS]), producer_pos=int(self.pos[PROD]))
        return d


class RingBuffer:
    """libbpf's ``struct ring_buffer``: several ring buffers, one callback each."""

    def __init__(self, rb: RingBuf | None = None, callback: SampleFn | None = None) -> None:
        self._rings: list[tuple[RingBuf, SampleFn | None]] = []
        if rb is not None:
            self.add(rb, callback)

    def add(self, rb: RingBuf, callback: SampleFn | None) -> None:
        self._rings.append((rb, callback))

    def consume(self) -> int:
        """Consume every ring; the total count, or the first negative callback return."""
        total = 0
        for rb, cb in self._rings:
            n = rb.consume(cb)
            if n < 0:
                return n
            total += n
        return total

    def __iter__(self) -> Iterator[bytes]:
        """Every committed sample of every ring, consumed as it is yielded."""
        for rb, _ in self._rings:
            yield from rb.records()

    def poll(self, callback: SampleFn | None = None) -> int:
        """Like :meth:`consume` (nothing blocks in user space); ``callback`` overrides."""
        if callback is None:
            return self.consume()
        total = 0
        for rb, _ in self._rings:
            n = rb.consume(callback)
            if n < 0:
                return n
            total += n
        return total
