"""AF_XDP receive in machine code: ``net/xdp/xsk.c`` receive and ``xsk_buff_pool.c``
buffers for the native NAPI loop (:mod:`pyxdp.net.napi_native` inlines them).

The rings' protocol is :mod:`pyxdp.net.xsk_queue`; the same rules in Python are
:mod:`pyxdp.net.xsk` and :mod:`pyxdp.net.xsk_buff_pool`. Here: a buffer from
the pool (``xsk_buff_alloc``: the free list, last freed first, then the fill
ring through its lazy consumer, invalid addresses skipped and counted), an rx
descriptor reserved (``xskq_prod_reserve_desc``, the consumer reloaded only
when the cached one says full), ``xsk_buff_free``, and ``xsk_flush`` (rx
producer and fill consumer published).

State is the objects' own records, used in place (nothing is loaded before a
call or folded back after it): the pool's
:class:`~pyxdp.net.xsk_buff_pool.XskPoolState` (``xp``), each ring's
:class:`~pyxdp.net.xsk_queue.XskQueueState` (``fq``, ``rx``: cached indices,
counters, and the addresses of the shared memory) and the socket's
:class:`~pyxdp.net.xsk.XdpSockState` (``sk``). Arrays those records name by
address (the free list, chunk owners, the rings' slots) are reached with the
raw loads and stores below; every index is a chunk checked against the
UMEM's size or a slot masked into the ring. A call's own output is ``xt``,
the sums for the tracer (:data:`T_NOSPC` ...).

Index words are loaded with acquire and stored with release semantics
(atomic 4-byte accesses, :mod:`pyxdp.net.atomic`), the kernel's A/B/C/D
pairs; the compiler may not move descriptor writes past the producer store.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir  # type: ignore[import-untyped]
from numba import types
from numba.extending import intrinsic

from pyxdp.net.atomic import load_acquire32_at, memcpy, store_release32_at
from pyxdp.net.native import njit
from pyxdp.net.page_pool import PAGE_SIZE
from pyxdp.net.page_pool_lock import alloc_page_ir, put_page_ir
from pyxdp.net.xdp import XDP_FRAME_SIZE
from pyxdp.net.xdp_mem import (
    XDP_FRAME_OFF_DEV_RX,
    XDP_FRAME_OFF_FRAME_SZ,
    XDP_FRAME_OFF_LEN,
    XDP_FRAME_OFF_MEM_TYPE,
    XDP_FRAME_OFF_METASIZE,
    XdpMemType,
)
from pyxdp.net.xdp_sock import XdpSockState
from pyxdp.net.xsk_buff_pool import XskPoolState
from pyxdp.net.xsk_queue import (
    KERNEL,
    Q_CC,
    Q_CONS,
    Q_CP,
    Q_EMPTY,
    Q_FLAGS,
    Q_INVALID,
    Q_KOWN,
    Q_MASK,
    Q_PROD,
    Q_RING,
    Q_SLOTS,
    RX_RING,
    USER,
)

__all__ = [
    "T_NOBUFS",
    "T_NOMEM",
    "T_NOSPC",
    "T_SLOT",
    "T_TX_ERR",
    "buff_free",
    "chunk_of",
    "fq_peek",
    "fq_take",
    "ld8",
    "ld32",
    "ld64",
    "page_alloc",
    "page_put",
    "rcv_copy",
    "rcv_zc",
    "rx_put",
    "reload_consumer",
    "rx_room",
    "st8",
    "st32",
    "st64",
    "xsk_flush",
    "xsk_slot",
    "zc_alloc",
    "zc_free",
    "zc_to_frame",
    "zc_alloc_done",
]

# The records' slots, as module-level integers numba reads as constants.
XP_NFREE = XskPoolState.index("free_list_cnt")
XP_NCHUNKS = XskPoolState.index("nchunks")
XP_WAKEUP = XskPoolState.index("uses_need_wakeup")
XP_NEED = XskPoolState.index("cached_need_wakeup")
XP_CHUNK = XskPoolState.index("chunk_size")
XP_SHIFT = XskPoolState.index("chunk_shift")
XP_UNALIGNED = XskPoolState.index("unaligned")
XP_SIZE = XskPoolState.index("size")
XP_OFF = XskPoolState.index("rx_data_offset")
XP_FRAME = XskPoolState.index("rx_frame_size")
XP_PFN_BASE = XskPoolState.index("pfn_base")
XP_UMEM = XskPoolState.index("umem_at")
XP_FREE = XskPoolState.index("free_at")
XP_KOWN = XskPoolState.index("kown_at")
XP_ZOWN = XskPoolState.index("zown_at")
XP_HELD = XskPoolState.index("held_at")
S_RX_DROPPED = XdpSockState.index("rx_dropped")
S_RX_FULL = XdpSockState.index("rx_queue_full")
S_FD = XdpSockState.index("fd")
S_IFINDEX = XdpSockState.index("ifindex")
S_QUEUE = XdpSockState.index("queue_id")
# A call's trace sums: xdp_redirect_err per errno, xdp_exception of XDP_TX frames
# that could not be converted, then xdp_redirect per target (each XSKMAP of the
# program, then bpf_redirect_xsk's registration).
T_NOSPC, T_NOMEM, T_NOBUFS, T_TX_ERR, T_SLOT = 0, 1, 2, 3, 4
FRAME_HDR = XDP_FRAME_SIZE
PAGE = PAGE_SIZE
ORDER0 = int(XdpMemType.MEM_TYPE_PAGE_ORDER0)
H_LEN = XDP_FRAME_OFF_LEN // 4
H_METASIZE = XDP_FRAME_OFF_METASIZE // 4
H_MEM_TYPE = XDP_FRAME_OFF_MEM_TYPE // 4
H_DEV_RX = XDP_FRAME_OFF_DEV_RX // 8
H_FRAME_SZ = XDP_FRAME_OFF_FRAME_SZ // 4
OWN_USER = USER
OWN_KERNEL = KERNEL
OWN_RX = RX_RING
U32 = 0xFFFF_FFFF
MASK48 = (1 << 48) - 1
WAKEUP_RX = 1  # XDP_WAKEUP_RX, and XDP_RING_NEED_WAKEUP in the ring's flags word


def _raw_load(bits: int):  # type: ignore[no-untyped-def]
    def _load(typingctx, addr, idx):  # type: ignore[no-untyped-def]
        """``((uintN_t *)addr)[idx]``, as int64."""
        sig = types.int64(addr, idx)

        def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
            t = ir.IntType(bits)
            p = builder.gep(builder.inttoptr(args[0], t.as_pointer()), [args[1]])
            return builder.zext(builder.load(p), ir.IntType(64)) if bits < 64 \
                else builder.load(p)

        return sig, codegen
    return _load


def _raw_store(bits: int):  # type: ignore[no-untyped-def]
    def _store(typingctx, addr, idx, val):  # type: ignore[no-untyped-def]
        """``((uintN_t *)addr)[idx] = val``."""
        sig = types.void(addr, idx, val)

        def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
            t = ir.IntType(bits)
            p = builder.gep(builder.inttoptr(args[0], t.as_pointer()), [args[1]])
            v = builder.trunc(args[2], t) if bits < 64 else args[2]
            builder.store(v, p)
            return context.get_dummy_value()

        return sig, codegen
    return _store


# Bytes and words of arrays known by address (the records' ``*_at`` fields).
ld8: Any = intrinsic(_raw_load(8))
st8: Any = intrinsic(_raw_store(8))
ld32: Any = intrinsic(_raw_load(32))
st32: Any = intrinsic(_raw_store(32))
ld64: Any = intrinsic(_raw_load(64))
st64: Any = intrinsic(_raw_store(64))


@njit(cache=True, nogil=True, _nrt=False)  # once per batch: not inlined at every use
def reload_consumer(rx):  # type: ignore[no-untyped-def]
    """Load the consumer of a ring the kernel produces (A): for an rx ring, the chunks
    of the slots the user consumed are the user's again. A consumer behind the
    cached one or past the producer is no index the ring can have (the user wrote
    it): ignored, as :meth:`pyxdp.net.xsk_queue.KernelRingProd.reload_consumer`
    does."""
    cons = load_acquire32_at(rx[Q_CONS])
    cc = rx[Q_CC]
    moved = (cons - cc) & U32
    if moved > ((rx[Q_CP] - cc) & U32):
        return
    kown = rx[Q_KOWN]
    if kown != 0:
        slots = rx[Q_SLOTS]
        mask = rx[Q_MASK]
        for k in range(moved):
            loc = ld64(slots, (cc + k) & mask)
            if ld8(kown, loc) == OWN_RX:
                st8(kown, loc, OWN_USER)
    rx[Q_CC] = cons


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def chunk_of(xp, base):  # type: ignore[no-untyped-def]
    """The chunk (``kown`` index) of a buffer base."""
    return base // xp[XP_CHUNK] if xp[XP_UNALIGNED] else base >> xp[XP_SHIFT]


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def fq_peek(xp, fq, rx):  # type: ignore[no-untyped-def]
    """The buffer ``xsk_buff_alloc`` would return (its base address), not taken: the
    free list's last, else the fill ring's next usable address; -1: none.

    Every fill entry is the user's writing: it is used only if its buffer lies in
    the UMEM (``xp_check_aligned``/``xp_check_unaligned``) and names a chunk the
    user holds (pyxdp's exact accounting: not in a buffer, the free list or an
    unconsumed rx descriptor; zero-copy: nor the kernel's on another queue).
    Others are consumed and counted invalid on the way, as the kernel's peek does.
    One search loads the producer at most once, and believes at most a ring's
    worth of entries from it (a producer far ahead reads the ring again later)."""
    nf = xp[XP_NFREE]
    if nf > 0:
        return ld64(xp[XP_FREE], nf - 1)
    loaded = False
    size = fq[Q_MASK] + 1
    chunk = xp[XP_CHUNK]
    kown = xp[XP_KOWN]
    zown = xp[XP_ZOWN]
    while True:
        cc = fq[Q_CC]
        if fq[Q_CP] == cc:
            if loaded:
                return -1
            # __xskq_cons_release, then __xskq_cons_peek (D, then C).
            store_release32_at(fq[Q_CONS], cc)
            avail = (load_acquire32_at(fq[Q_PROD]) - cc) & U32
            fq[Q_CP] = (cc + min(avail, size)) & U32
            loaded = True
            if avail == 0:
                return -1
        a = ld64(fq[Q_RING], cc & fq[Q_MASK])
        if xp[XP_UNALIGNED]:
            base = (a & MASK48) + ((a >> 48) & 0xFFFF)
            ok = base < xp[XP_SIZE] and base + chunk <= xp[XP_SIZE]
            loc = base // chunk
        else:
            base = a & ~(chunk - 1)
            ok = 0 <= base < xp[XP_SIZE]  # a top bit set makes it negative
            loc = base >> xp[XP_SHIFT]
        if ok:
            own = ld8(kown, loc)
            if own == OWN_RX:
                reload_consumer(rx)
                own = ld8(kown, loc)
            if own == OWN_USER and (zown == 0 or ld8(zown, loc) == 0):
                return base
        fq[Q_CC] = (cc + 1) & U32
        fq[Q_INVALID] += 1


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def fq_take(xp, fq, base):  # type: ignore[no-untyped-def]
    """Take the buffer :func:`fq_peek` returned (from the fill ring: the kernel's now)."""
    nf = xp[XP_NFREE]
    if nf > 0:
        xp[XP_NFREE] = nf - 1
        return
    fq[Q_CC] = (fq[Q_CC] + 1) & U32
    loc = chunk_of(xp, base)
    st8(xp[XP_KOWN], loc, OWN_KERNEL)
    if xp[XP_ZOWN] != 0:
        st8(xp[XP_ZOWN], loc, 1)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def buff_free(xp, base):  # type: ignore[no-untyped-def]
    """``xsk_buff_free``: the buffer onto the pool's free list (which holds every chunk
    at most once: chunks are taken only from the user, so it cannot overflow; the
    bound is checked all the same)."""
    nf = xp[XP_NFREE]
    if nf < xp[XP_NCHUNKS]:
        st64(xp[XP_FREE], nf, base)
        xp[XP_NFREE] = nf + 1


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def rx_room(rx):  # type: ignore[no-untyped-def]
    """``xskq_prod_nb_free(q, 1)``: the cached consumer first, reloaded when full (A)."""
    size = rx[Q_MASK] + 1
    if ((rx[Q_CP] - rx[Q_CC]) & U32) < size:
        return True
    reload_consumer(rx)
    return ((rx[Q_CP] - rx[Q_CC]) & U32) < size


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def rx_put(xp, rx, addr, length, loc):  # type: ignore[no-untyped-def]
    """``xskq_prod_reserve_desc``: a descriptor written, visible at the flush; its
    chunk ``loc`` is the rx ring's until the user consumes the slot."""
    i = rx[Q_CP] & rx[Q_MASK]
    st64(rx[Q_RING], 2 * i, addr)
    st64(rx[Q_RING], 2 * i + 1, length)  # len, options 0
    st64(rx[Q_SLOTS], i, loc)
    st8(xp[XP_KOWN], loc, OWN_RX)
    if xp[XP_ZOWN] != 0:
        st8(xp[XP_ZOWN], loc, 0)
    rx[Q_CP] = (rx[Q_CP] + 1) & U32


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def xsk_flush(rx, fq):  # type: ignore[no-untyped-def]
    """``xsk_flush``: rx descriptors published (B), the fill consumer too (D)."""
    store_release32_at(rx[Q_PROD], rx[Q_CP])
    store_release32_at(fq[Q_CONS], fq[Q_CC])


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def rcv_copy(xp, fq, rx, sk, xt, src, length, meta):  # type: ignore[no-untyped-def]
    """``__xsk_rcv`` of one frame whose data is at address ``src`` (``meta`` bytes of
    metadata before it): 0, or the errno of the drop."""
    if length > xp[XP_FRAME]:
        sk[S_RX_DROPPED] += 1
        xt[T_NOSPC] += 1
        return 28  # ENOSPC
    base = fq_peek(xp, fq, rx)
    if base < 0:
        sk[S_RX_DROPPED] += 1
        fq[Q_EMPTY] += 1  # rx_fill_ring_empty_descs
        xt[T_NOMEM] += 1
        return 12  # ENOMEM
    if not rx_room(rx):
        sk[S_RX_FULL] += 1
        xt[T_NOBUFS] += 1
        return 105  # ENOBUFS: the buffer stays in the pool
    fq_take(xp, fq, base)
    off = xp[XP_OFF]
    dst = base + off
    mlen = max(meta, 0)
    memcpy(xp[XP_UMEM] + dst - mlen, src - mlen, length + mlen)
    addr = base | (off << 48) if xp[XP_UNALIGNED] else dst
    rx_put(xp, rx, addr, length, chunk_of(xp, base))
    return 0


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def rcv_zc(xp, rx, sk, xt, loc, data, length):  # type: ignore[no-untyped-def]
    """``xsk_rcv_zc`` of a buffer of the queue's own pool: 0 (handed over) or the errno
    (the caller frees the buffer)."""
    if length > xp[XP_FRAME]:
        sk[S_RX_DROPPED] += 1
        xt[T_NOSPC] += 1
        return 28
    if not rx_room(rx):
        sk[S_RX_FULL] += 1
        xt[T_NOBUFS] += 1
        return 105
    rx_put(xp, rx, loc * xp[XP_CHUNK] + data, length, loc)
    st8(xp[XP_HELD], loc, 0)
    return 0


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def zc_alloc(xp, fq, rx):  # type: ignore[no-untyped-def]
    """``xsk_buff_alloc`` for a zero-copy NIC's DMA: a chunk the NIC holds now, or -1."""
    base = fq_peek(xp, fq, rx)
    if base < 0:
        return -1
    fq_take(xp, fq, base)
    loc = base >> xp[XP_SHIFT]  # zero-copy UMEMs are aligned
    st8(xp[XP_HELD], loc, 1)
    return loc


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def zc_free(xp, loc):  # type: ignore[no-untyped-def]
    """``xsk_buff_free`` of a chunk the NIC holds."""
    st8(xp[XP_HELD], loc, 0)
    buff_free(xp, loc << xp[XP_SHIFT])


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def zc_alloc_done(xp, fq, empty):  # type: ignore[no-untyped-def]
    """After a DMA batch's allocations: one ``rx_fill_ring_empty_descs`` when they found
    the fill ring empty; the fill ring's ``XDP_RING_NEED_WAKEUP`` set then, cleared
    when they found buffers (with need-wakeup only)."""
    if empty:
        fq[Q_EMPTY] += 1
    if xp[XP_WAKEUP] == 0:
        return
    need = xp[XP_NEED]
    if empty and (need & WAKEUP_RX) == 0:
        st32(fq[Q_FLAGS], 0, ld32(fq[Q_FLAGS], 0) | WAKEUP_RX)
        xp[XP_NEED] = need | WAKEUP_RX
    elif not empty and (need & WAKEUP_RX) != 0:
        st32(fq[Q_FLAGS], 0, ld32(fq[Q_FLAGS], 0) & ~WAKEUP_RX)
        xp[XP_NEED] = need & ~WAKEUP_RX


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def xsk_slot(xm, sk, map_id, idx):  # type: ignore[no-untyped-def]
    """The native socket as a redirect's target: the row of its XSKMAP in ``xm`` (id,
    max_entries, the map's ``entries`` address), ``len(xm)`` for
    ``bpf_redirect_xsk``, -1 when the target is another socket or none (the
    Python path then judges it).

    ``bpf_redirect_xsk`` (map id 0) found a socket registered on the frame's own
    queue (index ``idx``) when it returned XDP_REDIRECT: registered means bound
    there with an rx ring, and the native socket is the one socket bound to the
    queue polled (:func:`pyxdp.net.xsk.xsk_native_socket`), so the queue alone
    decides - the helper's lookup is not made a second time."""
    if map_id == 0:
        return len(xm) if idx == sk[S_QUEUE] else -1
    for k in range(len(xm)):
        if xm[k, 0] == map_id:
            if 0 <= idx < xm[k, 1] and ld32(xm[k, 2], 2 * idx) == sk[S_FD]:
                return k
            return -1
    return -1


# -- xdp_convert_zc_to_xdp_frame: a zero-copy buffer copied into an order-0 page -------
# The host's page allocator (``memmap.system``, :class:`pyxdp.net.page_pool.PageAllocator`)
# as native code runs it: ``sysa`` is its ``native_arrays`` and its address base.

@njit(cache=True, nogil=True, inline="always", _nrt=False)
def page_alloc(sysa):  # type: ignore[no-untyped-def]
    """``alloc_page``: a page row with refcount 1, or -1 when memory is exhausted."""
    st, free, ref, _pages, _addr_base = sysa
    return alloc_page_ir(st, free, ref)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def page_put(sysa, row):  # type: ignore[no-untyped-def]
    """``put_page``: the last reference frees the page (a row this call allocated)."""
    st, free, ref, _pages, _addr_base = sysa
    put_page_ir(st, free, ref, row)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def zc_to_frame(xp, sysa, loc, data, length, meta, ifindex):  # type: ignore[no-untyped-def]
    """``xdp_convert_zc_to_xdp_frame`` of chunk ``loc``'s frame (``data`` its offset in
    the chunk) for ``ifindex``'s XDP_TX or redirect: metadata and data copied into a
    new order-0 page behind a zeroed ``xdp_frame`` (``MEM_TYPE_PAGE_ORDER0``,
    ``dev_rx`` set), the chunk freed (``xsk_buff_free``). Returns the page row, or
    -EOVERFLOW/-ENOMEM (the chunk stays the caller's)."""
    mlen = max(meta, 0)
    if FRAME_HDR + length + mlen > PAGE:
        return -75  # EOVERFLOW
    row = page_alloc(sysa)
    if row < 0:
        return -12  # ENOMEM
    pages = sysa[3]
    h = pages.ctypes.data + row * PAGE
    memcpy(h + FRAME_HDR, xp[XP_UMEM] + loc * xp[XP_CHUNK] + data - mlen, length + mlen)
    for w in range(FRAME_HDR // 8):
        st64(h, w, 0)
    st64(h, 0, sysa[4] + row * PAGE + FRAME_HDR + mlen)
    st32(h, H_LEN, length)
    st32(h, H_METASIZE, mlen)
    st32(h, H_MEM_TYPE, ORDER0)
    st64(h, H_DEV_RX, ifindex)
    st32(h, H_FRAME_SZ, PAGE)
    zc_free(xp, loc)
    return row
