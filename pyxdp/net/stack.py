"""The host network stack that XDP_PASS hands packets to: ``netif_receive_skb_list``
and a minimal ``ip_rcv``/``udp_rcv`` (``net/core/dev.c``, ``net/ipv4/udp.c``).

Packets arrive as an :class:`SkbBatch` (the kernel's list of skbs, from a NAPI
poll, a cpumap kthread or the generic path): one numpy buffer, one row per
skb. The stack demultiplexes a whole batch with numpy - Ethernet type
(through 802.1Q/802.1ad tags), IPv4/IPv6 protocol, UDP destination port -
and counts what it did: delivered to a UDP socket, dropped for no listener
(the kernel's ``UDP_MIB_NOPORTS``), other traffic taken by the stack. A user
callback sees every batch; :meth:`Stack.udp_socket` opens a sink on a port.

Simplified: no routing, no IP options or fragments reassembly, no checksum
validation, no ICMP port-unreachable replies (counted only); one stack per
:class:`~pyxdp.net.netdevice.Host`, shared by its devices.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["SkbBatch", "Stack", "StackStats", "UdpSink"]

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
ETH_P_IP, ETH_P_IPV6, ETH_P_8021Q, ETH_P_8021AD = 0x0800, 0x86DD, 0x8100, 0x88A8
IPPROTO_UDP = 17
# Bytes of headers the demux reads at most: Ethernet, two VLAN tags, IPv4 with
# options (60) and the UDP ports.
_PARSE_WIDTH = 128


@dataclass(eq=False)
class SkbBatch:
    """A list of skbs: row i of ``data`` holds ``length[i]`` bytes of packet from the
    Ethernet header on; ``meta`` the XDP metadata each carried (``skb_metadata``),
    ``ifindex`` the device it arrived on, ``queue`` its rx queue."""

    data: U8
    length: I64
    ifindex: I64
    queue: I64
    meta: list[bytes] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.length)

    def packet(self, i: int) -> bytes:
        return self.data[i, :int(self.length[i])].tobytes()

    def packets(self) -> list[bytes]:
        return [self.data[i, :n].tobytes() for i, n in enumerate(self.length.tolist())]

    @classmethod
    def from_packets(cls, packets: list[bytes], ifindex: int, queue: int = 0,
                     meta: list[bytes] | None = None) -> SkbBatch:
        n = len(packets)
        width = max((len(p) for p in packets), default=0)
        data = np.zeros((n, max(width, 1)), np.uint8)
        for i, p in enumerate(packets):
            data[i, :len(p)] = np.frombuffer(p, np.uint8)
        return cls(data, np.array([len(p) for p in packets], np.int64),
                   np.full(n, ifindex, np.int64), np.full(n, queue, np.int64),
                   meta if meta is not None else [b""] * n)


@dataclass
class StackStats:
    """What the stack did with what it got (``ip -s``/``netstat -su`` style)."""

    received: int = 0  # skbs handed to the stack
    batches: int = 0  # netif_receive_skb_list calls
    ipv4: int = 0
    ipv6: int = 0
    other: int = 0  # neither IPv4 nor IPv6 (ARP, ...)
    udp_delivered: int = 0  # into a socket
    udp_noports: int = 0  # UDP_MIB_NOPORTS: no socket on the port
    bytes: int = 0


class UdpSink:
    """A UDP socket bound to ``port``: counts what arrives, keeps up to ``keep`` payloads."""

    def __init__(self, port: int, keep: int = 0) -> None:
        self.port = port
        self.keep = keep
        self.packets = 0
        self.bytes = 0
        self.received: list[bytes] = []

    def _deliver(self, batch: SkbBatch, rows: I64, payload_off: I64) -> None:
        self.packets += len(rows)
        self.bytes += int((batch.length[rows] - payload_off).sum())
        room = self.keep - len(self.received)
        for r, off in zip(rows[:max(room, 0)].tolist(), payload_off[:max(room, 0)].tolist(),
                          strict=True):
            self.received.append(batch.data[r, off:int(batch.length[r])].tobytes())


class Stack:
    """``netif_receive_skb_list`` and a minimal L2/L3/L4 demux with UDP sinks."""

    def __init__(self) -> None:
        self.stats = StackStats()
        self.sockets: dict[int, UdpSink] = {}
        self.callbacks: list[Callable[[SkbBatch], None]] = []
        self.per_device: dict[int, int] = {}
        self._lock = threading.Lock()  # cpumap workers deliver from their own threads

    def udp_socket(self, port: int, keep: int = 0) -> UdpSink:
        """Bind a UDP sink on ``port`` (any address), like ``socket(); bind()``."""
        if not 0 < port < 65536:
            raise ValueError(f"port must be 1..65535, not {port}")
        if port in self.sockets:
            raise OSError(98, f"port {port} already bound")  # EADDRINUSE
        sink = self.sockets[port] = UdpSink(port, keep)
        return sink

    def on_receive(self, callback: Callable[[SkbBatch], None]) -> None:
        """Call ``callback(batch)`` for every list of skbs the stack receives."""
        self.callbacks.append(callback)

    def netif_receive_skb_list(self, batch: SkbBatch) -> None:
        n = len(batch)
        if not n:
            return
        with self._lock:
            self._receive(batch)

    def netif_receive_skb(self, batch: SkbBatch) -> None:
        """One skb at a time (the path cpumap took before list delivery)."""
        for i in range(len(batch)):
            one = SkbBatch(batch.data[i:i + 1], batch.length[i:i + 1], batch.ifindex[i:i + 1],
                           batch.queue[i:i + 1], batch.meta[i:i + 1])
            self.netif_receive_skb_list(one)

    def _receive(self, batch: SkbBatch) -> None:
        st = self.stats
        n = len(batch)
        st.received += n
        st.batches += 1
        st.bytes += int(batch.length.sum())
        for ifindex, count in zip(*np.unique(batch.ifindex, return_counts=True), strict=True):
            self.per_device[int(ifindex)] = self.per_device.get(int(ifindex), 0) + int(count)
        d = batch.data
        if d.shape[1] < _PARSE_WIDTH:  # every header offset below is then in range
            d = np.pad(d, ((0, 0), (0, _PARSE_WIDTH - d.shape[1])))
        rows = np.arange(n)
        l3 = np.full(n, 14, np.int64)
        proto = _be16(d, rows, l3 - 2)
        for _ in range(2):  # up to two VLAN tags (QinQ)
            tagged = (proto == ETH_P_8021Q) | (proto == ETH_P_8021AD)
            if not tagged.any():
                break
            l3 = np.where(tagged, l3 + 4, l3)
            proto = np.where(tagged, _be16(d, rows, l3 - 2), proto)
        v4 = (proto == ETH_P_IP) & (batch.length >= l3 + 20)
        v6 = (proto == ETH_P_IPV6) & (batch.length >= l3 + 40)
        n4, n6 = int(v4.sum()), int(v6.sum())
        st.ipv4 += n4
        st.ipv6 += n6
        st.other += n - n4 - n6
        ihl = (d[rows, l3] & 0xF).astype(np.int64) * 4
        l4 = np.where(v4, l3 + ihl, l3 + 40)
        l4proto = np.where(v4, d[rows, l3 + 9], d[rows, l3 + 6])
        udp = (v4 | v6) & (l4proto == IPPROTO_UDP) & (batch.length >= l4 + 8)
        if udp.any():
            urows = np.flatnonzero(udp)
            dport = _be16(d, urows, l4[urows] + 2)
            for port in np.unique(dport).tolist():
                sel = urows[dport == port]
                sink = self.sockets.get(int(port))
                if sink is None:
                    st.udp_noports += len(sel)
                else:
                    sink._deliver(batch, sel, l4[sel] + 8)
                    st.udp_delivered += len(sel)
        for cb in self.callbacks:
            cb(batch)


def _be16(d: U8, rows: npt.NDArray[np.intp], off: I64) -> I64:
    return (d[rows, off].astype(np.int64) << 8) | d[rows, off + 1]
