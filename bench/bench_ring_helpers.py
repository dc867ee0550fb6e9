"""The ring buffer helpers and bpf_perf_event_output on the JIT: ns/packet.

    python bench/bench_ring_helpers.py [--runs N] [--batch N] [--only NAME]

Small XDP programs on the JIT, each making one kind of call per packet, run on
batches of 64-byte frames with user space draining the ring between batches
(not timed): ``ringbuf_output`` of 16 stack bytes, ``ringbuf_reserve`` of 16
bytes + a store + ``ringbuf_submit``, ``ringbuf_query``, and
``perf_event_output`` of 16 stack bytes plus the 64 packet bytes
(``BPF_F_CURRENT_CPU | 64 << 32``) into the CPU's ring of a
:class:`~pyxdp.maps.perf_event_array.PerfBuffer`. Reported: the best of
``--runs`` batches, ns/packet, and the samples user space read per batch (every
packet's, as no ring fills).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pyxdp.collection import Collection
from pyxdp.maps.perf_event_array import PerfBuffer
from pyxdp.spec import MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.vm.helpers import RunContext

STACK = "*(u64 *)(r10 -16) = 7\n*(u64 *)(r10 -8) = 9\n"
PASS = "r0 = 2\nexit\n"
CASES = {
    "ringbuf_output": (BpfMapType.BPF_MAP_TYPE_RINGBUF, STACK + "r1 = map[fd:0]\nr2 = r10\n"
                       "r2 += -16\nr3 = 16\nr4 = 0\ncall 130\n" + PASS),
    "ringbuf_reserve+submit": (BpfMapType.BPF_MAP_TYPE_RINGBUF,
                               "r1 = map[fd:0]\nr2 = 16\nr3 = 0\ncall 131\n"
                               "if r0 == 0 goto out\n*(u64 *)(r0 +0) = 7\nr1 = r0\nr2 = 0\n"
                               "call 132\nout:\n" + PASS),
    "ringbuf_query": (BpfMapType.BPF_MAP_TYPE_RINGBUF,
                      "r1 = map[fd:0]\nr2 = 0\ncall 134\n" + PASS),
    "perf_event_output": (BpfMapType.BPF_MAP_TYPE_PERF_EVENT_ARRAY,
                          STACK + "r2 = map[fd:0]\nr3 = 0x40ffffffff ll\nr4 = r10\n"
                          "r4 += -16\nr5 = 16\ncall 25\n" + PASS),
}


def run(name: str, batch: int, runs: int) -> tuple[float, int]:
    map_type, text = CASES[name]
    if map_type == BpfMapType.BPF_MAP_TYPE_RINGBUF:
        spec = MapSpec("m", int(map_type), 0, 0, 1 << 20)
    else:
        spec = MapSpec("m", int(map_type), 4, 4, 1)
    with Collection(asm_collection(text, [spec]), "userspace", engine="jit") as c:
        prog = c.programs["t"].handle
        m = c.maps["m"].handle
        pb = PerfBuffer(m, 256, cpus=[0]) if map_type != BpfMapType.BPF_MAP_TYPE_RINGBUF \
            else None
        frames = np.zeros((batch, 512), np.uint8)
        best, read = float("inf"), 0
        for _ in range(runs + 1):  # the first compiles
            f = frames.copy()
            ctx = RunContext()
            t0 = time.perf_counter_ns()
            prog.run_batch(f, 256, 64, ctx=ctx)
            best = min(best, (time.perf_counter_ns() - t0) / batch)
            read = pb.poll() if pb is not None else m.consume()
        return best, read


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    for name in CASES:
        if a.only in name:
            ns, read = run(name, a.batch, a.runs)
            print(f"{name:24s} {ns:10.0f} ns/packet  {read:6d} samples read a batch")


if __name__ == "__main__":
    main()
