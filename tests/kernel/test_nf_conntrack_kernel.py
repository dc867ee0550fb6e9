"""The conntrack kfuncs against Linux: ``samples/ct.o`` under BPF_PROG_TEST_RUN in a
network namespace of this module's (``A``, with a second one ``B`` that ``A`` knows as
netns id 5) and on pyxdp's interpreter and JIT over a namespace's
:class:`~pyxdp.net.nf_conntrack.NfConntrack` (with ``B``'s table as peer 5).

Each scenario is a list of (cfg, packet) steps; every step's verdict, output frame and
``out`` record (return codes, ``opts`` after the call, the entry's fields as the program
reads them; timeouts left within a second) must agree, and so must the tables at the
end: Linux's ``/proc/net/nf_conntrack`` of both namespaces against
:meth:`NfConntrack.proc` (the seconds-left column aside)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyxdp.collection import Collection
from pyxdp.kernel.netlink import netns
from pyxdp.net.nf_conntrack import CtTuple, NfConntrack
from pyxdp.net.packets import icmp_packet, tcp_packet, udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.net.test_run import TestRunEnv
from pyxdp.testing.netns_pair import peered_namespaces
from pyxdp.userspace import UserspaceBackend

pytestmark = pytest.mark.kernel

CT = Path(__file__).resolve().parents[2] / "samples" / "ct.o"
PEER_ID = 5
HZ = 250
ENGINES = ["interp", "jit"]


@pytest.fixture
def namespaces() -> Iterator[tuple[str, str]]:
    """Two fresh namespaces (empty conntrack tables); B is netns id 5 in A."""
    with peered_namespaces("ct", PEER_ID) as pair:
        yield pair


def packet_cfg(pkt: bytes) -> dict[str, int]:
    """cfg's sizes and protocol for a TCP or UDP packet (what xdp_ct leaves to its caller)."""
    v6 = pkt[12:14] == b"\x86\xdd"
    return {"netns_id": -1, "tuple_sz": 36 if v6 else 12, "opts_sz": 16,
            "l4proto": pkt[20] if v6 else pkt[23]}


class Pair:
    """The same object on Linux (runs in namespace A) and on one pyxdp engine, with
    fresh tables on both."""

    def __init__(self, loaded: tuple[Collection, Collection, TestRunEnv],
                 ns: tuple[str, str]) -> None:
        self.k, self.u, self.env = loaded
        self.ns = ns
        self.env.fib.conntrack = NfConntrack()
        self.peer = NfConntrack()
        self.env.fib.conntrack.peers[PEER_ID] = self.peer
        for c in (self.k, self.u):
            for i in range(5):
                c.maps["stats"][i] = 0
            out = c.maps["out"].handle
            out.update(bytes(4), bytes(out.value_size))

    def step(self, pkt: bytes, prog: str = "xdp_ct", **cfg: Any) -> dict[str, Any]:
        full = {**packet_cfg(pkt), **cfg}
        self.k.maps["cfg"][0] = full
        self.u.maps["cfg"][0] = full
        with netns(self.ns[0]):
            k = self.k.programs[prog].test_run(pkt)
        u = self.u.programs[prog].test_run(pkt)
        assert u.fault is None, u.fault
        assert (u.retval, u.data_out) == (k.retval, k.data_out), cfg
        ko, uo = self.k.maps["out"][0], self.u.maps["out"][0]
        for o in (ko, uo):  # timeouts left of confirmed entries: compared within 1 s
            for v in ("before", "after"):
                if o[v]["status"] & 8:
                    o[v]["timeout"] = round(o[v]["timeout"] / HZ)
        for v in ("before", "after"):
            if ko[v]["status"] & 8 and abs(ko[v]["timeout"] - uo[v]["timeout"]) <= 1:
                uo[v]["timeout"] = ko[v]["timeout"]
        assert uo == ko, cfg
        return ko

    def tables(self) -> None:
        """Both namespaces' tables, Linux's /proc/net/nf_conntrack against pyxdp's."""
        for name, table in zip(self.ns, (self.env.fib.conntrack, self.peer), strict=True):
            with netns(name):
                with open("/proc/thread-self/net/nf_conntrack") as f:
                    linux = f.read()
            assert _norm(table.proc()) == _norm(linux), name


def _norm(text: str) -> list[str]:
    """Lines without the seconds-left column, sorted."""
    out = []
    for line in text.splitlines():
        f = line.split()
        out.append(" ".join(f[:4] + f[5:]))
    return sorted(out)


@pytest.fixture(scope="module")
def loaded() -> Iterator[dict[str, tuple[Collection, Collection, TestRunEnv]]]:
    """ct.o loaded once into Linux and into each engine (verifying and JIT compiling
    take seconds), each engine with an environment of its own."""
    with Collection.load(CT, "kernel") as k:
        got: dict[str, tuple[Collection, Collection, TestRunEnv]] = {}
        try:
            for engine in ENGINES:
                if engine == "jit" and not jit_available():
                    continue
                env = TestRunEnv()
                got[engine] = (k, Collection.load(CT, UserspaceBackend(env=env,
                                                                     engine=engine)), env)
            yield got
        finally:
            for _, u, _ in got.values():
                u.close()


@pytest.fixture(params=ENGINES)
def pair(request: pytest.FixtureRequest,
         loaded: dict[str, tuple[Collection, Collection, TestRunEnv]],
         namespaces: tuple[str, str]) -> Pair:
    if request.param not in loaded:
        pytest.skip("the JIT needs llvmlite")
    return Pair(loaded[request.param], namespaces)


UDP4 = udp_packet(b"ct", src_ip="10.1.0.1", dst_ip="10.2.0.2", sport=1000, dport=2000)
TCP6 = tcp_packet(b"ct", src_ip="2001:db8::1", dst_ip="2001:db8::2", sport=3000, dport=80)
INSERT, LOOKUP = 1, 0


def test_lookup_insert_both_directions_and_namespaces(pair: Pair) -> None:
    for pkt in (UDP4, TCP6):
        assert pair.step(pkt, op=LOOKUP)["error"] == -2  # -ENOENT
        out = pair.step(pkt, op=INSERT)
        assert out["found"] == 1 and out["after"]["status"] == 8
        assert pair.step(pkt, op=INSERT)["found"] == 0  # the tuple is taken
        assert pair.step(pkt, op=LOOKUP)["dir"] == 0
        assert pair.step(pkt, op=LOOKUP, reverse=1)["dir"] == 1
        # The peer namespace (netns id 5): empty, then tracked there too.
        assert pair.step(pkt, op=LOOKUP, netns_id=PEER_ID)["error"] == -2
        assert pair.step(pkt, op=INSERT, netns_id=PEER_ID, reverse=1)["found"] == 1
        assert pair.step(pkt, op=LOOKUP, netns_id=PEER_ID)["dir"] == 1
        assert pair.step(pkt, op=LOOKUP, netns_id=7)["error"] == -64  # -ENONET
        assert pair.step(pkt, op=INSERT, netns_id=7)["error"] == -64
    pair.tables()


def test_opts_and_tuple_errors(pair: Pair) -> None:
    pair.step(UDP4, op=INSERT)
    for op in (LOOKUP, INSERT):
        for cfg in ({"opts_sz": 12}, {"opts_sz": 12, "zone_id": 1}, {"opts_sz": 8},
                    {"opts_sz": 20}, {"opts_sz": 24}, {"reserved": 1},
                    {"reserved": 1, "opts_sz": 12}, {"netns_id": -2}, {"l4proto": 1},
                    {"l4proto": 1, "netns_id": -2}, {"tuple_sz": 20}, {"tuple_sz": 36},
                    {"tuple_sz": 20, "l4proto": 132}, {"netns_id": -2, "tuple_sz": 20},
                    {"opts_sz": 0}, {"tuple_sz": 0}, {"opts_sz": 4}):
            pair.step(UDP4, op=op, **cfg)
        pair.step(TCP6, op=op, tuple_sz=12)
    pair.tables()


def test_zones(pair: Pair) -> None:
    pair.step(UDP4, op=INSERT, zone_id=7)
    pair.step(TCP6, op=INSERT, zone_id=9, zone_dir=1)
    for pkt in (UDP4, TCP6):
        for zone_id in (0, 7, 9):
            for zone_dir in (0, 1, 2, 3):
                for reverse in (0, 1):
                    pair.step(pkt, op=LOOKUP, zone_id=zone_id, zone_dir=zone_dir,
                              reverse=reverse)
    pair.step(UDP4, op=INSERT, zone_id=7)  # taken in zone 7
    pair.step(UDP4, op=INSERT, zone_id=8)  # not in zone 8
    pair.step(UDP4, op=INSERT, opts_sz=12)  # nor in the default zone
    pair.tables()


def test_timeouts_and_status(pair: Pair) -> None:
    out = pair.step(UDP4, op=INSERT, timeout_ms=5003, status=6)  # SEEN_REPLY|ASSURED
    assert out["before"]["timeout"] == 1251 and out["after"]["status"] == 14
    pair.step(TCP6, op=INSERT, timeout_ms=0xFFFF_FFFF, status=8)  # CONFIRMED: -EBUSY
    for status in (0x1_0000 | 2, 1 << 10, 4, 0x200, 1, 0x30):
        pair.step(UDP4, op=LOOKUP, status=status)
    pair.step(UDP4, op=LOOKUP, timeout_ms=60_000)  # FIXED_TIMEOUT now set: -EPERM
    pair.step(TCP6, op=LOOKUP, timeout_ms=90_000, status=2)
    pair.step(TCP6, op=LOOKUP, status=4)
    pair.step(TCP6, op=LOOKUP, status=2)  # ASSURED cannot be cleared: -EBUSY
    pair.tables()


def _addr(ip: str) -> list[int]:
    raw = CtTuple.of(ip, 0, ip, 0).src
    return [int.from_bytes(raw[i:i + 4], "little") for i in range(0, 16, 4)]


def test_nat_info(pair: Pair) -> None:
    snat = {"snat": 1, "snat_addr": _addr("192.0.2.1"), "snat_port": 4000}
    dnat = {"dnat": 1, "dnat_addr": _addr("198.51.100.9"), "dnat_port": 8080}
    out = pair.step(UDP4, op=INSERT, **snat, **dnat)
    assert (out["snat_ret"], out["dnat_ret"], out["after"]["reply_sport"]) == (0, 0, 8080)
    reply = udp_packet(b"r", src_ip="198.51.100.9", dst_ip="192.0.2.1", sport=8080,
                       dport=4000)
    assert pair.step(reply, op=LOOKUP)["dir"] == 1
    # Source NAT to the address the flow already has, no port: the tuple stays.
    pair.step(udp_packet(b"x", src_ip="192.0.2.1", dst_ip="10.2.0.2", sport=5, dport=6),
              op=INSERT, snat=1, snat_addr=_addr("192.0.2.1"), snat_port=0)
    # A second flow mapped onto a taken reply tuple (same port) and without a port.
    other = udp_packet(b"y", src_ip="10.1.0.3", dst_ip="10.2.0.2", sport=1000, dport=2000)
    pair.step(other, op=INSERT, **snat)
    # The same mapping for a fourth flow: its reply tuple is taken, the insertion fails.
    clash = udp_packet(b"c", src_ip="10.1.0.5", dst_ip="10.2.0.2", sport=1000, dport=2000)
    assert pair.step(clash, op=INSERT, **snat)["found"] == 0
    # The third flow's source to elsewhere, no port: find_appropriate_src reuses its
    # mapping (192.0.2.1:4000).
    again = udp_packet(b"s", src_ip="10.1.0.3", dst_ip="10.2.0.9", sport=1000, dport=2000)
    out = pair.step(again, op=INSERT, snat=1, snat_addr=_addr("192.0.2.1"), snat_port=0)
    assert out["after"]["reply_dport"] == 4000
    pair.step(udp_packet(b"z", src_ip="10.1.0.4", dst_ip="10.2.0.3", sport=1000, dport=2000),
              op=INSERT, dnat=1, dnat_addr=_addr("198.51.100.9"), dnat_port=0)
    v6 = {"snat": 1, "snat_addr": _addr("2001:db8::99"), "snat_port": 0,
          "dnat": 1, "dnat_addr": _addr("2001:db8::77"), "dnat_port": 443}
    pair.step(TCP6, op=INSERT, **v6)
    pair.tables()


def test_tracking_program_and_python_entries(pair: Pair) -> None:
    """xdp_ct_track over a packet sequence; then entries made from Python on pyxdp and by
    the program on Linux are found alike."""
    flows = [udp_packet(b"a", src_ip=f"10.3.0.{i}", dst_ip="10.4.0.1", sport=100 + i,
                        dport=53) for i in range(1, 5)]
    replies = [udp_packet(b"b", src_ip="10.4.0.1", dst_ip=f"10.3.0.{i}", sport=53,
                          dport=100 + i) for i in range(1, 5)]
    for pkt in flows + flows[:2] + replies[1:3] + [TCP6, TCP6]:
        pair.step(pkt, prog="xdp_ct_track")
    assert [pair.u.maps["stats"][i] for i in range(5)] == \
        [pair.k.maps["stats"][i] for i in range(5)] == [5, 3, 2, 0, 0]
    pair.tables()
    # The same entry: inserted by the program on Linux, added from Python on pyxdp.
    pkt = udp_packet(b"p", src_ip="10.9.0.1", dst_ip="10.9.0.2", sport=7, dport=8)
    pair.k.maps["cfg"][0] = {**packet_cfg(pkt), "op": INSERT, "timeout_ms": 40_000,
                             "status": 4}
    with netns(pair.ns[0]):
        assert pair.k.programs["xdp_ct"].test_run(pkt).retval == 2
    pair.env.fib.conntrack.add(CtTuple.of("10.9.0.1", 7, "10.9.0.2", 8), timeout=40,
                               status=4)
    assert pair.u.programs["xdp_ct"].test_run(icmp_packet()).retval == 2  # runs + 1 too
    for reverse in (0, 1):
        pair.step(pkt, op=LOOKUP, reverse=reverse)
    pair.tables()
