"""The local storage maps (``kernel/bpf/bpf_local_storage.c``): ``SK_STORAGE``,
``TASK_STORAGE``, ``INODE_STORAGE``, ``CGRP_STORAGE``, created with
``bpf_local_storage_map_alloc_check``: ``BPF_F_NO_PREALLOC`` required (with at most
``BPF_F_CLONE``), no ``max_entries``, a 4-byte key, a value of at most
``BPF_LOCAL_STORAGE_MAX_VALUE_SIZE``, and BTF for key and value (the loader checks
that: :class:`~pyxdp.userspace.UserspaceBackend`). Their elements live on sockets,
tasks, inodes and cgroups, which pyxdp does not model: every operation raises
NotSupportedError (:class:`~pyxdp.maps.sock_map.KernelObjectMap`)."""

from __future__ import annotations

import errno

from pyxdp.maps.base import MapError, MapSpec
from pyxdp.maps.sock_map import KernelObjectMap
from pyxdp.uapi.bpf import BpfMapType, MapFlag

__all__ = ["LOCAL_STORAGE_TYPES", "CgrpStorage", "InodeStorage", "SkStorage", "TaskStorage"]

_FLAGS = int(MapFlag.BPF_F_NO_PREALLOC | MapFlag.BPF_F_CLONE)
# U16_MAX - sizeof(struct bpf_local_storage_elem) (128 bytes in Linux 6.18's BTF).
MAX_VALUE_SIZE = 65535 - 128


class _LocalStorage(KernelObjectMap):
    @classmethod
    def check(cls, spec: MapSpec) -> None:
        if (spec.map_flags & ~_FLAGS or not spec.map_flags & MapFlag.BPF_F_NO_PREALLOC
                or spec.max_entries or spec.key_size != 4 or not spec.value_size):
            raise MapError("map_create", errno.EINVAL,
                           "a local storage map needs BPF_F_NO_PREALLOC (BPF_F_CLONE "
                           "allowed), max_entries 0, a 4-byte key and a value")
        if spec.value_size > MAX_VALUE_SIZE:
            raise MapError("map_create", errno.E2BIG,
                           f"value_size {spec.value_size} > {MAX_VALUE_SIZE}")


class SkStorage(_LocalStorage):
    map_type = int(BpfMapType.BPF_MAP_TYPE_SK_STORAGE)
    holds = "sockets"


class TaskStorage(_LocalStorage):
    map_type = int(BpfMapType.BPF_MAP_TYPE_TASK_STORAGE)
    holds = "tasks"


class InodeStorage(_LocalStorage):
    map_type = int(BpfMapType.BPF_MAP_TYPE_INODE_STORAGE)
    holds = "inodes"


class CgrpStorage(_LocalStorage):
    map_type = int(BpfMapType.BPF_MAP_TYPE_CGRP_STORAGE)
    holds = "cgroups"


LOCAL_STORAGE_TYPES = frozenset(c.map_type for c in (SkStorage, TaskStorage, InodeStorage,
                                                      CgrpStorage))
