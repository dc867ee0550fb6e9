"""Native vs generic XDP_DROP: pyxdp's ratio beside Linux's own, in one run (the first
seed's claim, "native is far cheaper than generic").

pyxdp: a NIC's generated frames through XDP_DROP in native mode, then the same frames
with the program in generic (skb) mode (``mpps_native`` / ``mpps_generic``, as
``pyxdp bench seeds`` row 1). Linux (root): live frames redirected through a devmap
out of veth0 into veth1, whose NAPI runs a counting XDP_DROP attached natively, then
in skb mode (GRO keeps veth1's NAPI without a native program): the same driver on
both sides, so the ratio is Linux's own native/generic on this machine. Runs are
interleaved; medians of ``--runs``.

Run: python bench/bench_generic.py [--frames N] [--runs N] [--no-kernel]
"""

from __future__ import annotations

import argparse
import statistics

from pyxdp.cli.datapath import mpps_generic, mpps_native
from pyxdp.testing.kernel_live import DROP


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-kernel", action="store_true", help="pyxdp's ratio only")
    args = ap.parse_args()
    mpps_native(DROP, 100_000)  # compile both loops before timing
    mpps_generic(DROP, 100_000)
    nat, gen = [], []
    for _ in range(args.runs):
        nat.append(mpps_native(DROP, args.frames))
        gen.append(mpps_generic(DROP, args.frames))
    pn, pg = statistics.median(nat), statistics.median(gen)
    print(f"pyxdp  native {pn:8.3f} Mpps  generic {pg:8.3f} Mpps  native/generic {pn / pg:5.2f}")
    if args.no_kernel:
        return
    from pyxdp.testing.kernel_datapath import linux_paths, measure_generic
    knat, kgen = [], []
    with linux_paths() as lp:
        for _ in range(args.runs):
            knat.append(measure_generic(lp, args.frames, mode="native").mpps)
            kgen.append(measure_generic(lp, args.frames).mpps)
    kn, kg = statistics.median(knat), statistics.median(kgen)
    print(f"Linux  native {kn:8.3f} Mpps  generic {kg:8.3f} Mpps  native/generic {kn / kg:5.2f}"
          "  (veth1, the same driver)")
    print(f"ratio of ratios pyxdp/kernel: {(pn / pg) / (kn / kg):.2f}")


if __name__ == "__main__":
    main()
