"""``bpf_task_work``: the task-work kfuncs of ``kernel/bpf/helpers.c`` (Linux 6.18).

A ``struct bpf_task_work`` in a map value is a :class:`BpfTaskWork`, a kind of
:class:`~pyxdp.vm.bpf_async.BpfAsyncCb` (:mod:`pyxdp.vm.bpf_async` keeps them, frees
them with their element and when user space lets go of the map, and runs their
callback with the map, key and value). ``bpf_task_work_schedule_signal_impl`` and
``bpf_task_work_schedule_resume_impl(task, tw, map__map, callback, aux__prog)``
schedule ``callback`` to run in ``task``'s context, as Linux 6.18 does:

* the context (``struct bpf_task_work_ctx``) is made on the first call; ``-EBUSY``
  once user space let go of the map, and while the work is scheduled and has
  not run yet (a second schedule, either mode, from the program or another);
* otherwise 0: the callback runs once, with the program that scheduled it (its
  own engine: interpreter or JIT), and the work may be scheduled again from
  then on (the callback itself may).

When the callback runs. Linux queues an irq_work that adds a task_work to the
task (``TWA_SIGNAL`` also kicks it with a signal, ``TWA_RESUME`` waits); the
task runs it on its way back to user space. For the task that runs the
program's ``BPF_PROG_TEST_RUN`` that is the syscall's return: every repetition
of the run sees the work pending, and the map holds the callback's writes once
the syscall has returned; work scheduled with ``TWA_SIGNAL`` on that task is a
pending signal, so a run with repetitions left ends with ``EINTR``
(``bpf_test_timer_continue``; the callbacks still run). pyxdp runs what is
scheduled in :meth:`TaskWorkQueue.run`, in the order it was scheduled:
``Program.test_run`` calls it as it returns (the test run's task returns to user
space), ``Host.run`` between NAPI polls (the tasks that NAPI's softirqs
interrupted return to user space soon after); the signal and resume modes behave
alike there. A work item an element's update or
delete (or the map's release) frees before then never runs.

Each returns an ``int``, zero-extended in r0 as Linux 6.18's x86 JIT leaves it.
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
    # AsyncProgram: BpfTaskWork's dataclass __init__ (inherited) names it; the API docs
    # resolve that annotation in this module.
    from pyxdp.vm.bpf_async import AsyncProgram
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["TASK_WORK", "TASK_WORK_KFUNCS", "BpfTaskWork", "TaskWorkQueue"]

M32 = 0xFFFF_FFFF
TWA_RESUME, TWA_SIGNAL = 1, 2  # enum task_work_notify_mode


@dataclass(eq=False)
class BpfTaskWork(BpfAsyncCb):
    """``struct bpf_task_work_ctx``: a bpf_async_cb, whether it is scheduled (any state
    but ``BPF_TW_STANDBY``), the task (a referenced ``task_struct`` address) and mode."""

    pending: bool = False
    task: int = 0
    mode: int = 0
    tid: int = 0  # the task's thread id (procfs's)

    def dequeue(self) -> bool:
        """``bpf_task_work_cancel_and_free``: a scheduled callback will not run."""
        queued, self.pending = self.pending, False
        _release_task(self)
        return queued


def _release_task(w: BpfTaskWork) -> None:
    """``bpf_task_work_ctx_reset``: the task's reference is dropped."""
    if w.task:  # a task: the task kfuncs' model is loaded (it made the task)
        from pyxdp.vm.task_kfuncs import kernel_objects

        ko = kernel_objects()
        with ko.locked():
            o = ko.at(w.task, "task", "bpf_task_work")
            o.refs = max(o.refs - 1, 0)
        w.task = 0


@dataclass(eq=False)
class TaskWorkQueue:
    """The scheduled task work of every task (see module doc)."""

    table: AsyncTable = field(default_factory=lambda: ASYNC)
    _queue: deque[BpfTaskWork] = field(default_factory=deque)

    def schedule(self, task: int, tw: int, m: ProgramMap, callback: int,
                 prog: AsyncProgram, mode: int, cpu: int) -> int:
        """``bpf_task_work_schedule``: 0, or -EBUSY (see module doc)."""
        from pyxdp.vm.task_kfuncs import kernel_objects  # (the kfuncs' model: on first use)

        ko = kernel_objects()
        with self.table.lock:
            with ko.locked():
                o = ko.at(task, "task", "bpf_task_work_schedule")  # bpf_task_acquire
                if getattr(m, "uref_released", False):
                    return -errno.EBUSY
                w = self.table.get(tw, BpfTaskWork)
                if w is None:  # bpf_task_work_fetch_ctx
                    self.table.init(tw, m, getattr(m, "task_work_off", None),
                                    "bpf_task_work", BpfTaskWork)
                    w = self.table.get(tw, BpfTaskWork)
                    assert w is not None
                if w.pending:
                    return -errno.EBUSY
                o.refs += 1
                w.tid = ko.procpid(o)
            w.pending, w.task, w.mode, w.cpu = True, task, mode, cpu
            w.prog, w.callback = prog, callback
            self._queue.append(w)
        return 0

    def pending(self) -> int:
        """How many callbacks are scheduled."""
        with self.table.lock:
            return sum(1 for w in self._queue if w.pending)

    def signal_pending(self, tid: int) -> bool:
        """``signal_pending(task)`` of thread ``tid``: task work scheduled for it with
        ``TWA_SIGNAL`` (``TIF_NOTIFY_SIGNAL``) interrupts the syscall it is in."""
        with self.table.lock:
            return any(w.pending and w.mode == TWA_SIGNAL and w.tid == tid
                       for w in self._queue)

    def run(self) -> int:
        """Run the callbacks scheduled now, in order; returns how many ran."""
        queue = self._queue
        if not queue:
            return 0  # nothing scheduled (test runs and Host.run ask every time)
        ran = 0
        with self.table.lock:
            for _ in range(len(queue)):
                w = queue.popleft()
                if not w.pending:
                    continue  # cancelled and freed since
                ran += self.table.fire(w, "bpf_task_work")  # bpf_task_work_callback
                w.pending = False  # BPF_TW_STANDBY: it may be scheduled again
                _release_task(w)
                w.reset()
        return ran


TASK_WORK = TaskWorkQueue()
"""The process's scheduled task work (every loaded program's)."""


# -- the kfuncs -----------------------------------------------------------------------------

def _schedule(mode: int, name: str) -> Callable[..., int]:
    def kfunc(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        owner = async_owner(vm, name)  # aux__prog: the program that runs the call
        vm.mem.read(r2, 8)  # the struct bpf_task_work must be program memory (a map value)
        ctx = vm.context
        cpu = ctx.cpu if isinstance(ctx, RunContext) else 0
        return TASK_WORK.schedule(r1, r2, map_at(r3), r4, owner, mode, cpu) & M32
    kfunc.__name__ = name
    return kfunc


# The kfuncs by name (pyxdp.net.xdp_metadata.bind_kfuncs binds them); both engines call
# them (scheduling is no per-packet path).
TASK_WORK_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_task_work_schedule_signal_impl": _schedule(TWA_SIGNAL,
                                                    "bpf_task_work_schedule_signal_impl"),
    "bpf_task_work_schedule_resume_impl": _schedule(TWA_RESUME,
                                                    "bpf_task_work_schedule_resume_impl"),
}
