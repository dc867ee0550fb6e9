"""A bpf_conformance plugin: lets the upstream conformance runner measure pyxdp.

Protocol (as the runner speaks it to every plugin)::

    pyxdp-conformance-plugin [MEMORY] [--engine interp|jit] [--elf]

The program arrives as hex bytes on stdin; the memory as hex in the first
argument, absent when the vector has none (the runner then passes only its
``--plugin_options``). Options may stand anywhere after the memory. With
``--elf`` (the runner's ``--elf`` flag) stdin is the hex of an ELF object as
the runner writes it: function ``main`` in section ``.text`` (``xdp`` with
the runner's XDP prolog); any object with one function is accepted. The
plugin prints r0 in hex on stdout and exits 0, or prints one error line on
stderr and exits 1. The memory convention is the vectors' own: r1 points at
it and r2 holds its length.

The runner compares that error line with the vector's ``-- error`` text,
character for character. A program that faults is reported as Linux reports
it: when Linux's verifier refuses the program (as the kernel engine loads it,
:func:`pyxdp.testing.kernel_runner.pyxdp_refusal`) the line is
``verifier: REASON``, the text pyxdp's own vectors carry; otherwise it is
the engine's fault (pc, instruction, address).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from pyxdp.asm.insn import Instruction, decode
from pyxdp.elf.elfio import open_elf
from pyxdp.errors import PyxdpError
from pyxdp.testing.conformance import MEM_BASE, error_text
from pyxdp.vm.memory import Region

__all__ = ["ENGINES", "PluginArgs", "elf_program", "main", "parse_args"]

ENGINES = ("interp", "jit")
"""The engines ``--engine`` selects: the interpreter (default) and the LLVM JIT."""

_USAGE = "usage: pyxdp-conformance-plugin [MEMORY] [--engine interp|jit] [--elf] < PROGRAM_HEX"
_STT_FUNC = 2
_SHN_UNDEF = 0
_SHT_REL = 9


class PluginError(Exception):
    """A bad command line or input: one line on stderr, exit status 2."""


@dataclass(frozen=True)
class PluginArgs:
    """The plugin's command line: the memory, the engine and whether stdin is an ELF object."""

    mem: bytes = b""
    engine: str = "interp"
    elf: bool = False


def _hex(text: str, what: str) -> bytes:
    try:
        return bytes.fromhex("".join(text.split()))
    except ValueError:
        raise PluginError(f"{what} is not hex") from None


def parse_args(argv: Sequence[str]) -> PluginArgs:
    """The memory (the one argument that is not an option) and the options, in any order."""
    mem: bytes | None = None
    engine = "interp"
    elf = False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--elf":
            elf = True
        elif a == "--engine" or a.startswith("--engine="):
            if "=" in a:
                engine = a.split("=", 1)[1]
            elif args:
                engine = args.pop(0)
            else:
                raise PluginError("--engine needs a value (interp or jit)")
            if engine not in ENGINES:
                raise PluginError(f"unknown engine {engine!r} (interp or jit)")
        elif a.startswith("-") and a.strip("-"):
            raise PluginError(f"unknown option {a!r}; {_USAGE}")
        elif mem is None:
            mem = _hex(a, "memory")
        else:
            raise PluginError(f"a second memory argument {a[:20]!r}; {_USAGE}")
    return PluginArgs(mem or b"", engine, elf)


def elf_program(data: bytes) -> bytes:
    """The instruction bytes of the object's function ``main`` (or of its one function)."""
    img = open_elf(data, "<stdin>")
    funcs = [s for s in img.symbols if s.type == _STT_FUNC and s.shndx != _SHN_UNDEF]
    chosen = [s for s in funcs if s.name == "main"] or funcs
    if len(chosen) != 1:
        names = ", ".join(s.name for s in funcs) or "none"
        raise PluginError(f"ELF object: no function main and not one function (has: {names})")
    sym = chosen[0]
    sec = img.section(sym.shndx)
    if sec is None:
        raise PluginError(f"ELF object: function {sym.name} has no section")
    if any(s.type == _SHT_REL and s.info == sec.index and img.relocations(s)
           for s in img.sections):
        raise PluginError(f"ELF object: section {sec.name} has relocations (maps, calls "
                          "to other sections): the plugin runs self-contained programs")
    body = img.section_data(sec)
    end = sym.value + sym.size if sym.size else len(body)
    if not 0 <= sym.value <= end <= len(body):
        raise PluginError(f"ELF object: function {sym.name} lies outside section {sec.name}")
    return body[sym.value:end]


def _run(insns: Sequence[Instruction], mem: bytes, engine: str) -> int:
    regions = [Region("memory", MEM_BASE, bytearray(mem))] if mem else []
    r1 = MEM_BASE if mem else 0
    if engine == "jit":
        from pyxdp.vm.jit import JitProgram
        return JitProgram(insns).run(r1, len(mem), regions=regions)
    from pyxdp.vm.interpreter import Interpreter
    return Interpreter(insns).run(r1, len(mem), regions=regions)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        code = _hex(sys.stdin.read(), "program")
        if args.elf:
            code = elf_program(code)
    except (PluginError, PyxdpError) as e:
        sys.stderr.write(f"pyxdp plugin: {e}\n")
        return 2
    try:
        insns = decode(code)
    except PyxdpError as e:
        sys.stderr.write(f"{e}\n")
        return 1
    try:
        r0 = _run(insns, args.mem, args.engine)
    except PyxdpError as e:
        sys.stderr.write(error_text(insns, args.mem, e) + "\n")
        return 1
    sys.stdout.write(f"{r0:x}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
