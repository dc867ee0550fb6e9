"""pyxdp's AF_XDP socket on the kernel (rxdrop in Python) against the kernel's own XDP_DROP.

Both figures come from the same run, the same veth pair and the same traffic:

* traffic: ``BPF_PROG_TEST_RUN`` with ``BPF_F_TEST_XDP_LIVE_FRAMES`` running
  a ``bpf_redirect_map`` into a devmap that holds veth0, so every frame
  goes out of veth0 (``ndo_xdp_xmit``) and arrives at veth1's NAPI, where
  veth1's native XDP program sees it (the namespace and programs of
  :mod:`pyxdp.testing.kernel_live`, as bench/bench_kernel_live.py uses them);
* kernel XDP_DROP: veth1 runs ``return XDP_DROP``; the rate is veth1's rx
  packet counter over the wall time of the traffic run;
* pyxdp rxdrop: veth1 runs ``bpf_redirect_map(&xsks, rx_queue_index,
  XDP_PASS)`` into a :class:`~pyxdp.xsk.linux.LinuxXskSocket` bound to veth1
  queue 0 in copy mode; the traffic runs in a second thread (the syscall
  releases the GIL) while the main thread receives in batches and hands each
  batch straight back to the fill ring (numpy all the way, chunk accounting
  on). The rate is packets received over the time from the start of the
  traffic to the last batch.

Each figure is the median of ``--runs`` runs after one warm-up run. The
ratio is pyxdp/kernel (goal: >= 0.5). Frames the socket could not take
(rx ring full, fill ring empty) show in the drop columns.

Run (root): python bench/bench_xsk_linux.py [--frames N] [--runs N] [--batch N ...]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pyxdp.collection import Collection
from pyxdp.kernel import prog_test_run
from pyxdp.kernel.netlink import xdp_attach
from pyxdp.net.packets import udp_packet
from pyxdp.testing.kernel_live import LIVE, REDIRECT_DEVMAP, BenchNet, bench_netns, xdp_md
from pyxdp.testing.programs import REDIRECT_XSK
from pyxdp.uapi.if_xdp import XdpStatistics
from pyxdp.xsk.linux import LinuxXskSocket
from pyxdp.xsk.umem import Umem

FRAMES = 2_000_000
RUNS = 5
LIVE_BATCH = 64
RING = 4096



@dataclass(frozen=True, slots=True)
class Row:
    name: str
    batch: int
    mpps: float
    delivered: float  # fraction of the generated frames that reached the consumer
    drops: XdpStatistics | None = None


def traffic(coll: Collection, net: BenchNet, packet: bytes, frames: int
            ) -> Callable[[], float]:
    """A callable sending ``frames`` live frames out of veth0 to veth1; returns its seconds."""
    coll.maps["tx_port"][0] = net.veth0
    fd = coll.program().fd
    ctx = xdp_md(packet, net.veth0)

    def run() -> float:
        t0 = time.perf_counter()
        prog_test_run(fd, packet, ctx_in=ctx, repeat=frames, flags=LIVE, batch_size=LIVE_BATCH)
        return time.perf_counter() - t0

    return run


def kernel_drop(net: BenchNet, gen: Callable[[], float], frames: int, runs: int) -> Row:
    gen()  # warm-up
    rates, fractions = [], []
    for _ in range(runs):
        before = net.rx_packets("veth1")
        secs = gen()
        got = net.rx_packets("veth1") - before
        rates.append(got / secs / 1e6)
        fractions.append(got / frames)
    return Row("kernel XDP_DROP", 0, statistics.median(rates), statistics.median(fractions))


def xsk_rxdrop(sock: LinuxXskSocket, gen: Callable[[], float], frames: int, runs: int,
               batch: int) -> Row:
    def one() -> tuple[float, float, XdpStatistics]:
        st0 = sock.statistics()
        done = threading.Event()
        t0 = time.perf_counter()

        def generate() -> None:
            gen()
            done.set()

        th = threading.Thread(target=generate)
        th.start()
        got = 0
        last = t0
        recv, release = sock.recv, sock.release
        while True:
            b = recv(batch)
            n = len(b)
            if n:
                got += n
                release(b, refill=True)
                last = time.perf_counter()
            elif done.is_set() and time.perf_counter() - last > 0.05:
                break
        th.join()
        return got / (last - t0) / 1e6, got / frames, sock.statistics() - st0

    one()  # warm-up
    res = [one() for _ in range(runs)]
    res.sort(key=lambda r: r[0])
    mpps, frac, drops = res[len(res) // 2]
    sock.check_accounting()
    return Row("pyxdp AF_XDP rxdrop (copy)", batch, mpps, frac, drops)


def run_all(frames: int, runs: int, batches: list[int], size: int) -> list[Row]:
    packet = udp_packet(size=size, src_mac="02:00:00:00:b0:00", dst_mac="02:00:00:00:b0:01")
    rows: list[Row] = []
    with bench_netns() as net, Collection(REDIRECT_DEVMAP, "kernel") as redirect:
        gen = traffic(redirect, net, packet, frames)  # veth1 drops natively first
        rows.append(kernel_drop(net, gen, frames, runs))
        with Collection(REDIRECT_XSK, "kernel") as xsk_prog, Umem(2 * RING, 2048) as umem, \
                LinuxXskSocket("veth1", 0, umem, fill_size=RING, comp_size=64, rx_size=RING,
                               tx_size=0) as sock:
            xsk_prog.maps["xsks"][0] = sock.fd
            xdp_attach("veth1", xsk_prog.programs["t"], mode="native")  # replaces XDP_DROP
            sock.fill()
            for b in batches:
                rows.append(xsk_rxdrop(sock, gen, frames, runs, b))
    return rows


def print_table(rows: list[Row], frames: int, runs: int, size: int) -> None:
    base = rows[0].mpps
    print(f"AF_XDP rxdrop vs kernel XDP_DROP: Linux {platform.release()}, {os.cpu_count()} CPUs, "
          f"{size}-byte frames, {frames:,} live frames per run, median of {runs} runs")
    print(f"{'consumer':<30}{'batch':>6}{'Mpps':>8}{'vs drop':>9}{'delivered':>11}"
          f"{'ring full':>11}{'fill empty':>12}")
    for r in rows:
        full = f"{r.drops.rx_ring_full:>11,}" if r.drops else f"{'-':>11}"
        empty = f"{r.drops.rx_fill_ring_empty_descs:>12,}" if r.drops else f"{'-':>12}"
        batch = str(r.batch) if r.batch else "-"
        print(f"{r.name:<30}{batch:>6}{r.mpps:>8.2f}{r.mpps / base:>9.2f}"
              f"{r.delivered:>11.0%}{full}{empty}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=FRAMES, help="live frames per run")
    ap.add_argument("--runs", type=int, default=RUNS, help="runs per figure (median)")
    ap.add_argument("--batch", type=int, nargs="+", default=[64, 256],
                    help="recv batch sizes to measure")
    ap.add_argument("--size", type=int, default=64, help="frame size in bytes")
    args = ap.parse_args()
    rows = run_all(args.frames, args.runs, args.batch, args.size)
    print_table(rows, args.frames, args.runs, args.size)


if __name__ == "__main__":
    main()
