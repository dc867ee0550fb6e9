"""pcap-filter expressions: libpcap's classic BPF, converted as bpf_convert_filter does, run by
pyxdp's engines, against Linux running the same classic program as a socket filter.

The kernel side attaches the classic program with SO_ATTACH_FILTER to an AF_PACKET socket on
one end of a veth pair in a namespace of the test's own, and sends every frame out of that
end: the socket sees each outgoing frame through the filter before the send returns (veth
has no queue), trimmed to what the filter returned, or not at all. (Received frames would
have their VLAN tag moved out of the data by the stack; outgoing ones keep it, as an XDP
frame does.) The converted eBPF
program is also loaded into Linux as an XDP program (its verifier must accept it) and
test-run on the same frames.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct
import subprocess
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from pyxdp.asm import cbpf
from pyxdp.asm import opcodes as op
from pyxdp.asm.cbpf import CbpfError, SockFilter, check_classic, convert_filter
from pyxdp.net import pcap_filter
from pyxdp.net.packets import corpus
from pyxdp.net.pcap_filter import (
    FilterSyntaxError,
    FilterUnavailable,
    PacketFilter,
    compile_filter,
    libpcap_available,
)
from pyxdp.testing.vethlab import mixed_frames

S = SockFilter
RET_A = cbpf.BPF_RET | cbpf.BPF_A
RET_K = cbpf.BPF_RET | op.BPF_K


def _need_libpcap() -> None:
    if libpcap_available():
        return
    if os.environ.get("CI"):
        pytest.fail("libpcap is not installed (.ci/run installs libpcap0.8)", pytrace=False)
    pytest.skip("needs libpcap (Debian: libpcap0.8)")


# Every family the issue names: host, net, port, proto, vlan, tcp flags, len, ip[] indexing,
# ether broadcast, and/or/not; each one matches some frames of FRAMES and rejects others.
EXPRESSIONS = (
    "udp", "tcp", "icmp", "icmp6", "arp", "ip6", "ip proto 17",
    "host 192.0.2.1", "src host 192.0.2.1 and dst host 198.51.100.2", "net 192.0.2.0/24",
    "dst net 2001:db8::/32", "port 5678", "src portrange 10000-10020", "udp dst port 9",
    "vlan", "vlan 100 and udp", "vlan and vlan 100", "tcp[tcpflags] & tcp-syn != 0",
    "tcp[tcpflags] == tcp-rst", "len > 600", "less 64", "greater 1514", "ip[8] == 1",
    "ip[2:2] > 1000", "ip[6:2] & 0x1fff != 0", "ether broadcast", "ether multicast",
    "ether src 02:00:00:00:00:01", "not ip and not ip6", "udp or (tcp and not port 80)",
    "icmp[icmptype] == icmp-echo", "ip6 and tcp port 80", "tcp[13] & 2 != 0 and ip[9] == 6",
)
# The JIT runs these (between them: every load kind, MSH, two-way jumps, and/or/not).
JIT_EXPRESSIONS = ("vlan 100 and udp", "tcp[tcpflags] & tcp-syn != 0", "ip[2:2] > 1000",
                   "udp or (tcp and not port 80)", "dst net 2001:db8::/32", "len > 600")
_MACS = (b"\x02\x00\x00\x00\x00\x01", b"\x02\x00\x00\x00\x00\x02")
FRAMES: tuple[bytes, ...] = tuple(f for _, f in corpus(0)) + tuple(mixed_frames(*_MACS))


def _classic_reference(prog: Sequence[SockFilter], pkt: bytes) -> int:
    """A direct classic BPF interpreter (bpf_filter() of the BSDs, Linux's out-of-bounds
    rule): the oracle of the hand-written programs when there is no kernel."""
    a = x = 0
    mem = [0] * cbpf.BPF_MEMWORDS
    pc = 0
    m32 = 0xFFFF_FFFF
    while True:
        f = prog[pc]
        pc += 1
        cls, code, k = f.code & 7, f.code, f.k
        if cls == cbpf.BPF_RET:
            return a if code & 0x18 == cbpf.BPF_A else k
        if cls == op.BPF_LD and code & 0xE0 in (op.BPF_ABS, op.BPF_IND):
            size = {op.BPF_W: 4, op.BPF_H: 2, op.BPF_B: 1}[code & 0x18]
            off = (k + (x if code & 0xE0 == op.BPF_IND else 0)) & m32
            if off + size > len(pkt):
                return 0
            a = int.from_bytes(pkt[off:off + size], "big")
        elif code == op.BPF_LDX | op.BPF_B | cbpf.BPF_MSH:
            if k >= len(pkt):
                return 0
            x = 4 * (pkt[k] & 0xF)
        elif code in (op.BPF_LD | op.BPF_W | cbpf.BPF_LEN, op.BPF_LDX | op.BPF_W | cbpf.BPF_LEN):
            if cls == op.BPF_LD:
                a = len(pkt)
            else:
                x = len(pkt)
        elif code in (op.BPF_LD | op.BPF_IMM, op.BPF_LDX | op.BPF_IMM):
            a, x = (k, x) if cls == op.BPF_LD else (a, k)
        elif code in (op.BPF_LD | op.BPF_MEM, op.BPF_LDX | op.BPF_MEM):
            a, x = (mem[k], x) if cls == op.BPF_LD else (a, mem[k])
        elif code in (op.BPF_ST, op.BPF_STX):
            mem[k] = a if code == op.BPF_ST else x
        elif cls == op.BPF_ALU:
            o = code & 0xF0
            v = x if code & 0x08 else k
            if o in (op.BPF_DIV, op.BPF_MOD) and v == 0:
                return 0
            a = {op.BPF_ADD: a + v, op.BPF_SUB: a - v, op.BPF_MUL: a * v,
                 op.BPF_DIV: a // v if v else 0, op.BPF_MOD: a % v if v else 0,
                 op.BPF_OR: a | v, op.BPF_AND: a & v, op.BPF_XOR: a ^ v,
                 op.BPF_LSH: a << (v & 31), op.BPF_RSH: a >> (v & 31),
                 op.BPF_NEG: -a}[o] & m32
        elif code == op.BPF_JMP | op.BPF_JA:
            pc += k
        elif cls == op.BPF_JMP:
            v = x if code & 0x08 else k
            o = code & 0xF0
            taken = {op.BPF_JEQ: a == v, op.BPF_JGT: a > v, op.BPF_JGE: a >= v,
                     op.BPF_JSET: bool(a & v)}[o]
            pc += f.jt if taken else f.jf
        elif code == cbpf.BPF_MISC | cbpf.BPF_TAX:
            x = a
        elif code == cbpf.BPF_MISC | cbpf.BPF_TXA:
            a = x


# Classic programs libpcap does not write: negative 32-bit constants in jumps, X as divisor
# (zero included), scratch memory, LEN into X, indirect loads with a wrapping offset, MSH,
# two-way jumps with JSET, a load beyond the frame.
HANDWRITTEN: dict[str, tuple[SockFilter, ...]] = {
    "jeq_negative_k": (S(op.BPF_LD | op.BPF_W | op.BPF_ABS, 0, 0, 2),
                       S(op.BPF_ALU | op.BPF_OR | op.BPF_K, 0, 0, 0x8000_0000),
                       S(op.BPF_JMP | op.BPF_JGT | op.BPF_K, 0, 1, 0x8000_0001),
                       S(RET_K, 0, 0, 7), S(RET_K, 0, 0, 9)),
    "div_mod_by_x": (S(op.BPF_LD | op.BPF_B | op.BPF_ABS, 0, 0, 20),
                     S(cbpf.BPF_MISC | cbpf.BPF_TAX),
                     S(op.BPF_LD | op.BPF_H | op.BPF_ABS, 0, 0, 16),
                     S(op.BPF_ALU | op.BPF_MOD | op.BPF_X), S(op.BPF_ST, 0, 0, 3),
                     S(op.BPF_LD | op.BPF_W | cbpf.BPF_LEN),
                     S(op.BPF_ALU | op.BPF_DIV | op.BPF_X),
                     S(op.BPF_LDX | op.BPF_MEM, 0, 0, 3),
                     S(op.BPF_ALU | op.BPF_ADD | op.BPF_X), S(op.BPF_ALU | op.BPF_ADD | op.BPF_K,
                                                              0, 0, 1), S(RET_A)),
    "len_into_x_and_msh": (S(op.BPF_LD | op.BPF_IMM, 0, 0, 0x1234),
                           S(op.BPF_LDX | op.BPF_W | cbpf.BPF_LEN),
                           S(op.BPF_STX, 0, 0, 15),
                           S(op.BPF_LDX | op.BPF_B | cbpf.BPF_MSH, 0, 0, 14),
                           S(op.BPF_ALU | op.BPF_ADD | op.BPF_X),
                           S(op.BPF_LDX | op.BPF_MEM, 0, 0, 15),
                           S(op.BPF_ALU | op.BPF_ADD | op.BPF_X), S(RET_A)),
    "ind_wrapping": (S(op.BPF_LDX | op.BPF_IMM, 0, 0, 0xFFFF_FFF0),
                     S(op.BPF_LD | op.BPF_H | op.BPF_IND, 0, 0, 0x1C),
                     S(op.BPF_JMP | op.BPF_JSET | op.BPF_K, 1, 2, 0x0800),
                     S(op.BPF_ALU | op.BPF_NEG), S(RET_A),
                     S(op.BPF_LDX | op.BPF_IMM, 0, 0, 50),
                     S(op.BPF_LD | op.BPF_W | op.BPF_IND, 0, 0, 0),
                     S(op.BPF_ALU | op.BPF_RSH | op.BPF_K, 0, 0, 3), S(RET_A)),
    "far_offset": (S(op.BPF_LD | op.BPF_H | op.BPF_ABS, 0, 0, 12),  # past ldx's s16 offset
                   S(op.BPF_JMP | op.BPF_JEQ | op.BPF_K, 0, 1, 0x0800),
                   S(op.BPF_LD | op.BPF_B | op.BPF_ABS, 0, 0, 40000), S(RET_A)),
    "beyond_frame": (S(op.BPF_LD | op.BPF_B | op.BPF_ABS, 0, 0, 1500),
                     S(op.BPF_JMP | op.BPF_JEQ | op.BPF_X, 0, 1), S(RET_K, 0, 0, 1),
                     S(op.BPF_JMP | op.BPF_JA, 0, 0, 0), S(RET_K, 0, 0, 0xFFFF_FFFF)),
}


# ----------------------------------------------------------------------------------------
# Without a kernel
# ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(HANDWRITTEN))
def test_handwritten_classic_programs_match_a_classic_interpreter(name: str) -> None:
    prog = HANDWRITTEN[name]
    want = [_classic_reference(prog, f) for f in FRAMES]
    assert len(set(want)) > 1, "the program must tell frames apart"
    for engine in ("interp", "jit"):
        f = PacketFilter.from_classic(prog, name=name, engine=engine)
        assert f.keep(FRAMES).tolist() == want, engine


def test_expressions_match_a_classic_interpreter_and_each_one_discriminates() -> None:
    _need_libpcap()
    for expr in EXPRESSIONS:
        interp = PacketFilter(expr, engine="interp").keep(FRAMES)
        ref = [_classic_reference(compile_filter(expr), f) for f in FRAMES]
        assert interp.tolist() == ref, expr
        assert 0 < np.count_nonzero(interp) < len(FRAMES), expr
        if expr in JIT_EXPRESSIONS:  # a cold JIT compile costs ~0.4 s a program
            assert PacketFilter(expr, engine="jit").keep(FRAMES).tolist() == ref, expr


def test_bad_expressions_and_missing_libpcap_are_one_line_errors(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _need_libpcap()
    with pytest.raises(FilterSyntaxError, match="syntax error"):
        compile_filter("udp and and port 53")
    with pytest.raises(FilterSyntaxError, match="port 70000"):
        compile_filter("port 70000")
    with pytest.raises(FilterSyntaxError, match="NUL"):
        compile_filter("udp\0")
    monkeypatch.setattr(pcap_filter, "_libpcap", lambda: None)
    with pytest.raises(FilterUnavailable, match="libpcap"):
        PacketFilter("udp")


def test_ancillary_loads_with_an_xdp_meaning() -> None:
    ad = cbpf.SKF_AD_OFF & 0xFFFF_FFFF

    def ld(n: int) -> SockFilter:
        return S(op.BPF_LD | op.BPF_W | op.BPF_ABS, 0, 0, ad + n)

    prog = (ld(cbpf.SKF_AD_IFINDEX), S(cbpf.BPF_MISC | cbpf.BPF_TAX),  # X = 1
            ld(cbpf.SKF_AD_PROTOCOL), ld(cbpf.SKF_AD_ALU_XOR_X),      # A = EtherType ^ 1
            S(op.BPF_ST, 0, 0, 0), ld(cbpf.SKF_AD_CPU), ld(cbpf.SKF_AD_RANDOM),
            ld(cbpf.SKF_AD_QUEUE), S(op.BPF_ALU | op.BPF_ADD | op.BPF_X),  # A = 0 + 1
            ld(cbpf.SKF_AD_VLAN_TAG_PRESENT), S(op.BPF_ALU | op.BPF_ADD | op.BPF_X),
            S(op.BPF_LDX | op.BPF_MEM, 0, 0, 0), S(op.BPF_ALU | op.BPF_ADD | op.BPF_X),
            S(RET_A))
    frames = [f for f in FRAMES if len(f) >= 14]
    want = [(int.from_bytes(f[12:14], "big") ^ 1) + 1 for f in frames]
    for engine in ("interp", "jit"):
        got = PacketFilter.from_classic(prog, engine=engine).keep(frames)  # ifindex 1, queue 0
        assert got.tolist() == want, engine


def test_check_classic_refuses_what_the_kernel_refuses() -> None:
    ret = S(RET_K, 0, 0, 1)
    cases = {
        "length": (),
        "opcode": (S(0xFF), ret),
        "div-by-zero": (S(op.BPF_ALU | op.BPF_DIV | op.BPF_K, 0, 0, 0), ret),
        "shift": (S(op.BPF_ALU | op.BPF_LSH | op.BPF_K, 0, 0, 32), ret),
        "memword": (S(op.BPF_ST, 0, 0, 16), ret),
        "jump": (S(op.BPF_JMP | op.BPF_JEQ | op.BPF_K, 1, 0, 0), ret),
        "ret": (S(op.BPF_LD | op.BPF_IMM),),
        "memword-uninit": (S(op.BPF_JMP | op.BPF_JEQ | op.BPF_K, 0, 1, 0),
                           S(op.BPF_ST, 0, 0, 2), S(op.BPF_LD | op.BPF_MEM, 0, 0, 2), ret),
    }
    for rule, prog in cases.items():
        with pytest.raises(CbpfError) as e:
            check_classic(prog)
        assert e.value.rule == rule
    with pytest.raises(CbpfError, match="'mark' has no meaning"):
        convert_filter((S(op.BPF_LD | op.BPF_W | op.BPF_ABS, 0, 0,
                          (cbpf.SKF_AD_OFF + cbpf.SKF_AD_MARK) & 0xFFFF_FFFF), S(RET_A)))


# ----------------------------------------------------------------------------------------
# Linux: the classic program as a socket filter, the converted one as an XDP program
# ----------------------------------------------------------------------------------------

SO_ATTACH_FILTER = 26
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


@pytest.fixture(scope="module")
def filter_netns() -> Iterator[str]:
    from pyxdp.kernel.netlink import netns
    ns = f"pyxdp-filt-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    try:
        with netns(ns):
            for conf in ("all", "default"):  # nothing of the stack's own on the device
                with open(f"/proc/sys/net/ipv6/conf/{conf}/disable_ipv6", "w") as f:
                    f.write("1")
        for cmd in (["link", "add", "fd0", "mtu", "9200", "type", "veth", "peer", "name", "fd1",
                     "mtu", "9200"], ["link", "set", "fd1", "up"], ["link", "set", "fd0", "up"]):
            subprocess.run(["ip", "-n", ns, *cmd], check=True, capture_output=True)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _socket_filter_verdicts(ns: str, prog: Sequence[SockFilter],
                            frames: Sequence[bytes]) -> list[int]:
    """Per frame: how many bytes Linux's socket filter let through (0: none)."""
    from pyxdp.kernel.netlink import netns
    raw = b"".join(f.encode() for f in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = struct.pack("@HP", len(prog), ctypes.addressof(buf))
    with netns(ns):
        rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    with rx, tx:
        rx.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
        rx.bind(("fd0", ETH_P_ALL))
        tx.bind(("fd0", 0))
        rx.setblocking(False)
        out = []
        for frame in frames:
            tx.send(frame)
            got = b""
            while True:  # only the copy going out (nothing should come in: no addresses)
                try:
                    data, addr = rx.recvfrom(65536)
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING:
                    got = data
            assert frame.startswith(got)
            out.append(len(got))
        return out


def _kernel_frames() -> list[bytes]:
    return [f for f in FRAMES if len(f) >= 14]  # packet_snd needs an Ethernet header


@pytest.mark.kernel
def test_expressions_against_linux_socket_filters(filter_netns: str) -> None:
    _need_libpcap()
    frames = _kernel_frames()
    for expr in EXPRESSIONS:
        want = _socket_filter_verdicts(filter_netns, compile_filter(expr), frames)
        for engine in ("interp", "jit") if expr in JIT_EXPRESSIONS else ("interp",):
            keep = PacketFilter(expr, engine=engine).keep(frames)
            got = np.minimum(keep, [len(f) for f in frames]).tolist()
            assert got == want, (expr, engine)


@pytest.mark.kernel
def test_handwritten_programs_against_linux_socket_filters(filter_netns: str) -> None:
    frames = _kernel_frames()
    for name, prog in HANDWRITTEN.items():
        want = _socket_filter_verdicts(filter_netns, prog, frames)
        ref = [min(_classic_reference(prog, f), len(f)) for f in frames]
        assert ref == want, name


@pytest.mark.kernel
def test_converted_programs_load_and_run_in_linux_as_xdp() -> None:
    _need_libpcap()
    from pyxdp.kernel.syscall import prog_load, prog_test_run
    from pyxdp.uapi.bpf import BpfAttachType, BpfProgType
    frames = _kernel_frames()
    progs = [(e, compile_filter(e)) for e in EXPRESSIONS] + list(HANDWRITTEN.items())
    for name, prog in progs:
        insns = convert_filter(prog)
        with prog_load(BpfProgType.BPF_PROG_TYPE_XDP, insns, name="pcap_filter",
                       expected_attach_type=BpfAttachType.BPF_XDP) as fd:
            want = [prog_test_run(fd, f).retval for f in frames]
        got = PacketFilter.from_classic(prog, name=name, engine="interp").keep(frames)
        assert got.tolist() == want, name
