"""Native twins of the ring buffer helpers and bpf_perf_event_output on the JIT against
the Python reference (the interpreter): the same r0 and the same ring memory (records,
positions, length words; perf rings' sample and lost records) over randomized batches
(wrapping records, full rings, discards, bad flags, missing or foreign-CPU perf slots),
and no Python per packet on the JIT."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from pyxdp.collection import Collection
from pyxdp.maps import perf_event_array, ringbuf
from pyxdp.net import filter as net_filter
from pyxdp.net.prog import jit_available
from pyxdp.spec import MapSpec
from pyxdp.testing.native import agree_natively
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.vm import helpers_more
from pyxdp.vm.helpers import RunContext

pytestmark = pytest.mark.skipif(not jit_available(), reason="llvmlite is not installed: no JIT")

RINGBUF = int(BpfMapType.BPF_MAP_TYPE_RINGBUF)
PERF = int(BpfMapType.BPF_MAP_TYPE_PERF_EVENT_ARRAY)

# The packet's first u32 is the key, the second's low byte the operation, its upper bytes
# the flags.
_KEYS = """
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 8
if r4 > r3 goto short
r6 = *(u32 *)(r2 +0)
r7 = *(u32 *)(r2 +4)
r8 = r7
r8 >>= 8
r7 &= 255
""" + "".join(f"*(u64 *)(r10 -{8 * k}) = r6\n" for k in range(1, 9))
# 1, 2: reserve 20 / 1000 bytes, write the key, submit (key even) or discard; 3: query
# (flags: the key's low 3 bits); else output key % 64 stack bytes.
_RESERVE = """
r1 = map[fd:0]
r2 = {size}
r3 = r8
call 131
if r0 == 0 goto none
*(u32 *)(r0 +0) = r6
*(u32 *)(r0 +16) = r7
r1 = r0
r2 = 0
if r6 & 1 goto disc{size}
call 132
r0 = 1
exit
disc{size}:
call 133
r0 = 3
exit
"""
RING_OPS = _KEYS + """
if r7 == 1 goto res20
if r7 == 2 goto res1000
if r7 == 3 goto query
r1 = map[fd:0]
r2 = r10
r2 += -64
r3 = r6
r3 &= 63
r4 = r8
call 130
exit
query:
r1 = map[fd:0]
r2 = r6
r2 &= 7
call 134
exit
res20:
""" + _RESERVE.format(size=20) + "res1000:\n" + _RESERVE.format(size=1000) + """
none:
r0 = 7
exit
short:
r0 = 2
exit
"""


def _frames(rows: list[tuple[int, int]]) -> np.ndarray:
    frames = np.zeros((len(rows), 512), np.uint8)
    for i, (key, op) in enumerate(rows):
        frames[i, 256:264] = np.frombuffer(struct.pack("<II", key, op), np.uint8)
    return frames


def _ring_ops(seed: int, engine: str) -> list[object]:
    rng = random.Random(seed)
    spec = asm_collection(RING_OPS, [MapSpec("m", RINGBUF, 0, 0, 4096)])
    out: list[object] = []
    with Collection(spec, "userspace", engine=engine) as c:
        prog = c.programs["t"].handle
        rb = c.maps["m"].handle
        for _round in range(4):
            ops = (0, 0, 1, 1, 2, 3, 0x100, 0x200, 0x400, 0x401, 0x102)
            rows = [(rng.randrange(1 << 32), rng.choice(ops)) for _ in range(40)]
            r = prog.run_batch(_frames(rows), 256, 64, ctx=RunContext())
            out += [r.action.tolist(), rb.data.tobytes(), rb.pos.tolist(), rb.lens.tolist()]
            # user space reads some (the ring wraps)
            out.append(list(rb.consume(limit=rng.randrange(1, 30)) for _ in range(1)))
    return out


def test_ringbuf_twins_are_python() -> None:
    rb = ringbuf.RingBuf
    agree_natively(_ring_ops, [rb.reserve, rb._commit, rb.output, rb.query,
                                helpers_more._ringbuf_output,
                                helpers_more._ringbuf_reserve, helpers_more._commit,
                                helpers_more._ringbuf_query])


# -- bpf_perf_event_output ------------------------------------------------------------------

# bpf_perf_event_output(ctx, &m, index (the key) | ctx_len (the op's upper bytes) << 32,
# the stack, the op's low 6 bits)
PERF_OUTPUT = _KEYS + """
r2 = map[fd:0]
r3 = r6
r8 <<= 32
r3 |= r8
r4 = r10
r4 += -64
r5 = r7
r5 &= 63
call 25
exit
short:
r0 = 2
exit
"""


def _perf_outputs(seed: int, engine: str) -> list[object]:
    rng = random.Random(seed)
    spec = asm_collection(PERF_OUTPUT, [MapSpec("m", PERF, 4, 4, 4)])
    out: list[object] = []
    with Collection(spec, "userspace", engine=engine) as c:
        prog = c.programs["t"].handle
        pe = c.maps["m"].handle
        lost: list[tuple[int, int]] = []
        pb = perf_event_array.PerfBuffer(pe, 1, cpus=[0, 1], lost_cb=lambda *a: lost.append(a))
        for _round in range(5):
            # the run's CPU's slot, another CPU's, empty ones, past the end; whole, short,
            # too long (EFAULT) packet samples, unknown flag bits (EINVAL); a full ring
            # (ENOSPC, then a lost record)
            rows = [(rng.choice((0, 0, 0, 0, 1, 2, 9, 0xFFFF_FFFF, 0xFFFF_FFFF)),
                     rng.randrange(64) | rng.choice((0, 8, 64, 64, 64, 65, 0x10_0005)) << 8)
                    for _ in range(40)]
            r = prog.run_batch(_frames(rows), 256, 64, ctx=RunContext())
            ring = pb.rings[0]
            out += [r.action.tolist(), ring.data.tobytes(), ring.ctl.tolist()]
            if _round % 2:  # user space reads some records
                out.append([ring.read() for _ in range(rng.randrange(1, 12))])
        out += [pb.poll(lambda cpu, data: out.append((cpu, data))), lost, pb.lost]
    return out


def test_perf_event_output_twin_is_python() -> None:
    pe = perf_event_array.PerfEventArray
    agree_natively(_perf_outputs, [pe.output, pe.try_output, perf_event_array.PerfRing.write,
                                    net_filter._xdp_event_output])
