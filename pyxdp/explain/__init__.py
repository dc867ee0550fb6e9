"""Where did my packet go: a packet's journey through XDP programs, redirect maps,
devices, AF_XDP sockets and the host stack (:mod:`pyxdp.explain.journey`), on a
host described by a topology (:mod:`pyxdp.explain.topology`), and the same
packet through Linux on veth pairs (:mod:`pyxdp.explain.kernel`)."""

from pyxdp.explain.journey import Explainer, ExplainError, Fate, Journey, Step, explain
from pyxdp.explain.topology import Topology, TopologyError, default_topology

__all__ = ["ExplainError", "Explainer", "Fate", "Journey", "Step", "Topology", "TopologyError",
           "default_topology", "explain"]
