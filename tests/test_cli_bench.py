"""xdp-bench's commands on pyxdp devices, the compile status line, Ctrl-C summaries, --plot
and ``monitor --pyxdp --maps --packet`` (output shapes and counts; no timing asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyxdp.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
SHORT = ["-i", "0.1", "--duration", "0.35"]


def _docs(out: str) -> list[dict[str, object]]:
    return [json.loads(ln) for ln in out.splitlines() if ln.strip()]


@pytest.mark.parametrize("argv, verdict, extra", [
    (["drop", "eth0"], "drop", None),
    (["pass", "eth0", "-p", "parse-ip"], "pass", None),
    (["tx", "eth0"], "tx", "xmit"),
    (["redirect", "eth0", "eth1", "-s"], "redirect", "xmit"),
    (["redirect-map", "eth0", "eth1"], "redirect", "xmit"),
    (["redirect-cpu", "eth0", "-c", "0", "-c", "1", "-p", "round-robin"], "redirect",
     "cpumap"),
])
def test_xdp_bench_commands(argv: list[str], verdict: str, extra: str | None,
                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-j", "bench", *argv, *SHORT]) == 0
    docs = _docs(capsys.readouterr().out)
    intervals, summary = docs[:-1], docs[-1]
    assert intervals and summary["summary"] is True and summary["interrupted"] is False
    assert summary["rx"] > 0 and summary[verdict] > 0  # type: ignore[operator]
    others = {"aborted", "drop", "pass", "tx", "redirect"} - {verdict}
    assert all(summary[v] == 0 for v in others), summary
    if extra is not None:
        assert summary[extra] > 0, summary  # type: ignore[operator]
    if "-s" in argv:
        assert summary["redirect_ok"] > 0  # type: ignore[operator]


def test_xdp_bench_text_extended_with_status_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "tx", "eth0", "-e", *SHORT]) == 0
    res = capsys.readouterr()
    assert res.err.startswith("compiling xdp_tx_swap_macs (JIT)...\n")
    lines = res.out.splitlines()
    assert lines[0] == "pyxdp bench tx: xdp_tx_swap_macs on eth0 (native), reports every 0.1 s"
    assert lines[1].startswith("Summary ") and lines[1].rstrip().endswith("xmit/s")
    assert any(ln.startswith("  XDP_TX ") for ln in lines)  # -e: the breakdown
    assert any(ln.startswith("  xdp_bulk_tx (XDP_TX)") for ln in lines)
    assert max(len(ln) for ln in lines) <= 80
    assert lines[-2].startswith("done after ") and lines[-1].startswith("Summary ")


def test_xdp_bench_ctrl_c_prints_the_summary(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from pyxdp.cli import xdp_bench
    real = xdp_bench._report
    calls = [0]

    def report(*a: object) -> None:
        calls[0] += 1
        if calls[0] == 2:
            raise KeyboardInterrupt
        real(*a)  # type: ignore[arg-type]

    monkeypatch.setattr(xdp_bench, "_report", report)
    assert main(["bench", "drop", "eth0", "-i", "0.1"]) == 130  # no --duration: until Ctrl-C
    out = capsys.readouterr().out.splitlines()
    assert out[-2].startswith("interrupted after ") and "(2 intervals)" in out[-2]
    assert out[-1].startswith("Summary ") and "rx/s" in out[-1]


def test_bench_xdp_status_line_modes_and_plot(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    try:
        import matplotlib  # noqa: F401
        plot = ["--plot", str(tmp_path / "rates.svg")]
    except ImportError:  # the plot extra is optional: the rest still holds
        plot = []
    assert main(["bench", "xdp", "-m", "generic", "--duration", "0.3", "--interval", "0.1",
                 *plot]) == 0
    res = capsys.readouterr()
    assert res.err.startswith("compiling xdp_prog1 (JIT)...\n")
    assert "on eth0 (skb, engine jit)" in res.out.splitlines()[0]
    if plot:
        assert "<svg" in (tmp_path / "rates.svg").read_text()
        assert res.err.rstrip().endswith(f"plot written to {tmp_path / 'rates.svg'}")


def test_monitor_pyxdp_fills_maps_and_sends_the_packet(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    pkt, maps = tmp_path / "pkt.bin", tmp_path / "maps.json"
    assert main(["packet", "udp", "--size", "128", "-o", str(pkt)]) == 0
    maps.write_text(json.dumps({"tx_port": [{"key": 0, "value": {"ifindex": 3}}]}))
    capsys.readouterr()
    assert main(["-j", "monitor", "--pyxdp", str(SAMPLES / "redirect_map.o"), "--maps",
                 str(maps), "--packet", str(pkt), "-i", "0.2", "--count", "2"]) == 0
    reports = _docs(capsys.readouterr().out)
    assert [r["interval"] for r in reports] == [1, 2]
    events = reports[-1]["events"]
    assert isinstance(events, dict)
    assert "xdp_exception" not in events  # tx_port[0] is eth1: no XDP_ABORTED
    xmit = events["xdp_devmap_xmit"]["by_key"][0]
    assert xmit["key"] == [2, 3] and xmit["sent"] > 0  # eth0 -> eth1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"nope": []}))
    assert main(["monitor", "--pyxdp", str(SAMPLES / "redirect_map.o"), "--maps",
                 str(bad), "--count", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the object has no map 'nope'" in err
    assert main(["monitor", "--maps", str(maps), "--count", "1"]) == 2
    assert "--maps goes with --pyxdp OBJ" in capsys.readouterr().err
