"""AF_XDP transmit in machine code: ``net/xdp/xsk.c``'s ``__xsk_generic_xmit`` (copy
mode) and a zero-copy driver's tx batch (``xsk_tx_peek_release_desc_batch``),
the socket's tx ring consumed by the device's xmit.

The same rules in Python are :meth:`pyxdp.net.xsk.XdpSock._generic_xmit` and
``pyxdp.net.xsk._zc_xmit``, which call these for the devices they can serve:
a NIC that is up with no wire sink to show packets to (the skbs or buffers
are counted as sent and completed; nothing reads their bytes, so none are
copied), and in copy mode a veth whose peer runs a native XDP program
(``veth_xmit``: each packet copied into an skb's order-0 pages of the system
allocator - past a page's packet room a head and page frags,
:mod:`pyxdp.net.skbuff_native` - and queued on the peer's ``xdp_ring``, whose
NAPI copies it into its pool, :data:`~pyxdp.net.frames.KIND_SKB`). Tx
metadata, wire sinks and peers without a program stay on the Python path.

State is the records of :mod:`pyxdp.net.xsk_native` (the pool's, the rings'
and the socket's), the devices' :class:`~pyxdp.net.stats.NetdevStats`, the
system allocator's and the peer ring's records, all in place; the ring protocol and the
checks of what the user wrote are the same as for receive.
"""

from __future__ import annotations

from pyxdp.net.atomic import load_acquire32_at, store_release32_at
from pyxdp.net.frame_ring import ring_lock, ring_put, ring_unlock
from pyxdp.net.frames import KIND_FRAGS, KIND_SKB, NET_SKB_PAD, RingCursor
from pyxdp.net.native import njit
from pyxdp.net.page_pool import PAGE_SIZE
from pyxdp.net.page_pool_lock import alloc_page_ir, put_page_ir
from pyxdp.net.skbuff_native import nr_frags_for, skb_frags_alloc, skb_write
from pyxdp.net.stats import NetdevStats
from pyxdp.net.xdp import MAX_SKB_FRAGS, SKB_SHARED_INFO_SIZE
from pyxdp.net.xdp_sock import XdpSockState
from pyxdp.net.xdp_umem import TX_VALID_OPTIONS
from pyxdp.net.xsk_buff_pool import XskPoolState
from pyxdp.net.xsk_native import (
    MASK48,
    U32,
    XP_CHUNK,
    XP_SIZE,
    XP_UMEM,
    XP_UNALIGNED,
    ld64,
    reload_consumer,
    st64,
)
from pyxdp.net.xsk_queue import Q_CC, Q_CONS, Q_CP, Q_EMPTY, Q_INVALID, Q_MASK, Q_PROD, Q_RING
from pyxdp.uapi.bpf import XDP_PACKET_HEADROOM

__all__ = ["FALLBACK", "generic_xmit", "valid_desc", "zc_xmit"]

XP_TXMD = XskPoolState.index("tx_metadata_len")
S_BUDGET = XdpSockState.index("max_tx_budget")
D_RX_DROPPED = NetdevStats.index("rx_dropped")
D_TX_DROPPED = NetdevStats.index("tx_dropped")
R_COUNT = RingCursor.index("count")
MAX_DMA = PAGE_SIZE - XDP_PACKET_HEADROOM - SKB_SHARED_INFO_SIZE  # a veth page's packet


VALID_OPTIONS = TX_VALID_OPTIONS
CONTD = 1  # XDP_PKT_CONTD
TX_META = 2  # XDP_TX_METADATA
MAX_FRAGS = 17 + 1  # MAX_SKB_FRAGS + the head: more is -EOVERFLOW
D_TX_PACKETS = NetdevStats.index("tx_packets")
D_TX_BYTES = NetdevStats.index("tx_bytes")
FALLBACK = 1  # generic_xmit: a descriptor it leaves to the Python path, nothing done
EMPTY, BUDGET, CQ_FULL, INVALID = 0, 1, 2, 3


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def valid_desc(xp, addr, length, options):  # type: ignore[no-untyped-def]
    """``xp_validate_desc`` (:func:`pyxdp.net.xdp_umem.validate_desc`) of one tx
    descriptor; ``addr`` is the u64 as int64 (negative: past 2**63)."""
    if length == 0 or (options & ~VALID_OPTIONS) != 0:
        return False
    md = xp[XP_TXMD]
    chunk = xp[XP_CHUNK]
    size = xp[XP_SIZE]
    if xp[XP_UNALIGNED] == 0:
        if addr < md:  # below md, or past 2**63: no base inside the UMEM
            return False
        base = addr - md
        return length <= chunk and (base & (chunk - 1)) + length + md <= chunk and base < size
    total = length + md
    data = (addr & MASK48) + ((addr >> 48) & 0xFFFF)
    return total <= chunk and data >= md and data - md < size and data - md + total <= size


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def cons_nb_entries(q, n):  # type: ignore[no-untyped-def]
    """``xskq_cons_nb_entries``: up to ``n`` entries, the producer loaded only if short (C);
    a producer more than a ring ahead is believed for a ring's worth."""
    cc = q[Q_CC]
    if ((q[Q_CP] - cc) & U32) >= n:
        return n
    avail = (load_acquire32_at(q[Q_PROD]) - cc) & U32
    q[Q_CP] = (cc + min(avail, q[Q_MASK] + 1)) & U32
    return min((q[Q_CP] - cc) & U32, n)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def prod_nb_free(q, n):  # type: ignore[no-untyped-def]
    """``xskq_prod_nb_free``: up to ``n`` free slots, the consumer reloaded if short (A)."""
    size = q[Q_MASK] + 1
    free = size - ((q[Q_CP] - q[Q_CC]) & U32)
    if free >= n:
        return n
    reload_consumer(q)
    return min(size - ((q[Q_CP] - q[Q_CC]) & U32), n)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def cq_complete(cq, snap, k):  # type: ignore[no-untyped-def]
    """The addresses of the first ``k`` descriptors read (``snap``) onto the completion
    ring, as many as fit (``xskq_prod_reserve_addr``); published (B)."""
    k = prod_nb_free(cq, k)
    cring = cq[Q_RING]
    cmask = cq[Q_MASK]
    cp = cq[Q_CP]
    for j in range(k):
        st64(cring, (cp + j) & cmask, snap[j, 0])
    cq[Q_CP] = (cp + k) & U32
    store_release32_at(cq[Q_PROD], cq[Q_CP])


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def data_at(xp, addr):  # type: ignore[no-untyped-def]
    """Where a (valid) tx descriptor's data is: its address in the process."""
    a = (addr & MASK48) + ((addr >> 48) & 0xFFFF) if xp[XP_UNALIGNED] else addr
    return xp[XP_UMEM] + a


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def veth_rx(xp, snap, peer, first, last, plen, dry):  # type: ignore[no-untyped-def]
    """``veth_xmit`` -> ``veth_xdp_rx`` of the packet of descriptors ``first..last``
    (``plen`` bytes): an skb in pages of the system allocator (past a page's packet
    room a head and page frags, :mod:`pyxdp.net.skbuff_native`), the fragments
    copied in from ``NET_SKB_PAD``, the skb queued on the peer's ``xdp_ring``; a
    full ring, no pages or more than ``MAX_SKB_FRAGS`` frags drop it (the peer's
    ``rx_dropped``). ``dry``: the allocator already failed (no allocation is tried
    again, as one bulk allocation stops). Returns ``dry``."""
    _veth, _ok, _max, pds, ast, afree, aref, pages, pfn_base, qcols, qcur = peer
    if nr_frags_for(plen) > MAX_SKB_FRAGS:
        pds[D_RX_DROPPED] += 1
        return dry
    loc = veth_rx_page(pds, (ast, afree, aref), qcols, qcur, dry)
    if loc < 0:
        return dry or loc == -1
    if plen > MAX_DMA and not skb_frags_alloc(pages, pfn_base, (ast, afree, aref), loc, plen):
        put_page_ir(ast, afree, aref, loc)
        ring_unlock(qcur)
        pds[D_RX_DROPPED] += 1
        return True
    pos = 0
    for k in range(first, last + 1):
        seg = snap[k, 1] & U32
        skb_write(pages, pfn_base, loc, NET_SKB_PAD, pos, data_at(xp, snap[k, 0]), seg)
        pos += seg
    if plen > MAX_DMA:
        ring_put(qcols, qcur, loc + pfn_base, NET_SKB_PAD, plen, 0, KIND_SKB | KIND_FRAGS)
        ring_unlock(qcur)
    else:
        veth_rx_queue(qcols, qcur, loc + pfn_base, plen)
    return False


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def veth_rx_page(pds, alloc, qcols, qcur, dry):  # type: ignore[no-untyped-def]
    """The first half of ``veth_xdp_rx`` of an skb from another device's transmit onto
    a receiving queue's ring (a veth peer's ``xdp_ring``, lo's backlog): the skb's
    head, an order-0 page of the system allocator (``alloc``: its state words, free
    stack and reference counts, taken under its lock) for the packet at
    ``NET_SKB_PAD`` - never a page of the receiving queue's pool, which that
    queue's NAPI alone allocates from (it copies the skb in,
    ``veth_convert_skb_to_xdp_buff``); -1 when memory ran out, -2 when the ring is
    full or ``dry`` (no allocation tried again), both counted as the receiver's
    ``rx_dropped``. With a page, the ring's lock is held (``ptr_ring_produce``'s
    ``producer_lock``, from the room check on): the caller copies the packet in,
    then :func:`veth_rx_queue` queues it and unlocks."""
    ring_lock(qcur)
    if dry or qcur[R_COUNT] >= qcols.shape[1]:
        ring_unlock(qcur)
        pds[D_RX_DROPPED] += 1
        return -2
    ast, afree, aref = alloc
    loc = alloc_page_ir(ast, afree, aref)
    if loc < 0:
        ring_unlock(qcur)
        pds[D_RX_DROPPED] += 1
        return -1
    return loc


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def veth_rx_queue(qcols, qcur, pfn, plen):  # type: ignore[no-untyped-def]
    """The second half of ``veth_xdp_rx``: the skb's page (``pfn``, ``plen`` bytes at
    ``NET_SKB_PAD``) queued on the ring as an skb (room checked by
    :func:`veth_rx_page`, whose lock is released here)."""
    ring_put(qcols, qcur, pfn, NET_SKB_PAD, plen, 0, KIND_SKB)
    ring_unlock(qcur)


@njit(cache=True, nogil=True, _nrt=False)
def generic_xmit(xp, tx, cq, sk, ds, peer, snap):  # type: ignore[no-untyped-def]
    """``__xsk_generic_xmit`` as :meth:`pyxdp.net.xsk.XdpSock._generic_xmit`: up to
    ``max_tx_budget`` descriptors, stopping (in the kernel's order) where the ring
    is empty, the budget is spent, the completion ring is full or a descriptor is
    invalid (counted, completed, the call ended); ``XDP_PKT_CONTD`` chains make one
    packet, longer than 18 descriptors dropped and counted invalid. ``peer``: the
    veth's (a flag, up, the longest frame it takes, its counters, its queue's pool
    and ring) or, flag 0, a NIC's. A veth packet the peer refuses (down, too
    long) is dropped and ends the call with -EBUSY. Returns 0, -EAGAIN (budget,
    completion ring), -EBUSY, or :data:`FALLBACK` (tx metadata in reach: nothing was
    done, the Python path transmits).

    The descriptors in reach are read once, into ``snap`` (a row per tx ring slot),
    and only that copy is checked and used, as the kernel copies each one out of
    the ring it shares with the user: rewriting the ring meanwhile changes
    nothing."""
    veth = peer[0] != 0
    peer_ok = peer[1] != 0
    max_len = peer[2]
    if len(snap) <= tx[Q_MASK]:  # a row per slot, or no call
        return FALLBACK
    if tx[Q_CP] == tx[Q_CC]:  # get_entries: __xskq_cons_release, __xskq_cons_peek
        store_release32_at(tx[Q_CONS], tx[Q_CC])
        cons_nb_entries(tx, 1)
    cc = tx[Q_CC]
    avail = (tx[Q_CP] - cc) & U32
    budget = sk[S_BUDGET]
    look = min(avail, budget + 1)
    tring = tx[Q_RING]
    tmask = tx[Q_MASK]
    for j in range(look):
        snap[j, 0] = ld64(tring, 2 * ((cc + j) & tmask))
        snap[j, 1] = ld64(tring, 2 * ((cc + j) & tmask) + 1)
    for j in range(look):
        if (snap[j, 1] >> 32) & TX_META:
            return FALLBACK
    stop = avail
    why = EMPTY
    if budget < stop:
        stop = budget
        why = BUDGET
    room = prod_nb_free(cq, look + 1)
    if room < stop:
        stop = room
        why = CQ_FULL
    for j in range(min(look, stop)):
        w = snap[j, 1]
        if not valid_desc(xp, snap[j, 0], w & U32, (w >> 32) & U32):
            stop = j
            why = INVALID
            break
    # The packets: chains of descriptors ending without XDP_PKT_CONTD, before the stop.
    take = 0
    invalid = 0
    start = 0
    plen = 0
    err = 0
    dry = False
    for j in range(stop):
        w = snap[j, 1]
        plen += w & U32
        if (w >> 32) & CONTD:
            continue
        if j + 1 - start > MAX_FRAGS:
            invalid += j + 1 - start
        elif veth and (not peer_ok or plen > max_len):
            ds[D_TX_DROPPED] += 1  # NET_XMIT_DROP: consumed, completed, the call ends
            err = -16  # EBUSY
            take = j + 1
            break
        else:
            ds[D_TX_PACKETS] += 1
            ds[D_TX_BYTES] += plen
            if veth:
                dry = veth_rx(xp, snap, peer, start, j, plen, dry)
        start = j + 1
        plen = 0
        take = j + 1
    if why == INVALID and err == 0:  # the open chain is dropped with the invalid one
        invalid += stop + 1 - take
        take = stop + 1
    tx[Q_INVALID] += invalid
    if take:
        cq_complete(cq, snap, take)
        tx[Q_CC] = (cc + take) & U32
    store_release32_at(tx[Q_CONS], tx[Q_CC])
    if err:
        return err
    if why == EMPTY:
        tx[Q_EMPTY] += 1
    elif why == BUDGET or why == CQ_FULL:
        return -11  # EAGAIN
    return 0


@njit(cache=True, nogil=True, _nrt=False)
def zc_xmit(xp, tx, cq, ds, budget):  # type: ignore[no-untyped-def]
    """A zero-copy NIC's tx for one socket (``xsk_tx_peek_release_desc_batch``): up to
    ``budget`` descriptors (as many as the completion ring has room for) read,
    invalid ones skipped and counted, the valid ones sent and completed. Returns
    1 when the ring holds more (0: drained, or nothing could be read)."""
    nb = cons_nb_entries(tx, budget)
    if nb:
        nb = prod_nb_free(cq, nb)
    if nb == 0:
        return -1  # nothing read: the caller's ``more`` is left as it is
    cc = tx[Q_CC]
    tring = tx[Q_RING]
    tmask = tx[Q_MASK]
    cring = cq[Q_RING]
    cmask = cq[Q_MASK]
    cp = cq[Q_CP]
    k = 0
    for j in range(nb):
        a = ld64(tring, 2 * ((cc + j) & tmask))
        w = ld64(tring, 2 * ((cc + j) & tmask) + 1)
        if not valid_desc(xp, a, w & U32, (w >> 32) & U32):
            tx[Q_INVALID] += 1
            continue
        st64(cring, (cp + k) & cmask, a)
        k += 1
        ds[D_TX_PACKETS] += 1
        ds[D_TX_BYTES] += w & U32
    tx[Q_CC] = (cc + nb) & U32
    store_release32_at(tx[Q_CONS], tx[Q_CC])  # __xskq_cons_release
    more = 1 if cons_nb_entries(tx, 1) > 0 else 0
    cq[Q_CP] = (cp + k) & U32
    store_release32_at(cq[Q_PROD], cq[Q_CP])  # xsk_tx_completed
    return more
