"""libxdp's multi-program dispatcher: several XDP programs on one interface.

An interface runs one XDP program. libxdp (``xdp-loader load IFACE a.o b.o``)
attaches its ``xdp_dispatcher`` program there and puts each component
program into one of the dispatcher's global functions ``prog0``..``prog9``
with ``freplace`` (``BPF_PROG_TYPE_EXT`` loaded against the dispatcher's
BTF, then ``BPF_LINK_CREATE`` on it). The dispatcher calls them in order:

* the order is libxdp's ``cmp_xdp_programs``: ``XDP_RUN_CONFIG`` priority
  (lower first, default 50), then program name, then instruction count, then
  load order;
* after program ``i`` returns ``ret`` the dispatcher goes on only when bit
  ``1U << ret`` (a 32-bit shift: the amount is masked to 5 bits) is set in
  ``chain_call_actions[i]``, which is the program's run config (default:
  ``XDP_PASS`` only) with bit 31 added (the value an empty slot's stub
  returns); otherwise ``ret`` is the verdict. When every program chains on,
  the verdict is ``XDP_PASS``;
* with a single program libxdp replaces ``xdp_dispatcher`` itself, so that
  program's verdict stands whatever its chain-call actions say;
* the dispatcher is loaded frags-aware (``BPF_F_XDP_HAS_FRAGS``) only when
  every component is (``SEC("xdp.frags")``); each component keeps its own flag.

libxdp builds its dispatcher from C with the configuration in frozen
``.rodata``, which the verifier folds into constants; pyxdp emits the same
control flow with the constants in the instructions and only the slots in
use. :func:`build_dispatcher` gives that program (with the BTF its global
functions need as freplace targets); :func:`link_chain` links the components
into it as freplace would, for pyxdp's engines: one program whose calls of
``progN`` enter the components' code. The kernel backend uses the same
program (:mod:`pyxdp.kernel.dispatcher`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.asm.macros import (
    alu32_imm,
    alu32_reg,
    call_helper,
    call_local,
    exit_insn,
    jmp32_imm,
    mov32_imm,
    mov64_imm,
    mov64_reg,
)
from pyxdp.btf.btf import Btf, BtfKind, BtfMember, BtfParam, BtfType
from pyxdp.errors import PyxdpError
from pyxdp.spec import (
    BPF_F_XDP_HAS_FRAGS,
    FuncInfo,
    FunctionSpan,
    KfuncRef,
    LineInfo,
    MapRef,
    ProgramSpec,
    XdpRunConfig,
)

__all__ = ["DISPATCHER_NAME", "MAX_DISPATCHER_ACTIONS", "XDP_DISPATCHER_RETVAL",
           "ChainEntry", "DispatcherError", "DispatcherProgram", "build_dispatcher",
           "chain_order", "link_chain"]

MAX_DISPATCHER_ACTIONS = 10
# What an empty slot's stub returns; the bit every chain_call_actions word has.
XDP_DISPATCHER_RETVAL = 31
DISPATCHER_NAME = "xdp_dispatcher"
_XDP_PASS = 2
_BPF_FUNC_xdp_adjust_tail = 65
_BTF_FUNC_GLOBAL = 1


class DispatcherError(PyxdpError):
    """A chain libxdp would refuse (too many programs, a program it cannot chain)."""


@dataclass(frozen=True, slots=True)
class ChainEntry:
    """One component program as the dispatcher sees it."""

    name: str
    run_config: XdpRunConfig
    frags: bool
    insn_cnt: int

    @classmethod
    def of(cls, spec: ProgramSpec, run_config: XdpRunConfig | None) -> ChainEntry:
        return cls(spec.name, run_config or XdpRunConfig(),
                   bool(spec.flags & BPF_F_XDP_HAS_FRAGS), len(spec.insns))

    @property
    def chain_call_actions(self) -> int:
        """The dispatcher's word for this slot: the run config's bits and the stub's."""
        return (self.run_config.chain_call_actions | 1 << XDP_DISPATCHER_RETVAL) & 0xFFFF_FFFF


T = TypeVar("T")


def chain_order(items: Sequence[T], entry: Callable[[T], ChainEntry]) -> list[T]:
    """``items`` in libxdp's order (``cmp_xdp_programs``; a stable sort keeps load order
    last)."""
    def key(item: T) -> tuple[int, bytes, int]:
        e = entry(item)
        return e.run_config.priority, e.name.encode(), e.insn_cnt
    return sorted(items, key=key)


@dataclass(frozen=True)
class DispatcherProgram:
    """The dispatcher for one chain: its program (``progN`` stubs included), the BTF of
    its functions and where each slot's function is."""

    spec: ProgramSpec
    btf: Btf
    chain: tuple[ChainEntry, ...]
    slot_pcs: tuple[int, ...]
    slot_btf_ids: tuple[int, ...]
    main_btf_id: int

    @property
    def frags(self) -> bool:
        return bool(self.spec.flags & BPF_F_XDP_HAS_FRAGS)

    def target_btf_id(self, slot: int) -> int:
        """The freplace target of slot ``slot``: ``progN``, or ``xdp_dispatcher`` itself
        when the chain has one program (libxdp's ``xdp_multiprog__link_prog``)."""
        return self.main_btf_id if len(self.chain) == 1 else self.slot_btf_ids[slot]


def _btf(nslots: int) -> tuple[Btf, int, tuple[int, ...]]:
    """int, struct xdp_md, the prototype ``int (struct xdp_md *ctx)`` and a global FUNC
    of it for the dispatcher and each slot (the verifier passes ``ctx`` as the context
    because the struct is named ``xdp_md``)."""
    strings = bytearray(b"\0")

    def s(name: str) -> int:
        off = len(strings)
        strings.extend(name.encode() + b"\0")
        return off

    types: list[BtfType] = [BtfType(0, BtfKind.UNKN, "", 0)]

    def add(t: BtfType) -> int:
        types.append(dataclasses.replace(t, id=len(types)))
        return len(types) - 1

    t_int = add(BtfType(0, BtfKind.INT, "int", s("int"), size_type=4, int_encoding=1,
                        int_bits=32))
    t_u32 = add(BtfType(0, BtfKind.INT, "__u32", s("__u32"), size_type=4, int_bits=32))
    fields = ("data", "data_end", "data_meta", "ingress_ifindex", "rx_queue_index",
              "egress_ifindex")
    members = tuple(BtfMember(f, s(f), t_u32, 32 * k) for k, f in enumerate(fields))
    t_md = add(BtfType(0, BtfKind.STRUCT, "xdp_md", s("xdp_md"), size_type=24,
                       members=members))
    t_ptr = add(BtfType(0, BtfKind.PTR, "", 0, size_type=t_md))
    t_proto = add(BtfType(0, BtfKind.FUNC_PROTO, "", 0, size_type=t_int,
                          params=(BtfParam("ctx", s("ctx"), t_ptr),)))
    main = add(BtfType(0, BtfKind.FUNC, DISPATCHER_NAME, s(DISPATCHER_NAME),
                       size_type=t_proto, linkage=_BTF_FUNC_GLOBAL))
    slots = tuple(add(BtfType(0, BtfKind.FUNC, f"prog{i}", s(f"prog{i}"), size_type=t_proto,
                              linkage=_BTF_FUNC_GLOBAL)) for i in range(nslots))
    return Btf(types=tuple(types), strings=bytes(strings)), main, slots


def build_dispatcher(chain: Sequence[ChainEntry]) -> DispatcherProgram:
    """The dispatcher for ``chain`` (already in order: :func:`chain_order`)."""
    n = len(chain)
    if not 1 <= n <= MAX_DISPATCHER_ACTIONS:
        raise DispatcherError(f"the dispatcher runs 1 to {MAX_DISPATCHER_ACTIONS} programs, "
                              f"not {n}")
    # Main: r6 keeps ctx; per slot: ret = progN(ctx); if !((1U << ret) & actions) return ret.
    main: list[Instruction] = [mov64_reg(6, 1)]
    calls: list[int] = []
    for e in chain:
        main.append(mov64_reg(1, 6))
        calls.append(len(main))
        main.append(call_local(0))  # patched below, once the stubs' places are known
        main += [mov32_imm(1, 1), alu32_reg(op.BPF_LSH, 1, 0),
                 # the word as the signed immediate that encodes it (32-bit ALU)
                 alu32_imm(op.BPF_AND, 1, e.chain_call_actions - ((e.chain_call_actions
                                                                   >> 31) << 32)),
                 jmp32_imm(op.BPF_JNE, 1, 0, 1), exit_insn()]
    main += [mov64_imm(0, _XDP_PASS), exit_insn()]
    # Stubs as libxdp's: a no-op bpf_xdp_adjust_tail (so that extensions may change
    # packet data), then the value that makes the dispatcher go on.
    stub = [mov64_imm(2, 0), call_helper(_BPF_FUNC_xdp_adjust_tail),
            mov64_imm(0, XDP_DISPATCHER_RETVAL), exit_insn()]
    insns = list(main)
    slot_pcs = []
    for _ in chain:
        slot_pcs.append(len(insns))
        insns += stub
    for k, pc in enumerate(calls):
        insns[pc] = call_local(slot_pcs[k] - pc - 1)
    btf, main_id, slot_ids = _btf(n)
    funcs = (FuncInfo(0, main_id, DISPATCHER_NAME),
             *(FuncInfo(pc, slot_ids[k], f"prog{k}") for k, pc in enumerate(slot_pcs)))
    spans = (FunctionSpan(DISPATCHER_NAME, "xdp", 0, len(main)),
             *(FunctionSpan(f"prog{k}", ".text", pc, len(stub))
               for k, pc in enumerate(slot_pcs)))
    frags = all(e.frags for e in chain)
    spec = ProgramSpec(name=DISPATCHER_NAME, section="xdp", insns=tuple(insns),
                       license="GPL", flags=BPF_F_XDP_HAS_FRAGS if frags else 0,
                       func_info=funcs, functions=spans)
    return DispatcherProgram(spec, btf, tuple(chain), tuple(slot_pcs), slot_ids, main_id)


def _rename_helpers(spec: ProgramSpec, helpers: Mapping[int, T], merged: dict[int, T]
                    ) -> ProgramSpec:
    """Add ``helpers`` to ``merged``; an id ``merged`` already binds to another helper
    (a program's private kfunc ids) gets a fresh id in ``spec``'s calls."""
    moved: dict[int, int] = {}
    for hid, h in helpers.items():
        if hid in merged and merged[hid] is not h:
            new = max(merged) + 1
            moved[hid] = new
            merged[new] = h
        else:
            merged[hid] = h
    if not moved:
        return spec
    insns = [dataclasses.replace(i, imm=moved[i.imm])
             if i.code == op.OP_CALL and i.src == op.CallSrc.BPF_HELPER_CALL and i.imm in moved
             else i for i in spec.insns]
    return spec.copy(insns=tuple(insns))


def link_chain(disp: DispatcherProgram, components: Sequence[tuple[ProgramSpec, Mapping[str, T],
                                                                   Mapping[int, object]]]
               ) -> tuple[ProgramSpec, dict[str, T], dict[int, object]]:
    """What freplace makes of the dispatcher, as one program for pyxdp's engines.

    ``components`` are the chain's programs in slot order, each with its maps (by
    the names its map references use) and its helper table. The result runs the
    dispatcher's code with each ``progN`` call entering the component's code (its
    subprograms and tail calls with it); component ``k``'s maps are named
    ``"k:NAME"``. Returns the program, its maps and its helper table."""
    if len(components) != len(disp.chain):
        raise DispatcherError(f"the dispatcher has {len(disp.chain)} slots, "
                              f"{len(components)} programs given")
    slot_pcs: tuple[int, ...]
    if len(components) == 1:
        # freplace of xdp_dispatcher itself: the program's verdict stands.
        main_len, slot_pcs = 2, (1,)
        insns = [call_local(0), exit_insn()]
    else:
        main_len, slot_pcs = disp.slot_pcs[0], disp.slot_pcs
        insns = list(disp.spec.insns[:main_len])
    maps: dict[str, T] = {}
    helpers: dict[int, object] = {}
    map_refs: list[MapRef] = []
    func_info: list[FuncInfo] = []
    line_info: list[LineInfo] = []
    spans: list[FunctionSpan] = []
    kfuncs: list[KfuncRef] = []
    func_info.append(disp.spec.func_info[0])
    spans.append(dataclasses.replace(disp.spec.functions[0], count=main_len))
    for k, (spec, cmaps, chelpers) in enumerate(components):
        spec = _rename_helpers(spec, chelpers, helpers)
        base = len(insns)
        for pc, i in enumerate(insns[:main_len]):
            if i.code == op.OP_CALL and i.src == op.CallSrc.BPF_PSEUDO_CALL and \
                    pc + 1 + i.imm == slot_pcs[k]:
                insns[pc] = call_local(base - pc - 1)
        insns += spec.insns
        for name, m in cmaps.items():
            maps[f"{k}:{name}"] = m
        map_refs += [dataclasses.replace(r, pc=r.pc + base, map_name=f"{k}:{r.map_name}")
                     for r in spec.map_refs]
        kfuncs += [dataclasses.replace(r, pc=r.pc + base) for r in spec.kfuncs]
        func_info += [dataclasses.replace(f, insn_off=f.insn_off + base) for f in spec.func_info]
        line_info += [dataclasses.replace(li, insn_off=li.insn_off + base)
                      for li in spec.line_info]
        spans += [dataclasses.replace(s, pc=s.pc + base) for s in spec.functions]
    linked = disp.spec.copy(insns=tuple(insns), map_refs=tuple(map_refs),
                            func_info=tuple(func_info), line_info=tuple(line_info),
                            functions=tuple(spans), kfuncs=tuple(kfuncs))
    return linked, maps, helpers
