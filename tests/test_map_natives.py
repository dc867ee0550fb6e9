"""Native twins of the map helpers on the JIT against the Python reference (the
interpreter): bpf_map_lookup_elem on a DEVMAP and a DEVMAP_HASH, bpf_redirect_map into a
DEVMAP_HASH - the same r0, values and redirect state over randomized maps and keys
(hits, misses, deleted and replaced entries, bad flags, broadcasts), and no Python per
packet on the JIT."""

from __future__ import annotations

import random
import struct
from typing import Any

import numpy as np
import pytest

import pyxdp.maps.devmap as devmap
from pyxdp.collection import Collection
from pyxdp.errors import MapError
from pyxdp.net import filter as net_filter
from pyxdp.net.prog import jit_available
from pyxdp.spec import MapSpec
from pyxdp.testing.native import agree_natively, python_calls
from pyxdp.testing.programs import asm_collection, with_callback
from pyxdp.uapi.bpf import BpfMapType, MapFlag
from pyxdp.vm import helpers as vm_helpers
from pyxdp.vm.helpers import RunContext
from pyxdp.vm.jit.engine import compile_together

pytestmark = pytest.mark.skipif(not jit_available(), reason="llvmlite is not installed: no JIT")

DEVMAP = int(BpfMapType.BPF_MAP_TYPE_DEVMAP)
DEVMAP_HASH = int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH)
PYTHON_REFERENCE = (devmap, vm_helpers._map_lookup_elem, net_filter._redirect_map)

# The packet's first u32 is the key, the second bpf_redirect_map's flags.
_KEYS = """
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 8
if r4 > r3 goto short
r6 = *(u32 *)(r2 +0)
r7 = *(u32 *)(r2 +4)
"""
# bpf_map_lookup_elem: the value's ifindex, or 2 (XDP_PASS) when NULL.
LOOKUP = _KEYS + """
*(u32 *)(r10 -4) = r6
r2 = r10
r2 += -4
r1 = map[fd:0]
call 1
if r0 == 0 goto short
r0 = *(u32 *)(r0 +0)
exit
short:
r0 = 2
exit
"""
# bpf_redirect_map(&m, key, flags)
REDIRECT = _KEYS + """
r1 = map[fd:0]
r2 = r6
r3 = r7
call 51
exit
short:
r0 = 2
exit
"""
# By the packet's second u32: 1 update (the key as value), 2 delete, else a lookup.
HASH_OPS = _KEYS + """
*(u32 *)(r10 -4) = r6
if r7 == 1 goto update
if r7 == 2 goto delete
r1 = map[fd:0]
r2 = r10
r2 += -4
call 1
if r0 == 0 goto short
r0 = *(u32 *)(r0 +0)
exit
update:
*(u64 *)(r10 -16) = r6
r1 = map[fd:0]
r2 = r10
r2 += -4
r3 = r10
r3 += -16
r4 = 0
call 2
exit
delete:
r1 = map[fd:0]
r2 = r10
r2 += -4
call 3
exit
short:
r0 = 2
exit
"""
HASHES = (int(BpfMapType.BPF_MAP_TYPE_HASH), int(BpfMapType.BPF_MAP_TYPE_PERCPU_HASH),
          int(BpfMapType.BPF_MAP_TYPE_LRU_HASH), int(BpfMapType.BPF_MAP_TYPE_LRU_PERCPU_HASH))
FLAGS = (0, 1, 2, 3, 4, 8, 16, 24, 8 | 2, 16 | 1, 32, 1 << 31)


def _frames(rows: list[tuple[int, int]]) -> np.ndarray:
    frames = np.zeros((len(rows), 512), np.uint8)
    for i, (key, flags) in enumerate(rows):
        frames[i, 256:264] = np.frombuffer(struct.pack("<II", key, flags), np.uint8)
    return frames


def _fill(m: Any, rng: random.Random, keys: list[int], map_type: int) -> None:
    """Random entries (new and replaced), then some deleted (tombstones in the index)."""
    m.handle.ifindex_ok = lambda i: True
    for k in rng.sample(keys, 10):
        try:
            m.update(k, rng.randrange(1, 1 << 20))
        except MapError:  # E2BIG: past a DEVMAP's end, or a full DEVMAP_HASH
            pass
    present = [k for k in keys if m.get(k) is not None]
    for k in rng.sample(present, len(present) // 3):
        if map_type == DEVMAP_HASH or rng.random() < 0.5:
            del m[k]
        else:
            m.update(k, 0)  # a DEVMAP slot cleared


def _run(text: str, map_type: int, value_size: int, seed: int, engine: str
         ) -> list[tuple[object, ...]]:
    rng = random.Random(seed)
    max_entries = 16
    pool = (list(range(max_entries + 4)) if map_type == DEVMAP
            else rng.sample(range(1 << 32), 40) + [0, 1, 0xFFFF_FFFF])
    spec = asm_collection(text, [MapSpec("m", map_type, 4, value_size, max_entries)])
    out: list[tuple[object, ...]] = []
    with Collection(spec, "userspace", engine=engine) as c:
        m = c.maps["m"]
        prog = c.programs["t"].handle
        for _round in range(3):
            _fill(m, rng, pool, map_type)
            rows = [(rng.choice(pool) if rng.random() < 0.9 else rng.randrange(1 << 32),
                     rng.choice(FLAGS)) for _ in range(48)]
            ctx = RunContext()
            r = prog.run_batch(_frames(rows), 256, 64, ctx=ctx)
            out.append((r.action.tolist(), r.redirect_map_type.tolist(),
                        r.redirect_index.tolist(), r.redirect_flags.tolist(),
                        (r.redirect_map_id == m.handle.id).tolist(),
                        sorted(m.items())))
            # the redirect state one frame leaves (the target's value included)
            for key, flags in rows[:6]:
                ctx = RunContext()
                r = prog.run_batch(_frames([(key, flags)]), 256, 64, ctx=ctx)
                ri = ctx.ri
                out.append((int(r.action[0]), None if ri is None else
                            (ri.tgt_index, ri.tgt_value, ri.map_type, ri.flags,
                             ri.map is m.handle, ri.map_id == m.handle.id)))
    return out


PROGRAMS = {"lookup": LOOKUP, "redirect": REDIRECT, "hash_ops": HASH_OPS}


@pytest.mark.parametrize(("what", "map_type", "value_size"), [
    ("lookup", DEVMAP, 4), ("lookup", DEVMAP, 8), ("lookup", DEVMAP_HASH, 4),
    ("lookup", DEVMAP_HASH, 8), ("redirect", DEVMAP_HASH, 4), ("redirect", DEVMAP_HASH, 8),
    ("redirect", DEVMAP, 8)])
def test_jit_twin_is_python(what: str, map_type: int, value_size: int) -> None:
    text = PROGRAMS[what]
    for seed in range(3):
        assert _run(text, map_type, value_size, seed, "jit") == \
            _run(text, map_type, value_size, seed, "interp")


@pytest.mark.parametrize(("what", "map_type"), [
    ("lookup", DEVMAP), ("lookup", DEVMAP_HASH), ("redirect", DEVMAP_HASH)])
def test_no_python_per_packet_on_the_jit(what: str, map_type: int) -> None:
    spec = asm_collection(PROGRAMS[what], [MapSpec("m", map_type, 4, 4, 8)])
    for engine, want in (("jit", 0), ("interp", 64)):
        with Collection(spec, "userspace", engine=engine) as c:
            c.maps["m"].handle.ifindex_ok = lambda i: True
            c.maps["m"].update(3, 7)
            c.maps["m"].update(5, 9)
            prog = c.programs["t"].handle
            frames = _frames([(k % 8, k % 3) for k in range(64)])
            prog.run_batch(frames.copy(), 256, 64, ctx=RunContext())  # compiled
            calls = python_calls(PYTHON_REFERENCE, lambda p=prog, f=frames: p.run_batch(
                f.copy(), 256, 64, ctx=RunContext()))
            assert (calls == 0) if want == 0 else calls >= want


def _hash_ops(map_type: int, seed: int, engine: str) -> list[object]:
    rng = random.Random(seed)
    pool = rng.sample(range(1 << 32), 30) + [0, 0xFFFF_FFFF]
    spec = asm_collection(HASH_OPS, [MapSpec("m", map_type, 4, 8, 16)])
    out: list[object] = []
    with Collection(spec, "userspace", engine=engine) as c:
        prog = c.programs["t"].handle
        for _round in range(4):
            # updates past max_entries (E2BIG, or an LRU eviction), deletes of absent keys
            rows = [(rng.choice(pool), rng.choice((0, 1, 1, 2, 2))) for _ in range(96)]
            r = prog.run_batch(_frames(rows), 256, 64, ctx=RunContext())
            out += [r.action.tolist(), sorted(c.maps["m"].items())]
    return out


@pytest.mark.parametrize("map_type", HASHES)
def test_hash_delete_twin_is_python(map_type: int) -> None:
    """bpf_map_delete_elem (with lookups and updates between) on the four hash types:
    the same returns and the same map, the index's tombstones reused."""
    for seed in range(2):
        assert _hash_ops(map_type, seed, "jit") == _hash_ops(map_type, seed, "interp")


def test_hash_delete_without_python_on_the_jit() -> None:
    from pyxdp.maps import hashtab
    spec = asm_collection(HASH_OPS, [MapSpec("m", HASHES[0], 4, 8, 16)])
    with Collection(spec, "userspace", engine="jit") as c:
        prog = c.programs["t"].handle
        frames = _frames([(k % 8, 1 + k // 32) for k in range(64)])  # updates, deletes
        prog.run_batch(frames.copy(), 256, 64, ctx=RunContext())
        calls = python_calls((hashtab, vm_helpers._map_delete_elem), lambda: prog.run_batch(
            frames.copy(), 256, 64, ctx=RunContext()))
        assert calls == 0
        assert len(c.maps["m"]) == 0


# -- the clocks ------------------------------------------------------------------------------

def _clock_program(helper_id: int) -> str:
    """arr[0] = the helper's r0."""
    return f"""
call {helper_id}
*(u64 *)(r10 -16) = r0
*(u32 *)(r10 -4) = 0
r1 = map[fd:0]
r2 = r10
r2 += -4
r3 = r10
r3 += -16
r4 = 0
call 2
r0 = 2
exit
"""


@pytest.mark.parametrize(("helper_id", "name"), [
    (125, "_ktime_get_boot_ns"), (160, "_ktime_get_coarse_ns"), (208, "_ktime_get_tai_ns"),
    (118, "_jiffies64"), (42, "_get_numa_node_id")])
@pytest.mark.parametrize("opt_level", [0, 2])
def test_clock_twins_read_pythons_clock(helper_id: int, name: str, opt_level: int) -> None:
    """The JIT's value lies between the Python helper's readings before and after the run,
    and no Python runs for it; at -O0 too, where LLVM keeps every division a division
    (and one in 128 bits would call a library the JIT does not link)."""
    reference = getattr(vm_helpers, name)
    spec = asm_collection(_clock_program(helper_id),
                          [MapSpec("arr", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 1)])
    with compile_together(opt_level):
        coll = Collection(spec, "userspace", engine="jit")
    with coll as c:
        prog = c.programs["t"].handle
        frames = _frames([(0, 0)] * 4)
        prog.run_batch(frames.copy(), 256, 64, ctx=RunContext())
        for _ in range(3):
            before = reference(None, 0, 0, 0, 0, 0)
            calls = python_calls([reference], lambda p=prog, f=frames: p.run_batch(
                f.copy(), 256, 64, ctx=RunContext()))
            after = reference(None, 0, 0, 0, 0, 0)
            assert calls == 0
            assert before <= c.maps["arr"][0] <= after


# -- bpf_map_lookup_percpu_elem ------------------------------------------------------------

# The packet's second u32 is the CPU (bit 32 set as well: only the low 32 bits count).
PERCPU_LOOKUP = _KEYS + """
*(u32 *)(r10 -4) = r6
r1 = map[fd:0]
r2 = r10
r2 += -4
r3 = 1 ll
r3 <<= 32
r3 |= r7
call 195
if r0 == 0 goto short
r0 = *(u32 *)(r0 +0)
exit
short:
r0 = 2
exit
"""
PERCPU = (int(BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY), int(BpfMapType.BPF_MAP_TYPE_PERCPU_HASH),
          int(BpfMapType.BPF_MAP_TYPE_LRU_PERCPU_HASH))


def _percpu_lookups(map_type: int, seed: int, engine: str) -> list[object]:
    rng = random.Random(seed)
    array = map_type == PERCPU[0]
    pool = list(range(10)) if array else rng.sample(range(1 << 32), 12)
    spec = asm_collection(PERCPU_LOOKUP, [MapSpec("m", map_type, 4, 8, 8)])
    out: list[object] = []
    with Collection(spec, "userspace", engine=engine) as c:
        h = c.maps["m"].handle
        prog = c.programs["t"].handle
        for _round in range(3):
            for k in rng.sample(pool, 6):
                values = [rng.randrange(1, 1 << 32) for _ in range(h.nr_cpus)]
                try:
                    h.update(struct.pack("<I", k), struct.pack(f"<{h.nr_cpus}Q", *values))
                except MapError:  # past the array's end, or the hash is full
                    pass
            if not array:
                for k in rng.sample(pool, 3):
                    h.try_delete(struct.pack("<I", k))
            cpus = [*range(h.nr_cpus + 2), 0xFFFF_FFFF]
            rows = [(rng.choice(pool) if rng.random() < 0.9 else rng.randrange(1 << 32),
                     rng.choice(cpus)) for _ in range(64)]
            r = prog.run_batch(_frames(rows), 256, 64, ctx=RunContext())
            out.append(r.action.tolist())
    return out


@pytest.mark.parametrize("map_type", PERCPU)
def test_percpu_lookup_twin_is_python(map_type: int) -> None:
    """Any CPU's value, NULL past the last CPU, absent and deleted keys; no Python."""
    for seed in range(2):
        assert _percpu_lookups(map_type, seed, "jit") == _percpu_lookups(map_type, seed,
                                                                         "interp")
    calls = python_calls([vm_helpers._map_lookup_percpu_elem],
                         lambda: _percpu_lookups(map_type, 0, "jit"))
    assert calls == 0


# -- LPM trie lookups -----------------------------------------------------------------------

def _lpm_program(data_size: int) -> str:
    """The key's prefixlen is the packet's first u32, its data the second's low bytes."""
    store = {4: "*(u32 *)(r10 -4) = r7", 1: "*(u8 *)(r10 -4) = r7"}[data_size]
    return _KEYS + f"""
*(u32 *)(r10 -8) = r6
{store}
r1 = map[fd:0]
r2 = r10
r2 += -8
call 1
if r0 == 0 goto short
r0 = *(u32 *)(r0 +0)
exit
short:
r0 = 2
exit
"""


def _lpm_lookups(data_size: int, seed: int, engine: str) -> list[object]:
    from pyxdp.maps.lpm_trie import lpm_key
    rng = random.Random(seed)
    bits = 8 * data_size
    bases = [rng.getrandbits(bits) for _ in range(3)]

    def near() -> int:  # keys sharing long prefixes with few bases: nested prefixes
        return rng.choice(bases) ^ (rng.getrandbits(bits) >> rng.randrange(bits + 1))

    spec = asm_collection(_lpm_program(data_size), [MapSpec(
        "m", int(BpfMapType.BPF_MAP_TYPE_LPM_TRIE), 4 + data_size, 8, 24,
        int(MapFlag.BPF_F_NO_PREALLOC))])
    out: list[object] = []
    with Collection(spec, "userspace", engine=engine) as c:
        h = c.maps["m"].handle
        prog = c.programs["t"].handle
        present: list[bytes] = []
        for _round in range(4):
            for _ in range(8):
                key = lpm_key(rng.randrange(bits + 1), near().to_bytes(data_size, "big"))
                try:
                    h.update(key, struct.pack("<Q", rng.randrange(1, 1 << 32)))
                    present.append(key)
                except MapError:  # ENOSPC: full
                    pass
            for key in rng.sample(present, min(3, len(present))):
                if h.try_delete(key) == 0:
                    present.remove(key)
            rows = [(rng.choice([bits, bits, rng.randrange(bits + 1), bits + 1, 1 << 31]),
                     int.from_bytes(near().to_bytes(data_size, "big").ljust(4, b"\0"),
                                    "little")) for _ in range(64)]
            r = prog.run_batch(_frames(rows), 256, 64, ctx=RunContext())
            out.append(r.action.tolist())
    return out


@pytest.mark.parametrize("data_size", [4, 1])
def test_lpm_lookup_twin_is_python(data_size: int) -> None:
    """The longest present prefix (intermediate nodes skipped), misses, deleted prefixes,
    prefix lengths past the data; no Python per lookup on the JIT."""
    from pyxdp.maps import lpm_trie
    agree_natively(lambda seed, engine: _lpm_lookups(data_size, seed, engine),
                    [lpm_trie.LpmTrie.lookup_addr])


# -- queue and stack maps -------------------------------------------------------------------

# By the packet's second u32: low byte 1 pop, 2 peek (r0: the value's low half, or the
# error), else push the key with the flags in the upper bytes.
RING_OPS = _KEYS + """
*(u64 *)(r10 -8) = r6
r8 = r7
r8 >>= 8
r7 &= 255
if r7 == 1 goto pop
if r7 == 2 goto peek
r1 = map[fd:0]
r2 = r10
r2 += -8
r3 = r8
call 87
exit
pop:
r1 = map[fd:0]
r2 = r10
r2 += -8
call 88
if r0 != 0 goto out
r0 = *(u32 *)(r10 -8)
out:
exit
peek:
r1 = map[fd:0]
r2 = r10
r2 += -8
call 89
if r0 != 0 goto out2
r0 = *(u32 *)(r10 -8)
out2:
exit
short:
r0 = 2
exit
"""


def _ring_ops(map_type: int, seed: int, engine: str) -> list[object]:
    rng = random.Random(seed)
    spec = asm_collection(RING_OPS, [MapSpec("m", map_type, 0, 8, 5)])
    out: list[object] = []
    with Collection(spec, "userspace", engine=engine) as c:
        prog = c.programs["t"].handle
        for _round in range(3):
            # pushes into a full map (E2BIG, or the oldest dropped with BPF_EXIST), bad
            # flags, pops and peeks of an empty one, the ring wrapping
            rows = [(rng.randrange(1 << 32), rng.choice(
                (0, 0, 0x200, 0x200, 0x100, 0x300, 0x400, 1, 1, 2))) for _ in range(80)]
            r = prog.run_batch(_frames(rows), 256, 64, ctx=RunContext())
            out += [r.action.tolist(), c.maps["m"].handle.contents()]
    return out


@pytest.mark.parametrize("map_type", [int(BpfMapType.BPF_MAP_TYPE_QUEUE),
                                      int(BpfMapType.BPF_MAP_TYPE_STACK)])
def test_queue_stack_twins_are_python(map_type: int) -> None:
    agree_natively(lambda seed, engine: _ring_ops(map_type, seed, engine),
                    [vm_helpers._map_push_elem, vm_helpers._pop_or_peek])


# -- bpf_loop -------------------------------------------------------------------------------

# bpf_loop(nr from the packet's first u32, cb, &counter, flags: the second u32's upper
# bytes): the callback counts into the stack word and stops the loop (returns 1) once it
# reaches the second u32's low byte; r0 = bpf_loop's return.
LOOP = _KEYS + """
r8 = r7
r8 >>= 8
r7 &= 255
*(u64 *)(r10 -8) = r7
*(u64 *)(r10 -16) = 0
r1 = r6
r2 = subprog[cb]
r3 = r10
r3 += -16
r4 = r8
call 181
exit
short:
r0 = 2
exit
cb:
r3 = *(u64 *)(r2 +0)
r3 += 1
*(u64 *)(r2 +0) = r3
r4 = *(u64 *)(r2 +8)
r0 = 0
if r3 != r4 goto more
r0 = 1
more:
exit
"""


def _loop_spec() -> Any:
    return with_callback(asm_collection(LOOP))


def _loops(seed: int, engine: str) -> list[int]:
    rng = random.Random(seed)
    with Collection(_loop_spec(), "userspace", engine=engine) as c:
        prog = c.programs["t"].handle
        # counts below, at and past the stop, 0 loops, too many (E2BIG), flags (EINVAL)
        rows = [(rng.choice([0, 1, 5, 40, rng.randrange(300), (1 << 23) + 1, 1 << 31]),
                 rng.randrange(256) | rng.choice([0, 0, 0, 1 << 8])) for _ in range(64)]
        r = prog.run_batch(_frames(rows), 256, 64, ctx=RunContext())
        return [*r.action.tolist(), *r.faulted.tolist()]


def test_loop_twin_is_python() -> None:
    agree_natively(_loops, [vm_helpers._loop])


# -- LPM trie updates and deletes from a program ---------------------------------------------

# Packet: u32 op (0 update, else delete), u32 prefixlen, u32 data (its low data_size
# bytes), u32 flags, u64 value; r0 goes back into bytes 24-31.
def _lpm_write_program(data_size: int) -> str:
    store = {4: "*(u32 *)(r10 -4) = r1", 1: "*(u8 *)(r10 -4) = r1"}[data_size]
    return f"""
r7 = *(u32 *)(r1 +0)
r2 = *(u32 *)(r1 +4)
r4 = r7
r4 += 32
if r4 > r2 goto out
r1 = *(u32 *)(r7 +4)
*(u32 *)(r10 -8) = r1
r1 = *(u32 *)(r7 +8)
{store}
r1 = *(u64 *)(r7 +16)
*(u64 *)(r10 -16) = r1
r6 = *(u32 *)(r7 +0)
r1 = map[fd:0]
r2 = r10
r2 += -8
if r6 != 0 goto del
r3 = r10
r3 += -16
r4 = *(u32 *)(r7 +12)
call 2
goto done
del:
call 3
done:
*(u64 *)(r7 +24) = r0
out:
r0 = 2
exit
"""


def _lpm_writes(data_size: int, seed: int, engine: str) -> list[object]:
    rng = random.Random(seed)
    bits = 8 * data_size
    bases = [rng.getrandbits(bits) for _ in range(3)]
    spec = asm_collection(_lpm_write_program(data_size), [MapSpec(
        "m", int(BpfMapType.BPF_MAP_TYPE_LPM_TRIE), 4 + data_size, 12, 10,
        int(MapFlag.BPF_F_NO_PREALLOC))])
    out: list[object] = []
    with Collection(spec, "userspace", engine=engine) as c:
        h = c.maps["m"].handle
        prog = c.programs["t"].handle
        keys: list[tuple[int, int]] = []
        for _ in range(24):  # nested prefixes: few bases, varied lengths
            plen = rng.choice([bits, rng.randrange(bits + 1)])
            keys.append((plen, rng.choice(bases) ^ (rng.getrandbits(bits) >> plen)))
        for _round in range(4):
            n = 96
            frames = np.zeros((n, 512), np.uint8)
            for i in range(n):
                plen, data = rng.choice(keys)
                if rng.random() < 0.03:
                    plen = bits + 1 + rng.randrange(4)  # past the data: EINVAL
                flags = rng.choice([0, 0, 0, 1, 2, 4, 1 << 31])
                frames[i, 256:288] = np.frombuffer(struct.pack(
                    "<IIIIQQ", rng.random() < 0.25, plen, data, flags,
                    rng.getrandbits(64), 0), np.uint8)
            prog.run_batch(frames, 256, 64, ctx=RunContext())
            out.append(frames[:, 280:288].tobytes())
            # the whole trie, node for node: pool, free stack, values, and the key order
            out += [a.tobytes() for a in (h.plen, h.flags, h.child, h.data, h.free, h.hdr,
                                          h.value_data)]
            out.append(list(h.keys()))
    return out


@pytest.mark.parametrize("data_size", [4, 1])
def test_lpm_update_delete_twins_are_python(data_size: int) -> None:
    """Inserts (empty slots, above a node, under a new intermediate node), replacements,
    BPF_NOEXIST/BPF_EXIST/bad flags, a full trie, deletes collapsing intermediate nodes,
    misses and prefix lengths past the data: the same r0 and the same trie, node for node;
    no Python per update or delete on the JIT."""
    from pyxdp.maps import lpm_trie
    agree_natively(lambda seed, engine: _lpm_writes(data_size, seed, engine),
                   [lpm_trie.LpmTrie.update, lpm_trie.LpmTrie.delete])


# -- bpf_for_each_map_elem -------------------------------------------------------------------

# bpf_for_each_map_elem(map, cb, &{sum, count, stop}, flags) with stop and flags from the
# packet's two u32: the callback adds key * 1000 + value to sum, adds the key to the value,
# counts, and stops the walk (returns 1) once count reaches stop; r0, sum and count go
# into packet bytes 8-31.
FOR_EACH = """
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 32
if r4 > r3 goto short
r6 = *(u32 *)(r2 +0)
r7 = *(u32 *)(r2 +4)
*(u64 *)(r10 -24) = 0
*(u64 *)(r10 -16) = 0
*(u64 *)(r10 -8) = r6
r8 = r2
r1 = map[fd:0]
r2 = subprog[cb]
r3 = r10
r3 += -24
r4 = r7
call 164
*(u64 *)(r8 +8) = r0
r1 = *(u64 *)(r10 -24)
*(u64 *)(r8 +16) = r1
r1 = *(u64 *)(r10 -16)
*(u64 *)(r8 +24) = r1
short:
r0 = 2
exit
cb:
r5 = *(u32 *)(r2 +0)
r0 = *(u64 *)(r3 +0)
r1 = r5
r1 *= 1000
r1 += r0
r0 += r5
*(u64 *)(r3 +0) = r0
r0 = *(u64 *)(r4 +0)
r0 += r1
*(u64 *)(r4 +0) = r0
r1 = *(u64 *)(r4 +8)
r1 += 1
*(u64 *)(r4 +8) = r1
r2 = *(u64 *)(r4 +16)
r0 = 0
if r1 != r2 goto more
r0 = 1
more:
exit
"""


# The callback first looks its own key up through its map argument (a Python helper:
# the map is no constant there) and deletes the key after it: later elements the walk
# took into its snapshot are skipped.
FOR_EACH_DELETE = FOR_EACH.replace("""cb:
""", """cb:
r6 = r1
r7 = r2
r8 = r3
r9 = r4
call 1
if r0 == 0 goto gone
r1 = *(u32 *)(r7 +0)
r1 += 1
*(u32 *)(r10 -4) = r1
r1 = r6
r2 = r10
r2 += -4
call 3
r2 = r7
r3 = r8
r4 = r9
goto on
gone:
r0 = 1
exit
on:
""")


def _for_each_spec(map_type: int, text: str = FOR_EACH) -> Any:
    return with_callback(asm_collection(text, [MapSpec("m", map_type, 4, 8, 12)]))


def _for_each(map_type: int, seed: int, engine: str, text: str = FOR_EACH) -> list[object]:
    rng = random.Random(seed)
    out: list[object] = []
    with Collection(_for_each_spec(map_type, text), "userspace", engine=engine) as c:
        m = c.maps["m"].handle
        prog = c.programs["t"].handle
        keys = range(12) if map_type in _ARRAY_TYPES else rng.sample(range(40), 12)
        for k in keys:
            m.update(struct.pack("<I", k), b"".join(
                struct.pack("<Q", rng.randrange(1000)) for _ in range(m.nr_cpus if m.percpu
                                                                      else 1)))
        for cpu in (0, 1):
            rows = [(rng.choice([0, 1, 5, 12, 13, rng.randrange(20)]),
                     rng.choice([0] * 12 + [1, 1 << 20])) for _ in range(48)]
            frames = _frames(rows)
            r = prog.run_batch(frames, 256, 64, ctx=RunContext(cpu=cpu % m.nr_cpus))
            out += [r.action.tolist(), frames[:, 256:288].tobytes()]
            if map_type not in _ARRAY_TYPES:  # a walk over a changed table
                for k in rng.sample(list(m.keys()), 3):
                    m.delete(k)
                m.update(struct.pack("<I", 40 + cpu), bytes(8 * (m.nr_cpus if m.percpu
                                                                   else 1)))
        out.append(sorted(m.items()))
    return out


_ARRAY_TYPES = (int(BpfMapType.BPF_MAP_TYPE_ARRAY), int(BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY))


@pytest.mark.parametrize("map_type", [*_ARRAY_TYPES, int(BpfMapType.BPF_MAP_TYPE_HASH),
                                      int(BpfMapType.BPF_MAP_TYPE_PERCPU_HASH)])
def test_for_each_twin_is_python(map_type: int) -> None:
    """Every index of an array in order, a hash map's elements in index order; the
    callback's key and value (written through), stops at any count, a full walk, flags
    (EINVAL); the CPU's values of a per-CPU map."""
    from pyxdp.vm import helpers_more
    agree_natively(lambda seed, engine: _for_each(map_type, seed, engine),
                   [helpers_more._for_each_map_elem])


def test_for_each_hash_changed_by_its_callback() -> None:
    """The callback deletes elements the walk still has to reach (skipped, as the Python
    helper's snapshot skips them) and hands its key to a Python helper (the key window is
    memory Python sees too)."""
    from pyxdp.vm import helpers_more
    agree_natively(lambda seed, engine: _for_each(int(BpfMapType.BPF_MAP_TYPE_HASH), seed,
                                                  engine, FOR_EACH_DELETE),
                   [helpers_more._for_each_map_elem])
