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


_TEXT = {".py", ".md", ".c", ".h", ".toml", ".cfg", ".txt", ".json", ".sh", ".yml", ".yaml"}


def test_no_merge_conflict_markers() -> None:
    """A merge resolved in haste once left both sides of docs/CLI.md in place."""
    files = _run("git", "ls-files").stdout.split() if (ROOT / ".git").exists() else [
        str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()]
    bad = []
    for name in files:
        path = ROOT / name
        if path.suffix not in _TEXT or not path.is_file():
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if line.startswith(("<<<<<<< ", ">>>>>>> ")) or line == "=======":
                bad.append(f"{name}:{n}: {line}")
    assert not bad, "\n".join(bad)
