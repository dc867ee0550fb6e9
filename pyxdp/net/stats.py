"""A device's counters: ``struct rtnl_link_stats64`` (``include/uapi/linux/if_link.h``)
and the XDP counters a driver reports beside them (veth's ``xdp_*`` ethtool stats).

One :class:`~pyxdp.net.record.Record` per device, which the Python paths and
the native poll loop both count into in place. What ``ip -s link`` shows is
:class:`LinkStats`, the driver's ``ndo_get_stats64`` over those records
(``NetDevice.link_stats``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyxdp.net.record import Field, Record

__all__ = ["LinkStats", "NetdevStats"]


@dataclass(frozen=True)
class LinkStats:
    """A device's counters as ``ip -s link`` shows them (``stats64``)."""

    rx_packets: int
    rx_bytes: int
    rx_dropped: int
    tx_packets: int
    tx_bytes: int
    tx_dropped: int


class NetdevStats(Record):
    """``struct rtnl_link_stats64`` counters the model keeps (``ip -s link``), one
    record the native poll loop counts into in place."""

    rx_packets = Field()
    rx_bytes = Field()
    rx_dropped = Field()
    tx_packets = Field()
    tx_bytes = Field()
    tx_dropped = Field()
    # XDP counters of the driver (veth's xdp_* ethtool stats).
    xdp_packets = Field()
    xdp_drops = Field()
    xdp_tx = Field()
    xdp_tx_errors = Field()
    xdp_redirect = Field()
    xdp_aborted = Field()
    xdp_pass = Field()
