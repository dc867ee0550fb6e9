"""The CPUs: ``smp_processor_id()`` (the CPU the calling thread runs on, as a syscall
it makes sees) and ``num_possible_cpus()`` (what per-CPU maps are sized by).

A small module of its own so that what needs a CPU number (BPF_PROG_TEST_RUN, the
tracepoints' event context, every per-CPU map) loads neither the tracepoints nor
the bpf(2) layer to get it.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from typing import Final

__all__ = ["current_cpu", "possible_cpus"]


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


def possible_cpus() -> int:
    """Number of possible CPUs: the per-CPU map value multiplier.

    Per-CPU map values are ``round_up(value_size, 8) * possible_cpus()``
    bytes at the syscall boundary.
    """
    try:
        with open("/sys/devices/system/cpu/possible", encoding="ascii") as fh:
            text = fh.read().strip()
    except OSError:
        return os.cpu_count() or 1
    total = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        total += (int(hi) if hi else int(lo)) - int(lo) + 1
    return total
