"""The XDP run alone over multi-buffer frames: :func:`pyxdp.net.prog.run_xdp` on a batch
of frames longer than a page (a head and page frags in a NIC's page pool, listed in the
head's ``skb_shared_info``), ``samples/frags.o``'s ``xdp_frags`` on each - headers
parsed, ``bpf_xdp_get_buff_len``, ``bpf_xdp_load_bytes`` 8 bytes at offset 4000
(in a frag), a per-port stats entry, XDP_PASS (nothing written, so the same frames run
again) - plus the frag table written back. No stack, no page traffic: the figure is
what a poll pays to run the program on frags frames.

Run: python bench/bench_frags_run.py [--size N] [--batch N] [--frames N] [--runs N]
     [--engine auto|interp]
"""

from __future__ import annotations

import argparse
import statistics
import time

from pyxdp.cli.datapath import SAMPLES
from pyxdp.net import packets as pk
from pyxdp.net.netdevice import Host
from pyxdp.net.prog import run_xdp


def mpps_frags_run(size: int, batch: int, frames: int, engine: str) -> float:
    """Million frames a second through run_xdp, ``batch`` frames of ``size`` bytes a call."""
    with Host(engine=engine) as h:
        nic = h.add_device("eth0", mtu=9000)
        coll = h.load(SAMPLES / "frags.o")
        nic.attach_xdp(coll.programs["xdp_frags"])
        prog = coll.programs["xdp_frags"].handle
        nic.receive([pk.udp_packet(b"x", sport=1000 + i, dport=9001, size=size)
                     for i in range(batch)])
        rq = nic.rx[0]
        f = rq.ring.consume(batch)
        assert bool(f.has_frags.all()), "frames this long come with frags"
        calls = max(frames // batch, 1)
        run_xdp(prog, h, f, ifindex=nic.ifindex, queue=0, ctx=rq.ctx)  # warm
        t0 = time.perf_counter()
        for _ in range(calls):
            run_xdp(prog, h, f, ifindex=nic.ifindex, queue=0, ctx=rq.ctx)
        dt = time.perf_counter() - t0
        rq.ring.produce(f)  # the poll passes them to the stack and frees their pages
        h.run()
        return calls * batch / dt / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=6000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--frames", type=int, default=64_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--engine", default="auto")
    args = ap.parse_args()
    rates = [mpps_frags_run(args.size, args.batch, args.frames, args.engine)
             for _ in range(args.runs)]
    print(f"run_xdp over {args.size}-byte frags frames, {args.batch} a batch, "
          f"engine {args.engine}: {statistics.median(rates):.4f} Mpps (median of {args.runs})")


if __name__ == "__main__":
    main()
