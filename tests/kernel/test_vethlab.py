"""The veth lab's scenarios on Linux: what the kernel's native veth XDP datapath does.

Each scenario of :mod:`pyxdp.testing.vethlab` runs once on the kernel (veth
pairs in a private namespace, programs attached natively) and its documented
facts are asserted here: these pin the behaviour pyxdp's userspace datapath
must reproduce. What the measurements on Linux 6.18 (2 CPUs) showed, beyond
the per-scenario facts in each builder's docstring:

* **One NAPI poll per frame.** Each frame sent with its own ``send()`` on
  the peer is processed by the receiving veth's NAPI poll in the sender's
  softirq before ``send()`` returns, so every frame ends with its own
  flush: ``xdp_bulk_tx`` and ``xdp_devmap_xmit`` fire once per frame (per
  target) with ``sent`` 1, ``xdp_cpumap_enqueue`` once per frame with
  ``processed`` 1.
* **XDP_TX on veth** fires ``xdp_bulk_tx`` (``ifindex`` = the device whose
  program returned XDP_TX, ``act`` 3), never ``xdp_devmap_xmit`` nor
  ``xdp_redirect``; the frame arrives at the peer's stack.
* **xdp_redirect fires once per redirected frame** (from
  ``xdp_do_redirect``, not per flush), once per broadcast frame (not per
  copy). devmap: ``to_ifindex`` = the device in slot ``key`` (with
  ``BPF_F_BROADCAST`` too, where the slot is still looked up: 0 when empty),
  ``map_index`` = key. cpumap: ``to_ifindex`` 0, ``map_index`` = the CPU.
* **xdp_devmap_xmit** comes after the redirect events of the poll, one per
  target device, ``from_ifindex`` = the ingress device; for a broadcast
  the targets come in the *reverse* order of the map walk (``bq_enqueue``
  puts each bulk queue at the head of the flush list).
* **The veth peer rule.** A veth accepts ``ndo_xdp_xmit`` frames only while
  its peer has NAPI. With no XDP program on the peer: XDP_TX frames are
  refused at flush (``xdp_bulk_tx`` sent 0, drops 1, err -6 = -ENXIO; no
  ``xdp_exception``); a devmap redirect to it fails at once
  (``xdp_redirect_err`` err -95 = -EOPNOTSUPP: the device does not
  advertise ``NETDEV_XDP_ACT_NDO_XMIT``; no ``xdp_devmap_xmit``). GRO on the
  peer instead of a program is not equivalent: redirected frames then get
  through, but XDP_TX frames are accepted (``sent`` 1) and never delivered,
  because ``veth_xdp_flush`` only kicks the peer's NAPI when the peer has
  an XDP program. Hence the lab's rule: an XDP_PASS program on every
  device without one (``Scenario.attachments``).
* **XDP_ABORTED** (``bpf_redirect_map`` miss with flags 0) fires
  ``xdp_exception`` per frame (``act`` 0, ``ifindex`` the ingress device).
* **cpumap**: the frames reach the stack of the ingress device (the
  frame's ``dev_rx``), unchanged; the kthread's ``xdp_cpumap_kthread``
  events vary in number (batches of up to 8, wakeups) but their sums are
  exact: ``processed`` = frames enqueued, ``xdp_drop`` = what the cpumap
  program dropped (no ``xdp_exception`` for those), ``xdp_pass`` = the rest,
  ``drops`` 0. Two kthreads deliver concurrently: only per-CPU order holds.
* **devmap egress program**: runs before ``ndo_xdp_xmit`` with
  ``egress_ifindex`` set; its writes are what the peer receives; no extra
  tracepoint.
* **Frames at the stack**: the stack moves the (outer) VLAN tag out of the
  frame before taps see it (the lab puts it back from ``PACKET_AUXDATA``);
  XDP metadata is never part of the frame.
* **ip -s link on veth (NAPI mode)**: ``rx_packets``/``rx_bytes`` count
  every frame that reached the device's XDP program, dropped or not; an skb
  from the peer's stack is counted without its 14-byte Ethernet header, an
  xdp_frame from ``ndo_xdp_xmit`` with it. A veth's ``tx_*`` are its peer's
  ``rx_*``. ``rx_dropped`` counts frames the stack had no handler for (the
  QinQ frame: 0x8100 is left once the outer tag is off and there is no VLAN
  device), failed redirects of the device's program, and refused XDP_TX
  frames of the peer; ``tx_dropped`` XDP_TX frames the peer refused.
  XDP_DROP/ABORTED are in neither.
"""

from __future__ import annotations

import os
import struct
import subprocess
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cache

import pytest

from pyxdp.collection import Collection
from pyxdp.net.packets import ETH_P_8021AD, ETH_P_8021Q, ETH_P_IP, ETH_P_IPV6
from pyxdp.testing import vethlab as vl
from pyxdp.testing.vethlab import LabEvent, LabResult, Scenario

ENXIO, EINVAL, EOPNOTSUPP, EMSGSIZE, ENETDOWN = 6, 22, 95, 90, 100


@cache
def run(name: str) -> LabResult:
    """Each scenario runs once per session, whichever test asks first."""
    return vl.run_kernel(vl.SCENARIOS[name]())


def frames(sc: Scenario) -> list[bytes]:
    return [f for _, f in sc.traffic]


# --------------------------------------------------------------------------- frame parsing
# What the samples' pyxdp_net.h parsers see: up to two VLAN tags, IPv4 with
# IHL >= 5 fitting the frame, the fixed IPv6 header.

def l3(frame: bytes) -> tuple[int, int, int]:
    """``(ethertype, offset of the L3 header, number of VLAN tags)``; ethertype 0 if cut."""
    if len(frame) < 14:
        return 0, 0, 0
    proto, off, tags = struct.unpack_from(">H", frame, 12)[0], 14, 0
    while proto in (ETH_P_8021Q, ETH_P_8021AD) and tags < 2:
        if len(frame) < off + 4:
            return 0, 0, tags
        proto, off, tags = struct.unpack_from(">H", frame, off + 2)[0], off + 4, tags + 1
    return proto, off, tags


def ip_proto(frame: bytes) -> int:
    """The key xdp1/xdp2 count a frame under (0: not IP or a header cut short)."""
    proto, off, _ = l3(frame)
    if proto == ETH_P_IP and len(frame) >= off + 20:
        ihl = (frame[off] & 0xF) * 4
        return frame[off + 9] if ihl >= 20 and len(frame) >= off + ihl else 0
    if proto == ETH_P_IPV6 and len(frame) >= off + 40:
        return frame[off + 6]
    return 0


def udp_dport(frame: bytes) -> int | None:
    proto, off, _ = l3(frame)
    if ip_proto(frame) != 17:
        return None
    l4 = off + (frame[off] & 0xF) * 4 if proto == ETH_P_IP else off + 40
    return int(struct.unpack_from(">H", frame, l4 + 2)[0])


def cpu_of(frame: bytes) -> int:
    """redirect_cpu's xdp_redirect_cpu_proto with cpus_available = [0, 1]."""
    return {6: 0, 17: 1}.get(ip_proto(frame), 0)


def too_big(frame: bytes) -> bool:
    """What adjust_tail answers: plain IPv4, IHL 5, not a fragment, over 600 bytes."""
    if frame[12:14] != struct.pack(">H", ETH_P_IP) or len(frame) < 34:
        return False
    frag = struct.unpack_from(">H", frame, 20)[0] & 0x3FFF
    return frame[14] & 0xF == 5 and not frag and len(frame) > 600


def by_proto(fs: list[bytes]) -> dict[bytes, bytes]:
    counts = Counter(ip_proto(f) for f in fs)
    return {k.to_bytes(4, "little"): n.to_bytes(8, "little") for k, n in counts.items()}


def fields(events: list[LabEvent], *drop: str) -> list[dict[str, int | str]]:
    return [{k: v for k, v in e.fields if k not in drop} for e in events]


def only_events(r: LabResult, **counts: int) -> None:
    """Exactly these tracepoints fired, this many times each (all others: none)."""
    assert {n: t.events for n, t in r.trace.items() if t.events} == counts


# --------------------------------------------------------------------------- description

def test_scenarios_are_data_and_apply_the_peer_rule() -> None:
    """No kernel needed: building every scenario is pure data."""
    for name, build in vl.SCENARIOS.items():
        sc = build()
        assert sc.name == name and sc.doc
        assert 30 <= len(sc.traffic) <= 100
        assert len(set(sc.traffic)) == len(sc.traffic)  # every frame distinct
        attached = {a.dev for a in sc.attachments}
        if sc.pass_unattached:  # and lo, which takes a generic program only
            assert attached - {"lo"} == set(sc.devices)
            assert all(a.mode == "generic" for a in sc.attachments if a.dev == "lo")
        passes = [a for a in sc.attachments if a.obj == vl.PASS_OBJ]
        assert all(a.program == "xdp_pass" for a in passes)
        assert set(sc.collections) >= {a.key for a in sc.attach}
    sc = vl.devmap_redirect()
    assert [a.dev for a in sc.attachments] == ["veth0", "veth1", "veth2", "veth3"]
    assert vl.devmap_redirect_no_peer_prog().attachments == sc.attach
    assert sc.mac("veth3") == bytes.fromhex("020000000201")
    with pytest.raises(Exception, match="unknown device"):
        replace(sc, traffic=(("veth9", b"x" * 60),))
    spec = vl.load_spec(vl.PASS_OBJ)
    with Collection(spec) as coll:  # userspace: the built-in program passes
        assert coll.programs["xdp_pass"].test_run(frames(sc)[0]).retval == 2


# --------------------------------------------------------------------------- scenarios

@pytest.mark.kernel
def test_xdp1_drop() -> None:
    sc, r = vl.xdp1_drop(), run("xdp1_drop")
    fs = frames(sc)
    assert all(not got for got in r.rx.values())
    assert r.maps["rxcnt"] == by_proto(fs)
    assert set(r.maps["rxcnt"]) == {k.to_bytes(4, "little") for k in (0, 1, 6, 17, 58)}
    # The sender is pinned: every count is on its CPU.
    assert all(v[1 - vl.SENDER_CPU] == bytes(8) for v in r.percpu["rxcnt"].values())
    only_events(r)
    v0, v1 = r.links["veth0"], r.links["veth1"]
    assert (v0.rx_packets, v0.rx_bytes, v0.rx_dropped) == (
        len(fs), sum(len(f) - 14 for f in fs), 0)
    assert (v1.tx_packets, v1.tx_bytes) == (v0.rx_packets, v0.rx_bytes)


@pytest.mark.kernel
def test_xdp2_tx() -> None:
    sc, r = vl.xdp2_tx(), run("xdp2_tx")
    fs = frames(sc)
    assert list(r.rx["veth1"]) == [vl.swap_macs(f) for f in fs]
    assert r.rx["veth0"] == ()
    assert r.maps["rxcnt"] == by_proto(fs)
    only_events(r, xdp_bulk_tx=len(fs))
    assert fields(r.events_named("xdp_bulk_tx")) == [
        {"ifindex": "veth0", "act": 3, "drops": 0, "sent": 1, "err": 0}] * len(fs)
    qinq = sum(1 for f in fs if f[12:14] == struct.pack(">H", ETH_P_8021AD))
    v0, v1 = r.links["veth0"], r.links["veth1"]
    assert (v1.rx_packets, v1.rx_bytes, v1.rx_dropped) == (len(fs), sum(map(len, fs)), qinq)
    assert (v0.tx_packets, v0.tx_bytes, v0.tx_dropped) == (len(fs), sum(map(len, fs)), 0)


@pytest.mark.kernel
def test_xdp2_tx_no_peer_prog() -> None:
    sc, r = vl.xdp2_tx_no_peer_prog(), run("xdp2_tx_no_peer_prog")
    n = len(sc.traffic)
    assert all(not got for got in r.rx.values())
    assert r.maps["rxcnt"] == by_proto(frames(sc))
    only_events(r, xdp_bulk_tx=n)
    assert fields(r.events_named("xdp_bulk_tx")) == [
        {"ifindex": "veth0", "act": 3, "drops": 1, "sent": 0, "err": -ENXIO}] * n
    assert r.links["veth0"].tx_dropped == n and r.links["veth1"].rx_dropped == n
    assert r.links["veth0"].tx_packets == 0


@pytest.mark.kernel
def test_xdp2_tx_generic() -> None:
    """Generic XDP_TX on veth0 (``generic_xdp_tx`` -> ``veth_xmit``): every frame comes
    back, MACs swapped, to veth1's stack; skbs are not bulked, so no tracepoint."""
    sc, r = vl.xdp2_tx_generic(), run("xdp2_tx_generic")
    fs = frames(sc)
    assert list(r.rx["veth1"]) == [vl.swap_macs(f) for f in fs]
    assert r.rx["veth0"] == ()
    assert r.maps["rxcnt"] == by_proto(fs)
    only_events(r)
    assert r.links["veth0"].tx_packets == len(fs)


@pytest.mark.kernel
def test_redirect_ifindex_threaded() -> None:
    """bpf_redirect to veth2's ifindex with threaded NAPI: every frame at veth3's stack,
    MACs as sent, one xdp_redirect per frame (map_id INT_MAX) and bulks to veth2."""
    sc, r = vl.redirect_ifindex_threaded(), run("redirect_ifindex_threaded")
    fs = frames(sc)
    assert list(r.rx["veth3"]) == fs
    assert fields(r.events_named("xdp_redirect"), "prog_id") == [
        {"act": 4, "ifindex": "veth0", "err": 0, "to_ifindex": "veth2",
         "map_id": 0x7FFF_FFFF, "map_index": 0}] * len(fs)
    assert r.trace["xdp_devmap_xmit"].events > 0
    assert sum(int(e.fields[4][1]) for e in r.events_named("xdp_devmap_xmit")) == len(fs)


def redirect(to: int | str, err: int = 0, prog: str = "redirect_map.o:xdp_redirect_map_prog",
             map_: str = "redirect_map.o:tx_port", index: int = 0) -> dict[str, int | str]:
    return {"prog_id": prog, "act": 4, "ifindex": "veth0", "err": err, "to_ifindex": to,
            "map_id": map_, "map_index": index}


def xmit(to: str) -> dict[str, int | str]:
    return {"from_ifindex": "veth0", "act": 4, "to_ifindex": to, "drops": 0, "sent": 1,
            "err": 0}


@pytest.mark.kernel
def test_devmap_redirect() -> None:
    sc, r = vl.devmap_redirect(), run("devmap_redirect")
    fs = frames(sc)
    assert list(r.rx["veth3"]) == [vl.swap_macs(f) for f in fs]
    assert not (r.rx["veth0"] or r.rx["veth1"] or r.rx["veth2"])
    assert r.map_u64("rxcnt", 0) == len(fs)
    # Per frame (one NAPI poll each): the redirect, then the flush's xmit.
    assert fields(list(r.events)) == [redirect("veth2"), xmit("veth2")] * len(fs)
    assert r.trace["xdp_devmap_xmit"]["sent"] == len(fs)
    assert r.links["veth2"].tx_packets == len(fs) and r.links["veth3"].rx_packets == len(fs)


@pytest.mark.kernel
def test_devmap_redirect_no_peer_prog() -> None:
    sc, r = vl.devmap_redirect_no_peer_prog(), run("devmap_redirect_no_peer_prog")
    n = len(sc.traffic)
    assert all(not got for got in r.rx.values())
    assert r.map_u64("rxcnt", 0) == n
    only_events(r, xdp_redirect_err=n)
    assert fields(r.events_named("xdp_redirect_err")) == [
        redirect("veth2", err=-EOPNOTSUPP)] * n
    assert r.links["veth0"].rx_dropped == n and r.links["veth2"].tx_packets == 0


@pytest.mark.kernel
def test_devmap_redirect_mtu() -> None:
    sc, r = vl.devmap_redirect_mtu(), run("devmap_redirect_mtu")
    fs = frames(sc)
    fit = [f for f in fs if len(f) <= 400 + 18]
    assert fit and len(fit) < len(fs)
    assert list(r.rx["veth3"]) == [vl.swap_macs(f) for f in fit]
    assert r.map_u64("rxcnt", 0) == len(fs)
    # __xdp_enqueue's xdp_ok_fwd_dev: -EMSGSIZE at once, no bulk for those frames.
    assert fields(list(r.events)) == [
        e for f in fs for e in ([redirect("veth2"), xmit("veth2")] if len(f) <= 418
                                else [redirect("veth2", err=-EMSGSIZE)])]


@pytest.mark.kernel
@pytest.mark.parametrize(("name", "to", "err"), [
    ("redirect_ifindex_missing", vl.MISSING_IFINDEX, -EINVAL),
    ("redirect_ifindex_missing_generic", vl.MISSING_IFINDEX, -EINVAL),
    # lo has no ndo_xdp_xmit; generic mode needs none, but the namespace's lo is down.
    ("redirect_to_lo", vl.LO_IFINDEX, -EOPNOTSUPP),
    ("redirect_to_lo_generic", vl.LO_IFINDEX, -ENETDOWN)])
def test_redirect_ifindex_fails(name: str, to: int, err: int) -> None:
    sc, r = vl.SCENARIOS[name](), run(name)
    n = len(sc.traffic)
    assert all(not got for got in r.rx.values())
    only_events(r, xdp_redirect_err=n)
    # bpf_redirect's redirect: map_id INT_MAX, the ifindex as to_ifindex, map_index 0.
    assert fields(r.events_named("xdp_redirect_err")) == [
        redirect(to, err=err, prog="redirect_missing:xdp_redirect_missing",
                 map_=0x7FFF_FFFF)] * n


@pytest.mark.kernel
def test_redirect_to_lo_up_generic() -> None:
    sc, r = vl.redirect_to_lo_up_generic(), run("redirect_to_lo_up_generic")
    fs = frames(sc)
    # loopback_xmit: netif_rx on lo, whose stack receives every frame as sent.
    assert list(r.rx["lo"]) == fs
    assert not (r.rx["veth0"] or r.rx["veth1"])
    only_events(r, xdp_redirect=len(fs))
    assert fields(r.events_named("xdp_redirect")) == [
        redirect(vl.LO_IFINDEX, prog="redirect_missing:xdp_redirect_missing",
                 map_=0x7FFF_FFFF)] * len(fs)


@pytest.mark.kernel
def test_devmap_missing_aborted() -> None:
    sc, r = vl.devmap_missing_aborted(), run("devmap_missing_aborted")
    n = len(sc.traffic)
    assert all(not got for got in r.rx.values())
    assert r.map_u64("rxcnt", 0) == n
    only_events(r, xdp_exception=n)
    assert fields(r.events_named("xdp_exception")) == [
        {"prog_id": "redirect_map.o:xdp_redirect_map_prog", "act": 0, "ifindex": "veth0"}] * n
    assert r.links["veth0"].rx_dropped == 0


@pytest.mark.kernel
def test_devmap_egress_prog() -> None:
    sc, r = vl.devmap_egress_prog(), run("devmap_egress_prog")
    fs = frames(sc)
    tx_src_mac = bytes.fromhex("020000000001")  # redirect_map.c's .rodata default
    assert list(r.rx["veth3"]) == [f[6:12] + tx_src_mac + f[12:] for f in fs]
    assert fields(list(r.events)) == [redirect("veth2"), xmit("veth2")] * len(fs)


@pytest.mark.kernel
def test_devmap_broadcast() -> None:
    sc, r = vl.devmap_broadcast(), run("devmap_broadcast")
    fs = frames(sc)
    for dev in ("veth1", "veth3", "veth5"):
        assert list(r.rx[dev]) == fs
    assert not (r.rx["veth0"] or r.rx["veth2"] or r.rx["veth4"])
    assert r.map_u64("rxcnt", 0) == len(fs)
    bc = redirect("veth0", prog="redirect_bcast.o:xdp_redirect_bcast",
                  map_="redirect_bcast.o:ports")
    assert fields(list(r.events)) == [bc, xmit("veth4"), xmit("veth2"), xmit("veth0")] * len(fs)


@pytest.mark.kernel
def test_devmap_broadcast_egress_prog() -> None:
    sc, r = vl.devmap_broadcast_egress_prog(), run("devmap_broadcast_egress_prog")
    fs = frames(sc)
    tx_src_mac = bytes.fromhex("020000000001")  # redirect_map.c's .rodata default
    assert list(r.rx["veth1"]) == fs
    # One bulk queue per device, run by the program of the entry that queued first:
    # veth2's program on both of its copies, veth4's second entry's never.
    assert list(r.rx["veth3"]) == [g for f in fs for g in [f[:6] + tx_src_mac + f[12:]] * 2]
    assert list(r.rx["veth5"]) == [g for f in fs for g in (f, f)]
    assert not (r.rx["veth0"] or r.rx["veth2"] or r.rx["veth4"])
    bc = redirect("veth0", prog="redirect_bcast.o:xdp_redirect_bcast",
                  map_="redirect_bcast.o:ports")
    two = {"sent": 2}
    assert fields(list(r.events)) == [bc, xmit("veth4") | two, xmit("veth2") | two,
                                      xmit("veth0")] * len(fs)


@pytest.mark.kernel
def test_veth_frames_broadcast_egress_prog() -> None:
    sc, r = vl.veth_frames_broadcast_egress_prog(), run("veth_frames_broadcast_egress_prog")
    fs = frames(sc)
    tx_src_mac = bytes.fromhex("020000000001")  # redirect_map.c's .rodata default
    # veth4's one bulk queue holds a clone and the xdp_frame itself: the program of the
    # entry that queued first (the clone's) runs over both.
    assert list(r.rx["veth5"]) == [g for f in fs for g in [f[6:12] + tx_src_mac + f[12:]] * 2]
    assert list(r.rx["veth7"]) == [vl.swap_macs(f) for f in fs]
    assert not any(r.rx[d] for d in ("veth0", "veth1", "veth2", "veth3", "veth4", "veth6"))
    bc = redirect("veth4", prog="redirect_bcast.o:xdp_redirect_bcast",
                  map_="redirect_bcast.o:ports") | {"ifindex": "veth3"}
    at3 = {"from_ifindex": "veth3"}
    assert fields(list(r.events)) == [redirect("veth2"), xmit("veth2"), bc,
                                      xmit("veth6") | at3,
                                      xmit("veth4") | at3 | {"sent": 2}] * len(fs)


@pytest.mark.kernel
def test_devmap_broadcast_exclude_ingress() -> None:
    sc, r = vl.devmap_broadcast_exclude_ingress(), run("devmap_broadcast_exclude_ingress")
    fs = frames(sc)
    assert list(r.rx["veth3"]) == fs and list(r.rx["veth5"]) == fs
    assert not (r.rx["veth0"] or r.rx["veth1"] or r.rx["veth2"] or r.rx["veth4"])
    bc = redirect(0, prog="redirect_bcast.o:xdp_redirect_bcast_excl",
                  map_="redirect_bcast.o:ports")
    assert fields(list(r.events)) == [bc, xmit("veth4"), xmit("veth2")] * len(fs)
    assert r.links["veth0"].tx_packets == 0


@pytest.mark.kernel
def test_devmap_broadcast_generic_mtu() -> None:
    sc, r = vl.devmap_broadcast_generic_mtu(), run("devmap_broadcast_generic_mtu")
    fs = frames(sc)
    # dev_map_redirect_multi with skbs: veth2 (slot 0, MTU 400) refuses the longer
    # frames, which ends their broadcast before anything is sent.
    fit = [f for f in fs if len(f) <= 400 + 18]
    assert fit and len(fit) < len(fs)
    for dev in ("veth1", "veth3", "veth5"):
        assert list(r.rx[dev]) == fit, dev
    assert r.map_u64("rxcnt", 0) == len(fs)
    bc = {"prog_id": "redirect_bcast.o:xdp_redirect_bcast", "act": 4, "ifindex": "veth0",
          "to_ifindex": "veth2", "map_id": "redirect_bcast.o:ports", "map_index": 0}
    assert fields(list(r.events)) == [bc | {"err": 0 if len(f) <= 418 else -EMSGSIZE}
                                      for f in fs]


@pytest.mark.kernel
def test_lo_generic_tx_backlog() -> None:
    """lo's generic XDP_TX (``loopback_xmit``) brings each skb back to lo's own backlog,
    where its program runs on it again: ``seen[0]`` counts every frame, nothing
    reaches a stack, no tracepoint but veth0's redirects (generic XDP_TX has none)."""
    sc, r = vl.lo_generic_tx_backlog(), run("lo_generic_tx_backlog")
    n = len(frames(sc))
    assert all(not got for got in r.rx.values())
    assert r.maps["seen"] == {bytes(4): struct.pack("<Q", n)}
    only_events(r, xdp_redirect=n)


@pytest.mark.kernel
def test_cpumap_prog() -> None:
    sc, r = vl.cpumap_prog(), run("cpumap_prog")
    fs = frames(sc)
    dropped = [f for f in fs if udp_dport(f) == 9]
    passed = [f for f in fs if udp_dport(f) != 9]
    assert dropped and passed
    assert not sc.ordered
    got = list(r.rx["veth0"])
    assert Counter(got) == Counter(passed)
    for cpu in (0, 1):  # each kthread delivers in order
        assert [f for f in got if cpu_of(f) == cpu] == [f for f in passed if cpu_of(f) == cpu]
    assert r.rx["veth1"] == ()
    assert r.maps["rx_cnt"] == {bytes(4): struct.pack("<3Q", len(fs), 0, 0)}
    cm, prog = "redirect_cpu.o:cpu_map", "redirect_cpu.o:xdp_redirect_cpu_proto"
    assert fields(r.events_named("xdp_redirect")) == [
        redirect(0, prog=prog, map_=cm, index=cpu_of(f)) for f in fs]
    assert fields(r.events_named("xdp_cpumap_enqueue")) == [
        {"map_id": cm, "act": 4, "cpu": vl.SENDER_CPU, "drops": 0, "processed": 1,
         "to_cpu": cpu_of(f)} for f in fs]
    kt = r.trace["xdp_cpumap_kthread"]
    assert 0 < kt.events <= len(fs)
    assert dict(kt.sums) == {"drops": 0, "processed": len(fs), "xdp_pass": len(passed),
                             "xdp_drop": len(dropped), "xdp_redirect": 0}
    assert all(e["map_id"] == cm for e in r.events_named("xdp_cpumap_kthread"))
    only_events(r, xdp_redirect=len(fs), xdp_cpumap_enqueue=len(fs),
                xdp_cpumap_kthread=kt.events)


@pytest.mark.kernel
def test_adjust_meta_pass() -> None:
    sc, r = vl.adjust_meta_pass(), run("adjust_meta_pass")
    fs = frames(sc)
    big = [f for f in fs if too_big(f)]
    assert 5 <= len(big) < len(fs)
    assert list(r.rx["veth0"]) == [f for f in fs if not too_big(f)]
    # The replies are what BPF_PROG_TEST_RUN of the same program makes of the frames.
    with Collection.load(vl.SAMPLES / "adjust_tail.o", backend="kernel") as coll:
        prog = coll.programs["xdp_icmp_too_big"]
        want = [prog.test_run(f).data_out for f in big]
    assert list(r.rx["veth1"]) == want
    for reply, orig in zip(r.rx["veth1"], big, strict=True):
        assert len(reply) == 70 and reply[:12] == orig[6:12] + orig[:6]
        assert reply[23] == 1 and reply[34:36] == b"\x03\x04"  # ICMP frag needed
        assert reply[42:70] == orig[14:42]  # the quoted IP header and 8 bytes
    assert r.map_u64("icmp_sent", 0) == len(big)
    only_events(r, xdp_bulk_tx=len(big))
    assert r.trace["xdp_bulk_tx"]["sent"] == len(big)
    assert r.links["veth0"].tx_bytes == 70 * len(big)


# --------------------------------------------------------------------------- repeatability

@pytest.mark.kernel
@pytest.mark.parametrize("name", ["xdp2_tx", "devmap_broadcast", "cpumap_prog"])
def test_a_second_run_has_no_differences(name: str) -> None:
    """What the differential test compares is deterministic on the kernel itself."""
    sc = vl.SCENARIOS[name]()
    first, again = run(name), vl.run_kernel(sc)
    assert vl.lab_differences(first, again, sc, links=True) == []
    assert first.ifindex != again.ifindex  # each run has its own devices
    broken = replace(again, rx={**again.rx, "veth1": ()}, maps={})
    diffs = vl.lab_differences(first, broken, sc)
    assert any(d.startswith("map ") for d in diffs)
    assert any(d.startswith("rx veth1") for d in diffs) == bool(first.rx["veth1"])


# --------------------------------------------------------------------------- cleanup

def _leftovers() -> tuple[list[str], list[str]]:
    prefix = f"pyxdp-lab-{os.getpid()}-"
    nss = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                         check=True).stdout.split()
    from pyxdp.kernel.tracefs import tracefs_root
    inst = os.listdir(os.path.join(tracefs_root(), "instances"))
    stem = f"pyxdp-{os.getpid()}"
    return ([n for n in nss if n.startswith(prefix)],
            [i for i in inst if i == stem or i.startswith(stem + "-")])


@pytest.mark.kernel
def test_teardown_even_on_failure() -> None:
    run("xdp2_tx")
    assert _leftovers() == ([], [])

    def broken(colls: Mapping[str, Collection], ifindex_of: Callable[[str], int]) -> None:
        colls["xdp2.o"].maps["rxcnt"][0] = 1  # the map exists in the kernel...
        raise RuntimeError("setup failed")     # ...and the run stops half-way

    with pytest.raises(RuntimeError, match="setup failed"):
        vl.run_kernel(replace(vl.xdp2_tx(), setup=broken))
    assert _leftovers() == ([], [])
    with pytest.raises(KeyError):  # a program the object does not have, at attach time
        vl.run_kernel(replace(vl.xdp2_tx(), attach=(vl.Attach("veth0", "xdp2.o", "nope"),)))
    assert _leftovers() == ([], [])


def test_a_run_whose_record_overran_is_repeated(monkeypatch: pytest.MonkeyPatch) -> None:
    """tracefs sees the whole machine: a run that lost events (another workload's XDP)
    is run again; one that keeps losing them fails."""
    real = vl.KernelLab.settle
    calls: list[int] = []

    def settle(self: vl.KernelLab, settle: float = 0.2, timeout: float = 15.0) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise vl.Overrun(f"{self.scenario.name}: capture drops {{}}, trace events lost 9")
        return real(self, settle, timeout)

    monkeypatch.setattr(vl.KernelLab, "settle", settle)
    res = vl.run_kernel(vl.SCENARIOS["xdp1_drop"]())
    assert len(calls) == 2 and res.maps["rxcnt"]  # the second run counted the frames
    monkeypatch.setattr(vl.KernelLab, "settle", lambda self, *a, **k: (_ for _ in ()).throw(
        vl.Overrun("lost")))
    with pytest.raises(vl.Overrun):
        vl.run_kernel(vl.SCENARIOS["xdp1_drop"]())
