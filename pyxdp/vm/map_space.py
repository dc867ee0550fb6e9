"""Maps as a program sees them: ``struct bpf_map *`` handles in the fake address space.

In the kernel a program holds a ``struct bpf_map *`` (what ``ld_imm64`` of a
map loads) and the helpers of ``kernel/bpf/helpers.c`` call through its
``bpf_map_ops``. Here the handle is the base of the map's window of fake
64-bit addresses: windows start at :data:`MAP_SPACE_BASE`, are
:data:`MAP_WINDOW` (4 GiB) aligned and never reused, and the map's value
regions lie inside its window. This module allocates the windows and keeps
the handle -> map registry the helpers look maps up in.

The vm knows a map only through :class:`ProgramMap` (and
:class:`RingBufMap`): the operations its helpers call. The map
implementations live above the vm and publish themselves here when created
(:func:`publish`), so the vm needs none of them.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Protocol, TypeGuard

from pyxdp.errors import HelperFault
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.vm.memory import Region

__all__ = ["MAP_SPACE_BASE", "MAP_WINDOW", "ProgramMap", "RingBufMap", "allocate_window",
           "is_ringbuf", "map_at", "map_by_addr", "publish"]

MAP_SPACE_BASE = 0x0000_2000_0000_0000
MAP_WINDOW = 1 << 32

_RINGBUF = int(BpfMapType.BPF_MAP_TYPE_RINGBUF)


class ProgramMap(Protocol):
    """What the vm's helpers use of a map (the ``bpf_map_ops`` they reach, with the
    helper-style ``try_*`` forms that return 0 or ``-errno``)."""

    @property
    def map_type(self) -> int: ...
    @property
    def percpu(self) -> bool: ...
    @property
    def addr(self) -> int: ...
    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def key_size(self) -> int: ...
    @property
    def value_size(self) -> int: ...
    @property
    def max_entries(self) -> int: ...
    @property
    def nr_cpus(self) -> int: ...
    @property
    def elem_size(self) -> int: ...

    def value_region(self, cpu: int = 0) -> Region: ...

    def lookup_addr(self, key: bytes, cpu: int = 0) -> int: ...

    def try_update(self, key: bytes | None, value: bytes, flags: int = 0, *,
                   cpu: int | None = None) -> int: ...

    def try_delete(self, key: bytes | None) -> int: ...

    def try_push(self, value: bytes, flags: int = 0) -> int: ...

    def pop(self) -> bytes | None: ...

    def peek(self) -> bytes | None: ...

    def raw_keys(self) -> Iterator[bytes]: ...

    def __len__(self) -> int: ...  # the elements it holds


class RingBufMap(ProgramMap, Protocol):
    """A ``BPF_MAP_TYPE_RINGBUF`` map: what ``bpf_ringbuf_*`` call (``kernel/bpf/ringbuf.c``)."""

    def reserve(self, size: int, flags: int = 0) -> int: ...

    def submit(self, addr: int, flags: int = 0) -> None: ...

    def discard(self, addr: int, flags: int = 0) -> None: ...

    def try_output(self, data: bytes, flags: int = 0) -> int: ...

    def query(self, flags: int) -> int: ...


def is_ringbuf(m: ProgramMap) -> TypeGuard[RingBufMap]:
    """Whether ``m`` is a ring buffer (the verifier's map type check for the ringbuf helpers)."""
    return m.map_type == _RINGBUF


_lock = threading.Lock()
_next_window = 0
# Handles of live maps: an entry goes when its map does (windows are never reused).
_by_window: weakref.WeakValueDictionary[int, ProgramMap] = weakref.WeakValueDictionary()


def allocate_window(size: int) -> int:
    """A fresh base address with ``size`` bytes of fake address space behind it.

    Windows are 4 GiB aligned and never reused, so regions of different maps
    can never overlap, even after a map is gone.
    """
    global _next_window
    n = max(1, -(-size // MAP_WINDOW))
    with _lock:
        base = MAP_SPACE_BASE + _next_window * MAP_WINDOW
        _next_window += n
    return base


def publish(m: ProgramMap) -> None:
    """Make ``m`` reachable from its handle ``m.addr`` (for as long as it lives)."""
    with _lock:
        _by_window[m.addr] = m


def map_by_addr(addr: int) -> ProgramMap | None:
    """The live map whose handle is ``addr`` (what ``ld_imm64`` of a map gives a program)."""
    return _by_window.get(addr)


def map_at(addr: int) -> ProgramMap:
    """The map a helper's map argument names; a fault when ``addr`` is no map's handle."""
    m = _by_window.get(addr)
    if m is None:
        raise HelperFault(f"{addr:#x} is not a map")
    return m
