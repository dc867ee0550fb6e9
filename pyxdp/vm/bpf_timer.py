"""``bpf_timer``: the timer helpers of ``kernel/bpf/helpers.c`` and the hrtimer queue they arm.

A ``struct bpf_timer`` lives in a map value (the verifier checks where); in
the kernel its first word points at a ``struct bpf_hrtimer`` that
``bpf_timer_init`` allocates. Here that object is a :class:`BpfHrtimer` kept by
the process-wide :data:`TIMERS` (a :class:`TimerQueue`), keyed by the
``struct bpf_timer``'s address (map windows are never reused, so an address
names one timer slot for the life of the process). The helpers, as Linux 6.18:

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

``bpf_timer_cancel_and_free`` is :meth:`TimerQueue.cancel_and_free`: the maps
call it when an element holding a timer is deleted or overwritten (array and
hash updates, deletes, LRU evictions) and, for all their timers, when user
space releases them (:meth:`TimerQueue.free_map`, a Collection's ``close``).

When callbacks run. Linux runs a due timer's callback from the hrtimer softirq
of the CPU it was armed on, ``callback(map, key, value)`` with the key
computed from the value's place (an array index as a u32, a hash element's own
key). pyxdp runs them in :meth:`TimerQueue.run`: each clock base in the
kernel's order (MONOTONIC, REALTIME, BOOTTIME), each base's due timers by
expiry, on the CPU they were started on, through the program that set the
callback (its own engine: interpreter or JIT). A pyxdp ``Host.run`` calls it
between NAPI polls; a bare Collection calls it through
``Collection.run_timers()``. Time comes from :attr:`TimerQueue.clock`: the
real clocks by default, or a :class:`VirtualClock` that only moves when told
(deterministic tests). A callback that re-arms its timer for a time already
past runs again in the next :meth:`TimerQueue.run`, not in the same one
(Linux would run it in the same softirq pass); nothing else differs in order.
"""

from __future__ import annotations

import errno
import heapq
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pyxdp.errors import HelperFault, ProgramFault
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.vm.context import SCRATCH_BASE, RunContext, helper
from pyxdp.vm.map_space import ProgramMap, map_at
from pyxdp.vm.memory import Region

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["BPF_F_TIMER_ABS", "BPF_F_TIMER_CPU_PIN", "CLOCK_BOOTTIME", "CLOCK_MONOTONIC",
           "CLOCK_REALTIME", "TIMERS", "AsyncProgram", "BpfHrtimer", "Clock", "RealClock",
           "TimerQueue", "VirtualClock"]

log = logging.getLogger(__name__)

CLOCK_REALTIME = 0
CLOCK_MONOTONIC = 1
CLOCK_BOOTTIME = 7
MAX_CLOCKS = 16
BPF_F_TIMER_ABS = 1
BPF_F_TIMER_CPU_PIN = 2
KTIME_MAX = (1 << 63) - 1
# hrtimer bases in the order __hrtimer_run_queues walks them.
_BASES = (CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME)
_ARRAY = int(BpfMapType.BPF_MAP_TYPE_ARRAY)
# The key a callback gets lives in scratch memory above bpf_for_each_map_elem's windows.
_KEY_BASE = SCRATCH_BASE + (0xFF << 32)
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


class AsyncProgram(Protocol):
    """A loaded program as a timer keeps it: runs ``func_addr`` (one of its callbacks) on
    its own, with ``args`` in r1-r3 and ``regions`` (the key) visible beside its maps."""

    def run_async_callback(self, func_addr: int, args: Sequence[int],
                           regions: Sequence[Region], cpu: int) -> None: ...


@dataclass(eq=False)
class BpfHrtimer:
    """``struct bpf_hrtimer``: the map and value it lives in, its clock, callback and state."""

    map: ProgramMap
    value: int              # the map value's address
    clockid: int
    prog: AsyncProgram | None = None
    callback: int = 0       # the callback's address (0: none)
    expires: int | None = None  # on its clock; None: not queued
    cpu: int = 0
    seq: int = 0            # queue order of the current arming


@dataclass
class _Fault:
    """A callback that faulted (a program loaded with ``verify=False``)."""

    timer: BpfHrtimer
    error: ProgramFault


C = TypeVar("C", bound=Clock)


@dataclass(eq=False)
class TimerQueue:
    """The hrtimer bases of the process: armed bpf timers, run when due (see module doc)."""

    clock: Clock = field(default_factory=RealClock)
    _timers: dict[int, BpfHrtimer] = field(default_factory=dict)
    _heaps: dict[int, list[tuple[int, int, int, BpfHrtimer]]] = field(
        default_factory=lambda: {c: [] for c in _BASES})
    _seq: int = 0
    _lock: threading.RLock = field(default_factory=threading.RLock)
    # hrtimer_running: the timer whose callback runs now.
    running: BpfHrtimer | None = None
    faults: list[_Fault] = field(default_factory=list)

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
        off = getattr(m, "timer_off", None)
        if off is None:
            raise HelperFault(f"bpf_timer_init: map {m.name or m.id} has no bpf_timer in its "
                              "value (the verifier checks this)")
        with self._lock:
            if timer in self._timers:
                return -errno.EBUSY
            if getattr(m, "uref_released", False):
                return -errno.EPERM
            self._timers[timer] = BpfHrtimer(m, timer - off, clockid)
        return 0

    def set_callback(self, timer: int, callback: int, prog: AsyncProgram) -> int:
        with self._lock:
            t = self._timers.get(timer)
            if t is None:
                return -errno.EINVAL
            if getattr(t.map, "uref_released", False):
                return -errno.EPERM
            t.prog, t.callback = prog, callback
        return 0

    def start(self, timer: int, nsecs: int, flags: int, cpu: int) -> int:
        if flags & ~(BPF_F_TIMER_ABS | BPF_F_TIMER_CPU_PIN):
            return -errno.EINVAL
        with self._lock:
            t = self._timers.get(timer)
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
        with self._lock:
            t = self._timers.get(timer)
            if t is None:
                return -errno.EINVAL
            if self.running is t:
                return -errno.EDEADLK
            t.prog, t.callback = None, 0  # drop_prog_refcnt
            queued = t.expires is not None
            t.expires = None  # its heap entry is stale now
            return int(queued)

    def cancel_and_free(self, timer: int) -> None:
        """``bpf_timer_cancel_and_free``: the element holding ``timer`` goes away."""
        with self._lock:
            t = self._timers.pop(timer, None)
            if t is not None:
                t.prog, t.callback, t.expires = None, 0, None

    def free_map(self, m: ProgramMap) -> None:
        """Every timer in ``m`` (``map_release_uref``: user space let go of the map)."""
        with self._lock:
            for addr in [a for a, t in self._timers.items() if t.map is m]:
                self.cancel_and_free(addr)

    # -- the softirq -----------------------------------------------------------------
    def pending(self) -> int:
        """How many timers are queued."""
        with self._lock:
            return sum(1 for t in self._timers.values() if t.expires is not None)

    def next_expiry(self, clockid: int = CLOCK_MONOTONIC) -> int | None:
        """The earliest expiry queued on ``clockid`` (None: nothing queued there)."""
        with self._lock:
            live = [t.expires for t in self._timers.values()
                    if t.clockid == clockid and t.expires is not None]
            return min(live) if live else None

    def run(self) -> int:
        """Run the callbacks of every timer due now; returns how many ran. Timers armed
        while this runs wait for the next call."""
        heaps = self._heaps
        if not (heaps[CLOCK_MONOTONIC] or heaps[CLOCK_REALTIME] or heaps[CLOCK_BOOTTIME]):
            return 0  # nothing armed (Host.run asks after every round of polls)
        ran = 0
        with self._lock:
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
                    ran += self._fire(t)
                for entry in deferred:
                    heapq.heappush(heap, entry)
        return ran

    def _fire(self, t: BpfHrtimer) -> int:
        """``bpf_timer_cb``: the callback with the map, the element's key and its value."""
        prog, callback = t.prog, t.callback
        if prog is None or not callback:
            return 0
        m = t.map
        if m.map_type == _ARRAY:
            key = ((t.value - m.value_region(0).base) // m.elem_size).to_bytes(4, "little")
        else:
            key_at = getattr(m, "key_at", None)
            if key_at is None:
                raise HelperFault(f"map {m.name or m.id} cannot hold a bpf_timer")
            key = key_at(t.value)
        region = Region(f"timer key of map {m.name or m.id}", _KEY_BASE, bytearray(key),
                        writable=False)
        self.running = t
        try:
            prog.run_async_callback(callback, (m.addr, region.base, t.value), [region], t.cpu)
        except ProgramFault as e:
            self.faults.append(_Fault(t, e))
            log.warning("bpf_timer callback of map %s: %s", m.name or m.id, e)
        finally:
            self.running = None
        return 1


TIMERS = TimerQueue()
"""The process's timer queue (every loaded program's timers)."""


# -- the helpers ----------------------------------------------------------------------------

def _cpu(vm: Interpreter) -> int:
    ctx = vm.context
    return ctx.cpu if isinstance(ctx, RunContext) else 0


@helper(169, "timer_init")
def _timer_init(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    vm.mem.read(r1, 16)  # the struct bpf_timer must be program memory (a map value)
    return TIMERS.init(map_at(r2), r1, r3) & M64


@helper(170, "timer_set_callback")
def _timer_set_callback(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    owner: Any = getattr(vm, "owner", None)
    if owner is None:
        raise HelperFault("bpf_timer_set_callback: the engine runs no loaded program (run "
                          "it through a Program, which runs the callback later)")
    return TIMERS.set_callback(r1, r2, owner) & M64


@helper(171, "timer_start")
def _timer_start(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return TIMERS.start(r1, r2, r3, _cpu(vm)) & M64


@helper(172, "timer_cancel")
def _timer_cancel(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return TIMERS.cancel(r1) & M64

