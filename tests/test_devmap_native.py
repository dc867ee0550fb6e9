"""devmap programs and broadcast in the native poll loop against the Python reference path:
the same verdicts, counters, tracepoint counts, faults, maps and page accounting."""

from __future__ import annotations

import dataclasses
import errno
import logging
import struct
from collections import Counter

import numpy as np
import pytest

from pyxdp.net import packets as pk
from pyxdp.net.netdevice import Host
from pyxdp.net.prog import jit_available
from pyxdp.net.source import TrafficGenerator
from pyxdp.net.stack import SkbBatch
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
DEVMAP_ATTACH = int(BpfAttachType.BPF_XDP_DEVMAP)
BPF_F_BROADCAST = int(RedirectFlag.BPF_F_BROADCAST)
BPF_F_EXCLUDE_INGRESS = int(RedirectFlag.BPF_F_EXCLUDE_INGRESS)


# The egress program: counts runs per egress_ifindex (xdp_md offset 20), then the
# payload picks the verdict (:func:`pyxdp.testing.programs.verdict_by_payload`).
EGRESS = verdict_by_payload(20)
# The same counting atomically (``lock xadd``), for egress runs on two CPUs at once.
EGRESS_ATOMIC = EGRESS.replace("    r1 = *(u64 *)(r0 +0)\n    r1 += 1\n    *(u64 *)(r0 +0) = r1\n",
                               "    r1 = 1\n    lock *(u64 *)(r0 +0) += r1\n")
assert EGRESS_ATOMIC != EGRESS


DEVMAP = int(BpfMapType.BPF_MAP_TYPE_DEVMAP)
DEVMAP_HASH = int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH)


def _spec(flags: int, map_type: int = DEVMAP, egress: str = EGRESS) -> CollectionSpec:
    maps = [MapSpec("ports", map_type, 4, 8, 4),
            MapSpec("seen", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 4)]
    progs = {}
    for name, section, attach, text in (
            ("ingress", "xdp", XDP, redirect_by_payload(flags)),
            ("egress", "xdp/devmap", DEVMAP_ATTACH, egress),
            ("egress2", "xdp/devmap", DEVMAP_ATTACH, egress)):
        one = asm_collection(text, maps).programs["t"]
        progs[name] = dataclasses.replace(one, name=name, section=section,
                                          expected_attach_type=attach)
    return CollectionSpec(progs, {m.name: m for m in maps}, license="GPL")



def _run(native: bool, flags: int, *, layout: str = "progs", count: int = 1500,
         map_type: int = DEVMAP, threaded: bool = False) -> tuple[object, ...]:
    """``threaded``: eth0 has two rx queues (CPUs 0 and 1), each with ``count`` frames,
    polled by threaded NAPI; the egress programs count atomically."""
    with Host(tracer=Tracer(), engine="jit", native=native, threaded_napi=threaded) as h:
        eth0 = h.add_device("eth0", rx_queues=2 if threaded else 1)
        eth1 = h.add_device("eth1")
        eth2 = h.add_device("eth2")
        eth3 = h.add_device("eth3", mtu=1000)
        # The egress program faults on purpose (Linux's verifier would refuse it).
        coll = h.load(_spec(flags, map_type, EGRESS_ATOMIC if threaded else EGRESS),
                      verify=False)
        ports = coll.maps["ports"]
        # "progs": slot 0 without a program, 1 and 2 one program on two devices, 3
        # another one on the ingress device. "bcast": a program on slot 3 only (the
        # last target of a broadcast, which gets the frame itself; the others clones).
        # "same": two entries for eth1 (the first with a program) and two for eth2 (the
        # last with one): each device has one bulk queue, run by its first entry's program.
        egress = coll.programs["egress"].fd if layout in ("progs", "same") else 0
        egress2 = coll.programs["egress2"].fd
        ports[0] = struct.pack("<Ii", eth1.ifindex, egress if layout == "same" else 0)
        ports[1] = struct.pack("<Ii", eth2.ifindex, 0 if layout == "same" else egress)
        if layout == "same":
            ports[2] = struct.pack("<Ii", eth1.ifindex, 0)
            ports[3] = struct.pack("<Ii", eth2.ifindex, egress2)
        else:
            ports[2] = struct.pack("<Ii", eth3.ifindex, egress)
            ports[3] = struct.pack("<Ii", eth0.ifindex, egress2)
        eth0.attach_xdp(coll.programs["ingress"])
        # the 1400-byte frames are too long for eth3's MTU
        for rq in eth0.rx:
            rq.source = TrafficGenerator(packets=frames_by_payload(), count=count)
        h.run()
        assert {rq.ctx.cpu for rq in eth0.rx} == ({0, 1} if threaded else {0})
        tr = h.tracer
        mid = ports.handle.id  # ids differ between hosts: named -1

        def key(k: tuple[int, ...], name: str) -> tuple[int, ...]:
            return (*k[:2], -1, *k[3:]) if name == "xdp_redirect" and k[2] == mid else k

        events = {name: sorted((key(k, name), list(v))
                               for k, v in getattr(tr, name).counters.items())
                  for name in ("xdp_redirect", "xdp_redirect_err", "xdp_devmap_xmit",
                               "xdp_exception", "xdp_bulk_tx")}
        pools = [(rq.pool.get_stats(), rq.pool.state.words.tolist())
                 for d in h.devices.values() for rq in d.rx]
        system = h.memmap.system
        return ({d.name: d.stats.asdict() for d in h.devices.values()}, events,
                sorted(coll.maps["seen"].items()),
                # The first fault report of each device (the Python path reports one per
                # bulk, the native loop one per call).
                [d.faults[0].split(": out-of-bounds")[0] for d in h.devices.values()
                 if d.faults],
                pools, (system.allocated, system.freed, system.nr_free))


@pytest.mark.parametrize(("layout", "flags", "map_type"), [
    *((layout, flags, DEVMAP) for layout in ("progs", "bcast")
      for flags in (0, BPF_F_BROADCAST, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS)),
    # DEVMAP_HASH (keys 0-3): entries found by the maps' hash probe, broadcasts in the
    # kernel's bucket order.
    ("progs", 0, DEVMAP_HASH),
    ("bcast", BPF_F_BROADCAST, DEVMAP_HASH),
    ("bcast", BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS, DEVMAP_HASH),
])
def test_devmap_programs_native_is_python(flags: int, layout: str, map_type: int,
                                          caplog: pytest.LogCaptureFixture) -> None:
    """Devmap entries with programs on NIC targets - PASS (after adjust_head), DROP,
    ABORTED, TX, REDIRECT, an unknown verdict, a fault; one program shared by two
    entries, a second program, an entry without one, a frame too long for its
    target - and broadcasts (clones from the system allocator, the ingress device
    excluded or not) give in the native loop what the Python path gives: device
    counters, tracepoint counts, the programs' map, the first fault report, page
    pool and system allocator accounting, the warning."""
    with caplog.at_level(logging.WARNING):
        native = _run(True, flags, layout=layout, map_type=map_type)
        warned_native = "bpf_warn_invalid_xdp_action" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        python = _run(False, flags, layout=layout, map_type=map_type)
        warned_python = "bpf_warn_invalid_xdp_action" in caplog.text
    assert native == python
    assert warned_native == warned_python
    if layout == "bcast" and flags == BPF_F_BROADCAST:  # clones were made
        assert native[-1][0] > 0


def _deferred(monkeypatch: pytest.MonkeyPatch, dev: str | None = None) -> list[int]:
    """The sizes of the batches the native loop hands to the Python dispatch from now on
    (``dev``: from that device only)."""
    from pyxdp.net import napi

    seen: list[int] = []
    orig = napi._dispatch_deferred

    def spy(host: Host, d: object, rq: object, prog: object, frames: object, v: object,
            bq: object) -> None:
        if dev is None or getattr(d, "name", "") == dev:
            seen.append(len(frames))  # type: ignore[arg-type]
        orig(host, d, rq, prog, frames, v, bq)  # type: ignore[arg-type]

    monkeypatch.setattr(napi, "_dispatch_deferred", spy)
    return seen


@pytest.mark.parametrize(("layout", "flags", "deferred", "map_type"), [
    # Unicast: the frames too long for eth3 (-EMSGSIZE, slot 2 with 1400 bytes) fail
    # natively too.
    ("progs", 0, 0, DEVMAP),
    ("progs", 0, 0, DEVMAP_HASH),
    # Broadcast with programs on targets that get clones: each bulk's clones run in a
    # batch of their own over the system allocator's pages.
    ("progs", BPF_F_BROADCAST, 0, DEVMAP),
    ("progs", BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS, 0, DEVMAP_HASH),
    # Broadcast with the program on the last target only: all native.
    ("bcast", BPF_F_BROADCAST, 0, DEVMAP),
    ("bcast", BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS, 0, DEVMAP),
    ("bcast", BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS, 0, DEVMAP_HASH),
])
def test_devmap_programs_and_broadcast_run_natively(layout: str, flags: int, deferred: int,
                                                    map_type: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """What the native loop hands to the Python dispatch for devmap redirects."""
    seen = _deferred(monkeypatch)
    _run(True, flags, layout=layout, count=960, map_type=map_type)
    assert sum(seen) == deferred


@pytest.mark.parametrize(("layout", "flags", "map_type"), [
    ("progs", 0, DEVMAP),
    ("progs", BPF_F_BROADCAST, DEVMAP_HASH),
    ("bcast", BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS, DEVMAP),
])
def test_lockless_devmap_redirects_native_is_python(layout: str, flags: int, map_type: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Threaded NAPI, two queues on CPUs 0 and 1: a program whose maps are a devmap (or
    devmap_hash) and an array polls without the host lock, and its devmap redirects -
    entry programs (on each CPU's engine), broadcasts (clones from the system
    allocator, under its lock), -EMSGSIZE - stay in the native loop: nothing is
    handed to the Python dispatch, and counters, tracepoints, maps, page pools and
    the system allocator end as on the Python path."""
    seen = _deferred(monkeypatch)
    native = _run(True, flags, layout=layout, count=480, map_type=map_type, threaded=True)
    assert sum(seen) == 0
    monkeypatch.undo()
    python = _run(False, flags, layout=layout, count=480, map_type=map_type, threaded=True)
    assert native == python


def test_lockless_poll_leaves_a_locked_entry_program_to_python(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Threaded NAPI, two queues on two CPUs polled without the host lock: an entry
    program that may not run on several CPUs at once (it looks up a hash map) is
    left to the (locked) Python dispatch, frame by frame as deferred, the entries
    without one stay native; the counters and tracepoints are the Python path's."""

    hash_map = MapSpec("h", int(BpfMapType.BPF_MAP_TYPE_HASH), 4, 8, 4)
    hash_egress = dataclasses.replace(
        asm_collection("""
            r1 = 0
            *(u32 *)(r10 -4) = r1
            r1 = map[fd:0]
            r2 = r10
            r2 += -4
            call bpf_map_lookup_elem
            r0 = 2
            exit
        """, [hash_map]).programs["t"],
        section="xdp/devmap", expected_attach_type=DEVMAP_ATTACH)
    def run(native: bool) -> tuple[object, ...]:
        with Host(tracer=Tracer(), engine="jit", native=native, threaded_napi=True) as h:
            eth0 = h.add_device("eth0", rx_queues=2)
            eth1, eth2 = h.add_device("eth1"), h.add_device("eth2")
            coll = h.load(_spec(0), verify=False)
            egress = h.load(CollectionSpec({"t": hash_egress}, {"h": hash_map}, license="GPL"))
            for slot in range(4):
                coll.maps["ports"][slot] = struct.pack(
                    "<Ii", (eth1 if slot % 2 == 0 else eth2).ifindex,
                    egress.programs["t"].fd if slot % 2 == 0 else 0)
            eth0.attach_xdp(coll.programs["ingress"])
            for rq in eth0.rx:
                rq.source = TrafficGenerator(packets=frames_by_payload(), count=192)
            h.run()
            return ({d.name: d.stats.asdict() for d in h.devices.values()},
                    {n: sorted((k[:2] + k[3:], list(v))
                               for k, v in getattr(h.tracer, n).counters.items())
                     for n in ("xdp_redirect", "xdp_redirect_err", "xdp_devmap_xmit")})

    deferred = _deferred(monkeypatch)
    native = run(True)
    # Slots 0 and 2 (eth1, the hash map's program): half the frames of each queue.
    assert sum(deferred) == 192
    monkeypatch.undo()
    assert native == run(False)


def test_lockless_polls_broadcast_into_one_veth_concurrently(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Threaded NAPI: a NIC's two queues (CPUs 0 and 1, polled at once without the host
    lock) broadcast every frame into one devmap: a clone to a NIC (from the system
    allocator, both threads allocating under its lock), the frame itself to a veth
    whose peer's poll (lockless too, on CPU 0's thread) takes the clones and frames
    off its xdp_ring and frees them into their memories meanwhile. All native, exact:
    the NIC sends every clone (counted in its row for each CPU), the veth sends or
    drops every frame, the peer's stack gets every one sent, every clone page comes
    back to the allocator and every pool's pages balance (checked at the close)."""
    from pyxdp.net import napi

    deferred = _deferred(monkeypatch)
    count = 1500
    with Host(tracer=Tracer(), engine="jit", threaded_napi=True) as h:
        eth0 = h.add_device("eth0", rx_queues=2)
        eth1 = h.add_device("eth1")
        v0, v1 = h.veth("veth0", "veth1")
        coll = h.load(_spec(BPF_F_BROADCAST), verify=False)
        v1.attach_xdp(h.load(asm_collection("r0 = 2\nexit", [])).programs["t"])
        coll.maps["ports"][0] = struct.pack("<Ii", eth1.ifindex, 0)
        coll.maps["ports"][1] = struct.pack("<Ii", v0.ifindex, 0)
        eth0.attach_xdp(coll.programs["ingress"])
        assert napi._parallel_ok(coll.programs["ingress"].handle)
        for rq in eth0.rx:
            rq.source = TrafficGenerator(packets=[p[:200] for p in frames_by_payload()[:48]],
                                         count=count)
        h.run()
        assert {rq.ctx.cpu for rq in eth0.rx} == {0, 1}
        assert sum(deferred) == 0
        assert eth1.stats.tx_packets == 2 * count
        assert all(r.tx_packets for r in eth1.cpu_stats)
        xmit = {k: list(v) for k, v in h.tracer.xdp_devmap_xmit.counters.items()}
        sent = sum(v[1] for k, v in xmit.items() if k[1] == v0.ifindex)
        drops = sum(v[2] for k, v in xmit.items() if k[1] == v0.ifindex)
        assert sent + drops == 2 * count and sent > 0
        assert v0.stats.tx_packets == sent == v1.stats.xdp_pass == h.stack.per_device[
            v1.ifindex]
        assert eth0.stats.xdp_redirect == 2 * count
        system = h.memmap.system
        assert system.allocated == system.freed == 2 * count
        assert system.nr_free == len(system.refcount)


def test_lockless_polls_redirect_onto_one_transmit_ring(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Threaded NAPI: a NIC's two queues (CPUs 0 and 1, polled at once without the host
    lock) redirect every frame through a devmap to a device with a native transmit
    ring (an AF_XDP socket's tx ring, here in plain memory): two producers meet at
    the ring's tx lock. All native; every frame gets a descriptor of its own (no
    chunk given twice, none lost), published, and is counted once."""
    from pyxdp.net.xsk_queue import ring_bytes
    from pyxdp.net.xsk_wire import XskWireState
    from pyxdp.xsk.queue import RingCons, RingProd

    deferred = _deferred(monkeypatch)
    count, entries, chunk = 1000, 2048, 2048
    txb = bytearray(ring_bytes(entries, "desc"))
    cqb = bytearray(ring_bytes(entries, "addr"))
    tx, cq = RingProd(txb, entries, "desc"), RingCons(cqb, entries, "addr")
    umem = np.zeros(entries * chunk, np.uint8)
    free = np.arange(entries, dtype=np.int64) * chunk
    wire = XskWireState(txq_at=tx.q.words.ctypes.data, cq_at=cq.q.words.ctypes.data,
                        umem_at=umem.ctypes.data, umem_size=umem.size, chunk_size=chunk,
                        free_at=free.ctypes.data, nfree=entries, cap=entries)
    pkts = [p[:200] for p in frames_by_payload()[:48]]
    with Host(tracer=Tracer(), engine="jit", threaded_napi=True) as h:
        eth0 = h.add_device("eth0", rx_queues=2)
        eth1 = h.add_device("eth1")
        eth1.xmit_wires = (int(wire.words.ctypes.data),)
        coll = h.load(_spec(0), verify=False)
        for slot in range(4):
            coll.maps["ports"][slot] = struct.pack("<Ii", eth1.ifindex, 0)
        eth0.attach_xdp(coll.programs["ingress"])
        assert h.fwd.unlocked_for(h.devices, 1)[0][eth1.ifindex] == 1  # native
        for rq in eth0.rx:
            rq.source = TrafficGenerator(packets=pkts, count=count)
        h.run()
        assert {rq.ctx.cpu for rq in eth0.rx} == {0, 1}
        assert sum(deferred) == 0
        assert eth1.stats.tx_packets == 2 * count and all(r.tx_packets for r in eth1.cpu_stats)
        xmit = [list(v) for v in h.tracer.xdp_devmap_xmit.counters.values()]
        assert sum(v[1] for v in xmit) == 2 * count and sum(v[2] for v in xmit) == 0
    assert wire.sent == 2 * count and wire.full == 0 and wire.nfree == entries - 2 * count
    assert tx.producer == 2 * count
    d = tx.read(0, 2 * count)
    assert len(set(d["addr"].tolist())) == 2 * count  # a chunk each
    # Each queue's generator cycles through the packets.
    one_queue = [len(p) for p in (pkts * (count // len(pkts) + 1))[:count]]
    assert Counter(d["len"].tolist()) == Counter(one_queue * 2)


def test_broadcast_to_one_device_twice_fills_one_bulk_queue() -> None:
    """Two devmap entries naming one device: a broadcast's copies for it go into the
    device's one bulk queue (``bq_enqueue``'s ``dev->xdp_bulkq``) frame by frame, and
    the program of the entry that queued the first frame since the poll's flush
    runs over the whole bulk (Linux's behaviour, the vethlab scenario
    ``devmap_broadcast_egress_prog``): the same on both paths."""
    count = 200  # 3 polls of 64 frames, then 8
    native = _run(True, BPF_F_BROADCAST, layout="same", count=count)
    assert native == _run(False, BPF_F_BROADCAST, layout="same", count=count)
    events, maps = native[1], native[2]
    assert isinstance(events, dict) and isinstance(maps, list)
    seen = dict(maps)
    # egress_ifindex & 3 keys the program's count: eth1 (3) ran every copy, eth2 (0) none.
    assert seen[3] == 2 * count and seen[0] == 0
    # One bulk per 16 copies of a poll: 8 per full poll, then one for the last 16.
    xmit = dict(events["xdp_devmap_xmit"])
    assert [v[0] for k, v in xmit.items() if k[1] in (3, 4)] == [3 * 8 + 1] * 2


def _steps(native: bool) -> tuple[object, ...]:
    """Redirects through one devmap slot while user space rewrites the slot and a target
    goes down between runs; in the native run, which of the call's tables were kept."""
    frames = [pk.udp_packet(bytes([0]) + b"x" * 20, sport=1000 + i) for i in range(32)]
    kept = []
    with Host(tracer=Tracer(), engine="jit", native=native) as h:
        eth0 = h.add_device("eth0")
        eth1 = h.add_device("eth1")
        eth2 = h.add_device("eth2")
        coll = h.load(_spec(0), verify=False)  # the faulting egress program, as above
        ports = coll.maps["ports"]
        eth0.attach_xdp(coll.programs["ingress"])
        rq = eth0.rx[0]

        def run() -> None:
            rq.source = TrafficGenerator(packets=frames, count=200)
            h.run()
            st = rq.native
            kept.append(None if st is None else (id(st._tables), id(h.fwd.tables)))

        ports[0] = struct.pack("<Ii", eth1.ifindex, 0)
        run()
        run()  # nothing changed: the same tables
        ports[0] = struct.pack("<Ii", eth2.ifindex, 0)  # the map written: seen at once
        run()
        eth2.up = False  # a device changed: the targets remade, -ENETDOWN now
        run()
        tr = h.tracer
        events = {name: sorted((k[:2], list(v)) for k, v in getattr(tr, name).counters.items())
                  for name in ("xdp_redirect", "xdp_redirect_err", "xdp_devmap_xmit")}
        return ({d.name: d.stats.asdict() for d in h.devices.values()}, events), kept


def test_call_tables_are_kept_and_follow_changes() -> None:
    """The native call's tables are state kept between calls: the same objects while
    nothing changes, remade after a devmap write or a device change, and what the
    native loop does then is what the Python path does."""
    native, kept = _steps(True)
    python, _ = _steps(False)
    assert native == python
    assert kept[0] is not None and kept[0] == kept[1]
    assert kept[2][0] != kept[1][0]  # the devmap was written
    assert kept[3][1] != kept[2][1]  # a device changed
    assert native[0]["eth1"]["tx_packets"] == 400 and native[0]["eth2"]["tx_packets"] == 200


# -- veth targets (veth_xdp_xmit into the peer's xdp_ring) -------------------------------------

def _run_veth(native: bool, flags: int, *, layout: str = "progs", map_type: int = DEVMAP,
              count: int = 1500) -> tuple[object, ...]:
    """Redirects from a NIC to veths: one whose peer takes frames to its stack (GRO),
    one with an entry program whose peer runs XDP_PASS at a smaller MTU (a 1400-byte
    frame stops veth_xdp_xmit there), one whose peer is down (no NAPI: -ENXIO), and
    the ingress NIC itself with a second program."""
    with Host(tracer=Tracer(), engine="jit", native=native) as h:
        eth0 = h.add_device("eth0")
        v0, v1 = h.veth("veth0", "veth1")
        v2, v3 = h.veth("veth2", "veth3")
        v4, v5 = h.veth("veth4", "veth5")
        coll = h.load(_spec(flags, map_type), verify=False)
        passing = h.load(asm_collection("r0 = 2\nexit", [])).programs["t"]
        v1.gro = True
        v3.mtu = 1000
        v3.attach_xdp(passing)
        v5.gro = True
        v5.up = False
        ports = coll.maps["ports"]
        egress = coll.programs["egress"].fd if layout == "progs" else 0
        ports[0] = struct.pack("<Ii", v0.ifindex, 0)
        ports[1] = struct.pack("<Ii", v2.ifindex, egress)
        ports[2] = struct.pack("<Ii", v4.ifindex, 0)
        ports[3] = struct.pack("<Ii", eth0.ifindex, coll.programs["egress2"].fd)
        eth0.attach_xdp(coll.programs["ingress"])
        seen: dict[int, list[bytes]] = {}

        def received(b: SkbBatch) -> None:
            for i, p in zip(b.ifindex.tolist(), b.packets(), strict=True):
                seen.setdefault(int(i), []).append(p)

        h.stack.on_receive(received)
        eth0.rx[0].source = TrafficGenerator(packets=frames_by_payload(), count=count)
        h.run()
        tr = h.tracer
        mid = ports.handle.id

        def key(k: tuple[int, ...], name: str) -> tuple[int, ...]:
            return (*k[:2], -1, *k[3:]) if name == "xdp_redirect" and k[2] == mid else k

        events = {name: sorted((key(k, name), list(v))
                               for k, v in getattr(tr, name).counters.items())
                  for name in ("xdp_redirect", "xdp_redirect_err", "xdp_devmap_xmit",
                               "xdp_exception")}
        pools = [(rq.pool.get_stats(), rq.pool.state.words.tolist())
                 for d in h.devices.values() for rq in d.rx]
        system = h.memmap.system
        return ({d.name: d.stats.asdict() for d in h.devices.values()}, events,
                sorted(coll.maps["seen"].items()), {k: len(v) for k, v in seen.items()},
                seen, pools, (system.allocated, system.freed, system.nr_free))


@pytest.mark.parametrize(("layout", "flags", "map_type"), [
    ("progs", 0, DEVMAP),
    ("progs", 0, DEVMAP_HASH),
    ("progs", BPF_F_BROADCAST, DEVMAP),
    ("bcast", BPF_F_BROADCAST, DEVMAP),
    ("bcast", BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS, DEVMAP_HASH),
])
def test_veth_targets_native_is_python(layout: str, flags: int, map_type: int) -> None:
    """Redirects and broadcasts into veths in the native loop give what the Python path
    gives: frames at the peers' stacks (bytes and order), device counters,
    xdp_devmap_xmit sums with -ENXIO counted, pools and the system allocator."""
    native = _run_veth(True, flags, layout=layout, map_type=map_type)
    python = _run_veth(False, flags, layout=layout, map_type=map_type)
    assert native == python
    stats, events = native[0], native[1]
    assert isinstance(stats, dict) and isinstance(events, dict)
    assert stats["veth0"]["tx_packets"] > 0 and stats["veth2"]["tx_packets"] > 0
    assert any(v[3] for _k, v in events["xdp_devmap_xmit"])  # veth4's -ENXIO


@pytest.mark.parametrize(("layout", "flags", "deferred"), [
    ("progs", 0, 0),
    ("progs", BPF_F_BROADCAST, 0),
    ("bcast", BPF_F_BROADCAST, 0),
    ("bcast", BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS, 0),
])
def test_veth_targets_run_natively(layout: str, flags: int, deferred: int,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing of those redirects is handed to the Python dispatch any more."""

    seen = _deferred(monkeypatch, "eth0")
    _run_veth(True, flags, layout=layout, count=960)
    assert sum(seen) == deferred


def test_threaded_napi_veth_targets_native(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threaded NAPI: a NIC's two queues (CPUs 0 and 1, polled by two threads at once)
    redirect into one veth natively, whose peer's poll (on CPU 0's thread) empties
    its xdp_ring meanwhile: producers and consumer meet at the ring's lock. Nothing
    is handed to the Python dispatch, every frame is sent or counted as dropped
    (the full ring), the peer's stack gets every one sent, and the pages balance
    (the host's close checks them)."""

    deferred = _deferred(monkeypatch, "eth0")
    count = 1000
    with Host(tracer=Tracer(), engine="jit", threaded_napi=True) as h:
        eth0 = h.add_device("eth0", rx_queues=2)
        v0, v1 = h.veth("veth0", "veth1")
        coll = h.load(_spec(0), verify=False)
        v1.attach_xdp(h.load(asm_collection("r0 = 2\nexit", [])).programs["t"])
        for slot in range(4):
            coll.maps["ports"][slot] = struct.pack("<Ii", v0.ifindex, 0)
        eth0.attach_xdp(coll.programs["ingress"])
        assert h.fwd.arrays(h.devices)[0][v0.ifindex] == 1  # a native target
        got = [0]
        h.stack.on_receive(lambda b: got.__setitem__(0, got[0] + int((b.ifindex
                                                                      == v1.ifindex).sum())))
        for rq in eth0.rx:
            rq.source = TrafficGenerator(packets=frames_by_payload()[:48], count=count)
        h.run()
        assert {rq.ctx.cpu for rq in eth0.rx} == {0, 1}
        assert sum(deferred) == 0
        xmit = [list(v) for k, v in h.tracer.xdp_devmap_xmit.counters.items()]
        sent = sum(v[1] for v in xmit)
        drops = sum(v[2] for v in xmit)
        assert sent + drops == 2 * count
        assert v0.stats.tx_packets == sent == got[0] == v1.stats.xdp_pass
        assert sent > 0 and len(v1.rx[0].ring) == 0


@pytest.mark.parametrize("mode", ["native", "generic"])
@pytest.mark.parametrize("target", ["nic", "veth"])
def test_unlocked_poll_redirects_to_devices_native(target: str, mode: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Threaded NAPI: a NIC's two queues (CPUs 0 and 1) run a program with no map but
    arrays - their polls take no host lock - and bpf_redirect every frame to one
    device (a NIC whose transmit is a sink, or a veth: onto its peer's xdp_ring, or
    in generic mode to the peer's stack): natively, nothing handed to the Python
    dispatch; the target's transmit counters go into its row for each polling CPU
    and its stats view sums them; the Python path gives the same counters, stack
    deliveries and tracepoints (the vethlab scenario redirect_ifindex_threaded
    checks a veth against Linux)."""
    import pyxdp.net.dev as dev_mod
    from pyxdp.net import napi

    deferred = [0]
    orig, act = napi._dispatch_deferred, dev_mod.generic_xdp_act

    def spy(host: Host, dev: object, rq: object, prog: object, frames: object, v: object,
            bq: object) -> None:
        deferred[0] += len(frames)  # type: ignore[arg-type]
        orig(host, dev, rq, prog, frames, v, bq)  # type: ignore[arg-type]

    def counted(dev: object, prog: object, out: object, *a: object) -> None:
        deferred[0] += len(out)  # type: ignore[arg-type]
        act(dev, prog, out, *a)  # type: ignore[arg-type]

    def run(native: bool) -> tuple[object, ...]:
        with Host(tracer=Tracer(), engine="jit", native=native, threaded_napi=True) as h:
            eth0 = h.add_device("eth0", rx_queues=2)
            sink = h.add_device("eth1")
            v0, v1 = h.veth("veth0", "veth1")
            if mode == "native":
                v1.attach_xdp(h.load(asm_collection("r0 = 2\nexit", [])).programs["t"])
            to = sink if target == "nic" else v0
            coll = h.load(asm_collection(f"r1 = {to.ifindex}\nr2 = 0\ncall 23\nexit"))
            eth0.attach_xdp(coll.programs["t"], mode=mode)
            for q, rq in enumerate(eth0.rx):
                rq.source = TrafficGenerator(flows=8, sizes=[64, 300], seed=5 + q, count=1000)
            h.run()
            assert {rq.ctx.cpu for rq in eth0.rx} == {0, 1}
            rows = [r.tx_packets for r in to.cpu_stats]
            return ({d.name: d.stats.asdict() for d in h.devices.values()}, h.stack.per_device,
                    {n: sorted((k, list(v)) for k, v in getattr(h.tracer, n).counters.items())
                     for n in ("xdp_redirect", "xdp_redirect_err", "xdp_devmap_xmit")}, rows)

    monkeypatch.setattr(napi, "_dispatch_deferred", spy)
    monkeypatch.setattr(dev_mod, "generic_xdp_act", counted)
    got = run(True)
    assert deferred[0] == 0
    rows = got[3]
    assert isinstance(rows, list)
    # Both CPUs counted, each in its row (a veth's ring may refuse one CPU's every frame).
    full = target == "nic" or mode == "generic"
    assert all(rows) if full else any(rows)
    monkeypatch.undo()
    stats = got[0]
    assert isinstance(stats, dict)
    assert stats["eth1" if target == "nic" else "veth0"]["tx_packets"] == sum(rows)
    if full:
        assert got[:3] == run(False)[:3]
    else:  # which frames the peer's full ring takes depends on how the threads interleave
        xmit = got[2]["xdp_devmap_xmit"]  # type: ignore[index]
        sent = sum(v[1] for _, v in xmit)
        assert sent + sum(v[2] for _, v in xmit) == 2000
        per_device = got[1]
        assert isinstance(per_device, dict)  # only veth1's stack receives
        assert stats["veth1"]["xdp_pass"] == sent == sum(rows) == sum(per_device.values())


# -- zero-copy AF_XDP frames redirected to devices (xdp_convert_zc_to_xdp_frame) ---------------

def _run_zc(native: bool, flags: int, *, progs: bool = False, map_type: int = DEVMAP,
            count: int = 600) -> tuple[object, ...]:
    """A zero-copy AF_XDP queue whose program redirects every frame to a device: a veth
    whose peer takes them to its stack, two NICs (one with a smaller MTU: the
    1400-byte frames fail there), the ingress NIC itself; with ``progs`` two entries
    have a devmap program. Each frame is copied into an order-0 page and its chunk
    goes back to the pool."""
    from pyxdp.xsk.datapath import PyxdpXskSocket
    from pyxdp.xsk.umem import Umem
    with Host(tracer=Tracer(), engine="jit", native=native) as h:
        eth0 = h.add_device("eth0")
        eth1 = h.add_device("eth1")
        eth2 = h.add_device("eth2", mtu=1000)
        v0, v1 = h.veth("veth0", "veth1")
        v1.gro = True
        coll = h.load(_spec(flags, map_type), verify=False)
        ports = coll.maps["ports"]
        egress = coll.programs["egress"].fd if progs else 0
        ports[0] = struct.pack("<Ii", v0.ifindex, 0)
        ports[1] = struct.pack("<Ii", eth1.ifindex, egress)
        ports[2] = struct.pack("<Ii", eth2.ifindex, 0)
        ports[3] = struct.pack("<Ii", eth0.ifindex, 0)
        eth0.attach_xdp(coll.programs["ingress"])
        umem = Umem(512, 2048)
        sock = PyxdpXskSocket(eth0, 0, umem, mode="zerocopy", fill_size=512, comp_size=512,
                              rx_size=512, tx_size=64)
        sock.fill(256)
        seen: list[tuple[int, bytes]] = []
        h.stack.on_receive(lambda b: seen.extend(
            zip(b.ifindex.tolist(), b.packets(), strict=True)))
        eth0.rx[0].source = TrafficGenerator(packets=[p[:1024] for p in frames_by_payload()],
                                             count=count)
        h.run()
        pool = sock.xpool
        assert pool is not None
        pool.check()
        tr = h.tracer
        mid = ports.handle.id

        def key(k: tuple[int, ...], name: str) -> tuple[int, ...]:
            return (*k[:2], -1, *k[3:]) if name == "xdp_redirect" and k[2] == mid else k

        events = {name: sorted((key(k, name), list(v))
                               for k, v in getattr(tr, name).counters.items())
                  for name in ("xdp_redirect", "xdp_redirect_err", "xdp_devmap_xmit",
                               "xdp_exception")}
        system = h.memmap.system
        out = ({d.name: d.stats.asdict() for d in h.devices.values()}, events,
               sorted(coll.maps["seen"].items()), seen, sock.statistics(),
               pool.free_list_cnt, sorted(pool._free[:pool.free_list_cnt].tolist()),
               (system.allocated, system.freed, system.nr_free))
        sock.close()
        umem.close()
        return out


@pytest.mark.parametrize(("flags", "map_type", "progs"), [
    (0, DEVMAP, False),
    (0, DEVMAP_HASH, False),
    (0, DEVMAP, True),
    (BPF_F_BROADCAST, DEVMAP, True),
    (BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS, DEVMAP_HASH, False),
])
def test_zero_copy_redirects_to_devices_native_is_python(
        flags: int, map_type: int, progs: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Zero-copy frames redirected to NICs and a veth (xdp_convert_zc_to_xdp_frame, then
    the devmap bulk queues) give in the native loop what the Python path gives:
    frames and bytes at the veth peer's stack, device and socket counters, the
    pool's free list, the system allocator, xdp_redirect, xdp_redirect_err,
    xdp_devmap_xmit and xdp_exception counts, the devmap program's map (``progs``:
    it runs over the order-0 pages); broadcasts clone the order-0 copy. Nothing is
    handed to Python, not even the error path (a frame too long for eth2)."""

    seen = _deferred(monkeypatch, "eth0")
    native = _run_zc(True, flags, progs=progs, map_type=map_type)
    monkeypatch.undo()
    python = _run_zc(False, flags, progs=progs, map_type=map_type)
    assert native == python
    stats = native[0]
    assert isinstance(stats, dict)
    assert stats["veth0"]["tx_packets"] > 0 and stats["eth1"]["tx_packets"] > 0
    assert native[3]  # frames reached veth1's stack
    # Slot 2 with the 1024-byte cut of a 1400-byte frame: too long for eth2, an error
    # path the native loop takes too (a broadcast only skips eth2 for those).
    assert sum(seen) == 0
    if not flags & BPF_F_BROADCAST:
        too_long = sum(1 for i in range(600) if i % 96 % 4 == 2 and i % 96 % 3 == 2)
        errs = native[1]["xdp_redirect_err"]  # type: ignore[index]
        assert [(k[1], v) for k, v in errs] == [(-errno.EMSGSIZE, [too_long])]
    if progs:  # the program ran on eth1's frames: its per-egress counter moved
        assert any(int.from_bytes(v, "little") if isinstance(v, bytes) else int(v)
                   for _k, v in native[2])  # type: ignore[attr-defined]


# -- redirect error paths (xdp_redirect_err) in the native loop ---------------------------------

@pytest.mark.parametrize("name", ["devmap_redirect_mtu", "devmap_redirect_no_peer_prog",
                                  "redirect_ifindex_missing", "redirect_to_lo"])
def test_redirect_errors_run_natively(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The vethlab scenarios whose native-mode redirects fail (-EMSGSIZE, -EOPNOTSUPP
    for a veth whose peer has no NAPI and for lo, -EINVAL) hand nothing to the
    Python dispatch and give what the Python path gives (which the kernel tests
    compare with Linux): frames, maps, tracepoint counts, device counters. (veth3's
    XDP_PASS of what arrives there is deferred: the lab watches the stacks through
    a callback, which the Python path calls.)"""
    from pyxdp.net import napi
    from pyxdp.testing import vethlab

    deferred: list[int] = []
    orig_native = napi._dispatch_deferred

    def spy(host: Host, dev: object, rq: object, prog: object, frames: object, v: object,
            bq: object) -> None:
        if getattr(dev, "name", "") == "veth0":  # the redirecting device
            deferred.append(len(frames))  # type: ignore[arg-type]
        orig_native(host, dev, rq, prog, frames, v, bq)  # type: ignore[arg-type]

    sc = vethlab.SCENARIOS[name]()
    monkeypatch.setattr(napi, "_dispatch_deferred", spy)
    fast = vethlab.run_pyxdp(sc, events=False)
    monkeypatch.undo()
    assert sum(deferred) == 0
    ref = vethlab.run_pyxdp(sc, events=False, native=False)
    assert vethlab.lab_differences(ref, fast, sc, links=True) == []
    assert fast.trace["xdp_redirect_err"].events > 0
