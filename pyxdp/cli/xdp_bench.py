"""``pyxdp bench drop|pass|tx|redirect|redirect-cpu|redirect-map``: xdp-bench's commands on
pyxdp devices.

Each command builds a pyxdp host whose NICs carry the names given on the
command line, feeds the first one's rx queue from the traffic generator (as
a NIC's DMA would fill it) and attaches xdp-bench's program for the command:

* ``drop``, ``pass``, ``tx IFNAME``: built-in programs returning XDP_DROP,
  XDP_PASS or XDP_TX after xdp-bench's ``-p/--packet-operation``
  (``no-touch``, ``read-data``: read the EtherType, ``parse-ip``: read the
  IPv4 protocol, ``swap-macs``: swap the Ethernet addresses; ``tx``
  defaults to ``swap-macs``, as xdp-bench);
* ``redirect IN OUT``: a built-in ``bpf_redirect(OUT's ifindex, 0)``;
* ``redirect-map IN OUT``: the ``redirect_map`` sample (a devmap
  ``tx_port`` whose entry 0 is OUT);
* ``redirect-cpu IN -c CPU...``: the ``redirect_cpu`` sample, its program
  chosen by ``-p/--program-mode`` (``round-robin``, ``l4-hash`` - the
  default, as xdp-bench - or ``l4-proto``), a cpumap entry of ``-q/--qsize``
  frames per CPU; the generator sends 16 UDP flows so a hash spreads them.

As xdp-bench: ``-i/--interval`` seconds between reports (default 2), ``-e/
--extended`` adds the breakdown of the XDP tracepoints the run fired (the
``pyxdp monitor`` table: exceptions per action, XDP_TX bulks, devmap
transmits, cpumap enqueue and kthread), ``-s/--stats`` counts successful
redirects, ``-m/--mode native|skb``; it runs until Ctrl-C, which prints the
totals of the whole run (``--duration`` stops it earlier). ``--packet F``
replaces the generated frame; ``--plot FILE.svg`` draws the rates.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pyxdp import samples
from pyxdp.cli.options import (
    STYLE,
    CliError,
    _read_input,
    add_mode_arg,
    emit,
    kernel_mode,
    seconds,
    status,
)

__all__ = ["COMMANDS", "add_commands", "builtin_program", "cmd"]

COMMANDS: Final = {
    "drop": "drop all packets on an interface",
    "pass": "pass all packets to the network stack",
    "tx": "transmit packets back out on an interface (hairpin forwarding)",
    "redirect": "XDP redirect using the bpf_redirect() helper",
    "redirect-cpu": "XDP CPU redirect using BPF_MAP_TYPE_CPUMAP",
    "redirect-map": "XDP redirect using BPF_MAP_TYPE_DEVMAP",
}
PACKET_OPS: Final = ("no-touch", "read-data", "parse-ip", "swap-macs")
CPU_MODES: Final = {"round-robin": "xdp_redirect_cpu_rr", "l4-hash": "xdp_redirect_cpu_hash",
                    "l4-proto": "xdp_redirect_cpu_proto"}
_ACTS: Final = {"drop": 1, "pass": 2, "tx": 3}
_VERDICTS: Final = ("aborted", "drop", "pass", "tx", "redirect")
SAMPLES: Final = samples.DIR  # the checkout's samples/ or the wheel's copy

# The packet operations before the verdict, in BPF assembler; r2/r3 hold data and
# data_end, a short frame skips to the verdict (the trailing "r0 = ACT; exit").
_LOAD: Final = "r2 = *(u32 *)(r1 + 0)\nr3 = *(u32 *)(r1 + 4)\nr4 = r2\n"
_OPS: Final = {
    "no-touch": "",
    "read-data": _LOAD + "r4 += 14\nif r4 > r3 goto +1\nr5 = *(u16 *)(r2 + 12)\n",
    # EtherType 0x0800 reads as 0x0008 in a little-endian load; then ip->protocol.
    "parse-ip": _LOAD + "r4 += 34\nif r4 > r3 goto +3\nr5 = *(u16 *)(r2 + 12)\n"
                        "if r5 != 8 goto +1\nr5 = *(u8 *)(r2 + 23)\n",
    "swap-macs": _LOAD + "r4 += 14\nif r4 > r3 goto +8\nr4 = *(u32 *)(r2 + 0)\n"
                         "r5 = *(u16 *)(r2 + 4)\nr6 = *(u32 *)(r2 + 6)\n"
                         "r7 = *(u16 *)(r2 + 10)\n*(u32 *)(r2 + 0) = r6\n"
                         "*(u16 *)(r2 + 4) = r7\n*(u32 *)(r2 + 6) = r4\n"
                         "*(u16 *)(r2 + 10) = r5\n",
}


def builtin_program(command: str, op: str = "no-touch", ifindex_out: int = 0) -> Any:
    """xdp-bench's program for ``drop``/``pass``/``tx`` (after ``op``) or ``redirect``
    (to ``ifindex_out``), as a one-program CollectionSpec."""
    from pyxdp.testing.kernel_live import asm_spec
    if command == "redirect":
        return asm_spec("xdp_redirect_basic", f"r1 = {ifindex_out}\nr2 = 0\ncall 23\nexit")
    return asm_spec(f"xdp_{command}_{op.replace('-', '_')}",
                    _OPS[op] + f"r0 = {_ACTS[command]}\nexit")


def _seconds(text: str) -> float:
    v = seconds(text)
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return v


def _cpu(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a CPU number: {text!r}") from None
    if not 0 <= v < 64:
        raise argparse.ArgumentTypeError(f"CPU {v} is outside 0..63 (the sample's MAX_CPUS)")
    return v


def _qsize(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a queue size: {text!r}") from None
    if not 1 <= v <= 16384:
        raise argparse.ArgumentTypeError(f"queue size {v} is outside 1..16384")
    return v


def add_commands(bsub: Any) -> None:
    """The six commands under ``pyxdp bench``."""
    for name, help_ in COMMANDS.items():
        p = bsub.add_parser(name, help=f"{help_} (xdp-bench {name}, on pyxdp devices)",
                            description=f"xdp-bench {name} on pyxdp devices: {help_}. The "
                                        "first NIC is fed by the traffic generator; runs "
                                        "until Ctrl-C (or --duration), then prints the "
                                        "totals.")
        p.add_argument("ifname", metavar="IFNAME_IN" if name.startswith("redirect") and
                       name != "redirect-cpu" else "IFNAME", help="the pyxdp NIC fed by the "
                                                                  "traffic generator")
        if name in ("redirect", "redirect-map"):
            p.add_argument("ifname_out", metavar="IFNAME_OUT", help="the NIC to redirect to")
        if name in ("drop", "pass", "tx"):
            p.add_argument("-p", "--packet-operation", choices=PACKET_OPS,
                           default="swap-macs" if name == "tx" else "no-touch",
                           help="what the program does with the packet first (default: "
                                f"{'swap-macs' if name == 'tx' else 'no-touch'})")
        if name == "redirect-cpu":
            p.add_argument("-c", "--cpu", type=_cpu, action="append", required=True,
                           metavar="CPU", help="a target CPU (repeat for several)")
            p.add_argument("-p", "--program-mode", choices=tuple(CPU_MODES),
                           default="l4-hash", help="how the CPU is chosen (default: l4-hash)")
            p.add_argument("-q", "--qsize", type=_qsize, default=2048,
                           help="frames per cpumap entry's ring (default: 2048)")
        p.add_argument("-i", "--interval", type=_seconds, default=2.0, metavar="SECONDS",
                       help="seconds between reports (default: 2)")
        p.add_argument("-e", "--extended", action="store_true",
                       help="also the XDP tracepoints the run fired, per event")
        p.add_argument("-s", "--stats", action="store_true",
                       help="also count successful redirects (xdp_redirect)")
        add_mode_arg(p)
        p.add_argument("--duration", type=_seconds, metavar="SECONDS",
                       help="stop after this long (default: until Ctrl-C)")
        p.add_argument("--packet", metavar="F", help="the frame to send (raw bytes, e.g. from "
                                                    "'pyxdp packet'; default: 64-byte UDP)")
        p.add_argument("--engine", choices=("auto", "jit", "interp"), default="auto")
        p.add_argument("--plot", metavar="FILE.svg",
                       help="draw the rates over time (needs pyxdp[plot])")


@dataclass
class _Run:
    """What the loop samples: the host, its ingress and egress devices."""

    host: Any
    dev_in: Any
    dev_out: Any
    prog: Any
    label: str
    rows: list[dict[str, float]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)


def _setup(args: argparse.Namespace) -> tuple[_Run, Any]:
    from pyxdp.net.netdevice import Host
    from pyxdp.net.packets import flow_frame
    from pyxdp.net.source import TrafficGenerator
    from pyxdp.net.trace import Tracer

    cmd = args.bench_cmd
    cpus = sorted(set(getattr(args, "cpu", None) or []))
    host = Host(engine=args.engine, tracer=Tracer(),
                nr_cpus=max([2, *(c + 1 for c in cpus)]))
    try:
        names = [args.ifname] + ([args.ifname_out] if hasattr(args, "ifname_out") else [])
        if len(set(names)) != len(names):
            raise CliError(f"bench {cmd}: IFNAME_IN and IFNAME_OUT must differ")
        dev_in = host.add_device(args.ifname)
        dev_out = host.add_device(args.ifname_out) if len(names) > 1 else dev_in
        if cmd in ("drop", "pass", "tx"):
            coll = host.load(builtin_program(cmd, args.packet_operation))
            prog = next(iter(coll.programs.values()))
        elif cmd == "redirect":
            coll = host.load(builtin_program(cmd, ifindex_out=dev_out.ifindex))
            prog = next(iter(coll.programs.values()))
        elif cmd == "redirect-map":
            coll = host.load(_sample("redirect_map.o"))
            prog = coll.programs["xdp_redirect_map_prog"]
            coll.maps["tx_port"][0] = {"ifindex": dev_out.ifindex}
        else:
            coll = host.load(_sample("redirect_cpu.o"))
            prog = coll.programs[CPU_MODES[args.program_mode]]
            for i, cpu in enumerate(cpus):
                coll.maps["cpu_map"][cpu] = {"qsize": args.qsize, "bpf_prog": {"fd": 0}}
                coll.maps["cpus_available"][i] = cpu
            coll.maps["cpus_count"][0] = len(cpus)
        dev_in.attach_xdp(prog, mode=kernel_mode(args.mode))
        if args.packet:
            from pyxdp.cli.datapath import check_packet
            packets = [check_packet(_read_input(args.packet))]
        elif cmd == "redirect-cpu":
            packets = [flow_frame(f, 64, "udp") for f in range(16)]
        else:
            from pyxdp.cli.datapath import DEFAULT_PACKET
            packets = [DEFAULT_PACKET]
        dev_in.rx[0].source = TrafficGenerator(packets=packets)
    except BaseException:
        host.close()
        raise
    where = (f"{args.ifname} -> {args.ifname_out}" if dev_out is not dev_in
             else f"{args.ifname} -> CPU {','.join(map(str, cpus))}" if cpus else args.ifname)
    return _Run(host, dev_in, dev_out, prog, where), coll


def _sample(name: str) -> Path:
    path = SAMPLES / name
    if not path.is_file():
        raise CliError(f"the sample {name} is not there ({path}): run from a pyxdp checkout")
    return path


def _rates(run: _Run, before: tuple[Any, Any], iv: Any, dt: float) -> dict[str, float]:
    a, b = run.dev_in.stats, run.dev_out.stats
    r = {"rx": (a.rx_packets - before[0].rx_packets) / dt,
         "aborted": (a.xdp_aborted - before[0].xdp_aborted) / dt,
         "drop": (a.xdp_drops - before[0].xdp_drops) / dt,
         "pass": (a.xdp_pass - before[0].xdp_pass) / dt,
         "tx": (a.xdp_tx - before[0].xdp_tx) / dt,
         "redirect": (a.xdp_redirect - before[0].xdp_redirect) / dt}
    # The tracepoints' counts over the same window as the device's (the session's own
    # clock reads at other instants: its rates could show more sent than received).

    def rate(event: str, column: str = "events") -> float:
        return float(iv.count(event, column)) / dt

    r["xmit"] = rate("xdp_bulk_tx", "sent") + rate("xdp_devmap_xmit", "sent")
    r["err_drop"] = (rate("xdp_redirect_err") + rate("xdp_exception")
                     + rate("xdp_bulk_tx", "drops") + rate("xdp_devmap_xmit", "drops")
                     + rate("xdp_cpumap_enqueue", "drops")
                     + rate("xdp_cpumap_kthread", "drops"))
    r["cpumap"] = rate("xdp_cpumap_kthread", "processed")
    r["redirect_ok"] = rate("xdp_redirect")
    del b
    return r


def _line(args: argparse.Namespace, r: dict[str, float]) -> str:
    cells = [f"{r['rx']:>13,.0f} rx/s", f"{r['err_drop']:>9,.0f} err,drop/s"]
    cmd = args.bench_cmd
    if cmd in ("tx", "redirect", "redirect-map"):
        cells.append(f"{r['xmit']:>13,.0f} xmit/s")
    if cmd == "redirect-cpu":
        cells.append(f"{r['cpumap']:>13,.0f} cpumap/s")
    if args.stats:
        cells.append(f"{r['redirect_ok']:>13,.0f} redir/s")
    return "Summary " + "  ".join(cells)


def cmd(args: argparse.Namespace) -> int:
    """Run one xdp-bench command until Ctrl-C or ``--duration``."""
    from pyxdp.cli import monitor
    from pyxdp.cli.datapath import compile_status
    from pyxdp.net.trace import TraceSession

    if args.plot:
        from pyxdp.cli.plot import require_matplotlib
        require_matplotlib()
    run, coll = _setup(args)
    with run.host:
        if not STYLE.json:
            print(f"pyxdp bench {args.bench_cmd}: {run.prog.name} on {run.label} ({args.mode}), "
                  f"reports every {args.interval:g} s", flush=True)
        compile_status(run.host, run.prog)
        session = TraceSession(run.host.tracer)
        start = (run.dev_in.stats.copy(), run.dev_out.stats.copy())
        t_start = time.monotonic()
        t_end = t_start + args.duration if args.duration else float("inf")
        n = 0
        interrupted = False
        try:
            while time.monotonic() < t_end:
                before = (run.dev_in.stats.copy(), run.dev_out.stats.copy())
                t0 = time.monotonic()
                stop = min(t0 + args.interval, t_end)
                while time.monotonic() < stop:
                    run.host.run(max_rounds=1)  # NAPI polls, then cpumap kthreads inline
                dt = time.monotonic() - t0
                iv = session.sample()
                n += 1
                r = _rates(run, before, iv, dt)
                run.rows.append(r)
                run.times.append(time.monotonic() - t_start)
                _report(args, n, r, iv, monitor)
        except KeyboardInterrupt:
            interrupted = True
        session.sample()
        dt = max(time.monotonic() - t_start, 1e-9)
        total = _rates(run, start, session.total(), dt)
        _summary(args, n, dt, total, session.total(), monitor, interrupted)
        if run.dev_in.faults:
            status(f"first fault: {run.dev_in.faults[0]}")
    del coll
    if args.plot and run.rows:
        from pyxdp.cli.plot import plot_rates
        series = {k: [r[k] / 1e6 for r in run.rows] for k in ("rx", *_VERDICTS, "xmit")
                  if any(r[k] for r in run.rows)}
        plot_rates(args.plot, f"pyxdp bench {args.bench_cmd}: {run.label}", run.times, series)
        if not STYLE.json:
            status(f"plot written to {args.plot}")
    return 130 if interrupted else 0


def _report(args: argparse.Namespace, n: int, r: dict[str, float], iv: Any,
            monitor: Any) -> None:
    if STYLE.json:
        doc: dict[str, Any] = {"interval": n, "elapsed": round(iv.elapsed, 6),
                               **{k: round(v) for k, v in r.items()}}
        if args.extended:
            doc["events"] = monitor.json_report(iv, n, "userspace")["events"]
        emit(doc)
        return
    print(_line(args, r), flush=True)
    if args.extended:
        verdicts = [(f"  XDP_{v.upper()}", [(f"{r[v]:,.0f}", "pkt/s")]) for v in _VERDICTS
                    if r[v]]
        table = verdicts + monitor.rows(iv, stats=args.stats, extended=True)[1:]
        import sys
        monitor._render_plain(f"  interval {n}: {iv.elapsed:.2f} s", table, sys.stdout)


def _summary(args: argparse.Namespace, n: int, dt: float, total: dict[str, float], iv: Any,
             monitor: Any, interrupted: bool) -> None:
    if STYLE.json:
        emit({"summary": True, "interrupted": interrupted, "intervals": n,
              "seconds": round(dt, 3), **{k: round(v) for k, v in total.items()}})
        return
    how = "interrupted" if interrupted else "done"
    print(f"{how} after {dt:.1f} s ({n} intervals), rates over the whole run:", flush=True)
    print(_line(args, total), flush=True)
