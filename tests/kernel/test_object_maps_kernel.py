"""Maps of kernel objects (SOCKMAP, SOCKHASH, REUSEPORT_SOCKARRAY, the local storage
maps) against Linux 6.18: the same creation verdicts (errno) over a grid of key/value
sizes, entries and flags; an object that declares one loads, and its program that does
not use it runs the same; a program Linux's verifier refuses for its use of the map gets
Linux's message. Socket maps run (tests/kernel/test_sock_map_kernel.py has their
operations); a reuseport array reads as Linux's empty one, and an update of it (pyxdp
has no SO_REUSEPORT sockets) is refused with NotSupportedError naming the map."""

from __future__ import annotations

import errno

import pytest

from pyxdp.collection import Collection
from pyxdp.errors import MapError, NotSupportedError, PyxdpError, VerifierError
from pyxdp.kernel.syscall import map_create
from pyxdp.maps import create_map
from pyxdp.spec import MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType as MT
from pyxdp.verifier import verify

pytestmark = pytest.mark.kernel

NO_PREALLOC, RDONLY, NUMA, MMAPABLE, CLONE = 1, 1 << 3, 1 << 2, 1 << 10, 1 << 9
GRID = [(4, 4, 1, 0), (4, 8, 1, 0), (4, 8, 0, 0), (8, 8, 1, 0), (4, 2, 1, 0), (0, 8, 1, 0),
        (1, 8, 1, 0), (512, 8, 1, 0), (513, 8, 1, 0), (4, 6, 1, 0), (4, 8, 1, NO_PREALLOC),
        (4, 8, 1, RDONLY), (4, 8, 1, NUMA), (4, 8, 1, MMAPABLE), (4, 8, 0, NO_PREALLOC),
        (4, 8, 0, NO_PREALLOC | CLONE), (4, 0, 0, NO_PREALLOC)]
TYPES = [MT.BPF_MAP_TYPE_SOCKMAP, MT.BPF_MAP_TYPE_SOCKHASH,
         MT.BPF_MAP_TYPE_REUSEPORT_SOCKARRAY, MT.BPF_MAP_TYPE_SK_STORAGE,
         MT.BPF_MAP_TYPE_TASK_STORAGE, MT.BPF_MAP_TYPE_INODE_STORAGE,
         MT.BPF_MAP_TYPE_CGRP_STORAGE]


def _create(fn: object, *args: int) -> int:
    try:
        fn(*args)  # type: ignore[operator]
    except MapError as e:
        return e.errno
    except PyxdpError as e:
        return getattr(e, "errno", -1)
    return 0


def test_creation_checks_match_linux() -> None:
    def kernel(*a: int) -> None:
        map_create(*a).close()
    for t in TYPES:
        for k, v, n, f in GRID:
            # without BTF: the storage maps are EINVAL in both, whatever the sizes
            want = _create(kernel, int(t), k, v, n, f)
            if t in (MT.BPF_MAP_TYPE_SK_STORAGE, MT.BPF_MAP_TYPE_TASK_STORAGE,
                     MT.BPF_MAP_TYPE_INODE_STORAGE, MT.BPF_MAP_TYPE_CGRP_STORAGE):
                assert want == 22
                spec = MapSpec("m", int(t), k, v, n, f)
                got = _create(lambda s=spec: Collection(
                    asm_collection("r0 = 2\nexit", [s]), "userspace").close())
            else:
                got = _create(create_map, int(t), k, v, n, f)
            assert got == want, (t.name, k, v, n, f)


def _errno_of(fn: object, *args: object) -> object:
    try:
        return fn(*args)  # type: ignore[operator]
    except MapError as e:
        return e.errno


def _reads_match(u: object, k: object) -> None:
    """A map's reads from user space, pyxdp's handle against Linux's: the key walk,
    lookups and deletes (in range, past the end) give the same keys and errnos."""
    def reads(h: object) -> list[object]:
        got: list[object] = []
        key = None
        for _ in range(8):
            key = _errno_of(h.get_next_key, key)  # type: ignore[attr-defined]
            got.append(key)
            if not isinstance(key, bytes):
                break
        for i in (0, 3, 4, 9):
            got.append(_errno_of(h.lookup, i.to_bytes(4, "little")))  # type: ignore[attr-defined]
            got.append(_errno_of(h.delete, i.to_bytes(4, "little")))  # type: ignore[attr-defined]
        return got
    assert reads(u) == reads(k)


def test_reuseport_array_reads_match_linux() -> None:
    """With no socket in it (pyxdp has no SO_REUSEPORT sockets to put there) a reuseport
    array reads as Linux's empty one: index walk, lookup ENOENT (ENOSPC for 4-byte
    values: the cookie does not fit), delete ENOENT (E2BIG past the end)."""
    for value_size in (4, 8):
        m = MapSpec("m", int(MT.BPF_MAP_TYPE_REUSEPORT_SOCKARRAY), 4, value_size, 4)
        spec = asm_collection("r0 = 2\nexit", [m])
        with Collection(spec, "kernel") as k, \
                Collection(spec, "userspace", engine="interp") as u:
            _reads_match(u.maps["m"].handle, k.maps["m"].handle)


DELETE = "r2 = r10\nr2 += -8\nr1 = 0\n*(u64 *)(r10 -8) = r1\nr1 = map[fd:0]\ncall 3\nr0 = 2\nexit"


@pytest.mark.parametrize("map_type", [MT.BPF_MAP_TYPE_SOCKMAP, MT.BPF_MAP_TYPE_SOCKHASH,
                                      MT.BPF_MAP_TYPE_REUSEPORT_SOCKARRAY])
def test_programs_with_such_maps(map_type: MT) -> None:
    m = MapSpec("m", int(map_type), 4, 8, 4)
    unused = asm_collection("r0 = 2\nexit", [m])
    with Collection(unused, "kernel") as k, Collection(unused, "userspace") as u:
        assert u.programs["t"].test_run(bytes(64)).retval == \
            k.programs["t"].test_run(bytes(64)).retval == 2
        if map_type == MT.BPF_MAP_TYPE_REUSEPORT_SOCKARRAY:
            with pytest.raises(NotSupportedError, match="sockets, which pyxdp does not model"):
                u.maps["m"].update(bytes(4), bytes(8))
        # an empty slot: ENOENT on both
        assert u.maps["m"].lookup(bytes(4)) is k.maps["m"].lookup(bytes(4)) is None
    deleting = asm_collection(DELETE.replace("r0 = 2\nexit", "exit"), [m])
    if map_type == MT.BPF_MAP_TYPE_REUSEPORT_SOCKARRAY:
        msg = "cannot pass map_type 20 into func bpf_map_delete_elem#3"
        for backend in ("kernel", "userspace"):
            with pytest.raises(VerifierError, match=msg):
                Collection(deleting, backend)
    else:  # the delete's result: EINVAL (sockmap's empty slot), ENOENT (sockhash)
        with Collection(deleting, "kernel") as k, Collection(deleting, "userspace") as u:
            got = u.programs["t"].test_run(bytes(64)).retval
            assert got == k.programs["t"].test_run(bytes(64)).retval
            assert got == (-errno.EINVAL if map_type == MT.BPF_MAP_TYPE_SOCKMAP
                           else -errno.ENOENT) & 0xFFFF_FFFF


@pytest.mark.parametrize("map_type", [MT.BPF_MAP_TYPE_SK_STORAGE, MT.BPF_MAP_TYPE_TASK_STORAGE,
                                      MT.BPF_MAP_TYPE_INODE_STORAGE,
                                      MT.BPF_MAP_TYPE_CGRP_STORAGE])
def test_storage_map_with_btf_loads_beside_a_program(map_type: MT) -> None:
    """With BTF for key and value (an int each) Linux creates the storage map and runs
    the object's program; so does pyxdp. A lookup on it is Linux's verifier error."""
    from dataclasses import replace

    from pyxdp.testing.verifier_cases import funcs_btf
    btf, _, int_id, _ = funcs_btf(())
    m = MapSpec("st", int(map_type), 4, 4, 0, 1, key_type=int_id, value_type=int_id)
    spec = replace(asm_collection("r0 = 2\nexit", [m]), btf=btf)
    with Collection(spec, "kernel") as k, Collection(spec, "userspace") as u:
        assert u.programs["t"].test_run(bytes(64)).retval == \
            k.programs["t"].test_run(bytes(64)).retval == 2
    lookup = replace(asm_collection(DELETE.replace("call 3", "call 1"), [m]), btf=btf)
    msg = f"cannot pass map_type {int(map_type)} into func bpf_map_lookup_elem#1"
    for backend in ("kernel", "userspace"):
        with pytest.raises(VerifierError, match=msg):
            Collection(lookup, backend)


LOOKUP = "r2 = r10\nr2 += -8\nr1 = 0\n*(u64 *)(r10 -8) = r1\nr1 = map[fd:0]\ncall 1\n"


@pytest.mark.parametrize("map_type", [MT.BPF_MAP_TYPE_SOCKMAP, MT.BPF_MAP_TYPE_SOCKHASH])
def test_socket_lookup_is_a_reference(map_type: MT) -> None:
    """A lookup in a sockmap or sockhash acquires a socket reference: leaking it is
    Linux's verifier error on both; released with bpf_sk_release, it loads and runs on
    both (an empty map: NULL)."""
    m = MapSpec("m", int(map_type), 4, 8, 4)
    for tail in ("r0 = 2\nexit", "if r0 == 0 goto out\nr0 = 1\nexit\nout:\nr0 = 2\nexit"):
        leak = asm_collection(LOOKUP + tail, [m])
        for backend in ("kernel", "userspace"):
            with pytest.raises(VerifierError, match="would lead to reference leak"):
                Collection(leak, backend)
    release = asm_collection(LOOKUP + "if r0 == 0 goto out\nr6 = *(u32 *)(r0 +4)\nr1 = r0\n"
                             "call 86\nout:\nr0 = 2\nexit", [m])
    verify(release.programs["t"], release.maps)  # the value is a struct bpf_sock
    with Collection(release, "kernel") as k, Collection(release, "userspace") as u:
        assert u.programs["t"].test_run(bytes(64)).retval == \
            k.programs["t"].test_run(bytes(64)).retval == 2
