"""``pyxdp dump``: xdpdump's capture with tcpdump filters, read back from the pcapng it writes.

Without a kernel: a capture replayed into a sample object on pyxdp. With one: a busy veth pair
in a namespace of the test's own (mixed UDP/TCP/ICMP, IPv4/IPv6, VLAN-tagged frames sent from
the peer in a loop), captured by ``pyxdp dump`` run inside the namespace; only the matching
frames may come out, each with the verdict the object gives it (pyxdp's own run of the same
object on the frame is the reference)."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyxdp.asm.assembler import assemble
from pyxdp.cli.main import main
from pyxdp.collection import Collection
from pyxdp.net.pcap import PcapWriter, read_capture
from pyxdp.net.pcap_filter import PacketFilter, libpcap_available
from pyxdp.net.prog import XdpProg
from pyxdp.net.xdp_capture import DatapathCapture
from pyxdp.spec import ProgramSpec
from pyxdp.testing.vethlab import mixed_frames, swap_macs
from pyxdp.uapi.bpf import XdpAction

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
MACS = (b"\x02\x00\x00\x00\x00\x01", b"\x02\x00\x00\x00\x00\x02")
FRAMES = mixed_frames(*MACS, n_rounds=2)


@pytest.fixture(autouse=True)
def _libpcap() -> None:
    if libpcap_available():
        return
    if os.environ.get("CI"):
        pytest.fail("libpcap is not installed (.ci/run installs libpcap0.8)", pytrace=False)
    pytest.skip("needs libpcap (Debian: libpcap0.8)")


def _udp_port(frame: bytes, port: int) -> bool:
    """An untagged IPv4 or IPv6 UDP frame to or from ``port`` (written out, not libpcap)."""
    etype = int.from_bytes(frame[12:14], "big")
    if etype == 0x0800 and len(frame) >= 34 and frame[23] == 17:
        l4 = 14 + 4 * (frame[14] & 0xF)
    elif etype == 0x86DD and len(frame) >= 54 and frame[20] == 17:
        l4 = 54
    else:
        return False
    sport, dport = struct.unpack_from(">HH", frame, l4)
    return port in (sport, dport)


def _is_icmp4(frame: bytes) -> bool:
    return frame[12:14] == b"\x08\x00" and frame[23] == 1


@pytest.fixture
def capture_file(tmp_path: Path) -> Path:
    path = tmp_path / "in.pcap"
    with PcapWriter(path) as w:
        for i, f in enumerate(FRAMES):
            w.write(f, 1_700_000_000_000_000_000 + i * 1000)
    return path


def test_dump_replays_a_capture_into_an_object_and_keeps_what_the_filter_matches(
        capture_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.pcapng"
    rc = main(["dump", "-i", "eth9", "--prog", str(SAMPLES / "xdp2.o"), "--pcap",
               str(capture_file), "--rx-capture", "entry,exit", "-w", str(out),
               "udp", "and", "port", "5678"])
    assert rc == 0
    got = list(read_capture(out))
    want = [f for f in FRAMES if _udp_port(f, 5678)]
    assert 0 < len(want) < len(FRAMES)
    assert [p.data for p in got if p.interface_name == "eth9@entry"] == want
    exits = [p for p in got if p.interface_name == "eth9@exit"]
    with Collection.load(SAMPLES / "xdp2.o", engine="interp") as xdp2:
        prog = xdp2.programs["xdp_prog2"]
        runs = [prog.test_run(f) for f in want]
    assert [(p.verdict, p.data) for p in exits] == [(r.retval, r.data_out) for r in runs]
    assert {p.verdict for p in exits} == {XdpAction.XDP_TX}
    assert all(p.data == swap_macs(f) for p, f in zip(exits, want, strict=True))
    # entry and exit of a frame stand side by side, with the frame's timestamp
    assert [p.interface_name for p in got[:4]] == ["eth9@entry", "eth9@exit"] * 2
    assert got[0].ts_ns == got[1].ts_ns


def test_dump_count_snaplen_and_the_redirect_target(capture_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.pcapng"
    assert main(["dump", "-i", "eth9", "--prog", str(SAMPLES / "xdp1.o"), "--pcap",
                 str(capture_file), "-c", "3", "--snapshot-length", "40", "-w", str(out),
                 "--filter", "icmp"]) == 0
    got = list(read_capture(out))
    assert len(got) == 3
    assert all(p.verdict == XdpAction.XDP_DROP and len(p.data) == 40 and p.orig_len > 40
               for p in got)
    # bpf_redirect(7, 0): the target goes in the record's comment
    redirect = XdpProg(ProgramSpec("r", "xdp", assemble("r1 = 7\nr2 = 0\ncall 23\nexit")), {})
    recs = DatapathCapture(redirect, filter=PacketFilter("tcp")).run(FRAMES, [0] * len(FRAMES))
    assert recs and all(r.verdict == XdpAction.XDP_REDIRECT
                        and r.redirect == "redirect to ifindex 7" for r in recs)


def test_run_pcap_filter_runs_only_the_matching_packets(capture_file: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    assert main(["run", str(SAMPLES / "xdp1.o"), "--pcap", str(capture_file),
                 "--filter", "icmp"]) == 0
    n = sum(_is_icmp4(f) for f in FRAMES)
    assert f"{n} packets through xdp_prog1" in capsys.readouterr().out


def test_dump_errors_are_one_line(capture_file: Path, capsys: pytest.CaptureFixture[str]
                                  ) -> None:
    obj = str(SAMPLES / "xdp1.o")
    cases = {
        ("dump", "-i", "x", "--prog", obj, "--pcap", str(capture_file), "udp", "and", "and"):
            "syntax error",
        ("dump", "-i", "x", "--prog", obj, "--rx-capture", "middle"): "entry and/or exit",
        ("dump", "-i", "x", "--pcap", str(capture_file)): "need --prog",
        ("run", obj, "--pcap", str(capture_file), "--filter", "port 99999"): "port 99999",
    }
    for argv, msg in cases.items():
        assert main(list(argv)) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1, err


# ----------------------------------------------------------------------------------------
# A busy veth pair
# ----------------------------------------------------------------------------------------

@pytest.fixture
def busy_veth() -> Iterator[str]:
    """A namespace with veth pair d0/d1; a thread sends FRAMES into d0 from d1 until the end."""
    from pyxdp.kernel.netlink import netns
    ns = f"pyxdp-dump-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    stop = threading.Event()
    sender: threading.Thread | None = None
    try:
        with netns(ns):
            for conf in ("all", "default"):  # the stack sends nothing of its own
                with open(f"/proc/sys/net/ipv6/conf/{conf}/disable_ipv6", "w") as f:
                    f.write("1")
            for cmd in (["link", "add", "d0", "address", MACS[1].hex(":"), "type", "veth",
                         "peer", "name", "d1", "address", MACS[0].hex(":")],
                        ["link", "set", "d0", "up"], ["link", "set", "d1", "up"]):
                subprocess.run(["ip", *cmd], check=True, capture_output=True)
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        tx.bind(("d1", 0))

        def send() -> None:
            with tx:
                while not stop.is_set():
                    for f in FRAMES:
                        tx.send(f)
                    time.sleep(0.002)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        yield ns
    finally:
        stop.set()
        if sender is not None:
            sender.join(5)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _dump_in(ns: str, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """``pyxdp dump`` run from the namespace (where d0 is), bounded in time, on the
    interpreter (a few dozen frames: no JIT compile); its stderr."""
    from pyxdp.kernel.netlink import netns
    capsys.readouterr()
    with netns(ns):
        rc = main(["dump", "--duration", "20", "--engine", "interp", *args])
    err = capsys.readouterr().err
    assert rc == 0, err
    return err


@pytest.mark.kernel
def test_dump_on_a_busy_veth_runs_the_object_on_pyxdp_and_writes_only_matching_frames(
        busy_veth: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "veth.pcapng"
    err = _dump_in(busy_veth, capsys, "-i", "d0", "--prog", str(SAMPLES / "xdp2.o"),
                   "--rx-capture", "entry,exit", "-c", "60", "-w", str(out),
                   "udp", "and", "port", "5678")
    got = list(read_capture(out))
    assert len(got) == 60, err
    entries = [p for p in got if p.interface_name == "d0@entry"]
    exits = [p for p in got if p.interface_name == "d0@exit"]
    assert len(entries) == len(exits) == 30
    assert all(p.data in FRAMES and _udp_port(p.data, 5678) and p.verdict is None
               for p in entries)
    with Collection.load(SAMPLES / "xdp2.o", engine="interp") as xdp2:
        prog = xdp2.programs["xdp_prog2"]
        for e, x in zip(entries, exits, strict=True):
            r = prog.test_run(e.data)
            assert (x.verdict, x.data) == (r.retval, r.data_out) == (XdpAction.XDP_TX,
                                                                       swap_macs(e.data))


@pytest.mark.kernel
def test_dump_on_a_busy_veth_traces_the_program_linux_runs(
        busy_veth: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pyxdp.kernel.link import XdpLink
    from pyxdp.kernel.netlink import netns
    from pyxdp.testing.vethlab import load_spec
    out = tmp_path / "linux.pcapng"
    with Collection(load_spec("sampler.o"), "kernel") as coll:
        with netns(busy_veth):
            link = XdpLink.attach("d0", coll.programs["xdp_sampler"], mode="native")
        with link:
            err = _dump_in(busy_veth, capsys, "-i", "d0", "-c", "25", "-w", str(out), "icmp")
    got = list(read_capture(out))
    assert len(got) == 25 and all(_is_icmp4(p.data) and p.data in FRAMES for p in got)
    if "fentry/fexit on program" in err and "refused" not in err:
        assert {p.verdict for p in got} == {XdpAction.XDP_PASS}
        assert {p.interface_name for p in got} == {"d0@exit"}
    else:  # this kernel refuses tracing programs on XDP programs: the packet socket
        assert "refused" in err and "without verdicts" in err, err
        assert {(p.verdict, p.interface_name) for p in got} == {(None, "d0")}


@pytest.mark.kernel
def test_ringbuf_reader_reads_what_a_program_outputs() -> None:
    """The consumer side of BPF_MAP_TYPE_RINGBUF (the kernel capture's channel): an XDP
    program outputs each frame's length and first 8 bytes; wrap-around included."""
    from pyxdp.asm import macros as m
    from pyxdp.asm import opcodes as op
    from pyxdp.asm.insn import ld_imm64
    from pyxdp.kernel.ringbuf import RingBuffer
    from pyxdp.kernel.syscall import prog_load, prog_test_run
    from pyxdp.uapi.bpf import BpfAttachType, BpfProgType
    with RingBuffer(4096) as rb:
        insns = [m.ldx_mem(4, 2, 1, 0), m.ldx_mem(4, 3, 1, 4),
                 m.mov64_reg(4, 2), m.alu64_imm(op.BPF_ADD, 4, 8),
                 m.jmp_reg(op.BPF_JGT, 4, 3, 11),  # -> r0 = XDP_PASS
                 m.alu64_reg(op.BPF_SUB, 3, 2), m.stx_mem(8, 10, 3, -16),
                 m.ldx_mem(8, 5, 2, 0), m.stx_mem(8, 10, 5, -8),
                 *ld_imm64(1, rb.fd.fileno(), op.PseudoSrc.BPF_PSEUDO_MAP_FD),
                 m.mov64_reg(2, 10), m.alu64_imm(op.BPF_ADD, 2, -16),
                 m.mov64_imm(3, 16), m.mov64_imm(4, 0), m.call_helper(130),
                 m.mov64_imm(0, XdpAction.XDP_PASS), m.exit_insn()]
        with prog_load(BpfProgType.BPF_PROG_TYPE_XDP, insns, "GPL", name="rb_test",
                       expected_attach_type=BpfAttachType.BPF_XDP) as fd:
            for rnd in range(3):  # 3 x 100 records of 24 bytes: round a 4 KiB ring 7 times
                frames = [bytes([rnd, i]) * 30 for i in range(100)]
                for f in frames:
                    assert prog_test_run(fd, f).retval == XdpAction.XDP_PASS
                got = rb.read()
                assert got == [struct.pack("=Q", 60) + f[:8] for f in frames]
        assert rb.read() == []
