"""Programs no verifier would accept, run natively: each must stop with the interpreter's
fault (same type, pc, message and executed count) and leave this process alive.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("llvmlite")

from pyxdp.asm import opcodes as op  # noqa: E402
from pyxdp.asm.insn import Instruction, ld_imm64  # noqa: E402
from pyxdp.asm.macros import (  # noqa: E402
    alu32_imm,
    alu32_reg,
    alu64_imm,
    alu64_reg,
    atomic_op,
    call_local,
    exit_insn,
    ja,
    ldx_mem,
    mov64_imm,
    mov64_reg,
    st_mem,
    stx_mem,
)
from pyxdp.errors import BudgetExceeded, HelperFault, InvalidProgram, MemoryFault, ProgramFault  # noqa: E402
from pyxdp.testing.conformance import MEM_BASE  # noqa: E402
from pyxdp.vm.interpreter import FUNC_BASE, Interpreter  # noqa: E402
from pyxdp.vm.jit import JitProgram  # noqa: E402
from pyxdp.vm.memory import STACK_BASE, STACK_FRAME_GAP, Region  # noqa: E402

M64 = (1 << 64) - 1
INT64_MIN = 1 << 63

Outcome = tuple[int | None, bytes, tuple[str, int | None, str] | None, int]


def outcome(vm: Interpreter | JitProgram, buf: bytes, writable: bool, **kw: Any) -> Outcome:
    mem = bytearray(buf)
    regions = [Region("packet", MEM_BASE, mem, writable)]
    try:
        r0: int | None = vm.run(MEM_BASE, len(buf), regions=regions, **kw)
        fault = None
    except ProgramFault as e:
        r0, fault = None, (type(e).__name__, e.pc, str(e))
    return r0, bytes(mem), fault, vm.executed


def both(insns: list[Instruction], buf: bytes = bytes(range(16)), writable: bool = True,
         **kw: Any) -> Outcome:
    try:
        interp = Interpreter(insns)
    except InvalidProgram as e:  # refused at load: the JIT must refuse it the same way
        with pytest.raises(InvalidProgram) as j:
            JitProgram(insns)
        assert str(j.value) == str(e)
        return (None, b"", ("InvalidProgram", e.pc, str(e)), 0)
    want = outcome(interp, buf, writable, **kw)
    got = outcome(JitProgram(insns), buf, writable, **kw)
    assert got == want
    return got


def fault_of(insns: list[Instruction], **kw: Any) -> tuple[str, int | None, str]:
    fault = both(insns, **kw)[2]
    assert fault is not None, "expected the program to fault"
    return fault


# -- wild memory ---------------------------------------------------------------------

@pytest.mark.parametrize("addr", [0, 8, MEM_BASE - 1, MEM_BASE + 13, MEM_BASE + 16, M64 - 3,
                                  STACK_BASE - 8, STACK_BASE + STACK_FRAME_GAP,
                                  FUNC_BASE, 0x7F00_0000_0000,
                                  # a live heap address (its id fixed: xdist
                                  # workers must collect the same names)
                                  pytest.param(id(object()), id="heap")])
@pytest.mark.parametrize("size", [1, 4, 8])
def test_wild_loads_and_stores(addr: int, size: int) -> None:
    for prog in ([*ld_imm64(1, addr), ldx_mem(size, 0, 1, 0), exit_insn()],
                 [*ld_imm64(1, addr), st_mem(size, 1, 0, 0x5A), exit_insn()],
                 [*ld_imm64(1, addr), mov64_imm(2, -1), stx_mem(size, 1, 2, 0), exit_insn()]):
        r0, _, fault, _ = both(prog)
        inside = MEM_BASE <= addr and addr + size <= MEM_BASE + 16
        assert (fault is None) == inside
        if fault is not None:
            assert fault[0] == "MemoryFault" and fault[1] == len(prog) - 2


def test_pointer_arithmetic_past_the_region() -> None:
    name, pc, msg = fault_of([mov64_reg(3, 1), alu64_reg(op.BPF_ADD, 3, 2),
                              ldx_mem(1, 0, 3, 0), exit_insn()])
    assert (name, pc) == ("MemoryFault", 2) and "0 bytes past the end of packet" in msg
    name, pc, msg = fault_of([ldx_mem(8, 0, 1, 12), exit_insn()])
    assert "crosses the end of packet" in msg
    name, pc, msg = fault_of([ldx_mem(1, 0, 1, -1), exit_insn()])
    assert "1 bytes before packet" in msg


def test_address_wraps_around_64_bits() -> None:
    both([*ld_imm64(1, M64), ldx_mem(8, 0, 1, 0), exit_insn()])
    both([*ld_imm64(1, M64 - 7), ldx_mem(1, 0, 1, 9), exit_insn()])
    # base + off wraps past 2**64 onto a region at address 0: legal for both engines.
    low = bytearray(b"\x11\x22\x33\x44")
    prog = [*ld_imm64(1, M64 - 7), ldx_mem(1, 0, 1, 10), exit_insn()]
    want = Interpreter(prog).run(regions=[Region("low", 0, bytearray(low))])
    assert JitProgram(prog).run(regions=[Region("low", 0, low)]) == want == 0x33


def test_stack_underflow_overflow_and_other_frames() -> None:
    assert "stack frame 0" in fault_of([ldx_mem(8, 0, 10, -520), exit_insn()])[2]
    assert "past the end" in fault_of([st_mem(4, 10, 0, 1), exit_insn()])[2]
    assert both([ldx_mem(8, 0, 10, -512), exit_insn()])[0] == 0
    # A frame that was never created is no memory, even if its address is.
    fault_of([mov64_reg(1, 10), alu64_imm(op.BPF_ADD, 1, STACK_FRAME_GAP),
              ldx_mem(8, 0, 1, -8), exit_insn()])
    # The callee reaches back into its caller's frame by address arithmetic: allowed.
    prog = [st_mem(8, 10, -8, 77), call_local(1), exit_insn(),
            mov64_reg(1, 10), alu64_imm(op.BPF_SUB, 1, STACK_FRAME_GAP),
            ldx_mem(8, 0, 1, -8), exit_insn()]
    assert both(prog)[0] == 77


def test_writes_to_read_only_memory() -> None:
    for prog in ([st_mem(1, 1, 0, 1), exit_insn()],
                 [stx_mem(8, 1, 1, 8), exit_insn()],
                 [mov64_imm(2, 1), atomic_op(4, op.BPF_ADD, 1, 2, 4), exit_insn()],
                 [mov64_imm(2, 1), atomic_op(8, op.BPF_XCHG, 1, 2, 0), exit_insn()]):
        name, pc, msg = fault_of(prog, writable=False)
        assert name == "MemoryFault" and "read-only packet" in msg
    # cmpxchg writes only on a match: a mismatch on read-only memory is a plain read.
    buf = (5).to_bytes(8, "little") + bytes(8)
    assert both([mov64_imm(0, 4), mov64_imm(2, 9), atomic_op(8, op.BPF_CMPXCHG, 1, 2, 0),
                 exit_insn()], buf=buf, writable=False)[0] == 5
    assert "read-only" in fault_of([mov64_imm(0, 5), mov64_imm(2, 9),
                                    atomic_op(8, op.BPF_CMPXCHG, 1, 2, 0), exit_insn()],
                                   buf=buf, writable=False)[2]


def test_unaligned_atomics_are_emulated() -> None:
    for size in (4, 8):
        for kind in op.ATOMIC_OP_NAMES:
            r0, mem, fault, _ = both([mov64_imm(0, 0x0504), *ld_imm64(2, 0x1122_3344_5566_7788),
                                      atomic_op(size, kind, 1, 2, 1),
                                      alu64_reg(op.BPF_ADD, 0, 2), exit_insn()])
            assert fault is None


# -- arithmetic hazards -----------------------------------------------------------------

@pytest.mark.parametrize("signed", [0, 1])
@pytest.mark.parametrize("divisor", [0, -1, 1, 7, -7, 1 << 32])
def test_division_hazards(signed: int, divisor: int) -> None:
    for dividend in (INT64_MIN, (1 << 31), -(1 << 31) & M64, 12345, M64):
        for code_op in (op.BPF_DIV, op.BPF_MOD):
            for cls in (op.BPF_ALU64, op.BPF_ALU):
                reg = [*ld_imm64(0, dividend), *ld_imm64(1, divisor),
                       Instruction(cls | code_op | op.BPF_X, 0, 1, signed, 0), exit_insn()]
                assert both(reg)[2] is None
                if -(1 << 31) <= divisor < (1 << 31):
                    imm = [*ld_imm64(0, dividend),
                           Instruction(cls | code_op | op.BPF_K, 0, 0, signed, divisor),
                           exit_insn()]
                    assert both(imm)[2] is None


def test_huge_and_negative_shift_amounts() -> None:
    for amount in (0, 31, 32, 63, 64, 65, 127, 255, M64, INT64_MIN):
        for code_op in (op.BPF_LSH, op.BPF_RSH, op.BPF_ARSH):
            both([*ld_imm64(0, 0x8000_0001_8000_0001), *ld_imm64(1, amount),
                  alu64_reg(code_op, 0, 1), exit_insn()])
            both([*ld_imm64(0, 0x8000_0001_8000_0001), *ld_imm64(1, amount),
                  alu32_reg(code_op, 0, 1), exit_insn()])
        both([mov64_imm(0, -5), alu64_imm(op.BPF_ARSH, 0, 200), exit_insn()])
        both([mov64_imm(0, -5), alu32_imm(op.BPF_LSH, 0, -1), exit_insn()])


# -- control -------------------------------------------------------------------------

def test_infinite_loops_hit_the_budget() -> None:
    assert fault_of([ja(-1)], budget=10_000)[0] == "BudgetExceeded"
    assert fault_of([mov64_imm(0, 0), alu64_imm(op.BPF_ADD, 0, 1), ja(-2), exit_insn()],
                    budget=100_001)[:2] == ("BudgetExceeded", 1)
    with pytest.raises(BudgetExceeded):
        JitProgram([ja(-1)]).run(budget=(1 << 40) // (1 << 20))


def test_budget_zero_and_negative() -> None:
    assert fault_of([exit_insn()], budget=0)[:2] == ("BudgetExceeded", 0)
    assert fault_of([exit_insn()], budget=-5)[:2] == ("BudgetExceeded", 0)


def test_deep_call_chain_and_loops_inside_callees() -> None:
    chain: list[Instruction] = []
    for _ in range(7):
        chain += [call_local(1), exit_insn()]
    chain += [ja(-1)]
    assert fault_of(chain, budget=5000)[0] == "BudgetExceeded"


def test_callx_to_garbage() -> None:
    for target in (0, 1, 4, 999, 1 << 20, M64, FUNC_BASE):
        name, pc, msg = fault_of([*ld_imm64(3, target),
                                  Instruction(op.OP_CALLX, 3, 0, 0, 0), exit_insn()])
        assert name == "HelperFault" and pc == 2 and f"{target:#x}" in msg


def test_faults_do_not_leak_into_the_next_run() -> None:
    jit = JitProgram([ldx_mem(1, 0, 1, 0), exit_insn()])
    with pytest.raises(MemoryFault):
        jit.run(0)
    buf = bytearray(b"\x2a")
    assert jit.run(MEM_BASE, regions=[Region("p", MEM_BASE, buf)]) == 42
    with pytest.raises(HelperFault):
        JitProgram([mov64_imm(1, 77), Instruction(op.OP_CALLX, 1, 0, 0, 0),
                    exit_insn()]).run()


# -- random hostile programs ----------------------------------------------------------------

_SPECIAL = [0, 1, 7, 8, 16, 512, MEM_BASE, MEM_BASE + 8, MEM_BASE + 16, STACK_BASE,
            STACK_BASE + 512, STACK_BASE + STACK_FRAME_GAP, FUNC_BASE, INT64_MIN, M64,
            (1 << 32) - 1, 1 << 31]
_ALU_OPS = [op.BPF_ADD, op.BPF_SUB, op.BPF_MUL, op.BPF_DIV, op.BPF_OR, op.BPF_AND,
            op.BPF_LSH, op.BPF_RSH, op.BPF_NEG, op.BPF_MOD, op.BPF_XOR, op.BPF_MOV,
            op.BPF_ARSH]
_JMP_OPS = [op.BPF_JEQ, op.BPF_JGT, op.BPF_JGE, op.BPF_JSET, op.BPF_JNE, op.BPF_JSGT,
            op.BPF_JSGE, op.BPF_JLT, op.BPF_JLE, op.BPF_JSLT, op.BPF_JSLE]
_reg = st.integers(0, 9)
_src = st.integers(0, 10)
_imm = st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from([0, -1, 1, 8, 63, 64]))
_off = st.one_of(st.integers(-600, 600), st.integers(-(2**15), 2**15 - 1))


@st.composite
def _item(draw: st.DrawFn) -> list[Instruction] | tuple[int, int, int, bool, int]:
    kind = draw(st.sampled_from(["alu", "alu", "mem", "mem", "atomic", "jmp", "lddw"]))
    if kind == "lddw":
        return list(ld_imm64(draw(_reg), draw(st.one_of(st.sampled_from(_SPECIAL),
                                                          st.integers(0, M64)))))
    if kind == "alu":
        cls = draw(st.sampled_from([op.BPF_ALU, op.BPF_ALU64]))
        code_op = draw(st.sampled_from(_ALU_OPS))
        if code_op == op.BPF_NEG:
            return [Instruction(cls | code_op, draw(_reg), 0, 0, 0)]
        off = draw(st.sampled_from([0, 1])) if code_op in (op.BPF_DIV, op.BPF_MOD) else 0
        if draw(st.booleans()):
            return [Instruction(cls | code_op | op.BPF_X, draw(_reg), draw(_src), off, 0)]
        return [Instruction(cls | code_op | op.BPF_K, draw(_reg), 0, off, draw(_imm))]
    size = draw(st.sampled_from([op.BPF_B, op.BPF_H, op.BPF_W, op.BPF_DW]))
    if kind == "atomic":
        return [Instruction(op.BPF_STX | op.BPF_ATOMIC | draw(st.sampled_from([op.BPF_W,
                                                                              op.BPF_DW])),
                            draw(_src), draw(_src), draw(_off),
                            draw(st.sampled_from(list(op.ATOMIC_OP_NAMES))))]
    if kind == "mem":
        which = draw(st.sampled_from(["ldx", "st", "stx"]))
        if which == "ldx":
            return [Instruction(op.BPF_LDX | op.BPF_MEM | size, draw(_reg), draw(_src),
                                draw(_off), 0)]
        if which == "st":
            return [Instruction(op.BPF_ST | op.BPF_MEM | size, draw(_src), 0, draw(_off),
                                draw(_imm))]
        return [Instruction(op.BPF_STX | op.BPF_MEM | size, draw(_src), draw(_src),
                            draw(_off), 0)]
    cls = draw(st.sampled_from([op.BPF_JMP, op.BPF_JMP32]))
    code_op = draw(st.sampled_from(_JMP_OPS))
    use_reg = draw(st.booleans())
    # The target is picked once the program's layout is known: any item, backwards too.
    return (cls | code_op, draw(_src), draw(_src if use_reg else _imm), use_reg,
            draw(st.integers(0, 10_000)))


@st.composite
def wild_programs(draw: st.DrawFn) -> list[Instruction]:
    """Random loads, stores, atomics through any register, jumps anywhere in their
    function (loops too), and calls into up to two subprograms."""
    nfuncs = draw(st.integers(1, 3))
    bodies: list[list[Any]] = []
    for f in range(nfuncs):
        items: list[Any] = draw(st.lists(_item(), min_size=1, max_size=25 // nfuncs))
        if f + 1 < nfuncs:  # calls go to later functions only: no recursion
            for _ in range(draw(st.integers(0, 2))):
                items.insert(draw(st.integers(0, len(items))),
                             ("call", draw(st.integers(f + 1, nfuncs - 1))))
        items.append([exit_insn()])
        bodies.append(items)
    func_start, at = [], 0
    for items in bodies:
        func_start.append(at)
        at += sum(len(it) if isinstance(it, list) else 1 for it in items)
    out: list[Instruction] = []
    for items, base in zip(bodies, func_start, strict=True):
        starts, at = [], base
        for it in items:
            starts.append(at)
            at += len(it) if isinstance(it, list) else 1
        for k, it in enumerate(items):
            if isinstance(it, list):
                out += it
            elif it[0] == "call":
                out.append(Instruction(op.OP_CALL, 0, op.CallSrc.BPF_PSEUDO_CALL, 0,
                                       func_start[it[1]] - (starts[k] + 1)))
            else:
                code, dst, x, use_reg, pick = it
                off = starts[pick % len(starts)] - (starts[k] + 1)
                if use_reg:
                    out.append(Instruction(code | op.BPF_X, dst, x, off, 0))
                else:
                    out.append(Instruction(code | op.BPF_K, dst, 0, off, x))
    return out


@settings(max_examples=500, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(wild_programs(), st.binary(max_size=24), st.booleans(), st.integers(0, 3000))
def test_random_hostile_programs_match_interpreter(prog: list[Instruction], buf: bytes,
                                                   writable: bool, budget: int) -> None:
    both(prog, buf=buf, writable=writable, budget=budget)
