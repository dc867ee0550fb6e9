"""The xfrm state kfuncs against Linux 6.18: ``samples/xfrm.o`` under BPF_PROG_TEST_RUN
in a namespace A of this test's (namespace B is netns id 5 in A) and on pyxdp's
interpreter and JIT, for IPv4 and IPv6 ESP packets and every opts path: the current
namespace (-1), B, an id no namespace has (-ENONET), an id below -1 (-EINVAL), an
``opts__sz`` that is not 36 (-EINVAL), one below 4 (NULL, ``opts->error`` left alone), no
state (-ENOENT). The verdicts and what the program records must agree.

This kernel has no xfrm type (``CONFIG_INET_ESP``, ``_AH``, ``_IPCOMP`` are off: ``ip
xfrm state add`` says "Requested type not found"), so Linux holds no state to find;
tests/test_xfrm_state.py runs lookups that find states on pyxdp's engines.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.kernel.netlink import netns
from pyxdp.net.packets import ether, ipv4, ipv6
from pyxdp.net.prog import jit_available
from pyxdp.net.test_run import TestRunEnv
from pyxdp.net.xfrm_state import XfrmStateTable
from pyxdp.testing.netns_pair import peered_namespaces
from pyxdp.userspace import UserspaceBackend

pytestmark = pytest.mark.kernel

XFRM = Path(__file__).resolve().parents[2] / "samples" / "xfrm.o"
PEER_ID = 5
IPPROTO_ESP = 50
ESP = (0x100).to_bytes(4, "big") + bytes(12)
PACKETS = [
    ether("02:00:00:00:00:01", "02:00:00:00:00:02", 0x0800,
          ipv4("10.0.0.1", "10.0.0.2", IPPROTO_ESP, ESP)),
    ether("02:00:00:00:00:01", "02:00:00:00:00:02", 0x86DD,
          ipv6("fd00::1", "fd00::2", IPPROTO_ESP, ESP)),
]
BASE = {"netns_id": -1, "sz_sel": 0, "mark": 0, "error_init": 77, "proto": 0, "pad": 0,
        "family": 0}
CFGS = [BASE, {**BASE, "netns_id": PEER_ID}, {**BASE, "netns_id": 9},
        {**BASE, "netns_id": -2}, {**BASE, "netns_id": -1 << 31}, {**BASE, "sz_sel": 1},
        {**BASE, "sz_sel": 2}, {**BASE, "sz_sel": 3}, {**BASE, "mark": 0xFFFF_FFFF},
        {**BASE, "proto": 51}, {**BASE, "family": 10}, {**BASE, "sz_sel": 2, "netns_id": -2}]


@pytest.fixture
def namespaces() -> Iterator[tuple[str, str]]:
    with peered_namespaces("xs", PEER_ID) as pair:
        yield pair


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_lookups_and_errors_as_on_linux(namespaces: tuple[str, str], engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    env = TestRunEnv()
    env.fib.xfrm.peers[PEER_ID] = XfrmStateTable()
    errors = set()
    with Collection.load(XFRM, "kernel") as k, \
            Collection.load(XFRM, UserspaceBackend(env=env, engine=engine)) as u:
        for pkt in PACKETS:
            for cfg in CFGS:
                for c in (k, u):
                    c.maps["cfg"][0] = cfg
                with netns(namespaces[0]):
                    kr = k.programs["xdp_xfrm"].test_run(pkt)
                ur = u.programs["xdp_xfrm"].test_run(pkt)
                assert ur.fault is None, ur.fault
                ko, uo = k.maps["out"][0], u.maps["out"][0]
                assert (ur.retval, uo) == (kr.retval, ko), (cfg, pkt.hex())
                errors.add(ko["error"])
    assert errors == {-2, -64, -22, 77}  # ENOENT, ENONET, EINVAL, untouched
