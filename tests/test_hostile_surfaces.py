"""Hostile calls on surfaces the earlier rounds missed: tracepoint subscriptions with
wrong arguments, per-CPU sums of nested values, wrong-typed datapath inputs (one
PyxdpError line each), and a kernel descriptor closed by one thread while another
is inside a bpf(2) call on it (the number must not be reused under the call)."""

from __future__ import annotations

import dataclasses
import errno
import os
import struct
import threading
from typing import Any

import pytest

from pyxdp.collection import Collection
from pyxdp.errors import BadArgument, MapError, PyxdpError
from pyxdp.kernel.syscall import ClosedFdError, Fd, map_lookup_elem
from pyxdp.net import trace
from pyxdp.net.netdevice import Host
from pyxdp.net.packets import udp_packet
from pyxdp.samples import path as sample
from pyxdp.spec import BPF_F_XDP_HAS_FRAGS, BPF_XDP_DEVMAP, CollectionSpec, MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType


@pytest.mark.parametrize(("events", "callback", "words"), [
    (3, print, "events must be a tracepoint name, a list of them or None, not 3"),
    ([["xdp_exception"]], print, "not list"),
    (True, print, "not True"),
    (None, 3, "callback must be callable, not 3"),
    ("xdp_exception", None, "callback must be callable, not NoneType"),
])
def test_subscribe_refuses_what_it_cannot_fire(events: object, callback: object,
                                               words: str) -> None:
    with pytest.raises(BadArgument, match="^Tracer.subscribe: ") as e:
        trace.subscribe(events, callback)  # type: ignore[arg-type]
    assert words in str(e.value) and "\n" not in str(e.value)
    assert not trace.TRACER.listening  # nothing was left attached


@pytest.mark.parametrize("maxlen", [0, -1, "8", None, 1 << 40])
def test_listen_needs_a_positive_bound(maxlen: object) -> None:
    with pytest.raises(BadArgument, match="^Tracer.listen: maxlen must be"):
        trace.listen(None, maxlen=maxlen)  # type: ignore[arg-type]


def test_listen_takes_a_name_or_a_list() -> None:
    with trace.listen(["xdp_exception", "xdp_redirect"], maxlen=1) as q:
        assert q.events == ("xdp_exception", "xdp_redirect")
    with pytest.raises(BadArgument, match="not 7"):
        trace.listen([7])  # type: ignore[list-item]


def test_sum_adds_nested_members_and_arrays() -> None:
    with Collection.load(sample("res_lock.o"), engine="interp") as c:
        m = c.maps["deep"]  # {before, inner: {x, lock: {val}}, count}
        m[0] = {"before": 2, "inner": {"x": 5}, "count": 7}
        assert m.sum(0) == {"before": 2, "inner": {"x": 5, "lock": {"val": 0}}, "count": 7}
    with Collection.load(sample("strings.o"), engine="interp") as c:
        m = c.maps["cfg"]  # arrays among the members
        m[0] = {"op": 1, "where": [3, 4]}
        assert m.sum(0)["where"] == [3, 4]
        with pytest.raises(PyxdpError, match=r"^sum: value\.b of map 'text' is a bytes, "
                                             r"not a number$"):
            c.maps["text"].sum(0)


def test_datapath_inputs_of_the_wrong_type_are_bad_arguments() -> None:
    with Host(engine="interp") as host:
        eth0 = host.add_device("eth0")
        c = host.load(asm_collection("r0 = 1\nexit"))
        prog = c.programs["t"]
        for bad in (None, [b"x"], 5):
            with pytest.raises(BadArgument, match="^test_run: data_in must be a bytes-like"):
                prog.test_run(bad)  # type: ignore[arg-type]
        with pytest.raises(BadArgument, match="^packets must be a list of bytes, not int"):
            eth0.receive(5)  # type: ignore[arg-type]
        with pytest.raises(BadArgument, match="^packet 1 must be bytes-like, not NoneType"):
            eth0.receive([bytes(60), None])  # type: ignore[list-item]
        with pytest.raises(BadArgument, match="not an XDP trace record: int"):
            host.tracer.ingest(5)  # type: ignore[arg-type]


def test_a_held_descriptor_closes_with_its_last_holder() -> None:
    fd = Fd(os.open(os.devnull, os.O_RDONLY), "map")
    with fd.held() as n:
        closer = threading.Thread(target=fd.close)
        closer.start()
        closer.join()
        assert fd.closed
        os.fstat(n)  # still this file: the number is not free for another object yet
        with pytest.raises(ClosedFdError, match="the map is closed"):
            with fd.held():
                pass
    with pytest.raises(OSError) as e:
        os.fstat(n)
    assert e.value.errno == errno.EBADF


@pytest.mark.kernel
def test_kernel_map_closed_under_a_call_answers_ebadf_after_it() -> None:
    spec = asm_collection("r0 = 2\nexit", (MapSpec("arr", int(BpfMapType.BPF_MAP_TYPE_ARRAY),
                                                   4, 8, 4, 0),))
    c = Collection(spec, "kernel")
    m = c.maps["arr"]
    m[1] = 7
    with m.handle._fd.held() as n:  # type: ignore[attr-defined]
        c.close()
        # the holder's call still reaches this map, not whatever reuses the number
        assert map_lookup_elem(n, struct.pack("<I", 1), 8) == struct.pack("<Q", 7)
    with pytest.raises(MapError) as e:
        m[1]
    assert e.value.errno == errno.EBADF


def _frags(spec: CollectionSpec, **kw: Any) -> CollectionSpec:
    p = dataclasses.replace(spec.programs["t"], flags=BPF_F_XDP_HAS_FRAGS, **kw)
    return dataclasses.replace(spec, programs={"t": p})


@pytest.mark.parametrize("native", [True, False])
def test_devmap_program_passes_a_multi_buffer_frame_on(native: bool,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """dev_map_bpf_prog_run's xdp_update_frame_from_buff reads the linear part of a
    frags frame (data_end - data): its whole length was taken for the head, so every
    jumbo frame a devmap program passed was dropped as a driver's missing tailroom."""
    dm = MapSpec("dm", int(BpfMapType.BPF_MAP_TYPE_DEVMAP), 4, 8, 4, 0)
    redirect = _frags(asm_collection("r1 = map[fd:0]\nr2 = 0\nr3 = 0\ncall 51\nexit", [dm]))
    egress = _frags(asm_collection("r0 = 2\nexit"), section="xdp/devmap",
                    expected_attach_type=BPF_XDP_DEVMAP)
    with Host(engine="interp", native=native) as host:
        eth0 = host.add_device("eth0", mtu=9000)
        eth1 = host.add_device("eth1", mtu=9000)
        c = host.load(redirect)
        e = host.load(egress)
        c.maps["dm"][0] = struct.pack("<Ii", eth1.ifindex, e.programs["t"].fd)
        eth0.attach_xdp(c.programs["t"])
        eth0.receive([udp_packet(b"")[:42].ljust(n, b"j") for n in (9000, 5000, 1500)])
        host.run()
        assert eth1.stats.tx_packets == 3
        assert eth1.stats.tx_bytes == 9000 + 5000 + 1500
    assert "missing reserved tailroom" not in caplog.text
