"""Dynptrs over XDP frames on pyxdp (samples/dynptr.c records what each call did);
tests/kernel/test_dynptr_kernel.py holds the same runs to Linux."""

from __future__ import annotations

import errno
from pathlib import Path

from pyxdp.collection import Collection
from pyxdp.net.packets import udp_packet

DYNPTR = Path(__file__).resolve().parents[1] / "samples" / "dynptr.o"


def test_dynptr_on_linear_and_multi_buffer_frames() -> None:
    with Collection.load(DYNPTR, engine="interp") as c:
        prog = c.programs["xdp_dynptr"]
        for size in (100, 6000):  # one linear frame; one with a frag (test_run: 3520 linear)
            pkt = udp_packet(bytes(range(256)) * (size // 256) + bytes(size % 256))
            r = prog.test_run(pkt)
            out = [c.maps["out"][i] for i in range(12)]
            assert (r.retval, out[0], out[1]) == (2, -errno.EINVAL, 0)
            assert out[2] // 1_000_000 == 2  # a pointer into the frame, not the buffer
            assert out[6] == out[10] == -errno.E2BIG and out[7] == out[11] == -errno.EINVAL
            assert (out[8], out[9]) == (1, 0)
            n = len(pkt)
            want = bytearray(pkt)
            want[42] = (want[42] + 1) & 0xFF  # through the read-write slice
            want[n - 4:] = n.to_bytes(4, "little")  # bpf_dynptr_write of the length
            assert r.data_out == bytes(want)
        # 6042 bytes: 3516..3524 spans the linear part's end (copied into the buffer),
        # 5000 lies in the frag (a pointer into it).
        assert (out[3] // 1_000_000, out[4] // 1_000_000) == (1, 2)


def test_pull_data_moves_frag_bytes_into_the_linear_part() -> None:
    """``XdpBuff.pull_data``: within the linear part nothing moves; a pull that fits the
    tailroom leaves data in place, a longer one shifts data and metadata down into the
    headroom; a frag emptied is released; -EINVAL past the frame or the room."""
    from pyxdp.net.xdp import XDP_FRAME_SIZE, XdpBuff

    payload = bytes(range(256)) * 12  # 3072 bytes: 8 of metadata, the rest the packet
    xdp = XdpBuff.prepare(payload[:1000], meta_len=8, frame_sz=2048)  # 472 of tailroom
    xdp.frags = [bytearray(payload[1000:1300]), bytearray(payload[1300:])]
    whole, meta = xdp.packet(), xdp.metadata()
    assert xdp.pull_data(500) == 0 and xdp.data_end - xdp.data == 992
    tail = xdp.data_hard_end - xdp.data_end
    assert xdp.pull_data(992 + tail) == 0 and xdp.data == 256 + 8  # the tailroom only
    assert [len(f) for f in xdp.frags] == [1772 - (tail - 300)]  # the first one released
    room = xdp.data_meta - XDP_FRAME_SIZE
    assert xdp.pull_data(xdp.buff_len()) == -errno.EINVAL  # 3064 > linear + room
    assert xdp.pull_data(992 + tail + room) == 0
    assert xdp.data_meta == XDP_FRAME_SIZE and xdp.metadata() == meta
    assert xdp.packet() == whole and [len(f) for f in xdp.frags] == [1772 - (tail - 300) - room]
    assert xdp.pull_data(xdp.buff_len() + 1) == -errno.EINVAL


def test_ringbuf_dynptr_records_on_both_engines() -> None:
    """A reservation made, written through bpf_dynptr_write and bpf_dynptr_data, and
    submitted; a failed one (flags) left null; the same records on the interpreter and
    the JIT (tests/kernel/test_ringbuf_dynptr_kernel.py holds them to Linux)."""
    import struct

    from pyxdp.net.prog import jit_available
    from pyxdp.testing.verifier_cases import CASES

    rbd = next(c for c in CASES if c.name == "rbd_run")
    engines = ["interp", "jit"] if jit_available() else ["interp"]
    seen = []
    for engine in engines:
        with Collection(rbd.spec(), engine=engine) as c:
            rb = c.maps["rb"].handle
            got = []
            for p in ((16, 0, 0, 0), (16, 1, 0, 0), (12, 0, 5, 0)):
                c.maps["arr"][0] = struct.pack("<4I", *p)
                c.programs["rbd_run"].test_run(udp_packet(bytes(20)))
                got.append((struct.unpack("<4i", bytes(c.maps["arr"][1])), list(rb.records())))
            seen.append(got)
    assert seen[0][0] == ((0, 0, 1, 0), [struct.pack("<II", 0xABCD, 62) + bytes(8)])
    assert seen[0][1] == ((-errno.EINVAL, -errno.EINVAL, 0, -errno.EINVAL), [])
    assert seen[0][2][0] == (0, -errno.E2BIG, 1, 0)  # 5 + 8 > 12
    assert all(s == seen[0] for s in seen)
