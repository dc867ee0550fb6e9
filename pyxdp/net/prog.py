"""An XDP program ready to run on packets: ``bpf_prog_run_xdp`` of ``include/net/xdp.h``.

Loading binds the program's map references (``ld_imm64`` of a map becomes
the map's handle, of global data the address of its value), finds and checks
every ``xdp_md`` access (:mod:`pyxdp.vm.ctx_access`, as the verifier's
``convert_ctx_accesses``), and makes sure every helper it calls exists. Running
points the context fields at the packet, runs the engine and returns the XDP
action; tail calls run the target program on the same packet.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.asm.validate import validate
from pyxdp.errors import InvalidProgram, NotSupportedError, ProgramFault
from pyxdp.net.filter import XDP_HELPERS
from pyxdp.net.xdp import CTX_BASE, XdpBuff
from pyxdp.uapi.bpf import BpfAttachType
from pyxdp.vm.ctx_access import find_ctx_loads, xdp_md_rule
from pyxdp.vm.helpers import RunContext
from pyxdp.vm.interpreter import DEFAULT_BUDGET, Helper, Interpreter
from pyxdp.vm.memory import Region

if TYPE_CHECKING:
    from pyxdp.maps.base import Map
    from pyxdp.spec import ProgramSpec

__all__ = ["MAX_TAIL_CALL_CNT", "XdpProg", "jit_available"]

MAX_TAIL_CALL_CNT = 33
# Both engines have the same constructor and run() contract.
Engine = Any


def jit_available() -> bool:
    """True when llvmlite (the JIT's LLVM) imports here."""
    try:
        import llvmlite  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return False
    return True


def _pick_engine(engine: str) -> str:
    if engine == "auto":
        return "jit" if jit_available() else "interp"
    if engine == "jit" and not jit_available():
        raise NotSupportedError("engine 'jit' needs llvmlite: pip install 'pyxdp[jit]'")
    return engine
_KEY0 = bytes(4)


class XdpProg:
    """One loaded XDP program over pyxdp's maps; ``run(xdp, ctx)`` returns the action."""

    def __init__(self, spec: ProgramSpec, maps: Mapping[str, Map], *,
                 helpers: Mapping[int, Helper] | None = None,
                 budget: int = DEFAULT_BUDGET, engine: str = "auto") -> None:
        if engine not in ("auto", "jit", "interp"):
            raise NotSupportedError(f"unknown engine {engine!r} (auto, jit or interp)")
        self.engine = _pick_engine(engine)
        self.spec = spec
        self.id = 0  # the program id a loader assigns (prog_array lookups report it)
        self.maps = dict(maps)
        self.budget = budget
        insns = spec.insns
        values = self._bind_maps(spec, self.maps)
        layout = validate(insns)
        devmap = spec.expected_attach_type == BpfAttachType.BPF_XDP_DEVMAP
        try:
            loads = find_ctx_loads(insns, layout, xdp_md_rule(devmap))
        except InvalidProgram as e:
            raise self._located(e) from None
        self.ctx_loads = {pc: a.offset // 4 for pc, a in loads.items()}
        self._helpers = dict(XDP_HELPERS if helpers is None else helpers)
        self._resolve: Callable[[int, Instruction, Instruction], int] = \
            lambda pc, i, nxt: values[pc]
        try:
            self.vm = self._engine()
        except InvalidProgram as e:
            raise self._located(e) from None
        regions: list[Region] = []
        for m in self.maps.values():
            regions.extend(m.regions())
        self.map_regions = regions
        self._spare: list[Engine] = []  # engines for re-entrant tail calls
        self._tracer: Interpreter | None = None  # per-instruction traces need the interpreter
        self._depth = 0

    def _engine(self, kind: str | None = None) -> Engine:
        cls: Any = Interpreter
        if (kind or self.engine) == "jit":
            from pyxdp.vm.jit import JitProgram
            cls = JitProgram
        engine: Engine = cls(self.spec.insns, helpers=self._helpers, ld_imm64=self._resolve,
                             ctx_loads=self.ctx_loads, budget=self.budget)
        return engine

    def _located(self, e: InvalidProgram) -> InvalidProgram:
        where = self.spec.source_line(e.pc) if e.pc is not None else None
        if where:
            e.args = (f"{e.args[0]} at {where}",)
        e.args = (f"{self.spec.name} ({self.spec.section}): {e.args[0]}",)
        return e

    @staticmethod
    def _bind_maps(spec: ProgramSpec, maps: Mapping[str, Map]) -> dict[int, int]:
        values: dict[int, int] = {}
        for ref in spec.map_refs:
            m = maps.get(ref.map_name)
            if m is None:
                raise InvalidProgram(f"{spec.name}: references map {ref.map_name!r}, which the "
                                     "collection does not have", pc=ref.pc, rule="map-ref")
            if ref.kind == "fd":
                values[ref.pc] = m.addr
            else:
                addr = m.lookup_addr(_KEY0, 0)
                if not addr:
                    raise InvalidProgram(f"{spec.name}: map {ref.map_name!r} has no value to "
                                         "point into", pc=ref.pc, rule="map-ref")
                values[ref.pc] = addr + ref.offset
        for pc, i in enumerate(spec.insns):
            if (i.code == op.OP_LD_IMM64 and i.src != op.PseudoSrc.BPF_PSEUDO_NONE
                    and i.src != op.PseudoSrc.BPF_PSEUDO_FUNC and pc not in values):
                raise InvalidProgram(f"{spec.name}: ld_imm64 at pc {pc} references a map but "
                                     "has no relocation", pc=pc, rule="map-ref")
        return values

    # -- running ------------------------------------------------------------------------
    def run(self, xdp: XdpBuff, ctx: RunContext,
            trace: Callable[[int, Instruction, list[int]], None] | None = None) -> int:
        """Run on one packet; return the action (u32). ProgramFault propagates."""
        ctx.xdp = xdp
        if ctx.tail_call is None:
            ctx.tail_call = self._tail_call
        if trace is not None:
            if self._tracer is None:
                self._tracer = Interpreter(self.spec.insns, helpers=self._helpers,
                                           ld_imm64=self._resolve, ctx_loads=self.ctx_loads,
                                           budget=self.budget)
            vm: Engine = self._tracer
        else:
            vm = self.vm if self._depth == 0 else self._spare_engine()
        self._depth += 1
        try:
            cv = vm.ctx_values
            cv[0], cv[1], cv[2] = xdp.ctx_pointers()
            cv[3] = xdp.rxq.ifindex
            cv[4] = xdp.rxq.queue_index
            cv[5] = xdp.egress_ifindex
            xdp.sync_region()
            r0: int = vm.run(CTX_BASE, regions=[xdp.region, *self.map_regions], context=ctx,
                             trace=trace)
            return r0 & 0xFFFF_FFFF
        except ProgramFault as e:
            if e.pc is not None and not e.source:
                src = self.spec.source_line(e.pc)
                if src:
                    e.with_source(src)
            raise
        finally:
            self._depth -= 1

    def _spare_engine(self) -> Engine:
        while len(self._spare) < self._depth:
            self._spare.append(self._engine())
        return self._spare[self._depth - 1]

    @staticmethod
    def _tail_call(vm: Interpreter, map_addr: int, index: int) -> int | None:
        from pyxdp.maps.base import map_by_addr
        ctx: Any = vm.context
        m = map_by_addr(map_addr)
        prog_at = getattr(m, "prog_at", None)
        if prog_at is None or index >= getattr(m, "max_entries", 0):
            return None
        target = prog_at(index)
        if not isinstance(target, XdpProg) or ctx.tail_call_cnt >= MAX_TAIL_CALL_CNT:
            return None
        ctx.tail_call_cnt += 1
        return target.run(ctx.xdp, ctx)
