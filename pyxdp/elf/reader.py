"""ELF object + BTF -> :class:`~pyxdp.spec.CollectionSpec`, the way libbpf opens an object.

This follows libbpf's ``bpf_object__open`` pipeline (``libbpf.c``) step by
step, without any kernel call:

* ``bpf_object__elf_collect``: classify sections (``license``, ``version``,
  legacy ``maps``, BTF-defined ``.maps``, ``.BTF``/``.BTF.ext``, executable
  program sections, ``.data*``/``.rodata*``/``.bss*`` global data, ``.rel*``);
* ``bpf_object__add_programs``: every ``STT_FUNC`` symbol of an executable
  section is a function; functions in ``.text`` are subprograms, the others
  entry programs whose type comes from the section name (``section_defs``);
* ``bpf_object_fixup_btf``: clang leaves DATASEC sizes and variable offsets
  zero, they are filled in from the ELF sections and symbols;
* ``bpf_object__init_maps``: BTF-defined maps (``parse_btf_map_def``), global
  data maps (``bpf_object__init_internal_map``) and, like libbpf before 1.0,
  legacy ``struct bpf_map_def`` maps;
* ``bpf_object__collect_relos``: program relocations (``R_BPF_64_64`` on
  ``ld_imm64`` against maps and data, ``R_BPF_64_32`` on calls into ``.text``)
  and ``.rel.maps`` initialisers of prog arrays and map-in-maps;
* ``bpf_object__relocate``: used ``.text`` subprograms are appended after
  each entry program in depth-first order of first use, call and
  ``BPF_PSEUDO_FUNC`` offsets are rewritten, ``.BTF.ext`` func/line info is
  moved to the linked layout; map references become symbolic
  :class:`~pyxdp.spec.MapRef` entries.

Every program of the object is parsed, whatever its type (the section name
read as libbpf 1.x reads it, :mod:`pyxdp.elf.sections`); kfunc calls and
CO-RE relocations are kept in the :class:`~pyxdp.spec.ProgramSpec` and
resolved at load. Malformed input raises :class:`ObjectError`; valid features
pyxdp does not provide (extern variables, arena maps) raise
:class:`NotSupportedError`.
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass, field, replace
from typing import Literal

from pyxdp import samples
from pyxdp.args import short
from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction, decode
from pyxdp.btf.btf import (
    BTF_FUNC_GLOBAL,
    BTF_FUNC_STATIC,
    BTF_VAR_GLOBAL_ALLOCATED,
    BTF_VAR_GLOBAL_EXTERN,
    BTF_VAR_STATIC,
    Btf,
    BtfKind,
    BtfType,
    BtfVarSecinfo,
)
from pyxdp.btf.ext import BtfExt
from pyxdp.elf import elfio
from pyxdp.elf.elfio import ElfImage, ElfRel, ElfSection, ElfSymbol
from pyxdp.elf.kconfig import kconfig_layout, resolve_kconfig
from pyxdp.elf.sections import find_sec_def, prog_type_name
from pyxdp.errors import BadArgument, InvalidProgram, NotSupportedError, ObjectError
from pyxdp.spec import (
    BPF_F_RDONLY_PROG,
    XDP_DEFAULT_CHAIN_CALL_ACTIONS,
    XDP_DEFAULT_RUN_PRIO,
    CollectionSpec,
    CoreRelocation,
    FuncInfo,
    FunctionSpan,
    InnerMapRef,
    KfuncRef,
    LineInfo,
    MapRef,
    MapSpec,
    MapValue,
    ProgramRef,
    ProgramSpec,
    XdpRunConfig,
    ringbuf_size,
)
from pyxdp.uapi.bpf import BpfProgType

__all__ = ["internal_map_name", "load_collection_spec", "object_name", "program_type"]

# ELF relocation types of the BPF backend (llvm BPFELFObjectWriter).
R_BPF_NONE = 0
R_BPF_64_64 = 1
R_BPF_64_ABS64 = 2
R_BPF_64_32 = 10
SHT_LLVM_ADDRSIG = 0x6FFF4C03

BPF_OBJ_NAME_LEN = 16
# The kernel refuses array values larger than KMALLOC_MAX_SIZE (4 MiB), so a
# larger data section can never become a map; checked before .bss zeros are
# materialised so a damaged size cannot exhaust memory.
MAX_DATA_SECTION = 1 << 22
BPF_F_MMAPABLE = 1 << 10

BPF_MAP_TYPE_ARRAY = 2
BPF_MAP_TYPE_PROG_ARRAY = 3
BPF_MAP_TYPE_ARRAY_OF_MAPS = 12
BPF_MAP_TYPE_HASH_OF_MAPS = 13
BPF_MAP_TYPE_RINGBUF = 27
BPF_MAP_TYPE_USER_RINGBUF = 31
BPF_MAP_TYPE_ARENA = 33
_MAP_IN_MAP = (BPF_MAP_TYPE_ARRAY_OF_MAPS, BPF_MAP_TYPE_HASH_OF_MAPS)

LIBBPF_PIN_NONE = 0
LIBBPF_PIN_BY_NAME = 1

# libxdp's xdp_action_names: member names of XDP_RUN_CONFIG, index = action.
_XDP_ACTIONS = ("XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX", "XDP_REDIRECT")
_XDP_RUN_CONFIG_SEC = ".xdp_run_config"

_LEGACY_MAP_DEF = struct.Struct("<IIIII")  # struct bpf_map_def
# samples/bpf's bpf_load.c layout: bpf_map_def + inner_map_idx + numa_node.
_LEGACY_MAP_DEF_EXT = struct.Struct("<IIIIIII")


def object_name(path: str) -> str:
    """libbpf's object name: the file's base name up to its first dot, 15 chars max."""
    base = os.path.basename(path)[:BPF_OBJ_NAME_LEN - 1]
    return base.split(".", 1)[0]


def internal_map_name(obj_name: str, section: str) -> str:
    """libbpf's ``internal_map_name``: the kernel name of a global data map.

    As much of the object name as fits before the section name, with at
    least 7 characters reserved for the suffix (``my_objec.rodata``,
    ``my_objec.bss``); ``.data.foo``-style custom sections use their own
    name only; everything is cut to 15 characters and characters the kernel
    refuses become ``_``.
    """
    sfx_len = min(max(7, len(section)), BPF_OBJ_NAME_LEN - 1)
    if "." in section[1:]:
        pfx_len = 0
    else:
        pfx_len = min(BPF_OBJ_NAME_LEN - sfx_len - 1, len(obj_name))
    name = (obj_name[:pfx_len] + section[:sfx_len])[:BPF_OBJ_NAME_LEN - 1]
    return "".join(c if (c.isascii() and c.isalnum()) or c in "_." else "_" for c in name)


def program_type(section: str) -> tuple[int, int] | None:
    """(expected_attach_type, prog_flags) of an XDP section name, ``None`` if not XDP.

    Read as libbpf 1.x reads it (:func:`pyxdp.elf.sections.find_sec_def`).
    """
    d = find_sec_def(section)
    if d is None or d.prog_type != BpfProgType.BPF_PROG_TYPE_XDP:
        return None
    return d.attach_type, d.prog_flags


@dataclass(slots=True)
class _Reloc:
    """One recorded program relocation (libbpf's ``struct reloc_desc``)."""

    kind: Literal["call", "func_addr", "map_fd", "map_value", "kfunc"]
    sym_name: str
    sym_off: int = 0  # byte offset of the symbol in its section
    map_name: str = ""
    offset: int = 0  # value offset for map_value


@dataclass(slots=True)
class _Function:
    """One STT_FUNC symbol of an executable section (libbpf's ``struct bpf_program``)."""

    name: str
    sec: ElfSection
    sec_insn_off: int
    insns: tuple[Instruction, ...]
    sym: ElfSymbol
    relocs: dict[int, _Reloc] = field(default_factory=dict)

    @property
    def is_subprog(self) -> bool:
        return self.sec.name == ".text"


@dataclass(slots=True)
class _MapDef:
    """A map being built, with where it lives in the object (for relocations)."""

    spec: MapSpec
    sec_index: int
    sec_offset: int
    var_size: int = 0
    var_type: int = 0
    slots: dict[int, MapValue] = field(default_factory=dict)


#: The largest object file read (clang's objects are kilobytes; BTF for all of vmlinux
#: is a few MiB): past it a path is an endless or wrong file, refused in one line.
MAX_OBJECT_SIZE = 64 << 20


def load_collection_spec(source: str | os.PathLike[str] | bytes | bytearray | memoryview,
                         *, name: str | None = None, kconfig: str | None = None
                         ) -> CollectionSpec:
    """Parse an eBPF ELF object file (a path, or its bytes) into a CollectionSpec.

    ``name`` overrides the libbpf object name used for global data map kernel
    names (default: the file name up to its first dot; empty for bytes).
    ``kconfig`` is Kconfig text (``CONFIG_X=y`` lines) for the object's
    ``__kconfig`` externs, read before the system's, as libbpf's ``kconfig``
    option (:mod:`pyxdp.elf.kconfig`).
    """
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        path = ""
    elif not isinstance(source, str | os.PathLike):  # an int is a descriptor to os.path
        raise BadArgument(f"load_collection_spec: source must be a path or the object's "
                          f"bytes, not {short(source)}")
    else:
        # ``samples/NAME.o`` finds the shipped sample from any directory (pyxdp.samples).
        path = os.fspath(samples.resolve(source))
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_OBJECT_SIZE + 1)  # /dev/zero ends here, not in MemoryError
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
            why = getattr(exc, "strerror", None) or exc
            raise ObjectError(f"cannot read object file: {why}", path=path) from None
        if len(data) > MAX_OBJECT_SIZE:
            raise ObjectError(f"larger than {MAX_OBJECT_SIZE >> 20} MiB: not an object file",
                              path=path)
    obj = name if name is not None else (object_name(path) if path else "")
    try:
        if kconfig is not None and not isinstance(kconfig, str):
            raise TypeError(f"kconfig must be Kconfig text (a str), not {type(kconfig).__name__}")
        return _Loader(data, path, obj, kconfig).load()
    except RecursionError:
        raise ObjectError("object nests too deeply to parse", path=path) from None


class _Loader:
    def __init__(self, data: bytes, path: str, obj_name: str,
                 kconfig: str | None = None) -> None:
        self.path = path
        self.kconfig = kconfig
        self.kconfig_offsets: dict[str, int] = {}
        self.obj_name = obj_name
        self.img: ElfImage = elfio.open_elf(data, path)
        self.license = ""
        self.kern_version = 0
        self.btf: Btf | None = None
        self.ext: BtfExt | None = None
        self.text: ElfSection | None = None
        self.prog_secs: list[ElfSection] = []
        self.data_secs: list[ElfSection] = []
        self.rel_secs: list[ElfSection] = []
        self.btf_maps_sec: ElfSection | None = None
        self.legacy_maps_sec: ElfSection | None = None
        self.btf_sec: ElfSection | None = None
        self.ext_sec: ElfSection | None = None
        self.functions: list[_Function] = []
        self.by_section: dict[int, list[_Function]] = {}
        self.starts: dict[int, list[int]] = {}  # sorted sec_insn_off per section
        self.maps: dict[str, _MapDef] = {}

    def error(self, message: str, section: str | ElfSection = "") -> ObjectError:
        return self.img.error(message, section)

    # -- pipeline ------------------------------------------------------------

    def load(self) -> CollectionSpec:
        self._collect_sections()
        self._init_btf()
        self._collect_functions()
        self._fixup_btf()
        self._init_legacy_maps()
        self._init_btf_maps()
        self._init_data_maps()
        self._init_kconfig_map()
        self._collect_relocations()
        programs = {}
        for fn in self.functions:
            if not fn.is_subprog:
                programs[fn.name] = self._link(fn)
        maps = {}
        for name, md in self.maps.items():
            spec = md.spec
            if md.slots:
                contents = tuple((struct.pack("<I", slot), ref)
                                 for slot, ref in sorted(md.slots.items()))
                spec = replace(spec, contents=contents)
            maps[name] = spec
        return CollectionSpec(programs=programs, maps=maps, btf=self.btf, license=self.license,
                              kern_version=self.kern_version,
                              xdp_run_config=self._xdp_run_config(programs),
                              name=self.obj_name)

    # -- sections ------------------------------------------------------------

    def _collect_sections(self) -> None:
        img = self.img
        for sec in img.sections[1:]:
            name = sec.name
            if _ignored_section(sec):
                continue
            if name == "license":
                raw = img.section_data(sec)
                # libbpf keeps at most 63 bytes, up to the first NUL.
                self.license = raw.split(b"\0", 1)[0][:63].decode("utf-8", "replace")
            elif name == "version":
                raw = img.section_data(sec)
                if len(raw) != 4:
                    raise self.error(f"kernel version section is {len(raw)} bytes, not 4", sec)
                (self.kern_version,) = struct.unpack("<I", raw)
            elif name == "maps":
                self.legacy_maps_sec = sec
            elif name == ".maps":
                self.btf_maps_sec = sec
            elif name == ".BTF":
                if sec.type != elfio.SHT_PROGBITS:
                    raise self.error("BTF section is not SHT_PROGBITS", sec)
                self.btf_sec = sec
            elif name == ".BTF.ext":
                if sec.type != elfio.SHT_PROGBITS:
                    raise self.error("BTF.ext section is not SHT_PROGBITS", sec)
                self.ext_sec = sec
            elif sec.type == elfio.SHT_SYMTAB:
                continue
            elif sec.type == elfio.SHT_PROGBITS and sec.size > 0:
                if sec.flags & elfio.SHF_EXECINSTR:
                    if name == ".text":
                        self.text = sec
                    self.prog_secs.append(sec)
                elif _is_data_section(name):
                    self.data_secs.append(sec)
                elif name.startswith(".addr_space."):
                    raise NotSupportedError(
                        f"arena global variables (section {name!r} in "
                        f"{self.path or '<bytes>'}) are not supported")
                # Anything else (.xdp_run_config, xdp_metadata, ...) carries
                # metadata only; libbpf skips it too.
            elif sec.type == elfio.SHT_REL:
                target = img.section(sec.info)
                if target is None:
                    raise self.error(f"relocation section targets section {sec.info}, "
                                     f"which does not exist", sec)
                if target.flags & elfio.SHF_EXECINSTR or target.name == ".maps":
                    self.rel_secs.append(sec)
            elif sec.type == elfio.SHT_NOBITS and (name == ".bss" or name.startswith(".bss.")):
                if sec.size:
                    self.data_secs.append(sec)
        if img.symtab is None:
            raise self.error("no symbol table (stripped object?)")

    def _init_btf(self) -> None:
        # libbpf carries on without BTF it cannot parse when nothing needs
        # it; pyxdp reports it, since line info and map types come from it.
        if self.btf_sec is not None:
            self.btf = Btf.parse(self.img.section_data(self.btf_sec), path=self.path,
                                 section=".BTF")
            if self.ext_sec is not None:
                self.ext = BtfExt.parse(self.img.section_data(self.ext_sec), self.btf,
                                        path=self.path, section=".BTF.ext")

    # -- functions -------------------------------------------------------------

    def _collect_functions(self) -> None:
        img = self.img
        prog_indices = {s.index for s in self.prog_secs}
        seen: set[str] = set()
        per_sec: dict[int, list[_Function]] = {}
        for sym in img.symbols:
            if sym.type != elfio.STT_FUNC or sym.shndx not in prog_indices:
                continue
            sec = img.sections[sym.shndx]
            label = sym.name or f"<symbol {sym.index}>"
            if sym.value % 8 or sym.size % 8 or sym.size == 0:
                raise self.error(f"function {label!r} at offset {sym.value} size {sym.size} "
                                 f"is not a whole number of instructions", sec)
            if sym.value + sym.size > sec.size:
                raise self.error(f"function {label!r} crosses the end of its section", sec)
            if not sym.name:
                raise self.error(f"function symbol {sym.index} has no name", sec)
            if sym.name in seen:
                raise self.error(f"two functions named {sym.name!r}", sec)
            seen.add(sym.name)
            raw = img.section_data(sec)[sym.value:sym.value + sym.size]
            try:
                insns = decode(raw)
            except InvalidProgram as exc:
                raise self.error(f"function {sym.name!r}: {exc}", sec) from None
            fn = _Function(name=sym.name, sec=sec, sec_insn_off=sym.value // 8, insns=insns,
                           sym=sym)
            per_sec.setdefault(sec.index, []).append(fn)
        for sec in self.prog_secs:
            fns = sorted(per_sec.get(sec.index, []), key=lambda f: f.sec_insn_off)
            for a, b in zip(fns, fns[1:], strict=False):
                if a.sec_insn_off + len(a.insns) > b.sec_insn_off:
                    raise self.error(f"functions {a.name!r} and {b.name!r} overlap", sec)
            self.by_section[sec.index] = fns
            self.starts[sec.index] = [f.sec_insn_off for f in fns]
            self.functions.extend(fns)

    def _function_at(self, sec_index: int, insn_idx: int) -> _Function | None:
        """The function of section ``sec_index`` containing slot ``insn_idx``."""
        fns = self.by_section.get(sec_index, [])
        i = bisect.bisect_right(self.starts.get(sec_index, []), insn_idx) - 1
        if i >= 0 and insn_idx < fns[i].sec_insn_off + len(fns[i].insns):
            return fns[i]
        return None

    # -- BTF fixups ------------------------------------------------------------

    def _fixup_btf(self) -> None:
        """libbpf's ``btf_fixup_datasec`` and hidden-function marking, on a copy."""
        btf = self.btf
        if btf is None:
            return
        img = self.img
        sections = {s.name: s for s in img.sections[1:]}
        var_syms: dict[str, ElfSymbol] = {}
        for sym in img.symbols:
            if (sym.type == elfio.STT_OBJECT and sym.bind in (elfio.STB_GLOBAL, elfio.STB_WEAK)
                    and sym.name and sym.name not in var_syms):
                var_syms[sym.name] = sym
        changed: dict[int, BtfType] = {}
        for t in btf.types[1:]:
            if t.kind is not BtfKind.DATASEC:
                continue
            secinfos = list(t.secinfos)
            size = t.size_type
            # Extern-backing datasecs are laid out by the loader, not the compiler.
            if t.name not in (".kconfig", ".ksyms"):
                fix_offsets = False
                if size == 0:
                    sec = sections.get(t.name)
                    if sec is None or sec.size == 0:
                        raise self.error(f"BTF DATASEC {t.name!r} has no matching ELF "
                                         f"section to take its size from", ".BTF")
                    if sec.size > 0xFFFF_FFFF:
                        raise self.error(f"section size {sec.size} does not fit BTF", sec)
                    size = sec.size
                    fix_offsets = True
                for i, vsi in enumerate(secinfos):
                    var = btf.types[vsi.type]
                    if var.kind is not BtfKind.VAR:
                        raise self.error(f"BTF DATASEC {t.name!r} holds a {var.kind.name}",
                                         ".BTF")
                    if var.linkage in (BTF_VAR_STATIC, BTF_VAR_GLOBAL_EXTERN):
                        continue
                    vsym = var_syms.get(var.name)
                    if vsym is None:
                        raise self.error(f"no ELF symbol for BTF variable {var.name!r} of "
                                         f"DATASEC {t.name!r}", ".BTF")
                    if fix_offsets:
                        if vsym.value > 0xFFFF_FFFF:
                            raise self.error(f"symbol {vsym.name!r} offset out of range",
                                             ".BTF")
                        secinfos[i] = BtfVarSecinfo(vsi.type, vsym.value, vsi.size)
                    # A hidden global behaves as static for the verifier and
                    # for mmap-ability, exactly as libbpf marks it.
                    if vsym.visibility in (elfio.STV_HIDDEN, elfio.STV_INTERNAL):
                        changed[var.id] = replace(changed.get(var.id, var),
                                                  linkage=BTF_VAR_STATIC)
            secinfos.sort(key=lambda s: s.offset)
            if size != t.size_type or tuple(secinfos) != t.secinfos:
                changed[t.id] = replace(t, size_type=size, secinfos=tuple(secinfos))
        # Global but hidden .text functions are verified as static functions.
        hidden = {f.name for f in self.functions
                  if f.is_subprog and f.sym.bind != elfio.STB_LOCAL
                  and f.sym.visibility in (elfio.STV_HIDDEN, elfio.STV_INTERNAL)}
        if hidden:
            for t in btf.types[1:]:
                if t.kind is BtfKind.FUNC and t.linkage == BTF_FUNC_GLOBAL and t.name in hidden:
                    changed[t.id] = replace(t, linkage=BTF_FUNC_STATIC, vlen=BTF_FUNC_STATIC)
                    hidden.discard(t.name)
        if changed:
            self.btf = btf.with_types(changed)

    # -- maps ------------------------------------------------------------------

    def _add_map(self, md: _MapDef, sec: ElfSection) -> None:
        name = md.spec.name
        if name in self.maps:
            raise self.error(f"two maps named {name!r}", sec)
        if md.spec.type == BPF_MAP_TYPE_ARENA:
            raise NotSupportedError(f"arena map {name!r} (BPF_MAP_TYPE_ARENA) is not supported")
        self.maps[name] = md

    def _init_legacy_maps(self) -> None:
        """Pre-BTF ``SEC("maps") struct bpf_map_def`` maps (libbpf < 1.0)."""
        sec = self.legacy_maps_sec
        if sec is None:
            return
        raw = self.img.section_data(sec)
        syms = sorted((s for s in self.img.symbols
                       if s.shndx == sec.index and s.type in (elfio.STT_OBJECT,
                                                              elfio.STT_NOTYPE)),
                      key=lambda s: (s.value, s.index))
        if not syms:
            return
        if len(raw) % len(syms):
            raise self.error(f"{len(raw)} bytes do not split into {len(syms)} equal map "
                             f"definitions", sec)
        def_sz = len(raw) // len(syms)
        if def_sz < 4 * 4:
            raise self.error(f"map definitions of {def_sz} bytes are too small", sec)
        defs: list[tuple[ElfSymbol, tuple[int, ...]]] = []
        for sym in syms:
            if not sym.name:
                raise self.error(f"map symbol {sym.index} has no name", sec)
            if sym.value + def_sz > len(raw):
                raise self.error(f"map {sym.name!r} definition runs past the section end", sec)
            chunk = raw[sym.value:sym.value + def_sz]
            if def_sz == _LEGACY_MAP_DEF_EXT.size:
                fields = _LEGACY_MAP_DEF_EXT.unpack(chunk)
            else:
                base = chunk[:_LEGACY_MAP_DEF.size].ljust(_LEGACY_MAP_DEF.size, b"\0")
                if any(chunk[_LEGACY_MAP_DEF.size:]):
                    raise NotSupportedError(
                        f"legacy map {sym.name!r}: {def_sz}-byte definition has fields "
                        f"beyond struct bpf_map_def that pyxdp does not know")
                fields = _LEGACY_MAP_DEF.unpack(base) + (0, 0)
            defs.append((sym, fields))
        specs: list[MapSpec] = []
        for sym, (mtype, ksz, vsz, maxe, flags, _inner_idx, numa) in defs:
            key_type, value_type = self._legacy_btf_types(sym.name)
            specs.append(MapSpec(name=sym.name, type=mtype, key_size=ksz, value_size=vsz,
                                 max_entries=_max_entries(mtype, maxe), flags=flags,
                                 numa_node=numa,
                                 key_type=key_type, value_type=value_type, section="maps",
                                 kernel_name=sym.name[:BPF_OBJ_NAME_LEN - 1]))
        for i, (sym, fields) in enumerate(defs):
            spec = specs[i]
            inner_idx = fields[5]
            # samples/bpf convention: inner_map_idx names the template map for
            # a map-in-map by its position in the section.
            if spec.type in _MAP_IN_MAP and def_sz == _LEGACY_MAP_DEF_EXT.size:
                if inner_idx >= len(specs) or inner_idx == i:
                    raise self.error(f"map {sym.name!r}: inner_map_idx {inner_idx} does not "
                                     f"name another map", sec)
                spec = replace(spec, inner=specs[inner_idx])
            self._add_map(_MapDef(spec=spec, sec_index=sec.index, sec_offset=sym.value), sec)

    def _legacy_btf_types(self, name: str) -> tuple[int | None, int | None]:
        """libbpf 0.x looked up ``struct ____btf_map_<name> {key; value;}`` for types."""
        if self.btf is None:
            return None, None
        tid = self.btf.find(f"____btf_map_{name}", BtfKind.STRUCT)
        if tid is None:
            return None, None
        members = {m.name: m.type for m in self.btf.types[tid].members}
        return members.get("key"), members.get("value")

    def _init_btf_maps(self) -> None:
        sec = self.btf_maps_sec
        if sec is None:
            return
        btf = self.btf
        if btf is None:
            raise self.error("BTF-defined maps need a .BTF section", sec)
        dsid = btf.find(".maps", BtfKind.DATASEC)
        if dsid is None:
            raise self.error("no BTF DATASEC '.maps' describes the map definitions", sec)
        for vsi in btf.types[dsid].secinfos:
            var = btf.types[vsi.type]
            if not var.name:
                raise self.error("BTF-defined map with an empty name", sec)
            if vsi.offset + vsi.size > sec.size:
                raise self.error(f"map {var.name!r} BTF data lies outside the section", sec)
            if var.kind is not BtfKind.VAR:
                raise self.error(f"map {var.name!r} is a BTF {var.kind.name}, not a VAR", sec)
            if var.linkage != BTF_VAR_GLOBAL_ALLOCATED:
                raise NotSupportedError(f"map {var.name!r}: static (non-global) map "
                                        f"definitions are not supported, as in libbpf")
            def_t = btf.resolved(var.size_type)
            if def_t.kind is not BtfKind.STRUCT:
                raise self.error(f"map {var.name!r} is a {def_t.kind.name}, not a struct", sec)
            if def_t.size_type > vsi.size:
                raise self.error(f"map {var.name!r} definition is larger than its variable",
                                 sec)
            spec = self._parse_btf_map_def(var.name, def_t, sec, inner=False)
            self._add_map(_MapDef(spec=spec, sec_index=sec.index, sec_offset=vsi.offset,
                                  var_size=vsi.size, var_type=var.size_type), sec)

    def _parse_btf_map_def(self, name: str, def_t: BtfType, sec: ElfSection,
                           *, inner: bool) -> MapSpec:
        """libbpf's ``parse_btf_map_def``: decode the __uint/__type/__array members."""
        btf = self.btf
        assert btf is not None

        def field_int(member_type: int, what: str) -> int:
            # __uint(name, val) is `int (*name)[val]`: a pointer to an array
            # whose element count is the value.
            ptr = btf.resolved(member_type)
            if ptr.kind is not BtfKind.PTR:
                raise self.error(f"map {name!r}: attribute {what!r} is a {ptr.kind.name}, "
                                 f"not a pointer", sec)
            arr = btf.type_by_id(ptr.size_type)
            if arr.kind is not BtfKind.ARRAY or arr.array is None:
                raise self.error(f"map {name!r}: attribute {what!r} does not point to an "
                                 f"array", sec)
            return arr.array.nelems

        def pointee_size(member_type: int, what: str) -> tuple[int, int]:
            # __type(name, T) is `T *name`: the size comes from T.
            ptr = btf.type_by_id(member_type)
            if ptr.kind is not BtfKind.PTR:
                raise self.error(f"map {name!r}: {what} spec is a {ptr.kind.name}, not a "
                                 f"pointer", sec)
            try:
                return btf.resolve_size(ptr.size_type), ptr.size_type
            except ObjectError as exc:
                raise self.error(f"map {name!r}: cannot size the {what} type: {exc.reason}",
                                 sec) from None

        mtype = key_size = value_size = max_entries = flags = numa = pinning = extra = 0
        key_type: int | None = None
        value_type: int | None = None
        inner_spec: MapSpec | None = None
        members = def_t.members
        for i, m in enumerate(members):
            if m.name in ("type", "max_entries", "map_flags", "numa_node", "pinning",
                          "map_extra"):
                v = field_int(m.type, m.name)
                if m.name == "type":
                    mtype = v
                elif m.name == "max_entries":
                    max_entries = v
                elif m.name == "map_flags":
                    flags = v
                elif m.name == "numa_node":
                    numa = v
                elif m.name == "map_extra":
                    extra = v
                else:
                    if inner:
                        raise self.error(f"map {name!r}: an inner map cannot be pinned", sec)
                    if v not in (LIBBPF_PIN_NONE, LIBBPF_PIN_BY_NAME):
                        raise self.error(f"map {name!r}: invalid pinning value {v}", sec)
                    pinning = v
            elif m.name in ("key_size", "value_size"):
                v = field_int(m.type, m.name)
                current = key_size if m.name == "key_size" else value_size
                if current and current != v:
                    raise self.error(f"map {name!r}: conflicting {m.name} {current} != {v}",
                                     sec)
                if m.name == "key_size":
                    key_size = v
                else:
                    value_size = v
            elif m.name in ("key", "value"):
                size, tid = pointee_size(m.type, m.name)
                current = key_size if m.name == "key" else value_size
                if current and current != size:
                    raise self.error(f"map {name!r}: conflicting {m.name} size {current} != "
                                     f"{size}", sec)
                if m.name == "key":
                    key_size, key_type = size, tid
                else:
                    value_size, value_type = size, tid
            elif m.name == "values":
                is_mim = mtype in _MAP_IN_MAP
                is_prog_array = mtype == BPF_MAP_TYPE_PROG_ARRAY
                if inner:
                    raise NotSupportedError(f"map {name!r}: multi-level inner maps are not "
                                            f"supported")
                if i != len(members) - 1:
                    raise self.error(f"map {name!r}: 'values' must be the last member", sec)
                if not (is_mim or is_prog_array):
                    raise self.error(f"map {name!r}: 'values' needs a map-in-map or prog "
                                     f"array type", sec)
                if value_size and value_size != 4:
                    raise self.error(f"map {name!r}: conflicting value size {value_size} "
                                     f"!= 4", sec)
                value_size = 4
                arr = btf.type_by_id(m.type)
                if arr.kind is not BtfKind.ARRAY or arr.array is None or arr.array.nelems:
                    raise self.error(f"map {name!r}: 'values' is not a zero-sized array", sec)
                ptr = btf.resolved(arr.array.type)
                if ptr.kind is not BtfKind.PTR:
                    raise self.error(f"map {name!r}: 'values' elements are not pointers", sec)
                target = btf.resolved(ptr.size_type)
                if is_prog_array:
                    if target.kind is not BtfKind.FUNC_PROTO:
                        raise self.error(f"map {name!r}: prog array 'values' do not point "
                                         f"to functions", sec)
                    continue
                if target.kind is not BtfKind.STRUCT:
                    raise self.error(f"map {name!r}: inner map definition is a "
                                     f"{target.kind.name}, not a struct", sec)
                inner_spec = self._parse_btf_map_def(f"{name}.inner", target, sec, inner=True)
            else:
                raise NotSupportedError(f"map {name!r}: unknown map definition field "
                                        f"{m.name!r}")
        if mtype == 0:
            raise self.error(f"map {name!r}: map type is not specified", sec)
        return MapSpec(name=name, type=mtype, key_size=key_size, value_size=value_size,
                       max_entries=_max_entries(mtype, max_entries), flags=flags,
                       pinning=pinning,
                       key_type=key_type, value_type=value_type, inner=inner_spec,
                       section=".maps", numa_node=numa, map_extra=extra,
                       kernel_name=name[:BPF_OBJ_NAME_LEN - 1])

    def _init_data_maps(self) -> None:
        """One single-entry array per non-empty ``.data*``/``.rodata*``/``.bss*`` section."""
        for sec in self.data_secs:
            if sec.size > MAX_DATA_SECTION:
                raise self.error(f"{sec.size}-byte data section is larger than a BPF array "
                                 f"value can be ({MAX_DATA_SECTION} bytes)", sec)
            rodata = sec.name == ".rodata" or sec.name.startswith(".rodata.")
            value = b"\0" * sec.size if sec.type == elfio.SHT_NOBITS else \
                self.img.section_data(sec)
            value_type = None
            mmapable = False
            if self.btf is not None:
                value_type = self.btf.find(sec.name, BtfKind.DATASEC)
                if value_type is not None:
                    # libbpf's map_is_mmapable: some variable is visible to
                    # user space (global and not hidden).
                    mmapable = any(
                        self.btf.types[v.type].kind is BtfKind.VAR
                        and self.btf.types[v.type].linkage != BTF_VAR_STATIC
                        for v in self.btf.types[value_type].secinfos)
            flags = (BPF_F_RDONLY_PROG if rodata else 0) | (BPF_F_MMAPABLE if mmapable else 0)
            spec = MapSpec(name=sec.name, type=BPF_MAP_TYPE_ARRAY, key_size=4,
                           value_size=sec.size, max_entries=1, flags=flags,
                           value_type=value_type, contents=((b"\0\0\0\0", value),),
                           frozen=rodata, section=sec.name,
                           kernel_name=internal_map_name(self.obj_name, sec.name))
            self._add_map(_MapDef(spec=spec, sec_index=sec.index, sec_offset=0), sec)

    def _init_kconfig_map(self) -> None:
        """libbpf's kconfig externs: laid out and resolved into a frozen ``.kconfig``
        array (``bpf_object__init_kconfig_map``); BTF's DATASEC gets their offsets."""
        btf = self.btf
        sec_id = btf.find(".kconfig", BtfKind.DATASEC) if btf is not None else None
        if btf is None or sec_id is None:
            return
        dsec = btf.types[sec_id]
        weak = {s.name: s.bind == elfio.STB_WEAK for s in self.img.symbols
                if s.shndx == elfio.SHN_UNDEF and s.name}
        externs: dict[str, tuple[int, bool]] = {}
        for vsi in dsec.secinfos:
            var = btf.types[vsi.type]
            if var.kind is not BtfKind.VAR or var.name not in weak:
                raise self.error(f"BTF DATASEC '.kconfig' entry {var.name!r} is not an extern "
                                 f"variable of the object", ".BTF")
            externs[var.name] = (var.type, weak[var.name])
        layout, size = kconfig_layout(btf, externs)
        if not layout:
            return
        if size > 0x7FFF_FFFF:  # array_map_alloc_check: a value above INT_MAX is E2BIG
            raise self.error(f"'.kconfig' externs take {size} bytes: E2BIG (an array map's "
                             f"value is at most INT_MAX bytes)", ".BTF")
        try:
            value = resolve_kconfig(layout, size, self.kconfig)
        except ObjectError as e:
            raise ObjectError(e.reason, path=self.path) from None
        at = {e.name: e for e in layout}
        changed: dict[int, BtfType] = {}
        secinfos = []
        for vsi in dsec.secinfos:
            var = btf.types[vsi.type]
            secinfos.append(BtfVarSecinfo(vsi.type, at[var.name].offset, at[var.name].size))
            changed[var.id] = replace(var, linkage=BTF_VAR_GLOBAL_ALLOCATED)
        secinfos.sort(key=lambda v: v.offset)
        changed[sec_id] = replace(dsec, size_type=size, secinfos=tuple(secinfos))
        self.btf = btf.with_types(changed)
        self.kconfig_offsets = {e.name: e.offset for e in layout}
        spec = MapSpec(name=".kconfig", type=BPF_MAP_TYPE_ARRAY, key_size=4, value_size=size,
                       max_entries=1, flags=BPF_F_RDONLY_PROG | BPF_F_MMAPABLE,
                       value_type=sec_id, contents=((b"\0\0\0\0", value),), frozen=True,
                       section=".kconfig",
                       kernel_name=internal_map_name(self.obj_name, ".kconfig"))
        self.maps[".kconfig"] = _MapDef(spec=spec, sec_index=-1, sec_offset=0)

    # -- relocations -------------------------------------------------------------

    def _symbol(self, index: int, rel_sec: ElfSection) -> ElfSymbol:
        syms = self.img.symbols
        if not 0 <= index < len(syms):
            raise self.error(f"relocation names symbol {index}, which does not exist",
                             rel_sec)
        sym = syms[index]
        if sym.shndx >= len(self.img.sections) and sym.shndx < elfio.SHN_LORESERVE:
            raise self.error(f"symbol {sym.name!r} points to missing section {sym.shndx}",
                             rel_sec)
        return sym

    def _sym_name(self, sym: ElfSymbol) -> str:
        if sym.type == elfio.STT_SECTION and not sym.name:
            sec = self.img.section(sym.shndx)
            return sec.name if sec is not None else f"<section {sym.shndx}>"
        return sym.name or f"<symbol {sym.index}>"

    def _collect_relocations(self) -> None:
        for rel_sec in self.rel_secs:
            target = self.img.sections[rel_sec.info]
            rels = self.img.relocations(rel_sec)
            if target.name == ".maps":
                self._collect_map_relos(rel_sec, target, rels)
            else:
                self._collect_prog_relos(rel_sec, target, rels)

    def _collect_prog_relos(self, rel_sec: ElfSection, target: ElfSection,
                            rels: tuple[ElfRel, ...]) -> None:
        for rel in rels:
            sym = self._symbol(rel.sym, rel_sec)
            sym_name = self._sym_name(sym)
            if rel.type not in (R_BPF_64_64, R_BPF_64_32):
                raise self.error(f"unsupported relocation type {rel.type} against "
                                 f"{sym_name!r} at offset {rel.offset:#x}", rel_sec)
            if rel.offset % 8 or rel.offset >= target.size:
                raise self.error(f"relocation offset {rel.offset:#x} is not an instruction "
                                 f"of {target.name!r}", rel_sec)
            insn_idx = rel.offset // 8
            fn = self._function_at(target.index, insn_idx)
            if fn is None:
                continue  # code outside any function: nothing will ever load it
            local = insn_idx - fn.sec_insn_off
            insn = fn.insns[local]
            fn.relocs[local] = self._record_reloc(fn, local, insn, sym, sym_name, rel_sec)

    def _record_reloc(self, fn: _Function, local: int, insn: Instruction, sym: ElfSymbol,
                      sym_name: str, rel_sec: ElfSection) -> _Reloc:
        """libbpf's ``bpf_program__record_reloc``: what this relocation means."""
        is_call = insn.code == op.OP_CALL
        if not is_call and not insn.is_ld_imm64():
            raise self.error(f"function {fn.name!r}: relocation against {sym_name!r} on "
                             f"instruction {local} (opcode {insn.code:#04x}), which is neither "
                             f"ld_imm64 nor call", rel_sec)
        if (sym.shndx == elfio.SHN_UNDEF and sym.bind in (elfio.STB_GLOBAL, elfio.STB_WEAK)
                and sym.type == elfio.STT_NOTYPE):
            if is_call:
                if insn.src != op.CallSrc.BPF_PSEUDO_CALL:
                    raise self.error(f"function {fn.name!r}: call of kfunc {sym_name!r} at "
                                     f"{local} has src_reg {insn.src}, not 1", rel_sec)
                return _Reloc("kfunc", sym_name)
            if sym_name in self.kconfig_offsets:
                # RELO_EXTERN_LD64 of a kconfig extern: its slot, whatever the addend.
                return _Reloc("map_value", sym_name, map_name=".kconfig",
                              offset=self.kconfig_offsets[sym_name])
            raise NotSupportedError(f"extern variable {sym_name!r} (__ksym/__kconfig) used by "
                                    f"{fn.name!r} (section {fn.sec.name!r}) is not supported")
        if is_call:
            if insn.src != op.CallSrc.BPF_PSEUDO_CALL:
                raise self.error(f"function {fn.name!r}: relocated call at {local} is not a "
                                 f"BPF-to-BPF call (src_reg {insn.src})", rel_sec)
            if self.text is None or sym.shndx != self.text.index:
                where = self.img.section(sym.shndx)
                raise NotSupportedError(
                    f"function {fn.name!r} calls {sym_name!r} in section "
                    f"{where.name if where else sym.shndx!r}; only .text subprograms can be "
                    f"called (as in libbpf)")
            if sym.value % 8:
                raise self.error(f"call target {sym_name!r} is not instruction-aligned",
                                 rel_sec)
            return _Reloc("call", sym_name, sym_off=sym.value)
        if sym.shndx == elfio.SHN_UNDEF or sym.shndx >= elfio.SHN_LORESERVE:
            raise self.error(f"function {fn.name!r}: relocation against {sym_name!r} in "
                             f"special section {sym.shndx:#x} (uninitialised global?)",
                             rel_sec)
        if local + 1 >= len(fn.insns):
            raise self.error(f"function {fn.name!r}: ld_imm64 at {local} has no second slot",
                             rel_sec)
        if self.text is not None and sym.shndx == self.text.index:
            if sym.value % 8 or insn.imm % 8:
                raise self.error(f"function address of {sym_name!r} is not "
                                 f"instruction-aligned", rel_sec)
            return _Reloc("func_addr", sym_name, sym_off=sym.value)
        for md in self.maps.values():
            if md.sec_index != sym.shndx:
                continue
            if md.spec.section in (".maps", "maps"):
                if md.sec_offset == sym.value:
                    return _Reloc("map_fd", sym_name, map_name=md.spec.name)
                continue
            offset = insn.imm + sym.value
            if not 0 <= offset <= 0x7FFF_FFFF:
                raise self.error(f"function {fn.name!r}: offset {offset} into "
                                 f"{md.spec.name!r} does not fit an instruction", rel_sec)
            return _Reloc("map_value", sym_name, map_name=md.spec.name, offset=offset)
        where = self.img.section(sym.shndx)
        raise self.error(f"function {fn.name!r}: relocation against {sym_name!r} in section "
                         f"{where.name if where else sym.shndx!r} names no map or global data",
                         rel_sec)

    def _collect_map_relos(self, rel_sec: ElfSection, maps_sec: ElfSection,
                           rels: tuple[ElfRel, ...]) -> None:
        """libbpf's ``bpf_object__collect_map_relos``: ``values = {...}`` initialisers."""
        btf = self.btf
        if btf is None:
            raise self.error("map initialisers need BTF", rel_sec)
        programs = {f.name: f for f in self.functions if not f.is_subprog}
        for rel in rels:
            sym = self._symbol(rel.sym, rel_sec)
            sym_name = self._sym_name(sym)
            if rel.type not in (R_BPF_64_64, R_BPF_64_ABS64):
                raise self.error(f"unsupported relocation type {rel.type} against "
                                 f"{sym_name!r} at offset {rel.offset:#x}", rel_sec)
            owner = None
            for md in self.maps.values():
                if (md.sec_index == maps_sec.index and md.sec_offset <= rel.offset
                        and rel.offset + 8 <= md.sec_offset + md.var_size):
                    owner = md
                    break
            if owner is None:
                raise self.error(f"relocation at {rel.offset:#x} against {sym_name!r} lies in "
                                 f"no map definition", rel_sec)
            spec = owner.spec
            ref: MapValue
            if spec.type in _MAP_IN_MAP:
                if sym.shndx != maps_sec.index:
                    raise self.error(f"map {spec.name!r}: {sym_name!r} is not a BTF-defined "
                                     f"map", rel_sec)
                if spec.type == BPF_MAP_TYPE_HASH_OF_MAPS and spec.key_size != 4:
                    raise self.error(f"hash of maps {spec.name!r} with initial values must "
                                     f"have a 4-byte key", rel_sec)
                if sym.name not in self.maps:
                    raise self.error(f"map {spec.name!r}: {sym_name!r} is not a map", rel_sec)
                ref = InnerMapRef(sym.name)
            elif spec.type == BPF_MAP_TYPE_PROG_ARRAY:
                prog = programs.get(sym.name)
                if (prog is None or prog.sec.index != sym.shndx
                        or prog.sec_insn_off * 8 != sym.value):
                    raise self.error(f"map {spec.name!r}: {sym_name!r} is not an entry-point "
                                     f"program", rel_sec)
                ref = ProgramRef(prog.name)
            else:
                raise self.error(f"map {spec.name!r} of type {spec.type_name} cannot have "
                                 f"initial values", rel_sec)
            def_t = btf.resolved(owner.var_type)
            if not def_t.members or def_t.members[-1].name != "values":
                raise self.error(f"map {spec.name!r}: initialised map has no trailing "
                                 f"'values' member", rel_sec)
            moff = def_t.members[-1].bit_offset // 8
            rel_off = rel.offset - owner.sec_offset
            if rel_off < moff or (rel_off - moff) % 8:
                raise self.error(f"map {spec.name!r}: relocation at {rel.offset:#x} is not a "
                                 f"'values' slot", rel_sec)
            owner.slots[(rel_off - moff) // 8] = ref

    # -- checks --------------------------------------------------------------------

    def _core_relos(self, order: list[tuple[_Function, int]]) -> tuple[CoreRelocation, ...]:
        """libbpf's ``bpf_object__relocate_core`` input: each placed function's CO-RE
        records moved to slots of the linked program, access strings resolved."""
        ext, btf = self.ext, self.btf
        if ext is None or btf is None or not ext.core_relos:
            return ()
        out: list[CoreRelocation] = []
        for fn, base in order:
            lo = fn.sec_insn_off * 8
            hi = lo + len(fn.insns) * 8
            for r in ext.core_relos.get(fn.sec.name, ()):
                if not lo <= r.insn_off < hi:
                    continue
                if r.insn_off % 8:
                    raise self.error(f"CO-RE relocation offset {r.insn_off} is not an "
                                     f"instruction boundary", ".BTF.ext")
                if not 0 < r.type_id < len(btf):
                    raise self.error(f"CO-RE relocation of {fn.name!r} names type "
                                     f"[{r.type_id}], which does not exist", ".BTF.ext")
                try:
                    access = btf.string_at(r.access_str_off)
                except ObjectError as exc:
                    raise self.error(f"CO-RE relocation of {fn.name!r}: {exc.reason}",
                                     ".BTF.ext") from None
                out.append(CoreRelocation(r.insn_off // 8 - fn.sec_insn_off + base, r.type_id,
                                          access, r.kind, r.access_str_off))
        return tuple(sorted(out, key=lambda c: c.pc))

    # -- linking ---------------------------------------------------------------------

    def _subprog_at(self, caller: _Function, target_idx: int, what: str) -> _Function:
        text = self.text
        target = self._function_at(text.index, target_idx) if text is not None else None
        if target is None:
            raise self.error(f"function {caller.name!r}: {what} target instruction "
                             f"{target_idx} is in no .text function", caller.sec)
        if target.sec_insn_off != target_idx:
            raise self.error(f"function {caller.name!r}: {what} lands inside {target.name!r} "
                             f"instead of at its start", caller.sec)
        return target

    def _exception_cb(self, main: _Function) -> _Function | None:
        """libbpf's ``bpf_prog_assign_exc_cb``: the ``.text`` function an
        ``exception_callback:NAME`` decl tag on ``main``'s BTF function names (what
        ``__exception_cb(NAME)`` puts there), None without one or with several (the
        verifier refuses those)."""
        btf = self.btf
        if btf is None:
            return None
        prefix = "exception_callback:"
        found: _Function | None = None
        for t in btf.types[1:]:
            if (t.kind is not BtfKind.DECL_TAG or t.component_idx != -1
                    or not t.name.startswith(prefix)):
                continue
            fn_t = btf.types[t.size_type] if t.size_type < len(btf.types) else None
            if fn_t is None or fn_t.kind is not BtfKind.FUNC or fn_t.linkage != BTF_FUNC_GLOBAL:
                raise self.error(f"prog {main.name!r}: exception_callback:<value> decl tag not "
                                 "applied to the main program", ".BTF")
            if fn_t.name != main.name:
                continue
            if found is not None:  # several callbacks: none appended
                return None
            name = t.name[len(prefix):]
            if not name:
                raise self.error(f"prog {main.name!r}: exception_callback:<value> decl tag "
                                 "contains empty value", ".BTF")
            cb = next((f for f in self.functions if f.is_subprog and f.name == name), None)
            if cb is None:
                raise self.error(f"prog {main.name!r}: cannot find exception callback "
                                 f"{name!r}", ".BTF")
            if (cb.sym.bind == elfio.STB_LOCAL
                    or cb.sym.visibility in (elfio.STV_HIDDEN, elfio.STV_INTERNAL)):
                raise self.error(f"prog {main.name!r}: exception callback {name} must be a "
                                 "global non-hidden function", ".BTF")
            found = cb
        return found

    def _link(self, main: _Function) -> ProgramSpec:
        """libbpf's ``bpf_object__relocate_calls``/``reloc_code`` + data relocation."""
        out: list[Instruction] = list(main.insns)
        placed: dict[int, int] = {id(main): 0}
        order: list[tuple[_Function, int]] = [(main, 0)]
        stack: list[tuple[_Function, int, int]] = [(main, 0, 0)]
        exception_cb_done = False
        while True:
            while stack:
                fn, base, i = stack.pop()
                while i < len(fn.insns):
                    insn = out[base + i]
                    rel = fn.relocs.get(i)
                    is_call = (insn.code == op.OP_CALL and insn.src == op.CallSrc.BPF_PSEUDO_CALL
                               and insn.dst == 0 and insn.off == 0)
                    if insn.code == op.OP_CALL and insn.src == op.CallSrc.BPF_PSEUDO_KFUNC_CALL:
                        raise NotSupportedError(f"kfunc call (src_reg 2) without a relocation in "
                                                f"{fn.name!r} (section {fn.sec.name!r}): nothing "
                                                f"names the kernel function")
                    if rel is not None and rel.kind == "kfunc":
                        i += 1
                        continue
                    is_func_addr = rel is not None and rel.kind == "func_addr"
                    if not is_call and not is_func_addr:
                        i += 1
                        continue
                    if rel is not None and rel.kind == "call":
                        target_idx = rel.sym_off // 8 + insn.imm + 1
                    elif rel is not None and rel.kind == "func_addr":
                        target_idx = (rel.sym_off + insn.imm) // 8
                    elif rel is None:
                        # A call to a static function of the same section carries
                        # no relocation; imm is relative to the call's position.
                        if not fn.is_subprog:
                            raise NotSupportedError(
                                f"function {fn.name!r} calls into its own section "
                                f"{fn.sec.name!r}; only .text subprograms can be called "
                                f"(as in libbpf)")
                        target_idx = fn.sec_insn_off + i + insn.imm + 1
                    else:
                        raise self.error(f"function {fn.name!r}: call at {i} has a "
                                         f"{rel.kind} relocation", fn.sec)
                    target = self._subprog_at(fn, target_idx,
                                              "call" if is_call else "function address")
                    if id(target) not in placed:
                        # Append the subprogram and relocate it first, then come
                        # back to this instruction: the same depth-first order as
                        # libbpf, so the layout matches what it loads.
                        placed[id(target)] = len(out)
                        order.append((target, len(out)))
                        out.extend(target.insns)
                        stack.append((fn, base, i))
                        stack.append((target, placed[id(target)], 0))
                        break
                    rel_imm = placed[id(target)] - (base + i) - 1
                    src = op.CallSrc.BPF_PSEUDO_CALL if is_call else op.PseudoSrc.BPF_PSEUDO_FUNC
                    out[base + i] = self._patched(insn, fn, imm=rel_imm, src=int(src))
                    i += 1
            if exception_cb_done:
                break
            # bpf_object__relocate: the main program's exception callback is appended
            # (with what it calls) after everything the main program calls.
            exception_cb_done = True
            cb = self._exception_cb(main)
            if cb is None or id(cb) in placed:
                break
            placed[id(cb)] = len(out)
            order.append((cb, len(out)))
            out.extend(cb.insns)
            stack.append((cb, placed[id(cb)], 0))
        map_refs: list[MapRef] = []
        kfuncs: list[KfuncRef] = []
        for fn, base in order:
            for local, rel in sorted(fn.relocs.items()):
                pc = base + local
                if rel.kind == "kfunc":
                    # libbpf's RELO_EXTERN_CALL: src_reg 2, imm the kernel's BTF id
                    # (written in at load), off 0 for vmlinux.
                    out[pc] = replace(out[pc], src=int(op.CallSrc.BPF_PSEUDO_KFUNC_CALL),
                                      imm=0, off=0)
                    kfuncs.append(KfuncRef(pc, rel.sym_name))
                    continue
                if rel.kind not in ("map_fd", "map_value"):
                    continue
                first, second = out[pc], out[pc + 1]
                if rel.kind == "map_fd":
                    out[pc] = self._patched(first, fn, imm=0,
                                            src=int(op.PseudoSrc.BPF_PSEUDO_MAP_FD))
                    map_refs.append(MapRef(pc, rel.map_name, "fd"))
                else:
                    out[pc] = self._patched(first, fn, imm=0,
                                            src=int(op.PseudoSrc.BPF_PSEUDO_MAP_VALUE))
                    out[pc + 1] = self._patched(second, fn, imm=rel.offset, src=second.src)
                    map_refs.append(MapRef(pc, rel.map_name, "value", rel.offset))
        map_refs.sort(key=lambda r: r.pc)
        section = main.sec.name.removeprefix("?")
        sec_def = find_sec_def(section)
        if sec_def is None:
            # libbpf 1.x knows no type for it ("missing BPF prog type" at load).
            ptype, attach, flags, attach_to = "unspec", 0, 0, ""
        else:
            ptype = prog_type_name(sec_def.prog_type)
            attach, flags = sec_def.attach_type, sec_def.prog_flags
            attach_to = sec_def.attach_target(section)
        func_info, line_info = self._btf_ext_info(order)
        return ProgramSpec(
            name=main.name, section=section, insns=tuple(out), license=self.license,
            prog_type=ptype, expected_attach_type=attach, flags=flags, attach_to=attach_to,
            kfuncs=tuple(kfuncs), core_relos=self._core_relos(order),
            map_refs=tuple(map_refs), func_info=func_info, line_info=line_info,
            functions=tuple(FunctionSpan(f.name, f.sec.name, base, len(f.insns))
                            for f, base in order),
            autoload=not main.sec.name.startswith("?"))

    def _patched(self, insn: Instruction, fn: _Function, *, imm: int, src: int) -> Instruction:
        if not -0x8000_0000 <= imm <= 0x7FFF_FFFF:
            raise self.error(f"function {fn.name!r}: relocated immediate {imm} does not fit "
                             f"32 bits", fn.sec)
        return replace(insn, imm=imm, src=src)

    def _btf_ext_info(self, order: list[tuple[_Function, int]]
                      ) -> tuple[tuple[FuncInfo, ...], tuple[LineInfo, ...]]:
        """libbpf's ``adjust_prog_btf_ext_info``: records moved to the linked layout.

        Each placed function contributes the records of its section that fall
        inside it, converted from section byte offsets to slots of the linked
        program. As in libbpf, when the entry function has no records of a
        kind, that kind is left out entirely (the kernel wants all or none).
        """
        ext, btf = self.ext, self.btf
        if ext is None or btf is None:
            return (), ()
        funcs: list[FuncInfo] = []
        lines: list[LineInfo] = []
        for n, (fn, base) in enumerate(order):
            lo = fn.sec_insn_off * 8
            hi = lo + len(fn.insns) * 8
            if n == 0 or funcs:
                for r in ext.func_info.get(fn.sec.name, ()):
                    if not lo <= r.insn_off < hi:
                        continue
                    if r.insn_off % 8:
                        raise self.error(f"func_info offset {r.insn_off} is not an "
                                         f"instruction boundary", ".BTF.ext")
                    t = btf.types[r.type_id] if r.type_id < len(btf) else None
                    if t is None or t.kind is not BtfKind.FUNC:
                        raise self.error(f"func_info for {fn.name!r} names type "
                                         f"[{r.type_id}], which is not a FUNC", ".BTF.ext")
                    funcs.append(FuncInfo(r.insn_off // 8 - fn.sec_insn_off + base,
                                          r.type_id, t.name))
            if n == 0 or lines:
                for li in ext.line_info.get(fn.sec.name, ()):
                    if not lo <= li.insn_off < hi:
                        continue
                    if li.insn_off % 8:
                        raise self.error(f"line_info offset {li.insn_off} is not an "
                                         f"instruction boundary", ".BTF.ext")
                    try:
                        file_name = btf.string_at(li.file_name_off)
                        text = btf.string_at(li.line_off)
                    except ObjectError as exc:
                        raise self.error(f"line_info for {fn.name!r}: {exc.reason}",
                                         ".BTF.ext") from None
                    lines.append(LineInfo(li.insn_off // 8 - fn.sec_insn_off + base,
                                          file_name, text, li.line, li.col,
                                          li.file_name_off, li.line_off))
        # The kernel requires strictly increasing offsets; compilers emit
        # them sorted, so disorder here means a damaged .BTF.ext.
        for what, offs in (("func_info", [f.insn_off for f in funcs]),
                           ("line_info", [li.insn_off for li in lines])):
            if any(b <= a for a, b in zip(offs, offs[1:], strict=False)):
                raise self.error(f"{what} records of {order[0][0].name!r} are not in "
                                 f"increasing instruction order", ".BTF.ext")
        return tuple(funcs), tuple(lines)

    # -- libxdp ----------------------------------------------------------------------

    def _xdp_run_config(self, programs: dict[str, ProgramSpec]) -> dict[str, XdpRunConfig]:
        """libxdp's ``xdp_program__parse_btf``: ``XDP_RUN_CONFIG(prog)`` structs in BTF."""
        btf = self.btf
        if btf is None:
            return {}
        dsid = btf.find(_XDP_RUN_CONFIG_SEC, BtfKind.DATASEC)
        if dsid is None:
            return {}
        by_name = {btf.types[v.type].name: btf.types[v.type]
                   for v in btf.types[dsid].secinfos}
        out: dict[str, XdpRunConfig] = {}
        for prog in programs:
            var = by_name.get(f"_{prog}")
            if var is None:
                continue
            if var.kind is not BtfKind.VAR or var.linkage not in (BTF_VAR_GLOBAL_ALLOCATED,
                                                                  BTF_VAR_STATIC):
                raise self.error(f"run config of {prog!r} is not a plain variable",
                                 _XDP_RUN_CONFIG_SEC)
            def_t = btf.resolved(var.size_type)
            if def_t.kind is not BtfKind.STRUCT:
                raise self.error(f"run config of {prog!r} is not a struct", _XDP_RUN_CONFIG_SEC)
            prio, actions = XDP_DEFAULT_RUN_PRIO, XDP_DEFAULT_CHAIN_CALL_ACTIONS
            for m in def_t.members:
                ptr = btf.resolved(m.type)
                arr = btf.type_by_id(ptr.size_type) if ptr.kind is BtfKind.PTR else None
                if arr is None or arr.kind is not BtfKind.ARRAY or arr.array is None:
                    raise self.error(f"run config of {prog!r}: member {m.name!r} is not "
                                     f"__uint(name, value)", _XDP_RUN_CONFIG_SEC)
                value = arr.array.nelems
                if m.name == "priority":
                    prio = value
                elif m.name in _XDP_ACTIONS:
                    bit = 1 << _XDP_ACTIONS.index(m.name)
                    actions = actions | bit if value else actions & ~bit
                else:
                    raise NotSupportedError(f"run config of {prog!r}: unknown member "
                                            f"{m.name!r}")
            out[prog] = XdpRunConfig(priority=prio, chain_call_actions=actions)
        return out


def _max_entries(map_type: int, max_entries: int) -> int:
    """libbpf at open: ring buffers rounded up as the kernel wants (``adjust_ringbuf_sz``)."""
    if map_type in (BPF_MAP_TYPE_RINGBUF, BPF_MAP_TYPE_USER_RINGBUF):
        return ringbuf_size(max_entries)
    return max_entries


def _ignored_section(sec: ElfSection) -> bool:
    """libbpf's ``ignore_elf_section``: string tables, addrsig, DWARF and its relocations."""
    name = sec.name
    if sec.type in (elfio.SHT_STRTAB, SHT_LLVM_ADDRSIG):
        return True
    if sec.type == elfio.SHT_PROGBITS and sec.size == 0 and name == ".text":
        return True
    if name.startswith(".debug_"):
        return True
    if name.startswith(".rel"):
        rest = name[4:]
        if rest.startswith(".debug_") or rest in (".BTF", ".BTF.ext"):
            return True
    return False


def _is_data_section(name: str) -> bool:
    return name in (".data", ".rodata") or name.startswith((".data.", ".rodata."))
