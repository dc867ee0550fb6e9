"""``pyxdp explain``: where a packet goes - its journey through the program, redirect
maps, devices and the host stack of a pyxdp host (:mod:`pyxdp.explain`), and with
``--kernel`` the same packet through Linux on veth pairs, side by side."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from pyxdp.cli.options import CliError, _read_input, open_output

__all__ = ["DESCRIPTION", "add_arguments", "cmd_explain", "cmd_run_explain"]

DESCRIPTION = (
    "Run one packet through OBJ's program on a pyxdp host and print its journey step by "
    "step in Linux's terms: device and queue, program and mode, the verdict with the C line "
    "that decided it, the redirect's map, key and entry, the next program, what each hop did "
    "(transmitted, bulk-queued and flushed, passed to the stack, dropped and why) and the "
    "tracepoints Linux fires. Default host: the program on eth0 (ifindex 2) of two NICs "
    "(eth0, eth1 = 3) and a veth pair (veth0 = 4, veth1 = 5); --topology F describes "
    "another (JSON or TOML, see pyxdp.explain.topology). Map values may name devices as "
    "\"@eth1\" and programs as \"prog:NAME\".")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("obj", metavar="OBJ")
    p.add_argument("--data-in", required=True, metavar="F", help="the packet (raw bytes; - for "
                                                                 "stdin)")
    p.add_argument("-s", "--section", metavar="PROG", help="program name or section")
    p.add_argument("--maps", metavar="F", help="map entries as JSON: {\"map\": [{\"key\": K, "
                                               "\"value\": V}, ...]}")
    p.add_argument("--topology", metavar="F", help="the host: devices, programs, maps, AF_XDP "
                                                   "sockets, UDP listeners (JSON or .toml)")
    p.add_argument("--kernel", action="store_true",
                   help="also run the packet through Linux on veth pairs in a network "
                        "namespace (root) and print both journeys, differences marked")


def _maps(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        doc = json.loads(_read_input(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CliError(f"{path}: not JSON: {e}") from None
    if not isinstance(doc, dict) or not all(isinstance(v, list) for v in doc.values()):
        raise CliError(f"{path}: expected an object mapping map names to entry lists")
    return doc


def _indent() -> int | None:
    from pyxdp.cli.options import STYLE
    return 2 if STYLE.pretty else None


def cmd_explain(args: argparse.Namespace) -> int:
    packet = _read_input(args.data_in)
    from pyxdp.explain import Explainer, Topology
    topo = Topology.load(args.topology) if args.topology else None
    maps = _maps(args.maps)
    with Explainer(args.obj, program=args.section, topology=topo, maps=maps) as ex:
        journey = ex.explain(packet)
        topo = ex.topology
        program = ex.program
        names = ex.namer()
        macs = ex.macs()
    if not args.kernel:
        if args.json:
            print(json.dumps(journey.to_dict(), indent=_indent(), default=str))
        else:
            print(journey.render())
        return 0
    from pyxdp.explain.kernel import compare, kernel_journey
    linux = kernel_journey(args.obj, packet, program=program, topology=topo, maps=maps,
                           macs=macs)
    diff = compare(journey, linux, names=names)
    if args.json:
        print(json.dumps({"pyxdp": journey.to_dict(), "linux": linux.to_dict(),
                          "differences": diff}, indent=_indent(), default=str))
        return 0
    print("== pyxdp ==")
    print(journey.render())
    print("== Linux ==")
    print(linux.render())
    print("== differences ==" if diff else "== no differences ==")
    for line in diff:
        print(f"  ! {line}")
    sys.stdout.flush()
    return 0


def cmd_run_explain(args: argparse.Namespace) -> int:
    """``pyxdp run --pcap IN [-w OUT] --explain``: every packet of a capture through the
    default host, maps persisting; each journey's fate on the report, and with ``-w``
    the packet as the program left it, its verdict in ``epb_verdict`` and its journey
    in an ``opt_comment``."""
    from pyxdp.net.pcap import PcapngWriter, read_capture
    if args.backend != "userspace":
        raise CliError("--explain runs on pyxdp's datapath: leave --backend at userspace")
    maps = _maps(args.maps)
    report = sys.stderr if args.write == "-" else sys.stdout
    out: Any = None
    writer: PcapngWriter | None = None
    fates: Counter[str] = Counter()
    from pyxdp.explain import Explainer
    with Explainer(args.obj, program=args.section, maps=maps) as ex:
        try:
            if args.write:
                out = open_output(args.write)
                writer = PcapngWriter(out)
                writer.add_interface(ex.topology.ingress.dev)
            n = 0
            packets = read_capture(args.pcap)
            if args.filter_expr:
                from pyxdp.net.pcap_filter import filter_capture
                packets = filter_capture(packets, args.filter_expr)
            for pkt in packets:
                n += 1
                j = ex.explain(pkt.data)
                print(f"packet {n}: {j.fate()}", file=report)
                for f in j.fates:
                    fates[f"{f.outcome} at {f.where}"] += f.count
                if writer is not None:
                    writer.write(j.data_out if j.data_out is not None else pkt.data, pkt.ts_ns,
                                 verdict=j.verdict, comment=j.render())
        finally:
            if writer is not None:
                writer.close()
            if out is not None and out is not sys.stdout.buffer:
                out.close()
    print(f"{n} packets through {ex.program}:", file=report)
    for what, c in fates.most_common():
        print(f"  {c:6d} {what}", file=report)
    return 0
