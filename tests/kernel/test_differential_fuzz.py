"""Differential fuzzing: random verifier-acceptable programs, interpreter vs kernel.

Each program runs on pyxdp's interpreter and on Linux (as an XDP program via
BPF_PROG_TEST_RUN); r0 and the memory buffer must agree. A mismatch found
here is written to ``tests/fuzz_regressions/`` (outside CI) so it becomes a
permanent regression case in ``test_fuzz_regressions.py``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from pyxdp.asm.disasm import disassemble
from pyxdp.asm.insn import Instruction
from pyxdp.testing.conformance import MEM_BASE, parse_vector
from pyxdp.testing.fuzz import runnable_programs
from pyxdp.testing.kernel_runner import KernelRejected, KernelRunner
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.memory import Region

pytestmark = pytest.mark.kernel

EXAMPLES = int(os.environ.get("PYXDP_FUZZ_EXAMPLES", "2000"))
REGRESSIONS = Path(__file__).resolve().parents[1] / "fuzz_regressions"


@pytest.fixture(scope="module")
def runner() -> Iterator[KernelRunner]:
    with KernelRunner() as r:
        yield r


def interp(insns: tuple[Instruction, ...], buf: bytes) -> tuple[int, bytes]:
    region = Region("buffer", MEM_BASE, bytearray(buf))
    r0 = Interpreter(insns).run(MEM_BASE if buf else 0, len(buf), regions=[region])
    return r0, bytes(region.buf)


def _keep(insns: tuple[Instruction, ...], buf: bytes) -> None:
    if os.environ.get("CI"):
        return
    text = "\n".join(disassemble(insns))
    name = hashlib.sha256(text.encode() + buf).hexdigest()[:16]
    REGRESSIONS.mkdir(exist_ok=True)
    (REGRESSIONS / f"{name}.txt").write_text(f"-- asm\n{text}\n-- mem\n{buf.hex(' ')}\n")


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=runnable_programs())
def test_interpreter_equals_kernel(runner: KernelRunner, case: tuple[tuple[Instruction, ...],
                                                                      bytes]) -> None:
    insns, buf = case
    try:
        kernel = runner.run(insns, buf)
    except KernelRejected as e:  # the strategy must only build acceptable programs
        _keep(insns, buf)
        pytest.fail(f"kernel verifier rejected a generated program: {e.reason}")
    r0, mem = interp(insns, buf)
    if (r0, mem) != (kernel.r0, kernel.mem_out):
        _keep(insns, buf)
    assert r0 == kernel.r0, f"r0: interpreter {r0:#x}, kernel {kernel.r0:#x}"
    assert mem == kernel.mem_out, "memory differs"


_CASES = sorted(REGRESSIONS.glob("*.txt"))


@pytest.mark.parametrize("path", _CASES, ids=[p.stem for p in _CASES])
def test_kept_regression(runner: KernelRunner, path: Path) -> None:
    """A program the fuzzer once found a mismatch on: interpreter == kernel for good."""
    v = parse_vector(path.read_text() + "\n-- result\n0x0\n", path.stem)  # result unused
    insns = v.program()
    kernel = runner.run(insns, v.mem)
    assert interp(insns, v.mem) == (kernel.r0, kernel.mem_out)
