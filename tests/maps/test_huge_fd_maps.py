"""Round 9: fd-holding maps of 2^31 - 1 slots (odd BTF in otherwise valid objects).

Their Python side kept a list of max_entries objects - 16 GiB allocated at creation
(the structural BTF fuzzer's process was OOM-killed by one). The objects are dicts
of the used slots now; the numpy arrays beside them are lazy zero pages."""

from __future__ import annotations

import errno
import time

import pytest

from pyxdp.maps import MapError, create_map
from pyxdp.uapi.bpf import BpfMapType as T

HUGE = 0x7FFF_FFFF


def u32(i: int) -> bytes:
    return i.to_bytes(4, "little")


def test_a_huge_prog_array() -> None:
    t0 = time.monotonic()
    m = create_map(T.BPF_MAP_TYPE_PROG_ARRAY, 4, 4, HUGE)
    m.set(HUGE - 1, "prog-a", 7)  # type: ignore[attr-defined]
    m.set(2, "prog-b", 8)  # type: ignore[attr-defined]
    assert time.monotonic() - t0 < 5
    assert m.prog_at(HUGE - 1) == "prog-a" and m.prog_at(3) is None  # type: ignore[attr-defined]
    assert m.lookup(u32(2)) == u32(8) and m.lookup(u32(3)) is None and len(m) == 2
    m.delete(u32(2))
    with pytest.raises(MapError) as e:
        m.delete(u32(2))
    assert e.value.errno == errno.ENOENT
    m.clear()
    assert len(m) == 0 and m.prog_at(HUGE - 1) is None  # type: ignore[attr-defined]


def test_a_huge_sockmap_is_created_at_once() -> None:
    t0 = time.monotonic()
    sm = create_map(T.BPF_MAP_TYPE_SOCKMAP, 4, 4, HUGE)
    assert time.monotonic() - t0 < 5
    assert sm.socket_at(u32(HUGE - 1)) is None and len(sm) == 0  # type: ignore[attr-defined]


def test_a_huge_devmap_hash_is_enomem_at_once() -> None:
    """A devmap_hash of 2^31 entries (odd BTF in fwd.o): pyxdp's index tables are
    filled at creation (tens of GiB; the fuzzer's case ran past 30 s); past the
    storage cap creation is ENOMEM now, before any allocation."""
    t0 = time.monotonic()
    with pytest.raises(MapError) as e:
        create_map(T.BPF_MAP_TYPE_DEVMAP_HASH, 4, 8, 1 << 31)
    assert e.value.errno == errno.ENOMEM and time.monotonic() - t0 < 1
    assert len(create_map(T.BPF_MAP_TYPE_DEVMAP_HASH, 4, 8, 1 << 16)) == 0
