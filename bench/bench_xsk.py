"""AF_XDP on pyxdp's datapath: bpf_redirect_xsk vs bpf_redirect_map, copy vs zero-copy.

The seed discussion (bpf-next, January 2021, "bpf_redirect_xsk()") measured
rxdrop in zero-copy mode with xdpsock (a C user loop): ``bpf_redirect_xsk``
was 4% faster than ``bpf_redirect_map`` into an XSKMAP on one core (25.5 vs
24.5 Mpps) and 13% on two (24.0 vs 21.3). Here the same comparison on pyxdp:
a NIC whose rx queue the traffic generator fills with 64-byte UDP frames,
the program attached natively (``samples/xsk.o``: ``bpf_redirect_map(&xsks,
rx_queue_index, XDP_PASS)``; ``samples/xsk_redirect.o``:
``bpf_redirect_xsk(ctx, XDP_PASS)``, same counter), a zero-copy
:class:`~pyxdp.xsk.datapath.PyxdpXskSocket` on the queue, and xdpsock's
rxdrop loop in machine code (:mod:`pyxdp.xsk.native`): on one core it
alternates with the host's softirq rounds in one thread; on two it spins on
a thread of its own (:func:`pyxdp.cli.xsk.rxdrop_native_pps`).

Second table: rxdrop and l2fwd with the user loop of ``pyxdp xsk`` in Python
(numpy per batch of ``--batch``, :func:`pyxdp.cli.xsk.xsk_pps`), copy vs
zero-copy - what a Python application gets.

Figures: Mpps, the median of ``--runs`` runs, redirect_map and redirect_xsk
runs interleaved; ratios are medians of the per-pair ratios.

Run: python bench/bench_xsk.py [--frames N] [--runs K] [--batch N]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
from collections.abc import Callable

from pyxdp.cli.xsk import rxdrop_native_pps, xsk_pps

FRAMES = 3_000_000
RUNS = 9


def pairs(one: Callable[[str], float], runs: int) -> tuple[float, float, float]:
    """(redirect_map Mpps, redirect_xsk Mpps, median per-pair ratio), interleaved run
    by run so drift of the shared machine hits both alike."""
    one("map")  # warm-up: JIT compiled, pages touched
    one("xsk")
    got = [(one("map"), one("xsk")) for _ in range(runs)]
    return (statistics.median(m for m, _ in got) / 1e6,
            statistics.median(x for _, x in got) / 1e6,
            statistics.median(x / m for m, x in got))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=FRAMES, help="frames per run")
    ap.add_argument("--runs", type=int, default=RUNS, help="runs per figure (median)")
    ap.add_argument("--batch", type=int, default=64, help="Python loop's recv batch")
    args = ap.parse_args()
    seed = {cores: pairs(lambda red, c=cores: rxdrop_native_pps(red, args.frames, cores=c),
                         args.runs) for cores in (1, 2)}
    print(f"pyxdp AF_XDP: Linux {platform.release()} host, {os.cpu_count()} CPUs, 64-byte "
          f"frames, {args.frames:,} frames per run, median of {args.runs} interleaved pairs")
    print("rxdrop zero-copy, xdpsock's loop in machine code (the seed's measurement)")
    print(f"{'cores':<8}{'redirect_map':>14}{'redirect_xsk':>14}{'xsk/map':>9}{'seed':>7}")
    for cores, (m, x, r) in seed.items():
        print(f"{cores:<8}{m:>9.2f} Mpps{x:>9.2f} Mpps{r:>8.3f}x"
              f"{1.04 if cores == 1 else 1.13:>7.2f}")
    n = max(args.frames // 15, 10_000)
    rows: dict[tuple[str, bool], tuple[float, float, float]] = {}
    for mode in ("rxdrop", "l2fwd"):
        for zc in (False, True):
            rows[(mode, zc)] = pairs(lambda red, m=mode, z=zc: xsk_pps(
                m, n, redirect=red, zero_copy=z, batch=args.batch), max(args.runs // 2, 3))
    print(f"\nthe Python user loop of pyxdp xsk (numpy, batch {args.batch}), {n:,} frames")
    print(f"{'mode':<8}{'bind':<11}{'redirect_map':>14}{'redirect_xsk':>14}{'xsk/map':>9}")
    for (mode, zc), (m, x, r) in rows.items():
        print(f"{mode:<8}{'zero-copy' if zc else 'copy':<11}{m:>9.3f} Mpps{x:>9.3f} Mpps"
              f"{r:>8.3f}x")
    for mode in ("rxdrop", "l2fwd"):
        ratio = rows[(mode, True)][0] / rows[(mode, False)][0]
        print(f"zero-copy/copy {mode} (redirect_map): {ratio:.2f}x")
    r1, r2 = seed[1][2], seed[2][2]
    print(f"seed claim, rxdrop zero-copy, redirect_xsk/redirect_map: one core {r1:.3f} "
          f"(seed 1.04: {'met' if r1 >= 1.04 else 'missed'}), two cores {r2:.3f} "
          f"(seed 1.13: {'met' if r2 >= 1.13 else 'missed'})")


if __name__ == "__main__":
    main()
