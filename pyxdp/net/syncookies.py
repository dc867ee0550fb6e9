"""SYN cookies: ``net/ipv4/syncookies.c`` and ``net/ipv6/syncookies.c``.

A cookie is the initial sequence number of a SYN-ACK that encodes the
connection without state: ``__cookie_v4_init_sequence`` /
``__cookie_v6_init_sequence`` pick the largest entry of the MSS table not
above the peer's MSS and compute ``secure_tcp_syn_cookie``; ``__cookie_v4_check``
/ ``__cookie_v6_check`` take the ACK back apart and give the MSS it encodes, or
0 when the cookie is not one of the last two minutes' (``MAX_SYNCOOKIE_AGE``
periods of ``TCP_SYNCOOKIE_PERIOD``). The hashes are SipHash-2-4 keyed with a
per-process secret (:data:`SECRETS`, which the JIT's native twins read too), as
Linux keys them with one drawn at boot (``net_get_random_once``): a cookie pyxdp
made checks valid in pyxdp, never in Linux, and the cookie values differ from
Linux's (they depend on the secret and on the time); every rule around them is
Linux's. ``tcp_parse_mss_option`` (``net/ipv4/tcp_input.c``) reads the MSS option
of a header.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

import numpy as np

from pyxdp.vm.jiffies import HZ
from pyxdp.vm.jiffies import jiffies64 as jiffies

__all__ = ["COOKIEBITS", "MSSTAB", "MSSTAB6", "SECRETS", "TCP_MSS_DEFAULT", "TCP_SYNCOOKIE_PERIOD",
           "TCP_SYNCOOKIE_VALID", "cookie_check", "cookie_init_sequence", "siphash",
           "tcp_parse_mss_option"]

COOKIEBITS = 24  # the upper bits hold the minute counter
COOKIEMASK = (1 << COOKIEBITS) - 1
MAX_SYNCOOKIE_AGE = 2
TCP_SYNCOOKIE_PERIOD = 60 * HZ
TCP_SYNCOOKIE_VALID = MAX_SYNCOOKIE_AGE * TCP_SYNCOOKIE_PERIOD
TCP_MSS_DEFAULT = 536
IPV6_MIN_MTU = 1280
# The MSS values a cookie can encode (2 bits): IPv4's, and IPv6's (MTUs less 60 bytes).
MSSTAB = (536, 1300, 1440, 1460)
MSSTAB6 = (1280 - 60, 1480 - 60, 1500 - 60, 9000 - 60)
TCPOPT_EOL, TCPOPT_NOP, TCPOPT_MSS, TCPOLEN_MSS = 0, 1, 2, 4
M32 = 0xFFFF_FFFF
M64 = 0xFFFF_FFFF_FFFF_FFFF

# syncookie_secret[2] and syncookie6_secret[2]: siphash keys, drawn once per process, as
# 8 little-endian words (k0, k1 of each key in turn) native code reads too.
SECRETS = np.frombuffer(os.urandom(64), np.uint64)
_RAW = SECRETS.tobytes()
_SECRET4 = (_RAW[0:16], _RAW[16:32])
_SECRET6 = (_RAW[32:48], _RAW[48:64])


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & M64


def siphash(data: bytes, key: bytes) -> int:
    """SipHash-2-4 of ``data`` under the 16-byte ``key`` (``lib/siphash.c``)."""
    k0: int = int.from_bytes(key[:8], "little")
    k1: int = int.from_bytes(key[8:16], "little")
    v0, v1 = k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D
    v2, v3 = k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573

    def rounds(n: int) -> None:
        nonlocal v0, v1, v2, v3
        for _ in range(n):
            v0 = (v0 + v1) & M64
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & M64
            v3 = _rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & M64
            v3 = _rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & M64
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)

    tail = len(data) % 8
    for (m,) in struct.iter_unpack("<Q", data[:len(data) - tail]):
        v3 ^= m
        rounds(2)
        v0 ^= m
    m = (len(data) & 0xFF) << 56 | int.from_bytes(data[len(data) - tail:], "little")
    v3 ^= m
    rounds(2)
    v0 ^= m
    v2 ^= 0xFF
    rounds(4)
    return v0 ^ v1 ^ v2 ^ v3


def _hash(v6: bool, saddr: bytes, daddr: bytes, ports: bytes, count: int, c: int) -> int:
    """``cookie_hash``: the four-word hash of IPv4 (addresses, ``sport << 16 | dport``
    of the big-endian ports read as host words, count), IPv6's of its packed struct."""
    if v6:
        data = saddr + daddr + struct.pack("<I", count) + ports
        return siphash(data, _SECRET6[c]) & M32
    sport, dport = struct.unpack("<HH", ports)
    data = saddr + daddr + struct.pack("<II", (sport << 16 | dport) & M32, count)
    return siphash(data, _SECRET4[c]) & M32


def _addrs(iph: bytes, v6: bool) -> tuple[bytes, bytes]:
    return (iph[8:24], iph[24:40]) if v6 else (iph[12:16], iph[16:20])


def cookie_init_sequence(iph: bytes, th: bytes, mss: int, *, v6: bool,
                         now: Callable[[], int] = jiffies) -> tuple[int, int]:
    """``__cookie_v4_init_sequence`` / ``__cookie_v6_init_sequence``: (the cookie, the
    MSS it encodes) for the SYN of headers ``iph`` (20 or 40 bytes) and ``th``."""
    tab = MSSTAB6 if v6 else MSSTAB
    ind = len(tab) - 1
    while ind and mss < tab[ind]:
        ind -= 1
    saddr, daddr = _addrs(iph, v6)
    ports = th[0:4]
    seq = int.from_bytes(th[4:8], "big")
    count = (now() // TCP_SYNCOOKIE_PERIOD) & M32
    cookie = (_hash(v6, saddr, daddr, ports, 0, 0) + seq + (count << COOKIEBITS) +
              ((_hash(v6, saddr, daddr, ports, count, 1) + ind) & COOKIEMASK)) & M32
    return cookie, tab[ind]


def cookie_check(iph: bytes, th: bytes, *, v6: bool, now: Callable[[], int] = jiffies) -> int:
    """``__cookie_v4_check`` / ``__cookie_v6_check``: the MSS the ACK's cookie
    (``ack_seq - 1``) encodes, 0 if it is no valid cookie of the last two periods."""
    tab = MSSTAB6 if v6 else MSSTAB
    saddr, daddr = _addrs(iph, v6)
    ports = th[0:4]
    cookie = (int.from_bytes(th[8:12], "big") - 1) & M32
    seq = (int.from_bytes(th[4:8], "big") - 1) & M32
    count = (now() // TCP_SYNCOOKIE_PERIOD) & M32
    # check_tcp_syn_cookie: strip the first hash and the sequence, then the minute
    cookie = (cookie - (_hash(v6, saddr, daddr, ports, 0, 0) + seq)) & M32
    diff = (count - (cookie >> COOKIEBITS)) & (M32 >> COOKIEBITS)
    if diff >= MAX_SYNCOOKIE_AGE:
        return 0
    ind = (cookie - _hash(v6, saddr, daddr, ports, (count - diff) & M32, 1)) & COOKIEMASK
    return tab[ind] if ind < len(tab) else 0


def tcp_parse_mss_option(th: bytes, user_mss: int) -> int:
    """``tcp_parse_mss_option``: the MSS option of the header's options (``doff``
    words), capped at ``user_mss`` when that is set; 0 when there is none."""
    length = (th[12] >> 4) * 4 - 20
    p = 20
    mss = 0
    while length > 0:
        opcode = th[p]
        p += 1
        if opcode == TCPOPT_EOL:
            return mss
        if opcode == TCPOPT_NOP:
            length -= 1
            continue
        if length < 2:
            return mss
        opsize = th[p]
        p += 1
        if opsize < 2 or opsize > length:  # silly or partial options
            return mss
        if opcode == TCPOPT_MSS and opsize == TCPOLEN_MSS:
            in_mss = int.from_bytes(th[p:p + 2], "big")
            if in_mss:
                mss = user_mss if user_mss and user_mss < in_mss else in_mss
        p += opsize - 2
        length -= opsize
    return mss
