"""A veth receiving xdp_frames other devices redirected to it (``veth_xdp_rcv_one``) in
the native poll loop against the Python reference path: frames in another device's
page pool and broadcast clones in the system allocator, every verdict, the same
counters, tracepoint counts, stack deliveries, faults and page accounting."""

from __future__ import annotations

import dataclasses
import logging
import struct
from typing import Any

import pytest

from pyxdp.net.netdevice import Host
from pyxdp.net.prog import jit_available
from pyxdp.net.source import TrafficGenerator
from pyxdp.net.trace import Tracer
from pyxdp.spec import CollectionSpec, MapSpec
from pyxdp.testing.programs import (
    asm_collection,
    frames_by_payload,
    redirect_by_payload,
    verdict_by_payload,
)
from pyxdp.uapi.bpf import BpfAttachType, BpfMapType, RedirectFlag

pytestmark = pytest.mark.skipif(not jit_available(), reason="llvmlite is not installed: no JIT")

XDP = int(BpfAttachType.BPF_XDP)
DEVMAP = int(BpfMapType.BPF_MAP_TYPE_DEVMAP)
BPF_F_BROADCAST = int(RedirectFlag.BPF_F_BROADCAST)
BPF_F_EXCLUDE_INGRESS = int(RedirectFlag.BPF_F_EXCLUDE_INGRESS)


# The veths' program: counts frames per rx queue's ifindex (xdp_md offset 12), then
# the payload picks the verdict (:func:`pyxdp.testing.programs.verdict_by_payload`);
# its redirects go to lo or to eth1 (ifindex 3, a NIC whose transmit is a sink).
RECV = verdict_by_payload(12)
RECV_ETH1 = verdict_by_payload(12, redirect_ifindex=3)


def _spec(flags: int, recv: str = RECV) -> CollectionSpec:
    maps = [MapSpec("ports", DEVMAP, 4, 8, 4),
            MapSpec("seen", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 4)]
    progs = {}
    # The NIC's program: slot 3 with the flags (a broadcast: clones to the veths, the
    # frame itself to the NIC), the other slots without.
    for name, text in (("ingress", redirect_by_payload(flags, flags_slot=3)), ("recv", recv)):
        one = asm_collection(text, maps).programs["t"]
        progs[name] = dataclasses.replace(one, name=name, section="xdp",
                                          expected_attach_type=XDP)
    return CollectionSpec(progs, {m.name: m for m in maps}, license="GPL")



def _run(native: bool, flags: int, *, count: int = 1500, recv: str = RECV,
         threaded: bool = False) -> tuple[object, ...]:
    """A NIC redirecting into two veths whose peers run :data:`RECV` on the
    xdp_frames they get (broadcasting too: then the veths' rings hold frames of the
    NIC's pool and clones in the system allocator, polls mixing both), and into a
    second NIC; veth0 and veth2 take what their peers send back (XDP_TX) to their
    stacks."""
    with Host(tracer=Tracer(), engine="jit", native=native, threaded_napi=threaded) as h:
        eth0 = h.add_device("eth0")
        eth1 = h.add_device("eth1")
        v0, v1 = h.veth("veth0", "veth1")
        v2, v3 = h.veth("veth2", "veth3")
        coll = h.load(_spec(flags, recv), verify=False)
        assert eth1.ifindex == 3
        v0.gro = True
        v2.gro = True
        v1.attach_xdp(coll.programs["recv"])
        v3.attach_xdp(coll.programs["recv"])
        ports = coll.maps["ports"]
        ports[0] = struct.pack("<Ii", v0.ifindex, 0)
        ports[1] = struct.pack("<Ii", v2.ifindex, 0)
        ports[2] = struct.pack("<Ii", eth1.ifindex, 0)
        ports[3] = struct.pack("<Ii", eth0.ifindex, 0)
        eth0.attach_xdp(coll.programs["ingress"])
        eth0.rx[0].source = TrafficGenerator(packets=frames_by_payload(), count=count)
        h.run()
        tr = h.tracer
        mid = ports.handle.id
        progs = {coll.programs[n].handle.id: n for n in ("ingress", "recv")}

        def key(k: tuple[int, ...], name: str) -> tuple[object, ...]:
            # Map and program ids differ between hosts: named.
            if name == "xdp_redirect" and k[2] == mid:
                return (*k[:2], "ports", *k[3:])
            return k

        events = {name: sorted((key(k, name), list(v))
                               for k, v in getattr(tr, name).counters.items())
                  for name in ("xdp_redirect", "xdp_redirect_err", "xdp_devmap_xmit",
                               "xdp_exception", "xdp_bulk_tx")}
        pools = [(rq.pool.get_stats(), rq.pool.state.words.tolist())
                 for d in h.devices.values() for rq in d.rx]
        system = h.memmap.system
        return ({d.name: d.stats.asdict() for d in h.devices.values()}, events,
                sorted(coll.maps["seen"].items()), h.stack.counters(),
                h.stack.drop_reasons(), h.stack.per_device, h.stack.stats,
                [d.faults[0].split(": out-of-bounds")[0] for d in h.devices.values()
                 if d.faults],
                pools, (system.allocated, system.freed, system.nr_free), sorted(progs.values()))


@pytest.mark.parametrize(("flags", "red_to"), [(0, "lo"), (BPF_F_BROADCAST, "lo"),
                                             (BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS, "lo"),
                                             (BPF_F_BROADCAST, "eth1")])
def test_veth_frames_native_is_python(flags: int, red_to: str,
                                      caplog: pytest.LogCaptureFixture) -> None:
    """xdp_frames from a NIC's page pool (and, broadcast, clones in order-0 pages, in
    polls mixing both) meeting a veth's program with every verdict (its redirects
    to ``red_to``) give in the native loop what the Python path gives."""
    recv = RECV if red_to == "lo" else RECV_ETH1
    with caplog.at_level(logging.WARNING):
        native = _run(True, flags, recv=recv)
        warned_native = "bpf_warn_invalid_xdp_action" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        python = _run(False, flags, recv=recv)
        warned_python = "bpf_warn_invalid_xdp_action" in caplog.text
    assert native == python
    assert warned_native and warned_python
    stats = native[0]
    assert isinstance(stats, dict)
    for v in ("veth1", "veth3"):
        s = stats[v]
        assert s["xdp_drops"] and s["xdp_aborted"] and s["xdp_pass"] and s["xdp_tx"]
        assert s["xdp_redirect"]
    if flags:
        assert native[-2][0] > 0  # clones were made  # type: ignore[index]


@pytest.mark.parametrize("flags", [0, BPF_F_BROADCAST])
def test_veth_frames_drop_and_pass_natively(flags: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The veths hand none of those frames to the Python dispatch: DROP, ABORTED,
    unknown verdicts, PASS, XDP_TX (veth_xdp_tx onto the peer's ring) and redirects
    to ``lo`` (which has no ndo_xdp_xmit: -EOPNOTSUPP) stay in the native loop
    (redirects to a NIC too: test_veth_frames_redirected_in_one_bulk_with_its_own)."""
    from pyxdp.net import napi

    seen: dict[str, list[int]] = {}
    orig = napi._dispatch_deferred

    def spy(host: Host, dev: Any, rq: Any, prog: Any, frames: Any, v: Any, bq: Any) -> None:
        seen.setdefault(dev.name, []).extend(v.action.tolist())
        orig(host, dev, rq, prog, frames, v, bq)

    monkeypatch.setattr(napi, "_dispatch_deferred", spy)
    calls: list[str] = []
    orig_poll = napi._native_poll

    def native_poll(rq: Any, prog: Any, budget: int, **kw: Any) -> int:
        calls.append(rq.dev.name)
        return orig_poll(rq, prog, budget, **kw)

    monkeypatch.setattr(napi, "_native_poll", native_poll)
    _run(True, flags, count=960)
    assert "veth1" in calls and "veth3" in calls
    assert not seen.get("veth1") and not seen.get("veth3"), seen


def test_threaded_napi_veth_frames_native(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threaded NAPI: the veths take the NIC's xdp_frames in the native loop too (no
    Python poll of theirs), their programs running without the host lock: DROP,
    ABORTED, PASS and XDP_TX there, only redirects handed to the (locked) Python
    dispatch. The pages go back into the NIC's pool's ring under its lock while the
    NIC's poll on its own thread refills from it; the host's close checks that every
    page came back."""
    from pyxdp.net import napi

    seen: dict[str, list[int]] = {}
    orig = napi._dispatch_deferred

    def spy(host: Host, dev: Any, rq: Any, prog: Any, frames: Any, v: Any, bq: Any) -> None:
        seen.setdefault(dev.name, []).extend(v.action.tolist())
        orig(host, dev, rq, prog, frames, v, bq)

    monkeypatch.setattr(napi, "_dispatch_deferred", spy)
    polls: dict[str, int] = {}
    orig_poll = napi._poll

    def poll(rq: Any, budget: int) -> int:
        before = rq.py_polls
        done = orig_poll(rq, budget)
        polls[rq.dev.name] = polls.get(rq.dev.name, 0) + rq.py_polls - before
        return done

    monkeypatch.setattr(napi, "_poll", poll)
    out = _run(True, 0, count=480, threaded=True)
    stats = out[0]
    assert isinstance(stats, dict)
    for v in ("veth1", "veth3"):
        assert polls[v] == 0, polls
        assert set(seen.get(v, [])) <= {4}, seen  # XDP_REDIRECT only
        s = stats[v]
        assert s["xdp_drops"] and s["xdp_aborted"] and s["xdp_pass"] and s["xdp_tx"]


@pytest.mark.parametrize("native", [True, False])
def test_veth_frame_in_a_page_not_in_use_is_reported(native: bool) -> None:
    """An xdp_frame on a veth's ring pointing at a page its pool does not have out (a
    corrupt ring) is never touched by native code: the Python path takes that poll and
    raises the page accounting error, on both paths alike."""
    from pyxdp.net.frames import KIND_FRAME, Frames
    from pyxdp.net.page_pool import PageAccountingError

    with Host(engine="jit", native=native) as h:
        eth0 = h.add_device("eth0")
        _v0, v1 = h.veth("veth0", "veth1")
        v1.attach_xdp(h.load(asm_collection("r0 = 1\nexit", [])).programs["t"])
        pool = eth0.rx[0].pool
        free_pfn = pool.pfn_base + pool.npages - 1  # never handed out
        v1.rx[0].ring.produce(Frames.make([free_pfn], 256, 64, kind=KIND_FRAME))
        with pytest.raises(PageAccountingError):
            h.run()
        h.close(check=False)


def _run_tx(native: bool, *, count: int = 1500) -> tuple[object, ...]:
    """veth0 running :data:`RECV` on frames of its own page pool, every verdict: XDP_TX
    is ``veth_xdp_tx`` - the bulk onto veth1's ring (veth1 has NAPI for GRO and
    takes the frames to its stack), stopping at the first frame longer than
    veth1's MTU allows, the rest dropped (``xdp_bulk_tx`` drops)."""
    with Host(tracer=Tracer(), engine="jit", native=native) as h:
        v0, v1 = h.veth("veth0", "veth1")
        v1.gro = True
        v1.mtu = 1000  # the 1400-byte frames stop their bulk
        coll = h.load(_spec(0), verify=False)
        v0.attach_xdp(coll.programs["recv"])
        v0.rx[0].source = TrafficGenerator(packets=frames_by_payload(), count=count)
        h.run()
        tr = h.tracer
        events = {name: sorted((k, list(v)) for k, v in getattr(tr, name).counters.items())
                  for name in ("xdp_redirect", "xdp_redirect_err", "xdp_exception",
                               "xdp_bulk_tx")}
        pools = [(rq.pool.get_stats(), rq.pool.state.words.tolist())
                 for d in h.devices.values() for rq in d.rx]
        system = h.memmap.system
        return ({d.name: d.stats.asdict() for d in h.devices.values()}, events,
                sorted(coll.maps["seen"].items()), h.stack.counters(),
                h.stack.drop_reasons(), h.stack.per_device, h.stack.stats, pools,
                (system.allocated, system.freed, system.nr_free))


def test_veth_xdp_tx_native_is_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """A veth's XDP_TX of its own pool's frames runs in the native loop (nothing of it
    handed to the Python dispatch) and gives what the Python path gives: counters,
    ``xdp_bulk_tx`` sums with drops, the peer's stack, page accounting."""
    from pyxdp.net import napi

    seen: list[int] = []
    orig = napi._dispatch_deferred

    def spy(host: Host, dev: Any, rq: Any, prog: Any, frames: Any, v: Any, bq: Any) -> None:
        if dev.name == "veth0":
            seen.extend(v.action.tolist())
        orig(host, dev, rq, prog, frames, v, bq)

    monkeypatch.setattr(napi, "_dispatch_deferred", spy)
    native = _run_tx(True, count=600)
    assert not seen  # its redirects to lo too (no ndo_xdp_xmit there: -EOPNOTSUPP)
    monkeypatch.setattr(napi, "_dispatch_deferred", orig)
    assert native == _run_tx(False, count=600)
    stats, events = native[0], native[1]
    assert isinstance(stats, dict) and isinstance(events, dict)
    assert stats["veth0"]["xdp_tx"] and stats["veth0"]["xdp_tx_errors"]
    (_key, (n, sent, drops, errors)), = events["xdp_bulk_tx"]
    assert sent == stats["veth0"]["xdp_tx"] and drops == stats["veth0"]["xdp_tx_errors"]
    assert n and not errors


def test_threaded_veth_xdp_tx_to_a_peer_on_another_cpu_native(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Threaded NAPI: veth0's second queue (CPU 1's thread, its program without the host
    lock: array maps only) sends its XDP_TX bulks onto veth1's ring natively although
    veth1's queue is polled on CPU 0's thread, which gives the pages back into that
    queue's pool's ring under the pool's lock meanwhile. Nothing of veth0's is handed
    to the Python dispatch; every frame sent reaches veth1's stack and the pages
    balance (the host's close checks them)."""
    from pyxdp.net import napi

    seen: list[int] = []
    orig = napi._dispatch_deferred

    def spy(host: Host, dev: Any, rq: Any, prog: Any, frames: Any, v: Any, bq: Any) -> None:
        if dev.name == "veth0":
            seen.extend(v.action.tolist())
        orig(host, dev, rq, prog, frames, v, bq)

    monkeypatch.setattr(napi, "_dispatch_deferred", spy)
    tx = asm_collection("r0 = 3\nexit")
    with Host(tracer=Tracer(), engine="jit", threaded_napi=True) as h:
        v0, v1 = h.veth("veth0", "veth1", queues=2)
        v1.gro = True
        v0.attach_xdp(h.load(tx).programs["t"])
        assert napi._parallel_ok(v0.xdp_prog)
        rq = v0.rx[1]
        assert rq.ctx.cpu % h.nr_cpus != v1.rx[0].ctx.cpu % h.nr_cpus
        rq.source = TrafficGenerator(packets=frames_by_payload()[:48], count=960)
        got = [0]
        h.stack.on_receive(lambda b: got.__setitem__(0, got[0] + int((b.ifindex
                                                                      == v1.ifindex).sum())))
        h.run()
        assert not seen and rq.py_polls == 0
        assert v0.stats.xdp_tx + v0.stats.xdp_tx_errors == 960
        assert got[0] == v0.stats.xdp_tx > 0


def _mixed_poll(native: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[object, ...]:
    """veth1's ring holding xdp_frames of eth0's pool (eth0 redirects to veth0) and, behind
    them, frames veth0's stack sent (veth1's own pool), one poll redirecting them all to
    eth1: what the native loop handed to the Python dispatch, the counters and the
    xdp_devmap_xmit bulks (``tests``: one bulk per 16 frames, as Linux sends them)."""
    from pyxdp.net import napi
    from pyxdp.net import packets as pk

    deferred: list[int] = []
    orig = napi._dispatch_deferred

    def spy(host: Host, dev: Any, rq: Any, prog: Any, frames: Any, v: Any, bq: Any) -> None:
        deferred.append(len(frames))
        orig(host, dev, rq, prog, frames, v, bq)

    monkeypatch.setattr(napi, "_dispatch_deferred", spy)
    with Host(tracer=Tracer(), engine="jit", native=native) as h:
        eth0 = h.add_device("eth0")
        eth1 = h.add_device("eth1")
        v0, v1 = h.veth("veth0", "veth1")
        v0.gro = True
        to_v0 = h.load(asm_collection(f"r1 = {v0.ifindex}\nr2 = 0\ncall 23\nexit"))
        to_eth1 = h.load(asm_collection(f"r1 = {eth1.ifindex}\nr2 = 0\ncall 23\nexit"))
        v1.attach_xdp(to_eth1.programs["t"])
        eth0.attach_xdp(to_v0.programs["t"])
        eth0.rx[0].source = TrafficGenerator(packets=frames_by_payload(), count=24)
        napi.napi_poll(eth0.rx[0])  # 24 xdp_frames of eth0's pool on veth1's ring
        v0.transmit([pk.udp_packet(bytes([k]) + b"y" * 20, sport=2000 + k) for k in range(24)])
        assert len(v1.rx[0].ring) == 48
        h.run()
        tr = h.tracer
        xmit = sorted((k, list(v)) for k, v in tr.xdp_devmap_xmit.counters.items())
        pools = [(rq.pool.get_stats(), rq.pool.state.words.tolist())
                 for d in h.devices.values() for rq in d.rx]
        out = ({d.name: d.stats.asdict() for d in h.devices.values()}, xmit, pools)
    monkeypatch.undo()
    return sum(deferred), out


def test_veth_frames_redirected_in_one_bulk_with_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Redirects of xdp_frames another device queued run in the native loop, in the same
    bulk queue as the veth's own frames (each entry keeping its memory): one poll of
    48 frames to eth1 is 3 bulks, as on the Python path and in Linux (the loop
    handing those frames to the Python dispatch made it 4: two half bulks), and every
    page goes back to its own pool."""
    n_native, native = _mixed_poll(True, monkeypatch)
    n_python, python = _mixed_poll(False, monkeypatch)
    assert n_native == 0
    assert native == python
    xmit = native[1]
    assert isinstance(xmit, list)
    assert [(v[0], v[1]) for k, v in xmit if k[0] != k[1] and k[1] == 3] == [(3, 48)]


def _spec_egress() -> CollectionSpec:
    """veth1's program redirecting by payload into ``ports`` (broadcasting on slot 3)
    and an entry program counting runs per egress_ifindex (``seen``) whose verdict
    the payload picks."""
    maps = [MapSpec("ports", DEVMAP, 4, 8, 4),
            MapSpec("seen", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 4)]
    progs = {}
    for name, section, attach, text in (
            ("recv", "xdp", XDP, redirect_by_payload(BPF_F_BROADCAST, flags_slot=3)),
            ("egress", "xdp/devmap", int(BpfAttachType.BPF_XDP_DEVMAP),
             verdict_by_payload(20))):
        one = asm_collection(text, maps).programs["t"]
        progs[name] = dataclasses.replace(one, name=name, section=section,
                                          expected_attach_type=attach)
    return CollectionSpec(progs, {m.name: m for m in maps}, license="GPL")


def _foreign_poll(native: bool,
                  monkeypatch: pytest.MonkeyPatch) -> tuple[int, tuple[object, ...]]:
    """veth1's ring holding xdp_frames of eth0's pool and, behind them, frames veth0's
    stack sent (veth1's own pool); veth1's program redirects them by payload through
    a devmap (entries with and without a program, to eth1 and eth2)
    (slot 3 a broadcast): what the native loop handed to the Python dispatch, and the
    counters, events, program counts and page accounting."""
    from pyxdp.net import napi

    deferred: list[int] = []
    orig = napi._dispatch_deferred

    def spy(host: Host, dev: Any, rq: Any, prog: Any, frames: Any, v: Any, bq: Any) -> None:
        deferred.append(len(frames))
        orig(host, dev, rq, prog, frames, v, bq)

    monkeypatch.setattr(napi, "_dispatch_deferred", spy)
    with Host(tracer=Tracer(), engine="jit", native=native) as h:
        eth0 = h.add_device("eth0")
        eth1 = h.add_device("eth1")
        eth2 = h.add_device("eth2", mtu=1000)
        v0, v1 = h.veth("veth0", "veth1")
        v0.gro = True
        coll = h.load(_spec_egress(), verify=False)
        eg = coll.programs["egress"].fd
        ports = coll.maps["ports"]
        ports[0] = struct.pack("<Ii", eth1.ifindex, eg)
        ports[1] = struct.pack("<Ii", eth2.ifindex, 0)
        ports[2] = struct.pack("<Ii", eth1.ifindex, 0)
        ports[3] = struct.pack("<Ii", eth2.ifindex, eg)
        to_v0 = h.load(asm_collection(f"r1 = {v0.ifindex}\nr2 = 0\ncall 23\nexit"))
        v1.attach_xdp(coll.programs["recv"])
        eth0.attach_xdp(to_v0.programs["t"])
        frames = frames_by_payload()
        eth0.rx[0].source = TrafficGenerator(packets=frames, count=96)
        napi.napi_poll(eth0.rx[0])  # xdp_frames of eth0's pool on veth1's ring (96 in all)
        v0.transmit(frames[:64])  # ... and behind them 64 of veth1's own pool
        h.run()
        tr = h.tracer
        mid = ports.handle.id
        events = {name: sorted(((*k[:2], "ports", *k[3:]) if name == "xdp_redirect"
                                and k[2] == mid else k, list(v))
                               for k, v in getattr(tr, name).counters.items())
                  for name in ("xdp_redirect", "xdp_redirect_err", "xdp_devmap_xmit",
                               "xdp_exception")}
        pools = [(rq.pool.get_stats(), rq.pool.state.words.tolist())
                 for d in h.devices.values() for rq in d.rx]
        system = h.memmap.system
        out = ({d.name: d.stats.asdict() for d in h.devices.values()}, events,
               sorted(coll.maps["seen"].items()), h.stack.counters(), pools,
               (system.allocated, system.freed, system.nr_free))
    monkeypatch.undo()
    return sum(deferred), out


def test_veth_frames_broadcast_and_entry_programs_natively(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Broadcasts of xdp_frames another device queued (clones in order-0 pages, the frame
    itself in its pool to the last target) and devmap entry programs over bulks
    mixing them with the veth's own frames run in the native loop, none handed to
    the Python dispatch, with what the Python path gives: the same bulks
    (xdp_devmap_xmit), entry program runs, verdicts and page accounting."""
    n_native, native = _foreign_poll(True, monkeypatch)
    n_python, python = _foreign_poll(False, monkeypatch)
    assert n_native == 0
    assert native == python
    stats, events = native[0], native[1]
    assert isinstance(stats, dict) and isinstance(events, dict)
    assert stats["veth1"]["xdp_redirect"] == 96 + 64
    assert native[2]  # the entry program ran
    assert events["xdp_devmap_xmit"] and events["xdp_exception"]
    system = native[-1]
    assert isinstance(system, tuple) and system[0] > 0  # clones were made


def _cpumap_poll(native: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[int, tuple[object, ...]]:
    """veth1's ring holding xdp_frames of eth0's pool and behind them frames of its own
    pool, which its program redirects by payload into cpumap entries (CPU 0: a ring of
    64; CPU 1: a ring of 8, which refuses bulks; slots 2 and 3 empty: XDP_ABORTED):
    what the native loop handed to the Python dispatch, and the stack's deliveries,
    events, counters and page accounting."""
    from pyxdp.net import napi

    deferred: list[int] = []
    orig = napi._dispatch_deferred

    def spy(host: Host, dev: Any, rq: Any, prog: Any, frames: Any, v: Any, bq: Any) -> None:
        deferred.append(len(frames))
        orig(host, dev, rq, prog, frames, v, bq)

    monkeypatch.setattr(napi, "_dispatch_deferred", spy)
    cm = MapSpec("cpu_map", int(BpfMapType.BPF_MAP_TYPE_CPUMAP), 4, 8, 4)
    with Host(tracer=Tracer(), engine="jit", native=native) as h:
        eth0 = h.add_device("eth0")
        v0, v1 = h.veth("veth0", "veth1")
        v0.gro = True
        coll = h.load(asm_collection(redirect_by_payload(0), [cm]))
        coll.maps["cpu_map"][0] = struct.pack("<Ii", 64, 0)
        coll.maps["cpu_map"][1] = struct.pack("<Ii", 8, 0)
        to_v0 = h.load(asm_collection(f"r1 = {v0.ifindex}\nr2 = 0\ncall 23\nexit"))
        v1.attach_xdp(coll.programs["t"])
        eth0.attach_xdp(to_v0.programs["t"])
        frames = frames_by_payload()
        eth0.rx[0].source = TrafficGenerator(packets=frames, count=96)
        napi.napi_poll(eth0.rx[0])
        v0.transmit(frames[:64])
        h.run()
        mid = coll.maps["cpu_map"].handle.id  # ids differ between hosts: named

        def key(k: tuple[int, ...], name: str) -> tuple[object, ...]:
            i = {"xdp_redirect": 2, "xdp_cpumap_kthread": 0, "xdp_cpumap_enqueue": 0}.get(name)
            return k if i is None or k[i] != mid else (*k[:i], "cpu_map", *k[i + 1:])

        events = {name: sorted((key(k, name), list(v))
                               for k, v in getattr(h.tracer, name).counters.items())
                  for name in ("xdp_redirect", "xdp_redirect_err", "xdp_cpumap_kthread",
                               "xdp_cpumap_enqueue", "xdp_exception")}
        pools = [(rq.pool.get_stats(), rq.pool.state.words.tolist())
                 for d in h.devices.values() for rq in d.rx]
        out = ({d.name: d.stats.asdict() for d in h.devices.values()}, events,
               h.stack.per_device, h.stack.counters(), pools)
    monkeypatch.undo()
    return sum(deferred), out


def test_veth_frames_into_cpumap_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    """cpumap redirects of xdp_frames another device queued run in the native loop
    (converted in their memory, ``dev_rx`` the veth, in the entry's bulk beside the
    veth's own frames; what a full ring refuses goes back to its memory), with what
    the Python path gives: the stack's deliveries on the veth, xdp_cpumap_enqueue
    drops, counters and page accounting."""
    n_native, native = _cpumap_poll(True, monkeypatch)
    n_python, python = _cpumap_poll(False, monkeypatch)
    assert n_native == 0
    assert native == python
    events = native[1]
    assert isinstance(events, dict)
    enq = [v for _k, v in events["xdp_cpumap_enqueue"]]
    assert enq and any(v[2] for v in enq)  # the ring of 8 refused some
    assert native[2]  # the stack got frames on veth1


def _pool_balanced(pool: Any) -> None:
    """Exact page accounting of a page pool: every page it holds from its allocator is
    in its alloc cache, its ring or in use, each counted once."""
    cached, ringed, used = len(pool.cached_pages()), len(pool.ring_pages()), len(pool.in_use())
    assert (cached, ringed, used) == (pool.alloc_count, pool.ring_count, pool.nr_in_use)
    assert pool.inflight() == cached + ringed + used


@pytest.mark.parametrize(("sender", "count"), [("python", 400), ("native", 3000)])
def test_threaded_skbs_to_a_lockless_peer_keep_its_pool_exact(
        sender: str, count: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Threaded NAPI: veth0's second queue (CPU 1) runs a generic program that sends
    every skb back out (generic_xdp_tx: veth_xmit to veth1) while veth1's queue (CPU 0)
    is polled without the host lock by its native program, which drops what it gets
    (direct recycling into its pool's alloc cache). veth_xdp_rx queues each skb on
    veth1's ring and veth1's own poll copies it into its pool, so no thread but
    veth1's ever takes a page of that pool: the pools and the system allocator
    balance exactly. ``sender``: veth0's queue on the Python path (under the host lock;
    one skb at a time there, so fewer of them) or natively (without it: nothing
    handed to the Python path); veth1's own traffic keeps its poll busy meanwhile."""
    import pyxdp.net.dev as dev_mod
    from pyxdp.net import napi

    to_python = [0]
    act = dev_mod.generic_xdp_act

    def counted(dev: Any, prog: Any, out: Any, *a: Any) -> None:
        to_python[0] += len(out)
        act(dev, prog, out, *a)
    monkeypatch.setattr(dev_mod, "generic_xdp_act", counted)
    with Host(tracer=Tracer(), engine="jit", threaded_napi=True) as h:
        v0, v1 = h.veth("veth0", "veth1", queues=2)
        v1.attach_xdp(h.load(asm_collection("r0 = 1\nexit")).programs["t"])
        v0.attach_xdp(h.load(asm_collection("r0 = 3\nexit")).programs["t"], mode="generic")
        assert napi._parallel_ok(v1.xdp_prog) and napi._parallel_ok(v0.xdp_generic)
        if sender == "python":
            ok = napi._native_ok
            monkeypatch.setattr(napi, "_native_ok",
                                lambda rq, prog, **kw: rq.dev is not v0 and ok(rq, prog, **kw))
        tx, rx = v0.rx[1], v1.rx[0]
        assert tx.ctx.cpu % h.nr_cpus != rx.ctx.cpu % h.nr_cpus
        pkts = frames_by_payload()[:48]
        tx.source = TrafficGenerator(packets=pkts, count=count)
        rx.source = TrafficGenerator(packets=pkts, count=40000)
        h.run()
        for d in (v0, v1):
            for q in d.rx:
                _pool_balanced(q.pool)
        system = h.memmap.system
        assert len(system.in_use()) == system.allocated - system.freed == 0
        h.check_memory()
        assert v0.stats.tx_packets == count
        # Every skb sent is received or dropped (veth1's ring full), never lost.
        got = v1.stats.rx_packets - 40000
        assert got + v1.stats.rx_dropped == count and got > 0
        assert v1.stats.xdp_drops == v1.stats.rx_packets
        assert (tx.py_polls > 0) == (sender == "python")
        assert to_python[0] == (count if sender == "python" else 0)
