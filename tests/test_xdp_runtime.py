"""XDP programs on the userspace backend: the xdp_md context, BPF_PROG_TEST_RUN's rules,
the packet helpers, redirect bookkeeping, faults with C source lines."""

from __future__ import annotations

import errno
import struct
from pathlib import Path

import pytest

from pyxdp.asm.assembler import assemble
from pyxdp.collection import Collection
from pyxdp.errors import InvalidProgram, KernelError, TestRunTruncated, UnsupportedHelper
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import XdpProg
from pyxdp.net.test_run import bpf_prog_test_run_xdp
from pyxdp.net.xdp import XdpBuff
from pyxdp.spec import ProgramSpec
from pyxdp.uapi.bpf import BpfAttachType, XdpAction

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def prog(text: str, attach: int = BpfAttachType.BPF_XDP) -> XdpProg:
    return XdpProg(ProgramSpec("t", "xdp", assemble(text), expected_attach_type=attach), {})


def run(text: str, data: bytes = bytes(64), **kw: object) -> int:
    return bpf_prog_test_run_xdp(prog(text), data, **kw).retval  # type: ignore[arg-type]


LEN = "r2 = *(u32 *)(r1 +4)\nr3 = *(u32 *)(r1 +0)\nr2 -= r3\nr0 = r2\nexit"


def test_data_end_minus_data_is_the_packet_length() -> None:
    assert run(LEN, bytes(77)) == 77


def test_ctx_fields_through_a_copy_and_a_spill() -> None:
    text = ("r6 = r1\n*(u64 *)(r10 -8) = r6\nr7 = *(u64 *)(r10 -8)\n"
            "r0 = *(u32 *)(r7 +12)\nexit")
    assert run(text) == 1  # ingress_ifindex defaults to lo


@pytest.mark.parametrize(("text", "why"), [
    ("r0 = *(u16 *)(r1 +0)\nexit", "4-byte"),
    ("r0 = *(u32 *)(r1 +24)\nexit", "no field"),
    ("r0 = *(u32 *)(r1 +2)\nexit", "4-byte aligned"),
    ("*(u32 *)(r1 +0) = 1\nr0 = 0\nexit", "read-only"),
    ("r0 = *(u32 *)(r1 +20)\nexit", "devmap"),
    ("r1 += 4\nr0 = *(u32 *)(r1 +0)\nexit", "modified context"),
])
def test_context_access_rules_at_load(text: str, why: str) -> None:
    with pytest.raises(InvalidProgram, match=why):
        prog(text)


def test_egress_ifindex_for_devmap_programs() -> None:
    prog("r0 = *(u32 *)(r1 +20)\nexit", BpfAttachType.BPF_XDP_DEVMAP)


def test_unknown_helper_fails_at_load_naming_it() -> None:
    with pytest.raises(UnsupportedHelper, match=r"helper bpf_skb_store_bytes \(#9\)"):
        prog("call 9\nr0 = 0\nexit")


def test_test_run_rules() -> None:
    p = prog(LEN)
    with pytest.raises(KernelError) as e:
        bpf_prog_test_run_xdp(p, bytes(13))
    assert e.value.errno == errno.EINVAL
    md = struct.pack("<6I", 0, 99, 0, 0, 0, 0)
    with pytest.raises(KernelError):  # data_end must not exceed the input size
        bpf_prog_test_run_xdp(p, bytes(64), ctx_in=md)
    with pytest.raises(KernelError) as e:
        bpf_prog_test_run_xdp(p, bytes(64), ctx_in=struct.pack("<6I", 0, 64, 0, 7, 0, 0))
    assert e.value.errno == errno.ENODEV
    with pytest.raises(KernelError) as e:  # bytes past struct xdp_md must be zero
        bpf_prog_test_run_xdp(p, bytes(64), ctx_in=struct.pack("<6I", 0, 64, 0, 0, 0, 0) + b"x")
    assert e.value.errno == errno.E2BIG


def test_ctx_data_end_below_the_input_size_sets_the_linear_part() -> None:
    """Linux 6.18: ctx.data_end (metadata included) is the linear length, the rest of the
    input goes into frags; it is capped at 3520 + metadata and may be 0."""
    p = prog("call 188\nexit")  # bpf_xdp_get_buff_len
    for meta, data_end, linear in ((0, 20, 20), (8, 28, 28), (0, 0, 0), (4, 4, 4),
                                   (0, 4000, 3520), (8, 4000, 3528)):
        r = bpf_prog_test_run_xdp(p, bytes(meta) + bytes(range(250)) * 20,
                                  ctx_in=struct.pack("<6I", meta, data_end, 0, 0, 0, 0))
        assert r.retval == 5000 and r.data_out == bytes(meta) + bytes(range(250)) * 20
        assert struct.unpack("<6I", r.ctx_out or b"")[:2] == (meta, linear)
    with pytest.raises(KernelError) as e:  # metadata beyond 256 - sizeof(struct xdp_frame)
        bpf_prog_test_run_xdp(p, bytes(300), ctx_in=struct.pack("<6I", 220, 300, 0, 0, 0, 0))
    assert e.value.errno == errno.EINVAL
    r = bpf_prog_test_run_xdp(p, bytes(64), ctx_size_out=24)  # a zeroed ctx: linear 0
    assert r.retval == 64 and struct.unpack("<6I", r.ctx_out or b"")[:2] == (0, 0)


def test_metadata_from_ctx_data_and_ctx_out() -> None:
    p = prog(LEN)
    r = bpf_prog_test_run_xdp(p, bytes(8) + bytes(64),
                              ctx_in=struct.pack("<6I", 8, 72, 0, 0, 0, 0), ctx_size_out=24)
    assert r.retval == 64 and len(r.data_out) == 72
    assert struct.unpack("<6I", r.ctx_out or b"")[:2] == (8, 72)


def test_output_truncated_is_enospc_with_the_copied_part() -> None:
    with pytest.raises(TestRunTruncated) as e:
        bpf_prog_test_run_xdp(prog(LEN), bytes(range(64)), data_size_out=10)
    assert e.value.data_size == 64 and e.value.result.data_out == bytes(range(10))  # type: ignore[attr-defined]


def test_jumbo_input_goes_to_frags() -> None:
    text = "call 188\nexit"  # bpf_xdp_get_buff_len(ctx)
    r = bpf_prog_test_run_xdp(prog(text), bytes(9000))
    assert r.retval == 9000 and len(r.data_out) == 9000


def test_buffer_not_reset_between_repeats() -> None:
    # Each run moves data forward by 1 byte: after 5 runs the packet is 5 bytes shorter.
    text = "r6 = r1\nr2 = 1\ncall 44\n" + LEN.replace("r1", "r6")
    r = bpf_prog_test_run_xdp(prog(text), bytes(64), repeat=5)
    assert r.retval == 59 and len(r.data_out) == 59


def test_adjust_helpers_limits() -> None:
    xdp = XdpBuff.prepare(bytes(60))
    assert xdp.adjust_head(-256) == -errno.EINVAL  # below the 40-byte xdp_frame floor
    assert xdp.adjust_head(-216) == 0
    assert xdp.adjust_head(60 + 216 - 13) == -errno.EINVAL  # < ETH_HLEN left
    assert xdp.adjust_meta(-4) == -errno.EINVAL  # data is at the floor: no room for metadata
    xdp = XdpBuff.prepare(bytes(60))
    assert xdp.adjust_meta(-3) == -errno.EACCES  # not a multiple of 4
    assert xdp.adjust_meta(-8) == 0 and xdp.metalen == 8
    assert xdp.adjust_tail(4096) == -errno.EINVAL
    assert xdp.adjust_tail(10) == 0 and xdp.packet()[-10:] == bytes(10)


def test_redirect_is_recorded() -> None:
    r = bpf_prog_test_run_xdp(prog("r1 = 7\nr2 = 0\ncall 23\nexit"), bytes(64))
    assert r.retval == XdpAction.XDP_REDIRECT
    assert r.redirect is not None and r.redirect["tgt_index"] == 7
    r = bpf_prog_test_run_xdp(prog("r1 = 7\nr2 = 1\ncall 23\nexit"), bytes(64))
    assert r.retval == XdpAction.XDP_ABORTED


def test_out_of_bounds_read_aborts_with_the_c_source_line() -> None:
    # Linux's verifier (and pyxdp's) refuses the object; unverified, the run-time check
    # stops the read.
    with Collection.load(SAMPLES / "unchecked.o", verify=False) as c:
        r = c.programs["xdp_unchecked"].test_run(bytes(14))
        assert r.retval == XdpAction.XDP_ABORTED
        assert r.fault is not None and "unchecked.c:20" in r.fault
        assert "out-of-bounds read of 1 bytes" in r.fault
        assert c.programs["xdp_unchecked"].test_run(udp_packet(b"x")).retval == XdpAction.XDP_DROP


def test_xdp1_counts_per_protocol() -> None:
    with Collection.load(SAMPLES / "xdp1.o", nr_cpus=2) as c:
        for _ in range(3):
            assert c.programs["xdp_prog1"].test_run(udp_packet(b"hi")).retval == XdpAction.XDP_DROP
        # each run counts on the CPU its caller was on (as BPF_PROG_TEST_RUN does)
        assert len(c.maps["rxcnt"][17]) == 2
        assert c.maps["rxcnt"].sum(17) == 3


def test_xdp2_swaps_macs_and_transmits() -> None:
    pkt = udp_packet(b"hi")
    with Collection.load(SAMPLES / "xdp2.o") as c:
        r = c.programs["xdp_prog2"].test_run(pkt)
    assert r.retval == XdpAction.XDP_TX
    assert r.data_out[:6] == pkt[6:12] and r.data_out[6:12] == pkt[:6]


def test_instruction_trace() -> None:
    r = bpf_prog_test_run_xdp(prog(LEN), bytes(64), trace=True)
    assert len(r.insn_trace) == 5 and "r2 = *(u32 *)(r1 +4)" in r.insn_trace[0]
