"""The bpf_conformance plugin protocol: program hex on stdin, memory hex in argv[1], options
(``--engine interp|jit``, ``--elf``) anywhere after it; r0 in hex on stdout, or one error
line that the runner compares with the vector's ``-- error`` text."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pyxdp.asm.assembler import assemble
from pyxdp.asm.insn import encode
from pyxdp.asm.macros import exit_insn, ldx_mem, mov64_reg
from pyxdp.testing import plugin as plugin_mod
from pyxdp.testing.conformance import find_vectors
from pyxdp.testing.vectorgen import BUILTIN_DIR


def plugin(program: bytes, mem: str | None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pyxdp.testing.plugin"] + ([mem] if mem is not None else [])
    return subprocess.run(argv, input=program.hex(), capture_output=True, text=True, timeout=60)


def call(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
         stdin: str, *argv: str) -> tuple[int, str, str]:
    """The plugin in this process: (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    rc = plugin_mod.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def runner_text(rc: int, out: str, err: str) -> str:
    """What bpf_conformance's runner compares: stdout's lines joined, else stderr's."""
    text = "".join(out.splitlines())
    if rc != 0 and not text:
        text = "".join(err.splitlines())
    return text


def test_plugin_reads_memory_and_prints_r0_hex() -> None:
    res = plugin(encode([ldx_mem(2, 0, 1, 1), exit_insn()]), "00 34 12 ff")
    assert res.returncode == 0 and res.stdout.strip() == "1234"


def test_plugin_r2_is_memory_length(monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    prog = encode([mov64_reg(0, 2), exit_insn()]).hex()
    assert call(monkeypatch, capsys, prog, "0001020304") == (0, "5\n", "")


def test_plugin_reports_errors_on_stderr(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = call(monkeypatch, capsys, encode([ldx_mem(8, 0, 1, 100), exit_insn()]).hex(),
                        "00")
    # The verifier refuses it as Linux does: its reason is the error text.
    assert (rc, out) == (1, "") and err == "verifier: R1 offset is outside of the packet\n"
    # one unknown opcode and no exit: Linux's jump checks (check_subprogs) come first
    rc, out, err = call(monkeypatch, capsys, (b"\xff" * 8).hex())
    assert (rc, err) == (1, "verifier: last insn is not an exit or jmp\n")


@pytest.mark.parametrize("argv", [
    ("00 34 12 ff", "--engine", "jit"),
    ("00 34 12 ff", "--engine=jit"),
    ("--engine", "jit", "00 34 12 ff"),
    ("00 34 12 ff", "--engine", "interp"),
])
def test_plugin_engine_option_anywhere_after_memory(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        argv: tuple[str, ...]) -> None:
    prog = encode([ldx_mem(2, 0, 1, 1), exit_insn()]).hex()
    assert call(monkeypatch, capsys, prog, *argv) == (0, "1234\n", "")
    engine = "interp" if "interp" in argv else "jit"
    assert plugin_mod.parse_args(argv) == plugin_mod.PluginArgs(bytes.fromhex("00 34 12 ff"),
                                                                  engine)


def test_plugin_options_without_memory_are_not_memory(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The runner passes no memory argument for a vector without memory: its options come
    first then, and r2 must be 0."""
    prog = encode([mov64_reg(0, 2), exit_insn()]).hex()
    assert call(monkeypatch, capsys, prog, "--engine", "jit") == (0, "0\n", "")
    assert plugin_mod.parse_args(["--engine", "jit"]) == plugin_mod.PluginArgs(b"", "jit")


@pytest.mark.parametrize("argv, why", [
    (("00", "--engine", "llvm"), "unknown engine 'llvm'"),
    (("00", "--engine"), "--engine needs a value"),
    (("00", "--fast"), "unknown option '--fast'"),
    (("00", "01"), "a second memory argument"),
    (("zz",), "memory is not hex"),
])
def test_plugin_bad_command_line_one_line(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str],
                                          argv: tuple[str, ...], why: str) -> None:
    rc, out, err = call(monkeypatch, capsys, "95 00 00 00 00 00 00 00", *argv)
    assert rc == 2 and out == "" and why in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_plugin_matches_every_builtin_vector_as_the_runner_compares(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        engine: str) -> None:
    """Each shipped vector through the plugin, judged as bpf_conformance's runner judges:
    r0 equal to ``-- result``, or the error text equal to ``-- error``, character for
    character (pyxdp's vectors carry Linux's verifier refusal)."""
    vectors = list(find_vectors([BUILTIN_DIR]))
    assert sum(v.error is not None for v in vectors) >= 2
    for v in vectors:
        argv = ([" ".join(f"{b:02x}" for b in v.mem)] if v.mem else []) + ["--engine", engine]
        rc, out, err = call(monkeypatch, capsys, encode(v.program()).hex(), *argv)
        text = runner_text(rc, out, err)
        if v.error is not None:
            assert rc != 0 and text == v.error, v.name
        else:
            assert rc == 0 and int(text, 16) == v.result, v.name


def _clang() -> str:
    cc = shutil.which("clang-16") or shutil.which("clang")
    if cc is None:
        if os.environ.get("CI") == "true":
            pytest.fail("clang is needed to build the ELF input (.ci/run installs clang-16)")
        pytest.skip("no clang to build an ELF input")
    return cc


@pytest.mark.parametrize("section, extra", [
    (".text", ["--engine", "jit"]),        # the runner's default section and function
    ("xdp", []),                           # with the runner's --xdp_prolog
])
def test_plugin_elf_mode_runs_the_objects_main(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        section: str, extra: list[str]) -> None:
    attr = f'__attribute__((section("{section}"))) ' if section != ".text" else ""
    (tmp_path / "m.c").write_text(
        f"{attr}unsigned long main(unsigned char *mem, unsigned long len)\n"
        "{ return len * 256 + mem[1]; }\n")
    subprocess.run([_clang(), "-target", "bpf", "-O2", "-ffreestanding", "-Wno-main", "-c",
                    str(tmp_path / "m.c"), "-o", str(tmp_path / "m.o")], check=True, timeout=60)
    elf = (tmp_path / "m.o").read_bytes().hex(" ")
    assert call(monkeypatch, capsys, elf, "01 02 03", *extra, "--elf") == (0, "302\n", "")


def test_plugin_elf_mode_refuses_what_it_cannot_run(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from pyxdp import samples
    rc, _, err = call(monkeypatch, capsys, samples.path("xdp1.o").read_bytes().hex(), "--elf")
    assert rc == 2 and "has relocations" in err
    rc, _, err = call(monkeypatch, capsys,
                      samples.path("loader/multi_prog.v3.o").read_bytes().hex(), "--elf")
    assert rc == 2 and "no function main and not one function" in err
    rc, _, err = call(monkeypatch, capsys, encode(assemble("exit")).hex(), "--elf")
    assert rc == 2 and "ELF64 header" in err
