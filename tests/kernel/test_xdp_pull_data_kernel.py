"""``bpf_xdp_pull_data`` (a 6.18 kfunc, net/core/filter.c) against Linux under
BPF_PROG_TEST_RUN, on pyxdp's interpreter and JIT: a frags program pulls ``len``
bytes (from a map) into the linear part of frames from 62 to 9042 bytes, with and
without metadata and with the linear part cut short through ``ctx_in``; the return
code (an int, zero-extended in r0), the linear length after it, the output frame
and the context out are Linux's. Covered: lengths within the linear part (0), pulls
that fit the tailroom, pulls that shift data and metadata down into the headroom,
pulls beyond what head- plus tailroom can hold or beyond the frame (-EINVAL)."""

from __future__ import annotations

import struct

import pytest

from pyxdp.collection import Collection
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.testing.verifier_cases import VerifierCase

pytestmark = pytest.mark.kernel

# arr[0] = {u32 len; u32 linear length after the pull; u64 the kfunc's r0}
_PULL = VerifierCase("pull", """
r6 = r1
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
if r0 == 0 goto out
r7 = r0
r2 = *(u32 *)(r0 +0)
r1 = r6
call KFUNC(bpf_xdp_pull_data)
*(u64 *)(r7 +8) = r0
r2 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r3 -= r2
*(u32 *)(r7 +4) = r3
out:
r0 = 2
exit""".strip(), None, flags=32)  # BPF_F_XDP_HAS_FRAGS

# (payload size, metadata length, linear length asked through ctx_in (0: as built), lens)
_GRID = [(20, 0, 0, (0, 62, 63)), (3700, 0, 0, (100, 3600, 3736, 3737, 3743)),
         (9000, 0, 0, (3520, 3700, 3737, 9042, 9043)),
         (5000, 16, 2000, (1000, 3000, 3600, 3700, 4000)),
         (5000, 0, 100, (3000, 3600, 5042)), (3000, 32, 3000, (3000, 3042))]


def _runs(c: Collection) -> list[tuple[object, ...]]:
    out = []
    for size, meta, linear, lens in _GRID:
        pkt = udp_packet(bytes((i * 7 + size) & 0xFF for i in range(size)))
        ctx = struct.pack("<6I", meta, linear + meta if linear else 0, 0, 0, 0, 0) \
            if meta or linear else None
        for ln in lens:
            c.maps["arr"][0] = ln.to_bytes(4, "little") + bytes(12)
            r = c.programs["pull"].test_run(pkt, ctx_in=ctx, ctx_size_out=24 if ctx else 0)
            assert r.fault is None
            v = bytes(c.maps["arr"][0])
            out.append((size, meta, linear, ln, r.retval, v[4:], r.data_out, r.ctx_out))
    return out


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_pull_data_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = _PULL.spec()
    with Collection(spec, "kernel") as kc, Collection(spec, engine=engine) as uc:
        k, u = _runs(kc), _runs(uc)
    assert u == k
    pulled = {(x[0], x[3]): int.from_bytes(x[5][4:], "little") for x in k}
    assert pulled[(3700, 3736)] == 0 and pulled[(3700, 3737)] == 2**32 - 22  # -EINVAL
