"""Generic XDP's verdicts acted on per target, not per skb (``pyxdp.net.dev.generic_xdp_act``):
``generic_xdp_tx`` as one list, ``xdp_do_generic_redirect`` one group per target
(ifindex, devmap entry with or without an entry program, broadcast, cpumap entry).

The kernel takes these skbs one at a time; the reference here is the same datapath
fed one skb per call (each call's verdicts act on a single skb, as the per-skb loop
did). A mixed list - short skbs, long ones linearised or with frags, every verdict
and the errors (a full cpumap ring, an empty devmap slot, a down device, a
too-small MTU, no device at an ifindex) - must give the same device counters, stack
counters, trace counts, wire captures, cpumap ring contents and page states."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import numpy as np
import pytest

from pyxdp.net import dev as devmod
from pyxdp.net import packets as pk
from pyxdp.net.cpumap import cpumap_runtime
from pyxdp.net.netdevice import Host
from pyxdp.net.prog import jit_available
from pyxdp.net.source import Collector
from pyxdp.net.stack import SkbBatch
from pyxdp.net.trace import Tracer
from pyxdp.spec import BPF_F_XDP_HAS_FRAGS, CollectionSpec, MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfAttachType, BpfMapType, RedirectFlag

ENGINES = ["interp", pytest.param("jit", marks=pytest.mark.skipif(
    not jit_available(), reason="llvmlite is not installed: no JIT"))]
MAPS = [MapSpec("ports", int(BpfMapType.BPF_MAP_TYPE_DEVMAP), 4, 8, 4),
        MapSpec("cpus", int(BpfMapType.BPF_MAP_TYPE_CPUMAP), 4, 8, 2)]

# Verdict by payload byte 42: below 4 that verdict (0 ABORTED, 1 DROP, 2 PASS, 3 TX),
# 4-7 devmap slots 0-3, 8-11 bpf_redirect to ifindex base+8..base+11, 12 to
# ifindex 200 (no device), 13 broadcast
# (BPF_F_EXCLUDE_INGRESS), 14 cpumap slot 0 (a small ring), 15 cpumap slot 1
# (empty), anything else that value (unknown verdicts).
PROG = """
    r6 = r1
    r2 = *(u32 *)(r6 +0)
    r3 = *(u32 *)(r6 +4)
    r4 = r2
    r4 += 43
    r0 = 2
    if r4 > r3 goto out
    r7 = *(u8 *)(r2 +42)
    r0 = r7
    if r7 < 4 goto out
    if r7 > 7 goto ifx
    r1 = map[fd:0]
    r2 = r7
    r2 -= 4
    r3 = 0
    call bpf_redirect_map
    exit
ifx:
    if r7 > 12 goto bcast
    r1 = IFX_BASE
    r1 += r7
    if r7 < 12 goto send
    r1 = 200
send:
    r2 = 0
    call bpf_redirect
    exit
bcast:
    if r7 > 13 goto cpu
    r1 = map[fd:0]
    r2 = 0
    r3 = BCAST
    call bpf_redirect_map
    exit
cpu:
    if r7 > 15 goto out
    r1 = map[fd:1]
    r2 = r7
    r2 -= 14
    r3 = 0
    call bpf_redirect_map
out:
    exit
"""
# A devmap entry program whose verdict is the payload's second byte (PASS past 9).
EGRESS = """
    r2 = *(u32 *)(r1 +0)
    r3 = *(u32 *)(r1 +4)
    r4 = r2
    r4 += 44
    r0 = 2
    if r4 > r3 goto out
    r0 = *(u8 *)(r2 +43)
    if r0 < 10 goto out
    r0 = 2
out:
    exit
"""


def _spec(base: int, frags: bool) -> CollectionSpec:
    text = PROG.replace("IFX_BASE", str(base)).replace(
        "BCAST", str(int(RedirectFlag.BPF_F_BROADCAST | RedirectFlag.BPF_F_EXCLUDE_INGRESS)))
    main = asm_collection(text, MAPS).programs["t"]
    if frags:
        main = dataclasses.replace(main, section="xdp.frags", flags=BPF_F_XDP_HAS_FRAGS)
    eg = dataclasses.replace(asm_collection(EGRESS, MAPS).programs["t"], name="eg",
                             section="xdp/devmap",
                             expected_attach_type=int(BpfAttachType.BPF_XDP_DEVMAP))
    if frags:  # the devmap's owner is the main program: its entries' must match (Linux)
        eg = dataclasses.replace(eg, section="xdp.frags/devmap", flags=BPF_F_XDP_HAS_FRAGS)
    return CollectionSpec({"t": main, "eg": eg}, {m.name: m for m in MAPS}, license="GPL")


def frame(size: int, sel: int, sub: int, i: int) -> bytes:
    """A UDP frame of ``size`` bytes whose payload starts with the selector and the
    entry program's verdict; past a datagram's limit cut from a longer pattern."""
    head = pk.udp_packet(bytes([sel, sub]) + b"batched", sport=1000 + i, dport=9000,
                         size=min(size, 9014))
    return head + bytes((k * 5 + i) & 0xFF for k in range(max(size - len(head), 0)))


SIZES = (64, 1400, 3600, 9000, 20000)


def mixed_frames() -> list[bytes]:
    """Every selector (and entry verdict) on every size, interleaved."""
    out = []
    i = 0
    for sub in (2, 1, 0, 9):
        for size in SIZES:
            for sel in range(18):
                out.append(frame(size, sel, sub, i))
                i += 1
    return out


def run(engine: str, frames: list[bytes], *, frags: bool, one_by_one: bool) -> tuple[Any, ...]:
    """``frames`` received on eth0 (generic program): as one list, or one skb per call."""
    with Host(tracer=Tracer(), engine=engine, native=False) as h:
        eth = h.add_device("eth0", mtu=9000)
        sink = h.add_device("eth1", mtu=9000)
        small = h.add_device("eth2", mtu=1500)
        wired = h.add_device("eth3", mtu=9000)
        cap = Collector()
        wired.wire.append(cap)
        v0, v1 = h.veth("veth0", "veth1", mtu=9000)
        down = h.add_device("eth4", mtu=9000)
        down.up = False
        base = sink.ifindex - 8  # 8 eth1, 9 eth2, 10 eth3, 11 veth0
        assert (small.ifindex, wired.ifindex, v0.ifindex) == (base + 9, base + 10, base + 11)
        assert 200 not in h.devices and v1.xdp_prog is None
        coll = h.load(_spec(base, frags))
        ports = coll.maps["ports"]
        ports[0] = struct.pack("<Ii", sink.ifindex, 0)
        ports[1] = struct.pack("<Ii", down.ifindex, 0)
        ports[2] = struct.pack("<Ii", wired.ifindex, coll.programs["eg"].fd)
        ports[3] = struct.pack("<Ii", v0.ifindex, 0)
        coll.maps["cpus"][0] = struct.pack("<Ii", 4, 0)  # qsize 4, no program
        eth.attach_xdp(coll.programs["t"], mode="generic")
        got: list[tuple[int, bytes]] = []
        h.stack.on_receive(lambda b: got.extend(zip(b.ifindex.tolist(), b.packets(),
                                                    strict=True)))
        free0 = h.memmap.system.nr_free
        batch = SkbBatch.from_packets(frames, eth.ifindex)
        if one_by_one:
            for i in range(len(frames)):
                devmod.netif_receive_skb_list(eth, devmod._select(batch, np.array([i])))
        else:
            devmod.netif_receive_skb_list(eth, batch)
        rt = cpumap_runtime(h, coll.maps["cpus"].handle, 0)
        ring = rt.queue.consume(64)
        queued = [(int(ring[1, j]), int(ring[2, j]),
                   h.memmap.system.pages[h.memmap.system.local([int(ring[0, j])])[0],
                                         int(ring[1, j]):int(ring[1, j] + ring[2, j])]
                   .tobytes()) for j in range(ring.shape[1])]
        h.memmap.system.put_pages(ring[0])
        mids = {coll.maps["ports"].handle.id: -1, coll.maps["cpus"].handle.id: -2}
        at = {"xdp_redirect": 2, "xdp_cpumap_enqueue": 0}  # the map id's place in a key

        def key(k: tuple[int, ...], name: str) -> tuple[int, ...]:
            i = at.get(name, -1)  # ids differ between hosts
            return k if i < 0 else (*k[:i], mids.get(k[i], k[i]), *k[i + 1:])
        events = {name: sorted((key(k, name), list(v))
                               for k, v in getattr(h.tracer, name).counters.items())
                  for name in ("xdp_redirect", "xdp_redirect_err", "xdp_exception",
                               "xdp_cpumap_enqueue")}
        stats = {d.name: d.stats.asdict() for d in h.devices.values()}
        return (stats, h.stack.stats, h.stack.per_device, events, sorted(got), queued,
                cap.frames, h.memmap.system.nr_free - free0, list(eth.faults))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("frags", [False, True])
def test_batched_verdicts_match_one_skb_at_a_time(engine: str, frags: bool) -> None:
    """The list's verdicts give what its skbs give one per call: every device's
    counters, the stack's (but its lists: XDP_PASS skbs of one call are one list),
    trace counts, the wire's capture in order, the cpumap ring's frames, no page
    left; the skbs a veth's peer receives from generic_xdp_tx/redirects are lists
    of one either way."""
    frames = mixed_frames()
    got = run(engine, frames, frags=frags, one_by_one=False)
    want = run(engine, frames, frags=frags, one_by_one=True)
    assert dataclasses.replace(got[1], batches=0) == dataclasses.replace(want[1], batches=0)
    assert got[:1] + got[2:] == want[:1] + want[2:]
    stats, stack, events = got[0], got[1], got[3]
    per_sel = len(frames) // 18  # 20 skbs of each selector, 8 of them short
    # PASS: one list per run of skbs prepared alike (4 x short, then 3600, 9000 and
    # 20000 bytes linearised or all three with frags); veth1's stack: 32 lists of one
    # (slot 3 and ifindex 11, but 20000 bytes).
    assert stack.batches == (8 if frags else 16) + 32 and want[1].batches == per_sel + 32
    assert stats["veth1"]["rx_packets"] == 32
    assert stats["eth0"]["xdp_tx"] == per_sel and stats["eth0"]["tx_packets"] == per_sel
    # 4-14 redirect; 15 (an empty cpumap slot) is bpf_redirect_map's XDP_ABORTED.
    assert stats["eth0"]["xdp_redirect"] == per_sel * 11
    assert stats["eth0"]["xdp_aborted"] == per_sel * 4
    errs: dict[int, int] = {}
    for (_ifx, err), v in events["xdp_redirect_err"]:
        errs[err] = errs.get(err, 0) + v[0]
    # ENETDOWN: slot 1 and the broadcasts past eth1; EMSGSIZE: 20000 bytes at every
    # 9000-MTU target, eth2's 3600+; EOVERFLOW: long skbs to the cpumap; EINVAL: no
    # device at ifindex 200; ENOSPC: a ring of 4 for 8 short skbs.
    assert errs == {-100: 20 + 16, -90: 7 * 4 + 12, -75: 12, -22: 20, -28: 4}
    assert dict(events["xdp_cpumap_enqueue"])[(-2, 0, 0)] == [8, 4, 4]
    assert len(got[5]) == 4 and stats["eth3"]["tx_packets"] == len(got[6]["eth3"])
    assert got[7] == 0  # every page back (the cpumap ring's taken above)
