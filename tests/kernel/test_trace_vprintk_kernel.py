"""bpf_trace_vprintk against Linux: an XDP program passing a format and an argument array
from map values under BPF_PROG_TEST_RUN on Linux and on pyxdp's interpreter and JIT. The
same returns: the formatted length, -EINVAL for a data_len not a multiple of 8 or past 96
bytes (12 arguments), for a format without a NUL within its size, for fewer arguments
than conversions and for a conversion bpf_bprintf_prepare refuses."""

from __future__ import annotations

import errno
import struct

import pytest

from pyxdp.collection import Collection
from pyxdp.net.prog import jit_available
from pyxdp.spec import MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType

pytestmark = pytest.mark.kernel

# bpf_trace_vprintk(fmt, ctl.size, args, ctl.data_len), data_len bounded for the verifier.
PROG = """
r6 = map[fd:2][0]+0
r2 = *(u32 *)(r6 +0)
r4 = *(u32 *)(r6 +4)
if r2 > 64 goto out
if r2 == 0 goto out
if r4 > 128 goto out
r1 = map[fd:0][0]+0
r3 = map[fd:1][0]+0
call 177
exit
out:
r0 = 1
exit
"""
ARRAY = int(BpfMapType.BPF_MAP_TYPE_ARRAY)
MAPS = [MapSpec("fmt", ARRAY, 4, 64, 1), MapSpec("args", ARRAY, 4, 128, 1),
        MapSpec("ctl", ARRAY, 4, 8, 1)]
ARGS = struct.pack("<16Q", *range(1, 15), 2**64 - 5, 0x41)
# (format, size past the NUL (-1: no NUL within the size), data_len)
CASES = [
    (b"hello", 0, 0), (b"%d %u %x", 0, 24), (b"%d %u %x", 0, 32), (b"%d %u %x", 0, 16),
    (b"%lld|%-5d|%05x|%c", 0, 32), (b"x", 0, 8), (b"x", 0, 12), (b"x", 0, 104),
    (b"%d" * 12, 0, 96), (b"%d" * 12, 0, 104), (b"abc", -1, 0), (b"abc", 7, 0),
    (b"%n", 0, 8), (b"%d%%", 0, 8), (b"%pK", 0, 8),
]


def _run(coll: Collection, fmt: bytes, extra: int, data_len: int) -> int:
    coll.maps["fmt"].handle.update(bytes(4), (fmt + b"\0").ljust(64, b"\0"))
    coll.maps["ctl"].handle.update(bytes(4), struct.pack("<II", len(fmt) + 1 + extra, data_len))
    return coll.programs["t"].test_run(bytes(64)).retval


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_trace_vprintk_returns_like_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = asm_collection(PROG, MAPS)
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        for coll in (kern, user):
            coll.maps["args"].handle.update(bytes(4), ARGS)
        want = [_run(kern, *case) for case in CASES]
        got = [_run(user, *case) for case in CASES]
    assert got == want
    einval = (-errno.EINVAL) & 0xFFFF_FFFF
    # Linux took both paths: lengths and refusals
    assert einval in want and len({w for w in want if w != einval}) >= 5
