"""pyxdp.maps against the running kernel: creation errnos and random operation sequences.

Every test here needs root and bpf(2) (``pytest.mark.kernel``). The same
random operations (hypothesis) go to a kernel map and to a pyxdp map; return
codes and looked-up values must be equal, and so must ``get_next_key`` for
arrays and LPM tries (pyxdp builds the kernel's trie node for node).

What is compared where the kernel's behaviour is not defined the same way:

* hash maps: the kernel iterates in the order of a randomly seeded hash, pyxdp
  in slot order, so only the *set* of keys is compared, and ``get_next_key``
  only for "is there a next key";
* LRU hash maps: the kernel evicts in batches, sometimes before the map is
  full (per-CPU free lists); pyxdp evicts exactly one oldest element when
  full. Results must be equal until the first time the two key sets differ;
  after that each side must only be consistent with its own contents (a
  present key has the value last written, a successful update leaves the key
  present, BPF_ANY always succeeds, delete succeeds iff the key is there)
  and keys present on both sides must have the same value. The test pins
  itself to one CPU so the kernel does not evict early because another CPU's
  free list holds the free nodes.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyxdp.errors import KernelError
from pyxdp.maps import Map, MapError, create_map
from pyxdp.uapi.bpf import BpfMapType as T
from pyxdp.uapi.bpf import MapFlag as F

from .test_map_create import CASES

pytestmark = pytest.mark.kernel

SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


def _kernel() -> Any:
    import pyxdp.kernel as k
    return k


def _kcall(fn: Callable[..., Any], *args: Any) -> tuple[int, Any]:
    try:
        return 0, fn(*args)
    except KernelError as e:
        return e.errno, None


def _ucall(fn: Callable[..., Any], *args: Any) -> tuple[int, Any]:
    try:
        return 0, fn(*args)
    except MapError as e:
        return e.errno, None


@contextmanager
def _one_cpu() -> Iterator[None]:
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@pytest.mark.parametrize(("label", "mtype", "k", "v", "n", "flags", "want"), CASES,
                         ids=[c[0] for c in CASES])
def test_creation_table_matches_kernel(label: str, mtype: int, k: int, v: int, n: int,
                                       flags: int, want: int) -> None:
    kern = _kernel()
    got, fd = _kcall(kern.map_create, mtype, k, v, n, flags)
    if fd is not None:
        fd.close()
    assert got == want, f"{label}: kernel says {errno.errorcode.get(got, got)}"


class Pair:
    """One map in the kernel and the same map in pyxdp."""

    def __init__(self, mtype: int, k: int, v: int, n: int, flags: int = 0) -> None:
        kern = _kernel()
        self.k = kern
        self.fd = kern.map_create(mtype, k, v, n, flags)
        self.u: Map = create_map(mtype, k, v, n, flags)
        self.key_size, self.value_size = k, v

    def close(self) -> None:
        self.fd.close()

    def update(self, key: bytes, value: bytes, flags: int) -> tuple[int, int]:
        ke, _ = _kcall(self.k.map_update_elem, self.fd, key, value, flags)
        ue, _ = _ucall(self.u.update, key if self.key_size else None, value, flags)
        return ke, ue

    def delete(self, key: bytes) -> tuple[int, int]:
        ke, _ = _kcall(self.k.map_delete_elem, self.fd, key)
        ue, _ = _ucall(self.u.delete, key if self.key_size else None)
        return ke, ue

    def lookup(self, key: bytes) -> tuple[tuple[int, Any], tuple[int, Any]]:
        kr = _kcall(self.k.map_lookup_elem, self.fd, key, self.value_size)
        ur = _ucall(self.u.lookup, key if self.key_size else None)
        return kr, ur

    def pop(self) -> tuple[tuple[int, Any], tuple[int, Any]]:
        kr = _kcall(self.k.map_lookup_and_delete_elem, self.fd, b"", self.value_size)
        ur = _ucall(self.u.lookup_and_delete, None)
        return kr, ur

    def next_key(self, key: bytes | None) -> tuple[tuple[int, Any], tuple[int, Any]]:
        kr = _kcall(self.k.map_get_next_key, self.fd, key, self.key_size)
        ur = _ucall(self.u.get_next_key, key)
        return kr, ur

    def kernel_items(self) -> dict[bytes, bytes]:
        out = {}
        for key in self.k.map_keys(self.fd, self.key_size):
            value = self.k.map_lookup_elem(self.fd, key, self.value_size)
            if value is not None:
                out[key] = value
        return out

    def user_items(self) -> dict[bytes, bytes]:
        return {k: v for k, v in self.u.items()}

    def kernel_key_list(self) -> list[bytes]:
        return list(self.k.map_keys(self.fd, self.key_size))


def _u32(x: int) -> bytes:
    return struct.pack("<I", x)


def _op(keys: st.SearchStrategy[bytes], value_size: int,
        flags: st.SearchStrategy[int]) -> st.SearchStrategy[tuple[Any, ...]]:
    values = st.binary(min_size=value_size, max_size=value_size)
    return st.one_of(
        st.tuples(st.just("update"), keys, values, flags),
        st.tuples(st.just("update"), keys, values, flags),
        st.tuples(st.just("delete"), keys),
        st.tuples(st.just("lookup"), keys),
        st.tuples(st.just("next"), st.one_of(st.none(), keys)),
    )


FLAGS = st.sampled_from([0, 0, 0, 1, 2, 3, 4])


@SETTINGS
@given(st.lists(_op(st.integers(0, 9).map(_u32), 8, FLAGS), min_size=50, max_size=300))
def test_array_ops_match_kernel(ops: list[tuple[Any, ...]]) -> None:
    p = Pair(T.BPF_MAP_TYPE_ARRAY, 4, 8, 7)
    try:
        for op in ops:
            if op[0] == "update":
                ke, ue = p.update(op[1], op[2], op[3])
                assert ke == ue, op
            elif op[0] == "delete":
                ke, ue = p.delete(op[1])
                assert ke == ue, op
            elif op[0] == "lookup":
                kr, ur = p.lookup(op[1])
                assert kr == ur, op
            else:
                kr, ur = p.next_key(op[1])
                assert kr == ur, op
        assert p.kernel_items() == p.user_items()
        assert p.kernel_key_list() == list(p.u.raw_keys())
    finally:
        p.close()


@SETTINGS
@given(st.lists(_op(st.integers(0, 13).map(_u32), 8, FLAGS), min_size=50, max_size=300))
def test_hash_ops_match_kernel(ops: list[tuple[Any, ...]]) -> None:
    p = Pair(T.BPF_MAP_TYPE_HASH, 4, 8, 8)
    try:
        for op in ops:
            if op[0] == "update":
                ke, ue = p.update(op[1], op[2], op[3])
                assert ke == ue, op
            elif op[0] == "delete":
                ke, ue = p.delete(op[1])
                assert ke == ue, op
            elif op[0] == "lookup":
                kr, ur = p.lookup(op[1])
                assert kr == ur, op
            else:
                # The order differs (seeded jhash vs FNV slots); whether a next
                # key exists does not when the map is empty or the key missing.
                (ke, kk), (ue, uk) = p.next_key(op[1])
                if op[1] is None or op[1] not in p.user_items():
                    assert (kk is None) == (uk is None), op
            assert set(p.kernel_key_list()) == set(p.u.raw_keys())
        assert p.kernel_items() == p.user_items()
    finally:
        p.close()


@SETTINGS
@given(st.lists(_op(st.integers(0, 15).map(_u32), 4, FLAGS), min_size=50, max_size=300))
def test_lru_hash_ops_match_kernel_where_defined(ops: list[tuple[Any, ...]]) -> None:
    with _one_cpu():
        p = Pair(T.BPF_MAP_TYPE_LRU_HASH, 4, 4, 8)
        try:
            _run_lru(p, ops)
        finally:
            p.close()


def _check_update(err: int, flags: int, present: bool, kernel: bool) -> None:
    """One side's update result, consistent with that side's own contents before it.

    The kernel's LRU update takes a free node first, which may evict the very
    key being updated: then BPF_NOEXIST succeeds and BPF_EXIST fails on a key
    that was present.
    """
    if flags == 3 or flags & 4:
        assert err == errno.EINVAL
    elif flags == 0:
        assert err == 0
    elif flags == 1:
        assert err == (errno.EEXIST if present else 0) or (kernel and present and err == 0)
    else:
        assert err == (0 if present else errno.ENOENT) or (
            kernel and present and err == errno.ENOENT)


def _run_lru(p: Pair, ops: list[tuple[Any, ...]]) -> None:
    diverged = False
    # What each side must hold: the last value successfully written to each
    # key it still has. Evictions may only remove keys from a model.
    models: list[dict[bytes, bytes]] = [{}, {}]
    for op in ops:
        before = [p.kernel_items(), p.user_items()]
        if op[0] == "update":
            key, value, flags = op[1], op[2], op[3]
            errs = p.update(key, value, flags)
            for side, err in enumerate(errs):
                _check_update(err, flags, key in before[side], side == 0)
                if err == 0:
                    models[side][key] = value
            if errs[0] != errs[1]:
                diverged = True
        elif op[0] == "delete":
            errs = p.delete(op[1])
            for side, err in enumerate(errs):
                assert err == (0 if op[1] in before[side] else errno.ENOENT)
                models[side].pop(op[1], None)
        elif op[0] == "lookup":
            (ke, kv), (ue, uv) = p.lookup(op[1])
            assert kv == before[0].get(op[1]) and uv == before[1].get(op[1])
        after = [p.kernel_items(), p.user_items()]
        for side in (0, 1):
            assert len(after[side]) <= 8
            for key, value in after[side].items():
                assert models[side].get(key) == value, (side, key)
            models[side] = {k: models[side][k] for k in after[side]}
        if not diverged:
            diverged = after[0] != after[1]
            # Until the first eviction that differs, the two are the same map.
            if not diverged and op[0] == "lookup":
                assert p.lookup(op[1])[0] == p.lookup(op[1])[1]


def _lpm_keys() -> st.SearchStrategy[bytes]:
    first = st.sampled_from([10, 11, 192])
    second = st.sampled_from([0, 1, 128, 129, 255])
    third = st.sampled_from([0, 7])
    plen = st.sampled_from([0, 1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33])
    return st.builds(lambda pl, a, b, c: struct.pack("<I", pl) + bytes([a, b, c, 1]),
                     plen, first, second, third)


@SETTINGS
@given(st.lists(_op(_lpm_keys(), 4, st.sampled_from([0, 0, 1, 2, 3])),
                min_size=50, max_size=300))
def test_lpm_trie_ops_match_kernel(ops: list[tuple[Any, ...]]) -> None:
    p = Pair(T.BPF_MAP_TYPE_LPM_TRIE, 8, 4, 12, F.BPF_F_NO_PREALLOC)
    try:
        for op in ops:
            if op[0] == "update":
                ke, ue = p.update(op[1], op[2], op[3])
                assert ke == ue, op
            elif op[0] == "delete":
                ke, ue = p.delete(op[1])
                assert ke == ue, op
            elif op[0] == "lookup":
                kr, ur = p.lookup(op[1])
                assert kr == ur, op
            else:
                kr, ur = p.next_key(op[1])
                assert kr == ur, op
        # The same trie: the same post-order walk, stored key bytes included.
        assert p.kernel_key_list() == list(p.u.raw_keys())
        assert p.kernel_items() == p.user_items()
    finally:
        p.close()


def _qs_ops() -> st.SearchStrategy[list[tuple[Any, ...]]]:
    op = st.one_of(
        st.tuples(st.just("push"), st.binary(min_size=4, max_size=4),
                  st.sampled_from([0, 0, 0, 2, 2, 1, 3, 4])),
        st.tuples(st.just("pop")),
        st.tuples(st.just("peek")),
    )
    return st.lists(op, min_size=50, max_size=300)


@pytest.mark.parametrize("mtype", [T.BPF_MAP_TYPE_QUEUE, T.BPF_MAP_TYPE_STACK],
                         ids=["queue", "stack"])
@SETTINGS
@given(ops=_qs_ops())
def test_queue_stack_ops_match_kernel(mtype: int, ops: list[tuple[Any, ...]]) -> None:
    p = Pair(mtype, 0, 4, 5)
    try:
        for op in ops:
            if op[0] == "push":
                ke, ue = p.update(b"", op[1], op[2])
                assert ke == ue, op
            elif op[0] == "pop":
                kr, ur = p.pop()
                assert kr == ur, op
            else:
                kr, ur = p.lookup(b"")
                assert kr == ur, op
    finally:
        p.close()


def test_percpu_array_values_match_kernel() -> None:
    kern = _kernel()
    p = Pair(T.BPF_MAP_TYPE_PERCPU_ARRAY, 4, 5, 3)
    try:
        size = p.u.user_value_size
        assert size == 8 * kern.possible_cpus()
        blob = bytes(range(size))
        kern.map_update_elem(p.fd, _u32(1), blob)
        p.u.update(_u32(1), blob)
        assert kern.map_lookup_elem(p.fd, _u32(1), size) == p.u.lookup(_u32(1))
    finally:
        p.close()
