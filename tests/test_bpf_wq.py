"""bpf_wq on pyxdp (``pyxdp.vm.bpf_wq``): work runs after the run that queued it
(``Collection.run_work``, ``Host.run`` between polls), once however often it was
started while queued; work cancelled with its element or its map; the -EPERM of a
released map; the map types that may hold one. ``tests/kernel/test_wq_kernel.py``
compares ``samples/wq.o`` with Linux."""

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
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.vm.bpf_wq import WORKQUEUE

WQ = Path(__file__).resolve().parents[1] / "samples" / "wq.o"


def _runs(coll: Collection) -> dict[tuple[str, int], int]:
    return {(m, k): v["runs"] for m in ("wqs", "hwqs", "lwqs") for k, v in coll.maps[m].items()}


def test_work_runs_after_the_run_in_rounds() -> None:
    with Collection.load(WQ, engine="interp") as c:
        c.programs["xdp_wq"].test_run(udp_packet(b"w"))
        assert _runs(c)[("wqs", 0)] == 0  # nothing ran during the program's run
        assert WORKQUEUE.pending() == 4  # wqs[0] (started twice), wqs[2], hwqs[5], lwqs[4]
        assert c.run_work() == 4
        assert WORKQUEUE.pending() == 1  # wqs[0]'s callback queued it again
        assert c.run_work() == 1
        assert c.run_work() == 1  # the third run queues nothing
        assert c.run_work() == 0
        assert c.maps["wqs"][0]["cb_rc"] == [0, -errno.EBUSY]


def test_elements_and_maps_cancel_their_work() -> None:
    with Collection.load(WQ, engine="interp") as c:
        c.programs["xdp_wq"].test_run(udp_packet(b"w"))
        del c.maps["hwqs"][5]  # user space deletes an element: its work is cancelled
        c.maps["wqs"][2] = {"runs": 0}  # an update cancels it too
        assert WORKQUEUE.pending() == 2
        assert c.maps["wqs"][0]["w"] == c.maps["wqs"][3]["w"]  # reads as zeros
    assert WORKQUEUE.pending() == 0  # close: map_release_uref
    assert WORKQUEUE.run() == 0


def test_a_released_map_refuses_new_work() -> None:
    with Collection.load(WQ, engine="interp") as c:
        c.maps["wqs"].handle.release_uref()
        c.programs["xdp_wq"].test_run(udp_packet(b"w"))
        assert c.maps["wqs"][0]["rc"][:3] == [-errno.EINVAL, -errno.EPERM, -errno.EPERM]
        assert c.maps["hwqs"][5]["rc"][:3] == [0, 0, 0]  # the other map is held


def test_only_hash_lru_and_array_maps_hold_work() -> None:
    spec = load_collection_spec(WQ)
    maps = dict(spec.maps)
    maps["hwqs"] = dataclasses.replace(maps["hwqs"],
                                       type=int(BpfMapType.BPF_MAP_TYPE_PERCPU_HASH))
    with pytest.raises(MapError) as e:
        Collection(dataclasses.replace(spec, maps=maps))
    assert e.value.errno == errno.EOPNOTSUPP


def test_host_runs_work_between_polls() -> None:
    with Host("wq", engine="interp") as h:
        dev = h.add_device("eth0")
        coll = h.load(WQ)
        dev.attach_xdp(coll.programs["xdp_wq"])
        dev.receive([udp_packet(b"w")])
        h.run()  # a round that polls the frame, one that finds no more: two of work
        assert _runs(coll)[("hwqs", 5)] == 1
        assert _runs(coll)[("wqs", 0)] == 2
        h.run()
        assert _runs(coll)[("wqs", 0)] == 3
