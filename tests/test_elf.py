"""ELF object -> CollectionSpec: the sample objects, linking, maps, errors."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pyxdp.asm import opcodes as op
from pyxdp.btf import BTF_FUNC_GLOBAL, BTF_FUNC_STATIC, BtfKind
from pyxdp.elf import internal_map_name, load_collection_spec, object_name, program_type
from pyxdp.elf.elfio import open_elf
from pyxdp.errors import NotSupportedError, ObjectError, PyxdpError
from pyxdp.spec import (
    BPF_F_RDONLY_PROG,
    BPF_F_XDP_HAS_FRAGS,
    BPF_XDP,
    BPF_XDP_CPUMAP,
    BPF_XDP_DEVMAP,
    CollectionSpec,
    InnerMapRef,
    MapSpec,
    ProgramRef,
    ProgramSpec,
    XdpRunConfig,
)

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
LOADER = SAMPLES / "loader"
OBJECTS = sorted(SAMPLES.glob("*.o")) + sorted(LOADER.glob("*.o"))
CPUS = ("v2", "v3", "v4")
LOADER_TESTS = ("multi_prog", "globals", "legacy_maps", "map_in_map", "sections")

PSEUDO_CALL = op.CallSrc.BPF_PSEUDO_CALL
PSEUDO_FUNC = op.PseudoSrc.BPF_PSEUDO_FUNC
MAP_FD = op.PseudoSrc.BPF_PSEUDO_MAP_FD
MAP_VALUE = op.PseudoSrc.BPF_PSEUDO_MAP_VALUE


def loader(name: str, cpu: str = "v3") -> Path:
    path = LOADER / f"{name}.{cpu}.o"
    if not path.exists():
        pytest.skip(f"{path.relative_to(ROOT)} not built (make -C samples)")
    return path


def spec_of(name: str, cpu: str = "v3") -> CollectionSpec:
    return load_collection_spec(loader(name, cpu))


# -- invariants every linked program must satisfy ------------------------------------


def check_program(spec: CollectionSpec, prog: ProgramSpec) -> None:
    insns = prog.insns
    assert insns, prog.name
    # The functions tile the program, entry point first.
    assert prog.functions[0].name == prog.name
    pc = 0
    for fn in prog.functions:
        assert fn.pc == pc and fn.count > 0
        pc += fn.count
    assert pc == len(insns)
    assert len({fn.name for fn in prog.functions}) == len(prog.functions)
    starts = {fn.pc for fn in prog.functions}
    refs = {r.pc: r for r in prog.map_refs}
    assert len(refs) == len(prog.map_refs)
    for pc, insn in enumerate(insns):
        if insn.code == op.OP_CALL and insn.src == PSEUDO_CALL:
            assert pc + insn.imm + 1 in starts, f"{prog.name}: call at {pc} misses a function"
        if insn.is_ld_imm64():
            assert pc + 1 < len(insns) and insns[pc + 1].code == 0
            if insn.src == PSEUDO_FUNC:
                assert pc + insn.imm + 1 in starts, f"{prog.name}: func addr at {pc}"
            if insn.src in (MAP_FD, MAP_VALUE):
                assert pc in refs, f"{prog.name}: map load at {pc} has no MapRef"
    for ref in prog.map_refs:
        first, second = insns[ref.pc], insns[ref.pc + 1]
        assert first.is_ld_imm64() and first.imm == 0
        m = spec.maps[ref.map_name]
        if ref.kind == "fd":
            assert first.src == MAP_FD and not m.is_global_data
        else:
            assert first.src == MAP_VALUE and m.is_global_data
            assert second.imm == ref.offset and 0 <= ref.offset < m.value_size
    if prog.func_info:
        assert [f.insn_off for f in prog.func_info] == [fn.pc for fn in prog.functions]
        assert [f.name for f in prog.func_info] == [fn.name for fn in prog.functions]
    if prog.line_info:
        offs = [li.insn_off for li in prog.line_info]
        assert offs == sorted(offs) and offs[0] == 0 and offs[-1] < len(insns)
        assert prog.source_line(0) is not None
        for fn in prog.functions:  # every function starts with a line record
            assert fn.pc in offs
    assert prog.source_line(-1) is None


def libbpf_order(prog: ProgramSpec) -> list[str]:
    """The order libbpf appends subprograms in: depth-first, at first reference."""
    by_pc = {fn.pc: fn for fn in prog.functions}
    seen: list[str] = []

    def visit(pc: int) -> None:
        fn = by_pc[pc]
        seen.append(fn.name)
        for i in range(fn.pc, fn.pc + fn.count):
            insn = prog.insns[i]
            if (insn.code == op.OP_CALL and insn.src == PSEUDO_CALL) or (
                    insn.is_ld_imm64() and insn.src == PSEUDO_FUNC):
                target = by_pc[i + insn.imm + 1]
                if target.name not in seen:
                    visit(target.pc)

    visit(0)
    return seen


@pytest.mark.parametrize("path", OBJECTS, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_sample_object_parses(path: Path) -> None:
    spec = load_collection_spec(path)
    assert spec.programs
    assert "GPL" in spec.license
    assert spec.btf is not None
    assert spec.name == path.name.split(".")[0]
    for prog in spec.programs.values():
        check_program(spec, prog)
        assert [fn.name for fn in prog.functions] == libbpf_order(prog)
        assert prog.license == spec.license
        assert prog.prog_type == "xdp" or path.name == "mixed.o"
    for m in spec.maps.values():
        assert len(m.kernel_name) <= 15
        if m.key_type is not None:
            assert spec.btf.resolve_size(m.key_type) == m.key_size
        if m.value_type is not None and not m.is_global_data:
            assert spec.btf.resolve_size(m.value_type) == m.value_size


@pytest.mark.parametrize("path", OBJECTS, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_parsing_is_deterministic(path: Path) -> None:
    a = load_collection_spec(path)
    b = load_collection_spec(path)
    assert a == b
    assert load_collection_spec(path.read_bytes(), name=a.name) == a
    assert load_collection_spec(str(path)) == a
    c = a.copy()
    assert c == a and c.programs is not a.programs


# -- multi_prog: several programs, .text subprograms, callbacks ----------------------------


@pytest.mark.parametrize("cpu", CPUS)
def test_multi_prog(cpu: str) -> None:
    spec = spec_of("multi_prog", cpu)
    assert list(spec.programs) == ["multi_first", "multi_second", "multi_loop"]
    counters = spec.maps["counters"]
    assert (counters.type, counters.key_size, counters.value_size, counters.max_entries) == \
        (2, 4, 8, 8)
    assert spec.btf is not None and counters.key_type is not None
    assert spec.btf.describe(counters.key_type) == "__u32"
    assert spec.btf.describe(counters.value_type or 0) == "__u64"
    funcs = {p.name: {fn.name for fn in p.functions} for p in spec.programs.values()}
    assert funcs["multi_first"] == {"multi_first", "counter_add", "level1", "level2", "level3"}
    assert funcs["multi_second"] == {"multi_second", "multi_packet_len", "counter_add",
                                     "level2", "level3"}
    assert funcs["multi_loop"] == {"multi_loop", "loop_step", "counter_add", "sum_counter"}
    for prog in spec.programs.values():
        assert prog.section == "xdp" and prog.expected_attach_type == BPF_XDP
        assert prog.flags == 0 and prog.autoload
        assert {r.map_name for r in prog.map_refs} == {"counters"}
        assert all(r.kind == "fd" for r in prog.map_refs)
    # Callbacks: ld_imm64 with src_reg = BPF_PSEUDO_FUNC pointing at their start.
    loop = spec.programs["multi_loop"]
    starts = {fn.pc: fn.name for fn in loop.functions}
    targets = {starts[pc + i.imm + 1] for pc, i in enumerate(loop.insns)
               if i.is_ld_imm64() and i.src == PSEUDO_FUNC}
    assert targets == {"loop_step", "sum_counter"}
    # The three-level chain: every call lands on the start of the callee.
    first = spec.programs["multi_first"]
    by_pc = {fn.pc: fn.name for fn in first.functions}
    callees = {by_pc[pc + i.imm + 1] for pc, i in enumerate(first.insns)
               if i.code == op.OP_CALL and i.src == PSEUDO_CALL}
    assert callees == {"counter_add", "level1", "level2", "level3"}


def test_line_info_names_the_c_line() -> None:
    spec = spec_of("multi_prog")
    for prog in spec.programs.values():
        assert prog.line_info[0].file_name.endswith("multi_prog.c")
        for ref in prog.map_refs:
            fn = prog.function_at(ref.pc)
            assert fn is not None
            line = prog.source_line(ref.pc)
            assert line is not None and line.startswith("multi_prog.c:")
            assert "counters" in line
        entry = prog.line_info_at(0)
        assert entry is not None and entry.line > 0
    first = spec.programs["multi_first"]
    add = next(fn for fn in first.functions if fn.name == "counter_add")
    ref = next(r for r in first.map_refs if add.pc <= r.pc < add.pc + add.count)
    assert "bpf_map_lookup_elem(&counters, &idx)" in (first.source_line(ref.pc) or "")
    li = first.line_info_at(ref.pc)
    assert li is not None and li.line_col >> 10 == li.line
    assert li.render() == first.source_line(ref.pc)


def test_func_info_and_global_function() -> None:
    spec = spec_of("multi_prog")
    assert spec.btf is not None
    second = spec.programs["multi_second"]
    names = [f.name for f in second.func_info]
    assert names[0] == "multi_second" and "multi_packet_len" in names
    for f in second.func_info:
        t = spec.btf.types[f.type_id]
        assert t.kind is BtfKind.FUNC and t.name == f.name
    glob = spec.btf.find("multi_packet_len", BtfKind.FUNC)
    assert glob is not None and spec.btf.types[glob].linkage == BTF_FUNC_GLOBAL
    level3 = spec.btf.find("level3", BtfKind.FUNC)
    assert level3 is not None and spec.btf.types[level3].linkage == BTF_FUNC_STATIC


# -- globals: .data, .rodata, .bss, .rodata.str1.1, .data.custom ----------------------------


def _var_offsets(spec: CollectionSpec, section: str) -> dict[str, tuple[int, int]]:
    assert spec.btf is not None
    ds = spec.btf.find(section, BtfKind.DATASEC)
    assert ds is not None
    return {spec.btf.types[v.type].name: (v.offset, v.size)
            for v in spec.btf.types[ds].secinfos}


def _var_bytes(spec: CollectionSpec, section: str, var: str) -> bytes:
    off, size = _var_offsets(spec, section)[var]
    (key, value), = spec.maps[section].contents
    assert key == b"\0\0\0\0" and isinstance(value, bytes)
    return value[off:off + size]


@pytest.mark.parametrize("cpu", CPUS)
def test_global_data(cpu: str) -> None:
    spec = spec_of("globals", cpu)
    assert set(spec.maps) == {".data", ".rodata", ".bss", ".rodata.str1.1", ".data.custom"}
    for m in spec.maps.values():
        assert (m.type, m.key_size, m.max_entries) == (2, 4, 1)
        assert m.section == m.name
    assert _var_bytes(spec, ".data", "data_counter") == struct.pack("<I", 7)
    assert _var_bytes(spec, ".data", "data_bytes") == bytes(range(1, 9))
    assert _var_bytes(spec, ".data", "data_static") == struct.pack("<Q", 0x1122334455667788)
    assert _var_bytes(spec, ".rodata", "ro_limit") == struct.pack("<I", 100)
    assert _var_bytes(spec, ".rodata", "ro_mac") == bytes.fromhex("021122334455")
    assert _var_bytes(spec, ".rodata", "ro_static") == struct.pack("<H", 0xBEEF)
    assert _var_bytes(spec, ".data.custom", "custom_value") == struct.pack("<I", 42)
    bss = spec.maps[".bss"]
    assert bss.contents == ((b"\0\0\0\0", bytes(bss.value_size)),)
    assert bss.value_size == 8 + 16 + 4
    strs = spec.maps[".rodata.str1.1"].contents[0][1]
    assert isinstance(strs, bytes) and b"globals: len %u over limit %u\n\0" in strs
    # .rodata is read-only for programs and frozen after loading, as libbpf does.
    assert spec.maps[".rodata"].flags & BPF_F_RDONLY_PROG and spec.maps[".rodata"].frozen
    assert spec.maps[".rodata.str1.1"].frozen
    assert not spec.maps[".data"].frozen and not spec.maps[".data"].flags & BPF_F_RDONLY_PROG
    assert spec.maps[".data"].kernel_name == "globals.data"
    assert spec.maps[".rodata"].kernel_name == "globals.rodata"
    assert spec.maps[".bss"].kernel_name == "globals.bss"
    assert spec.maps[".data.custom"].kernel_name == ".data.custom"
    assert spec.btf is not None
    assert spec.maps[".data"].value_type == spec.btf.find(".data", BtfKind.DATASEC)


@pytest.mark.parametrize("cpu", CPUS)
def test_global_data_references(cpu: str) -> None:
    spec = spec_of("globals", cpu)
    prog = spec.programs["globals_prog"]
    assert prog.map_refs and all(r.kind == "value" for r in prog.map_refs)
    by_line: dict[str, set[tuple[str, int]]] = {}
    for r in prog.map_refs:
        line = prog.source_line(r.pc) or ""
        by_line.setdefault(line.split(": ", 1)[1], set()).add((r.map_name, r.offset))
    off = {**{f".data:{k}": v[0] for k, v in _var_offsets(spec, ".data").items()},
           **{f".rodata:{k}": v[0] for k, v in _var_offsets(spec, ".rodata").items()},
           **{f".bss:{k}": v[0] for k, v in _var_offsets(spec, ".bss").items()}}
    assert by_line["data_static += len;"] == {(".data", off[".data:data_static"])}
    assert by_line["bss_static ^= ro_static;"] == {
        (".bss", off[".bss:bss_static"]), (".rodata", off[".rodata:ro_static"])}
    assert by_line["custom_value += 1;"] == {(".data.custom", 0)}
    printk = [k for k in by_line if k.startswith("bpf_trace_printk(")]
    assert printk and (".rodata.str1.1", 0) in by_line[printk[0]]


# -- legacy maps ---------------------------------------------------------------------------


@pytest.mark.parametrize("cpu", CPUS)
def test_legacy_maps(cpu: str) -> None:
    spec = spec_of("legacy_maps", cpu)
    stats, lengths = spec.maps["legacy_stats"], spec.maps["legacy_lengths"]
    assert (stats.type, stats.key_size, stats.value_size, stats.max_entries, stats.flags) == \
        (6, 4, 8, 2, 0)
    assert (lengths.type, lengths.key_size, lengths.value_size, lengths.max_entries,
            lengths.flags) == (1, 4, 8, 1024, 1)
    assert stats.section == lengths.section == "maps"
    assert list(spec.maps) == ["legacy_stats", "legacy_lengths"]
    prog = spec.programs["legacy_prog"]
    assert [r.map_name for r in prog.map_refs].count("legacy_stats") == 2
    assert {r.map_name for r in prog.map_refs} == {"legacy_stats", "legacy_lengths"}
    for r in prog.map_refs:
        assert r.map_name in (prog.source_line(r.pc) or "")


# -- map-in-map and prog_array initial values -------------------------------------------------


@pytest.mark.parametrize("cpu", CPUS)
def test_map_in_map(cpu: str) -> None:
    spec = spec_of("map_in_map", cpu)
    assert set(spec.programs) == {"mim_main", "mim_tail_a", "mim_tail_b"}
    outer, outer_hash, jmp = spec.maps["outer_array"], spec.maps["outer_hash"], spec.maps["jmp"]
    assert (outer.type, outer.key_size, outer.value_size, outer.max_entries) == (12, 4, 4, 2)
    assert (outer_hash.type, outer_hash.max_entries) == (13, 8)
    for m in (outer, outer_hash):
        assert m.inner is not None
        inner = m.inner
        assert (inner.type, inner.key_size, inner.value_size, inner.max_entries) == (2, 4, 8, 4)
        assert inner.name == f"{m.name}.inner"
        assert inner.contents == () and inner.inner is None
    assert outer.contents == ((struct.pack("<I", 0), InnerMapRef("inner_a")),
                              (struct.pack("<I", 1), InnerMapRef("inner_b")))
    assert outer_hash.contents == ((struct.pack("<I", 3), InnerMapRef("inner_b")),)
    assert (jmp.type, jmp.key_size, jmp.value_size, jmp.max_entries) == (3, 4, 4, 4)
    assert jmp.contents == ((struct.pack("<I", 0), ProgramRef("mim_tail_a")),
                            (struct.pack("<I", 2), ProgramRef("mim_tail_b")))
    for name in ("inner_a", "inner_b"):
        m = spec.maps[name]
        assert (m.type, m.key_size, m.value_size, m.max_entries, m.contents) == (2, 4, 8, 4, ())
    refs = {r.map_name for r in spec.programs["mim_main"].map_refs}
    assert refs == {"outer_array", "outer_hash", "jmp"}


# -- section names -------------------------------------------------------------------------


@pytest.mark.parametrize("cpu", CPUS)
def test_sections(cpu: str) -> None:
    spec = spec_of("sections", cpu)
    got = {p.name: (p.section, p.expected_attach_type, p.flags) for p in spec.programs.values()}
    frags = BPF_F_XDP_HAS_FRAGS
    assert got == {
        "sec_xdp": ("xdp", BPF_XDP, 0),
        "sec_xdp_frags": ("xdp.frags", BPF_XDP, frags),
        "sec_devmap": ("xdp/devmap", BPF_XDP_DEVMAP, 0),
        "sec_devmap_frags": ("xdp.frags/devmap", BPF_XDP_DEVMAP, frags),
        "sec_cpumap": ("xdp/cpumap", BPF_XDP_CPUMAP, 0),
        "sec_cpumap_frags": ("xdp.frags/cpumap", BPF_XDP_CPUMAP, frags),
        "sec_legacy_pass": ("xdp_pass", BPF_XDP, 0),
    }
    assert spec.maps == {}


def test_program_type_table() -> None:
    assert program_type("xdp") == (37, 0)
    assert program_type("xdp.frags/cpumap") == (35, 32)
    # libbpf 1.x has no sloppy prefixes: "xdp_devmap/" is no devmap program, and a
    # legacy "xdp*" name is a plain XDP program once a loader names the type.
    assert program_type("xdp_devmap/foo") == (37, 0)
    assert program_type("xdp_cpumap/foo") == (37, 0)
    assert program_type("xdp/foo") == (37, 0)
    assert program_type("xdp_sock") == (37, 0)
    assert program_type("tc") is None and program_type("socket") is None


def test_section_table_as_libbpf_1x() -> None:
    from pyxdp.elf.sections import find_sec_def, prog_type_name
    from pyxdp.uapi.bpf import BpfAttachType as A

    def kind(sec: str) -> tuple[str, int, int, str] | None:
        d = find_sec_def(sec)
        return None if d is None else (prog_type_name(d.prog_type), d.attach_type,
                                       d.prog_flags, d.attach_target(sec))
    assert kind("tc") == ("sched_cls", 0, 0, "")
    assert kind("tc/ingress") == ("sched_cls", A.BPF_TCX_INGRESS, 0, "")
    assert kind("tc/foo") is None  # "tc" matches exactly, "tc/ingress" too
    assert kind("classifier") == ("sched_cls", 0, 0, "")
    assert kind("tp_btf/xdp_exception") == ("tracing", A.BPF_TRACE_RAW_TP, 0, "xdp_exception")
    assert kind("tp_btfx") is None  # "type+" wants the name itself or "type/..."
    assert kind("fentry/do_xdp_generic") == ("tracing", A.BPF_TRACE_FENTRY, 0,
                                             "do_xdp_generic")
    assert kind("fexit.s/f") == ("tracing", A.BPF_TRACE_FEXIT, 1 << 4, "f")
    assert kind("tracepoint/xdp/xdp_redirect") == ("tracepoint", 0, 0, "")
    assert kind("tp/xdp/xdp_redirect") == ("tracepoint", 0, 0, "")
    assert kind("raw_tp/xdp_exception") == ("raw_tracepoint", 0, 0, "")
    assert kind("kprobe/do_xdp_generic") == ("kprobe", 0, 0, "")
    assert kind("xdp.frags/devmap") == ("xdp", A.BPF_XDP_DEVMAP, 1 << 5, "")
    assert kind("foo") is None


# -- the same source for v2, v3 and v4 ------------------------------------------------------


def _normal(spec: CollectionSpec, m: MapSpec | None) -> Any:
    """A map with BTF ids replaced by the types they name (ids may differ by build)."""
    if m is None:
        return None
    btf = spec.btf
    assert btf is not None

    def desc(tid: int | None) -> str | None:
        return None if tid is None else btf.describe(tid)
    return (m.name, m.type, m.key_size, m.value_size, m.max_entries, m.flags, m.pinning,
            desc(m.key_type), desc(m.value_type), _normal(spec, m.inner), m.contents, m.frozen,
            m.section, m.kernel_name)


@pytest.mark.parametrize("name", LOADER_TESTS)
def test_cpu_versions_give_the_same_maps(name: str) -> None:
    specs = [spec_of(name, cpu) for cpu in CPUS]
    base = specs[0]
    for other in specs[1:]:
        assert list(other.maps) == list(base.maps)
        assert [_normal(other, m) for m in other.maps.values()] == \
            [_normal(base, m) for m in base.maps.values()]
        assert list(other.programs) == list(base.programs)
        for p in base.programs.values():
            q = other.programs[p.name]
            assert sorted(r.map_name for r in q.map_refs) == sorted(r.map_name for r in p.map_refs)
            assert {f.name for f in q.functions} == {f.name for f in p.functions}
            assert (q.section, q.expected_attach_type, q.flags) == \
                (p.section, p.expected_attach_type, p.flags)


# -- names --------------------------------------------------------------------------------


def test_object_and_internal_map_names() -> None:
    assert object_name("dir/globals.v2.o") == "globals"
    assert object_name("a_very_long_object_name.o") == "a_very_long_obj"
    assert internal_map_name("globals", ".data") == "globals.data"
    assert internal_map_name("my_object_name", ".rodata") == "my_objec.rodata"
    assert internal_map_name("my_object_name", ".bss") == "my_objec.bss"
    assert internal_map_name("my_object_name", ".kconfig") == "my_obje.kconfig"
    assert internal_map_name("obj", ".rodata.str1.1") == ".rodata.str1.1"
    assert internal_map_name("obj", ".rodata.abracadabra") == ".rodata.abracad"
    assert internal_map_name("o-b", ".data") == "o_b.data"
    assert internal_map_name("", ".bss") == ".bss"


# -- malformed objects ---------------------------------------------------------------------


def _sample_bytes() -> bytes:
    return loader("multi_prog").read_bytes()


def _reject(data: bytes, match: str | None, err: type[PyxdpError] = ObjectError) -> PyxdpError:
    with pytest.raises(err, match=match) as info:
        load_collection_spec(data)
    return info.value


def test_header_errors() -> None:
    data = _sample_bytes()
    _reject(data[:40], "too short")
    _reject(b"\0" * 64, "not an ELF")
    _reject(data[:4] + b"\1" + data[5:], "ELFCLASS64")
    _reject(data[:5] + b"\2" + data[6:], "little-endian")
    _reject(data[:18] + struct.pack("<H", 62) + data[20:], "EM_BPF")
    _reject(data[:16] + struct.pack("<H", 2) + data[18:], "ET_REL")
    _reject(data[: len(data) // 2], None)
    _reject(data[:0x28] + struct.pack("<Q", len(data) + 4096) + data[0x30:], None)


def test_missing_file_is_an_object_error(tmp_path: Path) -> None:
    err = _reject_path(tmp_path / "nope.o")
    assert isinstance(err, ObjectError) and err.path.endswith("nope.o")


def _reject_path(path: Path) -> PyxdpError:
    with pytest.raises(ObjectError) as info:
        load_collection_spec(path)
    return info.value


def _patch_relocation(data: bytes, section: str, index: int, *, offset: int | None = None,
                      rtype: int | None = None, sym: int | None = None) -> bytes:
    img = open_elf(data)
    sec = next(s for s in img.sections if s.name == section)
    pos = sec.offset + 16 * index
    r_offset, r_info = struct.unpack_from("<QQ", data, pos)
    if offset is not None:
        r_offset = offset
    if rtype is not None:
        r_info = (r_info & ~0xFFFFFFFF) | rtype
    if sym is not None:
        r_info = (sym << 32) | (r_info & 0xFFFFFFFF)
    out = bytearray(data)
    struct.pack_into("<QQ", out, pos, r_offset, r_info)
    return bytes(out)


def test_relocation_errors() -> None:
    data = _sample_bytes()
    err = _reject(_patch_relocation(data, ".relxdp", 0, rtype=7), "unsupported relocation type 7")
    assert isinstance(err, ObjectError) and err.section == ".relxdp"
    _reject(_patch_relocation(data, ".relxdp", 0, offset=3), "not an instruction")
    _reject(_patch_relocation(data, ".relxdp", 0, sym=100_000), "does not exist")
    # A relocation moved onto an instruction that is neither ld_imm64 nor call.
    img = open_elf(data)
    rel = img.relocations(next(s for s in img.sections if s.name == ".relxdp"))[0]
    _reject(_patch_relocation(data, ".relxdp", 0, offset=rel.offset + 16), "neither")


def test_huge_bss_is_rejected_without_allocating() -> None:
    data = bytearray(loader("globals").read_bytes())
    img = open_elf(bytes(data))
    bss = next(s for s in img.sections if s.name == ".bss")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    for size, match in ((8 << 20, "larger than a BPF array value"), (1 << 40, "does not fit")):
        struct.pack_into("<Q", data, shoff + 64 * bss.index + 32, size)  # sh_size
        err = _reject(bytes(data), match)
        assert isinstance(err, ObjectError) and err.section == ".bss"


def test_errors_name_file_and_section(tmp_path: Path) -> None:
    bad = tmp_path / "broken.o"
    bad.write_bytes(_patch_relocation(_sample_bytes(), ".relxdp", 0, rtype=7))
    err = _reject_path(bad)
    assert isinstance(err, ObjectError)
    assert err.path == str(bad) and err.section == ".relxdp"
    assert "broken.o" in str(err) and ".relxdp" in str(err)


# -- features outside the samples, built from C when a compiler is around ---------------------


def _clang() -> str | None:
    for name in ("clang-19", "clang-18", "clang-17", "clang-16", "clang"):
        if shutil.which(name):
            return name
    return None


@pytest.fixture
def build(tmp_path: Path) -> Any:
    clang = _clang()
    if clang is None:
        pytest.skip("no clang to build BPF test objects")

    def _build(source: str, name: str = "t") -> Path:
        src = tmp_path / f"{name}.c"
        src.write_text('#include "pyxdp_bpf.h"\n' + source + '\nLICENSE("GPL");\n')
        obj = tmp_path / f"{name}.o"
        res = subprocess.run([clang, "-O2", "-g", "-target", "bpf", "-I", str(SAMPLES / "include"),
                              "-c", str(src), "-o", str(obj)], capture_output=True, text=True)
        if res.returncode:
            pytest.skip(f"{clang} cannot build the test object: {res.stderr[-300:]}")
        return obj

    return _build


def test_core_relocations_are_kept_for_load(build: Any) -> None:
    obj = build("""
struct xdp_md___local { __u32 data; __u32 data_end; } __attribute__((preserve_access_index));
SEC("xdp") int core_prog(struct xdp_md *ctx)
{ struct xdp_md___local *c = (void *)ctx; return c->data_end > 5; }""")
    prog = load_collection_spec(obj).programs["core_prog"]
    assert [(r.access, r.kind) for r in prog.core_relos] == [("0:1", 0)]
    insn = prog.insns[prog.core_relos[0].pc]
    assert insn.code & 0x07 == op.BPF_LDX and insn.off == 4


def test_kfunc_calls_are_kept_and_externs_not_supported(build: Any) -> None:
    kfunc = build("""
extern int bpf_some_kfunc(struct xdp_md *ctx) __attribute__((section(".ksyms")));
SEC("xdp") int kf(struct xdp_md *ctx) { return bpf_some_kfunc(ctx); }""", "kfunc")
    prog = load_collection_spec(kfunc).programs["kf"]
    assert [k.name for k in prog.kfuncs] == ["bpf_some_kfunc"]
    call = prog.insns[prog.kfuncs[0].pc]
    assert call.code == op.OP_CALL and call.src == op.CallSrc.BPF_PSEUDO_KFUNC_CALL
    ksym = build("""
extern const int some_var __attribute__((section(".ksyms"), weak));
SEC("xdp") int ks(struct xdp_md *ctx) { return &some_var ? 1 : 2; }""", "ksym")
    with pytest.raises(NotSupportedError, match="extern variable 'some_var'"):
        load_collection_spec(ksym)


def test_arena_static_maps_and_other_types_are_not_supported(build: Any) -> None:
    arena = build("""
struct { __uint(type, 33); __uint(max_entries, 10); } ar SEC(".maps");
SEC("xdp") int a(struct xdp_md *ctx) { return bpf_map_lookup_elem(&ar, 0) ? 1 : 2; }""", "arena")
    with pytest.raises(NotSupportedError, match="arena map 'ar'"):
        load_collection_spec(arena)
    static = build("""
static struct { __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, __u32); __type(value, __u32);
 __uint(max_entries, 1); } sm SEC(".maps");
SEC("xdp") int s(struct xdp_md *ctx) { __u32 k = 0; return bpf_map_lookup_elem(&sm, &k) != 0; }
""", "static")
    with pytest.raises(NotSupportedError, match="static"):
        load_collection_spec(static)
    tc = build('SEC("tc") int t(struct __sk_buff *skb) { return 0; }', "tc")
    assert load_collection_spec(tc).programs["t"].prog_type == "sched_cls"


def test_run_config_version_autoload_and_hidden(build: Any) -> None:
    obj = build("""
struct { __uint(priority, 10); __uint(XDP_PASS, 1); __uint(XDP_DROP, 1); }
  _xdp_a SEC(".xdp_run_config");
struct { __uint(priority, 20); __uint(XDP_PASS, 0); } _xdp_b SEC(".xdp_run_config");
__attribute__((visibility("hidden"))) __noinline int hid(int x) { return x + 1; }
SEC("xdp") int xdp_a(struct xdp_md *ctx) { return XDP_PASS; }
SEC("xdp") int xdp_b(struct xdp_md *ctx) { return hid(ctx->data); }
SEC("?xdp") int xdp_c(struct xdp_md *ctx) { return XDP_PASS; }
__u32 _version SEC("version") = 0x050a00;""", "runcfg")
    spec = load_collection_spec(obj)
    assert spec.kern_version == 0x050A00
    assert spec.xdp_run_config == {
        "xdp_a": XdpRunConfig(priority=10, chain_call_actions=(1 << 1) | (1 << 2)),
        "xdp_b": XdpRunConfig(priority=20, chain_call_actions=0),
    }
    run = spec.xdp_run_config
    assert run["xdp_a"].chain_call(2) and not run["xdp_b"].chain_call(2)
    assert not spec.programs["xdp_c"].autoload and spec.programs["xdp_c"].section == "xdp"
    assert spec.programs["xdp_a"].autoload
    assert spec.btf is not None
    hid = spec.btf.find("hid", BtfKind.FUNC)
    # A hidden global subprogram is verified as static, as libbpf marks it.
    assert hid is not None and spec.btf.types[hid].linkage == BTF_FUNC_STATIC


def test_legacy_map_in_map_with_inner_index(build: Any) -> None:
    obj = build("""
struct bpf_map_def { unsigned int type, key_size, value_size, max_entries, map_flags,
                     inner_map_idx, numa_node; };
struct bpf_map_def SEC("maps") tmpl = { .type = BPF_MAP_TYPE_ARRAY, .key_size = 4,
    .value_size = 8, .max_entries = 2 };
struct bpf_map_def SEC("maps") outer = { .type = BPF_MAP_TYPE_ARRAY_OF_MAPS, .key_size = 4,
    .value_size = 4, .max_entries = 2, .inner_map_idx = 0, .numa_node = 1 };
SEC("xdp") int p(struct xdp_md *ctx) { __u32 k = 0; return bpf_map_lookup_elem(&outer, &k) != 0; }
""", "legacy28")
    spec = load_collection_spec(obj)
    outer = spec.maps["outer"]
    assert outer.inner == spec.maps["tmpl"] and outer.numa_node == 1
