"""Mutated objects must fail with pyxdp's typed errors, never with anything else.

Real sample objects are damaged the ways files get damaged (bit flips,
truncation, overwritten spans, a wrong ``e_machine``) and the ways a fuzzer
finds parser bugs (one field of the ELF header, a section header, a symbol,
a relocation, or bytes inside ``.BTF``/``.BTF.ext``/code set to an
interesting value). Parsing either succeeds or raises a
:class:`~pyxdp.errors.PyxdpError`; any other exception escapes and fails
the test.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyxdp.btf import Btf, BtfExt
from pyxdp.elf import load_collection_spec
from pyxdp.elf.elfio import open_elf
from pyxdp.errors import PyxdpError

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
# A spread of features: BTF maps + subprograms + callbacks, global data,
# legacy maps, map-in-map/prog_array initialisers, many sections, and a big one.
_NAMES = ["loader/multi_prog.v2.o", "loader/globals.v3.o", "loader/legacy_maps.v4.o",
          "loader/map_in_map.v3.o", "loader/sections.v2.o", "lb.o", "redirect_cpu.o"]
OBJECTS = [(SAMPLES / n).read_bytes() for n in _NAMES if (SAMPLES / n).exists()]

pytestmark = pytest.mark.skipif(not OBJECTS, reason="sample objects not built (make -C samples)")

_INTERESTING = [0, 1, 2, 3, 4, 7, 8, 16, 24, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF,
                0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF]
_SETTINGS = settings(max_examples=500, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _parse(data: bytes) -> None:
    try:
        load_collection_spec(data)
    except PyxdpError:
        pass


def _section_headers(data: bytes) -> list[tuple[int, int, int, int]]:
    """(header offset, sh_type, sh_offset, sh_size) of every section of a sample."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shnum, = struct.unpack_from("<H", data, 0x3C)
    out = []
    for i in range(shnum):
        pos = shoff + 64 * i
        _, sh_type, _, _, sh_offset, sh_size = struct.unpack_from("<IIQQQQ", data, pos)
        out.append((pos, sh_type, sh_offset, sh_size))
    return out


def _put(buf: bytearray, pos: int, width: int, value: int) -> None:
    if 0 <= pos and pos + width <= len(buf):
        buf[pos:pos + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")


@st.composite
def mutated_objects(draw: st.DrawFn) -> bytes:
    base = draw(st.sampled_from(OBJECTS))
    buf = bytearray(base)
    kind = draw(st.sampled_from(["flip", "truncate", "span", "machine", "ehdr", "shdr",
                                 "content", "word"]))
    if kind == "flip":
        for pos, bit in draw(st.lists(st.tuples(st.integers(0, len(buf) - 1),
                                                st.integers(0, 7)), min_size=1, max_size=8)):
            buf[pos] ^= 1 << bit
    elif kind == "truncate":
        del buf[draw(st.integers(0, len(buf) - 1)):]
    elif kind == "span":
        pos = draw(st.integers(0, len(buf) - 1))
        junk = draw(st.binary(min_size=1, max_size=64))
        buf[pos:pos + len(junk)] = junk
    elif kind == "machine":
        _put(buf, 18, 2, draw(st.integers(0, 0xFFFF).filter(lambda m: m != 247)))
    elif kind == "ehdr":
        # One field of the ELF header past e_ident.
        pos, width = draw(st.sampled_from([(16, 2), (20, 4), (0x20, 8), (0x28, 8), (0x34, 2),
                                           (0x3A, 2), (0x3C, 2), (0x3E, 2)]))
        _put(buf, pos, width, draw(st.sampled_from(_INTERESTING) | st.integers(0, 1 << 16)))
    elif kind == "shdr":
        hdr, _, _, _ = draw(st.sampled_from(_section_headers(base)))
        field, width = draw(st.sampled_from([(0, 4), (4, 4), (8, 8), (24, 8), (32, 8), (40, 4),
                                             (44, 4), (48, 8), (56, 8)]))
        _put(buf, hdr + field, width, draw(st.sampled_from(_INTERESTING)
                                           | st.integers(0, len(base))))
    else:
        # Inside a section with bytes (symbols, relocations, BTF, code...).
        secs = [s for s in _section_headers(base) if s[1] != 8 and s[3] > 0]
        _, _, off, size = draw(st.sampled_from(secs))
        for _ in range(draw(st.integers(1, 4))):
            pos = off + draw(st.integers(0, size - 1))
            if kind == "word":
                _put(buf, pos & ~3, 4, draw(st.sampled_from(_INTERESTING)
                                            | st.integers(0, 0xFFFFFFFF)))
            else:
                buf[pos] = draw(st.integers(0, 255))
    return bytes(buf)


@_SETTINGS
@given(mutated_objects())
def test_mutated_objects_raise_only_pyxdp_errors(data: bytes) -> None:
    _parse(data)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.binary(max_size=512), st.booleans())
def test_garbage_raises_only_pyxdp_errors(junk: bytes, with_header: bool) -> None:
    if with_header:
        # A valid little-endian ELF64 EM_BPF ET_REL identification, then junk.
        junk = (b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HH", 1, 247) + junk)
    _parse(junk)


def _btf_sections(data: bytes) -> tuple[bytes, bytes]:
    img = open_elf(data)
    sec = {s.name: s for s in img.sections}
    return img.section_data(sec[".BTF"]), img.section_data(sec[".BTF.ext"])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.data())
def test_mutated_btf_raises_only_pyxdp_errors(data: st.DataObject) -> None:
    raw_btf, raw_ext = _btf_sections(data.draw(st.sampled_from(OBJECTS)))
    target = data.draw(st.sampled_from(["btf", "ext"]))
    buf = bytearray(raw_btf if target == "btf" else raw_ext)
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(buf) - 1))
        if data.draw(st.booleans()):
            buf[pos] ^= 1 << data.draw(st.integers(0, 7))
        else:
            _put(buf, pos & ~3, 4, data.draw(st.sampled_from(_INTERESTING)))
    if data.draw(st.booleans()):
        del buf[data.draw(st.integers(0, len(buf))):]
    try:
        btf = Btf.parse(bytes(buf) if target == "btf" else raw_btf)
        ext = BtfExt.parse(bytes(buf) if target == "ext" else raw_ext, btf)
        # Walk everything a loader would ask for.
        for t in btf.types[1:]:
            btf.describe(t.id)
            if t.kind.name in ("STRUCT", "UNION", "VAR", "ARRAY", "INT", "PTR", "TYPEDEF"):
                try:
                    btf.resolve_size(t.id)
                except PyxdpError:
                    pass
        for recs in ext.line_info.values():
            for li in recs:
                btf.string_at(li.line_off)
        assert Btf.parse(btf.encode()) == btf
    except PyxdpError:
        pass


def test_path_and_kconfig_arguments_are_typed_errors() -> None:
    from pyxdp.errors import ObjectError
    with pytest.raises(ObjectError, match="cannot read object file"):
        load_collection_spec("x\0.o")  # os's ValueError (embedded null byte) before
    with pytest.raises(TypeError, match="kconfig must be Kconfig text"):
        load_collection_spec(OBJECTS[0], kconfig=5)  # type: ignore[arg-type]
