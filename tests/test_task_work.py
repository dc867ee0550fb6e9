"""bpf_task_work (pyxdp/vm/bpf_task_work.py) on both engines: samples/task_work.o schedules
callbacks on the test run's own thread; they run as Program.test_run returns (the
syscall's return to user space), once each, with their element's key; -EBUSY while one
is pending; an update or delete cancels one; a TWA_SIGNAL one interrupts a repeated run
(EINTR). tests/kernel/test_task_work_kernel.py holds the sample to Linux."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest

from pyxdp.asm.assembler import assemble
from pyxdp.collection import Collection
from pyxdp.errors import HelperFault, KernelError
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.vm.bpf_task_work import TASK_WORK, TASK_WORK_KFUNCS
from pyxdp.vm.interpreter import Interpreter

TASK_WORK_O = Path(__file__).resolve().parents[1] / "samples" / "task_work.o"
MAPS = ("tws", "htws", "ltws")


def _engines() -> list[str]:
    return ["interp", "jit"] if jit_available() else ["interp"]


def _seen(coll: Collection) -> dict[str, dict[int, tuple[int, int, list[int]]]]:
    return {m: {k: (v["runs"], v["key_seen"], v["rc"]) for k, v in sorted(coll.maps[m].items())}
            for m in MAPS}


@pytest.mark.parametrize("engine", _engines())
def test_task_work_sample(engine: str) -> None:
    with Collection.load(TASK_WORK_O, engine=engine) as coll:
        coll.maps["cfg"][0] = threading.get_native_id()
        prog = coll.programs["xdp_task_work"]
        for runs in (1, 2):  # the second run schedules them all again
            assert prog.test_run(udp_packet(b"t")).fault is None
            assert TASK_WORK.pending() == 0
            assert _seen(coll) == {
                "tws": {0: (runs, 0, [0, -errno.EBUSY, 0]), 1: (runs, 1, [0, 0, 0]),
                        2: (0, 0, [0, 0, 0])},
                "htws": {5: (runs, 5, [0, 0, 0])}, "ltws": {4: (runs, 4, [0, 0, 0])}}
        # TWA_SIGNAL work on the run's own task is a pending signal: the second
        # repetition never starts (the callbacks still run, once)
        with pytest.raises(KernelError, match="EINTR"):
            prog.test_run(udp_packet(b"t"), repeat=3)
        assert _seen(coll)["tws"][0] == (3, 0, [0, -errno.EBUSY, 0])


def test_task_work_released_map_is_busy() -> None:
    with Collection.load(TASK_WORK_O, engine="interp") as coll:
        coll.maps["cfg"][0] = threading.get_native_id()
        for m in MAPS:
            coll.maps[m].handle.release_uref()  # user space let go: nothing is scheduled
        coll.programs["xdp_task_work"].test_run(udp_packet(b"t"))
        assert _seen(coll)["tws"][0] == (0, 0, [-errno.EBUSY, -errno.EBUSY, 0])
        assert TASK_WORK.pending() == 0


def test_task_work_kfunc_needs_a_program() -> None:
    vm = Interpreter(assemble("r0 = 0\nexit"))
    with pytest.raises(HelperFault, match="runs no loaded program"):
        TASK_WORK_KFUNCS["bpf_task_work_schedule_signal_impl"](vm, 0x1234, 0, 0, 0, 0)
