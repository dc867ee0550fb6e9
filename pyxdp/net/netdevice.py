"""Network devices and hosts: ``struct net_device`` (``include/linux/netdevice.h``),
XDP attach (``dev_xdp_attach`` in ``net/core/dev.c``) and veth pairs
(``drivers/net/veth.c``).

A :class:`Host` is one network namespace: its own ifindex space (``lo`` is
1), its page memory (:class:`~pyxdp.net.page_pool.MemMap`), memory model
registry, tracepoints, host stack, and a userspace backend whose programs
and maps the datapath runs (``host.load(obj)``). Devices:

- :meth:`Host.add_device` - a NIC: frames given to :meth:`NetDevice.receive`
  (or pulled from a :class:`~pyxdp.net.source.TrafficGenerator`) are DMA'd
  into pages of the rx queue's page pool; what it transmits reaches its
  ``wire`` sinks (:class:`~pyxdp.net.source.Collector`, a pcapng writer...).
  A frame longer than a page's packet room (3520 bytes) becomes a
  multi-buffer ``xdp_buff``: a head page and page frags listed in its
  ``skb_shared_info``, as veth's ``skb_pp_cow_data`` builds them; a device
  whose MTU needs frags takes only frags-aware programs.
- :meth:`Host.veth` - a veth pair: what one end transmits, the other end
  receives. As in veth.c, skbs sent by the stack are queued on the peer's
  ``xdp_ring`` when that end runs XDP, and its own poll copies each into a page
  of its queue's pool (:data:`~pyxdp.net.frames.KIND_SKB`), and frames sent by XDP
  (``ndo_xdp_xmit``: XDP_TX, redirect) travel as ``xdp_frame`` s through the
  peer's 256-entry ``xdp_ring`` - refused with ``-ENXIO`` when the peer's NAPI
  is off (no XDP program and GRO off), dropped when the ring is full or the
  frame longer than mtu + 14 + 4. While the peer has neither a native program
  nor GRO, a veth does not advertise ``NETDEV_XDP_ACT_NDO_XMIT``
  (``veth_set_xdp_features``), so redirects to it fail at once
  (``-EOPNOTSUPP``); XDP_TX does not look and meets the ``-ENXIO``.

:meth:`NetDevice.attach_xdp` follows ``dev_xdp_attach``: native
(``XDP_FLAGS_DRV_MODE``) and generic (``XDP_FLAGS_SKB_MODE``) programs are
mutually exclusive (``-EEXIST``), ``XDP_FLAGS_UPDATE_IF_NOEXIST`` refuses to
replace (``-EBUSY``), ``XDP_FLAGS_REPLACE`` needs the expected program to be
the attached one (``-EEXIST``), devmap/cpumap programs cannot be attached
(``-EINVAL``) - checked in the kernel's order (REPLACE, UPDATE_IF_NOEXIST, the
other mode, the attach type). The receive path itself is :mod:`pyxdp.net.napi` (native) and
:mod:`pyxdp.net.dev` (generic).

AF_XDP (:mod:`pyxdp.net.xsk`): a host keeps the buffer pools bound to
its device queues (``xsk_pools``) and the socket ``bind()`` registered per rx
queue for ``bpf_redirect_xsk`` (``xsk_rx``, and ``xsk_table`` for native
code); a NIC queue bound in zero-copy mode (``NetdevRxQueue.xsk``) takes its
buffers from the socket's fill ring instead of its page pool.

Simplified: no qdiscs, no multicast lists, carrier = admin state, one
"CPU" per thread; a NIC's ``xdp_features`` are fixed (all but offload:
AF_XDP zero-copy included), a veth's as above (never zero-copy), ``lo``'s
none (Linux's loopback has no ``ndo_xdp_xmit``: a redirect of an
``xdp_frame`` to it fails with -EOPNOTSUPP).
"""

from __future__ import annotations

import errno
import ipaddress
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, SupportsIndex

import numpy as np

from pyxdp.args import NR_CPUS_MAX, U32_MAX, U64_MAX, checked, short
from pyxdp.collection import Collection, Program
from pyxdp.errors import BadArgument, KernelError
from pyxdp.net import trace as _trace
from pyxdp.net.devmap import FwdTable
from pyxdp.net.frames import (
    KIND_BUFF,
    KIND_FRAGS,
    KIND_FRAME,
    KIND_SKB,
    NET_SKB_PAD,
    FrameRing,
    Frames,
)
from pyxdp.net.page_pool import PAGE_SIZE, MemMap, PagePool
from pyxdp.net.prog import XdpProg, xdp_dispatcher
from pyxdp.net.stack import SkbBatch, Stack
from pyxdp.net.stats import LinkStats, NetdevStats
from pyxdp.net.test_run import NetdevInfo, TestRunEnv
from pyxdp.net.xdp import MAX_SKB_FRAGS, SKB_SHARED_INFO_SIZE, XDP_PACKET_HEADROOM
from pyxdp.net.xdp_mem import (
    XdpMemRegistry,
    XdpRxqInfo,
    xdp_return_frames,
    xdp_return_frames_rx_napi,
    xdp_rxq_info_attach_page_pool,
    xdp_rxq_info_reg,
    xdp_rxq_info_unreg,
)
from pyxdp.spec import BPF_F_XDP_HAS_FRAGS, CollectionSpec, XdpRunConfig
from pyxdp.uapi.bpf import BpfAttachType
from pyxdp.uapi.if_link import NetdevXdpAct, XdpFlag
from pyxdp.vm.bpf_task_work import TASK_WORK
from pyxdp.vm.bpf_timer import TIMERS
from pyxdp.vm.bpf_wq import WORKQUEUE
from pyxdp.vm.helpers import RunContext

# The packet room of a page (SKB_WITH_OVERHEAD(PAGE_SIZE - XDP_PACKET_HEADROOM)): longer
# frames get frags.
MAX_LINEAR = PAGE_SIZE - XDP_PACKET_HEADROOM - SKB_SHARED_INFO_SIZE

if TYPE_CHECKING:
    from pyxdp.net.cpumap import CpuMapRuntime
    from pyxdp.net.source import TrafficGenerator
    from pyxdp.net.xdp_metadata import XdpMetadataOps

__all__ = ["Host", "NetDevice", "NetdevRxQueue", "NetdevStats", "Veth", "XdpFlags",
           "XdpFeatures"]

ETH_HLEN = 14
VLAN_HLEN = 4
VETH_RING_SIZE = 256  # veth's per-queue xdp_ring (ptr_ring) size
NIC_RING_SIZE = 1024  # rx descriptors of a pyxdp NIC queue
POOL_PAGES = 4096  # pages per rx queue page pool (16 MiB, committed as touched)


# Kept under the names this module always used.
XdpFlags = XdpFlag
XdpFeatures = NetdevXdpAct

_ALL_FEATURES = (XdpFeatures.NETDEV_XDP_ACT_BASIC | XdpFeatures.NETDEV_XDP_ACT_REDIRECT
                 | XdpFeatures.NETDEV_XDP_ACT_NDO_XMIT | XdpFeatures.NETDEV_XDP_ACT_RX_SG
                 | XdpFeatures.NETDEV_XDP_ACT_NDO_XMIT_SG
                 | XdpFeatures.NETDEV_XDP_ACT_XSK_ZEROCOPY)
XSK_TABLE_SIZE = 256  # ifindexes the native bpf_redirect_xsk table covers


def _fail(err: int, detail: str) -> KernelError:
    return KernelError("xdp attach", err, detail)


# rtnl_create_link's bound on numtxqueues/numrxqueues; ETH_MIN_MTU..ETH_MAX_MTU, the
# widest range an Ethernet driver (veth's) allows.
MAX_QUEUES = 4096
ETH_MIN_MTU = 68
ETH_MAX_MTU = 0xFFFF


class LinkError(KernelError, ValueError):
    """A device refused: RTM_NEWLINK (a bad name, a taken one, queue counts, MTU, MAC) or
    frames for an rx queue it lacks (a ValueError too, for callers that check Python
    arguments)."""

    def __init__(self, err: int, detail: str, op: str = "RTM_NEWLINK") -> None:
        super().__init__(op, err, detail)


@dataclass(eq=False)
class NetdevRxQueue:
    """One rx queue: its descriptor ring, page pool, ``xdp_rxq_info`` and NAPI state."""

    dev: NetDevice
    index: int
    pool: PagePool
    rxq: XdpRxqInfo
    ring: FrameRing
    ctx: RunContext
    source: TrafficGenerator | None = None
    py_polls: int = 0  # polls the Python path made
    retired_polls: int = 0  # polls of native states the queue replaced
    native: Any = None  # the native poll loop's state (pyxdp.net.napi._NativeState)
    xsk: Any = None  # zero-copy AF_XDP: the buffer pool (pyxdp.net.xsk_buff_pool.XskBuffPool)
    # The queue's own counters, which its native poll loop counts into (so that queues
    # polled on different threads never share a counter); the device's totals add
    # them in on reading, as ndo_get_stats64 sums a driver's per-queue stats.
    stats: NetdevStats = field(default_factory=NetdevStats)
    _seen: Any = None

    @property
    def polls(self) -> int:
        """NAPI polls of this queue, Python and native (counted where each runs)."""
        from pyxdp.net.napi import native_polls_of
        return self.py_polls + self.retired_polls + native_polls_of(self)

    @property
    def pending(self) -> int:
        return len(self.ring) + (1 if self.source is not None and self.source.active else 0)


# What a device's place in the native redirect targets (Host.fwd) depends on: a veth's
# ndo_xdp_xmit also on its peer's program, GRO and state.
_FWD_ATTRS = frozenset({"up", "mtu", "xdp_features", "_xdp_features", "xdp_prog",
                        "xdp_generic", "gro", "peer", "wire", "xmit_wires"})
# What the device's row in the routing model (NetDevice.fibdev) mirrors.
_FIB_ATTRS = frozenset({"up", "mtu"})


class _Wire(list[Callable[["NetDevice", SkbBatch], None]]):
    """A device's wire sinks; adding or removing one changes the redirect targets."""

    def __init__(self, host: Host) -> None:
        super().__init__()
        self._host = host

    def _changed(self) -> None:
        self._host.fwd.stale = True

    def append(self, sink: Callable[[NetDevice, SkbBatch], None]) -> None:
        super().append(sink)
        self._changed()

    def extend(self, sinks: Iterable[Callable[[NetDevice, SkbBatch], None]]) -> None:
        super().extend(sinks)
        self._changed()

    def insert(self, i: SupportsIndex, sink: Callable[[NetDevice, SkbBatch], None]) -> None:
        super().insert(i, sink)
        self._changed()

    def remove(self, sink: Callable[[NetDevice, SkbBatch], None]) -> None:
        super().remove(sink)
        self._changed()

    def pop(self, i: SupportsIndex = -1) -> Callable[[NetDevice, SkbBatch], None]:
        out = super().pop(i)
        self._changed()
        return out

    def clear(self) -> None:
        super().clear()
        self._changed()

    def __delitem__(self, i: SupportsIndex | slice) -> None:
        super().__delitem__(i)
        self._changed()


class NetDevice:
    """``struct net_device``: a NIC model (use :class:`Host.add_device`)."""

    kind = "nic"

    def __setattr__(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)
        if name in _FWD_ATTRS:
            host = self.__dict__.get("host")
            if host is not None:
                host.fwd.stale = True
        if name in _FIB_ATTRS:
            fibdev = self.__dict__.get("fibdev")
            if fibdev is not None:
                setattr(fibdev, name, value)

    @property
    def mac(self) -> bytes:
        """The device's address; the stack's ``eth_type_trans`` compares frames with it."""
        return self._mac

    @mac.setter
    def mac(self, value: bytes) -> None:
        if not isinstance(value, bytes | bytearray) or len(value) != 6:
            raise LinkError(errno.EINVAL, f"a MAC address is 6 bytes, not {value!r}")
        self._mac = bytes(value)
        self.host.stack.set_dev_addr(self.ifindex, self._mac)
        if self.__dict__.get("fibdev") is not None:
            self.fibdev.mac = self._mac

    @property
    def addresses(self) -> tuple[ipaddress.IPv4Interface | ipaddress.IPv6Interface, ...]:
        """The device's IP addresses (``ip addr show``), its namespace's FIB's."""
        return self.fibdev.addresses

    @checked
    def add_address(self, address: str | ipaddress.IPv4Interface | ipaddress.IPv6Interface
                    ) -> None:
        """``ip addr add ADDRESS/PLEN dev NAME``: the address and the routes the kernel
        derives from it (local, broadcast, prefix), which the stack's input route reads:
        a frame to an address of no device of the host is not delivered."""
        try:
            self.host.env.fib.add_address(self.ifindex, address)
        except ValueError as e:  # ipaddress's refusal of the text: rtnetlink's EINVAL
            raise LinkError(errno.EINVAL, str(e), op="RTM_NEWADDR") from None

    def __init__(self, host: Host, ifindex: int, name: str, *, mac: bytes, mtu: int,
                 rx_queues: int, tx_queues: int, ring_size: int = NIC_RING_SIZE,
                 pool_pages: int = POOL_PAGES) -> None:
        self.host = host
        self.ifindex = ifindex
        self.name = name
        self.mac = mac
        self.mtu = mtu
        self.up = True
        # The device in its namespace's routing model (lo is there from the start);
        # its MAC, MTU and state follow this device's.
        fib = host.env.fib
        self.fibdev = fib.devices[ifindex] if ifindex in fib.devices else \
            fib.add_device(ifindex, name, mac=mac, mtu=mtu)
        self.gro = False
        self.num_tx_queues = tx_queues
        self.xdp_features = _ALL_FEATURES
        # struct xdp_metadata_ops: what the metadata kfuncs of device-bound programs
        # read (pyxdp.net.xdp_metadata.XdpMetadataOps); None: the driver has none.
        self.xdp_metadata_ops: XdpMetadataOps | None = None
        self._stats = NetdevStats()
        self._stats_lock = threading.Lock()
        # Per-CPU transmit rows (as the kernel's per-CPU/per-queue stats): what native
        # calls without the host lock count when they send on this device, one
        # thread per CPU each; :attr:`stats` sums them in.
        self.cpu_stats = [NetdevStats() for _ in range(host.nr_cpus)]
        self._cpu_seen = [np.zeros(len(NetdevStats.FIELDS), np.int64)
                          for _ in range(host.nr_cpus)]
        self.xdp_prog: XdpProg | None = None  # native (driver) mode
        self.xdp_generic: XdpProg | None = None  # generic (skb) mode
        # Transmit rings in native code (pyxdp.net.xsk_wire), one XskWireState address
        # per tx queue: a device whose wire is an AF_XDP socket of the host kernel.
        # Empty: transmit is the model's own (a sink for a NIC, the peer for veth).
        self.xmit_wires: tuple[int, ...] = ()
        self.wire: list[Callable[[NetDevice, SkbBatch], None]] = _Wire(host)
        self.faults: list[str] = []  # clear reports of aborted runs (bounded)
        self.rx: list[NetdevRxQueue] = []
        for q in range(rx_queues):
            pool = PagePool(pool_pages, memmap=host.memmap, name=f"{name}-rx{q}",
                            napi_local=False)
            rxq = XdpRxqInfo()
            xdp_rxq_info_reg(rxq, ifindex, q, registry=host.mem_registry)
            xdp_rxq_info_attach_page_pool(rxq, pool)
            self.rx.append(NetdevRxQueue(self, q, pool, rxq, FrameRing(ring_size),
                                         RunContext(cpu=q % host.nr_cpus, fib=host.env.fib,
                                                    xsk_lookup=host.xsk_socket,
                                                    xsk_table=host.xsk_table)))

    @property
    def stats(self) -> NetdevStats:
        """The device's counters (``ip -s link``): what the Python paths count here, with
        what each rx queue and each CPU's transmit row counted on its own added in."""
        with self._stats_lock:
            for rq in self.rx:
                cur = rq.stats.words.copy()
                if rq._seen is None:
                    rq._seen = np.zeros_like(cur)
                d = cur - rq._seen
                if d.any():
                    self._stats.words[:] += d
                    rq._seen = cur
            for row, seen in zip(self.cpu_stats, self._cpu_seen, strict=True):
                cur = row.words.copy()
                d = cur - seen
                if d.any():
                    self._stats.words[:] += d
                    seen[:] = cur
        return self._stats

    def link_stats(self) -> LinkStats:
        """``ndo_get_stats64`` (``ip -s link``): the device's counters, ``rx_dropped``
        with the skbs of it the stack had no packet type for."""
        s = self.stats
        return LinkStats(s.rx_packets, s.rx_bytes,
                         s.rx_dropped + self.host.stack.rx_dropped(self.ifindex),
                         s.tx_packets, s.tx_bytes, s.tx_dropped)

    def __repr__(self) -> str:
        mode = "native" if self.xdp_prog else "generic" if self.xdp_generic else "none"
        return f"<{type(self).__name__} {self.ifindex}: {self.name} xdp={mode}>"

    # -- XDP attach ------------------------------------------------------------------
    @checked(flags=(0, U32_MAX))
    def attach_xdp(self, prog: Program | XdpProg, mode: str = "native", *, flags: int = 0,
                   expected: Program | XdpProg | None = None) -> None:
        """``dev_xdp_attach``: attach ``prog`` in ``mode`` ("native" or "generic")."""
        self.host.live("xdp attach")
        p = _xdp_prog(prog)
        if mode not in ("native", "generic"):
            raise _fail(errno.EOPNOTSUPP, f"mode {mode!r}: pyxdp devices have native and "
                                          f"generic XDP (no offload)")
        if flags & ~int(XdpFlags.XDP_FLAGS_UPDATE_IF_NOEXIST | XdpFlags.XDP_FLAGS_REPLACE):
            raise _fail(errno.EINVAL, f"unknown flags {flags:#x} (mode goes in mode=)")
        if expected is not None and not flags & XdpFlags.XDP_FLAGS_REPLACE:
            raise _fail(errno.EINVAL, "expected= needs XDP_FLAGS_REPLACE")
        # dev_xdp_attach's checks, in its order.
        cur = self.xdp_prog if mode == "native" else self.xdp_generic
        if flags & XdpFlags.XDP_FLAGS_REPLACE:
            want = _xdp_prog(expected) if expected is not None else None
            if cur is not want:
                raise _fail(errno.EEXIST, "expected program ID does not match")
        if cur is not None and flags & XdpFlags.XDP_FLAGS_UPDATE_IF_NOEXIST:
            raise _fail(errno.EBUSY, "XDP program already attached")
        other = self.xdp_generic if mode == "native" else self.xdp_prog
        if other is not None:
            raise _fail(errno.EEXIST, "native and generic XDP can't be active at the same time")
        if p.spec.expected_attach_type in (BpfAttachType.BPF_XDP_DEVMAP,
                                           BpfAttachType.BPF_XDP_CPUMAP):
            raise _fail(errno.EINVAL, "devmap and cpumap programs cannot be attached to a "
                                      "device")
        if cur is not None and cur is p:
            return
        if mode == "native":
            self._ndo_bpf_check(p)
            self.xdp_prog = p
        else:
            self.xdp_generic = p

    @checked
    def attach_xdp_multi(self, progs: Iterable[Program | XdpProg], mode: str = "native", *,
                         run_configs: Mapping[str, XdpRunConfig] | None = None) -> XdpProg:
        """Attach several programs as libxdp does (``xdp-loader load IFACE a.o b.o``):
        a dispatcher running them in ``XDP_RUN_CONFIG`` order with their chain-call
        actions (:mod:`pyxdp.dispatcher`). Programs are added to the chain of a
        dispatcher already attached in ``mode``; any other attached program is EBUSY.
        A :class:`~pyxdp.collection.Program` brings its object's run config;
        ``run_configs`` (by program name) gives one to others. Returns the dispatcher."""
        self.host.live("xdp attach")
        try:
            given = list(progs)
        except TypeError:  # an Iterable that does not iterate (a 0-d array)
            raise BadArgument(f"NetDevice.attach_xdp_multi: progs must be programs, not "
                              f"{short(progs)}") from None
        for name, rc in (run_configs or {}).items():
            if rc is not None and not isinstance(rc, XdpRunConfig):
                raise BadArgument(f"NetDevice.attach_xdp_multi: run_configs[{short(name)}] "
                                  f"must be XdpRunConfig, not {short(rc)}")
        new = [(_xdp_prog(p), (p.run_config if isinstance(p, Program) else None)
                or (run_configs or {}).get(_xdp_prog(p).spec.name) or XdpRunConfig())
               for p in given]
        if not new:
            raise _fail(errno.EINVAL, "no program to attach")
        for p, _ in new:
            if p.chain:
                raise _fail(errno.EINVAL, f"{p.spec.name} is a dispatcher, not a component")
        cur = self.xdp_prog if mode == "native" else self.xdp_generic
        if cur is not None and not cur.chain:
            raise _fail(errno.EBUSY, f"XDP program already attached ({cur.spec.name}, id "
                                     f"{cur.id}) and it is not a dispatcher")
        prog = self.host.backend.register(
            xdp_dispatcher([*(cur.chain if cur is not None else ()), *new]))
        try:
            if cur is None:
                self.attach_xdp(prog, mode)
            else:
                self.attach_xdp(prog, mode, flags=XdpFlags.XDP_FLAGS_REPLACE, expected=cur)
        except BaseException:
            self.host.backend.programs.pop(prog.id, None)
            raise
        return prog

    @checked
    def detach_xdp_multi(self, prog: Program | XdpProg, mode: str = "native") -> None:
        """Take one component out of the dispatcher in ``mode`` (``xdp-loader unload -i``):
        the others stay in a new dispatcher; the last one leaves the device bare."""
        p = _xdp_prog(prog)
        cur = self.xdp_prog if mode == "native" else self.xdp_generic
        if cur is None or not any(c is p for c, _ in cur.chain):
            raise _fail(errno.ENOENT, f"{p.spec.name} is not in the dispatcher of {self.name}")
        rest = [(c, rc) for c, rc in cur.chain if c is not p]
        self.detach_xdp(mode)
        if rest:
            self.attach_xdp_multi([c for c, _ in rest], mode,
                                  run_configs={c.spec.name: rc for c, rc in rest})

    def _ndo_bpf_check(self, prog: XdpProg) -> None:
        """The driver's own checks of a native program (``ndo_bpf``): an MTU whose frames
        need frags takes only a frags-aware program (``xdp.frags``), as drivers refuse
        one (mlx5's ``mlx5e_xdp_allowed``: -EINVAL)."""
        if self.mtu + ETH_HLEN > MAX_LINEAR and not prog.spec.flags & BPF_F_XDP_HAS_FRAGS:
            raise _fail(errno.EINVAL, f"MTU {self.mtu} of {self.name} needs frags: the XDP "
                                      f"program must be frags-aware (SEC(\"xdp.frags\"))")

    def detach_xdp(self, mode: str | None = None) -> None:
        """Detach the program of ``mode`` (None: whichever is attached)."""
        if not (mode is None or isinstance(mode, str) and mode in ("native", "generic")):
            raise _fail(errno.EOPNOTSUPP, f"mode {short(mode)}: pyxdp devices have native "
                                          f"and generic XDP (no offload)")
        if mode in (None, "native"):
            self.xdp_prog = None
        if mode in (None, "generic"):
            self.xdp_generic = None

    def xdp_query(self) -> dict[str, Any]:
        """What ``ip link`` shows: mode and program id (0 when none); for a libxdp
        dispatcher also its ``chain`` (what ``xdp-loader status`` lists)."""
        for mode, p in (("native", self.xdp_prog), ("generic", self.xdp_generic)):
            if p is None:
                continue
            out: dict[str, Any] = {"mode": mode, "prog_id": p.id, "prog": p.spec.name}
            if p.chain:  # a dispatcher: its components in order
                out["chain"] = [{"prog_id": c.id, "prog": c.spec.name, "priority": rc.priority,
                                 "chain_call_actions": rc.chain_call_actions}
                                for c, rc in p.chain]
            return out
        return {"mode": "none", "prog_id": 0, "prog": ""}

    @property
    def napi_enabled(self) -> bool:
        """Whether the device polls with NAPI for XDP frames (veth: XDP or GRO on)."""
        return True

    # -- receive side --------------------------------------------------------------
    def receive(self, packets: list[bytes] | SkbBatch, queue: int = 0) -> int:
        """Frames arriving from the wire on rx ``queue`` (the NIC DMA): copied into
        page pool pages and queued for the next poll. Returns how many were
        taken; the rest are rx_dropped (ring full)."""
        self.host.live("receive")
        if isinstance(queue, bool) or not isinstance(queue, int) or \
                not 0 <= queue < len(self.rx):
            raise LinkError(errno.EINVAL, f"{self.name} has rx queues 0..{len(self.rx) - 1}, "
                                          f"not {short(queue)}", op="receive")
        batch = packets if isinstance(packets, SkbBatch) else \
            SkbBatch.from_packets(packets, self.ifindex, queue)
        return self._dma(self.rx[queue], batch)

    def _dma_pages(self, rq: NetdevRxQueue, batch: SkbBatch, n: int) -> int:
        """``n`` frames of ``batch`` into pages of ``rq``'s pool and onto its ring."""
        lens = batch.length[:n]
        big = lens > MAX_LINEAR
        if big.any():
            return self._dma_frags(rq, batch, n)
        pfns = rq.pool.alloc_bulk(n)
        if len(pfns) < n:  # the pool ran dry: the NIC drops what it cannot place
            self.stats.rx_dropped += n - len(pfns)
            n = len(pfns)
        rows = rq.pool.local(pfns)
        width = min(batch.data.shape[1], MAX_LINEAR)
        rq.pool.pages[rows, XDP_PACKET_HEADROOM:XDP_PACKET_HEADROOM + width] = \
            batch.data[:n, :width]
        rq.ring.produce(Frames.make(pfns, XDP_PACKET_HEADROOM, lens[:n]))
        return n

    def _dma(self, rq: NetdevRxQueue, batch: SkbBatch) -> int:
        if rq.xsk is not None:  # zero-copy AF_XDP: into UMEM chunks from the fill ring
            from pyxdp.net.xsk_buff_pool import xsk_zc_dma
            # The pool's rings are shared with the NAPI poll, and a socket's close
            # unbinds it from the queue, both under the host lock: take it too.
            with self.host.lock:
                if rq.xsk is not None:
                    return xsk_zc_dma(rq, batch)
        n = min(len(batch), rq.ring.free)
        if n < len(batch):
            self.stats.rx_dropped += len(batch) - n
        if n <= 0:
            return 0
        return self._dma_pages(rq, batch, n)

    def _queue_skbs(self, rq: NetdevRxQueue, batch: SkbBatch) -> int:
        """Skbs another device's transmit hands to this device's ``rq`` (``veth_xdp_rx``
        onto the ``xdp_ring``, ``netif_rx`` onto lo's backlog): each in order-0 pages
        of the system allocator (the skb's head at ``NET_SKB_PAD``; one longer than a
        page's packet room with page frags, :data:`~pyxdp.net.frames.KIND_SKB` and
        ``KIND_FRAGS``), queued in order for the queue's own poll to copy into its
        pool, as the kernel's receiving NAPI does (``veth_convert_skb_to_xdp_buff``):
        the sender, on whichever thread, takes no page of a pool another thread may
        be polling. A full ring or no page drops the skb (``rx_dropped``). Returns
        how many were queued."""
        n = min(len(batch), rq.ring.free)
        system = self.host.memmap.system
        lens = batch.length[:max(n, 0)]
        if n <= 0:
            pfns = np.zeros(0, np.int64)
        elif (lens > MAX_LINEAR).any():  # heads and page frags, in machine code
            from pyxdp.net.napi import _system_args
            from pyxdp.net.skbuff_native import skbs_build
            pfns = np.empty(n, np.int64)
            skbs_build(_system_args(self.host), np.ascontiguousarray(batch.data[:n], np.uint8),
                       np.ascontiguousarray(lens, np.int64), NET_SKB_PAD, pfns)
        else:
            got = system.alloc_pages_bulk(n)
            width = min(batch.data.shape[1], MAX_LINEAR)
            system.pages[system.local(got), NET_SKB_PAD:NET_SKB_PAD + width] = \
                batch.data[:len(got), :width]
            pfns = np.full(n, -1, np.int64)
            pfns[:len(got)] = got
        ok = pfns >= 0
        frames = Frames(pfns[ok], np.full(int(ok.sum()), NET_SKB_PAD, np.int64), lens[ok].copy(),
                        np.zeros(int(ok.sum()), np.int64),
                        np.where(lens[ok] > MAX_LINEAR, KIND_SKB | KIND_FRAGS, KIND_SKB))
        took = rq.ring.produce(frames)
        if took < len(frames):  # other senders filled the ring meanwhile
            self.host.drop_frames(frames.select(slice(took, None)), None, direct=False)
        if took < len(batch):
            self.stats.rx_dropped += len(batch) - took
        return took

    def _dma_frags(self, rq: NetdevRxQueue, batch: SkbBatch, n: int) -> int:
        """Frames longer than a page's packet room become multi-buffer ``xdp_buff`` s, as
        veth's ``skb_pp_cow_data`` builds them: a head page with the first 3520 bytes,
        then frags of up to a page each (``skb_add_rx_frag``), listed in the head's
        ``skb_shared_info`` (``XDP_FLAGS_HAS_FRAGS``). More than ``MAX_SKB_FRAGS``
        frags, or a pool that runs dry, drops the frame (``rx_dropped``). In machine
        code (:func:`pyxdp.net.skbuff_native.bufs_dma`); a host without native polls
        takes the Python reference, :func:`pyxdp.net.xdp_mem.xdp_buff_copy_in`."""
        lens = batch.length[:n]
        pool = rq.pool
        heads = np.empty(n, np.int64)
        if self.host.native and not pool.destroyed and pool.page_size == PAGE_SIZE:
            from pyxdp.net.skbuff_native import bufs_dma
            bufs_dma((pool.pages, pool.pfn_base, *pool.native_arrays),
                     np.ascontiguousarray(batch.data[:n], np.uint8),
                     np.ascontiguousarray(lens, np.int64), pool.napi_local, heads)
        else:
            from pyxdp.net.xdp_mem import xdp_buff_copy_in
            for i, ln in enumerate(lens.tolist()):
                head = xdp_buff_copy_in(pool, pool.alloc_bulk, batch.data[i], ln,
                                        XDP_PACKET_HEADROOM, memmap=self.host.memmap)
                heads[i] = -1 if head is None else head
        ok = heads >= 0
        k = int(ok.sum())
        self.stats.rx_dropped += n - k
        kl = lens[ok]
        rq.ring.produce(Frames(heads[ok], np.full(k, XDP_PACKET_HEADROOM, np.int64),
                               kl.astype(np.int64),
                               np.zeros(k, np.int64),
                               np.where(kl > MAX_LINEAR, KIND_BUFF | KIND_FRAGS,
                                        KIND_BUFF).astype(np.int64)))
        return k

    # -- transmit side -------------------------------------------------------------
    def xmit_skbs(self, batch: SkbBatch) -> None:
        """``dev_queue_xmit`` of a list of skbs: to the wire."""
        self._transmitted(batch, self.up)

    def _transmitted(self, batch: SkbBatch, ok: bool) -> bool:
        """Count skbs going out (or dropped when ``ok`` is false) and show them to the
        wire sinks; returns ``ok``."""
        if not ok:
            self.stats.tx_dropped += len(batch)
            return False
        self.stats.tx_packets += len(batch)
        self.stats.tx_bytes += int(batch.length.sum())
        for sink in self.wire:
            sink(self, batch)
        return True

    def ndo_xdp_xmit(self, frames: Frames) -> int:
        """Transmit ``xdp_frame`` s; returns how many were sent (the rest stay the
        caller's to free, as in the kernel). A NIC sends them to the wire and
        returns the memory at tx completion."""
        if not self.up:
            return -errno.ENETDOWN
        n = len(frames)
        if not n:
            return 0
        if self.wire:
            self.xmit_skbs(self.host.frames_to_skbs(frames, self.ifindex))
        else:
            self.stats.tx_packets += n
            self.stats.tx_bytes += int(frames.length.sum())
        # TX completion, in the NAPI context: straight back to the pools.
        xdp_return_frames_rx_napi(frames.pfn, memmap=self.host.memmap)
        return n

    def transmit(self, packets: list[bytes]) -> None:
        """Send ``packets`` from this device's stack (an ``AF_PACKET`` send)."""
        self.host.live("transmit")
        self.xmit_skbs(SkbBatch.from_packets(packets, self.ifindex))

    def _close(self) -> None:
        # Host.close's teardown of the rx queues: queued frames back to their pools, the
        # pools destroyed. Not public: a device stays a redirect target (devmap entries,
        # the native forwarding table) as long as its host lives, so it cannot go alone.
        for rq in self.rx:
            if rq.native is not None:  # its tracer counts become the tracer's own
                rq.native.retire(rq)
                rq.native = None
            # Frames still queued belong to their pools: give them back first.
            rest = rq.ring.consume(len(rq.ring))
            self.host.drop_frames(rest, rq, direct=False)
            xdp_rxq_info_unreg(rq.rxq, registry=self.host.mem_registry)
            rq.pool.destroy()


NETDEV_MAX_BACKLOG = 1000  # net.core.netdev_max_backlog: a CPU's backlog queue's limit


class Loopback(NetDevice):
    """``lo`` (``drivers/net/loopback.c``): no XDP of its own - no ``ndo_bpf`` nor
    ``ndo_xdp_xmit``, ``xdp_features`` 0, so an ``xdp_frame`` redirected to it is
    refused (-EOPNOTSUPP); a generic program may run on it - and what it
    transmits it receives again: ``loopback_xmit`` counts each skb it hands to
    ``netif_rx``, which queues it on the backlog (``enqueue_to_backlog``: past
    ``netdev_max_backlog`` skbs the rest are dropped, counted as ``rx_dropped``).
    lo's backlog is its rx queue's ring, ``netdev_max_backlog`` long, each skb
    in an order-0 page (:meth:`NetDevice._queue_skbs`): the next softirq round's poll of it
    (``process_backlog``) gives them to lo's receive path - its generic
    program, then the stack - up to a NAPI budget at a time, natively where
    the program is on the JIT; a generic redirect or TX to lo in the native
    loop queues its skb there too."""

    backlog = True  # its rx ring is netif_rx's backlog (skbs to the stack one by one)

    def __init__(self, host: Host, ifindex: int) -> None:
        super().__init__(host, ifindex, "lo", mac=bytes(6), mtu=65536, rx_queues=1,
                         tx_queues=1, ring_size=NETDEV_MAX_BACKLOG)
        self.xdp_features = XdpFeatures(0)

    def _ndo_bpf_check(self, prog: XdpProg) -> None:
        """``dev_xdp_attach``: no ``ndo_bpf``, so native mode is refused before the
        driver is asked (generic mode works)."""
        raise _fail(errno.EOPNOTSUPP, "Underlying driver does not support XDP in native mode")

    def xmit_skbs(self, batch: SkbBatch) -> None:
        """``loopback_xmit``: ``netif_rx`` on lo itself."""
        if not self.up:
            self._transmitted(batch, False)
            return
        n = len(batch)
        take = max(min(n, self.rx[0].ring.free), 0)
        if take < n:
            self.stats.rx_dropped += n - take
            sel = np.arange(take)
            batch = SkbBatch(batch.data[sel], batch.length[sel], batch.ifindex[sel],
                             batch.queue[sel], list(batch.meta[:take]))
        if not take:
            return
        self._transmitted(batch, True)
        self._queue_skbs(self.rx[0], SkbBatch(batch.data, batch.length,
                                              np.full(take, self.ifindex, np.int64),
                                              np.zeros(take, np.int64), list(batch.meta)))


class Veth(NetDevice):
    """One end of a veth pair (``drivers/net/veth.c``)."""

    kind = "veth"

    def __init__(self, host: Host, ifindex: int, name: str, **kw: Any) -> None:
        super().__init__(host, ifindex, name, ring_size=VETH_RING_SIZE, **kw)
        self.peer: Veth | None = None

    def _ndo_bpf_check(self, prog: XdpProg) -> None:
        """``veth_xdp_set``: the peer's frames must fit one page (less headroom and
        ``skb_shared_info``) unless the program takes frags (``xdp.frags``): then 17
        more pages."""
        peer = self.peer
        if peer is None:
            raise _fail(errno.ENOTCONN, "Cannot set XDP when peer is detached")
        max_mtu = PAGE_SIZE - XDP_PACKET_HEADROOM - SKB_SHARED_INFO_SIZE - ETH_HLEN
        if prog.spec.flags & BPF_F_XDP_HAS_FRAGS:
            max_mtu += PAGE_SIZE * MAX_SKB_FRAGS
        if peer.mtu > max_mtu:
            raise _fail(errno.ERANGE, f"Peer MTU is too large to set XDP ({peer.name} mtu "
                                      f"{peer.mtu} > {max_mtu})")

    @property
    def xdp_features(self) -> XdpFeatures:
        """``veth_set_xdp_features``: ``NDO_XMIT`` (and ``NDO_XMIT_SG``) only while the
        peer can take XDP frames - it has a native program or GRO requested - so a
        redirect to a veth whose peer has neither fails at once (``-EOPNOTSUPP``)."""
        peer = self.peer
        if peer is not None and (peer.xdp_prog is not None or peer.gro):
            return self._xdp_features
        return self._xdp_features & ~(XdpFeatures.NETDEV_XDP_ACT_NDO_XMIT
                                      | XdpFeatures.NETDEV_XDP_ACT_NDO_XMIT_SG)

    @xdp_features.setter
    def xdp_features(self, value: XdpFeatures) -> None:
        # veth has no AF_XDP zero-copy (no ndo_xsk_wakeup), as in Linux.
        self._xdp_features = value & ~XdpFeatures.NETDEV_XDP_ACT_XSK_ZEROCOPY

    @property
    def napi_enabled(self) -> bool:
        return self.up and (self.xdp_prog is not None or self.gro)

    def link_stats(self) -> LinkStats:
        """``veth_get_stats64``: what one end transmits is what reached its peer, so its
        ``tx_packets``/``tx_bytes`` are the peer's ``rx_*`` (the peer's NAPI counts an skb
        after ``eth_type_trans``, 14 bytes short, an ``xdp_frame`` whole); the XDP_TX
        frames a flush could not hand to the peer (``xdp_tx_err``) are this end's
        ``tx_dropped`` and the peer's ``rx_dropped``."""
        own = super().link_stats()
        peer = self.peer
        if peer is None:
            return own
        mine, theirs = self.stats, peer.stats
        return LinkStats(own.rx_packets, own.rx_bytes,
                         own.rx_dropped + theirs.xdp_tx_errors,
                         theirs.rx_packets, theirs.rx_bytes,
                         own.tx_dropped + mine.xdp_tx_errors)

    def xmit_skbs(self, batch: SkbBatch) -> None:
        """``veth_xmit``: the peer receives the skbs."""
        peer = self.peer
        assert peer is not None
        if not self._transmitted(batch, self.up and peer.up):
            return
        if peer.xdp_prog is not None or peer.xdp_generic is not None:
            # veth_xdp_rx: the skbs onto the peer's xdp_ring; the peer's NAPI copies
            # each into a page of its queue's page pool for the program
            # (veth_convert_skb_to_xdp_buff). A peer with a generic program only:
            # __netif_rx onto the backlog, whose poll runs it (pyxdp's backlog for the
            # peer is its rx queue's ring, as lo's).
            queue = 0
            peer._queue_skbs(peer.rx[queue],
                             SkbBatch(batch.data, batch.length,
                                      np.full(len(batch), peer.ifindex, np.int64),
                                      batch.queue, batch.meta))
        else:
            peer.host.netif_receive(peer, SkbBatch(batch.data, batch.length,
                                                   np.full(len(batch), peer.ifindex,
                                                           np.int64),
                                                   np.zeros(len(batch), np.int64), batch.meta,
                                                   batch.each))

    def ndo_xdp_xmit(self, frames: Frames) -> int:
        """``veth_xdp_xmit``: frames into the peer's ``xdp_ring``."""
        peer = self.peer
        assert peer is not None
        if not peer.napi_enabled:  # no XDP program nor GRO, or down: no NAPI, no xdp_ring
            return -errno.ENXIO
        # The loop stops at the first frame too long for the peer or the first one the
        # ring refuses; the rest stay the caller's to free.
        # max_len = mtu + hard_header_len + VLAN_HLEN
        too_big = np.flatnonzero(frames.length > peer.mtu + ETH_HLEN + VLAN_HLEN)
        limit = int(too_big[0]) if len(too_big) else len(frames)
        kframes = Frames(frames.pfn[:limit], frames.data[:limit], frames.length[:limit],
                         frames.meta[:limit], KIND_FRAME | (frames.kind[:limit] & KIND_FRAGS))
        sent = peer.rx[0].ring.produce(kframes)
        self.stats.tx_packets += sent
        self.stats.tx_bytes += int(frames.length[:sent].sum())
        for sink in self.wire:
            sink(self, self.host.frames_to_skbs(kframes.select(slice(0, sent)), self.ifindex))
        return sent


def _xdp_prog(p: Program | XdpProg | None) -> XdpProg:
    if isinstance(p, Program) and p.closed:  # its fd is gone: bpf_prog_get's fdget fails
        raise _fail(errno.EBADF, f"program {p.name!r} is closed")
    handle = p.handle if isinstance(p, Program) else p
    if not isinstance(handle, XdpProg):
        raise BadArgument("attach_xdp needs a program loaded on the host (host.load(...))")
    if handle.syscall:  # bpf_prog_get_type_dev(fd, BPF_PROG_TYPE_XDP)
        raise _fail(errno.EINVAL, f"{handle.spec.name} is a syscall program, not an XDP one")
    return handle


class _Netdevs(Mapping[int, NetdevInfo]):
    """The host's devices as test_run and devmaps see them."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def __getitem__(self, ifindex: int) -> NetdevInfo:
        dev = self.host.devices[ifindex]
        return NetdevInfo(dev.ifindex, dev.name, len(dev.rx), dev.xdp_metadata_ops)

    def __iter__(self) -> Iterator[int]:
        return iter(self.host.devices)

    def __len__(self) -> int:
        return len(self.host.devices)


class Host:
    """A network namespace of pyxdp's datapath: devices, memory, stack, programs.

    ``engine`` picks how programs run ("auto": the JIT when llvmlite is
    there); ``tracer`` is where tracepoints fire (default: the process-wide
    :data:`pyxdp.net.trace.TRACER`); ``cpumap_threads`` runs each cpumap
    entry's kthread in its own thread (else :meth:`run` runs them inline,
    deterministically, after the polls); ``threaded_napi`` polls each rx queue
    on a thread of its own (the kernel's threaded NAPI).
    """

    @checked(nr_cpus=(1, NR_CPUS_MAX))
    def __init__(self, name: str = "pyxdp", *, engine: str = "auto", nr_cpus: int = 2,
                 tracer: _trace.Tracer | None = None, cpumap_threads: bool = False,
                 native: bool = True, threaded_napi: bool = False) -> None:
        from pyxdp.userspace import UserspaceBackend
        self.name = name
        self.nr_cpus = nr_cpus
        self.tracer = tracer if tracer is not None else _trace.TRACER
        self.memmap = MemMap()
        self.mem_registry = XdpMemRegistry()
        self.mem_registry.on_connect.append(
            lambda mid, mtype, alloc, ifx: self.tracer.mem_connect.fire(mid, mtype, ifx))
        self.mem_registry.on_disconnect.append(
            lambda mid, mtype, alloc: self.tracer.mem_disconnect.fire(mid, mtype))
        self.devices: dict[int, NetDevice] = {}
        # The devices as native redirect targets, remade after a device changed.
        self.fwd = FwdTable()
        # Held by a NAPI poll and by cpumap workers around shared memory (pools,
        # rings, counters); a worker's program runs outside it.
        self.lock = threading.RLock()
        self.env = TestRunEnv(netdevs=_Netdevs(self))
        self.stack = Stack(nr_cpus, fib=self.env.fib)
        self.backend = UserspaceBackend(env=self.env, engine=engine, nr_cpus=nr_cpus)
        self.cpumap_threads = cpumap_threads
        # Threaded NAPI (/sys/class/net/<dev>/threaded): run() polls each rx queue on
        # a thread of its own, in parallel where the program allows it.
        self.threaded_napi = threaded_napi
        # Native NAPI polls for JIT programs (pyxdp.net.napi_native); False keeps
        # every frame on the Python path (the reference the tests compare with).
        self.native = native
        self.cpumaps: dict[tuple[int, int], CpuMapRuntime] = {}
        # Replaced entries whose kthreads were told to stop, joined by reap_cpumaps.
        self._retired_cpumaps: list[CpuMapRuntime] = []
        self._retired_lock = threading.Lock()
        # AF_XDP (pyxdp.net.xsk_buff_pool): buffer pools by (ifindex, queue); the socket
        # bind() registered on each rx queue (bpf_redirect_xsk), and the same as a
        # bitmask of queues per ifindex for native code.
        self.xsk_pools: dict[tuple[int, int], Any] = {}
        self.xsk_rx: dict[tuple[int, int], Any] = {}
        self.xsk_table = np.zeros(XSK_TABLE_SIZE, np.uint64)
        self._collections: list[Collection] = []
        self._next_ifindex = 1
        self._closed = False
        self.lo = Loopback(self, self._ifindex())
        self.devices[self.lo.ifindex] = self.lo

    def __repr__(self) -> str:
        return f"<Host {self.name} {len(self.devices)} devices>"

    def __enter__(self) -> Host:
        return self

    def __exit__(self, et: object, ev: object, tb: object) -> None:
        self.close(check=et is None)

    # -- objects ---------------------------------------------------------------------
    @checked
    def load(self, obj: str | Path | CollectionSpec, *, verify: bool = True) -> Collection:
        """Load an object (path or spec) on this host's backend; ``verify=False`` skips
        pyxdp's verifier (see :class:`~pyxdp.collection.Collection`)."""
        self.live("load")
        coll = Collection(obj, backend=self.backend, verify=verify) \
            if isinstance(obj, CollectionSpec) \
            else Collection.load(obj, backend=self.backend, verify=verify)
        self._collections.append(coll)
        return coll

    @checked
    def program_by_id(self, prog_id: int) -> XdpProg | None:
        return self.backend.program_by_id(prog_id)

    @checked(ifindex=(0, U32_MAX), queue=(0, U32_MAX))
    def xsk_lookup(self, ifindex: int, queue: int) -> Any:
        """The AF_XDP socket registered on rx queue ``queue`` of ``ifindex`` (None: none)."""
        return self.xsk_socket(ifindex, queue)

    def xsk_socket(self, ifindex: int, queue: int) -> Any:
        """:meth:`xsk_lookup` unchecked, for the datapath (trusted arguments)."""
        return self.xsk_rx.get((ifindex, queue))

    # -- devices ---------------------------------------------------------------------
    def _ifindex(self) -> int:
        i = self._next_ifindex
        self._next_ifindex += 1
        self.stack.ensure_ifindex(i)
        return i

    def _mac(self, ifindex: int) -> bytes:
        return bytes([0x02, 0x00, 0x00, 0x00, (ifindex >> 8) & 0xFF, ifindex & 0xFF])

    @staticmethod
    def _check_link(rx_queues: object, tx_queues: object, mtu: object,
                    mac: object = None) -> None:
        """rtnl_create_link's and dev_validate_mtu's checks of a new device."""
        for what, n in (("transmit", tx_queues), ("receive", rx_queues)):
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_QUEUES:
                raise LinkError(errno.EINVAL, f"Invalid number of {what} queues ({short(n)}: "
                                              f"1..{MAX_QUEUES})")
        if isinstance(mtu, bool) or not isinstance(mtu, int) or mtu < ETH_MIN_MTU:
            raise LinkError(errno.EINVAL, f"mtu less than device minimum ({short(mtu)} < "
                                          f"{ETH_MIN_MTU})")
        if mtu > ETH_MAX_MTU:
            raise LinkError(errno.EINVAL, f"mtu greater than device maximum ({mtu} > "
                                          f"{ETH_MAX_MTU})")
        if mac is not None and (not isinstance(mac, bytes | bytearray) or len(mac) != 6):
            raise LinkError(errno.EINVAL, f"a MAC address is 6 bytes, not {mac!r}")

    def _check_name(self, name: str) -> None:
        if not isinstance(name, str) or not name or len(name) > 15 or "/" in name or \
                any(c.isspace() for c in name):
            raise LinkError(errno.EINVAL, f"bad device name {short(name)} (1-15 characters, no '/' "
                                          f"or spaces)")
        if any(d.name == name for d in self.devices.values()):
            raise LinkError(errno.EEXIST, f"device {name} exists")

    def add_device(self, name: str, *, rx_queues: int = 1, tx_queues: int = 1, mtu: int = 1500,
                   mac: bytes | None = None) -> NetDevice:
        """A NIC with ``rx_queues`` rx queues (each with its page pool)."""
        self.live("RTM_NEWLINK")
        self._check_name(name)
        self._check_link(rx_queues, tx_queues, mtu, mac)
        i = self._ifindex()
        dev = NetDevice(self, i, name, mac=mac or self._mac(i), mtu=mtu, rx_queues=rx_queues,
                        tx_queues=tx_queues)
        self.devices[i] = dev
        self.fwd.stale = True
        return dev

    def veth(self, name: str, peer: str, *, mtu: int = 1500,
             queues: int = 1) -> tuple[Veth, Veth]:
        """A veth pair (``ip link add NAME type veth peer name PEER``); ``queues`` rx and
        tx queues each (``numrxqueues``/``numtxqueues``; traffic arrives on queue 0)."""
        self.live("RTM_NEWLINK")
        self._check_link(queues, queues, mtu)
        self._check_name(name)
        self._check_name(peer)
        if name == peer:
            raise LinkError(errno.EEXIST, f"device {name} exists")
        devs = []
        for n in (name, peer):
            i = self._ifindex()
            d = Veth(self, i, n, mac=self._mac(i), mtu=mtu, rx_queues=queues,
                     tx_queues=queues)
            self.devices[i] = d
            devs.append(d)
        a, b = devs
        a.peer, b.peer = b, a
        return a, b

    def dev(self, name_or_index: str | int) -> NetDevice:
        """The device named so (or with that ifindex)."""
        if not isinstance(name_or_index, str | int):
            raise BadArgument(f"Host.dev: name_or_index must be str or int, not "
                              f"{short(name_or_index)}")
        if isinstance(name_or_index, int):
            d = self.devices.get(name_or_index)
        else:
            d = next((x for x in self.devices.values() if x.name == name_or_index), None)
        if d is None:  # RTM_GETLINK's answer (ip link show dev NAME), not an attach's
            raise LinkError(errno.ENODEV, f"no device {name_or_index!r}", op="RTM_GETLINK")
        return d

    # -- running -------------------------------------------------------------------
    def poll(self, budget: int = 64) -> int:
        """One softirq round: a NAPI poll of every rx queue with work; returns the
        frames processed."""
        from pyxdp.net.napi import napi_poll
        self.live("poll")  # a closed host's queues are gone, not idle
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise BadArgument(f"poll: the budget must be an int >= 0, not {short(budget)}")
        if self.threaded_napi:
            return self._poll_threaded(budget)
        done = 0
        for dev in list(self.devices.values()):
            for rq in dev.rx:
                if rq.pending:
                    done += napi_poll(rq, budget)
        return done

    def _poll_threaded(self, budget: int) -> int:
        """Threaded NAPI: a thread per CPU polls that CPU's queues (in turn, as one CPU
        would) until they are idle, or 256 rounds (an endless source: the caller gets
        control back); the CPUs' threads run at once."""
        from pyxdp.net.napi import napi_poll
        per_cpu: dict[int, list[NetdevRxQueue]] = {}
        for dev in list(self.devices.values()):
            for rq in dev.rx:
                if rq.pending:
                    per_cpu.setdefault(rq.ctx.cpu % self.nr_cpus, []).append(rq)
        done = [0] * len(per_cpu)
        errors: list[BaseException] = []

        def work(i: int, rqs: list[NetdevRxQueue]) -> None:
            try:
                for _ in range(256):
                    n = sum(napi_poll(rq, budget) for rq in rqs if rq.pending)
                    done[i] += n
                    if not n:
                        break
            except BaseException as e:  # raised in the caller's thread below
                errors.append(e)

        groups = list(per_cpu.values())
        threads = [threading.Thread(target=work, args=(i, g), name=f"napi/{i}")
                   for i, g in enumerate(groups[1:], start=1)]
        for t in threads:
            t.start()
        if groups:
            work(0, groups[0])
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return sum(done)

    @checked(max_rounds=(0, U64_MAX))
    def run(self, *, max_rounds: int | None = None) -> int:
        """Poll until every queue is empty and every cpumap kthread idle (inline, or
        with ``cpumap_threads`` until each worker has finished what it took); returns
        the frames the polls and the kthreads processed. After each round of polls the
        bpf_timers due by then fire (:data:`pyxdp.vm.bpf_timer.TIMERS`): the timer
        softirq between NET_RX ones; run() does not wait for timers not yet due. Then
        the bpf_wq work queued by then runs (:data:`pyxdp.vm.bpf_wq.WORKQUEUE`), as
        kworkers would, and the task work scheduled by then
        (:data:`pyxdp.vm.bpf_task_work.TASK_WORK`), as tasks returning to user space
        would."""
        self.live("run")
        total = 0
        rounds = 0
        before = {id(rt): rt.processed for rt in self.cpumaps.values()}
        while max_rounds is None or rounds < max_rounds:
            rounds += 1
            n = self.poll()
            self.reap_cpumaps()
            # Between polls, as the timer softirq runs beside NET_RX: due bpf_timers.
            TIMERS.run()
            WORKQUEUE.run()
            TASK_WORK.run()
            if not self.cpumap_threads:
                for rt in list(self.cpumaps.values()):
                    # Inline, a kthread keeps up with the polls: it empties its ring.
                    while k := rt.run_once():
                        n += k
            total += n
            if not n:
                if self.cpumap_threads and any(rt.backlog and rt.error is None
                                               for rt in list(self.cpumaps.values())):
                    # A worker is still at it (and what it does may give the
                    # polls more work): wait for it.
                    time.sleep(0.0005)
                    continue
                # Workers idle now; what they redirected before going idle is in the
                # rings already (they count it in flight until then): poll it too.
                if self.cpumap_threads and any(rq.pending for d in list(self.devices.values())
                                               for rq in d.rx):
                    continue
                break
        if self.cpumap_threads:
            total += sum(rt.processed - before.get(id(rt), 0)
                         for rt in list(self.cpumaps.values()))
        # Entries replaced while a lockless poll still queued frames on them deliver
        # those now. The pages native kthreads freed wait on their return rings for
        # their pools' next poll; with every queue idle that is now (the pool's ring,
        # not directly), so that the pools' counters are the kernel's when run()
        # returns.
        self.reap_cpumaps()
        from pyxdp.net.napi import napi_drain_freed_cpumaps
        for dev in list(self.devices.values()):
            for rq in dev.rx:
                napi_drain_freed_cpumaps(rq)
        for rt in list(self.cpumaps.values()):
            rt.reclaim()
        return total

    def retire_cpumap(self, rt: CpuMapRuntime) -> None:
        """A replaced cpumap entry whose kthread was told to stop (its caller may hold
        the host lock): joined and drained by :meth:`reap_cpumaps`."""
        with self._retired_lock:
            self._retired_cpumaps.append(rt)

    def reap_cpumaps(self) -> None:
        """``__cpu_map_entry_free`` of the replaced entries, after the fact: each kthread
        joined and what its ring still holds delivered. Called without the host lock
        (between run()'s rounds, at close)."""
        with self._retired_lock:
            rts, self._retired_cpumaps = self._retired_cpumaps, []
        for rt in rts:
            rt.stop()

    # -- helpers shared by the receive paths -----------------------------------------
    def netif_receive(self, dev: NetDevice, batch: SkbBatch) -> None:
        """A list of skbs received on ``dev`` (generic XDP first, then the stack)."""
        from pyxdp.net.dev import netif_receive_skb_list
        netif_receive_skb_list(dev, batch)

    def frames_to_skbs(self, frames: Frames, ifindex: int) -> SkbBatch:
        """Copy packets (and metadata) out of frames' pages into an SkbBatch."""
        n = len(frames)
        # at least a column: frames of 0 bytes (an empty packet received) still copy
        width = max(int(frames.length.max()) if n else 0, 1)
        data = np.zeros((n, width), np.uint8)
        metas: list[bytes] = [b""] * n
        multi = frames.has_frags
        for mem, pos, rows in self.memmap.split(frames.pfn):
            start = frames.data[pos]
            # Linear packets here; multi-buffer ones below, whole (_frags_into).
            lin = ~multi[pos] if multi.any() else slice(None)
            ln = frames.length[pos][lin]
            if ln.size:
                w = max(int(ln.max()), 1)
                cols = start[lin][:, None] + np.arange(w)[None, :]
                np.clip(cols, 0, mem.page_size - 1, out=cols)
                got = mem.pages[rows[lin][:, None], cols]
                mask = np.arange(w)[None, :] < ln[:, None]
                data[pos[lin], :w] = np.where(mask, got, 0)
            ms = frames.meta[pos]
            if ms.any():
                for k, (r, s, m) in enumerate(zip(rows.tolist(), start.tolist(), ms.tolist(),
                                                  strict=True)):
                    if m:
                        metas[int(pos[k])] = mem.pages[r, s - m:s].tobytes()
        fr = np.flatnonzero(frames.has_frags)
        if len(fr):
            self._frags_into(frames, fr, data)
        return SkbBatch(data, frames.length.copy(), np.full(n, ifindex, np.int64),
                        np.zeros(n, np.int64), metas)

    def _frags_into(self, frames: Frames, which: Any, data: Any) -> None:
        """Rows ``which`` of ``data`` get their multi-buffer packets whole, head then
        frags (``skb_copy_bits``): the skb the kernel builds with the frags attached.
        In machine code (:func:`pyxdp.net.skbuff_native.bufs_copy_bits`) where the frags
        lie in the head's memory, as a driver builds them; any other through
        :func:`pyxdp.net.xdp_mem.xdp_buffs_packets`."""
        from pyxdp.net.skbuff_native import bufs_copy_bits
        from pyxdp.net.xdp_mem import xdp_buffs_packets, xdp_frags_shinfo
        is_frame = (frames.kind[which] & KIND_FRAME) != 0
        rest: list[Any] = []
        for mem, pos, sh in xdp_frags_shinfo(frames.pfn[which], is_frame, memmap=self.memmap):
            w = which[pos]
            done = np.zeros(len(w), np.uint8)
            if mem.pages.shape[1] == PAGE_SIZE:
                bufs_copy_bits(mem.pages, mem.pfn_base, mem.local(frames.pfn[w]),
                               frames.data[w], sh - mem.local(frames.pfn[w]) * PAGE_SIZE,
                               frames.length[w], data, w, done)
            rest.append(w[done == 0])
        left = np.concatenate(rest) if rest else np.zeros(0, np.int64)
        if left.size:
            sub = np.zeros((left.size, data.shape[1]), np.uint8)
            xdp_buffs_packets(frames.pfn[left], (frames.kind[left] & KIND_FRAME) != 0,
                              frames.data[left], frames.length[left], sub, memmap=self.memmap)
            data[left] = sub

    def drop_frames(self, frames: Frames, rq: NetdevRxQueue | None, *, direct: bool,
                    frames_direct: bool | None = None) -> None:
        """Free frames: pool pages of ``rq`` recycled (directly in its NAPI poll),
        xdp_frames returned through their memory model (``xdp_return_frame_rx_napi``
        with ``direct``, or as ``frames_direct`` says when given:
        ``xdp_return_frame`` for False)."""
        if not len(frames):
            return
        skb = (frames.kind & KIND_SKB) != 0
        if skb.any():  # skbs queued here and never polled: consume_skb, frags and head
            from pyxdp.net.xdp_mem import xdp_buffs_pages
            self.memmap.system.put_pages(xdp_buffs_pages(
                frames.pfn[skb], ((frames.kind[skb] & KIND_FRAGS) != 0).astype(np.int64),
                memmap=self.memmap))
            frames = frames.select(~skb)
            if not len(frames):
                return
        own = (frames.kind & KIND_FRAME) == 0
        if own.any():
            assert rq is not None
            if rq.xsk is not None:  # a zero-copy AF_XDP queue: xsk_buff_free
                from pyxdp.net.xsk_buff_pool import xsk_free_frames
                xsk_free_frames(self, rq, frames.select(own), direct=direct)
            elif (frames.kind[own] & KIND_FRAGS).any():  # each buffer's frags, then its head
                from pyxdp.net.xdp_mem import xdp_buffs_pages
                flags = (frames.kind[own] & KIND_FRAGS) != 0
                rq.pool.put_pages(xdp_buffs_pages(frames.pfn[own], flags.astype(np.int64),
                                                  memmap=self.memmap), allow_direct=direct)
            else:
                rq.pool.put_pages(frames.pfn[own], allow_direct=direct)
        if not own.all():
            from pyxdp.net.xdp_mem import xdp_return_frames_rx_napi
            pf = frames.pfn[~own]
            if direct if frames_direct is None else frames_direct:
                xdp_return_frames_rx_napi(pf, memmap=self.memmap)
            else:
                xdp_return_frames(pf, memmap=self.memmap)

    # -- teardown --------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def live(self, op: str) -> None:
        """Refuse ``op`` on a closed host: its devices are gone (ENODEV), as a deleted
        network namespace's."""
        if self._closed:
            raise LinkError(errno.ENODEV, f"host {self.name!r} is closed", op=op)

    def close(self, check: bool = True) -> None:
        """Stop workers, free every queued frame, destroy the pools; with ``check``,
        raise :class:`~pyxdp.net.page_pool.PageAccountingError` if any page leaked."""
        if self._closed:
            return
        self._closed = True
        self.reap_cpumaps()
        for rt in list(self.cpumaps.values()):
            rt.stop()
        self.cpumaps.clear()
        for sock in list(self.backend.xsks.values()):  # before their devices go
            sock.netdev_unregister()  # type: ignore[attr-defined]
        for dev in self.devices.values():
            dev._close()
        for coll in self._collections:
            coll.close()
        if check:
            self.memmap.check()

    def check_memory(self) -> None:
        """Raise unless every page is where it should be (none leaked, none twice)."""
        self.memmap.check()

    def device_info(self) -> list[dict[str, Any]]:
        return [{"ifindex": d.ifindex, "name": d.name, "kind": d.kind, "mtu": d.mtu,
                 "up": d.up, **d.xdp_query(), "rx_queues": len(d.rx)}
                for d in self.devices.values()]

