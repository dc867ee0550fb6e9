"""engine="tiered": the interpreter answers while a thread builds the JIT code, which
takes over between runs - same verdicts, same maps, on test_run and on the datapath."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
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


def test_the_build_waits_for_the_first_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The background build starts when the first run ends (its imports and lowering
    would share the GIL with the first packet), or after FIRST_RUN_WAIT without one."""
    started = threading.Event()
    engine = prog_mod.XdpProg._engine

    def watched(self: prog_mod.XdpProg, kind: str | None = None,
                opt_level: int | None = None) -> object:
        if kind == "jit":
            started.set()
        return engine(self, kind, opt_level)

    monkeypatch.setattr(prog_mod.XdpProg, "_engine", watched)
    monkeypatch.setattr(prog_mod, "FIRST_RUN_WAIT", 120)
    with Collection.load(SAMPLES / "xdp1.o", engine="tiered") as coll:
        p = coll.programs["xdp_prog1"]
        assert not started.wait(0.3)
        assert p.test_run(udp_packet(b"x")).retval == 1  # XDP_DROP, interpreted
        assert started.wait(120)
        assert p.handle.jit_ready.wait(120) and p.handle.jit_error is None  # type: ignore[attr-defined]
    monkeypatch.setattr(prog_mod, "FIRST_RUN_WAIT", 0.01)
    started.clear()
    with Collection.load(SAMPLES / "xdp1.o", engine="tiered") as coll:  # never run
        assert coll.programs["xdp_prog1"].handle.jit_optimised.wait(120)  # type: ignore[attr-defined]
        assert started.is_set()


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


def test_a_large_program_gets_quick_code_then_o2(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    """A program of QUICK_FIRST_INSNS or more: the interpreter, then the QUICK pipeline's
    code, then -O2's, each between runs, the same verdicts and maps throughout; once
    -O2 code exists (here, or on disk from another process) it comes at once."""
    from pyxdp.vm.jit.engine import QUICK, cache_clear

    monkeypatch.setenv("PYXDP_JIT_CACHE", str(tmp_path))
    cache_clear()
    monkeypatch.setattr(prog_mod, "QUICK_FIRST_INSNS", 1)  # xdp2 stands in for a large one
    o2_may_build = threading.Event()
    engine = prog_mod.XdpProg._engine

    def gated(self: prog_mod.XdpProg, kind: str | None = None,
              opt_level: int | None = None) -> object:
        if kind == "jit" and opt_level == 2:
            assert o2_may_build.wait(120)
        return engine(self, kind, opt_level)

    monkeypatch.setattr(prog_mod.XdpProg, "_engine", gated)
    pkts = list(traffic(flows=4, protos=["udp", "tcp"], count=12))
    with Collection.load(SAMPLES / "xdp2.o", engine="tiered") as coll:
        p = coll.programs["xdp_prog2"]
        h = p.handle
        assert isinstance(h, prog_mod.XdpProg)
        stages = []
        assert h.jit_ready.wait(120) and h.jit_error is None
        for _ in range(2):
            stages.append(([(r.retval, r.data_out) for r in map(p.test_run, pkts)],
                           h.engine, h._opt_level))
            o2_may_build.set()
            assert h.jit_optimised.wait(120) and h.jit_error is None
        assert [s[1:] for s in stages] == [("jit", QUICK), ("jit", 2)]
        assert stages[0][0] == stages[1][0]
        assert coll.maps["rxcnt"].sum(17) == 2 * sum(1 for x in pkts if x[23] == 17)
    with Collection.load(SAMPLES / "xdp2.o", engine="interp") as ref:
        want = [(r.retval, r.data_out) for r in map(ref.programs["xdp_prog2"].test_run, pkts)]
    assert stages[0][0] == want


CHILD = """
import json, sys
from pyxdp.collection import Collection
from pyxdp.net import prog
prog.QUICK_FIRST_INSNS = 1
with Collection.load(sys.argv[1], engine=sys.argv[2]) as coll:
    h = coll.programs["xdp_prog2"].handle
    assert sys.argv[2] != "tiered" or h.jit_optimised.wait(120)
    coll.programs["xdp_prog2"].test_run(bytes(64))
    print(json.dumps([h.engine, h._opt_level, h.vm.code.from_disk]))
"""


def test_o2_code_on_disk_is_taken_at_once(tmp_path: Path) -> None:
    """A process that finds a large program's -O2 image on disk (another process built
    it) runs it at once, without building QUICK code first."""
    env = dict(os.environ, PYXDP_JIT_CACHE=str(tmp_path), PYTHONPATH=str(SAMPLES.parent))

    def child(engine: str) -> list[object]:
        res = subprocess.run([sys.executable, "-c", CHILD, str(SAMPLES / "xdp2.o"), engine],
                             env=env, capture_output=True, text=True, timeout=120, check=True)
        out: list[object] = json.loads(res.stdout)
        return out

    assert child("jit") == ["jit", 2, False]
    assert child("tiered") == ["jit", 2, True]


def test_the_interpreter_never_waits_for_llvm() -> None:
    """Loading and running programs on the interpreter imports no LLVM (nor numba, nor
    AF_XDP's buffer pool): a tiered program's first packet does not wait for them (the
    JIT thread loads LLVM; the pool comes with the first AF_XDP socket)."""
    code = """
import sys
from pyxdp.collection import Collection
for name in sys.argv[1:]:
    with Collection.load(name, engine="interp") as coll:
        next(iter(coll.programs.values())).test_run(bytes(64))
print(sorted(m for m in ("llvmlite", "numba", "pyxdp.vm.jit.engine", "pyxdp.net.xsk_buff_pool")
             if m in sys.modules))
"""
    env = dict(os.environ, PYTHONPATH=str(SAMPLES.parent))
    res = subprocess.run([sys.executable, "-c", code, *(str(SAMPLES / n) for n in
                                                        ("xdp1.o", "core.o"))],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    assert res.stdout.split("\n")[0] == "[]"
