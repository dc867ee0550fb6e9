"""BTF and .BTF.ext parsing: sample objects, hand-built blobs, malformed input."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import pytest

from pyxdp.btf import (
    BTF_VAR_GLOBAL_ALLOCATED,
    Btf,
    BtfArray,
    BtfExt,
    BtfKind,
    BtfParam,
    BtfType,
    BtfVarSecinfo,
)
from pyxdp.elf import load_collection_spec
from pyxdp.elf.elfio import open_elf
from pyxdp.errors import ObjectError

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
OBJECTS = sorted(SAMPLES.glob("*.o")) + sorted((SAMPLES / "loader").glob("*.o"))


def _loader(name: str, cpu: str = "v3") -> Path:
    path = SAMPLES / "loader" / f"{name}.{cpu}.o"
    if not path.exists():
        pytest.skip(f"{path.name} not built (make -C samples)")
    return path


def _section(path: Path, name: str) -> bytes:
    img = open_elf(path.read_bytes(), str(path))
    sec = next(s for s in img.sections if s.name == name)
    return img.section_data(sec)


# -- a tiny BTF assembler for hand-built blobs ---------------------------------------


class _Strings:
    def __init__(self) -> None:
        self.data = bytearray(b"\0")

    def add(self, s: str) -> int:
        off = len(self.data)
        self.data += s.encode() + b"\0"
        return off


def _info(kind: int, vlen: int = 0, kflag: bool = False) -> int:
    return (kind << 24) | vlen | (int(kflag) << 31)


def _t(name_off: int, kind: int, size_type: int, vlen: int = 0, kflag: bool = False) -> bytes:
    return struct.pack("<III", name_off, _info(kind, vlen, kflag), size_type)


def _blob(types: bytes, strings: bytes, *, magic: int = 0xEB9F, version: int = 1,
          flags: int = 0, hdr_len: int = 24, type_off: int = 0, str_off: int | None = None,
          tail: bytes = b"") -> bytes:
    if str_off is None:
        str_off = len(types)
    hdr = struct.pack("<HBBIIIII", magic, version, flags, hdr_len, type_off, len(types),
                      str_off, len(strings))
    return hdr + tail + types + strings


def _every_kind() -> tuple[bytes, bytes]:
    """A blob with one or more records of every kind (ids in comments)."""
    s = _Strings()
    t = b""
    t += _t(s.add("int"), 1, 4) + struct.pack("<I", (1 << 24) | 32)          # [1] int
    t += _t(0, 2, 1)                                                          # [2] int *
    t += _t(0, 3, 0) + struct.pack("<III", 1, 1, 4)                           # [3] int[4]
    t += _t(s.add("s"), 4, 8, 2, True) + struct.pack(                         # [4] struct s
        "<IIIIII", s.add("a"), 1, 0, s.add("b"), 1, (3 << 24) | 32)
    t += _t(s.add("u"), 5, 4, 1) + struct.pack("<III", s.add("x"), 1, 0)    # [5] union u
    t += _t(s.add("e"), 6, 4, 2, True) + struct.pack(                         # [6] signed enum
        "<IiIi", s.add("NEG"), -1, s.add("POS"), 7)
    t += _t(s.add("fw"), 7, 0)                                                # [7] fwd
    t += _t(s.add("myint"), 8, 1)                                             # [8] typedef
    t += _t(0, 9, 8)                                                          # [9] volatile
    t += _t(0, 10, 9)                                                         # [10] const
    t += _t(0, 11, 2)                                                         # [11] restrict
    t += _t(0, 13, 1, 2) + struct.pack("<IIII", s.add("p"), 2, 0, 0)          # [12] proto, ...
    t += _t(s.add("f"), 12, 12, 1)                                            # [13] global func
    t += _t(s.add("v"), 14, 10) + struct.pack("<I", 1)                        # [14] var
    t += _t(s.add(".data"), 15, 4, 1) + struct.pack("<III", 14, 0, 4)        # [15] datasec
    t += _t(s.add("float"), 16, 4)                                            # [16] float
    t += _t(s.add("tag"), 17, 4) + struct.pack("<i", 1)                       # [17] decl tag
    t += _t(s.add("user"), 18, 1)                                             # [18] type tag
    t += _t(s.add("e64"), 19, 8, 1, True) + struct.pack(                      # [19] enum64
        "<III", s.add("BIG"), 0xFFFFFFFF, 0xFFFFFFFF)
    return t, bytes(s.data)


# -- sample objects -------------------------------------------------------------------


@pytest.mark.parametrize("path", OBJECTS, ids=lambda p: p.name)
def test_sample_btf_round_trips(path: Path) -> None:
    raw = _section(path, ".BTF")
    btf = Btf.parse(raw)
    assert btf.encode() == raw
    assert btf.types[0].kind is BtfKind.UNKN
    assert all(t.id == i for i, t in enumerate(btf.types))


def test_sample_types_resolve() -> None:
    btf = Btf.parse(_section(_loader("multi_prog"), ".BTF"))
    md = btf.find("xdp_md", BtfKind.STRUCT)
    assert md is not None
    assert btf.resolve_size(md) == 24
    assert [m.name for m in btf.types[md].members][:2] == ["data", "data_end"]
    func = btf.find("multi_first", BtfKind.FUNC)
    assert func is not None
    proto = btf.types[btf.types[func].type]
    assert proto.kind is BtfKind.FUNC_PROTO
    assert [p.name for p in proto.params] == ["ctx"]
    assert btf.describe(proto.params[0].type) == "struct xdp_md *"
    assert btf.describe(proto.type) == "int"
    assert btf.find("no_such_type") is None


def test_modifiers_are_skipped() -> None:
    btf = Btf.parse(_section(_loader("globals"), ".BTF"))
    var = btf.find("ro_limit", BtfKind.VAR)
    assert var is not None
    # const volatile __u32: CONST -> VOLATILE -> TYPEDEF -> INT
    assert btf.types[btf.types[var].type].kind is BtfKind.CONST
    assert btf.resolved(btf.types[var].type).kind is BtfKind.INT
    assert btf.resolve_size(var) == 4
    mac = btf.find("ro_mac", BtfKind.VAR)
    assert mac is not None and btf.resolve_size(mac) == 6


def test_datasec_fixed_up_from_elf() -> None:
    path = _loader("globals")
    raw_btf = Btf.parse(_section(path, ".BTF"))
    spec = load_collection_spec(path)
    assert spec.btf is not None
    for name in (".data", ".rodata", ".bss"):
        raw_id = raw_btf.find(name, BtfKind.DATASEC)
        assert raw_id is not None
        # clang leaves DATASEC sizes at zero; the loader fills them in.
        assert raw_btf.types[raw_id].size == 0
        ds = spec.btf.types[raw_id]
        assert ds.size == spec.maps[name].value_size
        offsets = [v.offset for v in ds.secinfos]
        assert offsets == sorted(offsets)
        assert all(v.offset + v.size <= ds.size for v in ds.secinfos)
    # The fixed-up blob parses back to the same thing.
    assert Btf.parse(spec.btf.raw) == spec.btf


def test_sample_btf_ext() -> None:
    path = _loader("multi_prog")
    btf = Btf.parse(_section(path, ".BTF"))
    ext = BtfExt.parse(_section(path, ".BTF.ext"), btf)
    assert set(ext.func_info) == {".text", "xdp"}
    assert not ext.core_relos
    names = [btf.types[r.type_id].name for r in ext.func_info["xdp"]]
    assert sorted(names) == ["multi_first", "multi_loop", "multi_second"]
    assert all(r.insn_off % 8 == 0 for r in ext.func_info["xdp"])
    lines = ext.line_info["xdp"]
    assert [r.insn_off for r in lines] == sorted(r.insn_off for r in lines)
    first = lines[0]
    assert btf.string_at(first.file_name_off).endswith("multi_prog.c")
    assert first.line > 0 and first.line_col >> 10 == first.line
    assert first.col == first.line_col & 0x3FF


# -- hand-built blobs -------------------------------------------------------------------


def test_every_kind_round_trips() -> None:
    types, strings = _every_kind()
    raw = _blob(types, strings)
    btf = Btf.parse(raw)
    assert btf.encode() == raw
    kinds = [t.kind for t in btf.types[1:]]
    assert kinds == [BtfKind(k) for k in
                     (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 12, 14, 15, 16, 17, 18, 19)]
    s = btf.types[4]
    assert s.members[1].bit_offset == 32 and s.members[1].bitfield_size == 3
    assert [e.value for e in btf.types[6].enum_values] == [-1, 7]
    assert btf.types[19].enum_values[0].value == -1
    assert btf.types[14].linkage == BTF_VAR_GLOBAL_ALLOCATED
    assert btf.types[13].linkage == 1
    assert btf.types[17].component_idx == 1
    assert btf.resolve_size(3) == 16
    assert btf.resolve_size(14) == 4  # var -> const -> volatile -> typedef -> int
    assert btf.resolve_size(2) == 8
    assert btf.describe(3) == "int[4]"
    changed = btf.with_types({4: btf.types[4]})
    assert changed == btf and changed.raw == raw


def test_longer_header_with_zero_tail_is_accepted() -> None:
    types, strings = _every_kind()
    btf = Btf.parse(_blob(types, strings, hdr_len=32, tail=bytes(8)))
    assert len(btf) == 20
    assert btf.encode() == _blob(types, strings)


def _bad(raw: bytes, match: str) -> None:
    with pytest.raises(ObjectError, match=match) as info:
        Btf.parse(raw, path="x.o")
    assert info.value.section == ".BTF" and info.value.path == "x.o"


def test_malformed_headers() -> None:
    types, strings = _every_kind()
    _bad(b"\x9f\xeb\x01", "shorter than the header")
    _bad(_blob(types, strings, magic=0x1234), "magic")
    _bad(_blob(types, strings, magic=0x9FEB), "big-endian")
    _bad(_blob(types, strings, version=2), "version")
    _bad(_blob(types, strings, flags=1), "flags")
    _bad(_blob(types, strings, hdr_len=10_000), "header length")
    _bad(_blob(types, strings, hdr_len=28, tail=b"\1\0\0\0"), "header tail")
    _bad(_blob(types, strings, type_off=2), "aligned")
    _bad(_blob(types, strings, str_off=8), "overlaps")
    _bad(_blob(types, strings)[:-3], "past the end")
    _bad(_blob(types, b"x" + strings[1:]), "NUL")
    _bad(_blob(types, strings[:-1] + b"x"), "NUL")


def test_malformed_types() -> None:
    s = _Strings()
    name = s.add("int")
    good_int = _t(name, 1, 4) + struct.pack("<I", 32)
    strings = bytes(s.data)
    _bad(_blob(good_int[:-2], strings), "truncated")
    _bad(_blob(_t(name, 25, 4), strings), "unknown kind")
    _bad(_blob(_t(name, 0, 4), strings), "UNKN")
    _bad(_blob(struct.pack("<III", name, (1 << 24) | (1 << 20), 4) + struct.pack("<I", 32),
               strings), "reserved")
    _bad(_blob(_t(999, 1, 4) + struct.pack("<I", 32), strings), "name offset")
    _bad(_blob(good_int + _t(0, 2, 7), strings), "missing type")
    _bad(_blob(good_int + _t(name, 12, 1), strings), "FUNC_PROTO")
    _bad(_blob(good_int + _t(name, 15, 4, 1) + struct.pack("<III", 1, 0, 4), strings),
         "not a VAR")
    _bad(_blob(good_int + _t(0, 4, 4, 3) + struct.pack("<III", 0, 1, 0), strings),
         "truncated")


def test_loops_and_overflows_are_errors() -> None:
    s = _Strings()
    loop = _t(s.add("a"), 8, 2) + _t(s.add("b"), 8, 1)  # typedef a b; typedef b a;
    with pytest.raises(ObjectError, match=r"\[1\] TYPEDEF a contains itself \(loop detected\)"):
        Btf.parse(_blob(loop, bytes(s.data)))  # the kernel's BTF check: "Loop detected"
    s = _Strings()
    btf = Btf.parse(_blob(_t(s.add("a"), 8, 2) + _t(s.add("b"), 8, 0), bytes(s.data)))
    btf = btf.with_types({2: dataclasses.replace(btf.types[2], size_type=1)})  # (unchecked)
    with pytest.raises(ObjectError, match="too deep or looping"):
        btf.resolve(1)
    with pytest.raises(ObjectError):
        btf.resolve_size(1)
    s = _Strings()
    big = (_t(s.add("int"), 1, 4) + struct.pack("<I", 32)
           + _t(0, 3, 0) + struct.pack("<III", 1, 1, 0x8000_0000))
    btf = Btf.parse(_blob(big, bytes(s.data)))
    with pytest.raises(ObjectError, match="overflow"):
        btf.resolve_size(2)
    with pytest.raises(ObjectError, match="no type"):
        btf.type_by_id(99)
    with pytest.raises(ObjectError, match="string offset"):
        btf.string_at(10_000)


# -- .BTF.ext ----------------------------------------------------------------------------


def _ext(func: bytes = b"", line: bytes = b"", core: bytes = b"", *, hdr_len: int = 32,
         magic: int = 0xEB9F, version: int = 1) -> bytes:
    parts = [func, line, core]
    offs, pos = [], 0
    for p in parts:
        offs.append(pos)
        pos += len(p)
    fields = [offs[0], len(func), offs[1], len(line), offs[2], len(core)]
    hdr = struct.pack("<HBBI", magic, version, 0, hdr_len) + struct.pack(
        "<" + "I" * ((hdr_len - 8) // 4), *fields[:(hdr_len - 8) // 4])
    return hdr + func + line + core


def _ext_btf() -> tuple[Btf, int]:
    types, strings = _every_kind()
    btf = Btf.parse(_blob(types, strings))
    return btf, btf.strings.index(b".data\0")


def test_btf_ext_hand_built() -> None:
    btf, sec = _ext_btf()
    func = struct.pack("<I", 8) + struct.pack("<II", sec, 2) + struct.pack("<IIII", 0, 13, 8, 13)
    line = struct.pack("<I", 16) + struct.pack("<II", sec, 1) + struct.pack(
        "<IIII", 0, 1, 1, (42 << 10) | 3)
    core = struct.pack("<I", 16) + struct.pack("<II", sec, 1) + struct.pack("<IIII", 8, 4, 1, 0)
    ext = BtfExt.parse(_ext(func, line, core), btf)
    assert [r.type_id for r in ext.func_info[".data"]] == [13, 13]
    assert ext.line_info[".data"][0].line == 42 and ext.line_info[".data"][0].col == 3
    assert ext.core_relos[".data"][0].insn_off == 8
    # An older 24-byte header has no CO-RE part; longer records keep known fields.
    func16 = struct.pack("<I", 16) + struct.pack("<II", sec, 1) + struct.pack(
        "<IIII", 0, 13, 0xAA, 0xBB)
    ext = BtfExt.parse(_ext(func16, hdr_len=24), btf)
    assert ext.func_info[".data"][0].type_id == 13 and not ext.core_relos


@pytest.mark.parametrize("blob, match", [
    (b"\x9f\xeb\x01\x00", "shorter"),
    (_ext(magic=0x1111), "magic"),
    (_ext(version=3), "version"),
    (_ext(hdr_len=16) + bytes(16), "header length"),
    (_ext(struct.pack("<I", 4) + struct.pack("<II", 1, 1) + b"\0" * 4), "record size"),
    (_ext(struct.pack("<I", 10) + struct.pack("<II", 1, 1) + b"\0" * 10 + b"\0\0"),
     "record size"),
    (_ext(struct.pack("<I", 8) + struct.pack("<II", 1, 0)), "no records"),
    (_ext(struct.pack("<I", 8) + struct.pack("<II", 1, 5) + b"\0" * 8), "run past"),
    (_ext(struct.pack("<I", 8) + struct.pack("<I", 1)), "truncated"),
    (_ext(struct.pack("<I", 8) + struct.pack("<II", 99_999, 1) + b"\0" * 8), "name offset"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_btf_ext_malformed(blob: bytes, match: str) -> None:
    btf, _ = _ext_btf()
    with pytest.raises(ObjectError, match=match) as info:
        BtfExt.parse(blob, btf, path="y.o")
    assert info.value.section == ".BTF.ext"


def test_btf_ext_subsection_bounds() -> None:
    btf, sec = _ext_btf()
    good = _ext(struct.pack("<I", 8) + struct.pack("<II", sec, 1) + b"\0" * 8)
    # func_info offset misaligned, then running past the blob.
    bad = bytearray(good)
    struct.pack_into("<I", bad, 8, 2)
    with pytest.raises(ObjectError, match="aligned"):
        BtfExt.parse(bytes(bad), btf)
    struct.pack_into("<I", bad, 8, 4)
    with pytest.raises(ObjectError, match="past the end"):
        BtfExt.parse(bytes(bad), btf)


def test_large_btf_record_offsets_come_back_from_the_disk_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large BTF's record offsets are kept in pyxdp's disk cache; what comes back is
    what walking the records gives, and a damaged entry is walked again."""
    from pyxdp.btf import vmlinux
    from pyxdp.btf.btf import record_offsets

    monkeypatch.setenv("PYXDP_JIT_CACHE", str(tmp_path))
    monkeypatch.setattr(vmlinux, "_CACHED_ABOVE", 0)  # the shipped BTF stands in for vmlinux
    data = vmlinux.SHIPPED_BTF.read_bytes()
    first = vmlinux.BtfIndex(data)
    (entry,) = (tmp_path / "btf").iterdir()
    want = record_offsets(first._types)

    def walk(types: bytes) -> tuple[list[int], list[int]]:
        walked.append(len(types))
        return record_offsets(types)

    walked: list[int] = []
    monkeypatch.setattr(vmlinux, "record_offsets", walk)
    again = vmlinux.BtfIndex(data)
    assert (first._offsets, first._name_offs) == (again._offsets, again._name_offs) == want
    assert walked == []
    entry.write_bytes(entry.read_bytes()[:-4] + b"\xff\xff\xff\xff")
    damaged = vmlinux.BtfIndex(data)
    assert (damaged._offsets, damaged._name_offs) == want and len(walked) == 1
    tid = again.find("xdp_md", BtfKind.STRUCT)
    assert tid is not None and again.find_all("xdp_md") == (tid,)


# --------------------------------------------------------------------------
# Linux's BPF_BTF_LOAD rules (pyxdp.btf.kcheck)
# --------------------------------------------------------------------------

def _kbase() -> Btf:
    """xdp1.o's BTF as the loader hands it to the kernel (types listed in
    test_kernel_check's cases by id: [2] int, [6] typedef __u32, [13] the map's
    struct, [14] VAR rxcnt, [16] struct xdp_md, [17]/[18] the program's
    FUNC_PROTO/FUNC, [19] char, [22] DATASEC .maps, [23] DATASEC license)."""
    from pyxdp.btf.kcheck import kernel_fixup
    spec = load_collection_spec(SAMPLES / "xdp1.o")
    assert spec.btf is not None
    return kernel_fixup(spec.btf)[0]


def _with(b: Btf, tid: int, **kw: object) -> bytes:
    return b.with_types({tid: dataclasses.replace(b.types[tid], **kw)}).raw


def _append(b: Btf, *types: BtfType) -> bytes:
    n = len(b.types)
    return Btf(types=b.types + tuple(dataclasses.replace(t, id=n + i)
                                     for i, t in enumerate(types)), strings=b.strings).raw


def _raw_patch(raw: bytes, off: int, data: bytes) -> bytes:
    return raw[:off] + data + raw[off + len(data):]


def _str_off(b: Btf, s: str) -> int:
    return b.strings.index(s.encode() + b"\0")


# (case, mutation of _kbase(), the end of Linux's log line or None when it accepts);
# each verified against Linux 6.18's BPF_BTF_LOAD (test_kernel_check_matches_linux).
KCHECK_CASES: list[tuple[str, object, str | None]] = [
    ("base", lambda b: b.raw, None),
    ("int-bits-past-size", lambda b: _with(b, 2, int_bits=33), "nr_bits exceeds type_size"),
    ("int-bits-past-128", lambda b: _with(b, 2, int_bits=200, size_type=32),
     "nr_bits exceeds 128"),
    ("int-encoding", lambda b: _with(b, 2, int_encoding=3), "Unsupported encoding"),
    ("int-kflag", lambda b: _with(b, 2, kind_flag=True), "Invalid btf_info kind_flag"),
    ("ptr-named", lambda b: _with(b, 1, name_off=1), "Invalid name"),
    ("typedef-anon", lambda b: _with(b, 6, name_off=0), "Invalid name"),
    ("typedef-dot-name", lambda b: _with(b, 6, name_off=_str_off(b, ".maps")), None),
    ("array-index-struct", lambda b: _with(b, 3, array=BtfArray(2, 13, 6)), "Invalid index"),
    ("array-elem-void", lambda b: _with(b, 3, array=BtfArray(0, 4, 6)), "Invalid elem"),
    ("array-of-bitfield-int", lambda b: _with(b, 2, int_bits=31), "Invalid array of int"),
    ("array-overflow", lambda b: _with(b, 12, array=BtfArray(2, 4, 0x4000_0001)),
     "Array size overflows U32_MAX"),
    ("member-ptr-unaligned", lambda b: _with(b, 13, members=(
        b.types[13].members[0], dataclasses.replace(b.types[13].members[1], bit_offset=65),
        *b.types[13].members[2:])), "Member is not byte aligned"),
    ("member-past-size", lambda b: _with(b, 16, size_type=23), "Member exceeds struct_size"),
    ("member-void", lambda b: _with(b, 13, members=(
        dataclasses.replace(b.types[13].members[0], type=0), *b.types[13].members[1:])),
     "Invalid type_id"),
    ("union-offsets", lambda b: _with(b, 16, kind=BtfKind.UNION),
     "Invalid member bits_offset"),
    ("struct-dot-name", lambda b: _with(b, 16, name_off=_str_off(b, ".maps")), None),
    ("enum-size-3", lambda b: _with(b, 19, kind=BtfKind.ENUM, size_type=3),
     "Unexpected size"),
    ("float-size-3", lambda b: _with(b, 19, kind=BtfKind.FLOAT, size_type=3),
     "Invalid type_size"),
    ("fwd-with-type", lambda b: _with(b, 9, kind=BtfKind.FWD), "type != 0"),
    ("func-extern", lambda b: _with(b, 18, linkage=2), "Invalid func linkage"),
    ("param-void-first", lambda b: _with(b, 17, params=(
        BtfParam("", 0, 0), *b.types[17].params)), "Invalid arg#1"),
    ("param-unnamed", lambda b: _with(b, 17, params=(
        dataclasses.replace(b.types[17].params[0], name="", name_off=0),)),
     "Invalid arg#1"),
    ("vararg-last", lambda b: _with(b, 17, params=(
        *b.types[17].params, BtfParam("", 0, 0))), None),
    ("var-extern", lambda b: _with(b, 14, linkage=2), "Linkage not supported"),
    ("datasec-overlap", lambda b: _with(b, 22, secinfos=(
        *b.types[22].secinfos, BtfVarSecinfo(21, 16, 4))), "Invalid offset"),
    ("datasec-too-small", lambda b: _with(b, 23, size_type=3), "Invalid size"),
    ("datasec-not-var", lambda b: _with(b, 23, secinfos=(BtfVarSecinfo(2, 0, 4),)),
     "Not a VAR kind member"),
    ("datasec-size-0", lambda b: _with(b, 23, size_type=0), "size == 0"),
    ("decl-tag-component", lambda b: _append(b, BtfType(
        0, BtfKind.DECL_TAG, "int", 1, size_type=13, component_idx=4)),
     "Invalid component_idx"),
    ("decl-tag-on-int", lambda b: _append(b, BtfType(
        0, BtfKind.DECL_TAG, "int", 1, size_type=2, component_idx=-1)), "Invalid type_id"),
    ("type-tag-after-const", lambda b: _append(
        b, BtfType(0, BtfKind.CONST, "", 0, size_type=len(b.types) + 1),
        BtfType(0, BtfKind.TYPE_TAG, "int", 1, size_type=2)),
     "Type tags don't precede modifiers"),
    ("type-tag-before-const", lambda b: _append(
        b, BtfType(0, BtfKind.TYPE_TAG, "int", 1, size_type=len(b.types) + 1),
        BtfType(0, BtfKind.CONST, "", 0, size_type=2)), None),
    ("typedef-loop", lambda b: _with(b, 6, size_type=6), "Loop detected"),
    ("kind-20", lambda b: _raw_patch(b.raw, 24 + 12 + 4, struct.pack("<I", 20 << 24)),
     "[2] Invalid kind:20"),
    ("hdr-flags", lambda b: _raw_patch(b.raw, 3, b"\x01"), "Unsupported flags"),
    ("hdr-tail", lambda b: _raw_patch(b.raw, 4, struct.pack("<I", 28)) [:24] + b"\x01\0\0\0"
     + b.raw[24:], "Unsupported btf_header"),
    ("strings-first-byte", lambda b: b.raw[:len(b.raw) - len(b.strings)] + b"a"
     + b.strings[1:], "Invalid string section"),
    ("strings-last-byte", lambda b: b.raw[:-1] + b"a", "Invalid string section"),
    ("trailing-byte", lambda b: b.raw + b"\0", "Unsupported section found"),
]


@pytest.mark.parametrize(("case", "mutate", "reason"), KCHECK_CASES,
                         ids=[c[0] for c in KCHECK_CASES])
def test_kernel_check(case: str, mutate: object, reason: str | None) -> None:
    from pyxdp.btf.kcheck import kernel_check
    raw = mutate(_kbase())  # type: ignore[operator]
    got = kernel_check(raw)
    if reason is None:
        assert got is None
    else:
        assert got is not None and got.endswith(reason), got
        assert "\n" not in got


@pytest.mark.kernel
@pytest.mark.parametrize(("case", "mutate", "reason"), KCHECK_CASES,
                         ids=[c[0] for c in KCHECK_CASES])
def test_kernel_check_matches_linux(case: str, mutate: object, reason: str | None) -> None:
    from pyxdp.errors import KernelError
    from pyxdp.kernel.syscall import btf_load
    raw = mutate(_kbase())  # type: ignore[operator]
    try:
        btf_load(raw).close()
    except KernelError as e:
        assert reason is not None and str(e).endswith(reason), str(e)
    else:
        assert reason is None


@pytest.mark.parametrize(("case", "message"), [
    ("ptr-named", "[1] PTR int Invalid name"),
    ("typedef-anon", "[6] TYPEDEF (anon) Invalid name"),
    ("param-unnamed", "[18] FUNC xdp_prog1 Invalid arg#1"),
    ("member-ptr-unaligned", "[13] STRUCT (anon) member key: Member is not byte aligned"),
    ("datasec-not-var", "[23] DATASEC license type_id=2 Not a VAR kind member"),
])
def test_kernel_check_names_the_type(case: str, message: str) -> None:
    # one line naming the type as the kernel's log does: "[id] KIND name reason"
    from pyxdp.btf.kcheck import kernel_check
    mutate = next(m for c, m, _ in KCHECK_CASES if c == case)
    assert kernel_check(mutate(_kbase())) == message  # type: ignore[operator]


def test_kernel_check_on_every_sample() -> None:
    # every sample's BTF, as loaded, is one Linux takes
    from pyxdp.btf.kcheck import kernel_error
    for path in OBJECTS:
        spec = load_collection_spec(path)
        if spec.btf is not None:
            assert kernel_error(spec.btf, {m.name: m.value_size for m in spec.maps.values()
                                           if m.is_global_data}) is None, path


def test_a_bitfield_takes_ints_only() -> None:
    from pyxdp.btf.codec import CodecError, TypeCodec
    types, strings = _every_kind()
    btf = Btf.parse(_blob(types, strings))
    codec = TypeCodec(btf, 4)  # a struct whose second member is a 3-bit bitfield
    name = btf.types[4].members[1].name
    raw = codec.encode({name: 5})
    assert codec.decode(raw)[name] == 5
    for bad in ("5", None, 1.5, True):
        with pytest.raises(CodecError, match=f"^bitfield {name} of .* needs an int, got "):
            codec.encode({name: bad})
