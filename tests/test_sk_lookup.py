"""Sockets and SYN cookies in user space: :mod:`pyxdp.net.inet_hashtables`' matching
rules, :mod:`pyxdp.net.syncookies`' algorithm (SipHash-2-4 reference vectors, the MSS
tables, the two-minute window), a Host's UDP sockets in its namespace, and
``samples/sk.o`` on both engines (tests/kernel/test_sk_lookup_kernel.py holds the same
object to Linux)."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.net.inet_hashtables import AF_INET, AF_INET6, IPPROTO_TCP, IPPROTO_UDP, SockTable
from pyxdp.net.packets import tcp_packet, udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.net.syncookies import (
    TCP_SYNCOOKIE_PERIOD,
    cookie_check,
    cookie_init_sequence,
    siphash,
    tcp_parse_mss_option,
)
from pyxdp.net.test_run import TestRunEnv
from pyxdp.userspace import UserspaceBackend

SK = Path(__file__).resolve().parents[1] / "samples" / "sk.o"
ENGINES = ["interp", pytest.param("jit", marks=pytest.mark.skipif(
    not jit_available(), reason="the JIT needs llvmlite"))]
LO = bytes([127, 0, 0, 1])
LO6 = bytes(15) + b"\x01"


def test_siphash_reference_vectors() -> None:
    key = bytes(range(16))
    assert siphash(b"", key) == 0x726FDB47DD0E0E31
    assert siphash(bytes(range(15)), key) == 0xA129CA6149BE45E5


def _syn(v6: bool, seq: int = 1000) -> tuple[bytes, bytes]:
    pkt = tcp_packet(b"", src_ip="2001:db8::1" if v6 else "10.0.0.1",
                     dst_ip="2001:db8::2" if v6 else "10.0.0.2", sport=40000, dport=80,
                     seq=seq, ipv6=v6)
    ip = pkt[14:54] if v6 else pkt[14:34]
    return ip, pkt[len(ip) + 14:len(ip) + 34]


def _at(t: int) -> Callable[[], int]:
    return lambda: t


def _ack(th: bytes, cookie: int) -> bytes:
    seq = (int.from_bytes(th[4:8], "big") + 1) & 0xFFFF_FFFF
    return th[:4] + seq.to_bytes(4, "big") + ((cookie + 1) & 0xFFFF_FFFF).to_bytes(4, "big") \
        + th[12:]


@pytest.mark.parametrize("v6", [False, True])
def test_cookies_round_trip_for_two_periods(v6: bool) -> None:
    ip, th = _syn(v6)
    t0 = 1000 * TCP_SYNCOOKIE_PERIOD + 5
    cookie, mss = cookie_init_sequence(ip, th, 1460, v6=v6, now=lambda: t0)
    assert mss == (1440 if v6 else 1460)
    ack = _ack(th, cookie)
    for later, ok in ((0, True), (TCP_SYNCOOKIE_PERIOD, True), (2 * TCP_SYNCOOKIE_PERIOD, False)):
        assert cookie_check(ip, ack, v6=v6, now=_at(t0 + later)) == (mss if ok else 0)
    assert cookie_check(ip, _ack(th, cookie ^ 0x100), v6=v6, now=lambda: t0) == 0
    other = ip[:-1] + bytes([ip[-1] ^ 1])  # another destination address
    assert cookie_check(other, ack, v6=v6, now=lambda: t0) == 0
    # the MSS tables: the largest entry not above the peer's MSS
    table = (1220, 1420, 1440, 8940) if v6 else (536, 1300, 1440, 1460)
    for want, got in ((100, table[0]), (1439, table[1]), (9000, table[3])):
        assert cookie_init_sequence(ip, th, want, v6=v6, now=lambda: t0)[1] == got


def test_mss_option_parsing() -> None:
    def th(opts: bytes) -> bytes:
        doff = (20 + len(opts)) // 4
        return bytes(12) + bytes([doff << 4, 2]) + bytes(6) + opts

    assert tcp_parse_mss_option(th(b"\x02\x04\x05\xb4"), 0) == 1460
    assert tcp_parse_mss_option(th(b"\x01\x01\x02\x04\x05\xb4\x00\x00"), 1000) == 1000
    assert tcp_parse_mss_option(th(b"\x00\x00\x02\x04\x05\xb4\x00\x00"), 0) == 0  # EOL first
    assert tcp_parse_mss_option(th(b"\x01\x01\x01\x02"), 0) == 0  # partial option
    assert tcp_parse_mss_option(th(b"\x02\x04\x00\x00"), 0) == 0  # MSS 0 is ignored


def test_socket_table_matching_rules() -> None:
    t = SockTable()
    wild = t.tcp_listen("0.0.0.0", 80)
    exact = t.tcp_listen("10.0.0.2", 81)
    dual = t.tcp_listen("::", 82)
    v6only = t.tcp_listen("::", 83, ipv6only=True)
    dev = t.tcp_listen("10.0.0.2", 84, dev=3)
    est = t.tcp_established("10.0.0.2", 80, "10.0.0.1", 40000)
    a, b = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])

    def tcp(dport: int, sport: int = 1, fam: int = AF_INET, dif: int = 0) -> object:
        s, d = (a, b) if fam == AF_INET else (LO6, LO6)
        return t.lookup(IPPROTO_TCP, fam, s, sport, d, dport, dif)

    assert tcp(80) is wild and tcp(80, 40000) is est and tcp(81) is exact
    assert tcp(82) is dual and tcp(82, fam=AF_INET6) is dual
    assert tcp(83) is None and tcp(83, fam=AF_INET6) is v6only
    assert tcp(84) is None and tcp(84, dif=3) is dev
    with pytest.raises(OSError) as e:
        t.tcp_listen("10.0.0.2", 80)  # 0.0.0.0:80 covers it
    assert e.value.errno == errno.EADDRINUSE
    t.tcp_listen("10.0.0.2", 83)  # the v6only socket leaves IPv4 free
    with pytest.raises(ValueError, match="port must be 1..65535"):
        t.udp_bind("0.0.0.0", 0)
    u = t.udp_bind("0.0.0.0", 53)
    conn = t.udp_bind("10.0.0.2", 54, connect=("10.0.0.1", 9))
    assert t.lookup(IPPROTO_UDP, AF_INET, a, 1, b, 53) is u
    assert t.lookup(IPPROTO_UDP, AF_INET, a, 9, b, 54) is conn
    assert t.lookup(IPPROTO_UDP, AF_INET, a, 8, b, 54) is None  # not its peer
    t.close(wild)
    assert tcp(80) is None and tcp(80, 40000) is est
    with pytest.raises(ValueError, match="not in this table"):
        t.close(wild)


def test_host_udp_sockets_are_the_namespaces() -> None:
    from pyxdp.net.netdevice import Host

    with Host(engine="interp") as h:
        h.stack.udp_socket(5353)
        sk = h.env.fib.sockets.lookup(IPPROTO_UDP, AF_INET, LO, 1, LO, 5353)
        assert sk is not None and sk.family == AF_INET6 and sk.src == bytes(16)


@pytest.mark.parametrize("engine", ENGINES)
def test_sample_looks_up_and_makes_cookies(engine: str) -> None:
    env = TestRunEnv()
    t = env.fib.sockets
    lst = t.tcp_listen("127.0.0.1", 8080, mark=7, priority=3)
    t.udp_bind("::1", 53)
    peer = t.peers[5] = SockTable()
    peer.tcp_listen("127.0.0.1", 9090)
    with Collection.load(SK, UserspaceBackend(env=env, engine=engine)) as c:
        sk, sc = c.programs["xdp_sk"], c.programs["xdp_syncookie"]

        def lookup(pkt: bytes, **cfg: int) -> dict:  # type: ignore[type-arg]
            c.maps["cfg"][0] = {"op": 0, "tuple_sz": 0, "netns_id": 0xFFFF_FFFF, "flags": 0,
                                **cfg}
            r = sk.test_run(pkt)
            assert r.fault is None, r.fault
            out: dict = c.maps["out"][0]  # type: ignore[type-arg]
            assert r.retval == (2 if out["found"] else 1)
            return out

        syn = tcp_packet(b"", src_ip="127.0.0.1", dst_ip="127.0.0.1", sport=4000, dport=8080,
                         options=b"\x02\x04\x05\xb4")
        got = lookup(syn)
        assert (got["family"], got["type"], got["protocol"], got["state"]) == (2, 1, 6, 10)
        assert (got["src_port"], got["dst_port"], got["mark"], got["priority"]) == \
            (8080, 0, 7, 3)
        assert got["src_ip4"] == int.from_bytes(LO, "little") and got["src_ip4_b0"] == 127
        assert got["rx_queue_mapping"] == -1
        assert lookup(syn, flags=1)["found"] == 0 and lookup(syn, tuple_sz=20)["found"] == 0
        assert lookup(syn, netns_id=5)["found"] == 0  # the peer has no 8080
        other = tcp_packet(b"", src_ip="127.0.0.1", dst_ip="127.0.0.1", sport=4000, dport=9090)
        assert lookup(other, netns_id=5)["src_port"] == 9090
        assert lookup(other, netns_id=6)["found"] == 0  # no such namespace id
        udp6 = udp_packet(b"x", src_ip="::1", dst_ip="::1", sport=4000, dport=53)
        got = lookup(udp6, op=1)
        assert got["family"] == 10 and got["src_ip6"] == [0, 0, 0, 1 << 24]
        assert got["src_ip4"] == int.from_bytes(bytes([127, 0, 0, 6]), "little")
        assert lookup(udp6, op=2)["found"] == 0  # skc: TCP only
        t.tcp_syncookies = 2
        assert sc.test_run(syn).retval == 1
        o = c.maps["cookies"][0]
        assert o["raw_gen"] >> 32 == o["gen"] >> 32 == 1460 and o["raw_check"] == 0
        assert o["raw_check_bad"] == -errno.EACCES and o["raw_gen_badlen"] == -errno.EINVAL
        assert (o["check"], o["check_syn"], o["check_short_iph"]) == \
            (0, -errno.ENOENT, -errno.EINVAL)
        assert lst.last_overflow is not None  # the generated cookie counts as an overflow


@pytest.mark.parametrize("engine", ENGINES)
def test_forged_socket_pointers_abort_the_run(engine: str) -> None:
    """Programs Linux would refuse (run with verify=False): a socket helper given
    something that is no socket, or a store into a socket, stops the run with a report."""
    from pyxdp.testing.programs import asm_collection

    lookup = ("r2 = 0\n*(u64 *)(r10 -16) = r2\n*(u32 *)(r10 -8) = r2\nr2 = r10\nr2 += -16\n"
              "r3 = 12\nr4 = -1\nr5 = 0\ncall 84\n")
    env = TestRunEnv()
    env.fib.sockets.tcp_listen("0.0.0.0", 1)  # the zero tuple's port 0 is no socket's
    cases = {
        "r1 = r10\ncall 86\nr0 = 2\nexit": "is not a socket pointer",
        lookup + "r1 = 42\ncall 86\nr0 = 2\nexit": "is not a socket pointer",
    }
    for text, msg in cases.items():
        with Collection(asm_collection(text), UserspaceBackend(env=env, engine=engine),
                        verify=False) as c:
            r = c.programs["t"].test_run(bytes(64))
            assert r.retval == 0 and r.fault is not None and msg in r.fault, r.fault
    # a store into a socket found (the tuple: 0.0.0.0:0 -> 0.0.0.0:7): its memory is
    # read-only
    sock_store = asm_collection("""r2 = 0
*(u64 *)(r10 -16) = r2
*(u32 *)(r10 -8) = r2
r2 = 0x0700
*(u16 *)(r10 -6) = r2
r2 = r10
r2 += -16
r3 = 12
r4 = -1
r5 = 0
call 85
if r0 == 0 goto +4
r6 = r0
*(u32 *)(r0 +16) = r0
r1 = r6
call 86
r0 = 2
exit""")
    udp = env.fib.sockets.udp_bind("0.0.0.0", 7)
    with Collection(sock_store, UserspaceBackend(env=env, engine=engine), verify=False) as c:
        r = c.programs["t"].test_run(bytes(64))
        assert r.retval == 0 and r.fault is not None, r.fault
        assert "write of 4 bytes" in r.fault and f"{udp.addr + 16:#x}" in r.fault, r.fault
