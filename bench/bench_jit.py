"""Interpreter vs JIT, side by side in one run: instructions per second, compile time, batches.

    python bench/bench_jit.py [--repeat N]

* ``alu loop``: a xorshift loop of about 1,000,000 executed instructions;
* ``mem loop``: the same count with packet loads and stack stores in the loop
  (checked and range-proven accesses);
* ``prime``: the conformance vector ``prime`` testing a prime near 100,000
  instead of 67, passed in r1 (the vector's constant would let LLVM fold it);
* compile time of a small program (uncached, then from the cache);
* a batch of frames through ``run_batch`` against ``run`` per frame.

Each engine's time is the best of ``--repeat`` runs; the speed-up is the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.asm.macros import (
    alu64_imm,
    alu64_reg,
    exit_insn,
    jmp_imm,
    ld_imm64,
    ldx_mem,
    mov64_imm,
    mov64_reg,
    stx_mem,
)
from pyxdp.testing.conformance import MEM_BASE, default_vector_dir, parse_vector
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.jit import JitProgram
from pyxdp.vm.jit.engine import cache_clear
from pyxdp.vm.memory import Region

BUDGET = 1 << 40


def alu_loop(iterations: int) -> list[Instruction]:
    """xorshift64 ``iterations`` times: 8 instructions per turn, nothing LLVM can fold."""
    return [*ld_imm64(0, 0x9E37_79B9_7F4A_7C15), *ld_imm64(1, iterations),
            mov64_reg(2, 0), alu64_imm(op.BPF_LSH, 2, 13), alu64_reg(op.BPF_XOR, 0, 2),
            mov64_reg(2, 0), alu64_imm(op.BPF_RSH, 2, 7), alu64_reg(op.BPF_XOR, 0, 2),
            alu64_imm(op.BPF_SUB, 1, 1), jmp_imm(op.BPF_JNE, 1, 0, -8), exit_insn()]


def mem_loop(iterations: int) -> list[Instruction]:
    """Sum packet bytes (checked loads) into a stack slot (a proven store): 9 per turn."""
    return [mov64_imm(0, 0), *ld_imm64(3, iterations), mov64_reg(6, 1),
            mov64_reg(4, 3), alu64_imm(op.BPF_AND, 4, 63), alu64_reg(op.BPF_ADD, 4, 6),
            ldx_mem(1, 5, 4, 0), alu64_reg(op.BPF_ADD, 0, 5), stx_mem(8, 10, 0, -8),
            ldx_mem(8, 0, 10, -8), alu64_imm(op.BPF_SUB, 3, 1),
            jmp_imm(op.BPF_JNE, 3, 0, -9), exit_insn()]


def prime() -> list[Instruction]:
    """The ``prime`` vector testing r1 for primality (the vector loads the constant 67)."""
    text = (default_vector_dir() / "prime.data").read_text()
    vector = parse_vector(text.replace("mov %r1, 67", "mov %r1, %r1"), "prime")
    return list(vector.program())


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def compare(name: str, insns: Sequence[Instruction], repeat: int, packet: bytes = b"",
            r1: int | None = None) -> None:
    buf = bytearray(packet)
    regions = [Region("packet", MEM_BASE, buf)] if packet else []
    arg = MEM_BASE if r1 is None else r1
    interp = Interpreter(insns, budget=BUDGET)
    jit = JitProgram(insns, budget=BUDGET)
    want = interp.run(arg, len(packet), regions=regions)
    got = jit.run(arg, len(packet), regions=regions)
    assert got == want and jit.executed == interp.executed, (got, want)
    n = interp.executed
    ti = best(lambda: interp.run(arg, len(packet), regions=regions), max(1, repeat // 3))
    tj = best(lambda: jit.run(arg, len(packet), regions=regions), repeat)
    print(f"{name:10} {n:>11,} insns  interp {n / ti / 1e6:8.2f} M/s   "
          f"jit {n / tj / 1e6:9.1f} M/s   speed-up {ti / tj:8.0f}x   "
          f"(compile {jit.compile_ms:.1f} ms)")


def compile_times(repeat: int) -> None:
    small = [mov64_imm(0, 1), mov64_imm(1, 2), alu64_reg(op.BPF_ADD, 0, 1),
             jmp_imm(op.BPF_JGT, 0, 2, 1), mov64_imm(0, 0), exit_insn()]
    lowering, llvm, total = [], [], []
    for k in range(repeat):
        cache_clear()
        prog = JitProgram([*small[:-1], alu64_imm(op.BPF_ADD, 0, k), exit_insn()])
        lowering.append(prog.code.lower_ms)
        llvm.append(prog.code.llvm_ms)
        total.append(prog.compile_ms)
    again = JitProgram([*small[:-1], alu64_imm(op.BPF_ADD, 0, repeat - 1), exit_insn()])
    print(f"compile, {len(small)}-instruction program: median {statistics.median(total):.2f} ms "
          f"(lowering {statistics.median(lowering):.2f} ms, LLVM O2 + link "
          f"{statistics.median(llvm):.2f} ms); from the cache {again.compile_ms:.3f} ms")


def batch(repeat: int, frames_n: int = 100_000) -> None:
    # A filter's shape: read two header bytes, branch, count in a stack slot.
    prog = [mov64_imm(0, 2), jmp_imm(op.BPF_JLT, 2, 14, 6), ldx_mem(1, 3, 1, 12),
            ldx_mem(1, 4, 1, 13), alu64_imm(op.BPF_LSH, 3, 8), alu64_reg(op.BPF_OR, 3, 4),
            jmp_imm(op.BPF_JNE, 3, 0x0800, 1), mov64_imm(0, 1), exit_insn()]
    rng = np.random.default_rng(7)
    lengths = rng.integers(10, 128, size=frames_n).astype(np.uint64)
    offsets = np.zeros(frames_n, dtype=np.uint64)
    offsets[1:] = np.cumsum(lengths[:-1])
    frames = rng.integers(0, 256, size=int(lengths.sum()), dtype=np.uint8)
    frames[offsets[::2].astype(np.int64) + 12] = 0x08
    frames[offsets[::2].astype(np.int64) + 13] = 0x00
    jit = JitProgram(prog)
    res = jit.run_batch(frames, offsets, lengths)
    tb = best(lambda: jit.run_batch(frames, offsets, lengths), repeat)
    sample = min(frames_n, 20_000)
    regions = [Region("packet", MEM_BASE, bytearray())]

    def single() -> None:
        for i in range(sample):
            o, ln = int(offsets[i]), int(lengths[i])
            regions[0] = Region("packet", MEM_BASE, frames[o:o + ln].data)
            jit.run(MEM_BASE, ln, regions=regions)

    ts = best(single, 1) * frames_n / sample
    interp = Interpreter(prog)

    def interp_single() -> None:
        for i in range(sample // 10):
            o, ln = int(offsets[i]), int(lengths[i])
            interp.run(MEM_BASE, ln, regions=[Region("packet", MEM_BASE, frames[o:o + ln].data)])

    ti = best(interp_single, 1) * frames_n / (sample // 10)
    assert int(res.ok.sum()) == frames_n
    print(f"batch of {frames_n:,} frames: run_batch {frames_n / tb / 1e6:.2f} M frames/s, "
          f"run() per frame {frames_n / ts / 1e3:.0f} k frames/s, interpreter "
          f"{frames_n / ti / 1e3:.0f} k frames/s (batch/run {ts / tb:.0f}x, "
          f"batch/interpreter {ti / tb:.0f}x)")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    compare("alu loop", alu_loop(125_000), args.repeat)
    compare("mem loop", mem_loop(111_111), args.repeat, bytes(range(64)))
    compare("prime", prime(), args.repeat, r1=100_003)
    compile_times(max(args.repeat, 5))
    batch(args.repeat)


if __name__ == "__main__":
    main()
