"""Small XDP programs from assembler text, as CollectionSpecs (for tests and examples)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyxdp.asm import opcodes as op
from pyxdp.asm.assembler import assemble
from pyxdp.spec import CollectionSpec, MapRef, MapSpec, ProgramSpec
from pyxdp.testing.verifier_cases import VerifierCase
from pyxdp.uapi.bpf import BpfMapType

if TYPE_CHECKING:
    from pyxdp.collection import Collection

__all__ = ["REDIRECT_XSK", "asm_collection", "frames_by_payload", "iter_case",
           "redirect_by_payload", "run_iter", "verdict_by_payload"]


def asm_collection(text: str, maps: Sequence[MapSpec] = ()) -> CollectionSpec:
    """One XDP program ``t`` from bpftool-style text; ``map[fd:N]`` names ``maps[N]``."""
    insns = assemble(text)
    refs = []
    for pc, i in enumerate(insns):
        if i.code == op.OP_LD_IMM64 and i.src == op.PseudoSrc.BPF_PSEUDO_MAP_FD:
            refs.append(MapRef(pc, maps[i.imm].name, "fd"))
        elif i.code == op.OP_LD_IMM64 and i.src == op.PseudoSrc.BPF_PSEUDO_MAP_VALUE:
            refs.append(MapRef(pc, maps[i.imm].name, "value", insns[pc + 1].imm))
    prog = ProgramSpec("t", "xdp", insns, license="GPL", map_refs=tuple(refs))
    return CollectionSpec({"t": prog}, {m.name: m for m in maps}, license="GPL")


def with_callback(spec: CollectionSpec) -> CollectionSpec:
    """``spec`` with its program's main function and its callback (the subprogram the
    first ``subprog[...]`` load names) described as BTF functions, as the verifier wants
    of a program handing a callback to a helper."""
    from dataclasses import replace

    from pyxdp.spec import FuncInfo
    from pyxdp.testing.verifier_cases import Func, funcs_btf
    btf, ids, _, _ = funcs_btf((Func("main"), Func("cb")))
    prog = spec.programs["t"]
    cb = next(pc + 1 + i.imm for pc, i in enumerate(prog.insns)
              if i.is_ld_imm64() and i.src == op.PseudoSrc.BPF_PSEUDO_FUNC)
    infos = (FuncInfo(0, ids[0], "main"), FuncInfo(cb, ids[1], "cb"))
    return replace(spec, programs={"t": prog.copy(func_info=infos)}, btf=btf)


# return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS): xdpsock's program.
REDIRECT_XSK = asm_collection("""
r2 = *(u32 *)(r1 +16)
r1 = map[fd:0]
r3 = 2
call 51
exit
""", [MapSpec("xsks", BpfMapType.BPF_MAP_TYPE_XSKMAP, 4, 4, 4)])


def iter_case(start: int, end: int) -> CollectionSpec:
    """The numbers iterator (``bpf_iter_num_*``): new(start, end), then next() up to 16
    times, destroy; arr[0] gets new's return, the number of values, the first and the
    last value."""
    return VerifierCase("xdp_iter", f"""
r1 = r10
r1 += -8
r2 = {start}
r3 = {end}
call KFUNC(bpf_iter_num_new)
r7 = r0
r6 = 0
r8 = 0
r9 = 0
loop:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r1 = *(u32 *)(r0 +0)
if r6 != 0 goto +1
r9 = r1
r8 = r1
r6 += 1
if r6 < 16 goto loop
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
*(u32 *)(r10 -16) = 0
r1 = MAP(arr)
r2 = r10
r2 += -16
call 1
if r0 == 0 goto +4
*(u32 *)(r0 +0) = r7
*(u32 *)(r0 +4) = r6
*(u32 *)(r0 +8) = r9
*(u32 *)(r0 +12) = r8
r0 = 2
exit""", None).spec()


def run_iter(coll: Collection) -> tuple[int, int, int, int]:
    """:func:`iter_case` run once: (new's return, values seen, first, last)."""
    assert coll.programs["xdp_iter"].test_run(bytes(64)).retval == 2
    raw = coll.maps["arr"].handle.lookup(bytes(4))
    assert raw is not None
    ret, n, first, last = struct.unpack("<iIii", raw)
    return ret, n, first, last

def verdict_by_payload(count_off: int, redirect_ifindex: int = 1) -> str:
    """An XDP program (assembly) that counts runs in map 1 (a u64 per key) by the low 2
    bits of the ``xdp_md`` field at ``count_off``, then lets the payload's first byte
    (frame byte 42), bits 2.., pick what it does: 0 PASS, 1 DROP, 2 ABORTED, 3 TX, 4 a
    redirect to ``redirect_ifindex``, 5 an unknown verdict, 6 a fault, 7 adjust_head
    then PASS. The datapath tests run it on every path and compare."""
    return _VERDICT_BY_PAYLOAD.replace("{off}", str(count_off)).replace(
        "{ifx}", str(redirect_ifindex))


_VERDICT_BY_PAYLOAD = """
    r6 = r1
    r1 = *(u32 *)(r6 +{off})
    r1 &= 3
    *(u32 *)(r10 -4) = r1
    r1 = map[fd:1]
    r2 = r10
    r2 += -4
    call bpf_map_lookup_elem
    if r0 == 0 goto skip
    r1 = *(u64 *)(r0 +0)
    r1 += 1
    *(u64 *)(r0 +0) = r1
skip:
    r2 = *(u32 *)(r6 +0)
    r3 = *(u32 *)(r6 +4)
    r4 = r2
    r4 += 43
    if r4 > r3 goto pass
    r7 = *(u8 *)(r2 +42)
    r7 >>= 2
    if r7 == 1 goto drop
    if r7 == 2 goto aborted
    if r7 == 3 goto tx
    if r7 == 4 goto red
    if r7 == 5 goto bad
    if r7 == 6 goto fault
    if r7 == 7 goto head
pass:
    r0 = 2
    exit
drop:
    r0 = 1
    exit
aborted:
    r0 = 0
    exit
tx:
    r0 = 3
    exit
red:
    r1 = {ifx}
    r2 = 0
    call bpf_redirect
    exit
bad:
    r0 = 9
    exit
fault:
    r2 = *(u32 *)(r6 +0)
    r0 = *(u64 *)(r2 +4000)
    r0 = 2
    exit
head:
    r1 = r6
    r2 = -4
    call bpf_xdp_adjust_head
    r0 = 2
    exit
"""


def redirect_by_payload(flags: int, *, flags_slot: int | None = None) -> str:
    """An XDP program (assembly) that redirects every frame into devmap map 0 at the
    slot the payload's first byte (frame byte 42), low 2 bits, names, with ``flags``
    (``BPF_F_BROADCAST``...): on every slot, or with ``flags_slot`` on that slot only.
    A frame too short for the byte is passed. Beside :func:`verdict_by_payload` on the
    receiving side, :func:`frames_by_payload` makes every slot meet every verdict."""
    if flags_slot is None:
        pick = f"    r3 = {flags}\n"
    else:
        pick = f"    r3 = 0\n    if r2 != {flags_slot} goto go\n    r3 = {flags}\ngo:\n"
    return _REDIRECT_BY_PAYLOAD.replace("{flags}\n", pick)


_REDIRECT_BY_PAYLOAD = """
    r6 = r1
    r2 = *(u32 *)(r6 +0)
    r3 = *(u32 *)(r6 +4)
    r4 = r2
    r4 += 43
    r0 = 2
    if r4 > r3 goto out
    r2 = *(u8 *)(r2 +42)
    r2 &= 3
    r1 = map[fd:0]
{flags}
    call bpf_redirect_map
out:
    exit
"""


def frames_by_payload(count: int = 96) -> list[bytes]:
    """UDP frames whose first payload byte gives every devmap slot of
    :func:`redirect_by_payload` (bits 0-1) every verdict of :func:`verdict_by_payload`
    (bits 2-4), in sizes 64, 200 and 1400."""
    from pyxdp.net.packets import udp_packet
    out = []
    for i in range(count):
        slot, verdict = i % 4, (i // 4) % 8
        out.append(udp_packet(bytes([verdict << 2 | slot]) + b"x" * 20, sport=1000 + i,
                              size=(64, 200, 1400)[i % 3]))
    return out
