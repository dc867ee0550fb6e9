"""Device maps, as ``kernel/bpf/devmap.c`` (``BPF_MAP_TYPE_DEVMAP``): storage and checks only.

A devmap slot holds a net device for ``bpf_redirect_map``; the datapath that
acts on it comes later. This module models what user space sees:

* creation (``dev_map_init_map``, EINVAL): ``key_size`` 4, ``value_size`` 4
  (``u32 ifindex``) or 8 (``struct bpf_devmap_val { u32 ifindex; union {
  int fd; u32 id; } bpf_prog; }``), ``max_entries`` > 0, flags among
  ``BPF_F_NUMA_NODE | BPF_F_RDONLY | BPF_F_WRONLY``; the kernel then adds
  ``BPF_F_RDONLY_PROG`` to ``map_flags`` (programs may look a devmap up but
  never write it), which :meth:`Map.describe` shows as the kernel's map info
  does (0x80);
* update (``__dev_map_update_elem``): EINVAL for flags above ``BPF_EXIST``,
  E2BIG past the end, EEXIST for ``BPF_NOEXIST`` (slots always "exist";
  ``BPF_EXIST`` on an empty slot is fine), ifindex 0 clears the slot unless a
  program fd > 0 is given (EINVAL), an unknown ifindex or a bad program fd is
  EINVAL; fd 0 or negative means "no program" (measured on 6.18: ``{0, 0}``
  and ``{lo, -5}`` are accepted, ``{0, 5}`` is not);
* lookup reports ``{ifindex, prog id}`` (ENOENT when empty); delete is EINVAL
  past the end and succeeds on an empty slot; get_next_key is array order.

Storage (numpy, for native code): ``entries`` ``uint32[max_entries, 2]`` =
ifindex, program id (0 = none); a slot is empty when its ifindex is 0. It is
also the program-visible region (read-only): a program lookup returns the
address of ``entries[i]``, like the kernel's pointer to ``dev->val``.

Which ifindexes and program fds exist is pluggable: :attr:`DevMap.ifindex_ok`
(default: the host's interfaces, ``socket.if_indextoname``) and
:attr:`DevMap.resolve_prog` (``fd -> prog id`` or None; default: no program
fd is valid). ``BPF_MAP_TYPE_DEVMAP_HASH`` (:class:`DevMapHash`) keys slots
by any u32 (usually the ifindex itself) with the kernel's bucket order for
get_next_key. Each entry with a program holds a reference on it (:class:`EntryProgs`,
the kernel's ``bpf_prog_get`` per entry): the program outlives its fd while an entry
names it and ends with the last entry's delete or replacement or the map's free.
Not modelled: device unregistration.
"""

from __future__ import annotations

import errno as _errno
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import numpy as np

from pyxdp.maps.arraymap import _ArrayOrder
from pyxdp.maps.base import (
    BPF_ANY,
    BPF_EXIST,
    BPF_NOEXIST,
    MAX_STORAGE_BYTES,
    Map,
    MapError,
    MapSpec,
    einval,
    hold_program,
    put_program,
)
from pyxdp.maps.hashtab import (
    EMPTY,
    TOMBSTONE,
    _next_pow2,
    fnv1a64,
    hash_probe,
    htab_find,
    htab_rebuild,
)
from pyxdp.uapi.bpf import BpfMapType, MapFlag
from pyxdp.vm.jit.abi import SLOW, MapInfo
from pyxdp.vm.jit.ir import Text, c64, ret_if
from pyxdp.vm.jit.natives import (
    MapNative,
    entries_value,
    map_desc,
    redirect_map_fn,
    redirect_with,
    register_map,
)

__all__ = ["DEVMAP_HASH_NO_SLOT", "DevMap", "DevMapHash", "EntryProgs", "host_ifindex_exists"]

# The end of a DevMapHash's ``walk`` (no entry slot there).
DEVMAP_HASH_NO_SLOT = 0xFFFF_FFFF
DEV_CREATE_FLAG_MASK = int(MapFlag.BPF_F_NUMA_NODE | MapFlag.BPF_F_RDONLY
                           | MapFlag.BPF_F_WRONLY)


def host_ifindex_exists(ifindex: int) -> bool:
    """True when this host has an interface with that index."""
    import socket  # only a map update with a host ifindex asks (not every backend import)

    try:
        socket.if_indextoname(ifindex)
    except OSError:
        return False
    return True


# DevMapHash's bytes per max_entries: entries 8, key_data 8, walk 4, and an index of
# twice the entries (int32 slot + uint64 hash).
_HASH_BYTES_PER_ENTRY = 8 + 8 + 4 + 2 * (4 + 8)


def dev_map_alloc_check(spec: MapSpec, kind: str) -> None:
    """``dev_map_init_map``: key 4, value 4 or 8, max_entries > 0, known flags."""
    if (spec.max_entries == 0 or spec.key_size != 4 or spec.value_size not in (4, 8)
            or spec.map_flags & ~DEV_CREATE_FLAG_MASK):
        raise einval("map_create", f"{kind}: key 4, value 4 or 8, max_entries > 0")
    if spec.map_type == BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH and spec.max_entries > 1 << 31:
        # roundup_pow_of_two wraps to 0 buckets (measured: 2^31 fine, 2^31 + 1 EINVAL)
        raise einval("map_create", f"{kind}: max_entries {spec.max_entries} rounds up to "
                     "2^32 buckets")
    if spec.max_entries * 8 > MAX_STORAGE_BYTES:
        raise MapError("map_create", _errno.ENOMEM, f"{kind} too large")


def dev_map_alloc_node(ifindex_ok: Callable[[int], bool],
                       resolve_prog: Callable[[int], int | None] | None,
                       ifindex: int, fd: int) -> int:
    """``__dev_map_alloc_node``: the device must exist, a program fd > 0 must resolve;
    returns the program id (0: none)."""
    if not ifindex_ok(ifindex):
        raise einval("update", f"no device with ifindex {ifindex}")
    if fd <= 0:
        return 0
    resolved = resolve_prog(fd) if resolve_prog is not None else None
    if resolved is None:
        raise einval("update", f"fd {fd} is not an XDP devmap program")
    return resolved


def _put_all(ids: Counter[int]) -> None:
    for prog_id, n in list(ids.items()):
        for _ in range(n):
            put_program(prog_id)
    ids.clear()


class EntryProgs:
    """The program references of a devmap's or cpumap's entries: one per entry naming a
    program (``__dev_map_alloc_node`` / ``__cpu_map_entry_alloc`` take it, the entry's
    free puts it), and the map's free puts what is left (``dev_map_free``)."""

    def __init__(self, owner: object) -> None:
        self.ids: Counter[int] = Counter()
        weakref.finalize(owner, _put_all, self.ids)

    def write(self, entries: np.ndarray, slot: int, first: int, prog_id: int) -> None:
        """``entries[slot] = (first, prog_id)``: the new program held before the entry
        names it, the one it named put after (0: none)."""
        old = int(entries[slot, 1])
        if prog_id:
            hold_program(prog_id)
            self.ids[prog_id] += 1
        entries[slot] = (first, prog_id)
        if old:
            put_program(old)
            self.ids[old] -= 1
            if not self.ids[old]:
                del self.ids[old]

    def clear(self, entries: np.ndarray) -> None:
        """Every entry emptied (``entries`` zeroed), their programs put."""
        entries.fill(0)
        _put_all(self.ids)


class _EntryArray(_ArrayOrder):
    """An array of ``(u32, u32)`` entries; slot empty when field 0 is 0."""
    # dev_map_ops and cpu_map_ops have no batch commands (ENOTSUPP, measured on 6.18)
    batch_ops: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, spec: MapSpec) -> None:
        super().__init__(spec)
        self.entries = np.zeros((self.max_entries, 2), np.uint32)
        self.progs = EntryProgs(self)
        # Writes of entries so far: what the datapath derives from them (the native
        # loop's cpumap table) is remade only after one.
        self.gen = 0

    def _storage_bytes(self) -> int:
        return self.max_entries * 8

    def _index(self, key: bytes | None, op: str) -> int:
        return int.from_bytes(self._key(key, op), "little")

    def _report(self, i: int) -> bytes:
        return bytes(self.entries[i].tobytes()[:self.value_size])

    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        self._lookup_flags(flags)
        i = self._index(key, "lookup")
        if i >= self.max_entries or not self.entries[i, 0]:
            return None
        return self._report(i)

    def delete(self, key: bytes | None) -> None:
        i = self._index(key, "delete")
        if i >= self.max_entries:
            raise einval("delete", f"index {i} >= max_entries")
        self.progs.write(self.entries, i, 0, 0)
        self.gen += 1

    def raw_keys(self) -> Iterator[bytes]:
        # The Python API lists the occupied slots (get_next_key walks all).
        return iter([i.tobytes() for i in np.flatnonzero(self.entries[:, 0]).astype("<u4")])

    def __len__(self) -> int:
        return int(np.count_nonzero(self.entries[:, 0]))

    def clear(self) -> None:
        self.progs.clear(self.entries)
        self.gen += 1


class DevMap(_EntryArray):
    """``BPF_MAP_TYPE_DEVMAP``: ifindex (+ program) per slot."""

    map_type = int(BpfMapType.BPF_MAP_TYPE_DEVMAP)

    def __init__(self, spec: MapSpec) -> None:
        dev_map_alloc_check(spec, "devmap")
        super().__init__(spec)
        # Lookups hand out a pointer to the entry: programs must not write it.
        self.map_flags |= int(MapFlag.BPF_F_RDONLY_PROG)
        self.ifindex_ok: Callable[[int], bool] = host_ifindex_exists
        self.resolve_prog: Callable[[int], int | None] | None = None
        self._make_regions([self.entries.reshape(-1).view(np.uint8)], writable=False)

    def update(self, key: bytes | None, value: bytes, flags: int = BPF_ANY, *,
               cpu: int | None = None) -> None:
        i = self._index(key, "update")
        data = self._value(value, None, "update")
        if flags > BPF_EXIST:
            raise einval("update", f"unknown flags {flags:#x}")
        if i >= self.max_entries:
            raise MapError("update", _errno.E2BIG, f"index {i} >= max_entries")
        if flags == BPF_NOEXIST:
            raise MapError("update", _errno.EEXIST, "devmap slots always exist")
        ifindex = int.from_bytes(data[:4], "little")
        fd = int.from_bytes(data[4:8], "little", signed=True) if len(data) == 8 else -1
        if not ifindex:
            if fd > 0:
                raise einval("update", "a program fd needs an ifindex")
            self.progs.write(self.entries, i, 0, 0)
            self.gen += 1
            return
        prog_id = dev_map_alloc_node(self.ifindex_ok, self.resolve_prog, ifindex, fd)
        self.progs.write(self.entries, i, ifindex, prog_id)
        self.gen += 1

    def lookup_addr(self, key: bytes, cpu: int = 0) -> int:
        i = int.from_bytes(key, "little")
        if i >= self.max_entries or not self.entries[i, 0]:
            return 0
        return self.value_region().base + 8 * i

    def ifindex_at(self, index: int) -> int:
        """The ifindex at ``index`` (0: empty or out of range), for ``bpf_redirect_map``."""
        return int(self.entries[index, 0]) if 0 <= index < self.max_entries else 0


class DevMapHash(Map):
    """``BPF_MAP_TYPE_DEVMAP_HASH`` (``dev_map_hash_*`` in devmap.c).

    Entries live in preallocated slots of ``entries`` (``uint32[max_entries, 2]``:
    ifindex, program id), the program-visible read-only region; ``buckets``
    mirror the kernel's ``roundup_pow_of_two(max_entries)`` hlists (newest
    first), which fixes the get_next_key order exactly. Which slot holds a key is
    a hash index of :mod:`pyxdp.maps.hashtab`'s layout (``index``, ``hashes``,
    ``key_data``: the slot is the element), probed by its one probe -
    :func:`~pyxdp.maps.hashtab.htab_find` here, its machine-code twin
    (:func:`~pyxdp.maps.hashtab.htab_find_u32_address`) in the native poll loop,
    over the same arrays in place. A writer publishes a new key's index slot after
    its entry and retires a key's index slot before its entry. ``walk`` holds the
    entry slots in the order the kernel walks the buckets (a broadcast's order,
    ``dev_map_enqueue_multi``), :data:`DEVMAP_HASH_NO_SLOT` after the last.
    """
    # dev_map_hash_ops has no batch commands (ENOTSUPP, measured on 6.18)
    batch_ops: ClassVar[frozenset[str]] = frozenset()

    map_type = int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH)

    def __init__(self, spec: MapSpec) -> None:
        dev_map_alloc_check(spec, "devmap_hash")
        if spec.max_entries * _HASH_BYTES_PER_ENTRY > MAX_STORAGE_BYTES:
            # pyxdp's own tables (their index filled at creation) past the sanity cap:
            # ENOMEM, not tens of GiB written before a numpy MemoryError or the OOM killer
            raise MapError("map_create", _errno.ENOMEM, f"devmap_hash of {spec.max_entries} "
                           "entries: too large")
        super().__init__(spec)
        self.map_flags |= int(MapFlag.BPF_F_RDONLY_PROG)
        self.entries = np.zeros((self.max_entries, 2), np.uint32)
        self.progs = EntryProgs(self)
        self.n_buckets = 1 << (self.max_entries - 1).bit_length()
        # the non-empty buckets only, and the entry slots given back (slots past
        # _unused were never taken): memory follows the entries, not max_entries
        self.buckets: dict[int, list[int]] = {}
        self._free: list[int] = []
        self._unused = 0
        self.key_stride = 8
        self.capacity = _next_pow2(2 * self.max_entries)  # as HashMap's index
        self.key_data = np.zeros(self.max_entries * self.key_stride, np.uint8)
        self.index = np.full(self.capacity, EMPTY, np.int32)
        self.hashes = np.zeros(self.capacity, np.uint64)
        self._count = 0
        self._tombs = 0
        self.walk = np.full(self.max_entries, DEVMAP_HASH_NO_SLOT, np.uint32)
        self._bucket_len = np.zeros(self.n_buckets, np.int64)
        # Writes so far: what the datapath derives from the map is remade after one.
        self.gen = 0
        self.ifindex_ok: Callable[[int], bool] = host_ifindex_exists
        self.resolve_prog: Callable[[int], int | None] | None = None
        self._make_regions([self.entries.reshape(-1).view(np.uint8)], writable=False)

    def _storage_bytes(self) -> int:
        return self.max_entries * 8

    def _idx(self, key: bytes | None, op: str) -> int:
        return int.from_bytes(self._key(key, op), "little")

    def _find(self, idx: int) -> tuple[int, int]:
        """(index slot of key ``idx`` or -1, first reusable index slot)."""
        key = idx.to_bytes(4, "little")
        return htab_find(self.index, self.hashes, self.key_data, self.key_stride, key,
                         fnv1a64(key))

    def slot_of(self, idx: int) -> int | None:
        """The entry slot holding key ``idx`` (None: absent)."""
        if not 0 <= idx <= 0xFFFF_FFFF:
            return None
        i, _ = self._find(idx)
        return None if i < 0 else int(self.index[i])

    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        self._lookup_flags(flags)
        slot = self.slot_of(self._idx(key, "lookup"))
        if slot is None:
            return None
        return bytes(self.entries[slot].tobytes()[:self.value_size])

    def update(self, key: bytes | None, value: bytes, flags: int = BPF_ANY, *,
               cpu: int | None = None) -> None:
        idx = self._idx(key, "update")
        data = self._value(value, None, "update")
        ifindex = int.from_bytes(data[:4], "little")
        fd = int.from_bytes(data[4:8], "little", signed=True) if len(data) == 8 else -1
        if flags > BPF_EXIST or not ifindex:
            raise einval("update", "flags above BPF_EXIST or ifindex 0")
        old = self.slot_of(idx)
        if old is not None and flags == BPF_NOEXIST:
            raise MapError("update", _errno.EEXIST, f"key {idx} exists")
        prog_id = dev_map_alloc_node(self.ifindex_ok, self.resolve_prog, ifindex, fd)
        bucket = self.buckets.setdefault(idx & (self.n_buckets - 1), [])
        self.gen += 1
        if old is not None:  # the new node replaces the old one at the head of the bucket
            self.progs.write(self.entries, old, ifindex, prog_id)
            bucket.remove(idx)
            bucket.insert(0, idx)
            self._walk_remove(idx, old)
            self._walk_add(idx, old)
            return
        if self._free:
            slot = self._free.pop()
        elif self._unused < self.max_entries:
            slot, self._unused = self._unused, self._unused + 1
        else:
            raise MapError("update", _errno.E2BIG, "devmap_hash is full")
        self.progs.write(self.entries, slot, ifindex, prog_id)
        self._index_add(idx, slot)
        bucket.insert(0, idx)
        self._walk_add(idx, slot)

    def _walk_add(self, idx: int, slot: int) -> None:
        """Entry ``slot`` (key ``idx``) at the head of its bucket in ``walk``."""
        b = idx & (self.n_buckets - 1)
        pos = int(self._bucket_len[:b].sum())
        n = int(self._bucket_len.sum())
        self.walk[pos + 1:n + 1] = self.walk[pos:n].copy()
        self.walk[pos] = slot
        self._bucket_len[b] += 1

    def _walk_remove(self, idx: int, slot: int) -> None:
        """Entry ``slot`` (key ``idx``) out of ``walk``."""
        b = idx & (self.n_buckets - 1)
        start = int(self._bucket_len[:b].sum())
        n = int(self._bucket_len.sum())
        pos = start + int(np.flatnonzero(self.walk[start:start + self._bucket_len[b]]
                                         == slot)[0])
        self.walk[pos:n - 1] = self.walk[pos + 1:n].copy()
        self.walk[n - 1] = DEVMAP_HASH_NO_SLOT
        self._bucket_len[b] -= 1

    def _index_add(self, idx: int, slot: int) -> None:
        """Key ``idx`` at entry ``slot`` into the index (rebuilt first past 3/4 full, as
        HashMap's), its key and hash before the index slot that publishes them."""
        if self._count + self._tombs + 1 > self.capacity * 3 // 4:
            htab_rebuild(self.index, self.hashes)
            self._tombs = 0
        key = idx.to_bytes(4, "little")
        _, reuse = self._find(idx)
        off = slot * self.key_stride
        self.key_data[off:off + 4] = np.frombuffer(key, np.uint8)
        self.hashes[reuse] = fnv1a64(key)
        if self.index[reuse] == TOMBSTONE:
            self._tombs -= 1
        self.index[reuse] = slot
        self._count += 1

    def delete(self, key: bytes | None) -> None:
        idx = self._idx(key, "delete")
        i, _ = self._find(idx)
        if i < 0:
            raise MapError("delete", _errno.ENOENT, f"no key {idx}")
        slot = int(self.index[i])
        self.gen += 1
        self.index[i] = TOMBSTONE
        self._count -= 1
        self._tombs += 1
        b = idx & (self.n_buckets - 1)
        self.buckets[b].remove(idx)
        if not self.buckets[b]:
            del self.buckets[b]
        self._walk_remove(idx, slot)
        self.progs.write(self.entries, slot, 0, 0)
        self._free.append(slot)

    def get_next_key(self, key: bytes | None) -> bytes | None:
        start = 0
        if key is not None:
            idx = self._idx(key, "get_next_key")
            if self.slot_of(idx) is not None:
                bucket = self.buckets[idx & (self.n_buckets - 1)]
                pos = bucket.index(idx)
                if pos + 1 < len(bucket):
                    return bucket[pos + 1].to_bytes(4, "little")
                start = (idx & (self.n_buckets - 1)) + 1
        later = [b for b, keys in self.buckets.items() if keys and b >= start]
        return self.buckets[min(later)][0].to_bytes(4, "little") if later else None

    def lookup_addr(self, key: bytes, cpu: int = 0) -> int:
        slot = self.slot_of(int.from_bytes(key, "little"))
        return 0 if slot is None else self.value_region().base + 8 * slot

    def ifindex_at(self, index: int) -> int:
        """The ifindex stored under key ``index`` (0: none), for ``bpf_redirect_map``."""
        slot = self.slot_of(index)
        return 0 if slot is None else int(self.entries[slot, 0])

    def raw_keys(self) -> Iterator[bytes]:
        key = self.get_next_key(None)
        while key is not None:
            yield key
            key = self.get_next_key(key)

    def __len__(self) -> int:
        return self._count

    def clear(self) -> None:
        for key in list(self.raw_keys()):
            self.delete(key)


# --- native code: bpf_redirect_map reads entries[key][0] (0: no target) ----------------
# The Python path (pyxdp.net.filter's redirect_map over ifindex_at/qsize_at/socket_at,
# pyxdp.vm.helpers' map_lookup_elem over lookup_addr) is the reference; native code reads
# the same ``entries`` array in place, and a DEVMAP_HASH's key through the same hash index
# (pyxdp.maps.hashtab's probe).

def describe_entries(m: Any) -> dict[str, int]:
    """The native descriptor word of a redirect map: its ``entries`` table."""
    return {"entries": int(m.entries.ctypes.data)}


def entries_native(cls: type) -> MapNative:
    """Native bpf_redirect_map for the exact class ``cls`` (an ``entries`` table)."""
    return MapNative("entries", (cls,), describe_entries, functions={"redirect": redirect_map_fn})


def _devmap_lookup_fn(tag: str, m: MapInfo) -> str:
    """DevMap.lookup_addr: ``entries[key]``'s fake address, 0 past the end or empty."""
    f = Text()
    f.at("entry")
    key = f.ins("zext i32 " + f.ins("load i32, ptr %key, align 1") + " to i64")
    ifindex = entries_value(f, m, key)
    ret_if(f, f.ins(f"icmp eq i64 {ifindex}, 0"), 0)
    off = f.ins(f"shl i64 {key}, 3")
    f.do(f"ret i64 {f.ins(f'add i64 {c64(m.value_base)}, {off}')}")
    return f.text(f"define internal i64 @{tag}_lookup{m.slot}(ptr %ctx, ptr %key) nounwind")


def _devhash_slot(f: Text, m: MapInfo, key: str) -> str:
    """DevMapHash.slot_of over the map's hash index: the entry slot, or -1 (absent);
    leaves through block ``slow`` when the probe finds no EMPTY index slot."""
    slot, _, e = hash_probe(f, m, key, "p")
    go = f.label("found")
    f.br(go)
    f.at("p.slow")
    f.do(f"ret i64 {c64(SLOW)}")
    f.at(go)
    return f.ins(f"select i1 {f.ins(f'icmp slt i64 {slot}, 0')}, i64 -1, i64 {e}")


def _devhash_lookup_fn(tag: str, m: MapInfo) -> str:
    """DevMapHash.lookup_addr: the key's entry's fake address, 0 when absent, or SLOW."""
    f = Text()
    f.at("entry")
    e = _devhash_slot(f, m, "%key")
    ret_if(f, f.ins(f"icmp slt i64 {e}, 0"), 0)
    off = f.ins(f"shl i64 {e}, 3")
    f.do(f"ret i64 {f.ins(f'add i64 {c64(m.value_base)}, {off}')}")
    return f.text(f"define internal i64 @{tag}_lookup{m.slot}(ptr %ctx, ptr %key) nounwind")


def _devhash_value(f: Text, m: MapInfo, key: str) -> str:
    """DevMapHash.ifindex_at: the ifindex stored under ``key`` (0: none)."""
    kp = f.ins("alloca i32, align 4")
    f.do(f"store i32 {f.ins(f'trunc i64 {key} to i32')}, ptr {kp}, align 4")
    e = _devhash_slot(f, m, kp)
    inside, join = f.label("in"), f.label("v")
    before = f.cur
    f.cbr(f.ins(f"icmp sge i64 {e}, 0"), inside, join)
    f.at(inside)
    v0 = f.ins(f"zext i32 {f.at_index(map_desc(f, m, 'entries'), e, 'i32', 8)} to i64")
    last = f.cur
    f.br(join)
    f.at(join)
    return f.ins(f"phi i64 [ 0, %{before} ], [ {v0}, %{last} ]")


def _devhash_redirect_fn(tag: str, m: MapInfo) -> str:
    return redirect_with(tag, m, _devhash_value)


def _describe_devhash(m: Any) -> dict[str, int]:
    return {name: int(getattr(m, name).ctypes.data)
            for name in ("entries", "index", "hashes", "key_data")}


register_map(BpfMapType.BPF_MAP_TYPE_DEVMAP, MapNative(
    "entries", (DevMap,), describe_entries,
    functions={"redirect": redirect_map_fn, "lookup": _devmap_lookup_fn}))
register_map(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH, MapNative(
    "devhash", (DevMapHash,), _describe_devhash,
    functions={"redirect": _devhash_redirect_fn, "lookup": _devhash_lookup_fn}))
