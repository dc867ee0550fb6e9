"""BTF and .BTF.ext parsing: sample objects, hand-built blobs, malformed input."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import pytest

from pyxdp.btf import (
    BTF_VAR_GLOBAL_ALLOCATED,
    Btf,
    BtfExt,
    BtfKind,
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
