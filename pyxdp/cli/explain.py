"""``pyxdp explain``: where a packet goes - its journey through the program, redirect
maps, devices and the host stack of a pyxdp host (:mod:`pyxdp.explain`), and with
``--kernel`` the same packet through Linux on veth pairs, side by side."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pyxdp.cli.prog import CliError, _read_input
from pyxdp.explain import Explainer, Topology

__all__ = ["DESCRIPTION", "add_arguments", "cmd_explain"]

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
    p.add_argument("--json", action="store_true", help="print the journey as JSON")
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


def cmd_explain(args: argparse.Namespace) -> int:
    packet = _read_input(args.data_in)
    topo = Topology.load(args.topology) if args.topology else None
    maps = _maps(args.maps)
    with Explainer(args.obj, program=args.section, topology=topo, maps=maps) as ex:
        journey = ex.explain(packet)
        topo = ex.topology
        program = ex.program
        names = ex.namer()
    if not args.kernel:
        if args.json:
            print(json.dumps(journey.to_dict(), indent=2, default=str))
        else:
            print(journey.render())
        return 0
    from pyxdp.explain.kernel import compare, kernel_journey
    linux = kernel_journey(args.obj, packet, program=program, topology=topo, maps=maps)
    diff = compare(journey, linux, names=names)
    if args.json:
        print(json.dumps({"pyxdp": journey.to_dict(), "linux": linux.to_dict(),
                          "differences": diff}, indent=2, default=str))
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
