"""Multi-buffer frames in the native NAPI poll against the Python reference poll: a
frags-aware program over mixed single- and multi-buffer batches (64 to 15000 bytes)
returning every verdict - DROP, ABORTED, an unknown one, PASS, TX, TX after a
tail shrink that releases frags, redirects to devmap slots (a NIC, one whose MTU
refuses the frame, the device itself, an empty slot), into a cpumap entry whose ring
fills, and into an AF_XDP socket whose fill ring runs dry - on a NIC (the DMA's
frames and the generator's) and on a veth (skbs copied into a pool that runs dry).
Both hosts must give the same device counters, trace counts, map values, frames on
the wires, stacks and sockets, and the same page pool and allocator records."""

from __future__ import annotations

import dataclasses
import errno
import random
import struct
from typing import Any

import numpy as np
import pytest

from pyxdp.net import packets as pk
from pyxdp.net.netdevice import Host, XdpFeatures
from pyxdp.net.prog import jit_available
from pyxdp.net.source import TrafficGenerator
from pyxdp.net.trace import Tracer
from pyxdp.spec import BPF_F_XDP_HAS_FRAGS, CollectionSpec, MapSpec
from pyxdp.testing.fragslab import PASS_FRAGS
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.xsk.datapath import PyxdpXskSocket
from pyxdp.xsk.umem import Umem

pytestmark = pytest.mark.skipif(not jit_available(), reason="llvmlite is not installed: no JIT")

# The payload's first byte (frame byte 42): bits 2-4 the verdict, bits 0-1 a devmap
# slot, bit 5 BPF_F_BROADCAST for the devmap redirect (verdict 12: 4 with it). Every
# run adds bpf_xdp_get_buff_len into lens[verdict].
PROG = """
    r6 = r1
    r1 = r6
    call 188
    r8 = r0
    r2 = *(u32 *)(r6 +0)
    r3 = *(u32 *)(r6 +4)
    r4 = r2
    r4 += 43
    r0 = 2
    if r4 > r3 goto out
    r7 = *(u8 *)(r2 +42)
    r9 = r7
    r9 >>= 2
    r9 &= 7
    *(u32 *)(r10 -4) = r9
    r1 = map[fd:1]
    r2 = r10
    r2 += -4
    call bpf_map_lookup_elem
    if r0 == 0 goto go
    r1 = *(u64 *)(r0 +0)
    r1 += r8
    *(u64 *)(r0 +0) = r1
go:
    r0 = 2
    if r9 == 0 goto out
    r0 = 1
    if r9 == 1 goto out
    if r9 == 2 goto bad
    r0 = 3
    if r9 == 3 goto out
    if r9 == 4 goto dev
    if r9 == 5 goto cpu
    if r9 == 6 goto xsk
    r1 = r6
    r2 = -6000
    call 65
    r0 = 3
    exit
bad:
    r0 = 0
    r1 = r7
    r1 &= 1
    if r1 == 0 goto out
    r0 = 9
    exit
dev:
    r2 = r7
    r2 &= 3
    r1 = map[fd:0]
    r3 = r7
    r3 >>= 2
    r3 &= 8
    call bpf_redirect_map
    exit
cpu:
    r1 = map[fd:2]
    r2 = 0
    r3 = 0
    call bpf_redirect_map
    exit
xsk:
    r1 = map[fd:3]
    r2 = 0
    r3 = 0
    call bpf_redirect_map
out:
    exit
"""
MAPS = [MapSpec("ports", int(BpfMapType.BPF_MAP_TYPE_DEVMAP), 4, 4, 4),
        MapSpec("lens", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 8),
        MapSpec("cpus", int(BpfMapType.BPF_MAP_TYPE_CPUMAP), 4, 8, 2),
        MapSpec("xsks", int(BpfMapType.BPF_MAP_TYPE_XSKMAP), 4, 4, 4)]
SIZES = (64, 1400, 3600, 9000, 15000)
TRACES = ("xdp_redirect", "xdp_redirect_err", "xdp_exception", "xdp_bulk_tx",
          "xdp_devmap_xmit", "xdp_cpumap_enqueue")


def _spec() -> CollectionSpec:
    spec = asm_collection(PROG, MAPS)
    t = spec.programs["t"]
    return dataclasses.replace(spec, programs={"t": dataclasses.replace(
        t, section="xdp.frags", flags=t.flags | BPF_F_XDP_HAS_FRAGS)})


def _frames(seed: int, verdicts: tuple[int, ...] = tuple(range(8))) -> list[bytes]:
    """Every verdict with every slot in every size, shuffled so that polls mix them."""
    out = [pk.udp_packet(bytes([v << 2 | slot]) + b"p" * 8, sport=1000 + k,
                         size=SIZES[k % len(SIZES)])
           for k, (v, slot) in enumerate((v, s) for v in verdicts for s in range(4)
                                         for _ in SIZES)]
    random.Random(seed).shuffle(out)
    return out


def _pools(h: Host, ordered: bool) -> list[tuple[object, ...]]:
    """Every rx queue's page pool: its state words and counters, and with ``ordered``
    its page states and the pages in its alloc cache and ring in order (else how many
    pages are in each state: the native loop acts on a poll's frames one by one, as a
    driver does, where the Python poll acts verdict by verdict, so the pages a TX
    completion and a drop free come back in another order, into the cache or, once
    it is full, the ring)."""
    out: list[tuple[object, ...]] = []
    for d in h.devices.values():
        for rq in d.rx:
            pool = rq.pool
            psc, cache, ring, free, state = pool.native_arrays
            if ordered:
                out.append((d.name, pool.get_stats(), pool.state.words.tolist(),
                            cache[:pool.alloc_count].tolist(), pool.ring_pages().tolist(),
                            state.tolist()))
            else:
                out.append((d.name, pool.get_stats(), pool.state.words.tolist(),
                            np.bincount(state, minlength=4).tolist()))
    return out


def _run(native: bool, feed: str, dry: bool, verdicts: tuple[int, ...] = tuple(range(8)),
         wire: bool = True, watch: bool = True, veth: bool = False,
         sg_vt0_only: bool = False) -> tuple[Any, ...]:
    """``wire``: eth1 shows what it sends to a wire sink (a target only the Python path
    sends to); without, its transmit is a sink and only the counters see it. ``watch``:
    the stack shows what it receives (a callback, which only the Python path calls);
    without, its counters, drop reasons, lists and route lookups stand for it.
    ``veth``: devmap slot 3 (else empty) is veth vt0, whose peer vt1 (MTU 9000: longer
    frames stop veth_xdp_xmit's bulk) passes what it gets to the stack with an
    ``xdp.frags`` program, and eth2 lacks NDO_XMIT_SG (multi-buffer frames there:
    -EOPNOTSUPP before its MTU's -EMSGSIZE); a veth rx's peer passes likewise what
    rx sends it (XDP_TX, veth_xdp_tx; redirects to rx itself). ``sg_vt0_only``: eth1
    and rx lack NDO_XMIT_SG too."""
    with Host(tracer=Tracer(), engine="jit", native=native) as h:
        if feed == "veth":
            rx, sender = h.veth("veth0", "veth1", mtu=16000)
        else:
            rx = h.add_device("eth0", mtu=16000)
        eth1 = h.add_device("eth1", mtu=16000)
        eth2 = h.add_device("eth2", mtu=1500)
        coll = h.load(_spec())
        ports = coll.maps["ports"]
        targets = [eth1, eth2, rx]
        if veth:
            vt0, vt1 = h.veth("vt0", "vt1", mtu=16000)
            vt1.mtu = 9000
            vt1.attach_xdp(h.load(PASS_FRAGS).programs["xdp_pass"])
            if feed == "veth":
                sender.attach_xdp(h.load(PASS_FRAGS).programs["xdp_pass"])
            for d in (eth2, eth1, rx) if sg_vt0_only else (eth2,):
                d.xdp_features = d.xdp_features & ~XdpFeatures.NETDEV_XDP_ACT_NDO_XMIT_SG
            targets.append(vt0)
        for slot, dev in enumerate(targets):
            ports[slot] = struct.pack("<I", dev.ifindex)
        if not dry:
            # A ring of 8: it fills. (Dry: no entry, -EINVAL - frames the inline kthread
            # holds would leave the pool as the two polls' different kthread timing has
            # it: the native loop hands over to the kthread before the ring is full.)
            coll.maps["cpus"][0] = struct.pack("<Ii", 8, 0)
        rx.attach_xdp(coll.programs["t"])
        wires: dict[str, list[bytes]] = {}
        if wire:
            eth1.wire.append(lambda dev, b: wires.setdefault(dev.name, []).extend(
                b.packets()))
        seen: list[Any] = []
        if watch:
            h.stack.on_receive(lambda s: seen.extend(zip(s.ifindex.tolist(), s.packets(),
                                                         strict=True)))
        pool = rx.rx[0].pool
        held = pool.alloc_bulk(pool.npages - 40) if dry else np.zeros(0, np.int64)
        got: list[bytes] = []
        with Umem(16, 4096) as u, PyxdpXskSocket(rx, 0, u, sg=True, fill_size=16,
                                                 comp_size=16, rx_size=16,
                                                 tx_size=16) as sock:
            coll.maps["xsks"][0] = sock.fd
            for rnd in range(3):
                sock.fill(8)  # fewer buffers than the frames sent there: ENOMEM drops
                frames = _frames(rnd, verdicts)
                if feed == "gen":
                    rx.rx[0].source = TrafficGenerator(packets=frames, count=len(frames))
                elif feed == "veth":
                    sender.transmit(frames)
                else:
                    for k in range(0, len(frames), 40):
                        rx.receive(frames[k:k + 40])
                h.run()
                b = sock.recv(64)
                got.extend(b.packets())
                sock.release(b)
            sock.check_accounting()
            polls = (rx.rx[0].py_polls, rx.rx[0].polls)
        if dry:
            pool.put_pages(held)
        h.run()
        h.check_memory()
        snap = h.tracer.snapshot().counters
        names = {m.handle.id: n for n, m in coll.maps.items()}  # ids differ between hosts

        def key(name: str, k: tuple[int, ...]) -> tuple[object, ...]:
            if name == "xdp_redirect" and k[2] in names:
                return (*k[:2], names[k[2]], *k[3:])
            if name == "xdp_cpumap_enqueue" and k[0] in names:
                return (names[k[0]], *k[1:])
            return k
        traces = {n: sorted((key(n, k), v) for k, v in snap.get(n, {}).items())
                  for n in TRACES}
        system = h.memmap.system
        if not watch:
            seen = [h.stack.counters(), h.stack.drop_reasons(), h.stack.per_device,
                    h.stack.stats.batches, h.stack.fib_lookups]
        return polls, (
            {d.name: d.stats.asdict() for d in h.devices.values()}, traces,
            sorted(coll.maps["lens"].items()), wires, sorted(seen) if watch else seen, got,
            _pools(h, verdicts == tuple(range(8))),
            (system.allocated, system.freed, system.nr_free))


@pytest.mark.parametrize(("feed", "dry"), [("dma", False), ("dma", True), ("gen", False),
                                           ("veth", False), ("veth", True)])
def test_frags_native_poll_is_the_python_poll(feed: str, dry: bool) -> None:
    """Native and Python polls agree exactly, and the native host's queue never went to
    the Python poll: its multi-buffer frames ran in the native loop."""
    (py_native, polls), fast = _run(True, feed, dry)
    _, ref = _run(False, feed, dry)
    names = ("stats", "traces", "lens", "wires", "stack", "socket", "pools", "system")
    for name, a, b in zip(names, fast, ref, strict=True):
        assert a == b, name
    assert py_native == 0 and polls > 0
    stats, _traces, lens = fast[0], fast[1], fast[2]
    rxname = "veth0" if feed == "veth" else "eth0"
    assert stats[rxname]["xdp_packets"] > 0 and all(v != b"\0" * 8 for _, v in lens)
    assert any(len(p) > 9000 for p in fast[3].get("eth1", []))  # a multi-buffer redirect
    assert any(len(p) > 3520 for _, p in fast[4])  # ... and PASS


@pytest.mark.parametrize("feed", ["dma", "gen"])
def test_frags_tx_and_redirect_to_nics_are_native(feed: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """XDP_TX of multi-buffer frames on a NIC whose transmit is a sink and their
    redirects through devmap slots without programs to NICs (eth1 a sink, eth2 whose
    MTU refuses the long ones, the NIC itself; an empty slot aborts) - whole frames counted,
    completion and refusals freeing frags then head - beside DROP, ABORTED and a tail
    shrink that releases frags: the native loop's own, nothing handed to Python, and
    the same records as the Python poll."""
    calls = _count_dispatches(monkeypatch)
    (py_native, polls), fast = _run(True, feed, False, (1, 2, 3, 4, 7), wire=False)
    assert calls[0] == 0 and py_native == 0 and polls > 0
    _, ref = _run(False, feed, False, (1, 2, 3, 4, 7), wire=False)
    names = ("stats", "traces", "lens", "wires", "stack", "socket", "pools", "system")
    for name, a, b in zip(names, fast, ref, strict=True):
        assert a == b, name
    eth0 = fast[0]["eth0"]
    assert eth0["xdp_tx"] == 3 * 2 * 4 * len(SIZES)
    assert eth0["tx_bytes"] > 3 * 4 * (9000 + 15000)  # whole multi-buffer frames
    assert fast[0]["eth1"]["tx_bytes"] > 3 * (9000 + 15000)  # redirected whole
    errs = dict(fast[1]["xdp_redirect_err"])
    # eth0 (ifindex 2; lo is 1): eth2's MTU refused the long frames' redirects (the
    # empty slot's bpf_redirect_map returned XDP_ABORTED)
    assert errs[(2, -errno.EMSGSIZE)]


def _count_dispatches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the polls' hand-offs to the Python dispatch (napi._dispatch_deferred)."""
    from pyxdp.net import napi
    calls = [0]
    orig = napi._dispatch_deferred

    def counted(*a: Any) -> None:
        calls[0] += 1
        orig(*a)
    monkeypatch.setattr(napi, "_dispatch_deferred", counted)
    return calls


def test_a_drop_only_frags_poll_stays_native() -> None:
    """DROP and ABORTED of multi-buffer frames are the native loop's own (frags, then
    head, recycled in order): nothing is handed to the Python dispatch."""
    spec = asm_collection("r0 = 1\nexit")
    t = spec.programs["t"]
    spec = dataclasses.replace(spec, programs={"t": dataclasses.replace(
        t, section="xdp.frags", flags=t.flags | BPF_F_XDP_HAS_FRAGS)})
    from pyxdp.net import napi
    calls = [0]
    orig = napi._dispatch_deferred

    def counted(*a: Any) -> None:
        calls[0] += 1
        orig(*a)
    napi._dispatch_deferred = counted  # type: ignore[assignment]
    try:
        with Host(tracer=Tracer(), engine="jit") as h:
            nic = h.add_device("eth0", mtu=9000)
            nic.attach_xdp(h.load(spec).programs["t"])
            nic.rx[0].source = TrafficGenerator(
                packets=[pk.udp_packet(b"x", size=n) for n in (9000, 64, 5000)], count=960)
            h.run()
            assert nic.stats.xdp_drops == 960 and nic.rx[0].py_polls == 0
            pool = nic.rx[0].pool
            assert pool.nr_in_use == 0
    finally:
        napi._dispatch_deferred = orig  # type: ignore[assignment]
    assert calls[0] == 0


@pytest.mark.parametrize("feed", ["dma", "gen", "veth"])
def test_frags_pass_and_cpumap_are_native(feed: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """XDP_PASS of multi-buffer frames (the skb read whole, head then frags, into the
    stack's demux; one list per poll; frags then head freed) and their redirects into a
    cpumap entry whose ring fills (the frags flag in the xdp_frame, the whole length in
    the ring, refusals freeing frags then head) beside single-buffer ones, DROP and
    ABORTED: the native loop's own, nothing handed to the Python dispatch, and the
    same stack counters, route lookups, device counters, traces and page records as
    the Python poll."""
    calls = _count_dispatches(monkeypatch)
    verdicts = (0, 1, 2, 5)
    (py_native, polls), fast = _run(True, feed, False, verdicts, wire=False, watch=False)
    assert calls[0] == 0 and py_native == 0 and polls > 0
    _, ref = _run(False, feed, False, verdicts, wire=False, watch=False)
    names = ("stats", "traces", "lens", "wires", "stack", "socket", "pools", "system")
    for name, a, b in zip(names, fast, ref, strict=True):
        assert a == b, name
    rx = fast[0]["veth0" if feed == "veth" else "eth0"]
    assert rx["xdp_pass"] == 3 * 4 * len(SIZES)
    assert sum(fast[4][2].values()) >= 3 * 4 * len(SIZES)  # the stack saw them all
    assert fast[4][4] > 0 and fast[1]["xdp_cpumap_enqueue"]


@pytest.mark.parametrize("feed", ["dma", "gen", "veth"])
def test_frags_redirects_to_veths_are_native(feed: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Redirects of multi-buffer frames to a veth (``veth_xdp_xmit``: whole frames onto
    its peer's ``xdp_ring`` with their frags flag, the bulk stopping at the first frame
    longer than the peer takes, the rest freed frags then head; the peer's
    ``xdp.frags`` program passes them whole to the stack) and to a NIC without
    NDO_XMIT_SG (-EOPNOTSUPP) beside NICs, DROP, PASS and XDP_TX (on a veth,
    ``veth_xdp_tx`` onto its peer's ring the same way): the native loop's own,
    nothing handed to the Python dispatch, and the same records as the Python poll."""
    calls = _count_dispatches(monkeypatch)
    verdicts = (0, 1, 3, 4)
    (py_native, polls), fast = _run(True, feed, False, verdicts, wire=False, watch=False,
                                    veth=True)
    assert calls[0] == 0 and py_native == 0 and polls > 0
    _, ref = _run(False, feed, False, verdicts, wire=False, watch=False, veth=True)
    names = ("stats", "traces", "lens", "wires", "stack", "socket", "pools", "system")
    for name, a, b in zip(names, fast, ref, strict=True):
        assert a == b, name
    vt0, vt1 = fast[0]["vt0"], fast[0]["vt1"]
    assert vt1["xdp_pass"] == vt0["tx_packets"] > 0 and vt0["tx_bytes"] > 3520
    vt0_xmit = [v for k, v in fast[1]["xdp_devmap_xmit"] if k[1] == 6 - (feed != "veth")]
    assert vt0_xmit[0][2] > 0  # frames past the one too long for vt1: dropped
    # eth2: the 3600, 9000 and 15000-byte frames of each round (rx is ifindex 2)
    assert dict(fast[1]["xdp_redirect_err"])[(2, -errno.EOPNOTSUPP)] == (3 * 3,)
    if feed == "veth":  # rx's XDP_TX: whole frames to veth1, which passed them
        rx_stats, sender = fast[0]["veth0"], fast[0]["veth1"]
        assert rx_stats["xdp_tx"] == 3 * 4 * len(SIZES) and sender["xdp_pass"] > 3 * 4 * 4
        assert rx_stats["tx_bytes"] > 3 * 4 * (9000 + 15000)


@pytest.mark.parametrize("sg_vt0_only", [False, True])
@pytest.mark.parametrize("feed", ["dma", "veth"])
def test_frags_broadcasts_are_native(feed: str, sg_vt0_only: bool,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Broadcasts (``BPF_F_BROADCAST``) of multi-buffer frames over a devmap of NICs
    and veths without programs, as Linux 6.18's ``dev_map_enqueue_multi`` (measured):
    a target is valid for a frame when it has ``NDO_XMIT_SG`` and its MTU takes the
    whole frame; ``dev_map_enqueue_clone`` refuses a frags frame, so with two valid
    targets (eth1, vt0; eth0 too) none gets it and the redirect fails, -EOPNOTSUPP;
    with one (``sg_vt0_only``) vt0 gets it whole, its peer's MTU stopping the longest.
    Single-buffer ones are cloned to every target as before (eth2's MTU lets 1400
    bytes through). The native loop's own, nothing handed to the Python dispatch, and
    the same records as the Python poll."""
    calls = _count_dispatches(monkeypatch)
    verdicts = (1, 12)
    (py_native, polls), fast = _run(True, feed, False, verdicts, wire=False, watch=False,
                                    veth=True, sg_vt0_only=sg_vt0_only)
    assert calls[0] == 0 and py_native == 0 and polls > 0
    _, ref = _run(False, feed, False, verdicts, wire=False, watch=False, veth=True,
                  sg_vt0_only=sg_vt0_only)
    names = ("stats", "traces", "lens", "wires", "stack", "socket", "pools", "system")
    for name, a, b in zip(names, fast, ref, strict=True):
        assert a == b, name
    stats, traces = fast[0], fast[1]
    single = 3 * 4 * 2  # 3 rounds, 4 slots, 64 and 1400 bytes
    frags = 3 * 4 * 3  # 3600, 9000 and 15000 bytes
    assert stats["vt1"]["xdp_pass"] == stats["vt0"]["tx_packets"]
    for d in ("eth1", "eth2"):
        assert stats[d]["tx_packets"] == single  # clones: single-buffer frames only
    errs = dict(traces["xdp_redirect_err"])
    # what the four targets' bulks took: sent, or dropped by veth_xdp_xmit
    bulked = sum(v[1] + v[2] for _, v in traces["xdp_devmap_xmit"])
    if sg_vt0_only:
        # the multi-buffer ones whole: vt1's MTU (9000) takes some
        assert bulked == 4 * single + frags
        assert stats["vt0"]["tx_bytes"] > stats["vt0"]["tx_packets"] * 1400
        assert not errs
    else:
        assert bulked == 4 * single
        assert stats["vt0"]["tx_packets"] == single
        assert errs[(2, -errno.EOPNOTSUPP)] == (frags,)
