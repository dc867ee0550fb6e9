"""engine="tiered": the interpreter answers while a thread builds the JIT code, which
takes over between runs - same verdicts, same maps, on test_run and on the datapath."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.net import prog as prog_mod
from pyxdp.net.netdevice import Host
from pyxdp.net.packets import traffic, udp_packet

pytest.importorskip("llvmlite")
SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def test_interpreter_first_then_the_jit() -> None:
    pkts = list(traffic(flows=4, protos=["udp", "tcp"], count=20))
    # Holding the build lock keeps the JIT from finishing: the first runs interpret.
    with prog_mod._JIT_BUILD_LOCK:
        coll = Collection.load(SAMPLES / "xdp2.o", engine="tiered")
        p = coll.programs["xdp_prog2"]
        first = [p.test_run(pkt) for pkt in pkts]
        assert p.handle.engine == "interp" and not p.handle.jit_ready.is_set()  # type: ignore[attr-defined]
    with coll:
        assert p.handle.jit_ready.wait(120) and p.handle.jit_error is None  # type: ignore[attr-defined]
        later = [p.test_run(pkt) for pkt in pkts]
        assert p.handle.engine == "jit"  # type: ignore[attr-defined]
        assert [(r.retval, r.data_out) for r in first] == [(r.retval, r.data_out) for r in later]
        assert coll.maps["rxcnt"].sum(17) == 2 * sum(1 for x in pkts if x[23] == 17)


def test_tiered_program_on_the_datapath() -> None:
    with Host(engine="tiered") as host:
        eth0 = host.add_device("eth0")
        xdp1 = host.load(SAMPLES / "xdp1.o")
        eth0.attach_xdp(xdp1.programs["xdp_prog1"])
        eth0.receive([udp_packet(b"a")] * 10)
        host.run()
        assert xdp1.programs["xdp_prog1"].handle.jit_ready.wait(120)  # type: ignore[attr-defined]
        eth0.receive([udp_packet(b"b")] * 10)
        host.run()
        assert xdp1.programs["xdp_prog1"].handle.engine == "jit"  # type: ignore[attr-defined]
        assert eth0.stats.xdp_drops == 20 and xdp1.maps["rxcnt"].sum(17) == 20
