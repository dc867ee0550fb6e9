"""``pyxdp packet udp|tcp|icmp ... -o FILE``: example inputs from pyxdp's packet builders.

The frame is what an XDP program sees (no preamble, no FCS), built by
:func:`pyxdp.net.packets.udp_packet`, :func:`~pyxdp.net.packets.tcp_packet`
or :func:`~pyxdp.net.packets.icmp_packet`: addresses (IPv4 or IPv6, the
family follows the addresses or ``-6``), MACs, ports, TCP flags, 802.1Q
tags (``--vlan``, repeated for QinQ), TTL and a total ``--size``. The
bytes go to ``-o FILE`` (``-`` or no ``-o``: stdout when it is not a
terminal), ready for ``prog run --data-in``, ``explain --data-in``, ``bench
xdp --packet`` and ``monitor --packet``; ``--pcap`` writes a one-packet pcapng
instead, for ``pyxdp run --pcap``; ``--count N`` repeats it there.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pyxdp.cli.options import MAX_INPUT, STYLE, CliError, _write_output, emit
from pyxdp.errors import PyxdpError

__all__ = ["DESCRIPTION", "add_arguments", "build", "cmd_packet"]

DESCRIPTION = (
    "Build one Ethernet frame with pyxdp's packet builders and write its bytes: "
    "'pyxdp packet udp --dst 10.0.0.1 --dport 53 -o pkt.bin'. Defaults: documentation "
    "addresses (192.0.2.1 -> 198.51.100.2, 2001:db8::1 -> 2001:db8::2), locally administered MACs, "
    "no padding. --pcap writes a pcapng capture instead of raw bytes.")


def _port(text: str) -> int:
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}") from None
    if not 0 <= n <= 0xFFFF:
        raise argparse.ArgumentTypeError(f"port {n} is outside 0..65535")
    return n


def _vlan(text: str) -> int:
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a VLAN id: {text!r}") from None
    if not 0 <= n <= 4095:
        raise argparse.ArgumentTypeError(f"VLAN id {n} is outside 0..4095")
    return n


def _positive(text: str) -> int:
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} is not positive")
    return n


def add_arguments(p: argparse.ArgumentParser, parser_class: type[argparse.ArgumentParser]
                  ) -> None:
    sub = p.add_subparsers(dest="proto", metavar="PROTO", required=True,
                           parser_class=parser_class)
    for proto, help_ in (("udp", "a UDP datagram"), ("tcp", "a TCP segment (SYN by default)"),
                         ("icmp", "an echo request (ICMPv6 over IPv6)")):
        q = sub.add_parser(proto, help=help_, description=DESCRIPTION)
        q.add_argument("-o", "--output", metavar="FILE", help="where the bytes go ('-': stdout)")
        q.add_argument("--src", metavar="ADDR", help="source IPv4 or IPv6 address")
        q.add_argument("--dst", metavar="ADDR", help="destination IPv4 or IPv6 address")
        q.add_argument("-6", "--ipv6", action="store_true",
                       help="IPv6 with the default addresses")
        q.add_argument("--src-mac", metavar="MAC", help="source MAC (aa:bb:cc:dd:ee:ff)")
        q.add_argument("--dst-mac", metavar="MAC", help="destination MAC")
        q.add_argument("--vlan", type=_vlan, action="append", metavar="ID",
                       help="an 802.1Q tag (repeat for QinQ, outer first)")
        q.add_argument("--ttl", type=int, default=64, help="TTL / hop limit (default: 64)")
        q.add_argument("--size", type=_positive, metavar="BYTES",
                       help="the whole frame's length (the payload grows with a pattern)")
        q.add_argument("--payload", metavar="TEXT", default="", help="payload text (UTF-8)")
        if proto in ("udp", "tcp"):
            q.add_argument("--sport", type=_port, default=1234,
                           help="source port (default: 1234)")
            q.add_argument("--dport", type=_port, default=5678 if proto == "udp" else 80,
                           help=f"destination port (default: {5678 if proto == 'udp' else 80})")
        if proto == "tcp":
            q.add_argument("--flags", default="S", help="TCP flags, letters of FSRPAUEC "
                                                        "(default: S)")
        if proto == "icmp":
            q.add_argument("--reply", action="store_true", help="an echo reply")
        q.add_argument("--pcap", action="store_true",
                       help="write a pcapng capture (for 'pyxdp run --pcap') instead of raw "
                            "bytes")
        q.add_argument("--count", type=_positive, default=1,
                       help="with --pcap: packets in the capture (default: 1)")


def build(args: argparse.Namespace) -> bytes:
    """The frame the arguments describe (a one-line :class:`CliError` when it cannot be)."""
    from pyxdp.net import packets
    kw: dict[str, Any] = {"src_ip": args.src, "dst_ip": args.dst, "ipv6": args.ipv6,
                          "vlans": tuple(args.vlan or ()), "ttl": args.ttl, "size": args.size}
    if args.src_mac:
        kw["src_mac"] = args.src_mac
    if args.dst_mac:
        kw["dst_mac"] = args.dst_mac
    payload = args.payload.encode(errors="surrogateescape")  # the argument's own bytes
    try:
        if args.proto == "udp":
            return packets.udp_packet(payload, sport=args.sport, dport=args.dport, **kw)
        if args.proto == "tcp":
            return packets.tcp_packet(payload, sport=args.sport, dport=args.dport,
                                      flags=args.flags, **kw)
        return packets.icmp_packet(payload, reply=args.reply, **kw)
    except (PyxdpError, ValueError, OverflowError) as e:
        raise CliError(f"packet {args.proto}: {e}") from None


def cmd_packet(args: argparse.Namespace) -> int:
    frame = build(args)
    out = args.output or "-"
    if out == "-" and sys.stdout.isatty():
        raise CliError("packet: give -o FILE (the frame is binary; '-o -' forces stdout)")
    data = frame
    if args.pcap:
        import io

        from pyxdp.net.pcap import PcapngWriter
        per = 32 + len(frame) + -len(frame) % 4  # one enhanced packet block
        if args.count * per > MAX_INPUT:
            raise CliError(f"packet: --count {args.count} makes a capture past the "
                           f"{MAX_INPUT >> 20} MiB input limit of the commands that read it "
                           f"(at most {MAX_INPUT // per} of this frame)")
        buf = io.BytesIO()
        w = PcapngWriter(buf)
        w.add_interface("pyxdp")
        for k in range(args.count):
            w.write(frame, k * 1000)
        w.close()
        data = buf.getvalue()
    _write_output(out, data)
    if out != "-":
        if STYLE.json:
            emit({"file": out, "bytes": len(frame), "proto": args.proto,
                  "packets": args.count if args.pcap else 1, "hex": frame.hex()})
        else:
            print(f"{out}: {len(frame)}-byte {args.proto} frame"
                  + (f", {args.count} in a pcapng capture" if args.pcap else ""))
    return 0
