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
fd is valid). Not modelled: ``DEVMAP_HASH``, the program's expected attach
type check, device unregistration.
"""

from __future__ import annotations

import errno as _errno
import socket
from collections.abc import Callable, Iterator

import numpy as np

from pyxdp.maps.arraymap import _ArrayOrder
from pyxdp.maps.base import (
    BPF_ANY,
    BPF_EXIST,
    BPF_NOEXIST,
    MAX_STORAGE_BYTES,
    MapError,
    MapSpec,
    einval,
)
from pyxdp.uapi.bpf import BpfMapType, MapFlag

__all__ = ["DevMap", "host_ifindex_exists"]

DEV_CREATE_FLAG_MASK = int(MapFlag.BPF_F_NUMA_NODE | MapFlag.BPF_F_RDONLY
                           | MapFlag.BPF_F_WRONLY)


def host_ifindex_exists(ifindex: int) -> bool:
    """True when this host has an interface with that index."""
    try:
        socket.if_indextoname(ifindex)
    except OSError:
        return False
    return True


class _EntryArray(_ArrayOrder):
    """An array of ``(u32, u32)`` entries; slot empty when field 0 is 0."""

    def __init__(self, spec: MapSpec) -> None:
        super().__init__(spec)
        self.entries = np.zeros((self.max_entries, 2), np.uint32)

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
        self.entries[i] = 0

    def raw_keys(self) -> Iterator[bytes]:
        # The Python API lists the occupied slots (get_next_key walks all).
        return iter([i.tobytes() for i in np.flatnonzero(self.entries[:, 0]).astype("<u4")])

    def __len__(self) -> int:
        return int(np.count_nonzero(self.entries[:, 0]))

    def clear(self) -> None:
        self.entries.fill(0)


class DevMap(_EntryArray):
    """``BPF_MAP_TYPE_DEVMAP``: ifindex (+ program) per slot."""

    map_type = int(BpfMapType.BPF_MAP_TYPE_DEVMAP)

    def __init__(self, spec: MapSpec) -> None:
        if (spec.max_entries == 0 or spec.key_size != 4 or spec.value_size not in (4, 8)
                or spec.map_flags & ~DEV_CREATE_FLAG_MASK):
            raise einval("map_create", "devmap: key 4, value 4 or 8, max_entries > 0")
        if spec.max_entries * 8 > MAX_STORAGE_BYTES:
            raise MapError("map_create", _errno.ENOMEM, "devmap too large")
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
            self.entries[i] = 0
            return
        if not self.ifindex_ok(ifindex):
            raise einval("update", f"no device with ifindex {ifindex}")
        prog_id = 0
        if fd > 0:
            resolved = self.resolve_prog(fd) if self.resolve_prog is not None else None
            if resolved is None:
                raise einval("update", f"fd {fd} is not an XDP devmap program")
            prog_id = resolved
        self.entries[i] = (ifindex, prog_id)

    def lookup_addr(self, key: bytes, cpu: int = 0) -> int:
        i = int.from_bytes(key, "little")
        if i >= self.max_entries or not self.entries[i, 0]:
            return 0
        return self.value_region().base + 8 * i

    def ifindex_at(self, index: int) -> int:
        """The ifindex at ``index`` (0: empty or out of range), for ``bpf_redirect_map``."""
        return int(self.entries[index, 0]) if 0 <= index < self.max_entries else 0
