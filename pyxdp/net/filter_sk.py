"""The socket and SYN cookie helpers XDP gets from ``net/core/filter.c``.

``bpf_sk_lookup_tcp`` (#84), ``bpf_sk_lookup_udp`` (#85), ``bpf_sk_release``
(#86), ``bpf_skc_lookup_tcp`` (#99), ``bpf_tcp_check_syncookie`` (#100),
``bpf_tcp_gen_syncookie`` (#110) and ``bpf_tcp_raw_gen_syncookie_ipv4``/``_ipv6``,
``bpf_tcp_raw_check_syncookie_ipv4``/``_ipv6`` (#204-#207), with Linux 6.18's
checks in its order:

* lookups (``bpf_xdp_sk_lookup_*`` -> ``__bpf_sk_lookup``): a tuple of
  ``sizeof(tuple->ipv4)`` (12) or ``sizeof(tuple->ipv6)`` (36) bytes, flags 0, a
  ``netns_id`` (a u32) that is negative as an s32 (``BPF_F_CURRENT_NETNS``: the
  receiving device's namespace) or an id that namespace gave another
  (``SockTable.peers``), else NULL; the receiving device's ifindex is ``dif``.
  A found socket's address is its ``struct bpf_sock`` in the namespace's
  :class:`~pyxdp.net.inet_hashtables.SockTable` buffer, mapped read-only into
  the run. ``bpf_sk_release`` returns 0 (listeners and UDP sockets are not
  reference counted by a lookup, and pyxdp models no other).
* ``bpf_tcp_gen_syncookie``/``bpf_tcp_check_syncookie`` on a listener:
  ``-EINVAL`` for a header shorter than its struct, a ``th_len`` that is not
  ``doff * 4`` (gen), a socket that is no TCP listener, ``tcp_syncookies`` 0
  (check; gen says ``-ENOENT``), an IPv4 header for an ``IPV6_V6ONLY``
  socket or an IPv6 one for an IPv4 socket; ``-ENOENT`` for flags that are no
  SYN (gen: ``-EINVAL``) or no ACK (check), for a listener whose SYN queue did
  not overflow in the last two minutes (check), for ``tcp_syncookies`` 1 with a
  SYN queue that is not full (gen: pyxdp's never is) and for an invalid cookie;
  ``-EPROTONOSUPPORT`` for another IP version. A cookie generated counts as an
  overflow (``tcp_synq_overflow``). The result is ``cookie | mss << 32``.
* the raw helpers: ``-EINVAL`` for ``th_len`` below 20 or not ``doff * 4``
  (gen), ``-EACCES`` for an invalid cookie (check).

Cookies are :mod:`pyxdp.net.syncookies`'.

The map helpers on a sockmap or sockhash (``net/core/sock_map.c``, which
Linux's verifier lets XDP use: ``may_update_sockmap``):
``bpf_map_update_elem(map, key, sk, flags)`` puts the socket a lookup gave
(:meth:`~pyxdp.maps.sock_map.SocketMapBase.update_socket`);
``bpf_map_lookup_elem`` returns the slot's socket as a ``struct bpf_sock``
(mapped like a lookup's), a reference the program releases with
``bpf_sk_release`` (``bpf_map_delete_elem`` is the base helper's, the map's
own delete). On other maps they are the base helpers.
"""

from __future__ import annotations

import errno

from pyxdp.errors import HelperFault
from pyxdp.maps.sock_map import SocketMapBase
from pyxdp.net.fib import dev_net
from pyxdp.net.inet_hashtables import (
    AF_INET,
    AF_INET6,
    IPPROTO_TCP,
    IPPROTO_UDP,
    SK_BASE,
    SK_STRIDE,
    SOCK_TABLES,
    Sock,
    SockTable,
    TcpState,
)
from pyxdp.net.nf_conntrack import HZ, jiffies64
from pyxdp.net.syncookies import (
    IPV6_MIN_MTU,
    TCP_MSS_DEFAULT,
    TCP_SYNCOOKIE_VALID,
    cookie_check,
    cookie_init_sequence,
    tcp_parse_mss_option,
)
from pyxdp.vm.helpers import BASE_HELPERS, helper, neg
from pyxdp.vm.interpreter import Helper, Interpreter
from pyxdp.vm.map_space import map_at
from pyxdp.vm.memory import Region

__all__ = ["SK_HELPERS"]

SK_HELPERS: dict[int, Helper] = {}
M32 = 0xFFFF_FFFF
M64 = (1 << 64) - 1
S32_MAX = (1 << 31) - 1
TUPLE_V4, TUPLE_V6 = 12, 36  # sizeof(struct bpf_sock_tuple) members ipv4, ipv6
IPHDR, IPV6HDR, TCPHDR = 20, 40, 20
_MSS_CLAMP6 = IPV6_MIN_MTU - TCPHDR - IPV6HDR
# TCP flags (byte 13 of struct tcphdr)
_FIN, _SYN, _RST, _ACK = 0x01, 0x02, 0x04, 0x10


def _lookup(vm: Interpreter, r1: int, tup: int, size: int, netns_id: int, flags: int,
            protocol: int) -> int:
    """``__bpf_sk_lookup``: the socket's ``struct bpf_sock`` address, or 0."""
    fib, dif = dev_net(vm.context, r1, "socket lookup")
    net: SockTable = fib.sockets
    size &= M32
    if size == TUPLE_V4:
        family = AF_INET
    elif size == TUPLE_V6:
        family = AF_INET6
    else:
        return 0
    netns_id &= M32  # the XDP helpers take a u32
    if flags:
        return 0
    if netns_id <= S32_MAX:
        peer = net.peers.get(netns_id)
        if peer is None:
            return 0
        net = peer
    raw = vm.mem.read(tup, size)
    alen = 4 if family == AF_INET else 16
    saddr, daddr = raw[:alen], raw[alen:2 * alen]
    sport = int.from_bytes(raw[2 * alen:2 * alen + 2], "big")
    dport = int.from_bytes(raw[2 * alen + 2:2 * alen + 4], "big")
    sk = net.lookup(protocol, family, saddr, sport, daddr, dport, dif)
    if sk is None:
        return 0
    return _map_in(vm, sk)


def _map_in(vm: Interpreter, sk: Sock) -> int:
    """Map the socket's table into the run (once); the socket's ``struct bpf_sock``."""
    net = sk.table
    assert net is not None
    if not any(r.base == net.base for r in vm.mem.regions):
        vm.mem.add(Region("sockets", net.base, net.buf, writable=False))
    return sk.addr


def _sock(addr: int) -> Sock:
    """The socket a ``struct bpf_sock *`` argument points at."""
    table = SOCK_TABLES.get(addr & ~(SK_STRIDE - 1)) if addr >= SK_BASE else None
    sk = table.at(addr) if table is not None else None
    if sk is None:
        raise HelperFault(f"{addr:#x} is not a socket pointer of this run")
    return sk


_BASE_LOOKUP, _BASE_UPDATE = BASE_HELPERS[1].fn, BASE_HELPERS[2].fn


@helper(1, "map_lookup_elem", SK_HELPERS)
def _map_lookup_elem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    m = map_at(r1)
    if not isinstance(m, SocketMapBase):
        return _BASE_LOOKUP(vm, r1, r2, r3, r4, r5)
    sk = m.socket_at(vm.mem.read(r2, m.key_size))
    if not isinstance(sk, Sock) or sk.table is None:
        return 0
    return _map_in(vm, sk)


@helper(2, "map_update_elem", SK_HELPERS)
def _map_update_elem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    m = map_at(r1)
    if not isinstance(m, SocketMapBase):
        return _BASE_UPDATE(vm, r1, r2, r3, r4, r5)
    return m.update_socket(vm.mem.read(r2, m.key_size), _sock(r3), r4) & M64


@helper(84, "sk_lookup_tcp", SK_HELPERS)
def _sk_lookup_tcp(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _lookup(vm, r1, r2, r3, r4, r5, IPPROTO_TCP)


@helper(85, "sk_lookup_udp", SK_HELPERS)
def _sk_lookup_udp(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _lookup(vm, r1, r2, r3, r4, r5, IPPROTO_UDP)


@helper(99, "skc_lookup_tcp", SK_HELPERS)
def _skc_lookup_tcp(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _lookup(vm, r1, r2, r3, r4, r5, IPPROTO_TCP)


@helper(86, "sk_release", SK_HELPERS)
def _sk_release(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    _sock(r1)
    return 0


def _time_between32(t: int, lo: int, hi: int) -> bool:
    return (hi - lo) & M32 >= (t - lo) & M32


def _headers(vm: Interpreter, sk: Sock, iph: int, iph_len: int, th_bytes: bytes
             ) -> tuple[bytes, bool] | int:
    """The IP header (the version picks the family) checked against the socket, or
    -errno."""
    if iph_len < IPHDR:
        return -errno.EINVAL
    version = vm.mem.load(iph, 1) >> 4
    if version == 4:
        if sk.family == AF_INET6 and sk.ipv6only:
            return -errno.EINVAL
        return vm.mem.read(iph, IPHDR), False
    if version == 6:
        if iph_len < IPV6HDR:
            return -errno.EINVAL
        if sk.family != AF_INET6:
            return -errno.EINVAL
        return vm.mem.read(iph, IPV6HDR), True
    return -errno.EPROTONOSUPPORT


@helper(100, "tcp_check_syncookie", SK_HELPERS)
def _tcp_check_syncookie(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int
                         ) -> int:
    sk = _sock(r1)
    th_len = r5 & M32
    if th_len < TCPHDR:
        return neg(errno.EINVAL)
    if sk.protocol != IPPROTO_TCP or sk.state != TcpState.TCP_LISTEN:
        return neg(errno.EINVAL)
    assert sk.table is not None
    if not sk.table.tcp_syncookies:
        return neg(errno.EINVAL)
    th = vm.mem.read(r4, TCPHDR)
    if not th[13] & _ACK or th[13] & (_RST | _SYN):
        return neg(errno.ENOENT)
    if r3 & M32 < IPHDR:
        return neg(errno.EINVAL)
    now = jiffies64()
    last = sk.last_overflow
    # tcp_synq_no_recent_overflow: no cookie went out in the last two minutes
    if last is None or not _time_between32(now, last - HZ, last + TCP_SYNCOOKIE_VALID):
        return neg(errno.ENOENT)
    got = _headers(vm, sk, r2, r3 & M32, th)
    if isinstance(got, int):
        return neg(-got)
    iph, v6 = got
    return 0 if cookie_check(iph, th, v6=v6) > 0 else neg(errno.ENOENT)


@helper(110, "tcp_gen_syncookie", SK_HELPERS)
def _tcp_gen_syncookie(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    sk = _sock(r1)
    th_len = r5 & M32
    if th_len < TCPHDR or th_len != (vm.mem.load(r4 + 12, 1) >> 4) * 4:
        return neg(errno.EINVAL)
    if sk.protocol != IPPROTO_TCP or sk.state != TcpState.TCP_LISTEN:
        return neg(errno.EINVAL)
    assert sk.table is not None
    if not sk.table.tcp_syncookies:
        return neg(errno.ENOENT)
    th = vm.mem.read(r4, th_len)
    if not th[13] & _SYN or th[13] & (_ACK | _FIN | _RST):
        return neg(errno.EINVAL)
    got = _headers(vm, sk, r2, r3 & M32, th)
    if isinstance(got, int):
        return neg(-got)
    iph, v6 = got
    # tcp_get_syncookie_mss: cookies only when tcp_syncookies is 2 (the queue never fills)
    if sk.table.tcp_syncookies != 2:
        return neg(errno.ENOENT)
    mss = tcp_parse_mss_option(th, sk.user_mss) or (_MSS_CLAMP6 if v6 else TCP_MSS_DEFAULT)
    cookie, mss = cookie_init_sequence(iph, th, mss, v6=v6)
    now = jiffies64()  # tcp_synq_overflow
    if sk.last_overflow is None or not _time_between32(now, sk.last_overflow,
                                                       sk.last_overflow + HZ):
        sk.last_overflow = now
    return cookie | mss << 32


def _raw_gen(vm: Interpreter, iph: int, th: int, th_len: int, v6: bool) -> int:
    th_len &= M32
    if th_len < TCPHDR or th_len != (vm.mem.load(th + 12, 1) >> 4) * 4:
        return neg(errno.EINVAL)
    hdr = vm.mem.read(th, th_len)
    mss = tcp_parse_mss_option(hdr, 0) or (_MSS_CLAMP6 if v6 else TCP_MSS_DEFAULT)
    cookie, mss = cookie_init_sequence(vm.mem.read(iph, IPV6HDR if v6 else IPHDR), hdr, mss,
                                       v6=v6)
    return cookie | mss << 32


def _raw_check(vm: Interpreter, iph: int, th: int, v6: bool) -> int:
    ok = cookie_check(vm.mem.read(iph, IPV6HDR if v6 else IPHDR), vm.mem.read(th, TCPHDR),
                      v6=v6)
    return 0 if ok > 0 else neg(errno.EACCES)


@helper(204, "tcp_raw_gen_syncookie_ipv4", SK_HELPERS)
def _raw_gen4(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _raw_gen(vm, r1, r2, r3, False)


@helper(205, "tcp_raw_gen_syncookie_ipv6", SK_HELPERS)
def _raw_gen6(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _raw_gen(vm, r1, r2, r3, True)


@helper(206, "tcp_raw_check_syncookie_ipv4", SK_HELPERS)
def _raw_check4(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _raw_check(vm, r1, r2, False)


@helper(207, "tcp_raw_check_syncookie_ipv6", SK_HELPERS)
def _raw_check6(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _raw_check(vm, r1, r2, True)
