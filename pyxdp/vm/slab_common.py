"""``bpf_get_kmem_cache`` of ``mm/slab_common.c`` (Linux 6.18, ``common_btf_ids``).

``bpf_get_kmem_cache(addr)`` gives the slab cache (``struct kmem_cache *``) of the
slab page holding the numeric address ``addr``, or NULL where there is none
(``virt_addr_valid`` fails, or the page is not a slab's). The verifier types the
result an untrusted pointer (probe loads, nothing trusted may be made of it).

pyxdp's slab is its object arena (:mod:`pyxdp.vm.memalloc`): Linux's
``bpf_mem_alloc`` takes each block of ``bpf_obj_new`` objects from the kmalloc
cache of its unit size (the object and its 8-byte header), so an address inside
an arena block, live or free, is in the cache ``kmalloc-N`` of its size class N;
a ``struct bpf_key`` of ``bpf_lookup_system_key`` lives there too (Linux: kmalloc-16),
and a ``bpf_percpu_obj_new`` object (Linux: per-CPU memory, no slab's). Every other
address is NULL: map values, the packet, the stack, the task and cgroup images
(Linux answers for the slab-backed ones, e.g. a hash map's elements or a
``task_struct``, which pyxdp does not place in slabs). A cache is an image of a
``struct kmem_cache`` laid out by the kernel BTF in one read-only region: ``name``
(pointing at the name in the image's slot), ``size``, ``object_size``,
``inuse`` (the class size) and ``align`` (8); every other byte reads 0. The kfunc
runs in Python on both engines.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pyxdp.btf.btf import BtfKind
from pyxdp.btf.struct_access import member_offset
from pyxdp.btf.vmlinux import core_target
from pyxdp.errors import HelperFault
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.memalloc import SIZES, arena
from pyxdp.vm.memory import Region

__all__ = ["SLAB_BASE", "SLAB_KFUNCS", "kmem_caches"]

SLAB_BASE = 0x0000_7300_0000_0000
_ALIGN = 8  # ARCH_KMALLOC_MINALIGN on x86-64 and arm64's kmalloc caches of these sizes
_FIELDS = ("name", "size", "object_size", "inuse", "align")


class KmemCaches:
    """One ``struct kmem_cache`` image per arena size class (see the module docstring)."""

    def __init__(self) -> None:
        btf = core_target()
        tid = btf.find("kmem_cache", BtfKind.STRUCT)
        got = {n: member_offset(btf, tid, n) for n in _FIELDS} if tid else {}
        if tid is None or any(v is None for v in got.values()):
            raise HelperFault(f"the kernel BTF ({btf.path}) has no struct kmem_cache with "
                              f"{', '.join(_FIELDS)}: pyxdp cannot lay out slab caches")
        size = btf.type_by_id(tid).size_type
        self.name_at = -(-size // 8) * 8
        self.slot = -(-(self.name_at + 16) // 4096) * 4096
        buf = bytearray(self.slot * len(SIZES))
        for i, n in enumerate(SIZES):
            base = i * self.slot

            def put(member: str, value: int, base: int = base) -> None:
                at = got[member]
                assert at is not None
                buf[base + at[0]:base + at[0] + at[1]] = value.to_bytes(at[1], "little")

            put("name", SLAB_BASE + base + self.name_at)
            for m in ("size", "object_size", "inuse"):
                put(m, n)
            put("align", _ALIGN)
            name = f"kmalloc-{n}".encode()
            buf[base + self.name_at:base + self.name_at + len(name)] = name
        self.region = Region("kmem caches", SLAB_BASE, buf, writable=False)

    def of(self, addr: int) -> int:
        """The cache image's address for ``addr``; 0 when it is no slab memory."""
        n = arena().block_size(addr)
        return SLAB_BASE + SIZES.index(n) * self.slot if n else 0


_CACHES: list[KmemCaches] = []
_MADE = threading.Lock()


def kmem_caches() -> KmemCaches:
    """The process's cache images (made on first use)."""
    with _MADE:
        if not _CACHES:
            _CACHES.append(KmemCaches())
        return _CACHES[0]


def get_kmem_cache(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_get_kmem_cache(addr)``: the slab cache holding ``addr``, or NULL."""
    caches = kmem_caches()
    got = caches.of(r1)
    if got and not any(r is caches.region for r in vm.mem.regions):
        vm.mem.add(caches.region)
    return got


SLAB_KFUNCS: dict[str, Callable[..., int]] = {"bpf_get_kmem_cache": get_kmem_cache}
