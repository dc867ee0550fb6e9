"""``struct xdp_sock``'s scalars (``include/net/xdp_sock.h``) as a record: what the
socket (:class:`pyxdp.net.xsk.XdpSock`) and the native AF_XDP receive and transmit
code (:mod:`pyxdp.net.xsk_native`, :mod:`pyxdp.net.xsk_native_tx`) share in place.
Kept apart from the socket so that the native modules sit below it."""

from __future__ import annotations

from pyxdp.net.record import Field, Record

__all__ = ["XdpSockState"]


class XdpSockState(Record):
    """``struct xdp_sock``'s scalars, shared in place with native code: its counters
    (``XDP_STATISTICS``), its "fd" and binding, the copy-mode tx budget."""

    rx_dropped = Field()
    rx_queue_full = Field()
    fd = Field()
    ifindex = Field()
    queue_id = Field()
    max_tx_budget = Field()
