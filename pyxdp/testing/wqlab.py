"""samples/wq.o run as Linux runs it: one BPF_PROG_TEST_RUN queues its bpf_wq work, the
work runs, its callbacks queue more; then the maps are read (see the sample's comment).

:func:`run_wq_sample` does that on either backend - on pyxdp with
``Collection.run_work()`` until no work is left, on Linux by polling the maps until
the callbacks have run :data:`WQ_RUNS` times (kworkers run them on their own), for up
to a second - and returns the map contents, so the two can be compared.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pyxdp.collection import Collection
from pyxdp.errors import PyxdpError
from pyxdp.net.packets import udp_packet

__all__ = ["WQ_MAPS", "WQ_RUNS", "run_wq_sample", "wq_maps"]

WQ_MAPS = ("wqs", "hwqs", "lwqs")
# The callback runs the sample's run leads to: wqs[0] 3 times, wqs[2], hwqs[5], lwqs[4].
WQ_RUNS = 6
_ROUNDS = 100  # run_work() calls at most (each runs what the one before queued)


def wq_maps(coll: Collection) -> dict[str, dict[Any, Any]]:
    """Every element of the sample's maps, keys sorted."""
    return {m: dict(sorted(coll.maps[m].items())) for m in WQ_MAPS}


def _runs(maps: dict[str, dict[Any, Any]]) -> int:
    return sum(v["runs"] for elems in maps.values() for v in elems.values())


def run_wq_sample(obj: str | Path, backend: str = "userspace", engine: str = "auto",
                  timeout: float = 1.0) -> tuple[int, dict[str, dict[Any, Any]]]:
    """The verdict of one run of ``xdp_wq`` and the maps once its work has run."""
    with Collection.load(obj, backend, engine=engine) as coll:
        res = coll.programs["xdp_wq"].test_run(udp_packet(b"wq"))
        if res.fault is not None:
            raise PyxdpError(f"xdp_wq faulted: {res.fault}")
        if backend == "kernel":
            deadline = time.monotonic() + timeout
            maps = wq_maps(coll)
            while _runs(maps) < WQ_RUNS and time.monotonic() < deadline:
                time.sleep(0.002)
                maps = wq_maps(coll)
            time.sleep(0.01)  # nothing more runs (the comparison would show it)
            return int(res.retval), wq_maps(coll)
        for _ in range(_ROUNDS):
            if not coll.run_work():
                break
        return int(res.retval), wq_maps(coll)
