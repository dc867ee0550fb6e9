"""Hypothesis strategies for encodings the kernel's load-time checks accept.

"Valid" here is the per-instruction rule set of the verifier's opcode checks
(``check_alu_op``, ``check_mem_access`` decoding, ``check_atomic``, the
ld_imm64 and call decoding): every reserved field is zero, every selector
(op, size, mode, pseudo source, atomic op, byte-swap width, movsx width)
names something that exists, shift immediates are below the operand width
and no division is by an immediate zero. Registers are r0..r10. Nothing
here models data flow, so a valid program may still fail verification
(uninitialised reads, pointer arithmetic); :mod:`pyxdp.testing.fuzz` is for
programs that must also run.

``valid_programs`` adds the structural rule: jumps, bpf-to-bpf calls and
``subprog[]`` loads land on an instruction start inside the program, and the
program ends in ``exit``.
"""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from pyxdp.asm import opcodes as op
from pyxdp.asm.disasm import (
    BPF_ADDR_SPACE_CAST,
    BPF_JCOND,
    BPF_LOAD_ACQ,
    BPF_MAY_GOTO,
    BPF_STORE_REL,
)
from pyxdp.asm.helpers_names import HELPER_NAMES
from pyxdp.asm.insn import Instruction, ld_imm64

__all__ = ["valid_instructions", "valid_programs"]

Slots = tuple[Instruction, ...]

_S32 = (-(1 << 31), (1 << 31) - 1)
_S16 = (-(1 << 15), (1 << 15) - 1)

_REGS = st.integers(0, 10)
# Small values find boundary bugs; full-range values find width bugs.
_IMM = st.one_of(st.integers(-16, 16), st.integers(*_S32))
_OFF = st.one_of(st.integers(-16, 16), st.integers(*_S16))
_SIZES = st.sampled_from((op.BPF_B, op.BPF_H, op.BPF_W, op.BPF_DW))

_ALU_OPS = (op.BPF_ADD, op.BPF_SUB, op.BPF_MUL, op.BPF_DIV, op.BPF_OR, op.BPF_AND,
            op.BPF_LSH, op.BPF_RSH, op.BPF_MOD, op.BPF_XOR, op.BPF_MOV, op.BPF_ARSH)
_SHIFTS = (op.BPF_LSH, op.BPF_RSH, op.BPF_ARSH)
_CMP_OPS = (op.BPF_JEQ, op.BPF_JGT, op.BPF_JGE, op.BPF_JSET, op.BPF_JNE, op.BPF_JSGT,
            op.BPF_JSGE, op.BPF_JLT, op.BPF_JLE, op.BPF_JSLT, op.BPF_JSLE)
_ATOMIC_IMMS = (op.BPF_ADD, op.BPF_AND, op.BPF_OR, op.BPF_XOR,
                op.BPF_ADD | op.BPF_FETCH, op.BPF_AND | op.BPF_FETCH,
                op.BPF_OR | op.BPF_FETCH, op.BPF_XOR | op.BPF_FETCH,
                op.BPF_XCHG, op.BPF_CMPXCHG)


def _one(insn: Instruction) -> Slots:
    return (insn,)


@st.composite
def _alu(draw: st.DrawFn) -> Slots:
    cls = draw(st.sampled_from((op.BPF_ALU, op.BPF_ALU64)))
    alu = draw(st.sampled_from(_ALU_OPS))
    dst = draw(_REGS)
    signed = alu in (op.BPF_DIV, op.BPF_MOD) and draw(st.booleans())
    off = 1 if signed else 0
    if draw(st.booleans()):
        if alu == op.BPF_MOV:
            # movsx: 8/16 from a 32-bit register, 8/16/32 from a 64-bit one.
            widths = (0, 8, 16, 32) if cls == op.BPF_ALU64 else (0, 8, 16)
            off = draw(st.sampled_from(widths))
        return _one(Instruction(cls | alu | op.BPF_X, dst, draw(_REGS), off, 0))
    if alu in _SHIFTS:
        imm = draw(st.integers(0, 63 if cls == op.BPF_ALU64 else 31))
    elif alu in (op.BPF_DIV, op.BPF_MOD):
        imm = draw(_IMM.filter(bool))
    else:
        imm = draw(_IMM)
    return _one(Instruction(cls | alu | op.BPF_K, dst, 0, off, imm))


@st.composite
def _neg_end(draw: st.DrawFn) -> Slots:
    dst = draw(_REGS)
    kind = draw(st.sampled_from(("neg32", "neg64", "le", "be", "bswap")))
    if kind.startswith("neg"):
        cls = op.BPF_ALU if kind == "neg32" else op.BPF_ALU64
        return _one(Instruction(cls | op.BPF_NEG | op.BPF_K, dst))
    width = draw(st.sampled_from((16, 32, 64)))
    code = {"le": op.BPF_ALU | op.BPF_END | op.BPF_TO_LE,
            "be": op.BPF_ALU | op.BPF_END | op.BPF_TO_BE,
            "bswap": op.BPF_ALU64 | op.BPF_END | op.BPF_TO_LE}[kind]
    return _one(Instruction(code, dst, 0, 0, width))


@st.composite
def _memory(draw: st.DrawFn) -> Slots:
    kind = draw(st.sampled_from(("ldx", "ldsx", "st", "stx", "atomic")))
    dst, src, off = draw(_REGS), draw(_REGS), draw(_OFF)
    if kind == "ldx":
        return _one(Instruction(op.BPF_LDX | op.BPF_MEM | draw(_SIZES), dst, src, off))
    if kind == "ldsx":
        size = draw(st.sampled_from((op.BPF_B, op.BPF_H, op.BPF_W)))
        return _one(Instruction(op.BPF_LDX | op.BPF_MEMSX | size, dst, src, off))
    if kind == "st":
        return _one(Instruction(op.BPF_ST | op.BPF_MEM | draw(_SIZES), dst, 0, off,
                                draw(_IMM)))
    if kind == "stx":
        return _one(Instruction(op.BPF_STX | op.BPF_MEM | draw(_SIZES), dst, src, off))
    size = draw(st.sampled_from((op.BPF_W, op.BPF_DW)))
    imm = draw(st.sampled_from(_ATOMIC_IMMS))
    return _one(Instruction(op.BPF_STX | op.BPF_ATOMIC | size, dst, src, off, imm))


@st.composite
def _ld_imm64(draw: st.DrawFn) -> Slots:
    dst = draw(_REGS)
    src = draw(st.sampled_from(list(op.PseudoSrc)))
    u32 = st.integers(0, (1 << 32) - 1)
    ps = op.PseudoSrc
    if src == ps.BPF_PSEUDO_NONE:
        value = draw(st.one_of(st.integers(-16, 16), st.integers(0, (1 << 64) - 1)))
    elif src in (ps.BPF_PSEUDO_MAP_FD, ps.BPF_PSEUDO_MAP_IDX):
        value = draw(u32)  # fd or fd_array index; the high half stays zero
    elif src == ps.BPF_PSEUDO_FUNC:
        value = draw(_IMM) & 0xFFFF_FFFF  # pc-relative, as a call's imm
    else:
        # Map value (fd or index, offset into the value) and ksym
        # (BTF id, fd of the module BTF or 0).
        value = draw(u32) | (draw(u32) << 32)
    return ld_imm64(dst, value, int(src))


@st.composite
def _jump(draw: st.DrawFn) -> Slots:
    kind = draw(st.sampled_from(("cond", "ja", "gotol", "call", "callx", "exit")))
    if kind == "cond":
        cls = draw(st.sampled_from((op.BPF_JMP, op.BPF_JMP32)))
        code = cls | draw(st.sampled_from(_CMP_OPS))
        if draw(st.booleans()):
            return _one(Instruction(code | op.BPF_X, draw(_REGS), draw(_REGS), draw(_OFF)))
        return _one(Instruction(code | op.BPF_K, draw(_REGS), 0, draw(_OFF), draw(_IMM)))
    if kind == "ja":
        return _one(Instruction(op.OP_JA, 0, 0, draw(_OFF)))
    if kind == "gotol":
        return _one(Instruction(op.OP_JA32, 0, 0, 0, draw(_IMM)))
    if kind == "callx":
        return _one(Instruction(op.OP_CALLX, draw(_REGS)))
    if kind == "exit":
        return _one(Instruction(op.OP_EXIT))
    src = draw(st.sampled_from(list(op.CallSrc)))
    if src == op.CallSrc.BPF_HELPER_CALL:
        # Helper 0 (unspec) is not callable.
        return _one(Instruction(op.OP_CALL, 0, 0, 0,
                                draw(st.integers(1, len(HELPER_NAMES) - 1))))
    if src == op.CallSrc.BPF_PSEUDO_CALL:
        return _one(Instruction(op.OP_CALL, 0, 1, 0, draw(_IMM)))
    # kfunc: imm is the BTF id, off the fd_array slot of a module's BTF (0: vmlinux).
    off = draw(st.one_of(st.just(0), st.integers(1, _S16[1])))
    return _one(Instruction(op.OP_CALL, 0, 2, off, draw(st.integers(1, _S32[1]))))


@st.composite
def _extensions(draw: st.DrawFn) -> Slots:
    """Encodings newer than RFC 9669 or outside XDP (legacy packet loads)."""
    kind = draw(st.sampled_from(("acquire", "release", "ascast", "may_goto", "abs", "ind")))
    dst, src, off = draw(_REGS), draw(_REGS), draw(_OFF)
    atomic = op.BPF_STX | op.BPF_ATOMIC
    if kind == "acquire":
        return _one(Instruction(atomic | draw(_SIZES), dst, src, off, BPF_LOAD_ACQ))
    if kind == "release":
        return _one(Instruction(atomic | draw(_SIZES), dst, src, off, BPF_STORE_REL))
    if kind == "ascast":
        imm = draw(st.integers(*_S32))
        return _one(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, dst, src,
                                BPF_ADDR_SPACE_CAST, imm))
    if kind == "may_goto":
        return _one(Instruction(op.BPF_JMP | BPF_JCOND | op.BPF_K, 0, BPF_MAY_GOTO, off))
    size = draw(st.sampled_from((op.BPF_B, op.BPF_H, op.BPF_W)))
    if kind == "abs":
        return _one(Instruction(op.BPF_LD | op.BPF_ABS | size, 0, 0, 0, draw(_IMM)))
    return _one(Instruction(op.BPF_LD | op.BPF_IND | size, 0, src, 0, draw(_IMM)))


def valid_instructions(*, extensions: bool = False) -> st.SearchStrategy[Slots]:
    """One valid instruction: a 1-tuple of slots, or the two slots of an ld_imm64.

    Covers ALU/ALU64 in K and X form (sdiv/smod, movsx), neg, le/be/bswap of
    16/32/64, LDX/LDSX/ST/STX of every size, every 32/64-bit atomic,
    ld_imm64 with each pseudo source 0..6, JMP/JMP32 conditionals, ja,
    gotol, helper/bpf-to-bpf/kfunc calls, callx and exit. Jump offsets are
    arbitrary. ``extensions`` adds load-acquire/store-release, arena
    address-space casts, may_goto and the legacy ld_abs/ld_ind.
    """
    parts = [_alu(), _neg_end(), _memory(), _ld_imm64(), _jump()]
    if extensions:
        parts.append(_extensions())
    return st.one_of(*parts)


def _retarget(insn: Instruction, pc: int, starts: list[int], pick: int) -> Instruction:
    """Point a pc-relative field of ``insn`` (at ``pc``) at ``starts[pick]``."""
    rel = starts[pick % len(starts)] - (pc + 1)
    code = insn.code
    if code == op.OP_JA32 or (code == op.OP_CALL and insn.src == op.CallSrc.BPF_PSEUDO_CALL):
        return dataclasses.replace(insn, imm=rel)
    if code == op.OP_LD_IMM64 and insn.src == op.PseudoSrc.BPF_PSEUDO_FUNC:
        return dataclasses.replace(insn, imm=rel)
    cls, o = insn.cls, op.bpf_op(code)
    if cls in (op.BPF_JMP, op.BPF_JMP32) and o not in (op.BPF_CALL, op.BPF_EXIT):
        return dataclasses.replace(insn, off=rel)
    return insn


@st.composite
def valid_programs(draw: st.DrawFn, *, min_size: int = 1, max_size: int = 32,
                   extensions: bool = False) -> Slots:
    """A sequence of valid instructions whose branch targets stay inside it, ending in exit.

    Every jump, ``call pc+N`` and ``subprog[]`` load targets an instruction
    start (never the second slot of an ld_imm64); the final ``exit`` is
    appended, so the program has ``min_size + 1`` to ``max_size + 1``
    instructions.
    """
    groups = draw(st.lists(valid_instructions(extensions=extensions),
                           min_size=min_size, max_size=max_size))
    groups.append((Instruction(op.OP_EXIT),))
    starts: list[int] = []
    pc = 0
    for g in groups:
        starts.append(pc)
        pc += len(g)
    slots: list[Instruction] = []
    for g, start in zip(groups, starts, strict=True):
        first = _retarget(g[0], start, starts, draw(st.integers(0, len(starts) - 1)))
        slots.append(first)
        slots.extend(g[1:])
    return tuple(slots)
