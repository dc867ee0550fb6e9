"""The host stack behind XDP_PASS: Linux's receive checks, counters and drop reasons.

The expected counters are what Linux 6.18 counted for the same frames
(``tests/kernel/test_stack_vs_kernel.py`` compares every frame with the
running kernel; these run without root).
"""

from __future__ import annotations

import pytest

from pyxdp.net.netdevice import Host, NetDevice
from pyxdp.net.packets import corpus
from pyxdp.net.stack import SkbBatch
from pyxdp.testing.stacklab import ADDR4, ADDR6, PORT, StackOutcome, pyxdp_stack, stack_frames

# name -> (counters Linux moved, datagrams the socket got)
LINUX = {
    "udp_to_socket": ({"Ip:InReceives": 1, "Ip:InDelivers": 1, "Udp:InDatagrams": 1}, 1),
    "udp_other_host_mac": ({}, 0),
    "ipv4_udp_vlan": ({}, 0),
    "udp_priority_tag": ({"Ip:InReceives": 1, "Ip:InDelivers": 1, "Udp:InDatagrams": 1}, 1),
    "ipv4_bad_csum": ({"Ip:InReceives": 1, "Ip:InHdrErrors": 1, "IpExt:InCsumErrors": 1}, 0),
    "ipv4_totlen_gt_frame": ({"Ip:InReceives": 1, "IpExt:InTruncatedPkts": 1}, 0),
    "udp_bad_csum_short": ({"Ip:InReceives": 1, "Ip:InDelivers": 1, "Udp:InErrors": 1,
                            "Udp:InCsumErrors": 1}, 0),
    "udp_padding": ({"Ip:InReceives": 1, "Ip:InDelivers": 1, "Udp:InDatagrams": 1}, 1),
    "udp_limited_broadcast_noport": ({"Ip:InReceives": 1, "Ip:InDelivers": 1,
                                      "IpExt:InBcastPkts": 1, "Udp:IgnoredMulti": 1}, 0),
    "udp6_zero_csum": ({"Ip6InReceives": 1, "Ip6InDelivers": 1, "Udp6InErrors": 1,
                        "Udp6InCsumErrors": 1}, 0),
    "v6_hbh_twice": ({"Ip6InReceives": 1, "Ip6InUnknownProtos": 1}, 0),
    "ipv6_plen_gt_frame": ({"Ip6InReceives": 1, "Ip6InTruncatedPkts": 1}, 0),
    "tcp_bad_csum": ({"Ip:InReceives": 1, "Ip:InDelivers": 1, "Tcp:InSegs": 1,
                      "Tcp:InErrs": 1, "Tcp:InCsumErrors": 1}, 0),
    "udp_onlink_not_local": ({"Ip:InReceives": 1, "Ip:InAddrErrors": 1}, 0),
    "udp_no_route": ({"Ip:InReceives": 1, "Ip:InAddrErrors": 1}, 0),
    "udp_subnet_broadcast": ({"Ip:InReceives": 1, "Ip:InDelivers": 1, "IpExt:InBcastPkts": 1,
                              "Udp:InDatagrams": 1}, 1),
    "udp_zeronet_dst": ({"Ip:InReceives": 1, "Ip:InAddrErrors": 1}, 0),
    "udp_loopback_dst": ({"Ip:InReceives": 1}, 0),
    "udp6_onlink_not_local": ({"Ip6InReceives": 1, "Ip6InAddrErrors": 1}, 0),
    "udp6_no_route": ({"Ip6InReceives": 1, "Ip6InNoRoutes": 1}, 0),
    "udp6_unspecified_dst": ({"Ip6InReceives": 1, "Ip6InAddrErrors": 1}, 0),
}


def eth0(h: Host, mac: bytes | None = None) -> NetDevice:
    """The frames' receiver: veth0's MAC and addresses in the Linux comparison."""
    eth = h.add_device("eth0", mac=mac)
    eth.add_address(ADDR4)
    eth.add_address(ADDR6)
    return eth


@pytest.fixture(scope="module")
def frames() -> list[tuple[str, bytes]]:
    return stack_frames()


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_receive_checks_count_as_linux(frames: list[tuple[str, bytes]], native: bool) -> None:
    chosen = [(n, f) for n, f in frames if n in LINUX]
    assert len(chosen) == len(LINUX)
    got = pyxdp_stack(chosen, native=native)
    for name, (counters, received) in LINUX.items():
        assert got[name] == StackOutcome(counters, received), name


def test_drop_reasons_and_stats() -> None:
    by_name = dict(stack_frames())
    names = ["udp_other_host_mac", "ipv4_bad_csum", "udp_bad_csum_short", "tcp_bad_csum",
             "ip_proto_253", "eth_802_3", "udp_to_socket"]
    with Host() as h:
        eth = eth0(h, b"\x02\x00\x00\x00\x00\x02")
        sink = h.stack.udp_socket(PORT, keep=4)
        h.stack.netif_receive_skb_list(SkbBatch.from_packets([by_name[n] for n in names],
                                                             eth.ifindex))
        assert h.stack.drop_reasons() == {"OTHERHOST": 1, "IP_CSUM": 1, "UDP_CSUM": 1,
                                          "TCP_CSUM": 1, "IP_NOPROTO": 1, "UNHANDLED_PROTO": 1}
        assert sink.received == [b"hello"]
        st = h.stack.stats
        assert (st.received, st.ipv4, st.other, st.udp_delivered) == (7, 6, 1, 1)


def test_mac_change_moves_what_is_ours() -> None:
    with Host() as h:
        eth = eth0(h)
        frame = dict(stack_frames())["udp_to_socket"]  # to 02:00:00:00:00:02
        eth.mac = b"\x02\x00\x00\x00\x00\x77"
        h.stack.netif_receive_skb_list(SkbBatch.from_packets([frame], eth.ifindex))
        assert h.stack.drop_reasons() == {"OTHERHOST": 1}
        eth.mac = b"\x02\x00\x00\x00\x00\x02"
        h.stack.netif_receive_skb_list(SkbBatch.from_packets([frame], eth.ifindex))
        assert h.stack.counters()["Udp:NoPorts"] == 1


def test_any_bytes_are_safe() -> None:
    """Random frames of many lengths go through the checks without an error."""
    with Host() as h:
        eth = eth0(h)
        h.stack.udp_socket(PORT)
        frames = [f for _, f in corpus(seed=7)] + [bytes(range(n % 256)) * 2 for n in range(80)]
        h.stack.netif_receive_skb_list(SkbBatch.from_packets(frames, eth.ifindex))
        assert h.stack.stats.received == len(frames)
