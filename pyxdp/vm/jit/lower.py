"""Lowering validated eBPF to LLVM IR: what ``arch/*/net/bpf_jit_comp.c`` does, made safe.

The kernel's JITs translate bytecode the verifier has already proven safe.
pyxdp also runs programs nobody verified (``verify=False``), so this lowering
keeps the reference interpreter's run-time checks (:mod:`pyxdp.vm.interpreter`)
and makes them native, except where the verifier's facts make them redundant:

* the IR is written as text (llvmlite's object builder costs more Python time
  than LLVM spends at -O0); registers are SSA values with a phi per register
  at each eBPF block, each bpf-to-bpf function is an LLVM function taking and
  returning the register file, so r6-r9 survive a call the way the
  interpreter's frame stack restores them;
* every load, store and atomic is checked unless proven: a fake 64-bit
  address becomes a host pointer through the run context's region table or
  the access stops the run with a fault record. :class:`_FrameAnalysis`
  proves r10-relative accesses in bounds (no check at all); an access the
  verifier proved (``ProgramInput.proven``: a packet access checked against
  ``data_end`` on every path, a stack access, a value of one known map) is a
  plain host pointer from its region's entry, with no test and no fault
  record; :class:`_Hints` guesses, per other access, which table entry the
  address falls in (the packet for pointers derived from ``xdp_md->data``, a
  map's value region for what a lookup returned, the stack for pointers into
  other frames) and the access tests that one entry inline, falling back to
  the full scan (``translate``) when the guess misses, so a wrong guess costs
  time, never correctness. A run of three or more checked accesses through
  one unchanged base register in a block is versioned: one test of the span
  they cover (and of the budget) picks a copy without any check, else the
  copy with every check runs - the span is inside the region exactly when
  each access is;
* a failing check does not call out itself: it branches to its function's one
  access-fault (or budget-fault) block, whose phis carry the pc and operands
  (a block and a call per check made LLVM's code generation quadratic);
* the instruction budget is exact: a block takes its length off the budget
  once, and tests how much is left only where running short could show
  (before each store, atomic and load that may fault, and before its last
  instruction: a proven load has no effect to hold back), so the
  fault pc, the memory effects and ``executed`` equal the interpreter's. Code
  built for runs given at least the program's longest run
  (``ProgramInput.min_budget``, :func:`pyxdp.vm.jit.analysis.run_bound`: no
  loops, recursion, may_goto, tail calls or callbacks) tests no budget at all;
* a helper call goes through the table by one shared function (``@helper``),
  which also faults an unknown id and places a stopped run's fault at the call;
* ``may_goto`` counts down a counter each function call sets at its entry
  (an ``alloca`` LLVM keeps in a register), as the interpreter does;
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
  csum_diff, the clock, the numbers iterator kfuncs. Each native path does the
  common case exactly as the Python helper would and otherwise (an unusual
  argument, a pointer the regions refuse, a full LRU map, frags only Python holds) calls the
  Python helper, which then gives the reference answer - before the native
  path has changed anything;
* ``bpf_tail_call`` through a constant prog array enters the target's own
  XDP entry natively when the runtime has filled the slot (else the Python
  hook, as the interpreter);
* a loop-free program's main function of :data:`SPLIT_INSNS` instructions or
  more is emitted as :data:`PARTS` functions cut at block starts
  (:func:`split_parts`): a part jumps into a later one by calling it with the
  block to start at, the live registers and the budget left, and returns what
  it returns; compiled alone, each part is a module of its own, so LLVM builds
  them on as many threads;
* with ``natives.xdp`` a per-program batch loop (``<tag>_xdp``) sets each
  frame's xdp_buff, packet region and xdp_md values, runs the program (inlined
  into the loop; called, when it is large) ``repeat`` times and writes the verdicts back.

This module holds the per-instruction lowering (:class:`FuncLowering`), the
shared functions behind memory accesses and atomics, and the assembly of a
module; the ABI is :mod:`pyxdp.vm.jit.abi`, the IR builder
:mod:`pyxdp.vm.jit.ir`, the analyses :mod:`pyxdp.vm.jit.analysis`, the
entry points :mod:`pyxdp.vm.jit.entry` and the registries of native helpers
and map operations :mod:`pyxdp.vm.jit.natives` (filled by the layers above).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.asm.validate import Layout
from pyxdp.vm.interpreter import FUNC_BASE, MAY_GOTO_LOOPS, OP_MAY_GOTO, TAIL_CALL_ID
from pyxdp.vm.jit.abi import (
    GAP_SHIFT,
    MAX_FRAMES,
    MAX_REGIONS,
    MAX_TAIL_CALL_CNT,
    NF_CLOCK,
    NF_RUNCTX,
    NF_XDP,
    REGION,
    SLOW,
    ST_BUDGET,
    ST_CALLX,
    ST_READ,
    ST_THROW,
    ST_WRITE,
    MapInfo,
    Natives,
)
from pyxdp.vm.jit.analysis import (
    Block,
    Hint,
    Program,
    is_jmp,
    is_load,
    is_mem,
    live_in,
    uses_defs,
)
from pyxdp.vm.jit.entry import callback_fn, entry_fn, pkt_fn, tailcall_fn, xdp_fn, zero_fn
from pyxdp.vm.jit.ir import (
    DECLS,
    INT_TYPES,
    INT_WIDTHS,
    LIKELY,
    METADATA,
    RET_T,
    TBAA_CTX_VALUES,
    TBAA_MEM,
    TBAA_TABLE,
    UNLIKELY,
    Text,
    c64,
    cint,
)
from pyxdp.vm.jit.natives import HelperNative, map_native, native_by_kind, shared_functions
from pyxdp.vm.jit.unit import LoweredModule, ProgramInput
from pyxdp.vm.memory import STACK_BASE, STACK_FRAME_GAP, STACK_SIZE

__all__ = ["FuncLowering", "ModuleLowering", "Part", "lower", "lower_many", "lower_modules",
           "split_parts"]


def _translate_fn() -> str:
    """``translate(ctx, addr, size, write) -> host pointer or null``.

    The user regions in table order, then the stack frames created so far:
    the same order :meth:`pyxdp.vm.memory.Memory.find` scans them in. A
    write to a read-only region is null too; Python tells the two apart.
    It only reads memory: callers that write mark the stack dirty themselves.
    """
    f = Text()
    f.at("entry")
    n = f.cget("%ctx", "nregions")
    tab = f.cget("%ctx", "regions", "ptr")
    f.br("head")
    f.at("head")
    f.do("%i = phi i64 [ 0, %entry ], [ %i1, %next ]")
    f.cbr(f.ins(f"icmp ult i64 %i, {n}"), "body", "stack")
    f.at("body")
    ent = f.gep(tab, f.ins("shl i64 %i, 5"))
    base = f.word(ent, REGION["base"], "i64", TBAA_TABLE)
    rsize = f.word(ent, REGION["size"], "i64", TBAA_TABLE)
    off = f.ins(f"sub i64 %addr, {base}")
    c1 = f.ins(f"icmp uge i64 %addr, {base}")
    c2 = f.ins(f"icmp ule i64 {off}, {rsize}")
    c3 = f.ins(f"icmp ule i64 %size, {f.ins(f'sub i64 {rsize}, {off}')}")
    f.cbr(f.ins(f"and i1 {c1}, {f.ins(f'and i1 {c2}, {c3}')}"), "found", "next")
    f.at("found")
    writable = f.word(ent, REGION["writable"], "i64", TBAA_TABLE)
    ro = f.ins(f"icmp eq i64 {writable}, 0")
    f.cbr(f.ins(f"and i1 %write, {ro}"), "null", "ok")
    f.at("ok")
    host = f.word(ent, REGION["host"], "ptr", TBAA_TABLE)
    f.do(f"ret ptr {f.gep(host, off)}")
    f.at("next")
    f.do("%i1 = add i64 %i, 1")
    f.br("head")
    # Stack frames: STACK_BASE + d * STACK_FRAME_GAP, for d up to the deepest so far.
    f.at("stack")
    soff = f.ins(f"sub i64 %addr, {c64(STACK_BASE)}")
    depth = f.ins(f"lshr i64 {soff}, {GAP_SHIFT}")
    within = f.ins(f"and i64 {soff}, {STACK_FRAME_GAP - 1}")
    ok1 = f.ins(f"icmp ult i64 {soff}, {MAX_FRAMES * STACK_FRAME_GAP}")
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
    f = Text()
    f.at("entry")
    for name, v in (("status", "%status"), ("fault_pc", "%pc"), ("fault_addr", "%addr"),
                    ("fault_size", "%size"), ("rem", "%rem")):
        f.cset("%ctx", name, v)
    f.do("ret void")
    return f.text("define internal void @fault(ptr %ctx, i64 %status, i64 %pc, i64 %addr, "
                  "i64 %size, i64 %rem) noinline cold nounwind")


def _helper_fn() -> str:
    """``helper(ctx, depth, id, pc, rem, reg, r1..r5) -> r0``: a helper call through the
    run context's table, out of line (each call site keeps one call and one status
    test): the budget left and the depth published for callbacks the helper starts, a
    helper id the table lacks faulted as ST_CALLX (``reg``: callx's register), and a
    stopped run's fault placed at the call."""
    f = Text()
    f.at("entry")
    f.cset("%ctx", "rem", "%rem")
    f.cset("%ctx", "depth", "%depth")
    f.cbr(f.ins(f"icmp ult i64 %id, {f.cget('%ctx', 'nhelpers')}"), "look", "bad")
    f.at("look")
    table = f.cget("%ctx", "helpers", "ptr")
    addr = f.ins(f"load i64, ptr {f.gep(table, f.ins('shl i64 %id, 3'))}, align 8")
    f.cbr(f.ins(f"icmp ne i64 {addr}, 0"), "call", "bad", LIKELY)
    f.at("call")
    r0 = f.ins(f"call i64 {f.ins(f'inttoptr i64 {addr} to ptr')}(ptr %ctx, i64 %a1, i64 %a2, "
               "i64 %a3, i64 %a4, i64 %a5)")
    stopped = f.ins(f"icmp ne i64 {f.cget('%ctx', 'status')}, 0")
    f.cbr(stopped, "stopped", "done", UNLIKELY)
    f.at("stopped")
    f.cset("%ctx", "fault_pc", "%pc")  # a helper's failure is reported at the call
    f.br("done")
    f.at("done")
    f.do(f"ret i64 {r0}")
    f.at("bad")
    f.do(f"call void @fault(ptr %ctx, i64 {ST_CALLX}, i64 %pc, i64 %id, i64 %reg, i64 %rem)")
    f.do("ret i64 0")
    return f.text("define internal i64 @helper(ptr %ctx, i64 %depth, i64 %id, i64 %pc, "
                  "i64 %rem, i64 %reg, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5) "
                  "noinline nounwind")


def _atomic_fn(kind: str, size: int) -> str:
    """``old = atomic_<kind>(ptr, value)``, ``v = atomic_acquire(ptr)`` (load-acquire) or
    ``atomic_release(ptr, v)`` (store-release); unaligned pointers take a plain path.

    LLVM lowers an under-aligned atomic to a libatomic call the JIT
    cannot link, and the interpreter does not fault on misalignment, so
    misaligned atomics are emulated (one program runs on one thread).
    """
    ty = INT_TYPES[size]
    cmpx = kind == "cmpxchg"
    f = Text()
    f.at("entry")
    pint = f.ins("ptrtoint ptr %p to i64")
    aligned = f.ins(f"icmp eq i64 {f.ins(f'and i64 {pint}, {size - 1}')}, 0")
    f.cbr(aligned, "fast", "slow")
    f.at("fast")
    if kind in ("acquire", "release"):  # what smp_load_acquire/smp_store_release are
        if kind == "acquire":
            f.do(f"ret {ty} {f.ins(f'load atomic {ty}, ptr %p acquire, align {size}{TBAA_MEM}')}")
        else:
            f.do(f"store atomic {ty} %v, ptr %p release, align {size}{TBAA_MEM}")
            f.do("ret void")
        f.at("slow")
        if kind == "acquire":
            f.do(f"ret {ty} {f.ins(f'load {ty}, ptr %p, align 1{TBAA_MEM}')}")
            return f.text(f"define internal {ty} @atomic_acquire{size * 8}(ptr %p) nounwind")
        f.do(f"store {ty} %v, ptr %p, align 1{TBAA_MEM}")
        f.do("ret void")
        return f.text(f"define internal void @atomic_release{size * 8}(ptr %p, {ty} %v) "
                      "nounwind")
    if cmpx:
        pair = f.ins(f"cmpxchg ptr %p, {ty} %v, {ty} %n seq_cst seq_cst, align {size}{TBAA_MEM}")
        f.do(f"ret {ty} {f.ins(f'extractvalue {{ {ty}, i1 }} {pair}, 0')}")
    else:
        old = f.ins(f"atomicrmw {kind} ptr %p, {ty} %v seq_cst, align {size}{TBAA_MEM}")
        f.do(f"ret {ty} {old}")
    f.at("slow")
    old = f.ins(f"load {ty}, ptr %p, align 1{TBAA_MEM}")
    if cmpx:
        new = f.ins(f"select i1 {f.ins(f'icmp eq {ty} {old}, %v')}, {ty} %n, {ty} {old}")
    elif kind == "xchg":
        new = "%v"
    else:
        new = f.ins(f"{kind} {ty} {old}, %v")
    f.do(f"store {ty} {new}, ptr %p, align 1{TBAA_MEM}")
    f.do(f"ret {ty} {old}")
    args = f"ptr %p, {ty} %v" + (f", {ty} %n" if cmpx else "")
    return f.text(f"define internal {ty} @atomic_{kind}{size * 8}({args}) nounwind")


# The module's own shared functions (registered helper twins join them by kind).
_SHARED: dict[str, Callable[[Natives], str]] = {
    "translate": lambda n: _translate_fn(), "fault": lambda n: _fault_fn(),
    "helper": lambda n: _helper_fn(),
    "pkt": lambda n: pkt_fn(n.pkt_base), "tailcall": lambda n: tailcall_fn(),
    # what a BPF_PROBE_MEM load reads where no memory is (exception table fixup: 0)
    "probe_zero": lambda n: "@probe_zero = internal constant [8 x i8] zeroinitializer\n",
}
# used_maps keys -> MapNative.functions keys.
_MAP_FUNCTION = {"lookup": "lookup", "lookup_cpu": "lookup_cpu", "update": "update",
                 "delete": "delete", "redir": "redirect", "push": "push", "pop": "pop",
                 "peek": "peek", "output": "output", "reserve": "reserve", "query": "query",
                 "commit": "commit", "perf_output": "perf_output"}
# The queue and stack helpers: (the map function, whether it writes the value argument).
_RING_KINDS = {"map_push": ("push", False), "map_pop": ("pop", True),
               "map_peek": ("peek", True)}
# Helpers naming a constant map whose twin is the map's ``@<tag>_<what><slot>(ctx, r1..r5)``
# (it checks the other arguments): kind -> (the register holding the map, what, whether
# r1 is the XDP context: the call site checks it is the run's own, else SLOW).
_MAP_CALLS = {"ringbuf_output": (1, "output", False), "ringbuf_reserve": (1, "reserve", False),
              "ringbuf_query": (1, "query", False), "perf_output": (2, "perf_output", True)}
# Helpers given a ring buffer sample (its address, not the map): kind -> discard. The
# twin is ``@<tag>_commit<slot>(ctx, addr, discard)`` of the ring whose data holds it.
_SAMPLE_CALLS = {"ringbuf_submit": 0, "ringbuf_discard": 1}


_ATOMIC_KIND = {op.BPF_ADD: "add", op.BPF_OR: "or", op.BPF_AND: "and", op.BPF_XOR: "xor",
                op.BPF_XCHG: "xchg"}
_CMP_U = {op.BPF_JEQ: "eq", op.BPF_JNE: "ne", op.BPF_JGT: "ugt", op.BPF_JGE: "uge",
          op.BPF_JLT: "ult", op.BPF_JLE: "ule"}
_CMP_S = {op.BPF_JSGT: "sgt", op.BPF_JSGE: "sge", op.BPF_JSLT: "slt", op.BPF_JSLE: "sle"}
_BINOP = {op.BPF_ADD: "add", op.BPF_SUB: "sub", op.BPF_MUL: "mul", op.BPF_OR: "or",
          op.BPF_AND: "and", op.BPF_XOR: "xor", op.BPF_LSH: "shl", op.BPF_RSH: "lshr",
          op.BPF_ARSH: "ashr"}


class FuncLowering:
    """Emits one bpf function (entry pc, slot range) as an LLVM function."""

    def __init__(self, prog: Program, mod: ModuleLowering, entry: int,
                 part: Part | None = None) -> None:
        self.prog = prog
        self.mod = mod
        self.insns = prog.insns
        p = prog.p
        self.imm64 = p.imm64
        self.ctx_loads = p.ctx_loads
        self.natives = p.natives
        self.unsafe = p.unsafe
        self.proven = p.proven
        every = prog.blocks[entry]
        self.part = part
        self.blocks = every if part is None else {
            pc: b for pc, b in every.items() if part.lo <= pc < part.hi}
        # Edges leaving this part, by the part they enter and the block they go to:
        # (label, r0..r9, rem).
        self.leaving: dict[tuple[int, int], list[tuple[str, tuple[str, ...], str]]] = {}
        fa = prog.frames[entry]
        self.frame_offset = fa.frame_offset
        self.call_args = fa.call_args
        self.hints = prog.hints
        self.direct: dict[int, str] = {}
        # Budget tests only where a run may be cut short (see Program.budget_free).
        self.budgeted = not prog.budget_free
        # Every edge goes forward: a block's edges in are all known when it is emitted.
        self.forward = all(s > b for b, blk in every.items() for s in blk.succs)
        f = self.f = Text()
        f.at("entry")
        f.lines.append("")  # room for an alloca (see _timespec)
        self.ctx = "%ctx"
        self.depth = "%depth"
        if any(self.insns[pc].code == OP_MAY_GOTO for b in self.blocks.values() for pc in b.pcs):
            # may_goto's counter: Linux's hidden slot below the frame, set in the
            # prologue of each call of the function (promoted to a register by LLVM).
            f.do("%loops = alloca i64, align 8")
            f.do(f"store i64 {MAY_GOTO_LOOPS}, ptr %loops, align 8")
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
                         f"{f.ins(f'shl i64 %depth, {GAP_SHIFT}')}")
        self.frame = f.gep(f.cget("%ctx", "stack", "ptr"), f.ins("shl i64 %depth, 9"))
        self.tab = f.cget("%ctx", "regions", "ptr")
        # The native-helper flags and the CPU are set before a run and kept through it
        # (no helper, native or Python, writes them): read once here instead of at
        # each native twin's call site, where a call before it (an atomic, a slow path)
        # made LLVM read them again - two loads fewer per map lookup to select and run.
        f.fixed = {name: f.cget("%ctx", name) for name in ("nflags", "cpu")}
        # Edges into each block: (predecessor label, r0..r9, rem).
        self.edges: dict[int, list[tuple[str, tuple[str, ...], str]]] = {
            pc: [] for pc in self.blocks}
        inputs = tuple(f"%a{n}" for n in range(10))
        if part is None or part.index == 0:
            self.edges[entry].append(("go", inputs, f.cget("%ctx", "rem")))
            f.br(f"b{entry}")
        else:  # entered where an earlier part left: %sel names the block
            first, *rest = part.entries
            for pc in part.entries:
                self.edges[pc].append(("go", inputs, "%arem"))
            cases = " ".join(f"i64 {pc}, label %b{pc}" for pc in rest)
            f.do(f"switch i64 %sel, label %b{first} [ {cases} ]")
        # The main program's exit is read for r0 only; a callee's for r0-r5.
        exit_uses = frozenset(range(6)) if entry != 0 or 0 in prog.called else frozenset({0})
        self.live = live_in(self.insns, every, exit_uses)
        self.phi_at: dict[int, int] = {}
        # Edges into the function's one budget-fault block: (label, pc base, rem), and
        # into its one access-fault block: (label, status, pc, addr, size, rem, k + 1).
        self.over: list[tuple[str, str, str]] = []
        self.faulted: list[tuple[str, ...]] = []
        for pc in sorted(self.blocks):
            self._emit_block(self.blocks[pc])
        self._shared_faults()
        self._leave()
        f.at("bail")
        if entry == 0:  # bpf_throw's unwinding ends here: the cookie is r0
            thrown = f.ins(f"icmp eq i64 {f.cget('%ctx', 'status')}, {ST_THROW}")
            f.cbr(thrown, "thrown", "unwind", UNLIKELY)
            f.at("thrown")
            cookie = f.cget("%ctx", "fault_addr")
            for name in ("status", "fault_addr", "fault_pc"):
                f.cset("%ctx", name, "0")
            cb = prog.p.exception_cb
            if cb:  # the program's own callback, on the main function's frame and budget
                args = ", ".join(["i64 0", f"i64 {cookie}"] + ["i64 0"] * 8)
                res = f.ins(f"call {RET_T} @{prog.funcs[cb]}(ptr %ctx, i64 0, {args})")
                f.do(f"ret {RET_T} {res}")
            else:
                f.do(f"ret {RET_T} {f.ins(f'insertvalue {RET_T} undef, i64 {cookie}, 0')}")
            f.at("unwind")
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
        params = ", ".join(f"i64 %a{n}" for n in range(10))
        if part is None or part.index == 0:
            self.text = f.text(f"define internal {RET_T} @{prog.funcs[entry]}(ptr %ctx, "
                               f"i64 %depth, {params}) nounwind")
        else:
            self.text = f.text(f"define {part.linkage} {RET_T} @{part.name}(ptr %ctx, "
                               f"i64 %depth, i64 %sel, i64 %arem, {params}) nounwind")

    # -- registers ---------------------------------------------------------------
    def R(self, n: int) -> str:
        return self.r10 if n == 10 else self.regs[n]

    def W(self, n: int, v: str) -> None:
        self.regs[n] = v

    def _goto(self, target: int, rem: str) -> None:
        part = self.part
        if part is not None and not part.lo <= target < part.hi:
            into = part.owner(target)
            self.leaving.setdefault((into, target), []).append(
                (self.f.cur, tuple(self.regs), rem))
            self.f.br(f"leave{into}_{target}")
            return
        self.edges[target].append((self.f.cur, tuple(self.regs), rem))
        self.f.br(f"b{target}")

    def _leave(self) -> None:
        """Per block of a later part this one jumps to, one block that calls that part
        with the block to start at, the registers live there and the budget left, and
        returns what it returns (its faults and exits are its own: the run ends in it).
        One per target, not per part: the many early exits into a shared exit block
        then carry only what it reads (with one block per part, every such edge carried
        every register live anywhere the part is entered, ten phi copies per edge)."""
        f = self.f
        part = self.part
        for (into, target), edges in sorted(self.leaving.items()):
            assert part is not None
            f.at(f"leave{into}_{target}")
            live = self.live[target]
            labels = [e[0] for e in edges]
            sel = str(target)
            rem = self._phi(labels, [r for _, _, r in edges])
            regs = [self._phi(labels, [e[1][n] for e in edges]) if n in live else "0"
                    for n in range(10)]
            args = ", ".join(f"i64 {r}" for r in regs)
            res = f.ins(f"call {RET_T} @{part.names[into]}(ptr %ctx, i64 %depth, i64 {sel}, "
                        f"i64 {rem}, {args})")
            f.do(f"ret {RET_T} {res}")

    def _phi(self, labels: list[str], vals: list[str]) -> str:
        """``vals`` by predecessor, as one value (a phi unless they are all the same)."""
        if len(set(vals)) == 1:
            return vals[0]
        return self.f.ins("phi i64 " + ", ".join(
            f"[ {v}, %{lbl} ]" for v, lbl in zip(vals, labels, strict=True)))

    # -- blocks and the budget ---------------------------------------------------------
    def _emit_block(self, blk: Block) -> None:
        """One eBPF block, with the interpreter's exact budget.

        Instruction ``k`` of the block runs only if more than ``k`` instructions
        are left. Pure instructions cannot be observed, so the test is made only
        where it shows: before each load, store or atomic (their effects and
        faults) and before the last instruction (the block's exit); the first
        test sits at the block's entry. When a test fails the run stops at
        instruction ``rem`` of the block, exactly where the interpreter stops.
        A block with two or more tests at proven stores and no checked access
        (whose code would be copied too) is versioned: when the budget covers
        the whole block a copy without any budget test runs (LLVM may then
        merge neighbouring proven stores), else the copy with them.
        """
        f = self.f
        f.at(f"b{blk.start}")
        live = self.live[blk.start]
        if not self.forward:  # a jump back may enter later: the phis are written at the end
            self.phi_at[blk.start] = len(f.lines)
            f.lines.append("")
            self.regs = [f"%b{blk.start}r{n}" if n in live else "0" for n in range(10)]
            rem = f"%b{blk.start}rem"
        else:
            # Every jump goes forward, so every edge in is known: a phi only where the
            # edges bring different values (most registers pass through unchanged).
            edges = self.edges[blk.start]
            labels = [e[0] for e in edges]
            self.regs = [self._phi(labels, [e[1][n] for e in edges]) if n in live else "0"
                         for n in range(10)]
            rem = self._phi(labels, [e[2] for e in edges])
        n = len(blk.pcs)
        out = f"b{blk.start}.budget"
        checks = {k for k, pc in enumerate(blk.pcs[:-1])
                  if is_mem(self.insns[pc]) and pc not in self.ctx_loads
                  and not (pc in self.proven and is_load(self.insns[pc]))}
        checks.add(n - 1)
        if not self.budgeted:
            checks = set()
        first = min(checks, default=-1)
        self.rem_after = f.ins(f"sub i64 {rem}, {n}")
        self.blk = blk
        groups = self._groups(blk)
        checked = any(is_mem(self.insns[pc]) and pc not in self.proven and pc not in
                      self.ctx_loads and pc not in self.frame_offset for pc in blk.pcs)
        if (self.budgeted and not checked
                and sum(1 for k in checks if blk.pcs[k] in self.proven) >= 2):
            whole, part = f.label("whole"), f.label("part")
            f.cbr(f.ins(f"icmp sgt i64 {rem}, {n - 1}"), whole, part, LIKELY)
            start = list(self.regs)
            f.at(whole)
            self._emit_body(blk, groups, rem, set(), -1, out)
            self.regs = start
            f.at(part)
        if not self.budgeted:
            self._emit_body(blk, groups, rem, checks, first, out)
            return
        self._budget_check(rem, first, out)
        self._emit_body(blk, groups, rem, checks, first, out)
        f.at(out)
        # pc of block instruction number rem: an ld_imm64 before it counts two slots.
        if blk.lddw_at:
            at = f.ins(f"add i64 {blk.start}, {rem}")
            for j in blk.lddw_at:
                past = f.ins(f"icmp sgt i64 {rem}, {j}")
                at = f.ins(f"add i64 {at}, {f.ins(f'zext i1 {past} to i64')}")
            self.over.append((out, at, "0"))
        else:
            self.over.append((out, str(blk.start), rem))
        f.br("overbudget")

    def _shared_faults(self) -> None:
        """The function's budget-fault and access-fault blocks: every failing test
        branches to one of them (phis carry its pc and operands) instead of a call of
        its own, so the IR grows by a branch per test, not a block and a call; LLVM's
        passes and code generation (tail merging above all) grow with the blocks."""
        f = self.f
        if self.over:
            f.at("overbudget")
            base = f.ins("phi i64 " + ", ".join(f"[ {b}, %{lbl} ]" for lbl, b, _ in self.over))
            rem = f.ins("phi i64 " + ", ".join(f"[ {r}, %{lbl} ]" for lbl, _, r in self.over))
            at = f.ins(f"add i64 {base}, {rem}")
            f.do(f"call void @fault(ptr %ctx, i64 {ST_BUDGET}, i64 {at}, i64 0, i64 0, i64 0)")
            f.br("bail")
        if self.faulted:
            f.at("faulted")
            vals = [f.ins("phi i64 " + ", ".join(f"[ {e[n]}, %{e[0]} ]" for e in self.faulted))
                    for n in range(1, 7)]
            left = f.ins(f"sub i64 {vals[4]}, {vals[5]}")
            f.do(f"call void @fault(ptr %ctx, i64 {vals[0]}, i64 {vals[1]}, i64 {vals[2]}, "
                 f"i64 {vals[3]}, i64 {left})")
            f.br("bail")

    def _fault_to(self, label: str, status: int, pc: int, addr: str, size: str, rem: str,
                  k: int) -> None:
        """Emit ``label``: a fault at ``pc`` (block instruction ``k``; the faulting
        instruction counts as executed, as in the interpreter)."""
        self.f.at(label)
        self.faulted.append((label, str(status), str(pc), addr, size, rem, str(k + 1)))
        self.f.br("faulted")

    def _emit_body(self, blk: Block, groups: dict[int, list[tuple[int, int, int, int, bool]]],
                   rem: str, checks: set[int], first: int, out: str) -> None:
        """The block's instructions, testing the budget before those in ``checks`` (but
        ``first``, tested already), and its fall-through edge."""
        k, n = 0, len(blk.pcs)
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
        if not is_jmp(self.insns[blk.pcs[-1]]):  # calls, jumps and exits leave themselves
            self._goto(blk.succs[0], self.rem_after)

    def _groups(self, blk: Block) -> dict[int, list[tuple[int, int, int, int, bool]]]:
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
            checked = (is_mem(i) and pc not in self.frame_offset and pc not in self.ctx_loads
                       and pc not in self.proven)
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
            _, defs = uses_defs(i, frozenset())
            if base in defs or is_jmp(i):
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

    def _emit_group(self, blk: Block, group: list[tuple[int, int, int, int, bool]], rem: str,
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
        rbase = f.word(ent, REGION["base"], "i64", TBAA_TABLE)
        host = f.word(ent, REGION["host"], "ptr", TBAA_TABLE)
        ok = f.ins(f"icmp sgt i64 {rem}, {k_last}") if self.budgeted else "true"
        if not (self.unsafe and hint[2]):
            rsize = f.word(ent, REGION["size"], "i64", TBAA_TABLE)
            off = f.ins(f"sub i64 {f.ins(f'add i64 {bv}, {lo}')}, {rbase}")
            room = f.ins(f"sub i64 {rsize}, {off}")
            span = f.ins(f"and i1 {f.ins(f'icmp ule i64 {off}, {rsize}')}, "
                         f"{f.ins(f'icmp ule i64 {hi - lo}, {room}')}")
            ok = f.ins(f"and i1 {ok}, {span}")
            if write:
                wr = f.word(ent, REGION["writable"], "i64", TBAA_TABLE)
                ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp ne i64 {wr}, 0')}")
        fast, slow, join = f.label("fast"), f.label("slow"), f.label("joined")
        f.cbr(ok, fast, slow, LIKELY)
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
        f.cbr(f.ins(f"icmp sgt i64 {rem}, {k}"), go, out, LIKELY)
        f.at(go)

    def _fault_unless(self, ok: str, status: int, pc: int, addr: str, size: str, rem: str,
                      k: int) -> None:
        """Continue if ``ok``, else record a fault at ``pc`` (block instruction ``k``)."""
        f = self.f
        bad, cont = f.label("fault"), f.label("ok")
        f.cbr(ok, cont, bad, LIKELY)
        self._fault_to(bad, status, pc, addr, size, rem, k)
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
                                    TBAA_CTX_VALUES))
        elif cls == op.BPF_LDX:
            size = op.SIZE_BYTES[op.bpf_size(i.code)]
            p = self._access(i.src, i.off, size, False, pc, k, rem)
            ty = INT_TYPES[size]
            v = f.ins(f"load {ty}, ptr {p}, align 1{TBAA_MEM}")
            if size == 8:
                self.W(i.dst, v)
            elif op.bpf_mode(i.code) == op.BPF_MEMSX:
                self.W(i.dst, f.ins(f"sext {ty} {v} to i64"))
            else:
                self.W(i.dst, f.ins(f"zext {ty} {v} to i64"))
        elif cls == op.BPF_ST:
            size = op.SIZE_BYTES[op.bpf_size(i.code)]
            p = self._access(i.dst, i.off, size, True, pc, k, rem)
            ty = INT_TYPES[size]
            f.do(f"store {ty} {cint(ty, i.imm)}, ptr {p}, align 1{TBAA_MEM}")
        elif cls == op.BPF_STX:
            size = op.SIZE_BYTES[op.bpf_size(i.code)]
            if i.imm == op.BPF_LOAD_ACQ and op.bpf_mode(i.code) == op.BPF_ATOMIC:
                p = self._access(i.src, i.off, size, False, pc, k, rem)
                self.mod.need(f"atomic_acquire{size}")
                ty = INT_TYPES[size]
                v = f.ins(f"call {ty} @atomic_acquire{size * 8}(ptr {p})")
                self.W(i.dst, v if size == 8 else f.ins(f"zext {ty} {v} to i64"))
            elif i.imm == op.BPF_STORE_REL and op.bpf_mode(i.code) == op.BPF_ATOMIC:
                p = self._access(i.dst, i.off, size, True, pc, k, rem)
                self.mod.need(f"atomic_release{size}")
                ty = INT_TYPES[size]
                v = self._trunc(self.R(i.src), ty)
                f.do(f"call void @atomic_release{size * 8}(ptr {p}, {ty} {v})")
            elif op.bpf_mode(i.code) == op.BPF_ATOMIC:
                self._atomic(i, size, pc, k, rem)
            else:
                p = self._access(i.dst, i.off, size, True, pc, k, rem)
                ty = INT_TYPES[size]
                v = self.R(i.src) if size == 8 else self._trunc(self.R(i.src), ty)
                f.do(f"store {ty} {v}, ptr {p}, align 1{TBAA_MEM}")
        else:
            self._jmp(i, pc, k, rem)

    def _trunc(self, v: str, ty: str) -> str:
        return v if ty == "i64" else self.f.ins(f"trunc i64 {v} to {ty}")

    def _address(self, base: int, off: int) -> str:
        return self.f.ins(f"add i64 {self.R(base)}, {off}") if off else self.R(base)

    def _try(self, addr: str, size: int, write: bool, hint: Hint,
             on_null: Callable[[str], None], proven: bool = False) -> str:
        """Host pointer for ``[addr, +size)``: the ``hint`` entry tested inline, ``translate``
        when it misses; when that finds nothing ``on_null(label)`` emits the block at
        ``label`` (it must end with a branch). A ``proven`` access (the verifier's fact)
        takes the hint's entry without a test."""
        f = self.f
        kind, idx, confident = hint
        trusted = proven or (self.unsafe and confident)
        if kind == "stk":
            soff = f.ins(f"sub i64 {addr}, {c64(STACK_BASE)}")
            depth = f.ins(f"lshr i64 {soff}, {GAP_SHIFT}")
            within = f.ins(f"and i64 {soff}, {STACK_FRAME_GAP - 1}")
            fbase = f.ins(f"shl i64 {depth}, 9")
            fast = f.ins(f"getelementptr i8, ptr {f.cget('%ctx', 'stack', 'ptr')}, "
                         f"i64 {f.ins(f'add i64 {fbase}, {within}')}")
            if trusted:
                if write:  # the next run clears what this one wrote (see zero_fn)
                    dirty = f.cget("%ctx", "stack_dirty")
                    f.cset("%ctx", "stack_dirty",
                           f.ins(f"or i64 {dirty}, {f.ins(f'shl i64 1, {depth}')}"))
                return fast
            ok = f.ins(f"icmp ult i64 {soff}, {MAX_FRAMES * STACK_FRAME_GAP}")
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
            base = f.word(ent, REGION["base"], "i64", TBAA_TABLE)
            off = f.ins(f"sub i64 {addr}, {base}")
            fast = f.gep(f.word(ent, REGION["host"], "ptr", TBAA_TABLE), off)
            if trusted:
                return fast
            rsize = f.word(ent, REGION["size"], "i64", TBAA_TABLE)
            ok = f.ins(f"icmp ule i64 {off}, {rsize}")
            room = f.ins(f"sub i64 {rsize}, {off}")
            ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp ule i64 {size}, {room}')}")
            if write:
                wr = f.word(ent, REGION["writable"], "i64", TBAA_TABLE)
                ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp ne i64 {wr}, 0')}")
        yes, no, null, join = f.label("hit"), f.label("miss"), f.label("null"), f.label("got")
        f.cbr(ok, yes, no, LIKELY)
        f.at(no)
        slow = f.ins(f"call ptr @translate(ptr %ctx, i64 {addr}, i64 {size}, "
                     f"i1 {'true' if write else 'false'})")
        if write:
            # translate only reads (so LLVM keeps table fields across it); a write that
            # may land in a stack frame marks every frame for a full clear.
            f.cset("%ctx", "stack_dirty", "-1")
        f.cbr(f.ins(f"icmp ne ptr {slow}, null"), join, null, LIKELY)
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
        proven = self.proven.get(pc)
        if proven is not None and proven[0] == "probe" and not write:
            # BPF_PROBE_MEM: a load that finds no memory reads 0 (rare: no inline guess)
            self.mod.need("probe_zero")
            addr = self._address(base, off)
            got = self.f.ins(f"call ptr @translate(ptr %ctx, i64 {addr}, i64 {size}, i1 false)")
            none = self.f.ins(f"icmp eq ptr {got}, null")
            return self.f.ins(f"select i1 {none}, ptr @probe_zero, ptr {got}")
        if proven is not None:  # the verifier proved it inside this region: no fault
            return self._try(addr, size, write, proven, lambda label: None, proven=True)

        def fault(label: str) -> None:
            self._fault_to(label, ST_WRITE if write else ST_READ, pc, addr, str(size), rem, k)

        return self._try(addr, size, write, self.hints.hint(self.hints.base.get(pc)), fault)

    def _atomic(self, i: Instruction, size: int, pc: int, k: int, rem: str) -> None:
        f = self.f
        ty = INT_TYPES[size]
        # Read first, then write, as the interpreter's load-then-store does: an
        # atomic on read-only memory faults as a write, outside every region as a read.
        p = self._access(i.dst, i.off, size, False, pc, k, rem)
        val = self._trunc(self.R(i.src), ty)
        if i.imm == op.BPF_CMPXCHG:
            expect = self._trunc(self.R(0), ty)
            self.mod.need(f"atomic_cmpxchg{size}")
            if pc in self.frame_offset or pc in self.proven:
                if pc not in self.frame_offset:  # marks a written stack frame
                    p = self._access(i.dst, i.off, size, True, pc, k, rem)
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
                old_ro = f.ins(f"load {ty}, ptr {p}, align 1{TBAA_MEM}")
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
            ty = INT_TYPES[width // 8]
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
            v = cint(ty, kv)
        res: str
        if code_op == op.BPF_MOV:
            if i.off:  # movsx: sign-extend the low off bits of src
                narrow = INT_TYPES[i.off // 8]
                res = f.ins(f"sext {narrow} {self._trunc(self.R(s), narrow)} to {ty}")
            else:
                res = v
        elif code_op == op.BPF_NEG:
            res = f.ins(f"sub {ty} 0, {a}")
        elif code_op in (op.BPF_LSH, op.BPF_RSH, op.BPF_ARSH):
            # Masked amounts: LLVM shifts by >= the width are poison.
            amt = cint(ty, kv & (bits - 1)) if kv is not None else \
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
        minus1 = (1 << INT_WIDTHS[ty]) - 1
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
        if i.code == OP_MAY_GOTO:
            self._may_goto()
            return
        is32 = i.cls == op.BPF_JMP32
        ty = "i32" if is32 else "i64"
        a = self._trunc(self.R(i.dst), ty)
        if op.bpf_src(i.code) == op.BPF_X:
            v = self._trunc(self.R(i.src), ty)
        else:
            v = cint(ty, i.imm)
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

    def _may_goto(self) -> None:
        """Jump when the counter is spent, else count one down and fall through."""
        f = self.f
        taken, fall = self.blk.succs
        left = f.ins("load i64, ptr %loops, align 8")
        yes, no = f.label("t"), f.label("f")
        f.cbr(f.ins(f"icmp eq i64 {left}, 0"), yes, no, UNLIKELY)
        f.at(yes)
        self._goto(taken, self.rem_after)
        f.at(no)
        f.do(f"store i64 {f.ins(f'sub i64 {left}, 1')}, ptr %loops, align 8")
        self._goto(fall, self.rem_after)

    def _after_call(self, pc: int, record_pc: bool) -> str:
        """Leave if the callee or helper stopped the run; else return the budget left."""
        f = self.f
        status = f.cget("%ctx", "status")
        stop, cont = f.label("stopped"), f.label("back")
        f.cbr(f.ins(f"icmp ne i64 {status}, 0"), stop, cont, UNLIKELY)
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
            native = self._native(i.imm, kind, pc)
            if native is not None and kind == "bpf_throw":
                # The twin always stops the run (ST_THROW): leave for the main function's
                # unwinding at once, as after a call that stopped it - never run what
                # follows the throw in its block.
                f.cset("%ctx", "rem", self.rem_after)
                rem = self._after_call(pc, record_pc=False)
                self.W(0, native[0])
                self._goto(succ, rem)
                return
            if native is not None:
                value, nat_label, nat_rem = native
                slow_label = f.label("slow")
                join = f.label("joined")
                f.cbr(f.ins(f"icmp eq i64 {value}, {c64(SLOW)}"), slow_label, join, UNLIKELY)
                f.at(slow_label)
                r0, rem = self._helper_call(i, pc, join)
                slow_end = f.cur
                f.at(join)
                self.W(0, f.ins(f"phi i64 [ {value}, %{nat_label} ], [ {r0}, %{slow_end} ]"))
                self._goto(succ, f.ins(f"phi i64 [ {nat_rem}, %{nat_label} ], "
                                       f"[ {rem}, %{slow_end} ]"))
                return
        r0, rem = self._helper_call(i, pc)
        self.W(0, r0)
        self._goto(succ, rem)

    def _helper_call(self, i: Instruction, pc: int, join: str | None = None
                     ) -> tuple[str, str]:
        """The helper through the run context's table (Python trampolines and native
        twins), by the shared ``@helper``; returns r0 and the budget left. With ``join``
        the call's block goes there itself (the current block stays the call's)."""
        f = self.f
        x = op.bpf_src(i.code) == op.BPF_X  # callx: the helper id is in dst
        hid = self.R(i.dst) if x else str(i.imm)
        args = ", ".join(f"i64 {self.R(n)}" for n in range(1, 6))
        self.mod.need("helper")
        r0 = f.ins(f"call i64 @helper(ptr %ctx, i64 %depth, i64 {hid}, i64 {pc}, "
                   f"i64 {self.rem_after}, i64 {i.dst if x else 0}, {args})")
        if join is None:
            rem = self._after_call(pc, record_pc=False)  # @helper recorded the pc
            return r0, rem
        # A native twin's slow path: the budget read before the stop test and the call's
        # block going to the join itself, so no block of its own is left after the test
        # (one block fewer per call site for instruction selection, the same loads).
        status = f.cget("%ctx", "status")
        rem = f.cget("%ctx", "rem")
        f.cbr(f.ins(f"icmp ne i64 {status}, 0"), "bail", join, UNLIKELY)
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
        tail table names the target of each slot (its own run context and XDP entry) or
        marks it empty (word 3: the call falls through with -ENOENT, as the hook's);
        any other slot, one the runtime left to Python, takes the Python hook."""
        f = self.f
        idx = f.ins(f"and i64 {self.R(3)}, 4294967295")
        inside, look, python, native = (f.label(n) for n in ("tin", "tlook", "tpy", "tnat"))
        empty, probe = f.label("tempty"), f.label("tmark")
        before = f.cur
        # an index past the end falls through (-ENOENT), as the hook answers it
        f.cbr(f.ins(f"icmp ult i64 {idx}, {m.max_entries}"), look, empty)
        f.at(look)
        ent = f.gep(f.cget("%ctx", "tails", "ptr"),
                    f.ins(f"shl i64 {f.ins(f'add i64 {idx}, {m.tail_base}')}, 5"))
        fn = f.word(ent, 1, "i64", "")
        f.cbr(f.ins(f"icmp ne i64 {fn}, 0"), inside, probe)
        f.at(probe)
        # word 3: the runtime saw the slot empty (falls through natively, as the hook)
        f.cbr(f.ins(f"icmp ne i64 {f.word(ent, 3, 'i64', '')}, 0"), empty, python)
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
        f.cbr(f.ins(f"icmp ne i64 {f.cget('%ctx', 'status')}, 0"), failed, ok, UNLIKELY)
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
        f.at(empty)
        f.br(cont)
        f.at(done)
        self.W(0, r0)
        f.cset("%ctx", "tail_exit", "0")
        self._return(rem)
        f.at(cont)
        self.regs = nat_regs
        self.W(0, f.ins(f"phi i64 [ {r0}, %{py_end} ], [ {c64(-2)}, %{over_end} ], "
                        f"[ {c64(-2)}, %{empty} ]"))
        self._goto(self.blk.succs[0], f.ins(f"phi i64 [ {rem}, %{py_end} ], "
                                            f"[ {self.rem_after}, %{over_end} ], "
                                            f"[ {self.rem_after}, %{empty} ]"))

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

    def _native(self, helper_id: int, kind: str, pc: int) -> tuple[str, str, str] | None:
        """The native twin of a helper call: (r0 or SLOW, the label it is ready in, the
        budget left there)."""
        twin = native_by_kind(helper_id, kind)
        if twin is not None and twin.define is not None and twin.callback:
            return self._callback_twin(twin, pc)
        got = self._native_value(helper_id, kind, pc)
        return None if got is None else (got[0], got[1], self.rem_after)

    def _callback_twin(self, twin: HelperNative, pc: int) -> tuple[str, str, str] | None:
        """A twin calling the program's callback (``twin.callback``'s register, a
        function address known here): its entry and the callee frame's depth passed
        after the arguments; the run stops if the callback stopped it."""
        f = self.f
        a = self.call_args.get(pc, (None,) * 6)[twin.callback]
        target = (a[1] - FUNC_BASE) // 8 if a is not None and a[0] == "c" else -1
        if a is None or a[0] != "c" or (a[1] - FUNC_BASE) % 8 or \
                target not in self.prog.p.callbacks:
            return None
        self.mod.need_helper(twin)
        f.cset("%ctx", "rem", self.rem_after)
        args = "".join(f", i64 {self.R(n)}" for n in range(1, twin.nargs + 1))
        value = f.ins(f"call i64 @{twin.kind}(ptr %ctx{args}, ptr @{self.prog.tag}_cb{target}, "
                      f"i64 {f.ins('add i64 %depth, 1')})")
        rem = self._after_call(pc, record_pc=False)
        return value, f.cur, rem

    def _native_value(self, helper_id: int, kind: str, pc: int) -> tuple[str, str] | None:
        f = self.f
        r = [self.R(n) for n in range(6)]
        twin = native_by_kind(helper_id, kind)
        if twin is not None and twin.define is not None:
            self.mod.need_helper(twin)  # a registered IR function stands for the helper
            args = "".join(f", i64 {r[n]}" for n in range(1, twin.nargs + 1))
            return f.ins(f"call i64 @{kind}(ptr %ctx{args})"), f.cur
        if kind == "ktime":
            ok = f.flag(NF_CLOCK)
            yes, join = f.label("clk"), f.label("clkj")
            before = f.cur
            f.cbr(ok, yes, join, LIKELY)
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
        if kind in _MAP_CALLS:
            return self._native_map_call(pc, *_MAP_CALLS[kind])
        if kind in _SAMPLE_CALLS:
            return self._native_commit(_SAMPLE_CALLS[kind])
        a1 = self.call_args.get(pc, (None,) * 6)[1]
        m = self.natives.map_at(a1[1]) if a1 is not None and a1[0] == "c" else None
        if kind not in ("map_lookup", "map_lookup_percpu", "map_update", "map_delete",
                        "redirect_map", *_RING_KINDS) or m is None:
            return None  # not a map helper on a constant map: the Python helper
        if kind == "redirect_map":
            native = map_native(m.map_type)
            if m.kind == "other" or native is None or "redirect" not in native.functions:
                return None
            self.prog.used_maps[("redir", m.slot)] = m
            return f.ins(f"call i64 @{self.prog.tag}_redir{m.slot}(ptr %ctx, i64 {r[2]}, "
                         f"i64 {r[3]})"), f.cur
        native = map_native(m.map_type)
        if native is None or m.kind == "other":
            return None
        fns = native.functions
        if kind in _RING_KINDS:
            return self._native_ring(pc, m, *_RING_KINDS[kind]) \
                if _RING_KINDS[kind][0] in fns else None
        if kind == "map_lookup" and native.lookup_inline is None and "lookup" not in fns:
            return None
        if kind == "map_update" and ("update" not in fns or m.py_update):
            return None
        if kind == "map_lookup_percpu" and ("lookup_cpu" not in fns or not m.percpu):
            return None
        if kind == "map_delete" and ("delete" not in fns or m.py_update):
            return None  # a delete frees what the value held (special fields): Python
        ok = f.flag(NF_RUNCTX)
        a2 = self.call_args.get(pc, (None,) * 6)[2]
        if kind == "map_lookup" and native.lookup_inline is not None and a2 is not None \
                and a2[0] == "fp" and -STACK_SIZE <= a2[1] and a2[1] + m.key_size <= 0:
            # A key on the stack frame and an inline lookup: loads of the frame and the
            # run context only, safe to run whatever the flag, so the value is selected
            # instead of branched to (two blocks fewer per call site for instruction
            # selection; the flag is set on every packet run, where both compute it).
            key = self._arg_pointer(pc, 2, m.key_size, False, [], "")
            value = native.lookup_inline(f, m, key)
            return f.ins(f"select i1 {ok}, i64 {value}, i64 {c64(SLOW)}"), f.cur
        start = f.cur
        go, out = f.label("nat"), f.label("natj")
        f.cbr(ok, go, out, LIKELY)
        f.at(go)
        nulls: list[str] = []
        key = self._arg_pointer(pc, 2, m.key_size, False, nulls, out)
        if kind == "map_update":
            val = self._arg_pointer(pc, 3, m.value_size, False, nulls, out)
        if kind == "map_lookup" and native.lookup_inline is not None:
            value = native.lookup_inline(f, m, key)
        elif kind == "map_lookup":
            self.prog.used_maps[("lookup", m.slot)] = m
            value = f.ins(f"call i64 @{self.prog.tag}_lookup{m.slot}(ptr %ctx, ptr {key})")
        elif kind == "map_update":
            self.prog.used_maps[("update", m.slot)] = m
            value = f.ins(f"call i64 @{self.prog.tag}_update{m.slot}(ptr %ctx, ptr {key}, "
                          f"ptr {val}, i64 {r[4]})")
        elif kind == "map_lookup_percpu":
            self.prog.used_maps[("lookup_cpu", m.slot)] = m
            cpu = f.ins(f"and i64 {r[3]}, 4294967295")
            value = f.ins(f"call i64 @{self.prog.tag}_lookup_cpu{m.slot}(ptr %ctx, ptr {key}, "
                          f"i64 {cpu})")
        elif kind == "map_delete":
            self.prog.used_maps[("delete", m.slot)] = m
            value = f.ins(f"call i64 @{self.prog.tag}_delete{m.slot}(ptr %ctx, ptr {key})")
        else:
            raise AssertionError(kind)
        done = f.cur
        f.br(out)
        f.at(out)
        inc = "".join(f", [ {c64(SLOW)}, %{lbl} ]" for lbl in nulls)
        v = f.ins(f"phi i64 [ {c64(SLOW)}, %{start} ], [ {value}, %{done} ]{inc}")
        return v, f.cur

    def _native_map_call(self, pc: int, reg: int, what: str, xdp_ctx: bool
                         ) -> tuple[str, str] | None:
        """A helper on the constant map in ``r<reg>`` through the map's
        ``@<tag>_<what><slot>`` (None: the map has none, or is not constant)."""
        f = self.f
        a = self.call_args.get(pc, (None,) * 6)[reg]
        m = self.natives.map_at(a[1]) if a is not None and a[0] == "c" else None
        native = map_native(m.map_type) if m is not None else None
        if m is None or native is None or m.kind == "other" or what not in native.functions:
            return None
        if xdp_ctx and not self.natives.xdp:
            return None
        self.prog.used_maps[(what, m.slot)] = m
        args = ", ".join(f"i64 {self.R(n)}" for n in range(1, 6))
        call = f"call i64 @{self.prog.tag}_{what}{m.slot}(ptr %ctx, {args})"
        if not xdp_ctx:
            return f.ins(call), f.cur
        start = f.cur
        go, out = f.label("nat"), f.label("natj")
        own = f.ins(f"icmp eq i64 {self.R(1)}, {c64(self.natives.ctx_base)}")
        f.cbr(f.ins(f"and i1 {f.flag(NF_XDP)}, {own}"), go, out, LIKELY)
        f.at(go)
        value = f.ins(call)
        done = f.cur
        f.br(out)
        f.at(out)
        return f.ins(f"phi i64 [ {c64(SLOW)}, %{start} ], [ {value}, %{done} ]"), f.cur

    def _native_commit(self, discard: int) -> tuple[str, str] | None:
        """bpf_ringbuf_submit/discard: the commit of the constant ring buffer whose data
        holds the sample (SLOW for any other address: Python faults as the kernel's
        verifier would have refused it)."""
        f = self.f
        rings = [m for m in self.natives.maps if m.kind != "other"
                 and "commit" in getattr(map_native(m.map_type), "functions", {})]
        if not rings:
            return None
        addr = self.R(1)
        out = f.label("cmj")
        incoming = []
        for m in rings:
            hit, nxt = f.label("cm"), f.label("cmn")
            rel = f.ins(f"sub i64 {addr}, {c64(m.value_base)}")
            f.cbr(f.ins(f"icmp ult i64 {rel}, {m.value_bytes}"), hit, nxt, LIKELY)
            f.at(hit)
            self.prog.used_maps[("commit", m.slot)] = m
            incoming.append((f.ins(f"call i64 @{self.prog.tag}_commit{m.slot}(ptr %ctx, "
                                   f"i64 {addr}, i64 {discard})"), f.cur))
            f.br(out)
            f.at(nxt)
        incoming.append((c64(SLOW), f.cur))
        f.br(out)
        f.at(out)
        phi = ", ".join(f"[ {v}, %{lbl} ]" for v, lbl in incoming)
        return f.ins(f"phi i64 {phi}"), f.cur

    def _native_ring(self, pc: int, m: MapInfo, what: str, write: bool
                     ) -> tuple[str, str] | None:
        """bpf_map_push_elem (value, flags), bpf_map_pop_elem and bpf_map_peek_elem (the
        value's destination) through the map's ``@<tag>_<what><slot>`` function."""
        f = self.f
        start = f.cur
        go, out = f.label("nat"), f.label("natj")
        f.cbr(f.flag(NF_RUNCTX), go, out, LIKELY)
        f.at(go)
        nulls: list[str] = []
        val = self._arg_pointer(pc, 2, m.value_size, write, nulls, out)
        self.prog.used_maps[(what, m.slot)] = m
        flags = f", i64 {self.R(3)}" if what == "push" else ""
        value = f.ins(f"call i64 @{self.prog.tag}_{what}{m.slot}(ptr %ctx, ptr {val}{flags})")
        done = f.cur
        f.br(out)
        f.at(out)
        inc = "".join(f", [ {c64(SLOW)}, %{lbl} ]" for lbl in nulls)
        return f.ins(f"phi i64 [ {c64(SLOW)}, %{start} ], [ {value}, %{done} ]{inc}"), f.cur


# --- the whole module -------------------------------------------------------------

class ModuleLowering:
    """Shared functions a module's programs ask for, emitted once each."""

    def __init__(self) -> None:
        self.needed: set[str] = {"fault", "translate"}
        self.natives = Natives()
        # name -> IR of the shared function
        self.defines = {**shared_functions(), **_SHARED}

    def need(self, name: str) -> None:
        self.needed.add(name)

    def need_helper(self, twin: HelperNative) -> None:
        """A registered helper twin: ``@<kind>`` and the shared functions it calls."""
        assert twin.define is not None
        if self.defines.setdefault(twin.kind, twin.define) is not twin.define:
            raise ValueError(f"two native helpers define @{twin.kind}")
        self.needed.update((twin.kind, *twin.needs))

    def shared(self) -> str:
        out = []
        for name in sorted(self.needed):
            if name.startswith("atomic_"):
                kind = name[len("atomic_"):-1]
                out.append(_atomic_fn(kind, int(name[-1])))
            else:
                out.append(self.defines[name](self.natives))
        return "".join(out)


# A loop-free program's main function of this many instructions or more is emitted as
# PARTS functions (see split_parts), each in a module of its own when compiled alone: LLVM
# then optimises and generates them on as many threads (pyxdp.vm.jit.engine).
SPLIT_INSNS = 1_500
PARTS = 2
# Weight of a call in split_parts' balance: a helper call's native path, slow path and
# stop test are ~10x an ALU instruction's IR.
_CALL_WEIGHT = 10


@dataclass(frozen=True)
class Part:
    """One piece ``[lo, hi)`` of a main function split at block boundaries; a later part
    is a function entered, with the block to start at, from where an earlier one leaves."""

    index: int
    lo: int
    hi: int
    entries: tuple[int, ...]  # blocks entered from earlier parts (part 0: none)
    names: tuple[str, ...]  # every part's function, by index
    bounds: tuple[int, ...]  # every part's lo, by index
    linkage: str  # of a later part's function: "internal", or "" (one module each)

    @property
    def name(self) -> str:
        return self.names[self.index]

    def owner(self, pc: int) -> int:
        return bisect_right(self.bounds, pc) - 1


def split_parts(prog: Program, modules: bool) -> list[Part] | None:
    """The parts of ``prog``'s main function, or None when it stays one function.

    Only a program whose code tests no budget (no jump goes back, no recursion,
    may_goto, tail call or callback: :attr:`Program.budget_free`) and has one
    function is split: every edge then goes forward, so a part only ever enters a
    later one and the run ends there - a call and a return, no state but the
    registers and the budget left (the stack frame is the run context's). The cuts
    fall at block starts that balance the instructions, calls weighing more.
    """
    p = prog.p
    blocks = prog.blocks[0]
    if (not prog.budget_free or len(prog.funcs) != 1 or p.exception_cb
            or len(p.insns) < SPLIT_INSNS):
        return None
    starts = sorted(blocks)
    weight = [sum(_CALL_WEIGHT if p.insns[pc].code == op.OP_CALL else 1
                  for pc in blocks[b].pcs) for b in starts]
    total, run, cuts = sum(weight), 0, [0]
    for b, w in zip(starts, weight, strict=True):
        if run >= total * len(cuts) / PARTS and b > cuts[-1] and len(cuts) < PARTS:
            cuts.append(b)
        run += w
    if len(cuts) < 2:
        return None
    hi = [*cuts[1:], len(p.insns)]
    names = (prog.funcs[0], *(f"{prog.funcs[0]}_p{k}" for k in range(1, len(cuts))))
    into: list[set[int]] = [set() for _ in cuts]
    for b in starts:
        for s in blocks[b].succs:
            k, j = bisect_right(cuts, b) - 1, bisect_right(cuts, s) - 1
            if j != k:
                into[j].add(s)
    return [Part(k, lo, hi[k], tuple(sorted(into[k])), names, tuple(cuts),
                 "" if modules else "internal")
            for k, lo in enumerate(cuts)]


def _lower(programs: Sequence[ProgramInput], modules: bool
           ) -> tuple[list[str], list[LoweredModule]]:
    """Lower several programs into one module (shared internals emitted once); with
    ``modules`` (one program), a split main function's later parts each into a module of
    their own (the shared internals copied, the other parts declared)."""
    mod = ModuleLowering()
    bodies: list[str] = []
    later: list[tuple[str, str]] = []  # (part's text, its name) of modules of their own
    results: list[LoweredModule] = []
    for p in programs:
        if p.natives.xdp or p.natives.helpers:
            same = (mod.natives.pkt_base, mod.natives.ctx_base) == \
                (p.natives.pkt_base, p.natives.ctx_base)
            if mod.natives.xdp and p.natives.xdp and not same:
                raise ValueError("programs of one module must agree on the XDP addresses")
            mod.natives = p.natives
        prog = Program(p)
        parts = split_parts(prog, modules)
        for pc in sorted(prog.funcs):
            if pc != 0 or parts is None:
                bodies.append(FuncLowering(prog, mod, pc).text)
                continue
            for part in parts:
                text = FuncLowering(prog, mod, pc, part).text
                if modules and part.index:
                    later.append((text, part.name))
                else:
                    bodies.append(text)
        bodies.append(zero_fn(prog))
        for (what, _slot), m in sorted(prog.used_maps.items()):
            native = map_native(m.map_type)
            assert native is not None  # _native used it
            bodies.append(native.functions[_MAP_FUNCTION[what]](p.tag, m))
        entry = None
        if p.emit_run:
            bodies.append(entry_fn(prog))
            entry = f"{p.tag}_run"
        xdp = None
        if p.natives.xdp:
            mod.need("pkt")
            bodies.append(xdp_fn(prog))
            xdp = f"{p.tag}_xdp"
        cbs = {}
        for pc in p.callbacks:
            bodies.append(callback_fn(prog, pc))
            cbs[pc] = f"{p.tag}_cb{pc}"
        results.append(LoweredModule("", entry, xdp, cbs))
    shared = DECLS + mod.shared()
    # What a part's module needs besides its part: the shared internals, the program's
    # own internal functions (map natives, frame zeroing); LLVM drops what it does not call.
    internals = "".join(b for b in bodies if b.startswith("define internal")
                        and not b.startswith(f"define internal {RET_T}"))
    decls = {name: f"declare {RET_T} @{name}(ptr, i64, i64, i64{', i64' * 10}) nounwind\n"
             for _, name in later}
    texts = [shared + "".join(decls.values()) + "".join(bodies) + METADATA]
    for text, name in later:
        others = "".join(d for n, d in decls.items() if n != name)
        texts.append(shared + others + internals + text + METADATA)
    return texts, results


def lower_many(programs: Sequence[ProgramInput]) -> tuple[str, list[LoweredModule]]:
    """Lower several programs into one module (shared internals emitted once); returns
    the IR text and, per program, its exported symbols (``ir`` left empty)."""
    (text,), results = _lower(programs, False)
    return text, results


def lower_modules(p: ProgramInput) -> tuple[list[str], LoweredModule]:
    """Lower one program as modules LLVM may compile at once, on threads of their own:
    one, unless its main function is split (:func:`split_parts`); the first module
    holds the exported symbols."""
    texts, (low,) = _lower([p], True)
    return texts, low


def lower(insns: Sequence[Instruction], layout: Layout, imm64: Mapping[int, int], *,
          ctx_loads: Mapping[int, int] | None = None, callbacks: Sequence[int] = (),
          tag: str = "p", natives: Natives | None = None, unsafe: bool = False,
          emit_run: bool = True, proven: Mapping[int, Hint] | None = None) -> LoweredModule:
    """Lower a validated program. ``imm64`` holds every ld_imm64's resolved value by pc;
    ``ctx_loads`` the proven context loads (pc -> index into the run context's
    ``ctx_values``, see :mod:`pyxdp.vm.ctx_access`); ``callbacks`` are
    BPF_PSEUDO_FUNC targets that need an entry point of their own; ``proven`` the
    accesses a verifier proved inside a region (pc -> its hint), emitted unchecked.

    Exported symbols (C ABI):

    * ``u64 <tag>_run(ctx *, u64 r1, u64 r2)``: one run from pc 0 at depth 0;
    * ``void <tag>_xdp(ctx *, xdp_batch *)``: with ``natives.xdp``, the batch loop;
    * ``u64 <tag>_cb<pc>(ctx *, u64 depth, u64 r1, ..., u64 r5)``: a callback.
    """
    p = ProgramInput(tuple(insns), layout, dict(imm64), dict(ctx_loads or {}),
                     tuple(callbacks), tag, natives or Natives(), unsafe, emit_run,
                     dict(proven or {}))
    text, (res,) = lower_many([p])
    return LoweredModule(text, res.entry, res.xdp_entry, res.callbacks)
