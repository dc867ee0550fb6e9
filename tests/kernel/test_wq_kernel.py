"""bpf_wq against Linux: ``samples/wq.o`` queues work in array, hash and LRU hash map
values from one BPF_PROG_TEST_RUN (init/set_callback/start on every path: flags
!= 0, -EBUSY, a start before set_callback, a callback replaced before its work
runs, work cancelled by an element's update and delete, a callback queueing its
own work again); once the work has run (Linux: polled up to a second) the maps
hold the same runs, keys and return codes on Linux and on pyxdp's interpreter and
JIT (``Collection.run_work()`` until nothing is queued)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyxdp.net.prog import jit_available
from pyxdp.testing.wqlab import run_wq_sample

pytestmark = pytest.mark.kernel

WQ = Path(__file__).resolve().parents[2] / "samples" / "wq.o"


@pytest.fixture(scope="module")
def linux() -> tuple[int, dict[str, dict[object, object]]]:
    return run_wq_sample(WQ, "kernel")


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_wq_maps_match_linux(engine: str,
                             linux: tuple[int, dict[str, dict[object, object]]]) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    ret, maps = run_wq_sample(WQ, engine=engine)
    assert (ret, maps) == linux
    # What the comparison covers: every work item ran as often as the sample says.
    runs = {(m, k): v["runs"] for m, elems in maps.items() for k, v in elems.items()}
    assert runs == {("wqs", 0): 3, ("wqs", 1): 0, ("wqs", 2): 1, ("wqs", 3): 0,
                    ("hwqs", 5): 1, ("hwqs", 6): 0, ("lwqs", 4): 1}
    assert maps["wqs"][2]["cb_rc"][1] == 2  # the callback set last ran
