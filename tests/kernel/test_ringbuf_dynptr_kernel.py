"""Ring buffer dynptrs against Linux under BPF_PROG_TEST_RUN, on pyxdp's interpreter and
JIT: ``bpf_ringbuf_reserve_dynptr`` (sizes that fit, 0, past the ring, past
``DYNPTR_MAX_SIZE`` (-E2BIG), flags (-EINVAL), the ring full), ``bpf_dynptr_write``
at offsets in and out of the sample (-E2BIG), ``bpf_dynptr_data`` (NULL when the
8 bytes do not fit or the dynptr is null), ``bpf_dynptr_read``, then submit or
discard: the return codes and the records read from the ring buffer on each side
(libbpf's way on Linux: the map's pages mapped) are the same, uninitialised
bytes of a sample that wraps around the ring included. And ``bpf_dynptr_from_mem``
over a map value (sizes 0..15, flags): the return codes and the value written
through the local dynptr."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from pyxdp.collection import Collection
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.testing.ringlab import ring_runs
from pyxdp.testing.verifier_cases import CASES, VerifierCase

pytestmark = pytest.mark.kernel

RBD = next(c for c in CASES if c.name == "rbd_run")  # what it does: in the corpus

# (size, flags, write offset, discard)
PARAMS = [(16, 0, 0, 0), (16, 0, 4, 1), (16, 1, 0, 0), (4, 0, 0, 0), (12, 0, 4, 0),
          (12, 0, 5, 0), (0, 0, 0, 0), (5000, 0, 0, 0), (4080, 0, 0, 0), (1 << 24, 0, 0, 0),
          ((1 << 24) - 1, 0, 0, 0), (2000, 0, 1992, 0)]


def _runs(c: Collection, read: Callable[[], list[bytes]]) -> list[object]:
    out: list[object] = []
    for size in (20, 300):
        pkt = udp_packet(bytes(size))
        for p in PARAMS:
            c.maps["arr"][0] = struct.pack("<4I", *p)
            r = c.programs["rbd_run"].test_run(pkt)
            assert r.fault is None
            out.append((size, p, r.retval, bytes(c.maps["arr"][1]), read()))
    c.maps["arr"][0] = struct.pack("<4I", 1000, 0, 0, 0)
    for _ in range(6):  # four fit, then the ring is full (-EINVAL)
        c.programs["rbd_run"].test_run(pkt)
        out.append(bytes(c.maps["arr"][1]))
    out.append(read())
    return out


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_ringbuf_dynptr_records_match_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = RBD.spec()
    k, u = ring_runs(spec, engine, _runs)
    assert u == k
    assert k[0][4] == [struct.pack("<II", 0xABCD, 62) + bytes(8)]  # 62: the frame's length
    assert struct.unpack("<4i", k[2][3])[0] == -22 and k[-1] != []


# bpf_dynptr_from_mem over arr[2]'s 16 bytes: arr[0] = {size (masked to 0..15), flags,
# write offset, -}; arr[1] = {from_mem's r0, write's r0, dynptr_data non-NULL, read's r0}.
FROM_MEM = VerifierCase("from_mem_run", """
r6 = r1
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
r7 = r0
r1 = 1
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
r8 = r0
r1 = 2
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
r9 = r0
if r7 == 0 goto out
if r8 == 0 goto out
if r9 == 0 goto out
r2 = *(u32 *)(r7 +0)
r2 &= 15
r3 = *(u32 *)(r7 +4)
r1 = r9
r4 = r10
r4 += -24
call 197
*(u32 *)(r8 +0) = r0
r2 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r3 -= r2
*(u32 *)(r10 -32) = r3
r1 = r10
r1 += -24
r2 = *(u32 *)(r7 +8)
r3 = r10
r3 += -32
r4 = 4
r5 = 0
call 202
*(u32 *)(r8 +4) = r0
r1 = r10
r1 += -24
r2 = 0
r3 = 2
call 203
r1 = 0
if r0 == 0 goto +3
r2 = 0xabcd
*(u16 *)(r0 +0) = r2
r1 = 1
*(u32 *)(r8 +8) = r1
r1 = r10
r1 += -40
r2 = 8
r3 = r10
r3 += -24
r4 = 0
r5 = 0
call 201
*(u32 *)(r8 +12) = r0
out:
r0 = 2
exit""".strip(), None)


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_dynptr_from_mem_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = FROM_MEM.spec()
    got = []
    with Collection(spec, "kernel") as kc, Collection(spec, engine=engine) as uc:
        for p in [(15, 0, 0), (15, 0, 11), (15, 0, 12), (8, 0, 0), (1, 0, 0), (0, 0, 0),
                  (12, 1, 0)]:
            side = []
            for c in (kc, uc):
                c.maps["arr"][0] = struct.pack("<4I", *p, 0)
                c.maps["arr"][2] = bytes(range(16))
                r = c.programs["from_mem_run"].test_run(udp_packet(bytes(20)))
                side.append((r.retval, bytes(c.maps["arr"][1]), bytes(c.maps["arr"][2])))
            got.append(side)
    assert all(k == u for k, u in got)
    assert struct.unpack("<4i", got[2][0][1]) == (0, -7, 1, 0)  # 12 + 4 > 15: -E2BIG
