"""XDP programs on the JIT: native helpers and maps, and the XDP batch entry.

:class:`XdpJit` compiles a program for the XDP layout of the region table -
entry 0 the packet, then every map's value regions in the order the loader
lists the maps - and tells the lowering which helpers may run natively: the
ones whose Python implementation is the reference one of
:mod:`pyxdp.vm.helpers` / :mod:`pyxdp.net.filter` (a caller that swaps a
helper for its own gets its own). Native code then looks arrays and hash
maps up and updates them in their numpy storage, moves the packet edges,
records redirects, computes csum_diff and reads the clock itself; anything
else goes to the Python helper through its trampoline.

Native state and Python's view of it are kept in step around every Python
helper (:class:`_Sync`): before one runs, the ``xdp_buff`` fields and the
redirect state are copied into the :class:`~pyxdp.net.xdp.XdpBuff` and
:class:`~pyxdp.net.filter.RedirectInfo` the helper sees; after it, back.

One run and a batch are the same native loop (``<tag>_xdp``, see
:func:`pyxdp.vm.jit.entry.xdp_fn`): :meth:`XdpJit.run_xdp` is a batch of one
frame over an XdpBuff's own buffer, :meth:`XdpJit.run_batch_xdp` runs frames
laid out in one numpy array with the GIL released.

Tail calls through a prog array the program names run natively when the slot
holds an idle program on the JIT: before a run the tail table gets that
program's run context and XDP entry, and the target is set up to run nested
on this run's buffer (its Python helpers see the same XdpBuff; its faults are
reported by its own engine, with its own source lines). Other slots, and the
targets' own tail calls, take the Python hook as the interpreter does.

One XdpJit runs one batch at a time (it owns its run context and stack), as
one Interpreter runs one program at a time.
"""

from __future__ import annotations

import ctypes
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.errors import HelperFault, ProgramFault
from pyxdp.maps.arraymap import ProgArrayMap
from pyxdp.maps.base import Map, map_by_addr
from pyxdp.net.filter import XDP_HELPERS, RedirectInfo
from pyxdp.net.xdp import (
    CTX_BASE,
    PKT_BASE,
    FragTable,
    RxQueue,
    XdpBuff,
    frags_of_row,
    frags_to_row,
)
from pyxdp.uapi.bpf import BpfMapType, MapFlag
from pyxdp.vm.helpers import RunContext
from pyxdp.vm.interpreter import DEFAULT_BUDGET, Helper, HelperTable, Ldimm64Resolver
from pyxdp.vm.jit import abi
from pyxdp.vm.jit.abi import MapInfo, Natives
from pyxdp.vm.jit.natives import helper_native, kfunc_kinds, map_native, native_helpers
from pyxdp.vm.jit.runtime import M64, HelperHooks, JitProgram, _pin, _signed, called_helpers
from pyxdp.vm.jit.xdp import DriverIO, XdpDesc
from pyxdp.vm.memory import Region

if TYPE_CHECKING:
    from pyxdp.net.xdp_kern_ctx import KernImage
    from pyxdp.verifier.facts import MemAccess

__all__ = ["NATIVE_XDP_HELPERS", "XdpBatchOutput", "XdpJit", "proven_accesses"]

class _NativeXdpHelpers(Mapping[int, str]):
    """Helper ids with a native twin, by kind (see abi.Natives): what the vm and
    pyxdp.net.filter registered. A helper's module registers its twin, so a look-up
    loads that helper first (XDP_HELPERS defers the rarer ones, issue 13: a program
    loads the twins of the helpers it calls); iterating loads them all."""

    def __getitem__(self, hid: int) -> str:
        if hid in XDP_HELPERS:
            XDP_HELPERS[hid]  # its module registers its twin
        twin = helper_native(hid)
        if twin is None:
            raise KeyError(hid)
        return twin.kind

    def __iter__(self) -> Iterator[int]:
        XDP_HELPERS.load_deferred()
        return iter(sorted(native_helpers()))

    def __len__(self) -> int:
        XDP_HELPERS.load_deferred()
        return len(native_helpers())


NATIVE_XDP_HELPERS: Mapping[int, str] = _NativeXdpHelpers()
_ENTRY_FLAGS = {int(BpfMapType.BPF_MAP_TYPE_DEVMAP): (1 << 3) | (1 << 4),
                int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH): (1 << 3) | (1 << 4),
                int(BpfMapType.BPF_MAP_TYPE_CPUMAP): 0,
                int(BpfMapType.BPF_MAP_TYPE_XSKMAP): 0}

_XDP_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
_EGRESS = abi.XDP_FIELDS.index("egress")
_FRAMES = abi.XDP_FIELDS.index("frames")


def _addr(a: npt.NDArray[Any]) -> int:
    return int(a.ctypes.data)


def _map_info(m: Map, slot: int, first_region: int) -> tuple[MapInfo, list[int]]:
    """What native code needs of ``m`` and its descriptor words (host pointers)."""
    regions = m.regions()
    native = map_native(int(m.map_type))
    kind = "other"
    if (native is not None and type(m) in native.classes
            and (not native.max_key or m.key_size <= native.max_key)):
        kind = native.kind
    base = regions[0].base if regions else 0
    stride = regions[1].base - base if len(regions) > 1 else 0
    if any(r.base != base + n * stride or r.size != regions[0].size
           for n, r in enumerate(regions)):
        kind, first_region = "other", -1  # not one evenly spaced region per CPU
    desc = [0] * len(abi.MAPDESC_FIELDS)
    d = {n: i for i, n in enumerate(abi.MAPDESC_FIELDS)}
    if kind != "other" and native is not None:
        for name, word in native.describe(m).items():
            desc[d[name]] = word
    h2 = m if kind in ("hash", "devhash", "inner_hash") else None  # a hash index: its sizes
    info = MapInfo(
        addr=m.addr, slot=slot, kind=kind, map_type=int(m.map_type), map_id=m.id,
        key_size=m.key_size, value_size=m.value_size, max_entries=m.max_entries,
        elem_size=m.elem_size, nr_cpus=m.nr_cpus, percpu=bool(m.percpu),
        lru=bool(getattr(m, "lru", False)),
        capacity=int(getattr(h2, "capacity", 0)), key_stride=int(getattr(h2, "key_stride", 0)),
        value_base=base, cpu_stride=stride, value_bytes=regions[0].size if regions else 0,
        first_region=first_region if regions else -1,
        flag_mask=_ENTRY_FLAGS.get(int(m.map_type), 0),
        # an update frees the old value's timer, work item and objects and leaves
        # special fields out: the Python helper does it (lookups stay native)
        py_update=bool(getattr(m, "has_fields", False)))
    return info, desc


# Helpers that hand out a map value of another CPU than the run's (a per-CPU map's
# value pointer is then not in the run's CPU's region): bpf_map_lookup_percpu_elem,
# and bpf_for_each_map_elem, whose callback is not told which copy it gets.
_OTHER_CPU_VALUES = (195, 164)


def proven_accesses(insns: Sequence[Instruction], facts: Mapping[int, MemAccess],
                    maps: Sequence[Map], infos: Sequence[MapInfo]) -> dict[int, abi.Hint]:
    """The region table entry of each access the verifier proved in bounds, where the
    XDP layout of the table places it: the packet (entry 0, which spans
    ``[data_meta, data_end)``), the stack frames, and the values of one array or hash
    map the program names (its own entry, or its run CPU's for a per-CPU map when no
    helper can give the program another CPU's value). Others stay checked."""
    by_name = {m.name: m for m in maps if m.name}
    info_at = {i.addr: i for i in infos}
    other_cpu = any(i.code == op.OP_CALL and i.src == op.CallSrc.BPF_HELPER_CALL
                    and i.imm in _OTHER_CPU_VALUES for i in insns)
    out: dict[int, abi.Hint] = {}
    for pc, fact in facts.items():
        if not 0 <= pc < len(insns) or insns[pc].cls not in (op.BPF_LDX, op.BPF_ST,
                                                             op.BPF_STX):
            continue  # a kfunc call's stack argument, say
        if fact.probe and insns[pc].cls == op.BPF_LDX:
            out[pc] = ("probe", 0, False)
        elif fact.only("pkt", "pkt_meta"):
            out[pc] = ("region", 0, True)
        elif fact.only("fp"):
            out[pc] = ("stk", 0, True)
        elif fact.only("map_value") and fact.map_name is not None:
            m = by_name.get(fact.map_name)
            info = info_at.get(m.addr) if m is not None else None
            if (m is None or info is None or info.kind not in ("array", "hash")
                    or info.first_region < 0 or fact.value_size > m.value_size):
                continue
            if insns[pc].cls != op.BPF_LDX and m.map_flags & int(MapFlag.BPF_F_RDONLY_PROG):
                continue  # the region refuses it (the verifier did too)
            if not info.percpu:
                out[pc] = ("region", info.first_region, True)
            elif not other_cpu and info.first_region + info.nr_cpus <= abi.MAX_REGIONS:
                out[pc] = ("cpu", info.first_region, True)
    return out


def _constants(insns: Sequence[Instruction], resolver: Ldimm64Resolver | None) -> set[int]:
    """The values the program's map-referencing ld_imm64s load."""
    out = set()
    for pc, i in enumerate(insns):
        if (i.code == op.OP_LD_IMM64 and i.src not in (op.PseudoSrc.BPF_PSEUDO_NONE,
                                                      op.PseudoSrc.BPF_PSEUDO_FUNC)
                and resolver is not None and pc + 1 < len(insns)):
            out.add(resolver(pc, i, insns[pc + 1]) & M64)
    return out


class XdpBatchOutput:
    """Per-frame results of :meth:`XdpJit.run_batch_xdp` (``done`` frames were run), as
    views of the two blocks native code wrote.

    ``status`` is ``abi.ST_*`` (0: the run ended normally), ``frames_used``
    the stack frames the run created; ``redirect`` rows are the redirect state
    after the frame (map_id, map_type, tgt_index, flags); :meth:`render` gives
    frame i's fault as the interpreter raises it.
    """

    def __init__(self, small: U32, wide: U64, n: int, done: int, budget: int,
                 errors: dict[int, BaseException]) -> None:
        rows = small.reshape(6, n)
        self.action, self.data_off, self.data_len = rows[0], rows[1], rows[2]
        self.meta_len, self.word, self.fault_pc = rows[3], rows[4], rows[5]
        self.fault_addr = wide[:n]
        self.redirect = wide[n:].reshape(n, 4)
        self.done = done
        self._budget = budget
        self._errors = errors
        self._jit: XdpJit | None = None
        self._tail_progs: list[Any] = []

    @property
    def status(self) -> U32:
        out: U32 = self.word & np.uint32(0xFF)
        return out

    @property
    def frames_used(self) -> U32:
        out: U32 = ((self.word >> np.uint32(8)) & np.uint32(0xFF)) + np.uint32(1)
        return out

    def render(self, i: int) -> ProgramFault:
        assert self._jit is not None
        start = int(self.data_off[i]) - int(self.meta_len[i])
        size = int(self.data_len[i]) + int(self.meta_len[i])
        pkt = Region("packet", PKT_BASE + start, bytearray(size))
        return self._jit._render(self._budget, int(self.word[i]), int(self.fault_pc[i]),
                                 int(self.fault_addr[i]), pkt, self._errors.get(i),
                                 self._tail_progs)


class _Sync(HelperHooks):
    """Keeps the Python-side xdp_buff and redirect state in step with native code."""

    def __init__(self, jit: XdpJit) -> None:
        self.jit = jit
        # A program run by a native tail call sees its caller's buffer.
        self.parent: _Sync | None = None
        self.xdp: XdpBuff | None = None  # one run: the caller's buffer
        # The frame object native code addresses (a batch: the current row) and its size.
        self.frame: object = None
        self.frame_len = 0
        self.frames: npt.NDArray[np.uint8] | None = None  # a batch: frame i is a row
        self.rows: npt.NDArray[np.int64] | None = None  # ... rows[i] when given
        self.ifindex: U32 | None = None
        self.rxq: U32 | None = None
        self.egress = 0
        # A driven batch (:meth:`XdpJit.driver`): its descriptor, whose egress word the
        # driver may set per batch (a devmap program's bulk), and whose frames word
        # may name another array of the same page size (by address: ``others``).
        self.desc: U64 | None = None
        self.others: dict[int, npt.NDArray[np.uint8]] = {}
        self.index = -1
        self.current: XdpBuff | None = None
        # A batch with multi-buffer frames: its frag table, and the views of the frags
        # Python helpers of the current frame got.
        self.ftab: FragTable | None = None
        self.fviews: dict[tuple[int, int], bytearray] = {}

    def root(self) -> _Sync:
        return self if self.parent is None else self.parent.root()

    def buff(self) -> XdpBuff:
        """The XdpBuff of the frame being run (made on first need in a batch)."""
        if self.parent is not None:
            return self.parent.buff()
        c = self.jit._ctx
        if self.frames is None:
            assert self.xdp is not None
            return self.xdp
        i = int(c.batch_index)
        if self.current is None or self.index != i:
            assert self.ifindex is not None and self.rxq is not None
            frames = self.frames
            if self.others and self.desc is not None:
                frames = self.others.get(int(self.desc[_FRAMES]), frames)
            frame_sz = frames.shape[1]
            frags: list[bytearray] = []
            fsize = frame_sz
            if self.ftab is not None:
                self.fviews = {}
                row = self.ftab.rows[i]
                frags = frags_of_row(row, self.ftab.bounds[i], self.fviews)
                fsize = int(row[abi.FRAG_FRAG_SIZE])
            rxq = RxQueue(int(self.ifindex[i]), int(self.rxq[i]), fsize)
            row = memoryview(frames[i if self.rows is None else int(self.rows[i])]).cast("B")
            self.frame, self.frame_len = row, frame_sz
            egress = self.egress if self.desc is None else int(self.desc[_EGRESS])
            self.current = XdpBuff(cast(bytearray, row), int(c.x_data), int(c.x_data_end),
                                   int(c.x_data_meta), frame_sz, rxq, egress, frags)
            self.index = i
            ctx = self.jit.context
            if isinstance(ctx, RunContext):
                ctx.xdp = self.current
        return self.current

    def native_frame(self) -> tuple[object, int]:
        """The frame object native code addresses for the current packet, and its size."""
        if self.parent is not None:
            return self.parent.native_frame()
        return self.frame, self.frame_len

    def enter(self) -> None:
        c = self.jit._ctx
        xdp = self.buff()
        xdp.data, xdp.data_end, xdp.data_meta = int(c.x_data), int(c.x_data_end), \
            int(c.x_data_meta)
        root = self.root()
        if root.ftab is not None:  # the frags as native code left them
            i = int(root.jit._ctx.batch_index)
            xdp.frags = frags_of_row(root.ftab.rows[i], root.ftab.bounds[i], root.fviews) \
                if c.x_frags else []
        xdp.sync_region()
        self.jit._regions[0] = xdp.region
        self.jit._ri_out()
        ctx = self.jit.context
        if isinstance(ctx, RunContext):
            ctx.tail_call_cnt = int(c.tail_cnt)

    def exit(self) -> None:
        c = self.jit._ctx
        xdp = self.buff()
        # Native code will address the frame with these edges: a helper that left them
        # outside it (or swapped the frame) stops the run rather than anything else.
        start = xdp.data_meta if xdp.meta_supported else xdp.data
        frame, size = self.native_frame()
        if xdp.frame is not frame or not 0 <= start <= xdp.data <= xdp.data_end <= size:
            raise HelperFault("a helper left the xdp_buff edges outside its frame")
        c.x_data, c.x_data_end, c.x_data_meta = xdp.data, xdp.data_end, xdp.data_meta
        root = self.root()
        if root.ftab is not None:
            i = int(root.jit._ctx.batch_index)
            frags_to_row(root.ftab.rows[i], root.ftab.bounds[i], xdp.frags)
            c.x_frags = root.ftab.row_addr(i) if xdp.frags else 0
        else:
            c.x_frags = abi.FRAGS_PYTHON if xdp.frags else 0
        if self.jit.kern_image is not None:
            self.jit.kern_image.sync(xdp)  # the helper may have moved the edges
        self.jit._ri_in()
        ctx = self.jit.context
        if isinstance(ctx, RunContext):
            c.tail_cnt = ctx.tail_call_cnt & M64
            # the helper may have given a bare run its namespace (bpf_check_mtu's)
            c.devs = ctx.fib.native_desc() if ctx.fib is not None else 0


# Namespace tables kfunc twins use: (kind prefix of the twins, run context word, the Fib
# attribute, the name of the region the Python kfuncs map).
_NS_TABLES = (("ct", "ct", "conntrack", "nf_conntrack table"),
              ("xfrm", "xfrm", "xfrm", "xfrm states"),
              ("sk", "sk", "sockets", "sockets"))


@dataclass
class _NsTable:
    """A namespace table of the run as its kfuncs' twins see it (for the last run)."""

    kind: str
    field: str
    attr: str
    name: str
    table: Any = None
    desc: int = 0
    region: Region | None = None


class XdpJit(JitProgram):
    """An XDP program compiled for native helpers and the XDP batch entry.

    ``maps`` are every map of the program's collection, in the order their
    regions follow the packet in the region table. ``facts`` are what the
    verifier proved of the program's accesses (:mod:`pyxdp.verifier.facts`):
    the ones :func:`proven_accesses` can place are compiled without a check.
    ``_unchecked`` (for the benchmark only) drops the bounds checks of accesses
    whose region is known.
    """

    def __init__(self, insns: Sequence[Instruction], *, maps: Sequence[Map],
                 helpers: Mapping[int, Helper] | None = None,
                 ld_imm64: Ldimm64Resolver | None = None,
                 ctx_loads: Mapping[int, int] | None = None,
                 budget: int = DEFAULT_BUDGET, opt_level: int = 2,
                 facts: Mapping[int, MemAccess] | None = None,
                 regions: Sequence[Region] = (), _unchecked: bool = False,
                 exception_cb: int = 0) -> None:
        # (a copy keeping the table's deferred helpers deferred: only the called ones load)
        helpers = HelperTable.of(XDP_HELPERS if helpers is None else helpers)
        called = called_helpers(insns)
        constants = _constants(insns, ld_imm64)
        self.map_regions: list[Region] = []
        infos: list[MapInfo] = []
        table: list[int] = []
        # Prog arrays the program tail-calls through: slots of the native tail table.
        self._tail_maps: list[tuple[ProgArrayMap, int]] = []
        tails = 0
        for m in maps:
            first = 1 + len(self.map_regions)
            own = m.regions()
            self.map_regions.extend(own)
            named = m.addr in constants or any(
                r.base <= v < r.base + r.size for r in own for v in constants)
            if not named:
                continue
            info, desc = _map_info(m, len(infos), first)
            if type(m) is ProgArrayMap:
                info = replace(info, kind="progs", tail_base=tails)
                self._tail_maps.append((m, tails))
                tails += m.max_entries
            infos.append(info)
            table.extend(desc)
        self.map_regions.extend(regions)  # shared memory after the maps' (the object arena)
        # The twins of the helpers the program calls (a twin stands in at a call site).
        twins = NATIVE_XDP_HELPERS
        kinds = tuple((hid, kind) for hid in called
                      if hid in helpers and hid in XDP_HELPERS and hid in twins
                      and helpers[hid].fn is XDP_HELPERS[hid].fn
                      for kind in [twins[hid]]) + kfunc_kinds(helpers, called)
        natives = Natives(kinds, tuple(infos), True, PKT_BASE, CTX_BASE, bool(tails))
        self._maps = list(maps)  # the descriptors point into their storage
        proven = proven_accesses(insns, facts or {}, maps, infos)
        super().__init__(insns, helpers=helpers, ld_imm64=ld_imm64, ctx_loads=ctx_loads,
                         budget=budget, opt_level=opt_level, _natives=natives,
                         _map_table=np.array(table or [0], dtype=np.uint64),
                         _unchecked=_unchecked, _emit_run=False, _proven=proven,
                         exception_cb=exception_cb)
        self._sync = _Sync(self)
        # The conntrack and xfrm kfuncs' and the socket helpers' twins: the run's
        # namespace's tables (their words in the run context, their entries a region of
        # the run as the Python paths map them).
        prefixes = {kind.split("_")[0] for _h, kind in kinds}
        self._ns_tables = [_NsTable(*t) for t in _NS_TABLES if t[0] in prefixes]
        # A program that reads the kernel's xdp_buff (bpf_cast_to_kern_ctx): native code
        # writes the engine's image of it (the kfunc's twin, and pkt after every native
        # move of the edges). Where the kernel's layout is not the one the twin writes,
        # the edges move only through the Python helpers, which keep the image in step.
        self.kern_image: KernImage | None = None
        self._xdp_native = True
        if any(helpers[hid].name == "bpf_cast_to_kern_ctx" for hid in called
               if hid in helpers):
            # (the kernel's xdp_buff model and its namespace's loads with such a program)
            from pyxdp.net.xdp_kern_ctx import KernImage, native_layout

            if native_layout():
                self.kern_image = KernImage()
                self._ctx.kern = _addr(self.kern_image.desc)
            else:
                self._xdp_native = False
        self._xdp_fn: Any = None
        self._checked_xdp: Any = None
        self._errors: dict[int, BaseException] = {}
        self._scalars: dict[tuple[int, int], tuple[U32, int]] = {}
        self._blocks: dict[int, Any] = {}
        self._placeholder = Region("packet", PKT_BASE, bytearray(0))
        self._table_stale = True
        # A run is a batch of one: inputs io[0..4] (data, len, meta, rxq, ifindex),
        # outputs io[5..10] (action, data, len, meta, status word, pc), wide[0..4].
        self._io = (ctypes.c_uint32 * 11)()
        self._wide = (ctypes.c_uint64 * 5)()
        io = ctypes.addressof(self._io)
        self._desc1 = XdpDesc(count=1, repeat=1, stride=0, data_off=io, data_len=io + 4,
                              meta_len=io + 8, rxq=io + 12, ifindex=io + 16)
        _set_outputs(self._desc1, 1, io + 20, ctypes.addressof(self._wide))
        self._desc1_addr = ctypes.addressof(self._desc1)
        self._descn = np.zeros(len(abi.XDP_FIELDS), np.uint64)
        self._descn_addr = _addr(self._descn)
        # Native tail calls: per slot the target's run context, XDP entry, budget; the
        # programs behind them for this run (faults are rendered by their own engine).
        self._tails = np.zeros(abi.TAIL_WORDS * max(tails, 1), np.uint64)
        self._ctx.tails = _addr(self._tails)
        self._tail_progs: list[Any] = [None] * tails
        self._nested: list[Any] = []
        self._xsk_table: Any = None  # the array c.xsk_table points at (None: no table)
        self._parent: XdpJit | None = None
        self._active = False
        # Faults Python helpers raised during the last driven batch, by frame index.
        self.driver_faults: dict[int, ProgramFault] = {}

    # -- redirect state ---------------------------------------------------------------
    def _ri_out(self) -> None:
        """Native redirect state -> the RunContext's RedirectInfo."""
        c = self._ctx
        ctx = self.context
        if not c.ri_present or not isinstance(ctx, RunContext):
            return
        ri = ctx.ri if isinstance(ctx.ri, RedirectInfo) else RedirectInfo()
        ctx.ri = ri
        ri.tgt_index = int(c.ri_tgt_index)
        ri.map_id = int(c.ri_map_id)
        ri.map_type = int(c.ri_map_type)
        ri.flags = int(c.ri_flags)
        ri.map = map_by_addr(int(c.ri_map)) if c.ri_map else None
        if c.ri_tv_set:
            ri.tgt_value = int(c.ri_tv) or None
            c.ri_tv_set = 0

    def _ri_in(self) -> None:
        """The RunContext's RedirectInfo -> native redirect state."""
        c = self._ctx
        ctx = self.context
        ri = ctx.ri if isinstance(ctx, RunContext) else None
        c.ri_tv_set = 0
        if ri is None:
            c.ri_present = 0
            return
        c.ri_present = 1
        c.ri_tgt_index = int(ri.tgt_index) & M64
        c.ri_map_id = int(ri.map_id) & M64
        c.ri_map_type = int(ri.map_type) & M64
        c.ri_flags = int(ri.flags) & M64
        c.ri_map = int(getattr(ri.map, "addr", 0)) & M64 if ri.map is not None else 0

    def _park(self, e: BaseException, status: int) -> None:
        self._errors[int(self._ctx.batch_index)] = e
        if self._parent is not None:  # a native tail call: the caller's frame reports it
            self._parent._errors[int(self._parent._ctx.batch_index)] = e
        super()._park(e, status)

    def _render(self, budget: int, word: int, pc: int, addr: int, pkt: Region,
                error: BaseException | None, tail_progs: list[Any]) -> ProgramFault:
        """The fault a run left, as the interpreter reports it; a native tail call's
        fault (ST_TAIL) is rendered by the target's own engine, with its source line."""
        status = word & 0xFF
        if status != abi.ST_TAIL:
            regions = [pkt, *self.map_regions, *self._twin_regions]
            return self._fault(budget, regions, ((word >> 8) & 0xFF) + 1, status, pc, addr,
                               error)
        target = tail_progs[word >> 24]
        vm = target.vm
        err = vm._fault(target.budget, [pkt, *vm.map_regions, *vm._twin_regions],
                        ((word >> 16) & 0xFF) + 1, (word >> 8) & 0xFF, pc, addr, error)
        with_source: Callable[[ProgramFault], ProgramFault] = target._with_source
        return with_source(err)

    # -- setup shared by runs and batches ------------------------------------------------
    def _begin(self, ctx: RunContext) -> None:
        if not self._bound:
            self._bind()
            self._xdp_fn = _XDP_T(self._code.xdp_entry)
        self._active = True
        c = self._ctx
        c.nflags = abi.NF_RUNCTX | (abi.NF_XDP if self._xdp_native else 0) | (
            abi.NF_CLOCK if ctx.clock_ns is time.monotonic_ns else 0)
        c.cpu = ctx.cpu & M64
        c.rnd = ctx.rnd.address
        c.trace = ctx.trace.address
        c.devs = ctx.fib.native_desc() if ctx.fib is not None else 0
        table = ctx.xsk_table
        if table is self._xsk_table:  # the host's table: same array run after run
            pass
        elif isinstance(table, np.ndarray) and table.dtype == np.uint64 and table.ndim == 1:
            c.xsk_table, c.xsk_ntable = _addr(table), len(table)
            self._xsk_table = table
        else:
            c.xsk_table = c.xsk_ntable = 0
            self._xsk_table = None
        for t in self._ns_tables:
            table = getattr(ctx.fib, t.attr) if ctx.fib is not None else None
            if table is not t.table:
                t.table = table
                t.desc = table.native_desc() if table is not None else 0
                # as the kfuncs' Python path maps the table for the program
                t.region = None if table is None else Region(t.name, table.base, table.buf,
                                                              writable=False)
                self._table_stale = True
            setattr(c, t.field, t.desc)
        self.context = ctx
        self._pending = None
        if self._errors:
            self._errors = {}
        self._ri_in()
        self._hooks = self._sync
        # The map regions stay described between runs (their storage never moves);
        # entry 0, the packet, is set by native code per frame.
        if self.kern_image is not None:
            self.kern_image.begin(ctx)  # rebuilt on first use if its devices changed
        if self._table_stale:
            kern = self.kern_image.regions if self.kern_image is not None else []
            kern = [*kern, *(t.region for t in self._ns_tables if t.region is not None)]
            self._regions = [self._placeholder, *self.map_regions, *kern, *self._twin_regions]
            self._load_regions(self._regions)
            self._table_stale = False
        if self._tail_maps and self._parent is None:
            self._prepare_tails(ctx)

    def _prepare_tails(self, ctx: RunContext) -> None:
        """Fill the native tail table for this run: a slot whose program runs on the JIT
        and is idle gets that program's run context (it is set up to run nested, on
        this run's buffer); an empty slot is marked so (word 3: the call falls through
        natively, as the hook answers it); any other slot is left to the Python hook, as
        the interpreter runs it. One level: the targets' own tail calls take the hook."""
        table = self._tails
        for m, base in self._tail_maps:
            for idx in range(m.max_entries):
                k = base + idx
                target: Any = m.prog_at(idx)
                vm = getattr(target, "vm", None)
                # An XdpProg (net.prog, which imports this module) on its JIT engine.
                if (getattr(target, "engine", None) == "jit"
                        and target._depth == 0 and isinstance(vm, XdpJit) and not vm._active):
                    vm._parent = self
                    vm._begin(ctx)
                    vm._sync.parent = self._sync
                    target._depth += 1  # a Python-level run of it takes a spare engine
                    self._nested.append(target)
                    if vm._xdp_fn is None:
                        vm._xdp_fn = _XDP_T(vm._code.xdp_entry)
                    w = abi.TAIL_WORDS * k
                    table[w:w + 3] = (vm._ctx_addr, vm._code_for(target.budget).xdp_entry,
                                      min(max(target.budget, 0), 1 << 62))
                    self._tail_progs[k] = target
                else:
                    table[abi.TAIL_WORDS * k + 1] = 0
                    table[abi.TAIL_WORDS * k + 3] = target is None
                    self._tail_progs[k] = None

    def _helper_exit(self, before: list[Any]) -> None:
        super()._helper_exit(before)
        self._table_stale = True  # it may have reloaded the table with Python's buffers

    def _end(self) -> None:
        self._active = False
        for target in self._nested:
            vm = target.vm
            vm._end()
            vm._sync.parent = None
            vm._parent = None
            target._depth -= 1
        if self._nested:
            self._nested = []
            self._tails[1::abi.TAIL_WORDS] = 0
        if self._tail_maps:
            self._tails[3::abi.TAIL_WORDS] = 0  # empty marks hold for one run
        self._ri_out()
        self._hooks = None
        sync = self._sync
        sync.xdp = sync.frames = sync.current = sync.frame = sync.rows = sync.desc = None
        sync.others = {}
        sync.ftab, sync.fviews = None, {}
        sync.index = -1
        c = self._ctx
        c.nflags = c.ct = c.xfrm = c.sk = c.rnd = c.devs = c.trace = 0
        self._table[1] = 0  # entry 0 pointed into the caller's frame: size 0 now
        if self._table_stale:
            self._release()

    # -- an async callback (a bpf_timer's) ----------------------------------------------
    def run_callback(self, func_addr: int, *args: int, regions: Sequence[Region] = (),
                     budget: int | None = None, context: Any = None) -> int:
        """Run a callback on its own, with no packet: the map regions at the entries native
        helpers expect (region 0 an empty packet), ``regions`` after them."""
        if self._active:
            raise HelperFault("an async callback cannot run on an engine that is running")
        c = self._ctx
        ctx = context if isinstance(context, RunContext) else None
        c.nflags = 0 if ctx is None else abi.NF_RUNCTX | (
            abi.NF_CLOCK if ctx.clock_ns is time.monotonic_ns else 0)
        c.cpu = (ctx.cpu if ctx is not None else 0) & M64
        c.ri_present = 0
        c.xsk_table = c.xsk_ntable = c.ct = c.xfrm = c.sk = c.devs = 0
        c.rnd = ctx.rnd.address if ctx is not None else 0
        self._xsk_table = None
        self._hooks = None
        self._table_stale = True  # the next XDP run describes its own regions again
        try:
            return super().run_callback(func_addr, *args, budget=budget, context=context,
                                        regions=[self._placeholder, *self.map_regions,
                                                 *regions])
        finally:
            c.nflags = c.rnd = 0
            self._errors = {}

    def _xdp_for(self, budget: int) -> Any:
        """The XDP batch entry (ctypes) a run given ``budget`` takes (see _code_for)."""
        if budget >= self._min_budget:
            return self._xdp_fn
        if self._checked_xdp is None:
            self._checked_xdp = _XDP_T(self._code_for(budget).xdp_entry)
        return self._checked_xdp

    # -- one run ---------------------------------------------------------------------
    def run_xdp(self, xdp: XdpBuff, ctx: RunContext, *, budget: int | None = None) -> int:
        """Run on one packet (``ctx.xdp`` is ``xdp``); return the action (u32) or raise
        the interpreter's ProgramFault. The buffer's edges move as the program moves
        them."""
        budget = self.budget if budget is None else budget
        frame = xdp.frame
        data, data_end = xdp.data, xdp.data_end
        meta_ok = xdp.data_meta <= data
        start = xdp.data_meta if meta_ok else data
        if not 0 <= start <= data <= data_end <= min(len(frame), 0xFFFF_FFFF):
            raise ValueError("xdp_buff edges lie outside its frame")
        keep, host = _pin(frame, True, "xdp frame")
        self._begin(ctx)
        self._sync.xdp = xdp
        self._sync.frame, self._sync.frame_len = frame, len(frame)
        io = self._io
        io[0], io[1], io[2] = data, data_end - data, data - start
        io[3], io[4] = xdp.rxq.queue_index & 0xFFFF_FFFF, xdp.rxq.ifindex & 0xFFFF_FFFF
        # adjust_head/meta/tail natively only when the frame holds frame_sz bytes.
        frame_sz = xdp.frame_sz if len(frame) >= xdp.frame_sz else 0
        c = self._ctx
        if not frame_sz:
            c.nflags &= ~abi.NF_XDP
        d = self._desc1
        d.tail_cnt0 = ctx.tail_call_cnt & M64
        d.budget = min(max(budget, 0), 1 << 62)
        d.frames, d.frame_sz, d.meta_ok = host, frame_sz, int(meta_ok)
        own = _own_frags(xdp)
        d.frags = 0 if not xdp.frags else abi.FRAGS_PYTHON if own is None else _addr(own.rows)
        d.egress = xdp.egress_ifindex & M64
        if own is not None:  # the native twins work on copies of the frags with room
            self._sync.ftab = own
            xdp.frags = frags_of_row(own.rows[0], own.bounds[0], self._sync.fviews)
        try:
            self._xdp_for(budget)(self._ctx_addr, self._desc1_addr)
            xdp.data, xdp.data_end, xdp.data_meta = int(c.x_data), int(c.x_data_end), \
                int(c.x_data_meta)
            xdp.sync_region()
            ctx.tail_call_cnt = int(c.tail_cnt)
            self.executed = budget - _signed(int(c.rem)) if budget >= 0 else 0
            word = io[9]
            status = word & 0xFF
            if status:
                if status == abi.ST_ABORT:
                    err = self._errors.get(0) or self._pending
                    assert err is not None
                    raise err
                raise self._render(budget, word, io[10], int(self._wide[0]), xdp.region,
                                   self._errors.get(0), self._tail_progs)
            return int(io[5])
        finally:
            if own is not None:  # the frags as the run left them, the buffer's own again
                xdp.frags = [bytearray(v) for v in frags_of_row(own.rows[0], own.bounds[0], {})]
            self._end()
            del keep, own

    # -- batches -----------------------------------------------------------------------
    def run_batch_xdp(self, frames: npt.NDArray[np.uint8], data_off: Any, data_len: Any,
                      meta_len: Any = None, rx_queue: Any = 0, ingress_ifindex: Any = 1, *,
                      ctx: RunContext | None = None, repeat: int = 1,
                      egress_ifindex: int = 0, budget: int | None = None,
                      rows: npt.NDArray[np.int64] | None = None,
                      consume_redirect: bool = False,
                      frags: FragTable | None = None) -> XdpBatchOutput:
        """Run frame i = ``frames[i]`` (a ``(N, frame_sz)`` uint8 array, written in
        place) with data at ``data_off[i]`` for ``data_len[i]`` bytes after
        ``meta_len[i]`` bytes of metadata, ``repeat`` times each (state carried, as
        test_run's repeat). Faults make that frame XDP_ABORTED with a fault record
        and the batch goes on. With ``rows`` (int64, checked by the caller to be
        row numbers of ``frames``) frame i is ``frames[rows[i]]`` instead. With
        ``consume_redirect`` an XDP_REDIRECT verdict clears the redirect state's
        map, map id and type and flags after the frame, as the datapath's
        ``xdp_do_redirect`` does before the next frame runs. With ``frags`` frame i's
        frags are row i of that table (its ``data_len`` the linear part): native
        helpers reach them there and leave them there as the program left them (the
        caller writes them back), Python helpers see them as views of their pages."""
        budget = self.budget if budget is None else budget
        flags = frames.flags if isinstance(frames, np.ndarray) else None
        if (flags is None or frames.dtype != np.uint8 or frames.ndim != 2
                or not flags.c_contiguous or not flags.writeable):
            raise ValueError("frames must be a writable C-contiguous (N, frame_sz) uint8 array")
        nrows, frame_sz = frames.shape
        n = nrows if rows is None else len(rows)
        if frame_sz > 0xFFFF_FFFF:
            raise ValueError("frames larger than 4 GiB")
        off, a_off = self._u32(data_off, n, "data_off")
        ln, a_ln = self._u32(data_len, n, "data_len")
        meta, a_meta = (None, 0) if meta_len is None else self._u32(meta_len, n, "meta_len")
        if n:
            if isinstance(data_off, int) and isinstance(data_len, int):
                outside = data_off + data_len > frame_sz
            else:
                outside = int((off.astype(np.uint64) + ln).max()) > frame_sz
            if outside or (meta is not None and bool((meta > off).any())):
                raise ValueError("a frame's data or metadata lies outside the frame")
        if frags is not None:
            r, b = frags.rows, frags.bounds
            if (r.dtype != np.uint64 or r.shape != (n, abi.FRAG_WORDS)
                    or not r.flags.c_contiguous or not r.flags.writeable
                    or b.shape != (n, abi.MAX_FRAGS, 2)):
                raise ValueError("frags must be a frag table with one row per frame")
            if n and not frags.consistent():
                raise ValueError("a frag table row lists frags outside their pages")
        rxq, a_rxq = self._u32(rx_queue, n, "rx_queue")
        ifx, a_ifx = self._u32(ingress_ifindex, n, "ingress_ifindex")
        ctx = ctx if ctx is not None else RunContext()
        block = self._output_block(n)
        a_wide = ctypes.addressof(block)
        a_small = a_wide + 40 * n
        wide = np.frombuffer(block, np.uint64, 5 * n)
        small = np.frombuffer(block, np.uint32, 6 * n, 40 * n)
        self._begin(ctx)
        sync = self._sync
        sync.frames, sync.ifindex, sync.rxq, sync.egress = frames, ifx, rxq, egress_ifindex
        sync.rows, sync.desc, sync.ftab = rows, None, frags
        d = self._descn
        # XDP_FIELDS order, in one assignment (ctypes attributes one by one cost more).
        d[:] = (n, max(repeat, 1), min(max(budget, 0), 1 << 62), _addr(frames) if n else 0,
                frame_sz, frame_sz, a_off, a_ln, a_meta, 1,
                _addr(frags.rows) if frags is not None and n else 0, a_rxq, a_ifx,
                egress_ifindex & M64, a_small, a_small + 4 * n, a_small + 8 * n,
                a_small + 12 * n, a_small + 16 * n, a_small + 20 * n, a_wide, a_wide + 8 * n, 0,
                0, 0 if rows is None else _addr(rows), int(consume_redirect))
        try:
            if n:
                self._xdp_for(budget)(self._ctx_addr, self._descn_addr)
            done = int(d[abi.XDP_FIELDS.index("done")])
        finally:
            d[0] = 0  # no frames: the outputs it points at are the caller's now
            self._end()
        errors = self._errors
        if errors:
            self._errors = {}
            aborted = [e for e in errors.values() if not isinstance(e, Exception)]
            if aborted:
                raise aborted[0]
            bugs = [errors[i] for i in sorted(errors) if not isinstance(errors[i], ProgramFault)]
            if bugs:
                raise bugs[0]
        out = XdpBatchOutput(small, wide, n, done, budget, errors)
        out._jit = self
        out._tail_progs = list(self._tail_progs)
        return out

    @contextmanager
    def driver(self, ctx: RunContext, frames: npt.NDArray[np.uint8], io: DriverIO,
               others: Sequence[npt.NDArray[np.uint8]] = ()) -> Iterator[tuple[int, int]]:
        """Let native code (a NAPI poll loop) call the XDP entry itself, batch after
        batch, for the body: yields ``(entry address, run context address)``;
        ``io.desc`` is filled so that the caller only sets ``count`` (word 0) and
        the per-frame inputs in ``io`` before each call. Python helpers see frame
        ``frames[io.rows[i]]`` - or ``other[io.rows[i]]`` for a batch whose
        descriptor's frames word the caller pointed at one of ``others`` (arrays of
        the same row size: a devmap program's bulk of clones in order-0 pages).
        Afterwards, an exception a helper raised that is no program fault (a bug,
        an interrupt) is raised here; program faults are in the outputs and are
        rendered with :meth:`render_fault`."""
        assert all(o.shape[1] == frames.shape[1] for o in others)
        self._begin(ctx)
        sync = self._sync
        sync.frames, sync.ifindex, sync.rxq, sync.egress = frames, io.ifindex, io.rxq, 0
        sync.rows, sync.desc = io.rows, io.desc
        sync.others = {_addr(o): o for o in others}
        sync.ftab = io.frags
        words = io.words
        # Keyed by the array object itself (kept alive by the key): a page pool's or
        # UMEM's pages array is the same object call after call.
        if words is None or words[0] is not frames:
            n = len(io.rows)
            assert len(io.data_off) == n and io.redirect.shape == (n, 4)
            base = _addr(frames)
            words = io.words = (frames, np.array((
                0, 1, 0, base, frames.shape[1], frames.shape[1], _addr(io.data_off),
                _addr(io.data_len), _addr(io.meta_len), 1, 0, _addr(io.rxq),
                _addr(io.ifindex), 0, _addr(io.action), _addr(io.off_out), _addr(io.len_out),
                _addr(io.meta_out), _addr(io.status), _addr(io.pc), _addr(io.addr),
                _addr(io.redirect), 0, 0, _addr(io.rows), 1), np.uint64))
        io.desc[:] = words[1]
        io.desc[2] = min(max(self.budget, 0), 1 << 62)
        try:
            yield self._code_for(self.budget).xdp_entry, self._ctx_addr
        finally:
            io.desc[0] = 0
            self._end()
        errors, self._errors = self._errors, {}
        bugs = [e for e in errors.values() if not isinstance(e, ProgramFault)]
        if bugs:
            raise bugs[0]
        self.driver_faults = {i: e for i, e in errors.items() if isinstance(e, ProgramFault)}

    def render_fault(self, word: int, pc: int, addr: int) -> ProgramFault:
        """The fault a driven batch recorded for one frame (status word, pc, address)."""
        return self._render(self.budget, word, pc, addr, Region("packet", PKT_BASE, bytearray(0)),
                            None, self._tail_progs)

    def _output_block(self, n: int) -> Any:
        """One zeroed block for every output of an ``n``-frame batch (ctypes gives its
        address cheaply). The last one of this size is used again once nothing but
        this cache holds it: warm in cache, no page faults on first touch."""
        block = self._blocks.get(n)
        # References: the cache, this variable, getrefcount's argument.
        if block is not None and sys.getrefcount(block) == 3:
            ctypes.memset(block, 0, ctypes.sizeof(block))
            return block
        block = (ctypes.c_uint64 * (8 * n))()
        if n >= 64:
            if len(self._blocks) > 8:
                self._blocks.clear()
            self._blocks[n] = block
        return block

    def _u32(self, v: Any, n: int, what: str) -> tuple[U32, int]:
        """``v`` (a scalar or one value per frame) as a uint32 array and its address;
        broadcast scalars are kept for the next batch of the same size."""
        if isinstance(v, (int, np.integer)):
            key = (n, int(v))
            hit = self._scalars.get(key)
            if hit is not None:
                return hit
            if not 0 <= int(v) <= 0xFFFF_FFFF:
                raise ValueError(f"{what} must fit in 32 bits")
            a = np.full(n, int(v), np.uint32)
            if len(self._scalars) > 64:
                self._scalars.clear()
            self._scalars[key] = (a, _addr(a))
            return a, self._scalars[key][1]
        a = np.asarray(v)
        if a.shape != (n,):
            raise ValueError(f"{what} must be a scalar or have one entry per frame")
        if a.dtype != np.uint32:
            if a.size and (int(a.min()) < 0 or int(a.max()) > 0xFFFF_FFFF):
                raise ValueError(f"{what} must fit in 32 bits")
            a = a.astype(np.uint32)
        a = np.ascontiguousarray(a)
        return a, _addr(a)


class _OwnFrags(FragTable):
    """A one-row frag table over copies of an XdpBuff's bytearray frags, each with room
    for the rx queue's ``frag_size`` after it (kept alive here while the run uses it)."""

    backing: list[Any]


def _own_frags(xdp: XdpBuff) -> _OwnFrags | None:
    """A frag table for a single run over ``xdp``'s frags when they are its own
    bytearrays (test_run's); None for views of pages (a frame of a batch, whose table
    its batch has) or anything unusual, which the Python helpers then serve."""
    fr = xdp.frags
    if (not fr or len(fr) > abi.MAX_FRAGS
            or any(type(f) is not bytearray or not f for f in fr)):
        return None
    fs = xdp.rxq.frag_size
    room = fs if 0 < fs <= xdp.frame_sz else 0
    rows = np.zeros((1, abi.FRAG_WORDS), np.uint64)
    bounds = np.zeros((1, abi.MAX_FRAGS, 2), np.uint64)
    backing: list[Any] = []
    for k, f in enumerate(fr):
        b = bytearray(len(f) + room)
        b[:len(f)] = f
        pin = ctypes.c_char.from_buffer(b)
        backing.append((b, pin))
        addr = ctypes.addressof(pin)
        at = abi.FRAG_HEAD + abi.FRAG_ENTRY * k
        rows[0, at:at + 3] = (addr, len(f), k)
        bounds[0, k] = (addr, addr + len(b))
    rows[0, abi.FRAG_NR], rows[0, abi.FRAG_SIZE] = len(fr), sum(len(f) for f in fr)
    rows[0, abi.FRAG_FRAG_SIZE] = fs & M64
    own = _OwnFrags(rows, bounds)
    own.backing = backing
    return own


def _set_outputs(d: XdpDesc, n: int, a_small: int, a_wide: int) -> None:
    d.act_out, d.off_out, d.len_out = a_small, a_small + 4 * n, a_small + 8 * n
    d.meta_out, d.status_out, d.pc_out = a_small + 12 * n, a_small + 16 * n, a_small + 20 * n
    d.addr_out, d.redirect_out, d.done = a_wide, a_wide + 8 * n, 0

