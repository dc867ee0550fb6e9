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

from pyxdp.btf.btf import BtfKind
from pyxdp.btf.struct_access import member_offset
from pyxdp.btf.vmlinux import kernel_btf_index
from pyxdp.collection import Collection
from pyxdp.errors import VerifierError
from pyxdp.kernel.backend import KernelBackend
from pyxdp.kernel.verifier_log import verifier_reason
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.testing.verifier_cases import VerifierCase
from pyxdp.verifier import verify

pytestmark = pytest.mark.kernel

KERN_CTX = Path(__file__).resolve().parents[2] / "samples" / "kern_ctx.o"
SIZES = [0, 20, 1400, 3470]
SLOTS = 17


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


def _type_id(name: str, kind: BtfKind) -> int:
    btf = kernel_btf_index()
    if btf is None:
        pytest.skip("no kernel BTF")
    tid = btf.find(name, kind)
    assert tid is not None, name
    return tid


# bpf_rdonly_cast(ctx->data, id) by the kernel's own type ids (which differ from build
# to build, so these cases are made here and not kept in the corpus): a struct read
# inside it, past it, through a nested member, written; a union; types that are
# neither struct nor void.
def _rdonly_cases() -> list[tuple[str, str]]:
    eth = _type_id("ethhdr", BtfKind.STRUCT)
    ip = _type_id("iphdr", BtfKind.STRUCT)
    shinfo = _type_id("skb_shared_info", BtfKind.STRUCT)
    prog = _type_id("bpf_prog", BtfKind.STRUCT)
    btf = kernel_btf_index()
    assert btf is not None
    frags = member_offset(btf, shinfo, "frags")
    assert frags is not None
    end = btf.type_by_id(prog).size_type
    cast = "r1 = *(u32 *)(r1 +0)\nr2 = {id}\ncall KFUNC(bpf_rdonly_cast)\n"
    # skb_frag_t frags[]: an array of a typedef'd struct, read inside its second element
    arrays = [(f"frags_{at}_{size}", cast.format(id=shinfo)
               + f"r0 = *(u{size * 8} *)(r0 +{frags[0] + at})\nexit")
              for at, size in ((24, 4), (16, 8), (17, 4), (28, 8), (20, 8))]
    return [*arrays,
        ("prog_past_end", cast.format(id=prog) + f"r0 = *(u32 *)(r0 +{end + 8})\nexit"),
        ("eth_read", cast.format(id=eth) + "r0 = *(u16 *)(r0 +12)\nexit"),
        ("eth_beyond", cast.format(id=eth) + "r0 = *(u8 *)(r0 +14)\nexit"),
        ("eth_member_end", cast.format(id=eth) + "r0 = *(u64 *)(r0 +8)\nexit"),
        ("eth_write", cast.format(id=eth) + "r1 = 0\n*(u8 *)(r0 +0) = r1\nr0 = 2\nexit"),
        ("eth_negative", cast.format(id=eth) + "r0 = *(u8 *)(r0 -1)\nexit"),
        ("ip_saddr", cast.format(id=ip) + "r0 = *(u32 *)(r0 +12)\nexit"),
        ("ip_bitfield", cast.format(id=ip) + "r0 = *(u8 *)(r0 +0)\nexit"),
        ("union", cast.format(id=_type_id("nf_inet_addr", BtfKind.UNION))
         + "r0 = *(u32 *)(r0 +4)\nexit"),
        ("int", cast.format(id=_type_id("int", BtfKind.INT)) + "r0 = 2\nexit"),
        ("typedef", cast.format(id=_type_id("u32", BtfKind.TYPEDEF)) + "r0 = 2\nexit"),
        ("ptr_walk", cast.format(id=_type_id("xdp_buff", BtfKind.STRUCT))
         + "r0 = *(u64 *)(r0 +32)\nr0 = *(u32 *)(r0 +8)\nexit"),
        ("ptr_walk_write", cast.format(id=_type_id("xdp_buff", BtfKind.STRUCT))
         + "r0 = *(u64 *)(r0 +32)\nr1 = 0\n*(u32 *)(r0 +8) = r1\nr0 = 2\nexit"),
    ]


def test_rdonly_cast_by_kernel_type_id_same_verdict_as_linux() -> None:
    wrong = []
    for name, asm in _rdonly_cases():
        spec = VerifierCase(f"rdc_{name}", asm, None).spec()
        (prog,) = spec.programs.values()
        try:
            verify(prog, spec.maps, btf=spec.btf)
            mine: tuple[str | None, int] = (None, 0)
        except VerifierError as e:
            mine = (e.reason, e.errno)
        kb = KernelBackend(spec)
        try:
            kb.load_program(prog, {})
            linux: tuple[str | None, int] = (None, 0)
        except VerifierError as e:
            linux = (verifier_reason(e.log), e.errno)
        finally:
            kb.close()
        if mine != linux:
            wrong.append(f"{name}: Linux {linux}, pyxdp {mine}")
    assert not wrong, "\n".join(wrong)
