"""A network namespace's sockets, as the BPF socket lookups find them.

What ``bpf_sk_lookup_tcp``/``_udp`` and ``bpf_skc_lookup_tcp``
(``net/core/filter.c``: ``sk_lookup``) ask the kernel: TCP's established and
listening hash tables (``__inet_lookup`` of ``net/ipv4/inet_hashtables.c``,
``__inet6_lookup`` of ``net/ipv6/inet6_hashtables.c``) and UDP's table
(``__udp4_lib_lookup``/``__udp6_lib_lookup``), with their matching rules:

* TCP: an established socket whose four-tuple is the packet's first; else the
  best listener on the destination port - bound to the destination address
  before one bound to the wildcard, an IPv4 socket before an IPv6 one for an
  IPv4 packet (``compute_score``), a socket bound to a device only for that
  device. An IPv6 socket without ``IPV6_V6ONLY`` bound to ``::`` (or to the
  v4-mapped address) also takes IPv4.
* UDP: the highest score of ``compute_score`` (``net/ipv4/udp.c``): the bound
  address (exact, else the wildcard pass), +4 for a matching connected peer
  address, +4 for a matching peer port, IPv4 sockets before IPv6 ones.

A :class:`SockTable` belongs to a namespace (:attr:`pyxdp.net.fib.Fib.sockets`,
which :class:`~pyxdp.net.netdevice.Host`'s stack fills with its UDP sockets, and
which a bare Collection's ``TestRunEnv.fib`` exposes): ``tcp_listen``,
``tcp_established`` (either end of a connection: ``passive`` for the one
``accept()`` gave) and ``udp_bind`` register sockets, :meth:`SockTable.close`
removes one. Each socket's ``struct bpf_sock`` (the fields a BPF program reads
through the pointer a lookup returns, in Linux's byte orders) lives in the
table's buffer, which the helpers map read-only into the run. The buffer is also
the state the JIT's native lookups scan in place (a flat array of slots, its
words :data:`SK_DESC`): a slot's ``struct bpf_sock`` holds what a lookup
matches on, and the byte at :data:`SK_FLAGS` past it what ``struct bpf_sock``
lacks (``IPV6_V6ONLY``); a free slot is all zero. The :class:`Sock` objects are
the Python API's handles on the slots.

Simplified: no time-wait or request sockets (so ``bpf_skc_lookup_tcp`` finds
what ``bpf_sk_lookup_tcp`` finds), no ``SO_REUSEPORT`` groups, no
``sk_lookup`` BPF programs, no VRFs, and the SYN and accept queues are never
full.
"""

from __future__ import annotations

import errno
import ipaddress
import itertools
import struct
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from pyxdp.maps.sock_map import SocketMapBase
from pyxdp.net.syncookies import SECRETS
from pyxdp.uapi import inet
from pyxdp.uapi.bpf import BPF_SOCK_SIZE, BpfSock
from pyxdp.uapi.inet import IPPROTO_TCP, IPPROTO_UDP

__all__ = ["IPPROTO_TCP", "IPPROTO_UDP", "SKF_OVERFLOW", "SKF_V6ONLY", "SK_BASE", "SK_DESC",
           "SK_FLAGS", "SK_OVERFLOW", "SK_SLOT", "SK_STRIDE", "SK_USER_MSS",
           "SOCK_TABLES", "Sock", "SockTable", "TcpState"]

AF_INET, AF_INET6 = 2, 10
SOCK_STREAM, SOCK_DGRAM = 1, 2
SK_SLOT = 128  # bytes per socket in the table's buffer (a struct bpf_sock is 80)
MAX_SOCKS = 1024
# Fake addresses of the tables' buffers: table k at SK_BASE + k * SK_STRIDE (2^23 tables
# before the next region; every Fib makes one).
SK_BASE = 0x0000_6800_0000_0000
SK_STRIDE = 1 << 20
LOOPBACK4_IPV6 = bytes([127, 0, 0, 6])  # an IPv6 socket's IPv4 address (inet6_bind)
_V4MAPPED = bytes(10) + b"\xff\xff"
NO_QUEUE_MAPPING = -1
TCP_MIN_MSS, MAX_TCP_WINDOW = 88, 32767
# Past a slot's struct bpf_sock: a flags byte (IPV6_V6ONLY, whether a SYN queue
# overflow was recorded), the u16 TCP_MAXSEG, the u64 jiffies of that overflow.
SK_FLAGS = BPF_SOCK_SIZE
SKF_V6ONLY, SKF_OVERFLOW = 1, 2
SK_USER_MSS = SK_FLAGS + 2
SK_OVERFLOW = SK_FLAGS + 8
# The words native code reads of a table (SockTable.desc): the buffer's host address,
# its fake address, the slots to scan (one past the highest in use), the syncookie
# secrets' host address (pyxdp.net.syncookies.SECRETS), net.ipv4.tcp_syncookies.
SK_DESC = {name: i for i, name in enumerate(("buf", "base", "nslots", "secrets",
                                             "syncookies"))}

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class TcpState(IntEnum):
    """``enum`` of ``include/net/tcp_states.h`` (what ``bpf_sock.state`` reads)."""

    TCP_ESTABLISHED = inet.TCP_ESTABLISHED
    TCP_CLOSE = inet.TCP_CLOSE
    TCP_LISTEN = inet.TCP_LISTEN


def _v4_of(a: bytes) -> bytes:
    """The IPv4 address an IPv6 socket keeps beside its IPv6 one (``inet_rcv_saddr``,
    ``inet_daddr``): the v4-mapped address, 0 for ``::``, else ``LOOPBACK4_IPV6``."""
    if a[:12] == _V4MAPPED:
        return a[12:]
    return bytes(4) if not any(a) else LOOPBACK4_IPV6


@dataclass(eq=False)
class Sock:
    """One socket: family, protocol, state, its local (``src``) and peer (``dst``)
    address and port (packed addresses; ports host order), and the options a lookup
    or a program sees."""

    family: int
    protocol: int
    state: int
    src: bytes
    src_port: int
    dst: bytes
    dst_port: int
    bound_dev_if: int = 0
    mark: int = 0
    priority: int = 0
    ipv6only: bool = False
    user_mss: int = 0  # TCP_MAXSEG
    passive: bool = False  # an established TCP socket accept() gave (not connect())
    table: SockTable | None = field(default=None, repr=False)
    slot: int = -1
    cookie: int = 0  # sock_gen_cookie: unique, never 0 (given when the table takes it)
    # The socket maps holding it (sock_map_close removes it from them).
    sock_maps: list[SocketMapBase] = field(default_factory=list, repr=False)

    @property
    def last_overflow(self) -> int | None:
        """jiffies of the last SYN queue overflow (``tcp_synq_overflow``: a cookie was
        sent); None: never. Kept in the socket's slot, where native code updates it."""
        if self.table is None:
            return self.__dict__.get("_overflow")
        at = self.slot * SK_SLOT
        buf = self.table.buf
        if not buf[at + SK_FLAGS] & SKF_OVERFLOW:
            return None
        return int.from_bytes(buf[at + SK_OVERFLOW:at + SK_OVERFLOW + 8], "little")

    @last_overflow.setter
    def last_overflow(self, jiffies: int | None) -> None:
        if self.table is None:
            self.__dict__["_overflow"] = jiffies
            return
        at = self.slot * SK_SLOT
        buf = self.table.buf
        buf[at + SK_FLAGS] = (buf[at + SK_FLAGS] & ~SKF_OVERFLOW) | (
            0 if jiffies is None else SKF_OVERFLOW)
        buf[at + SK_OVERFLOW:at + SK_OVERFLOW + 8] = (jiffies or 0).to_bytes(8, "little")

    @property
    def type(self) -> int:
        return SOCK_STREAM if self.protocol == IPPROTO_TCP else SOCK_DGRAM

    @property
    def addr(self) -> int:
        """The address a BPF program holds for this socket (its ``struct bpf_sock``)."""
        assert self.table is not None and self.slot >= 0, "the socket is closed"
        return self.table.base + self.slot * SK_SLOT

    def rcv_saddr4(self) -> bytes:
        return self.src if self.family == AF_INET else _v4_of(self.src)

    def daddr4(self) -> bytes:
        if self.family == AF_INET:
            return self.dst
        if self.protocol == IPPROTO_TCP and not self.passive and self.dst[:12] != _V4MAPPED:
            return bytes(4)  # tcp_v6_connect leaves inet_daddr alone (syn_recv_sock sets it)
        return _v4_of(self.dst)

    def bpf_sock(self) -> bytes:
        """``struct bpf_sock`` as ``bpf_sock_convert_ctx_access`` reads the socket."""
        b = bytearray(BPF_SOCK_SIZE)
        S = BpfSock
        struct.pack_into("<6I", b, S.bound_dev_if, self.bound_dev_if, self.family, self.type,
                         self.protocol, self.mark, self.priority)
        b[S.src_ip4:S.src_ip4 + 4] = self.rcv_saddr4()
        b[S.dst_ip4:S.dst_ip4 + 4] = self.daddr4()
        if self.family == AF_INET6:
            b[S.src_ip6:S.src_ip6 + 16] = self.src
            b[S.dst_ip6:S.dst_ip6 + 16] = self.dst
        elif self.protocol == IPPROTO_TCP and self.state == TcpState.TCP_ESTABLISHED:
            # sk_rcv_saddr_set/sk_daddr_set (connect, accept) keep v4-mapped copies;
            # bind() sets the IPv4 address alone
            b[S.src_ip6:S.src_ip6 + 16] = _V4MAPPED + self.src
            b[S.dst_ip6:S.dst_ip6 + 16] = _V4MAPPED + self.dst
        struct.pack_into("<I", b, S.src_port, self.src_port)
        struct.pack_into(">H", b, S.dst_port, self.dst_port)
        struct.pack_into("<Ii", b, S.state, self.state, NO_QUEUE_MAPPING)
        return bytes(b)


def _packed(addr: str | Address | bytes, family: int | None = None) -> tuple[int, bytes]:
    if isinstance(addr, bytes):
        if len(addr) not in (4, 16):
            raise ValueError(f"a packed address is 4 or 16 bytes, not {len(addr)}")
        return (AF_INET if len(addr) == 4 else AF_INET6), addr
    a = ipaddress.ip_address(addr)
    return (AF_INET if a.version == 4 else AF_INET6), a.packed


def _port(port: int) -> int:
    if not 0 < port < 65536:
        raise ValueError(f"port must be 1..65535, not {port}")
    return port


_table_numbers = itertools.count()
_cookies = itertools.count(1)
# Live tables by base address, for helpers that get a socket pointer.
SOCK_TABLES: weakref.WeakValueDictionary[int, SockTable] = weakref.WeakValueDictionary()


class SockTable:
    """The sockets of one network namespace (its TCP and UDP hash tables).

    Typical use, through a test run's environment (a Host's stack adds its UDP
    sockets itself)::

        env.fib.sockets.tcp_listen("127.0.0.1", 8080)
        env.fib.sockets.udp_bind("::", 53)            # both families, like [::]:53
        env.fib.sockets.tcp_established("10.0.0.1", 80, "10.0.0.2", 40000)
    """

    def __init__(self) -> None:
        self.socks: dict[int, Sock] = {}  # by slot
        self.base = SK_BASE + next(_table_numbers) * SK_STRIDE
        self._buf: bytearray | None = None
        # Namespaces this one knows by id (peernet2id), for a lookup's netns_id.
        self.peers: dict[int, SockTable] = {}
        self.desc = np.zeros(len(SK_DESC), np.uint64)
        self.desc[SK_DESC["base"]] = self.base
        self.desc[SK_DESC["secrets"]] = SECRETS.ctypes.data
        self.tcp_syncookies = 1
        self._view: np.ndarray | None = None
        SOCK_TABLES[self.base] = self

    def __len__(self) -> int:
        return len(self.socks)

    @property
    def tcp_syncookies(self) -> int:
        """net.ipv4.tcp_syncookies: 1 sends cookies when the SYN queue overflows, 2
        always (bpf_tcp_gen_syncookie gives one only then: the queue never fills here)."""
        return int(self.desc[SK_DESC["syncookies"]])

    @tcp_syncookies.setter
    def tcp_syncookies(self, value: int) -> None:
        if value not in (0, 1, 2):
            raise ValueError(f"tcp_syncookies is 0, 1 or 2, not {value}")
        self.desc[SK_DESC["syncookies"]] = value

    @property
    def buf(self) -> bytearray:
        """The buffer of every socket's ``struct bpf_sock`` (made on first use)."""
        if self._buf is None:
            buf = bytearray(MAX_SOCKS * SK_SLOT)
            # the view pins the bytearray (it never resizes) and gives its address
            self._view = np.frombuffer(buf, np.uint8)
            self.desc[SK_DESC["buf"]] = self._view.ctypes.data
            self._buf = buf
        return self._buf

    def native_desc(self) -> int:
        """The host address of ``desc`` for native code (the buffer made first)."""
        _ = self.buf
        return int(self.desc.ctypes.data)

    def _in_order(self) -> Iterator[Sock]:
        """The sockets in slot order, as the native lookups scan them."""
        return (self.socks[k] for k in sorted(self.socks))

    def _add(self, sk: Sock) -> Sock:
        slot = next((i for i in range(MAX_SOCKS) if i not in self.socks), None)
        if slot is None:
            raise OSError(errno.ENOBUFS, f"no room for another socket (at most {MAX_SOCKS})")
        sk.table, sk.slot = self, slot
        sk.cookie = next(_cookies)
        self.socks[slot] = sk
        self.buf[slot * SK_SLOT:slot * SK_SLOT + BPF_SOCK_SIZE] = sk.bpf_sock()
        self.buf[slot * SK_SLOT + SK_FLAGS] = SKF_V6ONLY if sk.ipv6only else 0
        self.buf[slot * SK_SLOT + SK_USER_MSS:slot * SK_SLOT + SK_USER_MSS + 2] = \
            (sk.user_mss & 0xFFFF).to_bytes(2, "little")
        sk.last_overflow = sk.__dict__.pop("_overflow", None)
        self.desc[SK_DESC["nslots"]] = max(self.socks) + 1
        return sk

    def _bound(self, sk: Sock) -> None:
        """``inet_csk_get_port``/``udp_lib_get_port`` without SO_REUSEADDR: a port bound
        by a socket of the same protocol on an overlapping address is taken."""
        for o in self.socks.values():
            if o.protocol != sk.protocol or o.src_port != sk.src_port:
                continue
            if sk.protocol == IPPROTO_TCP and o.state == TcpState.TCP_ESTABLISHED:
                continue
            if sk.protocol == IPPROTO_TCP and sk.state == TcpState.TCP_ESTABLISHED:
                continue
            if self._overlap(o, sk):
                raise OSError(errno.EADDRINUSE, f"port {sk.src_port} already bound")

    @staticmethod
    def _overlap(a: Sock, b: Sock) -> bool:
        if a.family == b.family:
            return not any(a.src) or not any(b.src) or a.src == b.src
        v4, v6 = (a, b) if a.family == AF_INET else (b, a)
        if v6.ipv6only:
            return False
        return not any(v6.src) or not any(v4.src) or _v4_of(v6.src) == v4.src

    def tcp_listen(self, addr: str | Address | bytes, port: int, *, ipv6only: bool = False,
                   dev: int = 0, user_mss: int = 0, mark: int = 0,
                   priority: int = 0) -> Sock:
        """A TCP socket bound to ``addr``:``port`` and listening."""
        if user_mss and not TCP_MIN_MSS <= user_mss <= MAX_TCP_WINDOW:
            # do_tcp_setsockopt's TCP_MAXSEG range
            raise ValueError(f"user_mss must be 0 or {TCP_MIN_MSS}..{MAX_TCP_WINDOW}, "
                             f"not {user_mss}")
        family, a = _packed(addr)
        sk = Sock(family, IPPROTO_TCP, TcpState.TCP_LISTEN, a, _port(port), bytes(len(a)), 0,
                  dev, mark, priority, ipv6only and family == AF_INET6, user_mss)
        self._bound(sk)
        return self._add(sk)

    def tcp_established(self, local: str | Address | bytes, lport: int,
                        remote: str | Address | bytes, rport: int, *, passive: bool = False,
                        dev: int = 0, mark: int = 0, priority: int = 0) -> Sock:
        """An established TCP connection from ``local``:``lport`` to ``remote``:``rport``:
        the socket ``connect()`` made, or with ``passive`` the one ``accept()`` gave."""
        family, a = _packed(local)
        rfamily, r = _packed(remote)
        if rfamily != family:
            raise ValueError("local and remote addresses are of different families")
        sk = Sock(family, IPPROTO_TCP, TcpState.TCP_ESTABLISHED, a, _port(lport), r,
                  _port(rport), dev, mark, priority, passive=passive)
        if any(self._tcp_key(o) == self._tcp_key(sk) for o in self.socks.values()):
            raise OSError(errno.EADDRINUSE, "the four-tuple is taken")
        return self._add(sk)

    @staticmethod
    def _tcp_key(sk: Sock) -> tuple[object, ...]:
        return (sk.protocol, sk.state, sk.src, sk.src_port, sk.dst, sk.dst_port)

    def udp_bind(self, addr: str | Address | bytes, port: int, *,
                 connect: tuple[str | Address | bytes, int] | None = None,
                 ipv6only: bool = False, dev: int = 0, mark: int = 0,
                 priority: int = 0) -> Sock:
        """A UDP socket bound to ``addr``:``port``, connected to ``connect`` if given."""
        family, a = _packed(addr)
        r, rport, state = bytes(len(a)), 0, TcpState.TCP_CLOSE
        if connect is not None:
            rfamily, r = _packed(connect[0])
            if rfamily != family:
                raise ValueError("local and remote addresses are of different families")
            rport, state = _port(connect[1]), TcpState.TCP_ESTABLISHED
        sk = Sock(family, IPPROTO_UDP, state, a, _port(port), r, rport, dev, mark, priority,
                  ipv6only and family == AF_INET6)
        self._bound(sk)
        return self._add(sk)

    def close(self, sk: Sock) -> None:
        """Remove ``sk`` (``close()``): lookups no longer find it, socket maps drop it."""
        if sk.table is not self or self.socks.get(sk.slot) is not sk:
            raise ValueError("the socket is not in this table")
        for m in list(sk.sock_maps):
            m.remove_socket(sk)
        del self.socks[sk.slot]
        overflow = sk.last_overflow
        self.buf[sk.slot * SK_SLOT:(sk.slot + 1) * SK_SLOT] = bytes(SK_SLOT)
        self.desc[SK_DESC["nslots"]] = max(self.socks, default=-1) + 1
        sk.table, sk.slot = None, -1
        sk.last_overflow = overflow

    def at(self, addr: int) -> Sock | None:
        """The socket whose ``struct bpf_sock`` is at ``addr``."""
        off = addr - self.base
        if off < 0 or off % SK_SLOT:
            return None
        return self.socks.get(off // SK_SLOT)

    # -- lookups ----------------------------------------------------------------------------
    @staticmethod
    def _dev_ok(sk: Sock, dif: int) -> bool:
        return not sk.bound_dev_if or sk.bound_dev_if == dif

    def lookup(self, protocol: int, family: int, saddr: bytes, sport: int, daddr: bytes,
               dport: int, dif: int = 0) -> Sock | None:
        """``sk_lookup``: the socket a packet from ``saddr``:``sport`` to
        ``daddr``:``dport`` (packed addresses, host-order ports) arriving on device
        ``dif`` belongs to."""
        if protocol == IPPROTO_TCP:
            for sk in self._in_order():
                if sk.protocol == IPPROTO_TCP and sk.state == TcpState.TCP_ESTABLISHED and \
                        sk.family == family and \
                        sk.dst == saddr and sk.dst_port == sport and sk.src == daddr and \
                        sk.src_port == dport and self._dev_ok(sk, dif):
                    return sk
            return self._best(protocol, family, saddr, sport, daddr, dport, dif)
        return self._best(protocol, family, saddr, sport, daddr, dport, dif)

    def _local_match(self, sk: Sock, family: int, daddr: bytes, wildcard: bool) -> bool:
        """Whether ``sk`` is bound to ``daddr`` (or, on the wildcard pass, to any)."""
        want = bytes(len(daddr)) if wildcard else daddr
        if sk.family == family:
            return sk.src == want
        if family == AF_INET and sk.family == AF_INET6 and not sk.ipv6only:
            return sk.src == (bytes(16) if wildcard else _V4MAPPED + daddr)
        return False

    def _best(self, protocol: int, family: int, saddr: bytes, sport: int, daddr: bytes,
              dport: int, dif: int) -> Sock | None:
        for wildcard in (False, True):  # the exact address, then INADDR_ANY/in6addr_any
            best, hiscore = None, 0
            for sk in self._in_order():
                if sk.protocol != protocol or sk.src_port != dport:
                    continue
                if protocol == IPPROTO_TCP and sk.state != TcpState.TCP_LISTEN:
                    continue
                if not self._local_match(sk, family, daddr, wildcard) or \
                        not self._dev_ok(sk, dif):
                    continue
                score = 2 if sk.bound_dev_if else 1
                if protocol == IPPROTO_UDP:
                    score = 2 if sk.family == family else 1
                    if sk.dst_port:  # connected: the peer must be the packet's source
                        peer = sk.dst if sk.family == family else sk.dst[12:]
                        if peer != saddr or sk.dst_port != sport:
                            continue
                        score += 8
                    score += 4 if sk.bound_dev_if else 0
                elif sk.family == family:
                    score += 1
                if score > hiscore:
                    best, hiscore = sk, score
            if best is not None:
                return best
        return None
