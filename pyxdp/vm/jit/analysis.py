"""What the lowering knows of a program before it emits code: control flow and analyses.

The kernel's verifier proves each access safe before a JIT sees the program;
pyxdp's JIT also compiles programs nobody verified, so these analyses, which
need no verifier, decide where checks may be dropped or tested cheaply (the
verifier's own facts come in ``ProgramInput.proven``), never whether a
program may run: the basic blocks of each bpf function,
:class:`FrameAnalysis` (r10-relative accesses proven inside the frame,
helper arguments), :class:`Hints` (the region table entry an access probably
uses), register liveness (a phi per live register), and :class:`Program`,
the program-wide facts the emitted functions share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.asm.validate import Layout
from pyxdp.vm.interpreter import OP_MAY_GOTO, TAIL_CALL_ID
from pyxdp.vm.jit.abi import M64, MAX_FRAMES, Hint, MapInfo, Natives
from pyxdp.vm.jit.unit import ProgramInput
from pyxdp.vm.memory import STACK_BASE, STACK_FRAME_GAP, STACK_SIZE

__all__ = ["Block", "FrameAnalysis", "Hint", "Hints", "Program", "basic_blocks", "byte_runs",
           "is_jmp", "is_load", "is_mem", "is_store", "live_in", "mem_base", "run_bound",
           "second_slots", "uses_defs"]

def second_slots(insns: Sequence[Instruction]) -> frozenset[int]:
    out = set()
    pc = 0
    while pc < len(insns):
        if insns[pc].code == op.OP_LD_IMM64:
            out.add(pc + 1)
            pc += 2
        else:
            pc += 1
    return frozenset(out)


def is_jmp(i: Instruction) -> bool:
    return i.cls in (op.BPF_JMP, op.BPF_JMP32)


def jump_target(i: Instruction, pc: int) -> int:
    if i.cls == op.BPF_JMP32 and op.bpf_op(i.code) == op.BPF_JA:
        return pc + 1 + i.imm
    return pc + 1 + i.off


def is_mem(i: Instruction) -> bool:
    return i.cls in (op.BPF_LDX, op.BPF_ST, op.BPF_STX)


def is_store(i: Instruction) -> bool:
    """Whether ``i`` may write memory (a store or an atomic, but a load-acquire)."""
    return i.cls in (op.BPF_ST, op.BPF_STX) and not op.is_atomic_load(i.code, i.imm)


def is_load(i: Instruction) -> bool:
    """A load into ``dst_reg`` through ``src_reg``: BPF_LDX or a load-acquire."""
    return i.cls == op.BPF_LDX or op.is_atomic_load(i.code, i.imm)


def mem_base(i: Instruction) -> int:
    """The register a load, store or atomic addresses memory through."""
    return i.src if is_load(i) else i.dst


@dataclass
class Block:
    """A straight-line run ``pcs`` (executed slots; an ld_imm64 is one) and its successors."""

    start: int
    pcs: list[int]
    succs: list[int]
    lddw_at: list[int] = field(default_factory=list)  # block indexes of ld_imm64s


def basic_blocks(insns: Sequence[Instruction], second: frozenset[int], entry: int, lo: int,
            hi: int) -> dict[int, Block]:
    """The basic blocks of the function ``[lo, hi)`` reachable from ``entry``."""
    leaders = {entry}
    for pc in range(lo, hi):
        if pc in second:
            continue
        i = insns[pc]
        if not is_jmp(i):
            continue
        code_op = op.bpf_op(i.code)
        if code_op not in (op.BPF_CALL, op.BPF_EXIT):
            leaders.add(jump_target(i, pc))
        leaders.add(pc + 1)
    blocks: dict[int, Block] = {}
    work = [entry]
    while work:
        start = work.pop()
        if start in blocks:
            continue
        blk = Block(start, [], [])
        pc = start
        while True:
            i = insns[pc]
            if i.code == op.OP_LD_IMM64:
                blk.lddw_at.append(len(blk.pcs))
            blk.pcs.append(pc)
            if is_jmp(i):
                code_op = op.bpf_op(i.code)
                if code_op == op.BPF_EXIT:
                    break
                if code_op == op.BPF_CALL:
                    blk.succs = [pc + 1]  # calls end blocks: the callee spends budget
                    break
                if code_op == op.BPF_JA:
                    blk.succs = [jump_target(i, pc)]
                    break
                blk.succs = [jump_target(i, pc), pc + 1]
                break
            nxt = pc + (2 if i.code == op.OP_LD_IMM64 else 1)
            if nxt in leaders:
                blk.succs = [nxt]
                break
            pc = nxt
        blocks[start] = blk
        work.extend(blk.succs)
    return blocks


def run_bound(insns: Sequence[Instruction], layout: Layout,
              callbacks: Sequence[int] = ()) -> int | None:
    """The most instructions a run from pc 0 can execute, or None when nothing bounds it.

    A run's length is bounded by the program when no jump goes back (within any
    function) and no function calls itself (directly or not): then every path is a
    walk forward through each function, its calls adding their callee's bound. Loops,
    may_goto, tail calls (the target's run draws on its own budget, but through a hook
    the code cannot see) and callbacks (a helper may start them on the run's budget,
    as often as it likes) make it unbounded. An instruction counts one, an ld_imm64
    too, as the interpreter counts them.
    """
    if callbacks:
        return None
    bounds: dict[int, int | None] = {}
    busy: set[int] = set()

    def bound(lo: int) -> int | None:
        if lo in bounds:
            return bounds[lo]
        if lo in busy:  # recursion: unbounded
            return None
        busy.add(lo)
        _, hi = layout.function_of(lo)
        longest = [0] * (hi - lo + 2)  # longest[pc - lo]: from pc to the function's exit
        result: int | None = None
        for pc in range(hi - 1, lo - 1, -1):
            i = insns[pc]
            code = i.code
            if pc > lo and insns[pc - 1].code == op.OP_LD_IMM64:
                continue  # the second slot: never executed
            if code == op.OP_LD_IMM64:
                if i.src == op.PseudoSrc.BPF_PSEUDO_FUNC:
                    break  # a callback's address: the run may start it
                n = 1 + longest[min(pc + 2, hi) - lo]
            elif i.cls in (op.BPF_JMP, op.BPF_JMP32):
                code_op = op.bpf_op(code)
                if code == OP_MAY_GOTO:
                    break
                if code_op == op.BPF_EXIT:
                    n = 1
                elif code_op == op.BPF_CALL:
                    extra: int | None = 0
                    if i.src == op.CallSrc.BPF_PSEUDO_CALL:
                        extra = bound(pc + 1 + i.imm)
                    elif i.src == op.CallSrc.BPF_HELPER_CALL and i.imm == TAIL_CALL_ID:
                        extra = None
                    if extra is None:
                        break
                    n = 1 + extra + longest[pc + 1 - lo]
                else:
                    target = jump_target(i, pc)
                    if not pc < target <= hi:
                        break  # a jump back (or out: validation refuses that)
                    n = 1 + longest[target - lo]
                    if code_op != op.BPF_JA:
                        n = max(n, 1 + longest[pc + 1 - lo])
            else:
                n = 1 + longest[pc + 1 - lo]
            longest[pc - lo] = n
        else:
            result = longest[0]
        busy.discard(lo)
        bounds[lo] = result
        return result

    return bound(0)


# --- the range analysis ----------------------------------------------------------------

# An abstract register: ("fp", k) is exactly r10 + k, ("c", v) the constant v, None unknown.
_Abs = tuple[str, int] | None


class FrameAnalysis:
    """Which loads and stores provably hit the current stack frame.

    A forward data-flow over one function's blocks tracking registers that hold
    ``r10 + k`` or a constant (mov, add/sub of constants, ld_imm64); unknown
    wins at merges, so loops converge after one extra pass. An access through
    ``r10 + k`` with ``-512 <= k + off`` and ``k + off + size <= 0`` lies in the
    frame the function owns and needs no region lookup. ``call_args`` keeps
    r1-r5 at each helper call (a key on the stack is read without a lookup).
    """

    def __init__(self, insns: Sequence[Instruction], blocks: Mapping[int, Block],
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
        if not is_mem(i):
            return
        v = state[mem_base(i)]
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
        elif is_load(i):
            st[i.dst] = None
        elif cls == op.BPF_STX and op.bpf_mode(i.code) == op.BPF_ATOMIC:
            if i.imm == op.BPF_CMPXCHG:
                st[0] = None
            elif i.imm & op.BPF_FETCH:
                st[i.src] = None
        elif is_jmp(i) and op.bpf_op(i.code) == op.BPF_CALL:
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


class Hints:
    """Which region table entry each load, store and map-key pointer probably uses.

    An unsound, interprocedural forward analysis (pointers spilled to 8-byte
    stack slots are followed; bpf-to-bpf call arguments flow into callees):
    ``xdp_md`` data pointers mean the packet, a constant-map lookup's result
    that map's values, a constant address the region holding it. Nothing
    depends on the answer but speed: every access still checks the entry it
    tries and falls back to the full lookup.
    """

    def __init__(self, insns: Sequence[Instruction], funcs: Mapping[int, Mapping[int, Block]],
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

    def _function(self, blocks: Mapping[int, Block], entry: int, args: list[_Hv]
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
        elif is_load(i):
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
        elif is_jmp(i) and op.bpf_op(i.code) == op.BPF_CALL:
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
        if STACK_BASE <= x < STACK_BASE + MAX_FRAMES * STACK_FRAME_GAP:
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


class Program:
    """Program-wide facts the functions share while they are emitted."""

    def __init__(self, p: ProgramInput) -> None:
        self.p = p
        self.insns = p.insns
        self.natives = p.natives
        self.second = second_slots(p.insns)
        self.tag = p.tag
        # Every run of this code starts with at least p.min_budget instructions; when
        # that covers the longest run the program can make, no run can be cut short and
        # the code tests no budget (the count is still kept, for ``executed``).
        bound = run_bound(p.insns, p.layout, p.callbacks) if p.min_budget > 0 else None
        self.budget_free = bound is not None and bound <= p.min_budget
        entries = sorted({lo for lo, _ in p.layout.functions} | set(p.callbacks))
        self.funcs = {pc: f"{p.tag}_f{pc}" for pc in entries}
        self.blocks = {pc: basic_blocks(p.insns, self.second, pc, *p.layout.function_of(pc))
                       for pc in entries}
        self.hints = Hints(p.insns, self.blocks, p.imm64, p.ctx_loads, p.natives)
        self.frames = {pc: FrameAnalysis(p.insns, self.blocks[pc], pc, p.imm64)
                       for pc in entries}
        # Bytes of a frame the proven stores may dirty: zeroed when a frame is created.
        dirty: set[int] = set()
        for fa in self.frames.values():
            for pc, at in fa.frame_offset.items():
                if is_store(p.insns[pc]):
                    size = op.SIZE_BYTES[op.bpf_size(p.insns[pc].code)]
                    dirty.update(range(STACK_SIZE + at, STACK_SIZE + at + size))
        self.footprint = byte_runs(dirty)
        self.used_maps: dict[tuple[str, int], MapInfo] = {}
        # Functions whose caller reads r1-r5 after they return (not just r0).
        self.called = set(p.callbacks) | {
            pc + 1 + i.imm for pc, i in enumerate(p.insns)
            if i.code == op.OP_CALL and i.src == op.CallSrc.BPF_PSEUDO_CALL
            and pc not in self.second}


def byte_runs(offsets: set[int]) -> list[tuple[int, int]]:
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


def uses_defs(i: Instruction, exit_uses: frozenset[int]) -> tuple[frozenset[int], frozenset[int]]:
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
    if is_load(i):
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
    if code_op == op.BPF_JA or i.code == OP_MAY_GOTO:
        return frozenset(), frozenset()
    if code_op == op.BPF_CALL:
        if i.src == op.CallSrc.BPF_PSEUDO_CALL and not x:
            return _ALL, frozenset(range(6))
        # A helper (or tail call, whose success returns r1-r5 as they are) sees r1-r5.
        return (_ARGS | {i.dst} if x else _ARGS | exit_uses - {0}), frozenset({0})
    return frozenset({i.dst, i.src} if x else {i.dst}), frozenset()


def live_in(insns: Sequence[Instruction], blocks: Mapping[int, Block],
              exit_uses: frozenset[int]) -> dict[int, frozenset[int]]:
    """Registers live at each block's entry (a phi is made only for those)."""
    use: dict[int, frozenset[int]] = {}
    kill: dict[int, frozenset[int]] = {}
    for b, blk in blocks.items():
        u: set[int] = set()
        d: set[int] = set()
        for pc in blk.pcs:
            iu, idf = uses_defs(insns[pc], exit_uses)
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
