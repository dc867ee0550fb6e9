"""Small XDP programs from assembler text, as CollectionSpecs (for tests and examples)."""

from __future__ import annotations

from collections.abc import Sequence

from pyxdp.asm import opcodes as op
from pyxdp.asm.assembler import assemble
from pyxdp.spec import CollectionSpec, MapRef, MapSpec, ProgramSpec
from pyxdp.uapi.bpf import BpfMapType

__all__ = ["REDIRECT_XSK", "asm_collection"]


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


# return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS): xdpsock's program.
REDIRECT_XSK = asm_collection("""
r2 = *(u32 *)(r1 +16)
r1 = map[fd:0]
r3 = 2
call 51
exit
""", [MapSpec("xsks", BpfMapType.BPF_MAP_TYPE_XSKMAP, 4, 4, 4)])
