"""Capturing what an interface receives through an AF_PACKET socket (``net/packet/af_packet.c``).

The socket is bound to one device for every protocol (``ETH_P_ALL``); frames the
device sends (``PACKET_OUTGOING``) are skipped, so what is read is what the
device received, after its XDP program passed it. The stack moves a VLAN tag
out of the frame into the skb on receive; ``PACKET_AUXDATA`` gives it back and
it is put back in place, as tcpdump does, so the frames read are as on the
wire (and as an XDP program sees them). Reading is non-blocking batches with a
``select`` wait; :meth:`PacketCapture.drops` is ``PACKET_STATISTICS``' drop
count (frames the socket's queue had no room for).
"""

from __future__ import annotations

import errno
import select
import socket
import struct
import time
from typing import Final

from pyxdp.errors import KernelError
from pyxdp.uapi.if_packet import (
    ETH_P_8021Q,
    ETH_P_ALL,
    PACKET_AUXDATA,
    PACKET_OUTGOING,
    PACKET_STATISTICS,
    SO_RCVBUFFORCE,
    SOL_PACKET,
    TP_STATUS_VLAN_TPID_VALID,
    TP_STATUS_VLAN_VALID,
)

__all__ = ["PacketCapture"]

_AUXDATA: Final = struct.Struct("=IIIHHHH")  # struct tpacket_auxdata
_RCVBUF: Final = 16 << 20


class PacketCapture:
    """Incoming frames of ``ifname``, with their receive time (wall clock, ns)."""

    def __init__(self, ifname: str) -> None:
        self.ifname = ifname
        # Protocol 0 at socket(): the tap starts only at bind(), on this device alone.
        try:
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW | socket.SOCK_NONBLOCK,
                                      0)
        except OSError as e:  # packet_create: capable(CAP_NET_RAW)
            raise KernelError("socket(AF_PACKET)", e.errno or errno.EPERM,
                              "a packet socket needs CAP_NET_RAW") from None
        try:
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, _RCVBUF)
            except PermissionError:  # without CAP_NET_ADMIN: the default size
                pass
            self.sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            self.sock.bind((ifname, ETH_P_ALL))
        except OSError as e:
            self.sock.close()
            raise KernelError(f"AF_PACKET capture on {ifname}", e.errno or 0) from None

    def read(self, timeout_s: float, limit: int = 256) -> tuple[list[bytes], list[int]]:
        """Up to ``limit`` frames, waiting at most ``timeout_s`` for the first."""
        frames: list[bytes] = []
        stamps: list[int] = []
        select.select([self.sock], [], [], max(0.0, timeout_s))
        while len(frames) < limit:
            try:
                data, anc, _, addr = self.sock.recvmsg(1 << 16, socket.CMSG_SPACE(64))
            except BlockingIOError:
                break
            if addr[2] == PACKET_OUTGOING:
                continue
            for level, kind, cdata in anc:
                if level == SOL_PACKET and kind == PACKET_AUXDATA and len(cdata) >= _AUXDATA.size:
                    status, _, _, _, _, tci, tpid = _AUXDATA.unpack_from(cdata)
                    if status & TP_STATUS_VLAN_VALID:
                        tpid = tpid if status & TP_STATUS_VLAN_TPID_VALID else ETH_P_8021Q
                        data = data[:12] + struct.pack(">HH", tpid, tci) + data[12:]
            frames.append(data)
            stamps.append(time.time_ns())
        return frames, stamps

    def drops(self) -> int:
        raw = self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
        return int(struct.unpack("=II", raw)[1])

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> PacketCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
