"""``pyxdp bench prog``: ns/packet of an XDP program on pyxdp, optionally against Linux.

Both sides measure the way BPF_PROG_TEST_RUN with ``repeat`` does: one packet
laid out as test_run lays it out (256 bytes of headroom in a 4096-byte frame),
run N times in a row on the same buffer, nothing reset between runs, the
average time per run reported. On the JIT the N runs are one native call
(:meth:`pyxdp.net.prog.XdpProg.run_batch` with ``repeat``); on the
interpreter one Python-level run each. With ``--vs-kernel`` the same object
is loaded into Linux with the same map contents and test-run with the same
repeat count; the process is pinned to one CPU so per-CPU maps and caches
line up. The last line is ``ratio pyxdp/kernel: X``.

The helpers here are shared with ``bench/bench_xdp_prog.py``.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import numpy as np

from pyxdp.cli.options import CliError, _read_input
from pyxdp.cli.prog import _object, _program, fill_maps
from pyxdp.collection import Collection, Program
from pyxdp.elf import load_collection_spec
from pyxdp.net.prog import XdpProg
from pyxdp.net.xdp import PAGE_SIZE, SKB_SHARED_INFO_SIZE, XDP_PACKET_HEADROOM
from pyxdp.uapi.bpf import XdpAction
from pyxdp.vm.helpers import RunContext

__all__ = ["action_name", "cmd_bench_prog", "kernel_ns", "pin_cpu", "pyxdp_ns", "test_run_frame"]

MAX_LINEAR = PAGE_SIZE - XDP_PACKET_HEADROOM - SKB_SHARED_INFO_SIZE


def pin_cpu() -> int:
    """Pin this process to the CPU it runs on now (per-CPU maps and caches stay put)."""
    cpus = sorted(os.sched_getaffinity(0))
    cpu = cpus[0]
    os.sched_setaffinity(0, {cpu})
    return cpu


def action_name(act: int) -> str:
    try:
        return XdpAction(act).name
    except ValueError:
        return str(act)


def test_run_frame(data: bytes) -> np.ndarray:
    """``data`` in a one-frame array, where BPF_PROG_TEST_RUN would put it."""
    if len(data) > MAX_LINEAR:
        raise CliError(f"the packet has {len(data)} bytes; benchmarks take at most {MAX_LINEAR} "
                       "(no frags)")
    frames = np.zeros((1, PAGE_SIZE), np.uint8)
    frames[0, XDP_PACKET_HEADROOM:XDP_PACKET_HEADROOM + len(data)] = np.frombuffer(data,
                                                                                  np.uint8)
    return frames


def pyxdp_ns(prog: XdpProg, data: bytes, repeat: int, runs: int = 3,
             cpu: int = 0) -> tuple[float, int]:
    """Median ns per run of ``repeat`` runs on one test_run-shaped buffer; the verdict."""
    times = []
    act = 0
    for _ in range(max(runs, 1)):
        frames = test_run_frame(data)
        ctx = RunContext(cpu=cpu)
        t0 = time.perf_counter_ns()
        res = prog.run_batch(frames, XDP_PACKET_HEADROOM, len(data), repeat=repeat, ctx=ctx)
        times.append((time.perf_counter_ns() - t0) / max(repeat, 1))
        fault = res.fault(0)
        if fault is not None:
            raise CliError(f"the program faulted: {fault}")
        act = int(res.action[0])
    return statistics.median(times), act


def kernel_ns(program: Program, data: bytes, repeat: int, runs: int = 3) -> tuple[float, int]:
    """Median of the kernel's own duration (ns per run) over ``runs`` test runs."""
    times = []
    act = 0
    for _ in range(max(runs, 1)):
        r = program.test_run(data, repeat=repeat)
        times.append(float(r.duration_ns))
        act = r.retval
    return statistics.median(times), act


def _collection(obj: str, backend: str, engine: str, maps_in: str | None,
                verify: bool = True) -> Collection:
    spec = load_collection_spec(_object(obj))
    coll = Collection(spec, backend) if backend == "kernel" else \
        Collection(spec, backend, engine=engine, verify=verify)
    if maps_in:
        fill_maps(coll, maps_in)
    return coll


def cmd_bench_prog(obj: str, section: str | None, data_in: str, repeat: int | None,
                   engine: str, vs_kernel: bool, maps_in: str | None = None, runs: int = 3,
                   out: Callable[[str], None] = print, verify: bool = True) -> int:
    data = _read_input(data_in)
    if repeat is None:
        repeat = 1_000_000 if engine == "jit" else 10_000
    if repeat < 1:
        raise CliError("--repeat must be >= 1")
    if runs < 1:  # as 'bench seeds' and 'bench datapath' (it measured once, silently)
        raise CliError("--runs must be >= 1")
    cpu = pin_cpu()
    with _collection(obj, "userspace", engine, maps_in, verify) as coll:
        program = _program(coll, section)
        prog = program.handle
        assert isinstance(prog, XdpProg)
        pyxdp_ns(prog, data, min(repeat, 1000), 1, cpu)  # warm up
        ns, act = pyxdp_ns(prog, data, repeat, runs, cpu)
        name = program.name
    from pyxdp.cli.options import STYLE, emit
    doc: dict[str, object] = {"program": name, "object": obj, "bytes": len(data),
                              "repeat": repeat, "cpu": cpu, "engine": engine,
                              "pyxdp_ns": round(ns, 3), "action": action_name(act)}
    if not STYLE.json:
        out(f"program: {name} ({obj}), {len(data)}-byte packet, repeat {repeat:,} on CPU "
            f"{cpu} (the buffer is not reset between runs, as BPF_PROG_TEST_RUN)")
        out(f"pyxdp {engine}: {ns:.1f} ns/packet ({action_name(act)})")
    if not vs_kernel:
        if STYLE.json:
            emit(doc)
        return 0
    from pyxdp.kernel import bpf_available
    ok, why = bpf_available()
    if not ok:
        raise CliError(f"--vs-kernel needs root and BPF: {why}")
    with _collection(obj, "kernel", engine, maps_in) as kcoll:
        kprog = _program(kcoll, section)
        kernel_ns(kprog, data, min(repeat, 1000), 1)
        kns, kact = kernel_ns(kprog, data, repeat, runs)
    if STYLE.json:
        emit({**doc, "kernel_ns": round(kns, 3), "kernel_action": action_name(kact),
              "ratio": ns / kns if kns else None})
        return 0
    out(f"kernel: {kns:.1f} ns/packet ({action_name(kact)})")
    if kact != act:
        out("note: the verdicts differ")
    out(f"ratio pyxdp/kernel: {ns / kns:.3f}" if kns else "ratio pyxdp/kernel: n/a")
    return 0
