"""bpf_task_work against Linux: samples/task_work.o run by BPF_PROG_TEST_RUN on Linux and
on pyxdp's interpreter and JIT, scheduling task work on the thread that runs the test
(see the sample's comment). Once the syscall has returned the callbacks have run (Linux
runs task work on the way back to user space): the maps must hold the same runs, keys
and return codes; twice (nothing is pending after a run), then with repeat=3, which
Linux ends with EINTR after the first repetition (the TWA_SIGNAL work is a pending
signal) - on both."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from pyxdp.collection import Collection
from pyxdp.errors import KernelError
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import jit_available

pytestmark = pytest.mark.kernel

TASK_WORK_O = Path(__file__).resolve().parents[2] / "samples" / "task_work.o"
MAPS = ("tws", "htws", "ltws")


def _runs(backend: str, engine: str = "interp") -> list[Any]:
    """The maps after each of two runs, then the errno and maps of a repeat=3 run."""
    out: list[Any] = []
    with Collection.load(TASK_WORK_O, backend, engine=engine) as coll:
        coll.maps["cfg"][0] = threading.get_native_id()
        prog = coll.programs["xdp_task_work"]
        for _ in range(2):
            assert prog.test_run(udp_packet(b"t")).retval == 2
            out.append({m: dict(sorted(coll.maps[m].items())) for m in MAPS})
        try:
            prog.test_run(udp_packet(b"t"), repeat=3)
            out.append(0)
        except KernelError as e:
            out.append(e.errno)
        out.append({m: dict(sorted(coll.maps[m].items())) for m in MAPS})
    return out


@pytest.fixture(scope="module")
def linux() -> list[Any]:
    return _runs("kernel")


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_task_work_matches_linux(engine: str, linux: list[Any]) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    assert _runs("userspace", engine) == linux
    # what the comparison covers: every callback ran once a run, with its key
    runs = {(m, k): (v["runs"], v["key_seen"]) for m, e in linux[1].items() for k, v in e.items()}
    assert runs == {("tws", 0): (2, 0), ("tws", 1): (2, 1), ("tws", 2): (0, 0),
                    ("htws", 5): (2, 5), ("ltws", 4): (2, 4)}
    assert linux[2] == 4  # EINTR
