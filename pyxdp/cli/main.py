"""``pyxdp``: the command line, in the shape of bpftool and xdp-tools.

Every error pyxdp raises on purpose (and bad arguments) ends as one line on
stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from pyxdp import __version__
from pyxdp.cli.options import CliError, add_global_options, add_mode_arg, configure, seconds, walk
from pyxdp.errors import PyxdpError, PyxdpWarning

__all__ = ["main"]


def _say(message: str) -> None:
    """One line on stderr; a file name that is not text (surrogate escapes from argv)
    is written escaped rather than failing the write."""
    line = f"pyxdp: {message}".replace("\n", " ").rstrip() + "\n"
    enc = getattr(sys.stderr, "encoding", None) or "utf-8"
    sys.stderr.write(line.encode(enc, "backslashreplace").decode(enc))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        _say(f"{message} (see 'pyxdp --help')")
        raise SystemExit(2)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # argparse drops a '--' given as an option's value ('--section=--') and hands
        # the command an empty list where it takes one string.
        if arg_strings == ["--"] and action.option_strings and action.nargs in (None, "?"):
            self.error(f"argument {'/'.join(action.option_strings)}: expected one argument")
        return super()._get_values(action, arg_strings)


MAPS_FORMAT = (
    "--maps F fills maps before the run from a JSON object mapping map names to lists of "
    "entries: {\"MAP\": [{\"key\": K, \"value\": V}, ...]}. K and V are integers "
    "(little-endian, the map's key/value size), hex byte strings (\"0a 00 00 01\"), lists "
    "(array values, one element per CPU of a per-CPU map) or objects (struct members, by "
    "BTF name). --dump-maps F writes the same format ('-': stdout).")
MAPS_HELP = ("fill maps first from JSON: {\"MAP\": [{\"key\": K, \"value\": V}, ...]} "
             "(see 'pyxdp --help')")
DUMP_MAPS_HELP = "write map contents afterwards as JSON, the --maps format ('-': stdout)"


def _repeat(text: str) -> int:
    """``--repeat``: BPF_PROG_TEST_RUN's ``repeat`` is a __u32."""
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= n <= 0xFFFF_FFFF:
        raise argparse.ArgumentTypeError(
            f"{n} is outside 0..4294967295 (BPF_PROG_TEST_RUN's repeat is a __u32)")
    return n


def _cmd_conformance(args: argparse.Namespace) -> int:
    from pyxdp.cli.conformance import run
    return run(args.paths, engine=args.engine, verbose=args.verbose)


def _cmd_prog(args: argparse.Namespace) -> int:
    from pyxdp.cli import prog
    if args.prog_cmd in ("show", "list"):
        from pyxdp.cli import bpftool
        found = bpftool.parse_target(args.target, "prog")
        if found is None:
            if len(args.target) > 1:
                raise CliError(f"prog show OBJ: one object file (got "
                                    f"{' '.join(args.target)!r})")
            return prog.cmd_prog_show(args.target[0])
        target, rest = found
        if rest or (args.prog_cmd == "list" and target.kind != "all"):
            raise CliError(f"prog {args.prog_cmd}: unexpected {' '.join(args.target)!r}")
        return bpftool.cmd_prog_show(target)
    if args.prog_cmd == "disasm":
        return prog.cmd_prog_disasm(args.obj, args.section)
    if args.prog_cmd == "verify":
        return prog.cmd_prog_verify(args.obj, args.section, args.log_level)
    return prog.cmd_prog_run(args.obj, args.section, args.data_in, args.data_out, args.ctx_in,
                             args.ctx_out, args.repeat, args.backend, args.maps,
                             args.dump_maps, args.trace, verify=args.verify)


def _cmd_bench(args: argparse.Namespace) -> int:
    if args.bench_cmd == "xdp":
        from pyxdp.cli import datapath
        return datapath.cmd_bench_xdp(args.obj, args.section, args.mode, args.packet,
                                      args.duration, args.interval, args.vs_kernel, args.maps,
                                      args.json, args.engine, verify=args.verify,
                                      plot=args.plot)
    if args.bench_cmd == "datapath":
        from pyxdp.cli import datapath
        return datapath.cmd_bench_datapath(args.paths, args.runs, args.seconds, args.frames,
                                           args.vs_kernel, args.json, plot=args.plot)
    if args.bench_cmd == "live":
        from pyxdp.cli import live
        return live.cmd_bench_live(args)
    if args.bench_cmd == "seeds":
        from pyxdp.cli import datapath
        return datapath.cmd_bench_seeds(args.frames, args.runs, args.json)
    if args.bench_cmd in ("drop", "pass", "tx", "redirect", "redirect-cpu", "redirect-map"):
        from pyxdp.cli import xdp_bench
        return xdp_bench.cmd(args)
    from pyxdp.cli import bench
    return bench.cmd_bench_prog(args.obj, args.section, args.data_in, args.repeat, args.engine,
                                args.vs_kernel, args.maps, args.runs, verify=args.verify)


def _cmd_map(args: argparse.Namespace) -> int:
    from pyxdp.cli import bpftool, prog
    if args.target and args.target[0] == "run":
        from pyxdp.cli import run_maps
        return run_maps.cmd_run_map(args.map_cmd, args.target[1:])
    found = bpftool.parse_target(args.target, "map")
    if found is not None:
        return bpftool.cmd_map(args.map_cmd, *found)
    if args.map_cmd == "show":
        return prog.cmd_map_show(args.target[0])
    if args.map_cmd != "dump":
        raise CliError(f"map {args.map_cmd} works on kernel maps (id N, pinned PATH, "
                            f"name NAME); on an object file: map show|dump OBJ [NAME]")
    name = args.target[1] if len(args.target) > 1 else None
    if len(args.target) > 2:
        raise CliError("map dump OBJ [NAME]: one map name at most")
    return prog.cmd_map_dump(args.target[0], name, args.backend, args.maps,
                             verify=args.verify)


def _cmd_features(args: argparse.Namespace) -> int:
    from pyxdp.cli import features
    return features.cmd_features(args.ifname, pyxdp=args.pyxdp)


def _cmd_packet(args: argparse.Namespace) -> int:
    from pyxdp.cli import packet
    return packet.cmd_packet(args)


def _cmd_run(args: argparse.Namespace) -> int:
    if args.iface:
        from pyxdp.cli import live
        return live.cmd_run_live(args)
    if not args.pcap:
        raise CliError("run needs --pcap IN or --iface IF")
    from pyxdp.cli.dump import filter_expression
    args.filter_expr = filter_expression(args)
    if args.explain:
        from pyxdp.cli import explain
        return explain.cmd_run_explain(args)
    from pyxdp.cli import prog
    return prog.cmd_run(args.obj, args.section, args.pcap, args.write, args.maps,
                        args.dump_maps, args.backend, verify=args.verify,
                        filter_expr=args.filter_expr)


def _cmd_dump(args: argparse.Namespace) -> int:
    from pyxdp.cli import dump
    return dump.cmd_dump(args)


def _cmd_load(args: argparse.Namespace) -> int:
    from pyxdp.cli import loader
    return loader.cmd_load(args.ifname, args.obj, mode=args.mode, section=args.section,
                           name=args.prog_name, pin=args.pin_path, force=args.force)


def _cmd_unload(args: argparse.Namespace) -> int:
    from pyxdp.cli import loader
    return loader.cmd_unload(args.ifname, all_modes=args.all, prog_id=args.id)


def _cmd_status(args: argparse.Namespace) -> int:
    from pyxdp.cli import loader
    return loader.cmd_status(args.ifname)


def _cmd_monitor(args: argparse.Namespace) -> int:
    from pyxdp.cli import monitor
    return monitor.cmd_monitor(args)


def _cmd_xsk(args: argparse.Namespace) -> int:
    from pyxdp.cli import xsk
    return xsk.cmd_xsk(args)


def _verify_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="load on pyxdp even what Linux's verifier would refuse (run-time "
                        "checks stop bad accesses instead)")


def _cmd_explain(args: argparse.Namespace) -> int:
    from pyxdp.cli import explain
    return explain.cmd_explain(args)


def _backend_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=("userspace", "kernel"), default="userspace",
                   help="where the program runs (default: userspace; kernel needs root)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pyxdp", description="XDP, the Linux eXpress Data Path, in Python.",
                epilog=MAPS_FORMAT)
    p.add_argument("-V", "--version", action="version", version=f"pyxdp {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    c = sub.add_parser("conformance", help="run eBPF ISA conformance vectors (.data files)")
    c.add_argument("paths", nargs="*", metavar="PATH",
                   help=".data files or directories (default: $PYXDP_CONFORMANCE_DIR, else "
                        "the vectors shipped with pyxdp)")
    c.add_argument("--engine", choices=("interp", "jit", "kernel"), default="interp",
                   help="engine to run the vectors on (default: interp)")
    c.add_argument("-v", "--verbose", action="store_true", help="print every vector")
    c.set_defaults(func=_cmd_conformance)

    pp = sub.add_parser("prog", help="show, disassemble or test-run the programs of an object")
    psub = pp.add_subparsers(dest="prog_cmd", metavar="ACTION", required=True,
                             parser_class=_Parser)
    for verb, help_ in (("show", "kernel programs (id N | pinned PATH | name NAME; none: "
                                 "all), or the programs and maps of an object file (OBJ)"),
                        ("list", "every program loaded in the kernel, as bpftool prog list")):
        ps = psub.add_parser(verb, help=help_)
        ps.add_argument("target", nargs="*", metavar="OBJ | id N | pinned PATH | name NAME")
    pd = psub.add_parser("disasm", help="disassemble, with C source lines from BTF")
    pd.add_argument("obj", metavar="OBJ")
    pd.add_argument("-s", "--section", help="program name or section")
    pv = psub.add_parser("verify", help="pyxdp's verifier: would Linux load it? (exit 1 if "
                         "not)")
    pv.add_argument("obj", metavar="OBJ")
    pv.add_argument("-s", "--section", help="program name or section")
    pv.add_argument("--log-level", type=int, choices=(0, 1, 2), default=1,
                    help="0: the reason only; 1: the log (default); 2: also stack depths")
    pr = psub.add_parser("run", help="BPF_PROG_TEST_RUN, as bpftool prog run")
    pr.add_argument("obj", metavar="OBJ")
    pr.add_argument("-s", "--section", help="program name or section")
    pr.add_argument("--data-in", required=True, metavar="F", help="input packet ('-': stdin)")
    pr.add_argument("--data-out", metavar="F", help="write the output packet ('-': stdout)")
    pr.add_argument("--ctx-in", metavar="F", help="struct xdp_md input")
    pr.add_argument("--ctx-out", metavar="F", help="write the output struct xdp_md")
    pr.add_argument("--repeat", type=_repeat, default=1, metavar="N",
                    help="runs of the program (0..4294967295, as the kernel's __u32)")
    pr.add_argument("--maps", metavar="F", help=MAPS_HELP)
    pr.add_argument("--dump-maps", metavar="F", help=DUMP_MAPS_HELP)
    pr.add_argument("--trace", action="store_true",
                    help="print every executed instruction (userspace)")
    _backend_arg(pr)
    _verify_arg(pr)
    pp.set_defaults(func=_cmd_prog)

    pb = sub.add_parser("bench", help="benchmarks: a program (prog), the datapath (xdp, "
                                      "datapath), the seeds' claims (seeds)")
    bsub = pb.add_subparsers(dest="bench_cmd", metavar="ACTION", required=True,
                             parser_class=_Parser)
    bp = bsub.add_parser("prog", help="BPF_PROG_TEST_RUN-style repeat runs of one packet")
    bp.add_argument("obj", metavar="OBJ")
    bp.add_argument("-s", "--section", help="program name or section")
    bp.add_argument("--data-in", required=True, metavar="F", help="input packet ('-': stdin)")
    bp.add_argument("--repeat", type=_repeat, metavar="N",
                    help="runs per measurement (default: 1,000,000 on the JIT, 10,000 on the "
                         "interpreter)")
    bp.add_argument("--engine", choices=("jit", "interp"), default="jit")
    _verify_arg(bp)
    bp.add_argument("--vs-kernel", action="store_true",
                    help="also test-run the object in Linux (root) and print the ratio")
    bp.add_argument("--maps", metavar="F", help="fill maps first from JSON (both sides)")
    bp.add_argument("--runs", type=int, default=3, metavar="K",
                    help="measurements per side; the median is printed (default: 3)")
    bx = bsub.add_parser("xdp", help="a program on pyxdp's datapath under generated load, "
                                     "like xdp-bench: Mpps per verdict, live")
    bx.add_argument("obj", metavar="OBJ", nargs="?",
                    help="the object (default: the xdp1 sample, samples/xdp1.o)")
    bx.add_argument("-s", "--section", help="program name or section")
    add_mode_arg(bx)
    bx.add_argument("--packet", metavar="F", help="the packet to send (raw bytes; default: "
                                                 "a 64-byte UDP frame)")
    bx.add_argument("--duration", type=seconds, default=5.0, metavar="S",
                    help="seconds to run (default: 5)")
    bx.add_argument("--interval", type=seconds, default=1.0, metavar="S",
                    help="seconds between lines (default: 1)")
    bx.add_argument("--vs-kernel", action="store_true",
                    help="then measure Linux on live frames with the same program and packet "
                         "(root) and print the ratio")
    bx.add_argument("--maps", metavar="F", help=MAPS_HELP)
    bx.add_argument("--engine", choices=("auto", "jit", "interp"), default="auto")
    bx.add_argument("--plot", metavar="FILE.svg", help="draw the rates over time (and the bars "
                                                      "against Linux with --vs-kernel); needs "
                                                      "pyxdp[plot]")
    _verify_arg(bx)
    bs = bsub.add_parser("seeds", help="the seed discussions' claims as ratios on pyxdp")
    bs.add_argument("--frames", type=int, default=200_000, metavar="N",
                    help="frames per native measurement (default: 200,000)")
    bs.add_argument("--runs", type=int, default=3, metavar="K", help="runs per figure (median)")
    bd = bsub.add_parser("datapath", help="pyxdp's datapath path by path, with --vs-kernel "
                                          "beside Linux's: Mpps and ratio per path")
    bd.add_argument("--vs-kernel", action="store_true",
                    help="also measure Linux in the same run (root): live frames, generic XDP "
                         "and AF_XDP on a veth pair in a namespace of its own")
    bd.add_argument("--paths", metavar="P,..", help="rows to measure, of drop, tx, redirect, "
                                                   "pass, cpumap, generic, xsk (default: all)")
    bd.add_argument("--runs", type=int, default=5, metavar="K",
                    help="runs per figure, the median is printed (default: 5)")
    bd.add_argument("--seconds", type=seconds, default=0.5, metavar="S",
                    help="about how long each timed run lasts (default: 0.5)")
    bd.add_argument("--frames", type=int, metavar="N",
                    help="frames per run instead of --seconds (both sides)")
    bd.add_argument("--plot", metavar="FILE.svg", help="draw pyxdp's and Linux's Mpps side by "
                                                      "side per path (needs pyxdp[plot])")
    from pyxdp.cli import xdp_bench
    xdp_bench.add_commands(bsub)
    from pyxdp.cli import live
    bl = bsub.add_parser("live", help="pyxdp on a real veth in user space (AF_XDP), with "
                                      "--vs-kernel beside Linux native and generic (root)")
    live.add_bench_arguments(bl)  # see pyxdp.cli.live
    pb.set_defaults(func=_cmd_bench)

    pm = sub.add_parser("map", help="kernel maps by id, pin or name, as bpftool map; or the "
                                    "maps of an object file")
    msub = pm.add_subparsers(dest="map_cmd", metavar="ACTION", required=True,
                             parser_class=_Parser)
    from pyxdp.cli import bpftool
    for verb, help_ in bpftool.MAP_VERBS.items():
        md = msub.add_parser(verb, help=help_, description=help_, epilog=bpftool.MAP_EPILOG)
        md.add_argument("target", nargs="*" if verb == "show" else "+",
                        metavar="MAP | OBJ [NAME]")
        md.add_argument("--maps", metavar="F", help="OBJ: " + MAPS_HELP)
        _backend_arg(md)
        _verify_arg(md)
    pm.set_defaults(func=_cmd_map)

    fe = sub.add_parser("features", help="what an interface's XDP supports (xdp-features), "
                                         "like xdp-loader features")
    fe.add_argument("ifname", metavar="IFNAME")
    fe.add_argument("--pyxdp", action="store_true",
                    help="a device of pyxdp's default host (eth0, eth1: NICs; veth0, veth1: a "
                         "veth pair) instead of a Linux interface")
    fe.set_defaults(func=_cmd_features)

    from pyxdp.cli import packet
    pk = sub.add_parser("packet", help="build a packet (udp, tcp, icmp) into a file: inputs "
                                       "for prog run, explain, bench",
                        description=packet.DESCRIPTION)
    packet.add_arguments(pk, _Parser)
    pk.set_defaults(func=_cmd_packet)

    r = sub.add_parser("run", help="run a program over a capture (pcap or pcapng) or on "
                                   "Linux interfaces (--iface)")
    r.add_argument("obj", metavar="OBJ")
    r.add_argument("-s", "--section", help="program name or section")
    r.add_argument("--pcap", metavar="IN", help="input capture")
    r.add_argument("-w", "--write", metavar="OUT", help="write packets + verdicts as pcapng")
    r.add_argument("--maps", metavar="F", help=MAPS_HELP)
    r.add_argument("--dump-maps", metavar="F", help=DUMP_MAPS_HELP)
    r.add_argument("--explain", action="store_true",
                   help="each packet's journey on a pyxdp host (see 'pyxdp explain'), in a "
                        "pcapng comment per packet")
    _backend_arg(r)
    _verify_arg(r)
    live.add_run_arguments(r)  # --iface and its options (see pyxdp.cli.live)
    from pyxdp.cli import dump
    dump.add_filter_arguments(r, positional=False)
    r.set_defaults(func=_cmd_run)

    # xdpdump's shape (see pyxdp.cli.dump); the module holds its options.
    du = sub.add_parser("dump", help="capture frames at an XDP program, with verdicts and "
                                     "tcpdump filters, like xdpdump",
                        description=dump.DESCRIPTION)
    dump.add_arguments(du)
    du.set_defaults(func=_cmd_dump)

    # xdp-loader's shapes, on the kernel's interfaces (see pyxdp.cli.loader).
    ld = sub.add_parser("load", help="load objects and attach their programs to an interface")
    add_mode_arg(ld, hw=True)
    ld.add_argument("-s", "--section", help="ELF section of the program")
    ld.add_argument("-n", "--prog-name", metavar="NAME", help="name of the program")
    ld.add_argument("-p", "--pin-path", metavar="PIN",
                    help="also pin the program and maps in this bpffs directory")
    ld.add_argument("-F", "--force", action="store_true",
                    help="replace a program already attached in that mode")
    ld.add_argument("ifname", metavar="IFNAME")
    ld.add_argument("obj", metavar="OBJ", nargs="+",
                    help="object(s); several go through libxdp's dispatcher")
    ld.set_defaults(func=_cmd_load)

    ul = sub.add_parser("unload", help="detach XDP programs from an interface")
    ul.add_argument("ifname", metavar="IFNAME")
    which = ul.add_mutually_exclusive_group(required=True)
    which.add_argument("-a", "--all", action="store_true", help="every attached program")
    which.add_argument("-i", "--id", type=int, metavar="ID", help="the program with this id")
    ul.set_defaults(func=_cmd_unload)

    st = sub.add_parser("status", help="XDP programs attached to interfaces")
    st.add_argument("ifname", metavar="IFNAME", nargs="?")
    st.set_defaults(func=_cmd_status)

    # xdp-monitor's shape (see pyxdp.cli.monitor); the module holds its options.
    from pyxdp.cli import monitor
    mo = sub.add_parser("monitor", help="rates of the XDP tracepoints, like xdp-monitor",
                        description=monitor.DESCRIPTION, epilog=monitor.EPILOG)
    monitor.add_arguments(mo)
    mo.set_defaults(func=_cmd_monitor)

    # xdpsock's shape (see pyxdp.cli.xsk); the module holds its options.
    from pyxdp.cli import xsk
    xs = sub.add_parser("xsk", help="an AF_XDP socket under load, like xdpsock",
                        description=xsk.DESCRIPTION)
    xsk.add_arguments(xs)
    xs.set_defaults(func=_cmd_xsk)

    # Where a packet goes (see pyxdp.cli.explain); the module holds its options.
    from pyxdp.cli import explain
    ex = sub.add_parser("explain", help="a packet's journey through programs, maps and devices",
                        description=explain.DESCRIPTION)
    explain.add_arguments(ex)
    ex.set_defaults(func=_cmd_explain)
    # -j/--json and -p/--pretty before or after the subcommand (bpftool's globals).
    for i, parser in enumerate(walk(p)):
        add_global_options(parser, top=i == 0)
    return p


def _show_warning(message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: Any = None, line: str | None = None) -> None:
    """pyxdp's own warnings as one line, as its errors are."""
    if issubclass(category, PyxdpWarning):
        _say(f"warning: {message}")
    else:
        _default_show(message, category, filename, lineno, file, line)


_default_show = warnings.showwarning


def main(argv: Sequence[str] | None = None) -> int:
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return _main(argv)
    finally:
        # The output style is this invocation's: callers of the command functions
        # from Python (and the next main()) start from text again.
        configure(argparse.Namespace())


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure(args)
    if not getattr(args, "func", None):
        parser.print_help()  # bare ``pyxdp``: what it can do, on stdout
        return 2
    try:
        return int(args.func(args))
    except PyxdpError as e:
        _say(str(e))
        return 2
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    except RecursionError:  # a hostile input nested past what the parsers follow
        _say("input nests too deeply")
        return 2
    except BrokenPipeError:
        # The reader went away (| head): stop quietly, as coreutils do.
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:
        _say(f"{e.strerror or e}: {e.filename or ''}".rstrip(": "))
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
