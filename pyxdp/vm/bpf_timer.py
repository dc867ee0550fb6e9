"""``bpf_timer``: the timer helpers of ``kernel/bpf/helpers.c`` and the hrtimer queue they arm.

A ``struct bpf_timer`` in a map value is a :class:`BpfHrtimer`, the timer kind of
:class:`~pyxdp.vm.bpf_async.BpfAsyncCb` (:mod:`pyxdp.vm.bpf_async` keeps them, with
init, set_callback, cancel-and-free and the callback's arguments shared with
``bpf_wq``); :data:`TIMERS` (a :class:`TimerQueue`) is the hrtimer queue that arms
them. The helpers, as Linux 6.18:

* ``bpf_timer_init(timer, map, flags)`` (169): the clock is ``flags``; only
  ``CLOCK_MONOTONIC``, ``CLOCK_REALTIME`` and ``CLOCK_BOOTTIME`` (``-EINVAL``
  otherwise, and for ``flags >= 16``); ``-EBUSY`` when already initialised;
  ``-EPERM`` once user space let go of the map (``Map.release_uref``).
* ``bpf_timer_set_callback(timer, cb)`` (170): ``-EINVAL`` before init,
  ``-EPERM`` without user references; the callback and the program it belongs
  to (a reference kept until cancel or free).
* ``bpf_timer_start(timer, nsecs, flags)`` (171): ``-EINVAL`` for flags other
  than ``BPF_F_TIMER_ABS``/``BPF_F_TIMER_CPU_PIN`` (checked first), before init
  or without a callback; relative or absolute expiry on the timer's clock,
  re-arming a queued timer (``hrtimer_start``).
* ``bpf_timer_cancel(timer)`` (172): ``-EINVAL`` before init, ``-EDEADLK``
  from the timer's own callback; else the callback and program are dropped
  (a later start needs a new ``set_callback``) and it returns 1 when the timer
  was queued, 0 when not (``hrtimer_cancel``).

``bpf_timer_cancel_and_free`` is :meth:`~pyxdp.vm.bpf_async.AsyncTable.cancel_and_free`:
the maps call it when an element holding a timer is deleted or overwritten
(array and hash updates, deletes, LRU evictions) and, for all their timers, when
user space releases them (a Collection's ``close``).

When callbacks run. Linux runs a due timer's callback from the hrtimer softirq
of the CPU it was armed on, ``callback(map, key, value)``. pyxdp runs them in
:meth:`TimerQueue.run`: each clock base in the kernel's order (MONOTONIC,
REALTIME, BOOTTIME), each base's due timers by expiry, on the CPU they were
started on, through the program that set the callback (its own engine:
interpreter or JIT). A pyxdp ``Host.run`` calls it between NAPI polls; a bare
Collection calls it through ``Collection.run_timers()``. Time comes from
:attr:`TimerQueue.clock`: the real clocks by default, or a :class:`VirtualClock`
that only moves when told (deterministic tests). A callback that re-arms its
timer for a time already past runs again in the next :meth:`TimerQueue.run`, not
in the same one (Linux would run it in the same softirq pass); nothing else
differs in order.
"""

from __future__ import annotations

import errno
import heapq
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

from pyxdp.vm.bpf_async import ASYNC, AsyncProgram, AsyncTable, BpfAsyncCb, async_owner
from pyxdp.vm.context import RunContext, helper
from pyxdp.vm.map_space import ProgramMap, map_at

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Helper, Interpreter

__all__ = ["BPF_F_TIMER_ABS", "BPF_F_TIMER_CPU_PIN", "CLOCK_BOOTTIME", "CLOCK_MONOTONIC",
           "CLOCK_REALTIME", "TIMERS", "TIMER_HELPERS", "BpfHrtimer", "Clock", "RealClock",
           "TimerQueue", "VirtualClock"]

CLOCK_REALTIME = 0
CLOCK_MONOTONIC = 1
CLOCK_BOOTTIME = 7
MAX_CLOCKS = 16
BPF_F_TIMER_ABS = 1
BPF_F_TIMER_CPU_PIN = 2
KTIME_MAX = (1 << 63) - 1
# hrtimer bases in the order __hrtimer_run_queues walks them.
_BASES = (CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME)
M64 = 0xFFFF_FFFF_FFFF_FFFF


class Clock(Protocol):
    """Where timers read the time: ``now(clockid)`` in nanoseconds."""

    def now(self, clockid: int) -> int: ...


class RealClock:
    """The host's clocks (``clock_gettime``), the default."""

    def now(self, clockid: int) -> int:
        return time.clock_gettime_ns(clockid)


class VirtualClock:
    """Clocks that move only when told: :meth:`advance` moves all three together.

    They start at the host's readings (so timers queued before a switch keep
    sensible expiries) unless ``start`` gives CLOCK_MONOTONIC's value."""

    def __init__(self, start: int | None = None) -> None:
        mono = time.clock_gettime_ns(CLOCK_MONOTONIC)
        self._offsets = {c: time.clock_gettime_ns(c) - mono for c in _BASES}
        self._mono = mono if start is None else start

    def now(self, clockid: int) -> int:
        return self._mono + self._offsets[clockid]

    def advance(self, ns: int) -> None:
        if ns < 0:
            raise ValueError("a virtual clock does not go back")
        self._mono += ns


@dataclass(eq=False)
class BpfHrtimer(BpfAsyncCb):
    """``struct bpf_hrtimer``: a bpf_async_cb with its clock and its place in the queue."""

    clockid: int = CLOCK_MONOTONIC
    expires: int | None = None  # on its clock; None: not queued
    seq: int = 0            # queue order of the current arming

    def dequeue(self) -> bool:
        queued = self.expires is not None
        self.expires = None  # its heap entry is stale now
        return queued


C = TypeVar("C", bound=Clock)


@dataclass(eq=False)
class TimerQueue:
    """The hrtimer bases of the process: armed bpf timers, run when due (see module doc)."""

    clock: Clock = field(default_factory=RealClock)
    table: AsyncTable = field(default_factory=lambda: ASYNC)
    _heaps: dict[int, list[tuple[int, int, int, BpfHrtimer]]] = field(
        default_factory=lambda: {c: [] for c in _BASES})
    _seq: int = 0

    @contextmanager
    def using(self, clock: C) -> Iterator[C]:
        """Read time from ``clock`` for the body (e.g. a :class:`VirtualClock` in a test)."""
        before, self.clock = self.clock, clock
        try:
            yield clock
        finally:
            self.clock = before

    # -- the helpers' operations --------------------------------------------------------
    def init(self, m: ProgramMap, timer: int, flags: int) -> int:
        clockid = flags & (MAX_CLOCKS - 1)
        if flags >= MAX_CLOCKS or clockid not in _BASES:
            return -errno.EINVAL
        return self.table.init(timer, m, getattr(m, "timer_off", None), "bpf_timer",
                               lambda mp, value: BpfHrtimer(mp, value, clockid=clockid))

    def set_callback(self, timer: int, callback: int, prog: AsyncProgram) -> int:
        return self.table.set_callback(timer, callback, prog)

    def start(self, timer: int, nsecs: int, flags: int, cpu: int) -> int:
        if flags & ~(BPF_F_TIMER_ABS | BPF_F_TIMER_CPU_PIN):
            return -errno.EINVAL
        with self.table.lock:
            t = self.table.get(timer, BpfHrtimer)
            if t is None or t.prog is None:
                return -errno.EINVAL
            ns = nsecs - (1 << 64) if nsecs >> 63 else nsecs  # ns_to_ktime: s64
            if not flags & BPF_F_TIMER_ABS:
                ns = min(ns + self.clock.now(t.clockid), KTIME_MAX)  # ktime_add_safe
            self._seq += 1
            t.expires, t.seq, t.cpu = ns, self._seq, cpu
            heapq.heappush(self._heaps[t.clockid], (ns, t.seq, id(t), t))
        return 0

    def cancel(self, timer: int) -> int:
        with self.table.lock:
            t = self.table.get(timer, BpfHrtimer)
            if t is None:
                return -errno.EINVAL
            if self.table.running is t:
                return -errno.EDEADLK
            t.reset()  # drop_prog_refcnt
            return int(t.dequeue())

    # -- the softirq -----------------------------------------------------------------
    def pending(self) -> int:
        """How many timers are queued."""
        with self.table.lock:
            return sum(1 for t in self.table.of_kind(BpfHrtimer) if t.expires is not None)

    def next_expiry(self, clockid: int = CLOCK_MONOTONIC) -> int | None:
        """The earliest expiry queued on ``clockid`` (None: nothing queued there)."""
        with self.table.lock:
            live = [t.expires for t in self.table.of_kind(BpfHrtimer)
                    if t.clockid == clockid and t.expires is not None]
            return min(live) if live else None

    def run(self) -> int:
        """Run the callbacks of every timer due now; returns how many ran. Timers armed
        while this runs wait for the next call."""
        heaps = self._heaps
        if not (heaps[CLOCK_MONOTONIC] or heaps[CLOCK_REALTIME] or heaps[CLOCK_BOOTTIME]):
            return 0  # nothing armed (Host.run asks after every round of polls)
        ran = 0
        with self.table.lock:
            limit = self._seq
            for clockid in _BASES:
                heap = self._heaps[clockid]
                now = self.clock.now(clockid)
                deferred = []
                while heap and heap[0][0] <= now:
                    entry = heapq.heappop(heap)
                    expires, seq, _, t = entry
                    if t.expires != expires or t.seq != seq:
                        continue  # cancelled, re-armed or freed since
                    if seq > limit:
                        deferred.append(entry)
                        continue
                    t.expires = None
                    ran += self.table.fire(t, "bpf_timer")  # bpf_timer_cb
                for entry in deferred:
                    heapq.heappush(heap, entry)
        return ran


TIMERS = TimerQueue()
"""The process's timer queue (every loaded program's timers)."""


# -- the helpers ----------------------------------------------------------------------------

# Their table: pyxdp.vm.context.BASE_HELPERS defers these ids to it (this module loads with
# the first program calling one).
TIMER_HELPERS: dict[int, Helper] = {}


def _cpu(vm: Interpreter) -> int:
    ctx = vm.context
    return ctx.cpu if isinstance(ctx, RunContext) else 0


@helper(169, "timer_init", TIMER_HELPERS)
def _timer_init(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    vm.mem.read(r1, 16)  # the struct bpf_timer must be program memory (a map value)
    return TIMERS.init(map_at(r2), r1, r3) & M64


@helper(170, "timer_set_callback", TIMER_HELPERS)
def _timer_set_callback(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return TIMERS.set_callback(r1, r2, async_owner(vm, "bpf_timer_set_callback")) & M64


@helper(171, "timer_start", TIMER_HELPERS)
def _timer_start(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return TIMERS.start(r1, r2, r3, _cpu(vm)) & M64


@helper(172, "timer_cancel", TIMER_HELPERS)
def _timer_cancel(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return TIMERS.cancel(r1) & M64

