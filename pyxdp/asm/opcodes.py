"""eBPF opcode fields, as ``include/uapi/linux/bpf_common.h`` and ``bpf.h`` name them.

An opcode byte is ``class | (op or mode) | (source or size)``; RFC 9669 is the
normative text. Kernel names are kept (``BPF_ALU64``, ``BPF_MEMSX``,
``BPF_PSEUDO_MAP_FD``...) so a kernel engineer finds them as expected.
"""

from __future__ import annotations

from enum import IntEnum

# Instruction classes (low 3 bits).
BPF_LD = 0x00
BPF_LDX = 0x01
BPF_ST = 0x02
BPF_STX = 0x03
BPF_ALU = 0x04
BPF_JMP = 0x05
BPF_JMP32 = 0x06
BPF_ALU64 = 0x07

# Load/store size (bits 3-4).
BPF_W = 0x00
BPF_H = 0x08
BPF_B = 0x10
BPF_DW = 0x18

# Load/store mode (bits 5-7).
BPF_IMM = 0x00
BPF_ABS = 0x20
BPF_IND = 0x40
BPF_MEM = 0x60
BPF_MEMSX = 0x80
BPF_ATOMIC = 0xC0

# Source operand (bit 3) for ALU and JMP.
BPF_K = 0x00
BPF_X = 0x08
# BPF_END uses the same bit for the byte order.
BPF_TO_LE = 0x00
BPF_TO_BE = 0x08

# ALU operations (bits 4-7).
BPF_ADD = 0x00
BPF_SUB = 0x10
BPF_MUL = 0x20
BPF_DIV = 0x30
BPF_OR = 0x40
BPF_AND = 0x50
BPF_LSH = 0x60
BPF_RSH = 0x70
BPF_NEG = 0x80
BPF_MOD = 0x90
BPF_XOR = 0xA0
BPF_MOV = 0xB0
BPF_ARSH = 0xC0
BPF_END = 0xD0

# Jump operations (bits 4-7).
BPF_JA = 0x00
BPF_JEQ = 0x10
BPF_JGT = 0x20
BPF_JGE = 0x30
BPF_JSET = 0x40
BPF_JNE = 0x50
BPF_JSGT = 0x60
BPF_JSGE = 0x70
BPF_CALL = 0x80
BPF_EXIT = 0x90
BPF_JLT = 0xA0
BPF_JLE = 0xB0
BPF_JSLT = 0xC0
BPF_JSLE = 0xD0

# Atomic operations (in imm).
BPF_FETCH = 0x01
BPF_XCHG = 0xE0 | BPF_FETCH
BPF_CMPXCHG = 0xF0 | BPF_FETCH
# Linux 6.15: ordered loads and stores, any size (B/H/W/DW).
BPF_LOAD_ACQ = 0x100  # dst_reg = smp_load_acquire((size *)(src_reg + off))
BPF_STORE_REL = 0x110  # smp_store_release((size *)(dst_reg + off), src_reg)

MAX_BPF_STACK = 512
MAX_CALL_FRAMES = 8
MAX_TAIL_CALL_CNT = 33


class PseudoSrc(IntEnum):
    """``src_reg`` values of ``BPF_LD | BPF_IMM | BPF_DW`` (ld_imm64)."""

    BPF_PSEUDO_NONE = 0
    BPF_PSEUDO_MAP_FD = 1
    BPF_PSEUDO_MAP_VALUE = 2
    BPF_PSEUDO_BTF_ID = 3
    BPF_PSEUDO_FUNC = 4
    BPF_PSEUDO_MAP_IDX = 5
    BPF_PSEUDO_MAP_IDX_VALUE = 6


class CallSrc(IntEnum):
    """``src_reg`` values of ``BPF_JMP | BPF_CALL``."""

    BPF_HELPER_CALL = 0
    BPF_PSEUDO_CALL = 1
    BPF_PSEUDO_KFUNC_CALL = 2


OP_LD_IMM64 = BPF_LD | BPF_IMM | BPF_DW  # 0x18
OP_CALL = BPF_JMP | BPF_CALL  # 0x85
OP_CALLX = BPF_JMP | BPF_CALL | BPF_X  # 0x8d
OP_EXIT = BPF_JMP | BPF_EXIT  # 0x95
OP_JA = BPF_JMP | BPF_JA  # 0x05
OP_JA32 = BPF_JMP32 | BPF_JA  # 0x06 (gotol)

ALU_OP_NAMES: dict[int, str] = {
    BPF_ADD: "add", BPF_SUB: "sub", BPF_MUL: "mul", BPF_DIV: "div",
    BPF_OR: "or", BPF_AND: "and", BPF_LSH: "lsh", BPF_RSH: "rsh",
    BPF_NEG: "neg", BPF_MOD: "mod", BPF_XOR: "xor", BPF_MOV: "mov",
    BPF_ARSH: "arsh", BPF_END: "end",
}
JMP_OP_NAMES: dict[int, str] = {
    BPF_JA: "ja", BPF_JEQ: "jeq", BPF_JGT: "jgt", BPF_JGE: "jge",
    BPF_JSET: "jset", BPF_JNE: "jne", BPF_JSGT: "jsgt", BPF_JSGE: "jsge",
    BPF_CALL: "call", BPF_EXIT: "exit", BPF_JLT: "jlt", BPF_JLE: "jle",
    BPF_JSLT: "jslt", BPF_JSLE: "jsle",
}
SIZE_NAMES: dict[int, str] = {BPF_W: "w", BPF_H: "h", BPF_B: "b", BPF_DW: "dw"}
SIZE_BYTES: dict[int, int] = {BPF_W: 4, BPF_H: 2, BPF_B: 1, BPF_DW: 8}
ATOMIC_OP_NAMES: dict[int, str] = {
    BPF_ADD: "add", BPF_OR: "or", BPF_AND: "and", BPF_XOR: "xor",
    BPF_ADD | BPF_FETCH: "fetch add", BPF_OR | BPF_FETCH: "fetch or",
    BPF_AND | BPF_FETCH: "fetch and", BPF_XOR | BPF_FETCH: "fetch xor",
    BPF_XCHG: "xchg", BPF_CMPXCHG: "cmpxchg",
}


def is_atomic_load(code: int, imm: int) -> bool:
    """``is_atomic_load_insn``: a load-acquire, which reads through ``src_reg`` into
    ``dst_reg`` as ``BPF_LDX`` does, although its class is ``BPF_STX``."""
    return code & 0xE7 == BPF_STX | BPF_ATOMIC and imm == BPF_LOAD_ACQ


def is_atomic_store(code: int, imm: int) -> bool:
    """A store-release: a ``BPF_STX | BPF_MEM`` store with release ordering."""
    return code & 0xE7 == BPF_STX | BPF_ATOMIC and imm == BPF_STORE_REL


def bpf_class(code: int) -> int:
    return code & 0x07


def bpf_size(code: int) -> int:
    return code & 0x18


def bpf_mode(code: int) -> int:
    return code & 0xE0


def bpf_op(code: int) -> int:
    return code & 0xF0


def bpf_src(code: int) -> int:
    return code & 0x08
