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

What the kernel checks on the way is checked here, with the kernel's SNMP
counters (:data:`SNMP_NAMES`, ``/proc/net/snmp`` names) and drop reasons
(``enum skb_drop_reason``, what the ``skb:kfree_skb`` tracepoint reports):
``eth_type_trans``'s packet type against the device's address (another
host's frame is dropped by IP), VLAN tags on a host without VLAN devices,
the IPv4 header (version, length, checksum, total length; trailing padding
trimmed), options that overrun the header, martian sources and
destinations, the input route (``ip_route_input_noref``/``ip6_route_input``
against the namespace's FIB, :class:`~pyxdp.net.fib.Fib`, in machine code:
:mod:`pyxdp.net.route`; local and broadcast destinations are delivered, any
other is the forwarding path, an error with forwarding off: ``ip_error``,
``ip6_forward``, ``ip6_pkt_drop``; on a list, an skb to the destination of
the routed skb before it reuses that route, ``ip_route_use_hint``), IPv6's header,
addresses, hop-by-hop/destination options and routing headers, UDP's length
and checksum (a missing one is an error over IPv6), TCP's header and
checksum, ICMP's checksum. A differential test runs the same frames through
Linux's XDP_PASS path and compares the counters.

Simplified: no forwarding (with it on, what is not local is dropped as
with it off), no policy rules on input (:mod:`pyxdp.net.route`), no
``fib_validate_source`` (rp_filter, local sources); of multicast groups only
all-hosts and all-nodes are joined; no reassembly (fragments are
counted and held, never completed), no replies (ICMP errors, TCP resets,
echo replies), no TCP or raw sockets; UDP sinks are bound to a port on both
families (like ``[::]:port`` without ``IPV6_V6ONLY``), and a Host's sinks are
sockets of its namespace's :class:`~pyxdp.net.inet_hashtables.SockTable` too
(what ``bpf_sk_lookup_udp`` finds); one stack per
:class:`~pyxdp.net.netdevice.Host`, shared by its devices.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import numpy.typing as npt
from numba.extending import intrinsic

from pyxdp.errors import BadArgument
from pyxdp.net.atomic import call_by_address, spin_lock, spin_unlock
from pyxdp.net.fib import AF_INET, AF_INET6, Fib, RouteType
from pyxdp.net.native import njit
from pyxdp.net.route import input_route_address
from pyxdp.uapi.dropreason import SkbDropReason

__all__ = ["MAX_SOCKETS", "Mib", "Rt", "SkbBatch", "Stack", "StackStats", "UdpSink",
           "context_lock", "context_unlock", "stack_rcv_one"]


U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
ETH_P_IP, ETH_P_IPV6, ETH_P_ARP = 0x0800, 0x86DD, 0x0806
ETH_P_8021Q, ETH_P_8021AD = 0x8100, 0x88A8
ETH_P_802_3_MIN = 0x0600
IPPROTO_ICMP, IPPROTO_IGMP, IPPROTO_TCP, IPPROTO_UDP = 1, 2, 6, 17
IPPROTO_ICMPV6, IPPROTO_UDPLITE = 58, 136
NEXTHDR_HOP, NEXTHDR_ROUTING, NEXTHDR_FRAGMENT, NEXTHDR_NONE, NEXTHDR_DEST = 0, 43, 44, 59, 60
IPV6_SRCRT_TYPE_4 = 4  # segment routing: refused while seg6_enabled is off (the default)
CHECKSUM_BREAK = 76  # net/core/skbuff.h: shorter payloads are checksummed at once
MAX_SOCKETS = 256  # UDP sinks one stack can bind (rows of the socket counters)

# skb->pkt_type (include/uapi/linux/if_packet.h)
PACKET_HOST, PACKET_BROADCAST, PACKET_MULTICAST, PACKET_OTHERHOST = 0, 1, 2, 3


class Mib:
    """Columns of the per-CPU counter record (:attr:`Stack.mib`)."""

    RECEIVED, BATCHES, IPV4, IPV6, OTHER, UDP_DELIVERED, BYTES = range(7)
    SIZE = 7


class Rt:
    """Words of a context's input route record (:attr:`Stack.route`): the compiled
    lookup's address (:func:`~pyxdp.net.route.input_route_address`), the FIB's
    ``fib_desc`` words and the key buffer's addresses; ``LIST``: the skbs come as a
    list, whose route hint is the last routed skb's family, destination (two words)
    and route type (``HFAM`` 0: none); ``NOHINT``: custom rules (bit 1 IPv4, 2
    IPv6), which disable hints; ``LOOKUPS``: FIB lookups made; ``LOCK``: the
    context's lock (:func:`context_lock`)."""

    FN, FIB, KEY, LIST, HFAM, HK0, HK1, HTYPE, NOHINT, LOOKUPS, LOCK = range(11)
    SIZE = 11


RT_FN, RT_FIB, RT_KEY, RT_LIST = Rt.FN, Rt.FIB, Rt.KEY, Rt.LIST
RT_HFAM, RT_HK0, RT_HK1, RT_HTYPE = Rt.HFAM, Rt.HK0, Rt.HK1, Rt.HTYPE
RT_NOHINT, RT_LOOKUPS, RT_LOCK = Rt.NOHINT, Rt.LOOKUPS, Rt.LOCK


# The kernel's SNMP counters this stack keeps, by the names /proc/net/snmp,
# /proc/net/netstat and /proc/net/snmp6 print (Tcp counts both families, as
# in Linux).
SNMP_NAMES: tuple[str, ...] = (
    "Ip:InReceives", "Ip:InHdrErrors", "Ip:InUnknownProtos", "Ip:InDelivers",
    "Ip:ReasmReqds", "IpExt:InTruncatedPkts", "IpExt:InCsumErrors", "IpExt:InBcastPkts",
    "IpExt:InMcastPkts",
    "Udp:InDatagrams", "Udp:NoPorts", "Udp:InErrors", "Udp:InCsumErrors", "Udp:IgnoredMulti",
    "Tcp:InSegs", "Tcp:InErrs", "Tcp:InCsumErrors",
    "Icmp:InMsgs", "Icmp:InErrors", "Icmp:InCsumErrors",
    "Ip6InReceives", "Ip6InHdrErrors", "Ip6InUnknownProtos",
    "Ip6InTruncatedPkts", "Ip6InDelivers", "Ip6InMcastPkts", "Ip6ReasmReqds",
    "Udp6InDatagrams", "Udp6NoPorts", "Udp6InErrors", "Udp6InCsumErrors",
    "Udp6IgnoredMulti",
    "Icmp6InMsgs", "Icmp6InErrors", "Icmp6InCsumErrors",
    "Ip:InAddrErrors", "Ip6InAddrErrors", "Ip6InNoRoutes",
)
(IP_INRECEIVES, IP_INHDRERRORS, IP_INUNKNOWNPROTOS, IP_INDELIVERS, IP_REASMREQDS,
 IP_INTRUNCATED, IP_INCSUMERRORS, IP_INBCAST, IP_INMCAST,
 UDP_INDATAGRAMS, UDP_NOPORTS, UDP_INERRORS, UDP_INCSUMERRORS, UDP_IGNOREDMULTI,
 TCP_INSEGS, TCP_INERRS, TCP_INCSUMERRORS,
 ICMP_INMSGS, ICMP_INERRORS, ICMP_INCSUMERRORS,
 IP6_INRECEIVES, IP6_INHDRERRORS, IP6_INUNKNOWNPROTOS, IP6_INTRUNCATED,
 IP6_INDELIVERS, IP6_INMCAST, IP6_REASMREQDS,
 UDP6_OFF, _u6b, _u6c, _u6d, _u6e,
 ICMP6_INMSGS, ICMP6_INERRORS, ICMP6_INCSUMERRORS,
 IP_INADDRERRORS, IP6_INADDRERRORS, IP6_INNOROUTES) = range(len(SNMP_NAMES))
NSNMP = len(SNMP_NAMES)
UDP6_DELTA = UDP6_OFF - UDP_INDATAGRAMS  # the Udp6 columns mirror the Udp ones

# numba reads module-level integers as constants.
M_RECEIVED = Mib.RECEIVED
M_IPV4 = Mib.IPV4
M_IPV6 = Mib.IPV6
M_OTHER = Mib.OTHER
M_UDP_DELIVERED = Mib.UDP_DELIVERED
M_BYTES = Mib.BYTES
R_NOT_SPECIFIED = int(SkbDropReason.NOT_SPECIFIED)
R_NO_SOCKET = int(SkbDropReason.NO_SOCKET)
R_PKT_TOO_SMALL = int(SkbDropReason.PKT_TOO_SMALL)
R_TCP_CSUM = int(SkbDropReason.TCP_CSUM)
R_UDP_CSUM = int(SkbDropReason.UDP_CSUM)
R_OTHERHOST = int(SkbDropReason.OTHERHOST)
R_IP_CSUM = int(SkbDropReason.IP_CSUM)
R_IP_INHDR = int(SkbDropReason.IP_INHDR)
R_IP_NOPROTO = int(SkbDropReason.IP_NOPROTO)
R_UNHANDLED_PROTO = int(SkbDropReason.UNHANDLED_PROTO)
R_ICMP_CSUM = int(SkbDropReason.ICMP_CSUM)
R_INVALID_PROTO = int(SkbDropReason.INVALID_PROTO)
R_IP_INVALID_SOURCE = int(SkbDropReason.IP_INVALID_SOURCE)
R_IP_INVALID_DEST = int(SkbDropReason.IP_INVALID_DEST)
R_IPV6_BAD_EXTHDR = int(SkbDropReason.IPV6_BAD_EXTHDR)
R_IP_INADDRERRORS = int(SkbDropReason.IP_INADDRERRORS)
R_IP_INNOROUTES = int(SkbDropReason.IP_INNOROUTES)
R_IP_LOCALNET = int(SkbDropReason.IP_LOCALNET)
RTN_LOCAL = int(RouteType.LOCAL)
RTN_BROADCAST = int(RouteType.BROADCAST)
RTN_ANYCAST = int(RouteType.ANYCAST)
RTN_BLACKHOLE = int(RouteType.BLACKHOLE)
RTN_UNICAST = int(RouteType.UNICAST)
FAM_INET, FAM_INET6 = AF_INET, AF_INET6
NREASONS = int(SkbDropReason.MAX) + 1


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _be16(b, off, length):  # type: ignore[no-untyped-def]
    """A big-endian 16-bit field; 0 past the packet's end (never read beyond it)."""
    if off < 0 or off + 2 > length:
        return 0
    return (np.int64(b[off]) << 8) | np.int64(b[off + 1])


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _be32(b, off, length):  # type: ignore[no-untyped-def]
    return (_be16(b, off, length) << 16) | _be16(b, off + 2, length)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _sum16(b, off, n, s):  # type: ignore[no-untyped-def]
    """``s`` plus the ones' complement words of ``b[off:off+n]`` (unfolded; n <= len)."""
    i = 0
    while i + 1 < n:
        s += (np.int64(b[off + i]) << 8) | np.int64(b[off + i + 1])
        i += 2
    if i < n:
        s += np.int64(b[off + i]) << 8
    return s


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _csum_ok(s):  # type: ignore[no-untyped-def]
    """Whether a sum that includes its checksum field folds to all ones."""
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s == 0xFFFF


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _drop(drops, reason):  # type: ignore[no-untyped-def]
    """``kfree_skb_reason``: counted by reason (the ``skb:kfree_skb`` tracepoint's field)."""
    drops[reason] += 1
    return -1, 0


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _no_handler(drops, dev_cnt, ifindex):  # type: ignore[no-untyped-def]
    """``__netif_receive_skb_core`` found no packet type for the skb: the receiving
    device's ``rx_dropped`` (``dev_core_stats_rx_dropped_inc``; no rx_handler asked
    for exact delivery here), then the drop."""
    if 0 <= ifindex < len(dev_cnt):
        dev_cnt[ifindex, 1] += 1
    return _drop(drops, R_UNHANDLED_PROTO)


def _input_route_typer(typingctx, fn, fib, key, fam):  # type: ignore[no-untyped-def]
    """``fn(fib, key, fam)``: the compiled input route lookup, called through its address."""
    return call_by_address("ppi")


_input_route_call: Any = intrinsic(_input_route_typer)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _input_route(route, rkey, fam, k0, k1, b, off, alen):  # type: ignore[no-untyped-def]
    """``ip_route_input_noref``/``ip6_route_input``: the type of the route to the
    ``alen``-byte destination at ``b[off:]`` (``k0``/``k1``: the same as two words),
    0 for none. On a list the previous routed skb's route serves the next one to
    the same destination (``ip_route_use_hint``; none after a broadcast route or
    with custom rules: ``ip_extract_route_hint``, ``ip6_extract_route_hint``)."""
    if route[RT_LIST] and route[RT_HFAM] == fam and route[RT_HK0] == k0 and \
            route[RT_HK1] == k1:
        return route[RT_HTYPE]
    for i in range(16):
        rkey[i] = b[off + i] if i < alen else 0
    route[RT_LOOKUPS] += 1
    t = _input_route_call(route[RT_FN], route[RT_FIB], route[RT_KEY], fam)
    custom = route[RT_NOHINT] & (1 if fam == FAM_INET else 2)
    if route[RT_LIST] and not custom and not (fam == FAM_INET and t == RTN_BROADCAST):
        route[RT_HFAM] = fam
        route[RT_HK0] = k0
        route[RT_HK1] = k1
        route[RT_HTYPE] = t
    else:
        route[RT_HFAM] = 0
    return t


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _pseudo(b, saddr_off, alen, proto):  # type: ignore[no-untyped-def]
    """The pseudo-header's sum: both addresses (``alen`` bytes each, contiguous)."""
    return _sum16(b, saddr_off, 2 * alen, proto)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _udp_rcv(b, l4, room, pseudo, cast, v6, snmp, drops, port_sock, sock_cnt):  # type: ignore[no-untyped-def] # noqa: E501
    """``__udp4_lib_rcv``/``__udp6_lib_rcv`` on ``room`` bytes at ``b[l4:]``; ``cast``:
    the route is broadcast or multicast. Returns (socket row or -1, payload offset)."""
    d = UDP6_DELTA if v6 else 0
    if room < 8:  # pskb_may_pull(udphdr)
        snmp[UDP_INERRORS + d] += 1
        return _drop(drops, R_NOT_SPECIFIED)
    ulen = _be16(b, l4 + 4, l4 + room)
    if ulen > room or ulen < 8:  # short_packet
        snmp[UDP_INERRORS + d] += 1
        return _drop(drops, R_PKT_TOO_SMALL)
    check = _be16(b, l4 + 6, l4 + room)
    good = True
    if check == 0:
        good = not v6  # RFC 2460 8.1: IPv6 UDP must carry a checksum (udp6_csum_init)
    else:
        good = _csum_ok(_sum16(b, l4, ulen, pseudo + ulen))
    s = port_sock[_be16(b, l4 + 2, l4 + ulen)]
    # skb_checksum_init validates short datagrams at once; longer ones when a
    # socket reads them or no socket wants them (udp_lib_checksum_complete) -
    # but a broadcast nobody listens to is ignored unchecked.
    if not good and (ulen <= CHECKSUM_BREAK or s >= 0 or not cast):
        snmp[UDP_INCSUMERRORS + d] += 1
        snmp[UDP_INERRORS + d] += 1
        return _drop(drops, R_UDP_CSUM)
    if s < 0:
        if cast:
            snmp[UDP_IGNOREDMULTI + d] += 1
            return -1, 0  # consume_skb: not a drop
        snmp[UDP_NOPORTS + d] += 1
        return _drop(drops, R_NO_SOCKET)
    snmp[UDP_INDATAGRAMS + d] += 1
    sock_cnt[s, 0] += 1
    sock_cnt[s, 1] += ulen - 8
    return s, l4 + 8


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _tcp_rcv(b, l4, room, pseudo, host, snmp, drops):  # type: ignore[no-untyped-def]
    """``tcp_v4_rcv``/``tcp_v6_rcv`` with no socket listening: counted, then reset."""
    if not host:
        return _drop(drops, R_NOT_SPECIFIED)
    snmp[TCP_INSEGS] += 1
    if room < 20:
        return _drop(drops, R_NOT_SPECIFIED)
    doff = (np.int64(b[l4 + 12]) >> 4) * 4
    if doff < 20:
        snmp[TCP_INERRS] += 1
        return _drop(drops, R_PKT_TOO_SMALL)
    if room < doff:
        return _drop(drops, R_NOT_SPECIFIED)
    if not _csum_ok(_sum16(b, l4, room, pseudo + room)):
        snmp[TCP_INCSUMERRORS] += 1
        snmp[TCP_INERRS] += 1
        return _drop(drops, R_TCP_CSUM)
    return _drop(drops, R_NO_SOCKET)  # no_tcp_socket: a reset is sent


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _icmp_rcv(b, l4, room, pseudo, v6, snmp, drops):  # type: ignore[no-untyped-def]
    """``icmp_rcv``/``icmpv6_rcv``: counted and checksummed (echo replies are not sent)."""
    base = ICMP6_INMSGS - ICMP_INMSGS if v6 else 0
    snmp[ICMP_INMSGS + base] += 1
    s = _sum16(b, l4, room, pseudo + room) if v6 else _sum16(b, l4, room, 0)
    if not _csum_ok(s):
        snmp[ICMP_INCSUMERRORS + base] += 1
        snmp[ICMP_INERRORS + base] += 1
        return _drop(drops, R_ICMP_CSUM)
    if room < (4 if v6 else 8):
        snmp[ICMP_INERRORS + base] += 1
        return _drop(drops, R_NOT_SPECIFIED)
    if not v6 and np.int64(b[l4]) > 18:  # NR_ICMP_TYPES
        snmp[ICMP_INERRORS] += 1
        return _drop(drops, R_UNHANDLED_PROTO)
    return -1, 0  # consumed


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _ip_rcv(b, l3, end, pkt_type, snmp, drops, port_sock, sock_cnt, route, rkey):  # type: ignore[no-untyped-def] # noqa: E501
    """``ip_rcv_core``, ``ip_rcv_finish`` (its input route: local and broadcast
    destinations are delivered, any other is the forwarding path's, an error with
    forwarding off), ``ip_local_deliver`` and the protocol handlers."""
    n = end - l3
    snmp[IP_INRECEIVES] += 1
    if n < 20:
        snmp[IP_INHDRERRORS] += 1
        return _drop(drops, R_IP_INHDR)
    ihl = (np.int64(b[l3]) & 0xF) * 4
    if ihl < 20 or (np.int64(b[l3]) >> 4) != 4 or n < ihl:
        snmp[IP_INHDRERRORS] += 1
        return _drop(drops, R_IP_INHDR)
    if not _csum_ok(_sum16(b, l3, ihl, 0)):
        snmp[IP_INCSUMERRORS] += 1
        snmp[IP_INHDRERRORS] += 1
        return _drop(drops, R_IP_CSUM)
    tot = _be16(b, l3 + 2, end)
    if n < tot:
        snmp[IP_INTRUNCATED] += 1
        return _drop(drops, R_PKT_TOO_SMALL)
    if tot < ihl:
        snmp[IP_INHDRERRORS] += 1
        return _drop(drops, R_IP_INHDR)
    end = l3 + tot  # pskb_trim_rcsum: link-layer padding goes
    # ip_options_compile: a walk that stays inside the header.
    o = l3 + 20
    while o < l3 + ihl:
        t = np.int64(b[o])
        if t == 0:
            break
        if t == 1:
            o += 1
            continue
        if o + 1 >= l3 + ihl or np.int64(b[o + 1]) < 2 or o + np.int64(b[o + 1]) > l3 + ihl:
            snmp[IP_INHDRERRORS] += 1
            return _drop(drops, R_IP_INHDR)
        o += np.int64(b[o + 1])
    saddr = _be32(b, l3 + 12, end)
    daddr = _be32(b, l3 + 16, end)
    if (saddr >> 28) == 0xE or saddr == 0xFFFFFFFF:
        return _drop(drops, R_IP_INVALID_SOURCE)  # martian source
    cast = False
    if daddr == 0xFFFFFFFF:
        snmp[IP_INBCAST] += 1
        cast = True
    elif (daddr >> 28) == 0xE:
        if daddr != 0xE0000001:  # only all-hosts is joined
            return _drop(drops, R_IP_INVALID_DEST)
        snmp[IP_INMCAST] += 1
        cast = True
    elif saddr == 0 and daddr == 0:
        snmp[IP_INBCAST] += 1  # ip_route_input_slow's brd_input
        cast = True
    else:
        # ip_route_input_slow: 0.0.0.0 and loopback addresses are martians (no
        # route_localnet; the rest of 0/8 is routed), then the FIB decides.
        if saddr == 0:
            return _drop(drops, R_IP_INVALID_SOURCE)
        if daddr == 0:
            return _drop(drops, R_IP_INVALID_DEST)
        if (daddr >> 24) == 127 or (saddr >> 24) == 127:
            return _drop(drops, R_IP_LOCALNET)
        rt = _input_route(route, rkey, FAM_INET, daddr, 0, b, l3 + 16, 4)
        if rt == RTN_BROADCAST:
            snmp[IP_INBCAST] += 1
            cast = True
        elif rt != RTN_LOCAL:
            # Not local: forwarded, which with forwarding off is ip_error's
            # EHOSTUNREACH (forwarding itself is not modelled).
            snmp[IP_INADDRERRORS] += 1
            return _drop(drops, R_IP_INADDRERRORS)
    if _be16(b, l3 + 6, end) & 0x3FFF:  # ip_defrag: held for reassembly (not modelled)
        snmp[IP_REASMREQDS] += 1
        return -1, 0
    proto = np.int64(b[l3 + 9])
    l4 = l3 + ihl
    room = end - l4
    if proto != IPPROTO_UDP and proto != IPPROTO_TCP and proto != IPPROTO_ICMP \
            and proto != IPPROTO_IGMP:
        snmp[IP_INUNKNOWNPROTOS] += 1
        return _drop(drops, R_IP_NOPROTO)
    snmp[IP_INDELIVERS] += 1
    pseudo = _pseudo(b, l3 + 12, 4, proto)
    if proto == IPPROTO_UDP:
        return _udp_rcv(b, l4, room, pseudo, cast, False, snmp, drops, port_sock, sock_cnt)
    if proto == IPPROTO_TCP:
        return _tcp_rcv(b, l4, room, pseudo, pkt_type == PACKET_HOST, snmp, drops)
    if proto == IPPROTO_ICMP:
        if cast and room >= 1 and (np.int64(b[l4]) == 8 or np.int64(b[l4]) == 13):
            snmp[ICMP_INMSGS] += 1  # icmp_echo_ignore_broadcasts
            snmp[ICMP_INERRORS] += 1
            return _drop(drops, R_INVALID_PROTO)
        return _icmp_rcv(b, l4, room, 0, False, snmp, drops)
    return -1, 0  # IGMP: consumed


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _tlv_ok(b, o, hlen, hbh):  # type: ignore[no-untyped-def]
    """``ip6_parse_tlv`` over an options header of ``hlen`` bytes at ``o``: padding,
    router alert (hop-by-hop only) and unknown options whose type says skip."""
    i = o + 2
    while i < o + hlen:
        t = np.int64(b[i])
        if t == 0:
            i += 1
            continue
        if i + 1 >= o + hlen:
            return False
        ln = np.int64(b[i + 1]) + 2
        if i + ln > o + hlen:
            return False
        if t != 1 and not (hbh and t == 5) and (t >> 6) != 0:
            return False
        i += ln
    return True


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _ipv6_rcv(b, l3, end, pkt_type, snmp, drops, port_sock, sock_cnt, route, rkey):  # type: ignore[no-untyped-def] # noqa: E501
    """``ip6_rcv_core`` (with the hop-by-hop options), ``ip6_rcv_finish``'s input route
    (local and anycast destinations are delivered; a forwarding route is an error with
    forwarding off, no route ``ip6_pkt_drop``'s), ``ip6_input`` over the other
    extension headers, and the handlers."""
    n = end - l3
    snmp[IP6_INRECEIVES] += 1
    if n < 40 or (np.int64(b[l3]) >> 4) != 6:
        snmp[IP6_INHDRERRORS] += 1
        return _drop(drops, R_IP_INHDR if n < 40 else R_UNHANDLED_PROTO)
    s0 = np.int64(b[l3 + 8])
    d0 = np.int64(b[l3 + 24])
    d1 = np.int64(b[l3 + 25])
    loop_s = _be32(b, l3 + 8, end) == 0 and _be32(b, l3 + 12, end) == 0 and \
        _be32(b, l3 + 16, end) == 0 and _be32(b, l3 + 20, end) == 1
    loop_d = _be32(b, l3 + 24, end) == 0 and _be32(b, l3 + 28, end) == 0 and \
        _be32(b, l3 + 32, end) == 0 and _be32(b, l3 + 36, end) == 1
    if s0 == 0xFF or loop_s or loop_d or (d0 == 0xFF and (d1 & 0xF) <= 1):
        snmp[IP6_INHDRERRORS] += 1  # a multicast source, loopback, scope 0 or 1
        return _drop(drops, R_IP_INHDR)
    plen = _be16(b, l3 + 4, end)
    nh = np.int64(b[l3 + 6])
    if plen or nh != NEXTHDR_HOP:
        if plen + 40 > n:
            snmp[IP6_INTRUNCATED] += 1
            return _drop(drops, R_PKT_TOO_SMALL)
        end = l3 + 40 + plen
    cast = False
    if d0 == 0xFF:
        snmp[IP6_INMCAST] += 1
        # ip6_mc_input: only all-nodes (ff02::1) is joined
        if not (d1 == 0x02 and _be32(b, l3 + 28, end) == 0 and _be32(b, l3 + 32, end) == 0
                and _be32(b, l3 + 36, end) == 1 and _be16(b, l3 + 26, end) == 0):
            return _drop(drops, R_NOT_SPECIFIED)
        cast = True
    o = l3 + 40
    first = True
    routed = cast  # a joined group's route is the multicast one
    while True:
        if not routed and not (nh == NEXTHDR_HOP and first):
            routed = True
            k0 = (_be32(b, l3 + 24, end) << 32) | _be32(b, l3 + 28, end)
            k1 = (_be32(b, l3 + 32, end) << 32) | _be32(b, l3 + 36, end)
            rt = _input_route(route, rkey, FAM_INET6, k0, k1, b, l3 + 24, 16)
            if rt == RTN_UNICAST:  # ip6_forward with forwarding off
                snmp[IP6_INADDRERRORS] += 1
                return _drop(drops, R_IP_INADDRERRORS)
            if rt == RTN_BLACKHOLE:
                return _drop(drops, R_NOT_SPECIFIED)  # dst_discard
            if rt != RTN_LOCAL and rt != RTN_ANYCAST:
                # ip6_pkt_drop: no route (or unreachable, prohibit)
                if k0 == 0 and k1 == 0:
                    snmp[IP6_INADDRERRORS] += 1
                    return _drop(drops, R_IP_INADDRERRORS)
                snmp[IP6_INNOROUTES] += 1
                return _drop(drops, R_IP_INNOROUTES)
        if not ((nh == NEXTHDR_HOP and first) or nh == NEXTHDR_DEST or nh == NEXTHDR_ROUTING):
            break
        if o + 8 > end:
            snmp[IP6_INHDRERRORS] += 1
            return _drop(drops, R_IPV6_BAD_EXTHDR)
        hlen = (np.int64(b[o + 1]) + 1) * 8
        if o + hlen > end:
            snmp[IP6_INHDRERRORS] += 1
            return _drop(drops, R_IPV6_BAD_EXTHDR)
        if nh == NEXTHDR_ROUTING:
            if np.int64(b[o + 2]) == IPV6_SRCRT_TYPE_4:
                return _drop(drops, R_NOT_SPECIFIED)
            if np.int64(b[o + 3]) != 0:  # segments left: this host forwards nothing
                snmp[IP6_INHDRERRORS] += 1
                return _drop(drops, R_IPV6_BAD_EXTHDR)
        elif not _tlv_ok(b, o, hlen, nh == NEXTHDR_HOP):
            snmp[IP6_INHDRERRORS] += 1
            return _drop(drops, R_IPV6_BAD_EXTHDR)
        first = False
        nh = np.int64(b[o])
        o += hlen
    if nh == NEXTHDR_FRAGMENT:  # ipv6_frag_rcv: held for reassembly (not modelled)
        snmp[IP6_REASMREQDS] += 1
        return -1, 0
    room = end - o
    if nh == NEXTHDR_NONE:
        snmp[IP6_INDELIVERS] += 1
        return -1, 0  # consumed
    if nh != IPPROTO_UDP and nh != IPPROTO_TCP and nh != IPPROTO_ICMPV6:
        snmp[IP6_INUNKNOWNPROTOS] += 1
        return _drop(drops, R_IP_NOPROTO)
    snmp[IP6_INDELIVERS] += 1
    pseudo = _pseudo(b, l3 + 8, 16, nh)
    if nh == IPPROTO_UDP:
        return _udp_rcv(b, o, room, pseudo, cast, True, snmp, drops, port_sock, sock_cnt)
    if nh == IPPROTO_TCP:
        return _tcp_rcv(b, o, room, pseudo, pkt_type == PACKET_HOST, snmp, drops)
    return _icmp_rcv(b, o, room, pseudo, True, snmp, drops)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def stack_rcv_one(buf, start, length, ifindex, stk):  # type: ignore[no-untyped-def]
    """One skb of ``length`` bytes at ``buf[start:]`` through ``eth_type_trans``,
    ``__netif_receive_skb_core`` (VLAN tags as a host without VLAN devices sees
    them), ``ip_rcv``/``ipv6_rcv`` and the protocol handlers, counted into one
    context's records ``stk`` (:meth:`Stack.records`). Returns the socket row
    it was delivered to (or -1) and the payload's offset from ``start``. Every
    read is inside the packet."""
    mib, snmp, drops, port_sock, sock_cnt, dev_cnt, dev_addr, route, rkey = stk
    mib[M_RECEIVED] += 1
    mib[M_BYTES] += length
    addr = np.int64(0)
    if 0 <= ifindex < len(dev_cnt):
        dev_cnt[ifindex, 0] += 1
        addr = dev_addr[ifindex]
    b = buf[start:start + length]
    if length < 14:
        mib[M_OTHER] += 1
        return _drop(drops, R_NOT_SPECIFIED)
    # eth_type_trans
    if np.int64(b[0]) & 1:
        pkt_type = PACKET_BROADCAST if _be32(b, 0, length) == 0xFFFFFFFF and \
            _be16(b, 4, length) == 0xFFFF else PACKET_MULTICAST
    elif ((_be16(b, 0, length) << 32) | _be32(b, 2, length)) != addr:
        pkt_type = PACKET_OTHERHOST
    else:
        pkt_type = PACKET_HOST
    proto = _be16(b, 12, length)
    l3 = 14
    if proto < ETH_P_802_3_MIN:  # 802.3 length field: no LLC handler here
        mib[M_OTHER] += 1
        return _no_handler(drops, dev_cnt, ifindex)
    # skb_vlan_untag; no VLAN device: a tag with a VID makes the frame another
    # host's, a priority tag (VID 0) is stripped and the frame goes on.
    while proto == ETH_P_8021Q or proto == ETH_P_8021AD:
        if length < l3 + 4:
            mib[M_OTHER] += 1
            return _drop(drops, R_NOT_SPECIFIED)
        if _be16(b, l3, length) & 0xFFF:
            pkt_type = PACKET_OTHERHOST
            proto = _be16(b, l3 + 2, length)
            l3 += 4
            break
        proto = _be16(b, l3 + 2, length)
        l3 += 4
    if proto == ETH_P_IP:
        mib[M_IPV4] += 1
    elif proto == ETH_P_IPV6:
        mib[M_IPV6] += 1
    else:
        mib[M_OTHER] += 1
        if proto == ETH_P_ARP:
            return -1, 0  # arp_rcv: consumed (no replies are sent)
        return _no_handler(drops, dev_cnt, ifindex)
    if pkt_type == PACKET_OTHERHOST:
        return _drop(drops, R_OTHERHOST)
    if proto == ETH_P_IP:
        s, off = _ip_rcv(b, l3, length, pkt_type, snmp, drops, port_sock, sock_cnt, route,
                         rkey)
    else:
        s, off = _ipv6_rcv(b, l3, length, pkt_type, snmp, drops, port_sock, sock_cnt, route,
                           rkey)
    if s >= 0:
        mib[M_UDP_DELIVERED] += 1
    return s, off


@njit(cache=True, nogil=True, _nrt=False)
def context_lock(route):  # type: ignore[no-untyped-def]
    """Take a context row's lock (``route[Rt.LOCK]``; for Python, which spins here
    without the interpreter lock). A row is one CPU's softirq or kthread context, and
    the kernel never runs one context twice at once; pyxdp's cpumap kthreads are
    threads, and several may be one CPU's (entries of several maps, a replaced entry
    draining beside its successor, a drain from another thread): they deliver one
    list at a time under this lock, so that no counter increment of the row is lost
    and no list's route hint or key buffer is another's. Native code inlines
    :func:`~pyxdp.net.atomic.spin_lock` on the same word."""
    spin_lock(route, RT_LOCK)


@njit(cache=True, nogil=True, _nrt=False)
def context_unlock(route):  # type: ignore[no-untyped-def]
    spin_unlock(route, RT_LOCK)


@njit(cache=True, nogil=True, _nrt=False)
def _rcv_rows(data, lengths, ifindex, stk, out_sock, out_off):  # type: ignore[no-untyped-def]
    """:func:`stack_rcv_one` over the rows of an :class:`SkbBatch`."""
    for i in range(len(lengths)):
        ln = min(lengths[i], data.shape[1])
        s, off = stack_rcv_one(data[i], 0, ln, ifindex[i], stk)
        out_sock[i] = s
        out_off[i] = off


@dataclass(eq=False)
class SkbBatch:
    """A list of skbs: row i of ``data`` holds ``length[i]`` bytes of packet from the
    Ethernet header on; ``meta`` the XDP metadata each carried (``skb_metadata``),
    ``ifindex`` the device it arrived on, ``queue`` its rx queue; ``each``: sent one
    at a time (``generic_xdp_tx``, ``xdp_do_generic_redirect``), so the stack that
    receives them takes each as a list of its own."""

    data: U8
    length: I64
    ifindex: I64
    queue: I64
    meta: list[bytes] = field(default_factory=list)
    each: bool = False

    def __len__(self) -> int:
        return len(self.length)

    def packet(self, i: int) -> bytes:
        return self.data[i, :int(self.length[i])].tobytes()

    def packets(self) -> list[bytes]:
        return [self.data[i, :n].tobytes() for i, n in enumerate(self.length.tolist())]

    @classmethod
    def from_packets(cls, packets: list[bytes], ifindex: int, queue: int = 0,
                     meta: list[bytes] | None = None) -> SkbBatch:
        if isinstance(packets, bytes | bytearray | str | memoryview) or \
                not hasattr(packets, "__iter__"):
            raise BadArgument(f"packets must be a list of bytes, not {type(packets).__name__}")
        raw = [_frame_bytes(p, i) for i, p in enumerate(packets)]
        n = len(raw)
        width = max((len(p) for p in raw), default=0)
        data = np.zeros((n, max(width, 1)), np.uint8)
        for i, p in enumerate(raw):
            data[i, :len(p)] = np.frombuffer(p, np.uint8)
        return cls(data, np.array([len(p) for p in raw], np.int64),
                   np.full(n, ifindex, np.int64), np.full(n, queue, np.int64),
                   meta if meta is not None else [b""] * n)


def _frame_bytes(p: object, i: int) -> bytes:
    """Packet ``i`` of a batch as bytes: a bytes-like object (its bytes, whatever the
    item type of a buffer), nothing else."""
    if isinstance(p, bytes):
        return p
    if isinstance(p, int | str) or p is None:
        raise BadArgument(f"packet {i} must be bytes-like, not {type(p).__name__}")
    try:
        return memoryview(p).tobytes()  # type: ignore[arg-type]
    except TypeError:
        raise BadArgument(f"packet {i} must be bytes-like, not {type(p).__name__}") from None


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
    bytes: int = 0
    udp_noports: int = 0  # UDP_MIB_NOPORTS (Udp:NoPorts + Udp6NoPorts): no socket on the port


_STAT_NAMES = [f.name for f in fields(StackStats)][:Mib.SIZE]
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
    counters), ``snmp`` (row x the kernel's SNMP counters of :data:`SNMP_NAMES`),
    ``drops`` (row x ``enum skb_drop_reason``: what ``kfree_skb_reason`` was
    given), ``dev_cnt`` (row x ifindex x (skbs received, skbs no packet type took:
    the device's ``rx_dropped``)), ``dev_addr`` (ifindex ->
    the device's MAC as an integer, for ``eth_type_trans``), ``port_sock`` (port
    -> socket row, -1 unbound), ``sock_cnt`` (row x socket x (packets, bytes)),
    ``route`` (row x :class:`Rt`: the input route lookup and the list's hint) and
    ``rkey`` (row x the 16 key bytes it is given). A row is a CPU's softirq context
    or its kthread context (:meth:`row`): on one CPU the kernel never runs both at
    once, but pyxdp's workers are threads, so each context writes only its own row;
    the kthreads of one CPU (several entries' threads) deliver to theirs one list at
    a time, under the row's lock (:func:`context_lock`).

    ``fib`` is the namespace whose routes decide what is local (a Host's
    :attr:`~pyxdp.net.test_run.TestRunEnv.fib`) and whose socket table holds the
    sinks too (what ``bpf_sk_lookup_udp`` finds); without one the stack has a
    namespace of its own (loopback only)."""

    def __init__(self, nr_cpus: int = 1, *, fib: Fib | None = None) -> None:
        self.nr_cpus = max(nr_cpus, 1)
        self.fib = fib if fib is not None else Fib()
        self.socket_table = self.fib.sockets
        rows = 2 * self.nr_cpus
        self.mib = np.zeros((rows, Mib.SIZE), np.int64)
        self.snmp = np.zeros((rows, NSNMP), np.int64)
        self.drops = np.zeros((rows, NREASONS), np.int64)
        self.dev_cnt = np.zeros((rows, 64, 2), np.int64)
        self.dev_addr = np.full(64, -1, np.int64)
        self.port_sock = np.full(65536, -1, np.int64)
        self.sock_cnt = np.zeros((rows, MAX_SOCKETS, 2), np.int64)
        self.route = np.zeros((rows, Rt.SIZE), np.int64)
        self.rkey = np.zeros((rows, 16), np.uint8)
        self.route[:, Rt.FIB] = self.fib.fib_desc.ctypes.data
        self.route[:, Rt.KEY] = [int(self.rkey[r].ctypes.data) for r in range(rows)]
        self.sockets: dict[int, UdpSink] = {}
        self.callbacks: list[Callable[[SkbBatch], None]] = []
        self._lock = threading.Lock()  # cpumap workers deliver from their own threads

    @property
    def stats(self) -> StackStats:
        snmp = self.counters()
        mib = dict(zip(_STAT_NAMES, (int(x) for x in self.mib.sum(axis=0).tolist()),
                       strict=True))
        return StackStats(**mib, udp_noports=snmp["Udp:NoPorts"] + snmp["Udp6NoPorts"])

    def counters(self) -> dict[str, int]:
        """The SNMP counters (``/proc/net/snmp`` names), summed over CPUs."""
        return dict(zip(SNMP_NAMES, (int(x) for x in self.snmp.sum(axis=0).tolist()), strict=True))

    def drop_reasons(self) -> dict[str, int]:
        """Skbs freed as drops, by ``enum skb_drop_reason`` name (nonzero only)."""
        tot = self.drops.sum(axis=0)
        return {SkbDropReason(int(r)).name: int(tot[r]) for r in np.flatnonzero(tot).tolist()}

    @property
    def per_device(self) -> dict[int, int]:
        """Skbs received per ifindex."""
        tot = self.dev_cnt[:, :, 0].sum(axis=0)
        return {int(i): int(tot[i]) for i in np.flatnonzero(tot).tolist()}

    def rx_dropped(self, ifindex: int) -> int:
        """Skbs of device ``ifindex`` no packet type took (its ``rx_dropped`` share)."""
        cnt = self.dev_cnt
        return int(cnt[:, ifindex, 1].sum()) if 0 <= ifindex < cnt.shape[1] else 0

    @property
    def native_ok(self) -> bool:
        """Whether a passed frame needs only the counting records (no callback to
        show it to, no socket keeping payloads), so native code may deliver it."""
        return not self.callbacks and not any(s.keep for s in self.sockets.values())

    @property
    def fib_lookups(self) -> int:
        """Input route lookups made in the FIB (skbs a list's route hint served made none)."""
        return int(self.route[:, Rt.LOOKUPS].sum())

    def row(self, cpu: int, kthread: bool = False) -> int:
        """The counter row of CPU ``cpu``'s softirq (or, with ``kthread``, kthread) context."""
        return cpu % self.nr_cpus + (self.nr_cpus if kthread else 0)

    def records(self, row: int) -> tuple[I64, I64, I64, I64, I64, I64, I64, I64, U8]:
        """What :func:`stack_rcv_one` reads and counts into for one context row: (mib
        row, SNMP row, drop reasons row, port table, socket counters, per-device
        counts, device addresses, input route record, its key bytes). The FIB's
        lookup rows are made anew here when its configuration changed."""
        route = self.route[row]
        if not route[Rt.FN]:
            route[Rt.FN] = input_route_address()
        self.fib.native_desc()
        route[Rt.NOHINT] = (1 if self.fib.custom_rules4 else 0) | (
            2 if self.fib.custom_rules6 else 0)
        return (self.mib[row], self.snmp[row], self.drops[row], self.port_sock,
                self.sock_cnt[row], self.dev_cnt[row], self.dev_addr, route, self.rkey[row])

    def ensure_ifindex(self, ifindex: int) -> None:
        """Room in ``dev_cnt`` for a device's ifindex (called as devices are made)."""
        width = self.dev_cnt.shape[1]
        if ifindex >= width:
            with self._lock:
                n = max(2 * width, ifindex + 1)
                grown = np.zeros((len(self.mib), n, 2), np.int64)
                grown[:, :width] = self.dev_cnt
                addr = np.full(n, -1, np.int64)
                addr[:width] = self.dev_addr
                self.dev_cnt = grown
                self.dev_addr = addr

    def set_dev_addr(self, ifindex: int, mac: bytes) -> None:
        """The device's MAC address, which ``eth_type_trans`` compares frames with."""
        self.ensure_ifindex(ifindex)
        self.dev_addr[ifindex] = int.from_bytes(mac, "big")

    def udp_socket(self, port: int, keep: int = 0) -> UdpSink:
        """Bind a UDP sink on ``port`` (any address), like ``socket(); bind()``."""
        if not 0 < port < 65536:
            raise ValueError(f"port must be 1..65535, not {port}")
        if port in self.sockets:
            raise OSError(98, f"port {port} already bound")  # EADDRINUSE
        row = len(self.sockets)
        if row >= MAX_SOCKETS:
            raise OSError(105, f"no room for another UDP socket (at most {MAX_SOCKETS})")
        if self.socket_table is not None:
            self.socket_table.udp_bind("::", port)  # [::]:port, IPv4 too
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
        sock = np.empty(n, np.int64)
        off = np.empty(n, np.int64)
        data = batch.data if batch.data.ndim == 2 and batch.data.shape[1] else \
            np.zeros((n, 1), np.uint8)
        stk = self.records(row)
        route = stk[7]
        context_lock(route)  # a native kthread of the same CPU may be delivering
        try:
            # Skbs sent one at a time: lists of one (no route hint between them).
            self.mib[row, Mib.BATCHES] += n if batch.each else 1
            route[Rt.LIST] = 0 if batch.each else 1  # one list: its route hint starts empty
            route[Rt.HFAM] = 0
            _rcv_rows(data, batch.length.astype(np.int64, copy=False),
                      batch.ifindex.astype(np.int64, copy=False), stk, sock, off)
            route[Rt.LIST] = 0
        finally:
            context_unlock(route)
        keeping = [s for s in self.sockets.values() if len(s.received) < s.keep]
        for sink in keeping:
            for r in np.flatnonzero(sock == sink.row)[:sink.keep - len(sink.received)].tolist():
                sink.received.append(batch.data[r, int(off[r]):int(batch.length[r])].tobytes())
        for cb in self.callbacks:
            cb(batch)
