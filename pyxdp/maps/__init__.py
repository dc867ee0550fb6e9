"""User-space BPF maps with the kernel's semantics, in flat numpy storage.

:func:`create_map` validates its parameters as the kernel's
``*_map_alloc_check`` does and returns a :class:`~pyxdp.maps.base.Map`
subclass, one module per kernel file modelled:

====================== ==================================== =========================
module                 kernel file                          map types
====================== ==================================== =========================
``arraymap``           kernel/bpf/arraymap.c                array, percpu_array,
                                                            prog_array, array_of_maps
``hashtab``            kernel/bpf/hashtab.c                 hash, percpu_hash,
                                                            lru_hash, lru_percpu_hash,
                                                            hash_of_maps
``lpm_trie``           kernel/bpf/lpm_trie.c                lpm_trie
``queue_stack_maps``   kernel/bpf/queue_stack_maps.c        queue, stack
``bloom_filter``       kernel/bpf/bloom_filter.c            bloom_filter
``ringbuf``            kernel/bpf/ringbuf.c                 ringbuf
``perf_event_array``   kernel/bpf/arraymap.c (perf part)    perf_event_array
``devmap``             kernel/bpf/devmap.c                  devmap
``cpumap``             kernel/bpf/cpumap.c                  cpumap
``xskmap``             net/xdp/xskmap.c                     xskmap
``sock_map``           net/core/sock_map.c                  sockmap, sockhash
``reuseport_array``    kernel/bpf/reuseport_array.c         reuseport_sockarray
``bpf_local_storage``  kernel/bpf/bpf_local_storage.c       sk, task, inode, cgrp
                                                            storage
====================== ==================================== =========================

The socket maps hold the sockets of :mod:`pyxdp.net.inet_hashtables`. The
last two hold kernel objects (reuseport sockets, tasks, inodes, cgroups)
pyxdp does not model: they are created with the kernel's checks, and every
operation on them raises :class:`~pyxdp.errors.NotSupportedError`
(:class:`~pyxdp.maps.sock_map.KernelObjectMap`).

Errors are :class:`MapError` with the kernel's ``errno``. Types the kernel
has but pyxdp does not model raise :class:`~pyxdp.errors.NotSupportedError`.
"""

from __future__ import annotations

import errno as _errno

from pyxdp.errors import NotSupportedError
from pyxdp.maps.arraymap import ArrayMap, ArrayOfMaps, PercpuArrayMap, ProgArrayMap
from pyxdp.maps.base import (
    BPF_ANY,
    BPF_EXIST,
    BPF_F_LOCK,
    BPF_NOEXIST,
    ENOTSUPP,
    Codec,
    Map,
    MapError,
    MapSpec,
    RawCodec,
    check_common,
    default_nr_cpus,
    map_by_addr,
    map_by_id,
)
from pyxdp.maps.bloom_filter import BloomFilter
from pyxdp.maps.bpf_local_storage import CgrpStorage, InodeStorage, SkStorage, TaskStorage
from pyxdp.maps.cpumap import CpuMap
from pyxdp.maps.devmap import DevMap, DevMapHash
from pyxdp.maps.hashtab import (
    HashMap,
    HashOfMaps,
    LruHashMap,
    LruPercpuHashMap,
    PercpuHashMap,
    fnv1a64,
)
from pyxdp.maps.lpm_trie import LpmTrie, lpm_key
from pyxdp.maps.perf_event_array import PerfBuffer, PerfEventArray
from pyxdp.maps.queue_stack_maps import QueueMap, StackMap
from pyxdp.maps.reuseport_array import ReuseportArray
from pyxdp.maps.ringbuf import RingBuf, RingBuffer
from pyxdp.maps.sock_map import KernelObjectMap, SockHash, SockMap
from pyxdp.maps.xskmap import XskMap
from pyxdp.uapi.bpf import BpfMapType

__all__ = [
    "BPF_ANY", "BPF_EXIST", "BPF_F_LOCK", "BPF_NOEXIST", "ENOTSUPP", "MAP_CLASSES",
    "ArrayMap", "ArrayOfMaps", "BloomFilter", "CgrpStorage", "Codec", "InodeStorage",
    "KernelObjectMap",
    "ReuseportArray", "SkStorage", "SockHash", "SockMap", "TaskStorage", "CpuMap", "DevMap",
    "DevMapHash", "HashMap", "HashOfMaps",
    "LpmTrie", "LruHashMap", "LruPercpuHashMap", "Map", "MapError", "MapSpec",
    "PercpuArrayMap", "PercpuHashMap", "PerfBuffer", "PerfEventArray", "ProgArrayMap",
    "QueueMap", "RawCodec", "RingBuf", "RingBuffer", "StackMap", "XskMap", "create_map",
    "create_map_from_spec", "default_nr_cpus", "fnv1a64", "lpm_key", "map_by_addr",
    "map_by_id",
]

MAP_CLASSES: dict[int, type[Map]] = {
    cls.map_type: cls
    for cls in (ArrayMap, PercpuArrayMap, ProgArrayMap, ArrayOfMaps, HashMap, PercpuHashMap,
                LruHashMap, LruPercpuHashMap, HashOfMaps, LpmTrie, QueueMap, StackMap,
                RingBuf, PerfEventArray, DevMap, DevMapHash, CpuMap, XskMap, SockMap, SockHash,
                ReuseportArray, SkStorage, TaskStorage, InodeStorage, CgrpStorage, BloomFilter)
}


def create_map_from_spec(spec: MapSpec) -> Map:
    """The map described by ``spec``, after the kernel's creation checks."""
    try:
        BpfMapType(spec.map_type)
    except ValueError:
        raise MapError("map_create", _errno.EINVAL, f"unknown map type {spec.map_type}") \
            from None
    check_common(spec)
    cls = MAP_CLASSES.get(spec.map_type)
    if cls is None:
        raise NotSupportedError(
            f"map type {BpfMapType(spec.map_type).name} is not modelled by pyxdp.maps")
    try:
        return cls(spec)
    except MemoryError:  # numpy could not have the storage: the kernel's allocation fails
        raise MapError("map_create", _errno.ENOMEM,
                       f"{BpfMapType(spec.map_type).name} of {spec.max_entries} entries: "
                       "no memory for its storage") from None


def create_map(map_type: int, key_size: int, value_size: int, max_entries: int,
               map_flags: int = 0, *, name: str = "", inner: Map | None = None,
               nr_cpus: int | None = None, map_extra: int = 0) -> Map:
    """BPF_MAP_CREATE in user space.

    ``inner`` is the template of a map-in-map (the kernel's ``inner_map_fd``);
    ``nr_cpus`` sizes per-CPU storage (default: the possible CPUs of this host);
    ``map_extra`` is a bloom filter's number of hash functions.
    """
    return create_map_from_spec(MapSpec(map_type, key_size, value_size, max_entries,
                                        map_flags, name=name, inner=inner, nr_cpus=nr_cpus,
                                        map_extra=map_extra))
