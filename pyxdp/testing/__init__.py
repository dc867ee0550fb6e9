"""Test support: conformance vectors, kernel runners, strategies, and for one's own XDP
programs the pytest plugin (:mod:`pyxdp.testing.pytest_plugin`), its assertions
(:mod:`pyxdp.testing.xdptest`) and the veth lab beside Linux (:mod:`pyxdp.testing.vethlab`)."""
