"""pyxdp's JIT: validated eBPF lowered to LLVM IR with llvmlite and run natively.

The native code keeps the reference interpreter's semantics and safety (every
memory access checked against the run's regions, an exact instruction budget,
guarded division and shifts) and its fake address space, so r0, memory effects
and faults match :class:`pyxdp.vm.interpreter.Interpreter` exactly.

* :mod:`~pyxdp.vm.jit.abi` - the words native code and Python share (run context,
  region table, batch and map descriptors, status codes), the lowering's inputs;
* :mod:`~pyxdp.vm.jit.ir` - the text IR builder;
* :mod:`~pyxdp.vm.jit.analysis` - control flow, frame and region-hint analyses, liveness;
* :mod:`~pyxdp.vm.jit.lower` - per-instruction lowering of eBPF to LLVM IR (text);
* :mod:`~pyxdp.vm.jit.natives` - native twins of helpers;
* :mod:`~pyxdp.vm.jit.entry` - entry points: a run, callbacks, the batch loops;
* :mod:`~pyxdp.vm.jit.engine` - LLVM (ORC LLJIT, O0-O3), the compile cache, modules
  shared by many programs (:func:`~pyxdp.vm.jit.engine.compile_together`);
* :mod:`~pyxdp.vm.jit.runtime` - :class:`JitProgram`: runs, batches, helper trampolines;
* :mod:`~pyxdp.vm.jit.xdp` - the XDP batch entry's descriptors (:class:`DriverIO`).

XDP programs on the JIT (native map and packet helpers, native tail calls, the
XDP batch entry: what an XDP program runs on its ``jit`` engine) are the
network layer's ``XdpJit``, over twins the maps and the network layer
register in :mod:`~pyxdp.vm.jit.natives`: the vm layer imports neither
maps nor net.

Needs the ``jit`` extra (llvmlite).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyxdp.vm.interpreter import DEFAULT_BUDGET

if TYPE_CHECKING:
    from pyxdp.vm.jit.runtime import PACKET_BASE, BatchResult, FrameRegion, JitProgram

__all__ = ["DEFAULT_BUDGET", "PACKET_BASE", "BatchResult", "FrameRegion", "JitProgram"]

_RUNTIME = frozenset(("PACKET_BASE", "BatchResult", "FrameRegion", "JitProgram"))


def __getattr__(name: str) -> Any:
    # The runtime (and LLVM through it) loads on first use: the maps and the network
    # layer import the ABI and IR modules of this package at start, and a program that
    # runs on the interpreter first (the tiered engine) never waits for LLVM.
    if name in _RUNTIME:
        from pyxdp.vm.jit import runtime
        value = getattr(runtime, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
