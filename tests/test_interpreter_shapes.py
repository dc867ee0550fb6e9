"""The interpreter's generated operation factories (:mod:`pyxdp.vm.interp_ops`): current,
covering every instruction the validator accepts, and the compile fallback for a shape
they lack."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.errors import PyxdpError
from pyxdp.vm import interp_gen, interp_ops, interpreter
from pyxdp.vm.interpreter import Interpreter

EXIT = Instruction(op.BPF_JMP | op.BPF_EXIT)


def test_generated_module_is_current() -> None:
    assert interp_gen.TARGET.read_text() == interp_gen.render(), (
        "pyxdp/vm/interp_ops.py is stale: run python -m pyxdp.vm.interp_gen")


def _candidates() -> Iterator[tuple[Instruction, ...]]:
    """Every opcode with the offsets and immediates that select a shape (sign-extending
    moves, signed division, byte-swap widths, atomics), followed by exits."""
    imms = (0, 16, 32, 64, *op.ATOMIC_OP_NAMES, op.BPF_LOAD_ACQ, op.BPF_STORE_REL)
    for code in range(256):
        for off in (0, 1, 8, 16, 32):
            for imm in imms:
                yield (Instruction(code, 0, 1, off, imm), *[EXIT] * 40)
    yield (Instruction(op.OP_LD_IMM64, 1, 0, 0, 7), Instruction(0), *[EXIT] * 2)


def test_every_valid_instruction_has_a_generated_factory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    factories = dict(interp_ops.FACTORIES)
    monkeypatch.setattr(interpreter, "_FACTORIES", factories)
    compiled = 0
    for prog in _candidates():
        try:
            vm = Interpreter(prog)
            vm._compile(0)
        except PyxdpError:  # not a valid instruction (or a call of no helper)
            continue
        compiled += 1
    assert compiled > 500
    assert factories.keys() == interp_ops.FACTORIES.keys(), (
        f"shapes compiled at run time: {sorted(factories.keys() - interp_ops.FACTORIES.keys())}")


def test_a_shape_missing_from_the_module_is_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module not regenerated after a change of shapes is slower, not wrong."""
    factories = {k: v for k, v in interp_ops.FACTORIES.items() if k != interpreter.JUMP}
    monkeypatch.setattr(interpreter, "_FACTORIES", factories)
    ja = Instruction(op.BPF_JMP | op.BPF_JA, off=1)
    prog = (Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 0, 0, 0, 1), ja,
            Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 0, 0, 0, 2), EXIT)
    assert Interpreter(prog).run() == 1
    assert factories[interpreter.JUMP] is not interp_ops.FACTORIES[interpreter.JUMP]
    src = interpreter.factory_source(interpreter.JUMP)
    assert "def f(pc: int, t: int = t) -> int:" in src
