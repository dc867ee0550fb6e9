"""pyxdp's JIT, its interpreter and Linux on the same XDP programs, side by side in one run.

    python bench/bench_xdp_prog.py [--runs N] [--repeat R] [--batch B]

For xdp1, xdp2 and lb, on the same packet (a 53-byte UDP/IPv4 frame to the lb
VIP 10.0.0.2:5678) and the same map contents (lb: four backends, the VIP with
two of them), each figure the median of ``--runs`` measurements, the process
pinned to one CPU:

* ``jit batch``: ``--batch`` fresh copies of the frame (1024-byte frames,
  256 bytes of headroom) through :meth:`XdpProg.run_batch`, one native call
  with the GIL released, time per packet including the call;
* ``jit repeat``: one frame run ``--repeat`` times in one native call, nothing
  reset in between: what BPF_PROG_TEST_RUN's ``repeat`` measures;
* ``interp``: the interpreter measured the row's way (repeat, or a batch of
  fresh frames for ``lb (vip, fresh)``), one Python-level run per packet;
* ``kernel``: BPF_PROG_TEST_RUN with ``repeat`` (default 10,000,000), the
  kernel's own ns/packet (``duration``);
* ratios pyxdp/kernel for both JIT figures, the interpreter-to-JIT speed-up,
  and the cost of safety: the batch and repeat figures of a compilation with
  every memory check off for accesses whose region is known (an internal
  switch of this benchmark only) and what the checks add.

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


def batch_ns(run: Runner, batch: int, cpu: int) -> float:
    """One batch of fresh frames (restored before the clock starts)."""
    frames = frames_of(batch)
    ctx = RunContext(cpu=cpu)
    t0 = time.perf_counter_ns()
    run(frames, 1, ctx)
    return (time.perf_counter_ns() - t0) / batch


_LAST: list[Any] = []  # the result of the latest repeat measurement (for its verdict)


def repeat_ns(run: Runner, repeat: int, cpu: int) -> float:
    frames = frames_of(1, PAGE_SIZE)  # test_run's frame
    ctx = RunContext(cpu=cpu)
    t0 = time.perf_counter_ns()
    res = run(frames, repeat, ctx)
    elapsed = (time.perf_counter_ns() - t0) / repeat
    _LAST[:] = [res]
    return elapsed


def jit_runner(prog: XdpProg) -> Runner:
    def run(frames: np.ndarray, repeat: int, ctx: RunContext) -> Any:
        res = prog.run_batch(frames, XDP_PACKET_HEADROOM, len(PACKET), repeat=repeat, ctx=ctx)
        assert res.fault(0) is None, res.fault(0)
        return res
    return run


def unchecked_runner(prog: XdpProg) -> Runner:
    """The same program compiled with the memory checks of known regions off."""
    jit = XdpJit(prog.spec.insns, maps=list(prog.maps.values()), helpers=prog._helpers,
                 ld_imm64=prog._resolve, ctx_loads=prog.ctx_loads, _unchecked=True)

    def run(frames: np.ndarray, repeat: int, ctx: RunContext) -> Any:
        ctx.tail_call = prog._tail_call
        return jit.run_batch_xdp(frames, XDP_PACKET_HEADROOM, len(PACKET), repeat=repeat,
                                 ctx=ctx)
    return run


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
    with Collection(spec, "userspace", engine="jit") as jit, \
            Collection(spec, "userspace", engine="interp") as interp:
        for coll in (jit, interp):
            case.populate(coll)
        prog = jit.programs[case.prog].handle
        iprog = interp.programs[case.prog].handle
        assert isinstance(prog, XdpProg) and isinstance(iprog, XdpProg)
        run, unchecked = jit_runner(prog), unchecked_runner(prog)
        run(frames_of(64), 1, RunContext(cpu=cpu))  # warm up (and the LRU entry lb adds)
        unchecked(frames_of(64), 1, RunContext(cpu=cpu))
        if fresh or not case.kernel:
            row["batch"] = median_of(args.runs, lambda: batch_ns(run, args.batch, cpu))
            row["batch_unchecked"] = median_of(args.runs,
                                               lambda: batch_ns(unchecked, args.batch, cpu))
        irun = jit_runner(iprog)
        if not fresh:
            row["repeat"] = median_of(args.runs, lambda: repeat_ns(run, args.repeat, cpu))
            row["verdict"] = action_name(int(_LAST[0].action[0]))
            row["repeat_unchecked"] = median_of(args.runs,
                                                lambda: repeat_ns(unchecked, args.repeat, cpu))
            if case.label != "lb":
                row["batch"] = median_of(args.runs, lambda: batch_ns(run, args.batch, cpu))
                row["batch_unchecked"] = median_of(
                    args.runs, lambda: batch_ns(unchecked, args.batch, cpu))
            # The interpreter the same way, fewer times.
            n_interp = max(args.repeat // 5000, 50)
            row["interp"] = median_of(args.runs, lambda: repeat_ns(irun, n_interp, cpu))
        else:
            res = run(frames_of(1), 1, RunContext(cpu=cpu))
            row["verdict"] = action_name(int(res.action[0]))
            n_interp = max(args.batch // 16, 32)
            row["interp"] = median_of(args.runs, lambda: batch_ns(irun, n_interp, cpu))
    if case.kernel and kernel_ok:
        with Collection(spec, "kernel") as kern:
            case.populate(kern)
            kprog = kern.programs[case.prog]
            kernel_ns(kprog, PACKET, 1000, 1)
            row["kernel"], kact = kernel_ns(kprog, PACKET, args.kernel_repeat, args.runs)
            row["kernel_verdict"] = action_name(kact)
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
    args = ap.parse_args(argv)
    cpu = pin_cpu()
    from pyxdp.kernel import bpf_available
    kernel_ok, why = bpf_available()
    kernel = (f"BPF_PROG_TEST_RUN repeat {args.kernel_repeat:,}" if kernel_ok
              else f"unavailable ({why})")
    print(f"pinned to CPU {cpu}; {len(PACKET)}-byte UDP/IPv4 packet; median of {args.runs}; "
          f"kernel: {kernel}")
    rows = [measure(c, args, cpu, kernel_ok) for c in CASES]
    head = (f"{'program':16} {'verdict':9} {'jit batch':>10} {'jit repeat':>11} "
            f"{'interp':>10} {'kernel':>9} {'batch/k':>8} {'repeat/k':>9} {'interp/jit':>11} "
            f"{'unchecked b/r':>17} {'checks add':>11}")
    print(head)
    print("-" * len(head))
    # interp/jit and "checks add" compare the row's primary JIT figure: repeat if
    # measured, else the batch.
    for r in rows:
        best = r.get("repeat", r.get("batch"))
        unchecked = r.get("repeat_unchecked", r.get("batch_unchecked"))
        checks = "-" if not best or not unchecked else f"{(best / unchecked - 1) * 100:.0f}%"
        ub = f"{fmt(r.get('batch_unchecked'))}/{fmt(r.get('repeat_unchecked'))}"
        verdict = r["verdict"] + ("" if r.get("kernel_verdict") in (None, r["verdict"])
                                  else f" (k: {r['kernel_verdict']})")
        print(f"{r['label']:16} {verdict:9} {fmt(r.get('batch')):>10} "
              f"{fmt(r.get('repeat')):>11} {fmt(r.get('interp')):>10} "
              f"{fmt(r.get('kernel')):>9} {ratio(r.get('batch'), r.get('kernel')):>8} "
              f"{ratio(r.get('repeat'), r.get('kernel')):>9} "
              f"{ratio(r.get('interp'), best):>10}x {ub:>17} {checks:>11}")
    total, lowering, llvm = compile_time(args.runs)
    print(f"compile xdp1 (uncached, median): {total:.1f} ms = lowering {lowering:.1f} ms + "
          f"LLVM O2 and link {llvm:.1f} ms (+ setup)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
