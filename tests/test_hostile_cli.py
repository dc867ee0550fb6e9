"""Hostile input to the ``pyxdp`` command: endless files, huge or deep JSON, random bytes
as objects, out-of-range numbers. Each ends as one line on stderr with exit status 2 (or
a summary on Ctrl-C), never a traceback, a hang or unbounded memory."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pyxdp.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
XDP1 = str(ROOT / "samples" / "xdp1.o")
SEED = 0x14


def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's refusals
        rc = int(e.code or 0)
    err = capsys.readouterr().err
    assert rc == 2, (argv, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("pyxdp: ")
    return err


@pytest.fixture(scope="module")
def pkt(tmp_path_factory: pytest.TempPathFactory) -> str:
    from pyxdp.net.packets import udp_packet
    p = tmp_path_factory.mktemp("cli") / "pkt.bin"
    p.write_bytes(udp_packet(b"x"))
    return str(p)


@pytest.mark.parametrize("argv", [
    ["prog", "run", XDP1, "--data-in", "/dev/zero"],
    ["prog", "run", "/dev/zero", "--data-in", "PKT"],
    ["prog", "run", XDP1, "--data-in", "PKT", "--ctx-in", "/dev/zero"],
    ["prog", "run", XDP1, "--data-in", "PKT", "--maps", "/dev/zero"],
    ["prog", "show", "/dev/zero"],
    ["bench", "xdp", XDP1, "--packet", "/dev/zero"],
    ["map", "dump", "/dev/zero"],
], ids=["data-in", "obj", "ctx-in", "maps", "show", "packet", "map-dump"])
def test_endless_files_hit_the_size_limit(argv: list[str], pkt: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_line_error([pkt if a == "PKT" else a for a in argv], capsys)
    assert "64 MiB input file limit" in err


@pytest.mark.parametrize("repeat", ["4294967296", "-1", "1e3", "0x1_0000_0000"])
def test_repeat_beyond_the_kernels_u32_is_refused(repeat: str, pkt: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _one_line_error(["prog", "run", XDP1, "--data-in", pkt, f"--repeat={repeat}"], capsys)
    _one_line_error(["bench", "prog", XDP1, "--data-in", pkt, f"--repeat={repeat}"], capsys)


@pytest.mark.parametrize("runs", ["0", "-1"])
def test_bench_prog_needs_a_run(runs: str, pkt: str, capsys: pytest.CaptureFixture[str]) -> None:
    # found by the CLI fuzz: it measured once and printed a figure, as if --runs were 1
    err = _one_line_error(["bench", "prog", XDP1, "--data-in", pkt, "--engine", "interp",
                           f"--runs={runs}"], capsys)
    assert "--runs must be >= 1" in err


def _json_cases() -> list[bytes]:
    rng = random.Random(SEED)
    good = json.dumps({"rxcnt": [{"key": 17, "value": 40}]}).encode()
    cases = [b"[" * 100_000, b'{"rxcnt": [{"key": ' + b"[" * 50_000 + b"]" * 50_000 + b"}]}",
             b"\xff\xfe", b"[]", b'{"rxcnt": 5}', b'{"rxcnt": [5]}', b'{"nope": []}',
             b'{"rxcnt": [{"key": -1, "value": 1}]}', b'{"rxcnt": [{"key": 1e300, "value": 1}]}',
             b'{"rxcnt": [{"key": "zz", "value": 1}]}', b'{"rxcnt": [{"key": 1, "value": {}}]}',
             b'{"rxcnt": [{"key": 1, "value": 18446744073709551616}]}',
             b'{"rxcnt": [{"key": 99999, "value": 1}]}', b'{"rxcnt": [{"key": null, "value": 1}]}']
    for _ in range(6):  # the good document with a few bytes changed
        doc = bytearray(good)
        for _ in range(rng.randint(1, 3)):
            doc[rng.randrange(len(doc))] = rng.randrange(256)
        cases.append(bytes(doc))
    return cases


def test_hostile_map_json_is_one_line(tmp_path: Path, pkt: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from pyxdp.cli.prog import fill_maps
    from pyxdp.collection import Collection
    from pyxdp.elf import load_collection_spec
    from pyxdp.errors import PyxdpError
    from pyxdp.userspace import UserspaceBackend
    f = tmp_path / "maps.json"
    # Every document against one loaded object: a fill or pyxdp's error, nothing else.
    with Collection(load_collection_spec(XDP1), UserspaceBackend(engine="interp")) as coll:
        for doc in _json_cases():
            f.write_bytes(doc)
            try:
                fill_maps(coll, str(f))
            except PyxdpError as e:
                assert "\n" not in str(e), str(e)
    # And through the command, end to end: one line, exit 2.
    f.write_bytes(b"[" * 100_000)
    assert "nests deeper" in _one_line_error(["prog", "run", XDP1, "--data-in", pkt,
                                              "--maps", str(f)], capsys)


def test_random_objects_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    rng = random.Random(SEED)
    elf = (ROOT / "samples" / "xdp1.o").read_bytes()
    obj = tmp_path / "x.o"
    for n in range(12):
        if n % 2:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        else:
            data = bytearray(elf)
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(64)] = rng.randrange(256)  # the ELF header
            data = bytes(data)
        obj.write_bytes(data)
        for argv in (["prog", "show", str(obj)], ["prog", "disasm", str(obj)]):
            try:
                rc = main(argv)
            except SystemExit as e:
                rc = int(e.code or 0)
            out = capsys.readouterr()
            assert rc in (0, 2), out.err
            if rc == 2:
                assert len(out.err.strip().splitlines()) == 1 and "Traceback" not in out.err


def test_bare_pyxdp_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    out = capsys.readouterr().out
    assert out.startswith("usage: pyxdp") and "conformance" in out and "xsk" in out


def test_bench_xdp_stops_on_ctrl_c_with_a_summary() -> None:
    p = subprocess.Popen([sys.executable, "-m", "pyxdp.cli.main", "bench", "xdp", XDP1,
                          "--duration", "60", "--interval", "0.2"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        p.stdout.readline()  # the header
        p.stdout.readline()  # a first interval: the loop runs
        p.send_signal(signal.SIGINT)
        # Teardown may compile the cpumap drain on a cold machine-code cache (a fresh
        # clone after a change to the native sources): minutes on a busy machine.
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)
    assert p.returncode == 130, err
    last = out.strip().splitlines()[-1]
    assert last.startswith("interrupted after ") and " rx " in last and " drop " in last, out
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [["bench", "drop", "a" * 16, "--duration", "0.1"],
                                  ["bench", "redirect", "eth0", "b/c", "--duration", "0.1"]],
                         ids=["long", "slash"])
def test_bad_device_names_are_one_line(argv: list[str],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    # Found by fuzzing the command: the Host's ValueError escaped as a traceback.
    assert "bad device name" in _one_line_error(argv, capsys)


@pytest.mark.parametrize("argv,match", [
    (["packet", "udp", "--size", "4294967296"], "too large"),  # once built 4 GiB first
    (["bench", "xdp", "--duration", "inf"], "not a finite number"),  # never stopped
    (["dump", "--pcap", "x.pcap", "--duration", "nan"], "not a finite number"),
    (["monitor", "--count", "2", "-i", "1e23"], "longest wait"),  # time.sleep's OverflowError
    (["prog", "show", "/nonexistent/\udcff.o"], "\\udcff"),  # argv that is not UTF-8
], ids=["size", "inf", "nan", "sleep", "surrogate"])
def test_fuzzed_arguments_are_one_line(argv: list[str], match: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    # Found by fuzzing the command: the first two ran for hours, the last failed writing
    # its own error (UnicodeEncodeError) and printed a traceback.
    assert match in _one_line_error(argv, capsys)


def test_packet_arguments_found_by_round_three(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # Found by fuzzing packet specs: --count 100000000 --pcap built gigabytes of capture
    # for minutes; a payload argument that is not UTF-8 failed to encode (a traceback).
    out = str(tmp_path / "p.bin")
    err = _one_line_error(["packet", "icmp", "-o", out, "--pcap", "--count", "100000000"],
                          capsys)
    assert "64 MiB input limit" in err
    assert main(["packet", "udp", "-o", out, "--payload", "\udcff"]) == 0
    assert (tmp_path / "p.bin").read_bytes().endswith(b"\xff")  # the argument's own byte


def test_monitor_without_tracefs_access_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # A user who may not create a tracefs instance (not root) gets EACCES in one line.
    # (Root without capabilities may: tracefs checks file modes only, so it monitors.)
    import errno
    import os
    real = os.mkdir

    def mkdir(path: object, *args: object, **kw: object) -> None:
        if "instances" in str(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        real(path, *args, **kw)  # type: ignore[arg-type]
    monkeypatch.setattr(os, "mkdir", mkdir)
    assert "EACCES" in _one_line_error(["monitor", "--count", "1", "-i", "0.1"], capsys)


@pytest.mark.parametrize("argv", [
    ["prog", "run", XDP1, "--section=--", "--data-in", "PKT"],
    ["prog", "run", XDP1, "--data-in=--"],
    ["bench", "drop", "--packet-operation=--", "fz0"],
])
def test_a_double_dash_as_an_options_value_is_one_line(
        argv: list[str], pkt: str, capsys: pytest.CaptureFixture[str]) -> None:
    """argparse drops '--' given as '--opt=--' and handed the command an empty list."""
    err = _one_line_error([pkt if a == "PKT" else a for a in argv], capsys)
    assert "expected one argument" in err


def test_bench_frames_above_a_page_run_on_the_jit_engine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The native poll takes frames up to a page's room; larger generator frames go
    the Python poll's way (they raised ValueError from the native poll)."""
    rng = random.Random(SEED)
    big = tmp_path / "big.bin"
    big.write_bytes(bytes(rng.randrange(256) for _ in range(4097)))
    rc = main(["bench", "tx", "--packet", str(big), "--duration", "0.1", "--engine", "jit",
               "-j", "fz0"])
    out = capsys.readouterr()
    assert rc == 0 and "Traceback" not in out.err, out.err
    summary = json.loads(out.out.splitlines()[-1])
    # The summary is read while the worker may be inside a poll: its TX bulk can lag.
    assert summary["summary"] and 0 < summary["xmit"] <= summary["rx"]


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> str:
    from pyxdp.net.packets import udp_packet
    from pyxdp.net.pcap import PcapngWriter
    p = tmp_path_factory.mktemp("cap") / "in.pcapng"
    with open(p, "wb") as f:
        w = PcapngWriter(f)
        w.add_interface("eth0")
        w.write(udp_packet(b"x"), 0)
        w.close()
    return str(p)


@pytest.mark.parametrize("argv, want", [
    (["explain", XDP1, "--data-in", "PKT", "--topology", "/dev/zero"],
     "/dev/zero: larger than the 64 MiB topology file limit"),
    (["conformance", "/dev/zero"], "/dev/zero: not a .data file or a directory of them"),
    (["run", XDP1, "--pcap", "DIR"], "cannot open capture DIR: Is a directory"),
    (["run", XDP1, "--pcap", "CAP", "-w", "DIR"], "cannot write DIR: Is a directory"),
    (["run", XDP1, "--pcap", "CAP", "-w", "/dev/full"],
     "cannot write capture /dev/full: No space left on device"),
    (["dump", "-i", "eth0", "--prog", XDP1, "--pcap", "CAP", "-w", "DIR"],
     "cannot write DIR: Is a directory"),
    (["run", XDP1, "--pcap", "CAP", "--explain", "-w", "DIR"],
     "cannot write DIR: Is a directory"),
], ids=["topology", "conformance", "pcap-dir", "w-dir", "w-full", "dump-w-dir", "explain-w"])
def test_endless_devices_and_directories_are_one_line(
        argv: list[str], want: str, pkt: str, capture: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Found by giving every file argument a directory, /dev/zero and /dev/full (round 7):
    --topology /dev/zero read without end (the process was killed), conformance called
    /dev/zero "no such file", and capture and -w errors were Python's ("[Errno 21] Is a
    directory: '...'", a bare "No space left on device" without the file)."""
    sub = {"PKT": pkt, "CAP": capture, "DIR": str(tmp_path)}
    err = _one_line_error([sub.get(a, a) for a in argv], capsys)
    assert err.strip() == "pyxdp: " + want.replace("DIR", str(tmp_path))


def test_conformance_skips_what_is_no_regular_file(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import os
    os.mkfifo(tmp_path / "fifo.data")  # reading it would block the run for ever
    (tmp_path / "zero.data").symlink_to("/dev/zero")
    assert main(["conformance", str(tmp_path)]) == 0


def test_core_btf_of_an_endless_device_is_one_line() -> None:
    from pyxdp.collection import Collection
    from pyxdp.errors import ObjectError
    core = str(ROOT / "samples" / "core.o")
    for path, want in (("/dev/zero", "larger than 64 MiB: not a BTF file"),
                       ("a\0b", "embedded null byte")):
        with pytest.raises(ObjectError, match=want) as e:
            Collection.load(core, core_btf=path)
        assert "\n" not in str(e.value)


@pytest.mark.kernel
@pytest.mark.parametrize("argv, want", [
    (["features", "h7nosuch"], "pyxdp: features: h7nosuch: no such interface"),
    (["xsk", "rxdrop", "--dev", "h7nosuch", "--duration", "0.1"],
     "pyxdp: h7nosuch: no such interface"),
])
def test_missing_interfaces_are_named_once(argv: list[str], want: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Found by the round-7 CLI sweep: 'features: nosuch: nosuch: no such interface' and
    'cannot attach the program to nosuch: nosuch: no such interface'."""
    assert _one_line_error(argv, capsys).strip() == want
