"""The Linux column of ``pyxdp bench datapath --vs-kernel`` (pyxdp.testing.kernel_datapath):
each path measured briefly on a veth pair in a namespace of its own returns a positive
rate, and the namespace is gone afterwards. Figures are not asserted (a benchmark)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pyxdp.testing import kernel_datapath as kd

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]


def _netns_names() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                         timeout=60).stdout
    return {ln.split()[0] for ln in out.splitlines() if ln.strip()}


def test_every_linux_path_returns_a_positive_rate() -> None:
    with kd.linux_paths() as lp:
        name = lp.netns
        assert name in _netns_names()
        runs = {p: getattr(lp, "pass_" if p == "pass" else p)(50_000) for p in kd.PATHS}
        # Both generic drivers work; the default is the faster one measured (see the docs).
        runs["generic packet"] = lp.generic(20_000, "packet")
    for path, r in runs.items():
        assert r.seconds > 0 and 0 < r.delivered <= r.frames + 1, (path, r)
        assert r.mpps > 0, path
    # The synchronous live-frames paths execute every frame within the call.
    assert all(runs[p].delivered == runs[p].frames for p in ("drop", "tx", "redirect", "pass"))
    assert name not in _netns_names()


def test_the_namespace_goes_away_on_error() -> None:
    with pytest.raises(RuntimeError), kd.linux_paths() as lp:
        name = lp.netns
        raise RuntimeError("boom")
    assert name not in _netns_names()


def test_bench_datapath_vs_kernel_json() -> None:
    res = subprocess.run([sys.executable, "-m", "pyxdp.cli.main", "bench", "datapath",
                          "--vs-kernel", "--paths", "drop,generic", "--runs", "1", "--frames",
                          "20000", "--json"], capture_output=True, text=True, timeout=600,
                         cwd=ROOT)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(ln) for ln in res.stdout.splitlines()]
    assert [r["path"] for r in rows] == ["drop", "generic"]
    for r in rows:
        assert r["linux_mpps"] > 0 and r["pyxdp_mpps"] > 0 and r["linux"]
        assert abs(r["ratio"] - r["pyxdp_mpps"] / r["linux_mpps"]) < 1e-9
