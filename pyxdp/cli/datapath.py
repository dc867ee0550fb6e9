"""``pyxdp bench xdp`` and ``pyxdp bench seeds``: pyxdp's datapath under load.

``bench xdp`` is xdp-bench for pyxdp: a NIC ``eth0`` whose rx queue is fed
by the traffic generator (one packet, or the default 64-byte UDP frame,
written into page pool pages as DMA would), the program attached in native
or generic mode, and a second NIC ``eth1`` (``tx_port``-style devmaps may
point at it; its ifindex is printed). Every interval it prints the receive
rate and the rate of each verdict; with ``--vs-kernel`` it then measures the
kernel running the same program on the same packet through
``BPF_PROG_TEST_RUN`` live frames (the kernel's full XDP action path) and
prints the ratio.

``bench seeds`` prints one row per claim of the kernel discussions pyxdp
comes from (see the project's reference notes): the seed's figure, pyxdp's
measured ratio, and whether it meets the goal.

The measurement functions are shared with ``bench/bench_datapath.py``.
"""

from __future__ import annotations

import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pyxdp import samples
from pyxdp.cli.options import STYLE, CliError, _read_input, emit, kernel_mode, status
from pyxdp.cli.prog import _object, _program, fill_maps
from pyxdp.collection import Collection, Program
from pyxdp.net.netdevice import Host, NetDevice, NetdevStats
from pyxdp.net.packets import DEFAULT_DST_IP4, DEFAULT_DST_IP6, udp_packet
from pyxdp.net.source import TrafficGenerator
from pyxdp.net.trace import Tracer
from pyxdp.spec import CollectionSpec

__all__ = ["SEEDS", "cmd_bench_datapath", "cmd_bench_seeds", "cmd_bench_xdp", "mpps_cpumap",
           "mpps_generic", "mpps_native", "running_datapath"]

DEFAULT_PACKET = udp_packet(size=64, dport=9)
SAMPLES = samples.DIR
_ACTIONS = ("aborted", "drop", "pass", "tx", "redirect")


def _asm(name: str, text: str) -> CollectionSpec:
    from pyxdp.testing.kernel_live import asm_spec
    return asm_spec(name, text)


# -----------------------------------------------------------------------------------
# Measurements (also used by bench/bench_datapath.py)
# -----------------------------------------------------------------------------------

def receiver(h: Host, rx_queues: int = 1) -> NetDevice:
    """``eth0``, owning the default frame's destination addresses (as ``veth0`` does in
    the Linux runs): what XDP_PASS hands the stack is delivered, not routed away."""
    eth = h.add_device("eth0", rx_queues=rx_queues)
    eth.add_address(f"{DEFAULT_DST_IP4}/24")
    eth.add_address(f"{DEFAULT_DST_IP6}/64")
    return eth


def mpps_native(obj: str | Path | CollectionSpec, frames: int, *,
                setup: Callable[[Host, NetDevice, Collection], None] | None = None,
                packet: bytes = DEFAULT_PACKET, section: str | None = None) -> float:
    """Mpps of ``frames`` generated frames through native XDP on a NIC."""
    with Host(tracer=Tracer()) as h:
        eth = receiver(h)
        coll = h.load(obj)
        eth.attach_xdp(_program(coll, section))
        if setup is not None:
            setup(h, eth, coll)
        eth.rx[0].source = TrafficGenerator(packets=[packet], count=frames)
        t0 = time.perf_counter()
        h.run()
        dt = time.perf_counter() - t0
    return frames / dt / 1e6


def mpps_generic(obj: str | Path | CollectionSpec, frames: int, *,
                 packet: bytes = DEFAULT_PACKET, section: str | None = None) -> float:
    """Mpps of generic XDP: a NIC without a native program builds an skb around each
    received page and runs the generic (skb-mode) program on it."""
    with Host(tracer=Tracer()) as h:
        eth = receiver(h)
        coll = h.load(obj)
        eth.attach_xdp(_program(coll, section), mode="generic")
        eth.rx[0].source = TrafficGenerator(packets=[packet], count=frames)
        t0 = time.perf_counter()
        h.run()
        dt = time.perf_counter() - t0
    return frames / dt / 1e6


def mpps_cpumap(frames: int, list_delivery: bool, *, threaded: bool = False) -> float:
    """Mpps delivered through redirect_cpu's round robin into one cpumap entry, then
    to the stack as lists of skbs (``netif_receive_skb_list``) or one skb at a time;
    with ``threaded`` the entry's kthread (on CPU 1) is a thread beside the NAPI
    loop. Frames the entry's ring refused at enqueue are not counted."""
    cpu = 1 if threaded else 0
    with Host(tracer=Tracer(), cpumap_threads=threaded) as h:
        eth = receiver(h)
        coll = h.load(SAMPLES / "redirect_cpu.o")
        eth.attach_xdp(coll.programs["xdp_redirect_cpu_rr"])
        coll.maps["cpu_map"][cpu] = {"qsize": 2048, "bpf_prog": {"fd": 0}}
        coll.maps["cpus_available"][0] = cpu
        coll.maps["cpus_count"][0] = 1
        eth.rx[0].source = TrafficGenerator(packets=[DEFAULT_PACKET], count=64)
        h.run()  # makes the entry
        for rt in h.cpumaps.values():
            rt.list_delivery = list_delivery
        eth.rx[0].source = TrafficGenerator(packets=[DEFAULT_PACKET], count=frames)
        before = h.stack.stats.received
        t0 = time.perf_counter()
        h.run()
        dt = time.perf_counter() - t0
        delivered = h.stack.stats.received - before
    return delivered / dt / 1e6


def mpps_workers(obj: str | Path | CollectionSpec, workers: int, frames: int, *,
                 section: str | None = None,
                 setup: Callable[[Host, NetDevice, Collection], None] | None = None) -> float:
    """Mpps of ``frames`` through a NIC with ``workers`` rx queues, each filled by its
    own generator and polled by threaded NAPI on a CPU of its own (RSS spreading
    flows over queues, one NAPI thread per CPU); ``setup`` as for :func:`mpps_native`."""
    with Host(tracer=Tracer(), threaded_napi=True, nr_cpus=max(workers, 1)) as h:
        eth = receiver(h, rx_queues=workers)
        coll = h.load(obj)
        eth.attach_xdp(_program(coll, section))
        if setup is not None:
            setup(h, eth, coll)
        for q in range(workers):
            eth.rx[q].source = TrafficGenerator(packets=[DEFAULT_PACKET],
                                                count=frames // workers)
        t0 = time.perf_counter()
        h.run()
        dt = time.perf_counter() - t0
    return (frames // workers) * workers / dt / 1e6


def median(f: Callable[[], float], runs: int) -> float:
    f()  # warm-up: JIT and native loop compiled, pages touched
    return float(statistics.median(f() for _ in range(runs)))


# -----------------------------------------------------------------------------------
# pyxdp bench xdp
# -----------------------------------------------------------------------------------

def _rates(before: NetdevStats, after: NetdevStats, dt: float) -> dict[str, float]:
    d = {
        "rx": after.rx_packets - before.rx_packets,
        "aborted": after.xdp_aborted - before.xdp_aborted,
        "drop": after.xdp_drops - before.xdp_drops,
        "pass": after.xdp_pass - before.xdp_pass,
        "tx": after.xdp_tx - before.xdp_tx,
        "redirect": after.xdp_redirect - before.xdp_redirect,
    }
    return {k: v / dt for k, v in d.items()}


def _snapshot(s: NetdevStats) -> NetdevStats:
    return s.copy()


def check_packet(packet: bytes) -> bytes:
    """A packet the generator can send: at least an Ethernet header."""
    if len(packet) < 14:
        raise CliError(f"the packet has {len(packet)} bytes: less than an Ethernet header")
    return packet


def compile_status(host: Host, prog: Program) -> None:
    """One round - NAPI polls, then cpumap kthreads inline (compiling the program and the
    native loop, ~12 s when cold) - behind a status line on stderr, so a quiet screen is
    explained."""
    engine = str(getattr(prog.handle, "engine", "") or "")
    what = {"jit": "JIT", "interp": "interpreter"}.get(engine, engine or "engine")
    if not STYLE.json:
        status(f"compiling {prog.name} ({what})...")
    host.run(max_rounds=1)


def cmd_bench_xdp(obj: str | None, section: str | None, mode: str, packet_file: str | None,
                  duration: float, interval: float, vs_kernel: bool, maps: str | None,
                  as_json: bool, engine: str = "auto", verify: bool = True,
                  plot: str | None = None) -> int:
    """Run ``obj`` (default: the xdp1 sample) on a generated stream for ``duration``
    seconds, printing rates. ``verify=False`` skips pyxdp's verifier; ``plot`` draws
    the rates (and the kernel's bar with ``vs_kernel``) into an SVG file."""
    if obj is None:
        obj = str(SAMPLES / "xdp1.o")
        if not Path(obj).is_file():
            raise CliError(f"no OBJ given and the default sample {obj} is not there "
                           f"(run from a pyxdp checkout, or name an object)")
    if duration <= 0 or interval <= 0:
        raise CliError("--duration and --interval must be > 0")
    if plot:
        from pyxdp.cli.plot import require_matplotlib
        require_matplotlib()
    packet = check_packet(_read_input(packet_file) if packet_file else DEFAULT_PACKET)
    host = Host(engine=engine)
    rows: list[dict[str, float]] = []
    times: list[float] = []
    try:
        eth = receiver(host)
        host.add_device("eth1")
        coll = host.load(_object(obj), verify=verify)
        prog = _program(coll, section)
        if maps:
            fill_maps(coll, maps)
        eth.attach_xdp(prog, mode=kernel_mode(mode))
        # Generic mode too: the NIC's driver builds skbs for its generic program.
        eth.rx[0].source = TrafficGenerator(packets=[packet])
        if not as_json:
            engine_used = getattr(prog.handle, "engine", "?")
            print(f"pyxdp bench xdp: {prog.name} ({Path(obj).name}) on eth0 ({mode}, engine "
                  f"{engine_used}), {len(packet)}-byte packet, eth1 is ifindex "
                  f"{host.dev('eth1').ifindex}", flush=True)
        compile_status(host, prog)  # the JIT and the native loop compiled before timing
        start, t_start = _snapshot(eth.stats), time.monotonic()
        t_end = t_start + duration
        # Ctrl-C as a flag the loop checks between rounds: a KeyboardInterrupt raised
        # inside a round (machine code compiled on first use, a teardown) could be lost.
        ctrl_c: list[int] = []
        old_int = signal.signal(signal.SIGINT, lambda n, f: ctrl_c.append(n)) \
            if threading.current_thread() is threading.main_thread() else None
        try:
            while time.monotonic() < t_end:
                before = _snapshot(eth.stats)
                t0 = time.monotonic()
                stop = min(t0 + interval, t_end)
                while time.monotonic() < stop:
                    host.run(max_rounds=1)
                    if ctrl_c:
                        raise KeyboardInterrupt
                dt = time.monotonic() - t0
                r = _rates(before, eth.stats, dt)
                rows.append(r)
                times.append(time.monotonic() - t_start)
                _print_rates(r, as_json)
        except KeyboardInterrupt:  # Ctrl-C: what ran so far, then stop
            dt = time.monotonic() - t_start
            summary = _rates(start, eth.stats, 1.0)
            if as_json:
                emit({"interrupted": True, "seconds": round(dt, 3),
                      **{k: int(v) for k, v in summary.items()}})
            else:
                print(f"interrupted after {dt:.1f} s: " + "  ".join(
                    f"{k} {int(v)}" for k, v in summary.items() if v), flush=True)
            vs_kernel = False
            interrupted = True
        else:
            interrupted = False
        finally:
            if old_int is not None:
                signal.signal(signal.SIGINT, old_int)
        total = {k: statistics.median(r[k] for r in rows) for k in rows[0]} if rows else {}
        if eth.faults:
            print(f"first fault: {eth.faults[0]}", file=sys.stderr)
    finally:
        host.close()
    kpps = None
    if vs_kernel and not interrupted:
        kpps = _kernel_pps(obj, prog, packet)
        ratio = total.get("rx", 0.0) / (kpps * 1e6) if kpps else 0.0
        if as_json:
            emit({"kernel_mpps": kpps, "pyxdp_mpps": total.get("rx", 0) / 1e6,
                  "ratio": ratio})
        else:
            print(f"kernel live frames: {kpps:.2f} Mpps; pyxdp median {total['rx'] / 1e6:.2f} "
                  f"Mpps; ratio pyxdp/kernel: {ratio:.2f}")
    if plot and rows:
        from pyxdp.cli.plot import plot_rates
        plot_rates(plot, f"pyxdp bench xdp: {prog.name} ({mode})", times,
                   {k: [r[k] / 1e6 for r in rows] for k in ("rx", *_ACTIONS)
                    if any(r[k] for r in rows)},
                   kernel_mpps=kpps)
        if not as_json:
            status(f"plot written to {plot}")
    return 130 if interrupted else 0


@contextmanager
def running_datapath(obj: str, section: str | None = None, mode: str = "native",
                     packet: bytes = DEFAULT_PACKET, *, maps: str | None = None
                     ) -> Iterator[Host]:
    """``obj`` on a NIC fed by the generator, polled in a thread until the body ends
    (``pyxdp monitor --pyxdp``); yields the host (its tracer has the counters).
    ``maps`` fills the object's maps (the ``--maps`` JSON) before frames flow."""
    host = Host()
    stop = threading.Event()
    started = threading.Event()
    errors: list[BaseException] = []

    def loop() -> None:
        try:
            while not stop.is_set():
                host.run(max_rounds=1)
                started.set()
        except BaseException as e:  # reported by the caller's thread
            errors.append(e)
        finally:
            started.set()

    try:
        eth = receiver(host)
        host.add_device("eth1")
        coll = host.load(_object(obj))
        prog = _program(coll, section)
        if maps:
            fill_maps(coll, maps)
        eth.attach_xdp(prog, mode=mode)
        eth.rx[0].source = TrafficGenerator(packets=[packet])
        # The first poll compiles the program and loads the native loop: intervals
        # count from when frames flow, not from start-up.
        compile_status(host, prog)
        worker = threading.Thread(target=loop, name="pyxdp-datapath", daemon=True)
        worker.start()
        started.wait()
        try:
            yield host
        finally:
            stop.set()
            worker.join()
        if errors:
            raise errors[0]
    finally:
        host.close()


def _print_rates(r: dict[str, float], as_json: bool) -> None:
    if as_json:
        emit({k: round(v) for k, v in r.items()})
        return
    acts = "  ".join(f"{a.upper()} {r[a] / 1e6:6.2f}" for a in _ACTIONS if r[a])
    print(f"eth0 rx {r['rx'] / 1e6:7.2f} Mpps   {acts}", flush=True)


def _kernel_pps(obj: str, prog: Program, packet: bytes) -> float:
    """The kernel's live-frames Mpps for the same program and packet (root)."""
    from pyxdp.kernel import bpf_available
    ok, why = bpf_available()
    if not ok:
        raise CliError(f"--vs-kernel needs root and BPF: {why}")
    from pyxdp.elf import load_collection_spec
    from pyxdp.testing.kernel_live import bench_netns, measure_live
    spec = load_collection_spec(obj)
    with bench_netns() as net:
        m = measure_live(spec, prog.name, packet, ingress_ifindex=net.veth0,
                         frames=2_000_000, runs=3)
    return m.mpps


# -----------------------------------------------------------------------------------
# pyxdp bench seeds
# -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Seed:
    claim: str
    seed_figure: str
    goal: float
    measure: Callable[[int, int], float]
    unit: str = "x"


def _native_vs_generic(frames: int, runs: int) -> float:
    # The same number of frames on both sides: a shorter generic run would charge
    # it the fixed cost of a run (host, program) and flatter the ratio.
    drop = _asm("xdp_drop", "r0 = 1\nexit")
    return median(lambda: mpps_native(drop, frames), runs) / \
        median(lambda: mpps_generic(drop, frames), runs)


def _cpumap_list(frames: int, runs: int) -> float:
    n = max(frames // 20, 256)
    return median(lambda: mpps_cpumap(n, True), runs) / \
        median(lambda: mpps_cpumap(n, False), runs)


def _bulk_return(frames: int, runs: int) -> float:
    from pyxdp.testing.frame_return import WAYS, frame_return_rates
    rates = frame_return_rates(16384, max(runs, 5))
    return rates[WAYS[1][0]] / rates[WAYS[0][0]]


def _redirect_xsk(frames: int, runs: int) -> float:
    """rxdrop in zero-copy mode on one core (the user loop in machine code, as the
    seed's xdpsock): bpf_redirect_xsk over bpf_redirect_map into an XSKMAP, runs
    interleaved so drift hits both alike; the median of the per-pair ratios."""
    from pyxdp.cli.xsk import rxdrop_native_pps
    n = max(frames * 10, 50_000)
    ratios = []
    for _ in range(max(runs, 7)):  # a 5% difference on a shared machine: many pairs
        m = rxdrop_native_pps("map", n)
        x = rxdrop_native_pps("xsk", n)
        ratios.append(x / m)
    return float(statistics.median(ratios))


SEEDS: tuple[Seed, ...] = (
    Seed("native XDP_DROP vs generic XDP_DROP", "generic: the slow path", 5.0,
         _native_vs_generic),
    Seed("cpumap: skb lists vs one skb at a time", "+16%", 1.16, _cpumap_list),
    Seed("xdp_frame return: bulk vs one by one", "no regression", 1.0, _bulk_return),
    Seed("AF_XDP rxdrop: redirect_xsk vs XSKMAP", "+4% (1 core)", 1.04,
         _redirect_xsk),
)


def cmd_bench_seeds(frames: int, runs: int, as_json: bool) -> int:
    """One row per seed claim: the seed's figure, pyxdp's ratio, pass/fail."""
    if frames <= 0 or runs <= 0:
        raise CliError("--frames and --runs must be > 0")
    rows = []
    for s in SEEDS:
        ratio = s.measure(frames, runs)
        ok = ratio >= s.goal
        rows.append({"claim": s.claim, "seed": s.seed_figure, "goal": s.goal,
                     "pyxdp": round(ratio, 3), "pass": ok})
        if as_json:
            emit(rows[-1])
        else:
            print(f"{s.claim:<42} seed {s.seed_figure:<22} pyxdp {ratio:7.2f}x  "
                  f"goal >= {s.goal:.2f}  {'PASS' if ok else 'FAIL'}", flush=True)
    return 0 if all(r["pass"] for r in rows) else 1


# -----------------------------------------------------------------------------------
# pyxdp bench datapath
# -----------------------------------------------------------------------------------

def _to_eth1(h: Host, eth: NetDevice, coll: Collection) -> None:
    coll.maps["tx_port"][0] = h.add_device("eth1").ifindex


def _mpps_xsk_copy(frames: int) -> float:
    """rxdrop on a copy-mode pyxdp socket, xdpsock's loop in machine code on a thread
    of its own (as on Linux: the softirq side in one thread, the user loop in another)."""
    from pyxdp.cli.xsk import rxdrop_native_pps
    return rxdrop_native_pps("map", frames, zero_copy=False, cores=2) / 1e6


@dataclass(frozen=True)
class DatapathPath:
    """One row of ``bench datapath``: pyxdp's measurement (variants: the best median
    is the row's figure) and how the Linux column is measured."""

    key: str
    label: str
    pyxdp: dict[str, Callable[[int], float]]
    linux: str
    first: int  # frames of the warm-up run that sizes the timed ones


def _paths() -> tuple[DatapathPath, ...]:
    from pyxdp.testing.kernel_live import DROP, REDIRECT_DEVMAP, TX
    passp = _asm("xdp_pass", "r0 = 2\nexit")
    return (
        DatapathPath("drop", "XDP_DROP", {"native": lambda n: mpps_native(DROP, n)},
                     "live frames, XDP_DROP", 100_000),
        DatapathPath("tx", "XDP_TX", {"native": lambda n: mpps_native(TX, n)},
                     "live frames, XDP_TX out of veth0 (peer drops natively)", 100_000),
        DatapathPath("redirect", "devmap redirect",
                     {"native": lambda n: mpps_native(REDIRECT_DEVMAP, n, setup=_to_eth1)},
                     "live frames, bpf_redirect_map to veth0 through a devmap", 100_000),
        DatapathPath("pass", "XDP_PASS to the stack",
                     {"native": lambda n: mpps_native(passp, n)},
                     "live frames, XDP_PASS: skb lists to veth0's stack, UDP NoPorts", 20_000),
        DatapathPath("cpumap", "cpumap, delivered on the remote CPU",
                     {"kthread inline": lambda n: mpps_cpumap(n, True),
                      "kthread thread": lambda n: mpps_cpumap(n, True, threaded=True)},
                     "live frames into a cpumap entry (qsize 2048) for the other CPU; "
                     "delivered = UDP NoPorts growth", 2_000),
        DatapathPath("generic", "generic XDP_DROP",
                     {"generic": lambda n: mpps_generic(DROP, n)},
                     "skb-mode XDP_DROP on veth1 counting in a per-CPU array; live frames "
                     "redirected out of veth0 into veth1's GRO NAPI", 5_000),
        DatapathPath("xsk", "AF_XDP rxdrop, copy mode", {"copy": _mpps_xsk_copy},
                     "veth1 redirects into an XSKMAP; copy-mode socket, xdpsock's rxdrop in "
                     "machine code on its own thread; live frames out of veth0", 50_000),
    )


def _sized(rate_mpps: float, seconds: float, floor: int) -> int:
    """Frames for a run of about ``seconds`` at ``rate_mpps`` (never below ``floor``)."""
    return max(floor, min(int(rate_mpps * 1e6 * seconds), 200_000_000))


def _linux_column(vs_kernel: bool) -> tuple[bool, str]:
    if not vs_kernel:
        return False, ""
    from pyxdp.kernel import bpf_available
    ok, why = bpf_available()
    return (True, "") if ok else (False, f"needs root and BPF ({why})")


def cmd_bench_datapath(paths: str | None, runs: int, seconds: float, frames: int | None,
                       vs_kernel: bool, as_json: bool, plot: str | None = None) -> int:
    """One line per path: pyxdp Mpps, Linux Mpps measured in the same run, their ratio.

    The two sides' runs alternate (drift of the shared machine hits both
    alike); each figure is the median of ``runs`` runs after a warm-up run
    that also sizes the timed runs to about ``seconds`` each (or ``frames``).
    """
    import os
    import platform
    from contextlib import ExitStack
    known = _paths()
    by_key = {p.key: p for p in known}
    if paths:
        keys = [k.strip() for k in paths.split(",") if k.strip()]
        bad = [k for k in keys if k not in by_key]
        if bad or not keys:
            raise CliError(f"--paths: unknown path {','.join(bad) or repr(paths)} (choose from "
                           f"{','.join(by_key)})")
        chosen = [by_key[k] for k in dict.fromkeys(keys)]
    else:
        chosen = list(known)
    if runs <= 0 or seconds <= 0 or (frames is not None and frames <= 0):
        raise CliError("--runs, --seconds and --frames must be > 0")
    if plot:
        from pyxdp.cli.plot import require_matplotlib
        require_matplotlib()
    linux_on, skipped = _linux_column(vs_kernel)
    if skipped:
        print(f"pyxdp: the Linux column is skipped: {skipped}", file=sys.stderr, flush=True)
    if not as_json:
        print(f"pyxdp bench datapath{' --vs-kernel' if vs_kernel else ''}: Linux "
              f"{platform.release()}, {os.cpu_count()} CPUs, 64-byte UDP frames, median of "
              f"{runs} runs{', pyxdp and Linux runs interleaved' if linux_on else ''}",
              flush=True)
    with ExitStack() as stack:
        lp = None
        if linux_on:
            from pyxdp.errors import PyxdpError
            from pyxdp.testing.kernel_datapath import linux_paths
            try:
                lp = stack.enter_context(linux_paths())
            except (PyxdpError, OSError) as e:  # no ip(8), no veth, ...: pyxdp's column stays
                why = str(e).splitlines()[0] if str(e) else type(e).__name__
                print(f"pyxdp: the Linux column is skipped: {why}", file=sys.stderr,
                      flush=True)
        measured = []
        for p in chosen:
            row = _measure_row(p, lp, runs, seconds, frames)
            _print_row(row, as_json, vs_kernel)
            measured.append(row)
    if plot:
        plot_datapath(plot, measured)
        if not as_json:
            status(f"plot written to {plot}")
    return 0


def plot_datapath(path: str, rows: list[dict[str, object]]) -> None:
    """``bench datapath --plot``: pyxdp's Mpps beside Linux's, a pair of bars per path."""
    from pyxdp.cli.plot import plot_bars

    def mpps(v: object) -> float | None:
        return float(v) if isinstance(v, (int, float)) else None

    groups: dict[str, list[float | None]] = {"pyxdp": [mpps(r["pyxdp_mpps"]) for r in rows]}
    if any(r.get("linux_mpps") is not None for r in rows):
        groups["Linux"] = [mpps(r.get("linux_mpps")) for r in rows]
    plot_bars(path, "pyxdp bench datapath", [str(r["name"]) for r in rows], groups)


def _measure_row(p: DatapathPath, lp: object, runs: int, seconds: float,
                 frames: int | None) -> dict[str, object]:
    from pyxdp.errors import PyxdpError
    from pyxdp.testing.kernel_datapath import KernelRun, LinuxPaths
    linux: Callable[[int], KernelRun] | None = None
    error = ""
    if isinstance(lp, LinuxPaths):
        linux = {"drop": lp.drop, "tx": lp.tx, "redirect": lp.redirect, "pass": lp.pass_,
                 "cpumap": lp.cpumap, "generic": lp.generic, "xsk": lp.xsk}[p.key]
    # Warm-up runs: code compiled, pages touched, and the timed runs sized from them.
    # A first run at a rate far below the steady one (compiling) would size the rest
    # too small, so the size comes from a second one.
    sizes: dict[str, int] = {}
    for v, f in p.pyxdp.items():
        n = frames or p.first
        for _ in range(1 if frames else 2):
            n = frames or _sized(f(n), seconds, p.first)
        sizes[v] = n
    k_frames = frames or 100_000
    if linux is not None:
        try:
            for _ in range(1 if frames else 2):
                r = linux(k_frames)
                k_frames = frames or _sized(r.frames / r.seconds / 1e6, seconds, 10_000)
        except (PyxdpError, OSError) as e:
            linux, error = None, str(e).splitlines()[0]
    got: dict[str, list[float]] = {v: [] for v in p.pyxdp}
    k_got: list[KernelRun] = []
    for _ in range(runs):
        for v, f in p.pyxdp.items():
            got[v].append(f(sizes[v]))
        if linux is not None:
            try:
                k_got.append(linux(k_frames))
            except (PyxdpError, OSError) as e:
                linux, error = None, str(e).splitlines()[0]
    med = {v: float(statistics.median(xs)) for v, xs in got.items()}
    variant = max(med, key=lambda v: med[v])
    row: dict[str, object] = {"path": p.key, "name": p.label, "pyxdp_mpps": med[variant],
                              "linux_mpps": None, "ratio": None, "runs": runs}
    if len(med) > 1:
        row["pyxdp_variant"] = variant
        row["pyxdp_variants_mpps"] = med
    if k_got and linux is not None:
        k = float(statistics.median(r.mpps for r in k_got))
        row["linux_mpps"] = k
        row["ratio"] = med[variant] / k if k else None
        row["linux_delivered"] = float(statistics.median(r.delivered / r.frames
                                                         for r in k_got))
        row["linux"] = p.linux
    elif error:
        row["linux_error"] = error
    return row


def _print_row(row: dict[str, object], as_json: bool, vs_kernel: bool) -> None:
    if as_json:
        emit(row)
        return
    line = f"{row['name']!s:<38} pyxdp {row['pyxdp_mpps']:8.3f} Mpps"
    if vs_kernel:
        k, r = row["linux_mpps"], row["ratio"]
        if isinstance(k, float):
            line += f"   Linux {k:8.3f} Mpps"
        else:
            line += f"   Linux {'-':>8} Mpps"
        line += f"   ratio pyxdp/kernel: {r:.3f}" if isinstance(r, float) else \
            "   ratio pyxdp/kernel: -"
        if "linux_error" in row:
            line += f"   (Linux: {row['linux_error']})"
    if "pyxdp_variant" in row:
        line += f"   [pyxdp: {row['pyxdp_variant']}]"
    print(line, flush=True)
