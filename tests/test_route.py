"""The stack's input route (pyxdp.net.route): the compiled lookup against its Python
reference, a host's device addresses, and the list path's route hint."""

from __future__ import annotations

import ctypes
import ipaddress

import numpy as np

from pyxdp.net.fib import RT_TABLE_DEFAULT, Fib, RouteType
from pyxdp.net.netdevice import Host
from pyxdp.net.packets import udp_packet
from pyxdp.net.route import input_route, input_route_address
from pyxdp.net.stack import SkbBatch

ADDRS = ["198.51.100.2", "198.51.100.7", "198.51.100.255", "198.51.100.0", "10.9.1.1",
         "10.8.1.1", "10.7.1.1", "10.6.1.1", "10.5.0.1", "127.0.0.1", "127.9.9.9",
         "8.8.8.8", "192.0.2.77", "203.0.113.1", "2001:db8::2", "2001:db8::7", "2001:db8::",
         "2001:db8:9::1", "2001:db8:8::1", "::1", "::", "2001:db9::1", "fd00:1::5"]


def _native(fib: Fib, dst: ipaddress.IPv4Address | ipaddress.IPv6Address) -> int:
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_int64)(input_route_address())
    key = np.frombuffer(dst.packed.ljust(16, b"\0"), np.uint8).copy()
    fib.native_desc()
    return int(fn(fib.fib_desc.ctypes.data, key.ctypes.data, 2 if dst.version == 4 else 10))


def _fib() -> Fib:
    f = Fib()
    f.add_device(2, "eth0", addresses=["198.51.100.2/24", "2001:db8::2/64"])
    f.add_device(3, "eth1", addresses=["192.0.2.1/24", "fd00:1::1/64"])
    f.add_route("10.9.0.0/16", type="blackhole")
    f.add_route("10.8.0.0/16", type="unreachable")
    f.add_route("10.7.0.0/16", type="prohibit")
    f.add_route("10.6.0.0/16", type="throw")
    f.add_route("10.0.0.0/8", dev="eth1", via="192.0.2.254")
    f.add_route("2001:db8:9::/48", type="prohibit")
    f.add_route("2001:db8:8::/48", dev="eth1", via="fd00:1::fe")
    f.add_route("203.0.113.0/24", dev="eth0", table=RT_TABLE_DEFAULT)
    return f


def test_compiled_lookup_is_the_python_reference() -> None:
    """Local, broadcast, forwarding and reject routes, none; then with a rule added
    (tables local and main split) and with forwarding's anycast routes."""
    f = _fib()
    for stage in range(3):
        for a in ADDRS:
            dst = ipaddress.ip_address(a)
            assert _native(f, dst) == input_route(f, dst), (stage, a)
        if stage == 0:
            f.add_rule(100, fwmark=1)
            f.add_rule(100, fwmark=1, family=10)
        else:
            f.set_forwarding(True)
    assert input_route(f, ipaddress.ip_address("198.51.100.2")) == RouteType.LOCAL
    assert input_route(f, ipaddress.ip_address("2001:db8::")) == RouteType.ANYCAST


def _host() -> tuple[Host, int]:
    h = Host()
    eth = h.add_device("eth0")
    eth.add_address("198.51.100.2/24")
    eth.add_address("2001:db8::2/64")
    h.add_device("eth1").add_address("192.0.2.1/24")
    return h, eth.ifindex


def test_host_addresses_decide_what_is_delivered() -> None:
    """Any of the host's addresses is local on any device (the weak host model); the
    device's address rows are its namespace's FIB's."""
    h, ifx = _host()
    with h:
        assert [str(a) for a in h.dev("eth0").addresses] == ["198.51.100.2/24", "2001:db8::2/64"]
        sink = h.stack.udp_socket(53)
        frames = [udp_packet(b"a", dport=53, dst_ip=d) for d in
                  ("198.51.100.2", "192.0.2.1", "198.51.100.3", "192.0.2.255")]
        h.stack.netif_receive_skb_list(SkbBatch.from_packets(frames, ifx))
        assert sink.packets == 3
        assert h.stack.counters()["Ip:InAddrErrors"] == 1
        assert h.stack.drop_reasons() == {"IP_INADDRERRORS": 1}


def test_list_route_hint() -> None:
    """A list's skbs to the destination of the skb before them reuse its route; one
    skb at a time, or with custom rules, each is looked up."""
    h, ifx = _host()
    with h:
        same = [udp_packet(b"x", sport=i, dport=9) for i in range(8)]
        mixed = [udp_packet(b"x", dport=9, dst_ip=d) for d in
                 ("198.51.100.2", "198.51.100.2", "198.51.100.9", "198.51.100.9",
                  "198.51.100.255", "198.51.100.255", "198.51.100.2")]
        v6 = [udp_packet(b"x", dport=9, ipv6=True) for _ in range(4)]
        for frames, lookups in ((same, 1), (mixed, 5), (v6, 1)):
            before = h.stack.fib_lookups
            h.stack.netif_receive_skb_list(SkbBatch.from_packets(frames, ifx))
            assert h.stack.fib_lookups - before == lookups
            before = h.stack.fib_lookups
            h.stack.netif_receive_skb(SkbBatch.from_packets(frames, ifx))
            assert h.stack.fib_lookups - before == len(frames)
        h.env.fib.add_rule(100, fwmark=1)
        before = h.stack.fib_lookups
        h.stack.netif_receive_skb_list(SkbBatch.from_packets(same, ifx))
        assert h.stack.fib_lookups - before == len(same)
        assert h.stack.counters()["Udp:NoPorts"] == 2 * (8 + 3) + 8  # 2 of mixed not local
