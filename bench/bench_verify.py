"""Verification time: pyxdp's verifier beside Linux's BPF_PROG_LOAD, program by program.

    python bench/bench_verify.py [--repeat N] [--no-kernel] [--lb-stages N] [OBJ ...]

For every XDP program of every committed object (``samples/*.o``,
``samples/loader/*.o``) and for a generated load balancer of about 3,000
instructions, prints

* pyxdp: :func:`pyxdp.verifier.verify` on the linked program (CO-RE
  relocations applied first, as a load does), in milliseconds;
* Linux: the ``BPF_PROG_LOAD`` syscall for the same program (its verifier,
  then the JIT), in milliseconds, when root (``--no-kernel`` skips it);
* the ratio pyxdp / Linux, and the verdict of each (refused programs are
  timed up to the refusal).

Each figure is the median of ``--repeat`` runs in this process (the first
run, which imports and warms caches, is not counted), as CPU time of this
process (user + system: what the verification costs, also on a machine
other work shares) and, in brackets, wall time. The generated load
balancer parses Ethernet, IPv4 and TCP/UDP with bounds checks, then probes a
consistent-hashing ring ``--lb-stages`` times (each probe: a hash of the flow,
a ring lookup, a backend lookup, per-CPU counters), and rewrites the MAC
addresses before XDP_TX: the shape of a production L4 load balancer, with
its maps. Objects named on the command line (programs kept outside the
repository, such as katran's ``balancer_ingress``) are verified after the
committed ones; for every program the instructions pyxdp's verifier walked
(``processed N insns`` in Linux's log) are printed too.

``--against DIR`` times the verifier of another checkout (``DIR``'s
``pyxdp/verifier/verifier.py``, the rest of pyxdp from this one) run for run
alternately with this one's in the same process, so that both see the same
load on a shared machine: the two CPU medians, then ``after/before``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pyxdp.asm.assembler import assemble
from pyxdp.asm.insn import Instruction
from pyxdp.elf import load_collection_spec
from pyxdp.errors import PyxdpError, VerifierError
from pyxdp.spec import CollectionSpec, MapRef, MapSpec, ProgramSpec
from pyxdp.uapi.bpf import BpfMapType as MT
from pyxdp.verifier import verify
from pyxdp.verifier.verifier import VerifierResult

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
_TAG = 0x5EED0000


def _stage(k: int) -> str:
    """One probe of the ring: hash the flow with salt ``k``, find the backend, count."""
    return f"""
r1 = r7
r1 += 42
if r1 > r8 goto pass
r2 = *(u32 *)(r7 +26)
r3 = *(u32 *)(r7 +30)
r2 ^= r3
r3 = *(u32 *)(r7 +34)
r2 ^= r3
r2 *= 0x9e3779b1
r2 ^= {k}
r2 &= 63
*(u32 *)(r10 -4) = r2
r2 = r10
r2 += -4
r1 = MAP(ring)
call 1
if r0 == 0 goto pass
r9 = *(u32 *)(r0 +0)
if r9 > 255 goto next{k}
*(u32 *)(r10 -8) = r9
r2 = r10
r2 += -8
r1 = MAP(backends)
call 1
if r0 == 0 goto pass
r1 = *(u32 *)(r0 +0)
if r1 == 0 goto next{k}
*(u32 *)(r10 -12) = r1
r1 = *(u16 *)(r0 +4)
*(u16 *)(r10 -16) = r1
r1 = 0
*(u32 *)(r10 -20) = r1
r2 = r10
r2 += -20
r1 = MAP(stats)
call 1
if r0 == 0 goto pass
r1 = 1
lock *(u64 *)(r0 +0) += r1
r1 = *(u16 *)(r7 +16)
lock *(u64 *)(r0 +8) += r1
next{k}:
"""


def lb_program(stages: int = 72) -> CollectionSpec:
    """The generated load balancer (about ``40 * stages + 60`` instructions)."""
    body = "".join(_stage(k) for k in range(stages))
    asm = f"""
r6 = r1
r7 = *(u32 *)(r6 +0)
r8 = *(u32 *)(r6 +4)
r1 = r7
r1 += 34
if r1 > r8 goto pass
r1 = *(u16 *)(r7 +12)
if r1 != 8 goto pass
r1 = *(u8 *)(r7 +14)
r1 &= 15
if r1 != 5 goto pass
r1 = *(u8 *)(r7 +23)
if r1 == 6 goto l4
if r1 == 17 goto l4
goto pass
l4:
r1 = *(u32 *)(r7 +30)
*(u32 *)(r10 -24) = r1
r2 = r10
r2 += -24
r1 = MAP(vips)
call 1
if r0 == 0 goto pass
r1 = *(u32 *)(r0 +0)
if r1 == 0 goto pass
{body}
r1 = r7
r1 += 42
if r1 > r8 goto pass
r1 = *(u32 *)(r7 +0)
r2 = *(u16 *)(r7 +4)
r3 = *(u32 *)(r7 +6)
r4 = *(u16 *)(r7 +10)
*(u32 *)(r7 +0) = r3
*(u16 *)(r7 +4) = r4
*(u32 *)(r7 +6) = r1
*(u16 *)(r7 +10) = r2
r1 = *(u8 *)(r7 +22)
r1 += -1
*(u8 *)(r7 +22) = r1
r0 = 3
exit
pass:
r0 = 2
exit
"""
    names: list[str] = []

    def mark(text: str) -> str:
        out = []
        for line in text.splitlines():
            if "MAP(" in line:
                name = line.split("MAP(")[1].rstrip(")")
                names.append(name)
                line = line.split("MAP(")[0] + f"{_TAG + len(names) - 1:#x} ll"
            out.append(line)
        return "\n".join(out)

    insns = list(assemble(mark(asm)))
    refs = []
    for pc, i in enumerate(insns):
        if i.is_ld_imm64() and i.imm & ~0xFFFF == _TAG:
            refs.append(MapRef(pc, names[i.imm - _TAG], "fd"))
            insns[pc] = Instruction(i.code, i.dst, 0, 0, 0)
    maps = {
        "vips": MapSpec("vips", MT.BPF_MAP_TYPE_HASH, 4, 4, 512),
        "ring": MapSpec("ring", MT.BPF_MAP_TYPE_ARRAY, 4, 4, 64),
        "backends": MapSpec("backends", MT.BPF_MAP_TYPE_ARRAY, 4, 8, 256),
        "stats": MapSpec("stats", MT.BPF_MAP_TYPE_PERCPU_ARRAY, 4, 16, 1),
    }
    prog = ProgramSpec(name="lb_generated", section="xdp", insns=tuple(insns), license="GPL",
                       map_refs=tuple(refs))
    return CollectionSpec(programs={prog.name: prog}, maps=maps, license="GPL",
                          name="lb_generated")


Timing = tuple[float, float]  # CPU ms, wall ms


def _median(times: list[Timing]) -> Timing:
    return (statistics.median(t[0] for t in times) * 1e3,
            statistics.median(t[1] for t in times) * 1e3)


Verify = Callable[..., VerifierResult]


def _other_verify(checkout: Path) -> Verify:
    """``verify`` of another checkout's verifier module (imported beside this one's)."""
    path = checkout / "pyxdp" / "verifier" / "verifier.py"
    spec = importlib.util.spec_from_file_location("pyxdp.verifier._against", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: no verifier module to compare against")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod.verify  # type: ignore[no-any-return]


def _time_pyxdp(spec: CollectionSpec, prog: ProgramSpec, repeat: int,
                other: Verify | None = None) -> tuple[Timing, str, int, float]:
    """This checkout's median timing, verdict and walk; with ``other``, its median CPU
    ms over runs alternating with this one's."""
    times: list[Timing] = []
    theirs: list[Timing] = []
    verdict = "accepted"
    walked = 0
    for n in range(repeat + 1):
        for fn in (verify, other) if other is not None else (verify,):
            c0, t0 = time.process_time(), time.perf_counter()
            try:
                got = fn(prog, spec.maps, btf=spec.btf).insns_processed
            except VerifierError as e:
                got = -1
                if fn is verify:
                    verdict = f"refused: {e.reason}"
            dt = (time.process_time() - c0, time.perf_counter() - t0)
            if fn is verify:
                walked = max(got, 0)
            if n:
                (times if fn is verify else theirs).append(dt)
    return _median(times), verdict, walked, (_median(theirs)[0] if theirs else 0.0)


def _time_linux(spec: CollectionSpec, name: str, repeat: int) -> tuple[Timing, str]:
    from pyxdp.kernel.backend import KernelBackend
    from pyxdp.kernel.verifier_log import verifier_reason
    kb = KernelBackend(spec)
    times = []
    verdict = "accepted"
    try:
        handles: dict[str, object] = {}
        for mname, ms in spec.maps.items():
            handles[mname] = kb.create_map(ms, handles)  # type: ignore[arg-type]
        for n in range(repeat + 1):
            c0, t0 = time.process_time(), time.perf_counter()
            try:
                h = kb.load_program(spec.programs[name], handles)  # type: ignore[arg-type]
                dt = (time.process_time() - c0, time.perf_counter() - t0)
                getattr(h, "close", lambda: None)()
            except VerifierError as e:
                dt = (time.process_time() - c0, time.perf_counter() - t0)
                verdict = f"refused: {verifier_reason(e.log)}"
            except PyxdpError as e:  # e.g. a kfunc this kernel's BTF lacks
                return (0.0, 0.0), f"not loaded: {e}"
            if n:
                times.append(dt)
    finally:
        kb.close()
    return _median(times), verdict


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-kernel", action="store_true")
    ap.add_argument("--lb-stages", type=int, default=72)
    ap.add_argument("--against", type=Path, metavar="DIR",
                    help="another checkout whose verifier is timed alternately with this one")
    ap.add_argument("objects", nargs="*", type=Path, help="more objects to verify")
    args = ap.parse_args(argv)
    other = _other_verify(args.against) if args.against else None
    kernel = not args.no_kernel and os.geteuid() == 0
    objects = sorted(SAMPLES.glob("*.o")) + sorted((SAMPLES / "loader").glob("*.o"))
    rows: list[tuple[str, CollectionSpec, str]] = []
    for path in objects + list(args.objects):
        try:
            spec = load_collection_spec(path)
        except (OSError, PyxdpError) as e:
            print(f"{path}: not loaded: {e}", file=sys.stderr)
            return 1
        label = str(path.relative_to(SAMPLES)) if path.is_relative_to(SAMPLES) else path.name
        for name, prog in spec.programs.items():
            if prog.prog_type == "xdp" and path.name != "xsk_redirect.o":
                rows.append((f"{label}:{name}", spec, name))
    lb = lb_program(args.lb_stages)
    rows.append((f"generated LB ({len(lb.programs['lb_generated'].insns)} insns)", lb,
                 "lb_generated"))
    extra = f" {'before ms':>9} {'after/before':>12}" if other is not None else ""
    print(f"{'program':42} {'insns':>5} {'walked':>7} {'pyxdp ms (wall)':>16} "
          f"{'Linux ms (wall)':>16} {'ratio':>6}{extra}  verdict")
    for label, spec, name in rows:
        prog = spec.programs[name]
        try:
            mine, verdict, walked, before = _time_pyxdp(spec, prog, args.repeat, other)
        except PyxdpError as e:
            print(f"{label:42} {len(prog.insns):5}  not verified: {e}")
            continue
        linux = ""
        ratio = ""
        if kernel:
            theirs, lverdict = _time_linux(spec, name, args.repeat)
            if not lverdict.startswith("not loaded"):
                linux = f"{theirs[0]:7.2f} ({theirs[1]:6.2f})"
                ratio = f"{mine[0] / max(theirs[0], 1e-3):6.1f}"
            if lverdict != verdict:
                verdict += f" (Linux: {lverdict})"
        if other is not None:
            extra = f" {before:9.2f} {mine[0] / max(before, 1e-3):12.3f}"
        print(f"{label:42} {len(prog.insns):5} {walked:7} {mine[0]:7.2f} ({mine[1]:7.2f}) "
              f"{linux:>16} {ratio:>6}{extra}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
