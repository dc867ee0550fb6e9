"""pyxdp's datapath against Linux's, scenario by scenario (pyxdp.testing.vethlab).

Each scenario runs once on real veth pairs in a namespace of its own (native
XDP in the kernel) and on pyxdp's Host, three ways: recording every
tracepoint event (the Python poll: listeners see each event), with counters
only (where the native poll loop runs), and on the interpreter. What must
agree: the frames reaching each device's stack (bytes, and order where the
scenario is ordered), the dumped maps, the tracepoints - every event in
order when recorded, the event counts and field sums always - and every veth's
``ip -s link`` counters (``veth_get_stats64``: an skb from the peer counted by
the receiving NAPI 14 bytes short, a failed redirect or a refused XDP_TX frame
in ``rx_dropped``/``tx_dropped``, a frame the stack has no handler for in
``rx_dropped``). Page accounting is checked at every host's close.
"""

from __future__ import annotations

from functools import cache

import pytest

from pyxdp.testing import vethlab

pytestmark = pytest.mark.kernel


@cache
def _kernel(name: str) -> vethlab.LabResult:
    return vethlab.run_kernel(vethlab.SCENARIOS[name]())


@pytest.mark.parametrize("mode", ["events", "native", "python", "interp"])
@pytest.mark.parametrize("name", sorted(vethlab.SCENARIOS))
def test_pyxdp_matches_kernel(name: str, mode: str) -> None:
    """Every scenario on pyxdp against Linux: with a listener (events one by one), the
    JIT in the native poll loop, the JIT on the Python reference path (``python``:
    ``Host(native=False)``), the interpreter."""
    sc = vethlab.SCENARIOS[name]()
    want = _kernel(name)
    got = vethlab.run_pyxdp(sc, events=mode == "events",
                            engine="interp" if mode == "interp" else "auto",
                            native=mode != "python")
    diffs = vethlab.lab_differences(want, got, sc, links=True)
    if mode != "events":  # no recorded events to compare one by one
        diffs = [d for d in diffs if not d.startswith("events differ")]
        assert not got.events
    assert not diffs, "\n".join(diffs)
    # Not vacuous: the kernel did something in every scenario.
    assert any(want.rx.values()) or any(t.events for t in want.trace.values()) \
        or any(want.maps.values())


def test_bench_xdp_vs_kernel_prints_the_ratio() -> None:
    """``pyxdp bench xdp --vs-kernel``: pyxdp's rate, then Linux live frames with the same
    program and packet, and their ratio (figures not asserted: a benchmark)."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, "-m", "pyxdp.cli.main", "bench", "xdp",
                          str(root / "samples" / "xdp1.o"), "--duration", "0.4", "--interval",
                          "0.2", "--vs-kernel", "--json"], capture_output=True, text=True,
                         timeout=600, cwd=root)
    assert res.returncode == 0, res.stderr
    last = json.loads(res.stdout.splitlines()[-1])
    assert set(last) == {"kernel_mpps", "pyxdp_mpps", "ratio"}
    assert last["kernel_mpps"] > 0 and last["pyxdp_mpps"] > 0
    assert abs(last["ratio"] - last["pyxdp_mpps"] / last["kernel_mpps"]) < 1e-6
