"""Workers that scale: pyxdp's datapath with N NAPI threads (threaded NAPI, one rx queue
and one CPU each) against one, a cpumap kthread on its own thread against the
kthread run inline, N lockless rx workers redirecting into one cpumap entry
delivered on a remote CPU, skbs one veth end's lockless poll sends to the
other's (``vethtx``), and skbs longer than a page a veth sends to a peer's
``xdp.frags`` program (``vethmb``).

Each NAPI thread runs the native poll loop without the interpreter lock and
without the host lock (the programs below keep their state in per-CPU arrays),
so N workers can use N CPUs. Printed: Mpps per N and the ratio to one worker
(goal: at least 0.7 x N), medians of ``--runs`` runs after a warm-up, the
N = 1 and N = k runs interleaved so that drift of the shared machine hits both.

Run: python bench/bench_workers.py [--frames N] [--runs N] [--max-workers N] [--cases ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from pyxdp.cli.datapath import DEFAULT_PACKET, SAMPLES, mpps_cpumap, mpps_workers, receiver
from pyxdp.collection import Collection
from pyxdp.net import packets as pk
from pyxdp.net.netdevice import Host, NetDevice
from pyxdp.net.source import TrafficGenerator
from pyxdp.net.stack import SkbBatch
from pyxdp.net.trace import Tracer
from pyxdp.spec import CollectionSpec
from pyxdp.testing.kernel_live import DROP, REDIRECT_DEVMAP
from pyxdp.testing.programs import asm_collection


def _to_eth1(h: Host, eth: NetDevice, coll: Collection) -> None:
    """The devmap redirect's target: a NIC whose transmit is a sink."""
    coll.maps["tx_port"][0] = h.add_device("eth1").ifindex


def mpps_veth_generic_tx(frames: int) -> float:
    """Threaded NAPI, both polls without the host lock: veth0's second queue (CPU 1)
    sends every frame back out with a generic program (``generic_xdp_tx``:
    ``veth_xmit``, the skb onto veth1's ``xdp_ring``), veth1's queue (CPU 0) drops
    what it gets with a native program. Mpps veth0 sent (veth1's ring of 256 takes
    what fits until its poll's next round)."""
    with Host(engine="jit", threaded_napi=True) as h:
        v0, v1 = h.veth("veth0", "veth1", queues=2)
        v1.attach_xdp(h.load(asm_collection("r0 = 1\nexit")).programs["t"])
        v0.attach_xdp(h.load(asm_collection("r0 = 3\nexit")).programs["t"], mode="generic")
        v0.rx[1].source = TrafficGenerator(flows=64, count=frames)
        t = time.perf_counter()
        h.run()
        dt = time.perf_counter() - t
        return v0.stats.tx_packets / dt / 1e6


def mpps_veth_stack_xmit(frames: int) -> float:
    """The stack's transmit on veth0 (``veth_xmit`` of lists of 256 skbs: each onto
    veth1's ``xdp_ring``), veth1's native program dropping them, one softirq round
    after each list. Mpps veth1's program saw."""
    with Host(engine="jit") as h:
        v0, v1 = h.veth("veth0", "veth1")
        v1.attach_xdp(h.load(asm_collection("r0 = 1\nexit")).programs["t"])
        gen = TrafficGenerator(flows=64)
        batch = SkbBatch(gen.batch.data[:256], gen.batch.length[:256],
                         gen.batch.ifindex[:256], gen.batch.queue[:256],
                         list(gen.batch.meta[:256]))
        return _xmit_lists(h, v0, v1, batch, frames // 256)


def _xmit_lists(h: Host, v0: NetDevice, v1: NetDevice, batch: SkbBatch, lists: int) -> float:
    """``lists`` times: ``batch`` sent on ``v0`` then one softirq round; Mpps ``v1``'s
    program dropped."""
    t = time.perf_counter()
    for _ in range(lists):
        v0.xmit_skbs(batch)
        h.run()
    dt = time.perf_counter() - t
    return float(v1.stats.xdp_drops / dt / 1e6)


def mpps_cpumap_workers(workers: int, frames: int) -> tuple[float, float]:
    """Threaded NAPI: ``workers`` rx queues (CPUs 0..workers-1), each polled without the
    host lock, redirect every frame with redirect_cpu's round robin into one cpumap
    entry on CPU ``workers`` (qsize 2048, no program), whose kthread runs on a thread
    of its own and delivers lists of skbs to the stack. (Mpps the workers redirected,
    Mpps delivered on the remote CPU), over the wall time of the run; frames the
    entry's ring refused at enqueue are dropped there (``xdp_cpumap_enqueue``)."""
    remote = workers
    with Host(tracer=Tracer(), threaded_napi=True, cpumap_threads=True,
              nr_cpus=workers + 1) as h:
        eth = receiver(h, rx_queues=workers)
        coll = h.load(SAMPLES / "redirect_cpu.o")
        eth.attach_xdp(coll.programs["xdp_redirect_cpu_rr"])
        coll.maps["cpu_map"][remote] = {"qsize": 2048, "bpf_prog": {"fd": 0}}
        coll.maps["cpus_available"][0] = remote
        coll.maps["cpus_count"][0] = 1
        for q in range(workers):  # the entry made, its kthread started
            eth.rx[q].source = TrafficGenerator(packets=[DEFAULT_PACKET], count=64)
        h.run()
        for q in range(workers):
            eth.rx[q].source = TrafficGenerator(packets=[DEFAULT_PACKET],
                                                count=frames // workers)
        redirected = eth.stats.xdp_redirect
        before = h.stack.stats.received
        t = time.perf_counter()
        h.run()
        dt = time.perf_counter() - t
        return ((eth.stats.xdp_redirect - redirected) / dt / 1e6,
                (h.stack.stats.received - before) / dt / 1e6)


def _frags_drop() -> CollectionSpec:
    """An ``xdp.frags`` program returning XDP_DROP."""
    from dataclasses import replace

    from pyxdp.spec import BPF_F_XDP_HAS_FRAGS
    spec = asm_collection("r0 = 1\nexit")
    t0 = spec.programs["t"]
    return replace(spec, programs={"t": replace(t0, section="xdp.frags",
                                                flags=t0.flags | BPF_F_XDP_HAS_FRAGS)})


def _long_skbs(ifindex: int, size: int) -> SkbBatch:
    return SkbBatch.from_packets([pk.udp_packet(b"mb", sport=1000 + i, size=size)
                                  for i in range(64)], ifindex)


def mpps_veth_stack_xmit_mb(frames: int, size: int = 6000) -> float:
    """As :func:`mpps_veth_stack_xmit` with ``size``-byte frames on 9000-MTU ends and an
    ``xdp.frags`` program on veth1, lists of 64: each skb in a head and page frags of
    the system allocator, which veth1's poll copies into a head and frags of its pool
    (``skb_pp_cow_data``) before its program drops it. Mpps veth1's program saw."""
    with Host(engine="jit") as h:
        v0, v1 = h.veth("veth0", "veth1", mtu=9000)
        v1.attach_xdp(h.load(_frags_drop()).programs["t"])
        batch = _long_skbs(v0.ifindex, size)
        return _xmit_lists(h, v0, v1, batch, frames // 64)


def us_skb_copies(frames: int, size: int = 6000) -> float:
    """The two copies alone, microseconds per ``size``-byte skb: ``veth_xdp_rx``'s skb
    in the system allocator (``NetDevice._queue_skbs``) and the receiving poll's
    ``skb_pp_cow_data`` into its pool (``napi._skbs_to_buffs``), lists of 64, the
    pool's pages then freed (no program runs)."""
    from pyxdp.net import napi
    with Host(engine="jit") as h:
        _v0, v1 = h.veth("veth0", "veth1", mtu=9000)
        v1.attach_xdp(h.load(_frags_drop()).programs["t"])
        rq = v1.rx[0]
        batch = _long_skbs(v1.ifindex, size)
        rounds = frames // 64
        t = time.perf_counter()
        for _ in range(rounds):
            v1._queue_skbs(rq, batch)
            h.drop_frames(napi._skbs_to_buffs(h, rq, rq.ring.consume(64)), rq, direct=True)
        return (time.perf_counter() - t) / (rounds * 64) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=8_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--max-workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--cases", default="drop,xdp1,devmap,cpumap,vethtx",
                    help="comma-separated: drop, xdp1, devmap (redirect into one devmap "
                         "entry, a NIC), cpumap, vethtx (generic XDP_TX on a veth whose "
                         "peer's poll runs on another thread), vethmb (6000-byte "
                         "skbs to a veth peer's xdp.frags program)")
    args = ap.parse_args()
    cases = set(args.cases.split(","))
    print(f"{os.cpu_count()} CPUs; {args.frames} 64-byte frames per run; median of "
          f"{args.runs}")
    for name, obj, setup in (("XDP_DROP", DROP, None), ("xdp1", SAMPLES / "xdp1.o", None),
                             ("devmap", REDIRECT_DEVMAP, _to_eth1)):
        if {"XDP_DROP": "drop"}.get(name, name) not in cases:
            continue
        for n in range(1, args.max_workers + 1):
            mpps_workers(obj, n, 200_000, setup=setup)  # warm-up: compile, touch pages
        one: list[float] = []
        many: dict[int, list[float]] = {n: [] for n in range(2, args.max_workers + 1)}
        for _ in range(args.runs):
            one.append(mpps_workers(obj, 1, args.frames, setup=setup))
            for n in many:
                many[n].append(mpps_workers(obj, n, args.frames, setup=setup))
        base = statistics.median(one)
        print(f"{name:9s} 1 worker : {base:7.2f} Mpps")
        for n, rates in many.items():
            m = statistics.median(rates)
            print(f"{name:9s} {n} workers: {m:7.2f} Mpps   {m / base:.2f} x one "
                  f"(goal >= {0.7 * n:.1f})")
    if "vethtx" in cases:
        mpps_veth_generic_tx(100_000)
        sent = statistics.median(mpps_veth_generic_tx(args.frames // 4)
                                 for _ in range(args.runs))
        print(f"vethtx    generic XDP_TX to a lockless peer: {sent:7.3f} Mpps sent")
        mpps_veth_stack_xmit(25_600)
        got = statistics.median(mpps_veth_stack_xmit(args.frames // 16)
                                for _ in range(args.runs))
        print(f"vethtx    stack's veth_xmit to a native peer: {got:7.3f} Mpps")
    if "vethmb" in cases:
        mpps_veth_stack_xmit_mb(6400)
        mb = statistics.median(mpps_veth_stack_xmit_mb(args.frames // 16)
                               for _ in range(args.runs))
        print(f"vethmb    stack's veth_xmit of 6000-byte skbs to an xdp.frags peer: "
              f"{mb:7.3f} Mpps")
        us_skb_copies(6400)
        us = statistics.median(us_skb_copies(args.frames // 16) for _ in range(args.runs))
        print(f"vethmb    the skb's two copies alone (system pages, then the pool): "
              f"{us:7.2f} us per skb")
    if "cpumap" not in cases:
        return
    frames = args.frames // 4
    mpps_cpumap(100_000, True)
    mpps_cpumap(100_000, True, threaded=True)
    inline, thread = [], []
    for _ in range(args.runs):
        inline.append(mpps_cpumap(frames, True))
        thread.append(mpps_cpumap(frames, True, threaded=True))
    a, b = statistics.median(inline), statistics.median(thread)
    print(f"cpumap    kthread inline: {a:7.2f} Mpps; on its own thread: {b:7.2f} Mpps "
          f"({b / a:.2f} x)")
    # N lockless rx workers producing into one entry's ring (its producer lock), the
    # kthread on the remote CPU; N = 1 and N = k interleaved.
    for n in range(1, args.max_workers + 1):
        mpps_cpumap_workers(n, 200_000)
    runs: dict[int, list[tuple[float, float]]] = {n: [] for n in range(1, args.max_workers + 1)}
    for _ in range(args.runs):
        for n in runs:
            runs[n].append(mpps_cpumap_workers(n, frames))
    base = statistics.median(d for _, d in runs[1])
    for n, rates in runs.items():
        red = statistics.median(r for r, _ in rates)
        got = statistics.median(d for _, d in rates)
        print(f"cpumap    {n} rx worker{'s' if n > 1 else ' '} -> kthread on CPU {n}: "
              f"{red:7.2f} Mpps redirected, {got:7.2f} Mpps delivered ({got / base:.2f} x one)")


if __name__ == "__main__":
    main()
