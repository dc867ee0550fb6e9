"""The bpf_conformance vector format and a runner over pyxdp's engines.

A ``.data`` file has sections introduced by ``-- name`` lines: ``asm`` (the
program), optional ``raw`` (expected encoding), ``mem`` (hex bytes; r1 points
at them, r2 holds their length), ``result`` (r0 at exit) and ``error``
(expected failure text). The engines are the interpreter (``interp``), the
JIT (``jit``, where built) and the kernel (``kernel``: the program runs as an
XDP program through BPF_PROG_TEST_RUN, see :mod:`pyxdp.testing.kernel_runner`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyxdp.asm.insn import Instruction
from pyxdp.errors import ConformanceFormatError, PyxdpError, VerifierError
from pyxdp.vm.memory import Region

__all__ = [
    "MEM_BASE",
    "Outcome",
    "Vector",
    "default_vector_dir",
    "error_text",
    "external_vector_dir",
    "find_vectors",
    "parse_vector",
    "run_interp",
    "run_jit",
    "vector_files",
]

# Where the vector's memory lives in the interpreter's address space.
MEM_BASE = 0x0000_1000_0000_0000


@dataclass(frozen=True)
class Vector:
    name: str
    asm: str
    mem: bytes = b""
    result: int | None = None
    error: str | None = None
    raw: tuple[int, ...] | None = None
    path: str = ""

    def program(self) -> tuple[Instruction, ...]:
        from pyxdp.asm.assembler import assemble
        return assemble(self.asm)


@dataclass(frozen=True)
class Outcome:
    """One vector on one engine: ``status`` is passed, failed or skipped."""

    vector: Vector
    engine: str
    status: str
    got: int | None = None
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


_SECTION = re.compile(r"^--\s*(.+?)\s*$")


def parse_vector(text: str, name: str = "<vector>", path: str = "") -> Vector:
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m:
            current = m.group(1).strip().lower()
            sections.setdefault(current, [])
            continue
        if current is not None:
            sections[current].append(line)
    if "asm" not in sections:
        raise ConformanceFormatError(f"{name}: no '-- asm' section")
    mem = b""
    if "mem" in sections:
        hexes = " ".join(ln.split("#", 1)[0] for ln in sections["mem"]).split()
        try:
            mem = bytes(int(h, 16) for h in hexes)
        except ValueError as e:
            raise ConformanceFormatError(f"{name}: bad '-- mem' byte: {e}") from None
    result = None
    if "result" in sections:
        words = " ".join(sections["result"]).split()
        if words:
            try:
                result = int(words[0], 0) & 0xFFFF_FFFF_FFFF_FFFF
            except ValueError:
                raise ConformanceFormatError(
                    f"{name}: bad '-- result' value {words[0]!r}") from None
    error = "\n".join(sections["error"]).strip() if "error" in sections else None
    raw = None
    if "raw" in sections:
        try:
            raw = tuple(int(w, 0) for w in " ".join(sections["raw"]).split())
        except ValueError:
            raise ConformanceFormatError(f"{name}: bad '-- raw' word") from None
    if result is None and error is None:
        raise ConformanceFormatError(f"{name}: neither '-- result' nor '-- error'")
    return Vector(name, "\n".join(sections["asm"]), mem, result, error, raw, path)


def external_vector_dir() -> Path | None:
    """The bpf_conformance suite's vectors, where ``PYXDP_CONFORMANCE_DIR`` names them."""
    env = os.environ.get("PYXDP_CONFORMANCE_DIR")
    return Path(env) if env else None


def default_vector_dir() -> Path:
    """``PYXDP_CONFORMANCE_DIR``, else the vectors shipped in the package
    (:mod:`pyxdp.testing.vectorgen`: written here, results from Linux)."""
    from pyxdp.testing.vectorgen import BUILTIN_DIR
    return external_vector_dir() or BUILTIN_DIR


MAX_VECTOR_FILE = 16 << 20
"""Bytes read at most from one ``.data`` file (a vector is a few hundred bytes)."""


def vector_files() -> list[Path]:
    """Every ``.data`` file to run in tests: the built-in set, then the external suite's."""
    from pyxdp.testing.vectorgen import BUILTIN_DIR
    files = sorted(BUILTIN_DIR.glob("*.data"))
    ext = external_vector_dir()
    if ext is not None and ext.is_dir():
        files += sorted(ext.glob("*.data"))
    return files


def find_vectors(paths: Iterable[str | Path]) -> Iterator[Vector]:
    """Vectors from files and directories (``*.data``, sorted)."""
    for p in paths:
        p = Path(p)
        if p.is_dir():  # only regular files: a FIFO named x.data would block the run
            files = sorted(f for f in p.glob("*.data") if f.is_file())
        elif p.is_file():
            files = [p]
        elif p.exists():
            raise ConformanceFormatError(f"{p}: not a .data file or a directory of them")
        else:
            raise ConformanceFormatError(f"{p}: no such file or directory")
        for f in files:
            try:
                with open(f, "rb") as fh:
                    raw = fh.read(MAX_VECTOR_FILE + 1)
                text = raw.decode()
            except (OSError, UnicodeDecodeError) as e:
                raise ConformanceFormatError(f"{f}: cannot read: {e}") from None
            if len(raw) > MAX_VECTOR_FILE:
                raise ConformanceFormatError(f"{f}: larger than {MAX_VECTOR_FILE >> 20} MiB: "
                                             "not a vector file")
            yield parse_vector(text, f.stem, str(f))


def error_text(insns: Sequence[Instruction], mem: bytes, err: PyxdpError) -> str:
    """The error line a vector's ``-- error`` is compared with: Linux's refusal where
    its verifier refuses the program (``verifier: REASON``, from pyxdp's verifier as
    :func:`pyxdp.testing.kernel_runner.pyxdp_refusal` wraps it), else the engine's fault."""
    from pyxdp.testing.kernel_runner import pyxdp_refusal
    try:
        refusal = pyxdp_refusal(insns, len(mem))
    except PyxdpError:
        refusal = None
    return " ".join((refusal or str(err)).split())


def _judge(v: Vector, engine: str, got: int | None, err: str | None) -> Outcome:
    if v.error is not None:
        # As the bpf_conformance runner judges: the error line must be the vector's.
        want = " ".join(v.error.split())
        if err is not None and err == want:
            return Outcome(v, engine, "passed", detail=err)
        if err is not None:
            return Outcome(v, engine, "failed", None, f"expected error {want!r}, got {err!r}")
        return Outcome(v, engine, "failed", got,
                       f"expected error {want!r}, got r0={got:#x}")
    if err is not None:
        return Outcome(v, engine, "failed", None, f"expected {v.result:#x}, got error: {err}")
    if got == v.result:
        return Outcome(v, engine, "passed", got)
    assert v.result is not None and got is not None
    return Outcome(v, engine, "failed", got, f"expected {v.result:#x}, got {got:#x}")


def run_interp(v: Vector, budget: int | None = None) -> Outcome:
    from pyxdp.vm.interpreter import Interpreter
    try:
        insns = v.program()
        vm = Interpreter(insns)
        regions = [Region("vector memory", MEM_BASE, bytearray(v.mem))] if v.mem else []
        got = vm.run(MEM_BASE if v.mem else 0, len(v.mem), regions=regions, budget=budget)
    except PyxdpError as e:
        return _judge(v, "interp", None, _fault(v, e))
    return _judge(v, "interp", got, None)


def run_jit(v: Vector, budget: int | None = None) -> Outcome:
    """The vector on the JIT (:class:`pyxdp.vm.jit.JitProgram`), judged as the interpreter's."""
    from pyxdp.vm.jit import JitProgram
    try:
        insns = v.program()
        vm = JitProgram(insns)
        regions = [Region("vector memory", MEM_BASE, bytearray(v.mem))] if v.mem else []
        got = vm.run(MEM_BASE if v.mem else 0, len(v.mem), regions=regions, budget=budget)
    except PyxdpError as e:
        return _judge(v, "jit", None, _fault(v, e))
    return _judge(v, "jit", got, None)


def _fault(v: Vector, e: PyxdpError) -> str:
    try:
        insns = v.program()
    except PyxdpError:
        return " ".join(str(e).split())  # the program does not even assemble
    return error_text(insns, v.mem, e)


class KernelEngine:
    """Runs vectors on the kernel; a vector the verifier refuses is skipped with its reason."""

    def __init__(self) -> None:
        from pyxdp.testing.kernel_runner import KernelRunner
        self._runner = KernelRunner()

    def run(self, v: Vector) -> Outcome:
        try:
            insns = v.program()
        except PyxdpError as e:
            return _judge(v, "kernel", None, str(e))
        try:
            res = self._runner.run(insns, v.mem)
        except VerifierError as e:
            from pyxdp.testing.kernel_runner import short_reason
            reason = f"verifier: {short_reason(e.log)}"
            if v.error is not None:
                return _judge(v, "kernel", None, " ".join(reason.split()))
            return Outcome(v, "kernel", "skipped", detail=reason)
        return _judge(v, "kernel", res.r0, None)

    def close(self) -> None:
        self._runner.close()

    def __enter__(self) -> KernelEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
