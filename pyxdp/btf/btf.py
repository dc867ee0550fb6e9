"""BTF, the BPF Type Format, as the kernel's ``include/uapi/linux/btf.h`` defines it.

A ``.BTF`` blob is a 24-byte ``struct btf_header`` followed by a type
section (``struct btf_type`` records, each followed by kind-specific data)
and a string section (NUL-terminated names, offset 0 is the empty string).
Type ids are implicit: the n-th record is type ``n``; id 0 is ``void``.

This module parses such a blob into plain frozen data (:class:`Btf`), answers
the questions a loader asks (``btf__resolve_size``, ``skip_mods_and_typedefs``,
``btf__find_by_name_kind`` in libbpf terms), and encodes it back to bytes so a
kernel backend can hand the (fixed-up) blob to ``BPF_BTF_LOAD``. Validation
follows libbpf's ``btf_parse_hdr``/``btf_parse_str_sec``/``btf_parse_type_sec``
plus reference checks; every malformed blob raises :class:`ObjectError`.
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from enum import IntEnum
from functools import cached_property

from pyxdp.errors import ObjectError

__all__ = [
    "BTF_FUNC_EXTERN",
    "BTF_FUNC_GLOBAL",
    "BTF_FUNC_STATIC",
    "BTF_INT_BOOL",
    "BTF_INT_CHAR",
    "BTF_INT_SIGNED",
    "BTF_MAGIC",
    "BTF_VAR_GLOBAL_ALLOCATED",
    "BTF_VAR_GLOBAL_EXTERN",
    "BTF_VAR_STATIC",
    "Btf",
    "BtfArray",
    "BtfEnumValue",
    "BtfKind",
    "BtfMember",
    "BtfParam",
    "BtfType",
    "BtfVarSecinfo",
    "FieldError",
    "SPECIAL_FIELDS",
    "SpecialField",
]

BTF_MAGIC = 0xEB9F
BTF_VERSION = 1
_HDR = struct.Struct("<HBBIIIII")  # struct btf_header
_TYPE = struct.Struct("<III")  # struct btf_type: name_off, info, size/type
_U32 = struct.Struct("<I")
_S32 = struct.Struct("<i")
_ARRAY = struct.Struct("<III")
_MEMBER = struct.Struct("<III")
_ENUM = struct.Struct("<Ii")
_ENUM64 = struct.Struct("<III")
_PARAM = struct.Struct("<II")
_SECINFO = struct.Struct("<III")

# libbpf's MAX_RESOLVE_DEPTH: chains of typedefs/modifiers/arrays longer than
# this are treated as loops rather than followed forever.
_MAX_RESOLVE_DEPTH = 32


@dataclass(frozen=True, slots=True)
class SpecialField:
    """One ``enum btf_field_type`` the kernel finds in a map value by its struct's name:
    its size (``btf_field_type_size``; a struct of that name with another size is not
    one), whether arrays of it are allowed (``btf_repeat_fields``: kptrs, list heads,
    rb roots; the rest only one at a time), whether a value holds at most one, and
    whether it is found instead as a pointer carrying ``btf_type_tag`` of that name
    (``btf_find_kptr``: ``__kptr``), the field's struct then being the pointed-to one."""

    size: int
    repeatable: bool = False
    unique: bool = True
    type_tag: bool = False
    # found in program-allocated objects only (btf_parse_struct_metas), not in map values
    obj_only: bool = False


# btf_get_field_type's struct names (and btf_find_kptr's tags), by name: the map value
# special fields pyxdp knows (a subsystem adding one registers it here).
SPECIAL_FIELDS: dict[str, SpecialField] = {
    "bpf_spin_lock": SpecialField(4),
    "bpf_res_spin_lock": SpecialField(4),
    "bpf_timer": SpecialField(16),
    "bpf_wq": SpecialField(16),
    "bpf_task_work": SpecialField(8),
    "kptr": SpecialField(8, repeatable=True, unique=False, type_tag=True),
    # the BPF linked list (struct list_head; a node is a list_head and its owner)
    "bpf_list_head": SpecialField(16, repeatable=True, unique=False),
    "bpf_list_node": SpecialField(24, repeatable=True, unique=False, obj_only=True),
    # the BPF red-black tree (struct rb_root_cached; a node is an rb_node and its owner)
    "bpf_rb_root": SpecialField(16, repeatable=True, unique=False),
    "bpf_rb_node": SpecialField(32, repeatable=True, unique=False, obj_only=True),
    "bpf_refcount": SpecialField(4, obj_only=True),
    # BPF_KPTR_PERCPU: ``__percpu_kptr``, a referenced pointer to a per-CPU object
    "percpu_kptr": SpecialField(8, repeatable=True, unique=False, type_tag=True),
    # BPF_KPTR_UNREF: ``__kptr_untrusted``, an unreferenced pointer to a kernel struct
    "kptr_untrusted": SpecialField(8, repeatable=True, unique=False, type_tag=True),
}
_KPTR_TAGS = ("kptr", "percpu_kptr", "kptr_untrusted")
# btf_find_kptr's other tag: Linux finds it (BPF_UPTR); pyxdp does not model it (a
# value's such pointer is plain bytes). Any other tag on a pointer member is a record
# Linux refuses.
_UNMODELLED_KPTR_TAGS = frozenset({"uptr"})
# One special field found: (name, byte offset, the BTF id of the struct a kptr points to
# or a list holds (else 0), the offset of the list's node member in that struct).
_Found = tuple[str, int, int, int]
# The graph roots and the node type each holds (btf_parse_graph_root's node_type_name)
_GRAPH_ROOTS = {"bpf_list_head": "bpf_list_node", "bpf_rb_root": "bpf_rb_node"}
# btf_parse_struct_metas' alloc_obj_fields: a struct with a member of one of these has a
# record (btf_struct_meta); a bpf_res_spin_lock alone gives none (Linux 6.18)
_ALLOC_OBJ_FIELDS = ("bpf_spin_lock", "bpf_list_head", "bpf_list_node",
                     "bpf_rb_root", "bpf_rb_node", "bpf_refcount")
# btf_find_graph_root: the declaration tag naming a list's struct and node member
_CONTAINS = "contains:"


class FieldError(Exception):
    """``btf_parse_fields`` refused the value's special fields (map creation fails with
    ``errno``)."""

    def __init__(self, errno_: int, msg: str) -> None:
        super().__init__(msg)
        self.errno = errno_
# BTF_MAX_* limits from the kernel's btf.h.
_BTF_MAX_TYPE = 0x000FFFFF
_BTF_MAX_NAME_OFFSET = 0x00FFFFFF

# BTF_KIND_INT encoding bits.
BTF_INT_SIGNED = 1 << 0
BTF_INT_CHAR = 1 << 1
BTF_INT_BOOL = 1 << 2
# enum btf_func_linkage (stored in the vlen of a FUNC).
BTF_FUNC_STATIC = 0
BTF_FUNC_GLOBAL = 1
BTF_FUNC_EXTERN = 2
# enum btf_var linkage.
BTF_VAR_STATIC = 0
BTF_VAR_GLOBAL_ALLOCATED = 1
BTF_VAR_GLOBAL_EXTERN = 2


class BtfKind(IntEnum):
    """``BTF_KIND_*`` values (bits 24-28 of ``btf_type.info``)."""

    UNKN = 0
    INT = 1
    PTR = 2
    ARRAY = 3
    STRUCT = 4
    UNION = 5
    ENUM = 6
    FWD = 7
    TYPEDEF = 8
    VOLATILE = 9
    CONST = 10
    RESTRICT = 11
    FUNC = 12
    FUNC_PROTO = 13
    VAR = 14
    DATASEC = 15
    FLOAT = 16
    DECL_TAG = 17
    TYPE_TAG = 18
    ENUM64 = 19


# Kinds whose third word is a byte size; every other kind stores a type id there.
_SIZED = frozenset({BtfKind.INT, BtfKind.STRUCT, BtfKind.UNION, BtfKind.ENUM,
                    BtfKind.DATASEC, BtfKind.FLOAT, BtfKind.ENUM64})
# Kinds that only qualify another type; skipped by Btf.resolve().
_MODIFIERS = frozenset({BtfKind.TYPEDEF, BtfKind.VOLATILE, BtfKind.CONST,
                        BtfKind.RESTRICT, BtfKind.TYPE_TAG})


@dataclass(frozen=True, slots=True)
class BtfArray:
    """``struct btf_array``: element type, index type, element count."""

    type: int
    index_type: int
    nelems: int


@dataclass(frozen=True, slots=True)
class BtfMember:
    """``struct btf_member``; the offset is split per the parent's kind_flag."""

    name: str
    name_off: int
    type: int
    bit_offset: int
    bitfield_size: int = 0


@dataclass(frozen=True, slots=True)
class BtfEnumValue:
    """``struct btf_enum`` / ``btf_enum64``; ``value`` is signed when kind_flag is set."""

    name: str
    name_off: int
    value: int


@dataclass(frozen=True, slots=True)
class BtfParam:
    """``struct btf_param`` of a FUNC_PROTO (type 0 for a trailing ``...``)."""

    name: str
    name_off: int
    type: int


@dataclass(frozen=True, slots=True)
class BtfVarSecinfo:
    """``struct btf_var_secinfo``: one VAR (or FUNC) placed in a DATASEC."""

    type: int
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class BtfType:
    """One type record with its kind-specific trailer already decoded.

    ``size_type`` is the raw third word: a byte size for INT/STRUCT/UNION/
    ENUM/ENUM64/DATASEC/FLOAT, a type id for everything else. For FUNC the
    ``vlen`` is the linkage, for VAR ``linkage`` holds ``btf_var.linkage``.
    """

    id: int
    kind: BtfKind
    name: str
    name_off: int
    vlen: int = 0
    kind_flag: bool = False
    size_type: int = 0
    int_encoding: int = 0
    int_offset: int = 0
    int_bits: int = 0
    array: BtfArray | None = None
    members: tuple[BtfMember, ...] = ()
    enum_values: tuple[BtfEnumValue, ...] = ()
    params: tuple[BtfParam, ...] = ()
    linkage: int = 0
    secinfos: tuple[BtfVarSecinfo, ...] = ()
    component_idx: int = -1

    @property
    def size(self) -> int:
        """Byte size of a sized kind (0 for kinds that reference a type)."""
        return self.size_type if self.kind in _SIZED else 0

    @property
    def type(self) -> int:
        """Referenced type id of a reference kind (0 for sized kinds)."""
        return 0 if self.kind in _SIZED else self.size_type

    def references(self) -> Iterator[int]:
        """Every type id this record points at (for validation and walking)."""
        if self.kind not in _SIZED and self.kind is not BtfKind.FWD:
            yield self.size_type
        if self.array is not None:
            yield self.array.type
            yield self.array.index_type
        for m in self.members:
            yield m.type
        for p in self.params:
            yield p.type
        for s in self.secinfos:
            yield s.type


_VOID = BtfType(id=0, kind=BtfKind.UNKN, name="", name_off=0)


def _err(message: str, path: str, section: str) -> ObjectError:
    return ObjectError(f"bad BTF: {message}", path=path, section=section)


@dataclass(frozen=True)
class Btf:
    """A parsed BTF blob: ``types[i]`` is type id ``i`` (``types[0]`` is void).

    ``strings`` is the raw string section; names are kept both decoded and as
    offsets so the blob re-encodes byte for byte (see :meth:`encode`).
    """

    types: tuple[BtfType, ...]
    strings: bytes
    _by_name: dict[str, tuple[int, ...]] = field(default_factory=dict, init=False,
                                                 repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, list[int]] = {}
        for t in self.types[1:]:
            if t.name:
                index.setdefault(t.name, []).append(t.id)
        self._by_name.update({k: tuple(v) for k, v in index.items()})

    # -- parsing -----------------------------------------------------------

    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview, *, path: str = "",
              section: str = ".BTF") -> Btf:
        """Parse and validate a raw BTF blob (little-endian, version 1)."""
        type_sec, strings = split_blob(data, path, section)
        types = _parse_types(type_sec, strings, path, section)
        btf = cls(types=types, strings=strings)
        btf._validate(path, section)
        return btf

    def _validate(self, path: str, section: str) -> None:
        count = len(self.types)
        for t in self.types[1:]:
            for ref in t.references():
                if ref >= count:
                    raise _err(f"type [{t.id}] {t.kind.name} refers to missing type [{ref}]",
                               path, section)
            if t.kind is BtfKind.DATASEC:
                for s in t.secinfos:
                    target = self.types[s.type]
                    if target.kind not in (BtfKind.VAR, BtfKind.FUNC):
                        raise _err(f"DATASEC [{t.id}] entry is a {target.kind.name}, "
                                   f"not a VAR", path, section)
            if t.kind is BtfKind.FUNC and self.types[t.size_type].kind is not \
                    BtfKind.FUNC_PROTO:
                raise _err(f"FUNC [{t.id}] {t.name!r} does not point at a FUNC_PROTO",
                           path, section)
        loop = self._value_loop()
        if loop is not None:
            t = self.types[loop]
            raise _err(f"type [{loop}] {t.kind.name} {t.name or '(anon)'} contains itself "
                       f"(loop detected)", path, section)
        for t in self.types[1:]:  # btf_struct_resolve's member checks (after loops)
            if t.kind not in (BtfKind.STRUCT, BtfKind.UNION):
                continue
            for m in t.members:
                if m.bitfield_size or self.types[self.resolve(m.type)].kind in (
                        BtfKind.INT, BtfKind.ENUM, BtfKind.ENUM64):
                    continue  # (bit-granular; its own checks)
                try:
                    msize = self.resolve_size(m.type)
                except ObjectError:
                    continue  # sizeless members: refused where their size is needed
                if m.bit_offset % 8 or m.bit_offset // 8 + msize > t.size_type:
                    what = "is not byte aligned" if m.bit_offset % 8 else "exceeds struct_size"
                    raise _err(f"member {m.name or '(anon)'} of [{t.id}] {t.kind.name} "
                               f"{t.name or '(anon)'} {what}", path, section)

    def _value_loop(self) -> int | None:
        """A type that contains itself by value (members, array elements, typedefs,
        modifiers: not through a pointer), which has no size; the kernel's BTF check
        answers "Loop detected". Iterative three-colour walk: the first type found on
        the path again, or None."""
        done = bytearray(len(self.types))  # 0 new, 1 on the current path, 2 done

        def edges(t: BtfType) -> list[int]:
            if t.kind in (BtfKind.STRUCT, BtfKind.UNION):
                return [m.type for m in t.members]
            if t.kind is BtfKind.ARRAY and t.array is not None:
                return [t.array.type]
            if t.kind in _MODIFIERS or t.kind is BtfKind.VAR:
                return [t.size_type]
            return []

        for root in range(1, len(self.types)):
            if done[root]:
                continue
            stack = [(root, iter(edges(self.types[root])))]
            done[root] = 1
            while stack:
                tid, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    done[tid] = 2
                    stack.pop()
                elif done[nxt] == 1:
                    return nxt
                elif not done[nxt]:
                    done[nxt] = 1
                    stack.append((nxt, iter(edges(self.types[nxt]))))
        return None

    # -- queries -----------------------------------------------------------

    def __len__(self) -> int:
        return len(self.types)

    def type_by_id(self, type_id: int) -> BtfType:
        """The record of ``type_id``; :class:`ObjectError` when it does not exist."""
        if not 0 <= type_id < len(self.types):
            raise ObjectError(f"bad BTF: no type [{type_id}]", section=".BTF")
        return self.types[type_id]

    def string_at(self, offset: int) -> str:
        """The NUL-terminated string at ``offset`` in the string section."""
        if not 0 <= offset < len(self.strings):
            raise ObjectError(f"bad BTF: string offset {offset} outside the string section",
                              section=".BTF")
        end = self.strings.index(b"\0", offset)
        return self.strings[offset:end].decode("utf-8", "replace")

    def find(self, name: str, kind: BtfKind | None = None) -> int | None:
        """First type id named ``name`` (of ``kind`` if given): ``btf__find_by_name_kind``."""
        for tid in self._by_name.get(name, ()):
            if kind is None or self.types[tid].kind is kind:
                return tid
        return None

    def find_all(self, name: str) -> tuple[int, ...]:
        """Every type id named ``name``, in id order."""
        return self._by_name.get(name, ())

    def resolve(self, type_id: int) -> int:
        """Skip typedefs and CV/type-tag modifiers (libbpf ``skip_mods_and_typedefs``)."""
        for _ in range(_MAX_RESOLVE_DEPTH):
            t = self.type_by_id(type_id)
            if t.kind not in _MODIFIERS:
                return type_id
            type_id = t.size_type
        raise ObjectError(f"bad BTF: modifier chain from [{type_id}] too deep or looping",
                          section=".BTF")

    def resolved(self, type_id: int) -> BtfType:
        return self.types[self.resolve(type_id)]

    def special_fields(self, type_id: int, names: Iterable[str] | None = None
                       ) -> list[tuple[str, int]]:
        """``btf_parse_fields`` of a map value of type ``type_id``: its special fields
        (:data:`SPECIAL_FIELDS`, those in ``names`` only when given) as (name, byte
        offset) in the order found; for a DATASEC (global data) the fields among
        its variables. As Linux 6.18's ``btf_find_field_one``:
        members are taken as typed (a modifier or typedef hides a field), fields are
        found in nested structs (not unions) at any depth below 32, an array counts its
        elements (none: no field); a ``kptr`` is an 8-byte aligned pointer (volatile
        allowed) to ``btf_type_tag("kptr")`` of a struct. :class:`FieldError` with
        Linux's errno for a record it refuses: a unique field twice among one struct's
        own members (E2BIG), an array of a non-repeatable field or of structs holding
        one (EINVAL), a bpf_spin_lock beside a bpf_res_spin_lock (EINVAL), fields that
        overlap (EEXIST), nesting too deep (E2BIG), a pointer member with two type
        tags, an unknown tag or a kptr to other than a struct (EINVAL). (Linux then
        keeps the map, with no special field at all.)"""
        return [(n, off) for n, off, _, _ in self._parse_fields(type_id, names)]

    def kptr_fields(self, type_id: int, tag: str = "kptr") -> dict[int, int]:
        """The referenced ``__kptr`` fields (``tag`` ``"percpu_kptr"``: the
        ``__percpu_kptr`` ones) :meth:`special_fields` finds in a value of
        type ``type_id`` (a record Linux refuses has none): byte offset -> the BTF id
        of the struct each points to (``btf_field_kptr.btf_id``)."""
        try:
            return {off: tid for n, off, tid, _ in self._parse_fields(type_id, (tag,))}
        except FieldError:
            return {}

    def graph_roots(self, type_id: int, root: str) -> dict[int, tuple[int, int]]:
        """The graph roots of kind ``root`` (``bpf_list_head``, ``bpf_rb_root``) of a
        value (or allocated object) of type ``type_id`` (a record Linux refuses has
        none): byte offset -> (the BTF id of the struct its ``__contains`` tag names,
        the offset of that struct's node member)."""
        try:
            return {off: (tid, node) for n, off, tid, node in
                    self._parse_fields(type_id, (root, "bpf_spin_lock"))
                    if n == root}
        except FieldError:
            return {}

    def obj_fields(self, type_id: int) -> list[tuple[str, int]]:
        """``btf_parse_struct_metas``: the special fields of a program's struct as an
        allocated object holds them (map value fields and graph nodes)."""
        return [(n, off) for n, off, _, _ in self._parse_fields(type_id, SPECIAL_FIELDS,
                                                                objects=True)]

    @cached_property
    def struct_meta_ids(self) -> list[int]:
        """The structs ``btf_parse_struct_metas`` gives a record: those with a member of
        a type :data:`_ALLOC_OBJ_FIELDS` names, or of a pointer to a kptr of a struct
        (``btf_find_kptr`` on every type: a ``__kptr``, ``__kptr_untrusted`` or
        ``__percpu_kptr`` pointer, volatile allowed)."""
        aof = {i for n in _ALLOC_OBJ_FIELDS for i in self._by_name.get(n, ())
               if self.types[i].kind is BtfKind.STRUCT}
        aof.update(t.id for t in self.types[1:] if self._is_kptr_ptr(t))
        return [t.id for t in self.types[1:]
                if t.kind is BtfKind.STRUCT and any(m.type in aof for m in t.members)]

    def struct_meta_kptrs(self) -> list[tuple[int, int]]:
        """(struct id, pointee struct id) of each referenced ``__kptr`` field of the
        structs with a record (:attr:`struct_meta_ids`): ``btf_parse_kptr`` looks each
        pointee up in the kernel's BTF, and one found there must have a destructor."""
        out = []
        for tid in self.struct_meta_ids:
            try:
                out += [(tid, target) for _, _, target, _ in
                        self._parse_fields(tid, ("kptr",), objects=True)]
            except FieldError:
                continue
        return out

    @cached_property
    def struct_metas_error(self) -> str | None:
        """Why ``BPF_BTF_LOAD`` refuses this BTF for its structs' records (None: it does
        not): ``btf_parse_struct_metas`` parses the record of every struct with a member
        of a type :data:`_ALLOC_OBJ_FIELDS` names (a graph root needs its
        bpf_spin_lock beside it, ...), and ``btf_check_and_fixup_fields`` refuses a
        struct both a graph root and a node whose roots hold structs with roots (their
        ownership could form a cycle: ELOOP). libbpf then loads the object without
        BTF."""
        recs: dict[int, set[str]] = {}
        for tid in self.struct_meta_ids:
            try:
                recs[tid] = {n for n, _ in self.obj_fields(tid)}
            except FieldError as e:
                return f"struct {self.types[tid].name}: {e}"
        for tid, names in recs.items():
            if not names & set(_GRAPH_ROOTS.values()):
                continue
            for root in _GRAPH_ROOTS:
                for elem, _ in self.graph_roots(tid, root).values():
                    if recs.get(elem, set()) & set(_GRAPH_ROOTS):
                        return (f"struct {self.types[tid].name}: a graph node holding "
                                f"struct {self.types[elem].name}, a graph root")
        return None

    def _is_kptr_ptr(self, t: BtfType) -> bool:
        """btf_find_kptr finds a field in a pointer of this type (BTF_FIELD_FOUND): one
        type tag Linux knows, on a struct (what btf_parse_struct_metas also looks for)."""
        if t.kind is BtfKind.VOLATILE and 0 < t.size_type < len(self.types):
            t = self.types[t.size_type]  # a modifier on the pointer itself is permitted
        if t.kind is not BtfKind.PTR or not 0 < t.size_type < len(self.types):
            return False
        tag = self.types[t.size_type]
        if tag.kind is not BtfKind.TYPE_TAG or tag.kind_flag or tag.name not in (
                *_KPTR_TAGS, *_UNMODELLED_KPTR_TAGS):
            return False
        if not 0 <= tag.size_type < len(self.types) or \
                self.types[tag.size_type].kind is BtfKind.TYPE_TAG:
            return False
        try:
            return self.types[self.resolve(tag.size_type)].kind is BtfKind.STRUCT
        except ObjectError:
            return False

    def _parse_fields(self, type_id: int, names: Iterable[str] | None, *,
                      objects: bool = False) -> list[_Found]:
        """:meth:`special_fields` with each kptr's struct id and each list's contents;
        graph nodes only in an allocated object's (``objects``)."""
        wanted = {n for n in (SPECIAL_FIELDS if names is None else names)
                  if n in SPECIAL_FIELDS and (objects or not SPECIAL_FIELDS[n].obj_only)}
        t = self.resolved(type_id)
        if t.kind is BtfKind.DATASEC:  # btf_find_datasec_var: global data's variables
            found: list[_Found] = []
            seen: set[str] = set()
            for vs in t.secinfos:
                var = self.type_by_id(vs.type)
                found.extend(self._field_one(var.size_type, vs.offset, wanted, seen, 0,
                                             vs.size, (vs.type, -1)))
        elif t.kind in (BtfKind.STRUCT, BtfKind.UNION):
            found = self._struct_fields(t, wanted, 0)
        else:
            return []
        got = {f[0] for f in found}
        if "bpf_spin_lock" in got and "bpf_res_spin_lock" in got:
            raise FieldError(errno.EINVAL, "a bpf_spin_lock and a bpf_res_spin_lock in one "
                                           "value")
        for root in _GRAPH_ROOTS:  # a list or tree needs its lock beside it
            if "bpf_spin_lock" in wanted and root in got and "bpf_spin_lock" not in got:
                raise FieldError(errno.EINVAL, f"a {root} without a bpf_spin_lock")
        end = 0
        for n, off, _, _ in found:
            if off < end:
                raise FieldError(errno.EEXIST, f"{n} at {off} overlaps another field")
            end = off + SPECIAL_FIELDS[n].size
        return found

    def _struct_fields(self, t: BtfType, wanted: set[str], level: int) -> list[_Found]:
        """btf_find_struct_field: the fields of struct or union ``t`` (offsets in it);
        the unique ones are counted among its own members only."""
        out: list[_Found] = []
        seen: set[str] = set()
        for k, mem in enumerate(t.members):
            if mem.bit_offset % 8:  # valid C code cannot give such BTF
                raise FieldError(errno.EINVAL, f"member {mem.name} not at a byte offset")
            out.extend(self._field_one(mem.type, mem.bit_offset // 8, wanted, seen, level,
                                       owner=(t.id, k)))
        return out

    def _field_one(self, type_id: int, off: int, wanted: set[str], seen: set[str],
                   level: int, expected: int = 0, owner: tuple[int, int] = (0, -1)
                   ) -> list[_Found]:
        """btf_find_field_one: the fields one member (or global variable, of ``expected``
        bytes) of type ``type_id`` at ``off`` holds; ``owner`` is where its declaration
        tags are (the struct's id and the member's index, or the variable's id and
        -1)."""
        nelems = 1
        vt = self.type_by_id(type_id)
        depth = 0
        while vt.kind is BtfKind.ARRAY and vt.array is not None:
            depth += 1
            if depth >= _MAX_RESOLVE_DEPTH:
                raise FieldError(errno.E2BIG, "array nesting too deep")
            nelems *= vt.array.nelems
            vt = self.type_by_id(vt.array.type)
        if nelems == 0:
            return []
        name = vt.name if vt.name in wanted and not SPECIAL_FIELDS[vt.name].type_tag else ""
        if name and SPECIAL_FIELDS[name].unique:  # btf_get_field_type's seen_mask
            if name in seen:
                raise FieldError(errno.E2BIG, f"more than one {name}")
            seen.add(name)
        if not name:
            if vt.kind is BtfKind.UNION:  # Linux 6.18 looks into no union
                return []
            if vt.kind is not BtfKind.STRUCT:  # btf_get_field_type: the last try, a kptr
                return self._kptr(vt, off, nelems, expected, wanted) \
                    if wanted.intersection(_KPTR_TAGS) else []
            # btf_find_nested_struct
            if level + 1 >= _MAX_RESOLVE_DEPTH:
                raise FieldError(errno.E2BIG, "struct nesting too deep")
            if expected and expected != vt.size_type * nelems:
                return []
            inner = self._struct_fields(vt, wanted, level + 1)
            return self._repeat(inner, nelems, vt.size_type, off)
        kind = SPECIAL_FIELDS[name]
        # btf_find_struct: only a struct of the field's size is one; aligned (4 or 8)
        if vt.kind not in (BtfKind.STRUCT, BtfKind.UNION) or vt.size_type != kind.size or \
                off % min(kind.size, 8) or (expected and expected != kind.size * nelems):
            return []
        held = self._graph_root(owner, _GRAPH_ROOTS[name]) if name in _GRAPH_ROOTS \
            else (0, 0)
        return self._repeat([(name, 0, *held)], nelems, kind.size, off)

    def _graph_root(self, owner: tuple[int, int], node_type: str) -> tuple[int, int]:
        """btf_find_graph_root and btf_parse_graph_root: the struct a list head's or
        tree root's ``contains:<struct>:<node>`` tag names (of this BTF) and the offset
        of its ``node_type`` member ``node`` (8-aligned); EINVAL for anything else."""
        root = next(r for r, n in _GRAPH_ROOTS.items() if n == node_type)
        tags = [t.name[len(_CONTAINS):] for t in self.types
                if t.kind is BtfKind.DECL_TAG and (t.size_type, t.component_idx) == owner
                and t.name.startswith(_CONTAINS)]
        if len(tags) != 1 or ":" not in tags[0]:
            raise FieldError(errno.EINVAL, f"a {root} without one contains: tag")
        struct, node = tags[0].split(":", 1)
        tid = self.find(struct, BtfKind.STRUCT)
        if not tid:
            raise FieldError(errno.EINVAL, f"contains: names no struct {struct}")
        for mem in self.types[tid].members:
            if mem.name == node:
                if self.resolved(mem.type).name != node_type or mem.bit_offset % 64:
                    break
                return tid, mem.bit_offset // 8
        raise FieldError(errno.EINVAL, f"struct {struct} has no {node_type} {node}")

    def _kptr(self, vt: BtfType, off: int, nelems: int, expected: int, wanted: set[str]
              ) -> list[_Found]:
        """btf_find_kptr: a member of type ``vt`` (not a struct) at ``off`` is a kptr
        when it is a pointer (volatile allowed) to a ``btf_type_tag("kptr")`` of a
        struct."""
        if (expected and expected != 8 * nelems) or off % 8:
            return []
        if vt.kind is BtfKind.VOLATILE:  # modifiers on the pointer itself
            vt = self.type_by_id(vt.size_type)
        if vt.kind is not BtfKind.PTR:
            return []
        tag = self.type_by_id(vt.size_type)
        if tag.kind is not BtfKind.TYPE_TAG or tag.kind_flag:
            return []
        if self.type_by_id(tag.size_type).kind is BtfKind.TYPE_TAG:
            raise FieldError(errno.EINVAL, "a kptr with more than one type tag")
        if tag.name in _UNMODELLED_KPTR_TAGS:
            return []
        if tag.name not in _KPTR_TAGS:
            raise FieldError(errno.EINVAL, f"a pointer tagged {tag.name!r}")
        target = self.resolve(tag.size_type)
        if self.types[target].kind is not BtfKind.STRUCT:
            raise FieldError(errno.EINVAL, "a kptr to other than a struct")
        if tag.name not in wanted:
            return []
        return self._repeat([(tag.name, 0, target, 0)], nelems, 8, off)

    @staticmethod
    def _repeat(fields: list[_Found], nelems: int, size: int, off: int) -> list[_Found]:
        """btf_repeat_fields: ``fields`` of one element, for each of ``nelems`` elements
        ``size`` bytes apart from ``off``; only repeatable fields may be repeated."""
        if nelems > 1:
            for n, _, _, _ in fields:
                if not SPECIAL_FIELDS[n].repeatable:
                    raise FieldError(errno.EINVAL, f"an array of {n}")
        return [(n, off + k * size + o, tid, node) for k in range(nelems)
                for n, o, tid, node in fields]

    def value_fields(self, type_id: int, names: Iterable[str]) -> dict[str, int]:
        """:meth:`special_fields` by name, each at the offset of the last one found (the
        one btf_record's ``spin_lock_off``, ``timer_off``... keep); a record Linux
        refuses gives none."""
        try:
            return dict(self.special_fields(type_id, names))
        except FieldError:
            return {}

    def resolve_size(self, type_id: int) -> int:
        """Byte size of ``type_id``, following libbpf's ``btf__resolve_size``."""
        nelems = 1
        for _ in range(_MAX_RESOLVE_DEPTH):
            t = self.type_by_id(type_id)
            if t.kind in (BtfKind.INT, BtfKind.STRUCT, BtfKind.UNION, BtfKind.ENUM,
                          BtfKind.ENUM64, BtfKind.DATASEC, BtfKind.FLOAT):
                size = t.size_type
                break
            if t.kind is BtfKind.PTR:
                size = 8  # BPF targets have 8-byte pointers whatever the host
                break
            if t.kind in _MODIFIERS or t.kind is BtfKind.VAR:
                type_id = t.size_type
                continue
            if t.kind is BtfKind.ARRAY and t.array is not None:
                if t.array.nelems and nelems > 0xFFFF_FFFF // t.array.nelems:
                    raise ObjectError(f"bad BTF: array [{t.id}] size overflows", section=".BTF")
                nelems *= t.array.nelems
                type_id = t.array.type
                continue
            raise ObjectError(f"bad BTF: type [{type_id}] {t.kind.name} has no size",
                              section=".BTF")
        else:
            raise ObjectError(f"bad BTF: type chain from [{type_id}] too deep or looping",
                              section=".BTF")
        if nelems and size > 0xFFFF_FFFF // nelems:
            raise ObjectError(f"bad BTF: size of type [{type_id}] overflows", section=".BTF")
        return nelems * size

    def describe(self, type_id: int) -> str:
        """Short C-like spelling of a type for messages (``struct foo``, ``__u32 *``)."""
        depth = 0
        suffix = ""
        while depth < _MAX_RESOLVE_DEPTH:
            depth += 1
            t = self.type_by_id(type_id)
            if t.kind is BtfKind.UNKN:
                return "void" + suffix
            if t.kind is BtfKind.PTR:
                suffix = " *" + suffix
                type_id = t.size_type
                continue
            if t.kind is BtfKind.ARRAY and t.array is not None:
                suffix = f"{suffix}[{t.array.nelems}]"
                type_id = t.array.type
                continue
            if t.kind in (BtfKind.CONST, BtfKind.VOLATILE, BtfKind.RESTRICT,
                          BtfKind.TYPE_TAG) and not t.name:
                type_id = t.size_type
                continue
            prefix = {BtfKind.STRUCT: "struct ", BtfKind.UNION: "union ",
                      BtfKind.ENUM: "enum ", BtfKind.ENUM64: "enum "}.get(t.kind, "")
            return f"{prefix}{t.name or '(anon)'}{suffix}"
        return "?" + suffix

    # -- encoding ----------------------------------------------------------

    def encode(self) -> bytes:
        """The blob as the kernel expects it: 24-byte header, types, strings."""
        body = b"".join(_encode_type(t) for t in self.types[1:])
        hdr = _HDR.pack(BTF_MAGIC, BTF_VERSION, 0, _HDR.size, 0, len(body), len(body),
                        len(self.strings))
        return hdr + body + self.strings

    @cached_property
    def raw(self) -> bytes:
        """Encoded blob (computed once; the dataclass is immutable)."""
        return self.encode()

    def with_types(self, changed: dict[int, BtfType]) -> Btf:
        """A copy with some records replaced (ids keep their positions)."""
        types = list(self.types)
        for tid, t in changed.items():
            types[tid] = replace(t, id=tid)
        return Btf(types=tuple(types), strings=self.strings)


_EXTRA_FIXED = {BtfKind.INT: 4, BtfKind.ARRAY: _ARRAY.size, BtfKind.VAR: 4,
                BtfKind.DECL_TAG: 4}
_EXTRA_PER_VLEN = {BtfKind.STRUCT: _MEMBER.size, BtfKind.UNION: _MEMBER.size,
                   BtfKind.ENUM: _ENUM.size, BtfKind.FUNC_PROTO: _PARAM.size,
                   BtfKind.DATASEC: _SECINFO.size, BtfKind.ENUM64: _ENUM64.size}
# The same by raw kind number (for record_offsets' tight loop).
_EXTRA_BY_KIND = [(_EXTRA_FIXED.get(k, 0), _EXTRA_PER_VLEN.get(k, 0))
                  for k in (BtfKind(i) if i in BtfKind._value2member_map_ else BtfKind.UNKN
                            for i in range(32))]


def record_offsets(sec: bytes) -> tuple[list[int], list[int]]:
    """Where each type record starts in a type section, and its ``name_off``, without
    decoding anything else: a large BTF (vmlinux) indexed in a fraction of a parse.
    ``[0]`` stands for void in both lists."""
    offsets = [0]
    names = [0]
    pos, end = 0, len(sec)
    unpack = _TYPE.unpack_from
    extra = _EXTRA_BY_KIND
    while pos + 12 <= end:
        name_off, info, _ = unpack(sec, pos)
        offsets.append(pos)
        names.append(name_off)
        fixed, per = extra[(info >> 24) & 0x1F]
        pos += 12 + fixed + per * (info & 0xFFFF)
    return offsets, names


def split_blob(data: bytes | bytearray | memoryview, path: str = "",
               section: str = ".BTF") -> tuple[bytes, bytes]:
    """The type and string sections of a raw BTF blob, its header checked."""
    raw = bytes(data)
    if len(raw) < _HDR.size:
        raise _err(f"blob of {len(raw)} bytes is shorter than the header", path, section)
    magic, version, flags, hdr_len, type_off, type_len, str_off, str_len = \
        _HDR.unpack_from(raw, 0)
    if magic == 0x9FEB:
        raise _err("big-endian BTF does not match this little-endian target", path, section)
    if magic != BTF_MAGIC:
        raise _err(f"magic {magic:#06x} is not {BTF_MAGIC:#06x}", path, section)
    if version != BTF_VERSION:
        raise _err(f"version {version} is not {BTF_VERSION}", path, section)
    if flags:
        raise _err(f"unsupported header flags {flags:#x}", path, section)
    if hdr_len < _HDR.size or hdr_len > len(raw):
        raise _err(f"header length {hdr_len} out of range", path, section)
    # The kernel accepts a longer header only if the unknown tail is zero.
    if any(raw[_HDR.size:hdr_len]):
        raise _err("non-zero bytes in the unknown header tail", path, section)
    body = raw[hdr_len:]
    if type_off % 4:
        raise _err(f"type section offset {type_off} is not 4-byte aligned", path, section)
    if type_off + type_len > len(body) or str_off + str_len > len(body):
        raise _err("type or string section runs past the end of the blob", path, section)
    if type_off + type_len > str_off:
        raise _err("type section overlaps the string section", path, section)
    strings = body[str_off:str_off + str_len]
    if not strings or strings[0] != 0 or strings[-1] != 0:
        raise _err("string section must start and end with a NUL byte", path, section)
    return body[type_off:type_off + type_len], strings


def _name_at(strings: bytes, off: int, what: str, path: str, section: str) -> str:
    if off >= len(strings) or off > _BTF_MAX_NAME_OFFSET:
        raise _err(f"{what}: name offset {off} outside the string section", path, section)
    end = strings.index(b"\0", off)
    return strings[off:end].decode("utf-8", "replace")


def parse_type(sec: bytes, pos: int, tid: int, strings: bytes, path: str = "",
               section: str = ".BTF", *, names_checked: bool = True) -> tuple[BtfType, int]:
    """The type record at ``pos`` of a type section as type ``tid``, and where the
    next record starts. ``names_checked=False``: a name offset outside the string
    section reads as the empty name (for checks that report it themselves)."""
    def name_at(off: int, what: str) -> str:
        if not names_checked and off >= len(strings):
            return ""
        return _name_at(strings, off, what, path, section)

    if pos + _TYPE.size > len(sec):
        raise _err(f"type [{tid}] record truncated", path, section)
    name_off, info, size_type = _TYPE.unpack_from(sec, pos)
    pos += _TYPE.size
    vlen = info & 0xFFFF
    kind_raw = (info >> 24) & 0x1F
    kind_flag = bool(info >> 31)
    if info & 0x60FF0000:
        raise _err(f"type [{tid}] has reserved info bits set ({info:#x})", path, section)
    try:
        kind = BtfKind(kind_raw)
    except ValueError:
        raise _err(f"type [{tid}] has unknown kind {kind_raw}", path, section) from None
    if kind is BtfKind.UNKN:
        raise _err(f"type [{tid}] has kind UNKN", path, section)
    name = name_at(name_off, f"type [{tid}]")
    extra = _EXTRA_FIXED.get(kind, 0) + _EXTRA_PER_VLEN.get(kind, 0) * vlen
    if pos + extra > len(sec):
        raise _err(f"type [{tid}] {kind.name} trailer truncated", path, section)
    t = BtfType(id=tid, kind=kind, name=name, name_off=name_off, vlen=vlen,
                kind_flag=kind_flag, size_type=size_type)
    if kind is BtfKind.INT:
        (word,) = _U32.unpack_from(sec, pos)
        t = replace(t, int_encoding=(word >> 24) & 0x0F, int_offset=(word >> 16) & 0xFF,
                    int_bits=word & 0xFF)
    elif kind is BtfKind.ARRAY:
        t = replace(t, array=BtfArray(*_ARRAY.unpack_from(sec, pos)))
    elif kind in (BtfKind.STRUCT, BtfKind.UNION):
        members = []
        for i in range(vlen):
            m_name, m_type, m_off = _MEMBER.unpack_from(sec, pos + i * _MEMBER.size)
            bits, bsize = (m_off & 0xFFFFFF, m_off >> 24) if kind_flag else (m_off, 0)
            members.append(BtfMember(name_at(m_name, f"member {i} of [{tid}]"), m_name,
                                     m_type, bits, bsize))
        t = replace(t, members=tuple(members))
    elif kind is BtfKind.ENUM:
        values = []
        for i in range(vlen):
            e_name, e_val = _ENUM.unpack_from(sec, pos + i * _ENUM.size)
            value = e_val if kind_flag else e_val & 0xFFFF_FFFF
            values.append(BtfEnumValue(name_at(e_name, f"enumerator {i} of [{tid}]"),
                                       e_name, value))
        t = replace(t, enum_values=tuple(values))
    elif kind is BtfKind.ENUM64:
        values = []
        for i in range(vlen):
            e_name, lo, hi = _ENUM64.unpack_from(sec, pos + i * _ENUM64.size)
            value = lo | (hi << 32)
            if kind_flag and value >> 63:
                value -= 1 << 64
            values.append(BtfEnumValue(name_at(e_name, f"enumerator {i} of [{tid}]"),
                                       e_name, value))
        t = replace(t, enum_values=tuple(values))
    elif kind is BtfKind.FUNC_PROTO:
        params = []
        for i in range(vlen):
            p_name, p_type = _PARAM.unpack_from(sec, pos + i * _PARAM.size)
            params.append(BtfParam(name_at(p_name, f"param {i} of [{tid}]"), p_name, p_type))
        t = replace(t, params=tuple(params))
    elif kind is BtfKind.VAR:
        (linkage,) = _U32.unpack_from(sec, pos)
        t = replace(t, linkage=linkage)
    elif kind is BtfKind.DATASEC:
        t = replace(t, secinfos=tuple(
            BtfVarSecinfo(*_SECINFO.unpack_from(sec, pos + i * _SECINFO.size))
            for i in range(vlen)))
    elif kind is BtfKind.DECL_TAG:
        (comp,) = _S32.unpack_from(sec, pos)
        t = replace(t, component_idx=comp)
    elif kind is BtfKind.FUNC:
        t = replace(t, linkage=vlen)
    return t, pos + extra


def _parse_types(sec: bytes, strings: bytes, path: str, section: str) -> tuple[BtfType, ...]:
    types: list[BtfType] = [_VOID]
    pos = 0
    while pos < len(sec):
        tid = len(types)
        if tid > _BTF_MAX_TYPE:
            raise _err("more types than BTF can number", path, section)
        t, pos = parse_type(sec, pos, tid, strings, path, section)
        types.append(t)
    return tuple(types)


def _encode_type(t: BtfType) -> bytes:
    if t.kind in (BtfKind.STRUCT, BtfKind.UNION):
        vlen = len(t.members)
    elif t.kind in (BtfKind.ENUM, BtfKind.ENUM64):
        vlen = len(t.enum_values)
    elif t.kind is BtfKind.FUNC_PROTO:
        vlen = len(t.params)
    elif t.kind is BtfKind.DATASEC:
        vlen = len(t.secinfos)
    elif t.kind is BtfKind.FUNC:
        vlen = t.linkage
    else:
        vlen = t.vlen
    info = (int(t.kind) << 24) | (vlen & 0xFFFF) | (int(t.kind_flag) << 31)
    out = [_TYPE.pack(t.name_off, info, t.size_type & 0xFFFF_FFFF)]
    if t.kind is BtfKind.INT:
        out.append(_U32.pack((t.int_encoding << 24) | (t.int_offset << 16) | t.int_bits))
    elif t.kind is BtfKind.ARRAY and t.array is not None:
        out.append(_ARRAY.pack(t.array.type, t.array.index_type, t.array.nelems))
    elif t.kind in (BtfKind.STRUCT, BtfKind.UNION):
        for m in t.members:
            off = (m.bitfield_size << 24) | m.bit_offset if t.kind_flag else m.bit_offset
            out.append(_MEMBER.pack(m.name_off, m.type, off))
    elif t.kind is BtfKind.ENUM:
        for e in t.enum_values:
            out.append(struct.pack("<II", e.name_off, e.value & 0xFFFF_FFFF))
    elif t.kind is BtfKind.ENUM64:
        for e in t.enum_values:
            v = e.value & 0xFFFF_FFFF_FFFF_FFFF
            out.append(_ENUM64.pack(e.name_off, v & 0xFFFF_FFFF, v >> 32))
    elif t.kind is BtfKind.FUNC_PROTO:
        for p in t.params:
            out.append(_PARAM.pack(p.name_off, p.type))
    elif t.kind is BtfKind.VAR:
        out.append(_U32.pack(t.linkage))
    elif t.kind is BtfKind.DATASEC:
        for s in t.secinfos:
            out.append(_SECINFO.pack(s.type, s.offset, s.size))
    elif t.kind is BtfKind.DECL_TAG:
        out.append(_S32.pack(t.component_idx))
    return b"".join(out)
