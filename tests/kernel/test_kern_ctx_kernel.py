"""The kernel's structs behind the XDP context against Linux: ``samples/kern_ctx.o``
(bpf_cast_to_kern_ctx, reads of struct xdp_buff, its xdp_rxq_info and net_device,
bpf_rdonly_cast to the kernel's struct ethhdr, to a bad address and to void) under
BPF_PROG_TEST_RUN and on pyxdp's interpreter and JIT: the same verdicts, output frames
and recorded values, with and without metadata in front of the frame. The verifier's
refusals of such programs are in the corpus (``pyxdp.testing.verifier_cases``,
``_KERN_CTX_CASES``), which tests/kernel/test_verifier_kernel.py measures."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import jit_available

pytestmark = pytest.mark.kernel

KERN_CTX = Path(__file__).resolve().parents[2] / "samples" / "kern_ctx.o"
SIZES = [0, 20, 1400, 3470]
SLOTS = 16


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_kern_ctx_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    with Collection.load(KERN_CTX, "kernel") as kc, \
            Collection.load(KERN_CTX, engine=engine) as uc:
        for size in SIZES:
            for meta in (0, 8):
                pkt = udp_packet(bytes((i * 3 + size) & 0xFF for i in range(size)))
                data_in = bytes(range(1, meta + 1)) + pkt
                # struct xdp_md: data (after the metadata), data_end, data_meta, ...
                ctx = struct.pack("<6I", meta, len(data_in), 0, 0, 0, 0) if meta else None
                k = kc.programs["xdp_kern_ctx"].test_run(data_in, ctx_in=ctx)
                u = uc.programs["xdp_kern_ctx"].test_run(data_in, ctx_in=ctx)
                assert u.fault is None
                assert (u.retval, u.data_out) == (k.retval, k.data_out), (size, meta)
                linux = [kc.maps["out"][i] for i in range(SLOTS)]
                assert [uc.maps["out"][i] for i in range(SLOTS)] == linux, (size, meta)
                assert linux[9] == 0x0800 and linux[10] == 0  # the probe read of 0x24
