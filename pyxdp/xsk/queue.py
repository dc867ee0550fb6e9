"""AF_XDP rings, the user's side: libxdp's ``xsk.h`` producer and consumer.

The ring layout, its memory ordering and the kernel's side are
:mod:`pyxdp.net.xsk_queue` (``net/xdp/xsk_queue.h``); here the user's side as
libxdp has it (``xsk_ring_prod__reserve``/``__submit``,
``xsk_ring_cons__peek``/``__release``): the user produces into fill and tx
(:class:`RingProd`), consumes rx and completion (:class:`RingCons`),
publishing at every submit/release.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pyxdp.args import checked
from pyxdp.net.record import Alias
from pyxdp.net.xsk_queue import U32_MASK, Buffer, Ring, RingKind, XskQueueState
from pyxdp.uapi.if_xdp import XDP_RING_OFFSET_DEFAULT, XdpRingOffset

__all__ = ["RingCons", "RingProd"]


# --------------------------------------------------------------------------
# User side (libxdp)
# --------------------------------------------------------------------------

class RingProd(Ring):
    """The user producing: fill and tx rings (``struct xsk_ring_prod``).

    :meth:`reserve` claims slots privately (``cached_prod``), the caller
    writes them, :meth:`submit` publishes them in order.
    """

    _published = Alias(XskQueueState, "published", via="q")

    def __init__(self, buf: Buffer, entries: int, kind: RingKind, *,
                 offsets: XdpRingOffset = XDP_RING_OFFSET_DEFAULT, base: int = 0) -> None:
        super().__init__(buf, entries, kind, offsets=offsets, base=base)
        self._published = self.cached_prod  # we are the only writer of producer

    @checked(n=(0, U32_MASK))
    def nb_free(self, n: int) -> int:
        """Free slots, refreshing the consumer only when fewer than ``n`` look free (A)."""
        free = self.size - ((self.cached_prod - self.cached_cons) & U32_MASK)
        if free >= n:
            return free
        self.cached_cons = int(self._consumer[0])
        return self.size - ((self.cached_prod - self.cached_cons) & U32_MASK)

    @checked(n=(0, U32_MASK))
    def reserve(self, n: int, *, exact: bool = False) -> tuple[int, int]:
        """``(idx, k)``: ``k`` slots from ``idx`` are ours to write (``k <= n``).

        With ``exact`` it is all or nothing (``k`` is ``n`` or 0), as
        ``xsk_ring_prod__reserve``.
        """
        free = self.nb_free(n)
        k = min(n, free)
        if exact and k < n:
            k = 0
        idx = self.cached_prod
        self.cached_prod = (idx + k) & U32_MASK
        return idx, k

    @checked(k=(0, U32_MASK))
    def submit(self, k: int) -> None:
        """Publish the next ``k`` reserved slots (store-release of producer)."""
        pending = (self.cached_prod - self._published) & U32_MASK
        if k > pending:
            raise ValueError(f"submit({k}) but only {pending} slots are reserved")
        self._published = (self._published + k) & U32_MASK
        self._store_producer(self._published)

    @checked(k=(0, U32_MASK))
    def cancel(self, k: int) -> None:
        """Give back the last ``k`` reserved, unsubmitted slots."""
        pending = (self.cached_prod - self._published) & U32_MASK
        if k > pending:
            raise ValueError(f"cancel({k}) but only {pending} slots are reserved")
        self.cached_prod = (self.cached_prod - k) & U32_MASK

    def produce(self, values: npt.ArrayLike) -> int:
        """Reserve, write and submit as many of ``values`` as fit; returns how many."""
        vals = self.entry_array(values)
        idx, k = self.reserve(len(vals))
        if k:
            self.write(idx, vals[:k])
            self.submit(k)
        return k


class RingCons(Ring):
    """The user consuming: rx and completion rings (``struct xsk_ring_cons``)."""

    _published = Alias(XskQueueState, "published", via="q")

    def __init__(self, buf: Buffer, entries: int, kind: RingKind, *,
                 offsets: XdpRingOffset = XDP_RING_OFFSET_DEFAULT, base: int = 0) -> None:
        super().__init__(buf, entries, kind, offsets=offsets, base=base)
        self._published = self.cached_cons  # we are the only writer of consumer

    @checked(n=(0, U32_MASK))
    def nb_avail(self, n: int) -> int:
        """Entries ready, loading the producer (C) only when the cache is empty."""
        entries = (self.cached_prod - self.cached_cons) & U32_MASK
        if entries == 0:
            self.cached_prod = int(self._producer[0])
            entries = (self.cached_prod - self.cached_cons) & U32_MASK
        return min(entries, n)

    @checked(n=(0, U32_MASK))
    def peek(self, n: int) -> tuple[int, int]:
        """``(idx, k)``: ``k <= n`` entries from ``idx`` are ours to read."""
        k = self.nb_avail(n)
        idx = self.cached_cons
        self.cached_cons = (idx + k) & U32_MASK
        return idx, k

    @checked(k=(0, U32_MASK))
    def release(self, k: int) -> None:
        """Hand the next ``k`` peeked entries back (store-release of consumer)."""
        pending = (self.cached_cons - self._published) & U32_MASK
        if k > pending:
            raise ValueError(f"release({k}) but only {pending} entries are peeked")
        self._published = (self._published + k) & U32_MASK
        self._store_consumer(self._published)

    @checked(k=(0, U32_MASK))
    def cancel(self, k: int) -> None:
        """Un-peek the last ``k`` peeked, unreleased entries."""
        pending = (self.cached_cons - self._published) & U32_MASK
        if k > pending:
            raise ValueError(f"cancel({k}) but only {pending} entries are peeked")
        self.cached_cons = (self.cached_cons - k) & U32_MASK

    @checked(n=(0, U32_MASK))
    def consume(self, n: int) -> np.ndarray:
        """Peek, copy and release up to ``n`` entries."""
        idx, k = self.peek(n)
        out = self.read(idx, k)
        if k:
            self.release(k)
        return out
