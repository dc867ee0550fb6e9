"""Lowering validated eBPF to LLVM IR: what ``arch/*/net/bpf_jit_comp.c`` does, made safe.

The kernel's JITs translate bytecode the verifier has already proven safe.
pyxdp has no verifier, so this lowering keeps the reference interpreter's
run-time checks (:mod:`pyxdp.vm.interpreter`) and makes them native:

* registers are ``alloca`` slots (promoted to SSA by mem2reg), one LLVM basic
  block per eBPF basic block; each bpf-to-bpf function is an LLVM function
  taking and returning the register file, so r6-r9 survive a call the way the
  interpreter's frame stack restores them;
* every load, store and atomic goes through ``translate``: a fake 64-bit
  address is looked up in the run context's region table (then in the
  per-depth stack frames) and becomes a host pointer, or the access stops the
  run with a fault record; :class:`_FrameAnalysis` proves r10-relative
  accesses in bounds and those skip the lookup;
* the instruction budget is exact: a block takes its length off the budget
  once, and tests how much is left only where running short could show
  (before each load, store or atomic and before its last instruction), so the
  fault pc, the memory effects and ``executed`` equal the interpreter's;
* division, modulo and shifts are guarded so no eBPF operand reaches LLVM
  undefined behaviour.

The ABI shared with :mod:`pyxdp.vm.jit.runtime` (run context, region table,
batch descriptor, status codes) is defined here, next to the code that reads
it; ``runtime`` builds its ctypes structures from the same field lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import llvmlite.ir as ir  # type: ignore[import-untyped]

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.asm.validate import Layout
from pyxdp.vm.interpreter import TAIL_CALL_ID
from pyxdp.vm.memory import STACK_BASE, STACK_FRAME_GAP, STACK_SIZE

__all__ = [
    "BATCH_FIELDS", "CTX_FIELDS", "CTX_VALUES", "REGION_FIELDS", "SLOT_FIELDS", "ST_ABORT",
    "ST_BUDGET", "ST_CALLX", "ST_HELPER", "ST_OK", "ST_READ", "ST_WRITE", "LoweredModule",
    "lower", "runtime_module",
]

M64 = 0xFFFF_FFFF_FFFF_FFFF
M32 = 0xFFFF_FFFF

# --- the ABI ------------------------------------------------------------------------
# Every field of the run context, the region table and the batch descriptor is one
# 64-bit word, so the native side indexes them as i64 arrays and ctypes mirrors them
# with c_uint64 fields in this order.
CTX_FIELDS = ("status", "rem", "fault_pc", "fault_addr", "fault_size", "max_depth",
              "depth", "nregions", "regions", "stack", "helpers", "nhelpers",
              "batch_index", "ctx_values", "tail_call", "tail_exit")
REGION_FIELDS = ("base", "size", "host", "writable")
BATCH_FIELDS = ("count", "budget", "nslots", "slots", "r1", "r2", "r0_out", "status_out",
                "pc_out", "addr_out", "ctx_values")
SLOT_FIELDS = ("region", "host", "offsets", "sizes", "stride", "size")
# ctx_values words per run (the interpreter's Interpreter.ctx_values).
CTX_VALUES = 8

_C = {name: i for i, name in enumerate(CTX_FIELDS)}
_R = {name: i for i, name in enumerate(REGION_FIELDS)}
_B = {name: i for i, name in enumerate(BATCH_FIELDS)}
_S = {name: i for i, name in enumerate(SLOT_FIELDS)}

# Run status, in ctx.status (the batch's status word keeps it in its low byte).
ST_OK = 0
ST_READ = 1      # out-of-bounds read
ST_WRITE = 2     # out-of-bounds or read-only write
ST_BUDGET = 3    # instruction budget used up
ST_CALLX = 4     # callx to a value that is no helper (fault_addr = value, fault_size = reg)
ST_HELPER = 5    # a Python helper raised; the exception waits on the Python side
ST_ABORT = 6     # a Python helper was interrupted (KeyboardInterrupt): stop a batch too

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()
REGS_T = ir.LiteralStructType([I64] * 6)  # what a bpf function returns: r0..r5
HELPER_T = ir.FunctionType(I64, [PTR, I64, I64, I64, I64, I64])
_INT = {1: I8, 2: I16, 4: I32, 8: I64}
_MAX_FRAMES = op.MAX_CALL_FRAMES


def c64(v: int) -> ir.Constant:
    """An i64 constant; LLVM's parser wants the signed spelling of the top half."""
    v &= M64
    return ir.Constant(I64, v - (1 << 64) if v >> 63 else v)


def _cint(ty: ir.IntType, v: int) -> ir.Constant:
    w = ty.width
    v &= (1 << w) - 1
    return ir.Constant(ty, v - (1 << w) if v >> (w - 1) else v)


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
    frame the function owns and needs no region lookup.
    """

    def __init__(self, insns: Sequence[Instruction], blocks: Mapping[int, _Block],
                 entry: int, imm64: Mapping[int, int]) -> None:
        self.insns = insns
        self.imm64 = imm64
        self.frame_offset: dict[int, int] = {}  # pc -> offset below the frame top
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


# --- module-level pieces -----------------------------------------------------------

class _Module:
    """The LLVM module under construction and its shared internal functions."""

    def __init__(self, name: str) -> None:
        self.m = ir.Module(name)
        self.memset = self.m.declare_intrinsic("llvm.memset", [PTR, I64])
        self.translate = self._make_translate()
        self.fault = self._make_fault()
        self._atomics: dict[tuple[str, int], ir.Function] = {}

    def _internal(self, name: str, fnty: ir.FunctionType) -> ir.Function:
        f = ir.Function(self.m, fnty, name)
        f.linkage = "internal"
        f.attributes.add("nounwind")
        return f

    def _make_translate(self) -> ir.Function:
        """``translate(ctx, addr, size, write) -> host pointer or null``.

        The user regions in table order, then the stack frames created so far:
        the same order :meth:`pyxdp.vm.memory.Memory.find` scans them in. A
        write to a read-only region is null too; Python tells the two apart.
        """
        f = self._internal("translate", ir.FunctionType(PTR, [PTR, I64, I64, I1]))
        f.attributes.add("noinline")
        ctx, addr, size, write = f.args
        entry, head, body, found, ro, nxt, stack, sret, null = (
            f.append_basic_block(n) for n in
            ("entry", "head", "body", "found", "ro", "next", "stack", "sret", "null"))
        b = ir.IRBuilder(entry)
        n = _ctx_load(b, ctx, "nregions")
        tab = _ctx_load(b, ctx, "regions", PTR)
        b.branch(head)
        b.position_at_end(head)
        idx = b.phi(I64)
        idx.add_incoming(c64(0), entry)
        b.cbranch(b.icmp_unsigned("<", idx, n), body, stack)
        b.position_at_end(body)
        ent = b.gep(tab, [b.mul(idx, c64(8 * len(REGION_FIELDS)))], source_etype=I8)
        base = _word(b, ent, _R["base"])
        rsize = _word(b, ent, _R["size"])
        off = b.sub(addr, base)
        inside = b.and_(b.icmp_unsigned(">=", addr, base),
                        b.and_(b.icmp_unsigned("<=", off, rsize),
                               b.icmp_unsigned("<=", size, b.sub(rsize, off))))
        b.cbranch(inside, found, nxt)
        b.position_at_end(found)
        writable = _word(b, ent, _R["writable"])
        b.cbranch(b.and_(write, b.icmp_unsigned("==", writable, c64(0))), null, ro)
        b.position_at_end(ro)
        host = _word(b, ent, _R["host"], PTR)
        b.ret(b.gep(host, [off], source_etype=I8))
        b.position_at_end(nxt)
        idx.add_incoming(b.add(idx, c64(1)), nxt)
        b.branch(head)
        # Stack frames: STACK_BASE + d * STACK_FRAME_GAP, for d up to the deepest so far.
        b.position_at_end(stack)
        soff = b.sub(addr, c64(STACK_BASE))
        depth = b.udiv(soff, c64(STACK_FRAME_GAP))
        within = b.urem(soff, c64(STACK_FRAME_GAP))
        ok = b.and_(b.icmp_unsigned("<", soff, c64(_MAX_FRAMES * STACK_FRAME_GAP)),
                    b.and_(b.icmp_unsigned("<=", depth, _ctx_load(b, ctx, "max_depth")),
                           b.icmp_unsigned("<=", b.add(within, size), c64(STACK_SIZE))))
        b.cbranch(ok, sret, null)
        b.position_at_end(sret)
        area = _ctx_load(b, ctx, "stack", PTR)
        b.ret(b.gep(area, [b.add(b.mul(depth, c64(STACK_SIZE)), within)], source_etype=I8))
        b.position_at_end(null)
        b.ret(ir.Constant(PTR, None))
        return f

    def _make_fault(self) -> ir.Function:
        """``fault(ctx, status, pc, addr, size, rem)``: the fault record, out of line."""
        f = self._internal("fault", ir.FunctionType(VOID, [PTR, I64, I64, I64, I64, I64]))
        f.attributes.add("noinline")
        f.attributes.add("cold")
        ctx, status, pc, addr, size, rem = f.args
        b = ir.IRBuilder(f.append_basic_block("entry"))
        for name, v in (("status", status), ("fault_pc", pc), ("fault_addr", addr),
                        ("fault_size", size), ("rem", rem)):
            _ctx_store(b, ctx, name, v)
        b.ret_void()
        return f

    def atomic(self, kind: str, size: int) -> ir.Function:
        """``old = atomic_<kind>(ptr, value)``; unaligned pointers take a plain path.

        LLVM lowers an under-aligned atomicrmw to a libatomic call the JIT
        cannot link, and the interpreter does not fault on misalignment, so
        misaligned atomics are emulated (one program runs on one thread).
        """
        key = (kind, size)
        fn = self._atomics.get(key)
        if fn is not None:
            return fn
        ty = _INT[size]
        cmpx = kind == "cmpxchg"
        args = [PTR, ty, ty] if cmpx else [PTR, ty]
        fn = self._internal(f"atomic_{kind}{size * 8}", ir.FunctionType(ty, args))
        p, val = fn.args[0], fn.args[1]
        entry, fast, slow = (fn.append_basic_block(n) for n in ("entry", "fast", "slow"))
        b = ir.IRBuilder(entry)
        aligned = b.icmp_unsigned("==", b.and_(b.ptrtoint(p, I64), c64(size - 1)), c64(0))
        b.cbranch(aligned, fast, slow)
        b.position_at_end(fast)
        if cmpx:
            pair = b.cmpxchg(p, val, fn.args[2], "seq_cst", "seq_cst")
            b.ret(b.extract_value(pair, 0))
        else:
            b.ret(b.atomic_rmw(kind, p, val, "seq_cst"))
        b.position_at_end(slow)
        old = b.load(p, typ=ty, align=1)
        if cmpx:
            new = b.select(b.icmp_unsigned("==", old, val), fn.args[2], old)
        else:
            new = {"add": b.add, "or": b.or_, "and": b.and_, "xor": b.xor,
                   "xchg": lambda _o, v: v}[kind](old, val)
        b.store(new, p, align=1)
        b.ret(old)
        self._atomics[key] = fn
        return fn


def _word(b: ir.IRBuilder, base: ir.Value, index: int, ty: ir.Type = I64) -> ir.Value:
    return b.load(b.gep(base, [c64(8 * index)], source_etype=I8), typ=ty, align=8)


def _ctx_load(b: ir.IRBuilder, ctx: ir.Value, name: str, ty: ir.Type = I64) -> ir.Value:
    return _word(b, ctx, _C[name], ty)


def _ctx_store(b: ir.IRBuilder, ctx: ir.Value, name: str, v: ir.Value) -> None:
    b.store(v, b.gep(ctx, [c64(8 * _C[name])], source_etype=I8), align=8)


# --- one bpf function ------------------------------------------------------------

_ATOMIC_KIND = {op.BPF_ADD: "add", op.BPF_OR: "or", op.BPF_AND: "and", op.BPF_XOR: "xor",
                op.BPF_XCHG: "xchg"}
_CMP_U = {op.BPF_JEQ: "==", op.BPF_JNE: "!=", op.BPF_JGT: ">", op.BPF_JGE: ">=",
          op.BPF_JLT: "<", op.BPF_JLE: "<="}
_CMP_S = {op.BPF_JSGT: ">", op.BPF_JSGE: ">=", op.BPF_JSLT: "<", op.BPF_JSLE: "<="}


class _Function:
    """Emits one bpf function (entry pc, slot range) as an LLVM function."""

    def __init__(self, mod: _Module, insns: Sequence[Instruction], second: frozenset[int],
                 entry: int, lo: int, hi: int, imm64: Mapping[int, int],
                 ctx_loads: Mapping[int, int], fn: ir.Function,
                 funcs: Mapping[int, ir.Function]) -> None:
        self.mod = mod
        self.insns = insns
        self.imm64 = imm64
        self.ctx_loads = ctx_loads
        self.fn = fn
        self.funcs = funcs
        self.blocks = _blocks(insns, second, entry, lo, hi)
        self.frame_offset = _FrameAnalysis(insns, self.blocks, entry, imm64).frame_offset
        ctx, depth = fn.args[0], fn.args[1]
        self.ctx = ctx
        self.depth = depth
        start = fn.append_basic_block("entry")
        b = self.b = ir.IRBuilder(start)
        # r10 is a slot too: validate() lets an atomic fetch name r10 as its source,
        # and the interpreter then really overwrites the frame pointer.
        self.regs = [b.alloca(I64, name=f"r{n}") for n in range(11)]
        self.rem = b.alloca(I64, name="rem")
        for n in range(10):
            b.store(fn.args[2 + n], self.regs[n])
        # A frame is zeroed the first time its depth is reached in a run, as the
        # interpreter creates a fresh stack region the first time.
        fresh, go = fn.append_basic_block("fresh"), fn.append_basic_block("go")
        b.cbranch(b.icmp_unsigned(">", depth, _ctx_load(b, ctx, "max_depth")), fresh, go)
        b.position_at_end(fresh)
        area = _ctx_load(b, ctx, "stack", PTR)
        frame = b.gep(area, [b.mul(depth, c64(STACK_SIZE))], source_etype=I8)
        b.call(mod.memset, [frame, ir.Constant(I8, 0), c64(STACK_SIZE), ir.Constant(I1, 0)])
        _ctx_store(b, ctx, "max_depth", depth)
        b.branch(go)
        b.position_at_end(go)
        b.store(b.add(c64(STACK_BASE + STACK_SIZE), b.mul(depth, c64(STACK_FRAME_GAP))),
                self.regs[10])
        self.frame = b.gep(_ctx_load(b, ctx, "stack", PTR),
                           [b.mul(depth, c64(STACK_SIZE))], source_etype=I8)
        b.store(_ctx_load(b, ctx, "rem"), self.rem)
        self.bbs = {pc: fn.append_basic_block(f"pc{pc}") for pc in sorted(self.blocks)}
        b.branch(self.bbs[entry])
        # Faults leave through here; ctx holds the record, the return value is unused.
        self.bail = fn.append_basic_block("bail")
        b.position_at_end(self.bail)
        b.ret(ir.Constant(REGS_T, None))
        for pc in sorted(self.blocks):
            self._emit_block(self.blocks[pc])

    # -- registers ---------------------------------------------------------------
    def R(self, n: int) -> ir.Value:
        return self.b.load(self.regs[n], typ=I64)

    def W(self, n: int, v: ir.Value) -> None:
        self.b.store(v, self.regs[n])

    def _new_bb(self, name: str) -> ir.Block:
        return self.fn.append_basic_block(name)

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
        b = self.b
        b.position_at_end(self.bbs[blk.start])
        n = len(blk.pcs)
        rem = b.load(self.rem, typ=I64)
        out = self._new_bb(f"pc{blk.start}.budget")
        checks = {k for k, pc in enumerate(blk.pcs[:-1])
                  if _is_mem(self.insns[pc]) and pc not in self.ctx_loads}
        checks.add(n - 1)
        first = min(checks)
        self._budget_check(rem, first, out, blk.start)
        b.store(b.sub(rem, c64(n)), self.rem)
        for k, pc in enumerate(blk.pcs):
            if k in checks and k != first:
                self._budget_check(rem, k, out, pc)
            self._emit_insn(pc, k, rem, blk)
        last = self.insns[blk.pcs[-1]]
        if not _is_jmp(last) or op.bpf_op(last.code) == op.BPF_CALL:
            b.branch(self.bbs[blk.succs[0]])
        b.position_at_end(out)
        # pc of block instruction number rem: an ld_imm64 before it counts two slots.
        pc = b.add(c64(blk.start), rem)
        for j in blk.lddw_at:
            pc = b.add(pc, b.zext(b.icmp_signed(">", rem, c64(j)), I64))
        b.call(self.mod.fault, [self.ctx, c64(ST_BUDGET), pc, c64(0), c64(0), c64(0)])
        b.branch(self.bail)

    def _budget_check(self, rem: ir.Value, k: int, out: ir.Block, pc: int) -> None:
        """Go on only if instruction ``k`` of the block is within the budget."""
        b = self.b
        go = self._new_bb(f"pc{pc}.go")
        br = b.cbranch(b.icmp_signed(">", rem, c64(k)), go, out)
        br.set_weights([1 << 20, 1])
        b.position_at_end(go)

    def _fault_unless(self, ok: ir.Value, status: int, pc: int, addr: ir.Value,
                      size: ir.Value, rem: ir.Value, k: int) -> None:
        """Continue if ``ok``, else record a fault at ``pc`` (block instruction ``k``)."""
        b = self.b
        bad, cont = self._new_bb(f"pc{pc}.fault"), self._new_bb(f"pc{pc}.ok")
        br = b.cbranch(ok, cont, bad)
        br.set_weights([1 << 20, 1])
        b.position_at_end(bad)
        # The faulting instruction counts as executed, as in the interpreter.
        b.call(self.mod.fault, [self.ctx, c64(status), c64(pc), addr, size,
                                b.sub(rem, c64(k + 1))])
        b.branch(self.bail)
        b.position_at_end(cont)

    # -- instructions ------------------------------------------------------------------
    def _emit_insn(self, pc: int, k: int, rem: ir.Value, blk: _Block) -> None:
        i = self.insns[pc]
        cls = i.cls
        if cls in (op.BPF_ALU, op.BPF_ALU64):
            self._alu(i)
        elif cls == op.BPF_LD:
            self.W(i.dst, c64(self.imm64[pc]))
        elif cls == op.BPF_LDX and pc in self.ctx_loads:
            # A proven context load reads the field value, as the verifier rewrites it.
            values = _ctx_load(self.b, self.ctx, "ctx_values", PTR)
            self.W(i.dst, _word_at(self.b, values, c64(self.ctx_loads[pc])))
        elif cls == op.BPF_LDX:
            size = op.SIZE_BYTES[op.bpf_size(i.code)]
            p = self._access(i.src, i.off, size, False, pc, k, rem)
            v = self.b.load(p, typ=_INT[size], align=1)
            if size == 8:
                self.W(i.dst, v)
            elif op.bpf_mode(i.code) == op.BPF_MEMSX:
                self.W(i.dst, self.b.sext(v, I64))
            else:
                self.W(i.dst, self.b.zext(v, I64))
        elif cls == op.BPF_ST:
            size = op.SIZE_BYTES[op.bpf_size(i.code)]
            p = self._access(i.dst, i.off, size, True, pc, k, rem)
            self.b.store(_cint(_INT[size], i.imm), p, align=1)
        elif cls == op.BPF_STX:
            size = op.SIZE_BYTES[op.bpf_size(i.code)]
            if op.bpf_mode(i.code) == op.BPF_ATOMIC:
                self._atomic(i, size, pc, k, rem)
            else:
                p = self._access(i.dst, i.off, size, True, pc, k, rem)
                v = self.R(i.src)
                self.b.store(v if size == 8 else self.b.trunc(v, _INT[size]), p, align=1)
        else:
            self._jmp(i, pc, k, rem, blk)

    def _address(self, base: int, off: int) -> ir.Value:
        return self.b.add(self.R(base), c64(off))

    def _access(self, base: int, off: int, size: int, write: bool, pc: int, k: int,
                rem: ir.Value) -> ir.Value:
        """Host pointer for ``[base + off, +size)``, faulting the run when there is none."""
        b = self.b
        at = self.frame_offset.get(pc)
        if at is not None:
            return b.gep(self.frame, [c64(STACK_SIZE + at)], source_etype=I8)
        addr = self._address(base, off)
        p = b.call(self.mod.translate, [self.ctx, addr, c64(size), ir.Constant(I1, write)])
        ok = b.icmp_unsigned("!=", b.ptrtoint(p, I64), c64(0))
        self._fault_unless(ok, ST_WRITE if write else ST_READ, pc, addr, c64(size), rem, k)
        return p

    def _atomic(self, i: Instruction, size: int, pc: int, k: int, rem: ir.Value) -> None:
        b = self.b
        ty = _INT[size]
        # Read first, then write, as the interpreter's load-then-store does: an
        # atomic on read-only memory faults as a write, outside every region as a read.
        p = self._access(i.dst, i.off, size, False, pc, k, rem)
        src = self.R(i.src)
        val = src if size == 8 else b.trunc(src, ty)
        if i.imm == op.BPF_CMPXCHG:
            r0 = self.R(0)
            expect = r0 if size == 8 else b.trunc(r0, ty)
            if pc in self.frame_offset:
                old = b.call(self.mod.atomic("cmpxchg", size), [p, expect, val])
            else:
                # cmpxchg writes only on a match, so read-only memory faults only then.
                addr = self._address(i.dst, i.off)
                q = b.call(self.mod.translate, [self.ctx, addr, c64(size), ir.Constant(I1, 1)])
                can_write = b.icmp_unsigned("!=", b.ptrtoint(q, I64), c64(0))
                rw, ro, done = (self._new_bb(f"pc{pc}.{n}") for n in ("rw", "ro", "done"))
                b.cbranch(can_write, rw, ro)
                b.position_at_end(rw)
                old_rw = b.call(self.mod.atomic("cmpxchg", size), [q, expect, val])
                rw_end = b.block
                b.branch(done)
                b.position_at_end(ro)
                old_ro = b.load(p, typ=ty, align=1)
                self._fault_unless(b.icmp_unsigned("!=", old_ro, expect), ST_WRITE, pc, addr,
                                   c64(size), rem, k)
                ro_end = b.block
                b.branch(done)
                b.position_at_end(done)
                old = b.phi(ty)
                old.add_incoming(old_rw, rw_end)
                old.add_incoming(old_ro, ro_end)
            self.W(0, old if size == 8 else b.zext(old, I64))
            return
        if pc not in self.frame_offset:
            p = self._access(i.dst, i.off, size, True, pc, k, rem)
        kind = _ATOMIC_KIND[i.imm if i.imm == op.BPF_XCHG else i.imm & ~op.BPF_FETCH]
        old = b.call(self.mod.atomic(kind, size), [p, val])
        if i.imm & op.BPF_FETCH:
            self.W(i.src, old if size == 8 else b.zext(old, I64))

    def _alu(self, i: Instruction) -> None:
        b = self.b
        is64 = i.cls == op.BPF_ALU64
        code_op = op.bpf_op(i.code)
        d, s = i.dst, i.src
        if code_op == op.BPF_END:
            width = i.imm
            v = self.R(d)
            t = v if width == 64 else b.trunc(v, _INT[width // 8])
            if is64 or op.bpf_src(i.code) == op.BPF_TO_BE:  # the host is little-endian
                t = b.bswap(t)
            self.W(d, t if width == 64 else b.zext(t, I64))
            return
        ty = I64 if is64 else I32
        bits = 64 if is64 else 32
        use_reg = op.bpf_src(i.code) == op.BPF_X
        a = self.R(d) if is64 else b.trunc(self.R(d), I32)
        if use_reg:
            v = self.R(s) if is64 else b.trunc(self.R(s), I32)
            kv: int | None = None
        else:
            kv = i.imm & ((1 << bits) - 1)
            v = _cint(ty, kv)
        res: ir.Value
        if code_op == op.BPF_MOV:
            if i.off:  # movsx: sign-extend the low off bits of src
                res = b.sext(b.trunc(self.R(s), _INT[i.off // 8]), ty)
            else:
                res = v
        elif code_op == op.BPF_ADD:
            res = b.add(a, v)
        elif code_op == op.BPF_SUB:
            res = b.sub(a, v)
        elif code_op == op.BPF_MUL:
            res = b.mul(a, v)
        elif code_op == op.BPF_OR:
            res = b.or_(a, v)
        elif code_op == op.BPF_AND:
            res = b.and_(a, v)
        elif code_op == op.BPF_XOR:
            res = b.xor(a, v)
        elif code_op == op.BPF_NEG:
            res = b.neg(a)
        elif code_op in (op.BPF_LSH, op.BPF_RSH, op.BPF_ARSH):
            # Masked amounts: LLVM shifts by >= the width are poison.
            amt = _cint(ty, kv & (bits - 1)) if kv is not None else b.and_(v, _cint(ty, bits - 1))
            res = {op.BPF_LSH: b.shl, op.BPF_RSH: b.lshr, op.BPF_ARSH: b.ashr}[code_op](a, amt)
        elif code_op in (op.BPF_DIV, op.BPF_MOD):
            res = self._divmod(code_op == op.BPF_DIV, i.off == 1, a, v, kv, ty)
        else:  # pragma: no cover - validate() admits no other ALU operation
            raise AssertionError(f"ALU op {code_op:#x}")
        self.W(d, res if is64 else b.zext(res, I64))

    def _divmod(self, is_div: bool, signed: bool, a: ir.Value, v: ir.Value, kv: int | None,
                ty: ir.IntType) -> ir.Value:
        """Division and modulo with the kernel's answers where LLVM's are undefined.

        x / 0 = 0, x % 0 = x; signed INT_MIN / -1 = INT_MIN and INT_MIN % -1 = 0
        (``do_misc_fixups``). Each hazard is tested; the divisor LLVM sees is never 0
        or -1 on the signed path.
        """
        b = self.b
        zero = _cint(ty, 0)
        one = _cint(ty, 1)
        minus1 = (1 << ty.width) - 1
        if kv is not None:  # constant divisor: decide the hazards now
            if kv == 0:
                return zero if is_div else a
            if signed and kv == minus1:
                return b.neg(a) if is_div else zero
            if signed:
                return b.sdiv(a, v) if is_div else b.srem(a, v)
            return b.udiv(a, v) if is_div else b.urem(a, v)
        is_zero = b.icmp_unsigned("==", v, zero)
        if not signed:
            safe = b.select(is_zero, one, v)
            q = b.udiv(a, safe) if is_div else b.urem(a, safe)
            return b.select(is_zero, zero if is_div else a, q)
        is_m1 = b.icmp_unsigned("==", v, _cint(ty, minus1))
        safe = b.select(b.or_(is_zero, is_m1), one, v)
        q = b.sdiv(a, safe) if is_div else b.srem(a, safe)
        if is_div:
            return b.select(is_zero, zero, b.select(is_m1, b.neg(a), q))
        return b.select(is_zero, a, b.select(is_m1, zero, q))

    def _jmp(self, i: Instruction, pc: int, k: int, rem: ir.Value, blk: _Block) -> None:
        b = self.b
        code_op = op.bpf_op(i.code)
        if code_op == op.BPF_JA:
            b.branch(self.bbs[blk.succs[0]])
            return
        if code_op == op.BPF_EXIT:
            self._return()
            return
        if code_op == op.BPF_CALL:
            self._call(i, pc, k, rem)
            return
        is32 = i.cls == op.BPF_JMP32
        ty = I32 if is32 else I64
        a = b.trunc(self.R(i.dst), I32) if is32 else self.R(i.dst)
        if op.bpf_src(i.code) == op.BPF_X:
            v = b.trunc(self.R(i.src), I32) if is32 else self.R(i.src)
        else:
            v = _cint(ty, i.imm)
        if code_op == op.BPF_JSET:
            cond = b.icmp_unsigned("!=", b.and_(a, v), _cint(ty, 0))
        elif code_op in _CMP_S:
            cond = b.icmp_signed(_CMP_S[code_op], a, v)
        else:
            cond = b.icmp_unsigned(_CMP_U[code_op], a, v)
        b.cbranch(cond, self.bbs[blk.succs[0]], self.bbs[blk.succs[1]])

    def _sync_rem(self) -> None:
        _ctx_store(self.b, self.ctx, "rem", self.b.load(self.rem, typ=I64))

    def _after_call(self, pc: int, record_pc: bool) -> None:
        """Leave if the callee or helper stopped the run; else pick the budget back up."""
        b = self.b
        status = _ctx_load(b, self.ctx, "status")
        stop, cont = self._new_bb(f"pc{pc}.stopped"), self._new_bb(f"pc{pc}.back")
        br = b.cbranch(b.icmp_unsigned("!=", status, c64(0)), stop, cont)
        br.set_weights([1, 1 << 20])
        b.position_at_end(stop)
        if record_pc:  # a helper's failure is reported at the call
            _ctx_store(b, self.ctx, "fault_pc", c64(pc))
        b.branch(self.bail)
        b.position_at_end(cont)
        b.store(_ctx_load(b, self.ctx, "rem"), self.rem)

    def _call(self, i: Instruction, pc: int, k: int, rem: ir.Value) -> None:
        b = self.b
        self._sync_rem()
        if i.src == op.CallSrc.BPF_PSEUDO_CALL and op.bpf_src(i.code) == op.BPF_K:
            callee = self.funcs[pc + 1 + i.imm]
            res = b.call(callee, [self.ctx, b.add(self.depth, c64(1)),
                                  *(self.R(n) for n in range(10))])
            self._after_call(pc, record_pc=False)
            for n in range(6):
                self.W(n, b.extract_value(res, n))
            return
        _ctx_store(b, self.ctx, "depth", self.depth)  # for callbacks a helper starts
        if op.bpf_src(i.code) == op.BPF_K and i.imm == TAIL_CALL_ID:
            self._tail_call(pc)
            return
        table = _ctx_load(b, self.ctx, "helpers", PTR)
        if op.bpf_src(i.code) == op.BPF_X:  # callx: the helper id is in dst
            hid = self.R(i.dst)
            known = b.icmp_unsigned("<", hid, _ctx_load(b, self.ctx, "nhelpers"))
            look, join = self._new_bb(f"pc{pc}.look"), self._new_bb(f"pc{pc}.join")
            before = b.block
            b.cbranch(known, look, join)
            b.position_at_end(look)
            got = _word_at(b, table, hid)
            b.branch(join)
            b.position_at_end(join)
            addr = b.phi(I64)
            addr.add_incoming(c64(0), before)
            addr.add_incoming(got, look)
            self._fault_unless(b.icmp_unsigned("!=", addr, c64(0)), ST_CALLX, pc, hid,
                               c64(i.dst), rem, k)
        else:
            addr = _word_at(b, table, c64(i.imm))
        target = b.inttoptr(addr, HELPER_T.as_pointer())
        r0 = b.call(target, [self.ctx, *(self.R(n) for n in range(1, 6))])
        self._after_call(pc, record_pc=True)
        self.W(0, r0)


    def _tail_call(self, pc: int) -> None:
        """bpf_tail_call: the target's r0 ends this function; a failed call falls through.

        The run context's ``tail_call`` entry runs the target (Python: the
        context's hook, as in the interpreter) and sets ``tail_exit`` on success.
        """
        b = self.b
        fnp = b.inttoptr(_ctx_load(b, self.ctx, "tail_call"), HELPER_T.as_pointer())
        r0 = b.call(fnp, [self.ctx, *(self.R(n) for n in range(1, 6))])
        self._after_call(pc, record_pc=True)
        self.W(0, r0)
        done, cont = self._new_bb(f"pc{pc}.tail"), self._new_bb(f"pc{pc}.notail")
        b.cbranch(b.icmp_unsigned("!=", _ctx_load(b, self.ctx, "tail_exit"), c64(0)), done, cont)
        b.position_at_end(done)
        _ctx_store(b, self.ctx, "tail_exit", c64(0))
        self._return()
        b.position_at_end(cont)

    def _return(self) -> None:
        b = self.b
        self._sync_rem()
        ret = ir.Constant(REGS_T, None)
        for n in range(6):
            ret = b.insert_value(ret, self.R(n), n)
        b.ret(ret)


def _word_at(b: ir.IRBuilder, base: ir.Value, index: ir.Value) -> ir.Value:
    return b.load(b.gep(base, [b.mul(index, c64(8))], source_etype=I8), typ=I64, align=8)


# --- the whole module -------------------------------------------------------------

@dataclass(frozen=True)
class LoweredModule:
    """IR text and the exported symbols: the run entry and the callbacks by pc."""

    ir: str
    entry: str
    callbacks: dict[int, str]


def lower(insns: Sequence[Instruction], layout: Layout, imm64: Mapping[int, int], *,
          ctx_loads: Mapping[int, int] | None = None, callbacks: Sequence[int] = (),
          tag: str = "p") -> LoweredModule:
    """Lower a validated program. ``imm64`` holds every ld_imm64's resolved value by pc;
    ``ctx_loads`` the proven context loads (pc -> index into the run context's
    ``ctx_values``, see :mod:`pyxdp.vm.ctx_access`); ``callbacks`` are
    BPF_PSEUDO_FUNC targets that need an entry point of their own.

    Exported symbols (C ABI):

    * ``u64 <tag>_run(ctx *, u64 r1, u64 r2)``: one run from pc 0 at depth 0;
    * ``u64 <tag>_cb<pc>(ctx *, u64 depth, u64 r1, ..., u64 r5)``: a callback.
    """
    second = _second_slots(insns)
    mod = _Module(tag)
    fn_t = ir.FunctionType(REGS_T, [PTR, I64] + [I64] * 10)
    entries = sorted({lo for lo, _ in layout.functions} | set(callbacks))
    funcs: dict[int, ir.Function] = {}
    for pc in entries:
        f = ir.Function(mod.m, fn_t, f"bpf_{pc}")
        f.linkage = "internal"
        f.attributes.add("nounwind")
        funcs[pc] = f
    for pc in entries:
        lo, hi = layout.function_of(pc)
        _Function(mod, insns, second, pc, lo, hi, imm64, dict(ctx_loads or {}), funcs[pc],
                  funcs)
    entry = _make_entry(mod, funcs[0], f"{tag}_run")
    cbs = {pc: _make_callback(mod, funcs[pc], f"{tag}_cb{pc}") for pc in callbacks}
    return LoweredModule(str(mod.m), entry, cbs)


def _call_main(mod: _Module, b: ir.IRBuilder, main: ir.Function, ctx: ir.Value,
               r1: ir.Value, r2: ir.Value) -> ir.Value:
    """Start a run: frame 0 fresh, every register zero but r1, r2; return r0."""
    _ctx_store(b, ctx, "max_depth", c64(0))
    area = _ctx_load(b, ctx, "stack", PTR)
    b.call(mod.memset, [area, ir.Constant(I8, 0), c64(STACK_SIZE), ir.Constant(I1, 0)])
    zero = c64(0)
    # One copy of each bpf function: entry points call them, never inline them.
    res = b.call(main, [ctx, zero, zero, r1, r2] + [zero] * 7, attrs=("noinline",))
    return b.extract_value(res, 0)


def _make_entry(mod: _Module, main: ir.Function, name: str) -> str:
    f = ir.Function(mod.m, ir.FunctionType(I64, [PTR, I64, I64]), name)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    b.ret(_call_main(mod, b, main, *f.args))
    return str(name)


def _make_callback(mod: _Module, target: ir.Function, name: str) -> str:
    f = ir.Function(mod.m, ir.FunctionType(I64, [PTR, I64] + [I64] * 5), name)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    ctx, depth = f.args[0], f.args[1]
    zero = c64(0)
    res = b.call(target, [ctx, depth, zero, *f.args[2:], zero, zero, zero, zero, zero],
                 attrs=("noinline",))
    b.ret(b.extract_value(res, 0))
    return name


def _make_batch(m: ir.Module) -> None:
    """``pyxdp_batch(ctx, batch, run)``: the per-frame loop around a program's run entry.

    Before each frame the slots rewrite their region table entries; after it
    r0, the status word (``status | deepest frame << 8``, so a fault can be
    rendered later with the stack regions the run had), the fault pc and
    address are stored. Shared by every program: ``run`` is its entry point.
    """
    run_t = ir.FunctionType(I64, [PTR, I64, I64])
    f = ir.Function(m, ir.FunctionType(VOID, [PTR, PTR, run_t.as_pointer()]), "pyxdp_batch")
    ctx, desc, entry_fn = f.args
    entry, head, body, shead, sbody, go, done = (
        f.append_basic_block(n) for n in ("entry", "head", "body", "shead", "sbody", "go",
                                          "done"))
    b = ir.IRBuilder(entry)

    def dw(name: str, ty: ir.Type = I64) -> ir.Value:
        return _word(b, desc, _B[name], ty)

    count, budget, nslots = dw("count"), dw("budget"), dw("nslots")
    slots, r1s, r2s = dw("slots", PTR), dw("r1", PTR), dw("r2", PTR)
    r0_out, st_out, pc_out, addr_out = (dw(n, PTR) for n in
                                        ("r0_out", "status_out", "pc_out", "addr_out"))
    table = _ctx_load(b, ctx, "regions", PTR)
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(c64(0), entry)
    b.cbranch(b.icmp_unsigned("<", i, count), body, done)
    b.position_at_end(body)
    b.branch(shead)
    b.position_at_end(shead)
    j = b.phi(I64)
    j.add_incoming(c64(0), body)
    b.cbranch(b.icmp_unsigned("<", j, nslots), sbody, go)
    b.position_at_end(sbody)
    slot = b.gep(slots, [b.mul(j, c64(8 * len(SLOT_FIELDS)))], source_etype=I8)
    ent = b.gep(table, [b.mul(_word(b, slot, _S["region"]), c64(8 * len(REGION_FIELDS)))],
                source_etype=I8)
    offsets = _word(b, slot, _S["offsets"], PTR)
    sizes = _word(b, slot, _S["sizes"], PTR)
    off = _word_or(b, offsets, i, b.mul(i, _word(b, slot, _S["stride"])))
    size = _word_or(b, sizes, i, _word(b, slot, _S["size"]))
    b.store(b.add(_word(b, slot, _S["host"]), off),
            b.gep(ent, [c64(8 * _R["host"])], source_etype=I8), align=8)
    b.store(size, b.gep(ent, [c64(8 * _R["size"])], source_etype=I8), align=8)
    j.add_incoming(b.add(j, c64(1)), b.block)
    b.branch(shead)
    b.position_at_end(go)
    # Per-frame context fields (xdp_md's data, data_end...) when the batch has them.
    cvs = dw("ctx_values", PTR)
    own = b.gep(cvs, [b.mul(i, c64(8 * CTX_VALUES))], source_etype=I8)
    keep = _ctx_load(b, ctx, "ctx_values", PTR)
    _ctx_store(b, ctx, "ctx_values",
               b.select(b.icmp_unsigned("==", b.ptrtoint(cvs, I64), c64(0)), keep, own))
    _ctx_store(b, ctx, "status", c64(0))
    _ctx_store(b, ctx, "rem", budget)
    _ctx_store(b, ctx, "batch_index", i)
    r0 = b.call(entry_fn, [ctx, _word_at(b, r1s, i), _word_at(b, r2s, i)])
    status = _ctx_load(b, ctx, "status")
    failed = b.icmp_unsigned("!=", status, c64(0))
    b.store(b.select(failed, c64(0), r0),
            b.gep(r0_out, [b.mul(i, c64(8))], source_etype=I8), align=8)
    word = b.or_(status, b.shl(_ctx_load(b, ctx, "max_depth"), c64(8)))
    b.store(b.trunc(word, I32), b.gep(st_out, [b.mul(i, c64(4))], source_etype=I8), align=4)
    b.store(b.trunc(b.select(failed, _ctx_load(b, ctx, "fault_pc"), c64(0)), I32),
            b.gep(pc_out, [b.mul(i, c64(4))], source_etype=I8), align=4)
    b.store(b.select(failed, _ctx_load(b, ctx, "fault_addr"), c64(0)),
            b.gep(addr_out, [b.mul(i, c64(8))], source_etype=I8), align=8)
    i.add_incoming(b.add(i, c64(1)), b.block)
    # An interrupted Python helper stops the whole batch at this frame.
    b.cbranch(b.icmp_unsigned("==", status, c64(ST_ABORT)), done, head)
    b.position_at_end(done)
    b.ret_void()


def _word_or(b: ir.IRBuilder, base: ir.Value, index: ir.Value, default: ir.Value) -> ir.Value:
    """``base[index]``, or ``default`` when ``base`` is null (loaded only when it is not)."""
    cur = b.block
    fn = cur.function
    load, join = fn.append_basic_block("gl"), fn.append_basic_block("gj")
    b.cbranch(b.icmp_unsigned("==", b.ptrtoint(base, I64), c64(0)), join, load)
    b.position_at_end(load)
    v = _word_at(b, base, index)
    b.branch(join)
    b.position_at_end(join)
    phi = b.phi(I64)
    phi.add_incoming(default, cur)
    phi.add_incoming(v, load)
    return phi


# --- natively implemented helpers -------------------------------------------------

def runtime_module() -> str:
    """IR of the code every program shares: the batch loop and the native helpers.

    Helpers have the C ABI ``u64 f(ctx *, r1..r5)``.
    ``pyxdp_ktime_get_ns`` reads CLOCK_MONOTONIC, the clock ``time.monotonic_ns``
    (the interpreter's ktime_get_ns) reads; ``clock_gettime`` is bound by the engine.
    """
    m = ir.Module("pyxdp_runtime")
    ts_t = ir.LiteralStructType([I64, I64])
    cg = ir.Function(m, ir.FunctionType(I32, [I32, PTR]), "clock_gettime")
    f = ir.Function(m, HELPER_T, "pyxdp_ktime_get_ns")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    ts = b.alloca(ts_t)
    b.call(cg, [ir.Constant(I32, 1), ts])  # CLOCK_MONOTONIC
    sec = b.load(b.gep(ts, [c64(0)], source_etype=I8), typ=I64)
    nsec = b.load(b.gep(ts, [c64(8)], source_etype=I8), typ=I64)
    b.ret(b.add(b.mul(sec, c64(1_000_000_000)), nsec))
    _make_batch(m)
    return str(m)
