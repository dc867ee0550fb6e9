"""The command line's shared conventions (bpftool and xdp-tools): global -j/-p and --version,
one -m/--mode vocabulary, packets built by ``pyxdp packet``, ``run``'s summary, the
monitor's 80-column tables with sparklines, Ctrl-C summaries and ``--plot``."""

from __future__ import annotations

import argparse
import json
import struct
from pathlib import Path

import pytest

from pyxdp.cli.main import build_parser, main
from pyxdp.net.pcap import read_capture
from pyxdp.testing.vectorgen import BUILTIN_DIR

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"


def _json_lines(text: str) -> list[object]:
    return [json.loads(ln) for ln in text.splitlines() if ln.strip()]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from pyxdp import __version__
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"pyxdp {__version__}"


@pytest.mark.parametrize("argv", [
    ["-j", "prog", "show", str(SAMPLES / "xdp1.o")],
    ["prog", "show", str(SAMPLES / "xdp1.o"), "--json"],
    ["--json", "prog", "show", str(SAMPLES / "xdp1.o")],
])
def test_json_before_or_after_the_subcommand(argv: list[str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1  # one document on one line
    doc = json.loads(out)
    assert doc["programs"][0]["name"] == "xdp_prog1"
    assert doc["maps"][0] == {"name": "rxcnt", "type": "percpu_array", "bytes_key": 4,
                              "bytes_value": 8, "max_entries": 256, "flags": 0}


def test_pretty_indents_and_implies_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-p", "map", "show", str(SAMPLES / "lb.o")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[\n  {") and json.loads(out)[1]["name"] == "vips"
    # After the subcommand too, except where the subcommand owns -p (load -p PIN).
    assert main(["prog", "disasm", str(SAMPLES / "xdp2.o"), "--pretty"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc[0]["insns"][0]["pc"] == 0 and doc[0]["insns"][0]["text"]
    load = build_parser().parse_args(["load", "-p", "/sys/fs/bpf/x", "eth0", "x.o"])
    assert load.pin_path == "/sys/fs/bpf/x" and load.pretty is False


def _results_commands(tmp: Path) -> list[list[str]]:
    pkt = tmp / "pkt.bin"
    main(["packet", "udp", "-o", str(pkt)])
    cap = tmp / "in.pcapng"
    main(["packet", "udp", "--pcap", "--count", "3", "-o", str(cap)])
    return [
        ["prog", "show", str(SAMPLES / "lb.o")],
        ["prog", "verify", str(SAMPLES / "xdp1.o")],
        ["prog", "run", str(SAMPLES / "xdp2.o"), "--data-in", str(pkt)],
        ["run", str(SAMPLES / "xdp1.o"), "--pcap", str(cap)],
        ["map", "dump", str(SAMPLES / "xdp1.o"), "rxcnt"],
        ["map", "show", str(SAMPLES / "xdp1.o")],
        ["features", "--pyxdp", "eth0"],
        ["packet", "icmp", "-o", str(tmp / "icmp.bin")],
        ["explain", str(SAMPLES / "xdp2.o"), "--data-in", str(pkt)],
        ["bench", "prog", str(SAMPLES / "xdp1.o"), "--data-in", str(pkt), "--engine",
         "interp", "--repeat", "10", "--runs", "1"],
        ["status", "lo"],
        ["conformance", str(sorted(BUILTIN_DIR.glob("*.data"))[0])],
    ]


def test_every_results_command_honours_json(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    for argv in _results_commands(tmp_path):
        capsys.readouterr()
        assert main(["-j", *argv]) == 0, argv
        out = capsys.readouterr().out
        assert out.strip(), argv
        assert _json_lines(out), argv  # every line parses


def test_one_mode_vocabulary_everywhere() -> None:
    parser = build_parser()
    from pyxdp.cli.options import walk
    with_mode = [p for p in walk(parser) if "--mode" in p._option_string_actions]
    names = {p.prog.removeprefix("pyxdp ") for p in with_mode}
    assert {"load", "bench xdp", "monitor", "bench drop", "bench redirect-cpu"} <= names
    for p in with_mode:  # the same flag spelling everywhere
        assert p._option_string_actions["-m"] is p._option_string_actions["--mode"], p.prog
    cases = [(["load", "-m", "generic", "eth0", "x.o"], "skb"),
             (["load", "--mode", "hw", "eth0", "x.o"], "hw"),
             (["bench", "xdp", "-m", "generic"], "skb"),
             (["bench", "xdp", "--mode", "skb"], "skb"),
             (["monitor", "--pyxdp", "x.o", "-m", "generic"], "skb"),
             (["bench", "drop", "eth0", "-m", "native"], "native")]
    for argv, mode in cases:
        assert parser.parse_args(argv).mode == mode, argv


def test_hw_only_where_it_applies(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["bench", "xdp", "-m", "hw"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown mode 'hw' (choose from native, skb" in err


def test_packet_builds_what_it_says(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.bin"
    assert main(["packet", "udp", "--src", "10.0.0.1", "--dst", "10.0.0.2", "--sport", "7",
                 "--dport", "53", "--vlan", "100", "--size", "90", "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"{out}: 90-byte udp frame"
    f = out.read_bytes()
    assert len(f) == 90 and f[12:14] == b"\x81\x00"
    assert struct.unpack("!H", f[14:16])[0] & 0xFFF == 100 and f[16:18] == b"\x08\x00"
    ip = f[18:]
    assert ip[9] == 17 and ip[12:16] == bytes([10, 0, 0, 1]) and ip[16:20] == bytes([10, 0, 0, 2])
    assert struct.unpack("!HH", ip[20:24]) == (7, 53)
    main(["packet", "tcp", "-6", "--flags", "SA", "-o", str(out)])
    f = out.read_bytes()
    assert f[12:14] == b"\x86\xdd" and f[20] == 6 and f[14 + 40 + 13] == 0x12  # SYN|ACK
    main(["packet", "icmp", "--reply", "--pcap", "--count", "2", "-o", str(out)])
    pkts = list(read_capture(str(out)))
    assert len(pkts) == 2 and pkts[0].data[23] == 1 and pkts[0].data[34] == 0  # echo reply


@pytest.mark.parametrize("argv, text", [
    (["packet", "udp", "--dport", "70000", "-o", "x"], "port 70000 is outside 0..65535"),
    (["packet", "udp", "--size", "20", "-o", "x"], "a 20-byte frame is too small"),
    (["packet", "udp", "--src", "10.0.0.1", "--dst", "::1", "-o", "x"], "different families"),
    (["packet", "tcp", "--vlan", "5000", "-o", "x"], "VLAN id 5000"),
])
def test_packet_errors_are_one_line(argv: list[str], text: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = int(e.code or 0)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and text in err, err


def test_run_prints_a_summary_and_maps_only_when_asked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = tmp_path / "in.pcapng"
    main(["packet", "udp", "--pcap", "--count", "4", "-o", str(cap)])
    capsys.readouterr()
    assert main(["run", str(SAMPLES / "xdp1.o"), "--pcap", str(cap)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "4 packets through xdp_prog1 (xdp):"
    assert "  XDP_DROP     4" in out and "{" not in out and len(out.splitlines()) == 6
    assert main(["run", str(SAMPLES / "xdp1.o"), "--pcap", str(cap), "--dump-maps", "-"]) == 0
    out = capsys.readouterr().out
    maps = json.loads(out[out.index("{"):])
    assert {"key": 17, "value": [4, 0]} in maps["rxcnt"] or \
        any(e["key"] == 17 and sum(e["value"]) == 4 for e in maps["rxcnt"])


def test_the_maps_format_is_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["run", "--help"], ["monitor", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        out = " ".join(capsys.readouterr().out.split())
        assert '{"MAP": [{"key": K, "value": V}, ...]}' in out, argv


# --------------------------------------------------------------------------
# The monitor's table: 80 columns, sparklines, Ctrl-C
# --------------------------------------------------------------------------

def test_tables_fit_80_columns_and_never_cut_units() -> None:
    import io

    from pyxdp.cli import monitor
    from pyxdp.net.trace import Tracer, TraceSession
    tracer = Tracer()
    session = TraceSession(tracer, clock=iter([0.0, 1.0]).__next__)
    tracer.xdp_cpumap_kthread.fire(7, 123_456_789, 98_765_432, 1, 11_111_111, 22_222_222,
                                   33_333_333, cpu=1)
    iv = session.sample()
    table = monitor.rows(iv, stats=True, extended=True)
    wide = [cells for _, cells in table if len(cells) >= 6]
    assert wide  # the kthread rows carry six cells: too wide for one line
    hist = {label: monitor.sparkline([1, 5, 9, 3]) for label, _ in table}
    for render in (monitor._render_plain, monitor._render_rich):
        out = io.StringIO()
        render("title", table, out, hist)
        lines = out.getvalue().splitlines()
        assert max(len(ln) for ln in lines) <= 80, render
        text = out.getvalue()
        for unit in ("xdp_redir/s", "xdp_pass/s", "xdp_drop/s", "sched/s"):
            assert unit in text, (render, unit)  # whole units, on some continuation row
    assert monitor.sparkline([0, 5, 10]) == "▁▄█" and monitor.sparkline([0, 0]) == "▁▁"


def test_monitor_ctrl_c_prints_the_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from pyxdp.cli import monitor
    from pyxdp.net.trace import Tracer
    tracer = Tracer()
    calls = [0]

    def sleep(_: float) -> None:
        calls[0] += 1
        tracer.xdp_exception.fire(1, 0, 2, n=10)
        if calls[0] == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(monitor.time, "sleep", sleep)
    out = io.StringIO()
    assert monitor.run(interval=0.01, kernel=False, tracer=tracer, out=out, rich=False) == 130
    text = out.getvalue()
    assert text.count("interval ") == 2 and "interrupted: 2 intervals" in text
    summary = text[text.index("interrupted"):]
    assert "    ABORTED " in summary


# --------------------------------------------------------------------------
# Pictures
# --------------------------------------------------------------------------

def test_plot_without_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import sys
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if absent
    assert main(["bench", "drop", "eth0", "--duration", "1", "--plot", "x.svg"]) == 2
    err = capsys.readouterr().err
    assert err == "pyxdp: --plot needs matplotlib: pip install 'pyxdp[plot]'\n"


def test_plots_draw_rates_and_bars_against_linux(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plot extra (pyxdp[plot]) is not installed")
    from pyxdp.cli.datapath import plot_datapath
    from pyxdp.cli.plot import plot_rates
    rates = tmp_path / "rates.svg"
    plot_rates(str(rates), "t", [1.0, 2.0, 3.0], {"rx": [1.0, 1.2, 1.1]}, kernel_mpps=2.0)
    bars = tmp_path / "bars.svg"
    plot_datapath(str(bars), [{"name": "XDP_DROP", "pyxdp_mpps": 9.0, "linux_mpps": 7.0},
                              {"name": "XDP_TX", "pyxdp_mpps": 5.0, "linux_mpps": None}])
    for f in (rates, bars):
        text = f.read_text()
        assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert "Linux" in bars.read_text() and "median beside Linux" in rates.read_text()


def test_parser_globals_default_off() -> None:
    args = build_parser().parse_args(["status"])
    assert isinstance(args, argparse.Namespace) and args.json is False and args.pretty is False


def test_the_parser_loads_no_datapath() -> None:
    """``pyxdp --help`` (every command's parser) and ``import pyxdp`` load neither numpy
    nor the loader, the verifier, numba or LLVM: a command pays for what it runs (the
    parser used to import all of them, ~0.8 s before any command started)."""
    import subprocess
    import sys
    code = ("import sys, contextlib, io\n"
            "import pyxdp\n"
            "from pyxdp.cli.main import build_parser\n"
            "build_parser().format_help()\n"
            "heavy = ('numpy', 'numba', 'llvmlite', 'elftools', 'pyxdp.collection',\n"
            "         'pyxdp.verifier', 'pyxdp.net.prog', 'pyxdp.explain')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]", out.stdout
