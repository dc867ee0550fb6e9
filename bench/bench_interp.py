"""Interpreter speed: eBPF instructions per second on a 1,000,000-instruction loop and on
the conformance suite's ``prime`` program (run on a large prime).

Run: python bench/bench_interp.py [--repeat N]
Prints the median of N runs and the ratio to the 1,000,000 insn/s target.
"""

from __future__ import annotations

import argparse
import statistics
import time

from pyxdp.asm import opcodes as op
from pyxdp.asm.macros import alu64_imm, alu64_reg, exit_insn, jmp_imm, mov64_imm
from pyxdp.testing.conformance import default_vector_dir, parse_vector
from pyxdp.vm.interpreter import Interpreter

TARGET = 1_000_000


def loop_program(iterations: int) -> list:  # type: ignore[type-arg]
    # 4 instructions per iteration + 3: r0 += r1; r1 -= 1; r2 ^= r0; if r1 != 0 goto loop
    return [mov64_imm(0, 0), mov64_imm(1, iterations), mov64_imm(2, 0),
            alu64_reg(op.BPF_ADD, 0, 1), alu64_imm(op.BPF_SUB, 1, 1),
            alu64_reg(op.BPF_XOR, 2, 0), jmp_imm(op.BPF_JNE, 1, 0, -4), exit_insn()]


def measure(vm: Interpreter, repeat: int) -> tuple[float, int]:
    rates = []
    for _ in range(repeat):
        t = time.perf_counter()
        vm.run(budget=10**9)
        rates.append(vm.executed / (time.perf_counter() - t))
    return statistics.median(rates), vm.executed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    loop = Interpreter(loop_program(250_000))
    text = (default_vector_dir() / "prime.data").read_text()
    vec = parse_vector(text.replace("mov %r1, 67", "mov %r1, 100003"), "prime")
    prime = Interpreter(vec.program())
    print(f"{'program':<12}{'insns/run':>12}{'insn/s (median)':>18}{'vs target':>11}")
    for name, vm in (("loop", loop), ("prime", prime)):
        rate, n = measure(vm, args.repeat)
        print(f"{name:<12}{n:>12,}{rate:>18,.0f}{rate / TARGET:>10.2f}x")


if __name__ == "__main__":
    main()
