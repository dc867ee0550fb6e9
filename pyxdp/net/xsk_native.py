"""AF_XDP receive in machine code: ``net/xdp/xsk.c`` receive and ``xsk_buff_pool.c``
buffers for the native NAPI loop (:mod:`pyxdp.net.napi_native` inlines them).

The rings' protocol is :mod:`pyxdp.net.xsk_queue`; the same rules in Python are
:mod:`pyxdp.net.xsk` and :mod:`pyxdp.net.xsk_buff_pool`. Here: a buffer from
the pool (``xsk_buff_alloc``: the free list, last freed first, then the fill
ring through its lazy consumer, invalid addresses skipped and counted), an rx
descriptor reserved (``xskq_prod_reserve_desc``, the consumer reloaded only
when the cached one says full), ``xsk_buff_free``, and ``xsk_flush`` (rx
producer and fill consumer published). The state of the one socket and pool
a native call serves travels in the control array ``xc`` (indices
:class:`X`), folded back into the Python objects after the call
(:func:`pyxdp.net.xsk.xsk_native_fold`).

Index words are loaded with acquire and stored with release semantics
(atomic 4-byte accesses, :mod:`pyxdp.net.atomic`), the kernel's A/B/C/D
pairs; the compiler may not move descriptor writes past the producer store.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba import types
from numba.extending import intrinsic

from pyxdp.net.atomic import load_acquire32, load_acquire32_at, memcpy, store_release32
from pyxdp.net.native import njit
from pyxdp.net.xsk_queue import KERNEL, RX_RING, USER

__all__ = [
    "X",
    "buff_free",
    "fq_peek",
    "fq_take",
    "rcv_copy",
    "rcv_zc",
    "rx_put",
    "rx_reclaim",
    "rx_room",
    "xsk_flush",
]


class X:
    """Indices of the AF_XDP control array of a native call."""

    ON = 0  # 1: copy mode, 2: zero-copy, 0: no native socket on the queue
    FD, REG, QUEUE = 1, 2, 3  # the socket's fd; registered for bpf_redirect_xsk; its queue
    CHUNK, OFF, SIZE, UNALIGNED, FRAME = 4, 5, 6, 7, 8  # UMEM geometry
    RX_CP, RX_CC, RX_MASK = 9, 10, 11  # rx ring: cached producer and consumer
    FQ_CP, FQ_CC, FQ_MASK = 12, 13, 14  # fill ring: cached producer and consumer
    NFREE = 15  # the pool's free list
    RX_DROPPED, RX_FULL, FQ_EMPTY, FQ_INVALID = 16, 17, 18, 19  # XDP_STATISTICS
    WAKEUP, WAKE_SET = 20, 21  # the pool uses need-wakeup; the fill ring's flag is set
    E_NOSPC, E_NOMEM, E_NOBUFS = 22, 23, 24  # redirect errors (xdp_redirect_err)
    PFN_BASE = 25  # zero-copy: the UMEM region's first pfn
    DEV_DROPPED = 26  # zero-copy: frames the NIC found no buffer for
    # Addresses of arrays the call's helpers reach without a parameter of their own:
    # the pool's chunk owners (uint8, pyxdp.net.xsk_queue USER/KERNEL/RX_RING), the rx
    # ring's chunk per slot (int64, kernel-private), the rx ring's consumer word
    # and (zero-copy, else 0) the UMEM region's flags of chunks some pool on it
    # holds as KERNEL (uint8: queues sharing the UMEM never hold one chunk twice).
    KOWN, SLOTS, RX_CONS, ZOWN = 27, 28, 29, 30
    PEEK = 31  # the chunk of the buffer fq_peek returned, for fq_take and rx_put
    SHIFT = 32  # aligned UMEMs: log2(chunk size), chunks found without a division
    SIZE_ = 40


X_ON = X.ON
X_FD = X.FD
X_REG = X.REG
X_QUEUE = X.QUEUE
X_CHUNK = X.CHUNK
X_OFF = X.OFF
X_SIZE = X.SIZE
X_UNALIGNED = X.UNALIGNED
X_FRAME = X.FRAME
X_RX_CP = X.RX_CP
X_RX_CC = X.RX_CC
X_RX_MASK = X.RX_MASK
X_FQ_CP = X.FQ_CP
X_FQ_CC = X.FQ_CC
X_FQ_MASK = X.FQ_MASK
X_NFREE = X.NFREE
X_RX_DROPPED = X.RX_DROPPED
X_RX_FULL = X.RX_FULL
X_FQ_EMPTY = X.FQ_EMPTY
X_FQ_INVALID = X.FQ_INVALID
X_WAKEUP = X.WAKEUP
X_WAKE_SET = X.WAKE_SET
X_E_NOSPC = X.E_NOSPC
X_E_NOMEM = X.E_NOMEM
X_E_NOBUFS = X.E_NOBUFS
X_PFN_BASE = X.PFN_BASE
X_DEV_DROPPED = X.DEV_DROPPED
X_KOWN = X.KOWN
X_SLOTS = X.SLOTS
X_RX_CONS = X.RX_CONS
X_ZOWN = X.ZOWN
X_PEEK = X.PEEK
X_SHIFT = X.SHIFT
OWN_USER = USER
OWN_KERNEL = KERNEL
OWN_RX = RX_RING
U32 = 0xFFFF_FFFF
MASK48 = (1 << 48) - 1
NEED_WAKEUP = 1  # XDP_RING_NEED_WAKEUP


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


# Bytes and words of arrays known by address (X.KOWN, X.SLOTS, X.ZOWN): every index
# is a chunk checked against the UMEM's size or a slot masked into the ring.
ld8: Any = intrinsic(_raw_load(8))
st8: Any = intrinsic(_raw_store(8))
ld64: Any = intrinsic(_raw_load(64))
st64: Any = intrinsic(_raw_store(64))


@njit(cache=True, nogil=True, _nrt=False)  # once per batch: not inlined at every use
def rx_reclaim(xc):  # type: ignore[no-untyped-def]
    """Load the rx consumer (A): the chunks of the slots the user consumed are the
    user's again. A consumer behind the cached one or past the producer is no index
    the ring can have (the user wrote it): ignored, as
    :meth:`pyxdp.net.xsk_queue.KernelRingProd.reload_consumer` does."""
    cons = load_acquire32_at(xc[X_RX_CONS])
    cc = xc[X_RX_CC]
    moved = (cons - cc) & U32
    if moved > ((xc[X_RX_CP] - cc) & U32):
        return
    kown = xc[X_KOWN]
    slots = xc[X_SLOTS]
    mask = xc[X_RX_MASK]
    for k in range(moved):
        loc = ld64(slots, (cc + k) & mask)
        if ld8(kown, loc) == OWN_RX:
            st8(kown, loc, OWN_USER)
    xc[X_RX_CC] = cons


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def fq_peek(xc, fq_prod, fq_cons, fq_addr, xfree):  # type: ignore[no-untyped-def]
    """The buffer ``xsk_buff_alloc`` would return (its base address), not taken: the
    free list's last, else the fill ring's next usable address; -1: none.

    Every fill entry is the user's writing: it is used only if its buffer lies in
    the UMEM (``xp_check_aligned``/``xp_check_unaligned``) and names a chunk the
    user holds (pyxdp's exact accounting: not in a buffer, the free list or an
    unconsumed rx descriptor; zero-copy: nor the kernel's on another queue).
    Others are consumed and counted invalid on the way, as the kernel's peek does.
    One search loads the producer at most once, and believes at most a ring's
    worth of entries from it (a producer far ahead reads the ring again later)."""
    nf = xc[X_NFREE]
    if nf > 0:
        base = np.int64(xfree[nf - 1])
        xc[X_PEEK] = base // xc[X_CHUNK] if xc[X_UNALIGNED] else base >> xc[X_SHIFT]
        return base
    loaded = False
    size = xc[X_FQ_MASK] + 1
    chunk = xc[X_CHUNK]
    kown = xc[X_KOWN]
    zown = xc[X_ZOWN]
    while True:
        cc = xc[X_FQ_CC]
        if xc[X_FQ_CP] == cc:
            if loaded:
                return -1
            # __xskq_cons_release, then __xskq_cons_peek (D, then C).
            store_release32(fq_cons, 0, cc)
            avail = (load_acquire32(fq_prod, 0) - cc) & U32
            xc[X_FQ_CP] = (cc + min(avail, size)) & U32
            loaded = True
            if avail == 0:
                return -1
        a = np.int64(fq_addr[cc & xc[X_FQ_MASK]])
        if xc[X_UNALIGNED]:
            base = (a & MASK48) + ((a >> 48) & 0xFFFF)
            ok = base < xc[X_SIZE] and base + chunk <= xc[X_SIZE]
            loc = base // chunk
        else:
            base = a & ~(chunk - 1)
            ok = 0 <= base < xc[X_SIZE]  # a top bit set makes it negative
            loc = base >> xc[X_SHIFT]
        if ok:
            own = ld8(kown, loc)
            if own == OWN_RX:
                rx_reclaim(xc)
                own = ld8(kown, loc)
            if own == OWN_USER and (zown == 0 or ld8(zown, loc) == 0):
                xc[X_PEEK] = loc
                return base
        xc[X_FQ_CC] = (cc + 1) & U32
        xc[X_FQ_INVALID] += 1


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def fq_take(xc):  # type: ignore[no-untyped-def]
    """Take the buffer :func:`fq_peek` returned (from the fill ring: the kernel's now)."""
    if xc[X_NFREE] > 0:
        xc[X_NFREE] -= 1
    else:
        xc[X_FQ_CC] = (xc[X_FQ_CC] + 1) & U32
        st8(xc[X_KOWN], xc[X_PEEK], OWN_KERNEL)
        if xc[X_ZOWN] != 0:
            st8(xc[X_ZOWN], xc[X_PEEK], 1)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def buff_free(xc, xfree, base):  # type: ignore[no-untyped-def]
    """``xsk_buff_free``: the buffer onto the pool's free list (which holds every chunk
    at most once: chunks are taken only from the user, so it cannot overflow; the
    bound is checked all the same)."""
    nf = xc[X_NFREE]
    if nf < len(xfree):
        xfree[nf] = base
        xc[X_NFREE] = nf + 1


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def rx_room(xc, rx_cons):  # type: ignore[no-untyped-def]
    """``xskq_prod_nb_free(q, 1)``: the cached consumer first, reloaded when full (A)."""
    size = xc[X_RX_MASK] + 1
    if ((xc[X_RX_CP] - xc[X_RX_CC]) & U32) < size:
        return True
    rx_reclaim(xc)
    return ((xc[X_RX_CP] - xc[X_RX_CC]) & U32) < size


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def rx_put(xc, rx_desc, addr, length, loc):  # type: ignore[no-untyped-def]
    """``xskq_prod_reserve_desc``: a descriptor written, visible at the flush; its
    chunk ``loc`` is the rx ring's until the user consumes the slot."""
    i = xc[X_RX_CP] & xc[X_RX_MASK]
    rx_desc[i, 0] = addr
    rx_desc[i, 1] = length  # len, options 0
    st64(xc[X_SLOTS], i, loc)
    st8(xc[X_KOWN], loc, OWN_RX)
    if xc[X_ZOWN] != 0:
        st8(xc[X_ZOWN], loc, 0)
    xc[X_RX_CP] = (xc[X_RX_CP] + 1) & U32


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def xsk_flush(xc, rx_prod, fq_cons):  # type: ignore[no-untyped-def]
    """``xsk_flush``: rx descriptors published (B), the fill consumer too (D)."""
    store_release32(rx_prod, 0, xc[X_RX_CP])
    store_release32(fq_cons, 0, xc[X_FQ_CC])


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def rcv_copy(xc, fq_prod, fq_cons, fq_addr, xfree, rx_cons, rx_desc, umem, src,  # type: ignore[no-untyped-def] # noqa: E501
             data, length, meta):
    """``__xsk_rcv`` of one frame (``src``: its page): 0, or the errno of the drop."""
    if length > xc[X_FRAME]:
        xc[X_RX_DROPPED] += 1
        xc[X_E_NOSPC] += 1
        return 28  # ENOSPC
    base = fq_peek(xc, fq_prod, fq_cons, fq_addr, xfree)
    if base < 0:
        xc[X_RX_DROPPED] += 1
        xc[X_FQ_EMPTY] += 1
        xc[X_E_NOMEM] += 1
        return 12  # ENOMEM
    if not rx_room(xc, rx_cons):
        xc[X_RX_FULL] += 1
        xc[X_E_NOBUFS] += 1
        return 105  # ENOBUFS: the buffer stays in the pool
    fq_take(xc)
    off = xc[X_OFF]
    dst = base + off
    mlen = max(meta, 0)
    memcpy(umem.ctypes.data + dst - mlen, src.ctypes.data + data - mlen, length + mlen)
    if xc[X_UNALIGNED]:
        rx_put(xc, rx_desc, base | (off << 48), length, xc[X_PEEK])
    else:
        rx_put(xc, rx_desc, dst, length, xc[X_PEEK])
    return 0


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def rcv_zc(xc, rx_cons, rx_desc, held, loc, data, length):  # type: ignore[no-untyped-def]
    """``xsk_rcv_zc`` of a buffer of the queue's own pool: 0 (handed over) or the errno
    (the caller frees the buffer)."""
    if length > xc[X_FRAME]:
        xc[X_RX_DROPPED] += 1
        xc[X_E_NOSPC] += 1
        return 28
    if not rx_room(xc, rx_cons):
        xc[X_RX_FULL] += 1
        xc[X_E_NOBUFS] += 1
        return 105
    rx_put(xc, rx_desc, loc * xc[X_CHUNK] + data, length, loc)
    held[loc] = 0
    return 0


