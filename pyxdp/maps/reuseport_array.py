"""``BPF_MAP_TYPE_REUSEPORT_SOCKARRAY`` (``kernel/bpf/reuseport_array.c``): an array of
``SO_REUSEPORT`` sockets, created with the kernel's checks (``reuseport_array_alloc_check``:
4- or 8-byte values, then ``array_map_alloc_check``). Sockets are not modelled: every
operation raises NotSupportedError (:class:`~pyxdp.maps.sock_map.KernelObjectMap`)."""

from __future__ import annotations

import errno

from pyxdp.maps.base import MapError, MapSpec
from pyxdp.maps.sock_map import KernelObjectMap
from pyxdp.uapi.bpf import BpfMapType, MapFlag

__all__ = ["ReuseportArray"]

# ARRAY_CREATE_FLAG_MASK
_ARRAY_FLAGS = int(MapFlag.BPF_F_NUMA_NODE | MapFlag.BPF_F_MMAPABLE | MapFlag.BPF_F_RDONLY
                   | MapFlag.BPF_F_WRONLY | MapFlag.BPF_F_RDONLY_PROG
                   | MapFlag.BPF_F_WRONLY_PROG | MapFlag.BPF_F_INNER_MAP)


class ReuseportArray(KernelObjectMap):
    map_type = int(BpfMapType.BPF_MAP_TYPE_REUSEPORT_SOCKARRAY)
    holds = "SO_REUSEPORT sockets"

    @classmethod
    def check(cls, spec: MapSpec) -> None:
        # BPF_F_MMAPABLE is for plain arrays only: EINVAL here too.
        flags = spec.map_flags
        if (spec.value_size not in (4, 8) or spec.max_entries == 0 or spec.key_size != 4
                or flags & ~_ARRAY_FLAGS or flags & MapFlag.BPF_F_MMAPABLE):
            raise MapError("map_create", errno.EINVAL,
                           "a reuseport array needs 4-byte keys, 4- or 8-byte values, "
                           "entries and array flags (not BPF_F_MMAPABLE)")
