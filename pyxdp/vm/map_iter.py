"""``bpf_map_sum_elem_count`` of ``kernel/bpf/map_iter.c`` (Linux 6.18, every program
type).

The kfunc sums a map's per-CPU ``elem_count`` counters: 0 for a map that keeps none
(``bpf_map_init_elem_count`` is called by ``htab_map_alloc`` alone, so every map but
the hash family answers 0). The hash maps - plain, per-CPU, LRU, LRU per-CPU, hash of
maps, preallocated or not - count one up for each element that enters the table
(``inc_elem_count``, ``alloc_htab_elem``'s freelist pop, ``prealloc_lru_pop``) and
one down for each that leaves it (deletion, replacement, LRU eviction), so the sum is
the number of elements the map holds, whichever side (program or syscall) changed it.
The result is an ``s64``.

On the JIT the twin reads the hash map's element count from its header, for each map
the program names; a hash of maps (no native hash layout) takes the Python path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyxdp.uapi.bpf import BpfMapType as MT
from pyxdp.vm.jit.abi import SLOW, Natives
from pyxdp.vm.jit.ir import Text, c64
from pyxdp.vm.jit.natives import HelperNative, map_desc, register_kfunc
from pyxdp.vm.map_space import map_at

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["MAP_ITER_KFUNCS", "map_sum_elem_count"]

M64 = 0xFFFF_FFFF_FFFF_FFFF
# The maps htab_map_alloc makes: the ones with an elem_count.
ELEM_COUNTED = frozenset({MT.BPF_MAP_TYPE_HASH, MT.BPF_MAP_TYPE_PERCPU_HASH,
                          MT.BPF_MAP_TYPE_LRU_HASH, MT.BPF_MAP_TYPE_LRU_PERCPU_HASH,
                          MT.BPF_MAP_TYPE_HASH_OF_MAPS})
_COUNT = 0  # the hash map header's word of its element count (pyxdp.maps.hashtab)


def map_sum_elem_count(vm: Interpreter, r1: int, r2: int, r3: int, r4: int,
                       r5: int) -> int:
    """``bpf_map_sum_elem_count(map)``: the map's elements, 0 for a map without a count."""
    m = map_at(r1)
    return len(m) & M64 if m.map_type in ELEM_COUNTED else 0


def _sum_fn(natives: Natives) -> str:
    f = Text()
    f.at("entry")
    for i, m in enumerate(natives.maps):
        hit, nxt = f.label(f"m{i}"), f.label(f"n{i}")
        f.cbr(f.ins(f"icmp eq i64 %r1, {c64(m.addr)}"), hit, nxt)
        f.at(hit)
        if m.kind == "hash":
            f.do(f"ret i64 {f.word(map_desc(f, m, 'hdr'), _COUNT, 'i64', '')}")
        elif m.map_type in ELEM_COUNTED:
            f.do(f"ret i64 {c64(SLOW)}")
        else:
            f.do("ret i64 0")
        f.at(nxt)
    f.do(f"ret i64 {c64(SLOW)}")  # no map the program names: Python decides
    return f.text("define internal i64 @map_sum_elem_count(ptr %ctx, i64 %r1) nounwind")


register_kfunc("bpf_map_sum_elem_count", map_sum_elem_count,
               HelperNative("map_sum_elem_count", 1, _sum_fn))

# The kfuncs by name (bound as private helpers, like the iterator kfuncs).
MAP_ITER_KFUNCS = {"bpf_map_sum_elem_count": map_sum_elem_count}
