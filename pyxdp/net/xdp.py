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
are objects beside the frame: bytearrays, or views of their pages) and no
per-frag page offset (a frag's bytes start where its object starts). The
datapath keeps a device frame's frags in its page memory at the kernel's
offsets; :func:`pyxdp.net.prog.run_xdp` lists a batch's frags in a frag table
(:class:`FragTable`: per frame nr_frags, xdp_frags_size and each frag's host
address and length) and writes the table back into the ``skb_shared_info``
after the run. An ``XdpBuff`` over such a frame has views of the frag pages.

The ``XdpBuff`` methods are the reference path of the packet helpers. Their
native twins (``*_fn`` at the end of this module: LLVM IR the JIT inlines,
registered under their helper ids by :mod:`pyxdp.net.filter`) work on the same
memory: the run context's ``x_frame`` is the frame buffer,
``x_data``/``x_data_end``/``x_data_meta`` the same offsets into it as these
fields, ``x_frags`` the frame's frag table row (0 without frags). A single
JIT run over an ``XdpBuff`` with bytearray frags (test_run's) makes a one-row
table over copies of them; one whose frags are views it did not make (a
Python-level tail call inside a batch) leaves them to the Python helpers.
"""

from __future__ import annotations

import ctypes
import errno
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from pyxdp.errors import ENOTSUPP, HelperFault
from pyxdp.uapi.bpf import ETH_HLEN, XDP_PACKET_HEADROOM
from pyxdp.vm.jit.abi import (
    FRAG_ENTRY,
    FRAG_FRAG_SIZE,
    FRAG_HEAD,
    FRAG_NR,
    FRAG_SIZE,
    FRAG_WORDS,
    SLOW,
    Natives,
)
from pyxdp.vm.jit.ir import LIKELY, Text, ret_if, s32
from pyxdp.vm.jit.natives import register_shared, xdp_guard
from pyxdp.vm.memory import Region

__all__ = [
    "ETH_HLEN",
    "PKT_BASE",
    "SKB_SHARED_INFO_SIZE",
    "SYSCALL_CTX_BASE",
    "XDP_FRAME_SIZE",
    "XDP_PACKET_HEADROOM",
    "FragTable",
    "RxQueue",
    "XdpBuff",
    "adjust_head_fn",
    "adjust_meta_fn",
    "adjust_tail_fn",
    "buff_len_fn",
    "frag_view",
    "frags_of_row",
    "frags_to_row",
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
            if offset >= 0:
                return self._frags_increase_tail(offset)
            # Linux negates the int offset: -INT_MIN wraps to INT_MIN, a shrink of a
            # negative size that passes the length check and cuts nothing (returns 0).
            return self._frags_shrink_tail(offset if offset == -(1 << 31) else -offset)
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
        if isinstance(last, memoryview):  # a view of a page (frag_view): into its room
            whole = memoryview(last.obj).cast("B")
            start = ctypes.addressof(ctypes.c_char.from_buffer(last)) - ctypes.addressof(
                last.obj) if len(last) else 0
            if start + len(last) + offset > len(whole):
                return -errno.EINVAL
            whole[start + len(last):start + len(last) + offset] = bytes(offset)
            self.frags[-1] = cast(bytearray, whole[start:start + len(last) + offset])
            return 0
        last.extend(bytes(offset))
        return 0

    def _frags_shrink_tail(self, shrink: int) -> int:
        if shrink > self.buff_len() - ETH_HLEN:
            return -errno.EINVAL
        while self.frags and shrink > 0:
            last = self.frags[-1]
            cut = min(shrink, len(last))
            # A new object, not a resize: a frag may be a view of a page (a JIT batch's).
            self.frags[-1] = last = last[:len(last) - cut]
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


# -- a batch's frag table (pyxdp.vm.jit.abi.FRAG_WORDS per frame) ------------------------

U64 = npt.NDArray[np.uint64]


@dataclass(eq=False)
class FragTable:
    """A batch's frag table: ``rows`` (one per frame, ``FRAG_WORDS`` u64 each) as native
    code reads and leaves them, ``bounds`` (frame, frag, 2) the host address range of
    each frag's page when the batch began."""

    rows: U64
    bounds: U64

    def row_addr(self, i: int) -> int:
        return int(self.rows.ctypes.data) + 8 * FRAG_WORDS * i

    def consistent(self) -> bool:
        """Each row lists at most MAX_FRAGS frags, frag k inside the page range
        ``bounds`` gives it (native code reaches the frags through these addresses)."""
        nr = self.rows[:, FRAG_NR]
        if int(nr.max()) > MAX_SKB_FRAGS:
            return False
        ent = self.rows[:, FRAG_HEAD:FRAG_HEAD + FRAG_ENTRY * MAX_SKB_FRAGS].reshape(
            -1, MAX_SKB_FRAGS, FRAG_ENTRY)
        addr, ln = ent[:, :, 0], ent[:, :, 1]
        live = np.arange(MAX_SKB_FRAGS) < nr[:, None].astype(np.int64)
        b = self.bounds
        inside = (b[:, :, 0] != 0) & (b[:, :, 0] <= addr) & (ln <= b[:, :, 1] - addr) & (
            addr <= b[:, :, 1])
        return bool((inside | ~live).all())


def frag_view(addr: int, n: int, room: int) -> bytearray:
    """``n`` bytes at host address ``addr`` (a frag in a page, ``room`` bytes to the
    page's end) as a writable view; typed as the bytearray frags it stands in for
    (slicing, reading, writing in place; :meth:`XdpBuff.adjust_tail` grows it into
    the room)."""
    whole = memoryview((ctypes.c_char * max(room, n)).from_address(addr)).cast("B")
    return cast(bytearray, whole[:n])


def frags_of_row(row: U64, bounds: U64, cache: dict[tuple[int, int], bytearray]
                 ) -> list[bytearray]:
    """The frags a frag table row lists, as views of their pages (one view per address
    and length in ``cache``: a dynptr slice mapped it, and it stays the same object)."""
    out = []
    for k in range(int(row[FRAG_NR])):
        at = FRAG_HEAD + FRAG_ENTRY * k
        key = (int(row[at]), int(row[at + 1]))
        v = cache.get(key)
        if v is None:
            end = int(bounds[int(row[at + 2]), 1]) if int(row[at + 2]) < len(bounds) else 0
            v = cache[key] = frag_view(key[0], key[1], end - key[0])
        out.append(v)
    return out


def frags_to_row(row: U64, bounds: U64, frags: list[bytearray]) -> None:
    """Write the frags a Python helper left into their frag table row: each must lie in
    the page of one of the frame's frags when the run began (``bounds``: per frag its
    page's first and end host address), in their order - a helper may cut frags
    (``adjust_tail``) or take bytes off their front (``bpf_xdp_pull_data``), never
    place one elsewhere."""
    first = 0
    for k, frag in enumerate(frags):
        if len(frag):
            addr = ctypes.addressof(ctypes.c_char.from_buffer(frag))
        else:  # an empty frag (a driver's) has no address of its own: its page's
            addr = int(bounds[min(first, len(bounds) - 1), 0])
        hit = np.flatnonzero((bounds[:, 0] <= addr) & (addr + len(frag) <= bounds[:, 1]))
        hit = hit[hit >= first]
        if not hit.size:
            raise HelperFault("a helper left a frag outside the frame's frag pages")
        first = int(hit[0]) + 1
        at = FRAG_HEAD + FRAG_ENTRY * k
        row[at:at + 3] = (addr, len(frag), hit[0])
    row[FRAG_NR] = len(frags)
    row[FRAG_SIZE] = sum(len(f) for f in frags)


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


def _frags_size(f: Text) -> str:
    """``xdp_frags_size`` of the run's buffer: its frag table row's word (0 without frags;
    the caller's guard has sent Python-held frags to the Python helper)."""
    row = f.cget("%ctx", "x_frags")
    before = f.cur
    has, join = f.label("fs"), f.label("fsj")
    f.cbr(f.ins(f"icmp ne i64 {row}, 0"), has, join)
    f.at(has)
    size = f.word(f.ins(f"inttoptr i64 {row} to ptr"), FRAG_SIZE, "i64", "")
    f.br(join)
    f.at(join)
    return f.ins(f"phi i64 [ {size}, %{has} ], [ 0, %{before} ]")


def _frag_at(f: Text, row: str, k: str) -> str:
    """Frag ``k``'s entry (host address, length, first index) in the frag table row."""
    return f.gep(row, f.ins(f"add i64 {f.ins(f'mul i64 {k}, {8 * FRAG_ENTRY}')}, {8 * FRAG_HEAD}"))


def xdp_copy_fn(natives: Natives) -> str:
    """``bpf_xdp_copy_buf``: ``len`` bytes at packet offset ``off`` out of the buffer into
    ``buf`` (``flush``: from ``buf`` into it), piece by piece - the linear part, then
    each frag of the run's frag table row - as :meth:`XdpBuff.load_bytes` and
    :meth:`XdpBuff.store_bytes` walk them. The caller has checked the range lies in
    the packet."""
    f = Text()
    f.at("entry")
    f.do("%kp = alloca i64, align 8")  # the piece: 0 the linear part, k frag k - 1
    f.do("%pp = alloca i64, align 8")  # where the piece starts in the packet
    f.do("%np = alloca i64, align 8")  # bytes left
    data, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
    lin_p = f.gep(f.cget("%ctx", "x_frame", "ptr"), data)
    lin = f.ins(f"sub i64 {end}, {data}")
    row = f.cget("%ctx", "x_frags", "ptr")
    nr = f.word(row, FRAG_NR, "i64", "")
    f.do("store i64 0, ptr %kp, align 8")
    f.do("store i64 0, ptr %pp, align 8")
    f.do("store i64 %len, ptr %np, align 8")
    f.br("loop")
    f.at("loop")
    k, poff, n = (f.ins(f"load i64, ptr {v}, align 8") for v in ("%kp", "%pp", "%np"))
    islin = f.ins(f"icmp eq i64 {k}, 0")
    j = f.ins(f"select i1 {islin}, i64 0, i64 {f.ins(f'sub i64 {k}, 1')}")
    ent = _frag_at(f, row, j)
    fp = f.ins(f"inttoptr i64 {f.word(ent, 0, 'i64', '')} to ptr")
    piece = f.ins(f"select i1 {islin}, ptr {lin_p}, ptr {fp}")
    plen = f.ins(f"select i1 {islin}, i64 {lin}, i64 {f.word(ent, 1, 'i64', '')}")
    done = f.ins(f"sub i64 %len, {n}")
    o = f.ins(f"add i64 %off, {done}")
    f.cbr(f.ins(f"icmp ult i64 {o}, {f.ins(f'add i64 {poff}, {plen}')}"), "copy", "next")
    f.at("copy")
    co = f.ins(f"sub i64 {o}, {poff}")
    avail = f.ins(f"sub i64 {plen}, {co}")
    cl = f.ins(f"select i1 {f.ins(f'icmp ult i64 {n}, {avail}')}, i64 {n}, i64 {avail}")
    p, b = f.gep(piece, co), f.gep("%buf", done)
    dst = f.ins(f"select i1 %flush, ptr {p}, ptr {b}")
    src = f.ins(f"select i1 %flush, ptr {b}, ptr {p}")
    f.memmove(dst, src, cl)
    f.do(f"store i64 {f.ins(f'sub i64 {n}, {cl}')}, ptr %np, align 8")
    f.br("next")
    f.at("next")
    left = f.ins("load i64, ptr %np, align 8")
    stop = f.ins(f"or i1 {f.ins(f'icmp eq i64 {left}, 0')}, {f.ins(f'icmp uge i64 {k}, {nr}')}")
    f.cbr(stop, "out", "adv")
    f.at("adv")
    f.do(f"store i64 {f.ins(f'add i64 {poff}, {plen}')}, ptr %pp, align 8")
    f.do(f"store i64 {f.ins(f'add i64 {k}, 1')}, ptr %kp, align 8")
    f.br("loop")
    f.at("out")
    f.do("ret void")
    return f.text("define internal void @xdp_copy(ptr %ctx, i64 %off, ptr %buf, i64 %len, "
                  "i1 %flush) nounwind")


register_shared("xdp_copy", xdp_copy_fn)


def _frags_tail(f: Text, off: str) -> None:
    """The multi-buffer half of ``bpf_xdp_adjust_tail`` (reference:
    :meth:`XdpBuff._frags_shrink_tail` and ``_frags_increase_tail``) on the frag table
    row: growing needs the rx queue's ``frag_size`` (pyxdp's queues register none:
    -EOPNOTSUPP; test_run's is a page) and stays inside it; shrinking cuts the last
    frags, a frag cut to nothing released (the run's writer returns its page), and
    what is left past the last frag from the linear part."""
    row = f.cget("%ctx", "x_frags", "ptr")
    grow, shrink = f.label("fgrow"), f.label("fshrink")
    f.cbr(f.ins(f"icmp sge i64 {off}, 0"), grow, shrink)
    f.at(grow)
    fsz = f.word(row, FRAG_FRAG_SIZE, "i64", "")
    none = f.ins(f"icmp eq i64 {fsz}, 0")
    big = f.ins(f"icmp ugt i64 {fsz}, {f.cget('%ctx', 'x_frame_sz')}")
    ret_if(f, f.ins(f"or i1 {none}, {big}"), -errno.EOPNOTSUPP)
    # the last frag grows into the rx queue's frag_size (its view has that much room)
    ent = _frag_at(f, row, f.ins(f"sub i64 {f.word(row, FRAG_NR, 'i64', '')}, 1"))
    lenp = f.gep(ent, 8)
    flen = f.ins(f"load i64, ptr {lenp}, align 8")
    ret_if(f, f.ins(f"icmp sgt i64 {off}, {f.ins(f'sub i64 {fsz}, {flen}')}"), -errno.EINVAL)
    at = f.ins(f"inttoptr i64 {f.word(ent, 0, 'i64', '')} to ptr")
    f.memset(f.gep(at, flen), off)
    f.do(f"store i64 {f.ins(f'add i64 {flen}, {off}')}, ptr {lenp}, align 8")
    grown = f.ins(f"add i64 {f.word(row, FRAG_SIZE, 'i64', '')}, {off}")
    f.set_word(row, FRAG_SIZE, grown, "i64", "")
    f.do("ret i64 0")
    f.at(shrink)
    data, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
    size = f.word(row, FRAG_SIZE, "i64", "")
    # -offset in C's int (bpf_xdp_frags_shrink_tail(xdp, -offset)): -INT_MIN wraps to
    # INT_MIN, a negative cut that passes the check below and cuts nothing.
    off32 = f.ins(f"trunc i64 {off} to i32")
    cut = f.ins(f"sext i32 {f.ins(f'sub i32 0, {off32}')} to i64")
    total = f.ins(f"add i64 {f.ins(f'sub i64 {end}, {data}')}, {size}")
    ret_if(f, f.ins(f"icmp sgt i64 {cut}, {f.ins(f'sub i64 {total}, {ETH_HLEN}')}"),
           -errno.EINVAL)
    f.do("%sk = alloca i64, align 8")  # bytes still to cut
    f.do("%nk = alloca i64, align 8")  # frags left
    f.do(f"store i64 {cut}, ptr %sk, align 8")
    f.do(f"store i64 {f.word(row, FRAG_NR, 'i64', '')}, ptr %nk, align 8")
    f.br("sloop")
    f.at("sloop")
    left = f.ins("load i64, ptr %sk, align 8")
    nr = f.ins("load i64, ptr %nk, align 8")
    more = f.ins(f"and i1 {f.ins(f'icmp sgt i64 {left}, 0')}, {f.ins(f'icmp ne i64 {nr}, 0')}")
    f.cbr(more, "sbody", "sdone")
    f.at("sbody")
    lenp = f.gep(_frag_at(f, row, f.ins(f"sub i64 {nr}, 1")), 8)
    flen = f.ins(f"load i64, ptr {lenp}, align 8")
    c = f.ins(f"select i1 {f.ins(f'icmp slt i64 {left}, {flen}')}, i64 {left}, i64 {flen}")
    rest = f.ins(f"sub i64 {flen}, {c}")
    f.do(f"store i64 {rest}, ptr {lenp}, align 8")
    f.do(f"store i64 {f.ins(f'sub i64 {left}, {c}')}, ptr %sk, align 8")
    gone = f.ins(f"zext i1 {f.ins(f'icmp eq i64 {rest}, 0')} to i64")
    f.do(f"store i64 {f.ins(f'sub i64 {nr}, {gone}')}, ptr %nk, align 8")
    f.br("sloop")
    f.at("sdone")
    left = f.ins("load i64, ptr %sk, align 8")
    nr = f.ins("load i64, ptr %nk, align 8")
    f.set_word(row, FRAG_NR, nr, "i64", "")
    f.set_word(row, FRAG_SIZE, f.ins(f"sub i64 {size}, {f.ins(f'sub i64 {cut}, {left}')}"),
               "i64", "")
    # No frag left: the buffer is linear now (xdp_buff_clear_frags_flag), what is left
    # to cut comes off the linear part.
    empty = f.ins(f"icmp eq i64 {nr}, 0")
    f.cset("%ctx", "x_frags", f.ins(f"select i1 {empty}, i64 0, i64 {f.cget('%ctx', 'x_frags')}"))
    f.cset("%ctx", "x_data_end", f.ins(f"select i1 {empty}, i64 {f.ins(f'sub i64 {end}, {left}')}, "
                                       f"i64 {end}"))
    f.do("call void @pkt(ptr %ctx)")
    f.do("ret i64 0")


def adjust_tail_fn(natives: Natives) -> str:
    """``bpf_xdp_adjust_tail``'s native twin (reference: :meth:`XdpBuff.adjust_tail`, same
    layout; a multi-buffer packet's frags in the run's frag table)."""
    f = Text()
    f.at("entry")
    xdp_guard(f, natives.ctx_base, True)
    off = s32(f, "%r2")
    lin, multi = f.label("linear"), f.label("multi")
    f.cbr(f.ins(f"icmp eq i64 {f.cget('%ctx', 'x_frags')}, 0"), lin, multi)
    f.at(multi)
    _frags_tail(f, off)
    f.at(lin)
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
    """``xdp_get_buff_len``'s native twin (reference: :meth:`XdpBuff.buff_len`, same
    layout): the linear part and the frag table row's ``xdp_frags_size``."""
    f = Text()
    f.at("entry")
    xdp_guard(f, natives.ctx_base, True)
    end, data = f.cget("%ctx", "x_data_end"), f.cget("%ctx", "x_data")
    lin = f.ins(f"sub i64 {end}, {data}")
    f.do(f"ret i64 {f.ins(f'add i64 {lin}, {_frags_size(f)}')}")
    return f.text("define internal i64 @buff_len(ptr %ctx, i64 %r1) nounwind")


def _copy(f: Text, host: str, off: str, n: str, flush: bool) -> None:
    """Copy between ``host`` and the packet's ``[off, off + n)`` (checked to lie in it):
    straight from the linear part when it holds the range, else piece by piece."""
    data, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
    lin, frag = f.label("lin"), f.label("frag")
    inlin = f.ins(f"icmp ule i64 {f.ins(f'add i64 {off}, {n}')}, {f.ins(f'sub i64 {end}, {data}')}")
    f.cbr(inlin, lin, frag, LIKELY)
    f.at(lin)
    pkt = f.gep(f.cget("%ctx", "x_frame", "ptr"), f.ins(f"add i64 {data}, {off}"))
    if flush:
        f.memmove(pkt, host, n)
    else:
        f.memmove(host, pkt, n)
    f.do("ret i64 0")
    f.at(frag)
    f.do(f"call void @xdp_copy(ptr %ctx, i64 {off}, ptr {host}, i64 {n}, "
         f"i1 {'true' if flush else 'false'})")
    f.do("ret i64 0")


def load_bytes_fn(natives: Natives) -> str:
    """``bpf_xdp_load_bytes``'s native twin (reference: :meth:`XdpBuff.load_bytes` then
    ``vm.mem.write``, same layout; across the frags of the run's frag table)."""
    f = Text()
    f.at("entry")
    xdp_guard(f, natives.ctx_base, True)
    off = f.ins("and i64 %r2, 4294967295")
    n = f.ins("and i64 %r4, 4294967295")
    big = f.ins(f"or i1 {f.ins(f'icmp ugt i64 {off}, 65535')}, {f.ins(f'icmp ugt i64 {n}, 65535')}")
    ret_if(f, big, -errno.EFAULT)
    data, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
    total = f.ins(f"add i64 {f.ins(f'sub i64 {end}, {data}')}, {_frags_size(f)}")
    over = f.ins(f"icmp ugt i64 {f.ins(f'add i64 {off}, {n}')}, {total}")
    ret_if(f, over, -errno.EINVAL)
    ret_if(f, f.ins(f"icmp eq i64 {n}, 0"), 0)
    dst = f.ins(f"call ptr @translate(ptr %ctx, i64 %r3, i64 {n}, i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {dst}, null"), SLOW)
    f.cset("%ctx", "stack_dirty", "-1")  # the bytes may land in a stack frame
    _copy(f, dst, off, n, False)
    return f.text("define internal i64 @load_bytes(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                  "i64 %r4) nounwind")


def store_bytes_fn(natives: Natives) -> str:
    """``bpf_xdp_store_bytes``'s native twin (reference: ``vm.mem.read`` then
    :meth:`XdpBuff.store_bytes`, same layout; across the frags of the run's frag table)."""
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
    total = f.ins(f"add i64 {f.ins(f'sub i64 {end}, {data}')}, {_frags_size(f)}")
    over = f.ins(f"icmp ugt i64 {f.ins(f'add i64 {off}, {n}')}, {total}")
    ret_if(f, over, -errno.EINVAL)
    _copy(f, src, off, n, True)
    return f.text("define internal i64 @store_bytes(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                  "i64 %r4) nounwind")
