"""The disassembler prints what kernel/bpf/disasm.c (and bpftool xlated) print.

Expected strings marked "log" are copied from real verifier logs and
``bpftool prog dump xlated`` output quoted in kernel selftests and on the
bpf mailing list; the rest follow disasm.c's format strings.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyxdp.asm import opcodes as op
from pyxdp.asm.disasm import disassemble, format_insn
from pyxdp.asm.helpers_names import HELPER_NAMES, helper_id, helper_name
from pyxdp.asm.insn import Instruction as I  # short, like the kernel's BPF_* insn macros
from pyxdp.asm.insn import ld_imm64

ALU64, ALU, JMP, JMP32 = op.BPF_ALU64, op.BPF_ALU, op.BPF_JMP, op.BPF_JMP32
K, X = op.BPF_K, op.BPF_X
STX_ATOMIC = op.BPF_STX | op.BPF_ATOMIC


def text(*slots: I) -> str:
    return format_insn(slots, 0)


SPELLINGS: list[tuple[tuple[I, ...], str]] = [
    # ALU / ALU64, K and X
    ((I(ALU64 | op.BPF_MOV | K, 0, 0, 0, 1),), "r0 = 1"),
    ((I(ALU | op.BPF_MOV | K, 0, 0, 0, 1),), "w0 = 1"),
    ((I(ALU64 | op.BPF_MOV | K, 0, 0, 0, -1),), "r0 = -1"),
    ((I(ALU64 | op.BPF_ADD | X, 1, 2),), "r1 += r2"),
    ((I(ALU64 | op.BPF_ADD | K, 0, 0, 0, 254),), "r0 += 254"),  # log
    ((I(ALU64 | op.BPF_AND | K, 0, 0, 0, 1),), "r0 &= 1"),  # log
    ((I(ALU64 | op.BPF_AND | K, 0, 0, 0, 2147483647),), "r0 &= 2147483647"),  # log
    ((I(ALU | op.BPF_AND | K, 0, 0, 0, 16128),), "w0 &= 16128"),  # log
    ((I(ALU | op.BPF_ADD | K, 7, 0, 0, 1000),), "w7 += 1000"),  # log
    ((I(ALU64 | op.BPF_RSH | K, 1, 0, 0, 32),), "r1 >>= 32"),  # log
    ((I(ALU64 | op.BPF_SUB | X, 4, 3),), "r4 -= r3"),
    ((I(ALU64 | op.BPF_MUL | K, 0, 0, 0, 4),), "r0 *= 4"),  # log
    ((I(ALU64 | op.BPF_DIV | X, 3, 2),), "r3 /= r2"),
    ((I(ALU | op.BPF_OR | X, 1, 2),), "w1 |= w2"),
    ((I(ALU64 | op.BPF_LSH | K, 1, 0, 0, 3),), "r1 <<= 3"),
    ((I(ALU64 | op.BPF_MOD | K, 1, 0, 0, 7),), "r1 %= 7"),
    ((I(ALU | op.BPF_XOR | X, 1, 1),), "w1 ^= w1"),
    ((I(ALU64 | op.BPF_ARSH | K, 1, 0, 0, 5),), "r1 s>>= 5"),
    ((I(ALU | op.BPF_ARSH | X, 1, 2),), "w1 s>>= w2"),
    ((I(ALU64 | op.BPF_MOV | X, 0, 1),), "r0 = r1"),  # log
    ((I(ALU | op.BPF_MOV | X, 1, 0),), "w1 = w0"),  # log
    # signed division and modulo: off == 1
    ((I(ALU | op.BPF_DIV | K, 1, 0, 1, 3),), "w1 s/= 3"),
    ((I(ALU64 | op.BPF_DIV | X, 1, 2, 1),), "r1 s/= r2"),
    ((I(ALU64 | op.BPF_MOD | X, 1, 2, 1),), "r1 s%= r2"),
    ((I(ALU | op.BPF_MOD | K, 1, 0, 1, -3),), "w1 s%= -3"),
    # neg
    ((I(ALU64 | op.BPF_NEG | K, 0),), "r0 = -r0"),
    ((I(ALU | op.BPF_NEG | K, 3),), "w3 = -w3"),
    # movsx
    ((I(ALU64 | op.BPF_MOV | X, 0, 0, 8),), "r0 = (s8)r0"),  # log
    ((I(ALU64 | op.BPF_MOV | X, 0, 10, 8),), "r0 = (s8)r10"),  # log
    ((I(ALU64 | op.BPF_MOV | X, 0, 1, 16),), "r0 = (s16)r1"),
    ((I(ALU64 | op.BPF_MOV | X, 0, 1, 32),), "r0 = (s32)r1"),
    ((I(ALU | op.BPF_MOV | X, 0, 1, 8),), "w0 = (s8)w1"),
    ((I(ALU | op.BPF_MOV | X, 0, 1, 16),), "w0 = (s16)w1"),
    # byte order
    ((I(ALU | op.BPF_END | op.BPF_TO_BE, 0, 0, 0, 16),), "r0 = be16 r0"),
    ((I(ALU | op.BPF_END | op.BPF_TO_LE, 0, 0, 0, 32),), "r0 = le32 r0"),
    ((I(ALU | op.BPF_END | op.BPF_TO_LE, 2, 0, 0, 64),), "r2 = le64 r2"),  # log
    ((I(ALU | op.BPF_END | op.BPF_TO_BE, 5, 0, 0, 64),), "r5 = be64 r5"),
    ((I(ALU64 | op.BPF_END, 0, 0, 0, 16),), "r0 = bswap16 r0"),  # log
    ((I(ALU64 | op.BPF_END, 0, 0, 0, 32),), "r0 = bswap32 r0"),
    ((I(ALU64 | op.BPF_END, 9, 0, 0, 64),), "r9 = bswap64 r9"),
    # jumps
    ((I(JMP | op.BPF_JGT | K, 1, 0, 3, 2),), "if r1 > 0x2 goto pc+3"),
    ((I(JMP | op.BPF_JGT | K, 0, 0, 2, 0x3F),), "if r0 > 0x3f goto pc+2"),  # log
    ((I(JMP | op.BPF_JEQ | K, 1, 0, 5, 0),), "if r1 == 0x0 goto pc+5"),  # log
    ((I(JMP | op.BPF_JNE | K, 1, 0, -1, 0),), "if r1 != 0x0 goto pc-1"),  # log
    ((I(JMP32 | op.BPF_JLT | K, 0, 0, 0, 10),), "if w0 < 0xa goto pc+0"),  # log
    ((I(JMP | op.BPF_JNE | K, 1, 0, 1, -1),), "if r1 != 0xffffffff goto pc+1"),
    ((I(JMP32 | op.BPF_JSLT | X, 1, 2, -1),), "if w1 s< w2 goto pc-1"),
    ((I(JMP | op.BPF_JSGE | X, 1, 2, 7),), "if r1 s>= r2 goto pc+7"),
    ((I(JMP | op.BPF_JSET | K, 1, 0, 1, 8),), "if r1 & 0x8 goto pc+1"),
    ((I(JMP32 | op.BPF_JLE | X, 3, 4, 2),), "if w3 <= w4 goto pc+2"),
    ((I(JMP | op.BPF_JSLE | K, 3, 0, 2, 1),), "if r3 s<= 0x1 goto pc+2"),
    ((I(JMP | op.BPF_JSGT | K, 3, 0, 2, 1),), "if r3 s> 0x1 goto pc+2"),
    ((I(JMP | op.BPF_JGE | X, 2, 1, 7),), "if r2 >= r1 goto pc+7"),
    ((I(op.OP_JA, 0, 0, 5),), "goto pc+5"),
    ((I(op.OP_JA, 0, 0, -3),), "goto pc-3"),  # log
    ((I(op.OP_JA32, 0, 0, 0, 70000),), "gotol pc+70000"),
    ((I(op.OP_JA32, 0, 0, 0, -4),), "gotol pc-4"),
    ((I(JMP | 0xE0, 0, 0, 5),), "may_goto pc+5"),
    # memory
    ((I(op.BPF_STX | op.BPF_MEM | op.BPF_DW, 10, 1, -8),), "*(u64 *)(r10 -8) = r1"),
    ((I(op.BPF_STX | op.BPF_MEM | op.BPF_DW, 10, 1, -512),), "*(u64 *)(r10 -512) = r1"),
    ((I(op.BPF_STX | op.BPF_MEM | op.BPF_W, 6, 7),), "*(u32 *)(r6 +0) = r7"),  # log
    ((I(op.BPF_ST | op.BPF_MEM | op.BPF_W, 1, 0, 4, 7),), "*(u32 *)(r1 +4) = 7"),
    ((I(op.BPF_ST | op.BPF_MEM | op.BPF_B, 10, 0, -1, -128),), "*(u8 *)(r10 -1) = -128"),
    ((I(op.BPF_LDX | op.BPF_MEM | op.BPF_W, 0, 1),), "r0 = *(u32 *)(r1 +0)"),
    ((I(op.BPF_LDX | op.BPF_MEM | op.BPF_DW, 6, 1),), "r6 = *(u64 *)(r1 +0)"),  # log
    ((I(op.BPF_LDX | op.BPF_MEM | op.BPF_H, 3, 1, 12),), "r3 = *(u16 *)(r1 +12)"),
    ((I(op.BPF_LDX | op.BPF_MEMSX | op.BPF_B, 0, 10, -1),), "r0 = *(s8 *)(r10 -1)"),
    ((I(op.BPF_LDX | op.BPF_MEMSX | op.BPF_H, 0, 10, -2),), "r0 = *(s16 *)(r10 -2)"),
    ((I(op.BPF_LDX | op.BPF_MEMSX | op.BPF_W, 0, 10, -4),), "r0 = *(s32 *)(r10 -4)"),
    # atomics, 64 and 32 bits (the kernel writes r even for 32-bit fetches)
    ((I(STX_ATOMIC | op.BPF_DW, 10, 1, -8, op.BPF_ADD),), "lock *(u64 *)(r10 -8) += r1"),
    ((I(STX_ATOMIC | op.BPF_W, 0, 1, 0, op.BPF_ADD),), "lock *(u32 *)(r0 +0) += r1"),  # log
    ((I(STX_ATOMIC | op.BPF_DW, 10, 1, -8, op.BPF_AND),), "lock *(u64 *)(r10 -8) &= r1"),
    ((I(STX_ATOMIC | op.BPF_W, 10, 1, -8, op.BPF_OR),), "lock *(u32 *)(r10 -8) |= r1"),
    ((I(STX_ATOMIC | op.BPF_DW, 10, 1, -8, op.BPF_XOR),), "lock *(u64 *)(r10 -8) ^= r1"),
    ((I(STX_ATOMIC | op.BPF_DW, 10, 1, -8, op.BPF_ADD | op.BPF_FETCH),),
     "r1 = atomic64_fetch_add((u64 *)(r10 -8), r1)"),  # log
    ((I(STX_ATOMIC | op.BPF_W, 10, 1, -8, op.BPF_ADD | op.BPF_FETCH),),
     "r1 = atomic_fetch_add((u32 *)(r10 -8), r1)"),  # log
    ((I(STX_ATOMIC | op.BPF_W, 10, 3, -4, op.BPF_OR | op.BPF_FETCH),),
     "r3 = atomic_fetch_or((u32 *)(r10 -4), r3)"),
    ((I(STX_ATOMIC | op.BPF_DW, 10, 3, -8, op.BPF_AND | op.BPF_FETCH),),
     "r3 = atomic64_fetch_and((u64 *)(r10 -8), r3)"),
    ((I(STX_ATOMIC | op.BPF_W, 10, 3, -8, op.BPF_XOR | op.BPF_FETCH),),
     "r3 = atomic_fetch_xor((u32 *)(r10 -8), r3)"),
    ((I(STX_ATOMIC | op.BPF_DW, 10, 1, -8, op.BPF_XCHG),),
     "r1 = atomic64_xchg((u64 *)(r10 -8), r1)"),  # log
    ((I(STX_ATOMIC | op.BPF_W, 10, 1, -8, op.BPF_XCHG),),
     "r1 = atomic_xchg((u32 *)(r10 -8), r1)"),
    ((I(STX_ATOMIC | op.BPF_DW, 10, 2, -8, op.BPF_CMPXCHG),),
     "r0 = atomic64_cmpxchg((u64 *)(r10 -8), r0, r2)"),  # log
    ((I(STX_ATOMIC | op.BPF_W, 10, 1, -8, op.BPF_CMPXCHG),),
     "r0 = atomic_cmpxchg((u32 *)(r10 -8), r0, r1)"),
    ((I(STX_ATOMIC | op.BPF_H, 10, 1, -8, 0x110),), "store_release((u16 *)(r10 -8), r1)"),
    ((I(STX_ATOMIC | op.BPF_DW, 0, 1, 8, 0x100),), "r0 = load_acquire((u64 *)(r1 +8))"),
    # ld_imm64 and its pseudo sources
    (ld_imm64(1, 0x1122334455667788), "r1 = 0x1122334455667788 ll"),
    (ld_imm64(2, 0x100000000000), "r2 = 0x100000000000 ll"),  # log, plus ll
    (ld_imm64(0, 0), "r0 = 0x0 ll"),
    (ld_imm64(1, 5, 1), "r1 = map[fd:5]"),
    (ld_imm64(1, 3 | (16 << 32), 2), "r1 = map[fd:3][0]+16"),
    (ld_imm64(1, 42, 3), "r1 = btf_id[42]"),
    (ld_imm64(1, 42 | (7 << 32), 3), "r1 = btf_id[42][btf_fd:7]"),
    (ld_imm64(2, (-46) & 0xFFFFFFFF, 4), "r2 = subprog[-46]"),  # log
    (ld_imm64(2, 5, 4), "r2 = subprog[+5]"),
    (ld_imm64(1, 0, 5), "r1 = map[idx:0]"),
    (ld_imm64(1, 1 | (8 << 32), 6), "r1 = map[idx:1]+8"),
    # legacy packet loads
    ((I(op.BPF_LD | op.BPF_ABS | op.BPF_H, 0, 0, 0, 12),), "r0 = *(u16 *)skb[12]"),
    ((I(op.BPF_LD | op.BPF_IND | op.BPF_W, 0, 7, 0, 4),), "r0 = *(u32 *)skb[r7 + 4]"),
    # calls
    ((I(op.OP_CALL, 0, 0, 0, 1),), "call bpf_map_lookup_elem#1"),
    ((I(op.OP_CALL, 0, 0, 0, 7),), "call bpf_get_prandom_u32#7"),  # log
    ((I(op.OP_CALL, 0, 0, 0, 0),), "call bpf_unspec#0"),
    ((I(op.OP_CALL, 0, 0, 0, 211),), "call bpf_cgrp_storage_delete#211"),
    ((I(op.OP_CALL, 0, 0, 0, 212),), "call unknown#212"),
    ((I(op.OP_CALL, 0, 0, 0, -1),), "call unknown#-1"),
    ((I(op.OP_CALL, 0, 1, 0, 1),), "call pc+1"),  # log
    ((I(op.OP_CALL, 0, 1, 0, -9),), "call pc-9"),
    ((I(op.OP_CALL, 0, 2, 0, 1234),), "call kernel-function#1234"),
    ((I(op.OP_CALL, 0, 2, 2, 1234),), "call kernel-function#1234[btf_fd_idx:2]"),
    ((I(op.OP_CALLX, 2),), "callx r2"),
    ((I(op.OP_EXIT),), "exit"),  # log
    # arena and per-CPU moves
    ((I(ALU64 | op.BPF_MOV | X, 1, 2, 1, 1),), "r1 = addr_space_cast(r2, 0, 1)"),
    ((I(ALU64 | op.BPF_MOV | X, 1, 2, 1, 1 << 16),), "r1 = addr_space_cast(r2, 1, 0)"),
    ((I(ALU64 | op.BPF_MOV | X, 0, 0, -1),), "r0 = &(void __percpu *)(r0)"),  # log
]


@pytest.mark.parametrize(("slots", "expected"), SPELLINGS, ids=[e for _, e in SPELLINGS])
def test_spelling(slots: tuple[I, ...], expected: str) -> None:
    assert text(*slots) == expected


@pytest.mark.parametrize("code", [
    0x0E,  # JMP32 | JA | X
    0x0D,  # JMP | JA | X
    0x86,  # JMP32 | CALL
    0x96,  # JMP32 | EXIT
    0x9D,  # JMP | EXIT | X
    0x8C, 0x8F,  # NEG with the X bit
    0xDF,  # ALU64 | END | X (there is no "bswap from big endian")
    0xE4, 0xF7,  # ALU ops 0xe0 and 0xf0 do not exist
    0xF5, 0xED,  # JMP op 0xf0; JCOND with X
    0x99,  # LDX | MEMSX | DW: no sign-extending 64-bit load
    0x21, 0xC1,  # LDX with ABS or ATOMIC mode
    0x22, 0xA2,  # ST modes other than MEM
    0x23, 0x83,  # STX modes other than MEM and ATOMIC
    0x10, 0x00,  # LD | IMM of a size other than DW
    0xFF,
])
def test_invalid_opcodes_print_without_raising(code: int) -> None:
    assert text(I(code)) == f"({code:02x}) invalid"


def test_invalid_selectors() -> None:
    assert text(I(STX_ATOMIC | op.BPF_DW, 10, 1, 0, op.BPF_SUB)) == "(db) invalid"
    assert text(I(op.OP_CALL, 0, 3, 0, 1)) == "(85) invalid: call source 3"
    assert text(*ld_imm64(1, 5, 7)) == "(18) invalid: ld_imm64 pseudo source 7"
    assert text(I(op.OP_LD_IMM64, 1)) == "(18) invalid: ld_imm64 without its second slot"


def test_kernel_only_nospec() -> None:
    # BPF_ST | 0xc0 is the kernel's own speculation barrier; disasm.c prints it.
    assert text(I(0xC2)) == "nospec"


def test_disassemble_skips_second_slot_and_prefixes_like_bpftool() -> None:
    prog = (I(ALU64 | op.BPF_MOV | K, 0, 0, 0, 0), *ld_imm64(1, 0x1122334455667788),
            I(op.OP_CALL, 0, 0, 0, 5), I(0xFF), I(op.OP_EXIT))
    assert disassemble(prog) == [
        "r0 = 0", "r1 = 0x1122334455667788 ll", "call bpf_ktime_get_ns#5",
        "(ff) invalid", "exit"]
    assert disassemble(prog, pc_prefix=True) == [
        "   0: (b7) r0 = 0",
        "   1: (18) r1 = 0x1122334455667788 ll",
        "   3: (85) call bpf_ktime_get_ns#5",
        "   4: (ff) invalid",
        "   5: (95) exit"]


def test_bpftool_dump() -> None:
    # bpftool prog dump xlated, quoted on the bpf list.
    prog = (I(ALU64 | op.BPF_MOV | K, 0, 0, 0, 0),
            I(op.BPF_STX | op.BPF_MEM | op.BPF_DW, 10, 0, -8),
            I(ALU64 | op.BPF_MOV | K, 1, 0, 0, 1),
            I(STX_ATOMIC | op.BPF_DW, 10, 1, -8, op.BPF_ADD | op.BPF_FETCH),
            I(JMP | op.BPF_JNE | K, 1, 0, -1, 0),
            I(op.OP_EXIT))
    assert disassemble(prog, pc_prefix=True) == [
        "   0: (b7) r0 = 0",
        "   1: (7b) *(u64 *)(r10 -8) = r0",
        "   2: (b7) r1 = 1",
        "   3: (db) r1 = atomic64_fetch_add((u64 *)(r10 -8), r1)",
        "   4: (55) if r1 != 0x0 goto pc-1",
        "   5: (95) exit"]


def test_truncated_ld_imm64_in_a_listing() -> None:
    assert disassemble((I(op.OP_LD_IMM64, 1, 0, 0, 5),)) == [
        "(18) invalid: ld_imm64 without its second slot"]


_ANY_SLOT = st.builds(I, st.integers(0, 255), st.integers(0, 15), st.integers(0, 15),
                      st.integers(-(1 << 15), (1 << 15) - 1),
                      st.integers(-(1 << 31), (1 << 31) - 1))


@given(st.lists(_ANY_SLOT, min_size=1, max_size=6))
def test_never_raises(slots: list[I]) -> None:
    lines = disassemble(slots, pc_prefix=True)
    assert 1 <= len(lines) <= len(slots)
    for pc in range(len(slots)):
        assert format_insn(slots, pc)


def test_helper_table() -> None:
    assert len(HELPER_NAMES) == 212
    assert helper_name(1) == "bpf_map_lookup_elem"
    assert helper_name(12) == "bpf_tail_call"
    assert helper_name(23) == "bpf_redirect"
    assert helper_name(44) == "bpf_xdp_adjust_head"
    assert helper_name(51) == "bpf_redirect_map"
    assert helper_name(65) == "bpf_xdp_adjust_tail"
    assert helper_name(69) == "bpf_fib_lookup"
    assert helper_name(130) == "bpf_ringbuf_output"
    assert helper_name(189) == "bpf_xdp_load_bytes"
    assert helper_name(211) == "bpf_cgrp_storage_delete"
    assert helper_name(212) is None and helper_name(-1) is None
    assert helper_id("bpf_ktime_get_ns") == 5 == helper_id("ktime_get_ns")
    assert helper_id("bpf_nonexistent") is None
    assert len(set(HELPER_NAMES)) == len(HELPER_NAMES)
