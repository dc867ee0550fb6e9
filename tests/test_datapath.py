"""The userspace XDP datapath: hosts, veth pairs and NICs, native and generic XDP,
XDP_TX bulks, devmap/cpumap redirects, broadcasts, devmap and cpumap programs.

Every scenario runs on a :class:`~pyxdp.net.netdevice.Host` with its own
:class:`~pyxdp.net.trace.Tracer` and ends with ``Host.close()``, which checks
the page accounting: no page leaked, none returned twice (a double return
raises as it happens). Where a test states what Linux does, the behaviour was
checked on a 6.18 kernel with veth pairs (native XDP), as the semantics
reference says.

Every test runs on the interpreter and on the JIT (when llvmlite is there;
the JIT's poll may take the native fast path), and the last tests run one
scenario on both and compare everything that comes out.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import struct
import threading
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pyxdp.collection import Collection, Program
from pyxdp.errors import KernelError
from pyxdp.net import packets as pk
from pyxdp.net.cpumap import cpumap_runtime
from pyxdp.net.napi import napi_poll
from pyxdp.net.netdevice import Host, NetDevice, Veth, XdpFeatures, XdpFlags
from pyxdp.net.pcap import read_pcapng
from pyxdp.net.prog import jit_available
from pyxdp.net.source import Collector, PcapngSink, TrafficGenerator
from pyxdp.net.stack import SkbBatch
from pyxdp.net.trace import Tracer
from pyxdp.spec import CollectionSpec, MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfAttachType, BpfMapType, RedirectFlag

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
ENGINE = "interp"
ENGINES = ["interp", pytest.param("jit", marks=pytest.mark.skipif(
    not jit_available(), reason="llvmlite is not installed: no JIT"))]
INT_MAX = 0x7FFF_FFFF
BPF_F_BROADCAST = int(RedirectFlag.BPF_F_BROADCAST)
BPF_F_EXCLUDE_INGRESS = int(RedirectFlag.BPF_F_EXCLUDE_INGRESS)


# -- helpers ---------------------------------------------------------------------------------

def new_host(*, cpumap_threads: bool = False) -> Host:
    """A host on the engine of the running test (the ``engine`` fixture)."""
    return Host(tracer=Tracer(), engine=ENGINE, cpumap_threads=cpumap_threads)


def load(h: Host, name: str) -> Collection:
    return h.load(SAMPLES / f"{name}.o")


def swap_macs(frame: bytes) -> bytes:
    return frame[6:12] + frame[:6] + frame[12:]


class Seen:
    """What the host stack received, per device: packets (in order) and metadata."""

    def __init__(self, h: Host) -> None:
        self.packets: dict[int, list[bytes]] = defaultdict(list)
        self.meta: dict[int, list[bytes]] = defaultdict(list)
        self.batches = 0
        h.stack.on_receive(self)

    def __call__(self, batch: SkbBatch) -> None:
        self.batches += 1
        for ifx, p, m in zip(batch.ifindex.tolist(), batch.packets(), batch.meta, strict=True):
            self.packets[int(ifx)].append(p)
            self.meta[int(ifx)].append(m)

    def on(self, dev: NetDevice) -> list[bytes]:
        return self.packets.get(dev.ifindex, [])

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.packets.values())


def udp_frames(n: int, *, dport: int = 5678, size: int | None = None) -> list[bytes]:
    return [pk.udp_packet(b"payload", sport=1000 + i, dport=dport, size=size)
            for i in range(n)]


def mixed_frames() -> tuple[list[bytes], dict[int, int]]:
    """Frames of several protocols and the count xdp1/xdp2 file each under."""
    frames = (udp_frames(5)
              + [pk.tcp_packet(sport=i) for i in range(3)]
              + [pk.icmp_packet(seq=i) for i in range(2)]
              + [pk.udp_packet(b"v6", ipv6=True), pk.icmp_packet(ipv6=True)]
              + [pk.udp_packet(b"tagged", vlans=[7])]
              + [pk.arp_packet()])
    return frames, {17: 7, 6: 3, 1: 2, 58: 1, 0: 1}


def trace_count(h: Host, event: str, column: str = "events",
                key: tuple[int, ...] | None = None) -> int:
    return h.tracer.snapshot().count(event, column, key)


def no_redirect_events(h: Host) -> bool:
    return all(trace_count(h, e) == 0 for e in ("xdp_redirect", "xdp_redirect_err",
                                                "xdp_devmap_xmit", "xdp_cpumap_enqueue",
                                                "xdp_cpumap_kthread"))


def devmap_value(ifindex: int, prog: Program | None = None) -> bytes:
    """struct bpf_devmap_val as raw bytes (asm maps have no BTF)."""
    return struct.pack("<Ii", ifindex, prog.fd if prog is not None else 0)


def asm_spec(programs: dict[str, tuple[str, int, str]],
             maps: Sequence[MapSpec] = ()) -> CollectionSpec:
    """Several assembler programs over shared maps: name -> (section, attach type, text)."""
    progs = {}
    for name, (section, attach, text) in programs.items():
        one = asm_collection(text, maps).programs["t"]
        progs[name] = dataclasses.replace(one, name=name, section=section,
                                          expected_attach_type=attach)
    return CollectionSpec(progs, {m.name: m for m in maps}, license="GPL")


def asm(text: str, maps: Sequence[MapSpec] = ()) -> CollectionSpec:
    return asm_collection(text, maps)


def devmap_spec(name: str = "ports", entries: int = 8) -> MapSpec:
    return MapSpec(name, int(BpfMapType.BPF_MAP_TYPE_DEVMAP), 4, 8, entries)


def array_spec(name: str, value_size: int = 16, entries: int = 4) -> MapSpec:
    return MapSpec(name, int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, value_size, entries)


PASS = "r0 = 2\nexit"
XDP = int(BpfAttachType.BPF_XDP)
DEVMAP_ATTACH = int(BpfAttachType.BPF_XDP_DEVMAP)


@pytest.fixture(autouse=True, params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """The engine new_host() gives its hosts."""
    global ENGINE
    ENGINE = str(request.param)
    yield ENGINE
    ENGINE = "interp"


@pytest.fixture
def closing() -> Iterator[list[Host]]:
    """Hosts a test opens; each is closed (and its pages checked) at the end."""
    hosts: list[Host] = []
    yield hosts
    for h in hosts:
        h.close()


# -- 1. attach rules --------------------------------------------------------------------------

def test_attach_rules() -> None:
    with new_host() as h:
        a, b = h.veth("veth0", "veth1")
        p1 = load(h, "xdp1").programs["xdp_prog1"]
        p2 = load(h, "xdp2").programs["xdp_prog2"]
        rm = load(h, "redirect_map")
        rc = load(h, "redirect_cpu")
        assert a.xdp_query() == {"mode": "none", "prog_id": 0, "prog": ""}

        def fails(err: int, dev: NetDevice, prog: Program, **kw: Any) -> KernelError:
            with pytest.raises(KernelError) as e:
                dev.attach_xdp(prog, **kw)
            assert e.value.errno == err, e.value
            return e.value

        # Programs of other attach types.
        fails(errno.EINVAL, a, rm.programs["xdp_redirect_map_egress"])
        fails(errno.EINVAL, a, rc.programs["xdp_cpumap_filter"], mode="generic")
        fails(errno.EOPNOTSUPP, a, p1, mode="offload")
        fails(errno.EINVAL, a, p1, flags=int(XdpFlags.XDP_FLAGS_SKB_MODE))
        fails(errno.EINVAL, a, p1, expected=p2)  # expected needs XDP_FLAGS_REPLACE

        a.attach_xdp(p1)
        assert a.xdp_query() == {"mode": "native", "prog_id": p1.fd, "prog": "xdp_prog1"}
        a.attach_xdp(p1)  # the same program again: nothing changes
        # Native and generic are mutually exclusive, both ways.
        fails(errno.EEXIST, a, p2, mode="generic")
        b.attach_xdp(p2, mode="generic")
        assert b.xdp_query()["mode"] == "generic"
        fails(errno.EEXIST, b, p1)
        # dev_xdp_attach's order: the other mode before the attach type ...
        fails(errno.EEXIST, b, rm.programs["xdp_redirect_map_egress"])
        # ... and UPDATE_IF_NOEXIST before the attach type too.
        noexist = int(XdpFlags.XDP_FLAGS_UPDATE_IF_NOEXIST)
        fails(errno.EBUSY, a, p2, flags=noexist)
        fails(errno.EBUSY, a, rc.programs["xdp_cpumap_filter"], flags=noexist)
        # REPLACE: the expected program must be the attached one (none: expect none).
        replace = int(XdpFlags.XDP_FLAGS_REPLACE)
        fails(errno.EEXIST, a, p2, flags=replace, expected=p2)
        fails(errno.EEXIST, a, p2, flags=replace)
        a.attach_xdp(p2, flags=replace, expected=p1)
        assert a.xdp_query() == {"mode": "native", "prog_id": p2.fd, "prog": "xdp_prog2"}
        b.detach_xdp()
        b.attach_xdp(p1, flags=replace)  # nothing attached, nothing expected
        b.detach_xdp("native")
        b.attach_xdp(p1, flags=noexist)
        info = {d["name"]: d for d in h.device_info()}
        assert info["veth0"]["prog"] == "xdp_prog2" and info["veth1"]["mode"] == "native"
        a.detach_xdp()
        b.detach_xdp()
        assert a.xdp_query()["mode"] == b.xdp_query()["mode"] == "none"


def test_veth_ndo_xmit_feature_follows_peer_napi() -> None:
    """veth_set_xdp_features: NDO_XMIT only while the peer has XDP or GRO."""
    with new_host() as h:
        a, b = h.veth("veth0", "veth1")
        xmit = XdpFeatures.NETDEV_XDP_ACT_NDO_XMIT
        assert not a.xdp_features & xmit and not b.xdp_features & xmit
        b.gro = True
        assert a.xdp_features & xmit and not b.xdp_features & xmit
        b.gro = False
        b.attach_xdp(h.load(asm(PASS)).programs["t"])
        assert a.xdp_features & xmit and a.napi_enabled is False and b.napi_enabled
        eth = h.add_device("eth0")
        assert eth.xdp_features & xmit


# -- 2. xdp1: drop and count ------------------------------------------------------------------

def test_xdp1_drops_and_counts_per_protocol() -> None:
    frames, want = mixed_frames()
    with new_host() as h:
        a, b = h.veth("veth0", "veth1")
        seen = Seen(h)
        coll = load(h, "xdp1")
        a.attach_xdp(coll.programs["xdp_prog1"])
        b.transmit(frames)
        assert h.run() == len(frames)
        rxcnt = coll.maps["rxcnt"]
        assert {k: rxcnt.sum(k) for k in want} == want
        assert sum(rxcnt.sum(k) for k in range(256)) == len(frames)
        assert seen.total == 0 and h.stack.stats.received == 0
        st = a.stats
        assert (st.rx_packets, st.xdp_packets, st.xdp_drops) == (len(frames),) * 3
        # veth_xdp_rcv counts each skb of the peer after eth_type_trans: 14 bytes short.
        assert st.rx_bytes == sum(len(f) - 14 for f in frames)
        assert a.link_stats().rx_bytes == b.link_stats().tx_bytes == st.rx_bytes
        assert b.stats.tx_packets == len(frames)
        assert trace_count(h, "xdp_exception") == 0 and no_redirect_events(h)


def test_no_program_everything_reaches_the_stack() -> None:
    frames, _ = mixed_frames()
    with new_host() as h:
        a, b = h.veth("veth0", "veth1")
        a.add_address(f"{pk.DEFAULT_DST_IP4}/24")  # the frames' destinations are ours
        a.add_address(f"{pk.DEFAULT_DST_IP6}/64")
        seen = Seen(h)
        sock = h.stack.udp_socket(5678, keep=100)
        b.transmit(frames)
        h.run()
        assert seen.on(a) == frames and not seen.on(b)
        assert h.stack.per_device == {a.ifindex: len(frames)}
        # port 5678: IPv4 and IPv6 UDP; VLAN-tagged frames are another host's on a
        # device without VLAN devices (dropped as OTHERHOST, as Linux does)
        assert sock.packets == 6
        assert h.stack.drop_reasons()["OTHERHOST"] >= 1
        assert sorted(sock.received) == sorted([b"payload"] * 5 + [b"v6"])
        assert h.stack.stats.ipv6 == 2 and h.stack.stats.other == 1  # ARP
        # And once the program is detached, the same.
        coll = load(h, "xdp1")
        a.attach_xdp(coll.programs["xdp_prog1"])
        b.transmit(frames)
        h.run()
        a.detach_xdp()
        b.transmit(frames)
        h.run()
        assert seen.on(a) == frames + frames
        assert sum(coll.maps["rxcnt"].sum(k) for k in range(256)) == len(frames)


# -- 3. xdp2: XDP_TX ------------------------------------------------------------------------

@pytest.mark.parametrize("n, bulks", [(1, 1), (16, 1), (17, 2), (40, 3)])
def test_xdp2_tx_back_to_the_peer(n: int, bulks: int) -> None:
    frames = udp_frames(n)
    with new_host() as h:
        a, b = h.veth("veth0", "veth1")
        b.gro = True  # the peer's NAPI takes XDP frames
        seen = Seen(h)
        coll = load(h, "xdp2")
        a.attach_xdp(coll.programs["xdp_prog2"])
        b.transmit(frames)
        h.run()
        assert seen.on(b) == [swap_macs(f) for f in frames] and not seen.on(a)
        assert coll.maps["rxcnt"].sum(17) == n
        # One xdp_bulk_tx per bulk of at most 16, all sent.
        key = (a.ifindex,)
        assert trace_count(h, "xdp_bulk_tx", key=key) == bulks
        assert trace_count(h, "xdp_bulk_tx", "sent", key) == n
        assert trace_count(h, "xdp_bulk_tx", "drops", key) == 0
        assert (a.stats.xdp_tx, a.stats.xdp_tx_errors) == (n, 0)
        assert b.stats.rx_packets == n  # b's NAPI poll
        assert trace_count(h, "xdp_exception") == 0 and no_redirect_events(h)


def test_xdp2_tx_mixed_protocols_and_runt() -> None:
    frames, want = mixed_frames()
    runt = b"\x01" * 10  # no Ethernet header: XDP_DROP
    with new_host() as h:
        a, b = h.veth("veth0", "veth1")
        b.gro = True
        seen = Seen(h)
        coll = load(h, "xdp2")
        a.attach_xdp(coll.programs["xdp_prog2"])
        b.transmit(frames + [runt])
        h.run()
        assert seen.on(b) == [swap_macs(f) for f in frames]
        assert {k: coll.maps["rxcnt"].sum(k) for k in want} == want
        assert a.stats.xdp_drops == 1


def test_xdp2_tx_to_a_peer_without_napi_is_refused() -> None:
    """veth_xdp_xmit: -ENXIO for the whole bulk; the frames are freed."""
    with new_host() as h:
        a, b = h.veth("veth0", "veth1")
        seen = Seen(h)
        events = h.tracer.listen(["xdp_bulk_tx"])
        coll = load(h, "xdp2")
        a.attach_xdp(coll.programs["xdp_prog2"])
        b.transmit(udp_frames(20))
        h.run()
        assert seen.total == 0
        recs = [e.record for e in events.drain()]
        assert [(r.ifindex, r.sent, r.drops, r.err) for r in recs] == \
            [(a.ifindex, 0, 16, -errno.ENXIO), (a.ifindex, 0, 4, -errno.ENXIO)]
        assert (a.stats.xdp_tx, a.stats.xdp_tx_errors) == (0, 20)
        assert trace_count(h, "xdp_exception") == 0
        # The peer with a program of its own has NAPI: the frames run through it.
        pc = h.load(asm(PASS))
        b.attach_xdp(pc.programs["t"])
        b.transmit(udp_frames(3))
        h.run()
        assert seen.on(b) == [swap_macs(f) for f in udp_frames(3)]
        assert b.stats.xdp_pass == 3


# -- 4. devmap redirect -------------------------------------------------------------------------

def redirect_map_host(egress: bool = False, peer_gro: bool = True
                      ) -> tuple[Host, Collection, tuple[Veth, Veth, Veth, Veth]]:
    h = new_host()
    v0, v1 = h.veth("veth0", "veth1")
    v2, v3 = h.veth("veth2", "veth3")
    coll = load(h, "redirect_map")
    v0.attach_xdp(coll.programs["xdp_redirect_map_prog"])
    v3.gro = peer_gro
    value: dict[str, object] = {"ifindex": v2.ifindex}
    if egress:
        value["bpf_prog"] = {"fd": coll.programs["xdp_redirect_map_egress"].fd}
    coll.maps["tx_port"][0] = value
    return h, coll, (v0, v1, v2, v3)


def test_devmap_redirect(closing: list[Host]) -> None:
    h, coll, (v0, v1, v2, v3) = redirect_map_host()
    closing.append(h)
    seen = Seen(h)
    frames = udp_frames(40)
    v1.transmit(frames)
    h.run()
    assert seen.on(v3) == [swap_macs(f) for f in frames]
    assert not (seen.on(v0) or seen.on(v1) or seen.on(v2))
    assert coll.maps["rxcnt"].sum(0) == 40
    map_id = coll.maps["tx_port"].handle.id
    assert trace_count(h, "xdp_redirect", key=(v0.ifindex, v2.ifindex, map_id)) == 40
    # 40 frames in one poll: bulks of 16, 16 and 8.
    assert trace_count(h, "xdp_devmap_xmit", key=(v0.ifindex, v2.ifindex)) == 3
    assert trace_count(h, "xdp_devmap_xmit", "sent") == 40
    assert trace_count(h, "xdp_devmap_xmit", "drops") == 0
    assert trace_count(h, "xdp_redirect_err") == 0
    assert v0.stats.xdp_redirect == 40 and v2.stats.tx_packets == 40
    assert v3.stats.rx_packets == 40


def test_devmap_redirect_polls_of_64(closing: list[Host]) -> None:
    h, _, (v0, v1, _, v3) = redirect_map_host()
    closing.append(h)
    seen = Seen(h)
    v1.transmit(udp_frames(100))  # polls of 64 and 36
    h.run()
    assert len(seen.on(v3)) == 100
    assert v0.rx[0].polls == 2
    assert trace_count(h, "xdp_devmap_xmit") == 4 + 3


def test_devmap_redirect_to_a_veth_without_peer_napi(closing: list[Host]) -> None:
    """Linux: veth2 does not advertise NDO_XMIT while veth3 has neither XDP nor GRO,
    so the redirect fails at once with -EOPNOTSUPP (no xdp_devmap_xmit)."""
    h, _, (v0, v1, v2, _) = redirect_map_host(peer_gro=False)
    closing.append(h)
    seen = Seen(h)
    errs = h.tracer.listen(["xdp_redirect_err"])
    v1.transmit(udp_frames(5))
    h.run()
    assert seen.total == 0
    recs = [e.record for e in errs.drain()]
    assert len(recs) == 5
    assert {(r.ifindex, r.err, r.to_ifindex) for r in recs} == \
        {(v0.ifindex, -errno.EOPNOTSUPP, v2.ifindex)}
    assert trace_count(h, "xdp_devmap_xmit") == 0 and trace_count(h, "xdp_redirect") == 0


def test_devmap_redirect_empty_slot(closing: list[Host]) -> None:
    """redirect_map with tx_port[0] empty: bpf_redirect_map returns its flags' low
    bits, XDP_ABORTED: an exception per frame, no redirect event."""
    h, coll, (v0, v1, _, _) = redirect_map_host()
    closing.append(h)
    del coll.maps["tx_port"][0]
    seen = Seen(h)
    v1.transmit(udp_frames(6))
    h.run()
    assert seen.total == 0
    assert trace_count(h, "xdp_exception", key=(v0.ifindex, 0)) == 6
    assert no_redirect_events(h)
    assert v0.stats.xdp_aborted == 6


def test_redirect_errors() -> None:
    """XDP_REDIRECT after a failed lookup is an ifindex redirect to tgt_index (0 here:
    -EINVAL, map_id INT_MAX); XDP_REDIRECT with no helper called is -EBADRQC."""
    dm = devmap_spec("tx_port", 4)
    spec = asm_spec({
        "stale": ("xdp", XDP, "r1 = map[fd:0]\nr2 = 3\nr3 = 0\ncall bpf_redirect_map\n"
                              "r0 = 4\nexit"),
        "bare": ("xdp", XDP, "r0 = 4\nexit"),
        "ifindex": ("xdp", XDP, "r1 = 99\nr2 = 0\ncall bpf_redirect\nexit"),
    }, [dm])
    with new_host() as h:
        pairs = [h.veth(f"veth{2 * i}", f"veth{2 * i + 1}") for i in range(4)]
        coll = h.load(spec)
        coll.maps["tx_port"][0] = devmap_value(pairs[3][0].ifindex)
        for (dev, _), name in zip(pairs, ("stale", "bare", "ifindex"), strict=False):
            dev.attach_xdp(coll.programs[name])
        errs = h.tracer.listen(["xdp_redirect_err"])
        seen = Seen(h)
        for _, peer in pairs[:3]:
            peer.transmit(udp_frames(2))
        h.run()
        assert seen.total == 0 and trace_count(h, "xdp_redirect") == 0
        got = {(r.ifindex, r.err, r.to_ifindex, r.map_id, r.map_index)
               for r in (e.record for e in errs.drain())}
        assert got == {(pairs[0][0].ifindex, -errno.EINVAL, 0, INT_MAX, 0),
                       (pairs[1][0].ifindex, -errno.EBADRQC, 0, 0, 0),
                       (pairs[2][0].ifindex, -errno.EINVAL, 99, INT_MAX, 0)}
        assert trace_count(h, "xdp_redirect_err") == 6


def test_redirect_state_consumed() -> None:
    """xdp_do_redirect clears the redirect state's map id and type: a frame that
    returns XDP_REDIRECT after one that called bpf_redirect and was redirected gets
    -EBADRQC, not the previous frame's target (one poll, one batch)."""
    # bpf_redirect(veth2's ifindex) only when the first byte of the frame is 0xaa.
    text = """r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 1
if r4 > r3 goto out
r5 = *(u8 *)(r2 +0)
if r5 != 0xaa goto out
r1 = {ifindex}
r2 = 0
call bpf_redirect
out:
r0 = 4
exit"""
    with new_host() as h:
        v0, v1 = h.veth("veth0", "veth1")
        v2, v3 = h.veth("veth2", "veth3")
        v3.gro = True
        coll = h.load(asm(text.format(ifindex=v2.ifindex)))
        v0.attach_xdp(coll.programs["t"])
        errs = h.tracer.listen(["xdp_redirect_err"])
        seen = Seen(h)
        marked = b"\xaa" + udp_frames(1)[0][1:]
        v1.transmit([marked, udp_frames(1)[0], marked])
        h.run()
        assert seen.on(v3) == [marked, marked]
        assert [e.record.err for e in errs.drain()] == [-errno.EBADRQC]


@pytest.mark.parametrize("grow, delivered", [(4, True), (5, False)])
def test_redirect_mtu_check(grow: int, delivered: bool) -> None:
    """xdp_ok_fwd_dev: up to mtu + 14 + 4 (VLAN) bytes; a 1514-byte frame grown by
    4 goes out of a 1500-MTU veth, grown by 5 it is refused with -EMSGSIZE."""
    text = f"""r2 = {grow}
call bpf_xdp_adjust_tail
if r0 != 0 goto drop
r1 = map[fd:0]
r2 = 0
r3 = 0
call bpf_redirect_map
exit
drop:
r0 = 1
exit"""
    with new_host() as h:
        v0, v1 = h.veth("veth0", "veth1")
        v2, v3 = h.veth("veth2", "veth3")
        v3.gro = True
        coll = h.load(asm(text, [devmap_spec("tx_port", 1)]))
        coll.maps["tx_port"][0] = devmap_value(v2.ifindex)
        v0.attach_xdp(coll.programs["t"])
        errs = h.tracer.listen(["xdp_redirect_err"])
        seen = Seen(h)
        frame = pk.udp_packet(size=1514)
        v1.transmit([frame])
        h.run()
        if delivered:
            assert [len(p) for p in seen.on(v3)] == [1518]
            assert seen.on(v3)[0][:1514] == frame
        else:
            assert seen.total == 0
            assert [e.record.err for e in errs.drain()] == [-errno.EMSGSIZE]


# -- 5. broadcast ---------------------------------------------------------------------------------

def bcast_host(flags: int, slots: dict[int, int], peer_gro: Sequence[bool] = (True,) * 3
               ) -> tuple[Host, Collection, list[tuple[Veth, Veth]]]:
    """Three pairs; veth0 broadcasts through ``ports``, filled with the first device of
    pair ``slots[slot]``."""
    text = f"r1 = map[fd:0]\nr2 = 0\nr3 = {flags}\ncall bpf_redirect_map\nexit"
    h = new_host()
    pairs = [h.veth(f"veth{2 * i}", f"veth{2 * i + 1}") for i in range(3)]
    for (_, peer), gro in zip(pairs, peer_gro, strict=True):
        peer.gro = gro
    coll = h.load(asm(text, [devmap_spec()]))
    for slot, pair in slots.items():
        coll.maps["ports"][slot] = devmap_value(pairs[pair][0].ifindex)
    pairs[0][0].attach_xdp(coll.programs["t"])
    return h, coll, pairs


@pytest.mark.parametrize("exclude", [False, True])
def test_broadcast(exclude: bool, closing: list[Host]) -> None:
    flags = BPF_F_BROADCAST | (BPF_F_EXCLUDE_INGRESS if exclude else 0)
    h, coll, pairs = bcast_host(flags, {0: 0, 1: 1, 3: 2})
    closing.append(h)
    (v0, v1), (v2, v3), (v4, v5) = pairs
    seen = Seen(h)
    frames = udp_frames(20)
    v1.transmit(frames)
    h.run()
    # An unchanged copy on every target (out of veth0 itself reaches veth1).
    assert seen.on(v1) == ([] if exclude else frames)
    assert seen.on(v3) == frames and seen.on(v5) == frames
    assert not seen.on(v0) and not seen.on(v2) and not seen.on(v4)
    # One xdp_redirect per frame; to_ifindex is slot 0's device (the key the
    # helper looked up although a broadcast ignores it).
    map_id = coll.maps["ports"].handle.id
    assert trace_count(h, "xdp_redirect", key=(v0.ifindex, v0.ifindex, map_id)) == 20
    targets = [v2, v4] if exclude else [v0, v2, v4]
    for t in targets:
        assert trace_count(h, "xdp_devmap_xmit", key=(v0.ifindex, t.ifindex)) == 2
        assert trace_count(h, "xdp_devmap_xmit", "sent", (v0.ifindex, t.ifindex)) == 20
    assert trace_count(h, "xdp_devmap_xmit") == 2 * len(targets)
    assert trace_count(h, "xdp_redirect_err") == 0
    # The clones were order-0 pages of the system allocator: all back.
    assert h.memmap.system.in_use().size == 0


def test_broadcast_skips_invalid_targets(closing: list[Host]) -> None:
    """is_valid_dst: a veth whose peer has no NAPI is skipped (no error); slot 0 empty
    gives to_ifindex 0; with no valid target at all the frame is just freed."""
    h, coll, pairs = bcast_host(BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS,
                                {1: 0, 2: 1, 5: 2}, peer_gro=(True, True, False))
    closing.append(h)
    (v0, v1), (v2, v3), (v4, v5) = pairs
    seen = Seen(h)
    v1.transmit(udp_frames(5))
    h.run()
    assert len(seen.on(v3)) == 5 and seen.total == 5
    map_id = coll.maps["ports"].handle.id
    assert trace_count(h, "xdp_redirect", key=(v0.ifindex, 0, map_id)) == 5
    assert trace_count(h, "xdp_devmap_xmit") == 1
    v3.gro = False  # no valid target left
    v1.transmit(udp_frames(5))
    h.run()
    assert seen.total == 5
    assert trace_count(h, "xdp_redirect") == 10 and trace_count(h, "xdp_redirect_err") == 0
    assert h.memmap.system.in_use().size == 0


def test_broadcast_clones_carry_metadata(closing: list[Host]) -> None:
    """xdpf_clone copies the headroom too: every copy keeps the program's metadata."""
    text = f"""r6 = r1
r2 = -8
call bpf_xdp_adjust_meta
if r0 != 0 goto out
r2 = *(u32 *)(r6 +8)
r3 = *(u32 *)(r6 +0)
r4 = r2
r4 += 8
if r4 > r3 goto out
r1 = 0x55667788
*(u64 *)(r2 +0) = r1
out:
r1 = map[fd:0]
r2 = 0
r3 = {BPF_F_BROADCAST}
call bpf_redirect_map
exit"""
    h = new_host()
    closing.append(h)
    pairs = [h.veth(f"veth{2 * i}", f"veth{2 * i + 1}") for i in range(3)]
    coll = h.load(asm(text, [devmap_spec()]))
    for slot, (dev, peer) in enumerate(pairs):
        peer.gro = True
        coll.maps["ports"][slot] = devmap_value(dev.ifindex)
    pairs[0][0].attach_xdp(coll.programs["t"])
    seen = Seen(h)
    frames = udp_frames(3)
    pairs[0][1].transmit(frames)
    h.run()
    for _, peer in pairs:
        assert seen.on(peer) == frames
        assert seen.meta[peer.ifindex] == [struct.pack("<Q", 0x55667788)] * 3


def test_devmap_hash_redirect_and_broadcast(closing: list[Host]) -> None:
    hm = MapSpec("hports", int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH), 4, 8, 4)
    spec = asm_spec({
        "one": ("xdp", XDP, "r1 = map[fd:0]\nr2 = 1000\nr3 = 0\ncall bpf_redirect_map\nexit"),
        "all": ("xdp", XDP, f"r1 = map[fd:0]\nr2 = 7\nr3 = {BPF_F_BROADCAST}\n"
                            "call bpf_redirect_map\nexit"),
    }, [hm])
    h = new_host()
    closing.append(h)
    v0, v1 = h.veth("veth0", "veth1")
    v2, v3 = h.veth("veth2", "veth3")
    v4, v5 = h.veth("veth4", "veth5")
    v6, v7 = h.veth("veth6", "veth7")
    for peer in (v3, v5, v7):
        peer.gro = True
    coll = h.load(spec)
    coll.maps["hports"][1000] = devmap_value(v2.ifindex)
    coll.maps["hports"][5] = devmap_value(v4.ifindex)
    coll.maps["hports"][77] = devmap_value(v6.ifindex)
    v0.attach_xdp(coll.programs["one"])
    v6.attach_xdp(coll.programs["all"])
    seen = Seen(h)
    a, b = udp_frames(4), udp_frames(2, dport=7)
    v1.transmit(a)
    h.run()
    assert seen.on(v3) == a and seen.total == 4
    map_id = coll.maps["hports"].handle.id
    assert trace_count(h, "xdp_redirect", key=(v0.ifindex, v2.ifindex, map_id)) == 4
    v7.transmit(b)  # broadcast from veth6 (in the map itself), key 7 absent: to_ifindex 0
    h.run()
    assert seen.on(v3) == a + b and seen.on(v5) == b and seen.on(v7) == b
    assert trace_count(h, "xdp_redirect", key=(v6.ifindex, 0, map_id)) == 2
    assert h.memmap.system.in_use().size == 0


def test_redirect_to_a_device_that_is_down(closing: list[Host]) -> None:
    """xdp_ok_fwd_dev refuses a target that is down; a target whose peer is down has
    no NAPI there: veth_xdp_xmit's -ENXIO for the bulk."""
    h, _, (v0, v1, v2, v3) = redirect_map_host()
    closing.append(h)
    v2.up = False
    errs = h.tracer.listen(["xdp_redirect_err", "xdp_devmap_xmit"])
    v1.transmit(udp_frames(3))
    h.run()
    assert [e.record.err for e in errs.drain()] == [-errno.ENETDOWN] * 3
    v2.up, v3.up = True, False
    v1.transmit(udp_frames(3))
    h.run()
    recs = [e.record for e in errs.drain()]
    assert [(r.from_ifindex, r.to_ifindex, r.sent, r.drops, r.err)  # type: ignore[union-attr]
            for r in recs] == [(v0.ifindex, v2.ifindex, 0, 3, -errno.ENXIO)]
    assert h.stack.stats.received == 0


def test_close_frees_frames_in_flight() -> None:
    """Frames still in rx rings, veth xdp_rings and cpumap rings when the host closes
    go back where they belong (close() raises on a leak)."""
    h, coll, v0, v1 = cpumap_host(prog=True, cpus=(0,))
    v2, v3 = h.veth("veth2", "veth3")
    v3.gro = True
    c2 = load(h, "xdp2")
    v2.attach_xdp(c2.programs["xdp_prog2"])
    seen = Seen(h)
    v1.transmit(udp_frames(10))  # in veth0's ring, not polled
    v3.transmit(udp_frames(5))
    napi_poll(v0.rx[0])  # into the cpumap ring
    napi_poll(v2.rx[0])  # XDP_TX: into veth3's xdp_ring
    assert len(v3.rx[0].ring) == 5 and sum(rt.backlog for rt in h.cpumaps.values()) == 10
    v1.transmit(udp_frames(4))
    eth = h.add_device("eth0")
    eth.receive(udp_frames(6))
    h.close()  # the cpumap kthread delivers what it holds, the rest is freed
    assert len(seen.on(v0)) == 10 and seen.total == 10


# -- 6. devmap programs ------------------------------------------------------------------------

SEEN_EGRESS = """r6 = r1
*(u32 *)(r10 -4) = 0
r1 = map[fd:1]
r2 = r10
r2 += -4
call bpf_map_lookup_elem
if r0 == 0 goto out
r1 = *(u32 *)(r6 +20)
*(u32 *)(r0 +0) = r1
r1 = *(u32 *)(r6 +12)
*(u32 *)(r0 +4) = r1
r1 = *(u32 *)(r6 +16)
*(u32 *)(r0 +8) = r1
r1 = *(u32 *)(r0 +12)
r1 += 1
*(u32 *)(r0 +12) = r1
out:
r0 = 2
exit"""


def devmap_prog_host(egress_text: str) -> tuple[Host, Collection, tuple[Veth, Veth, Veth, Veth]]:
    spec = asm_spec({
        "ingress": ("xdp", XDP, "r1 = map[fd:0]\nr2 = 0\nr3 = 0\ncall bpf_redirect_map\nexit"),
        "egress": ("xdp/devmap", DEVMAP_ATTACH, egress_text),
    }, [devmap_spec("tx_port", 1), array_spec("seen")])
    h = new_host()
    v0, v1 = h.veth("veth0", "veth1")
    v2, v3 = h.veth("veth2", "veth3")
    v3.gro = True
    coll = h.load(spec)
    coll.maps["tx_port"][0] = devmap_value(v2.ifindex, coll.programs["egress"])
    v0.attach_xdp(coll.programs["ingress"])
    return h, coll, (v0, v1, v2, v3)


def test_devmap_program_sees_egress_ifindex(closing: list[Host]) -> None:
    h, coll, (v0, v1, v2, v3) = devmap_prog_host(SEEN_EGRESS)
    closing.append(h)
    seen = Seen(h)
    frames = udp_frames(7)
    v1.transmit(frames)
    h.run()
    assert seen.on(v3) == frames
    egress, ingress, queue, runs = struct.unpack("<4I", coll.maps["seen"][0])
    assert (egress, ingress, queue, runs) == (v2.ifindex, v0.ifindex, 0, 7)
    assert trace_count(h, "xdp_devmap_xmit", "sent", (v0.ifindex, v2.ifindex)) == 7


def test_redirect_map_sample_egress_program(closing: list[Host]) -> None:
    h, _, (_, v1, _, v3) = redirect_map_host(egress=True)
    closing.append(h)
    seen = Seen(h)
    frames = udp_frames(5)
    v1.transmit(frames)
    h.run()
    tx_src_mac = bytes.fromhex("020000000001")  # the .rodata default
    assert seen.on(v3) == [f[6:12] + tx_src_mac + f[12:] for f in frames]


@pytest.mark.parametrize("act", [0, 1, 3, 4, 7])
def test_devmap_program_verdicts_other_than_pass(act: int, closing: list[Host],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """dev_map_bpf_prog_run: DROP drops quietly; ABORTED, XDP_TX, XDP_REDIRECT and
    unknown verdicts drop after an xdp_exception on the egress device (TX/REDIRECT:
    checked on Linux); the drops show in xdp_devmap_xmit."""
    h, _, (v0, v1, v2, _) = devmap_prog_host(f"r0 = {act}\nexit")
    closing.append(h)
    seen = Seen(h)
    with caplog.at_level(logging.WARNING, logger="pyxdp.net.napi"):
        v1.transmit(udp_frames(4))
        h.run()
    assert seen.total == 0
    assert trace_count(h, "xdp_exception", key=(v2.ifindex, act)) == (0 if act == 1 else 4)
    assert trace_count(h, "xdp_exception") == (0 if act == 1 else 4)
    assert trace_count(h, "xdp_devmap_xmit", "drops", (v0.ifindex, v2.ifindex)) == 4
    assert trace_count(h, "xdp_devmap_xmit", "sent") == 0
    assert trace_count(h, "xdp_redirect") == 4  # the redirect itself succeeded
    warned = "bpf_warn_invalid_xdp_action" in caplog.text
    assert warned == (act not in (0, 1))



def _entry_prog_run(kind: str, foreign: bool) -> tuple[list[bytes], tuple[int, ...], int]:
    """Ingress redirects 6 frames into a devmap or cpumap whose entry program records
    (egress ifindex, ingress ifindex, queue, runs) in its "seen" array; ``foreign``: the
    entry program is of another Collection (its own Host and backend). Returns what
    veth3 (devmap) or veth1's stack (cpumap) got, the record and the entry's prog id."""
    if kind == "devmap":
        m, attach = devmap_spec("tx_port", 1), DEVMAP_ATTACH
    else:
        m = MapSpec("tx_port", int(BpfMapType.BPF_MAP_TYPE_CPUMAP), 4, 8, 1)
        attach = int(BpfAttachType.BPF_XDP_CPUMAP)
    text = SEEN_EGRESS if kind == "devmap" else \
        SEEN_EGRESS.replace("r1 = *(u32 *)(r6 +20)", "r1 = 0")  # no egress_ifindex
    entry = ("xdp/" + kind, attach, text)
    ingress = ("xdp", XDP, "r1 = map[fd:0]\nr2 = 0\nr3 = 0\ncall bpf_redirect_map\nexit")
    h = new_host()
    other = new_host()
    try:
        v0, v1 = h.veth("veth0", "veth1")
        v2, v3 = h.veth("veth2", "veth3")
        v3.gro = True
        if foreign:
            coll = h.load(asm_spec({"ingress": ingress}, [m, array_spec("seen")]))
            owner = other.load(asm_spec({"entry": entry}, [m, array_spec("seen")]))
        else:
            coll = owner = h.load(asm_spec({"ingress": ingress, "entry": entry},
                                           [m, array_spec("seen")]))
        prog = owner.programs["entry"]
        value = devmap_value(v2.ifindex, prog) if kind == "devmap" \
            else struct.pack("<Ii", 16, prog.fd)
        coll.maps["tx_port"][0] = value
        seen_map = owner.maps["seen"].handle  # (its memory: the program's reference)
        if foreign:
            owner.close()  # the entry holds its program, as the kernel's does
        v0.attach_xdp(coll.programs["ingress"])
        seen = Seen(h)
        v1.transmit(udp_frames(6))
        h.run()
        got = seen.on(v3 if kind == "devmap" else v0)
        rec = struct.unpack("<4I", seen_map.lookup(b"\0" * 4))
        return got, rec, struct.unpack("<Ii", coll.maps["tx_port"].handle.lookup(b"\0" * 4))[1]
    finally:
        h.close()
        other.close()


@pytest.mark.parametrize("kind", ["devmap", "cpumap"])
def test_entry_program_of_another_collection(kind: str) -> None:
    """Round 9: Linux takes any BPF_XDP_DEVMAP/BPF_XDP_CPUMAP program fd of the process
    for a devmap/cpumap entry; pyxdp's maps refused another Collection's with EINVAL and
    its datapath looked entry programs up in its own backend only. The entry program of
    another Collection runs now, on its own maps, exactly as a same-Collection one."""
    same = _entry_prog_run(kind, foreign=False)
    other = _entry_prog_run(kind, foreign=True)
    assert len(same[0]) == 6 and same[1][3] == 6
    assert other[:2] == same[:2] and other[2] != 0
    if kind == "devmap":  # egress_ifindex is set for devmap programs only
        assert same[1][0] != 0


# -- 7. cpumap ------------------------------------------------------------------------------

def cpumap_host(*, prog: bool, qsize: int = 64, cpus: Sequence[int] = (0, 1),
                threads: bool = False, ingress: str = "xdp_redirect_cpu_rr"
                ) -> tuple[Host, Collection, Veth, Veth]:
    h = new_host(cpumap_threads=threads)
    v0, v1 = h.veth("veth0", "veth1")
    coll = load(h, "redirect_cpu")
    fd = coll.programs["xdp_cpumap_filter"].fd if prog else 0
    for slot, cpu in enumerate(cpus):
        coll.maps["cpu_map"][cpu] = {"qsize": qsize, "bpf_prog": {"fd": fd}}
        coll.maps["cpus_available"][slot] = cpu
    coll.maps["cpus_count"][0] = len(cpus)
    v0.attach_xdp(coll.programs[ingress])
    return h, coll, v0, v1


def discard_mix(n: int) -> list[bytes]:
    """UDP frames, every fourth one to port 9 (dropped by xdp_cpumap_filter)."""
    return [pk.udp_packet(b"cpu", sport=2000 + i, dport=9 if i % 4 == 0 else 53)
            for i in range(n)]


@pytest.mark.parametrize("prog", [False, True])
def test_cpumap_redirect(prog: bool, closing: list[Host]) -> None:
    h, coll, v0, v1 = cpumap_host(prog=prog)
    closing.append(h)
    seen = Seen(h)
    frames = discard_mix(40)
    v1.transmit(frames)
    h.run()
    kept = [f for i, f in enumerate(frames) if not (prog and i % 4 == 0)]
    # Delivered on the ingress device (xdpf->dev_rx), unchanged; each CPU's in order
    # (round robin: even frames to CPU 0, odd ones to CPU 1).
    assert sorted(seen.on(v0)) == sorted(kept) and seen.total == len(kept)
    order = [frames.index(p) for p in seen.on(v0)]
    for cpu in (0, 1):
        mine = [i for i in order if i % 2 == cpu]
        assert mine == sorted(mine)
    map_id = coll.maps["cpu_map"].handle.id
    assert trace_count(h, "xdp_redirect", key=(v0.ifindex, 0, map_id)) == 40
    # Round robin: 20 frames per CPU, bulks of 8 -> 8 + 8 + 4 per CPU.
    for cpu in (0, 1):
        key = (map_id, 0, cpu)  # (map, producing CPU, target CPU)
        assert trace_count(h, "xdp_cpumap_enqueue", key=key) == 3
        assert trace_count(h, "xdp_cpumap_enqueue", "processed", key) == 20
        assert trace_count(h, "xdp_cpumap_enqueue", "drops", key) == 0
        kt = (map_id, cpu)
        assert trace_count(h, "xdp_cpumap_kthread", "processed", kt) == 20
        assert trace_count(h, "xdp_cpumap_kthread", "sched", kt) == 1
    # The program's verdicts (Linux: all zero without a program).
    assert trace_count(h, "xdp_cpumap_kthread", "xdp_pass") == (30 if prog else 0)
    assert trace_count(h, "xdp_cpumap_kthread", "xdp_drop") == (10 if prog else 0)
    assert trace_count(h, "xdp_cpumap_kthread", "xdp_redirect") == 0
    assert trace_count(h, "xdp_exception") == 0
    assert coll.maps["rx_cnt"].sum(0) == {"processed": 40, "dropped": 0, "issue": 0}


@pytest.mark.parametrize("act", [0, 3, 7])
def test_cpumap_program_bad_verdicts_drop_without_exception(
        act: int, closing: list[Host], caplog: pytest.LogCaptureFixture) -> None:
    """cpu_map_bpf_prog_run_xdp: anything but PASS/REDIRECT/DROP is warned about and
    dropped (xdp_drop) - no xdp_exception, not even for XDP_ABORTED (Linux)."""
    h = new_host()
    closing.append(h)
    v0, v1 = h.veth("veth0", "veth1")
    cm = MapSpec("cpu_map", int(BpfMapType.BPF_MAP_TYPE_CPUMAP), 4, 8, 2)
    spec = asm_spec({
        "ingress": ("xdp", XDP, "r1 = map[fd:0]\nr2 = 1\nr3 = 0\ncall bpf_redirect_map\nexit"),
        "cpu": ("xdp/cpumap", int(BpfAttachType.BPF_XDP_CPUMAP), f"r0 = {act}\nexit"),
    }, [cm])
    coll = h.load(spec)
    coll.maps["cpu_map"][1] = struct.pack("<Ii", 16, coll.programs["cpu"].fd)
    v0.attach_xdp(coll.programs["ingress"])
    seen = Seen(h)
    with caplog.at_level(logging.WARNING, logger="pyxdp.net.napi"):
        v1.transmit(udp_frames(5))
        h.run()
    assert seen.total == 0
    assert trace_count(h, "xdp_exception") == 0
    assert trace_count(h, "xdp_cpumap_kthread", "xdp_drop") == 5
    assert trace_count(h, "xdp_cpumap_kthread", "processed") == 5
    assert "bpf_warn_invalid_xdp_action" in caplog.text


def test_cpumap_program_redirects(closing: list[Host]) -> None:
    """A cpumap program's XDP_REDIRECT: xdp_do_redirect from the frame's dev_rx,
    flushed after each kthread batch (of at most 8)."""
    cm = MapSpec("cpu_map", int(BpfMapType.BPF_MAP_TYPE_CPUMAP), 4, 8, 2)
    spec = asm_spec({
        "ingress": ("xdp", XDP, "r1 = map[fd:0]\nr2 = 1\nr3 = 0\ncall bpf_redirect_map\nexit"),
        "cpu": ("xdp/cpumap", int(BpfAttachType.BPF_XDP_CPUMAP),
                "r1 = map[fd:1]\nr2 = 0\nr3 = 0\ncall bpf_redirect_map\nexit"),
    }, [cm, devmap_spec("tx_port", 2)])
    h = new_host()
    closing.append(h)
    v0, v1 = h.veth("veth0", "veth1")
    v2, v3 = h.veth("veth2", "veth3")
    v3.gro = True
    coll = h.load(spec)
    coll.maps["tx_port"][0] = devmap_value(v2.ifindex)
    coll.maps["cpu_map"][1] = struct.pack("<Ii", 16, coll.programs["cpu"].fd)
    v0.attach_xdp(coll.programs["ingress"])
    seen = Seen(h)
    frames = udp_frames(10)
    v1.transmit(frames)
    h.run()
    assert seen.on(v3) == frames and seen.total == 10
    cpu_id, dev_id = coll.maps["cpu_map"].handle.id, coll.maps["tx_port"].handle.id
    assert trace_count(h, "xdp_redirect", key=(v0.ifindex, 0, cpu_id)) == 10
    assert trace_count(h, "xdp_redirect", key=(v0.ifindex, v2.ifindex, dev_id)) == 10
    assert trace_count(h, "xdp_cpumap_kthread", "xdp_redirect") == 10
    assert trace_count(h, "xdp_devmap_xmit", key=(v0.ifindex, v2.ifindex)) == 2  # 8 + 2
    # A redirect that fails there (veth2's peer without NAPI: -EOPNOTSUPP) counts as
    # a drop.
    v3.gro = False
    v1.transmit(frames)
    h.run()
    assert trace_count(h, "xdp_cpumap_kthread", "xdp_drop") == 10
    assert trace_count(h, "xdp_cpumap_kthread", "xdp_redirect") == 10
    assert trace_count(h, "xdp_redirect_err", key=(v0.ifindex, -errno.EOPNOTSUPP)) == 10
    assert trace_count(h, "xdp_exception") == 0 and seen.total == 10


def test_cpumap_full_ring_drops(closing: list[Host]) -> None:
    h, coll, v0, v1 = cpumap_host(prog=False, qsize=4, cpus=(0,))
    closing.append(h)
    seen = Seen(h)
    v1.transmit(udp_frames(20))
    h.run()
    # One poll: bulks of 8, 8, 4 into a ring of 4 the kthread empties after the poll.
    assert seen.total == 4
    assert trace_count(h, "xdp_cpumap_enqueue") == 3
    assert trace_count(h, "xdp_cpumap_enqueue", "processed") == 20
    assert trace_count(h, "xdp_cpumap_enqueue", "drops") == 16
    assert trace_count(h, "xdp_cpumap_kthread", "processed") == 4
    assert trace_count(h, "xdp_redirect") == 20  # the redirects themselves succeeded


def test_cpumap_two_ingress_devices_keep_their_dev_rx(closing: list[Host]) -> None:
    """Frames of two devices share a kthread batch; each skb arrives on its own device."""
    h, coll, v0, v1 = cpumap_host(prog=True, cpus=(0,))
    closing.append(h)
    v2, v3 = h.veth("veth2", "veth3")
    v2.attach_xdp(coll.programs["xdp_redirect_cpu_rr"])
    seen = Seen(h)
    a, b = discard_mix(6), [pk.tcp_packet(sport=i) for i in range(3)]
    v1.transmit(a)
    v3.transmit(b)
    h.run()
    assert seen.on(v0) == [f for i, f in enumerate(a) if i % 4] and seen.on(v2) == b
    assert h.stack.per_device == {v0.ifindex: 4, v2.ifindex: 3}


def test_cpumap_list_delivery_off(closing: list[Host]) -> None:
    h, coll, v0, v1 = cpumap_host(prog=False, cpus=(0,))
    closing.append(h)
    rt = cpumap_runtime(h, coll.maps["cpu_map"].handle, 0)
    rt.list_delivery = False
    seen = Seen(h)
    frames = udp_frames(12)
    v1.transmit(frames)
    h.run()
    assert seen.on(v0) == frames
    assert h.stack.stats.batches == 12  # one netif_receive_skb per skb


@pytest.mark.parametrize("lists", [True, False], ids=["lists", "one_by_one"])
def test_cpumap_lists_reuse_the_route(lists: bool, closing: list[Host]) -> None:
    """A kthread batch is one list: its skbs to one destination take one input route
    lookup (ip_list_rcv_finish's route hint); one skb at a time, each takes its own."""
    h, coll, v0, v1 = cpumap_host(prog=False, cpus=(0,))
    closing.append(h)
    v0.add_address(f"{pk.DEFAULT_DST_IP4}/24")
    cpumap_runtime(h, coll.maps["cpu_map"].handle, 0).list_delivery = lists
    sock = h.stack.udp_socket(5678)
    v1.transmit(udp_frames(32))
    h.run()
    assert sock.packets == 32
    assert h.stack.fib_lookups == (32 // 8 if lists else 32)


def test_cpumap_threads_deliver_everything() -> None:
    h, coll, v0, v1 = cpumap_host(prog=True, threads=True)
    try:
        seen = Seen(h)
        frames = discard_mix(400)
        for i in range(0, 400, 50):
            v1.transmit(frames[i:i + 50])
            h.run()
        # run() returns only when the workers are done with what they took.
        kept = [f for i, f in enumerate(frames) if i % 4]
        assert sorted(seen.on(v0)) == sorted(kept)
        assert trace_count(h, "xdp_cpumap_kthread", "processed") == 400
        assert trace_count(h, "xdp_cpumap_kthread", "xdp_drop") == 100
        assert all(rt.backlog == 0 for rt in h.cpumaps.values())
    finally:
        h.close()
    assert not any(t.name.startswith("cpumap/") for t in threading.enumerate())


# -- 8. generic XDP ------------------------------------------------------------------------------

@pytest.mark.parametrize("sample, prog", [("xdp1", "xdp_prog1"), ("xdp2", "xdp_prog2")])
def test_generic_same_verdicts_as_native(sample: str, prog: str) -> None:
    frames, want = mixed_frames()
    results = []
    for mode in ("native", "generic"):
        with new_host() as h:
            a, b = h.veth("veth0", "veth1")
            b.gro = mode == "native"  # generic XDP_TX needs no NAPI on the peer
            seen = Seen(h)
            coll = load(h, sample)
            a.attach_xdp(coll.programs[prog], mode=mode)
            b.transmit(frames)
            h.run()
            counts = {k: coll.maps["rxcnt"].sum(k) for k in want}
            results.append((dict(seen.packets), counts, a.stats.xdp_packets))
            assert counts == want
            if sample == "xdp2":
                assert seen.on(b) == [swap_macs(f) for f in frames]
                # generic_xdp_tx has no bulk queue: no xdp_bulk_tx.
                assert trace_count(h, "xdp_bulk_tx") == (1 if mode == "native" else 0)
            else:
                assert seen.total == 0
    assert results[0] == results[1]


def test_generic_adjust_head_tail_meta_pass() -> None:
    text = """r6 = r1
r2 = 14
call bpf_xdp_adjust_head
r1 = r6
r2 = -4
call bpf_xdp_adjust_tail
r1 = r6
r2 = -8
call bpf_xdp_adjust_meta
if r0 != 0 goto out
r2 = *(u32 *)(r6 +8)
r3 = *(u32 *)(r6 +0)
r4 = r2
r4 += 8
if r4 > r3 goto out
r1 = 0x11223344
*(u64 *)(r2 +0) = r1
out:
r0 = 2
exit"""
    frames = udp_frames(3)
    for mode in ("native", "generic"):
        with new_host() as h:
            a, b = h.veth("veth0", "veth1")
            seen = Seen(h)
            a.attach_xdp(h.load(asm(text)).programs["t"], mode=mode)
            b.transmit(frames)
            h.run()
            assert seen.on(a) == [f[14:-4] for f in frames], mode
            assert seen.meta[a.ifindex] == [struct.pack("<Q", 0x11223344)] * 3, mode


@pytest.mark.parametrize("mode", ["native", "generic"])
def test_meta_sample_metadata_reaches_the_stack(mode: str) -> None:
    frames = udp_frames(4)
    with new_host() as h:
        a, b = h.veth("veth0", "veth1")
        seen = Seen(h)
        a.attach_xdp(load(h, "meta").programs["xdp_meta_producer"], mode=mode)
        b.transmit(frames)
        h.run()
        assert seen.on(a) == frames  # the packet itself is unchanged
        for m in seen.meta[a.ifindex]:
            mark, _hash, ts = struct.unpack("<IIQ", m)
            assert mark == 0x5059 and ts > 0


@pytest.mark.parametrize("mode", ["native", "generic"])
def test_adjust_tail_sample_icmp_reply(mode: str) -> None:
    big = pk.udp_packet(size=800)
    small = pk.udp_packet(b"small")
    with new_host() as h:
        a, b = h.veth("veth0", "veth1")
        b.gro = True
        seen = Seen(h)
        coll = load(h, "adjust_tail")
        a.attach_xdp(coll.programs["xdp_icmp_too_big"], mode=mode)
        b.transmit([big, small])
        h.run()
        assert seen.on(a) == [small]
        (reply,) = seen.on(b)
        assert len(reply) == 70
        assert reply[:6] == big[6:12] and reply[6:12] == big[:6]
        assert reply[23] == pk.IPPROTO_ICMP and reply[34:36] == b"\x03\x04"  # frag needed
        assert reply[42:62] == big[14:34]  # the quoted IP header
        assert coll.maps["icmp_sent"][0] == 1


def test_generic_on_a_nic_sees_the_rx_queue() -> None:
    """A NIC without a native program still runs its generic one (rx_queue_index:
    the skb's queue)."""
    text = "r2 = *(u32 *)(r1 +16)\nr0 = 2\nif r2 != 1 goto +1\nr0 = 1\nexit"
    with new_host() as h:
        eth = h.add_device("eth0", rx_queues=2)
        seen = Seen(h)
        eth.attach_xdp(h.load(asm(text)).programs["t"], mode="generic")
        q0, q1 = udp_frames(3), udp_frames(5, dport=99)
        eth.receive(q0, queue=0)
        eth.receive(q1, queue=1)
        h.run()
        assert seen.on(eth) == q0
        assert (eth.stats.rx_packets, eth.stats.xdp_packets, eth.stats.xdp_drops) == (8, 8, 5)


def test_generic_program_on_a_veth_receiving_xdp_frames() -> None:
    """Frames XDP_TX'd to a veth with GRO and a generic program meet that program."""
    with new_host() as h:
        a, b = h.veth("veth0", "veth1")
        b.gro = True
        seen = Seen(h)
        a.attach_xdp(load(h, "xdp2").programs["xdp_prog2"])
        c1 = load(h, "xdp1")
        b.attach_xdp(c1.programs["xdp_prog1"], mode="generic")
        b.transmit(udp_frames(5))  # b's stack sends; a reflects; b's generic xdp1 drops
        h.run()
        assert seen.total == 0 and c1.maps["rxcnt"].sum(17) == 5
        assert b.stats.rx_packets == 5


def test_generic_redirect_and_broadcast() -> None:
    """Generic redirect: synchronous, per skb, no bulk queues."""
    with new_host() as h:
        v0, v1 = h.veth("veth0", "veth1")
        v2, v3 = h.veth("veth2", "veth3")
        v4, v5 = h.veth("veth4", "veth5")
        text = (f"r1 = map[fd:0]\nr2 = 0\nr3 = {BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS}\n"
                "call bpf_redirect_map\nexit")
        coll = h.load(asm(text, [devmap_spec()]))
        for slot, dev in enumerate((v0, v2, v4)):
            coll.maps["ports"][slot] = devmap_value(dev.ifindex)
        v0.attach_xdp(coll.programs["t"], mode="generic")
        seen = Seen(h)
        frames = udp_frames(4)
        v1.transmit(frames)
        h.run()
        assert seen.on(v3) == frames and seen.on(v5) == frames and seen.total == 8
        assert trace_count(h, "xdp_redirect", key=(v0.ifindex, v0.ifindex,
                                                   coll.maps["ports"].handle.id)) == 4
        assert trace_count(h, "xdp_devmap_xmit") == 0  # no bulks in generic mode
        assert h.memmap.system.in_use().size == 0


def test_generic_redirect_errors() -> None:
    with new_host() as h:
        v0, v1 = h.veth("veth0", "veth1")
        v0.attach_xdp(h.load(asm("r0 = 4\nexit")).programs["t"], mode="generic")
        errs = h.tracer.listen(["xdp_redirect_err"])
        v1.transmit(udp_frames(2))
        h.run()
        assert [e.record.err for e in errs.drain()] == [-errno.EBADRQC] * 2
        assert h.stack.stats.received == 0


def test_generic_redirect_to_cpumap() -> None:
    """cpu_map_generic_redirect: one skb at a time into the ring (no bulk); a full
    ring fails the redirect (xdp_redirect_err -ENOSPC, enqueue drops 1)."""
    with new_host() as h:
        v0, v1 = h.veth("veth0", "veth1")
        coll = load(h, "redirect_cpu")
        coll.maps["cpu_map"][1] = {"qsize": 4}
        coll.maps["cpus_available"][0] = 1
        coll.maps["cpus_count"][0] = 1
        v0.attach_xdp(coll.programs["xdp_redirect_cpu_rr"], mode="generic")
        seen = Seen(h)
        frames = udp_frames(6)
        v1.transmit(frames)  # one call: six skbs before the kthread runs
        h.run()
        assert seen.on(v0) == frames[:4]
        map_id = coll.maps["cpu_map"].handle.id
        assert trace_count(h, "xdp_cpumap_enqueue") == 6  # one per skb
        assert trace_count(h, "xdp_cpumap_enqueue", "processed") == 4
        assert trace_count(h, "xdp_cpumap_enqueue", "drops") == 2
        assert trace_count(h, "xdp_redirect", key=(v0.ifindex, 0, map_id)) == 4
        assert trace_count(h, "xdp_redirect_err", key=(v0.ifindex, -errno.ENOSPC)) == 2
        assert h.memmap.system.in_use().size == 0


# -- 9. XDP_ABORTED --------------------------------------------------------------------------

FAULT = "r2 = *(u32 *)(r1 +0)\nr0 = *(u64 *)(r2 +4000)\nr0 = 2\nexit"


@pytest.mark.parametrize("mode", ["native", "generic"])
def test_fault_is_aborted_with_a_report(mode: str) -> None:
    with new_host() as h:
        a, b = h.veth("veth0", "veth1")
        seen = Seen(h)
        a.attach_xdp(h.load(asm(FAULT), verify=False).programs["t"], mode=mode)
        b.transmit(udp_frames(5))
        h.run()
        assert seen.total == 0
        assert trace_count(h, "xdp_exception", key=(a.ifindex, 0)) == 5
        assert a.stats.xdp_aborted == 5
        (report,) = a.faults  # the first fault of the batch
        assert "veth0" in report and ": t: " in report and "pc 1" in report
        assert "out-of-bounds read" in report and report.endswith("-> XDP_ABORTED")


@pytest.mark.parametrize("mode", ["native", "generic"])
def test_unknown_verdict_warns_and_aborts(mode: str, caplog: pytest.LogCaptureFixture
                                          ) -> None:
    with new_host() as h:
        a, b = h.veth("veth0", "veth1")
        seen = Seen(h)
        a.attach_xdp(h.load(asm("r0 = 7\nexit")).programs["t"], mode=mode)
        with caplog.at_level(logging.WARNING):
            b.transmit(udp_frames(3))
            h.run()
            b.transmit(udp_frames(3))
            h.run()
        assert seen.total == 0
        assert trace_count(h, "xdp_exception", key=(a.ifindex, 7)) == 6
        assert a.stats.xdp_aborted == 6
        # Warned once per program.
        assert caplog.text.count("illegal action 7") == 1
        assert "bpf_warn_invalid_xdp_action" in caplog.text


# -- 10. NICs, traffic generators, pcapng -----------------------------------------------------

def test_nic_traffic_generator_and_pcapng(tmp_path: Path) -> None:
    path = tmp_path / "wire.pcapng"
    with new_host() as h:
        eth = h.add_device("eth0", rx_queues=2)
        coll = load(h, "xdp2")
        eth.attach_xdp(coll.programs["xdp_prog2"])
        coll_w = Collector()
        sink = PcapngSink(path)
        eth.wire += [coll_w, sink]
        eth.rx[0].source = TrafficGenerator(count=1000, flows=4, protos=("udp", "tcp"))
        eth.rx[1].source = TrafficGenerator(count=300, seed=1)
        assert h.run() == 1300
        sink.close()
        assert eth.stats.rx_packets == 1300 and eth.stats.xdp_tx == 1300
        assert eth.rx[0].polls == 16 and eth.rx[1].polls == 5  # budget 64
        assert coll.maps["rxcnt"].sum(17) + coll.maps["rxcnt"].sum(6) == 1300
        assert trace_count(h, "xdp_bulk_tx", "sent", (eth.ifindex,)) == 1300
        assert coll_w.count == 1300 and h.stack.stats.received == 0
        sent = coll_w.frames["eth0"]
    captured = list(read_pcapng(path))
    assert [c.data for c in captured] == sent
    assert {c.interface_name for c in captured} == {"eth0"}
    assert all(c.orig_len == len(c.data) for c in captured)


def test_nic_endless_generator_and_given_packets() -> None:
    frames = udp_frames(3)
    with new_host() as h:
        eth = h.add_device("eth0")
        seen = Seen(h)
        eth.rx[0].source = TrafficGenerator(packets=frames)  # endless
        assert h.run(max_rounds=3) == 3 * 64
        assert seen.on(eth) == (frames * 64)[:192]
        eth.rx[0].source = TrafficGenerator(packets=frames, count=7)
        h.run()
        assert len(seen.on(eth)) == 199
        # A NIC's queue ring holds 1024 frames: the rest are rx_dropped.
        assert eth.receive(udp_frames(1100)) == 1024
        assert eth.stats.rx_dropped == 76
        h.run()
        assert len(seen.on(eth)) == 199 + 1024


def test_nic_redirect_to_a_nic_wire() -> None:
    with new_host() as h:
        eth0 = h.add_device("eth0")
        eth1 = h.add_device("eth1")
        wire = Collector()
        eth1.wire.append(wire)
        coll = h.load(asm(f"r1 = {eth1.ifindex}\nr2 = 0\ncall bpf_redirect\nexit"))
        eth0.attach_xdp(coll.programs["t"])
        frames = udp_frames(20)
        eth0.receive(frames)
        h.run()
        assert wire.frames["eth1"] == frames
        assert trace_count(h, "xdp_redirect", key=(eth0.ifindex, eth1.ifindex, INT_MAX)) == 20
        assert trace_count(h, "xdp_devmap_xmit", key=(eth0.ifindex, eth1.ifindex)) == 2


@pytest.mark.parametrize("size, delivered", [(1518, True), (1519, False)])
def test_nic_redirect_mtu(size: int, delivered: bool) -> None:
    with new_host() as h:
        eth0 = h.add_device("eth0")
        eth1 = h.add_device("eth1")
        wire = Collector()
        eth1.wire.append(wire)
        eth0.attach_xdp(h.load(asm(f"r1 = {eth1.ifindex}\nr2 = 0\ncall bpf_redirect\n"
                                   "exit")).programs["t"])
        frames = udp_frames(3, size=size)
        eth0.receive(frames)
        h.run()
        assert wire.frames.get("eth1", []) == (frames if delivered else [])
        assert trace_count(h, "xdp_redirect_err", key=(eth0.ifindex, -errno.EMSGSIZE)) == \
            (0 if delivered else 3)


# -- 11. engines ----------------------------------------------------------------------------------

def scenario(engine: str) -> tuple[object, ...]:
    """xdp2 on a NIC, redirect_map with its egress program, cpumap with its filter,
    adjust_tail, generic xdp1: everything observable."""
    with Host(tracer=Tracer(), engine=engine) as h:
        seen = Seen(h)
        eth = h.add_device("eth0", rx_queues=2)
        wire = Collector()
        eth.wire.append(wire)
        c2 = load(h, "xdp2")
        eth.attach_xdp(c2.programs["xdp_prog2"])
        eth.rx[0].source = TrafficGenerator(count=150, flows=8, protos=("udp", "tcp", "icmp"))
        eth.rx[1].source = TrafficGenerator(count=70, ipv6=True, seed=3)

        v0, v1 = h.veth("veth0", "veth1")
        v2, v3 = h.veth("veth2", "veth3")
        v3.gro = True
        rm = load(h, "redirect_map")
        v0.attach_xdp(rm.programs["xdp_redirect_map_prog"])
        rm.maps["tx_port"][0] = {"ifindex": v2.ifindex,
                                 "bpf_prog": {"fd": rm.programs["xdp_redirect_map_egress"].fd}}

        v4, v5 = h.veth("veth4", "veth5")
        rc = load(h, "redirect_cpu")
        filt = rc.programs["xdp_cpumap_filter"].fd
        for cpu in (0, 1):
            rc.maps["cpu_map"][cpu] = {"qsize": 32, "bpf_prog": {"fd": filt}}
            rc.maps["cpus_available"][cpu] = cpu
        rc.maps["cpus_count"][0] = 2
        v4.attach_xdp(rc.programs["xdp_redirect_cpu_hash"])

        v6, v7 = h.veth("veth6", "veth7")
        v7.gro = True
        at = load(h, "adjust_tail")
        v6.attach_xdp(at.programs["xdp_icmp_too_big"])
        v8, v9 = h.veth("veth8", "veth9")
        c1 = load(h, "xdp1")
        v8.attach_xdp(c1.programs["xdp_prog1"], mode="generic")

        mixed, _ = mixed_frames()
        v1.transmit(mixed + udp_frames(30))
        v5.transmit(discard_mix(50) + mixed)
        v7.transmit([pk.udp_packet(size=s) for s in (100, 700, 900, 1400)] + mixed)
        v9.transmit(mixed)
        h.run()
        colls = {"xdp2": c2, "rm": rm, "rc": rc, "at": at, "xdp1": c1}
        # Map and program ids are process-wide: name them.
        progs = {p.fd: f"{name}:{pn}" for name, c in colls.items()
                 for pn, p in c.programs.items()}

        def named(v: object) -> object:
            if isinstance(v, dict) and isinstance(v.get("bpf_prog"), dict):
                return {**v, "bpf_prog": progs.get(v["bpf_prog"]["id"], v["bpf_prog"])}
            return v
        maps = {f"{name}:{m}": sorted((k, named(v)) for k, v in c.maps[m].items())
                for name, c in colls.items() for m in c.maps if m != ".rodata"}
        names = {c.maps[m].handle.id: f"{name}:{m}" for name, c in colls.items()
                 for m in c.maps}
        where = {"xdp_redirect": 2, "xdp_redirect_err": None, "xdp_cpumap_enqueue": 0,
                 "xdp_cpumap_kthread": 0}
        snap = h.tracer.snapshot()
        trace = {}
        for e, rows in snap.counters.items():
            if e in ("mem_connect", "mem_disconnect"):
                continue
            at_ = where.get(e)
            trace[e] = {(k if at_ is None else
                         (*k[:at_], names.get(k[at_], k[at_]), *k[at_ + 1:])): v
                        for k, v in rows.items()}
        per_dev = {k: (v if k != v4.ifindex else sorted(v)) for k, v in seen.packets.items()}
        return (per_dev, wire.frames, maps, trace, h.stack.stats)


def test_engines_agree(engine: str) -> None:
    if not jit_available():
        pytest.skip("llvmlite is not installed: no JIT")
    if engine != "interp":
        pytest.skip("runs both engines itself")
    interp = scenario("interp")
    jit = scenario("jit")
    for a, b, what in zip(interp, jit, ("stack", "wire", "maps", "trace", "stack stats"),
                          strict=True):
        assert a == b, what


def test_engines_scenario_is_not_trivial(engine: str) -> None:
    per_dev, wire, maps, trace, stats = scenario(engine)
    assert isinstance(per_dev, dict) and isinstance(trace, dict)
    assert len(per_dev) == 4 and len(wire["eth0"]) == 220  # type: ignore[index]
    assert trace["xdp_devmap_xmit"] and trace["xdp_cpumap_kthread"] and trace["xdp_bulk_tx"]
    assert sum(len(v) for v in per_dev.values()) > 100


def test_pcap_replay_through_the_datapath(tmp_path: Path) -> None:
    """TrafficGenerator.from_capture replays a capture into a NIC queue, once or looped."""
    from pyxdp.net.pcap import PcapngWriter
    frames, per_proto = mixed_frames()
    cap = tmp_path / "in.pcapng"
    with PcapngWriter(cap) as w:
        w.add_interface("eth9")
        for i, f in enumerate(frames):
            w.write(f, i)
    with new_host() as h:
        eth = h.add_device("eth0")
        coll = load(h, "xdp1")
        eth.attach_xdp(coll.programs["xdp_prog1"])
        eth.rx[0].source = TrafficGenerator.from_capture(cap)
        assert h.run() == len(frames)
        assert {k: coll.maps["rxcnt"].sum(k) for k in per_proto} == per_proto
        eth.rx[0].source = TrafficGenerator.from_capture(cap, loop=True, count=3 * len(frames))
        h.run()
        assert coll.maps["rxcnt"].sum(17) == 4 * per_proto[17]


@pytest.mark.parametrize("obj", ["xdp1.o", "xdp2.o", "redirect_map.o"])
def test_threaded_napi_counts_as_one_thread(obj: str) -> None:
    """Threaded NAPI polls two queues on two threads (xdp1: per-CPU maps, lock-free;
    xdp2: XDP_TX, still lock-free; redirect_map: a devmap redirect to a NIC, each
    poll's own bulk queues, lock-free too): every counter and map equals a plain
    run's."""
    from pyxdp.net.source import TrafficGenerator

    def run(threaded: bool) -> tuple[object, ...]:
        with Host(threaded_napi=threaded) as h:
            eth = h.add_device("eth0", rx_queues=2)
            out = h.add_device("eth1")
            coll = h.load(SAMPLES / obj)
            eth.attach_xdp(next(iter(coll.programs.values())))
            if "tx_port" in coll.maps:
                coll.maps["tx_port"][0] = {"ifindex": out.ifindex}
            for q in range(2):
                eth.rx[q].source = TrafficGenerator(flows=16, seed=q, count=20_000)
            h.run()
            if "tx_port" in coll.maps:  # every frame redirected and sent
                assert out.stats.tx_packets == 2 * 20_000
            m = coll.maps["rxcnt"]
            return (eth.stats.asdict(), [eth.rx[q].stats.asdict() for q in range(2)],
                    sorted(m.items()), h.stack.stats, out.stats.asdict())

    assert run(True) == run(False)


@pytest.mark.parametrize("threads", [False, True])
def test_cpumap_program_redirect_native_is_python(threads: bool) -> None:
    """A cpumap program's verdicts in the native kthread - PASS after adjust_head,
    DROP, REDIRECT (handed to xdp_do_redirect: a veth whose peer has a program,
    then one whose peer has none, -ENXIO) - give what the Python kthread gives."""
    cm = MapSpec("cpu_map", int(BpfMapType.BPF_MAP_TYPE_CPUMAP), 4, 8, 2)
    # Frame byte 42 (the UDP payload's first byte) picks the verdict.
    cpu_prog = """
        r6 = r1
        r2 = *(u32 *)(r6 +0)
        r3 = *(u32 *)(r6 +4)
        r4 = r2
        r4 += 43
        if r4 > r3 goto pass
        r5 = *(u8 *)(r2 +42)
        if r5 == 1 goto drop
        if r5 == 2 goto red
        if r5 == 3 goto red_bad
    pass:
        r1 = r6
        r2 = -4
        call bpf_xdp_adjust_head
        r0 = 2
        exit
    drop:
        r0 = 1
        exit
    red:
        r1 = IFX_OK
        r2 = 0
        call bpf_redirect
        exit
    red_bad:
        r1 = IFX_BAD
        r2 = 0
        call bpf_redirect
        exit
    """

    def run(native: bool) -> tuple[object, ...]:
        with Host(tracer=Tracer(), engine=ENGINE, native=native,
                  cpumap_threads=threads) as h:
            v0, v1 = h.veth("veth0", "veth1")
            v2, v3 = h.veth("veth2", "veth3")
            v4, v5 = h.veth("veth4", "veth5")
            prog = cpu_prog.replace("IFX_OK", str(v2.ifindex)).replace("IFX_BAD",
                                                                        str(v4.ifindex))
            spec = asm_spec({
                "ingress": ("xdp", XDP,
                            "r1 = map[fd:0]\nr2 = 1\nr3 = 0\ncall bpf_redirect_map\nexit"),
                "cpu": ("xdp/cpumap", int(BpfAttachType.BPF_XDP_CPUMAP), prog),
                "peer": ("xdp", XDP, "r0 = 2\nexit"),
            }, [cm])
            coll = h.load(spec)
            coll.maps["cpu_map"][1] = struct.pack("<Ii", 64, coll.programs["cpu"].fd)
            v0.attach_xdp(coll.programs["ingress"])
            v3.attach_xdp(coll.programs["peer"])
            v1.transmit([pk.udp_packet(bytes([i % 4]) + b"x" * 20, sport=1000 + i)
                         for i in range(64)])
            h.run()
            mid = coll.maps["cpu_map"].handle.id  # ids differ between hosts: named -1

            def key(k: tuple[int, ...], name: str) -> tuple[int, ...]:
                at = {"xdp_redirect": 2, "xdp_cpumap_kthread": 0, "xdp_cpumap_enqueue": 0}
                i = at.get(name, -1)
                return k if i < 0 or k[i] != mid else (*k[:i], -1, *k[i + 1:])

            events = {name: sorted((key(k, name), list(v)) for k, v in
                                   getattr(h.tracer, name).counters.items())
                      for name in ("xdp_redirect", "xdp_redirect_err", "xdp_cpumap_kthread",
                                   "xdp_cpumap_enqueue", "xdp_exception")}
            st = h.stack.stats
            if threads:  # how a peer's polls group the redirected frames is timing
                st.batches = 0
            return (h.stack.per_device, st, events,
                    {d.name: d.stats.asdict() for d in h.devices.values()})

    assert run(True) == run(False)


@pytest.mark.parametrize("obj", ["xdp1.o", "xdp2.o", "adjust_tail.o", "meta.o"])
def test_generic_nic_native_is_python(obj: str) -> None:
    """A NIC with a generic program: the native loop (pskb_expand_head into a pool
    page, DROP/PASS in machine code, TX and redirects in Python) gives what the
    Python path gives - counters, maps, the stack's view, transmitted frames."""
    from pyxdp.net.source import Collector, TrafficGenerator

    def run(native: bool) -> tuple[object, ...]:
        with Host(tracer=Tracer(), engine=ENGINE, native=native) as h:
            eth = h.add_device("eth0")
            coll = h.load(SAMPLES / obj)
            eth.attach_xdp(next(iter(coll.programs.values())), mode="generic")
            wire = Collector()
            eth.wire.append(wire)
            eth.rx[0].source = TrafficGenerator(flows=32, protos=["udp", "tcp", "icmp"],
                                                sizes=[64, 200, 1500], seed=3, count=3000)
            h.run()
            maps = {n: sorted(m.items()) for n, m in coll.maps.items()
                    if int(m.spec.type) in (1, 2, 5, 6)}
            return (eth.stats, h.stack.stats, h.stack.per_device, maps, wire.frames,
                    h.tracer.snapshot().count("xdp_exception"))

    assert run(True) == run(False)


# Frame byte 42 (the UDP payload's first byte) picks a generic program's verdict.
_GENERIC_VERDICTS = """
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
    if r7 > 11 goto bcast
    r1 = IFX_BASE
    r1 += r7
    r2 = 0
    call bpf_redirect
    exit
bcast:
    r1 = map[fd:0]
    r2 = 0
    r3 = BCAST
    call bpf_redirect_map
out:
    exit
"""


# A devmap program whose verdict is frame byte 43 (the payload's second), up to 9.
_EGRESS_VERDICT = """
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


def _generic_redirect_host(h: Host, *, entry_prog: bool = True, peer_prog: bool = False,
                           ) -> tuple[NetDevice, Collection, dict[str, NetDevice]]:
    """A NIC with a generic program whose verdicts (by payload byte) are PASS, DROP,
    TX, devmap slots 0-3, ifindexes base+8..base+11 and a broadcast, over NICs that
    are sinks, one with a wire sink, one with a small MTU, a veth and a devmap entry
    with a program (``entry_prog``; else slot 2 names eth1 without one) whose verdict
    is the payload's second byte; the veth's peer has an XDP_PASS program
    (``peer_prog``) or none."""
    eth = h.add_device("eth0")
    sink = h.add_device("eth1")
    small = h.add_device("eth2", mtu=100)
    wired = h.add_device("eth3")
    wired.wire.append(Collector())
    v0, v1 = h.veth("veth0", "veth1")
    base = sink.ifindex - 8  # ifindex byte 8: eth1, 9: eth2, 10: eth3, 11: veth0
    assert (small.ifindex, wired.ifindex, v0.ifindex) == (base + 9, base + 10, base + 11)
    text = _GENERIC_VERDICTS.replace("IFX_BASE", str(base)).replace(
        "BCAST", str(BPF_F_BROADCAST))
    spec = asm_spec({"t": ("xdp", int(BpfAttachType.BPF_XDP), text),
                     "eg": ("xdp/devmap", int(BpfAttachType.BPF_XDP_DEVMAP),
                            _EGRESS_VERDICT),
                     "pass": ("xdp", int(BpfAttachType.BPF_XDP), "r0 = 2\nexit")},
                    [devmap_spec()])
    coll = h.load(spec)
    ports = coll.maps["ports"]
    ports[0] = devmap_value(sink.ifindex)  # byte 4
    ports[1] = devmap_value(small.ifindex)  # byte 5
    # Byte 6: an entry program (or none).
    ports[2] = devmap_value(sink.ifindex, coll.programs["eg"] if entry_prog else None)
    ports[3] = devmap_value(v0.ifindex)  # byte 7
    eth.attach_xdp(coll.programs["t"], mode="generic")
    if peer_prog:
        v1.attach_xdp(coll.programs["pass"])
    return eth, coll, {"sink": sink, "small": small, "wired": wired, "v0": v0, "v1": v1}


def _generic_observed(h: Host, coll: Collection) -> tuple[object, ...]:
    mid = coll.maps["ports"].handle.id  # ids differ between hosts: named -1
    events = {name: sorted(((*k[:2], -1 if k[2] == mid else k[2]) if name == "xdp_redirect"
                            else k, list(v))
                           for k, v in getattr(h.tracer, name).counters.items())
              for name in ("xdp_redirect", "xdp_redirect_err", "xdp_exception",
                           "xdp_bulk_tx", "xdp_devmap_xmit")}
    return ({d.name: d.stats.asdict() for d in h.devices.values()}, h.stack.stats,
            h.stack.per_device, events)


@pytest.mark.parametrize(("entry_prog", "peer_prog"), [(True, False), (False, False),
                                                      (True, True)])
def test_generic_tx_and_redirects_native_is_python(entry_prog: bool, peer_prog: bool) -> None:
    """A NIC's generic program on the native loop - generic_xdp_tx,
    xdp_do_generic_redirect to NICs and veths (whose peer's stack or native
    program receives: veth_xdp_rx), entry programs passing, dropping,
    aborting, returning an unknown verdict) and broadcasts over them natively, the
    rest (a wire sink) deferred - gives what the Python path gives:
    counters of every device, the stack, tracepoint counts."""
    pkts = [pk.udp_packet(bytes([k, v]) + b"x" * 19, sport=1000 + k + 16 * s + 64 * v,
                          size=size)
            for k in range(13) for s, size in enumerate((64, 200)) for v in (2, 1, 0, 9)]

    def run(native: bool) -> tuple[object, ...]:
        with Host(tracer=Tracer(), engine="jit", native=native) as h:
            eth, coll, _ = _generic_redirect_host(h, entry_prog=entry_prog,
                                                  peer_prog=peer_prog)
            eth.rx[0].source = TrafficGenerator(packets=pkts, count=len(pkts) * 10)
            h.run()
            # The veths' pools (veth_xdp_rx's pages; eth0's pool gives the native loop
            # its pskb_expand_head pages too, which the Python path takes elsewhere).
            pools = [(rq.pool.get_stats(), rq.pool.state.words.tolist())
                     for d in h.devices.values() if d.kind == "veth" for rq in d.rx]
            return (*_generic_observed(h, coll), pools)

    got = run(True)
    assert got == run(False)
    stats = got[0]
    assert isinstance(stats, dict)
    assert stats["eth0"]["xdp_tx"] == 80 and stats["eth0"]["tx_packets"] == 80
    # Slot 0, slot 2 (its entry program passes a quarter), the ifindex, and the
    # broadcast's clones (eth1 is in slots 0 and 2; eth2 in slot 1 ends the
    # 200-byte broadcasts after slot 0's clone, with -EMSGSIZE).
    assert stats["eth1"]["tx_packets"] == 80 * 3 + (20 + 10 if entry_prog else 80 + 40)
    if entry_prog:  # slot 2's ABORTED and 9 on eth1 (ifindex 3), its own and the clones'
        exc = dict(got[3]["xdp_exception"])  # type: ignore[index]
        assert (exc[(3, 0)], exc[(3, 9)]) == ([30], [30])
    # -EMSGSIZE: the 200-byte frames to slot 1, to eth2's ifindex and broadcast.
    assert dict(got[3]["xdp_redirect_err"])[(2, -90)] == [120]  # type: ignore[index]



@pytest.mark.parametrize("peer_prog", [False, True])
def test_generic_targets_table(peer_prog: bool) -> None:
    """The generic targets native code reads (FwdTable.generic): NICs whose transmit is
    a sink 1, a veth 2 (its peer without a program) or 4 (with a native one), lo 2
    (its own stack receives) or 4 (with a generic program: its backlog), the
    Python path's 3 (wire sinks), 0 when down. A call without the host lock (threaded
    NAPI, FwdTable.unlocked_for) keeps the 4s: their skbs go onto the peer's ring in
    order-0 pages, and the peer's own poll copies them into its pool."""
    with Host(engine="jit") as h:
        eth, coll, d = _generic_redirect_host(h, peer_prog=peer_prog)
        d["small"].up = False
        ok = h.fwd.arrays(h.devices, generic=True)[0]
        want = {"lo": 2, "eth1": 1, "eth2": 0, "eth3": 3, "veth0": 4 if peer_prog else 2}
        assert {n: int(ok[h.dev(n).ifindex]) for n in want} == want
        v0 = d["v0"].ifindex
        for cpu in (0, 1):
            t = h.fwd.unlocked_for(h.devices, cpu, generic=True)
            assert int(t[0][v0]) == want["veth0"] and int(t[0][d["sink"].ifindex]) == 1
        h.lo.attach_xdp(coll.programs["pass"], mode="generic")
        assert int(h.fwd.arrays(h.devices, generic=True)[0][1]) == 4


@pytest.mark.skipif(not jit_available(), reason="llvmlite is not installed: no JIT")
@pytest.mark.parametrize(("entry_prog", "peer_prog"), [(False, False), (True, True)])
def test_generic_tx_and_nic_redirects_stay_native(entry_prog: bool, peer_prog: bool,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """generic_xdp_tx and redirects to NICs whose transmit is a sink and to a veth
    whose peer's stack or native program (veth_xdp_rx) receives, through entry
    programs or not
    (slot 2's, passing here), and broadcasts over them every target takes
    (dev_map_redirect_multi: the 64-byte ones), never reach the Python path: no
    skb is handed back (their errors: test_generic_redirect_errors_run_natively)."""
    import pyxdp.net.dev as dev_mod
    pkts = [pk.udp_packet(bytes([k]) + b"x" * 20, sport=1000 + k + 16 * s, size=size)
            for k in (3, 4, 6, 8, 7, 11) for s, size in enumerate((64, 200))]
    pkts.append(pk.udp_packet(bytes([12]) + b"x" * 20, sport=1012, size=64))
    with Host(tracer=Tracer(), engine="jit") as h:
        eth, coll, d = _generic_redirect_host(h, entry_prog=entry_prog, peer_prog=peer_prog)

        def refuse(*a: object, **k: object) -> None:
            raise AssertionError("a generic skb went to the Python path")
        monkeypatch.setattr(dev_mod, "generic_xdp_act", refuse)
        eth.rx[0].source = TrafficGenerator(packets=pkts, count=6500)
        h.run()
        assert eth.rx[0].py_polls == 0 and d["v1"].rx[0].py_polls == 0
        # 1000 of each verdict, 500 broadcasts: eth1 gets slot 0's, slot 2's, the
        # ifindex's and the broadcast's clones to slots 0 and 2; eth2 the clones to
        # slot 1; veth0 slot 3's, the ifindex's and the clones to slot 3.
        assert eth.stats.xdp_tx == 1000 and d["sink"].stats.tx_packets == 4000
        assert d["small"].stats.tx_packets == 500
        assert d["v0"].stats.tx_packets == 2500 and d["v1"].stats.rx_packets == 2500
        assert h.stack.per_device[d["v1"].ifindex] == 2500
        key = (eth.ifindex, d["sink"].ifindex, coll.maps["ports"].handle.id)
        # Slot 0's and slot 2's redirects and the broadcasts (to_ifindex: slot 0's).
        assert trace_count(h, "xdp_redirect", key=key) == 2500
        assert trace_count(h, "xdp_redirect", key=(eth.ifindex, d["sink"].ifindex,
                                                   INT_MAX)) == 1000


def _generic_to_python(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on (until ``monkeypatch.undo()``), count in the one item returned the
    skbs handed to the Python path's generic verdicts (``generic_xdp_act``)."""
    import pyxdp.net.dev as dev_mod
    act = dev_mod.generic_xdp_act
    to_python = [0]

    def counted(dev: Any, prog: Any, out: Any, *a: Any) -> None:
        to_python[0] += len(out)
        act(dev, prog, out, *a)
    monkeypatch.setattr(dev_mod, "generic_xdp_act", counted)
    return to_python


@pytest.mark.skipif(not jit_available(), reason="llvmlite is not installed: no JIT")
@pytest.mark.parametrize("qsize", [4, 256])
def test_generic_cpumap_native_is_python(qsize: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """cpu_map_generic_redirect from a NIC's generic program on the native loop (the
    skb as an order-0 frame straight into the entry's ring; a full ring, -ENOSPC,
    natively too) gives what the Python path gives: counters, the stack, the
    cpumap tracepoints, no page left."""
    to_python = _generic_to_python(monkeypatch)

    def run(native: bool) -> tuple[object, ...]:
        with Host(tracer=Tracer(), engine="jit", native=native) as h:
            eth = h.add_device("eth0")
            coll = load(h, "redirect_cpu")
            coll.maps["cpu_map"][1] = {"qsize": qsize}
            coll.maps["cpu_map"][0] = {"qsize": qsize}
            coll.maps["cpus_available"][0] = 1
            coll.maps["cpus_available"][1] = 0
            coll.maps["cpus_count"][0] = 2
            eth.attach_xdp(coll.programs["xdp_redirect_cpu_rr"], mode="generic")
            eth.rx[0].source = TrafficGenerator(flows=8, sizes=[64, 300], seed=5, count=2000)
            h.run()
            mid = coll.maps["cpu_map"].handle.id
            at = {"xdp_redirect": 2, "xdp_cpumap_kthread": 0, "xdp_cpumap_enqueue": 0}

            def key(k: tuple[int, ...], name: str) -> tuple[int, ...]:
                i = at.get(name, -1)  # the map id's place: ids differ between hosts
                return k if i < 0 or k[i] != mid else (*k[:i], -1, *k[i + 1:])
            events = {name: sorted((key(k, name), list(v))
                                   for k, v in getattr(h.tracer, name).counters.items())
                      for name in ("xdp_redirect", "xdp_redirect_err", "xdp_cpumap_enqueue",
                                   "xdp_cpumap_kthread", "xdp_exception")}
            # When a kthread went idle and was woken is timing (the native loop runs
            # more polls between the kthreads' runs): not compared.
            for row in events["xdp_cpumap_kthread"]:
                row[1][3] = 0
            for cpu in (0, 1):  # the pages the kthreads freed, back from their rings
                cpumap_runtime(h, coll.maps["cpu_map"].handle, cpu).reclaim()
            assert h.memmap.system.in_use().size == 0
            return eth.stats, h.stack.stats, h.stack.per_device, events

    got = run(True)
    assert to_python[0] == 0  # every skb went natively, those the full ring refused too
    assert got == run(False)
    assert got[0].xdp_redirect == 2000
    if qsize < 64:
        assert any(k[1] == -errno.ENOSPC for k, _ in got[3]["xdp_redirect_err"])


@pytest.mark.skipif(not jit_available(), reason="llvmlite is not installed: no JIT")
@pytest.mark.parametrize("case", ["mtu", "down", "missing", "lo_down"])
def test_generic_redirect_errors_run_natively(case: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """xdp_do_generic_redirect's errors on the native loop - a target too short
    (-EMSGSIZE) or down (-ENETDOWN) through a devmap slot, an ifindex and a
    broadcast (the clones before the refusing target sent), an ifindex no device
    has (-EINVAL), lo down (-ENETDOWN) - hand no skb to the Python path and give
    what it gives."""

    pkts = [pk.udp_packet(bytes([k]) + b"x" * 20, sport=1000 + k + 16 * s, size=size)
            for k in (5, 9, 12) for s, size in enumerate((64, 200))]

    def run(native: bool) -> tuple[object, ...]:
        with Host(tracer=Tracer(), engine="jit", native=native) as h:
            if case in ("missing", "lo_down"):
                eth = h.add_device("eth0")
                to = 999 if case == "missing" else 1
                h.devices[1].up = False
                coll = h.load(asm_spec({"t": ("xdp", int(BpfAttachType.BPF_XDP),
                                              f"r1 = {to}\nr2 = 0\ncall 23\nexit")},
                                       [devmap_spec()]))
                eth.attach_xdp(coll.programs["t"], mode="generic")
            else:
                eth, coll, d = _generic_redirect_host(h)
                d["small"].up = case != "down"
            eth.rx[0].source = TrafficGenerator(packets=pkts, count=600)
            h.run()
            return _generic_observed(h, coll)

    to_python = _generic_to_python(monkeypatch)
    got = run(True)
    assert to_python[0] == 0
    monkeypatch.undo()
    assert got == run(False)
    errs = got[3]["xdp_redirect_err"]  # type: ignore[index]
    want = {"mtu": [(-errno.EMSGSIZE, 300)], "down": [(-errno.ENETDOWN, 600)],
            "missing": [(-errno.EINVAL, 600)], "lo_down": [(-errno.ENETDOWN, 600)]}[case]
    assert [(k[1], v[0]) for k, v in errs] == want


@pytest.mark.skipif(not jit_available(), reason="llvmlite is not installed: no JIT")
def test_generic_redirect_to_lo_is_received_by_lo_natively(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A generic program's redirect to lo (generic_xdp_tx: loopback_xmit, netif_rx on lo)
    gives the skb to lo's own stack: counted sent and received on lo, demuxed there
    (the vethlab scenario redirect_to_lo_up_generic checks it against Linux); the
    native loop does it without the Python path and gives what the Python path
    gives, which queues it on lo's backlog for the next softirq round. A native
    redirect of an xdp_frame to lo fails: lo has no ndo_xdp_xmit (-EOPNOTSUPP)."""

    def run(native: bool, mode: str) -> tuple[object, ...]:
        with Host(tracer=Tracer(), engine="jit", native=native) as h:
            eth = h.add_device("eth0")
            coll = h.load(asm_spec({"t": ("xdp", int(BpfAttachType.BPF_XDP),
                                          "r1 = 1\nr2 = 0\ncall 23\nexit")}, [devmap_spec()]))
            eth.attach_xdp(coll.programs["t"], mode=mode)
            eth.rx[0].source = TrafficGenerator(flows=8, sizes=[64, 300], seed=5, count=500)
            h.run()
            return _generic_observed(h, coll)

    to_python = _generic_to_python(monkeypatch)
    got = run(True, "generic")
    assert to_python[0] == 0
    monkeypatch.undo()
    assert got == run(False, "generic")
    stats = got[0]
    assert isinstance(stats, dict)
    lo = stats["lo"]
    assert (lo["tx_packets"], lo["rx_packets"]) == (500, 500)
    assert got[2][1] == 500  # type: ignore[index]  # lo's stack saw them
    native = run(True, "native")
    assert native == run(False, "native")
    errs = native[3]["xdp_redirect_err"]  # type: ignore[index]
    assert [(k[1], v[0]) for k, v in errs] == [(-errno.EOPNOTSUPP, 500)]


@pytest.mark.skipif(not jit_available(), reason="llvmlite is not installed: no JIT")
@pytest.mark.parametrize("target", ["lo", "veth"])
def test_generic_redirect_to_a_generic_program_natively(
        target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A generic redirect to lo with a generic program, or to a veth whose peer has one
    (the vethlab scenarios redirect_to_lo_up_generic_prog and
    devmap_redirect_generic_peer_generic check them against Linux): the skb goes
    onto the target's backlog - its rx ring, in a page of that queue's pool -
    and the target's poll runs its generic program, natively on both sides
    (nothing reaches pyxdp.net.dev); the Python path gives the same."""

    def run(native: bool) -> tuple[object, ...]:
        with Host(tracer=Tracer(), engine="jit", native=native) as h:
            eth = h.add_device("eth0")
            v0, v1 = h.veth("veth0", "veth1")
            into = 1 if target == "lo" else v0.ifindex
            coll = h.load(asm_spec({
                "t": ("xdp", int(BpfAttachType.BPF_XDP), f"r1 = {into}\nr2 = 0\ncall 23\nexit"),
                "pass": ("xdp", int(BpfAttachType.BPF_XDP), "r0 = 2\nexit")}, [devmap_spec()]))
            eth.attach_xdp(coll.programs["t"], mode="generic")
            (h.lo if target == "lo" else v1).attach_xdp(coll.programs["pass"], mode="generic")
            eth.rx[0].source = TrafficGenerator(flows=8, sizes=[64, 300], seed=5, count=500)
            h.run()
            return _generic_observed(h, coll)

    to_python = _generic_to_python(monkeypatch)
    got = run(True)
    assert to_python[0] == 0
    monkeypatch.undo()
    assert got == run(False)
    stats = got[0]
    assert isinstance(stats, dict)
    assert stats["lo" if target == "lo" else "veth1"]["rx_packets"] == 500
    assert got[2] == {1 if target == "lo" else 4: 500}  # the target's stack, after its program


@pytest.mark.skipif(not jit_available(), reason="llvmlite is not installed: no JIT")
@pytest.mark.parametrize("target", ["lo", "veth"])
def test_generic_skbs_back_to_own_backlog_stay_native(target: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A generic program whose skb comes back to its own device's backlog - lo's
    XDP_TX (loopback_xmit), veth1 redirecting to veth0 (veth_xmit to its peer, veth1
    itself) - runs natively (the vethlab scenario lo_generic_tx_backlog checks lo
    against Linux): the copy goes onto the ring the call polls, in a page of its own
    pool, and the next poll runs the program on it (the second run counts it in
    seen[0] and drops it). Nothing reaches pyxdp.net.dev and no poll of the target is
    Python's; the Python path gives the same."""
    from pyxdp.testing.vethlab import _TX_ONCE

    def run(native: bool) -> tuple[object, ...]:
        with Host(tracer=Tracer(), engine="jit", native=native) as h:
            eth = h.add_device("eth0")
            v0, v1 = h.veth("veth0", "veth1")
            into, back = (1, "r0 = 3") if target == "lo" else (
                v0.ifindex, f"r1 = {v0.ifindex}\nr2 = 0\ncall 23")
            seen = MapSpec("seen", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 1)
            once = h.load(asm_collection(_TX_ONCE.replace("r0 = 3", back), [seen]))
            red = h.load(asm_collection(f"r1 = {into}\nr2 = 0\ncall 23\nexit"))
            eth.attach_xdp(red.programs["t"], mode="generic")
            dev = h.lo if target == "lo" else v1
            dev.attach_xdp(once.programs["t"], mode="generic")
            # Few enough that the re-queued skbs never meet a full ring on either path
            # (how full it gets depends on how the polls interleave).
            eth.rx[0].source = TrafficGenerator(flows=8, sizes=[64, 300], seed=5, count=96)
            h.run()
            return ({d.name: d.stats.asdict() for d in h.devices.values()},
                    sorted(once.maps["seen"].items()), dev.rx[0].py_polls == 0)

    to_python = _generic_to_python(monkeypatch)
    got = run(True)
    assert to_python[0] == 0 and got[2]
    monkeypatch.undo()
    python = run(False)
    assert got[:2] == python[:2]
    assert got[1] == [(0, 96)]


@pytest.mark.skipif(not jit_available(), reason="llvmlite is not installed: no JIT")
@pytest.mark.parametrize("peer", ["stack", "native", "generic"])
def test_veth_generic_tx_stays_native(peer: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A veth's generic XDP_TX (generic_xdp_tx: veth_xmit hands the skb to the peer)
    runs natively whether the peer has no program (its stack), a native one
    (veth_xdp_rx: its xdp_ring) or a generic one (its backlog, that ring too; the
    vethlab scenario xdp2_tx_generic checks the native peer against Linux):
    nothing reaches pyxdp.net.dev, no poll of veth0 is Python's, and the Python path
    gives the same counters and stack deliveries."""

    def run(native: bool) -> tuple[object, ...]:
        with Host(tracer=Tracer(), engine="jit", native=native) as h:
            v0, v1 = h.veth("veth0", "veth1")
            tx = h.load(asm_collection("r0 = 3\nexit"))
            v0.attach_xdp(tx.programs["t"], mode="generic")
            if peer != "stack":
                v1.attach_xdp(h.load(asm_collection("r0 = 2\nexit")).programs["t"], mode=peer)
            v0.rx[0].source = TrafficGenerator(flows=8, sizes=[64, 300], seed=5, count=500)
            h.run()
            return ({d.name: d.stats.asdict() for d in h.devices.values()}, h.stack.stats,
                    h.stack.per_device, v0.rx[0].py_polls == 0)

    to_python = _generic_to_python(monkeypatch)
    got = run(True)
    assert to_python[0] == 0 and got[3]
    monkeypatch.undo()
    assert got[:3] == run(False)[:3]
    assert got[2] == {3: 500}  # veth1's stack got every skb back


def test_lo_takes_a_generic_program_only() -> None:
    """lo has no ndo_bpf: native attach is refused as dev_xdp_attach refuses it (checked
    with ip link on Linux 6.18: "Underlying driver does not support XDP in native
    mode"), generic attach works."""
    with Host() as h:
        coll = h.load(asm_spec({"t": ("xdp", int(BpfAttachType.BPF_XDP), "r0 = 2\nexit")}))
        with pytest.raises(KernelError) as e:
            h.lo.attach_xdp(coll.programs["t"], mode="native")
        assert e.value.errno == errno.EOPNOTSUPP
        assert "Underlying driver does not support XDP in native mode" in str(e.value)
        assert h.lo.xdp_prog is None
        h.lo.attach_xdp(coll.programs["t"], mode="generic")
        assert h.lo.xdp_generic is not None
