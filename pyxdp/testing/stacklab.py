"""The host stack behind XDP_PASS, pyxdp against Linux: the same frames, the same counters.

Linux's side: a network namespace of its own with a veth pair; ``veth0``
(MAC 02:00:00:00:00:02, the address pyxdp gives ``eth0``) owns
198.51.100.2/24 and 2001:db8::2/64 (so does ``eth0``), a UDP socket of each family is bound to
:data:`PORT`, and each frame goes through an XDP_PASS program by
``BPF_PROG_TEST_RUN`` live frames with ``veth0`` as the ingress device - the
kernel's own path from an XDP_PASS verdict to ``netif_receive_skb_list``.
The namespace's SNMP counters (``/proc/net/snmp``, ``netstat``, ``snmp6``) are
read before and after each frame and the sockets drained.

pyxdp's side: ``eth0`` of a :class:`~pyxdp.net.netdevice.Host` with the same
XDP_PASS program, a UDP sink on :data:`PORT`, each frame received from its rx
queue, the stack's counters (:meth:`~pyxdp.net.stack.Stack.counters`) read
around it.

:func:`stack_frames` is the frames: the project's packet corpus (without
fragments: pyxdp does not reassemble) and frames aimed at each check of
the receive path (addresses, checksums, lengths, options, tags).
"""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pyxdp.net.packets import (
    corpus,
    icmp_packet,
    internet_checksum,
    ipv4,
    ipv6,
    tcp_packet,
    udp,
)
from pyxdp.net.stack import SNMP_NAMES

__all__ = ["PORT", "StackOutcome", "kernel_stack", "pyxdp_stack", "stack_frames"]

PORT = 5678  # the corpus's UDP destination port
MAC = b"\x02\x00\x00\x00\x00\x02"
OTHER_MAC = b"\x02\x00\x00\x00\x00\x99"
ADDR4, ADDR6 = "198.51.100.2/24", "2001:db8::2/64"  # veth0's and eth0's
NETNS_PREFIX = "pyxdp-stacklab"
_runs = itertools.count()


@dataclass(frozen=True)
class StackOutcome:
    """What one frame did: SNMP counter deltas (nonzero, of :data:`SNMP_NAMES`) and
    datagrams a bound socket received."""

    counters: dict[str, int]
    received: int


def _eth(payload: bytes, ethertype: int, dst: bytes = MAC) -> bytes:
    return dst + b"\x02\x00\x00\x00\x00\x01" + ethertype.to_bytes(2, "big") + payload


def _udp4(dst: str = "198.51.100.2", src: str = "192.0.2.1", dport: int = PORT,
          payload: bytes = b"hello", check: int | None = None, mac: bytes = MAC,
          options: bytes = b"") -> bytes:
    seg = bytearray(udp(1234, dport, payload, src, dst))
    if check is not None:
        seg[6:8] = check.to_bytes(2, "big")
    pkt = bytearray(ipv4(src, dst, 17, bytes(seg)))
    if options:
        ihl = 5 + len(options) // 4
        pkt = bytearray(pkt[:20] + options + pkt[20:])
        pkt[0] = 0x40 | ihl
        pkt[2:4] = len(pkt).to_bytes(2, "big")
        pkt[10:12] = b"\0\0"
        pkt[10:12] = internet_checksum(bytes(pkt[:ihl * 4])).to_bytes(2, "big")
    return _eth(bytes(pkt), 0x0800, mac)


def _v6(nh: int, payload: bytes, src: str = "2001:db8::1", dst: str = "2001:db8::2") -> bytes:
    return _eth(ipv6(src, dst, nh, payload), 0x86DD)


def _udp6_seg(dst: str = "2001:db8::2", src: str = "2001:db8::1", check: int | None = None,
              payload: bytes = b"hello6") -> bytes:
    seg = bytearray(udp(1234, PORT, payload, src, dst))
    if check is not None:
        seg[6:8] = check.to_bytes(2, "big")
    return bytes(seg)


def _flip(frame: bytes, offset: int) -> bytes:
    b = bytearray(frame)
    b[offset] ^= 0x5A
    return bytes(b)


def _targeted() -> list[tuple[str, bytes]]:
    long_payload = bytes(range(200))
    out = [
        ("udp_to_socket", _udp4()),
        ("udp_other_host_mac", _udp4(mac=OTHER_MAC)),
        ("udp_broadcast_mac", _udp4(mac=b"\xff" * 6)),
        ("udp_multicast_mac", _udp4(mac=b"\x01\x00\x5e\x00\x00\x01")),
        ("udp_priority_tag", MAC + b"\x02\x00\x00\x00\x00\x01\x81\x00\x00\x00"
         + _udp4()[12:]),
        ("udp_bad_csum_short", _udp4(check=0x1234)),
        ("udp_bad_csum_long", _udp4(check=0x1234, payload=long_payload)),
        ("udp_bad_csum_noport", _udp4(check=0x1234, dport=9)),
        ("udp_bad_csum_long_noport", _udp4(check=0x1234, dport=9, payload=long_payload)),
        ("udp_zero_csum", _udp4(check=0)),
        ("udp_limited_broadcast", _udp4(dst="255.255.255.255")),
        ("udp_limited_broadcast_noport", _udp4(dst="255.255.255.255", dport=9)),
        ("udp_bcast_bad_csum_long_noport", _udp4(dst="255.255.255.255", dport=9,
                                                  check=0x1234, payload=long_payload)),
        ("udp_all_hosts", _udp4(dst="224.0.0.1")),
        ("udp_unjoined_group", _udp4(dst="239.1.2.3")),
        ("udp_multicast_source", _udp4(src="224.1.1.1")),
        ("udp_padding", _udp4() + b"\0" * 20),
        ("udp_len_lt_8", _flip(_udp4(), 14 + 20 + 5)),
        ("ip_option_nop", _udp4(options=b"\x01\x01\x01\x00")),
        ("ip_option_overrun", _udp4(options=b"\x07\x09\x04\x00")),
        ("ip_option_len1", _udp4(options=b"\x44\x01\x00\x00")),
        ("ip_proto_253", _eth(ipv4("192.0.2.1", "198.51.100.2", 253, b"x" * 8), 0x0800)),
        ("tcp_bad_csum", _flip(tcp_packet(dst_ip="198.51.100.2", dst_mac=MAC), 14 + 20 + 16)),
        ("tcp_short_doff", _flip(tcp_packet(dst_ip="198.51.100.2", dst_mac=MAC), 14 + 20 + 12)),
        ("tcp_broadcast_mac", tcp_packet(dst_ip="198.51.100.2", dst_mac=b"\xff" * 6)),
        ("icmp_bad_csum", _flip(icmp_packet(dst_ip="198.51.100.2", dst_mac=MAC), 14 + 20 + 2)),
        ("icmp_echo_broadcast", icmp_packet(dst_ip="255.255.255.255", dst_mac=b"\xff" * 6)),
        ("udp6_to_socket", _v6(17, _udp6_seg())),
        ("udp6_zero_csum", _v6(17, _udp6_seg(check=0))),
        ("udp6_bad_csum", _v6(17, _udp6_seg(check=0x1234))),
        ("udp6_all_nodes", _v6(17, _udp6_seg(dst="ff02::1"), dst="ff02::1")),
        ("udp6_multicast_source", _v6(17, _udp6_seg(src="ff02::5"), src="ff02::5")),
        ("udp6_loopback_dst", _v6(17, _udp6_seg(dst="::1"), dst="::1")),
        ("udp6_mcast_scope0", _v6(17, _udp6_seg(dst="ff00::1"), dst="ff00::1")),
        ("udp6_padding", _v6(17, _udp6_seg()) + b"\0" * 16),
        ("v6_dstopts_pad", _v6(60, bytes([17, 0, 1, 4, 0, 0, 0, 0]) + _udp6_seg())),
        ("v6_dstopts_unknown_skip", _v6(60, bytes([17, 0, 0x1E, 4, 0, 0, 0, 0]) + _udp6_seg())),
        ("v6_dstopts_unknown_discard", _v6(60, bytes([17, 0, 0x5E, 4, 0, 0, 0, 0])
                                          + _udp6_seg())),
        ("v6_rthdr_segleft0", _v6(43, bytes([17, 0, 2, 0, 0, 0, 0, 0]) + _udp6_seg())),
        ("v6_srh", _v6(43, bytes([17, 0, 4, 0, 0, 0, 0, 0]) + _udp6_seg())),
        ("v6_rthdr_segleft1", _v6(43, bytes([17, 2, 0, 1, 0, 0, 0, 0]) + bytes(16)
                                  + _udp6_seg())),
        ("v6_hbh_twice", _v6(0, bytes([0, 0, 1, 4, 0, 0, 0, 0, 17, 0, 1, 4, 0, 0, 0, 0])
                             + _udp6_seg())),
        ("v6_no_next_header", _v6(59, b"")),
        ("v6_proto_253", _v6(253, b"x" * 8)),
        ("icmp6_bad_csum", _flip(_v6(58, b"\x80\x00\x00\x00\x00\x01\x00\x01"), 14 + 40 + 2)),
        ("eth_802_3", MAC + b"\x02\x00\x00\x00\x00\x01\x00\x20" + b"\xaa" * 32),
        # The input route: what is not an address of the host is not delivered.
        ("udp_onlink_not_local", _udp4(dst="198.51.100.7")),
        ("udp_no_route", _udp4(dst="203.0.113.9")),
        ("udp_subnet_broadcast", _udp4(dst="198.51.100.255")),
        ("udp_subnet_broadcast_noport", _udp4(dst="198.51.100.255", dport=9)),
        ("udp_loopback_dst", _udp4(dst="127.0.0.1")),
        ("udp_loopback_src", _udp4(src="127.0.0.5")),
        ("udp_zeronet_src", _udp4(src="0.1.2.3")),
        ("udp_zeronet_dst", _udp4(dst="0.0.0.5")),
        ("udp_zero_src", _udp4(src="0.0.0.0")),
        ("udp_zero_dst", _udp4(dst="0.0.0.0")),
        ("udp_zero_src_and_dst", _udp4(src="0.0.0.0", dst="0.0.0.0")),
        ("tcp_not_local", tcp_packet(dst_ip="198.51.100.9", dst_mac=MAC)),
        ("udp6_onlink_not_local", _v6(17, _udp6_seg(dst="2001:db8::7"), dst="2001:db8::7")),
        ("udp6_no_route", _v6(17, _udp6_seg(dst="2001:db8:1::7"), dst="2001:db8:1::7")),
        ("udp6_unspecified_dst", _v6(17, _udp6_seg(dst="::"), dst="::")),
        ("v6_hbh_no_route", _v6(0, bytes([17, 0, 1, 4, 0, 0, 0, 0])
                                + _udp6_seg(dst="2001:db8:1::7"), dst="2001:db8:1::7")),
        ("v6_bad_hbh_no_route", _v6(0, bytes([17, 0, 0x5E, 4, 0, 0, 0, 0])
                                    + _udp6_seg(dst="2001:db8:1::7"), dst="2001:db8:1::7")),
    ]
    return out


def stack_frames(seed: int = 0) -> list[tuple[str, bytes]]:
    """Frames for the comparison: corpus (no fragments, no runts) and targeted ones."""
    base = [(n, f) for n, f in corpus(seed) if "frag" not in n and len(f) >= 14
            and len(f) <= 3000]
    return base + _targeted()


# -- Linux -----------------------------------------------------------------------------

def _snmp() -> dict[str, int]:
    out: dict[str, int] = {}
    for f in ("snmp", "netstat"):
        with open(f"/proc/thread-self/net/{f}") as fh:
            lines = fh.read().splitlines()
        for head, vals in zip(lines[::2], lines[1::2], strict=True):
            ks, vs = head.split(), vals.split()
            for k, v in zip(ks[1:], vs[1:], strict=True):
                out[ks[0] + k] = int(v)
    with open("/proc/thread-self/net/snmp6") as fh:
        for line in fh:
            k, v = line.split()
            out[k] = int(v)
    return out


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in SNMP_NAMES
            if after.get(k, 0) != before.get(k, 0)}


def _drain(socks: Sequence[socket.socket]) -> int:
    n = 0
    for s in socks:
        while True:
            try:
                s.recv(65536)
            except BlockingIOError:
                break
            n += 1
    return n


def _settle(quiet: float = 0.3, limit: float = 5.0) -> None:
    """Wait until the namespace's own traffic (MLD reports) has stopped moving counters."""
    deadline = time.monotonic() + limit
    last, since = _snmp(), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet:
        time.sleep(0.05)
        now = _snmp()
        if now != last:
            last, since = now, time.monotonic()


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: exit {done.returncode}: "
                           f"{done.stderr.strip() or done.stdout.strip()}")


def kernel_stack(frames: Sequence[tuple[str, bytes]]) -> dict[str, StackOutcome]:
    """Each frame through Linux's XDP_PASS path in a namespace of its own (root)."""
    from pyxdp.kernel import prog_test_run
    from pyxdp.kernel.netlink import ifindex_of, netns
    from pyxdp.testing.kernel_live import LIVE, _collection, _prog, asm_spec, xdp_md

    # A name of its own per run: a re-measure right after a run must not meet the
    # previous namespace while Linux is still tearing it down.
    ns_name = f"{NETNS_PREFIX}-{os.getpid()}-{next(_runs)}"
    _ip("netns", "add", ns_name)
    try:
        ns = ("-n", ns_name)
        _ip(*ns, "link", "add", "veth0", "address", "02:00:00:00:00:02", "type", "veth",
            "peer", "name", "veth1")
        # No IPv6 on the peer and no link-local addresses: no ND or MLD traffic
        # into veth0 while counters are read.
        subprocess.run(["ip", "netns", "exec", ns_name, "sysctl", "-qw",
                        "net.ipv6.conf.veth1.disable_ipv6=1"], check=True, timeout=60)
        # Joining the address's solicited-node group sends MLD reports (each also
        # counted as received); a 1 ms report interval ends them before the
        # first frame instead of up to a second into the run.
        subprocess.run(["ip", "netns", "exec", ns_name, "sysctl", "-qw",
                        "net.ipv6.conf.veth0.mldv2_unsolicited_report_interval=1",
                        "net.ipv6.conf.veth0.mldv1_unsolicited_report_interval=1"],
                       check=True, timeout=60)
        for dev in ("veth0", "veth1"):
            _ip(*ns, "link", "set", dev, "addrgenmode", "none")
            _ip(*ns, "link", "set", dev, "up")
        _ip(*ns, "addr", "add", ADDR4, "dev", "veth0")
        _ip(*ns, "addr", "add", ADDR6, "dev", "veth0", "nodad")
        # Replies (resets, ICMP errors) go out without neighbour discovery traffic.
        _ip(*ns, "neigh", "add", "2001:db8::1", "lladdr", "02:00:00:00:00:01", "dev", "veth0")
        out: dict[str, StackOutcome] = {}
        with netns(ns_name), _collection(asm_spec("xdp_pass", "r0 = 2\nexit")) as coll:
            prog = _prog(coll, None)
            ifindex = ifindex_of("veth0")
            _settle()
            s4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            try:
                s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                s4.bind(("0.0.0.0", PORT))
                s6.bind(("::", PORT))
                s4.setblocking(False)
                s6.setblocking(False)
                for name, frame in frames:
                    before = _snmp()
                    prog_test_run(prog.fd, frame, ctx_in=xdp_md(frame, ifindex), repeat=1,
                                  flags=LIVE)
                    got = _drain((s4, s6))
                    out[name] = StackOutcome(_delta(before, _snmp()), got)
            finally:
                s4.close()
                s6.close()
        return out
    finally:
        subprocess.run(["ip", "netns", "del", ns_name], capture_output=True, timeout=60)


# -- pyxdp -----------------------------------------------------------------------------

def pyxdp_stack(frames: Sequence[tuple[str, bytes]], *, native: bool = True
                ) -> dict[str, StackOutcome]:
    """Each frame received by ``eth0`` of a pyxdp host whose program passes it."""
    from pyxdp.net.netdevice import Host
    from pyxdp.net.source import TrafficGenerator
    from pyxdp.testing.kernel_live import asm_spec

    out: dict[str, StackOutcome] = {}
    with Host(native=native) as h:
        eth = h.add_device("eth0", mac=MAC)
        eth.add_address(ADDR4)
        eth.add_address(ADDR6)
        eth.attach_xdp(h.load(asm_spec("xdp_pass", "r0 = 2\nexit")).programs["xdp_pass"])
        sink = h.stack.udp_socket(PORT)
        for name, frame in frames:
            before = h.stack.counters()
            got = sink.packets
            eth.rx[0].source = TrafficGenerator(packets=[frame], count=1)
            h.run()
            after = h.stack.counters()
            out[name] = StackOutcome({k: after[k] - before[k] for k in after
                                      if after[k] != before[k]}, sink.packets - got)
    return out
