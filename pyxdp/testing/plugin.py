"""A bpf_conformance plugin: lets the upstream conformance runner measure pyxdp.

Protocol (as the runner speaks it to every plugin): the program arrives as
hex bytes on stdin, the memory as hex in ``argv[1]`` (absent or empty for
none); the plugin prints r0 in hex on stdout and exits 0, or prints the
error on stderr and exits 1. The memory convention is the vectors' own: r1
points at it and r2 holds its length.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pyxdp.asm.insn import decode
from pyxdp.errors import PyxdpError
from pyxdp.testing.conformance import MEM_BASE
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.memory import Region

__all__ = ["main"]


def _hex(text: str, what: str) -> bytes:
    try:
        return bytes.fromhex("".join(text.split()))
    except ValueError:
        raise SystemExit(f"pyxdp plugin: {what} is not hex") from None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    mem = _hex(args[0], "memory") if args else b""
    program = _hex(sys.stdin.read(), "program")
    try:
        vm = Interpreter(decode(program))
        regions = [Region("memory", MEM_BASE, bytearray(mem))] if mem else []
        r0 = vm.run(MEM_BASE if mem else 0, len(mem), regions=regions)
    except PyxdpError as e:
        sys.stderr.write(f"{e}\n")
        return 1
    sys.stdout.write(f"{r0:x}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
