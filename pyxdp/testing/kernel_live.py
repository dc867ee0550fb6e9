"""The kernel's own XDP datapath from memory: the baseline pyxdp's engines are compared to.

Everything runs through ``BPF_PROG_TEST_RUN`` (net/bpf/test_run.c):

* live frames (``BPF_F_TEST_XDP_LIVE_FRAMES``, ``bpf_test_run_xdp_live``):
  the packet is turned into real xdp_frames from a page_pool, ``repeat``
  of them in batches of ``batch_size``, and the verdict is *executed*:
  XDP_DROP recycles the page, XDP_TX becomes a redirect to the ingress
  device, XDP_REDIRECT goes through ``xdp_do_redirect_frame`` and a flush
  per batch. Measured: XDP_DROP; XDP_TX with ``ingress_ifindex`` a veth whose
  peer drops natively; ``bpf_redirect_map`` through a devmap to that veth;
* normal mode (``bpf_test_run``): the samples xdp1 (parse + per-CPU count +
  drop) and xdp2 (parse + count + swap MACs + TX), the program alone, nanoseconds
  per packet.

Times are the CPU time of the thread making the call divided by the frames
(like the kernel's own ``duration``, which leaves out time the CPU spent
elsewhere when the test run yielded, but with sub-nanosecond resolution);
the kernel's ``duration`` and the wall-clock time are shown next to it. Each
figure is the median of ``--runs`` runs after one warm-up run.

The veth pair lives in a network namespace this script creates
(``pyxdp-bench-<pid>``) and deletes at exit; no frame leaves it.

The functions :func:`kernel_live_pps`, :func:`kernel_test_run_ns` (and the richer
:func:`measure_live`, :func:`measure_test_run`, :func:`bench_netns`) are what
side-by-side benchmarks (``bench/``, ``pyxdp bench xdp --vs-kernel``) measure
the kernel with; ``bench/bench_kernel_live.py`` prints them as a table.
"""

from __future__ import annotations

import json
import os
import statistics
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pyxdp import samples
from pyxdp.asm.assembler import assemble
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import PyxdpError
from pyxdp.kernel import TestRunResult, prog_test_run
from pyxdp.kernel.backend import KernelProgram
from pyxdp.kernel.link import XdpLink
from pyxdp.kernel.netlink import ifindex_of, netns
from pyxdp.spec import CollectionSpec, MapRef, MapSpec, ProgramSpec
from pyxdp.uapi.bpf import BpfMapType, TestRunFlag

SAMPLES = samples.DIR
FRAMES = 10_000_000
BATCH = 64
RUNS = 5
LIVE = TestRunFlag.BPF_F_TEST_XDP_LIVE_FRAMES

ProgSource = str | os.PathLike[str] | CollectionSpec
Setup = Callable[[Collection], None]


# --------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------

def asm_spec(name: str, text: str, *, maps: dict[str, MapSpec] | None = None,
             map_refs: tuple[MapRef, ...] = ()) -> CollectionSpec:
    """A one-program collection from assembler text (for the minimal action programs)."""
    prog = ProgramSpec(name=name, section="xdp", insns=assemble(text), license="GPL",
                       map_refs=map_refs)
    return CollectionSpec(programs={name: prog}, maps=dict(maps or {}), license="GPL",
                          name=name)


DROP = asm_spec("xdp_drop", "r0 = 1\nexit")
TX = asm_spec("xdp_tx", "r0 = 3\nexit")
# return bpf_redirect_map(&tx_port, 0, 0); the ld_imm64 at slot 0 gets the map.
REDIRECT_DEVMAP = asm_spec(
    "xdp_redir_devmap", "r1 = 0 ll\nr2 = 0\nr3 = 0\ncall 51\nexit",
    maps={"tx_port": MapSpec("tx_port", BpfMapType.BPF_MAP_TYPE_DEVMAP, 4, 4, 1)},
    map_refs=(MapRef(0, "tx_port", "fd"),))


def _collection(obj: ProgSource) -> Collection:
    spec = obj if isinstance(obj, CollectionSpec) else load_collection_spec(Path(obj))
    return Collection(spec, "kernel")


def _prog(coll: Collection, section: str | None) -> KernelProgram:
    handle = coll.program(section).handle
    if not isinstance(handle, KernelProgram):
        raise PyxdpError(f"{section}: not loaded into the kernel")
    return handle


def xdp_md(packet: bytes, ingress_ifindex: int = 0) -> bytes:
    """``struct xdp_md`` for test_run: data 0, data_end the packet size, the ingress device."""
    return struct.pack("=6I", 0, len(packet), 0, ingress_ifindex, 0, 0)


# --------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Measurement:
    """Medians over the runs, per frame: thread CPU ns, wall ns, the kernel's ``duration``."""

    name: str
    mode: str
    frames: int
    cpu_ns: float
    wall_ns: float
    kernel_ns: float
    peer_rx: float | None = None  # fraction of frames the veth peer received (TX/redirect)

    @property
    def mpps(self) -> float:
        return 1e3 / self.cpu_ns if self.cpu_ns else 0.0


def _timed(run: Callable[[], TestRunResult], frames: int, runs: int
           ) -> tuple[float, float, float]:
    run()  # warm-up: page_pool pages, JIT'ed code and caches in place
    cpu, wall, kern = [], [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.thread_time()
        res = run()
        c1, t1 = time.thread_time(), time.perf_counter()
        cpu.append((c1 - c0) * 1e9 / frames)
        wall.append((t1 - t0) * 1e9 / frames)
        kern.append(float(res.duration_ns))
    return statistics.median(cpu), statistics.median(wall), statistics.median(kern)


def measure_live(obj: ProgSource, section: str | None, packet: bytes,
                 setup: Setup | None = None, *, ingress_ifindex: int = 0,
                 frames: int = FRAMES, batch: int = BATCH, runs: int = RUNS,
                 name: str = "", peer: Callable[[], int] | None = None) -> Measurement:
    """Live-frames test_run of one program; ``setup`` fills maps before the runs.

    ``ingress_ifindex`` must name a device of the caller's network namespace
    (XDP_TX goes out of it). ``peer`` returns a packet counter of the device
    the frames should reach; its growth is reported as ``peer_rx``.
    """
    with _collection(obj) as coll:
        if setup is not None:
            setup(coll)
        prog = _prog(coll, section)
        ctx = xdp_md(packet, ingress_ifindex)

        def run() -> TestRunResult:
            return prog_test_run(prog.fd, packet, ctx_in=ctx, repeat=frames, flags=LIVE,
                                 batch_size=batch)

        before = peer() if peer is not None else 0
        cpu, wall, kern = _timed(run, frames, runs)
        got = None
        if peer is not None:
            time.sleep(0.05)  # the peer's NAPI may still be draining its ring
            got = (peer() - before) / (frames * (runs + 1))
    return Measurement(name or prog.name, f"live/{batch}", frames, cpu, wall, kern, got)


def measure_test_run(obj: ProgSource, section: str | None, packet: bytes, *,
                     repeat: int = FRAMES, runs: int = RUNS, name: str = "") -> Measurement:
    """Normal (non-live) test_run with ``repeat``: the program alone, nothing executed."""
    with _collection(obj) as coll:
        prog = _prog(coll, section)

        def run() -> TestRunResult:
            return prog_test_run(prog.fd, packet, repeat=repeat)

        cpu, wall, kern = _timed(run, repeat, runs)
    return Measurement(name or prog.name, "test_run", repeat, cpu, wall, kern)


def kernel_live_pps(prog_obj: ProgSource, section: str | None, packet: bytes,
                    action_setup: Setup | None = None, *, ingress_ifindex: int = 0,
                    frames: int = FRAMES, batch: int = BATCH, runs: int = RUNS) -> float:
    """Median Mpps of the kernel running ``section`` of ``prog_obj`` on live frames."""
    return measure_live(prog_obj, section, packet, action_setup,
                        ingress_ifindex=ingress_ifindex, frames=frames, batch=batch,
                        runs=runs).mpps


def kernel_test_run_ns(obj: ProgSource, section: str | None, packet: bytes,
                       repeat: int = FRAMES, *, runs: int = RUNS) -> float:
    """Median ns per packet of the kernel running ``section`` of ``obj`` (normal test_run)."""
    return measure_test_run(obj, section, packet, repeat=repeat, runs=runs).cpu_ns


# --------------------------------------------------------------------------
# The veth pair, in a namespace of our own
# --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class BenchNet:
    """veth0 (where frames are sent) and veth1 (its peer, dropping natively)."""

    netns: str
    veth0: int
    veth1: int

    def rx_packets(self, dev: str = "veth1") -> int:
        """The device's rx packet counter (``ip -s -j link``: what reached its XDP)."""
        out = subprocess.run(["ip", "-n", self.netns, "-s", "-j", "link", "show", "dev", dev],
                             capture_output=True, text=True, check=True, timeout=60).stdout
        return int(json.loads(out)[0]["stats64"]["rx"]["packets"])


def _ip(*args: str) -> None:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        raise PyxdpError(f"ip {' '.join(args)}: {res.stderr.strip()}")


@contextmanager
def bench_netns(peer_prog: ProgSource = DROP) -> Iterator[BenchNet]:
    """A fresh namespace with veth0 <-> veth1, entered for the body; ``peer_prog`` on veth1.

    The peer's native XDP program is also what makes veth1 accept frames
    from ``ndo_xdp_xmit`` at all (its NAPI exists only while XDP is on).
    """
    name = f"pyxdp-bench-{os.getpid()}"
    _ip("netns", "add", name)
    try:
        _ip("-n", name, "link", "add", "veth0", "address", "02:00:00:00:b0:00", "type",
            "veth", "peer", "name", "veth1", "address", "02:00:00:00:b0:01")
        _ip("-n", name, "link", "set", "veth0", "up")
        _ip("-n", name, "link", "set", "veth1", "up")
        with netns(name), _collection(peer_prog) as peer, \
                XdpLink.attach("veth1", _prog(peer, None), mode="native"):  # a bpf_link
            yield BenchNet(name, ifindex_of("veth0"), ifindex_of("veth1"))
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=60)


