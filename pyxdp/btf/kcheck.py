"""The kernel's own BTF checks, as ``BPF_BTF_LOAD`` runs them (kernel/bpf/btf.c ``btf_parse``).

:meth:`pyxdp.btf.Btf.parse` accepts what a loader (libbpf's ``btf__new``) accepts;
Linux is stricter: ``btf_parse_hdr``/``btf_check_sec_info`` (header and section
layout), ``btf_parse_str_sec`` (string section), ``btf_check_all_metas`` (each
kind's ``check_meta``: sizes, flags, names, linkage, offsets), ``btf_check_all_types``
(each kind's ``resolve``: referenced types, member placement, loops, chain depth,
``btf_func_proto_check``) and ``btf_check_type_tags``. :func:`kernel_check` answers
the first refusal as the kernel's log line does (``[id] KIND name reason``), or None
when Linux accepts the blob; both backends use it so a blob Linux refuses is treated
the same whether or not a kernel is at hand.
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Mapping
from dataclasses import replace

from pyxdp.btf.btf import Btf, BtfKind, BtfMember, BtfType, BtfVarSecinfo, parse_type
from pyxdp.errors import MapError
from pyxdp.uapi.bpf import BpfMapType

__all__ = ["kernel_check", "kernel_error", "kernel_fixup", "map_needs_btf", "no_btf_error"]

# Local storage maps are refused by the kernel without BTF key/value ids.
_BTF_REQUIRED_TYPES = frozenset({
    BpfMapType.BPF_MAP_TYPE_SK_STORAGE,
    BpfMapType.BPF_MAP_TYPE_INODE_STORAGE,
    BpfMapType.BPF_MAP_TYPE_TASK_STORAGE,
    BpfMapType.BPF_MAP_TYPE_CGRP_STORAGE,
})
# Value members the verifier only finds through BTF (btf_parse_fields):
# without BTF a program using them is refused, so such maps never fall back.
_SPECIAL_STRUCTS = frozenset({
    "bpf_spin_lock", "bpf_res_spin_lock", "bpf_timer", "bpf_wq", "bpf_task_work",
    "bpf_list_head", "bpf_list_node", "bpf_rb_root", "bpf_rb_node", "bpf_refcount",
})
_KPTR_TAGS = frozenset({"kptr", "kptr_untrusted", "percpu_kptr", "uptr"})

_HDR = struct.Struct("<HBBIIIII")
_BTF_MAX_TYPE = 0x000FFFFF
_BTF_MAX_NAME_OFFSET = 0x00FFFFFF
_BTF_INFO_MASK = 0x9F00FFFF
_BTF_INT_MASK = 0x0FFFFFFF
_MAX_RESOLVE_DEPTH = 32  # the kernel's MAX_RESOLVE_DEPTH (stack of types being resolved)
_KSYM_NAME_LEN = 512
_U32_MAX = 0xFFFF_FFFF
_PTR_SIZE = 8

_K = BtfKind
_MODIFIERS = frozenset({_K.TYPEDEF, _K.VOLATILE, _K.CONST, _K.RESTRICT, _K.TYPE_TAG})
_SOURCE_ONLY = frozenset({_K.VAR, _K.DATASEC, _K.DECL_TAG})  # btf_type_is_resolve_source_only
_NOSIZE = frozenset({_K.UNKN, _K.FWD, _K.FUNC, _K.FUNC_PROTO})  # btf_type_nosize
_NEEDS_RESOLVE = _MODIFIERS | {_K.PTR, _K.STRUCT, _K.UNION, _K.ARRAY, _K.VAR, _K.FUNC,
                               _K.DECL_TAG, _K.DATASEC}
# Fixed and per-vlen trailer sizes (the kernel's meta_needed).
_FIXED = {_K.INT: 4, _K.ARRAY: 12, _K.VAR: 4, _K.DECL_TAG: 4}
_PER_VLEN = {_K.STRUCT: 12, _K.UNION: 12, _K.ENUM: 8, _K.FUNC_PROTO: 8, _K.DATASEC: 12,
             _K.ENUM64: 12}


def _natural_align(size: int) -> int:
    # Largest power of two (at most 8) dividing size: where clang would
    # place a variable of that size.
    return min(8, size & -size) if size else 1


def kernel_fixup(btf: Btf, sizes: Mapping[str, int] | None = None
                 ) -> tuple[Btf, tuple[str, ...]]:
    """A copy of ``btf`` as a loader hands it to ``BPF_BTF_LOAD``, and the fix-ups made.

    The kernel refuses a DATASEC of size 0 (``size == 0``) and variables
    that overlap or stick out of their section. clang emits exactly that:
    the section sizes and the offsets of global variables are left for the
    loader to fill in from the ELF (libbpf's ``btf_fixup_datasec``).
    :func:`pyxdp.elf.load_collection_spec` already does so from the symbol
    table, so for its specs this changes nothing; for BTF that was not fixed
    up, each zero-sized DATASEC gets the size ``sizes`` gives its name (the global
    data map's value size: the kernel checks that a map's value size equals its value
    type's size) or the end of its last variable, and overlapping variables
    are laid out one after the other, naturally aligned. ``btf`` itself is
    never modified.
    """
    sizes = sizes or {}
    changed: dict[int, BtfType] = {}
    notes: list[str] = []
    # kfunc declarations: the kernel refuses FUNCs of extern linkage, FUNCs listed in a
    # DATASEC and unnamed parameters; each becomes a TYPEDEF of its prototype (ids stay
    # put; nothing the kernel reads refers to it) and leaves .ksyms.
    kfuncs = {t.id for t in btf.types[1:]
              if t.kind is BtfKind.FUNC and 2 in (t.vlen, t.linkage)}
    for fid in sorted(kfuncs):
        changed[fid] = replace(btf.types[fid], kind=BtfKind.TYPEDEF, vlen=0, linkage=0)
        notes.append(f"FUNC {btf.types[fid].name!r} (a kfunc) -> TYPEDEF")
    for t in btf.types[1:]:
        if t.kind is not BtfKind.DATASEC or t.size_type != 0:
            continue
        placed: list[BtfVarSecinfo] = []
        end = 0
        moved = 0
        for vsi in sorted(t.secinfos, key=lambda s: s.offset):
            if vsi.type in kfuncs:
                continue
            offset = vsi.offset
            if offset < end:
                align = _natural_align(vsi.size)
                offset = (end + align - 1) // align * align
                moved += 1
            placed.append(BtfVarSecinfo(vsi.type, offset, vsi.size))
            end = offset + vsi.size
        size = max(sizes.get(t.name, 0), end, 1)
        changed[t.id] = replace(t, size_type=size, secinfos=tuple(placed))
        what = f"DATASEC {t.name!r} size 0 -> {size}"
        notes.append(what + (f", {moved} variable offset(s) laid out" if moved else ""))
    if not changed:
        return btf, ()
    return btf.with_types(changed), tuple(notes)


def kernel_error(btf: Btf, sizes: Mapping[str, int] | None = None) -> str | None:
    """Why Linux refuses ``btf`` as a loader hands it over (:func:`kernel_fixup`), or
    None: what a backend without a kernel asks where the kernel backend would have
    ``BPF_BTF_LOAD`` answer. (libbpf then goes on without the object's BTF.)"""
    return kernel_check(kernel_fixup(btf, sizes)[0].raw)


def map_needs_btf(map_type: int, type_name: str, value_type: int | None,
                  btf: Btf | None) -> str:
    """Why a map cannot be created (or used) without the object's BTF, "" when it can:
    what a loader checks before going on without BTF the kernel refused."""
    if map_type in _BTF_REQUIRED_TYPES:
        return f"{type_name} maps need BTF key/value types"
    if btf is None or not value_type:
        return ""
    seen: set[int] = set()
    stack = [(value_type, 0)]
    while stack:
        tid, depth = stack.pop()
        if tid in seen or depth > _MAX_RESOLVE_DEPTH or not 0 < tid < len(btf.types):
            continue
        seen.add(tid)
        t = btf.types[tid]
        if t.kind in (_K.STRUCT, _K.UNION):
            if t.name in _SPECIAL_STRUCTS:
                return f"its value holds a struct {t.name}"
            stack += [(m.type, depth + 1) for m in t.members]
        elif t.kind is _K.TYPE_TAG and t.name in _KPTR_TAGS:
            return f"its value holds a {t.name} pointer"
        elif t.kind is _K.ARRAY and t.array is not None:
            stack.append((t.array.type, depth + 1))
        elif t.kind in _MODIFIERS or t.kind is _K.PTR:
            stack.append((t.size_type, depth + 1))
    return ""


def no_btf_error(name: str, need: str, why: str) -> MapError:
    """A map that needs BTF when the object's was refused (``why``): what both backends
    raise at its creation."""
    return MapError("create", errno.EINVAL, f"map {name!r} needs BTF ({need}) and none "
                                            f"is loaded: {why}")


class _Refused(Exception):
    """The kernel's log line for the first problem found; ``reason`` its last words."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


def _printable(c: int) -> bool:
    return 0x20 <= c < 0x7F


def kernel_check(raw: bytes | bytearray | memoryview) -> str | None:
    """Why Linux's ``BPF_BTF_LOAD`` refuses the BTF blob ``raw`` (its log line), or None."""
    try:
        _Checker(bytes(raw)).run()
    except _Refused as e:
        return str(e)
    return None


class _Checker:
    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.strings = b""
        self.types: list[BtfType] = []
        self.resolved: dict[int, int] = {}  # type id -> resolved id with size (or itself)
        self.sizes: dict[int, int] = {}  # resolved byte sizes of arrays
        self.mode = "tbd"  # env->resolve_mode: "tbd", "ptr" or "struct"
        self.stack: list[list[int]] = []  # [type id, next member] being resolved
        self.visit: dict[int, int] = {}  # 1 visited, 2 resolved

    # -- strings ----------------------------------------------------------------

    def _str(self, off: int) -> bytes:
        if off >= len(self.strings):
            return b""
        return self.strings[off:self.strings.index(b"\0", off)]

    def _name(self, t: BtfType) -> str:
        return self._str(t.name_off).decode("utf-8", "replace")

    def _off_valid(self, off: int) -> bool:
        return off <= _BTF_MAX_NAME_OFFSET and off < len(self.strings)

    def _identifier(self, off: int) -> bool:
        """btf_name_valid_identifier: [A-Za-z_.][A-Za-z0-9_.]*, shorter than KSYM_NAME_LEN."""
        s = self._str(off)
        if not s or len(s) >= _KSYM_NAME_LEN:
            return False
        ok = (0x5F, 0x2E)
        if not (chr(s[0]).isascii() and chr(s[0]).isalpha() or s[0] in ok):
            return False
        return all(chr(c).isascii() and chr(c).isalnum() or c in ok for c in s[1:])

    def _section_name(self, off: int) -> bool:
        """btf_name_valid_section: printable characters, non-empty, bounded."""
        s = self._str(off)
        return bool(s) and len(s) < _KSYM_NAME_LEN and all(_printable(c) for c in s)

    def _refuse(self, t: BtfType | None, tid: int, reason: str) -> _Refused:
        if t is None:
            return _Refused(f"[{tid}] {reason}", reason)
        name = "(anon)" if not t.name_off else self._name(t) if self._off_valid(
            t.name_off) else "(invalid-name-offset)"
        return _Refused(f"[{tid}] {t.kind.name} {name} {reason}".replace("  ", " "), reason)

    def _member(self, t: BtfType, m: BtfMember | str, reason: str) -> _Refused:
        what = m if isinstance(m, str) else (m.name or "(anon)")
        e = self._refuse(t, t.id, f"member {what}: {reason}")
        e.reason = reason
        return e

    def _vsi(self, t: BtfType, type_id: int, reason: str) -> _Refused:
        e = self._refuse(t, t.id, f"type_id={type_id} {reason}")
        e.reason = reason
        return e

    # -- header, sections, strings -------------------------------------------------

    def run(self) -> None:
        raw = self.raw
        if len(raw) < 8:
            raise _Refused("hdr_len not found")
        hdr_len = struct.unpack_from("<I", raw, 4)[0]
        if len(raw) < hdr_len:
            raise _Refused("btf_header not found")
        if hdr_len > _HDR.size and any(raw[_HDR.size:hdr_len]):
            raise _Refused("Unsupported btf_header")
        # the kernel copies min(hdr_len, its header size) bytes; the rest reads as zero
        head = raw[:min(hdr_len, _HDR.size)].ljust(_HDR.size, b"\0")
        magic, version, flags, _, type_off, type_len, str_off, str_len = _HDR.unpack(head)
        if magic != 0xEB9F:
            raise _Refused("Invalid magic")
        if version != 1:
            raise _Refused("Unsupported version")
        if flags:
            raise _Refused("Unsupported flags")
        if len(raw) == hdr_len:
            raise _Refused("No data")
        expected = len(raw) - hdr_len
        total = 0
        for off, length in sorted(((type_off, type_len), (str_off, str_len))):
            if expected < off:
                raise _Refused("Invalid section offset")
            if total < off:
                raise _Refused("Unsupported section found")
            if total > off:
                raise _Refused("Section overlap found")
            if expected - total < length:
                raise _Refused("Total section length too long")
            total += length
        if expected != total:
            raise _Refused("Unsupported section found")
        body = raw[hdr_len:]
        if str_off + str_len != len(body):
            raise _Refused("String section is not at the end")
        strings = body[str_off:str_off + str_len]
        if not str_len or str_len - 1 > _BTF_MAX_NAME_OFFSET or strings[-1] or strings[0]:
            raise _Refused("Invalid string section")
        self.strings = strings
        if type_off & 3:
            raise _Refused("Unaligned type_off")
        if not type_len:
            raise _Refused("No type found")
        self._metas(body[type_off:type_off + type_len])
        self._all_types()
        self._type_tags()
        # btf_parse_struct_metas / btf_check_and_fixup_fields (no log line: errno only)
        why = Btf(types=tuple(self.types), strings=self.strings).struct_metas_error
        if why is not None:
            raise _Refused(why)

    # -- btf_check_all_metas ---------------------------------------------------------

    def _metas(self, sec: bytes) -> None:
        self.types = [BtfType(id=0, kind=_K.UNKN, name="", name_off=0)]
        pos = 0
        while pos < len(sec):
            tid = len(self.types)
            if tid > _BTF_MAX_TYPE:
                raise _Refused(f"[{tid}] Max types exceeded")
            left = len(sec) - pos
            if left < 12:
                raise _Refused(f"[{tid}] meta_left:{left} meta_needed:12")
            name_off, info, _ = struct.unpack_from("<III", sec, pos)
            if info & ~_BTF_INFO_MASK:
                raise _Refused(f"[{tid}] Invalid btf_info:{info:x}")
            kind_raw = (info >> 24) & 0x1F
            if kind_raw == 0 or kind_raw not in BtfKind._value2member_map_:
                raise _Refused(f"[{tid}] Invalid kind:{kind_raw}")
            if not self._off_valid(name_off):
                raise _Refused(f"[{tid}] Invalid name_offset:{name_off}")
            kind = BtfKind(kind_raw)
            need = _FIXED.get(kind, 0) + _PER_VLEN.get(kind, 0) * (info & 0xFFFF)
            if left - 12 < need:
                t = BtfType(id=tid, kind=kind, name="", name_off=name_off)
                raise self._refuse(t, tid, f"meta_left:{left - 12} meta_needed:{need}")
            int_data = struct.unpack_from("<I", sec, pos + 12)[0] if kind is _K.INT else 0
            t, pos = parse_type(sec, pos, tid, self.strings, names_checked=False)
            self._check_meta(t, int_data)
            self.types.append(t)

    def _check_meta(self, t: BtfType, int_data: int) -> None:  # noqa: C901 - one branch per kind, as btf.c
        k = t.kind
        bad = self._refuse
        if k is _K.INT:
            if t.vlen:
                raise bad(t, t.id, "vlen != 0")
            if t.kind_flag:
                raise bad(t, t.id, "Invalid btf_info kind_flag")
            if int_data & ~_BTF_INT_MASK:
                raise bad(t, t.id, f"Invalid int_data:{int_data:x}")
            nr_bits = t.int_bits + t.int_offset
            if nr_bits > 128:
                raise bad(t, t.id, "nr_bits exceeds 128")
            if (nr_bits + 7) // 8 > t.size_type:
                raise bad(t, t.id, "nr_bits exceeds type_size")
            if t.int_encoding not in (0, 1, 2, 4):
                raise bad(t, t.id, "Unsupported encoding")
        elif k in _MODIFIERS or k is _K.PTR:
            if t.vlen:
                raise bad(t, t.id, "vlen != 0")
            if t.kind_flag and k is not _K.TYPE_TAG:
                raise bad(t, t.id, "Invalid btf_info kind_flag")
            if t.size_type > _BTF_MAX_TYPE:
                raise bad(t, t.id, "Invalid type_id")
            if k is _K.TYPEDEF:
                if not t.name_off or not self._identifier(t.name_off):
                    raise bad(t, t.id, "Invalid name")
            elif k is _K.TYPE_TAG:
                if not t.name_off or not self._section_name(t.name_off):
                    raise bad(t, t.id, "Invalid name")
            elif t.name_off:
                raise bad(t, t.id, "Invalid name")
        elif k is _K.ARRAY:
            a = t.array
            assert a is not None
            if t.name_off:
                raise bad(t, t.id, "Invalid name")
            if t.vlen:
                raise bad(t, t.id, "vlen != 0")
            if t.kind_flag:
                raise bad(t, t.id, "Invalid btf_info kind_flag")
            if t.size_type:
                raise bad(t, t.id, "size != 0")
            if not a.type or a.type > _BTF_MAX_TYPE:
                raise bad(t, t.id, "Invalid elem")
            if not a.index_type or a.index_type > _BTF_MAX_TYPE:
                raise bad(t, t.id, "Invalid index")
        elif k in (_K.STRUCT, _K.UNION):
            if t.name_off and not self._identifier(t.name_off):
                raise bad(t, t.id, "Invalid name")
            last = 0
            for m in t.members:
                if not self._off_valid(m.name_off):
                    raise self._member(t, "(invalid-name-offset)",
                                       f"Invalid member name_offset:{m.name_off}")
                if m.name_off and not self._identifier(m.name_off):
                    raise self._member(t, m, "Invalid name")
                if not m.type or m.type > _BTF_MAX_TYPE:
                    raise self._member(t, m, "Invalid type_id")
                if k is _K.UNION and m.bit_offset:
                    raise self._member(t, m, "Invalid member bits_offset")
                if (m.bit_offset + 7) // 8 > t.size_type:
                    raise self._member(t, m, "Member bits_offset exceeds its struct size")
                if k is _K.STRUCT and m.bit_offset < last:
                    raise self._member(t, m, "Invalid member bits_offset")
                last = m.bit_offset
        elif k in (_K.ENUM, _K.ENUM64):
            if t.size_type > 8 or t.size_type & (t.size_type - 1) or not t.size_type:
                raise bad(t, t.id, "Unexpected size")
            if t.name_off and not self._identifier(t.name_off):
                raise bad(t, t.id, "Invalid name")
            for e in t.enum_values:
                if not self._off_valid(e.name_off):
                    raise bad(t, t.id, f"Invalid name_offset:{e.name_off}")
                if not e.name_off or not self._identifier(e.name_off):
                    raise bad(t, t.id, "Invalid name")
        elif k is _K.FWD:
            if t.vlen:
                raise bad(t, t.id, "vlen != 0")
            if t.size_type:
                raise bad(t, t.id, "type != 0")
            if not t.name_off or not self._identifier(t.name_off):
                raise bad(t, t.id, "Invalid name")
        elif k is _K.FUNC:
            if not t.name_off or not self._identifier(t.name_off):
                raise bad(t, t.id, "Invalid name")
            if t.vlen > 1:
                raise bad(t, t.id, "Invalid func linkage")
            if t.kind_flag:
                raise bad(t, t.id, "Invalid btf_info kind_flag")
        elif k is _K.FUNC_PROTO:
            if t.name_off:
                raise bad(t, t.id, "Invalid name")
            if t.kind_flag:
                raise bad(t, t.id, "Invalid btf_info kind_flag")
        elif k is _K.VAR:
            if t.vlen:
                raise bad(t, t.id, "vlen != 0")
            if t.kind_flag:
                raise bad(t, t.id, "Invalid btf_info kind_flag")
            if not t.name_off or not self._identifier(t.name_off):
                raise bad(t, t.id, "Invalid name")
            if not t.size_type or t.size_type > _BTF_MAX_TYPE:
                raise bad(t, t.id, "Invalid type_id")
            if t.linkage not in (0, 1):
                raise bad(t, t.id, "Linkage not supported")
        elif k is _K.DATASEC:
            if not t.size_type:
                raise bad(t, t.id, "size == 0")
            if t.kind_flag:
                raise bad(t, t.id, "Invalid btf_info kind_flag")
            if not t.name_off or not self._section_name(t.name_off):
                raise bad(t, t.id, "Invalid name")
            end = total = 0
            for s in t.secinfos:
                if not s.type or s.type > _BTF_MAX_TYPE:
                    raise self._vsi(t, s.type, "Invalid type_id")
                if s.offset < end or s.offset >= t.size_type:
                    raise self._vsi(t, s.type, "Invalid offset")
                if not s.size or s.size > t.size_type:
                    raise self._vsi(t, s.type, "Invalid size")
                end = s.offset + s.size
                if end > t.size_type:
                    raise self._vsi(t, s.type, "Invalid offset+size")
                total += s.size
            if t.size_type < total:
                raise bad(t, t.id, "Invalid btf_info size")
        elif k is _K.FLOAT:
            if t.vlen:
                raise bad(t, t.id, "vlen != 0")
            if t.kind_flag:
                raise bad(t, t.id, "Invalid btf_info kind_flag")
            if t.size_type not in (2, 4, 8, 12, 16):
                raise bad(t, t.id, "Invalid type_size")
        elif k is _K.DECL_TAG:
            if not self._str(t.name_off):
                raise bad(t, t.id, "Invalid value")
            if t.vlen:
                raise bad(t, t.id, "vlen != 0")
            if t.component_idx < -1:
                raise bad(t, t.id, "Invalid component_idx")

    # -- btf_check_all_types: each kind's resolve ------------------------------------

    def _t(self, tid: int) -> BtfType | None:
        return self.types[tid] if 0 <= tid < len(self.types) else None

    def _sink(self, t: BtfType) -> bool:
        """env_type_is_resolve_sink for the current resolve mode."""
        if self.mode == "tbd":
            return t.kind not in _NEEDS_RESOLVE
        if self.mode == "ptr":
            return t.kind not in _MODIFIERS and t.kind is not _K.PTR
        return t.kind not in _MODIFIERS and t.kind not in (_K.ARRAY, _K.STRUCT, _K.UNION)

    def _is_resolved(self, tid: int) -> bool:
        return self.visit.get(tid) == 2

    def _push(self, tid: int) -> None:
        t = self.types[tid]
        if len(self.stack) == _MAX_RESOLVE_DEPTH:
            raise _Refused("E2BIG")
        if self.visit.get(tid):
            raise _Refused("EEXIST")
        self.visit[tid] = 1
        if self.mode == "tbd":
            if t.kind is _K.PTR:
                self.mode = "ptr"
            elif t.kind in (_K.STRUCT, _K.UNION, _K.ARRAY):
                self.mode = "struct"
        self.stack.append([tid, 0])

    def _pop(self, resolved_id: int, size: int) -> None:
        tid = self.stack.pop()[0]
        self.visit[tid] = 2
        self.resolved[tid] = resolved_id
        self.sizes[tid] = size

    def _id_size(self, tid: int) -> tuple[int, int] | None:
        """btf_type_id_size: the sized type ``tid`` stands for and its size."""
        t = self._t(tid)
        if t is None or t.kind in _NOSIZE:
            return None
        if t.kind not in (_K.ARRAY, _K.PTR) and t.kind not in _MODIFIERS \
                and t.kind is not _K.VAR:
            return tid, t.size_type
        if t.kind is _K.ARRAY:
            return tid, self.sizes.get(tid, 0)
        if t.kind is _K.PTR:
            return tid, _PTR_SIZE
        tid = self.resolved.get(tid, 0)
        t = self._t(tid)
        if t is None or t.kind in _NOSIZE:
            return None
        if t.kind is _K.ARRAY:
            return tid, self.sizes.get(tid, 0)
        if t.kind is _K.PTR:
            return tid, _PTR_SIZE
        if t.kind in _MODIFIERS or t.kind is _K.VAR:
            return None
        return tid, t.size_type

    def _maybe_push(self, t: BtfType) -> bool:
        if not self._sink(t) and not self._is_resolved(t.id):
            self._push(t.id)
            return True
        return False

    def _resolve(self, root: BtfType) -> None:
        """btf_resolve: resolve ``root`` and what it needs, depth-first."""
        self.mode = "tbd"
        self.stack = []
        try:
            self._push(root.id)
        except _Refused:
            pass
        try:
            while self.stack:
                self._resolve_one(self.stack[-1])
        except _Refused as e:
            if str(e) == "E2BIG":
                raise self._refuse(root, root.id, "Exceeded max resolving depth:32") from None
            if str(e) == "EEXIST":
                raise self._refuse(root, root.id, "Loop detected") from None
            raise

    def _resolve_one(self, frame: list[int]) -> None:  # noqa: C901 - as btf.c
        tid = frame[0]
        t = self.types[tid]
        k = t.kind
        bad = self._refuse
        if k in _MODIFIERS or k is _K.PTR:
            nxt = self._t(t.size_type)
            if nxt is None or nxt.kind in _SOURCE_ONLY:
                raise bad(t, tid, "Invalid type_id")
            if self._maybe_push(nxt):
                return
            if k is _K.PTR and nxt.kind in _MODIFIERS:
                rid = self.resolved.get(nxt.id, 0)
                rt = self.types[rid]
                if rt.kind is _K.PTR and self._maybe_push(rt):
                    return
            got = self._id_size(nxt.id)
            nid = nxt.id
            if got is None:
                if self._is_resolved(nid):
                    nid = self.resolved.get(nid, 0)
                    nxt = self.types[nid]
                if nxt.kind not in (_K.UNKN, _K.FWD, _K.FUNC_PROTO):
                    raise bad(t, tid, "Invalid type_id")
            else:
                nid = got[0]
            self._pop(nid, 0)
        elif k is _K.ARRAY:
            a = t.array
            assert a is not None
            idx = self._t(a.index_type)
            if idx is None or idx.kind in _NOSIZE or idx.kind in _SOURCE_ONLY:
                raise bad(t, tid, "Invalid index")
            if self._maybe_push(idx):
                return
            got = self._id_size(idx.id)
            if got is None or not self._int_regular(self.types[got[0]]):
                raise bad(t, tid, "Invalid index")
            elem = self._t(a.type)
            if elem is None or elem.kind in _NOSIZE or elem.kind in _SOURCE_ONLY:
                raise bad(t, tid, "Invalid elem")
            if self._maybe_push(elem):
                return
            got = self._id_size(elem.id)
            if got is None:
                raise bad(t, tid, "Invalid elem")
            et = self.types[got[0]]
            if et.kind is _K.INT and not self._int_regular(et):
                raise bad(t, tid, "Invalid array of int")
            if a.nelems and got[1] > _U32_MAX // a.nelems:
                raise bad(t, tid, "Array size overflows U32_MAX")
            self._pop(got[0], got[1] * a.nelems)
        elif k in (_K.STRUCT, _K.UNION):
            start = frame[1]
            if start:
                m = t.members[start - 1]
                self._check_member(t, m, self.types[m.type])
            for i in range(start, len(t.members)):
                m = t.members[i]
                mt = self._t(m.type)
                if mt is None or mt.kind in _NOSIZE or mt.kind in _SOURCE_ONLY:
                    raise self._member(t, m, "Invalid member")
                if not self._sink(mt) and not self._is_resolved(mt.id):
                    frame[1] = i + 1
                    self._push(mt.id)
                    return
                self._check_member(t, m, mt)
            self._pop(0, 0)
        elif k is _K.VAR:
            nxt = self._t(t.size_type)
            if nxt is None or nxt.kind in _SOURCE_ONLY:
                raise bad(t, tid, "Invalid type_id")
            if self._maybe_push(nxt):
                return
            got = self._id_size(nxt.id)
            if got is None:
                raise bad(t, tid, "Invalid type_id")
            self._pop(got[0], 0)
        elif k is _K.DATASEC:
            for i in range(frame[1], len(t.secinfos)):
                s = t.secinfos[i]
                vt = self._t(s.type)
                if vt is None or vt.kind is not _K.VAR:
                    raise self._vsi(t, s.type, "Not a VAR kind member")
                if not self._sink(vt) and not self._is_resolved(vt.id):
                    frame[1] = i + 1
                    self._push(vt.id)
                    return
                got = self._id_size(vt.size_type)
                if got is None:
                    raise self._vsi(t, s.type, "Invalid type")
                if s.size < got[1]:
                    raise self._vsi(t, s.type, "Invalid size")
            self._pop(0, 0)
        elif k is _K.FUNC:
            proto = self._t(t.size_type)
            if proto is None or proto.kind is not _K.FUNC_PROTO:
                raise bad(t, tid, "Invalid type_id")
            for i, p in enumerate(proto.params):
                if not p.name_off and p.type:
                    raise bad(t, tid, f"Invalid arg#{i + 1}")
            self._pop(t.size_type, 0)
        elif k is _K.DECL_TAG:
            nxt = self._t(t.size_type)
            if nxt is None or nxt.kind not in (_K.STRUCT, _K.UNION, _K.FUNC, _K.VAR,
                                               _K.TYPEDEF):
                raise bad(t, tid, "Invalid type_id")
            if self._maybe_push(nxt):
                return
            comp = t.component_idx
            if comp != -1:
                if nxt.kind in (_K.VAR, _K.TYPEDEF):
                    raise bad(t, tid, "Invalid component_idx")
                if nxt.kind in (_K.STRUCT, _K.UNION):
                    vlen = nxt.vlen
                else:
                    proto = self._t(nxt.size_type)
                    vlen = proto.vlen if proto is not None else 0
                if comp & _U32_MAX >= vlen:
                    raise bad(t, tid, "Invalid component_idx")
            self._pop(nxt.id, 0)

    @staticmethod
    def _int_regular(t: BtfType) -> bool:
        """btf_type_int_is_regular: a whole 1/2/4/8/16-byte integer at offset 0."""
        return t.kind is _K.INT and not t.int_bits % 8 and not t.int_offset \
            and t.int_bits // 8 in (1, 2, 4, 8, 16)

    def _check_member(self, st: BtfType, m: BtfMember, mt: BtfType) -> None:  # noqa: C901
        """The member type's check_member / check_kflag_member."""
        bad = self._member
        size = st.size_type
        if mt.kind in _MODIFIERS:  # btf_modifier_check_member: the sized type it names
            got = self._id_size(mt.id)
            if got is None:
                raise bad(st, m, "Invalid member")
            mt = self.types[got[0]]
        kflag = st.kind_flag
        off = m.bit_offset
        if kflag and mt.kind not in (_K.INT, _K.ENUM, _K.ENUM64):
            if m.bitfield_size:
                raise bad(st, m, "Invalid member bitfield_size")
            kflag = False
        if mt.kind is _K.INT:
            if kflag:
                if not self._int_regular(mt):
                    raise bad(st, m, "Invalid member base type")
                nr_bits = m.bitfield_size
                if not nr_bits:
                    if off % 8:
                        raise bad(st, m, "Invalid member offset")
                    nr_bits = mt.int_bits
                elif nr_bits > mt.int_bits:
                    raise bad(st, m, "Invalid member bitfield_size")
            else:
                if _U32_MAX - off < mt.int_offset:
                    raise bad(st, m, "bits_offset exceeds U32_MAX")
                off += mt.int_offset
                nr_bits = mt.int_bits
            copy = nr_bits + off % 8
            if copy > 128:
                raise bad(st, m, "nr_copy_bits exceeds 128")
            if size < off // 8 or size - off // 8 < (copy + 7) // 8:
                raise bad(st, m, "Member exceeds struct_size")
        elif mt.kind in (_K.ENUM, _K.ENUM64):
            if kflag:  # an enum bitfield is int-sized whatever the enum's size
                nr_bits = m.bitfield_size
                if not nr_bits:
                    if off % 8:
                        raise bad(st, m, "Member is not byte aligned")
                    nr_bits = 32
                elif nr_bits > 32:
                    raise bad(st, m, "Invalid member bitfield_size")
                if size < (off + nr_bits + 7) // 8:
                    raise bad(st, m, "Member exceeds struct_size")
            else:
                if off % 8:
                    raise bad(st, m, "Member is not byte aligned")
                if size < off // 8 or size - off // 8 < mt.size_type:
                    raise bad(st, m, "Member exceeds struct_size")
        elif mt.kind is _K.FLOAT:
            align_bits = min(_PTR_SIZE, mt.size_type) * 8
            if off % align_bits:
                raise bad(st, m, "Member is not properly aligned")
            if off // 8 + mt.size_type > size:
                raise bad(st, m, "Member exceeds struct_size")
        elif mt.kind in (_K.PTR, _K.ARRAY, _K.STRUCT, _K.UNION):
            if off % 8:
                raise bad(st, m, "Member is not byte aligned")
            msize = _PTR_SIZE if mt.kind is _K.PTR else \
                self.sizes.get(mt.id, 0) if mt.kind is _K.ARRAY else mt.size_type
            if size < off // 8 or size - off // 8 < msize:
                raise bad(st, m, "Member exceeds struct_size")
        else:
            raise self._refuse(st, st.id, "Unsupported check_member")

    def _func_proto(self, t: BtfType) -> None:
        """btf_func_proto_check: a sized (or void) return, sized args, ``...`` last."""
        bad = self._refuse
        if t.size_type:
            rt = self._t(t.size_type)
            if rt is None or rt.kind in _SOURCE_ONLY:
                raise bad(t, t.id, "Invalid return type")
            if rt.kind in _NEEDS_RESOLVE and not self._is_resolved(rt.id):
                self._resolve(rt)
            if self._id_size(rt.id) is None:
                raise bad(t, t.id, "Invalid return type")
        params = list(t.params)
        if params and not params[-1].type:
            if params[-1].name_off:
                raise bad(t, t.id, f"Invalid arg#{len(params)}")
            params.pop()
        for i, p in enumerate(params):
            at = self._t(p.type)
            if at is None or at.kind in _SOURCE_ONLY:
                raise bad(t, t.id, f"Invalid arg#{i + 1}")
            if p.name_off and (not self._off_valid(p.name_off)
                               or not self._identifier(p.name_off)):
                raise bad(t, t.id, f"Invalid arg#{i + 1}")
            if at.kind in _NEEDS_RESOLVE and not self._is_resolved(at.id):
                self._resolve(at)
            if self._id_size(at.id) is None:
                raise bad(t, t.id, f"Invalid arg#{i + 1}")

    def _all_types(self) -> None:
        for t in self.types[1:]:
            if t.kind in _NEEDS_RESOLVE and not self._is_resolved(t.id):
                self._resolve(t)
            if t.kind is _K.FUNC_PROTO:
                self._func_proto(t)

    # -- btf_check_type_tags -----------------------------------------------------------

    def _type_tags(self) -> None:
        good = 0
        for t in self.types[1:]:
            if t.kind not in _MODIFIERS:
                continue
            in_tags = t.kind is _K.TYPE_TAG
            cur: BtfType | None = t
            limit = 32
            while cur is not None and cur.kind in _MODIFIERS:
                if not limit:
                    raise self._refuse(t, t.id, "Max chain length or cycle detected")
                limit -= 1
                if cur.kind is _K.TYPE_TAG:
                    if not in_tags:
                        raise self._refuse(t, t.id, "Type tags don't precede modifiers")
                else:
                    in_tags = False
                if cur.id <= good:
                    break
                cur = self._t(cur.size_type)
            good = t.id
