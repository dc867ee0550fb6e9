"""Thousands of random XDP programs: the JIT (native helpers and maps, batches and single
runs) against the reference interpreter.

Programs come from :mod:`pyxdp.testing.fuzz_maps` (packet access, xdp_md loads, map
lookups/updates/deletes on small maps, redirects, csum_diff, the adjust helpers,
load/store_bytes, a bpf-to-bpf call) and :func:`pyxdp.testing.fuzz.runnable_programs`
(pure ISA, wrapped to run on the packet). Every outcome must be identical: verdicts,
the frames' bytes and edges, fault types, pcs and messages, redirect records and every
array of every map's storage afterwards.

Compile time would dominate (about 20 ms per program at -O2), so most programs are
compiled at -O0 in groups of :data:`GROUP` sharing one LLVM module
(:func:`pyxdp.vm.jit.engine.compile_together`); a few hundred more at -O2 and with the
tiered engine's QUICK pipeline.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("llvmlite")

from pyxdp.asm import opcodes as op  # noqa: E402
from pyxdp.asm.insn import Instruction  # noqa: E402
from pyxdp.errors import InvalidProgram  # noqa: E402
from pyxdp.net.prog import XdpBatchResult, XdpProg  # noqa: E402
from pyxdp.spec import ProgramSpec  # noqa: E402
from pyxdp.testing.fuzz import runnable_programs  # noqa: E402
from pyxdp.testing.fuzz_maps import (  # noqa: E402
    FuzzCase,
    make_maps,
    restore,
    snapshot,
    xdp_programs,
)
from pyxdp.vm.helpers import RunContext  # noqa: E402
from pyxdp.vm.jit.engine import QUICK, compile_together  # noqa: E402

GROUP = 40
# 4,720 + 200 + 80 + 160 = 5,160 programs in CI; PYXDP_FUZZ_SCALE=10 for a longer local run.
SCALE = int(os.environ.get("PYXDP_FUZZ_SCALE", "1"))
BULK_EXAMPLES = 118 * SCALE
HEADROOM = 256
FRAME = 1024


def frames_for(case: FuzzCase) -> tuple[np.ndarray, list[int], list[int], list[int]]:
    frames = np.zeros((len(case.packets), FRAME), np.uint8)
    off, ln, meta = [], [], []
    for i, (payload, mlen) in enumerate(case.packets):
        frames[i, HEADROOM - mlen:HEADROOM] = (np.arange(mlen) * 7 + 1) & 0xFF
        frames[i, HEADROOM:HEADROOM + len(payload)] = np.frombuffer(payload, np.uint8)
        off.append(HEADROOM)
        ln.append(len(payload))
        meta.append(mlen)
    return frames, off, ln, meta


def clock() -> Any:
    counter = itertools.count(1_000_000_007, 977)
    return lambda: next(counter)


def outcome(prog: XdpProg, case: FuzzCase, maps: dict[str, Any], single: bool) -> tuple[Any, ...]:
    frames, off, ln, meta = frames_for(case)
    ctx = RunContext(cpu=case.cpu, clock_ns=clock())
    if single:  # one run() per frame: the JIT's batch-of-one path over an XdpBuff
        res: XdpBatchResult = prog._run_batch_interp(frames, off, ln, meta, 0, 1, ctx, 1)
    else:
        res = prog.run_batch(frames, off, ln, meta, ctx=ctx)
    faults = []
    for i in range(len(res)):
        e = res.fault(i)
        faults.append(None if e is None else (type(e).__name__, e.pc, str(e)))
    state = {k: v.tobytes() for k, v in snapshot(maps).items()}
    ri = ctx.ri.describe() if ctx.ri is not None else None
    tv = ctx.ri.tgt_value if ctx.ri is not None else None
    return (res.action.tolist(), res.data_off.tolist(), res.data_len.tolist(),
            res.meta_len.tolist(), faults, [res.redirect(i) for i in range(len(res))],
            frames.tobytes(), state, ri, tv)


def check_group(cases: list[FuzzCase], opt_level: int) -> None:
    """Both engines on every case, the JIT programs compiled as one module."""
    built = []
    with compile_together(opt_level):
        for case in cases:
            maps = make_maps()
            try:
                ref = XdpProg(case.spec, maps, engine="interp", budget=case.budget)
            except InvalidProgram as e:
                with pytest.raises(InvalidProgram) as j:
                    XdpProg(case.spec, maps, engine="jit", budget=case.budget)
                assert str(j.value) == str(e)
                continue
            jit = XdpProg(case.spec, maps, engine="jit", budget=case.budget)
            built.append((case, maps, ref, jit))
    for n, (case, maps, ref, jit) in enumerate(built):
        before = snapshot(maps)
        want = outcome(ref, case, maps, False)
        restore(maps, before)
        got = outcome(jit, case, maps, n % 3 == 2)
        if got != want:
            from pyxdp.asm.disasm import format_insn
            listing = "\n".join(f"{pc:4}: {format_insn(case.spec.insns, pc)}"
                                for pc in range(len(case.spec.insns)))
            for k, (g, w) in enumerate(zip(got, want, strict=True)):
                assert g == w, f"outcome field {k} differs (seed {case.seed}, cpu {case.cpu}, " \
                               f"budget {case.budget}, packets {case.packets}):\n{listing}"


_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                    suppress_health_check=_SUPPRESS)


@_settings(BULK_EXAMPLES)
@given(st.lists(xdp_programs(), min_size=GROUP, max_size=GROUP))
def test_bulk_random_xdp_programs_at_o0(cases: list[FuzzCase]) -> None:
    check_group(cases, opt_level=0)


@_settings(10 * SCALE)
@given(st.lists(xdp_programs(), min_size=20, max_size=20))
def test_random_xdp_programs_at_o2(cases: list[FuzzCase]) -> None:
    check_group(cases, opt_level=2)


@_settings(2 * SCALE)
@given(st.lists(xdp_programs(), min_size=GROUP, max_size=GROUP))
def test_random_xdp_programs_quick(cases: list[FuzzCase]) -> None:
    """The tiered engine's first machine code for a large program (engine.QUICK)."""
    check_group(cases, opt_level=QUICK)


def _wrap(insns: tuple[Instruction, ...], buf: bytes) -> FuzzCase:
    """A runnable_programs() program as XDP: r1 = ctx->data (the buffer), r2 its length;
    the packet is the buffer (padded to an Ethernet header) and r0 the verdict."""
    pro = [Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, 6, 1, 0, 0),
           Instruction(op.BPF_LDX | op.BPF_MEM | op.BPF_W, 1, 6, 0, 0),
           Instruction(op.BPF_LDX | op.BPF_MEM | op.BPF_W, 2, 6, 4, 0),
           Instruction(op.BPF_ALU64 | op.BPF_SUB | op.BPF_X, 2, 1, 0, 0)]
    spec = ProgramSpec("isa", "xdp", tuple(pro) + insns, license="GPL")
    return FuzzCase(spec, [(buf.ljust(14, b"\0"), 0)], 1_000_000, 0)


@_settings(20 * SCALE)
@given(st.lists(runnable_programs(max_blocks=25), min_size=8, max_size=8))
def test_isa_programs_on_the_xdp_path(progs: list[tuple[tuple[Instruction, ...], bytes]]
                                      ) -> None:
    check_group([_wrap(insns, buf) for insns, buf in progs], opt_level=0)
