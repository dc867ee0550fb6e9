"""The kernel's own XDP datapath from memory, as a table: see
:mod:`pyxdp.testing.kernel_live` for what is measured and how.

Run (root): python bench/bench_kernel_live.py [--frames N] [--repeat N] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import platform

from pyxdp.collection import Collection
from pyxdp.net.packets import udp_packet
from pyxdp.testing.kernel_live import (
    BATCH,
    DROP,
    FRAMES,
    REDIRECT_DEVMAP,
    RUNS,
    SAMPLES,
    TX,
    Measurement,
    bench_netns,
    measure_live,
    measure_test_run,
)

# --------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------

def run_all(frames: int, repeat: int, runs: int, batch: int, size: int) -> list[Measurement]:
    packet = udp_packet(size=size, src_mac="02:00:00:00:b0:00", dst_mac="02:00:00:00:b0:01")
    out: list[Measurement] = []
    with bench_netns() as net:
        out.append(measure_live(DROP, None, packet, frames=frames, batch=batch, runs=runs,
                                name="XDP_DROP"))
        out.append(measure_live(TX, None, packet, ingress_ifindex=net.veth0, frames=frames,
                                batch=batch, runs=runs, name="XDP_TX veth->peer drop",
                                peer=net.rx_packets))

        def to_veth0(coll: Collection) -> None:
            coll.maps["tx_port"][0] = net.veth0

        out.append(measure_live(REDIRECT_DEVMAP, None, packet, to_veth0,
                                ingress_ifindex=net.veth0, frames=frames, batch=batch,
                                runs=runs, name="REDIRECT devmap->veth",
                                peer=net.rx_packets))
    for obj, prog in (("xdp1.o", "xdp_prog1"), ("xdp2.o", "xdp_prog2")):
        out.append(measure_test_run(SAMPLES / obj, prog, packet, repeat=repeat, runs=runs,
                                    name=f"{obj[:-2]} ({prog})"))
    return out


def print_table(rows: list[Measurement], size: int, runs: int) -> None:
    print(f"Kernel XDP datapath: Linux {platform.release()}, {os.cpu_count()} CPUs, "
          f"{size}-byte UDP frames, median of {runs} runs")
    print(f"{'test':<26}{'mode':<10}{'frames':>12}{'ns/pkt':>9}{'Mpps':>8}"
          f"{'kernel ns':>11}{'wall ns':>9}{'peer rx':>9}")
    for m in rows:
        peer = f"{m.peer_rx:>8.0%}" if m.peer_rx is not None else f"{'-':>8}"
        print(f"{m.name:<26}{m.mode:<10}{m.frames:>12,}{m.cpu_ns:>9.1f}{m.mpps:>8.2f}"
              f"{m.kernel_ns:>11.0f}{m.wall_ns:>9.1f} {peer}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=FRAMES, help="live frames per run")
    ap.add_argument("--repeat", type=int, default=FRAMES, help="test_run repeat for xdp1/xdp2")
    ap.add_argument("--runs", type=int, default=RUNS, help="runs per figure (median)")
    ap.add_argument("--batch", type=int, default=BATCH, help="live batch_size (1..256)")
    ap.add_argument("--size", type=int, default=64, help="frame size in bytes")
    args = ap.parse_args()
    rows = run_all(args.frames, args.repeat, args.runs, args.batch, args.size)
    print_table(rows, args.size, args.runs)


if __name__ == "__main__":
    main()
