"""Random programs the kernel verifier accepts, for differential testing.

The strategy builds straight-line code with bounded *forward* conditional
branches (the verifier rejects structurally unreachable code, so there is
no unconditional ``ja`` over code), ALU/ALU64 in every form the verifier
takes (shift immediates in range, no division by an immediate zero), loads
and stores on a zeroed stack window and on the packet buffer, and atomics on
the stack. It keeps to what both the kernel and pyxdp define exactly:

* r9 holds the buffer pointer (moved from r1 on entry) and r10 the frame
  pointer; neither is ever an ALU destination, so no pointer arithmetic;
* r0..r8 are all written before anything reads them;
* the stack window ``[r10-64, r10)`` is zeroed first, because the kernel's
  stack holds garbage where pyxdp's holds zeros;
* stack accesses are aligned (the verifier insists), packet accesses need
  not be.

The program's outputs are r0 and the buffer contents after the run.
"""

from __future__ import annotations

from hypothesis import strategies as st

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction, ld_imm64

__all__ = ["STACK_WINDOW", "runnable_programs"]

STACK_WINDOW = 64
SCALARS = tuple(range(9))  # r0..r8
BUF = 9
FP = 10

_ALU_OPS = (op.BPF_ADD, op.BPF_SUB, op.BPF_MUL, op.BPF_DIV, op.BPF_OR, op.BPF_AND,
            op.BPF_LSH, op.BPF_RSH, op.BPF_MOD, op.BPF_XOR, op.BPF_MOV, op.BPF_ARSH)
_CMP_OPS = (op.BPF_JEQ, op.BPF_JGT, op.BPF_JGE, op.BPF_JSET, op.BPF_JNE, op.BPF_JSGT,
            op.BPF_JSGE, op.BPF_JLT, op.BPF_JLE, op.BPF_JSLT, op.BPF_JSLE)
_SIZES = {1: op.BPF_B, 2: op.BPF_H, 4: op.BPF_W, 8: op.BPF_DW}
_ATOMICS = tuple(op.ATOMIC_OP_NAMES)
_ORDERED = (op.BPF_LOAD_ACQ, op.BPF_STORE_REL)

_imm32 = st.one_of(st.integers(-(2**31), 2**31 - 1),
                   st.sampled_from([0, 1, -1, 2, 7, 31, 32, 63, 64, 0x7FFFFFFF, -(2**31), 0xFF]))
_imm64 = st.one_of(st.integers(0, 2**64 - 1),
                   st.sampled_from([0, 1, 2**63, 2**64 - 1, 2**32, 2**32 - 1, 2**31]))
_reg = st.sampled_from(SCALARS)


@st.composite
def _alu(draw: st.DrawFn) -> list[Instruction]:
    is64 = draw(st.booleans())
    cls = op.BPF_ALU64 if is64 else op.BPF_ALU
    width = 64 if is64 else 32
    kind = draw(st.sampled_from(("op", "op", "op", "neg", "end", "movsx")))
    dst = draw(_reg)
    if kind == "neg":
        return [Instruction(cls | op.BPF_NEG, dst, 0, 0, 0)]
    if kind == "end":
        if is64:
            return [Instruction(cls | op.BPF_END | op.BPF_TO_LE, dst, 0, 0,
                                draw(st.sampled_from((16, 32, 64))))]
        src_bit = draw(st.sampled_from((op.BPF_TO_LE, op.BPF_TO_BE)))
        return [Instruction(cls | op.BPF_END | src_bit, dst, 0, 0,
                            draw(st.sampled_from((16, 32, 64))))]
    if kind == "movsx":
        off = draw(st.sampled_from((8, 16, 32) if is64 else (8, 16)))
        return [Instruction(cls | op.BPF_MOV | op.BPF_X, dst, draw(_reg), off, 0)]
    code_op = draw(st.sampled_from(_ALU_OPS))
    off = draw(st.sampled_from((0, 1))) if code_op in (op.BPF_DIV, op.BPF_MOD) else 0
    if draw(st.booleans()):
        return [Instruction(cls | code_op | op.BPF_X, dst, draw(_reg), off, 0)]
    if code_op in (op.BPF_LSH, op.BPF_RSH, op.BPF_ARSH):
        imm = draw(st.integers(0, width - 1))  # the verifier rejects larger shifts
    elif code_op in (op.BPF_DIV, op.BPF_MOD):
        imm = draw(_imm32.filter(lambda v: v != 0))  # verifier: division by zero
    else:
        imm = draw(_imm32)
    return [Instruction(cls | code_op | op.BPF_K, dst, 0, off, imm)]


@st.composite
def _mem(draw: st.DrawFn, buf_len: int) -> list[Instruction]:
    size = draw(st.sampled_from((1, 2, 4, 8)))
    on_stack = buf_len < size or draw(st.booleans())
    if on_stack:
        base = FP
        off = -size * draw(st.integers(1, STACK_WINDOW // size))
    else:
        base = BUF
        off = draw(st.integers(0, buf_len - size))
    kind = draw(st.sampled_from(("ldx", "ldx", "ldxsx", "st", "stx", "stx", "atomic")))
    mode_size = _SIZES[size]
    if kind == "ldxsx" and size != 8:
        return [Instruction(op.BPF_LDX | op.BPF_MEMSX | mode_size, draw(_reg), base, off, 0)]
    if kind in ("ldx", "ldxsx"):
        return [Instruction(op.BPF_LDX | op.BPF_MEM | mode_size, draw(_reg), base, off, 0)]
    if kind == "st":
        return [Instruction(op.BPF_ST | op.BPF_MEM | mode_size, base, 0, off, draw(_imm32))]
    if kind == "atomic":
        # The verifier refuses atomics on packet memory: stack only. Read-modify-write
        # ones are 4 or 8 bytes wide, load-acquire and store-release any size.
        off = -size * draw(st.integers(1, STACK_WINDOW // size))
        imm = draw(st.sampled_from(_ATOMICS + _ORDERED if size in (4, 8) else _ORDERED))
        if imm == op.BPF_LOAD_ACQ:
            return [Instruction(op.BPF_STX | op.BPF_ATOMIC | mode_size, draw(_reg), FP, off,
                                imm)]
        return [Instruction(op.BPF_STX | op.BPF_ATOMIC | mode_size, FP, draw(_reg), off, imm)]
    return [Instruction(op.BPF_STX | op.BPF_MEM | mode_size, base, draw(_reg), off, 0)]


@st.composite
def runnable_programs(draw: st.DrawFn, max_blocks: int = 40
                      ) -> tuple[tuple[Instruction, ...], bytes]:
    """``(insns, buffer)``: a verifier-acceptable program and its input buffer."""
    buf_len = draw(st.integers(0, 64))
    buf = draw(st.binary(min_size=buf_len, max_size=buf_len))
    body: list[list[Instruction]] = []
    # Entry: r1 = buffer, r2 = length (the runner's convention).
    body.append([Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, BUF, 1, 0, 0)])
    for r in SCALARS:
        if draw(st.booleans()):
            body.append(list(ld_imm64(r, draw(_imm64))))
        else:
            body.append([Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, r, 0, 0,
                                     draw(_imm32))])
    zero = Instruction(op.BPF_ST | op.BPF_MEM | op.BPF_DW, FP, 0, 0, 0)
    for off in range(-STACK_WINDOW, 0, 8):
        body.append([Instruction(zero.code, FP, 0, off, 0)])
    n = draw(st.integers(1, max_blocks))
    blocks: list[list[Instruction] | tuple[str, int, int, int, int]] = []
    for _ in range(n):
        choice = draw(st.sampled_from(("alu", "alu", "alu", "mem", "mem", "jmp")))
        if choice == "alu":
            blocks.append(draw(_alu()))
        elif choice == "mem":
            blocks.append(draw(_mem(buf_len)))
        else:
            code = (draw(st.sampled_from((op.BPF_JMP, op.BPF_JMP32)))
                    | draw(st.sampled_from(_CMP_OPS)))
            skip = draw(st.integers(0, 4))
            if draw(st.booleans()):
                blocks.append(("jmp", code | op.BPF_X, draw(_reg), draw(_reg), skip))
            else:
                blocks.append(("jmp", code | op.BPF_K, draw(_reg), draw(_imm32), skip))
    # Resolve forward jumps: skip over the next `skip` blocks, in slots.
    flat_blocks: list[list[Instruction]] = []
    for idx, b in enumerate(blocks):
        if isinstance(b, tuple):
            _, code, dst, x, skip = b
            following = [blk for blk in blocks[idx + 1: idx + 1 + skip]]
            slots = sum(1 if isinstance(blk, tuple) else len(blk) for blk in following)
            if code & op.BPF_X:
                flat_blocks.append([Instruction(code, dst, x, slots, 0)])
            else:
                flat_blocks.append([Instruction(code, dst, 0, slots, x)])
        else:
            flat_blocks.append(b)
    insns = [i for blk in body for i in blk] + [i for blk in flat_blocks for i in blk]
    insns.append(Instruction(op.OP_EXIT))
    return tuple(insns), buf
