"""Queue/stack maps, ring buffers (kernel record format) and perf event output."""

from __future__ import annotations

import errno
import struct

import pytest

from pyxdp.maps import (
    BPF_EXIST,
    BPF_NOEXIST,
    MapError,
    PerfBuffer,
    PerfEventArray,
    QueueMap,
    RingBuf,
    RingBuffer,
    StackMap,
    create_map,
)
from pyxdp.maps.perf_event_array import BPF_F_CURRENT_CPU
from pyxdp.maps.ringbuf import BPF_RINGBUF_BUSY_BIT, BPF_RINGBUF_DISCARD_BIT
from pyxdp.uapi.bpf import BpfMapType as T
from pyxdp.vm.memory import Memory

# A closed fd: past any process's fd table, and no number of pyxdp's (they count up
# from 1 per process, so a small one like 999 may name a live object late in a run).
NOT_OPEN = 0x7FFF_FFF0


def u32(x: int) -> bytes:
    return struct.pack("<I", x)


def code(fn: object, *args: object) -> int:
    try:
        fn(*args)  # type: ignore[operator]
    except MapError as e:
        return e.errno
    return 0


def test_queue_measured() -> None:
    q = create_map(T.BPF_MAP_TYPE_QUEUE, 0, 4, 2)
    assert isinstance(q, QueueMap)
    assert q.lookup(None) is None and q.lookup_and_delete(None) is None
    assert code(q.update, None, u32(1), BPF_NOEXIST) == errno.EINVAL
    assert code(q.update, None, u32(1), 3) == errno.EINVAL
    assert code(q.update, None, u32(1), 4) == errno.EINVAL
    q.update(None, u32(1))
    q.push(u32(2))
    assert code(q.push, u32(3)) == errno.E2BIG
    assert q.try_push(u32(3)) == -errno.E2BIG
    q.push(u32(3), BPF_EXIST)  # overwrites the oldest
    assert q.contents() == [u32(2), u32(3)] and len(q) == 2
    assert q.peek() == u32(2) and q.lookup(None) == u32(2)
    assert q.pop() == u32(2) and q.lookup_and_delete(None) == u32(3)
    assert q.try_pop() == (-errno.ENOENT, None)
    assert code(q.delete, None) == errno.EINVAL
    assert code(q.get_next_key, None) == errno.EINVAL
    assert code(q.lookup, None, 4) == errno.EINVAL
    assert code(q.lookup_and_delete, None, 4) == errno.EINVAL


def test_stack_measured_and_wraparound() -> None:
    s = create_map(T.BPF_MAP_TYPE_STACK, 0, 4, 2)
    assert isinstance(s, StackMap)
    s.push(u32(1))
    s.push(u32(2))
    s.push(u32(3), BPF_EXIST)  # drops the bottom element (1)
    assert s.pop() == u32(3) and s.pop() == u32(2) and s.pop() is None
    q = create_map(T.BPF_MAP_TYPE_QUEUE, 0, 4, 3)
    assert isinstance(q, QueueMap)
    out = []
    for i in range(20):  # wraps the 4-slot ring several times
        q.push(u32(i))
        if len(q) == 3:
            out.append(q.pop())
    assert out == [u32(i) for i in range(18)]
    assert list(q) == [u32(18), u32(19)] and q.contents() == [u32(18), u32(19)]
    q.append(u32(20))
    assert q.popleft() == u32(18)
    q.clear()
    with pytest.raises(IndexError):
        q.popleft()


def _walk(rb: RingBuf) -> list[tuple[int, int, int]]:
    """(position, header len, pg_off) of every record from the consumer position."""
    out = []
    pos = int(rb.pos[0])
    while pos < int(rb.pos[1]):
        off = pos & rb.mask
        ln, pg = struct.unpack_from("<II", rb.data.tobytes(), off)
        out.append((pos, ln, pg))
        pos += ((ln & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT)) + 8 + 7) & ~7
    return out


def test_ringbuf_records_headers_and_discard() -> None:
    rb = create_map(T.BPF_MAP_TYPE_RINGBUF, 0, 0, 4096)
    assert isinstance(rb, RingBuf)
    for op in (rb.lookup, rb.delete, rb.get_next_key):
        assert code(op, None) == 524
    assert code(rb.update, None, b"") == 524
    a = rb.reserve(5)
    b = rb.reserve(16)
    assert a == rb.value_region().base + 8 and b == a + 16
    assert rb.reserve(1, flags=1) == 0
    mem = Memory()
    mem.add(rb.value_region())
    mem.write(a, b"hello")
    mem.write(b, b"x" * 16)
    assert _walk(rb) == [(0, 5 | BPF_RINGBUF_BUSY_BIT, 3), (16, 16 | BPF_RINGBUF_BUSY_BIT, 3)]
    got: list[bytes] = []
    assert rb.consume(got.append) == 0  # the first record is still busy
    rb.discard(b)
    assert rb.consume(got.append) == 0
    rb.submit(a)
    assert _walk(rb) == [(0, 5, 3), (16, 16 | BPF_RINGBUF_DISCARD_BIT, 3)]
    assert rb.consume(got.append) == 1 and got == [b"hello"]
    assert rb.query(0) == 0 and rb.query(1) == 4096 and rb.query(2) == rb.query(3) == 40
    with pytest.raises(MapError):
        rb.submit(a)  # no longer reserved


def test_ringbuf_capacity_pg_off_and_wrap() -> None:
    rb = create_map(T.BPF_MAP_TYPE_RINGBUF, 0, 0, 8192)
    assert isinstance(rb, RingBuf)
    n = 0
    while rb.try_output(b"r" * 16) == 0:
        n += 1
    # 24-byte records: at most size - 8 bytes in flight (measured 4088 of 4096).
    assert n == (8192 - 8) // 24 and rb.try_output(b"r" * 16) == -errno.EAGAIN
    assert _walk(rb)[-1][2] == 3 + (_walk(rb)[-1][0] >> 12)
    assert code(rb.output, b"x", 8) == errno.EINVAL
    samples = list(rb.records())
    assert len(samples) == n and samples[0] == b"r" * 16
    # The next record starts near the end and crosses it.
    big = bytes(range(256)) * 4
    rb.output(big)
    (pos, ln, _), = _walk(rb)
    assert (pos & rb.mask) + 8 + ln > 8192
    assert bytes(rb.data[:(pos & rb.mask) + 8 + ln - 8192]) == big[8192 - (pos & rb.mask) - 8:]
    seen: list[bytes] = []
    ring = RingBuffer(rb, seen.append)
    assert ring.poll() == 1 and seen == [big]
    rb.output(b"one")
    assert list(ring) == [b"one"]
    rb.output(b"stop")
    rb.output(b"more")
    assert rb.consume(lambda s: -7) == -7 and rb.consume() == 1


def test_perf_event_output() -> None:
    pe = create_map(T.BPF_MAP_TYPE_PERF_EVENT_ARRAY, 4, 4, 4, nr_cpus=2)
    assert isinstance(pe, PerfEventArray)
    assert code(pe.lookup, u32(0)) == 524
    assert code(pe.update, u32(0), u32(NOT_OPEN)) == errno.EBADF
    assert code(pe.delete, u32(0)) == errno.ENOENT
    assert pe.try_output(b"abc", cpu=0) == -errno.ENOENT
    lost: list[tuple[int, int]] = []
    pb = PerfBuffer(pe, page_cnt=1, lost_cb=lambda cpu, n: lost.append((cpu, n)))
    assert len(pe) == 2
    pe.output(b"abcde", cpu=1)
    pe.output(b"ab", cpu=0, flags=0, ctx=b"\xff" * 6)
    assert pe.try_output(b"x", cpu=0, flags=1) == -errno.EOPNOTSUPP
    assert pe.try_output(b"x", cpu=0, flags=7) == -errno.E2BIG
    assert pe.try_output(b"x", cpu=0, flags=1 << 60) == -errno.EINVAL
    assert pe.try_output(b"x", cpu=3, flags=BPF_F_CURRENT_CPU) == -errno.ENOENT
    got: list[tuple[int, bytes]] = []
    assert pb.poll(lambda cpu, data: got.append((cpu, data))) == 2
    # Raw samples are padded so that 4 + size is a multiple of 8.
    assert got == [(0, b"ab" + b"\xff" * 6 + bytes(4)), (1, b"abcde" + bytes(7))]
    n = 0
    while pe.try_output(b"y" * 20, cpu=0) == 0:
        n += 1
    assert n == (4096 - 8) // 32 and pb.lost == 1  # 8 header + 4 size + 20 payload
    assert pe.try_output(b"z", cpu=0) == -errno.ENOSPC and pb.lost == 2
    assert len(list(pb.records())) == n and pb.poll() == 0 and lost == []
    # As perf_output_begin: the next sample that fits follows a PERF_RECORD_LOST record
    # (header, the event's id, the count), which the consumer reports.
    ring = pb.rings[0]
    head = int(ring.ctl[0])
    pe.output(b"after", cpu=0)
    lost_rec = ring._get(head, 24)
    assert lost_rec[:8] == struct.pack("<IHH", 2, 0, 24)
    assert struct.unpack("<QQ", lost_rec[8:]) == (ring.id, 2)
    assert ring._get(head + 24, 12) == struct.pack("<IHHI", 9, 1, 24, 12)
    got = []
    assert pb.poll(lambda cpu, data: got.append(data)) == 1
    assert lost == [(0, 2)] and got == [b"after" + bytes(7)] and int(ring.ctl[2]) == 0
