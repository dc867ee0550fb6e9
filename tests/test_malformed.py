"""Malformed bytecode never raises anything but InvalidProgram, and never crashes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyxdp.asm.insn import decode, encode
from pyxdp.asm.macros import exit_insn, ld_imm64, mov64_imm
from pyxdp.errors import InvalidProgram, ProgramFault
from pyxdp.vm.interpreter import Interpreter


def load(raw: bytes) -> Interpreter:
    return Interpreter(decode(raw), budget=10_000)


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=256))
def test_random_bytes_load_or_raise_invalid_program(raw: bytes) -> None:
    try:
        vm = load(raw)
    except InvalidProgram:
        return
    # Whatever loads must run to an exit or stop with a ProgramFault.
    try:
        vm.run()
    except ProgramFault:
        pass


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=32), st.data())
def test_mutated_valid_program(words: list[int], data: st.DataObject) -> None:
    base = bytearray(encode([mov64_imm(0, 1), *ld_imm64(1, 2), exit_insn()]))
    raw = base + b"".join(w.to_bytes(8, "little") for w in words)
    cut = data.draw(st.integers(0, len(raw)))
    try:
        load(bytes(raw[:cut]))
    except InvalidProgram:
        pass


def test_truncated_lddw_and_bad_opcode() -> None:
    lddw = encode(ld_imm64(0, 5))
    with pytest.raises(InvalidProgram, match="second slot"):
        load(lddw[:8])
    with pytest.raises(InvalidProgram, match="multiple of 8"):
        load(lddw[:12])
    with pytest.raises(InvalidProgram, match="opcode"):
        load(bytes([0xFF, 0, 0, 0, 0, 0, 0, 0]) + encode([exit_insn()]))
    with pytest.raises(InvalidProgram, match="empty"):
        load(b"")
