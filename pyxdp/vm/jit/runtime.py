"""The JIT's run time: run context, region table, helper trampolines, batch runs.

:class:`JitProgram` has the contract of :class:`pyxdp.vm.interpreter.Interpreter`
(same constructor, same ``run``, same r0, memory effects, fault types, pcs and
messages, same ``executed`` count) with the program compiled to native code by
:mod:`pyxdp.vm.jit.lower` and :mod:`pyxdp.vm.jit.engine`. Native code sees only
fake addresses; every access is translated through the region table below.

Native ABI (all fields little-endian 64-bit words unless noted; names and order
are ``abi.CTX_FIELDS`` and friends)::

    struct run_ctx {                 /* one per JitProgram, reused by every run */
        u64 status;                  /* ST_OK, ST_READ, ST_WRITE, ST_BUDGET, ST_CALLX, ... */
        i64 rem;                     /* instructions left in the budget */
        u64 fault_pc, fault_addr, fault_size;   /* the fault record */
        u64 max_depth;               /* deepest stack frame created in this run */
        u64 depth;                   /* frame depth of the latest helper call */
        u64 nregions;
        struct region *regions;      /* scanned in order, then the stack frames */
        u8  *stack;                  /* MAX_CALL_FRAMES * 512 bytes; frame d at d * 512 */
        u64 *helpers;                /* helper id -> u64 fn(run_ctx *, r1, ..., r5) or 0 */
        u64 nhelpers;
        u64 batch_index;             /* frame being run by the batch loop */
        u64 *ctx_values;             /* the context field values proven loads read */
        u64 tail_call, tail_exit;    /* bpf_tail_call's entry; set when it succeeded */
        u64 stack_dirty;             /* bit d: frame d may hold bytes the next run
                                        must clear (see entry.zero_fn) */
        u64 nflags, cpu;             /* NF_* bits for native helpers; the RunContext's CPU */
        u64 *maps;                   /* map descriptors (abi.MAPDESC_FIELDS) */
        u64 x_frame, x_frame_sz, x_data, x_data_end, x_data_meta, x_frags;  /* xdp_buff */
        u64 ri_present, ri_tgt_index, ri_map_id, ri_map_type, ri_flags, ri_map,
            ri_tv_set, ri_tv;        /* struct bpf_redirect_info of native redirects */
        u64 *tails, tail_cnt;        /* native tail call targets; calls made so far */
        u64 *xsk_table, xsk_ntable;  /* bpf_redirect_xsk: queue bitmask per ifindex */
        u64 *kern;                   /* an xdp_buff image to mirror the edges into, or 0 */
        u8  *scratch; u64 scratch_size;  /* per-run memory of native kfuncs */
        u64 *ct, *xfrm;              /* the run's conntrack table's, xfrm states' words */
        u64 *sk;                     /* the run's socket table's words, or 0 */
        u32 *rnd;                    /* the run's prandom state (s1..s4), or 0 */
        u64 *devs;                   /* its namespace's device rows and count, or 0 */
        u8  *trace;                  /* the run's trace_printk ring, or 0 */
    };
    struct region { u64 base; u64 size; u8 *host; u64 writable; };

Table entries at and past ``nregions`` always have size 0, so native code may
test any fixed entry without comparing its index to ``nregions`` first.

A program's r10 at call depth d is ``STACK_BASE + d * STACK_FRAME_GAP + 512``
and the 512 bytes below it are ``stack + d * 512``: the interpreter's fake
addresses, so pointer values agree between the engines.

Batch runs (``void batch(run_ctx *, struct batch *)``) run the program once per
frame in a native loop: before frame i, each slot rewrites one region table
entry, so the program sees that frame's packet (and any per-frame context
rows) at a fixed fake address::

    struct batch {
        u64 count;                   /* N frames */
        i64 budget;                  /* per frame */
        u64 nslots;
        struct slot *slots;
        u64 *r1, *r2;                /* N: the arguments of frame i */
        u64 *r0_out;                 /* N: r0, 0 when the frame faulted */
        u32 *status_out;             /* N: status | deepest frame << 8 */
        u32 *pc_out;                 /* N: fault pc */
        u64 *addr_out;               /* N: fault address (callx: the bad value) */
    };
    struct slot {        /* before frame i: regions[region].host = host + (offsets ?
                            offsets[i] : i * stride), .size = sizes ? sizes[i] : size */
        u64 region; u8 *host; u64 *offsets; u64 *sizes; u64 stride; u64 size;
    };

:meth:`JitProgram.run_batch` builds these from numpy arrays: frames in one
flat ``uint8`` buffer with per-frame ``(offset, length)``, the packet region
first, per-frame rows (:class:`FrameRegion`, e.g. an ``xdp_md`` per frame)
next, shared regions after. The native call releases the GIL (ctypes drops it
around any ``CFUNCTYPE`` call); Python helpers take it back while they run.

Python helpers are called through ctypes callbacks with the interpreter's
signature ``fn(vm, r1, ..., r5)``; ``vm`` is the :class:`JitProgram`, whose
``mem`` (regions plus the live stack frames), ``context`` and
``call_function`` behave as the interpreter's. An exception in a helper cannot
cross native frames: the trampoline parks it, sets ``ST_HELPER`` and the run
unwinds; ``run`` raises it as the interpreter would have. A runner may set
``_hooks`` (:class:`HelperHooks`) to bring state native helpers keep (the XDP
buffer's edges, the redirect state) into Python's view around each Python
helper. ``ktime_get_ns`` of :data:`ISA_HELPERS` is native
(``clock_gettime(CLOCK_MONOTONIC)``, the clock ``time.monotonic_ns`` reads);
the native twins of the XDP helpers and map operations are set up by the
network layer's ``XdpJit`` (the XDP program runtime).

Known differences from the interpreter, all outside a verified program's
behaviour: regions must not overlap each other or the stack frames (the
interpreter's last-hit cache makes overlapping lookups history-dependent, and
native code tries the region an access most likely hits first); a callback
started by a helper draws on the same budget as the run (the interpreter gives
it a fresh count) and leaves the caller's r1-r5 as they were; callbacks can
only enter pcs an ld_imm64 BPF_PSEUDO_FUNC names; the key ``bpf_for_each_map_elem``'s
twin hands its callback lies in the twin's own region (``HelperNative.region``, mapped
into every run of the program), not at the interpreter's per-call address.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.asm.validate import validate
from pyxdp.errors import (
    BudgetExceeded,
    HelperFault,
    MemoryFault,
    NotSupportedError,
    ProgramFault,
    UnsupportedHelper,
)
from pyxdp.vm.interpreter import (
    DEFAULT_BUDGET,
    FUNC_BASE,
    ISA_HELPERS,
    TAIL_CALL_ID,
    Helper,
    HelperFn,
    HelperTable,
    Ldimm64Resolver,
    helper_display_name,
    helper_failure,
    insn_text,
    ld_imm64_value,
)
from pyxdp.vm.jit import abi
from pyxdp.vm.jit.abi import MAX_REGIONS, Natives
from pyxdp.vm.jit.analysis import run_bound
from pyxdp.vm.jit.engine import CompiledProgram, compile_program, native_helper_address
from pyxdp.vm.jit.natives import native_by_kind
from pyxdp.vm.jit.unit import ProgramInput
from pyxdp.vm.memory import STACK_BASE, STACK_FRAME_GAP, STACK_SIZE, Memory, Region

__all__ = ["MAX_REGIONS", "NATIVE_HELPERS", "PACKET_BASE", "BatchResult", "FrameRegion",
           "HelperHooks", "JitProgram", "called_helpers"]

M64 = 0xFFFF_FFFF_FFFF_FFFF
# Where run_batch puts each frame's packet by default: the conformance runner's
# MEM_BASE, so a vector's memory and a batch frame sit at the same address.
PACKET_BASE = 0x0000_1000_0000_0000
# Budgets are signed 64-bit in native code; nothing runs 2**62 instructions.
_BUDGET_CAP = 1 << 62

# Python implementations with a native twin; the table gets the native address.
NATIVE_HELPERS: dict[HelperFn, str] = {ISA_HELPERS[5].fn: "pyxdp_ktime_get_ns"}


def called_helpers(insns: Sequence[Instruction]) -> tuple[int, ...]:
    """The helper ids a program's calls name (kfunc calls bound to helper ids included),
    sorted; a callx's id is a run-time value and is not among them."""
    return tuple(sorted({i.imm for i in insns if i.code == op.OP_CALL
                         and i.src == op.CallSrc.BPF_HELPER_CALL}))


def _words(names: Sequence[str]) -> list[tuple[str, type[ctypes.c_uint64]]]:
    return [(n, ctypes.c_uint64) for n in names]


class RunCtx(ctypes.Structure):
    _fields_ = _words(abi.CTX_FIELDS)


class BatchDesc(ctypes.Structure):
    _fields_ = _words(abi.BATCH_FIELDS)


_SLOT_WORDS = len(abi.SLOT_FIELDS)
_REGION_WORDS = len(abi.REGION_FIELDS)
_ENTRY_T = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64)
_BATCH_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_CALLBACK_T = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, *([ctypes.c_uint64] * 6))
_HELPER_T = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, *([ctypes.c_uint64] * 5))

U8Array = npt.NDArray[np.uint8]
U64Array = npt.NDArray[np.uint64]


class HelperHooks:
    """What a runner does around each Python helper call (see ``JitProgram._hooks``)."""

    def enter(self) -> None:
        """Before the helper: bring Python's view up to date with native state."""

    def exit(self) -> None:
        """After it: hand what the helper changed back to native code."""


@dataclass(eq=False)
class FrameRegion:
    """Per-frame memory for :meth:`JitProgram.run_batch`: row i is frame i's bytes."""

    name: str
    base: int
    rows: U8Array
    writable: bool = True


@dataclass(eq=False)
class BatchResult:
    """What a batch left: r0 and a status per frame (``abi.ST_*``; 0 is a clean exit).

    ``fault(i)`` renders frame i's failure as the exception ``run`` raises.
    """

    r0: U64Array
    status: npt.NDArray[np.uint32]
    fault_pc: npt.NDArray[np.uint32]
    fault_addr: U64Array
    frames_used: npt.NDArray[np.uint32]
    _render: Callable[[int], ProgramFault] = field(repr=False)

    @property
    def ok(self) -> npt.NDArray[np.bool_]:
        return np.equal(self.status, abi.ST_OK)

    def fault(self, i: int) -> ProgramFault | None:
        return None if self.status[i] == abi.ST_OK else self._render(i)


def _address(a: npt.NDArray[Any]) -> int:
    return int(a.ctypes.data)


def _buffer_view(buf: Any, writable: bool, what: str) -> U8Array:
    arr = np.frombuffer(buf, dtype=np.uint8)
    if writable and not arr.flags.writeable:
        raise TypeError(f"{what} is writable but its buffer is read-only")
    return arr


def _pin(buf: Any, writable: bool, what: str) -> tuple[object, int]:
    """Export ``buf`` (kept alive by the returned object) and return its address."""
    try:
        # The cheap way, for the writable buffers (bytearray, numpy) runs mostly get.
        c = ctypes.c_char.from_buffer(buf)
        return c, ctypes.addressof(c)
    except TypeError:
        view = _buffer_view(buf, writable, what)
        return view, _address(view)


class JitProgram:
    """One validated program compiled to native code; see the module docstring.

    One instance runs one program at a time (it owns its run context and
    stack); use one instance per thread. Construction validates, resolves
    ld_imm64 and checks helpers exactly as the interpreter does, then compiles
    (or takes the code from the cache); ``compile_ms`` says how long that took.
    """

    def __init__(self, insns: Sequence[Instruction], *,
                 helpers: Mapping[int, Helper] | None = None,
                 ld_imm64: Ldimm64Resolver | None = None,
                 ctx_loads: Mapping[int, int] | None = None,
                 budget: int = DEFAULT_BUDGET, opt_level: int = 2,
                 _natives: Natives | None = None, _map_table: U64Array | None = None,
                 _unchecked: bool = False, _emit_run: bool = True,
                 _proven: Mapping[int, abi.Hint] | None = None,
                 exception_cb: int = 0) -> None:
        self.insns = tuple(insns)
        self.layout = validate(self.insns)
        # Proven context loads read ctx_values (see Interpreter): one word each.
        self.ctx_loads = dict(ctx_loads or {})
        self._ctx_values = np.zeros(abi.CTX_VALUES, dtype=np.uint64)
        # (a HelperTable's copy keeps its deferred helpers deferred: the table below loads
        # the ones the program calls)
        self.helpers = HelperTable.of(ISA_HELPERS if helpers is None else helpers)
        self.budget = budget
        self.mem = Memory()
        self.context: Any = None
        self.owner: Any = None  # the loaded program this engine runs (see Interpreter)
        self.executed = 0
        self._resolver = ld_imm64
        imm64, callbacks = self._prepare()
        t0 = time.perf_counter()
        self._code: CompiledProgram
        # the exception callback is a function of its own the main function calls
        if exception_cb:
            callbacks.add(exception_cb)
        # A run that cannot outlast its budget needs no budget tests: the code is built
        # without them when the program's longest run fits this engine's budget, and a
        # run given less takes a build that tests it (_code_for).
        bound = run_bound(self.insns, self.layout, sorted(callbacks))
        self._min_budget = bound if bound is not None and bound <= budget else 0
        request = ProgramInput(self.insns, self.layout, imm64, self.ctx_loads,
                               tuple(sorted(callbacks)), "", _natives or Natives(),
                               _unchecked, _emit_run, dict(_proven or {}), exception_cb,
                               self._min_budget)
        self._request, self._opt_level = request, opt_level
        self._checked: CompiledProgram | None = None
        self._checked_entry: Any = None
        self._code, self.cached = compile_program(request, opt_level=opt_level)
        self.compile_ms = (time.perf_counter() - t0) * 1e3
        self._bound = False
        self._entry: Any = None
        self._callbacks: dict[int, Any] = {}
        # Native state, allocated once and reused by every run.
        self._stack = np.zeros(op.MAX_CALL_FRAMES * STACK_SIZE, dtype=np.uint8)
        # What native code's region table shows now (see _helper_enter/_helper_exit).
        self._published: list[_Seen] = []
        self._stack_regions = [
            Region(f"stack frame {n}", STACK_BASE + n * STACK_FRAME_GAP,
                   self._stack[n * STACK_SIZE:(n + 1) * STACK_SIZE].data)
            for n in range(op.MAX_CALL_FRAMES)]
        self._table = (ctypes.c_uint64 * (MAX_REGIONS * _REGION_WORDS))()
        self._trampolines: list[Any] = []
        self._helper_table = self._build_helper_table()
        self._ctx = RunCtx()
        self._ctx.regions = ctypes.addressof(self._table)
        self._ctx.stack = _address(self._stack)
        self._ctx.helpers = _address(self._helper_table)
        self._ctx.nhelpers = len(self._helper_table)
        self._ctx.ctx_values = _address(self._ctx_values)
        # Scratch memory native kfuncs keep state in (their Python twins use it too).
        need = max((t.scratch for hid, kind in request.natives.helpers
                    if (t := native_by_kind(hid, kind)) is not None), default=0)
        self.scratch: U64Array | None = np.zeros(-(-need // 8), np.uint64) if need else None
        if self.scratch is not None:
            self._ctx.scratch, self._ctx.scratch_size = _address(self.scratch), need
        # Memory twins map into every run (after the run's own regions).
        wanted = {t.region for hid, kind in request.natives.helpers
                  if (t := native_by_kind(hid, kind)) is not None and t.region is not None}
        self._twin_regions = [Region(name, base, bytearray(size), writable=False)
                              for name, base, size in sorted(wanted)]
        # Map descriptors for native helpers (kept alive with the program).
        self._map_table = _map_table if _map_table is not None else np.zeros(1, np.uint64)
        self._ctx.maps = _address(self._map_table)
        self._tail = _HELPER_T(self._tail_trampoline())
        self._ctx.tail_call = ctypes.cast(self._tail, ctypes.c_void_p).value or 0
        self._ctx_addr = ctypes.addressof(self._ctx)
        self._regions: list[Region] = []  # what the native table describes, in order
        self._pinned: list[object] = []   # buffer exports backing the table's host pointers
        self._pending: BaseException | None = None
        self._run_budget = budget
        self._batch: _BatchState | None = None
        # Called around every Python helper (the XDP runner keeps its xdp_buff in step).
        self._hooks: HelperHooks | None = None

    def _code_for(self, budget: int) -> CompiledProgram:
        """The machine code a run given ``budget`` takes: the program's, unless that was
        built without budget tests for longer budgets; then one that tests the budget
        (built on first need, at the same level)."""
        if budget >= self._min_budget:
            return self._code
        if self._checked is None:
            self._checked = compile_program(replace(self._request, min_budget=0),
                                            opt_level=self._opt_level)[0]
        return self._checked.ready()

    def _entry_for(self, budget: int) -> Any:
        """The run entry (ctypes) for ``budget`` (see _code_for)."""
        if budget >= self._min_budget:
            return self._entry
        if self._checked_entry is None:
            code = self._code_for(budget)
            self._checked_entry = _ENTRY_T(code.entry) if code.entry else None
        return self._checked_entry

    def _bind(self) -> None:
        """ctypes entry points, once the machine code exists (see compile_together)."""
        code = self._code.ready()
        self._entry = _ENTRY_T(code.entry) if code.entry else None
        self._callbacks = {pc: _CALLBACK_T(a) for pc, a in code.callbacks.items()}
        self._bound = True

    # -- load ----------------------------------------------------------------------
    def _prepare(self) -> tuple[dict[int, int], set[int]]:
        """ld_imm64 values and helper checks, in the interpreter's pc order."""
        imm64: dict[int, int] = {}
        callbacks: set[int] = set()
        for pc, i in enumerate(self.insns):
            if pc > 0 and self.insns[pc - 1].code == op.OP_LD_IMM64:
                continue
            if i.code == op.OP_LD_IMM64:
                imm64[pc] = ld_imm64_value(self.insns, pc, self._resolver)
                if i.src == op.PseudoSrc.BPF_PSEUDO_FUNC:
                    target = pc + 1 + i.imm
                    if target == 0 or self.insns[target - 1].code != op.OP_LD_IMM64:
                        callbacks.add(target)
            elif (i.code == op.OP_CALL and i.src == op.CallSrc.BPF_HELPER_CALL
                  and i.imm != TAIL_CALL_ID and i.imm not in self.helpers):
                raise UnsupportedHelper(
                    f"program calls helper {helper_display_name(i.imm)} (#{i.imm}), which this "
                    f"engine does not provide", pc=pc, insn=insn_text(self.insns, pc),
                    helper_id=i.imm)
        return imm64, callbacks

    def _build_helper_table(self) -> U64Array:
        """Helper id -> native address: the helpers the program's calls name (their
        Python ones through a trampoline each), or every helper of the table when a
        callx may name any at run time; other ids fault as callx's unknown helper."""
        if any(i.code == op.OP_CALLX for i in self.insns):
            ids = [h for h in self.helpers if 0 <= h < (1 << 16)]
        else:
            ids = [h for h in called_helpers(self.insns)
                   if 0 <= h < (1 << 16) and h in self.helpers]
        table = np.zeros(max(ids, default=0) + 1, dtype=np.uint64)
        for hid in ids:
            helper = self.helpers[hid]
            native = NATIVE_HELPERS.get(helper.fn)
            if native is not None:
                table[hid] = native_helper_address(native)
            else:
                tramp = _HELPER_T(self._trampoline(helper))
                self._trampolines.append(tramp)
                table[hid] = ctypes.cast(tramp, ctypes.c_void_p).value or 0
        return table

    @property
    def ctx_values(self) -> U64Array:
        """The context field values proven context loads read (in a batch: this frame's)."""
        if self._batch is not None and self._batch.ctx_values is not None:
            row: U64Array = self._batch.ctx_values[int(self._ctx.batch_index)]
            return row
        return self._ctx_values

    @ctx_values.setter
    def ctx_values(self, values: Sequence[int]) -> None:
        self.ctx_values[:] = values

    @property
    def code(self) -> CompiledProgram:
        """The machine code: entry addresses, IR, lowering and LLVM times."""
        return self._code.ready()

    @property
    def ir(self) -> str:
        """The optimiser's input: the LLVM IR this program lowered to."""
        return self._code.ir_text()

    # -- helpers -------------------------------------------------------------------
    def _trampoline(self, helper: Helper) -> Callable[..., int]:
        fn = cast(Callable[..., int], helper.fn)

        def call(_ctx: int | None, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
            try:
                hooks = self._hooks
                if hooks is not None:
                    hooks.enter()
                self._helper_enter()
                # A helper may write any frame through vm.mem: the next run clears them all.
                self._ctx.stack_dirty = M64
                value = fn(self, r1, r2, r3, r4, r5) & M64
                # Compare with what native code sees now: a callback may have republished.
                self._helper_exit(self._published)
                if hooks is not None:
                    hooks.exit()
                return value
            except Exception as e:  # noqa: BLE001 - cannot cross native frames; re-raised by run
                self._park(helper_failure(helper, e), abi.ST_HELPER)
            except BaseException as e:  # KeyboardInterrupt, SystemExit: also stop a batch
                self._park(e, abi.ST_ABORT)
            return 0
        return call

    def _tail_trampoline(self) -> Callable[..., int]:
        """bpf_tail_call through the context's ``tail_call`` hook, as the interpreter does."""

        def call(_ctx: int | None, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
            try:
                hooks = self._hooks
                if hooks is not None:
                    hooks.enter()
                self._helper_enter()
                self._ctx.stack_dirty = M64
                hook = getattr(self.context, "tail_call", None)
                result = hook(self, r2, r3 & 0xFFFF_FFFF) if hook is not None else None
                self._helper_exit(self._published)
                if hooks is not None:
                    hooks.exit()
                if result is None:
                    return (-2) & M64  # -ENOENT: fall through
                self._ctx.tail_exit = 1
                return int(result) & M64
            except Exception as e:  # noqa: BLE001 - cannot cross native frames; re-raised by run
                self._park(e, abi.ST_HELPER)
            except BaseException as e:
                self._park(e, abi.ST_ABORT)
            return 0
        return call

    def _park(self, e: BaseException, status: int) -> None:
        if self._batch is not None:
            self._batch.errors[int(self._ctx.batch_index)] = e
        self._pending = e
        self._ctx.status = status

    def _helper_enter(self) -> list[_Seen]:
        """Point ``mem`` at what the program sees now: regions, then live stack frames."""
        regions = self._regions
        if self._batch is not None:
            regions = self._batch.live_slots(self._table) + regions[self._batch.nslots:]
        self.mem.reset(regions + self._stack_regions[:int(self._ctx.max_depth) + 1])
        self._published = _seen(self.mem.regions)
        return self._published

    def _helper_exit(self, before: list[_Seen]) -> None:
        """Publish what a helper did to the regions (added a map value, moved the packet
        edges as bpf_xdp_adjust_head does) to native code."""
        after = _seen(self.mem.regions)
        self._published = after
        if after == before:
            return
        stacks = {id(r) for r in self._stack_regions}
        now = [r for r in self.mem.regions if id(r) not in stacks]
        keep = self._batch.nslots if self._batch is not None else 0
        if keep and after[:keep] != before[:keep]:
            raise HelperFault("a helper changed a per-frame region during a batch")
        self._load_regions(now[keep:], start=keep, pin=True)
        self._regions = self._regions[:keep] + now[keep:]

    def call_function(self, func_addr: int, *args: int) -> int:
        """Call a BPF_PSEUDO_FUNC callback (bpf_loop etc.) from a helper; return r0."""
        target = (func_addr - FUNC_BASE) // 8
        if not self._bound:
            self._bind()
        cb = self._callbacks.get(target) if func_addr % 8 == 0 else None
        if cb is None:
            raise HelperFault(f"callback address {func_addr:#x} is not a function")
        ctx = self._ctx
        depth = int(ctx.depth) + 1
        if depth >= op.MAX_CALL_FRAMES:
            raise ProgramFault(f"call depth exceeds {op.MAX_CALL_FRAMES} frames")
        regs = [a & M64 for a in args[:5]] + [0] * (5 - len(args[:5]))
        # The calling helper may have mapped memory for the callback (a key for
        # bpf_for_each_map_elem): publish vm.mem to native code before entering it.
        self._helper_exit(self._published)
        r0 = int(cb(self._ctx_addr, depth, *regs))
        ctx.depth = depth - 1
        if ctx.status:
            err = self._fault(self._run_budget)
            ctx.status = abi.ST_OK
            raise err
        return r0

    # -- regions -------------------------------------------------------------------
    def _load_regions(self, regions: Sequence[Region], *, start: int = 0,
                      pin: bool = False) -> None:
        """Describe ``regions`` to native code from table entry ``start`` on."""
        if start + len(regions) > MAX_REGIONS:
            raise ValueError(f"at most {MAX_REGIONS} regions, got {start + len(regions)}")
        pinned = []
        table = self._table
        for n, r in enumerate(regions, start):
            if len(r.buf) < r.size:
                raise ValueError(f"region {r.name}: buffer shorter than its size {r.size}")
            if not 0 <= r.base <= M64 + 1 - r.size:
                raise ValueError(f"region {r.name}: [{r.base:#x}, +{r.size}) is not inside "
                                 "the 64-bit address space")
            host = 0
            if r.size:
                keep, host = _pin(r.buf, r.writable, f"region {r.name}")
                pinned.append(keep)
            w = n * _REGION_WORDS
            table[w], table[w + 1], table[w + 2], table[w + 3] = (
                r.base, r.size, host, r.writable)
        # Entries past the end keep size 0 (native code tests fixed entries unguarded).
        for n in range(start + len(regions), int(self._ctx.nregions)):
            table[n * _REGION_WORDS + 1] = 0
        self._ctx.nregions = start + len(regions)
        if pin:
            self._pinned.extend(pinned)
        else:
            self._pinned = pinned

    def _release(self) -> None:
        # Drop the buffer exports so callers may resize their bytearrays again; the
        # stale host pointers stay behind nregions = 0 where nothing reads them.
        self._pinned = []
        table = self._table
        for n in range(int(self._ctx.nregions)):
            table[n * _REGION_WORDS + 1] = 0
        self._ctx.nregions = 0

    # -- run -----------------------------------------------------------------------
    def run(self, r1: int = 0, r2: int = 0, *, regions: Sequence[Region] = (),
            budget: int | None = None, context: Any = None, trace: Any = None) -> int:
        """Run from pc 0 with r1, r2 set; return r0 (unsigned 64-bit)."""
        if trace is not None:
            raise NotSupportedError("the JIT cannot trace instructions; use the interpreter")
        budget = self.budget if budget is None else budget
        if not self._bound:
            self._bind()
        if self._entry is None:
            raise NotSupportedError("this program was compiled for XDP batches only")
        rem = self._start_run(regions, budget, context)
        try:
            r0 = int(self._entry_for(budget)(self._ctx_addr, r1 & M64, r2 & M64))
            return self._finish_run(r0, rem, budget)
        finally:
            self._release()

    def _start_run(self, regions: Sequence[Region], budget: int, context: Any) -> int:
        """A run's set-up, shared by :meth:`run` and :meth:`run_callback`: the regions
        bound, the run context reset; returns the instruction budget given to the code."""
        self._batch = None
        self._regions = list(regions) + self._twin_regions
        self._load_regions(self._regions)
        self.context = context
        self._run_budget = budget
        self._pending = None
        ctx = self._ctx
        rem = min(max(budget, 0), _BUDGET_CAP)
        ctx.status = abi.ST_OK
        ctx.rem = rem
        ctx.depth = 0
        ctx.tail_exit = 0
        return rem

    def _finish_run(self, r0: int, rem: int, budget: int) -> int:
        """A run's result: ``executed`` counted, the recorded fault raised, else r0."""
        self.executed = rem - _signed(int(self._ctx.rem))
        if self._ctx.status:
            raise self._fault(budget)
        return r0

    def run_callback(self, func_addr: int, *args: int, regions: Sequence[Region] = (),
                     budget: int | None = None, context: Any = None) -> int:
        """Run the callback at ``func_addr`` as a run of its own (the interpreter's
        ``run_callback``): frame 0 fresh, ``args`` in r1-r5; return r0."""
        budget = self.budget if budget is None else budget
        if not self._bound:
            self._bind()
        target = (func_addr - FUNC_BASE) // 8
        cb = self._callbacks.get(target) if func_addr % 8 == 0 else None
        if cb is None:
            raise HelperFault(f"callback address {func_addr:#x} is not a function")
        rem = self._start_run(regions, budget, context)
        self._ctx.max_depth = 0
        # Frame 0 is entered as an existing frame (depth 0 is never "fresh"): clear it
        # here, as the interpreter's fresh frame; deeper ones clear themselves.
        self._stack[:STACK_SIZE] = 0
        regs = [a & M64 for a in args[:5]] + [0] * (5 - len(args[:5]))
        try:
            return self._finish_run(int(cb(self._ctx_addr, 0, *regs)), rem, budget)
        finally:
            self._release()

    def _fault(self, budget: int, regions: Sequence[Region] | None = None,
               frames: int | None = None, status: int | None = None,
               pc: int | None = None, addr: int | None = None,
               pending: BaseException | None = None) -> ProgramFault:
        """The exception the interpreter raises for the recorded fault."""
        ctx = self._ctx
        status = int(ctx.status) if status is None else status
        pc = int(ctx.fault_pc) if pc is None else pc
        addr = int(ctx.fault_addr) if addr is None else addr
        err: ProgramFault
        if status in (abi.ST_READ, abi.ST_WRITE):
            i = self.insns[pc]
            size = op.SIZE_BYTES[op.bpf_size(i.code)]
            if frames is None:
                frames = int(ctx.max_depth) + 1
            seen = list(self._regions if regions is None else regions)
            err = _memory_fault(seen + self._stack_regions[:frames], addr, size,
                                status == abi.ST_WRITE)
        elif status == abi.ST_BUDGET:
            err = BudgetExceeded(f"instruction budget of {budget} exhausted")
        elif status == abi.ST_CALLX:
            reg = self.insns[pc].dst
            err = HelperFault(f"callx to r{reg} = {addr:#x}: no such helper")
        else:
            e = self._pending if pending is None else pending
            self._pending = None
            if isinstance(e, ProgramFault):
                err = e
            elif isinstance(e, (ZeroDivisionError, OverflowError, IndexError)):
                err = ProgramFault(f"internal engine error: {e!r}")
                err.__cause__ = e
            elif e is not None:
                raise e
            else:
                err = ProgramFault(f"internal JIT error: status {status} without a cause")
        if err.pc is None:
            err.pc = pc
            err.insn = insn_text(self.insns, pc)
            err.args = (err._render(),)
        return err

    # -- batch ---------------------------------------------------------------------
    def run_batch(self, frames: Any, offsets: Any, lengths: Any, *,
                  base: int = PACKET_BASE, writable: bool = True,
                  r1: Any = None, r2: Any = None,
                  per_frame: Sequence[FrameRegion] = (), regions: Sequence[Region] = (),
                  ctx_values: Any = None, budget: int | None = None,
                  context: Any = None) -> BatchResult:
        """Run the program once per frame in one native call.

        Frame i is ``frames[offsets[i] : offsets[i] + lengths[i]]`` (``frames`` a
        flat uint8 buffer), seen as region ``packet`` at ``base``; ``per_frame``
        rows are seen at their own bases; ``regions`` are shared by all frames.
        r1 defaults to ``base`` and r2 to the frame length, the conformance
        convention. ``ctx_values``, an ``(N, CTX_VALUES)`` uint64 array, gives
        each frame its own context field values (helpers' changes land there).
        Packet writes land in ``frames``.
        """
        budget = self.budget if budget is None else budget
        if not self._bound:
            self._bind()
        if self._entry is None:
            raise NotSupportedError("this program was compiled for XDP batches only")
        buf = _buffer_view(frames, writable, "frames")
        offs = np.ascontiguousarray(offsets, dtype=np.uint64)
        lens = np.ascontiguousarray(lengths, dtype=np.uint64)
        n = len(offs)
        if offs.ndim != 1 or lens.shape != (n,):
            raise ValueError("offsets and lengths must be 1-D arrays of the same length")
        if n and (np.any(lens > buf.size) or np.any(offs > buf.size - lens)):
            raise ValueError("a frame lies outside the frames buffer")
        if int(lens.max(initial=0)) > M64 + 1 - base or base < 0:
            raise ValueError("packet region does not fit the address space")
        r1a = (np.full(n, base & M64, dtype=np.uint64) if r1 is None
               else np.ascontiguousarray(np.asarray(r1, dtype=np.uint64)).reshape(n))
        r2a = (lens.copy() if r2 is None
               else np.ascontiguousarray(np.asarray(r2, dtype=np.uint64)).reshape(n))
        rows = []
        for fr in per_frame:
            a = np.ascontiguousarray(fr.rows, dtype=np.uint8)
            if a.ndim != 2 or a.shape[0] != n:
                raise ValueError(f"per-frame region {fr.name}: rows must be (N, size) uint8")
            if fr.writable and a is not fr.rows:
                raise ValueError(f"per-frame region {fr.name}: writable rows must be a "
                                 "C-contiguous uint8 array (writes would land in a copy)")
            rows.append(a)
        cvs = None
        if ctx_values is not None:
            cvs = ctx_values
            if (not isinstance(cvs, np.ndarray) or cvs.dtype != np.uint64
                    or cvs.shape != (n, abi.CTX_VALUES) or not cvs.flags.c_contiguous
                    or not cvs.flags.writeable):
                raise ValueError(f"ctx_values must be a writable C-contiguous uint64 array "
                                 f"of shape ({n}, {abi.CTX_VALUES})")
        state = _BatchState(buf, offs, lens, base, writable, list(per_frame), rows, cvs)
        slots = np.zeros((state.nslots, _SLOT_WORDS), dtype=np.uint64)
        slots[0] = (0, _address(buf), _address(offs), _address(lens), 0, 0)
        for j, a in enumerate(rows, 1):
            slots[j] = (j, _address(a), 0, 0, a.strides[0], a.shape[1])
        out_r0 = np.zeros(n, dtype=np.uint64)
        out_st = np.zeros(n, dtype=np.uint32)
        out_pc = np.zeros(n, dtype=np.uint32)
        out_addr = np.zeros(n, dtype=np.uint64)
        desc = BatchDesc(count=n, budget=min(max(budget, 0), _BUDGET_CAP), nslots=state.nslots,
                         slots=_address(slots), r1=_address(r1a), r2=_address(r2a),
                         r0_out=_address(out_r0), status_out=_address(out_st),
                         pc_out=_address(out_pc), addr_out=_address(out_addr),
                         ctx_values=_address(cvs) if cvs is not None else 0)
        self._regions = state.placeholders() + list(regions) + self._twin_regions
        self._load_regions(self._regions)
        self._batch = state
        self.context = context
        self._run_budget = budget
        self._pending = None
        self._ctx.depth = 0
        try:
            batch_fn = _BATCH_T(native_helper_address("pyxdp_batch"))
            batch_fn(self._ctx_addr, ctypes.addressof(desc), self._code_for(budget).entry)
            shared = self._regions[state.nslots:]
        finally:
            self._batch = None
            self._ctx.ctx_values = _address(self._ctx_values)
            self._release()
        aborted = [e for e in state.errors.values() if not isinstance(e, Exception)]
        if aborted:
            raise aborted[0]
        codes = (out_st & 0xFF).astype(np.uint32)
        used = (out_st >> 8).astype(np.uint32) + 1

        def render(i: int) -> ProgramFault:
            return self._fault(budget, state.frame_regions(i) + shared, int(used[i]),
                               int(codes[i]), int(out_pc[i]), int(out_addr[i]),
                               state.errors.get(i))

        return BatchResult(out_r0, codes, out_pc, out_addr, used, render)


@dataclass(eq=False)
class _BatchState:
    buf: U8Array
    offsets: U64Array
    lengths: U64Array
    base: int
    writable: bool
    per_frame: list[FrameRegion]
    rows: list[U8Array]
    ctx_values: U64Array | None
    errors: dict[int, BaseException] = field(default_factory=dict)

    @property
    def nslots(self) -> int:
        return 1 + len(self.per_frame)

    def placeholders(self) -> list[Region]:
        """Empty stand-ins for the slot regions; the batch loop sets host and size."""
        out = [Region("packet", self.base, bytearray(), self.writable)]
        out += [Region(fr.name, fr.base, bytearray(), fr.writable) for fr in self.per_frame]
        return out

    def frame_regions(self, i: int) -> list[Region]:
        off, ln = int(self.offsets[i]), int(self.lengths[i])
        out = [Region("packet", self.base, self.buf[off:off + ln].data, self.writable)]
        out += [Region(fr.name, fr.base, a[i].data, fr.writable)
                for fr, a in zip(self.per_frame, self.rows, strict=True)]
        return out

    def live_slots(self, table: Any) -> list[Region]:
        """The slot regions as the native loop set them for the current frame."""
        out = []
        names = ["packet"] + [fr.name for fr in self.per_frame]
        flags = [self.writable] + [fr.writable for fr in self.per_frame]
        for j in range(self.nslots):
            w = j * _REGION_WORDS
            base, size, host = int(table[w]), int(table[w + 1]), int(table[w + 2])
            buf = (memoryview((ctypes.c_ubyte * size).from_address(host)).cast("B") if size
                   else bytearray())
            out.append(Region(names[j], base, buf, flags[j]))
        return out


# What native code knows of a region: identity, place, buffer and permission.
_Seen = tuple[int, int, int, int, bool]


def _seen(regions: Sequence[Region]) -> list[_Seen]:
    # The buffers stay pinned for the run, so their ids cannot be reused meanwhile.
    return [(id(r), r.base, r.size, id(r.buf), r.writable) for r in regions]


def _memory_fault(regions: list[Region], addr: int, size: int, write: bool) -> ProgramFault:
    """The interpreter's MemoryFault for this access, from the interpreter's own lookup."""
    mem = Memory()
    mem.reset(regions)
    try:
        mem.find(addr, size, write)
    except MemoryFault as e:
        return e
    return ProgramFault(f"internal JIT error: native code refused a {size}-byte "
                        f"{'write' if write else 'read'} at {addr:#x} that the regions allow")


def _signed(v: int) -> int:
    return v - (1 << 64) if v >> 63 else v
