"""Classic pcap and pcapng reading and writing (pyxdp.net.pcap)."""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyxdp.errors import NotSupportedError, PyxdpError
from pyxdp.net import packets as P
from pyxdp.net import pcap
from pyxdp.net.pcap import CapturedPacket, CaptureError, PcapngWriter, PcapWriter

FRAMES = [P.udp_packet(b"a"), P.tcp_packet(), P.icmp_packet(ipv6=True), P.arp_packet(),
          P.udp_packet(size=9000)]
TS = 1_700_000_000_123_456_789


# ---------------------------------------------------------------------------
# Hand-built files: every field spelled out, in either byte order
# ---------------------------------------------------------------------------

def pcap_file(e: str, magic: int, records: list[tuple[int, int, bytes, int]],
              linktype: int = 1, snaplen: int = 65535) -> bytes:
    out = struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)
    for sec, frac, data, orig in records:
        out += struct.pack(e + "IIII", sec, frac, len(data), orig) + data
    return out


def opt(e: str, code: int, value: bytes) -> bytes:
    return struct.pack(e + "HH", code, len(value)) + value + bytes(-len(value) % 4)


def block(e: str, btype: int, body: bytes) -> bytes:
    return struct.pack(e + "II", btype, len(body) + 12) + body + struct.pack(e + "I",
                                                                             len(body) + 12)


def shb(e: str, options: bytes = b"") -> bytes:
    return block(e, 0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1) + options)


def idb(e: str, options: bytes = b"", linktype: int = 1, snaplen: int = 0) -> bytes:
    return block(e, 1, struct.pack(e + "HHI", linktype, 0, snaplen) + options)


def epb(e: str, ifid: int, ts: int, data: bytes, orig: int | None = None,
        options: bytes = b"") -> bytes:
    body = struct.pack(e + "IIIII", ifid, ts >> 32, ts & 0xFFFFFFFF, len(data),
                       len(data) if orig is None else orig)
    return block(e, 6, body + data + bytes(-len(data) % 4) + options)


def spb(e: str, data: bytes, orig: int | None = None) -> bytes:
    body = struct.pack(e + "I", len(data) if orig is None else orig)
    return block(e, 3, body + data + bytes(-len(data) % 4))


@pytest.mark.parametrize("e", ["<", ">"])
@pytest.mark.parametrize(("magic", "scale"), [(0xA1B2C3D4, 1000), (0xA1B23C4D, 1)])
def test_read_hand_built_pcap(e: str, magic: int, scale: int) -> None:
    raw = pcap_file(e, magic, [(1_700_000_000, 123456, FRAMES[0], len(FRAMES[0])),
                               (1_700_000_001, 7, FRAMES[1][:20], len(FRAMES[1]))])
    got = list(pcap.read_pcap(raw))
    assert got == list(pcap.read_capture(raw))
    assert got[0] == CapturedPacket(FRAMES[0], 1_700_000_000 * 10**9 + 123456 * scale, 0,
                                    len(FRAMES[0]))
    assert got[1].data == FRAMES[1][:20] and got[1].orig_len == len(FRAMES[1])
    assert got[1].truncated and not got[0].truncated
    assert got[1].ts_ns == 1_700_000_001 * 10**9 + 7 * scale


@pytest.mark.parametrize("e", ["<", ">"])
def test_read_hand_built_pcapng(e: str) -> None:
    q = e + "Q"
    verdict = opt(e, 7, b"\x02" + struct.pack(q, 2))
    tc_verdict = opt(e, 7, b"\x01" + struct.pack(q, 2))  # TC verdicts are not XDP verdicts
    raw = (shb(e, opt(e, 4, b"handmade") + opt(e, 0, b""))
           + idb(e, opt(e, 2, b"eth0") + opt(e, 9, b"\x09") + opt(e, 0, b""))
           # if_tsresol 0x83: units of 2**-3 s; if_tsoffset: +100 s.
           + idb(e, opt(e, 2, b"eth1") + opt(e, 9, b"\x83") + opt(e, 14, struct.pack(e + "q", 100)))
           + idb(e)  # defaults: microseconds, no name
           + epb(e, 0, TS, FRAMES[0], options=opt(e, 1, b"first") + opt(e, 1, b"again")
                 + opt(e, 2, struct.pack(e + "I", 1)) + verdict + opt(e, 0, b""))
           + block(e, 0x0BAD, b"unknown block body!!")
           + block(e, 5, struct.pack(e + "III", 0, 0, 0))  # an Interface Statistics Block
           + epb(e, 1, 12, FRAMES[1], options=tc_verdict)
           + epb(e, 2, 5_000_001, FRAMES[2][:30], orig=len(FRAMES[2]))
           + spb(e, FRAMES[3])
           + block(e, 4, struct.pack(e + "HH", 0, 0)))  # a Name Resolution Block
    got = list(pcap.read_pcapng(raw))
    assert got == list(pcap.read_capture(raw))
    assert len(got) == 4
    a, b, c, d = got
    assert a == CapturedPacket(FRAMES[0], TS, 0, len(FRAMES[0]), "eth0", 1, 2,
                               ("first", "again"))
    assert b.interface == 1 and b.interface_name == "eth1" and b.verdict is None
    assert b.ts_ns == 12 * 125_000_000 + 100 * 10**9
    assert c.interface == 2 and c.interface_name is None and c.ts_ns == 5_000_001_000
    assert c.truncated and c.orig_len == len(FRAMES[2])
    assert d == CapturedPacket(FRAMES[3], 0, 0, len(FRAMES[3]), "eth0")


def test_read_multiple_sections_with_both_byte_orders() -> None:
    raw = (shb("<") + idb("<", opt("<", 2, b"le")) + epb("<", 0, 1000, FRAMES[0])
           + shb(">") + idb(">", opt(">", 2, b"be")) + idb(">")
           + epb(">", 1, 2000, FRAMES[1]) + epb(">", 0, 3000, FRAMES[2]))
    got = list(pcap.read_pcapng(raw))
    assert [(p.interface, p.interface_name, p.ts_ns, p.data) for p in got] == [
        (0, "le", 1_000_000, FRAMES[0]), (1, None, 2_000_000, FRAMES[1]),
        (0, "be", 3_000_000, FRAMES[2])]


def test_obsolete_packet_block_and_spb_snaplen() -> None:
    e = "<"
    pb = block(e, 2, struct.pack(e + "HHIIII", 0, 0, 0, 42, 10, 60) + FRAMES[0][:10]
               + bytes(2) + opt(e, 1, b"old"))
    raw = shb(e) + idb(e, snaplen=20) + pb + spb(e, FRAMES[4][:20], orig=9000)
    old, simple = pcap.read_pcapng(raw)
    assert old == CapturedPacket(FRAMES[0][:10], 42_000, 0, 60, None, None, None, ("old",))
    assert simple.data == FRAMES[4][:20] and simple.orig_len == 9000


# ---------------------------------------------------------------------------
# Writers and round trips
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("big_endian", [False, True])
def test_pcapng_round_trip(tmp_path: Path, big_endian: bool) -> None:
    path = tmp_path / "x.pcapng"
    with PcapngWriter(path, big_endian=big_endian, comment="run 1") as w:
        assert w.add_interface("veth0") == 0
        assert w.add_interface("veth1", snaplen=100) == 1
        for i, f in enumerate(FRAMES):
            w.write(f, TS + i, interface=i % 2, verdict=i % 5, comment=f"pkt {i}",
                    flags=pcap.EPB_FLAG_INBOUND)
        w.write(FRAMES[0], 0)
    got = list(pcap.read_capture(path))
    assert len(got) == len(FRAMES) + 1
    for i, (p, f) in enumerate(zip(got, FRAMES, strict=False)):
        snap = f[:100] if i % 2 else f
        assert p == CapturedPacket(snap, TS + i, i % 2, len(f), f"veth{i % 2}",
                                   pcap.EPB_FLAG_INBOUND, i % 5, (f"pkt {i}",))
    assert got[-1] == CapturedPacket(FRAMES[0], 0, 0, len(FRAMES[0]), "veth0")


def test_pcapng_layout() -> None:
    buf = io.BytesIO()
    w = PcapngWriter(buf)
    w.write(b"\x01\x02\x03", 0x0102030405060708, verdict=2)  # adds interface "pyxdp0"
    w.close()
    raw = buf.getvalue()
    assert not buf.closed
    # SHB: type, length, byte-order magic, version 1.0, section length -1, shb_userappl.
    assert raw[:8] == b"\x0a\x0d\x0d\x0a" + struct.pack("<I", 44)
    assert raw[8:24] == struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)
    assert raw[24:36] == struct.pack("<HH", 4, 5) + b"pyxdp\0\0\0"
    assert raw[36:44] == bytes(4) + struct.pack("<I", 44)
    # IDB: LINKTYPE_ETHERNET, snaplen 0, if_name, if_tsresol 9.
    i = raw[44:]
    assert i[:20] == struct.pack("<IIHHI", 1, 44, 1, 0, 0) + struct.pack("<HH", 2, 6)
    assert i[20:28] == b"pyxdp0\0\0"
    assert i[28:36] == struct.pack("<HH", 9, 1) + b"\x09\0\0\0"
    assert i[36:44] == bytes(4) + struct.pack("<I", 44)
    # EPB: interface 0, timestamp high/low, lengths, data padded, then epb_verdict:
    # code 7, length 9, type 2 (Linux_eBPF_XDP), the 64-bit value, 3 padding bytes.
    b = raw[88:]
    assert b[:28] == struct.pack("<IIIIIII", 6, 56, 0, 0x01020304, 0x05060708, 3, 3)
    assert b[28:32] == b"\x01\x02\x03\0"
    assert b[32:48] == (struct.pack("<HH", 7, 9) + b"\x02" + struct.pack("<Q", 2) + bytes(3))
    assert b[48:56] == bytes(4) + struct.pack("<I", 56)
    assert len(raw) == 88 + 56


def test_pcapng_big_endian_verdict_matches_spec_example() -> None:
    # The pcapng draft's example: '02 00 00 00 00 00 00 00 02' is Linux_eBPF_XDP
    # with XDP_PASS, i.e. the value in the (here big-endian) section byte order.
    buf = io.BytesIO()
    with PcapngWriter(buf, big_endian=True) as w:
        w.write(b"x", 1, verdict=2)
    assert bytes.fromhex("00070009" "020000000000000002" "000000") in buf.getvalue()


@pytest.mark.parametrize("big_endian", [False, True])
@pytest.mark.parametrize("nanoseconds", [False, True])
def test_pcap_round_trip(tmp_path: Path, big_endian: bool, nanoseconds: bool) -> None:
    path = tmp_path / "x.pcap"
    with PcapWriter(path, nanoseconds=nanoseconds, snaplen=1000, big_endian=big_endian) as w:
        for i, f in enumerate(FRAMES):
            w.write(f, TS + i)
    got = list(pcap.read_capture(str(path)))
    for i, (p, f) in enumerate(zip(got, FRAMES, strict=True)):
        ts = TS + i if nanoseconds else (TS + i) // 1000 * 1000
        assert p == CapturedPacket(f[:1000], ts, 0, len(f))
    assert got[-1].truncated


def test_read_from_file_object_and_path() -> None:
    buf = io.BytesIO()
    with PcapngWriter(buf) as w:
        w.write(FRAMES[0], 5)
    buf.seek(0)
    assert [p.data for p in pcap.read_capture(buf)] == [FRAMES[0]]
    assert not buf.closed
    assert [p.data for p in pcap.read_capture(bytearray(buf.getvalue()))] == [FRAMES[0]]
    assert [p.data for p in pcap.read_capture(memoryview(buf.getvalue()))] == [FRAMES[0]]


def test_corpus_round_trips(tmp_path: Path) -> None:
    corpus = P.corpus()
    path = tmp_path / "corpus.pcapng"
    with PcapngWriter(path) as w:
        for i, (name, frame) in enumerate(corpus):
            w.write(frame, i, comment=name)
    got = list(pcap.read_pcapng(path))
    assert [(p.comments[0], p.data) for p in got] == corpus


def test_writer_misuse() -> None:
    w = PcapngWriter(io.BytesIO())
    with pytest.raises(CaptureError):
        w.write(b"x", 0, interface=1)
    with pytest.raises(CaptureError):
        w.write(b"x", -1)
    with pytest.raises(CaptureError):
        w.write(b"x", 0, verdict=1 << 64)
    with pytest.raises(CaptureError):
        w.write(b"x", 0, comment="x" * 70000)
    with pytest.raises(CaptureError):
        w.write(b"x", 0, comment="\ud800")
    w.close()
    with pytest.raises(CaptureError):
        w.write(b"x", 0)
    with pytest.raises(CaptureError):
        PcapWriter(io.BytesIO()).write(b"x", -5)


# ---------------------------------------------------------------------------
# Malformed input
# ---------------------------------------------------------------------------

GOOD_PCAPNG = (shb("<", opt("<", 4, b"t")) + idb("<", opt("<", 9, b"\x09"))
               + epb("<", 0, TS, FRAMES[0], options=opt("<", 7, b"\x02" + bytes(8))))
GOOD_PCAP = pcap_file("<", 0xA1B23C4D, [(1, 2, FRAMES[0], len(FRAMES[0]))])


@pytest.mark.parametrize(("raw", "message"), [
    (b"", "too short"),
    (b"\x00\x01", "too short"),
    (b"GIF89a..........................", "not a pcap"),
    (GOOD_PCAP[:10], "truncated"),
    (GOOD_PCAP[:-1], "truncated"),
    (GOOD_PCAP[:24 + 7], "truncated"),
    (GOOD_PCAPNG[:-1], "truncated"),
    (GOOD_PCAPNG[:6], "truncated"),
    (GOOD_PCAPNG + b"\x01\x00", "truncated"),
    (shb("<")[:-4] + struct.pack("<I", 99), "trailer"),
    (shb("<")[:4] + struct.pack("<I", 26) + shb("<")[8:], "multiple of 4"),
    (shb("<")[:8] + b"\x01\x02\x03\x04" + shb("<")[12:], "byte-order magic"),
    (shb("<") + struct.pack("<II", 1, 8), "at least 12"),
    (shb("<") + struct.pack("<II", 1, 14) + bytes(6), "multiple of 4"),
    (shb("<") + idb("<") + epb("<", 3, 0, b"x"), "interface 3"),
    (shb("<") + epb("<", 0, 0, b"x"), "interface 0"),
    (shb("<") + idb("<", struct.pack("<HH", 2, 200)), "runs past"),
    (shb("<") + idb("<") + block("<", 6, struct.pack("<IIIII", 0, 0, 0, 500, 500)),
     "claims 500"),
    (shb("<") + idb("<") + block("<", 6, bytes(8)), "too short"),
    (shb("<") + block("<", 1, bytes(4)), "too short"),
    (block("<", 0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 2, 0, -1)), "version 2.0"),
    (pcap_file("<", 0xA1B2C3D4, [])[:4] + struct.pack("<HH", 3, 0) + bytes(16), "version 3"),
    (struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 100, 1)
     + struct.pack("<IIII", 0, 0, 1 << 30, 1 << 30), "snapshot length"),
])
def test_malformed_input_raises_capture_error(raw: bytes, message: str) -> None:
    with pytest.raises(CaptureError, match=message):
        list(pcap.read_capture(raw))


def test_read_pcapng_rejects_pcap_and_vice_versa() -> None:
    with pytest.raises(CaptureError, match="not a pcapng"):
        list(pcap.read_pcapng(GOOD_PCAP))
    with pytest.raises(CaptureError, match="not a pcap"):
        list(pcap.read_pcap(GOOD_PCAPNG))


def test_unsupported_link_types() -> None:
    with pytest.raises(pcap.UnsupportedLinkType, match=r"113 \(LINUX_SLL\)") as info:
        list(pcap.read_capture(pcap_file("<", 0xA1B2C3D4, [], linktype=113)))
    assert info.value.linktype == 113
    assert isinstance(info.value, NotSupportedError) and isinstance(info.value, CaptureError)
    raw = shb(">") + idb(">", linktype=101) + epb(">", 0, 0, b"x")
    with pytest.raises(pcap.UnsupportedLinkType, match="interface 0 has link type 101"):
        list(pcap.read_capture(raw))
    # An interface nobody captured on does not matter.
    ok = shb("<") + idb("<") + idb("<", linktype=101) + epb("<", 0, 0, b"x")
    assert [p.data for p in pcap.read_capture(ok)] == [b"x"]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="cannot open"):
        list(pcap.read_capture(tmp_path / "missing" / "x.pcap"))
    with pytest.raises(CaptureError, match="cannot create"):
        PcapngWriter(tmp_path / "missing" / "x.pcapng")
    assert issubclass(CaptureError, PyxdpError)


def _only_capture_errors(raw: bytes) -> None:
    for reader in (pcap.read_capture, pcap.read_pcap, pcap.read_pcapng):
        try:
            for p in reader(raw):
                assert isinstance(p.data, bytes)
        except CaptureError:
            pass


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_fuzz_random_bytes(raw: bytes) -> None:
    _only_capture_errors(raw)
    _only_capture_errors(b"\x0a\x0d\x0d\x0a" + raw)
    _only_capture_errors(struct.pack("<I", 0xA1B2C3D4) + raw)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from([GOOD_PCAPNG, GOOD_PCAP,
                             shb(">") + idb(">", opt(">", 9, b"\x89")) + spb(">", b"abc")]),
       edits=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=6),
       cut=st.integers(0, 400))
def test_fuzz_mutated_files(base: bytes, edits: list[tuple[int, int]], cut: int) -> None:
    raw = bytearray(base)
    for pos, value in edits:
        raw[pos % len(raw)] = value
    _only_capture_errors(bytes(raw))
    _only_capture_errors(bytes(raw[:cut]))


# ---------------------------------------------------------------------------
# Interoperability (tshark is optional: not a CI dependency)
# ---------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
@pytest.mark.parametrize("big_endian", [False, True])
def test_tshark_reads_verdicts(tmp_path: Path, big_endian: bool) -> None:
    path = tmp_path / "v.pcapng"
    names = ["XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX", "XDP_REDIRECT"]
    with PcapngWriter(path, big_endian=big_endian) as w:
        w.add_interface("veth0")
        for v in range(5):
            w.write(P.udp_packet(b"v"), TS + v, verdict=v, comment=f"c{v}")
    out = subprocess.run(["tshark", "-r", str(path), "-V"], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    for v, name in enumerate(names):
        assert f"eBPF XDP: {name} ({v})" in out
    assert "c4" in out and "veth0" in out
