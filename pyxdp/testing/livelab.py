"""A live lab: the same XDP object on a real veth, run by Linux natively and by pyxdp in
user space (:class:`pyxdp.xsk.live.LiveDataplane`), fed and observed the same way.

Topology, in a network namespace this module creates and deletes:

* ``veth0`` (10.77.0.1/24) - the device under test; frames arrive on it from
  its peer ``veth1`` (sent with ``AF_PACKET`` there); what it transmits
  (XDP_TX) arrives back at ``veth1``, where :class:`Capture` sees it;
* ``veth2`` - the redirect target; its peer ``veth3`` is where those frames
  come out;
* ``veth1`` and ``veth3`` run the trivial XDP_PASS program natively (Linux's
  veth takes ``ndo_xdp_xmit`` frames only into a peer with NAPI: see
  :mod:`pyxdp.testing.vethlab`'s peer rule), so both backends' frames reach
  their stacks the same way.

IPv6 is off in the namespace (no router solicitations or MLD reports among
the frames captured); 10.77.0.2 is a static neighbour of veth0 at veth1's
address.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from pyxdp import samples
from pyxdp.collection import Collection
from pyxdp.errors import PyxdpError
from pyxdp.kernel.link import XdpLink
from pyxdp.kernel.netlink import ifindex_of, netns
from pyxdp.spec import CollectionSpec
from pyxdp.uapi.if_packet import PACKET_IGNORE_OUTGOING, SOL_PACKET

__all__ = ["IP0", "MACS", "PEER_IP", "Capture", "LiveCase", "LiveResult", "live_netns",
           "run_case", "send_frames"]

MACS = {f"veth{i}": bytes([2, 0, 0, 0, 0x1A, i]) for i in range(4)}
IP0 = "10.77.0.1"
PEER_IP = "10.77.0.2"
PASS_SPEC_TEXT = "r0 = 2\nexit"
SAMPLES = samples.DIR  # the checkout's samples/ or the wheel's copy

Setup = Callable[[Collection], None]


def _ip(ns: str | None, *args: str) -> None:
    cmd = ["ip", *(["-n", ns] if ns else []), *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        raise PyxdpError(f"{' '.join(cmd)}: {res.stderr.strip()}")


def _pass_spec() -> CollectionSpec:
    from pyxdp.testing.kernel_live import asm_spec
    return asm_spec("xdp_pass", PASS_SPEC_TEXT)


@contextmanager
def live_netns() -> Iterator[str]:
    """The lab's namespace, entered by the calling thread for the body (threads it starts
    inherit it); deleted afterwards."""
    name = f"pyxdp-live-{os.getpid()}"
    _ip(None, "netns", "add", name)
    try:
        with netns(name):
            for knob in ("all", "default"):
                with open(f"/proc/sys/net/ipv6/conf/{knob}/disable_ipv6", "w") as f:
                    f.write("1")
            for a, b in (("veth0", "veth1"), ("veth2", "veth3")):
                _ip(None, "link", "add", a, "address", MACS[a].hex(":"), "type", "veth",
                    "peer", "name", b, "address", MACS[b].hex(":"))
            for d in MACS:
                _ip(None, "link", "set", d, "up")
            _ip(None, "addr", "add", f"{IP0}/24", "dev", "veth0")
            _ip(None, "neigh", "add", PEER_IP, "lladdr", MACS["veth1"].hex(":"), "dev",
                "veth0", "nud", "permanent")
            with ExitStack() as peers:
                for d in ("veth1", "veth3"):
                    coll = peers.enter_context(Collection(_pass_spec(), "kernel"))
                    handle = coll.programs["xdp_pass"].handle
                    peers.enter_context(XdpLink.attach(d, handle,  # type: ignore[arg-type]
                                                       mode="native"))
                yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=60)


def send_frames(dev: str, frames: Sequence[bytes]) -> None:
    """Transmit ``frames`` from ``dev`` (its peer receives them), in order."""
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as s:
        s.bind((dev, 0))
        for f in frames:
            s.send(f)


class Capture:
    """What reaches ``dev``'s stack from the wire (``AF_PACKET``, incoming only)."""

    def __init__(self, dev: str) -> None:
        self.frames: list[bytes] = []
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW | socket.SOCK_NONBLOCK, 0)
        self.sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        self.sock.bind((dev, 0x0003))

    def drain(self) -> int:
        n = 0
        while True:
            try:
                self.frames.append(self.sock.recv(1 << 16))
            except BlockingIOError:
                return n
            n += 1

    def close(self) -> None:
        self.sock.close()


@dataclass(frozen=True)
class LiveCase:
    """One object on veth0: ``section``, maps filled by ``setup`` (on either backend)."""

    name: str
    obj: str | CollectionSpec
    section: str | None = None
    setup: Setup | None = None
    counters: tuple[str, ...] = ()  # per-CPU array maps compared (keys 0..255 summed)


@dataclass
class LiveResult:
    """Frames that came out at veth1 and veth3, UDP payloads delivered on IP0:5678, and
    the counters' non-zero slots."""

    rx: dict[str, list[bytes]] = field(default_factory=dict)
    udp: list[bytes] = field(default_factory=list)
    maps: dict[str, dict[int, int]] = field(default_factory=dict)
    stats: Any = None


def _counters(coll: Collection, names: Sequence[str]) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    for n in names:
        m = coll.maps[n]
        out[n] = {k: int(v) for k in range(min(m.spec.max_entries, 256))
                  if (v := m.sum(k))}
    return out


def run_case(case: LiveCase, frames: Sequence[bytes], backend: str, *,
             settle: float = 0.3, live_backend: str = "auto",
             threaded_napi: bool = False, busy_poll: int = 0) -> LiveResult:
    """Send ``frames`` into veth0 with ``case`` run by ``backend`` ("kernel": Linux
    native XDP; "pyxdp": :class:`~pyxdp.xsk.live.LiveDataplane`); inside
    :func:`live_netns`."""
    caps = {d: Capture(d) for d in ("veth1", "veth3")}
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((IP0, 5678))
    udp.setblocking(False)
    res = LiveResult()
    try:
        if backend == "kernel":
            coll = Collection.load(case.obj, backend="kernel") if isinstance(case.obj, str) \
                else Collection(case.obj, "kernel")
            with coll, XdpLink.attach("veth0", coll.program(case.section).handle,  # type: ignore[arg-type]
                                      mode="native"):
                if case.setup:
                    case.setup(coll)
                _exchange(frames, caps, settle)
                res.maps = _counters(coll, case.counters)
        elif backend == "pyxdp":
            from pyxdp.xsk.live import LiveDataplane, LiveOptions
            ifaces = ["veth0", "veth2"] if live_backend != "af_packet" else ["veth0"]
            with LiveDataplane(case.obj, ifaces, section=case.section,
                               options=LiveOptions(backend=live_backend,
                                                   threaded_napi=threaded_napi,
                                                   busy_poll=busy_poll)) as dp:
                if case.setup:
                    case.setup(dp.collection)
                dev = dp.devices[0]
                _exchange(frames, caps, settle,
                          lambda: dev.stats.rx_packets >= len(frames))
                res.maps = _counters(dp.collection, case.counters)
                res.stats = dp.stats()
        else:
            raise ValueError(f"backend {backend!r}: 'kernel' or 'pyxdp'")
        while True:
            try:
                res.udp.append(udp.recv(1 << 16))
            except BlockingIOError:
                break
        res.rx = {d: c.frames for d, c in caps.items()}
    finally:
        udp.close()
        for c in caps.values():
            c.close()
    return res


def _exchange(frames: Sequence[bytes], caps: dict[str, Capture], settle: float,
              taken: Callable[[], bool] = lambda: True) -> None:
    """Send, wait until ``taken()`` says the datapath has every frame (10 s at most),
    then drain the captures until nothing came for ``settle`` seconds."""
    time.sleep(0.05)
    send_frames("veth1", frames)
    deadline = time.monotonic() + 10
    while not taken() and time.monotonic() < deadline:
        time.sleep(0.01)
    quiet = time.monotonic() + settle
    while time.monotonic() < min(quiet, deadline):
        if sum(c.drain() for c in caps.values()):
            quiet = time.monotonic() + settle
        time.sleep(0.01)


def devmap_to(dev: str) -> Setup:
    """``tx_port[0] = dev`` (redirect_map.o), no devmap program."""
    def setup(coll: Collection) -> None:
        coll.maps["tx_port"][0] = {"ifindex": ifindex_of(dev), "bpf_prog": {"fd": 0}}
    return setup


CASES = {
    "tx": LiveCase("tx", str(SAMPLES / "xdp2.o"), counters=("rxcnt",)),
    "redirect": LiveCase("redirect", str(SAMPLES / "redirect_map.o"),
                         "xdp_redirect_map_prog", devmap_to("veth2"), ("rxcnt",)),
    "drop": LiveCase("drop", str(SAMPLES / "xdp1.o"), counters=("rxcnt",)),
    "pass": LiveCase("pass", _pass_spec()),
}
