"""The native (driver) XDP receive path: a NAPI poll, the XDP actions, and the
redirect machinery of ``net/core/filter.c`` and ``kernel/bpf/devmap.c``.

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
- ``XDP_REDIRECT`` is :func:`xdp_do_redirect` for the batch: devmap and
  devmap_hash targets go into per-device bulk queues of 16 (``bq_enqueue``),
  broadcasts (``BPF_F_BROADCAST``, ``BPF_F_EXCLUDE_INGRESS``) clone the frame
  for every target but the last, ``bpf_redirect`` ifindexes use the same
  queues without a program, cpumap targets go to the entry's bulk queue of 8;
  ``xdp_redirect``/``xdp_redirect_err`` fire per frame (``-EBADRQC`` for an
  XDP_REDIRECT no redirect helper prepared; targets are checked as
  ``xdp_ok_fwd_dev`` does: up, at most mtu + 14 + 4 bytes).

The poll ends with ``xdp_do_flush``: every bulk queue flushed, the devmap
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

This is the reference path: every frame can take it (with a tracer
listening, every frame does). JIT programs normally run in the native poll
loop (:mod:`pyxdp.net.napi_native`), which acts on the verdicts it can
produce exactly over the same records and hands the rest back to
:func:`dispatch`; with ``Host(threaded_napi=True)`` each CPU's queues are
polled on a thread of their own.
"""

from __future__ import annotations

import errno
import logging
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pyxdp.maps.base import map_by_id
from pyxdp.maps.cpumap import CpuMap
from pyxdp.maps.devmap import DevMap, DevMapHash
from pyxdp.maps.xskmap import XskMap
from pyxdp.net.filter import BPF_F_BROADCAST, BPF_F_EXCLUDE_INGRESS
from pyxdp.net.frames import (
    DEV_MAP_BULK_SIZE,
    KIND_BUFF,
    KIND_FRAME,
    XDP_TX_BULK_SIZE,
    Bulk,
    Frames,
)
from pyxdp.net.prog import XdpProg
from pyxdp.net.source import GenState
from pyxdp.net.xdp_mem import (
    MEM_TYPE_PAGE_ORDER0,
    MEM_TYPE_PAGE_POOL,
    xdp_convert_buff_to_frame,
    xdp_frames_set_dev_rx,
    xdp_return_frames,
    xdp_return_frames_rx_napi,
    xdpf_clones,
)
from pyxdp.uapi.bpf import BpfMapType, XdpAction
from pyxdp.vm.helpers import RunContext

if TYPE_CHECKING:
    from pyxdp.net.netdevice import Host, NetDevice, NetdevRxQueue

__all__ = ["BulkQueues", "napi_poll", "xdp_do_flush", "xdp_do_redirect"]

log = logging.getLogger(__name__)

INT_MAX = 0x7FFF_FFFF
# xdp_ok_fwd_dev: a frame may be mtu + hard_header_len + VLAN_HLEN bytes long.
FWD_OVERHEAD = 14 + 4
_DEVMAPS = (int(BpfMapType.BPF_MAP_TYPE_DEVMAP), int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH))
_CPUMAP = int(BpfMapType.BPF_MAP_TYPE_CPUMAP)
_XSKMAP = int(BpfMapType.BPF_MAP_TYPE_XSKMAP)
_UNSPEC = int(BpfMapType.BPF_MAP_TYPE_UNSPEC)
# Programs already warned about (bpf_warn_invalid_xdp_action; the kernel warns once
# per boot, the model once per program - by object: ids restart on every Host).
_warned: weakref.WeakSet[XdpProg] = weakref.WeakSet()
MAX_FAULT_REPORTS = 32
I64 = npt.NDArray[np.int64]


@dataclass
class _DevBulk:
    """``struct xdp_dev_bulk_queue``: frames for one device, with their devmap program."""

    dev_rx: int
    prog_id: int
    bulk: Bulk = field(default_factory=lambda: Bulk(DEV_MAP_BULK_SIZE))


@dataclass
class BulkQueues:
    """Per-poll (per-CPU) flush lists: devmap bulk queues per (device, program),
    the XDP_TX bulk, cpumap bulks per entry."""

    dev: dict[tuple[int, int], _DevBulk] = field(default_factory=dict)
    tx: Bulk = field(default_factory=lambda: Bulk(XDP_TX_BULK_SIZE))
    cpu: dict[tuple[int, int], Bulk] = field(default_factory=dict)
    from_cpu: int = 0  # the CPU of the poll (xdp_cpumap_enqueue's ``cpu``)
    xsk: list[object] = field(default_factory=list)  # AF_XDP sockets to flush (xsk_flush)


# -----------------------------------------------------------------------------------
# The poll
# -----------------------------------------------------------------------------------

def napi_poll(rq: NetdevRxQueue, budget: int = 64) -> int:
    """One NAPI poll of ``rq``: up to ``budget`` frames; returns how many were done."""
    dev = rq.dev
    host = dev.host
    prog = dev.xdp_prog
    if prog is not None and _native_ok(rq, prog) and (
            len(rq.ring) == 0 or rq.ring.peek_kind() == KIND_BUFF):
        return _native_poll(rq, prog, budget)
    gen = dev.xdp_generic
    if (prog is None and gen is not None and rq.xsk is None and _native_ok(rq, gen)
            and (len(rq.ring) == 0 or rq.ring.peek_kind() == KIND_BUFF)):
        return _native_poll(rq, gen, budget, generic=True)
    if rq.source is not None and len(rq.ring) < budget:
        rq.source.fill(rq, budget - len(rq.ring))
    frames = rq.ring.consume(budget)
    n = len(frames)
    if not n:
        return 0
    rq.polls += 1
    host.counters.polls += 1
    host.counters.frames += n
    dev.stats.rx_packets += n
    dev.stats.rx_bytes += int(frames.length.sum())
    host.lock.acquire()
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
        xdp_do_flush(host, dev, rq, bq)
        return n
    finally:
        rq.pool.napi_local = False
        host.lock.release()


@dataclass
class _Verdicts:
    action: I64
    map_id: I64
    map_type: I64
    index: I64
    flags: I64


def run_xdp(prog: XdpProg, host: Host, frames: Frames, *, ifindex: npt.ArrayLike,
            queue: npt.ArrayLike, ctx: RunContext, egress_ifindex: int = 0,
            faults: list[str] | None = None, where: str = "") -> _Verdicts:
    """Run ``prog`` over ``frames`` in place, grouped by page region; the buffer
    edges it leaves are written back into ``frames``. The first fault of the
    batch goes into ``faults`` (a clear report: program, pc, C line)."""
    n = len(frames)
    out = _Verdicts(*(np.zeros(n, np.int64) for _ in range(5)))
    ifx = np.asarray(ifindex, np.int64)
    rxq = np.asarray(queue, np.int64)
    for mem, pos, rows in host.memmap.split(frames.pfn):
        res = prog.run_batch(mem.pages, frames.data[pos], frames.length[pos],
                             frames.meta[pos], int(rxq) if rxq.ndim == 0 else rxq[pos],
                             int(ifx) if ifx.ndim == 0 else ifx[pos],
                             ctx=ctx, egress_ifindex=egress_ifindex, rows=rows,
                             consume_redirect=True)
        out.action[pos] = res.action
        frames.data[pos] = res.data_off
        frames.length[pos] = res.data_len
        frames.meta[pos] = res.meta_len
        out.map_id[pos] = res.redirect_map_id.astype(np.int64)
        out.map_type[pos] = res.redirect_map_type.astype(np.int64)
        out.index[pos] = res.redirect_index.astype(np.int64)
        out.flags[pos] = res.redirect_flags.astype(np.int64)
        if res.faulted.any() and faults is not None and len(faults) < MAX_FAULT_REPORTS:
            i = int(np.flatnonzero(res.faulted)[0])
            faults.append(f"{where}: {prog.spec.name}: {res.fault(i)} -> XDP_ABORTED")
            log.warning("%s", faults[-1])
    return out


def dispatch_cpumap(host: Host, dev_rx: I64, prog: XdpProg, frames: Frames, v: _Verdicts,
                    cpu: int = 0) -> tuple[Frames, int, int, int]:
    """``cpu_map_bpf_prog_run_xdp``'s verdicts: the frames that passed (headers
    rewritten, ``dev_rx`` kept), and the pass / drop / redirect counts. Anything
    but PASS, REDIRECT and DROP is warned about and dropped - without an
    ``xdp_exception`` (the kernel fires none here, not even for XDP_ABORTED);
    a redirect that fails counts as a drop."""
    act = v.action
    passed = act == XdpAction.XDP_PASS
    red = act == XdpAction.XDP_REDIRECT
    other = ~passed & ~red
    bad = other & (act != XdpAction.XDP_DROP)
    if bad.any() and prog not in _warned:
        _warned.add(prog)
        log.warning("cpumap program %s returned %d: treated as a drop "
                    "(bpf_warn_invalid_xdp_action)", prog.spec.name, int(act[bad][0]))
    if other.any():
        xdp_return_frames(frames.pfn[other], memmap=host.memmap)
    nred = int(red.sum())
    failed = cpumap_redirect(host, dev_rx, prog, frames, v, red, cpu) if nred else 0
    out = frames.select(passed)
    npass = len(out)
    if npass:
        rx = dev_rx[passed]
        out, _ = _to_frames(host, host.devices[1], None, None, out)
        # _to_frames stamped one dev_rx on all: put back each frame's own.
        xdp_frames_set_dev_rx(out.pfn, rx[np.isin(frames.pfn[passed], out.pfn)],
                              memmap=host.memmap)
    return (out, len(out), int(other.sum()) + npass - len(out) + failed, nred - failed)


def cpumap_redirect(host: Host, dev_rx: I64, prog: XdpProg, frames: Frames, v: _Verdicts,
                    red: npt.NDArray[np.bool_], cpu: int) -> int:
    """A cpumap program's XDP_REDIRECT verdicts (frames ``red``): ``xdp_do_redirect``
    from each frame's ``dev_rx``, flushed after the batch; returns how many failed."""
    failed = 0
    for ifx in np.unique(dev_rx[red]).tolist():
        sel = np.flatnonzero(red & (dev_rx == ifx))
        dev = host.devices.get(int(ifx)) or host.devices[1]
        bq = BulkQueues(from_cpu=cpu)
        failed += xdp_do_redirect(host, dev, None, prog, frames.select(sel),
                                  _Verdicts(v.action[sel], v.map_id[sel], v.map_type[sel],
                                            v.index[sel], v.flags[sel]), bq)
        xdp_do_flush(host, dev, None, bq)
    return failed


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
        host.drop_frames(frames.select(drop), rq, direct=True)
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
        xdp_do_redirect(host, dev, rq, prog, frames.select(sel),
                        _Verdicts(v.action[sel], v.map_id[sel], v.map_type[sel], v.index[sel],
                                  v.flags[sel]), bq)


def _pass(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, frames: Frames) -> None:
    """XDP_PASS: skbs built from the buffers (metadata kept), the pages then
    freed as the skb's free would, and the list handed to the stack."""
    batch = host.frames_to_skbs(frames, dev.ifindex)
    batch.queue[:] = rq.index if rq is not None else 0
    host.drop_frames(frames, rq, direct=rq is not None)
    if dev.xdp_generic is not None:
        # No native program: the skbs meet the generic one in the receive path.
        from pyxdp.net.dev import netif_receive_skb_list
        netif_receive_skb_list(dev, batch, counted=True)
        return
    dev.host.stack.netif_receive_skb_list(batch, rq.ctx.cpu if rq is not None else 0)


def _to_frames(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg | None,
               frames: Frames) -> tuple[Frames, int]:
    """``xdp_convert_buff_to_frame`` for a batch: the converted frames, and how many
    could not be (they were dropped; with ``prog``, after an ``xdp_exception``).
    Frames that already are xdp_frames get their header rewritten from the edges
    the program left (``xdp_update_frame_from_buff``)."""
    if not len(frames):
        return frames, 0
    status = np.zeros(len(frames), np.int32)
    for mem, pos, _rows in host.memmap.split(frames.pfn):
        if mem.kind == "xsk_umem":  # zero-copy AF_XDP buffers: copied to order-0 pages
            from pyxdp.net.xsk_buff_pool import xsk_zc_to_frames
            status[pos] = xsk_zc_to_frames(host, rq, mem, frames, pos)
            continue
        mtype = MEM_TYPE_PAGE_POOL if mem.kind == "page_pool" else MEM_TYPE_PAGE_ORDER0
        status[pos] = xdp_convert_buff_to_frame(frames.pfn[pos], frames.data[pos],
                                                frames.length[pos], frames.meta[pos],
                                                mem_type=mtype, memmap=host.memmap)
    bad = status != 0
    if bad.any():
        if prog is not None:
            host.tracer.xdp_exception.fire(prog.id, int(XdpAction.XDP_TX), dev.ifindex,
                                           int(bad.sum()))
        host.drop_frames(frames.select(bad), rq, direct=rq is not None)
        frames = frames.select(~bad)
    out = Frames(frames.pfn, frames.data, frames.length, frames.meta,
                 np.full(len(frames), KIND_FRAME, np.int64))
    if len(out):
        xdp_frames_set_dev_rx(out.pfn, dev.ifindex, memmap=host.memmap)
    return out, int(bad.sum())


def _xdp_tx(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg,
            frames: Frames, bq: BulkQueues) -> None:
    """XDP_TX: into the device's TX bulk queue (flushed every 16 and at poll end)."""
    out, failed = _to_frames(host, dev, rq, prog, frames)
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

def xdp_do_redirect(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg,
                    frames: Frames, v: _Verdicts, bq: BulkQueues) -> int:
    """``xdp_do_redirect`` for every frame of a batch (all verdicts XDP_REDIRECT);
    returns how many failed (those frames were freed)."""
    tr = host.tracer
    n = len(frames)
    dev.stats.xdp_redirect += n
    err = np.zeros(n, np.int64)
    to_ifindex = np.zeros(n, np.int64)
    # Group by target map (map_id, type): one pass per map (a poll usually has one).
    if (v.map_id == v.map_id[0]).all() and (v.map_type == v.map_type[0]).all():
        groups = [[int(v.map_id[0]), int(v.map_type[0])]]
    else:
        groups = np.unique(np.stack([v.map_id, v.map_type], axis=1), axis=0).tolist()
    for map_id, map_type in groups:
        sel = np.flatnonzero((v.map_id == map_id) & (v.map_type == map_type))
        f = frames.select(sel)
        idx = v.index[sel]
        flags = v.flags[sel]
        if map_type == _UNSPEC and map_id == INT_MAX:
            e, to = _redirect_ifindex(host, dev, rq, prog, f, idx, bq)
        elif map_type in _DEVMAPS:
            e, to = _redirect_devmap(host, dev, rq, prog, map_by_id(map_id), f, idx, flags, bq)
        elif map_type == _CPUMAP:
            e = _redirect_cpumap(host, dev, rq, prog, map_by_id(map_id), f, idx, bq)
            to = np.zeros(len(sel), np.int64)
        elif map_type == _XSKMAP:
            # AF_XDP (pyxdp.net.xsk): an XSKMAP slot, or with map_id 0 the socket
            # bpf_redirect_xsk found registered on the frame's rx queue.
            from pyxdp.net.xsk import xsk_map_redirect
            e = xsk_map_redirect(host, dev, rq, map_by_id(map_id) if map_id else None, f,
                                 idx, bq)
            to = np.zeros(len(sel), np.int64)
        else:  # XDP_REDIRECT without a redirect helper: -EBADRQC, the frame dropped
            e, to = np.full(len(sel), -errno.EBADRQC), np.zeros(len(sel), np.int64)
            host.drop_frames(f, rq, direct=True)
        err[sel] = e
        to_ifindex[sel] = to
    ok = err == 0
    map_id_col = np.where(v.map_type == _UNSPEC, np.where(v.map_id == INT_MAX, INT_MAX, 0),
                          v.map_id)
    index_col = np.where((v.map_type == _UNSPEC) & (v.map_id == INT_MAX), 0, v.index)
    to_col = np.where((v.map_type == _UNSPEC) & (v.map_id == INT_MAX), v.index, to_ifindex)
    # Key columns alike for the whole batch count as one key (fire_batch's fast path);
    # map_index stays an array: it is what makes one event per frame.
    ids_c, to_c = _same(map_id_col), _same(to_col)
    idx_c: I64 = index_col
    if ok.any():
        if ok.all():
            tr.xdp_redirect.fire_batch(prog_id=prog.id, ifindex=dev.ifindex, err=0,
                                       to_ifindex=to_c, map_id=ids_c, map_index=idx_c)
        else:
            tr.xdp_redirect.fire_batch(prog_id=prog.id, ifindex=dev.ifindex, err=0,
                                       to_ifindex=_pick(to_c, ok), map_id=_pick(ids_c, ok),
                                       map_index=idx_c[ok])
    if not ok.all():
        bad = ~ok
        tr.xdp_redirect_err.fire_batch(prog_id=prog.id, ifindex=dev.ifindex,
                                       err=_same(err[bad]), to_ifindex=_pick(to_c, bad),
                                       map_id=_pick(ids_c, bad), map_index=idx_c[bad])
    return int((~ok).sum())


def _same(col: I64) -> I64 | int:
    """``col``'s value when every element has it, else ``col``."""
    return int(col[0]) if len(col) and (col == col[0]).all() else col


def _pick(col: I64 | int, sel: npt.NDArray[np.bool_]) -> I64 | int:
    return col if isinstance(col, int) else col[sel]


def _enqueue_dev(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg | None,
                 frames: Frames, targets: I64, prog_ids: I64, bq: BulkQueues) -> I64:
    """``__xdp_enqueue`` per frame: checks, conversion, ``bq_enqueue``; 0 or -errno."""
    n = len(frames)
    err = np.zeros(n, np.int64)
    tgt_mtu = np.zeros(n, np.int64)
    for t in np.unique(targets).tolist():
        d = host.devices.get(int(t))
        sel = targets == t
        if d is None:
            err[sel] = -errno.EINVAL
        elif not d.xdp_features & 4:  # NETDEV_XDP_ACT_NDO_XMIT
            err[sel] = -errno.EOPNOTSUPP
        elif not d.up:
            err[sel] = -errno.ENETDOWN
        else:
            tgt_mtu[sel] = d.mtu + FWD_OVERHEAD
    # xdp_ok_fwd_dev: frames longer than the target's MTU (plus headers) are refused.
    err = np.where((err == 0) & (frames.length > tgt_mtu), -errno.EMSGSIZE, err)
    ok = err == 0
    if not ok.all():
        host.drop_frames(frames.select(~ok), rq, direct=rq is not None)
    f, t_ok, p_ok = frames.select(ok), targets[ok], prog_ids[ok]
    conv, _ = _to_frames(host, dev, rq, None, f)
    if len(conv) != len(f):  # some could not be converted: -EOVERFLOW for those
        okpos = np.flatnonzero(ok)
        status = _conversion_status(host, f, conv)
        err[okpos[status != 0]] = -errno.EOVERFLOW
        keep = status == 0
        t_ok, p_ok = t_ok[keep], p_ok[keep]
    for t, p in np.unique(np.stack([t_ok, p_ok], axis=1), axis=0).tolist() if len(conv) else []:
        sel = np.flatnonzero((t_ok == t) & (p_ok == p))
        _bq_enqueue(host, dev, bq, int(t), int(p), conv.select(sel))
    return err


def _conversion_status(host: Host, before: Frames, after: Frames) -> I64:
    st = np.full(len(before), -1, np.int64)
    st[np.isin(before.pfn, after.pfn)] = 0
    return st


def _bq_enqueue(host: Host, dev: NetDevice, bq: BulkQueues, ifindex: int, prog_id: int,
                frames: Frames) -> None:
    key = (ifindex, prog_id)
    q = bq.dev.get(key)
    if q is None:
        q = bq.dev[key] = _DevBulk(dev.ifindex, prog_id)
    q.bulk.add(frames, lambda bulk: bq_xmit_all(host, ifindex, q, bulk))


def _redirect_ifindex(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg,
                      frames: Frames, idx: I64, bq: BulkQueues) -> tuple[I64, I64]:
    """``bpf_redirect(ifindex)``: ``dev_xdp_enqueue`` to that device, no program."""
    err = _enqueue_dev(host, dev, rq, prog, frames, idx.astype(np.int64),
                       np.zeros(len(idx), np.int64), bq)
    return err, idx


def _devmap_entries(m: object, idx: I64) -> tuple[I64, I64]:
    """(ifindex, prog id) of devmap slots/keys ``idx`` (ifindex 0: empty)."""
    if isinstance(m, DevMap):
        inside = idx < m.max_entries
        safe = np.where(inside, idx, 0)
        e = m.entries[safe].astype(np.int64)
        return np.where(inside, e[:, 0], 0), np.where(inside, e[:, 1], 0)
    if isinstance(m, DevMapHash):
        ifx = np.zeros(len(idx), np.int64)
        pid = np.zeros(len(idx), np.int64)
        for k in np.unique(idx).tolist():
            slot = m.slot.get(int(k))
            if slot is not None:
                sel = idx == k
                ifx[sel], pid[sel] = int(m.entries[slot, 0]), int(m.entries[slot, 1])
        return ifx, pid
    raise TypeError("not a device map")


def _redirect_devmap(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg,
                     m: object, frames: Frames, idx: I64, flags: I64,
                     bq: BulkQueues) -> tuple[I64, I64]:
    n = len(frames)
    err = np.zeros(n, np.int64)
    to = np.zeros(n, np.int64)
    bcast = (flags & BPF_F_BROADCAST) != 0
    if (~bcast).any():
        sel = np.flatnonzero(~bcast)
        ifx, pid = _devmap_entries(m, idx[sel])
        empty = ifx == 0
        e = np.zeros(len(sel), np.int64)
        e[empty] = -errno.EINVAL  # the entry went away: dev_map_enqueue gets no device
        if empty.any():
            host.drop_frames(frames.select(sel[empty]), rq, direct=rq is not None)
        live = np.flatnonzero(~empty)
        if len(live):
            e[live] = _enqueue_dev(host, dev, rq, prog, frames.select(sel[live]), ifx[live],
                                   pid[live], bq)
        err[sel] = e
        to[sel] = ifx
    if bcast.any():
        sel = np.flatnonzero(bcast)
        err[sel] = _broadcast(host, dev, rq, prog, m, frames.select(sel), flags[sel], bq)
        # The trace's to_ifindex is ri->tgt_value's device: the helper looked the key
        # up although a broadcast ignores it (0 when that slot is empty).
        to[sel] = _devmap_entries(m, idx[sel])[0]
    return err, to


def _all_entries(m: object) -> list[tuple[int, int]]:
    """Every (ifindex, prog id) of a device map in the order the kernel walks it."""
    if isinstance(m, DevMap):
        return [(int(a), int(b)) for a, b in m.entries.tolist() if a]
    if isinstance(m, DevMapHash):
        out = []
        for key in m.raw_keys():
            slot = m.slot[int.from_bytes(key, "little")]
            out.append((int(m.entries[slot, 0]), int(m.entries[slot, 1])))
        return out
    raise TypeError("not a device map")


def _broadcast(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg,
               m: object, frames: Frames, flags: I64, bq: BulkQueues) -> I64:
    """``dev_map_enqueue_multi``: a copy to every entry (but the ingress device with
    ``BPF_F_EXCLUDE_INGRESS``), clones for all targets but the last."""
    n = len(frames)
    err = np.zeros(n, np.int64)
    entries = _all_entries(m)
    for excl in (False, True):
        sel = np.flatnonzero(((flags & BPF_F_EXCLUDE_INGRESS) != 0) == excl)
        if not len(sel):
            continue
        targets = [(i, p) for i, p in entries
                   if i in host.devices and host.devices[i].up
                   and host.devices[i].xdp_features & 4 and not (excl and i == dev.ifindex)]
        f = frames.select(sel)
        if not targets:
            host.drop_frames(f, rq, direct=rq is not None)  # nothing to send to: consumed
            continue
        conv, failed = _to_frames(host, dev, rq, None, f)
        if failed:
            err[sel[_conversion_status(host, f, conv) != 0]] = -errno.EOVERFLOW
        for k, (ifindex, prog_id) in enumerate(targets):
            last = k == len(targets) - 1
            mtu_ok = conv.length <= host.devices[ifindex].mtu + FWD_OVERHEAD
            if last:
                out = conv
            else:
                pfns, status = xdpf_clones(conv.pfn, memmap=host.memmap)
                good = status == 0
                out = Frames(pfns[good], conv.data[good], conv.length[good], conv.meta[good],
                             conv.kind[good])
                mtu_ok = mtu_ok[good]
            if (~mtu_ok).any():
                xdp_return_frames_rx_napi(out.pfn[~mtu_ok], memmap=host.memmap)
                out = out.select(mtu_ok)
            if len(out):
                _bq_enqueue(host, dev, bq, ifindex, prog_id, out)
    return err


def _redirect_cpumap(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg,
                     m: object, frames: Frames, idx: I64, bq: BulkQueues) -> I64:
    """``cpu_map_enqueue``: to the entry's bulk queue of 8 (``bq_enqueue``)."""
    from pyxdp.net.cpumap import cpumap_runtime
    n = len(frames)
    err = np.zeros(n, np.int64)
    if not isinstance(m, CpuMap):
        host.drop_frames(frames, rq, direct=True)
        return np.full(n, -errno.EINVAL, np.int64)
    qs = np.array([m.qsize_at(int(i)) for i in idx.tolist()], np.int64)
    empty = qs == 0
    if empty.any():
        err[empty] = -errno.EINVAL
        host.drop_frames(frames.select(empty), rq, direct=True)
    live = np.flatnonzero(~empty)
    if not len(live):
        return err
    f, li = frames.select(live), idx[live]
    conv, failed = _to_frames(host, dev, rq, None, f)
    if failed:
        okp = np.isin(f.pfn, conv.pfn)
        err[live[~okp]] = -errno.EOVERFLOW
        li = li[okp]
    for cpu in np.unique(li).tolist():
        rt = cpumap_runtime(host, m, int(cpu))
        rt.enqueue(conv.select(li == cpu), bq)
    return err


# -----------------------------------------------------------------------------------
# Flush
# -----------------------------------------------------------------------------------

def bq_xmit_all(host: Host, ifindex: int, q: _DevBulk, frames: Frames) -> None:
    """``bq_xmit_all``: the devmap program over the bulk, then ``ndo_xdp_xmit``."""
    n = len(frames)
    if not n:
        return
    target = host.devices.get(ifindex)
    drops = 0
    if q.prog_id and target is not None:
        frames, drops = devmap_prog_run(host, q, target, frames)
    sent, err = 0, 0
    if len(frames) and target is not None:
        r = target.ndo_xdp_xmit(frames)
        if r < 0:
            err, sent = r, 0
        else:
            sent = r
    elif target is None:
        err = -errno.ENODEV
    if sent < len(frames):
        xdp_return_frames_rx_napi(frames.pfn[sent:], memmap=host.memmap)
        drops += len(frames) - sent
    host.tracer.xdp_devmap_xmit.fire(q.dev_rx, ifindex, sent, drops, err)


def devmap_prog_run(host: Host, q: _DevBulk, target: NetDevice,
                    frames: Frames) -> tuple[Frames, int]:
    """``dev_map_bpf_prog_run``: the entry program on every frame (egress_ifindex set);
    PASS keeps it, anything else drops it (TX/REDIRECT/unknown after a warning and an
    exception). Returns the frames to send and the drops."""
    prog = host.program_by_id(q.prog_id)
    if prog is None:
        return frames, 0
    rx = host.devices.get(q.dev_rx)
    if rx is None:
        return frames, 0
    v = run_xdp(prog, host, frames, ifindex=q.dev_rx, queue=0, ctx=rx.rx[0].ctx,
                egress_ifindex=target.ifindex, faults=target.faults,
                where=f"{target.name} devmap egress")
    act = v.action
    keep = act == XdpAction.XDP_PASS
    bad = ~keep & (act != XdpAction.XDP_DROP)
    if bad.any():
        if (bad & (act != XdpAction.XDP_ABORTED)).any() and prog not in _warned:
            _warned.add(prog)
            log.warning("devmap program %s returned %d: only XDP_PASS and XDP_DROP are "
                        "allowed there (bpf_warn_invalid_xdp_action)", prog.spec.name,
                        int(act[bad & (act != XdpAction.XDP_ABORTED)][0]))
        # trace_xdp_exception(tx_dev, prog, act) for every one, XDP_TX and
        # XDP_REDIRECT included.
        for a, c in zip(*np.unique(act[bad], return_counts=True), strict=True):
            host.tracer.xdp_exception.fire(prog.id, int(a) & 0xFFFF_FFFF, target.ifindex,
                                           int(c))
    if (~keep).any():
        xdp_return_frames_rx_napi(frames.pfn[~keep], memmap=host.memmap)
    out = frames.select(keep)
    if len(out):
        # xdp_update_frame_from_buff: the program may have moved the edges.
        status = np.zeros(len(out), np.int32)
        for mem, pos, _rows in host.memmap.split(out.pfn):
            mtype = MEM_TYPE_PAGE_POOL if mem.kind == "page_pool" else MEM_TYPE_PAGE_ORDER0
            status[pos] = xdp_convert_buff_to_frame(out.pfn[pos], out.data[pos],
                                                    out.length[pos], out.meta[pos],
                                                    mem_type=mtype, memmap=host.memmap)
        if (status != 0).any():
            xdp_return_frames_rx_napi(out.pfn[status != 0], memmap=host.memmap)
            out = out.select(status == 0)
    return out, len(frames) - len(out)


def xdp_do_flush(host: Host, dev: NetDevice, rq: NetdevRxQueue | None,
                 bq: BulkQueues) -> None:
    """``xdp_do_flush``: devmap bulks, then cpumap bulks - each flush list in the
    kernel's order, last queued first (``bq_enqueue`` does ``list_add``) - and
    then the driver's TX bulk (``veth_poll`` flushes it after ``xdp_do_flush``)."""
    for (ifindex, _pid), q in reversed(list(bq.dev.items())):
        if q.bulk.count:
            bq_xmit_all(host, ifindex, q, q.bulk.take())
    if bq.cpu:
        from pyxdp.net.cpumap import cpu_map_flush
        cpu_map_flush(host, bq)
    if bq.xsk:
        from pyxdp.net.xsk import xsk_flush
        xsk_flush(host, bq)
    if bq.tx.count:
        _flush_tx(host, dev, bq.tx.take())


# -----------------------------------------------------------------------------------
# The native fast path (see pyxdp.net.napi_native)
# -----------------------------------------------------------------------------------

DEFER_POLLS = 16
MAX_NATIVE_FRAME = 4096 - 256 - 320  # one page: headroom and skb_shared_info room
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


class _NativeState:
    """What a queue keeps between native calls for one program."""

    def __init__(self, rq: NetdevRxQueue, prog: XdpProg, budget: int) -> None:
        from pyxdp.net.napi_native import C
        from pyxdp.vm.jit.xdp import DriverIO
        self.prog = prog
        self.io = DriverIO(budget, rq.dev.ifindex, rq.index)
        self.ctl = np.zeros(C.SIZE, np.int64)
        # Room for DEFER_POLLS polls of XDP_PASS frames (one stack list per native call).
        self.defer = np.zeros((budget * DEFER_POLLS, 9), np.int64)
        self.tx_rows = np.zeros(BULK_NATIVE, np.int64)
        # No generator: no templates, and a limit of 0 frames.
        self.no_gen = (np.zeros((1, 1), np.uint8), np.zeros(0, np.int64),
                       GenState(limit=0).words)
        self.xskmaps = [m for m in prog.maps.values() if type(m) is XskMap]
        self.cpumaps = [m for m in prog.maps.values() if type(m) is CpuMap]
        self.xsk: Any = None  # pyxdp.net.xsk.NativeRx of the last call


def _native_ok(rq: NetdevRxQueue, prog: XdpProg) -> bool:
    host = rq.dev.host
    if not (prog.engine == "jit" and host.native and not host.tracer.listening
            and not rq.pool.destroyed and native_available()):
        return False
    pool = rq.xsk
    if pool is None:
        return True
    # A zero-copy AF_XDP queue: native while its socket receives there and the frames
    # the generator makes fit a buffer (else xsk_zc_dma's drops, in Python).
    from pyxdp.net.xsk import xsk_native_socket
    if pool.region is None or xsk_native_socket(rq) is None:
        return False
    src = rq.source
    return src is None or not src.active or src.max_len <= pool.umem.rx_frame_size


def _native_poll(rq: NetdevRxQueue, prog: XdpProg, budget: int, *,
                 generic: bool = False) -> int:
    """Run native polls of ``rq``; the frames it defers go through :func:`dispatch`.

    ``generic``: ``prog`` is the device's generic (skb-mode) program and the queue
    has no native one: the driver builds an skb around each page with
    ``NET_SKB_PAD`` of headroom, ``netif_receive_generic_xdp`` gives it a new
    head with ``XDP_PACKET_HEADROOM`` (``pskb_expand_head``: another page, the
    packet copied) and the program runs on it. The loop then takes
    DROP, ABORTED and PASS (to the stack) itself; TX (``generic_xdp_tx``) and
    redirects (``xdp_do_generic_redirect``, one skb at a time) are deferred to
    :mod:`pyxdp.net.dev`, so it gets no TX devices, devmaps or socket."""
    from pyxdp.net.napi_native import C, K, native_polls
    from pyxdp.net.xsk import xsk_native_fold, xsk_native_rx
    dev = rq.dev
    host = dev.host
    st: _NativeState | None = getattr(rq, "native", None)
    if st is None or st.prog is not prog or len(st.io.rows) != budget:
        st = _NativeState(rq, prog, budget)
        rq.native = st
    pool = rq.pool
    ring = rq.ring
    ctl = st.ctl
    ctl[:] = 0
    # Threaded NAPI: queues on other CPUs poll at the same time. A call needs no host
    # lock when it touches only its queue's records and per-CPU state: the program's
    # maps are arrays (per-CPU or not, as the kernel's lock-free ones), no tail calls,
    # and redirects - which reach shared targets - go to the (locked) Python dispatch.
    parallel = host.threaded_napi and _parallel_ok(prog)
    vm = prog.engine_for(rq.ctx.cpu) if parallel else prog.vm
    xsk = st.xsk = None if generic or parallel else xsk_native_rx(rq, st.xskmaps, st.xsk)
    if rq.xsk is not None:  # _native_ok saw one socket on the zero-copy queue
        assert xsk is not None and xsk.pool.region is not None
        return _native_poll_zc(rq, prog, budget, st, xsk)
    src = rq.source
    if src is not None and src.active:
        tpl, tpl_len = src.batch.data, src.batch.length
        if src.max_len > min(tpl.shape[1], MAX_NATIVE_FRAME):
            raise ValueError(f"{dev.name}: generator frames above {MAX_NATIVE_FRAME} bytes "
                             f"need multi-buffer XDP, which pyxdp devices do not do")
        gen = (tpl, tpl_len, src.state.words)
    else:
        gen = st.no_gen
    local = parallel or generic  # no shared redirect targets natively
    nif = max(host.devices) + 1
    tgt_ok = np.zeros(nif, np.uint8)
    tgt_mtu = np.zeros(nif, np.int64)
    tgt_stats = np.zeros(nif, np.int64)
    for i, d in host.devices.items():
        if d.kind == "nic" and d.up and not d.wire and i != 1 and not local:
            tgt_ok[i] = 1
            tgt_mtu[i] = d.mtu + FWD_OVERHEAD
            tgt_stats[i] = d.stats.words.ctypes.data
    tx_ok = dev.kind == "nic" and dev.up and not dev.wire and not generic
    dms = [] if local else [m for m in prog.maps.values() if type(m) is DevMap]
    dm_ids = np.array([m.id for m in dms], np.int64)
    dm_n = np.array([m.max_entries for m in dms], np.int64)
    dm_off = np.cumsum(np.concatenate([[0], dm_n]))[:-1].astype(np.int64)
    dm_ent = np.concatenate([m.entries for m in dms]) if dms else np.zeros((1, 2), np.uint32)
    red_cnt = np.zeros((len(dms) + 1, nif), np.int64)
    xmit_cnt = np.zeros((nif, 3), np.int64)
    cm, cm_rts = _cpumap_args(host, [] if local else st.cpumaps)
    cnt = np.zeros(K.SIZE, np.int64)
    io = st.io
    pool.napi_local = True
    # Every producer of a cpumap ring and consumer of a return ring holds the host lock.
    lock = _NO_LOCK if parallel else host.lock
    lock.acquire()
    try:
        with vm.driver(rq.ctx, pool.pages, io) as (fn, ctx_addr):
            done = native_polls(
                NATIVE_POLLS, budget, _jit_args(io, fn, ctx_addr),
                (pool.pages, pool.words, pool.qwords, pool.addr_base, pool.pfn_base,
                 *pool.native_arrays),
                (ring.cols, ring.cur.words), gen,
                (dev.ifindex, tx_ok, rq.stats.words, st.tx_rows, generic),
                (tgt_ok, tgt_mtu, tgt_stats, np.zeros((nif, BULK_NATIVE), np.int64),
                 np.zeros(nif, np.int64), xmit_cnt),
                (dm_ids, dm_off, dm_n, dm_ent, red_cnt), _xsk_args(xsk),
                _stack_args(host, dev, rq, generic), cm, (ctl, cnt, st.defer))
    finally:
        if xsk is not None:
            xsk_native_fold(xsk, dev, prog.id)
        pool.napi_local = False
        lock.release()
    if ctl[C.ERROR] or pool.state.error:
        from pyxdp.net.page_pool import PageAccountingError
        if ctl[C.ERROR]:
            raise PageAccountingError(f"native poll: {dev.name} rx{rq.index}'s ring holds a "
                                      f"frame that is no page of {pool.name} in use",
                                      owner=pool.name)
        row = int(pool.state.error) - 1
        pool.state.error = 0
        raise PageAccountingError(f"native poll: double return of page row {row} of "
                                  f"{pool.name}", pages=[pool.pfn_base + row], owner=pool.name)
    with host.lock:
        _native_account(rq, prog, st, cnt, red_cnt, xmit_cnt, dms, vm)
    if cm_rts:
        _cpumap_account(rq, cm, cm_rts, st.cpumaps)
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
_PARALLEL_MAPS = (int(BpfMapType.BPF_MAP_TYPE_ARRAY), int(BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY))


def _parallel_ok(prog: XdpProg) -> bool:
    """Whether NAPI contexts on several CPUs may run ``prog`` at once without the host
    lock: its maps are arrays (their updates are the program's own atomics, as in
    the kernel) and it makes no tail calls (their targets' run state is shared)."""
    ok = getattr(prog, "_parallel_ok", None)
    if ok is None:
        ok = all(int(m.map_type) in _PARALLEL_MAPS for m in prog.maps.values())
        prog._parallel_ok = ok  # type: ignore[attr-defined]
    return bool(ok)


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
    """The AF_XDP arguments of a copy-mode native call: the queue's socket state
    (:meth:`pyxdp.net.xsk.NativeRx.copy_args`), or inert arrays without one."""
    global _NO_XSK
    if x is not None:
        args: tuple[Any, ...] = x.copy_args()
        return args
    if _NO_XSK is None:
        from pyxdp.net.xsk_native import X
        u32, i64 = np.zeros(1, np.uint32), np.zeros(1, np.int64)
        _NO_XSK = (np.zeros(X.SIZE_, np.int64), u32, u32, np.zeros(1, np.uint64),
                   np.zeros(1, np.uint64), u32, u32, np.zeros((1, 2), np.uint64),
                   np.zeros(1, np.uint8), i64, i64, i64, u32, i64)
    return _NO_XSK


_NO_XMIT = np.zeros((0, 3), np.int64)  # a zero-copy call transmits on no device


def _native_poll_zc(rq: NetdevRxQueue, prog: XdpProg, budget: int, st: _NativeState,
                    xsk: Any) -> int:
    """Native polls of a zero-copy AF_XDP queue (:func:`napi_native.native_polls_zc`)."""
    from pyxdp.net.napi_native import C, K, native_polls_zc
    from pyxdp.net.xsk import xsk_native_fold
    dev = rq.dev
    host = dev.host
    ring = rq.ring
    ctl = st.ctl
    region = xsk.pool.region
    src = rq.source
    gen = (src.batch.data, src.batch.length, src.state.words) \
        if src is not None and src.active else st.no_gen
    cnt = np.zeros(K.SIZE, np.int64)
    io = st.io
    host.lock.acquire()
    try:
        with prog.vm.driver(rq.ctx, region.pages, io) as (fn, ctx_addr):
            done = native_polls_zc(NATIVE_POLLS, budget, _jit_args(io, fn, ctx_addr),
                                   region.pages, (ring.cols, ring.cur.words), gen,
                                   rq.stats.words, xsk.zc_args(), (ctl, cnt, st.defer))
    finally:
        xsk_native_fold(xsk, dev, prog.id)
        host.lock.release()
    if ctl[C.ERROR]:
        from pyxdp.net.page_pool import PageAccountingError
        raise PageAccountingError(f"native poll: {dev.name} rx{rq.index}'s ring holds a "
                                  f"frame that is no UMEM chunk the queue holds",
                                  owner=region.name)
    _native_account(rq, prog, st, cnt, None, None, [], prog.vm)
    _native_deferred(rq, prog, st, region.pfn_base)
    return int(done)


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
            xdp_do_flush(host, dev, rq, bq)
        finally:
            pool.napi_local = False


def _deferred(st: _NativeState, pfn_base: int) -> tuple[Frames, _Verdicts] | None:
    """The frames (buffers of the queue) and verdicts a native call handed back."""
    from pyxdp.net.napi_native import C
    nd = int(st.ctl[C.NDEFER])
    if not nd:
        return None
    c = st.defer[:nd].T.copy()  # one contiguous row per column
    return (Frames(c[0] + pfn_base, c[1], c[2], c[3], np.full(nd, KIND_BUFF, np.int64)),
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
    from pyxdp.net.cpumap import cpumap_runtime
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


def _cpumap_account(rq: NetdevRxQueue, cm: tuple[Any, ...], rts: list[Any],
                    maps: Sequence[CpuMap]) -> None:
    """Fold a native call's cpumap enqueues and redirects into the tracer; wake the
    kthreads it queued frames for."""
    dev = rq.dev
    tr = dev.host.tracer
    cm_red, cq_cnt = cm[8], cm[7]
    for k in np.flatnonzero(cm_red).tolist():
        tr.xdp_redirect._add((dev.ifindex, 0, maps[k].id), int(cm_red[k]), [])
    for r in np.flatnonzero(cq_cnt[:, 0]).tolist():
        rt = rts[r]
        ev, proc, drops = (int(x) for x in cq_cnt[r])
        tr.xdp_cpumap_enqueue._add((rt.map.id, rq.ctx.cpu, rt.cpu), ev, [proc, drops])
        rt._wake.set()


def _generic_deferred(rq: NetdevRxQueue, prog: XdpProg, st: _NativeState,
                      pfn_base: int) -> None:
    """The skbs a native generic call deferred (PASS with a callback or a socket
    keeping payloads, TX, REDIRECT): built from their pages, which are then freed,
    and acted on by :func:`pyxdp.net.dev.generic_xdp_act`."""
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


def _native_account(rq: NetdevRxQueue, prog: XdpProg, st: _NativeState, cnt: I64,
                    red_cnt: I64 | None, xmit_cnt: I64 | None, dms: Sequence[DevMap],
                    vm: Any) -> None:
    """Fold what the native polls summed for the tracer (events) and the poll counts
    into their owners, and keep the first fault's report; the device's counters
    were counted in place."""
    from pyxdp.net.napi_native import C, K
    dev = rq.dev
    host = dev.host
    ctl = st.ctl
    c = ctl.tolist()  # Python ints at once: each numpy scalar read costs a call
    k = cnt.tolist()
    rq.polls += c[C.POLLS]
    host.counters.polls += c[C.POLLS]
    host.counters.frames += c[C.FRAMES]
    tr = host.tracer
    if k[K.ACT + 0]:
        tr.xdp_exception.fire(prog.id, 0, dev.ifindex, k[K.ACT + 0])
    if k[K.ACT + 5]:
        bad = c[C.INVALID_ACT] - 1
        if prog not in _warned:
            _warned.add(prog)
            log.warning("%s: XDP program %s returned illegal action %d: treated as "
                        "XDP_ABORTED (bpf_warn_invalid_xdp_action)", dev.name, prog.spec.name,
                        bad)
        tr.xdp_exception.fire(prog.id, bad & 0xFFFF_FFFF, dev.ifindex, k[K.ACT + 5])
    if k[K.TX_EVENTS]:
        tr.xdp_bulk_tx._add((dev.ifindex,), k[K.TX_EVENTS], [k[K.TX_SENT], 0, 0])
    if red_cnt is not None and red_cnt.any():  # None: a zero-copy call (no devices)
        ids = [m.id for m in dms] + [INT_MAX]
        for slot, ifx in zip(*np.nonzero(red_cnt), strict=True):
            map_id = ids[int(slot)]
            tr.xdp_redirect._add((dev.ifindex, int(ifx), map_id), int(red_cnt[slot, ifx]), [])
    sent_to = xmit_cnt if xmit_cnt is not None else _NO_XMIT
    for ifx in np.flatnonzero(sent_to[:, 0]).tolist() if sent_to.any() else ():
        events, sent, _ = (int(x) for x in sent_to[ifx])
        tr.xdp_devmap_xmit._add((dev.ifindex, ifx), events, [sent, 0, 0])
    if c[C.FAULTS] and len(dev.faults) < MAX_FAULT_REPORTS:
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
