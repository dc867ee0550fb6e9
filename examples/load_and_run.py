"""Load a clang-compiled XDP object and run its program on one packet, as
BPF_PROG_TEST_RUN would: the verdict, the packet out and the map it counts in.

    python examples/load_and_run.py

No root: the object is the xdp2 sample shipped with pyxdp (counts per IP
protocol, swaps the MAC addresses, XDP_TX).
"""

from __future__ import annotations

from pyxdp import samples
from pyxdp.collection import Collection
from pyxdp.net.packets import udp_packet
from pyxdp.uapi.bpf import XdpAction


def main() -> None:
    packet = udp_packet(b"hello", src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:02")
    with Collection.load(samples.path("xdp2.o")) as xdp2:
        prog = xdp2.programs["xdp_prog2"]
        res = prog.test_run(packet, repeat=10)
        print(f"verdict {XdpAction(res.retval).name}, {len(res.data_out)} bytes out")
        print(f"MACs swapped: {res.data_out[:6].hex(':')} <- {res.data_out[6:12].hex(':')}")
        print(f"UDP packets counted: {xdp2.maps['rxcnt'].sum(17)}")  # per-CPU, summed


if __name__ == "__main__":
    main()
