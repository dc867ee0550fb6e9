"""Assembler: eBPF text to instruction slots, in two dialects mixed freely line by line.

1. The bpf_conformance / uBPF dialect of the ISA test vectors::

       mov %r0, 1            lddw %r0, 0x1122334455667788
       ldxdw %r2, [%r10-8]   stxw [%r1+4], %r2        stw [%r1+2], 0x1
       jeq %r1, 0x2, L1      ja +1                    ja32 L2
       lock fetch add32 [%r10-8], %r1                 call local func1

2. The kernel's own spelling, exactly what :mod:`pyxdp.asm.disasm` prints
   (``kernel/bpf/disasm.c`` with bpftool's ld_imm64 forms)::

       r0 = 1                w1 s/= 3                 r0 = (s8)r1
       if r1 > 0x2 goto pc+3                          *(u64 *)(r10 -8) = r1
       r1 = atomic64_fetch_add((u64 *)(r10 -8), r1)   r1 = map[fd:3][0]+16
       r0 = load_acquire((u64 *)(r1 +0))              store_release((u8 *)(r1 +0), r2)

   Lines copied from ``bpftool prog dump xlated`` or a verifier log may keep
   their ``12: (bf)`` prefix: the pc is ignored and the opcode byte is
   checked against the encoding. LLVM's ``llvm-objdump`` spellings that
   differ only in spacing or in ``w`` registers (``lock *(u32 *)(r1 + 0) +=
   w2``, ``goto +3``, ``w0 = load_acquire((u8 *)(r1 + 0))``) are accepted too.

Labels are ``name:`` lines (or a prefix of a line); a jump target is a
label, a signed offset (``+3``, ``-1``, ``pc+3``) or a bare number taken as
an offset. As in the bpf_conformance assembler, the target ``exit`` means
the first ``exit`` instruction when no label of that name is defined.
Calls: ``call 5`` / ``call bpf_ktime_get_ns[#5]`` reach a helper, ``call
pc+3`` / ``call local f`` / ``call f`` (a label that is no helper's name) a
bpf-to-bpf function, ``call kernel-function#N`` a kfunc, and ``callx r2`` /
``call %r2`` the register-indirect call, whose register the encoding keeps
in ``dst_reg`` (GCC, LLVM >= 19, bpf_conformance; LLVM before 19 used imm).

Numbers are decimal or hex, optionally negative. A 32-bit immediate takes
any value in [-2**31, 2**32): values from 2**31 up are the bit pattern of a
negative imm, which is how the kernel prints jump immediates (``0x%x``) and
how the test vectors write masks. ``ll`` marks a 64-bit load. Registers are
``r0``-``r15`` (``%r`` in the vector dialect): the field has four bits and
negative tests need the fake ones; whether a register is legal is the
validator's rule, not the encoder's. Anything else raises
:class:`~pyxdp.errors.AsmError` naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyxdp.asm import opcodes as op
from pyxdp.asm.disasm import (
    ALU_OP_SPELLING,
    ALU_SIGNED_SPELLING,
    BPF_ADDR_PERCPU,
    BPF_ADDR_SPACE_CAST,
    BPF_JCOND,
    BPF_LOAD_ACQ,
    BPF_MAY_GOTO,
    BPF_STORE_REL,
    JMP_OP_SPELLING,
    LDST_SPELLING,
    LDSX_SPELLING,
)
from pyxdp.asm.helpers_names import helper_id, helper_name
from pyxdp.asm.insn import Instruction
from pyxdp.errors import AsmError

__all__ = ["assemble"]

# --------------------------------------------------------------------------
# Lexical pieces shared by both dialects.

_NUM = r"[+-]?\s*(?:0[xX][0-9a-fA-F]+|[0-9]+)"
_REG = r"%?[rw][0-9]+"
_MEM_K = rf"\(\s*(?P<base>{_REG})\s*(?P<off>[+-]\s*(?:0[xX][0-9a-fA-F]+|[0-9]+))?\s*\)"
_SIZE = r"\(\s*(?P<sz>[us](?:8|16|32|64))\s*\*\s*\)"
_LABEL = r"[A-Za-z_.$][\w.$]*"

_RE_LABEL = re.compile(rf"(?P<name>{_LABEL})\s*:(?:\s+(?P<rest>.*))?")
_RE_PC_PREFIX = re.compile(r"[0-9]+\s*:\s*")
_RE_CODE_PREFIX = re.compile(r"\(\s*(?P<code>[0-9a-fA-F]{2})\s*\)\s*")
_RE_NUM = re.compile(_NUM)
_RE_REG = re.compile(r"%?(?P<kind>[rw])(?P<n>[0-9]+)")

_SIZE_BY_NAME: dict[str, int] = {v: k for k, v in LDST_SPELLING.items()}
_SX_SIZE_BY_NAME: dict[str, int] = {v: k for k, v in LDSX_SPELLING.items()}
_ALU_BY_SPELLING: dict[str, tuple[int, int]] = {
    **{v: (k, 0) for k, v in ALU_OP_SPELLING.items()},
    **{v: (k, 1) for k, v in ALU_SIGNED_SPELLING.items()},
}
_JMP_BY_SPELLING: dict[str, int] = {v: k for k, v in JMP_OP_SPELLING.items()}
_MOVSX_BY_NAME: dict[str, int] = {"s8": 8, "s16": 16, "s32": 32}

# Kernel-dialect statement forms (matched against the whole line).
_K_GOTO = re.compile(r"(?P<kind>goto|gotol|may_goto)\s+(?P<target>.+)")
_K_IF = re.compile(
    rf"if\s+(?P<dst>{_REG})\s*(?P<op>s>=|s<=|s>|s<|==|!=|>=|<=|>|<|&)\s*"
    rf"(?P<src>{_REG}|{_NUM})\s+goto\s+(?P<target>.+)")
_K_CALLX = re.compile(rf"callx\s+(?P<dst>{_REG})")
_K_CALL = re.compile(r"call\s+(?P<arg>.+)")
_K_LOCK = re.compile(
    rf"lock\s+\*\s*{_SIZE}\s*{_MEM_K}\s*(?P<op>[-+&|^])=\s*(?P<src>{_REG})")
_K_STORE_REL = re.compile(
    rf"store_release\s*\(\s*{_SIZE}\s*{_MEM_K}\s*,\s*(?P<src>{_REG})\s*\)")
_K_STORE = re.compile(rf"\*\s*{_SIZE}\s*{_MEM_K}\s*=\s*(?P<src>{_REG}|{_NUM})")
_K_ALU = re.compile(
    rf"(?P<dst>{_REG})\s*(?P<op>s>>=|s/=|s%=|<<=|>>=|\+=|-=|\*=|/=|\|=|&=|%=|\^=)\s*"
    rf"(?P<src>{_REG}|{_NUM})")
_K_ASSIGN = re.compile(rf"(?P<dst>{_REG})\s*=\s*(?P<rhs>.+)")

# Right-hand sides of "rX = ...".
_R_ATOMIC = re.compile(
    rf"atomic(?P<w64>64)?_(?P<op>fetch_add|fetch_and|fetch_or|fetch_xor|xchg|cmpxchg)"
    rf"\s*\(\s*{_SIZE}\s*{_MEM_K}\s*,\s*(?P<a>{_REG})\s*(?:,\s*(?P<b>{_REG})\s*)?\)")
_R_LOAD_ACQ = re.compile(rf"load_acquire\s*\(\s*{_SIZE}\s*{_MEM_K}\s*\)")
_R_LOAD = re.compile(rf"\*\s*{_SIZE}\s*{_MEM_K}")
_R_SKB = re.compile(
    rf"\*\s*{_SIZE}\s*skb\s*\[\s*(?:(?P<src>{_REG})\s*\+\s*)?(?P<imm>{_NUM})\s*\]")
_R_END = re.compile(rf"(?P<kind>be|le|bswap)(?P<bits>[0-9]+)\s+(?P<src>{_REG})")
_R_NEG = re.compile(rf"-\s*(?P<src>{_REG})")
_R_ASCAST = re.compile(
    rf"addr_space_cast\s*\(\s*(?P<src>{_REG})\s*,\s*(?P<a>{_NUM})\s*,\s*(?P<b>{_NUM})\s*\)")
_R_PERCPU = re.compile(
    rf"&\s*\(\s*void\s+__percpu\s*\*\s*\)\s*\(\s*(?P<src>{_REG})\s*\)")
_R_MOVSX = re.compile(rf"\(\s*(?P<sx>s8|s16|s32)\s*\)\s*(?P<src>{_REG})")
_R_MAP = re.compile(
    rf"map\s*\[\s*(?P<kind>fd|id|idx)\s*:\s*(?P<n>{_NUM})\s*\]"
    rf"(?P<val>\s*\[\s*0\s*\])?(?:\s*\+\s*(?P<voff>{_NUM}))?")
_R_SUBPROG = re.compile(r"subprog\s*\[\s*(?P<target>[^\]]+?)\s*\]")
_R_BTF_ID = re.compile(
    rf"btf_id\s*\[\s*(?P<n>{_NUM})\s*\](?:\s*\[\s*btf_fd\s*:\s*(?P<fd>{_NUM})\s*\])?")
_R_IMM = re.compile(rf"(?P<n>{_NUM})(?:\s+(?P<ll>ll))?")
_R_REG = re.compile(rf"(?P<src>{_REG})")

# Call argument forms.
_C_PC = re.compile(r"pc\s*(?P<off>[+-]\s*[0-9]+)")
_C_NAMED = re.compile(
    rf"(?P<name>[A-Za-z_][\w-]*)\s*#\s*(?P<n>{_NUM})"
    rf"(?:\s*\[\s*btf_fd_idx\s*:\s*(?P<off>{_NUM})\s*\])?")

# Vector-dialect pieces.
_V_MEM = re.compile(
    rf"\[\s*(?P<base>{_REG})\s*(?P<off>[+-]\s*(?:0[xX][0-9a-fA-F]+|[0-9]+))?\s*\]")
_V_ALU_OPS: dict[str, tuple[int, int]] = {
    "add": (op.BPF_ADD, 0), "sub": (op.BPF_SUB, 0), "mul": (op.BPF_MUL, 0),
    "div": (op.BPF_DIV, 0), "sdiv": (op.BPF_DIV, 1), "or": (op.BPF_OR, 0),
    "and": (op.BPF_AND, 0), "lsh": (op.BPF_LSH, 0), "rsh": (op.BPF_RSH, 0),
    "mod": (op.BPF_MOD, 0), "smod": (op.BPF_MOD, 1), "xor": (op.BPF_XOR, 0),
    "mov": (op.BPF_MOV, 0), "arsh": (op.BPF_ARSH, 0),
}
_V_JMP_OPS: dict[str, int] = {
    "jeq": op.BPF_JEQ, "jgt": op.BPF_JGT, "jge": op.BPF_JGE, "jset": op.BPF_JSET,
    "jne": op.BPF_JNE, "jsgt": op.BPF_JSGT, "jsge": op.BPF_JSGE, "jlt": op.BPF_JLT,
    "jle": op.BPF_JLE, "jslt": op.BPF_JSLT, "jsle": op.BPF_JSLE,
}
_V_SIZES: dict[str, int] = {"b": op.BPF_B, "h": op.BPF_H, "w": op.BPF_W, "dw": op.BPF_DW}
_V_ATOMIC_OPS: dict[str, int] = {
    "add": op.BPF_ADD, "and": op.BPF_AND, "or": op.BPF_OR, "xor": op.BPF_XOR,
    "xchg": op.BPF_XCHG, "cmpxchg": op.BPF_CMPXCHG,
}
# movsx<from><to>: the source width goes to off, the class from the suffix.
_V_MOVSX: dict[str, tuple[int, int]] = {
    "movsx832": (8, op.BPF_ALU), "movsx1632": (16, op.BPF_ALU),
    "movsx864": (8, op.BPF_ALU64), "movsx1664": (16, op.BPF_ALU64),
    "movsx3264": (32, op.BPF_ALU64),
}
# bpf_conformance's explicit call modes: src_reg 1, 0 and 2.
_V_CALL_MODES = ("local", "helper", "runtime")
_RE_V_END = re.compile(r"(?P<kind>be|le|swap|bswap)(?P<bits>16|32|64)")
_RE_V_LDX = re.compile(r"ldx(?P<sx>s?)(?P<size>dw|b|h|w)")
_RE_V_ST = re.compile(r"st(?P<x>x?)(?P<size>dw|b|h|w)")
_RE_V_LDABS = re.compile(r"ld(?P<mode>abs|ind)(?P<size>dw|b|h|w)")


# --------------------------------------------------------------------------
# One parsed statement: its slots, and an unresolved jump target if any.

@dataclass
class _Stmt:
    line: int
    text: str
    code: int
    dst: int = 0
    src: int = 0
    off: int = 0
    imm: int = 0
    # ld_imm64 only: the second slot's imm (high 32 bits or map value offset).
    hi: int | None = None
    # A label to resolve into ``field`` ("off" or "imm") relative to pc + 1.
    target: str | None = None
    field: str = "off"
    pc: int = 0


class _Line:
    """Parsing context for one source line: raises AsmError naming it."""

    def __init__(self, lineno: int, text: str) -> None:
        self.lineno = lineno
        self.text = text

    def error(self, message: str) -> AsmError:
        return AsmError(message, line=self.lineno, text=self.text)

    def stmt(self, code: int, dst: int = 0, src: int = 0, off: int = 0,
             imm: int = 0) -> _Stmt:
        return _Stmt(self.lineno, self.text, code, dst, src, off, imm)

    # -- numbers -----------------------------------------------------------

    def number(self, s: str) -> int:
        t = re.sub(r"\s+", "", s)
        if not _RE_NUM.fullmatch(t):
            raise self.error(f"not a number: {s.strip()!r}")
        neg = t.startswith("-")
        t = t.lstrip("+-")
        v = int(t, 16) if t[:2] in ("0x", "0X") else int(t, 10)
        return -v if neg else v

    def imm32(self, s: str) -> int:
        v = self.number(s)
        # The field is 32 bits: accept either reading of a bit pattern.
        if not -(1 << 31) <= v < (1 << 32):
            raise self.error(f"immediate {s.strip()} does not fit in 32 bits")
        return v - (1 << 32) if v >= (1 << 31) else v

    def off16(self, s: str) -> int:
        v = self.number(s)
        if not -(1 << 15) <= v < (1 << 15):
            raise self.error(f"offset {s.strip()} does not fit in 16 signed bits")
        return v

    def imm64(self, s: str) -> int:
        v = self.number(s)
        if not -(1 << 63) <= v < (1 << 64):
            raise self.error(f"constant {s.strip()} does not fit in 64 bits")
        return v & 0xFFFF_FFFF_FFFF_FFFF

    # -- registers ---------------------------------------------------------

    def reg(self, s: str) -> tuple[int, bool]:
        """Register number and whether it was written as a 32-bit ``w`` register."""
        m = _RE_REG.fullmatch(s.strip())
        if not m or (len(m["n"]) > 1 and m["n"].startswith("0")) or int(m["n"]) > 15:
            raise self.error(f"unknown register {s.strip()!r}")
        return int(m["n"]), m["kind"] == "w"

    def reg64(self, s: str) -> int:
        """A register that must be written ``rN`` (base addresses, callx)."""
        n, w = self.reg(s)
        if w:
            raise self.error(f"{s.strip()!r} must be a 64-bit register r{n}")
        return n

    def is_reg(self, s: str) -> bool:
        return _RE_REG.fullmatch(s.strip()) is not None

    # -- operands ----------------------------------------------------------

    def target(self, s: str) -> int | str:
        """A jump target: an offset (int) or a label (str)."""
        # The range is checked by _set_target, which knows the field.
        t = s.strip()
        m = _C_PC.fullmatch(t)
        if m:
            return self.number(m["off"])
        if _RE_NUM.fullmatch(t):
            return self.number(t)
        if re.fullmatch(_LABEL, t):
            return t
        raise self.error(f"bad jump target {t!r}")

    def mem_k(self, m: re.Match[str]) -> tuple[int, int]:
        off = self.off16(m["off"]) if m["off"] else 0
        return self.reg64(m["base"]), off

    def size(self, name: str, *, signed_ok: bool = False) -> tuple[int, bool]:
        """``u8``.. ``u64`` (or ``s8``..``s32``) to (BPF size, sign-extending)."""
        if name in _SIZE_BY_NAME:
            return _SIZE_BY_NAME[name], False
        if signed_ok and name in _SX_SIZE_BY_NAME:
            return _SX_SIZE_BY_NAME[name], True
        raise self.error(f"bad access size {name!r}")


def _set_target(st: _Stmt, ln: _Line, target: int | str, field: str) -> _Stmt:
    st.field = field
    if isinstance(target, str):
        st.target = target
    elif field == "off":
        if not -(1 << 15) <= target < (1 << 15):
            raise ln.error(f"jump offset {target} does not fit in 16 signed bits")
        st.off = target
    else:
        if not -(1 << 31) <= target < (1 << 31):
            raise ln.error(f"offset {target} does not fit in 32 signed bits")
        st.imm = target
    return st


# --------------------------------------------------------------------------
# Kernel dialect.

def _k_call(ln: _Line, arg: str) -> _Stmt:
    a = arg.strip()
    call = op.OP_CALL
    m = _C_PC.fullmatch(a)
    if m:
        st = ln.stmt(call, src=op.CallSrc.BPF_PSEUDO_CALL)
        return _set_target(st, ln, ln.number(m["off"]), "imm")
    if ln.is_reg(a):
        return ln.stmt(op.OP_CALLX, dst=ln.reg64(a))
    m = _C_NAMED.fullmatch(a)
    if m:
        n = ln.imm32(m["n"])
        name = m["name"]
        if name == "kernel-function":
            off = ln.off16(m["off"]) if m["off"] else 0
            return ln.stmt(call, src=op.CallSrc.BPF_PSEUDO_KFUNC_CALL, off=off, imm=n)
        if m["off"]:
            raise ln.error("only a kfunc call carries a btf_fd_idx")
        known = helper_name(n)
        # The name is derived from the id; a mismatch is a typo, not a wish.
        if known is not None and name != known and helper_id(name) != n:
            raise ln.error(f"helper #{n} is {known}, not {name}")
        if known is None and name != "unknown" and helper_id(name) is not None:
            raise ln.error(f"{name} is helper #{helper_id(name)}, not #{n}")
        return ln.stmt(call, src=op.CallSrc.BPF_HELPER_CALL, imm=n)
    if _RE_NUM.fullmatch(a):
        return ln.stmt(call, src=op.CallSrc.BPF_HELPER_CALL, imm=ln.imm32(a))
    hid = helper_id(a)
    if hid is not None:
        return ln.stmt(call, src=op.CallSrc.BPF_HELPER_CALL, imm=hid)
    if re.fullmatch(_LABEL, a):
        # Not a helper's name: a bpf-to-bpf call to a label, as in the
        # kernel selftests' inline asm ("call subprog").
        st = ln.stmt(call, src=op.CallSrc.BPF_PSEUDO_CALL)
        return _set_target(st, ln, a, "imm")
    raise ln.error(f"bad call target {a!r}")


def _k_ld_imm64(ln: _Line, dst: int, src: int, lo: int, hi: int) -> _Stmt:
    st = ln.stmt(op.OP_LD_IMM64, dst=dst, src=src, imm=lo)
    st.hi = hi
    return st


def _split64(v: int) -> tuple[int, int]:
    lo, hi = v & 0xFFFF_FFFF, v >> 32
    return (lo - (1 << 32) if lo >> 31 else lo), (hi - (1 << 32) if hi >> 31 else hi)


def _k_rhs_imm64(ln: _Line, dst: int, rhs: str) -> _Stmt | None:
    """ld_imm64 right-hand sides other than a plain constant; None if not one."""
    ps = op.PseudoSrc
    m = _R_MAP.fullmatch(rhs)
    if m:
        n = ln.imm32(m["n"])
        voff = ln.imm32(m["voff"]) if m["voff"] else None
        if m["kind"] == "idx":
            if m["val"]:
                raise ln.error("map[idx:N] takes its value offset as +OFF, without [0]")
            src = ps.BPF_PSEUDO_MAP_IDX if voff is None else ps.BPF_PSEUDO_MAP_IDX_VALUE
        else:
            if voff is not None and not m["val"]:
                raise ln.error("a map value address is written map[fd:N][0]+OFF")
            src = ps.BPF_PSEUDO_MAP_VALUE if m["val"] else ps.BPF_PSEUDO_MAP_FD
        return _k_ld_imm64(ln, dst, src, n, voff or 0)
    m = _R_SUBPROG.fullmatch(rhs)
    if m:
        st = _k_ld_imm64(ln, dst, ps.BPF_PSEUDO_FUNC, 0, 0)
        return _set_target(st, ln, ln.target(m["target"]), "imm")
    m = _R_BTF_ID.fullmatch(rhs)
    if m:
        fd = ln.imm32(m["fd"]) if m["fd"] else 0
        return _k_ld_imm64(ln, dst, ps.BPF_PSEUDO_BTF_ID, ln.imm32(m["n"]), fd)
    return None


def _narrow_w(ln: _Line, w: bool, size: int) -> None:
    """LLVM writes the register of an 8-, 16- or 32-bit load-acquire or store-release
    as ``wN``, the kernel as ``rN``: both are taken, but not ``wN`` with ``u64``."""
    if w and size == op.BPF_DW:
        raise ln.error("a 64-bit load-acquire or store-release takes an r register")


def _k_assign(ln: _Line, dst_s: str, rhs: str, code_hint: int | None) -> _Stmt:
    dst, w = ln.reg(dst_s)
    cls = op.BPF_ALU if w else op.BPF_ALU64

    m = _R_ATOMIC.fullmatch(rhs)
    if m:
        size, _ = ln.size(m["sz"])
        if size not in (op.BPF_W, op.BPF_DW):
            raise ln.error("atomic operations are 32 or 64 bits wide")
        if bool(m["w64"]) != (size == op.BPF_DW):
            raise ln.error("atomic64_* goes with u64, atomic_* with u32")
        base, off = ln.mem_k(m)
        code = op.BPF_STX | op.BPF_ATOMIC | size
        a, _ = ln.reg(m["a"])
        if m["op"] == "cmpxchg":
            # r0 = atomic_cmpxchg(ptr, r0, rS): r0 is implied by the encoding.
            if dst != 0 or a != 0 or m["b"] is None:
                raise ln.error("cmpxchg is written r0 = atomic_cmpxchg((..), r0, rS)")
            return ln.stmt(code, dst=base, src=ln.reg(m["b"])[0], off=off,
                           imm=op.BPF_CMPXCHG)
        if m["b"] is not None or a != dst:
            raise ln.error(f"{m['op']} loads the old value into its source register")
        if m["op"] == "xchg":
            imm = op.BPF_XCHG
        else:
            imm = _V_ATOMIC_OPS[m["op"][len("fetch_"):]] | op.BPF_FETCH
        return ln.stmt(code, dst=base, src=a, off=off, imm=imm)

    m = _R_LOAD_ACQ.fullmatch(rhs)
    if m:
        size, _ = ln.size(m["sz"])
        _narrow_w(ln, w, size)
        base, off = ln.mem_k(m)
        return ln.stmt(op.BPF_STX | op.BPF_ATOMIC | size, dst=dst, src=base, off=off,
                       imm=BPF_LOAD_ACQ)

    m = _R_LOAD.fullmatch(rhs)
    if m:
        size, sx = ln.size(m["sz"], signed_ok=True)
        base, off = ln.mem_k(m)
        mode = op.BPF_MEMSX if sx else op.BPF_MEM
        return ln.stmt(op.BPF_LDX | mode | size, dst=dst, src=base, off=off)

    m = _R_SKB.fullmatch(rhs)
    if m:
        if dst != 0 or w:
            raise ln.error("packet loads (ld_abs/ld_ind) always load into r0")
        size, _ = ln.size(m["sz"])
        imm = ln.imm32(m["imm"])
        if m["src"]:
            return ln.stmt(op.BPF_LD | op.BPF_IND | size, src=ln.reg64(m["src"]), imm=imm)
        return ln.stmt(op.BPF_LD | op.BPF_ABS | size, imm=imm)

    m = _R_END.fullmatch(rhs)
    if m:
        if ln.reg(m["src"])[0] != dst:
            raise ln.error("a byte swap works in place: rN = be16 rN")
        bits = int(m["bits"])
        if bits not in (16, 32, 64):
            raise ln.error(f"byte swap width {bits} is not 16, 32 or 64")
        if m["kind"] == "bswap":
            return ln.stmt(op.BPF_ALU64 | op.BPF_END | op.BPF_TO_LE, dst=dst, imm=bits)
        order = op.BPF_TO_BE if m["kind"] == "be" else op.BPF_TO_LE
        return ln.stmt(op.BPF_ALU | op.BPF_END | order, dst=dst, imm=bits)

    m = _R_NEG.fullmatch(rhs)
    if m:
        src, sw = ln.reg(m["src"])
        if src != dst or sw != w:
            raise ln.error("negation works in place: rN = -rN")
        return ln.stmt(cls | op.BPF_NEG | op.BPF_K, dst=dst)

    m = _R_ASCAST.fullmatch(rhs)
    if m:
        if w:
            raise ln.error("addr_space_cast is a 64-bit operation")
        a, b = ln.number(m["a"]), ln.number(m["b"])
        if not (0 <= a <= 0xFFFF and 0 <= b <= 0xFFFF):
            raise ln.error("address spaces are 16-bit numbers")
        return ln.stmt(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, dst=dst,
                       src=ln.reg64(m["src"]), off=BPF_ADDR_SPACE_CAST,
                       imm=_split64((a << 16) | b)[0])

    m = _R_PERCPU.fullmatch(rhs)
    if m:
        if w:
            raise ln.error("a per-CPU address is 64 bits wide")
        return ln.stmt(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, dst=dst,
                       src=ln.reg64(m["src"]), off=BPF_ADDR_PERCPU)

    m = _R_MOVSX.fullmatch(rhs)
    if m:
        src, sw = ln.reg(m["src"])
        if sw != w:
            raise ln.error("both registers of a move are r or both are w")
        return ln.stmt(cls | op.BPF_MOV | op.BPF_X, dst=dst, src=src,
                       off=_MOVSX_BY_NAME[m["sx"]])

    if not w:
        st = _k_rhs_imm64(ln, dst, rhs)
        if st is not None:
            return st

    m = _R_IMM.fullmatch(rhs)
    if m:
        if m["ll"] or code_hint == op.OP_LD_IMM64:
            if w:
                raise ln.error("a 64-bit load targets an r register")
            return _k_ld_imm64(ln, dst, 0, *_split64(ln.imm64(m["n"])))
        v = ln.number(m["n"])
        if not -(1 << 31) <= v < (1 << 32):
            raise ln.error(f"{m['n'].strip()} does not fit in a 32-bit immediate; "
                           "write it with `ll` for a 64-bit load")
        return ln.stmt(cls | op.BPF_MOV | op.BPF_K, dst=dst, imm=ln.imm32(m["n"]))

    m = _R_REG.fullmatch(rhs)
    if m:
        src, sw = ln.reg(m["src"])
        if sw != w:
            raise ln.error("both registers of a move are r or both are w")
        return ln.stmt(cls | op.BPF_MOV | op.BPF_X, dst=dst, src=src)

    raise ln.error("cannot parse the right-hand side")


def _k_statement(ln: _Line, s: str, code_hint: int | None) -> _Stmt | None:
    """A kernel-dialect statement, or None when ``s`` is not in that dialect."""
    if s == "exit":
        return ln.stmt(op.OP_EXIT)

    m = _K_GOTO.fullmatch(s)
    if m:
        kind = m["kind"]
        if kind == "gotol":
            return _set_target(ln.stmt(op.OP_JA32), ln, ln.target(m["target"]), "imm")
        if kind == "goto":
            st = ln.stmt(op.OP_JA)
        else:
            st = ln.stmt(op.BPF_JMP | BPF_JCOND | op.BPF_K, src=BPF_MAY_GOTO)
        return _set_target(st, ln, ln.target(m["target"]), "off")

    m = _K_IF.fullmatch(s)
    if m:
        dst, w = ln.reg(m["dst"])
        cls = op.BPF_JMP32 if w else op.BPF_JMP
        code = cls | _JMP_BY_SPELLING[m["op"]]
        if ln.is_reg(m["src"]):
            src, sw = ln.reg(m["src"])
            if sw != w:
                raise ln.error("both registers of a comparison are r or both are w")
            st = ln.stmt(code | op.BPF_X, dst=dst, src=src)
        else:
            st = ln.stmt(code | op.BPF_K, dst=dst, imm=ln.imm32(m["src"]))
        return _set_target(st, ln, ln.target(m["target"]), "off")

    m = _K_CALLX.fullmatch(s)
    if m:
        return ln.stmt(op.OP_CALLX, dst=ln.reg64(m["dst"]))

    m = _K_CALL.fullmatch(s)
    if m and m["arg"].split()[0] not in _V_CALL_MODES:
        return _k_call(ln, m["arg"])

    m = _K_LOCK.fullmatch(s)
    if m:
        size, _ = ln.size(m["sz"])
        base, off = ln.mem_k(m)
        alu = _ALU_BY_SPELLING[m["op"] + "="][0]
        if alu == op.BPF_SUB:
            raise ln.error("there is no atomic subtract; add the negation")
        return ln.stmt(op.BPF_STX | op.BPF_ATOMIC | size, dst=base,
                       src=ln.reg(m["src"])[0], off=off, imm=alu)

    m = _K_STORE_REL.fullmatch(s)
    if m:
        size, _ = ln.size(m["sz"])
        base, off = ln.mem_k(m)
        src, w = ln.reg(m["src"])
        _narrow_w(ln, w, size)
        return ln.stmt(op.BPF_STX | op.BPF_ATOMIC | size, dst=base, src=src, off=off,
                       imm=BPF_STORE_REL)

    m = _K_STORE.fullmatch(s)
    if m:
        size, _ = ln.size(m["sz"])
        base, off = ln.mem_k(m)
        if ln.is_reg(m["src"]):
            return ln.stmt(op.BPF_STX | op.BPF_MEM | size, dst=base,
                           src=ln.reg(m["src"])[0], off=off)
        return ln.stmt(op.BPF_ST | op.BPF_MEM | size, dst=base, off=off,
                       imm=ln.imm32(m["src"]))

    m = _K_ALU.fullmatch(s)
    if m:
        dst, w = ln.reg(m["dst"])
        alu, signed = _ALU_BY_SPELLING[m["op"]]
        code = (op.BPF_ALU if w else op.BPF_ALU64) | alu
        if ln.is_reg(m["src"]):
            src, sw = ln.reg(m["src"])
            if sw != w:
                raise ln.error("both registers of an ALU operation are r or both are w")
            return ln.stmt(code | op.BPF_X, dst=dst, src=src, off=signed)
        return ln.stmt(code | op.BPF_K, dst=dst, off=signed, imm=ln.imm32(m["src"]))

    m = _K_ASSIGN.fullmatch(s)
    if m and ln.is_reg(m["dst"]):
        return _k_assign(ln, m["dst"], m["rhs"].strip(), code_hint)

    return None


# --------------------------------------------------------------------------
# bpf_conformance dialect.

def _v_operands(ln: _Line, rest: str, count: int, mnemonic: str) -> list[str]:
    ops = [o.strip() for o in rest.split(",")] if rest.strip() else []
    if len(ops) != count or any(not o for o in ops):
        raise ln.error(f"{mnemonic} takes {count} operand{'s' if count != 1 else ''}")
    return ops


def _v_mem(ln: _Line, s: str) -> tuple[int, int]:
    m = _V_MEM.fullmatch(s.strip())
    if not m:
        raise ln.error(f"bad memory operand {s.strip()!r}; expected [%rN+OFF]")
    return ln.mem_k(m)


def _v_reg64(ln: _Line, s: str) -> int:
    if not s.strip().startswith(("%r", "r")):
        raise ln.error(f"expected a register, got {s.strip()!r}")
    return ln.reg64(s)


def _v_statement(ln: _Line, mnemonic: str, rest: str) -> _Stmt | None:
    """A vector-dialect statement, or None when ``mnemonic`` is not one of it."""
    mn = mnemonic

    if mn == "exit":
        _v_operands(ln, rest, 0, mn)
        return ln.stmt(op.OP_EXIT)

    if mn == "lddw":
        dst_s, value = _v_operands(ln, rest, 2, mn)
        dst = _v_reg64(ln, dst_s)
        st = _k_rhs_imm64(ln, dst, value)
        if st is not None:
            return st
        return _k_ld_imm64(ln, dst, 0, *_split64(ln.imm64(value)))

    m = _RE_V_END.fullmatch(mn)
    if m:
        (reg,) = _v_operands(ln, rest, 1, mn)
        bits = int(m["bits"])
        dst = _v_reg64(ln, reg)
        if m["kind"] in ("swap", "bswap"):
            # swapN is the vectors' older name for bswapN: ALU64 | END, imm N.
            return ln.stmt(op.BPF_ALU64 | op.BPF_END | op.BPF_TO_LE, dst=dst, imm=bits)
        order = op.BPF_TO_BE if m["kind"] == "be" else op.BPF_TO_LE
        return ln.stmt(op.BPF_ALU | op.BPF_END | order, dst=dst, imm=bits)

    if mn in _V_MOVSX:
        dst_s, src_s = _v_operands(ln, rest, 2, mn)
        width, cls = _V_MOVSX[mn]
        return ln.stmt(cls | op.BPF_MOV | op.BPF_X, dst=_v_reg64(ln, dst_s),
                       src=_v_reg64(ln, src_s), off=width)

    for suffix, cls in (("32", op.BPF_ALU), ("64", op.BPF_ALU64), ("", op.BPF_ALU64)):
        stem = mn[: len(mn) - len(suffix)] if suffix else mn
        if suffix and not mn.endswith(suffix):
            continue
        if stem == "neg":
            (reg,) = _v_operands(ln, rest, 1, mn)
            return ln.stmt(cls | op.BPF_NEG | op.BPF_K, dst=_v_reg64(ln, reg))
        if stem in _V_ALU_OPS:
            alu, signed = _V_ALU_OPS[stem]
            dst_s, src_s = _v_operands(ln, rest, 2, mn)
            dst = _v_reg64(ln, dst_s)
            if ln.is_reg(src_s):
                return ln.stmt(cls | alu | op.BPF_X, dst=dst, src=_v_reg64(ln, src_s),
                               off=signed)
            return ln.stmt(cls | alu | op.BPF_K, dst=dst, off=signed,
                           imm=ln.imm32(src_s))

    m = _RE_V_LDX.fullmatch(mn)
    if m:
        if m["sx"] and m["size"] == "dw":
            raise ln.error("there is no sign-extending 64-bit load")
        dst_s, mem = _v_operands(ln, rest, 2, mn)
        base, off = _v_mem(ln, mem)
        mode = op.BPF_MEMSX if m["sx"] else op.BPF_MEM
        return ln.stmt(op.BPF_LDX | mode | _V_SIZES[m["size"]], dst=_v_reg64(ln, dst_s),
                       src=base, off=off)

    m = _RE_V_ST.fullmatch(mn)
    if m:
        mem, value = _v_operands(ln, rest, 2, mn)
        base, off = _v_mem(ln, mem)
        size = _V_SIZES[m["size"]]
        if m["x"]:
            return ln.stmt(op.BPF_STX | op.BPF_MEM | size, dst=base,
                           src=_v_reg64(ln, value), off=off)
        return ln.stmt(op.BPF_ST | op.BPF_MEM | size, dst=base, off=off,
                       imm=ln.imm32(value))

    m = _RE_V_LDABS.fullmatch(mn)
    if m:
        size = _V_SIZES[m["size"]]
        if m["mode"] == "abs":
            (value,) = _v_operands(ln, rest, 1, mn)
            return ln.stmt(op.BPF_LD | op.BPF_ABS | size, imm=ln.imm32(value))
        src_s, value = _v_operands(ln, rest, 2, mn)
        return ln.stmt(op.BPF_LD | op.BPF_IND | size, src=_v_reg64(ln, src_s),
                       imm=ln.imm32(value))

    if mn in ("ja", "ja32"):
        (target,) = _v_operands(ln, rest, 1, mn)
        if mn == "ja32":
            return _set_target(ln.stmt(op.OP_JA32), ln, ln.target(target), "imm")
        return _set_target(ln.stmt(op.OP_JA), ln, ln.target(target), "off")

    jbase = mn[:-2] if mn.endswith("32") else mn
    if jbase in _V_JMP_OPS:
        cls = op.BPF_JMP32 if mn.endswith("32") else op.BPF_JMP
        dst_s, src_s, target = _v_operands(ln, rest, 3, mn)
        code = cls | _V_JMP_OPS[jbase]
        dst = _v_reg64(ln, dst_s)
        if ln.is_reg(src_s):
            st = ln.stmt(code | op.BPF_X, dst=dst, src=_v_reg64(ln, src_s))
        else:
            st = ln.stmt(code | op.BPF_K, dst=dst, imm=ln.imm32(src_s))
        return _set_target(st, ln, ln.target(target), "off")

    if mn == "call":
        words = rest.split()
        if len(words) == 2 and words[0] in _V_CALL_MODES:
            how, arg = words
            if how == "local":
                st = ln.stmt(op.OP_CALL, src=op.CallSrc.BPF_PSEUDO_CALL)
                return _set_target(st, ln, ln.target(arg), "imm")
            if how == "runtime":
                return ln.stmt(op.OP_CALL, src=op.CallSrc.BPF_PSEUDO_KFUNC_CALL,
                               imm=ln.imm32(arg))
            return ln.stmt(op.OP_CALL, imm=ln.imm32(arg))
        return _k_call(ln, rest)

    if mn == "callx":
        (reg,) = _v_operands(ln, rest, 1, mn)
        return ln.stmt(op.OP_CALLX, dst=_v_reg64(ln, reg))

    if mn == "lock":
        return _v_lock(ln, rest)

    return None


def _v_lock(ln: _Line, rest: str) -> _Stmt:
    head, bracket, tail = rest.partition("[")
    words = head.split()
    if not bracket or not words:
        raise ln.error("lock takes [fetch] OP[32] [%rN+OFF], %rS")
    fetch = words[0] == "fetch"
    if fetch:
        words = words[1:]
    if len(words) != 1:
        raise ln.error("lock takes [fetch] OP[32] [%rN+OFF], %rS")
    name = words[0]
    size = op.BPF_DW
    if name.endswith("32"):
        name, size = name[:-2], op.BPF_W
    elif name.endswith("64"):
        name = name[:-2]
    if name not in _V_ATOMIC_OPS:
        raise ln.error(f"unknown atomic operation {words[0]!r}")
    mem, src_s = _v_operands(ln, bracket + tail, 2, "lock")
    base, off = _v_mem(ln, mem)
    imm = _V_ATOMIC_OPS[name]
    # xchg and cmpxchg always fetch; "fetch" is redundant for them, not wrong.
    if fetch:
        imm |= op.BPF_FETCH
    return ln.stmt(op.BPF_STX | op.BPF_ATOMIC | size, dst=base, src=_v_reg64(ln, src_s),
                   off=off, imm=imm)


# --------------------------------------------------------------------------
# Driver.

def _strip_comment(line: str) -> str:
    # "//" and ";" (bpftool's source-line annotations) end a line anywhere;
    # "#" only at the start or after whitespace, since helper calls are
    # spelled "call bpf_map_lookup_elem#1".
    for marker in ("//", ";"):
        i = line.find(marker)
        if i >= 0:
            line = line[:i]
    m = re.search(r"(?:^|\s)#", line)
    if m:
        line = line[: m.start()]
    return line.strip()


def _parse_line(ln: _Line, s: str) -> _Stmt:
    code_hint: int | None = None
    m = _RE_PC_PREFIX.match(s)
    if m:
        s = s[m.end():]
    m = _RE_CODE_PREFIX.match(s)
    if m:
        code_hint = int(m["code"], 16)
        s = s[m.end():]
    s = s.strip()
    if not s:
        raise ln.error("an opcode prefix with no instruction")

    mnemonic, rest = (s.split(None, 1) + [""])[:2]
    # "lock *(..." and "call pc+1" are kernel spellings; "lock add [...]" and
    # "call local f" are the vectors'. Try the vectors' mnemonic table only
    # for lines the kernel grammar does not claim.
    st = _k_statement(ln, s, code_hint)
    if st is None:
        st = _v_statement(ln, mnemonic, rest)
    if st is None:
        raise ln.error(f"unknown instruction {mnemonic!r}")
    if code_hint is not None and code_hint != st.code:
        raise ln.error(f"opcode prefix ({code_hint:02x}) does not match the "
                       f"instruction's encoding ({st.code:02x})")
    return st


def assemble(text: str) -> tuple[Instruction, ...]:
    """Assemble ``text`` into slots; raises :class:`AsmError` naming the bad line."""
    stmts: list[_Stmt] = []
    labels: dict[str, int] = {}
    pc = 0
    first_exit: int | None = None

    for number, raw in enumerate(text.splitlines(), start=1):
        ln = _Line(number, raw)
        s = _strip_comment(raw)
        # Any number of labels may lead a line: "L1: L2: exit".
        while s:
            m = _RE_LABEL.fullmatch(s)
            if not m:
                break
            name = m["name"]
            if name in labels:
                raise ln.error(f"label {name!r} defined twice")
            labels[name] = pc
            s = (m["rest"] or "").strip()
        if not s:
            continue
        st = _parse_line(ln, s)
        st.pc = pc
        if st.code == op.OP_EXIT and first_exit is None:
            first_exit = pc
        stmts.append(st)
        pc += 2 if st.hi is not None else 1

    out: list[Instruction] = []
    for st in stmts:
        if st.target is not None:
            ln = _Line(st.line, st.text)
            if st.target in labels:
                where = labels[st.target]
            elif st.target == "exit" and first_exit is not None:
                # bpf_conformance's convention: "exit" names the first exit.
                where = first_exit
            else:
                raise ln.error(f"undefined label {st.target!r}")
            _set_target(st, ln, where - (st.pc + 1), st.field)
        # int(): enum members (CallSrc, PseudoSrc) become plain numbers.
        out.append(Instruction(int(st.code), int(st.dst), int(st.src), int(st.off),
                               int(st.imm)))
        if st.hi is not None:
            out.append(Instruction(0, 0, 0, 0, st.hi))
    return tuple(out)
