"""The conformance wrapper: programs run as XDP under BPF_PROG_TEST_RUN, r0 read from a map."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction, encode, ld_imm64
from pyxdp.errors import KernelError, VerifierError
from pyxdp.kernel import bpf_available
from pyxdp.testing.kernel_runner import (
    EPILOGUE_START,
    KernelRejected,
    KernelResult,
    KernelRunner,
    main_function_end,
    short_reason,
    wrap_program,
)

pytestmark = pytest.mark.kernel

_OK, _WHY = bpf_available()
if not _OK and not os.environ.get("CI"):
    pytest.skip(f"needs root and BPF: {_WHY}", allow_module_level=True)

EXIT = Instruction(op.OP_EXIT)


def mov(dst: int, imm: int) -> Instruction:
    return Instruction(0xB7, dst, 0, 0, imm)


def mov_reg(dst: int, src: int) -> Instruction:
    return Instruction(0xBF, dst, src)


def call_local(rel: int) -> Instruction:
    return Instruction(op.OP_CALL, 0, op.CallSrc.BPF_PSEUDO_CALL, 0, rel)


@pytest.fixture(scope="module")
def runner() -> Iterator[KernelRunner]:
    with KernelRunner() as r:
        yield r


# ---------------------------------------------------------------- wrapping (pure)

def test_main_function_end() -> None:
    prog = [mov(0, 1), call_local(1), EXIT, mov(0, 2), EXIT]
    assert main_function_end(prog) == 3
    assert main_function_end([mov(0, 1), EXIT]) == 2
    # A callback address (ld_imm64 BPF_PSEUDO_FUNC) starts a subprogram too.
    lo, hi = ld_imm64(2, 3, src=op.PseudoSrc.BPF_PSEUDO_FUNC)  # target: 0 + 1 + 3
    assert main_function_end([lo, hi, mov(0, 0), EXIT, mov(0, 0), EXIT]) == 4


def test_wrap_layout() -> None:
    prog = [Instruction(0x15, 2, 0, 1, 0), EXIT, call_local(1), EXIT, mov(0, 7), EXIT]
    w = wrap_program(prog, 8, map_fd=3)
    head = w.insns[:w.offset]
    assert head[0].code == op.OP_JA and head[0].off == 12  # over the 12-slot epilogue
    assert head[EPILOGUE_START].code == op.BPF_STX | op.BPF_MEM | op.BPF_DW
    ldmap = head[EPILOGUE_START + 2]
    assert ldmap.is_ld_imm64() and ldmap.src == op.PseudoSrc.BPF_PSEUDO_MAP_FD
    assert ldmap.imm == 3
    assert head[EPILOGUE_START + 11] == EXIT
    body = w.insns[w.offset:]
    assert body[0] == prog[0] and body[2] == prog[2]  # jumps and calls untouched
    for pc in (1, 3):  # main-function exits jump back to the epilogue
        assert body[pc].code == op.OP_JA
        assert w.offset + pc + 1 + body[pc].off == EPILOGUE_START
    assert body[5] == EXIT  # the subprogram keeps its exit
    assert w.original_pc(w.offset + 4) == 4 and w.original_pc(2) is None


def test_wrap_far_exit_uses_gotol() -> None:
    prog = [mov(0, 0)] * 40000 + [EXIT]
    w = wrap_program(prog, 0, map_fd=3)
    last = w.insns[-1]
    assert last.code == op.OP_JA32
    assert len(w.insns) + last.imm == EPILOGUE_START


# ---------------------------------------------------------------- on the kernel

def test_r0_comes_back_as_64_bits(runner: KernelRunner) -> None:
    res = runner.run([*ld_imm64(0, 0x1122334455667788), EXIT])
    assert res == KernelResult(0x1122334455667788, b"")
    assert runner.run([*ld_imm64(0, 0xFFFF_FFFF_FFFF_FFFF), EXIT]).r0 == 2**64 - 1


def test_r1_r2_conventions(runner: KernelRunner) -> None:
    # r0 = r1 + r2 with no memory: both are 0.
    prog = [mov_reg(0, 1), Instruction(0x0F, 0, 2), EXIT]
    assert runner.run(prog).r0 == 0
    # r0 = r2 is the memory length, not the padded packet length.
    assert runner.run([mov_reg(0, 2), EXIT], bytes(5)).r0 == 5
    assert runner.run([mov_reg(0, 2), EXIT], bytes(100)).r0 == 100


def test_program_reads_and_writes_memory(runner: KernelRunner) -> None:
    mem = bytes(range(1, 9))
    prog = [
        Instruction(0x79, 0, 1, 0),  # r0 = *(u64 *)(r1 + 0)
        Instruction(0x62, 1, 0, 4, 0x55667788),  # *(u32 *)(r1 + 4) = 0x55667788
        EXIT,
    ]
    res = runner.run(prog, mem)
    assert res.r0 == int.from_bytes(mem, "little")
    assert res.mem_out == mem[:4] + (0x55667788).to_bytes(4, "little")
    full = runner.run_full(prog, mem)
    assert full.mem_out[:8] == res.mem_out and len(full.mem_out) == 14  # ETH_HLEN padding
    assert full.mem_out[8:] == bytes(6)
    detail = runner.run_detailed(encode(prog), bytearray(mem))  # raw bytecode accepted
    assert detail.retval == 2 and detail.r0 == res.r0 and detail.duration_ns >= 0


def test_last_byte_of_memory_is_reachable(runner: KernelRunner) -> None:
    mem = bytes(range(64))
    assert runner.run([Instruction(0x71, 0, 1, 63), EXIT], mem).r0 == 63


def test_subprogram_call(runner: KernelRunner) -> None:
    prog = [
        mov(1, 41),
        call_local(2),  # r0 = f(41)
        Instruction(0x07, 0, 0, 0, 1),  # r0 += 1
        EXIT,
        mov_reg(0, 1),  # f: r0 = r1 + 1
        Instruction(0x07, 0, 0, 0, 1),
        EXIT,
    ]
    assert runner.run(prog).r0 == 43


def test_every_main_exit_is_caught(runner: KernelRunner) -> None:
    # if r2 == 0 goto +2; r0 = 1; exit; r0 = 2; exit
    prog = [Instruction(0x15, 2, 0, 2, 0), mov(0, 1), EXIT, mov(0, 2), EXIT]
    assert runner.run(prog).r0 == 2
    assert runner.run(prog, bytes(3)).r0 == 1


def test_results_do_not_leak_between_runs(runner: KernelRunner) -> None:
    for value in (5, 6, 0):
        assert runner.run([mov(0, value), EXIT]).r0 == value


def test_rejected_program_gives_reason(runner: KernelRunner) -> None:
    with pytest.raises(KernelRejected) as exc:
        runner.run([Instruction(0x79, 0, 1, 8), EXIT], bytes(8))  # reads past memory
    err = exc.value
    assert isinstance(err, VerifierError) and err.log
    assert err.reason == "pc 0: R1 offset is outside of the packet"
    assert short_reason(err.log) == "R1 offset is outside of the packet"
    assert "pc 0" in str(err)


def test_missing_r0_is_reported_at_exit(runner: KernelRunner) -> None:
    with pytest.raises(KernelRejected) as exc:
        runner.run([EXIT])
    assert exc.value.reason == "at exit: R0 !read_ok"


def test_prologue_leaves_other_registers_uninitialised(runner: KernelRunner) -> None:
    with pytest.raises(KernelRejected) as exc:
        runner.run([mov_reg(0, 3), EXIT], bytes(8))
    assert "R3 !read_ok" in exc.value.reason


def test_memory_without_r1_bounds_is_rejected(runner: KernelRunner) -> None:
    with pytest.raises(KernelRejected):
        runner.run([Instruction(0x79, 0, 1, 0), EXIT])  # no memory: r1 is the scalar 0


def test_fds_are_closed_and_runs_are_fast(runner: KernelRunner) -> None:
    probe = os.dup(0)
    os.close(probe)
    start = time.perf_counter()
    for i in range(300):
        assert runner.run([*ld_imm64(0, i << 32 | i), EXIT], bytes(16)).r0 == i << 32 | i
    elapsed = time.perf_counter() - start
    again = os.dup(0)
    os.close(again)
    assert again == probe  # no program descriptor left behind
    assert elapsed < 15.0, f"300 runs took {elapsed:.1f}s"


def test_far_exit_runs_with_gotol(runner: KernelRunner) -> None:
    prog = [mov(0, 9)] + [mov(3, 0)] * 33000 + [EXIT]
    assert runner.run(prog).r0 == 9


def test_closed_runner() -> None:
    with KernelRunner() as r:
        assert r.run([mov(0, 1), EXIT]).r0 == 1
    with pytest.raises(ValueError):
        r.run([mov(0, 1), EXIT])
    r.close()


def test_kernel_errors_are_kernel_errors(runner: KernelRunner) -> None:
    assert issubclass(KernelRejected, KernelError)
