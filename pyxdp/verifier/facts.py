"""What the verifier proved of each memory access: ``bpf_insn_aux_data``'s ``ptr_type``.

Linux records per instruction what the verifier learnt for the rewrites after
it (``convert_ctx_accesses`` refuses an instruction met "with different
pointers"); pyxdp's JIT uses the same kind of fact to drop the run-time check
of an access the verifier proved in bounds. :class:`AccessFacts` is told the
base register of every access ``check_mem_access`` accepted, on every path
that reached it, and keeps per pc the union: which pointer kinds the base
was, and for map values which map and its value size.

Why a union over the visits is the whole truth. The verifier visits an
instruction once per abstract state that reaches it, except that a path
whose state at a checkpoint is within one already verified (``states_equal``)
stops there. Take any concrete run of the program and follow it alongside
the abstract walk: while its concrete state is inside the abstract state of
a visited path, its next instruction is visited with a state that contains
it (branches are explored both ways unless a precise value decided them,
which the concrete value then decides the same way). When the walk stopped
that path at a checkpoint, the concrete state is inside the covering state
(pointers of the same type, map and frame; packet ranges at least as large;
live scalars within, or not precise and so not deciding anything), whose own
continuation was walked - or, for a loop converging at a forced checkpoint,
is being walked from an earlier iteration of the same path - so follow the
run from there on. By induction on the run's length every access it makes
is at a pc visited with an abstract state containing the concrete one, where
the base's kind was recorded. An accepted program's packet accesses were
each checked against the packet range on those visits (``check_packet_access``
refuses otherwise), map value accesses against the value size, stack
accesses against the frame.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pyxdp.spec import MapSpec

__all__ = ["AccessFacts", "MemAccess", "decode_facts", "encode_facts"]


@dataclass(frozen=True)
class MemAccess:
    """The pointer kinds an access's base had on every path, by the verifier's names of
    register types (``"pkt"``, ``"pkt_meta"``, ``"fp"`` for the stack, ``"map_value"``,
    ``"ctx"``, ``"mem"``...); for map values the one map's name (None: several maps,
    or an inner map of a map-in-map) and its value size. ``ctx_end``: for a helper or
    kfunc call, the end of the furthest context bytes an argument points to (a syscall
    program's ``max_ctx_offset`` counts those as check_helper_mem_access does)."""

    kinds: frozenset[str]
    map_name: str | None = None
    value_size: int = 0
    ctx_end: int = 0

    @property
    def probe(self) -> bool:
        """A load Linux makes a ``BPF_PROBE_MEM`` load (convert_ctx_accesses): through a
        kernel struct pointer or untrusted memory; one that faults reads 0."""
        return any(k.endswith("ptr_") or "untrusted" in k for k in self.kinds)

    def only(self, *kinds: str) -> bool:
        """Every path had one of ``kinds``."""
        return bool(self.kinds) and self.kinds <= frozenset(kinds)


class AccessFacts:
    """The facts being gathered during one verification (see the module docstring)."""

    def __init__(self, maps: Mapping[str, MapSpec]) -> None:
        self._at: dict[int, MemAccess] = {}
        # A value of a map-in-map's inner map is of whichever map the slot holds at run
        # time, not of the template the verifier names: never "one known map".
        self._inner = {m.inner.name for m in maps.values() if m.inner is not None}

    def note(self, pc: int, kind: str, m: MapSpec | None) -> None:
        """The access at ``pc`` went through a ``kind`` pointer (into ``m``'s values)."""
        map_name, value_size = (m.name, m.value_size) if kind == "map_value" and m and \
            m.name not in self._inner else (None, 0)
        old = self._at.get(pc)
        if old is None:
            self._at[pc] = MemAccess(frozenset((kind,)), map_name, value_size)
            return
        name, size = old.map_name, old.value_size
        if kind == "map_value" and "map_value" not in old.kinds:
            name, size = map_name, value_size
        elif kind == "map_value" and name != map_name:
            name, size = None, 0  # several maps
        if kind not in old.kinds or name != old.map_name:
            self._at[pc] = MemAccess(old.kinds | {kind}, name, size)

    def note_ctx_mem(self, pc: int, end: int) -> None:
        """The call at ``pc`` passed an argument pointing into the context up to ``end``."""
        old = self._at.get(pc, MemAccess(frozenset()))
        if end > old.ctx_end:
            self._at[pc] = MemAccess(old.kinds, old.map_name, old.value_size, end)

    def result(self) -> dict[int, MemAccess]:
        return dict(self._at)


def encode_facts(mem: Mapping[int, MemAccess]) -> bytes:
    """``mem`` as JSON bytes (what the verifier cache keeps beside an acceptance)."""
    return json.dumps({str(pc): [sorted(a.kinds), a.map_name, a.value_size, a.ctx_end]
                       for pc, a in mem.items()}, separators=(",", ":")).encode()


def decode_facts(data: bytes) -> dict[int, MemAccess] | None:
    """:func:`encode_facts`' bytes back; None when they are not such bytes (a damaged
    cache entry: the program is then verified again)."""
    try:
        raw = json.loads(data)
        return {int(pc): MemAccess(frozenset(str(k) for k in kinds),
                                   None if name is None else str(name), int(size), int(end))
                for pc, (kinds, name, size, end) in raw.items()}
    except (ValueError, TypeError, AttributeError, OverflowError, RecursionError):
        return None
