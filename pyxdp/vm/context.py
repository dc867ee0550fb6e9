"""The state around a program run that helpers read and change, and the base helper table.

:class:`RunContext` is what the kernel spreads over ``current``, per-CPU data
(``bpf_redirect_info``, the tail call count) and the program's ``bpf_run_ctx``;
:data:`BASE_HELPERS` is ``bpf_base_func_proto``'s table, filled by
:mod:`pyxdp.vm.helpers` and :mod:`pyxdp.vm.helpers_more` through :func:`helper`.
Both helper modules import this one (and not each other's registration), so
the table has one owner and no import runs in a circle.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyxdp.vm.interpreter import Helper, HelperFn
from pyxdp.vm.memory import Region
from pyxdp.vm.random32 import RndState

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["BASE_HELPERS", "SCRATCH_BASE", "RunContext", "TraceLog", "helper", "neg"]

M64 = 0xFFFF_FFFF_FFFF_FFFF
# Scratch memory for keys handed to callbacks (bpf_for_each_map_elem).
SCRATCH_BASE = 0x0000_5000_0000_0000


def neg(err: int) -> int:
    """``-err`` as the unsigned 64-bit r0 a helper returns."""
    return (-err) & M64


class TraceLog:
    """Where ``bpf_trace_printk`` lines go: kept in order, optionally echoed to a callback."""

    def __init__(self, sink: Callable[[str], None] | None = None) -> None:
        self.lines: list[str] = []
        self.sink = sink

    def write(self, line: str) -> None:
        self.lines.append(line)
        if self.sink is not None:
            self.sink(line)


@dataclass
class RunContext:
    """The kernel state around one program run that helpers read and change."""

    cpu: int = 0
    trace: TraceLog = field(default_factory=TraceLog)
    # bpf_get_prandom_u32's struct rnd_state (Linux's is per CPU): the Python helper and
    # the JIT's twin step the same words.
    rnd: RndState = field(default_factory=RndState)
    # Set for XDP runs (by the network layer): the xdp_buff and struct bpf_redirect_info.
    xdp: Any = None
    ri: Any = None
    tail_call_cnt: int = 0
    # bpf_tail_call(ctx, prog_array, index): runs the target, returns its r0 (None: failed).
    tail_call: Callable[[Interpreter, int, int], int | None] | None = None
    clock_ns: Callable[[], int] = time.monotonic_ns
    scratch: list[Region] = field(default_factory=list)
    # The network namespace bpf_fib_lookup/bpf_check_mtu consult (the network layer's
    # Fib; typed loosely because the vm layer does not import net).
    fib: Any = None
    # bpf_redirect_xsk (an XDP helper): (ifindex, queue) -> the AF_XDP socket bind()
    # registered on that rx queue, or None; and the same for native code, a uint64
    # numpy array indexed by ifindex with one bit per queue below 64 (None: ask the
    # lookup).
    xsk_lookup: Callable[[int, int], Any] | None = None
    xsk_table: Any = None


BASE_HELPERS: dict[int, Helper] = {}


def helper(helper_id: int, name: str, table: dict[int, Helper] | None = None
           ) -> Callable[[HelperFn], HelperFn]:
    """Register ``fn`` as helper ``helper_id`` (``bpf_<name>``)."""

    def deco(fn: HelperFn) -> HelperFn:
        (BASE_HELPERS if table is None else table)[helper_id] = Helper(helper_id, name, fn)
        return fn

    return deco
