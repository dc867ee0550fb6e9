"""The host network stack that XDP_PASS hands packets to: ``netif_receive_skb_list``
and a minimal ``ip_rcv``/``udp_rcv`` (``net/core/dev.c``, ``net/ipv4/udp.c``).

Packets arrive as a list of skbs: from a NAPI poll's XDP_PASS, a cpumap
kthread, or the generic path. The demultiplexing - Ethernet type (through
802.1Q/802.1ad tags), IPv4/IPv6 protocol, UDP destination port, the socket
bound there - exists once, as machine code (:func:`stack_rcv_one`): the
native poll loop calls it on each passed frame in its page, and the Python
path (:meth:`Stack.netif_receive_skb_list`, an :class:`SkbBatch`) calls it on
each row. What it counts lives in one place, the stack's numpy records, which
both read and write in place: the SNMP-style counters per CPU (the kernel's
MIBs are per-CPU too, so a cpumap kthread on another CPU never shares a
counter with the NAPI loop), per-device receive counts, and per-socket
packets and bytes. :attr:`Stack.native_ok` says whether a passed frame needs
nothing but that (no user callback to show the list to, no socket keeping
payloads): only then does the native loop deliver it itself.

Simplified: no routing, no IP options or fragments reassembly, no checksum
validation, no ICMP port-unreachable replies (counted only); one stack per
:class:`~pyxdp.net.netdevice.Host`, shared by its devices.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import numpy as np
import numpy.typing as npt

from pyxdp.net.native import njit

__all__ = ["MAX_SOCKETS", "Mib", "SkbBatch", "Stack", "StackStats", "UdpSink",
           "stack_rcv_one"]


U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
ETH_P_IP, ETH_P_IPV6, ETH_P_8021Q, ETH_P_8021AD = 0x0800, 0x86DD, 0x8100, 0x88A8
IPPROTO_UDP = 17
MAX_SOCKETS = 256  # UDP sinks one stack can bind (rows of the socket counters)


class Mib:
    """Columns of the per-CPU counter record (:attr:`Stack.mib`)."""

    RECEIVED, BATCHES, IPV4, IPV6, OTHER, UDP_DELIVERED, UDP_NOPORTS, BYTES = range(8)
    SIZE = 8


# numba reads module-level integers as constants.
M_RECEIVED = Mib.RECEIVED
M_IPV4 = Mib.IPV4
M_IPV6 = Mib.IPV6
M_OTHER = Mib.OTHER
M_UDP_DELIVERED = Mib.UDP_DELIVERED
M_UDP_NOPORTS = Mib.UDP_NOPORTS
M_BYTES = Mib.BYTES


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _be16(buf, off, length):  # type: ignore[no-untyped-def]
    """A big-endian 16-bit field; 0 past the packet's end (never read beyond it)."""
    if off + 2 > length:
        return 0
    return (np.int64(buf[off]) << 8) | np.int64(buf[off + 1])


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def stack_rcv_one(buf, start, length, ifindex, mib, port_sock, sock_cnt, dev_cnt):  # type: ignore[no-untyped-def] # noqa: E501
    """One skb of ``length`` bytes at ``buf[start:]`` through ``__netif_receive_skb``,
    ``ip_rcv``/``ipv6_rcv`` and ``udp_rcv``, counted into this CPU's records.
    Returns the socket row it was delivered to (or -1), and the payload's offset
    from ``start``. Every read is inside the packet."""
    mib[M_RECEIVED] += 1
    mib[M_BYTES] += length
    if 0 <= ifindex < len(dev_cnt):
        dev_cnt[ifindex] += 1
    b = buf[start:start + length]
    l3 = 14
    proto = _be16(b, 12, length)
    for _ in range(2):  # up to two VLAN tags (QinQ)
        if proto != ETH_P_8021Q and proto != ETH_P_8021AD:
            break
        l3 += 4
        proto = _be16(b, l3 - 2, length)
    if proto == ETH_P_IP and length >= l3 + 20:
        mib[M_IPV4] += 1
        l4 = l3 + (np.int64(b[l3]) & 0xF) * 4
        l4proto = np.int64(b[l3 + 9])
    elif proto == ETH_P_IPV6 and length >= l3 + 40:
        mib[M_IPV6] += 1
        l4 = l3 + 40  # type: ignore[assignment]
        l4proto = np.int64(b[l3 + 6])
    else:
        mib[M_OTHER] += 1
        return -1, 0
    if l4proto != IPPROTO_UDP or length < l4 + 8:
        return -1, 0
    s = port_sock[_be16(b, l4 + 2, length)]
    if s < 0:
        mib[M_UDP_NOPORTS] += 1
        return -1, 0
    mib[M_UDP_DELIVERED] += 1
    sock_cnt[s, 0] += 1
    sock_cnt[s, 1] += length - l4 - 8
    return s, l4 + 8


@njit(cache=True, nogil=True, _nrt=False)
def _rcv_rows(data, lengths, ifindex, mib, port_sock, sock_cnt, dev_cnt, out_sock, out_off):  # type: ignore[no-untyped-def] # noqa: E501
    """:func:`stack_rcv_one` over the rows of an :class:`SkbBatch`."""
    for i in range(len(lengths)):
        ln = min(lengths[i], data.shape[1])
        s, off = stack_rcv_one(data[i], 0, ln, ifindex[i], mib, port_sock, sock_cnt, dev_cnt)
        out_sock[i] = s
        out_off[i] = off


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
    """What the stack did with what it got (``ip -s``/``netstat -su`` style): a
    snapshot, summed over CPUs, of :attr:`Stack.mib`."""

    received: int = 0  # skbs handed to the stack
    batches: int = 0  # netif_receive_skb_list calls
    ipv4: int = 0
    ipv6: int = 0
    other: int = 0  # neither IPv4 nor IPv6 (ARP, ...)
    udp_delivered: int = 0  # into a socket
    udp_noports: int = 0  # UDP_MIB_NOPORTS: no socket on the port
    bytes: int = 0


_STAT_NAMES = [f.name for f in fields(StackStats)]
assert [getattr(Mib, n.upper()) for n in _STAT_NAMES] == list(range(Mib.SIZE))


class UdpSink:
    """A UDP socket bound to ``port``: counts what arrives (in the stack's socket
    record, row ``row``), keeps up to ``keep`` payloads."""

    def __init__(self, stack: Stack, row: int, port: int, keep: int = 0) -> None:
        self._stack = stack
        self.row = row
        self.port = port
        self.keep = keep
        self.received: list[bytes] = []

    @property
    def packets(self) -> int:
        return int(self._stack.sock_cnt[:, self.row, 0].sum())

    @property
    def bytes(self) -> int:
        return int(self._stack.sock_cnt[:, self.row, 1].sum())


class Stack:
    """``netif_receive_skb_list`` and a minimal L2/L3/L4 demux with UDP sinks.

    State (numpy, shared in place with native code): ``mib`` (row x :class:`Mib`
    counters), ``dev_cnt`` (row x ifindex skbs received), ``port_sock`` (port ->
    socket row, -1 unbound), ``sock_cnt`` (row x socket x (packets, bytes)). A
    row is a CPU's softirq context or its kthread context (:meth:`row`): on one
    CPU the kernel never runs both at once, but pyxdp's workers are threads,
    so each context writes only its own row."""

    def __init__(self, nr_cpus: int = 1) -> None:
        self.nr_cpus = max(nr_cpus, 1)
        rows = 2 * self.nr_cpus
        self.mib = np.zeros((rows, Mib.SIZE), np.int64)
        self.dev_cnt = np.zeros((rows, 64), np.int64)
        self.port_sock = np.full(65536, -1, np.int64)
        self.sock_cnt = np.zeros((rows, MAX_SOCKETS, 2), np.int64)
        self.sockets: dict[int, UdpSink] = {}
        self.callbacks: list[Callable[[SkbBatch], None]] = []
        self._lock = threading.Lock()  # cpumap workers deliver from their own threads

    @property
    def stats(self) -> StackStats:
        return StackStats(*(int(x) for x in self.mib.sum(axis=0).tolist()))

    @property
    def per_device(self) -> dict[int, int]:
        """Skbs received per ifindex."""
        tot = self.dev_cnt.sum(axis=0)
        return {int(i): int(tot[i]) for i in np.flatnonzero(tot).tolist()}

    @property
    def native_ok(self) -> bool:
        """Whether a passed frame needs only the counting records (no callback to
        show it to, no socket keeping payloads), so native code may deliver it."""
        return not self.callbacks and not any(s.keep for s in self.sockets.values())

    def row(self, cpu: int, kthread: bool = False) -> int:
        """The counter row of CPU ``cpu``'s softirq (or, with ``kthread``, kthread) context."""
        return cpu % self.nr_cpus + (self.nr_cpus if kthread else 0)

    def records(self, row: int) -> tuple[I64, I64, I64, I64]:
        """What :func:`stack_rcv_one` counts into for one context row: (mib row, port
        table, socket counters, per-device counts)."""
        return self.mib[row], self.port_sock, self.sock_cnt[row], self.dev_cnt[row]

    def ensure_ifindex(self, ifindex: int) -> None:
        """Room in ``dev_cnt`` for a device's ifindex (called as devices are made)."""
        width = self.dev_cnt.shape[1]
        if ifindex >= width:
            with self._lock:
                grown = np.zeros((len(self.mib), max(2 * width, ifindex + 1)), np.int64)
                grown[:, :width] = self.dev_cnt
                self.dev_cnt = grown

    def udp_socket(self, port: int, keep: int = 0) -> UdpSink:
        """Bind a UDP sink on ``port`` (any address), like ``socket(); bind()``."""
        if not 0 < port < 65536:
            raise ValueError(f"port must be 1..65535, not {port}")
        if port in self.sockets:
            raise OSError(98, f"port {port} already bound")  # EADDRINUSE
        row = len(self.sockets)
        if row >= MAX_SOCKETS:
            raise OSError(105, f"no room for another UDP socket (at most {MAX_SOCKETS})")
        sink = self.sockets[port] = UdpSink(self, row, port, keep)
        self.port_sock[port] = row
        return sink

    def on_receive(self, callback: Callable[[SkbBatch], None]) -> None:
        """Call ``callback(batch)`` for every list of skbs the stack receives."""
        self.callbacks.append(callback)

    def netif_receive_skb_list(self, batch: SkbBatch, cpu: int = 0, *,
                               kthread: bool = False) -> None:
        n = len(batch)
        if not n:
            return
        with self._lock:
            self._receive(batch, self.row(cpu, kthread))

    def netif_receive_skb(self, batch: SkbBatch, cpu: int = 0, *,
                          kthread: bool = False) -> None:
        """One skb at a time (the path cpumap took before list delivery)."""
        for i in range(len(batch)):
            one = SkbBatch(batch.data[i:i + 1], batch.length[i:i + 1], batch.ifindex[i:i + 1],
                           batch.queue[i:i + 1], batch.meta[i:i + 1])
            self.netif_receive_skb_list(one, cpu, kthread=kthread)

    def _receive(self, batch: SkbBatch, row: int) -> None:
        n = len(batch)
        self.ensure_ifindex(int(batch.ifindex.max(initial=0)))
        self.mib[row, Mib.BATCHES] += 1
        sock = np.empty(n, np.int64)
        off = np.empty(n, np.int64)
        data = batch.data if batch.data.ndim == 2 and batch.data.shape[1] else \
            np.zeros((n, 1), np.uint8)
        _rcv_rows(data, batch.length.astype(np.int64, copy=False),
                  batch.ifindex.astype(np.int64, copy=False), self.mib[row], self.port_sock,
                  self.sock_cnt[row], self.dev_cnt[row], sock, off)
        keeping = [s for s in self.sockets.values() if len(s.received) < s.keep]
        for sink in keeping:
            for r in np.flatnonzero(sock == sink.row)[:sink.keep - len(sink.received)].tolist():
                sink.received.append(batch.data[r, int(off[r]):int(batch.length[r])].tobytes())
        for cb in self.callbacks:
            cb(batch)
