"""bpf_lookup_system_key and bpf_key_put against Linux: one XDP program looks up the ids
0 to 3, 2**32 and 2**64 - 1, and for each writes whether it got a struct bpf_key, its
key and has_ref members; then puts it. Linux under BPF_PROG_TEST_RUN and both pyxdp
engines must write the same map, and pyxdp's object arena holds no key afterwards."""

from __future__ import annotations

import functools

import pytest

from pyxdp.collection import Collection
from pyxdp.net.prog import jit_available
from pyxdp.testing.kfunclab import hash_put, hash_values, member_off
from pyxdp.testing.verifier_cases import VerifierCase
from pyxdp.vm.memalloc import arena

pytestmark = pytest.mark.kernel

_off = functools.partial(member_off, "bpf_key")  # a struct bpf_key member's offset

IDS = (0, 1, 2, 3, 1 << 32, (1 << 64) - 1)


def _program() -> str:
    """Per id (key 2k): 1 + has_ref when a key came, and the key member (key 2k + 1)."""
    a = ""
    for k, ident in enumerate(IDS):
        a += f"r1 = {ident} ll\ncall KFUNC(bpf_lookup_system_key)\nif r0 == 0 goto n{k}\n"
        a += f"r6 = r0\nr9 = *(u8 *)(r6 + {_off('has_ref')})\nr9 += 1\n" + hash_put(2 * k, "r9")
        a += f"r9 = *(u64 *)(r6 + {_off('key')})\n" + hash_put(2 * k + 1, "r9")
        a += f"r1 = r6\ncall KFUNC(bpf_key_put)\nn{k}:\n"
    return a + "r0 = 2\nexit"


def test_system_keys_match_linux() -> None:
    spec = VerifierCase("keys", _program(), None).spec()
    with Collection(spec, "kernel") as kern:
        assert kern.programs["keys"].test_run(bytes(64)).retval == 2
        want = hash_values(kern, range(2 * len(IDS)))
    # the three keyring ids give a key holding the id and no reference; the others NULL
    assert [want[2 * k] for k in range(len(IDS))] == [1, 1, 1, None, None, None]
    assert [want[2 * k + 1] for k in range(3)] == [0, 1, 2]
    live = arena().live()
    for engine in ["interp", "jit"] if jit_available() else ["interp"]:
        with Collection(spec, "userspace", engine=engine) as user:
            assert user.programs["keys"].test_run(bytes(64)).retval == 2
            assert hash_values(user, range(2 * len(IDS))) == want, engine
        assert arena().live() == live, engine  # every key put back
