"""Hostile keys, values and counts for maps on both backends: bytes-like objects of the
exact size, BTF-typed dicts and ints where the map has BTF; anything else a MapError or
TypeError naming the expected size, never a silent all-zero key. Batch counts are
checked as the kernel checks its __u32."""

from __future__ import annotations

import errno
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from pyxdp.btf.codec import CodecError
from pyxdp.collection import Collection
from pyxdp.errors import MapError, PyxdpError
from pyxdp.maps.lpm_trie import lpm_key
from pyxdp.spec import MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType

# A closed fd: past any process's fd table, and no number of pyxdp's (they count up
# from 1 per process, so a small one like 999 may name a live object late in a run).
NOT_OPEN = 0x7FFF_FFF0

ROOT = Path(__file__).resolve().parents[1]
PROG = "r0 = 2\nexit"
MAPS = (MapSpec("arr", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 8, 0),
        MapSpec("hash", int(BpfMapType.BPF_MAP_TYPE_HASH), 4, 8, 8, 0),
        MapSpec("wide", int(BpfMapType.BPF_MAP_TYPE_HASH), 12, 8, 8, 0))


@pytest.fixture(params=["userspace", pytest.param("kernel", marks=pytest.mark.kernel)])
def coll(request: pytest.FixtureRequest) -> Iterator[Collection]:
    with Collection(asm_collection(PROG, MAPS), str(request.param)) as c:
        yield c


def test_handles_take_exact_size_bytes_like_only(coll: Collection) -> None:
    h = coll.maps["hash"].handle
    h.update(b"\0\0\0\0", bytes(8), 0)
    h.update(np.array([7], "<u4"), memoryview(bytes(range(8))), 0)  # buffers are bytes-like
    assert h.lookup(bytearray(b"\x07\0\0\0")) == bytes(range(8))
    for bad in (4, -1, "abcd", None, 4.0):
        with pytest.raises((TypeError, MapError), match="4 bytes|needs a key"):
            h.delete(bad)
    with pytest.raises(MapError, match="key is 3 bytes, key_size is 4") as e:
        h.lookup(b"\0\0\0")
    assert e.value.errno == errno.EINVAL
    with pytest.raises(TypeError, match="8 bytes"):
        h.update(b"\0\0\0\0", 5, 0)
    assert h.lookup(b"\0\0\0\0") == bytes(8)  # the all-zero key was never touched


def test_collection_keys_ints_fit_or_are_refused(coll: Collection) -> None:
    m = coll.maps["hash"]
    m[1] = 2
    m[0xFFFF_FFFF] = 3
    m[-1] = 4  # the same u32 key, signed
    assert m[0xFFFF_FFFF] == 4 and len(m) == 2
    for bad in (1 << 32, -(1 << 31) - 1):
        with pytest.raises(MapError, match="does not fit 4 bytes"):
            m[bad] = 1
    with pytest.raises(TypeError, match="12 bytes"):
        coll.maps["wide"][5] = 1  # no int form for a 12-byte key
    with pytest.raises(MapError, match="key is 5 bytes, key_size is 12"):
        coll.maps["wide"][b"\0" * 5] = 1
    with pytest.raises(TypeError, match="4 bytes"):
        m["x"] = 1
    assert len(m) == 2


@pytest.mark.parametrize("count", [-1, 1 << 32, True, 1.5])
def test_batch_counts_outside_u32_are_einval(coll: Collection, count: object) -> None:
    for name in ("arr", "hash"):
        with pytest.raises(MapError, match="count must be") as e:
            coll.maps[name].handle.lookup_batch(None, count)
        assert e.value.errno == errno.EINVAL


def test_btf_typed_keys_and_values() -> None:
    with Collection.load(ROOT / "samples" / "lb.o") as lb:
        vips = lb.maps["vips"]
        vip = {"addr": bytes([198, 51, 100, 2]), "port": (5678).to_bytes(2, "big"), "proto": 17}
        vips[vip] = {"first_backend": 0, "backend_count": 1}
        ksize = vips.spec.key_size
        for bad, match in ((4, "needs an int|cannot store int"),
                           (b"\0" * (ksize - 1), f"{ksize - 1} bytes for a {ksize}-byte"),
                           ({**vip, "proto": 256}, "256 does not fit the 1-byte"),
                           ({**vip, "nope": 1}, "has no member 'nope'")):
            with pytest.raises(CodecError, match=match):
                vips.delete(bad)
        with pytest.raises(CodecError, match="-1 does not fit|does not fit the 4-byte"):
            vips[vip] = {"first_backend": 1 << 32, "backend_count": 1}
        assert vips[vip] == {"first_backend": 0, "backend_count": 1}


def test_lpm_key_prefix_is_a_u32() -> None:
    assert lpm_key(33, bytes(4))[:4] == (33).to_bytes(4, "little")  # the map refuses it
    for bad in (-1, 1 << 32):
        with pytest.raises(MapError, match="not a u32"):
            lpm_key(bad, bytes(4))
    with pytest.raises(TypeError):
        lpm_key(8, 4)  # type: ignore[arg-type]


def test_batch_rows_and_cursors_of_any_type(coll: Collection) -> None:
    # Found by fuzzing: the kernel backend's batches tested a numpy array's truth value
    # (numpy's ValueError) and called .ljust on a cursor that was not bytes.
    h = coll.maps["hash"].handle
    assert h.update_batch(np.array([[1, 0, 0, 0], [2, 0, 0, 0]], np.uint8),
                          np.zeros((2, 8), np.uint8)) == 2  # rows, on both backends
    keys, _, _ = h.lookup_batch(None, 0)
    assert sorted(keys) == [b"\x01\0\0\0", b"\x02\0\0\0"]
    for bad in (None, 5, b"\0\0\0\0", np.uint32(3)):
        with pytest.raises(TypeError, match="must be a list of bytes-like|0-d array"):
            h.delete_batch(bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="must be a list of bytes-like|0-d array"):
            h.update_batch(bad, [bytes(8)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes-like"):
        h.lookup_batch(5, 1)  # type: ignore[arg-type]
    assert h.delete_batch(np.array([[1, 0, 0, 0]], np.uint8)) == 1
    assert [k for k in h.lookup_batch(None, 0)[0]] == [b"\x02\0\0\0"]


@pytest.mark.parametrize("backend", ["userspace", pytest.param("kernel", marks=pytest.mark.kernel)])
def test_use_after_close_fails_as_a_closed_fd(backend: str) -> None:
    """After Collection.close() its maps and programs fail as closed descriptors do
    (EBADF), the same on both backends."""
    c = Collection(asm_collection(PROG, MAPS), backend)
    m, prog = c.maps["hash"], next(iter(c.programs.values()))
    m[1] = 2
    c.close()
    for op, use in (("lookup", lambda: m[1]), ("update", lambda: m.update(1, 3)),
                    ("delete", lambda: m.delete(1)), ("get_next_key", lambda: list(m))):
        with pytest.raises(MapError, match=f"^{op}: EBADF .*map 'hash' is closed") as ei:
            use()
        assert ei.value.errno == errno.EBADF
    for use in (lambda: prog.test_run(bytes(64)), lambda: prog.fd):
        with pytest.raises(PyxdpError, match=r"^program '.*' is closed$"):
            use()


def test_flags_are_checked_alike_on_both_backends(coll: Collection) -> None:
    # Found by fuzzing map handles: flags of a str or an array met '&' deep inside
    # (TypeError, numpy's ufunc error) and the kernel backend sent 1 << 64 as 0.
    from pyxdp.errors import BadArgument
    h = coll.maps["arr"].handle
    for flags, match in (("x", "flags must be an int, not 'x'"),
                         (np.zeros((2, 2)), "not a float64 array of shape"),
                         (1 << 64, "flags must be in 0..")):
        with pytest.raises(BadArgument, match=match):
            h.update(b"\0" * 4, bytes(8), flags)
    with pytest.raises(MapError, match="cpu -1 is not one of") as e:
        h.lookup(b"\0" * 4, cpu=-1)  # the kernel's EINVAL still
    assert e.value.errno == errno.EINVAL


def _batch_calls(backend: str, maps: Sequence[tuple[int, int, int, int]],
                 calls: Sequence[tuple[str, tuple[object, ...]]]) -> list[object]:
    """Each batch command of ``calls`` on a map of each (type, key, value size, flags):
    "ok" or the errno, in order."""
    out: list[object] = []
    for t, ks, vs, flags in maps:
        with Collection(asm_collection(PROG, (MapSpec("m", int(t), ks, vs, 4, flags),)),
                        backend) as c:
            h = c.maps["m"].handle
            for name, args in calls:
                try:
                    getattr(h, name)(*args)
                    out.append("ok")
                except MapError as e:
                    out.append(e.errno)
    return out


def _batch_outcomes(backend: str) -> list[object]:
    from pyxdp.uapi.bpf import BpfMapType as T
    return _batch_calls(
        backend, [(t, 4, 4 if t == T.BPF_MAP_TYPE_PROG_ARRAY else 8, 0)
                  for t in (T.BPF_MAP_TYPE_ARRAY, T.BPF_MAP_TYPE_PERCPU_ARRAY,
                            T.BPF_MAP_TYPE_PROG_ARRAY, T.BPF_MAP_TYPE_HASH)],
        (("delete_batch", ([bytes(4)],)), ("delete_batch", ([],)),
         ("lookup_and_delete_batch", (0,)), ("lookup_batch", (None, 0))))


def test_batch_commands_a_map_lacks_are_enotsupp() -> None:
    """bpf_map_do_batch answers ENOTSUPP (524) for a command the map's ops lack, before
    looking at the keys: arrays have no delete batches, prog arrays no batches at all
    (pyxdp said EINVAL or ENOENT from the per-key delete, or ran them)."""
    assert _batch_outcomes("userspace") == [524, 524, 524, "ok"] * 2 + [524] * 4 + \
        [2, "ok", "ok", "ok"]


@pytest.mark.kernel
def test_batch_commands_match_linux() -> None:
    assert _batch_outcomes("userspace") == _batch_outcomes("kernel")


_WRITE_SLOT0 = """r1 = 0
*(u32 *)(r10 - 4) = r1
r2 = r10
r2 += -4
r1 = map[fd:0]
call bpf_map_lookup_elem
if r0 == 0 goto out
r1 = 7
*(u64 *)(r0 + 0) = r1
out:
r0 = 2
exit"""


@pytest.mark.parametrize("backend", ["userspace", pytest.param("kernel", marks=pytest.mark.kernel)])
def test_rdonly_wronly_maps_refuse_the_syscall_side_only(backend: str) -> None:
    """BPF_F_RDONLY/BPF_F_WRONLY set the descriptor's mode: bpf(2) writes (reads) are EPERM
    (map_get_sys_perms), while the program still reads and writes the map (BPF_F_*_PROG
    govern that side). pyxdp's userspace maps allowed every access from Python."""
    from pyxdp.uapi.bpf import MapFlag
    for flag, refused in ((MapFlag.BPF_F_RDONLY, ("update", "delete")),
                          (MapFlag.BPF_F_WRONLY, ("lookup", "get_next_key"))):
        spec = MapSpec("m", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 2, int(flag))
        with Collection(asm_collection(_WRITE_SLOT0, (spec,)), backend) as c:
            assert c.programs["t"].test_run(bytes(64)).retval == 2  # the program wrote 7
            m = c.maps["m"]
            uses = {"update": lambda m=m: m.update(1, 5), "delete": lambda m=m: m.delete(1),
                    "lookup": lambda m=m: m[0], "get_next_key": lambda m=m: len(m)}
            for op in refused:
                with pytest.raises(MapError, match=f"^{op}: EPERM .*created {flag.name}") as e:
                    uses[op]()
                assert e.value.errno == errno.EPERM
            if flag == MapFlag.BPF_F_RDONLY:
                assert m[0] == 7 and len(m) == 2
            else:
                m.update(1, 5)


def test_frozen_rodata_refuses_writes_from_python() -> None:
    """A frozen map (.rodata) is read-only for bpf(2): EPERM, as the kernel backend says."""
    spec = MapSpec(".rodata", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 1, 0, frozen=True,
                   contents=((bytes(4), (9).to_bytes(8, "little")),))
    with Collection(asm_collection(PROG, (spec,)), "userspace") as c:
        m = c.maps[".rodata"]
        assert m[0] == 9
        with pytest.raises(MapError, match="^update: EPERM .*is frozen"):
            m[0] = 1
        assert m[0] == 9


_BATCH_TYPES = (
    (BpfMapType.BPF_MAP_TYPE_ARRAY, 4, 8, 0), (BpfMapType.BPF_MAP_TYPE_HASH, 4, 8, 0),
    (BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 0), (BpfMapType.BPF_MAP_TYPE_LPM_TRIE, 8, 8, 1),
    (BpfMapType.BPF_MAP_TYPE_DEVMAP, 4, 4, 0), (BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH, 4, 4, 0),
    (BpfMapType.BPF_MAP_TYPE_CPUMAP, 4, 4, 0), (BpfMapType.BPF_MAP_TYPE_XSKMAP, 4, 4, 0),
    (BpfMapType.BPF_MAP_TYPE_QUEUE, 0, 8, 0), (BpfMapType.BPF_MAP_TYPE_STACK, 0, 8, 0),
    (BpfMapType.BPF_MAP_TYPE_PERF_EVENT_ARRAY, 4, 4, 0), (BpfMapType.BPF_MAP_TYPE_SOCKMAP, 4, 4, 0),
    (BpfMapType.BPF_MAP_TYPE_SOCKHASH, 4, 4, 0),
    (BpfMapType.BPF_MAP_TYPE_REUSEPORT_SOCKARRAY, 4, 4, 0))


def _empty_batches(backend: str) -> list[object]:
    return _batch_calls(backend, _BATCH_TYPES, (
        ("update_batch", ([], [], 0)), ("update_batch", ([], [], 1)),
        ("update_batch", ([], [], 4)), ("delete_batch", ([],)), ("lookup_batch", (None, 0)),
        ("lookup_and_delete_batch", (0,))))


def test_empty_batches_and_batch_elem_flags_are_linux_s() -> None:
    """Found by comparing batches with Linux: an empty update batch still has its
    elem_flags checked (only BPF_F_LOCK: BPF_NOEXIST is EINVAL, and pyxdp's arrays had
    honoured it with EEXIST), and devmaps, cpumaps, xskmaps, queues, stacks, perf arrays and
    socket maps have no batch commands at all (ENOTSUPP; pyxdp ran them)."""
    got = _empty_batches("userspace")
    rows = [got[i:i + 6] for i in range(0, len(got), 6)]
    ok = ["ok", 22, 22]
    assert rows[0] == ok + [524, "ok", 524]  # array
    assert rows[1] == ok + ["ok", "ok", "ok"]  # hash
    assert rows[2] == ok + [524, "ok", 524]  # percpu array
    assert rows[3] == ok + ["ok", "ok", 524]  # lpm trie
    assert all(r == [524] * 6 for r in rows[4:])
    with Collection(asm_collection(PROG, MAPS), "userspace") as c:
        with pytest.raises(MapError, match="update_batch: EINVAL .*unknown flags 0x1") as e:
            c.maps["arr"].handle.update_batch([bytes(4)], [bytes(8)], 1)
        assert e.value.errno == errno.EINVAL and e.value.count == 0


@pytest.mark.kernel
def test_empty_batches_match_linux() -> None:
    assert _empty_batches("userspace") == _empty_batches("kernel")


_K, _V = bytes(4), bytes(8)
_HANDLE_OPS: tuple[tuple[str, tuple[object, ...]], ...] = (
    ("lookup", (_K,)), ("get_next_key", (None,)), ("update", (_K, _V)), ("delete", (_K,)),
    ("lookup_and_delete", (_K,)), ("lookup_batch", (None, 0)), ("update_batch", ([_K], [_V])),
    ("delete_batch", ([_K],)), ("lookup_and_delete_batch", (0,)), ("freeze", ()),
    ("freeze", ()), ("update", (_K, _V)), ("lookup", (_K,)), ("delete", (_K,)),
    ("lookup_and_delete", (_K,)))
_QUEUE_OPS: tuple[tuple[str, tuple[object, ...]], ...] = (
    ("push", (_V,)), ("peek", ()), ("pop", ()), ("update", (None, _V)),
    ("lookup_and_delete", (None,)), ("freeze", ()), ("freeze", ()), ("push", (_V,)))


def _handle_perms(backend: str) -> list[object]:
    """Each op of ``Map.handle`` on a plain, BPF_F_RDONLY and BPF_F_WRONLY hash, array and
    queue, freezing half way: ok or the errno."""
    from pyxdp.uapi.bpf import MapFlag
    got: list[object] = []
    for t, ksz, ops in ((BpfMapType.BPF_MAP_TYPE_HASH, 4, _HANDLE_OPS),
                        (BpfMapType.BPF_MAP_TYPE_ARRAY, 4, _HANDLE_OPS),
                        (BpfMapType.BPF_MAP_TYPE_QUEUE, 0, _QUEUE_OPS)):
        for flag in (0, int(MapFlag.BPF_F_RDONLY), int(MapFlag.BPF_F_WRONLY)):
            spec = MapSpec("m", int(t), ksz, 8, 4, flag)
            with Collection(asm_collection(PROG, (spec,)), backend) as c:
                h = c.maps["m"].handle
                for name, args in ops:
                    try:
                        getattr(h, name)(*args)
                        got.append("ok")
                    except MapError as e:
                        got.append(e.errno)
    return got


def test_handle_refuses_as_the_descriptor_does() -> None:
    """Found by fuzzing handles (round 5's gap): the userspace backend's ``Map.handle``
    was the map the helpers use, so a BPF_F_RDONLY map's handle took updates, a
    BPF_F_WRONLY one's gave lookups, and it had no freeze. Now the handle is the
    descriptor's side: EPERM before the operation's own checks (an array's delete on a
    frozen map, a second freeze), while the program still writes the map."""
    got = _handle_perms("userspace")
    n = len(_HANDLE_OPS)
    plain, rdonly, wronly = got[:n], got[n:2 * n], got[2 * n:3 * n]
    P = errno.EPERM
    assert plain == ["ok"] * 10 + [P, P, "ok", P, P]
    assert rdonly == ["ok", "ok", P, P, P, "ok", P, P, P, P, P, P, "ok", P, P]
    assert wronly == [P, P, "ok", "ok", P, P, "ok", "ok", P, "ok", P, P, P, P, P]
    E, U = errno.EINVAL, 524  # an array's own answers, where the mode lets it be asked
    assert got[3 * n:4 * n] == ["ok", "ok", "ok", E, U, "ok", "ok", U, U, "ok", P, P, "ok", P, P]
    assert got[5 * n:6 * n] == [P, P, "ok", E, P, P, "ok", U, P, "ok", P, P, P, P, P]
    q = got[6 * n:]
    assert q == ["ok"] * 6 + [P, P] + [P, "ok", P, P, P, P, P, P] + \
        ["ok", P, P, "ok", P, "ok", P, P]
    spec = MapSpec("m", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 2, 0)
    with Collection(asm_collection(_WRITE_SLOT0, (spec,)), "userspace") as c:
        c.maps["m"].handle.freeze()
        assert c.programs["t"].test_run(bytes(64)).retval == 2
        assert c.maps["m"][0] == 7  # the program wrote through the frozen map
        with pytest.raises(MapError, match="^update: EPERM .*is frozen"):
            c.maps["m"][0] = 1
        with pytest.raises(MapError, match="^update: EPERM .*is frozen"):
            c.maps["m"].handle[bytes(4)] = bytes(8)


@pytest.mark.kernel
def test_handle_permissions_match_linux() -> None:
    assert _handle_perms("userspace") == _handle_perms("kernel")


_FD_MAPS = (("prog_array", BpfMapType.BPF_MAP_TYPE_PROG_ARRAY),
            ("array_of_maps", BpfMapType.BPF_MAP_TYPE_ARRAY_OF_MAPS),
            ("hash_of_maps", BpfMapType.BPF_MAP_TYPE_HASH_OF_MAPS),
            ("sockmap", BpfMapType.BPF_MAP_TYPE_SOCKMAP),
            ("sockhash", BpfMapType.BPF_MAP_TYPE_SOCKHASH),
            ("xskmap", BpfMapType.BPF_MAP_TYPE_XSKMAP),
            ("perf_event_array", BpfMapType.BPF_MAP_TYPE_PERF_EVENT_ARRAY))


def _bad_fds(backend: str) -> dict[str, list[object]]:
    """Each fd-valued map updated with fd 0 (stdin), a closed fd, -1, S32_MAX + 1, the
    loaded program's own fd and a map's fd (their ids on userspace): ok or the errno."""
    inner = MapSpec("in", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 4, 1, 0)
    got: dict[str, list[object]] = {}
    for name, t in _FD_MAPS:
        spec = MapSpec("m", int(t), 4, 4, 4, 0,
                       inner=inner if "of_maps" in name else None)
        with Collection(asm_collection(PROG, (spec, inner)), backend) as c:
            h, prog, other = c.maps["m"].handle, c.programs["t"], c.maps["in"].handle
            row: list[object] = []
            map_fd = getattr(other, "fd", None) or other.id  # type: ignore[attr-defined]
            for fd in (0, NOT_OPEN, 0xFFFF_FFFF, 0x8000_0000, prog.fd, map_fd):
                try:
                    h.update(bytes(4), fd.to_bytes(4, "little"))
                    row.append("ok")
                except MapError as e:
                    row.append(e.errno)
            got[name] = row
    return got


def test_bad_fds_in_fd_maps_are_linux_s() -> None:
    """Found by sweeping fd-valued maps: fd 0 (stdin, open but no BPF object or socket)
    was EBADF everywhere where Linux answers EINVAL (prog_array, map-in-map) or ENOTSOCK
    (sockmap, sockhash, xskmap); and a userspace prog_array resolved its "fd" as an
    AF_XDP socket, so even a loaded program's own fd was EBADF. Round 7: programs, maps
    and AF_XDP sockets of the userspace backend had numbers of their own spaces, so a
    map's fd in a prog_array (or a program's in a map-in-map, either in a sockmap or
    xskmap) was EBADF, or the program that happened to have that number; they now share
    one space as fds do and the wrong kind is Linux's EINVAL/ENOTSOCK."""
    B, I, S = errno.EBADF, errno.EINVAL, errno.ENOTSOCK
    got = _bad_fds("userspace")
    assert got["prog_array"] == [I, B, B, B, "ok", I]
    assert got["array_of_maps"] == got["hash_of_maps"] == [I, B, B, B, I, "ok"]
    assert got["sockmap"] == got["sockhash"] == [S, B, I, I, S, S]
    assert got["xskmap"] == [S, B, B, B, S, S]
    assert got["perf_event_array"] == [B, B, B, B, B, B]


@pytest.mark.kernel
def test_bad_fds_in_fd_maps_match_linux() -> None:
    assert _bad_fds("userspace") == _bad_fds("kernel")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.parametrize("backend", ["userspace", pytest.param("kernel", marks=pytest.mark.kernel)])
def test_lpm_trie_of_2_28_entries_costs_what_it_holds(backend: str) -> None:
    """Found by comparing large max_entries with Linux: an LPM trie (BPF_F_NO_PREALLOC
    required, nodes allocated per element) of 2^28 entries was ENOMEM on pyxdp (it had
    touched its whole node pool: 6.6 GB resident, 19 s); Linux accepts it. The pool is
    now zeros the OS backs lazily."""
    spec = MapSpec("m", int(BpfMapType.BPF_MAP_TYPE_LPM_TRIE), 8, 8, 1 << 28, 1)
    before = _rss()
    with Collection(asm_collection(PROG, (spec,)), backend) as c:
        h = c.maps["m"].handle
        for i in range(64):
            h.update(lpm_key(24, bytes([10, i, 0, 0])), i.to_bytes(8, "little"))
        assert len(c.maps["m"]) == 64
        assert h.lookup(lpm_key(32, bytes([10, 5, 0, 9]))) == (5).to_bytes(8, "little")
        h.delete(lpm_key(24, bytes([10, 5, 0, 0])))
        assert h.lookup(lpm_key(32, bytes([10, 5, 0, 9]))) is None
        assert _rss() - before < 256 << 20


@pytest.mark.parametrize("backend", ["userspace", pytest.param("kernel", marks=pytest.mark.kernel)])
def test_lpm_trie_takes_any_u32_max_entries(backend: str) -> None:
    """Round 7: an LPM trie above 2^28 entries (8-byte keys and values; fewer with larger
    ones) was ENOMEM on pyxdp where Linux accepts every max_entries up to 2^32 - 1
    (measured: 2^29, 2^30, 2^31 - 1, 2^32 - 1 with keys of 8, 20 and 260 bytes). Its node
    pool is now capped instead."""
    for n in (1 << 30, (1 << 31) - 1, (1 << 32) - 1):
        spec = MapSpec("m", int(BpfMapType.BPF_MAP_TYPE_LPM_TRIE), 260, 8, n, 1)
        with Collection(asm_collection(PROG, (spec,)), backend) as c:
            h = c.maps["m"].handle
            h.update(lpm_key(8, bytes(256)), bytes(8))
            assert h.lookup(lpm_key(256, bytes(256))) == bytes(8)


def test_lpm_trie_capped_pool_runs_out_as_enomem(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the capped pool holds: an insertion it has no nodes for is the kernel's ENOMEM
    of a failed node allocation, and the trie is unchanged."""
    from pyxdp.maps import lpm_trie
    monkeypatch.setattr(lpm_trie, "MAX_STORAGE_BYTES", 4 * 32)  # 4 nodes of 32 bytes
    spec = MapSpec("m", int(BpfMapType.BPF_MAP_TYPE_LPM_TRIE), 8, 8, 100, 1)
    with Collection(asm_collection(PROG, (spec,)), "userspace") as c:
        h = c.maps["m"].handle
        h.update(lpm_key(8, bytes([10, 0, 0, 0])), bytes(8))
        h.update(lpm_key(8, bytes([11, 0, 0, 0])), bytes(8))  # + an intermediate node
        with pytest.raises(MapError) as e:
            h.update(lpm_key(8, bytes([12, 0, 0, 0])), bytes(8))  # two more: one is left
        assert e.value.errno == errno.ENOMEM
        assert len(c.maps["m"]) == 2
        h.update(lpm_key(7, bytes([10, 0, 0, 0])), bytes(8))  # covers 10/8 and 11/8: one
        assert len(c.maps["m"]) == 3


_BIG = ((BpfMapType.BPF_MAP_TYPE_SOCKHASH, (1 << 27) + 1),
        (BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH, (1 << 31) + 1),
        (BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH, (1 << 32) - 1))


def _big_maps(backend: str) -> list[object]:
    got: list[object] = []
    for t, n in _BIG:
        try:
            with Collection(asm_collection(PROG, (MapSpec("m", int(t), 4, 4, n, 0),)),
                            backend):
                got.append("ok")
        except MapError as e:
            got.append(e.errno)
    return got


def test_hash_bucket_limits_are_linux_s() -> None:
    """Found by comparing large max_entries with Linux: a sockhash of more than 2^27
    buckets (16 bytes each, at most U32_MAX bytes) is EINVAL, as is a devmap_hash whose
    roundup_pow_of_two wraps to 0 buckets; pyxdp accepted the one and said ENOMEM to the
    other. A devmap_hash of 2^24 entries now costs what its arrays hold (it had a Python
    list per bucket and per free slot: 21 s, 2 GB resident)."""
    assert _big_maps("userspace") == [errno.EINVAL] * 3
    spec = MapSpec("m", int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH), 4, 4, 1 << 24, 0)
    before = _rss()
    with Collection(asm_collection(PROG, (spec,)), "userspace") as c:
        h = c.maps["m"].handle
        for k in (7, 1 << 23, 3):
            h.update(k.to_bytes(4, "little"), (1).to_bytes(4, "little"))  # lo
        h.delete((7).to_bytes(4, "little"))
        assert sorted(c.maps["m"].keys()) == [3, 1 << 23]
        assert _rss() - before < 1 << 30


@pytest.mark.kernel
def test_hash_bucket_limits_match_linux() -> None:
    assert _big_maps("userspace") == _big_maps("kernel")


def test_a_prog_array_takes_a_program_of_another_collection() -> None:
    """Round 8 (closed and cross-object use against the kernel backend): Linux's
    prog_array takes any XDP program fd of the process, but a userspace prog_array
    refused a program another Collection (its own backend) had loaded with EINVAL. The
    fd now resolves whichever backend loaded it; the tail call runs it, as on Linux."""
    from pyxdp.net.packets import udp_packet
    lb = ROOT / "samples" / "lb.o"
    with Collection.load(lb) as a, Collection.load(lb) as b:
        a.maps["jmp_table"].update(0, b.programs["lb_non_vip"].fd)
        res = a.programs["lb_ingress"].test_run(udp_packet(b"x" * 40, dst_ip="10.9.9.9"))
        assert res.retval == 2
        # lb_non_vip ran, on its own maps: b's STAT_NON_VIP counted it (as on Linux),
        # in the slot of whichever CPU the test run was on
        assert b.maps["stats"].sum(2)["packets"] == 1
        assert a.maps["stats"].sum(2)["packets"] == 0
