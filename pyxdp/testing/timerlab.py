"""samples/timer.o run as Linux runs it: one BPF_PROG_TEST_RUN arms its bpf_timers, time
passes, the callbacks fire; then the maps are read (see the sample's comment).

:func:`run_timer_sample` does that on either backend - on pyxdp against a
:class:`~pyxdp.vm.bpf_timer.VirtualClock` stepped a millisecond at a time with
``Collection.run_timers()`` after each step, on Linux by waiting - and returns the
map contents, so the two can be compared.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pyxdp.collection import Collection
from pyxdp.errors import PyxdpError
from pyxdp.net.packets import udp_packet
from pyxdp.vm.bpf_timer import TIMERS, VirtualClock

__all__ = ["TIMER_MAPS", "USER_VALUE", "run_timer_sample", "timer_maps"]

TIMER_MAPS = ("timers", "htimers")
# What user space writes over htimers[8] (user_update).
USER_VALUE = {"key_seen": 88, "rc": [1, 2, 3, 4, 5, 6, 7, 8]}


def timer_maps(coll: Collection) -> dict[str, dict[Any, Any]]:
    """Every element of the sample's timer maps, keys sorted."""
    return {m: dict(sorted(coll.maps[m].items())) for m in TIMER_MAPS}


def run_timer_sample(obj: str | Path, backend: str = "userspace", engine: str = "auto",
                     steps: int = 10, user_update: bool = False
                     ) -> tuple[int, dict[str, dict[Any, Any]]]:
    """The verdict of one run of ``xdp_timer`` and the maps ``steps`` ms later. With
    ``user_update``, user space overwrites ``htimers[8]`` (armed for 1 s) right after
    the run: the update frees its timer."""
    if backend == "kernel":
        with Collection.load(obj, "kernel") as coll:
            ret = coll.programs["xdp_timer"].test_run(udp_packet(b"timer")).retval
            if user_update:
                coll.maps["htimers"][8] = USER_VALUE
            time.sleep(steps / 1000)
            return int(ret), timer_maps(coll)
    with TIMERS.using(VirtualClock()) as clock, Collection.load(obj, engine=engine) as coll:
        res = coll.programs["xdp_timer"].test_run(udp_packet(b"timer"))
        if res.fault is not None:
            raise PyxdpError(f"xdp_timer faulted: {res.fault}")
        if user_update:
            coll.maps["htimers"][8] = USER_VALUE
        for _ in range(steps):
            clock.advance(1_000_000)
            coll.run_timers()
        return int(res.retval), timer_maps(coll)
