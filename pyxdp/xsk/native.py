"""AF_XDP's user side in machine code: xdpsock's rxdrop loop, for either socket backend.

:class:`Rxdrop`, :func:`rxdrop_drain` and :class:`RxdropThread` run the loop
of the kernel's ``xdpsock -r`` - peek the rx ring, put each buffer back on
the fill ring, release - without the interpreter. Python's
:meth:`~pyxdp.xsk.xsk.XskSocket.recv` costs a few microseconds per batch
whatever the batch; this loop is what a C application costs, and is what the
seed's measurement ran on its other core. It drives the rings only (no
:class:`~pyxdp.xsk.xsk.ChunkPool` transitions: a received buffer goes
straight back to the fill ring, so every chunk stays "given to the kernel"
as the pool has it). The datapath's side of the same rings in machine code
is :mod:`pyxdp.net.xsk_native`.

Index words are loaded with acquire and stored with release semantics
(:mod:`pyxdp.net.atomic`), the ring protocol's A/B/C/D pairs
(:mod:`pyxdp.net.xsk_queue`).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from pyxdp.net.atomic import load_acquire32, store_release32
from pyxdp.net.native import njit
from pyxdp.net.xsk_queue import Q_CC, Q_CP, Q_PUB, Ring
from pyxdp.net.xsk_queue import U32_MASK as U32
from pyxdp.uapi.if_xdp import XSK_UNALIGNED_BUF_ADDR_MASK as MASK48
from pyxdp.xsk.xsk import XskSocket

__all__ = ["Rxdrop", "RxdropThread", "rxdrop_drain"]



@njit(cache=True, nogil=True, _nrt=False)
def _drain(rx_prod, rx_cons, rx_desc, fq_prod, fq_cons, fq_addr, rxq, fqq, st, max_n):  # type: ignore[no-untyped-def] # noqa: E501
    """xdpsock's rx_drop until ``max_n`` packets or an empty rx ring (or, for a
    thread, until ``st[1]`` is set): each descriptor's buffer back on the fill
    ring. ``rxq``/``fqq``: the user's :class:`~pyxdp.net.xsk_queue.XskQueueState`
    of the rx and fill rings, kept in step in place; ``st``: packets, stop flag,
    chunk mask, unaligned. Returns the packets taken."""
    rmask = np.int64(len(rx_desc) - 1)
    fmask = np.int64(len(fq_addr) - 1)
    rc = rxq[Q_CC]
    fp = fqq[Q_CP]
    fc = fqq[Q_CC]
    cmask = st[2]
    unaligned = st[3]
    got = 0
    while got < max_n:
        n = (load_acquire32(rx_prod, 0) - rc) & U32
        if n == 0:
            if max_n < (1 << 62) or st[1] != 0:
                break
            continue  # a thread: spin (the datapath is on the other core)
        n = min(n, max_n - got)
        # The fill ring has room for every buffer the rx ring holds (it is at least
        # as large and the kernel took these from it), but check as libxdp does.
        fc = load_acquire32(fq_cons, 0)
        room = len(fq_addr) - ((fp - fc) & U32)
        n = min(n, room)
        if n <= 0:
            if max_n < (1 << 62) or st[1] != 0:
                break
            continue
        for k in range(n):
            a = np.int64(rx_desc[(rc + k) & rmask, 0])
            fq_addr[(fp + k) & fmask] = (a & MASK48) if unaligned else (a & cmask)
        # The rx slots released before their chunks go back on the fill ring (libxdp's
        # samples do it the other way round): pyxdp's datapath counts a chunk whose rx
        # descriptor is not consumed yet as its own, so the order must be this one.
        rc = (rc + n) & U32
        store_release32(rx_cons, 0, rc)
        rxq[Q_CC] = rc
        rxq[Q_PUB] = rc
        fp = (fp + n) & U32
        store_release32(fq_prod, 0, fp)
        fqq[Q_CP] = fp
        fqq[Q_PUB] = fp
        got += n
        st[0] += n  # read by another thread while this one runs
    # The caches as the loop leaves them: rx empty (reloaded at the next peek), the
    # fill ring's consumer as last loaded.
    rxq[Q_CP] = rc
    fqq[Q_CC] = fc
    return got


def _rings(sock: XskSocket) -> tuple[Ring, Ring]:
    rx, fq = sock.rx, sock.fill_ring
    if rx is None or fq is None:
        raise ValueError(f"{sock!r}: rxdrop needs an rx ring and a fill ring")
    return rx, fq


def _args(sock: XskSocket) -> tuple[Any, ...]:
    rx, fq = _rings(sock)
    umem = sock.umem
    st = np.zeros(4, np.int64)
    st[2] = ~(umem.chunk_size - 1)
    st[3] = 1 if umem.unaligned else 0
    desc = rx.entries.view(np.uint64).reshape(-1, 2)
    return (rx._producer, rx._consumer, desc, fq._producer, fq._consumer, fq.entries,
            rx.q.words, fq.q.words, st)


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
        return int(_drain(*a, min(max_packets, (1 << 62) - 1)))

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
        return int(self._st[0])

    def stop(self) -> int:
        """Stop the loop (after what the ring holds now); returns the packets taken.
        The thread's views of the rings are gone afterwards (the socket can close)."""
        if self._t is not None:
            self._st[1] = 1
            self._t.join()
            self._t = None
        return self.packets
