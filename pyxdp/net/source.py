"""Packet sources and sinks of the datapath: a NIC's traffic generator, pcap
replay (:meth:`TrafficGenerator.from_capture`), a collector and a pcapng writer
on a device's wire.

:class:`TrafficGenerator` stands for the traffic arriving on a NIC queue: a
deterministic set of frames (flows, sizes, protocols, VLAN, IPv6, from a seed;
see :func:`pyxdp.net.packets.batch`) or given packets (a pcap), written into
page pool pages as the NIC's DMA would, a batch at a time, when a NAPI poll
finds the ring short - endless, or ``count`` frames. A NIC's wire sinks get
what it transmits: :class:`Collector` keeps it, :class:`PcapngSink` writes it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from pyxdp.args import checked
from pyxdp.net.packets import batch as packet_batch
from pyxdp.net.record import Alias, Field, Record
from pyxdp.net.stack import SkbBatch


class _Dev(Protocol):
    """What a source or a sink needs of a :class:`~pyxdp.net.netdevice.NetDevice` (a
    protocol, so that this module stays below the device model)."""

    name: str
    ifindex: int

    def _dma(self, rq: Any, batch: SkbBatch) -> int: ...


class _Ring(Protocol):
    @property
    def free(self) -> int: ...


class _RxQueue(Protocol):
    """What :meth:`TrafficGenerator.fill` needs of a ``NetdevRxQueue``."""

    @property
    def dev(self) -> _Dev: ...

    @property
    def ring(self) -> _Ring: ...

__all__ = ["Collector", "GenState", "PcapngSink", "TrafficGenerator"]


class GenState(Record):
    """A generator's position, shared in place with the native poll loop: the next
    template, frames produced, and the limit (-1: endless)."""

    pos = Field()
    produced = Field()
    limit = Field()


_I64_MAX = (1 << 63) - 1  # GenState.limit is an int64


class TrafficGenerator:
    """Frames for a NIC rx queue: ``flows``/``sizes``/``protos``/``vlan``/``ipv6``/
    ``seed`` as :func:`pyxdp.net.packets.traffic`, or ``packets`` given; cycled
    until ``count`` frames were produced (``None``: endless)."""

    @checked(count=(0, _I64_MAX), period=(1, 1 << 20))
    def __init__(self, *, packets: Sequence[bytes] | None = None, flows: int = 1,
                 sizes: Sequence[int] = (64,), protos: Sequence[str] = ("udp",),
                 vlan: int | Sequence[int] | None = None, ipv6: bool = False, seed: int = 0,
                 count: int | None = None, period: int = 4096) -> None:
        if packets is not None:
            if not packets:
                raise ValueError("packets must not be empty")
            self.batch = SkbBatch.from_packets(list(packets), 0)
        else:
            buf, lens = packet_batch(period, flows, sizes, protos, vlan, ipv6, seed)
            data = buf.reshape(period, -1)
            self.batch = SkbBatch(data, lens.astype(np.int64), np.zeros(period, np.int64),
                                  np.zeros(period, np.int64), [b""] * period)
        self.state = GenState(limit=-1 if count is None else count)
        # The longest frame (the native poll loop checks it against its buffers).
        self.max_len = int(self.batch.length.max()) if len(self.batch.length) else 0

    @classmethod
    def from_capture(cls, path: str | Path, *, count: int | None = None,
                     loop: bool = False) -> TrafficGenerator:
        """Replay a pcap or pcapng capture: its packets in order, once (``count``
        defaults to the capture's length) or, with ``loop``, over and over."""
        from pyxdp.net.pcap import read_capture
        packets = [bytes(p.data) for p in read_capture(path)]
        if not packets:
            raise ValueError(f"{path}: the capture holds no packets")
        if count is None and not loop:
            count = len(packets)
        return cls(packets=packets, count=count)

    @property
    def count(self) -> int | None:
        """Frames to produce in all (``None``: endless)."""
        lim: int = self.state.limit
        return None if lim < 0 else lim

    @count.setter
    def count(self, v: int | None) -> None:
        self.state.limit = -1 if v is None else v

    produced = Alias(GenState, "produced")
    _pos = Alias(GenState, "pos")

    @property
    def active(self) -> bool:
        return self.count is None or self.produced < self.count

    def fill(self, rq: _RxQueue, n: int) -> int:
        """Put up to ``n`` frames into ``rq`` (fewer when the ring or pool is full)."""
        if self.count is not None:
            n = min(n, self.count - self.produced)
        n = min(n, rq.ring.free)
        if n <= 0:
            return 0
        total = len(self.batch)
        idx = (self._pos + np.arange(n)) % total
        b = self.batch
        part = SkbBatch(b.data[idx], b.length[idx], b.ifindex[idx], b.queue[idx], [])
        got = rq.dev._dma(rq, part)
        self._pos = (self._pos + got) % total
        self.produced += got
        return got


class Collector:
    """A wire sink keeping every transmitted frame, per device: ``frames[name]``."""

    def __init__(self) -> None:
        self.frames: dict[str, list[bytes]] = {}
        self.count = 0

    def __call__(self, dev: _Dev, batch: SkbBatch) -> None:
        self.frames.setdefault(dev.name, []).extend(batch.packets())
        self.count += len(batch)


class PcapngSink:
    """A wire sink writing transmitted frames to a pcapng file (one interface per device)."""

    def __init__(self, path: str | Path) -> None:
        from pyxdp.net.pcap import PcapngWriter
        self._w = PcapngWriter(path)
        self._ifaces: dict[int, int] = {}

    def __call__(self, dev: _Dev, batch: SkbBatch) -> None:
        iface = self._ifaces.get(dev.ifindex)
        if iface is None:
            iface = self._ifaces[dev.ifindex] = self._w.add_interface(dev.name)
        now = time.time_ns()
        for p in batch.packets():
            self._w.write(p, now, interface=iface)

    def close(self) -> None:
        self._w.close()
