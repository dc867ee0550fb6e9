"""The assembler: both dialects, the conformance vectors, and the round trip.

The central property: for every valid program ``p``,
``assemble("\\n".join(disassemble(p))) == p``, with and without bpftool's
``pc: (code)`` prefixes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyxdp.asm import opcodes as op
from pyxdp.asm.assembler import assemble
from pyxdp.asm.disasm import disassemble
from pyxdp.asm.insn import Instruction as I  # short, like the kernel's BPF_* insn macros
from pyxdp.asm.insn import ld_imm64
from pyxdp.errors import AsmError
from pyxdp.testing.conformance import vector_files
from pyxdp.testing.strategies import valid_instructions, valid_programs

VECTORS = vector_files()

ALU64, ALU, JMP, JMP32 = op.BPF_ALU64, op.BPF_ALU, op.BPF_JMP, op.BPF_JMP32
K, X = op.BPF_K, op.BPF_X
STX_ATOMIC = op.BPF_STX | op.BPF_ATOMIC


def sections(path: Path) -> dict[str, str]:
    """Just enough of the .data format for these tests: ``-- name`` sections."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in path.read_text().splitlines():
        m = re.match(r"^-- (.+?)\s*$", line)
        if m:
            current = out.setdefault(m.group(1), [])
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v) for k, v in out.items()}


# ---------------------------------------------------------------------------
# Conformance vectors

def test_vector_directory_is_complete(vector_dir: Path) -> None:
    assert len(list(vector_dir.glob("*.data"))) >= 313, f"expected the 313 vectors in {vector_dir}"


@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_vector_assembles(path: Path) -> None:
    secs = sections(path)
    prog = assemble(secs["asm"])
    assert prog
    # The disassembly of every vector reassembles to the same slots.
    assert assemble("\n".join(disassemble(prog))) == prog
    if "raw" in secs:
        words = [int(w, 16) for w in secs["raw"].split()]
        assert [int.from_bytes(i.encode(), "little") for i in prog] == words


def test_lddw_raw_section(vector_dir: Path) -> None:
    path = vector_dir / "lddw.data"
    assert "raw" in sections(path)
    prog = assemble(sections(path)["asm"])
    assert prog == (I(0x18, 0, 0, 0, 0x55667788), I(0, 0, 0, 0, 0x11223344), I(0x95))


# ---------------------------------------------------------------------------
# Round trip

@settings(max_examples=400)
@given(st.lists(valid_instructions(extensions=True), max_size=24), st.booleans())
def test_round_trip_instruction_sequences(groups: list[tuple[I, ...]], prefix: bool) -> None:
    prog = tuple(s for g in groups for s in g)
    assert assemble("\n".join(disassemble(prog, pc_prefix=prefix))) == prog


@given(valid_programs())
def test_round_trip_programs(prog: tuple[I, ...]) -> None:
    assert assemble("\n".join(disassemble(prog))) == prog


@pytest.mark.parametrize("src", range(7))
def test_round_trip_every_ld_imm64_pseudo_source(src: int) -> None:
    prog = (*ld_imm64(3, 0xDEADBEEF_00000007 if src in (0, 2, 3, 6) else 7, src),
            I(op.OP_EXIT))
    assert assemble("\n".join(disassemble(prog))) == prog


# ---------------------------------------------------------------------------
# The vector dialect, instruction by instruction

VECTOR_DIALECT: list[tuple[str, tuple[I, ...]]] = [
    ("mov %r0, 1", (I(ALU64 | op.BPF_MOV | K, 0, 0, 0, 1),)),
    ("mov32 %r0, -1", (I(ALU | op.BPF_MOV | K, 0, 0, 0, -1),)),
    ("mov32 %r1, 0x80000001", (I(ALU | op.BPF_MOV | K, 1, 0, 0, -0x7FFFFFFF),)),
    ("add %r0, %r1", (I(ALU64 | op.BPF_ADD | X, 0, 1),)),
    ("add64 %r0, 3", (I(ALU64 | op.BPF_ADD | K, 0, 0, 0, 3),)),
    ("sub32 %r0, %r0", (I(ALU | op.BPF_SUB | X, 0, 0),)),
    ("sdiv32 %r1, %r2", (I(ALU | op.BPF_DIV | X, 1, 2, 1),)),
    ("sdiv %r1, -3", (I(ALU64 | op.BPF_DIV | K, 1, 0, 1, -3),)),
    ("smod %r1, %r2", (I(ALU64 | op.BPF_MOD | X, 1, 2, 1),)),
    ("smod32 %r1, 3", (I(ALU | op.BPF_MOD | K, 1, 0, 1, 3),)),
    ("arsh32 %r0, 4", (I(ALU | op.BPF_ARSH | K, 0, 0, 0, 4),)),
    ("neg %r0", (I(ALU64 | op.BPF_NEG, 0),)),
    ("neg32 %r2", (I(ALU | op.BPF_NEG, 2),)),
    ("movsx832 %r0, %r1", (I(ALU | op.BPF_MOV | X, 0, 1, 8),)),
    ("movsx1632 %r4, %r3", (I(ALU | op.BPF_MOV | X, 4, 3, 16),)),
    ("movsx864 %r6, %r5", (I(ALU64 | op.BPF_MOV | X, 6, 5, 8),)),
    ("movsx1664 %r8, %r7", (I(ALU64 | op.BPF_MOV | X, 8, 7, 16),)),
    ("movsx3264 %r0, %r9", (I(ALU64 | op.BPF_MOV | X, 0, 9, 32),)),
    ("be16 %r0", (I(0xDC, 0, 0, 0, 16),)),
    ("be64 %r0", (I(0xDC, 0, 0, 0, 64),)),
    ("le32 %r0", (I(0xD4, 0, 0, 0, 32),)),
    # swapN and bswapN are one instruction: ALU64 | END (0xd7), unconditional.
    ("bswap16 %r0", (I(0xD7, 0, 0, 0, 16),)),
    ("swap16 %r0", (I(0xD7, 0, 0, 0, 16),)),
    ("swap32 %r0", (I(0xD7, 0, 0, 0, 32),)),
    ("swap64 %r0", (I(0xD7, 0, 0, 0, 64),)),
    ("lddw %r0, 0x1122334455667788", (I(0x18, 0, 0, 0, 0x55667788), I(0, 0, 0, 0, 0x11223344))),
    ("lddw %r0, 2147483648", (I(0x18, 0, 0, 0, -(1 << 31)), I(0))),
    ("lddw %r1, -1", (I(0x18, 1, 0, 0, -1), I(0, 0, 0, 0, -1))),
    ("ldxdw %r2, [%r10-8]", (I(0x79, 2, 10, -8),)),
    ("ldxb %r0, [%r1]", (I(0x71, 0, 1),)),
    ("ldxh %r0, [%r1+0x2]", (I(0x69, 0, 1, 2),)),
    ("ldxsb %r0, [%r10-1]", (I(0x91, 0, 10, -1),)),
    ("ldxsh %r0, [%r10-2]", (I(0x89, 0, 10, -2),)),
    ("ldxsw %r0, [%r10-4]", (I(0x81, 0, 10, -4),)),
    ("stxw [%r1+4], %r2", (I(0x63, 1, 2, 4),)),
    ("stxdw [%r10-8], %r0", (I(0x7B, 10, 0, -8),)),
    ("stw [%r1+2], 0x1", (I(0x62, 1, 0, 2, 1),)),
    ("stb [%r10-1], 0x80", (I(0x72, 10, 0, -1, 0x80),)),
    ("stdw [%r10-16], -1", (I(0x7A, 10, 0, -16, -1),)),
    ("jeq %r1, 0x2, +1", (I(JMP | op.BPF_JEQ | K, 1, 0, 1, 2),)),
    ("jne32 %r1, %r0, -1", (I(JMP32 | op.BPF_JNE | X, 1, 0, -1),)),
    ("jsgt %r1, -2, +0", (I(JMP | op.BPF_JSGT | K, 1, 0, 0, -2),)),
    ("jne %r6, 0xffffff80, +0", (I(JMP | op.BPF_JNE | K, 6, 0, 0, -128),)),
    ("ja +1", (I(op.OP_JA, 0, 0, 1),)),
    ("ja32 -3", (I(op.OP_JA32, 0, 0, 0, -3),)),
    ("call 5", (I(op.OP_CALL, 0, 0, 0, 5),)),
    ("call helper 5", (I(op.OP_CALL, 0, 0, 0, 5),)),
    ("call runtime 9", (I(op.OP_CALL, 0, 2, 0, 9),)),
    ("call local +2", (I(op.OP_CALL, 0, 1, 0, 2),)),
    # callx keeps its register in dst (GCC, LLVM >= 19, bpf_conformance).
    ("call %r2", (I(op.OP_CALLX, 2),)),
    ("callx %r3", (I(op.OP_CALLX, 3),)),
    ("exit", (I(op.OP_EXIT),)),
    ("lock add [%r10-8], %r1", (I(STX_ATOMIC | op.BPF_DW, 10, 1, -8, op.BPF_ADD),)),
    ("lock add32 [%r10-4], %r1", (I(STX_ATOMIC | op.BPF_W, 10, 1, -4, op.BPF_ADD),)),
    ("lock and [%r10-8], %r1", (I(STX_ATOMIC | op.BPF_DW, 10, 1, -8, op.BPF_AND),)),
    ("lock or32 [%r10-8], %r1", (I(STX_ATOMIC | op.BPF_W, 10, 1, -8, op.BPF_OR),)),
    ("lock xor [%r10-8], %r1", (I(STX_ATOMIC | op.BPF_DW, 10, 1, -8, op.BPF_XOR),)),
    ("lock fetch add [%r10-8], %r1", (I(STX_ATOMIC | op.BPF_DW, 10, 1, -8, 0x01),)),
    ("lock fetch add32 [%r10-8], %r1", (I(STX_ATOMIC | op.BPF_W, 10, 1, -8, 0x01),)),
    ("lock fetch and [%r10-8], %r3", (I(STX_ATOMIC | op.BPF_DW, 10, 3, -8, 0x51),)),
    ("lock fetch or32 [%r10-4], %r3", (I(STX_ATOMIC | op.BPF_W, 10, 3, -4, 0x41),)),
    ("lock fetch xor [%r10-8], %r3", (I(STX_ATOMIC | op.BPF_DW, 10, 3, -8, 0xA1),)),
    ("lock xchg [%r10-8], %r1", (I(STX_ATOMIC | op.BPF_DW, 10, 1, -8, 0xE1),)),
    ("lock xchg32 [%r10-8], %r1", (I(STX_ATOMIC | op.BPF_W, 10, 1, -8, 0xE1),)),
    ("lock cmpxchg [%r10-8], %r1", (I(STX_ATOMIC | op.BPF_DW, 10, 1, -8, 0xF1),)),
    ("lock cmpxchg32 [%r10-8], %r1", (I(STX_ATOMIC | op.BPF_W, 10, 1, -8, 0xF1),)),
    ("ldabsh 12", (I(0x28, 0, 0, 0, 12),)),
    ("ldindw %r7, 4", (I(0x40, 0, 7, 0, 4),)),
]


@pytest.mark.parametrize(("line", "slots"), VECTOR_DIALECT, ids=[t for t, _ in VECTOR_DIALECT])
def test_vector_dialect(line: str, slots: tuple[I, ...]) -> None:
    assert assemble(line) == slots


# ---------------------------------------------------------------------------
# The kernel dialect: every family, including input the disassembler never
# prints but tools around it do (bpftool prefixes, llvm-objdump spacing).

KERNEL_DIALECT: list[tuple[str, tuple[I, ...]]] = [
    ("r0 = 1", (I(0xB7, 0, 0, 0, 1),)),
    ("w0 = 0xffffffff", (I(0xB4, 0, 0, 0, -1),)),
    ("r1 s%= r2", (I(ALU64 | op.BPF_MOD | X, 1, 2, 1),)),
    ("w1 s/= 3", (I(ALU | op.BPF_DIV | K, 1, 0, 1, 3),)),
    ("r0 = -r0", (I(0x87, 0),)),
    ("w0 = (s16)w1", (I(0xBC, 0, 1, 16),)),
    ("r0 = bswap64 r0", (I(0xD7, 0, 0, 0, 64),)),
    ("r0 = be16 r0", (I(0xDC, 0, 0, 0, 16),)),
    ("if r1 > 0x2 goto pc+3", (I(0x25, 1, 0, 3, 2),)),
    ("if w1 s< w2 goto pc-1", (I(0xCE, 1, 2, -1),)),
    ("if r1 != 0xffffffff goto pc+0", (I(0x55, 1, 0, 0, -1),)),
    ("goto pc+5", (I(0x05, 0, 0, 5),)),
    ("gotol pc+70000", (I(0x06, 0, 0, 0, 70000),)),
    ("may_goto pc+2", (I(0xE5, 0, 0, 2),)),
    ("*(u64 *)(r10 -8) = r1", (I(0x7B, 10, 1, -8),)),
    ("*(u32 *)(r1 +4) = 7", (I(0x62, 1, 0, 4, 7),)),
    ("r0 = *(u32 *)(r1 +0)", (I(0x61, 0, 1),)),
    ("r0 = *(s8 *)(r10 -1)", (I(0x91, 0, 10, -1),)),
    ("lock *(u64 *)(r10 -8) += r1", (I(0xDB, 10, 1, -8, 0x00),)),
    ("r1 = atomic64_fetch_add((u64 *)(r10 -8), r1)", (I(0xDB, 10, 1, -8, 0x01),)),
    ("r1 = atomic64_xchg((u64 *)(r10 -8), r1)", (I(0xDB, 10, 1, -8, 0xE1),)),
    ("r0 = atomic64_cmpxchg((u64 *)(r10 -8), r0, r1)", (I(0xDB, 10, 1, -8, 0xF1),)),
    ("r1 = atomic_fetch_or((u32 *)(r10 -8), r1)", (I(0xC3, 10, 1, -8, 0x41),)),
    # llvm-objdump writes the 32-bit forms with w registers and spaced offsets.
    ("w1 = atomic_fetch_or((u32 *)(r10 - 8), w1)", (I(0xC3, 10, 1, -8, 0x41),)),
    ("lock *(u32 *)(r1 + 0) += w2", (I(0xC3, 1, 2, 0, 0x00),)),
    ("*(u32 *)(r10 - 4) = w1", (I(0x63, 10, 1, -4),)),
    ("if r1 == 0 goto +5", (I(0x15, 1, 0, 5, 0),)),
    ("r1 = 0x1122334455667788 ll", ld_imm64(1, 0x1122334455667788)),
    ("r1 = -1 ll", ld_imm64(1, -1)),
    ("r1 = map[id:5]", ld_imm64(1, 5, 1)),
    ("r1 = map[fd:3]", ld_imm64(1, 3, 1)),
    ("r1 = map[fd:3][0]+16", ld_imm64(1, 3 | (16 << 32), 2)),
    ("r1 = map[idx:2]", ld_imm64(1, 2, 5)),
    ("r1 = map[idx:2]+8", ld_imm64(1, 2 | (8 << 32), 6)),
    ("r1 = subprog[+5]", ld_imm64(1, 5, 4)),
    ("r1 = btf_id[99]", ld_imm64(1, 99, 3)),
    ("r1 = btf_id[99][btf_fd:4]", ld_imm64(1, 99 | (4 << 32), 3)),
    ("call bpf_map_lookup_elem#1", (I(0x85, 0, 0, 0, 1),)),
    ("call bpf_map_lookup_elem", (I(0x85, 0, 0, 0, 1),)),
    ("call unknown#300", (I(0x85, 0, 0, 0, 300),)),
    ("call pc+3", (I(0x85, 0, 1, 0, 3),)),
    ("call kernel-function#77", (I(0x85, 0, 2, 0, 77),)),
    ("call kernel-function#77[btf_fd_idx:1]", (I(0x85, 0, 2, 1, 77),)),
    ("callx r2", (I(0x8D, 2),)),
    ("exit", (I(0x95),)),
    ("r1 = load_acquire((u16 *)(r2 -4))", (I(0xCB, 1, 2, -4, 0x100),)),
    ("store_release((u8 *)(r2 +1), r3)", (I(0xD3, 2, 3, 1, 0x110),)),
    # LLVM's spellings (BPFInstrInfo.td): w registers below 64 bits
    ("w0 = load_acquire((u8 *)(r1 + 0))", (I(0xD3, 0, 1, 0, 0x100),)),
    ("r0 = load_acquire((u64 *)(r1 + 0))", (I(0xDB, 0, 1, 0, 0x100),)),
    ("store_release((u32 *)(r1 - 8), w2)", (I(0xC3, 1, 2, -8, 0x110),)),
    ("store_release((u64 *)(r1 + 8), r2)", (I(0xDB, 1, 2, 8, 0x110),)),
    ("r0 = *(u8 *)skb[23]", (I(0x30, 0, 0, 0, 23),)),
    ("r0 = *(u16 *)skb[r6 + 2]", (I(0x48, 0, 6, 0, 2),)),
    ("r3 = addr_space_cast(r4, 1, 0)", (I(0xBF, 3, 4, 1, 1 << 16),)),
    # bpftool and verifier-log lines keep their prefix and annotations.
    ("   3: (db) r1 = atomic64_fetch_add((u64 *)(r10 -8), r1)", (I(0xDB, 10, 1, -8, 1),)),
    ("3: (bf) r0 = (s8)r0                   ; R0_w=scalar(smin=-2)", (I(0xBF, 0, 0, 8),)),
    ("0: (85) call bpf_get_prandom_u32#7    ; R0_w=scalar()", (I(0x85, 0, 0, 0, 7),)),
    # bpftool prints ld_imm64 without "ll": the (18) prefix says what it is.
    ("1: (18) r2 = 0x100000000000", ld_imm64(2, 0x100000000000)),
]


@pytest.mark.parametrize(("line", "slots"), KERNEL_DIALECT, ids=[t for t, _ in KERNEL_DIALECT])
def test_kernel_dialect(line: str, slots: tuple[I, ...]) -> None:
    assert assemble(line) == slots


def test_bpftool_dump_reassembles() -> None:
    dump = [
        "   0: (b7) r0 = 0",
        "   1: (7b) *(u64 *)(r10 -8) = r0",
        "   2: (b7) r1 = 1",
        "   3: (db) r1 = atomic64_fetch_add((u64 *)(r10 -8), r1)",
        "   4: (55) if r1 != 0x0 goto pc-1",
        "   5: (95) exit",
    ]
    prog = assemble("\n".join(dump))
    assert len(prog) == 6
    assert disassemble(prog, pc_prefix=True) == dump


def test_dialects_mix() -> None:
    text = """
        mov %r1, 2          # vector dialect
        r2 = 3              // kernel dialect
        add %r1, %r2
        if r1 == 0x5 goto ok
        mov %r0, 0
        exit
    ok:
        r0 = 1
        exit
    """
    prog = assemble(text)
    assert prog[3] == I(0x15, 1, 0, 2, 5)
    assert disassemble(prog)[3] == "if r1 == 0x5 goto pc+2"


# ---------------------------------------------------------------------------
# Labels and the special "exit" target

def test_labels_forward_and_backward() -> None:
    prog = assemble("""
        mov %r1, 0
        ja L2
    L1:
        mov %r2, 0
        exit
    L2:
        mov %r0, 0
        ja L1
    """)
    assert prog[1] == I(op.OP_JA, 0, 0, 2)
    assert prog[5] == I(op.OP_JA, 0, 0, -4)


def test_labels_count_ld_imm64_as_two_slots() -> None:
    prog = assemble("ja end\nlddw %r0, 1\nend:\nexit")
    assert prog[0] == I(op.OP_JA, 0, 0, 2)


def test_ja32_and_local_call_targets_go_in_imm() -> None:
    prog = assemble("ja32 t\ncall local f\nt:\nexit\nf:\nexit")
    assert prog[0] == I(op.OP_JA32, 0, 0, 0, 1)
    assert prog[1] == I(op.OP_CALL, 0, 1, 0, 1)


def test_kernel_dialect_labels() -> None:
    prog = assemble("""
        call sub
        if r0 > 2 goto done
        goto done
    done:
        exit
    sub:
        r0 = 7
        exit
    """)
    assert prog[0] == I(op.OP_CALL, 0, 1, 0, 3)
    assert prog[1] == I(0x25, 0, 0, 1, 2)
    assert prog[2] == I(op.OP_JA, 0, 0, 0)


def test_exit_target_is_the_first_exit_instruction() -> None:
    # bpf_conformance: with no "exit:" label, "exit" names the first exit.
    prog = assemble("jne %r0, 1, exit\nmov %r0, 2\nexit\nmov %r0, 3\nexit")
    assert prog[0].off == 1


def test_exit_label_wins_over_the_exit_instruction() -> None:
    prog = assemble("ja exit\nexit\nexit:\nmov %r0, 1\nexit")
    assert prog[0].off == 1


def test_exit_target_without_exit_instruction() -> None:
    with pytest.raises(AsmError, match="undefined label 'exit'"):
        assemble("ja exit\nmov %r0, 0")


def test_comments() -> None:
    prog = assemble("""
        # a whole-line comment
        mov %r0, 1 # trailing
        r0 += 1 // trailing
        r0 += 1 ; bpftool source annotation
        call bpf_ktime_get_ns#5   # "#" after a name is the helper id, not a comment
        exit
    """)
    assert prog[-2] == I(op.OP_CALL, 0, 0, 0, 5)
    assert len(prog) == 5


# ---------------------------------------------------------------------------
# Errors name the line

BAD_LINES = [
    ("frobnicate %r0", "unknown instruction"),
    ("mov %r16, 1", "unknown register"),
    ("mov %rax, 1", "unknown register"),
    ("r11x = 1", "unknown instruction"),
    ("mov %r0", "takes 2 operands"),
    ("mov %r0, 0x100000000", "does not fit in 32 bits"),
    ("mov %r0, -0x80000001", "does not fit in 32 bits"),
    ("lddw %r0, 0x10000000000000000", "does not fit in 64 bits"),
    ("ldxw %r0, [%r1+40000]", "does not fit in 16 signed bits"),
    ("goto pc+40000", "does not fit in 16 signed bits"),
    ("ja nowhere", "undefined label 'nowhere'"),
    ("r1 = 0x1122334455667788", "`ll`"),
    ("w1 = 1 ll", "64-bit load targets an r register"),
    ("r1 = w2", "both registers"),
    ("if r1 > w2 goto pc+1", "both registers"),
    ("r1 = -r2", "in place"),
    ("r0 = be17 r0", "not 16, 32 or 64"),
    ("lock *(u64 *)(r1 +0) -= r2", "no atomic subtract"),
    ("r0 = atomic_fetch_add((u64 *)(r1 +0), r0)", "atomic64_"),
    ("r1 = atomic64_cmpxchg((u64 *)(r10 -8), r0, r1)", "r0 = atomic_cmpxchg"),
    ("w0 = load_acquire((u64 *)(r1 + 0))", "takes an r register"),
    ("store_release((u64 *)(r1 + 0), w2)", "takes an r register"),
    ("call bpf_foo#1", "helper #1 is bpf_map_lookup_elem"),
    ("call what ever", "bad call target"),
    ("(b7) r0 = r1", "opcode prefix (b7) does not match"),
    ("ldxsdw %r0, [%r1]", "no sign-extending 64-bit load"),
    ("stxw %r1, %r2", "bad memory operand"),
    ("lock sub [%r10-8], %r1", "unknown atomic operation"),
    ("r1 = map[fd:3]+16", "map[fd:N][0]+OFF"),
    ("*(u64 *)(w1 +0) = r1", "must be a 64-bit register"),
    ("r0 = (u7)r1", "cannot parse"),
    ("0: R1=ctx() R10=fp0", "unknown instruction"),
    ("(invalid) %%%", "unknown instruction"),
]


@pytest.mark.parametrize(("line", "message"), BAD_LINES, ids=[t for t, _ in BAD_LINES])
def test_bad_line_raises_asm_error_naming_it(line: str, message: str) -> None:
    text = f"mov %r0, 0\n\n{line}\nexit"
    with pytest.raises(AsmError) as info:
        assemble(text)
    assert info.value.line == 3
    assert info.value.text == line
    assert message in str(info.value)
    assert "line 3" in str(info.value)


def test_duplicate_label() -> None:
    with pytest.raises(AsmError, match="defined twice") as info:
        assemble("L:\nexit\nL:\nexit")
    assert info.value.line == 3


def test_invalid_text_from_the_disassembler_does_not_assemble() -> None:
    (line,) = disassemble((I(0xFF),))
    with pytest.raises(AsmError):
        assemble(line)


@given(st.text(max_size=40))
def test_garbage_raises_only_asm_error(garbage: str) -> None:
    try:
        assemble(garbage)
    except AsmError:
        pass


def test_validate_reuses_the_layout_of_the_same_program() -> None:
    from pyxdp.asm.macros import exit_insn, mov64_imm
    from pyxdp.asm.validate import validate
    from pyxdp.errors import InvalidProgram

    prog = (mov64_imm(0, 1), exit_insn())
    first = validate(prog)
    assert validate(prog) is first and validate(list(prog)) == first
    assert validate(prog, max_insns=2) is not first
    bad = (mov64_imm(0, 1),)  # falls off the end
    for _ in range(2):
        with pytest.raises(InvalidProgram):
            validate(bad)


@pytest.mark.parametrize("size", [op.BPF_B, op.BPF_H, op.BPF_W, op.BPF_DW])
def test_load_acquire_and_store_release_take_every_size(size: int) -> None:
    from pyxdp.asm.validate import validate

    code = op.BPF_STX | op.BPF_ATOMIC | size
    validate((I(code, 0, 10, -8, op.BPF_LOAD_ACQ), I(op.OP_EXIT)))
    validate((I(code, 10, 10, -8, op.BPF_STORE_REL), I(op.OP_EXIT)))  # stores fp itself


@pytest.mark.parametrize(("insn", "rule"), [
    (I(0xDB, 10, 1, -8, op.BPF_LOAD_ACQ), "register"),  # loads into r10
    (I(0xD3, 10, 1, -8, op.BPF_ADD), "atomic-size"),  # read-modify-write of a byte
    (I(0xDB, 10, 1, -8, op.BPF_LOAD_ACQ | op.BPF_FETCH), "atomic-op"),
    (I(0xDB, 10, 1, -8, 0x120), "atomic-op"),
])
def test_validate_refuses_bad_atomics(insn: I, rule: str) -> None:
    from pyxdp.asm.validate import validate
    from pyxdp.errors import InvalidProgram

    with pytest.raises(InvalidProgram) as e:
        validate((insn, I(op.OP_EXIT)))
    assert e.value.rule == rule
