"""bpf_probe_read_{kernel,user}{,_str}_dynptr against Linux: samples/probe_dynptr.o under
BPF_PROG_TEST_RUN on Linux and on pyxdp's interpreter and JIT, reading a map value, the
stack, the packet and raw addresses into LOCAL, ring buffer, XDP (linear part, one frag,
across the two in 256-byte chunks) and null dynptrs at offsets: the same returns (0,
string lengths, -E2BIG, -ERANGE, -EFAULT) and the same destination bytes. The user
variants read no memory from XDP (-EFAULT; 0 for size 0 at a user address)."""

from __future__ import annotations

import errno
import struct
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net import xdp_dynptr
from pyxdp.net.prog import jit_available
from pyxdp.testing.native import python_calls

pytestmark = pytest.mark.kernel

OBJ = Path(__file__).resolve().parents[2] / "samples" / "probe_dynptr.o"
KERNEL, KSTR, USER, USTR = range(4)
LOCAL, RINGBUF, XDP, NULL = range(4)
MAP, STACK, PKT, RAW = range(4)
M64 = (1 << 64) - 1
TEXT = bytearray(i % 255 + 1 for i in range(512))
TEXT[13] = 0  # "\x01..\x0d\0": a 14-byte string at 0
TEXT[100:108] = b"pyxdp!\0\0"
PACKET = bytes(range(1, 200)) + b"\0" + b"Hello, XDP\0" + bytes(40)
BIG = bytes(range(256)) * 20  # 3520 bytes in the linear part, the rest in a frag
TOP, NONCANON, VSYSCALL = 0xFFFF_FFFF_FFFF_F000, 0x8000_0000_0000_0000, 0xFFFF_FFFF_FF60_0000
# (op, dst, doff, size, where, off, raw, dout): through bpf_dynptr_slice_rdwr's pointer
# into a LOCAL or ring buffer dynptr or the frame's linear part - what the JIT's twins do
# without Python
NATIVE = [
    (KERNEL, LOCAL, 0, 16, MAP, 0, 0), (KERNEL, LOCAL, 8, 56, MAP, 40, 0),
    (KERNEL, LOCAL, 64, 0, MAP, 0, 0), (KERNEL, LOCAL, 0, 64, STACK, 8, 0),
    (KERNEL, LOCAL, 0, 32, PKT, 0, 0), (KERNEL, LOCAL, 0, 8, RAW, 0, 0),
    (KERNEL, LOCAL, 0, 0, RAW, 0, 0), (KERNEL, LOCAL, 0, 8, RAW, 0, NONCANON),
    (KERNEL, LOCAL, 0, 8, RAW, 0, VSYSCALL), (KERNEL, LOCAL, 0, 0, RAW, 0, TOP),
    (KERNEL, RINGBUF, 4, 16, MAP, 0, 0),
    (KSTR, LOCAL, 0, 64, MAP, 0, 0), (KSTR, LOCAL, 0, 5, MAP, 0, 0),
    (KSTR, LOCAL, 4, 60, MAP, 100, 0), (KSTR, LOCAL, 0, 0, RAW, 0, 0),
    (KSTR, LOCAL, 0, 8, RAW, 0, 0), (KSTR, LOCAL, 2, 8, RAW, 0, TOP),
    (KSTR, LOCAL, 0, 64, PKT, 200, 0), (KSTR, RINGBUF, 10, 54, STACK, 100, 0),
    (USER, LOCAL, 0, 8, MAP, 0, 0), (USER, LOCAL, 0, 0, MAP, 0, 0),
    (USER, LOCAL, 0, 0, RAW, 0, 0x1000), (USER, LOCAL, 0, 0, RAW, 0, 0x7FFF_FFFF_F000),
    (USER, LOCAL, 0, 0, RAW, 0, 0x7FFF_FFFF_F001), (USER, LOCAL, 0, 8, RAW, 0, 0x1000),
    (USTR, LOCAL, 0, 8, RAW, 0, 0x1000), (USTR, LOCAL, 0, 0, MAP, 0, 0),
    (USTR, RINGBUF, 0, 8, STACK, 0, 0),
    (KERNEL, XDP, 10, 16, MAP, 0, 0), (KSTR, XDP, 100, 64, MAP, 0, 0),
    (KSTR, XDP, 3456, 64, RAW, 0, TOP), (USER, XDP, 3000, 8, MAP, 0, 0),
]
# the rest: -E2BIG, null dynptrs, frags (a slice of one, or 256-byte chunks across)
OTHER = [
    (KERNEL, LOCAL, 8, 64, MAP, 0, 0), (KERNEL, LOCAL, 65, 0, MAP, 0, 0),
    (KERNEL, RINGBUF, 60, 8, MAP, 0, 0), (KERNEL, NULL, 0, 8, MAP, 0, 0),
    (KERNEL, NULL, 0, 0, MAP, 0, 0),
    (KERNEL, XDP, 3500, 100, MAP, 0, 0, 3490), (KERNEL, XDP, 5000, 64, MAP, 100, 0, 5000),
    (KERNEL, XDP, 3400, 300, MAP, 0, 0, 3650), (KERNEL, XDP, 3500, 100, RAW, 0, 0, 3490),
    (KERNEL, XDP, 3500, 100, RAW, 0, TOP, 3490), (KERNEL, XDP, 5100, 30, MAP, 0, 0),
    (KSTR, XDP, 3500, 100, MAP, 120, 0, 3490), (KSTR, XDP, 3400, 300, MAP, 120, 0, 3650),
    (KSTR, XDP, 3500, 100, MAP, 0, 0, 3490), (KSTR, XDP, 3500, 100, RAW, 0, TOP, 3490),
    (KSTR, NULL, 0, 0, MAP, 0, 0), (KSTR, NULL, 0, 1, MAP, 0, 0),
    (USER, LOCAL, 8, 64, MAP, 0, 0), (USER, NULL, 0, 8, MAP, 0, 0),
    (USER, XDP, 3500, 100, MAP, 0, 0, 3490), (USTR, XDP, 3500, 100, RAW, 0, 0x1000, 3490),
]


def _run(coll: Collection, op: int, dst: int, doff: int, size: int, where: int, off: int,
         raw: int, dout: int | None = None) -> tuple[int, bytes]:
    coll.maps["cfg"].handle.update(bytes(4), struct.pack(
        "<IIIIIIQII", op, dst, doff, size, where, off, raw & M64, doff if dout is None
        else dout, 0))
    pkt = PACKET if dst != XDP else BIG
    assert coll.programs["xdp_probe_dynptr"].test_run(pkt).retval == 2
    got = coll.maps["out"].handle.lookup(bytes(4))
    assert got is not None
    return int(struct.unpack_from("<q", got)[0]), bytes(got[8:])


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_probe_read_dynptr_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = load_collection_spec(OBJ)
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        for coll in (kern, user):
            coll.maps["text"].handle.update(bytes(4), bytes(TEXT))
        want = [_run(kern, *case) for case in NATIVE + OTHER]
        got: list[tuple[int, bytes]] = []
        calls = python_calls(list(xdp_dynptr.PROBE_READ_KFUNCS.values()),
                             lambda: got.extend(_run(user, *case) for case in NATIVE))
        got.extend(_run(user, *case) for case in OTHER)
    for case, w, g in zip(NATIVE + OTHER, want, got, strict=True):
        assert g == w, case
    # Linux took every path: copies, string lengths, each error
    assert {0, 14, 5, 7, 100, 300, -errno.E2BIG, -errno.ERANGE,
            -errno.EFAULT} <= {w[0] for w in want}
    # the JIT's twins ran, no Python kfunc; the interpreter runs the kfuncs
    assert (calls == 0) == (engine == "jit"), calls
