"""Where did my packet go: one packet's journey through a program, a devmap and a veth
pair into the peer's stack, told in Linux's terms.

    python examples/explain_journey.py

The same packet is explained twice: with ``tx_port[0]`` empty (bpf_redirect_map
finds no entry: XDP_ABORTED, the xdp_exception tracepoint) and with it naming
veth0, whose peer veth1 (holding the packet's destination address) delivers it to a
UDP socket.
"""

from __future__ import annotations

from pyxdp import samples
from pyxdp.explain import Topology, explain
from pyxdp.net.packets import udp_packet


def main() -> None:
    obj = samples.path("redirect_map.o")
    pkt = udp_packet(b"query", dport=53, src_mac="02:00:00:00:00:04")
    print("empty map:", explain(obj, pkt).fate())
    topo = Topology.from_dict({
        "devices": [{"name": "eth0"}, {"name": "veth0", "kind": "veth", "peer": "veth1"}],
        "programs": [{"dev": "eth0"}, {"dev": "veth1", "object": "builtin:xdp_pass"}],
        "maps": {"tx_port": [{"key": 0, "value": {"ifindex": "@veth0"}}]},
        "addresses": {"veth1": ["198.51.100.2/24"]},  # the packet's destination
        "udp": [53]})
    journey = explain(obj, pkt, topology=topo)
    print("tx_port[0] = veth0:", journey.fate())
    print(journey.render())


if __name__ == "__main__":
    main()
