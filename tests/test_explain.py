"""``pyxdp explain`` on pyxdp: each way a packet can end, named with Linux's reason.

Issue 17's drop reasons here, and on Linux in tests/kernel/test_explain_kernel.py:
empty devmap slot (test_empty_devmap_slot_is_the_reason_for_aborted), -EOPNOTSUPP
(test_redirect_to_a_veth_whose_peer_has_no_program_is_eopnotsupp), -ENXIO
(test_xdp_tx_on_a_veth_whose_peer_has_no_napi_is_enxio), MTU too small
(test_mtu_too_small_is_emsgsize), AF_XDP rx ring full and fill ring empty
(test_af_xdp_delivered_then_rx_ring_full_then_fill_ring_empty), xdp_exception from
an unknown action and from a fault (test_unknown_action_is_an_exception_named_as_such,
test_fault_is_an_exception_with_the_faulting_line; a fault has no Linux side), the
stack's drop reasons (test_stack_fates)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path

import pytest

from pyxdp.cli.main import main
from pyxdp.explain import Explainer, ExplainError, Journey, Topology, TopologyError, explain
from pyxdp.net.packets import icmp_packet, tcp_packet, udp_packet

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
ADDRS = {"eth0": ["198.51.100.2/24", "2001:db8::2/64"]}  # the packets' destinations
ETH0 = bytes.fromhex("020000000002")  # eth0's MAC in the default topology (ifindex 2)
TX_ETH1 = {"tx_port": [{"key": 0, "value": {"ifindex": "@eth1"}}]}


def _only(j: Journey) -> str:
    assert len(j.fates) == 1, j.render()
    f = j.fates[0]
    return f"{f.outcome} at {f.where}: {f.reason}"


def _events(j: Journey) -> list[tuple[str, dict[str, int]]]:
    return [(e.name, e.record._asdict()) for e in j.events]


def test_empty_devmap_slot_is_the_reason_for_aborted(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Where did my packet go"):]
    make = re.search(r'^python -c "(.*)"$', section, re.M)  # README's pkt.bin
    assert make is not None
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(make.group(1), {})  # noqa: S102
    finally:
        os.chdir(cwd)
    pkt = tmp_path / "pkt.bin"
    assert main(["explain", str(SAMPLES / "redirect_map.o"), "--data-in", str(pkt)]) == 0
    out = capsys.readouterr().out
    assert "returns XDP_ABORTED" in out
    assert "redirect_map.c:59: return bpf_redirect_map(&tx_port, 0, 0);" in out
    assert "tx_port[0] is empty" in out and "BPF_MAP_TYPE_DEVMAP" in out
    assert "1 frame dropped at eth0: XDP_ABORTED: tx_port[0] is empty" in out
    # program ids are process-wide (they share the fds' number space with map ids)
    assert re.search(r"xdp_exception: prog_id=\d+ action=ABORTED ifindex=2", out)


def test_redirect_transmitted_on_the_wire_with_its_events() -> None:
    j = explain(SAMPLES / "redirect_map.o", udp_packet(b"hello"), maps=TX_ETH1)
    assert _only(j) == "transmitted at eth1: sent on the wire"
    assert [s.kind for s in j.steps] == ["rx", "run", "helper", "event", "event", "xmit"]
    helper = j.steps[2].fields
    assert (helper["map"], helper["key"], helper["entry"]) == ("tx_port", 0, "eth1 (ifindex 3)")
    assert [(n, r["to_ifindex"] if n == "xdp_redirect" else r["sent"])
            for n, r in _events(j)] == [("xdp_redirect", 3), ("xdp_devmap_xmit", 1)]


def test_redirect_to_a_veth_whose_peer_has_no_program_is_eopnotsupp() -> None:
    j = explain(SAMPLES / "redirect_map.o", udp_packet(b"x"),
                maps={"tx_port": [{"key": 0, "value": {"ifindex": "@veth0"}}]})
    assert "-EOPNOTSUPP" in _only(j) or "-ENOTSUP" in _only(j)
    assert "its peer veth1 has no XDP program and GRO is off" in _only(j)
    assert _events(j)[0][0] == "xdp_redirect_err" and _events(j)[0][1]["err"] == -95


def test_xdp_tx_on_a_veth_whose_peer_has_no_napi_is_enxio() -> None:
    t = Topology.from_dict({"devices": [{"name": "veth0", "kind": "veth", "peer": "veth1"}]})
    j = explain(SAMPLES / "xdp2.o", udp_packet(b"x"), topology=t)
    assert "veth_xdp_xmit refused them (-ENXIO)" in _only(j)
    assert _events(j) == [("xdp_bulk_tx", {"ifindex": 2, "act": 3, "drops": 1, "sent": 0,
                                           "err": -6})]


def test_mtu_too_small_is_emsgsize() -> None:
    t = Topology.from_dict({"devices": [{"name": "eth0"}, {"name": "eth1", "mtu": 100}]})
    j = explain(SAMPLES / "redirect_map.o", udp_packet(size=300), topology=t, maps=TX_ETH1)
    assert "-EMSGSIZE: the frame is longer than eth1's MTU 100 + 18" in _only(j)


def test_unknown_action_is_an_exception_named_as_such() -> None:
    from pyxdp.testing.programs import asm_collection
    j = explain(asm_collection("r0 = 7\nexit"), udp_packet(b"x"))
    assert _only(j).startswith("dropped at eth0: invalid action 7: not an XDP action: "
                               "bpf_warn_invalid_xdp_action, then dropped as XDP_ABORTED")
    assert _events(j) == [("xdp_exception", {"prog_id": j.steps[1].fields["prog_id"],
                                             "act": 7, "ifindex": 2})]


@pytest.mark.parametrize(("doc", "msg"), [
    ({"devices": [{"name": "eth0"}], "xsk": [{"dev": "eth0", "mode": "zerocopy"}]},
     "must be in copy mode (veth has no zero-copy AF_XDP)"),
    ({"devices": [{"name": "eth0_is_a_long_name"}]}, "longer than 13 characters"),
])
def test_kernel_refuses_what_it_cannot_build_in_one_line(doc: object, msg: str) -> None:
    from pyxdp.explain.kernel import kernel_scenario
    with pytest.raises(TopologyError, match=re.escape(msg)):
        kernel_scenario(SAMPLES / "xsk.o", program="xdp_sock_prog",
                        topology=Topology.from_dict(doc))


def test_fault_is_an_exception_with_the_faulting_line() -> None:
    j = explain(SAMPLES / "unchecked.o", udp_packet(b"x")[:14], verify=False)
    assert "XDP_ABORTED: the program faulted" in _only(j)
    assert "unchecked.c:20" in _only(j) and "out-of-bounds read" in _only(j)


def test_devmap_program_then_peer_stack_drop_reason() -> None:
    t = Topology.from_dict({
        "devices": [{"name": "eth0"}, {"name": "veth0", "kind": "veth", "peer": "veth1"}],
        "programs": [{"dev": "eth0"}, {"dev": "veth1", "object": "builtin:xdp_pass"}]})
    maps = {"tx_port": [{"key": 0, "value": {"ifindex": "@veth0",
                                             "bpf_prog": {"fd": "prog:xdp_redirect_map_egress"}}}]}
    j = explain(SAMPLES / "redirect_map.o", udp_packet(b"x"), topology=t, maps=maps)
    runs = [s.fields["program"] for s in j.steps if s.kind == "run"]
    assert runs == ["xdp_redirect_map_prog", "xdp_redirect_map_egress", "xdp_pass"]
    assert "devmap program on the way out of veth0" in j.steps[4].text
    # MACs swapped: the frame is addressed to the sender, not to veth1.
    assert "SKB_DROP_REASON_OTHERHOST" in _only(j) and "veth1 stack" in _only(j)


@pytest.mark.parametrize(("packet", "want"), [
    (udp_packet(b"x", dst_mac=ETH0), "delivered at eth0 stack: UDP socket on port 5678"),
    (udp_packet(b"x", dport=99, dst_mac=ETH0), "SKB_DROP_REASON_NO_SOCKET"),
    (tcp_packet(b"x", dst_mac=ETH0), "SKB_DROP_REASON_NO_SOCKET"),  # no TCP listener
    (icmp_packet(b"x", dst_mac=ETH0), "accepted by the stack (Ip:InReceives +1"),
    (udp_packet(b"x", dst_mac=ETH0)[:30], "SKB_DROP_REASON_IP_INHDR"),  # half a header
    (udp_packet(b"xyz", dst_mac=ETH0)[:40], "SKB_DROP_REASON_PKT_TOO_SMALL"),
    (udp_packet(b"x", dst_mac="02:00:00:00:00:09"), "SKB_DROP_REASON_OTHERHOST"),
], ids=["udp", "udp-noport", "tcp", "icmp", "short-header", "truncated", "otherhost"])
def test_stack_fates(packet: bytes, want: str) -> None:
    t = Topology.from_dict({"devices": [{"name": "eth0"}], "udp": [5678], "addresses": ADDRS})
    assert want in _only(explain("builtin:xdp_pass", packet, topology=t))


def test_broadcast_clones_each_get_a_fate() -> None:
    maps = {"ports": [{"key": 0, "value": {"ifindex": "@eth0"}},
                      {"key": 1, "value": {"ifindex": "@eth1"}},
                      {"key": 2, "value": {"ifindex": "@veth0"}}]}
    j = explain(SAMPLES / "redirect_bcast.o", udp_packet(b"x"), maps=maps)
    assert sorted((f.where, f.outcome) for f in j.fates) == [("eth0", "transmitted"),
                                                             ("eth1", "transmitted")]
    assert "ports[2] = veth0: cannot take XDP frames" in j.steps[2].text
    excl = explain(SAMPLES / "redirect_bcast.o", udp_packet(b"x"), maps=maps,
                   program="xdp_redirect_bcast_excl")
    assert [f.where for f in excl.fates] == ["eth1"]


def test_cpumap_program_drop_and_pass() -> None:
    maps = {"cpu_map": [{"key": 1, "value": {"qsize": 64,
                                             "bpf_prog": {"fd": "prog:xdp_cpumap_filter"}}}],
            "cpus_available": [{"key": 1, "value": 1}], "cpus_count": [{"key": 0, "value": 2}]}
    t = Topology.from_dict({"devices": [{"name": "eth0"}], "udp": [5678], "addresses": ADDRS})
    with Explainer(SAMPLES / "redirect_cpu.o", program="xdp_redirect_cpu_proto", topology=t,
                   maps=maps) as ex:
        dropped = ex.explain(udp_packet(b"x", dport=9, dst_mac=ETH0))
        passed = ex.explain(udp_packet(b"x", dst_mac=ETH0))
    assert "XDP_DROP from xdp_cpumap_filter" in _only(dropped)
    assert "cpumap kthread on CPU 1" in dropped.fates[0].where
    assert _only(passed) == "delivered at eth0 stack: UDP socket on port 5678"
    assert [e.name for e in passed.events] == ["xdp_redirect", "xdp_cpumap_enqueue",
                                               "xdp_cpumap_kthread"]


def test_af_xdp_delivered_then_rx_ring_full_then_fill_ring_empty() -> None:
    pkt = udp_packet(b"x")
    t = Topology.from_dict({"devices": [{"name": "eth0"}],
                            "xsk": [{"dev": "eth0", "map": "xsks", "rx_size": 2,
                                     "consume": False}]})
    with Explainer(SAMPLES / "xsk.o", topology=t) as ex:
        fates = [_only(ex.explain(pkt)) for _ in range(3)]
    assert fates[:2] == ["delivered at AF_XDP socket on eth0 queue 0: in the socket's rx ring"] * 2
    assert "-ENOBUFS: the AF_XDP socket's rx ring is full" in fates[2]
    t = Topology.from_dict({"devices": [{"name": "eth0"}],
                            "xsk": [{"dev": "eth0", "map": "xsks", "fill": 0}]})
    j = explain(SAMPLES / "xsk.o", pkt, topology=t)
    assert "-ENOMEM: the AF_XDP socket's fill ring is empty" in _only(j)
    assert j.steps[-1].fields["rx_fill_ring_empty_descs"] == 1


def test_json_and_toml_topology(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topo = tmp_path / "t.toml"
    topo.write_text('udp = [5678]\n[[devices]]\nname = "eth0"\n[[devices]]\nname = "eth1"\n'
                    '[[programs]]\ndev = "eth0"\n[maps]\n'
                    'tx_port = [{key = 0, value = {ifindex = "@eth1"}}]\n')
    pkt = tmp_path / "p.bin"
    pkt.write_bytes(udp_packet(b"x"))
    assert main(["explain", str(SAMPLES / "redirect_map.o"), "--data-in", str(pkt),
                 "--topology", str(topo), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fates"] == [{"outcome": "transmitted", "where": "eth1",
                             "reason": "sent on the wire", "count": 1}]
    assert [t["name"] for t in doc["tracepoints"]] == ["xdp_redirect", "xdp_devmap_xmit"]


@pytest.mark.parametrize(("doc", "msg"), [
    ({"devices": []}, "'devices' must be a non-empty list"),
    ({"devices": [{"name": "eth0", "colour": 1}]}, "unknown key(s) ['colour']"),
    ({"devices": [{"name": "eth0"}], "ingress": {"dev": "eth9"}}, "ingress device 'eth9'"),
    ({"devices": [{"name": "v0", "kind": "veth"}]}, "a veth needs a 'peer'"),
    ({"devices": [{"name": "eth0"}], "addresses": {"eth9": ["10.0.0.1/24"]}},
     "addresses of unknown device 'eth9'"),
    ({"devices": [{"name": "eth0"}], "addresses": {"eth0": ["10.0.0.300/24"]}},
     "'10.0.0.300/24' is not an address/prefix length"),
    ({"devices": [{"name": "eth0"}], "addresses": ["10.0.0.1/24"]},
     "'addresses' must map device names"),
])
def test_bad_topologies_are_one_line_errors(doc: object, msg: str) -> None:
    with pytest.raises(TopologyError, match=msg.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        Topology.from_dict(doc)


def test_bad_inputs_on_the_command_line(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    pkt = tmp_path / "p.bin"
    pkt.write_bytes(udp_packet(b"x"))
    obj = str(SAMPLES / "redirect_map.o")
    maps = tmp_path / "m.json"
    maps.write_text('{"tx_port": [{"key": 0, "value": {"ifindex": "@eth7"}}]}')
    for argv, msg in ((["-s", "nope"], "no program named 'nope'"),
                      (["--maps", str(maps)], "no device 'eth7'")):
        assert main(["explain", obj, "--data-in", str(pkt), *argv]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1
    with pytest.raises(ExplainError, match="empty packet"):
        explain(obj, b"")


def test_readme_journey_is_what_explain_prints() -> None:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Where did my packet go"):]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    shown = re.search(r"```text\n(.*?)```", section, re.S)
    assert code is not None and shown is not None
    scope: dict[str, object] = {}
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code.group(1), "README.md", "exec"), scope)  # noqa: S102
    finally:
        os.chdir(cwd)
    journey = scope["journey"]
    assert isinstance(journey, Journey)

    def ids(s: str) -> str:  # program and map ids count up in the process
        return re.sub(r"(prog_id=|map_id=|\(id )\d+", r"\1N", s)
    assert ids(journey.render()) == ids(shown.group(1).rstrip("\n"))


def test_run_pcap_explain_writes_a_journey_per_packet(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from pyxdp.net.pcap import PcapngWriter, read_capture
    src = tmp_path / "in.pcapng"
    with src.open("wb") as f:
        w = PcapngWriter(f)
        w.add_interface("wire")
        w.write(udp_packet(b"a"), 1_000)
        w.write(udp_packet(b"b")[:10], 2_000)
        w.close()
    maps = tmp_path / "m.json"
    maps.write_text(json.dumps(TX_ETH1))
    out = tmp_path / "out.pcapng"
    assert main(["run", str(SAMPLES / "redirect_map.o"), "--pcap", str(src), "-w", str(out),
                 "--maps", str(maps), "--explain"]) == 0
    report = capsys.readouterr().out
    assert "packet 1: transmitted at eth1: sent on the wire" in report
    assert "packet 2: dropped at eth0 queue 0: XDP_DROP from xdp_redirect_map_prog" in report
    got = list(read_capture(out))
    assert [p.verdict for p in got] == [4, 1]  # XDP_REDIRECT, XDP_DROP
    assert got[0].data[:6] == udp_packet(b"a")[6:12]  # the MACs as the program swapped them
    assert "xdp_devmap_xmit" in got[0].comments[0]
    assert "redirect_map.c:" in got[1].comments[0]


def test_generic_mode_xdp_tx_goes_straight_out() -> None:
    t = Topology.from_dict({"devices": [{"name": "eth0"}],
                            "programs": [{"dev": "eth0", "mode": "generic"}]})
    j = explain(SAMPLES / "xdp2.o", udp_packet(b"x"), topology=t)
    assert "generic (skb) mode" in j.steps[1].text and "generic_xdp_tx" in j.steps[2].text
    assert _only(j) == "transmitted at eth0: sent on the wire" and j.events == []
