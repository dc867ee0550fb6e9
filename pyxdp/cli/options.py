"""Conventions every ``pyxdp`` command shares, after bpftool and xdp-tools.

* Output: ``-j/--json`` prints JSON instead of text, ``-p/--pretty`` indented
  JSON (and implies ``--json``), as bpftool's global options; accepted before
  or after the subcommand. Commands print through :func:`emit`.
* XDP modes: one vocabulary, xdp-loader's - ``native``, ``skb`` (``generic``
  accepted as an alias: the kernel's ``XDP_FLAGS_SKB_MODE`` is what iproute2
  calls generic) and ``hw`` (offload) where it applies - always given with
  ``-m/--mode``.
* Status lines (what is being compiled, why the screen is quiet) go to
  stderr, never into the results on stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final

from pyxdp.errors import PyxdpError

__all__ = ["CliError", "MAX_INPUT", "MODES", "OutputStyle", "STYLE", "add_global_options",
           "add_mode_arg", "configure",
           "emit", "kernel_mode", "normalise_mode", "open_output", "seconds", "status", "walk"]

MODES: Final = ("native", "skb", "hw")
_ALIASES: Final = {"generic": "skb", "drv": "native", "offload": "hw"}


@dataclass(slots=True)
class OutputStyle:
    """How results are printed: set once per invocation from the global options."""

    json: bool = False
    pretty: bool = False


STYLE = OutputStyle()


def seconds(text: str) -> float:
    """A ``--duration``/``--interval`` argument: a finite number (``inf`` or ``nan`` would
    run a loop forever or never) that a sleep can take; each command checks its own
    range."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"not a finite number of seconds: {text!r}")
    if abs(v) > threading.TIMEOUT_MAX:  # time.sleep and waits overflow past it
        raise argparse.ArgumentTypeError(f"{text!r} seconds is longer than this platform's "
                                         f"longest wait ({threading.TIMEOUT_MAX:.0f} s)")
    return v


def configure(args: argparse.Namespace) -> OutputStyle:
    """Take ``-j``/``-p`` from the parsed arguments (either side of the subcommand)."""
    STYLE.pretty = bool(getattr(args, "pretty", False))
    STYLE.json = bool(getattr(args, "json", False)) or STYLE.pretty
    args.json, args.pretty = STYLE.json, STYLE.pretty
    return STYLE


def emit(doc: Any) -> None:
    """One JSON document on stdout: a line, or indented with ``--pretty``."""
    print(json.dumps(doc, indent=2 if STYLE.pretty else None), flush=True)


def status(message: str) -> None:
    """A progress line on stderr (never part of the results)."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def _mode_type(allowed: tuple[str, ...]) -> Any:
    def parse(text: str) -> str:
        mode = normalise_mode(text)
        if mode not in allowed:
            raise argparse.ArgumentTypeError(
                f"unknown mode {text!r} (choose from {', '.join(allowed)}; generic is skb)")
        return mode
    return parse


def add_mode_arg(p: argparse.ArgumentParser, *, hw: bool = False, what: str = "") -> None:
    """``-m/--mode native|skb[|hw]``, generic accepted for skb."""
    allowed = MODES if hw else MODES[:2]
    p.add_argument("-m", "--mode", type=_mode_type(allowed), default="native",
                   metavar="|".join(allowed),
                   help=f"XDP mode{what}: {', '.join(allowed)} (generic is an alias of skb; "
                        "default: native)")


def normalise_mode(mode: str) -> str:
    """``generic`` (iproute2's word) is ``skb``; the others stay."""
    return _ALIASES.get(mode, mode)


def kernel_mode(mode: str) -> str:
    """The mode's name in pyxdp's attach APIs (``skb`` is their ``generic``)."""
    mode = normalise_mode(mode)
    return "generic" if mode == "skb" else mode


def add_global_options(p: argparse.ArgumentParser, *, top: bool) -> None:
    """``-j/--json`` and ``-p/--pretty`` on ``p``; on subcommands they default to
    "not given" so that a flag before the subcommand survives. A short flag a
    subcommand already uses (``load -p PIN``, xdp-loader's) keeps its meaning
    there: the long form still works."""
    taken = p._option_string_actions  # argparse has no public query
    default = False if top else argparse.SUPPRESS
    for short, long, help_ in (("-j", "--json", "JSON output"),
                               ("-p", "--pretty", "indented JSON output (implies --json)")):
        if long in taken:
            continue
        flags = [f for f in (short, long) if f not in taken]
        p.add_argument(*flags, action="store_true", default=default, help=help_)


def walk(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``p`` and every subcommand parser under it."""
    out = [p]
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                out += walk(sub)
    return out


# -- input and output files ------------------------------------------------------

class CliError(PyxdpError):
    """A command-line input that cannot be used (file, JSON, name)."""


MAX_INPUT = 64 << 20
"""Bytes read at most from any input file: /dev/zero or a FIFO must not eat memory."""


def _read_input(path: str) -> bytes:
    """The whole of ``path`` ('-': stdin), refused past :data:`MAX_INPUT` bytes."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_INPUT + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(MAX_INPUT + 1)
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror or e}") from None
    if len(data) > MAX_INPUT:
        raise CliError(f"{path}: larger than the {MAX_INPUT >> 20} MiB input file limit")
    return data


def open_output(path: str) -> BinaryIO:
    """``path`` opened for writing ('-': stdout); a failure is one line naming it."""
    if path == "-":
        return sys.stdout.buffer
    try:
        return open(path, "wb")  # noqa: SIM115 - the caller closes it
    except OSError as e:
        raise CliError(f"cannot write {path}: {e.strerror or e}") from None


def _write_output(path: str, data: bytes) -> None:
    if path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    try:
        Path(path).write_bytes(data)
    except OSError as e:
        raise CliError(f"cannot write {path}: {e.strerror}") from None
