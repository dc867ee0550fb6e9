"""A program run by the interpreter reaches map values through the pointer a helper returns."""

from __future__ import annotations

import struct

from pyxdp.asm.assembler import assemble
from pyxdp.maps import Map, create_map, map_by_addr
from pyxdp.uapi.bpf import BpfMapType as T
from pyxdp.vm.interpreter import Helper, Interpreter

# value[key] += 1 through the pointer bpf_map_lookup_elem returns; the key is
# the u64 {key} at r10-8 (its first key_size bytes: u32 3 for the u32-key maps).
PROG = """
lddw %r3, {key}
stxdw [%r10-8], %r3
mov %r2, %r10
add %r2, -8
lddw %r1, {handle}
call 1
jeq %r0, 0, out
ldxdw %r1, [%r0+0]
add %r1, 1
stxdw [%r0+0], %r1
mov %r0, 2
exit
out:
mov %r0, 1
exit
"""


def _lookup_helper(cpu: int) -> Helper:
    def fn(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        m = map_by_addr(r1)
        assert m is not None
        return m.lookup_addr(vm.mem.read(r2, m.key_size), cpu)
    return Helper(1, "map_lookup_elem", fn)


def _run(m: Map, cpu: int = 0, key: int = 3) -> int:
    vm = Interpreter(assemble(PROG.format(handle=m.addr, key=key)),
                     helpers={1: _lookup_helper(cpu)})
    return vm.run(regions=m.regions())


def test_program_increments_array_value() -> None:
    m = create_map(T.BPF_MAP_TYPE_ARRAY, 4, 8, 4)
    for _ in range(5):
        assert _run(m) == 2
    assert m.sum(3) == 5


def test_program_on_each_cpu_of_a_percpu_hash() -> None:
    m = create_map(T.BPF_MAP_TYPE_PERCPU_HASH, 4, 8, 4, nr_cpus=2)
    assert _run(m) == 1  # no key yet: NULL
    m[3] = [10, 20]
    _run(m, cpu=0)
    _run(m, cpu=1)
    _run(m, cpu=1)
    assert m[3] == [struct.pack("<Q", 11), struct.pack("<Q", 22)] and m.sum(3) == 33


def test_program_updates_lru_and_lpm_values() -> None:
    lru = create_map(T.BPF_MAP_TYPE_LRU_HASH, 4, 8, 2)
    lru[3] = 0
    _run(lru)
    assert lru.sum(3) == 1
    lpm = create_map(T.BPF_MAP_TYPE_LPM_TRIE, 4 + 4, 8, 4, 1)
    lpm["10.0.0.0/8"] = 0
    # struct bpf_lpm_trie_key_u8 {prefixlen 32, 10.1.2.3} as one little-endian u64
    key = int.from_bytes(struct.pack("<I", 32) + bytes([10, 1, 2, 3]), "little")
    assert _run(lpm, key=key) == 2
    assert _run(lpm, key=key - (10 << 32)) == 1  # 0.1.2.3: no covering prefix
    assert lpm.sum("10.0.0.0/8") == 1
