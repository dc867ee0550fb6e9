"""bpf_cgroup_read_xattr against Linux: a cgroup made for the test (under the cgroup v2
mount, removed afterwards) gets a user.* attribute with os.setxattr; one XDP program
reads it into a packet dynptr, and reads a name it lacks, a trusted.* name, the bare
prefix "user.", and the attribute into a 4-byte dynptr. Linux under
BPF_PROG_TEST_RUN and both pyxdp engines must return the same and write the same
packet."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.net.prog import jit_available
from pyxdp.testing.kfunclab import hash_put, hash_values
from pyxdp.testing.verifier_cases import RODATA, VerifierCase
from pyxdp.vm.task_kfuncs import cgroup_mounts

pytestmark = pytest.mark.kernel

VALUE = b"pyxdp-xattr"
M32 = 0xFFFF_FFFF


@pytest.fixture
def tagged_cgroup() -> Iterator[Path]:
    """A cgroup below the v2 root whose user.pyxdp attribute is VALUE, removed afterwards."""
    root = cgroup_mounts().get(0)
    if root is None:
        pytest.skip("no cgroup v2 hierarchy mounted")
    cg = Path(root) / f"pyxdp-xattr-{os.getpid()}"
    cg.mkdir()
    try:
        os.setxattr(cg, "user.pyxdp", VALUE)
        yield cg
    finally:
        cg.rmdir()


def _program(cgid: int) -> str:
    """The returns for the rodata names at 0, 16, 32 and 48 into the packet (keys 0-3),
    and for the first into the packet's bytes 20-23 (key 4)."""
    a = (f"r7 = r1\nr1 = {cgid} ll\ncall KFUNC(bpf_cgroup_from_id)\nif r0 == 0 goto out\n"
         "r6 = r0\nr1 = r7\nr2 = 0\nr3 = r10\nr3 += -32\ncall KFUNC(bpf_dynptr_from_xdp)\n")
    for key, off in enumerate((0, 16, 32, 48)):
        a += f"r1 = r6\nr2 = MAP(rodata)\nr2 += {off}\nr3 = r10\nr3 += -32\n"
        a += "call KFUNC(bpf_cgroup_read_xattr)\nr9 = r0\n" + hash_put(key, "r9")
    a += "r1 = r10\nr1 += -32\nr2 = 20\nr3 = 24\ncall KFUNC(bpf_dynptr_adjust)\n"
    a += "r1 = r6\nr2 = MAP(rodata)\nr3 = r10\nr3 += -32\ncall KFUNC(bpf_cgroup_read_xattr)\n"
    a += "r9 = r0\n" + hash_put(4, "r9")
    return a + "r1 = r6\ncall KFUNC(bpf_cgroup_release)\nout:\nr0 = 2\nexit"


def test_cgroup_read_xattr_matches_linux(tagged_cgroup: Path) -> None:
    assert RODATA.startswith(b"user.pyxdp\0")
    spec = VerifierCase("xattr", _program(tagged_cgroup.stat().st_ino), None).spec()
    packet = bytes(range(64))
    with Collection(spec, "kernel") as kern:
        got = kern.programs["xattr"].test_run(packet)
        assert got.retval == 2
        want, want_pkt = hash_values(kern, range(5), M32), got.data_out
    assert want == {0: len(VALUE), 1: -errno.ENODATA & M32, 2: -errno.EPERM & M32,
                    3: -errno.ENODATA & M32, 4: -errno.ERANGE & M32}
    assert want_pkt[:len(VALUE)] == VALUE and want_pkt[len(VALUE):] == packet[len(VALUE):]
    for engine in ["interp", "jit"] if jit_available() else ["interp"]:
        with Collection(spec, "userspace", engine=engine) as user:
            run = user.programs["xattr"].test_run(packet)
            assert run.retval == 2
            assert (hash_values(user, range(5), M32), run.data_out) == (want, want_pkt), engine
