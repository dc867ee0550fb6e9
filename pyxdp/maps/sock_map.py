"""``BPF_MAP_TYPE_SOCKMAP`` and ``BPF_MAP_TYPE_SOCKHASH`` (``net/core/sock_map.c``):
created with the kernel's checks, holding nothing pyxdp can put in them.

Their values are sockets (an fd on update, a socket cookie on lookup), which
pyxdp does not model. So such a map exists - an object that declares one
loads, and its programs that never touch it run - but every operation on it
raises :class:`~pyxdp.errors.NotSupportedError` naming the map, and so does
loading a program that references it (a program Linux's verifier refuses for
its use of the map gets Linux's verdict first). :class:`KernelObjectMap` is
the same rule for the other maps of kernel objects
(:mod:`pyxdp.maps.reuseport_array`, :mod:`pyxdp.maps.bpf_local_storage`).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from typing import Any, ClassVar, NoReturn

from pyxdp.errors import NotSupportedError
from pyxdp.maps.base import Map, MapError, MapSpec
from pyxdp.uapi.bpf import BpfMapType, MapFlag

__all__ = ["KernelObjectMap", "SockHash", "SockMap"]

MAX_BPF_STACK = 512
# SOCK_CREATE_FLAG_MASK
_SOCK_FLAGS = int(MapFlag.BPF_F_NUMA_NODE | MapFlag.BPF_F_RDONLY | MapFlag.BPF_F_WRONLY)


class KernelObjectMap(Map):
    """A map whose values are kernel objects pyxdp does not model: it exists, and
    every operation on it raises NotSupportedError."""

    holds: ClassVar[str] = ""

    def __init__(self, spec: MapSpec) -> None:
        self.check(spec)
        super().__init__(spec)

    @classmethod
    def check(cls, spec: MapSpec) -> None:
        """The type's ``map_alloc_check``/``map_alloc`` parameter checks (each concrete
        type has its own; this base class is no map type)."""
        raise _einval(f"{cls.__name__} is not a map type of its own")

    def unsupported(self, op: str) -> NoReturn:
        raise NotSupportedError(
            f"{BpfMapType(self.map_type).name} map {self.name or self.id!r}: {op} needs "
            f"{self.holds}, which pyxdp does not model")

    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        self.unsupported("lookup")

    def update(self, key: bytes | None, value: bytes, flags: int = 0, *,
               cpu: int | None = None) -> None:
        self.unsupported("update")

    def delete(self, key: bytes | None) -> None:
        self.unsupported("delete")

    def get_next_key(self, key: bytes | None) -> bytes | None:
        self.unsupported("get_next_key")

    def lookup_and_delete(self, key: bytes | None, flags: int = 0) -> bytes | None:
        self.unsupported("lookup_and_delete")

    def lookup_addr(self, key: bytes, cpu: int = 0) -> int:
        self.unsupported("bpf_map_lookup_elem")

    def try_update(self, key: bytes | None, value: bytes, flags: int = 0, *,
                   cpu: int | None = None) -> int:
        self.unsupported("bpf_map_update_elem")

    def try_delete(self, key: bytes | None) -> int:
        self.unsupported("bpf_map_delete_elem")

    def lookup_batch(self, cursor: bytes | None = None, count: int = 0) -> Any:
        self.unsupported("lookup_batch")

    def update_batch(self, keys: Any, values: Any, flags: int = 0) -> int:
        self.unsupported("update_batch")

    def delete_batch(self, keys: Any) -> int:
        self.unsupported("delete_batch")

    def lookup_and_delete_batch(self, count: int = 0) -> tuple[list[bytes], list[bytes]]:
        self.unsupported("lookup_and_delete_batch")

    def raw_keys(self) -> Iterator[bytes]:
        self.unsupported("get_next_key")


def _einval(detail: str) -> MapError:
    return MapError("map_create", errno.EINVAL, detail)


class SockMap(KernelObjectMap):
    """``sock_map_alloc``: an array of sockets."""

    map_type = int(BpfMapType.BPF_MAP_TYPE_SOCKMAP)
    holds = "sockets"

    @classmethod
    def check(cls, spec: MapSpec) -> None:
        if (spec.max_entries == 0 or spec.key_size != 4 or spec.value_size not in (4, 8)
                or spec.map_flags & ~_SOCK_FLAGS):
            raise _einval("a sockmap needs 4-byte keys, 4- or 8-byte values, entries and "
                          "no flags but BPF_F_NUMA_NODE, BPF_F_RDONLY, BPF_F_WRONLY")


class SockHash(KernelObjectMap):
    """``sock_hash_alloc``: a hash of sockets."""

    map_type = int(BpfMapType.BPF_MAP_TYPE_SOCKHASH)
    holds = "sockets"

    @classmethod
    def check(cls, spec: MapSpec) -> None:
        if (spec.max_entries == 0 or spec.key_size == 0 or spec.value_size not in (4, 8)
                or spec.map_flags & ~_SOCK_FLAGS):
            raise _einval("a sockhash needs a key, 4- or 8-byte values, entries and no "
                          "flags but BPF_F_NUMA_NODE, BPF_F_RDONLY, BPF_F_WRONLY")
        if spec.key_size > MAX_BPF_STACK:
            raise MapError("map_create", errno.E2BIG,
                           f"key_size {spec.key_size} > {MAX_BPF_STACK}")
