"""Generic (skb-mode) XDP: ``netif_receive_generic_xdp``, ``do_xdp_generic``,
``generic_xdp_tx`` and ``xdp_do_generic_redirect`` (``net/core/dev.c``,
``net/core/filter.c``).

A device with a generic program runs it on skbs, after the stack has built
them: each skb is linearised into its own page with its headroom expanded to
256 bytes (``pskb_expand_head``: the copy the native path never makes), the
program sees the Ethernet header, and then the kernel's write-back happens in
its order - head moved (``__skb_pull``/``__skb_push``), tail moved
(``__skb_trim``/``__skb_put``), the L2 header re-parsed when the program
changed the EtherType or the destination's host/broadcast class
(``eth_type_trans``), metadata kept (``skb_metadata_set``); ``rx_queue_index``
is the queue the skb was received on. Verdicts: PASS on to the stack; DROP
frees; ABORTED and unknown verdicts (warned about once per program) fire
``xdp_exception`` and free; TX is ``generic_xdp_tx`` (``dev_queue_xmit`` on the
same device, no bulk queue); REDIRECT is ``xdp_do_generic_redirect`` - no bulking,
no ``xdp_frame``: devmap/devmap_hash (``dev_map_generic_redirect``, broadcast with
skb clones, the entry's program run on the skb), an ifindex, or a cpumap (the skb
queued to the entry's ring; a full ring fails the redirect). ``xdp_redirect``/
``xdp_redirect_err`` fire per skb (``-EBADRQC`` for an XDP_REDIRECT no redirect
helper prepared). The kernel does all this one skb at a time; here the skbs of
one program run are acted on per target (its lookup and ``xdp_ok_fwd_dev`` once,
an entry program over them as one batch), each device sending what it got as one
list in the order the kernel sends it, the trace events fired in arrival order
(:func:`_generic_redirects`); a stack that receives such skbs takes each as a list
of its own (:attr:`pyxdp.net.stack.SkbBatch.each`).
Skbs reach this path from the stack's transmit side (a veth peer) and from
NAPI polls without a native program (a NIC, a veth with GRO).

Programs run on the batch of skbs the device received in one call (one
``run_batch``); everything after runs per verdict group with numpy. Skbs
longer than a page's packet room (3520 bytes) are prepared as
``netif_skb_check_for_xdp`` does - ``skb_cow_data_for_xdp``'s head and frags
(built in machine code) for a frags-aware program, the skb linearised for any
other - and run in batches too: each run of them in arrival order prepared
alike (frags, or linearised to one ``frame_sz``) is one ``run_batch``
(:func:`_generic_large`). The interpreter's batch, one ``XdpBuff`` per skb, is
the reference the JIT's is tested against.
Simplified: a cpumap entry receives the skb as an order-0 ``xdp_frame`` (the
kernel queues the skb itself and runs the entry program in skb mode), so an skb
longer than a page's packet room fails that redirect with ``-EOVERFLOW``. A
devmap entry's program sees a long skb as generic XDP's copy of it, a head and
page frags (``dev_map_bpf_prog_run_skb`` on a nonlinear skb sets the frags flag).
"""

from __future__ import annotations

import errno
import logging
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pyxdp.maps.base import map_by_id
from pyxdp.maps.cpumap import CpuMap
from pyxdp.net.filter import BPF_F_BROADCAST, BPF_F_EXCLUDE_INGRESS
from pyxdp.net.frames import KIND_BUFF, KIND_FRAGS, KIND_FRAME, Frames
from pyxdp.net.stack import SkbBatch
from pyxdp.net.xdp import (
    MAX_SKB_FRAGS,
    PAGE_SIZE,
    SKB_SHARED_INFO_SIZE,
    XDP_PACKET_HEADROOM,
)
from pyxdp.net.xdp_mem import MEM_TYPE_PAGE_ORDER0, xdp_convert_buff_to_frame
from pyxdp.spec import BPF_F_XDP_HAS_FRAGS
from pyxdp.uapi.bpf import BpfMapType, XdpAction

if TYPE_CHECKING:
    from pyxdp.net.netdev_types import DpDevice as NetDevice
    from pyxdp.net.prog import XdpProg

__all__ = ["netif_receive_skb_list"]

_DEVMAPS = (int(BpfMapType.BPF_MAP_TYPE_DEVMAP), int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH))
log = logging.getLogger(__name__)

INT_MAX = 0x7FFF_FFFF
# A page's packet room: what skb_cow_data_for_xdp puts in the head (SKB_WITH_OVERHEAD).
MAX_LINEAR = PAGE_SIZE - XDP_PACKET_HEADROOM - SKB_SHARED_INFO_SIZE


def netif_receive_skb_list(dev: NetDevice, batch: SkbBatch, *, counted: bool = False) -> None:
    """Skbs received on ``dev``: generic XDP (if attached), then the stack
    (``counted``: the driver already counted them in the device's rx stats)."""
    prog = dev.xdp_generic
    host = dev.host
    if prog is None or not len(batch):
        if not counted:
            dev.stats.rx_packets += len(batch)
            dev.stats.rx_bytes += int(batch.length.sum())
        host.stack.netif_receive_skb_list(batch)
        return
    if not counted:
        dev.stats.rx_packets += len(batch)
        dev.stats.rx_bytes += int(batch.length.sum())
    big = batch.length > MAX_LINEAR
    if not big.any():
        _generic_pages(dev, prog, batch)
        return
    # Runs of skbs above a page's room and runs of the others, in arrival order.
    for seg in _runs(big.astype(np.int64)):
        part = _select(batch, seg)
        if big[seg[0]]:
            _generic_large(dev, prog, part)
        else:
            _generic_pages(dev, prog, part)


def _runs(key: npt.NDArray[np.int64]) -> list[npt.NDArray[np.intp]]:
    """Index runs of equal consecutive ``key``: batches that keep arrival order."""
    edges = np.flatnonzero(np.diff(key)) + 1
    return np.split(np.arange(len(key)), edges)


def _generic_pages(dev: NetDevice, prog: XdpProg, batch: SkbBatch, *,
                   every_fault: bool = False) -> None:
    """Skbs each copied into a page of the system allocator at ``XDP_PACKET_HEADROOM``
    (``pskb_expand_head``; past a page's packet room ``skb_cow_data_for_xdp``'s head
    of :data:`MAX_LINEAR` bytes and page frags, built in machine code by
    :func:`pyxdp.net.skbuff_native.skbs_build`), the head's headroom and tailroom
    zeroed (the kernel's are uninitialised: the model keeps what a program can grow
    into deterministic, as linearised skbs'), the program over them as one batch,
    the pages freed after (frags ``adjust_tail`` released went back in the run).
    ``every_fault``: each fault reported, not only the batch's first."""
    from pyxdp.net.prog import run_xdp
    host = dev.host
    with host.lock:
        frames, ok = _skb_copies(dev, batch)
        if not ok.all():  # no memory for the copy: those skbs are dropped
            dev.stats.rx_dropped += int((~ok).sum())
            batch = _select(batch, ok)
        n = len(frames)
        # rx_queue_index: the queue the skb was recorded on (netif_get_rxqueue).
        queue = np.clip(batch.queue, 0, len(dev.rx) - 1)
        v = run_xdp(prog, host, frames, ifindex=dev.ifindex, queue=queue,
                    ctx=dev.rx[int(queue[0]) if n else 0].ctx, faults=dev.faults,
                    where=f"{dev.name} generic", every_fault=every_fault)
        act = v.action
        _exceptions(dev, prog, act)
        out = _copies_out(dev, frames, dev.ifindex)
        out.queue[:] = batch.queue
    generic_xdp_act(dev, prog, out, act, v.map_id, v.map_type, v.index, v.flags)


def _skb_copies(dev: NetDevice, batch: SkbBatch) -> tuple[Frames, npt.NDArray[np.bool_]]:
    """Each skb copied into pages of the system allocator at ``XDP_PACKET_HEADROOM``
    (a head of up to :data:`MAX_LINEAR` bytes and page frags past it, built in
    machine code by :func:`pyxdp.net.skbuff_native.skbs_build`), the head's headroom
    and tailroom zeroed; returns the copies as frames and which skbs got one (the
    others got no pages). Under the host lock."""
    from pyxdp.net.skbuff_native import skb_heads_clear, skbs_build
    sysmem = dev.host.memmap.system
    lens = np.ascontiguousarray(batch.length, np.int64)
    pages = np.empty(len(lens), np.int64)
    skbs_build(sysmem.native_args, np.ascontiguousarray(batch.data, np.uint8), lens,
               XDP_PACKET_HEADROOM, pages)
    ok = pages >= 0
    if not ok.all():
        pages, lens = pages[ok], lens[ok]
    n = len(pages)
    skb_heads_clear(sysmem.pages, sysmem.local(pages), XDP_PACKET_HEADROOM, lens)
    return Frames(pages, np.full(n, XDP_PACKET_HEADROOM, np.int64), lens.copy(),
                  np.zeros(n, np.int64),
                  np.where(lens > MAX_LINEAR, KIND_FRAGS, KIND_BUFF).astype(np.int64)), ok


def _copies_out(dev: NetDevice, frames: Frames, ifindex: int) -> SkbBatch:
    """The skbs as a program left their copies (:func:`_skb_copies`), the copies freed:
    each one's frags (``adjust_tail`` released some already), then its head."""
    host = dev.host
    out = host.frames_to_skbs(frames, ifindex)
    pages = frames.pfn
    left = frames.has_frags
    if left.any():
        from pyxdp.net.xdp_mem import xdp_buffs_pages
        pages = xdp_buffs_pages(frames.pfn, left.astype(np.int64), memmap=host.memmap)
    host.memmap.system.put_pages(pages)
    return out


def _exceptions(dev: NetDevice, prog: XdpProg, act: np.ndarray) -> None:
    """Count the verdicts run; warn once about unknown ones and fire ``xdp_exception``
    for them and XDP_ABORTED."""
    from pyxdp.net.prog import _warned
    dev.stats.xdp_packets += len(act)
    bad = act > int(XdpAction.XDP_REDIRECT)
    if bad.any() and prog not in _warned:
        _warned.add(prog)
        log.warning("%s: XDP program %s returned illegal action %d: treated as "
                    "XDP_ABORTED (bpf_warn_invalid_xdp_action)", dev.name,
                    prog.spec.name, int(act[bad][0]))
    dev.stats.xdp_aborted += int((act == XdpAction.XDP_ABORTED).sum() + bad.sum())
    dev.host.tracer.xdp_exception.fire_actions(act, prog_id=prog.id, ifindex=dev.ifindex)


def _generic_large(dev: NetDevice, prog: XdpProg, batch: SkbBatch) -> None:
    """Skbs above a page's packet room, as ``netif_skb_check_for_xdp`` prepares them.

    A frags-aware program gets ``skb_cow_data_for_xdp``'s copy: a head of 3520
    bytes at ``XDP_PACKET_HEADROOM`` in a page and frags of up to a page each (at
    most ``MAX_SKB_FRAGS``; the rx queue has no ``frag_size``, so the tail of the
    frags cannot grow) - :func:`_generic_pages`. Any other program - and a
    frags-aware one when the skb needs more frags - gets the skb linearised
    (``pskb_expand_head`` with ``XDP_PACKET_HEADROOM`` and 128 more bytes of
    tailroom, then ``skb_linearize``): the whole packet in one buffer, whose
    tailroom is what ``kmalloc`` rounds the allocation up to
    (:func:`_generic_linear`). Each run of consecutive skbs prepared alike (the
    same ``frame_sz``) is one batch, so the program runs in arrival order; every
    fault is reported, as for single runs."""
    ln = batch.length
    frags_ok = ln <= MAX_LINEAR + MAX_SKB_FRAGS * PAGE_SIZE
    if not prog.spec.flags & BPF_F_XDP_HAS_FRAGS:
        frags_ok[:] = False
    key = np.where(frags_ok, 0, linear_frame_sizes(ln))
    for seg in _runs(key):
        part = batch if len(seg) == len(batch) else _select(batch, seg)
        if key[seg[0]] == 0:
            _generic_pages(dev, prog, part, every_fault=True)
        else:
            _generic_linear(dev, prog, part, int(key[seg[0]]))


def _generic_linear(dev: NetDevice, prog: XdpProg, batch: SkbBatch, frame_sz: int) -> None:
    """Linearised skbs of one ``frame_sz`` (beyond a page): each a row of a zeroed
    ``(N, frame_sz)`` array, the packet at ``XDP_PACKET_HEADROOM``, the program
    over them as one batch (``run_batch``), the skbs copied out as it left them."""
    from pyxdp.net.prog import report_faults
    from pyxdp.net.skbuff_native import rows_copy
    n = len(batch)
    ln = np.ascontiguousarray(batch.length, np.int64)
    frames = np.zeros((n, frame_sz), np.uint8)
    zero = np.zeros(n, np.int64)
    rows_copy(np.ascontiguousarray(batch.data, np.uint8), zero, frames,
              np.full(n, XDP_PACKET_HEADROOM, np.int64), ln)
    queue = np.clip(batch.queue, 0, len(dev.rx) - 1)
    with dev.host.lock:
        res = prog.run_batch(frames, XDP_PACKET_HEADROOM, ln, None, queue, dev.ifindex,
                             ctx=dev.rx[int(queue[0])].ctx, consume_redirect=True)
        report_faults(prog, res, dev.faults, f"{dev.name} generic", True)
        act = res.action.astype(np.int64)
        _exceptions(dev, prog, act)
    off = res.data_off.astype(np.int64)
    length = res.data_len.astype(np.int64)
    meta = res.meta_len.astype(np.int64)
    data = np.zeros((n, max(int(length.max()), 1)), np.uint8)
    rows_copy(frames, off, data, zero, length)
    metas = [b""] * n
    for i in np.flatnonzero(meta).tolist():  # only frames the program gave metadata
        metas[i] = frames[i, off[i] - meta[i]:off[i]].tobytes()
    out = SkbBatch(data, length, np.full(n, dev.ifindex, np.int64), batch.queue.copy(), metas)
    generic_xdp_act(dev, prog, out, act, *(r.astype(np.int64) for r in (
        res.redirect_map_id, res.redirect_map_type, res.redirect_index, res.redirect_flags)))


def linear_frame_size(length: int) -> int:
    """``frame_sz`` of a linearised skb of ``length`` bytes: ``pskb_expand_head``'s
    ``SKB_DATA_ALIGN(headroom + length + 128)`` plus ``skb_shared_info``, rounded up
    as ``kmalloc`` sizes its allocation (a power of two up to 8 KiB, whole pages
    beyond: ``kmalloc_size_roundup``)."""
    return int(linear_frame_sizes(np.array([length], np.int64))[0])


def linear_frame_sizes(length: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """:func:`linear_frame_size` of each length."""
    size = _align(XDP_PACKET_HEADROOM + length + 128, 64) + _align(SKB_SHARED_INFO_SIZE, 64)
    # A power of two up to 8 KiB; beyond, whole pages in a power-of-two order.
    small = np.int64(1) << _bit_length(np.maximum(size - 1, 1))
    large = np.int64(PAGE_SIZE) << _bit_length(np.maximum(-(-size // PAGE_SIZE) - 1, 0))
    out: npt.NDArray[np.int64] = np.where(size <= 8192, small, large)
    return out


def _bit_length(x: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``int.bit_length`` of non-negative integers below 2**53 (frexp's exponent)."""
    return np.frexp(x.astype(np.float64))[1].astype(np.int64)


def _align(n: Any, a: int) -> Any:
    return -(-n // a) * a


def generic_xdp_act(dev: NetDevice, prog: XdpProg, out: SkbBatch, act: np.ndarray,
                    map_id: np.ndarray, map_type: np.ndarray, index: np.ndarray,
                    flags: np.ndarray) -> None:
    """``do_xdp_generic``'s verdicts for skbs a generic program ran on (exceptions
    already fired): PASS to the stack as one list, DROP counted (the skbs are
    the caller's to free), TX (``generic_xdp_tx``) as one list on the device, and
    REDIRECT (``xdp_do_generic_redirect``) per target (:func:`_generic_redirects`)."""
    host = dev.host
    # The L2 re-parse (eth_type_trans after a changed header) needs nothing more:
    # the stack model parses every skb from the bytes the program left.
    passed = act == XdpAction.XDP_PASS
    dev.stats.xdp_pass += int(passed.sum())
    dev.stats.xdp_drops += int((act == XdpAction.XDP_DROP).sum())
    if passed.any():
        q = int(out.queue[0]) if len(out) else 0
        host.stack.netif_receive_skb_list(_select(out, passed),
                                          dev.rx[min(max(q, 0), len(dev.rx) - 1)].ctx.cpu)
    tx = act == XdpAction.XDP_TX
    if tx.any():
        # generic_xdp_tx sends each skb on its own (no bulk); sent one after the
        # other, they are the list dev_queue_xmit's model takes in one call.
        dev.stats.xdp_tx += int(tx.sum())
        dev.xmit_skbs(_retarget(_select(out, tx), dev.ifindex))
    red = act == XdpAction.XDP_REDIRECT
    if red.any():
        dev.stats.xdp_redirect += int(red.sum())
        _generic_redirects(dev, prog.id, _select(out, red), *(
            np.asarray(x, np.int64)[red] for x in (map_id, map_type, index, flags)))


def _select(b: SkbBatch, sel: np.ndarray) -> SkbBatch:
    # The metadata list picked by C-level calls (no bytecode per skb).
    idx = np.arange(len(b))[sel].tolist()
    return SkbBatch(b.data[sel], b.length[sel], b.ifindex[sel], b.queue[sel],
                    list(map(b.meta.__getitem__, idx)))


def _fire(dev: NetDevice, prog_id: int, err: np.ndarray, to_ifindex: np.ndarray,
          map_id: np.ndarray, index: np.ndarray) -> None:
    """``xdp_redirect`` / ``xdp_redirect_err`` of each redirected skb, in arrival order."""
    tr = dev.host.tracer
    bad = err != 0
    for tp, sel in ((tr.xdp_redirect_err, bad), (tr.xdp_redirect, ~bad)):
        if sel.any():
            tp.fire_batch(prog_id=prog_id, ifindex=dev.ifindex, err=err[sel],
                          to_ifindex=to_ifindex[sel], map_id=map_id[sel],
                          map_index=index[sel])


def _ok_fwd(target: NetDevice | None, length: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``xdp_ok_fwd_dev`` of each skb for ``target``: 0 or -errno."""
    if target is None:
        return np.full(len(length), -errno.EINVAL, np.int64)
    if not target.up:
        return np.full(len(length), -errno.ENETDOWN, np.int64)
    # mtu + hard_header_len + VLAN_HLEN
    return np.where(length > target.mtu + 14 + 4, -errno.EMSGSIZE, 0).astype(np.int64)


def _generic_redirects(dev: NetDevice, prog_id: int, skbs: SkbBatch, map_id: np.ndarray,
                       map_type: np.ndarray, index: np.ndarray, flags: np.ndarray) -> None:
    """``xdp_do_generic_redirect`` of each skb (no bulking, no ``xdp_frame``: the kernel
    takes them one at a time). The skbs redirected alike - the same map, key and
    flags, or ifindex - are one group: its target looked up once, ``xdp_ok_fwd_dev``
    over the group's lengths, its skbs sent as one list in arrival order, groups in
    the order of their first skb; then the trace events of every skb in arrival
    order. Targets: an ifindex (``bpf_redirect``), a devmap/devmap_hash entry
    (``dev_map_generic_redirect``: the entry's program on the skbs first) or all of
    them (``dev_map_redirect_multi``), a cpumap entry (``cpu_map_generic_redirect``),
    an AF_XDP socket (``xsk_generic_rcv``); anything else ``-EBADRQC``."""
    host = dev.host
    n = len(skbs)
    out = _Xmits()
    err = np.zeros(n, np.int64)
    to = np.zeros(n, np.int64)
    key = np.stack([map_type, map_id, index, flags], axis=1)
    _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    for g in np.argsort(first, kind="stable").tolist():
        sel = np.flatnonzero(inv == g)
        i0 = int(sel[0])
        mt, mid, idx, fl = (int(x) for x in key[i0])
        part = skbs if len(sel) == n else _select(skbs, sel)
        ln = np.asarray(part.length, np.int64)
        if mt == 0 and mid == INT_MAX:  # bpf_redirect(ifindex)
            target = host.devices.get(idx)
            e = _ok_fwd(target, ln)
            err[sel], to[sel] = e, idx
            if target is not None and (e == 0).any():
                out.add(target, _select(part, e == 0), sel[e == 0], 0)
            continue
        m = map_by_id(mid)
        if mt in _DEVMAPS:
            from pyxdp.net.devmap import _all_entries, _devmap_entries
            slot_ifx, pids = _devmap_entries(m, np.array([idx], np.int64))
            # to_ifindex: the device of slot ``idx``, which the helper looked up.
            to[sel] = int(slot_ifx[0])
            if fl & BPF_F_BROADCAST:
                # dev_map_redirect_multi: a clone per target in walk order, the skb
                # itself to the last; the first target xdp_ok_fwd_dev refuses ends
                # that skb's broadcast, and its error is the redirect's.
                live = np.ones(len(sel), bool)
                e = np.zeros(len(sel), np.int64)
                for w, (ifx, pid) in enumerate(_all_entries(m)):
                    if fl & BPF_F_EXCLUDE_INGRESS and ifx == dev.ifindex:
                        continue
                    t = host.devices.get(ifx)
                    et = _ok_fwd(t, ln)
                    stop = live & (et != 0)
                    e[stop] = et[stop]
                    live &= et == 0
                    if not live.any():
                        break
                    if t is not None:
                        _xmit_devmap(dev, t, pid, part if live.all() else _select(part, live),
                                     out, sel[live], w)
                err[sel] = e
                continue
            tifx = int(slot_ifx[0])
            target = host.devices.get(tifx) if tifx else None
            e = _ok_fwd(target, ln)
            err[sel] = e
            if target is not None and (e == 0).any():
                _xmit_devmap(dev, target, int(pids[0]),
                             part if not e.any() else _select(part, e == 0), out, sel[e == 0], 0)
            continue
        if mt == int(BpfMapType.BPF_MAP_TYPE_CPUMAP) and isinstance(m, CpuMap):
            err[sel] = _skbs_to_cpumap(dev, m, idx, part) if m.qsize_at(idx) else -errno.EINVAL
            continue
        if mt == int(BpfMapType.BPF_MAP_TYPE_XSKMAP):
            # AF_XDP (pyxdp.net.xsk): xsk_generic_rcv copies and publishes at once;
            # map id 0 is bpf_redirect_xsk (the socket registered on the skb's queue).
            from pyxdp.net.xsk import xsk_generic_redirect
            xs = host.xsk_socket(dev.ifindex, idx) if mid == 0 else \
                getattr(m, "socket_at", lambda i: None)(idx)
            err[sel] = xsk_generic_redirect(dev, xs, part)
            continue
        # No redirect helper prepared this XDP_REDIRECT.
        err[sel] = -errno.EBADRQC
    out.send()
    # The trace keeps map id and index of bpf_redirect's pseudo map as xdp_do_redirect's.
    by_ifindex = (map_type == 0) & (map_id == INT_MAX)
    _fire(dev, prog_id, err, to, map_id, np.where(by_ifindex, 0, index))


def _retarget(skb: SkbBatch, ifindex: int) -> SkbBatch:
    """The skbs on their way out of ``ifindex``, one at a time (``generic_xdp_tx``)."""
    return SkbBatch(skb.data, skb.length, np.full(len(skb), ifindex, np.int64), skb.queue,
                    skb.meta, True)


def _xmit_devmap(dev: NetDevice, target: NetDevice, prog_id: int, skbs: SkbBatch,
                 out: _Xmits, order: np.ndarray, walk: int) -> None:
    """``dev_map_generic_redirect``: the entry program on the skbs (each copied as
    generic XDP copies it, :func:`_skb_copies`; one without pages is dropped),
    ``egress_ifindex`` set; PASS sent, DROP dropped, anything else an
    ``xdp_exception`` on the target and dropped; then xmit (into ``out``, the skbs
    at ``order``, ``walk``: the target's position in a broadcast)."""
    host = dev.host
    if prog_id:
        prog = host.program_by_id(prog_id)
        if prog is not None:
            from pyxdp.net.prog import run_xdp
            with host.lock:
                frames, ok = _skb_copies(dev, skbs)
                if not len(frames):
                    return
                order = order[ok]
                v = run_xdp(prog, host, frames, ifindex=dev.ifindex, queue=0,
                            ctx=dev.rx[0].ctx, egress_ifindex=target.ifindex,
                            faults=target.faults, where=f"{target.name} devmap egress",
                            every_fault=True)
                skbs = _copies_out(dev, frames, target.ifindex)
            act = v.action
            bad = (act != XdpAction.XDP_PASS) & (act != XdpAction.XDP_DROP)
            if bad.any():
                host.tracer.xdp_exception.fire_batch(prog_id=prog.id, act=act[bad],
                                                     ifindex=target.ifindex)
            passed = act == XdpAction.XDP_PASS
            if not passed.any():
                return
            if not passed.all():
                skbs, order = _select(skbs, passed), order[passed]
    out.add(target, skbs, order, walk)


class _Xmits:
    """The skbs a list of generic redirects sends, per device: each device's sent
    as one list (``generic_xdp_tx`` of each, in turn) in the order the kernel
    sends them one at a time - by skb, a broadcast's targets in walk order."""

    def __init__(self) -> None:
        self.by_dev: dict[int, tuple[NetDevice, list[tuple[SkbBatch, np.ndarray, int]]]] = {}

    def add(self, target: NetDevice, skbs: SkbBatch, order: np.ndarray, walk: int) -> None:
        self.by_dev.setdefault(target.ifindex, (target, []))[1].append((skbs, order, walk))

    def send(self) -> None:
        for target, parts in self.by_dev.values():
            if len(parts) == 1:
                skbs = parts[0][0]
            else:
                order = np.concatenate([o for _, o, _ in parts])
                walk = np.concatenate([np.full(len(o), w, np.int64) for _, o, w in parts])
                skbs = _select(_concat([b for b, _, _ in parts]), np.lexsort((walk, order)))
            target.xmit_skbs(_retarget(skbs, target.ifindex))


def _concat(parts: list[SkbBatch]) -> SkbBatch:
    """Lists of skbs as one, in the order given."""
    width = max(b.data.shape[1] for b in parts)
    data = np.zeros((sum(len(b) for b in parts), width), np.uint8)
    at = 0
    for b in parts:
        data[at:at + len(b), :b.data.shape[1]] = b.data
        at += len(b)
    return SkbBatch(data, np.concatenate([b.length for b in parts]),
                    np.concatenate([b.ifindex for b in parts]),
                    np.concatenate([b.queue for b in parts]), [m for b in parts for m in b.meta])


def _skbs_to_cpumap(dev: NetDevice, m: CpuMap, cpu: int, skbs: SkbBatch) -> np.ndarray:
    """``cpu_map_generic_redirect``: each skb (as an order-0 frame) into the entry's
    ring in turn; 0 or -errno each, in the one-skb-at-a-time order: no page
    (``-ENOMEM``, once the allocator ran out), a packet longer than an order-0
    frame holds (``-EOVERFLOW``: the model queues frames, not skbs), the ring
    full (``-ENOSPC``, the page freed)."""
    from pyxdp.net.cpumap import cpumap_runtime
    from pyxdp.net.skbuff_native import skbs_build
    from pyxdp.net.xdp_mem import xdp_frames_set_dev_rx
    host = dev.host
    sysmem = host.memmap.system
    ln = np.ascontiguousarray(skbs.length, np.int64)
    fit = ln <= MAX_LINEAR  # xdp_convert_buff_to_frame's room in an order-0 page
    with host.lock:
        # One skb at a time, each takes a page (a long one gives it back at once):
        # the ones after the allocator ran dry get none.
        nomem = (np.cumsum(fit) - fit) >= sysmem.nr_free
        err = np.where(nomem, -errno.ENOMEM,
                       np.where(fit, 0, -errno.EOVERFLOW)).astype(np.int64)
        take = err == 0
        pages = np.empty(int(take.sum()), np.int64)
        skbs_build(sysmem.native_args, np.ascontiguousarray(skbs.data[take], np.uint8),
                   ln[take], XDP_PACKET_HEADROOM, pages)
        if not (pages >= 0).all():  # polls on other threads took pages meanwhile
            err[np.flatnonzero(take)[pages < 0]] = -errno.ENOMEM
            pages = pages[pages >= 0]
        sent = np.flatnonzero(err == 0)
        if not len(sent):
            return err
        st = xdp_convert_buff_to_frame(pages, XDP_PACKET_HEADROOM, ln[sent], 0,
                                       mem_type=MEM_TYPE_PAGE_ORDER0, memmap=host.memmap)
        if st.any():  # no room for the xdp_frame (none expected: the lengths fit)
            err[sent[st != 0]] = -errno.EOVERFLOW
            sysmem.put_pages(pages[st != 0])
            pages, sent = pages[st == 0], sent[st == 0]
            if not len(sent):
                return err
        xdp_frames_set_dev_rx(pages, dev.ifindex, memmap=host.memmap)
        rt = cpumap_runtime(host, m, cpu)
    q = min(int(skbs.queue[0]), len(dev.rx) - 1)
    e = rt.generic_enqueue(Frames(pages, np.full(len(sent), XDP_PACKET_HEADROOM, np.int64),
                                  ln[sent], np.zeros(len(sent), np.int64),
                                  np.full(len(sent), KIND_FRAME, np.int64)), dev.rx[q].ctx.cpu)
    err[sent] = e
    if e.any():
        with host.lock:
            sysmem.put_pages(pages[e != 0])
    return err
