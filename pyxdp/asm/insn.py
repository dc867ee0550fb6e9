"""``struct bpf_insn``: one 8-byte eBPF instruction slot.

A program is a sequence of slots exactly as the kernel stores it: an
``ld_imm64`` occupies two slots, the second with opcode 0 carrying the high
32 bits of the constant. Keeping the kernel's slot numbering means every pc
in an error message matches ``bpftool prog dump xlated`` and the verifier log.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pyxdp.asm import opcodes as op
from pyxdp.errors import InvalidProgram

__all__ = ["Instruction", "decode", "encode", "imm64_at"]

_STRUCT = struct.Struct("<BBhi")
INSN_SIZE = 8


@dataclass(frozen=True, slots=True)
class Instruction:
    """One slot: ``code``, ``dst``, ``src``, signed 16-bit ``off``, signed 32-bit ``imm``."""

    code: int
    dst: int = 0
    src: int = 0
    off: int = 0
    imm: int = 0

    def __post_init__(self) -> None:
        if not (0 <= self.code <= 0xFF and 0 <= self.dst <= 0xF and 0 <= self.src <= 0xF):
            raise InvalidProgram(
                f"field out of range: code={self.code:#x} dst={self.dst} src={self.src}",
                rule="encoding")
        if not -0x8000 <= self.off <= 0x7FFF:
            raise InvalidProgram(f"offset {self.off} does not fit in 16 bits", rule="encoding")
        if not -0x8000_0000 <= self.imm <= 0x7FFF_FFFF:
            raise InvalidProgram(f"immediate {self.imm} does not fit in 32 bits",
                                 rule="encoding")

    @property
    def cls(self) -> int:
        return self.code & 0x07

    def encode(self) -> bytes:
        return _STRUCT.pack(self.code, self.dst | (self.src << 4), self.off, self.imm)

    @classmethod
    def from_bytes(cls, raw: bytes, offset: int = 0) -> Instruction:
        code, regs, off, imm = _STRUCT.unpack_from(raw, offset)
        return cls(code, regs & 0xF, regs >> 4, off, imm)

    def is_ld_imm64(self) -> bool:
        return self.code == op.OP_LD_IMM64


def decode(raw: bytes | bytearray | memoryview) -> tuple[Instruction, ...]:
    """Split raw bytecode into slots; the length must be a multiple of 8."""
    raw = bytes(raw)
    if len(raw) % INSN_SIZE:
        raise InvalidProgram(
            f"program length {len(raw)} is not a multiple of {INSN_SIZE} bytes",
            rule="length")
    return tuple(Instruction.from_bytes(raw, i) for i in range(0, len(raw), INSN_SIZE))


def encode(insns: Iterable[Instruction]) -> bytes:
    return b"".join(i.encode() for i in insns)


def imm64_at(insns: Sequence[Instruction], pc: int) -> int:
    """The unsigned 64-bit constant of the ld_imm64 at ``pc``."""
    lo = insns[pc].imm & 0xFFFF_FFFF
    hi = insns[pc + 1].imm & 0xFFFF_FFFF if pc + 1 < len(insns) else 0
    return lo | (hi << 32)


def ld_imm64(dst: int, value: int, src: int = 0) -> tuple[Instruction, Instruction]:
    """The two slots of ``dst = value`` (value taken modulo 2**64)."""
    value &= 0xFFFF_FFFF_FFFF_FFFF
    lo = value & 0xFFFF_FFFF
    hi = value >> 32
    return (Instruction(op.OP_LD_IMM64, dst, src, 0, lo - (1 << 32) if lo >> 31 else lo),
            Instruction(0, 0, 0, 0, hi - (1 << 32) if hi >> 31 else hi))
