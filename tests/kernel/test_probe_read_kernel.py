"""bpf_probe_read_kernel and bpf_probe_read_kernel_str against Linux: samples/probe_read.o
under BPF_PROG_TEST_RUN on Linux and on pyxdp's interpreter and JIT, reading a map
value, the stack, the packet and raw addresses (NULL, user, non-canonical, vsyscall,
the top kernel page): the same returns (0, lengths, -ERANGE, -EFAULT) and the same
destination bytes (copied, NUL-terminated, untouched or zeroed)."""

from __future__ import annotations

import errno
import struct
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.prog import jit_available
from pyxdp.testing.native import python_calls
from pyxdp.vm import bpf_trace

pytestmark = pytest.mark.kernel

OBJ = Path(__file__).resolve().parents[2] / "samples" / "probe_read.o"
MAP, STACK, PKT, RAW = range(4)
READ, STR = 0, 1
M64 = (1 << 64) - 1
TEXT = bytearray(i % 255 + 1 for i in range(256))
TEXT[13] = 0  # "\x01..\x0d\0": a 14-byte string at 0
TEXT[100:108] = b"pyxdp!\0\0"
PACKET = bytes(range(1, 200)) + b"\0" + b"Hello, XDP\0" + bytes(40)
TOP = 0xFFFF_FFFF_FFFF_F000
# (op, where, off, size, raw)
CASES = [
    (READ, MAP, 0, 16, 0), (READ, MAP, 40, 64, 0), (READ, MAP, 3, 0, 0),
    (READ, STACK, 8, 64, 0), (READ, PKT, 0, 32, 0), (READ, PKT, 199, 12, 0),
    (READ, RAW, 0, 8, 0), (READ, RAW, 0, 0, 0), (READ, RAW, 0, 8, 0x1000),
    (READ, RAW, 0, 8, 0x8000_0000_0000_0000), (READ, RAW, 0, 8, 0xFFFF_FFFF_FF60_0000),
    (READ, RAW, 0, 8, TOP), (READ, RAW, 0, 0, TOP),
    (STR, MAP, 0, 64, 0), (STR, MAP, 0, 5, 0), (STR, MAP, 0, 14, 0), (STR, MAP, 0, 13, 0),
    (STR, MAP, 100, 64, 0), (STR, MAP, 7, 0, 0), (STR, STACK, 100, 64, 0),
    (STR, PKT, 200, 64, 0), (STR, PKT, 195, 3, 0), (STR, RAW, 0, 8, 0), (STR, RAW, 0, 0, 0),
    (STR, RAW, 0, 8, 0x8000_0000_0000_0000), (STR, RAW, 0, 8, TOP),
]


def _run(coll: Collection, op: int, where: int, off: int, size: int,
         raw: int) -> tuple[int, bytes]:
    coll.maps["cfg"].handle.update(bytes(4), struct.pack("<IIIIQ", op, where, off, size,
                                                         raw & M64))
    assert coll.programs["xdp_probe_read"].test_run(PACKET).retval == 2
    got = coll.maps["out"].handle.lookup(bytes(4))
    assert got is not None
    return int(struct.unpack_from("<q", got)[0]), bytes(got[8:])


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_probe_read_kernel_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = load_collection_spec(OBJ)
    rets = set()
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        for coll in (kern, user):
            coll.maps["text"].handle.update(bytes(4), bytes(TEXT))
        want = [_run(kern, *case) for case in CASES]

        def runs() -> list[tuple[int, bytes]]:
            return [_run(user, *case) for case in CASES]
        got: list[tuple[int, bytes]] = []
        calls = python_calls([bpf_trace], lambda: got.extend(runs()))
    for case, w, g in zip(CASES, want, got, strict=True):
        assert g == w, case
        rets.add(w[0])
    # Linux took every path: copies, string lengths, both errors
    assert {0, 14, 5, -errno.ERANGE, -errno.EFAULT} <= rets
    # the JIT's twins ran, no Python helper; the interpreter runs the helpers
    assert (calls == 0) == (engine == "jit"), calls
