"""Dynptrs over XDP frames against Linux: ``samples/dynptr.o`` (bpf_dynptr_from_xdp,
bpf_dynptr_slice/_rdwr, bpf_dynptr_read/write) under BPF_PROG_TEST_RUN on frames
from 42 bytes to 9 KiB (frags past 3520 bytes), on pyxdp's interpreter and JIT: the
same verdicts, output frames and recorded return codes, pointers and bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import jit_available

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
