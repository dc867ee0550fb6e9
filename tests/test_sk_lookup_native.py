"""The socket helpers' native twins: JIT runs of ``samples/sk.o``'s ``xdp_sk`` call no
Python of pyxdp.net.filter_sk or inet_hashtables per packet (lookups that hit and miss,
releases), and give the interpreter's returns and ``struct bpf_sock`` reads over
randomized tables and packets, with Python's rare paths (a peer namespace) mixed in."""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from pyxdp.collection import Collection
from pyxdp.net import filter_sk, inet_hashtables
from pyxdp.net.inet_hashtables import SockTable
from pyxdp.net.packets import tcp_packet, udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.net.test_run import TestRunEnv
from pyxdp.testing.native import python_calls
from pyxdp.userspace import UserspaceBackend

pytestmark = pytest.mark.skipif(not jit_available(), reason="the JIT needs llvmlite")

M32 = 0xFFFF_FFFF
SK = Path(__file__).resolve().parents[1] / "samples" / "sk.o"
HOSTS4 = ["10.0.0.1", "10.0.0.2", "127.0.0.1"]
HOSTS6 = ["2001:db8::1", "2001:db8::2", "::ffff:10.0.0.1"]
PORTS = [53, 80, 81]


def _fill(t: SockTable, rng: random.Random, n: int) -> None:
    """``n`` attempts at random sockets (a taken port or four-tuple is skipped)."""
    for _ in range(n):
        v6 = rng.random() < 0.4
        hosts = HOSTS6 if v6 else HOSTS4
        local = rng.choice([*hosts, "::" if v6 else "0.0.0.0"])
        kw = {"dev": rng.choice([0, 0, 0, 1, 3]), "mark": rng.randrange(9),
              "priority": rng.randrange(9)}
        try:
            what = rng.randrange(4)
            if what == 0:
                t.tcp_listen(local, rng.choice(PORTS), ipv6only=rng.random() < 0.3, **kw)
            elif what == 1:
                t.tcp_established(rng.choice(hosts), rng.choice(PORTS), rng.choice(hosts),
                                  rng.choice(PORTS), passive=rng.random() < 0.5, **kw)
            else:
                peer = (rng.choice(hosts), rng.choice(PORTS)) if what == 3 else None
                t.udp_bind(local, rng.choice(PORTS), connect=peer,
                           ipv6only=rng.random() < 0.3, **kw)
        except (OSError, ValueError):
            pass


def _runs(c: Collection, rng: random.Random, n: int, rec: list[Any], peers: bool = False
          ) -> None:
    """``n`` runs of xdp_sk on random packets and options (with ``peers`` a peer
    namespace's id now and then: a Python path)."""
    prog = c.programs["xdp_sk"]
    for _ in range(n):
        v6 = rng.random() < 0.4
        hosts = HOSTS6 if v6 else HOSTS4
        make = tcp_packet if rng.random() < 0.5 else udp_packet
        pkt = make(b"", src_ip=rng.choice(hosts), dst_ip=rng.choice(hosts),
                   sport=rng.choice(PORTS), dport=rng.choice(PORTS))
        c.maps["cfg"][0] = {
            "op": rng.randrange(3), "tuple_sz": rng.choice([0] * 19 + [20]),
            "netns_id": rng.choice([M32] * 9 + [5] if peers else [M32]), "pad": 0,
            "flags": rng.choice([0] * 19 + [1])}
        r = prog.test_run(pkt)
        assert r.fault is None, r.fault
        rec.append((r.retval, c.maps["out"][0]))


def test_lookups_agree_and_stay_native() -> None:
    seed = 5
    got: dict[str, list[Any]] = {}
    for engine in ("interp", "jit"):
        env = TestRunEnv()
        t = env.fib.sockets
        rng = random.Random(seed)
        _fill(t, rng, 40)
        peer = t.peers[5] = SockTable()
        _fill(peer, rng, 10)
        with Collection.load(SK, UserspaceBackend(env=env, engine=engine)) as c:
            rec: list[Any] = []
            _runs(c, random.Random(seed + 1), 3, rec)  # builds the JIT's run state
            calls = python_calls([filter_sk, inet_hashtables],
                                 partial(_runs, c, random.Random(seed + 2), 150, rec))
            if engine == "jit":
                assert calls == 0  # lookups, hits and misses, and releases: machine code
            # closed sockets and reused slots, and the peer's table through Python
            for sk in [t.socks[k] for k in sorted(t.socks)][::3]:
                t.close(sk)
            _fill(t, random.Random(seed + 3), 15)
            _runs(c, random.Random(seed + 4), 100, rec, peers=True)
        got[engine] = rec
    assert sum(r[0] == 2 for r in got["interp"]) > 40  # sockets found
    assert sum(r[0] == 1 for r in got["interp"]) > 40  # and not
    assert got["jit"] == got["interp"]


def _syn(rng: random.Random) -> bytes:
    """A TCP segment to a listener's port: mostly a SYN, with or without an MSS option
    (and options of other lengths), now and then another flag set."""
    v6 = rng.random() < 0.4
    hosts = HOSTS6[:2] if v6 else HOSTS4
    opts = rng.choice([b"", b"\x02\x04\x05\xb4", b"\x01\x01\x02\x04\x02\x00",
                       b"\x02\x04" + rng.randrange(1, 65536).to_bytes(2, "big"),
                       b"\x01\x02\x04\x23\x28\x00\x00\x00", b"\x00\x00\x00\x00"])
    flags = rng.choice(["S"] * 6 + ["SA", "A", "SR", "SF"])
    return tcp_packet(b"", src_ip=rng.choice(hosts), dst_ip=rng.choice(hosts),
                      sport=rng.randrange(1024, 65536), dport=rng.choice(PORTS),
                      seq=rng.randrange(1 << 32), flags=flags, options=opts, ipv6=v6)


def _minute() -> int:
    from pyxdp.net.syncookies import TCP_SYNCOOKIE_PERIOD
    from pyxdp.vm.jiffies import jiffies64
    return jiffies64() // TCP_SYNCOOKIE_PERIOD


def test_syncookies_agree_and_stay_native() -> None:
    """Both engines side by side (each packet to the interpreter, then to the JIT): the
    same returns, cookies and check results, the same overflow stamps left on the
    listeners; the JIT's runs call no Python of the socket and cookie modules."""
    from pyxdp.net import syncookies

    envs = [TestRunEnv(), TestRunEnv()]
    rng_fill = [random.Random(9), random.Random(9)]
    for env, rng in zip(envs, rng_fill, strict=True):
        t = env.fib.sockets
        for port in PORTS:
            t.tcp_listen("0.0.0.0" if port != 81 else "::", port,
                         ipv6only=port == 53, user_mss=rng.choice([0, 1000]))
    rng = random.Random(10)
    calls = 0
    found = 0
    with Collection.load(SK, UserspaceBackend(env=envs[0], engine="interp")) as ci, \
            Collection.load(SK, UserspaceBackend(env=envs[1], engine="jit")) as cj:
        cj.programs["xdp_syncookie"].test_run(_syn(random.Random(0)))  # builds run state
        for _ in range(150):
            pkt = _syn(rng)
            mode = rng.choice([2, 2, 2, 1, 0])
            for env in envs:
                env.fib.sockets.tcp_syncookies = mode
            before = _minute()
            ri = ci.programs["xdp_syncookie"].test_run(pkt)
            calls += python_calls([filter_sk, inet_hashtables, syncookies],
                                  partial(cj.programs["xdp_syncookie"].test_run, pkt))
            rj_out = {**cj.maps["cookies"][0], "runs": 0}  # (the JIT's warm-up run)
            ri_out = {**ci.maps["cookies"][0], "runs": 0}
            assert ri.fault is None, ri.fault
            if _minute() == before:  # (a cookie of another minute differs)
                assert rj_out == ri_out
            found += ri_out["found"]
        stamps = [[s.last_overflow is not None for s in e.fib.sockets.socks.values()]
                  for e in envs]
        # the gen twin writes a listener's stamp: threaded NAPI runs that program under
        # the host lock, the lookups' may run on several CPUs at once
        from pyxdp.net.napi import _parallel_ok
        assert not _parallel_ok(cj.programs["xdp_syncookie"].handle)
        assert _parallel_ok(cj.programs["xdp_sk"].handle)
    assert calls == 0
    assert found > 50 and stamps[0] == stamps[1] and any(stamps[0])
