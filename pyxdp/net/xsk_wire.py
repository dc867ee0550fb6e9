"""A device whose wire is an AF_XDP socket of the host kernel: the user's side of
``xsk_ring_prod``/``xsk_ring_cons`` (libxdp's ``xsk.h``) for transmit, in machine code.

A pyxdp NIC backed by a Linux interface (:mod:`pyxdp.xsk.live`) transmits by
writing descriptors into the socket's tx ring, as a driver's ``ndo_xdp_xmit``
fills its TX descriptors: the frame is copied into a free UMEM chunk of the
socket's transmit set, the descriptor written, and the producer published at
the end of the bulk (the kernel's copy-mode ``xsk_generic_xmit`` then sends on
``sendto``, one kick per round). Chunks come back through the completion ring,
reaped when the free stack runs dry. The native poll loop
(:mod:`pyxdp.net.napi_native`) calls :func:`wire_xmit` for XDP_TX and for
redirects to such a device, so neither goes back to Python.

State is the rings' own records (:class:`~pyxdp.net.xsk_queue.XskQueueState` of
the tx and completion rings, whose cached indices and ``published`` the
Python ring objects read too) and :class:`XskWireState`, reached by address:
the free stack of transmit chunks and the counters. Every address the
completion ring gives back is checked against the UMEM before it is used.
Several producers per wire (polls on several CPUs, without the host lock, and
the Python transmit paths): each holds the wire's lock (``__netif_tx_lock`` of a
driver's XDP queue shared between CPUs), a word of :class:`XskWireState` taken
with ``cmpxchg``, over the frames it writes and their publication
(:func:`wire_lock`; :func:`wire_xmit_rows` and :func:`wire_reap` take it
themselves).
"""

from __future__ import annotations

from pyxdp.net.atomic import (
    i64_view,
    load_acquire32_at,
    memcpy,
    spin_lock,
    spin_unlock,
    store_release32_at,
)
from pyxdp.net.native import njit
from pyxdp.net.record import Field, Record
from pyxdp.net.xsk_queue import Q_CC, Q_CONS, Q_CP, Q_MASK, Q_PROD, Q_PUB, Q_RING, Q_SIZE

__all__ = ["XskWireState", "wire_lock", "wire_publish", "wire_reap", "wire_unlock", "wire_xmit",
           "wire_xmit_rows"]


class XskWireState(Record):
    """One transmit wire: where its rings' records are, its UMEM, the free stack of
    transmit chunks (addresses of chunk starts), and what it counted."""

    txq_at = Field()  # the tx ring's XskQueueState words
    cq_at = Field()  # the completion ring's
    umem_at = Field()
    umem_size = Field()
    chunk_size = Field()
    free_at = Field()  # int64 chunk addresses (a stack)
    nfree = Field()
    cap = Field()  # chunks the stack can hold (the transmit set)
    sent = Field()  # descriptors written
    full = Field()  # frames refused: no chunk or no tx slot (the caller drops them)
    completed = Field()  # chunks back from the completion ring
    bad_completions = Field()  # completion addresses outside the UMEM (ignored)
    kicked = Field()  # the tx producer at the last kick
    lock = Field()  # the tx lock: 0 free, 1 held


W_TXQ = XskWireState.index("txq_at")
W_CQ = XskWireState.index("cq_at")
W_UMEM = XskWireState.index("umem_at")
W_USIZE = XskWireState.index("umem_size")
W_CHUNK = XskWireState.index("chunk_size")
W_FREE = XskWireState.index("free_at")
W_NFREE = XskWireState.index("nfree")
W_CAP = XskWireState.index("cap")
W_SENT = XskWireState.index("sent")
W_FULL = XskWireState.index("full")
W_DONE = XskWireState.index("completed")
W_BAD = XskWireState.index("bad_completions")
W_LOCK = XskWireState.index("lock")
W_SIZE = len(XskWireState.FIELDS)
U32 = 0xFFFF_FFFF


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def wire_lock(w):  # type: ignore[no-untyped-def]
    """``__netif_tx_lock`` of wire ``w`` (its record's words)."""
    spin_lock(w, W_LOCK)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def wire_unlock(w):  # type: ignore[no-untyped-def]
    spin_unlock(w, W_LOCK)


@njit(cache=True, nogil=True, _nrt=False)
def wire_reap(w):  # type: ignore[no-untyped-def]
    """:func:`_reap` under the wire's lock."""
    wire_lock(w)
    n = _reap(w)
    wire_unlock(w)
    return n


@njit(cache=True, nogil=True, _nrt=False)
def _reap(w):  # type: ignore[no-untyped-def]
    """Reap the completion ring: its chunks back onto the free stack (``xsk_ring_cons__peek``
    then ``__release``); returns how many. The caller holds the wire's lock."""
    cq = i64_view(w[W_CQ], 1, Q_SIZE)[0]
    prod = load_acquire32_at(cq[Q_PROD])
    cons = cq[Q_CC]
    n = (prod - cons) & U32
    ring = i64_view(cq[Q_RING], 1, cq[Q_MASK] + 1)[0]
    free = i64_view(w[W_FREE], 1, w[W_CAP])[0]
    nfree = w[W_NFREE]
    chunk = w[W_CHUNK]
    for k in range(n):
        addr = ring[(cons + k) & cq[Q_MASK]]
        if addr < 0 or addr >= w[W_USIZE] or nfree >= w[W_CAP]:
            w[W_BAD] += 1
            continue
        free[nfree] = addr - addr % chunk
        nfree += 1
    w[W_NFREE] = nfree
    w[W_DONE] += n
    cons = (cons + n) & U32
    cq[Q_CC] = cons
    cq[Q_CP] = prod
    cq[Q_PUB] = cons
    store_release32_at(cq[Q_CONS], cons)
    return n


@njit(cache=True, nogil=True, _nrt=False)
def wire_xmit(w, src, length):  # type: ignore[no-untyped-def]
    """``length`` bytes at address ``src`` into a free chunk and a tx descriptor (not yet
    published: :func:`wire_publish`); False when no chunk or no slot is free. The
    caller holds the wire's lock."""
    if w[W_NFREE] == 0:
        _reap(w)
    txq = i64_view(w[W_TXQ], 1, Q_SIZE)[0]
    size = txq[Q_MASK] + 1
    cp = txq[Q_CP]
    if size - ((cp - txq[Q_CC]) & U32) == 0:
        txq[Q_CC] = load_acquire32_at(txq[Q_CONS])  # (A) the consumer, only when full
    if w[W_NFREE] == 0 or size - ((cp - txq[Q_CC]) & U32) == 0 \
            or length > w[W_CHUNK] or length <= 0:
        w[W_FULL] += 1
        return False
    nfree = w[W_NFREE] - 1
    addr = i64_view(w[W_FREE], 1, w[W_CAP])[0][nfree]
    w[W_NFREE] = nfree
    memcpy(w[W_UMEM] + addr, src, length)
    slot = i64_view(txq[Q_RING], size, 2)[cp & txq[Q_MASK]]  # struct xdp_desc
    slot[0] = addr
    slot[1] = length  # len (low word), options 0 (high word)
    txq[Q_CP] = (cp + 1) & U32
    w[W_SENT] += 1
    return True


@njit(cache=True, nogil=True, _nrt=False)
def wire_publish(w):  # type: ignore[no-untyped-def]
    """The descriptors written so far become the kernel's (``xsk_ring_prod__submit``, B)."""
    txq = i64_view(w[W_TXQ], 1, Q_SIZE)[0]
    if txq[Q_PUB] != txq[Q_CP]:
        txq[Q_PUB] = txq[Q_CP]
        store_release32_at(txq[Q_PROD], txq[Q_CP])


@njit(cache=True, nogil=True, _nrt=False)
def wire_xmit_rows(w, pages, rows, offs, lens):  # type: ignore[no-untyped-def]
    """:func:`wire_xmit` of row ``rows[i]`` of ``pages`` from ``offs[i]`` for ``lens[i]``
    bytes, in order until one is refused, then published, under the wire's lock;
    returns how many went."""
    base = pages.ctypes.data
    stride = pages.strides[0]
    k = 0
    wire_lock(w)
    for i in range(len(rows)):
        if not wire_xmit(w, base + rows[i] * stride + offs[i], lens[i]):
            break
        k += 1
    wire_publish(w)
    wire_unlock(w)
    return k

