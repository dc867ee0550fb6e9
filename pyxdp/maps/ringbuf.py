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

Native twins (the JIT): ``bpf_ringbuf_output``/``reserve``/``submit``/
``discard``/``query`` on a ring the program names are IR functions over
the same ``data``, ``pos`` and ``lens`` (the map descriptor's
``value_data``, ``hdr`` and ``index`` words); the methods here are their
reference. The producer position is stored with release order and the
consumer's loaded with acquire order, as ``ringbuf.c``'s
``smp_store_release``/``smp_load_acquire``, so a consumer reading while a
batch runs sees whole records.
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

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
from pyxdp.vm.jit.abi import SLOW, MapInfo
from pyxdp.vm.jit.ir import Text, c64, ret_if
from pyxdp.vm.jit.natives import MapNative, map_desc, register_map

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
    batch_ops: ClassVar[frozenset[str]] = frozenset()  # ringbuf_map_ops has none

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


# --- native code: the JIT's twins of the ring buffer helpers ------------------------------
# RingBuf is the reference path; native code moves the same positions (descriptor hdr =
# pos), length words (index = lens) and records (value_data = data) in place.

def _ring(f: Text, m: MapInfo) -> tuple[str, str, str]:
    """The ring's data, pos and lens pointers."""
    return map_desc(f, m, "value_data"), map_desc(f, m, "hdr"), map_desc(f, m, "index")


def _set_len(f: Text, data: str, lens: str, off: str, word: str, release: bool) -> None:
    """RingBuf._set_len: the header, then the length word consumers trust (a commit
    stores it with release order, after the sample's bytes)."""
    f.do(f"store i32 {word}, ptr {f.gep(data, off)}, align 4")
    at = f.gep(lens, f.ins(f"lshr i64 {off}, 1"))
    if release:
        f.do(f"store atomic i32 {word}, ptr {at} release, align 4")
    else:
        f.do(f"store i32 {word}, ptr {at}, align 4")


def _reserve(f: Text, m: MapInfo, size: str, fail: str) -> str:
    """RingBuf.reserve of ``size`` bytes (i64, at most RINGBUF_MAX_RECORD_SZ): the
    record's offset in ``data``; to ``fail`` when there is no room."""
    n, mask = m.max_entries, m.max_entries - 1
    data, pos, lens = _ring(f, m)
    total = f.ins(f"and i64 {f.ins(f'add i64 {size}, {BPF_RINGBUF_HDR_SZ + 7}')}, -8")
    room = f.label("room")
    f.cbr(f.ins(f"icmp ugt i64 {total}, {n}"), fail, room)
    f.at(room)
    cons = f.ins(f"load atomic i64, ptr {pos} acquire, align 8")
    prod = f.ins(f"load i64, ptr {f.gep(pos, 8 * PROD)}, align 8")
    pend0 = f.ins(f"load i64, ptr {f.gep(pos, 8 * PEND)}, align 8")
    # Move the pending position past records already committed.
    head, body, step, done = (f.label(x) for x in ("ph", "pb", "ps", "pd"))
    entry = f.cur
    f.br(head)
    f.at(head)
    pend = f.tmp()
    nxt = f.tmp()
    f.do(f"{pend} = phi i64 [ {pend0}, %{entry} ], [ {nxt}, %{step} ]")
    f.cbr(f.ins(f"icmp ult i64 {pend}, {prod}"), body, done)
    f.at(body)
    slot = f.ins(f"lshr i64 {f.ins(f'and i64 {pend}, {mask}')}, 3")
    ln = f.ins(f"zext i32 {f.at_index(lens, slot, 'i32', 4)} to i64")
    f.cbr(f.ins(f"icmp ne i64 {f.ins(f'and i64 {ln}, {BPF_RINGBUF_BUSY_BIT}')}, 0"), done,
          step)
    f.at(step)
    rec = f.ins(f"add i64 {f.ins(f'and i64 {ln}, {~BPF_RINGBUF_DISCARD_BIT & 0xFFFF_FFFF}')}, "
                f"{BPF_RINGBUF_HDR_SZ + 7}")
    f.do(f"{nxt} = add i64 {pend}, {f.ins(f'and i64 {rec}, -8')}")
    f.br(head)
    f.at(done)
    pendf = pend  # head dominates done
    f.do(f"store i64 {pendf}, ptr {f.gep(pos, 8 * PEND)}, align 8")
    new_prod = f.ins(f"add i64 {prod}, {total}")
    over_c = f.ins(f"icmp ugt i64 {f.ins(f'sub i64 {new_prod}, {cons}')}, {mask}")
    over_p = f.ins(f"icmp ugt i64 {f.ins(f'sub i64 {new_prod}, {pendf}')}, {mask}")
    ok = f.label("ok")
    f.cbr(f.ins(f"or i1 {over_c}, {over_p}"), fail, ok)
    f.at(ok)
    off = f.ins(f"and i64 {prod}, {mask}")
    end = f.ins(f"add i64 {off}, {total}")
    cross, put = f.label("cross"), f.label("put")
    f.cbr(f.ins(f"icmp ugt i64 {end}, {n}"), cross, put)
    f.at(cross)
    # The kernel's second mapping shows the ring's start past the end.
    f.memmove(f.gep(data, n), data, f.ins(f"sub i64 {end}, {n}"))
    f.br(put)
    f.at(put)
    word = f.ins(f"trunc i64 {f.ins(f'or i64 {size}, {BPF_RINGBUF_BUSY_BIT}')} to i32")
    _set_len(f, data, lens, off, word, False)
    pgoff = f.ins(f"add i64 {f.ins(f'lshr i64 {off}, 12')}, {RINGBUF_DATA_PGOFF}")
    f.do(f"store i32 {f.ins(f'trunc i64 {pgoff} to i32')}, ptr "
         f"{f.gep(data, f.ins(f'add i64 {off}, 4'))}, align 4")
    f.do(f"store atomic i64 {new_prod}, ptr {f.gep(pos, 8 * PROD)} release, align 8")
    return off


def _commit(f: Text, m: MapInfo, off: str, discard: str) -> None:
    """RingBuf._commit of the record at ``off`` (a multiple of 8 below the ring's size);
    returns SLOW (Python faults) for one that is not in flight."""
    n, mask = m.max_entries, m.max_entries - 1
    data, pos, lens = _ring(f, m)
    ln = f.ins(f"zext i32 {f.at_index(lens, f.ins(f'lshr i64 {off}, 3'), 'i32', 4)} to i64")
    cons = f.ins(f"load atomic i64, ptr {pos} acquire, align 8")
    prod = f.ins(f"load i64, ptr {f.gep(pos, 8 * PROD)}, align 8")
    idle = f.ins(f"icmp eq i64 {f.ins(f'and i64 {ln}, {BPF_RINGBUF_BUSY_BIT}')}, 0")
    ahead = f.ins(f"and i64 {f.ins(f'sub i64 {off}, {cons}')}, {mask}")
    outside = f.ins(f"icmp uge i64 {ahead}, {f.ins(f'sub i64 {prod}, {cons}')}")
    ret_if(f, f.ins(f"or i1 {idle}, {outside}"), SLOW)
    size = f.ins(f"and i64 {ln}, {BPF_RINGBUF_BUSY_BIT - 1}")
    end = f.ins(f"add i64 {off}, {f.ins(f'add i64 {size}, {BPF_RINGBUF_HDR_SZ}')}")
    fold, put = f.label("fold"), f.label("cput")
    f.cbr(f.ins(f"icmp ugt i64 {end}, {n}"), fold, put)
    f.at(fold)
    f.memmove(data, f.gep(data, n), f.ins(f"sub i64 {end}, {n}"))
    f.br(put)
    f.at(put)
    bit = f.ins(f"mul i64 {discard}, {BPF_RINGBUF_DISCARD_BIT}")
    word = f.ins(f"trunc i64 {f.ins(f'or i64 {size}, {bit}')} to i32")
    _set_len(f, data, lens, off, word, True)


def _reserve_fn(tag: str, m: MapInfo) -> str:
    """``bpf_ringbuf_reserve(map, size, flags)``: the sample's address or 0 (NULL)."""
    f = Text()
    f.at("entry")
    bad = f.ins(f"or i1 {f.ins('icmp ne i64 %r3, 0')}, "
                f"{f.ins(f'icmp ugt i64 %r2, {RINGBUF_MAX_RECORD_SZ}')}")
    ret_if(f, bad, 0)
    off = _reserve(f, m, "%r2", "null")
    f.do(f"ret i64 {f.ins(f'add i64 {off}, {c64(m.value_base + BPF_RINGBUF_HDR_SZ)}')}")
    f.at("null")
    f.do("ret i64 0")
    return f.text(f"define internal i64 @{tag}_reserve{m.slot}(ptr %ctx, i64 %r1, i64 %r2, "
                  "i64 %r3, i64 %r4, i64 %r5) nounwind")


def _output_fn(tag: str, m: MapInfo) -> str:
    """``bpf_ringbuf_output(map, data, size, flags)``: 0, -EINVAL, -EAGAIN; SLOW when
    ``data`` is not readable (Python faults)."""
    f = Text()
    f.at("entry")
    ret_if(f, f.ins(f"icmp ne i64 {f.ins(f'and i64 %r4, {c64(~3)}')}, 0"), -_errno.EINVAL)
    src = f.ins("call ptr @translate(ptr %ctx, i64 %r2, i64 %r3, i1 false)")
    ret_if(f, f.ins(f"icmp eq ptr {src}, null"), SLOW)
    ret_if(f, f.ins(f"icmp ugt i64 %r3, {RINGBUF_MAX_RECORD_SZ}"), -_errno.EAGAIN)
    off = _reserve(f, m, "%r3", "full")
    data = map_desc(f, m, "value_data")
    f.memmove(f.gep(data, f.ins(f"add i64 {off}, {BPF_RINGBUF_HDR_SZ}")), src, "%r3")
    _commit(f, m, off, "0")
    f.do("ret i64 0")
    f.at("full")
    f.do(f"ret i64 {c64(-_errno.EAGAIN)}")
    return f.text(f"define internal i64 @{tag}_output{m.slot}(ptr %ctx, i64 %r1, i64 %r2, "
                  "i64 %r3, i64 %r4, i64 %r5) nounwind")


def _commit_fn(tag: str, m: MapInfo) -> str:
    """``bpf_ringbuf_submit``/``discard`` of the sample at ``addr`` (in this ring's data):
    0; SLOW for an address that is no sample in flight (Python faults)."""
    f = Text()
    f.at("entry")
    off = f.ins(f"sub i64 %addr, {c64(m.value_base + BPF_RINGBUF_HDR_SZ)}")
    odd = f.ins(f"icmp ne i64 {f.ins(f'and i64 {off}, 7')}, 0")
    bad = f.ins(f"or i1 {f.ins(f'icmp uge i64 {off}, {m.max_entries}')}, {odd}")
    ret_if(f, bad, SLOW)
    _commit(f, m, off, "%discard")
    f.do("ret i64 0")
    return f.text(f"define internal i64 @{tag}_commit{m.slot}(ptr %ctx, i64 %addr, "
                  "i64 %discard) nounwind")


def _query_fn(tag: str, m: MapInfo) -> str:
    """``bpf_ringbuf_query(map, flags)`` (RingBuf.query)."""
    f = Text()
    f.at("entry")
    pos = map_desc(f, m, "hdr")
    cons = f.ins(f"load atomic i64, ptr {pos} acquire, align 8")
    prod = f.ins(f"load atomic i64, ptr {f.gep(pos, 8 * PROD)} acquire, align 8")
    v = "0"
    for flag, value in ((BPF_RB_AVAIL_DATA, f.ins(f"sub i64 {prod}, {cons}")),
                        (BPF_RB_RING_SIZE, str(m.max_entries)), (BPF_RB_CONS_POS, cons),
                        (BPF_RB_PROD_POS, prod)):
        v = f.ins(f"select i1 {f.ins(f'icmp eq i64 %r2, {flag}')}, i64 {value}, i64 {v}")
    f.do(f"ret i64 {v}")
    return f.text(f"define internal i64 @{tag}_query{m.slot}(ptr %ctx, i64 %r1, i64 %r2, "
                  "i64 %r3, i64 %r4, i64 %r5) nounwind")


def _describe(m: Any) -> dict[str, int]:
    return {"value_data": int(m.data.ctypes.data), "hdr": int(m.pos.ctypes.data),
            "index": int(m.lens.ctypes.data)}


register_map(BpfMapType.BPF_MAP_TYPE_RINGBUF, MapNative(
    "ringbuf", (RingBuf,), _describe,
    functions={"output": _output_fn, "reserve": _reserve_fn, "commit": _commit_fn,
               "query": _query_fn}))
