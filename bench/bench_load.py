"""Load time: from a fresh process to the first packet's verdict, pyxdp beside Linux.

    python bench/bench_load.py [--repeat N] [--vs-kernel] [--clock cpu|wall] [--stages]

For each object (``samples/xdp1.o``, ``samples/lb.o``, ``samples/core.o``, a
generated parser of about 3,000 instructions and the generated load balancer of
``bench/bench_verify.py``, about 3,000 instructions with four maps) a new Python
process loads the object on the userspace backend (verifier included) and runs
one packet through BPF_PROG_TEST_RUN; from the start of the load it reports

* JIT cold: the verdict with an empty disk cache (``PYXDP_JIT_CACHE`` a fresh
  directory) on the JIT: the -O2 code is ready then;
* warm: the verdict again with the cache the cold run filled (the verifier's
  acceptance and the machine code both from disk): what every later process pays;
* tiered cold: ``engine="tiered"``, empty cache: "first packet" is the
  interpreter's verdict while a thread builds machine code, "-O2 ready" the time
  until the -O2 code could take over (for a program of 1,000 instructions or more
  QUICK code comes first);
* tiered warm: the interpreter's first verdict again, with the cache the tiered
  cold run filled (the verifier's acceptance from disk; the thread reads the -O2
  code from disk after the first run);
* Linux (``--vs-kernel``, root): the same process loads the object into Linux
  instead (its verifier and JIT in BPF_PROG_LOAD, the maps created) and runs the
  packet; then the ratios pyxdp / Linux.

``--stages`` prints instead, per object, the CPU milliseconds of each stage of the
tiered cold load and of the warm JIT load: reading the object, importing the
userspace backend, creating the maps, verifying (or reading the verdict from the
disk cache), setting the program up (the interpreter, or lowering, LLVM and linking
for the JIT) and the first run.

``--whole-process`` counts from each process's start instead: the interpreter's
start-up and every import (``pyxdp.collection``, the ELF reader with pyelftools,
numpy) come in, as a one-shot tool pays them, for Linux's load too.

``--clock cpu`` (the default) counts the process's CPU time (user + system, every
thread: the tiered engine's compile thread too, and Linux's verifier, which runs
in the loading process's system call), so figures hold on a machine other work
shares; ``--clock wall`` the elapsed time. Each figure is the median of
``--repeat`` processes; the imports of ``pyxdp.collection`` and the ELF reader are
not counted (the userspace backend's own imports are).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
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
def now():
    return time.perf_counter(), time.process_time()
# --whole-process: from the spawn (the parent's clock) and the process's first CPU cycle
t0 = (float(sys.argv[4]), 0.0) if len(sys.argv) > 4 else now()
if path.endswith(".pickle"):
    with open(path, "rb") as f:
        spec = pickle.load(f)
else:
    spec = load_collection_spec(path)
with Collection(spec, backend, engine=engine) as coll:
    prog = next(iter(coll.programs.values()))
    prog.test_run(udp_packet(b"x" * 64))
    first = now()
    optimised = getattr(prog.handle, "jit_optimised", None)
    if engine == "tiered" and optimised is not None:
        optimised.wait(600)
    o2 = now()
    print(json.dumps({"wall": [first[0] - t0[0], o2[0] - t0[0]],
                      "cpu": [first[1] - t0[1], o2[1] - t0[1]]}))
"""

# --stages: the same load with CPU time per stage (inclusive spans, milliseconds).
STAGES_CHILD = """
import json, pickle, sys, time
import pyxdp.collection as C
from pyxdp.elf import load_collection_spec
from pyxdp.net.packets import udp_packet
path, engine = sys.argv[1], sys.argv[2]
spans = {}
def timed(owner, name, label):
    f = getattr(owner, name)
    def w(*a, **k):
        t = time.process_time()
        try:
            return f(*a, **k)
        finally:
            spans[label] = spans.get(label, 0.0) + time.process_time() - t
    setattr(owner, name, w)
t0 = time.process_time()  # the backend's imports first, to time its methods
from pyxdp.userspace import UserspaceBackend
spans["backend import"] = time.process_time() - t0
timed(C, "_make_backend", "backend import")
timed(C, "_verify", "verification")
timed(UserspaceBackend, "create_map", "maps")
timed(UserspaceBackend, "load_program", "program set-up")
t = time.process_time()
if path.endswith(".pickle"):
    with open(path, "rb") as f:
        spec = pickle.load(f)
else:
    spec = load_collection_spec(path)
spans["object read"] = time.process_time() - t
with C.Collection(spec, "userspace", engine=engine) as coll:
    prog = next(iter(coll.programs.values()))
    t = time.process_time()
    prog.test_run(udp_packet(b"x" * 64))
    spans["first run"] = time.process_time() - t
    spans["first packet"] = time.process_time() - t0
print(json.dumps(spans))
"""
STAGES = ("object read", "backend import", "maps", "verification", "program set-up",
          "first run", "first packet")


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


def measure(path: str, backend: str, cache: str, engine: str, clock: str,
            whole: bool = False) -> tuple[float, float]:
    """Seconds (``clock``) from the start of the load to the first verdict and to -O2
    code being ready, in a new process; ``whole``: from the process's start instead."""
    env = dict(os.environ, PYXDP_JIT_CACHE=cache, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # byte-compiled modules, as an install has
    argv = [sys.executable, "-c", CHILD, path, backend, engine]
    if whole:
        argv.append(repr(time.perf_counter()))
    res = subprocess.run(argv, env=env, capture_output=True, text=True, check=True,
                         timeout=600)
    first, o2 = json.loads(res.stdout)[clock]
    return first, o2


def stages(path: str, cache: str, engine: str) -> dict[str, float]:
    """CPU seconds of each stage of a load to the first verdict, in a new process (the
    backend's imports are counted in "backend import", as ``measure`` counts them)."""
    env = dict(os.environ, PYXDP_JIT_CACHE=cache, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    res = subprocess.run([sys.executable, "-c", STAGES_CHILD, path, engine], env=env,
                         capture_output=True, text=True, check=True, timeout=600)
    out: dict[str, float] = json.loads(res.stdout)
    return out


def stage_table(tmp: Path, repeat: int) -> None:
    """Per object, the median CPU milliseconds of each stage: tiered with an empty cache
    (the interpreter's first verdict), then the JIT warm (the cache that run filled)."""
    cols = [f"{kind}: {st}" for kind in ("tiered cold", "JIT warm") for st in STAGES]
    print("CPU milliseconds per stage, median of", repeat, "processes")
    print("| object | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for name, path in objects(tmp):
        cells = []
        for i, engine in enumerate(("tiered", "auto")):
            runs = [stages(path, f"{tmp}/stage{k}", engine) for k in range(repeat)]
            if i == 0:  # the JIT's -O2 code for the warm runs, built once
                for k in range(repeat):
                    measure(path, "userspace", f"{tmp}/stage{k}", "auto", "cpu")
            cells += [f"{statistics.median(r.get(st, 0.0) for r in runs) * 1e3:.1f}"
                      for st in STAGES]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def objects(tmp: Path) -> list[tuple[str, str]]:
    """(label, path) of every object measured; the generated ones pickled into ``tmp``."""
    import pickle

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_verify import lb_program

    out = [(name, str(SAMPLES / name)) for name in ("xdp1.o", "lb.o", "core.o")]
    for label, spec in (("generated parser", large_program()),
                        ("generated lb (bench_verify)", lb_program())):
        path = tmp / f"{len(out)}.pickle"
        path.write_bytes(pickle.dumps(spec))
        insns = sum(len(p.insns) for p in spec.programs.values())
        out.append((f"{label}, {insns:,} insns", str(path)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--vs-kernel", action="store_true")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--stages", action="store_true",
                    help="CPU time per stage of the load instead (imports, verification, ...)")
    ap.add_argument("--whole-process", action="store_true",
                    help="count from the process's start (interpreter start-up and every "
                         "import, the ELF reader's too) instead of the load's")
    args = ap.parse_args()
    w = args.whole_process
    med = statistics.median
    if args.stages:
        with tempfile.TemporaryDirectory() as tmp:
            stage_table(Path(tmp), args.repeat)
        return
    with tempfile.TemporaryDirectory() as tmp:
        cols = ["JIT cold: -O2 ready", "warm: first packet", "tiered cold: first packet",
                "tiered cold: -O2 ready", "tiered warm: first packet"]
        if args.vs_kernel:
            cols += ["Linux", "warm / Linux", "tiered first / Linux", "-O2 ready / Linux",
                     "tiered warm / Linux"]
        print(f"seconds of {'CPU' if args.clock == 'cpu' else 'wall'} time, median of "
              f"{args.repeat} processes" + (", from each process's start" if w else ""))
        print("| object | " + " | ".join(cols) + " |")
        print("|---|" + "---|" * len(cols))
        for name, path in objects(Path(tmp)):
            colds, firsts, o2s = [], [], []
            for i in range(args.repeat):
                colds.append(measure(path, "userspace", f"{tmp}/cold{i}", "auto", args.clock,
                                     w)[0])
                first, o2 = measure(path, "userspace", f"{tmp}/tier{i}", "tiered", args.clock, w)
                firsts.append(first)
                o2s.append(o2)
            warm = med(measure(path, "userspace", f"{tmp}/cold0", "auto", args.clock, w)[0]
                       for _ in range(args.repeat))
            tiered_warm = med(measure(path, "userspace", f"{tmp}/tier{i}", "tiered",
                                      args.clock, w)[0] for i in range(args.repeat))
            row = [med(colds), warm, med(firsts), med(o2s), tiered_warm]
            cells = [f"{v:.3f}" for v in row]
            if args.vs_kernel:
                linux = med(measure(path, "kernel", "off", "auto", args.clock, w)[0]
                            for _ in range(args.repeat))
                cells += [f"{linux:.3f}", f"{warm / linux:.1f}x", f"{row[2] / linux:.1f}x",
                          f"{min(row[0], row[3]) / linux:.1f}x", f"{tiered_warm / linux:.1f}x"]
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
