"""Multi-buffer XDP (frags) on pyxdp's datapath, without root: long frames become a head
buffer plus page frags (skb_shared_info at the kernel's offsets), frags-aware programs
run on them, every verdict keeps or frees all of a frame's pages (each host's page
accounting is checked when it closes), and the native poll loop and the Python path
give the same results. ``tests/kernel/test_frags_kernel.py`` compares with Linux."""

from __future__ import annotations

import errno
import struct
from typing import Any

import numpy as np
import pytest

from pyxdp.collection import Collection
from pyxdp.errors import KernelError
from pyxdp.net import packets as pk
from pyxdp.net.netdevice import Host, XdpFeatures
from pyxdp.net.stack import SkbBatch
from pyxdp.net.trace import Tracer
from pyxdp.net.xdp_mem import xdp_buff_frags
from pyxdp.samples import DIR as SAMPLES
from pyxdp.testing import vethlab
from pyxdp.testing.fragslab import (
    PASS_FRAGS,
    frags_broadcast,
    frags_cpumap,
    frags_devmap_hash_entry,
    frags_generic,
    frags_veth,
)


def _stats(coll: Collection, slot: int) -> tuple[int, ...]:
    """samples/frags.o's stats slot: packets, buff_len, head_len, probe, err."""
    v = coll.maps["stats"][slot]
    return (v["packets"], v["buff_len"], v["head_len"], v["probe"], v["err"])


def test_a_long_frame_is_a_head_and_page_frags() -> None:
    """A 9014-byte frame on a 9000-MTU NIC: 3520 bytes in the head page (after 256 of
    headroom), then frags of 4096 and 1398 bytes from the same page pool, listed in
    the head's skb_shared_info; the program sees the head in data..data_end and the
    whole frame through bpf_xdp_get_buff_len and bpf_xdp_load_bytes."""
    with Host(tracer=Tracer(), native=False) as h:
        nic = h.add_device("eth0", mtu=9000)
        coll = h.load(SAMPLES / "frags.o")
        nic.attach_xdp(coll.programs["xdp_frags"])
        frame = pk.udp_packet(b"x", dport=9001, size=9014)
        nic.receive([frame])
        rq = nic.rx[0]
        f = rq.ring.consume(1)
        assert f.has_frags.tolist() == [True] and f.length.tolist() == [9014]
        _, _, frags = xdp_buff_frags(int(f.pfn[0]), False, memmap=h.memmap)
        assert [(ln, off) for _, ln, off in frags] == [(4096, 0), (1398, 0)]
        assert all(h.memmap.find(p) is rq.pool for p, _, _ in frags)
        rq.ring.produce(f)
        got: list[bytes] = []
        h.stack.on_receive(lambda b: got.extend(b.packets()))
        h.run()
        assert got == [frame]
        assert _stats(coll, 1)[:3] == (1, 9014, 3520)


def test_verdicts_on_frags_frames_free_every_page() -> None:
    """DROP, ABORTED-free TX and PASS after a shrink that releases a frag: the pool gets
    every head and frag page back (the host's close checks the accounting)."""
    with Host(tracer=Tracer()) as h:
        a, b = h.veth("veth0", "veth1", mtu=9000)
        b.gro = True
        coll = h.load(SAMPLES / "frags.o")
        a.attach_xdp(coll.programs["xdp_frags"])
        sizes = (3521, 4000, 7616, 7617, 9014)
        b.transmit([pk.udp_packet(b"x", dport=p, size=n) for p in (9002, 9003, 9004)
                    for n in sizes])
        h.run()
        assert a.stats.xdp_drops == len(sizes) and a.stats.xdp_tx == len(sizes)
        assert _stats(coll, 4)[1] == 9014 - 1000


def test_a_nic_mtu_that_needs_frags_takes_frags_aware_programs_only() -> None:
    with Host(tracer=Tracer()) as h:
        nic = h.add_device("eth0", mtu=3506)
        x1 = h.load(SAMPLES / "xdp1.o").programs["xdp_prog1"]
        nic.attach_xdp(x1)  # 3506 + 14 = 3520: one page still holds it
        nic.detach_xdp()
        nic.mtu = 3507
        with pytest.raises(KernelError) as e:
            nic.attach_xdp(x1)
        assert e.value.errno == errno.EINVAL
        nic.attach_xdp(h.load(SAMPLES / "frags.o").programs["xdp_frags"])


def test_redirect_of_frags_needs_a_target_that_sends_them() -> None:
    """``__xdp_enqueue``: a target without NETDEV_XDP_ACT_NDO_XMIT_SG refuses a frags
    frame (-EOPNOTSUPP, xdp_redirect_err) and takes a single-buffer one."""
    with Host(tracer=Tracer()) as h:
        a, b = h.veth("veth0", "veth1", mtu=9000)
        out = h.add_device("eth1", mtu=9000)
        out.xdp_features = out.xdp_features & ~XdpFeatures.NETDEV_XDP_ACT_NDO_XMIT_SG
        sent: list[bytes] = []
        out.wire.append(lambda dev, batch: sent.extend(batch.packets()))
        coll = h.load(SAMPLES / "frags.o")
        coll.maps["tx_port"][0] = out.ifindex
        a.attach_xdp(coll.programs["xdp_frags"])
        small, big = (pk.udp_packet(b"x", dport=9006, size=n) for n in (1000, 5000))
        b.transmit([small, big])
        h.run()
        assert sent == [small]
        snap = h.tracer.snapshot()
        assert snap.counters["xdp_redirect_err"] == {(a.ifindex, -errno.EOPNOTSUPP): (1,)}
        assert snap.count("xdp_redirect", "events") == 1


@pytest.mark.parametrize("make", [frags_veth, frags_cpumap])
def test_native_loop_and_python_path_agree(make: object) -> None:
    """The lab scenarios (the Linux comparison's) on the native loop's host and on the
    Python reference path: the same frames at every stack, maps and trace counts."""
    sc = make()  # type: ignore[operator]
    fast = vethlab.run_pyxdp(sc, events=False)
    ref = vethlab.run_pyxdp(sc, events=False, native=False)
    diffs = [d for d in vethlab.lab_differences(ref, fast, sc)
             if not d.startswith("events differ")]
    assert not diffs, "\n".join(diffs)
    assert any(len(f) > 3520 for fr in fast.rx.values() for f in fr)


@pytest.mark.parametrize("native", [True, False])
def test_a_devmap_hash_entry_without_frags_runs_on_the_head(native: bool) -> None:
    """Measured on Linux 6.18 (tests/kernel/test_frags_kernel.py): an entry program that
    is not frags-aware runs on a multi-buffer frame's 3520-byte head
    (``bpf_xdp_get_buff_len``: the whole length) and the frame goes on whole. pyxdp
    dropped such frames after the entry program (their conversion took the whole
    length for the head's)."""
    res = vethlab.run_pyxdp(frags_devmap_hash_entry(), events=False, native=native)
    assert [(len(f), struct.unpack_from("<IH", f, 6)) for f in res.rx["veth3"]] == \
        [(1000, (1000, 1000)), (5000, (3520, 5000)), (9014, (3520, 9014))]
    assert res.trace["xdp_devmap_xmit"].sums == {"sent": 3, "drops": 0}


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize(("mtu4", "veth3", "veth5", "errs"), [
    (9000, [1000, 3000], [1000, 3000], 2),  # two valid: a frags frame cannot be cloned
    (1500, [1000, 3000, 5000, 9014], [1000], 0),  # veth2 the frags frames' one target
])
def test_frags_broadcast_is_linux_dev_map_enqueue_multi(
        native: bool, mtu4: int, veth3: list[int], veth5: list[int], errs: int) -> None:
    """A broadcast of frags frames as Linux 6.18 does it (measured with the kernel
    test's scenario): each frame to the targets valid for it (MTU on its whole
    length), a clone for all but the last; a frags frame with two valid targets is
    refused (-EOPNOTSUPP), nothing sent. The native loop and the Python path alike."""
    got = vethlab.run_pyxdp(frags_broadcast(mtu4), native=native)
    assert [len(f) for f in got.rx.get("veth3", ())] == veth3
    assert [len(f) for f in got.rx.get("veth5", ())] == veth5
    assert not got.rx.get("veth1")
    assert [e.get("err") for e in got.events_named("xdp_redirect_err")] == \
        [-errno.EOPNOTSUPP] * errs
    assert len(got.events_named("xdp_redirect")) == 4 - errs


def test_frames_to_skbs_is_whole_for_frames_of_any_kind() -> None:
    """A frags xdp_frame that came through ndo_xdp_xmit (veth peer) is delivered whole
    by the peer's XDP_PASS (xdp_build_skb_from_frame keeps the frags)."""
    with Host(tracer=Tracer()) as h:
        a, b = h.veth("veth0", "veth1", mtu=9000)
        coll = h.load(SAMPLES / "frags.o")
        a.attach_xdp(coll.programs["xdp_frags"])
        b.attach_xdp(h.load(PASS_FRAGS).programs["xdp_pass"])
        seen: list[SkbBatch] = []
        h.stack.on_receive(seen.append)
        frame = pk.udp_packet(b"x", dport=9003, size=9014)
        b.transmit([frame])
        h.run()
        got = [p for s in seen for p in s.packets()]
        assert got == [frame[6:12] + frame[:6] + frame[12:-8] + b"FRAGSTX!"]


@pytest.mark.parametrize("frags", [True, False], ids=["frags", "linear"])
def test_generic_xdp_takes_skbs_above_a_page(frags: bool) -> None:
    """Generic XDP on a 9000-MTU veth (``netif_skb_check_for_xdp``): a 9014-byte skb,
    with smaller ones around it, reaches a frags-aware program as a 3520-byte head
    and frags (its tail cannot grow: -EOPNOTSUPP) and any other program linearised
    (all 9014 bytes between data and data_end; a 16-byte grow fits the tailroom).
    ``tests/kernel/test_frags_kernel.py`` holds both to Linux."""
    sc = frags_generic(frags)
    res = vethlab.run_pyxdp(sc, events=False, engine="interp")
    st = {int.from_bytes(k, "little"): v for k, v in res.maps["stats"].items()}
    head = int.from_bytes(st[1][16:24], "little")
    grow_err = int.from_bytes(st[5][32:40], "little", signed=True)
    assert (head, grow_err) == ((3520, -errno.EOPNOTSUPP) if frags else (9014, 0))
    sent = [f for _, f in sc.traffic]
    assert res.rx["veth0"][:3] == tuple(sent[:3])  # PASS: whole
    assert [len(f) for f in res.rx["veth3"]] == [1000, 5000, 9014]  # devmap redirect


def test_skbs_a_veth_sends_reach_the_peer_pool_through_its_poll() -> None:
    """veth_xmit of skbs short and long (frags) to a peer with a native program: the
    sender queues them on the peer's ring in order-0 pages of the system allocator
    (KIND_SKB, with frags for the long ones) and takes no page of the peer queue's
    pool; the peer's poll copies each into its pool (head and frags) and frees the
    skb's pages, and its program sees every packet whole."""
    from pyxdp.net.frames import KIND_FRAGS, KIND_SKB
    with Host(tracer=Tracer()) as h:
        a, b = h.veth("veth0", "veth1", mtu=9000)
        coll = h.load(SAMPLES / "frags.o")
        a.attach_xdp(coll.programs["xdp_frags"])
        sizes = (60, 3520, 3521, 9014)
        pool, system = a.rx[0].pool, h.memmap.system
        b.transmit([pk.udp_packet(b"x", dport=9002, size=n) for n in sizes])
        ring = a.rx[0].ring
        kinds = ring.cols[4, :len(ring)].tolist()
        assert kinds == [KIND_SKB, KIND_SKB, KIND_SKB | KIND_FRAGS, KIND_SKB | KIND_FRAGS]
        assert pool.nr_in_use == 0 and pool.get_stats().fast + pool.get_stats().slow == 0
        assert len(system.in_use()) == 1 + 1 + 2 + 3  # heads and frags
        h.run()
        assert a.stats.xdp_drops == len(sizes) and a.stats.rx_packets == len(sizes)
        assert len(system.in_use()) == 0 and pool.nr_in_use == 0


def _long_skbs(native: bool, threaded: bool, monkeypatch: pytest.MonkeyPatch
               ) -> tuple[int, tuple[object, ...]]:
    """veth1 transmits frames of 1000, 5000 and 9014 bytes to every port of
    samples/frags.o on veth0 (PASS, DROP, TX back to veth1, shrink, grow refused,
    redirect to veth2 -> veth3), the other ends running a frags-aware XDP_PASS:
    how many skbs the Python poll converted, and the frames each stack got, the
    counters, the program's stats and the trace counts, the page accounting checked
    exactly, and the pools' counters (the native loop runs the multi-buffer frames
    in its own polls, with the Python poll's batches and flushes)."""
    from pyxdp.net import skbuff_native
    converted = [0]
    orig = skbuff_native.skbs_to_buffs

    def counted(pool: object, sysm: object, pfn: np.ndarray, *a: object) -> int:
        converted[0] += len(pfn)
        return int(orig(pool, sysm, pfn, *a))
    monkeypatch.setattr(skbuff_native, "skbs_to_buffs", counted)
    with Host(tracer=Tracer(), native=native, threaded_napi=threaded) as h:
        v0, v1 = h.veth("veth0", "veth1", mtu=9000)
        v2, v3 = h.veth("veth2", "veth3", mtu=9000)
        coll = h.load(SAMPLES / "frags.o")
        coll.maps["tx_port"][0] = v2.ifindex
        v0.attach_xdp(coll.programs["xdp_frags"])
        for end in (v1, v2, v3):
            end.attach_xdp(h.load(PASS_FRAGS).programs["xdp_pass"])
        seen: list[tuple[int, bytes]] = []
        h.stack.on_receive(lambda s: seen.extend(zip(s.ifindex.tolist(), s.packets(),
                                                     strict=True)))
        frames = [pk.udp_packet(b"mb", sport=2000 + i, dport=9001 + i % 6,
                                size=(1000, 5000, 9014)[i // 6 % 3]) for i in range(72)]
        for _ in range(3):
            v1.transmit(frames)
            h.run()
        for d in h.devices.values():
            for q in d.rx:
                pool = q.pool
                cached, ringed, used = (len(pool.cached_pages()), len(pool.ring_pages()),
                                        len(pool.in_use()))
                assert (cached, ringed, used) == (pool.alloc_count, pool.ring_count, 0)
                assert pool.nr_in_use == 0 and pool.inflight() == cached + ringed
        system = h.memmap.system
        assert len(system.in_use()) == system.allocated - system.freed == 0
        h.check_memory()
        st = sorted(coll.maps["stats"].items())
        snap = h.tracer.snapshot().counters
        tx_port: Any = coll.maps["tx_port"].handle
        mid = tx_port.id  # ids differ between hosts: named

        def trace(name: str, k: tuple[int, ...], v: tuple[int, ...]) -> tuple[object, ...]:
            # xdp_redirect's map id named.
            key: tuple[object, ...] = k
            if name == "xdp_redirect" and k[2] == mid:
                key = (*k[:2], "tx_port", *k[3:])
            return (key, v)
        out = (sorted(seen), {d.name: d.stats.asdict() for d in h.devices.values()}, st,
               {n: sorted(trace(n, k, v) for k, v in c.items()) for n, c in snap.items()},
               [q.pool.get_stats() for d in h.devices.values() for q in d.rx])
    monkeypatch.undo()
    return converted[0], out


@pytest.mark.parametrize("threaded", [False, True], ids=["inline", "threaded"])
def test_long_skbs_to_a_frags_peer_native_is_python(
        threaded: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Skbs above a page that a veth sends to a peer with an xdp.frags program are
    copied into the peer pool's head and frags by machine code on both paths (the
    native loop's skb_pp_cow_data, or the Python poll's call of the same): the same
    frames, verdicts, counters, program stats and trace counts, and exact page
    accounting, with threaded NAPI too. The native loop converts skbs
    itself: fewer reach the Python poll's conversion."""
    n_native, native = _long_skbs(True, threaded, monkeypatch)
    n_python, python = _long_skbs(False, threaded, monkeypatch)
    assert native == python
    assert n_native < n_python
    seen, stats = native[0], native[1]
    assert isinstance(seen, list) and isinstance(stats, dict)
    assert stats["veth0"]["xdp_drops"] == 3 * 12 and stats["veth0"]["rx_packets"] == 3 * 72
    assert stats["veth1"]["rx_packets"] == 3 * 12  # XDP_TX back: veth_xdp_xmit
    assert any(len(f) == 9014 for _, f in seen)  # PASS of a whole long frame


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_a_long_skb_the_pool_cannot_hold_is_dropped_and_its_pages_given_back(
        native: bool) -> None:
    """A 9014-byte skb needs a head and two frags of the receiving pool: with two
    pages left it is dropped (rx_dropped), the pages it took go back to the pool's
    ring, its own pages to the system allocator; a 1000-byte skb behind it gets
    a page and its program run."""
    with Host(tracer=Tracer(), native=native) as h:
        v0, v1 = h.veth("veth0", "veth1", mtu=9000)
        v0.attach_xdp(h.load(PASS_FRAGS).programs["xdp_pass"])
        pool = v0.rx[0].pool
        held = pool.alloc_bulk(pool.npages)
        pool.put_pages(held[-2:])  # two pages free, on the pool's ring
        held = held[:-2]
        v1.transmit([pk.udp_packet(b"x", size=9014), pk.udp_packet(b"y", size=1000)])
        h.run()
        assert (v0.stats.rx_dropped, v0.stats.xdp_pass) == (1, 1)
        assert pool.nr_in_use == len(held) and pool.ring_count + pool.alloc_count == 2
        assert len(h.memmap.system.in_use()) == 0
        pool.put_pages(held)


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_a_one_page_skb_past_the_packet_room_gets_a_frag(native: bool) -> None:
    """An skb in one page whose 3600 bytes run past a page's packet room (3520 at
    XDP_PACKET_HEADROOM) reaches XDP as skb_pp_cow_data splits it: a 3520-byte head
    and an 80-byte frag of the pool, delivered whole by XDP_PASS, every page freed."""
    from pyxdp.net.frames import KIND_SKB, NET_SKB_PAD, Frames
    with Host(tracer=Tracer(), native=native) as h:
        v0, _v1 = h.veth("veth0", "veth1", mtu=9000)
        v0.attach_xdp(h.load(PASS_FRAGS).programs["xdp_pass"])
        seen: list[bytes] = []
        h.stack.on_receive(lambda s: seen.extend(s.packets()))
        system = h.memmap.system
        frame = pk.udp_packet(b"z", size=3600)
        pfn = system.alloc_pages_bulk(1)
        system.write(int(pfn[0]), NET_SKB_PAD, frame)
        v0.rx[0].ring.produce(Frames.make(pfn, NET_SKB_PAD, len(frame), kind=KIND_SKB))
        h.run()
        assert seen == [frame] and v0.stats.xdp_pass == 1
        assert len(system.in_use()) == 0 and v0.rx[0].pool.nr_in_use == 0
