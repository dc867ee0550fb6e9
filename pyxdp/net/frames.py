"""Batches of frames in flight: the datapath's vector of ``xdp_buff``/``xdp_frame``.

A :class:`Frames` is a structure of numpy arrays, one element per frame: the
pfn of its page (see :mod:`pyxdp.net.page_pool`), the offset of ``data`` in
that page, the packet length and the metadata length, and whether the page
already holds a converted ``struct xdp_frame`` (a frame redirected or
transmitted from another device) or is still a driver's ``xdp_buff``, and
whether it is a multi-buffer frame (``XDP_FLAGS_HAS_FRAGS``: its frags are
listed in the ``skb_shared_info`` at the end of the head page, as the kernel
keeps them, and ``length`` is the whole packet, ``xdp_get_buff_len``).
Every datapath stage takes and returns whole batches; nothing here loops
over packets in Python.

A :class:`FrameRing` (a NIC's rx ring, veth's ``xdp_ring``) is filled and
emptied in place by Python and by machine code on several threads (with
threaded NAPI a veth's peer polls its ring on one thread while others
transmit into it), so every change of its cursor happens under the ring's
lock, a word beside the cursor taken with ``cmpxchg``: veth's ptr_ring takes
``producer_lock`` in ``veth_xdp_xmit`` around its ``__ptr_ring_produce``
loop, and here the consumer takes the same lock around each poll's take,
since the cursor is a head and a count that both ends write (the kernel's
ring marks consumed slots NULL instead, so its two ends share no word).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pyxdp.net.record import Alias
from pyxdp.net.ring_cursor import RING_COLS, RingCursor

__all__ = ["CPU_MAP_BULK_SIZE", "DEV_MAP_BULK_SIZE", "KIND_BUFF", "KIND_FRAGS", "KIND_FRAME",
           "KIND_SKB", "NET_SKB_PAD", "XDP_TX_BULK_SIZE", "Bulk", "FrameRing", "Frames",
           "RING_COLS", "RingCursor"]

I64 = npt.NDArray[np.int64]
# Bulk queue sizes: xdp_do_flush's per-CPU queues (devmap.c, cpumap.c) and a driver's
# XDP_TX bulk (veth's VETH_XDP_TX_BULK_SIZE).
DEV_MAP_BULK_SIZE = 16
XDP_TX_BULK_SIZE = 16
CPU_MAP_BULK_SIZE = 8
KIND_BUFF = 0  # a page of the receiving queue's pool, no xdp_frame header yet
KIND_FRAME = 1  # a struct xdp_frame at the page start (it came through ndo_xdp_xmit)
# Or'ed into any kind: the frame (or skb) has frags (XDP_FLAGS_HAS_FRAGS). Native loops
# run programs on kind 0 only, so frags frames always reach the Python path (an skb's
# copy into the pool, KIND_SKB | KIND_FRAGS, is made in machine code first).
KIND_FRAGS = 2
# An skb another device's transmit queued on a receiving queue's ring (veth_xmit's
# veth_xdp_rx onto the peer's xdp_ring, loopback_xmit's netif_rx onto lo's backlog): its
# packet in order-0 pages of the system allocator (the skb's head, NET_SKB_PAD of
# headroom; past a page's packet room page frags too, with KIND_FRAGS). The receiving
# queue's own poll copies it into pages of its pool (veth_convert_skb_to_xdp_buff's
# skb_pp_cow_data, pyxdp.net.skbuff_native) and frees the skb's, so no transmitting
# thread ever takes a page of a pool another thread polls.
KIND_SKB = 4
NET_SKB_PAD = 64  # an skb's headroom (max(32, L1_CACHE_BYTES)), as netdev_alloc_skb gives it


@dataclass(eq=False)
class Frames:
    pfn: I64
    data: I64
    length: I64
    meta: I64
    kind: I64

    def __len__(self) -> int:
        return len(self.pfn)

    @property
    def has_frags(self) -> npt.NDArray[np.bool_]:
        out: npt.NDArray[np.bool_] = (self.kind & KIND_FRAGS) != 0
        return out

    @classmethod
    def empty(cls) -> Frames:
        z = np.zeros(0, np.int64)
        return cls(z, z, z, z, z)

    @classmethod
    def make(cls, pfn: npt.ArrayLike, data: npt.ArrayLike, length: npt.ArrayLike,
             meta: npt.ArrayLike = 0, kind: int = KIND_BUFF) -> Frames:
        p = np.asarray(pfn, np.int64).reshape(-1)
        n = len(p)

        def col(v: npt.ArrayLike) -> I64:
            a = np.asarray(v, np.int64)
            return np.full(n, int(a), np.int64) if a.ndim == 0 else a.reshape(-1).copy()

        return cls(p.copy(), col(data), col(length), col(meta), np.full(n, kind, np.int64))

    def select(self, sel: npt.NDArray[np.bool_] | npt.NDArray[np.intp] | slice) -> Frames:
        return Frames(self.pfn[sel], self.data[sel], self.length[sel], self.meta[sel],
                      self.kind[sel])

    @staticmethod
    def concat(parts: Sequence[Frames]) -> Frames:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Frames.empty()
        if len(parts) == 1:
            return parts[0]
        return Frames(*(np.concatenate([getattr(p, f) for p in parts])
                        for f in ("pfn", "data", "length", "meta", "kind")))


class Bulk:
    """A bulk queue of at most ``size`` frames (XDP_TX's, a devmap's ``xdp_dev_bulk_queue``,
    a cpumap's ``xdp_bulk_queue``): :meth:`add` hands each full bulk to ``flush``;
    :meth:`take` empties it at ``xdp_do_flush``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.parts: list[Frames] = []
        self.count = 0

    def add(self, frames: Frames, flush: Callable[[Frames], None]) -> None:
        start = 0
        while start < len(frames):
            k = min(self.size - self.count, len(frames) - start)
            self.parts.append(frames.select(slice(start, start + k)))
            self.count += k
            start += k
            if self.count == self.size:
                flush(self.take())

    def take(self) -> Frames:
        out = Frames.concat(self.parts)
        self.parts, self.count = [], 0
        return out


class FrameRing:
    """A bounded FIFO of frames (a NIC rx descriptor ring, veth's ``xdp_ring``,
    a cpumap entry's ``ptr_ring``): whole batches in, whole batches out."""

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError(f"ring size must be > 0, not {size}")
        self.size = size
        self._cols = np.zeros((RING_COLS, size), np.int64)
        self.cur = RingCursor()  # head, fill and lock, shared in place with native code

    def __len__(self) -> int:
        return self._count

    @property
    def free(self) -> int:
        return self.size - self._count

    def produce(self, f: Frames) -> int:
        """Queue as many of ``f`` as fit (in order); returns how many were taken."""
        if not len(f):
            return 0
        from pyxdp.net.frame_ring import produce  # numba: only once a ring is used
        return int(produce(self._cols, self.cur.words, *(np.ascontiguousarray(a, np.int64)
                                                           for a in (f.pfn, f.data, f.length,
                                                                     f.meta, f.kind))))

    _head = Alias(RingCursor, "head", via="cur")
    _count = Alias(RingCursor, "count", via="cur")

    @property
    def cols(self) -> npt.NDArray[np.int64]:
        """The ring's storage: rows pfn, data, length, meta, kind; ``size`` columns."""
        return self._cols

    def peek_kind(self) -> int:
        """The kind of the frame at the head (the ring must not be empty)."""
        return int(self._cols[4, self._head])

    def consume(self, n: int) -> Frames:
        if n <= 0 or not self._count:
            return Frames.empty()
        c = np.empty((RING_COLS, min(n, self.size)), np.int64)
        from pyxdp.net.frame_ring import consume
        k = int(consume(self._cols, self.cur.words, c, c.shape[1]))
        if not k:
            return Frames.empty()
        c = c[:, :k]
        return Frames(c[0], c[1], c[2], c[3], c[4])
