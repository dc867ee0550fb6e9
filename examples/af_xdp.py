"""AF_XDP on a pyxdp device: a socket bound to a NIC's queue in zero-copy mode, fed by an
XSKMAP redirect, read as numpy descriptors straight from UMEM.

    python examples/af_xdp.py

The xsk sample redirects each packet to the socket in ``xsks[rx_queue_index]``
(``XDP_PASS`` when there is none), as xdpsock's program does. No root.
"""

from __future__ import annotations

from pyxdp import samples
from pyxdp.net.netdevice import Host
from pyxdp.net.packets import traffic
from pyxdp.xsk.datapath import PyxdpXskSocket


def main() -> None:
    with Host() as host:
        eth0 = host.add_device("eth0")
        xsk = host.load(samples.path("xsk.o"))
        eth0.attach_xdp(xsk.programs["xdp_sock_prog"])
        with PyxdpXskSocket(eth0, 0, mode="zerocopy") as sock:
            xsk.maps["xsks"][0] = sock.fd                  # queue 0's socket
            sock.fill()                                    # every free chunk to the fill ring
            eth0.receive(list(traffic(flows=4, count=100)))
            host.run()
            got, sizes = 0, set()
            while batch := sock.recv(64):                  # descriptors: addr, len, options
                got += len(batch)
                sizes.update(len(p) for p in batch.packets())  # views of the UMEM chunks
                sock.release(batch, refill=True)           # chunks back to the fill ring
            stats = sock.statistics()
            print(f"received {got} packets of {sorted(sizes)} bytes; "
                  f"rx_dropped {stats.rx_dropped}")


if __name__ == "__main__":
    main()
