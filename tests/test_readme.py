"""README.md stays true: its first two lines of shell are the install/run and test commands,
and every Python example in it runs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEXT = (ROOT / "README.md").read_text()


def test_readme_opens_with_the_two_commands() -> None:
    first = re.search(r"```sh\n(.*?)```", TEXT, re.S)
    assert first is not None
    lines = first.group(1).strip().splitlines()
    assert lines == ["pip install -e . && pyxdp bench xdp",
                     "pip install -e '.[test]' && python -m pytest"]
    assert "python -m pytest" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("block", re.findall(r"```python\n(.*?)```", TEXT, re.S))
def test_python_examples_run(block: str) -> None:
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        exec(compile(block, "README.md", "exec"), {})  # noqa: S102 - our own documentation
    finally:
        os.chdir(cwd)
