"""The native (driver) XDP receive path: a NAPI poll and the XDP actions (the
redirect machinery it calls is where the kernel has it: ``xdp_do_redirect`` and
``xdp_do_flush`` in :mod:`pyxdp.net.filter`, devmap's bulk queues and flush in
:mod:`pyxdp.net.devmap`, cpumap's in :mod:`pyxdp.net.cpumap`, AF_XDP's in
:mod:`pyxdp.net.xsk`; each map type registers its enqueue and flush there).

:func:`napi_poll` is one ``->poll(napi, budget)`` of a driver like veth's
``veth_poll``/``veth_xdp_rcv``: up to ``budget`` (64) frames from the rx
queue's ring - NIC frames in pages of the queue's page pool, or
``xdp_frame`` s another device sent through ``ndo_xdp_xmit`` - run through
the program as **one batch** (:meth:`XdpProg.run_batch`, on the JIT one
native call without the GIL), then each verdict is acted on for the whole
batch at once:

- ``XDP_DROP`` recycles pool pages directly (``page_pool_recycle_direct``)
  and returns xdp_frames with ``xdp_return_frame_rx_napi``;
- ``XDP_ABORTED`` and unknown verdicts fire ``xdp_exception`` (an unknown one
  also warns once per program, ``bpf_warn_invalid_xdp_action``) and drop;
  the first fault of each poll is kept on the device as a clear report;
- ``XDP_PASS`` builds skbs (metadata kept) and hands them to the host stack
  as one list (``napi_gro_receive`` / ``netif_receive_skb_list``); a queue
  polled without a native program gives its frames to the stack the same way,
  through the device's generic program if it has one;
- ``XDP_TX`` converts to ``xdp_frame`` (``-EOVERFLOW`` when the headroom cannot
  hold it: an exception and a drop) into the device's TX bulk queue of 16,
  sent with ``ndo_xdp_xmit`` and ``xdp_bulk_tx`` per bulk;
- ``XDP_REDIRECT`` is ``xdp_do_redirect`` for the batch: devmap and
  devmap_hash targets go into per-device bulk queues of 16 (``bq_enqueue``),
  broadcasts (``BPF_F_BROADCAST``, ``BPF_F_EXCLUDE_INGRESS``) clone the frame
  for every target but the last, ``bpf_redirect`` ifindexes use the same
  queues without a program, cpumap targets go to the entry's bulk queue of 8;
  ``xdp_redirect``/``xdp_redirect_err`` fire per frame (``-EBADRQC`` for an
  XDP_REDIRECT no redirect helper prepared; targets are checked as
  ``xdp_ok_fwd_dev`` does: up, at most mtu + 14 + 4 bytes).

The poll ends with ``xdp_do_flush`` (:func:`napi_flush`): every bulk queue flushed, the devmap
flush list first, then the cpumap one, each in the kernel's order (last
queued first: ``list_add``). ``bq_xmit_all`` runs a devmap entry's program
over its bulk with ``egress_ifindex`` set (anything but PASS/DROP fires
``xdp_exception`` and drops), then ``ndo_xdp_xmit``, then
``xdp_devmap_xmit``; cpumap bulks go to the entry's ring and its kthread is
woken. The driver's XDP_TX bulk is flushed after that.

Simplified against the kernel: the devmap entry (and its program) is read
when the frame is redirected, not when ``bpf_redirect_map`` ran (they differ
only if user space changes the map inside one poll); frames of one poll whose
pages lie in different page regions run grouped by region, each group in
arrival order. XSKMAP redirects and ``bpf_redirect_xsk`` go to the AF_XDP
sockets of :mod:`pyxdp.net.xsk` (flushed after the cpumap list, as
``xdp_do_flush`` does); frames in UMEM chunks of a zero-copy queue are
converted to order-0 pages when they leave as xdp_frames.

Multi-buffer frames (``XDP_FLAGS_HAS_FRAGS``: a head page and frags in its
``skb_shared_info``, :data:`~pyxdp.net.frames.KIND_FRAGS`) keep their frags
through every action above: DROP and PASS free each buffer's frags then its
head, XDP_TX and redirects convert them to ``xdp_frame`` s with the frags
flag, and the program runs on them in the batch, their frags in a frag table
(:func:`~pyxdp.net.prog.run_xdp`).

This is the reference path: every frame can take it (with a tracer
listening, every frame does). JIT programs normally run in the native poll
loop (:mod:`pyxdp.net.napi_native`), which acts on the verdicts it can
produce exactly over the same records and hands the rest back to
:func:`dispatch`; with ``Host(threaded_napi=True)`` each CPU's queues are
polled on a thread of their own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from errno import ENOBUFS, ENOMEM, ENOSPC
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pyxdp.asm.opcodes import OP_CALL, CallSrc
from pyxdp.maps.cpumap import CpuMap
from pyxdp.maps.devmap import DevMap, DevMapHash
from pyxdp.maps.hashtab import htab_find_u32_address
from pyxdp.maps.xskmap import XskMap
from pyxdp.net import xsk as _xsk  # noqa: F401  (XSKMAP's redirect and flush operations)
from pyxdp.net.cpumap import cpumap_runtime
from pyxdp.net.devmap import DevmapEgress
from pyxdp.net.filter import BulkQueues, _to_frames, _Verdicts, xdp_do_flush, xdp_do_redirect
from pyxdp.net.frames import (
    KIND_BUFF,
    KIND_FRAGS,
    KIND_FRAME,
    KIND_SKB,
    Frames,
)
from pyxdp.net.page_pool import PAGE_SIZE, PageAccountingError, PageMemory, PagePool
from pyxdp.net.prog import MAX_FAULT_REPORTS, XdpProg, _warned, run_xdp
from pyxdp.net.source import GenState
from pyxdp.net.xdp import MAX_SKB_FRAGS, FragTable
from pyxdp.net.xdp_mem import (
    return_frame_no_direct,
    xdp_return_frames_rx_napi,
)
from pyxdp.uapi.bpf import ETH_HLEN, XDP_PACKET_HEADROOM, BpfMapType, XdpAction
from pyxdp.vm.jit.abi import FRAG_WORDS, MAX_FRAGS
from pyxdp.vm.jit.natives import serial_helpers

if TYPE_CHECKING:
    from pyxdp.net.netdev_types import DpDevice as NetDevice
    from pyxdp.net.netdev_types import DpHost as Host
    from pyxdp.net.netdev_types import DpRxQueue as NetdevRxQueue

__all__ = ["napi_drain_freed_cpumaps", "napi_flush", "napi_poll"]

log = logging.getLogger(__name__)

INT_MAX = 0x7FFF_FFFF
I64 = npt.NDArray[np.int64]


# -----------------------------------------------------------------------------------
# The poll
# -----------------------------------------------------------------------------------

def napi_poll(rq: NetdevRxQueue, budget: int = 64) -> int:
    """One NAPI poll of ``rq``: up to ``budget`` frames; returns how many were done."""
    if rq.dev.kind == "veth":
        # veth_poll: xdp_set_return_frame_no_direct around the receive and the flushes,
        # so xdp_frames of other devices' pools go back into those pools' rings (the
        # veth's own pool still recycles directly: page_pool_napi_local).
        with return_frame_no_direct():
            return _poll(rq, budget)
    return _poll(rq, budget)


def _poll(rq: NetdevRxQueue, budget: int) -> int:
    dev = rq.dev
    host = dev.host
    prog = dev.xdp_prog
    if prog is not None and _native_ok(rq, prog, frags=True) and (
            len(rq.ring) == 0 or rq.ring.peek_kind() in _NATIVE_FRAGS_KINDS
            or _frame_memory(rq) is not None):
        done = _native_poll(rq, prog, budget)
        if done or not len(rq.ring) or rq.ring.peek_kind() in _NATIVE_FRAGS_KINDS:
            return done
        # An xdp_frame the loop would not touch (no page in use where it points):
        # the Python path takes the poll and reports it.
    gen = dev.xdp_generic
    if (prog is None and gen is not None and rq.xsk is None and _native_ok(rq, gen)
            and (len(rq.ring) == 0 or rq.ring.peek_kind() in _NATIVE_KINDS)):
        return _native_poll(rq, gen, budget, generic=True)
    if rq.source is not None and len(rq.ring) < budget:
        rq.source.fill(rq, budget - len(rq.ring))
    # The frames taken off the ring are the poll's until it is done with them: an
    # AF_XDP socket's close (under the lock) must not free their UMEM in between.
    host.lock.acquire()
    taken = rq.ring.consume(budget)
    if prog is not None and len(taken):
        # veth_xdp_rcv counts every entry it consumes (rx_packets, rx_bytes), before
        # the program and whatever becomes of it; an skb from the peer's veth_xmit
        # has had eth_type_trans pull its Ethernet header by then.
        _rx_counted(dev.stats, taken)
    frames = _skbs_to_buffs(host, rq, taken)
    n = len(frames)
    if not n:
        host.lock.release()
        return 0
    rq.py_polls += 1
    if prog is None:
        dev.stats.rx_packets += n
        dev.stats.rx_bytes += int(frames.length.sum())
    rq.pool.napi_local = True  # page_pool_napi_local: this poll may recycle directly
    try:
        if prog is None:
            # No native program (a NIC, veth with GRO): to the stack (through the
            # generic program, if there is one).
            _pass(host, dev, rq, frames)
            return n
        bq = BulkQueues(from_cpu=rq.ctx.cpu)
        acts = run_xdp(prog, host, frames, ifindex=dev.ifindex, queue=rq.index, ctx=rq.ctx,
                       faults=dev.faults, where=f"{dev.name} rx{rq.index}")
        dispatch(host, dev, rq, prog, frames, acts, bq)
        napi_flush(host, dev, rq, bq)
        return n
    finally:
        rq.pool.napi_local = False
        host.lock.release()


# What the native loop takes at the head of a ring without help: the queue's own
# buffers and skbs other devices queued (it copies them into its pool).
_NATIVE_KINDS = (KIND_BUFF, KIND_SKB)
# ... and, running a native program (not generic XDP), multi-buffer ones of its pool.
_NATIVE_FRAGS_KINDS = (*_NATIVE_KINDS, KIND_BUFF | KIND_FRAGS, KIND_SKB | KIND_FRAGS)


def _rx_counted(st: Any, frames: Frames) -> None:
    """Count ``frames`` a native program's NAPI takes off its ring (``veth_xdp_rcv``:
    ``xdp_packets``, ``xdp_bytes``, which a veth reports as ``rx_packets``/``rx_bytes``):
    an skb a veth's ``veth_xmit`` queued is counted without the Ethernet header that
    ``__dev_forward_skb``'s ``eth_type_trans`` pulled, an ``xdp_frame`` or a NIC's
    buffer whole."""
    skbs = int(((frames.kind & KIND_SKB) != 0).sum())
    st.rx_packets += len(frames)
    st.rx_bytes += int(frames.length.sum()) - ETH_HLEN * skbs


def _skbs_to_buffs(host: Host, rq: NetdevRxQueue, frames: Frames) -> Frames:
    """The skbs other devices queued on ``rq``'s ring (:data:`~pyxdp.net.frames.KIND_SKB`)
    as the receiving NAPI takes them, in ``rq``'s poll: each copied into pages of the
    queue's pool, in machine code (:func:`pyxdp.net.skbuff_native.skb_pp_cow_data`,
    the native loop's too: the data at ``XDP_PACKET_HEADROOM``, past a page's packet
    room a head and page frags), its pages freed; those the pool has too few pages
    for are dropped (``rx_dropped``)."""
    skb = (frames.kind & KIND_SKB) != 0
    if not skb.any():
        return frames
    from pyxdp.net.skbuff_native import HEAD_ROOM, skbs_to_buffs
    sel = np.flatnonzero(skb)
    pool = rq.pool
    new = np.full(len(sel), -1, np.int64)
    frags = (frames.kind[sel] & KIND_FRAGS) != 0
    bad = skbs_to_buffs((pool.pages, pool.pfn_base, *pool.native_arrays), _system_args(host),
                        frames.pfn[sel], frames.data[sel], frames.length[sel],
                        frags.astype(np.int64), new)
    if bad >= 0:  # pages no sender built: the skb is reported as any stray page is
        raise PageAccountingError(f"{rq.dev.name} rx{rq.index}: skb at pfn "
                                  f"{int(frames.pfn[sel[bad]]):#x} is not one a device queued",
                                  pages=(int(frames.pfn[sel[bad]]),))
    out = Frames(frames.pfn.copy(), frames.data.copy(), frames.length.copy(),
                 frames.meta.copy(), frames.kind.copy())
    ok = new >= 0
    out.pfn[sel[ok]] = new[ok]
    out.data[sel[ok]] = XDP_PACKET_HEADROOM
    out.meta[sel[ok]] = 0
    # Frags past a page's packet room, whatever the skb had (skb_pp_cow_data splits
    # at max_head_size).
    out.kind[sel[ok]] = np.where(frames.length[sel[ok]] > HEAD_ROOM, KIND_BUFF | KIND_FRAGS,
                                 KIND_BUFF)
    if not ok.all():
        rq.dev.stats.rx_dropped += int((~ok).sum())
        keep = np.ones(len(frames), np.bool_)
        keep[sel[~ok]] = False
        out = out.select(keep)
    return out


def dispatch(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg,
             frames: Frames, v: _Verdicts, bq: BulkQueues) -> None:
    """Act on every verdict of a batch (``veth_xdp_rcv_one``'s switch, vectorised)."""
    act = v.action
    st = dev.stats
    st.xdp_packets += len(act)
    counts = np.bincount(np.clip(act, 0, 5), minlength=6)
    tr = host.tracer
    # Unknown verdicts: warned about once, then handled as XDP_ABORTED.
    bad = (act < 0) | (act > int(XdpAction.XDP_REDIRECT))
    if bad.any() and prog not in _warned:
        _warned.add(prog)
        log.warning("%s: XDP program %s returned illegal action %d: treated as "
                    "XDP_ABORTED (bpf_warn_invalid_xdp_action)", dev.name, prog.spec.name,
                    int(act[bad][0]))
    tr.xdp_exception.fire_actions(act, prog_id=prog.id, ifindex=dev.ifindex)
    drop = (act == XdpAction.XDP_DROP) | (act == XdpAction.XDP_ABORTED) | bad
    st.xdp_drops += int(counts[XdpAction.XDP_DROP])
    st.xdp_aborted += int(counts[XdpAction.XDP_ABORTED]) + int(bad.sum())
    if drop.any():
        # veth_xdp_rcv_one frees an xdp_frame it drops with xdp_return_frame.
        host.drop_frames(frames.select(drop), rq, direct=True, frames_direct=False)
    passed = act == XdpAction.XDP_PASS
    if passed.any():
        st.xdp_pass += int(passed.sum())
        _pass(host, dev, rq, frames.select(passed))
    tx = act == XdpAction.XDP_TX
    if tx.any():
        _xdp_tx(host, dev, rq, prog, frames.select(tx), bq)
    red = act == XdpAction.XDP_REDIRECT
    if red.any():
        sel = np.flatnonzero(red)
        failed = xdp_do_redirect(host, dev, rq, prog, frames.select(sel),
                                 _Verdicts(v.action[sel], v.map_id[sel], v.map_type[sel],
                                           v.index[sel], v.flags[sel]), bq)
        if dev.kind == "veth":  # veth_xdp_rcv_*: a failed xdp_do_redirect is rx_drops
            st.rx_dropped += failed


def _pass(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, frames: Frames) -> None:
    """XDP_PASS: skbs built from the buffers (metadata kept), the pages then
    freed as the skb's free would, and the list handed to the stack."""
    batch = host.frames_to_skbs(frames, dev.ifindex)
    batch.queue[:] = rq.index if rq is not None else 0
    # The skbs' free: xdp_frames' pages go back without napi_direct (the pool's own
    # NAPI recycles directly all the same: page_pool_napi_local).
    host.drop_frames(frames, rq, direct=rq is not None, frames_direct=False)
    if dev.xdp_generic is not None:
        # No native program: the skbs meet the generic one in the receive path.
        from pyxdp.net.dev import netif_receive_skb_list
        netif_receive_skb_list(dev, batch, counted=True)
        return
    cpu = rq.ctx.cpu if rq is not None else 0
    if getattr(dev, "backlog", False):  # process_backlog: __netif_receive_skb, one by one
        dev.host.stack.netif_receive_skb(batch, cpu)
        return
    dev.host.stack.netif_receive_skb_list(batch, cpu)


def _xdp_tx(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg,
            frames: Frames, bq: BulkQueues) -> None:
    """XDP_TX: into the device's TX bulk queue (flushed every 16 and at poll end)."""
    out, failed = _to_frames(host, dev, rq, prog, frames)
    if dev.kind == "veth":
        # veth_xdp_tx's conversion failing is rx_drops; its xdp_tx_err counts only what
        # the flush could not send.
        dev.stats.rx_dropped += failed
    else:
        dev.stats.xdp_tx_errors += failed
    bq.tx.add(out, lambda bulk: _flush_tx(host, dev, bulk))


def _flush_tx(host: Host, dev: NetDevice, frames: Frames) -> None:
    """``veth_xdp_flush_bq``: one ``ndo_xdp_xmit`` (to the peer for veth) per bulk."""
    n = len(frames)
    if not n:
        return
    # A NIC transmits on its own wire; a veth's ndo_xdp_xmit hands them to its peer.
    sent = dev.ndo_xdp_xmit(frames)
    err = sent if sent < 0 else 0
    sent = max(sent, 0)
    drops = n - sent
    if drops:
        xdp_return_frames_rx_napi(frames.pfn[sent:], memmap=host.memmap)
        dev.stats.xdp_tx_errors += drops
    dev.stats.xdp_tx += sent
    host.tracer.xdp_bulk_tx.fire(dev.ifindex, sent, drops, err)


# -----------------------------------------------------------------------------------
# Redirect
# -----------------------------------------------------------------------------------

# -----------------------------------------------------------------------------------
# Flush
# -----------------------------------------------------------------------------------

def napi_flush(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, bq: BulkQueues) -> None:
    """The end of a poll: ``xdp_do_flush``, then the driver's TX bulk (``veth_poll``
    flushes it after ``xdp_do_flush``)."""
    xdp_do_flush(host, bq)
    if bq.tx.count:
        _flush_tx(host, dev, bq.tx.take())


# -----------------------------------------------------------------------------------
# The native fast path (see pyxdp.net.napi_native)
# -----------------------------------------------------------------------------------

DEFER_POLLS = 16
MAX_NATIVE_FRAME = 4096 - 256 - 320  # one page: headroom and skb_shared_info room
# A multi-buffer frame's longest: the head's room and MAX_SKB_FRAGS page frags.
MAX_NATIVE_FRAGS_FRAME = MAX_NATIVE_FRAME + MAX_SKB_FRAGS * PAGE_SIZE


def _frags_native(rq: NetdevRxQueue) -> bool:
    """The native loop builds and runs multi-buffer frames of ``rq``'s pool: page-sized
    buffers (the head's ``skb_shared_info`` where :mod:`pyxdp.net.skbuff_native`
    puts it), no zero-copy AF_XDP socket."""
    return rq.xsk is None and rq.pool.page_size == PAGE_SIZE
BULK_NATIVE = 16  # the native loop's TX and devmap bulk size (DEV_MAP_BULK_SIZE)
NATIVE_POLLS = 1024  # polls per native call (the softirq's "keep going" loop)
_native_mod: object | None = None
_native_error = ""


def native_available() -> bool:
    """Whether the native poll loop can run here (numba importable)."""
    global _native_mod, _native_error
    if _native_mod is None and not _native_error:
        try:
            from pyxdp.net import napi_native
            _native_mod = napi_native
        except ImportError as e:  # numba or llvmlite missing: the Python path only
            _native_error = str(e)
    return _native_mod is not None


CounterRow = tuple[tuple[int, ...], list[int]]  # a tracer key and its columns


class _NativeCounts:
    """The tracepoint counts a queue's native calls keep in place, read by the tracer
    as :class:`~pyxdp.net.trace.CounterSource` rows whenever it reads counters:
    ``cnt`` (:class:`~pyxdp.net.napi_native.K`: exceptions, XDP_TX bulks), and
    per redirect configuration (the devmaps' ids, the number of ifindexes) the
    redirect counts by (map slot, target) and the devmap transmit counts by
    target. Unknown verdicts count under the first one the queue saw."""

    def __init__(self, rq: NetdevRxQueue, prog: XdpProg, ctl: I64) -> None:
        from pyxdp.net.napi_native import K
        self.ifindex = rq.dev.ifindex
        self.ctl = ctl
        self.cnt = np.zeros(K.SIZE, np.int64)
        self.red: dict[tuple[tuple[int, ...], int], tuple[I64, I64]] = {}
        self.cpu = rq.ctx.cpu
        # cpumap tables: (map ids, entries' (map id, cpu) per row, redirects per map,
        # enqueue sums per entry row), one per cpumap configuration the queue saw.
        self.cms: list[tuple[list[int], list[tuple[int, int]], I64, I64]] = []
        self.egress: list[DevmapEgress] = []  # devmap programs' exceptions, per table
        # AF_XDP receive sums (pyxdp.net.xsk_native's T_* columns) per socket
        # configuration the queue saw: the XSKMAP id per trace slot, and the sums.
        self.xsks: list[tuple[list[int], I64]] = []
        tr = rq.dev.host.tracer
        self._sources: list[tuple[Any, _Source]] = [
            (tr.xdp_exception, _Source(self._exceptions, self.reset)),
            (tr.xdp_bulk_tx, _Source(self._bulk_tx, _nothing)),
            (tr.xdp_redirect, _Source(self._redirects, _nothing)),
            (tr.xdp_devmap_xmit, _Source(self._xmits, _nothing)),
            (tr.xdp_cpumap_enqueue, _Source(self._enqueues, _nothing)),
            (tr.xdp_redirect_err, _Source(self._redirect_errs, _nothing)),
        ]
        for tp, src in self._sources:
            tp.add_source(src)

    def tables(self, dms: Sequence[DevMap | DevMapHash], nif: int) -> tuple[I64, I64]:
        """The redirect and transmit count tables for this configuration."""
        key = (tuple(m.id for m in dms), nif)
        t = self.red.get(key)
        if t is None:
            t = self.red[key] = (np.zeros((len(dms) + 1, nif), np.int64),
                                 np.zeros((nif, 4), np.int64))
        return t

    def add_xsk(self, ids: list[int], xt: I64) -> None:
        """Count an AF_XDP receive configuration's sums (``xt``, in place)."""
        if not any(t is xt for _, t in self.xsks):
            self.xsks.append((ids, xt))

    def _exceptions(self) -> list[CounterRow]:
        from pyxdp.net.napi_native import C, K
        from pyxdp.net.xsk_native import T_TX_ERR
        k = self.cnt
        rows: list[CounterRow] = [((self.ifindex, 0), [int(k[K.ACT])])] if k[K.ACT] else []
        if k[K.ACT + 5]:
            bad = (int(self.ctl[C.INVALID_ACT]) - 1) & 0xFFFF_FFFF
            rows.append(((self.ifindex, bad), [int(k[K.ACT + 5])]))
        for eg in list(self.egress):
            rows.extend(eg.exception_rows())
        # Zero-copy XDP_TX frames that could not become an xdp_frame.
        rows.extend(((self.ifindex, int(XdpAction.XDP_TX)), [int(xt[T_TX_ERR])])
                    for _, xt in list(self.xsks) if xt[T_TX_ERR])
        return rows

    def _redirect_errs(self) -> list[CounterRow]:
        from pyxdp.net.napi_native import K
        from pyxdp.net.xsk_native import T_NOBUFS, T_NOMEM, T_NOSPC
        errs = self.cnt[K.ERR:]
        rows: list[CounterRow] = [((self.ifindex, -e), [int(errs[e])])
                                  for e in np.flatnonzero(errs).tolist()]
        for _, xt in list(self.xsks):
            for col, err in ((T_NOSPC, ENOSPC), (T_NOMEM, ENOMEM), (T_NOBUFS, ENOBUFS)):
                if xt[col]:
                    rows.append(((self.ifindex, -err), [int(xt[col])]))
        return rows

    def add_cpumap(self, cm: tuple[Any, ...], rts: list[Any]) -> None:
        """Count a cpumap table's redirect and enqueue sums (``cm[8]``, ``cm[7]``)."""
        self.cms.append(([int(i) for i in cm[0].tolist()],
                         [(rt.map.id, rt.cpu) for rt in rts], cm[8], cm[7]))

    def _enqueues(self) -> list[CounterRow]:
        rows: list[CounterRow] = []
        for _, ents, _, cq in list(self.cms):
            for r in np.flatnonzero(cq[:, 0]).tolist():
                mid, cpu = ents[r]
                rows.append(((mid, self.cpu, cpu), [int(x) for x in cq[r]]))
        return rows

    def _bulk_tx(self) -> list[CounterRow]:
        from pyxdp.net.napi_native import K
        k = self.cnt
        return [((self.ifindex,), [int(k[K.TX_EVENTS]), int(k[K.TX_SENT]),
                                   int(k[K.TX_DROPS]), 0])] if k[K.TX_EVENTS] else []

    def _redirects(self) -> list[CounterRow]:
        rows: list[CounterRow] = []
        for (ids, _), (red, _) in list(self.red.items()):
            if red.any():
                mids = [*ids, INT_MAX]
                for slot, ifx in zip(*np.nonzero(red), strict=True):
                    rows.append(((self.ifindex, int(ifx), mids[int(slot)]),
                                 [int(red[slot, ifx])]))
        for cm_ids, _, cm_red, _ in list(self.cms):
            for k in np.flatnonzero(cm_red).tolist():
                rows.append(((self.ifindex, 0, cm_ids[k]), [int(cm_red[k])]))
        from pyxdp.net.xsk_native import T_SLOT
        for xids, xt in list(self.xsks):
            for s in np.flatnonzero(xt[T_SLOT:]).tolist():
                rows.append(((self.ifindex, 0, xids[s]), [int(xt[T_SLOT + s])]))
        return rows

    def _xmits(self) -> list[CounterRow]:
        rows: list[CounterRow] = []
        for _, xmit in list(self.red.values()):
            for ifx in np.flatnonzero(xmit[:, 0]).tolist():
                rows.append(((self.ifindex, ifx), [int(x) for x in xmit[ifx]]))
        return rows

    def reset(self) -> None:
        """Zero the counts (the tracer's reset)."""
        self.cnt[:] = 0
        for red, xmit in list(self.red.values()):
            red[:] = 0
            xmit[:] = 0
        for _, _, cm_red, cq in list(self.cms):
            cm_red[:] = 0
            cq[:] = 0
        for eg in list(self.egress):
            eg.exc[:] = 0
        for _, xt in list(self.xsks):
            xt[:] = 0

    def retire(self) -> None:
        """The state is done: what it counted becomes the tracer's own."""
        for tp, src in self._sources:
            tp.remove_source(src)
        self._sources = []


class _Source:
    """A tracepoint's view of a :class:`_NativeCounts` (its rows and its reset)."""

    def __init__(self, rows: Callable[[], list[CounterRow]],
                 reset: Callable[[], None]) -> None:
        self.rows = rows
        self.reset = reset


def _nothing() -> None:
    """A source whose records another source of the same state resets."""


class _NativeState:
    """What a queue keeps between native calls for one program."""

    def __init__(self, rq: NetdevRxQueue, prog: XdpProg, budget: int) -> None:
        from pyxdp.net.napi_native import DEFER_COLS, FX_COLS, PT_COLS, C
        from pyxdp.vm.jit.xdp import DriverIO
        self.prog = prog
        self.io = DriverIO(budget, rq.dev.ifindex, rq.index)
        # POLLS, FRAMES and INVALID_ACT accumulate over calls; the rest is per call.
        self.ctl = np.zeros(C.SIZE, np.int64)
        self.counts = _NativeCounts(rq, prog, self.ctl)
        # Room for DEFER_POLLS polls of XDP_PASS frames (one stack list per native call).
        self.defer = np.zeros((budget * DEFER_POLLS, DEFER_COLS), np.int64)
        # xdp_frames from other devices: each frame's memory and kind while a poll
        # holds some, and the memories' pages addresses (pyxdp.net.napi_native.FX_*).
        self.fx = np.zeros((budget, FX_COLS), np.int64)
        # A multi-buffer poll's frag table (rows by position in the poll; Python helpers
        # of the program see the frags through it) and which frames have frags.
        self.io.frags = FragTable(np.zeros((budget, FRAG_WORDS), np.uint64),
                                  np.zeros((budget, MAX_FRAGS, 2), np.uint64))
        self.fl = np.zeros(budget, np.int64)
        # A passed multi-buffer skb read whole for the stack: a head page and its frags.
        self.lin = np.zeros(PAGE_SIZE * (1 + MAX_SKB_FRAGS), np.uint8)
        self._pools: tuple[PagePool, ...] = ()
        self.ptab = np.zeros((0, PT_COLS), np.int64)
        self.faddr = np.zeros(2, np.int64)
        self.tx_rows = np.zeros(BULK_NATIVE, np.int64)
        # No generator: no templates, and a limit of 0 frames.
        self.no_gen = (np.zeros((1, 1), np.uint8), np.zeros(0, np.int64),
                       GenState(limit=0).words)
        self.xskmaps = [m for m in prog.maps.values() if type(m) is XskMap]
        self.cpumaps = [m for m in prog.maps.values() if type(m) is CpuMap]
        self.xsk: Any = None  # pyxdp.net.xsk.NativeRx of the last call
        self.ifindex = rq.dev.ifindex
        self.devmaps: list[DevMap | DevMapHash] = [
            m for m in prog.maps.values() if type(m) is DevMap or type(m) is DevMapHash]
        self._tables: _Tables | None = None
        self._cm: tuple[object, tuple[Any, ...], list[Any]] | None = None
        self._cm_seen = np.zeros(0, np.int64)  # enqueue events per entry at the last wake

    def pool_table(self, host: Host, pool: PagePool) -> tuple[PagePool, ...]:
        """The host's other live page pools of ``pool``'s page size, whose pages
        xdp_frames queued here may be in: their records in ``ptab``
        (:data:`~pyxdp.net.napi_native.PT_COLS`) and their pages' addresses after
        the system allocator's in ``faddr``, remade when the pools changed."""
        from pyxdp.net.napi_native import MAX_MEMS, PT_COLS, pool_row
        width = pool.pages.shape[1]
        pools = tuple(m for m in host.memmap.regions
                      if type(m) is PagePool and m is not pool and not m.destroyed
                      and m.pages.shape[1] == width)[:MAX_MEMS - 2]
        if pools != self._pools:
            rows = [pool_row(m) for m in pools]
            self.ptab = np.array(rows, np.int64).reshape(len(pools), PT_COLS)
            self.faddr = np.array([0, host.memmap.system.pages.ctypes.data,
                                   *(m.pages.ctypes.data for m in pools)], np.int64)
            self._pools = pools
        return pools

    def retire(self, rq: NetdevRxQueue) -> None:
        """Replaced or closed: its counts go to the tracer and the queue, and what its
        last call queued on cpumap entries freed meanwhile is delivered."""
        from pyxdp.net.napi_native import C
        if self._cm is not None:
            _drain_freed(self._cm[2])
        self.counts.retire()
        rq.retired_polls += int(self.ctl[C.POLLS])
        self.ctl[C.POLLS] = 0

    def tables(self, host: Host, nif: int, vm: Any, cpu: int | None) -> _Tables:
        """The call's devmap tables: kept from the last call unless a devmap was
        written, the devices changed in number or the engine is another one. ``cpu``:
        the CPU of a call without the host lock (None: with it)."""
        dms = self.devmaps
        key = (nif, vm, cpu, tuple(m.gen for m in dms))
        t = self._tables
        if t is None or t.key != key:
            t = self._tables = _Tables(key, host, dms, nif, vm, self.ifindex, cpu,
                                       self.counts.tables(dms, nif))
            self.counts.egress.append(t.egress)
        return t

    def cpumap_args(self, host: Host) -> tuple[tuple[Any, ...], list[Any]]:
        """The cpumap table (:func:`_cpumap_args`), kept until a cpumap is written: this
        queue's own bulk queues and sums (the kernel's per-CPU ``xdp_bulk_queue`` and
        counts; a queue polls on one CPU at a time), the entries' rings shared."""
        maps = self.cpumaps
        key = (host.cpumap_threads, tuple((m.id, m.gen) for m in maps))
        if self._cm is None or self._cm[0] != key:
            old = self._cm[2] if self._cm is not None else []
            # Polls on other CPUs may look for the same entries meanwhile: one of them
            # makes each (cpumap.cpumap_runtime).
            self._cm = (key, *_cpumap_args(host, maps))
            _drain_freed(old)
            if maps:
                self.counts.add_cpumap(self._cm[1], self._cm[2])
                self._cm_seen = np.zeros(len(self._cm[2]), np.int64)
        return self._cm[1], self._cm[2]


def napi_drain_freed_cpumaps(rq: NetdevRxQueue) -> None:
    """Frames ``rq``'s last native call, without the host lock, queued on cpumap entries
    freed meanwhile: delivered (see :func:`_drain_freed`)."""
    st = rq.native
    if st is not None and st._cm is not None:
        _drain_freed(st._cm[2])


def _drain_freed(rts: Sequence[Any]) -> None:
    """Entries of a queue's last cpumap table that were freed (their kthreads stopped
    and drained) while that call, without the host lock, still queued frames on
    them: those delivered now, as ``__cpu_map_entry_free``'s ``kthread_stop`` does
    after the RCU grace period that waits for such a call."""
    for rt in rts:
        if rt.freed and rt.backlog:
            rt.drain()


class _Tables:
    """What a native call takes of its program's devmaps and gives back, kept between
    calls (remade only when a devmap was written): the maps' ids, sizes and the
    addresses of their entries (read where the maps keep them), the egress
    programs (:class:`DevmapEgress`), the bulk queues per device, and the redirect
    and ``xdp_devmap_xmit`` counts (kept by :class:`_NativeCounts`)."""

    def __init__(self, key: object, host: Host, dms: Sequence[DevMap | DevMapHash], nif: int,
                 vm: Any, ifindex: int, cpu: int | None, counts: tuple[I64, I64]) -> None:
        self.key = key
        self.dms = list(dms)
        self.dm_ids = np.array([m.id for m in dms], np.int64)
        self.dm_addr = np.array([m.entries.ctypes.data for m in dms], np.int64)
        self.dm_n = np.array([m.max_entries for m in dms], np.int64)
        # A devmap_hash's index and walk, probed in place by the maps' probe.
        from pyxdp.net.napi_native import DM_HASH_COLS
        self.dm_hash = np.zeros((len(dms), DM_HASH_COLS), np.int64)
        for k, m in enumerate(dms):
            if isinstance(m, DevMapHash):
                self.dm_hash[k] = (htab_find_u32_address(), m.index.ctypes.data,
                                   m.hashes.ctypes.data, m.key_data.ctypes.data, m.capacity,
                                   m.walk.ctypes.data)
        ids = sorted({int(p) for m in dms for p in np.unique(m.entries[:, 1]).tolist() if p})
        # Devmap programs the native loop runs itself: JIT programs other than the
        # polling one (a driven engine runs one batch at a time), on their engine of
        # CPU 0 as the Python path runs them; in a call without the host lock those
        # that may run on several CPUs at once (napi._parallel_ok), on an engine of
        # their own for the call's CPU (dev_map_bpf_prog_run runs on the CPU that
        # flushes; XdpProg.unlocked_engine), the polling one too.
        progs = [p for p in (host.program_by_id(i) for i in ids)
                 if p is not None and p.engine == "jit" and not p._depth
                 and (p.vm is not vm if cpu is None else _parallel_ok(p))]
        self.egress = DevmapEgress(progs, ifindex, nif,
                                   [p.vm if cpu is None else p.unlocked_engine(cpu)
                                    for p in progs])
        # One bulk queue per device (bq_enqueue's dev->xdp_bulkq), whatever entries
        # name it: its frames' columns, its count and program (napi_native.BQ_*).
        from pyxdp.net.napi_native import BQ_COLS, BQ_WORDS
        self.bq = np.zeros((nif, BQ_COLS, BULK_NATIVE), np.int64)
        self.bq_n = np.zeros((nif, BQ_WORDS), np.int64)
        # Redirects per (map, target) and xdp_devmap_xmit per target: the state's
        # _NativeCounts, which the tracer reads in place.
        self.red_cnt, self.xmit_cnt = counts

    def clear(self) -> None:
        """After the accounting: the egress programs' sums back to zero."""
        self.egress.clear()


def native_polls_of(rq: NetdevRxQueue) -> int:
    """Polls the queue's current native state counted (:attr:`NetdevRxQueue.polls`)."""
    from pyxdp.net.napi_native import C
    st = rq.native
    return int(st.ctl[C.POLLS]) if st is not None else 0


def _native_ok(rq: NetdevRxQueue, prog: XdpProg, *, frags: bool = False) -> bool:
    """Whether the native loop may poll ``rq`` with ``prog``; ``frags``: as a native
    program, which takes multi-buffer frames (the generator's too, up to
    ``MAX_SKB_FRAGS`` frags, on a queue of page-sized buffers without zero-copy)."""
    host = rq.dev.host
    if not (prog.engine == "jit" and host.native and not host.tracer.listening
            and not rq.pool.destroyed and native_available()):
        return False
    src = rq.source
    if src is not None and src.active and src.max_len > MAX_NATIVE_FRAME and not (
            frags and _frags_native(rq) and src.max_len <= MAX_NATIVE_FRAGS_FRAME):
        return False  # frames above a page's room: the Python poll's copies take them
    pool = rq.xsk
    if pool is None:
        return True
    # A zero-copy AF_XDP queue: native while its socket receives there and the frames
    # the generator makes fit a buffer (else xsk_zc_dma's drops, in Python).
    from pyxdp.net.xsk import xsk_native_socket
    if pool.region is None or xsk_native_socket(rq) is None:
        return False
    return src is None or not src.active or src.max_len <= pool.umem.rx_frame_size


def _native_poll(rq: NetdevRxQueue, prog: XdpProg, budget: int, *,
                 generic: bool = False) -> int:
    """Run native polls of ``rq``; the frames it defers go through :func:`dispatch`.

    ``generic``: ``prog`` is the device's generic (skb-mode) program and the queue
    has no native one: the driver builds an skb around each page with
    ``NET_SKB_PAD`` of headroom, ``netif_receive_generic_xdp`` gives it a new
    head with ``XDP_PACKET_HEADROOM`` (``pskb_expand_head``: another page, the
    packet copied) and the program runs on it. The loop then takes
    DROP, ABORTED, PASS (to the stack), TX (``generic_xdp_tx``) and redirects
    (``xdp_do_generic_redirect``, broadcasts and entry programs too) to NICs whose
    transmit is a sink, veths (the peer's stack, ``xdp_ring`` or backlog) and
    ``lo`` (its stack or backlog), into cpumap entries and into the queue's
    AF_XDP socket
    (``xsk_generic_rcv``) itself;
    the rest is deferred to :mod:`pyxdp.net.dev` (per target, in a batch)."""
    from pyxdp.net.napi_native import C, K, native_polls
    from pyxdp.net.xsk import xsk_native_rx
    dev = rq.dev
    host = dev.host
    st: _NativeState | None = getattr(rq, "native", None)
    if st is None or st.prog is not prog or len(st.io.rows) != budget:
        if st is not None:
            st.retire(rq)
        st = _NativeState(rq, prog, budget)
        rq.native = st
    pool = rq.pool
    ring = rq.ring
    ctl = st.ctl
    ctl[:C.INVALID_ACT] = 0
    # Threaded NAPI: queues on other CPUs poll at the same time. A call needs no host
    # lock when it touches only its queue's records and per-CPU state: the program's
    # maps are arrays (per-CPU or not, as the kernel's lock-free ones), device maps or
    # cpumaps, no tail calls; its redirects to devices and cpumap entries go into its
    # own bulk queues and count into the targets' rows for its CPU (devmap egress
    # programs run on its CPU's engines; a cpumap bulk is flushed into the entry's
    # ring under the ring's producer lock), the rest go to the (locked) Python
    # dispatch.
    parallel = host.threaded_napi and _parallel_ok(prog)
    vm = prog.engine_for(rq.ctx.cpu) if parallel else prog.vm
    xsk = st.xsk = None if parallel else xsk_native_rx(rq, st.xskmaps, st.xsk)
    if xsk is not None:
        st.counts.add_xsk(xsk.ids, xsk.xt)
    if rq.xsk is not None:  # _native_ok saw one socket on the zero-copy queue (not generic)
        assert xsk is not None and xsk.pool.region is not None
        return _native_poll_zc(rq, prog, budget, st, xsk)
    src = rq.source
    fr_on = not generic and _frags_native(rq)
    if src is not None and src.active:
        tpl, tpl_len = src.batch.data, src.batch.length
        if src.max_len > min(tpl.shape[1], MAX_NATIVE_FRAGS_FRAME if fr_on
                             else MAX_NATIVE_FRAME):
            raise ValueError(f"{dev.name}: generator frames above {MAX_NATIVE_FRAME} bytes "
                             f"need multi-buffer XDP, which pyxdp devices do not do")
        gen = (tpl, tpl_len, src.state.words)
    else:
        gen = st.no_gen
    # Redirect targets: xdp_frames through ndo_xdp_xmit, or a generic program's skbs
    # (NICs whose transmit is a sink); none for a call without the host lock.
    if generic:
        tgt = host.fwd.arrays(host.devices, generic=True)
    else:
        tgt = host.fwd.arrays(host.devices)
    own = tgt[0][dev.ifindex] if dev.ifindex < len(tgt[0]) else 0
    if parallel:
        # Without the host lock: redirects to devices natively, each target's counters
        # in its row for this CPU.
        tgt = host.fwd.unlocked_for(host.devices, rq.ctx.cpu % host.nr_cpus,
                                    generic=generic)
    # XDP_TX in the loop: a NIC's transmit is a sink; a device with native transmit
    # rings (an AF_XDP socket of the host kernel) takes the rx queue's ring. A
    # generic program's XDP_TX is generic_xdp_tx: the skb to the same sink.
    wires = dev.xmit_wires
    tx_wire = wires[rq.index % len(wires)] if wires and not generic else 0
    tx_ok: int
    if generic:
        # generic_xdp_tx: 1 a NIC whose transmit is a sink; 2 lo, whose loopback_xmit
        # queues the skb on its own backlog, the ring this call polls (its row of the
        # targets is this queue's), or a veth, whose veth_xmit hands it to its peer as
        # a generic redirect to the veth does (its row: the peer's stack or ring).
        g = int(tgt[0][dev.ifindex])
        tx_ok = 1 if g == 1 else 2 if ((g == 4 and dev.ifindex == 1 and rq is dev.rx[0])
                                       or (dev.kind == "veth" and g in (2, 4))) else 0
    else:
        # A veth's XDP_TX is its own ndo_xdp_xmit to its peer's ring (under the ring's
        # lock): native where a redirect to it is (its row of the targets), also in a
        # call without the host lock - the peer's poll, on whichever thread, gives the
        # frames back into this queue's pool's ring under the pool's lock.
        peer: NetDevice | None = getattr(dev, "peer", None)
        tx_ok = int(dev.up and ((dev.kind == "nic" and not dev.wire) or tx_wire != 0
                                or (peer is not None and own == 1)))
    cpu = rq.ctx.cpu if parallel else None
    nt = st.tables(host, len(tgt[0]), vm, cpu)
    cm, cm_rts = st.cpumap_args(host)
    io = st.io
    # xdp_frames other devices queued here (veth_xdp_rcv_one): in this pool, the
    # system allocator or another page pool (the host's, in a table).
    system = host.memmap.system
    # With threaded NAPI too: their pages go back into other pools' rings under each
    # pool's lock, and never into another pool's alloc cache (veth_poll's no_direct),
    # and the system allocator's under its lock.
    fon = not (generic or rq.xsk is not None)
    pools = st.pool_table(host, pool) if fon else ()
    others = (system.pages, *(p.pages for p in pools)) if fon else ()
    pool.napi_local = True
    # Producers of a cpumap entry's ring and consumers of its return ring take that
    # ring's lock (ptr_ring's producer_lock, consumer_lock), with or without this one.
    lock = _NO_LOCK if parallel else host.lock
    # A veth counts the redirects its program's xdp_do_redirect failed as rx_drops: the
    # loop's per-errno error counts of this call, taken into the queue's counters.
    errs = st.counts.cnt[K.ERR:K.ERR + K.ERR_N]
    errs0 = int(errs.sum()) if dev.kind == "veth" and not generic else -1
    lock.acquire()
    try:
        # Devmap programs: on the device's first queue's context as the Python path
        # runs them, or without the host lock on the call's own (its CPU's).
        with vm.driver(rq.ctx, pool.pages, io, others) as (fn, ctx_addr), \
                nt.egress.driven(dev.rx[0].ctx if cpu is None else rq.ctx, pool.pages,
                                 others or (system.pages,)):
            done = native_polls(
                NATIVE_POLLS, budget, _jit_args(io, fn, ctx_addr),
                (pool.pages, pool.words, pool.qwords, pool.addr_base, pool.pfn_base,
                 *pool.native_arrays),
                (ring.cols, ring.cur.words, fon, st.ptab, st.fx, st.faddr, fr_on,
                 st.io.frags.rows, st.io.frags.bounds, st.fl, st.lin), gen,
                (dev.ifindex, tx_ok, rq.stats.words, st.tx_rows, generic, tx_wire),
                (*tgt, nt.bq, nt.bq_n, nt.xmit_cnt),
                (nt.dm_ids, nt.dm_addr, nt.dm_n, nt.dm_hash, nt.red_cnt, nt.egress.args,
                 _system_args(host)),
                _xsk_args(xsk),
                # One list per poll, but for a native program on a backlog (process_backlog:
                # one skb at a time); generic XDP's skbs go on as lists (netif_receive_skb_list).
                (*_stack_args(host, dev, rq, generic), _peer_records(host, rq),
                 int(generic or not getattr(dev, "backlog", False))), cm,
                (ctl, st.counts.cnt, st.defer))
    finally:
        pool.napi_local = False
        lock.release()
    if errs0 >= 0:
        rq.stats.rx_dropped += int(errs.sum()) - errs0
    for other in pools:
        if other.state.error:
            row = int(other.state.error) - 1
            other.state.error = 0
            raise PageAccountingError(f"native poll: double return of page row {row} of "
                                      f"{other.name}", pages=[other.pfn_base + row],
                                      owner=other.name)
    if ctl[C.ERROR] or pool.state.error:
        if ctl[C.ERROR]:
            raise PageAccountingError(f"native poll: {dev.name} rx{rq.index}'s ring holds a "
                                      f"frame that is no page of {pool.name} in use",
                                      owner=pool.name)
        row = int(pool.state.error) - 1
        pool.state.error = 0
        raise PageAccountingError(f"native poll: double return of page row {row} of "
                                  f"{pool.name}", pages=[pool.pfn_base + row], owner=pool.name)
    with host.lock:
        _native_account(rq, prog, st, vm)
        nt.egress.account(host.devices, _warned, MAX_FAULT_REPORTS)
    nt.clear()
    if cm_rts:
        _cpumap_account(st, cm, cm_rts)
    if generic:
        _generic_deferred(rq, prog, st, pool.pfn_base)
    else:
        _native_deferred(rq, prog, st, pool.pfn_base)
    return int(done)


_NO_XSK: tuple[Any, ...] | None = None


class _NoLock:
    def acquire(self) -> None:
        pass

    def release(self) -> None:
        pass


_NO_LOCK = _NoLock()
_PARALLEL_MAPS = (int(BpfMapType.BPF_MAP_TYPE_ARRAY), int(BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY),
                  int(BpfMapType.BPF_MAP_TYPE_DEVMAP), int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH),
                  int(BpfMapType.BPF_MAP_TYPE_CPUMAP))


def _parallel_ok(prog: XdpProg) -> bool:
    """Whether NAPI contexts on several CPUs may run ``prog`` at once without the host lock:
    its maps are arrays (their updates are the program's own atomics, as in the kernel),
    device maps or cpumaps (a program only reads those: lookups and
    ``bpf_redirect_map``; the redirect's bulk queues are the call's own, its targets'
    counters per CPU, their rings - a device's, a cpumap entry's ``ptr_ring`` - and the
    pages' memories taken under their locks), it makes no tail calls (their targets' run
    state is shared), allocates no objects (the arena's free lists are not atomic) and
    calls no kfunc or helper whose native twin changes a namespace table (conntrack,
    xfrm, a listener's SYN queue overflow stamp: not atomic either)."""
    ok = getattr(prog, "_parallel_ok", None)
    if ok is None:
        ok = all(int(m.map_type) in _PARALLEL_MAPS for m in prog.maps.values()) and \
            not prog.shared_regions and not serial_helpers(
                prog.helpers, (i.imm for i in prog.spec.insns
                               if i.code == OP_CALL and i.src == CallSrc.BPF_HELPER_CALL))
        prog._parallel_ok = ok  # type: ignore[attr-defined]
    return bool(ok)


def _peer_records(host: Host, rq: NetdevRxQueue) -> tuple[Any, ...]:
    """The stack records a generic call's skbs for a veth's peer or ``lo`` are counted
    in: CPU 0's, as the Python path counts them; with threaded NAPI the calling
    CPU's (``netif_rx`` queues to this CPU's backlog), as CPU 0's thread writes
    CPU 0's without the host lock."""
    if host.threaded_napi:
        return host.stack.records(host.stack.row(rq.ctx.cpu))
    return host.stack.records(0)


def _system_args(host: Host) -> tuple[Any, ...]:
    """The system page allocator for a native call (``xdpf_clone``'s pages for a
    broadcast through its devmaps, zero-copy frames' copies, a generic skb's order-0
    copy for a cpumap, the skbs other devices queue on a ring and the ring's poll
    frees)."""
    return host.memmap.system.native_args


def _jit_args(io: Any, fn: int, ctx_addr: int) -> tuple[Any, ...]:
    """The JIT's batch entry and the I/O arrays of its driver, for native code."""
    return (fn, ctx_addr, io.desc, io.rows, io.data_off, io.data_len, io.meta_len, io.action,
            io.off_out, io.len_out, io.meta_out, io.status, io.pc, io.addr, io.redirect)


def _stack_args(host: Host, dev: NetDevice, rq: NetdevRxQueue,
                generic: bool) -> tuple[Any, ...]:
    """The stack's records for the native loop's XDP_PASS, on the queue's CPU; the
    flag is 0 (PASS deferred) when the skbs must still meet a generic program, a
    user callback or a socket keeping payloads."""
    stack = host.stack
    row = stack.row(rq.ctx.cpu)
    ok = int((generic or dev.xdp_generic is None) and stack.native_ok)
    return (ok, stack.records(row))


def _xsk_args(x: Any) -> tuple[Any, ...]:
    """The AF_XDP group of a copy-mode native call: the queue's socket
    (:class:`pyxdp.net.xsk.NativeRx`), or inert records without one."""
    global _NO_XSK
    if x is not None:
        args: tuple[Any, ...] = x.args
        return args
    if _NO_XSK is None:
        from pyxdp.net.xdp_sock import XdpSockState
        from pyxdp.net.xsk_buff_pool import XskPoolState
        from pyxdp.net.xsk_native import T_SLOT
        from pyxdp.net.xsk_queue import XskQueueState
        _NO_XSK = (0, XskPoolState().words, XskQueueState().words, XskQueueState().words,
                   XdpSockState().words, np.zeros((0, 3), np.int64), np.zeros(T_SLOT, np.int64))
    return _NO_XSK




def _native_poll_zc(rq: NetdevRxQueue, prog: XdpProg, budget: int, st: _NativeState,
                    xsk: Any) -> int:
    """Native polls of a zero-copy AF_XDP queue (:func:`napi_native.native_polls_zc`)."""
    from pyxdp.net.napi_native import C, native_polls_zc
    dev = rq.dev
    host = dev.host
    ring = rq.ring
    ctl = st.ctl
    region = xsk.pool.region
    src = rq.source
    gen = (src.batch.data, src.batch.length, src.state.words) \
        if src is not None and src.active else st.no_gen
    cnt = st.counts.cnt
    io = st.io
    tx_ok = dev.kind == "nic" and dev.up and not dev.wire
    # xdp_convert_zc_to_xdp_frame's pages (XDP_TX, redirects to devices).
    system = host.memmap.system
    pool = rq.pool
    tgt = host.fwd.arrays(host.devices)
    nt = st.tables(host, len(tgt[0]), prog.vm, None)
    host.lock.acquire()
    try:
        with prog.vm.driver(rq.ctx, region.pages, io) as (fn, ctx_addr), \
                nt.egress.driven(dev.rx[0].ctx, pool.pages, (system.pages,)):
            done = native_polls_zc(NATIVE_POLLS, budget, _jit_args(io, fn, ctx_addr),
                                   region.pages, (ring.cols, ring.cur.words, st.ptab), gen,
                                   (dev.ifindex, rq.stats.words, tx_ok, st.tx_rows,
                                    (*system.native_arrays, system.pages, system.addr_base),
                                    (pool.pages, pool.words, pool.qwords, pool.addr_base,
                                     pool.pfn_base, *pool.native_arrays)),
                                   (*tgt, nt.bq, nt.bq_n, nt.xmit_cnt),
                                   (nt.dm_ids, nt.dm_addr, nt.dm_n, nt.dm_hash, nt.red_cnt,
                                    nt.egress.args, _system_args(host)),
                                   xsk.args, _stack_args(host, dev, rq, False),
                                   (ctl, cnt, st.defer))
    finally:
        host.lock.release()
    if ctl[C.ERROR]:
        raise PageAccountingError(f"native poll: {dev.name} rx{rq.index}'s ring holds a "
                                  f"frame that is no UMEM chunk the queue holds",
                                  owner=region.name)
    with host.lock:
        _native_account(rq, prog, st, prog.vm)
        nt.egress.account(host.devices, _warned, MAX_FAULT_REPORTS)
    nt.clear()
    _native_deferred(rq, prog, st, region.pfn_base)
    return int(done)


def _frame_memory(rq: NetdevRxQueue) -> PageMemory | None:
    """The memory of the xdp_frame at the head of ``rq``'s ring when the native loop
    can take it (veth_xdp_rcv_one natively): a single-buffer frame in the queue's
    page pool, in the system allocator or in another live page pool of the same
    page size, on a queue without zero-copy AF_XDP; else None. With threaded NAPI
    other pools' polls run beside this one: their rings take the pages back under
    their locks, the system allocator its pages (clones, order-0 copies) under its
    own."""
    if not len(rq.ring) or rq.ring.peek_kind() != KIND_FRAME or rq.xsk is not None:
        return None
    host = rq.dev.host
    try:
        mem = host.memmap.find(int(rq.ring.cols[0, rq.ring.cur.head]))
    except PageAccountingError:
        return None  # the Python path reports it
    if mem is rq.pool or mem is host.memmap.system:
        return mem
    if (isinstance(mem, PagePool) and not mem.destroyed
            and mem.pages.shape[1] == rq.pool.pages.shape[1]):
        return mem
    return None


def _native_deferred(rq: NetdevRxQueue, prog: XdpProg, st: _NativeState, pfn_base: int) -> None:
    """The frames a native call deferred, through :func:`dispatch` and a flush."""
    deferred = _deferred(st, pfn_base)
    if deferred is None:
        return
    frames, v = deferred
    dev = rq.dev
    host = dev.host
    pool = rq.pool
    with host.lock:
        pool.napi_local = True
        try:
            bq = BulkQueues()
            _dispatch_deferred(host, dev, rq, prog, frames, v, bq)
            napi_flush(host, dev, rq, bq)
        finally:
            pool.napi_local = False


def _deferred(st: _NativeState, pfn_base: int) -> tuple[Frames, _Verdicts] | None:
    """The frames (buffers of the queue) and verdicts a native call handed back."""
    from pyxdp.net.napi_native import C
    nd = int(st.ctl[C.NDEFER])
    if not nd:
        return None
    c = st.defer[:nd].T.copy()  # one contiguous row per column
    return (Frames(c[0] + pfn_base, c[1], c[2], c[3], c[9]),
            _Verdicts(c[4], c[5], c[6], c[7], c[8]))


_NO_CPUMAP: tuple[Any, ...] = (np.zeros(0, np.int64), np.zeros(0, np.int64),
                                np.zeros(0, np.int64), np.zeros(1, np.int64),
                                np.zeros((0, 6), np.int64), np.zeros((0, 4, 8), np.int64),
                                np.zeros(0, np.int64), np.zeros((0, 3), np.int64),
                                np.zeros(0, np.int64), False)


def _cpumap_args(host: Host, maps: Sequence[CpuMap]) -> tuple[tuple[Any, ...], list[Any]]:
    """The cpumap entries of ``maps`` for the native loop: every slot with a queue
    (its entry made now, as the kernel has it from the map update on), the table
    of their rings' addresses, bulk queues and sums; and the entries in row order."""
    if not maps:
        return _NO_CPUMAP, []
    rts: list[Any] = []
    ent: list[int] = []
    for m in maps:
        row = np.full(m.max_entries, -1, np.int64)
        for cpu in np.flatnonzero(m.entries[:, 0]).tolist():
            row[cpu] = len(rts)
            rts.append(cpumap_runtime(host, m, cpu))
        ent.extend(row.tolist())
    n = len(rts)
    tab = np.array([[rt.queue.slots.ctypes.data, rt.queue.size, rt.queue.idx.ctypes.data,
                     rt.ret.slots.ctypes.data, rt.ret.size, rt.ret.idx.ctypes.data]
                    for rt in rts], np.int64).reshape(n, 6)
    sizes = np.array([m.max_entries for m in maps], np.int64)
    cm = (np.array([m.id for m in maps], np.int64),
          np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64), sizes,
          np.array(ent or [-1], np.int64), tab, np.zeros((n, 4, 8), np.int64),
          np.zeros(n, np.int64), np.zeros((n, 3), np.int64), np.zeros(len(maps), np.int64),
          not host.cpumap_threads)
    return cm, rts


def _cpumap_account(st: _NativeState, cm: tuple[Any, ...], rts: list[Any]) -> None:
    """Wake the kthreads a native call queued frames for (their enqueue events grew;
    the sums themselves stay in the table, which the tracer reads in place)."""
    events = cm[7][:, 0]
    for r in np.flatnonzero(events != st._cm_seen).tolist():
        rts[r]._wake.set()
    st._cm_seen[:] = events


def _generic_deferred(rq: NetdevRxQueue, prog: XdpProg, st: _NativeState,
                      pfn_base: int) -> None:
    """The skbs a native generic call deferred (PASS with a callback or a socket
    keeping payloads, TX and REDIRECT it does not take): built from their pages,
    which are then freed, and acted on by :func:`pyxdp.net.dev.generic_xdp_act`."""
    from pyxdp.net.dev import generic_xdp_act
    deferred = _deferred(st, pfn_base)
    if deferred is None:
        return
    frames, v = deferred
    dev = rq.dev
    host = dev.host
    dev.stats.xdp_packets += len(frames)
    with host.lock:
        out = host.frames_to_skbs(frames, dev.ifindex)
        out.queue[:] = rq.index
        rq.pool.napi_local = True
        try:
            host.drop_frames(frames, rq, direct=True)
        finally:
            rq.pool.napi_local = False
    generic_xdp_act(dev, prog, out, v.action, v.map_id, v.map_type, v.index, v.flags)


def _native_account(rq: NetdevRxQueue, prog: XdpProg, st: _NativeState, vm: Any) -> None:
    """What a native call leaves for Python besides its records: the warning for an
    unknown verdict and the first fault's report (counts stay in the records,
    read by the tracer through :class:`_NativeCounts`)."""
    from pyxdp.net.napi_native import C, K
    dev = rq.dev
    ctl = st.ctl
    if st.counts.cnt[K.ACT + 5] and prog not in _warned:
        _warned.add(prog)
        log.warning("%s: XDP program %s returned illegal action %d: treated as "
                    "XDP_ABORTED (bpf_warn_invalid_xdp_action)", dev.name, prog.spec.name,
                    int(ctl[C.INVALID_ACT]) - 1)
    if ctl[C.FAULTS] and len(dev.faults) < MAX_FAULT_REPORTS:
        fault = prog._with_source(vm.render_fault(int(ctl[C.FAULT_WORD]), int(ctl[C.FAULT_PC]),
                                                  int(ctl[C.FAULT_ADDR])))
        dev.faults.append(f"{dev.name} rx{rq.index}: {prog.spec.name}: {fault} -> XDP_ABORTED")
        log.warning("%s", dev.faults[-1])


def _dispatch_deferred(host: Host, dev: NetDevice, rq: NetdevRxQueue, prog: XdpProg,
                       frames: Frames, v: _Verdicts, bq: BulkQueues) -> None:
    """The deferred frames of a native poll: their verdicts through :func:`dispatch`
    (exceptions for them were not counted natively: dispatch fires none for
    the verdicts that can be deferred, PASS/TX/REDIRECT)."""
    dispatch(host, dev, rq, prog, frames, v, bq)
