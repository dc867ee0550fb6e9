"""BPF_PROG_TEST_RUN's context rules for XDP against Linux 6.18: ``ctx.data_end`` below
the input size (the linear part; the rest in frags, capped at 3520 + metadata, down to
0), the metadata bounds (4-aligned, at most 256 - sizeof(struct xdp_frame)), inputs
shorter than an Ethernet header, and ``ctx_out`` alone (a zeroed context): the same
verdicts, errnos, output frames and ``ctx_out`` on pyxdp's interpreter and JIT, for a
program without frags support that returns ``bpf_xdp_get_buff_len``; and the xdp_md
fields read with sign-extending loads; and the CPU a run lands on (the caller's)."""

from __future__ import annotations

import os
import struct

import pytest

from pyxdp.collection import Collection
from pyxdp.errors import KernelError
from pyxdp.net.prog import jit_available
from pyxdp.spec import MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType

pytestmark = pytest.mark.kernel

BUFF_LEN = asm_collection("call 188\nexit")  # return bpf_xdp_get_buff_len(ctx)
LENGTHS = [13, 14, 74, 1514, 3600, 9000]
METAS = [0, 4, 36, 216, 220, 252]


def _run(c: Collection, data: bytes, ctx_in: bytes | None, ctx_size_out: int) -> tuple:
    try:
        r = c.programs["t"].test_run(data, ctx_in=ctx_in, ctx_size_out=ctx_size_out,
                                     data_size_out=len(data) + 64)
    except KernelError as e:
        return ("error", e.errno)
    return (r.retval, r.data_out == data, r.ctx_out)


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_ctx_linear_size_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    with Collection(BUFF_LEN, "kernel") as k, \
            Collection(BUFF_LEN, "userspace", engine=engine) as u:
        for length in LENGTHS:
            for meta in METAS:
                data = bytes(meta) + (bytes(range(256)) * 40)[:length]
                for data_end in sorted({length, length - 1, 60, 14, 13, 0, 3520, 3521,
                                        3520 + meta, length + 1}):
                    if data_end < 0:
                        continue
                    ctx = struct.pack("<6I", meta, data_end + meta, 0, 0, 0, 0)
                    assert _run(u, data, ctx, 24) == _run(k, data, ctx, 24), \
                        (length, meta, data_end)
            for ctx_size_out in (0, 24):  # no ctx_in: the whole input, or a zeroed ctx
                data = bytes(length)
                assert _run(u, data, None, ctx_size_out) == _run(k, data, None, ctx_size_out), \
                    (length, ctx_size_out)


# ingress_ifindex * 16 + rx_queue_index, both read with sign-extending loads (BPF_MEMSX).
LDSX = asm_collection("""
r2 = *(s32 *)(r1 +12)
r3 = *(s32 *)(r1 +16)
r2 <<= 4
r2 += r3
r0 = r2
exit
""")


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_sign_extending_ctx_loads_match_linux(engine: str) -> None:
    """Linux accepts a sign-extending load of xdp_md's scalar fields (and refuses it for
    the packet pointers: tests/kernel/test_verifier_kernel.py's corpus); both engines read
    the same values."""
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    with Collection(LDSX, "kernel") as k, Collection(LDSX, "userspace", engine=engine) as u:
        for ctx in (None, struct.pack("<6I", 0, 64, 0, 1, 0, 0)):  # lo: ifindex 1, 1 queue
            assert _run(u, bytes(64), ctx, 24) == _run(k, bytes(64), ctx, 24)
            assert _run(u, bytes(64), ctx, 24)[0] in (0, 16)


# counts[0] += 1 in this CPU's slot of a per-CPU array; returns bpf_get_smp_processor_id().
PER_CPU = asm_collection("""
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = map[fd:0]
call 1
if r0 == 0 goto +2
r1 = 1
lock *(u64 *)(r0 +0) += r1
call 8
exit
""", [MapSpec("counts", int(BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY), 4, 8, 1)])


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_run_lands_on_the_callers_cpu_as_on_linux(engine: str) -> None:
    """Linux runs a test_run program on the CPU the syscall runs on: its per-CPU slot
    and bpf_get_smp_processor_id(); pyxdp's userspace backend does too."""
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    before = os.sched_getaffinity(0)
    try:
        with Collection(PER_CPU, "kernel") as k, \
                Collection(PER_CPU, "userspace", engine=engine) as u:
            for n, cpu in enumerate(sorted(before), 1):
                os.sched_setaffinity(0, {cpu})
                for c in (k, u):
                    assert c.programs["t"].test_run(bytes(64)).retval == cpu
                assert u.maps["counts"].lookup(0) == k.maps["counts"].lookup(0)
                assert sum(u.maps["counts"].lookup(0)) == n
    finally:
        os.sched_setaffinity(0, before)
