"""SOCKMAP and SOCKHASH used from XDP against Linux: ``samples/sockmap.o`` under
BPF_PROG_TEST_RUN in a network namespace of each test's, whose sockets are made with
``socket(2)``, and on pyxdp's interpreter and JIT over a
:class:`~pyxdp.net.inet_hashtables.SockTable` given the same sockets.

A sequence of runs puts sockets a lookup found into both maps (every update error:
-EEXIST, -ENOENT, -E2BIG, -EINVAL), looks them up (the socket's fields as the program
reads them) and deletes them (-EINVAL, -ENOENT for what is not there); after each run
the program's record and, at the end, which keys hold a socket from user space (and
after a socket in the maps closes) must agree. The verifier's rules for the value of a
socket map update get Linux's first message.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.errors import VerifierError
from pyxdp.kernel.netlink import netns
from pyxdp.net.inet_hashtables import Sock
from pyxdp.net.packets import tcp_packet, udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.net.test_run import TestRunEnv
from pyxdp.spec import MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType as MT
from pyxdp.userspace import UserspaceBackend

pytestmark = pytest.mark.kernel

SOCKMAP = Path(__file__).resolve().parents[2] / "samples" / "sockmap.o"
LISTEN, LISTEN6, UDP4 = 8101, 8102, 5401
ENGINES = ["interp", "jit"]
LO, LO6 = "127.0.0.1", "::1"
ANY, NOEXIST, EXIST = 0, 1, 2


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)


class Linux:
    """The namespace's sockets: TCP listeners on 127.0.0.1 and [::1], a connection to
    the first, a UDP socket."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        with netns(ns):
            self.listener = socket.create_server((LO, LISTEN))
            self.listener6 = socket.create_server((LO6, LISTEN6), family=socket.AF_INET6)
            self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.udp.bind((LO, UDP4))
            self.client = socket.create_connection((LO, LISTEN))
            self.server, _ = self.listener.accept()
        self.client_port = self.client.getsockname()[1]

    def close(self) -> None:
        for s in (self.listener, self.listener6, self.udp, self.client, self.server):
            s.close()


class Mirror:
    """The same sockets in pyxdp's namespace."""

    def __init__(self, env: TestRunEnv, linux: Linux) -> None:
        t = env.fib.sockets
        self.listener: Sock = t.tcp_listen(LO, LISTEN)
        t.tcp_listen(LO6, LISTEN6, ipv6only=True)
        t.udp_bind(LO, UDP4)
        t.tcp_established(LO, linux.client_port, LO, LISTEN)
        t.tcp_established(LO, LISTEN, LO, linux.client_port, passive=True)


@pytest.fixture
def linux() -> Iterator[Linux]:
    if shutil.which("ip") is None:
        if os.environ.get("CI"):
            pytest.fail("needs iproute2 to create network namespaces")
        pytest.skip("needs iproute2 to create network namespaces")
    ns = f"pyxdp-sm-{os.getpid()}"
    res = _ip("netns", "add", ns)
    assert res.returncode == 0, res.stderr
    try:
        assert _ip("-n", ns, "link", "set", "lo", "up").returncode == 0
        lx = Linux(ns)
        try:
            yield lx
        finally:
            lx.close()
    finally:
        _ip("netns", "del", ns)


def _steps(client_port: int) -> list[tuple[dict[str, int], bytes]]:
    def tcp(sport: int, dport: int, src: str = LO) -> bytes:
        return tcp_packet(b"", src_ip=src, dst_ip=src, sport=sport, dport=dport)

    def cfg(op: int, map_key: int, hash_key: int, flags: int = ANY, delete: int = 0
            ) -> dict[str, int]:
        return {"op": op, "map_key": map_key, "hash_key": hash_key, "del": delete,
                "flags": flags}

    udp = udp_packet(b"x", src_ip=LO, dst_ip=LO, sport=40000, dport=UDP4)
    return [
        (cfg(0, 0, 10), tcp(40000, LISTEN)),                    # a listener into both
        (cfg(1, 1, 11, NOEXIST), udp),                          # a UDP socket
        (cfg(0, 1, 12, NOEXIST), tcp(client_port, LISTEN)),     # EEXIST; the hash is full
        (cfg(0, 2, 12, EXIST), tcp(client_port, LISTEN)),       # ENOENT both
        (cfg(0, 4, 10), tcp(40000, LISTEN)),                    # past the end; replaced
        (cfg(0, 0, 10, 3), tcp(40000, LISTEN)),                 # flags above BPF_EXIST
        (cfg(2, 2, 10), tcp(client_port, LISTEN)),              # a sock_common pointer
        (cfg(0, 3, 11, EXIST), tcp(40000, LISTEN6, LO6)),       # IPv6: ENOENT; replaces UDP
        (cfg(0, 0, 10), tcp(40000, 9)),                         # no socket: lookups only
        (cfg(0, 1, 11, delete=1), tcp(40000, 9)),               # the UDP socket, twice
        (cfg(0, 3, 12, delete=1), tcp(40000, 9)),               # nothing there
        (cfg(0, 9, 10), tcp(40000, 9)),                         # lookup past the end
    ]


def _held(c: Collection) -> tuple[list[int], list[int]]:
    """Which sock_map indexes and sock_hash keys hold a socket (from user space)."""
    m, h = c.maps["sock_map"], c.maps["sock_hash"]
    in_map = [k for k in range(4) if m.lookup(k.to_bytes(4, "little")) is not None]
    return in_map, sorted(int.from_bytes(k, "little") for k in h.raw_keys())


@pytest.mark.parametrize("engine", ENGINES)
def test_sock_maps_as_on_linux(linux: Linux, engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    env = TestRunEnv()
    mirror = Mirror(env, linux)
    with Collection.load(SOCKMAP, "kernel") as k, \
            Collection.load(SOCKMAP, UserspaceBackend(env=env, engine=engine)) as u:
        records = []
        for cfg, pkt in _steps(linux.client_port):
            for c in (k, u):
                c.maps["cfg"][0] = cfg
            with netns(linux.ns):
                kr = k.programs["xdp_sockmap"].test_run(pkt)
            ur = u.programs["xdp_sockmap"].test_run(pkt)
            assert ur.fault is None, ur.fault
            ko, uo = k.maps["out"][0], u.maps["out"][0]
            assert (ur.retval, uo) == (kr.retval, ko), (cfg, pkt.hex())
            records.append(ko)
        assert [r["upd_map"] for r in records[:8]] == [
            0, 0, -errno.EEXIST, -errno.ENOENT, -errno.E2BIG, -errno.EINVAL, 0, -errno.ENOENT]
        assert [r["upd_hash"] for r in records[:8]] == [
            0, 0, -errno.E2BIG, -errno.ENOENT, 0, -errno.EINVAL, 0, 0]
        assert records[8]["in_map"]["found"] and records[8]["in_map"]["state"] == 10
        assert [records[9][f] for f in ("del_map", "del_map2", "del_hash", "del_hash2")] == [
            0, -errno.EINVAL, 0, -errno.ENOENT]
        assert (records[10]["del_map"], records[10]["del_hash"]) == (-errno.EINVAL,
                                                                     -errno.ENOENT)
        assert _held(u) == _held(k) == ([0, 2], [10])
        # The listener closes: it leaves both maps (sock_map_close); index 2 keeps the
        # accepted connection.
        linux.listener.close()
        env.fib.sockets.close(mirror.listener)
        assert _held(u) == _held(k) == ([2], [10])


UPDATE = ("r1 = 0\n*(u64 *)(r10 -8) = r1\n*(u64 *)(r10 -16) = r1\n"
          "*(u64 *)(r10 -24) = r1\n")


@pytest.mark.parametrize("map_type", [MT.BPF_MAP_TYPE_SOCKMAP, MT.BPF_MAP_TYPE_SOCKHASH])
def test_update_value_is_a_socket(map_type: MT) -> None:
    """resolve_map_arg_type: a socket map update's value must be a socket pointer (not
    stack memory, not a socket that may be NULL); Linux's message on both."""
    m = MapSpec("m", int(map_type), 4, 8, 4)
    stack = asm_collection(UPDATE + "r2 = r10\nr2 += -8\nr3 = r10\nr3 += -16\n"
                           "r1 = map[fd:0]\nr4 = 0\ncall 2\nr0 = 2\nexit", [m])
    maybe_null = asm_collection(
        "r6 = r1\n" + UPDATE + "r1 = r6\nr2 = r10\nr2 += -24\nr3 = 12\nr4 = -1\nr5 = 0\n"
        "call 84\nr7 = r0\nr2 = r10\nr2 += -8\nr1 = map[fd:0]\nr3 = r7\nr4 = 0\ncall 2\n"
        "r0 = 2\nexit", [m])
    expected = "expected=sock_common, sock, tcp_sock, xdp_sock, ptr_, trusted_ptr_"
    for prog, first in ((stack, "R3 type=fp " + expected),
                        (maybe_null, "R3 type=sock_or_null " + expected)):
        for backend in ("kernel", "userspace"):
            with pytest.raises(VerifierError, match=first):
                Collection(prog, backend)
