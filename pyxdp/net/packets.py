"""Packet builders, a differential-testing corpus and a seeded traffic source.

What is modeled is the wire layout that the kernel's UAPI headers describe:
``struct ethhdr`` (``include/uapi/linux/if_ether.h``) with 802.1Q/802.1AD
tags (``struct vlan_hdr``, ``include/linux/if_vlan.h``), ``struct iphdr``
(``include/uapi/linux/ip.h``), ``struct ipv6hdr`` and ``struct frag_hdr``
(``include/uapi/linux/ipv6.h``, ``include/net/ipv6.h``), ``struct udphdr``,
``struct tcphdr``, ``struct icmphdr``, ``struct icmp6hdr`` and the Ethernet/IPv4
form of ``struct arphdr`` (``include/uapi/linux/if_arp.h``). All multi-byte
fields are big-endian (network order), as on the wire.

Checksums follow RFC 1071 (the 16-bit ones'-complement sum): the IPv4 header
checksum (RFC 791), UDP (RFC 768, and RFC 8200 section 8.1 for IPv6, where a
zero result is sent as 0xffff), TCP (RFC 9293) and ICMPv6 (RFC 4443) over
their pseudo-headers, ICMP (RFC 792) over the message alone.

Frames are what an XDP program sees: no preamble and no FCS, so the Ethernet
minimum is 60 bytes (``pad=True`` adds the zero padding a NIC would deliver).
Default addresses come from the documentation (RFC 5737, RFC 3849) and
benchmarking (RFC 2544, RFC 5180) ranges, MACs are locally administered.

Everything is deterministic: builders are pure, and :func:`corpus`,
:func:`traffic` and :func:`batch` depend on nothing but their arguments.
"""

from __future__ import annotations

import ipaddress
import random
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from pyxdp.args import checked, short
from pyxdp.errors import PyxdpError

__all__ = [
    "ARPOP_REPLY",
    "ARPOP_REQUEST",
    "BROADCAST_MAC",
    "DEFAULT_DST_IP4",
    "DEFAULT_DST_IP6",
    "DEFAULT_DST_MAC",
    "DEFAULT_SRC_IP4",
    "DEFAULT_SRC_IP6",
    "DEFAULT_SRC_MAC",
    "ETH_P_8021AD",
    "ETH_P_8021Q",
    "ETH_P_ARP",
    "ETH_P_IP",
    "ETH_P_IPV6",
    "ICMPV6_ECHO_REPLY",
    "ICMPV6_ECHO_REQUEST",
    "ICMP_ECHO",
    "ICMP_ECHOREPLY",
    "IPPROTO_FRAGMENT",
    "IPPROTO_HOPOPTS",
    "IPPROTO_ICMP",
    "IPPROTO_ICMPV6",
    "IPPROTO_IPIP",
    "IPPROTO_IPV6",
    "IPPROTO_TCP",
    "IPPROTO_UDP",
    "TCP_ACK",
    "TCP_CWR",
    "TCP_ECE",
    "TCP_FIN",
    "TCP_PSH",
    "TCP_RST",
    "TCP_SYN",
    "TCP_URG",
    "Address",
    "PacketError",
    "Vlan",
    "arp",
    "arp_packet",
    "batch",
    "corpus",
    "ether",
    "flow_frame",
    "icmp",
    "icmp_echo",
    "icmp_packet",
    "icmpv6",
    "icmpv6_echo",
    "internet_checksum",
    "ip4",
    "ip6",
    "ipv4",
    "ipv6",
    "ipv6_fragment_header",
    "mac",
    "pseudo_header",
    "tcp",
    "tcp_packet",
    "traffic",
    "udp",
    "udp_packet",
]


class PacketError(PyxdpError, ValueError):
    """Arguments a packet builder cannot turn into a well-formed header.

    Also a :class:`ValueError`, since every case is a bad argument value
    (an address that does not parse, a field out of range, a size too small
    for the headers asked for).
    """


# ---------------------------------------------------------------------------
# Constants, under the kernel's names (if_ether.h, in.h, in6.h, icmp.h, ...)
# ---------------------------------------------------------------------------

ETH_HLEN = 14
ETH_ZLEN = 60  # minimum frame without FCS
ETH_P_IP = 0x0800
ETH_P_ARP = 0x0806
ETH_P_8021Q = 0x8100
ETH_P_8021AD = 0x88A8
ETH_P_IPV6 = 0x86DD

IPPROTO_HOPOPTS = 0
IPPROTO_ICMP = 1
IPPROTO_IPIP = 4
IPPROTO_TCP = 6
IPPROTO_UDP = 17
IPPROTO_IPV6 = 41
IPPROTO_FRAGMENT = 44
IPPROTO_ICMPV6 = 58

ICMP_ECHOREPLY = 0
ICMP_ECHO = 8
ICMPV6_ECHO_REQUEST = 128
ICMPV6_ECHO_REPLY = 129

ARPOP_REQUEST = 1
ARPOP_REPLY = 2

TCP_FIN = 0x01
TCP_SYN = 0x02
TCP_RST = 0x04
TCP_PSH = 0x08
TCP_ACK = 0x10
TCP_URG = 0x20
TCP_ECE = 0x40
TCP_CWR = 0x80
_TCP_FLAG_LETTERS = {"F": TCP_FIN, "S": TCP_SYN, "R": TCP_RST, "P": TCP_PSH,
                     "A": TCP_ACK, "U": TCP_URG, "E": TCP_ECE, "C": TCP_CWR}

IP_DF = 0x4000
IP_MF = 0x2000

DEFAULT_SRC_MAC = b"\x02\x00\x00\x00\x00\x01"
DEFAULT_DST_MAC = b"\x02\x00\x00\x00\x00\x02"
BROADCAST_MAC = b"\xff" * 6
DEFAULT_SRC_IP4 = "192.0.2.1"  # RFC 5737 TEST-NET-1
DEFAULT_DST_IP4 = "198.51.100.2"  # RFC 5737 TEST-NET-2
DEFAULT_SRC_IP6 = "2001:db8::1"  # RFC 3849 documentation prefix
DEFAULT_DST_IP6 = "2001:db8::2"
_DEFAULT_V4 = (DEFAULT_SRC_IP4, DEFAULT_DST_IP4)
_DEFAULT_V6 = (DEFAULT_SRC_IP6, DEFAULT_DST_IP6)

Address = str | bytes | ipaddress.IPv4Address | ipaddress.IPv6Address
"""An IP address: text, 4 or 16 packed bytes, or an ``ipaddress`` object."""

Vlan = int | tuple[int, int]
"""A VLAN tag: a bare VID, or ``(tpid, tci)`` for full control of the tag."""


# ---------------------------------------------------------------------------
# Addresses and checksums
# ---------------------------------------------------------------------------

@checked
def mac(text: str | bytes) -> bytes:
    """``"aa:bb:cc:dd:ee:ff"`` (``-`` also accepted) as 6 bytes; bytes pass through."""
    if isinstance(text, bytes | bytearray):
        if len(text) != 6:
            raise PacketError(f"a MAC address is 6 bytes, not {len(text)}")
        return bytes(text)
    parts = text.replace("-", ":").split(":")
    try:
        if len(parts) != 6 or any(len(p) not in (1, 2) for p in parts):
            raise ValueError(text)
        return bytes(int(p, 16) for p in parts)
    except ValueError:
        raise PacketError(f"not a MAC address: {text!r}") from None


def _ip(addr: Address) -> bytes:
    """Any :data:`Address` as 4 or 16 packed bytes."""
    if isinstance(addr, bytes | bytearray):
        if len(addr) not in (4, 16):
            raise PacketError(f"a packed IP address is 4 or 16 bytes, not {len(addr)}")
        return bytes(addr)
    if isinstance(addr, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return addr.packed
    try:
        return ipaddress.ip_address(addr).packed
    except ValueError:
        raise PacketError(f"not an IP address: {addr!r}") from None


@checked
def ip4(addr: Address) -> bytes:
    """An IPv4 address as its 4 network-order bytes."""
    b = _ip(addr)
    if len(b) != 4:
        raise PacketError(f"not an IPv4 address: {addr!r}")
    return b


@checked
def ip6(addr: Address) -> bytes:
    """An IPv6 address as its 16 network-order bytes."""
    b = _ip(addr)
    if len(b) != 16:
        raise PacketError(f"not an IPv6 address: {addr!r}")
    return b


def _residue(data: bytes | bytearray | memoryview) -> int:
    """Sum of the big-endian 16-bit words of ``data``, modulo 0xffff.

    Because 2**16 == 1 (mod 0xffff), the whole buffer read as one big-endian
    integer has the same residue as the sum of its words: one C-speed
    ``int.from_bytes`` replaces a Python loop over thousands of words.
    An odd length is padded with one zero byte at the end (RFC 1071).
    """
    raw = bytes(data)
    if len(raw) % 2:
        raw += b"\0"
    return int.from_bytes(raw, "big") % 0xFFFF


def _fold(residue: int, nonzero: bool) -> int:
    """The ones'-complement sum (1..0xffff) given its residue mod 0xffff.

    End-around-carry addition never produces +0 once any word is non-zero;
    it produces 0xffff (-0) instead, which is what a residue of 0 means then.
    """
    if residue == 0:
        return 0xFFFF if nonzero else 0
    return residue


@checked
def internet_checksum(data: bytes | bytearray | memoryview) -> int:
    """RFC 1071 checksum of ``data``: the complement of its ones'-complement word sum.

    Inserting the result (big-endian) into a zeroed checksum field makes the
    sum over the whole buffer 0xffff, which is how receivers verify it.
    """
    raw = bytes(data)
    return ~_fold(_residue(raw), any(raw)) & 0xFFFF


@checked
def pseudo_header(src_ip: Address, dst_ip: Address, proto: int, length: int) -> bytes:
    """The pseudo-header TCP, UDP and ICMPv6 checksums cover (RFC 9293 / RFC 8200 8.1).

    IPv4: source, destination, zero, protocol, 16-bit length. IPv6: source,
    destination, 32-bit upper-layer length, three zero bytes, next header.
    """
    src, dst = _ip(src_ip), _ip(dst_ip)
    if len(src) != len(dst):
        raise PacketError("source and destination addresses of different families")
    if len(src) == 4:
        _check_range("length", length, 0xFFFF)
        return src + dst + struct.pack("!BBH", 0, proto, length)
    _check_range("length", length, 0xFFFFFFFF)
    return src + dst + struct.pack("!I3xB", length, proto)


def _check_range(name: str, value: int, top: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise PacketError(f"{name} must be an int, not {short(value)}")
    if not 0 <= value <= top:
        raise PacketError(f"{name} {value} out of range 0..{top:#x}")


# ---------------------------------------------------------------------------
# Layer 2
# ---------------------------------------------------------------------------

def _vlan_tags(vlans: Sequence[Vlan]) -> bytes:
    """The tag stack, outermost first.

    A bare VID gets TPID 0x8100 (C-tag), except the outermost of two or more
    tags, which gets 0x88a8 (S-tag): that is 802.1ad QinQ, and the kernel's
    ``eth_type_vlan()`` accepts both TPIDs.
    """
    out = bytearray()
    for i, tag in enumerate(vlans):
        if isinstance(tag, tuple):
            if len(tag) != 2:
                raise PacketError(f"a VLAN tag is a VID or (tpid, tci), not a {len(tag)}-tuple")
            tpid, tci = tag
        else:
            _check_range("VLAN id", tag, 0xFFF)
            tpid = ETH_P_8021AD if (i == 0 and len(vlans) > 1) else ETH_P_8021Q
            tci = tag
        _check_range("TPID", tpid, 0xFFFF)
        _check_range("TCI", tci, 0xFFFF)
        out += struct.pack("!HH", tpid, tci)
    return bytes(out)


@checked
def ether(dst: str | bytes, src: str | bytes, ethertype: int, payload: bytes = b"",
          vlans: Sequence[Vlan] = (), *, pad: bool = False) -> bytes:
    """An Ethernet II frame: ``dst``, ``src``, the VLAN tags, ``ethertype``, ``payload``.

    ``pad`` appends zero bytes up to the 60-byte minimum (ETH_ZLEN), as a NIC
    delivers a short frame; the padding lies beyond any IP total length.
    """
    _check_range("ethertype", ethertype, 0xFFFF)
    frame = mac(dst) + mac(src) + _vlan_tags(vlans) + struct.pack("!H", ethertype) + payload
    if pad and len(frame) < ETH_ZLEN:
        frame += bytes(ETH_ZLEN - len(frame))
    return frame


@checked
def arp(op: int, sender_mac: str | bytes, sender_ip: Address, target_mac: str | bytes,
        target_ip: Address) -> bytes:
    """An Ethernet/IPv4 ARP message (``struct arphdr`` plus its 20 address bytes)."""
    _check_range("ARP op", op, 0xFFFF)
    return (struct.pack("!HHBBH", 1, ETH_P_IP, 6, 4, op)
            + mac(sender_mac) + ip4(sender_ip) + mac(target_mac) + ip4(target_ip))


# ---------------------------------------------------------------------------
# Layer 3
# ---------------------------------------------------------------------------

@checked
def ipv4(src: Address, dst: Address, proto: int, payload: bytes, ttl: int = 64, tos: int = 0,
         ident: int = 0, flags_df: bool = True, options: bytes = b"", *,
         more_fragments: bool = False, frag_offset: int = 0,
         total_length: int | None = None, checksum: int | None = None) -> bytes:
    """An IPv4 datagram: ``struct iphdr`` (with ``options``) followed by ``payload``.

    ``options`` is padded with zero (End of Option List) bytes to a multiple
    of 4, since IHL counts 32-bit words; at most 40 bytes fit. ``frag_offset``
    is in bytes and must be a multiple of 8 (the header stores 8-byte units).
    ``total_length`` and ``checksum`` override the computed values, for
    deliberately malformed packets.
    """
    for name, value, top in (("proto", proto, 0xFF), ("ttl", ttl, 0xFF), ("tos", tos, 0xFF),
                             ("ident", ident, 0xFFFF)):
        _check_range(name, value, top)
    if frag_offset % 8 or not 0 <= frag_offset <= 0x1FFF * 8:
        raise PacketError(f"fragment offset {frag_offset} is not a multiple of 8 up to 65528")
    opts = options + bytes(-len(options) % 4)
    if len(opts) > 40:
        raise PacketError(f"IPv4 options are at most 40 bytes, not {len(opts)}")
    ihl = 5 + len(opts) // 4
    length = ihl * 4 + len(payload) if total_length is None else total_length
    _check_range("total length", length, 0xFFFF)
    frag = (IP_DF if flags_df else 0) | (IP_MF if more_fragments else 0) | frag_offset // 8
    header = bytearray(struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, tos, length, ident, frag, ttl,
                                   proto, 0, ip4(src), ip4(dst)) + opts)
    csum = internet_checksum(header) if checksum is None else checksum
    _check_range("checksum", csum, 0xFFFF)
    struct.pack_into("!H", header, 10, csum)
    return bytes(header) + payload


@checked
def ipv6(src: Address, dst: Address, next_header: int, payload: bytes, hop_limit: int = 64, *,
         traffic_class: int = 0, flow_label: int = 0,
         payload_length: int | None = None) -> bytes:
    """An IPv6 packet: ``struct ipv6hdr`` followed by ``payload`` (extension headers included)."""
    _check_range("next header", next_header, 0xFF)
    _check_range("hop limit", hop_limit, 0xFF)
    _check_range("traffic class", traffic_class, 0xFF)
    _check_range("flow label", flow_label, 0xFFFFF)
    plen = len(payload) if payload_length is None else payload_length
    _check_range("payload length", plen, 0xFFFF)
    word0 = (6 << 28) | (traffic_class << 20) | flow_label
    return struct.pack("!IHBB", word0, plen, next_header, hop_limit) + ip6(src) + ip6(dst) + payload


@checked
def ipv6_fragment_header(next_header: int, offset: int, more: bool, ident: int) -> bytes:
    """An IPv6 Fragment extension header (RFC 8200 4.5); ``offset`` in bytes, multiple of 8."""
    if offset % 8 or not 0 <= offset <= 0x1FFF * 8:
        raise PacketError(f"fragment offset {offset} is not a multiple of 8 up to 65528")
    _check_range("fragment ident", ident, 0xFFFFFFFF)
    return struct.pack("!BBHI", next_header, 0, offset | int(more), ident)


# ---------------------------------------------------------------------------
# Layer 4
# ---------------------------------------------------------------------------

@checked
def udp(sport: int, dport: int, payload: bytes, src_ip: Address, dst_ip: Address, *,
        checksum: bool = True, length: int | None = None) -> bytes:
    """A UDP datagram with its checksum over the IPv4 or IPv6 pseudo-header.

    A computed checksum of 0 is sent as 0xffff, because 0 on the wire means
    "no checksum" (RFC 768). ``checksum=False`` leaves the field 0 (legal for
    IPv4 only). ``length`` overrides the UDP length field.
    """
    _check_range("source port", sport, 0xFFFF)
    _check_range("destination port", dport, 0xFFFF)
    ulen = 8 + len(payload) if length is None else length
    _check_range("UDP length", ulen, 0xFFFF)
    seg = bytearray(struct.pack("!HHHH", sport, dport, ulen, 0) + payload)
    if checksum:
        csum = internet_checksum(pseudo_header(src_ip, dst_ip, IPPROTO_UDP, len(seg)) + seg)
        struct.pack_into("!H", seg, 6, csum or 0xFFFF)
    return bytes(seg)


def _tcp_flags(flags: int | str) -> int:
    if not isinstance(flags, str):
        _check_range("TCP flags", flags, 0xFF)  # an int, or a one-line error
        return int(flags)
    value = 0
    for letter in flags.upper():
        if letter not in _TCP_FLAG_LETTERS:
            raise PacketError(f"unknown TCP flag {letter!r} (use letters of FSRPAUEC)")
        value |= _TCP_FLAG_LETTERS[letter]
    return value


@checked
def tcp(sport: int, dport: int, flags: int | str, payload: bytes = b"", seq: int = 0,
        ack: int = 0, *, src_ip: Address, dst_ip: Address, window: int = 65535,
        urgent: int = 0, options: bytes = b"") -> bytes:
    """A TCP segment with its checksum over the pseudo-header.

    ``flags`` is a bit mask (``TCP_SYN | TCP_ACK``) or letters (``"SA"``).
    ``options`` is padded with zero (End of Option List) bytes to a multiple
    of 4, since the data offset counts 32-bit words; at most 40 bytes fit.
    """
    _check_range("source port", sport, 0xFFFF)
    _check_range("destination port", dport, 0xFFFF)
    _check_range("seq", seq, 0xFFFFFFFF)
    _check_range("ack", ack, 0xFFFFFFFF)
    _check_range("window", window, 0xFFFF)
    _check_range("urgent pointer", urgent, 0xFFFF)
    opts = options + bytes(-len(options) % 4)
    if len(opts) > 40:
        raise PacketError(f"TCP options are at most 40 bytes, not {len(opts)}")
    doff = 5 + len(opts) // 4
    seg = bytearray(struct.pack("!HHIIBBHHH", sport, dport, seq, ack, doff << 4,
                                _tcp_flags(flags), window, 0, urgent) + opts + payload)
    csum = internet_checksum(pseudo_header(src_ip, dst_ip, IPPROTO_TCP, len(seg)) + seg)
    struct.pack_into("!H", seg, 16, csum)
    return bytes(seg)


@checked
def icmp(type: int, code: int, payload: bytes = b"") -> bytes:
    """An ICMP message; ``payload`` is everything after the checksum (rest of header + data)."""
    _check_range("ICMP type", type, 0xFF)
    _check_range("ICMP code", code, 0xFF)
    msg = bytearray(struct.pack("!BBH", type, code, 0) + payload)
    struct.pack_into("!H", msg, 2, internet_checksum(msg))
    return bytes(msg)


@checked
def icmp_echo(ident: int, seq: int, data: bytes = b"", *, reply: bool = False) -> bytes:
    """An ICMP echo request (or reply) message."""
    _check_range("ident", ident, 0xFFFF)
    _check_range("seq", seq, 0xFFFF)
    return icmp(ICMP_ECHOREPLY if reply else ICMP_ECHO, 0, struct.pack("!HH", ident, seq) + data)


@checked
def icmpv6(type: int, code: int, payload: bytes, src_ip: Address,
           dst_ip: Address) -> bytes:
    """An ICMPv6 message with its checksum over the IPv6 pseudo-header (RFC 4443 2.3)."""
    _check_range("ICMPv6 type", type, 0xFF)
    _check_range("ICMPv6 code", code, 0xFF)
    msg = bytearray(struct.pack("!BBH", type, code, 0) + payload)
    csum = internet_checksum(pseudo_header(ip6(src_ip), ip6(dst_ip), IPPROTO_ICMPV6, len(msg))
                             + msg)
    struct.pack_into("!H", msg, 2, csum)
    return bytes(msg)


@checked
def icmpv6_echo(ident: int, seq: int, data: bytes, src_ip: Address, dst_ip: Address, *,
                reply: bool = False) -> bytes:
    """An ICMPv6 echo request (or reply) message."""
    _check_range("ident", ident, 0xFFFF)
    _check_range("seq", seq, 0xFFFF)
    return icmpv6(ICMPV6_ECHO_REPLY if reply else ICMPV6_ECHO_REQUEST, 0,
                  struct.pack("!HH", ident, seq) + data, src_ip, dst_ip)


# ---------------------------------------------------------------------------
# Whole frames with defaults
# ---------------------------------------------------------------------------

def _pattern(n: int) -> bytes:
    """Filler payload 00 01 02 ... ff 00 ...: non-zero, so a program that reads
    the payload sees distinct bytes, yet fully determined by the length."""
    return (bytes(range(256)) * (n // 256 + 1))[:n]


def _addresses(src_ip: Address | None, dst_ip: Address | None,
               ipv6: bool) -> tuple[bytes, bytes]:
    defaults = _DEFAULT_V6 if ipv6 else _DEFAULT_V4
    src = _ip(src_ip if src_ip is not None else defaults[0])
    dst = _ip(dst_ip if dst_ip is not None else defaults[1])
    if len(src) != len(dst):
        raise PacketError("source and destination addresses of different families")
    return src, dst


def _sized(payload: bytes, size: int | None, overhead: int) -> bytes:
    """``payload`` grown with :func:`_pattern` bytes so the frame is ``size`` bytes."""
    if size is None:
        return payload
    room = size - overhead
    if room > 0xFFFF:  # built first, a 4 GiB --size took minutes, then this was refused
        raise PacketError(f"a {size}-byte frame is too large: its payload would take {room} "
                          f"bytes, more than an IP packet's 65535")
    if room < len(payload):
        raise PacketError(f"a {size}-byte frame is too small: its headers take {overhead} "
                          f"bytes and the payload {len(payload)}")
    return payload + _pattern(room - len(payload))[: room - len(payload)]


def _frame(src: bytes, dst: bytes, proto: int, segment: bytes, *, ttl: int,
           src_mac: str | bytes, dst_mac: str | bytes, vlans: Sequence[Vlan],
           pad: bool) -> bytes:
    if len(src) == 16:
        return ether(dst_mac, src_mac, ETH_P_IPV6, ipv6(src, dst, proto, segment, ttl),
                     vlans, pad=pad)
    return ether(dst_mac, src_mac, ETH_P_IP, ipv4(src, dst, proto, segment, ttl), vlans, pad=pad)


def _overhead(vlans: Sequence[Vlan], src: bytes, l4: int) -> int:
    return ETH_HLEN + 4 * len(vlans) + (40 if len(src) == 16 else 20) + l4


@checked
def udp_packet(payload: bytes = b"", *, sport: int = 1234, dport: int = 5678,
               src_ip: Address | None = None, dst_ip: Address | None = None,
               ipv6: bool = False, src_mac: str | bytes = DEFAULT_SRC_MAC,
               dst_mac: str | bytes = DEFAULT_DST_MAC, vlans: Sequence[Vlan] = (),
               ttl: int = 64, size: int | None = None, pad: bool = False) -> bytes:
    """An Ethernet frame carrying UDP over IPv4 (IPv6 with ``ipv6=True`` or v6 addresses).

    ``size`` makes the whole frame exactly that many bytes by growing the
    payload with a 00 01 02 ... pattern (the IP and UDP lengths grow with it);
    ``pad`` instead adds Ethernet padding up to 60 bytes.
    """
    src, dst = _addresses(src_ip, dst_ip, ipv6)
    data = _sized(payload, size, _overhead(vlans, src, 8))
    return _frame(src, dst, IPPROTO_UDP, udp(sport, dport, data, src, dst), ttl=ttl,
                  src_mac=src_mac, dst_mac=dst_mac, vlans=vlans, pad=pad)


@checked
def tcp_packet(payload: bytes = b"", *, sport: int = 1234, dport: int = 80,
               flags: int | str = "S", seq: int = 1, ack: int = 0, window: int = 65535,
               options: bytes = b"", src_ip: Address | None = None,
               dst_ip: Address | None = None, ipv6: bool = False,
               src_mac: str | bytes = DEFAULT_SRC_MAC, dst_mac: str | bytes = DEFAULT_DST_MAC,
               vlans: Sequence[Vlan] = (), ttl: int = 64, size: int | None = None,
               pad: bool = False) -> bytes:
    """An Ethernet frame carrying TCP, a SYN by default.

    ``size`` and ``pad`` work as in :func:`udp_packet`.
    """
    src, dst = _addresses(src_ip, dst_ip, ipv6)
    l4 = 20 + len(options) + (-len(options) % 4)
    data = _sized(payload, size, _overhead(vlans, src, l4))
    seg = tcp(sport, dport, flags, data, seq, ack, src_ip=src, dst_ip=dst, window=window,
              options=options)
    return _frame(src, dst, IPPROTO_TCP, seg, ttl=ttl, src_mac=src_mac, dst_mac=dst_mac,
                  vlans=vlans, pad=pad)


@checked
def icmp_packet(payload: bytes = b"", *, ident: int = 1, seq: int = 1, reply: bool = False,
                src_ip: Address | None = None, dst_ip: Address | None = None,
                ipv6: bool = False, src_mac: str | bytes = DEFAULT_SRC_MAC,
                dst_mac: str | bytes = DEFAULT_DST_MAC, vlans: Sequence[Vlan] = (),
                ttl: int = 64, size: int | None = None, pad: bool = False) -> bytes:
    """An Ethernet frame carrying an echo request (reply): ICMP, or ICMPv6 over IPv6."""
    src, dst = _addresses(src_ip, dst_ip, ipv6)
    data = _sized(payload, size, _overhead(vlans, src, 8))
    if len(src) == 16:
        msg = icmpv6_echo(ident, seq, data, src, dst, reply=reply)
        return _frame(src, dst, IPPROTO_ICMPV6, msg, ttl=ttl, src_mac=src_mac,
                      dst_mac=dst_mac, vlans=vlans, pad=pad)
    return _frame(src, dst, IPPROTO_ICMP, icmp_echo(ident, seq, data, reply=reply), ttl=ttl,
                  src_mac=src_mac, dst_mac=dst_mac, vlans=vlans, pad=pad)


@checked
def arp_packet(*, op: int = ARPOP_REQUEST, sender_mac: str | bytes = DEFAULT_SRC_MAC,
               sender_ip: Address = _DEFAULT_V4[0], target_mac: str | bytes = bytes(6),
               target_ip: Address = _DEFAULT_V4[1], dst_mac: str | bytes | None = None,
               vlans: Sequence[Vlan] = (), pad: bool = False) -> bytes:
    """An ARP frame: a broadcast who-has by default, a reply to ``target_mac`` for ARPOP_REPLY."""
    if dst_mac is None:
        dst_mac = BROADCAST_MAC if op == ARPOP_REQUEST else target_mac
    return ether(dst_mac, sender_mac, ETH_P_ARP,
                 arp(op, sender_mac, sender_ip, target_mac, target_ip), vlans, pad=pad)


# ---------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------

_SIZES = (64, 128, 256, 512, 599, 600, 601, 1024, 1514, 1518, 3520, 3521, 4096, 5000, 9000)
"""Frame sizes around the thresholds that matter: 600 (adjust_tail's default
``max_pkt_size``), 1514/1518 (a 1500-byte MTU, untagged and tagged), 3520/3521
(the largest linear part BPF_PROG_TEST_RUN gives a 4096-byte page after 256
bytes of headroom and 320 of skb_shared_info, and one past it), 4096, and
jumbo frames that need XDP frags."""

_TCP_SYN_OPTIONS = (
    b"\x02\x04\x05\xb4"  # MSS 1460
    b"\x04\x02"  # SACK permitted
    b"\x08\x0a\x00\x00\x00\x01\x00\x00\x00\x00"  # timestamps
    b"\x01"  # NOP
    b"\x03\x03\x07"  # window scale 7
)


def corpus(seed: int = 0) -> list[tuple[str, bytes]]:
    """Named frames for differential testing (user space against the kernel).

    Well-formed IPv4/IPv6 x TCP/UDP/ICMP(v6) frames untagged, 802.1Q-tagged
    and QinQ; ARP; truncated headers; the 14- and 60-byte minimums; sizes
    around thresholds (see ``_SIZES``) up to 9000-byte jumbo frames; IPv4
    options; IPv4 and IPv6 fragments; extension headers and tunnels; some
    malformed headers; and frames of random bytes drawn from ``seed``. Names
    are unique, and the list depends only on ``seed`` (only the random
    frames do).

    Frames shorter than an Ethernet header (``runt_*``, and some ``random_*``)
    are included on purpose: BPF_PROG_TEST_RUN refuses them with EINVAL, and
    a user-space run should refuse them the same way.
    """
    out: list[tuple[str, bytes]] = []
    seen: set[str] = set()

    def add(name: str, frame: bytes) -> None:
        assert name not in seen, name
        seen.add(name)
        out.append((name, frame))

    v4, v6 = _DEFAULT_V4, _DEFAULT_V6
    tags: dict[str, tuple[Vlan, ...]] = {"": (), "_vlan": (100,), "_qinq": (200, 100)}

    # The protocol matrix.
    for suffix, vl in tags.items():
        for fam, ipv6_ in (("ipv4", False), ("ipv6", True)):
            add(f"{fam}_udp{suffix}", udp_packet(b"hello pyxdp", ipv6=ipv6_, vlans=vl))
            add(f"{fam}_tcp_syn{suffix}",
                tcp_packet(ipv6=ipv6_, vlans=vl, options=_TCP_SYN_OPTIONS))
            add(f"{fam}_tcp_data{suffix}",
                tcp_packet(b"GET / HTTP/1.1\r\n\r\n", flags="PA", seq=1000, ack=2000,
                           ipv6=ipv6_, vlans=vl))
            icmp_name = "icmpv6" if ipv6_ else "icmp"
            add(f"{fam}_{icmp_name}_echo{suffix}",
                icmp_packet(b"ping" * 8, ipv6=ipv6_, vlans=vl))
        add(f"arp_request{suffix}", arp_packet(vlans=vl))
    add("arp_reply", arp_packet(op=ARPOP_REPLY, sender_ip=v4[1], target_ip=v4[0],
                                sender_mac=DEFAULT_DST_MAC, target_mac=DEFAULT_SRC_MAC))
    add("ipv4_icmp_echo_reply", icmp_packet(b"pong", reply=True))
    add("ipv4_tcp_rst", tcp_packet(flags="R", seq=5))
    add("ipv4_tcp_fin_ack", tcp_packet(flags="FA", seq=7, ack=9))
    add("ipv4_udp_broadcast", udp_packet(b"dhcp?", sport=68, dport=67, src_ip="0.0.0.0",
                                         dst_ip="255.255.255.255", dst_mac=BROADCAST_MAC))
    add("ipv6_udp_multicast", udp_packet(b"mdns", sport=5353, dport=5353,
                                         src_ip="fe80::1", dst_ip="ff02::fb",
                                         dst_mac="33:33:00:00:00:fb"))
    add("vlan_pcp_dei", udp_packet(b"prio", vlans=((ETH_P_8021Q, (5 << 13) | (1 << 12) | 42),)))
    add("vlan_triple", udp_packet(b"3 tags", vlans=((ETH_P_8021AD, 300), (ETH_P_8021Q, 200),
                                                    (ETH_P_8021Q, 100))))
    add("qinq_8100_8100", udp_packet(b"old qinq", vlans=((ETH_P_8021Q, 200),
                                                         (ETH_P_8021Q, 100))))
    add("ipv4_ttl1", udp_packet(b"expiring", ttl=1))
    add("ipv4_ttl0", udp_packet(b"expired", ttl=0))
    add("ipv6_hoplimit1", udp_packet(b"expiring", ipv6=True, ttl=1))
    add("ipv4_udp_nocsum", ether(DEFAULT_DST_MAC, DEFAULT_SRC_MAC, ETH_P_IP,
                                 ipv4(v4[0], v4[1], IPPROTO_UDP,
                                      udp(1, 2, b"x", v4[0], v4[1], checksum=False))))
    add("ipv4_udp_empty", udp_packet())

    # Minimum frames.
    add("eth_only_14", ether(DEFAULT_DST_MAC, DEFAULT_SRC_MAC, ETH_P_IP))
    add("eth_only_14_ipv6", ether(DEFAULT_DST_MAC, DEFAULT_SRC_MAC, ETH_P_IPV6))
    add("eth_only_14_unknown_type", ether(DEFAULT_DST_MAC, DEFAULT_SRC_MAC, 0x88B5))
    add("min60_ipv4_udp", udp_packet(pad=True))
    add("min60_ipv4_tcp", tcp_packet(pad=True))
    add("min60_arp", arp_packet(pad=True))
    add("min60_zeros", bytes(60))
    add("eth_802_3_length", ether(BROADCAST_MAC, DEFAULT_SRC_MAC, 46, bytes(46)))

    # Truncated headers: the ethertype promises more than the frame holds.
    full4 = udp_packet(b"truncated")
    tcp4 = tcp_packet(b"truncated")
    full6 = udp_packet(b"truncated", ipv6=True)
    add("trunc_ipv4_hdr_10", full4[: ETH_HLEN + 10])
    add("trunc_ipv4_hdr_19", full4[: ETH_HLEN + 19])
    add("trunc_ipv4_hdr_20", full4[: ETH_HLEN + 20])
    add("trunc_udp_hdr_4", full4[: ETH_HLEN + 20 + 4])
    add("trunc_tcp_hdr_10", tcp4[: ETH_HLEN + 20 + 10])
    add("trunc_tcp_hdr_19", tcp4[: ETH_HLEN + 20 + 19])
    add("trunc_ipv6_hdr_20", full6[: ETH_HLEN + 20])
    add("trunc_ipv6_hdr_39", full6[: ETH_HLEN + 39])
    add("trunc_vlan_tag", udp_packet(b"x", vlans=(100,))[: ETH_HLEN + 2])
    add("trunc_qinq_inner", udp_packet(b"x", vlans=(200, 100))[: ETH_HLEN + 4])
    add("runt_13", full4[:13])
    add("runt_1", full4[:1])

    # Sizes around thresholds, up to jumbo frames that need XDP frags.
    for size in _SIZES:
        add(f"ipv4_udp_size{size}", udp_packet(size=size))
    for size in (600, 601, 1514, 3521, 9000):
        add(f"ipv6_udp_size{size}", udp_packet(ipv6=True, size=size))
        add(f"ipv4_tcp_size{size}", tcp_packet(flags="PA", size=size))
    add("ipv4_icmp_size601", icmp_packet(size=601))
    add("ipv4_udp_vlan_size1518", udp_packet(vlans=(100,), size=1518))
    add("ipv4_udp_qinq_size5000", udp_packet(vlans=(200, 100), size=5000))

    # IPv4 options (IHL > 5).
    router_alert = b"\x94\x04\x00\x00"
    add("ipv4_opt_router_alert", _v4_frame(IPPROTO_UDP, udp(1, 2, b"ra", v4[0], v4[1]),
                                           options=router_alert))
    add("ipv4_opt_nop_eol", _v4_frame(IPPROTO_UDP, udp(1, 2, b"nop", v4[0], v4[1]),
                                      options=b"\x01\x01\x01\x00"))
    record_route = b"\x07\x27\x04" + bytes(36)  # 39 bytes: the 40-byte maximum after padding
    add("ipv4_opt_max40", _v4_frame(IPPROTO_TCP, tcp(1, 2, "S", src_ip=v4[0], dst_ip=v4[1]),
                                    options=record_route))
    add("ipv4_opt_size601", _v4_frame(IPPROTO_UDP, udp(1, 2, _pattern(601 - 14 - 24 - 8),
                                                       v4[0], v4[1]), options=router_alert))

    # Fragments: only the first carries the UDP header.
    whole = udp(1111, 2222, _pattern(64), v4[0], v4[1])
    add("ipv4_frag_first", _v4_frame(IPPROTO_UDP, whole[:32], ident=0x1234, df=False, mf=True))
    add("ipv4_frag_middle", _v4_frame(IPPROTO_UDP, whole[32:48], ident=0x1234, df=False,
                                      mf=True, frag_offset=32))
    add("ipv4_frag_last", _v4_frame(IPPROTO_UDP, whole[48:], ident=0x1234, df=False,
                                    frag_offset=48))
    w6 = udp(1111, 2222, _pattern(64), v6[0], v6[1])
    add("ipv6_frag_first", _v6_frame(IPPROTO_FRAGMENT,
                                     ipv6_fragment_header(IPPROTO_UDP, 0, True, 0x1234) + w6[:32]))
    add("ipv6_frag_last", _v6_frame(IPPROTO_FRAGMENT,
                                    ipv6_fragment_header(IPPROTO_UDP, 32, False, 0x1234)
                                    + w6[32:]))

    # Extension headers and tunnels.
    hbh = bytes([IPPROTO_UDP, 0, 1, 4, 0, 0, 0, 0])  # Hop-by-Hop: PadN filling 8 bytes
    add("ipv6_hbh_udp", _v6_frame(IPPROTO_HOPOPTS, hbh + udp(1, 2, b"hbh", v6[0], v6[1])))
    inner = ipv4("10.1.0.1", "10.2.0.1", IPPROTO_UDP, udp(7, 8, b"inner", "10.1.0.1", "10.2.0.1"))
    add("ipv4_ipip_udp", _v4_frame(IPPROTO_IPIP, inner))
    inner6 = ipv6(v6[0], v6[1], IPPROTO_UDP, udp(7, 8, b"inner", v6[0], v6[1]))
    add("ipv6_in_ipv4", _v4_frame(IPPROTO_IPV6, inner6))

    # Malformed headers a parser must reject rather than trust.
    good = bytearray(udp_packet(b"malformed"))
    bad = bytearray(good)
    bad[ETH_HLEN + 10] ^= 0xFF
    add("ipv4_bad_csum", bytes(bad))
    bad = bytearray(good)
    bad[ETH_HLEN] = 0x44  # IHL 4: shorter than the fixed header
    add("ipv4_ihl4", bytes(bad))
    bad = bytearray(good)
    bad[ETH_HLEN] = 0x4F  # IHL 15: 60 bytes of header, more than the frame has after it
    add("ipv4_ihl15_short", bytes(bad))
    bad = bytearray(good)
    bad[ETH_HLEN] = 0x65  # version 6 under an IPv4 ethertype
    add("ipv4_version6", bytes(bad))
    add("ipv4_totlen_gt_frame", _v4_frame(IPPROTO_UDP, udp(1, 2, b"short", v4[0], v4[1]),
                                          total_length=1000))
    add("ipv4_totlen_lt_hdr", _v4_frame(IPPROTO_UDP, udp(1, 2, b"short", v4[0], v4[1]),
                                        total_length=10))
    add("ipv4_udp_len_gt_ip", _v4_frame(IPPROTO_UDP, udp(1, 2, b"x", v4[0], v4[1], length=500)))
    add("ipv4_tcp_doff_gt_seg", _v4_frame(IPPROTO_TCP, _with_byte(
        tcp(1, 2, "S", src_ip=v4[0], dst_ip=v4[1]), 12, 0xF0)))
    add("ipv6_plen_gt_frame", ether(DEFAULT_DST_MAC, DEFAULT_SRC_MAC, ETH_P_IPV6,
                                    ipv6(v6[0], v6[1], IPPROTO_UDP,
                                         udp(1, 2, b"x", v6[0], v6[1]), payload_length=1000)))

    # Random bytes, seeded: arbitrary frames, then random payloads behind valid
    # Ethernet headers so parsers get past the first check.
    rng = random.Random(seed)
    for i in range(8):
        n = rng.choice((rng.randint(0, 64), rng.randint(14, 1514), rng.randint(1515, 9000)))
        add(f"random_{i}", rng.randbytes(n))
    for i, et in enumerate((ETH_P_IP, ETH_P_IPV6, ETH_P_ARP, ETH_P_8021Q, ETH_P_8021AD)):
        add(f"random_after_eth_{i}", ether(DEFAULT_DST_MAC, DEFAULT_SRC_MAC, et,
                                           rng.randbytes(rng.randint(0, 200))))
    for i in range(3):
        frame = bytearray(udp_packet(rng.randbytes(rng.randint(0, 100))))
        frame[ETH_HLEN + 20 + rng.randint(0, 7)] ^= 1 << rng.randint(0, 7)  # flip a UDP bit
        add(f"random_udp_bitflip_{i}", bytes(frame))
    return out


def _v4_frame(proto: int, payload: bytes, *, options: bytes = b"", ident: int = 0,
              df: bool = True, mf: bool = False, frag_offset: int = 0,
              total_length: int | None = None) -> bytes:
    src, dst = _DEFAULT_V4
    return ether(DEFAULT_DST_MAC, DEFAULT_SRC_MAC, ETH_P_IP,
                 ipv4(src, dst, proto, payload, ident=ident, flags_df=df, options=options,
                      more_fragments=mf, frag_offset=frag_offset, total_length=total_length))


def _v6_frame(next_header: int, payload: bytes) -> bytes:
    src, dst = _DEFAULT_V6
    return ether(DEFAULT_DST_MAC, DEFAULT_SRC_MAC, ETH_P_IPV6,
                 ipv6(src, dst, next_header, payload))


def _with_byte(data: bytes, offset: int, value: int) -> bytes:
    out = bytearray(data)
    out[offset] = value
    return bytes(out)


# ---------------------------------------------------------------------------
# Traffic source
# ---------------------------------------------------------------------------

_PROTOS = ("udp", "tcp", "icmp")
_TRAFFIC_DST4 = "198.19.0.1"  # RFC 2544 benchmarking range 198.18.0.0/15
_TRAFFIC_DST6 = "2001:2:0:1::1"  # RFC 5180 benchmarking range 2001:2::/48
_UDP_DPORT = 9  # discard
_TCP_DPORT = 80
_MASK64 = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15


def _flow_src(flow: int, v6: bool) -> bytes:
    """Flow ``flow``'s source address: the benchmarking prefix with ``flow`` in the last 16 bits."""
    base = ip6("2001:2::") if v6 else ip4("198.18.0.0")
    return base[:-2] + flow.to_bytes(2, "big")


def _flow_sport(flow: int) -> int:
    """Flow ``flow``'s source port: unprivileged, distinct for every flow < 64512."""
    return 1024 + flow % 64512


def _vlan_list(vlan: int | Sequence[int] | None) -> tuple[int, ...]:
    if vlan is None:
        return ()
    if isinstance(vlan, int | np.integer):
        return (int(vlan),)
    if not isinstance(vlan, Sequence) or isinstance(vlan, str | bytes):
        raise PacketError(f"vlan must be a VID or a sequence of VIDs, not {short(vlan)}")
    return tuple(vlan)


@checked
def flow_frame(flow: int, size: int, proto: str, *, vlan: int | Sequence[int] | None = None,
               ipv6: bool = False) -> bytes:
    """One frame of :func:`traffic`: ``proto`` ("udp", "tcp" or "icmp") of ``size`` bytes.

    A flow differs from flow 0 in two 16-bit words only: the low 16 bits of
    the source address (``198.18.x.y`` / ``2001:2::x:y``) and the source port
    (the echo identifier for ICMP). That is what lets :func:`batch` tile one
    template per (size, protocol) and patch those words with numpy.
    """
    if not 0 <= flow <= 0xFFFF:
        raise PacketError(f"flow {flow} out of range 0..65535")
    vlans = _vlan_list(vlan)
    src = _flow_src(flow, ipv6)
    dst = ip6(_TRAFFIC_DST6) if ipv6 else ip4(_TRAFFIC_DST4)
    if proto == "udp":
        return udp_packet(sport=_flow_sport(flow), dport=_UDP_DPORT, src_ip=src, dst_ip=dst,
                          vlans=vlans, size=size)
    if proto == "tcp":
        return tcp_packet(sport=_flow_sport(flow), dport=_TCP_DPORT, flags="A", seq=1, ack=1,
                          src_ip=src, dst_ip=dst, vlans=vlans, size=size)
    if proto == "icmp":
        return icmp_packet(ident=flow, seq=1, src_ip=src, dst_ip=dst, vlans=vlans, size=size)
    raise PacketError(f"unknown traffic protocol {proto!r} (one of {', '.join(_PROTOS)})")


@dataclass(frozen=True)
class _Mix:
    """The per-packet choices of a traffic stream, as a pure function of (seed, index).

    A counter-based generator (SplitMix64 of ``seed`` and the packet index)
    rather than a stateful one: packet ``i`` is the same whether it is made
    by :func:`traffic` one by one or by :func:`batch` in one vectorised draw.
    """

    flows: int
    sizes: tuple[int, ...]
    protos: tuple[str, ...]
    key: int

    @classmethod
    def make(cls, flows: int, sizes: Sequence[int], protos: Sequence[str], seed: int) -> _Mix:
        if not 1 <= flows <= 0x10000:
            raise PacketError(f"flows must be 1..65536, not {flows}")
        if not sizes or not protos:
            raise PacketError("sizes and protos must not be empty")
        for p in protos:
            if not isinstance(p, str) or p not in _PROTOS:
                raise PacketError(f"unknown traffic protocol {short(p)} (one of "
                                  f"{', '.join(_PROTOS)})")
        for size in sizes:
            _check_range("a frame size", size, 0xFFFFFFFF)  # what fits, flow_frame says
        key = int(_splitmix(np.array([seed & _MASK64], dtype=np.uint64))[0])
        return cls(flows, tuple(int(s) for s in sizes), tuple(protos), key)

    def choose(self, index: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.int64], ...]:
        with np.errstate(over="ignore"):
            z = _splitmix(index * np.uint64(_GAMMA) + np.uint64(self.key))
        flow = ((z & np.uint64(0xFFFFFFFF)) % np.uint64(self.flows)).astype(np.int64)
        size = (((z >> np.uint64(32)) & np.uint64(0xFFFF))
                % np.uint64(len(self.sizes))).astype(np.int64)
        proto = ((z >> np.uint64(48)) % np.uint64(len(self.protos))).astype(np.int64)
        return flow, size, proto


def _splitmix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """The SplitMix64 output function (wrapping uint64 arithmetic)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(_GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


@checked
def traffic(flows: int = 1, sizes: Sequence[int] = (64,), protos: Sequence[str] = ("udp",),
            vlan: int | Sequence[int] | None = None, ipv6: bool = False, seed: int = 0, *,
            count: int | None = None) -> Iterator[bytes]:
    """A deterministic stream of frames for a datapath traffic source.

    Packet ``i`` is :func:`flow_frame` of a flow, a size from ``sizes`` and a
    protocol from ``protos`` ("udp", "tcp", "icmp"; ICMPv6 with ``ipv6``),
    each drawn from ``seed`` and ``i`` alone. Repeat an entry of ``sizes`` or
    ``protos`` to weight it. ``vlan`` is a VID (802.1Q) or a sequence of VIDs
    (QinQ, outermost first). Endless unless ``count`` is given.
    """
    mix = _Mix.make(flows, sizes, protos, seed)
    vlans = _vlan_list(vlan)
    chunk = 256
    start = 0
    while count is None or start < count:
        n = chunk if count is None else min(chunk, count - start)
        flow, size, proto = mix.choose(np.arange(start, start + n, dtype=np.uint64))
        for f, s, p in zip(flow.tolist(), size.tolist(), proto.tolist(), strict=True):
            yield _cached_flow_frame(f, mix.sizes[s], mix.protos[p], vlans, ipv6)
        start += n


@lru_cache(maxsize=1024)  # bounded: 65536 flows of 9000-byte frames would not fit
def _cached_flow_frame(flow: int, size: int, proto: str, vlans: tuple[int, ...],
                       ipv6: bool) -> bytes:
    return flow_frame(flow, size, proto, vlan=vlans, ipv6=ipv6)


@dataclass(frozen=True)
class _Template:
    """A flow-0 frame and where the per-flow words and checksums sit in it."""

    frame: bytes
    l3: int  # offset of the IP header
    v6: bool
    proto: str

    @property
    def src_word(self) -> int:
        """Offset of the source address's last 16 bits."""
        return self.l3 + (22 if self.v6 else 14)

    @property
    def l4(self) -> int:
        return self.l3 + (40 if self.v6 else 20)

    @property
    def port_word(self) -> int:
        """Offset of the per-flow L4 word: the source port, or the ICMP echo identifier."""
        return self.l4 + (4 if self.proto == "icmp" else 0)

    @property
    def csum_word(self) -> int:
        return self.l4 + {"udp": 6, "tcp": 16, "icmp": 2}[self.proto]

    @property
    def pseudo(self) -> bool:
        """Whether the L4 checksum covers the addresses (all but ICMPv4)."""
        return self.v6 or self.proto != "icmp"

    def l4_constant(self) -> int:
        """Residue (mod 0xffff) of the L4 checksum's coverage, minus the per-flow words.

        The checksum field and both per-flow words are zeroed before summing,
        so a packet's sum is this constant plus its own per-flow words.
        """
        f = bytearray(self.frame)
        f[self.csum_word:self.csum_word + 2] = b"\0\0"
        f[self.port_word:self.port_word + 2] = b"\0\0"
        f[self.src_word:self.src_word + 2] = b"\0\0"
        seg = bytes(f[self.l4:])  # sized frames carry no Ethernet padding after the IP packet
        total = _residue(seg)
        if self.pseudo:
            alen = 16 if self.v6 else 4
            src = bytes(f[self.l4 - 2 * alen:self.l4 - alen])
            dst = bytes(f[self.l4 - alen:self.l4])
            nh = {"udp": IPPROTO_UDP, "tcp": IPPROTO_TCP, "icmp": IPPROTO_ICMPV6}[self.proto]
            total += _residue(pseudo_header(src, dst, nh, len(seg)))
        return total % 0xFFFF


def _template(size: int, proto: str, vlans: tuple[int, ...], v6: bool) -> _Template:
    frame = _cached_flow_frame(0, size, proto, vlans, v6)
    return _Template(frame, ETH_HLEN + 4 * len(vlans), v6, proto)


def _put16(buf: npt.NDArray[np.uint8], rows: npt.NDArray[np.intp], off: int,
           value: npt.NDArray[np.uint64]) -> None:
    buf[rows, off] = (value >> np.uint64(8)).astype(np.uint8)
    buf[rows, off + 1] = (value & np.uint64(0xFF)).astype(np.uint8)


def _complement(total: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Checksum from a word sum that is known to include a non-zero word (see :func:`_fold`)."""
    r = total % np.uint64(0xFFFF)
    r = np.where(r == 0, np.uint64(0xFFFF), r)
    return np.uint64(0xFFFF) - r


@checked
def batch(n: int, flows: int = 1, sizes: Sequence[int] = (64,),
          protos: Sequence[str] = ("udp",), vlan: int | Sequence[int] | None = None,
          ipv6: bool = False, seed: int = 0, *,
          stride: int | None = None) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint32]]:
    """The first ``n`` frames of :func:`traffic` (same arguments) as one numpy buffer.

    Returns ``(buffer, lengths)``: frame ``i`` is
    ``buffer[i*stride : i*stride + lengths[i]]``, zero-filled up to ``stride``
    (default: the largest size rounded up to 64). One template per distinct
    (size, protocol) is built in Python; the per-flow words are patched and
    the checksums fixed with vectorised numpy, so the cost per packet is a
    few array operations, not a Python call.
    """
    if n < 0:
        raise PacketError(f"n must be >= 0, not {n}")
    mix = _Mix.make(flows, sizes, protos, seed)
    vlans = _vlan_list(vlan)
    top = max(mix.sizes)
    if stride is None:
        stride = -(-top // 64) * 64
    if stride < top:
        raise PacketError(f"stride {stride} is smaller than the largest size {top}")
    flow, size_i, proto_i = mix.choose(np.arange(n, dtype=np.uint64))
    combo = size_i * len(mix.protos) + proto_i
    # Every frame's template first: a size no frame can have fails here, not after
    # allocating n rows of it.
    templates = {c: _template(mix.sizes[c // len(mix.protos)], mix.protos[c % len(mix.protos)],
                              vlans, ipv6) for c in np.unique(combo).tolist()}
    buf = np.zeros((n, stride), dtype=np.uint8)
    sizes_arr = np.asarray(mix.sizes, dtype=np.uint32)
    lengths = sizes_arr[size_i]
    for c, t in templates.items():
        rows = np.flatnonzero(combo == c)
        buf[rows, :len(t.frame)] = np.frombuffer(t.frame, dtype=np.uint8)
        f = flow[rows].astype(np.uint64)
        port = f if t.proto == "icmp" else np.uint64(1024) + f % np.uint64(64512)
        _put16(buf, rows, t.src_word, f)
        _put16(buf, rows, t.port_word, port)
        if not t.v6:
            # IPv4 header checksum: recomputed in full over the 10 words.
            hdr = buf[rows, t.l3:t.l3 + 20].astype(np.uint64)
            hdr[:, 10:12] = 0
            words = (hdr[:, 0::2] << np.uint64(8)) | hdr[:, 1::2]
            _put16(buf, rows, t.l3 + 10, _complement(words.sum(axis=1)))
        total = np.uint64(t.l4_constant()) + port + (f if t.pseudo else np.uint64(0))
        csum = _complement(total)
        if t.proto == "udp":
            csum = np.where(csum == 0, np.uint64(0xFFFF), csum)  # 0 means "no checksum"
        _put16(buf, rows, t.csum_word, csum)
    return buf.reshape(-1), lengths.astype(np.uint32)
