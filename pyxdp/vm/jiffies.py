"""The jiffies clock (kernel/time/jiffies.c, ``get_jiffies_64``): ticks of 1/HZ s since boot.

``bpf_jiffies64``, conntrack and flowtable timeouts and syncookie ages all read this one
clock, in Python and in machine code alike.
"""

from __future__ import annotations

import time

from pyxdp.vm.jit.ir import Text

__all__ = ["HZ", "NS_PER_JIFFY", "jiffies64", "jiffies64_ir"]

HZ = 250  # CONFIG_HZ of the kernels modelled
# A jiffy in ns is whole at every CONFIG_HZ choice, so ns // NS_PER_JIFFY is ns * HZ // 1e9
# exactly, and the machine code needs no 128-bit division (a libgcc call at -O0 that the
# JIT does not link).
NS_PER_JIFFY = 1_000_000_000 // HZ
assert NS_PER_JIFFY * HZ == 1_000_000_000
_CLOCK_BOOTTIME = 7  # Linux's clock id; jiffies count from boot


def jiffies64() -> int:
    """``get_jiffies_64()``."""
    return time.clock_gettime_ns(_CLOCK_BOOTTIME) // NS_PER_JIFFY


def jiffies64_ir(f: Text) -> str:
    """``get_jiffies_64()`` in machine code: the same boot clock, the same division."""
    ts = f.ins("alloca { i64, i64 }, align 8")
    f.do(f"call i32 @clock_gettime(i32 {_CLOCK_BOOTTIME}, ptr {ts})")
    sec = f.ins(f"load i64, ptr {ts}, align 8")
    nsec = f.ins(f"load i64, ptr {f.gep(ts, 8)}, align 8")
    ns = f.ins(f"add i64 {f.ins(f'mul i64 {sec}, 1000000000')}, {nsec}")
    return f.ins(f"udiv i64 {ns}, {NS_PER_JIFFY}")
