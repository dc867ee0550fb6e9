"""``struct xdp_buff`` and the packet-buffer rules of ``include/net/xdp.h`` and
``net/core/filter.c`` (the ``bpf_xdp_adjust_*`` and ``bpf_xdp_*_bytes`` helpers).

A buffer is one frame (``frame_sz`` bytes, normally a 4096-byte page) whose
last 320 bytes are reserved for ``skb_shared_info``; ``data_hard_start`` is
offset 0, and ``data_meta``/``data``/``data_end`` are offsets into it. Bytes
beyond the linear part live in *frags* (pages of up to 4096 bytes), as the
kernel's multi-buffer XDP keeps them. The program sees fake addresses
``PKT_BASE + offset``; the packet region it may touch is
``[data_meta, data_end)`` (``[data, data_end)`` when metadata is unsupported).

Simplified: there is no ``skb_shared_info`` struct in the tailroom (frags
are Python objects beside the frame) and no per-frag page offset (frags start
at offset 0 of their page, as BPF_PROG_TEST_RUN builds them).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field

from pyxdp.vm.memory import Region

__all__ = [
    "ETH_HLEN",
    "PKT_BASE",
    "SKB_SHARED_INFO_SIZE",
    "XDP_FRAME_SIZE",
    "XDP_PACKET_HEADROOM",
    "RxQueue",
    "XdpBuff",
]

ETH_HLEN = 14
PAGE_SIZE = 4096
XDP_PACKET_HEADROOM = 256
SKB_SHARED_INFO_SIZE = 320  # tailroom the kernel reserves at the end of each frame
XDP_FRAME_SIZE = 40  # sizeof(struct xdp_frame): the floor for adjust_head/adjust_meta
MAX_SKB_FRAGS = 17
ENOTSUPP = 524  # kernel-internal errno returned by bpf_xdp_adjust_meta

# Fake address of data_hard_start for the packet being processed.
PKT_BASE = 0x0000_3000_0000_0000
# Fake address of the xdp_md context (programs can only load its fields).
CTX_BASE = 0x0000_4000_0000_0000

XDP_FLAGS_HAS_FRAGS = 1 << 0


@dataclass
class RxQueue:
    """``struct xdp_rxq_info``: where the packet came in."""

    ifindex: int = 1
    queue_index: int = 0
    frag_size: int = PAGE_SIZE


@dataclass(eq=False)
class XdpBuff:
    """One packet as an XDP program sees it (offsets into ``frame``)."""

    frame: bytearray
    data: int
    data_end: int
    data_meta: int
    frame_sz: int
    rxq: RxQueue = field(default_factory=RxQueue)
    egress_ifindex: int = 0
    frags: list[bytearray] = field(default_factory=list)
    region: Region = field(init=False)

    def __post_init__(self) -> None:
        self.region = Region("packet", PKT_BASE, bytearray(0))
        self.sync_region()

    @classmethod
    def prepare(cls, payload: bytes, *, headroom: int = XDP_PACKET_HEADROOM,
                meta_len: int = 0, meta_valid: bool = True, frame_sz: int = PAGE_SIZE,
                rxq: RxQueue | None = None) -> XdpBuff:
        """``xdp_prepare_buff``: ``payload`` = metadata (``meta_len`` bytes) + packet."""
        frame = bytearray(frame_sz)
        frame[headroom:headroom + len(payload)] = payload
        data = headroom + meta_len
        meta = headroom if meta_valid else data + 1
        return cls(frame, data, headroom + len(payload), meta, frame_sz, rxq or RxQueue())

    # -- derived -------------------------------------------------------------------
    @property
    def data_hard_end(self) -> int:
        return self.frame_sz - SKB_SHARED_INFO_SIZE

    @property
    def meta_supported(self) -> bool:
        return self.data_meta <= self.data

    @property
    def metalen(self) -> int:
        return self.data - self.data_meta if self.meta_supported else 0

    @property
    def frags_size(self) -> int:
        return sum(len(f) for f in self.frags)

    @property
    def has_frags(self) -> bool:
        return bool(self.frags)

    def buff_len(self) -> int:
        """``xdp_get_buff_len``: linear length plus frags."""
        return self.data_end - self.data + self.frags_size

    def packet(self) -> bytes:
        """The whole packet (linear part and frags), without metadata."""
        return bytes(self.frame[self.data:self.data_end]) + b"".join(self.frags)

    def metadata(self) -> bytes:
        return bytes(self.frame[self.data_meta:self.data]) if self.meta_supported else b""

    def sync_region(self) -> None:
        """Point the program-visible packet region at ``[data_meta, data_end)``."""
        start = self.data_meta if self.meta_supported else self.data
        r = self.region
        r.base = PKT_BASE + start
        r.buf = memoryview(self.frame)[start:self.data_end]
        r.size = self.data_end - start

    def ctx_pointers(self) -> tuple[int, int, int]:
        """The 64-bit values of ``data``, ``data_end``, ``data_meta`` as the program sees them."""
        return PKT_BASE + self.data, PKT_BASE + self.data_end, PKT_BASE + self.data_meta

    # -- helpers (net/core/filter.c) -------------------------------------------------
    def adjust_head(self, offset: int) -> int:
        """``bpf_xdp_adjust_head``: 0 or ``-EINVAL``."""
        metalen = self.metalen
        data_start = XDP_FRAME_SIZE + metalen
        new = self.data + offset
        if new < data_start or new > self.data_end - ETH_HLEN:
            return -errno.EINVAL
        if metalen:
            self.frame[self.data_meta + offset:self.data_meta + offset + metalen] = \
                self.frame[self.data_meta:self.data]
        self.data_meta += offset
        self.data = new
        self.sync_region()
        return 0

    def adjust_meta(self, offset: int) -> int:
        """``bpf_xdp_adjust_meta``: 0, ``-ENOTSUPP``, ``-EINVAL`` or ``-EACCES``."""
        if not self.meta_supported:
            return -ENOTSUPP
        meta = self.data_meta + offset
        if meta < XDP_FRAME_SIZE or meta > self.data:
            return -errno.EINVAL
        metalen = self.data - meta
        if metalen % 4 or metalen > 255:
            return -errno.EACCES
        self.data_meta = meta
        self.sync_region()
        return 0

    def adjust_tail(self, offset: int) -> int:
        """``bpf_xdp_adjust_tail``: 0 or a negative errno."""
        if self.has_frags:
            return self._frags_shrink_tail(-offset) if offset < 0 \
                else self._frags_increase_tail(offset)
        new_end = self.data_end + offset
        if new_end > self.data_hard_end or new_end < self.data + ETH_HLEN:
            return -errno.EINVAL
        if offset > 0:
            self.frame[self.data_end:new_end] = bytes(offset)  # grown area is zeroed
        self.data_end = new_end
        self.sync_region()
        return 0

    def _frags_increase_tail(self, offset: int) -> int:
        frag_size = self.rxq.frag_size
        if frag_size == 0 or frag_size > self.frame_sz:
            return -errno.EOPNOTSUPP
        last = self.frags[-1]
        if offset > frag_size - len(last):
            return -errno.EINVAL
        last.extend(bytes(offset))
        return 0

    def _frags_shrink_tail(self, shrink: int) -> int:
        if shrink > self.buff_len() - ETH_HLEN:
            return -errno.EINVAL
        while self.frags and shrink > 0:
            last = self.frags[-1]
            cut = min(shrink, len(last))
            del last[len(last) - cut:]
            shrink -= cut
            if not last:
                self.frags.pop()
        if not self.frags and shrink:
            self.data_end -= shrink
            self.sync_region()
        return 0

    def _span(self, offset: int, length: int) -> int:
        if offset > 0xFFFF or length > 0xFFFF or offset < 0 or length < 0:
            return -errno.EFAULT
        if offset + length > self.buff_len():
            return -errno.EINVAL
        return 0

    def load_bytes(self, offset: int, length: int) -> bytes | int:
        """``bpf_xdp_load_bytes``: the bytes, or a negative errno."""
        err = self._span(offset, length)
        if err:
            return err
        linear = self.data_end - self.data
        if offset + length <= linear:
            return bytes(self.frame[self.data + offset:self.data + offset + length])
        return self.packet()[offset:offset + length]

    def store_bytes(self, offset: int, data: bytes) -> int:
        """``bpf_xdp_store_bytes``: 0 or a negative errno; may span frags."""
        err = self._span(offset, len(data))
        if err:
            return err
        linear = self.data_end - self.data
        pos = 0
        if offset < linear:
            n = min(len(data), linear - offset)
            self.frame[self.data + offset:self.data + offset + n] = data[:n]
            pos = n
        off = max(0, offset - linear)
        for frag in self.frags:
            if pos >= len(data):
                break
            if off >= len(frag):
                off -= len(frag)
                continue
            n = min(len(frag) - off, len(data) - pos)
            frag[off:off + n] = data[pos:pos + n]
            pos += n
            off = 0
        return 0
