"""bpf_timer on pyxdp (``pyxdp.vm.bpf_timer``): when callbacks run (a virtual clock,
``Collection.run_timers``, ``Host.run`` between polls), timers freed with their map
element or their map, the -EPERM of a released map, the map types that may hold a
timer. ``tests/kernel/test_timer_kernel.py`` compares ``samples/timer.o`` with Linux."""

from __future__ import annotations

import dataclasses
import errno
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import MapError
from pyxdp.net.netdevice import Host
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.testing.timerlab import run_timer_sample
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.vm.bpf_timer import TIMERS, VirtualClock

TIMER = Path(__file__).resolve().parents[1] / "samples" / "timer.o"
ENGINES = ["interp", pytest.param("jit", marks=pytest.mark.skipif(
    not jit_available(), reason="the JIT needs llvmlite"))]


def _fires(coll: Collection) -> dict[tuple[str, int], int]:
    return {(m, k): v["fires"] for m in ("timers", "htimers")
            for k, v in coll.maps[m].items()}


@pytest.mark.parametrize("engine", ENGINES)
def test_callbacks_run_when_the_clock_says(engine: str) -> None:
    with TIMERS.using(VirtualClock()) as clock, Collection.load(TIMER, engine=engine) as c:
        assert c.programs["xdp_timer"].test_run(udp_packet(b"t")).retval == 2
        # Queued: timers[0], [2] (absolute 0), [3], htimers[7] soon; htimers[8], [9] in 1 s.
        assert TIMERS.pending() == 6
        assert c.run_timers() == 1  # only the one armed for a time already past
        assert _fires(c)[("timers", 2)] == 1
        clock.advance(999)
        assert c.run_timers() == 0
        clock.advance(1)  # 1 us: timers[0], [3] and htimers[7] (which cancels [9])
        assert c.run_timers() == 3
        assert TIMERS.pending() == 2  # timers[0] re-armed itself; htimers[8]
        for _ in range(3):
            clock.advance(1000)
            assert c.run_timers() == 1
        clock.advance(1000)
        assert c.run_timers() == 1  # the fifth fire does not re-arm
        assert TIMERS.pending() == 1
        clock.advance(10**9)
        assert c.run_timers() == 1  # htimers[8]
        assert _fires(c) == {("timers", 0): 5, ("timers", 1): 0, ("timers", 2): 1,
                             ("timers", 3): 1, ("htimers", 7): 1, ("htimers", 8): 1,
                             ("htimers", 9): 0}
        assert TIMERS.table.faults == []


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_agree(engine: str) -> None:
    assert run_timer_sample(TIMER, engine=engine) == run_timer_sample(TIMER, engine="interp")


def test_elements_and_maps_free_their_timers() -> None:
    with TIMERS.using(VirtualClock()):
        with Collection.load(TIMER, engine="interp") as c:
            c.programs["xdp_timer"].test_run(udp_packet(b"t"))
            assert TIMERS.pending() == 6
            del c.maps["htimers"][9]  # user space deletes an element: its timer goes
            assert TIMERS.pending() == 5
            c.maps["timers"][0] = {"fires": 0}  # an update frees it too
            assert TIMERS.pending() == 4
            assert c.maps["timers"][0]["t"] == c.maps["timers"][1]["t"]  # reads as zeros
        assert TIMERS.pending() == 0  # close: map_release_uref


def test_a_released_map_refuses_new_timers() -> None:
    with TIMERS.using(VirtualClock()), Collection.load(TIMER, engine="interp") as c:
        c.maps["timers"].handle.release_uref()
        c.programs["xdp_timer"].test_run(udp_packet(b"t"))
        assert c.maps["timers"][0]["rc"][:2] == [-errno.EPERM, -errno.EPERM]
        assert c.maps["htimers"][7]["rc"][:3] == [0, 0, 0]  # the other map is held


def test_only_hash_lru_and_array_maps_hold_timers() -> None:
    spec = load_collection_spec(TIMER)
    maps = dict(spec.maps)
    maps["timers"] = dataclasses.replace(maps["timers"],
                                         type=int(BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY))
    with pytest.raises(MapError) as e:
        Collection(dataclasses.replace(spec, maps=maps))
    assert e.value.errno == errno.EOPNOTSUPP


def test_host_runs_due_timers_between_polls() -> None:
    with TIMERS.using(VirtualClock()) as clock, Host("timers", engine="interp") as h:
        dev = h.add_device("eth0")
        coll = h.load(TIMER)
        dev.attach_xdp(coll.programs["xdp_timer"])
        dev.receive([udp_packet(b"t")])
        h.run()
        assert _fires(coll)[("timers", 2)] == 1  # due at once: fired after the poll
        assert _fires(coll)[("timers", 0)] == 0
        for _ in range(5):
            clock.advance(1000)
            h.run()
        assert _fires(coll)[("timers", 0)] == 5
