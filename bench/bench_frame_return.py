"""Seed 4 (xdp_frame and the return API): bulk return vs one by one, as a table.
See :mod:`pyxdp.testing.frame_return` for what is measured.

Run: python bench/bench_frame_return.py [--frames N] [--repeat R] [--budget B] [--no-strict]
"""

from __future__ import annotations

import argparse

from pyxdp.testing.frame_return import WAYS, frame_return_rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=16384, help="frames per round (<= 16384)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--budget", type=int, default=64, help="frames per batch call")
    ap.add_argument("--no-strict", action="store_true", help="skip double-return checks")
    args = ap.parse_args()
    n = min(args.frames, 16384)
    med = frame_return_rates(n, args.repeat, args.budget, not args.no_strict)
    base = med[WAYS[0][0]]
    print(f"{n} page_pool frames per round, median of {args.repeat}, batch calls of "
          f"{args.budget}, strict accounting {'off' if args.no_strict else 'on'}")
    print(f"{'way':<42}{'Mpps':>8}{'vs per-frame':>14}")
    for name, _ in WAYS:
        print(f"{name:<42}{med[name]:>8.3f}{med[name] / base:>13.2f}x")
    one = med[WAYS[1][0]] / base
    vec = med[WAYS[3][0]] / med[WAYS[2][0]]
    print(f"seed 4, no regression (bulk >= per-frame): {one:.2f}x "
          f"{'holds' if one >= 1 else 'DOES NOT HOLD'}")
    print(f"batch forms, bulk / plain: {vec:.2f}x (both are one numpy call per batch; "
          f"the bulk form also keeps the 16-page flush boundaries)")


if __name__ == "__main__":
    main()
