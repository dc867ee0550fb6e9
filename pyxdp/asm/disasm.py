"""Disassembler: eBPF slots to text, as the kernel's ``print_bpf_insn`` prints them.

The spellings are those of ``kernel/bpf/disasm.c`` (the verifier log) with
bpftool's ``xlated`` callbacks for ld_imm64 pseudo sources, so a line here
reads the same as in ``bpftool prog dump xlated`` or a verifier log::

    r0 = 1                                   w1 s/= 3
    r0 = (s8)r1                              r0 = bswap16 r0
    if r1 > 0x2 goto pc+3                    gotol pc+70000
    *(u64 *)(r10 -8) = r1                    r0 = *(s8 *)(r10 -1)
    lock *(u64 *)(r10 -8) += r1              r1 = atomic64_xchg((u64 *)(r10 -8), r1)
    call bpf_map_lookup_elem#1               call pc+3

Where the kernel's text would lose a field a *valid* instruction carries,
the line extends it rather than drop the field, so that
``assemble("\\n".join(disassemble(p))) == p`` holds for every valid program:

* ld_imm64 with ``src_reg == 0`` ends in `` ll`` (as LLVM prints it), which
  keeps it apart from a 32-bit ``mov``;
* a map referenced by fd (before load) prints ``map[fd:N]``; bpftool's
  ``map[id:N]`` is the same encoding after the kernel rewrote fds to ids;
* ``BPF_PSEUDO_MAP_IDX`` prints ``map[idx:N]``, ``BPF_PSEUDO_BTF_ID``
  ``btf_id[N]`` (``btf_id[N][btf_fd:M]`` for a module's BTF), which neither
  the kernel nor bpftool name;
* a kfunc call into a module (``off`` = index of the module's BTF fd in
  ``fd_array``) prints ``call kernel-function#N[btf_fd_idx:M]``;
* ``callx`` (``BPF_JMP | BPF_CALL | BPF_X``, reserved by RFC 9669, emitted
  by GCC and LLVM >= 19) holds its register in ``dst_reg`` and prints as
  LLVM does, ``callx r2``; the kernel has no spelling for it.

Opcodes that name no instruction print ``(xx) invalid`` and never raise: the
disassembler is also how error messages show a rejected instruction.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyxdp.asm import opcodes as op
from pyxdp.asm.helpers_names import helper_name
from pyxdp.asm.insn import Instruction

__all__ = [
    "ALU_OP_SPELLING",
    "BPF_ADDR_PERCPU",
    "BPF_ADDR_SPACE_CAST",
    "BPF_JCOND",
    "BPF_LOAD_ACQ",
    "BPF_MAY_GOTO",
    "BPF_STORE_REL",
    "JMP_OP_SPELLING",
    "disassemble",
    "format_insn",
]

# Kernel encodings that opcodes.py does not (yet) name; values from
# include/uapi/linux/bpf.h.
BPF_JCOND = 0xE0  # jump op: conditional pseudo jump, with src_reg selecting which
BPF_MAY_GOTO = 0  # src_reg of BPF_JCOND: may_goto (bounded loop escape)
BPF_LOAD_ACQ = op.BPF_LOAD_ACQ  # atomic imm: load-acquire (named here before opcodes.py did)
BPF_STORE_REL = op.BPF_STORE_REL  # atomic imm: store-release
BPF_ADDR_SPACE_CAST = 1  # off of ALU64 MOV X: arena address-space cast
BPF_ADDR_PERCPU = -1  # off of ALU64 MOV X: per-CPU address (kernel-internal)
_BPF_NOSPEC = 0xC0  # ST mode the kernel inserts itself; not UAPI

# disasm.c's bpf_alu_string, minus neg and endian which print differently.
ALU_OP_SPELLING: dict[int, str] = {
    op.BPF_ADD: "+=", op.BPF_SUB: "-=", op.BPF_MUL: "*=", op.BPF_DIV: "/=",
    op.BPF_OR: "|=", op.BPF_AND: "&=", op.BPF_LSH: "<<=", op.BPF_RSH: ">>=",
    op.BPF_MOD: "%=", op.BPF_XOR: "^=", op.BPF_MOV: "=", op.BPF_ARSH: "s>>=",
}
# bpf_alu_sign_string: div and mod with off == 1 are the signed variants.
ALU_SIGNED_SPELLING: dict[int, str] = {op.BPF_DIV: "s/=", op.BPF_MOD: "s%="}
# bpf_jmp_string for the conditional jumps.
JMP_OP_SPELLING: dict[int, str] = {
    op.BPF_JEQ: "==", op.BPF_JGT: ">", op.BPF_JGE: ">=", op.BPF_JSET: "&",
    op.BPF_JNE: "!=", op.BPF_JSGT: "s>", op.BPF_JSGE: "s>=", op.BPF_JLT: "<",
    op.BPF_JLE: "<=", op.BPF_JSLT: "s<", op.BPF_JSLE: "s<=",
}
# bpf_ldst_string / bpf_ldsx_string.
LDST_SPELLING: dict[int, str] = {op.BPF_W: "u32", op.BPF_H: "u16", op.BPF_B: "u8",
                                 op.BPF_DW: "u64"}
LDSX_SPELLING: dict[int, str] = {op.BPF_W: "s32", op.BPF_H: "s16", op.BPF_B: "s8"}
# bpf_movsx_string, keyed by the off field.
MOVSX_SPELLING: dict[int, str] = {8: "(s8)", 16: "(s16)", 32: "(s32)"}
# bpf_atomic_alu_string: the ALU ops an atomic may carry in imm.
ATOMIC_ALU_SPELLING: dict[int, str] = {op.BPF_ADD: "add", op.BPF_AND: "and",
                                       op.BPF_OR: "or", op.BPF_XOR: "xor"}


class _Invalid(Exception):
    """Internal: the slot names no instruction; carries an optional detail."""


def _mem(reg: int, off: int) -> str:
    # disasm.c prints "(r%d %+d)": a space, then the signed offset.
    return f"(r{reg} {off:+d})"


def _u32(v: int) -> int:
    return v & 0xFFFF_FFFF


def _alu(insn: Instruction) -> str:
    cls = insn.cls
    o = op.bpf_op(insn.code)
    c = "w" if cls == op.BPF_ALU else "r"
    if o == op.BPF_END:
        if cls == op.BPF_ALU64:
            # ALU64 | END is the unconditional byte swap; only the K form exists.
            if op.bpf_src(insn.code) != op.BPF_TO_LE:
                raise _Invalid
            return f"r{insn.dst} = bswap{insn.imm} r{insn.dst}"
        order = "be" if op.bpf_src(insn.code) == op.BPF_TO_BE else "le"
        return f"r{insn.dst} = {order}{insn.imm} r{insn.dst}"
    if o == op.BPF_NEG:
        if op.bpf_src(insn.code) != op.BPF_K:
            raise _Invalid
        return f"{c}{insn.dst} = -{c}{insn.dst}"
    if o not in ALU_OP_SPELLING:
        raise _Invalid
    signed = o in ALU_SIGNED_SPELLING and insn.off == 1
    spelled = ALU_SIGNED_SPELLING[o] if signed else ALU_OP_SPELLING[o]
    if op.bpf_src(insn.code) == op.BPF_X:
        if cls == op.BPF_ALU64 and o == op.BPF_MOV and insn.off == BPF_ADDR_SPACE_CAST:
            imm = _u32(insn.imm)
            return (f"r{insn.dst} = addr_space_cast(r{insn.src}, {imm >> 16}, "
                    f"{imm & 0xFFFF})")
        if cls == op.BPF_ALU64 and o == op.BPF_MOV and insn.off == BPF_ADDR_PERCPU:
            # Only the kernel emits this (inlined per-CPU helpers); xlated dumps show it.
            return f"r{insn.dst} = &(void __percpu *)(r{insn.src})"
        sx = MOVSX_SPELLING.get(insn.off, "") if o == op.BPF_MOV else ""
        return f"{c}{insn.dst} {spelled} {sx}{c}{insn.src}"
    return f"{c}{insn.dst} {spelled} {insn.imm}"


def _stx(insn: Instruction) -> str:
    mode = op.bpf_mode(insn.code)
    size = op.bpf_size(insn.code)
    sz = LDST_SPELLING[size]
    mem = _mem(insn.dst, insn.off)
    if mode == op.BPF_MEM:
        return f"*({sz} *){mem} = r{insn.src}"
    if mode != op.BPF_ATOMIC:
        raise _Invalid
    imm = insn.imm
    bits = "64" if size == op.BPF_DW else ""
    if imm in ATOMIC_ALU_SPELLING:
        return f"lock *({sz} *){mem} {ALU_OP_SPELLING[imm]} r{insn.src}"
    if imm & op.BPF_FETCH and (imm & ~op.BPF_FETCH) in ATOMIC_ALU_SPELLING:
        name = ATOMIC_ALU_SPELLING[imm & ~op.BPF_FETCH]
        return f"r{insn.src} = atomic{bits}_fetch_{name}(({sz} *){mem}, r{insn.src})"
    if imm == op.BPF_CMPXCHG:
        return f"r0 = atomic{bits}_cmpxchg(({sz} *){mem}, r0, r{insn.src})"
    if imm == op.BPF_XCHG:
        return f"r{insn.src} = atomic{bits}_xchg(({sz} *){mem}, r{insn.src})"
    if imm == BPF_LOAD_ACQ:
        # The loaded value goes to dst_reg; src_reg is the address.
        return f"r{insn.dst} = load_acquire(({sz} *){_mem(insn.src, insn.off)})"
    if imm == BPF_STORE_REL:
        return f"store_release(({sz} *){mem}, r{insn.src})"
    raise _Invalid


def _ld(insns: Sequence[Instruction], pc: int) -> str:
    insn = insns[pc]
    mode = op.bpf_mode(insn.code)
    sz = LDST_SPELLING[op.bpf_size(insn.code)]
    if mode == op.BPF_ABS:
        return f"r0 = *({sz} *)skb[{insn.imm}]"
    if mode == op.BPF_IND:
        return f"r0 = *({sz} *)skb[r{insn.src} + {insn.imm}]"
    if insn.code != op.OP_LD_IMM64:
        raise _Invalid
    if pc + 1 >= len(insns):
        raise _Invalid("ld_imm64 without its second slot")
    lo = _u32(insn.imm)
    hi = _u32(insns[pc + 1].imm)
    rhs: str
    src = insn.src
    if src == op.PseudoSrc.BPF_PSEUDO_NONE:
        rhs = f"{(hi << 32) | lo:#x} ll"
    elif src == op.PseudoSrc.BPF_PSEUDO_MAP_FD:
        rhs = f"map[fd:{lo}]"
    elif src == op.PseudoSrc.BPF_PSEUDO_MAP_VALUE:
        rhs = f"map[fd:{lo}][0]+{hi}"
    elif src == op.PseudoSrc.BPF_PSEUDO_BTF_ID:
        rhs = f"btf_id[{lo}]" + (f"[btf_fd:{hi}]" if hi else "")
    elif src == op.PseudoSrc.BPF_PSEUDO_FUNC:
        rhs = f"subprog[{insn.imm:+d}]"
    elif src == op.PseudoSrc.BPF_PSEUDO_MAP_IDX:
        rhs = f"map[idx:{lo}]"
    elif src == op.PseudoSrc.BPF_PSEUDO_MAP_IDX_VALUE:
        rhs = f"map[idx:{lo}]+{hi}"
    else:
        raise _Invalid(f"ld_imm64 pseudo source {src}")
    return f"r{insn.dst} = {rhs}"


def _jmp(insn: Instruction) -> str:
    cls = insn.cls
    o = op.bpf_op(insn.code)
    x = op.bpf_src(insn.code) == op.BPF_X
    if o == op.BPF_CALL:
        if cls == op.BPF_JMP32:
            raise _Invalid
        if x:
            return f"callx r{insn.dst}"
        if insn.src == op.CallSrc.BPF_PSEUDO_CALL:
            return f"call pc{insn.imm:+d}"
        if insn.src == op.CallSrc.BPF_HELPER_CALL:
            return f"call {helper_name(insn.imm) or 'unknown'}#{insn.imm}"
        if insn.src == op.CallSrc.BPF_PSEUDO_KFUNC_CALL:
            module = f"[btf_fd_idx:{insn.off}]" if insn.off else ""
            return f"call kernel-function#{insn.imm}{module}"
        raise _Invalid(f"call source {insn.src}")
    if o == op.BPF_JA:
        if x:
            raise _Invalid
        if cls == op.BPF_JMP32:
            # gotol: the 32-bit jump keeps its offset in imm.
            return f"gotol pc{insn.imm:+d}"
        return f"goto pc{insn.off:+d}"
    if o == op.BPF_EXIT:
        if cls == op.BPF_JMP32 or x:
            raise _Invalid
        return "exit"
    if o == BPF_JCOND:
        if cls == op.BPF_JMP32 or x or insn.src != BPF_MAY_GOTO:
            raise _Invalid
        return f"may_goto pc{insn.off:+d}"
    if o not in JMP_OP_SPELLING:
        raise _Invalid
    c = "w" if cls == op.BPF_JMP32 else "r"
    rhs = f"{c}{insn.src}" if x else f"{_u32(insn.imm):#x}"
    return f"if {c}{insn.dst} {JMP_OP_SPELLING[o]} {rhs} goto pc{insn.off:+d}"


def _render(insns: Sequence[Instruction], pc: int) -> str:
    insn = insns[pc]
    cls = insn.cls
    if cls in (op.BPF_ALU, op.BPF_ALU64):
        return _alu(insn)
    if cls == op.BPF_STX:
        return _stx(insn)
    if cls == op.BPF_ST:
        mode = op.bpf_mode(insn.code)
        if mode == _BPF_NOSPEC:
            return "nospec"
        if mode != op.BPF_MEM:
            raise _Invalid
        sz = LDST_SPELLING[op.bpf_size(insn.code)]
        return f"*({sz} *){_mem(insn.dst, insn.off)} = {insn.imm}"
    if cls == op.BPF_LDX:
        mode = op.bpf_mode(insn.code)
        size = op.bpf_size(insn.code)
        if mode == op.BPF_MEM:
            sz = LDST_SPELLING[size]
        elif mode == op.BPF_MEMSX and size in LDSX_SPELLING:
            sz = LDSX_SPELLING[size]
        else:
            raise _Invalid
        return f"r{insn.dst} = *({sz} *){_mem(insn.src, insn.off)}"
    if cls == op.BPF_LD:
        return _ld(insns, pc)
    return _jmp(insn)


def _format(insns: Sequence[Instruction], pc: int) -> tuple[str, bool]:
    """The text of slot ``pc`` and whether it names an instruction."""
    try:
        return _render(insns, pc), True
    except _Invalid as e:
        detail = f": {e.args[0]}" if e.args else ""
        return f"({insns[pc].code:02x}) invalid{detail}", False


def format_insn(insns: Sequence[Instruction], pc: int) -> str:
    """The text of the instruction at slot ``pc`` (an ld_imm64 reads ``pc + 1`` too).

    Never raises for a bad encoding: an opcode that names no instruction
    gives ``(xx) invalid`` (with a reason where one helps).
    """
    return _format(insns, pc)[0]


def disassemble(insns: Sequence[Instruction], *, pc_prefix: bool = False) -> list[str]:
    """One line per instruction; an ld_imm64's second slot gets no line of its own.

    With ``pc_prefix`` each line starts as bpftool prints it,
    ``"  12: (bf) r1 = r6"``: the slot index (so pcs skip past ld_imm64's
    second slot, as in the verifier log) and the opcode byte. The assembler
    accepts either form.
    """
    lines: list[str] = []
    pc = 0
    n = len(insns)
    while pc < n:
        text, valid = _format(insns, pc)
        if pc_prefix:
            # An invalid line already leads with its opcode byte.
            code = f"({insns[pc].code:02x}) " if valid else ""
            lines.append(f"{pc:4d}: {code}{text}")
        else:
            lines.append(text)
        wide = insns[pc].code == op.OP_LD_IMM64 and pc + 1 < n
        pc += 2 if wide else 1
    return lines
