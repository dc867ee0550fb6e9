"""Lowering validated eBPF to LLVM IR: what ``arch/*/net/bpf_jit_comp.c`` does, made safe.

The kernel's JITs translate bytecode the verifier has already proven safe.
pyxdp has no verifier, so this lowering keeps the reference interpreter's
run-time checks (:mod:`pyxdp.vm.interpreter`) and makes them native:

* the IR is written as text (llvmlite's object builder costs more Python time
  than LLVM spends at -O0); registers are SSA values with a phi per register
  at each eBPF block, each bpf-to-bpf function is an LLVM function taking and
  returning the register file, so r6-r9 survive a call the way the
  interpreter's frame stack restores them;
* every load, store and atomic is checked: a fake 64-bit address becomes a
  host pointer through the run context's region table or the access stops
  the run with a fault record. :class:`_FrameAnalysis` proves r10-relative
  accesses in bounds (no check at all); :class:`_Hints` guesses, per access,
  which table entry the address falls in (the packet for pointers derived
  from ``xdp_md->data``, a map's value region for what a lookup returned, the
  stack for pointers into other frames) and the access tests that one entry
  inline, falling back to the full scan (``translate``) when the guess misses,
  so a wrong guess costs time, never correctness. A run of three or more
  accesses through one unchanged base register in a block is versioned: one
  test of the span they cover (and of the budget) picks a copy without any
  check, else the copy with every check runs - the span is inside the region
  exactly when each access is;
* the instruction budget is exact: a block takes its length off the budget
  once, and tests how much is left only where running short could show
  (before each load, store or atomic and before its last instruction), so the
  fault pc, the memory effects and ``executed`` equal the interpreter's;
* division, modulo and shifts are guarded so no eBPF operand reaches LLVM
  undefined behaviour;
* a run starts with zeroed stack frames, as the interpreter's fresh frames:
  only the bytes the program's proven stores can dirty are cleared, unless
  an unproven store or a helper wrote the frame (``stack_dirty``), which
  clears all of it;
* helpers the runtime declares native (:class:`Natives`) are specialised at
  their call sites when the map argument is a constant: array and hash map
  lookups and updates, the XDP packet helpers, redirects (pyxdp's
  ``bpf_redirect_xsk`` included: one bit of the host's registration table),
  csum_diff, the clock. Each native path does the common case exactly as the Python helper
  would and otherwise (an unusual argument, a pointer the regions refuse, a
  full LRU map, frags) calls the Python helper, which then gives the
  reference answer - before the native path has changed anything;
* ``bpf_tail_call`` through a constant prog array enters the target's own
  XDP entry natively when the runtime has filled the slot (else the Python
  hook, as the interpreter);
* with ``natives.xdp`` a per-program batch loop (``<tag>_xdp``) sets each
  frame's xdp_buff, packet region and xdp_md values, runs the program (inlined
  into the loop) ``repeat`` times and writes the verdicts back.

The ABI shared with :mod:`pyxdp.vm.jit.runtime` (run context, region table,
batch descriptors, status codes) is defined here, next to the code that reads
it; ``runtime`` builds its ctypes structures from the same field lists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.asm.validate import Layout
from pyxdp.vm.interpreter import TAIL_CALL_ID
from pyxdp.vm.memory import STACK_BASE, STACK_FRAME_GAP, STACK_SIZE

__all__ = [
    "BATCH_FIELDS", "CTX_FIELDS", "CTX_VALUES", "MAPDESC_FIELDS", "MAX_TAIL_CALL_CNT",
    "NF_CLOCK", "NF_RUNCTX", "NF_XDP", "REGION_FIELDS", "SLOT_FIELDS", "ST_ABORT", "ST_BUDGET",
    "ST_CALLX", "ST_HELPER", "ST_OK", "ST_READ", "ST_TAIL", "ST_WRITE", "TAIL_WORDS",
    "XDP_FIELDS", "LoweredModule", "MapInfo", "Natives",
    "ProgramInput", "lower", "lower_many", "runtime_module",
]

M64 = 0xFFFF_FFFF_FFFF_FFFF
M32 = 0xFFFF_FFFF

# --- the ABI ------------------------------------------------------------------------
# Every field of the run context, the region table and the batch descriptors is one
# 64-bit word, so the native side indexes them as i64 arrays and ctypes mirrors them
# with c_uint64 fields in this order.
CTX_FIELDS = ("status", "rem", "fault_pc", "fault_addr", "fault_size", "max_depth",
              "depth", "nregions", "regions", "stack", "helpers", "nhelpers",
              "batch_index", "ctx_values", "tail_call", "tail_exit",
              # bit d: frame d may hold bytes outside the proven-store footprint
              "stack_dirty",
              # NF_* bits: what the native helpers may rely on in this run
              "nflags", "cpu", "maps",
              # the xdp_buff (offsets into the frame at x_frame, as XdpBuff keeps them)
              "x_frame", "x_frame_sz", "x_data", "x_data_end", "x_data_meta", "x_frags",
              # struct bpf_redirect_info as native redirects leave it
              "ri_present", "ri_tgt_index", "ri_map_id", "ri_map_type", "ri_flags", "ri_map",
              "ri_tv_set", "ri_tv",
              # native tail calls: 4 words per prog array slot (target run context,
              # its XDP entry, its budget, 0); tail calls made so far for this packet
              "tails", "tail_cnt",
              # bpf_redirect_xsk: per ifindex a bitmask of rx queues with a registered
              # AF_XDP socket (u64 *), and its length (0: no table, ask Python)
              "xsk_table", "xsk_ntable")
REGION_FIELDS = ("base", "size", "host", "writable")
BATCH_FIELDS = ("count", "budget", "nslots", "slots", "r1", "r2", "r0_out", "status_out",
                "pc_out", "addr_out", "ctx_values")
SLOT_FIELDS = ("region", "host", "offsets", "sizes", "stride", "size")
# The XDP batch: frame i is ``frames + i * stride`` (frame_sz bytes); u32 arrays but
# redirect_out (4 u64 per frame: map_id, map_type, tgt_index, flags) and addr_out.
XDP_FIELDS = ("count", "repeat", "budget", "frames", "stride", "frame_sz", "data_off",
              "data_len", "meta_len", "meta_ok", "frags", "rxq", "ifindex", "egress", "act_out",
              "off_out", "len_out", "meta_out", "status_out", "pc_out", "addr_out",
              "redirect_out", "done", "tail_cnt0", "rows", "consume_ri")
# A map's storage as native helpers see it (host pointers; 0 where the type has none).
MAPDESC_FIELDS = ("key_data", "value_data", "value_row", "index", "hashes", "stamp",
                  "elem_slot", "free", "hdr", "entries")
# ctx_values words per run (the interpreter's Interpreter.ctx_values).
CTX_VALUES = 8

_C = {name: i for i, name in enumerate(CTX_FIELDS)}
_R = {name: i for i, name in enumerate(REGION_FIELDS)}
_B = {name: i for i, name in enumerate(BATCH_FIELDS)}
_S = {name: i for i, name in enumerate(SLOT_FIELDS)}
_X = {name: i for i, name in enumerate(XDP_FIELDS)}
_D = {name: i for i, name in enumerate(MAPDESC_FIELDS)}

# Run status, in ctx.status (the batch's status word keeps it in its low byte).
ST_OK = 0
ST_READ = 1      # out-of-bounds read
ST_WRITE = 2     # out-of-bounds or read-only write
ST_BUDGET = 3    # instruction budget used up
ST_CALLX = 4     # callx to a value that is no helper (fault_addr = value, fault_size = reg)
ST_HELPER = 5    # a Python helper raised; the exception waits on the Python side
ST_ABORT = 6     # a Python helper was interrupted (KeyboardInterrupt): stop a batch too
ST_TAIL = 7      # a natively tail-called program faulted: fault_pc/fault_addr are its, and
                 # max_depth packs its status | its deepest frame << 8 | tail entry << 16

# nflags bits.
NF_RUNCTX = 1    # the context is a RunContext: ``cpu`` is its CPU, redirect state is native
NF_CLOCK = 2     # its clock is CLOCK_MONOTONIC (time.monotonic_ns)
NF_XDP = 4       # the x_* fields describe its xdp_buff and region 0 is the packet

# What a native helper returns when the Python helper must decide instead.
SLOW = 1 << 63
MAX_TAIL_CALL_CNT = 33  # include/linux/bpf.h
TAIL_WORDS = 4
_MAX_FRAMES = op.MAX_CALL_FRAMES
_GAP_SHIFT = STACK_FRAME_GAP.bit_length() - 1
assert 1 << _GAP_SHIFT == STACK_FRAME_GAP
MAX_REGIONS = 256

# XDP constants of net/core/filter.c (kept here so the vm layer does not import net).
_XDP_FRAME_SIZE = 40
_ETH_HLEN = 14
_SKB_SHARED_INFO = 320
_EINVAL, _EFAULT, _EACCES, _E2BIG, _ENOENT, _EEXIST, _ENOTSUPP = 22, 14, 13, 7, 2, 17, 524
_INT_MAX = 0x7FFF_FFFF
_BPF_F_BROADCAST = 1 << 3
_XSKMAP = 17  # BPF_MAP_TYPE_XSKMAP: bpf_redirect_xsk's redirect state
_FNV_OFFSET = 0xCBF2_9CE4_8422_2325
_FNV_PRIME = 0x0000_0100_0000_01B3

RET_T = "{ i64, i64, i64, i64, i64, i64 }"  # what a bpf function returns: r0..r5
_INT = {1: "i8", 2: "i16", 4: "i32", 8: "i64"}
_WIDTH = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
# Metadata: branch weights, and type-based alias tags: the run context's fields ("ctx"),
# the region table ("table"), ctx_values, ctx.stack_dirty ("dirty", so marking a frame
# does not make LLVM reload the table) and program memory ("mem": stack frames,
# packets, map values) never share bytes (no region maps the ctypes structures), so
# LLVM may keep table fields in registers across the program's stores. Type tags
# survive inlining (scoped noalias metadata would be cloned apart per inlined copy).
_LIKELY = ", !prof !1"
_UNLIKELY = ", !prof !2"
_TBL = ", !tbaa !12"
_DIRTY = ", !tbaa !16"
_PRG = ", !tbaa !14"
_TAB = ", !tbaa !18"  # region table entries
_CV = ", !tbaa !20"   # ctx_values entries
_METADATA = """
!1 = !{!"branch_weights", i32 1048576, i32 1}
!2 = !{!"branch_weights", i32 1, i32 1048576}
!10 = !{!"pyxdp.tbaa"}
!11 = !{!"pyxdp.ctx", !10, i64 0}
!12 = !{!11, !11, i64 0}
!13 = !{!"pyxdp.mem", !10, i64 0}
!14 = !{!13, !13, i64 0}
!15 = !{!"pyxdp.dirty", !10, i64 0}
!16 = !{!15, !15, i64 0}
!17 = !{!"pyxdp.table", !10, i64 0}
!18 = !{!17, !17, i64 0}
!19 = !{!"pyxdp.ctx_values", !10, i64 0}
!20 = !{!19, !19, i64 0}
"""
_DECLS = """
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare void @llvm.memmove.p0.p0.i64(ptr, ptr, i64, i1)
declare i16 @llvm.bswap.i16(i16)
declare i32 @llvm.bswap.i32(i32)
declare i64 @llvm.bswap.i64(i64)
declare i32 @clock_gettime(i32, ptr)
attributes #0 = { alwaysinline }
attributes #1 = { noinline }
"""


def c64(v: int) -> str:
    """An i64 constant; LLVM's parser wants the signed spelling of the top half."""
    v &= M64
    return str(v - (1 << 64) if v >> 63 else v)


def _cint(ty: str, v: int) -> str:
    w = _WIDTH[ty]
    v &= (1 << w) - 1
    return str(v - (1 << w) if v >> (w - 1) else v)


# --- what the runtime tells the lowering --------------------------------------------

@dataclass(frozen=True)
class MapInfo:
    """A map a program names by constant, as native helpers need it.

    ``kind`` is ``array`` (ARRAY/PERCPU_ARRAY), ``hash`` (the four hash types),
    ``entries`` (DEVMAP/CPUMAP: ``uint32[max_entries, 2]``) or ``other`` (Python
    only). ``value_base`` is CPU 0's value region, ``cpu_stride`` the distance
    to the next CPU's; ``first_region`` the region table entry of CPU 0's values
    (-1 when the run does not place them at a fixed entry). ``slot`` indexes the
    run context's map descriptor table (:data:`MAPDESC_FIELDS`).
    """

    addr: int
    slot: int
    kind: str
    map_type: int
    map_id: int
    key_size: int
    value_size: int
    max_entries: int
    elem_size: int
    nr_cpus: int
    percpu: bool
    lru: bool
    capacity: int
    key_stride: int
    value_base: int
    cpu_stride: int
    value_bytes: int
    first_region: int
    flag_mask: int = 0
    tail_base: int = -1  # prog arrays (kind "progs"): first entry in the run's tail table


@dataclass(frozen=True)
class Natives:
    """Native helpers to specialise: ``helpers`` maps helper ids to a native kind
    (``map_lookup``, ``map_update``, ``ktime``, ``smp_id``, ``redirect``,
    ``redirect_map``, ``csum_diff``, ``adjust_head``, ``adjust_meta``,
    ``adjust_tail``, ``buff_len``, ``load_bytes``, ``store_bytes``), ``maps``
    the constant maps. With ``xdp`` the packet is region 0, ``pkt_base`` is
    the fake address of ``data_hard_start`` and ``ctx_base`` the xdp_md's."""

    helpers: tuple[tuple[int, str], ...] = ()
    maps: tuple[MapInfo, ...] = ()
    xdp: bool = False
    pkt_base: int = 0
    ctx_base: int = 0
    tail_calls: bool = False  # tail calls through constant prog arrays run natively

    def kind(self, helper_id: int) -> str | None:
        for hid, kind in self.helpers:
            if hid == helper_id:
                return kind
        return None

    def map_at(self, addr: int) -> MapInfo | None:
        for m in self.maps:
            if m.addr == addr:
                return m
        return None


@dataclass(frozen=True)
class ProgramInput:
    """One program to lower; ``tag`` prefixes its exported symbols."""

    insns: tuple[Instruction, ...]
    layout: Layout
    imm64: Mapping[int, int]
    ctx_loads: Mapping[int, int]
    callbacks: tuple[int, ...]
    tag: str
    natives: Natives = field(default_factory=Natives)
    unsafe: bool = False
    emit_run: bool = True


@dataclass(frozen=True)
class LoweredModule:
    """IR text and the exported symbols: the run entry, the XDP batch entry (or None),
    the callbacks by pc."""

    ir: str
    entry: str | None
    xdp_entry: str | None
    callbacks: dict[int, str]


# --- control flow -------------------------------------------------------------------

def _second_slots(insns: Sequence[Instruction]) -> frozenset[int]:
    out = set()
    pc = 0
    while pc < len(insns):
        if insns[pc].code == op.OP_LD_IMM64:
            out.add(pc + 1)
            pc += 2
        else:
            pc += 1
    return frozenset(out)


def _is_jmp(i: Instruction) -> bool:
    return i.cls in (op.BPF_JMP, op.BPF_JMP32)


def _jump_target(i: Instruction, pc: int) -> int:
    if i.cls == op.BPF_JMP32 and op.bpf_op(i.code) == op.BPF_JA:
        return pc + 1 + i.imm
    return pc + 1 + i.off


def _is_mem(i: Instruction) -> bool:
    return i.cls in (op.BPF_LDX, op.BPF_ST, op.BPF_STX)


def _is_store(i: Instruction) -> bool:
    return i.cls in (op.BPF_ST, op.BPF_STX)


@dataclass
class _Block:
    """A straight-line run ``pcs`` (executed slots; an ld_imm64 is one) and its successors."""

    start: int
    pcs: list[int]
    succs: list[int]
    lddw_at: list[int] = field(default_factory=list)  # block indexes of ld_imm64s


def _blocks(insns: Sequence[Instruction], second: frozenset[int], entry: int, lo: int,
            hi: int) -> dict[int, _Block]:
    """The basic blocks of the function ``[lo, hi)`` reachable from ``entry``."""
    leaders = {entry}
    for pc in range(lo, hi):
        if pc in second:
            continue
        i = insns[pc]
        if not _is_jmp(i):
            continue
        code_op = op.bpf_op(i.code)
        if code_op not in (op.BPF_CALL, op.BPF_EXIT):
            leaders.add(_jump_target(i, pc))
        leaders.add(pc + 1)
    blocks: dict[int, _Block] = {}
    work = [entry]
    while work:
        start = work.pop()
        if start in blocks:
            continue
        blk = _Block(start, [], [])
        pc = start
        while True:
            i = insns[pc]
            if i.code == op.OP_LD_IMM64:
                blk.lddw_at.append(len(blk.pcs))
            blk.pcs.append(pc)
            if _is_jmp(i):
                code_op = op.bpf_op(i.code)
                if code_op == op.BPF_EXIT:
                    break
                if code_op == op.BPF_CALL:
                    blk.succs = [pc + 1]  # calls end blocks: the callee spends budget
                    break
                if code_op == op.BPF_JA:
                    blk.succs = [_jump_target(i, pc)]
                    break
                blk.succs = [_jump_target(i, pc), pc + 1]
                break
            nxt = pc + (2 if i.code == op.OP_LD_IMM64 else 1)
            if nxt in leaders:
                blk.succs = [nxt]
                break
            pc = nxt
        blocks[start] = blk
        work.extend(blk.succs)
    return blocks


# --- the range analysis ----------------------------------------------------------------

# An abstract register: ("fp", k) is exactly r10 + k, ("c", v) the constant v, None unknown.
_Abs = tuple[str, int] | None


class _FrameAnalysis:
    """Which loads and stores provably hit the current stack frame.

    A forward data-flow over one function's blocks tracking registers that hold
    ``r10 + k`` or a constant (mov, add/sub of constants, ld_imm64); unknown
    wins at merges, so loops converge after one extra pass. An access through
    ``r10 + k`` with ``-512 <= k + off`` and ``k + off + size <= 0`` lies in the
    frame the function owns and needs no region lookup. ``call_args`` keeps
    r1-r5 at each helper call (a key on the stack is read without a lookup).
    """

    def __init__(self, insns: Sequence[Instruction], blocks: Mapping[int, _Block],
                 entry: int, imm64: Mapping[int, int]) -> None:
        self.insns = insns
        self.imm64 = imm64
        self.frame_offset: dict[int, int] = {}  # pc -> offset below the frame top
        self.call_args: dict[int, tuple[_Abs, ...]] = {}
        start: list[_Abs] = [None] * 10 + [("fp", 0)]
        states: dict[int, list[_Abs]] = {entry: start}
        work = [entry]
        while work:
            b = work.pop()
            state = list(states[b])
            for pc in blocks[b].pcs:
                self._step(pc, state)
            for s in blocks[b].succs:
                old = states.get(s)
                new = state if old is None else [x if x == y else None
                                                 for x, y in zip(old, state, strict=True)]
                if old is None or new != old:
                    states[s] = list(new)
                    work.append(s)
        # Decide elisions with the converged entry states.
        for b, blk in blocks.items():
            state = list(states[b])
            for pc in blk.pcs:
                self._decide(pc, state)
                self._step(pc, state)

    def _decide(self, pc: int, state: list[_Abs]) -> None:
        i = self.insns[pc]
        if i.code == op.OP_CALL:
            self.call_args[pc] = tuple(state[:6])
            return
        if not _is_mem(i):
            return
        base = i.src if i.cls == op.BPF_LDX else i.dst
        v = state[base]
        if v is None or v[0] != "fp":
            return
        size = op.SIZE_BYTES[op.bpf_size(i.code)]
        at = v[1] + i.off
        if -STACK_SIZE <= at and at + size <= 0:
            self.frame_offset[pc] = at

    def _step(self, pc: int, st: list[_Abs]) -> None:
        i = self.insns[pc]
        cls = i.cls
        if cls == op.BPF_LD:
            st[i.dst] = ("c", self.imm64[pc])
        elif cls == op.BPF_ALU64:
            st[i.dst] = self._alu64(i, st)
        elif cls == op.BPF_ALU:
            st[i.dst] = None
        elif cls == op.BPF_LDX:
            st[i.dst] = None
        elif cls == op.BPF_STX and op.bpf_mode(i.code) == op.BPF_ATOMIC:
            if i.imm == op.BPF_CMPXCHG:
                st[0] = None
            elif i.imm & op.BPF_FETCH:
                st[i.src] = None
        elif _is_jmp(i) and op.bpf_op(i.code) == op.BPF_CALL:
            for r in range(6):
                st[r] = None

    @staticmethod
    def _alu64(i: Instruction, st: list[_Abs]) -> _Abs:
        code_op = op.bpf_op(i.code)
        a = st[i.dst]
        if op.bpf_src(i.code) == op.BPF_K:
            b: _Abs = ("c", i.imm & M64)
        else:
            b = st[i.src]
        if code_op == op.BPF_MOV and not i.off:
            return b
        if a is None or b is None or code_op not in (op.BPF_ADD, op.BPF_SUB):
            return None
        sign = 1 if code_op == op.BPF_ADD else -1
        bv = b[1] if b[1] < (1 << 63) else b[1] - (1 << 64)  # constants are signed here
        if a[0] == "fp" and b[0] == "c":
            return ("fp", a[1] + sign * bv)
        if a[0] == "c" and b[0] == "c":
            return ("c", (a[1] + sign * b[1]) & M64)
        if a[0] == "c" and b[0] == "fp" and sign == 1:
            av = a[1] if a[1] < (1 << 63) else a[1] - (1 << 64)
            return ("fp", av + b[1])
        return None


# --- where an access probably lands --------------------------------------------------

# Abstract values of the hint analysis: ("c", v), ("fp", k) (own frame), ("stk", 0)
# (some stack frame), ("pkt", 0), ("mv", map address), or None.
_Hv = tuple[str, int] | None
_PTR_KINDS = ("fp", "stk", "pkt", "mv")
# A hint: (kind, value, confident). kind "region": table entry value; "cpu": entry
# value + the run's CPU; "stk": a stack frame.
Hint = tuple[str, int, bool]


class _Hints:
    """Which region table entry each load, store and map-key pointer probably uses.

    An unsound, interprocedural forward analysis (pointers spilled to 8-byte
    stack slots are followed; bpf-to-bpf call arguments flow into callees):
    ``xdp_md`` data pointers mean the packet, a constant-map lookup's result
    that map's values, a constant address the region holding it. Nothing
    depends on the answer but speed: every access still checks the entry it
    tries and falls back to the full lookup.
    """

    def __init__(self, insns: Sequence[Instruction], funcs: Mapping[int, Mapping[int, _Block]],
                 imm64: Mapping[int, int], ctx_loads: Mapping[int, int], natives: Natives) -> None:
        self.insns = insns
        self.imm64 = imm64
        self.ctx_loads = ctx_loads
        self.natives = natives
        self.base: dict[int, _Hv] = {}
        entry_args: dict[int, list[_Hv]] = {e: [None] * 5 for e in funcs}
        done: dict[int, list[_Hv]] = {}
        work = sorted(funcs)
        rounds = 0
        while work and rounds < 4 * len(funcs) + 8:
            rounds += 1
            fentry = work.pop(0)
            args = entry_args[fentry]
            if done.get(fentry) == args:
                continue
            done[fentry] = list(args)
            for callee, cargs in self._function(funcs[fentry], fentry, args).items():
                old = entry_args.get(callee)
                if old is None:
                    continue
                new = [x if x == y else None for x, y in zip(old, cargs, strict=True)] \
                    if callee in done else cargs
                if new != old or callee not in done:
                    entry_args[callee] = new
                    if callee not in work:
                        work.append(callee)

    def _function(self, blocks: Mapping[int, _Block], entry: int, args: list[_Hv]
                  ) -> dict[int, list[_Hv]]:
        start: tuple[list[_Hv], dict[int, _Hv]] = (
            [None, *args, None, None, None, None, ("fp", 0)], {})
        states: dict[int, tuple[list[_Hv], dict[int, _Hv]]] = {entry: start}
        calls: dict[int, list[_Hv]] = {}
        work = [entry]
        visits = 0
        while work and visits < 50 * len(blocks) + 50:
            visits += 1
            b = work.pop()
            regs, slots = list(states[b][0]), dict(states[b][1])
            for pc in blocks[b].pcs:
                self._step(pc, regs, slots, calls)
            for s in blocks[b].succs:
                old = states.get(s)
                if old is None:
                    states[s] = (list(regs), dict(slots))
                    work.append(s)
                    continue
                nregs = [x if x == y else None for x, y in zip(old[0], regs, strict=True)]
                nslots = {k: v for k, v in old[1].items() if slots.get(k) == v}
                if nregs != old[0] or nslots != old[1]:
                    states[s] = (nregs, nslots)
                    work.append(s)
        return calls

    def _step(self, pc: int, regs: list[_Hv], slots: dict[int, _Hv],
              calls: dict[int, list[_Hv]]) -> None:
        i = self.insns[pc]
        cls = i.cls
        if cls == op.BPF_LD:
            regs[i.dst] = ("c", self.imm64[pc])
        elif cls == op.BPF_ALU64:
            regs[i.dst] = self._alu64(i, regs)
        elif cls == op.BPF_ALU:
            regs[i.dst] = None
        elif cls == op.BPF_LDX:
            self.base[pc] = regs[i.src]
            field_ = self.ctx_loads.get(pc)
            if field_ is not None:
                regs[i.dst] = ("pkt", 0) if field_ in (0, 1, 2) else None
            else:
                b = regs[i.src]
                regs[i.dst] = (slots.get(b[1] + i.off) if b is not None and b[0] == "fp"
                               and op.bpf_size(i.code) == op.BPF_DW else None)
        elif cls in (op.BPF_ST, op.BPF_STX):
            b = regs[i.dst]
            self.base[pc] = b
            size = op.SIZE_BYTES[op.bpf_size(i.code)]
            if b is not None and b[0] == "fp":
                at = b[1] + i.off
                for k in [k for k in slots if k < at + size and at < k + 8]:
                    del slots[k]
                if (cls == op.BPF_STX and op.bpf_mode(i.code) == op.BPF_MEM and size == 8
                        and regs[i.src] is not None):
                    slots[at] = regs[i.src]
            elif b is None or b[0] == "stk":
                slots.clear()
            if cls == op.BPF_STX and op.bpf_mode(i.code) == op.BPF_ATOMIC:
                if i.imm == op.BPF_CMPXCHG:
                    regs[0] = None
                elif i.imm & op.BPF_FETCH:
                    regs[i.src] = None
        elif _is_jmp(i) and op.bpf_op(i.code) == op.BPF_CALL:
            self.base[pc] = regs[2]
            r0: _Hv = None
            if i.src == op.CallSrc.BPF_PSEUDO_CALL and op.bpf_src(i.code) == op.BPF_K:
                args = [("stk", 0) if a is not None and a[0] == "fp" else a
                        for a in regs[1:6]]
                target = pc + 1 + i.imm
                old = calls.get(target)
                calls[target] = args if old is None else [
                    x if x == y else None for x, y in zip(old, args, strict=True)]
            elif op.bpf_src(i.code) == op.BPF_K and self.natives.kind(i.imm) == "map_lookup":
                r1 = regs[1]
                if r1 is not None and r1[0] == "c":
                    m = self.natives.map_at(r1[1])
                    if m is not None and m.kind in ("array", "hash"):
                        r0 = ("mv", m.addr)
            for r in range(6):
                regs[r] = None
            regs[0] = r0

    @staticmethod
    def _alu64(i: Instruction, regs: list[_Hv]) -> _Hv:
        code_op = op.bpf_op(i.code)
        a = regs[i.dst]
        b: _Hv = ("c", i.imm & M64) if op.bpf_src(i.code) == op.BPF_K else regs[i.src]
        if code_op == op.BPF_MOV:
            return b if not i.off else None
        if code_op not in (op.BPF_ADD, op.BPF_SUB) or a is None or b is None:
            return None
        if a[0] == "c" and b[0] == "c":
            return ("c", (a[1] + b[1] if code_op == op.BPF_ADD else a[1] - b[1]) & M64)
        if a[0] == "fp" and b[0] == "c":
            bv = b[1] - (1 << 64) if b[1] >> 63 else b[1]
            return ("fp", a[1] + bv if code_op == op.BPF_ADD else a[1] - bv)
        if a[0] in _PTR_KINDS:
            return ("stk", 0) if a[0] == "fp" else a
        if code_op == op.BPF_ADD and b[0] in _PTR_KINDS:
            return ("stk", 0) if b[0] == "fp" else b
        return None

    def hint(self, v: _Hv) -> Hint:
        """Where an access through a register holding ``v`` should look first."""
        nat = self.natives
        if v is None:
            return ("region", 0, False)
        kind, x = v
        if kind in ("fp", "stk"):
            return ("stk", 0, True)
        if kind == "pkt":
            return ("region", 0, nat.xdp)
        if kind == "mv":
            m = nat.map_at(x)
            if m is None or m.first_region < 0:
                return ("region", 0, False)
            return ("cpu", m.first_region, True) if m.percpu else \
                ("region", m.first_region, True)
        # A constant address: the stack, or the map region that holds it.
        if STACK_BASE <= x < STACK_BASE + _MAX_FRAMES * STACK_FRAME_GAP:
            return ("stk", 0, True)
        for m in nat.maps:
            if m.first_region < 0 or not m.value_bytes:
                continue
            rel = x - m.value_base
            if not m.percpu or not m.cpu_stride:
                if 0 <= rel < m.value_bytes:
                    return ("region", m.first_region, True)
                continue
            if 0 <= rel < m.nr_cpus * m.cpu_stride:
                cpu, within = divmod(rel, m.cpu_stride)
                if within < m.value_bytes:
                    return ("region", m.first_region + cpu, True)
        return ("region", 0, False)


# --- text IR ------------------------------------------------------------------------

class _Text:
    """One function's body as LLVM IR text: fresh SSA names, labels, instructions."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0
        self.cur = "entry"

    def tmp(self) -> str:
        self.n += 1
        return f"%t{self.n}"

    def label(self, hint: str) -> str:
        self.n += 1
        return f"{hint}.{self.n}"

    def at(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.cur = label

    def ins(self, text: str) -> str:
        v = self.tmp()
        self.lines.append(f"  {v} = {text}")
        return v

    def do(self, text: str) -> None:
        self.lines.append(f"  {text}")

    # -- small helpers ------------------------------------------------------------
    def gep(self, base: str, off: str | int) -> str:
        if off == 0 or off == "0":
            return base
        return self.ins(f"getelementptr i8, ptr {base}, i64 {off}")

    def word(self, base: str, index: int, ty: str = "i64", md: str = _TBL) -> str:
        return self.ins(f"load {ty}, ptr {self.gep(base, 8 * index)}, align 8{md}")

    def set_word(self, base: str, index: int, v: str, ty: str = "i64", md: str = _TBL) -> None:
        self.do(f"store {ty} {v}, ptr {self.gep(base, 8 * index)}, align 8{md}")

    def cget(self, ctx: str, name: str, ty: str = "i64") -> str:
        return self.word(ctx, _C[name], ty, _DIRTY if name == "stack_dirty" else _TBL)

    def cset(self, ctx: str, name: str, v: str, ty: str = "i64") -> None:
        self.set_word(ctx, _C[name], v, ty, _DIRTY if name == "stack_dirty" else _TBL)

    def at_index(self, base: str, index: str, ty: str, scale: int, md: str = "") -> str:
        off = self.ins(f"mul i64 {index}, {scale}")
        return self.ins(f"load {ty}, ptr {self.gep(base, off)}, align 1{md}")

    def put_index(self, base: str, index: str, v: str, ty: str, scale: int,
                  md: str = "") -> None:
        off = self.ins(f"mul i64 {index}, {scale}")
        self.do(f"store {ty} {v}, ptr {self.gep(base, off)}, align 1{md}")

    def br(self, label: str) -> None:
        self.do(f"br label %{label}")

    def cbr(self, cond: str, yes: str, no: str, prof: str = "") -> None:
        self.do(f"br i1 {cond}, label %{yes}, label %{no}{prof}")

    # Both only ever touch program memory (stack frames, packets, map storage).
    def memset(self, p: str, n: str | int) -> None:
        self.do(f"call void @llvm.memset.p0.i64(ptr {p}, i8 0, i64 {n}, i1 false){_PRG}")

    def memmove(self, dst: str, src: str, n: str | int) -> None:
        self.do(f"call void @llvm.memmove.p0.p0.i64(ptr {dst}, ptr {src}, i64 {n}, i1 false)"
                f"{_PRG}")

    def flag(self, bit: int) -> str:
        """i1: ``ctx.nflags & bit``."""
        v = self.cget("%ctx", "nflags")
        return self.ins(f"icmp ne i64 {self.ins(f'and i64 {v}, {bit}')}, 0")

    def text(self, header: str) -> str:
        return header + " {\n" + "\n".join(self.lines) + "\n}\n"


# --- module-level shared functions ----------------------------------------------------

def _translate_fn() -> str:
    """``translate(ctx, addr, size, write) -> host pointer or null``.

    The user regions in table order, then the stack frames created so far:
    the same order :meth:`pyxdp.vm.memory.Memory.find` scans them in. A
    write to a read-only region is null too; Python tells the two apart.
    It only reads memory: callers that write mark the stack dirty themselves.
    """
    f = _Text()
    f.at("entry")
    n = f.cget("%ctx", "nregions")
    tab = f.cget("%ctx", "regions", "ptr")
    f.br("head")
    f.at("head")
    f.do("%i = phi i64 [ 0, %entry ], [ %i1, %next ]")
    f.cbr(f.ins(f"icmp ult i64 %i, {n}"), "body", "stack")
    f.at("body")
    ent = f.gep(tab, f.ins("shl i64 %i, 5"))
    base = f.word(ent, _R["base"], "i64", _TAB)
    rsize = f.word(ent, _R["size"], "i64", _TAB)
    off = f.ins(f"sub i64 %addr, {base}")
    c1 = f.ins(f"icmp uge i64 %addr, {base}")
    c2 = f.ins(f"icmp ule i64 {off}, {rsize}")
    c3 = f.ins(f"icmp ule i64 %size, {f.ins(f'sub i64 {rsize}, {off}')}")
    f.cbr(f.ins(f"and i1 {c1}, {f.ins(f'and i1 {c2}, {c3}')}"), "found", "next")
    f.at("found")
    writable = f.word(ent, _R["writable"], "i64", _TAB)
    ro = f.ins(f"icmp eq i64 {writable}, 0")
    f.cbr(f.ins(f"and i1 %write, {ro}"), "null", "ok")
    f.at("ok")
    host = f.word(ent, _R["host"], "ptr", _TAB)
    f.do(f"ret ptr {f.gep(host, off)}")
    f.at("next")
    f.do("%i1 = add i64 %i, 1")
    f.br("head")
    # Stack frames: STACK_BASE + d * STACK_FRAME_GAP, for d up to the deepest so far.
    f.at("stack")
    soff = f.ins(f"sub i64 %addr, {c64(STACK_BASE)}")
    depth = f.ins(f"lshr i64 {soff}, {_GAP_SHIFT}")
    within = f.ins(f"and i64 {soff}, {STACK_FRAME_GAP - 1}")
    ok1 = f.ins(f"icmp ult i64 {soff}, {_MAX_FRAMES * STACK_FRAME_GAP}")
    ok2 = f.ins(f"icmp ule i64 {depth}, {f.cget('%ctx', 'max_depth')}")
    ok3 = f.ins(f"icmp ule i64 {f.ins(f'add i64 {within}, %size')}, {STACK_SIZE}")
    f.cbr(f.ins(f"and i1 {ok1}, {f.ins(f'and i1 {ok2}, {ok3}')}"), "sret", "null")
    f.at("sret")
    area = f.cget("%ctx", "stack", "ptr")
    fbase = f.ins(f"shl i64 {depth}, 9")
    f.do(f"ret ptr {f.gep(area, f.ins(f'add i64 {fbase}, {within}'))}")
    f.at("null")
    f.do("ret ptr null")
    return f.text("define internal ptr @translate(ptr %ctx, i64 %addr, i64 %size, i1 %write) "
                  "noinline nounwind memory(read)")


def _fault_fn() -> str:
    """``fault(ctx, status, pc, addr, size, rem)``: the fault record, out of line."""
    f = _Text()
    f.at("entry")
    for name, v in (("status", "%status"), ("fault_pc", "%pc"), ("fault_addr", "%addr"),
                    ("fault_size", "%size"), ("rem", "%rem")):
        f.cset("%ctx", name, v)
    f.do("ret void")
    return f.text("define internal void @fault(ptr %ctx, i64 %status, i64 %pc, i64 %addr, "
                  "i64 %size, i64 %rem) noinline cold nounwind")


def _atomic_fn(kind: str, size: int) -> str:
    """``old = atomic_<kind>(ptr, value)``; unaligned pointers take a plain path.

    LLVM lowers an under-aligned atomicrmw to a libatomic call the JIT
    cannot link, and the interpreter does not fault on misalignment, so
    misaligned atomics are emulated (one program runs on one thread).
    """
    ty = _INT[size]
    cmpx = kind == "cmpxchg"
    f = _Text()
    f.at("entry")
    pint = f.ins("ptrtoint ptr %p to i64")
    aligned = f.ins(f"icmp eq i64 {f.ins(f'and i64 {pint}, {size - 1}')}, 0")
    f.cbr(aligned, "fast", "slow")
    f.at("fast")
    if cmpx:
        pair = f.ins(f"cmpxchg ptr %p, {ty} %v, {ty} %n seq_cst seq_cst, align {size}{_PRG}")
        f.do(f"ret {ty} {f.ins(f'extractvalue {{ {ty}, i1 }} {pair}, 0')}")
    else:
        f.do(f"ret {ty} {f.ins(f'atomicrmw {kind} ptr %p, {ty} %v seq_cst, align {size}{_PRG}')}")
    f.at("slow")
    old = f.ins(f"load {ty}, ptr %p, align 1{_PRG}")
    if cmpx:
        new = f.ins(f"select i1 {f.ins(f'icmp eq {ty} {old}, %v')}, {ty} %n, {ty} {old}")
    elif kind == "xchg":
        new = "%v"
    else:
        new = f.ins(f"{kind} {ty} {old}, %v")
    f.do(f"store {ty} {new}, ptr %p, align 1{_PRG}")
    f.do(f"ret {ty} {old}")
    args = f"ptr %p, {ty} %v" + (f", {ty} %n" if cmpx else "")
    return f.text(f"define internal {ty} @atomic_{kind}{size * 8}({args}) nounwind")


def _pkt_fn(pkt_base: int) -> str:
    """``pkt(ctx)``: region 0 and ctx_values[0..2] from the x_* fields (XdpBuff.sync_region
    and the xdp_md pointers)."""
    f = _Text()
    f.at("entry")
    data, end, meta = (f.cget("%ctx", n) for n in ("x_data", "x_data_end", "x_data_meta"))
    frame = f.cget("%ctx", "x_frame", "ptr")
    start = f.ins(f"select i1 {f.ins(f'icmp ule i64 {meta}, {data}')}, i64 {meta}, i64 {data}")
    tab = f.cget("%ctx", "regions", "ptr")
    f.set_word(tab, _R["base"], f.ins(f"add i64 {start}, {c64(pkt_base)}"), "i64", _TAB)
    f.set_word(tab, _R["size"], f.ins(f"sub i64 {end}, {start}"), "i64", _TAB)
    f.set_word(tab, _R["host"], f.gep(frame, start), "ptr", _TAB)
    f.set_word(tab, _R["writable"], "1", "i64", _TAB)
    cv = f.cget("%ctx", "ctx_values", "ptr")
    for n, v in enumerate((data, end, meta)):
        f.set_word(cv, n, f.ins(f"add i64 {v}, {c64(pkt_base)}"), "i64", _CV)
    f.do("ret void")
    return f.text("define internal void @pkt(ptr %ctx) nounwind")


def _xdp_guard(f: _Text, ctx_base: int, frags_slow: bool) -> None:
    """Continue only for the run's own xdp_md (``_xdp`` of pyxdp.net.filter); else SLOW."""
    ok = f.flag(NF_XDP)
    ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp eq i64 %r1, {c64(ctx_base)}')}")
    if frags_slow:
        frags = f.cget("%ctx", "x_frags")
        ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp eq i64 {frags}, 0')}")
    f.cbr(ok, "go", "slow", _LIKELY)
    f.at("slow")
    f.do(f"ret i64 {c64(SLOW)}")
    f.at("go")


def _s32(f: _Text, v: str) -> str:
    return f.ins(f"sext i32 {f.ins(f'trunc i64 {v} to i32')} to i64")


def _ret_if(f: _Text, cond: str, value: int) -> None:
    nxt = f.label("n")
    out = f.label("e")
    f.cbr(cond, out, nxt)
    f.at(out)
    f.do(f"ret i64 {c64(value)}")
    f.at(nxt)


def _adjust_head_fn(ctx_base: int) -> str:
    """``bpf_xdp_adjust_head`` (XdpBuff.adjust_head), SLOW outside a native XDP run."""
    f = _Text()
    f.at("entry")
    _xdp_guard(f, ctx_base, False)
    off = _s32(f, "%r2")
    data, end, meta = (f.cget("%ctx", n) for n in ("x_data", "x_data_end", "x_data_meta"))
    sup = f.ins(f"icmp ule i64 {meta}, {data}")
    metalen = f.ins(f"select i1 {sup}, i64 {f.ins(f'sub i64 {data}, {meta}')}, i64 0")
    new = f.ins(f"add i64 {data}, {off}")
    low = f.ins(f"icmp slt i64 {new}, {f.ins(f'add i64 {metalen}, {_XDP_FRAME_SIZE}')}")
    high = f.ins(f"icmp sgt i64 {new}, {f.ins(f'sub i64 {end}, {_ETH_HLEN}')}")
    _ret_if(f, f.ins(f"or i1 {low}, {high}"), -_EINVAL)
    frame = f.cget("%ctx", "x_frame", "ptr")
    newmeta = f.ins(f"add i64 {meta}, {off}")
    f.memmove(f.gep(frame, newmeta), f.gep(frame, meta), metalen)
    f.cset("%ctx", "x_data_meta", newmeta)
    f.cset("%ctx", "x_data", new)
    f.do("call void @pkt(ptr %ctx)")
    f.do("ret i64 0")
    return f.text("define internal i64 @adjust_head(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def _adjust_meta_fn(ctx_base: int) -> str:
    """``bpf_xdp_adjust_meta`` (XdpBuff.adjust_meta)."""
    f = _Text()
    f.at("entry")
    _xdp_guard(f, ctx_base, False)
    data, meta = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_meta")
    _ret_if(f, f.ins(f"icmp ugt i64 {meta}, {data}"), -_ENOTSUPP)
    m = f.ins(f"add i64 {meta}, {_s32(f, '%r2')}")
    low = f.ins(f"icmp slt i64 {m}, {_XDP_FRAME_SIZE}")
    _ret_if(f, f.ins(f"or i1 {low}, {f.ins(f'icmp sgt i64 {m}, {data}')}"), -_EINVAL)
    mlen = f.ins(f"sub i64 {data}, {m}")
    odd = f.ins(f"icmp ne i64 {f.ins(f'and i64 {mlen}, 3')}, 0")
    _ret_if(f, f.ins(f"or i1 {odd}, {f.ins(f'icmp sgt i64 {mlen}, 255')}"), -_EACCES)
    f.cset("%ctx", "x_data_meta", m)
    f.do("call void @pkt(ptr %ctx)")
    f.do("ret i64 0")
    return f.text("define internal i64 @adjust_meta(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def _adjust_tail_fn(ctx_base: int) -> str:
    """``bpf_xdp_adjust_tail`` without frags (XdpBuff.adjust_tail)."""
    f = _Text()
    f.at("entry")
    _xdp_guard(f, ctx_base, True)
    off = _s32(f, "%r2")
    data, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
    new = f.ins(f"add i64 {end}, {off}")
    hard = f.ins(f"sub i64 {f.cget('%ctx', 'x_frame_sz')}, {_SKB_SHARED_INFO}")
    high = f.ins(f"icmp sgt i64 {new}, {hard}")
    low = f.ins(f"icmp slt i64 {new}, {f.ins(f'add i64 {data}, {_ETH_HLEN}')}")
    _ret_if(f, f.ins(f"or i1 {high}, {low}"), -_EINVAL)
    grow, done = f.label("grow"), f.label("done")
    f.cbr(f.ins(f"icmp sgt i64 {off}, 0"), grow, done)
    f.at(grow)
    f.memset(f.gep(f.cget("%ctx", "x_frame", "ptr"), end), off)
    f.br(done)
    f.at(done)
    f.cset("%ctx", "x_data_end", new)
    f.do("call void @pkt(ptr %ctx)")
    f.do("ret i64 0")
    return f.text("define internal i64 @adjust_tail(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def _buff_len_fn(ctx_base: int) -> str:
    f = _Text()
    f.at("entry")
    _xdp_guard(f, ctx_base, True)
    end, data = f.cget("%ctx", "x_data_end"), f.cget("%ctx", "x_data")
    f.do(f"ret i64 {f.ins(f'sub i64 {end}, {data}')}")
    return f.text("define internal i64 @buff_len(ptr %ctx, i64 %r1) nounwind")


def _load_bytes_fn(ctx_base: int) -> str:
    """``bpf_xdp_load_bytes`` from the linear part (XdpBuff.load_bytes + vm.mem.write)."""
    f = _Text()
    f.at("entry")
    _xdp_guard(f, ctx_base, True)
    off = f.ins("and i64 %r2, 4294967295")
    n = f.ins("and i64 %r4, 4294967295")
    big = f.ins(f"or i1 {f.ins(f'icmp ugt i64 {off}, 65535')}, {f.ins(f'icmp ugt i64 {n}, 65535')}")
    _ret_if(f, big, -_EFAULT)
    data, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
    over = f.ins(f"icmp ugt i64 {f.ins(f'add i64 {off}, {n}')}, {f.ins(f'sub i64 {end}, {data}')}")
    _ret_if(f, over, -_EINVAL)
    _ret_if(f, f.ins(f"icmp eq i64 {n}, 0"), 0)
    dst = f.ins(f"call ptr @translate(ptr %ctx, i64 %r3, i64 {n}, i1 true)")
    _ret_if(f, f.ins(f"icmp eq ptr {dst}, null"), SLOW)
    f.cset("%ctx", "stack_dirty", "-1")  # the bytes may land in a stack frame
    src = f.gep(f.cget("%ctx", "x_frame", "ptr"), f.ins(f"add i64 {data}, {off}"))
    f.memmove(dst, src, n)
    f.do("ret i64 0")
    return f.text("define internal i64 @load_bytes(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                  "i64 %r4) nounwind")


def _store_bytes_fn(ctx_base: int) -> str:
    """``bpf_xdp_store_bytes`` into the linear part (vm.mem.read + XdpBuff.store_bytes)."""
    f = _Text()
    f.at("entry")
    _xdp_guard(f, ctx_base, True)
    off = f.ins("and i64 %r2, 4294967295")
    n = f.ins("and i64 %r4, 4294967295")
    big = f.ins(f"or i1 {f.ins(f'icmp ugt i64 {n}, 65535')}, {f.ins(f'icmp ugt i64 {off}, 65535')}")
    _ret_if(f, big, -_EFAULT)
    read, have = f.label("read"), f.label("have")
    nz = f.ins(f"icmp ne i64 {n}, 0")
    before = f.cur
    f.cbr(nz, read, have)
    f.at(read)
    src0 = f.ins(f"call ptr @translate(ptr %ctx, i64 %r3, i64 {n}, i1 false)")
    _ret_if(f, f.ins(f"icmp eq ptr {src0}, null"), SLOW)
    last = f.cur
    f.br(have)
    f.at(have)
    src = f.ins(f"phi ptr [ null, %{before} ], [ {src0}, %{last} ]")
    data, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
    over = f.ins(f"icmp ugt i64 {f.ins(f'add i64 {off}, {n}')}, {f.ins(f'sub i64 {end}, {data}')}")
    _ret_if(f, over, -_EINVAL)
    dst = f.gep(f.cget("%ctx", "x_frame", "ptr"), f.ins(f"add i64 {data}, {off}"))
    f.memmove(dst, src, n)
    f.do("ret i64 0")
    return f.text("define internal i64 @store_bytes(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                  "i64 %r4) nounwind")


def _adc(f: _Text, res: str, p: str, nwords: int) -> str:
    """``addq w0; adcq w1; ...; adcq $0`` over ``nwords`` little-endian words at ``p``: the
    sum with carries, the last carry-out dropped (filter._adc_chain)."""
    carry = "0"
    for k in range(nwords):
        w = f.ins(f"load i64, ptr {f.gep(p, 8 * k)}, align 1{_PRG}")
        res, carry = _adc_step(f, res, w, carry)
    return f.ins(f"add i64 {res}, {carry}")


def _adc_step(f: _Text, res: str, w: str, carry: str) -> tuple[str, str]:
    wide = f.ins(f"add i128 {f.ins(f'zext i64 {res} to i128')}, {f.ins(f'zext i64 {w} to i128')}")
    wide = f.ins(f"add i128 {wide}, {f.ins(f'zext i64 {carry} to i128')}")
    return (f.ins(f"trunc i128 {wide} to i64"),
            f.ins(f"trunc i128 {f.ins(f'lshr i128 {wide}, 64')} to i64"))


def _csum_partial_fn() -> str:
    """x86-64 ``csum_partial`` exactly as filter._csum_partial models it: add-with-carry
    chains over 80-byte steps (two interleaved), a 40-byte block, 32/16/8-byte chunks and
    a zero-padded tail (read byte by byte: nothing past the buffer is touched)."""
    f = _Text()
    f.at("entry")
    t0 = f.ins("and i64 %seed, 4294967295")
    f.cbr(f.ins("icmp uge i64 %n, 80"), "l80", "a80")
    f.at("l80")
    f.do("%tmp = phi i64 [ " + t0 + ", %entry ], [ %tmpn, %l80 ]")
    f.do("%tmp2 = phi i64 [ 0, %entry ], [ %tmp2n, %l80 ]")
    f.do("%off = phi i64 [ 0, %entry ], [ %offn, %l80 ]")
    f.do("%left = phi i64 [ %n, %entry ], [ %leftn, %l80 ]")
    at = f.gep("%p", "%off")
    f.do(f"%tmpn = add i64 {_adc(f, '%tmp', at, 5)}, 0")
    f.do(f"%tmp2n = add i64 {_adc(f, '%tmp2', f.gep(at, 40), 5)}, 0")
    f.do("%offn = add i64 %off, 80")
    f.do("%leftn = sub i64 %left, 80")
    f.cbr(f.ins("icmp uge i64 %leftn, 80"), "l80", "f80")
    f.at("f80")
    r, c = _adc_step(f, "%tmpn", "%tmp2n", "0")
    f.do(f"%tmpf = add i64 {r}, {c}")
    f.br("a80")
    f.at("a80")
    f.do("%ta = phi i64 [ " + t0 + ", %entry ], [ %tmpf, %f80 ]")
    f.do("%oa = phi i64 [ 0, %entry ], [ %offn, %f80 ]")
    f.do("%la = phi i64 [ %n, %entry ], [ %leftn, %f80 ]")
    f.cbr(f.ins("icmp uge i64 %la, 40"), "d40", "ch")
    f.at("d40")
    f.do(f"%tb = add i64 {_adc(f, '%ta', f.gep('%p', '%oa'), 5)}, 0")
    f.do("%ob = add i64 %oa, 40")
    f.do("%lb = sub i64 %la, 40")
    f.cbr(f.ins("icmp eq i64 %lb, 0"), "fin40", "ch")
    f.at("fin40")
    f.do(f"ret i64 {_finalize(f, '%tb')}")
    f.at("ch")
    temp = f.ins("phi i64 [ %ta, %a80 ], [ %tb, %d40 ]")
    off = f.ins("phi i64 [ %oa, %a80 ], [ %ob, %d40 ]")
    left = f.ins("phi i64 [ %la, %a80 ], [ %lb, %d40 ]")
    for chunk in (32, 16, 8):
        yes, join = f"c{chunk}", f"j{chunk}"
        before = f.cur
        f.cbr(f.ins(f"icmp ne i64 {f.ins(f'and i64 {left}, {chunk}')}, 0"), yes, join)
        f.at(yes)
        t1 = _adc(f, temp, f.gep("%p", off), chunk // 8)
        o1 = f.ins(f"add i64 {off}, {chunk}")
        f.br(join)
        f.at(join)
        temp = f.ins(f"phi i64 [ {temp}, %{before} ], [ {t1}, %{yes} ]")
        off = f.ins(f"phi i64 [ {off}, %{before} ], [ {o1}, %{yes} ]")
    tail = f.ins(f"and i64 {left}, 7")
    before = f.cur
    f.cbr(f.ins(f"icmp ne i64 {tail}, 0"), "tl", "done")
    f.at("tl")
    f.do("%k = phi i64 [ 0, %" + before + " ], [ %k1, %tl ]")
    f.do("%acc = phi i64 [ 0, %" + before + " ], [ %acc1, %tl ]")
    byte = f.ins(f"load i8, ptr {f.gep('%p', f.ins(f'add i64 {off}, %k'))}, align 1{_PRG}")
    sh = f.ins(f"shl i64 {f.ins(f'zext i8 {byte} to i64')}, {f.ins('shl i64 %k, 3')}")
    f.do(f"%acc1 = or i64 %acc, {sh}")
    f.do("%k1 = add i64 %k, 1")
    f.cbr(f.ins(f"icmp ult i64 %k1, {tail}"), "tl", "tj")
    f.at("tj")
    r, c = _adc_step(f, temp, "%acc1", "0")
    tt = f.ins(f"add i64 {r}, {c}")
    f.br("done")
    f.at("done")
    fin = f.ins(f"phi i64 [ {temp}, %{before} ], [ {tt}, %tj ]")
    f.do(f"ret i64 {_finalize(f, fin)}")
    return f.text("define internal i64 @csum_partial(ptr %p, i64 %n, i64 %seed) nounwind")


def _finalize(f: _Text, t: str) -> str:
    """``csum_finalize_sum``: ``(t + ror64(t, 32)) >> 32``."""
    ror = f.ins(f"or i64 {f.ins(f'lshr i64 {t}, 32')}, {f.ins(f'shl i64 {t}, 32')}")
    return f.ins(f"lshr i64 {f.ins(f'add i64 {t}, {ror}')}, 32")


def _csum_fn() -> str:
    """``bpf_csum_diff`` (pyxdp.net.filter.csum_diff): no size checks, always folded to 16
    bits; pointers the regions refuse are SLOW (the Python helper faults)."""
    f = _Text()
    f.at("entry")
    fs = f.ins("and i64 %r2, 4294967295")
    ts = f.ins("and i64 %r4, 4294967295")
    ptrs = []
    for name, addr, size in (("from", "%r1", fs), ("to", "%r3", ts)):
        yes, join = f.label(name), f.label(name + "j")
        before = f.cur
        f.cbr(f.ins(f"icmp ne i64 {size}, 0"), yes, join)
        f.at(yes)
        p = f.ins(f"call ptr @translate(ptr %ctx, i64 {addr}, i64 {size}, i1 false)")
        _ret_if(f, f.ins(f"icmp eq ptr {p}, null"), SLOW)
        last = f.cur
        f.br(join)
        f.at(join)
        ptrs.append(f.ins(f"phi ptr [ null, %{before} ], [ {p}, %{last} ]"))
    seed = f.ins("and i64 %r5, 4294967295")
    fp, tp = ptrs
    hf = f.ins(f"icmp ne i64 {fs}, 0")
    ht = f.ins(f"icmp ne i64 {ts}, 0")
    # partial(to, seed) and partial(from, 0 or ~seed) cover all four cases.
    tsum = f.ins(f"call i64 @csum_partial(ptr {tp}, i64 {ts}, i64 {seed})")
    fseed = f.ins(f"select i1 {ht}, i64 0, i64 {f.ins(f'xor i64 {seed}, 4294967295')}")
    fsum = f.ins(f"call i64 @csum_partial(ptr {fp}, i64 {fs}, i64 {fseed})")
    nf = f.ins(f"xor i64 {fsum}, 4294967295")
    res = f.ins(f"and i64 {f.ins(f'add i64 {tsum}, {nf}')}, 4294967295")
    wrapped = f.ins(f"icmp ult i64 {res}, {nf}")
    added = f.ins(f"add i64 {res}, {f.ins(f'zext i1 {wrapped} to i64')}")
    added = f.ins(f"and i64 {added}, 4294967295")
    r = f.ins(f"select i1 {hf}, i64 {nf}, i64 {seed}")
    r = f.ins(f"select i1 {ht}, i64 {tsum}, i64 {r}")
    r = f.ins(f"select i1 {f.ins(f'and i1 {hf}, {ht}')}, i64 {added}, i64 {r}")
    f.do(f"ret i64 {f.ins(f'call i64 @fold16(i64 {r})')}")
    h = _Text()
    h.at("entry")
    x = h.ins("and i64 %x, 4294967295")
    hi, lo = h.ins(f"lshr i64 {x}, 16"), h.ins(f"shl i64 {x}, 16")
    ror = h.ins(f"and i64 {h.ins(f'or i64 {hi}, {lo}')}, 4294967295")
    x = h.ins(f"and i64 {h.ins(f'add i64 {x}, {ror}')}, 4294967295")
    h.do(f"ret i64 {h.ins(f'lshr i64 {x}, 16')}")
    return (f.text("define internal i64 @csum_diff(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                   "i64 %r4, i64 %r5) nounwind")
            + _csum_partial_fn()
            + h.text("define internal i64 @fold16(i64 %x) nounwind"))


def _ri_init(f: _Text) -> None:
    """``_ri()``: a fresh RedirectInfo (all zero) the first time one is needed."""
    present = f.cget("%ctx", "ri_present")
    mk, have = f.label("ri"), f.label("rihave")
    f.cbr(f.ins(f"icmp eq i64 {present}, 0"), mk, have)
    f.at(mk)
    for name in ("ri_tgt_index", "ri_map_id", "ri_map_type", "ri_flags", "ri_map", "ri_tv_set",
                 "ri_tv"):
        f.cset("%ctx", name, "0")
    f.cset("%ctx", "ri_present", "1")
    f.br(have)
    f.at(have)


def _runctx_guard(f: _Text) -> None:
    ok = f.flag(NF_RUNCTX)
    f.cbr(ok, "go", "slow", _LIKELY)
    f.at("slow")
    f.do(f"ret i64 {c64(SLOW)}")
    f.at("go")


def _redirect_fn() -> str:
    """``bpf_redirect``: records the ifindex in the redirect state."""
    f = _Text()
    f.at("entry")
    _runctx_guard(f)
    _ri_init(f)
    _ret_if(f, f.ins("icmp ne i64 %r2, 0"), 0)
    f.cset("%ctx", "ri_tgt_index", f.ins("and i64 %r1, 4294967295"))
    f.cset("%ctx", "ri_map_id", str(_INT_MAX))
    f.cset("%ctx", "ri_map_type", "0")
    f.do("ret i64 4")
    return f.text("define internal i64 @redirect(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def _redirect_xsk_fn(ctx_base: int) -> str:
    """``bpf_redirect_xsk`` (pyxdp extension): the queue's bit in the registration table;
    SLOW where the table does not tell (no table, ifindex past it, queue >= 64)."""
    f = _Text()
    f.at("entry")
    _xdp_guard(f, ctx_base, False)
    ok = f.flag(NF_RUNCTX)
    yes = f.label("rc")
    f.cbr(ok, yes, "slow", _LIKELY)
    f.at(yes)
    cv = f.cget("%ctx", "ctx_values", "ptr")
    ifx = f.word(cv, 3, "i64", _CV)
    q = f.word(cv, 4, "i64", _CV)
    ntable = f.cget("%ctx", "xsk_ntable")
    in_table = f.ins(f"icmp ult i64 {ifx}, {ntable}")
    known = f.ins(f"and i1 {in_table}, {f.ins(f'icmp ult i64 {q}, 64')}")
    _ret_if(f, f.ins(f"xor i1 {known}, true"), SLOW)
    _ri_init(f)
    _ret_if(f, f.ins(f"icmp ne i64 {f.ins('and i64 %r2, -4')}, 0"), 0)
    mask = f.at_index(f.cget("%ctx", "xsk_table", "ptr"), ifx, "i64", 8)
    bit = f.ins(f"and i64 {f.ins(f'lshr i64 {mask}, {q}')}, 1")
    miss, hit = f.label("miss"), f.label("hit")
    f.cbr(f.ins(f"icmp eq i64 {bit}, 0"), miss, hit)
    f.at(miss)
    f.do(f"ret i64 {f.ins('and i64 %r2, 3')}")
    f.at(hit)
    f.cset("%ctx", "ri_tgt_index", q)
    f.cset("%ctx", "ri_map_id", "0")
    f.cset("%ctx", "ri_map_type", str(_XSKMAP))
    f.cset("%ctx", "ri_map", "0")
    f.cset("%ctx", "ri_flags", "0")
    f.do("ret i64 4")
    return f.text("define internal i64 @redirect_xsk(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def _tailcall_fn() -> str:
    """``tailcall(ctx, tctx, fn, budget, slot) -> r0``: run a target program's XDP entry
    (``fn``) on this run's xdp_buff as a batch of one frame with its own run context
    ``tctx``; the buffer's edges, the redirect state and the tail call count come back.
    When the target faults, ``ctx`` gets ST_TAIL (or ST_ABORT) and the target's record."""
    f = _Text()
    f.at("entry")
    desc = f.ins(f"alloca [{len(XDP_FIELDS)} x i64], align 8")
    io = f.ins("alloca [12 x i32], align 8")
    wide = f.ins("alloca [5 x i64], align 8")
    shared = ("nflags", "cpu", "xsk_table", "xsk_ntable", "ri_present", "ri_tgt_index",
              "ri_map_id", "ri_map_type", "ri_flags", "ri_map", "ri_tv_set", "ri_tv")
    for name in shared:
        f.cset("%tctx", name, f.cget("%ctx", name))
    data, end, meta = (f.cget("%ctx", n) for n in ("x_data", "x_data_end", "x_data_meta"))
    ok = f.ins(f"icmp ule i64 {meta}, {data}")
    mlen = f.ins(f"select i1 {ok}, i64 {f.ins(f'sub i64 {data}, {meta}')}, i64 0")
    cv = f.cget("%ctx", "ctx_values", "ptr")
    ins = (data, f.ins(f"sub i64 {end}, {data}"), mlen, f.word(cv, 4, "i64", _CV),
           f.word(cv, 3, "i64", _CV))
    for k, v in enumerate(ins):
        f.do(f"store i32 {f.ins(f'trunc i64 {v} to i32')}, ptr {f.gep(io, 4 * k)}, align 4")
    iop = f.ins(f"ptrtoint ptr {io} to i64")
    wp = f.ins(f"ptrtoint ptr {wide} to i64")
    words = {
        "count": "1", "repeat": "1", "budget": "%budget",
        "frames": f.ins(f"ptrtoint ptr {f.cget('%ctx', 'x_frame', 'ptr')} to i64"),
        "stride": "0", "frame_sz": f.cget("%ctx", "x_frame_sz"),
        "data_off": iop, "data_len": f.ins(f"add i64 {iop}, 4"),
        "meta_len": f.ins(f"add i64 {iop}, 8"), "meta_ok": f.ins(f"zext i1 {ok} to i64"),
        "frags": f.cget("%ctx", "x_frags"), "rxq": f.ins(f"add i64 {iop}, 12"),
        "ifindex": f.ins(f"add i64 {iop}, 16"), "egress": f.word(cv, 5, "i64", _CV),
        "act_out": f.ins(f"add i64 {iop}, 20"), "off_out": f.ins(f"add i64 {iop}, 24"),
        "len_out": f.ins(f"add i64 {iop}, 28"), "meta_out": f.ins(f"add i64 {iop}, 32"),
        "status_out": f.ins(f"add i64 {iop}, 36"), "pc_out": f.ins(f"add i64 {iop}, 40"),
        "addr_out": wp, "redirect_out": f.ins(f"add i64 {wp}, 8"), "done": "0",
        "tail_cnt0": f.cget("%ctx", "tail_cnt"), "rows": "0", "consume_ri": "0",
    }
    for name, v in words.items():
        f.set_word(desc, _X[name], v, "i64", "")
    f.do(f"call void {f.ins('inttoptr i64 %fn to ptr')}(ptr %tctx, ptr {desc})")
    # The buffer's edges come back; region 0 and the xdp_md values of this run need not:
    # the calling function ends now (with the target's r0, or its fault).
    for name in ("x_data", "x_data_end", "x_data_meta", "x_frags", "tail_cnt", *shared[4:]):
        f.cset("%ctx", name, f.cget("%tctx", name))
    word = f.ins(f"zext i32 {f.ins(f'load i32, ptr {f.gep(io, 36)}, align 4')} to i64")
    status = f.ins(f"and i64 {word}, 255")
    f.cbr(f.ins(f"icmp eq i64 {status}, 0"), "fine", "fault", _LIKELY)
    f.at("fine")
    act = f.ins(f"load i32, ptr {f.gep(io, 20)}, align 4")
    f.do(f"ret i64 {f.ins(f'zext i32 {act} to i64')}")
    f.at("fault")
    aborted = f.ins(f"icmp eq i64 {status}, {ST_ABORT}")
    f.cset("%ctx", "status", f.ins(f"select i1 {aborted}, i64 {ST_ABORT}, i64 {ST_TAIL}"))
    tpc = f.ins(f"load i32, ptr {f.gep(io, 40)}, align 4")
    f.cset("%ctx", "fault_pc", f.ins(f"zext i32 {tpc} to i64"))
    f.cset("%ctx", "fault_addr", f.ins(f"load i64, ptr {wide}, align 8"))
    f.cset("%ctx", "max_depth", f.ins(f"or i64 {word}, {f.ins('shl i64 %slot, 16')}"))
    f.do("ret i64 0")
    return f.text("define internal i64 @tailcall(ptr %ctx, ptr %tctx, i64 %fn, i64 %budget, "
                  "i64 %slot) nounwind")


_SHARED = {
    "translate": lambda n: _translate_fn(), "fault": lambda n: _fault_fn(),
    "pkt": lambda n: _pkt_fn(n.pkt_base), "adjust_head": lambda n: _adjust_head_fn(n.ctx_base),
    "adjust_meta": lambda n: _adjust_meta_fn(n.ctx_base),
    "adjust_tail": lambda n: _adjust_tail_fn(n.ctx_base),
    "buff_len": lambda n: _buff_len_fn(n.ctx_base),
    "load_bytes": lambda n: _load_bytes_fn(n.ctx_base),
    "store_bytes": lambda n: _store_bytes_fn(n.ctx_base),
    "csum_diff": lambda n: _csum_fn(), "redirect": lambda n: _redirect_fn(),
    "redirect_xsk": lambda n: _redirect_xsk_fn(n.ctx_base),
    "tailcall": lambda n: _tailcall_fn(),
}
# Shared functions a native kind needs besides itself.
_NEEDS = {"adjust_head": ("pkt",), "adjust_meta": ("pkt",), "adjust_tail": ("pkt",),
          "tailcall": (),
          "load_bytes": ("translate",), "store_bytes": ("translate",),
          "csum_diff": ("translate",)}


# --- per-map native functions ------------------------------------------------------------

def _desc(f: _Text, m: MapInfo, name: str, ty: str = "ptr") -> str:
    table = f.cget("%ctx", "maps", "ptr")
    return f.word(table, m.slot * len(MAPDESC_FIELDS) + _D[name], ty, "")


def _fnv(f: _Text, key: str, size: int) -> str:
    h = c64(_FNV_OFFSET)
    for k in range(size):
        b = f.ins(f"zext i8 {f.ins(f'load i8, ptr {f.gep(key, k)}, align 1{_PRG}')} to i64")
        h = f.ins(f"mul i64 {f.ins(f'xor i64 {h}, {b}')}, {c64(_FNV_PRIME)}")
    return h


def _key_equal(f: _Text, a: str, b: str, size: int) -> str:
    acc = "false"
    k = 0
    while k < size:
        w = 8 if size - k >= 8 else 4 if size - k >= 4 else 2 if size - k >= 2 else 1
        ty = _INT[w]
        x = f.ins(f"load {ty}, ptr {f.gep(a, k)}, align 1{_PRG}")
        y = f.ins(f"load {ty}, ptr {f.gep(b, k)}, align 1")
        acc = f.ins(f"or i1 {acc}, {f.ins(f'icmp ne {ty} {x}, {y}')}")
        k += w
    return f.ins(f"xor i1 {acc}, true")


def _probe(f: _Text, m: MapInfo, key: str, h: str, tag: str) -> tuple[str, str, str]:
    """Linear probing as HashMap._find: (slot or -1, first reusable slot, element or -1).

    Leaves through ``{tag}.slow`` (must exist) if the walk finds no EMPTY slot
    within ``capacity`` steps - a consistent index always has one."""
    index, hashes, kd = (_desc(f, m, n) for n in ("index", "hashes", "key_data"))
    mask = m.capacity - 1
    i0 = f.ins(f"and i64 {h}, {mask}")
    pre = f.cur
    f.br(f"{tag}.probe")
    f.at(f"{tag}.probe")
    i, cnt, reuse = f.tmp(), f.tmp(), f.tmp()
    phi_at = len(f.lines)
    f.lines.append("")
    e = f.ins(f"sext i32 {f.at_index(index, i, 'i32', 4)} to i64")
    f.cbr(f.ins(f"icmp eq i64 {e}, -1"), f"{tag}.miss", f"{tag}.chk")
    f.at(f"{tag}.chk")
    tomb = f.ins(f"icmp eq i64 {e}, -2")
    first_tomb = f.ins(f"and i1 {tomb}, {f.ins(f'icmp slt i64 {reuse}, 0')}")
    reuse1 = f.ins(f"select i1 {first_tomb}, i64 {i}, i64 {reuse}")
    # (An element number past the end - only a map changed by another thread while
    # this runs could hold one - is never followed.)
    f.cbr(f.ins(f"icmp ult i64 {e}, {m.max_entries}"), f"{tag}.hcmp", f"{tag}.skip")
    f.at(f"{tag}.hcmp")
    hs = f.ins(f"load i64, ptr {f.gep(hashes, f.ins(f'shl i64 {i}, 3'))}, align 8")
    f.cbr(f.ins(f"icmp eq i64 {hs}, {h}"), f"{tag}.kcmp", f"{tag}.skip")
    f.at(f"{tag}.kcmp")
    kp = f.gep(kd, f.ins(f"mul i64 {e}, {m.key_stride}"))
    f.cbr(_key_equal(f, key, kp, m.key_size), f"{tag}.hit", f"{tag}.skip")
    f.at(f"{tag}.skip")
    inext = f.ins(f"and i64 {f.ins(f'add i64 {i}, 1')}, {mask}")
    cnt1 = f.ins(f"add i64 {cnt}, 1")
    f.cbr(f.ins(f"icmp ult i64 {cnt1}, {m.capacity}"), f"{tag}.probe", f"{tag}.slow")
    f.lines[phi_at] = (
        f"  {i} = phi i64 [ {i0}, %{pre} ], [ {inext}, %{tag}.skip ]\n"
        f"  {cnt} = phi i64 [ 0, %{pre} ], [ {cnt1}, %{tag}.skip ]\n"
        f"  {reuse} = phi i64 [ -1, %{pre} ], [ {reuse1}, %{tag}.skip ]")
    # The miss: the empty slot, or the first tombstone passed.
    f.at(f"{tag}.miss")
    free_slot = f.ins(f"select i1 {f.ins(f'icmp slt i64 {reuse}, 0')}, i64 {i}, i64 {reuse}")
    f.br(f"{tag}.join")
    f.at(f"{tag}.hit")
    f.br(f"{tag}.join")
    f.at(f"{tag}.join")
    slot = f.ins(f"phi i64 [ -1, %{tag}.miss ], [ {i}, %{tag}.hit ]")
    reuse_out = f.ins(f"phi i64 [ {free_slot}, %{tag}.miss ], [ {reuse}, %{tag}.hit ]")
    elem = f.ins(f"phi i64 [ -1, %{tag}.miss ], [ {e}, %{tag}.hit ]")
    return slot, reuse_out, elem


def _tick(f: _Text, m: MapInfo, e: str) -> None:
    """HashMap._tick: the LRU clock."""
    hdr = _desc(f, m, "hdr")
    clock = f.ins(f"add i64 {f.word(hdr, 3, 'i64', '')}, 1")
    f.set_word(hdr, 3, clock, "i64", "")
    f.do(f"store i64 {clock}, ptr {f.gep(_desc(f, m, 'stamp'), f.ins(f'shl i64 {e}, 3'))}, "
         "align 8")


def _hash_lookup_fn(tag: str, m: MapInfo) -> str:
    """HashMap.lookup_addr for one map: the value's fake address, 0, or SLOW."""
    f = _Text()
    f.at("entry")
    cpu = f.cget("%ctx", "cpu")
    _ret_if(f, f.ins(f"icmp uge i64 {cpu}, {m.nr_cpus}"), 0)
    h = _fnv(f, "%key", m.key_size)
    slot, _, e = _probe(f, m, "%key", h, "p")
    _ret_if(f, f.ins(f"icmp slt i64 {slot}, 0"), 0)
    if m.lru:
        _tick(f, m, e)
    base = c64(m.value_base)
    if m.percpu:
        base = f.ins(f"add i64 {base}, {f.ins(f'mul i64 {cpu}, {m.cpu_stride}')}")
    eoff = f.ins(f"mul i64 {e}, {m.elem_size}")
    f.do(f"ret i64 {f.ins(f'add i64 {base}, {eoff}')}")
    f.at("p.slow")
    f.do(f"ret i64 {c64(SLOW)}")
    return f.text(f"define internal i64 @{tag}_lookup{m.slot}(ptr %ctx, ptr %key) nounwind")


def _write_value(f: _Text, m: MapInfo, e: str, cpu: str, val: str, new: bool) -> None:
    """HashMap._write_value / ArrayMap.update for a program (one CPU's value).

    Python reads the source bytes before it writes anything, so the copy is a
    memmove and comes first; the zeroing of a new element follows it."""
    vd = _desc(f, m, "value_data")
    off = f.ins(f"mul i64 {e}, {m.elem_size}")
    vrow = _desc(f, m, "value_row", "i64") if m.percpu else "0"
    mine = f.gep(vd, f.ins(f"add i64 {off}, {f.ins(f'mul i64 {cpu}, {vrow}')}")
                 if m.percpu else off)
    f.memmove(mine, val, m.value_size)
    if not new:
        return
    if m.elem_size > m.value_size:
        f.memset(f.gep(mine, m.value_size), m.elem_size - m.value_size)
    if not m.percpu:
        return
    # A program's update of a new per-CPU element zeroes the other CPUs' copies.
    pre, head, body, zero, nxt, done = (f.cur, f.label("zh"), f.label("zb"), f.label("zz"),
                                        f.label("zn"), f.label("zd"))
    f.br(head)
    f.at(head)
    c, c1 = f.tmp(), f.tmp()
    f.do(f"{c} = phi i64 [ 0, %{pre} ], [ {c1}, %{nxt} ]")
    f.cbr(f.ins(f"icmp ult i64 {c}, {m.nr_cpus}"), body, done)
    f.at(body)
    f.cbr(f.ins(f"icmp eq i64 {c}, {cpu}"), nxt, zero)
    f.at(zero)
    f.memset(f.gep(vd, f.ins(f"add i64 {off}, {f.ins(f'mul i64 {c}, {vrow}')}")), m.elem_size)
    f.br(nxt)
    f.at(nxt)
    f.do(f"{c1} = add i64 {c}, 1")
    f.br(head)
    f.at(done)


def _hash_update_fn(tag: str, m: MapInfo) -> str:
    """HashMap.try_update for a program on ``ctx.cpu``: 0, -errno, or SLOW (BPF_F_LOCK,
    LRU eviction, an index rebuild)."""
    f = _Text()
    f.at("entry")
    cpu = f.cget("%ctx", "cpu")
    _ret_if(f, f.ins(f"icmp uge i64 {cpu}, {m.nr_cpus}"), -_EINVAL)
    mode = f.ins("and i64 %flags, -5")
    _ret_if(f, f.ins(f"icmp ugt i64 {mode}, 2"), -_EINVAL)
    _ret_if(f, f.ins(f"icmp ne i64 {f.ins('and i64 %flags, 4')}, 0"), SLOW)
    h = _fnv(f, "%key", m.key_size)
    slot, reuse, e = _probe(f, m, "%key", h, "p")
    exists = f.ins(f"icmp sge i64 {slot}, 0")
    _ret_if(f, f.ins(f"and i1 {exists}, {f.ins(f'icmp eq i64 {mode}, 1')}"), -_EEXIST)
    _ret_if(f, f.ins(f"and i1 {f.ins(f'xor i1 {exists}, true')}, "
                     f"{f.ins(f'icmp eq i64 {mode}, 2')}"), -_ENOENT)
    f.cbr(exists, "old", "new")
    f.at("old")
    _write_value(f, m, e, cpu, "%val", False)
    if m.lru:
        _tick(f, m, e)
    f.do("ret i64 0")
    f.at("new")
    hdr = _desc(f, m, "hdr")
    count, tombs, nfree = (f.word(hdr, k, "i64", "") for k in range(3))
    full = f.ins(f"icmp uge i64 {count}, {m.max_entries}")
    _ret_if(f, full, SLOW if m.lru else -_E2BIG)
    tombs1 = f.ins(f"add i64 {tombs}, 1")
    grow = f.ins(f"icmp ugt i64 {f.ins(f'add i64 {count}, {tombs1}')}, {m.capacity * 3 // 4}")
    _ret_if(f, grow, SLOW)
    bad = f.ins(f"or i1 {f.ins(f'icmp eq i64 {nfree}, 0')}, "
                f"{f.ins(f'icmp ugt i64 {nfree}, {m.max_entries}')}")
    _ret_if(f, bad, SLOW)
    nfree1 = f.ins(f"sub i64 {nfree}, 1")
    ne = f.ins(f"sext i32 {f.at_index(_desc(f, m, 'free'), nfree1, 'i32', 4)} to i64")
    _ret_if(f, f.ins(f"icmp uge i64 {ne}, {m.max_entries}"), SLOW)
    f.set_word(hdr, 2, nfree1, "i64", "")
    index = _desc(f, m, "index")
    old = f.ins(f"sext i32 {f.at_index(index, reuse, 'i32', 4)} to i64")
    was_tomb = f.ins(f"zext i1 {f.ins(f'icmp eq i64 {old}, -2')} to i64")
    f.set_word(hdr, 1, f.ins(f"sub i64 {tombs}, {was_tomb}"), "i64", "")
    f.put_index(index, reuse, f.ins(f"trunc i64 {ne} to i32"), "i32", 4)
    f.put_index(_desc(f, m, "hashes"), reuse, h, "i64", 8)
    f.put_index(_desc(f, m, "elem_slot"), ne, f.ins(f"trunc i64 {reuse} to i32"), "i32", 4)
    f.set_word(hdr, 0, f.ins(f"add i64 {count}, 1"), "i64", "")
    kdst = f.gep(_desc(f, m, "key_data"), f.ins(f"mul i64 {ne}, {m.key_stride}"))
    f.memmove(kdst, "%key", m.key_size)
    _write_value(f, m, ne, cpu, "%val", True)
    if m.lru:
        _tick(f, m, ne)
    f.do("ret i64 0")
    f.at("p.slow")
    f.do(f"ret i64 {c64(SLOW)}")
    return f.text(f"define internal i64 @{tag}_update{m.slot}(ptr %ctx, ptr %key, ptr %val, "
                  "i64 %flags) nounwind")


def _array_update_fn(tag: str, m: MapInfo) -> str:
    """ArrayMap.try_update for a program on ``ctx.cpu``."""
    f = _Text()
    f.at("entry")
    cpu = f.cget("%ctx", "cpu")
    _ret_if(f, f.ins(f"icmp uge i64 {cpu}, {m.nr_cpus}"), -_EINVAL)
    mode = f.ins("and i64 %flags, -5")
    _ret_if(f, f.ins(f"icmp ugt i64 {mode}, 2"), -_EINVAL)
    _ret_if(f, f.ins(f"icmp ne i64 {f.ins('and i64 %flags, 4')}, 0"), SLOW)
    idx = f.ins(f"zext i32 {f.ins(f'load i32, ptr %key, align 1{_PRG}')} to i64")
    _ret_if(f, f.ins(f"icmp uge i64 {idx}, {m.max_entries}"), -_E2BIG)
    _ret_if(f, f.ins(f"icmp ne i64 {f.ins('and i64 %flags, 1')}, 0"), -_EEXIST)
    _write_value(f, m, idx, cpu, "%val", False)
    f.do("ret i64 0")
    return f.text(f"define internal i64 @{tag}_update{m.slot}(ptr %ctx, ptr %key, ptr %val, "
                  "i64 %flags) nounwind")


def _redirect_map_fn(tag: str, m: MapInfo) -> str:
    """``__bpf_xdp_redirect_map`` for a DEVMAP or CPUMAP (``entries[key][0]``, 0 = empty)."""
    f = _Text()
    f.at("entry")
    _runctx_guard(f)
    _ri_init(f)
    _ret_if(f, f.ins(f"icmp ne i64 {f.ins(f'and i64 %r3, {c64(~(3 | m.flag_mask))}')}, 0"), 0)
    key = f.ins("and i64 %r2, 4294967295")
    inside, join = f.label("in"), f.label("v")
    inrange = f.ins(f"icmp ult i64 {key}, {m.max_entries}")
    before = f.cur
    f.cbr(inrange, inside, join)
    f.at(inside)
    v0 = f.ins(f"zext i32 {f.at_index(_desc(f, m, 'entries'), key, 'i32', 8)} to i64")
    last = f.cur
    f.br(join)
    f.at(join)
    value = f.ins(f"phi i64 [ 0, %{before} ], [ {v0}, %{last} ]")
    f.cset("%ctx", "ri_tv_set", "1")
    f.cset("%ctx", "ri_tv", value)
    bc = f.ins(f"icmp ne i64 {f.ins(f'and i64 %r3, {_BPF_F_BROADCAST}')}, 0")
    missing = f.ins(f"and i1 {f.ins(f'icmp eq i64 {value}, 0')}, {f.ins(f'xor i1 {bc}, true')}")
    miss, hit = f.label("miss"), f.label("hit")
    f.cbr(missing, miss, hit)
    f.at(miss)
    f.cset("%ctx", "ri_map_id", str(_INT_MAX))
    f.cset("%ctx", "ri_map_type", "0")
    f.do(f"ret i64 {f.ins('and i64 %r3, 3')}")
    f.at(hit)
    f.cset("%ctx", "ri_tgt_index", key)
    f.cset("%ctx", "ri_map_id", str(m.map_id))
    f.cset("%ctx", "ri_map_type", str(m.map_type))
    f.cset("%ctx", "ri_map", f.ins(f"select i1 {bc}, i64 {c64(m.addr)}, i64 0"))
    f.cset("%ctx", "ri_flags", f.ins(f"select i1 {bc}, i64 %r3, i64 0"))
    f.do("ret i64 4")
    text = f.text(f"define internal i64 @{tag}_redir{m.slot}(ptr %ctx, i64 %r2, i64 %r3) "
                  "nounwind")
    return text


# --- one bpf function ------------------------------------------------------------

_ATOMIC_KIND = {op.BPF_ADD: "add", op.BPF_OR: "or", op.BPF_AND: "and", op.BPF_XOR: "xor",
                op.BPF_XCHG: "xchg"}
_CMP_U = {op.BPF_JEQ: "eq", op.BPF_JNE: "ne", op.BPF_JGT: "ugt", op.BPF_JGE: "uge",
          op.BPF_JLT: "ult", op.BPF_JLE: "ule"}
_CMP_S = {op.BPF_JSGT: "sgt", op.BPF_JSGE: "sge", op.BPF_JSLT: "slt", op.BPF_JSLE: "sle"}
_BINOP = {op.BPF_ADD: "add", op.BPF_SUB: "sub", op.BPF_MUL: "mul", op.BPF_OR: "or",
          op.BPF_AND: "and", op.BPF_XOR: "xor", op.BPF_LSH: "shl", op.BPF_RSH: "lshr",
          op.BPF_ARSH: "ashr"}


class _Prog:
    """Program-wide facts the functions share while they are emitted."""

    def __init__(self, mod: _Module, p: ProgramInput) -> None:
        self.mod = mod
        self.p = p
        self.insns = p.insns
        self.natives = p.natives
        self.second = _second_slots(p.insns)
        self.tag = p.tag
        entries = sorted({lo for lo, _ in p.layout.functions} | set(p.callbacks))
        self.funcs = {pc: f"{p.tag}_f{pc}" for pc in entries}
        self.blocks = {pc: _blocks(p.insns, self.second, pc, *p.layout.function_of(pc))
                       for pc in entries}
        self.hints = _Hints(p.insns, self.blocks, p.imm64, p.ctx_loads, p.natives)
        self.frames = {pc: _FrameAnalysis(p.insns, self.blocks[pc], pc, p.imm64)
                       for pc in entries}
        # Bytes of a frame the proven stores may dirty: zeroed when a frame is created.
        dirty: set[int] = set()
        for fa in self.frames.values():
            for pc, at in fa.frame_offset.items():
                if _is_store(p.insns[pc]):
                    size = op.SIZE_BYTES[op.bpf_size(p.insns[pc].code)]
                    dirty.update(range(STACK_SIZE + at, STACK_SIZE + at + size))
        self.footprint = _intervals(dirty)
        self.used_maps: dict[tuple[str, int], MapInfo] = {}
        # Functions whose caller reads r1-r5 after they return (not just r0).
        self.called = set(p.callbacks) | {
            pc + 1 + i.imm for pc, i in enumerate(p.insns)
            if i.code == op.OP_CALL and i.src == op.CallSrc.BPF_PSEUDO_CALL
            and pc not in self.second}


def _intervals(offsets: set[int]) -> list[tuple[int, int]]:
    """Sorted byte offsets as [start, end) runs, 8-byte aligned and merged across small gaps."""
    words = sorted({o // 8 for o in offsets})
    out: list[tuple[int, int]] = []
    for w in words:
        if out and w * 8 - out[-1][1] <= 16:
            out[-1] = (out[-1][0], w * 8 + 8)
        else:
            out.append((w * 8, w * 8 + 8))
    return out


_ALL = frozenset(range(10))
_ARGS = frozenset(range(1, 6))


def _uses_defs(i: Instruction, exit_uses: frozenset[int]) -> tuple[frozenset[int], frozenset[int]]:
    """Registers (r0-r9) an instruction reads and writes, as the lowering emits it."""
    cls = i.cls
    x = op.bpf_src(i.code) == op.BPF_X
    if cls in (op.BPF_ALU, op.BPF_ALU64):
        code_op = op.bpf_op(i.code)
        if code_op == op.BPF_MOV:
            return frozenset({i.src} if x else ()), frozenset({i.dst})
        return frozenset({i.dst, i.src} if x and code_op not in (op.BPF_END, op.BPF_NEG)
                         else {i.dst}), frozenset({i.dst})
    if cls == op.BPF_LD:
        return frozenset(), frozenset({i.dst})
    if cls == op.BPF_LDX:
        return frozenset({i.src}), frozenset({i.dst})
    if cls == op.BPF_ST:
        return frozenset({i.dst}), frozenset()
    if cls == op.BPF_STX:
        if op.bpf_mode(i.code) != op.BPF_ATOMIC:
            return frozenset({i.dst, i.src}), frozenset()
        if i.imm == op.BPF_CMPXCHG:
            return frozenset({i.dst, i.src, 0}), frozenset({0})
        return frozenset({i.dst, i.src}), frozenset({i.src} if i.imm & op.BPF_FETCH else ())
    code_op = op.bpf_op(i.code)
    if code_op == op.BPF_EXIT:
        return exit_uses, frozenset()
    if code_op == op.BPF_JA:
        return frozenset(), frozenset()
    if code_op == op.BPF_CALL:
        if i.src == op.CallSrc.BPF_PSEUDO_CALL and not x:
            return _ALL, frozenset(range(6))
        # A helper (or tail call, whose success returns r1-r5 as they are) sees r1-r5.
        return (_ARGS | {i.dst} if x else _ARGS | exit_uses - {0}), frozenset({0})
    return frozenset({i.dst, i.src} if x else {i.dst}), frozenset()


def _liveness(insns: Sequence[Instruction], blocks: Mapping[int, _Block],
              exit_uses: frozenset[int]) -> dict[int, frozenset[int]]:
    """Registers live at each block's entry (a phi is made only for those)."""
    use: dict[int, frozenset[int]] = {}
    kill: dict[int, frozenset[int]] = {}
    for b, blk in blocks.items():
        u: set[int] = set()
        d: set[int] = set()
        for pc in blk.pcs:
            iu, idf = _uses_defs(insns[pc], exit_uses)
            u |= (iu & _ALL) - d  # r10 is no phi: it is fixed per function
            d |= idf
        use[b], kill[b] = frozenset(u), frozenset(d)
    live = {b: use[b] for b in blocks}
    changed = True
    while changed:
        changed = False
        for b in sorted(blocks, reverse=True):
            out: set[int] = set()
            for s in blocks[b].succs:
                out |= live[s]
            new = use[b] | (frozenset(out) - kill[b])
            if new != live[b]:
                live[b] = new
                changed = True
    return live


class _Func:
    """Emits one bpf function (entry pc, slot range) as an LLVM function."""

    def __init__(self, prog: _Prog, entry: int) -> None:
        self.prog = prog
        self.mod = prog.mod
        self.insns = prog.insns
        p = prog.p
        self.imm64 = p.imm64
        self.ctx_loads = p.ctx_loads
        self.natives = p.natives
        self.unsafe = p.unsafe
        self.blocks = prog.blocks[entry]
        fa = prog.frames[entry]
        self.frame_offset = fa.frame_offset
        self.call_args = fa.call_args
        self.hints = prog.hints
        self.direct: dict[int, str] = {}
        f = self.f = _Text()
        f.at("entry")
        f.lines.append("")  # room for an alloca (see _timespec)
        self.ctx = "%ctx"
        self.depth = "%depth"
        # A frame is zeroed the first time its depth is reached in a run, as the
        # interpreter creates a fresh stack region the first time.
        fresh = f.ins(f"icmp ugt i64 %depth, {f.cget('%ctx', 'max_depth')}")
        f.cbr(fresh, "fresh", "go")
        f.at("fresh")
        f.do(f"call void @{prog.tag}_zero(ptr %ctx, i64 %depth)")
        f.cset("%ctx", "max_depth", "%depth")
        f.br("go")
        f.at("go")
        self.r10 = f.ins(f"add i64 {c64(STACK_BASE + STACK_SIZE)}, "
                         f"{f.ins(f'shl i64 %depth, {_GAP_SHIFT}')}")
        self.frame = f.gep(f.cget("%ctx", "stack", "ptr"), f.ins("shl i64 %depth, 9"))
        self.tab = f.cget("%ctx", "regions", "ptr")
        rem0 = f.cget("%ctx", "rem")
        # Edges into each block: (predecessor label, r0..r9, rem).
        self.edges: dict[int, list[tuple[str, tuple[str, ...], str]]] = {
            pc: [] for pc in self.blocks}
        self.edges[entry].append(("go", tuple(f"%a{n}" for n in range(10)), rem0))
        # The main program's exit is read for r0 only; a callee's for r0-r5.
        exit_uses = frozenset(range(6)) if entry != 0 or 0 in prog.called else frozenset({0})
        self.live = _liveness(self.insns, self.blocks, exit_uses)
        self.phi_at: dict[int, int] = {}
        f.br(f"b{entry}")
        for pc in sorted(self.blocks):
            self._emit_block(self.blocks[pc])
        f.at("bail")
        f.do(f"ret {RET_T} undef")
        for pc, where in self.phi_at.items():
            edges = self.edges[pc]
            phis = []
            for n in sorted(self.live[pc]):
                inc = ", ".join(f"[ {regs[n]}, %{lbl} ]" for lbl, regs, _ in edges)
                phis.append(f"  %b{pc}r{n} = phi i64 {inc}")
            inc = ", ".join(f"[ {rem}, %{lbl} ]" for lbl, _, rem in edges)
            phis.append(f"  %b{pc}rem = phi i64 {inc}")
            f.lines[where] = "\n".join(phis)
        args = ", ".join(f"i64 %a{n}" for n in range(10))
        self.text = f.text(f"define internal {RET_T} @{prog.funcs[entry]}(ptr %ctx, i64 %depth, "
                           f"{args}) nounwind")

    # -- registers ---------------------------------------------------------------
    def R(self, n: int) -> str:
        return self.r10 if n == 10 else self.regs[n]

    def W(self, n: int, v: str) -> None:
        self.regs[n] = v

    def _goto(self, target: int, rem: str) -> None:
        self.edges[target].append((self.f.cur, tuple(self.regs), rem))
        self.f.br(f"b{target}")

    # -- blocks and the budget ---------------------------------------------------------
    def _emit_block(self, blk: _Block) -> None:
        """One eBPF block, with the interpreter's exact budget.

        Instruction ``k`` of the block runs only if more than ``k`` instructions
        are left. Pure instructions cannot be observed, so the test is made only
        where it shows: before each load, store or atomic (their effects and
        faults) and before the last instruction (the block's exit); the first
        test sits at the block's entry. When a test fails the run stops at
        instruction ``rem`` of the block, exactly where the interpreter stops.
        """
        f = self.f
        f.at(f"b{blk.start}")
        self.phi_at[blk.start] = len(f.lines)
        f.lines.append("")
        live = self.live[blk.start]
        self.regs = [f"%b{blk.start}r{n}" if n in live else "0" for n in range(10)]
        rem = f"%b{blk.start}rem"
        n = len(blk.pcs)
        out = f"b{blk.start}.budget"
        checks = {k for k, pc in enumerate(blk.pcs[:-1])
                  if _is_mem(self.insns[pc]) and pc not in self.ctx_loads}
        checks.add(n - 1)
        first = min(checks)
        self._budget_check(rem, first, out)
        self.rem_after = f.ins(f"sub i64 {rem}, {n}")
        self.blk = blk
        groups = self._groups(blk)
        k = 0
        while k < n:
            group = groups.get(k)
            if group is not None:
                self._emit_group(blk, group, rem, checks, first, out)
                k = group[-1][0] + 1
                continue
            if k in checks and k != first:
                self._budget_check(rem, k, out)
            self._emit_insn(blk.pcs[k], k, rem)
            k += 1
        if not _is_jmp(self.insns[blk.pcs[-1]]):  # calls, jumps and exits leave themselves
            self._goto(blk.succs[0], self.rem_after)
        f.at(out)
        # pc of block instruction number rem: an ld_imm64 before it counts two slots.
        at = f.ins(f"add i64 {blk.start}, {rem}")
        for j in blk.lddw_at:
            past = f.ins(f"icmp sgt i64 {rem}, {j}")
            at = f.ins(f"add i64 {at}, {f.ins(f'zext i1 {past} to i64')}")
        f.do(f"call void @fault(ptr %ctx, i64 {ST_BUDGET}, i64 {at}, i64 0, i64 0, i64 0)")
        f.br("bail")

    def _groups(self, blk: _Block) -> dict[int, list[tuple[int, int, int, int, bool]]]:
        """Runs of checked loads and stores through one unchanged base register (at least
        three, with a region hint): ``{first index: [(k, pc, off, size, write)...]}``."""
        out: dict[int, list[tuple[int, int, int, int, bool]]] = {}
        cur: list[tuple[int, int, int, int, bool]] = []
        base = -1

        def close() -> None:
            if len(cur) >= 3:
                out[cur[0][0]] = list(cur)
            cur.clear()

        for k, pc in enumerate(blk.pcs):
            i = self.insns[pc]
            cls = i.cls
            checked = (_is_mem(i) and pc not in self.frame_offset and pc not in self.ctx_loads)
            plain = checked and (cls == op.BPF_LDX or op.bpf_mode(i.code) == op.BPF_MEM)
            reg = i.src if cls == op.BPF_LDX else i.dst
            if plain and self.hints.hint(self.hints.base.get(pc))[0] != "stk":
                if reg != base:
                    close()
                    base = reg
                cur.append((k, pc, i.off, op.SIZE_BYTES[op.bpf_size(i.code)],
                            cls != op.BPF_LDX))
            elif checked:  # an atomic or a stack-hinted access: not in a run
                close()
                base = -1
            _, defs = _uses_defs(i, frozenset())
            if base in defs or _is_jmp(i):
                close()
                base = -1
        close()
        return out

    def _entry(self, hint: Hint) -> str:
        """The region table entry a region hint names (the run's CPU's for "cpu")."""
        f = self.f
        kind, idx, _ = hint
        if kind == "region":
            return f.gep(self.tab, 32 * min(idx, MAX_REGIONS - 1))
        i = f.ins(f"add i64 {f.cget('%ctx', 'cpu')}, {idx}")
        i = f.ins(f"select i1 {f.ins(f'icmp ult i64 {i}, {MAX_REGIONS}')}, i64 {i}, "
                  f"i64 {MAX_REGIONS - 1}")
        return f.gep(self.tab, f.ins(f"shl i64 {i}, 5"))

    def _emit_group(self, blk: _Block, group: list[tuple[int, int, int, int, bool]], rem: str,
                    checks: set[int], first: int, out: str) -> None:
        """A run of accesses through one base register, versioned: when the budget covers
        the run and the hinted region holds the span of all of them (which is so exactly
        when each is inside it), a copy without any check runs, in which LLVM may also
        merge neighbouring bytes; otherwise the copy with every check does."""
        f = self.f
        k0, k_last = group[0][0], group[-1][0]
        pc0 = group[0][1]
        i0 = self.insns[pc0]
        reg = i0.src if i0.cls == op.BPF_LDX else i0.dst
        hint = self.hints.hint(self.hints.base.get(pc0))
        lo = min(off for _, _, off, _, _ in group)
        hi = max(off + size for _, _, off, size, _ in group)
        write = any(w for *_, w in group)
        bv = self.R(reg)
        ent = self._entry(hint)
        rbase = f.word(ent, _R["base"], "i64", _TAB)
        host = f.word(ent, _R["host"], "ptr", _TAB)
        ok = f.ins(f"icmp sgt i64 {rem}, {k_last}")
        if not (self.unsafe and hint[2]):
            rsize = f.word(ent, _R["size"], "i64", _TAB)
            off = f.ins(f"sub i64 {f.ins(f'add i64 {bv}, {lo}')}, {rbase}")
            room = f.ins(f"sub i64 {rsize}, {off}")
            span = f.ins(f"and i1 {f.ins(f'icmp ule i64 {off}, {rsize}')}, "
                         f"{f.ins(f'icmp ule i64 {hi - lo}, {room}')}")
            ok = f.ins(f"and i1 {ok}, {span}")
            if write:
                wr = f.word(ent, _R["writable"], "i64", _TAB)
                ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp ne i64 {wr}, 0')}")
        fast, slow, join = f.label("fast"), f.label("slow"), f.label("joined")
        f.cbr(ok, fast, slow, _LIKELY)
        start = list(self.regs)
        f.at(fast)
        hostd = f.gep(host, f.ins(f"sub i64 {bv}, {rbase}"))
        self.direct = {pc: f.gep(hostd, off) for _, pc, off, _, _ in group}
        for k in range(k0, k_last + 1):
            self._emit_insn(blk.pcs[k], k, rem)
        self.direct = {}
        fast_regs, fast_end = list(self.regs), f.cur
        f.br(join)
        f.at(slow)
        self.regs = list(start)
        for k in range(k0, k_last + 1):
            if k in checks and k != first:
                self._budget_check(rem, k, out)
            self._emit_insn(blk.pcs[k], k, rem)
        slow_regs, slow_end = list(self.regs), f.cur
        f.br(join)
        f.at(join)
        self.regs = [a if a == b else
                     f.ins(f"phi i64 [ {a}, %{fast_end} ], [ {b}, %{slow_end} ]")
                     for a, b in zip(fast_regs, slow_regs, strict=True)]

    def _budget_check(self, rem: str, k: int, out: str) -> None:
        """Go on only if instruction ``k`` of the block is within the budget."""
        f = self.f
        go = f.label("go")
        f.cbr(f.ins(f"icmp sgt i64 {rem}, {k}"), go, out, _LIKELY)
        f.at(go)

    def _fault_unless(self, ok: str, status: int, pc: int, addr: str, size: str, rem: str,
                      k: int) -> None:
        """Continue if ``ok``, else record a fault at ``pc`` (block instruction ``k``)."""
        f = self.f
        bad, cont = f.label("fault"), f.label("ok")
        f.cbr(ok, cont, bad, _LIKELY)
        f.at(bad)
        # The faulting instruction counts as executed, as in the interpreter.
        left = f.ins(f"sub i64 {rem}, {k + 1}")
        f.do(f"call void @fault(ptr %ctx, i64 {status}, i64 {pc}, i64 {addr}, i64 {size}, "
             f"i64 {left})")
        f.br("bail")
        f.at(cont)

    # -- instructions ------------------------------------------------------------------
    def _emit_insn(self, pc: int, k: int, rem: str) -> None:
        i = self.insns[pc]
        cls = i.cls
        f = self.f
        if cls in (op.BPF_ALU, op.BPF_ALU64):
            self._alu(i)
        elif cls == op.BPF_LD:
            self.W(i.dst, c64(self.imm64[pc]))
        elif cls == op.BPF_LDX and pc in self.ctx_loads:
            # A proven context load reads the field value, as the verifier rewrites it.
            self.W(i.dst, f.word(f.cget("%ctx", "ctx_values", "ptr"), self.ctx_loads[pc], "i64",
                                    _CV))
        elif cls == op.BPF_LDX:
            size = op.SIZE_BYTES[op.bpf_size(i.code)]
            p = self._access(i.src, i.off, size, False, pc, k, rem)
            ty = _INT[size]
            v = f.ins(f"load {ty}, ptr {p}, align 1{_PRG}")
            if size == 8:
                self.W(i.dst, v)
            elif op.bpf_mode(i.code) == op.BPF_MEMSX:
                self.W(i.dst, f.ins(f"sext {ty} {v} to i64"))
            else:
                self.W(i.dst, f.ins(f"zext {ty} {v} to i64"))
        elif cls == op.BPF_ST:
            size = op.SIZE_BYTES[op.bpf_size(i.code)]
            p = self._access(i.dst, i.off, size, True, pc, k, rem)
            ty = _INT[size]
            f.do(f"store {ty} {_cint(ty, i.imm)}, ptr {p}, align 1{_PRG}")
        elif cls == op.BPF_STX:
            size = op.SIZE_BYTES[op.bpf_size(i.code)]
            if op.bpf_mode(i.code) == op.BPF_ATOMIC:
                self._atomic(i, size, pc, k, rem)
            else:
                p = self._access(i.dst, i.off, size, True, pc, k, rem)
                ty = _INT[size]
                v = self.R(i.src) if size == 8 else self._trunc(self.R(i.src), ty)
                f.do(f"store {ty} {v}, ptr {p}, align 1{_PRG}")
        else:
            self._jmp(i, pc, k, rem)

    def _trunc(self, v: str, ty: str) -> str:
        return v if ty == "i64" else self.f.ins(f"trunc i64 {v} to {ty}")

    def _address(self, base: int, off: int) -> str:
        return self.f.ins(f"add i64 {self.R(base)}, {off}") if off else self.R(base)

    def _try(self, addr: str, size: int, write: bool, hint: Hint,
             on_null: Callable[[str], None]) -> str:
        """Host pointer for ``[addr, +size)``: the ``hint`` entry tested inline, ``translate``
        when it misses; when that finds nothing ``on_null(label)`` emits the block at
        ``label`` (it must end with a branch)."""
        f = self.f
        kind, idx, confident = hint
        if kind == "stk":
            soff = f.ins(f"sub i64 {addr}, {c64(STACK_BASE)}")
            depth = f.ins(f"lshr i64 {soff}, {_GAP_SHIFT}")
            within = f.ins(f"and i64 {soff}, {STACK_FRAME_GAP - 1}")
            fbase = f.ins(f"shl i64 {depth}, 9")
            fast = f.ins(f"getelementptr i8, ptr {f.cget('%ctx', 'stack', 'ptr')}, "
                         f"i64 {f.ins(f'add i64 {fbase}, {within}')}")
            if self.unsafe and confident:
                return fast
            ok = f.ins(f"icmp ult i64 {soff}, {_MAX_FRAMES * STACK_FRAME_GAP}")
            maxd = f.cget("%ctx", "max_depth")
            ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp ule i64 {depth}, {maxd}')}")
            ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp ule i64 {within}, {STACK_SIZE - size}')}")
            if write:
                # The mark is harmless when the access then faults: it only forces a full zero.
                bit = f.ins(f"select i1 {ok}, i64 {f.ins(f'shl i64 1, {depth}')}, i64 0")
                dirty = f.cget("%ctx", "stack_dirty")
                f.cset("%ctx", "stack_dirty", f.ins(f"or i64 {dirty}, {bit}"))
        else:
            if kind == "region":
                ent = f.gep(self.tab, 32 * min(idx, MAX_REGIONS - 1))
            else:  # the run's CPU's copy of a per-CPU map's values
                i = f.ins(f"add i64 {f.cget('%ctx', 'cpu')}, {idx}")
                i = f.ins(f"select i1 {f.ins(f'icmp ult i64 {i}, {MAX_REGIONS}')}, i64 {i}, "
                          f"i64 {MAX_REGIONS - 1}")
                ent = f.gep(self.tab, f.ins(f"shl i64 {i}, 5"))
            base = f.word(ent, _R["base"], "i64", _TAB)
            off = f.ins(f"sub i64 {addr}, {base}")
            fast = f.gep(f.word(ent, _R["host"], "ptr", _TAB), off)
            if self.unsafe and confident:
                return fast
            rsize = f.word(ent, _R["size"], "i64", _TAB)
            ok = f.ins(f"icmp ule i64 {off}, {rsize}")
            room = f.ins(f"sub i64 {rsize}, {off}")
            ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp ule i64 {size}, {room}')}")
            if write:
                wr = f.word(ent, _R["writable"], "i64", _TAB)
                ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp ne i64 {wr}, 0')}")
        yes, no, null, join = f.label("hit"), f.label("miss"), f.label("null"), f.label("got")
        f.cbr(ok, yes, no, _LIKELY)
        f.at(no)
        slow = f.ins(f"call ptr @translate(ptr %ctx, i64 {addr}, i64 {size}, "
                     f"i1 {'true' if write else 'false'})")
        if write:
            # translate only reads (so LLVM keeps table fields across it); a write that
            # may land in a stack frame marks every frame for a full clear.
            f.cset("%ctx", "stack_dirty", "-1")
        f.cbr(f.ins(f"icmp ne ptr {slow}, null"), join, null, _LIKELY)
        on_null(null)
        f.at(yes)
        f.br(join)
        f.at(join)
        return f.ins(f"phi ptr [ {fast}, %{yes} ], [ {slow}, %{no} ]")

    def _access(self, base: int, off: int, size: int, write: bool, pc: int, k: int,
                rem: str) -> str:
        """Host pointer for ``[base + off, +size)``, faulting the run when there is none."""
        at = self.frame_offset.get(pc)
        if at is not None:
            return self.f.gep(self.frame, STACK_SIZE + at)
        direct = self.direct.get(pc)
        if direct is not None:  # inside a run of accesses whose span was checked
            return direct
        addr = self._address(base, off)
        f = self.f

        def fault(label: str) -> None:
            f.at(label)
            # The faulting instruction counts as executed, as in the interpreter.
            left = f.ins(f"sub i64 {rem}, {k + 1}")
            f.do(f"call void @fault(ptr %ctx, i64 {ST_WRITE if write else ST_READ}, i64 {pc}, "
                 f"i64 {addr}, i64 {size}, i64 {left})")
            f.br("bail")

        return self._try(addr, size, write, self.hints.hint(self.hints.base.get(pc)), fault)

    def _atomic(self, i: Instruction, size: int, pc: int, k: int, rem: str) -> None:
        f = self.f
        ty = _INT[size]
        # Read first, then write, as the interpreter's load-then-store does: an
        # atomic on read-only memory faults as a write, outside every region as a read.
        p = self._access(i.dst, i.off, size, False, pc, k, rem)
        val = self._trunc(self.R(i.src), ty)
        if i.imm == op.BPF_CMPXCHG:
            expect = self._trunc(self.R(0), ty)
            self.mod.need(f"atomic_cmpxchg{size}")
            if pc in self.frame_offset:
                old = f.ins(f"call {ty} @atomic_cmpxchg{size * 8}(ptr {p}, {ty} {expect}, "
                            f"{ty} {val})")
            else:
                # cmpxchg writes only on a match, so read-only memory faults only then.
                addr = self._address(i.dst, i.off)
                self.mod.need("translate")
                q = f.ins(f"call ptr @translate(ptr %ctx, i64 {addr}, i64 {size}, i1 true)")
                f.cset("%ctx", "stack_dirty", "-1")  # it may write a stack frame
                rw, ro, done = f.label("rw"), f.label("ro"), f.label("done")
                f.cbr(f.ins(f"icmp ne ptr {q}, null"), rw, ro)
                f.at(rw)
                old_rw = f.ins(f"call {ty} @atomic_cmpxchg{size * 8}(ptr {q}, {ty} {expect}, "
                               f"{ty} {val})")
                rw_end = f.cur
                f.br(done)
                f.at(ro)
                old_ro = f.ins(f"load {ty}, ptr {p}, align 1{_PRG}")
                self._fault_unless(f.ins(f"icmp ne {ty} {old_ro}, {expect}"), ST_WRITE, pc,
                                   addr, str(size), rem, k)
                ro_end = f.cur
                f.br(done)
                f.at(done)
                old = f.ins(f"phi {ty} [ {old_rw}, %{rw_end} ], [ {old_ro}, %{ro_end} ]")
            self.W(0, old if size == 8 else f.ins(f"zext {ty} {old} to i64"))
            return
        if pc not in self.frame_offset:
            p = self._access(i.dst, i.off, size, True, pc, k, rem)
        kind = _ATOMIC_KIND[i.imm if i.imm == op.BPF_XCHG else i.imm & ~op.BPF_FETCH]
        self.mod.need(f"atomic_{kind}{size}")
        old = f.ins(f"call {ty} @atomic_{kind}{size * 8}(ptr {p}, {ty} {val})")
        if i.imm & op.BPF_FETCH:
            self.W(i.src, old if size == 8 else f.ins(f"zext {ty} {old} to i64"))

    def _alu(self, i: Instruction) -> None:
        f = self.f
        is64 = i.cls == op.BPF_ALU64
        code_op = op.bpf_op(i.code)
        d, s = i.dst, i.src
        if code_op == op.BPF_END:
            width = i.imm
            v = self.R(d)
            ty = _INT[width // 8]
            t = self._trunc(v, ty)
            if is64 or op.bpf_src(i.code) == op.BPF_TO_BE:  # the host is little-endian
                t = f.ins(f"call {ty} @llvm.bswap.{ty}({ty} {t})")
            self.W(d, t if width == 64 else f.ins(f"zext {ty} {t} to i64"))
            return
        ty = "i64" if is64 else "i32"
        bits = 64 if is64 else 32
        use_reg = op.bpf_src(i.code) == op.BPF_X
        a = self.R(d) if is64 else self._trunc(self.R(d), "i32")
        kv: int | None
        if use_reg:
            v = self.R(s) if is64 else self._trunc(self.R(s), "i32")
            kv = None
        else:
            kv = i.imm & ((1 << bits) - 1)
            v = _cint(ty, kv)
        res: str
        if code_op == op.BPF_MOV:
            if i.off:  # movsx: sign-extend the low off bits of src
                res = f.ins(f"sext {_INT[i.off // 8]} {self._trunc(self.R(s), _INT[i.off // 8])} "
                            f"to {ty}")
            else:
                res = v
        elif code_op == op.BPF_NEG:
            res = f.ins(f"sub {ty} 0, {a}")
        elif code_op in (op.BPF_LSH, op.BPF_RSH, op.BPF_ARSH):
            # Masked amounts: LLVM shifts by >= the width are poison.
            amt = _cint(ty, kv & (bits - 1)) if kv is not None else \
                f.ins(f"and {ty} {v}, {bits - 1}")
            res = f.ins(f"{_BINOP[code_op]} {ty} {a}, {amt}")
        elif code_op in (op.BPF_DIV, op.BPF_MOD):
            res = self._divmod(code_op == op.BPF_DIV, i.off == 1, a, v, kv, ty)
        elif code_op in _BINOP:
            res = f.ins(f"{_BINOP[code_op]} {ty} {a}, {v}")
        else:  # pragma: no cover - validate() admits no other ALU operation
            raise AssertionError(f"ALU op {code_op:#x}")
        self.W(d, res if is64 else f.ins(f"zext i32 {res} to i64"))

    def _divmod(self, is_div: bool, signed: bool, a: str, v: str, kv: int | None,
                ty: str) -> str:
        """Division and modulo with the kernel's answers where LLVM's are undefined.

        x / 0 = 0, x % 0 = x; signed INT_MIN / -1 = INT_MIN and INT_MIN % -1 = 0
        (``do_misc_fixups``). Each hazard is tested; the divisor LLVM sees is never 0
        or -1 on the signed path.
        """
        f = self.f
        minus1 = (1 << _WIDTH[ty]) - 1
        if kv is not None:  # constant divisor: decide the hazards now
            if kv == 0:
                return "0" if is_div else a
            if signed and kv == minus1:
                return f.ins(f"sub {ty} 0, {a}") if is_div else "0"
            opname = ("sdiv" if is_div else "srem") if signed else ("udiv" if is_div else "urem")
            return f.ins(f"{opname} {ty} {a}, {v}")
        is_zero = f.ins(f"icmp eq {ty} {v}, 0")
        if not signed:
            safe = f.ins(f"select i1 {is_zero}, {ty} 1, {ty} {v}")
            q = f.ins(f"{'udiv' if is_div else 'urem'} {ty} {a}, {safe}")
            return f.ins(f"select i1 {is_zero}, {ty} {'0' if is_div else a}, {ty} {q}")
        is_m1 = f.ins(f"icmp eq {ty} {v}, -1")
        safe = f.ins(f"select i1 {f.ins(f'or i1 {is_zero}, {is_m1}')}, {ty} 1, {ty} {v}")
        q = f.ins(f"{'sdiv' if is_div else 'srem'} {ty} {a}, {safe}")
        if is_div:
            m1 = f.ins(f"select i1 {is_m1}, {ty} {f.ins(f'sub {ty} 0, {a}')}, {ty} {q}")
            return f.ins(f"select i1 {is_zero}, {ty} 0, {ty} {m1}")
        m1 = f.ins(f"select i1 {is_m1}, {ty} 0, {ty} {q}")
        return f.ins(f"select i1 {is_zero}, {ty} {a}, {ty} {m1}")

    def _jmp(self, i: Instruction, pc: int, k: int, rem: str) -> None:
        f = self.f
        blk = self.blk
        code_op = op.bpf_op(i.code)
        if code_op == op.BPF_JA:
            self._goto(blk.succs[0], self.rem_after)
            return
        if code_op == op.BPF_EXIT:
            self._return(self.rem_after)
            return
        if code_op == op.BPF_CALL:
            self._call(i, pc)
            return
        is32 = i.cls == op.BPF_JMP32
        ty = "i32" if is32 else "i64"
        a = self._trunc(self.R(i.dst), ty)
        if op.bpf_src(i.code) == op.BPF_X:
            v = self._trunc(self.R(i.src), ty)
        else:
            v = _cint(ty, i.imm)
        if code_op == op.BPF_JSET:
            cond = f.ins(f"icmp ne {ty} {f.ins(f'and {ty} {a}, {v}')}, 0")
        elif code_op in _CMP_S:
            cond = f.ins(f"icmp {_CMP_S[code_op]} {ty} {a}, {v}")
        else:
            cond = f.ins(f"icmp {_CMP_U[code_op]} {ty} {a}, {v}")
        taken, fall = blk.succs
        if taken == fall:  # a jump to the next instruction: one edge
            self._goto(taken, self.rem_after)
            return
        yes, no = f.label("t"), f.label("f")
        f.cbr(cond, yes, no)
        f.at(yes)
        self._goto(taken, self.rem_after)
        f.at(no)
        self._goto(fall, self.rem_after)

    def _after_call(self, pc: int, record_pc: bool) -> str:
        """Leave if the callee or helper stopped the run; else return the budget left."""
        f = self.f
        status = f.cget("%ctx", "status")
        stop, cont = f.label("stopped"), f.label("back")
        f.cbr(f.ins(f"icmp ne i64 {status}, 0"), stop, cont, _UNLIKELY)
        f.at(stop)
        if record_pc:  # a helper's failure is reported at the call
            f.cset("%ctx", "fault_pc", str(pc))
        f.br("bail")
        f.at(cont)
        return f.cget("%ctx", "rem")

    def _call(self, i: Instruction, pc: int) -> None:
        f = self.f
        succ = self.blk.succs[0]
        if i.src == op.CallSrc.BPF_PSEUDO_CALL and op.bpf_src(i.code) == op.BPF_K:
            f.cset("%ctx", "rem", self.rem_after)
            callee = self.prog.funcs[pc + 1 + i.imm]
            args = ", ".join(f"i64 {self.R(n)}" for n in range(10))
            res = f.ins(f"call {RET_T} @{callee}(ptr %ctx, i64 {f.ins('add i64 %depth, 1')}, "
                        f"{args})")
            rem = self._after_call(pc, record_pc=False)
            for n in range(6):
                self.W(n, f.ins(f"extractvalue {RET_T} {res}, {n}"))
            self._goto(succ, rem)
            return
        if op.bpf_src(i.code) == op.BPF_K and i.imm == TAIL_CALL_ID:
            self._tail_call(pc)
            return
        kind = self.natives.kind(i.imm) if op.bpf_src(i.code) == op.BPF_K else None
        if kind is not None:
            native = self._native(kind, pc)
            if native is not None:
                value, nat_label = native
                slow_label = f.label("slow")
                join = f.label("joined")
                f.cbr(f.ins(f"icmp eq i64 {value}, {c64(SLOW)}"), slow_label, join, _UNLIKELY)
                f.at(slow_label)
                r0, rem = self._helper_call(i, pc)
                slow_end = f.cur
                f.br(join)
                f.at(join)
                self.W(0, f.ins(f"phi i64 [ {value}, %{nat_label} ], [ {r0}, %{slow_end} ]"))
                self._goto(succ, f.ins(f"phi i64 [ {self.rem_after}, %{nat_label} ], "
                                       f"[ {rem}, %{slow_end} ]"))
                return
        r0, rem = self._helper_call(i, pc)
        self.W(0, r0)
        self._goto(succ, rem)

    def _helper_call(self, i: Instruction, pc: int) -> tuple[str, str]:
        """The helper through the run context's table (Python trampolines and native
        twins); returns r0 and the budget left."""
        f = self.f
        f.cset("%ctx", "rem", self.rem_after)
        f.cset("%ctx", "depth", "%depth")  # for callbacks a helper starts
        table = f.cget("%ctx", "helpers", "ptr")
        hid = self.R(i.dst) if op.bpf_src(i.code) == op.BPF_X else str(i.imm)
        known = f.ins(f"icmp ult i64 {hid}, {f.cget('%ctx', 'nhelpers')}")
        look, join = f.label("look"), f.label("have")
        before = f.cur
        f.cbr(known, look, join)
        f.at(look)
        got = f.ins(f"load i64, ptr {f.gep(table, f.ins(f'shl i64 {hid}, 3'))}, align 8")
        f.br(join)
        f.at(join)
        addr = f.ins(f"phi i64 [ 0, %{before} ], [ {got}, %{look} ]")
        if op.bpf_src(i.code) == op.BPF_X:  # callx: the helper id is in dst
            self._fault_unless(f.ins(f"icmp ne i64 {addr}, 0"), ST_CALLX, pc, hid, str(i.dst),
                               self.rem_after, -1)
        else:
            self._fault_unless(f.ins(f"icmp ne i64 {addr}, 0"), ST_CALLX, pc, hid, "0",
                               self.rem_after, -1)
        fnp = f.ins(f"inttoptr i64 {addr} to ptr")
        args = ", ".join(f"i64 {self.R(n)}" for n in range(1, 6))
        r0 = f.ins(f"call i64 {fnp}(ptr %ctx, {args})")
        rem = self._after_call(pc, record_pc=True)
        return r0, rem

    def _tail_call(self, pc: int) -> None:
        """bpf_tail_call: the target's r0 ends this function; a failed call falls through.

        The run context's ``tail_call`` entry runs the target (Python: the
        context's hook, as in the interpreter) and sets ``tail_exit`` on success.
        """
        f = self.f
        a2 = self.call_args.get(pc, (None,) * 6)[2]
        m = self.natives.map_at(a2[1]) if a2 is not None and a2[0] == "c" else None
        if self.natives.tail_calls and m is not None and m.kind == "progs":
            self._native_tail_call(pc, m)
            return
        f.cset("%ctx", "rem", self.rem_after)
        f.cset("%ctx", "depth", "%depth")
        fnp = f.cget("%ctx", "tail_call", "ptr")
        args = ", ".join(f"i64 {self.R(n)}" for n in range(1, 6))
        r0 = f.ins(f"call i64 {fnp}(ptr %ctx, {args})")
        rem = self._after_call(pc, record_pc=True)
        self.W(0, r0)
        done, cont = f.label("tail"), f.label("notail")
        f.cbr(f.ins(f"icmp ne i64 {f.cget('%ctx', 'tail_exit')}, 0"), done, cont)
        f.at(done)
        f.cset("%ctx", "tail_exit", "0")
        self._return(rem)
        f.at(cont)
        self._goto(self.blk.succs[0], rem)

    def _native_tail_call(self, pc: int, m: MapInfo) -> None:
        """bpf_tail_call into a JIT-compiled XDP program, natively: the run context's
        tail table names the target of each slot (its own run context and XDP entry);
        an empty slot, or one the runtime left to Python, takes the Python hook."""
        f = self.f
        idx = f.ins(f"and i64 {self.R(3)}, 4294967295")
        inside, look, python, native = (f.label(n) for n in ("tin", "tlook", "tpy", "tnat"))
        before = f.cur
        f.cbr(f.ins(f"icmp ult i64 {idx}, {m.max_entries}"), look, python)
        f.at(look)
        ent = f.gep(f.cget("%ctx", "tails", "ptr"),
                    f.ins(f"shl i64 {f.ins(f'add i64 {idx}, {m.tail_base}')}, 5"))
        fn = f.word(ent, 1, "i64", "")
        f.cbr(f.ins(f"icmp ne i64 {fn}, 0"), inside, python)
        f.at(python)
        del before
        # The Python hook: what the interpreter does (empty slot, a program not on the JIT).
        f.cset("%ctx", "rem", self.rem_after)
        f.cset("%ctx", "depth", "%depth")
        fnp = f.cget("%ctx", "tail_call", "ptr")
        args = ", ".join(f"i64 {self.R(n)}" for n in range(1, 6))
        r0 = f.ins(f"call i64 {fnp}(ptr %ctx, {args})")
        rem = self._after_call(pc, record_pc=True)
        py_end = f.cur
        done, cont = f.label("tail"), f.label("notail")
        f.cbr(f.ins(f"icmp ne i64 {f.cget('%ctx', 'tail_exit')}, 0"), done, cont)
        f.at(inside)
        cnt = f.cget("%ctx", "tail_cnt")
        over, go = f.label("tover"), native
        f.cbr(f.ins(f"icmp uge i64 {cnt}, {MAX_TAIL_CALL_CNT}"), over, go)
        f.at(go)
        f.cset("%ctx", "tail_cnt", f.ins(f"add i64 {cnt}, 1"))
        tctx = f.word(ent, 0, "ptr", "")
        budget = f.word(ent, 2, "i64", "")
        self.mod.need("tailcall")
        r0n = f.ins(f"call i64 @tailcall(ptr %ctx, ptr {tctx}, i64 {fn}, i64 {budget}, "
                    f"i64 {f.ins(f'add i64 {idx}, {m.tail_base}')})")
        failed, ok = f.label("tfail"), f.label("tok")
        f.cbr(f.ins(f"icmp ne i64 {f.cget('%ctx', 'status')}, 0"), failed, ok, _UNLIKELY)
        f.at(failed)
        f.br("bail")  # the fault record is the target's (ST_TAIL)
        f.at(ok)
        # Success ends the calling function with the target's r0, as the hook does.
        nat_regs = list(self.regs)
        self.W(0, r0n)
        self._return(self.rem_after)
        # Too many tail calls: -ENOENT and go on (the hook returns None).
        f.at(over)
        over_end = f.cur
        f.br(cont)
        f.at(done)
        self.W(0, r0)
        f.cset("%ctx", "tail_exit", "0")
        self._return(rem)
        f.at(cont)
        self.regs = nat_regs
        self.W(0, f.ins(f"phi i64 [ {r0}, %{py_end} ], [ {c64(-2)}, %{over_end} ]"))
        self._goto(self.blk.succs[0], f.ins(f"phi i64 [ {rem}, %{py_end} ], "
                                            f"[ {self.rem_after}, %{over_end} ]"))

    def _return(self, rem: str) -> None:
        f = self.f
        f.cset("%ctx", "rem", rem)
        ret = "undef"
        for n in range(6):
            ret = f.ins(f"insertvalue {RET_T} {ret}, i64 {self.R(n)}, {n}")
        f.do(f"ret {RET_T} {ret}")

    # -- native helpers ------------------------------------------------------------------
    def _timespec(self) -> str:
        """A struct timespec in the entry block (an alloca elsewhere would grow the stack
        each time it runs)."""
        self.f.lines[1] = "  %ts = alloca { i64, i64 }, align 8"
        return "%ts"

    def _arg_pointer(self, pc: int, reg: int, size: int, write: bool,
                     nulls: list[str], out: str) -> str:
        """Host pointer for helper argument ``[r<reg>, +size)``; where the regions refuse it
        the code goes to ``out`` from a block listed in ``nulls`` (the Python helper then
        reads it itself and faults as the interpreter does)."""
        f = self.f
        a = self.call_args.get(pc, (None,) * 6)[reg]
        if a is not None and a[0] == "fp" and -STACK_SIZE <= a[1] and a[1] + size <= 0:
            return f.gep(self.frame, STACK_SIZE + a[1])

        def to_python(label: str) -> None:
            f.at(label)
            f.br(out)
            nulls.append(label)

        hint = self.hints.hint(self.hints.base.get(pc) if reg == 2 else None)
        return self._try(self.R(reg), size, write, hint, to_python)

    def _native(self, kind: str, pc: int) -> tuple[str, str] | None:
        """The native twin of a helper call: (r0 or SLOW, the label it is ready in)."""
        f = self.f
        mod = self.mod
        r = [self.R(n) for n in range(6)]
        a1 = self.call_args.get(pc, (None,) * 6)[1]
        m = self.natives.map_at(a1[1]) if a1 is not None and a1[0] == "c" else None
        if kind in ("map_lookup", "map_update", "redirect_map") and m is None:
            return None
        if kind == "ktime":
            ok = f.flag(NF_CLOCK)
            yes, join = f.label("clk"), f.label("clkj")
            before = f.cur
            f.cbr(ok, yes, join, _LIKELY)
            f.at(yes)
            ts = self._timespec()
            f.do(f"call i32 @clock_gettime(i32 1, ptr {ts})")
            sec = f.ins(f"load i64, ptr {ts}, align 8")
            nsec = f.ins(f"load i64, ptr {f.gep(ts, 8)}, align 8")
            ns = f.ins(f"add i64 {f.ins(f'mul i64 {sec}, 1000000000')}, {nsec}")
            f.br(join)
            f.at(join)
            return f.ins(f"phi i64 [ {c64(SLOW)}, %{before} ], [ {ns}, %{yes} ]"), f.cur
        if kind == "smp_id":
            ok = f.flag(NF_RUNCTX)
            v = f.ins(f"select i1 {ok}, i64 {f.cget('%ctx', 'cpu')}, i64 {c64(SLOW)}")
            return v, f.cur
        if kind in ("adjust_head", "adjust_meta", "adjust_tail"):
            mod.need(kind)
            return f.ins(f"call i64 @{kind}(ptr %ctx, i64 {r[1]}, i64 {r[2]})"), f.cur
        if kind == "buff_len":
            mod.need(kind)
            return f.ins(f"call i64 @buff_len(ptr %ctx, i64 {r[1]})"), f.cur
        if kind in ("load_bytes", "store_bytes"):
            mod.need(kind)
            return f.ins(f"call i64 @{kind}(ptr %ctx, i64 {r[1]}, i64 {r[2]}, i64 {r[3]}, "
                         f"i64 {r[4]})"), f.cur
        if kind == "csum_diff":
            mod.need(kind)
            args = ", ".join(f"i64 {r[n]}" for n in range(1, 6))
            return f.ins(f"call i64 @csum_diff(ptr %ctx, {args})"), f.cur
        if kind in ("redirect", "redirect_xsk"):
            mod.need(kind)
            return f.ins(f"call i64 @{kind}(ptr %ctx, i64 {r[1]}, i64 {r[2]})"), f.cur
        assert m is not None
        if kind == "redirect_map":
            if m.kind != "entries":
                return None
            self.prog.used_maps[("redir", m.slot)] = m
            return f.ins(f"call i64 @{self.prog.tag}_redir{m.slot}(ptr %ctx, i64 {r[2]}, "
                         f"i64 {r[3]})"), f.cur
        if m.kind not in ("array", "hash"):
            return None
        ok = f.flag(NF_RUNCTX)
        start = f.cur
        go, out = f.label("nat"), f.label("natj")
        f.cbr(ok, go, out, _LIKELY)
        f.at(go)
        nulls: list[str] = []
        key = self._arg_pointer(pc, 2, m.key_size, False, nulls, out)
        if kind == "map_update":
            val = self._arg_pointer(pc, 3, m.value_size, False, nulls, out)
        if kind == "map_lookup" and m.kind == "array":
            cpu = f.cget("%ctx", "cpu")
            idx = f.ins(f"zext i32 {f.ins(f'load i32, ptr {key}, align 1{_PRG}')} to i64")
            ok = f.ins(f"and i1 {f.ins(f'icmp ult i64 {idx}, {m.max_entries}')}, "
                       f"{f.ins(f'icmp ult i64 {cpu}, {m.nr_cpus}')}")
            addr = f.ins(f"add i64 {c64(m.value_base)}, {f.ins(f'mul i64 {idx}, {m.elem_size}')}")
            if m.percpu:
                addr = f.ins(f"add i64 {addr}, {f.ins(f'mul i64 {cpu}, {m.cpu_stride}')}")
            value = f.ins(f"select i1 {ok}, i64 {addr}, i64 0")
        elif kind == "map_lookup":
            self.prog.used_maps[("lookup", m.slot)] = m
            value = f.ins(f"call i64 @{self.prog.tag}_lookup{m.slot}(ptr %ctx, ptr {key})")
        elif kind == "map_update":
            self.prog.used_maps[("update", m.slot)] = m
            value = f.ins(f"call i64 @{self.prog.tag}_update{m.slot}(ptr %ctx, ptr {key}, "
                          f"ptr {val}, i64 {r[4]})")
        else:
            raise AssertionError(kind)
        done = f.cur
        f.br(out)
        f.at(out)
        inc = "".join(f", [ {c64(SLOW)}, %{lbl} ]" for lbl in nulls)
        v = f.ins(f"phi i64 [ {c64(SLOW)}, %{start} ], [ {value}, %{done} ]{inc}")
        return v, f.cur


# --- the whole module -------------------------------------------------------------

class _Module:
    """Shared functions a module's programs ask for, emitted once each."""

    def __init__(self) -> None:
        self.needed: set[str] = {"fault", "translate"}
        self.natives = Natives()

    def need(self, name: str) -> None:
        self.needed.add(name)
        for dep in _NEEDS.get(name, ()):
            self.needed.add(dep)

    def shared(self) -> str:
        out = []
        for name in sorted(self.needed):
            if name.startswith("atomic_"):
                kind = name[len("atomic_"):-1]
                out.append(_atomic_fn(kind, int(name[-1])))
            else:
                out.append(_SHARED[name](self.natives))
        return "".join(out)


def _zero_fn(prog: _Prog) -> str:
    """``zero(ctx, depth)``: make frame ``depth`` all zeros, as a fresh interpreter frame.

    Between runs a frame can only hold non-zero bytes where proven stores
    write (the footprint) unless ``stack_dirty`` says otherwise."""
    f = _Text()
    f.at("entry")
    frame = f.gep(f.cget("%ctx", "stack", "ptr"), f.ins("shl i64 %depth, 9"))
    footprint = prog.footprint
    if sum(b - a for a, b in footprint) >= STACK_SIZE // 2:
        footprint = [(0, STACK_SIZE)]
    dirty = f.cget("%ctx", "stack_dirty")
    bit = f.ins("shl i64 1, %depth")
    f.cbr(f.ins(f"icmp ne i64 {f.ins(f'and i64 {dirty}, {bit}')}, 0"), "full", "part", _UNLIKELY)
    f.at("full")
    f.memset(frame, STACK_SIZE)
    f.cset("%ctx", "stack_dirty", f.ins(f"and i64 {dirty}, {f.ins(f'xor i64 {bit}, -1')}"))
    f.do("ret void")
    f.at("part")
    for a, b in footprint:
        f.memset(f.gep(frame, a), b - a)
    f.do("ret void")
    return f.text(f"define internal void @{prog.tag}_zero(ptr %ctx, i64 %depth) nounwind")


def _call_main(f: _Text, prog: _Prog, r1: str, r2: str, attrs: str = "#1") -> str:
    """Start a run: frame 0 fresh, every register zero but r1, r2; return r0."""
    f.cset("%ctx", "max_depth", "0")
    f.do(f"call void @{prog.tag}_zero(ptr %ctx, i64 0)")
    args = ", ".join(["i64 0", f"i64 {r1}", f"i64 {r2}"] + ["i64 0"] * 7)
    res = f.ins(f"call {RET_T} @{prog.funcs[0]}(ptr %ctx, i64 0, {args}) {attrs}")
    return f.ins(f"extractvalue {RET_T} {res}, 0")


def _entry_fn(prog: _Prog) -> str:
    f = _Text()
    f.at("entry")
    # One copy of each bpf function: entry points call them, never inline them.
    f.do(f"ret i64 {_call_main(f, prog, '%r1', '%r2')}")
    return f.text(f"define i64 @{prog.tag}_run(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def _callback_fn(prog: _Prog, pc: int) -> str:
    f = _Text()
    f.at("entry")
    args = ", ".join(["i64 0"] + [f"i64 %r{n}" for n in range(1, 6)] + ["i64 0"] * 4)
    res = f.ins(f"call {RET_T} @{prog.funcs[pc]}(ptr %ctx, i64 %depth, {args}) #1")
    f.do(f"ret i64 {f.ins(f'extractvalue {RET_T} {res}, 0')}")
    params = ", ".join(f"i64 %r{n}" for n in range(1, 6))
    return f.text(f"define i64 @{prog.tag}_cb{pc}(ptr %ctx, i64 %depth, {params}) nounwind")


def _xdp_fn(prog: _Prog) -> str:
    """``<tag>_xdp(ctx, desc)``: run the program once per frame of an XDP batch.

    Per frame: the xdp_buff fields from the descriptor, the packet region and
    the xdp_md values from them, a fresh run (frame 0 zeroed, the budget full),
    ``repeat`` runs on the same buffer (test_run's repeat: nothing is reset
    between them, a fault ends them), then the verdict (XDP_ABORTED on a fault),
    the buffer's new edges, the fault record and the redirect state written
    back. An interrupted Python helper (ST_ABORT) ends the batch.
    """
    nat = prog.natives
    f = _Text()
    f.at("entry")

    def dw(name: str, ty: str = "i64") -> str:
        return f.word("%desc", _X[name], ty, "")

    count, repeat, budget = dw("count"), dw("repeat"), dw("budget")
    frames, stride, frame_sz = dw("frames", "ptr"), dw("stride"), dw("frame_sz")
    # rows (i64 per frame, or null): frame i is row rows[i] of the frames array, so a
    # poll can run pages scattered over a page pool without gathering them first.
    rows = dw("rows", "ptr")
    has_rows = f.ins(f"icmp ne ptr {rows}, null")
    d_off, d_len, m_len = dw("data_off", "ptr"), dw("data_len", "ptr"), dw("meta_len", "ptr")
    meta_ok, frags, tail0 = dw("meta_ok"), dw("frags"), dw("tail_cnt0")
    rxq, ifindex, egress = dw("rxq", "ptr"), dw("ifindex", "ptr"), dw("egress")
    outs = {n: dw(n, "ptr") for n in ("act_out", "off_out", "len_out", "meta_out",
                                      "status_out", "pc_out", "addr_out", "redirect_out")}
    has_meta = f.ins(f"icmp ne ptr {m_len}, null")
    sup = f.ins(f"icmp ne i64 {meta_ok}, 0")
    cv = f.cget("%ctx", "ctx_values", "ptr")
    f.br("head")
    f.at("head")
    f.do("%i = phi i64 [ 0, %entry ], [ %i1, %next ]")
    f.cbr(f.ins(f"icmp ult i64 %i, {count}"), "body", "done")
    f.at("body")
    f.cbr(has_rows, "rw", "rj")
    f.at("rw")
    row = f.at_index(rows, "%i", "i64", 8)
    f.br("rj")
    f.at("rj")
    rowi = f.ins(f"phi i64 [ {row}, %rw ], [ %i, %body ]")
    frame = f.gep(frames, f.ins(f"mul i64 {rowi}, {stride}"))
    data = f.ins(f"zext i32 {f.at_index(d_off, '%i', 'i32', 4)} to i64")
    dlen = f.at_index(d_len, "%i", "i32", 4)
    end = f.ins(f"add i64 {data}, {f.ins(f'zext i32 {dlen} to i64')}")
    f.cbr(has_meta, "ml", "mz")
    f.at("ml")
    ml = f.ins(f"zext i32 {f.at_index(m_len, '%i', 'i32', 4)} to i64")
    f.br("mj")
    f.at("mz")
    f.br("mj")
    f.at("mj")
    mlen = f.ins(f"phi i64 [ {ml}, %ml ], [ 0, %mz ]")
    meta = f.ins(f"select i1 {sup}, i64 {f.ins(f'sub i64 {data}, {mlen}')}, "
                 f"i64 {f.ins(f'add i64 {data}, 1')}")
    for name, v in (("x_data", data), ("x_data_end", end), ("x_data_meta", meta),
                    ("x_frame_sz", frame_sz), ("x_frags", frags)):
        f.cset("%ctx", name, v)
    f.cset("%ctx", "x_frame", frame, "ptr")
    f.set_word(cv, 3, f.ins(f"zext i32 {f.at_index(ifindex, '%i', 'i32', 4)} to i64"), "i64", _CV)
    f.set_word(cv, 4, f.ins(f"zext i32 {f.at_index(rxq, '%i', 'i32', 4)} to i64"), "i64", _CV)
    f.set_word(cv, 5, egress, "i64", _CV)
    f.cset("%ctx", "batch_index", "%i")
    f.br("rep")
    f.at("rep")
    f.do("%r = phi i64 [ 0, %mj ], [ %r1, %again ]")
    # Frame 0 first: a full clear is a memset LLVM cannot tell from the context's
    # fields, which would then be reloaded in the program after being stored here.
    f.do(f"call void @{prog.tag}_zero(ptr %ctx, i64 0)")
    f.cset("%ctx", "max_depth", "0")
    f.do("call void @pkt(ptr %ctx)")
    f.cset("%ctx", "status", "0")
    f.cset("%ctx", "tail_cnt", tail0)
    f.cset("%ctx", "rem", budget)
    f.cset("%ctx", "depth", "0")
    f.cset("%ctx", "tail_exit", "0")
    args = ", ".join(["i64 0", f"i64 {c64(nat.ctx_base)}"] + ["i64 0"] * 8)
    res = f.ins(f"call {RET_T} @{prog.funcs[0]}(ptr %ctx, i64 0, {args}) #0")
    r0 = f.ins(f"extractvalue {RET_T} {res}, 0")
    status = f.cget("%ctx", "status")
    f.do("%r1 = add i64 %r, 1")
    more = f.ins(f"and i1 {f.ins(f'icmp eq i64 {status}, 0')}, "
                 f"{f.ins(f'icmp ult i64 %r1, {repeat}')}")
    f.cbr(more, "again", "write")
    f.at("again")
    f.br("rep")
    f.at("write")
    failed = f.ins(f"icmp ne i64 {status}, 0")
    act = f.ins(f"select i1 {failed}, i64 0, i64 {f.ins(f'and i64 {r0}, 4294967295')}")
    xd, xe, xm = (f.cget("%ctx", n) for n in ("x_data", "x_data_end", "x_data_meta"))
    msup = f.ins(f"icmp ule i64 {xm}, {xd}")
    mout = f.ins(f"select i1 {msup}, i64 {f.ins(f'sub i64 {xd}, {xm}')}, i64 0")
    for name, v in (("act_out", act), ("off_out", xd), ("len_out", f.ins(f"sub i64 {xe}, {xd}")),
                    ("meta_out", mout)):
        f.put_index(outs[name], "%i", f.ins(f"trunc i64 {v} to i32"), "i32", 4)
    maxd = f.cget("%ctx", "max_depth")
    word = f.ins(f"or i64 {status}, {f.ins(f'shl i64 {maxd}, 8')}")
    f.put_index(outs["status_out"], "%i", f.ins(f"trunc i64 {word} to i32"), "i32", 4)
    fpc = f.ins(f"select i1 {failed}, i64 {f.cget('%ctx', 'fault_pc')}, i64 0")
    f.put_index(outs["pc_out"], "%i", f.ins(f"trunc i64 {fpc} to i32"), "i32", 4)
    faddr = f.ins(f"select i1 {failed}, i64 {f.cget('%ctx', 'fault_addr')}, i64 0")
    f.put_index(outs["addr_out"], "%i", faddr, "i64", 8)
    # The redirect record, for a redirected frame (the rows of others stay zero).
    f.cbr(f.ins(f"icmp eq i64 {act}, 4"), "rd", "rdj")
    f.at("rd")
    rd = f.gep(outs["redirect_out"], f.ins("shl i64 %i, 5"))
    for n, name in enumerate(("ri_map_id", "ri_map_type", "ri_tgt_index", "ri_flags")):
        f.set_word(rd, n, f.cget("%ctx", name), "i64", "")
    # A datapath batch (consume_ri) carries the redirect out as xdp_do_redirect
    # does, which clears map, map_id, map_type and flags (tgt_index stays).
    f.cbr(f.ins(f"icmp ne i64 {dw('consume_ri')}, 0"), "rdc", "rdj")
    f.at("rdc")
    for name in ("ri_map_id", "ri_map_type", "ri_flags", "ri_map"):
        f.cset("%ctx", name, "0")
    f.br("rdj")
    f.at("rdj")
    f.do("%i1 = add i64 %i, 1")
    f.set_word("%desc", _X["done"], "%i1", "i64", "")
    # An interrupted Python helper stops the whole batch at this frame.
    f.cbr(f.ins(f"icmp eq i64 {status}, {ST_ABORT}"), "done", "next")
    f.at("next")
    f.br("head")
    f.at("done")
    f.do("ret void")
    return f.text(f"define void @{prog.tag}_xdp(ptr %ctx, ptr %desc) nounwind")


def lower_many(programs: Sequence[ProgramInput]) -> tuple[str, list[LoweredModule]]:
    """Lower several programs into one module (shared internals emitted once); returns
    the IR text and, per program, its exported symbols (``ir`` left empty)."""
    mod = _Module()
    bodies: list[str] = []
    results: list[LoweredModule] = []
    for p in programs:
        if p.natives.xdp or p.natives.helpers:
            same = (mod.natives.pkt_base, mod.natives.ctx_base) == \
                (p.natives.pkt_base, p.natives.ctx_base)
            if mod.natives.xdp and p.natives.xdp and not same:
                raise ValueError("programs of one module must agree on the XDP addresses")
            mod.natives = p.natives
        prog = _Prog(mod, p)
        for pc in sorted(prog.funcs):
            bodies.append(_Func(prog, pc).text)
        bodies.append(_zero_fn(prog))
        for (what, _slot), m in sorted(prog.used_maps.items()):
            if what == "lookup":
                bodies.append(_hash_lookup_fn(p.tag, m))
            elif what == "update":
                bodies.append(_array_update_fn(p.tag, m) if m.kind == "array"
                              else _hash_update_fn(p.tag, m))
            else:
                bodies.append(_redirect_map_fn(p.tag, m))
        entry = None
        if p.emit_run:
            bodies.append(_entry_fn(prog))
            entry = f"{p.tag}_run"
        xdp = None
        if p.natives.xdp:
            mod.need("pkt")
            bodies.append(_xdp_fn(prog))
            xdp = f"{p.tag}_xdp"
        cbs = {}
        for pc in p.callbacks:
            bodies.append(_callback_fn(prog, pc))
            cbs[pc] = f"{p.tag}_cb{pc}"
        results.append(LoweredModule("", entry, xdp, cbs))
    text = _DECLS + mod.shared() + "".join(bodies) + _METADATA
    return text, results


def lower(insns: Sequence[Instruction], layout: Layout, imm64: Mapping[int, int], *,
          ctx_loads: Mapping[int, int] | None = None, callbacks: Sequence[int] = (),
          tag: str = "p", natives: Natives | None = None, unsafe: bool = False,
          emit_run: bool = True) -> LoweredModule:
    """Lower a validated program. ``imm64`` holds every ld_imm64's resolved value by pc;
    ``ctx_loads`` the proven context loads (pc -> index into the run context's
    ``ctx_values``, see :mod:`pyxdp.vm.ctx_access`); ``callbacks`` are
    BPF_PSEUDO_FUNC targets that need an entry point of their own.

    Exported symbols (C ABI):

    * ``u64 <tag>_run(ctx *, u64 r1, u64 r2)``: one run from pc 0 at depth 0;
    * ``void <tag>_xdp(ctx *, xdp_batch *)``: with ``natives.xdp``, the batch loop;
    * ``u64 <tag>_cb<pc>(ctx *, u64 depth, u64 r1, ..., u64 r5)``: a callback.
    """
    p = ProgramInput(tuple(insns), layout, dict(imm64), dict(ctx_loads or {}),
                     tuple(callbacks), tag, natives or Natives(), unsafe, emit_run)
    text, (res,) = lower_many([p])
    return LoweredModule(text, res.entry, res.xdp_entry, res.callbacks)


def _make_batch() -> str:
    """``pyxdp_batch(ctx, batch, run)``: the per-frame loop around a program's run entry.

    Before each frame the slots rewrite their region table entries; after it
    r0, the status word (``status | deepest frame << 8``, so a fault can be
    rendered later with the stack regions the run had), the fault pc and
    address are stored. Shared by every program: ``run`` is its entry point.
    """
    f = _Text()
    f.at("entry")

    def dw(name: str, ty: str = "i64") -> str:
        return f.word("%desc", _B[name], ty, "")

    count, budget, nslots = dw("count"), dw("budget"), dw("nslots")
    slots, r1s, r2s = dw("slots", "ptr"), dw("r1", "ptr"), dw("r2", "ptr")
    r0_out, st_out, pc_out, addr_out = (dw(n, "ptr") for n in
                                        ("r0_out", "status_out", "pc_out", "addr_out"))
    cvs = dw("ctx_values", "ptr")
    table = f.cget("%ctx", "regions", "ptr")
    keep = f.cget("%ctx", "ctx_values", "ptr")
    f.br("head")
    f.at("head")
    f.do("%i = phi i64 [ 0, %entry ], [ %i1, %tail ]")
    f.cbr(f.ins(f"icmp ult i64 %i, {count}"), "body", "done")
    f.at("body")
    f.br("shead")
    f.at("shead")
    f.do("%j = phi i64 [ 0, %body ], [ %j1, %sbody.end ]")
    f.cbr(f.ins(f"icmp ult i64 %j, {nslots}"), "sbody", "go")
    f.at("sbody")
    slot = f.gep(slots, f.ins(f"mul i64 %j, {8 * len(SLOT_FIELDS)}"))
    ent = f.gep(table, f.ins(f"shl i64 {f.word(slot, _S['region'], 'i64', '')}, 5"))
    offsets = f.word(slot, _S["offsets"], "ptr", "")
    sizes = f.word(slot, _S["sizes"], "ptr", "")
    f.cbr(f.ins(f"icmp eq ptr {offsets}, null"), "o0", "o1")
    f.at("o1")
    o1 = f.at_index(offsets, "%i", "i64", 8)
    f.br("oj")
    f.at("o0")
    o0 = f.ins(f"mul i64 %i, {f.word(slot, _S['stride'], 'i64', '')}")
    f.br("oj")
    f.at("oj")
    off = f.ins(f"phi i64 [ {o1}, %o1 ], [ {o0}, %o0 ]")
    f.cbr(f.ins(f"icmp eq ptr {sizes}, null"), "z0", "z1")
    f.at("z1")
    z1 = f.at_index(sizes, "%i", "i64", 8)
    f.br("zj")
    f.at("z0")
    z0 = f.word(slot, _S["size"], "i64", "")
    f.br("zj")
    f.at("zj")
    size = f.ins(f"phi i64 [ {z1}, %z1 ], [ {z0}, %z0 ]")
    f.set_word(ent, _R["host"], f.gep(f.word(slot, _S["host"], "ptr", ""), off), "ptr", _TAB)
    f.set_word(ent, _R["size"], size, "i64", _TAB)
    f.do("%j1 = add i64 %j, 1")
    f.br("sbody.end")
    f.at("sbody.end")
    f.br("shead")
    f.at("go")
    # Per-frame context fields (xdp_md's data, data_end...) when the batch has them.
    own = f.gep(cvs, f.ins(f"mul i64 %i, {8 * CTX_VALUES}"))
    f.cset("%ctx", "ctx_values", f.ins(f"select i1 {f.ins(f'icmp eq ptr {cvs}, null')}, "
                                       f"ptr {keep}, ptr {own}"), "ptr")
    f.cset("%ctx", "status", "0")
    f.cset("%ctx", "rem", budget)
    f.cset("%ctx", "batch_index", "%i")
    r0 = f.ins(f"call i64 %run(ptr %ctx, i64 {f.at_index(r1s, '%i', 'i64', 8)}, "
               f"i64 {f.at_index(r2s, '%i', 'i64', 8)})")
    status = f.cget("%ctx", "status")
    failed = f.ins(f"icmp ne i64 {status}, 0")
    f.put_index(r0_out, "%i", f.ins(f"select i1 {failed}, i64 0, i64 {r0}"), "i64", 8)
    maxd = f.cget("%ctx", "max_depth")
    word = f.ins(f"or i64 {status}, {f.ins(f'shl i64 {maxd}, 8')}")
    f.put_index(st_out, "%i", f.ins(f"trunc i64 {word} to i32"), "i32", 4)
    fpc = f.ins(f"select i1 {failed}, i64 {f.cget('%ctx', 'fault_pc')}, i64 0")
    f.put_index(pc_out, "%i", f.ins(f"trunc i64 {fpc} to i32"), "i32", 4)
    fad = f.ins(f"select i1 {failed}, i64 {f.cget('%ctx', 'fault_addr')}, i64 0")
    f.put_index(addr_out, "%i", fad, "i64", 8)
    f.do("%i1 = add i64 %i, 1")
    # An interrupted Python helper stops the whole batch at this frame.
    f.cbr(f.ins(f"icmp eq i64 {status}, {ST_ABORT}"), "done", "tail")
    f.at("tail")
    f.br("head")
    f.at("done")
    f.do("ret void")
    return f.text("define void @pyxdp_batch(ptr %ctx, ptr %desc, ptr %run) nounwind")


# --- natively implemented helpers -------------------------------------------------

def runtime_module() -> str:
    """IR of the code every program shares: the batch loop and ``pyxdp_ktime_get_ns``.

    Helpers have the C ABI ``u64 f(ctx *, r1..r5)``. ``pyxdp_ktime_get_ns``
    reads CLOCK_MONOTONIC, the clock ``time.monotonic_ns`` (the interpreter's
    ktime_get_ns) reads; ``clock_gettime`` is bound by the engine.
    """
    f = _Text()
    f.at("entry")
    ts = f.ins("alloca { i64, i64 }")
    f.do(f"call i32 @clock_gettime(i32 1, ptr {ts})")  # CLOCK_MONOTONIC
    sec = f.ins(f"load i64, ptr {ts}, align 8")
    nsec = f.ins(f"load i64, ptr {f.gep(ts, 8)}, align 8")
    secns = f.ins(f"mul i64 {sec}, 1000000000")
    f.do(f"ret i64 {f.ins(f'add i64 {secns}, {nsec}')}")
    kt = f.text("define i64 @pyxdp_ktime_get_ns(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, i64 %r4, "
                "i64 %r5) nounwind")
    return _DECLS + kt + _make_batch() + _METADATA
