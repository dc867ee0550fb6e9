"""The bpf_conformance plugin protocol: program hex on stdin, memory hex in argv[1]."""

from __future__ import annotations

import subprocess
import sys

from pyxdp.asm.insn import encode
from pyxdp.asm.macros import exit_insn, ldx_mem, mov64_reg


def plugin(program: bytes, mem: str | None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pyxdp.testing.plugin"] + ([mem] if mem is not None else [])
    return subprocess.run(argv, input=program.hex(), capture_output=True, text=True, timeout=60)


def test_plugin_reads_memory_and_prints_r0_hex() -> None:
    res = plugin(encode([ldx_mem(2, 0, 1, 1), exit_insn()]), "00 34 12 ff")
    assert res.returncode == 0 and res.stdout.strip() == "1234"


def test_plugin_r2_is_memory_length() -> None:
    res = plugin(encode([mov64_reg(0, 2), exit_insn()]), "0001020304")
    assert res.stdout.strip() == "5"


def test_plugin_reports_errors_on_stderr() -> None:
    res = plugin(encode([ldx_mem(8, 0, 1, 100), exit_insn()]), "00")
    assert res.returncode == 1 and "out-of-bounds" in res.stderr
    res = plugin(b"\xff" * 8, None)
    assert res.returncode == 1 and "invalid program" in res.stderr
