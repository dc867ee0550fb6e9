"""``pyxdp``: the command line, in the shape of bpftool and xdp-tools.

Every error pyxdp raises on purpose (and bad arguments) ends as one line on
stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pyxdp.errors import PyxdpError

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"pyxdp: {message} (see 'pyxdp --help')\n")
        raise SystemExit(2)


def _cmd_conformance(args: argparse.Namespace) -> int:
    from pyxdp.cli.conformance import run
    return run(args.paths, engine=args.engine, verbose=args.verbose)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pyxdp", description="XDP, the Linux eXpress Data Path, in Python.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    c = sub.add_parser("conformance", help="run eBPF ISA conformance vectors (.data files)")
    c.add_argument("paths", nargs="*", metavar="PATH",
                   help=".data files or directories (default: the shared conformance vectors)")
    c.add_argument("--engine", choices=("interp", "kernel"), default="interp",
                   help="engine to run the vectors on (default: interp)")
    c.add_argument("-v", "--verbose", action="store_true", help="print every vector")
    c.set_defaults(func=_cmd_conformance)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except PyxdpError as e:
        sys.stderr.write(f"pyxdp: {e}\n".replace("\n", " ").rstrip() + "\n")
        return 2
    except KeyboardInterrupt:
        return 130
    except OSError as e:
        sys.stderr.write(f"pyxdp: {e.strerror or e}: {e.filename or ''}".rstrip(": ") + "\n")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
