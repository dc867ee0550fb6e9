"""The ring buffer helpers against Linux under BPF_PROG_TEST_RUN, on pyxdp's interpreter
and JIT (whose twins run them natively): ``bpf_ringbuf_output`` (sizes 0..63, wakeup
flags, an unknown flag: -EINVAL, the ring full: -EAGAIN), ``bpf_ringbuf_reserve`` of 40
and 2000 bytes (flags: NULL, the ring full: NULL, a record wrapping around the ring)
then ``bpf_ringbuf_submit`` or ``_discard``, ``bpf_ringbuf_query`` (every flag, an
unknown one: 0) - the return codes and the records read from the ring on each side
(libbpf's way on Linux: the map's pages mapped) are the same."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from pyxdp.collection import Collection
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.testing.ringlab import ring_runs
from pyxdp.testing.verifier_cases import VerifierCase

pytestmark = pytest.mark.kernel

# arr[0] = {op, a, b}: op 0 output of a & 63 stack bytes with flags b, 1 / 3 reserve 40 /
# 2000 bytes with flags b (the sample gets a; a odd: discard), 2 query with flags a;
# arr[1]'s first u64 = the helper's r0 (a reservation: 1 submitted, 3 discarded, 7 NULL).
_RESERVE = """
r1 = MAP(rb)
r2 = {size}
r3 = *(u32 *)(r7 +8)
call 131
r1 = 7
if r0 == 0 goto done
r2 = *(u32 *)(r7 +4)
*(u32 *)(r0 +0) = r2
*(u32 *)(r0 +{last}) = r2
r1 = r0
r3 = r2
r2 = 0
if r3 & 1 goto disc{size}
call 132
r1 = 1
goto done
disc{size}:
call 133
r1 = 3
goto done
"""
RING = VerifierCase("rb_run", """
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
if r7 == 0 goto out
if r8 == 0 goto out
r1 = 0x0807060504030201 ll
""" + "".join(f"*(u64 *)(r10 -{8 * k}) = r1\nr1 += 0x11\n" for k in range(2, 10)) + """
r9 = *(u32 *)(r7 +0)
if r9 == 1 goto res40
if r9 == 3 goto res2000
if r9 == 2 goto query
r1 = MAP(rb)
r2 = r10
r2 += -72
r3 = *(u32 *)(r7 +4)
r3 &= 63
r4 = *(u32 *)(r7 +8)
call 130
r1 = r0
goto done
query:
r1 = MAP(rb)
r2 = *(u32 *)(r7 +4)
call 134
r1 = r0
goto done
res40:""" + _RESERVE.format(size=40, last=36) + "res2000:" + _RESERVE.format(size=2000, last=1996)
    + """
done:
*(u64 *)(r8 +0) = r1
out:
r0 = 2
exit""", None)

# (op, a, b, read the ring after the run)
STEPS = [(0, 0, 0, 1), (0, 5, 0, 1), (0, 63, 1, 1), (0, 8, 2, 1), (0, 8, 4, 1),
         (1, 10, 0, 1), (1, 11, 0, 1), (1, 12, 1, 1), (2, 0, 0, 1), (2, 1, 0, 1),
         (2, 2, 0, 1), (2, 3, 0, 1), (2, 4, 0, 1),
         # fill the ring without reading: reservations and outputs fail, one wraps
         (3, 20, 0, 0), (3, 21, 0, 0), (2, 0, 0, 0), (3, 22, 0, 0), (0, 63, 0, 0),
         (2, 3, 0, 0), (3, 24, 0, 1), (3, 26, 0, 0), (3, 27, 0, 0), (1, 28, 0, 0),
         (0, 40, 0, 0), (2, 0, 0, 1), (2, 2, 0, 0), (2, 3, 0, 0), (3, 30, 0, 1)]


def _runs(c: Collection, read: Callable[[], list[bytes]]) -> list[object]:
    out: list[object] = []
    pkt = udp_packet(bytes(20))
    for op, a, b, wants_read in STEPS:
        c.maps["arr"][0] = struct.pack("<4I", op, a, b, 0)
        r = c.programs["rb_run"].test_run(pkt)
        assert r.fault is None
        out.append(((op, a, b), r.retval, bytes(c.maps["arr"][1])))
        if wants_read:
            out.append(read())
    return out


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_ringbuf_helpers_match_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = RING.spec()
    k, u = ring_runs(spec, engine, _runs)
    assert u == k
    codes = [struct.unpack("<q", x[2][:8])[0] for x in k if isinstance(x, tuple)]
    assert -22 in codes and -11 in codes and 7 in codes and 3 in codes  # EINVAL, EAGAIN
