"""Devmap/cpumap entry programs hold their program as Linux's entries do (a bpf_prog
reference per entry): it outlives its fd while an entry names it and is freed with the
last entry's delete or replacement, or the map's free (measured on Linux 6.18)."""

from __future__ import annotations

import dataclasses
import gc
import struct
import time

import pytest

from pyxdp.collection import Collection
from pyxdp.errors import PyxdpError
from pyxdp.maps.base import live_program
from pyxdp.spec import CollectionSpec, MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfAttachType, BpfMapType

KINDS = {  # map type, entry program's attach type, the value's first field
    "devmap": (BpfMapType.BPF_MAP_TYPE_DEVMAP, BpfAttachType.BPF_XDP_DEVMAP, 1),  # lo
    "devmap_hash": (BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH, BpfAttachType.BPF_XDP_DEVMAP, 1),
    "cpumap": (BpfMapType.BPF_MAP_TYPE_CPUMAP, BpfAttachType.BPF_XDP_CPUMAP, 16)}  # qsize

# What _lifetime sees on Linux 6.18 (the kernel backend) for each kind.
LINUX = ["fd closed, 2 entries: alive", "1 entry: alive", "replaced: freed",
         "fd closed, 1 entry: alive", "map freed: freed", "map freed, fd open: alive",
         "fd closed: freed", "lookup names it: True"]


def _key(i: int) -> bytes:
    return i.to_bytes(4, "little")


def _alive(backend: str, prog_id: int) -> bool:
    """Whether the program with this id lives (BPF_PROG_GET_FD_BY_ID would find it)."""
    if backend == "userspace":
        gc.collect()  # a map is freed when Python lets it go
        return live_program(prog_id) is not None
    from pyxdp.kernel.syscall import prog_get_fd_by_id
    for _ in range(50):  # an entry's program is put after an RCU grace period
        try:
            prog_get_fd_by_id(prog_id).close()
        except PyxdpError:
            return False
        time.sleep(0.02)
    return True


def _lifetime(backend: str, kind: str) -> list[str]:
    map_type, attach, first = KINDS[kind]
    spec = MapSpec("ports", int(map_type), 4, 8, 2)
    entry = dataclasses.replace(asm_collection("r0 = 2\nexit").programs["t"], name="entry",
                                section=f"xdp/{kind[:6]}", expected_attach_type=int(attach))

    def entry_prog() -> tuple[Collection, int, int]:
        b = Collection(CollectionSpec({"entry": entry}, {}, license="GPL"), backend)
        p = b.programs["entry"]
        if backend == "kernel":
            from pyxdp.kernel.syscall import prog_get_info
            return b, p.fd, prog_get_info(p.fd).id
        return b, p.fd, p.fd

    def state(what: str, prog_id: int) -> str:
        return f"{what}: {'alive' if _alive(backend, prog_id) else 'freed'}"

    got = []
    a = Collection(asm_collection("r0 = 2\nexit", (spec,)), backend)
    ports = a.maps["ports"].handle
    b, fd, prog_id = entry_prog()
    ports.update(_key(0), struct.pack("<Ii", first, fd))
    ports.update(_key(1), struct.pack("<Ii", first, fd))
    b.close()
    got.append(state("fd closed, 2 entries", prog_id))
    named = struct.unpack("<Ii", ports.lookup(_key(0)))[1] == prog_id
    ports.delete(_key(0))
    got.append(state("1 entry", prog_id))
    ports.update(_key(1), struct.pack("<Ii", first, 0))
    got.append(state("replaced", prog_id))
    b, fd, prog_id = entry_prog()
    ports.update(_key(0), struct.pack("<Ii", first, fd))
    b.close()
    got.append(state("fd closed, 1 entry", prog_id))
    a.close()
    del a, ports
    got.append(state("map freed", prog_id))
    a = Collection(asm_collection("r0 = 2\nexit", (spec,)), backend)
    b, fd, prog_id = entry_prog()
    a.maps["ports"].handle.update(_key(0), struct.pack("<Ii", first, fd))
    a.close()
    del a
    got.append(state("map freed, fd open", prog_id))
    b.close()
    got.append(state("fd closed", prog_id))
    got.append(f"lookup names it: {named}")
    return got


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_entry_programs_live_as_long_as_linux_s(kind: str) -> None:
    """Found comparing with Linux: pyxdp kept another Collection's entry program in its
    backend until that backend closed, after the entry's delete or replacement too."""
    assert _lifetime("userspace", kind) == LINUX


@pytest.mark.kernel
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_entry_program_lifetime_matches_linux(kind: str) -> None:
    assert _lifetime("kernel", kind) == _lifetime("userspace", kind)


def test_a_closed_program_runs_while_an_entry_holds_it() -> None:
    """The datapath finds a held program by id after its fd closed, and no more once
    the entry let it go (Host.program_by_id, BPF_PROG_GET_FD_BY_ID's rule)."""
    from pyxdp.net.netdevice import Host
    with Host(native=False) as h, Host(native=False) as other:
        dev = h.add_device("eth0")
        spec = MapSpec("ports", int(BpfMapType.BPF_MAP_TYPE_DEVMAP), 4, 8, 1)
        a = h.load(asm_collection("r0 = 2\nexit", (spec,)))
        entry = dataclasses.replace(asm_collection("r0 = 2\nexit").programs["t"],
                                    name="entry", section="xdp/devmap",
                                    expected_attach_type=int(BpfAttachType.BPF_XDP_DEVMAP))
        b = other.load(CollectionSpec({"entry": entry}, {}, license="GPL"))
        prog_id = b.programs["entry"].fd
        a.maps["ports"].handle.update(_key(0), struct.pack("<Ii", dev.ifindex, prog_id))
        b.close()
        assert h.program_by_id(prog_id) is not None
        a.maps["ports"].handle.delete(_key(0))
        assert h.program_by_id(prog_id) is None
