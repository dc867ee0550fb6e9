"""Workers that scale: pyxdp's datapath with N NAPI threads (threaded NAPI, one rx queue
and one CPU each) against one, and a cpumap kthread on its own thread against the
kthread run inline.

Each NAPI thread runs the native poll loop without the interpreter lock and
without the host lock (the programs below keep their state in per-CPU arrays),
so N workers can use N CPUs. Printed: Mpps per N and the ratio to one worker
(goal: at least 0.7 x N), medians of ``--runs`` runs after a warm-up, the
N = 1 and N = k runs interleaved so that drift of the shared machine hits both.

Run: python bench/bench_workers.py [--frames N] [--runs N] [--max-workers N]
"""

from __future__ import annotations

import argparse
import os
import statistics

from pyxdp.cli.datapath import SAMPLES, mpps_cpumap, mpps_workers
from pyxdp.collection import Collection
from pyxdp.net.netdevice import Host, NetDevice
from pyxdp.testing.kernel_live import DROP, REDIRECT_DEVMAP


def _to_eth1(h: Host, eth: NetDevice, coll: Collection) -> None:
    """The devmap redirect's target: a NIC whose transmit is a sink."""
    coll.maps["tx_port"][0] = h.add_device("eth1").ifindex


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=8_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--max-workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--cases", default="drop,xdp1,devmap,cpumap",
                    help="comma-separated: drop, xdp1, devmap (redirect into one devmap "
                         "entry, a NIC), cpumap")
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


if __name__ == "__main__":
    main()
