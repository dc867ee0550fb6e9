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
same device, one skb at a time, no bulk queue); REDIRECT is ``xdp_do_generic_redirect`` - one
skb at a time, no bulking, no ``xdp_frame``: devmap/devmap_hash
(``dev_map_generic_redirect``, broadcast with skb clones, the entry's program
run on the skb), an ifindex, or a cpumap (the skb queued to the entry's
ring; a full ring fails the redirect). ``xdp_redirect``/``xdp_redirect_err``
fire per skb (``-EBADRQC`` for an XDP_REDIRECT no redirect helper prepared).
Skbs reach this path from the stack's transmit side (a veth peer) and from
NAPI polls without a native program (a NIC, a veth with GRO).

Programs run on the batch of skbs the device received in one call (one
``run_batch``); everything after runs per verdict group with numpy. An skb
longer than a page's packet room (3520 bytes) is prepared as
``netif_skb_check_for_xdp`` does - ``skb_cow_data_for_xdp``'s head and frags
for a frags-aware program, the skb linearised for any other - and runs on
its own (:func:`_generic_large`).
Simplified: a cpumap entry receives the skb as an order-0 ``xdp_frame`` (the
kernel queues the skb itself and runs the entry program in skb mode).
"""

from __future__ import annotations

import errno
import logging
from typing import TYPE_CHECKING

import numpy as np

from pyxdp.maps.base import map_by_id
from pyxdp.maps.cpumap import CpuMap
from pyxdp.net.filter import BPF_F_BROADCAST, BPF_F_EXCLUDE_INGRESS
from pyxdp.net.frames import KIND_FRAME, Frames
from pyxdp.net.stack import SkbBatch
from pyxdp.net.xdp import (
    MAX_SKB_FRAGS,
    PAGE_SIZE,
    SKB_SHARED_INFO_SIZE,
    XDP_PACKET_HEADROOM,
    RxQueue,
    XdpBuff,
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
SKB_TAILROOM = 320  # skb_shared_info at the end of the linear buffer
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
    # Skbs above a page's room one by one, the others as batches, in arrival order.
    edges = np.flatnonzero(np.diff(big.astype(np.int8))) + 1
    for seg in np.split(np.arange(len(batch)), edges):
        part = _select(batch, seg)
        if big[seg[0]]:
            for i in range(len(part)):
                _generic_large(dev, prog, _select(part, np.array([i])))
        else:
            _generic_pages(dev, prog, part)


def _generic_pages(dev: NetDevice, prog: XdpProg, batch: SkbBatch) -> None:
    """Skbs that fit a page's packet room: each into a page of its own at
    ``XDP_PACKET_HEADROOM`` (``pskb_expand_head``), the program over them as one batch."""
    from pyxdp.net.prog import run_xdp
    host = dev.host
    sysmem = host.memmap.system
    with host.lock:
        n = len(batch)
        pages = sysmem.alloc_pages_bulk(n)
        if len(pages) < n:  # no memory for the expanded head: the skbs are dropped
            dev.stats.rx_dropped += n - len(pages)
            n = len(pages)
        rows = sysmem.local(pages)
        width = min(batch.data.shape[1], sysmem.page_size - XDP_PACKET_HEADROOM - SKB_TAILROOM)
        sysmem.pages[rows, XDP_PACKET_HEADROOM:XDP_PACKET_HEADROOM + width] = \
            batch.data[:n, :width]
        frames = Frames.make(pages, XDP_PACKET_HEADROOM, batch.length[:n])
        # rx_queue_index: the queue the skb was recorded on (netif_get_rxqueue).
        queue = np.clip(batch.queue[:n], 0, len(dev.rx) - 1)
        v = run_xdp(prog, host, frames, ifindex=dev.ifindex, queue=queue,
                    ctx=dev.rx[int(queue[0]) if n else 0].ctx, faults=dev.faults,
                    where=f"{dev.name} generic")
        act = v.action
        _exceptions(dev, prog, act)
        out = host.frames_to_skbs(frames, dev.ifindex)
        out.queue[:] = batch.queue[:n]
        sysmem.put_pages(pages)  # the skb heads: freed (or, below, copied on)
    generic_xdp_act(dev, prog, out, act, v.map_id, v.map_type, v.index, v.flags)


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


def _generic_large(dev: NetDevice, prog: XdpProg, skb: SkbBatch) -> None:
    """One skb above a page's packet room, as ``netif_skb_check_for_xdp`` prepares it.

    A frags-aware program gets ``skb_cow_data_for_xdp``'s copy: a head of 3520
    bytes at ``XDP_PACKET_HEADROOM`` in a page and frags of up to a page each (at
    most ``MAX_SKB_FRAGS``; the rx queue has no ``frag_size``, so the tail of the
    frags cannot grow). Any other program - and a frags-aware one when the skb
    needs more frags - gets the skb linearised (``pskb_expand_head`` with
    ``XDP_PACKET_HEADROOM`` and 128 more bytes of tailroom, then
    ``skb_linearize``): the whole packet in one buffer, whose tailroom is what
    ``kmalloc`` rounds the allocation up to. The program runs on an
    :class:`~pyxdp.net.xdp.XdpBuff` (the reference path, as frags frames of a
    NAPI poll); then its verdict as for every generic skb."""
    from pyxdp.errors import ProgramFault
    from pyxdp.net.prog import MAX_FAULT_REPORTS
    ln = int(skb.length[0])
    pkt = skb.data[0, :ln].tobytes()
    queue = min(max(int(skb.queue[0]), 0), len(dev.rx) - 1)
    ctx = dev.rx[queue].ctx
    frags_ok = bool(prog.spec.flags & BPF_F_XDP_HAS_FRAGS) and \
        ln <= MAX_LINEAR + MAX_SKB_FRAGS * PAGE_SIZE
    if frags_ok:
        frame = bytearray(PAGE_SIZE)
        frame[XDP_PACKET_HEADROOM:XDP_PACKET_HEADROOM + MAX_LINEAR] = pkt[:MAX_LINEAR]
        frags = [bytearray(pkt[o:o + PAGE_SIZE]) for o in range(MAX_LINEAR, ln, PAGE_SIZE)]
        xdp = XdpBuff(frame, XDP_PACKET_HEADROOM, XDP_PACKET_HEADROOM + MAX_LINEAR,
                      XDP_PACKET_HEADROOM, PAGE_SIZE, RxQueue(dev.ifindex, queue, 0),
                      frags=frags)
    else:
        frame_sz = linear_frame_size(ln)
        frame = bytearray(frame_sz)
        frame[XDP_PACKET_HEADROOM:XDP_PACKET_HEADROOM + ln] = pkt
        xdp = XdpBuff(frame, XDP_PACKET_HEADROOM, XDP_PACKET_HEADROOM + ln,
                      XDP_PACKET_HEADROOM, frame_sz, RxQueue(dev.ifindex, queue, 0))
    ctx.tail_call_cnt = 0
    with dev.host.lock:
        try:
            act = prog.run(xdp, ctx)
        except ProgramFault as e:
            act = int(XdpAction.XDP_ABORTED)
            if len(dev.faults) < MAX_FAULT_REPORTS:
                dev.faults.append(f"{dev.name} generic: {prog.spec.name}: {e} -> XDP_ABORTED")
                log.warning("%s", dev.faults[-1])
        acts = np.array([act], np.int64)
        _exceptions(dev, prog, acts)
        red = [0, 0, 0, 0]
        ri = ctx.ri
        if ri is not None and act == XdpAction.XDP_REDIRECT:
            red = [ri.map_id, ri.map_type, ri.tgt_index, ri.flags]
            ri.map, ri.map_id, ri.flags = None, 0, 0
            ri.map_type = int(BpfMapType.BPF_MAP_TYPE_UNSPEC)
    out = SkbBatch.from_packets([xdp.packet()], dev.ifindex, int(skb.queue[0]))
    out.meta[0] = xdp.metadata()
    generic_xdp_act(dev, prog, out, acts, *(np.array([r], np.int64) for r in red))


def linear_frame_size(length: int) -> int:
    """``frame_sz`` of a linearised skb of ``length`` bytes: ``pskb_expand_head``'s
    ``SKB_DATA_ALIGN(headroom + length + 128)`` plus ``skb_shared_info``, rounded up
    as ``kmalloc`` sizes its allocation (a power of two up to 8 KiB, whole pages
    beyond: ``kmalloc_size_roundup``)."""
    size = _align(XDP_PACKET_HEADROOM + length + 128, 64) + _align(SKB_SHARED_INFO_SIZE, 64)
    if size <= 8192:
        return 1 << max(size - 1, 1).bit_length()
    pages = -(-size // PAGE_SIZE)
    return PAGE_SIZE << max(pages - 1, 0).bit_length()


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def generic_xdp_act(dev: NetDevice, prog: XdpProg, out: SkbBatch, act: np.ndarray,
                    map_id: np.ndarray, map_type: np.ndarray, index: np.ndarray,
                    flags: np.ndarray) -> None:
    """``do_xdp_generic``'s verdicts for skbs a generic program ran on (exceptions
    already fired): PASS to the stack as one list, DROP counted (the skbs are
    the caller's to free), TX and REDIRECT one skb at a time."""
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
        dev.stats.xdp_tx += int(tx.sum())
        for i in np.flatnonzero(tx).tolist():  # generic_xdp_tx: one skb at a time
            dev.xmit_skbs(_select(out, np.array([i])))
    red = act == XdpAction.XDP_REDIRECT
    if red.any():
        dev.stats.xdp_redirect += int(red.sum())
        for i in np.flatnonzero(red).tolist():
            _generic_redirect(dev, prog.id, _select(out, np.array([i])), int(map_id[i]),
                              int(map_type[i]), int(index[i]), int(flags[i]))


def _select(b: SkbBatch, sel: np.ndarray) -> SkbBatch:
    return SkbBatch(b.data[sel], b.length[sel], b.ifindex[sel], b.queue[sel],
                    [b.meta[int(i)] for i in np.arange(len(b))[sel].tolist()])


def _fire(dev: NetDevice, prog_id: int, err: int, to_ifindex: int, map_id: int,
          index: int) -> None:
    tr = dev.host.tracer
    if err:
        tr.xdp_redirect_err.fire(prog_id, dev.ifindex, to_ifindex, map_id, index, err)
    else:
        tr.xdp_redirect.fire(prog_id, dev.ifindex, to_ifindex, map_id, index)


def _ok_fwd(target: NetDevice | None, skb: SkbBatch) -> int:
    if target is None:
        return -errno.EINVAL
    if not target.up:
        return -errno.ENETDOWN
    if int(skb.length[0]) > target.mtu + 14 + 4:  # mtu + hard_header_len + VLAN_HLEN
        return -errno.EMSGSIZE
    return 0


def _generic_redirect(dev: NetDevice, prog_id: int, skb: SkbBatch, map_id: int, map_type: int,
                      index: int, flags: int) -> None:
    """``xdp_do_generic_redirect`` of one skb."""
    host = dev.host
    if map_type == 0 and map_id == INT_MAX:  # bpf_redirect(ifindex)
        target = host.devices.get(index)
        err = _ok_fwd(target, skb)
        _fire(dev, prog_id, err, index, INT_MAX, 0)
        if not err and target is not None:
            target.xmit_skbs(_retarget(skb, target.ifindex))
        return
    m = map_by_id(map_id)
    if map_type in _DEVMAPS:
        from pyxdp.net.devmap import _all_entries, _devmap_entries
        if flags & BPF_F_BROADCAST:
            targets = [(i, p) for i, p in _all_entries(m)
                       if not (flags & BPF_F_EXCLUDE_INGRESS and i == dev.ifindex)]
            # dev_map_redirect_multi: a clone per target in walk order, the skb itself
            # to the last; the first target xdp_ok_fwd_dev refuses ends it, and its
            # error is the redirect's (the targets after it get nothing).
            err = 0
            for ifx, pid in targets:
                t = host.devices.get(ifx)
                err = _ok_fwd(t, skb)
                if err or t is None:
                    break
                _xmit_devmap(dev, t, pid, skb)
            # to_ifindex: the device of slot ``index``, which the helper looked up.
            _fire(dev, prog_id, err,
                  int(_devmap_entries(m, np.array([index], np.int64))[0][0]), map_id, index)
            return
        ifxs, pids = _devmap_entries(m, np.array([index], np.int64))
        to = int(ifxs[0])
        target = host.devices.get(to) if to else None
        err = _ok_fwd(target, skb)
        _fire(dev, prog_id, err, to, map_id, index)
        if not err and target is not None:
            _xmit_devmap(dev, target, int(pids[0]), skb)
        return
    if map_type == int(BpfMapType.BPF_MAP_TYPE_CPUMAP) and isinstance(m, CpuMap):
        if not m.qsize_at(index):
            _fire(dev, prog_id, -errno.EINVAL, 0, map_id, index)
            return
        _fire(dev, prog_id, _skb_to_cpumap(dev, m, index, skb), 0, map_id, index)
        return
    if map_type == int(BpfMapType.BPF_MAP_TYPE_XSKMAP):
        # AF_XDP (pyxdp.net.xsk): xsk_generic_rcv copies and publishes at once;
        # map id 0 is bpf_redirect_xsk (the socket registered on the skb's queue).
        from pyxdp.net.xsk import xsk_generic_redirect
        xs = host.xsk_socket(dev.ifindex, index) if map_id == 0 else \
            getattr(m, "socket_at", lambda i: None)(index)
        _fire(dev, prog_id, int(xsk_generic_redirect(dev, xs, skb)[0]), 0, map_id, index)
        return
    # No redirect helper prepared this XDP_REDIRECT.
    _fire(dev, prog_id, -errno.EBADRQC, 0, map_id, index)


def _retarget(skb: SkbBatch, ifindex: int) -> SkbBatch:
    return SkbBatch(skb.data, skb.length, np.full(len(skb), ifindex, np.int64), skb.queue,
                    skb.meta)


def _xmit_devmap(dev: NetDevice, target: NetDevice, prog_id: int, skb: SkbBatch) -> None:
    """``dev_map_generic_redirect``: the entry program on the skb, then xmit."""
    host = dev.host
    if prog_id:
        prog = host.program_by_id(prog_id)
        if prog is not None:
            from pyxdp.net.prog import run_xdp
            sysmem = host.memmap.system
            with host.lock:
                pages = sysmem.alloc_pages_bulk(1)
                if not len(pages):
                    return
                row = sysmem.local(pages)
                ln = int(skb.length[0])
                sysmem.pages[row[0], XDP_PACKET_HEADROOM:XDP_PACKET_HEADROOM + ln] = \
                    skb.data[0, :ln]
                f = Frames.make(pages, XDP_PACKET_HEADROOM, [ln])
                v = run_xdp(prog, host, f, ifindex=dev.ifindex, queue=0, ctx=dev.rx[0].ctx,
                            egress_ifindex=target.ifindex, faults=target.faults,
                            where=f"{target.name} devmap egress")
                skb = host.frames_to_skbs(f, target.ifindex)
                sysmem.put_pages(pages)
            if int(v.action[0]) != XdpAction.XDP_PASS:
                if int(v.action[0]) != XdpAction.XDP_DROP:
                    host.tracer.xdp_exception.fire(prog.id, int(v.action[0]), target.ifindex)
                return
    target.xmit_skbs(_retarget(skb, target.ifindex))


def _skb_to_cpumap(dev: NetDevice, m: CpuMap, cpu: int, skb: SkbBatch) -> int:
    """``cpu_map_generic_redirect``: the skb (as an order-0 frame) into the entry's ring;
    0 or -errno (ring full: ``-ENOSPC``, the skb freed)."""
    from pyxdp.net.cpumap import cpumap_runtime
    host = dev.host
    sysmem = host.memmap.system
    with host.lock:
        pages = sysmem.alloc_pages_bulk(1)
        if not len(pages):
            return -errno.ENOMEM
        row = sysmem.local(pages)
        ln = int(skb.length[0])
        sysmem.pages[row[0], XDP_PACKET_HEADROOM:XDP_PACKET_HEADROOM + ln] = skb.data[0, :ln]
        st = xdp_convert_buff_to_frame(pages, XDP_PACKET_HEADROOM, ln, 0,
                                       mem_type=MEM_TYPE_PAGE_ORDER0, memmap=host.memmap)
        if st[0] != 0:
            sysmem.put_pages(pages)
            return -errno.EOVERFLOW
        from pyxdp.net.xdp_mem import xdp_frames_set_dev_rx
        xdp_frames_set_dev_rx(pages, dev.ifindex, memmap=host.memmap)
        rt = cpumap_runtime(host, m, cpu)
    q = min(int(skb.queue[0]), len(dev.rx) - 1)
    err = rt.generic_enqueue(Frames(pages, np.array([XDP_PACKET_HEADROOM], np.int64),
                                    np.array([ln], np.int64), np.zeros(1, np.int64),
                                    np.full(1, KIND_FRAME, np.int64)), dev.rx[q].ctx.cpu)
    if err:
        with host.lock:
            sysmem.put_pages(pages)
    return err
