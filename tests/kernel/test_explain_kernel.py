"""``pyxdp explain --kernel``: the reasons Linux's tracepoints and taps show, for the
same packet on the same topology, and no difference from pyxdp's journey."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pyxdp.cli.main import main
from pyxdp.explain import Explainer, Topology, default_topology
from pyxdp.explain.kernel import compare, kernel_journey
from pyxdp.net.packets import udp_packet

pytestmark = pytest.mark.kernel

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
VETH_PASS = {"devices": [{"name": "eth0"}, {"name": "veth0", "kind": "veth", "peer": "veth1"}],
             "programs": [{"dev": "eth0"}, {"dev": "veth1", "object": "builtin:xdp_pass"}]}
PORTS = {"ports": [{"key": 0, "value": {"ifindex": "@eth0"}},
                   {"key": 1, "value": {"ifindex": "@eth1"}},
                   {"key": 2, "value": {"ifindex": "@veth0"}}]}


def _tx(dev: str) -> dict[str, Any]:
    return {"tx_port": [{"key": 0, "value": {"ifindex": f"@{dev}"}}]}


@pytest.mark.parametrize(("obj", "maps", "topo", "linux_fate"), [
    ("redirect_map.o", {}, None, "dropped at eth0: XDP_ABORTED (xdp_exception)"),
    ("redirect_map.o", _tx("veth0"), None, "dropped at eth0: redirect failed, err -95"),
    ("redirect_map.o", _tx("eth1"), None, "transmitted at eth1: sent on the wire"),
    ("redirect_map.o", _tx("veth0"), VETH_PASS, "delivered at veth1 stack: reached the stack"),
    ("xdp2.o", {}, {"devices": [{"name": "veth0", "kind": "veth", "peer": "veth1"}]},
     "dropped at veth0: xdp_bulk_tx drops, err -6"),
    ("xdp1.o", {}, None, "dropped at eth0 queue 0: vanished"),
    ("redirect_bcast.o", PORTS, None, "transmitted at eth0: sent on the wire"),
], ids=["empty-slot", "eopnotsupp", "devmap-xmit", "peer-stack", "enxio", "xdp-drop",
        "broadcast"])
def test_linux_shows_the_same_journey(obj: str, maps: dict[str, Any],
                                      topo: dict[str, Any] | None, linux_fate: str) -> None:
    topology = Topology.from_dict(topo) if topo else default_topology()
    pkt = udp_packet(b"hello")
    with Explainer(SAMPLES / obj, topology=topology, maps=maps) as ex:
        ours = ex.explain(pkt)
        names = ex.namer()
        program = ex.program
    linux = kernel_journey(SAMPLES / obj, pkt, program=program, topology=topology, maps=maps)
    fates = [f"{f.outcome} at {f.where}: {f.reason}" for f in linux.fates]
    assert any(f.startswith(linux_fate) for f in fates), fates
    assert compare(ours, linux, names=names) == []
    assert sum(f.count for f in ours.fates) == sum(f.count for f in linux.fates)


def test_cli_kernel_prints_both_journeys(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    pkt = tmp_path / "p.bin"
    pkt.write_bytes(udp_packet(b"hello"))
    assert main(["explain", str(SAMPLES / "redirect_map.o"), "--data-in", str(pkt),
                 "--kernel", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["differences"] == []
    assert doc["linux"]["tracepoints"] == [
        {"name": "xdp_exception", "fields": {"prog_id": "xdp_redirect_map_prog", "act": 0,
                                             "ifindex": "eth0"}}]
