"""Generic (skb-mode) XDP on skbs above a page's packet room (3520 bytes), in batches:
``skb_cow_data_for_xdp``'s head and frags for a frags-aware program, the skb linearised
(``frame_sz`` as ``kmalloc`` rounds it) for any other or past ``MAX_SKB_FRAGS``.

The batched path (JIT and interpreter) is held to a per-skb reference written here
from the kernel's description: an ``XdpBuff`` per skb, laid out as
``netif_skb_check_for_xdp`` leaves it, one ``prog.run`` each, then the verdict.
Everything observable must agree: what each stack received (bytes and metadata),
the device's counters, tracepoints, fault reports and the order the program's map
updates happened in (each run stamps a sequence number into its packet)."""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pyxdp.errors import ProgramFault
from pyxdp.net import dev as devmod
from pyxdp.net import packets as pk
from pyxdp.net.netdevice import Host
from pyxdp.net.prog import MAX_FAULT_REPORTS, jit_available
from pyxdp.net.stack import SkbBatch
from pyxdp.net.trace import Tracer
from pyxdp.net.xdp import MAX_SKB_FRAGS, PAGE_SIZE, XDP_PACKET_HEADROOM, RxQueue, XdpBuff
from pyxdp.spec import BPF_F_XDP_HAS_FRAGS, MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType, XdpAction

ENGINES = ["interp", pytest.param("jit", marks=pytest.mark.skipif(
    not jit_available(), reason="llvmlite is not installed: no JIT"))]
MAPS = [MapSpec("ports", int(BpfMapType.BPF_MAP_TYPE_DEVMAP), 4, 8, 4),
        MapSpec("seq", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 1)]
SEL = 42  # the first UDP payload byte picks what the program does
PAST_FRAGS = devmod.MAX_LINEAR + MAX_SKB_FRAGS * PAGE_SIZE + 1  # 73153: linearised

# Every run: a sequence number from map "seq" at 48, bpf_xdp_get_buff_len at 56 and
# the frame's last 8 bytes (bpf_xdp_load_bytes) at 72; then by the selector byte:
# 0 PASS, 1 DROP, 2 TX, 3 redirect through devmap slot 0, 4 adjust_head(-16),
# 5 adjust_meta(-8) and metadata written, 6 adjust_tail(+4000), 7 adjust_tail(-5000),
# 8 adjust_head(+20), 9 adjust_tail(+100); a helper's result goes to 64 of the data
# it left (PASS).
PROG = """
r6 = r1
r2 = *(u32 *)(r6 + 0)
r3 = *(u32 *)(r6 + 4)
r1 = r2
r1 += 80
if r1 > r3 goto pass
r7 = *(u8 *)(r2 + 42)
r1 = 0
*(u32 *)(r10 - 4) = r1
r1 = map[fd:1]
r2 = r10
r2 += -4
call bpf_map_lookup_elem
if r0 == 0 goto pass
r8 = *(u64 *)(r0 + 0)
r8 += 1
*(u64 *)(r0 + 0) = r8
r1 = r6
call bpf_xdp_get_buff_len
r9 = r0
r1 = 0
*(u64 *)(r10 - 16) = r1
r1 = r6
r2 = r9
r2 += -8
r3 = r10
r3 += -16
r4 = 8
call bpf_xdp_load_bytes
r2 = *(u32 *)(r6 + 0)
r3 = *(u32 *)(r6 + 4)
r1 = r2
r1 += 80
if r1 > r3 goto pass
*(u64 *)(r2 + 48) = r8
*(u64 *)(r2 + 56) = r9
r1 = *(u64 *)(r10 - 16)
*(u64 *)(r2 + 72) = r1
if r7 == 1 goto drop
if r7 == 2 goto tx
if r7 == 3 goto redirect
r1 = r6
if r7 == 4 goto head
if r7 == 5 goto meta
if r7 == 6 goto grow
if r7 == 7 goto shrink
if r7 == 8 goto pullhead
if r7 == 9 goto growsmall
goto pass
head:
r2 = -16
call bpf_xdp_adjust_head
goto result
meta:
r2 = -8
call bpf_xdp_adjust_meta
r8 = r0
r2 = *(u32 *)(r6 + 8)
r3 = *(u32 *)(r6 + 0)
r1 = r2
r1 += 8
if r1 > r3 goto result8
r1 = 0x1122334455667788 ll
*(u64 *)(r2 + 0) = r1
result8:
r0 = r8
goto result
grow:
r2 = 4000
call bpf_xdp_adjust_tail
goto result
shrink:
r2 = -5000
call bpf_xdp_adjust_tail
goto result
pullhead:
r2 = 20
call bpf_xdp_adjust_head
goto result
growsmall:
r2 = 100
call bpf_xdp_adjust_tail
result:
r2 = *(u32 *)(r6 + 0)
r3 = *(u32 *)(r6 + 4)
r1 = r2
r1 += 72
if r1 > r3 goto pass
*(u64 *)(r2 + 64) = r0
pass:
r0 = 2
exit
drop:
r0 = 1
exit
tx:
r0 = 3
exit
redirect:
r1 = map[fd:0]
r2 = 0
r3 = 0
call bpf_redirect_map
exit
"""
FAULT = "r2 = *(u32 *)(r1 +0)\nr0 = *(u64 *)(r2 +20000)\nr0 = 2\nexit"


def frame(size: int, sel: int, i: int) -> bytes:
    """A UDP frame of ``size`` bytes whose payload starts with the selector; past a UDP
    datagram's limit the frame is cut from a longer pattern (the program reads no
    lengths)."""
    head = pk.udp_packet(bytes([sel]) + b"generic-large", sport=1000 + i, dport=9000,
                         size=min(size, 9014))
    tail = bytes((k * 7 + i) & 0xFF for k in range(max(size - len(head), 0)))
    return head + tail


def per_skb(dev: Any, prog: Any, batch: SkbBatch) -> None:
    """The reference for skbs above a page's room: one XdpBuff and one run each."""
    for i in range(len(batch)):
        ln = int(batch.length[i])
        pkt = batch.data[i, :ln].tobytes()
        queue = min(max(int(batch.queue[i]), 0), len(dev.rx) - 1)
        ctx = dev.rx[queue].ctx
        if prog.spec.flags & BPF_F_XDP_HAS_FRAGS and ln <= PAST_FRAGS - 1:
            buf = bytearray(PAGE_SIZE)
            lin = devmod.MAX_LINEAR
            buf[XDP_PACKET_HEADROOM:XDP_PACKET_HEADROOM + lin] = pkt[:lin]
            frags = [bytearray(pkt[o:o + PAGE_SIZE]) for o in range(lin, ln, PAGE_SIZE)]
            xdp = XdpBuff(buf, XDP_PACKET_HEADROOM, XDP_PACKET_HEADROOM + lin,
                          XDP_PACKET_HEADROOM, PAGE_SIZE, RxQueue(dev.ifindex, queue, 0),
                          frags=frags)
        else:
            sz = devmod.linear_frame_size(ln)
            buf = bytearray(sz)
            buf[XDP_PACKET_HEADROOM:XDP_PACKET_HEADROOM + ln] = pkt
            xdp = XdpBuff(buf, XDP_PACKET_HEADROOM, XDP_PACKET_HEADROOM + ln,
                          XDP_PACKET_HEADROOM, sz, RxQueue(dev.ifindex, queue, 0))
        ctx.tail_call_cnt = 0
        red = [0, 0, 0, 0]
        with dev.host.lock:
            try:
                act = prog.run(xdp, ctx)
            except ProgramFault as e:
                act = int(XdpAction.XDP_ABORTED)
                if len(dev.faults) < MAX_FAULT_REPORTS:
                    dev.faults.append(f"{dev.name} generic: {prog.spec.name}: {e} "
                                      "-> XDP_ABORTED")
            acts = np.array([act], np.int64)
            devmod._exceptions(dev, prog, acts)
            ri = ctx.ri
            if ri is not None and act == XdpAction.XDP_REDIRECT:
                red = [ri.map_id, ri.map_type, ri.tgt_index, ri.flags]
                ri.map, ri.map_id, ri.flags = None, 0, 0
                ri.map_type = int(BpfMapType.BPF_MAP_TYPE_UNSPEC)
        out = SkbBatch.from_packets([xdp.packet()], dev.ifindex, int(batch.queue[i]),
                                    [xdp.metadata()])
        devmod.generic_xdp_act(dev, prog, out, acts, *(np.array([r], np.int64) for r in red))


COUNTERS = ("rx_packets", "rx_bytes", "rx_dropped", "xdp_packets", "xdp_drops", "xdp_tx",
            "xdp_tx_errors", "xdp_redirect", "xdp_aborted", "xdp_pass")


def _counters(dev: Any) -> dict[str, int]:
    return {k: int(getattr(dev.stats, k)) for k in COUNTERS}


def run(engine: str, frames: list[bytes], *, frags: bool, text: str = PROG,
        reference: bool = False, monkeypatch: pytest.MonkeyPatch | None = None
        ) -> tuple[Any, ...]:
    """``frames`` received on veth0 (generic program) as one list: what every
    stack got, veth0's counters, the trace counts, the fault reports, the map state.
    ``reference``: skbs above a page's room through :func:`per_skb`."""
    if reference:
        assert monkeypatch is not None
        monkeypatch.setattr(devmod, "_generic_large", per_skb)
    spec = asm_collection(text, MAPS)
    if frags:
        spec = dataclasses.replace(spec, programs={n: dataclasses.replace(
            p, section="xdp.frags", flags=BPF_F_XDP_HAS_FRAGS) for n, p in spec.programs.items()})
    got: list[tuple[int, bytes, bytes]] = []
    with Host(tracer=Tracer(), engine=engine) as h:
        a, _b = h.veth("veth0", "veth1", mtu=9000)
        c, _d = h.veth("veth2", "veth3", mtu=9000)
        coll = h.load(spec, verify=text == PROG)
        coll.maps["ports"][0] = struct.pack("<Ii", c.ifindex, 0)
        a.attach_xdp(coll.programs["t"], mode="generic")
        h.stack.on_receive(lambda b: got.extend(zip(b.ifindex.tolist(), b.packets(), b.meta,
                                                    strict=True)))
        devmod.netif_receive_skb_list(a, SkbBatch.from_packets(frames, a.ifindex))
        h.run()
        snap = h.tracer.snapshot()
        trace = tuple(snap.count(e, "events") for e in (
            "xdp_exception", "xdp_redirect", "xdp_redirect_err"))
        by_dev: dict[int, list[tuple[bytes, bytes]]] = {}
        for ifx, p, m in got:
            by_dev.setdefault(ifx, []).append((p, m))
        names = {d.ifindex: d.name for d in (a, _b, c, _d)}
        seen = {names[k]: v for k, v in sorted(by_dev.items())}
        seq = coll.maps["seq"][0]
        seq = seq if isinstance(seq, int) else int.from_bytes(seq, "little")
        return seen, _counters(a), trace, list(a.faults), seq, h.memmap.system.in_use().size


SIZES = (3519, 3520, 3521, 4096, 9000, 9014, PAST_FRAGS)


def mixed_frames() -> list[bytes]:
    """Every selector on every size, small skbs between them (arrival order kept)."""
    out = []
    i = 0
    for sel in range(10):
        for size in SIZES:
            out.append(frame(size, sel, i))
            i += 1
            if i % 4 == 0:
                out.append(frame(200 + i, sel, i))
                i += 1
    return out


@pytest.fixture(scope="module")
def frames() -> list[bytes]:
    return mixed_frames()


@pytest.mark.parametrize("frags", [True, False], ids=["frags", "linear"])
@pytest.mark.parametrize("engine", ENGINES)
def test_batched_large_skbs_match_the_per_skb_reference(
        engine: str, frags: bool, frames: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    """Sizes 3519..73153 (past MAX_SKB_FRAGS), every verdict and buffer adjustment, small
    skbs among them, one batch: the batched path gives the reference's packets,
    metadata, counters, traces and run order."""
    want = run("interp", frames, frags=frags, reference=True, monkeypatch=monkeypatch)
    monkeypatch.undo()
    got = run(engine, frames, frags=frags)
    assert got == want
    seen, counters, trace, faults, seq, in_use = got
    assert seq == len(frames) and in_use == 0 and not faults
    passed = seen["veth0"]
    # Each run stamped its sequence number: PASSed skbs arrive in run (= arrival) order.
    stamps = [int.from_bytes(p[48:56], "little") for p, _ in passed
              if p[SEL + 1:SEL + 6] == b"gener"]  # data not moved by adjust_head
    assert stamps == sorted(stamps) and len(stamps) > 40
    n_tx, n_red = (sum(f[SEL] == k for f in frames) for k in (2, 3))
    assert counters["xdp_tx"] == n_tx and counters["xdp_redirect"] == n_red
    # The 73153-byte skb is past veth2's MTU: xdp_ok_fwd_dev fails it (-EMSGSIZE).
    assert len(seen["veth3"]) == trace[1] == n_red - 1 and trace[2] == 1


@pytest.mark.parametrize("frags", [True, False], ids=["frags", "linear"])
@pytest.mark.parametrize("engine", ENGINES)
def test_layout_of_large_skbs(engine: str, frags: bool) -> None:
    """What the program sees: the whole length through get_buff_len and the last bytes
    through load_bytes; a 4000-byte grow fits a linearised 9014-byte skb's kmalloc
    tailroom (frame_sz 16384) but not a 5000-byte one's (8192: -EINVAL), and a
    frags tail never grows (-EOPNOTSUPP); a frags-aware program past MAX_SKB_FRAGS
    sees the skb linearised."""
    sizes = (3521, 5000, 9014, PAST_FRAGS)
    fr = [frame(s, 6, i) for i, s in enumerate(sizes)]
    seen = run(engine, fr, frags=frags)[0]["veth0"]
    res = [struct.unpack_from("<q", p, 64)[0] for p, _ in seen]
    lens = [struct.unpack_from("<Q", p, 56)[0] for p, _ in seen]
    lasts = [p[72:80] for p, _ in seen]
    assert lens == list(sizes)
    # bpf_xdp_load_bytes refuses offsets past 0xffff (-EFAULT): the last skb's stays 0.
    assert lasts == [f[-8:] for f in fr[:-1]] + [bytes(8)]
    eopnotsupp, einval = -95, -22
    if frags:
        assert res == [eopnotsupp, eopnotsupp, eopnotsupp, 0]
        assert [len(p) for p, _ in seen] == [3521, 5000, 9014, PAST_FRAGS + 4000]
    else:
        assert res == [0, einval, 0, 0]
        assert [len(p) for p, _ in seen] == [7521, 5000, 13014, PAST_FRAGS + 4000]


@pytest.mark.parametrize("frags", [True, False], ids=["frags", "linear"])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_fault_on_large_skbs_is_reported_per_skb(
        engine: str, frags: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A program that reads out of bounds: every skb ABORTED with xdp_exception; each
    large skb's fault reported (as single runs were), the small skbs' batch's first."""
    fr = [frame(s, 0, i) for i, s in enumerate((100, 9014, 5000, 200, 300, 9000, 3600))]
    want = run("interp", fr, frags=frags, text=FAULT, reference=True, monkeypatch=monkeypatch)
    monkeypatch.undo()
    got = run(engine, fr, frags=frags, text=FAULT)
    assert got == want
    seen, counters, trace, faults, _seq, in_use = got
    assert seen == {} and counters["xdp_aborted"] == len(fr) and trace[0] == len(fr)
    assert len(faults) == 1 + 2 + 1 + 2 and in_use == 0  # runs: small, 2 large, small, 2 large
    assert all("out-of-bounds read" in f and f.endswith("-> XDP_ABORTED") for f in faults)


@pytest.mark.parametrize("engine", ENGINES)
def test_linearised_runs_keep_arrival_order_across_frame_sizes(
        engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Linearised skbs alternating between frame sizes (8192, 16384): each run of one
    size is a batch, so the program's map updates happen in arrival order; the
    skbs the program passes carry their stamps in that order."""
    calls: list[int] = []
    orig: Callable[..., Any] = devmod._generic_linear

    def counted(dev: Any, prog: Any, batch: SkbBatch, frame_sz: int) -> None:
        calls.append(frame_sz)
        orig(dev, prog, batch, frame_sz)
    monkeypatch.setattr(devmod, "_generic_linear", counted)
    sizes = [5000, 5000, 9014, 9014, 9014, 5000, 4000]
    fr = [frame(s, 0, i) for i, s in enumerate(sizes)]
    seen = run(engine, fr, frags=False)[0]["veth0"]
    assert calls == [8192, 16384, 8192]
    assert [int.from_bytes(p[48:56], "little") for p, _ in seen] == list(range(1, 8))
    assert [len(p) for p, _ in seen] == sizes


@pytest.mark.parametrize("engine", ENGINES)
def test_large_skbs_without_pages_are_dropped(engine: str) -> None:
    """The system allocator nearly empty: a 9014-byte skb's copy (head and two frags)
    that does not fit is dropped (``rx_dropped``, the pages it took given back), the
    others run; every page is back afterwards."""
    from pyxdp.testing.fragslab import PASS_FRAGS
    with Host(tracer=Tracer(), engine=engine) as h:
        a, _b = h.veth("veth0", "veth1", mtu=9000)
        a.attach_xdp(h.load(PASS_FRAGS).programs["xdp_pass"], mode="generic")
        got: list[bytes] = []
        h.stack.on_receive(lambda b: got.extend(b.packets()))
        sysmem = h.memmap.system
        held = sysmem.alloc_pages_bulk(len(sysmem.pages) - sysmem.in_use().size - 4)
        sent = [frame(9014, 0, 0), frame(9014, 0, 1), frame(200, 0, 2)]
        devmod.netif_receive_skb_list(a, SkbBatch.from_packets(sent, a.ifindex))
        assert a.stats.rx_dropped == 1 and a.stats.xdp_packets == 2
        assert got == [sent[0], sent[2]]
        assert sysmem.in_use().size == len(held)
        sysmem.put_pages(held)
