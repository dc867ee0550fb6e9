"""devmap, cpumap and xskmap: value checks and errnos as measured on the kernel."""

from __future__ import annotations

import errno
import socket
import struct

from pyxdp.maps import BPF_EXIST, BPF_NOEXIST, CpuMap, DevMap, MapError, XskMap, create_map
from pyxdp.uapi.bpf import BpfMapType as T
from pyxdp.vm.memory import Memory

# A closed fd: past any process's fd table, and no number of pyxdp's (they count up
# from 1 per process, so a small one like 999 may name a live object late in a run).
NOT_OPEN = 0x7FFF_FFF0


def u32(x: int) -> bytes:
    return struct.pack("<I", x)


def val(a: int, fd: int) -> bytes:
    return struct.pack("<Ii", a, fd)


def code(fn: object, *args: object) -> int:
    try:
        fn(*args)  # type: ignore[operator]
    except MapError as e:
        return e.errno
    return 0


def test_devmap_measured() -> None:
    d = create_map(T.BPF_MAP_TYPE_DEVMAP, 4, 8, 4)
    assert isinstance(d, DevMap)
    d.ifindex_ok = lambda ifindex: ifindex in (1, 2)
    d.resolve_prog = lambda fd: 55 if fd == 7 else None
    assert d.lookup(u32(0)) is None
    d.update(u32(0), val(1, -1))
    assert d.lookup(u32(0)) == val(1, 0)
    assert code(d.update, u32(1), val(1, -1), BPF_NOEXIST) == errno.EEXIST
    assert code(d.update, u32(1), val(1, -1), BPF_EXIST) == 0
    assert code(d.update, u32(1), val(1, -1), 3) == errno.EINVAL
    assert code(d.update, u32(1), val(1, -1), 4) == errno.EINVAL
    assert code(d.update, u32(4), val(1, -1)) == errno.E2BIG
    assert code(d.update, u32(1), val(9999, -1)) == errno.EINVAL
    assert code(d.update, u32(1), val(0, -1)) == 0
    assert code(d.update, u32(1), val(0, 0)) == 0
    assert code(d.update, u32(1), val(0, 5)) == errno.EINVAL
    assert code(d.update, u32(1), val(1, 0)) == 0
    assert code(d.update, u32(1), val(1, NOT_OPEN)) == errno.EINVAL
    assert code(d.update, u32(1), val(1, -5)) == 0
    assert code(d.update, u32(2), val(2, 7)) == 0
    assert d.lookup(u32(2)) == struct.pack("<II", 2, 55)
    assert code(d.delete, u32(3)) == 0 and code(d.delete, u32(9)) == errno.EINVAL
    assert d.get_next_key(u32(1)) == u32(2) and d.get_next_key(u32(3)) is None
    assert d.get_next_key(None) == u32(0)
    d.update(u32(0), val(0, -1))  # ifindex 0 clears the slot
    assert d.lookup(u32(0)) is None and sorted(d) == [u32(1), u32(2)]
    addr = d.lookup_addr(u32(2))
    mem = Memory()
    mem.add(d.value_region())
    assert mem.load(addr, 4) == 2 and d.lookup_addr(u32(0)) == 0
    assert not d.value_region().writable and d.ifindex_at(2) == 2


def test_devmap_value4_and_host_interfaces() -> None:
    d = create_map(T.BPF_MAP_TYPE_DEVMAP, 4, 4, 2)
    lo = socket.if_nametoindex("lo")
    d.update(u32(0), u32(lo))
    assert d.lookup(u32(0)) == u32(lo)
    d.update(u32(0), u32(0))
    assert d.lookup(u32(0)) is None
    assert code(d.update, u32(0), u32(0x7FFF_FFF0)) == errno.EINVAL


def test_cpumap_measured() -> None:
    c = create_map(T.BPF_MAP_TYPE_CPUMAP, 4, 8, 4, nr_cpus=2)
    assert isinstance(c, CpuMap)
    assert c.lookup(u32(0)) is None
    c.update(u32(0), val(192, 0))
    assert c.lookup(u32(0)) == val(192, 0)
    assert code(c.update, u32(0), val(16384, 0)) == 0
    assert code(c.update, u32(0), val(16385, 0)) == errno.EOVERFLOW
    assert code(c.update, u32(9), val(16385, 0)) == errno.E2BIG
    assert code(c.update, u32(0), val(16385, 0), 3) == errno.EINVAL
    assert code(c.update, u32(1), val(10, 0), BPF_NOEXIST) == errno.EEXIST
    assert code(c.update, u32(1), val(10, 0), BPF_EXIST) == 0
    assert code(c.update, u32(2), val(10, 0)) == errno.ENODEV
    assert code(c.update, u32(2), val(0, 0)) == errno.ENODEV
    assert code(c.update, u32(1), val(10, NOT_OPEN)) == errno.ENOMEM
    assert code(c.update, u32(1), val(10, -1)) == 0
    assert code(c.update, u32(1), val(0, 0)) == 0
    assert c.lookup(u32(1)) is None
    assert code(c.delete, u32(1)) == 0 and code(c.delete, u32(9)) == errno.EINVAL
    assert c.get_next_key(u32(3)) is None and c.qsize_at(0) == 16384
    assert c.lookup_addr(u32(0)) == 0
    c4 = create_map(T.BPF_MAP_TYPE_CPUMAP, 4, 4, 2, nr_cpus=2)
    c4.update(u32(0), u32(5))
    assert c4.lookup(u32(0)) == u32(5)


def test_xskmap_measured() -> None:
    x = create_map(T.BPF_MAP_TYPE_XSKMAP, 4, 4, 2)
    assert isinstance(x, XskMap)
    assert code(x.lookup, u32(0)) == errno.EOPNOTSUPP
    assert code(x.update, u32(0), u32(NOT_OPEN)) == errno.EBADF
    assert code(x.update, u32(2), u32(NOT_OPEN)) == errno.E2BIG
    assert code(x.update, u32(0), u32(NOT_OPEN), 3) == errno.EINVAL
    assert code(x.update, u32(0), u32(NOT_OPEN), 4) == errno.EINVAL
    socks = {10: "xsk-a", 11: "xsk-b"}

    def resolve(fd: int) -> object:
        if fd == 0:
            raise MapError("update", errno.ENOTSOCK)
        if fd == 1:
            raise MapError("update", errno.EOPNOTSUPP)
        if fd not in socks:
            raise MapError("update", errno.EBADF)
        return socks[fd]

    x.resolve_fd = resolve
    assert code(x.update, u32(0), u32(0)) == errno.ENOTSOCK
    assert code(x.update, u32(0), u32(1)) == errno.EOPNOTSUPP
    assert code(x.update, u32(0), u32(10), BPF_EXIST) == errno.ENOENT
    assert code(x.update, u32(0), u32(10), BPF_NOEXIST) == 0
    assert code(x.update, u32(0), u32(10), BPF_NOEXIST) == 0  # the same socket again
    assert code(x.update, u32(0), u32(11), BPF_NOEXIST) == errno.EEXIST
    assert code(x.update, u32(0), u32(11), BPF_EXIST) == 0
    assert x.socket_at(0) == "xsk-b" and len(x) == 1 and list(x) == [u32(0)]
    assert code(x.delete, u32(1)) == 0 and code(x.delete, u32(5)) == errno.EINVAL
    assert x.get_next_key(u32(1)) is None


def test_a_huge_xskmap_costs_its_used_slots() -> None:
    """Round 9 (odd BTF gave xsk.o's XSKMAP max_entries 2^31 - 1): the map kept a Python
    list of max_entries socket slots, 16 GiB allocated eagerly (creation was still in
    that allocation after 10 s on this machine), and each update scanned it. The
    sockets are a dict of the used slots now; the map behaves as before at both ends
    of its index range."""
    import time
    t0 = time.monotonic()
    x = create_map(T.BPF_MAP_TYPE_XSKMAP, 4, 4, 0x7FFF_FFFF)
    assert isinstance(x, XskMap)
    x.resolve_fd = {10: "xsk-a", 11: "xsk-b"}.__getitem__
    x.update(u32(0x7FFF_FFFE), u32(10))
    x.update(u32(3), u32(11))
    x.update(u32(5), u32(10))
    assert time.monotonic() - t0 < 5  # (minutes with the list; milliseconds now)
    assert list(x) == [u32(3), u32(5), u32(0x7FFF_FFFE)] and len(x) == 3
    assert x.socket_at(0x7FFF_FFFE) == "xsk-a" and x.socket_at(4) is None
    assert code(x.update, u32(0x7FFF_FFFF), u32(10)) == errno.E2BIG
    x.remove_socket("xsk-a")
    assert list(x) == [u32(3)] and x.socket_at(5) is None
    x.clear()
    assert len(x) == 0 and x.get_next_key(u32(0x7FFF_FFFE)) is None
