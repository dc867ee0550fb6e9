"""CPU maps, as ``kernel/bpf/cpumap.c`` (``BPF_MAP_TYPE_CPUMAP``): storage and checks only.

A cpumap slot is a remote CPU with a queue of ``qsize`` frames, the target of
``bpf_redirect_map``; the datapath comes later. Modelled here:

* creation (``cpu_map_alloc``): EINVAL unless ``key_size`` 4, ``value_size``
  4 (``u32 qsize``) or 8 (``struct bpf_cpumap_val { u32 qsize; union { int
  fd; u32 id; } bpf_prog; }``), ``max_entries`` > 0 and no flag but
  ``BPF_F_NUMA_NODE``; E2BIG when ``max_entries > NR_CPUS`` (256 on the
  measured kernel's config; :data:`NR_CPUS`);
* update (``cpu_map_update_elem``), in the kernel's order: EINVAL for flags
  above ``BPF_EXIST``, E2BIG past the end, EEXIST for ``BPF_NOEXIST``,
  EOVERFLOW for ``qsize > 16384``, ENODEV for a CPU that is not possible
  (``key >= nr_cpus``), then qsize 0 clears the slot; a program fd > 0 that
  does not resolve fails the entry allocation: ENOMEM (measured);
* lookup reports ``{qsize, prog id}`` (ENOENT when empty); delete is EINVAL
  past the end, else succeeds; get_next_key is array order. Programs cannot
  look a cpumap up (the verifier allows only ``bpf_redirect_map``).

Storage (numpy): ``entries`` ``uint32[max_entries, 2]`` = qsize, program id;
a slot is empty when its qsize is 0. :attr:`CpuMap.resolve_prog` maps a
program fd to its id (default: none is valid); an entry holds its program as a
devmap's does (:class:`pyxdp.maps.devmap.EntryProgs`).
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Callable

from pyxdp.maps.base import BPF_ANY, BPF_EXIST, BPF_NOEXIST, MapError, MapSpec, einval
from pyxdp.maps.devmap import _EntryArray, entries_native
from pyxdp.uapi.bpf import BpfMapType, MapFlag
from pyxdp.vm.jit.natives import register_map

__all__ = ["CPUMAP_QSIZE_MAX", "NR_CPUS", "CpuMap"]

NR_CPUS = 256
CPUMAP_QSIZE_MAX = 16384


class CpuMap(_EntryArray):
    """``BPF_MAP_TYPE_CPUMAP``: queue size (+ program) per CPU."""

    map_type = int(BpfMapType.BPF_MAP_TYPE_CPUMAP)

    def __init__(self, spec: MapSpec) -> None:
        if (spec.max_entries == 0 or spec.key_size != 4 or spec.value_size not in (4, 8)
                or spec.map_flags & ~int(MapFlag.BPF_F_NUMA_NODE)):
            raise einval("map_create", "cpumap: key 4, value 4 or 8, max_entries > 0")
        if spec.max_entries > NR_CPUS:
            raise MapError("map_create", _errno.E2BIG, f"max_entries above NR_CPUS {NR_CPUS}")
        super().__init__(spec)
        self.resolve_prog: Callable[[int], int | None] | None = None

    def update(self, key: bytes | None, value: bytes, flags: int = BPF_ANY, *,
               cpu: int | None = None) -> None:
        i = self._index(key, "update")
        data = self._value(value, None, "update")
        qsize = int.from_bytes(data[:4], "little")
        fd = int.from_bytes(data[4:8], "little", signed=True) if len(data) == 8 else 0
        if flags > BPF_EXIST:
            raise einval("update", f"unknown flags {flags:#x}")
        if i >= self.max_entries:
            raise MapError("update", _errno.E2BIG, f"index {i} >= max_entries")
        if flags == BPF_NOEXIST:
            raise MapError("update", _errno.EEXIST, "cpumap slots always exist")
        if qsize > CPUMAP_QSIZE_MAX:
            raise MapError("update", _errno.EOVERFLOW, f"qsize {qsize} > {CPUMAP_QSIZE_MAX}")
        if i >= self.nr_cpus:
            raise MapError("update", _errno.ENODEV, f"CPU {i} is not possible")
        if qsize == 0:
            self.progs.write(self.entries, i, 0, 0)
            self.gen += 1
            return
        prog_id = 0
        if fd > 0:
            resolved = self.resolve_prog(fd) if self.resolve_prog is not None else None
            if resolved is None:
                raise MapError("update", _errno.ENOMEM, f"fd {fd} is not a cpumap program")
            prog_id = resolved
        self.progs.write(self.entries, i, qsize, prog_id)
        self.gen += 1

    def qsize_at(self, index: int) -> int:
        """The queue size at ``index`` (0: empty or out of range)."""
        return int(self.entries[index, 0]) if 0 <= index < self.max_entries else 0


register_map(BpfMapType.BPF_MAP_TYPE_CPUMAP, entries_native(CpuMap))  # native bpf_redirect_map
