"""The same packet through Linux: a topology built from veth pairs in a network
namespace (:class:`pyxdp.testing.vethlab.KernelLab`), Linux's ``xdp:*`` and
``skb:kfree_skb`` tracepoints read from tracefs, the frames each device's
stack saw and what its AF_XDP sockets got, told as a journey and compared
with pyxdp's.

Linux has no NIC to lend, so each NIC ``X`` of the topology becomes a veth
``X`` whose peer ``X.w`` plays the wire: the packet is sent from ``X.w``,
and what ``X`` transmits is what reaches ``X.w``'s stack (``X.w`` has the
trivial XDP_PASS program, so that ``X`` takes XDP frames as a NIC does).
Devices keep the topology's MTU and rx queue count (``numrxqueues``; a
pair's ends get the larger count) and pyxdp's MAC addresses; the packet
arrives on the ingress queue because the sender runs on the CPU of that
number with ``PACKET_QDISC_BYPASS`` (:meth:`~pyxdp.testing.vethlab.KernelLab.send`:
so queue N needs CPU N). AF_XDP sockets are real ones
(:class:`~pyxdp.xsk.linux.LinuxXskSocket`, copy mode: veth has no zero-copy)
bound to their device and queue in the namespace, put into the XSKMAP and
given the topology's fill buffers; UDP listeners are sockets bound in the
namespace, and the devices have the topology's IPv4 addresses.

What Linux can show is what its tracepoints, taps and sockets show:
redirects and their errors, flushes, exceptions, cpumap kthreads, frames
reaching a stack (an AF_PACKET tap), descriptors in an AF_XDP rx ring and
``XDP_STATISTICS``, and the stack's drop reasons: ``skb:kfree_skb`` has no
device or namespace field, so it is read in an instance of its own filtered
to the sending thread (the veth receive runs in its softirq before
``send()`` returns: see :class:`~pyxdp.testing.vethlab.KernelLab`), and a
drop is put on the one device whose stack the tap saw the frame reach. An
``XDP_DROP`` fires no tracepoint: a frame nothing accounts for is reported
as vanished. Not built on Linux: zero-copy sockets (refused with one
line), IPv6 local delivery (the lab turns IPv6 off). GRO on a veth is
``ethtool -K DEV gro on`` (:func:`pyxdp.kernel.ethtool.set_gro`).
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import subprocess
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from pyxdp import samples
from pyxdp.errors import PyxdpError
from pyxdp.explain.journey import DROP_REASON_TEXT, Fate, Journey, Step, act_name
from pyxdp.explain.topology import BUILTIN_PASS, Topology, TopologyError, resolve_value
from pyxdp.spec import CollectionSpec
from pyxdp.testing.vethlab import (
    PASS_OBJ,
    Attach,
    KernelLab,
    LabEvent,
    LinkSpec,
    Scenario,
    Settled,
    prog_fd,
)

__all__ = ["KernelExplainer", "KernelJourney", "compare", "kernel_journey", "kernel_scenario"]

_ERRNO_TEXT = {
    -95: "the target does not advertise NETDEV_XDP_ACT_NDO_XMIT (a veth whose peer has no "
         "XDP program)",
    -6: "veth_xdp_xmit refused: the peer has no NAPI (no XDP program)",
    -90: "the frame is longer than the target's MTU (xdp_ok_fwd_dev)",
    -100: "the target is down",
    -22: "invalid target (empty entry or no such device)",
    -105: "the AF_XDP socket's rx ring is full",
    -12: "the AF_XDP socket's fill ring is empty",
}
_WIRE_MTU = 1500


def _wire(dev: str) -> str:
    return f"{dev}.w"


def _sock_name(dev: str, queue: int) -> str:
    return f"AF_XDP socket on {dev} queue {queue}"


@dataclass
class KernelJourney:
    """Linux's account of the packet: steps from its tracepoints, taps and sockets,
    fates, the events with ifindexes, programs and maps by name, and the stack's
    ``kfree_skb`` drops (reason, location)."""

    packet_len: int
    ingress: str
    steps: list[Step] = field(default_factory=list)
    fates: list[Fate] = field(default_factory=list)
    events: list[LabEvent] = field(default_factory=list)
    skb_drops: list[tuple[str, str]] = field(default_factory=list)

    def render(self) -> str:
        out = [f"A {self.packet_len}-byte packet arriving on {self.ingress} (Linux, veth):"]
        out.extend(f"{i:3d}. {s.text}" for i, s in enumerate(self.steps, 1))
        out.append("Fate:")
        out.extend(f"  {f.count} frame{'s' if f.count > 1 else ''} {f.outcome} at {f.where}: "
                   f"{f.reason}" for f in self.fates)
        out.append("Tracepoints Linux fired:")
        out.extend(f"  {e.name}: " + " ".join(f"{k}={v}" for k, v in e.fields)
                   for e in self.events)
        out.extend(f"  kfree_skb: reason={r} location={loc}" for r, loc in self.skb_drops)
        if not self.events and not self.skb_drops:
            out.append("  (none)")
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {"packet_len": self.packet_len, "ingress": self.ingress,
                "steps": [s.to_dict() for s in self.steps],
                "fates": [f.to_dict() for f in self.fates],
                "tracepoints": [{"name": e.name, "fields": dict(e.fields)} for e in self.events],
                "kfree_skb": [{"reason": r, "location": loc} for r, loc in self.skb_drops]}


def _check(topology: Topology) -> None:
    """What --kernel cannot build, refused with one line."""
    for d in topology.devices:
        if d.kind == "nic" and len(d.name) > 13:
            raise TopologyError(f"--kernel: NIC name {d.name!r} longer than 13 characters")
    for x in topology.xsk:
        if x.mode != "copy":
            raise TopologyError(f"--kernel: the AF_XDP socket on {x.dev}/{x.queue} must be in "
                                f"copy mode (veth has no zero-copy AF_XDP)")


def kernel_scenario(obj: str | Path | CollectionSpec, *, program: str, topology: Topology,
                    maps: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                    macs: Mapping[str, bytes] | None = None,
                    extra_setup: Callable[[Any, Callable[[str], int]], None] | None = None
                    ) -> Scenario:
    """The veth-lab :class:`~pyxdp.testing.vethlab.Scenario` of a topology (module doc):
    ``macs`` by device name (pyxdp's), ``extra_setup(explained_collection, ifindex_of)``
    run after the map entries are written (sockets, listeners)."""
    _check(topology)
    pairs: list[tuple[str, str]] = []
    nics: list[str] = []
    links: list[LinkSpec] = []
    macs = macs or {}
    for d in topology.devices:
        if d.kind == "veth":
            assert d.peer is not None
            pairs.append((d.name, d.peer))
            links += [LinkSpec(d.name, d.mtu, d.queues, macs.get(d.name)),
                      LinkSpec(d.peer, d.mtu, d.queues, macs.get(d.peer))]
        else:
            pairs.append((d.name, _wire(d.name)))
            nics.append(d.name)
            links += [LinkSpec(d.name, d.mtu, d.queues, macs.get(d.name)),
                      LinkSpec(_wire(d.name), max(d.mtu, _WIRE_MTU), d.queues)]
    explained: str | CollectionSpec
    if isinstance(obj, CollectionSpec):
        path, explained = f"spec:{obj.name or 'explained'}", obj
    else:
        path = explained = PASS_OBJ if str(obj) == BUILTIN_PASS \
            else str(Path(samples.resolve(obj)).resolve())
    attach = []
    for a in topology.attachments(program):
        src = explained if a.obj is None else PASS_OBJ if a.obj == BUILTIN_PASS \
            else str(Path(samples.resolve(a.obj)).resolve())
        name = a.program or ("xdp_pass" if src == PASS_OBJ else program)
        # The explained object is one collection (its maps are shared); other
        # XDP_PASS programs get one each.
        key = f"{PASS_OBJ}@{a.dev}" if src == PASS_OBJ and a.obj is not None else \
            path if a.obj is None else str(src)
        attach.append(Attach(a.dev, src, name, mode=a.mode, collection=key))
    attach.extend(Attach(_wire(n), PASS_OBJ, "xdp_pass", collection=f"{PASS_OBJ}@{_wire(n)}")
                  for n in nics)
    entries = {**topology.maps, **(maps or {})}

    def setup(colls: Mapping[str, Any], ifindex_of: Callable[[str], int]) -> None:
        coll = colls[path]

        def ifx(name: str) -> int | None:
            try:
                return ifindex_of(name)
            except KeyError:
                return None

        def pid(name: str) -> int | None:
            p = coll.programs.get(name)
            return prog_fd(p) if p is not None else None

        for mname, rows in entries.items():
            m = coll.maps.get(mname)
            if m is None:
                raise TopologyError(f"the object has no map {mname!r}")
            for e in rows:
                m.update(resolve_value(e["key"], ifx, pid), resolve_value(e["value"], ifx, pid))
        if extra_setup is not None:
            extra_setup(coll, ifindex_of)

    if not any(a.key == path for a in attach):
        raise TopologyError("--kernel: the explained program is attached nowhere")
    return Scenario("explain", tuple(pairs), tuple(attach), (), setup=setup,
                    pass_unattached=False, links=tuple(links))


def _short(v: int | str) -> int | str:
    """A lab name without its collection key (``"/x/redirect_map.o:tx_port"`` -> ``tx_port``)."""
    return v.rsplit(":", 1)[-1] if isinstance(v, str) else v


def _lab_event(e: LabEvent) -> LabEvent:
    return LabEvent(e.name, tuple((k, _short(v)) for k, v in e.fields))


@dataclass
class _LinuxSocket:
    name: str
    sock: Any
    consume: bool
    before: tuple[int, ...] = ()


class KernelExplainer:
    """The topology built on Linux (root; module doc), on which packets are explained
    one by one, maps and sockets persisting from packet to packet as on pyxdp's
    :class:`~pyxdp.explain.journey.Explainer`. ``macs``: device MACs by name (the
    pyxdp host's, so that the stack classifies frames alike)."""

    def __init__(self, obj: str | Path | CollectionSpec, *, program: str, topology: Topology,
                 maps: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                 macs: Mapping[str, bytes] | None = None) -> None:
        self.topology = topology
        self.nics = [d.name for d in topology.devices if d.kind == "nic"]
        self._sockets: list[_LinuxSocket] = []
        self._udp: list[tuple[int, socket.socket]] = []
        self._es = ExitStack()
        scenario = kernel_scenario(obj, program=program, topology=topology, maps=maps,
                                   macs=macs, extra_setup=self._setup)
        self.lab = KernelLab(scenario, skb_drops=True)
        try:
            self._es.enter_context(self.lab)
        except PyxdpError:
            self._es.close()
            raise
        except OSError as e:
            self._es.close()
            raise PyxdpError(f"--kernel: {e}") from None

    def _setup(self, coll: Any, ifindex_of: Callable[[str], int]) -> None:
        """In the namespace: the topology's IPv4 addresses (the lab has no IPv6), no
        reply sent, UDP listeners, AF_XDP sockets in their maps."""
        from pyxdp.kernel.ethtool import set_gro
        from pyxdp.xsk.linux import LinuxXskSocket
        # Nothing the stack answers (an echo reply, a reset) may leave: pyxdp sends
        # no replies. Output lookups carry iif lo.
        addrs = [["addr", "add", a, "dev", dev] for dev, xs in self.topology.addresses.items()
                 for a in xs if ipaddress.ip_interface(a).version == 4]
        for cmd in (["link", "set", "lo", "up"], *addrs,
                    ["rule", "add", "pref", "100", "lookup", "local"],
                    ["rule", "del", "pref", "0"],
                    ["rule", "add", "pref", "10", "iif", "lo", "blackhole"]):
            res = subprocess.run(["ip", "-n", self.lab.ns, *cmd], capture_output=True,
                                 text=True, timeout=60)
            if res.returncode != 0:
                raise PyxdpError(f"--kernel: ip {' '.join(cmd)}: {res.stderr.strip()}")
        for d in self.topology.devices:
            if d.gro:  # veth_set_features: NAPI without an XDP program
                set_gro(d.name, True)
        for port in self.topology.udp:
            u = self._es.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
            u.bind(("0.0.0.0", port))
            u.setblocking(False)
            self._udp.append((port, u))
        for x in self.topology.xsk:
            try:
                sock = LinuxXskSocket(x.dev, x.queue, mode="copy", rx_size=x.rx_size,
                                      fill_size=max(x.rx_size, 64), comp_size=64, tx_size=0)
            except PyxdpError as e:
                raise TopologyError(f"--kernel: AF_XDP socket on {x.dev}/{x.queue}: {e}") \
                    from None
            self._es.callback(sock.close)
            sock.fill(x.fill)
            self._sockets.append(_LinuxSocket(_sock_name(x.dev, x.queue), sock, x.consume))
            if x.map is not None:
                m = coll.maps.get(x.map)
                if m is None:
                    raise TopologyError(f"no XSKMAP {x.map!r} in the object")
                m[x.key] = sock.fd

    @staticmethod
    def _xsk_state(sock: Any) -> tuple[int, ...]:
        s = sock.statistics()
        return (s.rx_dropped, s.rx_ring_full, s.rx_fill_ring_empty_descs)

    def explain(self, packet: bytes) -> KernelJourney:
        """Send ``packet`` to the ingress device and queue, wait until Linux is quiet,
        and tell what its tracepoints, taps and sockets saw."""
        ing = self.topology.ingress
        for s in self._sockets:
            s.before = self._xsk_state(s.sock)
        try:
            self.lab.send(ing.dev, bytes(packet), ing.queue)
            settled = self.lab.settle()
        except OSError as e:
            raise PyxdpError(f"--kernel: send on {ing.dev}: {e}") from None
        j = _journey(settled, len(packet), f"{ing.dev} queue {ing.queue}", self.nics)
        self._udp_fates(j)
        for s in self._sockets:
            got = 0
            while True:
                if s.consume:  # the application reads and gives the buffers back
                    batch = s.sock.recv(64)
                    k = len(batch)
                    if k:
                        s.sock.release(batch, refill=True)
                else:  # it leaves them in the ring: only look (the ring fills up)
                    k = s.sock.rx.peek(64)[1]
                if not k:
                    break
                got += k
            if got:
                j.steps.append(Step("xsk", s.name, f"{got} descriptor(s) in the rx ring of "
                                                   f"the {s.name}"))
                j.fates.append(Fate("delivered", s.name, "in the socket's rx ring", got))
            d = [a - b for a, b in zip(self._xsk_state(s.sock), s.before, strict=True)]
            if any(d):
                j.steps.append(Step("xsk", s.name, (
                    f"XDP_STATISTICS of the {s.name}: rx_dropped +{d[0]}, rx_ring_full "
                    f"+{d[1]}, rx_fill_ring_empty_descs +{d[2]}"),
                    {"rx_dropped": d[0], "rx_ring_full": d[1], "rx_fill_ring_empty_descs": d[2]}))
        _vanished(j, settled)
        return j

    def _udp_fates(self, j: KernelJourney) -> None:
        """Datagrams the namespace's UDP sockets got: taken from the stack's tap count."""
        tapped = [f for f in j.fates if f.reason == "reached the stack (tap)"]
        for port, u in self._udp:
            n = 0
            while True:
                try:
                    u.recv(1 << 16)
                except BlockingIOError:
                    break
                n += 1
            if not n:
                continue
            j.steps.append(Step("stack", f"UDP port {port}", f"{n} datagram(s) read from the "
                                                             f"UDP socket on port {port}"))
            if len(tapped) == 1 and tapped[0].count >= n:
                f = tapped[0]
                j.fates[j.fates.index(f)] = tapped[0] = Fate(f.outcome, f.where, f.reason,
                                                              f.count - n)
                j.fates.append(Fate("delivered", f.where, f"UDP socket on port {port}", n))
        j.fates[:] = [f for f in j.fates if f.count]

    def close(self) -> None:
        self._es.close()

    def __enter__(self) -> KernelExplainer:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _journey(settled: Settled, packet_len: int, ingress: str,
             nics: Sequence[str]) -> KernelJourney:
    """Linux's journey from one settled packet: an event is a step, a frame at a tap,
    a kfree_skb drop or a drop count a fate."""
    j = KernelJourney(packet_len, ingress)
    for raw in settled.events:
        e = _lab_event(raw)
        j.events.append(e)
        _event_step(j, e)
    wires = {_wire(n): n for n in nics}
    j.skb_drops = [(d.reason, d.location) for d in settled.drops]
    # Drops on veth's own receive path (the skb of a frame XDP dropped or took) are
    # the XDP path's; the rest are the stack's.
    drops = [(d.reason, d.location) for d in settled.drops
             if not d.location.startswith("veth_")]
    stacks = [dev for dev, frames in settled.rx.items() if frames and dev not in wires]
    for dev, frames in settled.rx.items():
        if not frames:
            continue
        if dev in wires:
            j.steps.append(Step("xmit", wires[dev], f"{wires[dev]} transmits {len(frames)} "
                                                    f"frame(s) (seen at the wire's tap)"))
            j.fates.append(Fate("transmitted", wires[dev], "sent on the wire", len(frames)))
            continue
        # kfree_skb names no device: its drops go to the one stack the tap saw.
        mine = drops if len(stacks) == 1 else []
        j.steps.append(Step("stack", dev, f"{len(frames)} frame(s) reach the stack of {dev} "
                                          f"(AF_PACKET tap)" + "".join(
                                              f"; kfree_skb(SKB_DROP_REASON_{r}) at {loc}"
                                              for r, loc in mine)))
        for r, loc in mine:
            j.fates.append(Fate("dropped", f"{dev} stack", f"SKB_DROP_REASON_{r}: "
                                f"{DROP_REASON_TEXT.get(r, r)} (kfree_skb at {loc})"))
        if len(frames) > len(mine):
            j.fates.append(Fate("delivered", f"{dev} stack", "reached the stack (tap)",
                                len(frames) - len(mine)))
    for r, loc in j.skb_drops:
        if loc.startswith("veth_"):
            j.steps.append(Step("event", "kfree_skb", f"kfree_skb(SKB_DROP_REASON_{r}) at {loc}: "
                                                      f"veth frees the skb the frame came in"))
        elif len(stacks) != 1:
            j.steps.append(Step("event", "kfree_skb", f"kfree_skb(SKB_DROP_REASON_{r}) at {loc} "
                                                      f"(the device is not known)"))
    return j


def _vanished(j: KernelJourney, settled: Settled) -> None:
    """A frame nothing accounted for: XDP_DROP (no tracepoint), which on veth frees the
    frame's skb in veth_xdp_rcv_skb (a kfree_skb with no reason of its own)."""
    if j.fates:
        return
    path = [d for d in settled.drops if d.location.startswith("veth_xdp_rcv")]
    sent = [e for e in j.events if e.name in ("xdp_bulk_tx", "xdp_devmap_xmit")
            and int(e.get("sent") or 0)]
    if sent:
        e = sent[-1]
        dev = str(e.get("to_ifindex") if e.name == "xdp_devmap_xmit" else e.get("ifindex"))
        j.fates.append(Fate("queued", dev, f"{e.name} sent it into the peer's xdp_ring, but no "
                                           f"poll took it out (veth_xdp_flush kicks only a peer "
                                           f"with an XDP program, not one with GRO alone)"))
    elif path:
        j.fates.append(Fate("dropped", j.ingress, f"XDP_DROP: no tracepoint fires; veth's skb "
                                                  f"freed by kfree_skb at {path[0].location}"))
    else:
        j.fates.append(Fate("dropped", j.ingress, "vanished: no tracepoint, tap or socket saw "
                                                  "it (XDP_DROP fires none)"))


def _event_step(j: KernelJourney, e: LabEvent) -> None:
    g = e.get
    if e.name == "xdp_exception":
        j.steps.append(Step("event", str(g("ifindex")), f"xdp_exception on {g('ifindex')}: "
                            f"{act_name(int(g('act') or 0))} from {g('prog_id')}"))
        j.fates.append(Fate("dropped", str(g("ifindex")),
                            f"{act_name(int(g('act') or 0))} (xdp_exception)"))
    elif e.name == "xdp_redirect":
        j.steps.append(Step("event", str(g("ifindex")), (
            f"xdp_redirect from {g('ifindex')} to {g('to_ifindex')} via {g('map_id')}"
            f"[{g('map_index')}]")))
    elif e.name == "xdp_redirect_err":
        err = int(g("err") or 0)
        j.steps.append(Step("event", str(g("ifindex")), (
            f"xdp_redirect_err from {g('ifindex')} to {g('to_ifindex')} via {g('map_id')}"
            f"[{g('map_index')}]: err {err}")))
        j.fates.append(Fate("dropped", str(g("ifindex")),
                            f"redirect failed, err {err} ({_errname(err)}): "
                            f"{_ERRNO_TEXT.get(err, '')}"))
    elif e.name in ("xdp_devmap_xmit", "xdp_bulk_tx"):
        dev = g("to_ifindex") if e.name == "xdp_devmap_xmit" else g("ifindex")
        err, drops = int(g("err") or 0), int(g("drops") or 0)
        j.steps.append(Step("event", str(dev), (
            f"{e.name} on {dev}: sent {g('sent')}, drops {drops}, err {err}")))
        if drops:
            j.fates.append(Fate("dropped", str(dev), f"{e.name} drops, err {err}: "
                                f"{_ERRNO_TEXT.get(err, 'not sent')}", drops))
    elif e.name == "xdp_cpumap_enqueue":
        drops = int(g("drops") or 0)
        j.steps.append(Step("event", f"CPU {g('to_cpu')}", (
            f"xdp_cpumap_enqueue to CPU {g('to_cpu')}: processed {g('processed')}, "
            f"drops {drops}")))
        if drops:
            j.fates.append(Fate("dropped", f"CPU {g('to_cpu')}", "ptr_ring full", drops))
    elif e.name == "xdp_cpumap_kthread":
        drop = int(g("xdp_drop") or 0)
        j.steps.append(Step("event", f"CPU {g('cpu')}", (
            f"xdp_cpumap_kthread on CPU {g('cpu')}: processed {g('processed')}, xdp_pass "
            f"{g('xdp_pass')}, xdp_drop {drop}")))
        if drop:
            j.fates.append(Fate("dropped", f"CPU {g('cpu')} kthread",
                                "XDP_DROP from the cpumap program", drop))


def _errname(err: int) -> str:
    return f"-{errno.errorcode.get(-err, str(-err))}" if err < 0 else str(err)


def kernel_journey(obj: str | Path | CollectionSpec, packet: bytes, *, program: str,
                   topology: Topology,
                   maps: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                   macs: Mapping[str, bytes] | None = None) -> KernelJourney:
    """Run ``packet`` through Linux on the topology (root; module doc)."""
    with KernelExplainer(obj, program=program, topology=topology, maps=maps,
                         macs=macs) as kx:
        return kx.explain(packet)


def _pyxdp_events(j: Journey, names: Callable[[str, int], int | str]) -> list[LabEvent]:
    out = []
    for e in j.events:
        fields = tuple((k, names(k, v)) for k, v in e.record._asdict().items())
        out.append(LabEvent(e.name, fields))
    return out


def _where(f: Fate) -> tuple[str, str] | None:
    """Where a frame ended, as both sides can see it: on a wire, at a stack, in a socket."""
    if f.outcome == "transmitted":
        return ("wire", f.where)
    if f.where.endswith(" stack"):
        return ("stack", f.where[:-len(" stack")])
    if f.outcome == "delivered" and f.where.startswith("AF_XDP socket"):
        return ("rx ring", f.where)
    return None


def _outcomes(fates: Sequence[Fate], steps: Sequence[Step]) -> Counter[tuple[str, str]]:
    """What both sides name alike: the stack's drop reasons, UDP sockets that got a
    datagram, AF_XDP sockets' XDP_STATISTICS deltas."""
    out: Counter[tuple[str, str]] = Counter()
    for f in fates:
        if f.outcome == "dropped" and f.reason.startswith("SKB_DROP_REASON_"):
            out[(f.where, f.reason.split(":", 1)[0])] += f.count
        elif f.outcome == "delivered" and f.reason.startswith("UDP socket on port"):
            out[(f.where, f.reason)] += f.count
    for s in steps:
        if s.kind == "xsk" and "rx_ring_full" in s.fields:
            out[(s.where, "XDP_STATISTICS " + " ".join(
                f"{k} +{s.fields[k]}" for k in ("rx_dropped", "rx_ring_full",
                                                "rx_fill_ring_empty_descs")))] += 1
    return out


def compare(pyxdp: Journey, linux: KernelJourney, *,
            names: Callable[[str, int], int | str] | None = None) -> list[str]:
    """Where the two journeys differ: tracepoints (with fields, ifindexes, programs
    and maps by name; cpumap kthread batching left out), where frames ended, the
    stack's drop reasons and UDP deliveries, AF_XDP sockets' statistics."""
    out: list[str] = []
    ours = _pyxdp_events(pyxdp, names or (lambda k, v: v))
    skip = {"xdp_cpumap_kthread"}  # batching and wakeups vary on Linux
    a = Counter(e for e in ours if e.name not in skip)
    b = Counter(e for e in linux.events if e.name not in skip)
    for e in (a - b):
        out.append(f"pyxdp only: {e.name} " + " ".join(f"{k}={v}" for k, v in e.fields))
    for e in (b - a):
        out.append(f"Linux only: {e.name} " + " ".join(f"{k}={v}" for k, v in e.fields))
    ends_a: Counter[tuple[str, str]] = Counter()
    ends_b: Counter[tuple[str, str]] = Counter()
    for f in pyxdp.fates:
        w = _where(f)
        if w is not None:
            ends_a[w] += f.count
    for f in linux.fates:
        w = _where(f)
        if w is not None:
            ends_b[w] += f.count
    for (kind, dev), n in (ends_a - ends_b).items():
        out.append(f"pyxdp only: {n} frame(s) reach {dev}'s {kind}")
    for (kind, dev), n in (ends_b - ends_a).items():
        out.append(f"Linux only: {n} frame(s) reach {dev}'s {kind}")
    ra, rb = _outcomes(pyxdp.fates, pyxdp.steps), _outcomes(linux.fates, linux.steps)
    for (where, what), n in (ra - rb).items():
        out.append(f"pyxdp only: {n} x {what} at {where}")
    for (where, what), n in (rb - ra).items():
        out.append(f"Linux only: {n} x {what} at {where}")
    return out
