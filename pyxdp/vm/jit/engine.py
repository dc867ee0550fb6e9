"""The LLVM side of the JIT: one ORC LLJIT per process, the O2/O3 pipeline, a compile cache.

llvmlite's bundled LLVM does all the work, so no system compiler or linker is
needed at run time: the lowered IR text is parsed, optimised by the new pass
manager's default pipeline at the requested level, emitted as an object image
for the host CPU and linked by ORC into a JIT library of its own. Each library
is held by a resource tracker; when the last holder (a program or a cache
entry) goes, LLVM frees its machine code.

Compiled code depends only on the bytecode, its layout, the resolved ld_imm64
values, the callback entry points and the optimisation level; helpers, regions
and the budget are run-time data in the run context. That tuple is the cache
key, so reloading the same program costs a dictionary lookup.
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm  # type: ignore[import-untyped]

from pyxdp.asm.insn import Instruction, encode
from pyxdp.asm.validate import Layout
from pyxdp.vm.jit.lower import lower, runtime_module

__all__ = ["CACHE_SIZE", "CompiledProgram", "cache_clear", "compile_program",
           "native_helper_address"]

CACHE_SIZE = 128

_LOCK = threading.RLock()


class _Llvm:
    """Process-wide LLVM state: target machines by level, the JIT, the native helpers."""

    def __init__(self) -> None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.target = llvm.Target.from_triple(llvm.get_process_triple())
        self.cpu = llvm.get_host_cpu_name()
        self.features = llvm.get_host_cpu_features().flatten()
        self._machines: dict[int, Any] = {}
        self.jit = llvm.create_lljit_compiler(self.machine(2))
        self._serial = 0
        # clock_gettime from the C library the interpreter process already has loaded.
        libc = ctypes.CDLL(None)
        clock = ctypes.cast(libc.clock_gettime, ctypes.c_void_p).value
        self.runtime = (llvm.JITLibraryBuilder()
                        .add_ir(runtime_module())
                        .import_symbol("clock_gettime", clock)
                        .export_symbol("pyxdp_ktime_get_ns")
                        .export_symbol("pyxdp_batch")
                        .link(self.jit, "pyxdp_runtime"))

    def machine(self, level: int) -> Any:
        tm = self._machines.get(level)
        if tm is None:
            # Position-independent, large code model: ORC may place each library anywhere.
            tm = self.target.create_target_machine(
                cpu=self.cpu, features=self.features, opt=min(level, 3), reloc="pic",
                codemodel="jitdefault", jit=True)
            self._machines[level] = tm
        return tm

    def link(self, ir_text: str, exports: Sequence[str], level: int) -> tuple[Any, float]:
        """Optimise and link ``ir_text``; return the tracker and the milliseconds spent."""
        t0 = time.perf_counter()
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
        tm = self.machine(level)
        mod.triple = llvm.get_process_triple()
        mod.data_layout = str(tm.target_data)
        if level > 0:
            pto = llvm.create_pipeline_tuning_options(speed_level=level)
            pb = llvm.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(mod, pb)
        obj = tm.emit_object(mod)
        self._serial += 1
        builder = llvm.JITLibraryBuilder().add_object_img(obj)
        for name in exports:
            builder.export_symbol(name)
        tracker = builder.link(self.jit, f"pyxdp_prog_{self._serial}")
        return tracker, (time.perf_counter() - t0) * 1e3


_STATE: _Llvm | None = None


def _llvm() -> _Llvm:
    global _STATE
    with _LOCK:
        if _STATE is None:
            _STATE = _Llvm()
        return _STATE


def native_helper_address(symbol: str) -> int:
    """Address of a shared native function (``pyxdp_ktime_get_ns``, ``pyxdp_batch``)."""
    return int(_llvm().runtime[symbol])


@dataclass(frozen=True)
class CompiledProgram:
    """Native entry points of one program; valid while this object is alive.

    ``lower_ms`` is the time spent building IR in Python, ``llvm_ms`` the time
    LLVM spent optimising, generating and linking machine code.
    """

    entry: int
    callbacks: dict[int, int]
    lower_ms: float
    llvm_ms: float
    ir: str
    _tracker: Any

    @property
    def compile_ms(self) -> float:
        return self.lower_ms + self.llvm_ms


_CACHE: OrderedDict[bytes, CompiledProgram] = OrderedDict()


def cache_clear() -> None:
    with _LOCK:
        _CACHE.clear()


def compile_program(insns: Sequence[Instruction], layout: Layout, imm64: Mapping[int, int],
                    ctx_loads: Mapping[int, int] | None = None, callbacks: Sequence[int] = (),
                    *, opt_level: int = 2) -> tuple[CompiledProgram, bool]:
    """Machine code for a validated program, from the cache when possible.

    The arguments are those of :func:`pyxdp.vm.jit.lower.lower`; returns the
    program and whether it came from the cache.
    """
    ctx_loads = dict(ctx_loads or {})
    h = hashlib.sha256(encode(insns))
    h.update(repr((layout.functions, sorted(imm64.items()), sorted(ctx_loads.items()),
                   sorted(callbacks), opt_level)).encode())
    key = h.digest()
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit, True
        state = _llvm()
        t0 = time.perf_counter()
        lowered = lower(insns, layout, imm64, ctx_loads=ctx_loads, callbacks=callbacks,
                        tag="pyxdp")
        lower_ms = (time.perf_counter() - t0) * 1e3
        exports = [lowered.entry, *lowered.callbacks.values()]
        tracker, llvm_ms = state.link(lowered.ir, exports, opt_level)
        prog = CompiledProgram(
            entry=int(tracker[lowered.entry]),
            callbacks={pc: int(tracker[sym]) for pc, sym in lowered.callbacks.items()},
            lower_ms=lower_ms, llvm_ms=llvm_ms, ir=lowered.ir, _tracker=tracker)
        _CACHE[key] = prog
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
        return prog, False
