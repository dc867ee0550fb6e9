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
  as one list (``napi_gro_receive`` / ``netif_receive_skb_list``);
- ``XDP_TX`` converts to ``xdp_frame`` (``-EOVERFLOW`` when the headroom cannot
  hold it: an exception and a drop) into the device's TX bulk queue of 16,
  sent with ``ndo_xdp_xmit`` and ``xdp_bulk_tx`` per bulk;
- ``XDP_REDIRECT`` is :func:`xdp_do_redirect` for the batch: devmap and
  devmap_hash targets go into per-device bulk queues of 16 (``bq_enqueue``),
  broadcasts (``BPF_F_BROADCAST``, ``BPF_F_EXCLUDE_INGRESS``) clone the frame
  for every target but the last, ``bpf_redirect`` ifindexes use the same
  queues without a program, cpumap targets go to the entry's bulk queue of 8;
  ``xdp_redirect``/``xdp_redirect_err`` fire per frame.

The poll ends with ``xdp_do_flush``: every bulk queue flushed
(``bq_xmit_all`` runs a devmap entry's program over its bulk with
``egress_ifindex`` set, then ``ndo_xdp_xmit``, then ``xdp_devmap_xmit``;
cpumap bulks go to the entry's ring and its kthread is woken).

Simplified against the kernel: the devmap entry (and its program) is read
when the frame is redirected, not when ``bpf_redirect_map`` ran (they differ
only if user space changes the map inside one poll); frames of one poll whose
pages lie in different page regions run grouped by region, each group in
arrival order; xskmap redirects fail with ``-EOPNOTSUPP`` (AF_XDP sockets are
not part of the datapath yet).
"""

from __future__ import annotations

import errno
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from pyxdp.maps.base import map_by_id
from pyxdp.maps.cpumap import CpuMap
from pyxdp.maps.devmap import DevMap, DevMapHash
from pyxdp.net.filter import BPF_F_BROADCAST, BPF_F_EXCLUDE_INGRESS
from pyxdp.net.frames import KIND_FRAME, Frames
from pyxdp.net.prog import XdpProg
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

DEV_MAP_BULK_SIZE = 16
XDP_TX_BULK_SIZE = 16
INT_MAX = 0x7FFF_FFFF
_DEVMAPS = (int(BpfMapType.BPF_MAP_TYPE_DEVMAP), int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH))
_CPUMAP = int(BpfMapType.BPF_MAP_TYPE_CPUMAP)
_XSKMAP = int(BpfMapType.BPF_MAP_TYPE_XSKMAP)
_UNSPEC = int(BpfMapType.BPF_MAP_TYPE_UNSPEC)
_warned: set[int] = set()
MAX_FAULT_REPORTS = 32
I64 = npt.NDArray[np.int64]


@dataclass
class _DevBulk:
    """``struct xdp_dev_bulk_queue``: frames for one device, with their devmap program."""

    dev_rx: int
    prog_id: int
    frames: list[Frames] = field(default_factory=list)
    count: int = 0


@dataclass
class BulkQueues:
    """Per-poll (per-CPU) flush lists: devmap bulk queues per (device, program),
    the XDP_TX bulk, cpumap bulks per entry."""

    dev: dict[tuple[int, int], _DevBulk] = field(default_factory=dict)
    tx: list[Frames] = field(default_factory=list)
    tx_count: int = 0
    cpu: dict[tuple[int, int], list[Frames]] = field(default_factory=dict)


# -----------------------------------------------------------------------------------
# The poll
# -----------------------------------------------------------------------------------

def napi_poll(rq: NetdevRxQueue, budget: int = 64) -> int:
    """One NAPI poll of ``rq``: up to ``budget`` frames; returns how many were done."""
    dev = rq.dev
    host = dev.host
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
    prog = dev.xdp_prog
    host.lock.acquire()
    rq.pool.napi_local = True  # page_pool_napi_local: this poll may recycle directly
    try:
        if prog is None:
            # No program (veth with GRO): straight to the stack.
            _pass(host, dev, rq, frames)
            return n
        bq = BulkQueues()
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
            queue: int, ctx: RunContext, egress_ifindex: int = 0,
            faults: list[str] | None = None, where: str = "") -> _Verdicts:
    """Run ``prog`` over ``frames`` in place, grouped by page region; the buffer
    edges it leaves are written back into ``frames``. The first fault of the
    batch goes into ``faults`` (a clear report: program, pc, C line)."""
    n = len(frames)
    out = _Verdicts(*(np.zeros(n, np.int64) for _ in range(5)))
    ifx = np.asarray(ifindex, np.int64)
    for mem, pos, rows in host.memmap.split(frames.pfn):
        res = prog.run_batch(mem.pages, frames.data[pos], frames.length[pos],
                             frames.meta[pos], queue, int(ifx) if ifx.ndim == 0 else ifx[pos],
                             ctx=ctx, egress_ifindex=egress_ifindex, rows=rows)
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


def dispatch_cpumap(host: Host, dev_rx: I64, prog: XdpProg, frames: Frames, v: _Verdicts
                    ) -> tuple[Frames, int, int, int]:
    """``cpu_map_bpf_prog_run_xdp``'s verdicts: the frames that passed (headers
    rewritten), and the pass / drop / redirect counts."""
    act = v.action
    passed = act == XdpAction.XDP_PASS
    red = act == XdpAction.XDP_REDIRECT
    other = ~passed & ~red
    bad = other & (act != XdpAction.XDP_DROP)
    if bad.any():
        if prog.id not in _warned:
            _warned.add(prog.id)
            log.warning("cpumap program %s returned %d: treated as a drop "
                        "(bpf_warn_invalid_xdp_action)", prog.spec.name, int(act[bad][0]))
        for ifx in np.unique(dev_rx[bad]).tolist():
            host.tracer.xdp_exception.fire_actions(act[bad & (dev_rx == ifx)], prog_id=prog.id,
                                                   ifindex=int(ifx))
    if other.any():
        xdp_return_frames(frames.pfn[other], memmap=host.memmap)
    nred = int(red.sum())
    if nred:
        for ifx in np.unique(dev_rx[red]).tolist():
            sel = np.flatnonzero(red & (dev_rx == ifx))
            dev = host.devices.get(int(ifx)) or host.devices[1]
            bq = BulkQueues()
            xdp_do_redirect(host, dev, None, prog, frames.select(sel),
                            _Verdicts(act[sel], v.map_id[sel], v.map_type[sel], v.index[sel],
                                      v.flags[sel]), bq)
            xdp_do_flush(host, dev, None, bq)
    out = frames.select(passed)
    npass = len(out)
    if npass:
        dev = host.devices.get(int(dev_rx[passed][0])) or host.devices[1]
        out, _ = _to_frames(host, dev, None, None, out)
    return out, len(out), int(other.sum()) + npass - len(out), nred


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
    if bad.any() and prog.id not in _warned:
        _warned.add(prog.id)
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
    dev.host.stack.netif_receive_skb_list(batch)


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
    start = 0
    while start < len(out):
        k = min(XDP_TX_BULK_SIZE - bq.tx_count, len(out) - start)
        bq.tx.append(out.select(slice(start, start + k)))
        bq.tx_count += k
        start += k
        if bq.tx_count == XDP_TX_BULK_SIZE:
            _flush_tx(host, dev, bq)


def _flush_tx(host: Host, dev: NetDevice, bq: BulkQueues) -> None:
    """``veth_xdp_flush_bq``: one ``ndo_xdp_xmit`` (to the peer for veth) per bulk."""
    frames = Frames.concat(bq.tx)
    bq.tx, bq.tx_count = [], 0
    n = len(frames)
    if not n:
        return
    target = getattr(dev, "peer", None) or dev
    sent = dev.ndo_xdp_xmit(frames) if target is not dev else _nic_tx(dev, frames)
    err = sent if sent < 0 else 0
    sent = max(sent, 0)
    drops = n - sent
    if drops:
        xdp_return_frames_rx_napi(frames.pfn[sent:], memmap=host.memmap)
        dev.stats.xdp_tx_errors += drops
    dev.stats.xdp_tx += sent
    host.tracer.xdp_bulk_tx.fire(dev.ifindex, sent, drops, err)


def _nic_tx(dev: NetDevice, frames: Frames) -> int:
    return type(dev).ndo_xdp_xmit(dev, frames)


# -----------------------------------------------------------------------------------
# Redirect
# -----------------------------------------------------------------------------------

def xdp_do_redirect(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg,
                    frames: Frames, v: _Verdicts, bq: BulkQueues) -> None:
    """``xdp_do_redirect`` for every frame of a batch (all verdicts XDP_REDIRECT)."""
    tr = host.tracer
    n = len(frames)
    dev.stats.xdp_redirect += n
    err = np.zeros(n, np.int64)
    to_ifindex = np.zeros(n, np.int64)
    # Group by target map (map_id, type): one pass per map.
    keys = np.stack([v.map_id, v.map_type], axis=1)
    for map_id, map_type in np.unique(keys, axis=0).tolist():
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
            e, to = np.full(len(sel), -errno.EOPNOTSUPP), np.zeros(len(sel), np.int64)
            host.drop_frames(f, rq, direct=True)
        else:  # XDP_REDIRECT without a redirect helper: -EINVAL, the frame dropped
            e, to = np.full(len(sel), -errno.EINVAL), np.zeros(len(sel), np.int64)
            host.drop_frames(f, rq, direct=True)
        err[sel] = e
        to_ifindex[sel] = to
    ok = err == 0
    map_id_col = np.where(v.map_type == _UNSPEC, np.where(v.map_id == INT_MAX, INT_MAX, 0),
                          v.map_id)
    index_col = np.where((v.map_type == _UNSPEC) & (v.map_id == INT_MAX), 0, v.index)
    to_col = np.where((v.map_type == _UNSPEC) & (v.map_id == INT_MAX), v.index, to_ifindex)
    if ok.any():
        if ok.all():
            tr.xdp_redirect.fire_batch(prog_id=prog.id, ifindex=dev.ifindex, err=0,
                                       to_ifindex=to_col, map_id=map_id_col,
                                       map_index=index_col)
        else:
            tr.xdp_redirect.fire_batch(prog_id=prog.id, ifindex=dev.ifindex, err=0,
                                       to_ifindex=to_col[ok], map_id=map_id_col[ok],
                                       map_index=index_col[ok])
    if not ok.all():
        bad = ~ok
        tr.xdp_redirect_err.fire_batch(prog_id=prog.id, ifindex=dev.ifindex,
                                       err=err[bad], to_ifindex=to_col[bad],
                                       map_id=map_id_col[bad], map_index=index_col[bad])


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
            tgt_mtu[sel] = d.mtu + 14
    # xdp_ok_fwd_dev: frames longer than the target's MTU (plus header) are refused.
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
    start = 0
    while start < len(frames):
        k = min(DEV_MAP_BULK_SIZE - q.count, len(frames) - start)
        q.frames.append(frames.select(slice(start, start + k)))
        q.count += k
        start += k
        if q.count == DEV_MAP_BULK_SIZE:
            bq_xmit_all(host, ifindex, q)


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
            err[sel[:failed]] = -errno.EOVERFLOW
        for k, (ifindex, prog_id) in enumerate(targets):
            last = k == len(targets) - 1
            mtu_ok = conv.length <= host.devices[ifindex].mtu + 14
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

def bq_xmit_all(host: Host, ifindex: int, q: _DevBulk) -> None:
    """``bq_xmit_all``: the devmap program over the bulk, then ``ndo_xdp_xmit``."""
    frames = Frames.concat(q.frames)
    q.frames, q.count = [], 0
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
        if prog.id not in _warned:
            _warned.add(prog.id)
            log.warning("devmap program %s returned %d: only XDP_PASS and XDP_DROP are "
                        "allowed there (bpf_warn_invalid_xdp_action)", prog.spec.name,
                        int(act[bad][0]))
        host.tracer.xdp_exception.fire_actions(np.where(bad, np.where(act == 0, 0, act), 1),
                                               prog_id=prog.id, ifindex=target.ifindex)
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
    return out, n_dropped(frames, out)


def n_dropped(before: Frames, after: Frames) -> int:
    return len(before) - len(after)


def xdp_do_flush(host: Host, dev: NetDevice, rq: NetdevRxQueue | None,
                 bq: BulkQueues) -> None:
    """``xdp_do_flush``: devmap bulks, cpumap bulks (and the driver's TX bulk)."""
    if bq.tx_count:
        _flush_tx(host, dev, bq)
    for (ifindex, _pid), q in list(bq.dev.items()):
        if q.count:
            bq_xmit_all(host, ifindex, q)
    if bq.cpu:
        from pyxdp.net.cpumap import cpu_map_flush
        cpu_map_flush(host, bq)
