"""Load-time validation of eBPF bytecode: one rule table per opcode.

This is the ISA-level part of what ``kernel/bpf/verifier.c`` checks before it
walks any path (``check_subprogs``, ``resolve_pseudo_ldimm64``, the reserved
field checks of ``do_check``): every opcode is known, reserved fields are
zero, registers exist, jumps land inside the program and never in the middle
of an ``ld_imm64``, no function falls through its end, and the static call
depth stays within ``MAX_CALL_FRAMES``. It does *not* track types or value
ranges (that is the kernel verifier's job); pyxdp's engines check memory at
run time instead.

Every violation raises :class:`~pyxdp.errors.InvalidProgram` naming the pc,
the instruction and the rule.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyxdp.asm import opcodes as op
from pyxdp.asm.disasm import BPF_JCOND, BPF_MAY_GOTO
from pyxdp.asm.insn import Instruction
from pyxdp.errors import InvalidProgram

__all__ = ["BPF_MAXINSNS", "Layout", "jump_target", "validate"]

# The kernel's limit for privileged programs (BPF_COMPLEXITY_LIMIT_INSNS).
BPF_MAXINSNS = 1_000_000

_ALU_OPS = (op.BPF_ADD, op.BPF_SUB, op.BPF_MUL, op.BPF_DIV, op.BPF_OR, op.BPF_AND,
            op.BPF_LSH, op.BPF_RSH, op.BPF_NEG, op.BPF_MOD, op.BPF_XOR, op.BPF_MOV,
            op.BPF_ARSH, op.BPF_END)
_COND_JMP_OPS = (op.BPF_JEQ, op.BPF_JGT, op.BPF_JGE, op.BPF_JSET, op.BPF_JNE, op.BPF_JSGT,
                 op.BPF_JSGE, op.BPF_JLT, op.BPF_JLE, op.BPF_JSLT, op.BPF_JSLE)
_ATOMIC_IMMS = frozenset(op.ATOMIC_OP_NAMES)


@dataclass(frozen=True)
class Layout:
    """What validation learned: function boundaries and the static call graph.

    ``functions`` are ``(start, end)`` slot ranges (end exclusive), the main
    program first; ``calls`` maps each function start to the starts it calls.
    """

    functions: tuple[tuple[int, int], ...]
    calls: dict[int, frozenset[int]]
    max_depth: int

    def function_of(self, pc: int) -> tuple[int, int]:
        for start, end in self.functions:
            if start <= pc < end:
                return start, end
        raise ValueError(pc)


class _Fail(Exception):
    def __init__(self, rule: str, message: str) -> None:
        self.rule = rule
        self.message = message


def _text(insns: Sequence[Instruction], pc: int) -> str:
    try:
        from pyxdp.asm.disasm import format_insn
        return format_insn(insns, pc)
    except Exception:  # noqa: BLE001 - text is best effort inside an error report
        i = insns[pc]
        return f"code={i.code:#04x} dst=r{i.dst} src=r{i.src} off={i.off} imm={i.imm}"


def _reg(r: int, what: str, allow_r10: bool) -> None:
    top = 10 if allow_r10 else 9
    if r > top:
        raise _Fail("register", f"{what} register r{r} is invalid"
                    + (" (r10 is read-only)" if r == 10 else ""))


def _zero(value: int, what: str) -> None:
    if value:
        raise _Fail("reserved-field", f"reserved field {what} must be 0, is {value}")


def _check_alu(i: Instruction, is64: bool) -> None:
    code_op = op.bpf_op(i.code)
    if code_op not in _ALU_OPS:
        raise _Fail("opcode", f"unknown ALU operation {code_op:#x}")
    _reg(i.dst, "destination", allow_r10=False)
    if code_op == op.BPF_END:
        if is64 and op.bpf_src(i.code) != op.BPF_TO_LE:
            raise _Fail("opcode", "64-bit byte swap must use BPF_TO_LE (bswap)")
        if i.imm not in (16, 32, 64):
            raise _Fail("end-width", f"byte swap width must be 16, 32 or 64, is {i.imm}")
        _zero(i.src, "src_reg")
        _zero(i.off, "off")
        return
    if code_op == op.BPF_NEG:
        if op.bpf_src(i.code) != op.BPF_K:
            raise _Fail("opcode", "neg takes no source register (BPF_K only)")
        _zero(i.src, "src_reg")
        _zero(i.off, "off")
        _zero(i.imm, "imm")
        return
    if op.bpf_src(i.code) == op.BPF_K:
        _zero(i.src, "src_reg")
    else:
        _reg(i.src, "source", allow_r10=True)
        _zero(i.imm, "imm")
    if code_op in (op.BPF_DIV, op.BPF_MOD):
        if i.off not in (0, 1):
            raise _Fail("offset", f"div/mod offset must be 0 (unsigned) or 1 (signed), is {i.off}")
    elif code_op == op.BPF_MOV:
        allowed = (0, 8, 16, 32) if is64 else (0, 8, 16)
        if i.off not in allowed:
            raise _Fail("offset", f"mov offset must be one of {allowed} (movsx), is {i.off}")
        if i.off and op.bpf_src(i.code) != op.BPF_X:
            raise _Fail("opcode", "sign-extending mov needs a source register")
    else:
        _zero(i.off, "off")


def _check_jmp(i: Instruction, is32: bool) -> None:
    code_op = op.bpf_op(i.code)
    if code_op == op.BPF_JA:
        if op.bpf_src(i.code) != op.BPF_K:
            raise _Fail("opcode", "ja takes no source register")
        _zero(i.dst, "dst_reg")
        _zero(i.src, "src_reg")
        if is32:
            _zero(i.off, "off")  # gotol: the offset is in imm
        else:
            _zero(i.imm, "imm")
        return
    if code_op in (op.BPF_CALL, op.BPF_EXIT):
        if is32:
            raise _Fail("opcode", f"{op.JMP_OP_NAMES[code_op]} is not a JMP32 operation")
        if code_op == op.BPF_EXIT:
            if op.bpf_src(i.code) != op.BPF_K:
                raise _Fail("opcode", "exit takes no source register")
            _zero(i.dst, "dst_reg")
            _zero(i.src, "src_reg")
            _zero(i.off, "off")
            _zero(i.imm, "imm")
            return
        _zero(i.off, "off")
        if op.bpf_src(i.code) == op.BPF_X:  # callx: target register in dst_reg
            _reg(i.dst, "callx target", allow_r10=False)
            _zero(i.src, "src_reg")
            _zero(i.imm, "imm")
            return
        _zero(i.dst, "dst_reg")
        if i.src == op.CallSrc.BPF_PSEUDO_KFUNC_CALL:
            raise _Fail("kfunc", "kfunc calls (BPF_PSEUDO_KFUNC_CALL) are not supported: "
                                 "pyxdp has no kernel functions to bind them to")
        if i.src not in (op.CallSrc.BPF_HELPER_CALL, op.CallSrc.BPF_PSEUDO_CALL):
            raise _Fail("call-src", f"call src_reg must be 0 (helper) or 1 (local), is {i.src}")
        if i.src == op.CallSrc.BPF_HELPER_CALL and i.imm < 0:
            raise _Fail("helper-id", f"helper id {i.imm} is negative")
        return
    if code_op == BPF_JCOND:
        # may_goto, the only BPF_JCOND: check_cond_jmp_op's "invalid may_goto imm" rule.
        if is32 or op.bpf_src(i.code) != op.BPF_K or i.src != BPF_MAY_GOTO:
            raise _Fail("opcode", "BPF_JCOND is only may_goto (BPF_JMP|BPF_K, src_reg 0)")
        _zero(i.dst, "dst_reg")
        _zero(i.imm, "imm")
        return
    if code_op not in _COND_JMP_OPS:
        raise _Fail("opcode", f"unknown jump operation {code_op:#x}")
    _reg(i.dst, "destination", allow_r10=True)
    if op.bpf_src(i.code) == op.BPF_K:
        _zero(i.src, "src_reg")
    else:
        _reg(i.src, "source", allow_r10=True)
        _zero(i.imm, "imm")


def _check_ld(i: Instruction, insns: Sequence[Instruction], pc: int) -> None:
    mode = op.bpf_mode(i.code)
    if mode in (op.BPF_ABS, op.BPF_IND):
        raise _Fail("ld-abs", "legacy packet access (BPF_LD_ABS/BPF_LD_IND) needs an skb and is "
                              "not allowed in XDP programs; read packet data through ctx->data")
    if i.code != op.OP_LD_IMM64:
        raise _Fail("opcode", f"unknown BPF_LD instruction {i.code:#04x}")
    _reg(i.dst, "destination", allow_r10=False)
    if i.src > max(op.PseudoSrc):
        raise _Fail("pseudo-src", f"ld_imm64 src_reg {i.src} is not a known pseudo source")
    _zero(i.off, "off")
    if pc + 1 >= len(insns):
        raise _Fail("lddw-truncated", "ld_imm64 is missing its second slot")
    nxt = insns[pc + 1]
    if nxt.code or nxt.dst or nxt.src or nxt.off:
        raise _Fail("lddw-second-slot", "second slot of ld_imm64 must have code, registers "
                                        "and offset 0")
    if i.src in (op.PseudoSrc.BPF_PSEUDO_MAP_FD, op.PseudoSrc.BPF_PSEUDO_MAP_IDX,
                 op.PseudoSrc.BPF_PSEUDO_FUNC, op.PseudoSrc.BPF_PSEUDO_BTF_ID) and nxt.imm:
        raise _Fail("lddw-second-slot", "second slot imm must be 0 for this pseudo source")


def _check_mem(i: Instruction) -> None:
    cls = i.cls
    mode = op.bpf_mode(i.code)
    size = op.bpf_size(i.code)
    if cls == op.BPF_LDX:
        if mode not in (op.BPF_MEM, op.BPF_MEMSX):
            raise _Fail("opcode", f"unknown BPF_LDX mode {mode:#x}")
        if mode == op.BPF_MEMSX and size == op.BPF_DW:
            raise _Fail("opcode", "sign-extending load has no 64-bit form")
        _reg(i.dst, "destination", allow_r10=False)
        _reg(i.src, "base", allow_r10=True)
        _zero(i.imm, "imm")
    elif cls == op.BPF_ST:
        if mode != op.BPF_MEM:
            raise _Fail("opcode", f"unknown BPF_ST mode {mode:#x}")
        _reg(i.dst, "base", allow_r10=True)
        _zero(i.src, "src_reg")
    elif mode == op.BPF_ATOMIC and i.imm == op.BPF_LOAD_ACQ:
        # check_atomic_load: any size, loaded through src_reg into dst_reg as LDX does
        _reg(i.dst, "destination", allow_r10=False)
        _reg(i.src, "base", allow_r10=True)
    else:
        _reg(i.dst, "base", allow_r10=True)
        _reg(i.src, "source", allow_r10=True)
        if mode == op.BPF_MEM:
            _zero(i.imm, "imm")
        elif mode == op.BPF_ATOMIC and i.imm == op.BPF_STORE_REL:
            pass  # check_atomic_store: any size, a store as STX | MEM is
        elif mode == op.BPF_ATOMIC:
            if i.imm not in _ATOMIC_IMMS:
                raise _Fail("atomic-op", f"unknown atomic operation imm={i.imm:#x}")
            if size not in (op.BPF_W, op.BPF_DW):
                raise _Fail("atomic-size", "atomic read-modify-write operations are 32 or 64 "
                                           "bits wide")
            if i.imm & op.BPF_FETCH and i.imm != op.BPF_CMPXCHG and i.src == 10:
                raise _Fail("register", "atomic fetch would write r10 (the frame pointer is "
                                        "read-only)")
        else:
            raise _Fail("opcode", f"unknown BPF_STX mode {mode:#x}")


def jump_target(i: Instruction, pc: int) -> int | None:
    cls = i.cls
    if cls not in (op.BPF_JMP, op.BPF_JMP32):
        return None
    code_op = op.bpf_op(i.code)
    if code_op in (op.BPF_CALL, op.BPF_EXIT):
        return None
    if cls == op.BPF_JMP32 and code_op == op.BPF_JA:
        return pc + 1 + i.imm
    return pc + 1 + i.off


_CHECKS: dict[int, Callable[[Instruction], None]] = {
    op.BPF_ALU: lambda i: _check_alu(i, False),
    op.BPF_ALU64: lambda i: _check_alu(i, True),
    op.BPF_JMP: lambda i: _check_jmp(i, False),
    op.BPF_JMP32: lambda i: _check_jmp(i, True),
    op.BPF_LDX: _check_mem,
    op.BPF_ST: _check_mem,
    op.BPF_STX: _check_mem,
}


# Layouts of the programs validated last: loading one program validates it three times
# (the verifier, the program, its JIT), 25 ms each for 3,000 instructions. Newest last;
# found by comparison, not by hash (hashing 3,000 instructions is 3,000 Python calls,
# where comparing a tuple with itself or with one of the same instructions is a C loop).
_RECENT: list[tuple[tuple[Instruction, ...], int, bool, Layout]] = []
_RECENT_SIZE = 8
_RECENT_LOCK = threading.Lock()  # a tiered program's JIT thread validates too


def validate(insns: Sequence[Instruction], *, max_insns: int = BPF_MAXINSNS,
             recursion: bool = False) -> Layout:
    """Check ``insns`` against the per-opcode rule table; return its layout.

    ``recursion`` lets functions call themselves (directly or not) and call chains go
    deeper than ``MAX_CALL_FRAMES``, as the kernel's verifier does until a walk or its
    stack depth check goes too deep; the layout's ``max_depth`` is then past
    ``MAX_CALL_FRAMES``. pyxdp's engines run no such program.
    """
    if not isinstance(insns, tuple):
        return _validate(insns, max_insns, recursion)
    with _RECENT_LOCK:
        for n in range(len(_RECENT) - 1, -1, -1):
            entry = _RECENT[n]
            if entry[1] == max_insns and entry[2] == recursion and (
                    entry[0] is insns or len(entry[0]) == len(insns) and entry[0] == insns):
                _RECENT.append(_RECENT.pop(n))
                return entry[3]
    layout = _validate(insns, max_insns, recursion)
    with _RECENT_LOCK:
        _RECENT.append((insns, max_insns, recursion, layout))
        del _RECENT[:-_RECENT_SIZE]
    return layout


def _validate(insns: Sequence[Instruction], max_insns: int, recursion: bool = False) -> Layout:
    n = len(insns)
    if n == 0:
        raise InvalidProgram("program is empty", rule="empty")
    if n > max_insns:
        raise InvalidProgram(f"program has {n} instructions, more than {max_insns}",
                             rule="too-long")
    second_slot = set()
    call_targets: set[int] = set()
    pc = 0
    while pc < n:
        i = insns[pc]
        try:
            if i.cls == op.BPF_LD:
                _check_ld(i, insns, pc)
                second_slot.add(pc + 1)
                if i.src == op.PseudoSrc.BPF_PSEUDO_FUNC:
                    # a callback's address starts a function as a call's target does
                    # (add_subprog_and_kfunc)
                    target = pc + 1 + i.imm
                    if not 0 <= target < n:
                        raise _Fail("call-range", f"callback pc {target} is outside the program")
                    call_targets.add(target)
                pc += 2
                continue
            _CHECKS[i.cls](i)
            if i.code == op.OP_CALL and i.src == op.CallSrc.BPF_PSEUDO_CALL:
                target = pc + 1 + i.imm
                if not 0 <= target < n:
                    raise _Fail("call-range", f"call target pc {target} is outside the program")
                call_targets.add(target)
        except _Fail as e:
            raise InvalidProgram(e.message, pc=pc, insn=_text(insns, pc), rule=e.rule) from None
        pc += 1
    for pc, i in enumerate(insns):
        if pc in second_slot:
            continue
        jt = jump_target(i, pc)
        if jt is not None and not 0 <= jt < n:
            raise InvalidProgram(f"jump to pc {jt} is outside the program (0..{n - 1})",
                                 pc=pc, insn=_text(insns, pc), rule="jump-range")
        if jt is not None and jt in second_slot:
            raise InvalidProgram(f"jump to pc {jt} lands inside an ld_imm64",
                                 pc=pc, insn=_text(insns, pc), rule="jump-into-lddw")
    starts = sorted({0} | call_targets)
    functions = tuple(zip(starts, [*starts[1:], n], strict=True))
    calls: dict[int, set[int]] = {s: set() for s in starts}
    for start, end in functions:
        for pc in range(start, end):
            if pc in second_slot:
                continue
            i = insns[pc]
            jt = jump_target(i, pc)
            if jt is not None and not start <= jt < end:
                raise InvalidProgram(
                    f"jump to pc {jt} leaves the function at pc {start}..{end - 1}",
                    pc=pc, insn=_text(insns, pc), rule="jump-out-of-function")
            if i.code == op.OP_CALL and i.src == op.CallSrc.BPF_PSEUDO_CALL:
                calls[start].add(pc + 1 + i.imm)
        last = end - 1
        if last in second_slot or not _ends_flow(insns[last]):
            raise InvalidProgram(
                f"function at pc {start} falls through its end: the last instruction must be "
                f"exit or an unconditional jump", pc=last, insn=_text(insns, last),
                rule="fall-through")
    frozen_calls = {k: frozenset(v) for k, v in calls.items()}
    try:
        depth = _max_depth(frozen_calls)
    except InvalidProgram as e:
        if not (recursion and e.rule in ("recursion", "call-depth")):
            raise
        depth = op.MAX_CALL_FRAMES + 1
    return Layout(functions, frozen_calls, depth)


def _ends_flow(i: Instruction) -> bool:
    return i.code in (op.OP_EXIT, op.OP_JA, op.OP_JA32)


def _max_depth(calls: dict[int, frozenset[int]]) -> int:
    """Frames on the deepest static call chain from the main program."""
    memo: dict[int, int] = {}
    visiting: set[int] = set()

    def depth(f: int) -> int:
        if f in memo:
            return memo[f]
        if f in visiting:
            raise InvalidProgram(f"recursive call into the function at pc {f}",
                                 pc=f, rule="recursion")
        visiting.add(f)
        d = 1 + max((depth(c) for c in calls[f]), default=0)
        visiting.discard(f)
        memo[f] = d
        if d > op.MAX_CALL_FRAMES:
            raise InvalidProgram(f"call depth {d} exceeds the limit of {op.MAX_CALL_FRAMES} "
                                 f"frames", pc=f, rule="call-depth")
        return d

    return depth(0)
