"""Linux's checks of instruction encodings: the opcode table and the reserved fields.

The kernel checks an encoding in two places. ``resolve_pseudo_ldimm64`` walks the
whole program in order, after ``check_subprogs`` (jump ranges, each function's last
instruction): an LDX of another mode or with an imm, a malformed ``ld_imm64`` and an
opcode outside ``bpf_opcode_in_insntable`` refuse the program wherever they are. The
rest (``BPF_ALU uses reserved fields``, ``BPF_JA uses reserved fields``...) are
``do_check``'s, refused only when a path reaches the instruction: one in dead code
is loaded. :func:`linux_fields` finds both and gives the program back with the
offending fields cleared, so pyxdp's ISA checks and walk see a well-formed one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from pyxdp.asm import opcodes as op
from pyxdp.asm.disasm import BPF_ADDR_SPACE_CAST, BPF_JCOND
from pyxdp.asm.insn import Instruction

__all__ = ["Fields", "linux_fields", "opcode_in_insntable"]

_ALU_BIN = frozenset((op.BPF_ADD, op.BPF_SUB, op.BPF_MUL, op.BPF_DIV, op.BPF_OR, op.BPF_AND,
                      op.BPF_LSH, op.BPF_RSH, op.BPF_MOD, op.BPF_XOR, op.BPF_MOV, op.BPF_ARSH))
_COND = frozenset((op.BPF_JEQ, op.BPF_JGT, op.BPF_JGE, op.BPF_JSET, op.BPF_JNE, op.BPF_JSGT,
                   op.BPF_JSGE, op.BPF_JLT, op.BPF_JLE, op.BPF_JSLT, op.BPF_JSLE))
_SIZES = (op.BPF_W, op.BPF_H, op.BPF_B, op.BPF_DW)


def _table() -> frozenset[int]:
    codes = {op.OP_LD_IMM64}
    for cls in (op.BPF_ALU, op.BPF_ALU64):
        codes |= {cls | o | s for o in _ALU_BIN for s in (op.BPF_K, op.BPF_X)}
        codes.add(cls | op.BPF_NEG)
    codes |= {op.BPF_ALU | op.BPF_END | op.BPF_TO_LE, op.BPF_ALU | op.BPF_END | op.BPF_TO_BE,
              op.BPF_ALU64 | op.BPF_END}
    for cls in (op.BPF_JMP, op.BPF_JMP32):
        codes |= {cls | o | s for o in _COND for s in (op.BPF_K, op.BPF_X)}
        codes.add(cls | op.BPF_JA)
    codes |= {op.BPF_JMP | op.BPF_CALL, op.BPF_JMP | op.BPF_EXIT, op.BPF_JMP | BPF_JCOND}
    codes |= {op.BPF_LD | m | s for m in (op.BPF_ABS, op.BPF_IND)
              for s in (op.BPF_W, op.BPF_H, op.BPF_B)}
    for s in _SIZES:
        codes |= {op.BPF_LDX | op.BPF_MEM | s, op.BPF_ST | op.BPF_MEM | s,
                  op.BPF_STX | op.BPF_MEM | s, op.BPF_STX | op.BPF_ATOMIC | s}
        if s != op.BPF_DW:
            codes.add(op.BPF_LDX | op.BPF_MEMSX | s)
    return frozenset(codes)


_INSNTABLE = _table()


def opcode_in_insntable(code: int) -> bool:
    """bpf_opcode_in_insntable: an opcode the kernel's interpreter has."""
    return code in _INSNTABLE


@dataclass(frozen=True)
class Fields:
    """``insns`` with the offending fields cleared; ``early``: resolve_pseudo_ldimm64's
    refusal, if any (refused before any walk, after the jump checks); ``reached``: the
    pc of each instruction do_check refuses, with its message; ``early_pc``: where the
    early refusal is (the map loads before it are resolved first)."""

    insns: tuple[Instruction, ...]
    early: str | None
    reached: dict[int, str]
    early_pc: int = 0


def _reached(i: Instruction) -> tuple[str, Instruction] | None:
    """do_check's refusal of ``i``'s fields (an opcode of the table), and ``i`` without
    them."""
    cls, o, x = i.code & 7, i.code & 0xF0, i.code & op.BPF_X
    if cls in (op.BPF_ALU, op.BPF_ALU64):
        if o == op.BPF_NEG:
            if x or i.src or i.off or i.imm:
                return "BPF_NEG uses reserved fields", replace(i, src=0, off=0, imm=0)
        elif o == op.BPF_END:
            if i.src or i.off or i.imm not in (16, 32, 64):
                return "BPF_END uses reserved fields", replace(i, src=0, off=0, imm=16)
        elif o == op.BPF_MOV and x:
            if cls == op.BPF_ALU64 and i.off == BPF_ADDR_SPACE_CAST:
                if i.imm not in (1, 1 << 16):
                    return ("addr_space_cast insn can only convert between address space 1 "
                            "and 0", replace(i, off=0, imm=0))
            elif i.imm or i.off not in ((0, 8, 16) if cls == op.BPF_ALU else (0, 8, 16, 32)):
                return "BPF_MOV uses reserved fields", replace(i, off=0, imm=0)
        elif o == op.BPF_MOV:
            if i.src or i.off:
                return "BPF_MOV uses reserved fields", replace(i, src=0, off=0)
        elif (i.imm if x else i.src) or i.off not in (0, 1) or (
                i.off == 1 and o not in (op.BPF_DIV, op.BPF_MOD)):
            return "BPF_ALU uses reserved fields", replace(i, off=0, **(
                {"imm": 0} if x else {"src": 0}))
        return None
    if cls in (op.BPF_JMP, op.BPF_JMP32):
        if o == op.BPF_CALL:
            kfunc = i.src == op.CallSrc.BPF_PSEUDO_KFUNC_CALL  # off: the module's BTF
            if i.dst or (not kfunc and i.off) or i.src not in (
                    0, op.CallSrc.BPF_PSEUDO_CALL, op.CallSrc.BPF_PSEUDO_KFUNC_CALL):
                src = i.src if i.src in (op.CallSrc.BPF_PSEUDO_CALL,
                                         op.CallSrc.BPF_PSEUDO_KFUNC_CALL) else 0
                return "BPF_CALL uses reserved fields", replace(
                    i, dst=0, src=src, off=i.off if kfunc else 0)
        elif o == op.BPF_EXIT:
            if i.imm or i.src or i.dst or i.off:
                # the offset is not looked at: only the rest is refused
                bad = i.imm or i.src or i.dst
                clean = replace(i, imm=0, src=0, dst=0, off=0)
                return ("BPF_EXIT uses reserved fields", clean) if bad else ("", clean)
        elif o == op.BPF_JA:
            if i.src or i.dst or (i.off if cls == op.BPF_JMP32 else i.imm):
                return "BPF_JA uses reserved fields", replace(
                    i, src=0, dst=0, **({"off": 0} if cls == op.BPF_JMP32 else {"imm": 0}))
        elif o in _COND and (i.imm if x else i.src):
            return "BPF_JMP/JMP32 uses reserved fields", replace(
                i, **({"imm": 0} if x else {"src": 0}))
        return None
    if cls == op.BPF_STX and i.code & 0xE0 == op.BPF_MEM and i.imm:
        return "BPF_STX uses reserved fields", replace(i, imm=0)
    if cls == op.BPF_ST and i.src:
        return "BPF_ST uses reserved fields", replace(i, src=0)
    if i.code == op.OP_LD_IMM64 and i.off:
        return "BPF_LD_IMM64 uses reserved fields", replace(i, off=0)
    return None


def linux_fields(insns: Sequence[Instruction]) -> Fields:
    """The kernel's encoding checks of ``insns`` (see the module docstring)."""
    out = list(insns)
    refused: list[tuple[str, int]] = []  # resolve_pseudo_ldimm64's, in program order
    reached: dict[int, str] = {}
    n, pc = len(out), 0
    while pc < n:
        i = out[pc]
        cls = i.code & 7
        if cls == op.BPF_LDX and (i.code & 0xE0 not in (op.BPF_MEM, op.BPF_MEMSX) or i.imm):
            refused.append(("BPF_LDX uses reserved fields", pc))
            out[pc] = Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 0, 0, 0, 0)
        elif i.code == op.OP_LD_IMM64 and pc + 1 < n:
            nxt = out[pc + 1]
            if nxt.code or nxt.dst or nxt.src or nxt.off:
                refused.append(("invalid bpf_ld_imm64 insn", pc))
                out[pc + 1] = Instruction(0, 0, 0, 0, nxt.imm)
            elif i.src > op.PseudoSrc.BPF_PSEUDO_MAP_IDX_VALUE:
                refused.append(("unrecognized bpf_ld_imm64 insn", pc))
                out[pc] = replace(i, src=0)
            got = _reached(out[pc])
            if got is not None:
                reached[pc], out[pc] = got
            pc += 2
            continue
        elif not opcode_in_insntable(i.code):
            refused.append((f"unknown opcode {i.code:02x}", pc))
            # still a jump where check_subprogs takes it for one (its range is checked
            # first), else an instruction that flows on
            if cls in (op.BPF_JMP, op.BPF_JMP32) and i.code & 0xF0 not in (op.BPF_CALL,
                                                                          op.BPF_EXIT):
                out[pc] = Instruction(op.BPF_JMP | op.BPF_JEQ | op.BPF_K, 0, 0, i.off, 0)
            else:
                out[pc] = Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 0, 0, 0, 0)
        else:
            got = _reached(i)
            if got is not None:
                msg, out[pc] = got
                if msg:
                    reached[pc] = msg
        pc += 1
    early, early_pc = refused[0] if refused else (None, 0)
    return Fields(tuple(out), early, reached, early_pc)
