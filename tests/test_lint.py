"""The project's own hygiene: ruff over everything, mypy --strict over the core packages."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed")
def test_ruff_clean() -> None:
    res = _run("ruff", "check", "pyxdp", "tests", "bench", "examples", "docs")
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_strict_core() -> None:
    pytest.importorskip("mypy")
    res = _run(sys.executable, "-m", "mypy")
    assert res.returncode == 0, res.stdout + res.stderr
