"""pyxdp's JIT, its interpreter and Linux on the same XDP programs, side by side in one run.

    python bench/bench_xdp_prog.py [--runs N] [--repeat R] [--batch B]

For xdp1, xdp2 and lb, on the same packet (a 53-byte UDP/IPv4 frame to the lb
VIP 10.0.0.2:5678) and the same map contents (lb: four backends, the VIP with
two of them), each figure the median of ``--runs`` measurements, the process
pinned to one CPU. The JIT's compilations of a row and the kernel are measured
in turns (one measurement of each, ``--runs`` times over), so a shared
machine's changing load moves them alike and their ratios hold:

* ``jit batch``: ``--batch`` fresh copies of the frame (1024-byte frames,
  256 bytes of headroom) through :meth:`XdpProg.run_batch`, one native call
  with the GIL released, time per packet including the call - the program
  as ``Collection`` loads it: verified, its proven accesses unchecked;
* ``jit repeat``: one frame run ``--repeat`` times in one native call, nothing
  reset in between: what BPF_PROG_TEST_RUN's ``repeat`` measures;
* ``interp``: the interpreter measured the row's way (repeat, or a batch of
  fresh frames for ``lb (vip, fresh)``), one Python-level run per packet;
* ``kernel``: BPF_PROG_TEST_RUN with ``repeat`` (default 10,000,000), the
  kernel's own ns/packet (``duration``);
* ratios pyxdp/kernel for both JIT figures and the interpreter-to-JIT speed-up;
* ``checked``: the same program compiled without the verifier's facts (as
  ``verify=False`` loads it: every memory access checked), its batch and
  repeat figures, its repeat against the kernel's, and what the facts save;
* ``unchecked``: a compilation with every memory check off for accesses whose
  region the JIT's own hints know (an internal switch of this benchmark only):
  how far from no checks at all.

lb is shown three ways, because test_run's repeat does not reset the packet:
``lb`` is the VIP packet under test_run semantics (the first run encapsulates
it; every later run sees an IP-in-IP packet, is no VIP and tail-calls into
lb_non_vip - the kernel's figure is that path); ``lb (vip, fresh)`` is the
batch of fresh VIP frames, each hashed, looked up in the LRU connection table,
encapsulated with bpf_xdp_adjust_head and csum_diff (no kernel equivalent:
test_run cannot give each run a fresh packet); ``lb (vip drop)`` sends the
VIP flow to a backend without an address, so every run takes the vips hash,
conns LRU, backends array and stats path and drops without changing the
packet, a path the kernel's repeat measures as well.

Last, the compile time of xdp1 (uncached, Python lowering + LLVM).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pyxdp.cli.bench import action_name, kernel_ns, pin_cpu
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.packets import DEFAULT_DST_IP4, ip4, udp_packet
from pyxdp.net.prog import XdpProg
from pyxdp.net.xdp import PAGE_SIZE, XDP_PACKET_HEADROOM
from pyxdp.net.xdp_jit import XdpJit
from pyxdp.vm.helpers import RunContext
from pyxdp.vm.jit.engine import cache_clear

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
PACKET = udp_packet(b"hello pyxdp")


def _no_maps(coll: Collection) -> None:
    del coll


def _lb(backend_addr: bool) -> Callable[[Collection], None]:
    def populate(coll: Collection) -> None:
        for n in range(4):
            addr = ip4(f"10.1.0.{n + 1}") if backend_addr else bytes(4)
            coll.maps["backends"].update(n, addr + bytes([2, 0, 0, 0, 0, n + 1]) + b"\0\0")
        coll.maps["vips"].update(ip4(DEFAULT_DST_IP4) + struct.pack(">H", 5678) + bytes([17, 0]),
                                 struct.pack("<II", 0, 2))
    return populate


@dataclass
class Case:
    label: str
    obj: str
    prog: str
    populate: Callable[[Collection], None]
    kernel: bool = True  # the kernel's repeat measures the same path


CASES = [
    Case("xdp1", "xdp1", "xdp_prog1", _no_maps),
    Case("xdp2", "xdp2", "xdp_prog2", _no_maps),
    Case("lb", "lb", "lb_ingress", _lb(True)),
    Case("lb (vip, fresh)", "lb", "lb_ingress", _lb(True), kernel=False),
    Case("lb (vip drop)", "lb", "lb_ingress", _lb(False)),
]


def median_of(runs: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(max(runs, 1)))


# Batches use 1024-byte frames (four to a page: fewer TLB misses than one frame per page);
# the programs measured never look at the frame size (no bpf_xdp_adjust_tail).
BATCH_FRAME = 1024
_FRAMES: dict[tuple[int, int], np.ndarray] = {}


def frames_of(n: int, size: int = BATCH_FRAME) -> np.ndarray:
    """``n`` frames holding the packet, fresh: one array per shape, restored each time
    (the previous run may have encapsulated or rewritten it)."""
    frames = _FRAMES.get((n, size))
    if frames is None:
        frames = _FRAMES[(n, size)] = np.zeros((n, size), np.uint8)
    frames[:, :XDP_PACKET_HEADROOM + len(PACKET) + 64] = 0
    frames[:, XDP_PACKET_HEADROOM:XDP_PACKET_HEADROOM + len(PACKET)] = \
        np.frombuffer(PACKET, np.uint8)
    return frames


Runner = Callable[[np.ndarray, int, RunContext], Any]
# pyxdp's clock (--clock): wall time, or the thread's CPU time, which like the kernel's
# test-run timer (bpf_test_timer, stopped while the run is rescheduled) leaves out the
# time other processes take the CPU.
CLOCK: list[Callable[[], int]] = [time.perf_counter_ns]


def batch_ns(run: Runner, batch: int, cpu: int) -> float:
    """One batch of fresh frames (restored before the clock starts)."""
    frames = frames_of(batch)
    ctx = RunContext(cpu=cpu)
    t0 = CLOCK[0]()
    run(frames, 1, ctx)
    return (CLOCK[0]() - t0) / batch


_LAST: list[Any] = []  # the result of the latest repeat measurement (for its verdict)


def repeat_ns(run: Runner, repeat: int, cpu: int) -> float:
    frames = frames_of(1, PAGE_SIZE)  # test_run's frame
    ctx = RunContext(cpu=cpu)
    t0 = CLOCK[0]()
    res = run(frames, repeat, ctx)
    elapsed = (CLOCK[0]() - t0) / repeat
    _LAST[:] = [res]
    return elapsed


def jit_runner(prog: XdpProg) -> Runner:
    def run(frames: np.ndarray, repeat: int, ctx: RunContext) -> Any:
        res = prog.run_batch(frames, XDP_PACKET_HEADROOM, len(PACKET), repeat=repeat, ctx=ctx)
        assert res.fault(0) is None, res.fault(0)
        return res
    return run


def other_runner(prog: XdpProg, *, unchecked: bool) -> Runner:
    """The same program compiled without the verifier's facts (as ``verify=False``
    loads it: every access checked), or with the memory checks of known regions off."""
    jit = XdpJit(prog.spec.insns, maps=list(prog.maps.values()), helpers=prog._helpers,
                 ld_imm64=prog._resolve, ctx_loads=prog.ctx_loads, _unchecked=unchecked)

    def run(frames: np.ndarray, repeat: int, ctx: RunContext) -> Any:
        ctx.tail_call = prog._tail_call
        return jit.run_batch_xdp(frames, XDP_PACKET_HEADROOM, len(PACKET), repeat=repeat,
                                 ctx=ctx)
    return run


def interleaved(runs: int, fns: dict[str, Callable[[], float]]) -> dict[str, float]:
    """The median of each figure, the measurements taken in turns (a machine whose load
    changes during the run moves every figure alike)."""
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(max(runs, 1)):
        for k, fn in fns.items():
            samples[k].append(fn())
    return {k: statistics.median(v) for k, v in samples.items()}


def fmt(ns: float | None) -> str:
    if ns is None:
        return "-"
    if ns >= 10_000:
        return f"{ns / 1000:,.1f} us"
    return f"{ns:,.1f} ns"


def ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{a / b:.2f}"


def measure(case: Case, args: argparse.Namespace, cpu: int, kernel_ok: bool) -> dict[str, Any]:
    spec = load_collection_spec(SAMPLES / f"{case.obj}.o")
    row: dict[str, Any] = {"label": case.label}
    fresh = case.label.endswith("fresh)")
    with contextlib.ExitStack() as stack:
        jit = stack.enter_context(Collection(spec, "userspace", engine="jit"))
        interp = stack.enter_context(Collection(spec, "userspace", engine="interp"))
        for coll in (jit, interp):
            case.populate(coll)
        kprog = None
        if case.kernel and kernel_ok and not fresh:
            kern = stack.enter_context(Collection(spec, "kernel"))
            case.populate(kern)
            kprog = kern.programs[case.prog]
            kernel_ns(kprog, PACKET, 1000, 1)
        prog = jit.programs[case.prog].handle
        iprog = interp.programs[case.prog].handle
        assert isinstance(prog, XdpProg) and isinstance(iprog, XdpProg)
        assert prog.facts, "the benchmark measures verified programs"
        # The verified program's last: its repeat leaves the verdict in _LAST.
        runners = {"_checked": other_runner(prog, unchecked=False),
                   "_unchecked": other_runner(prog, unchecked=True), "": jit_runner(prog)}
        for run in runners.values():  # warm up (and the LRU entry lb adds)
            run(frames_of(64), 1, RunContext(cpu=cpu))
        if fresh or case.label != "lb":
            row.update({f"batch{k}": v for k, v in interleaved(args.runs, {
                k: functools.partial(batch_ns, run, args.batch, cpu)
                for k, run in runners.items()}).items()})
        irun = jit_runner(iprog)
        if not fresh:
            fns: dict[str, Callable[[], float]] = {
                k: functools.partial(repeat_ns, run, args.repeat, cpu)
                for k, run in runners.items()}
            kact: list[int] = []
            if kprog is not None:
                def kernel() -> float:
                    assert kprog is not None
                    ns, act = kernel_ns(kprog, PACKET, args.kernel_repeat, 1)
                    kact[:] = [act]
                    return ns
                fns["_kernel"] = kernel
            row.update({f"repeat{k}": v for k, v in interleaved(args.runs, fns).items()})
            row["kernel"] = row.pop("repeat_kernel", None)
            row["verdict"] = action_name(int(_LAST[0].action[0]))
            if kact:
                row["kernel_verdict"] = action_name(kact[0])
            # The interpreter the same way, fewer times.
            n_interp = max(args.repeat // 5000, 50)
            row["interp"] = median_of(args.runs, lambda: repeat_ns(irun, n_interp, cpu))
        else:
            res = runners[""](frames_of(1), 1, RunContext(cpu=cpu))
            row["verdict"] = action_name(int(res.action[0]))
            n_interp = max(args.batch // 16, 32)
            row["interp"] = median_of(args.runs, lambda: batch_ns(irun, n_interp, cpu))
    return row


def compile_time(runs: int) -> tuple[float, float, float]:
    spec = load_collection_spec(SAMPLES / "xdp1.o")
    lowering, llvm, total = [], [], []
    with Collection(spec, "userspace", engine="interp") as coll:
        prog = coll.programs["xdp_prog1"].handle
        assert isinstance(prog, XdpProg)
        for _ in range(max(runs, 3)):
            cache_clear()
            t0 = time.perf_counter()
            jit = XdpJit(prog.spec.insns, maps=list(prog.maps.values()), helpers=prog._helpers,
                         ld_imm64=prog._resolve, ctx_loads=prog.ctx_loads)
            code = jit.code
            total.append((time.perf_counter() - t0) * 1e3)
            lowering.append(code.lower_ms)
            llvm.append(code.llvm_ms)
    return statistics.median(total), statistics.median(lowering), statistics.median(llvm)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="measurements per figure (median)")
    ap.add_argument("--repeat", type=int, default=2_000_000,
                    help="pyxdp repeat count of one frame (default 2,000,000)")
    ap.add_argument("--kernel-repeat", type=int, default=10_000_000,
                    help="BPF_PROG_TEST_RUN repeat (default 10,000,000)")
    ap.add_argument("--batch", type=int, default=2048, help="frames per batch (default 2048)")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall",
                    help="pyxdp's clock: wall time, or the thread's CPU time (on a loaded "
                         "machine: the kernel's figure leaves preemption out too)")
    args = ap.parse_args(argv)
    CLOCK[0] = time.thread_time_ns if args.clock == "thread" else time.perf_counter_ns
    cpu = pin_cpu()
    from pyxdp.kernel import bpf_available
    kernel_ok, why = bpf_available()
    kernel = (f"BPF_PROG_TEST_RUN repeat {args.kernel_repeat:,}" if kernel_ok
              else f"unavailable ({why})")
    print(f"pinned to CPU {cpu}; {len(PACKET)}-byte UDP/IPv4 packet; median of {args.runs}; "
          f"pyxdp clock: {args.clock}; kernel: {kernel}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = [measure(c, args, cpu, kernel_ok) for c in CASES]
    head = (f"{'program':16} {'verdict':9} {'jit batch':>10} {'jit repeat':>11} "
            f"{'interp':>10} {'kernel':>9} {'batch/k':>8} {'repeat/k':>9} {'interp/jit':>11} "
            f"{'checked b/r':>17} {'checked/k':>10} {'facts save':>11} {'unchecked b/r':>17}")
    print(head)
    print("-" * len(head))
    # interp/jit and "facts save" compare the row's primary JIT figure: repeat if
    # measured, else the batch.
    for r in rows:
        best = r.get("repeat", r.get("batch"))
        checked = r.get("repeat_checked", r.get("batch_checked"))
        save = "-" if not best or not checked else f"{(1 - best / checked) * 100:.0f}%"
        cb = f"{fmt(r.get('batch_checked'))}/{fmt(r.get('repeat_checked'))}"
        ub = f"{fmt(r.get('batch_unchecked'))}/{fmt(r.get('repeat_unchecked'))}"
        verdict = r["verdict"] + ("" if r.get("kernel_verdict") in (None, r["verdict"])
                                  else f" (k: {r['kernel_verdict']})")
        print(f"{r['label']:16} {verdict:9} {fmt(r.get('batch')):>10} "
              f"{fmt(r.get('repeat')):>11} {fmt(r.get('interp')):>10} "
              f"{fmt(r.get('kernel')):>9} {ratio(r.get('batch'), r.get('kernel')):>8} "
              f"{ratio(r.get('repeat'), r.get('kernel')):>9} "
              f"{ratio(r.get('interp'), best):>10}x {cb:>17} "
              f"{ratio(r.get('repeat_checked'), r.get('kernel')):>10} {save:>11} {ub:>17}")
    total, lowering, llvm = compile_time(args.runs)
    print(f"compile xdp1 (uncached, median): {total:.1f} ms = lowering {lowering:.1f} ms + "
          f"LLVM O2 and link {llvm:.1f} ms (+ setup)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
