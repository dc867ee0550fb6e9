"""Map access typed from BTF: the load balancer sample's maps as Python values.

    python examples/maps.py

Keys and values are the C structs, as dicts by member name (byte arrays as
bytes); ``keys()``, ``items()``, ``lookup`` and ``delete`` behave as the
kernel's map operations, with its errnos as :class:`pyxdp.MapError`.
"""

from __future__ import annotations

from pyxdp import MapError, samples
from pyxdp.collection import Collection
from pyxdp.net.packets import udp_packet


def main() -> None:
    with Collection.load(samples.path("lb.o")) as lb:
        vips, backends = lb.maps["vips"], lb.maps["backends"]
        vip = {"addr": bytes([198, 51, 100, 2]), "port": (5678).to_bytes(2, "big"), "proto": 17}
        vips[vip] = {"first_backend": 0, "backend_count": 2}
        for i, last in enumerate((1, 2)):
            backends[i] = {"addr": bytes([10, 1, 0, last]), "mac": bytes(6)}
        for key, value in vips.items():
            print("vip", key, "->", value["backend_count"], "backends")
        res = lb.programs["lb_ingress"].test_run(udp_packet(b"x", dst_ip="198.51.100.2"))
        print("lb_ingress returned", res.retval, "- connections tracked:",
              len(list(lb.maps["conns"].keys())))
        print("stats:", lb.maps["stats"].sum(0))
        vips.delete(vip)
        try:
            vips.delete(vip)
        except MapError as e:                       # the kernel's ENOENT
            print("deleting twice:", e)


if __name__ == "__main__":
    main()
