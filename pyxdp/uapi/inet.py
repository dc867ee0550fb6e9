"""IP protocol numbers (``include/uapi/linux/in.h``) and the TCP states of
``include/net/tcp_states.h`` that socket maps and socket lookups test."""

from __future__ import annotations

from typing import Final

IPPROTO_TCP: Final = 6
IPPROTO_UDP: Final = 17

TCP_ESTABLISHED: Final = 1
TCP_CLOSE: Final = 7
TCP_LISTEN: Final = 10
