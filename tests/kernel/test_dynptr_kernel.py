"""Dynptrs over XDP frames against Linux: ``samples/dynptr.o`` (bpf_dynptr_from_xdp,
bpf_dynptr_slice/_rdwr, bpf_dynptr_read/write) under BPF_PROG_TEST_RUN on frames
from 42 bytes to 9 KiB (frags past 3520 bytes), on pyxdp's interpreter and JIT: the
same verdicts, output frames and recorded return codes, pointers and bytes; the
generic dynptr kfuncs (size, is_null, is_rdonly, clone, adjust, memset, copy) over a
grid of windows, offsets and lengths; and a global function reading the caller's
dynptr through its ``struct bpf_dynptr *`` argument."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.testing.verifier_cases import Func, VerifierCase

pytestmark = pytest.mark.kernel

DYNPTR = Path(__file__).resolve().parents[2] / "samples" / "dynptr.o"
SIZES = [0, 20, 1400, 3470, 3478, 3700, 5000, 9000]


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_dynptr_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    with Collection.load(DYNPTR, "kernel") as kc, Collection.load(DYNPTR, engine=engine) as uc:
        for size in SIZES:
            pkt = udp_packet(bytes((i * 7 + size) & 0xFF for i in range(size)))
            k = kc.programs["xdp_dynptr"].test_run(pkt)
            u = uc.programs["xdp_dynptr"].test_run(pkt)
            assert u.fault is None
            assert (u.retval, u.data_out) == (k.retval, k.data_out), size
            assert [uc.maps["out"][i] for i in range(12)] == \
                [kc.maps["out"][i] for i in range(12)], size


# A global function given the caller's XDP dynptr (struct bpf_dynptr *) reads 4 bytes at
# 12 through it with bpf_dynptr_read and 2 through a slice at 30 (0x7777 when there is
# none): the callee's pointer is the caller's stack slot.
_GLOBAL_DYNPTR = """
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -16
call g1
exit
g1:
r6 = r1
r3 = r1
r1 = r10
r1 += -8
r2 = 4
r4 = 12
r5 = 0
call 201
r7 = r0
r7 <<= 32
r1 = r6
r2 = 30
r3 = 0
r4 = 2
call KFUNC(bpf_dynptr_slice)
r8 = 0x7777
if r0 == 0 goto +1
r8 = *(u16 *)(r0 +0)
r0 = *(u32 *)(r10 -8)
r0 ^= r7
r0 ^= r8
exit"""


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_global_function_dynptr_argument_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    case = VerifierCase("g_dynptr_run", _GLOBAL_DYNPTR.strip(), None, funcs=(
        Func("main", True, ("ctx",)), Func("g1", True, ("dynptr",))))
    with Collection(case.spec(), "kernel") as kc, Collection(case.spec(), engine=engine) as uc:
        for size in (0, 20, 3470, 5000):
            pkt = udp_packet(bytes((i * 5 + size) & 0xFF for i in range(size)))
            k = kc.programs["g_dynptr_run"].test_run(pkt)
            u = uc.programs["g_dynptr_run"].test_run(pkt)
            assert u.fault is None
            assert u.retval == k.retval, size


# (start, end) of the window, two offsets, a length, a fill byte, a tail cut: windows
# inside the linear part, across its end and into frags, past the frame (-ERANGE),
# reversed (-EINVAL); fills and copies direct, chunked across frags, too long (-E2BIG),
# and past a frame bpf_xdp_adjust_tail shortened after the dynptr was made (-EINVAL
# midway: the chunks before stay written).
OPS_ARGS = [(0, 0, 0, 0, 0, 0, 0), (0, 20, 2, 4, 8, 0xAB, 0), (10, 3600, 100, 3000, 600, 7, 0),
            (14, 9000, 3500, 3510, 40, 0x55, 0), (3000, 5000, 10, 1000, 300, 0x11, 0),
            (5, 4, 0, 0, 0, 0, 0), (0, 9100, 0, 0, 1, 1, 0), (100, 200, 90, 50, 20, 0x80, 0),
            (0, 0, 0, 0, 0x10000, 1, 0), (0, 9000, 3000, 7000, 1000, 0x33, 0),
            (0, 9000, 3000, 3000, 2000, 0x44, 1000), (0, 9000, 100, 3400, 600, 0x21, 5400),
            (10, 3600, 100, 3000, 600, 7, 100)]
OPS_SIZES = [20, 1400, 3478, 3700, 9000]


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_dynptr_kfuncs_match_linux(engine: str) -> None:
    """bpf_dynptr_size, _is_null, _is_rdonly, _clone, _adjust, _memset and _copy
    (``xdp_dynptr_ops``): return codes, the frame and what was read, per argument set."""
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    with Collection.load(DYNPTR, "kernel") as kc, Collection.load(DYNPTR, engine=engine) as uc:
        for size in OPS_SIZES:
            pkt = udp_packet(bytes((i * 7 + size) & 0xFF for i in range(size)))
            for args in OPS_ARGS:
                for c in (kc, uc):
                    for i, v in enumerate(args):
                        c.maps["args"][i] = v
                k = kc.programs["xdp_dynptr_ops"].test_run(pkt)
                u = uc.programs["xdp_dynptr_ops"].test_run(pkt)
                assert u.fault is None
                assert (u.retval, u.data_out) == (k.retval, k.data_out), (size, args)
                assert [uc.maps["ops_out"][i] for i in range(24)] == \
                    [kc.maps["ops_out"][i] for i in range(24)], (size, args)
