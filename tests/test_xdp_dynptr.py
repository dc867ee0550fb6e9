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
