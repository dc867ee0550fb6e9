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
