"""``.BTF.ext``: per-instruction BTF records clang emits next to ``.BTF``.

Layout (libbpf ``btf.h``/``btf.c``, ``struct btf_ext_header``): a header with
magic/version/flags/hdr_len and (offset, length) pairs for the func_info,
line_info and, when ``hdr_len`` covers it, CO-RE relocation sub-sections.
Each sub-section starts with a u32 record size and then, per ELF section,
``struct btf_ext_info_sec {sec_name_off, num_info}`` followed by
``num_info`` records. Records are ``bpf_func_info {insn_off, type_id}``,
``bpf_line_info {insn_off, file_name_off, line_off, line_col}`` and
``bpf_core_relo {insn_off, type_id, access_str_off, kind}``.

As in the object file, ``insn_off`` is a *byte* offset into the ELF section;
the loader converts to instruction units when it links a program (libbpf's
``adjust_prog_btf_ext_info``). Records larger than the known size (a newer
compiler) keep only the known fields, as libbpf does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pyxdp.btf.btf import BTF_MAGIC, Btf
from pyxdp.errors import ObjectError

__all__ = ["BtfExt", "CoreRelo", "FuncInfoRecord", "LineInfoRecord"]

_HDR = struct.Struct("<HBBI")  # magic, version, flags, hdr_len
_U32 = struct.Struct("<I")
_SEC = struct.Struct("<II")  # btf_ext_info_sec: sec_name_off, num_info

# Minimum record sizes, as libbpf's btf_ext_setup_* require.
_FUNC_INFO_MIN = 8
_LINE_INFO_MIN = 16
_CORE_RELO_MIN = 16


@dataclass(frozen=True, slots=True)
class FuncInfoRecord:
    """``struct bpf_func_info`` as stored in the object (byte ``insn_off``)."""

    insn_off: int
    type_id: int


@dataclass(frozen=True, slots=True)
class LineInfoRecord:
    """``struct bpf_line_info``: ``line_col`` is ``line << 10 | column``."""

    insn_off: int
    file_name_off: int
    line_off: int
    line_col: int

    @property
    def line(self) -> int:
        return self.line_col >> 10

    @property
    def col(self) -> int:
        return self.line_col & 0x3FF


@dataclass(frozen=True, slots=True)
class CoreRelo:
    """``struct bpf_core_relo``: a CO-RE relocation request (``enum bpf_core_relo_kind``)."""

    insn_off: int
    type_id: int
    access_str_off: int
    kind: int


@dataclass(frozen=True)
class BtfExt:
    """The three record families of ``.BTF.ext``, keyed by ELF section name.

    Sections keep their order of appearance; records keep theirs.
    """

    func_info: dict[str, tuple[FuncInfoRecord, ...]]
    line_info: dict[str, tuple[LineInfoRecord, ...]]
    core_relos: dict[str, tuple[CoreRelo, ...]]

    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview, btf: Btf, *, path: str = "",
              section: str = ".BTF.ext") -> BtfExt:
        raw = bytes(data)

        def bad(message: str) -> ObjectError:
            return ObjectError(f"bad BTF.ext: {message}", path=path, section=section)

        if len(raw) < 24:
            raise bad(f"blob of {len(raw)} bytes is shorter than the header")
        magic, version, flags, hdr_len = _HDR.unpack_from(raw, 0)
        if magic != BTF_MAGIC:
            raise bad(f"magic {magic:#06x} is not {BTF_MAGIC:#06x}")
        if version != 1:
            raise bad(f"version {version} is not 1")
        if flags:
            raise bad(f"unsupported header flags {flags:#x}")
        # The header must at least cover func_info and line_info (libbpf's
        # offsetofend(struct btf_ext_header, line_info_len)).
        if hdr_len < 24 or hdr_len > len(raw):
            raise bad(f"header length {hdr_len} out of range")
        fi_off, fi_len, li_off, li_len = struct.unpack_from("<IIII", raw, 8)
        cr_off = cr_len = 0
        if hdr_len >= 32:
            cr_off, cr_len = struct.unpack_from("<II", raw, 24)
        body = raw[hdr_len:]

        def subsection(off: int, length: int, what: str, min_rec: int
                       ) -> list[tuple[str, int, bytes]]:
            """(section name, record size, records bytes) for one family."""
            if not length:
                return []
            if off % 4:
                raise bad(f"{what} offset {off} is not 4-byte aligned")
            if off > len(body) or length > len(body) - off:
                raise bad(f"{what} runs past the end of the blob")
            blob = body[off:off + length]
            if len(blob) < 4:
                raise bad(f"{what} too short for its record size")
            (rec_size,) = _U32.unpack_from(blob, 0)
            if rec_size < min_rec or rec_size % 4:
                raise bad(f"{what} record size {rec_size} is invalid")
            pos = 4
            out: list[tuple[str, int, bytes]] = []
            while pos < len(blob):
                if pos + _SEC.size > len(blob):
                    raise bad(f"{what} section header truncated")
                name_off, num = _SEC.unpack_from(blob, pos)
                pos += _SEC.size
                if num == 0:
                    raise bad(f"{what} section with no records")
                total = num * rec_size
                if total > len(blob) - pos:
                    raise bad(f"{what} records run past the end of the sub-section")
                if name_off >= len(btf.strings):
                    raise bad(f"{what} section name offset {name_off} outside BTF strings")
                out.append((btf.string_at(name_off), rec_size, blob[pos:pos + total]))
                pos += total
            return out

        func_info: dict[str, tuple[FuncInfoRecord, ...]] = {}
        for name, size, recs in subsection(fi_off, fi_len, "func_info", _FUNC_INFO_MIN):
            func_info[name] = func_info.get(name, ()) + tuple(
                FuncInfoRecord(*struct.unpack_from("<II", recs, i))
                for i in range(0, len(recs), size))
        line_info: dict[str, tuple[LineInfoRecord, ...]] = {}
        for name, size, recs in subsection(li_off, li_len, "line_info", _LINE_INFO_MIN):
            line_info[name] = line_info.get(name, ()) + tuple(
                LineInfoRecord(*struct.unpack_from("<IIII", recs, i))
                for i in range(0, len(recs), size))
        core_relos: dict[str, tuple[CoreRelo, ...]] = {}
        for name, size, recs in subsection(cr_off, cr_len, "core_relo", _CORE_RELO_MIN):
            core_relos[name] = core_relos.get(name, ()) + tuple(
                CoreRelo(*struct.unpack_from("<IIII", recs, i))
                for i in range(0, len(recs), size))
        return cls(func_info=func_info, line_info=line_info, core_relos=core_relos)
