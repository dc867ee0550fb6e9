"""IPsec state lookups (pyxdp.net.xfrm_state, xfrm_state_bpf) on both engines: the states
``samples/xfrm.o`` finds and the fields it reads through CO-RE, the mark, family,
protocol and SPI rules of ``__xfrm_state_lookup``, the newest state first, a peer
namespace, reference counts back where they were after the release, the table's own
rules, and the JIT's native twins against the interpreter. (Linux on this machine has
no xfrm type to hold a state: tests/kernel/test_xfrm_state_kernel.py compares the paths
that find none.)"""

from __future__ import annotations

import errno
import ipaddress
import random
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from pyxdp.collection import Collection
from pyxdp.net import xfrm_state, xfrm_state_bpf
from pyxdp.net.packets import ether, ipv4, ipv6
from pyxdp.net.prog import jit_available
from pyxdp.net.test_run import TestRunEnv
from pyxdp.net.xfrm_state import XfrmError, XfrmStateTable
from pyxdp.testing.native import python_calls
from pyxdp.userspace import UserspaceBackend

XFRM = Path(__file__).resolve().parents[1] / "samples" / "xfrm.o"
ESP_PROTO = 50
CFG = {"netns_id": -1, "sz_sel": 0, "mark": 0, "error_init": 77, "proto": 0, "pad": 0,
       "family": 0}


def _pkt(dst: str, spi: int) -> bytes:
    esp = spi.to_bytes(4, "big") + bytes(12)
    if ":" in dst:
        return ether("02:00:00:00:00:01", "02:00:00:00:00:02", 0x86DD,
                     ipv6("fd00::1", dst, ESP_PROTO, esp))
    return ether("02:00:00:00:00:01", "02:00:00:00:00:02", 0x0800,
                 ipv4("10.0.0.1", dst, ESP_PROTO, esp))


def _words(addr: str) -> list[int]:
    raw = ipaddress.ip_address(addr).packed.ljust(16, b"\0")
    return [int.from_bytes(raw[i:i + 4], "little") for i in range(0, 16, 4)]


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_states_found_and_read(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    env = TestRunEnv()
    t = env.fib.xfrm
    old = t.add("10.0.0.1", "10.0.0.2", 0x100, ESP_PROTO, mark=(3, 3), reqid=1)
    # (1 & 3) != 3: not the same state as the first; found before it where both match
    new = t.add("10.0.0.9", "10.0.0.2", 0x100, ESP_PROTO, mark=(1, 1), reqid=2, mode=1,
                if_id=3)
    v6 = t.add("fd00::1", "fd00::2", 0x200, ESP_PROTO, reqid=6)
    t.add("10.0.0.1", "10.0.0.3", 0, ESP_PROTO)  # SPI 0: in no SPI chain
    peer = XfrmStateTable()
    peer.add("10.0.0.7", "10.0.0.2", 0x100, ESP_PROTO, reqid=9)
    t.peers[4] = peer
    with Collection.load(XFRM, UserspaceBackend(env=env, engine=engine)) as c:
        def run(pkt: bytes, **cfg: Any) -> dict[str, Any]:
            c.maps["cfg"][0] = {**CFG, **cfg}
            r = c.programs["xdp_xfrm"].test_run(pkt)
            assert r.fault is None, r.fault
            out: dict[str, Any] = c.maps["out"][0]
            assert r.retval == (2 if out["found"] else 1)
            return out

        # the newest state whose mark matches: mark 7 matches both
        o = run(_pkt("10.0.0.2", 0x100), mark=7)
        assert (o["found"], o["error"], o["reqid"], o["mode"], o["if_id"]) == (1, 77, 2, 1, 3)
        assert (o["spi"], o["proto"], o["family"]) == (0x100, ESP_PROTO, 2)
        assert (o["mark_v"], o["mark_m"]) == (1, 1)
        assert o["daddr"] == _words("10.0.0.2") and o["saddr"] == _words("10.0.0.9")
        assert run(_pkt("10.0.0.2", 0x100), mark=2)["error"] == -errno.ENOENT  # neither
        t.delete(new)
        assert run(_pkt("10.0.0.2", 0x100), mark=7)["reqid"] == 1
        assert run(_pkt("10.0.0.2", 0x100), mark=1)["found"] == 0
        o = run(_pkt("fd00::2", 0x200))
        assert (o["reqid"], o["family"], o["daddr"]) == (6, 10, _words("fd00::2"))
        assert run(_pkt("10.0.0.2", 0x100), netns_id=4)["reqid"] == 9
        for pkt, cfg in ((_pkt("10.0.0.2", 0x101), {"mark": 3}),  # another SPI
                         (_pkt("10.0.0.2", 0x100), {"proto": 51, "mark": 3}),  # AH
                         (_pkt("10.0.0.2", 0x100), {"family": 10, "mark": 3}),  # as IPv6
                         (_pkt("10.0.0.3", 0), {}),                  # SPI 0
                         (_pkt("fd00::2", 0x200), {"netns_id": 4})):
            assert (run(pkt, **cfg)["found"], c.maps["out"][0]["error"]) == (0, -errno.ENOENT)
        assert run(_pkt("10.0.0.2", 0x100), netns_id=3)["error"] == -errno.ENONET
        t.delete(old)
        assert run(_pkt("10.0.0.2", 0x100), mark=7)["error"] == -errno.ENOENT
    assert v6.refcnt == 1 and old.refcnt == new.refcnt == 0  # every reference released


def test_table_rules() -> None:
    t = XfrmStateTable()
    x = t.add("10.0.0.1", "10.0.0.2", 0x100, ESP_PROTO, mark=(1, 0xF))
    with pytest.raises(XfrmError) as e:
        t.add("10.0.0.5", "10.0.0.2", 0x100, ESP_PROTO, mark=(1, 0xF))
    assert e.value.errno == errno.EEXIST
    t.add("10.0.0.5", "10.0.0.2", 0x100, ESP_PROTO, mark=(2, 0xF))  # another mark
    with pytest.raises(XfrmError) as e:
        t.add("10.0.0.1", "fd00::2", 1, ESP_PROTO)
    assert e.value.errno == errno.EINVAL
    assert len(t.list()) == 2 and x.refcnt == 1
    t.flush()
    assert t.list() == [] and t.lookup(1, x.daddr, 0x100, ESP_PROTO, 2) is None
    with pytest.raises(XfrmError) as e:
        t.delete(x)
    assert e.value.errno == errno.ESRCH


DSTS = ["10.0.0.2", "10.0.0.3", "fd00::2", "fd00::3"]
SRCS = {4: ["10.0.0.1", "10.0.0.9"], 6: ["fd00::1", "fd00::9"]}
SPIS = [0, 0x100, 0x101]


def _fill(t: XfrmStateTable, rng: random.Random) -> None:
    for _ in range(14):
        dst = rng.choice(DSTS)
        try:
            t.add(rng.choice(SRCS[6 if ":" in dst else 4]), dst, rng.choice(SPIS),
                  rng.choice([ESP_PROTO, ESP_PROTO, 51]), reqid=rng.randrange(50),
                  mark=(rng.randrange(4), rng.choice([0, 1, 3])), mode=rng.randrange(2))
        except XfrmError:
            pass  # that state exists


def _runs(c: Collection, rng: random.Random, n: int, rec: list[Any], peers: bool) -> None:
    for _ in range(n):
        c.maps["cfg"][0] = {**CFG, "mark": rng.randrange(8),
                            "sz_sel": rng.choice([0] * 12 + [1, 2, 3]),
                            "netns_id": rng.choice([-1] * 12 + [-2] + ([4, 5] if peers else [])),
                            "proto": rng.choice([0, 0, 0, 51]),
                            "family": rng.choice([0, 0, 0, 2, 10])}
        r = c.programs["xdp_xfrm"].test_run(_pkt(rng.choice(DSTS), rng.choice(SPIS)))
        assert r.fault is None, r.fault
        rec.append((r.retval, c.maps["out"][0]))


@pytest.mark.skipif(not jit_available(), reason="the JIT needs llvmlite")
def test_native_twins_agree_and_stay_native() -> None:
    """The kfuncs' native twins: a JIT run calls no Python of xfrm_state{,_bpf} per
    packet, and gives the interpreter's returns, opts writes, fields read and reference
    counts over randomized lookups (a peer namespace's, Python, mixed in)."""
    got = {}
    for engine in ("interp", "jit"):
        env = TestRunEnv()
        t = env.fib.xfrm
        _fill(t, random.Random(3))
        peer = t.peers[4] = XfrmStateTable()
        _fill(peer, random.Random(4))
        with Collection.load(XFRM, UserspaceBackend(env=env, engine=engine)) as c:
            rec: list[Any] = []
            _runs(c, random.Random(1), 2, rec, False)  # builds the JIT's run state
            calls = python_calls([xfrm_state, xfrm_state_bpf],
                                 partial(_runs, c, random.Random(2), 150, rec, False))
            if engine == "jit":
                assert calls == 0  # lookups found or not, releases: machine code
            _runs(c, random.Random(5), 60, rec, True)
            t.delete(t.list()[1])
            _runs(c, random.Random(6), 60, rec, True)
            got[engine] = (rec, [(x.slot, x.refcnt) for x in (*t.list(), *peer.list())])
    assert got["jit"] == got["interp"]
    outcomes = {(r, o["error"]) for r, o in got["jit"][0]}
    assert len(outcomes) >= 4 and sum(o["found"] for _r, o in got["jit"][0]) > 20
