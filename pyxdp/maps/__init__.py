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
import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pyxdp.errors import NotSupportedError
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
from pyxdp.uapi.bpf import BpfMapType

if TYPE_CHECKING:
    from pyxdp.maps.arraymap import ArrayMap, ArrayOfMaps, PercpuArrayMap, ProgArrayMap
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
    "map_by_id", "map_class",
]

# Each map type's module (and class): a module, with its native twins, loads with the
# first map of one of its types (or the first use of one of its names below).
_T = BpfMapType
_MODULES: dict[str, tuple[tuple[str, int | None], ...]] = {
    "arraymap": (("ArrayMap", _T.BPF_MAP_TYPE_ARRAY),
                 ("PercpuArrayMap", _T.BPF_MAP_TYPE_PERCPU_ARRAY),
                 ("ProgArrayMap", _T.BPF_MAP_TYPE_PROG_ARRAY),
                 ("ArrayOfMaps", _T.BPF_MAP_TYPE_ARRAY_OF_MAPS)),
    "hashtab": (("HashMap", _T.BPF_MAP_TYPE_HASH), ("PercpuHashMap", _T.BPF_MAP_TYPE_PERCPU_HASH),
                ("LruHashMap", _T.BPF_MAP_TYPE_LRU_HASH),
                ("LruPercpuHashMap", _T.BPF_MAP_TYPE_LRU_PERCPU_HASH),
                ("HashOfMaps", _T.BPF_MAP_TYPE_HASH_OF_MAPS), ("fnv1a64", None)),
    "lpm_trie": (("LpmTrie", _T.BPF_MAP_TYPE_LPM_TRIE), ("lpm_key", None)),
    "queue_stack_maps": (("QueueMap", _T.BPF_MAP_TYPE_QUEUE),
                         ("StackMap", _T.BPF_MAP_TYPE_STACK)),
    "ringbuf": (("RingBuf", _T.BPF_MAP_TYPE_RINGBUF), ("RingBuffer", None)),
    "perf_event_array": (("PerfEventArray", _T.BPF_MAP_TYPE_PERF_EVENT_ARRAY),
                         ("PerfBuffer", None)),
    "devmap": (("DevMap", _T.BPF_MAP_TYPE_DEVMAP), ("DevMapHash", _T.BPF_MAP_TYPE_DEVMAP_HASH)),
    "cpumap": (("CpuMap", _T.BPF_MAP_TYPE_CPUMAP),),
    "xskmap": (("XskMap", _T.BPF_MAP_TYPE_XSKMAP),),
    "sock_map": (("SockMap", _T.BPF_MAP_TYPE_SOCKMAP), ("SockHash", _T.BPF_MAP_TYPE_SOCKHASH),
                 ("KernelObjectMap", None)),
    "reuseport_array": (("ReuseportArray", _T.BPF_MAP_TYPE_REUSEPORT_SOCKARRAY),),
    "bpf_local_storage": (("SkStorage", _T.BPF_MAP_TYPE_SK_STORAGE),
                          ("TaskStorage", _T.BPF_MAP_TYPE_TASK_STORAGE),
                          ("InodeStorage", _T.BPF_MAP_TYPE_INODE_STORAGE),
                          ("CgrpStorage", _T.BPF_MAP_TYPE_CGRP_STORAGE)),
    "bloom_filter": (("BloomFilter", _T.BPF_MAP_TYPE_BLOOM_FILTER),),
}
# name -> its module; map type -> (module, class name)
_NAMES = {name: mod for mod, names in _MODULES.items() for name, _t in names}
_TYPES = {int(t): (mod, name) for mod, names in _MODULES.items() for name, t in names
          if t is not None}


def _load(module: str, name: str) -> Any:
    return getattr(importlib.import_module(f"pyxdp.maps.{module}"), name)


def __getattr__(name: str) -> Any:
    """A map class (or helper) of a type's module, loading the module on first use."""
    mod = _NAMES.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = _load(mod, name)
    globals()[name] = value
    return value


def map_class(map_type: int) -> type[Map] | None:
    """The class modelling ``map_type`` (its module loaded now), or None."""
    found = _TYPES.get(int(map_type))
    if found is None:
        return None
    cls: type[Map] = _load(*found)
    return cls


class _MapClasses(Mapping[int, "type[Map]"]):
    """Every modelled map type's class by type; reading a class loads its module."""

    def __getitem__(self, map_type: int) -> type[Map]:
        cls = map_class(map_type)
        if cls is None:
            raise KeyError(map_type)
        return cls

    def __iter__(self) -> Iterator[int]:
        return iter(_TYPES)

    def __len__(self) -> int:
        return len(_TYPES)


MAP_CLASSES: Mapping[int, type[Map]] = _MapClasses()


def create_map_from_spec(spec: MapSpec) -> Map:
    """The map described by ``spec``, after the kernel's creation checks."""
    try:
        BpfMapType(spec.map_type)
    except ValueError:
        raise MapError("map_create", _errno.EINVAL, f"unknown map type {spec.map_type}") \
            from None
    check_common(spec)
    cls = map_class(spec.map_type)
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
