"""AF_XDP sockets, the kernel's side: ``net/xdp/xsk.c`` (and the redirect and flush of
``xskmap.c``) on pyxdp's datapath.

:class:`XdpSock` is ``struct xdp_sock``: a socket bound to a queue of a pyxdp
device (:class:`~pyxdp.net.netdevice.NetDevice`). Its four rings live in
anonymous shared memory: the user drives its side with libxdp's
producer/consumer (the user API's socket over this datapath is an
:class:`XdpSock` too), the datapath the kernel's lazy side
(:class:`~pyxdp.net.xsk_queue.KernelRingCons`/``KernelRingProd``) of the same
bytes. Buffer pools and the zero-copy NIC side are
:mod:`pyxdp.net.xsk_buff_pool`; receive in machine code is
:mod:`pyxdp.net.xsk_native`.

Modelled as Linux 6.18 does it (and as measured there, see
``tests/kernel/test_xsk_datapath_kernel.py``):

* ``bind`` (``xsk_bind``/``xp_assign_dev``), errnos in the kernel's order:
  EINVAL for unknown flags, EBUSY when already bound, ENODEV, EINVAL without
  rx and tx rings, ``XDP_SHARED_UMEM`` with other flags, with a UMEM of its
  own or (same queue) with fill/completion rings of its own; EBADF when the
  socket shared with is not bound; EINVAL without UMEM or fill/completion
  rings, for ``XDP_COPY`` with ``XDP_ZEROCOPY`` and for a queue id past
  ``max(rx, tx queues)``; EBUSY when the queue has a buffer pool already;
  EOPNOTSUPP for ``XDP_ZEROCOPY`` where the device cannot (pyxdp veth, like
  Linux veth; pyxdp NICs can, into aligned UMEMs without ``XDP_USE_SG``);
  no mode flag tries zero-copy and falls back to copy. ``XDP_SHARED_UMEM``
  on the same device and queue shares the buffer pool (fill and completion
  rings), elsewhere it makes a pool of its own over the same UMEM, in the
  UMEM's mode.
* receive, copy mode (``xsk_rcv_check`` + ``__xsk_rcv``), one numpy pass per
  socket and batch: not bound -ENXIO; another device or queue -EINVAL; a
  frame longer than ``chunk_size - headroom - 256`` -ENOSPC (``rx_dropped``);
  then a buffer from the pool (its free list, then the fill ring; invalid
  fill addresses are skipped): none -ENOMEM (``rx_dropped`` and
  ``rx_fill_ring_empty_descs``); then an rx slot: none -ENOBUFS
  (``rx_ring_full``) and the buffer stays in the fill ring (6.18 consumes
  no fill entry for it, measured). Metadata and data are copied to
  ``chunk + headroom + 256`` (metadata just before), the rx descriptors are
  published at ``xdp_do_flush`` (``xsk_flush``, which also publishes the fill
  ring's consumer index). With ``XDP_USE_SG`` a longer frame is split over
  several buffers (``XDP_PKT_CONTD``).
* receive, zero-copy (pyxdp NICs): the queue takes its buffers from the
  socket's fill ring instead of its page pool (``MEM_TYPE_XSK_BUFF_POOL``):
  the NIC's DMA writes each frame at ``chunk + headroom + 256`` of a UMEM
  chunk, the program runs on the UMEM in place (the UMEM is a region of the
  host's page memory, :class:`~pyxdp.net.xsk_buff_pool.UmemPages`), ``XDP_REDIRECT`` to the socket
  hands the chunk over as it is (``xsk_rcv_zc``: the descriptor points at
  ``data``, wherever the program moved it), ``XDP_DROP`` recycles it in the
  pool (``xsk_buff_free``), ``XDP_PASS`` copies it into an skb and
  ``XDP_TX``/redirect elsewhere into an order-0 page
  (``xdp_convert_zc_to_xdp_frame``). A frame that finds no buffer is dropped
  by the NIC (``rx_dropped`` of the device, one
  ``rx_fill_ring_empty_descs`` per DMA batch) and, with need-wakeup, the fill
  ring's ``XDP_RING_NEED_WAKEUP`` is set until buffers come.
* transmit, copy mode (``__xsk_generic_xmit``), per kick (``sendto``/
  ``poll``): at most ``max_tx_budget`` (32, ``set_tx_budget``) descriptors,
  then -EAGAIN; a full completion ring -EAGAIN; the drain that empties the
  ring counts one ``tx_ring_empty_descs``; an invalid descriptor
  (``xp_validate_desc``) takes a completion slot, is counted in
  ``tx_invalid_descs``, *completes* (6.18 puts its address on the completion
  ring, measured) and ends the call; each packet becomes an skb that the
  device transmits (``dev.xmit_skbs``: a veth's peer receives it), and its
  addresses complete once it is sent; a veth whose peer is down or too small
  an MTU drops it (-EBUSY, completed). ``XDP_PKT_CONTD`` chains make one
  packet; ``XDP_TX_METADATA`` needs ``tx_metadata_len`` (else -EINVAL and
  the ring is stuck on that descriptor), asks for a software checksum
  (``XDP_TXMD_FLAGS_CHECKSUM``) or a completion timestamp.
* transmit, zero-copy (``xsk_tx_peek_release_desc_batch``): a wakeup makes
  the NIC send up to its ring size of descriptors straight from the UMEM;
  invalid descriptors are skipped without completing; the ring keeps
  ``XDP_RING_NEED_WAKEUP`` (the NIC needs a kick for every burst).
* in machine code: with the host's native loop, a queue with exactly one
  socket receives in :mod:`pyxdp.net.napi_native` (copy and zero-copy,
  errors included, and a zero-copy queue's XDP_PASS and XDP_TX), and
  transmit runs in :mod:`pyxdp.net.xsk_native_tx` (zero-copy to a NIC; copy
  mode without tx metadata to a NIC or a veth whose peer runs a native
  program; no wire sinks), by the same rules, on the same state: the socket's
  :class:`XdpSockState`, its pool's and rings' records
  (:class:`~pyxdp.net.xsk_buff_pool.XskPoolState`,
  :class:`~pyxdp.net.xsk_queue.XskQueueState`) are what both paths read and
  write, in place (``tests/test_xsk_native.py`` checks both paths give the
  same descriptors, bytes, statistics and trace counters).
* what the user writes is checked before use, here and in machine code alike:
  fill entries outside the UMEM or naming a chunk the datapath holds (pool
  ``kown``: in a buffer, on the free list, in an unconsumed rx slot; zero-copy:
  the kernel's on another queue) are skipped and counted invalid; a producer
  more than a ring ahead is believed for a ring's worth per load; an rx or
  completion consumer outside what was produced is ignored
  (``docs/SEMANTICS.md``, ``tests/test_xsk_hostile.py``).
* need-wakeup: copy mode never flags the fill ring and always flags tx;
  ``XDP_STATISTICS`` as ``xsk_getsockopt`` fills it; ``XDP_OPTIONS``.
* ``poll``: copy-mode tx is driven as by ``sendto``; POLLIN when the rx ring
  has entries, POLLOUT while the tx ring is at most half full; with a
  timeout and nothing ready, one softirq round of the host runs first
  (pyxdp's NAPI runs in the caller's thread).

pyxdp has no file descriptors: a socket gets an ``fd``, a number its
host's userspace backend resolves in XSKMAP updates (as a program's id is
its "fd" in a devmap). Closing a socket removes it from every XSKMAP
(``xsk_delete_from_maps``).

**bpf_redirect_xsk** (a pyxdp extension: the bpf-next series of January
2021, never merged): ``bind`` registers the first socket with an rx ring
bound to an rx queue on that queue (``netdev_rx_queue``), and the helper
``bpf_redirect_xsk(ctx, flags)`` (id :data:`~pyxdp.net.filter.BPF_FUNC_REDIRECT_XSK`)
redirects to it, or returns ``flags & 3`` when the queue has none. The
redirect reaches :func:`xsk_map_redirect` with no map (map id 0), the queue
as index. The kernel refuses the helper id (``invalid func``): programs
using it run on pyxdp only.

Simplified: one CPU per thread, no busy polling, no ``XDP_MAX_TX_SKB_BUDGET``
above the tx ring size check; a pool is released at once when its last
socket closes (the kernel defers it ~15 ms); a copy-mode tx chain whose last
descriptor still has ``XDP_PKT_CONTD`` is left in the ring until its end
arrives (the kernel consumes it into a pending skb); an invalid descriptor
inside a chain drops the whole chain (each counted invalid and completed);
a zero-copy frame's ``data_hard_start`` is its chunk's start (the UMEM
headroom counts as XDP headroom); zero-copy tx of a pool shared by several
sockets drains them one after the other (not 32 each round robin); sockets
without an rx ring refuse redirected frames with -ENOBUFS.
"""

from __future__ import annotations

import errno as _errno
import struct
import time
from typing import Any, Final, Protocol, cast

import numpy as np
import numpy.typing as npt

from pyxdp.maps.base import map_by_id
from pyxdp.net.filter import register_flush, register_redirect
from pyxdp.net.frames import Frames
from pyxdp.net.record import Alias
from pyxdp.net.stack import SkbBatch
from pyxdp.net.xdp_sock import XdpSockState
from pyxdp.net.xdp_umem import UmemArea, XskError
from pyxdp.net.xsk_buff_pool import (
    XDP_WAKEUP_RX,
    XDP_WAKEUP_TX,
    XdpUmem,
    XskBuffPool,
    XskHost,
    XskNetDevice,
    XskRxQueue,
    xp_assign_dev,
)
from pyxdp.net.xsk_queue import (
    KernelRingCons,
    KernelRingProd,
    Ring,
    RingKind,
    RingMem,
    ring_view,
)
from pyxdp.uapi.bpf import BpfMapType, XdpAction
from pyxdp.uapi.if_xdp import (
    XDP_OPTIONS_ZEROCOPY,
    XDP_RING_NEED_WAKEUP,
    XdpBindFlag,
    XdpDescOption,
    XdpStatistics,
    XdpTxmdFlag,
)

__all__ = [
    "BOUND",
    "READY",
    "TX_BATCH_SIZE",
    "UNBOUND",
    "NativeRx",
    "XdpSockState",
    "XdpSock",
    "XskFlushList",
    "xsk_flush",
    "xsk_generic_redirect",
    "xsk_map_redirect",
    "xsk_native_rx",
    "xsk_native_socket",
]

TX_BATCH_SIZE: Final = 32  # net/xdp/xsk.c: descriptors one copy-mode sendto sends
MAX_SKB_FRAGS: Final = 17
XSK_TX_METADATA_SIZE: Final = 24  # struct xsk_tx_metadata
_TXMD_VALID: Final = int(XdpTxmdFlag.XDP_TXMD_FLAGS_TIMESTAMP | XdpTxmdFlag.XDP_TXMD_FLAGS_CHECKSUM
                         | XdpTxmdFlag.XDP_TXMD_FLAGS_LAUNCH_TIME)
_CONTD: Final = int(XdpDescOption.XDP_PKT_CONTD)
_TX_META: Final = int(XdpDescOption.XDP_TX_METADATA)
_BIND_FLAGS: Final = int(XdpBindFlag.XDP_SHARED_UMEM | XdpBindFlag.XDP_COPY
                         | XdpBindFlag.XDP_ZEROCOPY | XdpBindFlag.XDP_USE_NEED_WAKEUP
                         | XdpBindFlag.XDP_USE_SG)
NIC_TX_RING: Final = 1024  # descriptors a zero-copy NIC sends per wakeup
XDP_TX: Final = int(XdpAction.XDP_TX)  # xdp_exception's verdict for a failed conversion
POLLIN: Final = 0x001
POLLOUT: Final = 0x004
VLAN_HLEN: Final = 4
ETH_HLEN: Final = 14

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]

READY, BOUND, UNBOUND = 0, 1, 2  # xs->state


def _err(op: str, err: int, detail: str = "") -> XskError:
    return XskError(op, err, detail)


class XskFlushList(Protocol):
    """A poll's flush lists (``pyxdp.net.filter.BulkQueues``) as AF_XDP uses them: the
    sockets with descriptors to publish at ``xdp_do_flush``."""

    xsk: list[object]


# --------------------------------------------------------------------------
# Redirect and flush
# --------------------------------------------------------------------------

def xsk_map_redirect(host: XskHost, dev: XskNetDevice, rq: XskRxQueue | None, xskmap: Any,
                     frames: Frames, idx: I64, bq: XskFlushList) -> I64:
    """``__xsk_map_redirect`` for a batch: each frame to the socket of XSKMAP slot
    ``idx`` (``xskmap`` None: ``bpf_redirect_xsk``, the socket registered on queue
    ``idx`` of ``dev``); 0 or -errno per frame. Every frame is consumed: copied
    and freed, handed over (zero-copy), or freed after a refusal."""
    n = len(frames)
    err = np.zeros(n, np.int64)
    queue = rq.index if rq is not None else 0
    handed = np.zeros(n, np.bool_)
    if (idx == idx[0]).all():  # the usual poll: one socket
        groups = [(int(idx[0]), np.arange(n))]
    else:
        keys, inv = np.unique(idx, return_inverse=True)
        groups = [(int(key), np.flatnonzero(inv == k)) for k, key in enumerate(keys.tolist())]
    for key, sel in groups:
        if xskmap is None:
            xs = host.xsk_rx.get((dev.ifindex, key))
        else:
            xs = xskmap.socket_at(key)
        if not isinstance(xs, XdpSock):
            # The slot (or the queue's registration) went away after the helper ran.
            err[sel] = -_errno.EINVAL
            continue
        e, h = xs._rcv(dev, rq, queue, frames.select(sel))
        err[sel] = e
        handed[sel] = h
        if (e == 0).any() and xs not in bq.xsk:
            bq.xsk.append(xs)  # the flush list (list_add: flushed last queued first)
    if not handed.all():
        host.drop_frames(frames.select(~handed), rq, direct=rq is not None)
    return err


def xsk_flush(host: XskHost, bq: XskFlushList) -> None:
    """``__xsk_map_flush``: publish each socket's rx descriptors and its pool's fill
    ring consumer index (``xsk_flush``), last queued first."""
    socks, bq.xsk = bq.xsk, []
    for xs in reversed(socks):
        if isinstance(xs, XdpSock):
            xs._flush()


def xsk_generic_redirect(dev: XskNetDevice, xs: Any, batch: SkbBatch) -> I64:
    """``xsk_generic_rcv`` for skbs (generic XDP): checked and copied like native
    copy mode, published per packet; 0 or -errno per skb (the caller frees them all)."""
    n = len(batch)
    if not isinstance(xs, XdpSock):
        return np.full(n, -_errno.EINVAL, np.int64)
    err = np.zeros(n, np.int64)
    for q in np.unique(batch.queue).tolist():
        sel = np.flatnonzero(batch.queue == q)
        sub = SkbBatch(batch.data[sel], batch.length[sel], batch.ifindex[sel],
                       batch.queue[sel], [batch.meta[i] if i < len(batch.meta) else b""
                                          for i in sel.tolist()])
        err[sel] = xs._rcv_skbs(dev, int(q), sub)
    return err


# --------------------------------------------------------------------------
# Receive in the native poll loop (pyxdp.net.xsk_native)
# --------------------------------------------------------------------------

class NativeRx:
    """What a native poll call needs to receive into a queue's one AF_XDP socket: the
    records of the pool, its fill ring, the socket's rx ring and the socket (used in
    place), the program's XSKMAPs by address (``xm``: id, max_entries, the map's
    ``entries``), and the call's trace sums ``xt``
    (:data:`pyxdp.net.xsk_native.T_NOSPC` ...), which the tracer reads in place.
    Made once per (socket, pool, maps) and kept by the queue: nothing is loaded
    before a call nor folded back after it."""

    def __init__(self, sock: XdpSock, pool: XskBuffPool, maps: list[Any]) -> None:
        from pyxdp.net.xsk_native import T_SLOT
        rx = sock.krx
        assert rx is not None
        self.sock, self.pool, self.maps = sock, pool, maps
        self.key = (sock, pool, tuple(m.id for m in maps))
        self.ids = [m.id for m in maps] + [0]  # per trace slot: the map id traced
        self.mode = 2 if pool.region is not None else 1
        self.xm = np.array([(m.id, m.max_entries, m.entries.ctypes.data) for m in maps],
                           np.int64).reshape(len(maps), 3)
        self.xt = np.zeros(T_SLOT + len(maps) + 1, np.int64)
        self.args = (self.mode, pool.state.words, pool.fq.q.words, rx.q.words,
                     sock.sk.words, self.xm, self.xt)


def xsk_native_socket(rq: XskRxQueue) -> XdpSock | None:
    """The socket the native poll loop receives into on ``rq``: the one socket with an
    rx ring bound to it (through its pool) without ``XDP_USE_SG``; else None
    (AF_XDP redirects then take the Python path)."""
    dev = rq.dev
    pool = dev.host.xsk_pools.get((dev.ifindex, rq.index))
    if not isinstance(pool, XskBuffPool) or len(pool.socks) != 1:
        return None
    sock = cast(XdpSock, pool.socks[0])  # the pool's sockets are the ones bind() added
    if sock.state != BOUND or sock.krx is None or sock.sg or sock.dev is not dev:
        return None
    return sock


def xsk_native_rx(rq: XskRxQueue, maps: list[Any], last: NativeRx | None) -> NativeRx | None:
    """The native receive state for ``rq``'s :func:`xsk_native_socket`, or None.
    ``maps``: the program's XSKMAPs; ``last``: what the previous call used, kept
    while it still applies."""
    sock = xsk_native_socket(rq)
    if sock is None:
        return None
    pool = sock.xpool
    assert pool is not None
    if last is None or last.key != (sock, pool, tuple(m.id for m in maps)):
        last = NativeRx(sock, pool, maps)
    return last


# --------------------------------------------------------------------------
# The socket, the kernel's side
# --------------------------------------------------------------------------

class XdpSock:
    """``struct xdp_sock``: an AF_XDP socket as the datapath sees it.

    The kernel's side of its rings (``krx``/``ktx``, and its pool's fill and
    completion rings), its binding to a device queue and buffer pool, receive
    (``xsk_rcv``, ``xsk_generic_rcv``), transmit (``xsk_sendmsg``), ``xsk_poll``,
    ``XDP_STATISTICS``/``XDP_OPTIONS`` and release. The user API's socket over
    pyxdp's datapath (``PyxdpXskSocket``) is one of these and an ``XskSocket``
    at once: the same object is what XSKMAPs and ``bpf_redirect_xsk`` hold.

    ``umem`` is registered (``XDP_UMEM_REG``) unless ``shared`` is given, a
    bound socket whose registration this one shares (``XDP_SHARED_UMEM``;
    ``share_rings``: the same device and queue, so the fill and completion
    rings too). ``user_rings`` are the classes of the user's views of the
    rings this socket creates (producer, consumer), made over the same
    memory as the kernel's views.
    """

    umem: UmemArea
    fd = Alias(XdpSockState, "fd", via="sk")  # the host backend's number (XSKMAP updates)
    ifindex = Alias(XdpSockState, "ifindex", via="sk")
    queue_id = Alias(XdpSockState, "queue_id", via="sk")
    rx_dropped = Alias(XdpSockState, "rx_dropped", via="sk")
    rx_queue_full = Alias(XdpSockState, "rx_queue_full", via="sk")
    max_tx_budget = Alias(XdpSockState, "max_tx_budget", via="sk")

    def __init__(self, host: XskHost, umem: UmemArea, *, sg: bool, fill_size: int,
                 comp_size: int, rx_size: int, tx_size: int, shared: XdpSock | None,
                 share_rings: bool, user_rings: tuple[type[Ring], type[Ring]]) -> None:
        self.host = host
        self.sg = sg
        self.state = READY
        self.sk = XdpSockState(max_tx_budget=TX_BATCH_SIZE)
        self._tx_snap: I64 | None = None  # native copy-mode tx: descriptors read
        self.dev: XskNetDevice | None = None
        self.zc = False
        self.xpool: XskBuffPool | None = None
        self.shared_with = shared
        self._maps: list[Any] = []  # XSKMAPs holding this socket
        self._mems: list[RingMem] = []
        self.kumem: XdpUmem
        self._fq_mem: RingMem | None
        self._cq_mem: RingMem | None
        if shared is not None:
            if shared.state != BOUND:
                raise _err("bind", _errno.EBADF, "the socket to share a UMEM with is not bound")
            self.kumem = shared.kumem
        else:
            self.kumem = XdpUmem(umem)
        self.umem = umem
        for size in (fill_size, comp_size, rx_size, tx_size):
            if size < 0 or (size and size & (size - 1)):
                raise _err("setsockopt(ring size)", _errno.EINVAL,
                           f"ring size {size} is not a power of two")
        prod, cons = user_rings
        rx = self._ring(rx_size, "desc", cons, KernelRingProd)
        tx = self._ring(tx_size, "desc", prod, KernelRingCons)
        if tx is not None:  # "Tx needs to be explicitly woken up the first time"
            tx.user.set_flags(XDP_RING_NEED_WAKEUP)
        self._rx_mem, self._tx_mem = rx, tx
        if share_rings:
            assert shared is not None
            self._fq_mem, self._cq_mem = shared._fq_mem, shared._cq_mem
            for m in (self._fq_mem, self._cq_mem):
                if m is not None:
                    m.users += 1
                    self._mems.append(m)
            self._own_fq = False
        else:
            self._fq_mem = self._ring(fill_size, "addr", prod, KernelRingCons)
            self._cq_mem = self._ring(comp_size, "addr", cons, KernelRingProd)
            self._own_fq = True
        self.krx = ring_view(rx, "kernel", KernelRingProd)
        self.ktx = ring_view(tx, "kernel", KernelRingCons)

    def _ring(self, entries: int, kind: RingKind, user: type[Ring],
              kernel: type[Ring]) -> RingMem | None:
        if not entries:
            return None
        m = RingMem(entries, kind, user, kernel)
        self._mems.append(m)
        return m

    # -- bind -----------------------------------------------------------------------
    @property
    def bound(self) -> bool:
        return self.state == BOUND

    def bind(self, dev: XskNetDevice | str | int, queue_id: int, flags: int) -> None:
        """``xsk_bind`` (``bind(sockaddr_xdp)``) to queue ``queue_id`` of ``dev`` (a
        device of this socket's host, or its name or ifindex) with ``sxdp_flags``
        ``flags``; raises :class:`XskError` with the kernel's errno."""
        fl = int(flags)
        op = f"bind(AF_XDP {getattr(dev, 'name', dev)} queue {queue_id})"
        if fl & ~_BIND_FLAGS:
            raise _err(op, _errno.EINVAL, f"unknown flags {fl & ~_BIND_FLAGS:#x}")
        if self.state != READY:
            raise _err(op, _errno.EBUSY, "the socket is already bound")
        if self.host.closed:  # its devices are gone
            raise _err(op, _errno.ENODEV, f"host {self.host.name!r} is closed")
        d = self._device(dev, op)
        if self.krx is None and self.ktx is None:
            raise _err(op, _errno.EINVAL, "the socket has neither an rx nor a tx ring")
        if not 0 <= queue_id <= 0xFFFF_FFFF:
            raise _err(op, _errno.EINVAL, f"queue id {queue_id} is not a u32")
        host = self.host
        with host.lock:
            if fl & XdpBindFlag.XDP_SHARED_UMEM:
                pool = self._bind_shared(d, queue_id, fl, op)
            else:
                if self.shared_with is not None or self._fq_mem is None or self._cq_mem is None:
                    raise _err(op, _errno.EINVAL, "a socket with its own UMEM needs fill and "
                                                  "completion rings")
                pool = XskBuffPool(self.kumem, self._fq_mem, self._cq_mem)
                try:
                    xp_assign_dev(pool, d, queue_id, fl, op)
                except BaseException:
                    pool.release()
                    raise
            self.xpool = pool
            if self.krx is not None:
                self.krx.track(pool.kown)
            self.dev = d
            self.ifindex = d.ifindex
            self.queue_id = queue_id
            self.zc = self.kumem.zc
            self.sg = self.kumem.sg
            if self.ktx is not None:
                pool.xsks.append(self)
            pool.socks.append(self)
            self.state = BOUND
            # bpf_redirect_xsk: the first socket bound to an rx queue is registered on it.
            key = (d.ifindex, queue_id)
            if self.krx is not None and queue_id < len(d.rx) and key not in host.xsk_rx:
                host.xsk_rx[key] = self
                _table_set(host, d.ifindex, queue_id, True)
        for m in self._maps:
            m.socket_changed(self)

    def _device(self, dev: XskNetDevice | str | int, op: str) -> XskNetDevice:
        if isinstance(dev, (str, int)):
            d = next((x for x in self.host.devices.values()
                      if x.name == dev or x.ifindex == dev), None)
            if d is None:
                raise _err(op, _errno.ENODEV, f"no device {dev!r} on host {self.host.name}")
            return d
        if self.host.devices.get(dev.ifindex) is not dev:
            raise _err(op, _errno.ENODEV, f"{dev.name} is not a device of host {self.host.name}")
        return dev

    def _bind_shared(self, d: XskNetDevice, queue_id: int, fl: int, op: str) -> XskBuffPool:
        if fl != int(XdpBindFlag.XDP_SHARED_UMEM):
            raise _err(op, _errno.EINVAL, "XDP_SHARED_UMEM takes no other flag")
        other = self.shared_with
        if other is None:
            raise _err(op, _errno.EINVAL, "XDP_SHARED_UMEM on a socket that registered its "
                                          "own UMEM")
        if other.state != BOUND or other.xpool is None:
            raise _err(op, _errno.EBADF, "the socket to share a UMEM with is not bound")
        if other.dev is not d or other.queue_id != queue_id:
            # Another device or queue: a pool of its own over the same UMEM.
            if not self._own_fq or self._fq_mem is None or self._cq_mem is None:
                raise _err(op, _errno.EINVAL, "one fill and completion ring is needed per "
                                              "queue")
            pool = XskBuffPool(self.kumem, self._fq_mem, self._cq_mem)
            sflags = int(XdpBindFlag.XDP_ZEROCOPY if self.kumem.zc else XdpBindFlag.XDP_COPY)
            if other.xpool.uses_need_wakeup:
                sflags |= int(XdpBindFlag.XDP_USE_NEED_WAKEUP)
            try:
                xp_assign_dev(pool, d, queue_id, sflags, op)
            except BaseException:
                pool.release()
                raise
            return pool
        if self._own_fq and (self._fq_mem is not None or self._cq_mem is not None):
            raise _err(op, _errno.EINVAL, "sharing a queue's pool, the socket may not have "
                                          "fill or completion rings of its own")
        pool = other.xpool
        pool.users += 1
        return pool

    # -- receive (datapath side) -------------------------------------------------------
    def _check(self, dev: XskNetDevice, queue: int, lens: I64) -> tuple[I64, BoolArray]:
        """``xsk_rcv_check`` per frame: 0 or -errno, and which passed."""
        n = len(lens)
        err = np.zeros(n, np.int64)
        if self.state != BOUND:
            err[:] = -_errno.ENXIO
        elif self.dev is not dev or self.queue_id != queue:
            err[:] = -_errno.EINVAL
        elif not self.sg:
            big = lens > self.umem.rx_frame_size
            if big.any():
                err[big] = -_errno.ENOSPC
                self.rx_dropped += int(big.sum())
        return err, err == 0

    def _rcv(self, dev: XskNetDevice, rq: XskRxQueue | None, queue: int, frames: Frames
             ) -> tuple[I64, BoolArray]:
        """``xsk_rcv`` for frames of one poll: -errno per frame, and which buffers were
        handed over (zero-copy; the caller frees the rest)."""
        n = len(frames)
        err, ok = self._check(dev, queue, frames.length)
        handed = np.zeros(n, np.bool_)
        pos = np.flatnonzero(ok)
        if not len(pos):
            return err, handed
        pool = self.xpool
        assert pool is not None
        if self.krx is None:
            err[pos] = -_errno.ENOBUFS
            return err, handed
        if rq is not None and rq.xsk is pool and pool.region is not None:
            e, h = self._rcv_zc(pool, frames.select(pos))
            err[pos] = e
            handed[pos] = h
            return err, handed
        err[pos] = self._rcv_copy(pool, frames.select(pos))
        return err, handed

    def _rcv_zc(self, pool: XskBuffPool, frames: Frames) -> tuple[I64, BoolArray]:
        """``xsk_rcv_zc``: descriptors for the buffers as they are; -ENOBUFS when full."""
        rx = self.krx
        assert rx is not None and pool.region is not None
        m = len(frames)
        err = np.zeros(m, np.int64)
        k = rx.nb_free(m)
        chunks = frames.pfn[:k] - pool.region.pfn_base
        addr = chunks.astype(np.uint64) * np.uint64(pool.umem.chunk_size) \
            + frames.data[:k].astype(np.uint64)
        idx = rx.cached_prod
        rx.produce_descs(addr, frames.length[:k].astype(np.uint32), 0)
        rx.own(idx, chunks)
        pool.region.held[chunks] = 0
        pool.region.kernel[chunks] = 0
        if k < m:
            err[k:] = -_errno.ENOBUFS
            self.rx_queue_full += m - k
        handed = np.zeros(m, np.bool_)
        handed[:k] = True
        return err, handed

    def _rcv_copy(self, pool: XskBuffPool, frames: Frames) -> I64:
        """``__xsk_rcv``: buffers from the pool, metadata and data copied in."""
        err, addrs, seg, nd = self._place(pool, frames.length)
        ok = np.flatnonzero(err == 0)
        if len(ok):
            f = frames.select(ok)
            meta = np.maximum(f.meta, 0)
            src_pfn, src_off, mlen = _spread(f.pfn, f.data, meta, seg, nd)
            dst = self.umem.data_addr(addrs).astype(np.int64)
            multi = f.has_frags
            linear = ~np.repeat(multi, nd) if multi.any() else slice(None)
            for mem, pos, rows in self.host.memmap.split(src_pfn[linear]):
                src = rows * mem.page_size + src_off[linear][pos] - mlen[linear][pos]
                _scatter(self.umem.buf, dst[linear][pos] - mlen[linear][pos], mem.buf, src,
                         seg[linear][pos] + mlen[linear][pos])
            if multi.any():
                self._copy_frags(f, np.flatnonzero(multi), dst, seg, nd)
        return err

    def _copy_frags(self, f: Frames, which: I64, dst: I64, seg: I64, nd: I64) -> None:
        """``xsk_copy_xdp`` for multi-buffer frames: metadata, then the packet read
        across head and frags (whole, as the skb copy reads it), cut at the buffers'
        ``seg`` lengths; one vector copy for all."""
        sub = f.select(which)
        pkts = self.host.frames_to_skbs(sub, 0).data
        first = np.cumsum(nd) - nd
        cnt = nd[which]
        owner = np.repeat(np.arange(len(which)), cnt)
        idx = np.repeat(first[which] - np.cumsum(cnt) + cnt, cnt) + np.arange(int(cnt.sum()))
        n = seg[idx].astype(np.int64)
        at = np.cumsum(n) - n
        at -= np.repeat(at[np.cumsum(cnt) - cnt], cnt)  # offset within its own packet
        _scatter(self.umem.buf, dst[idx], np.ascontiguousarray(pkts).reshape(-1),
                 owner * pkts.shape[1] + at, n)
        ms = np.maximum(sub.meta, 0)
        has = np.flatnonzero(ms)
        if has.size:
            for mem, pos, rows in self.host.memmap.split(sub.pfn[has]):
                k = has[pos]
                _scatter(self.umem.buf, dst[first[which[k]]] - ms[k], mem.buf,
                         rows * mem.page_size + sub.data[k] - ms[k], ms[k])

    def _place(self, pool: XskBuffPool, lens: I64) -> tuple[I64, U64, I64, I64]:
        """Buffers and rx slots for packets of ``lens`` bytes, in order; descriptors
        produced (not yet visible). Returns -errno per packet, and for the placed
        ones their descriptors' addresses and lengths and the count per packet."""
        rx = self.krx
        assert rx is not None
        m = len(lens)
        err = np.zeros(m, np.int64)
        fs = self.umem.rx_frame_size
        if not (lens > fs).any():
            want = rx.nb_free(m)
            bufs = pool.alloc(want)
            if len(bufs) < m:
                bufs = self._place_rest(pool, err, bufs, want)
            addrs = self.umem.rx_addr(bufs)
            seg = lens[err == 0].astype(np.int64)
            idx = rx.cached_prod
            rx.produce_descs(addrs, seg.astype(np.uint32), 0)
            rx.own(idx, pool.chunks_of(bufs))
            return err, addrs, seg, np.ones(len(bufs), np.int64)
        # XDP_USE_SG with frames longer than a buffer: each packet is judged whole
        # (xsk_buff_can_alloc, then room for all its descriptors), so one step per
        # packet - only here, where packets need several buffers.
        all_addrs: list[U64] = []
        all_seg: list[I64] = []
        counts: list[int] = []
        for i, ln in enumerate(lens.tolist()):
            nd = max(1, -(-ln // fs))
            if not (pool.can_alloc_one() if nd == 1 else pool.can_alloc(nd)):
                err[i] = -_errno.ENOMEM
                self.rx_dropped += 1
                if nd == 1:
                    pool.fq.queue_empty_descs += 1
                continue
            if rx.nb_free(nd) < nd:
                err[i] = -_errno.ENOBUFS
                self.rx_queue_full += 1
                continue
            bufs = pool.alloc(nd)
            if len(bufs) < nd:  # invalid fill entries: fewer than the ring counted
                pool.free(bufs)
                err[i] = -_errno.ENOMEM
                self.rx_dropped += 1
                continue
            addrs = self.umem.rx_addr(bufs)
            part = np.minimum(fs, ln - fs * np.arange(nd, dtype=np.int64))
            opts = np.full(nd, _CONTD, np.uint32)
            opts[-1] = 0
            idx = rx.cached_prod
            rx.produce_descs(addrs, part.astype(np.uint32), opts)
            rx.own(idx, pool.chunks_of(bufs))
            all_addrs.append(addrs)
            all_seg.append(part)
            counts.append(nd)
        if not counts:
            return err, np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        return (err, np.concatenate(all_addrs), np.concatenate(all_seg),
                np.array(counts, np.int64))

    def _place_rest(self, pool: XskBuffPool, err: I64, bufs: U64, want: int) -> U64:
        """The frames :meth:`_place`'s one allocation left without a buffer, judged
        one by one as ``__xsk_rcv`` does: a buffer search (-ENOMEM: ``rx_dropped``
        and ``rx_fill_ring_empty_descs``), then an rx slot (-ENOBUFS:
        ``rx_queue_full``, the buffer stays in the fill ring). ``err`` is filled in;
        returns the buffers of the placed frames, in order. A search that failed
        without skipping anything fails the same way for every later frame."""
        m = len(err)
        got = [bufs]
        placed = i = len(bufs)
        failed = placed < want  # the allocation's search for frame i found nothing
        while i < m:
            if not failed:
                if placed < want:
                    b = pool.alloc(1)
                    if len(b):
                        got.append(b)
                        placed += 1
                        i += 1
                        continue
                elif pool.can_alloc_one():
                    # The rx ring is full, and stays full for this batch.
                    err[i:] = -_errno.ENOBUFS
                    self.rx_queue_full += m - i
                    break
            failed = False
            stop = m if pool.dry_skipped == 0 else i + 1
            err[i:stop] = -_errno.ENOMEM
            self.rx_dropped += stop - i
            pool.fq.queue_empty_descs += stop - i
            i = stop
        return np.concatenate(got) if len(got) > 1 else bufs

    def _rcv_skbs(self, dev: XskNetDevice, queue: int, batch: SkbBatch) -> I64:
        """``xsk_generic_rcv`` for skbs of one queue (copied, then published at once)."""
        err, ok = self._check(dev, queue, batch.length)
        pos = np.flatnonzero(ok)
        if not len(pos):
            return err
        pool = self.xpool
        assert pool is not None
        if self.krx is None:
            err[pos] = -_errno.ENOBUFS
            return err
        e, addrs, seg, nd = self._place(pool, batch.length[pos])
        err[pos] = e
        good = pos[e == 0]
        if len(good):
            width = batch.data.shape[1]
            rows, off, _ = _spread(good.astype(np.int64), np.zeros(len(good), np.int64),
                                   np.zeros(len(good), np.int64), seg, nd)
            dst = self.umem.data_addr(addrs).astype(np.int64)
            flat = np.ascontiguousarray(batch.data).reshape(-1)
            _scatter(self.umem.buf, dst, flat, rows * width + off, seg)
            first = np.cumsum(nd) - nd
            for i, r in enumerate(good.tolist()):  # metadata: rare in generic XDP
                mb = batch.meta[r] if r < len(batch.meta) else b""
                if mb:
                    a = int(dst[first[i]])
                    self.umem.buf[a - len(mb):a] = np.frombuffer(mb, np.uint8)
        self._flush()
        return err

    def _flush(self) -> None:
        """``xsk_flush``: rx descriptors visible, the fill ring's consumer published."""
        if self.krx is not None:
            self.krx.submit()
        if self.xpool is not None:
            self.xpool.fq.release_publish()

    # -- transmit (datapath side) -----------------------------------------------------
    def _tx_check(self, op: str) -> None:
        if self.state != BOUND or self.dev is None:
            raise _err(op, _errno.ENXIO, "the socket is not bound")
        if not self.dev.up:
            raise _err(op, _errno.ENETDOWN, "the interface is down")

    def sendmsg(self) -> bool:
        """``xsk_sendmsg`` (``sendto``): drive the tx ring; True when work is left."""
        op = "sendto(AF_XDP)"
        self._tx_check(op)
        if self.ktx is None:
            raise _err(op, _errno.ENOBUFS, "the socket has no tx ring")
        pool = self.xpool
        assert pool is not None
        if not pool.cached_need_wakeup & XDP_WAKEUP_TX:
            return False
        dev = self.dev
        assert dev is not None  # _tx_check
        if self.zc and self.queue_id >= dev.num_tx_queues:
            # ndo_xsk_wakeup of a queue without a tx side (i40e: -ENXIO)
            raise _err(op, _errno.ENXIO, f"queue {self.queue_id} has no tx side for "
                                         "zero-copy transmit")
        with self.host.lock:
            if self.zc:
                return _zc_xmit(pool)
            e = self._generic_xmit()
        if e in (-_errno.EAGAIN, -_errno.EBUSY):
            return True
        if e:
            raise _err(op, -e, "the ring is stuck on a descriptor the kernel cannot build "
                               "(XDP_TX_METADATA without tx_metadata_len, or bad metadata)")
        return False

    def _generic_xmit(self) -> int:
        """``__xsk_generic_xmit``: 0 or -errno (EAGAIN: budget or completion ring; EBUSY:
        the device dropped a packet; EINVAL: a descriptor the kernel cannot build)."""
        dev = self.dev
        tx, pool = self.ktx, self.xpool
        assert dev is not None and tx is not None and pool is not None
        if self.queue_id >= dev.num_tx_queues:
            return 0
        cq = pool.cq
        nat = _native_tx(dev)
        if nat is not None:
            if self._tx_snap is None:  # the descriptors a kick reads, copied once
                self._tx_snap = np.zeros((tx.size, 2), np.int64)
            e = int(nat.generic_xmit(pool.state.words, tx.q.words, cq.q.words, self.sk.words,
                                     dev.stats.words, _tx_peer(dev), self._tx_snap))
            if e != nat.FALLBACK:
                return e
        if tx.present() == 0:
            tx.get_entries()
        avail = tx.present()
        budget = self.max_tx_budget
        look = min(avail, budget + 1)
        descs = tx.read(tx.cached_cons, look)
        valid = self.umem.validate_desc(descs)
        bad_meta = self._bad_tx_meta(descs, valid)
        # Where the per-descriptor loop stops, checks in the kernel's order: the ring
        # is empty, the budget is spent, the completion ring is full, the descriptor
        # is invalid, its metadata is refused (min() keeps the first of equals).
        stops = [(avail, "empty"), (budget, "budget"), (cq.nb_free(look + 1), "cq")]
        for mask, why in ((~valid, "invalid"), (bad_meta & valid, "meta")):
            hit = np.flatnonzero(mask)
            if len(hit):
                stops.append((int(hit[0]), why))
        stop, why = min(stops, key=lambda s: s[0])
        body = descs[:stop]
        ends = np.flatnonzero((body["options"] & _CONTD) == 0).astype(np.int64) + 1
        starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
        nfrag = ends - starts
        big = nfrag > MAX_SKB_FRAGS + 1  # EOVERFLOW: the packet is dropped, counted invalid
        fine = np.flatnonzero(~big)
        sent, err = self._transmit(dev, self._build_packets(body, starts[fine], ends[fine]))
        if err:  # the device dropped packet fine[sent - 1]: consumed, the rest waits
            last = int(fine[sent - 1])
            take = int(ends[last])
            invalid = int(nfrag[:last + 1][big[:last + 1]].sum())
        else:
            # A chain still open at the stop waits in the ring; with an invalid
            # descriptor it is dropped along with it.
            take = int(ends[-1]) if len(ends) else 0
            invalid = int(nfrag[big].sum())
            if why == "invalid":
                invalid += stop + 1 - take
                take = stop + 1
        tx.invalid_descs += invalid
        if take:
            # Completions, in ring order (6.18 completes invalid descriptors too).
            cq.produce_addrs(descs["addr"][:take])
            cq.submit()
            self._tx_timestamps(descs[:take])
            tx.release(take)
        tx.release_publish()
        if err:
            return err
        if why == "empty":
            tx.queue_empty_descs += 1
        elif why in ("budget", "cq"):
            return -_errno.EAGAIN
        elif why == "meta":
            return -_errno.EINVAL
        return 0

    def _bad_tx_meta(self, descs: np.ndarray, valid: BoolArray) -> BoolArray:
        """``xsk_skb_metadata``'s refusals for descriptors with ``XDP_TX_METADATA``."""
        want = (descs["options"] & _TX_META) != 0
        bad = np.zeros(len(descs), np.bool_)
        if not want.any():
            return bad
        md = self.umem.tx_metadata_len
        if md < XSK_TX_METADATA_SIZE:
            bad[want] = True
            return bad
        buf = self.umem.buf
        for i in np.flatnonzero(want & valid).tolist():
            a = int(self.umem.data_addr(descs["addr"][i])) - md
            flags, start, off = struct.unpack_from("<QHH", buf.data, a)
            if flags & ~_TXMD_VALID:
                bad[i] = True
            elif flags & XdpTxmdFlag.XDP_TXMD_FLAGS_CHECKSUM and \
                    start + off + 2 > int(descs["len"][i]):
                bad[i] = True
        return bad

    def _build_packets(self, body: np.ndarray, start: I64, end: I64) -> SkbBatch:
        """The skbs of packets ``[start, end)`` of descriptors ``body``, copied out of
        the UMEM; software checksums asked for in tx metadata filled in."""
        umem = self.umem
        npk = len(end)
        if not npk:
            return SkbBatch(np.zeros((0, 1), np.uint8), np.zeros(0, np.int64),
                            np.zeros(0, np.int64), np.zeros(0, np.int64), [])
        nd = end - start
        idx = np.repeat(start - np.concatenate([[0], np.cumsum(nd)[:-1]]), nd) \
            + np.arange(int(nd.sum()), dtype=np.int64)
        d = body[idx]
        seg = d["len"].astype(np.int64)
        first = np.cumsum(nd) - nd
        plen = np.add.reduceat(seg, first)
        width = max(int(plen.max()), 1)
        out = np.zeros((npk, width), np.uint8)
        rows, off, _ = _spread(np.arange(npk, dtype=np.int64), np.zeros(npk, np.int64),
                               np.zeros(npk, np.int64), seg, nd)
        _scatter(out.reshape(-1), rows * width + off, umem.buf,
                 umem.data_addr(d["addr"]).astype(np.int64), seg)
        meta = np.flatnonzero((body["options"][start] & _TX_META) != 0)
        if len(meta):
            _tx_checksums(umem, body[start[meta]], out, meta)
        return SkbBatch(out, plen.astype(np.int64), np.full(npk, self.ifindex, np.int64),
                        np.full(npk, self.queue_id, np.int64), [b""] * npk)

    def _transmit(self, dev: XskNetDevice, pkts: SkbBatch) -> tuple[int, int]:
        """``__dev_direct_xmit`` of each packet in order: (packets consumed, 0 or -EBUSY)."""
        n = len(pkts)
        limit, err = n, 0
        peer = getattr(dev, "peer", None)
        if dev.kind == "veth" and peer is not None and n:
            # veth_xmit -> __dev_forward_skb: the peer must be up and the frame fit its
            # MTU, else NET_XMIT_DROP: sendto answers EBUSY after that packet.
            drop = pkts.length > peer.mtu + ETH_HLEN + VLAN_HLEN
            if not peer.up:
                drop[:] = True
            fails = np.flatnonzero(drop)
            if len(fails):
                limit, err = int(fails[0]) + 1, -_errno.EBUSY
                dev.stats.tx_dropped += 1
        go = limit - (1 if err else 0)
        if go:
            dev.xmit_skbs(SkbBatch(pkts.data[:go], pkts.length[:go], pkts.ifindex[:go],
                                   pkts.queue[:go], [b""] * go))
        return limit, err

    def _tx_timestamps(self, descs: np.ndarray) -> None:
        """Completion timestamps asked for in tx metadata (``xsk_tx_metadata_complete``)."""
        want = (descs["options"] & _TX_META) != 0
        if not want.any() or self.umem.tx_metadata_len < XSK_TX_METADATA_SIZE:
            return
        want &= self.umem.validate_desc(descs)  # an invalid one completes, unsent
        md = self.umem.tx_metadata_len
        buf = self.umem.buf
        for a in descs["addr"][want].tolist():
            m = int(self.umem.data_addr(a)) - md
            (flags,) = struct.unpack_from("<Q", buf.data, m)
            if flags & XdpTxmdFlag.XDP_TXMD_FLAGS_TIMESTAMP:
                struct.pack_into("<Q", buf.data, m + 8, time.monotonic_ns())

    def set_tx_budget(self, budget: int) -> None:
        """``XDP_MAX_TX_SKB_BUDGET``: descriptors one copy-mode kick may send (EACCES
        outside ``[32, tx ring size]``, as 6.18 answers)."""
        if self.ktx is None or not TX_BATCH_SIZE <= budget <= self.ktx.size:
            raise _err("setsockopt(XDP_MAX_TX_SKB_BUDGET)", _errno.EACCES,
                       "budget outside [32, tx ring size]")
        self.max_tx_budget = budget

    # -- recvmsg and poll ---------------------------------------------------------------
    def recvmsg(self) -> None:
        """``xsk_recvmsg`` (``recvfrom(MSG_DONTWAIT)``): wake the NIC's rx side if the
        fill ring asked for it."""
        # recvfrom(MSG_DONTWAIT): ENXIO unbound; a device down (ENETDOWN) just gives
        # nothing, as LinuxXskSocket treats it.
        if self.state != BOUND or self.dev is None:
            raise _err("recvfrom(AF_XDP)", _errno.ENXIO, "the socket is not bound")
        pool = self.xpool
        assert pool is not None
        if self.dev.up and self.zc and pool.cached_need_wakeup & XDP_WAKEUP_RX:
            with self.host.lock:  # the fill ring's datapath side belongs to the NAPI
                _zc_wakeup_rx(pool)

    def xsk_poll(self, timeout_ms: int = 0) -> int:
        """``xsk_poll``: ``POLLIN`` (rx entries), ``POLLOUT`` (tx ring at most half full).

        Copy-mode tx is driven as by ``sendto``. With a timeout and nothing
        ready, the host runs one softirq round first (its NAPI runs here).
        """
        if self.state != BOUND or self.dev is None or not self.dev.up:
            return 0
        pool = self.xpool
        assert pool is not None
        if pool.cached_need_wakeup:
            with self.host.lock:
                if self.zc:
                    if pool.cached_need_wakeup & XDP_WAKEUP_RX:
                        _zc_wakeup_rx(pool)
                    if self.ktx is not None:
                        _zc_xmit(pool)
                elif self.ktx is not None:
                    self._generic_xmit()
        ev = self._events()
        if not ev & POLLIN and timeout_ms:
            self.host.poll()
            ev = self._events()
        return ev

    def _events(self) -> int:
        ev = 0
        if self.krx is not None and self.krx.producer != self.krx.consumer:
            ev |= POLLIN
        if self.ktx is not None and self.ktx.present() <= self.ktx.size // 2:
            ev |= POLLOUT
        return ev

    def statistics(self) -> XdpStatistics:
        """``XDP_STATISTICS`` as ``xsk_getsockopt`` fills the 48-byte form."""
        pool = self.xpool
        return XdpStatistics(
            rx_dropped=self.rx_dropped,
            rx_invalid_descs=0,  # the rx ring is produced by the datapath: never invalid
            tx_invalid_descs=self.ktx.invalid_descs if self.ktx is not None else 0,
            rx_ring_full=self.rx_queue_full,
            rx_fill_ring_empty_descs=pool.fq.queue_empty_descs if pool is not None else 0,
            tx_ring_empty_descs=self.ktx.queue_empty_descs if self.ktx is not None else 0)

    def options(self) -> int:
        """``XDP_OPTIONS``: ``XDP_OPTIONS_ZEROCOPY`` when bound zero-copy."""
        return XDP_OPTIONS_ZEROCOPY if self.zc else 0

    @property
    def zerocopy(self) -> bool:
        return self.zc

    # -- lifetime -----------------------------------------------------------------------
    def xsk_release(self) -> None:
        """``xsk_release``: out of every XSKMAP, unbound, rings and pool released."""
        host = self.host
        with host.lock:
            for m in list(self._maps):
                m.remove_socket(self)
            self._maps = []
            host.backend.xsk_unregister(self.fd)
            if self.state == BOUND:
                self._unbind()
            for mem in self._mems:
                mem.put()
            self._mems = []

    def netdev_unregister(self) -> None:
        """``xsk_notifier``'s ``NETDEV_UNREGISTER``: the device bound to is going away
        (its host is closed), so the socket is unbound: sendto and recvfrom are ENXIO
        then, poll has nothing ready."""
        with self.host.lock:
            if self.state == BOUND:
                self._unbind()

    def _unbind(self) -> None:
        host = self.host
        self.state = UNBOUND
        dev = self.dev
        if dev is not None:
            key = (dev.ifindex, self.queue_id)
            if host.xsk_rx.get(key) is self:
                del host.xsk_rx[key]
                _table_set(host, dev.ifindex, self.queue_id, False)
            if self.queue_id < len(dev.rx):
                # The native poll state holds views of this socket's rings: let go.
                dev.rx[self.queue_id].native = None
        pool = self.xpool
        if self.krx is not None:
            self.krx.track(None)
        if pool is not None:
            if self in pool.xsks:
                pool.xsks.remove(self)
            if self in pool.socks:
                pool.socks.remove(self)
            pool.release()

    def xsk_map_added(self, m: Any) -> None:
        """An XSKMAP now holds this socket (``xsk_map_sock_add``)."""
        if m not in self._maps:
            self._maps.append(m)

    def xsk_map_removed(self, m: Any) -> None:
        """An XSKMAP no longer holds this socket anywhere."""
        if m in self._maps:
            self._maps.remove(m)

# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def _spread(pfn: I64, data: I64, meta: I64, seg: I64, nd: I64) -> tuple[I64, I64, I64]:
    """Per descriptor of packets split ``nd`` ways into ``seg``-byte parts: the packet's
    ``pfn`` (or row), where its part starts (``data`` + earlier parts) and how much
    metadata goes before it (the packet's ``meta`` before its first part only)."""
    if len(seg) == len(nd):  # one descriptor per packet
        return pfn, data, meta
    first = np.cumsum(nd) - nd
    csum = np.cumsum(seg) - seg
    off = csum - np.repeat(csum[first], nd)
    j = np.arange(len(seg), dtype=np.int64) - np.repeat(first, nd)
    mlen = np.where(j == 0, np.repeat(meta, nd), 0)
    return np.repeat(pfn, nd), np.repeat(data, nd) + off, mlen


def _scatter(dst: npt.NDArray[np.uint8], dst_off: I64, src: npt.NDArray[np.uint8],
             src_off: I64, length: I64) -> None:
    """``dst[dst_off[i]:+length[i]] = src[src_off[i]:+length[i]]`` for every i, in one
    numpy gather/scatter (one 2-D copy when all lengths are equal)."""
    if not len(length):
        return
    ln = length.astype(np.int64)
    if (ln == ln[0]).all():
        w = int(ln[0])
        if w:
            cols = np.arange(w, dtype=np.int64)
            dst[dst_off[:, None] + cols] = src[src_off[:, None] + cols]
        return
    total = int(ln.sum())
    starts = np.cumsum(ln) - ln
    rel = np.arange(total, dtype=np.int64) - np.repeat(starts, ln)
    dst[np.repeat(dst_off, ln) + rel] = src[np.repeat(src_off, ln) + rel]


def _tx_checksums(umem: UmemArea, first: np.ndarray, out: npt.NDArray[np.uint8],
                  rows: I64) -> None:
    """``XDP_TXMD_FLAGS_CHECKSUM``: the 16-bit one's complement sum from ``csum_start``
    to the end, stored at ``csum_start + csum_offset`` (what checksum offload does)."""
    md = umem.tx_metadata_len
    buf = umem.buf
    for i, a in enumerate(first["addr"].tolist()):
        m = int(umem.data_addr(a)) - md
        flags, start, off = struct.unpack_from("<QHH", buf.data, m)
        if not flags & XdpTxmdFlag.XDP_TXMD_FLAGS_CHECKSUM:
            continue
        r = int(rows[i])
        body = out[r, start:int(first["len"][i])]
        if len(body) % 2:
            body = np.concatenate([body, np.zeros(1, np.uint8)])
        s = int(body.view(">u2").astype(np.uint64).sum())
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        out[r, start + off:start + off + 2] = np.frombuffer(struct.pack(">H", ~s & 0xFFFF),
                                                            np.uint8)


def _table_set(host: XskHost, ifindex: int, queue: int, on: bool) -> None:
    """Keep the host's native table of registered queues (per ifindex, one bit per
    queue below 64) in step with ``host.xsk_rx``."""
    table = host.xsk_table
    if ifindex >= len(table) or queue >= 64:
        return
    bit = np.uint64(1 << queue)
    table[ifindex] = (table[ifindex] | bit) if on else (table[ifindex] & ~bit)


def _native_tx(dev: XskNetDevice) -> Any:
    """:mod:`pyxdp.net.xsk_native_tx` when ``dev``'s transmit can run there: the host
    runs native code, the device is up with no wire sink to show packets to, and is
    a NIC or (copy mode) a veth whose peer runs a native program; else None (the
    Python path transmits)."""
    if not dev.host.native or not dev.up or dev.wire:
        return None
    if dev.kind == "veth":
        peer = getattr(dev, "peer", None)
        if (peer is None or peer.xdp_prog is None or peer.rx[0].xsk is not None
                or peer.rx[0].pool.destroyed):
            return None
    elif dev.kind != "nic":
        return None
    try:
        from pyxdp.net import xsk_native_tx
    except ImportError:  # numba or llvmlite missing
        return None
    return xsk_native_tx


_NIC_PEER: tuple[Any, ...] | None = None


def _tx_peer(dev: XskNetDevice) -> tuple[Any, ...]:
    """The ``peer`` group of :func:`pyxdp.net.xsk_native_tx.generic_xmit`: a veth's
    peer (up, the longest frame it takes, its counters, the system allocator its skbs'
    pages come from, its first queue's ring, in place), or inert arrays for a NIC."""
    global _NIC_PEER
    peer = getattr(dev, "peer", None)
    if dev.kind != "veth" or peer is None:
        if _NIC_PEER is None:
            i64 = np.zeros(1, np.int64)
            _NIC_PEER = (0, 0, 0, i64, i64, i64, np.zeros(1, np.int32),
                         np.zeros((1, 1), np.uint8), 0, np.zeros((5, 1), np.int64), i64)
        return _NIC_PEER
    rq = peer.rx[0]
    system = dev.host.memmap.system
    return (1, int(peer.up), peer.mtu + ETH_HLEN + VLAN_HLEN, peer.stats.words,
            *system.native_arrays, system.pages, system.pfn_base, rq.ring.cols,
            rq.ring.cur.words)


def _zc_wakeup_rx(pool: XskBuffPool) -> None:
    """``ndo_xsk_wakeup(XDP_WAKEUP_RX)``: the NIC's NAPI refills from the fill ring; the
    flag is cleared when it finds buffers."""
    if pool.can_alloc_one():
        pool.clear_rx_need_wakeup()


def _zc_xmit(pool: XskBuffPool) -> bool:
    """``ndo_xsk_wakeup(XDP_WAKEUP_TX)`` on a zero-copy NIC: up to its ring of
    descriptors per socket, sent from the UMEM and completed; True when more wait."""
    dev = pool.dev
    assert dev is not None
    umem = pool.umem
    cq = pool.cq
    more = False
    if pool.queue_id >= dev.num_tx_queues:
        return False
    nat = _native_tx(dev)
    for xs in list(pool.xsks):
        tx = xs.ktx
        if tx is None:
            continue
        if nat is not None:
            r = int(nat.zc_xmit(pool.state.words, tx.q.words, cq.q.words, dev.stats.words,
                                NIC_TX_RING))
            more = more or r > 0
            continue
        nb = tx.nb_entries(NIC_TX_RING)
        nb = cq.nb_free(nb) if nb else 0
        if not nb:
            continue
        descs = tx.read_desc_batch(nb, umem.validate_desc)
        tx.release_publish()  # __xskq_cons_release
        more = more or tx.nb_entries(1) > 0
        if not len(descs):
            continue
        cq.produce_addrs(descs["addr"])
        if dev.up:
            data = umem.data_addr(descs["addr"]).astype(np.int64)
            ln = descs["len"].astype(np.int64)
            width = max(int(ln.max()), 1)
            out = np.zeros((len(descs), width), np.uint8)
            _scatter(out.reshape(-1), np.arange(len(descs), dtype=np.int64) * width,
                     umem.buf, data, ln)
            dev.xmit_skbs(SkbBatch(out, ln, np.full(len(descs), dev.ifindex, np.int64),
                                   np.full(len(descs), pool.queue_id, np.int64),
                                   [b""] * len(descs)))
        cq.submit()  # xsk_tx_completed: the NIC sent them
    if pool.uses_need_wakeup:
        for xs in pool.xsks:
            if xs.ktx is not None:
                xs.ktx.set_flags(XDP_RING_NEED_WAKEUP)
    return more


def _xskmap_op(host: XskHost, dev: XskNetDevice, rq: XskRxQueue | None, prog: Any,
               map_id: int, frames: Frames, idx: I64, flags: I64,
               bq: XskFlushList) -> tuple[I64, I64]:
    """XSKMAP redirects for ``xdp_do_redirect``: a slot, or with map id 0 the socket
    ``bpf_redirect_xsk`` found registered on the frame's rx queue."""
    err = xsk_map_redirect(host, dev, rq, map_by_id(map_id) if map_id else None, frames, idx,
                           bq)
    return err, np.zeros(len(frames), np.int64)


def _xsk_flush_op(host: XskHost, bq: XskFlushList) -> None:
    if bq.xsk:
        xsk_flush(host, bq)


register_redirect([int(BpfMapType.BPF_MAP_TYPE_XSKMAP)], _xskmap_op)
register_flush(2, _xsk_flush_op)
