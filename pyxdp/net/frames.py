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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pyxdp.net.record import Alias, Field, Record

__all__ = ["CPU_MAP_BULK_SIZE", "DEV_MAP_BULK_SIZE", "KIND_BUFF", "KIND_FRAGS", "KIND_FRAME",
           "XDP_TX_BULK_SIZE", "Bulk", "FrameRing", "Frames", "RingCursor"]

I64 = npt.NDArray[np.int64]
# Bulk queue sizes: xdp_do_flush's per-CPU queues (devmap.c, cpumap.c) and a driver's
# XDP_TX bulk (veth's VETH_XDP_TX_BULK_SIZE).
DEV_MAP_BULK_SIZE = 16
XDP_TX_BULK_SIZE = 16
CPU_MAP_BULK_SIZE = 8
KIND_BUFF = 0  # a page of the receiving queue's pool, no xdp_frame header yet
KIND_FRAME = 1  # a struct xdp_frame at the page start (it came through ndo_xdp_xmit)
# Or'ed into either kind: the frame has frags (XDP_FLAGS_HAS_FRAGS). Native loops take
# only kind 0, so frags frames always reach the Python path.
KIND_FRAGS = 2


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


class RingCursor(Record):
    """A :class:`FrameRing`'s position: the head slot and how many frames it holds."""

    head = Field()
    count = Field()


class FrameRing:
    """A bounded FIFO of frames (a NIC rx descriptor ring, veth's ``xdp_ring``,
    a cpumap entry's ``ptr_ring``): whole batches in, whole batches out."""

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError(f"ring size must be > 0, not {size}")
        self.size = size
        self._cols = np.zeros((5, size), np.int64)
        self.cur = RingCursor()  # head and fill, shared in place with native code

    def __len__(self) -> int:
        return self._count

    @property
    def free(self) -> int:
        return self.size - self._count

    def produce(self, f: Frames) -> int:
        """Queue as many of ``f`` as fit (in order); returns how many were taken."""
        k = min(len(f), self.size - self._count)
        if k <= 0:
            return 0
        pos = (self._head + self._count + np.arange(k)) % self.size
        c = self._cols
        c[0, pos], c[1, pos], c[2, pos] = f.pfn[:k], f.data[:k], f.length[:k]
        c[3, pos], c[4, pos] = f.meta[:k], f.kind[:k]
        self._count += k
        return k

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
        k = min(n, self._count)
        if k <= 0:
            return Frames.empty()
        pos = (self._head + np.arange(k)) % self.size
        c = self._cols[:, pos]
        self._head = (self._head + k) % self.size
        self._count -= k
        return Frames(c[0], c[1], c[2], c[3], c[4])
