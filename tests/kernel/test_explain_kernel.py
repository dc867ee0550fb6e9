"""``pyxdp explain --kernel``: the reasons Linux's tracepoints, taps and sockets show,
for the same packets on the same topology, and no difference from pyxdp's journey.

The drop reasons of issue 17, each on both sides (pyxdp's in tests/test_explain.py):
empty devmap slot (``empty-slot``), -EOPNOTSUPP (``eopnotsupp``), -ENXIO (``enxio``),
MTU too small (``mtu``), AF_XDP rx ring full (``xsk-ring-full``), fill ring empty
(``xsk-fill-empty``), xdp_exception from an unknown action (``unknown-action``) and
from XDP_ABORTED (``empty-slot``); the stack's ``kfree_skb`` reasons
(``stack-reasons``). A program fault has no Linux side: the verifier refuses it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pyxdp.cli.main import main
from pyxdp.explain import Explainer, Topology, default_topology
from pyxdp.explain.kernel import KernelExplainer, compare, kernel_journey
from pyxdp.net.packets import icmp_packet, tcp_packet, udp_packet
from pyxdp.spec import CollectionSpec
from pyxdp.testing.programs import asm_collection

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
    ("redirect_map.o", _tx("veth0"), VETH_PASS,
     "dropped at veth1 stack: SKB_DROP_REASON_OTHERHOST"),  # MACs swapped by the program
    ("xdp2.o", {}, {"devices": [{"name": "veth0", "kind": "veth", "peer": "veth1"}]},
     "dropped at veth0: xdp_bulk_tx drops, err -6"),
    ("xdp1.o", {}, None, "dropped at eth0 queue 0: XDP_DROP: no tracepoint fires; veth's skb "
                         "freed by kfree_skb at veth_xdp_rcv_skb"),
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
        macs = ex.macs()
    linux = kernel_journey(SAMPLES / obj, pkt, program=program, topology=topology, maps=maps,
                           macs=macs)
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


ETH0 = "02:00:00:00:00:02"  # eth0's MAC on pyxdp's host (and on Linux's, given to it)
BAD_IP_CSUM = bytes(b ^ 0xFF if i == 24 else b
                    for i, b in enumerate(udp_packet(b"x", dst_mac=ETH0)))
ONE_NIC_XSK = {"devices": [{"name": "eth0"}], "xsk": [{"dev": "eth0", "map": "xsks"}]}


def _with(base: dict[str, Any], **xsk: Any) -> dict[str, Any]:
    return {**base, "xsk": [{**base["xsk"][0], **xsk}]}


@pytest.mark.parametrize(("obj", "topo", "maps", "packets", "linux_fates"), [
    ("redirect_map.o", {"devices": [{"name": "eth0"}, {"name": "eth1", "mtu": 100}]},
     {"tx_port": [{"key": 0, "value": {"ifindex": "@eth1"}}]}, [udp_packet(size=300)],
     ["dropped at eth0: redirect failed, err -90 (-EMSGSIZE)"]),
    ("xsk.o", _with(ONE_NIC_XSK, rx_size=2, consume=False), {}, [udp_packet(b"x")] * 3,
     ["delivered at AF_XDP socket on eth0 queue 0: in the socket's rx ring"] * 2
     + ["dropped at eth0: redirect failed, err -105 (-ENOBUFS)"]),
    ("xsk.o", _with(ONE_NIC_XSK, fill=0), {}, [udp_packet(b"x")],
     ["dropped at eth0: redirect failed, err -12 (-ENOMEM)"]),
    ("xsk.o", {"devices": [{"name": "eth0", "queues": 2}], "ingress": {"dev": "eth0", "queue": 1},
               "xsk": [{"dev": "eth0", "queue": 1, "map": "xsks", "key": 1}]}, {},
     [udp_packet(b"x")], ["delivered at AF_XDP socket on eth0 queue 1: in the socket's rx ring"]),
    ("builtin:xdp_pass", {"devices": [{"name": "eth0"}], "udp": [5678],
                         "addresses": {"eth0": ["198.51.100.2/24"]}}, {},
     [udp_packet(b"x", dst_mac=ETH0), udp_packet(b"x", dport=99, dst_mac=ETH0),
      udp_packet(b"x", dst_mac="02:00:00:00:00:09"), udp_packet(b"x", dst_mac=ETH0)[:30],
      BAD_IP_CSUM, udp_packet(b"xyz", dst_mac=ETH0)[:40], tcp_packet(b"x", dst_mac=ETH0),
      icmp_packet(b"x", dst_mac=ETH0)],
     ["delivered at eth0 stack: UDP socket on port 5678",
      "dropped at eth0 stack: SKB_DROP_REASON_NO_SOCKET",
      "dropped at eth0 stack: SKB_DROP_REASON_OTHERHOST",
      "dropped at eth0 stack: SKB_DROP_REASON_IP_INHDR",
      "dropped at eth0 stack: SKB_DROP_REASON_IP_CSUM",
      "dropped at eth0 stack: SKB_DROP_REASON_PKT_TOO_SMALL",
      "dropped at eth0 stack: SKB_DROP_REASON_NO_SOCKET",  # TCP: no listener
      "delivered at eth0 stack: reached the stack (tap)"]),  # an echo request: no reply
    (asm_collection("r0 = 7\nexit"), None, {}, [udp_packet(b"x")],
     ["dropped at eth0: invalid action 7 (xdp_exception)"]),
    ("redirect_map.o", {"devices": [{"name": "eth0"},
                                    {"name": "veth0", "kind": "veth", "peer": "veth1",
                                     "gro": True}]},
     _tx("veth1"), [udp_packet(b"x")], ["dropped at veth0 stack: SKB_DROP_REASON_OTHERHOST"]),
], ids=["mtu", "xsk-ring-full", "xsk-fill-empty", "xsk-queue-1", "stack-reasons",
        "unknown-action", "gro-gives-napi"])
def test_linux_names_the_same_reason(obj: str | CollectionSpec, topo: dict[str, Any] | None,
                                     maps: dict[str, Any], packets: list[bytes],
                                     linux_fates: list[str]) -> None:
    topology = Topology.from_dict(topo) if topo else default_topology()
    src = obj if isinstance(obj, CollectionSpec) or obj.startswith("builtin:") \
        else SAMPLES / obj
    with Explainer(src, topology=topology, maps=maps) as ex:
        ours = [ex.explain(p) for p in packets]
        names, program, macs = ex.namer(), ex.program, ex.macs()
    with KernelExplainer(src, program=program, topology=topology, maps=maps,
                         macs=macs) as kx:
        linux = [kx.explain(p) for p in packets]
    for o, lin, want in zip(ours, linux, linux_fates, strict=True):
        fates = [f"{f.outcome} at {f.where}: {f.reason}" for f in lin.fates]
        assert len(fates) == 1 and fates[0].startswith(want), (fates, lin.render())
        assert compare(o, lin, names=names) == [], lin.render()
