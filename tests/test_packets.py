"""Packet builders, checksums, the corpus and the traffic source (pyxdp.net.packets)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyxdp.errors import PyxdpError
from pyxdp.net import packets as P


def ref_checksum(data: bytes) -> int:
    """RFC 1071 the slow, obvious way: add words with end-around carry, complement."""
    if len(data) % 2:
        data += b"\0"
    s = 0
    for i in range(0, len(data), 2):
        s += (data[i] << 8) | data[i + 1]
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


# ---------------------------------------------------------------------------
# Checksums
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(("data", "expected"), [
    (bytes.fromhex("0001f203f4f5f6f7"), 0x220D),  # RFC 1071 section 3 example
    # The classic IPv4 header example (checksum field zeroed): b861.
    (bytes.fromhex("450000730000400040110000c0a80001c0a800c7"), 0xB861),
    (b"", 0xFFFF),
    (bytes(8), 0xFFFF),
    (b"\x01", 0xFEFF),  # odd length: padded with a zero byte at the end
    (b"\xff\xff", 0x0000),  # sum is -0 (0xffff), so the checksum is 0
    (b"\x00\x01\xff\xfe", 0x0000),
    (b"\x80\x00\x80\x00", 0xFFFE),  # carry wraps around: 0x10000 -> 0x0001
])
def test_internet_checksum_vectors(data: bytes, expected: int) -> None:
    assert P.internet_checksum(data) == expected
    assert ref_checksum(data) == expected


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_internet_checksum_matches_reference(data: bytes) -> None:
    assert P.internet_checksum(data) == ref_checksum(data)


def test_ipv4_header_matches_known_vector() -> None:
    ip = P.ipv4("192.168.0.1", "192.168.0.199", P.IPPROTO_UDP, bytes(0x73 - 20))
    assert ip[:20].hex() == "45000073000040004011b861c0a80001c0a800c7"


# Frames pinned after tshark (with IP/UDP/TCP/ICMP checksum validation on)
# reported every checksum in them as good; the per-word sums are also checked
# against ref_checksum below.
PINNED = {
    "udp4": ("0200000000020200000000010800450000270000400040114e8fc0000201c633640204d2162e"
             "00135bc068656c6c6f207079786470"),
    "tcp4_syn": ("0200000000020200000000010800450000280000400040064e99c0000201c633640204d2"
                 "005000000001000000005002ffffbe880000"),
    "icmp4_echo": ("0200000000020200000000010800450000200000400040014ea6c0000201c63364020800"
                   "192d0001000170696e67"),
    "udp6": ("02000000000202000000000186dd600000000013114020010db800000000000000000000000120"
             "010db800000000000000000000000204d2162e0013ec8268656c6c6f207079786470"),
    "icmp6_echo": ("02000000000202000000000186dd60000000000c3a4020010db8000000000000000000000001"
                   "20010db8000000000000000000000002800045710001000170696e67"),
}


def test_pinned_frames() -> None:
    assert P.udp_packet()[26:34] == P.ip4(P.DEFAULT_SRC_IP4) + P.ip4(P.DEFAULT_DST_IP4)
    assert P.udp_packet(ipv6=True)[22:54] == P.ip6(P.DEFAULT_SRC_IP6) + P.ip6(P.DEFAULT_DST_IP6)
    assert P.udp_packet(b"hello pyxdp").hex() == PINNED["udp4"]
    assert P.tcp_packet().hex() == PINNED["tcp4_syn"]
    assert P.icmp_packet(b"ping").hex() == PINNED["icmp4_echo"]
    assert P.udp_packet(b"hello pyxdp", ipv6=True).hex() == PINNED["udp6"]
    assert P.icmp_packet(b"ping", ipv6=True).hex() == PINNED["icmp6_echo"]


def _l4_offsets(frame: bytes) -> tuple[int, int, bool] | None:
    """(l3 offset, l4 offset, is_v6) of an untruncated, unfragmented IP frame."""
    off = 12
    et = struct.unpack_from("!H", frame, off)[0]
    while et in (P.ETH_P_8021Q, P.ETH_P_8021AD):
        off += 4
        et = struct.unpack_from("!H", frame, off)[0]
    l3 = off + 2
    if et == P.ETH_P_IP:
        return l3, l3 + (frame[l3] & 0xF) * 4, False
    if et == P.ETH_P_IPV6:
        return l3, l3 + 40, True
    return None


def verify_frame(frame: bytes) -> None:
    """Independent check of every checksum in a well-formed IP frame."""
    found = _l4_offsets(frame)
    assert found is not None
    l3, l4, v6 = found
    if v6:
        plen = struct.unpack_from("!H", frame, l3 + 4)[0]
        proto = frame[l3 + 6]
        src, dst = frame[l3 + 8:l3 + 24], frame[l3 + 24:l3 + 40]
        seg = frame[l4:l4 + plen]
        pseudo = src + dst + struct.pack("!I3xB", len(seg), proto)
    else:
        assert ref_checksum(frame[l3:l4]) == 0
        total = struct.unpack_from("!H", frame, l3 + 2)[0]
        proto = frame[l3 + 9]
        src, dst = frame[l3 + 12:l3 + 16], frame[l3 + 16:l3 + 20]
        seg = frame[l4:l3 + total]
        pseudo = src + dst + struct.pack("!BBH", 0, proto, len(seg))
    if proto == P.IPPROTO_ICMP:
        assert ref_checksum(seg) == 0
    elif proto in (P.IPPROTO_UDP, P.IPPROTO_TCP, P.IPPROTO_ICMPV6):
        assert ref_checksum(pseudo + seg) == 0


def test_pinned_frames_verify() -> None:
    for hx in PINNED.values():
        verify_frame(bytes.fromhex(hx))


def test_udp_zero_checksum_is_sent_as_ffff() -> None:
    src, dst = P.ip4("192.0.2.1"), P.ip4("192.0.2.2")
    # Appending a word equal to the checksum makes the sum 0xffff: computed checksum 0.
    base = P.udp(1, 2, b"\0\0", src, dst)
    word = P.internet_checksum(P.pseudo_header(src, dst, P.IPPROTO_UDP, 10)
                               + base[:6] + b"\0\0" + b"\0\0")
    seg = P.udp(1, 2, word.to_bytes(2, "big"), src, dst)
    assert seg[6:8] == b"\xff\xff"
    assert ref_checksum(P.pseudo_header(src, dst, P.IPPROTO_UDP, 10) + seg) == 0
    assert P.udp(1, 2, b"x", src, dst, checksum=False)[6:8] == b"\0\0"


def test_pseudo_headers() -> None:
    assert P.pseudo_header("1.2.3.4", "5.6.7.8", 17, 0x1234).hex() == "01020304050607080011" "1234"
    ph6 = P.pseudo_header("::1", "::2", 58, 0x10203)
    assert len(ph6) == 40 and ph6[32:].hex() == "0001020300000" "03a"
    with pytest.raises(P.PacketError):
        P.pseudo_header("1.2.3.4", "::1", 17, 8)


# ---------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------

def test_addresses() -> None:
    assert P.mac("aa:bb:cc:dd:ee:ff") == bytes.fromhex("aabbccddeeff")
    assert P.mac("0-1-2-3-4-5") == bytes(range(6))
    assert P.ip4("10.0.0.1") == b"\x0a\0\0\x01"
    assert P.ip6("2001:db8::1") == bytes.fromhex("20010db8" + "00" * 11 + "01")
    for bad in ("aa:bb", "zz:bb:cc:dd:ee:ff", "aaa:bb:cc:dd:ee:ff"):
        with pytest.raises(P.PacketError):
            P.mac(bad)
    with pytest.raises(P.PacketError):
        P.ip4("2001:db8::1")
    with pytest.raises(P.PacketError):
        P.ip6("10.0.0.1")
    with pytest.raises(P.PacketError):
        P.ip4("300.0.0.1")
    with pytest.raises(P.PacketError):
        P.mac(b"\x00" * 5)


def test_packet_error_is_both_value_error_and_pyxdp_error() -> None:
    with pytest.raises(ValueError):
        P.ip4("nope")
    with pytest.raises(PyxdpError):
        P.ip4("nope")


def test_ether_and_vlan_tags() -> None:
    f = P.ether("02:00:00:00:00:02", "02:00:00:00:00:01", P.ETH_P_IP, b"xy")
    assert f.hex() == "020000000002" "020000000001" "0800" "7879"
    q = P.ether(P.BROADCAST_MAC, P.DEFAULT_SRC_MAC, P.ETH_P_IP, b"", vlans=(100,))
    assert q[12:18].hex() == "8100" "0064" "0800"
    qinq = P.ether(P.BROADCAST_MAC, P.DEFAULT_SRC_MAC, P.ETH_P_IPV6, b"", vlans=(200, 100))
    assert qinq[12:22].hex() == "88a8" "00c8" "8100" "0064" "86dd"
    explicit = P.ether(P.BROADCAST_MAC, P.DEFAULT_SRC_MAC, P.ETH_P_ARP, b"",
                       vlans=((0x8100, 0xA00A),))
    assert explicit[12:18].hex() == "8100" "a00a" "0806"
    assert len(P.ether(P.BROADCAST_MAC, P.DEFAULT_SRC_MAC, P.ETH_P_IP, b"", pad=True)) == 60
    with pytest.raises(P.PacketError):
        P.ether(P.BROADCAST_MAC, P.DEFAULT_SRC_MAC, P.ETH_P_IP, b"", vlans=(4096,))


def test_ipv4_fields() -> None:
    ip = P.ipv4("10.0.0.1", "10.0.0.2", 17, b"abcd", ttl=7, tos=0x10, ident=0xBEEF,
                flags_df=False, options=b"\x94\x04\x00\x00")
    assert ip[0] == 0x46 and ip[1] == 0x10
    assert struct.unpack_from("!HHH", ip, 2) == (28, 0xBEEF, 0)
    assert ip[8] == 7 and ip[9] == 17
    assert ref_checksum(ip[:24]) == 0
    assert ip[24:] == b"abcd"
    # Options are padded to 32 bits with End-of-Option-List zeros.
    assert P.ipv4("10.0.0.1", "10.0.0.2", 17, b"", options=b"\x01")[0] == 0x46
    frag = P.ipv4("10.0.0.1", "10.0.0.2", 17, b"", flags_df=False, more_fragments=True,
                  frag_offset=1480)
    assert struct.unpack_from("!H", frag, 6)[0] == 0x2000 | 185
    df = P.ipv4("10.0.0.1", "10.0.0.2", 17, b"")
    assert struct.unpack_from("!H", df, 6)[0] == 0x4000
    bad = P.ipv4("10.0.0.1", "10.0.0.2", 17, b"", checksum=0x1234, total_length=999)
    assert struct.unpack_from("!HH", bad, 2)[0] == 999 and bad[10:12] == b"\x12\x34"
    with pytest.raises(P.PacketError):
        P.ipv4("10.0.0.1", "10.0.0.2", 17, b"", options=bytes(41))
    with pytest.raises(P.PacketError):
        P.ipv4("10.0.0.1", "10.0.0.2", 17, b"", frag_offset=7)
    with pytest.raises(P.PacketError):
        P.ipv4("10.0.0.1", "10.0.0.2", 17, bytes(65536))


def test_ipv6_fields() -> None:
    ip = P.ipv6("2001:db8::1", "2001:db8::2", 17, b"abc", hop_limit=9, traffic_class=0xAB,
                flow_label=0x12345)
    assert struct.unpack_from("!IHBB", ip) == ((6 << 28) | (0xAB << 20) | 0x12345, 3, 17, 9)
    assert len(ip) == 43
    fh = P.ipv6_fragment_header(17, 32, True, 7)
    assert fh.hex() == "1100" "0021" "00000007"


def test_tcp_fields_and_flags() -> None:
    seg = P.tcp(1000, 80, "SA", b"", 5, 6, src_ip="10.0.0.1", dst_ip="10.0.0.2",
                window=1024, options=b"\x02\x04\x05\xb4")
    sport, dport, seq, ack, doff, flags, win = struct.unpack_from("!HHIIBBH", seg)
    assert (sport, dport, seq, ack, doff >> 4, flags, win) == (1000, 80, 5, 6, 6, 0x12, 1024)
    assert P.tcp(1, 2, P.TCP_FIN | P.TCP_ACK, src_ip="::1", dst_ip="::2")[13] == 0x11
    with pytest.raises(P.PacketError):
        P.tcp(1, 2, "SX", src_ip="10.0.0.1", dst_ip="10.0.0.2")


def test_icmp_and_arp() -> None:
    echo = P.icmp_echo(0x1234, 1, b"hi")
    assert echo[:2] == b"\x08\x00" and ref_checksum(echo) == 0
    assert P.icmp_echo(1, 1, reply=True)[0] == 0
    a = P.arp(P.ARPOP_REQUEST, P.DEFAULT_SRC_MAC, "192.0.2.1", bytes(6), "192.0.2.2")
    assert a.hex() == ("0001" "0800" "06" "04" "0001" "020000000001" "c0000201"
                       "000000000000" "c0000202")
    frame = P.arp_packet()
    assert frame[:6] == P.BROADCAST_MAC and frame[12:14] == b"\x08\x06" and len(frame) == 42
    reply = P.arp_packet(op=P.ARPOP_REPLY, target_mac="02:00:00:00:00:09")
    assert reply[:6] == bytes.fromhex("020000000009")


@pytest.mark.parametrize("build", [P.udp_packet, P.tcp_packet, P.icmp_packet])
@pytest.mark.parametrize("ipv6", [False, True])
@pytest.mark.parametrize("vlans", [(), (5,), (6, 7)])
def test_sized_frames(build: object, ipv6: bool, vlans: tuple[int, ...]) -> None:
    assert callable(build)
    for size in (100, 601, 9000):
        frame = build(ipv6=ipv6, vlans=vlans, size=size)
        assert len(frame) == size
        verify_frame(frame)
    with pytest.raises(P.PacketError):
        build(ipv6=ipv6, vlans=vlans, size=40)


def test_padding_lies_outside_ip() -> None:
    f = P.udp_packet(pad=True)
    assert len(f) == 60 and f[42:] == bytes(18)
    assert struct.unpack_from("!H", f, 16)[0] == 28  # IP total length unchanged
    verify_frame(f)


# ---------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------

def test_corpus_names_unique_and_deterministic() -> None:
    c = P.corpus()
    names = [n for n, _ in c]
    assert len(names) == len(set(names))
    assert c == P.corpus(0)
    other = P.corpus(1)
    assert [n for n, _ in other] == names
    changed = {n for (n, a), (_, b) in zip(c, other, strict=True) if a != b}
    assert changed and all(n.startswith("random") for n in changed)


def test_corpus_sizes_and_contents() -> None:
    c = dict(P.corpus())
    for name, frame in c.items():
        if "_size" in name:
            assert len(frame) == int(name.rsplit("size", 1)[1]), name
    assert len(c["eth_only_14"]) == 14
    assert c["min60_ipv4_udp"][:42] == P.udp_packet() and len(c["min60_ipv4_udp"]) == 60
    assert all(len(f) == 60 for n, f in c.items() if n.startswith("min60"))
    assert len(c["ipv4_udp_size600"]) == 600 and len(c["ipv4_udp_size601"]) == 601
    assert len(c["ipv4_udp_size5000"]) == 5000 and len(c["ipv4_udp_size9000"]) == 9000
    assert len(c["trunc_ipv4_hdr_10"]) == 24 and len(c["trunc_ipv4_hdr_20"]) == 34
    assert len(c["trunc_tcp_hdr_10"]) == 44
    assert c["ipv4_udp_qinq"][12:14] == b"\x88\xa8" and c["ipv4_udp_qinq"][16:18] == b"\x81\x00"
    assert c["ipv4_udp_vlan"][12:14] == b"\x81\x00"
    assert c["ipv4_opt_router_alert"][14] == 0x46
    assert c["ipv4_opt_max40"][14] == 0x4F
    assert struct.unpack_from("!H", c["ipv4_frag_first"], 20)[0] == 0x2000
    assert struct.unpack_from("!H", c["ipv4_frag_last"], 20)[0] == 48 // 8
    assert c["ipv6_frag_first"][20] == P.IPPROTO_FRAGMENT
    assert c["arp_request"][12:14] == b"\x08\x06"
    assert sum(1 for n in c if n.startswith("random_")) >= 8
    assert ref_checksum(c["ipv4_bad_csum"][14:34]) != 0


def test_corpus_well_formed_frames_have_good_checksums() -> None:
    well_formed = [n for n, _ in P.corpus()
                   if n.split("_")[0] in ("ipv4", "ipv6", "min60", "vlan", "qinq")
                   and not any(k in n for k in ("bad", "ihl", "version", "totlen", "len_gt",
                                                "doff", "plen", "frag", "hbh", "nocsum",
                                                "min60_arp", "min60_zeros"))]
    assert len(well_formed) > 60
    c = dict(P.corpus())
    for name in well_formed:
        verify_frame(c[name])


# ---------------------------------------------------------------------------
# Traffic and batches
# ---------------------------------------------------------------------------

def test_traffic_deterministic_and_varied() -> None:
    kw = {"flows": 50, "sizes": (64, 600, 1500), "protos": ("udp", "tcp", "icmp")}
    a = list(P.traffic(seed=1, count=400, **kw))  # type: ignore[arg-type]
    assert a == list(P.traffic(seed=1, count=400, **kw))  # type: ignore[arg-type]
    assert a != list(P.traffic(seed=2, count=400, **kw))  # type: ignore[arg-type]
    assert {len(f) for f in a} == {64, 600, 1500}
    assert {f[23] for f in a} == {P.IPPROTO_UDP, P.IPPROTO_TCP, P.IPPROTO_ICMP}
    assert len({f[26:30] for f in a}) == 50  # one source address per flow
    for f in a[:50]:
        verify_frame(f)
    # The endless form yields the same prefix.
    it = P.traffic(seed=1, **kw)  # type: ignore[arg-type]
    assert [next(it) for _ in range(300)] == a[:300]


def test_flow_frame() -> None:
    f = P.flow_frame(0x0102, 100, "udp")
    assert f[26:30] == bytes([198, 18, 1, 2]) and struct.unpack_from("!H", f, 34)[0] == 1024 + 258
    g = P.flow_frame(7, 120, "icmp", ipv6=True, vlan=(1, 2))
    assert len(g) == 120 and g[12:14] == b"\x88\xa8" and g[20:22] == b"\x86\xdd"
    verify_frame(g)
    with pytest.raises(P.PacketError):
        P.flow_frame(0, 64, "sctp")
    with pytest.raises(P.PacketError):
        P.flow_frame(1 << 16, 64, "udp")


def _frames(buf: np.ndarray, lengths: np.ndarray, stride: int) -> list[bytes]:
    return [bytes(buf[i * stride:i * stride + int(n)]) for i, n in enumerate(lengths)]


@pytest.mark.parametrize("ipv6", [False, True])
@pytest.mark.parametrize("vlan", [None, 10, (20, 30)])
def test_batch_equals_traffic(ipv6: bool, vlan: int | tuple[int, int] | None) -> None:
    kw = {"flows": 1000, "sizes": (100, 601, 5000), "protos": ("udp", "tcp", "icmp", "udp"),
          "vlan": vlan, "ipv6": ipv6, "seed": 11}
    buf, lengths = P.batch(500, **kw)  # type: ignore[arg-type]
    stride = 5056
    assert buf.dtype == np.uint8 and buf.shape == (500 * stride,)
    assert lengths.dtype == np.uint32 and lengths.shape == (500,)
    assert _frames(buf, lengths, stride) == list(P.traffic(count=500, **kw))  # type: ignore
    rows = buf.reshape(500, stride)
    for i, n in enumerate(lengths):
        assert not rows[i, int(n):].any()


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 40), flows=st.integers(1, 65536),
       sizes=st.lists(st.integers(90, 2000), min_size=1, max_size=3),
       protos=st.lists(st.sampled_from(["udp", "tcp", "icmp"]), min_size=1, max_size=3),
       ipv6=st.booleans(), seed=st.integers(0, 2**64 - 1))
def test_batch_equals_traffic_property(n: int, flows: int, sizes: list[int], protos: list[str],
                                       ipv6: bool, seed: int) -> None:
    buf, lengths = P.batch(n, flows, sizes, protos, None, ipv6, seed, stride=2048)
    assert _frames(buf, lengths, 2048) == list(
        P.traffic(flows, sizes, protos, None, ipv6, seed, count=n))


def test_batch_arguments() -> None:
    buf, lengths = P.batch(0)
    assert buf.shape == (0,) and lengths.shape == (0,)
    buf, lengths = P.batch(3, sizes=(64,))
    assert buf.shape == (3 * 64,)
    with pytest.raises(P.PacketError):
        P.batch(3, sizes=(100,), stride=64)
    with pytest.raises(P.PacketError):
        P.batch(3, protos=("gre",))
    with pytest.raises(P.PacketError):
        P.batch(3, flows=0)
    with pytest.raises(P.PacketError):
        P.batch(3, sizes=(40,))
    with pytest.raises(P.PacketError):
        P.batch(-1)
