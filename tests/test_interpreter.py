"""The reference interpreter: edge cases of the ISA and the memory/budget rules."""

from __future__ import annotations

import pytest

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.asm.macros import (
    alu32_imm,
    alu32_reg,
    alu64_imm,
    alu64_reg,
    atomic_op,
    call_helper,
    call_local,
    endian,
    exit_insn,
    ja,
    jmp32_imm,
    jmp_imm,
    ld_imm64,
    ldx_mem,
    ldx_memsx,
    mov64_imm,
    mov64_reg,
    st_mem,
    stx_mem,
)
from pyxdp.errors import BudgetExceeded, InvalidProgram, MemoryFault, NotSupportedError
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.memory import Region

M64 = (1 << 64) - 1
INT64_MIN = 1 << 63


def run(*insns: Instruction, **kw: object) -> int:
    return Interpreter(list(insns)).run(**kw)  # type: ignore[arg-type]


def r0_after(*body: Instruction) -> int:
    return run(*body, exit_insn())


def test_64bit_wraps() -> None:
    assert r0_after(*ld_imm64(0, M64), alu64_imm(op.BPF_ADD, 0, 1)) == 0
    assert r0_after(mov64_imm(0, 0), alu64_imm(op.BPF_SUB, 0, 1)) == M64


def test_32bit_ops_zero_extend() -> None:
    assert r0_after(*ld_imm64(0, M64), alu32_imm(op.BPF_ADD, 0, 1)) == 0
    big = 0xAAAA_BBBB_0000_0001
    assert r0_after(*ld_imm64(0, big), alu32_imm(op.BPF_MOV, 0, -1)) == 0xFFFF_FFFF


def test_mov64_imm_sign_extends() -> None:
    assert r0_after(mov64_imm(0, -1)) == M64


@pytest.mark.parametrize(("cls_op", "amount", "expect"), [
    (op.BPF_LSH, 65, 2), (op.BPF_RSH, 64, 1), (op.BPF_ARSH, 127, M64),
])
def test_shift_amount_masked_64(cls_op: int, amount: int, expect: int) -> None:
    start = 1 if cls_op != op.BPF_ARSH else INT64_MIN
    assert r0_after(*ld_imm64(0, start), mov64_imm(1, amount), alu64_reg(cls_op, 0, 1)) == expect


def test_shift_amount_masked_32() -> None:
    assert r0_after(mov64_imm(0, 1), mov64_imm(1, 33), alu32_reg(op.BPF_LSH, 0, 1)) == 2


def test_division_by_zero_gives_zero() -> None:
    assert r0_after(mov64_imm(0, 7), mov64_imm(1, 0), alu64_reg(op.BPF_DIV, 0, 1)) == 0
    assert r0_after(mov64_imm(0, 7), mov64_imm(1, 0), alu32_reg(op.BPF_DIV, 0, 1)) == 0
    assert r0_after(mov64_imm(0, 7), mov64_imm(1, 0), alu64_reg(op.BPF_DIV, 0, 1, off=1)) == 0


def test_modulo_by_zero_leaves_dst_truncated_for_32bit() -> None:
    big = 0x1234_5678_9ABC_DEF0
    assert r0_after(*ld_imm64(0, big), mov64_imm(1, 0), alu64_reg(op.BPF_MOD, 0, 1)) == big
    assert r0_after(*ld_imm64(0, big), mov64_imm(1, 0), alu32_reg(op.BPF_MOD, 0, 1)) == 0x9ABC_DEF0
    assert r0_after(*ld_imm64(0, big), mov64_imm(1, 0),
                    alu32_reg(op.BPF_MOD, 0, 1, off=1)) == 0x9ABC_DEF0


def test_mod32_by_register_uses_low_32_bits_of_divisor() -> None:
    # Divisor 0x1_0000_0000 is zero in 32 bits.
    assert r0_after(mov64_imm(0, 9), *ld_imm64(1, 1 << 32), alu32_reg(op.BPF_MOD, 0, 1)) == 9


def test_signed_division_int_min_by_minus_one() -> None:
    assert r0_after(*ld_imm64(0, INT64_MIN), alu64_imm(op.BPF_DIV, 0, -1, off=1)) == INT64_MIN
    assert r0_after(*ld_imm64(0, INT64_MIN), alu64_imm(op.BPF_MOD, 0, -1, off=1)) == 0
    assert r0_after(mov64_imm(0, -(2**31)), alu32_imm(op.BPF_DIV, 0, -1, off=1)) == 0x8000_0000
    assert r0_after(mov64_imm(0, -(2**31)), alu32_imm(op.BPF_MOD, 0, -1, off=1)) == 0


def test_signed_division_truncates_toward_zero() -> None:
    assert r0_after(mov64_imm(0, -7), alu64_imm(op.BPF_DIV, 0, 2, off=1)) == (-3) & M64
    assert r0_after(mov64_imm(0, -7), alu64_imm(op.BPF_MOD, 0, 2, off=1)) == (-1) & M64
    assert r0_after(mov64_imm(0, 7), alu64_imm(op.BPF_MOD, 0, -2, off=1)) == 1


def test_unsigned_div_imm_is_sign_extended_for_alu64() -> None:
    # imm -1 is 0xffff_ffff_ffff_ffff as a 64-bit divisor.
    assert r0_after(*ld_imm64(0, M64), alu64_imm(op.BPF_DIV, 0, -1)) == 1
    assert r0_after(mov64_imm(0, -1), alu32_imm(op.BPF_DIV, 0, -1)) == 1


def test_movsx_and_byte_swaps() -> None:
    assert r0_after(mov64_imm(1, 0x80), alu64_reg(op.BPF_MOV, 0, 1, off=8)) == M64 - 0x7F
    assert r0_after(mov64_imm(1, 0x8000), alu32_reg(op.BPF_MOV, 0, 1, off=16)) == 0xFFFF_8000
    assert r0_after(*ld_imm64(0, 0x1122_3344_5566_7788),
                    endian(op.BPF_ALU, op.BPF_TO_BE, 0, 16)) == 0x8877
    assert r0_after(*ld_imm64(0, 0x1122_3344_5566_7788),
                    endian(op.BPF_ALU, op.BPF_TO_LE, 0, 32)) == 0x5566_7788
    assert r0_after(*ld_imm64(0, 0x1122_3344_5566_7788),
                    endian(op.BPF_ALU64, op.BPF_TO_LE, 0, 64)) == 0x8877_6655_4433_2211


def test_jmp32_compares_low_half_signed() -> None:
    prog = [*ld_imm64(1, 0x0000_0001_FFFF_FFFF), mov64_imm(0, 0),
            jmp32_imm(op.BPF_JSLT, 1, 0, 1), exit_insn(), mov64_imm(0, 1), exit_insn()]
    assert run(*prog) == 1


def test_stack_load_store_and_sign_extending_load() -> None:
    assert r0_after(st_mem(1, 10, -1, 0xFE), ldx_memsx(1, 0, 10, -1)) == M64 - 1
    assert r0_after(st_mem(8, 10, -8, -2), ldx_mem(4, 0, 10, -4)) == 0xFFFF_FFFF


def test_atomics_fetch_and_cmpxchg() -> None:
    prog = [st_mem(8, 10, -8, 5), mov64_imm(1, 3),
            atomic_op(8, op.BPF_ADD | op.BPF_FETCH, 10, 1, -8),  # r1 = 5, mem = 8
            mov64_imm(0, 8), mov64_imm(2, 42),
            atomic_op(8, op.BPF_CMPXCHG, 10, 2, -8),  # mem == r0 -> mem = 42, r0 = 8
            ldx_mem(8, 3, 10, -8), alu64_reg(op.BPF_ADD, 0, 3), alu64_reg(op.BPF_ADD, 0, 1),
            exit_insn()]
    assert run(*prog) == 8 + 42 + 5


def test_out_of_bounds_names_pc_address_and_region() -> None:
    with pytest.raises(MemoryFault) as e:
        r0_after(ldx_mem(8, 0, 10, 0))
    assert e.value.pc == 0
    assert e.value.size == 8
    assert "stack frame 0" in str(e.value) and "past the end" in str(e.value)


def test_region_is_checked_and_read_only_respected() -> None:
    mem = Region("packet", 0x1000, bytearray(b"\x01\x02\x03\x04"), writable=False)
    assert Interpreter([ldx_mem(2, 0, 1, 2), exit_insn()]).run(0x1000, regions=[mem]) == 0x0403
    with pytest.raises(MemoryFault, match="read-only"):
        Interpreter([st_mem(1, 1, 0, 9), exit_insn()]).run(0x1000, regions=[mem])
    with pytest.raises(MemoryFault, match="crosses the end"):
        Interpreter([ldx_mem(4, 0, 1, 2), exit_insn()]).run(0x1000, regions=[mem])


def test_budget() -> None:
    vm = Interpreter([ja(-1)], budget=1000)
    with pytest.raises(BudgetExceeded):
        vm.run()
    assert vm.executed == 1000


def test_bpf_to_bpf_call_saves_callee_saved_and_gets_its_own_stack() -> None:
    prog = [mov64_imm(6, 6), st_mem(8, 10, -8, 11), call_local(3),
            ldx_mem(8, 1, 10, -8), alu64_reg(op.BPF_ADD, 0, 1), exit_insn(),
            # callee: scribbles r6 and its own stack slot, returns 100 + r10 distinctness
            mov64_imm(6, 0), st_mem(8, 10, -8, 99), mov64_imm(0, 100), exit_insn()]
    assert run(*prog) == 111


def test_recursion_and_call_depth_rejected() -> None:
    with pytest.raises(InvalidProgram, match="recursive"):
        Interpreter([call_local(-1), exit_insn()])
    # main -> f1 -> ... -> f8 is 9 frames.
    chain: list[Instruction] = []
    for _ in range(9):
        chain += [call_local(1), exit_insn()]
    chain[-2] = mov64_imm(0, 0)
    with pytest.raises(InvalidProgram, match="call depth"):
        Interpreter(chain)


def test_unknown_helper_fails_at_load_with_its_name() -> None:
    with pytest.raises(NotSupportedError, match="helper"):
        Interpreter([call_helper(1), exit_insn()])


def test_r10_is_read_only_and_fallthrough_rejected() -> None:
    with pytest.raises(InvalidProgram, match="r10"):
        Interpreter([mov64_reg(10, 1), exit_insn()])
    with pytest.raises(InvalidProgram, match="falls through"):
        Interpreter([mov64_imm(0, 1)])
    with pytest.raises(InvalidProgram, match="outside the program"):
        Interpreter([jmp_imm(op.BPF_JEQ, 0, 0, 5), exit_insn()])
    with pytest.raises(InvalidProgram, match="ld_imm64"):
        Interpreter([ja(1), *ld_imm64(0, 1), exit_insn()])


def test_ld_abs_rejected_with_reason() -> None:
    with pytest.raises(InvalidProgram, match="LD_ABS"):
        Interpreter([Instruction(op.BPF_LD | op.BPF_ABS | op.BPF_W, 0, 0, 0, 0), exit_insn()])


def test_stx_then_ldx_all_widths() -> None:
    prog = [*ld_imm64(1, 0x1122_3344_5566_7788), stx_mem(8, 10, 1, -8),
            ldx_mem(1, 0, 10, -8), ldx_mem(2, 2, 10, -8), alu64_reg(op.BPF_ADD, 0, 2),
            exit_insn()]
    assert run(*prog) == 0x88 + 0x7788
