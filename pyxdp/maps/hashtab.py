"""Hash maps, as ``kernel/bpf/hashtab.c``, in flat numpy storage a JIT can probe inline.

``BPF_MAP_TYPE_HASH``, ``PERCPU_HASH``, ``LRU_HASH``, ``LRU_PERCPU_HASH`` and
``HASH_OF_MAPS`` with ``htab_map_alloc_check`` / ``htab_map_alloc`` (E2BIG
for ``key_size + value_size >= KMALLOC_MAX_SIZE - 48``, for ``max_entries >
2**27`` (the bucket array would overflow u32) and for a per-CPU value above
32 KiB; ENOTSUPP (524) for an LRU map with ``BPF_F_NO_PREALLOC``;
``BPF_F_NO_COMMON_LRU`` rounds ``max_entries`` up to a multiple of the CPU
count) and the errnos of ``htab_map_update_elem``: EINVAL for unknown flags
or ``BPF_F_LOCK`` without a ``bpf_spin_lock``, EEXIST for ``BPF_NOEXIST`` on
a present key, ENOENT for ``BPF_EXIST`` on a missing one, E2BIG for a new
key when the map is full (LRU maps evict instead).

Storage layout (for native code; every array is numpy, C order):

* elements, preallocated like the kernel's ``htab_elem`` pool:
  ``key_data``: ``uint8[max_entries * key_stride]`` (``key_stride =
  round_up(key_size, 8)``), ``value_data``: ``uint8[max_entries * elem_size]``
  (``elem_size = round_up(value_size, 8)``; per-CPU maps: shape
  ``(nr_cpus, max_entries * elem_size)``, one region per CPU), ``stamp``:
  ``uint64[max_entries]`` (LRU last use), ``elem_slot``: ``int32`` slot of
  each element in the index, -1 when the element is free;
* the index, open addressing with linear probing: ``capacity`` = the next
  power of two >= ``2 * max_entries``; ``index``: ``int32[capacity]`` holding
  the element number, ``EMPTY`` (-1) or ``TOMBSTONE`` (-2); ``hashes``:
  ``uint64[capacity]``, the full hash of the slot's key;
* ``free``: ``int32`` stack of free elements (top at ``hdr[NFREE] - 1``);
  ``hdr``: ``uint64[4]`` = count, tombstones, nfree, LRU clock.

The hash is 64-bit FNV-1a over the ``key_size`` key bytes (offset basis
``0xcbf29ce484222325``, prime ``0x100000001b3``, ``h = (h ^ byte) * prime
mod 2**64``). Lookup: ``i = h & (capacity - 1)``; while ``index[i] != EMPTY``:
if ``index[i] >= 0`` and ``hashes[i] == h`` and the element's key bytes
equal the key, the value is at ``values + index[i] * elem_size``; else
``i = (i + 1) & (capacity - 1)``. A miss ends on an EMPTY slot (live +
tombstones stay below 3/4 of capacity: the index is rebuilt past that).
Values never move while their key is present, so a pointer a program holds
stays valid, as with the kernel's preallocated elements.

Order: ``get_next_key`` walks index slots in increasing order (the kernel
walks buckets of a hash seeded at random, so both orders are "arbitrary",
but pyxdp's is deterministic: the hash has no seed). A missing key restarts
at the first key, as in the kernel. Rebuilding the index (after many
deletes) may change the order.

LRU approximation: the kernel keeps active/inactive lists with reference
bits and per-CPU free lists, takes a free node *before* looking the key up
(so any update of a nearly full map may evict, even one that then fails,
and may evict the very key being updated: ``BPF_NOEXIST`` then succeeds on a
key that was present; measured), and evicts in batches (up to
``target_free`` nodes, sometimes before the map is full);
pyxdp stamps an element on every update and every program lookup and, when a
*new* key meets a full map, evicts exactly the one element with the oldest
stamp. User-space lookups do not stamp (the kernel's syscall lookup does not
set the reference bit either). So after the first eviction the set of keys
can differ from the kernel's; before it, they are the same.

Simplified: ``BPF_F_NO_PREALLOC`` behaves as preallocation (same errnos);
an update writes in place (the kernel swaps in a fresh element for non-per-CPU
maps, so a pointer taken before the update keeps seeing the old value there).
"""

from __future__ import annotations

import errno as _errno
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from pyxdp.backend import batch_count
from pyxdp.maps.arraymap import (
    InnerMapValues,
    describe_values,
    inner_meta_check,
    resolve_inner,
    update_prologue,
    write_value,
)
from pyxdp.maps.base import (
    BPF_ANY,
    BPF_EXIST,
    BPF_F_ACCESS_MASK,
    BPF_F_LOCK,
    BPF_NOEXIST,
    ENOTSUPP,
    KMALLOC_MAX_SIZE,
    MAX_STORAGE_BYTES,
    PCPU_MIN_UNIT_SIZE,
    Map,
    MapError,
    MapSpec,
    U8Array,
    access_ok,
    einval,
    round_up,
)
from pyxdp.uapi.bpf import BpfMapType, MapFlag
from pyxdp.vm.jit.abi import SLOW, MapInfo
from pyxdp.vm.jit.ir import INT_TYPES, METADATA, TBAA_MEM, Text, c64, ret_if
from pyxdp.vm.jit.natives import MapNative, map_desc, register_map

__all__ = ["EMPTY", "FNV_OFFSET", "FNV_PRIME", "TOMBSTONE", "HashMap", "HashOfMaps",
           "LruHashMap", "LruPercpuHashMap", "PercpuHashMap", "ProbeTable", "fnv1a64",
           "fnv1a64_many", "htab_alloc_check", "htab_find", "htab_find_u32_address",
           "htab_rebuild", "probe_ir"]

_T = BpfMapType
M64 = 0xFFFF_FFFF_FFFF_FFFF
FNV_OFFSET = 0xCBF2_9CE4_8422_2325
FNV_PRIME = 0x0000_0100_0000_01B3
EMPTY = -1
TOMBSTONE = -2
COUNT, TOMBS, NFREE, CLOCK = 0, 1, 2, 3

HTAB_CREATE_FLAG_MASK = int(MapFlag.BPF_F_NO_PREALLOC | MapFlag.BPF_F_NO_COMMON_LRU
                            | MapFlag.BPF_F_NUMA_NODE | MapFlag.BPF_F_ZERO_SEED) \
    | BPF_F_ACCESS_MASK
HTAB_ELEM_SIZE = 48  # sizeof(struct htab_elem) on x86-64, measured through the E2BIG limit


def fnv1a64(data: bytes) -> int:
    """64-bit FNV-1a of ``data``: the hash every pyxdp hash map uses."""
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & M64
    return h


def fnv1a64_many(keys: np.ndarray[Any, np.dtype[np.uint8]]) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """FNV-1a of each row of a ``(n, key_size)`` uint8 array, vectorized over rows."""
    h = np.full(keys.shape[0], FNV_OFFSET, np.uint64)
    prime = np.uint64(FNV_PRIME)
    for col in range(keys.shape[1]):
        h ^= keys[:, col].astype(np.uint64)
        h *= prime  # uint64 arrays wrap modulo 2**64
    return h


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def htab_alloc_check(spec: MapSpec) -> int:
    """``htab_map_alloc_check`` + the size checks of ``htab_map_alloc``; returns max_entries.

    The returned max_entries is the kernel's after ``BPF_F_NO_COMMON_LRU``
    rounding (each CPU's LRU list gets the same share).
    """
    op = "map_create"
    t = spec.map_type
    percpu = t in (_T.BPF_MAP_TYPE_PERCPU_HASH, _T.BPF_MAP_TYPE_LRU_PERCPU_HASH)
    lru = t in (_T.BPF_MAP_TYPE_LRU_HASH, _T.BPF_MAP_TYPE_LRU_PERCPU_HASH)
    flags = spec.map_flags
    percpu_lru = bool(flags & MapFlag.BPF_F_NO_COMMON_LRU)
    prealloc = not flags & MapFlag.BPF_F_NO_PREALLOC
    numa = bool(flags & MapFlag.BPF_F_NUMA_NODE)
    if flags & ~HTAB_CREATE_FLAG_MASK or not access_ok(flags):
        raise einval(op, f"hash: unknown map_flags {flags:#x}")
    if not lru and percpu_lru:
        raise einval(op, "BPF_F_NO_COMMON_LRU is for LRU maps")
    if lru and not prealloc:
        raise MapError(op, ENOTSUPP, "LRU maps are always preallocated")
    if numa and (percpu or percpu_lru):
        raise einval(op, "NUMA node with per-CPU storage")
    if spec.max_entries == 0 or spec.key_size == 0 or spec.value_size == 0:
        raise einval(op, "hash: key_size, value_size and max_entries must be > 0")
    if spec.key_size + spec.value_size >= KMALLOC_MAX_SIZE - HTAB_ELEM_SIZE:
        raise MapError(op, _errno.E2BIG, "key_size + value_size too large")
    if percpu and round_up(spec.value_size, 8) > PCPU_MIN_UNIT_SIZE:
        raise MapError(op, _errno.E2BIG, "per-CPU value above PCPU_MIN_UNIT_SIZE (32 KiB)")
    max_entries = spec.max_entries
    if percpu_lru:
        n = spec.nr_cpus
        rounded = -(-max_entries // n) * n
        max_entries = rounded if rounded <= 0xFFFF_FFFF else max_entries // n * n
    if max_entries > 1 << 31:
        raise MapError(op, _errno.E2BIG, "max_entries above 2**31")
    # n_buckets > U32_MAX / sizeof(struct bucket) (16) overflows the bucket array.
    if _next_pow2(max_entries) > 0xFFFF_FFFF // 16:
        raise MapError(op, _errno.E2BIG, "too many buckets")
    cpus = spec.nr_cpus if percpu else 1
    storage = max_entries * (round_up(spec.key_size, 8) + round_up(spec.value_size, 8) * cpus)
    if storage + 12 * _next_pow2(2 * max_entries) > MAX_STORAGE_BYTES:
        raise MapError(op, _errno.ENOMEM, "hash storage too large")
    return max_entries


def htab_find(index: np.ndarray[Any, np.dtype[np.int32]],
              hashes: np.ndarray[Any, np.dtype[np.uint64]], key_data: U8Array,
              key_stride: int, key: bytes, h: int) -> tuple[int, int]:
    """The probe (the reference path; :func:`probe_ir` is its native twin): (index slot
    holding ``key`` or -1, first reusable slot on the probe path). Elements' keys are
    ``key_stride`` apart in ``key_data``."""
    mask = len(index) - 1
    ks = len(key)
    i = h & mask
    reuse = -1
    while True:
        e = int(index[i])
        if e == EMPTY:
            return -1, (i if reuse < 0 else reuse)
        if e == TOMBSTONE:
            if reuse < 0:
                reuse = i
        elif int(hashes[i]) == h and key_data[e * key_stride:e * key_stride + ks].tobytes() \
                == key:
            return i, reuse
        i = (i + 1) & mask


def htab_rebuild(index: np.ndarray[Any, np.dtype[np.int32]],
                 hashes: np.ndarray[Any, np.dtype[np.uint64]]) -> list[tuple[int, int]]:
    """Re-insert every live element into the index, in place (drops the tombstones);
    returns each element's new slot as (element, slot)."""
    live = np.flatnonzero(index >= 0)
    elems = index[live].copy()
    hs = hashes[live].copy()
    index.fill(EMPTY)
    mask = len(index) - 1
    moved = []
    for e, h in zip(elems.tolist(), hs.tolist(), strict=True):
        i = h & mask
        while index[i] != EMPTY:
            i = (i + 1) & mask
        index[i] = e
        hashes[i] = h
        moved.append((e, i))
    return moved


class HashMap(Map):
    """``BPF_MAP_TYPE_HASH`` (and the base of the other hash types)."""

    map_type = int(_T.BPF_MAP_TYPE_HASH)
    lru = False

    def __init__(self, spec: MapSpec) -> None:
        max_entries = self._check(spec)
        if max_entries != spec.max_entries:
            spec = MapSpec(spec.map_type, spec.key_size, spec.value_size, max_entries,
                           spec.map_flags, name=spec.name, inner=spec.inner,
                           nr_cpus=spec.nr_cpus)
        super().__init__(spec)
        n = self.max_entries
        self.key_stride = round_up(self.key_size, 8)
        self.capacity = _next_pow2(max(2 * n, 2))
        self.key_data: U8Array = np.zeros(n * self.key_stride, np.uint8)
        size = n * self.elem_size
        self.value_data: U8Array = np.zeros((self.nr_cpus, size) if self.percpu else size,
                                        np.uint8)
        self.stamp = np.zeros(n, np.uint64)
        self.elem_slot = np.full(n, -1, np.int32)
        self.index = np.full(self.capacity, EMPTY, np.int32)
        self.hashes = np.zeros(self.capacity, np.uint64)
        # Pop order 0, 1, 2...: the top of the stack is the end of the array.
        self.free = np.arange(n - 1, -1, -1, dtype=np.int32)
        self.hdr = np.zeros(4, np.uint64)
        self.hdr[NFREE] = n
        self._make_regions(list(self.value_data) if self.percpu else [self.value_data])

    def _check(self, spec: MapSpec) -> int:
        return htab_alloc_check(spec)

    def _storage_bytes(self) -> int:
        return self.max_entries * round_up(self.value_size, 8)

    # -- the table ----------------------------------------------------------------------
    def _find(self, key: bytes, h: int) -> tuple[int, int]:
        """(slot holding key or -1, first reusable slot on the probe path)."""
        return htab_find(self.index, self.hashes, self.key_data, self.key_stride, key, h)

    def _elem_of(self, key: bytes) -> int:
        slot, _ = self._find(key, fnv1a64(key))
        return -1 if slot < 0 else int(self.index[slot])

    def _remove_slot(self, slot: int) -> None:
        e = int(self.index[slot])
        if self.has_fields:  # free_htab_elem -> check_and_free_fields
            self._free_fields(self.value_region().base + e * self.elem_size)
        self.index[slot] = TOMBSTONE
        self.elem_slot[e] = -1
        nfree = int(self.hdr[NFREE])
        self.free[nfree] = e
        self.hdr[NFREE] = nfree + 1
        self.hdr[COUNT] -= 1
        self.hdr[TOMBS] += 1

    def _rebuild(self) -> None:
        """Re-insert every live element into a fresh index (drops the tombstones)."""
        for e, i in htab_rebuild(self.index, self.hashes):
            self.elem_slot[e] = i
        self.hdr[TOMBS] = 0

    def _tick(self, e: int) -> None:
        clock = int(self.hdr[CLOCK]) + 1
        self.hdr[CLOCK] = clock
        self.stamp[e] = clock

    def _evict(self) -> None:
        """Drop the element with the oldest stamp (the approximate LRU)."""
        stamps = np.where(self.elem_slot >= 0, self.stamp, np.uint64(M64))
        victim = int(np.argmin(stamps))
        self._remove_slot(int(self.elem_slot[victim]))
        self._evicted(victim)

    def _evicted(self, e: int) -> None:
        """Hook for subclasses holding objects per element."""

    def _insert(self, key: bytes, h: int, reuse: int) -> int:
        """Take a free element for ``key`` at slot ``reuse``; returns the element."""
        if int(self.hdr[COUNT]) + int(self.hdr[TOMBS]) + 1 > self.capacity * 3 // 4:
            self._rebuild()
            _, reuse = self._find(key, h)
        nfree = int(self.hdr[NFREE]) - 1
        e = int(self.free[nfree])
        self.hdr[NFREE] = nfree
        if self.index[reuse] == TOMBSTONE:
            self.hdr[TOMBS] -= 1
        self.index[reuse] = e
        self.hashes[reuse] = h
        self.elem_slot[e] = reuse
        self.hdr[COUNT] += 1
        off = e * self.key_stride
        self.key_data[off:off + self.key_size] = np.frombuffer(key, np.uint8)
        return e

    def _write_value(self, e: int, data: bytes, cpu: int | None, new: bool) -> None:
        off, es, vs = e * self.elem_size, self.elem_size, self.value_size
        src = np.frombuffer(data, np.uint8)
        if not self.percpu:
            self.value_data[off:off + vs] = src
            if new:
                self.value_data[off + vs:off + es] = 0
        elif cpu is None:
            # pcpu_copy_value/pcpu_init_value copy whole 8-byte-rounded slots
            # from user space (copy_map_value_long), padding included.
            self.value_data[:, off:off + es] = src.reshape(self.nr_cpus, es)
        else:
            # A program's update of a new per-CPU element zeroes the other
            # CPUs' copies (pcpu_init_value with onallcpus == false).
            if new:
                self.value_data[:, off:off + es] = 0
            self.value_data[cpu, off:off + vs] = src

    # -- operations ---------------------------------------------------------------------
    def _read_value(self, e: int, cpu: int | None) -> bytes:
        off = e * self.elem_size
        if not self.percpu:
            return self._skip_fields(self.value_data[off:off + self.value_size].tobytes())
        if cpu is not None:
            return self.value_data[cpu, off:off + self.value_size].tobytes()
        return self.value_data[:, off:off + self.elem_size].tobytes()

    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        self._lookup_flags(flags)
        self._check_cpu(cpu, "lookup")
        e = self._elem_of(self._key(key, "lookup"))
        return None if e < 0 else self._read_value(e, cpu)

    def lookup_addr(self, key: bytes, cpu: int = 0) -> int:
        if not 0 <= cpu < self.nr_cpus:
            return 0
        e = self._elem_of(bytes(key))
        if e < 0:
            return 0
        if self.lru:
            self._tick(e)
        return self.value_region(cpu).base + e * self.elem_size

    def update(self, key: bytes | None, value: bytes, flags: int = BPF_ANY, *,
               cpu: int | None = None) -> None:
        self._check_cpu(cpu, "update")
        if self.percpu and cpu is None:
            # htab_percpu_map_update_elem: BPF_F_LOCK is an unknown flag there.
            if flags > BPF_EXIST:
                raise einval("update", f"unknown flags {flags:#x}")
        else:
            self._update_flags(flags)
        k = self._key(key, "update")
        data = self._value(value, cpu, "update")
        self._store(k, data, flags, cpu)

    def _store(self, k: bytes, data: bytes, flags: int, cpu: int | None) -> int:
        h = fnv1a64(k)
        slot, reuse = self._find(k, h)
        mode = flags & ~BPF_F_LOCK
        if slot >= 0 and mode == BPF_NOEXIST:
            raise MapError("update", _errno.EEXIST)
        if slot < 0 and mode == BPF_EXIST:
            raise MapError("update", _errno.ENOENT)
        if self.has_fields:  # the new element's fields are not initialised
            data = self._skip_fields(data)
        if slot >= 0:
            e = int(self.index[slot])
            # The old element (and its timer) is freed; the new one takes its place.
            self._free_fields(self.value_region().base + e * self.elem_size)
            self._write_value(e, data, cpu, new=False)
        else:
            if int(self.hdr[COUNT]) >= self.max_entries:
                if not self.lru:
                    raise MapError("update", _errno.E2BIG, "map is full")
                self._evict()
                _, reuse = self._find(k, h)
            e = self._insert(k, h, reuse)
            self._write_value(e, data, cpu, new=True)
        if self.lru:
            self._tick(e)
        return e

    def delete(self, key: bytes | None) -> None:
        k = self._key(key, "delete")
        slot, _ = self._find(k, fnv1a64(k))
        if slot < 0:
            raise MapError("delete", _errno.ENOENT)
        e = int(self.index[slot])
        self._remove_slot(slot)
        self._evicted(e)

    def lookup_and_delete(self, key: bytes | None, flags: int = 0) -> bytes | None:
        self._lookup_flags(flags, "lookup_and_delete")
        k = self._key(key, "lookup_and_delete")
        slot, _ = self._find(k, fnv1a64(k))
        if slot < 0:
            return None
        e = int(self.index[slot])
        value = self._read_value(e, None)
        self._remove_slot(slot)
        self._evicted(e)
        return value

    def key_at(self, value_addr: int) -> bytes:
        """The key of the element whose value is at ``value_addr`` (in the kernel the key
        sits right before the value: ``bpf_timer_cb`` finds it there)."""
        off = (value_addr - self.value_region().base) // self.elem_size * self.key_stride
        return self.key_data[off:off + self.key_size].tobytes()

    def _key_at_slot(self, slot: int) -> bytes:
        off = int(self.index[slot]) * self.key_stride
        return self.key_data[off:off + self.key_size].tobytes()

    def _first_live(self, start: int) -> int:
        """The first live slot at or after ``start`` (-1: none), scanned in chunks."""
        chunk = 4096
        while start < self.capacity:
            live = np.flatnonzero(self.index[start:start + chunk] >= 0)
            if live.size:
                return start + int(live[0])
            start += chunk
        return -1

    def get_next_key(self, key: bytes | None) -> bytes | None:
        start = 0
        if key is not None:
            k = self._key(key, "get_next_key")
            slot, _ = self._find(k, fnv1a64(k))
            start = 0 if slot < 0 else slot + 1
        nxt = self._first_live(start)
        return None if nxt < 0 else self._key_at_slot(nxt)

    # -- bulk (vectorized over the index) -----------------------------------------------
    def _live_elems(self) -> np.ndarray[Any, np.dtype[np.int32]]:
        return self.index[np.flatnonzero(self.index >= 0)]

    def raw_keys(self) -> Iterator[bytes]:
        elems = self._live_elems()
        rows = self.key_data.reshape(self.max_entries, self.key_stride)[elems, :self.key_size]
        return iter([r.tobytes() for r in rows])

    def lookup_batch(self, cursor: bytes | None = None, count: int = 0
                     ) -> tuple[list[bytes], list[bytes], bytes | None]:
        count = batch_count(count, "lookup_batch")
        start = 0
        if cursor is not None:
            k = self._key(cursor, "lookup_batch")
            slot, _ = self._find(k, fnv1a64(k))
            start = 0 if slot < 0 else slot + 1
        slots = start + np.flatnonzero(self.index[start:] >= 0)
        more = count and slots.size > count
        if more:
            slots = slots[:count]
        elems = self.index[slots]
        krows = self.key_data.reshape(self.max_entries, self.key_stride)[elems, :self.key_size]
        keys = [r.tobytes() for r in krows]
        if self.percpu:
            v = self.value_data.reshape(self.nr_cpus, self.max_entries, self.elem_size)
            vrows = np.ascontiguousarray(v[:, elems, :].transpose(1, 0, 2))
        else:
            vrows = self.value_data.reshape(self.max_entries, self.elem_size)[elems,
                                                                          :self.value_size]
        vals = [r.tobytes() for r in vrows]
        return keys, vals, (keys[-1] if more else None)

    def __len__(self) -> int:
        return int(self.hdr[COUNT])

    def clear(self) -> None:
        if self.async_offs:  # (the async model loads with a map holding such fields)
            from pyxdp.vm.bpf_async import ASYNC

            ASYNC.free_map(self)
        self.index.fill(EMPTY)
        self.elem_slot.fill(-1)
        self.free[:] = np.arange(self.max_entries - 1, -1, -1, dtype=np.int32)
        self.hdr[:] = (0, 0, self.max_entries, self.hdr[CLOCK])
        self._cleared()

    def _cleared(self) -> None:
        """Hook for subclasses holding objects per element."""

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d.update(capacity=self.capacity, count=len(self))
        return d


class PercpuHashMap(HashMap):
    """``BPF_MAP_TYPE_PERCPU_HASH``: one value per CPU and key."""

    map_type = int(_T.BPF_MAP_TYPE_PERCPU_HASH)
    percpu = True


class LruHashMap(HashMap):
    """``BPF_MAP_TYPE_LRU_HASH``: a full map evicts its least recently used key."""

    map_type = int(_T.BPF_MAP_TYPE_LRU_HASH)
    lru = True


class LruPercpuHashMap(HashMap):
    """``BPF_MAP_TYPE_LRU_PERCPU_HASH``."""

    map_type = int(_T.BPF_MAP_TYPE_LRU_PERCPU_HASH)
    lru = True
    percpu = True


class HashOfMaps(InnerMapValues, HashMap):
    """``BPF_MAP_TYPE_HASH_OF_MAPS``: values are maps matching :attr:`inner_meta`.

    The value bytes stored are the inner map's id (what a user-space lookup
    reports); a program lookup returns the inner map's handle.
    """

    map_type = int(_T.BPF_MAP_TYPE_HASH_OF_MAPS)
    is_map_in_map = True

    def _check(self, spec: MapSpec) -> int:
        if spec.value_size != 4:
            raise einval("map_create", "hash of maps: value_size must be 4")
        max_entries = htab_alloc_check(spec)
        self.inner_meta = inner_meta_check(spec)
        return max_entries

    def __init__(self, spec: MapSpec) -> None:
        super().__init__(spec)
        self.objects: dict[int, Map] = {}  # by element: what its used elements cost
        # Per element the inner map's handle: what a program's lookup returns, read
        # here and by the JIT's twin.
        self.handles = np.zeros(self.max_entries, np.uint64)

    def update(self, key: bytes | None, value: bytes, flags: int = BPF_ANY, *,
               cpu: int | None = None) -> None:
        self._update_flags(flags)
        k = self._key(key, "update")
        data = self._value(value, None, "update")
        inner = resolve_inner(self.inner_meta, int.from_bytes(data, "little"))
        e = self._store(k, inner.id.to_bytes(4, "little"), flags, None)
        self.objects[e] = inner
        self.handles[e] = inner.addr

    def lookup_addr(self, key: bytes, cpu: int = 0) -> int:
        """``htab_of_map_lookup_elem``: the inner map's handle, 0 when absent."""
        e = self._elem_of(bytes(key))
        return int(self.handles[e]) if e >= 0 else 0

    def _evicted(self, e: int) -> None:
        self.objects.pop(e, None)
        self.handles[e] = 0

    def _cleared(self) -> None:
        self.objects = {}
        self.handles.fill(0)


# --- native code: the JIT's twin of _find, lookup_addr and try_update --------------------
# HashMap is the reference path: native code probes and updates the same index,
# hashes, key_data, elem_slot, free list and header words (its descriptor points at
# them), with the same FNV-1a hash and linear probing, and leaves what it does not
# do (BPF_F_LOCK, LRU eviction, an index rebuild) to it. Registered with
# pyxdp.vm.jit.natives when this module is imported.

def _fnv(f: Text, key: str, size: int) -> str:
    h = c64(FNV_OFFSET)
    for k in range(size):
        b = f.ins(f"zext i8 {f.ins(f'load i8, ptr {f.gep(key, k)}, align 1{TBAA_MEM}')} to i64")
        h = f.ins(f"mul i64 {f.ins(f'xor i64 {h}, {b}')}, {c64(FNV_PRIME)}")
    return h


def _key_equal(f: Text, a: str, b: str, size: int) -> str:
    acc = "false"
    k = 0
    while k < size:
        w = 8 if size - k >= 8 else 4 if size - k >= 4 else 2 if size - k >= 2 else 1
        ty = INT_TYPES[w]
        x = f.ins(f"load {ty}, ptr {f.gep(a, k)}, align 1{TBAA_MEM}")
        y = f.ins(f"load {ty}, ptr {f.gep(b, k)}, align 1")
        acc = f.ins(f"or i1 {acc}, {f.ins(f'icmp ne {ty} {x}, {y}')}")
        k += w
    return f.ins(f"xor i1 {acc}, true")


def hash_probe(f: Text, m: MapInfo, key: str, tag: str) -> tuple[str, str, str]:
    """:func:`probe_ir` of the key at host pointer ``key`` (its FNV-1a hash computed) over
    a program's constant hash-indexed map (a hash map, a DEVMAP_HASH)."""
    return _probe(f, m, key, _fnv(f, key, m.key_size), tag)


def _probe(f: Text, m: MapInfo, key: str, h: str, tag: str) -> tuple[str, str, str]:
    """:func:`probe_ir` over a program's constant map (its descriptor's arrays)."""
    index, hashes, kd = (map_desc(f, m, n) for n in ("index", "hashes", "key_data"))
    return probe_ir(f, ProbeTable(index, hashes, kd, m.capacity - 1, m.capacity,
                                  m.max_entries, m.key_stride, m.key_size), key, h, tag)


@dataclass(frozen=True)
class ProbeTable:
    """A hash index as :func:`probe_ir` reads it: the arrays' pointers and the sizes, each
    an IR operand (a constant folded in, or a value known only at run time) - but
    ``key_size``, which unrolls the key comparison."""

    index: str
    hashes: str
    key_data: str
    mask: int | str
    capacity: int | str
    max_entries: int | str
    key_stride: int | str
    key_size: int


def probe_ir(f: Text, t: ProbeTable, key: str, h: str, tag: str) -> tuple[str, str, str]:
    """Linear probing as :func:`htab_find`: (slot or -1, first reusable slot, element or -1).

    Leaves through ``{tag}.slow`` (must exist) if the walk finds no EMPTY slot
    within ``capacity`` steps - a consistent index always has one."""
    index, hashes, kd = t.index, t.hashes, t.key_data
    i0 = f.ins(f"and i64 {h}, {t.mask}")
    pre = f.cur
    f.br(f"{tag}.probe")
    f.at(f"{tag}.probe")
    i, cnt, reuse = f.tmp(), f.tmp(), f.tmp()
    phi_at = len(f.lines)
    f.lines.append("")
    e = f.ins(f"sext i32 {f.at_index(index, i, 'i32', 4)} to i64")
    f.cbr(f.ins(f"icmp eq i64 {e}, -1"), f"{tag}.miss", f"{tag}.chk")
    f.at(f"{tag}.chk")
    tomb = f.ins(f"icmp eq i64 {e}, -2")
    first_tomb = f.ins(f"and i1 {tomb}, {f.ins(f'icmp slt i64 {reuse}, 0')}")
    reuse1 = f.ins(f"select i1 {first_tomb}, i64 {i}, i64 {reuse}")
    # (An element number past the end - only a map changed by another thread while
    # this runs could hold one - is never followed.)
    f.cbr(f.ins(f"icmp ult i64 {e}, {t.max_entries}"), f"{tag}.hcmp", f"{tag}.skip")
    f.at(f"{tag}.hcmp")
    hs = f.ins(f"load i64, ptr {f.gep(hashes, f.ins(f'shl i64 {i}, 3'))}, align 8")
    f.cbr(f.ins(f"icmp eq i64 {hs}, {h}"), f"{tag}.kcmp", f"{tag}.skip")
    f.at(f"{tag}.kcmp")
    kp = f.gep(kd, f.ins(f"mul i64 {e}, {t.key_stride}"))
    f.cbr(_key_equal(f, key, kp, t.key_size), f"{tag}.hit", f"{tag}.skip")
    f.at(f"{tag}.skip")
    inext = f.ins(f"and i64 {f.ins(f'add i64 {i}, 1')}, {t.mask}")
    cnt1 = f.ins(f"add i64 {cnt}, 1")
    f.cbr(f.ins(f"icmp ult i64 {cnt1}, {t.capacity}"), f"{tag}.probe", f"{tag}.slow")
    f.lines[phi_at] = (
        f"  {i} = phi i64 [ {i0}, %{pre} ], [ {inext}, %{tag}.skip ]\n"
        f"  {cnt} = phi i64 [ 0, %{pre} ], [ {cnt1}, %{tag}.skip ]\n"
        f"  {reuse} = phi i64 [ -1, %{pre} ], [ {reuse1}, %{tag}.skip ]")
    # The miss: the empty slot, or the first tombstone passed.
    f.at(f"{tag}.miss")
    free_slot = f.ins(f"select i1 {f.ins(f'icmp slt i64 {reuse}, 0')}, i64 {i}, i64 {reuse}")
    f.br(f"{tag}.join")
    f.at(f"{tag}.hit")
    f.br(f"{tag}.join")
    f.at(f"{tag}.join")
    slot = f.ins(f"phi i64 [ -1, %{tag}.miss ], [ {i}, %{tag}.hit ]")
    reuse_out = f.ins(f"phi i64 [ {free_slot}, %{tag}.miss ], [ {reuse}, %{tag}.hit ]")
    elem = f.ins(f"phi i64 [ -1, %{tag}.miss ], [ {e}, %{tag}.hit ]")
    return slot, reuse_out, elem


def _tick(f: Text, m: MapInfo, e: str) -> None:
    """HashMap._tick: the LRU clock."""
    hdr = map_desc(f, m, "hdr")
    clock = f.ins(f"add i64 {f.word(hdr, 3, 'i64', '')}, 1")
    f.set_word(hdr, 3, clock, "i64", "")
    f.do(f"store i64 {clock}, ptr {f.gep(map_desc(f, m, 'stamp'), f.ins(f'shl i64 {e}, 3'))}, "
         "align 8")


def _lookup_body(f: Text, m: MapInfo, cpu: str) -> None:
    """HashMap.lookup_addr(key, cpu): the value's fake address, 0, or SLOW."""
    ret_if(f, f.ins(f"icmp uge i64 {cpu}, {m.nr_cpus}"), 0)
    slot, _, e = hash_probe(f, m, "%key", "p")
    ret_if(f, f.ins(f"icmp slt i64 {slot}, 0"), 0)
    if m.lru:
        _tick(f, m, e)
    base = c64(m.value_base)
    if m.percpu:
        base = f.ins(f"add i64 {base}, {f.ins(f'mul i64 {cpu}, {m.cpu_stride}')}")
    eoff = f.ins(f"mul i64 {e}, {m.elem_size}")
    f.do(f"ret i64 {f.ins(f'add i64 {base}, {eoff}')}")
    f.at("p.slow")
    f.do(f"ret i64 {c64(SLOW)}")


def _lookup_fn(tag: str, m: MapInfo) -> str:
    """HashMap.lookup_addr for one map on the program's CPU."""
    f = Text()
    f.at("entry")
    _lookup_body(f, m, f.cget("%ctx", "cpu"))
    return f.text(f"define internal i64 @{tag}_lookup{m.slot}(ptr %ctx, ptr %key) nounwind")


def _lookup_cpu_fn(tag: str, m: MapInfo) -> str:
    """HashMap.lookup_addr for one map on CPU ``%cpu`` (bpf_map_lookup_percpu_elem)."""
    f = Text()
    f.at("entry")
    _lookup_body(f, m, "%cpu")
    return f.text(f"define internal i64 @{tag}_lookup_cpu{m.slot}(ptr %ctx, ptr %key, "
                  "i64 %cpu) nounwind")


def _update_fn(tag: str, m: MapInfo) -> str:
    """HashMap.try_update for a program on ``ctx.cpu``: 0, -errno, or SLOW (BPF_F_LOCK,
    LRU eviction, an index rebuild)."""
    f = Text()
    cpu, mode = update_prologue(f, m)
    h = _fnv(f, "%key", m.key_size)
    slot, reuse, e = _probe(f, m, "%key", h, "p")
    exists = f.ins(f"icmp sge i64 {slot}, 0")
    ret_if(f, f.ins(f"and i1 {exists}, {f.ins(f'icmp eq i64 {mode}, 1')}"), -_errno.EEXIST)
    ret_if(f, f.ins(f"and i1 {f.ins(f'xor i1 {exists}, true')}, "
                     f"{f.ins(f'icmp eq i64 {mode}, 2')}"), -_errno.ENOENT)
    f.cbr(exists, "old", "new")
    f.at("old")
    write_value(f, m, e, cpu, "%val", False)
    if m.lru:
        _tick(f, m, e)
    f.do("ret i64 0")
    f.at("new")
    hdr = map_desc(f, m, "hdr")
    count, tombs, nfree = (f.word(hdr, k, "i64", "") for k in range(3))
    full = f.ins(f"icmp uge i64 {count}, {m.max_entries}")
    ret_if(f, full, SLOW if m.lru else -_errno.E2BIG)
    tombs1 = f.ins(f"add i64 {tombs}, 1")
    grow = f.ins(f"icmp ugt i64 {f.ins(f'add i64 {count}, {tombs1}')}, {m.capacity * 3 // 4}")
    ret_if(f, grow, SLOW)
    bad = f.ins(f"or i1 {f.ins(f'icmp eq i64 {nfree}, 0')}, "
                f"{f.ins(f'icmp ugt i64 {nfree}, {m.max_entries}')}")
    ret_if(f, bad, SLOW)
    nfree1 = f.ins(f"sub i64 {nfree}, 1")
    ne = f.ins(f"sext i32 {f.at_index(map_desc(f, m, 'free'), nfree1, 'i32', 4)} to i64")
    ret_if(f, f.ins(f"icmp uge i64 {ne}, {m.max_entries}"), SLOW)
    f.set_word(hdr, 2, nfree1, "i64", "")
    index = map_desc(f, m, "index")
    old = f.ins(f"sext i32 {f.at_index(index, reuse, 'i32', 4)} to i64")
    was_tomb = f.ins(f"zext i1 {f.ins(f'icmp eq i64 {old}, -2')} to i64")
    f.set_word(hdr, 1, f.ins(f"sub i64 {tombs}, {was_tomb}"), "i64", "")
    f.put_index(index, reuse, f.ins(f"trunc i64 {ne} to i32"), "i32", 4)
    f.put_index(map_desc(f, m, "hashes"), reuse, h, "i64", 8)
    f.put_index(map_desc(f, m, "elem_slot"), ne, f.ins(f"trunc i64 {reuse} to i32"), "i32", 4)
    f.set_word(hdr, 0, f.ins(f"add i64 {count}, 1"), "i64", "")
    kdst = f.gep(map_desc(f, m, "key_data"), f.ins(f"mul i64 {ne}, {m.key_stride}"))
    f.memmove(kdst, "%key", m.key_size)
    write_value(f, m, ne, cpu, "%val", True)
    if m.lru:
        _tick(f, m, ne)
    f.do("ret i64 0")
    f.at("p.slow")
    f.do(f"ret i64 {c64(SLOW)}")
    return f.text(f"define internal i64 @{tag}_update{m.slot}(ptr %ctx, ptr %key, ptr %val, "
                  "i64 %flags) nounwind")


def _delete_fn(tag: str, m: MapInfo) -> str:
    """HashMap.try_delete (``_remove_slot``): 0, -ENOENT, or SLOW (a free list that
    cannot take the element: only a map changed meanwhile)."""
    f = Text()
    f.at("entry")
    slot, _, e = hash_probe(f, m, "%key", "p")
    ret_if(f, f.ins(f"icmp slt i64 {slot}, 0"), -_errno.ENOENT)
    hdr = map_desc(f, m, "hdr")
    count, tombs, nfree = (f.word(hdr, k, "i64", "") for k in (COUNT, TOMBS, NFREE))
    ret_if(f, f.ins(f"icmp uge i64 {nfree}, {m.max_entries}"), SLOW)
    # the index slot retired first (as _remove_slot), then the element freed
    f.put_index(map_desc(f, m, "index"), slot, "-2", "i32", 4)
    f.put_index(map_desc(f, m, "elem_slot"), e, "-1", "i32", 4)
    f.put_index(map_desc(f, m, "free"), nfree, f.ins(f"trunc i64 {e} to i32"), "i32", 4)
    f.set_word(hdr, NFREE, f.ins(f"add i64 {nfree}, 1"), "i64", "")
    f.set_word(hdr, COUNT, f.ins(f"sub i64 {count}, 1"), "i64", "")
    f.set_word(hdr, TOMBS, f.ins(f"add i64 {tombs}, 1"), "i64", "")
    f.do("ret i64 0")
    f.at("p.slow")
    f.do(f"ret i64 {c64(SLOW)}")
    return f.text(f"define internal i64 @{tag}_delete{m.slot}(ptr %ctx, ptr %key) nounwind")


HTAB_FIND_U32 = "pyxdp_htab_find_u32"


def find_u32_fn() -> str:
    """:func:`probe_ir` as a module of its own, for native code outside programs (the
    native poll loop's DEVMAP_HASH lookups): ``i64 @pyxdp_htab_find_u32(ptr index, ptr
    hashes, ptr key_data, i64 capacity, i64 max_entries, i64 key)``, a u32 key's
    element, -1 when absent, -2 when the walk found no EMPTY slot."""
    f = Text()
    f.at("entry")
    kp = f.ins("alloca i64, align 8")
    f.do(f"store i64 %key, ptr {kp}, align 8")
    h = _fnv(f, kp, 4)
    mask = f.ins("sub i64 %capacity, 1")
    _, _, e = probe_ir(f, ProbeTable("%index", "%hashes", "%keys", mask, "%capacity",
                                     "%max_entries", round_up(4, 8), 4), kp, h, "p")
    f.do(f"ret i64 {e}")
    f.at("p.slow")
    f.do("ret i64 -2")
    return f.text(f"define i64 @{HTAB_FIND_U32}(ptr %index, ptr %hashes, ptr %keys, "
                  "i64 %capacity, i64 %max_entries, i64 %key) nounwind") + METADATA


@functools.cache
def htab_find_u32_address() -> int:
    """Where :func:`find_u32_fn` is in machine code (compiled on first use)."""
    from pyxdp.vm.jit.engine import native_function
    return native_function(find_u32_fn(), HTAB_FIND_U32)


# Longer keys take the Python helper (native code unrolls the key).
MAX_NATIVE_KEY = 128


def _describe(m: Any) -> dict[str, int]:
    words = describe_values(m)
    for name in ("key_data", "index", "hashes", "stamp", "elem_slot", "free", "hdr"):
        words[name] = int(getattr(m, name).ctypes.data)
    return words


_HASH_NATIVE = MapNative("hash", (HashMap, PercpuHashMap, LruHashMap, LruPercpuHashMap),
                         _describe, max_key=MAX_NATIVE_KEY,
                         functions={"lookup": _lookup_fn, "lookup_cpu": _lookup_cpu_fn,
                                    "update": _update_fn, "delete": _delete_fn})
for _type in (BpfMapType.BPF_MAP_TYPE_HASH, BpfMapType.BPF_MAP_TYPE_PERCPU_HASH,
              BpfMapType.BPF_MAP_TYPE_LRU_HASH, BpfMapType.BPF_MAP_TYPE_LRU_PERCPU_HASH):
    register_map(_type, _HASH_NATIVE)


def _inner_lookup_fn(tag: str, m: MapInfo) -> str:
    """HashOfMaps.lookup_addr: the key's element's ``handles`` word, 0 when absent, or SLOW
    (no EMPTY index slot on the probe path)."""
    f = Text()
    f.at("entry")
    slot, _, e = hash_probe(f, m, "%key", "p")
    go = f.label("found")
    f.br(go)
    f.at("p.slow")
    f.do(f"ret i64 {c64(SLOW)}")
    f.at(go)
    ret_if(f, f.ins(f"icmp slt i64 {slot}, 0"), 0)
    f.do(f"ret i64 {f.at_index(map_desc(f, m, 'inner'), e, 'i64', 8)}")
    return f.text(f"define internal i64 @{tag}_lookup{m.slot}(ptr %ctx, ptr %key) nounwind")


def _describe_inner(m: Any) -> dict[str, int]:
    words = {name: int(getattr(m, name).ctypes.data)
             for name in ("key_data", "index", "hashes")}
    words["inner"] = int(m.handles.ctypes.data)
    return words


register_map(BpfMapType.BPF_MAP_TYPE_HASH_OF_MAPS, MapNative(
    "inner_hash", (HashOfMaps,), _describe_inner, max_key=MAX_NATIVE_KEY,
    functions={"lookup": _inner_lookup_fn}))
