"""``BPF_MAP_TYPE_REUSEPORT_SOCKARRAY`` (``kernel/bpf/reuseport_array.c``): an array of
``SO_REUSEPORT`` sockets, created with the kernel's checks (``reuseport_array_alloc_check``:
4- or 8-byte values, then ``array_map_alloc_check``). ``SO_REUSEPORT`` sockets are not
modelled, so no slot can be filled: an update raises NotSupportedError
(:class:`~pyxdp.maps.sock_map.KernelObjectMap`), and the reads are those of Linux's
array with every slot empty: ``get_next_key`` walks the indexes (``reuseport_array_get_next_key``),
a lookup from user space is ENOSPC for 4-byte values, else ENOENT
(``bpf_fd_reuseport_array_lookup_elem``), a delete is E2BIG past the end, else ENOENT
(``reuseport_array_delete_elem``)."""

from __future__ import annotations

import errno

from pyxdp.maps.base import MapError, MapSpec, next_index
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

    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        self._key(key, "lookup")
        if self.value_size != 8:  # the value a lookup copies out is the socket's cookie
            raise MapError("lookup", errno.ENOSPC, "a reuseport array's lookup from user "
                           "space needs 8-byte values (the socket cookie)")
        return None

    def get_next_key(self, key: bytes | None) -> bytes | None:
        i = None if key is None else int.from_bytes(self._key(key, "get_next_key"), "little")
        return next_index(i, self.max_entries)

    def delete(self, key: bytes | None) -> None:
        i = int.from_bytes(self._key(key, "delete"), "little")
        if i >= self.max_entries:
            raise MapError("delete", errno.E2BIG, f"index {i} >= max_entries")
        raise MapError("delete", errno.ENOENT, f"slot {i} is empty")
