"""A userspace datapath host: a NIC whose XDP program redirects every packet through a
DEVMAP to one end of a veth pair, which hands it to the other end.

    python examples/datapath_devmap.py

eth0 runs the redirect_map sample (``bpf_redirect_map(&tx_port, 0, 0)``);
``tx_port[0]`` is veth0, so frames are bulk-queued to veth0's ndo_xdp_xmit at
the end of each NAPI poll and arrive on veth1, where XDP_PASS hands them to the
stack. No root: the NICs, the veth pair and NAPI are pyxdp's.
"""

from __future__ import annotations

from pyxdp import samples
from pyxdp.net.netdevice import Host
from pyxdp.net.packets import traffic
from pyxdp.testing.programs import asm_collection


def main() -> None:
    with Host() as host:
        eth0 = host.add_device("eth0")
        veth0, veth1 = host.veth("veth0", "veth1")
        redirect = host.load(samples.path("redirect_map.o"))
        redirect.maps["tx_port"][0] = {"ifindex": veth0.ifindex}
        eth0.attach_xdp(redirect.programs["xdp_redirect_map_prog"])
        # veth1 needs an XDP program to have the NAPI that receives XDP frames: XDP_PASS.
        passer = host.load(asm_collection("r0 = 2\nexit"))
        veth1.attach_xdp(passer.programs["t"])
        eth0.receive(list(traffic(flows=4, count=64)))
        host.run()                                   # NAPI polls until idle
        print(f"eth0: {eth0.stats.xdp_redirect} redirected")
        print(f"veth0: {veth0.stats.tx_packets} sent, veth1: {veth1.stats.rx_packets} received")
        print(f"veth1: {veth1.stats.xdp_drops} dropped by XDP")
        events = host.tracer.snapshot()
        print(f"xdp_devmap_xmit events: {events.count('xdp_devmap_xmit')}")


if __name__ == "__main__":
    main()
