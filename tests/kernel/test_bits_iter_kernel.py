"""The bits iterator kfuncs against Linux: samples/bits_iter.o under BPF_PROG_TEST_RUN on
Linux and on pyxdp's interpreter and JIT, over bits in a map value, on the stack, in the
packet and at raw addresses (NULL, user, non-canonical, vsyscall and kernel ones): the
same returns (-EINVAL, -E2BIG, -EFAULT, -ERANGE), bits, order and copy semantics."""

from __future__ import annotations

import errno
import struct
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.prog import jit_available

pytestmark = pytest.mark.kernel

OBJ = Path(__file__).resolve().parents[2] / "samples" / "bits_iter.o"
NWORDS = 520
MAP, STACK, PKT, RAW = range(4)
M64 = (1 << 64) - 1

WORDS = [0] * NWORDS
WORDS[0], WORDS[1], WORDS[5] = 0xF7310, 1 << 63 | 5, 1 << 63 | 1
WORDS[510], WORDS[511] = 3, 1 << 40
WORDS[300] = 0xFFFF_FFFF_FFFF_FFFF

# (where, nr_words, offset, mutate, raw address): every case stays inside the memory it
# names (a read past a map value's end reads on into kernel memory on Linux).
CASES = [
    (MAP, 1, 0, 0, 0), (MAP, 2, 0, 0, 0), (MAP, 0, 0, 0, 0), (MAP, 511, 0, 0, 0),
    (MAP, 512, 0, 0, 0), (MAP, 1 << 31, 0, 0, 0), (MAP, 3, 299, 0, 0), (MAP, 2, 510, 0, 0),
    (MAP, 9, 511, 0, 0), (STACK, 1, 0, 0, 0), (STACK, 2, 0, 0, 0), (STACK, 2, 510, 0, 0),
    (PKT, 1, 0, 0, 0), (PKT, 3, 7, 0, 0), (PKT, 64, 0, 0, 0),
    (RAW, 1, 0, 0, 0), (RAW, 2, 0, 0, 0), (RAW, 1, 0, 0, 1), (RAW, 2, 0, 0, 1),
    (RAW, 1, 0, 0, -1), (RAW, 2, 0, 0, -1), (RAW, 2, 0, 0, 0xFFFF_8000_0000_0000),
    (RAW, 2, 0, 0, 0x8000_0000_0000), (RAW, 1, 0, 0, 0xFFFF_FFFF_FF60_0000),
    (RAW, 2, 0, 0, 0xFFFF_FFFF_FF60_0008),
    # the loop sets every bit of the source: the iterator walks its copy
    (MAP, 1, 0, 1, 0), (MAP, 3, 0, 1, 0), (STACK, 2, 0, 1, 0),
]


def _run(coll: Collection, case: tuple[int, int, int, int, int]) -> tuple[int, ...]:
    where, nr_words, off, mutate, raw = case
    coll.maps["cfg"].handle.update(bytes(4), struct.pack("<IIIIQ", where, nr_words, off,
                                                         mutate, raw & M64))
    coll.maps["src"].handle.update(bytes(4), struct.pack(f"<{NWORDS}Q", *WORDS))
    r = coll.programs["xdp_bits"].test_run(bytes(range(256)) * 2)
    out = coll.maps["out"].handle
    return (r.retval, *(struct.unpack("<q", out.lookup(struct.pack("<I", i)) or b"")[0]
                        for i in range(4)))


def _nested(coll: Collection) -> int:
    coll.maps["src"].handle.update(bytes(4), struct.pack(f"<{NWORDS}Q", *WORDS))
    assert coll.programs["xdp_bits_nested"].test_run(bytes(64)).retval == 2
    raw = coll.maps["out"].handle.lookup(bytes(4))
    assert raw is not None
    return int(struct.unpack("<q", raw)[0])


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_bits_iter_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = load_collection_spec(OBJ)
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        got = {}
        for case in CASES:
            k = _run(kern, case)
            assert _run(user, case) == k, case
            got[case] = k[1]
        assert _nested(user) == _nested(kern) > 0
    # Linux took every path the cases aim at
    assert got[MAP, 0, 0, 0, 0] == got[RAW, 1, 0, 0, 0] == -errno.EINVAL
    assert got[MAP, 512, 0, 0, 0] == got[MAP, 1 << 31, 0, 0, 0] == -errno.E2BIG
    assert got[RAW, 1, 0, 0, 1] == got[RAW, 2, 0, 0, -1] == -errno.EFAULT
    assert got[RAW, 2, 0, 0, 1] == got[RAW, 2, 0, 0, 0x8000_0000_0000] == -errno.ERANGE
    assert got[RAW, 2, 0, 0, 0xFFFF_FFFF_FF60_0008] == -errno.ERANGE


# new's int return in r0, upper half included (returned as r0 >> 32 << 16 | r0 & 0xffff)
_R0 = {
    "bits_einval": "r1 = r10\nr1 += -16\nr2 = 0\nr3 = 1\ncall KFUNC(bpf_iter_bits_new)",
    "bits_e2big": "r1 = r10\nr1 += -16\nr2 = r10\nr3 = 600\ncall KFUNC(bpf_iter_bits_new)",
    "bits_efault": "r1 = r10\nr1 += -16\nr2 = -1\nr3 = 1\ncall KFUNC(bpf_iter_bits_new)",
    "bits_erange": "r1 = r10\nr1 += -16\nr2 = 1\nr3 = 2\ncall KFUNC(bpf_iter_bits_new)",
    "num_einval": "r1 = r10\nr1 += -16\nr2 = 5\nr3 = 1\ncall KFUNC(bpf_iter_num_new)",
}


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_iter_new_error_is_zero_extended_as_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    from pyxdp.testing.verifier_cases import VerifierCase
    for name, call in _R0.items():
        kind = "num" if name.startswith("num") else "bits"
        asm = (f"{call}\nr6 = r0\nr1 = r10\nr1 += -16\ncall KFUNC(bpf_iter_{kind}_destroy)\n"
               "r0 = r6\nr0 >>= 32\nr0 <<= 16\nr6 &= 0xffff\nr0 |= r6\nexit")
        spec = VerifierCase(name, asm, None).spec()
        with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                            engine=engine) as user:
            k = kern.programs[name].test_run(bytes(64)).retval
            assert user.programs[name].test_run(bytes(64)).retval == k, name
            assert k >> 16 == 0 and k != 0, name
