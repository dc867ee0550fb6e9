"""``bpf_wq``: the workqueue kfuncs of ``kernel/bpf/helpers.c`` and the workqueue they use.

A ``struct bpf_wq`` in a map value is a :class:`BpfWork`, the work kind of
:class:`~pyxdp.vm.bpf_async.BpfAsyncCb` (:mod:`pyxdp.vm.bpf_async` keeps them, with
init, set_callback, cancel-and-free and the callback's arguments shared with
``bpf_timer``); :data:`WORKQUEUE` (a :class:`WorkQueue`) is ``system_wq``. The
kfuncs, as Linux 6.18:

* ``bpf_wq_init(wq, map, flags)``: ``-EINVAL`` for flags other than 0,
  ``-EBUSY`` when already initialised, ``-EPERM`` once user space let go of the
  map;
* ``bpf_wq_set_callback_impl(wq, cb, flags, aux__prog)``: ``-EINVAL`` for flags
  other than 0 and before init, ``-EPERM`` without user references; the verifier
  passes the program in ``aux__prog`` (whatever the program gave): pyxdp keeps
  the program that runs the call. Setting another callback before the work runs
  makes that one run (``bpf_wq_work`` reads the callback when it runs);
* ``bpf_wq_start(wq, flags)``: ``-EINVAL`` for flags other than 0, before init
  or without a callback; else ``schedule_work``: the work is queued unless it
  is queued already (then it still runs once), and 0.

Each returns an ``int``, zero-extended in r0 as Linux 6.18's x86 JIT leaves it.

The maps free an element's work when it is deleted or overwritten and all of
them when user space lets go of the map: queued work does not run then
(``bpf_wq_cancel_and_free`` drops the callback before ``cancel_work_sync``).

When callbacks run. Linux runs a work item from a kworker, soon after the
program that queued it, ``callback(map, key, value)``, sleepable, its return
value ignored. pyxdp runs queued work in :meth:`WorkQueue.run`, in the order it
was queued, through the program that set the callback (its own engine:
interpreter or JIT), each on the CPU it was queued on: ``Host.run`` calls it
between NAPI polls, a bare Collection through ``Collection.run_work()``. Work
a callback queues (its own, say) waits for the next :meth:`WorkQueue.run`.
"""

from __future__ import annotations

import errno
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyxdp.vm.bpf_async import ASYNC, AsyncTable, BpfAsyncCb, async_owner
from pyxdp.vm.context import RunContext
from pyxdp.vm.map_space import ProgramMap, map_at

if TYPE_CHECKING:
    # AsyncProgram: BpfWork's dataclass __init__ (inherited) names it; the API docs
    # resolve that annotation in this module.
    from pyxdp.vm.bpf_async import AsyncProgram  # noqa: F401
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["WORKQUEUE", "WQ_KFUNCS", "BpfWork", "WorkQueue"]

M32 = 0xFFFF_FFFF


@dataclass(eq=False)
class BpfWork(BpfAsyncCb):
    """``struct bpf_work``: a bpf_async_cb and whether it waits on the workqueue."""

    pending: bool = False   # WORK_STRUCT_PENDING

    def dequeue(self) -> bool:
        queued, self.pending = self.pending, False  # its queue entry is stale now
        return queued


@dataclass(eq=False)
class WorkQueue:
    """``system_wq``: queued bpf_wq work, run in order (see module doc)."""

    table: AsyncTable = field(default_factory=lambda: ASYNC)
    _queue: deque[BpfWork] = field(default_factory=deque)

    def init(self, m: ProgramMap, wq: int, flags: int) -> int:
        if flags:
            return -errno.EINVAL
        return self.table.init(wq, m, getattr(m, "wq_off", None), "bpf_wq", BpfWork)

    def set_callback(self, wq: int, callback: int, flags: int, prog: object) -> int:
        if flags:
            return -errno.EINVAL
        return self.table.set_callback(wq, callback, prog)  # type: ignore[arg-type]

    def start(self, wq: int, flags: int, cpu: int) -> int:
        if flags:
            return -errno.EINVAL
        with self.table.lock:
            w = self.table.get(wq, BpfWork)
            if w is None or w.prog is None:
                return -errno.EINVAL
            if not w.pending:  # schedule_work: once while queued
                w.pending, w.cpu = True, cpu
                self._queue.append(w)
        return 0

    def pending(self) -> int:
        """How many work items are queued."""
        with self.table.lock:
            return sum(1 for w in self._queue if w.pending)

    def run(self) -> int:
        """Run the work queued now, in order; returns how many callbacks ran."""
        queue = self._queue
        if not queue:
            return 0  # nothing queued (Host.run asks after every round of polls)
        ran = 0
        with self.table.lock:
            for _ in range(len(queue)):
                w = queue.popleft()
                if not w.pending:
                    continue  # cancelled and freed since
                w.pending = False  # a callback may queue it again
                ran += self.table.fire(w, "bpf_wq")  # bpf_wq_work
        return ran


WORKQUEUE = WorkQueue()
"""The process's workqueue (every loaded program's bpf_wq work)."""


# -- the kfuncs -----------------------------------------------------------------------------

def _cpu(vm: Interpreter) -> int:
    ctx = vm.context
    return ctx.cpu if isinstance(ctx, RunContext) else 0


def wq_init(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    vm.mem.read(r1, 16)  # the struct bpf_wq must be program memory (a map value)
    return WORKQUEUE.init(map_at(r2), r1, r3 & M32) & M32


def wq_set_callback(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return WORKQUEUE.set_callback(r1, r2, r3 & M32,
                                  async_owner(vm, "bpf_wq_set_callback_impl")) & M32


def wq_start(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return WORKQUEUE.start(r1, r2 & M32, _cpu(vm)) & M32


# The kfuncs by name (pyxdp.net.xdp_metadata.bind_kfuncs binds them). Linux 6.18 names
# the callback setter bpf_wq_set_callback_impl (later kernels: bpf_wq_set_callback).
WQ_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_wq_init": wq_init,
    "bpf_wq_set_callback_impl": wq_set_callback,
    "bpf_wq_start": wq_start,
}
