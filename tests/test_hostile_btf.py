"""Hostile input round 9: BTF of odd shapes in otherwise valid objects.

The records stay well-formed (same kinds and lengths) but name odd targets and
sizes; loading must end in one specific error, never a Python exception."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pyxdp.btf.btf import BtfKind
from pyxdp.btf.core import CoreRelocationError
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("void_ptr", [False, True])
def test_core_bitfield_member_of_a_pointer_type(void_ptr: bool) -> None:
    """A CO-RE field relocation on a bitfield member whose type is no integer: pyxdp
    took the pointer's target id as the field's byte size, and divided by zero for a
    void pointer (ZeroDivisionError). The kernel's BTF check refuses a bitfield of a
    non-integer type; the relocation is refused as a bad local spec now."""
    spec = load_collection_spec(ROOT / "samples" / "core.o")
    btf = spec.btf
    assert btf is not None
    st = next(t for t in btf.types if t.name == "iphdr___core")
    idx = next(i for i, m in enumerate(st.members) if m.bitfield_size)
    ptr = next(t for t in btf.types if t.kind is BtfKind.PTR)
    members = list(st.members)
    members[idx] = dataclasses.replace(members[idx], type=ptr.id)
    changed = {st.id: dataclasses.replace(st, members=tuple(members))}
    if void_ptr:
        changed[ptr.id] = dataclasses.replace(ptr, size_type=0)
    odd = dataclasses.replace(spec, btf=btf.with_types(changed))
    with pytest.raises(CoreRelocationError) as e:
        Collection(odd, "userspace", engine="interp")
    msg = str(e.value)
    assert "\n" not in msg
    assert f"bitfield member #{idx} of struct iphdr___core is not of a sized integer" in msg
