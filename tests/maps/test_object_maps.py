"""Maps of kernel objects (pyxdp.maps.sock_map, reuseport_array, bpf_local_storage):
the local storage maps' creation rules (BTF, BPF_F_NO_PREALLOC, max value size) and
every operation refused with NotSupportedError naming the map."""

from __future__ import annotations

import errno

import pytest

from pyxdp.collection import Collection
from pyxdp.errors import MapError, NotSupportedError
from pyxdp.maps import create_map
from pyxdp.maps.bpf_local_storage import MAX_VALUE_SIZE
from pyxdp.spec import MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType as MT

STORAGE = [MT.BPF_MAP_TYPE_SK_STORAGE, MT.BPF_MAP_TYPE_TASK_STORAGE,
           MT.BPF_MAP_TYPE_INODE_STORAGE, MT.BPF_MAP_TYPE_CGRP_STORAGE]


@pytest.mark.parametrize("map_type", STORAGE)
def test_local_storage_creation(map_type: MT) -> None:
    assert MAX_VALUE_SIZE == 65535 - 128
    m = create_map(int(map_type), 4, MAX_VALUE_SIZE, 0, 1)  # BPF_F_NO_PREALLOC
    with pytest.raises(NotSupportedError, match=f"{map_type.name} map"):
        m.update(bytes(4), bytes(MAX_VALUE_SIZE))
    with pytest.raises(NotSupportedError):
        list(m.keys())
    with pytest.raises(MapError) as e:
        create_map(int(map_type), 4, MAX_VALUE_SIZE + 1, 0, 1)
    assert e.value.errno == errno.E2BIG
    for args in ((4, 8, 0, 0), (4, 8, 1, 1), (8, 8, 0, 1), (4, 0, 0, 1), (4, 8, 0, 1 | 4)):
        with pytest.raises(MapError) as e:
            create_map(int(map_type), *args)
        assert e.value.errno == errno.EINVAL, args


def test_local_storage_needs_btf_in_an_object() -> None:
    bare = MapSpec("st", int(MT.BPF_MAP_TYPE_SK_STORAGE), 4, 8, 0, 1)
    with pytest.raises(MapError, match="needs BTF key and value types") as e:
        Collection(asm_collection("r0 = 2\nexit", [bare]), "userspace")
    assert e.value.errno == errno.EINVAL
