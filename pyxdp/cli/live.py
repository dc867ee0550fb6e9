"""``pyxdp run OBJ --iface IF`` and ``pyxdp bench live``: pyxdp's datapath on real
interfaces (:mod:`pyxdp.xsk.live`).

``run --iface`` is a userspace XDP dataplane: AF_XDP sockets on every queue of
each interface, the kernel's redirect program attached through a bpf_link,
the object's program run by pyxdp, a line of statistics per interval and
interface (the lines of ``pyxdp bench xdp``), and on exit - Ctrl-C, SIGTERM,
``--duration`` - nothing left attached (after SIGKILL neither: the kernel
closes the links with the process).

``bench live`` creates a network namespace with two veth pairs, sends 64-byte
UDP frames into veth0 from its peer with an AF_PACKET TX ring (one generator
process, the same for every run) and counts, with the object's own per-CPU
counter map, how many frames the program processed per second when pyxdp runs
it in user space and, with ``--vs-kernel``, when Linux runs it natively and in
generic (skb) mode on the same veth: one line per case with the ratio.

The generator stands for a sender outside the datapath under test: it runs in
a session of its own, so that the scheduler's autogroups (one per session)
give it the same share of the CPUs beside pyxdp's workers as beside Linux
(sharing pyxdp's session, it lost to the workers what Linux never asks for);
the CPU it got is printed beside what it sent, as on veth the receiving side's
kernel work (Linux's XDP program, AF_XDP's redirect and copy) runs in its
``send``. ``--threaded-napi`` moves that work to a NAPI kthread, for pyxdp and
for Linux native alike (Linux generic runs in the backlog, which has no NAPI of
the veth's to thread); ``--busy-poll`` has pyxdp's workers poll veth0's NAPI
themselves (Linux has no poller of its own to do that: it runs as without) and
prints the share of pyxdp's frames a busy poll took.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import multiprocessing
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyxdp import samples
from pyxdp.cli import run_maps
from pyxdp.cli.options import CliError, _write_output, seconds

if TYPE_CHECKING:  # the datapath loads with a run, not with the parser
    from pyxdp.net.stats import NetdevStats

__all__ = ["add_bench_arguments", "add_run_arguments", "cmd_bench_live", "cmd_run_live"]

SAMPLES = samples.DIR  # the checkout's samples/ or the wheel's copy
_ACTIONS = ("aborted", "drop", "pass", "tx", "redirect")
PR_SET_PDEATHSIG = 1  # include/uapi/linux/prctl.h


def _busy_poll_usecs(value: int | None) -> int:
    """``--busy-poll[=USECS]``'s microseconds (0: not given; None: given without a value,
    pyxdp.xsk.live's default)."""
    from pyxdp.xsk.live import BUSY_POLL_USECS
    if value is None:
        return BUSY_POLL_USECS
    if value < 0:
        raise CliError("--busy-poll must be >= 0 (microseconds)")
    return value


# -----------------------------------------------------------------------------------
# pyxdp run OBJ --iface IF
# -----------------------------------------------------------------------------------

def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--iface", "-i", action="append", metavar="IF",
                   help="run on this Linux interface in user space (repeat for more; "
                        "root): AF_XDP on its queues, AF_PACKET where AF_XDP is missing")
    p.add_argument("--duration", type=seconds, metavar="S",
                   help="with --iface: seconds to run (default: until Ctrl-C or SIGTERM)")
    p.add_argument("--interval", type=seconds, default=1.0, metavar="S",
                   help="with --iface: seconds between statistics lines (default: 1)")
    p.add_argument("--socket", choices=("auto", "af_xdp", "af_packet"), default="auto",
                   help="with --iface: the socket type (default: AF_XDP, else AF_PACKET)")
    p.add_argument("--xsk-mode", choices=("zerocopy", "copy"),
                   help="with --iface: AF_XDP bind mode (default: zero-copy where the "
                        "driver has it)")
    p.add_argument("--rx-usecs", type=int, metavar="US",
                   help="with --iface: the most microseconds a worker lets frames gather "
                        "between rounds while traffic flows, as ethtool's rx-usecs "
                        "(default: pyxdp.xsk.live.LiveOptions', 1000; 0: the next round "
                        "at once)")
    p.add_argument("--threaded-napi", action="store_true",
                   help="with --iface: each interface's NAPI polled by a kthread while "
                        "pyxdp runs (Linux >= 6.17; on a veth the receive's kernel half "
                        "then leaves the sender's CPU)")
    p.add_argument("--busy-poll", nargs="?", type=int, const=None, default=0,
                   metavar="USECS",
                   help="with --iface: preferred busy polling (SO_PREFER_BUSY_POLL): each "
                        "worker polls its queue's NAPI itself and keeps polling USECS after "
                        "the last frame (default: pyxdp.xsk.live.BUSY_POLL_USECS, 50; "
                        "Linux >= 6.13 for a veth's NAPI, whose receive's kernel half then "
                        "runs on the worker's CPU instead of the sender's)")


def _rates(before: NetdevStats, after: NetdevStats, dt: float) -> dict[str, float]:
    d = {"rx": after.rx_packets - before.rx_packets,
         "aborted": after.xdp_aborted - before.xdp_aborted,
         "drop": after.xdp_drops - before.xdp_drops,
         "pass": after.xdp_pass - before.xdp_pass,
         "tx": after.xdp_tx - before.xdp_tx,
         "redirect": after.xdp_redirect - before.xdp_redirect}
    return {k: v / dt for k, v in d.items()}


def stats_line(dev: str, r: dict[str, float]) -> str:
    """``pyxdp bench xdp``'s line: receive rate and the rate of each verdict seen."""
    acts = "  ".join(f"{a.upper()} {r[a] / 1e6:6.2f}" for a in _ACTIONS if r[a])
    return f"{dev} rx {r['rx'] / 1e6:7.2f} Mpps   {acts}"


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the run as Ctrl-C does (the same clean exit)."""
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def cmd_run_live(args: argparse.Namespace) -> int:
    """``run OBJ --iface IF...``: see the module docstring."""
    from pyxdp.kernel import bpf_available
    from pyxdp.xsk.live import LiveDataplane, LiveError, LiveOptions
    if args.pcap:
        raise CliError("--pcap and --iface: one input at a time")
    if args.write:
        raise CliError("-w/--write goes with --pcap (on interfaces, see 'pyxdp dump')")
    if args.backend != "userspace":
        raise CliError("--iface runs the program in pyxdp (the kernel side is the AF_XDP "
                       "redirect): --backend kernel does not apply")
    if args.duration is not None and args.duration <= 0 or args.interval <= 0:
        raise CliError("--duration and --interval must be > 0")
    if args.rx_usecs is not None and args.rx_usecs < 0:
        raise CliError("--rx-usecs must be >= 0")
    from pyxdp.cli.prog import _object, dump_maps, fill_maps
    busy_poll = _busy_poll_usecs(args.busy_poll)
    ok, why = bpf_available()
    if not ok:
        raise CliError(f"--iface needs root and BPF: {why}")
    opts = LiveOptions(backend=args.socket, mode=args.xsk_mode,
                       threaded_napi=args.threaded_napi, busy_poll=busy_poll)
    if args.rx_usecs is not None:
        opts = dataclasses.replace(opts, rx_usecs=args.rx_usecs)
    try:
        dp = LiveDataplane(_object(args.obj), args.iface, section=args.section, options=opts,
                           verify=args.verify)
    except (LiveError, ValueError) as e:
        raise CliError(str(e)) from None
    interrupted = False
    server: run_maps.MapServer | None = None
    try:
        if args.maps:
            fill_maps(dp.collection, args.maps, socket.if_nametoindex)
        # the maps, reachable from other processes while it runs (pyxdp.cli.run_maps)
        server = run_maps.serve(dp.collection, dp.host.lock,
                                {"program": dp.program.name, "ifaces": list(args.iface)})
        dp.start()
        if not args.json:
            devs = ", ".join(f"{d.name} ({len(d.rx)} queue{'s' * (len(d.rx) > 1)}, "
                             f"{d.backend}{' zero-copy' if d.zerocopy else ''})"
                             for d in dp.devices)
            print(f"pyxdp run: {dp.program.name} ({Path(args.obj).name}) on {devs}; "
                  f"XDP_PASS through {', '.join(d.tap.name for d in dp.devices if d.tap)}"
                  if any(d.tap for d in dp.devices) else
                  f"pyxdp run: {dp.program.name} ({Path(args.obj).name}) on {devs}",
                  flush=True)
            print(f"maps: pyxdp map show run {os.getpid()}", flush=True)
        end = None if args.duration is None else time.monotonic() + args.duration
        with _sigterm_as_interrupt():
            try:
                while end is None or time.monotonic() < end:
                    before = dp.stats()
                    t0 = time.monotonic()
                    step = args.interval if end is None else min(args.interval,
                                                                 end - t0)
                    time.sleep(max(step, 0.0))
                    if dp.errors:
                        dp.stop()  # raises the worker's error
                    after = dp.stats()
                    dt = time.monotonic() - t0
                    for name, st in after.items():
                        r = _rates(before[name], st, dt)
                        print(json.dumps({"dev": name, **{k: round(v) for k, v in r.items()}})
                              if args.json else stats_line(name, r), flush=True)
            except KeyboardInterrupt:
                interrupted = True
        dp.stop()
        if args.dump_maps:
            _write_output(args.dump_maps,
                          (json.dumps(dump_maps(dp.collection), indent=2) + "\n").encode())
    finally:
        if server is not None:
            server.close()
        dp.close()
    return 130 if interrupted and args.duration is not None else 0


# -----------------------------------------------------------------------------------
# pyxdp bench live
# -----------------------------------------------------------------------------------

def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--vs-kernel", action="store_true",
                   help="also run each object in Linux, natively and in generic mode, on "
                        "the same veth with the same generator (root)")
    p.add_argument("--duration", type=seconds, default=2.0, metavar="S",
                   help="seconds each run is timed (default: 2)")
    p.add_argument("--threaded-napi", action="store_true",
                   help="veth0's NAPI polled by a kthread, for pyxdp and for Linux native "
                        "alike (Linux generic runs in the backlog, which has none)")
    p.add_argument("--busy-poll", nargs="?", type=int, const=None, default=0,
                   metavar="USECS",
                   help="pyxdp's workers busy-poll veth0's NAPI (pyxdp run's --busy-poll; "
                        "Linux has no socket to poll from: it runs as without)")
    p.add_argument("--cases", default="drop,tx,redirect", metavar="LIST",
                   help="of drop (xdp1), tx (xdp2), redirect (redirect_map to a second "
                        "veth pair); default: all")


def _generate(ns: str, stop: Any, out: Any, parent: int) -> None:
    """The generator process: 64-byte UDP frames out of veth1 (into veth0) through a
    TPACKET_V2 ring with PACKET_QDISC_BYPASS, from "ready" until ``stop`` is set."""
    import numpy as np

    from pyxdp.kernel.netlink import ifindex_of, netns
    from pyxdp.net.af_packet import PacketTxRing
    from pyxdp.net.packets import udp_packet
    from pyxdp.testing.livelab import IP0, MACS, PEER_IP
    os.setsid()  # its own session and autogroup (the module docstring)
    # Dies with the bench, however the bench ends (a daemon child outlives a SIGTERM'd
    # or SIGKILL'd parent, sending on into a namespace nobody deletes).
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)
    with netns(ns):
        ring = PacketTxRing(ifindex_of("veth1"), frame_nr=2048)
        frames = [udp_packet(sport=1000 + i, dport=9, src_ip=PEER_IP, dst_ip=IP0,
                             src_mac=MACS["veth1"], dst_mac=MACS["veth0"], size=64)
                  for i in range(256)]
        src = np.frombuffer(b"".join(frames), np.uint8).reshape(len(frames), 64)
        rows = np.arange(len(frames), dtype=np.int64)
        offs = np.zeros(len(frames), np.int64)
        lens = np.full(len(frames), 64, np.int64)
        ring.queue(src, rows[:0], offs[:0], lens[:0])  # compiled before "ready"
        out.put("ready")
        sent = 0
        t0, c0 = time.monotonic(), time.process_time()
        while not stop.is_set():
            n = ring.send(src, rows, offs, lens)
            sent += n
            if not n:
                time.sleep(0)
        dt = time.monotonic() - t0
        cpu = time.process_time() - c0
        ring.close()
    out.put((sent / dt, cpu / dt))


def _timed(ns: str, counter: Callable[[], int],
           duration: float) -> tuple[float, float, float]:
    """The generator running, ``duration`` seconds timed after half a second of warm-up:
    (Mpps the program processed, Mpps the generator sent, the share of a CPU it got -
    its sends' softirq work included)."""
    ctx = multiprocessing.get_context("fork")  # the child starts in this thread's netns
    q = ctx.Queue()
    stop = ctx.Event()
    proc = ctx.Process(target=_generate, args=(ns, stop, q, os.getpid()), daemon=True)
    proc.start()
    try:
        if q.get(timeout=300) != "ready":
            raise CliError("the generator did not start")
        time.sleep(0.5)
        c0, t0 = counter(), time.monotonic()
        time.sleep(duration)
        c1, t1 = counter(), time.monotonic()
    finally:
        stop.set()
    sent, cpu = q.get(timeout=60)
    proc.join(timeout=30)
    return (c1 - c0) / (t1 - t0) / 1e6, float(sent) / 1e6, float(cpu)


def _counting(m: Any) -> Callable[[], int]:
    """The program's own count of the frames it ran on: its per-CPU counters summed."""
    def count() -> int:
        return sum(int(m.sum(k)) for k in range(min(m.spec.max_entries, 256)))
    return count


def _cases() -> dict[str, tuple[str, str | None, Callable[[Any], None] | None]]:
    from pyxdp.testing.livelab import devmap_to
    return {"drop": (str(SAMPLES / "xdp1.o"), None, None),
            "tx": (str(SAMPLES / "xdp2.o"), None, None),
            "redirect": (str(SAMPLES / "redirect_map.o"), "xdp_redirect_map_prog",
                         devmap_to("veth2"))}


@contextmanager
def _napi_threaded(ifname: str, on: bool) -> Iterator[None]:
    """Linux native's side of ``--threaded-napi``: the interface's NAPI instances (there
    since the attach) threaded for the block."""
    from pyxdp.kernel.netdev_genl import thread_napis, unthread_napis
    ids = thread_napis(ifname) if on else []
    try:
        yield
    finally:
        unthread_napis(ids)


def cmd_bench_live(args: argparse.Namespace) -> int:
    """``bench live [--vs-kernel]``: see the module docstring."""
    from pyxdp.collection import Collection
    from pyxdp.kernel import bpf_available
    from pyxdp.kernel.io_uring_napi import busy_poll_rx_packets
    from pyxdp.kernel.link import XdpLink
    from pyxdp.testing.livelab import live_netns
    from pyxdp.xsk.live import LiveDataplane, LiveOptions
    if args.duration <= 0:
        raise CliError("--duration must be > 0")
    cases = _cases()
    names = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in names if c not in cases]
    if bad or not names:
        raise CliError(f"--cases: {', '.join(bad) or 'none'}: not one of {', '.join(cases)}")
    busy_poll = _busy_poll_usecs(args.busy_poll)
    ok, why = bpf_available()
    if not ok:
        raise CliError(f"bench live needs root and BPF: {why}")
    if args.threaded_napi and not args.json:
        print("threaded NAPI on veth0 (pyxdp, Linux native); Linux generic runs in the "
              "backlog", flush=True)
    with _sigterm_as_interrupt(), live_netns() as ns:  # SIGTERM: the namespace deleted too
        for name in names:
            obj, section, setup = cases[name]
            row: dict[str, Any] = {"case": name, "object": Path(obj).name,
                                   "threaded_napi": args.threaded_napi,
                                   "busy_poll": busy_poll}
            opts = LiveOptions(threaded_napi=args.threaded_napi, busy_poll=busy_poll)
            with LiveDataplane(obj, ["veth0", "veth2"], section=section, options=opts) as dp:
                if setup:
                    setup(dp.collection)
                count = _counting(dp.collection.maps["rxcnt"])
                c0, b0 = count(), busy_poll_rx_packets()
                row["pyxdp_mpps"], row["sent_mpps"], row["sender_cpu"] = _timed(
                    ns, count, args.duration)
                if busy_poll:  # of the frames the program ran on, those a busy poll took
                    row["busy_polled"] = (busy_poll_rx_packets() - b0) / max(count() - c0, 1)
            if args.vs_kernel:
                for mode in ("native", "generic"):
                    with Collection.load(obj, backend="kernel") as coll, \
                            XdpLink.attach("veth0", coll.program(section).handle,  # type: ignore[arg-type]
                                           mode=mode), \
                            _napi_threaded("veth0", args.threaded_napi and mode == "native"):
                        if setup:
                            setup(coll)
                        (row[f"linux_{mode}_mpps"], row[f"linux_{mode}_sent_mpps"],
                         row[f"linux_{mode}_sender_cpu"]) = _timed(
                            ns, _counting(coll.maps["rxcnt"]), args.duration)
            _print_row(row, args.json)
    return 0


def _print_row(row: dict[str, Any], as_json: bool) -> None:
    """One line per Linux mode: each side's Mpps (what its program counted) with what the
    generator sent meanwhile and the CPU it got, and the ratio."""
    if as_json:
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v
                          for k, v in row.items()}), flush=True)
        return
    p = row["pyxdp_mpps"]
    busy = f", {row['busy_polled']:4.0%} busy-polled" if "busy_polled" in row else ""
    head = (f"{row['case']:<9} {row['object']:<15} pyxdp {p:7.3f} Mpps "
            f"(of {row['sent_mpps']:.3f} sent, {row['sender_cpu']:4.0%} CPU{busy})")
    if "linux_native_mpps" not in row:
        print(head, flush=True)
        return
    for mode in ("native", "generic"):
        k = row[f"linux_{mode}_mpps"]
        ratio = p / k if k else 0.0
        print(f"{head}   Linux {mode:<7} {k:7.3f} Mpps (of {row[f'linux_{mode}_sent_mpps']:.3f}"
              f" sent, {row[f'linux_{mode}_sender_cpu']:4.0%} CPU)   ratio pyxdp/kernel: "
              f"{ratio:.2f}", flush=True)
