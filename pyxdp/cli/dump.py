"""``pyxdp dump``: xdpdump's capture, with tcpdump's filter expressions.

Where the frames come from and what a record holds:

* ``--prog OBJ``: the object's program runs on pyxdp (:mod:`pyxdp.net.xdp_capture`)
  over the frames of ``--pcap IN``, or, without it, over copies of the frames
  interface ``-i IF`` receives (an AF_PACKET socket: the kernel's handling of
  them is untouched, pyxdp shows what the program would do to them). Records
  at ``exit`` carry pyxdp's verdict and, after XDP_REDIRECT, the target in a
  comment.
* no ``--prog``, an XDP program attached to ``IF`` in Linux: xdpdump's fentry
  (``entry``) / fexit (``exit``) programs on it (:mod:`pyxdp.kernel.xdpdump`),
  the verdict from the fexit program. Where the kernel refuses to load
  fentry/fexit programs, or nothing is attached, the capture falls back to an
  AF_PACKET socket on ``IF`` (what reaches the stack, no verdict) and says so
  on stderr.

Records are written as pcapng (``-w OUT``; ``-`` for stdout), the verdict in
``epb_verdict`` (type 2, Linux eBPF XDP: Wireshark's ``frame.verdict.ebpf_xdp``),
one interface per capture point named ``IF@entry``/``IF@exit`` as xdpdump
names its ``@fentry``/``@fexit`` ones (plain ``IF`` for the packet socket);
without ``-w`` one line per record on stdout. ``EXPRESSION`` (pcap-filter(7), compiled by libpcap,
:mod:`pyxdp.net.pcap_filter`) keeps the matching frames at each point. The
capture ends after ``-c COUNT`` records, at the end of ``--pcap``, after
``--duration`` seconds, or on Ctrl-C.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO

from pyxdp.cli.options import CliError, open_output, seconds
from pyxdp.errors import BPFUnavailable, KernelError, NotSupportedError
from pyxdp.net.pcap import EPB_FLAG_INBOUND, MAXIMUM_SNAPLEN, PcapngWriter, read_capture
from pyxdp.uapi.bpf import XdpAction

# The filter compiler, the datapath and the loader come with a capture, not with
# the parser: every ``pyxdp`` command builds this one's arguments.
if TYPE_CHECKING:
    from pyxdp.kernel.xdpdump import XdpTraceCapture
    from pyxdp.net.pcap_filter import PacketFilter
    from pyxdp.net.xdp_capture import Captured

__all__ = ["DESCRIPTION", "add_arguments", "add_filter_arguments", "cmd_dump",
           "filter_expression"]

DESCRIPTION = (
    "Capture frames at an XDP program's entry and/or exit, like xdpdump, keeping those a "
    "tcpdump filter EXPRESSION matches; write pcapng with each frame's XDP verdict. With "
    "--prog OBJ the program runs on pyxdp over --pcap IN or over what -i IF receives; "
    "without it, the program attached to IF in Linux is traced with fentry/fexit, or, "
    "where the kernel refuses that, IF is captured with a packet socket (no verdicts).")
_BATCH = 256


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--interface", required=True, metavar="IF",
                   help="the interface (with --pcap: the name the capture gives it)")
    p.add_argument("--prog", metavar="OBJ", help="run this object's program on pyxdp")
    p.add_argument("-s", "--section", metavar="PROG", help="program name or section (--prog)")
    p.add_argument("--pcap", metavar="IN", help="replay this capture into the program (--prog)")
    p.add_argument("--maps", metavar="F", help="fill maps first from JSON (--prog)")
    p.add_argument("--rx-capture", default="exit", metavar="POINTS",
                   help="capture points, entry and/or exit, comma-separated (default: exit, "
                        "where the verdict is known)")
    p.add_argument("-w", "--write", metavar="OUT", help="write pcapng ('-': stdout)")
    p.add_argument("-c", "--count", type=int, metavar="N", help="stop after N records")
    p.add_argument("--duration", type=seconds, metavar="S", help="stop after S seconds")
    p.add_argument("--snapshot-length", type=int, default=MAXIMUM_SNAPLEN, metavar="N",
                   help=f"bytes kept per frame (default: {MAXIMUM_SNAPLEN})")
    p.add_argument("--engine", choices=("auto", "jit", "interp"), default="auto",
                   help="pyxdp engine for the program and the filter")
    add_filter_arguments(p)


def add_filter_arguments(p: argparse.ArgumentParser, *, positional: bool = True) -> None:
    """``[--filter EXPR] [EXPRESSION ...]``, as tcpdump takes its filter. A command with
    positionals of its own takes only ``--filter`` (argparse cannot tell trailing filter
    words from them once options stand between)."""
    p.add_argument("--filter", metavar="EXPR", help="pcap-filter expression, as tcpdump's")
    if positional:
        p.add_argument("expression", nargs="*", metavar="EXPRESSION",
                       help="the filter as trailing words instead of --filter")


def filter_expression(args: argparse.Namespace) -> str:
    """The filter of ``add_filter_arguments``' options ("" for none)."""
    words = " ".join(getattr(args, "expression", ()))
    if args.filter and words:
        raise CliError("give the filter once: --filter EXPR or trailing EXPRESSION words")
    return str(args.filter or words)


def _points(text: str) -> tuple[str, ...]:
    from pyxdp.net.xdp_capture import CAPTURE_POINTS
    points = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    bad = [p for p in points if p not in CAPTURE_POINTS]
    if bad or not points:
        raise CliError(f"--rx-capture: capture points are entry and/or exit, not {text!r}")
    return points


class _Output:
    """pcapng (one interface per point) or one text line per record."""

    def __init__(self, path: str | None, ifname: str, points: tuple[str, ...],
                 snaplen: int) -> None:
        self._file: BinaryIO | None = None
        self.writer: PcapngWriter | None = None
        self.ids: dict[str, int] = {}
        self.ifname = ifname
        self.written = 0
        if path is None:
            return
        self._file = open_output(path)
        self.writer = PcapngWriter(self._file, userappl="pyxdp dump")
        self.snaplen = snaplen

    def _name(self, point: str) -> str:
        return f"{self.ifname}@{point}" if point else self.ifname

    def add(self, c: Captured) -> None:
        if self.writer is not None:
            if c.point not in self.ids:
                self.ids[c.point] = self.writer.add_interface(self._name(c.point),
                                                              snaplen=self.snaplen)
            self.writer.write(c.data, c.ts_ns, self.ids[c.point], verdict=c.verdict,
                              comment=c.redirect, flags=EPB_FLAG_INBOUND, orig_len=c.orig_len)
        else:
            verdict = "" if c.verdict is None else f"[{_action(c.verdict)}]"
            extra = f" ({c.redirect})" if c.redirect else ""
            print(f"{c.ts_ns / 1e9:.6f}: {self._name(c.point)}{verdict}{extra} "
                  f"packet size {c.orig_len} bytes, captured {len(c.data)} bytes")
        self.written += 1

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self._file is not None and self._file is not sys.stdout.buffer:
            self._file.close()


def _action(v: int) -> str:
    return XdpAction(v).name if v in XdpAction._value2member_map_ else str(v)


def _report(msg: str) -> None:
    sys.stderr.write(f"pyxdp dump: {msg}\n")
    sys.stderr.flush()


def cmd_dump(args: argparse.Namespace) -> int:
    points = _points(args.rx_capture)
    if args.count is not None and args.count <= 0:
        raise CliError("-c: the count must be positive")
    if not 0 < args.snapshot_length <= 0x7FFF_FFFF:
        raise CliError("--snapshot-length: outside 1..2147483647")
    if args.prog is None and (args.pcap or args.maps or args.section):
        raise CliError("--pcap, --maps and -s need --prog OBJ (the program to run on pyxdp)")
    expr = filter_expression(args)
    from pyxdp.net.pcap_filter import PacketFilter
    filt = PacketFilter(expr, engine=args.engine) if expr else None
    out = _Output(args.write, args.interface, points, args.snapshot_length)
    deadline = None if args.duration is None else time.monotonic() + args.duration
    # SIGTERM ends the capture as Ctrl-C does: the file is finished, tracing detached.
    old = None
    if threading.current_thread() is threading.main_thread():
        old = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if args.prog is not None:
            _dump_pyxdp(args, points, filt, out, deadline)
        else:
            _dump_linux(args, points, filt, out, deadline)
    except KeyboardInterrupt:
        pass
    finally:
        out.close()
        if old is not None:
            signal.signal(signal.SIGTERM, old)
    _report(f"{out.written} records written")
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _left(args: argparse.Namespace, out: _Output) -> int:
    return 1 << 62 if args.count is None else args.count - out.written


def _emit(records: list[Captured], args: argparse.Namespace, out: _Output) -> bool:
    """Write what the count allows; True when the capture is complete."""
    for c in records[:_left(args, out)]:
        out.add(c)
    return _left(args, out) <= 0


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _dump_pyxdp(args: argparse.Namespace, points: tuple[str, ...], filt: PacketFilter | None,
                out: _Output, deadline: float | None) -> None:
    from pyxdp.cli.prog import _object, _program, fill_maps
    from pyxdp.collection import Collection
    from pyxdp.elf import load_collection_spec
    from pyxdp.net.prog import XdpProg
    from pyxdp.net.xdp_capture import DatapathCapture
    with Collection(load_collection_spec(_object(args.prog)), engine=args.engine) as coll:
        if args.maps:
            fill_maps(coll, args.maps)
        program = _program(coll, args.section)
        prog = program.handle
        if not isinstance(prog, XdpProg):
            raise CliError(f"{program.name} is not an XDP program pyxdp runs")
        if args.pcap:
            cap = DatapathCapture(prog, points=points, filter=filt,
                                  snaplen=args.snapshot_length)
            for frames, stamps in _pcap_batches(args.pcap):
                if _emit(cap.run(frames, stamps), args, out) or _expired(deadline):
                    return
            return
        from pyxdp.kernel.af_packet_capture import PacketCapture
        from pyxdp.kernel.netlink import ifindex_of
        cap = DatapathCapture(prog, points=points, filter=filt, snaplen=args.snapshot_length,
                              ifindex=ifindex_of(args.interface))
        with PacketCapture(args.interface) as sock:
            _report(f"listening on {args.interface}, {prog.spec.name} on pyxdp "
                    f"({','.join(points)})")
            while not _expired(deadline):
                frames, stamps = sock.read(0.1, _BATCH)
                if frames and _emit(cap.run(frames, stamps), args, out):
                    return


def _pcap_batches(path: str) -> Iterator[tuple[list[bytes], list[int]]]:
    frames: list[bytes] = []
    stamps: list[int] = []
    for pkt in read_capture(path):
        frames.append(pkt.data)
        stamps.append(pkt.ts_ns)
        if len(frames) == _BATCH:
            yield frames, stamps
            frames, stamps = [], []
    if frames:
        yield frames, stamps


def _dump_linux(args: argparse.Namespace, points: tuple[str, ...], filt: PacketFilter | None,
                out: _Output, deadline: float | None) -> None:
    from pyxdp.kernel.netlink import ifindex_of, xdp_query
    from pyxdp.net.xdp_capture import Captured
    ifindex = ifindex_of(args.interface)
    q = xdp_query(ifindex)
    prog_ids = list(q.programs.values())
    why = f"no XDP program is attached to {args.interface}"
    if len(prog_ids) > 1:
        raise CliError(f"{args.interface} has programs in several modes ({q.programs}): "
                       "capture one with --prog")
    if prog_ids:
        from pyxdp.kernel.xdpdump import XdpTraceCapture
        try:
            trace = XdpTraceCapture(prog_ids[0], ifindex, points=points,
                                    snaplen=args.snapshot_length)
        except (BPFUnavailable, NotSupportedError) as e:
            why = f"fentry/fexit on program {prog_ids[0]} refused ({e})"
        except KernelError as e:
            why = f"fentry/fexit on program {prog_ids[0]} failed ({e})"
        else:
            with trace:
                _report(f"listening on {args.interface}, fentry/fexit on program "
                        f"{prog_ids[0]} ({','.join(points)})")
                _drain_trace(trace, args, filt, out, deadline)
            return
    from pyxdp.kernel.af_packet_capture import PacketCapture
    capture = PacketCapture(args.interface)  # first: a refusal is the one line printed
    _report(f"{why}: capturing what {args.interface} receives with a packet socket, "
            "without verdicts")
    with capture as sock:
        while not _expired(deadline):
            frames, stamps = sock.read(0.1, _BATCH)
            if not frames:
                continue
            keep = filt.keep(frames) if filt is not None else [1] * len(frames)
            recs = [Captured("", t, f[:args.snapshot_length], len(f))
                    for f, t, k in zip(frames, stamps, keep, strict=True) if k]
            if _emit(recs, args, out):
                return


def _drain_trace(trace: XdpTraceCapture, args: argparse.Namespace,
                 filt: PacketFilter | None, out: _Output, deadline: float | None) -> None:
    from pyxdp.net.xdp_capture import Captured
    while not _expired(deadline):
        trace.wait(0.1)
        recs = trace.read(_BATCH)
        if not recs:
            continue
        keep = filt.keep([r.data for r in recs]) if filt is not None else [1] * len(recs)
        done = _emit([Captured(r.point, r.ts_ns, r.data, r.pkt_len, r.verdict)
                      for r, k in zip(recs, keep, strict=True) if k], args, out)
        if done:
            return


