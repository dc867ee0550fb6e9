"""``BPF_MAP_TYPE_SOCKMAP`` and ``BPF_MAP_TYPE_SOCKHASH`` (``net/core/sock_map.c``).

A slot holds a socket of :mod:`pyxdp.net.inet_hashtables` (any object with the
:class:`MapSocket` attributes). As in Linux 6.18:

* creation (``sock_map_alloc``/``sock_hash_alloc``, EINVAL): 4-byte keys
  (sockhash: any key up to 512 bytes, else E2BIG), 4- or 8-byte values,
  entries, flags among ``BPF_F_NUMA_NODE | BPF_F_RDONLY | BPF_F_WRONLY``;
* an update with a socket (``sock_map_update_elem``, what a program's
  ``bpf_map_update_elem`` with a socket pointer does): -EOPNOTSUPP for a
  socket that is neither TCP nor UDP (``sock_map_sk_is_suitable``) or a TCP
  socket neither established nor listening (``sock_map_sk_state_allowed``);
  then -EINVAL for flags above ``BPF_EXIST``, -E2BIG for an index past the
  end (sockmap) or a full hash with a new key (sockhash), -EEXIST for
  ``BPF_NOEXIST`` on an occupied slot, -ENOENT for ``BPF_EXIST`` on an empty
  one; the socket replaced leaves the slot;
* a program's lookup gives the socket (NULL for an empty slot or an index past
  the end); a delete of an empty slot or past the end is -EINVAL (sockmap),
  of a missing key -ENOENT (sockhash);
* from user space a lookup gives the socket's cookie when values are 8 bytes
  (``sock_map_lookup_sys``; ENOSPC for 4-byte values, ENOENT when empty); an
  update takes a socket fd, which pyxdp has not (EBADF, as
  :class:`~pyxdp.maps.xskmap.XskMap`), so Python code puts a socket in with
  :meth:`SocketMapBase.set_socket`;
* a socket that closes leaves every map (``sock_map_close``): each socket keeps
  the maps that hold it in ``sock_maps``.

Simplified: no programs attached to the map (``sk_msg``/``sk_skb`` parsers and
verdicts), so adding a socket changes nothing of its data path; a sockhash's
keys iterate in insertion order (Linux: its hash buckets' order).

:class:`KernelObjectMap` is the rule for maps of kernel objects pyxdp does not
model (:mod:`pyxdp.maps.reuseport_array`, :mod:`pyxdp.maps.bpf_local_storage`):
they exist, every operation that needs such an object raises
:class:`~pyxdp.errors.NotSupportedError` naming the map, and so does loading a
program that references one (a program Linux's verifier refuses for its use of
the map gets Linux's verdict first).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from typing import ClassVar, NoReturn, Protocol

from pyxdp.errors import NotSupportedError
from pyxdp.maps.base import (
    BPF_EXIST,
    BPF_NOEXIST,
    Map,
    MapError,
    MapSpec,
    bad_fd,
    einval,
    next_index,
    number_kind,
)
from pyxdp.uapi.bpf import BpfMapType, MapFlag
from pyxdp.uapi.inet import IPPROTO_TCP, IPPROTO_UDP, TCP_ESTABLISHED, TCP_LISTEN

__all__ = ["KernelObjectMap", "MapSocket", "SockHash", "SockMap", "SocketMapBase"]

MAX_BPF_STACK = 512
# SOCK_CREATE_FLAG_MASK
_SOCK_FLAGS = int(MapFlag.BPF_F_NUMA_NODE | MapFlag.BPF_F_RDONLY | MapFlag.BPF_F_WRONLY)


class KernelObjectMap(Map):
    """A map whose values are kernel objects pyxdp does not model: it exists, and
    every operation on it raises NotSupportedError."""

    holds: ClassVar[str] = ""
    # reuseport arrays and the local storages have no batch commands: ENOTSUPP
    # (measured on 6.18), which Linux answers before it looks at the objects
    batch_ops: ClassVar[frozenset[str]] = frozenset()

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

    def raw_keys(self) -> Iterator[bytes]:
        self.unsupported("get_next_key")


def _einval(detail: str) -> MapError:
    return MapError("map_create", errno.EINVAL, detail)




class MapSocket(Protocol):
    """What a socket map needs of a socket."""

    protocol: int
    state: int
    cookie: int
    sock_maps: list[SocketMapBase]


def sock_map_check(sk: MapSocket) -> int:
    """``sock_map_sk_is_suitable`` and ``sock_map_sk_state_allowed``: 0 or -EOPNOTSUPP."""
    if sk.protocol not in (IPPROTO_TCP, IPPROTO_UDP):
        return -errno.EOPNOTSUPP
    if sk.protocol == IPPROTO_TCP and sk.state not in (TCP_ESTABLISHED, TCP_LISTEN):
        return -errno.EOPNOTSUPP
    return 0


class SocketMapBase(Map):
    """What a sockmap and a sockhash share: sockets by key, their user-space view."""

    batch_ops: ClassVar[frozenset[str]] = frozenset()  # sock_map_ops, sock_hash_ops: none

    def __init__(self, spec: MapSpec) -> None:
        self.check(spec)
        super().__init__(spec)

    @classmethod
    def check(cls, spec: MapSpec) -> None:
        raise _einval(f"{cls.__name__} is not a map type of its own")

    # -- what the two types do differently ----------------------------------------------
    def socket_at(self, key: bytes) -> MapSocket | None:
        """``__sock_map_lookup_elem``/``__sock_hash_lookup_elem``: the socket, or None."""
        raise NotImplementedError

    def _put(self, key: bytes, sk: MapSocket, flags: int) -> int:
        raise NotImplementedError

    def _remove(self, key: bytes) -> MapSocket | None:
        raise NotImplementedError

    def _items(self) -> list[tuple[bytes, MapSocket]]:
        raise NotImplementedError

    # -- program and Python operations --------------------------------------------------
    def update_socket(self, key: bytes, sk: MapSocket, flags: int = 0) -> int:
        """``sock_map_update_elem`` of ``sk`` under ``key``: 0 or -errno."""
        err = sock_map_check(sk)
        if err:
            return err
        if flags > BPF_EXIST:
            return -errno.EINVAL
        return self._put(key, sk, flags)

    def set_socket(self, key: bytes, sk: MapSocket, flags: int = 0) -> None:
        """Put ``sk`` under ``key`` (what an update with the socket's fd does); raises
        :class:`MapError` with Linux's errno."""
        err = self.update_socket(self._key(key, "update"), sk, flags)
        if err:
            raise MapError("update", -err)

    def _link(self, sk: MapSocket) -> None:
        if self not in sk.sock_maps:
            sk.sock_maps.append(self)

    def _unlink(self, sk: MapSocket) -> None:
        if self in sk.sock_maps and all(s is not sk for _, s in self._items()):
            sk.sock_maps.remove(self)

    def remove_socket(self, sk: MapSocket) -> None:
        """``sock_map_remove_links``: ``sk`` is closing; every slot holding it empties."""
        for key, s in self._items():
            if s is sk:
                self._remove(key)
        self._unlink(sk)

    # -- user space ---------------------------------------------------------------------
    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        k = self._key(key, "lookup")
        if self.value_size != 8:
            raise MapError("lookup", errno.ENOSPC, "a socket's cookie needs 8-byte values")
        sk = self.socket_at(k)
        return None if sk is None else sk.cookie.to_bytes(8, "little")

    def update(self, key: bytes | None, value: bytes, flags: int = 0, *,
               cpu: int | None = None) -> None:
        self._key(key, "update")
        fd = int.from_bytes(self._value(value, None, "update"), "little")
        if fd > 0x7FFF_FFFF:
            raise einval("update", f"fd {fd} > S32_MAX")
        if number_kind(fd) == "xsk":  # sock_map_sk_is_suitable: no AF_XDP (measured)
            raise MapError("update", errno.EOPNOTSUPP, f"fd {fd} is an AF_XDP socket: "
                           "a sockmap takes TCP, UDP and unix sockets")
        raise bad_fd("update", fd, errno.ENOTSOCK, "socket (pyxdp has no socket fds: use "
                     "set_socket)")

    def try_delete(self, key: bytes | None) -> int:
        try:
            self.delete(key)
        except MapError as e:
            return -e.errno
        return 0

    def raw_keys(self) -> Iterator[bytes]:
        return iter([k for k, _ in self._items()])

    def __len__(self) -> int:
        return len(self._items())

    def clear(self) -> None:
        for key, sk in self._items():
            self._remove(key)
            self._unlink(sk)


class SockMap(SocketMapBase):
    """``sock_map_alloc``: an array of sockets."""

    map_type = int(BpfMapType.BPF_MAP_TYPE_SOCKMAP)

    def __init__(self, spec: MapSpec) -> None:
        super().__init__(spec)
        self.sks: dict[int, MapSocket] = {}  # by index: what its used slots cost

    @classmethod
    def check(cls, spec: MapSpec) -> None:
        if (spec.max_entries == 0 or spec.key_size != 4 or spec.value_size not in (4, 8)
                or spec.map_flags & ~_SOCK_FLAGS):
            raise _einval("a sockmap needs 4-byte keys, 4- or 8-byte values, entries and "
                          "no flags but BPF_F_NUMA_NODE, BPF_F_RDONLY, BPF_F_WRONLY")

    def socket_at(self, key: bytes) -> MapSocket | None:
        i = int.from_bytes(key[:4], "little")
        return self.sks.get(i)

    def _put(self, key: bytes, sk: MapSocket, flags: int) -> int:
        """``sock_map_update_common``."""
        i = int.from_bytes(key[:4], "little")
        if i >= self.max_entries:
            return -errno.E2BIG
        old = self.sks.get(i)
        if old is not None and flags == BPF_NOEXIST:
            return -errno.EEXIST
        if old is None and flags == BPF_EXIST:
            return -errno.ENOENT
        self.sks[i] = sk
        self._link(sk)
        if old is not None and old is not sk:
            self._unlink(old)
        return 0

    def _remove(self, key: bytes) -> MapSocket | None:
        i = int.from_bytes(key[:4], "little")
        return self.sks.pop(i, None)

    def _items(self) -> list[tuple[bytes, MapSocket]]:
        return [(i.to_bytes(4, "little"), self.sks[i]) for i in sorted(self.sks)]

    def delete(self, key: bytes | None) -> None:
        """``sock_map_delete_elem``: EINVAL past the end and for an empty slot."""
        k = self._key(key, "delete")
        i = int.from_bytes(k, "little")
        if i >= self.max_entries:
            raise einval("delete", f"index {i} >= max_entries")
        sk = self._remove(k)
        if sk is None:
            raise einval("delete", f"slot {i} is empty")
        self._unlink(sk)

    def get_next_key(self, key: bytes | None) -> bytes | None:
        """``sock_map_get_next_key``: index order."""
        i = None if key is None else int.from_bytes(self._key(key, "get_next_key"), "little")
        return next_index(i, self.max_entries)


class SockHash(SocketMapBase):
    """``sock_hash_alloc``: a hash of sockets."""

    map_type = int(BpfMapType.BPF_MAP_TYPE_SOCKHASH)

    def __init__(self, spec: MapSpec) -> None:
        super().__init__(spec)
        self.sks: dict[bytes, MapSocket] = {}

    @classmethod
    def check(cls, spec: MapSpec) -> None:
        if (spec.max_entries == 0 or spec.key_size == 0 or spec.value_size not in (4, 8)
                or spec.map_flags & ~_SOCK_FLAGS):
            raise _einval("a sockhash needs a key, 4- or 8-byte values, entries and no "
                          "flags but BPF_F_NUMA_NODE, BPF_F_RDONLY, BPF_F_WRONLY")
        if spec.key_size > MAX_BPF_STACK:
            raise MapError("map_create", errno.E2BIG,
                           f"key_size {spec.key_size} > {MAX_BPF_STACK}")
        # sock_hash_alloc: roundup_pow_of_two(max_entries) buckets of 16 bytes, at most
        # U32_MAX / 16 of them (measured: 2^27 entries fine, 2^27 + 1 EINVAL)
        if 1 << (spec.max_entries - 1).bit_length() > 0xFFFF_FFFF // 16:
            raise _einval(f"max_entries {spec.max_entries}: more than 2^27 hash buckets")

    def socket_at(self, key: bytes) -> MapSocket | None:
        return self.sks.get(bytes(key))

    def _put(self, key: bytes, sk: MapSocket, flags: int) -> int:
        """``sock_hash_update_common``."""
        key = bytes(key)
        old = self.sks.get(key)
        if old is not None and flags == BPF_NOEXIST:
            return -errno.EEXIST
        if old is None and flags == BPF_EXIST:
            return -errno.ENOENT
        if old is None and len(self.sks) >= self.max_entries:
            return -errno.E2BIG  # sock_hash_alloc_elem
        self.sks[key] = sk
        self._link(sk)
        if old is not None and old is not sk:
            self._unlink(old)
        return 0

    def _remove(self, key: bytes) -> MapSocket | None:
        return self.sks.pop(bytes(key), None)

    def _items(self) -> list[tuple[bytes, MapSocket]]:
        return list(self.sks.items())

    def delete(self, key: bytes | None) -> None:
        """``sock_hash_delete_elem``: ENOENT for a missing key."""
        sk = self._remove(self._key(key, "delete"))
        if sk is None:
            raise MapError("delete", errno.ENOENT)
        self._unlink(sk)

    def get_next_key(self, key: bytes | None) -> bytes | None:
        """``sock_hash_get_next_key``: the key after ``key``; a missing one restarts."""
        keys = list(self.sks)
        if key is not None:
            k = self._key(key, "get_next_key")
            if k in self.sks:
                i = keys.index(k) + 1
                return keys[i] if i < len(keys) else None
        return keys[0] if keys else None
