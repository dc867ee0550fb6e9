"""Perf event arrays for XDP, as ``kernel/bpf/arraymap.c`` (perf part) + ``bpf_xdp_event_output``.

``BPF_MAP_TYPE_PERF_EVENT_ARRAY`` is an fd array (key 4, value 4: a perf
event fd per slot; ``BPF_F_PRESERVE_ELEMS`` is allowed only here). From user
space an element lookup is ENOTSUPP (524), a bad fd EBADF, deleting an empty
slot ENOENT (all measured).

The XDP side, ``bpf_perf_event_output(ctx, map, flags, data, size)``
(``bpf_xdp_event_output`` -> ``__bpf_perf_event_output``): ``flags`` holds
the slot index in its low 32 bits (``BPF_F_CURRENT_CPU`` = the running CPU)
and the number of packet bytes to append in bits 32..51
(``BPF_F_CTXLEN_MASK``); other bits are EINVAL, an index past the end E2BIG,
an empty slot ENOENT, a slot whose event is bound to another CPU EOPNOTSUPP,
a full ring ENOSPC (the sample is counted as lost).

The consumer, :class:`PerfBuffer` (libbpf's ``perf_buffer``), opens one
ring of ``page_cnt`` pages per CPU and installs it at the slot of that CPU,
then hands samples to a callback as ``(cpu, data)``. ``data`` is what
libbpf gives: the ``PERF_SAMPLE_RAW`` payload, the program's bytes then the
packet bytes, zero-padded so that ``4 + len`` is a multiple of 8 (the
kernel pads the raw record). A ring is full when a record (8-byte
``perf_event_header`` + 4-byte size + payload) would leave less than one
free byte, as the kernel's ``CIRC_SPACE`` check.

Simplified: rings are Python deques of records, not mmapped perf pages; no
wakeup events, no ``PERF_RECORD_LOST`` records (lost samples are counted
and reported through ``lost_cb``).
"""

from __future__ import annotations

import errno as _errno
from collections import deque
from collections.abc import Callable, Iterable, Iterator

from pyxdp.maps.arraymap import FdArrayMap
from pyxdp.maps.base import ENOTSUPP, PAGE_SIZE, MapError, MapSpec, einval, round_up
from pyxdp.uapi.bpf import BpfMapType

__all__ = ["BPF_F_CTXLEN_MASK", "BPF_F_CURRENT_CPU", "BPF_F_INDEX_MASK", "PerfBuffer",
           "PerfEventArray", "PerfRing"]

BPF_F_INDEX_MASK = 0xFFFF_FFFF
BPF_F_CURRENT_CPU = BPF_F_INDEX_MASK
BPF_F_CTXLEN_MASK = 0xFFFFF << 32
PERF_HEADER_SIZE = 8  # struct perf_event_header


class PerfRing:
    """One perf event (``PERF_COUNT_SW_BPF_OUTPUT``) bound to ``cpu``, with its ring."""

    def __init__(self, cpu: int, page_cnt: int, event_id: int) -> None:
        if page_cnt <= 0 or page_cnt & (page_cnt - 1):
            raise einval("perf_buffer", "page_cnt must be a power of 2")
        self.cpu = cpu
        self.capacity = page_cnt * PAGE_SIZE
        self.id = event_id
        self.used = 0
        self.lost = 0
        self.records: deque[bytes] = deque()

    def write(self, raw: bytes) -> bool:
        size = PERF_HEADER_SIZE + 4 + len(raw)
        if self.capacity - self.used - 1 < size:
            self.lost += 1
            return False
        self.records.append(raw)
        self.used += size
        return True

    def read(self) -> bytes | None:
        if not self.records:
            return None
        raw = self.records.popleft()
        self.used -= PERF_HEADER_SIZE + 4 + len(raw)
        return raw


class PerfEventArray(FdArrayMap):
    """``BPF_MAP_TYPE_PERF_EVENT_ARRAY``: the record sink of ``bpf_perf_event_output``."""

    map_type = int(BpfMapType.BPF_MAP_TYPE_PERF_EVENT_ARRAY)

    def __init__(self, spec: MapSpec) -> None:
        super().__init__(spec)
        self._next_event = 1

    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        raise MapError("lookup", ENOTSUPP)

    def attach(self, index: int, ring: PerfRing) -> None:
        """Install a ring at ``index`` (what BPF_MAP_UPDATE_ELEM with a perf fd does)."""
        if not 0 <= index < self.max_entries:
            raise MapError("update", _errno.E2BIG, f"index {index} >= max_entries")
        self.objects[index] = ring
        self.ids[index] = ring.id

    def new_ring(self, cpu: int, page_cnt: int) -> PerfRing:
        ring = PerfRing(cpu, page_cnt, self._next_event)
        self._next_event += 1
        return ring

    def output(self, data: bytes, *, cpu: int, flags: int = BPF_F_CURRENT_CPU,
               ctx: bytes = b"") -> None:
        """``bpf_perf_event_output`` from a program on ``cpu``; ``ctx`` = packet bytes to append.

        The caller (the helper) takes ``ctx`` from the packet: ``(flags &
        BPF_F_CTXLEN_MASK) >> 32`` bytes of it.
        """
        if flags & ~(BPF_F_INDEX_MASK | BPF_F_CTXLEN_MASK):
            raise einval("perf_event_output", f"unknown flags {flags:#x}")
        index = flags & BPF_F_INDEX_MASK
        if index == BPF_F_CURRENT_CPU:
            index = cpu
        if index >= self.max_entries:
            raise MapError("perf_event_output", _errno.E2BIG, f"index {index}")
        ring = self.objects[index]
        if not isinstance(ring, PerfRing):
            raise MapError("perf_event_output", _errno.ENOENT, f"no perf event at {index}")
        if ring.cpu != cpu:
            raise MapError("perf_event_output", _errno.EOPNOTSUPP,
                           f"event at {index} is bound to CPU {ring.cpu}, not {cpu}")
        payload = bytes(data) + bytes(ctx)
        # The raw record's size field plus payload is padded to 8 bytes.
        padded = round_up(len(payload) + 4, 8) - 4
        if not ring.write(payload + bytes(padded - len(payload))):
            raise MapError("perf_event_output", _errno.ENOSPC, "perf ring is full")

    def try_output(self, data: bytes, *, cpu: int, flags: int = BPF_F_CURRENT_CPU,
                   ctx: bytes = b"") -> int:
        try:
            self.output(data, cpu=cpu, flags=flags, ctx=ctx)
        except MapError as e:
            return -e.errno
        return 0


SampleCb = Callable[[int, bytes], "int | None"]
LostCb = Callable[[int, int], None]


class PerfBuffer:
    """libbpf's ``perf_buffer``: a ring per CPU installed in a perf event array."""

    def __init__(self, m: PerfEventArray, page_cnt: int = 8, *,
                 cpus: Iterable[int] | None = None, sample_cb: SampleCb | None = None,
                 lost_cb: LostCb | None = None) -> None:
        self.map = m
        self.sample_cb = sample_cb
        self.lost_cb = lost_cb
        wanted = range(min(m.nr_cpus, m.max_entries)) if cpus is None else cpus
        self.rings: list[PerfRing] = []
        for cpu in wanted:
            ring = m.new_ring(cpu, page_cnt)
            m.attach(cpu, ring)
            self.rings.append(ring)
        self._lost_seen = [0] * len(self.rings)

    def poll(self, callback: SampleCb | None = None) -> int:
        """Hand every pending sample to the callback as ``(cpu, data)``; returns the count."""
        cb = callback or self.sample_cb
        count = 0
        for n, ring in enumerate(self.rings):
            if ring.lost != self._lost_seen[n]:
                if self.lost_cb is not None:
                    self.lost_cb(ring.cpu, ring.lost - self._lost_seen[n])
                self._lost_seen[n] = ring.lost
            while (raw := ring.read()) is not None:
                count += 1
                if cb is not None:
                    rc = cb(ring.cpu, raw)
                    if rc is not None and rc < 0:
                        return rc
        return count

    consume = poll

    def records(self) -> Iterator[tuple[int, bytes]]:
        """Pending samples as ``(cpu, data)``, consumed as they are yielded."""
        for ring in self.rings:
            while (raw := ring.read()) is not None:
                yield ring.cpu, raw

    @property
    def lost(self) -> int:
        return sum(r.lost for r in self.rings)
