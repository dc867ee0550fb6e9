"""pyxdp's userspace datapath side by side with Linux's, and the seeds' ratios.

pyxdp: a NIC whose rx queue the traffic generator fills (64-byte UDP frames
written into page pool pages, NAPI polls of 64, the native poll loop running
the JIT'ed program), measured as frames / wall time of ``Host.run``.
Linux: ``BPF_PROG_TEST_RUN`` with ``BPF_F_TEST_XDP_LIVE_FRAMES`` (the
kernel's own XDP action path: page pool, XDP_TX, redirect and flush), in a
network namespace with a veth pair (see :mod:`pyxdp.testing.kernel_live`),
in the same run. Rows:

* XDP_DROP, XDP_TX (pyxdp: out of the NIC itself; Linux: out of veth0, whose
  peer drops natively), devmap redirect (pyxdp: eth0 -> eth1; Linux: to
  veth0), and the xdp1 sample;
* native vs generic XDP_DROP; DROP vs PASS to the stack vs PASS to a UDP
  socket; cpumap delivery to the stack as lists vs one skb at a time; cpumap
  with its kthread inline vs in a thread of its own (what 2 CPUs allow of the
  scaling claim); bulk vs one-by-one xdp_frame return.

Each figure is the median of ``--runs`` runs after a warm-up.

The Linux column for every path (XDP_PASS, cpumap delivered on the remote
CPU, generic XDP on veth and AF_XDP copy-mode rxdrop too) is ``pyxdp bench
datapath --vs-kernel`` (:func:`pyxdp.cli.datapath.cmd_bench_datapath`);
``--all-paths`` runs it after this table.

Run: python bench/bench_datapath.py [--frames N] [--runs N] [--no-kernel] [--all-paths]
"""

from __future__ import annotations

import argparse
import os
import platform

from pyxdp.cli.datapath import (
    DEFAULT_PACKET,
    SAMPLES,
    median,
    mpps_cpumap,
    mpps_generic,
    mpps_native,
)
from pyxdp.collection import Collection
from pyxdp.net.netdevice import Host, NetDevice
from pyxdp.testing.frame_return import WAYS, frame_return_rates
from pyxdp.testing.kernel_live import DROP, REDIRECT_DEVMAP, TX, asm_spec

PASS = asm_spec("xdp_pass", "r0 = 2\nexit")


def _to_eth1(h: Host, eth: NetDevice, coll: Collection) -> None:
    coll.maps["tx_port"][0] = h.add_device("eth1").ifindex


def _udp_socket(h: Host, eth: NetDevice, coll: Collection) -> None:
    h.stack.udp_socket(9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-kernel", action="store_true", help="skip the Linux figures")
    ap.add_argument("--all-paths", action="store_true",
                    help="then every path beside Linux's (pyxdp bench datapath --vs-kernel)")
    args = ap.parse_args()
    n, runs = args.frames, args.runs
    small = max(n // 50, 2048)
    rows: list[tuple[str, float, float | None]] = []

    kernel = None
    if not args.no_kernel:
        from pyxdp.kernel import bpf_available
        ok, why = bpf_available()
        if ok:
            from pyxdp.testing import kernel_live as kl
            kernel = kl
        else:
            print(f"(Linux figures skipped: {why})")

    def k_live(spec: object, ingress: bool, setup: object = None) -> float | None:
        if kernel is None:
            return None
        with kernel.bench_netns() as net:
            def to_veth0(coll: Collection) -> None:
                coll.maps["tx_port"][0] = net.veth0
            return kernel.measure_live(spec, None, DEFAULT_PACKET,  # type: ignore[arg-type]
                                       to_veth0 if setup else None,
                                       ingress_ifindex=net.veth0 if ingress else 0,
                                       frames=n, runs=runs).mpps

    rows.append(("XDP_DROP", median(lambda: mpps_native(DROP, n), runs), k_live(DROP, False)))
    rows.append(("XDP_TX", median(lambda: mpps_native(TX, n), runs), k_live(TX, True)))
    rows.append(("REDIRECT devmap", median(
        lambda: mpps_native(REDIRECT_DEVMAP, n, setup=_to_eth1), runs),
        k_live(REDIRECT_DEVMAP, True, True)))
    xdp1 = SAMPLES / "xdp1.o"
    rows.append(("xdp1 (parse, count, drop)", median(lambda: mpps_native(xdp1, n), runs),
                 k_live(_spec(xdp1), False)))

    drop = rows[0][1]
    gen = median(lambda: mpps_generic(DROP, small), runs)
    pas = median(lambda: mpps_native(PASS, small), runs)
    sock = median(lambda: mpps_native(PASS, small, setup=_udp_socket), runs)
    lst = median(lambda: mpps_cpumap(small, True), runs)
    one = median(lambda: mpps_cpumap(small, False), runs)
    thr = median(lambda: mpps_cpumap(small, True, threaded=True), runs)
    ret = frame_return_rates(16384, max(runs, 5))

    print(f"pyxdp datapath vs Linux {platform.release()} live frames, {os.cpu_count()} CPUs, "
          f"64-byte UDP frames, median of {runs} runs")
    print(f"{'':<30}{'pyxdp Mpps':>12}{'Linux Mpps':>12}{'ratio':>8}")
    for name, p, k in rows:
        ks = f"{k:>12.2f}{p / k:>8.2f}" if k else f"{'-':>12}{'-':>8}"
        print(f"{name:<30}{p:>12.2f}{ks}")
    print("inside pyxdp")
    print(f"  generic XDP_DROP             {gen:8.3f} Mpps   native/generic {drop / gen:8.1f}x "
          f"(goal >= 5)")
    print(f"  XDP_PASS -> stack            {pas:8.3f} Mpps   ladder DROP : PASS : PASS+socket"
          f" = 1 : {pas / drop:.4f} : {sock / drop:.4f}")
    print(f"  XDP_PASS -> UDP socket       {sock:8.3f} Mpps")
    print(f"  cpumap, skb lists            {lst:8.3f} Mpps   lists / one-by-one "
          f"{lst / one:5.2f}x (seed +16%; goal >= 1.16)")
    print(f"  cpumap, one skb at a time    {one:8.3f} Mpps")
    print(f"  cpumap, kthread in a thread  {thr:8.3f} Mpps   thread / inline {thr / lst:5.2f}x "
          f"(1 worker: all that 2 CPUs allow)")
    b = ret[WAYS[1][0]] / ret[WAYS[0][0]]
    print(f"  xdp_frame return bulk / one-by-one {b:5.2f}x (seed: no regression; goal >= 1)")
    if args.all_paths:
        from pyxdp.cli.datapath import cmd_bench_datapath
        print()
        cmd_bench_datapath(None, runs, 0.5, None, not args.no_kernel, False)


def _spec(path: object) -> object:
    from pyxdp.elf import load_collection_spec
    return load_collection_spec(path)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
