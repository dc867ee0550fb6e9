"""Packet sockets: ``include/uapi/linux/if_packet.h`` (socket options, ring versions
and ``tp_status`` bits) and the ``ETH_P_*`` values of ``if_ether.h`` they bind to.

Shared by the AF_PACKET fallback NIC, ``pyxdp dump``'s capture and the test labs.
"""

from __future__ import annotations

from typing import Final

ETH_P_ALL: Final = 0x0003
ETH_P_8021Q: Final = 0x8100

SOL_PACKET: Final = 263
SO_RCVBUFFORCE: Final = 33  # asm-generic/socket.h: SOL_SOCKET, beyond rmem_max

# setsockopt(SOL_PACKET, ...)
PACKET_RX_RING: Final = 5
PACKET_STATISTICS: Final = 6
PACKET_AUXDATA: Final = 8
PACKET_VERSION: Final = 10
PACKET_TX_RING: Final = 13
PACKET_LOSS: Final = 14
PACKET_QDISC_BYPASS: Final = 20
PACKET_IGNORE_OUTGOING: Final = 23

# sockaddr_ll.sll_pkttype
PACKET_OUTGOING: Final = 4

# enum tpacket_versions
TPACKET_V2: Final = 1
TPACKET_V3: Final = 2

# tp_status: rx ring
TP_STATUS_KERNEL: Final = 0
TP_STATUS_USER: Final = 1
TP_STATUS_VLAN_VALID: Final = 0x10
TP_STATUS_VLAN_TPID_VALID: Final = 0x40
# tp_status: tx ring
TP_STATUS_AVAILABLE: Final = 0
TP_STATUS_SEND_REQUEST: Final = 1
TP_STATUS_WRONG_FORMAT: Final = 4
