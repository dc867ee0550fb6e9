"""The JIT against the reference interpreter: conformance vectors, random programs, batches.

Every comparison is exact: r0, the memory the program wrote, the fault type,
pc and message, and the executed-instruction count.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

pytest.importorskip("llvmlite")

from pyxdp.asm import opcodes as op  # noqa: E402
from pyxdp.asm.insn import Instruction  # noqa: E402
from pyxdp.asm.macros import (  # noqa: E402
    alu64_imm,
    alu64_reg,
    call_helper,
    call_local,
    exit_insn,
    jmp_imm,
    jmp_reg,
    ld_imm64,
    ldx_mem,
    mov64_imm,
    mov64_reg,
    st_mem,
    stx_mem,
)
from pyxdp.errors import (  # noqa: E402
    BudgetExceeded,
    HelperFault,
    MemoryFault,
    NotSupportedError,
    ProgramFault,
)
from pyxdp.testing.conformance import (  # noqa: E402
    MEM_BASE,
    parse_vector,
    run_interp,
    vector_files,
)
from pyxdp.testing.fuzz import runnable_programs  # noqa: E402
from pyxdp.testing.vectorgen import BUILTIN_DIR  # noqa: E402
from pyxdp.vm.interpreter import Helper, Interpreter  # noqa: E402
from pyxdp.vm.jit import FrameRegion, JitProgram  # noqa: E402
from pyxdp.vm.jit.abi import ST_BUDGET, ST_OK, ST_READ  # noqa: E402
from pyxdp.vm.memory import Region  # noqa: E402

M64 = (1 << 64) - 1
VECTORS = vector_files()

Outcome = tuple[int | None, bytes, tuple[str, int | None, str] | None, int]


def outcome(vm: Interpreter | JitProgram, buf: bytes, **kw: Any) -> Outcome:
    """r0, the buffer after the run, the fault (type, pc, message), instructions executed."""
    mem = bytearray(buf)
    regions = [Region("packet", MEM_BASE, mem)] if buf else []
    try:
        r0: int | None = vm.run(MEM_BASE if buf else 0, len(buf), regions=regions, **kw)
        fault = None
    except ProgramFault as e:
        r0, fault = None, (type(e).__name__, e.pc, str(e))
    return r0, bytes(mem), fault, vm.executed


def both(insns: tuple[Instruction, ...] | list[Instruction], buf: bytes = b"",
         **kw: Any) -> Outcome:
    """Run on both engines, insist they agree, return the outcome."""
    want = outcome(Interpreter(insns), buf, **kw)
    got = outcome(JitProgram(insns), buf, **kw)
    assert got == want
    return got


# -- conformance ----------------------------------------------------------------------

@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_conformance_vector(path: Path) -> None:
    v = parse_vector(path.read_text(), path.stem, str(path))
    assert run_interp(v).status == "passed"
    insns = v.program()
    mem = bytearray(v.mem)
    regions = [Region("vector memory", MEM_BASE, mem)] if v.mem else []
    jit = JitProgram(insns)
    if v.error is not None:
        with pytest.raises(ProgramFault):
            jit.run(MEM_BASE if v.mem else 0, len(v.mem), regions=regions)
        return
    assert jit.run(MEM_BASE if v.mem else 0, len(v.mem), regions=regions) == v.result
    interp = Interpreter(insns)
    imem = bytearray(v.mem)
    iregions = [Region("vector memory", MEM_BASE, imem)] if v.mem else []
    interp.run(MEM_BASE if v.mem else 0, len(v.mem), regions=iregions)
    assert (bytes(mem), jit.executed) == (bytes(imem), interp.executed)


def test_all_vectors_found(vector_dir: Path) -> None:
    assert len(VECTORS) >= 313 + len(list(BUILTIN_DIR.glob("*.data")))


# -- differential, random programs ---------------------------------------------------

# 300 here; tests/test_jit_fuzz.py runs these programs (and 5,000 XDP ones) in bulk.
@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runnable_programs())
def test_random_programs_match_interpreter(prog: tuple[tuple[Instruction, ...], bytes]) -> None:
    insns, buf = prog
    both(insns, buf)


# -- semantics spot checks -------------------------------------------------------------

def test_budget_stops_at_the_interpreters_pc_with_its_count() -> None:
    loop = [mov64_imm(0, 0), alu64_imm(op.BPF_ADD, 0, 1),
            st_mem(8, 10, -8, 1), stx_mem(8, 10, 0, -16), jmp_imm(op.BPF_JA, 0, 0, -4),
            exit_insn()]
    for budget in range(0, 23):
        r0, _, fault, executed = both(loop, budget=budget)
        assert fault is not None and fault[0] == "BudgetExceeded"
        assert executed == max(budget, 0)


def test_budget_inside_a_block_with_ld_imm64() -> None:
    body = [*ld_imm64(1, 5), mov64_imm(2, 1), *ld_imm64(3, 7), alu64_reg(op.BPF_ADD, 1, 3),
            jmp_imm(op.BPF_JA, 0, 0, -7), exit_insn()]
    pcs = set()
    for budget in range(1, 12):
        fault = both(body, budget=budget)[2]
        assert fault is not None
        pcs.add(fault[1])
    assert pcs == {0, 2, 3, 5, 6}


def test_exact_budget_suffices() -> None:
    prog = [mov64_imm(0, 3), exit_insn()]
    assert both(prog, budget=2)[0] == 3
    assert both(prog, budget=1)[2] is not None


# A loop-free program: it stores, branches on the packet's first byte and, when that is
# not 0, calls a function (pcs 11-14) that stores into the caller's frame; its longest
# run is 14 instructions (10 here, 4 in the callee).
_LOOP_FREE = [
    mov64_reg(6, 1), st_mem(8, 10, -8, 7),
    ldx_mem(1, 2, 6, 0), jmp_imm(op.BPF_JEQ, 2, 0, 6),
    mov64_reg(1, 10), alu64_imm(op.BPF_ADD, 1, -8), call_local(4),
    stx_mem(1, 6, 0, 0), ldx_mem(8, 0, 10, -8), exit_insn(),
    exit_insn(),
    mov64_imm(2, 40), stx_mem(8, 1, 2, 0), mov64_imm(0, 2), exit_insn(),
]


def test_run_bound_is_the_longest_run_or_none() -> None:
    from pyxdp.asm.validate import validate
    from pyxdp.vm.jit.analysis import run_bound

    def bound(insns: list[Instruction], callbacks: tuple[int, ...] = ()) -> int | None:
        return run_bound(insns, validate(insns), callbacks)

    assert bound(_LOOP_FREE) == 14
    assert bound([*ld_imm64(0, 1), exit_insn()]) == 2  # ld_imm64 counts one
    assert bound([mov64_imm(0, 0), jmp_imm(op.BPF_JA, 0, 0, -2), exit_insn()]) is None
    assert bound([call_helper(12), exit_insn()]) is None  # a tail call
    assert bound([mov64_imm(0, 0), exit_insn()], (0,)) is None  # callbacks


def test_loop_free_code_has_no_budget_tests_and_short_budgets_still_stop_exactly() -> None:
    jit = JitProgram(_LOOP_FREE)
    assert "overbudget" not in jit.ir
    for byte in (0, 1):
        for budget in range(-1, 16):
            want = outcome(Interpreter(_LOOP_FREE), bytes([byte, 2, 3]), budget=budget)
            assert outcome(jit, bytes([byte, 2, 3]), budget=budget) == want, budget
    # A batch given less than the longest run takes the code with the tests too.
    frames = np.array([1, 0], dtype=np.uint8)
    res = jit.run_batch(frames, np.arange(2, dtype=np.uint64), np.ones(2, dtype=np.uint64),
                        budget=10)
    assert list(res.status) == [ST_BUDGET, ST_OK]  # the long arm, then the short one


def _long_loop_free(blocks: int = 170) -> list[Instruction]:
    """A loop-free program of about ``10 * blocks`` instructions (a function the JIT splits
    into parts, see pyxdp.vm.jit.lower.split_parts): per block a checked packet load at an
    offset growing along the program, stack stores and loads across the whole frame, a jump
    far forward when the byte is the block's magic (to one of four exits at the end),
    and a Python helper call every 16 blocks."""
    body: list[list[Instruction]] = []
    for k in range(blocks):
        blk = [ldx_mem(1, 2, 6, k // 4), alu64_reg(op.BPF_ADD, 7, 2),
               alu64_imm(op.BPF_MUL, 7, 31), alu64_imm(op.BPF_AND, 7, 0xFFFFFF),
               stx_mem(8, 10, 7, -8 * (1 + k % 8)), ldx_mem(8, 3, 10, -8 * (1 + (k + 3) % 8)),
               alu64_reg(op.BPF_XOR, 7, 3), jmp_imm(op.BPF_JEQ, 2, (k * 7) % 251 + 1, 0)]
        if k % 16 == 5:
            blk += [mov64_reg(1, 7), call_helper(7), alu64_reg(op.BPF_ADD, 9, 0)]
        body.append([*blk, alu64_imm(op.BPF_ADD, 8, 1)])
    tail = [mov64_reg(0, 7), alu64_reg(op.BPF_ADD, 0, 8), alu64_reg(op.BPF_ADD, 0, 9),
            exit_insn()]
    exits = [[mov64_reg(0, 9), alu64_imm(op.BPF_ADD, 0, 1000 * j), exit_insn()]
             for j in range(4)]
    prog = [mov64_reg(6, 1), mov64_imm(7, 0), mov64_imm(8, 0), mov64_imm(9, 0)]
    at = [len(prog)]
    for blk in body:
        at.append(at[-1] + len(blk))
    first_exit = at[-1] + len(tail)
    for k, blk in enumerate(body):
        j = 7 if len(blk) == 9 else 10  # the jump's index in the block
        target = first_exit + 3 * (k % 4)
        blk[j] = jmp_imm(op.BPF_JEQ, 2, (k * 7) % 251 + 1, target - (at[k] + j) - 1)
        prog += blk
    return prog + tail + [i for e in exits for i in e]


def test_a_long_loop_free_function_split_in_parts_agrees_with_the_interpreter() -> None:
    from pyxdp.vm.jit.lower import SPLIT_INSNS

    prog = _long_loop_free()
    assert len(prog) >= SPLIT_INSNS

    def mix(vm: Any, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        return (r1 * 3) & 0xFFFF

    helpers = {7: Helper(7, "mix", mix)}
    jit = JitProgram(prog, helpers=helpers)
    assert "_f0_p1(" in jit.ir  # split: a later part entered from the first
    interp = Interpreter(prog, helpers=helpers)
    plain = bytes(200)
    magic = {k: (k * 7) % 251 + 1 for k in range(170)}
    packets = [plain, plain[:20], plain[:41]]  # no fault, a fault early, one late
    for k in (3, 90, 160):  # a jump far forward from the first part and from the last
        buf = bytearray(plain)
        buf[k // 4] = magic[k]
        packets.append(bytes(buf))
    for buf in packets:
        for budget in (None, 400):  # the split build, and the one testing its budget
            kw = {} if budget is None else {"budget": budget}
            assert outcome(jit, buf, **kw) == outcome(interp, buf, **kw), (buf[:48], budget)


def test_bpf_to_bpf_calls_frames_and_pointers_to_the_callers_stack() -> None:
    prog = [mov64_imm(6, 6), st_mem(8, 10, -8, 11), mov64_reg(1, 10), alu64_imm(op.BPF_ADD, 1, -8),
            call_local(5), ldx_mem(8, 2, 10, -8), alu64_reg(op.BPF_ADD, 0, 2),
            alu64_reg(op.BPF_ADD, 0, 6), exit_insn(), exit_insn(),
            # callee: adds 100 to the caller's slot through r1, writes its own frame
            ldx_mem(8, 3, 1, 0), alu64_imm(op.BPF_ADD, 3, 100), stx_mem(8, 1, 3, 0),
            mov64_imm(6, 0), st_mem(8, 10, -8, 99), mov64_reg(0, 10), exit_insn()]
    r0 = both(prog)[0]
    assert r0 is not None


def test_call_depth_eight_frames_each_with_its_own_stack() -> None:
    chain: list[Instruction] = []
    for d in range(7):
        chain += [st_mem(8, 10, -8, d), call_local(3), ldx_mem(8, 1, 10, -8),
                  alu64_reg(op.BPF_ADD, 0, 1), exit_insn()]
    chain += [mov64_reg(0, 10), exit_insn()]
    r0, *_ = both(chain)
    assert r0 is not None


def test_helpers_python_and_native() -> None:
    seen: list[tuple[int, ...]] = []

    def record(vm: Any, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        seen.append((r1, r2, r3, r4, r5))
        return int(vm.mem.load(r1, 8)) + 1  # reads the program's stack through vm.mem

    helpers = {7: Helper(7, "record", record),
               5: Interpreter([exit_insn()]).helpers[5]}
    prog = [st_mem(8, 10, -8, 41), mov64_reg(1, 10), alu64_imm(op.BPF_ADD, 1, -8),
            mov64_imm(2, 2), mov64_imm(3, 3), mov64_imm(4, -1), mov64_imm(5, 5),
            call_helper(7), mov64_reg(6, 0), call_helper(5), jmp_imm(op.BPF_JEQ, 0, 0, 1),
            mov64_reg(0, 6), exit_insn()]
    jit = JitProgram(prog, helpers=helpers)
    assert jit.run() == 42
    interp = Interpreter(prog, helpers=helpers)
    assert interp.run() == 42
    assert seen[0] == seen[1] and seen[0][3] == M64


def test_helpers_that_move_and_add_regions() -> None:
    """A helper may move the packet's edges (as bpf_xdp_adjust_head) or add a region."""

    def engine_run(make: Any) -> tuple[Any, ...]:
        pkt = Region("packet", MEM_BASE, bytearray(range(1, 17)))
        extra = Region("map value", 0x5000_0000, bytearray(8))

        def adjust(vm: Any, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
            pkt.base += 2
            pkt.buf = memoryview(pkt.buf)[2:]
            pkt.size -= 2
            vm.mem.add(extra)
            return extra.base

        vm = make(prog, helpers={44: Helper(44, "adjust", adjust)})
        try:
            r0 = vm.run(MEM_BASE, 16, regions=[pkt])
        except ProgramFault as e:
            return ("fault", str(e), bytes(extra.buf))
        return (r0, bytes(extra.buf))

    prog = [call_helper(44), st_mem(8, 0, 0, 99), *ld_imm64(1, MEM_BASE + 2),
            ldx_mem(1, 2, 1, 0), stx_mem(1, 0, 2, 1), ldx_mem(1, 0, 1, -2), exit_insn()]
    want = engine_run(Interpreter)
    assert want[0] == "fault" and "before packet" in want[1]
    assert engine_run(JitProgram) == want


def test_unknown_helper_rejected_at_load_like_the_interpreter() -> None:
    prog = [call_helper(1), exit_insn()]
    with pytest.raises(NotSupportedError) as a:
        Interpreter(prog)
    with pytest.raises(NotSupportedError) as b:
        JitProgram(prog)
    assert str(a.value) == str(b.value)


def test_helper_exception_propagates_with_pc() -> None:
    def boom(vm: Any, *args: int) -> int:
        raise ValueError("helper bug")

    def refuse(vm: Any, *args: int) -> int:
        raise ProgramFault("bad argument")

    prog = [mov64_imm(0, 0), call_helper(9), exit_insn()]
    # A helper's own bug is a fault naming the helper (nothing untyped leaves a run).
    for fn, exc in ((boom, HelperFault), (refuse, ProgramFault)):
        helpers = {9: Helper(9, "x", fn)}
        with pytest.raises(exc) as a:
            Interpreter(prog, helpers=helpers).run()
        with pytest.raises(exc) as b:
            JitProgram(prog, helpers=helpers).run()
        assert str(a.value) == str(b.value)
        assert a.value.pc == b.value.pc == 1
        if fn is boom:
            assert str(a.value).endswith("bpf_x: ValueError: helper bug")


def test_callback_through_pseudo_func() -> None:
    def loop_helper(vm: Any, n: int, fn: int, ctx: int, r4: int, r5: int) -> int:
        total = 0
        for k in range(n):
            total += vm.call_function(fn, k, ctx)
        return total

    helpers = {181: Helper(181, "loop", loop_helper)}
    prog = [st_mem(8, 10, -8, 1000), mov64_imm(1, 5),
            *ld_imm64(2, 5, src=op.PseudoSrc.BPF_PSEUDO_FUNC),  # the callback at pc 8
            mov64_reg(3, 10), alu64_imm(op.BPF_ADD, 3, -8), call_helper(181), exit_insn(),
            # callback(k, ctx): *ctx += k; return k * 2
            ldx_mem(8, 4, 2, 0), alu64_reg(op.BPF_ADD, 4, 1), stx_mem(8, 2, 4, 0),
            mov64_reg(0, 1), alu64_imm(op.BPF_LSH, 0, 1), exit_insn()]
    want = Interpreter(prog, helpers=helpers).run()
    got = JitProgram(prog, helpers=helpers).run()
    assert got == want == 20


def test_compile_cache_and_compile_time() -> None:
    prog = [mov64_imm(0, 12345), exit_insn()]
    first = JitProgram(prog, opt_level=3)
    again = JitProgram(prog, opt_level=3)
    assert again.cached and again.compile_ms < first.compile_ms + 1
    assert first.compile_ms > 0 and again.run() == 12345


def test_regions_are_released_after_a_run() -> None:
    buf = bytearray(b"abcd")
    jit = JitProgram([ldx_mem(1, 0, 1, 0), exit_insn()])
    assert jit.run(MEM_BASE, regions=[Region("p", MEM_BASE, buf)]) == ord("a")
    buf.extend(b"ef")  # would raise BufferError if the JIT still held an export
    assert len(buf) == 6


def test_gil_is_released_during_native_execution() -> None:
    spin = [mov64_imm(0, 0), *ld_imm64(1, 60_000_000), alu64_imm(op.BPF_ADD, 0, 1),
            jmp_reg(op.BPF_JLT, 0, 1, -2), exit_insn()]
    jit = JitProgram(spin, budget=1 << 40)
    result: list[int] = []
    t = threading.Thread(target=lambda: result.append(jit.run()))
    ticks = 0
    start = time.perf_counter()
    t.start()
    while t.is_alive():
        ticks += 1
    elapsed = time.perf_counter() - start
    t.join()
    assert result == [60_000_000]
    # With the GIL held the main thread would not run until the native call ends.
    assert elapsed < 0.01 or ticks > 1000


# -- batches ---------------------------------------------------------------------------

def _frames(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 80, size=n).astype(np.uint64)
    offsets = np.zeros(n, dtype=np.uint64)
    offsets[1:] = np.cumsum(lengths[:-1] + 16)
    frames = rng.integers(0, 256, size=int(offsets[-1] + lengths[-1] + 16), dtype=np.uint8)
    return frames, offsets, lengths


# Sum of the first min(len, 16) bytes, each byte then overwritten by its index;
# frames shorter than 4 bytes read past their end and fault.
_SUM = [mov64_imm(0, 0), mov64_imm(3, 0), ldx_mem(4, 5, 1, 0),
        jmp_reg(op.BPF_JGE, 3, 2, 8), jmp_imm(op.BPF_JGE, 3, 16, 7),
        mov64_reg(4, 1), alu64_reg(op.BPF_ADD, 4, 3), ldx_mem(1, 5, 4, 0),
        alu64_reg(op.BPF_ADD, 0, 5), stx_mem(1, 4, 3, 0), alu64_imm(op.BPF_ADD, 3, 1),
        Instruction(op.OP_JA, 0, 0, -9, 0),
        exit_insn()]


def test_batch_matches_single_runs() -> None:
    frames, offsets, lengths = _frames(200)
    single = frames.copy()
    jit = JitProgram(_SUM)
    res = jit.run_batch(frames, offsets, lengths)
    for i in range(len(offsets)):
        off, ln = int(offsets[i]), int(lengths[i])
        buf = bytearray(single[off:off + ln].tobytes())
        interp = Interpreter(_SUM)
        try:
            want: int | None = interp.run(MEM_BASE, ln, regions=[Region("packet", MEM_BASE, buf)])
        except MemoryFault as e:
            want = None
            fault = res.fault(i)
            assert res.status[i] == ST_READ and fault is not None and str(fault) == str(e)
        if want is not None:
            assert res.status[i] == ST_OK and int(res.r0[i]) == want
        single[off:off + ln] = np.frombuffer(bytes(buf), dtype=np.uint8)
    assert np.array_equal(frames, single)  # writes landed in place, nothing else touched


def test_batch_budget_per_frame_and_per_frame_regions() -> None:
    # r0 = ctx->word0 (a per-frame row) + the packet's first byte; loops forever if it is 0.
    prog = [ldx_mem(8, 0, 1, 0), ldx_mem(8, 6, 1, 8), ldx_mem(1, 2, 6, 0),
            jmp_imm(op.BPF_JEQ, 2, 0, 2), alu64_reg(op.BPF_ADD, 0, 2), exit_insn(),
            Instruction(op.OP_JA, 0, 0, -1, 0)]
    n = 64
    frames = np.arange(n, dtype=np.uint8)
    offsets = np.arange(n, dtype=np.uint64)
    lengths = np.ones(n, dtype=np.uint64)
    ctx_base = 0x2000_0000
    rows = np.zeros((n, 16), dtype=np.uint8)
    rows.view(np.uint64)[:, 0] = np.arange(n, dtype=np.uint64) * 1000
    rows.view(np.uint64)[:, 1] = 0x1000_0000_0000
    res = JitProgram(prog, budget=500).run_batch(
        frames, offsets, lengths, r1=np.full(n, ctx_base, dtype=np.uint64),
        per_frame=[FrameRegion("ctx", ctx_base, rows, writable=False)])
    assert res.status[0] == ST_BUDGET
    assert isinstance(res.fault(0), BudgetExceeded)
    assert all(res.r0[i] == i * 1000 + i for i in range(1, n))
    assert res.ok[1:].all()


def test_batch_with_python_helpers_and_per_frame_context_values() -> None:
    def first_byte(vm: Any, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        b = int(vm.mem.load(r1, 1))
        if b == 0:
            raise HelperFault("zero byte")
        vm.ctx_values[1] += 1  # helpers may change context fields, as adjust_head does
        return b + 1

    helpers = {70: Helper(70, "first_byte", first_byte)}
    # r0 = helper(packet) + ctx_values[0] + ctx_values[1] (both proven context loads).
    prog = [mov64_reg(6, 1), call_helper(70), ldx_mem(4, 2, 6, 0), ldx_mem(4, 3, 6, 4),
            alu64_reg(op.BPF_ADD, 0, 2), alu64_reg(op.BPF_ADD, 0, 3), exit_insn()]
    loads = {2: 0, 3: 1}
    n = 50
    frames = np.arange(n, dtype=np.uint8) * 3
    offsets = np.arange(n, dtype=np.uint64)
    lengths = np.ones(n, dtype=np.uint64)
    cvs = np.zeros((n, 8), dtype=np.uint64)
    cvs[:, 0] = np.arange(n) * 100
    res = JitProgram(prog, helpers=helpers, ctx_loads=loads).run_batch(
        frames, offsets, lengths, ctx_values=cvs)
    for i in range(n):
        interp = Interpreter(prog, helpers=helpers, ctx_loads=loads)
        interp.ctx_values[0] = i * 100
        buf = bytearray([i * 3 & 0xFF])
        try:
            want = interp.run(MEM_BASE, 1, regions=[Region("packet", MEM_BASE, buf)])
        except ProgramFault as e:
            fault = res.fault(i)
            assert fault is not None and (type(fault), str(fault)) == (type(e), str(e))
            continue
        assert res.status[i] == ST_OK and int(res.r0[i]) == want
        assert int(cvs[i, 1]) == 1
    assert res.status[0] != ST_OK and res.ok[1:].all()
