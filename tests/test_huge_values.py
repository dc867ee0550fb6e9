"""Map values of up to INT_MAX bytes, as Linux 6.18 takes them (measured on the kernel
backend): an array of one INT_MAX-byte value is created and looked up from user space;
its batch lookup is ENOMEM (generic_map_lookup_batch's one key+value buffer is above
kvmalloc's INT_MAX); no memory for a value buffer is ENOMEM, a one-line error. Each run
is a child process under an address-space limit (these allocate gigabytes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INT_MAX = 0x7FFF_FFFF

CHILD = """
import json, resource, sys
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from pyxdp.collection import Collection
from pyxdp.errors import PyxdpError
from pyxdp.spec import MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType
got = []
spec = MapSpec("m", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, int(sys.argv[3]), 1)
with Collection(asm_collection("r0 = 2\\nexit", (spec,)), sys.argv[1]) as c:
    h = c.maps["m"].handle
    for call in (lambda: len(h.lookup(bytes(4))), lambda: len(h.lookup_batch(None, 1)[1])):
        try:
            got.append(call())
        except PyxdpError as e:
            assert "\\n" not in str(e), str(e)
            got.append(e.errno)
print(json.dumps(got))
"""


def _run(backend: str, limit: int, value_size: int = INT_MAX) -> list[int]:
    """[lookup's value length or errno, lookup_batch's value count or errno]."""
    out = subprocess.run([sys.executable, "-c", CHILD, backend, str(limit), str(value_size)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got: list[int] = json.loads(out.stdout)
    return got


def test_no_memory_for_a_value_is_enomem() -> None:
    """Found comparing with Linux: a 2 GiB value's lookup raised MemoryError (a
    traceback: three copies of the value); it is one copy now, and ENOMEM when even
    that does not fit, as bpf(2)'s kvmalloc failing."""
    import errno
    # 3 GiB of address space: the map's 2 GiB storage fits, a second 2 GiB does not
    assert _run("userspace", 3 << 30) == [errno.ENOMEM, errno.ENOMEM]


def test_batch_lookup_of_an_int_max_value_is_enomem() -> None:
    import errno
    assert _run("userspace", 1 << 30, 1 << 20)[1] == 1  # a 1 MiB value's works
    assert _run("userspace", 3 << 30)[1] == errno.ENOMEM


@pytest.mark.kernel
def test_an_int_max_value_matches_linux() -> None:
    """Both backends look the INT_MAX-byte value up and refuse its batch lookup (it
    costs each 2 GiB of memory and a few CPU seconds)."""
    linux = _run("kernel", 8 << 30)
    assert linux == _run("userspace", 8 << 30)
    assert linux[0] == INT_MAX
