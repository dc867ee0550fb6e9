"""Maps of kernel objects (pyxdp.maps.sock_map, reuseport_array, bpf_local_storage):
socket maps filled from Python; the local storage maps' creation rules (BTF,
BPF_F_NO_PREALLOC, max value size) and every operation refused with NotSupportedError
naming the map."""

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


def test_socket_maps_from_python() -> None:
    """Sockets put in with set_socket: the update rules, the user-space view (cookies),
    and a socket that closes leaving both maps."""
    from pyxdp.net.inet_hashtables import SockTable, TcpState

    t = SockTable()
    lis = t.tcp_listen("127.0.0.1", 80)
    udp = t.udp_bind("::", 53)
    m = create_map(int(MT.BPF_MAP_TYPE_SOCKMAP), 4, 8, 2)
    h = create_map(int(MT.BPF_MAP_TYPE_SOCKHASH), 8, 8, 1)
    k0, k1 = bytes(4), (1).to_bytes(4, "little")
    m.set_socket(k0, lis)
    m.set_socket(k1, udp, 1)  # BPF_NOEXIST on an empty slot
    for key, sk, flags, err in ((k0, udp, 1, errno.EEXIST),
                                ((2).to_bytes(4, "little"), udp, 0, errno.E2BIG),
                                (k0, udp, 4, errno.EINVAL)):
        with pytest.raises(MapError) as e:
            m.set_socket(key, sk, flags)
        assert e.value.errno == err
    assert m.lookup(k0) == lis.cookie.to_bytes(8, "little") and lis.cookie != udp.cookie
    h.set_socket(bytes(8), lis)
    with pytest.raises(MapError) as e:
        h.set_socket(b"\1" * 8, udp)  # a new key in a full hash
    assert e.value.errno == errno.E2BIG
    with pytest.raises(MapError) as e:
        m.update(k0, (3).to_bytes(8, "little"))  # an fd: pyxdp has none
    assert e.value.errno == errno.EBADF
    small = create_map(int(MT.BPF_MAP_TYPE_SOCKMAP), 4, 4, 1)
    small.set_socket(k0, lis)
    with pytest.raises(MapError) as e:
        small.lookup(k0)
    assert e.value.errno == errno.ENOSPC
    closing = t.tcp_established("127.0.0.1", 80, "127.0.0.1", 4000)
    closing.state = TcpState.TCP_CLOSE  # neither established nor listening
    with pytest.raises(MapError) as e:
        m.set_socket(k0, closing)
    assert e.value.errno == errno.EOPNOTSUPP
    t.close(lis)
    assert m.lookup(k0) is None and list(h.keys()) == [] and m.lookup(k1) is not None
    with pytest.raises(MapError) as e:
        m.delete(k0)
    assert e.value.errno == errno.EINVAL
    m.delete(k1)
    assert udp.sock_maps == [] and len(m) == 0
