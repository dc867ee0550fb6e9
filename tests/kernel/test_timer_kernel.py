"""bpf_timer against Linux: ``samples/timer.o`` arms timers in array and hash map values
from one BPF_PROG_TEST_RUN (init/set_callback/start/cancel on every path: -EBUSY,
-EINVAL, cancel of a queued timer, a callback re-arming its timer and cancelling
itself with -EDEADLK, a callback cancelling another element's timer, timers freed by
an element's update and delete); after 10 ms the maps hold the same fires, keys and
return codes on Linux and on pyxdp's interpreter and JIT (a virtual clock stepped
1 ms at a time, ``Collection.run_timers()`` after each step)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyxdp.net.prog import jit_available
from pyxdp.testing.timerlab import run_timer_sample

pytestmark = pytest.mark.kernel

TIMER = Path(__file__).resolve().parents[2] / "samples" / "timer.o"


@pytest.fixture(scope="module")
def linux() -> tuple[int, dict[str, dict[object, object]]]:
    return run_timer_sample(TIMER, "kernel")


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_timer_maps_match_linux(engine: str,
                                linux: tuple[int, dict[str, dict[object, object]]]) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    ret, maps = run_timer_sample(TIMER, engine=engine)
    assert (ret, maps) == linux
    # What the comparison covers: every timer fired as often as the sample says.
    fires = {(m, k): v["fires"] for m, elems in maps.items() for k, v in elems.items()}
    assert fires == {("timers", 0): 5, ("timers", 1): 0, ("timers", 2): 1, ("timers", 3): 1,
                     ("htimers", 7): 1, ("htimers", 8): 0, ("htimers", 9): 0}


def test_a_user_space_update_frees_the_timer_as_linux() -> None:
    """htimers[8] is armed for 1 s; user space overwrites the element at once. 1.1 s
    later it has not fired on Linux nor on pyxdp (the update freed its timer), and
    the maps hold the same values."""
    linux = run_timer_sample(TIMER, "kernel", steps=1100, user_update=True)
    mine = run_timer_sample(TIMER, engine="interp", steps=1100, user_update=True)
    assert mine == linux
    assert mine[1]["htimers"][8]["fires"] == 0
    assert mine[1]["htimers"][8]["key_seen"] == 88
