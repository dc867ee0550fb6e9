"""Where did my packet go: one packet's journey through XDP programs, redirect
maps, devices and the host stack, told in Linux's terms.

What Linux gives to answer the question is scattered: the ``xdp:*``
tracepoints (``include/trace/events/xdp.h``: ``xdp_exception``,
``xdp_redirect(_err)``, ``xdp_devmap_xmit``, ``xdp_cpumap_*``,
``xdp_bulk_tx``), the ``skb:kfree_skb`` drop reasons and SNMP counters of the
stack, AF_XDP's ``XDP_STATISTICS`` and the program's own source. An
:class:`Explainer` builds a pyxdp :class:`~pyxdp.net.netdevice.Host` from a
:class:`~pyxdp.explain.topology.Topology`, runs packets through it on the
Python reference path (the interpreter, no native loop: every tracepoint
fires per packet) and listens to all of it at once:

- every program run (the XDP program, devmap and cpumap programs, tail
  calls) is traced instruction by instruction (``XdpProg.watcher``), which
  gives the verdict, the instruction that decided it - the last one to write
  ``r0``: the ``return`` or the helper call - with its C line from BTF line
  info, and the redirect helper's arguments and result (so an empty devmap
  slot is named with its map and key);
- the host's tracepoints, in firing order, each read as the step it marks
  (bulk-queued, flushed, refused with ``-ENXIO`` because the veth peer has no
  NAPI...);
- the stack's drop reasons, SNMP counters and sockets around each list of
  skbs it receives; frames leaving NICs; AF_XDP sockets' rings and counters.

A :class:`Journey` is the ordered :class:`Step` s and a :class:`Fate` for
every frame that came out of the packet (a broadcast's clones each get one):
transmitted, delivered (to a socket, an AF_XDP ring, the stack) or dropped,
with the reason. The tracepoints the kernel would have fired are kept with
their fields. Frames are told apart by where they end, not followed by
identity: the fates of one packet add up, the clones are counted, not named.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from pyxdp.asm.disasm import format_insn
from pyxdp.asm.helpers_names import PYXDP_FUNC_REDIRECT_XSK, helper_name
from pyxdp.asm.insn import Instruction
from pyxdp.collection import Collection
from pyxdp.errors import ProgramFault, PyxdpError
from pyxdp.explain.topology import (
    BUILTIN_PASS,
    Topology,
    TopologyError,
    default_topology,
    resolve_value,
)
from pyxdp.maps.base import map_by_addr, map_by_id
from pyxdp.net.filter import BPF_F_BROADCAST, BPF_F_EXCLUDE_INGRESS
from pyxdp.net.netdevice import Host, NetDevice, Veth
from pyxdp.net.prog import XdpProg
from pyxdp.net.stack import SNMP_NAMES, SkbBatch
from pyxdp.net.trace import Subscription, Tracer
from pyxdp.net.xdp import XdpBuff
from pyxdp.spec import CollectionSpec, ProgramSpec
from pyxdp.uapi.bpf import BpfAttachType, BpfFuncId, BpfMapType, XdpAction
from pyxdp.uapi.dropreason import SkbDropReason
from pyxdp.uapi.xdp_trace import TraceEvent
from pyxdp.vm.helpers import RunContext

__all__ = ["DROP_REASON_TEXT", "Explainer", "ExplainError", "Fate", "Journey", "Step",
           "explain"]

#: The events of a packet's way (the memory-model and link events are not).
JOURNEY_EVENTS = ("xdp_exception", "xdp_bulk_tx", "xdp_redirect", "xdp_redirect_err",
                  "xdp_cpumap_kthread", "xdp_cpumap_enqueue", "xdp_devmap_xmit")

#: What each ``enum skb_drop_reason`` the stack gives means, in a few words.
DROP_REASON_TEXT: Mapping[str, str] = {
    "NOT_SPECIFIED": "no reason given (a frame shorter than its headers)",
    "NO_SOCKET": "no socket listens on the destination port",
    "PKT_TOO_SMALL": "shorter than its headers say",
    "TCP_CSUM": "bad TCP checksum",
    "UDP_CSUM": "bad UDP checksum",
    "OTHERHOST": "addressed to another host's MAC (or a VLAN this host has no device for)",
    "IP_CSUM": "bad IPv4 header checksum",
    "IP_INHDR": "bad IP header (version, length or addresses)",
    "IP_NOPROTO": "no handler for the IP protocol",
    "UNHANDLED_PROTO": "no handler for the Ethernet protocol",
    "ICMP_CSUM": "bad ICMP checksum",
    "INVALID_PROTO": "a protocol header this host cannot accept",
    "IP_INVALID_SOURCE": "martian source address",
    "IP_INVALID_DEST": "invalid destination address",
    "IP_LOCALNET": "a loopback address arriving on a device",
    "IP_INADDRERRORS": "not an address of this host (forwarding is off)",
    "IP_INNOROUTES": "no route to the destination",
    "IPV6_BAD_EXTHDR": "bad IPv6 extension header",
}

_ACT = {int(a): a.name for a in XdpAction}
_REDIRECT_HELPERS = (int(BpfFuncId.BPF_FUNC_redirect), int(BpfFuncId.BPF_FUNC_redirect_map),
                     PYXDP_FUNC_REDIRECT_XSK)
_CALL, _EXIT = 0x85, 0x95
_R0_WRITERS = (0, 1, 4, 7)  # LD, LDX, ALU, ALU64 classes write their dst register
_DEVMAPS = (int(BpfMapType.BPF_MAP_TYPE_DEVMAP), int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH))
_FWD_OVERHEAD = 14 + 4  # xdp_ok_fwd_dev: mtu + hard_header_len + VLAN_HLEN


class ExplainError(PyxdpError):
    """An object, program or packet that cannot be explained (one line, specific)."""


def act_name(act: int) -> str:
    return _ACT[act] if act in _ACT else f"invalid action {act}"


# --------------------------------------------------------------------------
# The journey
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One thing that happened to the packet (or its frames), in order.

    ``kind``: ``rx``, ``run`` (a program ran), ``helper`` (a redirect helper's
    call), ``event`` (a tracepoint), ``xmit`` (frames left a NIC), ``stack``
    (skbs reached the stack), ``xsk`` (an AF_XDP socket's rings). ``where``: the
    device and queue, map or socket; ``fields``: the facts, JSON-able."""

    kind: str
    where: str
    text: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "where": self.where, "text": self.text,
                "fields": dict(self.fields)}


@dataclass(frozen=True)
class Fate:
    """How ``count`` frames ended: ``outcome`` is ``transmitted``, ``delivered``
    or ``dropped`` (Linux's side of ``--kernel`` also says ``queued``: left in a
    ring nothing polls); ``where`` the device, socket or program; ``reason`` why."""

    outcome: str
    where: str
    reason: str
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "where": self.where, "reason": self.reason,
                "count": self.count}


@dataclass
class Journey:
    """One packet through the host: its steps, the fate of every frame, and the
    tracepoints fired (``events``) with the kernel's fields."""

    packet_len: int
    ingress: str
    steps: list[Step] = field(default_factory=list)
    fates: list[Fate] = field(default_factory=list)
    events: list[TraceEvent] = field(default_factory=list)
    #: The ingress program's verdict and the packet as it left it (None: no program ran).
    verdict: int | None = None
    data_out: bytes | None = None

    @property
    def frames(self) -> int:
        """Frames whose fate is known (more than one when the packet was cloned)."""
        return sum(f.count for f in self.fates)

    def fate(self) -> str:
        """A one-line summary: each distinct fate, with its count."""
        return "; ".join((f"{f.count} x " if f.count > 1 else "") +
                         f"{f.outcome} at {f.where}: {f.reason}" for f in self.fates) or \
            "no fate recorded"

    def render(self) -> str:
        out = [f"A {self.packet_len}-byte packet arriving on {self.ingress}:"]
        for i, s in enumerate(self.steps, 1):
            lines = s.text.splitlines()
            out.append(f"{i:3d}. {lines[0]}")
            out.extend(f"     {x}" for x in lines[1:])
        out.append("Fate:")
        out.extend(f"  {f.count} frame{'s' if f.count > 1 else ''} {f.outcome} at {f.where}: "
                   f"{f.reason}" for f in self.fates)
        if not self.fates:
            out.append("  (none: the frame is still queued)")
        out.append("Tracepoints Linux fires:")
        out.extend(f"  {e.name}: {e.text}" for e in self.events)
        if not self.events:
            out.append("  (none)")
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {"packet_len": self.packet_len, "ingress": self.ingress,
                "verdict": act_name(self.verdict) if self.verdict is not None else None,
                "steps": [s.to_dict() for s in self.steps],
                "fates": [f.to_dict() for f in self.fates],
                "tracepoints": [{"name": e.name, "fields": e.record._asdict(), "text": e.text}
                                for e in self.events]}


# --------------------------------------------------------------------------
# One program run, traced
# --------------------------------------------------------------------------

@dataclass
class _Call:
    pc: int
    helper: int
    args: tuple[int, ...]
    ret: int | None = None


class _RunTrace:
    """What an instruction trace tells about one run: the last writer of r0 (the
    instruction that decided), the last exit, the redirect helper calls."""

    def __init__(self) -> None:
        self.decider: int | None = None
        self.exit_pc: int | None = None
        self.calls: list[_Call] = []
        self._pending: _Call | None = None

    def __call__(self, pc: int, insn: Instruction, regs: list[int]) -> None:
        if self._pending is not None:
            self._pending.ret = regs[0] & 0xFFFF_FFFF_FFFF_FFFF
            self._pending = None
        code = insn.code
        if code == _CALL:
            if insn.src == 0:  # a helper (src 1 is a bpf-to-bpf call: the callee sets r0)
                self.decider = pc
                if insn.imm in _REDIRECT_HELPERS:
                    self._pending = _Call(pc, insn.imm, tuple(regs[1:4]))
                    self.calls.append(self._pending)
        elif code == _EXIT:
            self.exit_pc = pc
        elif insn.dst == 0 and code & 7 in _R0_WRITERS:
            self.decider = pc

    def finish(self, r0: int) -> None:
        if self._pending is not None:
            self._pending.ret = r0
            self._pending = None


@dataclass
class _Outcome:
    """A redirect helper call in words; ``why`` says why it did not redirect."""

    text: str
    why: str | None
    fields: dict[str, Any]


def _source(spec: ProgramSpec, pc: int | None) -> str | None:
    """The C line of slot ``pc``; compiler-made slots (line 0) take the line before."""
    while pc is not None and pc >= 0:
        src = spec.source_line(pc)
        if src:
            return src
        pc -= 1
    return None


# --------------------------------------------------------------------------
# The explainer
# --------------------------------------------------------------------------

def _pass_spec() -> CollectionSpec:
    from pyxdp.asm.assembler import assemble
    prog = ProgramSpec(name="xdp_pass", section="xdp", insns=assemble("r0 = 2\nexit"),
                       license="GPL")
    return CollectionSpec(programs={"xdp_pass": prog}, maps={}, license="GPL", name="xdp_pass")


def _load_spec(obj: str | Path | CollectionSpec) -> CollectionSpec:
    if isinstance(obj, CollectionSpec):
        return obj
    if str(obj) == BUILTIN_PASS:
        return _pass_spec()
    from pyxdp import samples
    from pyxdp.elf import load_collection_spec
    path = Path(samples.resolve(obj))
    if not path.is_file():
        raise ExplainError(f"no object file {obj}")
    return load_collection_spec(path)


def _entry_program(spec: CollectionSpec, name: str | None) -> str:
    """The program ``-s`` names (by name or section), or the object's first XDP program."""
    skip = (BpfAttachType.BPF_XDP_DEVMAP, BpfAttachType.BPF_XDP_CPUMAP)
    if name is not None:
        for n, p in spec.programs.items():
            if name in (n, p.section):
                return n
        raise ExplainError(f"no program named {name!r} (programs: {', '.join(spec.programs)})")
    for n, p in spec.programs.items():
        if p.expected_attach_type not in skip and p.section.split("/")[0] in ("xdp", "xdp.frags"):
            return n
    raise ExplainError("the object has no XDP program to attach")


class Explainer:
    """A host built from a topology, on which packets are explained one by one
    (maps persist from packet to packet, as on a live host).

    ``obj`` is the object to explain (path or spec), ``program`` its program on
    the ingress device (name or section; default the first XDP program),
    ``maps`` extra map entries in the topology's ``maps`` format.
    """

    def __init__(self, obj: str | Path | CollectionSpec, *, program: str | None = None,
                 topology: Topology | None = None,
                 maps: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                 verify: bool = True) -> None:
        self.topology = topo = topology if topology is not None else default_topology()
        spec = _load_spec(obj)
        self.program = _entry_program(spec, program)
        self.verify = verify
        self.tracer = Tracer()
        # The interpreter, no native loop: each run can be traced instruction by
        # instruction and every tracepoint fires per packet.
        self.host = Host("explain", engine="interp", tracer=self.tracer, native=False)
        self._sub: Subscription | None = None
        self._failed = False  # a failed build leaves pages where they were: no accounting
        self._sockets: list[tuple[str, Any, bool]] = []
        self.collections: list[Collection] = []
        # Per-packet state (reset by explain()); the observers do nothing between packets.
        self._journey: Journey | None = None
        self._egress_drops: dict[int, int] = {}  # devmap-program drops per target, to flush
        self._why: dict[int, str] = {}  # why a program's XDP_ABORTED, for its xdp_exception
        self._wired: list[Step] = []  # frames on a wire, told after the flush that sent them
        self._xsk_hits: dict[int, int] = {}  # frames redirected into each AF_XDP socket
        self._ingress_ifindex = 0
        try:
            self._build(topo, spec, maps or {})
        except BaseException:
            self._failed = True
            self.close()
            raise
        self._stack_mark = self._stack_state()

    # -- building ------------------------------------------------------------------------
    def _build(self, topo: Topology, spec: CollectionSpec,
               extra_maps: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        host = self.host
        for d in topo.devices:
            try:
                if d.kind == "veth":
                    assert d.peer is not None
                    a, b = host.veth(d.name, d.peer, mtu=d.mtu, queues=d.queues)
                    a.gro = d.gro
                else:
                    host.add_device(d.name, rx_queues=d.queues, mtu=d.mtu)
            except (ValueError, PyxdpError) as e:
                raise TopologyError(f"device {d.name}: {e}") from None
        for name, addresses in topo.addresses.items():
            for address in addresses:
                try:
                    host.dev(name).add_address(address)
                except ValueError as e:
                    raise TopologyError(f"device {name}: {e}") from None
        self.coll = host.load(spec, verify=self.verify)
        self.collections.append(self.coll)
        others: dict[str, Collection] = {}
        for att in topo.attachments(self.program):
            if att.obj is None:
                coll = self.coll
            elif att.obj in others:
                coll = others[att.obj]
            else:
                coll = others[att.obj] = host.load(_load_spec(att.obj), verify=self.verify)
                self.collections.append(coll)
            name = att.program or _entry_program(coll.spec, None)
            prog = coll.programs.get(name)
            if prog is None:
                raise TopologyError(f"no program {name!r} to attach to {att.dev} "
                                    f"(programs: {', '.join(coll.programs)})")
            try:
                host.dev(att.dev).attach_xdp(prog, mode=att.mode)
            except PyxdpError as e:
                raise TopologyError(f"attach {name} to {att.dev}: {e}") from None
        for port in topo.udp:
            host.stack.udp_socket(port)
        for source in (topo.maps, extra_maps):
            for mname, entries in source.items():
                self._fill(mname, entries)
        for x in topo.xsk:
            from pyxdp.xsk.datapath import PyxdpXskSocket
            try:
                sock = PyxdpXskSocket(host.dev(x.dev), x.queue, mode=x.mode, rx_size=x.rx_size,
                                      fill_size=max(x.rx_size, 64))
            except PyxdpError as e:
                raise TopologyError(f"AF_XDP socket on {x.dev}/{x.queue}: {e}") from None
            sock.fill(x.fill)
            self._sockets.append((f"AF_XDP socket on {x.dev} queue {x.queue}", sock, x.consume))
            if x.map is not None:
                m = self.coll.maps.get(x.map)
                if m is None:
                    raise TopologyError(f"no XSKMAP {x.map!r} in the object")
                m[x.key] = sock.fd
        for coll in self.collections:
            for p in coll.programs.values():
                handle = p.handle
                if isinstance(handle, XdpProg):
                    handle.watcher = self._watch
        for dev in host.devices.values():
            if dev.kind == "nic" and dev.name != "lo":
                dev.wire.append(self._wire)
        host.stack.on_receive(self._stack)
        self._sub = self.tracer.subscribe(list(JOURNEY_EVENTS), self._event)

    def _prog_id(self, name: str) -> int | None:
        for coll in self.collections:
            p = coll.programs.get(name)
            if p is not None:
                return int(p.handle.id)  # type: ignore[attr-defined]
        return None

    def _ifindex(self, name: str) -> int | None:
        try:
            return self.host.dev(name).ifindex
        except PyxdpError:
            return None

    def _fill(self, mname: str, entries: Sequence[Mapping[str, Any]]) -> None:
        m = self.coll.maps.get(mname)
        if m is None:
            raise TopologyError(f"the object has no map {mname!r} (maps: "
                                f"{', '.join(self.coll.maps)})")
        for e in entries:
            if not isinstance(e, Mapping) or "key" not in e or "value" not in e:
                raise TopologyError(f"map {mname!r}: each entry needs 'key' and 'value'")
            try:
                m.update(resolve_value(e["key"], self._ifindex, self._prog_id),
                         resolve_value(e["value"], self._ifindex, self._prog_id))
            except (PyxdpError, ValueError, TypeError, KeyError) as err:
                raise TopologyError(f"map {mname!r}[{e['key']!r}]: {err}") from None

    # -- running -------------------------------------------------------------------------
    def explain(self, packet: bytes) -> Journey:
        """Receive ``packet`` on the ingress device and queue, run the host until
        idle, and tell what happened."""
        if not packet:
            raise ExplainError("an empty packet cannot be received")
        if len(packet) > 3500:
            raise ExplainError(f"a {len(packet)}-byte packet needs multi-buffer XDP, which "
                               f"pyxdp devices do not do (at most 3500 bytes)")
        ing = self.topology.ingress
        dev = self.host.dev(ing.dev)
        if ing.queue >= len(dev.rx):
            raise TopologyError(f"{dev.name} has no rx queue {ing.queue}")
        j = self._journey = Journey(len(packet), f"{dev.name} queue {ing.queue}")
        self._egress_drops.clear()
        self._why.clear()
        self._wired.clear()
        self._xsk_hits.clear()
        self._ingress_ifindex = dev.ifindex
        self._stack_mark = self._stack_state()
        xsk_before = [self._xsk_state(s) for _, s, _ in self._sockets]
        prog = dev.xdp_prog or dev.xdp_generic
        j.steps.append(Step("rx", j.ingress, (
            f"{dev.name} ({dev.kind}, ifindex {dev.ifindex}) receives {len(packet)} bytes on rx "
            f"queue {ing.queue}" + (f"; XDP program {prog.spec.name} attached in "
                                     f"{'native' if dev.xdp_prog else 'generic'} mode"
                                     if prog is not None else "; no XDP program attached")),
            {"ifindex": dev.ifindex, "queue": ing.queue, "len": len(packet)}))
        taken = dev.receive([packet], ing.queue)
        if not taken:
            j.fates.append(Fate("dropped", dev.name, "the rx ring or its page pool is full "
                                                     "(rx_dropped)"))
        self.host.run()
        self._flush_wired(j)
        for (name, sock, consume), before in zip(self._sockets, xsk_before, strict=True):
            self._xsk_after(j, name, sock, before, consume)
        self._journey = None
        return j

    # -- observers -----------------------------------------------------------------------
    def _name(self, ifindex: int) -> str:
        d = self.host.devices.get(ifindex)
        return d.name if d is not None else f"ifindex {ifindex}"

    def _role(self, prog: XdpProg, xdp: XdpBuff, ctx: RunContext) -> tuple[str, str]:
        """Where a run happens and as what: (where, how)."""
        at = prog.spec.expected_attach_type
        if at == BpfAttachType.BPF_XDP_DEVMAP:
            return (self._name(xdp.egress_ifindex),
                    f"devmap program on the way out of {self._name(xdp.egress_ifindex)} "
                    f"(egress_ifindex {xdp.egress_ifindex}, ingress {self._name(xdp.rxq.ifindex)})")
        if at == BpfAttachType.BPF_XDP_CPUMAP:
            return (f"cpumap kthread on CPU {ctx.cpu}",
                    f"cpumap program in the kthread of CPU {ctx.cpu}")
        dev = self.host.devices.get(xdp.rxq.ifindex)
        where = f"{self._name(xdp.rxq.ifindex)} queue {xdp.rxq.queue_index}"
        if dev is not None and dev.xdp_prog is prog:
            return where, "native mode"
        if dev is not None and dev.xdp_generic is prog:
            return where, "generic (skb) mode"
        return where, "tail call"

    def _watch(self, prog: XdpProg, xdp: XdpBuff, ctx: RunContext) -> int:
        rt = _RunTrace()
        try:
            act = prog.run(xdp, ctx, trace=rt)
        except ProgramFault as e:
            if self._journey is not None:
                self._ran(prog, xdp, ctx, rt, 0, e)
            raise
        rt.finish(act)
        if self._journey is not None:
            self._ran(prog, xdp, ctx, rt, act, None)
        return act

    def _ran(self, prog: XdpProg, xdp: XdpBuff, ctx: RunContext, rt: _RunTrace, act: int,
             fault: ProgramFault | None) -> None:
        j = self._journey
        assert j is not None
        where, how = self._role(prog, xdp, ctx)
        spec = prog.spec
        fields: dict[str, Any] = {"program": spec.name, "section": spec.section, "mode": how,
                                  "prog_id": prog.id, "verdict": act_name(act)}
        if fault is not None:
            src = fault.source or _source(spec, fault.pc)
            text = (f"{where}: {spec.name} ({spec.section}, {how}) faulted: the run is aborted "
                    f"(XDP_ABORTED)\n{fault}")
            fields.update(fault=str(fault), pc=fault.pc, source=src)
            self._why[prog.id] = f"the program faulted: {fault}"
        else:
            pc = rt.decider if rt.decider is not None else rt.exit_pc
            src = _source(spec, pc)
            text = f"{where}: {spec.name} ({spec.section}, {how}) returns {act_name(act)}"
            insn = format_insn(spec.insns, pc) if pc is not None else None
            if insn is not None:
                # Line info is the compiler's: a constant return is often scheduled
                # into the line before it, so the exit's own line is shown too.
                text += f"\ndecided by pc {pc}: {insn}" + (f"  ({src})" if src else "")
            ret = _source(spec, rt.exit_pc)
            if ret and ret != src:
                text += f"\nreturns at {ret}"
            fields.update(pc=pc, insn=insn, source=src, exit_source=ret)
        j.steps.append(Step("run", where, text, fields))
        if j.verdict is None:
            j.verdict = act
            j.data_out = bytes(xdp.frame[xdp.data:xdp.data_end])
        for call in rt.calls:
            j.steps.append(self._helper_step(prog, xdp, call))
        if fault is not None:
            return
        egress = spec.expected_attach_type == BpfAttachType.BPF_XDP_DEVMAP
        if egress and act != XdpAction.XDP_PASS:
            self._egress_drops[xdp.egress_ifindex] = \
                self._egress_drops.get(xdp.egress_ifindex, 0) + 1
        if act == XdpAction.XDP_DROP:
            j.fates.append(Fate("dropped", where, f"XDP_DROP from {spec.name}"
                                + (f" ({src})" if src else "")))
        elif act == XdpAction.XDP_ABORTED:
            why = next((c.why for c in map(self._call_outcome, rt.calls) if c.why), None)
            self._why[prog.id] = why or ("the program returned XDP_ABORTED"
                                         + (f" ({src})" if src else ""))
        elif act == XdpAction.XDP_TX and how == "generic (skb) mode":
            j.steps.append(Step("tx", where, f"XDP_TX in generic mode: generic_xdp_tx sends the "
                                             f"skb straight out of {where.split()[0]} (no bulk "
                                             f"queue, no xdp_bulk_tx)"))
        elif act == XdpAction.XDP_TX and not egress:
            j.steps.append(Step("tx", where, f"XDP_TX: the frame goes into {where.split()[0]}'s "
                                             f"XDP_TX bulk queue (16), sent at the poll's end "
                                             f"with ndo_xdp_xmit"))
        elif act not in _ACT:
            self._why[prog.id] = ("not an XDP action: bpf_warn_invalid_xdp_action, then "
                                  "dropped as XDP_ABORTED" + (f" ({src})" if src else ""))

    def _call_outcome(self, call: _Call) -> _Outcome:
        ret = call.ret if call.ret is not None else 0
        name = helper_name(call.helper) or f"helper {call.helper}"
        r = act_name(ret & 0xFFFF_FFFF)
        if call.helper == BpfFuncId.BPF_FUNC_redirect_map:
            addr, key, flags = call.args[0], call.args[1] & 0xFFFF_FFFF, call.args[2]
            m = map_by_addr(addr)
            mname = m.name if m is not None else f"map at {addr:#x}"
            mtype = BpfMapType(m.map_type).name if m is not None else "?"
            fields: dict[str, Any] = {"helper": name, "map": mname, "map_type": mtype,
                                      "key": key, "flags": flags, "returned": r}
            if m is not None:
                fields["map_id"] = getattr(m, "id", 0)
            head = f"{name}(&{mname}, {key}, {flags:#x}) returned {r}"
            if flags & BPF_F_BROADCAST:
                excl = " but the ingress device (BPF_F_EXCLUDE_INGRESS)" \
                    if flags & BPF_F_EXCLUDE_INGRESS else ""
                return _Outcome(f"{head}: broadcast to every device in {mname}{excl}; "
                                f"the key is not looked up" + self._broadcast(m, flags),
                                None, fields)
            entry = self._entry(m, key)
            fields["entry"] = entry
            if ret == XdpAction.XDP_REDIRECT:
                return _Outcome(f"{head}: {mname}[{key}] = {entry}", None, fields)
            why = (f"{mname}[{key}] is empty ({mtype}, {name} found no entry and returned its "
                   f"flags' low bits, {ret & 3} = {act_name(ret & 3)})")
            return _Outcome(f"{head}: {why}", why, fields)
        if call.helper == BpfFuncId.BPF_FUNC_redirect:
            ifx, flags = call.args[0] & 0xFFFF_FFFF, call.args[1]
            fields = {"helper": name, "ifindex": ifx, "flags": flags, "returned": r}
            if ret == XdpAction.XDP_REDIRECT:
                return _Outcome(f"{name}({ifx}, {flags:#x}) returned {r}: to "
                                     f"{self._name(ifx)}", None, fields)
            why = f"{name}({ifx}, {flags:#x}) refused its flags and returned {r}"
            return _Outcome(why, why, fields)
        flags = call.args[1]
        fields = {"helper": name, "flags": flags, "returned": r}
        if ret == XdpAction.XDP_REDIRECT:
            return _Outcome(f"{name}(ctx, {flags:#x}) returned {r}: to the AF_XDP socket "
                                 f"bound to the packet's rx queue", None, fields)
        why = (f"{name} found no AF_XDP socket on the packet's rx queue and returned its "
               f"flags' action, {r}")
        return _Outcome(why, why if ret == XdpAction.XDP_ABORTED else None, fields)

    def _broadcast(self, m: Any, flags: int) -> str:
        """What dev_map_enqueue_multi will do with each entry (is_valid_dst)."""
        if m is None or m.map_type not in _DEVMAPS:
            return ""
        ingress = self._ingress_ifindex
        out = []
        for raw in m.raw_keys():
            key = int.from_bytes(raw, "little")
            val = m.lookup(raw)
            if val is None:
                continue
            ifx = int.from_bytes(val[:4], "little")
            dev = self.host.devices.get(ifx)
            if dev is None:
                fate = "no such device: skipped"
            elif flags & BPF_F_EXCLUDE_INGRESS and ifx == ingress:
                fate = "the ingress device: skipped"
            elif not dev.xdp_features & 4:  # NETDEV_XDP_ACT_NDO_XMIT
                fate = "cannot take XDP frames (no NETDEV_XDP_ACT_NDO_XMIT): skipped"
            elif not dev.up:
                fate = "down: skipped"
            else:
                fate = "a copy goes there"
            out.append(f"\n  {m.name}[{key}] = {self._name(ifx)}: {fate}")
        return "".join(out) if out else f"\n  {m.name} is empty: the frame is freed"

    def _helper_step(self, prog: XdpProg, xdp: XdpBuff, call: _Call) -> Step:
        out = self._call_outcome(call)
        src = _source(prog.spec, call.pc)
        return Step("helper", f"{prog.spec.name}", out.text + (f"\ncalled at {src}" if src else ""),
                    {**out.fields, "pc": call.pc, "source": src})

    def _entry(self, m: Any, key: int) -> str:
        """A redirect map's entry at ``key`` in words (``"empty"`` when there is none)."""
        if m is None:
            return "unknown"
        if m.map_type == BpfMapType.BPF_MAP_TYPE_XSKMAP:
            sock = m.socket_at(key)
            if sock is None:
                return "empty"
            dev = getattr(sock, "dev", None)
            return (f"AF_XDP socket on {getattr(dev, 'name', '?')} queue "
                    f"{getattr(sock, 'queue_id', '?')}")
        try:
            raw = m.lookup(key.to_bytes(m.key_size, "little"))
        except (PyxdpError, OverflowError):
            return "empty"
        if raw is None:
            return "empty"
        first = int.from_bytes(raw[:4], "little")
        prog = int.from_bytes(raw[4:8], "little") if len(raw) >= 8 else 0
        if m.map_type == BpfMapType.BPF_MAP_TYPE_CPUMAP:
            text = f"CPU {key} (qsize {first})"
        else:
            text = f"{self._name(first)} (ifindex {first})"
        if prog:
            p = self.host.program_by_id(prog)
            text += f" with program {p.spec.name if p is not None else prog} (id {prog})"
        return text

    # -- tracepoints ---------------------------------------------------------------------
    def _event(self, ev: TraceEvent) -> None:
        j = self._journey
        if j is None:
            return
        j.events.append(ev)
        r: Any = ev.record
        f = r._asdict()
        name = ev.name
        if name == "xdp_exception":
            where = self._name(r.ifindex)
            why = self._why.pop(r.prog_id, None)
            if why is None:
                why = {int(XdpAction.XDP_TX): "XDP_TX could not convert the frame "
                                              "(no headroom for the xdp_frame) or send it",
                       int(XdpAction.XDP_REDIRECT): "a devmap program may only return "
                                                    "XDP_PASS or XDP_DROP"}.get(
                    r.act, f"{act_name(r.act)} (xdp_exception)")
            j.steps.append(Step("event", where, f"xdp_exception on {where}: {act_name(r.act)} "
                                                f"- the frame is dropped", f))
            j.fates.append(Fate("dropped", where, f"{act_name(r.act)}: {why}"))
        elif name == "xdp_redirect":
            tgt = self._target(r.map_id, r.to_ifindex, r.map_index)
            sock = self._xsk_target(r.map_id, r.map_index) if not r.to_ifindex else None
            if sock is not None:
                self._xsk_hits[id(sock)] = self._xsk_hits.get(id(sock), 0) + 1
            j.steps.append(Step("event", self._name(r.ifindex),
                                f"xdp_do_redirect to {tgt}: " + self._queued(r.map_id), f))
        elif name == "xdp_redirect_err":
            tgt = self._target(r.map_id, r.to_ifindex, r.map_index)
            why = self._redirect_err(r.err, r.to_ifindex, r.map_id)
            j.steps.append(Step("event", self._name(r.ifindex),
                                f"xdp_do_redirect to {tgt} failed with {_errname(r.err)}: "
                                f"{why}", f))
            j.fates.append(Fate("dropped", self._name(r.ifindex),
                                f"redirect to {tgt} failed, {_errname(r.err)}: {why}"))
        elif name == "xdp_devmap_xmit":
            to = self._name(r.to_ifindex)
            text = (f"xdp_do_flush: bq_xmit_all hands {r.sent + r.drops} frame(s) to {to}'s "
                    f"ndo_xdp_xmit: sent {r.sent}, drops {r.drops}")
            if r.err:
                text += f", err {_errname(r.err)}"
            j.steps.append(Step("event", to, text, f))
            prog_drops = min(self._egress_drops.pop(r.to_ifindex, 0), r.drops)
            lost = r.drops - prog_drops
            if lost:
                j.fates.append(Fate("dropped", to, self._xmit_drop(r.to_ifindex, r.err), lost))
            self._sent_on(j, r.to_ifindex, r.sent)
        elif name == "xdp_bulk_tx":
            dev = self._name(r.ifindex)
            text = f"XDP_TX flush on {dev}: sent {r.sent}, drops {r.drops}"
            if r.err:
                text += f", err {_errname(r.err)}"
            j.steps.append(Step("event", dev, text, f))
            if r.drops:
                j.fates.append(Fate("dropped", dev, "XDP_TX: " + self._xmit_drop(r.ifindex, r.err),
                                    r.drops))
            self._sent_on(j, r.ifindex, r.sent)
        elif name == "xdp_cpumap_enqueue":
            m = map_by_id(r.map_id)
            mname = m.name if m is not None else f"map {r.map_id}"
            j.steps.append(Step("event", f"CPU {r.to_cpu}", (
                f"xdp_do_flush: {r.processed} frame(s) of {mname} bulk-enqueued from CPU {r.cpu} "
                f"into the ptr_ring of CPU {r.to_cpu}'s kthread, drops {r.drops}"), f))
            if r.drops:
                j.fates.append(Fate("dropped", f"{mname} CPU {r.to_cpu}",
                                    "the entry's ptr_ring (qsize) is full", r.drops))
        elif name == "xdp_cpumap_kthread":
            j.steps.append(Step("event", f"CPU {r.cpu}", (
                f"cpumap kthread on CPU {r.cpu}: processed {r.processed}, XDP_PASS {r.xdp_pass}, "
                f"XDP_DROP {r.xdp_drop}, XDP_REDIRECT {r.xdp_redirect}, drops {r.drops}; "
                f"passed frames become skbs for the stack"), f))
            if r.drops:
                j.fates.append(Fate("dropped", f"CPU {r.cpu} kthread",
                                    "no skb could be built", r.drops))

    def _queued(self, map_id: int) -> str:
        m = map_by_id(map_id)
        t = m.map_type if m is not None else None
        if t in _DEVMAPS or map_id in (0, 0x7FFF_FFFF):
            return "bq_enqueue into the target's devmap bulk queue (16), flushed at the poll's end"
        if t == BpfMapType.BPF_MAP_TYPE_CPUMAP:
            return "into the entry's bulk queue (8), flushed to its ptr_ring at the poll's end"
        if t == BpfMapType.BPF_MAP_TYPE_XSKMAP:
            return "xsk_rcv: copied into the socket's rx ring (descriptor visible at the flush)"
        return "queued"

    def _target(self, map_id: int, to_ifindex: int, index: int) -> str:
        if map_id in (0, 0x7FFF_FFFF):
            return f"{self._name(to_ifindex)} (bpf_redirect)" if to_ifindex else \
                "the AF_XDP socket of the rx queue"
        m = map_by_id(map_id)
        if m is None:
            return f"map {map_id}[{index}]"
        if m.map_type in _DEVMAPS:
            dev = self._name(to_ifindex) if to_ifindex else "every device (broadcast)"
            return f"{dev} via {m.name}[{index}]"
        if m.map_type == BpfMapType.BPF_MAP_TYPE_CPUMAP:
            return f"CPU {index} via {m.name}[{index}]"
        return f"{m.name}[{index}] ({self._entry(m, index)})"

    def _redirect_err(self, err: int, to_ifindex: int, map_id: int) -> str:
        e = -err
        dev = self.host.devices.get(to_ifindex)
        if e == errno.EOPNOTSUPP:
            if isinstance(dev, Veth) and dev.peer is not None:
                return (f"{dev.name} does not advertise NETDEV_XDP_ACT_NDO_XMIT: its peer "
                        f"{dev.peer.name} has no XDP program and GRO is off, so it has no NAPI "
                        f"to take XDP frames (veth_set_xdp_features)")
            return "the target device cannot transmit XDP frames (no NETDEV_XDP_ACT_NDO_XMIT)"
        if e == errno.ENETDOWN:
            return f"{self._name(to_ifindex)} is down"
        if e == errno.EMSGSIZE:
            mtu = dev.mtu if dev is not None else 0
            return (f"the frame is longer than {self._name(to_ifindex)}'s MTU {mtu} + "
                    f"{_FWD_OVERHEAD} (xdp_ok_fwd_dev)")
        if e == errno.EBADRQC:
            return "XDP_REDIRECT without a redirect helper call before it"
        if e == errno.EOVERFLOW:
            return "no headroom to turn the buffer into an xdp_frame"
        if e == errno.ENOBUFS:
            return "the AF_XDP socket's rx ring is full (rx_queue_full)"
        if e == errno.ENOMEM:
            return "the AF_XDP socket's fill ring is empty: no buffer to receive into"
        if e == errno.ENOSPC:
            return "the frame does not fit in an AF_XDP UMEM chunk"
        if e == errno.ENXIO:
            return "the AF_XDP socket is not bound"
        if e == errno.EINVAL:
            m = map_by_id(map_id)
            if m is not None and m.map_type == BpfMapType.BPF_MAP_TYPE_XSKMAP:
                return "the AF_XDP socket is bound to another device or queue"
            if m is not None and m.map_type == BpfMapType.BPF_MAP_TYPE_CPUMAP:
                return "the cpumap entry is empty"
            return "the target does not exist (no such device, or the entry went away)"
        return errno.errorcode.get(e, str(err))

    def _xmit_drop(self, ifindex: int, err: int) -> str:
        dev = self.host.devices.get(ifindex)
        if -err == errno.ENXIO and isinstance(dev, Veth) and dev.peer is not None:
            return (f"veth_xdp_xmit refused them (-ENXIO): the peer {dev.peer.name} has no NAPI "
                    f"(no XDP program, GRO off), so it has no xdp_ring")
        if -err == errno.ENETDOWN:
            return f"{self._name(ifindex)} is down (-ENETDOWN)"
        if err:
            return f"ndo_xdp_xmit failed with {_errname(err)}"
        if isinstance(dev, Veth) and dev.peer is not None:
            return (f"veth_xdp_xmit stopped: longer than {dev.peer.name}'s MTU {dev.peer.mtu} "
                    f"+ {_FWD_OVERHEAD}, or its xdp_ring (256) is full")
        return "the device's tx ring is full"

    def _flush_wired(self, j: Journey) -> None:
        j.steps.extend(self._wired)
        self._wired.clear()

    def _sent_on(self, j: Journey, ifindex: int, sent: int) -> None:
        self._flush_wired(j)
        dev = self.host.devices.get(ifindex)
        if sent and isinstance(dev, Veth) and dev.peer is not None:
            j.steps.append(Step("xmit", dev.name, (
                f"{sent} frame(s) into {dev.peer.name}'s xdp_ring; {dev.peer.name}'s NAPI "
                f"poll runs next"), {"to": dev.peer.name, "frames": sent}))

    # -- frames leaving, reaching the stack, reaching AF_XDP -----------------------------
    def _wire(self, dev: NetDevice, batch: SkbBatch) -> None:
        j = self._journey
        if j is None:
            return
        n = len(batch)
        self._wired.append(Step("xmit", dev.name, f"{dev.name} transmits {n} frame(s) to the wire "
                                              f"({', '.join(str(x) for x in batch.length.tolist())}"
                                              f" bytes)",
                            {"frames": [p.hex() for p in batch.packets()]}))
        j.fates.append(Fate("transmitted", dev.name, "sent on the wire", n))

    def _stack_state(self) -> tuple[Any, ...]:
        st = self.host.stack
        return st.drops.sum(axis=0), st.snmp.sum(axis=0), st.sock_cnt[:, :, 0].sum(axis=0)

    def _stack(self, batch: SkbBatch) -> None:
        j = self._journey
        now = self._stack_state()
        drops, snmp, socks = (a - b for a, b in zip(now, self._stack_mark, strict=True))
        self._stack_mark = now
        if j is None:
            return
        devs = sorted({self._name(int(i)) for i in batch.ifindex.tolist()})
        where = ", ".join(devs)
        moved = {SNMP_NAMES[i]: int(snmp[i]) for i in np.flatnonzero(snmp).tolist()}
        reasons = {SkbDropReason(int(r)).name: int(drops[r])
                   for r in np.flatnonzero(drops).tolist()}
        ports = {sink.port: int(socks[sink.row]) for sink in self.host.stack.sockets.values()
                 if socks[sink.row]}
        parts = []
        for port, c in ports.items():
            parts.append(f"{c} delivered to the UDP socket on port {port}")
            j.fates.append(Fate("delivered", f"{where} stack", f"UDP socket on port {port}", c))
        for rname, c in reasons.items():
            parts.append(f"{c} freed by kfree_skb_reason(SKB_DROP_REASON_{rname})")
            j.fates.append(Fate("dropped", f"{where} stack",
                                f"SKB_DROP_REASON_{rname}: {DROP_REASON_TEXT.get(rname, rname)}",
                                c))
        rest = len(batch) - sum(ports.values()) - sum(reasons.values())
        if rest > 0:
            what = ", ".join(f"{k} +{v}" for k, v in moved.items()) or "no IP counter moved"
            parts.append(f"{rest} taken by the stack ({what})")
            j.fates.append(Fate("delivered", f"{where} stack", f"accepted by the stack ({what})",
                                rest))
        j.steps.append(Step("stack", where, (
            f"{len(batch)} skb(s) passed to the stack of {where} (netif_receive_skb_list): "
            + "; ".join(parts)), {"snmp": moved, "drop_reasons": reasons,
                                  "udp_ports": {str(k): v for k, v in ports.items()}}))

    @staticmethod
    def _xsk_state(sock: Any) -> tuple[int, ...]:
        s = sock.statistics()
        return (s.rx_dropped, s.rx_ring_full, s.rx_fill_ring_empty_descs)

    def _xsk_target(self, map_id: int, index: int) -> Any:
        """The AF_XDP socket an ``xdp_redirect`` event went to (None: not a socket)."""
        if map_id in (0, 0x7FFF_FFFF):  # bpf_redirect_xsk: the ingress queue's socket
            ing = self.topology.ingress
            return self.host.xsk_lookup(self._ingress_ifindex, ing.queue)
        m = map_by_id(map_id)
        if m is not None and m.map_type == BpfMapType.BPF_MAP_TYPE_XSKMAP:
            return m.socket_at(index)  # type: ignore[attr-defined]
        return None

    def _xsk_after(self, j: Journey, name: str, sock: Any, before: tuple[int, ...],
                   consume: bool) -> None:
        got = self._xsk_hits.pop(id(sock), 0)
        if got:
            left = "" if consume else "; the application leaves them there"
            j.steps.append(Step("xsk", name, f"{got} descriptor(s) reach the rx ring of the "
                                             f"{name}{left}", {"frames": got}))
            j.fates.append(Fate("delivered", name, "in the socket's rx ring", got))
        d = [a - b for a, b in zip(self._xsk_state(sock), before, strict=True)]
        if any(d):
            j.steps.append(Step("xsk", name, (
                f"XDP_STATISTICS of the {name}: rx_dropped +{d[0]}, rx_ring_full +{d[1]}, "
                f"rx_fill_ring_empty_descs +{d[2]}"),
                {"rx_dropped": d[0], "rx_ring_full": d[1], "rx_fill_ring_empty_descs": d[2]}))
        while consume:
            batch = sock.recv(64)
            if not len(batch):
                break
            sock.release(batch, refill=True)

    def macs(self) -> dict[str, bytes]:
        """Each device's MAC address by name (what ``--kernel`` gives Linux's devices)."""
        return {d.name: d.mac for d in self.host.devices.values() if d.name != "lo"}

    def namer(self) -> Callable[[str, int], int | str]:
        """Event field values by name, as the veth lab reports them: ifindexes as
        device names, program and map ids as names (0 and unknown ids stay)."""
        devs = {d.ifindex: d.name for d in self.host.devices.values()}
        progs: dict[int, str] = {}
        maps: dict[int, str] = {}
        for coll in self.collections:
            progs.update((int(p.handle.id), n)  # type: ignore[attr-defined]
                         for n, p in coll.programs.items())
            maps.update((int(m.handle.id), n)  # type: ignore[attr-defined]
                        for n, m in coll.maps.items())

        def name(key: str, value: int) -> int | str:
            table = devs if key.endswith("ifindex") else progs if key == "prog_id" else \
                maps if key == "map_id" else {}
            return table.get(value, value)
        return name

    # -- teardown ------------------------------------------------------------------------
    def close(self) -> None:
        if self._sub is not None:
            self._sub.close()
            self._sub = None
        for _, sock, _ in self._sockets:
            sock.close()
        self._sockets = []
        self.host.close(check=not self._failed)

    def __enter__(self) -> Explainer:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._failed = self._failed or et is not None  # keep the first error in sight
        self.close()


def _errname(err: int) -> str:
    return f"-{errno.errorcode.get(-err, str(-err))}" if err < 0 else str(err)


def explain(obj: str | Path | CollectionSpec, packet: bytes, *, program: str | None = None,
            topology: Topology | None = None,
            maps: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
            verify: bool = True) -> Journey:
    """The journey of ``packet`` through ``obj``'s ``program`` on ``topology`` (default:
    eth0 of a two-NIC host with a veth pair); ``verify=False`` runs a program pyxdp's
    verifier (as Linux's) would refuse."""
    with Explainer(obj, program=program, topology=topology, maps=maps, verify=verify) as ex:
        return ex.explain(packet)

