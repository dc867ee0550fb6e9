"""The host, its devices and rx queues as the datapath sees them: ``struct net_device``,
``struct netdev_rx_queue`` and the namespace, as protocols.

:mod:`pyxdp.net.netdevice` builds these objects and drives the datapath
(NAPI polls, the stack's receive path); the datapath modules - the NAPI poll
(:mod:`pyxdp.net.napi`), ``xdp_do_redirect`` (:mod:`pyxdp.net.filter`),
devmap and cpumap (:mod:`pyxdp.net.devmap`, :mod:`pyxdp.net.cpumap`),
generic XDP (:mod:`pyxdp.net.dev`) - see them through these protocols, so
that imports point one way: from the device model down into the datapath.
They extend AF_XDP's views (:mod:`pyxdp.net.xsk_buff_pool`), which the same
objects satisfy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol

from pyxdp.net.frames import FrameRing, Frames
from pyxdp.net.page_pool import PagePool
from pyxdp.net.prog import XdpProg
from pyxdp.net.stack import SkbBatch, Stack
from pyxdp.net.stats import NetdevStats
from pyxdp.net.xsk_buff_pool import XskHost, XskNetDevice, XskRxQueue
from pyxdp.vm.helpers import RunContext

__all__ = ["DpDevice", "DpHost", "DpRxQueue"]


class DpLock(Protocol):
    """The host's lock (a ``threading.RLock``)."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...
    def release(self) -> None: ...
    def __enter__(self) -> bool: ...
    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None, /) -> None: ...


class DpRxQueue(XskRxQueue, Protocol):
    """An rx queue (``NetdevRxQueue``): its ring, page pool, run context, source, the
    native loop's state (``native``) and the zero-copy pool (``xsk``)."""

    py_polls: int
    retired_polls: int

    @property
    def dev(self) -> DpDevice: ...
    @property
    def pool(self) -> PagePool: ...
    @property
    def ring(self) -> FrameRing: ...
    @property
    def ctx(self) -> RunContext: ...
    @property
    def source(self) -> Any: ...  # pyxdp.net.source.TrafficGenerator | None
    @property
    def stats(self) -> NetdevStats: ...


class DpDevice(XskNetDevice, Protocol):
    """A device (``NetDevice``, ``Veth``): its programs, queues, wire and transmit."""

    @property
    def host(self) -> DpHost: ...
    @property
    def rx(self) -> Sequence[DpRxQueue]: ...
    @property
    def faults(self) -> list[str]: ...
    @property
    def xdp_prog(self) -> XdpProg | None: ...
    @property
    def xdp_generic(self) -> XdpProg | None: ...
    @property
    def wire(self) -> Sequence[Callable[[Any, SkbBatch], None]]: ...
    @property
    def xmit_wires(self) -> tuple[int, ...]: ...  # pyxdp.net.xsk_wire records by address
    def ndo_xdp_xmit(self, frames: Frames) -> int: ...


class DpHost(XskHost, Protocol):
    """The host (``Host``): devices, memory, stack, tracer, programs, cpumap entries."""

    @property
    def devices(self) -> Mapping[int, DpDevice]: ...
    @property
    def lock(self) -> DpLock: ...
    @property
    def stack(self) -> Stack: ...
    @property
    def cpumaps(self) -> dict[tuple[int, int], Any]: ...  # cpumap.CpuMapRuntime by (map, cpu)
    @property
    def native(self) -> bool: ...
    @property
    def cpumap_threads(self) -> bool: ...
    @property
    def threaded_napi(self) -> bool: ...
    @property
    def nr_cpus(self) -> int: ...
    @property
    def env(self) -> Any: ...  # pyxdp.net.test_run.TestRunEnv
    @property
    def fwd(self) -> Any: ...  # pyxdp.net.devmap.FwdTable: the native redirect targets
    def program_by_id(self, prog_id: int) -> XdpProg | None: ...
    def retire_cpumap(self, rt: Any) -> None: ...  # a replaced cpumap.CpuMapRuntime
    def frames_to_skbs(self, frames: Frames, ifindex: int) -> SkbBatch: ...
    def xsk_lookup(self, ifindex: int, queue: int) -> Any: ...
    def xsk_socket(self, ifindex: int, queue: int) -> Any: ...
