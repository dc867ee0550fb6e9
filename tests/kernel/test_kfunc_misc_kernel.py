"""bpf_map_sum_elem_count, bpf_modify_return_test_tp and the skb conntrack pair against
Linux: the same programs under BPF_PROG_TEST_RUN on Linux and on pyxdp's interpreter
and JIT. The element count of every hash map type (preallocated or not, per-CPU, LRU)
as userspace and the program add, replace and delete elements, 0 for an array; the
tracepoint kfunc's int in r0 (upper half included); a global function calling
bpf_skb_ct_lookup on its __arg_trusted struct __sk_buff loads and runs. On the JIT
neither kfunc runs Python."""

from __future__ import annotations

import dataclasses
import struct

import pytest

from pyxdp.collection import Collection
from pyxdp.kernel.syscall import possible_cpus
from pyxdp.net.prog import jit_available
from pyxdp.spec import CollectionSpec, MapSpec
from pyxdp.testing.native import python_calls
from pyxdp.testing.verifier_cases import CASES, VerifierCase
from pyxdp.uapi.bpf import BpfMapType as MT
from pyxdp.vm import map_iter, test_run_kfuncs

pytestmark = pytest.mark.kernel

BPF_F_NO_PREALLOC = 1
# The packet's first word is the key; a second word not 0 has the program insert it
# (value 0) before it counts.
SUM = """r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 8
if r4 > r3 goto out
r1 = *(u32 *)(r2 +0)
*(u32 *)(r10 -4) = r1
r1 = *(u32 *)(r2 +4)
if r1 == 0 goto count
r1 = 0
*(u64 *)(r10 -16) = r1
r1 = MAP(hash)
r2 = r10
r2 += -4
r3 = r10
r3 += -16
r4 = 0
call 2
count:
r1 = MAP(hash)
call KFUNC(bpf_map_sum_elem_count)
exit
out:
r0 = 99
exit"""
MAP_TYPES = {
    "hash": (MT.BPF_MAP_TYPE_HASH, 0), "hash_noprealloc": (MT.BPF_MAP_TYPE_HASH,
                                                          BPF_F_NO_PREALLOC),
    "percpu_hash": (MT.BPF_MAP_TYPE_PERCPU_HASH, 0), "lru_hash": (MT.BPF_MAP_TYPE_LRU_HASH, 0),
    "lru_percpu_hash": (MT.BPF_MAP_TYPE_LRU_PERCPU_HASH, 0),
    "array": (MT.BPF_MAP_TYPE_ARRAY, 0),
}


def _spec(asm: str, name: str, map_type: int = MT.BPF_MAP_TYPE_HASH,
          flags: int = 0) -> CollectionSpec:
    spec = VerifierCase(name, asm, None).spec()
    if "hash" not in spec.maps:
        return spec
    return dataclasses.replace(spec, maps={"hash": MapSpec("hash", map_type, 4, 8, 16,
                                                           flags)})


def _count(coll: Collection, key: int, insert: bool) -> int:
    pkt = struct.pack("<II", key, int(insert)) + bytes(56)
    return coll.programs["sum"].test_run(pkt).retval


def _steps(coll: Collection, array: bool, percpu: bool) -> list[int]:
    """Counts as userspace and the program change the map."""
    h = coll.maps["hash"].handle
    val = bytes(8 * (possible_cpus() if percpu else 1))
    for k in (1, 2, 3, 4, 5):
        h.update(struct.pack("<I", k), val)
    got = [_count(coll, 0, False)]
    if not array:
        h.delete(struct.pack("<I", 2))
    got += [_count(coll, 0, False), _count(coll, 7, True), _count(coll, 7, True),
            _count(coll, 8, True)]
    if not array:
        h.delete(struct.pack("<I", 7))
    h.update(struct.pack("<I", 1), val)  # replaces
    got.append(_count(coll, 0, False))
    return got


def _natively(user: Collection, array: bool, percpu: bool) -> tuple[list[int], int]:
    """The counts on pyxdp, and how often the Python kfunc ran for them."""
    got: list[int] = []
    calls = python_calls([map_iter.map_sum_elem_count],
                         lambda: got.extend(_steps(user, array, percpu)))
    return got, calls


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_map_sum_elem_count_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    seen = {}
    for label, (map_type, flags) in MAP_TYPES.items():
        spec = _spec(SUM, "sum", map_type, flags)
        with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                            engine=engine) as user:
            array, percpu = label == "array", "percpu" in label
            want = _steps(kern, array, percpu)
            got, calls = _natively(user, array, percpu)
        assert got == want, label
        assert (calls == 0) == (engine == "jit"), (label, calls)
        seen[label] = want
    # Linux counts the hash maps' elements and keeps no count for an array
    assert seen["hash"] == [5, 4, 5, 5, 6, 5] and seen["array"] == [0] * 6
    assert all(v == seen["hash"] for k, v in seen.items() if k != "array")


# r0 of bpf_modify_return_test_tp(nonce): r0 >> 32 << 16 | (r0 & 0xffff)
NONCES = (7, -5, 0x1_0000_0007, 0x8000_0000, 0xFFFF_FFFF)


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_modify_return_test_tp_as_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    got, want = [], []
    for i, nonce in enumerate(NONCES):
        asm = (f"r1 = {nonce} ll\ncall KFUNC(bpf_modify_return_test_tp)\nr6 = r0\n"
               "r0 >>= 32\nr0 <<= 16\nr6 &= 0xffff\nr0 |= r6\nexit")
        spec = _spec(asm, f"modret{i}")
        with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                            engine=engine) as user:
            want.append(kern.programs[f"modret{i}"].test_run(bytes(64)).retval)
            calls = python_calls([test_run_kfuncs.modify_return_test_tp], lambda u=user, n=i:
                                 got.append(u.programs[f"modret{n}"].test_run(
                                     bytes(64)).retval))
            assert (calls == 0) == (engine == "jit"), calls
    assert got == want
    assert want[0] == 7 and want[1] == 0xFFFB  # the int zero-extended in r0


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_skb_ct_global_function_runs(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    (case,) = (c for c in CASES if c.name == "skb_ct_global")
    spec = case.spec()
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        want = kern.programs[case.name].test_run(bytes(64)).retval
        assert user.programs[case.name].test_run(bytes(64)).retval == want == 2
