"""AF_XDP socket maps, as ``net/xdp/xskmap.c`` (``BPF_MAP_TYPE_XSKMAP``).

A slot holds an AF_XDP socket for ``bpf_redirect_map``; the datapath side
(receiving into the socket) is :mod:`pyxdp.net.xsk`. Modelled here:

* creation (``xsk_map_alloc``, EINVAL): ``key_size`` 4, ``value_size`` 4 (a
  socket fd), ``max_entries`` > 0, flags among ``BPF_F_NUMA_NODE |
  BPF_F_RDONLY | BPF_F_WRONLY``;
* update (``xsk_map_update_elem``): EINVAL for flags above ``BPF_EXIST``,
  E2BIG past the end, then the fd: EBADF when not open, ENOTSOCK when not a
  socket, EOPNOTSUPP when not an AF_XDP socket (all measured); with a socket
  (bound or not, with or without an rx ring: 6.18 takes all, measured): the
  same socket again is fine, EEXIST for ``BPF_NOEXIST`` on an occupied slot,
  ENOENT for ``BPF_EXIST`` on an empty one;
* a user-space lookup is EOPNOTSUPP (the kernel's ``xsk_map_lookup_elem_sys``);
  delete is EINVAL past the end, else succeeds; get_next_key is array order;
* a program's ``bpf_map_lookup_elem`` returns the socket as ``struct
  bpf_xdp_sock { __u32 queue_id; }`` (read-only), NULL for an empty slot;
* a socket that closes leaves every map (``xsk_delete_from_maps``): sockets
  with ``xsk_map_added``/``xsk_map_removed`` methods are told which maps hold
  them, and call :meth:`XskMap.remove_socket` when they close.

pyxdp has no file descriptors: :attr:`XskMap.resolve_fd` maps an fd to a
socket object or raises :class:`MapError` with the errno (default: every fd
is EBADF); the userspace backend resolves the ``fd`` of its host's
:class:`~pyxdp.net.xsk.XdpSock` s. Storage: ``entries``
``uint32[max_entries, 2]`` (the fd written, 0 when empty: what native
``bpf_redirect_map`` reads, as for devmaps), the socket objects, and the
``bpf_xdp_sock`` values.
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Callable, Iterator
from typing import ClassVar

import numpy as np

from pyxdp.maps.arraymap import _ArrayOrder
from pyxdp.maps.base import (
    BPF_ANY,
    BPF_EXIST,
    BPF_NOEXIST,
    MapError,
    MapSpec,
    bad_fd,
    einval,
)
from pyxdp.uapi.bpf import BpfMapType, MapFlag
from pyxdp.vm.jit.abi import MapInfo
from pyxdp.vm.jit.ir import Text, c64, ret_if
from pyxdp.vm.jit.natives import MapNative, entries_value, redirect_map_fn, register_map

__all__ = ["XskMap"]

XSK_CREATE_FLAG_MASK = int(MapFlag.BPF_F_NUMA_NODE | MapFlag.BPF_F_RDONLY
                           | MapFlag.BPF_F_WRONLY)


class XskMap(_ArrayOrder):
    """``BPF_MAP_TYPE_XSKMAP``: an AF_XDP socket per slot."""
    # xsk_map_ops has no batch commands (ENOTSUPP, measured on 6.18)
    batch_ops: ClassVar[frozenset[str]] = frozenset()

    map_type = int(BpfMapType.BPF_MAP_TYPE_XSKMAP)

    def __init__(self, spec: MapSpec) -> None:
        if (spec.max_entries == 0 or spec.key_size != 4 or spec.value_size != 4
                or spec.map_flags & ~XSK_CREATE_FLAG_MASK):
            raise einval("map_create", "xskmap: key 4, value 4, max_entries > 0")
        super().__init__(spec)
        self.entries = np.zeros((self.max_entries, 2), np.uint32)
        # The socket of each occupied slot: a dict, not a list of max_entries, so a
        # map of 2^31 slots costs what its used slots do (its arrays are lazy zeroes).
        self.sockets: dict[int, object] = {}
        # struct bpf_xdp_sock per slot: what a program's lookup points at.
        self.xdp_sock = np.zeros(self.max_entries, np.uint32)
        self._make_regions([self.xdp_sock.view(np.uint8)], writable=False)
        self.resolve_fd: Callable[[int], object] | None = None

    def _storage_bytes(self) -> int:
        return 4 * self.max_entries

    @property
    def fds(self) -> np.ndarray:
        """The fd written in each slot (0: empty)."""
        col: np.ndarray = self.entries[:, 0]
        return col

    def _resolve(self, fd: int) -> object:
        if self.resolve_fd is None or fd == 0:
            raise bad_fd("update", fd, _errno.ENOTSOCK, "AF_XDP socket")
        return self.resolve_fd(fd)

    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        raise MapError("lookup", _errno.EOPNOTSUPP, "xskmap elements are not readable")

    def lookup_addr(self, key: bytes, cpu: int = 0) -> int:
        """``__xsk_map_lookup_elem`` from a program: the ``bpf_xdp_sock`` (0: empty)."""
        i = int.from_bytes(key[:4], "little")
        if i >= self.max_entries or not self.entries[i, 0]:  # what the native twin reads
            return 0
        return self._regions[0].base + 4 * i

    def update(self, key: bytes | None, value: bytes, flags: int = BPF_ANY, *,
               cpu: int | None = None) -> None:
        i = int.from_bytes(self._key(key, "update"), "little")
        fd = int.from_bytes(self._value(value, None, "update"), "little")
        if flags > BPF_EXIST:
            raise einval("update", f"unknown flags {flags:#x}")
        if i >= self.max_entries:
            raise MapError("update", _errno.E2BIG, f"index {i} >= max_entries")
        sock = self._resolve(fd)
        old = self.sockets.get(i)
        if old is sock:
            return
        if old is not None and flags == BPF_NOEXIST:
            raise MapError("update", _errno.EEXIST)
        if old is None and flags == BPF_EXIST:
            raise MapError("update", _errno.ENOENT)
        self._set(i, sock, fd)

    def _set(self, i: int, sock: object | None, fd: int) -> None:
        old = self.sockets.pop(i, None)
        if sock is not None:
            self.sockets[i] = sock
        self.entries[i] = (fd, 0)
        self.xdp_sock[i] = int(getattr(sock, "queue_id", 0)) if sock is not None else 0
        if sock is not None:
            added = getattr(sock, "xsk_map_added", None)
            if added is not None:
                added(self)
        if old is not None and old is not sock and \
                all(s is not old for s in self.sockets.values()):
            removed = getattr(old, "xsk_map_removed", None)
            if removed is not None:
                removed(self)

    def delete(self, key: bytes | None) -> None:
        i = int.from_bytes(self._key(key, "delete"), "little")
        if i >= self.max_entries:
            raise einval("delete", f"index {i} >= max_entries")
        self._set(i, None, 0)

    def remove_socket(self, sock: object) -> None:
        """``xsk_map_try_sock_delete`` for every slot holding ``sock`` (it is closing)."""
        for i, s in list(self.sockets.items()):
            if s is sock:
                self._set(i, None, 0)

    def socket_changed(self, sock: object) -> None:
        """``sock`` was bound: its ``bpf_xdp_sock.queue_id`` changed."""
        for i, s in list(self.sockets.items()):
            if s is sock:
                self.xdp_sock[i] = int(getattr(sock, "queue_id", 0))

    def socket_at(self, index: int) -> object | None:
        """The socket at ``index`` (None: empty or out of range), for ``bpf_redirect_map``."""
        return self.sockets.get(index)

    def raw_keys(self) -> Iterator[bytes]:
        return iter([i.to_bytes(4, "little") for i in sorted(self.sockets)])

    def __len__(self) -> int:
        return len(self.sockets)

    def clear(self) -> None:
        for i in list(self.sockets):
            self._set(i, None, 0)


def _lookup_fn(tag: str, m: MapInfo) -> str:
    """XskMap.lookup_addr: slot ``key``'s ``bpf_xdp_sock`` (its fake address in the
    map's region), 0 past the end or empty."""
    f = Text()
    f.at("entry")
    key = f.ins("zext i32 " + f.ins("load i32, ptr %key, align 1") + " to i64")
    ret_if(f, f.ins(f"icmp eq i64 {entries_value(f, m, key)}, 0"), 0)
    off = f.ins(f"shl i64 {key}, 2")
    f.do(f"ret i64 {f.ins(f'add i64 {c64(m.value_base)}, {off}')}")
    return f.text(f"define internal i64 @{tag}_lookup{m.slot}(ptr %ctx, ptr %key) nounwind")


# Native bpf_redirect_map and bpf_map_lookup_elem read ``entries[key][0]`` (non-zero: a
# socket is there), as socket_at and lookup_addr do on the Python path.
register_map(BpfMapType.BPF_MAP_TYPE_XSKMAP, MapNative(
    "entries", (XskMap,), lambda m: {"entries": int(m.entries.ctypes.data)},
    functions={"redirect": redirect_map_fn, "lookup": _lookup_fn}))
