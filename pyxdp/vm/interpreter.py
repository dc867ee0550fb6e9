"""The reference eBPF interpreter (the semantics of ``kernel/bpf/core.c: ___bpf_prog_run``).

Exact ISA v4 semantics: 64-bit wrap-around, 32-bit operations zero-extending
into the upper half, shift amounts masked to the operand width, division by
zero giving 0 and modulo by zero leaving the dividend (truncated to 32 bits
for the 32-bit forms), signed division and modulo truncating toward zero with
``INT_MIN / -1 == INT_MIN`` and ``INT_MIN % -1 == 0``, as the kernel patches
them in ``do_misc_fixups``; ``may_goto`` as the same function rewrites it (a
counter per function call, set at the call's entry, the jump taken once it is
spent: :data:`MAY_GOTO_LOOPS` fall-throughs).

Speed without per-instruction attribute lookups: each slot is pre-decoded once
into a small closure ``f(pc) -> next_pc`` made by a factory compiled once per
operation shape; the run loop is ``pc = ops[pc](pc)``. One instance runs one
program at a time (it owns its registers); use one instance per thread.

Memory goes through :class:`pyxdp.vm.memory.Memory`, so every load, store
and atomic is bounds-checked. Faults, budget exhaustion and helper errors
stop the run with a :class:`~pyxdp.errors.ProgramFault` naming the pc and the
instruction.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import (
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
)
from typing import Any, NamedTuple, Protocol

from pyxdp.asm import opcodes as op
from pyxdp.asm.disasm import BPF_JCOND
from pyxdp.asm.insn import Instruction, imm64_at
from pyxdp.asm.validate import Layout, validate
from pyxdp.errors import (
    BudgetExceeded,
    HelperFault,
    InvalidProgram,
    MemoryFault,
    ProgramFault,
    PyxdpError,
    UnsupportedHelper,
)
from pyxdp.vm import alu, interp_ops
from pyxdp.vm.alu import M32, M64, s32
from pyxdp.vm.memory import STACK_BASE, STACK_FRAME_GAP, STACK_SIZE, Memory, Region

__all__ = ["DEFAULT_BUDGET", "FUNC_BASE", "MAY_GOTO_LOOPS", "OP_MAY_GOTO", "TAIL_CALL_ID",
           "Helper", "HelperFn", "HelperTable", "Interpreter", "Ldimm64Resolver", "ProgramThrow",
           "helper_display_name",
           "helper_failure", "insn_text", "ld_imm64_value"]

DEFAULT_BUDGET = 1_000_000
# may_goto's budget: the fall-throughs one call of a function gets before each may_goto
# in it jumps (Linux's BPF_MAX_TIMED_LOOPS, the count its timed may_goto starts with;
# docs/SEMANTICS.md says how Linux goes on from there).
MAY_GOTO_LOOPS = 0xFFFF
TAIL_CALL_ID = 12
# Code addresses handed out by ld_imm64 BPF_PSEUDO_FUNC (callbacks for
# bpf_loop and friends): a fake range no data region uses.
FUNC_BASE = 0x0000_7FFE_0000_0000

OP_MAY_GOTO = op.BPF_JMP | BPF_JCOND


class ProgramThrow(PyxdpError):
    """``bpf_throw(cookie)`` unwinding every frame of a run: the run returns the cookie
    (the default exception callback's ``r0 = r1``); raised by the kfunc, caught by
    :meth:`Interpreter.run`."""

    def __init__(self, cookie: int) -> None:
        super().__init__(f"bpf_throw({cookie:#x})")
        self.cookie = cookie


class HelperFn(Protocol):
    def __call__(self, vm: Interpreter, r1: int, r2: int, r3: int, r4: int,
                 r5: int, /) -> int: ...


class Helper(NamedTuple):
    """A helper function by its Linux id; ``fn`` returns the new r0. (A named tuple: a
    frozen dataclass's methods are compiled from source when its class is made, on
    every load.)"""

    id: int
    name: str
    fn: HelperFn


class HelperTable(MutableMapping[int, Helper]):
    """Helpers by id, the rarer ones loading with their first use (issue 13: a program
    loads the models behind the helpers it calls, not behind every helper).

    :meth:`defer` names ids a module defines in a table of its own: the first look-up
    of such an id imports the module and takes the helper from that table. Membership,
    length and iteration need no import, so the table answers "is there a helper #n"
    as an eager one does; :meth:`copy` keeps the deferred ids deferred.
    """

    __slots__ = ("_own", "_lazy")

    def __init__(self, helpers: Mapping[int, Helper] | None = None) -> None:
        self._own: dict[int, Helper] = dict(helpers or {})
        self._lazy: dict[int, tuple[str, str]] = {}  # id -> (module, its table's name)

    def defer(self, module: str, table: str, ids: Iterable[int]) -> None:
        """Helpers ``ids`` are ``module``'s, in its mapping ``table``: imported on the
        first look-up of one of them."""
        for hid in ids:
            self._own.pop(hid, None)
            self._lazy[hid] = (module, table)

    def __getitem__(self, hid: int) -> Helper:
        try:
            return self._own[hid]
        except KeyError:
            if hid not in self._lazy:
                raise
        module, table = self._lazy[hid]
        helpers: Mapping[int, Helper] = getattr(importlib.import_module(module), table)
        if hid not in helpers:  # the ids given to defer() are wrong: a bug, not a miss
            raise LookupError(f"{module}.{table} has no helper #{hid}")
        h = self._own[hid] = helpers[hid]
        self._lazy.pop(hid, None)  # (two threads may have imported it at once)
        return h

    def __setitem__(self, hid: int, h: Helper) -> None:
        self._own[hid] = h
        self._lazy.pop(hid, None)

    def __delitem__(self, hid: int) -> None:
        if hid in self._lazy:
            del self._lazy[hid]
        else:
            del self._own[hid]

    def __contains__(self, hid: object) -> bool:
        return hid in self._own or hid in self._lazy

    def __iter__(self) -> Iterator[int]:
        yield from list(self._own)
        yield from list(self._lazy)

    def __len__(self) -> int:
        return len(self._own) + len(self._lazy)

    def deferred(self) -> dict[int, str]:
        """The ids not looked up yet, with the module defining each."""
        return {hid: module for hid, (module, _table) in self._lazy.items()}

    def load_deferred(self) -> None:
        """Load every deferred helper (their modules register what else they have: the
        JIT's twins)."""
        for hid in list(self._lazy):
            self[hid]

    def copy(self) -> HelperTable:
        """A table of one's own with the same helpers, the deferred ones still deferred."""
        out = HelperTable(self._own)
        out._lazy = dict(self._lazy)
        return out

    @classmethod
    def of(cls, helpers: Mapping[int, Helper]) -> HelperTable:
        """``helpers`` as a table of one's own (a HelperTable's copy keeps it lazy)."""
        return helpers.copy() if isinstance(helpers, HelperTable) else cls(helpers)


# Resolves ld_imm64 with a pseudo source (map fd, map value, ...) to the
# 64-bit value the program sees; set by the loader that binds maps.
Ldimm64Resolver = Callable[[int, Instruction, Instruction], int]


def _ktime_get_ns(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return time.monotonic_ns()


# The vectors of the ISA conformance suite need only helper 5.
ISA_HELPERS: dict[int, Helper] = {5: Helper(5, "ktime_get_ns", _ktime_get_ns)}


_ENV: dict[str, Any] = {name: getattr(alu, name) for name in alu.__all__}
# An operation's factory: (R, M, d, s, k, t, n) -> f(pc) -> next pc.
Factory = Callable[..., Callable[[int], int]]
# The factories by shape (the body's text): pyxdp.vm.interp_ops holds every shape the
# compile methods below make, byte-compiled with the package.
_FACTORIES: dict[str, Factory] = dict(interp_ops.FACTORIES)


_TYPES = {"R": "list[int]", "M": "Any", "d": "int", "s": "int", "k": "Any", "t": "int",
          "n": "int"}


def factory_source(body: str, name: str = "factory") -> str:
    """The factory of the operation shape ``body`` as Python source (annotations left
    unevaluated): it returns ``f(pc)``, which runs ``body`` with the names it uses of
    R, M, d, s, k, t, n bound as defaults. Defaults are fast locals and cost two objects
    per instruction for the collector to track (the function and its defaults), where
    closure cells would cost one more per name."""
    import re

    used = [v for v in _TYPES if re.search(rf"\b{v}\b", body)]
    head = f"def {name}({', '.join(f'{v}: {ty}' for v, ty in _TYPES.items())}) -> Op:"
    params = ["pc: int", *(f"{v}: {_TYPES[v]} = {v}" for v in used)]
    lines = ["    def f("]
    for p in params:  # (lines of at most 100 characters)
        if len(lines[-1]) + len(p) + len(") -> int:") > 98:
            lines[-1] += ","
            lines.append("          ")
        elif not lines[-1].endswith("("):
            lines[-1] += ", "
        lines[-1] += p
    lines[-1] += ") -> int:"
    return "\n".join([head, *lines, *(f"        {line}" for line in body.splitlines()),
                      "    return f", ""])


def _factory(body: str) -> Factory:
    """The factory of a shape: pyxdp.vm.interp_ops's, else (that module not regenerated
    after a change of shapes here) compiled now, once per shape."""
    fac = _FACTORIES.get(body)
    if fac is None:
        ns: dict[str, Any] = dict(_ENV)  # (the annotations stay text: this module's
        # "from __future__ import annotations" holds in the code compiled here)
        exec(compile(factory_source(body), f"<pyxdp op: {body.splitlines()[0]}>", "exec"),  # noqa: S102
             ns)
        fac = _FACTORIES[body] = ns["factory"]
    return fac


def _probe_load(load: Callable[[int, int], int]) -> Callable[[int, int], int]:
    """A BPF_PROBE_MEM load: where no memory is, the kernel's fixup leaves 0."""
    def probe(addr: int, size: int) -> int:
        try:
            return load(addr, size)
        except MemoryFault:
            return 0
    return probe


# The operation shapes. R: the registers, M: the memory access (or the context
# values), d/s: the register numbers, k/t: constants (immediate, offset, size, jump
# target), n: the next pc.
SECOND_SLOT = "raise AssertionError('second ld_imm64 slot executed')"
LD_IMM64 = "R[d] = k\nreturn n"
CTX_LOAD = "R[d] = M[k]\nreturn n"
LOAD = "R[d] = M((R[s] + k) & M64, t)\nreturn n"
STORE_IMM = "M((R[d] + k[0]) & M64, t, k[1])\nreturn n"
STORE_REG = "M((R[d] + k) & M64, t, R[s])\nreturn n"
JUMP = "return t"
SWAP = "R[d] = swap(R[d], k)\nreturn n"
TRUNCATE = "R[d] = R[d] & t\nreturn n"
FIXED_SHAPES = (SECOND_SLOT, LD_IMM64, CTX_LOAD, LOAD, STORE_IMM, STORE_REG, JUMP, SWAP,
                TRUNCATE)

_ALU64 = {
    op.BPF_ADD: "(R[d] + V) & M64", op.BPF_SUB: "(R[d] - V) & M64",
    op.BPF_MUL: "(R[d] * V) & M64", op.BPF_OR: "R[d] | V", op.BPF_AND: "R[d] & V",
    op.BPF_XOR: "R[d] ^ V", op.BPF_LSH: "(R[d] << (V & 63)) & M64",
    op.BPF_RSH: "R[d] >> (V & 63)", op.BPF_ARSH: "(s64(R[d]) >> (V & 63)) & M64",
    op.BPF_MOV: "V", op.BPF_NEG: "(-R[d]) & M64",
}
_ALU32 = {
    op.BPF_ADD: "(R[d] + V) & M32", op.BPF_SUB: "(R[d] - V) & M32",
    op.BPF_MUL: "(R[d] * V) & M32", op.BPF_OR: "(R[d] | V) & M32",
    op.BPF_AND: "R[d] & V & M32", op.BPF_XOR: "(R[d] ^ V) & M32",
    op.BPF_LSH: "(R[d] << (V & 31)) & M32", op.BPF_RSH: "(R[d] & M32) >> (V & 31)",
    op.BPF_ARSH: "(s32(R[d]) >> (V & 31)) & M32", op.BPF_MOV: "V",
    op.BPF_NEG: "(-R[d]) & M32",
}
_CMP = {
    op.BPF_JEQ: "A == B", op.BPF_JNE: "A != B", op.BPF_JGT: "A > B", op.BPF_JGE: "A >= B",
    op.BPF_JLT: "A < B", op.BPF_JLE: "A <= B", op.BPF_JSET: "A & B",
    op.BPF_JSGT: "SA > SB", op.BPF_JSGE: "SA >= SB", op.BPF_JSLT: "SA < SB",
    op.BPF_JSLE: "SA <= SB",
}
_SIGNED_CMP = (op.BPF_JSGT, op.BPF_JSGE, op.BPF_JSLT, op.BPF_JSLE)
_ATOMIC: dict[int, Callable[[int, list[int], int], int]] = {
    op.BPF_ADD: lambda old, R, s: old + R[s], op.BPF_OR: lambda old, R, s: old | R[s],
    op.BPF_AND: lambda old, R, s: old & R[s], op.BPF_XOR: lambda old, R, s: old ^ R[s],
    op.BPF_XCHG: lambda old, R, s: R[s],
}


def alu_shape(i: Instruction) -> tuple[str, int, int]:
    """The shape of ALU instruction ``i`` (not BPF_END) with its k and t."""
    is64 = i.cls == op.BPF_ALU64
    code_op = op.bpf_op(i.code)
    use_reg = op.bpf_src(i.code) == op.BPF_X
    if is64:
        k = i.imm & M64
        V = "R[s]" if use_reg else "k"
    else:
        k = i.imm & M32
        V = "(R[s] & M32)" if use_reg else "k"
    if code_op == op.BPF_MOV and i.off:
        expr = f"sx(R[s], {i.off}) & {'M64' if is64 else 'M32'}"
    elif code_op in (op.BPF_DIV, op.BPF_MOD):
        signed = i.off == 1
        if is64:
            if code_op == op.BPF_DIV:
                expr = f"sdiv64(R[d], {V})" if signed else f"(R[d] // {V}) if {V} else 0"
            else:
                expr = f"smod64(R[d], {V})" if signed else f"(R[d] % {V}) if {V} else R[d]"
        elif code_op == op.BPF_DIV:
            expr = f"sdiv32(R[d], {V})" if signed else f"((R[d] & M32) // {V}) if {V} else 0"
        else:
            expr = (f"smod32(R[d], {V})" if signed
                    else f"((R[d] & M32) % {V}) if {V} else (R[d] & M32)")
    else:
        expr = (_ALU64 if is64 else _ALU32)[code_op].replace("V", V)
    return f"R[d] = {expr}\nreturn n", k, 0


def cond_jump_shape(i: Instruction) -> tuple[str, int]:
    """The shape of conditional jump ``i`` with its k."""
    code_op = op.bpf_op(i.code)
    use_reg = op.bpf_src(i.code) == op.BPF_X
    if i.cls == op.BPF_JMP32:
        a, b = "(R[d] & M32)", "(R[s] & M32)" if use_reg else "k"
        sa, sb = "s32(R[d])", "s32(R[s])" if use_reg else "k"
        k = s32(i.imm) if code_op in _SIGNED_CMP else i.imm & M32
    else:
        a, b = "R[d]", "R[s]" if use_reg else "k"
        sa, sb = "s64(R[d])", "s64(R[s])" if use_reg else "k"
        k = i.imm if code_op in _SIGNED_CMP else i.imm & M64
    cond = _CMP[code_op].replace("SA", sa).replace("SB", sb).replace("A", a).replace("B", b)
    return f"return t if {cond} else n", k


def all_shapes() -> list[str]:
    """Every shape the interpreter's compile methods make, in a fixed order (what
    pyxdp.vm.interp_ops is generated from)."""
    shapes = dict.fromkeys(FIXED_SHAPES)
    for cls in (op.BPF_ALU64, op.BPF_ALU):
        for code_op in sorted(_ALU64.keys() | {op.BPF_DIV, op.BPF_MOD}):
            for src in (op.BPF_K, op.BPF_X):
                offs: tuple[int, ...] = (0,)
                if code_op in (op.BPF_DIV, op.BPF_MOD):
                    offs = (0, 1)
                elif code_op == op.BPF_MOV and src == op.BPF_X:
                    offs = (0, 8, 16, 32) if cls == op.BPF_ALU64 else (0, 8, 16)
                for off in offs:
                    shapes[alu_shape(Instruction(cls | code_op | src, off=off))[0]] = None
    for cls in (op.BPF_JMP, op.BPF_JMP32):
        for code_op in sorted(_CMP):
            for src in (op.BPF_K, op.BPF_X):
                shapes[cond_jump_shape(Instruction(cls | code_op | src))[0]] = None
    return list(shapes)


class Interpreter:
    """Runs one validated program; see the module docstring for the semantics.

    ``helpers`` maps Linux helper ids to :class:`Helper`; a program calling an
    id that is not there fails to load, naming the helper. ``ld_imm64``
    resolves pseudo ld_imm64 sources (maps, globals) for the loader.
    """

    def __init__(self, insns: Sequence[Instruction], *,
                 helpers: Mapping[int, Helper] | None = None,
                 ld_imm64: Ldimm64Resolver | None = None,
                 ctx_loads: Mapping[int, int] | None = None,
                 budget: int = DEFAULT_BUDGET, probe: Collection[int] = (),
                 exception_cb: int = 0) -> None:
        self.insns = tuple(insns)
        # BPF_PROBE_MEM loads (the verifier's facts): one that faults reads 0
        self.probe = frozenset(probe)
        # The program's exception callback of its own (pyxdp.spec.exception_callback;
        # 0: the default one, r0 = r1)
        self.exception_cb = exception_cb
        self.layout: Layout = validate(self.insns)
        # Proven context loads (pc -> field index, see pyxdp.vm.ctx_access) read
        # ctx_values, the way the verifier rewrites them into kernel-field loads.
        self.ctx_loads = dict(ctx_loads or {})
        self.ctx_values: list[int] = [0] * 8
        self.helpers = HelperTable.of(ISA_HELPERS if helpers is None else helpers)
        self.budget = budget
        self.R: list[int] = [0] * 11
        self.mem = Memory()
        # (one bound method of each for every operation that accesses memory)
        self._load, self._load_signed, self._store = \
            self.mem.load, self.mem.load_signed, self.mem.store
        self.frames: list[tuple[int, int, int, int, int, int]] = []
        self.context: Any = None  # per-run object for helpers (e.g. the xdp_buff)
        # The loaded program this engine runs, for helpers that keep a reference to it
        # (bpf_timer_set_callback: the program that runs the callback later).
        self.owner: Any = None
        self.executed = 0
        self._stacks: list[Region] = []
        self._resolver = ld_imm64
        # may_goto's counters by call depth: the hidden stack slot below each frame that
        # Linux's do_misc_fixups adds and sets in the prologue of a function using it.
        self.may_goto = any(i.code == OP_MAY_GOTO for i in self.insns)
        self.loops: list[int] = [0] * (op.MAX_CALL_FRAMES + 1)
        # An instruction is compiled when it first runs (a large program's first packet
        # runs a part of it), except what may fail to load: calls (an unknown helper)
        # and ld_imm64 (an unresolvable map or global), compiled now.
        lazy = self._compile_and_run
        self.ops: list[Callable[[int], int]] = [
            self._compile(pc) if i.code == op.OP_CALL or i.cls == op.BPF_LD else lazy
            for pc, i in enumerate(self.insns)]

    def _compile_and_run(self, pc: int) -> int:
        """The op of an instruction not run before: compiles it in its place, runs it."""
        f = self.ops[pc] = self._compile(pc)
        return f(pc)

    # -- compile -----------------------------------------------------------------
    def _compile(self, pc: int) -> Callable[[int], int]:
        i = self.insns[pc]
        R = self.R
        cls = i.cls
        d, s, off, imm = i.dst, i.src, i.off, i.imm
        nxt = pc + 1
        if pc > 0 and self.insns[pc - 1].code == op.OP_LD_IMM64:
            # Second slot of ld_imm64: never executed (jumps cannot land here).
            return _factory(SECOND_SLOT)(R, None, d, s, 0, 0, 0)
        if cls == op.BPF_ALU64 or cls == op.BPF_ALU:
            if op.bpf_op(i.code) == op.BPF_END:
                # a swap (BPF_TO_BE, or any ALU64 bswap: the host is little-endian) or
                # a truncation to the width
                if cls == op.BPF_ALU64 or op.bpf_src(i.code) == op.BPF_TO_BE:
                    return _factory(SWAP)(R, None, d, s, imm // 8, 0, nxt)
                return _factory(TRUNCATE)(R, None, d, s, 0, (1 << imm) - 1, nxt)
            body, k, t = alu_shape(i)
            return _factory(body)(R, None, d, s, k, t, nxt)
        if cls == op.BPF_JMP or cls == op.BPF_JMP32:
            return self._compile_jmp(i, pc)
        if cls == op.BPF_LD:
            return _factory(LD_IMM64)(R, None, d, s, self._ld_imm64_value(pc), 0, pc + 2)
        size = op.SIZE_BYTES[op.bpf_size(i.code)]
        mode = op.bpf_mode(i.code)
        if cls == op.BPF_LDX:
            if pc in self.ctx_loads:
                return _factory(CTX_LOAD)(R, self.ctx_values, d, s, self.ctx_loads[pc], 0,
                                          nxt)
            fn: Callable[[int, int], int] = \
                self._load_signed if mode == op.BPF_MEMSX else self._load
            if pc in self.probe:
                fn = _probe_load(fn)
            return _factory(LOAD)(R, fn, d, s, off, size, nxt)
        if cls == op.BPF_ST:
            return _factory(STORE_IMM)(R, self._store, d, s, (off, imm & M64), size, nxt)
        # One thread runs a program: a load-acquire and a store-release are a plain load
        # (zero-extended, as BPF_LDX) and store.
        if mode == op.BPF_MEM or imm == op.BPF_STORE_REL:
            return _factory(STORE_REG)(R, self._store, d, s, off, size, nxt)
        if imm == op.BPF_LOAD_ACQ:
            return _factory(LOAD)(R, self._load, d, s, off, size, nxt)
        return self._compile_atomic(i, R, self.mem, size, nxt)

    def _compile_jmp(self, i: Instruction, pc: int) -> Callable[[int], int]:
        code_op = op.bpf_op(i.code)
        if code_op == op.BPF_JA:
            target = pc + 1 + (i.imm if i.cls == op.BPF_JMP32 else i.off)
            return _factory(JUMP)(self.R, None, i.dst, i.src, 0, target, 0)
        if code_op == op.BPF_EXIT:
            return self._exit_op()
        if code_op == op.BPF_CALL:
            return self._compile_call(i, pc)
        target = pc + 1 + i.off
        if i.code == OP_MAY_GOTO:
            return self._may_goto_op(target, pc + 1)
        body, k = cond_jump_shape(i)
        return _factory(body)(self.R, None, i.dst, i.src, k, target, pc + 1)

    def _compile_atomic(self, i: Instruction, R: list[int], M: Memory, size: int, nxt: int
                        ) -> Callable[[int], int]:
        d, s, off, kind = i.dst, i.src, i.off, i.imm
        mask = M64 if size == 8 else M32
        load, store = M.load, M.store

        if kind == op.BPF_CMPXCHG:
            def cmpxchg(pc: int) -> int:
                addr = (R[d] + off) & M64
                old = load(addr, size)
                if old == R[0] & mask:
                    store(addr, size, R[s])
                R[0] = old
                return nxt
            return cmpxchg
        fetch = bool(kind & op.BPF_FETCH)
        update = _ATOMIC[kind if kind == op.BPF_XCHG else kind & ~op.BPF_FETCH]

        def atomic(pc: int) -> int:
            addr = (R[d] + off) & M64
            old = load(addr, size)
            store(addr, size, update(old, R, s))
            if fetch:
                R[s] = old
            return nxt
        return atomic

    def _compile_call(self, i: Instruction, pc: int) -> Callable[[int], int]:
        R = self.R
        nxt = pc + 1
        if op.bpf_src(i.code) == op.BPF_X:
            reg = i.dst

            def callx(pc: int) -> int:
                helper = self.helpers.get(R[reg])
                if helper is None:
                    raise HelperFault(f"callx to r{reg} = {R[reg]:#x}: no such helper")
                try:
                    R[0] = helper.fn(self, R[1], R[2], R[3], R[4], R[5]) & M64
                except PyxdpError:
                    raise
                except Exception as e:
                    raise helper_failure(helper, e) from e
                return nxt
            return callx
        if i.src == op.CallSrc.BPF_PSEUDO_CALL:
            return self._local_call_op(pc + 1 + i.imm, nxt)
        if i.imm == TAIL_CALL_ID:
            return self._tail_call_op(nxt)
        helper = self.helpers.get(i.imm)
        if helper is None:
            raise UnsupportedHelper(
                f"program calls helper {_helper_name(i.imm)} (#{i.imm}), which this engine "
                f"does not provide", pc=pc, insn=_insn_text(self.insns, pc), helper_id=i.imm)
        fn = helper.fn

        def call(pc: int) -> int:
            try:
                R[0] = fn(self, R[1], R[2], R[3], R[4], R[5]) & M64
            except PyxdpError:
                raise
            except Exception as e:
                raise helper_failure(helper, e) from e
            return nxt
        return call

    def _tail_call_op(self, nxt: int) -> Callable[[int], int]:
        """``bpf_tail_call``: on success the target's r0 ends the current function.

        Running the target to completion and then returning from the calling
        function is what the kernel's frame replacement amounts to; a failed
        tail call falls through with r0 = -ENOENT.
        """
        R = self.R
        exit_ = self._exit_op()

        def tail_call(pc: int) -> int:
            hook = getattr(self.context, "tail_call", None)
            result = hook(self, R[2], R[3] & M32) if hook is not None else None
            if result is None:
                R[0] = (-2) & M64  # -ENOENT
                return nxt
            R[0] = result & M64
            return exit_(pc)
        return tail_call

    def _may_goto_op(self, target: int, nxt: int) -> Callable[[int], int]:
        """``may_goto`` as Linux rewrites it: jump when the frame's counter is spent,
        else count one down and fall through."""
        F, L = self.frames, self.loops

        def may_goto(pc: int) -> int:
            depth = len(F)
            left = L[depth]
            if not left:
                return target
            L[depth] = left - 1
            return nxt
        return may_goto

    def _local_call_op(self, target: int, nxt: int) -> Callable[[int], int]:
        R, F, L = self.R, self.frames, self.loops
        enter = self._stack_top

        if self.may_goto:
            def call_local_loops(pc: int) -> int:
                F.append((nxt, R[6], R[7], R[8], R[9], R[10]))
                R[10] = enter(len(F))
                L[len(F)] = MAY_GOTO_LOOPS  # the callee's prologue sets its counter
                return target
            return call_local_loops

        def call_local(pc: int) -> int:
            F.append((nxt, R[6], R[7], R[8], R[9], R[10]))
            R[10] = enter(len(F))
            return target
        return call_local

    def _exit_op(self) -> Callable[[int], int]:
        R, F = self.R, self.frames

        def exit_(pc: int) -> int:
            if F:
                ret, R[6], R[7], R[8], R[9], R[10] = F.pop()
                return ret
            return -1
        return exit_

    def _ld_imm64_value(self, pc: int) -> int:
        return ld_imm64_value(self.insns, pc, self._resolver)

    # -- stack -------------------------------------------------------------------
    def _stack_top(self, depth: int) -> int:
        """r10 for call depth ``depth`` (0 = main), creating that frame's stack."""
        if depth >= op.MAX_CALL_FRAMES:
            raise ProgramFault(f"call depth exceeds {op.MAX_CALL_FRAMES} frames")
        while len(self._stacks) <= depth:
            n = len(self._stacks)
            region = Region(f"stack frame {n}", STACK_BASE + n * STACK_FRAME_GAP,
                            bytearray(STACK_SIZE))
            self._stacks.append(region)
            self.mem.add(region)
        return self._stacks[depth].base + STACK_SIZE

    # -- run ---------------------------------------------------------------------
    def run(self, r1: int = 0, r2: int = 0, *, regions: Sequence[Region] = (),
            budget: int | None = None, context: Any = None,
            trace: Callable[[int, Instruction, list[int]], None] | None = None) -> int:
        """Run from pc 0 with r1, r2 set; return r0 (unsigned 64-bit)."""
        self._fresh(regions, context, (r1, r2))
        budget = self.budget if budget is None else budget
        try:
            self._execute(0, budget, trace)
        except ProgramThrow as e:  # every frame unwound: the callback's r0 is the return
            self.frames.clear()
            self.R[0] = e.cookie & M64
            if self.exception_cb:
                self._exception_callback(e.cookie & M64, budget, trace)
        return self.R[0]

    def _exception_callback(self, cookie: int, budget: int,
                            trace: Callable[[int, Instruction, list[int]], None] | None
                            ) -> None:
        """The program's exception callback, called with the cookie on the main
        program's stack frame (as Linux's JITs call it), in the run's budget."""
        R = self.R
        R[1] = cookie
        R[10] = self._stack_top(0)
        self.loops[0] = MAY_GOTO_LOOPS
        try:
            self._execute(self.exception_cb, budget, trace)
        except ProgramThrow as e:  # (the verifier refuses a throw from the callback)
            self.frames.clear()
            R[0] = e.cookie & M64

    def run_callback(self, func_addr: int, *args: int, regions: Sequence[Region] = (),
                     budget: int | None = None, context: Any = None) -> int:
        """Run the callback at ``func_addr`` (a BPF_PSEUDO_FUNC value) as a run of its own:
        frame 0 fresh, ``args`` in r1-r5 (an async callback: a bpf_timer's); return r0."""
        target = self._func_target(func_addr)
        self._fresh(regions, context, args)
        self._execute(target, self.budget if budget is None else budget, None)
        return self.R[0]

    def _fresh(self, regions: Sequence[Region], context: Any, args: Sequence[int]) -> None:
        """A new run's state: registers zero but the arguments, one fresh stack frame."""
        R = self.R
        for n in range(11):
            R[n] = 0
        self.frames.clear()
        self._stacks = []
        self.mem.reset(list(regions))
        self.context = context
        self.executed = 0
        for n, value in enumerate(args[:5], start=1):
            R[n] = value & M64
        R[10] = self._stack_top(0)
        self.loops[0] = MAY_GOTO_LOOPS

    def _func_target(self, func_addr: int) -> int:
        target = (func_addr - FUNC_BASE) // 8
        if func_addr % 8 or not 0 <= target < len(self.insns):
            raise HelperFault(f"callback address {func_addr:#x} is not a function")
        return target

    def call_function(self, func_addr: int, *args: int) -> int:
        """Call a BPF_PSEUDO_FUNC callback (bpf_loop etc.) from a helper; return r0."""
        target = self._func_target(func_addr)
        R, F = self.R, self.frames
        F.append((-1, R[6], R[7], R[8], R[9], R[10]))
        for n, value in enumerate(args[:5], start=1):
            R[n] = value & M64
        R[10] = self._stack_top(len(F))
        self.loops[len(F)] = MAY_GOTO_LOOPS
        self._execute(target, self.budget, None)
        return R[0]

    def _execute(self, pc: int, budget: int,
                 trace: Callable[[int, Instruction, list[int]], None] | None) -> None:
        ops = self.ops
        count = self.executed
        try:
            if trace is None:
                while pc >= 0:
                    if count >= budget:
                        raise BudgetExceeded(f"instruction budget of {budget} exhausted")
                    count += 1
                    pc = ops[pc](pc)
            else:
                insns = self.insns
                while pc >= 0:
                    if count >= budget:
                        raise BudgetExceeded(f"instruction budget of {budget} exhausted")
                    count += 1
                    trace(pc, insns[pc], self.R)
                    pc = ops[pc](pc)
        except ProgramFault as e:
            if e.pc is None:
                e.pc = pc
                e.insn = _insn_text(self.insns, pc)
                e.args = (e._render(),)
            raise
        except (ZeroDivisionError, OverflowError, IndexError) as e:  # defensive: never leak
            raise ProgramFault(f"internal engine error: {e!r}", pc=pc,
                               insn=_insn_text(self.insns, pc)) from e
        finally:
            self.executed = count


def ld_imm64_value(insns: Sequence[Instruction], pc: int,
                   resolver: Ldimm64Resolver | None) -> int:
    """The 64-bit value the ld_imm64 at ``pc`` loads (both engines resolve it at load)."""
    i = insns[pc]
    if i.src == op.PseudoSrc.BPF_PSEUDO_NONE:
        return imm64_at(insns, pc)
    if i.src == op.PseudoSrc.BPF_PSEUDO_FUNC:
        target = pc + 1 + i.imm
        if not 0 <= target < len(insns):
            raise InvalidProgram(f"function reference to pc {target} is outside the program",
                                 pc=pc, rule="func-range")
        return FUNC_BASE + target * 8
    if resolver is None:
        raise InvalidProgram(
            f"ld_imm64 with pseudo source {op.PseudoSrc(i.src).name} needs maps bound by a "
            "loader", pc=pc, rule="pseudo-unbound")
    return resolver(pc, i, insns[pc + 1]) & M64


def insn_text(insns: Sequence[Instruction], pc: int) -> str:
    """The instruction at ``pc`` as bpftool prints it (for error reports)."""
    return _insn_text(insns, pc)


def helper_display_name(helper_id: int) -> str:
    """``bpf_<name>`` of a helper id, for error reports."""
    return _helper_name(helper_id)


def helper_failure(helper: Helper, e: Exception) -> PyxdpError:
    """What a helper's exception becomes: pyxdp's own errors pass, anything else (a
    helper tripping over arguments the program controls) is a fault naming the helper,
    so nothing untyped leaves a run."""
    if isinstance(e, PyxdpError):
        return e
    name = helper.name if helper.name.startswith("bpf_") else f"bpf_{helper.name}"
    err = HelperFault(f"{name}: {type(e).__name__}: {e}")
    err.__cause__ = e
    return err


def _insn_text(insns: Sequence[Instruction], pc: int) -> str:
    if not 0 <= pc < len(insns):
        return ""
    try:
        from pyxdp.asm.disasm import format_insn
        return format_insn(insns, pc)
    except Exception:  # noqa: BLE001 - best effort text for a report
        i = insns[pc]
        return f"code={i.code:#04x} dst=r{i.dst} src=r{i.src} off={i.off} imm={i.imm}"


def _helper_name(helper_id: int) -> str:
    from pyxdp.asm.helpers_names import helper_name
    return helper_name(helper_id) or f"unknown helper {helper_id}"
