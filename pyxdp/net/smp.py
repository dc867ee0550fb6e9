"""``smp_processor_id()``: the CPU the calling thread runs on, as a syscall it makes sees.

Its own small module so that what needs the CPU number (BPF_PROG_TEST_RUN, the
tracepoints' event context) does not import the tracepoints to get it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Final

__all__ = ["current_cpu"]


def _load_getcpu() -> Callable[[], int]:
    try:
        fn = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):  # not glibc/musl on Linux: no CPU number
        return lambda: 0
    fn.restype = ctypes.c_int
    fn.argtypes = []
    return lambda: max(int(fn()), 0)


_getcpu: Final = _load_getcpu()


def current_cpu() -> int:
    """The CPU the calling thread runs on now (what smp_processor_id() reads in a
    syscall the thread makes); 0 where the C library cannot tell."""
    return _getcpu()
