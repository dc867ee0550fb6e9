"""Reading kernel structs through BTF: ``btf_struct_access`` and ``btf_struct_walk`` of
``kernel/bpf/btf.c``.

When a program loads through a ``PTR_TO_BTF_ID`` register (a ``struct xdp_buff *``
from ``bpf_cast_to_kern_ctx``, a struct from ``bpf_rdonly_cast``), Linux's verifier
walks the struct's BTF to the member the load covers: a scalar member gives an
unknown scalar, a pointer member to a struct a ``PTR_TO_BTF_ID`` of that struct, a
pointer to anything else read-only untrusted memory (``PTR_TO_MEM``), and an access
that covers no member whole is refused with the log line Linux prints.
:func:`struct_access` is that walk over any BTF answering ``type_by_id`` (the
kernel's, or the one pyxdp ships).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Protocol

from pyxdp.btf.btf import BtfKind, BtfType

__all__ = ["BtfSource", "StructRead", "StructWalkError", "btf_resolve_size", "member_offset",
           "skip_modifiers", "struct_access"]

_MODIFIERS = (BtfKind.TYPEDEF, BtfKind.VOLATILE, BtfKind.CONST, BtfKind.RESTRICT,
              BtfKind.TYPE_TAG)
_SIZED = (BtfKind.INT, BtfKind.STRUCT, BtfKind.UNION, BtfKind.ENUM, BtfKind.FLOAT,
          BtfKind.ENUM64)
MAX_RESOLVE_DEPTH = 32
U32_MAX = 0xFFFF_FFFF


class BtfSource(Protocol):
    def type_by_id(self, type_id: int) -> BtfType: ...


class StructWalkError(Exception):
    """A refused access: Linux's log line and errno."""

    def __init__(self, msg: str, err: int) -> None:
        super().__init__(msg)
        self.msg = msg
        self.err = err


@dataclass(frozen=True)
class StructRead:
    """What a read finds: ``kind`` "scalar", "ptr" (to struct ``type_id``, ``name``),
    "mem" (a pointer to something that is not a struct) or "fwd" (a pointer to a struct
    this BTF only declares); ``untrusted`` when the walk crossed a union of several
    members."""

    kind: str
    type_id: int = 0
    name: str = ""
    untrusted: bool = False


def skip_modifiers(btf: BtfSource, type_id: int) -> tuple[BtfType, int]:
    """btf_type_skip_modifiers: the type and its id under typedefs and qualifiers."""
    t = btf.type_by_id(type_id)
    for _ in range(MAX_RESOLVE_DEPTH):
        if t.kind not in _MODIFIERS:
            break
        type_id = t.size_type
        t = btf.type_by_id(type_id)
    return t, type_id


def btf_resolve_size(btf: BtfSource, t: BtfType, tid: int
                  ) -> tuple[BtfType, int, BtfType, int, int, int] | None:
    """__btf_resolve_size: (the type, or the outer array; total size; element type;
    the last array's element id; element count; the id under the modifiers, else
    ``tid``), None for a type without a size."""
    array: BtfType | None = None
    last: BtfType | None = None  # the innermost array
    nelems = 1
    mod_id = 0
    for _ in range(MAX_RESOLVE_DEPTH):
        if t.kind in _SIZED or t.kind is BtfKind.PTR:
            size = 8 if t.kind is BtfKind.PTR else t.size_type
            if nelems and size > U32_MAX // nelems:
                return None
            elem_id = last.array.type if last is not None and last.array is not None else 0
            return (array or t), nelems * size, t, elem_id, nelems, mod_id or tid
        if t.kind in _MODIFIERS:
            mod_id = t.size_type
            t = btf.type_by_id(t.size_type)
        elif t.kind is BtfKind.ARRAY:
            assert t.array is not None
            if array is None:
                array = t
            last = t
            if nelems and t.array.nelems > U32_MAX // nelems:
                return None
            nelems *= t.array.nelems
            t = btf.type_by_id(t.array.type)
        else:
            return None
    return None


def _walk(btf: BtfSource, t: BtfType, off: int, size: int, untrusted: bool
          ) -> tuple[str, int, bool]:
    """btf_struct_walk: ("scalar" | "ptr" | "mem" | "struct", type id, untrusted)."""
    while True:
        if t.kind in _MODIFIERS:
            t, _ = skip_modifiers(btf, t.size_type)
        tname = t.name or "(anon)"  # __btf_name_by_offset of name 0
        if t.kind not in (BtfKind.STRUCT, BtfKind.UNION):
            raise StructWalkError(f"Type '{tname}' is not a struct", errno.EINVAL)
        members = t.members
        if t.kind is BtfKind.UNION and len(members) != 1:
            untrusted = True  # walking unions yields untrusted pointers
        if off + size > t.size_type:
            # a flexible array as the last member may be read past the struct's size
            last = members[-1] if members else None
            mt = skip_modifiers(btf, last.type)[0] if last is not None else None
            if (last is None or mt is None or mt.kind is not BtfKind.ARRAY or mt.array is None
                    or mt.array.nelems != 0 or off < last.bit_offset // 8):
                raise StructWalkError(f"access beyond struct {tname} at off {off} size "
                                      f"{size}", errno.EACCES)
            moff = last.bit_offset // 8
            et, _ = skip_modifiers(btf, mt.array.type)
            if et.kind is BtfKind.INT:
                return "scalar", 0, untrusted
            if et.kind not in (BtfKind.STRUCT, BtfKind.UNION) or not et.size_type:
                raise StructWalkError(f"access beyond struct {tname} at off {off} size "
                                      f"{size}", errno.EACCES)
            off = (off - moff) % et.size_type
            t = et
            continue
        nested = False
        for m in members:
            moff = m.bit_offset // 8
            if off + size <= moff:
                break
            if m.bitfield_size:
                end_bit = m.bit_offset + m.bitfield_size
                if off <= moff and (end_bit + 7) // 8 <= off + size:
                    return "scalar", 0, untrusted
                continue
            if off < moff:  # a hole in the struct
                break
            got = btf_resolve_size(btf, btf.type_by_id(m.type), m.type)
            if got is None:
                raise StructWalkError(f"field {m.name} doesn't have size", errno.EFAULT)
            mtype, msize, elem, elem_id, total, mid = got
            mtrue_end = moff + msize
            if off >= mtrue_end:
                continue
            if mtype.kind is BtfKind.ARRAY:
                if moff == mtrue_end:
                    continue
                msize //= total
                moff += (off - moff) // msize * msize
                mtype, mid = elem, elem_id
            if mtype.kind in (BtfKind.STRUCT, BtfKind.UNION):
                if off == moff:
                    return "struct", mid, untrusted
                off -= moff
                t = mtype
                nested = True
                break
            if mtype.kind is BtfKind.PTR:
                if msize != size or off != moff:
                    raise StructWalkError(
                        f"cannot access ptr member {m.name} with moff {moff} in struct "
                        f"{tname} with off {off} size {size}", errno.EACCES)
                st, sid = skip_modifiers(btf, mtype.size_type)
                if st.kind in (BtfKind.STRUCT, BtfKind.UNION):
                    return "ptr", sid, untrusted
                if st.kind is BtfKind.FWD and st.name:  # a BTF cut short (pyxdp's own)
                    return "fwd", sid, untrusted
                return "mem", 0, untrusted
            if off + size > mtrue_end and not untrusted:
                raise StructWalkError(
                    f"access beyond the end of member {m.name} (mend:{mtrue_end}) in struct "
                    f"{tname} with off {off} size {size}", errno.EACCES)
            return "scalar", 0, untrusted
        if nested:
            continue
        raise StructWalkError(f"struct {tname} doesn't have field at offset {off}",
                              errno.EINVAL)


def struct_access(btf: BtfSource, type_id: int, off: int, size: int,
                  untrusted: bool = False) -> StructRead:
    """btf_struct_access: what a ``size``-byte read at ``off`` of struct ``type_id``
    gives; raises :class:`StructWalkError` with Linux's message."""
    t = btf.type_by_id(type_id)
    while True:
        kind, tid, untrusted = _walk(btf, t, off, size, untrusted)
        if kind == "struct":  # a nested struct at the offset: its first member
            t = btf.type_by_id(tid)
            off = 0
            continue
        if kind in ("ptr", "fwd"):
            return StructRead(kind, tid, btf.type_by_id(tid).name, untrusted)
        return StructRead(kind, 0, "", untrusted)


def member_offset(btf: BtfSource, type_id: int, name: str) -> tuple[int, int] | None:
    """Byte offset and size of member ``name`` of struct ``type_id`` (anonymous
    structs and unions searched through), None when it has none."""
    t, _ = skip_modifiers(btf, type_id)
    for m in t.members:
        if m.bitfield_size:
            continue
        mt, _ = skip_modifiers(btf, m.type)
        if m.name == name:
            got = btf_resolve_size(btf, btf.type_by_id(m.type), m.type)
            return (m.bit_offset // 8, got[1]) if got is not None else None
        if not m.name and mt.kind in (BtfKind.STRUCT, BtfKind.UNION):
            inner = member_offset(btf, m.type, name)
            if inner is not None:
                return m.bit_offset // 8 + inner[0], inner[1]
    return None
