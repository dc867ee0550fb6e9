"""Array and hash maps: kernel errnos, order, per-CPU values, LRU, pointers into storage."""

from __future__ import annotations

import errno
import struct

import numpy as np
import pytest

from pyxdp.maps import (
    BPF_ANY,
    BPF_EXIST,
    BPF_F_LOCK,
    BPF_NOEXIST,
    ArrayMap,
    HashMap,
    MapError,
    ProgArrayMap,
    create_map,
    fnv1a64,
    map_by_addr,
)
from pyxdp.maps.hashtab import fnv1a64_many
from pyxdp.uapi.bpf import BpfMapType as T
from pyxdp.vm.memory import Memory

# A closed fd: past any process's fd table, and no number of pyxdp's (they count up
# from 1 per process, so a small one like 999 may name a live object late in a run).
NOT_OPEN = 0x7FFF_FFF0


def u32(x: int) -> bytes:
    return struct.pack("<I", x)


def errno_of(fn: object, *args: object, **kw: object) -> int:
    try:
        fn(*args, **kw)  # type: ignore[operator]
    except MapError as e:
        return e.errno
    return 0


# -- array ----------------------------------------------------------------------------

def test_array_errnos_measured() -> None:
    a = create_map(T.BPF_MAP_TYPE_ARRAY, 4, 5, 3)
    assert errno_of(a.update, u32(0), b"abcde", BPF_ANY) == 0
    assert errno_of(a.update, u32(0), b"abcde", BPF_NOEXIST) == errno.EEXIST
    assert errno_of(a.update, u32(0), b"abcde", BPF_EXIST) == 0
    for flags in (3, 4, 5, 6, 8):
        assert errno_of(a.update, u32(0), b"abcde", flags) == errno.EINVAL
    assert errno_of(a.update, u32(3), b"abcde", BPF_ANY) == errno.E2BIG
    assert errno_of(a.update, u32(3), b"abcde", BPF_NOEXIST) == errno.E2BIG
    assert a.lookup(u32(3)) is None
    assert a.lookup(u32(0)) == b"abcde"
    assert errno_of(a.lookup, u32(0), BPF_F_LOCK) == errno.EINVAL
    assert errno_of(a.lookup, u32(0), 1) == errno.EINVAL
    assert errno_of(a.delete, u32(0)) == errno.EINVAL
    assert errno_of(a.delete, u32(9)) == errno.EINVAL
    assert errno_of(a.lookup_and_delete, u32(0)) == 524
    assert a.try_update(u32(7), b"12345") == -errno.E2BIG


def test_array_get_next_key_order() -> None:
    a = create_map(T.BPF_MAP_TYPE_ARRAY, 4, 4, 3)
    assert a.get_next_key(None) == u32(0)
    assert a.get_next_key(u32(1)) == u32(2)
    assert a.get_next_key(u32(2)) is None
    assert a.get_next_key(u32(7)) == u32(0)
    assert list(a) == [u32(0), u32(1), u32(2)]
    assert len(a) == 3


def test_array_storage_and_pointer() -> None:
    a = create_map(T.BPF_MAP_TYPE_ARRAY, 4, 12, 4)
    assert isinstance(a, ArrayMap)
    assert a.value_data.shape == (4 * 16,) and a.elem_size == 16
    a[2] = b"x" * 12
    addr = a.lookup_addr(u32(2))
    assert addr == a.value_region().base + 2 * 16
    assert a.lookup_addr(u32(4)) == 0
    mem = Memory()
    for r in a.regions():
        mem.add(r)
    assert mem.read(addr, 12) == b"x" * 12
    mem.store(addr, 4, 0x11223344)  # the program writes through the pointer
    assert a[2][:4] == u32(0x11223344)
    assert a.view()[2, :4].tobytes() == u32(0x11223344)
    a.clear()
    assert a[2] == bytes(12)


def test_array_int_keys_values_and_sum() -> None:
    a = create_map(T.BPF_MAP_TYPE_ARRAY, 4, 8, 4)
    a[1] = 2**40 + 5
    assert a.sum(1) == 2**40 + 5
    assert a.get(9) is None and 1 in a and 9 not in a
    a[0] = np.uint64(7)
    assert a[0] == struct.pack("<Q", 7)
    a[3] = -1
    assert a.sum(3, signed=True) == -1
    with pytest.raises(MapError):
        a[1] = b"short"


def test_array_batches_vectorized() -> None:
    a = create_map(T.BPF_MAP_TYPE_ARRAY, 4, 4, 10)
    keys = np.array([1, 3, 5, 1], np.uint32)
    vals = np.array([10, 30, 50, 11], np.uint32)
    assert a.update_batch(keys, vals) == 4
    assert a.sum(1) == 11 and a.sum(3) == 30  # later duplicates win, as sequential updates
    ks, vs, cursor = a.lookup_batch(None, 4)
    assert ks == [u32(i) for i in range(4)] and vs[3] == u32(30) and cursor == u32(3)
    ks, vs, cursor = a.lookup_batch(cursor, 0)
    assert ks[0] == u32(4) and len(ks) == 6 and cursor is None
    with pytest.raises(MapError) as ei:
        a.update_batch(np.array([2, 20, 4], np.uint32), np.array([1, 2, 3], np.uint32))
    assert ei.value.errno == errno.E2BIG and ei.value.count == 1
    assert a.sum(2) == 1 and a.sum(4) == 0


def test_percpu_array() -> None:
    a = create_map(T.BPF_MAP_TYPE_PERCPU_ARRAY, 4, 5, 2, nr_cpus=2)
    assert a.user_value_size == 16
    assert a.lookup(u32(0)) == bytes(16)
    assert errno_of(a.update, u32(0), bytes(16), BPF_F_LOCK) == errno.EINVAL
    assert errno_of(a.update, u32(0), bytes(16), 3) == errno.EINVAL
    assert errno_of(a.update, u32(0), bytes(16), BPF_NOEXIST) == errno.EEXIST
    assert errno_of(a.update, u32(5), bytes(16)) == errno.E2BIG
    a.update(u32(1), b"ABCDEFGHIJKLMNOP")
    # User space writes whole 8-byte slots, padding included (measured).
    assert a.lookup(u32(1)) == b"ABCDEFGHIJKLMNOP"
    assert a.lookup(u32(1), cpu=1) == b"IJKLM"
    # A program on CPU 1 updates only its own copy.
    a.update(u32(1), b"zzzzz", cpu=1)
    assert a.lookup(u32(1), cpu=0) == b"ABCDE" and a.lookup(u32(1), cpu=1) == b"zzzzz"
    r0, r1 = a.value_region(0), a.value_region(1)
    assert r0 is not r1 and a.lookup_addr(u32(1), 1) == r1.base + 8


def test_percpu_sum_and_python_values() -> None:
    a = create_map(T.BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 2, nr_cpus=4)
    a[0] = [1, 2, 3, 4]
    assert a.sum(0) == 10
    assert a[0] == [struct.pack("<Q", n) for n in (1, 2, 3, 4)]
    a[1] = 5  # one value: every CPU
    assert a.sum(1) == 20
    mem = Memory()
    for r in a.regions():
        mem.add(r)
    addr = a.lookup_addr(u32(0), 2)
    mem.store(addr, 8, mem.load(addr, 8) + 100)
    assert a.sum(0) == 110


# -- hash -------------------------------------------------------------------------------

def test_hash_errnos_measured() -> None:
    h = create_map(T.BPF_MAP_TYPE_HASH, 4, 4, 2)
    assert h.get_next_key(None) is None and h.get_next_key(u32(5)) is None
    assert h.lookup(u32(1)) is None
    assert errno_of(h.update, u32(1), u32(1), BPF_EXIST) == errno.ENOENT
    assert errno_of(h.update, u32(1), u32(1), BPF_ANY) == 0
    assert errno_of(h.update, u32(1), u32(1), BPF_NOEXIST) == errno.EEXIST
    assert errno_of(h.update, u32(2), u32(2), BPF_NOEXIST) == 0
    assert errno_of(h.update, u32(3), u32(3), BPF_ANY) == errno.E2BIG
    assert errno_of(h.update, u32(3), u32(3), BPF_EXIST) == errno.ENOENT
    assert errno_of(h.update, u32(3), u32(3), BPF_NOEXIST) == errno.E2BIG
    assert errno_of(h.update, u32(2), u32(7), BPF_ANY) == 0  # replace while full
    for flags in (3, 4, 5, 6, 8):
        assert errno_of(h.update, u32(2), u32(8), flags) == errno.EINVAL
    assert errno_of(h.delete, u32(9)) == errno.ENOENT
    assert h.lookup_and_delete(u32(2)) == u32(7)
    assert h.lookup_and_delete(u32(2)) is None
    assert len(h) == 1


def test_hash_order_is_slot_order_and_missing_key_restarts() -> None:
    h = create_map(T.BPF_MAP_TYPE_HASH, 4, 4, 64)
    assert isinstance(h, HashMap)
    for k in range(40):
        h[k] = k
    order = list(h.raw_keys())
    # get_next_key order is increasing index slot: (fnv1a64(key) & mask) then probing.
    walked = []
    key = h.get_next_key(None)
    while key is not None:
        walked.append(key)
        key = h.get_next_key(key)
    assert walked == order and len(order) == 40
    slots = [int(h.elem_slot[h._elem_of(k)]) for k in order]
    assert slots == sorted(slots)
    assert h.get_next_key(u32(999)) == order[0]
    # Deleting while iterating (the usual pattern) visits every key once.
    seen = []
    key = h.get_next_key(None)
    while key is not None:
        nxt = h.get_next_key(key)
        h.delete(key)
        seen.append(key)
        key = nxt
    assert sorted(seen) == sorted(order) and len(h) == 0


def test_hash_function_documented() -> None:
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C  # the published FNV-1a 64 test vector
    rows = np.frombuffer(b"abcdefgh" * 3, np.uint8).reshape(3, 8)
    assert fnv1a64_many(rows).tolist() == [fnv1a64(b"abcdefgh")] * 3
    h = create_map(T.BPF_MAP_TYPE_HASH, 8, 8, 4)
    assert isinstance(h, HashMap)
    h[b"abcdefgh"] = 1
    slot = int(h.elem_slot[h._elem_of(b"abcdefgh")])
    assert slot == fnv1a64(b"abcdefgh") & (h.capacity - 1)
    assert int(h.hashes[slot]) == fnv1a64(b"abcdefgh")


def test_hash_churn_tombstones_rebuild() -> None:
    h = create_map(T.BPF_MAP_TYPE_HASH, 8, 8, 100)
    assert isinstance(h, HashMap)
    rng = np.random.default_rng(1)
    model: dict[bytes, bytes] = {}
    for _ in range(5000):
        k = int(rng.integers(0, 300)).to_bytes(8, "little")
        if rng.random() < 0.5 and model:
            victim = list(model)[int(rng.integers(0, len(model)))]
            h.delete(victim)
            del model[victim]
        elif k in model or len(model) < 100:
            v = rng.bytes(8)
            h.update(k, v)
            model[k] = v
        else:
            assert errno_of(h.update, k, b"12345678") == errno.E2BIG
    assert dict(h.items()) == model
    assert int(h.hdr[0]) + int(h.hdr[1]) <= h.capacity * 3 // 4


def test_hash_pointer_survives_other_updates() -> None:
    h = create_map(T.BPF_MAP_TYPE_HASH, 4, 8, 16)
    h[1] = 5
    addr = h.lookup_addr(u32(1))
    mem = Memory()
    mem.add(h.value_region())
    for k in range(2, 17):
        h[k] = k
    for k in range(2, 17):
        del h[k]
    mem.store(addr, 8, 77)
    assert h.sum(1) == 77 and h.lookup_addr(u32(404)) == 0


def test_hash_lookup_batch_and_dict_api() -> None:
    h = create_map(T.BPF_MAP_TYPE_HASH, 4, 4, 16)
    for k in range(10):
        h[k] = k * 3
    ks, vs, cursor = h.lookup_batch(None, 4)
    assert len(ks) == 4 and cursor == ks[-1]
    ks2, vs2, cursor2 = h.lookup_batch(cursor, 0)
    assert cursor2 is None and sorted(ks + ks2) == sorted(u32(k) for k in range(10))
    assert dict(zip(ks + ks2, vs + vs2, strict=True)) == {u32(k): u32(3 * k) for k in range(10)}
    del h[3]
    with pytest.raises(KeyError):
        del h[3]
    with pytest.raises(KeyError):
        h[3]
    assert len(h) == 9 and h.get(3, "x") == "x"
    h.clear()
    assert len(h) == 0 and list(h) == [] and h.try_delete(u32(1)) == -errno.ENOENT
    h[1] = 1
    assert h[1] == u32(1)


def test_percpu_hash_program_and_syscall_updates() -> None:
    h = create_map(T.BPF_MAP_TYPE_PERCPU_HASH, 4, 4, 4, nr_cpus=2)
    assert isinstance(h, HashMap)
    assert errno_of(h.update, u32(1), bytes(16), BPF_F_LOCK) == errno.EINVAL
    h.update(u32(1), bytes(range(16)))
    assert h.lookup(u32(1)) == bytes(range(16))  # whole slots, as measured
    # A program creating a key on CPU 1 zeroes CPU 0's copy.
    h.update(u32(2), u32(9), cpu=1)
    assert h.lookup(u32(2), cpu=0) == bytes(4) and h.lookup(u32(2), cpu=1) == u32(9)
    h.update(u32(2), u32(4), cpu=0)
    assert h.sum(2) == 13
    assert h.lookup_addr(u32(2), 1) == h.value_region(1).base + 8 * h._elem_of(u32(2))


def test_lru_evicts_least_recently_used() -> None:
    m = create_map(T.BPF_MAP_TYPE_LRU_HASH, 4, 4, 3)
    assert errno_of(m.update, u32(1), u32(1), BPF_EXIST) == errno.ENOENT
    assert errno_of(m.update, u32(1), u32(1), 3) == errno.EINVAL
    assert errno_of(m.update, u32(1), u32(1), BPF_F_LOCK) == errno.EINVAL
    for k in (1, 2, 3):
        m[k] = k
    assert m.lookup_addr(u32(1)) != 0  # a program touches 1: 2 is now the oldest
    m[4] = 4
    assert set(m.raw_keys()) == {u32(1), u32(3), u32(4)}
    m.lookup(u32(3))  # user-space lookups do not count as use
    m[5] = 5
    assert set(m.raw_keys()) == {u32(1), u32(4), u32(5)}
    m[1] = 10  # an update is a use
    m[6] = 6
    assert set(m.raw_keys()) == {u32(1), u32(5), u32(6)} and len(m) == 3


def test_lru_percpu() -> None:
    m = create_map(T.BPF_MAP_TYPE_LRU_PERCPU_HASH, 4, 8, 2, nr_cpus=2)
    m[1] = [1, 2]
    m[2] = [3, 4]
    m[3] = [5, 6]
    assert set(m.raw_keys()) == {u32(2), u32(3)} and m.sum(3) == 11


def test_map_in_map_values_are_maps() -> None:
    inner = create_map(T.BPF_MAP_TYPE_ARRAY, 4, 4, 2)
    other = create_map(T.BPF_MAP_TYPE_ARRAY, 4, 4, 3)
    flagged = create_map(T.BPF_MAP_TYPE_ARRAY, 4, 4, 2, 1 << 12)
    aom = create_map(T.BPF_MAP_TYPE_ARRAY_OF_MAPS, 4, 4, 2, inner=inner)
    assert aom.lookup(u32(0)) is None
    aom.update(u32(0), u32(inner.id))
    assert aom.lookup(u32(0)) == u32(inner.id)
    assert errno_of(aom.update, u32(1), u32(inner.id), BPF_NOEXIST) == errno.EINVAL
    assert errno_of(aom.update, u32(1), u32(inner.id), BPF_EXIST) == errno.EINVAL
    assert errno_of(aom.update, u32(5), u32(inner.id)) == errno.E2BIG
    assert errno_of(aom.update, u32(1), u32(other.id)) == errno.EINVAL
    assert errno_of(aom.update, u32(1), u32(flagged.id)) == errno.EINVAL
    assert errno_of(aom.update, u32(1), u32(0xFFFFFF)) == errno.EBADF
    assert errno_of(aom.delete, u32(1)) == errno.ENOENT
    assert errno_of(aom.delete, u32(5)) == errno.E2BIG
    assert map_by_addr(aom.lookup_addr(u32(0))) is inner
    assert aom[0] is inner and aom.lookup_addr(u32(1)) == 0
    aom[1] = inner
    assert len(aom) == 2
    del aom[0]
    assert aom.get(0) is None

    loose = create_map(T.BPF_MAP_TYPE_ARRAY_OF_MAPS, 4, 4, 2, inner=flagged)
    bigger = create_map(T.BPF_MAP_TYPE_ARRAY, 4, 4, 3, 1 << 12)
    loose[0] = bigger  # BPF_F_INNER_MAP lifts the max_entries match
    assert errno_of(loose.update, u32(1), u32(other.id)) == errno.EINVAL

    hom = create_map(T.BPF_MAP_TYPE_HASH_OF_MAPS, 4, 4, 1, inner=inner)
    hom.update(u32(0), u32(inner.id))
    assert errno_of(hom.update, u32(1), u32(inner.id)) == errno.E2BIG
    assert errno_of(hom.update, u32(0), u32(inner.id), BPF_NOEXIST) == errno.EEXIST
    assert hom.lookup(u32(0)) == u32(inner.id) and map_by_addr(hom.lookup_addr(u32(0))) is inner
    assert hom[0] is inner


def test_prog_array() -> None:
    pa = create_map(T.BPF_MAP_TYPE_PROG_ARRAY, 4, 4, 2)
    assert isinstance(pa, ProgArrayMap)
    assert pa.lookup(u32(0)) is None and pa.lookup(u32(5)) is None
    assert errno_of(pa.update, u32(0), u32(NOT_OPEN)) == errno.EBADF
    assert errno_of(pa.update, u32(0), u32(NOT_OPEN), BPF_NOEXIST) == errno.EINVAL
    assert errno_of(pa.update, u32(5), u32(NOT_OPEN)) == errno.E2BIG
    assert errno_of(pa.delete, u32(0)) == errno.ENOENT
    assert errno_of(pa.delete, u32(5)) == errno.E2BIG
    assert pa.get_next_key(u32(0)) == u32(1)
    progs = {7: ("prog seven", 77)}
    def resolve(fd: int) -> tuple[object, int]:
        if fd not in progs:
            raise MapError("update", errno.EBADF)
        return progs[fd]

    pa.resolve_fd = resolve
    pa.update(u32(1), u32(7))
    assert pa.lookup(u32(1)) == u32(77) and pa.prog_at(1) == "prog seven"
    assert pa.lookup_addr(u32(1)) == 0 and len(pa) == 1
    pa.delete(u32(1))
    assert pa.prog_at(1) is None


class _IntCodec:
    def encode_key(self, m: object, key: object) -> bytes:
        assert isinstance(key, int)
        return key.to_bytes(4, "little")

    def encode_value(self, m: object, value: object) -> bytes:
        assert isinstance(value, int)
        return value.to_bytes(8, "little")

    def decode_key(self, m: object, raw: bytes) -> object:
        return int.from_bytes(raw, "little")

    def decode_value(self, m: object, raw: bytes) -> object:
        return int.from_bytes(raw, "little")


def test_codec_plugs_in() -> None:
    h = create_map(T.BPF_MAP_TYPE_HASH, 4, 8, 8)
    h.codec = _IntCodec()
    h[3] = 30
    h[4] = 40
    assert h[3] == 30 and sorted(h) == [3, 4] and dict(h.items()) == {3: 30, 4: 40}
    p = create_map(T.BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 1, nr_cpus=2)
    p.codec = _IntCodec()
    p[0] = [1, 2]
    assert p[0] == [1, 2]
