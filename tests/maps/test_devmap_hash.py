"""DEVMAP_HASH: errnos and the kernel's exact get_next_key (bucket) order."""

from __future__ import annotations

import errno
import random
import struct
from collections.abc import Callable

import pytest

from pyxdp.errors import KernelError, MapError
from pyxdp.maps import create_map
from pyxdp.uapi.bpf import BpfMapType

T = int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH)


def _walk(step: Callable[[bytes | None], bytes | None]) -> list[bytes]:
    out: list[bytes] = []
    key = step(None)
    while key is not None and len(out) < 100:
        out.append(key)
        key = step(key)
    return out


def test_userspace_rules() -> None:
    m = create_map(T, 4, 8, 2)
    m.ifindex_ok = lambda i: i == 1  # type: ignore[attr-defined]
    with pytest.raises(MapError) as e:
        m.update(b"\x05\0\0\0", struct.pack("<Ii", 0, 0))
    assert e.value.errno == errno.EINVAL  # ifindex 0 is refused, unlike devmap
    m.update(b"\x05\0\0\0", struct.pack("<Ii", 1, 0))
    m.update(b"\x06\0\0\0", struct.pack("<Ii", 1, 0))
    with pytest.raises(MapError) as e:
        m.update(b"\x07\0\0\0", struct.pack("<Ii", 1, 0))
    assert e.value.errno == errno.E2BIG
    with pytest.raises(MapError) as e:
        m.delete(b"\x07\0\0\0")
    assert e.value.errno == errno.ENOENT
    assert m.ifindex_at(5) == 1 and m.ifindex_at(7) == 0  # type: ignore[attr-defined]


@pytest.mark.kernel
@pytest.mark.parametrize("seed", range(20))
def test_matches_kernel(seed: int) -> None:
    from pyxdp.kernel import map_create, map_delete_elem, map_get_next_key, map_update_elem
    rng = random.Random(seed)
    n = rng.choice([1, 3, 8, 16])
    with map_create(T, 4, 4, n) as k:
        u = create_map(T, 4, 4, n)
        for _ in range(60):
            key = rng.randrange(40).to_bytes(4, "little")
            rk = ru = 0
            if rng.random() < 0.6:
                flags, val = rng.choice([0, 1, 2]), struct.pack("<I", rng.choice([1, 1, 0]))
                try:
                    map_update_elem(k, key, val, flags)
                except KernelError as e:
                    rk = e.errno
                try:
                    u.update(key, val, flags)
                except MapError as e:
                    ru = e.errno
            else:
                try:
                    map_delete_elem(k, key)
                except KernelError as e:
                    rk = e.errno
                try:
                    u.delete(key)
                except MapError as e:
                    ru = e.errno
            assert rk == ru
            assert _walk(lambda c: map_get_next_key(k, c, 4)) == _walk(u.get_next_key)
