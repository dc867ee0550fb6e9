"""Checks that a run stays in machine code: how often chosen Python functions ran.

The JIT's native twins replace Python helpers per packet; a test holds them to
that by counting the calls of the Python reference functions during a run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from types import FrameType

__all__ = ["python_calls"]


def python_calls(fns: Iterable[Callable[..., object]], run: Callable[[], object]) -> int:
    """How often the code of ``fns`` runs in Python during ``run()``."""
    codes = {fn.__code__ for fn in fns}
    calls = 0

    def prof(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call" and frame.f_code in codes:
            calls += 1
    sys.setprofile(prof)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls
