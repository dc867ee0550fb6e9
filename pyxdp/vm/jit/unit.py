"""The lowering's input and output: :class:`ProgramInput` (one program to lower, with
what the runtime tells it) and :class:`LoweredModule` (its IR and exported symbols).

Only code that lowers or links programs needs them; the ABI records every native twin
shares are :mod:`pyxdp.vm.jit.abi`'s (kept apart so that a helper module registering
its twin does not create these classes: an interpreted program never lowers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyxdp.asm.insn import Instruction
from pyxdp.asm.validate import Layout
from pyxdp.vm.jit.abi import Hint, Natives

__all__ = ["LoweredModule", "ProgramInput"]


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
    # Accesses the verifier proved in bounds, by pc: the region hint they land in (the
    # packet's entry, a map's values, "stk"), used without testing it.
    proven: Mapping[int, Hint] = field(default_factory=dict)
    # The start of the program's exception callback of its own (0: the default one):
    # a bpf_throw's unwinding ends in the main function calling it with the cookie.
    exception_cb: int = 0
    # Every run of the code starts with at least this budget (0: any budget): when it
    # covers the longest run the program can make (analysis.run_bound), the code tests
    # no budget; the runtime runs a smaller budget on code built with 0.
    min_budget: int = 0


@dataclass(frozen=True)
class LoweredModule:
    """IR text and the exported symbols: the run entry, the XDP batch entry (or None),
    the callbacks by pc."""

    ir: str
    entry: str | None
    xdp_entry: str | None
    callbacks: dict[int, str]
