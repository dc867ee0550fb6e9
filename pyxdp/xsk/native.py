"""AF_XDP in machine code: ``net/xdp/xsk.c`` receive and ``xsk_buff_pool.c`` buffers
for the native NAPI loop, and an xdpsock-style user loop.

Two sides of the same rings (:mod:`pyxdp.xsk.queue` has the protocol):

* the **datapath's side**, inlined into :mod:`pyxdp.net.napi_native`: a
  buffer from the pool (``xsk_buff_alloc``: the free list, last freed first,
  then the fill ring through its lazy consumer, invalid addresses skipped
  and counted), an rx descriptor reserved (``xskq_prod_reserve_desc``, the
  consumer reloaded only when the cached one says full), ``xsk_buff_free``,
  and ``xsk_flush`` (rx producer and fill consumer published). The state of
  the one socket and pool a native call serves travels in the control
  array ``xc`` (indices :class:`X`), folded back into the Python objects
  after the call;
* the **user's side** (:class:`Rxdrop`, :func:`rxdrop_drain`, :class:`RxdropThread`): the
  loop of the kernel's ``xdpsock -r`` - peek the rx ring, put each buffer
  back on the fill ring, release - without the interpreter. Python's
  :meth:`~pyxdp.xsk.xsk.XskSocket.recv` costs a few microseconds per batch
  whatever the batch; this loop is what a C application costs, and is what
  the seed's measurement ran on its other core. It drives the rings only
  (no :class:`~pyxdp.xsk.xsk.ChunkPool` transitions: a received buffer goes
  straight back to the fill ring, so every chunk stays "given to the
  kernel" as the pool has it).

Index words are loaded with acquire and stored with release semantics
(atomic 4-byte accesses), the kernel's A/B/C/D pairs; the compiler may not
move descriptor writes past the producer store.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from pyxdp.net.native import njit
from pyxdp.net.xsk_queue import KERNEL, RX_RING, USER, Ring
from pyxdp.xsk.xsk import XskSocket

__all__ = ["X", "Rxdrop", "RxdropThread", "rxdrop_drain"]

# numba's on-disk cache of a function is keyed by its own file's stamp, not by the
# helpers it inlines from here: pyxdp.net.napi_native imports this name, renamed
# whenever those helpers change, so that its file changes and its cache is rebuilt.


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
    # the pool's chunk owners (uint8, pyxdp.xsk.queue USER/KERNEL/RX_RING), the rx
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


# -- index words: atomic acquire loads and release stores -----------------------------

def _elem_ptr(context, builder, aryty, ary, idx):  # type: ignore[no-untyped-def]
    a = context.make_array(aryty)(context, builder, ary)
    return cgutils.get_item_pointer(context, builder, aryty, a, [idx])  # type: ignore[no-untyped-call]


def _load_acquire(typingctx, ary, idx):  # type: ignore[no-untyped-def]
    """``smp_load_acquire(&ary[idx])`` of a uint32 array, as int64."""
    sig = types.int64(ary, idx)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        p = _elem_ptr(context, builder, signature.args[0], args[0], args[1])  # type: ignore[no-untyped-call]
        v = builder.load_atomic(p, "acquire", 4)
        return builder.zext(v, ir.IntType(64))

    return sig, codegen


load_acquire: Any = intrinsic(_load_acquire)


def _store_release(typingctx, ary, idx, val):  # type: ignore[no-untyped-def]
    """``smp_store_release(&ary[idx], val)`` of a uint32 array."""
    sig = types.void(ary, idx, val)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        p = _elem_ptr(context, builder, signature.args[0], args[0], args[1])  # type: ignore[no-untyped-call]
        builder.store_atomic(builder.trunc(args[2], ir.IntType(32)), p, "release", 4)
        return context.get_dummy_value()

    return sig, codegen


store_release: Any = intrinsic(_store_release)


def _memcpy(typingctx, dst, src, n):  # type: ignore[no-untyped-def]
    """``memcpy((void *)dst, (void *)src, n)``: byte loops over arrays the compiler
    must assume alias are not vectorised (a 64-byte frame cost 45 ns that way)."""
    sig = types.void(dst, src, n)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        p8 = ir.IntType(8).as_pointer()
        cgutils.raw_memcpy(builder, builder.inttoptr(args[0], p8),  # type: ignore[no-untyped-call]
                           builder.inttoptr(args[1], p8), args[2], 1)
        return context.get_dummy_value()

    return sig, codegen


memcpy: Any = intrinsic(_memcpy)


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


def _load_acquire_at(typingctx, addr):  # type: ignore[no-untyped-def]
    """``smp_load_acquire((u32 *)addr)``, as int64."""
    sig = types.int64(addr)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        p = builder.inttoptr(args[0], ir.IntType(32).as_pointer())
        return builder.zext(builder.load_atomic(p, "acquire", 4), ir.IntType(64))

    return sig, codegen


load_acquire_at: Any = intrinsic(_load_acquire_at)


# -- the datapath's side ----------------------------------------------------------------

@njit(cache=True, nogil=True, _nrt=False)  # once per batch: not inlined at every use
def rx_reclaim(xc):  # type: ignore[no-untyped-def]
    """Load the rx consumer (A): the chunks of the slots the user consumed are the
    user's again. A consumer behind the cached one or past the producer is no index
    the ring can have (the user wrote it): ignored, as
    :meth:`pyxdp.xsk.queue.KernelRingProd.reload_consumer` does."""
    cons = load_acquire_at(xc[X_RX_CONS])
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
            store_release(fq_cons, 0, cc)
            avail = (load_acquire(fq_prod, 0) - cc) & U32
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
    store_release(rx_prod, 0, xc[X_RX_CP])
    store_release(fq_cons, 0, xc[X_FQ_CC])


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


# -- the user's side ----------------------------------------------------------------------

@njit(cache=True, nogil=True, _nrt=False)
def _drain(rx_prod, rx_cons, rx_desc, fq_prod, fq_cons, fq_addr, st, max_n):  # type: ignore[no-untyped-def] # noqa: E501
    """xdpsock's rx_drop until ``max_n`` packets or an empty rx ring (or, for a
    thread, until ``st[3]`` is set): each descriptor's buffer back on the fill
    ring. ``st``: rx consumer, fill producer, packets, stop flag, chunk mask,
    unaligned. Returns the packets taken."""
    rmask = np.int64(len(rx_desc) - 1)
    fmask = np.int64(len(fq_addr) - 1)
    rc = st[0]
    fp = st[1]
    cmask = st[4]
    unaligned = st[5]
    got = 0
    while got < max_n:
        n = (load_acquire(rx_prod, 0) - rc) & U32
        if n == 0:
            if max_n < (1 << 62) or st[3] != 0:
                break
            continue  # a thread: spin (the datapath is on the other core)
        n = min(n, max_n - got)
        # The fill ring has room for every buffer the rx ring holds (it is at least
        # as large and the kernel took these from it), but check as libxdp does.
        fc = load_acquire(fq_cons, 0)
        room = len(fq_addr) - ((fp - fc) & U32)
        n = min(n, room)
        if n <= 0:
            if max_n < (1 << 62) or st[3] != 0:
                break
            continue
        for k in range(n):
            a = np.int64(rx_desc[(rc + k) & rmask, 0])
            fq_addr[(fp + k) & fmask] = (a & MASK48) if unaligned else (a & cmask)
        # The rx slots released before their chunks go back on the fill ring (libxdp's
        # samples do it the other way round): pyxdp's datapath counts a chunk whose rx
        # descriptor is not consumed yet as its own, so the order must be this one.
        rc = (rc + n) & U32
        store_release(rx_cons, 0, rc)
        fp = (fp + n) & U32
        store_release(fq_prod, 0, fp)
        got += n
        st[2] += n  # read by another thread while this one runs
    st[0] = rc
    st[1] = fp
    return got


def _rings(sock: XskSocket) -> tuple[Ring, Ring]:
    rx, fq = sock.rx, sock.fill_ring
    if rx is None or fq is None:
        raise ValueError(f"{sock!r}: rxdrop needs an rx ring and a fill ring")
    return rx, fq


def _args(sock: XskSocket) -> tuple[Any, ...]:
    rx, fq = _rings(sock)
    umem = sock.umem
    st = np.zeros(6, np.int64)
    st[0], st[1] = rx.cached_cons, fq.cached_prod
    st[4] = ~(umem.chunk_size - 1)
    st[5] = 1 if umem.unaligned else 0
    desc = rx.entries.view(np.uint64).reshape(-1, 2)
    return (rx._producer, rx._consumer, desc, fq._producer, fq._consumer, fq.entries, st)


def _resync(sock: XskSocket, st: np.ndarray) -> None:
    """The Python ring objects learn what the native loop consumed and produced."""
    rx, fq = _rings(sock)
    rc, fp = int(st[0]), int(st[1])
    # Both caches reloaded: the peer's index moved too while this loop ran.
    rx.cached_cons = rx._published = rc  # type: ignore[attr-defined]
    rx.cached_prod = rc
    fq.cached_prod = fq._published = fp  # type: ignore[attr-defined]
    fq.cached_cons = int(fq._consumer[0])


class Rxdrop:
    """xdpsock's rx_drop on ``sock`` with the ring views made once: :meth:`drain` per
    round; :meth:`close` (or ``with``) before the socket closes, whose rings it
    holds views of. Python calls on the socket between drains are seen."""

    def __init__(self, sock: XskSocket) -> None:
        self.sock = sock
        self._a: tuple[Any, ...] | None = _args(sock)

    def drain(self, max_packets: int = 1 << 30) -> int:
        """Receive and drop what the rx ring holds (up to ``max_packets``), each buffer
        straight back to the fill ring; returns how many."""
        a = self._a
        if a is None:
            raise ValueError("this Rxdrop is closed")
        rx, fq = _rings(self.sock)
        st = a[-1]
        st[0], st[1] = rx.cached_cons, fq.cached_prod
        got = int(_drain(*a, min(max_packets, (1 << 62) - 1)))
        _resync(self.sock, st)
        return got

    def close(self) -> None:
        self._a = None

    def __enter__(self) -> Rxdrop:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def rxdrop_drain(sock: XskSocket, max_packets: int = 1 << 30) -> int:
    """:meth:`Rxdrop.drain` once: what ``sock``'s rx ring holds, received and dropped
    in machine code; returns how many. Everything else on the socket must be
    idle meanwhile (single consumer)."""
    with Rxdrop(sock) as r:
        return r.drain(max_packets)


class RxdropThread:
    """:func:`rxdrop_drain` on a thread of its own, spinning on the rx ring (the
    application on its own core), until :meth:`stop`; :attr:`packets` counts."""

    def __init__(self, sock: XskSocket) -> None:
        self.sock = sock
        a = _args(sock)
        self._st = a[-1]
        self._t: threading.Thread | None = threading.Thread(
            target=_drain, args=(*a, 1 << 62), daemon=True, name="pyxdp-rxdrop")
        self._t.start()

    @property
    def packets(self) -> int:
        return int(self._st[2])

    def stop(self) -> int:
        """Stop the loop (after what the ring holds now); returns the packets taken.
        The thread's views of the rings are gone afterwards (the socket can close)."""
        if self._t is not None:
            self._st[3] = 1
            self._t.join()
            self._t = None
            _resync(self.sock, self._st)
        return self.packets
