"""Collection specs: what an eBPF object file declares, before anything is created.

This is the "spec" half of cilium/ebpf's spec/live-object split (and what
libbpf holds between ``bpf_object__open`` and ``bpf_object__load``): plain,
frozen, deterministic data with no kernel calls. An ELF object becomes a
:class:`CollectionSpec` (see :func:`pyxdp.elf.load_collection_spec`); a
userspace or kernel backend then creates maps and loads programs from it.

Programs are fully linked the way libbpf links them: used ``.text``
subprograms are appended after the entry program and call/``BPF_PSEUDO_FUNC``
offsets point at their new positions. Map and global-data references are
left *symbolic*: each ``ld_imm64`` that names a map keeps
``src_reg = BPF_PSEUDO_MAP_FD`` (or ``BPF_PSEUDO_MAP_VALUE`` with the value
offset in the second slot's ``imm``) and ``imm = 0`` in the first slot, and a
:class:`MapRef` says which map it means, so a backend writes in its own fd or
handle.
"""

from __future__ import annotations

import bisect
import errno
import operator
import os
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pyxdp.args import short
from pyxdp.asm.insn import Instruction
from pyxdp.asm.opcodes import PseudoSrc
from pyxdp.btf.btf import BTF_FUNC_GLOBAL, Btf, BtfKind
from pyxdp.errors import BadArgument, InvalidProgram

__all__ = [
    "BPF_F_RDONLY_PROG",
    "BPF_F_WRONLY_PROG",
    "BPF_F_XDP_DEV_BOUND_ONLY",
    "BPF_F_XDP_HAS_FRAGS",
    "BPF_XDP",
    "BPF_XDP_CPUMAP",
    "BPF_XDP_DEVMAP",
    "CollectionSpec",
    "CoreRelocation",
    "ExceptionCallbackError",
    "FuncInfo",
    "FunctionSpan",
    "InnerMapRef",
    "KfuncRef",
    "LineInfo",
    "MapRef",
    "MapSpec",
    "MapValue",
    "ProgramRef",
    "ProgramSpec",
    "XdpRunConfig",
    "exception_callback",
    "libbpf_map_defaults",
    "ringbuf_size",
]

# enum bpf_attach_type values the XDP section names map to (uapi bpf.h).
BPF_XDP_DEVMAP = 33
BPF_XDP_CPUMAP = 35
BPF_XDP = 37
# BPF_PROG_LOAD prog_flags bit set by SEC("xdp.frags*").
BPF_F_XDP_HAS_FRAGS = 1 << 5
# prog_flags bit of a program bound to the device prog_ifindex names (XDP metadata kfuncs).
BPF_F_XDP_DEV_BOUND_ONLY = 1 << 6
# Map flag libbpf sets on .rodata (programs may only read it).
BPF_F_RDONLY_PROG = 1 << 7
# ... and the flag of a map programs may only write.
BPF_F_WRONLY_PROG = 1 << 8
BPF_F_WRONLY_PROG = 1 << 8

BPF_MAP_TYPE_PERF_EVENT_ARRAY = 4
BPF_MAP_TYPE_RINGBUF = 27
BPF_MAP_TYPE_USER_RINGBUF = 31
_PAGE_SIZE = 4096

# libxdp's defaults when a program has no .xdp_run_config entry.
XDP_DEFAULT_RUN_PRIO = 50
XDP_DEFAULT_CHAIN_CALL_ACTIONS = 1 << 2  # 1 << XDP_PASS

_MAP_TYPE_NAMES = (
    "unspec", "hash", "array", "prog_array", "perf_event_array", "percpu_hash",
    "percpu_array", "stack_trace", "cgroup_array", "lru_hash", "lru_percpu_hash",
    "lpm_trie", "array_of_maps", "hash_of_maps", "devmap", "sockmap", "cpumap",
    "xskmap", "sockhash", "cgroup_storage", "reuseport_sockarray",
    "percpu_cgroup_storage", "queue", "stack", "sk_storage", "devmap_hash",
    "struct_ops", "ringbuf", "inode_storage", "task_storage", "bloom_filter",
    "user_ringbuf", "cgrp_storage", "arena",
)


@dataclass(frozen=True, slots=True)
class MapRef:
    """An ``ld_imm64`` at slot ``pc`` that loads map ``map_name``.

    ``kind`` is ``"fd"`` (``BPF_PSEUDO_MAP_FD``: the map itself) or
    ``"value"`` (``BPF_PSEUDO_MAP_VALUE``: a pointer ``offset`` bytes into
    the value of a single-entry array, i.e. global data).
    """

    pc: int
    map_name: str
    kind: Literal["fd", "value"]
    offset: int = 0


@dataclass(frozen=True, slots=True)
class KfuncRef:
    """A ``call`` at slot ``pc`` of kernel function ``name`` (an ``extern ... __ksym``)."""

    pc: int
    name: str


@dataclass(frozen=True, slots=True)
class CoreRelocation:
    """One CO-RE relocation (``struct bpf_core_relo``) moved to slot ``pc`` of the
    linked program: ``type_id`` in the object's BTF, ``access`` the access string
    (``"0:1:2"``, at ``access_off`` in the BTF's strings), ``kind`` an
    ``enum bpf_core_relo_kind`` value."""

    pc: int
    type_id: int
    access: str
    kind: int
    access_off: int = 0


@dataclass(frozen=True, slots=True)
class FuncInfo:
    """``struct bpf_func_info`` of the linked program (``insn_off`` in slots)."""

    insn_off: int
    type_id: int
    name: str


@dataclass(frozen=True, slots=True)
class LineInfo:
    """``struct bpf_line_info`` of the linked program, with its strings resolved.

    ``insn_off`` is in slots of the final program; ``file_name_off`` and
    ``line_off`` index :attr:`CollectionSpec.btf` strings (what the kernel wants),
    ``file_name`` and ``text`` are those strings.
    """

    insn_off: int
    file_name: str
    text: str
    line: int
    col: int
    file_name_off: int
    line_off: int

    @property
    def line_col(self) -> int:
        return (self.line << 10) | (self.col & 0x3FF)

    def render(self) -> str:
        """``file.c:LINE: source text`` (file shown by its base name)."""
        return f"{os.path.basename(self.file_name)}:{self.line}: {self.text.strip()}"


@dataclass(frozen=True, slots=True)
class FunctionSpan:
    """Where one C function landed in a linked program: slots ``[pc, pc + count)``."""

    name: str
    section: str
    pc: int
    count: int


@dataclass(frozen=True, slots=True)
class ProgramRef:
    """A map slot initialised with a program (``prog_array`` ``values``)."""

    name: str


@dataclass(frozen=True, slots=True)
class InnerMapRef:
    """A map slot initialised with another map (map-in-map ``values``)."""

    name: str


MapValue = bytes | ProgramRef | InnerMapRef


@dataclass(frozen=True)
class MapSpec:
    """One map to create: ``struct bpf_map_def`` plus what libbpf knows about it.

    ``type`` is an ``enum bpf_map_type`` value. ``key_type``/``value_type``
    are ids in :attr:`CollectionSpec.btf` (``None`` when unknown). ``inner``
    is the template of a map-in-map's inner maps. ``contents`` are initial
    ``(key, value)`` pairs: raw bytes for global data, or symbolic
    :class:`ProgramRef`/:class:`InnerMapRef` for ``values = {...}``
    initialisers. ``frozen`` asks the creator to freeze the map after
    populating it (``.rodata``). ``kernel_name`` is the at most 15-character
    name to pass to ``BPF_MAP_CREATE``.
    """

    name: str
    type: int
    key_size: int
    value_size: int
    max_entries: int
    flags: int = 0
    pinning: int = 0
    key_type: int | None = None
    value_type: int | None = None
    inner: MapSpec | None = None
    contents: tuple[tuple[bytes, MapValue], ...] = ()
    frozen: bool = False
    section: str = ""
    numa_node: int = 0
    map_extra: int = 0
    kernel_name: str = ""

    @property
    def type_name(self) -> str:
        """libbpf's name of the map type (``"array"``, ``"prog_array"``...)."""
        if 0 <= self.type < len(_MAP_TYPE_NAMES):
            return _MAP_TYPE_NAMES[self.type]
        return f"type {self.type}"

    @property
    def is_global_data(self) -> bool:
        """A map libbpf would create for ``.data*``/``.rodata*``/``.bss*`` or for the
        ``__kconfig`` externs (``.kconfig``)."""
        return self.name.startswith((".data", ".rodata", ".bss")) or self.name == ".kconfig"

    def copy(self, **changes: Any) -> MapSpec:
        """A copy with some fields changed (the spec itself never changes)."""
        return replace(self, **changes)


def ringbuf_size(size: int) -> int:
    """libbpf's ``adjust_ringbuf_sz`` (at open): ring buffer ``max_entries`` rounded up to
    a power-of-2 multiple of the page size, which the kernel requires; 0 stays 0 so
    that a forgotten size fails at creation."""
    if size == 0 or (size % _PAGE_SIZE == 0 and (size // _PAGE_SIZE).bit_count() == 1):
        return size
    n = _PAGE_SIZE
    while n < size:
        n <<= 1
    return n


def libbpf_map_defaults(spec: MapSpec, nr_cpus: int) -> MapSpec:
    """What libbpf fills in when it creates a map (``map_set_def_max_entries``).

    A ``PERF_EVENT_ARRAY`` declared without ``max_entries`` gets one slot per
    possible CPU (``nr_cpus``: the host's, or the userspace backend's), for
    the map and for a map-in-map's inner template alike.
    """
    inner = libbpf_map_defaults(spec.inner, nr_cpus) if spec.inner is not None else None
    if spec.type == BPF_MAP_TYPE_PERF_EVENT_ARRAY and spec.max_entries == 0:
        return replace(spec, max_entries=nr_cpus, inner=inner)
    return spec if inner is spec.inner else replace(spec, inner=inner)


@dataclass(frozen=True)
class ProgramSpec:
    """One linked entry-point program, ready to be loaded.

    ``insns`` are kernel slots (``ld_imm64`` takes two). ``map_refs`` lists
    every slot a backend must patch with a map fd/handle. ``func_info`` and
    ``line_info`` are the kernel-format ``.BTF.ext`` records already moved to
    the linked layout; ``functions`` says where each C function landed.
    ``prog_type`` (libbpf's name: ``"xdp"``, ``"sched_cls"``, ``"tracing"``...,
    ``"unspec"`` for a section libbpf does not know), ``expected_attach_type``
    and ``flags`` are what libbpf derives from the section name
    (:mod:`pyxdp.elf.sections`; ``SEC("xdp.frags")`` sets
    ``BPF_F_XDP_HAS_FRAGS``); ``attach_to`` is the BTF attach target a
    ``tp_btf/``, ``fentry/``... section names. Only XDP and ``SEC("syscall")``
    programs run in user space (:attr:`userspace`); the kernel backend loads the others.
    ``kfuncs`` are the kernel functions the program calls (``call`` slots
    with ``src_reg`` 2, resolved by name at load); ``core_relos`` its CO-RE
    relocations, applied at load against the target's BTF
    (:mod:`pyxdp.btf.core`). ``ifindex`` binds the program to a device
    (``prog_ifindex``: with ``BPF_F_XDP_DEV_BOUND_ONLY`` in ``flags``, what
    libbpf's ``bpf_program__set_ifindex`` and ``__set_flags`` do), which the
    XDP metadata kfuncs require.
    """

    name: str
    section: str
    insns: tuple[Instruction, ...]
    license: str = ""
    prog_type: str = "xdp"
    expected_attach_type: int = BPF_XDP
    flags: int = 0
    map_refs: tuple[MapRef, ...] = ()
    func_info: tuple[FuncInfo, ...] = ()
    line_info: tuple[LineInfo, ...] = ()
    functions: tuple[FunctionSpan, ...] = ()
    autoload: bool = True
    attach_to: str = ""
    ifindex: int = 0
    kfuncs: tuple[KfuncRef, ...] = ()
    core_relos: tuple[CoreRelocation, ...] = ()
    _line_pcs: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_line_pcs", tuple(li.insn_off for li in self.line_info))

    @property
    def userspace(self) -> bool:
        """True when pyxdp's engines can run it: an XDP or a SEC("syscall") program."""
        return self.prog_type in ("xdp", "syscall")

    def line_info_at(self, pc: int) -> LineInfo | None:
        """The line record covering slot ``pc`` (the last one at or before it)."""
        i = bisect.bisect_right(self._line_pcs, pc) - 1
        return self.line_info[i] if i >= 0 else None

    def source_line(self, pc: int) -> str | None:
        """``file.c:LINE: text`` for slot ``pc``, or ``None`` without line info."""
        li = self.line_info_at(pc)
        if li is None or li.line == 0:
            return None  # compiler-generated code has a line-0 record
        return li.render()

    def function_at(self, pc: int) -> FunctionSpan | None:
        """The C function slot ``pc`` belongs to."""
        for fn in self.functions:
            if fn.pc <= pc < fn.pc + fn.count:
                return fn
        return None

    def copy(self, **changes: Any) -> ProgramSpec:
        """A copy with some fields changed (the spec itself never changes)."""
        return replace(self, **changes)

    def with_map_loads(self) -> ProgramSpec:
        """This program as libbpf relocates it (``bpf_object__relocate_data``): every
        MapRef's ld_imm64 a map pseudo load (``BPF_PSEUDO_MAP_FD``/``_VALUE``) whatever
        source field it held, so the verifier, the engines and the kernel all see the
        same program. A MapRef not on a whole ld_imm64 is an InvalidProgram."""
        insns = list(self.insns)
        for ref in self.map_refs:
            if not 0 <= ref.pc < len(insns) - 1 or not insns[ref.pc].is_ld_imm64():
                raise InvalidProgram(f"{self.name}: map reference to {ref.map_name!r} is not "
                                     f"on an ld_imm64", pc=ref.pc, rule="map-ref")
            want = int(PseudoSrc.BPF_PSEUDO_MAP_FD if ref.kind == "fd"
                       else PseudoSrc.BPF_PSEUDO_MAP_VALUE)
            if insns[ref.pc].src != want:
                insns[ref.pc] = replace(insns[ref.pc], src=want)
        return self if insns == list(self.insns) else replace(self, insns=tuple(insns))

    def bound_to(self, ifindex: int) -> ProgramSpec:
        """This program bound to device ``ifindex`` (``BPF_F_XDP_DEV_BOUND_ONLY``)."""
        return replace(self, ifindex=ifindex, flags=self.flags | BPF_F_XDP_DEV_BOUND_ONLY)


@dataclass(frozen=True, slots=True)
class XdpRunConfig:
    """libxdp's ``XDP_RUN_CONFIG(prog)``: dispatcher priority and chain-call actions.

    ``chain_call_actions`` has bit ``1 << action`` set for every XDP action
    after which the dispatcher continues with the next program.
    """

    priority: int = XDP_DEFAULT_RUN_PRIO
    chain_call_actions: int = XDP_DEFAULT_CHAIN_CALL_ACTIONS

    def __post_init__(self) -> None:
        # Both are libxdp's unsigned ints: a str, a float or -1 failed deep in the
        # dispatcher's ordering or code generation; a numpy integer is taken as an int.
        for name in ("priority", "chain_call_actions"):
            v = getattr(self, name)
            try:
                n = -1 if isinstance(v, bool) else operator.index(v)
            except TypeError:
                n = -1
            if not 0 <= n <= 0xFFFF_FFFF:
                raise BadArgument(f"XdpRunConfig: {name} must be a u32 (libxdp's unsigned "
                                  f"int), not {short(v)}")
            object.__setattr__(self, name, n)

    def chain_call(self, action: int) -> bool:
        return bool(self.chain_call_actions >> action & 1) if 0 <= action < 32 else False


@dataclass(frozen=True)
class CollectionSpec:
    """Everything an object file declares: programs, maps, BTF, license.

    ``programs`` and ``maps`` keep object-file order. Global data maps are
    keyed by their ELF section name (``.data``, ``.rodata``, ``.bss``,
    ``.rodata.str1.1``...), user maps by their C name. ``xdp_run_config``
    holds libxdp run configs by program name (only programs that declare one).
    ``name`` is the libbpf object name (file name up to its first dot).
    """

    programs: dict[str, ProgramSpec]
    maps: dict[str, MapSpec]
    btf: Btf | None = None
    license: str = ""
    kern_version: int = 0
    xdp_run_config: dict[str, XdpRunConfig] = field(default_factory=dict)
    name: str = ""

    def copy(self) -> CollectionSpec:
        """An independent copy (the containers are fresh; members are immutable)."""
        return replace(self, programs=dict(self.programs), maps=dict(self.maps),
                       xdp_run_config=dict(self.xdp_run_config))



class ExceptionCallbackError(Exception):
    """Why a program's exception callback cannot be found: Linux's log line, errno."""

    def __init__(self, message: str, err: int) -> None:
        super().__init__(message)
        self.message = message
        self.errno = err


EXCEPTION_CB_TAG = "exception_callback:"


def exception_callback(spec: ProgramSpec, btf: Btf | None) -> int:
    """Where ``spec``'s exception callback of its own starts (0: it has none), as
    ``bpf_find_exception_callback_insn_off`` (kernel/bpf/verifier.c, Linux 6.18)
    finds it: the ``exception_callback:NAME`` decl tag on the main function's BTF
    FUNC (what ``__exception_cb(NAME)`` puts there), the global FUNC ``NAME`` and
    the func_info entry of that FUNC. Raises :class:`ExceptionCallbackError` with
    the kernel's line where it refuses the program."""
    if not spec.func_info or btf is None:
        return 0
    main = spec.func_info[0].type_id
    if not 0 < main < len(btf.types):
        raise ExceptionCallbackError("invalid btf id for main subprog in func_info",
                                     errno.EINVAL)
    names = [t.name[len(EXCEPTION_CB_TAG):] for t in btf.types
             if t.kind is BtfKind.DECL_TAG and (t.size_type, t.component_idx) == (main, -1)
             and t.name.startswith(EXCEPTION_CB_TAG)]
    if not names:
        return 0
    if len(names) > 1:
        raise ExceptionCallbackError("multiple exception callback tags for main subprog",
                                     errno.EEXIST)
    name = names[0]
    fid = btf.find(name, BtfKind.FUNC)
    if fid is None:
        raise ExceptionCallbackError(f"exception callback '{name}' could not be found in BTF",
                                     errno.ENOENT)
    if btf.type_by_id(fid).linkage != BTF_FUNC_GLOBAL:
        raise ExceptionCallbackError(f"exception callback '{name}' must have global linkage",
                                     errno.EINVAL)
    start = 0
    for fi in spec.func_info:  # the last entry of the FUNC counts, as the kernel's loop
        if fi.type_id == fid:
            start = fi.insn_off if fi.insn_off else -1
    if start < 0:
        raise ExceptionCallbackError("invalid exception callback insn_off in func_info: 0",
                                     errno.EINVAL)
    if not start:
        raise ExceptionCallbackError("exception callback type id not found in func_info",
                                     errno.EINVAL)
    return start
