"""Context accesses found and checked at load, like the verifier's ``check_ctx_access``
and rewritten like its ``convert_ctx_accesses``.

The kernel never lets a program touch its context struct directly: the
verifier proves which loads read the context, checks each against the program
type's ``is_valid_access`` rule (for XDP: 4-byte aligned loads of ``xdp_md``
fields, no writes) and rewrites it into a load of the real kernel field.
pyxdp does the same with a small forward data-flow analysis that tracks which
registers (and which 8-byte stack slots, for spills) hold the context pointer
- through moves, constant adds, spills/fills and bpf-to-bpf call arguments.
Each proven context load becomes ``dst = field value`` in the engines; the
context pointer itself points at no memory, so an access the analysis could
not prove faults at run time instead of reading anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.asm.validate import Layout
from pyxdp.errors import InvalidProgram

__all__ = ["CtxAccess", "CtxRule", "find_ctx_loads"]

# A register's abstract value: None = not the context; int = ctx + offset;
# _MIXED = the context on one path and something else on another.
_MIXED = "mixed"
Kind = int | str | None
_State = tuple[tuple[Kind, ...], tuple[tuple[int, Kind], ...]]


class CtxAccess(NamedTuple):
    """A proven context load at ``pc``: field at byte ``offset``, ``size`` bytes (a named
    tuple, not a frozen dataclass, whose methods are compiled when its class is made)."""

    pc: int
    offset: int
    size: int
    dst: int


# (offset, size, is_write, sign_extend) -> error text or None when allowed.
CtxRule = Callable[[int, int, bool, bool], str | None]


def _text(insns: Sequence[Instruction], pc: int) -> str:
    from pyxdp.asm.disasm import format_insn
    return format_insn(insns, pc)


def _join(a: Kind, b: Kind) -> Kind:
    return a if a == b else _MIXED


def _join_state(a: _State, b: _State) -> _State:
    regs = tuple(_join(x, y) for x, y in zip(a[0], b[0], strict=True))
    sa, sb = dict(a[1]), dict(b[1])
    slots = {k: _join(sa.get(k), sb.get(k)) for k in sa.keys() | sb.keys()}
    return regs, tuple(sorted((k, v) for k, v in slots.items() if v is not None))


def _passes(i: Instruction, cls: int, regs: tuple[Kind, ...]) -> bool:
    """Whether instruction ``i`` leaves a state with registers ``regs`` as it is and
    falls through or jumps (no exit or call), with no context access to check: an ALU
    operation on a register not holding the context (that is not a copy of one that
    does), a conditional jump or ``ja``, a load through and into such registers
    (not from the stack), a plain store through one (not to the stack)."""
    if cls == op.BPF_ALU64 or cls == op.BPF_ALU:
        return regs[i.dst] is None and (
            i.code != op.BPF_ALU64 | op.BPF_MOV | op.BPF_X or i.off != 0 or regs[i.src] is None)
    if cls == op.BPF_JMP or cls == op.BPF_JMP32:
        return op.bpf_op(i.code) not in (op.BPF_EXIT, op.BPF_CALL)
    if cls == op.BPF_LDX:
        return i.src != 10 and regs[i.src] is None and regs[i.dst] is None
    if cls == op.BPF_ST or cls == op.BPF_STX:
        return i.dst != 10 and regs[i.dst] is None and op.bpf_mode(i.code) != op.BPF_ATOMIC
    return False


def find_ctx_loads(insns: Sequence[Instruction], layout: Layout, rule: CtxRule
                   ) -> dict[int, CtxAccess]:
    """Every context load of the program, checked against ``rule``.

    Raises :class:`InvalidProgram` for an access the rule refuses, a write
    to the context, an access through a modified context pointer, or an
    instruction that sees the context on one path and other memory on
    another (the verifier's "same insn cannot be used with different
    pointers").
    """
    n = len(insns)
    second = {pc + 1 for pc, i in enumerate(insns) if i.code == op.OP_LD_IMM64}
    entry: dict[int, tuple[Kind, ...]] = {0: (None, 0) + (None,) * 9}
    states: dict[int, _State] = {}
    found: dict[int, CtxAccess] = {}
    work: list[int] = []

    def push(pc: int, st: _State) -> None:
        old = states.get(pc)
        new = st if old is None else _join_state(old, st)
        if new != old:
            states[pc] = new
            work.append(pc)

    def fail(pc: int, msg: str, rule_name: str) -> InvalidProgram:
        return InvalidProgram(msg, pc=pc, insn=_text(insns, pc), rule=rule_name)

    def seed(start: int, regs: tuple[Kind, ...]) -> None:
        push(start, (regs, ()))

    seed(0, entry[0])
    while work:
        pc = work.pop()
        st = states[pc]
        regs_t, slots_t = st
        i = insns[pc]
        cls = i.cls
        if _passes(i, cls, regs_t):  # (most instructions: the state flows on as it is)
            if cls == op.BPF_JMP or cls == op.BPF_JMP32:
                code_op = op.bpf_op(i.code)
                nxt = [pc + 1 + (i.imm if cls == op.BPF_JMP32 else i.off)] \
                    if code_op == op.BPF_JA else [pc + 1, pc + 1 + i.off]
            else:
                nxt = [pc + 1]
            for t in nxt:
                if 0 <= t < n and t not in second:
                    push(t, st)
            continue
        regs = list(regs_t)
        slots = dict(slots_t)
        nxt = [pc + 1]
        if cls in (op.BPF_ALU, op.BPF_ALU64):
            code_op = op.bpf_op(i.code)
            src_reg = op.bpf_src(i.code) == op.BPF_X
            if cls == op.BPF_ALU64 and code_op == op.BPF_MOV and src_reg and i.off == 0:
                regs[i.dst] = regs[i.src]
            elif (cls == op.BPF_ALU64 and code_op in (op.BPF_ADD, op.BPF_SUB) and not src_reg
                  and isinstance(regs[i.dst], int)):
                delta = i.imm if code_op == op.BPF_ADD else -i.imm
                regs[i.dst] = regs[i.dst] + delta  # type: ignore[operator]
            else:
                regs[i.dst] = None
        elif cls == op.BPF_LD:
            regs[i.dst] = None
            nxt = [pc + 2]
        elif cls == op.BPF_LDX:
            base = regs[i.src]
            if base == _MIXED:
                raise fail(pc, "load through a register that holds the context on one path "
                               "and other memory on another", "ctx-mixed")
            if isinstance(base, int):
                if base != 0:
                    raise fail(pc, f"access through a modified context pointer (ctx{base:+d})",
                               "ctx-modified")
                size = op.SIZE_BYTES[op.bpf_size(i.code)]
                why = rule(i.off, size, False, op.bpf_mode(i.code) == op.BPF_MEMSX)
                if why:
                    raise fail(pc, why, "ctx-access")
                found[pc] = CtxAccess(pc, i.off, size, i.dst)
                regs[i.dst] = None
            elif i.src == 10 and op.bpf_size(i.code) == op.BPF_DW:
                regs[i.dst] = slots.get(i.off)
            else:
                regs[i.dst] = None
        elif op.is_atomic_load(i.code, i.imm):
            if regs[i.src] is not None:  # check_atomic_load: never through the context
                raise fail(pc, "load-acquire from the context", "ctx-access")
            regs[i.dst] = slots.get(i.off) if i.src == 10 and \
                op.bpf_size(i.code) == op.BPF_DW else None
        elif cls in (op.BPF_ST, op.BPF_STX):
            base = regs[i.dst]
            if base is not None:
                size = op.SIZE_BYTES[op.bpf_size(i.code)]
                atomic = op.bpf_mode(i.code) == op.BPF_ATOMIC
                why = "atomic operation on the context" if atomic else \
                    rule(i.off - (base if isinstance(base, int) else 0), size, True, False)
                raise fail(pc, why or "write to the context", "ctx-write")
            if i.dst == 10:
                size = op.SIZE_BYTES[op.bpf_size(i.code)]
                for k in [k for k in slots if k < i.off + size and i.off < k + 8]:
                    del slots[k]
                if (cls == op.BPF_STX and op.bpf_mode(i.code) == op.BPF_MEM and size == 8
                        and regs[i.src] is not None):
                    slots[i.off] = regs[i.src]
            if cls == op.BPF_STX and op.bpf_mode(i.code) == op.BPF_ATOMIC and \
                    i.imm & op.BPF_FETCH:
                reg = 0 if i.imm == op.BPF_CMPXCHG else i.src
                regs[reg] = None
        elif cls in (op.BPF_JMP, op.BPF_JMP32):
            code_op = op.bpf_op(i.code)
            if code_op == op.BPF_EXIT:
                nxt = []
            elif code_op == op.BPF_CALL:
                if i.src == op.CallSrc.BPF_PSEUDO_CALL:
                    seed(pc + 1 + i.imm, (None,) + tuple(regs[1:6]) + (None,) * 5)
                for r in range(6):
                    regs[r] = None
            elif code_op == op.BPF_JA:
                nxt = [pc + 1 + (i.imm if cls == op.BPF_JMP32 else i.off)]
            else:
                nxt = [pc + 1, pc + 1 + i.off]
        state: _State = (tuple(regs), tuple(sorted(slots.items())))
        for t in nxt:
            if 0 <= t < n and t not in second:
                push(t, state)
    del layout  # boundaries are implied by the calls followed above
    return found


def xdp_md_rule(attach_devmap: bool) -> CtxRule:
    """``xdp_is_valid_access``: 4-byte aligned loads of the six ``xdp_md`` fields."""

    def rule(off: int, size: int, write: bool, sx: bool) -> str | None:
        if write:
            return f"write to xdp_md at offset {off} (the XDP context is read-only)"
        if off < 0 or off >= 24:
            return f"xdp_md has no field at offset {off} (valid: 0..20)"
        if size != 4 or off % 4:
            return f"xdp_md field at offset {off} must be read with a 4-byte aligned load, " \
                   f"not {size} bytes"
        if sx and off < 12:
            # Linux sign-extends only scalar fields: data, data_end, data_meta are
            # pointers. The scalar ones (ifindexes, a queue index) are below 2**31, so
            # the engines' zero-extended value is the sign-extended one.
            return f"invalid bpf_context access off={off} size={size}"
        if off == 20 and not attach_devmap:
            return "egress_ifindex is readable only by devmap programs (xdp/devmap)"
        return None

    return rule


__all__ += ["xdp_md_rule"]
