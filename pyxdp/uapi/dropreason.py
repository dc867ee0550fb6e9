"""Why the kernel frees a packet: ``enum skb_drop_reason`` (``include/net/dropreason-core.h``).

The values are those of Linux 6.18, as the ``skb:kfree_skb`` tracepoint's
``__print_symbolic`` table in tracefs lists them (the enum is not a stable
ABI; a kernel test compares these against the running kernel's format file).
Only the reasons pyxdp's receive path can give are listed.
"""

from __future__ import annotations

import enum

__all__ = ["SkbDropReason"]


class SkbDropReason(enum.IntEnum):
    NOT_SPECIFIED = 2
    NO_SOCKET = 3
    PKT_TOO_SMALL = 9
    TCP_CSUM = 10
    UDP_CSUM = 11
    OTHERHOST = 13
    IP_CSUM = 14
    IP_INHDR = 15
    IP_NOPROTO = 19
    UNHANDLED_PROTO = 74
    ICMP_CSUM = 85
    INVALID_PROTO = 86
    IP_INADDRERRORS = 87
    IP_INNOROUTES = 88
    IP_INVALID_SOURCE = 90
    IP_LOCALNET = 91
    IP_INVALID_DEST = 92
    IPV6_BAD_EXTHDR = 98
    MAX = 129
