"""The ELF64 container of a BPF object, as plain bounds-checked records.

An eBPF object (``clang -target bpf -c``) is an ``ET_REL`` ELF64 file with
``e_machine = EM_BPF`` (247). This module turns it into plain records
(sections, symbols, ``Elf64_Rel`` relocations) with every offset checked
against the file, so the rest of the loader never reads outside the buffer.

pyelftools decodes the section header table and section names; that is the
one place it is called, and every exception it raises on garbage
(``ELFError``, construct/struct errors, failed lookups) becomes
:class:`ObjectError` there. Symbols (``Elf64_Sym``) and relocations
(``Elf64_Rel``) are fixed 24- and 16-byte records decoded directly, which
keeps their numeric fields (types, bindings, special section indices) as the
numbers libbpf compares against.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from elftools.common.exceptions import ELFError, ELFParseError
from elftools.construct.core import ConstructError
from elftools.elf import enums
from elftools.elf.elffile import ELFFile

from pyxdp.errors import ObjectError

__all__ = [
    "EM_BPF",
    "ElfImage",
    "ElfRel",
    "ElfSection",
    "ElfSymbol",
    "open_elf",
]

EM_BPF = 247
ET_REL = 1
ELFCLASS64 = 2
ELFDATA2LSB = 1

SHT_NULL = 0
SHT_PROGBITS = 1
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_NOBITS = 8
SHT_REL = 9

SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4

STT_NOTYPE = 0
STT_OBJECT = 1
STT_FUNC = 2
STT_SECTION = 3
STT_FILE = 4

STB_LOCAL = 0
STB_GLOBAL = 1
STB_WEAK = 2

STV_DEFAULT = 0
STV_INTERNAL = 1
STV_HIDDEN = 2

SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
SHN_ABS = 0xFFF1
SHN_COMMON = 0xFFF2

_SYM = struct.Struct("<IBBHQQ")  # Elf64_Sym
_REL = struct.Struct("<QQ")  # Elf64_Rel

# pyelftools reports fields it knows as names; these turn them back into numbers.
_SH_TYPES: dict[str, int] = {}
for _table in (enums.ENUM_SH_TYPE_BASE, enums.ENUM_SH_TYPE_AMD64):
    _SH_TYPES.update({k: v for k, v in _table.items() if isinstance(v, int)})

# Everything pyelftools (and the construct library under it) raises on bad input.
_PARSE_ERRORS = (ELFError, ELFParseError, ConstructError, struct.error, ValueError,
                 KeyError, IndexError, TypeError, AttributeError, ZeroDivisionError,
                 OverflowError, UnicodeDecodeError, AssertionError, RecursionError,
                 MemoryError, EOFError)

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ElfSection:
    """``Elf64_Shdr`` with its name resolved."""

    index: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True, slots=True)
class ElfSymbol:
    """``Elf64_Sym`` with its name resolved; ``shndx`` keeps special values (SHN_*)."""

    index: int
    name: str
    value: int
    size: int
    type: int
    bind: int
    visibility: int
    shndx: int


@dataclass(frozen=True, slots=True)
class ElfRel:
    """``Elf64_Rel``: relocation of ``type`` at ``offset`` against symbol ``sym``."""

    offset: int
    sym: int
    type: int


def _number(value: object, table: Mapping[str, int], what: str) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value in table:
        return table[value]
    raise ObjectError(f"unrecognised {what} {value!r}")


class ElfImage:
    """Sections, symbols and relocations of one BPF object, bounds-checked."""

    def __init__(self, data: bytes, path: str, sections: tuple[ElfSection, ...],
                 symtab: ElfSection | None, strtab: ElfSection | None) -> None:
        self.data = data
        self.path = path
        self.sections = sections
        self.symtab = symtab
        self._strtab = strtab
        self._symbols: tuple[ElfSymbol, ...] | None = None

    def error(self, message: str, section: str | ElfSection = "") -> ObjectError:
        name = section.name if isinstance(section, ElfSection) else section
        return ObjectError(message, path=self.path, section=name)

    def section(self, index: int) -> ElfSection | None:
        return self.sections[index] if 0 < index < len(self.sections) else None

    def section_data(self, sec: ElfSection) -> bytes:
        """File bytes of ``sec``; ``SHT_NOBITS`` sections have none (``b""``)."""
        if sec.type == SHT_NOBITS:
            return b""
        end = sec.offset + sec.size
        if sec.offset < 0 or end > len(self.data):
            raise self.error(f"section data [{sec.offset:#x}, {end:#x}) lies outside the "
                             f"{len(self.data)}-byte file", sec)
        return self.data[sec.offset:end]

    @property
    def symbols(self) -> tuple[ElfSymbol, ...]:
        """The ``.symtab`` entries in table order (index 0 is the null symbol)."""
        if self._symbols is None:
            self._symbols = self._read_symbols()
        return self._symbols

    def _read_symbols(self) -> tuple[ElfSymbol, ...]:
        if self.symtab is None or self._strtab is None:
            raise self.error("no symbol table (stripped object?)")
        sec = self.symtab
        if sec.entsize != _SYM.size:
            raise self.error(f"symbol entry size {sec.entsize} is not {_SYM.size}", sec)
        raw = self.section_data(sec)
        if len(raw) % _SYM.size:
            raise self.error("symbol table size is not a whole number of entries", sec)
        strtab = self.section_data(self._strtab)
        out = []
        for i in range(0, len(raw), _SYM.size):
            st_name, st_info, st_other, st_shndx, st_value, st_size = _SYM.unpack_from(raw, i)
            if st_name and st_name >= len(strtab):
                raise self.error(f"symbol {i // _SYM.size}: name offset {st_name} outside "
                                 f"the string table", sec)
            end = strtab.find(b"\0", st_name)
            if end < 0:
                raise self.error(f"symbol {i // _SYM.size}: unterminated name", sec)
            name = strtab[st_name:end].decode("utf-8", "replace")
            out.append(ElfSymbol(index=i // _SYM.size, name=name, value=st_value,
                                 size=st_size, type=st_info & 0xF, bind=st_info >> 4,
                                 visibility=st_other & 0x3, shndx=st_shndx))
        return tuple(out)

    def relocations(self, sec: ElfSection) -> tuple[ElfRel, ...]:
        """Entries of an ``SHT_REL`` section (BPF objects never use ``SHT_RELA``)."""
        if sec.entsize != _REL.size:
            raise self.error(f"relocation entry size {sec.entsize} is not {_REL.size}", sec)
        raw = self.section_data(sec)
        if len(raw) % _REL.size:
            raise self.error("relocation section size is not a whole number of entries", sec)
        return tuple(ElfRel(offset=off, sym=info >> 32, type=info & 0xFFFF_FFFF)
                     for off, info in _REL.iter_unpack(raw))


def _guard(path: str, what: str, fn: Callable[[], _T]) -> _T:
    """Run a pyelftools call, turning anything it raises into ObjectError."""
    try:
        return fn()
    except ObjectError:
        raise
    except _PARSE_ERRORS as exc:
        raise ObjectError(f"malformed ELF ({what}): {exc}", path=path) from None


def open_elf(data: bytes, path: str = "") -> ElfImage:
    """Check the ELF header for a little-endian ELF64 BPF relocatable and index it."""
    if len(data) < 64:
        raise ObjectError(f"file of {len(data)} bytes is too short for an ELF64 header",
                          path=path)
    if data[:4] != b"\x7fELF":
        raise ObjectError("not an ELF file (bad magic)", path=path)
    # Checked on raw bytes first so the messages name the actual problem.
    if data[4] != ELFCLASS64:
        raise ObjectError(f"ELF class {data[4]} is not ELFCLASS64 (BPF objects are 64-bit)",
                          path=path)
    if data[5] != ELFDATA2LSB:
        raise ObjectError(f"ELF data encoding {data[5]} is not little-endian "
                          f"(big-endian objects come from -target bpfeb)", path=path)
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    if e_machine != EM_BPF:
        raise ObjectError(f"e_machine {e_machine} is not EM_BPF ({EM_BPF})", path=path)
    if e_type != ET_REL:
        raise ObjectError(f"e_type {e_type} is not ET_REL (a relocatable object)", path=path)

    def read_headers() -> tuple[tuple[ElfSection, ...], ElfSection | None,
                                ElfSection | None]:
        elf: Any = ELFFile(io.BytesIO(data))
        count = elf.num_sections()
        if count > 0xFFFF or count * 64 > len(data):
            raise ObjectError(f"section count {count} does not fit in the file", path=path)
        sections: list[ElfSection] = []
        symtab: ElfSection | None = None
        for i in range(count):
            section = elf.get_section(i)
            hdr = section.header
            name = section.name if i else ""
            if not isinstance(name, str):
                raise ObjectError(f"section {i} has an unreadable name", path=path)
            sec = ElfSection(index=i, name=name,
                             type=_number(hdr["sh_type"], _SH_TYPES, "section type"),
                             flags=int(hdr["sh_flags"]), offset=int(hdr["sh_offset"]),
                             size=int(hdr["sh_size"]), link=int(hdr["sh_link"]),
                             info=int(hdr["sh_info"]), entsize=int(hdr["sh_entsize"]))
            if sec.type == SHT_SYMTAB:
                if symtab is not None:
                    raise ObjectError("more than one symbol table", path=path)
                symtab = sec
            sections.append(sec)
        strtab = None
        if symtab is not None:
            if not 0 < symtab.link < count or sections[symtab.link].type != SHT_STRTAB:
                raise ObjectError(f"symbol table links to section {symtab.link}, not a "
                                  f"string table", path=path, section=symtab.name)
            strtab = sections[symtab.link]
        return tuple(sections), symtab, strtab

    sections, symtab, strtab = _guard(path, "section headers", read_headers)
    return ElfImage(data, path, sections, symtab, strtab)
