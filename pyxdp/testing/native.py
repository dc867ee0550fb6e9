"""Checks that a run stays in machine code: how often chosen Python functions ran.

The JIT's native twins replace Python helpers per packet; a test holds them to
that by counting the calls of the Python reference functions during a run.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterable
from types import FrameType, ModuleType

__all__ = ["agree_natively", "python_calls"]


def python_calls(fns: Iterable[Callable[..., object] | ModuleType],
                 run: Callable[[], object]) -> int:
    """How often the code of ``fns`` runs in Python during ``run()``: a function's own
    code, or any code of a module's file (the whole Python reference of a kernel file)."""
    codes = set()
    files = set()
    for fn in fns:
        if isinstance(fn, ModuleType):
            files.add(fn.__file__)
        else:
            # a decorated function (pyxdp.args.checked): its own code, not the wrapper's
            codes.add(inspect.unwrap(fn).__code__)
    calls = 0

    def prof(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call" and (frame.f_code in codes or frame.f_code.co_filename in files):
            calls += 1
    sys.setprofile(prof)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


def agree_natively(run: Callable[[int, str], object],
                   fns: Iterable[Callable[..., object] | ModuleType]
                   ) -> None:
    """``run(seed, engine)`` gives the JIT's results the interpreter gives, over three
    seeds, and the JIT calls none of the Python helpers ``fns`` (their twins ran)."""
    for seed in range(3):
        assert run(seed, "jit") == run(seed, "interp")
    assert python_calls(fns, lambda: run(0, "jit")) == 0
