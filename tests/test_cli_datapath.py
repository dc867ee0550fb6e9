"""``pyxdp bench xdp``, ``pyxdp bench seeds`` and ``pyxdp monitor --pyxdp``: the commands
that run pyxdp's datapath (their output shape and errors; no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"


def pyxdp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pyxdp.cli.main", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_bench_xdp_defaults_to_the_xdp1_sample_with_live_lines() -> None:
    """The README's main job: no OBJ, the xdp1 sample, a line per interval."""
    res = pyxdp("bench", "xdp", "--duration", "0.6", "--interval", "0.2")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("pyxdp bench xdp: xdp_prog1 (xdp1.o) on eth0 (native")
    rates = [ln for ln in lines[1:] if ln.startswith("eth0 rx")]
    assert len(rates) >= 2 and all("DROP" in ln for ln in rates)


@pytest.mark.parametrize("mode", ["native", "generic"])
def test_bench_xdp_json_counts_each_verdict(mode: str) -> None:
    res = pyxdp("bench", "xdp", str(SAMPLES / "xdp2.o"), "--mode", mode, "--duration", "0.4",
                "--interval", "0.2", "--json")
    assert res.returncode == 0, res.stderr
    rows = [json.loads(ln) for ln in res.stdout.splitlines()]
    assert rows and all(set(r) == {"rx", "aborted", "drop", "pass", "tx", "redirect"}
                        for r in rows)
    assert sum(r["tx"] for r in rows) > 0 and sum(r["drop"] for r in rows) == 0


@pytest.mark.parametrize("args, text", [
    (("bench", "xdp", "/nonexistent.o"), "/nonexistent.o"),
    (("bench", "xdp", "--duration", "0"), "--duration and --interval must be > 0"),
    (("bench", "xdp", "--mode", "offload"), "unknown mode 'offload' (choose from native, skb"),
    (("bench", "seeds", "--runs", "0"), "--frames and --runs must be > 0"),
    (("monitor", "--pyxdp", "/nonexistent.o", "--count", "1"), "/nonexistent.o"),
])
def test_errors_are_one_line(args: tuple[str, ...], text: str) -> None:
    res = pyxdp(*args)
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and text in res.stderr
    assert "Traceback" not in res.stderr


def test_bench_seeds_prints_a_row_per_claim() -> None:
    res = pyxdp("bench", "seeds", "--frames", "20000", "--runs", "1", "--json")
    assert res.returncode in (0, 1), res.stderr  # 1: a claim missed its goal
    rows = [json.loads(ln) for ln in res.stdout.splitlines()]
    assert {"native XDP_DROP vs generic XDP_DROP", "cpumap: skb lists vs one skb at a time",
            "xdp_frame return: bulk vs one by one"} <= {r["claim"] for r in rows}
    for r in rows:
        assert set(r) == {"claim", "seed", "goal", "pyxdp", "pass"}
        assert r["pyxdp"] > 0 and r["pass"] == (r["pyxdp"] >= r["goal"])


def test_monitor_runs_a_datapath_and_reports_its_tracepoints() -> None:
    res = pyxdp("monitor", "--pyxdp", str(SAMPLES / "xdp2.o"), "-i", "0.3", "--count", "2",
                "--json")
    assert res.returncode == 0, res.stderr
    reports = [json.loads(ln) for ln in res.stdout.splitlines()]
    assert [r["interval"] for r in reports] == [1, 2]
    assert all(r["source"] == "userspace" for r in reports)
    bulk = reports[-1]["events"]["xdp_bulk_tx"]
    assert bulk["rates"]["sent"] > 0 and bulk["rates"]["events"] > 0
    assert bulk["by_key"][0]["key"] == [2]  # eth0, the NIC transmitting


def test_monitor_table_for_a_datapath() -> None:
    res = pyxdp("monitor", "--pyxdp", str(SAMPLES / "xdp1.o"), "-i", "0.2", "--count", "1")
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert out[0].startswith("pyxdp monitor (userspace) interval 1")
    assert any(ln.startswith("  xdp_exception total") for ln in out)


# -- pyxdp bench datapath ----------------------------------------------------------------------

def test_bench_datapath_prints_a_line_per_path() -> None:
    res = pyxdp("bench", "datapath", "--paths", "drop,pass", "--runs", "1", "--frames", "2000")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("pyxdp bench datapath: Linux ") and "median of 1 runs" in lines[0]
    assert [ln.split(" pyxdp ")[0].strip() for ln in lines[1:]] == \
        ["XDP_DROP", "XDP_PASS to the stack"]
    assert all(ln.rstrip().endswith("Mpps") and "Linux" not in ln for ln in lines[1:])


def test_bench_datapath_json_rows_follow_paths() -> None:
    res = pyxdp("bench", "datapath", "--paths", "generic,drop,generic", "--runs", "2",
                "--frames", "2000", "--json")
    assert res.returncode == 0, res.stderr
    rows = [json.loads(ln) for ln in res.stdout.splitlines()]
    assert [r["path"] for r in rows] == ["generic", "drop"]  # asked order, once each
    for r in rows:
        assert {"path", "name", "pyxdp_mpps", "linux_mpps", "ratio", "runs"} <= set(r)
        assert r["pyxdp_mpps"] > 0 and r["runs"] == 2
        assert r["linux_mpps"] is None and r["ratio"] is None  # no --vs-kernel


@pytest.mark.parametrize("args, text", [
    (("--paths", "drop,bogus"), "--paths: unknown path bogus (choose from drop,tx,redirect,"),
    (("--paths", ","), "--paths: unknown path"),
    (("--runs", "0"), "--runs, --seconds and --frames must be > 0"),
    (("--seconds", "-1"), "--runs, --seconds and --frames must be > 0"),
    (("--frames", "0"), "--runs, --seconds and --frames must be > 0"),
    (("--runs", "x"), "invalid int value"),
])
def test_bench_datapath_bad_arguments(args: tuple[str, ...], text: str) -> None:
    res = pyxdp("bench", "datapath", *args)
    assert res.returncode == 2 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1 and text in res.stderr
    assert "Traceback" not in res.stderr


def test_bench_datapath_without_bpf_skips_the_linux_column(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """No root or no bpf(2): one line says why, the rows keep pyxdp's figure."""
    import pyxdp.kernel
    from pyxdp.cli.main import main
    monkeypatch.setattr(pyxdp.kernel, "bpf_available",
                        lambda: (False, "not root (bpf(2) returned EPERM)"))
    assert main(["bench", "datapath", "--vs-kernel", "--paths", "drop", "--runs", "1",
                 "--frames", "2000"]) == 0
    out, err = capsys.readouterr()
    assert err.strip() == ("pyxdp: the Linux column is skipped: needs root and BPF "
                           "(not root (bpf(2) returned EPERM))")
    row = out.splitlines()[1]
    assert row.startswith("XDP_DROP") and row.endswith("ratio pyxdp/kernel: -")
    assert "Linux        - Mpps" in row


def test_bench_datapath_skips_the_linux_column_when_its_setup_fails(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """bpf(2) works but the namespace cannot be made (no ip(8), no veth): one line, no
    traceback, pyxdp's column stays."""
    from contextlib import contextmanager

    import pyxdp.kernel
    from pyxdp.cli.main import main
    from pyxdp.errors import PyxdpError
    from pyxdp.testing import kernel_datapath

    @contextmanager
    def broken():  # type: ignore[no-untyped-def]
        raise PyxdpError("ip netns add pyxdp-kdp-1: Operation not permitted")
        yield

    monkeypatch.setattr(pyxdp.kernel, "bpf_available", lambda: (True, "bpf(2) available"))
    monkeypatch.setattr(kernel_datapath, "linux_paths", broken)
    assert main(["bench", "datapath", "--vs-kernel", "--paths", "drop", "--runs", "1",
                 "--frames", "2000", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err.strip() == ("pyxdp: the Linux column is skipped: ip netns add pyxdp-kdp-1: "
                           "Operation not permitted")
    row = json.loads(out)
    assert row["path"] == "drop" and row["pyxdp_mpps"] > 0 and row["linux_mpps"] is None
