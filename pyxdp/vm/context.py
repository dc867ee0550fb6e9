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
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pyxdp.vm.interpreter import Helper, HelperFn, HelperTable
from pyxdp.vm.memory import Region
from pyxdp.vm.random32 import RndState

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["BASE_HELPERS", "SCRATCH_BASE", "TRACE_RING_BYTES", "RunContext", "TraceLog", "helper",
           "neg"]

M64 = 0xFFFF_FFFF_FFFF_FFFF
# Scratch memory for keys handed to callbacks (bpf_for_each_map_elem).
SCRATCH_BASE = 0x0000_5000_0000_0000


def neg(err: int) -> int:
    """``-err`` as the unsigned 64-bit r0 a helper returns."""
    return (-err) & M64


# The ring bpf_trace_printk's native twin appends to (one per TraceLog): a u64 of bytes
# used, then records of a u16 length and the formatted bytes (bstr_printf's output,
# NUL included). Full, the twin leaves the call to the Python helper, which drains it.
TRACE_RING_BYTES = 1 << 16


class TraceLog:
    """Where ``bpf_trace_printk`` lines go (the trace pipe): kept in order, optionally
    echoed to a callback. The JIT's twin appends records to its ring (:attr:`address`);
    every read of :attr:`lines` and every Python write drains them first: one order
    (the twin runs under the host lock: its helper is ``serial``)."""

    def __init__(self, sink: Callable[[str], None] | None = None) -> None:
        self._lines: list[str] = []
        self.sink = sink
        self._ring: np.ndarray | None = None  # made when native code first asks

    @property
    def address(self) -> int:
        """The ring's host address (for native code)."""
        if self._ring is None:
            self._ring = np.zeros(TRACE_RING_BYTES, np.uint8)
        return int(self._ring.ctypes.data)

    @property
    def lines(self) -> list[str]:
        self._drain()
        return self._lines

    def write_raw(self, text: bytes) -> None:
        """One ``bstr_printf`` output (NUL included): the line the trace pipe shows."""
        self.write(self._line(text))

    def write(self, line: str) -> None:
        self._drain()
        self._append(line)

    def _append(self, line: str) -> None:
        self._lines.append(line)
        if self.sink is not None:
            self.sink(line)

    @staticmethod
    def _line(text: bytes) -> str:
        return text.rstrip(b"\0").decode("latin-1").rstrip("\n")

    def _drain(self) -> None:
        ring = self._ring
        if ring is None:
            return
        used = int(ring[:8].view(np.uint64)[0])
        if not used:
            return
        data = ring[8:8 + used].tobytes()
        ring[:8] = 0
        at = 0
        while at < used:
            n = int.from_bytes(data[at:at + 2], "little")
            self._append(self._line(data[at + 2:at + 2 + n]))
            at += 2 + n


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
    # Fib; typed loosely because the vm layer does not import net); when None, the
    # first helper needing one takes ``net_of.fib`` (test_run's environment, which
    # makes its namespace on demand), or a fresh one without ``net_of``.
    fib: Any = None
    net_of: Any = None
    # bpf_redirect_xsk (an XDP helper): (ifindex, queue) -> the AF_XDP socket bind()
    # registered on that rx queue, or None; and the same for native code, a uint64
    # numpy array indexed by ifindex with one bit per queue below 64 (None: ask the
    # lookup).
    xsk_lookup: Callable[[int, int], Any] | None = None
    xsk_table: Any = None


BASE_HELPERS = HelperTable()
# bpf_timer_* load with the first program calling one (with the async callbacks' model).
BASE_HELPERS.defer("pyxdp.vm.bpf_timer", "TIMER_HELPERS", (169, 170, 171, 172))


def helper(helper_id: int, name: str, table: MutableMapping[int, Helper] | None = None
           ) -> Callable[[HelperFn], HelperFn]:
    """Register ``fn`` as helper ``helper_id`` (``bpf_<name>``)."""

    def deco(fn: HelperFn) -> HelperFn:
        (BASE_HELPERS if table is None else table)[helper_id] = Helper(helper_id, name, fn)
        return fn

    return deco
