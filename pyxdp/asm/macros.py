"""Instruction builders named after the kernel's ``include/linux/filter.h`` macros.

``BPF_MOV64_IMM(dst, imm)`` is :func:`mov64_imm`, ``BPF_JMP_IMM`` is
:func:`jmp_imm` and so on: code that builds programs by hand (wrappers for
the kernel runner, tests, the fuzzer) reads like the kernel's own selftests.
"""

from __future__ import annotations

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction, ld_imm64

__all__ = [
    "alu32_imm", "alu32_reg", "alu64_imm", "alu64_reg", "atomic_op", "call_helper",
    "call_local", "endian", "exit_insn", "ja", "jmp32_imm", "jmp32_reg", "jmp_imm",
    "jmp_reg", "ld_imm64", "ldx_mem", "ldx_memsx", "mov32_imm", "mov32_reg", "mov64_imm",
    "mov64_reg", "st_mem", "stx_mem",
]

_SIZE = {1: op.BPF_B, 2: op.BPF_H, 4: op.BPF_W, 8: op.BPF_DW}


def alu64_imm(code_op: int, dst: int, imm: int, off: int = 0) -> Instruction:
    return Instruction(op.BPF_ALU64 | code_op | op.BPF_K, dst, 0, off, imm)


def alu64_reg(code_op: int, dst: int, src: int, off: int = 0) -> Instruction:
    return Instruction(op.BPF_ALU64 | code_op | op.BPF_X, dst, src, off, 0)


def alu32_imm(code_op: int, dst: int, imm: int, off: int = 0) -> Instruction:
    return Instruction(op.BPF_ALU | code_op | op.BPF_K, dst, 0, off, imm)


def alu32_reg(code_op: int, dst: int, src: int, off: int = 0) -> Instruction:
    return Instruction(op.BPF_ALU | code_op | op.BPF_X, dst, src, off, 0)


def mov64_imm(dst: int, imm: int) -> Instruction:
    return alu64_imm(op.BPF_MOV, dst, imm)


def mov64_reg(dst: int, src: int) -> Instruction:
    return alu64_reg(op.BPF_MOV, dst, src)


def mov32_imm(dst: int, imm: int) -> Instruction:
    return alu32_imm(op.BPF_MOV, dst, imm)


def mov32_reg(dst: int, src: int) -> Instruction:
    return alu32_reg(op.BPF_MOV, dst, src)


def endian(cls: int, source: int, dst: int, width: int) -> Instruction:
    """``cls`` BPF_ALU (le/be by ``source``) or BPF_ALU64 (bswap, source TO_LE)."""
    return Instruction(cls | op.BPF_END | source, dst, 0, 0, width)


def jmp_imm(code_op: int, dst: int, imm: int, off: int) -> Instruction:
    return Instruction(op.BPF_JMP | code_op | op.BPF_K, dst, 0, off, imm)


def jmp_reg(code_op: int, dst: int, src: int, off: int) -> Instruction:
    return Instruction(op.BPF_JMP | code_op | op.BPF_X, dst, src, off, 0)


def jmp32_imm(code_op: int, dst: int, imm: int, off: int) -> Instruction:
    return Instruction(op.BPF_JMP32 | code_op | op.BPF_K, dst, 0, off, imm)


def jmp32_reg(code_op: int, dst: int, src: int, off: int) -> Instruction:
    return Instruction(op.BPF_JMP32 | code_op | op.BPF_X, dst, src, off, 0)


def ja(off: int) -> Instruction:
    return Instruction(op.OP_JA, 0, 0, off, 0)


def ldx_mem(size: int, dst: int, src: int, off: int) -> Instruction:
    return Instruction(op.BPF_LDX | op.BPF_MEM | _SIZE[size], dst, src, off, 0)


def ldx_memsx(size: int, dst: int, src: int, off: int) -> Instruction:
    return Instruction(op.BPF_LDX | op.BPF_MEMSX | _SIZE[size], dst, src, off, 0)


def stx_mem(size: int, dst: int, src: int, off: int) -> Instruction:
    return Instruction(op.BPF_STX | op.BPF_MEM | _SIZE[size], dst, src, off, 0)


def st_mem(size: int, dst: int, off: int, imm: int) -> Instruction:
    return Instruction(op.BPF_ST | op.BPF_MEM | _SIZE[size], dst, 0, off, imm)


def atomic_op(size: int, kind: int, dst: int, src: int, off: int) -> Instruction:
    """``BPF_ATOMIC_OP``: ``kind`` is an atomic imm, ``BPF_LOAD_ACQ`` (``dst = *(src +
    off)``) and ``BPF_STORE_REL`` (``*(dst + off) = src``) of any ``size`` included."""
    return Instruction(op.BPF_STX | op.BPF_ATOMIC | _SIZE[size], dst, src, off, kind)


def call_helper(helper_id: int) -> Instruction:
    return Instruction(op.OP_CALL, 0, op.CallSrc.BPF_HELPER_CALL, 0, helper_id)


def call_local(rel: int) -> Instruction:
    """``call pc+rel``: the callee starts at ``pc + 1 + rel``."""
    return Instruction(op.OP_CALL, 0, op.CallSrc.BPF_PSEUDO_CALL, 0, rel)


def exit_insn() -> Instruction:
    return Instruction(op.OP_EXIT)


_ = ld_imm64  # re-exported: BPF_LD_IMM64 lives in pyxdp.asm.insn
