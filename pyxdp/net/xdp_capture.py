"""xdpdump's capture points on pyxdp's datapath: each frame before and after an XDP program.

What xdpdump's fentry (``entry``) and fexit (``exit``) programs see on Linux,
taken directly where pyxdp runs the program: a batch of received frames is
laid out as a NIC's rx ring lays them out (``XDP_PACKET_HEADROOM`` before the
data, the ``skb_shared_info`` tailroom after it, 4 KiB pages for frames that
fit), copied at ``entry``, run through the program in one
:meth:`~pyxdp.net.prog.XdpProg.run_batch` (consuming the redirect state per
frame, as the datapath's ``xdp_do_redirect`` does), and read back at ``exit``
with the verdict and, after ``XDP_REDIRECT``, the target
(``bpf_redirect_info``: an ifindex, or a map and key). A pcap-filter
expression (:class:`~pyxdp.net.pcap_filter.PacketFilter`) selects the frames
kept at each point, by the bytes seen at that point, as xdpdump's filter does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pyxdp.errors import PyxdpError
from pyxdp.net.pcap_filter import PacketFilter
from pyxdp.net.prog import XdpProg
from pyxdp.net.xdp import SKB_SHARED_INFO_SIZE, XDP_PACKET_HEADROOM
from pyxdp.uapi.bpf import BpfMapType, XdpAction

__all__ = ["CAPTURE_POINTS", "Captured", "DatapathCapture", "redirect_text"]

CAPTURE_POINTS = ("entry", "exit")
_PAGE = 4096


@dataclass(frozen=True, slots=True)
class Captured:
    """One frame at one point; ``verdict`` and ``redirect`` only at exit."""

    point: str  # entry, exit, or "" for a frame that reached the stack (no program point)
    ts_ns: int
    data: bytes  # cut to the snap length
    orig_len: int
    verdict: int | None = None
    redirect: str | None = None


def redirect_text(map_type: int, map_id: int, index: int) -> str:
    """Where ``XDP_REDIRECT`` sends the frame, as ``bpf_redirect_info`` says (``bpf_redirect``
    leaves no map type, and ``map_id`` INT_MAX, beside the ifindex)."""
    if map_type == BpfMapType.BPF_MAP_TYPE_UNSPEC:
        return f"redirect to ifindex {index}"
    name = (BpfMapType(map_type).name if map_type in BpfMapType._value2member_map_
            else f"map type {map_type}")
    return f"redirect to {name} id {map_id} key {index}"


class DatapathCapture:
    """Runs ``prog`` over received frames and records them at ``points``.

    ``ifindex``/``queue`` are the xdp_md fields the program sees; ``snaplen``
    cuts the recorded bytes (the verdict still comes from the whole frame).
    """

    def __init__(self, prog: XdpProg, *, points: Sequence[str] = ("exit",),
                 filter: PacketFilter | None = None, snaplen: int = 262144,
                 ifindex: int = 1, queue: int = 0) -> None:
        bad = [p for p in points if p not in CAPTURE_POINTS]
        if bad or not points:
            raise PyxdpError(f"capture points are entry and/or exit, not {','.join(bad)!r}")
        self.prog = prog
        self.points = tuple(points)
        self.filter = filter
        self.snaplen = snaplen
        self.ifindex = ifindex
        self.queue = queue

    def _keep(self, frames: list[bytes]) -> list[bool]:
        if self.filter is None:
            return [True] * len(frames)
        return [bool(v) for v in self.filter.keep(frames)]

    def run(self, packets: Sequence[bytes], ts_ns: Sequence[int]) -> list[Captured]:
        """The records of one batch, in arrival order (entry before exit per frame)."""
        n = len(packets)
        if n == 0:
            return []
        lens = np.fromiter((len(p) for p in packets), np.int64, n)
        need = XDP_PACKET_HEADROOM + int(lens.max()) + SKB_SHARED_INFO_SIZE
        row = _PAGE if need <= _PAGE else -(-need // 64) * 64
        frames = np.zeros((n, row), np.uint8)
        flat = frames.reshape(-1)
        for i, p in enumerate(packets):  # one copy per frame, as a NIC's DMA would
            at = i * row + XDP_PACKET_HEADROOM
            flat[at:at + len(p)] = np.frombuffer(p, np.uint8)
        res = self.prog.run_batch(frames, np.full(n, XDP_PACKET_HEADROOM, np.int64), lens,
                                  rx_queue=self.queue, ingress_ifindex=self.ifindex,
                                  consume_redirect=True)
        out: dict[str, list[Captured | None]] = {}
        if "entry" in self.points:
            keep = self._keep(list(packets))
            out["entry"] = [Captured("entry", ts_ns[i], bytes(packets[i][:self.snaplen]),
                                     len(packets[i])) if keep[i] else None for i in range(n)]
        if "exit" in self.points:
            after = [frames[i, int(res.data_off[i]):int(res.data_off[i] + res.data_len[i])]
                     .tobytes() for i in range(n)]
            keep = self._keep(after)
            rows: list[Captured | None] = []
            for i in range(n):
                if not keep[i]:
                    rows.append(None)
                    continue
                verdict = int(res.action[i])
                where = (redirect_text(int(res.redirect_map_type[i]),
                                       int(res.redirect_map_id[i]),
                                       int(res.redirect_index[i]))
                         if verdict == XdpAction.XDP_REDIRECT else None)
                rows.append(Captured("exit", ts_ns[i], after[i][:self.snaplen], len(after[i]),
                                     verdict, where))
            out["exit"] = rows
        return [c for i in range(n) for p in self.points if (c := out[p][i]) is not None]
