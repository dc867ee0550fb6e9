"""LPM tries: longest prefix match for IPv4 and IPv6, the kernel's errnos and order."""

from __future__ import annotations

import errno
import ipaddress
import struct

import pytest

from pyxdp.maps import BPF_EXIST, BPF_NOEXIST, LpmTrie, MapError, create_map, lpm_key
from pyxdp.uapi.bpf import BpfMapType as T
from pyxdp.uapi.bpf import MapFlag as F
from pyxdp.vm.memory import Memory

NP = int(F.BPF_F_NO_PREALLOC)


def v4(plen: int, addr: str) -> bytes:
    return lpm_key(plen, ipaddress.IPv4Address(addr).packed)


def v6(plen: int, addr: str) -> bytes:
    return lpm_key(plen, ipaddress.IPv6Address(addr).packed)


def u32(x: int) -> bytes:
    return struct.pack("<I", x)


def code(fn: object, *args: object) -> int:
    try:
        fn(*args)  # type: ignore[operator]
    except MapError as e:
        return e.errno
    return 0


def keys(t: LpmTrie) -> list[tuple[int, str]]:
    out = []
    for k in t.raw_keys():
        out.append((struct.unpack("<I", k[:4])[0], str(ipaddress.ip_address(k[4:]))))
    return out


def test_ipv4_errnos_and_order_measured() -> None:
    t = create_map(T.BPF_MAP_TYPE_LPM_TRIE, 8, 4, 3, NP)
    assert isinstance(t, LpmTrie)
    assert code(t.update, v4(33, "10.0.0.0"), u32(1)) == errno.EINVAL
    assert code(t.update, v4(8, "10.0.0.0"), u32(1), BPF_EXIST) == errno.ENOENT
    assert code(t.update, v4(8, "10.0.0.0"), u32(1), 3) == errno.EINVAL
    assert code(t.update, v4(8, "10.0.0.0"), u32(1), 4) == errno.EINVAL
    assert code(t.update, v4(8, "10.1.2.3"), u32(1), BPF_NOEXIST) == 0
    assert code(t.update, v4(8, "10.9.9.9"), u32(1), BPF_NOEXIST) == errno.EEXIST
    # Bits past the prefix are kept as given.
    assert t.get_next_key(None) == v4(8, "10.1.2.3")
    t.update(v4(16, "10.0.0.0"), u32(2))
    t.update(v4(16, "10.128.0.0"), u32(3))
    assert code(t.update, v4(8, "11.0.0.0"), u32(4)) == errno.ENOSPC
    assert code(t.update, v4(8, "11.0.0.0"), u32(4), BPF_EXIST) == errno.ENOENT
    assert code(t.update, v4(8, "10.7.7.7"), u32(5)) == 0  # replacing is fine when full
    assert t.lookup(v4(32, "10.0.0.1")) == u32(2)
    assert t.lookup(v4(32, "10.1.0.1")) == u32(5)
    assert t.lookup(v4(8, "10.0.0.1")) == u32(5)
    assert t.lookup(v4(12, "10.0.0.1")) == u32(5)
    assert t.lookup(v4(32, "11.0.0.1")) is None
    assert t.lookup(lpm_key(40, bytes([10, 0, 0, 1]))) is None
    # Post-order: more specific first.
    assert keys(t) == [(16, "10.0.0.0"), (16, "10.128.0.0"), (8, "10.7.7.7")]
    assert t.get_next_key(v4(15, "10.0.0.0")) == v4(16, "10.0.0.0")
    assert t.get_next_key(lpm_key(40, bytes(4))) == v4(16, "10.0.0.0")
    assert t.get_next_key(v4(8, "10.7.7.7")) is None
    assert code(t.delete, v4(9, "10.0.0.0")) == errno.ENOENT
    assert code(t.delete, lpm_key(40, bytes(4))) == errno.EINVAL
    assert code(t.delete, v4(8, "10.0.0.0")) == 0  # matched on the prefix bits only
    assert t.lookup(v4(32, "10.1.0.1")) is None
    assert code(t.lookup_and_delete, v4(16, "10.0.0.0")) == 524
    assert len(t) == 2


def test_longest_prefix_match_ipv4() -> None:
    t = create_map(T.BPF_MAP_TYPE_LPM_TRIE, 8, 8, 100, NP)
    routes = {"0.0.0.0/0": 1, "10.0.0.0/8": 2, "10.1.0.0/16": 3, "10.1.2.0/24": 4,
              "10.1.2.3/32": 5, "192.168.0.0/16": 6, "192.168.128.0/17": 7}
    for net, v in routes.items():
        t[net] = v
    def best(addr: str) -> int:
        raw = t.lookup(v4(32, addr))
        assert raw is not None
        return int.from_bytes(raw, "little")
    assert best("10.1.2.3") == 5
    assert best("10.1.2.4") == 4
    assert best("10.1.3.1") == 3
    assert best("10.2.0.0") == 2
    assert best("8.8.8.8") == 1
    assert best("192.168.200.1") == 7
    assert best("192.168.1.1") == 6
    assert len(t) == 7 and t["10.1.0.0/16"] == struct.pack("<Q", 3)
    # Brute-force check against ipaddress for many addresses.
    nets = {ipaddress.ip_network(n): v for n, v in routes.items()}
    for i in range(0, 2**32, 2**32 // 997):
        a = ipaddress.IPv4Address(i)
        want = max(((n.prefixlen, v) for n, v in nets.items() if a in n))[1]
        assert best(str(a)) == want
    del t["0.0.0.0/0"]
    assert t.lookup(v4(32, "8.8.8.8")) is None


def test_longest_prefix_match_ipv6_and_pointer() -> None:
    t = create_map(T.BPF_MAP_TYPE_LPM_TRIE, 20, 4, 16, NP)
    assert isinstance(t, LpmTrie)
    t["2001:db8::/32"] = 1
    t["2001:db8:1::/48"] = 2
    t["2001:db8:1:2::/64"] = 3
    t["::/0"] = 9
    assert t.lookup(v6(128, "2001:db8:1:2::1")) == u32(3)
    assert t.lookup(v6(128, "2001:db8:1:3::1")) == u32(2)
    assert t.lookup(v6(128, "2001:db8:ffff::1")) == u32(1)
    assert t.lookup(v6(128, "fe80::1")) == u32(9)
    addr = t.lookup_addr(v6(128, "2001:db8:1:3::1"))
    mem = Memory()
    mem.add(t.value_region())
    mem.store(addr, 4, 42)
    assert t["2001:db8:1::/48"] == u32(42)
    assert keys(t)[0] == (64, "2001:db8:1:2::") and keys(t)[-1] == (0, "::")
    with pytest.raises(MapError):
        t["10.0.0.0/8"] = 1  # an IPv4 network does not fit 16 data bytes


def test_delete_restructures_like_the_kernel() -> None:
    t = create_map(T.BPF_MAP_TYPE_LPM_TRIE, 8, 4, 8, NP)
    assert isinstance(t, LpmTrie)
    for n in ("192.168.0.0/24", "192.168.1.0/24", "192.168.128.0/24", "192.168.0.0/16"):
        t[n] = 1
    assert keys(t) == [(24, "192.168.0.0"), (24, "192.168.1.0"), (24, "192.168.128.0"),
                       (16, "192.168.0.0")]
    used = int((t.flags != 0).sum())
    assert used == 5  # four prefixes and one intermediate node
    del t["192.168.1.0/24"]  # drops its intermediate parent too
    assert int((t.flags != 0).sum()) == 3
    del t["192.168.0.0/16"]
    assert keys(t) == [(24, "192.168.0.0"), (24, "192.168.128.0")]
    t.clear()
    assert len(t) == 0 and t.get_next_key(None) is None
