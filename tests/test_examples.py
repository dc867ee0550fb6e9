"""Every script in examples/ runs, from another directory, and prints what it promises."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
EXPECT = {
    "load_and_run.py": ["verdict XDP_TX, 47 bytes out",
                        "MACs swapped: 02:00:00:00:00:02 <- 02:00:00:00:00:01",
                        "UDP packets counted: 10"],
    "maps.py": ["-> 2 backends", "lb_ingress returned 3 - connections tracked: 1",
                "deleting twice: delete: ENOENT"],
    "datapath_devmap.py": ["eth0: 64 redirected", "veth0: 64 sent, veth1: 64 received",
                           "veth1: 0 dropped by XDP"],
    "af_xdp.py": ["received 100 packets of [64] bytes; rx_dropped 0"],
    "explain_journey.py": ["empty map: dropped at eth0: XDP_ABORTED",
                           "tx_port[0] = veth0: delivered at veth1 stack: UDP socket on port 53",
                           "xdp_devmap_xmit"],
}


def test_every_example_is_checked() -> None:
    assert sorted(p.name for p in EXAMPLES) == sorted(EXPECT)


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)                      # the samples come from pyxdp.samples
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    for line in EXPECT[script.name]:
        assert line in out, f"{script.name}: {line!r} not in\n{out}"
