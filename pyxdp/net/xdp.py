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
at offset 0 of their page, as BPF_PROG_TEST_RUN and pyxdp devices build
them). The datapath keeps a device frame's frags in its page memory at the
kernel's offsets and lends them to an ``XdpBuff`` for one run
(:func:`pyxdp.net.prog.run_xdp`).

The ``XdpBuff`` methods are the reference path of the packet helpers. Their
native twins (``*_fn`` at the end of this module: LLVM IR the JIT inlines,
registered under their helper ids by :mod:`pyxdp.net.filter`) do the common
case - no frags - on the same memory: the run context's ``x_frame`` is the
frame buffer and ``x_data``/``x_data_end``/``x_data_meta`` the same offsets
into it as these fields; anything else they leave to the Python helper.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import Any

from pyxdp.errors import ENOTSUPP
from pyxdp.uapi.bpf import ETH_HLEN, XDP_PACKET_HEADROOM
from pyxdp.vm.jit.abi import SLOW, Natives
from pyxdp.vm.jit.ir import Text, ret_if, s32
from pyxdp.vm.jit.natives import xdp_guard
from pyxdp.vm.memory import Region

__all__ = [
    "ETH_HLEN",
    "PKT_BASE",
    "SKB_SHARED_INFO_SIZE",
    "SYSCALL_CTX_BASE",
    "XDP_FRAME_SIZE",
    "XDP_PACKET_HEADROOM",
    "RxQueue",
    "XdpBuff",
    "adjust_head_fn",
    "adjust_meta_fn",
    "adjust_tail_fn",
    "buff_len_fn",
    "load_bytes_fn",
    "store_bytes_fn",
]

PAGE_SIZE = 4096
SKB_SHARED_INFO_SIZE = 320  # tailroom the kernel reserves at the end of each frame
XDP_FRAME_SIZE = 40  # sizeof(struct xdp_frame): the floor for adjust_head/adjust_meta
MAX_SKB_FRAGS = 17

# Fake address of data_hard_start for the packet being processed.
PKT_BASE = 0x0000_3000_0000_0000
# Fake address of the xdp_md context (programs can only load its fields).
CTX_BASE = 0x0000_4000_0000_0000
# Fake address of a SEC("syscall") program's context (bytes it reads and writes).
SYSCALL_CTX_BASE = 0x0000_4800_0000_0000

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
    # The image of the kernel's structs once bpf_cast_to_kern_ctx made one
    # (pyxdp.net.xdp_kern_ctx.KernCtx, which imports this module): kept in step here.
    kern: Any = field(default=None, init=False)

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
        """``xdp_get_buff_len``: linear length plus frags (reference path of
        :func:`buff_len_fn`)."""
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
        if self.kern is not None:
            self.kern.sync(self)

    def ctx_pointers(self) -> tuple[int, int, int]:
        """The 64-bit values of ``data``, ``data_end``, ``data_meta`` as the program sees them."""
        return PKT_BASE + self.data, PKT_BASE + self.data_end, PKT_BASE + self.data_meta

    # -- helpers (net/core/filter.c) -------------------------------------------------
    def adjust_head(self, offset: int) -> int:
        """``bpf_xdp_adjust_head``: 0 or ``-EINVAL`` (reference path of :func:`adjust_head_fn`)."""
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
        """``bpf_xdp_adjust_meta``: 0, ``-ENOTSUPP``, ``-EINVAL`` or ``-EACCES`` (reference
        path of :func:`adjust_meta_fn`)."""
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
        """``bpf_xdp_adjust_tail``: 0 or a negative errno (reference path of
        :func:`adjust_tail_fn`)."""
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

    def pull_data(self, length: int) -> int:
        """``bpf_xdp_pull_data``: make the first ``length`` bytes of the packet linear,
        moving bytes from the front of the frags to the end of the linear part (data and
        metadata shifted down into the headroom, above the ``xdp_frame``, when the
        tailroom is short); frags emptied are released. 0 or ``-EINVAL``."""
        linear = self.data_end - self.data
        if length <= linear:
            return 0
        if length > self.buff_len():
            return -errno.EINVAL
        start = self.data_meta if self.meta_supported else self.data
        headroom = start - XDP_FRAME_SIZE
        tailroom = self.data_hard_end - self.data_end
        delta = length - linear
        if delta > tailroom + headroom:
            return -errno.EINVAL
        shift = delta - tailroom
        if shift > 0:
            self.frame[start - shift:self.data_end - shift] = self.frame[start:self.data_end]
            self.data_meta -= shift
            self.data -= shift
            self.data_end -= shift
        while delta:
            frag = self.frags[0]
            n = min(delta, len(frag))
            self.frame[self.data_end:self.data_end + n] = frag[:n]
            self.data_end += n
            delta -= n
            # A new object, not a resize: a slice may have mapped the old one.
            rest = frag[n:]
            if rest:
                self.frags[0] = rest
            else:
                del self.frags[0]
        self.sync_region()
        return 0

    def _span(self, offset: int, length: int) -> int:
        if offset > 0xFFFF or length > 0xFFFF or offset < 0 or length < 0:
            return -errno.EFAULT
        if offset + length > self.buff_len():
            return -errno.EINVAL
        return 0

    def load_bytes(self, offset: int, length: int) -> bytes | int:
        """``bpf_xdp_load_bytes``: the bytes, or a negative errno (reference path of
        :func:`load_bytes_fn`)."""
        err = self._span(offset, length)
        if err:
            return err
        linear = self.data_end - self.data
        if offset + length <= linear:
            return bytes(self.frame[self.data + offset:self.data + offset + length])
        return self.packet()[offset:offset + length]

    def store_bytes(self, offset: int, data: bytes) -> int:
        """``bpf_xdp_store_bytes``: 0 or a negative errno; may span frags (reference path
        of :func:`store_bytes_fn`)."""
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


# -- native twins of the helpers above (the JIT inlines them) -------------------------

def adjust_head_fn(natives: Natives) -> str:
    """``bpf_xdp_adjust_head``'s native twin: :meth:`XdpBuff.adjust_head` is the
    reference path; both move the same offsets into the same frame. SLOW outside a
    native XDP run."""
    f = Text()
    f.at("entry")
    xdp_guard(f, natives.ctx_base, False)
    off = s32(f, "%r2")
    data, end, meta = (f.cget("%ctx", n) for n in ("x_data", "x_data_end", "x_data_meta"))
    sup = f.ins(f"icmp ule i64 {meta}, {data}")
    metalen = f.ins(f"select i1 {sup}, i64 {f.ins(f'sub i64 {data}, {meta}')}, i64 0")
    new = f.ins(f"add i64 {data}, {off}")
    low = f.ins(f"icmp slt i64 {new}, {f.ins(f'add i64 {metalen}, {XDP_FRAME_SIZE}')}")
    high = f.ins(f"icmp sgt i64 {new}, {f.ins(f'sub i64 {end}, {ETH_HLEN}')}")
    ret_if(f, f.ins(f"or i1 {low}, {high}"), -errno.EINVAL)
    frame = f.cget("%ctx", "x_frame", "ptr")
    newmeta = f.ins(f"add i64 {meta}, {off}")
    f.memmove(f.gep(frame, newmeta), f.gep(frame, meta), metalen)
    f.cset("%ctx", "x_data_meta", newmeta)
    f.cset("%ctx", "x_data", new)
    f.do("call void @pkt(ptr %ctx)")
    f.do("ret i64 0")
    return f.text("define internal i64 @adjust_head(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def adjust_meta_fn(natives: Natives) -> str:
    """``bpf_xdp_adjust_meta``'s native twin (reference: :meth:`XdpBuff.adjust_meta`,
    same layout)."""
    f = Text()
    f.at("entry")
    xdp_guard(f, natives.ctx_base, False)
    data, meta = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_meta")
    ret_if(f, f.ins(f"icmp ugt i64 {meta}, {data}"), -ENOTSUPP)
    m = f.ins(f"add i64 {meta}, {s32(f, '%r2')}")
    low = f.ins(f"icmp slt i64 {m}, {XDP_FRAME_SIZE}")
    ret_if(f, f.ins(f"or i1 {low}, {f.ins(f'icmp sgt i64 {m}, {data}')}"), -errno.EINVAL)
    mlen = f.ins(f"sub i64 {data}, {m}")
    odd = f.ins(f"icmp ne i64 {f.ins(f'and i64 {mlen}, 3')}, 0")
    ret_if(f, f.ins(f"or i1 {odd}, {f.ins(f'icmp sgt i64 {mlen}, 255')}"), -errno.EACCES)
    f.cset("%ctx", "x_data_meta", m)
    f.do("call void @pkt(ptr %ctx)")
    f.do("ret i64 0")
    return f.text("define internal i64 @adjust_meta(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def adjust_tail_fn(natives: Natives) -> str:
    """``bpf_xdp_adjust_tail``'s native twin without frags (reference:
    :meth:`XdpBuff.adjust_tail`, same layout; a multi-buffer packet is SLOW)."""
    f = Text()
    f.at("entry")
    xdp_guard(f, natives.ctx_base, True)
    off = s32(f, "%r2")
    data, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
    new = f.ins(f"add i64 {end}, {off}")
    hard = f.ins(f"sub i64 {f.cget('%ctx', 'x_frame_sz')}, {SKB_SHARED_INFO_SIZE}")
    high = f.ins(f"icmp sgt i64 {new}, {hard}")
    low = f.ins(f"icmp slt i64 {new}, {f.ins(f'add i64 {data}, {ETH_HLEN}')}")
    ret_if(f, f.ins(f"or i1 {high}, {low}"), -errno.EINVAL)
    grow, done = f.label("grow"), f.label("done")
    f.cbr(f.ins(f"icmp sgt i64 {off}, 0"), grow, done)
    f.at(grow)
    f.memset(f.gep(f.cget("%ctx", "x_frame", "ptr"), end), off)
    f.br(done)
    f.at(done)
    f.cset("%ctx", "x_data_end", new)
    f.do("call void @pkt(ptr %ctx)")
    f.do("ret i64 0")
    return f.text("define internal i64 @adjust_tail(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def buff_len_fn(natives: Natives) -> str:
    """``xdp_get_buff_len``'s native twin without frags (reference: :meth:`XdpBuff.buff_len`,
    same layout)."""
    f = Text()
    f.at("entry")
    xdp_guard(f, natives.ctx_base, True)
    end, data = f.cget("%ctx", "x_data_end"), f.cget("%ctx", "x_data")
    f.do(f"ret i64 {f.ins(f'sub i64 {end}, {data}')}")
    return f.text("define internal i64 @buff_len(ptr %ctx, i64 %r1) nounwind")


def load_bytes_fn(natives: Natives) -> str:
    """``bpf_xdp_load_bytes``'s native twin, linear part only (reference:
    :meth:`XdpBuff.load_bytes` then ``vm.mem.write``, same layout)."""
    f = Text()
    f.at("entry")
    xdp_guard(f, natives.ctx_base, True)
    off = f.ins("and i64 %r2, 4294967295")
    n = f.ins("and i64 %r4, 4294967295")
    big = f.ins(f"or i1 {f.ins(f'icmp ugt i64 {off}, 65535')}, {f.ins(f'icmp ugt i64 {n}, 65535')}")
    ret_if(f, big, -errno.EFAULT)
    data, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
    over = f.ins(f"icmp ugt i64 {f.ins(f'add i64 {off}, {n}')}, {f.ins(f'sub i64 {end}, {data}')}")
    ret_if(f, over, -errno.EINVAL)
    ret_if(f, f.ins(f"icmp eq i64 {n}, 0"), 0)
    dst = f.ins(f"call ptr @translate(ptr %ctx, i64 %r3, i64 {n}, i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {dst}, null"), SLOW)
    f.cset("%ctx", "stack_dirty", "-1")  # the bytes may land in a stack frame
    src = f.gep(f.cget("%ctx", "x_frame", "ptr"), f.ins(f"add i64 {data}, {off}"))
    f.memmove(dst, src, n)
    f.do("ret i64 0")
    return f.text("define internal i64 @load_bytes(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                  "i64 %r4) nounwind")


def store_bytes_fn(natives: Natives) -> str:
    """``bpf_xdp_store_bytes``'s native twin, linear part only (reference: ``vm.mem.read``
    then :meth:`XdpBuff.store_bytes`, same layout)."""
    f = Text()
    f.at("entry")
    xdp_guard(f, natives.ctx_base, True)
    off = f.ins("and i64 %r2, 4294967295")
    n = f.ins("and i64 %r4, 4294967295")
    big = f.ins(f"or i1 {f.ins(f'icmp ugt i64 {n}, 65535')}, {f.ins(f'icmp ugt i64 {off}, 65535')}")
    ret_if(f, big, -errno.EFAULT)
    read, have = f.label("read"), f.label("have")
    nz = f.ins(f"icmp ne i64 {n}, 0")
    before = f.cur
    f.cbr(nz, read, have)
    f.at(read)
    src0 = f.ins(f"call ptr @translate(ptr %ctx, i64 %r3, i64 {n}, i1 false)")
    ret_if(f, f.ins(f"icmp eq ptr {src0}, null"), SLOW)
    last = f.cur
    f.br(have)
    f.at(have)
    src = f.ins(f"phi ptr [ null, %{before} ], [ {src0}, %{last} ]")
    data, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
    over = f.ins(f"icmp ugt i64 {f.ins(f'add i64 {off}, {n}')}, {f.ins(f'sub i64 {end}, {data}')}")
    ret_if(f, over, -errno.EINVAL)
    dst = f.gep(f.cget("%ctx", "x_frame", "ptr"), f.ins(f"add i64 {data}, {off}"))
    f.memmove(dst, src, n)
    f.do("ret i64 0")
    return f.text("define internal i64 @store_bytes(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                  "i64 %r4) nounwind")
