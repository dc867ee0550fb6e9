"""pyxdp's userspace datapath, side by side: native vs generic XDP, the cost ladder
DROP / PASS to the stack / PASS to a UDP socket, cpumap list delivery vs one skb
at a time, and (root) the kernel's live-frames XDP_DROP of the same packet.

Every figure is the median of ``--runs`` runs; each run pushes ``--frames``
64-byte UDP frames through a NIC's rx queue (the traffic generator writes
them into page pool pages, NAPI polls of 64 run the program as one batch).

Run: python bench/bench_datapath.py [--frames N] [--runs N] [--no-kernel]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from pyxdp.net.netdevice import Host, NetDevice
from pyxdp.net.packets import DEFAULT_DST_IP4, udp_packet
from pyxdp.net.source import TrafficGenerator
from pyxdp.net.stack import SkbBatch
from pyxdp.net.trace import Tracer
from pyxdp.testing.kernel_live import DROP, SAMPLES, asm_spec

PASS = asm_spec("xdp_pass", "r0 = 2\nexit")
PACKET = udp_packet(size=64, dport=9)


def _native(prog_spec: object, frames: int, setup: Callable[[Host, NetDevice], None] | None
            = None) -> float:
    """Mpps of one run: ``frames`` generated frames through native XDP on eth0."""
    with Host(tracer=Tracer()) as h:
        eth = h.add_device("eth0")
        coll = h.load(prog_spec)  # type: ignore[arg-type]
        eth.attach_xdp(coll.program())
        if setup is not None:
            setup(h, eth)
        eth.rx[0].source = TrafficGenerator(packets=[PACKET], count=frames)
        t0 = time.perf_counter()
        done = h.run()
        dt = time.perf_counter() - t0
        assert done >= frames
    return frames / dt / 1e6


def _generic(prog_spec: object, frames: int) -> float:
    """Mpps of generic XDP: the same frames as skbs received by the device."""
    with Host(tracer=Tracer()) as h:
        eth = h.add_device("eth0")
        coll = h.load(prog_spec)  # type: ignore[arg-type]
        eth.attach_xdp(coll.program(), mode="generic")
        one = SkbBatch.from_packets([PACKET] * 64, eth.ifindex)
        t0 = time.perf_counter()
        for _ in range(frames // 64):
            h.netif_receive(eth, one)
        dt = time.perf_counter() - t0
    return (frames // 64) * 64 / dt / 1e6


def _cpumap(frames: int, list_delivery: bool) -> float:
    """Mpps through redirect_cpu's round robin into one cpumap entry, delivered to the
    stack as lists (the kernel since 5.x) or one skb at a time."""
    with Host(tracer=Tracer()) as h:
        eth = h.add_device("eth0")
        coll = h.load(SAMPLES / "redirect_cpu.o")
        eth.attach_xdp(coll.programs["xdp_redirect_cpu_rr"])
        coll.maps["cpu_map"][0] = {"qsize": 2048, "bpf_prog": {"fd": 0}}
        coll.maps["cpus_available"][0] = 0
        coll.maps["cpus_count"][0] = 1
        eth.rx[0].source = TrafficGenerator(packets=[PACKET], count=frames)
        h.poll()  # makes the entry
        for rt in h.cpumaps.values():
            rt.list_delivery = list_delivery
        t0 = time.perf_counter()
        h.run()
        dt = time.perf_counter() - t0
        assert h.stack.stats.received >= frames - 64
    return frames / dt / 1e6


def _udp_socket(h: Host, eth: NetDevice) -> None:
    h.stack.udp_socket(9)


def median(f: Callable[[], float], runs: int) -> float:
    f()  # warm-up: JIT compile, page faults
    return statistics.median(f() for _ in range(runs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-kernel", action="store_true", help="skip the kernel figure")
    args = ap.parse_args()
    n, runs = args.frames, args.runs
    rows: list[tuple[str, float]] = []
    drop = median(lambda: _native(DROP, n), runs)
    rows.append(("native XDP_DROP", drop))
    gen = median(lambda: _generic(DROP, n), runs)
    rows.append(("generic XDP_DROP", gen))
    pas = median(lambda: _native(PASS, n), runs)
    rows.append(("native XDP_PASS -> stack (no listener)", pas))
    sock = median(lambda: _native(PASS, n, _udp_socket), runs)
    rows.append(("native XDP_PASS -> UDP socket", sock))
    xdp1 = median(lambda: _native(SAMPLES / "xdp1.o", n), runs)
    rows.append(("native xdp1 (count + drop)", xdp1))
    lst = median(lambda: _cpumap(n, True), runs)
    rows.append(("cpumap -> stack, list delivery", lst))
    one = median(lambda: _cpumap(n, False), runs)
    rows.append(("cpumap -> stack, one skb at a time", one))
    kern = None
    if not args.no_kernel:
        from pyxdp.kernel import bpf_available
        ok, why = bpf_available()
        if ok:
            from pyxdp.testing.kernel_live import kernel_live_pps
            kern = kernel_live_pps(DROP, None, PACKET, frames=2_000_000, runs=runs)
            rows.append(("kernel live-frames XDP_DROP", kern))
        else:
            print(f"(kernel figure skipped: {why})")
    print(f"pyxdp datapath, {n:,} x 64-byte UDP frames per run, median of {runs} runs "
          f"(dst {DEFAULT_DST_IP4})")
    for name, mpps in rows:
        print(f"  {name:<42}{mpps:>9.3f} Mpps")
    print("ratios")
    print(f"  native / generic XDP_DROP        {drop / gen:6.2f}  (seed: generic is the slow "
          f"path; goal >= 5)")
    print(f"  cpumap list / one-by-one         {lst / one:6.2f}  (seed: +16%; goal >= 1.16)")
    print(f"  ladder DROP : PASS : PASS+socket  1 : {pas / drop:.2f} : {sock / drop:.2f}")
    if kern:
        print(f"  pyxdp native / kernel XDP_DROP   {drop / kern:6.3f}  (goal >= 1)")


if __name__ == "__main__":
    main()
