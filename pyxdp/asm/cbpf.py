"""Classic BPF (``struct sock_filter``) and its conversion to eBPF for XDP frames.

This models two functions of ``net/core/filter.c``: ``bpf_check_classic`` (the
load-time rules a classic program must pass: known opcodes, jumps inside the
program, scratch-memory indexes below ``BPF_MEMWORDS``, no division by a zero
constant, no constant shift of 32 or more, a return as the last instruction,
no read of a scratch word before a write on every path) and
``bpf_convert_filter`` (classic to eBPF), with the kernel's register mapping:
A is R0, X is R7, the context stays in R6, R8 caches the packet start and R9
its end, R2 is the temporary; the scratch memory ``M[k]`` is the 32-bit stack
word at ``fp - (4k + 4)``; ``RET K`` is ``w0 = K; exit``; each classic jump
becomes one eBPF jump (two when neither branch falls through), a negative
32-bit constant going through the temporary register so the 64-bit compare
sees it zero-extended; ``DIV``/``MOD`` by X return 0 from the filter when X is
zero.

The one difference is the context. The kernel's converted filter runs on an
``sk_buff`` and loads packet bytes through ``bpf_skb_load_helper_*``; the
program built here runs on an XDP frame (``struct xdp_md`` in R1), so
``LD ABS``/``LD IND``/``LDX MSH`` load straight from the packet with a bounds
check against ``data_end`` that the verifier accepts. A load that does not
fit returns 0 from the whole filter, as the skb helpers' failure does
(``if A s>= 0 ... w0 ^= w0; exit``). ``LEN`` (``skb->len``) is
``bpf_xdp_get_buff_len``. Negative
offsets: ``SKF_LL_OFF + k`` is byte k of the frame, ``SKF_NET_OFF + k`` byte
``14 + k`` (the network header of an Ethernet frame, which an XDP frame never
has untagged by the stack); an indirect offset that is negative as a 32-bit
integer fails like an out-of-bounds load. Of the ancillary loads
(``SKF_AD_OFF + n``) those with an XDP meaning convert: the protocol (the
frame's EtherType), the ingress ifindex, the rx queue, the CPU, a random
number, ``A ^= X``, and "VLAN tag present"/"VLAN tag" as 0 (an XDP frame keeps
its tag in the data); the others raise :class:`CbpfError`.

The resulting program is a valid XDP program (the kernel's verifier loads it);
its return value is the classic filter's: 0 to reject, else the number of
bytes to keep.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pyxdp.asm import macros as m
from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.errors import InvalidProgram

__all__ = ["BPF_MAXINSNS", "BPF_MEMWORDS", "CbpfError", "SockFilter", "check_classic",
           "convert_filter", "decode_sock_filters"]

# Classic-only encodings (include/uapi/linux/filter.h, bpf_common.h).
BPF_RET = 0x06
BPF_MISC = 0x07
BPF_LEN = 0x80
BPF_MSH = 0xA0
BPF_A = 0x10
BPF_TAX = 0x00
BPF_TXA = 0x80
BPF_MAXINSNS = 4096
BPF_MEMWORDS = 16

SKF_AD_OFF = -0x1000
SKF_AD_PROTOCOL = 0
SKF_AD_PKTTYPE = 4
SKF_AD_IFINDEX = 8
SKF_AD_NLATTR = 12
SKF_AD_NLATTR_NEST = 16
SKF_AD_MARK = 20
SKF_AD_QUEUE = 24
SKF_AD_HATYPE = 28
SKF_AD_RXHASH = 32
SKF_AD_CPU = 36
SKF_AD_ALU_XOR_X = 40
SKF_AD_VLAN_TAG = 44
SKF_AD_VLAN_TAG_PRESENT = 48
SKF_AD_PAY_OFFSET = 52
SKF_AD_RANDOM = 56
SKF_AD_VLAN_TPID = 60
SKF_AD_MAX = 64
SKF_NET_OFF = -0x100000
SKF_LL_OFF = -0x200000
_AD_NAMES = {SKF_AD_PROTOCOL: "protocol", SKF_AD_PKTTYPE: "pkttype", SKF_AD_IFINDEX: "ifindex",
             SKF_AD_NLATTR: "nlattr", SKF_AD_NLATTR_NEST: "nlattr_nest", SKF_AD_MARK: "mark",
             SKF_AD_QUEUE: "queue", SKF_AD_HATYPE: "hatype", SKF_AD_RXHASH: "rxhash",
             SKF_AD_CPU: "cpu", SKF_AD_ALU_XOR_X: "alu_xor_x", SKF_AD_VLAN_TAG: "vlan_tag",
             SKF_AD_VLAN_TAG_PRESENT: "vlan_tag_present", SKF_AD_PAY_OFFSET: "pay_offset",
             SKF_AD_RANDOM: "random", SKF_AD_VLAN_TPID: "vlan_tpid"}

# bpf_convert_filter's register mapping (include/linux/filter.h).
REG_A = 0
REG_X = 7
REG_TMP = 2
REG_CTX = 6
REG_D = 8  # packet start (the kernel: skb->data)
REG_H = 9  # packet end (the kernel: headlen; here data_end, a packet pointer)
REG_FP = 10
_ETH_HLEN = 14
# The verifier refuses packet offsets from 64 KiB on (MAX_PACKET_OFF); no linear
# XDP frame is that long, so such a load always fails.
_MAX_PACKET_OFF = 0xFFFF
_HELPER_GET_PRANDOM_U32 = 7
_HELPER_GET_SMP_PROCESSOR_ID = 8
_HELPER_XDP_GET_BUFF_LEN = 188
_XDP_MD_DATA, _XDP_MD_DATA_END, _XDP_MD_IFINDEX, _XDP_MD_QUEUE = 0, 4, 12, 16

_SOCK_FILTER = struct.Struct("=HBBI")


class CbpfError(InvalidProgram):
    """A classic program the kernel's checker refuses, or one with no XDP meaning."""


@dataclass(frozen=True, slots=True)
class SockFilter:
    """``struct sock_filter``: ``code``, jump-if-true/false offsets, ``k``."""

    code: int
    jt: int = 0
    jf: int = 0
    k: int = 0

    def encode(self) -> bytes:
        return _SOCK_FILTER.pack(self.code, self.jt, self.jf, self.k)

    def __str__(self) -> str:
        # The form of tcpdump -dd / bpf_asm -c.
        return f"{{ {self.code:#04x}, {self.jt}, {self.jf}, {self.k:#010x} }}"


def decode_sock_filters(raw: bytes) -> tuple[SockFilter, ...]:
    """``struct sock_filter[]`` in native byte order."""
    if len(raw) % _SOCK_FILTER.size:
        raise CbpfError(f"{len(raw)} bytes is not a whole number of 8-byte sock_filter",
                        rule="length")
    return tuple(SockFilter(*t) for t in _SOCK_FILTER.iter_unpack(raw))


_ALU_OPS = (op.BPF_ADD, op.BPF_SUB, op.BPF_MUL, op.BPF_DIV, op.BPF_OR, op.BPF_AND,
            op.BPF_LSH, op.BPF_RSH, op.BPF_MOD, op.BPF_XOR)
_JMP_OPS = (op.BPF_JEQ, op.BPF_JGT, op.BPF_JGE, op.BPF_JSET)
_SIZES = {op.BPF_W: 4, op.BPF_H: 2, op.BPF_B: 1}
# Every opcode bpf_check_classic knows (its codes[] table).
_VALID: frozenset[int] = frozenset(
    [op.BPF_ALU | o | s for o in _ALU_OPS for s in (op.BPF_K, op.BPF_X)]
    + [op.BPF_ALU | op.BPF_NEG]
    + [op.BPF_LD | mode | size for mode in (op.BPF_ABS, op.BPF_IND) for size in _SIZES]
    + [op.BPF_LD | op.BPF_W | BPF_LEN, op.BPF_LD | op.BPF_IMM, op.BPF_LD | op.BPF_MEM,
       op.BPF_LDX | op.BPF_W | BPF_LEN, op.BPF_LDX | op.BPF_IMM, op.BPF_LDX | op.BPF_MEM,
       op.BPF_LDX | op.BPF_B | BPF_MSH, op.BPF_ST, op.BPF_STX,
       BPF_MISC | BPF_TAX, BPF_MISC | BPF_TXA, BPF_RET | op.BPF_K, BPF_RET | BPF_A,
       op.BPF_JMP | op.BPF_JA]
    + [op.BPF_JMP | o | s for o in _JMP_OPS for s in (op.BPF_K, op.BPF_X)])


def _is_cond_jump(code: int) -> bool:
    return code & 0x07 == op.BPF_JMP and code & 0xF0 in _JMP_OPS


def check_classic(prog: Sequence[SockFilter]) -> None:
    """``bpf_check_classic``: raise :class:`CbpfError` naming the first rule broken."""
    n = len(prog)
    if not 0 < n <= BPF_MAXINSNS:
        raise CbpfError(f"a classic program has 1..{BPF_MAXINSNS} instructions, not {n}",
                        rule="length")
    for pc, f in enumerate(prog):
        def fail(message: str, rule: str) -> CbpfError:
            return CbpfError(message, pc=pc, insn=str(f), rule=rule)  # noqa: B023

        if f.code not in _VALID:
            raise fail(f"unknown classic opcode {f.code:#x}", "opcode")
        cls, alu_op = f.code & 0x07, f.code & 0xF0
        if cls == op.BPF_ALU and f.code & 0x08 == op.BPF_K:
            if alu_op in (op.BPF_DIV, op.BPF_MOD) and f.k == 0:
                raise fail("division by the constant 0", "div-by-zero")
            if alu_op in (op.BPF_LSH, op.BPF_RSH) and f.k >= 32:
                raise fail(f"constant shift by {f.k}", "shift")
        if f.code in (op.BPF_LD | op.BPF_MEM, op.BPF_LDX | op.BPF_MEM, op.BPF_ST, op.BPF_STX) \
                and f.k >= BPF_MEMWORDS:
            raise fail(f"scratch word M[{f.k}] (there are {BPF_MEMWORDS})", "memword")
        if f.code == op.BPF_JMP | op.BPF_JA:
            if f.k >= n - pc - 1:
                raise fail("jump out of the program", "jump")
        elif _is_cond_jump(f.code) and (pc + 1 + f.jt >= n or pc + 1 + f.jf >= n):
            raise fail("jump out of the program", "jump")
    if prog[-1].code & 0x07 != BPF_RET:
        raise CbpfError("the last instruction is not a return", rule="ret", pc=n - 1,
                        insn=str(prog[-1]))
    _check_load_and_stores(prog)


def _check_load_and_stores(prog: Sequence[SockFilter]) -> None:
    """``check_load_and_stores``: no path may read ``M[k]`` before writing it."""
    masks = [0xFFFF] * len(prog)
    valid = 0
    for pc, f in enumerate(prog):
        valid &= masks[pc]
        if f.code in (op.BPF_ST, op.BPF_STX):
            valid |= 1 << f.k
        elif f.code in (op.BPF_LD | op.BPF_MEM, op.BPF_LDX | op.BPF_MEM):
            if not valid & (1 << f.k):
                raise CbpfError(f"M[{f.k}] read before it is written", rule="memword-uninit",
                                pc=pc, insn=str(f))
        elif f.code == op.BPF_JMP | op.BPF_JA:
            masks[pc + 1 + f.k] &= valid
            valid = 0xFFFF
        elif _is_cond_jump(f.code):
            masks[pc + 1 + f.jt] &= valid
            masks[pc + 1 + f.jf] &= valid
            valid = 0xFFFF


def _s32(k: int) -> int:
    return k - (1 << 32) if k & 0x8000_0000 else k


# Jump targets while converting: a classic pc, or the shared "load failed" exit.
_FAIL = -1
_Emitted = list[tuple[Instruction, int | None]]


def _load_direct(size: int, k: int, out: _Emitted) -> None:
    """A = the ``size`` bytes at data + k (k constant), big-endian; else return 0."""
    if k < 0 or k + size > _MAX_PACKET_OFF:
        out.append((m.ja(0), _FAIL))
        return
    out.append((m.mov64_reg(REG_TMP, REG_D), None))
    out.append((m.alu64_imm(op.BPF_ADD, REG_TMP, k + size), None))
    out.append((m.jmp_reg(op.BPF_JGT, REG_TMP, REG_H, 0), _FAIL))
    if k <= 0x7FFF:
        out.append((m.ldx_mem(size, REG_A, REG_D, k), None))
    else:  # beyond ldx's s16 offset: through the (checked) pointer
        out.append((m.alu64_imm(op.BPF_SUB, REG_TMP, size), None))
        out.append((m.ldx_mem(size, REG_A, REG_TMP, 0), None))
    if size > 1:
        out.append((m.endian(op.BPF_ALU, op.BPF_TO_BE, REG_A, size * 8), None))


def _load_indirect(size: int, k: int, out: _Emitted) -> None:
    """A = the ``size`` bytes at data + (int)(X + k); else return 0."""
    out.append((m.mov32_reg(REG_TMP, REG_X), None))
    if k:
        out.append((m.alu32_imm(op.BPF_ADD, REG_TMP, _s32(k)), None))
    # Negative as an int, or past 64 KiB: fails (and bounds the offset for the verifier).
    out.append((m.jmp_imm(op.BPF_JGT, REG_TMP, _MAX_PACKET_OFF - size, 0), _FAIL))
    out.append((m.alu64_reg(op.BPF_ADD, REG_TMP, REG_D), None))
    out.append((m.mov64_reg(3, REG_TMP), None))
    out.append((m.alu64_imm(op.BPF_ADD, 3, size), None))
    out.append((m.jmp_reg(op.BPF_JGT, 3, REG_H, 0), _FAIL))
    out.append((m.ldx_mem(size, REG_A, REG_TMP, 0), None))
    if size > 1:
        out.append((m.endian(op.BPF_ALU, op.BPF_TO_BE, REG_A, size * 8), None))


def _ancillary(f: SockFilter, pc: int, out: _Emitted) -> None:
    """``convert_bpf_extensions`` for the loads with an XDP meaning."""
    ad = _s32(f.k) - SKF_AD_OFF
    if ad == SKF_AD_PROTOCOL:  # the EtherType (what eth_type_trans puts in skb->protocol)
        _load_direct(2, 12, out)
    elif ad in (SKF_AD_IFINDEX, SKF_AD_QUEUE):
        field = _XDP_MD_IFINDEX if ad == SKF_AD_IFINDEX else _XDP_MD_QUEUE
        out.append((m.ldx_mem(4, REG_A, REG_CTX, field), None))
    elif ad in (SKF_AD_CPU, SKF_AD_RANDOM):
        helper = _HELPER_GET_SMP_PROCESSOR_ID if ad == SKF_AD_CPU else _HELPER_GET_PRANDOM_U32
        out.append((m.call_helper(helper), None))  # clobbers R1-R5 only; A is R0
    elif ad == SKF_AD_ALU_XOR_X:
        out.append((m.alu32_reg(op.BPF_XOR, REG_A, REG_X), None))
    elif ad in (SKF_AD_VLAN_TAG, SKF_AD_VLAN_TAG_PRESENT):
        out.append((m.mov32_imm(REG_A, 0), None))
    else:
        name = _AD_NAMES.get(ad, f"#{ad}")
        raise CbpfError(f"ancillary load '{name}' has no meaning on an XDP frame",
                        rule="ancillary", pc=pc, insn=str(f))


def _uses_packet(prog: Sequence[SockFilter]) -> bool:
    return any(f.code & 0x07 in (op.BPF_LD, op.BPF_LDX)
               and f.code & 0xE0 in (op.BPF_ABS, op.BPF_IND, BPF_MSH)
               for f in prog)


def _convert_one(f: SockFilter, pc: int) -> _Emitted:
    out: _Emitted = []
    code, cls = f.code, f.code & 0x07
    k = f.k
    if cls == op.BPF_ALU:
        alu_op, src = code & 0xF0, code & 0x08
        if alu_op == op.BPF_NEG:
            out.append((m.alu32_imm(op.BPF_NEG, REG_A, 0), None))
        elif src == op.BPF_X:
            if alu_op in (op.BPF_DIV, op.BPF_MOD):  # classic BPF: x / 0 returns 0
                out.append((m.mov32_reg(REG_X, REG_X), None))
                out.append((m.jmp_imm(op.BPF_JNE, REG_X, 0, 2), None))
                out.append((m.alu32_reg(op.BPF_XOR, REG_A, REG_A), None))
                out.append((m.exit_insn(), None))
            out.append((m.alu32_reg(alu_op, REG_A, REG_X), None))
        else:
            out.append((m.alu32_imm(alu_op, REG_A, _s32(k)), None))
    elif cls == op.BPF_LD and code & 0xE0 in (op.BPF_ABS, op.BPF_IND):
        size = _SIZES[code & 0x18]
        sk = _s32(k)
        if code & 0xE0 == op.BPF_IND:
            _load_indirect(size, k, out)
        elif SKF_AD_OFF <= sk < SKF_AD_OFF + SKF_AD_MAX:
            _ancillary(f, pc, out)
        elif SKF_LL_OFF <= sk < SKF_NET_OFF:
            _load_direct(size, sk - SKF_LL_OFF, out)
        elif SKF_NET_OFF <= sk < SKF_AD_OFF:
            _load_direct(size, sk - SKF_NET_OFF + _ETH_HLEN, out)
        else:
            _load_direct(size, sk, out)  # negative and below SKF_LL_OFF: always fails
    elif code == op.BPF_LDX | op.BPF_B | BPF_MSH:  # X = 4 * (pkt[k] & 0xf), A kept
        out.append((m.mov64_reg(REG_X, REG_A), None))
        _load_direct(1, _s32(k), out)
        out.append((m.alu32_imm(op.BPF_AND, REG_A, 0xF), None))
        out.append((m.alu32_imm(op.BPF_LSH, REG_A, 2), None))
        out.append((m.mov64_reg(REG_TMP, REG_X), None))
        out.append((m.mov64_reg(REG_X, REG_A), None))
        out.append((m.mov64_reg(REG_A, REG_TMP), None))
    elif code == op.BPF_JMP | op.BPF_JA:
        out.append((m.ja(0), pc + 1 + k))
    elif cls == op.BPF_JMP:
        jop = code & 0xF0
        if code & 0x08 == op.BPF_K and _s32(k) < 0:
            # The 64-bit compare would sign-extend the immediate: zero-extend it first.
            out.append((m.mov32_imm(REG_TMP, _s32(k)), None))
            src, reg, imm = op.BPF_X, REG_TMP, 0
        elif code & 0x08 == op.BPF_X:
            src, reg, imm = op.BPF_X, REG_X, 0
        else:
            src, reg, imm = op.BPF_K, 0, k

        def jump(o: int, target: int) -> None:
            out.append((Instruction(op.BPF_JMP | o | src, REG_A, reg, 0, imm), target))

        inverse = {op.BPF_JEQ: op.BPF_JNE, op.BPF_JGT: op.BPF_JLE, op.BPF_JGE: op.BPF_JLT}
        if f.jf == 0:
            jump(jop, pc + 1 + f.jt)
        elif f.jt == 0 and jop in inverse:
            jump(inverse[jop], pc + 1 + f.jf)
        else:
            jump(jop, pc + 1 + f.jt)
            out.append((m.ja(0), pc + 1 + f.jf))
    elif cls == BPF_RET:
        if code & 0x18 == op.BPF_K:
            out.append((m.mov32_imm(REG_A, _s32(k)), None))
        out.append((m.exit_insn(), None))
    elif code in (op.BPF_ST, op.BPF_STX):
        reg = REG_A if code == op.BPF_ST else REG_X
        out.append((m.stx_mem(4, REG_FP, reg, -(4 * k + 4)), None))
    elif code in (op.BPF_LD | op.BPF_MEM, op.BPF_LDX | op.BPF_MEM):
        reg = REG_A if cls == op.BPF_LD else REG_X
        out.append((m.ldx_mem(4, reg, REG_FP, -(4 * k + 4)), None))
    elif code in (op.BPF_LD | op.BPF_IMM, op.BPF_LDX | op.BPF_IMM):
        out.append((m.mov32_imm(REG_A if cls == op.BPF_LD else REG_X, _s32(k)), None))
    elif code == BPF_MISC | BPF_TAX:
        out.append((m.mov64_reg(REG_X, REG_A), None))
    elif code == BPF_MISC | BPF_TXA:
        out.append((m.mov64_reg(REG_A, REG_X), None))
    elif code == op.BPF_LD | op.BPF_W | BPF_LEN:  # skb->len: the frame with its fragments
        out.append((m.mov64_reg(1, REG_CTX), None))
        out.append((m.call_helper(_HELPER_XDP_GET_BUFF_LEN), None))
        out.append((m.mov32_reg(REG_A, REG_A), None))
    elif code == op.BPF_LDX | op.BPF_W | BPF_LEN:  # the call returns in A: keep A in X
        out.append((m.mov64_reg(REG_X, REG_A), None))
        out.append((m.mov64_reg(1, REG_CTX), None))
        out.append((m.call_helper(_HELPER_XDP_GET_BUFF_LEN), None))
        out.append((m.mov32_reg(REG_TMP, REG_A), None))
        out.append((m.mov64_reg(REG_A, REG_X), None))
        out.append((m.mov64_reg(REG_X, REG_TMP), None))
    else:  # check_classic let through only the codes above
        raise CbpfError(f"unknown classic opcode {code:#x}", rule="opcode", pc=pc,
                        insn=str(f))
    return out


def _reachable(prog: Sequence[SockFilter]) -> list[bool]:
    """Which instructions a run can reach (jumps only go forward: one pass)."""
    live = [False] * len(prog)
    live[0] = True
    for pc, f in enumerate(prog):
        if not live[pc]:
            continue
        if f.code & 0x07 == BPF_RET:
            continue
        if f.code == op.BPF_JMP | op.BPF_JA:
            live[pc + 1 + f.k] = True
        elif _is_cond_jump(f.code):
            live[pc + 1 + f.jt] = live[pc + 1 + f.jf] = True
        else:
            live[pc + 1] = True
    return live


def convert_filter(prog: Iterable[SockFilter]) -> tuple[Instruction, ...]:
    """``bpf_check_classic`` then ``bpf_convert_filter``, for an XDP frame (see above)."""
    cprog = tuple(prog)
    check_classic(cprog)
    # Prologue: A and X are zero, as classic BPF promises (moves, not the kernel's
    # xors: the verifier refuses reading a register never written), the context in R6.
    head: _Emitted = [(m.mov32_imm(REG_A, 0), None), (m.mov32_imm(REG_X, 0), None),
                      (m.mov64_reg(REG_CTX, 1), None)]
    if _uses_packet(cprog):
        head.append((m.ldx_mem(4, REG_D, REG_CTX, _XDP_MD_DATA), None))
        head.append((m.ldx_mem(4, REG_H, REG_CTX, _XDP_MD_DATA_END), None))
    # Classic BPF may hold dead code; eBPF's verifier refuses unreachable instructions.
    live = _reachable(cprog)
    blocks = [_convert_one(f, pc) if live[pc] else [] for pc, f in enumerate(cprog)]
    addrs: list[int] = []
    at = len(head)
    for b in blocks:
        addrs.append(at)
        at += len(b)
    fail_at = at
    tail: _Emitted = [(m.mov32_imm(REG_A, 0), None), (m.exit_insn(), None)]
    out: list[Instruction] = [i for i, _ in head]
    for pc, b in enumerate(blocks):
        for i, target in b:
            if target is not None:
                dest = fail_at if target == _FAIL else addrs[target]
                off = dest - len(out) - 1
                if not -0x8000 <= off <= 0x7FFF:
                    raise CbpfError("jump does not fit eBPF's 16-bit offset", rule="jump",
                                    pc=pc, insn=str(cprog[pc]))
                i = Instruction(i.code, i.dst, i.src, off, i.imm)
            out.append(i)
    if any(t == _FAIL for b in blocks for _, t in b):
        out.extend(i for i, _ in tail)
    return tuple(out)
