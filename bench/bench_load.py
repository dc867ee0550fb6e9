"""Load time: from a fresh process to the first packet's verdict, pyxdp beside Linux.

    python bench/bench_load.py [--repeat N] [--vs-kernel]

For each object (``samples/xdp1.o``, ``samples/lb.o``, ``samples/core.o`` and a
generated XDP program of about 3,000 instructions) a new Python process
imports pyxdp, loads the object on the userspace backend with the JIT and runs
one packet through BPF_PROG_TEST_RUN; the time from the start of the load to
the verdict is reported

* cold: with an empty JIT disk cache (``PYXDP_JIT_CACHE`` a fresh directory):
  what the first load of a program costs, LLVM optimising and generating code;
* warm: again with the cache the cold run filled: what every later process pays;
* tiered, cold: ``engine="tiered"``: the interpreter answers the first packet while
  a thread builds the JIT code (empty cache); "first packet" is the time to the
  verdict, "JIT ready" the time until machine code could take over (for a program
  of 1,000 instructions or more the QUICK pipeline's), "-O2 ready" until the -O2
  code could.

With ``--vs-kernel`` (root) the same process loads the object into Linux instead
(verifier and JIT) and runs the packet: Linux's figure. Each figure is the
median of ``--repeat`` processes; the interpreter's import is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.asm.macros import alu64_imm, alu64_reg, exit_insn, jmp_imm, ldx_mem, mov64_imm
from pyxdp.spec import CollectionSpec, ProgramSpec

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"

CHILD = """
import json, pickle, sys, time
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.packets import udp_packet
path, backend, engine = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
if path.endswith(".pickle"):
    with open(path, "rb") as f:
        spec = pickle.load(f)
else:
    spec = load_collection_spec(path)
with Collection(spec, backend, engine=engine) as coll:
    prog = next(iter(coll.programs.values()))
    prog.test_run(udp_packet(b"x" * 64))
    first = time.perf_counter() - t0
    ready = getattr(prog.handle, "jit_ready", None)
    if engine == "tiered" and ready is not None:
        ready.wait(600)
    jit = time.perf_counter() - t0
    optimised = getattr(prog.handle, "jit_optimised", None)
    if engine == "tiered" and optimised is not None:
        optimised.wait(600)
    print(json.dumps({"s": first, "jit": jit, "o2": time.perf_counter() - t0}))
"""


def large_program(blocks: int = 300) -> CollectionSpec:
    """An XDP program of about ``10 * blocks`` instructions: bounds-checked packet
    loads mixed into a running hash with a branch per block (a parser's shape); the
    verdict is the hash's low two bits (XDP_PASS for frames under 64 bytes)."""
    insns: list[Instruction] = [
        ldx_mem(4, 6, 1, 0), ldx_mem(4, 7, 1, 4),  # data, data_end
        mov64_imm(0, 2),
        alu64_imm(op.BPF_MOV, 8, 0), alu64_reg(op.BPF_ADD, 8, 6),
        alu64_imm(op.BPF_ADD, 8, 64),
    ]
    body: list[Instruction] = []
    for b in range(blocks):
        k = b % 60
        body += [
            ldx_mem(1, 2, 6, k), alu64_reg(op.BPF_ADD, 9, 2),
            alu64_imm(op.BPF_MUL, 9, 31), alu64_imm(op.BPF_XOR, 9, b),
            ldx_mem(2, 3, 6, k + 2), alu64_reg(op.BPF_XOR, 9, 3),
            jmp_imm(op.BPF_JGT, 9, b * 7919, 2),
            alu64_imm(op.BPF_ADD, 9, 1), alu64_imm(op.BPF_RSH, 9, 1),
            alu64_imm(op.BPF_AND, 9, 0xFFFFFF),
        ]
    # if data + 64 > data_end: skip the body and pass
    skip = Instruction(op.BPF_JMP | op.BPF_JGT | op.BPF_X, 8, 7, len(body))
    # The verdict is the hash's low bits: every instruction counts.
    verdict = [alu64_reg(op.BPF_MOV, 0, 9), alu64_imm(op.BPF_AND, 0, 3), exit_insn()]
    insns += [mov64_imm(9, 0), skip, *body, *verdict]
    prog = ProgramSpec(name="large", section="xdp", insns=tuple(insns), license="GPL")
    return CollectionSpec(programs={"large": prog}, maps={}, license="GPL", name="large")


def measure(path: str, backend: str, cache: str, repeat: int, engine: str = "auto"
            ) -> tuple[float, float, float]:
    """Median seconds to the first verdict, to JIT code being ready, to -O2 code."""
    env = dict(os.environ, PYXDP_JIT_CACHE=cache, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # byte-compiled modules, as an install has
    times, ready, o2 = [], [], []
    for _ in range(repeat):
        res = subprocess.run([sys.executable, "-c", CHILD, path, backend, engine], env=env,
                             capture_output=True, text=True, check=True, timeout=600)
        out = json.loads(res.stdout)
        times.append(out["s"])
        ready.append(out["jit"])
        o2.append(out["o2"])
    return statistics.median(times), statistics.median(ready), statistics.median(o2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--vs-kernel", action="store_true")
    args = ap.parse_args()
    import pickle

    with tempfile.TemporaryDirectory() as tmp:
        large = Path(tmp) / "large.pickle"
        spec = large_program()
        large.write_bytes(pickle.dumps(spec))
        objects = [("xdp1.o", str(SAMPLES / "xdp1.o")), ("lb.o", str(SAMPLES / "lb.o")),
                   ("core.o", str(SAMPLES / "core.o")),
                   (f"generated, {len(spec.programs['large'].insns)} insns", str(large))]
        print("| object | JIT cold (s) | JIT warm (s) | tiered cold: first packet (s) | "
              "tiered cold: JIT ready (s) | tiered cold: -O2 ready (s) |"
              + (" Linux (s) |" if args.vs_kernel else ""))
        print("|---|---|---|---|---|---|" + ("---|" if args.vs_kernel else ""))
        for name, path in objects:
            colds, firsts, readies, o2s = [], [], [], []
            for i in range(args.repeat):
                colds.append(measure(path, "userspace", str(Path(tmp) / f"cold{i}"), 1)[0])
                first, ready, o2 = measure(path, "userspace", str(Path(tmp) / f"tier{i}"), 1,
                                           "tiered")
                firsts.append(first)
                readies.append(ready)
                o2s.append(o2)
            cache = str(Path(tmp) / "cold0")
            warm = measure(path, "userspace", cache, args.repeat)[0]
            row = (f"| {name} | {statistics.median(colds):.3f} | {warm:.3f} | "
                   f"{statistics.median(firsts):.3f} | {statistics.median(readies):.3f} | "
                   f"{statistics.median(o2s):.3f} |")
            if args.vs_kernel:
                row += f" {measure(path, 'kernel', 'off', args.repeat)[0]:.3f} |"
            print(row, flush=True)


if __name__ == "__main__":
    main()
