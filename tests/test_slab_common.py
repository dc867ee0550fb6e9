"""bpf_get_kmem_cache (pyxdp/vm/slab_common.py) called directly: an address inside an
arena block, live or freed, is in the kmalloc cache of the block's size class, read
through the struct kmem_cache image; any other address is NULL.
tests/kernel/test_slab_common_kernel.py holds it to Linux."""

from __future__ import annotations

from pyxdp.asm.assembler import assemble
from pyxdp.btf.btf import BtfKind
from pyxdp.btf.struct_access import member_offset
from pyxdp.btf.vmlinux import core_target
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.memalloc import ARENA_BASE, arena
from pyxdp.vm.memory import STACK_BASE
from pyxdp.vm.slab_common import SLAB_KFUNCS
from pyxdp.vm.task_kfuncs import TASK_BASE


def _read(vm: Interpreter, cache: int, member: str) -> int:
    btf = core_target()
    tid = btf.find("kmem_cache", BtfKind.STRUCT)
    assert tid is not None
    got = member_offset(btf, tid, member)
    assert got is not None
    return vm.mem.load(cache + got[0], got[1])


def _cache(vm: Interpreter, addr: int) -> int:
    return SLAB_KFUNCS["bpf_get_kmem_cache"](vm, addr, 0, 0, 0, 0)


def test_arena_blocks_are_kmalloc_caches() -> None:
    vm = Interpreter(assemble("r0 = 0\nexit"))
    a = arena()
    small, big = a.alloc(24), a.alloc(1000)  # classes 32 and 1024 (8-byte header in)
    try:
        for addr, n in ((small, 32), (small + 23, 32), (small - 8, 32), (big + 999, 1024)):
            c = _cache(vm, addr)
            assert c and _read(vm, c, "object_size") == n and _read(vm, c, "size") == n
            assert _read(vm, c, "align") == 8
            name = _read(vm, c, "name")
            assert vm.mem.read(name, 16).split(b"\0")[0] == f"kmalloc-{n}".encode()
        assert _cache(vm, small) == _cache(vm, small + 8)
        assert _cache(vm, small) != _cache(vm, big)
    finally:
        a.free(small)
        a.free(big)
    assert _cache(vm, small)  # a freed block is still the cache's (the slab page's)


def test_other_addresses_are_null() -> None:
    vm = Interpreter(assemble("r0 = 0\nexit"))
    for addr in (0, 4096, STACK_BASE, ARENA_BASE, TASK_BASE, (1 << 64) - 1):
        assert _cache(vm, addr) == 0
