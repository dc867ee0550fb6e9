"""Socket lookups and SYN cookies against Linux: ``samples/sk.o`` under BPF_PROG_TEST_RUN
in a network namespace of this module's, whose sockets (TCP listeners on 127.0.0.1 and
``[::1]``/``[::]``, an established connection, UDP sockets on 127.0.0.1 and ``[::]``)
are made with ``socket(2)``, and on pyxdp's interpreter and JIT over a
:class:`~pyxdp.net.inet_hashtables.SockTable` given the same sockets.

Each lookup's verdict and ``struct bpf_sock`` fields as the program reads them must
agree, for sockets that exist and ones that do not, and for the error paths (tuple size,
flags, netns id). The cookie program's return codes must agree; cookies themselves
depend on a secret and the time, so of a generated one only the MSS it encodes is
compared, and each side checks its own cookies (the round trip).
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyxdp.collection import Collection
from pyxdp.kernel.netlink import netns
from pyxdp.net.packets import tcp_packet, udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.net.test_run import TestRunEnv
from pyxdp.userspace import UserspaceBackend

pytestmark = pytest.mark.kernel

SK = Path(__file__).resolve().parents[2] / "samples" / "sk.o"
LISTEN, LISTEN6, DUAL, UDP4, UDP6, COOKIE1 = 8001, 8002, 8003, 5301, 5302, 8004
UDPC = 5303  # a UDP socket connected to UDP4
MSS_OPT = b"\x02\x04\x05\xb4"  # MSS 1460
ENGINES = ["interp", "jit"]
M32 = 0xFFFF_FFFF


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)


class Linux:
    """The namespace and its sockets (kept open for the module)."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.socks: list[socket.socket] = []
        with netns(ns):
            self._listen(socket.AF_INET, "127.0.0.1", LISTEN)
            self._listen(socket.AF_INET6, "::1", LISTEN6, v6only=True)
            self._listen(socket.AF_INET6, "::", DUAL, v6only=False)
            self._listen(socket.AF_INET, "127.0.0.1", COOKIE1)
            for fam, addr, port in ((socket.AF_INET, "127.0.0.1", UDP4),
                                    (socket.AF_INET6, "::", UDP6)):
                u = socket.socket(fam, socket.SOCK_DGRAM)
                if fam == socket.AF_INET6:
                    u.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                u.bind((addr, port))
                self.socks.append(u)
            cli = socket.create_connection(("127.0.0.1", LISTEN))
            srv, _ = self.socks[0].accept()
            cli6 = socket.create_connection(("::1", LISTEN6))
            srv6, _ = self.socks[1].accept()
            udpc = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            udpc.bind(("127.0.0.1", UDPC))
            udpc.connect(("127.0.0.1", UDP4))
            self.socks += [cli, srv, cli6, srv6, udpc]
            self.client_port = cli.getsockname()[1]
            self.client_port6 = cli6.getsockname()[1]

    def _listen(self, fam: int, addr: str, port: int, v6only: bool = True) -> None:
        s = socket.socket(fam, socket.SOCK_STREAM)
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, int(v6only))
        s.bind((addr, port))
        s.listen(8)
        self.socks.append(s)

    def close(self) -> None:
        for s in self.socks:
            s.close()


def _mirror(env: TestRunEnv, linux: Linux) -> None:
    """The same sockets in pyxdp's namespace."""
    t = env.fib.sockets
    t.tcp_listen("127.0.0.1", LISTEN)
    t.tcp_listen("::1", LISTEN6, ipv6only=True)
    t.tcp_listen("::", DUAL)
    t.tcp_listen("127.0.0.1", COOKIE1)
    t.udp_bind("127.0.0.1", UDP4)
    t.udp_bind("::", UDP6)
    t.tcp_established("127.0.0.1", linux.client_port, "127.0.0.1", LISTEN)
    t.tcp_established("127.0.0.1", LISTEN, "127.0.0.1", linux.client_port, passive=True)
    t.tcp_established("::1", linux.client_port6, "::1", LISTEN6)
    t.tcp_established("::1", LISTEN6, "::1", linux.client_port6, passive=True)
    t.udp_bind("127.0.0.1", UDPC, connect=("127.0.0.1", UDP4))


@pytest.fixture(scope="module")
def linux() -> Iterator[Linux]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 to create network namespaces")
    ns = f"pyxdp-sk-{os.getpid()}"
    res = _ip("netns", "add", ns)
    assert res.returncode == 0, res.stderr
    try:
        assert _ip("-n", ns, "link", "set", "lo", "up").returncode == 0
        res = subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                              "net.ipv4.tcp_syncookies=2"], capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == 0, res.stderr
        lx = Linux(ns)
        try:
            yield lx
        finally:
            lx.close()
    finally:
        _ip("netns", "del", ns)


@pytest.fixture(scope="module")
def loaded(linux: Linux) -> Iterator[dict[str, tuple[Collection, Collection, TestRunEnv]]]:
    with Collection.load(SK, "kernel") as k:
        got: dict[str, tuple[Collection, Collection, TestRunEnv]] = {}
        try:
            for engine in ENGINES:
                if engine == "jit" and not jit_available():
                    continue
                env = TestRunEnv()
                _mirror(env, linux)
                env.fib.sockets.tcp_syncookies = 2
                got[engine] = (k, Collection.load(SK, UserspaceBackend(env=env,
                                                                     engine=engine)), env)
            yield got
        finally:
            for _, u, _ in got.values():
                u.close()


def _tcp(src: str, dst: str, sport: int, dport: int, payload: bytes = b"", **kw: Any
         ) -> bytes:
    return tcp_packet(payload, src_ip=src, dst_ip=dst, sport=sport, dport=dport, **kw)


def _udp(src: str, dst: str, sport: int, dport: int) -> bytes:
    return udp_packet(b"x", src_ip=src, dst_ip=dst, sport=sport, dport=dport)


def _lookups(client_port: int, client_port6: int) -> list[tuple[dict[str, int], bytes]]:
    lo, lo6 = "127.0.0.1", "::1"
    cfg = {"op": 0, "tuple_sz": 0, "netns_id": M32, "flags": 0}
    return [
        (cfg, _tcp(lo, lo, 40000, LISTEN)),                      # a listener
        (cfg, _tcp(lo, lo, 40000, 9)),                           # nothing there
        (cfg, _tcp(lo, lo, client_port, LISTEN)),                # the accepted socket
        (cfg, _tcp(lo, lo, LISTEN, client_port)),                # the client socket
        (cfg, _tcp(lo6, lo6, 40000, LISTEN6)),                   # an IPv6 listener
        (cfg, _tcp(lo6, lo6, client_port6, LISTEN6)),            # an IPv6 connection
        (cfg, _tcp(lo6, lo6, LISTEN6, client_port6)),
        (cfg, _tcp(lo, lo, 40000, LISTEN6)),                     # v6only: not for IPv4
        (cfg, _tcp(lo, lo, 40000, DUAL)),                        # [::] takes IPv4
        (cfg, _tcp(lo6, lo6, 40000, DUAL)),
        ({**cfg, "op": 2}, _tcp(lo, lo, 40000, LISTEN)),         # sock_common
        ({**cfg, "op": 2}, _tcp(lo, lo, client_port, LISTEN)),
        ({**cfg, "op": 1}, _udp(lo, lo, 40000, UDP4)),
        ({**cfg, "op": 1}, _udp(lo, lo, UDP4, UDPC)),            # connected: its peer
        ({**cfg, "op": 1}, _udp(lo, lo, 40000, UDPC)),           # not its peer
        ({**cfg, "op": 1}, _udp(lo, lo, 40000, UDP6)),           # [::] takes IPv4
        ({**cfg, "op": 1}, _udp(lo6, lo6, 40000, UDP6)),
        ({**cfg, "op": 1}, _udp(lo6, lo6, 40000, UDP4)),
        ({**cfg, "op": 1}, _udp(lo, lo, 40000, LISTEN)),         # TCP port, UDP lookup
        ({**cfg, "flags": 1}, _tcp(lo, lo, 40000, LISTEN)),      # flags must be 0
        ({**cfg, "netns_id": 0}, _tcp(lo, lo, 40000, LISTEN)),   # no namespace 0
        ({**cfg, "netns_id": 1 << 31}, _tcp(lo, lo, 40000, LISTEN)),  # negative: current
        ({**cfg, "tuple_sz": 20}, _tcp(lo, lo, 40000, LISTEN)),  # neither size
        ({**cfg, "tuple_sz": 36}, _tcp(lo, lo, 40000, LISTEN)),  # read as IPv6
        ({**cfg, "tuple_sz": 12}, _tcp(lo6, lo6, 40000, LISTEN6)),  # read as IPv4
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_lookups_find_what_linux_finds(
        linux: Linux, loaded: dict[str, tuple[Collection, Collection, TestRunEnv]],
        engine: str) -> None:
    if engine not in loaded:
        pytest.skip("the JIT needs llvmlite")
    k, u, _ = loaded[engine]
    found = 0
    for cfg, pkt in _lookups(linux.client_port, linux.client_port6):
        for c in (k, u):
            c.maps["cfg"][0] = cfg
        with netns(linux.ns):
            kr = k.programs["xdp_sk"].test_run(pkt)
        ur = u.programs["xdp_sk"].test_run(pkt)
        assert ur.fault is None, ur.fault
        ko, uo = k.maps["out"][0], u.maps["out"][0]
        del ko["runs"], uo["runs"]
        if ko["state"] == 1 and ko["rx_queue_mapping"] >= 0:
            # Linux records on a connection's socket the queue_mapping of the skb that
            # fed it, when it had one (0, or on a busy loopback values like 33083): a
            # fact of the kernel's skb history, which pyxdp's sockets do not have
            ko["rx_queue_mapping"] = -1
        diff = {f: (v, uo[f]) for f, v in ko.items() if uo[f] != v}  # (Linux, pyxdp)
        assert (ur.retval, diff) == (kr.retval, {}), (cfg, pkt.hex())
        found += ko["found"]
    assert found == 15


def _cookie_step(linux: Linux, k: Collection, u: Collection, pkt: bytes
                 ) -> tuple[dict[str, int], dict[str, int]]:
    with netns(linux.ns):
        kr = k.programs["xdp_syncookie"].test_run(pkt)
    ur = u.programs["xdp_syncookie"].test_run(pkt)
    assert ur.fault is None, ur.fault
    assert ur.retval == kr.retval
    ko, uo = k.maps["cookies"][0], u.maps["cookies"][0]
    del ko["runs"], uo["runs"]
    for o in (ko, uo):  # a cookie: only its MSS is comparable
        for f in ("raw_gen", "gen"):
            if o[f] >= 0:
                o[f] = o[f] >> 32
    return ko, uo


@pytest.mark.parametrize("engine", ENGINES)
def test_syncookies_round_trip_as_on_linux(
        linux: Linux, loaded: dict[str, tuple[Collection, Collection, TestRunEnv]],
        engine: str) -> None:
    if engine not in loaded:
        pytest.skip("the JIT needs llvmlite")
    k, u, env = loaded[engine]
    lo, lo6 = "127.0.0.1", "::1"
    steps = [
        _tcp(lo, lo, 40001, LISTEN, options=MSS_OPT, seq=1000),
        _tcp(lo6, lo6, 40001, LISTEN6, options=MSS_OPT, seq=2000),
        _tcp(lo, lo, 40001, LISTEN, b"data", seq=5),      # no MSS option: 536
        _tcp(lo, lo, 40001, 9, options=MSS_OPT),           # no listener
        _tcp(lo, lo, 40001, LISTEN, options=MSS_OPT, flags="SA"),  # no SYN to answer
    ]
    results = []
    for pkt in steps:
        ko, uo = _cookie_step(linux, k, u, pkt)
        assert uo == ko, pkt.hex()
        results.append(ko)
    first = results[0]
    assert first["raw_gen"] == first["gen"] == 1460 and first["raw_check"] == 0
    assert first["check"] == 0 and first["raw_check_bad"] == -errno.EACCES
    assert first["raw_gen_badlen"] == -errno.EINVAL and first["check_syn"] == -errno.ENOENT
    assert first["check_short_iph"] == -errno.EINVAL
    assert results[1]["gen"] == 1440 and results[1]["check"] == 0  # IPv6's table
    assert results[2]["gen"] == 536
    assert results[4]["gen"] == -errno.EINVAL
    # tcp_syncookies 1 and a listener whose queue never overflowed: no cookie, and an
    # ACK is not checked (no overflow in the last two minutes)
    subprocess.run(["ip", "netns", "exec", linux.ns, "sysctl", "-qw",
                    "net.ipv4.tcp_syncookies=1"], check=True, timeout=60)
    env.fib.sockets.tcp_syncookies = 1
    try:
        ko, uo = _cookie_step(linux, k, u, _tcp(lo, lo, 40002, COOKIE1, options=MSS_OPT))
    finally:
        subprocess.run(["ip", "netns", "exec", linux.ns, "sysctl", "-qw",
                        "net.ipv4.tcp_syncookies=2"], check=True, timeout=60)
        env.fib.sockets.tcp_syncookies = 2
    assert uo == ko
    assert ko["gen"] == -errno.ENOENT and ko["check"] == -errno.ENOENT
