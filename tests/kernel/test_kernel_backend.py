"""The kernel backend against the running kernel: every sample object loaded for real.

Maps are created and programs verified by Linux; global data, freezing,
map-in-map and prog-array slots, per-CPU values, map errnos, test_run and
its ENOSPC truncation, the BTF fix-ups and the no-BTF fallback, and that
closing the backend leaves no descriptor behind.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pyxdp.backend import Backend, MapHandle, ProgHandle, TestRunResult
from pyxdp.btf import Btf, BtfKind
from pyxdp.btf.vmlinux import kernel_lacks_kfuncs
from pyxdp.elf import load_collection_spec
from pyxdp.elf.elfio import open_elf
from pyxdp.errors import (
    ENOTSUPP,
    KernelError,
    MapError,
    NotSupportedError,
    TestRunTruncated,
    VerifierError,
)
from pyxdp.kernel import map_get_info, possible_cpus, prog_get_info
from pyxdp.kernel.backend import KernelBackend, KernelProgram, kernel_btf, kernel_object_name
from pyxdp.kernel.maps import KernelMap
from pyxdp.spec import (
    BPF_XDP,
    BPF_XDP_CPUMAP,
    BPF_XDP_DEVMAP,
    CollectionSpec,
    InnerMapRef,
    MapSpec,
    ProgramRef,
)
from pyxdp.uapi.bpf import BpfMapType, MapFlag, MapUpdateFlag, XdpAction

pytestmark = pytest.mark.kernel

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
ALL_OBJECTS = sorted(SAMPLES.glob("*.o")) + sorted(
    p for v in (2, 3, 4) for p in (SAMPLES / "loader").glob(f"*.v{v}.o"))
# Objects whose programs the verifier refuses on purpose (see the sample's comment).
REFUSED = {"unchecked.o": "invalid access to packet"}
# Objects calling pyxdp's extension helpers (bpf_redirect_xsk), which the kernel does
# not have: tests/kernel/test_xsk_datapath_kernel.py checks the refusal.
PYXDP_ONLY = {"xsk_redirect.o"}
# Objects whose programs load only bound to a device (XDP metadata kfuncs):
# tests/kernel/test_objects_kernel.py binds them.
DEVICE_BOUND = {"rx_meta.o"}
# Objects calling a kfunc this kernel's BTF lacks (flowtable.o without
# CONFIG_NF_FLOW_TABLE): libbpf's refusal is tests/kernel/test_flowtable_kernel.py's.
NEEDS_KFUNCS = {p.name for p in ALL_OBJECTS if kernel_lacks_kfuncs(
    k.name for prog in load_collection_spec(p).programs.values() for k in prog.kfuncs)}
LOADABLE = [p for p in ALL_OBJECTS
            if p.name not in REFUSED and p.name not in PYXDP_ONLY and p.name not in DEVICE_BOUND
            and p.name not in NEEDS_KFUNCS]

U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
NR_CPUS = possible_cpus()


def u32(n: int) -> bytes:
    return U32.pack(n)


def u64(n: int) -> bytes:
    return U64.pack(n)


def _name(p: Path) -> str:
    return str(p.relative_to(SAMPLES))


class Loaded:
    """One object loaded the way the Collection layer does it, by hand."""

    def __init__(self, spec: CollectionSpec, backend: KernelBackend) -> None:
        self.spec = spec
        self.backend = backend
        self.maps: dict[str, KernelMap] = {}
        self.progs: dict[str, KernelProgram] = {}
        handles: dict[str, MapHandle] = {}
        for name, ms in spec.maps.items():
            km = backend.create_map(ms, handles)
            self.maps[name] = km
            handles[name] = km
        for name, ps in spec.programs.items():
            if ps.autoload and not backend.cannot_load(ps):
                self.progs[name] = backend.load_program(ps, handles)
        for name, ms in spec.maps.items():
            for key, value in ms.contents:
                if isinstance(value, ProgramRef):
                    backend.set_prog_array(self.maps[name], U32.unpack(key[:4])[0],
                                           self.progs[value.name])
                elif isinstance(value, InnerMapRef):
                    backend.set_inner_map(self.maps[name], key, self.maps[value.name])


@contextmanager
def loaded(path: Path | str, spec: CollectionSpec | None = None) -> Iterator[Loaded]:
    spec = spec or load_collection_spec(SAMPLES / path)
    with KernelBackend(spec) as backend:
        yield Loaded(spec, backend)


@contextmanager
def pinned_cpu() -> Iterator[int]:
    """Run on one CPU so a per-CPU counter lands in a known slot."""
    before = os.sched_getaffinity(0)
    cpu = min(before)
    os.sched_setaffinity(0, {cpu})
    try:
        yield cpu
    finally:
        os.sched_setaffinity(0, before)


def udp_packet(src_mac: bytes = bytes.fromhex("020000000001"),
               dst_mac: bytes = bytes.fromhex("020000000002"), payload: bytes = b"x" * 18
               ) -> bytes:
    udp = struct.pack("!HHHH", 1234, 9, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                     bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    return dst_mac + src_mac + b"\x08\x00" + ip + udp


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


# --------------------------------------------------------------------------
# Every sample
# --------------------------------------------------------------------------

@pytest.mark.parametrize("path", LOADABLE, ids=_name)
def test_every_sample_loads(path: Path) -> None:
    spec = load_collection_spec(path)
    with loaded(path, spec) as obj:
        assert set(obj.maps) == set(spec.maps)
        assert set(obj.progs) == {n for n, p in spec.programs.items()
                                  if p.autoload and p.prog_type != "unspec"}
        for name, km in obj.maps.items():
            info = map_get_info(km.fd)
            ms = spec.maps[name]
            assert (info.type, info.key_size, info.value_size) == \
                (ms.type, ms.key_size, ms.value_size)
            assert km.id == info.id > 0
            assert info.name == kernel_object_name(ms.kernel_name or name)
        for name, kp in obj.progs.items():
            pinfo = prog_get_info(kp.fd)
            assert pinfo.id == kp.id and pinfo.name == name[:15]
            # Loaded with the object's BTF: func_info/line_info were accepted.
            assert pinfo.btf_id > 0
        assert obj.backend.warnings == []


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_sample_keeps_the_verifier_log(name: str) -> None:
    spec = load_collection_spec(SAMPLES / name)
    with KernelBackend(spec) as backend:
        handles: dict[str, MapHandle] = {}
        for mname, ms in spec.maps.items():
            handles[mname] = backend.create_map(ms, handles)
        prog = next(iter(spec.programs.values()))
        with pytest.raises(VerifierError) as exc:
            backend.load_program(prog, handles)
        assert exc.value.errno == errno.EACCES
        assert REFUSED[name] in exc.value.log
        assert "processed" in exc.value.log  # the whole log, not just its last line


def test_backend_satisfies_the_protocol() -> None:
    with KernelBackend() as backend:
        b: Backend = backend
        assert b.name == "kernel"
        km = backend.create_map(MapSpec("plain", BpfMapType.BPF_MAP_TYPE_ARRAY, 4, 8, 2), {})
        assert isinstance(km, MapHandle)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_section_attach_types_and_frags(version: int) -> None:
    spec = load_collection_spec(SAMPLES / f"loader/sections.v{version}.o")
    want = {"sec_xdp": BPF_XDP, "sec_xdp_frags": BPF_XDP, "sec_legacy_pass": BPF_XDP,
            "sec_devmap": BPF_XDP_DEVMAP, "sec_devmap_frags": BPF_XDP_DEVMAP,
            "sec_cpumap": BPF_XDP_CPUMAP, "sec_cpumap_frags": BPF_XDP_CPUMAP}
    assert {n: p.expected_attach_type for n, p in spec.programs.items()} == want
    with loaded("", spec) as obj:
        for name, kp in obj.progs.items():
            if want[name] == BPF_XDP:
                assert obj.backend.test_run(kp, bytes(64)).retval == XdpAction.XDP_PASS
            else:
                # test_run refuses devmap/cpumap programs: proof of the attach type.
                with pytest.raises(KernelError) as exc:
                    obj.backend.test_run(kp, bytes(64))
                assert exc.value.errno == errno.EINVAL
        # The frags program reads the last byte of a multi-buffer packet.
        big = bytes(5000 - 1) + b"\xff"
        res = obj.backend.test_run(obj.progs["sec_xdp_frags"], big)
        assert res.retval == XdpAction.XDP_DROP and len(res.data_out) == 5000
        # Without BPF_XDP_DEVMAP, egress_ifindex is off limits to the verifier.
        plain = spec.programs["sec_devmap"].copy(expected_attach_type=BPF_XDP)
        with pytest.raises(VerifierError, match="invalid bpf_context access"):
            obj.backend.load_program(plain, {})


# --------------------------------------------------------------------------
# Global data, freezing, map-in-map, prog arrays
# --------------------------------------------------------------------------

def test_rodata_initial_value_and_frozen() -> None:
    with loaded("adjust_tail.o") as obj:
        rodata = obj.maps[".rodata"]
        assert rodata.lookup(u32(0)) == u32(600)  # const volatile max_pkt_size = 600
        assert rodata.frozen
        assert rodata.map_flags & MapFlag.BPF_F_RDONLY_PROG
        with pytest.raises(MapError) as exc:
            rodata.update(u32(0), u32(1500))
        assert exc.value.errno == errno.EPERM and exc.value.op == "update"
        assert rodata.lookup(u32(0)) == u32(600)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_global_data_sections(version: int) -> None:
    with loaded(f"loader/globals.v{version}.o") as obj:
        m = obj.maps
        data = m[".data"].lookup(u32(0))
        assert data is not None
        assert data[0:4] == u32(7) and data[4:12] == bytes(range(1, 9))  # data_counter, bytes
        assert data[16:24] == u64(0x1122334455667788)  # static data_static
        ro = m[".rodata"].lookup(u32(0))
        assert ro is not None and ro[0:4] == u32(100) and ro[4:10] == bytes.fromhex(
            "021122334455") and ro[10:12] == struct.pack("<H", 0xBEEF)
        assert m[".bss"].lookup(u32(0)) == bytes(28)
        assert m[".data.custom"].lookup(u32(0)) == u32(42)
        fmt = m[".rodata.str1.1"].lookup(u32(0))
        assert fmt is not None and fmt.startswith(b"globals: len %u over limit %u\n")
        for name in (".rodata", ".rodata.str1.1"):
            assert m[name].frozen
            with pytest.raises(MapError) as exc:
                m[name].update(u32(0), bytes(m[name].value_size))
            assert exc.value.errno == errno.EPERM
        # The program reaches each section through BPF_PSEUDO_MAP_VALUE + offset.
        res = obj.backend.test_run(obj.progs["globals_prog"], bytes(60))
        data = m[".data"].lookup(u32(0))
        assert data is not None and data[0:4] == u32(8)
        assert data[16:24] == u64(0x1122334455667788 + 60)
        bss = m[".bss"].lookup(u32(0))
        assert bss is not None and bss[0:8] == u64(60)
        assert m[".data.custom"].lookup(u32(0)) == u32(43)
        assert res.retval in tuple(XdpAction)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_map_in_map_and_prog_array_slots(version: int) -> None:
    with loaded(f"loader/map_in_map.v{version}.o") as obj:
        m, p = obj.maps, obj.progs
        # From user space a map-in-map slot reads back as the inner map's id,
        # a prog-array slot as the program's id.
        assert m["outer_array"].lookup(u32(0)) == u32(m["inner_a"].id)
        assert m["outer_array"].lookup(u32(1)) == u32(m["inner_b"].id)
        assert m["outer_hash"].lookup(u32(3)) == u32(m["inner_b"].id)
        assert m["outer_hash"].lookup(u32(0)) is None
        assert m["jmp"].lookup(u32(0)) == u32(p["mim_tail_a"].id)
        assert m["jmp"].lookup(u32(2)) == u32(p["mim_tail_b"].id)
        assert m["jmp"].lookup(u32(1)) is None
        # A map whose geometry differs from the inner template is refused.
        other = obj.backend.create_map(
            MapSpec("odd", BpfMapType.BPF_MAP_TYPE_ARRAY, 4, 16, 4), {})
        with pytest.raises(MapError) as exc:
            obj.backend.set_inner_map(m["outer_array"], u32(1), other)
        assert exc.value.errno == errno.EINVAL


def test_lb_prog_array_from_values() -> None:
    with loaded("lb.o") as obj:
        assert obj.maps["jmp_table"].lookup(u32(0)) == u32(obj.progs["lb_non_vip"].id)
        data = obj.maps[".data"].lookup(u32(0))
        rodata = obj.maps[".rodata"]
        assert data is not None and len(data) == 4
        assert rodata.frozen


# --------------------------------------------------------------------------
# test_run
# --------------------------------------------------------------------------

def test_xdp1_counts_udp_on_its_cpu() -> None:
    with loaded("xdp1.o") as obj:
        rxcnt = obj.maps["rxcnt"]
        assert rxcnt.percpu and rxcnt.nr_cpus == NR_CPUS
        with pinned_cpu() as cpu:
            res = obj.backend.test_run(obj.progs["xdp_prog1"], udp_packet())
        assert isinstance(res, TestRunResult)
        assert res.retval == XdpAction.XDP_DROP
        blob = rxcnt.lookup(u32(17))
        assert blob is not None and len(blob) == 8 * NR_CPUS
        per_cpu = [U64.unpack_from(blob, 8 * c)[0] for c in range(NR_CPUS)]
        assert sum(per_cpu) == 1 and per_cpu[cpu] == 1
        assert rxcnt.lookup(u32(17), cpu=cpu) == u64(1)
        assert rxcnt.lookup(u32(6)) == bytes(8 * NR_CPUS)


def test_xdp2_swaps_macs_and_transmits() -> None:
    src, dst = bytes.fromhex("020000000001"), bytes.fromhex("0200000000aa")
    pkt = udp_packet(src_mac=src, dst_mac=dst)
    with loaded("xdp2.o") as obj:
        res = obj.backend.test_run(obj.progs["xdp_prog2"], pkt)
        assert res.retval == XdpAction.XDP_TX
        assert res.data_out[:6] == src and res.data_out[6:12] == dst
        assert res.data_out[12:] == pkt[12:]
        assert res.ctx_out is None and res.duration_ns >= 0
        # The kernel does not reset the packet between repetitions: ten swaps
        # give the packet back as it was, and the counter saw all ten runs.
        again = obj.backend.test_run(obj.progs["xdp_prog2"], pkt, repeat=10)
        assert again.retval == XdpAction.XDP_TX and again.data_out == pkt
        blob = obj.maps["rxcnt"].lookup(u32(17))
        assert blob is not None
        assert sum(U64.unpack_from(blob, 8 * c)[0] for c in range(NR_CPUS)) == 11


def test_truncated_output_is_test_run_truncated() -> None:
    pkt = udp_packet()
    with loaded("xdp2.o") as obj:
        with pytest.raises(TestRunTruncated) as exc:
            obj.backend.test_run(obj.progs["xdp_prog2"], pkt, data_size_out=20)
        err = exc.value
        assert err.data_size == len(pkt)
        assert isinstance(err.result, TestRunResult)
        assert err.result.retval == XdpAction.XDP_TX
        assert err.result.data_out == pkt[6:12] + pkt[0:6] + pkt[12:20]


def test_ctx_in_and_out() -> None:
    with loaded("loader/sections.v3.o") as obj:
        ctx = struct.pack("<6I", 0, 64, 0, 0, 0, 0)
        res = obj.backend.test_run(obj.progs["sec_xdp"], bytes(64), ctx_in=ctx)
        assert res.ctx_out is not None and struct.unpack("<6I", res.ctx_out)[:2] == (0, 64)


def test_trace_needs_userspace() -> None:
    with loaded("loader/sections.v3.o") as obj:
        with pytest.raises(NotSupportedError, match="userspace backend"):
            obj.backend.test_run(obj.progs["sec_xdp"], bytes(64), trace=True)


# --------------------------------------------------------------------------
# Map operations and their errnos
# --------------------------------------------------------------------------

def _map(backend: KernelBackend, map_type: int, key_size: int, value_size: int,
         max_entries: int, flags: int = 0, name: str = "t") -> KernelMap:
    return backend.create_map(MapSpec(name, map_type, key_size, value_size, max_entries,
                                      flags=flags), {})


def test_array_errnos() -> None:
    with KernelBackend() as b:
        arr = _map(b, BpfMapType.BPF_MAP_TYPE_ARRAY, 4, 8, 4)
        with pytest.raises(MapError) as exc:
            arr.update(u32(4), u64(1))
        assert exc.value.errno == errno.E2BIG and exc.value.op == "update"
        with pytest.raises(MapError) as exc:
            arr.update(u32(0), u64(1), MapUpdateFlag.BPF_NOEXIST)
        assert exc.value.errno == errno.EEXIST
        with pytest.raises(MapError) as exc:
            arr.delete(u32(0))
        assert exc.value.errno == errno.EINVAL
        assert arr.lookup(u32(9)) is None
        arr.update(u32(3), u64(0xABCD))
        assert arr.lookup(u32(3)) == u64(0xABCD)
        assert arr.get_next_key(None) == u32(0)
        assert arr.get_next_key(u32(3)) is None
        with pytest.raises(MapError) as exc:
            arr.update(u32(0), b"short")  # a wrong size never reaches the kernel
        assert exc.value.errno == errno.EINVAL


def test_hash_errnos_and_iteration() -> None:
    with KernelBackend() as b:
        h = _map(b, BpfMapType.BPF_MAP_TYPE_HASH, 4, 8, 4)
        h.update(u32(1), u64(10))
        with pytest.raises(MapError) as exc:
            h.update(u32(1), u64(11), MapUpdateFlag.BPF_NOEXIST)
        assert exc.value.errno == errno.EEXIST
        with pytest.raises(MapError) as exc:
            h.update(u32(2), u64(20), MapUpdateFlag.BPF_EXIST)
        assert exc.value.errno == errno.ENOENT
        with pytest.raises(MapError) as exc:
            h.delete(u32(2))
        assert exc.value.errno == errno.ENOENT and exc.value.op == "delete"
        for k in (2, 3, 4):
            h.update(u32(k), u64(k * 10))
        with pytest.raises(MapError) as exc:
            h.update(u32(5), u64(50))
        assert exc.value.errno == errno.E2BIG
        keys = []
        cur = h.get_next_key(None)
        while cur is not None:
            keys.append(U32.unpack(cur)[0])
            cur = h.get_next_key(cur)
        assert sorted(keys) == [1, 2, 3, 4]
        assert h.lookup_and_delete(u32(4)) == u64(40)
        assert h.lookup(u32(4)) is None
        assert h.lookup_and_delete(u32(4)) is None


def test_percpu_update_one_cpu() -> None:
    with KernelBackend() as b:
        pa = _map(b, BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY, 4, 4, 2)
        assert pa.percpu and pa.user_value_size == 8 * NR_CPUS
        last = NR_CPUS - 1
        pa.update(u32(1), u32(7), cpu=last)
        assert pa.lookup(u32(1), cpu=last) == u32(7)
        blob = pa.lookup(u32(1))
        assert blob is not None
        assert blob[8 * last:8 * last + 8] == u32(7) + bytes(4)
        assert blob[:8 * last] == bytes(8 * last)
        with pytest.raises(MapError) as exc:
            pa.lookup(u32(1), cpu=NR_CPUS)
        assert exc.value.errno == errno.EINVAL
        with pytest.raises(MapError):
            pa.update(u32(1), u32(7))  # a whole-map write needs every CPU's slot
        ph = _map(b, BpfMapType.BPF_MAP_TYPE_PERCPU_HASH, 4, 8, 4)
        ph.update(u32(5), u64(3), cpu=0)  # absent key: the other CPUs start at zero
        assert ph.lookup(u32(5)) == u64(3) + bytes(8 * (NR_CPUS - 1))


def test_queue_and_stack() -> None:
    with KernelBackend() as b:
        q = _map(b, BpfMapType.BPF_MAP_TYPE_QUEUE, 0, 4, 2)
        assert q.pop() is None and q.peek() is None
        q.push(u32(1))
        q.push(u32(2))
        with pytest.raises(MapError) as exc:
            q.push(u32(3))
        assert exc.value.errno == errno.E2BIG
        q.push(u32(3), MapUpdateFlag.BPF_EXIST)  # evicts the oldest
        assert q.peek() == u32(2)
        assert [q.pop(), q.pop(), q.pop()] == [u32(2), u32(3), None]
        s = _map(b, BpfMapType.BPF_MAP_TYPE_STACK, 0, 4, 4)
        s.push(u32(1))
        s.push(u32(2))
        assert [s.pop(), s.pop()] == [u32(2), u32(1)]
        with pytest.raises(MapError):
            _map(b, BpfMapType.BPF_MAP_TYPE_ARRAY, 4, 4, 1).push(u32(1))


def test_batch_operations() -> None:
    with KernelBackend() as b:
        h = _map(b, BpfMapType.BPF_MAP_TYPE_HASH, 4, 8, 64)
        assert h.update_batch([u32(i) for i in range(40)], [u64(i * 3) for i in range(40)]) \
            == 40
        keys, values, cursor = h.lookup_batch()
        assert cursor is None
        assert dict(zip(keys, values, strict=True)) == {u32(i): u64(i * 3) for i in range(40)}
        first, _, cursor = h.lookup_batch(count=10)
        assert len(first) >= 10 and cursor is not None
        rest, _, end = h.lookup_batch(cursor)
        assert end is None and sorted(first + rest) == sorted(keys)
        # The map holds 64: 24 of these 30 new keys fit, then E2BIG.
        with pytest.raises(MapError) as exc:
            h.update_batch([u32(100 + i) for i in range(30)], [u64(0)] * 30)
        assert exc.value.errno == errno.E2BIG and exc.value.count == 24
        # elem_flags takes only BPF_F_LOCK: refused before any element.
        with pytest.raises(MapError) as exc:
            h.update_batch([u32(1)], [u64(0)], MapUpdateFlag.BPF_NOEXIST)
        assert exc.value.errno == errno.EINVAL and exc.value.count == 0
        assert h.delete_batch([u32(i) for i in range(10)]) == 10
        with pytest.raises(MapError) as exc:
            h.delete_batch([u32(10), u32(0)])
        assert exc.value.errno == errno.ENOENT and exc.value.count == 1
        got_keys, _ = h.lookup_and_delete_batch()
        assert len(got_keys) == 64 - 11
        assert h.get_next_key(None) is None
        # Arrays: the cursor is the last key; no lookup-and-delete (ENOTSUPP).
        arr = _map(b, BpfMapType.BPF_MAP_TYPE_ARRAY, 4, 4, 8)
        keys, _, cursor = arr.lookup_batch(count=3)
        assert keys == [u32(0), u32(1), u32(2)] and cursor is not None
        keys, _, cursor = arr.lookup_batch(cursor)
        assert keys == [u32(i) for i in range(3, 8)] and cursor is None
        with pytest.raises(MapError) as exc:
            arr.lookup_and_delete_batch()
        assert exc.value.errno == ENOTSUPP and exc.value.count == 0


def test_closed_map_raises_ebadf() -> None:
    with KernelBackend() as b:
        arr = _map(b, BpfMapType.BPF_MAP_TYPE_ARRAY, 4, 4, 1)
        arr.close()
        with pytest.raises(MapError) as exc:
            arr.lookup(u32(0))
        assert exc.value.errno == errno.EBADF


def test_create_errors_are_map_errors() -> None:
    with KernelBackend() as b:
        with pytest.raises(MapError) as exc:
            _map(b, BpfMapType.BPF_MAP_TYPE_ARRAY, 4, 4, 0)  # max_entries 0
        assert exc.value.errno == errno.EINVAL and exc.value.op == "create"


def test_kernel_object_names() -> None:
    assert kernel_object_name("a-very/long:map_name.x") == "a_very_long_map"
    assert kernel_object_name(".rodata.str1.1") == ".rodata.str1.1"
    with KernelBackend() as b:
        m = _map(b, BpfMapType.BPF_MAP_TYPE_ARRAY, 4, 4, 1, name="bad name!")
        assert m.name == "bad_name_"


# --------------------------------------------------------------------------
# BTF: fix-ups and the fallback
# --------------------------------------------------------------------------

def _raw_clang_btf(path: Path) -> Btf:
    img = open_elf(path.read_bytes(), str(path))
    sec = next(s for s in img.sections[1:] if s.name == ".BTF")
    return Btf.parse(img.section_data(sec))


def test_reader_btf_needs_no_fixups() -> None:
    for path in LOADABLE:
        spec = load_collection_spec(path)
        assert spec.btf is not None
        fixed, notes = kernel_btf(spec.btf, spec.maps.values())
        # Only kfunc declarations need the loader (.ksyms has no ELF section to size).
        kfunc = [n for n in notes if "(a kfunc)" in n or "'.ksyms'" in n]
        assert notes == tuple(kfunc) and (fixed is spec.btf) == (not notes), path


@pytest.mark.parametrize("obj", ["loader/globals.v3.o", "lb.o", "xdp1.o"])
def test_raw_clang_btf_is_fixed_up_on_a_copy(obj: str) -> None:
    path = SAMPLES / obj
    raw = _raw_clang_btf(path)
    spec = dataclasses.replace(load_collection_spec(path), btf=raw)
    fixed, notes = kernel_btf(raw, spec.maps.values())
    assert notes and all("size 0 ->" in n for n in notes)
    # The spec's BTF is untouched: the kernel would refuse it as it is.
    assert all(t.size_type == 0 for t in raw.types if t.kind is BtfKind.DATASEC)
    for t in fixed.types:
        if t.kind is BtfKind.DATASEC and t.name in spec.maps:
            assert t.size_type == spec.maps[t.name].value_size
    with loaded(obj, spec) as o:
        assert o.backend.warnings == []
        assert o.backend.btf_fixups == notes
        for name, km in o.maps.items():
            ms = spec.maps[name]
            info = map_get_info(km.fd)
            if ms.value_type and ms.type in (BpfMapType.BPF_MAP_TYPE_ARRAY,
                                             BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY,
                                             BpfMapType.BPF_MAP_TYPE_HASH):
                assert info.btf_value_type_id == ms.value_type, name


def _broken_btf(spec: CollectionSpec) -> CollectionSpec:
    assert spec.btf is not None
    t = next(t for t in spec.btf.types if t.kind is BtfKind.INT)
    # nr_bits above 128: BPF_BTF_LOAD refuses the whole blob.
    return dataclasses.replace(spec, btf=spec.btf.with_types(
        {t.id: dataclasses.replace(t, int_bits=200)}))


def test_refused_btf_falls_back_to_maps_without_btf() -> None:
    spec = _broken_btf(load_collection_spec(SAMPLES / "xdp1.o"))
    with loaded("", spec) as obj:
        assert obj.backend.btf_error is not None
        assert any("refused the object's BTF" in w for w in obj.backend.warnings)
        assert map_get_info(obj.maps["rxcnt"].fd).btf_id == 0
        assert prog_get_info(obj.progs["xdp_prog1"].fd).btf_id == 0
        with pinned_cpu():
            res = obj.backend.test_run(obj.progs["xdp_prog1"], udp_packet())
        assert res.retval == XdpAction.XDP_DROP


def test_callbacks_need_func_info() -> None:
    # bpf_loop / bpf_for_each_map_elem callbacks are only accepted with
    # func_info: without the object's BTF that program cannot load.
    spec = _broken_btf(load_collection_spec(SAMPLES / "loader/multi_prog.v3.o"))
    with KernelBackend(spec) as b:
        handles: dict[str, MapHandle] = {}
        for name, ms in spec.maps.items():
            handles[name] = b.create_map(ms, handles)
        b.load_program(spec.programs["multi_first"], handles)  # global subprog, as static
        with pytest.raises(VerifierError, match="missing btf func_info"):
            b.load_program(spec.programs["multi_loop"], handles)


def test_map_needing_btf_does_not_fall_back() -> None:
    spec = _broken_btf(load_collection_spec(SAMPLES / "xdp1.o"))
    storage = MapSpec("sk", BpfMapType.BPF_MAP_TYPE_SK_STORAGE, 4, 8, 0,
                      flags=MapFlag.BPF_F_NO_PREALLOC, key_type=1, value_type=1)
    with KernelBackend(spec) as b:
        with pytest.raises(MapError, match="needs BTF"):
            b.create_map(storage, {})


# --------------------------------------------------------------------------
# Lifetime and layering
# --------------------------------------------------------------------------

def test_close_releases_every_fd() -> None:
    before = fd_count()
    for path in LOADABLE:
        with loaded("", load_collection_spec(path)) as obj:
            assert fd_count() > before
            res = obj.backend.test_run(next(iter(obj.progs.values())), udp_packet()) \
                if path.name == "xdp1.o" else None
            assert res is None or res.retval == XdpAction.XDP_DROP
        assert fd_count() == before, path
    b = KernelBackend(load_collection_spec(SAMPLES / "lb.o"))
    Loaded(b.collection or load_collection_spec(SAMPLES / "lb.o"), b)
    assert fd_count() > before
    b.close()
    b.close()  # idempotent
    assert fd_count() == before


def test_failed_load_still_closes_cleanly() -> None:
    before = fd_count()
    spec = load_collection_spec(SAMPLES / "unchecked.o")
    with KernelBackend(spec) as b:
        with pytest.raises(VerifierError):
            Loaded(spec, b)
    assert fd_count() == before


def test_programs_keep_their_spec_and_ids() -> None:
    with loaded("redirect_cpu.o") as obj:
        for name, kp in obj.progs.items():
            ph: ProgHandle = kp
            assert ph.spec is obj.spec.programs[name]
            assert kp.name == name and kp.id > 0 and len(kp.tag) == 16
        cpumap = obj.maps["cpu_map"]
        assert map_get_info(cpumap.fd).btf_id == 0  # cpumap refuses BTF: created without


def test_collection_over_the_kernel_backend() -> None:
    from pyxdp.collection import Collection

    with Collection.load(SAMPLES / "xdp1.o", backend="kernel") as coll:
        with pinned_cpu():
            res = coll.programs["xdp_prog1"].test_run(udp_packet())
        assert res.retval == XdpAction.XDP_DROP
        assert coll.maps["rxcnt"].sum(17) == 1


def test_kernel_package_layering() -> None:
    code = ("import sys, pyxdp.kernel.backend, pyxdp.kernel.maps\n"
            "bad = [m for m in sys.modules if m.split('.')[:2] in "
            "(['pyxdp','vm'], ['pyxdp','net'], ['pyxdp','maps'], ['pyxdp','xsk'])]\n"
            "print(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
