"""XDP attach flags and device XDP features: ``include/uapi/linux/if_link.h``
(``XDP_FLAGS_*``) and ``include/uapi/linux/netdev.h`` (``enum netdev_xdp_act``).

Shared by the kernel backend's netlink attach and pyxdp's own devices.
"""

from __future__ import annotations

from enum import IntFlag

__all__ = ["NetdevXdpAct", "XdpFlag"]


class XdpFlag(IntFlag):
    """``XDP_FLAGS_*`` of ``IFLA_XDP_FLAGS`` (and the mode bits of a bpf_link's flags)."""

    XDP_FLAGS_UPDATE_IF_NOEXIST = 1 << 0
    XDP_FLAGS_SKB_MODE = 1 << 1
    XDP_FLAGS_DRV_MODE = 1 << 2
    XDP_FLAGS_HW_MODE = 1 << 3
    XDP_FLAGS_REPLACE = 1 << 4


class NetdevXdpAct(IntFlag):
    """``enum netdev_xdp_act``: what a device's XDP supports (``xdp_features``)."""

    NETDEV_XDP_ACT_BASIC = 1 << 0
    NETDEV_XDP_ACT_REDIRECT = 1 << 1
    NETDEV_XDP_ACT_NDO_XMIT = 1 << 2
    NETDEV_XDP_ACT_XSK_ZEROCOPY = 1 << 3
    NETDEV_XDP_ACT_HW_OFFLOAD = 1 << 4
    NETDEV_XDP_ACT_RX_SG = 1 << 5
    NETDEV_XDP_ACT_NDO_XMIT_SG = 1 << 6
