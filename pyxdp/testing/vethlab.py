"""A veth lab: XDP scenarios described once, run on real veth pairs in Linux.

This models a small L2 test bench, the way XDP is usually exercised on one
machine: veth pairs inside a private network namespace, XDP programs from the
sample objects attached natively to some of the devices, maps filled from user
space, frames injected by the peer of a device, and what comes out observed
at every device's network stack, in the maps and in the ``xdp:*``
tracepoints. A :class:`Scenario` is pure data (frozen dataclasses, no kernel
call at import), so the same description drives two backends:

* :func:`run_kernel` (here): the Linux datapath (``drivers/net/veth.c`` in
  native XDP mode, ``kernel/bpf/devmap.c``, ``kernel/bpf/cpumap.c``) gives
  the reference :class:`LabResult`;
* pyxdp's userspace datapath builds the same topology from the same
  :class:`Scenario` and must produce an equal :class:`LabResult`.

Conventions of a scenario (both backends must follow them):

* ``traffic`` entries ``(rx_dev, frame)`` are *received* by ``rx_dev``: the
  frame is transmitted, one ``send()`` per frame and in order, by the veth
  peer of ``rx_dev``. On this kernel every such frame is then its own NAPI
  poll of ``rx_dev`` (the poll runs in the sender's softirq before
  ``send()`` returns), so each frame ends with its own ``xdp_do_flush``: a
  devmap/XDP_TX bulk holds one frame.
* **The veth peer rule.** A veth (say veth3) receives ``ndo_xdp_xmit``
  frames (XDP_TX of its peer veth2, a devmap redirect to veth2) only while
  it has NAPI, i.e. an XDP program of its own. Without one (measured):
  veth2's XDP_TX is refused at flush (``xdp_bulk_tx`` sent 0, drops 1, err
  -ENXIO) and a devmap redirect to veth2 fails at once
  (``xdp_redirect_err`` -EOPNOTSUPP: veth2 does not advertise
  ``NETDEV_XDP_ACT_NDO_XMIT`` then). GRO on veth3 instead of a program lets
  redirected frames through but strands XDP_TX frames in veth3's ring
  (``veth_xdp_flush`` only kicks a peer that has an XDP program), so the
  lab does not use it. Hence, unless a scenario sets
  ``pass_unattached=False``, *every device of the lab without a program of
  its own gets the trivial XDP_PASS program* (:data:`PASS_OBJ`, program
  ``xdp_pass``) in native mode. :attr:`Scenario.attachments` lists the
  resulting topology, the one both backends build.
* Frames observed at a device (:attr:`LabResult.rx`) are what reached its
  network stack, in arrival order, as on the wire: the kernel captures them
  with an ``AF_PACKET`` socket bound to the device (incoming packet types
  only, not ``PACKET_OUTGOING``) and puts back the VLAN tag the stack moved
  to the skb (``PACKET_AUXDATA``), as tcpdump does. XDP metadata is not part
  of a frame. When :attr:`Scenario.ordered` is False (cpumap: several
  kthreads deliver concurrently), only the multiset is meaningful.
* Map contents (:attr:`LabResult.maps`): raw key -> raw value; per-CPU
  values summed over CPUs word by word (u64 words when the value size is a
  multiple of 8, else u32 words, wrapping like the counters do);
  :attr:`LabResult.percpu` keeps the per-CPU values. Array slots whose value
  is all zero are left out (an array slot always exists; zero is where it
  starts). Devmap/cpumap values hold ifindexes and program ids, which differ
  between backends: scenarios do not dump them.
* Tracepoints (:attr:`LabResult.trace`): per event name, the number of
  events and the sums of their count fields (``sent``, ``drops``,
  ``processed``, ``xdp_pass``, ``xdp_drop``, ``xdp_redirect``) and the
  number of events with ``err != 0`` (``errors``); :attr:`LabResult.events` has every
  event with ifindexes replaced by device names, program ids by
  ``"collection:program"`` and map ids by ``"collection:map"``.
* :func:`lab_differences` compares two results of a scenario the way the
  differential test should (order only where :attr:`Scenario.ordered`,
  cpumap kthread batching left out).
* The sending thread is pinned to CPU :data:`SENDER_CPU`, so per-CPU
  values and the producer ``cpu`` of ``xdp_cpumap_enqueue`` are
  deterministic.
* devmap and cpumap values with a program take ``{"ifindex"|"qsize": ..,
  "bpf_prog": {"fd": prog_fd(program)}}`` through the BTF-typed ``Map`` API
  (``struct bpf_devmap_val`` / ``struct bpf_cpumap_val``): :func:`prog_fd`
  gives the kernel program's fd, or on the userspace backend the handle's
  ``fd`` if it has one, else its program id.

The kernel facts each ready scenario shows are in its builder's docstring
and are checked by ``tests/kernel/test_vethlab.py``.

For one's own program, :func:`compare` is the differential test in one call
(docs/TESTING.md)::

    lab = Scenario("mine", pairs=(("veth0", "veth1"),),
                   attach=(Attach("veth0", "/path/to/prog.o", "xdp_prog"),),
                   traffic=tuple(("veth0", f) for f in frames), maps=("counters",))
    compare(lab).assert_same()   # Linux (root) and pyxdp: frames, maps, tracepoints
"""

from __future__ import annotations

import itertools
import json
import os
import re
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pyxdp import samples
from pyxdp.asm.assembler import assemble
from pyxdp.collection import Collection, Map, Program
from pyxdp.errors import PyxdpError
from pyxdp.kernel.af_packet_capture import PacketCapture
from pyxdp.net import packets as pk
from pyxdp.net.stats import LinkStats
from pyxdp.spec import CollectionSpec, MapSpec, ProgramSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.uapi.if_packet import PACKET_QDISC_BYPASS, SOL_PACKET
from pyxdp.uapi.xdp_trace import TraceEvent

if TYPE_CHECKING:
    from pyxdp.kernel.tracefs import TraceInstance

__all__ = [
    "LAB_EVENTS",
    "LO_IFINDEX",
    "MISSING_IFINDEX",
    "OVERRUN_ATTEMPTS",
    "PASS_OBJ",
    "SAMPLES",
    "SCENARIOS",
    "SENDER_CPU",
    "Attach",
    "KernelLab",
    "LabComparison",
    "LabEvent",
    "LabResult",
    "LinkSpec",
    "LinkStats",
    "Overrun",
    "Scenario",
    "Settled",
    "SetupFn",
    "SkbDrop",
    "TraceCount",
    "adjust_meta_pass",
    "compare",
    "cpumap_prog",
    "cpumap_prog_threaded",
    "devmap_broadcast",
    "devmap_broadcast_egress_prog",
    "devmap_broadcast_exclude_ingress",
    "devmap_egress_prog",
    "devmap_missing_aborted",
    "devmap_redirect",
    "devmap_redirect_mtu",
    "devmap_redirect_no_peer_prog",
    "dump_map",
    "lab_differences",
    "lab_mac",
    "load_spec",
    "mixed_frames",
    "prog_fd",
    "redirect_ifindex_missing",
    "redirect_ifindex_missing_generic",
    "redirect_ifindex_threaded",
    "redirect_to_lo",
    "redirect_to_lo_generic",
    "redirect_to_lo_up_generic",
    "run_kernel",
    "run_pyxdp",
    "summarize_trace",
    "swap_macs",
    "veth_frames_broadcast_egress_prog",
    "xdp1_drop",
    "xdp2_tx",
    "xdp2_tx_generic",
    "xdp2_tx_no_peer_prog",
]

#: Where the sample objects live; a relative ``Attach.obj`` is taken from here.
SAMPLES: Final = samples.DIR
#: ``Attach.obj`` of the built-in program returning XDP_PASS (program ``xdp_pass``).
PASS_OBJ: Final = "builtin:xdp_pass"
#: The CPU the sending thread runs on.
SENDER_CPU: Final = 0
#: The tracepoints a lab records.
LAB_EVENTS: Final = ("xdp_exception", "xdp_bulk_tx", "xdp_redirect", "xdp_redirect_err",
                     "xdp_cpumap_kthread", "xdp_cpumap_enqueue", "xdp_devmap_xmit")
_COUNT_FIELDS: Final = ("sent", "drops", "processed", "xdp_pass", "xdp_drop", "xdp_redirect")
_IFINDEX_FIELDS: Final = ("ifindex", "from_ifindex", "to_ifindex")

SetupFn = Callable[[Mapping[str, Collection], Callable[[str], int]], None]
"""``setup(collections, ifindex_of_dev)``: fills maps through the public ``Map`` API.

``collections`` maps each :attr:`Attach.key` to its loaded collection;
``ifindex_of_dev`` gives a lab device's ifindex on the backend running it."""


# --------------------------------------------------------------------------
# The description
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Attach:
    """Program ``program`` of object ``obj`` attached to ``dev`` in ``mode``.

    ``obj`` is a sample object name (``"xdp1.o"``, under :data:`SAMPLES`), a
    path, :data:`PASS_OBJ`, or a :class:`CollectionSpec` (then ``collection``
    names it). Attachments with the same :attr:`key`
    (``collection``, by default ``obj``) share one loaded collection, so a
    devmap of that collection is the one every program of it sees; give
    distinct ``collection`` keys to load an object twice.
    """

    dev: str
    obj: str | CollectionSpec
    program: str
    mode: str = "native"
    collection: str | None = None

    @property
    def key(self) -> str:
        if self.collection is not None:
            return self.collection
        if isinstance(self.obj, CollectionSpec):
            raise PyxdpError(f"an attachment of a CollectionSpec on {self.dev} needs a "
                             f"collection key")
        return self.obj


@dataclass(frozen=True)
class LinkSpec:
    """A lab device's link settings (``ip link add ... mtu M numrxqueues Q address A``)."""

    dev: str
    mtu: int = 1500
    queues: int = 1
    mac: bytes | None = None


@dataclass(frozen=True)
class Scenario:
    """One lab run: topology, programs, map setup, frames, and what to dump.

    ``pairs`` are veth pairs by device names; ``attach`` the programs;
    ``setup`` fills maps (see :data:`SetupFn`); ``traffic`` the frames, each
    received by its first element; ``maps`` the maps to dump at the end,
    each ``"map"`` (the only collection holding a map of that name) or
    ``"key:map"``. ``pass_unattached``: the veth peer rule (module doc).
    ``ordered``: whether arrival order per device is deterministic.
    ``links``: per device (by name) its MTU, rx/tx queue count and MAC when
    not the lab's defaults (1500, one queue, :func:`lab_mac`); a pair's two
    ends are made with the larger queue count of the two. ``lo_up``: the
    namespace's ``lo`` is brought up (else it stays down, as a new
    namespace's) and what reaches its stack is observed as ``"lo"``.
    ``threaded_napi``: every NAPI instance of the lab's devices is polled by a
    kthread of its own (``napi-set threaded``; pyxdp: ``Host(threaded_napi=True)``).
    """

    name: str
    pairs: tuple[tuple[str, str], ...]
    attach: tuple[Attach, ...]
    traffic: tuple[tuple[str, bytes], ...]
    setup: SetupFn | None = field(default=None, compare=False)
    maps: tuple[str, ...] = ()
    pass_unattached: bool = True
    ordered: bool = True
    doc: str = ""
    links: tuple[LinkSpec, ...] = ()
    lo_up: bool = False
    threaded_napi: bool = False

    def __post_init__(self) -> None:
        devs = self.devices
        for link in self.links:
            if link.dev not in devs:
                raise PyxdpError(f"{self.name}: link settings for unknown device {link.dev}")
        if len(set(devs)) != len(devs):
            raise PyxdpError(f"{self.name}: a device is in two pairs")
        for a in self.attach:
            if a.dev not in devs and not (a.dev == "lo" and a.mode == "generic"):
                raise PyxdpError(f"{self.name}: attach to unknown device {a.dev}")
        if len({a.dev for a in self.attach}) != len(self.attach):
            raise PyxdpError(f"{self.name}: two programs on one device")
        for dev, _ in self.traffic:
            if dev not in devs:
                raise PyxdpError(f"{self.name}: traffic for unknown device {dev}")

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(d for pair in self.pairs for d in pair)

    @property
    def observed(self) -> tuple[str, ...]:
        """The devices whose stacks :attr:`LabResult.rx` holds: the pairs', and ``lo``
        when :attr:`lo_up`."""
        return self.devices + (("lo",) if self.lo_up else ())

    def peer(self, dev: str) -> str:
        for a, b in self.pairs:
            if dev == a:
                return b
            if dev == b:
                return a
        raise KeyError(dev)

    def link(self, dev: str) -> LinkSpec:
        """``dev``'s MTU, queues and MAC (defaults unless :attr:`links` names it)."""
        for link in self.links:
            if link.dev == dev:
                return link
        return LinkSpec(dev)

    def mac(self, dev: str) -> bytes:
        """The device's MAC address (both backends use it)."""
        return self.link(dev).mac or lab_mac(self.pairs, dev)

    @property
    def attachments(self) -> tuple[Attach, ...]:
        """The programs actually attached: :attr:`attach` plus the peer rule's XDP_PASS."""
        if not self.pass_unattached:
            return self.attach
        have = {a.dev for a in self.attach}
        extra = tuple(Attach(d, PASS_OBJ, "xdp_pass", collection=f"{PASS_OBJ}@{d}")
                      for d in self.devices if d not in have)
        return self.attach + extra

    @property
    def collections(self) -> dict[str, str | CollectionSpec]:
        """Collection key -> object, in first-use order."""
        out: dict[str, str | CollectionSpec] = {}
        for a in self.attachments:
            if out.setdefault(a.key, a.obj) != a.obj:
                raise PyxdpError(f"{self.name}: collection {a.key} names two objects")
        return out

    def frames_to(self, dev: str) -> list[bytes]:
        """The frames ``dev`` receives from its peer, in order."""
        return [f for d, f in self.traffic if d == dev]


@dataclass(frozen=True)
class TraceCount:
    """One tracepoint over a run: events fired, sums of count fields, events with an error."""

    events: int = 0
    sums: Mapping[str, int] = field(default_factory=dict)
    errors: int = 0

    def __getitem__(self, name: str) -> int:
        """``tc["sent"]``: a summed field (0 when the event has none); ``tc["events"]``."""
        if name == "events":
            return self.events
        if name == "errors":
            return self.errors
        return self.sums.get(name, 0)


@dataclass(frozen=True)
class LabEvent:
    """A tracepoint event with backend-specific numbers replaced by lab names.

    ``fields`` are the record's fields in order; ifindex fields hold device
    names (an ifindex outside the lab, e.g. 0, stays an int), ``prog_id``
    ``"collection:program"``, ``map_id`` ``"collection:map"``.
    """

    name: str
    fields: tuple[tuple[str, int | str], ...]

    def __getitem__(self, key: str) -> int | str:
        for k, v in self.fields:
            if k == key:
                return v
        raise KeyError(key)

    def get(self, key: str, default: int | str | None = None) -> int | str | None:
        try:
            return self[key]
        except KeyError:
            return default


@dataclass(frozen=True)
class LabResult:
    """What one run of a :class:`Scenario` produced (see the module doc for the conventions)."""

    scenario: str
    backend: str
    rx: Mapping[str, tuple[bytes, ...]]
    maps: Mapping[str, Mapping[bytes, bytes]]
    percpu: Mapping[str, Mapping[bytes, tuple[bytes, ...]]]
    trace: Mapping[str, TraceCount]
    events: tuple[LabEvent, ...]
    links: Mapping[str, LinkStats]
    ifindex: Mapping[str, int]

    def events_named(self, name: str) -> list[LabEvent]:
        return [e for e in self.events if e.name == name]

    def map_u64(self, name: str, key: int) -> int:
        """A summed map value read as a little-endian integer (0 when absent)."""
        raw = self.maps[name].get(key.to_bytes(4, "little"), b"")
        return int.from_bytes(raw[:8], "little") if raw else 0


# --------------------------------------------------------------------------
# Helpers shared by both backends
# --------------------------------------------------------------------------

def lab_mac(pairs: Sequence[tuple[str, str]], dev: str) -> bytes:
    """``02:00:00:00:<pair+1>:<side>``: device ``dev``'s MAC in a lab of ``pairs``."""
    for i, (a, b) in enumerate(pairs):
        if dev in (a, b):
            return bytes([2, 0, 0, 0, i + 1, 0 if dev == a else 1])
    raise KeyError(dev)


def load_spec(obj: str | CollectionSpec) -> CollectionSpec:
    """The :class:`CollectionSpec` of an :attr:`Attach.obj` (both backends load this).

    A relative path is taken from the working directory when the file is there,
    else from :data:`SAMPLES`."""
    if isinstance(obj, CollectionSpec):
        return obj
    if obj == PASS_OBJ:
        prog = ProgramSpec(name="xdp_pass", section="xdp", insns=assemble("r0 = 2\nexit"),
                           license="GPL")
        return CollectionSpec(programs={"xdp_pass": prog}, maps={}, license="GPL",
                              name="xdp_pass")
    from pyxdp.elf import load_collection_spec
    path = Path(obj)
    return load_collection_spec(path if path.is_absolute() or path.is_file()
                                else SAMPLES / path)


def prog_fd(program: Program) -> int:
    """What ``bpf_prog.fd`` of a devmap/cpumap value takes for ``program`` on its backend.

    The kernel program's descriptor; for a userspace program its handle's
    ``fd`` when it has one, else its program id (what pyxdp's DevMap/CpuMap
    ``resolve_prog`` gets).
    """
    handle = program.handle
    for attr in ("fd", "id"):
        value = getattr(handle, attr, None)
        if isinstance(value, int):
            return value
    raise PyxdpError(f"{program.name}: its handle has neither an fd nor an id")


def swap_macs(frame: bytes) -> bytes:
    """The frame with destination and source MAC exchanged (what xdp2/redirect_map do)."""
    return frame[6:12] + frame[0:6] + frame[12:]


def _map_of(collections: Mapping[str, Collection], name: str) -> Map:
    if ":" in name:
        key, _, mname = name.rpartition(":")
        return collections[key].maps[mname]
    found = [c.maps[name] for c in collections.values() if name in c.maps]
    if len(found) != 1:
        raise PyxdpError(f"map {name!r} is in {len(found)} collections: name it key:map")
    return found[0]


def _words(raw: bytes) -> tuple[int, str]:
    return (8, "<Q") if len(raw) % 8 == 0 else (4, "<I") if len(raw) % 4 == 0 else (1, "<B")


def _sum_cpus(values: Sequence[bytes]) -> bytes:
    size, fmt = _words(values[0])
    mask = (1 << (8 * size)) - 1
    out = bytearray(len(values[0]))
    for off in range(0, len(out), size):
        total = sum(struct.unpack_from(fmt, v, off)[0] for v in values) & mask
        struct.pack_into(fmt, out, off, total)
    return bytes(out)


_ARRAYS: Final = frozenset({BpfMapType.BPF_MAP_TYPE_ARRAY, BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY})


def dump_map(m: Map) -> tuple[dict[bytes, bytes], dict[bytes, tuple[bytes, ...]] | None]:
    """A map's raw contents, per-CPU values summed; and the per-CPU values (None if not per-CPU).

    Works on either backend (only the public ``Map`` API and its handle's lookup).
    """
    summed: dict[bytes, bytes] = {}
    percpu: dict[bytes, tuple[bytes, ...]] | None = {} if m.percpu else None
    size = m.spec.value_size
    stride = (size + 7) // 8 * 8
    for key in m.raw_keys():
        raw = m.handle.lookup(key)
        if raw is None:
            continue
        if percpu is not None:
            cpus = tuple(raw[c * stride:c * stride + size] for c in range(len(raw) // stride))
            value = _sum_cpus(cpus)
        else:
            cpus, value = (), raw[:size]
        if m.spec.type in _ARRAYS and not any(value) and not any(any(c) for c in cpus):
            continue
        summed[key] = value
        if percpu is not None:
            percpu[key] = cpus
    return summed, percpu


def _dump_maps(scenario: Scenario, colls: Mapping[str, Collection]
               ) -> tuple[dict[str, Mapping[bytes, bytes]],
                          dict[str, Mapping[bytes, tuple[bytes, ...]]]]:
    """The scenario's maps (summed), and the per-CPU values of the per-CPU ones."""
    dumped: dict[str, Mapping[bytes, bytes]] = {}
    percpu: dict[str, Mapping[bytes, tuple[bytes, ...]]] = {}
    for name in scenario.maps:
        summed, per = dump_map(_map_of(colls, name))
        dumped[name] = summed
        if per is not None:
            percpu[name] = per
    return dumped, percpu


def _event_device(e: LabEvent) -> str:
    """The device whose poll recorded ``e`` (its ``ifindex`` field, as a name)."""
    for k, v in e.fields:
        if k == "ifindex":
            return str(v)
    return ""


def lab_differences(want: LabResult, got: LabResult, scenario: Scenario, *,
                    links: bool = False) -> list[str]:
    """What differs between two runs of ``scenario`` (e.g. kernel vs pyxdp), as text lines.

    Compared: frames per device (in order, or as a multiset when the
    scenario is not :attr:`~Scenario.ordered`), map contents, every event
    in order except ``xdp_cpumap_kthread`` (how the kthreads batch is
    timing), and per tracepoint the event count and sums (for
    ``xdp_cpumap_kthread`` the sums only); with ``links`` the ``ip -s
    link`` counters too. ``ifindex`` and ``backend`` are never compared.
    With :attr:`~Scenario.threaded_napi` the bulk events (``xdp_bulk_tx``,
    ``xdp_devmap_xmit``, ``xdp_cpumap_enqueue``: also its ``cpu``, wherever the
    NAPI kthread ran) are timing too: how many frames one poll finds
    depends on when the NAPI kthread runs after the sender queued them; and
    the events of different devices are compared in order per device (each
    device's kthread orders its own; how they interleave is timing).
    """
    timing = {"xdp_cpumap_kthread"}
    if scenario.threaded_napi:
        timing |= {"xdp_bulk_tx", "xdp_devmap_xmit", "xdp_cpumap_enqueue"}
    out: list[str] = []
    for dev in scenario.observed:
        a, b = list(want.rx.get(dev, ())), list(got.rx.get(dev, ()))
        same = a == b if scenario.ordered else sorted(a) == sorted(b)
        if not same:
            out.append(f"rx {dev}: {len(a)} frames expected, {len(b)} got"
                       + ("" if len(a) != len(b) else ", contents or order differ"))
    for name in scenario.maps:
        if want.maps.get(name) != got.maps.get(name):
            out.append(f"map {name}: {want.maps.get(name)} expected, {got.maps.get(name)} got")
    for ev in LAB_EVENTS:
        ta, tb = want.trace.get(ev, TraceCount()), got.trace.get(ev, TraceCount())
        if ev in timing:
            ta, tb = replace(ta, events=0), replace(tb, events=0)
        if ta != tb:
            out.append(f"trace {ev}: {ta} expected, {tb} got")
    ea = [e for e in want.events if e.name not in timing]
    eb = [e for e in got.events if e.name not in timing]
    if scenario.threaded_napi:  # per device, in order: stable sorts by the polling device
        ea.sort(key=_event_device)
        eb.sort(key=_event_device)
    if ea != eb:
        n = min(len(ea), len(eb))
        at = next((i for i in range(n) if ea[i] != eb[i]), n)
        out.append(f"events differ from #{at}: {ea[at:at + 1]} expected, {eb[at:at + 1]} got")
    if links:
        for dev in scenario.devices:
            if want.links.get(dev) != got.links.get(dev):
                out.append(f"link {dev}: {want.links.get(dev)} expected, "
                           f"{got.links.get(dev)} got")
    return out


@dataclass(frozen=True)
class LabComparison:
    """One scenario run on Linux and on pyxdp, and what differs (:func:`lab_differences`)."""

    scenario: Scenario
    kernel: LabResult
    pyxdp: LabResult
    differences: tuple[str, ...]

    def assert_same(self) -> None:
        """Raise AssertionError listing every difference, if there is one."""
        if self.differences:
            lines = "\n".join(f"  {d}" for d in self.differences)
            raise AssertionError(f"scenario {self.scenario.name}: pyxdp differs from Linux "
                                 f"({len(self.differences)}):\n{lines}")


def compare(scenario: Scenario, *, engine: str = "auto", links: bool = False) -> LabComparison:
    """Run ``scenario`` on Linux veth pairs (:func:`run_kernel`, root) and on pyxdp
    (:func:`run_pyxdp`) and list the differences; ``links`` compares the devices'
    counters too."""
    kernel = run_kernel(scenario)
    mine = run_pyxdp(scenario, engine=engine)
    return LabComparison(scenario, kernel, mine,
                         tuple(lab_differences(kernel, mine, scenario, links=links)))


def summarize_trace(events: Sequence[LabEvent]) -> dict[str, TraceCount]:
    """Per tracepoint of :data:`LAB_EVENTS`: events, summed count fields, events with err."""
    out: dict[str, TraceCount] = {}
    for name in LAB_EVENTS:
        mine = [e for e in events if e.name == name]
        fields = [f for f, _ in mine[0].fields] if mine else []
        sums: dict[str, int] = {f: sum(int(e[f]) for e in mine)
                                for f in _COUNT_FIELDS if f in fields}
        errors = sum(1 for e in mine if e.get("err", 0) not in (0, None))
        out[name] = TraceCount(len(mine), sums, errors)
    return out


# --------------------------------------------------------------------------
# Frames
# --------------------------------------------------------------------------

def mixed_frames(src_mac: bytes, dst_mac: bytes, *, n_rounds: int = 1, seed: int = 0,
                 udp_dports: Sequence[int] = (5678, 9)) -> list[bytes]:
    """A deterministic mix of 40 frames per round, every one distinct, none over 1514 bytes
    (1518 with a VLAN tag): IPv4 UDP/TCP SYN/ICMP echo at sizes around 600 and up to 1514,
    IPv6 UDP/TCP/ICMPv6, 802.1Q and QinQ frames, an ARP request and a runt IPv4 frame.

    TCP frames are SYNs (GRO never merges them); UDP destination ports cycle
    through ``udp_dports`` (9 is what redirect_cpu's cpumap program drops).
    """
    return [f for r in range(n_rounds)
            for f in _frame_round(src_mac, dst_mac, r, seed, udp_dports)]


def _frame_round(src_mac: bytes, dst_mac: bytes, r: int, seed: int,
                 udp_dports: Sequence[int]) -> list[bytes]:
    """Round ``r`` of :func:`mixed_frames` (its own source ports and addresses)."""
    ports = itertools.count(10_000 + 1000 * (seed + r))
    dports = itertools.cycle(udp_dports)
    out: list[bytes] = []

    def udp(size: int, **kw: Any) -> bytes:
        return pk.udp_packet(sport=next(ports), dport=next(dports), size=size,
                             src_mac=src_mac, dst_mac=dst_mac, **kw)

    def tcp(size: int, **kw: Any) -> bytes:
        return pk.tcp_packet(sport=next(ports), flags="S", size=size, src_mac=src_mac,
                             dst_mac=dst_mac, **kw)

    def icmp(size: int, seq: int, **kw: Any) -> bytes:
        return pk.icmp_packet(ident=next(ports), seq=seq, size=size, src_mac=src_mac,
                              dst_mac=dst_mac, **kw)

    out += [udp(n) for n in (60, 64, 128, 256, 512, 599, 600, 601, 1024, 1400, 1514)]
    out += [tcp(n) for n in (64, 600, 601, 1514)]
    out += [icmp(n, i + 1) for i, n in enumerate((64, 98, 700, 1514))]
    out += [udp(n, ipv6=True) for n in (80, 700, 1514)]
    out += [tcp(n, ipv6=True) for n in (80, 1000)]
    out += [icmp(n, i + 1, ipv6=True) for i, n in enumerate((100, 800))]
    out += [udp(n, vlans=(100,)) for n in (64, 700, 1518)]
    out.append(udp(128, vlans=((pk.ETH_P_8021AD, 10), 20)))
    out.append(tcp(200, ipv6=True, vlans=(200,)))
    out.append(pk.arp_packet(sender_mac=src_mac, sender_ip=f"192.0.2.{10 + r}", pad=True))
    # 30 bytes: an Ethernet header saying IPv4, then 16 bytes, too short for an IP header.
    out.append(dst_mac + src_mac + struct.pack(">H", pk.ETH_P_IP) + bytes(range(r, r + 16)))
    out += [udp(n, src_ip=f"192.0.2.{100 + r}") for n in (64, 333, 1200)]
    out += [tcp(n) for n in (66, 1300)]
    out += [udp(n, ipv6=True) for n in (90, 1100)]
    return out


def _traffic(pairs: tuple[tuple[str, str], ...], rx_dev: str, **kw: Any
             ) -> tuple[tuple[str, bytes], ...]:
    """Frames received by ``rx_dev``, addressed from its peer's MAC to its own."""
    peer = next(b if a == rx_dev else a for a, b in pairs if rx_dev in (a, b))
    frames = mixed_frames(lab_mac(pairs, peer), lab_mac(pairs, rx_dev), **kw)
    return tuple((rx_dev, f) for f in frames)


# --------------------------------------------------------------------------
# Ready scenarios
# --------------------------------------------------------------------------

P1: Final = (("veth0", "veth1"),)
P2: Final = (("veth0", "veth1"), ("veth2", "veth3"))
P3: Final = (("veth0", "veth1"), ("veth2", "veth3"), ("veth4", "veth5"))
P4: Final = (("veth0", "veth1"), ("veth2", "veth3"), ("veth4", "veth5"), ("veth6", "veth7"))


def xdp1_drop() -> Scenario:
    """samples/xdp1.o on veth0: counts per IP protocol, XDP_DROP.

    Kernel: nothing reaches any stack; ``rxcnt`` (summed) counts each frame
    under its IP protocol (VLAN and QinQ frames under the inner one; ARP and
    the runt under 0); no tracepoint fires (XDP_DROP has none). ``ip -s
    link``: veth0 rx_packets = frames, rx_bytes = their lengths minus 14
    each, rx_dropped 0 (XDP drops are not in it); veth1 tx = veth0 rx.
    """
    return Scenario("xdp1_drop", P1, (Attach("veth0", "xdp1.o", "xdp_prog1"),),
                    _traffic(P1, "veth0", n_rounds=2), maps=("rxcnt",),
                    doc=xdp1_drop.__doc__ or "")


def xdp2_tx() -> Scenario:
    """samples/xdp2.o on veth0: counts per IP protocol, swaps MACs, XDP_TX.

    Kernel: every frame comes back, MACs swapped, to the stack of veth1 (the
    sender; it holds the peer rule's XDP_PASS), in order; nothing reaches
    veth0's stack. ``xdp_bulk_tx`` fires once per frame (one NAPI poll each)
    with ``ifindex`` veth0, ``sent`` 1, ``drops`` 0, ``err`` 0; no
    ``xdp_devmap_xmit``, no ``xdp_redirect``. ``ip -s link``: veth1
    rx_bytes = the full frame lengths (an xdp_frame from ndo_xdp_xmit is
    counted with its Ethernet header), rx_dropped 1 (the QinQ frame: the
    stack has no handler for the inner 0x8100 once the outer tag is off).
    """
    return Scenario("xdp2_tx", P1, (Attach("veth0", "xdp2.o", "xdp_prog2"),),
                    _traffic(P1, "veth0"), maps=("rxcnt",), doc=xdp2_tx.__doc__ or "")


def xdp2_tx_no_peer_prog() -> Scenario:
    """xdp2_tx without the peer rule: veth1 has no XDP program, so no NAPI.

    Kernel: nothing reaches any stack; the TX bulk is refused by
    ``veth_xdp_xmit``: ``xdp_bulk_tx`` per frame with sent 0, drops 1, err
    -6 (-ENXIO); no ``xdp_exception``. ``ip -s link``: veth0 tx_dropped
    and veth1 rx_dropped count the frames. ``rxcnt`` still counts them.
    """
    return Scenario("xdp2_tx_no_peer_prog", P1, (Attach("veth0", "xdp2.o", "xdp_prog2"),),
                    _traffic(P1, "veth0"), maps=("rxcnt",), pass_unattached=False,
                    doc=xdp2_tx_no_peer_prog.__doc__ or "")


def xdp2_tx_generic() -> Scenario:
    """xdp2_tx with xdp2 in generic (skb) mode on veth0.

    Kernel: XDP_TX is ``generic_xdp_tx`` on veth0, whose ``veth_xmit`` hands
    each skb to veth1 (its native XDP_PASS program, ``veth_xdp_rx``): every
    frame comes back, MACs swapped, to veth1's stack in order; no tracepoint
    fires (an skb is not bulked: no ``xdp_bulk_tx``).
    """
    sc = xdp2_tx()
    return replace(sc, name="xdp2_tx_generic", attach=(replace(sc.attach[0], mode="generic"),),
                   doc=xdp2_tx_generic.__doc__ or "")


def _tx_port(target: str, egress: bool = False) -> SetupFn:
    def setup(colls: Mapping[str, Collection], ifindex_of: Callable[[str], int]) -> None:
        coll = colls["redirect_map.o"]
        value: dict[str, Any] = {"ifindex": ifindex_of(target)}
        if egress:
            value["bpf_prog"] = {"fd": prog_fd(coll.programs["xdp_redirect_map_egress"])}
        coll.maps["tx_port"][0] = value
    return setup


def devmap_redirect() -> Scenario:
    """samples/redirect_map.o on veth0, ``tx_port[0]`` = veth2: veth0 -> veth2 -> veth3.

    Kernel: every frame, MACs swapped, reaches veth3's stack in order;
    nothing reaches veth0's, veth1's or veth2's. Per frame one
    ``xdp_redirect`` (ifindex veth0, to_ifindex veth2, map tx_port, index
    0, err 0) and one ``xdp_devmap_xmit`` (veth0 -> veth2, sent 1, drops 0).
    """
    return Scenario("devmap_redirect", P2,
                    (Attach("veth0", "redirect_map.o", "xdp_redirect_map_prog"),),
                    _traffic(P2, "veth0"), setup=_tx_port("veth2"), maps=("rxcnt",),
                    doc=devmap_redirect.__doc__ or "")


def devmap_redirect_no_peer_prog() -> Scenario:
    """devmap_redirect without the peer rule: veth3 has no XDP program, so no NAPI.

    Kernel: nothing reaches any stack. veth2 does not advertise
    ``NETDEV_XDP_ACT_NDO_XMIT`` while its peer has no NAPI, so the redirect
    fails at once: ``xdp_redirect_err`` per frame with err -95
    (-EOPNOTSUPP), to_ifindex veth2, map tx_port; no ``xdp_devmap_xmit``.
    ``ip -s link``: veth0 rx_dropped counts the frames. ``rxcnt`` still
    counts them.
    """
    return Scenario("devmap_redirect_no_peer_prog", P2,
                    (Attach("veth0", "redirect_map.o", "xdp_redirect_map_prog"),),
                    _traffic(P2, "veth0"), setup=_tx_port("veth2"), maps=("rxcnt",),
                    pass_unattached=False, doc=devmap_redirect_no_peer_prog.__doc__ or "")


def devmap_missing_aborted() -> Scenario:
    """samples/redirect_map.o on veth0 with ``tx_port`` left empty.

    Kernel: ``bpf_redirect_map`` finds no entry and returns its flags' low
    bits, 0 = XDP_ABORTED: nothing reaches any stack and ``xdp_exception``
    fires once per frame (ifindex veth0, act 0); no redirect event; veth0
    rx_dropped stays 0.
    """
    return Scenario("devmap_missing_aborted", P2,
                    (Attach("veth0", "redirect_map.o", "xdp_redirect_map_prog"),),
                    _traffic(P2, "veth0"), maps=("rxcnt",),
                    doc=devmap_missing_aborted.__doc__ or "")


def devmap_redirect_mtu() -> Scenario:
    """devmap_redirect with veth2's MTU at 400.

    Kernel (``__xdp_enqueue``'s ``xdp_ok_fwd_dev``): frames of up to 418 bytes
    (the MTU, the Ethernet header and a VLAN tag's room) reach veth3's stack,
    MACs swapped, in order, each with one ``xdp_redirect`` and one
    ``xdp_devmap_xmit`` as in devmap_redirect; a longer one is refused:
    ``xdp_redirect_err`` with err -90 (-EMSGSIZE), to_ifindex veth2, map
    tx_port, index 0, and the frame freed.
    """
    return Scenario("devmap_redirect_mtu", P2,
                    (Attach("veth0", "redirect_map.o", "xdp_redirect_map_prog"),),
                    _traffic(P2, "veth0"), setup=_tx_port("veth2"), maps=("rxcnt",),
                    links=(LinkSpec("veth2", mtu=400),), doc=devmap_redirect_mtu.__doc__ or "")


#: The ifindex :func:`redirect_ifindex_missing` redirects to: no lab device has it.
MISSING_IFINDEX: Final = 999
#: ``lo``'s ifindex in every namespace (the lab's is down, as a new namespace's).
LO_IFINDEX: Final = 1


def _redirect_missing(mode: str, ifindex: int = MISSING_IFINDEX) -> Attach:
    """``bpf_redirect(ifindex, 0)`` on veth0 for every frame (program
    ``xdp_redirect_missing``, collection ``redirect_missing``)."""
    prog = ProgramSpec(name="xdp_redirect_missing", section="xdp",
                       insns=assemble(f"r1 = {ifindex}\nr2 = 0\ncall 23\nexit"),
                       license="GPL")
    spec = CollectionSpec(programs={prog.name: prog}, maps={}, license="GPL",
                          name="redirect_missing")
    return Attach("veth0", spec, prog.name, mode=mode, collection="redirect_missing")


def redirect_ifindex_missing() -> Scenario:
    """veth0 redirects every frame with ``bpf_redirect`` to an ifindex no device has.

    Kernel (``xdp_do_redirect``: ``dev_get_by_index_rcu`` finds nothing): per
    frame one ``xdp_redirect_err`` with err -22 (-EINVAL), to_ifindex the
    missing ifindex, map_id INT_MAX, map_index 0; the frame is freed and
    nothing reaches any stack.
    """
    return Scenario("redirect_ifindex_missing", P1, (_redirect_missing("native"),),
                    _traffic(P1, "veth0"), doc=redirect_ifindex_missing.__doc__ or "")


def redirect_ifindex_missing_generic() -> Scenario:
    """redirect_ifindex_missing with the program in generic (skb) mode.

    Kernel (``xdp_do_generic_redirect``): the same ``xdp_redirect_err`` per frame
    (-EINVAL, to_ifindex the missing ifindex), the skb freed, nothing at any
    stack.
    """
    return Scenario("redirect_ifindex_missing_generic", P1, (_redirect_missing("generic"),),
                    _traffic(P1, "veth0"), doc=redirect_ifindex_missing_generic.__doc__ or "")


def redirect_to_lo() -> Scenario:
    """veth0 redirects every frame with ``bpf_redirect`` to ``lo``.

    Kernel: lo has no ``ndo_xdp_xmit`` (``xdp_features`` 0), so ``__xdp_enqueue``
    refuses each frame: one ``xdp_redirect_err`` per frame with err -95
    (-EOPNOTSUPP), to_ifindex 1; nothing reaches any stack.
    """
    return Scenario("redirect_to_lo", P1, (_redirect_missing("native", LO_IFINDEX),),
                    _traffic(P1, "veth0"), doc=redirect_to_lo.__doc__ or "")


def redirect_to_lo_generic() -> Scenario:
    """redirect_to_lo with the program in generic (skb) mode.

    Kernel: ``xdp_do_generic_redirect`` needs no ``ndo_xdp_xmit``, but the lab
    namespace's lo is down: ``xdp_ok_fwd_dev`` refuses each skb, one
    ``xdp_redirect_err`` per frame with err -100 (-ENETDOWN), to_ifindex 1.
    """
    return Scenario("redirect_to_lo_generic", P1, (_redirect_missing("generic", LO_IFINDEX),),
                    _traffic(P1, "veth0"), doc=redirect_to_lo_generic.__doc__ or "")


def redirect_to_lo_up_generic() -> Scenario:
    """redirect_to_lo_generic with the namespace's ``lo`` up.

    Kernel: ``generic_xdp_tx`` on lo is ``loopback_xmit``, whose ``netif_rx``
    hands the skb to lo's own receive path: every frame reaches lo's stack
    unchanged, in order, with one ``xdp_redirect`` each (to_ifindex 1).
    """
    return Scenario("redirect_to_lo_up_generic", P1,
                    (_redirect_missing("generic", LO_IFINDEX),), _traffic(P1, "veth0"),
                    lo_up=True, doc=redirect_to_lo_up_generic.__doc__ or "")


def redirect_to_lo_up_generic_prog() -> Scenario:
    """redirect_to_lo_up_generic with samples/xdp1.o on ``lo`` in generic mode.

    Kernel: ``loopback_xmit``'s ``netif_rx`` queues each skb on the backlog,
    whose ``process_backlog`` runs lo's generic program on it
    (``do_xdp_generic``): xdp1 counts it in ``rxcnt`` under its IP protocol
    and drops it, so nothing reaches lo's stack; one ``xdp_redirect`` per
    frame (to_ifindex 1).
    """
    return Scenario("redirect_to_lo_up_generic_prog", P1,
                    (_redirect_missing("generic", LO_IFINDEX),
                     Attach("lo", "xdp1.o", "xdp_prog1", mode="generic")),
                    _traffic(P1, "veth0"), maps=("rxcnt",), lo_up=True,
                    doc=redirect_to_lo_up_generic_prog.__doc__ or "")


#: lo's generic program of :func:`lo_generic_tx_backlog`: a frame whose destination MAC
#: starts with a nonzero byte gets that byte cleared and is sent back (XDP_TX); one
#: that starts with 0 (it came back) is counted in ``seen[0]`` and dropped.
_TX_ONCE = """
    r6 = r1
    r2 = *(u32 *)(r6 +0)
    r3 = *(u32 *)(r6 +4)
    r4 = r2
    r4 += 14
    if r4 > r3 goto drop
    r5 = *(u8 *)(r2 +0)
    if r5 == 0 goto back
    r5 = 0
    *(u8 *)(r2 +0) = r5
    r0 = 3
    exit
back:
    r1 = 0
    *(u32 *)(r10 -4) = r1
    r1 = map[fd:0]
    r2 = r10
    r2 += -4
    call bpf_map_lookup_elem
    if r0 == 0 goto drop
    r1 = 1
    lock *(u64 *)(r0 +0) += r1
drop:
    r0 = 1
    exit
"""


def lo_generic_tx_backlog() -> Scenario:
    """redirect_to_lo_up_generic with a program on ``lo`` (generic mode) that sends each
    skb back once (XDP_TX) and counts it when it comes back.

    Kernel: veth0's ``bpf_redirect`` to ``lo`` (one ``xdp_redirect`` per frame,
    to_ifindex 1); ``loopback_xmit`` queues the skb on the backlog, whose
    ``process_backlog`` runs lo's program: XDP_TX is ``generic_xdp_tx`` on lo,
    ``loopback_xmit`` again, so the skb comes back to lo's own backlog, and its
    second run counts it in ``seen[0]`` and drops it: ``seen[0]`` is the number
    of frames, nothing reaches a stack. pyxdp: lo's backlog is its rx ring; the
    native loop polling it queues the skb on that same ring, a copy in a page of
    the queue's own pool (frames too long for a page: the Python path).
    """
    spec = asm_collection(_TX_ONCE, [MapSpec("seen", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8,
                                             1)])
    prog = replace(spec.programs["t"], name="xdp_tx_once")
    spec = replace(spec, programs={"xdp_tx_once": prog}, name="tx_once")
    return Scenario("lo_generic_tx_backlog", P1,
                    (_redirect_missing("generic", LO_IFINDEX),
                     Attach("lo", spec, "xdp_tx_once", mode="generic", collection="tx_once")),
                    _traffic(P1, "veth0"), maps=("seen",), lo_up=True,
                    doc=lo_generic_tx_backlog.__doc__ or "")


def devmap_egress_prog() -> Scenario:
    """devmap_redirect with redirect_map's ``xdp/devmap`` program on the ``tx_port`` entry.

    Kernel: every frame reaches veth3's stack with its MACs swapped and then
    the source MAC rewritten by the egress program to ``tx_src_mac``
    (.rodata default 02:00:00:00:00:01; it ran with egress_ifindex != 0).
    Same ``xdp_redirect``/``xdp_devmap_xmit`` counts as devmap_redirect.
    """
    return Scenario("devmap_egress_prog", P2,
                    (Attach("veth0", "redirect_map.o", "xdp_redirect_map_prog"),),
                    _traffic(P2, "veth0"), setup=_tx_port("veth2", egress=True),
                    maps=("rxcnt",), doc=devmap_egress_prog.__doc__ or "")


def _ports(devs: Sequence[str | None]) -> SetupFn:
    """``ports[i]`` = ``devs[i]`` (None: slot left empty)."""
    def setup(colls: Mapping[str, Collection], ifindex_of: Callable[[str], int]) -> None:
        ports = colls["redirect_bcast.o"].maps["ports"]
        for i, dev in enumerate(devs):
            if dev is not None:
                ports[i] = {"ifindex": ifindex_of(dev)}
    return setup


def devmap_broadcast() -> Scenario:
    """samples/redirect_bcast.o ``xdp_redirect_bcast`` on veth0; ``ports`` = veth0, veth2, veth4.

    Kernel: an unchanged copy of every frame reaches the stacks of veth1 (out
    of veth0 itself, the ingress device), veth3 and veth5, each in order.
    Per frame one ``xdp_redirect`` (map ports, map_index 0, and to_ifindex
    veth0: the device in slot ``key`` = 0, looked up although broadcast
    ignores it), then one ``xdp_devmap_xmit`` per target (sent 1 each) in
    the reverse order of the map: veth4, veth2, veth0 (the flush list is
    LIFO: ``bq_enqueue`` adds at its head).
    """
    return Scenario("devmap_broadcast", P3,
                    (Attach("veth0", "redirect_bcast.o", "xdp_redirect_bcast"),),
                    _traffic(P3, "veth0"), setup=_ports(("veth0", "veth2", "veth4")),
                    maps=("rxcnt",), doc=devmap_broadcast.__doc__ or "")


def devmap_broadcast_exclude_ingress() -> Scenario:
    """devmap_broadcast with ``BPF_F_EXCLUDE_INGRESS`` (``xdp_redirect_bcast_excl``).

    ``ports`` here holds veth0, veth2, veth4 in slots 1, 2, 3 (slot 0 empty).
    Kernel: copies reach veth3 and veth5 only; nothing goes out of veth0
    (so nothing reaches veth1). Per frame one ``xdp_redirect`` with
    to_ifindex 0 (slot 0 is empty), then ``xdp_devmap_xmit`` for veth4 and
    veth2 only.
    """
    return Scenario("devmap_broadcast_exclude_ingress", P3,
                    (Attach("veth0", "redirect_bcast.o", "xdp_redirect_bcast_excl"),),
                    _traffic(P3, "veth0"), setup=_ports((None, "veth0", "veth2", "veth4")),
                    maps=("rxcnt",), doc=devmap_broadcast_exclude_ingress.__doc__ or "")


def devmap_broadcast_generic_mtu() -> Scenario:
    """devmap_broadcast in generic (skb) mode on veth0, ``ports`` = veth2, veth4, veth0,
    veth2's MTU 400.

    Kernel (``dev_map_redirect_multi`` with skbs): a frame veth2 takes (up to
    418 bytes with the Ethernet header and a VLAN tag's room) is cloned to veth2
    and veth4 and sent itself out of veth0, reaching the stacks of veth3, veth5
    and veth1, one ``xdp_redirect`` each; a longer one ends the broadcast at
    veth2 (``xdp_ok_fwd_dev``: -EMSGSIZE): nothing is sent anywhere and
    ``xdp_redirect_err`` fires with that error (to_ifindex veth2, the device in
    slot 0). No ``xdp_devmap_xmit``: skbs are not bulked.
    """
    return Scenario("devmap_broadcast_generic_mtu", P3,
                    (Attach("veth0", "redirect_bcast.o", "xdp_redirect_bcast", mode="generic"),),
                    _traffic(P3, "veth0"), setup=_ports(("veth2", "veth4", "veth0")),
                    maps=("rxcnt",), links=(LinkSpec("veth2", mtu=400),),
                    doc=devmap_broadcast_generic_mtu.__doc__ or "")


def xdp2_tx_threaded() -> Scenario:
    """xdp2_tx with threaded NAPI: each NAPI instance polled by a kthread of its own.

    Kernel: as xdp2_tx (``veth_xdp_xmit`` takes the peer ring's
    ``producer_lock`` from any thread). pyxdp: veth0's poll runs without the
    host lock (xdp2's maps are arrays) and sends its XDP_TX bulks onto veth1's
    ``xdp_ring`` in the native loop, under the ring's lock.
    """
    return replace(xdp2_tx(), name="xdp2_tx_threaded", threaded_napi=True,
                               doc=xdp2_tx_threaded.__doc__ or "")


def devmap_redirect_threaded() -> Scenario:
    """devmap_redirect with threaded NAPI.

    Kernel: as devmap_redirect. pyxdp: veth0's poll runs without the host lock
    (redirect_map's maps are a devmap and a per-CPU array) and the redirect
    into veth2 (onto veth3's ``xdp_ring``, under the ring's lock) is the native
    loop's, from the poll's own bulk queue, as without threaded NAPI.
    """
    return replace(devmap_redirect(), name="devmap_redirect_threaded",
                               threaded_napi=True, doc=devmap_redirect_threaded.__doc__ or "")


#: ``bpf_redirect`` to the ifindex in ``tx_ifindex[0]`` (an array: the program runs
#: without pyxdp's host lock under threaded NAPI); no entry: XDP_DROP.
_REDIRECT_IFINDEX = """
    r1 = 0
    *(u32 *)(r10 -4) = r1
    r1 = map[fd:0]
    r2 = r10
    r2 += -4
    call bpf_map_lookup_elem
    if r0 == 0 goto drop
    r1 = *(u32 *)(r0 +0)
    r2 = 0
    call 23
    exit
drop:
    r0 = 1
    exit
"""


def _tx_ifindex(target: str) -> SetupFn:
    def setup(colls: Mapping[str, Collection], ifindex_of: Callable[[str], int]) -> None:
        colls["redirect_ifindex"].maps["tx_ifindex"][0] = ifindex_of(target)
    return setup


def redirect_ifindex_threaded() -> Scenario:
    """veth0 redirects every frame with ``bpf_redirect`` to veth2 (its ifindex read from an
    array map), with threaded NAPI: veth0 -> veth2 -> veth3.

    Kernel (``xdp_do_redirect`` to an ifindex: ``dev_xdp_enqueue``, veth2's
    ``veth_xdp_xmit`` at the flush): every frame reaches veth3's stack in
    order; one ``xdp_redirect`` per frame (map_id INT_MAX, map_index the
    ifindex), ``xdp_devmap_xmit`` bulks veth0 -> veth2. pyxdp: veth0's poll runs
    without the host lock (its map is an array) and sends natively, veth2's
    transmit counters counted in its row for the polling CPU.
    """
    spec = asm_collection(_REDIRECT_IFINDEX, [MapSpec("tx_ifindex",
                                                      int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4,
                                                      4, 1)])
    prog = replace(spec.programs["t"], name="xdp_redirect_ifindex")
    spec = replace(spec, programs={prog.name: prog}, name="redirect_ifindex")
    return Scenario("redirect_ifindex_threaded", P2,
                    (Attach("veth0", spec, prog.name, collection="redirect_ifindex"),),
                    _traffic(P2, "veth0"), setup=_tx_ifindex("veth2"), threaded_napi=True,
                    doc=redirect_ifindex_threaded.__doc__ or "")


def devmap_redirect_generic_threaded() -> Scenario:
    """devmap_redirect in generic (skb) mode on veth0, with threaded NAPI.

    Kernel: ``xdp_do_generic_redirect`` then ``generic_xdp_tx`` on veth2,
    whose ``veth_xmit`` hands the skb to veth3's XDP (``veth_xdp_rx``: its
    ``xdp_ring``); veth3's XDP_PASS gives every frame, MACs swapped, to its
    stack in order; one ``xdp_redirect`` per frame (map tx_port, index 0), no
    ``xdp_devmap_xmit`` (skbs are not bulked).
    """
    sc = devmap_redirect()
    return replace(
        sc, name="devmap_redirect_generic_threaded", threaded_napi=True,
        attach=(replace(sc.attach[0], mode="generic"),),
        doc=devmap_redirect_generic_threaded.__doc__ or "")


def devmap_redirect_generic_peer_generic() -> Scenario:
    """devmap_redirect in generic mode on veth0, veth3 (veth2's peer) with the XDP_PASS
    program in generic mode too.

    Kernel: ``generic_xdp_tx`` on veth2 is ``veth_xmit``; veth3 has no native
    program (no NAPI), so ``__netif_rx`` queues the skb on the backlog, whose
    poll runs veth3's generic program: every frame, MACs swapped, reaches
    veth3's stack in order; one ``xdp_redirect`` per frame, no
    ``xdp_devmap_xmit``.
    """
    sc = devmap_redirect()
    return replace(
        sc, name="devmap_redirect_generic_peer_generic",
        attach=(replace(sc.attach[0], mode="generic"),
                Attach("veth3", PASS_OBJ, "xdp_pass", mode="generic",
                       collection=f"{PASS_OBJ}@veth3")),
        doc=devmap_redirect_generic_peer_generic.__doc__ or "")


def _ports_egress(colls: Mapping[str, Collection], ifindex_of: Callable[[str], int]) -> None:
    """``ports`` = veth0, veth2 with redirect_map's ``xdp/devmap`` program, veth4, veth2,
    veth4 with that program."""
    ports = colls["redirect_bcast.o"].maps["ports"]
    egress = {"fd": prog_fd(colls["redirect_map.o"].programs["xdp_redirect_map_egress"])}
    ports[0] = {"ifindex": ifindex_of("veth0")}
    ports[1] = {"ifindex": ifindex_of("veth2"), "bpf_prog": egress}
    ports[2] = {"ifindex": ifindex_of("veth4")}
    ports[3] = {"ifindex": ifindex_of("veth2")}
    ports[4] = {"ifindex": ifindex_of("veth4"), "bpf_prog": egress}


def devmap_broadcast_egress_prog() -> Scenario:
    """devmap_broadcast with redirect_map's ``xdp/devmap`` program on entries, and two
    entries for veth2 and veth4: ``ports`` = veth0, veth2 (with the program), veth4,
    veth2, veth4 (with the program).

    Every target but the last entry gets a clone (``xdpf_clone``). A device has
    one bulk queue per CPU (``dev->xdp_bulkq``), whichever entries name it: the
    first frame queued since the poll's flush sets its ``dev_rx`` and program
    (``bq_enqueue``), and ``bq_xmit_all`` runs that program over the whole bulk.
    redirect_map.o is attached to veth4, which receives nothing (it only loads
    the collection holding the program). Kernel: veth1 gets every frame
    unchanged; veth3 gets each twice, both copies with the source MAC
    rewritten to ``tx_src_mac`` (02:00:00:00:00:01: the first veth2 entry's
    program ran on the bulk of two clones); veth5 gets each twice unchanged (the
    program of veth4's second entry never runs: its first entry, without one,
    queued first). Per frame one ``xdp_redirect`` as in devmap_broadcast, then
    one ``xdp_devmap_xmit`` per device: veth4 (sent 2), veth2 (sent 2), veth0
    (sent 1).
    """
    return Scenario("devmap_broadcast_egress_prog", P3,
                    (Attach("veth0", "redirect_bcast.o", "xdp_redirect_bcast"),
                     Attach("veth4", "redirect_map.o", "xdp_redirect_map_prog")),
                    _traffic(P3, "veth0"), setup=_ports_egress,
                    maps=("redirect_bcast.o:rxcnt",),
                    doc=devmap_broadcast_egress_prog.__doc__ or "")


def _frames_bcast_setup(colls: Mapping[str, Collection],
                        ifindex_of: Callable[[str], int]) -> None:
    """``tx_port[0]`` = veth2; ``ports`` = veth4 with redirect_map's ``xdp/devmap``
    program, veth6, veth4."""
    _tx_port("veth2")(colls, ifindex_of)
    ports = colls["redirect_bcast.o"].maps["ports"]
    egress = {"fd": prog_fd(colls["redirect_map.o"].programs["xdp_redirect_map_egress"])}
    ports[0] = {"ifindex": ifindex_of("veth4"), "bpf_prog": egress}
    ports[1] = {"ifindex": ifindex_of("veth6")}
    ports[2] = {"ifindex": ifindex_of("veth4")}


def veth_frames_broadcast_egress_prog() -> Scenario:
    """A veth broadcasting the xdp_frames another device queued on it, through an entry
    with a program: veth0 redirects every frame (redirect_map.o, MACs swapped) to
    veth2, so veth3 receives xdp_frames (``veth_xdp_rcv_one``), which its
    ``xdp_redirect_bcast`` sends to ``ports`` = veth4 (with redirect_map's
    ``xdp/devmap`` program), veth6, veth4.

    Kernel: veth0's poll: ``xdp_redirect`` (veth0 -> veth2, map tx_port) and
    ``xdp_devmap_xmit`` (veth0 -> veth2, sent 1) per frame; veth3's poll: one
    ``xdp_redirect`` (veth3, to_ifindex veth4, map ports, index 0), clones to
    veth4 and veth6 and the frame itself to veth4, then ``xdp_devmap_xmit`` for
    veth6 (sent 1) and veth4 (sent 2: one bulk queue holding a clone and the
    frame, the first entry's program run over both). veth5 gets every frame
    twice, MACs swapped and the source MAC rewritten to ``tx_src_mac``
    (02:00:00:00:00:01); veth7 gets it once, MACs swapped.
    """
    return Scenario("veth_frames_broadcast_egress_prog", P4,
                    (Attach("veth0", "redirect_map.o", "xdp_redirect_map_prog"),
                     Attach("veth3", "redirect_bcast.o", "xdp_redirect_bcast")),
                    _traffic(P4, "veth0"), setup=_frames_bcast_setup,
                    maps=("redirect_bcast.o:rxcnt",),
                    doc=veth_frames_broadcast_egress_prog.__doc__ or "")


def veth_frames_broadcast_egress_prog_threaded() -> Scenario:
    """veth_frames_broadcast_egress_prog with threaded NAPI.

    Kernel: as without it (each NAPI instance polled by a kthread of its own;
    ``veth_poll`` returns other devices' pages into their pools' rings, whose
    ``producer_lock`` it takes). pyxdp: veth3's poll of the xdp_frames veth0 queued
    (pages of veth0's pool) runs in the native loop under the host lock (its
    devmap is not an array), the pages it frees going back into that pool's ring
    under the pool's lock while veth0's poll refills from it on its own thread;
    veth5's and veth7's polls (xdp_pass, without the host lock) take veth3's
    xdp_frames natively too, the broadcast's clones (the system allocator's
    pages) on the Python path.
    """
    return replace(veth_frames_broadcast_egress_prog(),
                   name="veth_frames_broadcast_egress_prog_threaded", threaded_napi=True,
                   doc=veth_frames_broadcast_egress_prog_threaded.__doc__ or "")


def _cpumap_setup(colls: Mapping[str, Collection], ifindex_of: Callable[[str], int]) -> None:
    coll = colls["redirect_cpu.o"]
    fd = prog_fd(coll.programs["xdp_cpumap_filter"])
    for slot, cpu in enumerate((0, 1)):
        coll.maps["cpu_map"][cpu] = {"qsize": 64, "bpf_prog": {"fd": fd}}
        coll.maps["cpus_available"][slot] = cpu
    coll.maps["cpus_count"][0] = 2


def cpumap_prog() -> Scenario:
    """samples/redirect_cpu.o ``xdp_redirect_cpu_proto`` on veth0, cpumap entries for CPUs 0
    and 1 carrying ``xdp_cpumap_filter``.

    TCP goes to CPU 0, UDP to CPU 1, ICMP/ICMPv6 (slot 2, clamped) and
    everything else to CPU 0. Kernel: every frame is redirected
    (``xdp_redirect`` per frame: to_ifindex 0, map cpu_map, map_index = the
    CPU); each NAPI poll's flush fires one ``xdp_cpumap_enqueue`` (processed
    1, drops 0, cpu = the sender's CPU, to_cpu the target); the kthreads run
    the filter, which drops UDP to port 9 (``xdp_cpumap_kthread`` sums:
    processed = frames, xdp_drop = UDP/9 frames, xdp_pass = the rest); the
    survivors reach veth0's stack (the frame's ``dev_rx``), unchanged. The
    two kthreads deliver concurrently: only the per-CPU order is fixed.
    """
    return Scenario("cpumap_prog", P1,
                    (Attach("veth0", "redirect_cpu.o", "xdp_redirect_cpu_proto"),),
                    _traffic(P1, "veth0"), setup=_cpumap_setup, maps=("rx_cnt",),
                    ordered=False, doc=cpumap_prog.__doc__ or "")


def cpumap_prog_threaded() -> Scenario:
    """cpumap_prog with threaded NAPI.

    Kernel: as cpumap_prog, the polls on a NAPI kthread (``xdp_cpumap_enqueue``'s
    ``cpu`` is wherever it ran, its bulks as many frames as one poll found).
    pyxdp: veth0's poll runs without the host lock (redirect_cpu's maps are
    arrays, per-CPU arrays and the cpumap) and its redirects into the entries
    are the native loop's: the poll's own bulk queues, flushed into each
    entry's ``ptr_ring`` under its producer lock.
    """
    return replace(cpumap_prog(), name="cpumap_prog_threaded", threaded_napi=True,
                   doc=cpumap_prog_threaded.__doc__ or "")


def adjust_meta_pass() -> Scenario:
    """samples/adjust_tail.o on veth0, samples/meta.o ``xdp_meta_producer`` on veth1.

    adjust_tail turns IPv4 frames over 600 bytes (no options, not VLAN)
    into 70-byte ICMP "fragmentation needed" replies (head -28, tail cut)
    sent back with XDP_TX; everything else is XDP_PASS. Kernel: the other
    frames reach veth0's stack unchanged; the replies arrive at veth1, run
    the meta producer (16 bytes of metadata, XDP_PASS) and reach veth1's
    stack as built (metadata is not part of the frame); ``icmp_sent`` counts
    them; ``xdp_bulk_tx`` (ifindex veth0) sums sent = replies.
    """
    return Scenario("adjust_meta_pass", P1,
                    (Attach("veth0", "adjust_tail.o", "xdp_icmp_too_big"),
                     Attach("veth1", "meta.o", "xdp_meta_producer")),
                    _traffic(P1, "veth0"), maps=("icmp_sent",),
                    doc=adjust_meta_pass.__doc__ or "")


#: Every ready scenario builder, by name.
SCENARIOS: Final[dict[str, Callable[[], Scenario]]] = {
    f.__name__: f for f in (xdp1_drop, xdp2_tx, xdp2_tx_no_peer_prog, xdp2_tx_generic,
                            devmap_redirect,
                            devmap_redirect_no_peer_prog, devmap_missing_aborted,
                            devmap_redirect_mtu, redirect_ifindex_missing,
                            redirect_ifindex_missing_generic, redirect_to_lo,
                            redirect_to_lo_generic, redirect_to_lo_up_generic,
                            devmap_egress_prog, devmap_broadcast,
                            devmap_broadcast_exclude_ingress, devmap_broadcast_egress_prog,
                            devmap_broadcast_generic_mtu, veth_frames_broadcast_egress_prog,
                            veth_frames_broadcast_egress_prog_threaded,
                            cpumap_prog, cpumap_prog_threaded, adjust_meta_pass,
                            xdp2_tx_threaded,
                            devmap_redirect_threaded, devmap_redirect_generic_threaded,
                            redirect_ifindex_threaded,
                            redirect_to_lo_up_generic_prog,
                            devmap_redirect_generic_peer_generic, lo_generic_tx_backlog)}


# --------------------------------------------------------------------------
# The kernel backend
# --------------------------------------------------------------------------

_run_counter = itertools.count()


def _ip(*args: str) -> None:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        raise PyxdpError(f"ip {' '.join(args)}: {res.stderr.strip()}")


def _write_sysctl(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


class _Capture:
    """A device's incoming frames as on the wire (:class:`PacketCapture`), kept in order."""

    def __init__(self, dev: str) -> None:
        self.dev = dev
        self.frames: list[bytes] = []
        self._cap = PacketCapture(dev)
        self.sock = self._cap.sock  # what the lab's settle loop waits on

    def drain(self) -> int:
        frames, _ = self._cap.read(0.0, limit=sys.maxsize)
        self.frames += frames
        return len(frames)

    def drops(self) -> int:
        return self._cap.drops()

    def close(self) -> None:
        self._cap.close()


@contextmanager
def _pinned(cpu: int) -> Iterator[None]:
    old = os.sched_getaffinity(0)  # 0: the calling thread
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)


def _link_stats(ns: str) -> dict[str, LinkStats]:
    res = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show"], capture_output=True,
                         text=True, timeout=60, check=True)
    out: dict[str, LinkStats] = {}
    for link in json.loads(res.stdout):
        s = link.get("stats64", {})
        rx, tx = s.get("rx", {}), s.get("tx", {})
        out[link["ifname"]] = LinkStats(rx.get("packets", 0), rx.get("bytes", 0),
                                        rx.get("dropped", 0), tx.get("packets", 0),
                                        tx.get("bytes", 0), tx.get("dropped", 0))
    return out


def _normalize(ev: TraceEvent, devs: Mapping[int, str], progs: Mapping[int, str],
               maps: Mapping[int, str]) -> LabEvent | None:
    """The event as a :class:`LabEvent`, or None when it is not this lab's."""
    rec: Any = ev.record
    mine = False
    fields: list[tuple[str, int | str]] = []
    for name in rec._fields:
        value: int | str = getattr(rec, name)
        if name in _IFINDEX_FIELDS and value in devs:
            value, mine = devs[int(value)], True
        elif name == "prog_id" and value in progs:
            value, mine = progs[int(value)], True
        elif name == "map_id" and value in maps:
            value, mine = maps[int(value)], True
        fields.append((name, value))
    return LabEvent(ev.name, tuple(fields)) if mine else None


def _ifindex_base() -> int:
    # Lab ifindexes are unique per process and run: tracing instances see
    # every namespace's events, and these pick ours out.
    return 1_000_000 + ((os.getpid() * 64 + next(_run_counter) % 64) % 50_000_000) * 16


@dataclass(frozen=True)
class SkbDrop:
    """An ``skb:kfree_skb`` event: ``reason`` (``enum skb_drop_reason`` name without
    its prefix), the freeing function (``location``, symbol+offset) and the skb's
    ``protocol`` (host order)."""

    reason: str
    location: str
    protocol: int


@dataclass
class Settled:
    """What one batch of frames did once the lab went quiet: lab events in order,
    frames each device's stack saw, and (with ``skb_drops``) the sender's kfree_skb events."""

    events: list[LabEvent]
    rx: dict[str, list[bytes]]
    drops: list[SkbDrop]


_KFREE_RE: Final = re.compile(r"protocol=(?P<proto>\d+) location=(?P<loc>\S+) reason: (?P<r>\w+)")


class KernelLab:
    """A scenario's topology built on Linux (root), frames sent one batch at a time.

    Entering builds what :func:`run_kernel` describes; :meth:`send` makes a
    device receive a frame (on rx queue ``queue``: see there); :meth:`settle` waits until
    the lab is quiet and returns what happened since the last call. With
    ``skb_drops``, ``skb:kfree_skb`` is read in a tracing instance of its own,
    filtered to the sending thread (``common_pid``): a frame sent to a veth
    with an XDP program is received by NAPI in the sender's softirq before
    ``send()`` returns, so its stack's drops fire in that thread; nothing else
    on the machine shares that pid (a softirq pushed to ``ksoftirqd`` or a
    cpumap kthread is not seen). Leaving tears the namespace down.
    """

    def __init__(self, scenario: Scenario, *, skb_drops: bool = False) -> None:
        self.scenario = scenario
        self.skb_drops = skb_drops
        self.ns = f"pyxdp-lab-{os.getpid()}-{next(_run_counter)}"
        base = _ifindex_base()
        self.ifindex = {dev: base + i for i, dev in enumerate(scenario.devices)}
        self.stack = ExitStack()
        self.colls: dict[str, Collection] = {}
        self._all_events: list[LabEvent] = []
        self._senders: dict[str, socket.socket] = {}
        self._caps: list[_Capture] = []
        self._seen: dict[str, int] = {}
        self._kfree: TraceInstance | None = None
        self._kfree_fd = -1

    def __enter__(self) -> KernelLab:
        _ip("netns", "add", self.ns)
        self.stack.callback(subprocess.run, ["ip", "netns", "del", self.ns],
                            capture_output=True, timeout=60)
        try:
            self._build()
        except BaseException:
            self.stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    def _build(self) -> None:
        from pyxdp.kernel.link import XdpLink
        from pyxdp.kernel.netlink import netns
        from pyxdp.kernel.tracefs import TraceInstance

        sc, ns, ifindex, stack = self.scenario, self.ns, self.ifindex, self.stack
        stack.enter_context(netns(ns))
        # This thread's /proc/sys/net is the namespace's: no IPv6 means no
        # DAD, router or MLD packets of the stack's own on the lab devices.
        for conf in ("all", "default"):
            _write_sysctl(f"/proc/sys/net/ipv6/conf/{conf}/disable_ipv6", "1")
        for a, b in sc.pairs:
            q = str(max(sc.link(a).queues, sc.link(b).queues))
            ends = []
            for d in (a, b):
                ends.append(["index", str(ifindex[d]), "address", sc.mac(d).hex(":"),
                             "mtu", str(sc.link(d).mtu), "numtxqueues", q, "numrxqueues", q])
            _ip("-n", ns, "link", "add", a, *ends[0], "type", "veth", "peer", "name", b,
                *ends[1])
        for dev in sc.devices:
            _ip("-n", ns, "link", "set", dev, "up")
        if sc.lo_up:
            _ip("-n", ns, "link", "set", "lo", "up")

        for key, obj in sc.collections.items():
            self.colls[key] = stack.enter_context(Collection(load_spec(obj), "kernel"))
        self.progs = {p.handle.id: f"{k}:{n}"  # type: ignore[attr-defined]
                      for k, c in self.colls.items() for n, p in c.programs.items()}
        self.maps = {m.handle.id: f"{k}:{n}"  # type: ignore[attr-defined]
                     for k, c in self.colls.items() for n, m in c.maps.items()}
        self.devs = {i: d for d, i in ifindex.items()}
        if sc.setup is not None:
            sc.setup(self.colls, lambda dev: ifindex[dev])
        for att in sc.attachments:
            # A bpf_link: detached with the stack, or when this process dies.
            stack.enter_context(XdpLink.attach(
                att.dev, self.colls[att.key].programs[att.program], mode=att.mode))
        if sc.threaded_napi:  # the NAPI instances the programs made (gone with the netns)
            from pyxdp.kernel.netdev_genl import thread_napis
            for dev in sc.devices:
                thread_napis(dev)
        self.trace = stack.enter_context(TraceInstance(LAB_EVENTS, buffer_size_kb=4096))
        if self.skb_drops:
            self._kfree = stack.enter_context(TraceInstance(()))
            ev = os.path.join(self._kfree.path, "events", "skb", "kfree_skb")
            if not os.path.isdir(ev):
                raise PyxdpError("this kernel has no skb:kfree_skb tracepoint")
            _write_sysctl(os.path.join(ev, "filter"), f"common_pid == {threading.get_native_id()}")
            _write_sysctl(os.path.join(ev, "enable"), "1")
            self._kfree_fd = os.open(os.path.join(self._kfree.path, "trace_pipe"),
                                     os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            stack.callback(os.close, self._kfree_fd)
        self._caps = [_Capture(d) for d in sc.observed]
        for c in self._caps:
            stack.callback(c.close)
        self._seen = {c.dev: 0 for c in self._caps}

    def send(self, dev: str, frame: bytes, queue: int = 0) -> None:
        """``dev`` receives ``frame`` on rx queue ``queue``, sent by its peer.

        veth_xmit puts a frame on the peer's rx queue of the tx queue it left
        by. With one tx queue that is queue 0; with several, the sender uses
        ``PACKET_QDISC_BYPASS``, whose tx queue is the sending CPU modulo the
        queue count (packet_pick_tx_queue records ``cpu % n`` as the rx queue
        and the tx hash keeps it), and runs on CPU ``queue``.
        """
        peer = self.scenario.peer(dev)
        many = max(self.scenario.link(dev).queues, self.scenario.link(peer).queues) > 1
        cpu = queue if many else SENDER_CPU
        if queue and not many:
            raise PyxdpError(f"{dev} has one rx queue: no queue {queue}")
        if cpu not in os.sched_getaffinity(0):
            raise PyxdpError(f"a frame reaches rx queue {queue} of {dev} only when sent from "
                             f"CPU {queue}, which this process may not run on")
        s = self._senders.get(dev)
        if s is None:
            s = self.stack.enter_context(socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
            if many:
                s.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
            s.bind((peer, 0))
            self._senders[dev] = s
        with _pinned(cpu):
            if s.send(frame) != len(frame):
                raise PyxdpError(f"short send of a {len(frame)}-byte frame")

    def _read_kfree(self) -> list[SkbDrop]:
        out: list[SkbDrop] = []
        if self._kfree_fd < 0:
            return out
        data = b""
        while True:
            try:
                chunk = os.read(self._kfree_fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        for line in data.decode("utf-8", "replace").splitlines():
            m = _KFREE_RE.search(line)
            if m is not None and " kfree_skb: " in line:
                out.append(SkbDrop(m["r"], m["loc"], int(m["proto"])))
            elif "LOST" in line:
                raise PyxdpError(f"{self.scenario.name}: kfree_skb events lost")
        return out

    def settle(self, settle: float = 0.2, timeout: float = 15.0) -> Settled:
        """Wait until neither a frame nor an event arrived for ``settle`` seconds (cpumap
        kthreads are asynchronous); what happened since the last call."""
        raw: list[TraceEvent] = []
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            select.select([c.sock for c in self._caps], [], [], settle / 4)
            got = sum(c.drain() for c in self._caps)
            evs = self.trace.read(0)
            raw.extend(evs)
            now = time.monotonic()
            if got or evs:
                quiet_since = now
            elif now - quiet_since >= settle:
                break
        raw.extend(self.trace.read(0.05))
        dropped = {c.dev: c.drops() for c in self._caps if c.drops()}
        if dropped or self.trace.lost:
            raise Overrun(f"{self.scenario.name}: capture drops {dropped}, "
                          f"trace events lost {self.trace.lost}")
        events = [e for e in (_normalize(ev, self.devs, self.progs, self.maps) for ev in raw)
                  if e is not None]
        self._all_events.extend(events)
        rx = {}
        for c in self._caps:
            rx[c.dev] = c.frames[self._seen[c.dev]:]
            self._seen[c.dev] = len(c.frames)
        return Settled(events, rx, self._read_kfree())

    def result(self) -> LabResult:
        """Everything since the lab was built, as a :class:`LabResult`."""
        dumped, percpu = _dump_maps(self.scenario, self.colls)
        links = {d: s for d, s in _link_stats(self.ns).items() if d in self.ifindex}
        return LabResult(self.scenario.name, "kernel",
                         {c.dev: tuple(c.frames) for c in self._caps}, dumped, percpu,
                         summarize_trace(self._all_events), tuple(self._all_events), links,
                         dict(self.ifindex))


class Overrun(PyxdpError):
    """A capture dropped frames or tracefs lost events: the run saw less than happened."""


OVERRUN_ATTEMPTS = 3
"""How many times :func:`run_kernel` runs a scenario whose record overran."""


def run_kernel(scenario: Scenario, *, settle: float = 0.2, timeout: float = 15.0) -> LabResult:
    """Run ``scenario`` on Linux (root): a fresh namespace, veth pairs, native XDP.

    Steps (:class:`KernelLab`): create the namespace ``pyxdp-lab-<pid>-<n>``
    and the pairs (MACs from :meth:`Scenario.mac`, lab-unique ifindexes, IPv6
    off so the stack sends nothing of its own, all up); load each collection
    with the kernel backend; run ``setup``; attach
    :attr:`Scenario.attachments`; start a tracefs instance and a capture per
    device; send the frames from the peers (thread pinned to
    :data:`SENDER_CPU`); wait until neither a frame nor an event arrived for
    ``settle`` seconds (cpumap kthreads are asynchronous); collect; tear
    everything down (the namespace is deleted even on failure). A run whose
    capture or trace overran (:class:`Overrun`) is repeated, up to
    :data:`OVERRUN_ATTEMPTS` runs in all.
    """
    for attempt in range(OVERRUN_ATTEMPTS):
        try:
            with KernelLab(scenario) as lab:
                for dev, frame in scenario.traffic:
                    lab.send(dev, frame)
                lab.settle(settle, timeout)
                return lab.result()
        except Overrun:
            # tracefs and the captures see the whole machine: another workload's XDP
            # events can overflow the buffers; the run is repeated, a real loss stays
            if attempt == OVERRUN_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------
# pyxdp's userspace datapath
# --------------------------------------------------------------------------

def run_pyxdp(scenario: Scenario, *, engine: str = "auto", events: bool = True,
              native: bool = True, burst: bool = False) -> LabResult:
    """Run ``scenario`` on pyxdp's datapath: a :class:`~pyxdp.net.netdevice.Host`
    with the same veth pairs (same MACs), the same collections loaded on its
    userspace backend, the same setup and attachments; each frame is
    transmitted by the peer and the host run until idle before the next one
    (the kernel's one poll per frame). The host's page accounting is checked
    at the end (a leak raises).

    ``events``: record every tracepoint event in order (listening keeps the
    native poll loop out, as a listener must see each event); without it the
    trace counts come from the tracepoint counters and the native loop runs
    where it can. The host's ``lo`` is down, as in the kernel lab's new
    namespace.

    ``burst``: consecutive frames one device sends go out as one list (one
    ``veth_xmit`` of several skbs, the host run after it), so the peer's polls
    meet several frames at once, in the same order.
    """
    from pyxdp.net.netdevice import Host
    from pyxdp.net.stack import SkbBatch
    from pyxdp.net.trace import Tracer

    tracer = Tracer()
    host = Host(f"lab-{scenario.name}", engine=engine, tracer=tracer, native=native,
                threaded_napi=scenario.threaded_napi)
    try:
        host.devices[LO_IFINDEX].up = scenario.lo_up  # down in a new namespace
        devs: dict[str, Any] = {}
        for a, b in scenario.pairs:
            la, lb = scenario.link(a), scenario.link(b)
            da, db = host.veth(a, b, queues=max(la.queues, lb.queues))
            da.mac, db.mac = scenario.mac(a), scenario.mac(b)
            da.mtu, db.mtu = la.mtu, lb.mtu
            devs[a], devs[b] = da, db
        ifindex = {d: devs[d].ifindex for d in scenario.devices}
        names = {i: d for d, i in ifindex.items()}
        colls = {key: host.load(load_spec(obj)) for key, obj in scenario.collections.items()}
        progs = {p.handle.id: f"{k}:{n}"  # type: ignore[attr-defined]
                 for k, c in colls.items() for n, p in c.programs.items()}
        maps = {m.handle.id: f"{k}:{n}"  # type: ignore[attr-defined]
                for k, c in colls.items() for n, m in c.maps.items()}
        if scenario.setup is not None:
            scenario.setup(colls, lambda dev: ifindex[dev])
        devs["lo"] = host.devices[LO_IFINDEX]
        for att in scenario.attachments:
            devs[att.dev].attach_xdp(colls[att.key].programs[att.program], mode=att.mode)
        rx: dict[str, list[bytes]] = {d: [] for d in scenario.observed}
        stacks = {**names, LO_IFINDEX: "lo"} if scenario.lo_up else names

        def seen(batch: SkbBatch) -> None:
            for i, pkt in zip(batch.ifindex.tolist(), batch.packets(), strict=True):
                if i in stacks:
                    rx[stacks[i]].append(pkt)

        host.stack.on_receive(seen)
        queue = tracer.listen(LAB_EVENTS) if events else None
        runs: list[tuple[str, list[bytes]]] = []
        for dev, frame in scenario.traffic:
            if burst and runs and runs[-1][0] == dev:
                runs[-1][1].append(frame)
            else:
                runs.append((dev, [frame]))
        for dev, frames in runs:
            devs[scenario.peer(dev)].transmit(frames)
            host.run()
        recorded: list[LabEvent] = []
        if queue is not None:
            recorded = [e for e in (_normalize(ev, names, progs, maps) for ev in queue.drain())
                        if e is not None]
            queue.close()
        dumped, percpu = _dump_maps(scenario, colls)
        trace = summarize_trace(recorded) if events else _counted(tracer)
        links = {d: devs[d].link_stats() for d in scenario.devices}
        return LabResult(scenario.name, "pyxdp", {d: tuple(f) for d, f in rx.items()}, dumped,
                         percpu, trace, tuple(recorded), links, ifindex)
    finally:
        host.close()


def _counted(tracer: Any) -> dict[str, TraceCount]:
    """Per lab tracepoint, the :class:`TraceCount` its counters add up to."""
    snap = tracer.snapshot()
    out: dict[str, TraceCount] = {}
    for ev in LAB_EVENTS:
        columns = snap.columns[ev]
        rows = list(snap.counters[ev].values())
        if not rows:
            out[ev] = TraceCount()
            continue
        total = [sum(r[i] for r in rows) for i in range(len(columns))]
        named = dict(zip(columns, total, strict=True))
        events = named.pop("events", 0)
        # xdp_redirect_err keys its counters by err: every event has one.
        errors = named.pop("errors", events if ev == "xdp_redirect_err" else 0)
        out[ev] = TraceCount(events, {k: v for k, v in named.items() if k in _COUNT_FIELDS},
                             errors)
    return out
