"""AF_XDP on pyxdp's datapath: bpf_redirect_xsk vs bpf_redirect_map, copy vs zero-copy.

The seed discussion (bpf-next, January 2021, "bpf_redirect_xsk()") measured
rxdrop in zero-copy mode: ``bpf_redirect_xsk`` was 4% faster than
``bpf_redirect_map`` into an XSKMAP on one core (25.5 vs 24.5 Mpps) and 13%
on two (24.0 vs 21.3). Here the same comparison on pyxdp: a NIC whose rx
queue the traffic generator fills with 64-byte UDP frames, the program
attached natively (``samples/xsk.o``: ``bpf_redirect_map(&xsks,
rx_queue_index, XDP_PASS)``; ``samples/xsk_redirect.o``:
``bpf_redirect_xsk(ctx, XDP_PASS)``, same counter), a
:class:`~pyxdp.xsk.datapath.PyxdpXskSocket` on the queue, and the user
loop of ``pyxdp xsk`` (:func:`pyxdp.cli.xsk.xsk_pps`) in the same thread:
one NAPI poll of ``--batch`` frames, then recv/release (rxdrop) or
swap-MACs/forward/complete (l2fwd), numpy all the way.

Figures: Mpps of each configuration, the median of ``--runs`` runs after a
warm-up, redirect_map and redirect_xsk runs interleaved; the ratio
redirect_xsk/redirect_map (the seed's claim: the median of the per-pair
ratios) in both modes, and zero-copy/copy for rxdrop and l2fwd.

Run: python bench/bench_xsk.py [--frames N] [--runs K] [--batch N]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics

from pyxdp.cli.xsk import xsk_pps

FRAMES = 200_000
RUNS = 5


def measure(mode: str, zero_copy: bool, frames: int, runs: int,
            batch: int) -> tuple[float, float, float]:
    """(redirect_map Mpps, redirect_xsk Mpps, median of the per-pair ratios): the two
    interleaved run by run, so drift of the shared machine hits both alike."""
    def one(red: str) -> float:
        return xsk_pps(mode, frames, redirect=red, zero_copy=zero_copy, batch=batch)

    one("map")  # warm-up: JIT compiled, pages touched
    one("xsk")
    pairs = [(one("map"), one("xsk")) for _ in range(runs)]
    return (statistics.median(m for m, _ in pairs) / 1e6,
            statistics.median(x for _, x in pairs) / 1e6,
            statistics.median(x / m for m, x in pairs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=FRAMES, help="frames per run")
    ap.add_argument("--runs", type=int, default=RUNS, help="runs per figure (median)")
    ap.add_argument("--batch", type=int, default=64, help="NAPI budget and recv batch")
    args = ap.parse_args()
    rows: dict[tuple[str, bool], tuple[float, float, float]] = {}
    for mode in ("rxdrop", "l2fwd"):
        for zc in (False, True):
            rows[(mode, zc)] = measure(mode, zc, args.frames, args.runs, args.batch)
    print(f"pyxdp AF_XDP: Linux {platform.release()} host, {os.cpu_count()} CPUs, 64-byte "
          f"frames, {args.frames:,} frames per run, batch {args.batch}, median of "
          f"{args.runs} interleaved pairs")
    print(f"{'mode':<8}{'bind':<11}{'redirect_map':>14}{'redirect_xsk':>14}{'xsk/map':>9}")
    for (mode, zc), (m, x, r) in rows.items():
        print(f"{mode:<8}{'zero-copy' if zc else 'copy':<11}{m:>9.3f} Mpps{x:>9.3f} Mpps"
              f"{r:>8.3f}x")
    for mode in ("rxdrop", "l2fwd"):
        for k, red in ((0, "map"), (1, "xsk")):
            ratio = rows[(mode, True)][k] / rows[(mode, False)][k]
            print(f"zero-copy/copy {mode} (redirect_{red}): {ratio:.2f}x")
    print(f"seed claim, rxdrop zero-copy, redirect_xsk/redirect_map: "
          f"{rows[('rxdrop', True)][2]:.3f} (seed: 1.04 on one core, 1.13 on two)")

if __name__ == "__main__":
    main()
