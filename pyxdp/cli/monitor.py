"""``pyxdp monitor``: XDP tracepoint rates per interval, in the manner of xdp-monitor.

The events are those of ``include/trace/events/xdp.h`` (see
:mod:`pyxdp.uapi.xdp_trace`). Two sources feed the same counters
(:class:`pyxdp.net.trace.Tracer`) and the same table:

* the kernel (``--kernel``, the default): a private tracefs instance
  (:class:`pyxdp.kernel.tracefs.TraceInstance`) with the XDP events enabled;
  every event read from its trace_pipe is counted;
* pyxdp's userspace tracepoints in this process (:func:`run` with
  ``kernel=False`` and a tracer): ``--pyxdp OBJ`` runs OBJ on pyxdp's
  datapath in this process (the setup of ``pyxdp bench xdp``: a NIC fed by
  the traffic generator, in a thread of its own; the native poll loop runs
  without the GIL) and reports its host's tracepoints; from Python,
  ``run(kernel=False)`` monitors :data:`pyxdp.net.trace.TRACER` or any tracer.

``--json`` prints one JSON object per interval instead of the table: per
event, the rate of each counter column (events/s and the summed fields).

As in xdp-monitor, successful redirects (``xdp_redirect``, one event per
packet) are only traced with ``-s``; ``-e`` breaks totals down per device,
CPU, action or error; ``-v`` reports the tracefs setup.
"""

from __future__ import annotations

import argparse
import errno
import json
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final, TextIO

from pyxdp.cli.options import add_mode_arg, seconds
from pyxdp.errors import PyxdpError

if TYPE_CHECKING:  # the CLI imports numpy and rich only when the command runs
    from pyxdp.net.trace import Interval, Key, Tracer

__all__ = ["DESCRIPTION", "EPILOG", "add_arguments", "cmd_monitor", "rows", "run"]

DESCRIPTION: Final = (
    "Rates of the XDP tracepoints per interval, like xdp-monitor: redirects, redirect "
    "errors, exceptions per action, XDP_TX bulks, cpumap enqueue/kthread and devmap "
    "transmits.")
EPILOG: Final = (
    "Source: the kernel's xdp tracepoints, read through a private tracefs instance "
    "(instances/pyxdp-<pid>, removed on exit; needs root, mounts tracefs if missing). "
    "--kernel is the default. --pyxdp OBJ instead runs OBJ on pyxdp's userspace "
    "datapath inside this command (a NIC fed by the traffic generator, as pyxdp bench "
    "xdp does) and reports its tracepoints; no root needed. From Python, "
    "pyxdp.cli.monitor.run(kernel=False, tracer=...) monitors any pyxdp tracer.")

#: Events enabled in the kernel by default; -s adds xdp_redirect.
_DEFAULT_EVENTS: Final = ("xdp_redirect_err", "xdp_exception", "xdp_bulk_tx",
                          "xdp_cpumap_enqueue", "xdp_cpumap_kthread", "xdp_devmap_xmit",
                          "mem_connect", "mem_disconnect", "bpf_xdp_link_attach_failed")
_INT_MAX: Final = 0x7FFF_FFFF


def _interval(text: str) -> float:
    value = seconds(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"the interval must be positive: {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a count: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"the count must be at least 1: {text!r}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``pyxdp monitor`` (xdp-monitor's -i -s -e -v, plus --count)."""
    p.add_argument("-i", "--interval", type=_interval, default=2.0, metavar="SECONDS",
                   help="seconds between reports (default: 2)")
    p.add_argument("-s", "--stats", action="store_true",
                   help="also count successful redirects (xdp_redirect fires per packet: "
                        "costly at high rates)")
    p.add_argument("-e", "--extended", action="store_true",
                   help="break totals down per device, CPU, action and error")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="report the tracefs instance and the events enabled on stderr")
    p.add_argument("--count", type=_count, metavar="N",
                   help="stop after N intervals (default: run until interrupted)")
    p.add_argument("--kernel", action="store_true", default=True,
                   help="read the kernel's xdp tracepoints through tracefs (the default; "
                        "see below)")
    p.add_argument("--pyxdp", metavar="OBJ",
                   help="run OBJ on pyxdp's datapath in this process and monitor that")
    p.add_argument("--section", metavar="NAME", help="with --pyxdp: the program")
    add_mode_arg(p, what=" (with --pyxdp)")
    p.add_argument("--maps", metavar="F", help="with --pyxdp: fill maps first from JSON, as "
                                              "'pyxdp run --maps' ({\"MAP\": [{\"key\": K, "
                                              "\"value\": V}, ...]})")
    p.add_argument("--packet", metavar="F", help="with --pyxdp: the packet the generator sends "
                                                "(raw bytes, e.g. from 'pyxdp packet'; default: "
                                                "a 64-byte UDP frame)")


def cmd_monitor(args: argparse.Namespace) -> int:
    if args.pyxdp is None:
        for flag in ("maps", "packet", "section"):
            if getattr(args, flag):
                raise MonitorError(f"--{flag} goes with --pyxdp OBJ (the kernel's programs "
                                   f"are not pyxdp's to fill)")
        return run(interval=args.interval, count=args.count, stats=args.stats,
                   extended=args.extended, verbose=args.verbose, kernel=args.kernel,
                   as_json=args.json)
    from pyxdp.cli.datapath import DEFAULT_PACKET, check_packet, running_datapath
    from pyxdp.cli.options import _read_input, kernel_mode
    packet = check_packet(_read_input(args.packet)) if args.packet else DEFAULT_PACKET
    with running_datapath(args.pyxdp, args.section, kernel_mode(args.mode), packet,
                          maps=args.maps) as host:
        return run(interval=args.interval, count=args.count, stats=True,
                   extended=args.extended, verbose=args.verbose, kernel=False,
                   tracer=host.tracer, as_json=args.json)


class MonitorError(PyxdpError):
    """Monitor options that do not go together."""


# --------------------------------------------------------------------------
# The report: rows of (label, metric cells) from one interval
# --------------------------------------------------------------------------

Cell = tuple[str, str]  # number, unit
Row = tuple[str, list[Cell]]


def _cell(rate: float, unit: str) -> Cell:
    return f"{rate:,.0f}", unit


def _bulk(units: int, events: int) -> Cell:
    return f"{(units / events if events else 0.0):.2f}", "bulk-avg"


def _errname(err: int) -> str:
    return errno.errorcode.get(-err, str(err)) if err < 0 else str(err)


def _action(act: int) -> str:
    from pyxdp.uapi.xdp_trace import action_name
    return action_name(act)


def _mem(mem_type: int) -> str:
    from pyxdp.uapi.xdp_trace import mem_type_name
    return mem_type_name(mem_type)


def _grouped(iv: Interval, event: str, by: Callable[[Key], Key]) -> dict[Key, list[int]]:
    """Column deltas summed over the keys that ``by`` maps together."""
    out: dict[Key, list[int]] = {}
    for key, delta in iv.deltas(event).items():
        acc = out.setdefault(by(key), [0] * len(delta))
        for i, v in enumerate(delta):
            acc[i] += v
    return dict(sorted(out.items()))


def rows(iv: Interval, *, stats: bool = False, extended: bool = False,
         lost: int = 0) -> list[Row]:
    """The report of one interval: a label and its rate cells per row.

    Totals always appear (zeros included) so that the table keeps its
    shape; breakdowns appear when they are non-zero (exceptions per
    action always, the others with ``extended``).
    """
    t = iv.elapsed if iv.elapsed > 0 else 1.0
    out: list[Row] = []

    def r(event: str, column: str = "events") -> float:
        return iv.rate(event, column)

    drops = (r("xdp_redirect_err") + r("xdp_exception") + r("xdp_bulk_tx", "drops")
             + r("xdp_devmap_xmit", "drops") + r("xdp_cpumap_enqueue", "drops")
             + r("xdp_cpumap_kthread", "drops"))
    summary = [_cell(r("xdp_redirect"), "redir/s")] if stats else []
    summary += [_cell(drops, "err,drop/s"),
                _cell(r("xdp_devmap_xmit", "sent") + r("xdp_bulk_tx", "sent"), "xmit/s")]
    out.append(("Summary", summary))

    if stats:
        out.append(("  redirect total", [_cell(r("xdp_redirect"), "pkt/s")]))
        if extended:
            for (ifindex, to_ifindex, map_id), d in _grouped(iv, "xdp_redirect",
                                                             lambda k: k).items():
                where = (f"ifindex {to_ifindex}" if map_id == _INT_MAX
                         else f"map {map_id}" + (f" ifindex {to_ifindex}" if to_ifindex else ""))
                out.append((f"    ifindex {ifindex} -> {where}", [_cell(d[0] / t, "pkt/s")]))

    out.append(("  redirect_err total", [_cell(r("xdp_redirect_err"), "error/s")]))
    if extended:
        for (ifindex, err), d in _grouped(iv, "xdp_redirect_err", lambda k: k).items():
            out.append((f"    ifindex {ifindex} {_errname(err)}", [_cell(d[0] / t, "error/s")]))

    out.append(("  xdp_exception total", [_cell(r("xdp_exception"), "hit/s")]))
    by_action = (lambda k: k) if extended else (lambda k: (k[1],))
    for key, d in _grouped(iv, "xdp_exception", by_action).items():
        label = (f"    {_action(key[1])} ifindex {key[0]}" if extended
                 else f"    {_action(key[0])}")
        out.append((label, [_cell(d[0] / t, "hit/s")]))

    bt = iv.count("xdp_bulk_tx")
    out.append(("  xdp_bulk_tx (XDP_TX)", [
        _cell(r("xdp_bulk_tx", "sent"), "xmit/s"), _cell(r("xdp_bulk_tx", "drops"), "drop/s"),
        _cell(r("xdp_bulk_tx", "errors"), "err/s"), _bulk(iv.count("xdp_bulk_tx", "sent"), bt)]))
    if extended:
        for (ifindex,), d in _grouped(iv, "xdp_bulk_tx", lambda k: k).items():
            out.append((f"    ifindex {ifindex}", [
                _cell(d[1] / t, "xmit/s"), _cell(d[2] / t, "drop/s"),
                _cell(d[3] / t, "err/s"), _bulk(d[1], d[0])]))

    ce = iv.count("xdp_cpumap_enqueue")
    out.append(("  cpumap enqueue", [
        _cell(r("xdp_cpumap_enqueue", "processed"), "pkt/s"),
        _cell(r("xdp_cpumap_enqueue", "drops"), "drop/s"),
        _bulk(iv.count("xdp_cpumap_enqueue", "processed"), ce)]))
    if extended:
        for (map_id, cpu, to_cpu), d in _grouped(iv, "xdp_cpumap_enqueue", lambda k: k).items():
            out.append((f"    map {map_id} cpu {cpu} -> {to_cpu}", [
                _cell(d[1] / t, "pkt/s"), _cell(d[2] / t, "drop/s"), _bulk(d[1], d[0])]))

    kt = "xdp_cpumap_kthread"
    out.append(("  cpumap kthread", [
        _cell(r(kt, "processed"), "pkt/s"), _cell(r(kt, "drops"), "drop/s"),
        _cell(r(kt, "sched"), "sched/s"),
        *([_cell(r(kt, "xdp_pass"), "xdp_pass/s"), _cell(r(kt, "xdp_drop"), "xdp_drop/s"),
           _cell(r(kt, "xdp_redirect"), "xdp_redir/s")] if extended else [])]))
    if extended:
        for (map_id, cpu), d in _grouped(iv, kt, lambda k: k).items():
            out.append((f"    map {map_id} cpu {cpu}", [
                _cell(d[1] / t, "pkt/s"), _cell(d[2] / t, "drop/s"),
                _cell(d[3] / t, "sched/s"), _cell(d[4] / t, "xdp_pass/s"),
                _cell(d[5] / t, "xdp_drop/s"), _cell(d[6] / t, "xdp_redir/s")]))

    dx = "xdp_devmap_xmit"
    out.append(("  devmap_xmit", [
        _cell(r(dx, "sent"), "xmit/s"), _cell(r(dx, "drops"), "drop/s"),
        _cell(r(dx, "errors"), "drv_err/s"), _bulk(iv.count(dx, "sent"), iv.count(dx))]))
    if extended:
        for (src, dst), d in _grouped(iv, dx, lambda k: k).items():
            out.append((f"    ifindex {src} -> {dst}", [
                _cell(d[1] / t, "xmit/s"), _cell(d[2] / t, "drop/s"),
                _cell(d[3] / t, "drv_err/s"), _bulk(d[1], d[0])]))

    mem = [("mem_connect", "  mem_connect"), ("mem_disconnect", "  mem_disconnect"),
           ("bpf_xdp_link_attach_failed", "  link_attach_failed")]
    for event, label in mem:
        if iv.count(event) or extended:
            out.append((label, [_cell(r(event), "event/s")]))
        if extended and event != "bpf_xdp_link_attach_failed":
            for key, d in _grouped(iv, event, lambda k: k).items():
                where = f" ifindex {key[1]}" if len(key) > 1 else ""
                out.append((f"    {_mem(key[0])}{where}", [_cell(d[0] / t, "event/s")]))
    if lost:
        out.append(("  lost events", [_cell(lost / t, "event/s")]))
    return out


def json_report(iv: Interval, n: int, source: str, lost: int = 0) -> dict[str, object]:
    """One interval as plain data: per event with activity, the rate of each counter
    column; per event and key, the same (keys as the tracepoint's key fields)."""
    t = iv.elapsed if iv.elapsed > 0 else 1.0
    events: dict[str, object] = {}
    for event in iv.end.columns:
        cols = iv.end.columns[event]
        deltas = iv.deltas(event)
        if not any(any(d) for d in deltas.values()):
            continue
        total = [sum(d[i] for d in deltas.values()) for i in range(len(cols))]
        events[event] = {
            "rates": {c: round(v / t, 3) for c, v in zip(cols, total, strict=True)},
            "by_key": [{"key": list(k), **{c: round(v / t, 3)
                                         for c, v in zip(cols, d, strict=True)}}
                       for k, d in deltas.items() if any(d)]}
    return {"source": source, "interval": n, "elapsed": round(iv.elapsed, 6),
            "lost": lost, "events": events}


SPARK_BARS: Final = " ▁▂▃▄▅▆▇█"
SPARK_LEN: Final = 8
WIDTH: Final = 80


def sparkline(values: Iterable[float]) -> str:
    """Rates as bars, scaled to the largest: the last :data:`SPARK_LEN` intervals."""
    vals = list(values)[-SPARK_LEN:]
    top = max(vals, default=0.0)
    if top <= 0:
        return SPARK_BARS[1] * len(vals)
    return "".join(SPARK_BARS[max(1, round(v / top * (len(SPARK_BARS) - 1)))] for v in vals)


def _rate_of(cell: Cell) -> float:
    try:
        return float(cell[0].replace(",", ""))
    except ValueError:
        return 0.0


def fit(table: Iterable[Row], width: int = WIDTH) -> list[Row]:
    """Rows whose cells would pass ``width`` columns continue on a row of their own
    (an empty label) under the same columns: numbers and units are never cut."""
    data = list(table)
    lw = max((len(label) for label, _ in data), default=0)
    nw = max((len(n) for _, cells in data for n, _ in cells), default=1)
    uw = max((len(u) for _, cells in data for _, u in cells), default=1)
    per = max(1, (width - lw) // (nw + uw + 3))
    out: list[Row] = []
    for label, cells in data:
        out.append((label, cells[:per]))
        for k in range(per, len(cells), per):
            out.append(("", cells[k:k + per]))
    return out


def _render_plain(title: str, table: Iterable[Row], out: TextIO,
                  sparks: dict[str, str] | None = None) -> None:
    # xdp-monitor's layout: a label, then "number unit" cells, the numbers
    # right-aligned and the units left-aligned in fixed-width columns; a
    # sparkline of the row's first rate in front of the cells when it fits.
    data = fit(table, WIDTH - (SPARK_LEN + 1 if sparks else 0))
    width = max(len(label) for label, _ in data)
    nw = max((len(n) for _, cells in data for n, _ in cells), default=1)
    uw = max((len(u) for _, cells in data for _, u in cells), default=1)
    out.write(title + "\n")
    for label, cells in data:
        spark = (" " + (sparks or {}).get(label, "").ljust(SPARK_LEN)) if sparks else ""
        line = label.ljust(width) + spark + "".join(f"  {n:>{nw}} {u:<{uw}}"
                                                    for n, u in cells)
        out.write(line.rstrip() + "\n")
    out.flush()


def _render_rich(title: str, table: Iterable[Row], out: TextIO,
                 sparks: dict[str, str] | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    data = fit(table, WIDTH - (SPARK_LEN + 1 if sparks else 0) - 4)
    ncells = max(len(cells) for _, cells in data)
    t = Table(title=title, show_header=False, box=None, padding=(0, 1))
    t.add_column(style="bold", no_wrap=True)
    if sparks:
        t.add_column(style="cyan", no_wrap=True, min_width=SPARK_LEN)
    for _ in range(ncells):
        t.add_column(justify="right", no_wrap=True)
    for label, cells in data:
        spark = [sparks.get(label, "")] if sparks else []
        t.add_row(label, *spark, *[f"{n} {u}" for n, u in cells],
                  *([""] * (ncells - len(cells))))
    Console(file=out, width=max(WIDTH, 0)).print(t)


# --------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------

def run(*, interval: float = 2.0, count: int | None = None, stats: bool = False,
        extended: bool = False, verbose: bool = False, kernel: bool = True,
        tracer: Tracer | None = None, out: TextIO | None = None,
        err: TextIO | None = None, rich: bool | None = None, as_json: bool = False) -> int:
    """Print a report every ``interval`` seconds, ``count`` times (``None``: forever).

    ``kernel`` reads the kernel's tracepoints through a tracefs instance;
    otherwise the counters of ``tracer`` (default: the process-wide
    :data:`pyxdp.net.trace.TRACER`) are reported, as fired by a datapath
    running in this process. ``rich`` forces or forbids rich tables
    (default: when ``out`` is a terminal); ``as_json`` prints JSON lines.
    """
    from pyxdp.net.trace import TRACER, Tracer, TraceSession

    out = out or sys.stdout
    err = err or sys.stderr
    from pyxdp.cli.options import STYLE
    indent = 2 if STYLE.pretty else None
    use_rich = out.isatty() if rich is None else rich
    render = _render_rich if use_rich else _render_plain
    source = "kernel" if kernel else "userspace"

    history: dict[str, deque[float]] = {}
    lost_total = [0]

    def report(n: int, iv: Interval, lost: int) -> None:
        lost_total[0] += lost
        if as_json:
            out.write(json.dumps(json_report(iv, n, source, lost), indent=indent) + "\n")
            out.flush()
            return
        table = rows(iv, stats=stats, extended=extended, lost=lost)
        for label, cells in table:
            if cells:
                history.setdefault(label, deque(maxlen=SPARK_LEN)).append(_rate_of(cells[0]))
        sparks = {label: sparkline(history[label]) for label, _ in table if label in history}
        title = f"pyxdp monitor ({source}) interval {n}: {iv.elapsed:.2f} s"
        render(title, table, out, sparks)

    def summary(session: TraceSession, n: int) -> int:
        # Ctrl-C: the whole run as one interval, then the usual exit status.
        iv = session.total()
        if as_json:
            doc = json_report(iv, n, source, lost_total[0])
            doc["summary"] = True
            out.write(json.dumps(doc, indent=indent) + "\n")
            out.flush()
        else:
            render(f"pyxdp monitor ({source}) interrupted: {n} intervals, {iv.elapsed:.2f} s "
                   f"(rates over the whole run)",
                   rows(iv, stats=stats, extended=extended, lost=lost_total[0]), out)
        return 130

    if not kernel:
        session = TraceSession(tracer if tracer is not None else TRACER)
        n = 0
        try:
            while count is None or n < count:
                time.sleep(interval)
                n += 1
                report(n, session.sample(), 0)
        except KeyboardInterrupt:
            session.sample()
            return summary(session, n)
        return 0

    from pyxdp.kernel.tracefs import TraceInstance

    events = list(_DEFAULT_EVENTS) + (["xdp_redirect"] if stats else [])
    counting = tracer if tracer is not None else Tracer()
    with TraceInstance(events) as inst:
        for event, diffs in inst.mismatches.items():
            err.write(f"pyxdp monitor: warning: kernel xdp:{event} differs from pyxdp's "
                      f"definition: {'; '.join(diffs)}\n")
        if verbose:
            err.write(f"pyxdp monitor: tracefs instance {inst.path}\n"
                      f"pyxdp monitor: events enabled: {', '.join(inst.enabled)}\n")
            err.flush()
        session = TraceSession(counting)
        n = 0
        lost_before = inst.lost + inst.overruns()
        unparsed = 0
        try:
            while count is None or n < count:
                deadline = time.monotonic() + interval
                while (left := deadline - time.monotonic()) > 0:
                    for fired in inst.read(left):
                        counting.ingest(fired)
                n += 1
                lost_now = inst.lost + inst.overruns()
                report(n, session.sample(), lost_now - lost_before)
                lost_before = lost_now
                if inst.unparsed > unparsed:
                    err.write(f"pyxdp monitor: warning: {inst.unparsed - unparsed} trace "
                              f"lines not understood, e.g. {inst.last_unparsed!r}\n")
                    unparsed = inst.unparsed
        except KeyboardInterrupt:
            session.sample()
            return summary(session, n)
    return 0
