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
kernel pads the raw record).

A ring is the perf mmap data area as ``kernel/events/ring_buffer.c`` fills
it (:class:`PerfRing`): ``data`` ``uint8[page_cnt * PAGE_SIZE]`` and
``ctl`` ``uint64[4]`` = ``data_head``, ``data_tail`` (the consumer's), the
samples lost since the last lost record (``rb->lost``) and lost in all
(pyxdp's count, :attr:`PerfBuffer.lost`). Records wrap byte-wise at the end
of ``data``. A sample is a ``perf_event_header`` (type
``PERF_RECORD_SAMPLE``, misc ``PERF_RECORD_MISC_KERNEL``, size) then the
raw size (u32) and payload. An output that would leave less than one free
byte (``CIRC_SPACE``) is lost: ENOSPC and the lost count grows; the next
output that fits writes a ``PERF_RECORD_LOST`` record (header, event id,
count: the attributes libbpf sets add no sample id) before its sample, as
``perf_output_begin`` does, and the consumer reports it through ``lost_cb``.

Native twin (the JIT): ``bpf_perf_event_output`` on an array the program
names is IR over the same rings, found through the map's ``slots`` table
(per index: data and ctl host addresses, CPU, event id, size; 0 where no
ring is installed), which :meth:`PerfEventArray.attach`, ``delete`` and
``clear`` keep with ``objects``; :meth:`PerfEventArray.output` is the
reference path. ``data_head`` is stored with release order and
``data_tail`` loaded with acquire order, as the kernel and libbpf do.

Simplified: no wakeup events, no overwrite (backward) rings.
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar

import numpy as np

from pyxdp.maps.arraymap import FdArrayMap
from pyxdp.maps.base import ENOTSUPP, PAGE_SIZE, MapError, MapSpec, einval, round_up
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.vm.jit.abi import NF_RUNCTX, SLOW, MapInfo
from pyxdp.vm.jit.ir import Text, c64, ret_if
from pyxdp.vm.jit.natives import MapNative, map_desc, register_map

__all__ = ["BPF_F_CTXLEN_MASK", "BPF_F_CURRENT_CPU", "BPF_F_INDEX_MASK", "PerfBuffer",
           "PerfEventArray", "PerfRing"]

BPF_F_INDEX_MASK = 0xFFFF_FFFF
BPF_F_CURRENT_CPU = BPF_F_INDEX_MASK
BPF_F_CTXLEN_MASK = 0xFFFFF << 32
PERF_HEADER_SIZE = 8  # struct perf_event_header
PERF_RECORD_LOST = 2
PERF_RECORD_SAMPLE = 9
PERF_RECORD_MISC_KERNEL = 1
LOST_RECORD_SIZE = PERF_HEADER_SIZE + 16  # header, u64 id, u64 lost
HEAD, TAIL, LOST, LOST_TOTAL = 0, 1, 2, 3
# PerfEventArray.slots words per index.
SLOT_DATA, SLOT_CTL, SLOT_CPU, SLOT_ID, SLOT_SIZE = range(5)
SLOT_WORDS = 5


def _header(rtype: int, misc: int, size: int) -> int:
    """A perf_event_header as one little-endian u64: u32 type, u16 misc, u16 size."""
    return rtype | misc << 32 | (size & 0xFFFF) << 48


class PerfRing:
    """One perf event (``PERF_COUNT_SW_BPF_OUTPUT``) bound to ``cpu``, with its ring."""

    def __init__(self, cpu: int, page_cnt: int, event_id: int) -> None:
        if page_cnt <= 0 or page_cnt & (page_cnt - 1):
            raise einval("perf_buffer", "page_cnt must be a power of 2")
        self.cpu = cpu
        self.capacity = page_cnt * PAGE_SIZE
        self.id = event_id
        self.data = np.zeros(self.capacity, np.uint8)
        self.ctl = np.zeros(4, np.uint64)

    @property
    def lost(self) -> int:
        """Samples lost in all."""
        return int(self.ctl[LOST_TOTAL])

    def _put(self, pos: int, raw: bytes) -> None:
        off = pos & (self.capacity - 1)
        first = min(len(raw), self.capacity - off)
        self.data[off:off + first] = np.frombuffer(raw[:first], np.uint8)
        self.data[:len(raw) - first] = np.frombuffer(raw[first:], np.uint8)

    def _get(self, pos: int, size: int) -> bytes:
        off = pos & (self.capacity - 1)
        first = min(size, self.capacity - off)
        return self.data[off:off + first].tobytes() + self.data[:size - first].tobytes()

    def write(self, raw: bytes) -> bool:
        """``perf_output_begin`` + the sample (``raw``: the padded payload); False: lost."""
        size = PERF_HEADER_SIZE + 4 + len(raw)
        lost = int(self.ctl[LOST])
        total = size + (LOST_RECORD_SIZE if lost else 0)
        head, tail = int(self.ctl[HEAD]), int(self.ctl[TAIL])
        if (tail - head - 1) & (self.capacity - 1) < total:  # CIRC_SPACE
            self.ctl[LOST] += 1
            self.ctl[LOST_TOTAL] += 1
            return False
        pos = head
        if lost:
            self._put(pos, (_header(PERF_RECORD_LOST, 0, LOST_RECORD_SIZE) | self.id << 64
                            | lost << 128).to_bytes(LOST_RECORD_SIZE, "little"))
            self.ctl[LOST] = 0
            pos += LOST_RECORD_SIZE
        self._put(pos, (_header(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_KERNEL, size)
                        | len(raw) << 64).to_bytes(12, "little") + raw)
        self.ctl[HEAD] = head + total
        return True

    def read(self) -> tuple[int, bytes | int] | None:
        """The next record, consumed: ``(PERF_RECORD_SAMPLE, raw payload)`` or
        ``(PERF_RECORD_LOST, count)``; None when there is none."""
        tail = int(self.ctl[TAIL])
        if tail == int(self.ctl[HEAD]):
            return None
        hdr = int.from_bytes(self._get(tail, PERF_HEADER_SIZE), "little")
        rtype, size = hdr & 0xFFFF_FFFF, hdr >> 48
        body = self._get(tail + PERF_HEADER_SIZE, size - PERF_HEADER_SIZE)
        self.ctl[TAIL] = tail + size
        if rtype == PERF_RECORD_LOST:
            return rtype, int.from_bytes(body[8:16], "little")
        n = int.from_bytes(body[:4], "little")
        return rtype, body[4:4 + n]


class PerfEventArray(FdArrayMap):
    """``BPF_MAP_TYPE_PERF_EVENT_ARRAY``: the record sink of ``bpf_perf_event_output``."""

    map_type = int(BpfMapType.BPF_MAP_TYPE_PERF_EVENT_ARRAY)
    batch_ops: ClassVar[frozenset[str]] = frozenset()  # perf_event_array_map_ops: none

    def __init__(self, spec: MapSpec) -> None:
        super().__init__(spec)
        self._next_event = 1
        # The rings as native code finds them (see the module docstring).
        self.slots = np.zeros((self.max_entries, SLOT_WORDS), np.uint64)

    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        raise MapError("lookup", ENOTSUPP)

    def attach(self, index: int, ring: PerfRing) -> None:
        """Install a ring at ``index`` (what BPF_MAP_UPDATE_ELEM with a perf fd does)."""
        if not 0 <= index < self.max_entries:
            raise MapError("update", _errno.E2BIG, f"index {index} >= max_entries")
        self.objects[index] = ring
        self.ids[index] = ring.id
        self.slots[index] = (ring.data.ctypes.data, ring.ctl.ctypes.data, ring.cpu, ring.id,
                             ring.capacity)

    def delete(self, key: bytes | None) -> None:
        super().delete(key)
        self._sync_slots()

    def clear(self) -> None:
        super().clear()
        self._sync_slots()

    def _sync_slots(self) -> None:
        self.slots[self.ids == 0] = 0  # (ring ids start at 1: 0 is an empty slot)

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
        ring = self.objects.get(index)
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

    def poll(self, callback: SampleCb | None = None) -> int:
        """Hand every pending sample to the callback as ``(cpu, data)`` and every lost
        record's count to ``lost_cb``, in ring order; returns the sample count."""
        cb = callback or self.sample_cb
        count = 0
        for ring in self.rings:
            while (rec := ring.read()) is not None:
                rtype, what = rec
                if isinstance(what, int):
                    if self.lost_cb is not None:
                        self.lost_cb(ring.cpu, what)
                    continue
                count += 1
                if cb is not None:
                    rc = cb(ring.cpu, what)
                    if rc is not None and rc < 0:
                        return rc
        return count

    consume = poll

    def records(self) -> Iterator[tuple[int, bytes]]:
        """Pending samples as ``(cpu, data)``, consumed as they are yielded (lost records
        are consumed and skipped)."""
        for ring in self.rings:
            while (rec := ring.read()) is not None:
                if isinstance(rec[1], bytes):
                    yield ring.cpu, rec[1]

    @property
    def lost(self) -> int:
        """Samples lost in all (reported or not yet)."""
        return sum(r.lost for r in self.rings)


# --- native code: the JIT's twin of bpf_perf_event_output ---------------------------------
# PerfEventArray.output (with the XDP helper's checks before it) is the reference path;
# native code writes the same records into the same rings, found through ``slots`` (the
# descriptor's ``entries`` word).

def _put(f: Text, ring: str, cap: int | str, pos: str, src: str, n: str | int) -> None:
    """PerfRing._put: ``n`` bytes at ring position ``pos``, wrapping at the end."""
    off = f.ins(f"and i64 {pos}, {f.ins(f'sub i64 {cap}, 1')}")
    room = f.ins(f"sub i64 {cap}, {off}")
    first = f.ins(f"select i1 {f.ins(f'icmp ult i64 {n}, {room}')}, i64 {n}, i64 {room}")
    f.memmove(f.gep(ring, off), src, first)
    f.memmove(ring, f.gep(src, first), f.ins(f"sub i64 {n}, {first}"))


def _output_fn(tag: str, m: MapInfo) -> str:
    """``bpf_xdp_event_output(ctx, map, flags, data, size)`` (the call site has checked
    ``ctx``): 0 or -errno as the Python helper and :meth:`PerfEventArray.output`; SLOW
    outside a run context, for a multi-buffer packet (the Python helper copies its frags) and where
    ``data`` is unreadable."""
    f = Text()
    f.at("entry")
    f.lines.append("  %hdr = alloca [3 x i64], align 8")
    frags = f.cget("%ctx", "x_frags")
    ret_if(f, f.ins(f"or i1 {f.ins(f'icmp ne i64 {frags}, 0')}, "
                    f"{f.ins(f'xor i1 {f.flag(NF_RUNCTX)}, true')}"), SLOW)
    bad = f.ins(f"and i64 %r3, {c64(~(BPF_F_INDEX_MASK | BPF_F_CTXLEN_MASK))}")
    ret_if(f, f.ins(f"icmp ne i64 {bad}, 0"), -_errno.EINVAL)
    ctx_len = f.ins("lshr i64 %r3, 32")
    data, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
    ret_if(f, f.ins(f"icmp ugt i64 {ctx_len}, {f.ins(f'sub i64 {end}, {data}')}"),
           -_errno.EFAULT)
    src = f.ins("call ptr @translate(ptr %ctx, i64 %r4, i64 %r5, i1 false)")
    ret_if(f, f.ins(f"icmp eq ptr {src}, null"), SLOW)
    cpu = f.cget("%ctx", "cpu")
    index = f.ins(f"and i64 %r3, {BPF_F_INDEX_MASK}")
    index = f.ins(f"select i1 {f.ins(f'icmp eq i64 {index}, {BPF_F_CURRENT_CPU}')}, "
                  f"i64 {cpu}, i64 {index}")
    ret_if(f, f.ins(f"icmp uge i64 {index}, {m.max_entries}"), -_errno.E2BIG)
    row = f.gep(map_desc(f, m, "entries"), f.ins(f"mul i64 {index}, {8 * SLOT_WORDS}"))
    ring = f.word(row, SLOT_DATA, "ptr", "")
    ret_if(f, f.ins(f"icmp eq ptr {ring}, null"), -_errno.ENOENT)
    ret_if(f, f.ins(f"icmp ne i64 {f.word(row, SLOT_CPU, 'i64', '')}, {cpu}"),
           -_errno.EOPNOTSUPP)
    ctl = f.word(row, SLOT_CTL, "ptr", "")
    cap = f.word(row, SLOT_SIZE, "i64", "")
    payload = f.ins(f"add i64 %r5, {ctx_len}")
    rounded = f.ins(f"and i64 {f.ins(f'add i64 {payload}, 11')}, -8")
    padded = f.ins(f"sub i64 {rounded}, 4")
    size = f.ins(f"add i64 {padded}, {PERF_HEADER_SIZE + 4}")
    lost = f.ins(f"load i64, ptr {f.gep(ctl, 8 * LOST)}, align 8")
    had_lost = f.ins(f"icmp ne i64 {lost}, 0")
    total = f.ins(f"add i64 {size}, "
                  f"{f.ins(f'select i1 {had_lost}, i64 {LOST_RECORD_SIZE}, i64 0')}")
    head = f.ins(f"load i64, ptr {ctl}, align 8")
    tail = f.ins(f"load atomic i64, ptr {f.gep(ctl, 8 * TAIL)} acquire, align 8")
    ahead = f.ins(f"sub i64 {tail}, {f.ins(f'add i64 {head}, 1')}")
    space = f.ins(f"and i64 {ahead}, {f.ins(f'sub i64 {cap}, 1')}")
    full, room = f.label("full"), f.label("room")
    f.cbr(f.ins(f"icmp ult i64 {space}, {total}"), full, room)
    f.at(full)
    for counter in (LOST, LOST_TOTAL):
        at = f.gep(ctl, 8 * counter)
        old = f.ins(f"load i64, ptr {at}, align 8")
        f.do(f"store i64 {f.ins(f'add i64 {old}, 1')}, ptr {at}, align 8")
    f.do(f"ret i64 {c64(-_errno.ENOSPC)}")
    f.at(room)
    put_lost, sample = f.label("lostrec"), f.label("sample")
    f.cbr(had_lost, put_lost, sample)
    f.at(put_lost)
    # perf_output_begin: the lost record first, then rb->lost starts again
    f.do(f"store i64 {_header(PERF_RECORD_LOST, 0, LOST_RECORD_SIZE)}, ptr %hdr, align 8")
    f.do(f"store i64 {f.word(row, SLOT_ID, 'i64', '')}, ptr {f.gep('%hdr', 8)}, align 8")
    f.do(f"store i64 {lost}, ptr {f.gep('%hdr', 16)}, align 8")
    _put(f, ring, cap, head, "%hdr", LOST_RECORD_SIZE)
    f.do(f"store i64 0, ptr {f.gep(ctl, 8 * LOST)}, align 8")
    f.br(sample)
    f.at(sample)
    pos = f.ins(f"add i64 {head}, {f.ins(f'sub i64 {total}, {size}')}")
    word = f.ins(f"or i64 {f.ins(f'shl i64 {size}, 48')}, "
                 f"{_header(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_KERNEL, 0)}")
    f.do(f"store i64 {word}, ptr %hdr, align 8")
    f.do(f"store i32 {f.ins(f'trunc i64 {padded} to i32')}, ptr {f.gep('%hdr', 8)}, align 8")
    _put(f, ring, cap, pos, "%hdr", PERF_HEADER_SIZE + 4)
    pos = f.ins(f"add i64 {pos}, {PERF_HEADER_SIZE + 4}")
    _put(f, ring, cap, pos, src, "%r5")
    pos = f.ins(f"add i64 {pos}, %r5")
    pkt = f.gep(f.cget("%ctx", "x_frame", "ptr"), data)
    _put(f, ring, cap, pos, pkt, ctx_len)
    pos = f.ins(f"add i64 {pos}, {ctx_len}")
    f.do(f"store i64 0, ptr {f.gep('%hdr', 16)}, align 8")
    _put(f, ring, cap, pos, f.gep("%hdr", 16), f.ins(f"sub i64 {padded}, {payload}"))
    f.do(f"store atomic i64 {f.ins(f'add i64 {head}, {total}')}, ptr {ctl} release, align 8")
    f.do("ret i64 0")
    return f.text(f"define internal i64 @{tag}_perf_output{m.slot}(ptr %ctx, i64 %r1, "
                  "i64 %r2, i64 %r3, i64 %r4, i64 %r5) nounwind")


def _describe(m: Any) -> dict[str, int]:
    return {"entries": int(m.slots.ctypes.data)}


register_map(BpfMapType.BPF_MAP_TYPE_PERF_EVENT_ARRAY, MapNative(
    "perf", (PerfEventArray,), _describe, functions={"perf_output": _output_fn}))
