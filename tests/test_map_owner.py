"""A prog_array's, devmap's and cpumap's owner (``map->owner``, ``bpf_prog_map_compatible``):
the first program checked against the map - one loaded naming it (``bpf_check_tail_call``;
not for a devmap_hash) or an entry's program - fixes the kind of program it holds or
serves for the map's life: its type, ``xdp.frags`` and, for a prog_array, its expected
attach type. Measured on Linux 6.18 with the kernel backend (the table below); the
kernel test runs the same steps on both backends."""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable

import pytest

from pyxdp.collection import Collection
from pyxdp.errors import PyxdpError
from pyxdp.spec import BPF_F_XDP_HAS_FRAGS, CollectionSpec, MapSpec, ProgramSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfAttachType, BpfMapType

KINDS = {  # map type, entry program's attach type, the value's first field
    "devmap": (BpfMapType.BPF_MAP_TYPE_DEVMAP, BpfAttachType.BPF_XDP_DEVMAP, 1),  # lo
    "devmap_hash": (BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH, BpfAttachType.BPF_XDP_DEVMAP, 1),
    "cpumap": (BpfMapType.BPF_MAP_TYPE_CPUMAP, BpfAttachType.BPF_XDP_CPUMAP, 16)}  # qsize
REDIRECT = "r1 = map[fd:0]\nr2 = 0\nr3 = 0\ncall bpf_redirect_map\nexit"
TAIL_CALL = "r2 = map[fd:0]\nr3 = 0\ncall bpf_tail_call\nr0 = 2\nexit"

# What _owner_steps sees on Linux 6.18 for each kind (0: done, else the errno). Per frags
# pair (the redirecting program's, the entry program's): the entry into a map the
# program was loaded with; the entry into a map no program names, then a program loaded
# naming it; an entry of the other frags after that.
LINUX = {
    "devmap": ["0 0: 0 | 0 0 | 22", "0 1: 22 | 0 22 | 22", "1 0: 22 | 0 22 | 22",
               "1 1: 0 | 0 0 | 22", "owner's fd closed: 22"],
    "devmap_hash": ["0 0: 0 | 0 0 | 22", "0 1: 0 | 0 0 | 22", "1 0: 0 | 0 0 | 22",
                    "1 1: 0 | 0 0 | 22", "owner's fd closed: 0"],
    "cpumap": ["0 0: 0 | 0 0 | 12", "0 1: 12 | 0 22 | 12", "1 0: 12 | 0 22 | 12",
               "1 1: 0 | 0 0 | 12", "owner's fd closed: 12"],
    "prog_array": ["0 0: 0 | 0 0 | 22", "0 1: 22 | 0 22 | 22", "1 0: 22 | 0 22 | 22",
                   "1 1: 0 | 0 0 | 22", "owner's fd closed: 22"],
}


def _prog(name: str, text: str, maps: tuple[MapSpec, ...] = (), *, frags: bool,
          attach: int | None = None, section: str = "xdp") -> ProgramSpec:
    p = asm_collection(text, maps).programs["t"]
    return dataclasses.replace(
        p, name=name, section=section, flags=BPF_F_XDP_HAS_FRAGS if frags else 0,
        expected_attach_type=p.expected_attach_type if attach is None else int(attach))


def _errno(f: Callable[..., object], *args: object) -> int:
    """0 when ``f(*args)`` succeeds, else the errno it failed with."""
    try:
        f(*args)
    except PyxdpError as e:
        return int(getattr(e, "errno", -1))
    return 0


def _owner_steps(backend: str, kind: str) -> list[str]:
    """The outcomes of the owner's rule for one kind of map on ``backend``."""
    if kind == "prog_array":
        spec = MapSpec("ports", int(BpfMapType.BPF_MAP_TYPE_PROG_ARRAY), 4, 4, 2)
        user, section, attach = TAIL_CALL, "xdp", None

        def value(fd: int) -> bytes:
            return struct.pack("<i", fd)
    else:
        map_type, attach, first = KINDS[kind]
        spec = MapSpec("ports", int(map_type), 4, 8, 2)
        user, section = REDIRECT, f"xdp/{kind[:6]}"

        def value(fd: int) -> bytes:
            return struct.pack("<Ii", first, fd)

    def key(i: int) -> bytes:
        return i.to_bytes(4, "little")

    def entry(frags: bool) -> Collection:
        return Collection(CollectionSpec({"e": _prog("e", "r0 = 2\nexit", frags=frags,
                                                     attach=attach, section=section)}, {},
                                         license="GPL"), backend)

    got = []
    for uf in (False, True):
        for ef in (False, True):
            user_prog = _prog("u", user, (spec,), frags=uf)
            with Collection(CollectionSpec({"u": user_prog}, {"ports": spec}, license="GPL"),
                            backend) as a, entry(ef) as e, entry(not ef) as other, \
                    Collection(CollectionSpec({}, {"ports": spec}, license="GPL"),
                               backend) as bare:
                after_load = _errno(a.maps["ports"].handle.update, key(0),
                                    value(e.programs["e"].fd))
                m = bare.maps["ports"].handle
                first_entry = _errno(m.update, key(0), value(e.programs["e"].fd))
                load = _errno(bare.backend.load_program, user_prog, {"ports": m}, None)
                mixed = _errno(m.update, key(1), value(other.programs["e"].fd))
            got.append(f"{uf:d} {ef:d}: {after_load} | {first_entry} {load} | {mixed}")
    # The owner stays when the program that made it closes its fd.
    with Collection(CollectionSpec({}, {"ports": spec}, license="GPL"), backend) as bare, \
            entry(True) as e:
        m = bare.maps["ports"].handle
        handle = bare.backend.load_program(_prog("u", user, (spec,), frags=False),
                                           {"ports": m}, None)
        close = getattr(handle, "close", None)
        if close is not None:
            close()
        got.append(f"owner's fd closed: {_errno(m.update, key(0), value(e.programs['e'].fd))}")
    return got


@pytest.mark.parametrize("kind", sorted(LINUX))
def test_the_owner_rule_is_linux_s(kind: str) -> None:
    """Found comparing with Linux: pyxdp took an entry or tail call program of either
    ``xdp.frags`` into any map, and loaded any program naming one."""
    assert _owner_steps("userspace", kind) == LINUX[kind]


def test_a_device_bound_program_goes_into_no_map() -> None:
    """``bpf_prog_map_compatible`` refuses a device-bound program (it could run on
    another device): EINVAL from a devmap, ENOMEM from a cpumap."""
    from pyxdp.net.netdevice import Host
    with Host(native=False) as h:
        dev = h.add_device("eth0")
        for kind in ("devmap", "cpumap"):
            map_type, attach, first = KINDS[kind]
            spec = MapSpec("ports", int(map_type), 4, 8, 2)
            bound = dataclasses.replace(
                _prog("e", "r0 = 2\nexit", frags=False, attach=attach,
                      section=f"xdp/{kind[:6]}"), ifindex=dev.ifindex)
            m = h.load(CollectionSpec({}, {"ports": spec}, license="GPL"))
            e = h.load(CollectionSpec({"e": bound}, {}, license="GPL"))
            with pytest.raises(PyxdpError, match="device-bound") as ei:
                m.maps["ports"].handle.update(b"\0\0\0\0",
                                              struct.pack("<Ii", first, e.programs["e"].fd))
            assert getattr(ei.value, "errno", None) == (12 if kind == "cpumap" else 22)


@pytest.mark.kernel
@pytest.mark.parametrize("kind", sorted(LINUX))
def test_the_owner_rule_matches_linux(kind: str) -> None:
    assert _owner_steps("kernel", kind) == _owner_steps("userspace", kind) == LINUX[kind]
