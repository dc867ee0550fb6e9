"""Multi-buffer frames on a NIC: frames longer than a page's packet room received on a
9000-MTU NIC (``NetDevice._dma_frags``: a head page and page frags of the rx queue's
pool per frame), alone (``dma``: lists of 64 received, then freed as a DROP frees
them) and through an ``xdp.frags`` program returning each verdict (``drop``,
``pass`` to the stack, ``tx``, ``redirect`` with ``bpf_redirect`` to a second
9000-MTU NIC whose transmit is a sink, ``cpumap`` with ``bpf_redirect_map`` into a
cpumap entry of CPU 0 whose kthread passes them to the stack, ``veth`` with
``bpf_redirect`` to a 9000-MTU veth whose peer's ``xdp.frags`` program drops them:
``veth_xdp_xmit`` onto the peer's ``xdp_ring``, the peer's poll, ``bcast`` with
``bpf_redirect_map`` and ``BPF_F_BROADCAST`` over a devmap naming the second NIC
twice: ``xdpf_clone`` refuses a frame with frags, so the last entry alone sends it),
the NIC's generator making the frames.
The ``generic_*`` cases are generic (skb-mode) XDP on such skbs: lists of 64 given
to ``netif_receive_skb_list`` of a device whose program (``XDP_DROP``, or
``XDP_PASS``, ``XDP_TX``, ``bpf_redirect`` to the second NIC for ``*_pass``,
``*_tx``, ``*_redirect``) is frags-aware (``generic_frags``: each skb copied
into a head page and page frags, ``skb_cow_data_for_xdp``) or not
(``generic_linear``: each skb linearised into a ``kmalloc``-sized buffer).

Printed: thousands of frames per CPU second (the process's CPU time: the native loop
and the inline cpumap kthreads run in it; a loaded machine's waits do not count),
median of ``--runs`` runs after a warm-up.

Run: python bench/bench_frags.py [--frames N] [--runs N] [--size BYTES] [--cases ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import time
from dataclasses import replace

from pyxdp.net import packets as pk
from pyxdp.net.netdevice import Host
from pyxdp.net.source import TrafficGenerator
from pyxdp.net.stack import SkbBatch
from pyxdp.net.trace import Tracer
from pyxdp.spec import BPF_F_XDP_HAS_FRAGS, CollectionSpec, MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType

VERDICTS = {"drop": "r0 = 1\nexit", "pass": "r0 = 2\nexit", "tx": "r0 = 3\nexit",
            # bpf_redirect(eth1 = ifindex 3, 0)
            "redirect": "r1 = 3\nr2 = 0\ncall 23\nexit",
            # bpf_redirect_map(cpus, 0, 0)
            "cpumap": "r1 = map[fd:0]\nr2 = 0\nr3 = 0\ncall bpf_redirect_map\nexit",
            # bpf_redirect(veth0 = ifindex 4, 0): veth1's xdp.frags program drops them
            "veth": "r1 = 4\nr2 = 0\ncall 23\nexit",
            # bpf_redirect_map(ports, 0, BPF_F_BROADCAST)
            "bcast": "r1 = map[fd:0]\nr2 = 0\nr3 = 8\ncall bpf_redirect_map\nexit"}
CPUMAP = [MapSpec("cpus", int(BpfMapType.BPF_MAP_TYPE_CPUMAP), 4, 8, 1)]
DEVMAP = [MapSpec("ports", int(BpfMapType.BPF_MAP_TYPE_DEVMAP), 4, 4, 2)]


def _frags_prog(text: str) -> CollectionSpec:
    maps = (CPUMAP if "r3 = 0" in text else DEVMAP) if "map[" in text else ()
    spec = asm_collection(text, maps)
    t0 = spec.programs["t"]
    return replace(spec, programs={"t": replace(t0, section="xdp.frags",
                                                flags=t0.flags | BPF_F_XDP_HAS_FRAGS)})


def kfps_dma(frames: int, size: int) -> float:
    """The DMA alone: lists of 64 ``size``-byte frames received, then freed from the
    ring as XDP_DROP frees them (each frame's frags, then its head)."""
    with Host(tracer=Tracer(), engine="jit") as h:
        nic = h.add_device("eth0", mtu=9000)
        rq = nic.rx[0]
        batch = SkbBatch.from_packets([pk.udp_packet(b"mb", sport=1000 + i, size=size)
                                       for i in range(64)], nic.ifindex)
        rounds = frames // 64
        t = time.process_time()
        for _ in range(rounds):
            nic.receive(batch)
            h.drop_frames(rq.ring.consume(64), rq, direct=True)
        return rounds * 64 / (time.process_time() - t) / 1e3


def kfps_verdict(verdict: str, frames: int, size: int) -> float:
    """``frames`` generated ``size``-byte frames through an ``xdp.frags`` program
    returning ``verdict``; thousands of frames the program saw per second."""
    with Host(tracer=Tracer(), engine="jit") as h:
        nic = h.add_device("eth0", mtu=9000)
        h.add_device("eth1", mtu=9000)
        if verdict == "veth":
            _, peer = h.veth("veth0", "veth1", mtu=9000)
            peer.attach_xdp(h.load(_frags_prog(VERDICTS["drop"])).programs["t"])
        coll = h.load(_frags_prog(VERDICTS[verdict]))
        if "cpus" in coll.maps:
            coll.maps["cpus"][0] = struct.pack("<Ii", 256, 0)  # a ring of 256, no program
        if "ports" in coll.maps:  # eth1 twice: a multi-buffer frame reaches the last
            coll.maps["ports"][0] = coll.maps["ports"][1] = struct.pack("<I", 3)
        nic.attach_xdp(coll.programs["t"])
        nic.rx[0].source = TrafficGenerator(packets=[pk.udp_packet(b"mb", size=size)],
                                            count=frames)
        t = time.process_time()
        h.run()
        dt = time.process_time() - t
        return nic.stats.xdp_packets / dt / 1e3


def kfps_generic(case: str, frames: int, size: int) -> float:
    """``frames`` skbs of ``size`` bytes through generic XDP in lists of 64; thousands
    of skbs the program saw per second."""
    from pyxdp.net.dev import netif_receive_skb_list
    verdict = case.split("_")[2] if case.count("_") == 2 else "drop"
    text = VERDICTS[verdict]
    spec = _frags_prog(text) if case.startswith("generic_frags") else asm_collection(text)
    with Host(tracer=Tracer(), engine="jit") as h:
        nic = h.add_device("eth0", mtu=9000)
        h.add_device("eth1", mtu=9000)  # bpf_redirect's target, a sink
        nic.attach_xdp(h.load(spec).programs["t"], mode="generic")
        batch = SkbBatch.from_packets([pk.udp_packet(b"mb", sport=1000 + i, size=size)
                                       for i in range(64)], nic.ifindex)
        rounds = frames // 64
        t = time.process_time()
        for _ in range(rounds):
            netif_receive_skb_list(nic, batch)
        dt = time.process_time() - t
        return nic.stats.xdp_packets / dt / 1e3


GENERIC = tuple(f"generic_{k}{v}" for v in ("", "_pass", "_tx", "_redirect")
                for k in ("frags", "linear"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=64_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--size", type=int, default=9000)
    ap.add_argument("--cases", default="dma,drop,pass,tx,redirect,cpumap,veth,bcast",
                    help="comma-separated: dma, drop, pass, tx, redirect, cpumap, veth, bcast, "
                    + ", ".join(GENERIC))
    args = ap.parse_args()
    print(f"{os.cpu_count()} CPUs; {args.frames} {args.size}-byte frames per run; "
          f"median of {args.runs}")
    for case in args.cases.split(","):
        if case == "dma":
            def f(n: int) -> float:
                return kfps_dma(n, args.size)
        elif case in GENERIC:
            def f(n: int, c: str = case) -> float:
                return kfps_generic(c, n, args.size)
        elif case in VERDICTS:
            def f(n: int, v: str = case) -> float:
                return kfps_verdict(v, n, args.size)
        else:
            raise SystemExit(f"unknown case {case!r}")
        f(min(args.frames, 6400))  # warm-up: compile, touch pages
        k = statistics.median(f(args.frames) for _ in range(args.runs))
        print(f"{case:9s} {k:9.1f} kframes/CPU-s")


if __name__ == "__main__":
    main()
