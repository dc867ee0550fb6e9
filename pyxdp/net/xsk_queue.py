"""AF_XDP rings as ``net/xdp/xsk_queue.h`` has them: the shared layout and the kernel's side
(and ``xsk_queue.c``'s ring memory, :class:`RingMem`).

A ring lives in any writable buffer: the ``mmap`` of a kernel ring, a
``multiprocessing.shared_memory.SharedMemory``, a ``bytearray``. Its layout
is ``struct xdp_ring_offset``: a u32 producer index, a u32 consumer index,
a u32 flags word (``XDP_RING_NEED_WAKEUP``) and the array of entries, u64
addresses (fill and completion rings) or 16-byte ``struct xdp_desc`` (rx and
tx rings). Linux 6.18 on x86-64 reports producer 0, consumer 128, flags 196,
desc 320 for every ring (measured), and pyxdp's own rings use that layout.

The protocol is single producer / single consumer with free-running u32
indices (they wrap at 2**32; ``mask = entries - 1``, entries a power of
two). Each side keeps cached copies of both indices and touches the shared
words only when its cache runs dry or when it publishes. :class:`Ring` is
the view both sides share; this module has the kernel's side of ``struct
xsk_queue`` for a datapath written in Python (the user's side, libxdp's
``xsk_ring_prod``/``xsk_ring_cons``, is built over :class:`Ring` by the
AF_XDP user API above ``net``):

* :class:`KernelRingCons`: the kernel consumes fill and tx with a *lazy*
  consumer index (published only when the cache is refreshed,
  ``__xskq_cons_release`` before ``__xskq_cons_peek``, or on
  :meth:`KernelRingCons.release_publish`);
* :class:`KernelRingProd`: it produces rx and completion entries that become
  visible only at :meth:`KernelRingProd.submit` (the flush, ``xsk_flush``).

Memory ordering, the kernel's A/B/C/D pairs of ``xsk_queue.h``: entries are
written, then the producer index stored (B, release); the consumer loads
the producer (C, acquire), then reads entries, then stores its consumer
index (D, release); the producer reads the consumer (A) before overwriting
slots. Each index word is a numpy ``uint32`` view, so a store is one
aligned 4-byte write and a load one aligned 4-byte read, and every numpy
statement finishes before the next begins. On x86-64 (TSO) stores are not
reordered with earlier stores nor loads with earlier loads, so a plain store
of an index after the data writes is a release and a plain load before the
data reads an acquire. Weakly ordered CPUs (arm64) would need real barriers:
this module relies on TSO, and the user API's Linux backend refuses other
machines.

Batch operations are numpy slice copies: one slice, or two around the end
of the ring; no Python loop per entry. Simplified against the kernel:
multi-buffer (``XDP_PKT_CONTD``) chains are not rewound as a whole when one
fragment is invalid; each descriptor is judged alone.
"""

from __future__ import annotations

import errno
import mmap
from collections.abc import Callable
from typing import Final, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from pyxdp.args import Array, checked, short
from pyxdp.errors import BadArgument, KernelError
from pyxdp.net.record import Alias, Field, Record
from pyxdp.uapi.if_xdp import (
    XDP_DESC_DTYPE,
    XDP_RING_NEED_WAKEUP,
    XDP_RING_OFFSET_DEFAULT,
    XdpRingOffset,
)

__all__ = [
    "ADDR_DTYPE",
    "DESC_DTYPE",
    "KERNEL",
    "RX_RING",
    "U32_MASK",
    "USER",
    "Q_CC",
    "Q_CONS",
    "Q_CP",
    "Q_EMPTY",
    "Q_FLAGS",
    "Q_INVALID",
    "Q_KOWN",
    "Q_MASK",
    "Q_PROD",
    "Q_PUB",
    "Q_RING",
    "Q_SIZE",
    "Q_SLOTS",
    "KernelRingCons",
    "KernelRingProd",
    "Ring",
    "RingKind",
    "RingMem",
    "XdpRingOffset",
    "XskQueueState",
    "ring_bytes",
    "ring_side",
    "ring_view",
]

U32_MASK: Final = 0xFFFF_FFFF
# Who holds a UMEM chunk, as a buffer pool's datapath side tracks it (``kown``).
USER: Final = 0  # the user's: it may post it to the fill ring
KERNEL: Final = 1  # taken from the fill ring: in a buffer, the free list or a frame
RX_RING: Final = 2  # in an rx descriptor the user has not consumed yet
ADDR_DTYPE: Final = np.dtype("=u8")
DESC_DTYPE: Final = XDP_DESC_DTYPE

RingKind = Literal["addr", "desc"]
"""``addr``: u64 entries (fill, completion); ``desc``: ``struct xdp_desc`` (rx, tx)."""

U64Array = npt.NDArray[np.uint64]
U32Array = npt.NDArray[np.uint32]
Buffer = bytearray | memoryview | mmap.mmap  # any writable buffer
_R = TypeVar("_R", bound="Ring")


def entry_size(kind: RingKind) -> int:
    return ADDR_DTYPE.itemsize if kind == "addr" else DESC_DTYPE.itemsize


def ring_bytes(entries: int, kind: RingKind,
               offsets: XdpRingOffset = XDP_RING_OFFSET_DEFAULT) -> int:
    """Bytes a ring of ``entries`` needs: ``desc + entries * entry size`` (the mmap size)."""
    return offsets.desc + entries * entry_size(kind)


def _check_entries(entries: int) -> None:
    if entries <= 0 or entries & (entries - 1) or entries > 1 << 31:
        raise ValueError(f"ring size {entries} is not a power of two in [1, 2**31]")


class XskQueueState(Record):
    """One side's private part of a ring (``struct xsk_queue``): its cached indices,
    the kernel's counters, and the addresses of the shared memory, so that native
    code (:mod:`pyxdp.net.xsk_native`) runs the ring from this record in place."""

    cached_prod = Field()
    cached_cons = Field()
    published = Field()  # the user's side: the index it last stored (its only writer)
    mask = Field()
    invalid_descs = Field()  # the kernel consuming: entries it refused
    queue_empty_descs = Field()  # ... and reads that found the ring empty
    producer_at = Field()  # addresses of the shared words and the entries (0: unmapped)
    consumer_at = Field()
    flags_at = Field()
    ring_at = Field()
    slots_at = Field()  # the kernel producing: the chunk each slot carries (int64)
    kown_at = Field()  # ... and the owners of those chunks it keeps in step (0: none)


# XskQueueState's slots as module-level integers (numba reads them as constants): the
# one definition every native user of a ring record imports.
Q_SIZE: Final = len(XskQueueState.FIELDS)
Q_CP: Final = XskQueueState.index("cached_prod")
Q_CC: Final = XskQueueState.index("cached_cons")
Q_PUB: Final = XskQueueState.index("published")
Q_MASK: Final = XskQueueState.index("mask")
Q_INVALID: Final = XskQueueState.index("invalid_descs")
Q_EMPTY: Final = XskQueueState.index("queue_empty_descs")
Q_PROD: Final = XskQueueState.index("producer_at")
Q_CONS: Final = XskQueueState.index("consumer_at")
Q_FLAGS: Final = XskQueueState.index("flags_at")
Q_RING: Final = XskQueueState.index("ring_at")
Q_SLOTS: Final = XskQueueState.index("slots_at")
Q_KOWN: Final = XskQueueState.index("kown_at")


class Ring:
    """A view of one ring's shared memory: index words, flags word, entries.

    ``buf`` must export a writable buffer of at least ``base +
    ring_bytes(entries, kind, offsets)`` bytes. The object holds numpy views
    of ``buf`` until :meth:`close` (an ``mmap`` cannot be closed before).
    ``cached_prod``/``cached_cons`` are this side's private copies, kept in
    its :class:`XskQueueState` ``q`` with the addresses native code uses.
    """

    cached_prod = Alias(XskQueueState, "cached_prod", via="q")
    cached_cons = Alias(XskQueueState, "cached_cons", via="q")

    def __init__(self, buf: Buffer, entries: int, kind: RingKind, *,
                 offsets: XdpRingOffset = XDP_RING_OFFSET_DEFAULT, base: int = 0) -> None:
        _check_entries(entries)
        self.size = entries
        self.mask = entries - 1
        self.kind: RingKind = kind
        self.offsets = offsets
        self._producer: U32Array = np.frombuffer(buf, np.uint32, 1, base + offsets.producer)
        self._consumer: U32Array = np.frombuffer(buf, np.uint32, 1, base + offsets.consumer)
        self._flags: U32Array = np.frombuffer(buf, np.uint32, 1, base + offsets.flags)
        dtype = ADDR_DTYPE if kind == "addr" else DESC_DTYPE
        self.entries: np.ndarray = np.frombuffer(buf, dtype, entries, base + offsets.desc)
        if kind == "desc":
            self._addr: U64Array = self.entries["addr"]
            self._len: U32Array = self.entries["len"]
            self._opt: U32Array = self.entries["options"]
        else:
            self._addr = self.entries
        self.q = XskQueueState(
            cached_prod=int(self._producer[0]), cached_cons=int(self._consumer[0]),
            mask=self.mask, producer_at=self._producer.ctypes.data,
            consumer_at=self._consumer.ctypes.data, flags_at=self._flags.ctypes.data,
            ring_at=self.entries.ctypes.data)

    # -- the shared words ---------------------------------------------------------

    @property
    def producer(self) -> int:
        """The shared producer index (one 4-byte load)."""
        return int(self._producer[0])

    @property
    def consumer(self) -> int:
        """The shared consumer index (one 4-byte load)."""
        return int(self._consumer[0])

    @property
    def flags(self) -> int:
        return int(self._flags[0])

    def needs_wakeup(self) -> bool:
        """``XDP_RING_NEED_WAKEUP`` is set: the other side sleeps until kicked."""
        return bool(self._flags[0] & XDP_RING_NEED_WAKEUP)

    @checked(bits=(0, U32_MASK))
    def set_flags(self, bits: int) -> None:
        self._flags[0] = self._flags[0] | bits

    @checked(bits=(0, U32_MASK))
    def clear_flags(self, bits: int) -> None:
        self._flags[0] = self._flags[0] & ~np.uint32(bits)

    def window(self) -> tuple[int, int]:
        """``(consumer, count)``: the entries published and not yet consumed (a snapshot)."""
        cons = int(self._consumer[0])
        return cons, (int(self._producer[0]) - cons) & U32_MASK

    def _store_producer(self, value: int) -> None:
        self._producer[0] = value & U32_MASK  # B: after the entry writes

    def _store_consumer(self, value: int) -> None:
        self._consumer[0] = value & U32_MASK  # D: after the entry reads

    # -- entries (idx are free-running indices) -------------------------------------

    def _spans(self, idx: int, k: int) -> tuple[int, int]:
        if k > self.size:
            raise BadArgument(f"{k} entries of a ring of {self.size}")
        start = idx & self.mask
        return start, min(k, self.size - start)

    @checked(idx=(0, U32_MASK), k=(0, U32_MASK))
    def read_addrs(self, idx: int, k: int) -> U64Array:
        """A copy of the addresses of ``k`` entries from ``idx`` (addr ring: the entries)."""
        start, first = self._spans(idx, k)
        if first == k:
            return self._addr[start:start + k].copy()
        return np.concatenate((self._addr[start:], self._addr[:k - first]))

    @checked(idx=(0, U32_MASK), k=(0, U32_MASK))
    def read(self, idx: int, k: int) -> np.ndarray:
        """A copy of ``k`` entries from ``idx`` (u64 or ``XDP_DESC_DTYPE`` records)."""
        start, first = self._spans(idx, k)
        if first == k:
            return self.entries[start:start + k].copy()
        return np.concatenate((self.entries[start:], self.entries[:k - first]))

    @checked(idx=(0, U32_MASK), k=(0, U32_MASK))
    def read_descs(self, idx: int, k: int) -> tuple[U64Array, U32Array, U32Array]:
        """``(addr, len, options)`` arrays of ``k`` descriptors from ``idx``."""
        d = self.read(idx, k)
        return d["addr"], d["len"], d["options"]

    def entry_array(self, values: npt.ArrayLike) -> np.ndarray:
        """``values`` as a 1-d array of this ring's entries (u64 addresses or
        ``XDP_DESC_DTYPE`` records); anything else is a BadArgument."""
        if self.kind == "addr":
            addrs = Array(np.uint64, scalar=False)("addr ring: values", values)
            assert addrs is not None  # None is refused
            return addrs
        try:
            vals = np.asarray(values, dtype=self.entries.dtype)
        except (TypeError, ValueError, OverflowError):
            vals = None
        if vals is None or vals.ndim != 1:
            raise BadArgument(f"desc ring: values must be a 1-d array of descriptors "
                              f"(XDP_DESC_DTYPE), not {short(values)}")
        return vals

    @checked(idx=(0, U32_MASK))
    def write(self, idx: int, values: npt.ArrayLike) -> None:
        """Write entries from ``idx``: u64 addresses, or ``XDP_DESC_DTYPE`` records."""
        vals = self.entry_array(values)
        k = len(vals)
        start, first = self._spans(idx, k)
        self.entries[start:start + first] = vals[:first]
        if k > first:
            self.entries[:k - first] = vals[first:]

    @checked(idx=(0, U32_MASK), addr=Array(scalar=False), length=Array(np.uint32),
             options=Array(np.uint32))
    def write_descs(self, idx: int, addr: npt.ArrayLike, length: npt.ArrayLike,
                    options: npt.ArrayLike = 0) -> None:
        """Write descriptors from ``idx`` field by field (scalars broadcast)."""
        a: U64Array = addr  # type: ignore[assignment]  # checked: a 1-d u64 array
        k = len(a)
        for what, v in (("length", length), ("options", options)):
            if np.ndim(v) and len(v) < k:  # type: ignore[arg-type]
                raise BadArgument(f"Ring.write_descs: {len(v)} {what} for {k} addresses")  # type: ignore[arg-type]
        if self.kind != "desc":
            raise BadArgument("Ring.write_descs: an addr ring holds no descriptors")
        start, first = self._spans(idx, k)
        for dst, src in ((self._addr, a), (self._len, length), (self._opt, options)):
            if np.ndim(src) == 0:  # one value for all: assigned without an array
                dst[start:start + first] = src
                if k > first:
                    dst[:k - first] = src
                continue
            v = np.asarray(src)
            dst[start:start + first] = v[:first]
            if k > first:
                dst[:k - first] = v[first:k]

    def close(self) -> None:
        """Drop the views of the buffer (so its owner can close it)."""
        q = self.q
        q.producer_at = q.consumer_at = q.flags_at = q.ring_at = 0
        self._producer = np.zeros(1, np.uint32)
        self._consumer = np.zeros(1, np.uint32)
        self._flags = np.zeros(1, np.uint32)
        self.entries = np.zeros(self.size, self.entries.dtype)
        if self.kind == "desc":
            self._addr, self._len, self._opt = (self.entries["addr"], self.entries["len"],
                                                self.entries["options"])
        else:
            self._addr = self.entries

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.kind}, size={self.size}, "
                f"prod={self.producer}, cons={self.consumer}, "
                f"cached_prod={self.cached_prod}, cached_cons={self.cached_cons})")


# --------------------------------------------------------------------------
# Kernel side (xsk_queue.h)
# --------------------------------------------------------------------------

class KernelRingCons(Ring):
    """The kernel consuming: fill and tx rings, consumer index published lazily.

    ``invalid_descs`` and ``queue_empty_descs`` are the ``struct
    xsk_queue`` counters behind ``XDP_STATISTICS``.
    """

    invalid_descs = Alias(XskQueueState, "invalid_descs", via="q")
    queue_empty_descs = Alias(XskQueueState, "queue_empty_descs", via="q")

    def __init__(self, buf: Buffer, entries: int, kind: RingKind, *,
                 offsets: XdpRingOffset = XDP_RING_OFFSET_DEFAULT, base: int = 0) -> None:
        super().__init__(buf, entries, kind, offsets=offsets, base=base)
        self.cached_prod = self.cached_cons  # nothing seen yet: the first peek loads it

    def release_publish(self) -> None:
        """``__xskq_cons_release``: make what we consumed visible (D)."""
        self._store_consumer(self.cached_cons)

    def peek_producer(self) -> None:
        """``__xskq_cons_peek``: load the producer (C).

        The producer is the user's to write: one claiming more entries than the
        ring holds is read as a full ring (the kernel reads ``prod - cons``
        entries masked into the ring, so the same slots again; pyxdp takes at
        most a ring's worth per load and loads again when those are used)."""
        avail = (int(self._producer[0]) - self.cached_cons) & U32_MASK
        self.cached_prod = (self.cached_cons + min(avail, self.size)) & U32_MASK

    def get_entries(self) -> None:
        """``xskq_cons_get_entries``: publish our consumer, then refresh the producer."""
        self.release_publish()
        self.peek_producer()

    def present(self) -> int:
        """``xskq_cons_present_entries``: entries in the cache."""
        return (self.cached_prod - self.cached_cons) & U32_MASK

    def nb_entries(self, n: int) -> int:
        """``xskq_cons_nb_entries``: up to ``n``, refreshing the producer only if short."""
        entries = self.present()
        if entries >= n:
            return n
        self.peek_producer()
        return min(self.present(), n)

    def has_descs(self) -> bool:
        """``xskq_has_descs``: the cache is not empty."""
        return self.cached_cons != self.cached_prod

    def peek_addrs(self, n: int) -> U64Array:
        """``xskq_cons_peek_addr_unchecked``, batched: up to ``n`` addresses, not consumed.

        An empty cache first publishes our consumer and reloads the producer.
        Consume what was used with :meth:`release`.
        """
        if self.cached_prod == self.cached_cons:
            self.get_entries()
        k = min(self.present(), n)
        return self.read_addrs(self.cached_cons, k)

    def peek_descs(self, n: int) -> np.ndarray:
        """Up to ``n`` descriptors at the consumer, not consumed (refreshing like addrs)."""
        if self.cached_prod == self.cached_cons:
            self.get_entries()
        k = min(self.present(), n)
        return self.read(self.cached_cons, k)

    def release(self, k: int = 1) -> None:
        """``xskq_cons_release_n``: consume ``k`` entries privately (no store)."""
        if k > self.present():
            raise ValueError(f"release({k}) past the {self.present()} cached entries")
        self.cached_cons = (self.cached_cons + k) & U32_MASK

    def cancel(self, k: int) -> None:
        """``xskq_cons_cancel_n``: un-consume the last ``k`` entries."""
        self.cached_cons = (self.cached_cons - k) & U32_MASK

    def read_desc_batch(self, n: int, valid: Callable[[np.ndarray], npt.NDArray[np.bool_]]
                        ) -> np.ndarray:
        """``xskq_cons_read_desc_batch``: up to ``n`` entries, the valid ones returned.

        ``valid`` maps the descriptors to a bool mask (``Umem.validate_desc``).
        Every entry read is consumed (``cached_cons``), invalid ones are
        counted in ``invalid_descs`` and dropped; nothing is published.
        """
        if self.cached_prod == self.cached_cons:
            self.get_entries()
        k = min(self.present(), n)
        if k == 0:
            self.queue_empty_descs += 1
            return self.read(self.cached_cons, 0)
        descs = self.read(self.cached_cons, k)
        ok = valid(descs)
        self.invalid_descs += int(k - np.count_nonzero(ok))
        self.cached_cons = (self.cached_cons + k) & U32_MASK
        return descs[ok]


class KernelRingProd(Ring):
    """The kernel producing: rx and completion rings, visible only at :meth:`submit`.

    The consumer index is the user's to write, and is believed only when it
    lies between the kernel's cached consumer and its producer: an index
    behind or past what was produced is ignored (the ring keeps the fill it
    had), so the kernel never counts more free slots than the ring has.
    With :meth:`track`, the ring remembers which UMEM chunk each slot it
    produced carries (``slot_chunk``, kernel-private: the user may rewrite
    the descriptors), and a consumer that moves on gives those chunks back
    to the user in the ownership array (:data:`RX_RING` -> :data:`USER`).
    """

    def __init__(self, buf: Buffer, entries: int, kind: RingKind, *,
                 offsets: XdpRingOffset = XDP_RING_OFFSET_DEFAULT, base: int = 0) -> None:
        super().__init__(buf, entries, kind, offsets=offsets, base=base)
        self.slot_chunk = np.zeros(entries, np.int64)
        self.q.slots_at = self.slot_chunk.ctypes.data
        self.kown: npt.NDArray[np.uint8] | None = None

    def track(self, kown: npt.NDArray[np.uint8] | None) -> None:
        """Keep ``kown`` (a buffer pool's chunk owners) in step with what this ring
        holds; None: stop."""
        self.kown = kown
        self.q.kown_at = 0 if kown is None else kown.ctypes.data

    def own(self, idx: int, chunks: npt.ArrayLike) -> None:
        """The slots from ``idx`` (just produced) carry ``chunks``: they are the rx
        ring's now."""
        c = np.asarray(chunks, np.int64)
        if self.kown is None or not len(c):
            return
        slots = (idx + np.arange(len(c), dtype=np.int64)) & self.mask
        self.slot_chunk[slots] = c
        self.kown[c] = RX_RING

    def reload_consumer(self) -> None:
        """Load the consumer (A), if it is one the ring can have; chunks the user
        consumed are the user's again."""
        cons = int(self._consumer[0])
        moved = (cons - self.cached_cons) & U32_MASK
        if moved > (self.cached_prod - self.cached_cons) & U32_MASK:
            return  # behind us or past what we produced: not an index we wrote for
        if moved and self.kown is not None:
            slots = (self.cached_cons + np.arange(moved, dtype=np.int64)) & self.mask
            c = self.slot_chunk[slots]
            c = c[self.kown[c] == RX_RING]
            self.kown[c] = USER
        self.cached_cons = cons

    def nb_free(self, n: int) -> int:
        """``xskq_prod_nb_free``: up to ``n`` free slots, reloading the consumer if short (A)."""
        free = self.size - ((self.cached_prod - self.cached_cons) & U32_MASK)
        if free >= n:
            return n
        self.reload_consumer()
        free = self.size - ((self.cached_prod - self.cached_cons) & U32_MASK)
        return min(free, n)

    def is_full(self) -> bool:
        """``xskq_prod_is_full``."""
        return self.nb_free(1) == 0

    def reserve(self, n: int) -> tuple[int, int]:
        """``xskq_prod_reserve`` for up to ``n`` slots: ``(idx, k)``, not yet visible."""
        k = self.nb_free(n)
        idx = self.cached_prod
        self.cached_prod = (idx + k) & U32_MASK
        return idx, k

    def cancel(self, k: int) -> None:
        """``xskq_prod_cancel_n``: drop the last ``k`` reserved slots."""
        self.cached_prod = (self.cached_prod - k) & U32_MASK

    def produce_addrs(self, addrs: npt.ArrayLike) -> int:
        """``xskq_prod_reserve_addr_batch``: as many addresses as fit; returns how many."""
        a = np.asarray(addrs, np.uint64)
        idx, k = self.reserve(len(a))
        self.write(idx, a[:k])
        return k

    def produce_descs(self, addr: npt.ArrayLike, length: npt.ArrayLike,
                      options: npt.ArrayLike = 0) -> int:
        """``xskq_prod_reserve_desc``, batched: as many descriptors as fit; returns how many.

        The caller counts the rest (``rx_queue_full`` for the rx ring).
        """
        a = np.asarray(addr, np.uint64)
        idx, k = self.reserve(len(a))
        if k:
            self.write_descs(idx, a[:k], length if np.ndim(length) == 0
                             else np.asarray(length)[:k],
                             options if np.ndim(options) == 0 else np.asarray(options)[:k])
        return k

    def submit(self) -> None:
        """``xskq_prod_submit``: publish everything reserved (B); the flush."""
        self._store_producer(self.cached_prod)

    def submit_n(self, k: int) -> None:
        """``xskq_prod_submit_n``: publish ``k`` more entries past the shared producer."""
        self._store_producer(int(self._producer[0]) + k)

    def write_at_producer(self, addrs: npt.ArrayLike) -> None:
        """Write addresses at the shared producer (``xskq_prod_write_addr`` from
        ``xskq_get_prod``), for slots reserved earlier: the completion path."""
        self.write(int(self._producer[0]), addrs)


# --------------------------------------------------------------------------
# Ring memory shared by the user and the datapath (xsk_queue.c)
# --------------------------------------------------------------------------

class RingMem:
    """``xskq_create``: one ring's memory with its user view and its kernel view; shared
    rings count users, the last :meth:`put` unmaps it (``xskq_destroy``)."""

    def __init__(self, entries: int, kind: RingKind, user: type[Ring],
                 kernel: type[Ring]) -> None:
        try:
            self.mm = mmap.mmap(-1, ring_bytes(entries, kind))
        except OSError as e:  # as xskq_create fails a ring it cannot allocate
            raise KernelError("xskq_create", e.errno or errno.ENOMEM,
                              f"{entries}-entry {kind} ring: {e.strerror}") from None
        self.user = user(self.mm, entries, kind)
        self.kernel = kernel(self.mm, entries, kind)
        self.users = 1

    def put(self) -> None:
        self.users -= 1
        if self.users == 0:
            self.user.close()
            self.kernel.close()
            self.mm.close()


def ring_view(mem: RingMem | None, side: str, cls: type[_R]) -> _R | None:
    """``mem``'s ``"user"`` or ``"kernel"`` view (of class ``cls``), None without a ring."""
    return None if mem is None else ring_side(mem, side, cls)


def ring_side(mem: RingMem, side: str, cls: type[_R]) -> _R:
    ring = mem.user if side == "user" else mem.kernel
    assert isinstance(ring, cls)
    return ring
