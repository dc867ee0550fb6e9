"""CO-RE, Compile Once - Run Everywhere: ``tools/lib/bpf/relo_core.c`` as libbpf applies it.

clang records, for every instruction whose constant depends on a kernel
type's layout (``__builtin_preserve_access_index``, ``bpf_core_read``,
``bpf_core_field_exists``, ``bpf_core_type_size``, ``bpf_core_enum_value``...),
a ``struct bpf_core_relo``: the local type, an access string (``"0:1:2"``:
array index on the root, then member or element indices) and a kind. A loader
finds the same type in the target's BTF by its essential name (``xdp_md___v2``
is ``xdp_md``), matches the access path member by member *by name*, and
rewrites the instruction's constant with the target's value:

* field kinds: byte offset (``LDX``/``ST``/``STX`` offset, or an ALU/ld_imm64
  constant; the access size follows the field when both are unsigned ints or
  pointers), byte size, exists, signed, the shifts that extract a bitfield;
* type kinds: local and target type id, exists, size, matches;
* enum kinds: enumerator exists, its value.

Every candidate that matches must give the same value (else "ambiguity"). When
none matches, the ``exists``/``matches``/type-id kinds give 0 and the others
*poison* the instruction (``call 0xbad2310``: the kernel's verifier refuses it
only if it is reachable); :func:`apply_core_relos` either poisons (the kernel
backend, whose verifier decides) or raises :class:`CoreRelocationError` naming
the relocation and the type, as libbpf's log does (pyxdp's engines). An
instruction whose constant is not the local value the relocation expects is
refused, as libbpf refuses it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction
from pyxdp.btf.btf import BTF_FUNC_EXTERN, BTF_INT_SIGNED, Btf, BtfKind, BtfType
from pyxdp.errors import InvalidProgram, ObjectError, PyxdpError
from pyxdp.spec import CoreRelocation, ProgramSpec

__all__ = ["POISON_HELPER", "CoreRelocationError", "CoreReloKind", "TypeSource",
           "apply_core_relos", "check_kfunc_proto", "essential_name"]

# libbpf's poisoned-call helper id: "0xbad2310", spelled in decimal.
POISON_HELPER = 195896080
_MAX_DEPTH = 32
_SHRT_MAX = 0x7FFF


class CoreReloKind(IntEnum):
    """``enum bpf_core_relo_kind`` (uapi bpf.h)."""

    FIELD_BYTE_OFFSET = 0
    FIELD_BYTE_SIZE = 1
    FIELD_EXISTS = 2
    FIELD_SIGNED = 3
    FIELD_LSHIFT_U64 = 4
    FIELD_RSHIFT_U64 = 5
    TYPE_ID_LOCAL = 6
    TYPE_ID_TARGET = 7
    TYPE_EXISTS = 8
    TYPE_SIZE = 9
    ENUMVAL_EXISTS = 10
    ENUMVAL_VALUE = 11
    TYPE_MATCHES = 12


# libbpf's core_relo_kind_str spellings.
_KIND_STR = {0: "byte_off", 1: "byte_sz", 2: "field_exists", 3: "signed", 4: "lshift_u64",
             5: "rshift_u64", 6: "local_type_id", 7: "target_type_id", 8: "type_exists",
             9: "type_size", 10: "enumval_exists", 11: "enumval_value", 12: "type_matches"}
_FIELD = frozenset(range(0, 6))
_TYPE = frozenset({6, 7, 8, 9, 12})
_ENUM = frozenset({10, 11})
_MODS = frozenset({BtfKind.TYPEDEF, BtfKind.VOLATILE, BtfKind.CONST, BtfKind.RESTRICT,
                   BtfKind.TYPE_TAG})
_COMPOSITE = frozenset({BtfKind.STRUCT, BtfKind.UNION})
_ENUMS = frozenset({BtfKind.ENUM, BtfKind.ENUM64})


class CoreRelocationError(InvalidProgram):
    """A CO-RE relocation that cannot be applied to the target BTF (names it)."""


class TypeSource(Protocol):
    """What CO-RE asks of a BTF: :class:`~pyxdp.btf.btf.Btf` and
    :class:`~pyxdp.btf.vmlinux.BtfIndex` both answer."""

    def type_by_id(self, type_id: int) -> BtfType: ...

    def find_all(self, name: str) -> tuple[int, ...]: ...


def essential_name(name: str) -> str:
    """libbpf's ``bpf_core_essential_name_len``: the name without its ``___flavor``."""
    for i in range(len(name) - 5, -1, -1):
        if (name[i] != "_" and name[i + 1:i + 4] == "___" and i + 4 < len(name)
                and name[i + 4] != "_"):
            return name[:i + 1]
    return name


def _skip_mods(src: TypeSource, tid: int) -> tuple[int, BtfType]:
    for _ in range(_MAX_DEPTH):
        t = src.type_by_id(tid)
        if t.kind not in _MODS:
            return tid, t
        tid = t.size_type
    raise ObjectError(f"bad BTF: modifier chain from [{tid}] too deep", section=".BTF")


def _size(src: TypeSource, tid: int) -> int:
    nelems = 1
    for _ in range(_MAX_DEPTH):
        t = src.type_by_id(tid)
        if t.kind in (BtfKind.INT, BtfKind.STRUCT, BtfKind.UNION, BtfKind.ENUM,
                      BtfKind.ENUM64, BtfKind.FLOAT, BtfKind.DATASEC):
            return nelems * t.size_type
        if t.kind is BtfKind.PTR:
            return nelems * 8
        if t.kind in _MODS or t.kind is BtfKind.VAR:
            tid = t.size_type
        elif t.kind is BtfKind.ARRAY and t.array is not None:
            nelems *= t.array.nelems
            tid = t.array.type
        else:
            raise ObjectError(f"bad BTF: type [{tid}] {t.kind.name} has no size",
                              section=".BTF")
    raise ObjectError(f"bad BTF: type chain from [{tid}] too deep", section=".BTF")


def _describe(src: TypeSource, tid: int) -> str:
    t = src.type_by_id(tid)
    prefix = {BtfKind.STRUCT: "struct ", BtfKind.UNION: "union ", BtfKind.ENUM: "enum ",
              BtfKind.ENUM64: "enum ", BtfKind.TYPEDEF: "typedef ",
              BtfKind.FWD: "fwd "}.get(t.kind, "")
    return f"{prefix}{t.name or '(anon)'}"


@dataclass(frozen=True, slots=True)
class _Acc:
    """One accessor: a named member (``type_id`` the struct, ``idx`` the member),
    an array element (``name`` empty) or an enumerator."""

    type_id: int
    idx: int
    name: str


@dataclass(slots=True)
class _Spec:
    """libbpf's ``struct bpf_core_spec``."""

    src: TypeSource
    root_type_id: int
    raw: list[int]
    accs: list[_Acc]
    bit_offset: int = 0


def _parse_spec(src: TypeSource, type_id: int, access: str, kind: int) -> _Spec:
    """``bpf_core_parse_spec`` on the local BTF."""
    try:
        raw = [int(x) for x in access.split(":")]
    except ValueError:
        raise ValueError(f"access string {access!r} is not colon-separated numbers") from None
    if not raw or any(x < 0 for x in raw):
        raise ValueError(f"access string {access!r} is empty or negative")
    spec = _Spec(src, type_id, raw, [])
    if kind in _TYPE:
        if raw != [0]:
            raise ValueError(f"type relocation with access string {access!r}, not \"0\"")
        return spec
    tid, t = _skip_mods(src, type_id)
    if kind in _ENUM:
        if t.kind not in _ENUMS or len(raw) != 1 or raw[0] >= len(t.enum_values):
            raise ValueError(f"enum relocation {access!r} on {_describe(src, type_id)}")
        spec.accs.append(_Acc(type_id, raw[0], t.enum_values[raw[0]].name))
        return spec
    spec.accs.append(_Acc(type_id, raw[0], ""))
    spec.bit_offset = raw[0] * _size(src, type_id) * 8
    for idx in raw[1:]:
        tid, t = _skip_mods(src, tid)
        if t.kind in _COMPOSITE:
            if idx >= len(t.members):
                raise ValueError(f"member #{idx} of {_describe(src, tid)} does not exist")
            m = t.members[idx]
            spec.bit_offset += m.bit_offset
            if m.name:
                spec.accs.append(_Acc(tid, idx, m.name))
            tid = m.type
        elif t.kind is BtfKind.ARRAY and t.array is not None:
            tid = t.array.type
            spec.accs.append(_Acc(tid, idx, ""))
            spec.bit_offset += idx * _size(src, tid) * 8
        else:
            raise ValueError(f"access #{idx} into {_describe(src, tid)}, which has no members")
    return spec


def _fields_compat(ls: TypeSource, lid: int, ts: TypeSource, tid: int) -> bool:
    """``bpf_core_fields_are_compat``."""
    for _ in range(_MAX_DEPTH):
        lid, lt = _skip_mods(ls, lid)
        tid, tt = _skip_mods(ts, tid)
        if lt.kind in _COMPOSITE and tt.kind in _COMPOSITE:
            return True
        if lt.kind is not tt.kind and not (lt.kind in _ENUMS and tt.kind in _ENUMS):
            return False
        if lt.kind in (BtfKind.PTR, BtfKind.FLOAT):
            return True
        if lt.kind in (BtfKind.FWD, BtfKind.ENUM, BtfKind.ENUM64):
            return essential_name(lt.name) == essential_name(tt.name)
        if lt.kind is BtfKind.INT:
            return lt.int_offset == 0 and tt.int_offset == 0
        if lt.kind is BtfKind.ARRAY and lt.array is not None and tt.array is not None:
            lid, tid = lt.array.type, tt.array.type
            continue
        return False
    return False


def _types_compat(ls: TypeSource, lid: int, ts: TypeSource, tid: int, depth: int = 0
                  ) -> bool:
    """``bpf_core_types_are_compat``."""
    if depth > _MAX_DEPTH:
        return False
    lid, lt = _skip_mods(ls, lid)
    tid, tt = _skip_mods(ts, tid)
    if lt.kind is not tt.kind and not (lt.kind in _ENUMS and tt.kind in _ENUMS):
        return False
    if lt.kind in (BtfKind.UNKN, BtfKind.STRUCT, BtfKind.UNION, BtfKind.ENUM,
                   BtfKind.ENUM64, BtfKind.FWD, BtfKind.FLOAT):
        return True
    if lt.kind is BtfKind.INT:
        return lt.int_offset == 0 and tt.int_offset == 0
    if lt.kind is BtfKind.PTR:
        return _types_compat(ls, lt.size_type, ts, tt.size_type, depth + 1)
    if lt.kind is BtfKind.ARRAY and lt.array is not None and tt.array is not None:
        return _types_compat(ls, lt.array.type, ts, tt.array.type, depth + 1)
    if lt.kind is BtfKind.FUNC_PROTO:
        if len(lt.params) != len(tt.params):
            return False
        return all(_types_compat(ls, a.type, ts, b.type, depth + 1)
                   for a, b in zip(lt.params, tt.params, strict=True)) and \
            _types_compat(ls, lt.size_type, ts, tt.size_type, depth + 1)
    return False


def check_kfunc_proto(prog: str, name: str, local: Btf | None, target: TypeSource,
                      target_func: int) -> None:
    """libbpf's check of a kfunc extern (``bpf_object__resolve_ksym_func_btf_id``): the
    prototype the object declares (its extern ``FUNC`` ``name``) must be compatible
    (``bpf_core_types_are_compat``) with the kernel's, else the object does not load,
    though the verifier, which checks the call against the kernel's own prototype,
    would take it. A declaration without parameters (``extern void f() __ksym``)
    matches no kfunc that has some."""
    if local is None:  # no BTF: nothing libbpf could compare
        return
    funcs = [t for t in map(local.type_by_id, local.find_all(name)) if t.kind is BtfKind.FUNC]
    extern = [t for t in funcs if t.vlen == BTF_FUNC_EXTERN] or funcs
    if not extern:
        return
    local_func = extern[0].id
    local_proto = local.type_by_id(local_func).size_type
    target_proto = target.type_by_id(target_func).size_type
    if not _types_compat(local, local_proto, target, target_proto):
        raise PyxdpError(f"program {prog!r}: extern (func ksym) {name!r}: func_proto "
                         f"[{local_proto}] incompatible with vmlinux [{target_proto}]")


def _match_member(ls: TypeSource, lacc: _Acc, ts: TypeSource, targ_id: int, spec: _Spec,
                  depth: int = 0) -> int | None:
    """``bpf_core_match_member``: the target member named as the local one (searching
    anonymous members too); appends its accessor and returns its type id."""
    if depth > _MAX_DEPTH:
        return None
    local_t = ls.type_by_id(lacc.type_id)
    local_m = local_t.members[lacc.idx]
    targ_id, tt = _skip_mods(ts, targ_id)
    if tt.kind not in _COMPOSITE:
        return None
    for i, m in enumerate(tt.members):
        if not m.name:
            # An anonymous struct/union: look inside, keeping its offset.
            save = spec.bit_offset
            spec.bit_offset += m.bit_offset
            found = _match_member(ls, lacc, ts, m.type, spec, depth + 1)
            if found is not None:
                return found
            spec.bit_offset = save
            continue
        if m.name != local_m.name:
            continue
        if (local_m.bitfield_size != 0) != (m.bitfield_size != 0) and \
                _skip_mods(ls, local_m.type)[1].kind is not BtfKind.INT:
            return None
        if not _fields_compat(ls, local_m.type, ts, m.type):
            return None
        spec.bit_offset += m.bit_offset
        spec.raw.append(i)
        spec.accs.append(_Acc(targ_id, i, m.name))
        return m.type
    return None


def _match_spec(local: _Spec, kind: int, ts: TypeSource, cand_id: int) -> _Spec | None:
    """``bpf_core_spec_match``: the local spec followed in candidate ``cand_id``."""
    ls = local.src
    targ = _Spec(ts, cand_id, [], [])
    if kind in _TYPE:
        if kind == CoreReloKind.TYPE_MATCHES or _types_compat(ls, local.root_type_id,
                                                               ts, cand_id):
            return targ
        return None
    if kind in _ENUM:
        lacc = local.accs[0]
        want = essential_name(lacc.name)
        _, tt = _skip_mods(ts, cand_id)
        if tt.kind not in _ENUMS:
            return None
        for i, v in enumerate(tt.enum_values):
            if essential_name(v.name) == want:
                targ.accs.append(_Acc(cand_id, i, v.name))
                targ.raw.append(i)
                return targ
        return None
    targ_id = cand_id
    for i, lacc in enumerate(local.accs):
        if i == 0:
            targ.accs.append(_Acc(cand_id, lacc.idx, ""))
            targ.raw.append(lacc.idx)
            targ.bit_offset = lacc.idx * _size(ts, cand_id) * 8
            continue
        if lacc.name:
            found = _match_member(ls, lacc, ts, targ_id, targ)
            if found is None:
                return None
            targ_id = found
            continue
        targ_id, tt = _skip_mods(ts, targ_id)
        if tt.kind is not BtfKind.ARRAY or tt.array is None:
            return None
        if lacc.idx >= tt.array.nelems and tt.array.nelems != 0:
            return None
        targ_id = tt.array.type
        targ.accs.append(_Acc(targ_id, lacc.idx, ""))
        targ.raw.append(lacc.idx)
        targ.bit_offset += lacc.idx * _size(ts, targ_id) * 8
    return targ


class _Poison(Exception):
    """libbpf's -EUCLEAN: the relocation cannot be computed for this target."""


@dataclass(slots=True)
class _Value:
    val: int
    size: int = 0  # the field's byte size, for load/store size adjustment
    type_id: int = 0
    validate: bool = True


def _field_value(spec: _Spec | None, kind: int) -> _Value:
    """``bpf_core_calc_field_relo``."""
    if kind == CoreReloKind.FIELD_EXISTS:
        return _Value(1 if spec is not None else 0)
    if spec is None:
        raise _Poison
    src = spec.src
    acc = spec.accs[-1]
    if not acc.name:
        if kind == CoreReloKind.FIELD_BYTE_OFFSET:
            return _Value(spec.bit_offset // 8, _size(src, acc.type_id), acc.type_id)
        if kind == CoreReloKind.FIELD_BYTE_SIZE:
            return _Value(_size(src, acc.type_id))
        raise ValueError("this relocation kind cannot be applied to an array access")
    t = src.type_by_id(acc.type_id)
    m = t.members[acc.idx]
    field_id, mtype = _skip_mods(src, m.type)
    bit_off = spec.bit_offset
    bit_sz = m.bitfield_size
    bitfield = bit_sz > 0
    if bitfield:
        if mtype.kind not in (BtfKind.INT, BtfKind.ENUM, BtfKind.ENUM64) \
                or not mtype.size_type:  # (the kernel's BTF check refuses such a member too)
            raise ValueError(f"bitfield member #{acc.idx} of {_describe(src, acc.type_id)} "
                             f"is not of a sized integer or enum type")
        byte_sz = mtype.size_type
        byte_off = bit_off // 8 // byte_sz * byte_sz
        while bit_off + bit_sz - byte_off * 8 > byte_sz * 8:
            if byte_sz >= 8:
                raise ValueError("bitfield does not fit an 8-byte load")
            byte_sz *= 2
            byte_off = bit_off // 8 // byte_sz * byte_sz
    else:
        byte_sz = _size(src, field_id)
        byte_off = bit_off // 8
        bit_sz = byte_sz * 8
    k = kind
    if k == CoreReloKind.FIELD_BYTE_OFFSET:
        return _Value(byte_off, 0 if bitfield else byte_sz, 0 if bitfield else field_id,
                      not bitfield)
    if k == CoreReloKind.FIELD_BYTE_SIZE:
        return _Value(byte_sz, validate=not bitfield)
    if k == CoreReloKind.FIELD_SIGNED:
        signed = (mtype.kind in _ENUMS and mtype.kind_flag) or (
            mtype.kind is BtfKind.INT and bool(mtype.int_encoding & BTF_INT_SIGNED))
        return _Value(int(signed), validate=not bitfield)
    if k == CoreReloKind.FIELD_LSHIFT_U64:
        return _Value(64 - (bit_off + bit_sz - byte_off * 8), validate=not bitfield)
    return _Value(64 - bit_sz)  # RSHIFT_U64 is never ambiguous


def _type_value(spec: _Spec | None, kind: int, local_id: int) -> _Value:
    if kind == CoreReloKind.TYPE_ID_LOCAL:
        return _Value(local_id)
    if spec is None:
        return _Value(0)  # type-based relocations give 0 without a target
    if kind == CoreReloKind.TYPE_ID_TARGET:
        return _Value(spec.root_type_id)
    if kind == CoreReloKind.TYPE_SIZE:
        return _Value(_size(spec.src, spec.root_type_id))
    return _Value(1)  # TYPE_EXISTS, TYPE_MATCHES


def _enum_value(spec: _Spec | None, kind: int) -> _Value:
    if kind == CoreReloKind.ENUMVAL_EXISTS:
        return _Value(1 if spec is not None else 0)
    if spec is None:
        raise _Poison
    acc = spec.accs[0]
    t = _skip_mods(spec.src, acc.type_id)[1]
    return _Value(t.enum_values[acc.idx].value)


def _value(spec: _Spec | None, kind: int, local_id: int) -> _Value:
    if kind in _FIELD:
        return _field_value(spec, kind)
    if kind in _TYPE:
        return _type_value(spec, kind, local_id)
    return _enum_value(spec, kind)


def _spec_str(spec: _Spec, kind: int) -> str:
    """libbpf's ``bpf_core_format_spec``: ``[7] struct xdp_md.data_end (0:1 @ offset 4)``."""
    src = spec.src
    head = f"[{spec.root_type_id}] {_describe(src, spec.root_type_id)}"
    if kind in _TYPE:
        return head
    if kind in _ENUM:
        return f"{head}::{spec.accs[0].name} = {_enum_value(spec, 11).val}"
    path = "".join(f".{a.name}" if a.name else f"[{a.idx}]" for a in spec.accs[1:])
    bits = f".{spec.bit_offset % 8}" if spec.bit_offset % 8 else ""
    return (f"{head}{path} ({':'.join(map(str, spec.raw))} @ offset "
            f"{spec.bit_offset // 8}{bits})")


@dataclass(frozen=True, slots=True)
class _Ctx:
    prog: str
    idx: int
    relo: CoreRelocation
    target_name: str

    def error(self, what: str, spec: _Spec | None = None) -> CoreRelocationError:
        kind = _KIND_STR.get(self.relo.kind, f"kind {self.relo.kind}")
        where = f" {_spec_str(spec, self.relo.kind)}" if spec is not None else ""
        return CoreRelocationError(f"prog '{self.prog}': relo #{self.idx}: <{kind}>{where}: "
                                   f"{what}", pc=self.relo.pc, rule="core")


def _resolve(ctx: _Ctx, local_btf: TypeSource, target: TypeSource
             ) -> tuple[_Value, _Value | None, _Spec]:
    """``bpf_core_calc_relo_insn``: the local value and the target's (None: poison)."""
    relo = ctx.relo
    if relo.kind not in _KIND_STR:
        raise ctx.error("unknown relocation kind")
    local_t = local_btf.type_by_id(relo.type_id)
    if not local_t.name:
        raise ctx.error(f"local type [{relo.type_id}] is anonymous")
    try:
        local = _parse_spec(local_btf, relo.type_id, relo.access, relo.kind)
        local_val = _value(local, relo.kind, relo.type_id)
    except (ValueError, ObjectError) as e:
        raise ctx.error(f"bad local spec: {e}") from None
    if relo.kind == CoreReloKind.TYPE_ID_LOCAL:
        return local_val, local_val, local
    want = essential_name(local_t.name)
    result: _Value | None = None
    result_spec: _Spec | None = None
    matched = False
    for cand in target.find_all(want):
        ct = target.type_by_id(cand)
        if ct.kind is not local_t.kind and not (ct.kind in _ENUMS and local_t.kind in _ENUMS):
            continue
        try:
            tspec = _match_spec(local, relo.kind, target, cand)
        except ObjectError:
            tspec = None
        if tspec is None:
            continue
        try:
            val: _Value | None = _value(tspec, relo.kind, relo.type_id)
        except _Poison:
            val = None
        except ValueError as e:
            raise ctx.error(str(e), local) from None
        if matched and (val is None) != (result is None) or (
                matched and val is not None and result is not None and val.val != result.val):
            raise ctx.error(f"relocation decision ambiguity: {ctx.target_name} candidates "
                            f"[{result_spec.root_type_id if result_spec else '?'}] and "
                            f"[{cand}] give different values", local)
        if not matched:
            matched, result, result_spec = True, val, tspec
    if not matched:
        try:
            result = _value(None, relo.kind, relo.type_id)
        except _Poison:
            result = None
    return local_val, result, local


def _patch(ctx: _Ctx, insns: list[Instruction], local: _Value, new: _Value,
           spec: _Spec) -> None:
    """``bpf_core_patch_insn``."""
    pc = ctx.relo.pc
    insn = insns[pc]
    cls = insn.code & 0x07
    orig = local.val
    if cls in (op.BPF_ALU, op.BPF_ALU64):
        if op.bpf_src(insn.code) != op.BPF_K:
            raise ctx.error(f"instruction #{pc} is not an ALU with an immediate", spec)
        if local.validate and (insn.imm & 0xFFFF_FFFF) != (orig & 0xFFFF_FFFF):
            raise ctx.error(f"unexpected insn #{pc} (ALU/ALU64) value: got {insn.imm}, "
                            f"exp {orig} -> {new.val}", spec)
        insns[pc] = dataclasses.replace(insn, imm=_s32(new.val))
    elif cls in (op.BPF_LDX, op.BPF_ST, op.BPF_STX):
        if local.validate and insn.off != orig:
            raise ctx.error(f"unexpected insn #{pc} (LDX/ST/STX) value: got {insn.off}, "
                            f"exp {orig} -> {new.val}", spec)
        if new.val > _SHRT_MAX:
            raise ctx.error(f"insn #{pc} (LDX/ST/STX) value too big: {new.val}", spec)
        code = insn.code
        if local.size and new.size and local.size != new.size:
            sizes = {1: op.BPF_B, 2: op.BPF_H, 4: op.BPF_W, 8: op.BPF_DW}
            have = {v: k for k, v in sizes.items()}.get(insn.code & 0x18)
            if have != local.size:
                raise ctx.error(f"insn #{pc} (LDX/ST/STX) unexpected mem size: got {have}, "
                                f"exp {local.size}", spec)
            if new.size not in sizes:
                raise ctx.error(f"insn #{pc} (LDX/ST/STX) invalid new mem size: {new.size}",
                                spec)
            code = (code & ~0x18) | sizes[new.size]
        insns[pc] = dataclasses.replace(insn, off=new.val, code=code)
    elif insn.code == op.OP_LD_IMM64 and pc + 1 < len(insns):
        nxt = insns[pc + 1]
        if insn.src != 0 or insn.off != 0 or nxt.code or nxt.dst or nxt.src or nxt.off:
            raise ctx.error(f"insn #{pc} (LDIMM64) has unexpected form", spec)
        imm = (insn.imm & 0xFFFF_FFFF) | ((nxt.imm & 0xFFFF_FFFF) << 32)
        if local.validate and imm != orig & 0xFFFF_FFFF_FFFF_FFFF:
            raise ctx.error(f"unexpected insn #{pc} (LDIMM64) value: got {imm}, exp {orig} "
                            f"-> {new.val}", spec)
        v = new.val & 0xFFFF_FFFF_FFFF_FFFF
        insns[pc] = dataclasses.replace(insn, imm=_s32(v & 0xFFFF_FFFF))
        insns[pc + 1] = dataclasses.replace(nxt, imm=_s32(v >> 32))
    else:
        raise ctx.error(f"trying to relocate unrecognized insn #{pc}, code:{insn.code:#x}",
                        spec)


def _s32(v: int) -> int:
    v &= 0xFFFF_FFFF
    return v - (1 << 32) if v >> 31 else v


def _poison(insns: list[Instruction], pc: int) -> None:
    """libbpf's ``bpf_core_poison_insn``: a call of a helper that does not exist."""
    call = Instruction(op.OP_CALL, 0, 0, 0, POISON_HELPER)
    if insns[pc].code == op.OP_LD_IMM64 and pc + 1 < len(insns):
        insns[pc + 1] = call
    insns[pc] = call


def apply_core_relos(spec: ProgramSpec, local_btf: TypeSource | None, target: TypeSource,
                     *, target_name: str = "the target BTF", poison: bool = True
                     ) -> ProgramSpec:
    """``spec`` with every CO-RE relocation applied against ``target``.

    ``poison``: a relocation with no target value turns its instruction into
    libbpf's poisoned call (for a verifier to judge); otherwise it raises
    :class:`CoreRelocationError`.
    """
    if not spec.core_relos:
        return spec
    if local_btf is None:
        raise CoreRelocationError(f"prog '{spec.name}': CO-RE relocations without the "
                                  f"object's BTF", rule="core")
    insns = list(spec.insns)
    for i, relo in enumerate(spec.core_relos):
        ctx = _Ctx(spec.name, i, relo, target_name)
        if not 0 <= relo.pc < len(insns):
            raise ctx.error(f"instruction #{relo.pc} is outside the program")
        local, new, lspec = _resolve(ctx, local_btf, target)
        if new is None:
            if not poison:
                raise ctx.error(f"no match for {_describe(local_btf, relo.type_id)} in "
                                f"{target_name} (instruction #{relo.pc} poisoned)", lspec)
            _poison(insns, relo.pc)
            continue
        _patch(ctx, insns, local, new, lspec)
    return dataclasses.replace(spec, insns=tuple(insns), core_relos=())
