"""The conntrack kfuncs' native twins (all but bpf_ct_set_nat_info): JIT runs of
``samples/ct.o`` call no Python of pyxdp.net.nf_conntrack{,_bpf} per packet, and give
the interpreter's returns, opts writes and table state over randomized lookups and
insertions, with Python's paths (NAT set-up, the gc, a full table) mixed in."""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from pyxdp.collection import Collection
from pyxdp.net import nf_conntrack, nf_conntrack_bpf
from pyxdp.net.nf_conntrack import CtTuple, IpsStatus, NfConntrack
from pyxdp.net.packets import tcp_packet, udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.net.test_run import TestRunEnv
from pyxdp.testing.native import python_calls
from pyxdp.userspace import UserspaceBackend
from pyxdp.vm.jiffies import HZ, jiffies64

pytestmark = pytest.mark.skipif(not jit_available(), reason="the JIT needs llvmlite")

M32 = 0xFFFF_FFFF
CT = Path(__file__).resolve().parents[1] / "samples" / "ct.o"
HOSTS4 = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
HOSTS6 = ["2001:db8::1", "2001:db8::2"]
PORTS = [53, 80, 1000]
# Entry status bits to start from and to ask bpf_ct_change_status for (0: not asked).
STATUSES = [0, 0, IpsStatus.ASSURED, IpsStatus.SEEN_REPLY | IpsStatus.ASSURED,
            IpsStatus.FIXED_TIMEOUT, IpsStatus.DYING, IpsStatus.EXPECTED]
_C = IpsStatus.CONFIRMED  # a request without it is -EBUSY before any other check
REQUESTS = [0, 0, IpsStatus.SEEN_REPLY, _C | IpsStatus.SEEN_REPLY, _C | IpsStatus.ASSURED,
            _C | IpsStatus.ASSURED | IpsStatus.SEEN_REPLY | IpsStatus.OFFLOAD, _C, _C | 1 << 9,
            1 << 16 | 0x3F]


def _flow(rng: random.Random) -> tuple[bool, str, str, int, int, str]:
    v6 = rng.random() < 0.3
    hosts = HOSTS6 if v6 else HOSTS4
    return (v6, rng.choice(hosts), rng.choice(hosts), rng.choice(PORTS), rng.choice(PORTS),
            rng.choice(["udp", "tcp"]))


def _known(rng: random.Random) -> tuple[bool, str, str, int, int, str]:
    """One of a few flows (the tracked ones, and ones with a tracked tuple's ports)."""
    return _flow(random.Random(rng.randrange(16)))


def _packet(flow: tuple[bool, str, str, int, int, str]) -> bytes:
    _v6, src, dst, sport, dport, proto = flow
    make = tcp_packet if proto == "tcp" else udp_packet
    return make(b"", src_ip=src, dst_ip=dst, sport=sport, dport=dport)


def _fill(table: NfConntrack, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(12):
        _v6, src, dst, sport, dport, proto = _known(rng)
        try:
            table.add(CtTuple.of(src, sport, dst, dport, proto), zone=rng.choice([0, 0, 7]),
                      mark=rng.randrange(100), status=rng.choice(STATUSES))
        except nf_conntrack.ConntrackError:
            pass  # taken


def _state(table: NfConntrack) -> list[tuple[Any, ...]]:
    return sorted((str(c.orig), str(c.reply), c.status, c.use, c.mark, c.zone, c.slot)
                  for c in table.list())


def _view(out: dict[str, Any]) -> dict[str, Any]:
    """The out record but the clock-relative timeouts (the engines run at other jiffies)."""
    got = dict(out)
    for k in ("before", "after"):
        got[k] = {f: v for f, v in out[k].items() if f != "timeout"}
    return got


def _lookups(c: Collection, rng: random.Random, n: int, rec: list[Any],
             nat: bool = False) -> None:
    """``n`` runs of xdp_ct with random options (lookups, and insertions: 30%, with a
    source or destination NAT set-up when ``nat``, a Python kfunc)."""
    prog = c.programs["xdp_ct"]
    for _ in range(n):
        flow = _known(rng) if rng.random() < 0.7 else _flow(rng)
        v6, proto = flow[0], flow[5]
        c.maps["cfg"][0] = {
            "op": int(rng.random() < 0.3), "netns_id": rng.choice([-1] * 19 + [-2]),
            "tuple_sz": rng.choice([36 if v6 else 12] * 19 + [20]),
            "opts_sz": rng.choice([16, 16, 16, 16, 12]),
            "l4proto": rng.choice([6 if proto == "tcp" else 17] * 19 + [1]),
            "zone_id": rng.choice([0, 7]), "zone_dir": rng.choice([0, 0, 0, 1, 2, 3]),
            "reserved": rng.choice([0] * 19 + [1]), "reverse": rng.randrange(2),
            # bpf_ct_change_timeout or _set_timeout (never short: an expiry would take the
            # gc's Python, and a run on a loaded machine can last several seconds)
            "timeout_ms": rng.choice([0, 0, 120000, 60000, 1 << 31, M32]),
            "status": rng.choice(REQUESTS)}
        if nat:
            addr = [int.from_bytes(bytes([10, 0, 0, rng.randrange(1, 4)]), "little"), 0, 0, 0]
            c.maps["cfg"][0] = {**c.maps["cfg"][0], "status": 0, "snat": rng.randrange(2),
                                "dnat": rng.randrange(2), "snat_addr": addr, "dnat_addr": addr,
                                "snat_port": rng.choice([0, 0, 4000]),
                                "dnat_port": rng.choice([0, 8080])}
        r = prog.test_run(_packet(flow))
        assert r.fault is None, r.fault
        rec.append((r.retval, _view(c.maps["out"][0])))


def _reuse(c: Collection) -> None:
    """find_appropriate_src: a natively inserted entry keeps its source NAT mapping for
    the next flow from its source (the reply's port: 4000, not the flow's own 1000)."""
    a = [int.from_bytes(bytes([192, 0, 2, 1]), "little"), 0, 0, 0]
    for dst, port in (("10.2.0.2", 4000), ("10.2.0.9", 0)):
        c.maps["cfg"][0] = {"op": 1, "netns_id": -1, "tuple_sz": 12, "opts_sz": 16,
                            "l4proto": 17, "snat": 1, "snat_addr": a, "snat_port": port}
        c.programs["xdp_ct"].test_run(udp_packet(b"", src_ip="10.1.0.3", dst_ip=dst,
                                                 sport=1000, dport=2000))
    assert c.maps["out"][0]["after"]["reply_dport"] == 4000


def test_lookup_and_release_agree_and_stay_native() -> None:
    rng_seed = 11
    got: dict[str, list[Any]] = {}
    states = {}
    left = {}
    took = 0  # the longer run's jiffies
    for engine in ("interp", "jit"):
        start = jiffies64()
        env = TestRunEnv()
        table = env.fib.conntrack
        _fill(table, rng_seed)
        with Collection.load(CT, UserspaceBackend(env=env, engine=engine)) as c:
            rec: list[Any] = []
            _lookups(c, random.Random(rng_seed), 3, rec)  # builds the JIT's run state
            calls = python_calls([nf_conntrack, nf_conntrack_bpf],
                                 partial(_lookups, c, random.Random(rng_seed + 1), 200, rec))
            if engine == "jit":
                assert calls == 0  # lookups, hits and misses, and releases: machine code
            _lookups(c, random.Random(rng_seed + 2), 100, rec, nat=True)
            _reuse(c)
            got[engine] = rec
            states[engine] = _state(table)
            left[engine] = sorted((c.slot, c.expires()) for c in table.list())
        took = max(took, jiffies64() - start)
    assert got["jit"] == got["interp"]
    assert states["jit"] == states["interp"]
    # timeouts set in each engine's run: equal but for when in its run each was set
    for (slot_i, a), (slot_j, b) in zip(left["interp"], left["jit"], strict=True):
        assert slot_i == slot_j and abs(a - b) <= took + HZ
    outcomes = {(r, o["error"], o["dir"], o["after"]["zone_id"]) for r, o in got["jit"]}
    assert len(outcomes) >= 8  # hits both ways and zones, misses, several error paths
    changes = {(o["timeout_ret"], o["status_ret"]) for r, o in got["jit"] if r == 2}
    assert len(changes) >= 4  # 0, -EPERM, -ETIME, -EBUSY


def test_tracking_agrees_with_python_paths_mixed_in() -> None:
    """xdp_ct_track over new flows (alloc, set_timeout, insert) and known ones (lookup,
    release): no Python on the JIT; then with an expired entry (the gc: Python) and a
    full table (-ENOMEM) mixed in, the same stats and table on both engines."""
    got = {}
    for engine in ("interp", "jit"):
        env = TestRunEnv()
        table = env.fib.conntrack = NfConntrack(max_entries=13)  # full in the second part
        rng = random.Random(5)
        flows = [_flow(rng) for _ in range(10)]
        with Collection.load(CT, UserspaceBackend(env=env, engine=engine)) as c:
            prog = c.programs["xdp_ct_track"]

            def run(n: int, flows: list[Any] = flows, prog: Any = prog,
                    rng: random.Random = rng) -> None:
                for _ in range(n):
                    assert prog.test_run(_packet(rng.choice(flows))).retval == 2
            prog.test_run(_packet(flows[0]))  # builds the JIT's run state
            calls = python_calls([nf_conntrack, nf_conntrack_bpf], partial(run, 100))
            if engine == "jit":
                assert calls == 0
            # bpf_ct_set_timeout(30 s) of each new entry, then inserted
            assert all(29 * HZ < ct.expires() <= 30 * HZ for ct in table.list())
            table.add(CtTuple.of("10.0.0.1", 80, "10.0.0.2", 80), timeout=0)  # expired
            flows.extend(_flow(rng) for _ in range(10))
            run(80)
            got[engine] = ([c.maps["stats"][i] for i in range(5)], _state(table))
    assert got["jit"] == got["interp"]
    new, orig, reply, _err, failed = got["jit"][0]
    assert 5 < new and orig + reply > 100 and failed > 0


def test_programs_with_table_twins_run_on_one_cpu_at_a_time() -> None:
    """The twins change the namespace's tables without atomics: threaded NAPI runs such a
    program under the host lock (ct.o's maps are arrays, which alone would let it run
    on several CPUs at once); a program without them keeps running in parallel."""
    from pyxdp.net.napi import _parallel_ok

    with Collection.load(CT, engine="interp") as c:
        assert not _parallel_ok(c.programs["xdp_ct_track"].handle)
    with Collection.load(CT.parent / "xdp1.o", engine="interp") as c:
        assert _parallel_ok(next(iter(c.programs.values())).handle)
