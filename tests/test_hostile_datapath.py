"""Malformed packets through every sample on pyxdp's datapath, in machine code and on the
Python path: the same verdicts and counters, a fault reported only where there is one,
every page back exactly once and no descriptor left open.
"""

from __future__ import annotations

import errno
import os
import random
import struct
from pathlib import Path

import numpy as np
import pytest

from pyxdp.elf import load_collection_spec
from pyxdp.errors import KernelError
from pyxdp.net.netdevice import Host, NetDevice
from pyxdp.net.packets import udp_packet
from pyxdp.uapi.bpf import BpfAttachType
from pyxdp.vm.jit.engine import compile_together

ROOT = Path(__file__).resolve().parents[1]
SEED = 0x14
NOT_ATTACHABLE = (BpfAttachType.BPF_XDP_DEVMAP, BpfAttachType.BPF_XDP_CPUMAP)


def _malformed(rng: random.Random) -> list[bytes]:
    good = udp_packet(b"payload" * 4)
    eth_ip = good[:14]
    out = [good] * 4  # to lb.o's VIP, which has no backends
    out += [good[:n] for n in (14, 15, 20, 33, 34, 35, 41, 42)]  # cut inside each header
    out += [eth_ip + bytes([0x4F]) + good[15:], eth_ip + bytes([0x41]) + good[15:],  # IHL
            eth_ip + bytes([0x60]) + good[15:],                  # IPv6 version, IPv4 body
            good[:12] + b"\x81\x00" + good[12:],                 # a VLAN tag, then IPv4
            good[:12] + b"\x88\xa8\x81\x00" + good[12:],          # QinQ
            good[:16] + struct.pack(">H", 0xFFFF) + good[18:],   # tot_len past the end
            good[:16] + struct.pack(">H", 0) + good[18:],        # tot_len 0
            bytes(14), b"\xff" * 60, bytes(3000)]
    for _ in range(24):  # the good packet with random bytes changed, and random frames
        p = bytearray(good)
        for _ in range(rng.randint(1, 6)):
            p[rng.randrange(len(p))] = rng.randrange(256)
        out.append(bytes(p))
        out.append(bytes(rng.randrange(256) for _ in range(rng.randrange(14, 200))))
    return out


def _programs() -> list[tuple[str, str]]:
    out = []
    for obj in sorted((ROOT / "samples").glob("*.o")):
        spec = load_collection_spec(obj)
        # XDP programs a NIC can run: not devmap/cpumap ones, not the other types
        # an object may hold, not device-bound ones (their kfuncs need a bound load).
        out += [(obj.name, name) for name, p in spec.programs.items()
                if p.prog_type == "xdp" and p.autoload and not p.kfuncs
                and p.expected_attach_type not in NOT_ATTACHABLE]
    return out


def _counters(dev: NetDevice) -> tuple[int, ...]:
    s = dev.stats
    return (s.rx_packets, s.xdp_drops, s.xdp_pass, s.xdp_tx, s.xdp_redirect, s.xdp_aborted)


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_malformed_packets_through_every_sample_native_equals_python() -> None:
    # One host, a NIC per sample program (compiled as one LLVM module); a round in
    # machine code, then the same packets on the Python path.
    packets = _malformed(random.Random(SEED))
    progs = _programs()
    assert len(progs) >= 15
    fds = _fds()
    with Host() as host:
        devs = []
        with compile_together(0):  # -O0: the same verdicts, a fraction of the compile
            # unchecked.o (refused by both verifiers) runs unverified: its read faults
            colls = {obj: host.load(ROOT / "samples" / obj, verify=obj != "unchecked.o")
                     for obj in {o for o, _ in progs}}
            # A VIP without backends: pick_backend(), a BPF-to-BPF call, fails and lb drops.
            # The call's depth once stayed in the status word and the native loop counted
            # a fault "without a cause" for each such poll.
            vip = {"addr": bytes([198, 51, 100, 2]), "port": (5678).to_bytes(2, "big"),
                   "proto": 17}
            colls["lb.o"].maps["vips"][vip] = {"first_backend": 0, "backend_count": 0}
            for n, (obj, prog) in enumerate(progs):
                dev = host.add_device(f"eth{n}")
                dev.attach_xdp(colls[obj].programs[prog])
                devs.append(dev)
        host.add_device("tx0")  # an ifindex past the NICs for redirects to find
        rounds = []
        for native in (True, False, True):
            host.native = native
            before = [_counters(d) for d in devs]
            for d in devs:
                d.receive(packets)
            host.run()
            rounds.append([tuple(a - b for a, b in zip(_counters(d), was, strict=True))
                           for d, was in zip(devs, before, strict=True)])
        faulted = [progs[i] for i, d in enumerate(devs) if d.faults]
    # leaving the block checked that every page came back exactly once
    for i, p in enumerate(progs):
        assert rounds[1][i] == rounds[2][i], p  # maps as the first round left them
        assert rounds[0][i][0] == len(packets), p
    # Only the sample written to fault does (its unchecked read past short packets).
    assert {o for o, _ in faulted} == {"unchecked.o"}, faulted
    lb = progs.index(("lb.o", "lb_ingress"))
    assert all(r[lb][1] >= 4 and r[lb][5] == 0 for r in rounds)  # the VIP's drops
    assert _fds() == fds


def test_bad_device_arguments_are_one_line_errors() -> None:
    # Found by fuzzing the Host API: a million queues ran out of memory allocating page
    # pools, a float or a bad MAC escaped as an internal TypeError, rx queue 99 was an
    # IndexError and -1 silently the last queue. Each is rtnetlink's EINVAL now (a
    # KernelError, and a ValueError for callers checking Python arguments).
    with Host(native=False) as host:  # the Python path: no machine code to load
        for kw, match in (({"rx_queues": 1 << 20}, "Invalid number of receive queues"),
                          ({"tx_queues": 0}, "Invalid number of transmit queues"),
                          ({"rx_queues": 1.5}, "receive queues"),
                          ({"mtu": 67}, "mtu less than device minimum"),
                          ({"mtu": 1 << 33}, "mtu greater than device maximum"),
                          ({"mac": b"x"}, "a MAC address is 6 bytes")):
            with pytest.raises(KernelError, match=match) as e:
                host.add_device("eth0", **kw)  # type: ignore[arg-type]
            assert e.value.errno == errno.EINVAL and isinstance(e.value, ValueError)
        for name in ("a" * 16, "", "a/b", 5):
            with pytest.raises(KernelError, match="bad device name"):
                host.add_device(name)  # type: ignore[arg-type]
        with pytest.raises(KernelError, match="Invalid number of transmit queues"):
            host.veth("v0", "v1", queues=1 << 20)
        eth0 = host.add_device("eth0", rx_queues=2)
        with pytest.raises(KernelError, match="File exists"):
            host.add_device("eth0")
        for q in (2, -1, "0", None):
            with pytest.raises(KernelError, match=r"rx queues 0\.\.1"):
                eth0.receive([udp_packet(b"x")], queue=q)  # type: ignore[arg-type]
        for bad in (5, "x", None, [b"ok", 3], b"abc"):
            with pytest.raises(TypeError, match="must be"):
                eth0.receive(bad)  # type: ignore[arg-type]
        with pytest.raises(KernelError, match="a MAC address"):
            eth0.mac = None  # type: ignore[assignment]
        # a float64 array is its 8 bytes per item (it overflowed a 1-byte-per-item row)
        assert eth0.receive([np.zeros(64, np.float64), bytearray(60)]) == 2
        host.run()
        assert eth0.stats.rx_packets == 2


def test_a_umem_beyond_memory_is_an_xsk_error() -> None:
    from pyxdp.net.xdp_umem import XskError
    from pyxdp.xsk.umem import Umem
    with pytest.raises(XskError, match="Cannot allocate memory"):
        Umem((1 << 32) - 1, 4096)  # a valid geometry of 16 TiB: mmap's ENOMEM, not OSError
    with pytest.raises(XskError, match="holds -1 chunks"):
        Umem(-1, 2048)  # a negative length passed the checks to mmap (OverflowError)
    with pytest.raises(XskError, match="headroom -1 outside"):
        Umem(2, 2048, -1)


def test_empty_frames_reach_the_stack() -> None:
    # Found by fuzzing: frames of 0 bytes passed to the stack failed the copy out of
    # their pages (numpy's shape mismatch).
    with Host() as host:
        eth0 = host.add_device("eth0")
        assert eth0.receive([b"", b""]) == 2
        host.run()
        assert eth0.stats.rx_packets == 2



def test_closed_programs_and_hosts_refuse_use_in_one_line() -> None:
    """Found by misusing a host after close (round 7): a program whose collection was
    closed still attached (Linux: its fd is gone, EBADF), and a closed host took devices,
    objects and frames (frames raised an internal page-pool accounting error). A program
    attached before its collection closed keeps running, as the kernel's attachment holds
    it."""
    host = Host(native=False, engine="interp")
    eth0, eth1 = host.add_device("eth0"), host.add_device("eth1")
    coll = host.load(ROOT / "samples" / "xdp1.o")
    prog = coll.programs["xdp_prog1"]
    eth0.attach_xdp(prog)
    coll.close()
    eth0.receive([udp_packet(b"x")] * 4)
    assert host.run() == 4
    with pytest.raises(KernelError) as e:
        eth1.attach_xdp(prog)
    assert e.value.errno == errno.EBADF and "is closed" in str(e.value)
    host.close()
    host.close()  # twice is fine
    for call in (lambda: eth0.receive([udp_packet(b"x")]), lambda: eth1.transmit([b"x" * 60]),
                 lambda: host.add_device("eth2"), lambda: host.veth("v0", "v1"),
                 lambda: host.load(ROOT / "samples" / "xdp1.o"),
                 lambda: eth1.attach_xdp(prog), lambda: eth1.attach_xdp_multi([prog])):
        with pytest.raises(KernelError) as e:
            call()
        assert e.value.errno == errno.ENODEV and "host 'pyxdp' is closed" in str(e.value)
        assert "\n" not in str(e.value)


def test_a_device_has_no_close_of_its_own() -> None:
    """Found by fuzzing host/device/collection call sequences: ``NetDevice.close`` was
    public, and a device closed alone stayed a redirect target (its devmap entry, the
    native forwarding table): a frame redirected into it met a destroyed page pool (an
    internal accounting error), and ``Host.close`` tore it down twice. A device goes with
    its host, whose close tears every device down once."""
    host = Host(native=False, engine="interp")
    eth0 = host.add_device("eth0")
    assert not hasattr(eth0, "close")
    eth0.receive([udp_packet(b"x")] * 2)
    host.close()  # the queued frames go back to their pools: no leak
    assert all(rq.pool.destroyed for rq in eth0.rx)


@pytest.mark.parametrize("native", [False, True])
def test_a_raising_trace_callback_does_not_strand_a_batch(native: bool) -> None:
    """Found by fuzzing the tracepoint API: a listener's callback that raised unwound the
    poll in the middle of a batch, its frames' pages never returned (Host.close then
    reported a leak). The callback runs where a tracing program runs in the kernel: its
    error detaches it (kept on the subscription, logged), and the datapath goes on."""
    from pyxdp.net import trace
    from pyxdp.testing.programs import asm_collection

    def bad(event: object) -> None:
        raise RuntimeError("listener bug")
    with Host(native=native) as host:
        eth0 = host.add_device("eth0")
        eth0.attach_xdp(host.load(asm_collection("r0 = 0\nexit")).programs["t"])  # ABORTED
        sub = trace.subscribe(["xdp_exception"], bad)
        eth0.receive([udp_packet(b"x")] * 8)
        assert host.run() == 8
        assert isinstance(sub.error, RuntimeError) and not sub.events
        eth0.receive([udp_packet(b"x")] * 8)
        assert host.run() == 8
    # Host.close checked every page back
