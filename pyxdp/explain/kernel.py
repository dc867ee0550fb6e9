"""The same packet through Linux: a topology built from veth pairs in a network
namespace (:func:`pyxdp.testing.vethlab.run_kernel`), Linux's ``xdp:*``
tracepoints read from tracefs and the frames each device's stack saw, told as
a journey and compared with pyxdp's.

Linux has no NIC to lend, so each NIC ``X`` of the topology becomes a veth
``X`` whose peer ``X.w`` plays the wire: the packet is sent from ``X.w``,
and what ``X`` transmits is what reaches ``X.w``'s stack (``X.w`` has the
trivial XDP_PASS program, so that ``X`` takes XDP frames as a NIC does).
What Linux can show is what its tracepoints and taps show: redirects and
their errors, flushes, exceptions, cpumap kthreads, frames reaching a stack
(an AF_PACKET tap sees them before IP's checks, so a drop reason there is
not shown). An ``XDP_DROP`` fires no tracepoint: a frame that neither an
event nor a tap accounts for is reported as vanished. AF_XDP sockets are not
built on the Linux side, nor UDP listeners (the tap sees a frame reach the
stack whether a socket takes it or not).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyxdp import samples
from pyxdp.errors import PyxdpError
from pyxdp.explain.journey import Fate, Journey, Step, act_name
from pyxdp.explain.topology import BUILTIN_PASS, Topology, TopologyError, resolve_value
from pyxdp.testing.vethlab import PASS_OBJ, Attach, LabEvent, LabResult, Scenario, prog_fd

__all__ = ["KernelJourney", "compare", "kernel_journey", "kernel_scenario"]

_ERRNO_TEXT = {
    -95: "the target does not advertise NETDEV_XDP_ACT_NDO_XMIT (a veth whose peer has no "
         "XDP program)",
    -6: "veth_xdp_xmit refused: the peer has no NAPI (no XDP program)",
    -90: "the frame is longer than the target's MTU (xdp_ok_fwd_dev)",
    -100: "the target is down",
    -22: "invalid target (empty entry or no such device)",
}



def _wire(dev: str) -> str:
    return f"{dev}.w"


@dataclass
class KernelJourney:
    """Linux's account of the packet: steps from its tracepoints and taps, fates, and
    the events with ifindexes, programs and maps by name."""

    packet_len: int
    ingress: str
    steps: list[Step] = field(default_factory=list)
    fates: list[Fate] = field(default_factory=list)
    events: list[LabEvent] = field(default_factory=list)

    def render(self) -> str:
        out = [f"A {self.packet_len}-byte packet arriving on {self.ingress} (Linux, veth):"]
        out.extend(f"{i:3d}. {s.text}" for i, s in enumerate(self.steps, 1))
        out.append("Fate:")
        out.extend(f"  {f.count} frame{'s' if f.count > 1 else ''} {f.outcome} at {f.where}: "
                   f"{f.reason}" for f in self.fates)
        out.append("Tracepoints Linux fired:")
        out.extend(f"  {e.name}: " + " ".join(f"{k}={v}" for k, v in e.fields)
                   for e in self.events)
        if not self.events:
            out.append("  (none)")
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {"packet_len": self.packet_len, "ingress": self.ingress,
                "steps": [s.to_dict() for s in self.steps],
                "fates": [f.to_dict() for f in self.fates],
                "tracepoints": [{"name": e.name, "fields": dict(e.fields)} for e in self.events]}


def kernel_scenario(obj: str | Path, packet: bytes, *, program: str, topology: Topology,
                    maps: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> Scenario:
    """The veth-lab :class:`~pyxdp.testing.vethlab.Scenario` of a topology (module doc)."""
    if topology.xsk:
        raise TopologyError("--kernel builds no AF_XDP sockets: leave 'xsk' out of the topology")
    if topology.ingress.queue:
        raise TopologyError("--kernel sends the packet on rx queue 0 only")
    pairs: list[tuple[str, str]] = []
    nics: list[str] = []
    for d in topology.devices:
        if d.mtu != 1500 or d.queues != 1 or d.gro:
            raise TopologyError(f"--kernel: device {d.name} needs mtu 1500, one queue, no gro")
        if d.kind == "veth":
            assert d.peer is not None
            pairs.append((d.name, d.peer))
        else:
            if len(d.name) > 13:
                raise TopologyError(f"--kernel: NIC name {d.name!r} longer than 13 characters")
            pairs.append((d.name, _wire(d.name)))
            nics.append(d.name)
    path = str(Path(samples.resolve(obj)).resolve())
    attach = []
    for a in topology.attachments(program):
        src = path if a.obj is None else PASS_OBJ if a.obj == BUILTIN_PASS \
            else str(Path(samples.resolve(a.obj)).resolve())
        name = a.program or ("xdp_pass" if src == PASS_OBJ else program)
        key = f"{PASS_OBJ}@{a.dev}" if src == PASS_OBJ else src
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

    if not any(a.key == path for a in attach):
        raise TopologyError("--kernel: the explained program is attached nowhere")
    return Scenario("explain", tuple(pairs), tuple(attach),
                    ((topology.ingress.dev, bytes(packet)),), setup=setup,
                    pass_unattached=False)


def _short(v: int | str) -> int | str:
    """A lab name without its collection key (``"/x/redirect_map.o:tx_port"`` -> ``tx_port``)."""
    return v.rsplit(":", 1)[-1] if isinstance(v, str) else v


def _lab_event(e: LabEvent) -> LabEvent:
    return LabEvent(e.name, tuple((k, _short(v)) for k, v in e.fields))


def journey_of_lab(result: LabResult, packet_len: int, ingress: str,
                   nics: Sequence[str]) -> KernelJourney:
    """Linux's journey from a lab run: an event is a step, a frame at a tap a fate."""
    j = KernelJourney(packet_len, ingress)
    for raw in result.events:
        e = _lab_event(raw)
        j.events.append(e)
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
                                f"redirect failed, err {err}: {_ERRNO_TEXT.get(err, '')}"))
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
    wires = {_wire(n): n for n in nics}
    for dev, frames in result.rx.items():
        if not frames:
            continue
        if dev in wires:
            j.steps.append(Step("xmit", wires[dev], f"{wires[dev]} transmits {len(frames)} "
                                                    f"frame(s) (seen at the wire's tap)"))
            j.fates.append(Fate("transmitted", wires[dev], "sent on the wire", len(frames)))
        else:
            j.steps.append(Step("stack", dev, f"{len(frames)} frame(s) reach the stack of {dev} "
                                              f"(AF_PACKET tap)"))
            j.fates.append(Fate("delivered", f"{dev} stack", "reached the stack (tap)",
                                len(frames)))
    if not j.fates:
        j.fates.append(Fate("dropped", ingress, "vanished: no tracepoint and no tap saw it "
                                                "(XDP_DROP fires none)"))
    return j


def kernel_journey(obj: str | Path, packet: bytes, *, program: str, topology: Topology,
                   maps: Mapping[str, Sequence[Mapping[str, Any]]] | None = None
                   ) -> KernelJourney:
    """Run ``packet`` through Linux on the topology (root; module doc)."""
    from pyxdp.testing.vethlab import run_kernel
    scenario = kernel_scenario(obj, packet, program=program, topology=topology, maps=maps)
    try:
        result = run_kernel(scenario)
    except PyxdpError:
        raise
    except OSError as e:
        raise PyxdpError(f"--kernel: {e}") from None
    nics = [d.name for d in topology.devices if d.kind == "nic"]
    return journey_of_lab(result, len(packet), f"{topology.ingress.dev} queue 0", nics)


def _pyxdp_events(j: Journey, names: Callable[[str, int], int | str]) -> list[LabEvent]:
    out = []
    for e in j.events:
        fields = tuple((k, names(k, v)) for k, v in e.record._asdict().items())
        out.append(LabEvent(e.name, fields))
    return out


def _where(f: Fate) -> tuple[str, str] | None:
    """Where a frame ended, as both sides can see it: on a wire or at a stack."""
    if f.outcome == "transmitted":
        return ("wire", f.where)
    if f.where.endswith(" stack"):
        return ("stack", f.where[:-len(" stack")])
    return None


def compare(pyxdp: Journey, linux: KernelJourney, *,
            names: Callable[[str, int], int | str] | None = None) -> list[str]:
    """Where the two journeys differ: tracepoints (with fields, ifindexes, programs
    and maps by name; cpumap kthread batching left out) and where frames ended."""
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
    return out
