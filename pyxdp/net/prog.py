"""An XDP program ready to run on packets: ``bpf_prog_run_xdp`` of ``include/net/xdp.h``.

Loading binds the program's map references (``ld_imm64`` of a map becomes
the map's handle, of global data the address of its value), finds and checks
every ``xdp_md`` access (:mod:`pyxdp.vm.ctx_access`, as the verifier's
``convert_ctx_accesses``), and makes sure every helper it calls exists. Running
points the context fields at the packet, runs the engine and returns the XDP
action; tail calls run the target program on the same packet.

:meth:`XdpProg.run_batch` runs many frames laid out in one numpy array: on the
JIT in one native call (:mod:`pyxdp.net.xdp_jit`), on the interpreter frame by
frame; both give an :class:`XdpBatchResult`.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
import numpy.typing as npt

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.asm.validate import validate
from pyxdp.errors import InvalidProgram, NotSupportedError, ProgramFault
from pyxdp.maps.sock_map import KernelObjectMap
from pyxdp.net.filter import XDP_HELPERS, _Verdicts
from pyxdp.net.frames import Frames
from pyxdp.net.xdp import (
    CTX_BASE,
    SKB_SHARED_INFO_SIZE,
    SYSCALL_CTX_BASE,
    FragTable,
    RxQueue,
    XdpBuff,
    frags_of_row,
    frags_to_row,
)
from pyxdp.spec import XdpRunConfig
from pyxdp.uapi.bpf import BpfAttachType, BpfMapType, XdpAction
from pyxdp.verifier.helpers import SYSCALL_MODELLED
from pyxdp.vm.ctx_access import find_ctx_loads, xdp_md_rule
from pyxdp.vm.helpers import RunContext
from pyxdp.vm.interpreter import DEFAULT_BUDGET, Helper, HelperTable, Interpreter
from pyxdp.vm.jit import abi
from pyxdp.vm.memalloc import arena, uses_arena
from pyxdp.vm.memory import Region

if TYPE_CHECKING:
    import logging

    from pyxdp.maps.base import Map
    from pyxdp.net.page_pool import MemMap
    from pyxdp.spec import ProgramSpec
    from pyxdp.verifier.facts import MemAccess
    from pyxdp.vm.stream import ProgStreams

__all__ = ["MAX_TAIL_CALL_CNT", "XdpBatchResult", "XdpProg", "jit_available", "report_faults",
           "run_xdp", "xdp_dispatcher"]


def _log() -> logging.Logger:
    """This module's logger (logging loads with the first warning, not with the module)."""
    import logging

    return logging.getLogger(__name__)


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
    if engine in ("jit", "tiered") and not jit_available():
        raise NotSupportedError(f"engine {engine!r} needs llvmlite: pip install 'pyxdp[jit]'")
    return engine


# LLVM compiles one program at a time: a tiered program's background compile and a
# load on another thread must not build modules at once.
_JIT_BUILD_LOCK = threading.RLock()
# A tiered program of at least this many instructions gets quick machine code
# (pyxdp.vm.jit.engine.QUICK) before -O2's: LLVM's -O2 takes seconds on it.
QUICK_FIRST_INSNS = 1000
# A tiered program's build waits for its first run to end, at most this many seconds
# (a program nothing runs still gets its code): the build's Python work (imports,
# lowering) would share the GIL, and its LLVM work the CPUs, with the first packet.
FIRST_RUN_WAIT = 0.1
_O2 = 2
_KEY0 = bytes(4)
U32Array = npt.NDArray[np.uint32]


@dataclass(eq=False)
class XdpBatchResult:
    """What :meth:`XdpProg.run_batch` left, one entry per frame.

    ``action`` is the verdict (XDP_ABORTED for a frame whose run faulted);
    ``data_off``/``data_len``/``meta_len`` the buffer's edges afterwards (the
    frames array holds the bytes); ``redirect_*`` the redirect state after a
    frame whose verdict is XDP_REDIRECT (``bpf_redirect_info``: map id and type,
    target index/ifindex, flags; zero for other frames). :meth:`fault` gives
    frame i's fault as the interpreter reports it, with the C source line;
    :meth:`redirect` what test_run reports.
    """

    action: U32Array
    data_off: U32Array
    data_len: U32Array
    meta_len: U32Array
    faulted: npt.NDArray[np.bool_]
    fault_pc: U32Array
    fault_addr: npt.NDArray[np.uint64]
    redirect_map_id: npt.NDArray[np.uint64]
    redirect_map_type: npt.NDArray[np.uint64]
    redirect_index: npt.NDArray[np.uint64]
    redirect_flags: npt.NDArray[np.uint64]
    done: int
    _fault: Callable[[int], ProgramFault | None] = field(repr=False)

    def __len__(self) -> int:
        return len(self.action)

    def fault(self, i: int) -> ProgramFault | None:
        """Frame i's fault (None when its run ended normally)."""
        return self._fault(i) if self.faulted[i] else None

    def redirect(self, i: int) -> dict[str, Any] | None:
        """``RedirectInfo.describe()`` after frame i when its verdict is XDP_REDIRECT."""
        if self.action[i] != XdpAction.XDP_REDIRECT:
            return None
        t = int(self.redirect_map_type[i])
        return {"tgt_index": int(self.redirect_index[i]),
                "map_id": int(self.redirect_map_id[i]),
                "map_type": BpfMapType(t).name if t in BpfMapType._value2member_map_ else t,
                "flags": int(self.redirect_flags[i])}


class XdpProg:
    """One loaded XDP program over pyxdp's maps; ``run(xdp, ctx)`` returns the action.

    ``facts`` are what pyxdp's verifier proved of the program's memory accesses
    when it loaded it (:attr:`pyxdp.verifier.VerifierResult.mem`): its JIT code
    then has no run-time check where they make one redundant.
    """

    def __init__(self, spec: ProgramSpec, maps: Mapping[str, Map], *,
                 helpers: Mapping[int, Helper] | None = None,
                 budget: int = DEFAULT_BUDGET, engine: str = "auto",
                 facts: Mapping[int, MemAccess] | None = None,
                 exception_cb: int = 0) -> None:
        if engine not in ("auto", "jit", "interp", "tiered"):
            raise NotSupportedError(f"unknown engine {engine!r} (auto, jit, interp or tiered)")
        self.engine = _pick_engine(engine)
        # The program's exception callback of its own (pyxdp.spec.exception_callback)
        self.exception_cb = exception_cb
        # "tiered": the interpreter runs the first packets while a thread builds the JIT
        # code; the next run that starts with nothing in flight switches to it.
        tiered = self.engine == "tiered"
        if tiered:
            self.engine = "interp"
        self._pending_jit: tuple[Engine, int] | None = None  # built, and its opt level
        self._pending_lock = threading.Lock()  # QUICK then -O2: neither may be lost
        self._opt_level = _O2  # what JIT engines of this program are compiled with
        self.jit_ready = threading.Event()  # set when a tiered program's JIT is built
        self.jit_optimised = threading.Event()  # ... and when its -O2 code is
        self.jit_error: BaseException | None = None
        self._ran = threading.Event()  # set when a run ends (a tiered build waits for it)
        # As the kernel backend does: a MapRef's ld_imm64 becomes a map pseudo load
        # whatever source field the spec left in it (hand-assembled specs leave 0).
        spec = spec.with_map_loads()
        self.spec = spec
        self.id = 0  # the program id a loader assigns (prog_array lookups report it)
        # A libxdp dispatcher's components in order, with their run configs
        # (pyxdp.dispatcher); empty for any other program.
        self.chain: tuple[tuple[XdpProg, XdpRunConfig], ...] = ()
        self.maps = dict(maps)
        self.budget = budget
        # What the verifier proved of the accesses (empty: not verified): the JIT drops
        # the checks these make redundant.
        self.facts = dict(facts or {})
        insns = spec.insns
        values = self._bind_maps(spec, self.maps)
        layout = validate(insns)
        devmap = spec.expected_attach_type == BpfAttachType.BPF_XDP_DEVMAP
        # A SEC("syscall") program's context is plain memory (its bytes, see run_syscall):
        # no xdp_md loads to find, and only the helpers pyxdp gives a syscall program.
        self.syscall = spec.prog_type == "syscall"
        try:
            loads = {} if self.syscall else find_ctx_loads(insns, layout, xdp_md_rule(devmap))
        except InvalidProgram as e:
            raise self._located(e) from None
        self.ctx_loads = {pc: a.offset // 4 for pc, a in loads.items()}
        if helpers is None:
            helpers = {fid: XDP_HELPERS[fid] for fid in XDP_HELPERS if fid in SYSCALL_MODELLED} \
                if self.syscall else XDP_HELPERS
        # (a copy that keeps the table's deferred helpers deferred: the look-ups below
        # load the ones the program calls)
        self._helpers = HelperTable.of(helpers)
        # prog->aux->max_ctx_offset: the end of the furthest context access the verifier
        # saw (a load or store at a fixed offset of the unmoved pointer, or a helper or
        # kfunc argument pointing into it); 0 unverified
        self.max_ctx_offset = max(
            (a.ctx_end or insns[pc].off + op.SIZE_BYTES[insns[pc].code & 0x18]
             for pc, a in self.facts.items() if "ctx" in a.kinds or a.ctx_end),
            default=0) if self.syscall else 0
        # Memory every run sees beside the maps': the object arena, for a program that
        # allocates objects or takes them out of maps (pyxdp.vm.memalloc).
        called = {self._helpers[i.imm].name for i in insns if i.code == op.OP_CALL
                  and i.src == op.CallSrc.BPF_HELPER_CALL and i.imm in self._helpers}
        self.shared_regions = [arena().region] if uses_arena(called) else []
        # and the tasks and cgroups, for one whose maps' __kptr fields hold them (a plain
        # load of a field reads one with no kfunc call, on either engine)
        if any(getattr(m, "kernel_kptrs", False) for m in self.maps.values()):
            from pyxdp.vm.task_kfuncs import kernel_objects  # (loaded with such a map only)

            self.shared_regions.append(kernel_objects().region)
        self._resolve: Callable[[int, Instruction, Instruction], int] = \
            lambda pc, i, nxt: values[pc]
        try:
            self.vm = self._engine()
        except InvalidProgram as e:
            raise self._located(e) from None
        if tiered:
            threading.Thread(target=self._build_jit, name=f"jit-{spec.name}",
                             daemon=True).start()
        regions: list[Region] = []
        for m in self.maps.values():
            regions.extend(m.regions())
        self.map_regions = regions + self.shared_regions
        self._spare: list[Engine] = []  # engines for re-entrant tail calls
        self._per_cpu: dict[int, Engine] = {}  # engine_for
        self._unlocked: dict[int, Engine] = {}  # unlocked_engine
        self._tracer: Interpreter | None = None  # per-instruction traces need the interpreter
        self._async_vm: Engine | None = None  # runs bpf_timer callbacks
        self._depth = 0
        # Called instead of a plain run() (pyxdp.explain watches each run whole: it calls
        # run() with an instruction trace and sees the end). Only run() consults it, so
        # it sees interpreter runs; a JIT program's run_batch never comes here.
        self.watcher: Callable[[XdpProg, XdpBuff, RunContext], int] | None = None

    @cached_property
    def streams(self) -> ProgStreams:
        """Its stdout and stderr (``bpf_stream_vprintk_impl``), made on first use."""
        from pyxdp.vm.stream import ProgStreams

        return ProgStreams()

    @property
    def helpers(self) -> Mapping[int, Helper]:
        """The helper table the program runs with (its kfuncs' private ids included)."""
        return self._helpers

    def _engine(self, kind: str | None = None, opt_level: int | None = None) -> Engine:
        vm: Engine
        if (kind or self.engine) == "jit" and self.syscall:  # one run, no packet: no twins
            from pyxdp.vm.jit.runtime import JitProgram
            with _JIT_BUILD_LOCK:
                vm = JitProgram(self.spec.insns, helpers=self._helpers, ld_imm64=self._resolve,
                                budget=self.budget,
                                opt_level=self._opt_level if opt_level is None else opt_level,
                                exception_cb=self.exception_cb)
        elif (kind or self.engine) == "jit":
            from pyxdp.net.xdp_jit import XdpJit
            with _JIT_BUILD_LOCK:
                vm = XdpJit(self.spec.insns, maps=list(self.maps.values()),
                            helpers=self._helpers, ld_imm64=self._resolve,
                            ctx_loads=self.ctx_loads, budget=self.budget,
                            facts=self.facts, regions=self.shared_regions,
                            opt_level=self._opt_level if opt_level is None else opt_level,
                            exception_cb=self.exception_cb)
        else:
            vm = Interpreter(self.spec.insns, helpers=self._helpers, ld_imm64=self._resolve,
                             ctx_loads=self.ctx_loads, budget=self.budget,
                             probe=[pc for pc, a in self.facts.items() if a.probe],
                             exception_cb=self.exception_cb)
        vm.owner = self  # bpf_timer_set_callback keeps the program, not the engine
        return vm

    def run_async_callback(self, func_addr: int, args: Sequence[int],
                           regions: Sequence[Region], cpu: int) -> None:
        """Run one of the program's callbacks on its own, as a bpf_timer fires it
        (:mod:`pyxdp.vm.bpf_timer`): ``args`` in r1-r3, ``regions`` beside the maps, on
        CPU ``cpu``, on an engine of its own (timer callbacks run one at a time)."""
        vm = self._async_vm
        if vm is None or (self.engine == "jit") != (type(vm) is not Interpreter):
            vm = self._async_vm = self._engine()
        ctx = RunContext(cpu=cpu)
        try:
            if isinstance(vm, Interpreter):
                vm.run_callback(func_addr, *args, regions=[*self.map_regions, *regions],
                                context=ctx)
            else:
                vm.run_callback(func_addr, *args, regions=regions, context=ctx)
        except ProgramFault as e:
            raise self._with_source(e) from None

    def _build_jit(self) -> None:
        """A tiered program's background compile (the interpreter serves meanwhile): a
        large program's quick code first, then the -O2 code; each takes over between
        runs (the same IR, so the same semantics: only the speed changes)."""
        self._ran.wait(FIRST_RUN_WAIT)
        from pyxdp.vm.jit.engine import QUICK
        levels = (QUICK, _O2) if len(self.spec.insns) >= QUICK_FIRST_INSNS else (_O2,)
        built = "interpreter"
        try:
            for level in levels:
                jit = self._engine("jit", level)
                got = jit.code.opt_level  # -O2 code already built elsewhere comes at once
                with self._pending_lock:
                    self._pending_jit = (jit, got)
                built = "quick JIT code"
                self.jit_ready.set()
                if got == _O2:
                    break
        except BaseException as e:  # noqa: BLE001 - reported, the program runs on
            self.jit_error = e
            _log().warning("%s: the JIT could not build the program (%s); it stays on the %s",
                        self.spec.name, e, built)
        finally:
            self.jit_ready.set()
            self.jit_optimised.set()

    def _promote(self) -> None:
        """Switch a tiered program to its newest JIT code, between runs."""
        with self._pending_lock:
            pending, self._pending_jit = self._pending_jit, None
        if pending is None:  # another thread's run promoted it
            return
        self._spare.clear()
        self._per_cpu.clear()
        self._unlocked.clear()
        self.vm, self._opt_level = pending
        self.engine = "jit"

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
            if isinstance(m, KernelObjectMap):
                raise NotSupportedError(
                    f"program {spec.name!r} uses map {ref.map_name!r} (pc {ref.pc}), a "
                    f"{BpfMapType(m.map_type).name} of {m.holds}, which pyxdp does not model")
            if ref.kind == "fd":
                values[ref.pc] = m.addr
            else:
                addr = m.lookup_addr(_KEY0, 0)
                if not addr:
                    raise InvalidProgram(f"{spec.name}: map {ref.map_name!r} has no value to "
                                         "point into", pc=ref.pc, rule="map-ref")
                values[ref.pc] = addr + ref.offset
        for pc, i in enumerate(spec.insns):
            if (i.code == op.OP_LD_IMM64 and i.src == op.PseudoSrc.BPF_PSEUDO_BTF_ID
                    and pc not in values):  # verified: a kernel function or variable
                raise NotSupportedError(
                    f"program {spec.name!r} loads the address of kernel symbol BTF id "
                    f"{i.imm} (ld_imm64 at pc {pc}): pyxdp's engines have no kernel addresses "
                    "(the kernel backend runs it)")
            if (i.code == op.OP_LD_IMM64 and i.src != op.PseudoSrc.BPF_PSEUDO_NONE
                    and i.src != op.PseudoSrc.BPF_PSEUDO_FUNC and pc not in values):
                raise InvalidProgram(f"{spec.name}: ld_imm64 at pc {pc} references a map but "
                                     "has no relocation", pc=pc, rule="map-ref")
        return values

    # -- running ------------------------------------------------------------------------
    def run(self, xdp: XdpBuff, ctx: RunContext,
            trace: Callable[[int, Instruction, list[int]], None] | None = None) -> int:
        """Run on one packet; return the action (u32). ProgramFault propagates."""
        if trace is None and self.watcher is not None:
            return self.watcher(self, xdp, ctx)
        if self._pending_jit is not None and self._depth == 0:
            self._promote()
        ctx.xdp = xdp
        if ctx.tail_call is None:
            ctx.tail_call = self._tail_call
        if trace is not None:
            if self._tracer is None:
                self._tracer = self._engine("interp")
            vm: Engine = self._tracer
        else:
            vm = self.vm if self._depth == 0 else self._spare_engine()
        self._depth += 1
        try:
            if trace is None and self.engine == "jit":
                r0_jit: int = vm.run_xdp(xdp, ctx)
                return r0_jit
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
            self._with_source(e)
            raise
        finally:
            self._depth -= 1
            if not self._ran.is_set():
                self._ran.set()

    def run_syscall(self, ctx_buf: bytearray, ctx: RunContext,
                    trace: Callable[[int, Instruction, list[int]], None] | None = None) -> int:
        """Run a SEC("syscall") program once on its context, ``ctx_buf`` (written in
        place; empty: no context, r1 NULL, as bpf_prog_test_run_syscall passes it);
        return r0 as the kernel reports it (u32). ProgramFault propagates."""
        if self._pending_jit is not None and self._depth == 0:
            self._promote()
        regions = [Region("syscall context", SYSCALL_CTX_BASE, ctx_buf)] if ctx_buf else []
        r1 = SYSCALL_CTX_BASE if ctx_buf else 0
        if trace is not None:
            if self._tracer is None:
                self._tracer = self._engine("interp")
            vm: Engine = self._tracer
        else:
            vm = self.vm if self._depth == 0 else self._spare_engine()
        self._depth += 1
        try:
            r0: int = vm.run(r1, regions=[*regions, *self.map_regions], context=ctx,
                             trace=trace)
            return r0 & 0xFFFF_FFFF
        except ProgramFault as e:
            self._with_source(e)
            raise
        finally:
            self._depth -= 1
            if not self._ran.is_set():
                self._ran.set()

    def _with_source(self, e: ProgramFault) -> ProgramFault:
        if e.pc is not None and not e.source:
            src = self.spec.source_line(e.pc)
            if src:
                e.with_source(src)
        return e

    def run_batch(self, frames: npt.NDArray[np.uint8], data_off: Any, data_len: Any,
                  meta_len: Any = None, rx_queue: Any = 0, ingress_ifindex: Any = 1, *,
                  ctx: RunContext | None = None, cpu: int = 0, repeat: int = 1,
                  egress_ifindex: int = 0,
                  rows: npt.NDArray[np.int64] | None = None,
                  consume_redirect: bool = False,
                  frags: FragTable | None = None) -> XdpBatchResult:
        """Run the program on every frame of ``frames`` (``(N, frame_sz)`` uint8,
        C-contiguous and writable; packet writes land there).

        Frame i's data starts at byte ``data_off[i]`` and is ``data_len[i]`` bytes
        long, after ``meta_len[i]`` bytes of metadata (none when None);
        ``rx_queue`` and ``ingress_ifindex`` are the xdp_md fields (scalars or one
        per frame); ``egress_ifindex`` is the xdp_md field devmap programs read.
        Each frame runs ``repeat`` times on the same buffer, nothing reset in
        between (BPF_PROG_TEST_RUN's repeat). A fault makes that frame
        XDP_ABORTED with a fault record; the batch goes on. ``ctx`` (default: a
        fresh RunContext on ``cpu``) is what helpers see; its redirect state
        carries across frames, as the kernel's per-CPU ``bpf_redirect_info``.
        On the JIT the whole batch is one native call with the GIL released.
        With ``rows`` (int64 row numbers into ``frames``), frame i is
        ``frames[rows[i]]``: a poll runs pages scattered over a page pool in place.
        ``consume_redirect``: each XDP_REDIRECT verdict clears the redirect
        state (map, map id and type, flags) before the next frame, as the
        datapath's ``xdp_do_redirect`` does; test_run leaves it (the kernel's
        test_run never redirects).

        ``frags``: frame i's frags are row i of this frag table (``data_len[i]`` its
        linear part); both engines leave them in the table as the program left them.
        """
        if rows is not None:
            rows = np.ascontiguousarray(rows, dtype=np.int64)
            if rows.ndim != 1 or (rows.size and (int(rows.min()) < 0
                                                 or int(rows.max()) >= len(frames))):
                raise ValueError("rows must be row numbers of frames")
        if ctx is None:
            ctx = RunContext(cpu=cpu)
        if ctx.tail_call is None:
            ctx.tail_call = self._tail_call
        if self._pending_jit is not None and self._depth == 0:
            self._promote()
        if self.engine == "jit" and self._depth == 0:
            self._depth += 1
            try:
                out = self.vm.run_batch_xdp(frames, data_off, data_len, meta_len, rx_queue,
                                            ingress_ifindex, ctx=ctx, repeat=repeat,
                                            egress_ifindex=egress_ifindex, rows=rows,
                                            consume_redirect=consume_redirect, frags=frags)
            finally:
                self._depth -= 1
            red = out.redirect

            def fault(i: int) -> ProgramFault | None:
                return self._with_source(out.render(i))

            return XdpBatchResult(out.action, out.data_off, out.data_len, out.meta_len,
                                  out.status != 0, out.fault_pc, out.fault_addr, red[:, 0],
                                  red[:, 1], red[:, 2], red[:, 3], out.done, fault)
        return self._run_batch_interp(frames, data_off, data_len, meta_len, rx_queue,
                                      ingress_ifindex, ctx, repeat, egress_ifindex, rows,
                                      consume_redirect, frags)

    def _run_batch_interp(self, frames: npt.NDArray[np.uint8], data_off: Any, data_len: Any,
                          meta_len: Any, rx_queue: Any, ingress_ifindex: Any, ctx: RunContext,
                          repeat: int, egress_ifindex: int = 0,
                          rows: npt.NDArray[np.int64] | None = None,
                          consume_redirect: bool = False,
                          frags: FragTable | None = None) -> XdpBatchResult:
        """The reference: XdpBuffs over the frames' rows, one :meth:`run` each (a frame's
        frags views of their pages, written back into the frag table after it)."""
        if (not isinstance(frames, np.ndarray) or frames.dtype != np.uint8 or frames.ndim != 2
                or not frames.flags.c_contiguous or not frames.flags.writeable):
            raise ValueError("frames must be a writable C-contiguous (N, frame_sz) uint8 array")
        n, frame_sz = frames.shape
        order = list(range(n)) if rows is None else rows.tolist()
        n = len(order)
        if frags is not None and (frags.rows.shape != (n, abi.FRAG_WORDS)
                                  or frags.bounds.shape != (n, abi.MAX_FRAGS, 2)
                                  or (n and not frags.consistent())):
            raise ValueError("frags must be a frag table with one row per frame, each "
                             "frag inside its page")

        def per_frame(v: Any) -> list[int]:
            a = np.asarray(v)
            return [int(x) for x in (np.full(n, a) if a.ndim == 0 else a.reshape(n))]

        off, ln = per_frame(data_off), per_frame(data_len)
        meta = per_frame(meta_len) if meta_len is not None else [0] * n
        rxq, ifx = per_frame(rx_queue), per_frame(ingress_ifindex)
        cols = {k: np.zeros(n, np.uint32) for k in ("act", "off", "len", "meta", "pc")}
        red = np.zeros((n, 4), np.uint64)
        addr = np.zeros(n, np.uint64)
        faulted = np.zeros(n, np.bool_)
        faults: dict[int, ProgramFault] = {}
        for i in range(n):
            if off[i] + ln[i] > frame_sz or meta[i] > off[i]:
                raise ValueError("a frame's data or metadata lies outside the frame")
            row = cast(bytearray, memoryview(frames[order[i]]).cast("B"))
            fr: list[bytearray] = []
            fsize = frame_sz
            if frags is not None:
                row_i = frags.rows[i]
                fr = frags_of_row(row_i, frags.bounds[i], {})
                fsize = int(row_i[abi.FRAG_FRAG_SIZE])
            xdp = XdpBuff(row, off[i], off[i] + ln[i], off[i] - meta[i], frame_sz,
                          RxQueue(ifx[i], rxq[i], fsize), egress_ifindex, fr)
            act = 0
            for _ in range(max(repeat, 1)):
                ctx.tail_call_cnt = 0
                try:
                    act = self.run(xdp, ctx)
                except ProgramFault as e:
                    act = int(XdpAction.XDP_ABORTED)
                    faults[i] = e
                    faulted[i] = True
                    cols["pc"][i] = e.pc or 0
                    addr[i] = getattr(e, "address", None) or 0
                    break
            cols["act"][i] = act
            if frags is not None:
                frags_to_row(frags.rows[i], frags.bounds[i], xdp.frags)
            cols["off"][i], cols["len"][i] = xdp.data, xdp.data_end - xdp.data
            cols["meta"][i] = xdp.metalen
            ri = ctx.ri
            if ri is not None and act == XdpAction.XDP_REDIRECT:
                red[i] = [v & (2**64 - 1) for v in (ri.map_id, ri.map_type, ri.tgt_index,
                                                     ri.flags)]
                if consume_redirect:
                    ri.map, ri.map_id, ri.flags = None, 0, 0
                    ri.map_type = int(BpfMapType.BPF_MAP_TYPE_UNSPEC)
        return XdpBatchResult(cols["act"], cols["off"], cols["len"], cols["meta"], faulted,
                              cols["pc"], addr, red[:, 0], red[:, 1], red[:, 2], red[:, 3], n,
                              faults.get)

    def engine_for(self, cpu: int) -> Engine:
        """The program's run state for CPU ``cpu``: the kernel keeps a program's stack
        and redirect info per CPU, so NAPI contexts on different CPUs run it at
        once. CPU 0 has :attr:`vm`; the others get an engine of the same code
        (the compile cache makes it cheap) on first use."""
        if cpu == 0:
            return self.vm
        e = self._per_cpu.get(cpu)
        if e is None:
            e = self._per_cpu[cpu] = self._engine()
        return e

    def unlocked_engine(self, cpu: int) -> Engine:
        """The engine of a devmap program that polls of CPU ``cpu`` run without the host
        lock: one of its own per CPU, since the same program may run meanwhile under
        the host lock (the Python path, polls of programs that take the lock) on
        :attr:`vm` and on the engines of :meth:`engine_for`."""
        e = self._unlocked.get(cpu)
        if e is None:
            e = self._unlocked[cpu] = self._engine()
        return e

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


def xdp_dispatcher(programs: Sequence[tuple[XdpProg, XdpRunConfig | None]]) -> XdpProg:
    """libxdp's dispatcher over ``programs`` (each with its run config), as one program:
    :mod:`pyxdp.dispatcher` orders them, builds the dispatcher and links each
    component into its slot as freplace does. Its :attr:`XdpProg.chain` lists them in
    order; it runs on the first component's engine and budget."""
    from pyxdp.dispatcher import ChainEntry, build_dispatcher, chain_order, link_chain

    chain = chain_order([(p, rc or XdpRunConfig()) for p, rc in programs],
                        lambda c: ChainEntry.of(c[0].spec, c[1]))
    disp = build_dispatcher([ChainEntry.of(p.spec, rc) for p, rc in chain])
    spec, maps, helpers = link_chain(disp, [(p.spec, p.maps, p.helpers) for p, _ in chain])
    first = chain[0][0]
    prog = XdpProg(spec, maps, helpers=helpers,  # type: ignore[arg-type]
                   engine=first.engine, budget=first.budget)
    prog.chain = tuple(chain)
    return prog


# -----------------------------------------------------------------------------------
# A program over a datapath batch (the NAPI poll, a devmap bulk, a cpumap batch,
# generic XDP's skbs)
# -----------------------------------------------------------------------------------

# Programs already warned about (bpf_warn_invalid_xdp_action; the kernel warns once
# per boot, the model once per program - by object: ids restart on every Host).
_warned: weakref.WeakSet[XdpProg] = weakref.WeakSet()
MAX_FAULT_REPORTS = 32
I64 = npt.NDArray[np.int64]


class _HostMem(Protocol):
    """What :func:`run_xdp` needs of the host: its page memory map."""

    @property
    def memmap(self) -> MemMap: ...


def run_xdp(prog: XdpProg, host: _HostMem, frames: Frames, *, ifindex: npt.ArrayLike,
            queue: npt.ArrayLike, ctx: RunContext, egress_ifindex: int = 0,
            faults: list[str] | None = None, where: str = "",
            every_fault: bool = False) -> _Verdicts:
    """Run ``prog`` over ``frames`` in place, grouped by page region; the buffer
    edges it leaves are written back into ``frames``. Multi-buffer frames run in the
    same batches as the others, their frags in a frag table (:class:`_Frags`) written
    back into their ``skb_shared_info`` afterwards. The first fault of the batch goes
    into ``faults`` (a clear report: program, pc, C line); with ``every_fault``, each
    frame's (generic XDP's long skbs, reported one by one as single runs were)."""
    n = len(frames)
    out = _Verdicts(*(np.zeros(n, np.int64) for _ in range(5)))
    ifx = np.asarray(ifindex, np.int64)
    rxq = np.asarray(queue, np.int64)
    multi = frames.has_frags
    fr = _Frags(host.memmap, frames, multi) if multi.any() else None
    for mem, pos, rows in host.memmap.split(frames.pfn):
        ln = frames.length[pos]
        tab = None
        if fr is not None:
            tab = FragTable(fr.table.rows[pos], fr.table.bounds[pos])
            ln = ln - tab.rows[:, abi.FRAG_SIZE].astype(np.int64)
        res = prog.run_batch(mem.pages, frames.data[pos], ln,
                             frames.meta[pos], int(rxq) if rxq.ndim == 0 else rxq[pos],
                             int(ifx) if ifx.ndim == 0 else ifx[pos],
                             ctx=ctx, egress_ifindex=egress_ifindex, rows=rows,
                             consume_redirect=True, frags=tab)
        out.action[pos] = res.action
        frames.data[pos] = res.data_off
        frames.length[pos] = res.data_len
        if fr is not None and tab is not None:
            fr.table.rows[pos] = tab.rows
            frames.length[pos] += tab.rows[:, abi.FRAG_SIZE].astype(np.int64)
        frames.meta[pos] = res.meta_len
        out.map_id[pos] = res.redirect_map_id.astype(np.int64)
        out.map_type[pos] = res.redirect_map_type.astype(np.int64)
        out.index[pos] = res.redirect_index.astype(np.int64)
        out.flags[pos] = res.redirect_flags.astype(np.int64)
        if faults is not None:
            report_faults(prog, res, faults, where, every_fault)
    if fr is not None:
        fr.write_back(frames)
    return out


def report_faults(prog: XdpProg, res: XdpBatchResult, faults: list[str], where: str,
                  every: bool) -> None:
    """The batch's first fault (``every``: each, in frame order) into ``faults``, as
    many as :data:`MAX_FAULT_REPORTS` allows, each logged."""
    for i in np.flatnonzero(res.faulted)[:None if every else 1].tolist():
        if len(faults) >= MAX_FAULT_REPORTS:
            return
        faults.append(f"{where}: {prog.spec.name}: {res.fault(i)} -> XDP_ABORTED")
        _log().warning("%s", faults[-1])


class _Frags:
    """The frags of a batch's multi-buffer frames, read from their ``skb_shared_info``
    into a frag table (:class:`~pyxdp.net.xdp.FragTable`, one row per frame of the
    batch, empty for the others) with numpy, and written back after the run: each
    frame's ``nr_frags``, ``xdp_frags_size`` and frags as the program left them (cut by
    ``adjust_tail``, their front taken by ``bpf_xdp_pull_data``); frags it released go
    back to their pool (``__xdp_return``, not direct); a frame left without frags loses
    ``KIND_FRAGS`` (``xdp_buff_clear_frags_flag``). pyxdp's rx queues register no
    ``frag_size`` (as veth), so a multi-buffer tail cannot grow (-EOPNOTSUPP)."""

    def __init__(self, mm: MemMap, frames: Frames, multi: npt.NDArray[np.bool_]) -> None:
        from pyxdp.net.frames import KIND_FRAME
        from pyxdp.net.xdp_mem import SHINFO_OFF_FRAGS, SHINFO_OFF_NR_FRAGS, xdp_frags_shinfo
        n = len(frames)
        self.mm = mm
        self.idx = idx = np.flatnonzero(multi)
        m = idx.size
        rows = np.zeros((n, abi.FRAG_WORDS), np.uint64)
        bounds = np.zeros((n, abi.MAX_FRAGS, 2), np.uint64)
        self.table = FragTable(rows, bounds)
        self.sh = np.zeros(m, np.int64)  # the skb_shared_info's offset in its region
        shinfo = np.empty((m, SKB_SHARED_INFO_SIZE), np.uint8)
        for mem, pos, sh in xdp_frags_shinfo(frames.pfn[idx], (frames.kind[idx] & KIND_FRAME) != 0,
                                             memmap=mm):
            self.sh[pos] = sh
            shinfo[pos] = mem.buf[sh[:, None] + np.arange(SKB_SHARED_INFO_SIZE)]
        self.nr = np.minimum(shinfo[:, SHINFO_OFF_NR_FRAGS], abi.MAX_FRAGS).astype(np.int64)
        recs = np.ascontiguousarray(shinfo[:, SHINFO_OFF_FRAGS:])  # skb_frag_t[17]
        k = np.arange(abi.MAX_FRAGS)
        self.live = live = k < self.nr[:, None]  # (m, MAX_FRAGS)
        self.pfn = recs.view(np.int64)[:, 0::2]
        words = recs.view(np.uint32)
        self.off = words[:, 3::4].astype(np.int64)
        self.len = np.where(live, words[:, 2::4], 0).astype(np.int64)
        self.addr = np.zeros((m, abi.MAX_FRAGS), np.uint64)
        page = np.zeros((m, abi.MAX_FRAGS), np.uint64)
        end = np.zeros((m, abi.MAX_FRAGS), np.uint64)
        flat = self.pfn[live]
        fa, fp, fe = (np.zeros(flat.size, np.uint64) for _ in range(3))
        for mem, pos, local in mm.split(flat):
            base = local.astype(np.uint64) * np.uint64(mem.page_size) + np.uint64(
                mem.pages.ctypes.data)
            fp[pos], fe[pos] = base, base + np.uint64(mem.page_size)
        fa[:] = fp + self.off[live].astype(np.uint64)
        self.addr[live], page[live], end[live] = fa, fp, fe
        r = rows[idx]
        r[:, abi.FRAG_NR] = self.nr
        r[:, abi.FRAG_SIZE] = self.len.sum(axis=1)
        ent = r[:, abi.FRAG_HEAD:abi.FRAG_HEAD + abi.FRAG_ENTRY * abi.MAX_FRAGS].reshape(
            m, abi.MAX_FRAGS, abi.FRAG_ENTRY)
        ent[:, :, 0], ent[:, :, 1], ent[:, :, 2] = self.addr, self.len, k
        rows[idx] = r
        bounds[idx, :, 0], bounds[idx, :, 1] = page, end
        self.rows0 = r

    def write_back(self, frames: Frames) -> None:
        from pyxdp.net.frames import KIND_FRAGS
        from pyxdp.net.xdp_mem import (
            SHINFO_OFF_FRAGS,
            SHINFO_OFF_NR_FRAGS,
            SHINFO_OFF_XDP_FRAGS_SIZE,
            SKB_FRAG_DTYPE,
            xdp_return_frag_pages,
        )
        idx = self.idx
        m = idx.size
        r = self.table.rows[idx]
        if np.array_equal(r, self.rows0):  # the program left every frag as it was
            return
        ent = r[:, abi.FRAG_HEAD:abi.FRAG_HEAD + abi.FRAG_ENTRY * abi.MAX_FRAGS].reshape(
            m, abi.MAX_FRAGS, abi.FRAG_ENTRY).astype(np.int64)
        nr = r[:, abi.FRAG_NR].astype(np.int64)
        k = np.arange(abi.MAX_FRAGS)
        keep = k < nr[:, None]
        src = np.where(keep, ent[:, :, 2], 0)  # each frag left: its index at the start
        rowsel = np.arange(m)[:, None]
        pfn = self.pfn[rowsel, src]
        off = self.off[rowsel, src] + (ent[:, :, 0] - self.addr[rowsel, src].astype(np.int64))
        ln = np.where(keep, ent[:, :, 1], 0)
        changed = ((nr != self.nr) | (keep & ((ln != self.len) | (src != k))).any(axis=1))
        if not changed.any():
            return
        # The frags the run released: not among those left (a contiguous run of them).
        first = np.where(nr > 0, src[:, 0], self.nr)
        held = (k >= first[:, None]) & (k < (first + nr)[:, None])
        gone = self.live & ~held
        if gone.any():
            xdp_return_frag_pages(self.pfn[gone].tolist(), memmap=self.mm)
        c = np.flatnonzero(changed)
        heads = frames.pfn[idx[c]]
        for mem, pos, _local in self.mm.split(heads):
            sel = c[pos]
            sh = self.sh[sel]
            buf = mem.buf
            buf[sh + SHINFO_OFF_NR_FRAGS] = nr[sel].astype(np.uint8)
            size = ln[sel].sum(axis=1).astype("<u4").view(np.uint8).reshape(-1, 4)
            buf[sh[:, None] + SHINFO_OFF_XDP_FRAGS_SIZE + np.arange(4)] = size
            rec = np.zeros((sel.size, abi.MAX_FRAGS), SKB_FRAG_DTYPE)
            rec["netmem"], rec["len"], rec["offset"] = pfn[sel], ln[sel], off[sel]
            w = keep[sel]
            at = sh[:, None] + SHINFO_OFF_FRAGS + 16 * k  # (s, MAX_FRAGS)
            recb = rec.view(np.uint8).reshape(sel.size, abi.MAX_FRAGS, 16)
            buf[at[w][:, None] + np.arange(16)] = recb[w]
        empty = nr == 0
        if empty.any():
            frames.kind[idx[empty]] &= ~KIND_FRAGS

