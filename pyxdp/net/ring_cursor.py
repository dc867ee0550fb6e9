"""The cursor of a frame ring (a NIC's rx ring, veth's ``xdp_ring``): head, count and the
lock word every change of them is made under, in one record Python and machine code share.
"""

from __future__ import annotations

from pyxdp.net.record import Field, Record

__all__ = ["RING_COLS", "RingCursor"]


class RingCursor(Record):
    """A :class:`FrameRing`'s position: the head slot and how many frames it holds,
    and the lock every change of them is made under (0 free, 1 held)."""

    head = Field()
    count = Field()
    lock = Field()


RING_COLS = 5  # pfn, data, length, meta, kind
