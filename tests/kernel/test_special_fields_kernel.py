"""Special fields of map values against Linux: for values whose bpf_spin_lock,
bpf_res_spin_lock, bpf_timer or bpf_wq sits in nested structs, unions, arrays or behind a
typedef, Linux's BPF_MAP_CREATE and pyxdp's userspace maps agree on the map's creation
(map_check_btf's map types) and on where the record's fields are: an element written
all 0xff from user space reads back with zeros exactly there (copy_map_value leaves
special fields out). A record btf_parse_fields refuses (an array of locks, both kinds of
lock) is no field at all. Each layout gets a BTF of its own."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pyxdp.btf.btf import Btf, BtfArray, BtfKind, BtfMember, BtfType
from pyxdp.collection import Collection
from pyxdp.errors import MapError
from pyxdp.spec import CollectionSpec, MapSpec
from pyxdp.testing.verifier_cases import MAPS, funcs_btf
from pyxdp.uapi.bpf import BpfMapType as MT

pytestmark = [pytest.mark.kernel, pytest.mark.xdist_group("kernel")]

# A layout: a base name ("u32", "u64", "lock", "res", "timer", "wq"), ("arr", n, layout),
# ("struct" | "union", ((member, layout), ...)) or ("typedef", name, layout).
Layout = str | tuple  # type: ignore[type-arg]
_BASE = {"u32": (4, None), "u64": (8, None), "lock": (4, "bpf_spin_lock"),
         "res": (4, "bpf_res_spin_lock"), "timer": (16, "bpf_timer"), "wq": (16, "bpf_wq")}


class _Builder:
    def __init__(self) -> None:
        self.types: list[BtfType] = [BtfType(0, BtfKind.UNKN, "", 0)]
        self.strings = bytearray(b"\0")
        self.memo: dict[str, tuple[int, int, int]] = {}

    def name(self, text: str) -> int:
        if not text:
            return 0
        off = len(self.strings)
        self.strings.extend(text.encode() + b"\0")
        return off

    def add(self, kind: BtfKind, text: str = "", **kw: object) -> int:
        self.types.append(BtfType(len(self.types), kind, text, self.name(text),
                                  **kw))  # type: ignore[arg-type]
        return len(self.types) - 1

    def build(self, t: Layout) -> tuple[int, int, int]:
        """(type id, size, alignment) of layout ``t``."""
        if isinstance(t, str):
            if t not in self.memo:
                size, struct = _BASE[t]
                u32 = self.build("u32")[0] if t != "u32" else 0
                if struct is None:
                    tid = self.add(BtfKind.INT, t, size_type=size, int_bits=8 * size)
                else:
                    members = tuple(BtfMember(f"w{k}", self.name(f"w{k}"), u32, 32 * k)
                                    for k in range(size // 4))
                    tid = self.add(BtfKind.STRUCT, struct, size_type=size, vlen=len(members),
                                   members=members)
                self.memo[t] = (tid, size, min(size, 8))
            return self.memo[t]
        if t[0] == "arr":
            tid, size, align = self.build(t[2])
            idx = self.build("u32")[0]
            return self.add(BtfKind.ARRAY, array=BtfArray(tid, idx, t[1])), size * t[1], align
        if t[0] == "typedef":
            tid, size, align = self.build(t[2])
            return self.add(BtfKind.TYPEDEF, t[1], size_type=tid), size, align
        off = size = 0
        align = 1
        members = []
        for mname, mt in t[1]:
            tid, msize, malign = self.build(mt)
            align = max(align, malign)
            if t[0] == "struct":
                off = -(-off // malign) * malign
                members.append(BtfMember(mname, self.name(mname), tid, 8 * off))
                off += msize
            else:
                members.append(BtfMember(mname, self.name(mname), tid, 0))
                off = max(off, msize)
        size = -(-off // align) * align
        kind = BtfKind.STRUCT if t[0] == "struct" else BtfKind.UNION
        return self.add(kind, "", size_type=size, vlen=len(members),
                        members=tuple(members)), size, align


def _spec(value: Layout, map_type: int) -> CollectionSpec:
    b = _Builder()
    key = b.build("u32")[0]
    vid, size, _ = b.build(value)
    btf = Btf(types=tuple(b.types), strings=bytes(b.strings))
    m = MapSpec("vals", map_type, 4, size, 2, key_type=key, value_type=vid)
    return CollectionSpec(maps={"vals": m}, programs={}, btf=btf)


_INNER = ("struct", (("x", "u32"), ("l", "lock")))
_INNER_RES = ("struct", (("x", "u32"), ("l", "res")))
LAYOUTS: dict[str, tuple[Layout, int]] = {
    "nested": (("struct", (("q", "u64"), ("in", _INNER_RES))), MT.BPF_MAP_TYPE_ARRAY),
    "nested_deep": (("struct", (("a", ("struct", (("b", ("struct", (("q", "u64"),
                                                                     ("l", "res")))),)),),)),
                    MT.BPF_MAP_TYPE_HASH),
    "nested_timer": (("struct", (("x", "u32"), ("in", ("struct", (("y", "u64"),
                                                                  ("t", "timer")))))),
                     MT.BPF_MAP_TYPE_ARRAY),
    "nested_wq_timer": (("struct", (("in", ("struct", (("x", "u64"), ("w", "wq")))),
                                    ("t", "timer"))), MT.BPF_MAP_TYPE_HASH),
    "in_union": (("struct", (("u", ("union", (("a", "u64"), ("l", "lock")))),)),
                 MT.BPF_MAP_TYPE_ARRAY),
    "array_of_locks": (("struct", (("x", "u64"), ("l", ("arr", 2, "res")))),
                       MT.BPF_MAP_TYPE_ARRAY),
    "array_of_one": (("struct", (("in", ("arr", 1, _INNER)), ("z", "u64"))),
                     MT.BPF_MAP_TYPE_ARRAY),
    "array_of_structs": (("struct", (("in", ("arr", 2, _INNER)),)), MT.BPF_MAP_TYPE_ARRAY),
    "empty_array": (("struct", (("l", ("arr", 0, "lock")), ("x", "u32"))),
                    MT.BPF_MAP_TYPE_ARRAY),
    "two_nested": (("struct", (("a", _INNER), ("b", _INNER))), MT.BPF_MAP_TYPE_ARRAY),
    "both_locks": (("struct", (("a", _INNER), ("b", _INNER_RES))), MT.BPF_MAP_TYPE_ARRAY),
    "typedef": (("struct", (("x", "u32"), ("l", ("typedef", "lk_t", "lock")))),
                MT.BPF_MAP_TYPE_ARRAY),
    "lru_hash": (_INNER_RES, MT.BPF_MAP_TYPE_LRU_HASH),
    "percpu": (_INNER, MT.BPF_MAP_TYPE_PERCPU_ARRAY),
}


def _fields_seen(spec: CollectionSpec, backend: str) -> tuple[int, bytes]:
    """(errno of the map's creation, an all-0xff element as it reads back)."""
    try:
        coll = Collection(spec, backend)
    except MapError as e:
        return e.errno, b""
    with coll:
        h = coll.maps["vals"].handle
        size = spec.maps["vals"].value_size
        h.update(bytes(4), b"\xff" * size, 0)
        raw = h.lookup(bytes(4))
        assert raw is not None
        return 0, bytes(raw[:size])


def test_special_field_layouts_match_linux() -> None:
    got = {name: (_fields_seen(_spec(v, mt), "userspace"), _fields_seen(_spec(v, mt), "kernel"))
           for name, (v, mt) in LAYOUTS.items()}
    assert {n: u for n, (u, _) in got.items()} == {n: k for n, (_, k) in got.items()}
    # the nested lock is found (zeros at 12..15), the array of locks is no field
    assert got["nested"][1] == (0, b"\xff" * 12 + bytes(4))
    assert got["array_of_locks"][1] == (0, b"\xff" * 16)


@pytest.mark.parametrize("lock", ["lock", "res"])
def test_lock_in_local_storage_value_matches_linux(lock: str) -> None:
    """map_check_btf lets a lock sit in the value of a local storage map (sk, task,
    inode, cgroup) as in a hash or array map: Linux and pyxdp both create the map (an
    object declaring such a map, as verifier_sock.c does, loads); a per-CPU array's
    lock is EOPNOTSUPP on both."""
    def created(map_type: int, flags: int, entries: int, backend: str) -> int:
        b = _Builder()
        key = b.build("u32")[0]
        vid, size, _ = b.build(("struct", (("x", "u32"), ("l", lock))))
        btf = Btf(types=tuple(b.types), strings=bytes(b.strings))
        m = MapSpec("vals", map_type, 4, size, entries, flags, key_type=key, value_type=vid)
        try:
            Collection(CollectionSpec(maps={"vals": m}, programs={}, btf=btf), backend).close()
        except MapError as e:
            return e.errno
        return 0
    cases = [(MT.BPF_MAP_TYPE_SK_STORAGE, 1, 0), (MT.BPF_MAP_TYPE_TASK_STORAGE, 1, 0),
             (MT.BPF_MAP_TYPE_INODE_STORAGE, 1, 0), (MT.BPF_MAP_TYPE_CGRP_STORAGE, 1, 0),
             (MT.BPF_MAP_TYPE_PERCPU_ARRAY, 0, 1)]
    got = {mt.name: (created(mt, f, n, "userspace"), created(mt, f, n, "kernel"))
           for mt, f, n in cases}
    assert all(u == k for u, k in got.values()), got
    assert got["BPF_MAP_TYPE_SK_STORAGE"] == (0, 0)


def test_kptr_fields_read_back_zero_as_on_linux() -> None:
    """A __kptr_untrusted field and a __kptr to a kernel struct (the verifier corpus's
    kptrs map): an update leaves both out, an all-0xff element reads back zero there."""
    btf, _, int_id, values = funcs_btf(())
    m = replace(MAPS["kptrs"], name="vals", key_type=int_id, value_type=values["kptrs"])
    spec = CollectionSpec(maps={"vals": m}, programs={}, btf=btf)
    want = (0, b"\xff" * 8 + bytes(16))
    assert _fields_seen(spec, "userspace") == _fields_seen(spec, "kernel") == want
