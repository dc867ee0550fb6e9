"""Random XDP programs with packet access, map calls and the XDP helpers, for differential tests.

:mod:`pyxdp.testing.fuzz` builds pure-ISA programs; this module builds XDP
programs in the same spirit (ALU/ALU64 in every form, loads, stores and
atomics on a stack window, forward conditional jumps) and adds what the
JIT's native paths handle: packet loads and stores through ``ctx->data``
(with and without the bounds check, so short packets fault), ``xdp_md``
field loads, lookups and updates of array, per-CPU array, hash, per-CPU hash,
LRU and LRU per-CPU maps (small maps: full, evicting, tombstoned), deletes,
global data, ``bpf_redirect``/``bpf_redirect_map`` into a devmap and a
cpumap, ``bpf_csum_diff``, ``bpf_xdp_adjust_head``/``meta``/``tail``,
``bpf_xdp_load_bytes``/``store_bytes``, ``bpf_xdp_get_buff_len``, the clock,
the CPU id, random numbers, and a bpf-to-bpf call that hands a pointer into
its caller's stack to a map helper.

Programs are decoded from a byte string (:func:`decode`; bytes past its end
read as zeros, so it never fails). :func:`xdp_programs` draws one 64-bit seed
per program and decodes bytes a seeded PRNG expands from it: a Hypothesis
draw per program rather than hundreds keeps thousands of programs cheap to
generate, at the price of shrinking (a failure reports the seed and the
program's listing; :func:`program_from_seed` rebuilds it).

Nothing here is a verifier-accepted program necessarily (a null map value
may be dereferenced, a packet access may run past the end): both engines
must then fault identically.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction, ld_imm64
from pyxdp.maps import create_map
from pyxdp.maps.base import Map
from pyxdp.spec import MapRef, ProgramSpec
from pyxdp.uapi.bpf import BpfMapType as T

__all__ = ["FuzzCase", "MAP_LAYOUT", "decode", "make_maps", "program_from_seed", "restore",
           "snapshot", "xdp_programs"]

# Map name -> (type, key_size, value_size, max_entries). Small on purpose: updates
# fill them, LRU maps evict, deletes leave tombstones the index then rebuilds over.
MAP_LAYOUT: dict[str, tuple[int, int, int, int]] = {
    "arr": (T.BPF_MAP_TYPE_ARRAY, 4, 12, 4),
    "parr": (T.BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 3),
    "hash": (T.BPF_MAP_TYPE_HASH, 6, 8, 3),
    "phash": (T.BPF_MAP_TYPE_PERCPU_HASH, 4, 12, 3),
    "lru": (T.BPF_MAP_TYPE_LRU_HASH, 8, 8, 3),
    "plru": (T.BPF_MAP_TYPE_LRU_PERCPU_HASH, 13, 4, 3),
    "dev": (T.BPF_MAP_TYPE_DEVMAP, 4, 4, 4),
    "cpu": (T.BPF_MAP_TYPE_CPUMAP, 4, 4, 2),
    "data": (T.BPF_MAP_TYPE_ARRAY, 4, 64, 1),
}
_KEYED = ("arr", "parr", "hash", "phash", "lru", "plru")
NR_CPUS = 2

CTX, DATA, END = 6, 7, 8  # r6 = ctx, r7 = ctx->data, r8 = ctx->data_end
SCALARS = tuple(range(6))  # r0..r5
FP = 10
PKT = 48            # bytes the bounds check covers
WINDOW = 64         # [r10-64, r10): random stack traffic
KEY_AT = -96        # [r10-96, r10-64): map keys
VALUE_AT = -160     # [r10-160, r10-96): map values
BUF_AT = -224       # [r10-224, r10-160): load/store_bytes buffers
_SIZES = {1: op.BPF_B, 2: op.BPF_H, 4: op.BPF_W, 8: op.BPF_DW}
_ALU_OPS = (op.BPF_ADD, op.BPF_SUB, op.BPF_MUL, op.BPF_DIV, op.BPF_OR, op.BPF_AND,
            op.BPF_LSH, op.BPF_RSH, op.BPF_MOD, op.BPF_XOR, op.BPF_MOV, op.BPF_ARSH)
_CMP_OPS = (op.BPF_JEQ, op.BPF_JGT, op.BPF_JGE, op.BPF_JSET, op.BPF_JNE, op.BPF_JSGT,
            op.BPF_JSGE, op.BPF_JLT, op.BPF_JLE, op.BPF_JSLT, op.BPF_JSLE)
_ATOMICS = tuple(op.ATOMIC_OP_NAMES)
_SPECIAL32 = (0, 1, -1, 2, 7, 31, 32, 63, 64, 0x7FFFFFFF, -(2**31), 0xFF, 4, 8, 14, 20)
_SPECIAL64 = (0, 1, 2**63, 2**64 - 1, 2**32, 2**32 - 1, 2**31)


class _Bytes:
    """Choices read from a byte string; past its end everything is 0 (the simplest)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.i = 0

    @property
    def left(self) -> int:
        return len(self.data) - self.i

    def u8(self) -> int:
        if self.i >= len(self.data):
            return 0
        self.i += 1
        return self.data[self.i - 1]

    def below(self, n: int) -> int:
        if n <= 256:
            return self.u8() % n
        return (self.u8() | self.u8() << 8 | self.u8() << 16) % n

    def pick(self, seq: Any) -> Any:
        return seq[self.below(len(seq))]

    def chance(self, num: int, den: int = 8) -> bool:
        return self.below(den) < num

    def imm32(self) -> int:
        if self.chance(4):
            return int(self.pick(_SPECIAL32))
        v = int.from_bytes(bytes(self.u8() for _ in range(4)), "little")
        return v - (1 << 32) if v >> 31 else v

    def imm64(self) -> int:
        if self.chance(4):
            return int(self.pick(_SPECIAL64))
        return int.from_bytes(bytes(self.u8() for _ in range(8)), "little")


@dataclass
class FuzzCase:
    """A decoded program: its spec (map references by name), the packets to run it on
    (payload, metadata length), the budget and the CPU."""

    spec: ProgramSpec
    packets: list[tuple[bytes, int]]
    budget: int
    cpu: int
    seed: int | None = None  # set by program_from_seed


class _Builder:
    def __init__(self, b: _Bytes) -> None:
        self.b = b
        self.out: list[Instruction] = []
        self.refs: list[MapRef] = []
        # bpf-to-bpf calls waiting for the subprogram's pc.
        self.pending_calls: list[int] = []

    def emit(self, *insns: Instruction) -> None:
        self.out.extend(insns)

    def map_ptr(self, reg: int, name: str) -> None:
        self.refs.append(MapRef(len(self.out), name, "fd"))
        self.emit(*ld_imm64(reg, 0, src=op.PseudoSrc.BPF_PSEUDO_MAP_FD))

    def value_ptr(self, reg: int, name: str, off: int) -> None:
        self.refs.append(MapRef(len(self.out), name, "value", off))
        self.emit(*ld_imm64(reg, 0, src=op.PseudoSrc.BPF_PSEUDO_MAP_VALUE))

    def scalar(self) -> int:
        return int(self.b.pick(SCALARS))


def _alu(c: _Builder) -> None:
    b = c.b
    is64 = b.chance(4)
    cls = op.BPF_ALU64 if is64 else op.BPF_ALU
    width = 64 if is64 else 32
    dst = c.scalar()
    kind = b.below(8)
    if kind == 0:
        c.emit(Instruction(cls | op.BPF_NEG, dst, 0, 0, 0))
        return
    if kind == 1:
        src_bit = op.BPF_TO_LE if is64 else b.pick((op.BPF_TO_LE, op.BPF_TO_BE))
        c.emit(Instruction(cls | op.BPF_END | src_bit, dst, 0, 0, b.pick((16, 32, 64))))
        return
    if kind == 2:
        off = b.pick((8, 16, 32) if is64 else (8, 16))
        c.emit(Instruction(cls | op.BPF_MOV | op.BPF_X, dst, c.scalar(), off, 0))
        return
    code_op = b.pick(_ALU_OPS)
    off = b.below(2) if code_op in (op.BPF_DIV, op.BPF_MOD) else 0
    if b.chance(4):
        c.emit(Instruction(cls | code_op | op.BPF_X, dst, c.scalar(), off, 0))
        return
    if code_op in (op.BPF_LSH, op.BPF_RSH, op.BPF_ARSH):
        imm = b.below(width)
    else:
        imm = b.imm32()
        if code_op in (op.BPF_DIV, op.BPF_MOD) and imm == 0:
            imm = 3
    c.emit(Instruction(cls | code_op | op.BPF_K, dst, 0, off, imm))


def _mem(c: _Builder, base: int, lo: int, hi: int, atomics: bool) -> None:
    """A load, store or atomic at ``base + off`` with ``lo <= off`` and ``off + size <= hi``."""
    b = c.b
    size = int(b.pick((1, 2, 4, 8)))
    if hi - lo < size:
        size = 1
    off = lo + b.below(max(hi - lo - size + 1, 1))
    if base == FP:
        off -= off % size  # the verifier wants aligned stack accesses
    kind = b.below(8)
    mode_size = _SIZES[size]
    if kind == 0 and size != 8:
        c.emit(Instruction(op.BPF_LDX | op.BPF_MEMSX | mode_size, c.scalar(), base, off, 0))
    elif kind <= 2:
        c.emit(Instruction(op.BPF_LDX | op.BPF_MEM | mode_size, c.scalar(), base, off, 0))
    elif kind == 3:
        c.emit(Instruction(op.BPF_ST | op.BPF_MEM | mode_size, base, 0, off, b.imm32()))
    elif kind == 7 and atomics and size in (4, 8):
        c.emit(Instruction(op.BPF_STX | op.BPF_ATOMIC | mode_size, base, c.scalar(), off,
                           b.pick(_ATOMICS)))
    else:
        c.emit(Instruction(op.BPF_STX | op.BPF_MEM | mode_size, base, c.scalar(), off, 0))


def _key(c: _Builder, at: int, size: int) -> None:
    """Write a key at r10+at: a small number (so keys collide) from a scalar or a constant."""
    b = c.b
    if b.chance(5):
        c.emit(Instruction(op.BPF_ST | op.BPF_MEM | op.BPF_W, FP, 0, at, b.below(6)))
    else:
        r = c.scalar()
        c.emit(Instruction(op.BPF_ALU64 | op.BPF_AND | op.BPF_K, r, 0, 0, 7),
               Instruction(op.BPF_STX | op.BPF_MEM | op.BPF_W, FP, r, at, 0))
    if size > 4 and b.chance(2):
        c.emit(Instruction(op.BPF_ST | op.BPF_MEM | op.BPF_B, FP, 0, at + size - 1, b.below(3)))


def _call(c: _Builder, helper: int) -> None:
    c.emit(Instruction(op.OP_CALL, 0, 0, 0, helper))


def _lookup(c: _Builder) -> None:
    b = c.b
    name = b.pick(_KEYED)
    _, ks, vs, _ = MAP_LAYOUT[name]
    _key(c, KEY_AT, ks)
    c.map_ptr(1, name)
    c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, 2, FP, 0, 0),
           Instruction(op.BPF_ALU64 | op.BPF_ADD | op.BPF_K, 2, 0, 0, KEY_AT))
    _call(c, 1)
    guarded = b.chance(6)
    skip_at = len(c.out)
    if guarded:
        c.emit(Instruction(op.BPF_JMP | op.BPF_JEQ | op.BPF_K, 0, 0, 0, 0))
    for _ in range(1 + b.below(3)):
        _mem(c, 0, 0, vs + (1 if b.chance(1, 16) else 0), True)
    if guarded:
        c.out[skip_at] = Instruction(op.BPF_JMP | op.BPF_JEQ | op.BPF_K, 0, 0,
                                     len(c.out) - skip_at - 1, 0)


def _update(c: _Builder) -> None:
    b = c.b
    name = b.pick(_KEYED)
    _, ks, vs, _ = MAP_LAYOUT[name]
    _key(c, KEY_AT, ks)
    for k in range(0, vs, 4):
        if b.chance(3):
            c.emit(Instruction(op.BPF_STX | op.BPF_MEM | op.BPF_W, FP, c.scalar(),
                               VALUE_AT + k, 0))
    c.map_ptr(1, name)
    c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, 2, FP, 0, 0),
           Instruction(op.BPF_ALU64 | op.BPF_ADD | op.BPF_K, 2, 0, 0, KEY_AT),
           Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, 3, FP, 0, 0),
           Instruction(op.BPF_ALU64 | op.BPF_ADD | op.BPF_K, 3, 0, 0,
                       VALUE_AT if b.chance(7) else BUF_AT - 32),
           Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 4, 0, 0,
                       b.pick((0, 0, 0, 1, 2, 3, 4, 5, -1))))
    _call(c, 2 if b.chance(6) else 3)  # update, sometimes delete (Python)


def _redirect(c: _Builder) -> None:
    b = c.b
    if b.chance(3):
        c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 1, 0, 0, b.below(8)),
               Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 2, 0, 0,
                           0 if b.chance(6) else b.imm32()))
        _call(c, 23)
        return
    c.map_ptr(1, b.pick(("dev", "cpu")))
    c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 2, 0, 0, b.below(6)),
           Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 3, 0, 0,
                       b.pick((0, 1, 2, 3, 8, 8 | 16, 16 | 2, 4, 1 << 20))))
    _call(c, 51)


def _pointer(c: _Builder, reg: int, room: int) -> None:
    """``reg`` = a pointer to stack, packet or global data with about ``room`` bytes."""
    b = c.b
    where = b.below(4)
    if where == 0:
        c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, reg, DATA, 0, 0),
               Instruction(op.BPF_ALU64 | op.BPF_ADD | op.BPF_K, reg, 0, 0, b.below(16)))
    elif where == 1:
        c.value_ptr(reg, "data", 4 * b.below(8))
    else:
        c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, reg, FP, 0, 0),
               Instruction(op.BPF_ALU64 | op.BPF_ADD | op.BPF_K, reg, 0, 0,
                           BUF_AT + 4 * b.below(8) if room <= 32 else BUF_AT - 256 + 8))


def _csum(c: _Builder) -> None:
    b = c.b
    sizes = (0, 4, 8, 12, 20, 32, 3, 6, 7, 41, 80, 81, 120, 160, 170, 260, 600)
    fs, ts = int(b.pick(sizes)), int(b.pick(sizes))
    _pointer(c, 1, fs)
    _pointer(c, 3, ts)
    c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 2, 0, 0, fs),
           Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 4, 0, 0, ts),
           Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, 5, c.scalar(), 0, 0))
    _call(c, 28)


def _reload_packet(c: _Builder) -> None:
    c.emit(Instruction(op.BPF_LDX | op.BPF_MEM | op.BPF_W, DATA, CTX, 0, 0),
           Instruction(op.BPF_LDX | op.BPF_MEM | op.BPF_W, END, CTX, 4, 0))


def _adjust(c: _Builder) -> None:
    b = c.b
    helper = b.pick((44, 44, 54, 65, 65))
    offs = {44: (-20, -14, -4, 14, 4, -300, 40, -60),
            54: (-4, -8, -12, -2, 4, -256, 0, -40),
            65: (-4, 4, 20, -40, 100, 4000, -8, 16)}[helper]
    c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, 1, CTX, 0, 0),
           Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 2, 0, 0,
                       b.pick(offs) if b.chance(7) else b.imm32()))
    _call(c, helper)
    _reload_packet(c)


def _bytes_helper(c: _Builder) -> None:
    b = c.b
    helper = b.pick((189, 190, 188))
    c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, 1, CTX if b.chance(7) else DATA,
                       0, 0))
    if helper != 188:
        n = int(b.pick((0, 1, 4, 8, 14, 32, 60, 70000)))
        c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 2, 0, 0, b.pick((0, 2, 14, 40,
                                                                                 0x10000))))
        _pointer(c, 3, n)
        c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 4, 0, 0, n))
    _call(c, helper)
    if helper == 190:
        _reload_packet(c)


def _globals(c: _Builder) -> None:
    b = c.b
    c.value_ptr(1, "data", 8 * b.below(6))
    for _ in range(1 + b.below(2)):
        _mem(c, 1, 0, 16, True)


def _sub_call(c: _Builder) -> None:
    """Call the subprogram with r1 = a pointer into this frame's key slots."""
    _key(c, KEY_AT, 8)
    c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, 1, FP, 0, 0),
           Instruction(op.BPF_ALU64 | op.BPF_ADD | op.BPF_K, 1, 0, 0, KEY_AT))
    c.pending_calls.append(len(c.out))
    c.emit(Instruction(op.OP_CALL, 0, op.CallSrc.BPF_PSEUDO_CALL, 0, 0))


_ITEMS: tuple[tuple[int, Callable[[_Builder], None]], ...] = (
    (6, _alu), (3, lambda c: _mem(c, FP, -WINDOW, 0, True)),
    (3, lambda c: _mem(c, DATA, 0, PKT, False)), (3, _lookup), (3, _update), (1, _redirect),
    (1, _csum), (1, _adjust), (1, _bytes_helper), (1, _globals), (1, _sub_call),
    (1, lambda c: c.emit(Instruction(op.BPF_LDX | op.BPF_MEM | op.BPF_W, c.scalar(), CTX,
                                     4 * c.b.below(5), 0))),
    (1, lambda c: _call(c, c.b.pick((5, 7, 8)))),
)
_TABLE = [fn for w, fn in _ITEMS for _ in range(w)]


def decode(data: bytes) -> FuzzCase:
    """The program (and its packets) ``data`` describes."""
    b = _Bytes(data)
    c = _Builder(b)
    c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, CTX, 1, 0, 0))
    _reload_packet(c)
    for r in SCALARS:
        if b.chance(2):
            c.emit(*ld_imm64(r, b.imm64()))
        else:
            c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, r, 0, 0, b.imm32()))
    # Usually zero the stack first; else reads of unwritten bytes must see zeros in
    # both engines (the JIT clears only what earlier runs may have dirtied).
    if b.chance(6):
        for off in range(BUF_AT, 0, 8):
            c.emit(Instruction(op.BPF_ST | op.BPF_MEM | op.BPF_DW, FP, 0, off, 0))
    exit_jumps = []
    if b.chance(6):  # the bounds check the verifier would insist on
        c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, 1, DATA, 0, 0),
               Instruction(op.BPF_ALU64 | op.BPF_ADD | op.BPF_K, 1, 0, 0, PKT))
        exit_jumps.append(len(c.out))
        c.emit(Instruction(op.BPF_JMP | op.BPF_JGT | op.BPF_X, 1, END, 0, 0))
    n = 1 + b.below(24)
    starts: list[int] = []
    jumps: list[tuple[int, int]] = []  # (instruction index, items to skip)
    for k in range(n):
        starts.append(len(c.out))
        if b.left <= 0 and k > 0:
            break
        if b.chance(1):
            code = b.pick((op.BPF_JMP, op.BPF_JMP32)) | b.pick(_CMP_OPS)
            jumps.append((len(c.out), 1 + b.below(4)))
            if b.chance(4):
                c.emit(Instruction(code | op.BPF_X, c.scalar(), c.scalar(), 0, 0))
            else:
                c.emit(Instruction(code | op.BPF_K, c.scalar(), 0, 0, b.imm32()))
            continue
        b.pick(_TABLE)(c)
    end = len(c.out)
    starts.append(end)
    for at, skip in jumps:
        k = next(i for i, s in enumerate(starts) if s > at)
        target = starts[min(k + skip - 1, len(starts) - 1)]
        i = c.out[at]
        c.out[at] = Instruction(i.code, i.dst, i.src, target - at - 1, i.imm)
    c.emit(Instruction(op.OP_EXIT))
    exit_at = len(c.out)
    c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 0, 0, 0, 2), Instruction(op.OP_EXIT))
    for at in exit_jumps:
        i = c.out[at]
        c.out[at] = Instruction(i.code, i.dst, i.src, exit_at - at - 1, i.imm)
    calls = c.pending_calls
    if calls:
        # The subprogram: a lookup keyed through the caller's stack, a read of the value.
        sub = len(c.out)
        for at in calls:
            c.out[at] = Instruction(op.OP_CALL, 0, op.CallSrc.BPF_PSEUDO_CALL, 0, sub - at - 1)
        c.emit(Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, 2, 1, 0, 0),
               Instruction(op.BPF_LDX | op.BPF_MEM | op.BPF_W, 0, 1, 0, 0),
               Instruction(op.BPF_STX | op.BPF_MEM | op.BPF_W, FP, 0, -8, 0))
        c.map_ptr(1, "lru")
        _call(c, 1)
        c.emit(Instruction(op.BPF_JMP | op.BPF_JEQ | op.BPF_K, 0, 0, 1, 0),
               Instruction(op.BPF_LDX | op.BPF_MEM | op.BPF_DW, 0, 0, 0, 0),
               Instruction(op.OP_EXIT))
    spec = ProgramSpec("fuzz", "xdp", tuple(c.out), license="GPL", map_refs=tuple(c.refs))
    packets = []
    for _ in range(1 + b.below(4)):
        kind = b.below(4)
        if kind == 0:
            size = 14 + b.below(12)
        else:
            size = 40 + b.below(100)
        payload = bytes(b.u8() for _ in range(min(size, 24))).ljust(size, b"\x5a")
        packets.append((payload, b.pick((0, 0, 0, 4, 8, 32))))
    budget = 1_000_000 if b.chance(7) else 30 + b.below(200)
    cpu = int(b.pick((0, 0, 1, 1, 5)))
    return FuzzCase(spec, packets, budget, cpu)


def program_from_seed(seed: int, size: int = 512) -> FuzzCase:
    """The program :func:`xdp_programs` draws for ``seed``."""
    case = decode(random.Random(seed).randbytes(size))
    case.seed = seed
    return case


def xdp_programs() -> st.SearchStrategy[FuzzCase]:
    """Random XDP programs (see the module docstring), one seed drawn per program."""
    return st.integers(0, 2**64 - 1).map(program_from_seed)


def make_maps() -> dict[str, Map]:
    """Fresh maps of :data:`MAP_LAYOUT` with some contents (devmap/cpumap slots set)."""
    maps = {}
    for name, (t, ks, vs, n) in MAP_LAYOUT.items():
        m = create_map(t, ks, vs, n, name=name, nr_cpus=NR_CPUS)
        if hasattr(m, "ifindex_ok"):
            m.ifindex_ok = lambda ifindex: True
        maps[name] = m
    maps["dev"].update(struct.pack("<I", 1), struct.pack("<I", 7))
    maps["dev"].update(struct.pack("<I", 3), struct.pack("<I", 9))
    maps["cpu"].update(struct.pack("<I", 1), struct.pack("<I", 64))
    maps["arr"].update(struct.pack("<I", 2), bytes(range(12)))
    maps["hash"].update(bytes(6), bytes(range(8)))
    return maps


_STATE = ("value_data", "key_data", "index", "hashes", "stamp", "elem_slot", "free", "hdr",
          "entries")


def snapshot(maps: dict[str, Map]) -> dict[tuple[str, str], Any]:
    """Every array of the maps' storage (what :func:`restore` puts back)."""
    out = {}
    for name, m in maps.items():
        for attr in _STATE:
            a = getattr(m, attr, None)
            if a is not None:
                out[(name, attr)] = a.copy()
    return out


def restore(maps: dict[str, Map], state: dict[tuple[str, str], Any]) -> None:
    for (name, attr), a in state.items():
        getattr(maps[name], attr)[...] = a
