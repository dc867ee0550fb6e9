"""bpf_get_kmem_cache against Linux: one XDP program asks for the slab cache of addresses
that are no slab memory (0, a page up, a user address, the last address) and of the
struct bpf_key bpf_lookup_system_key allocated (taken through a map as a number): NULL
for the first, a cache for the key, from Linux under BPF_PROG_TEST_RUN and both pyxdp
engines alike."""

from __future__ import annotations

import pytest

from pyxdp.collection import Collection
from pyxdp.net.prog import jit_available
from pyxdp.testing.kfunclab import hash_put, hash_values
from pyxdp.testing.verifier_cases import VerifierCase

pytestmark = pytest.mark.kernel

NOT_SLAB = (0, 4096, 0x7F00_0000_0000, (1 << 64) - 1)
KEY = 8  # the map key the bpf_key's address passes through, and its cache's answer


def _program() -> str:
    a = ""
    for k, addr in enumerate(NOT_SLAB):
        a += f"r1 = {addr} ll\ncall KFUNC(bpf_get_kmem_cache)\nr9 = 1\nif r0 != 0 goto c{k}\n"
        a += f"r9 = 0\nc{k}:\n" + hash_put(k, "r9")
    a += "r1 = 0\ncall KFUNC(bpf_lookup_system_key)\nif r0 == 0 goto out\nr6 = r0\n"
    a += hash_put(KEY, "r6")  # the pointer, read back from the map as a number
    a += f"*(u32 *)(r10 - 4) = {KEY}\nr1 = MAP(hash)\nr2 = r10\nr2 += -4\ncall 1\n"
    a += "if r0 == 0 goto put\nr1 = *(u64 *)(r0 + 0)\ncall KFUNC(bpf_get_kmem_cache)\n"
    a += "r9 = 1\nif r0 != 0 goto c\nr9 = 0\nc:\n" + hash_put(KEY, "r9")
    return a + "put:\nr1 = r6\ncall KFUNC(bpf_key_put)\nout:\nr0 = 2\nexit"


def test_kmem_cache_of_addresses_matches_linux() -> None:
    spec = VerifierCase("kmem_cache", _program(), None).spec()
    with Collection(spec, "kernel") as kern:
        assert kern.programs["kmem_cache"].test_run(bytes(64)).retval == 2
        want = hash_values(kern, (*range(len(NOT_SLAB)), KEY))
    assert want == {0: 0, 1: 0, 2: 0, 3: 0, KEY: 1}
    for engine in ["interp", "jit"] if jit_available() else ["interp"]:
        with Collection(spec, "userspace", engine=engine) as user:
            assert user.programs["kmem_cache"].test_run(bytes(64)).retval == 2
            assert hash_values(user, (*range(len(NOT_SLAB)), KEY)) == want, engine
