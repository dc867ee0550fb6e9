"""One BPF ring buffer program on Linux and on pyxdp, side by side (``BPF_MAP_TYPE_RINGBUF``).

The kernel's ring is read through its mmap (:class:`pyxdp.kernel.ringbuf.RingBuffer`),
pyxdp's in place (``records()``); the same steps drive both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyxdp.collection import Collection
from pyxdp.kernel.ringbuf import RingBuffer
from pyxdp.spec import CollectionSpec

__all__ = ["Runs", "ring_runs"]

# The steps of a test: run the collection's programs, read the ring with the callable.
Runs = Callable[[Collection, Callable[[], list[bytes]]], list[object]]


def ring_runs(spec: CollectionSpec, engine: str, runs: Runs, ring: str = "rb",
              ring_size: int = 4096) -> tuple[list[object], list[object]]:
    """What ``runs`` gives on Linux (root) and on pyxdp's ``engine``: (Linux, pyxdp)."""
    with Collection(spec, "kernel") as kc, Collection(spec, engine=engine) as uc:
        khandle: Any = kc.maps[ring].handle  # the kernel's map: its fd
        with RingBuffer(ring_size, map_fd=khandle.fd) as krb:
            k = runs(kc, krb.read)
        urb: Any = uc.maps[ring].handle  # pyxdp's ring: its records in place
        u = runs(uc, lambda: list(urb.records()))
    return k, u
