"""The ``pyxdp`` command: output lines users rely on, and one-line errors with exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyxdp.net.packets import udp_packet
from pyxdp.net.pcap import PcapngWriter, read_capture

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"


def pyxdp(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pyxdp.cli.main", *args], input=stdin and
                          stdin.decode("latin-1"), capture_output=True, text=True, timeout=300)


def test_conformance_ends_with_the_counts_line(vector_dir: Path) -> None:
    res = pyxdp("conformance", str(vector_dir / "prime.data"), str(vector_dir / "lddw.data"))
    assert res.returncode == 0
    assert res.stdout.splitlines()[-1] == "2 passed, 0 failed, 0 skipped"


def test_conformance_without_a_path_runs_the_builtin_vectors() -> None:
    # After a plain install, with no external suite: the vectors shipped in the package.
    from pyxdp.testing.vectorgen import BUILTIN_DIR
    env = {k: v for k, v in os.environ.items() if k != "PYXDP_CONFORMANCE_DIR"}
    res = subprocess.run([sys.executable, "-m", "pyxdp.cli.main", "conformance"], env=env,
                         capture_output=True, text=True, timeout=300)
    n = len(list(BUILTIN_DIR.glob("*.data")))
    assert n >= 40 and res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines()[-1] == f"{n} passed, 0 failed, 0 skipped"


def test_conformance_failure_shows_expected_and_got(tmp_path: Path) -> None:
    bad = tmp_path / "bad.data"
    bad.write_text("-- asm\nmov %r0, 1\nexit\n-- result\n0x2\n")
    res = pyxdp("conformance", str(bad))
    assert res.returncode == 1
    assert "expected 0x2, got 0x1" in res.stdout
    assert res.stdout.splitlines()[-1] == "0 passed, 1 failed, 0 skipped"


@pytest.mark.parametrize("args", [
    ("conformance", "/nonexistent-dir"),
    ("prog", "run", str(SAMPLES / "xdp1.o"), "--data-in", "/nonexistent"),
    ("prog", "show", "/nonexistent.o"),
    ("prog", "show", str(ROOT / "README.md")),
    ("prog", "run", str(SAMPLES / "xdp1.o")),
    ("frobnicate",),
    ("prog", "disasm", str(SAMPLES / "xdp1.o"), "-s", "nope"),
])
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...]) -> None:
    res = pyxdp(*args)
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith("pyxdp: ")


def test_prog_run_prints_bpftool_line_and_writes_data_out(tmp_path: Path) -> None:
    pkt = tmp_path / "pkt"
    pkt.write_bytes(udp_packet(b"hello"))
    out, maps = tmp_path / "out", tmp_path / "maps.json"
    res = pyxdp("prog", "run", str(SAMPLES / "xdp2.o"), "--data-in", str(pkt), "--data-out",
                str(out), "--repeat", "3", "--dump-maps", str(maps))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("Return value: 3, duration (average): ")
    assert out.read_bytes()[:6] == udp_packet(b"hello")[6:12]
    dump = json.loads(maps.read_text())
    # The runs count on the CPU the command ran on (BPF_PROG_TEST_RUN runs on the
    # caller's CPU), one slot of the per-CPU value.
    counts = next(e["value"] for e in dump["rxcnt"] if e["key"] == 17)
    assert sorted(counts) == [0] * (len(counts) - 1) + [3]


def test_prog_run_fills_maps_from_json(tmp_path: Path) -> None:
    pkt = tmp_path / "pkt"
    pkt.write_bytes(udp_packet(b"hello"))
    fill = tmp_path / "fill.json"
    fill.write_text(json.dumps({"rxcnt": [{"key": 17, "value": 40}]}))
    res = pyxdp("prog", "run", str(SAMPLES / "xdp1.o"), "--data-in", str(pkt),
                "--maps", str(fill), "--dump-maps", "-")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("Return value: 1, duration: ")
    doc = json.loads(res.stdout.split("\n", 1)[1])
    assert sum(next(e for e in doc["rxcnt"] if e["key"] == 17)["value"]) > 40


def test_run_over_a_capture_writes_verdicts(tmp_path: Path) -> None:
    cap = tmp_path / "in.pcapng"
    with PcapngWriter(cap) as w:
        w.add_interface("eth0")
        for n in range(5):
            w.write(udp_packet(b"x" * n), 1000 * n)
    out = tmp_path / "out.pcapng"
    res = pyxdp("run", str(SAMPLES / "xdp2.o"), "--pcap", str(cap), "-w", str(out))
    assert res.returncode == 0, res.stderr
    assert "XDP_TX       5" in res.stdout
    got = list(read_capture(out))
    assert len(got) == 5 and all(p.verdict == 3 for p in got)  # type: ignore[attr-defined]


def test_prog_show_and_disasm() -> None:
    res = pyxdp("prog", "show", str(SAMPLES / "lb.o"))
    assert "lb_ingress: section xdp" in res.stdout and "map conns: lru_hash" in res.stdout
    res = pyxdp("prog", "disasm", str(SAMPLES / "xdp1.o"))
    assert "; xdp1.c:" in res.stdout and "r3 = *(u32 *)(r1 +4)" in res.stdout


def test_xsk_on_pyxdp_prints_rates() -> None:
    res = pyxdp("xsk", "rxdrop", "--dev", "eth0", "--pyxdp", "--duration", "1.2", "--copy",
                "--redirect-xsk")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "pyxdp xsk rxdrop on eth0:0 (pyxdp copy, redirect_xsk, batch 64)"
    assert lines[1].startswith("eth0:0 rxdrop  rx ") and " Mpps" in lines[1]
    res = pyxdp("xsk", "l2fwd", "--dev", "eth1", "--queue", "1", "--pyxdp", "--duration", "1",
                "--zero-copy", "--json")
    assert res.returncode == 0, res.stderr
    row = json.loads(res.stdout.splitlines()[0])
    assert row["dev"] == "eth1:1" and row["rx_total"] > 0 and row["tx_total"] > 0


@pytest.mark.parametrize("args", [
    ("xsk", "rxdrop", "--dev", "eth0", "--redirect-xsk"),
    ("xsk", "rxdrop", "--dev", "eth0", "--pyxdp", "--batch", "0"),
    ("xsk", "txonly", "--dev", "eth0", "--pyxdp", "--duration", "0"),
    ("xsk", "l2fwd", "--dev", "eth0", "--pyxdp", "--queue", "-1"),
    ("xsk", "rxdrop"),
    ("xsk", "rxdrop", "--dev", "eth0", "--copy", "--zero-copy"),
    ("xsk", "fwd", "--dev", "eth0"),
])
def test_xsk_bad_arguments(args: tuple[str, ...]) -> None:
    res = pyxdp(*args)
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and res.stderr.startswith("pyxdp: ")
