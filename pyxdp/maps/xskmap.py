"""AF_XDP socket maps, as ``net/xdp/xskmap.c`` (``BPF_MAP_TYPE_XSKMAP``): storage and checks only.

A slot holds an AF_XDP socket for ``bpf_redirect_map``; the datapath comes
later. Modelled here:

* creation (``xsk_map_alloc``, EINVAL): ``key_size`` 4, ``value_size`` 4 (a
  socket fd), ``max_entries`` > 0, flags among ``BPF_F_NUMA_NODE |
  BPF_F_RDONLY | BPF_F_WRONLY``;
* update (``xsk_map_update_elem``): EINVAL for flags above ``BPF_EXIST``,
  E2BIG past the end, then the fd: EBADF when not open, ENOTSOCK when not a
  socket, EOPNOTSUPP when not an AF_XDP socket (all measured); with a socket:
  the same socket again is fine, EEXIST for ``BPF_NOEXIST`` on an occupied
  slot, ENOENT for ``BPF_EXIST`` on an empty one;
* a user-space lookup is EOPNOTSUPP (the kernel's ``xsk_map_lookup_elem_sys``);
  delete is EINVAL past the end, else succeeds; get_next_key is array order.

pyxdp has no sockets of its own: :attr:`XskMap.resolve_fd` maps an fd to a
socket object or raises :class:`MapError` with the errno (default: every fd
is EBADF). Storage: ``fds`` ``uint32[max_entries]`` (the value written) and
a list of socket objects; a program lookup returns no address yet (the
kernel returns the ``xdp_sock``; the datapath will provide it).
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Callable, Iterator

import numpy as np

from pyxdp.maps.arraymap import _ArrayOrder
from pyxdp.maps.base import BPF_ANY, BPF_EXIST, BPF_NOEXIST, MapError, MapSpec, einval
from pyxdp.uapi.bpf import BpfMapType, MapFlag

__all__ = ["XskMap"]

XSK_CREATE_FLAG_MASK = int(MapFlag.BPF_F_NUMA_NODE | MapFlag.BPF_F_RDONLY
                           | MapFlag.BPF_F_WRONLY)


class XskMap(_ArrayOrder):
    """``BPF_MAP_TYPE_XSKMAP``: an AF_XDP socket per slot."""

    map_type = int(BpfMapType.BPF_MAP_TYPE_XSKMAP)

    def __init__(self, spec: MapSpec) -> None:
        if (spec.max_entries == 0 or spec.key_size != 4 or spec.value_size != 4
                or spec.map_flags & ~XSK_CREATE_FLAG_MASK):
            raise einval("map_create", "xskmap: key 4, value 4, max_entries > 0")
        super().__init__(spec)
        self.fds = np.zeros(self.max_entries, np.uint32)
        self.sockets: list[object | None] = [None] * self.max_entries
        self.resolve_fd: Callable[[int], object] | None = None

    def _resolve(self, fd: int) -> object:
        if self.resolve_fd is None:
            raise MapError("update", _errno.EBADF, f"fd {fd} is not open")
        return self.resolve_fd(fd)

    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        raise MapError("lookup", _errno.EOPNOTSUPP, "xskmap elements are not readable")

    def update(self, key: bytes | None, value: bytes, flags: int = BPF_ANY, *,
               cpu: int | None = None) -> None:
        i = int.from_bytes(self._key(key, "update"), "little")
        fd = int.from_bytes(self._value(value, None, "update"), "little")
        if flags > BPF_EXIST:
            raise einval("update", f"unknown flags {flags:#x}")
        if i >= self.max_entries:
            raise MapError("update", _errno.E2BIG, f"index {i} >= max_entries")
        sock = self._resolve(fd)
        old = self.sockets[i]
        if old is sock:
            return
        if old is not None and flags == BPF_NOEXIST:
            raise MapError("update", _errno.EEXIST)
        if old is None and flags == BPF_EXIST:
            raise MapError("update", _errno.ENOENT)
        self.sockets[i] = sock
        self.fds[i] = fd

    def delete(self, key: bytes | None) -> None:
        i = int.from_bytes(self._key(key, "delete"), "little")
        if i >= self.max_entries:
            raise einval("delete", f"index {i} >= max_entries")
        self.sockets[i] = None
        self.fds[i] = 0

    def socket_at(self, index: int) -> object | None:
        """The socket at ``index`` (None: empty or out of range), for ``bpf_redirect_map``."""
        return self.sockets[index] if 0 <= index < self.max_entries else None

    def raw_keys(self) -> Iterator[bytes]:
        return iter([i.to_bytes(4, "little") for i, s in enumerate(self.sockets)
                     if s is not None])

    def __len__(self) -> int:
        return sum(s is not None for s in self.sockets)

    def clear(self) -> None:
        self.sockets = [None] * self.max_entries
        self.fds.fill(0)
