"""The devmap datapath: ``kernel/bpf/devmap.c`` (the storage is :mod:`pyxdp.maps.devmap`).

A frame redirected to a devmap or devmap_hash entry, or with ``bpf_redirect``
to an ifindex (``dev_xdp_enqueue``), is checked as ``xdp_ok_fwd_dev`` does
(the target up, ``ndo_xdp_xmit`` advertised, at most mtu + 14 + 4 bytes),
converted to an ``xdp_frame`` and queued in the poll's bulk queue of 16 for
its device (``bq_enqueue``: one per device, ``dev->xdp_bulkq``, whatever entry
the frame came through; the first frame since the poll's flush sets the
queue's ``dev_rx`` and program); a broadcast (``BPF_F_BROADCAST``,
``BPF_F_EXCLUDE_INGRESS``: ``dev_map_enqueue_multi``) clones the frame for
every target valid for it (``is_valid_dst``: its MTU takes the whole frame,
``NDO_XMIT_SG`` for a frags frame) but the last valid one, frame by frame in
the map's walk order; a clone's error (-EOPNOTSUPP for a frags frame, -ENOMEM)
fails the redirect, the clones made before it queued. A full
bulk and the poll's flush (``__dev_flush``) run ``bq_xmit_all``: the queue's
program over the bulk with ``egress_ifindex`` set (``dev_map_bpf_prog_run``: anything but
PASS/DROP fires ``xdp_exception`` and drops), then ``ndo_xdp_xmit``, then
``xdp_devmap_xmit``. These enqueue and flush operations are registered with
:mod:`pyxdp.net.filter`'s ``xdp_do_redirect`` and ``xdp_do_flush``.

The native poll loop (:mod:`pyxdp.net.napi_native`) does the same for NIC
and veth targets (the veth's ``ndo_xdp_xmit`` onto its peer's ring, from
:class:`FwdTable`'s veth rows) and for devmap_hash keys (the map's own hash
index); for devmap entries with a program it needs
(``dev_map_bpf_prog_run``) :class:`DevmapEgress`, the table of
those programs' JIT entries and their I/O rows, which
:func:`pyxdp.net.napi_native._bq_xmit_all` drives at ``bq_xmit_all`` time,
one bulk queue at a time, with ``egress_ifindex`` written into the entry's
descriptor before each run; :meth:`DevmapEgress.account` folds what the
runs counted (exceptions per egress device and verdict, the first fault and
invalid verdict) into the tracer, the warnings and the target's fault log
as the Python path (:func:`devmap_prog_run`) reports them.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from pyxdp.maps.base import map_by_id
from pyxdp.maps.devmap import DevMap, DevMapHash
from pyxdp.net.filter import (
    BPF_F_BROADCAST,
    BPF_F_EXCLUDE_INGRESS,
    BulkQueues,
    _conversion_status,
    _to_frames,
    buffs_to_frames,
    register_flush,
    register_redirect,
)
from pyxdp.net.frames import DEV_MAP_BULK_SIZE, Bulk, Frames
from pyxdp.net.prog import XdpProg, _warned, run_xdp
from pyxdp.net.xdp_mem import (
    xdp_return_frames_rx_napi,
    xdpf_clones,
)
from pyxdp.uapi.bpf import BpfMapType, XdpAction
from pyxdp.vm.helpers import RunContext
from pyxdp.vm.jit.abi import XDP_FIELDS
from pyxdp.vm.jit.xdp import DriverIO

if TYPE_CHECKING:
    from pyxdp.net.netdev_types import DpDevice as NetDevice
    from pyxdp.net.netdev_types import DpHost as Host
    from pyxdp.net.netdev_types import DpRxQueue as NetdevRxQueue

__all__ = ["FWD_OVERHEAD", "DevmapEgress", "FwdTable", "bq_xmit_all", "dev_map_flush",
           "devmap_prog_run"]

log = logging.getLogger(__name__)

I64 = npt.NDArray[np.int64]
# xdp_ok_fwd_dev: a frame may be mtu + hard_header_len + VLAN_HLEN bytes long.
FWD_OVERHEAD = 14 + 4
_DEVMAPS = (int(BpfMapType.BPF_MAP_TYPE_DEVMAP), int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH))
NDO_XMIT_SG = 1 << 6  # NETDEV_XDP_ACT_NDO_XMIT_SG


class _Prog(Protocol):
    id: int
    vm: Any
    spec: Any

    def _with_source(self, fault: Any) -> Any: ...


class _Target(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def faults(self) -> list[str]: ...


class FwdTable:
    """The host's devices as redirect targets of native code, per ifindex
    (``xdp_ok_fwd_dev``/``dev_xdp_enqueue``'s checks): ``ok`` 1 for a device the
    native loop transmits on (a NIC without a wire to feed, a veth without wire
    sinks), 2 for one only the Python path sends to (a NIC or veth with wire
    sinks), 0 for none (down, no ``ndo_xdp_xmit``); ``mtu`` the longest frame it
    takes; ``stats`` its counters' address; ``wire`` the address of its first
    transmit ring in native code (``NetDevice.xmit_wires``, written under its tx
    lock; 0: none, the NIC's transmit is a sink); ``veth`` a veth's
    ``veth_xdp_xmit`` target, its peer's ``xdp_ring`` (rx queue 0's ring: the
    address of its columns and of its cursor, its size) and the longest frame the
    peer takes (-1: the peer has no NAPI, ``-ENXIO``), all 0 for other devices.
    The host
    keeps one (``Host.fwd``) and remakes it only after a device changed
    (:attr:`stale`, set by the device model), so a native call builds nothing;
    ``none`` is the same table without targets (calls that redirect in Python),
    ``generic`` the targets of skbs (``xdp_do_generic_redirect`` and
    ``generic_xdp_tx``, which need no ``ndo_xdp_xmit``): ``ok`` 1 for an up NIC
    whose transmit is a sink (no wire sinks nor transmit rings; not ``lo``), 2
    for an up veth without wire sinks whose up peer has no XDP program (its
    ``veth_xmit`` hands the skb to the peer's stack) and for an up ``lo``
    without wire sinks nor a generic program (``loopback_xmit``: its own
    stack receives the skb; its "peer" is itself), 4 for one whose up peer
    has a native or generic program and no zero-copy socket on its first queue
    (``veth_xdp_rx``: the skb queued on that queue's ``xdp_ring`` in an order-0
    page, which that queue's poll copies into its pool; a peer with a generic
    program only: ``__netif_rx`` onto its backlog, which is that ring too) and
    for an up ``lo`` with a generic program (``loopback_xmit``'s ``netif_rx``: lo's backlog, its rx
    ring, whose poll runs the program), 3 for every other up device (the Python path's), 0 for
    one down or gone (``xdp_ok_fwd_dev`` refuses it); ``mtu`` is 0 for a gone
    one; ``stats`` every device's counters; in place of the wires a veth's
    peer's ifindex, and veth rows for the 4s. A veth's ``xdp_ring`` takes frames
    from any thread (its lock, :func:`pyxdp.net.frame_ring.ring_lock`), so threaded
    NAPI sends to veths as the tables say; a 4's skb goes there in an order-0 page
    of the system allocator (:data:`~pyxdp.net.frames.KIND_SKB`) and the peer
    queue's own poll copies it into its pool, so a call on any thread, with or
    without the host lock, takes the 4s natively. The last array of each
    table, ``err``, is the errno (positive) with which a redirect to a device
    that ``ok`` refuses (0) fails, as the Python path's checks give it:
    ``EINVAL`` for no device, ``EOPNOTSUPP`` for no ``ndo_xdp_xmit``
    (``__xdp_enqueue``), ``ENETDOWN`` for one down (``xdp_ok_fwd_dev``); 0
    where the native loop leaves the frame to the Python path (``none``); for a
    device ``ok`` takes (1, 2) it is ``EOPNOTSUPP`` when it lacks ``NDO_XMIT_SG``
    (``__xdp_enqueue`` refuses it a multi-buffer frame), else 0."""

    def __init__(self) -> None:
        self.stale = True
        # Threaded NAPI polls call in from several threads: one remakes the tables
        # while the others keep the previous (consistent) ones, and the per-CPU and
        # per-device caches are filled under the same lock, so none is made from
        # tables a remake is replacing.
        self._lock = threading.Lock()
        self.tables: tuple[Any, ...] = ()
        self.none: tuple[Any, ...] = ()
        self.generic: tuple[Any, ...] = ()
        self._unlocked: dict[tuple[int, bool], tuple[Any, ...]] = {}

    def unlocked_for(self, devices: Mapping[int, Any], cpu: int, *,
                     generic: bool = False) -> tuple[Any, ...]:
        """The targets of a call on CPU ``cpu`` that runs without the host lock (threaded
        NAPI): :attr:`tables` (``generic``: :attr:`generic`) with each device's
        counters in its row for that CPU (``NetDevice.cpu_stats``: one thread polls
        a CPU's queues, so no two threads count into one row). A veth's ``xdp_ring``
        takes frames from any thread under its lock, a device's native transmit ring
        under its tx lock
        (:func:`pyxdp.net.xsk_wire.wire_lock`)."""
        self.arrays(devices, generic=generic)
        t = self._unlocked.get((cpu, generic))
        if t is not None:
            return t
        with self._lock:
            ok, mtu, stats, wire, veth, err = self.generic if generic else self.tables
            u_ok = ok.copy()
            u_stats = np.zeros_like(stats)
            for i, d in devices.items():
                if i >= len(u_ok):
                    continue  # added after these tables: the next call remakes them
                if stats[i]:
                    u_stats[i] = d.cpu_stats[cpu].words.ctypes.data
            t = self._unlocked[(cpu, generic)] = (u_ok, mtu, u_stats, wire, veth, err)
        return t

    def arrays(self, devices: Mapping[int, Any], *,
               generic: bool = False) -> tuple[Any, ...]:
        """(ok, mtu, stats, wire, veth, err), remade first if a device changed."""
        # ``tables`` empty: the first remake is under way (it clears ``stale`` first).
        if self.stale or not self.tables:
            with self._lock:
                if self.stale or not self.tables:
                    self._remake(devices)
        return self.generic if generic else self.tables

    def _remake(self, devices: Mapping[int, Any]) -> None:
        """Build the tables from ``devices`` (under :attr:`_lock`)."""
        # The native loop's columns (it reads the veth table in place).
        from pyxdp.net.napi_native import (
            PT_COLS,
            VETH_COLS,
            VETH_CUR,
            VETH_MAX,
            VETH_PT,
            VETH_RING,
            VETH_SIZE,
            pool_row,
        )

        def veth_row(row: Any, peer: Any, backlog: bool = False) -> None:
            """``row`` of a veth table: the peer's first queue's xdp_ring and pool
            (``backlog``: an skb's target, whose ring is polled with or without
            NAPI, as a backlog is)."""
            rq = peer.rx[0]
            row[VETH_RING] = rq.ring.cols.ctypes.data
            row[VETH_CUR] = rq.ring.cur.words.ctypes.data
            row[VETH_SIZE] = rq.ring.size
            row[VETH_MAX] = peer.mtu + FWD_OVERHEAD if peer.napi_enabled or backlog else -1
            if not rq.pool.destroyed:
                row[VETH_PT:VETH_PT + PT_COLS] = pool_row(rq.pool)
        self.stale = False  # first: a change while remaking marks it again
        nif = max(devices) + 1
        ok = np.zeros(nif, np.uint8)
        mtu = np.zeros(nif, np.int64)
        stats = np.zeros(nif, np.int64)
        wire = np.zeros(nif, np.int64)
        veth = np.zeros((nif, VETH_COLS), np.int64)
        g_ok = np.zeros(nif, np.uint8)
        g_mtu = np.zeros(nif, np.int64)
        g_stats = np.zeros(nif, np.int64)
        g_peer = np.zeros(nif, np.int64)
        g_veth = np.zeros((nif, VETH_COLS), np.int64)
        # No device at an ifindex: EINVAL (dev_get_by_index, an empty entry).
        err = np.full(nif, errno.EINVAL, np.int64)
        g_err = np.full(nif, errno.EINVAL, np.int64)
        for i, d in devices.items():
            err[i] = ((0 if d.xdp_features & NDO_XMIT_SG else errno.EOPNOTSUPP)
                      if d.up and d.xdp_features & 4 else errno.ENETDOWN
                      if d.xdp_features & 4 else errno.EOPNOTSUPP)
            g_err[i] = 0 if d.up else errno.ENETDOWN
            g_stats[i] = d.stats.words.ctypes.data
            g_mtu[i] = d.mtu + FWD_OVERHEAD
            gp = d.peer if d.kind == "veth" else None
            if not d.up:
                pass  # 0: xdp_ok_fwd_dev refuses it
            elif d.kind == "nic" and not d.wire and not d.xmit_wires and i != 1:
                g_ok[i] = 1
            elif (gp is not None and gp.up and not d.wire and gp.xdp_prog is None
                    and gp.xdp_generic is None):
                g_ok[i] = 2
                g_peer[i] = gp.ifindex
            elif i == 1 and not d.wire and d.xdp_generic is None:
                # lo: loopback_xmit's netif_rx gives the skb to its own stack.
                g_ok[i] = 2
                g_peer[i] = i
            elif (gp is not None and gp.up and not d.wire
                    and (gp.xdp_prog is not None or gp.xdp_generic is not None)
                    and gp.rx[0].xsk is None and not gp.rx[0].pool.destroyed):
                g_ok[i] = 4
                g_peer[i] = gp.ifindex
                veth_row(g_veth[i], gp, True)
            elif i == 1 and not d.wire and not d.rx[0].pool.destroyed:
                # lo with a generic program: netif_rx onto its backlog (its rx ring).
                g_ok[i] = 4
                g_peer[i] = i
                veth_row(g_veth[i], d, True)
            else:
                g_ok[i] = 3
            if d.up and d.xdp_features & 4:  # NETDEV_XDP_ACT_NDO_XMIT
                peer = d.peer if d.kind == "veth" else None
                native = ((d.kind == "nic" and not d.wire and i != 1) or d.xmit_wires
                          or (peer is not None and not d.wire))
                ok[i] = 1 if native else 2
                mtu[i] = d.mtu + FWD_OVERHEAD
                stats[i] = d.stats.words.ctypes.data
                wire[i] = d.xmit_wires[0] if d.xmit_wires else 0
                if peer is not None:
                    veth_row(veth[i], peer)
        # ``tables`` last: a caller that finds it set finds the rest set too.
        self.generic = (g_ok, g_mtu, g_stats, g_peer, g_veth, g_err)
        self.none = (np.zeros(nif, np.uint8), mtu, stats, wire, veth,
                     np.zeros(nif, np.int64))
        # The caches of the previous tables go with them.
        self._unlocked = {}
        self.tables = (ok, mtu, stats, wire, veth, err)

class DevmapEgress:
    """The devmap programs one native call may run: a row per program with its JIT
    entry and context addresses, the descriptor and per-frame I/O of a bulk of
    ``DEV_MAP_BULK_SIZE`` (a :class:`~pyxdp.vm.jit.xdp.DriverIO` whose arrays are
    this table's rows), and what the runs count per program and egress device:
    ``exc[k, ifindex, act]`` (act 5: verdicts that are no XDP action) and
    ``fault[k, ifindex]`` = (faults, the first one's status word, pc and
    address, the first invalid verdict + 1)."""

    def __init__(self, progs: Sequence[_Prog], ifindex: int, nif: int,
                 engines: Sequence[Any]) -> None:
        k, n = len(progs), DEV_MAP_BULK_SIZE
        self.progs = list(progs)
        self.engines = list(engines)  # each program's engine the call drives
        self.ids = np.array([p.id for p in progs], np.int64)
        self.fn = np.zeros(k, np.int64)
        self.ctx = np.zeros(k, np.int64)
        self.desc = np.zeros((k, len(XDP_FIELDS)), np.uint64)
        self.rows = np.zeros((k, n), np.int64)
        u = {name: np.zeros((k, n), np.uint32)
             for name in ("data_off", "data_len", "meta_len", "action", "off_out", "len_out",
                          "meta_out", "status", "pc")}
        self.addr = np.zeros((k, n), np.uint64)
        self.redirect = np.zeros((k, n, 4), np.uint64)
        self.sent = np.zeros((k, n), np.int64)  # scratch: the rows a bulk sends
        # Scratch: each bulk position's (verdict, data, len, meta) when the bulk runs
        # in two batches (page pool pages, then clones in order-0 pages, or the other
        # way round).
        self.res = np.zeros((k, n, 4), np.int64)
        self.fault = np.zeros((k, nif, 5), np.int64)
        self.exc = np.zeros((k, nif, 6), np.int64)
        self.ios: list[DriverIO] = []
        for i in range(k):
            # ingress_ifindex is xdpf->dev_rx (this device), rx_queue_index 0.
            io = DriverIO(n, ifindex, 0)
            io.desc, io.rows, io.addr, io.redirect = (self.desc[i], self.rows[i], self.addr[i],
                                                      self.redirect[i])
            for name, arr in u.items():
                setattr(io, name, arr[i])
            self.ios.append(io)
        # The table as native_polls takes it (the arrays are used in place).
        self.args = (self.ids, self.fn, self.ctx, self.desc, self.rows, u["data_off"],
                     u["data_len"], u["meta_len"], u["action"], u["off_out"], u["len_out"],
                     u["meta_out"], u["status"], u["pc"], self.addr, self.exc, self.fault,
                     self.sent, self.res)

    def clear(self) -> None:
        """After :meth:`account`: the fault reports back to zero for the next call (the
        exception counts and the first invalid verdict stay: the tracer reads them
        in place, :meth:`exception_rows`)."""
        if self.fault[:, :, :4].any():
            self.fault[:, :, :4] = 0

    def exception_rows(self) -> list[tuple[tuple[int, ...], list[int]]]:
        """``xdp_exception`` counts as the tracer keys them: ((ifindex, act), [events])."""
        rows: list[tuple[tuple[int, ...], list[int]]] = []
        for k, ifx in zip(*np.nonzero(self.exc.any(axis=2)), strict=True):
            exc = self.exc[k, ifx]
            bad = int(self.fault[k, ifx, 4]) - 1
            for act in np.flatnonzero(exc).tolist():
                value = bad if act == 5 else act
                rows.append(((int(ifx), value & 0xFFFF_FFFF), [int(exc[act])]))
        return rows

    @contextmanager
    def driven(self, ctx: RunContext, pages: npt.NDArray[np.uint8],
               others: Sequence[npt.NDArray[np.uint8]]) -> Iterator[None]:
        """Every program's engine driven over ``pages`` (the queue's page pool) for the
        body of a native call (:meth:`XdpJit.driver`), and over ``others`` for bulks
        native code points there: the system allocator's pages (``xdpf_clone``'s and
        zero-copy frames' order-0 pages) and the page pools of xdp_frames other
        devices queued on a veth (bulk entries tagged with their memory)."""
        with ExitStack() as stack:
            for i, e in enumerate(self.engines):
                fn, ctx_addr = stack.enter_context(e.driver(ctx, pages, self.ios[i], others))
                self.fn[i], self.ctx[i] = fn, ctx_addr
            yield

    def account(self, devices: Mapping[int, _Target], warned: Any, max_faults: int) -> None:
        """What the call's egress runs leave for Python: warnings and fault reports."""
        if not len(self.progs):
            return
        for k, ifx in zip(*np.nonzero(self.exc.any(axis=2) | (self.fault[:, :, 0] > 0)),
                          strict=True):
            p = self.progs[k]
            exc = self.exc[k, ifx]
            f = self.fault[k, ifx]
            bad = int(f[4]) - 1
            first = next((a for a in (3, 4) if exc[a]), bad if bad >= 0 else None)
            if first is not None and p not in warned:
                warned.add(p)
                log.warning("devmap program %s returned %d: only XDP_PASS and XDP_DROP are "
                            "allowed there (bpf_warn_invalid_xdp_action)", p.spec.name, first)
            target = devices.get(int(ifx))
            if f[0] and target is not None and len(target.faults) < max_faults:
                fault = p._with_source(self.engines[k].render_fault(int(f[1]), int(f[2]),
                                                                    int(f[3])))
                target.faults.append(f"{target.name} devmap egress: {p.spec.name}: {fault} "
                                     f"-> XDP_ABORTED")
                log.warning("%s", target.faults[-1])


@dataclass
class _DevBulk:
    """``struct xdp_dev_bulk_queue``: a poll's frames for one device, with the ingress
    device and the devmap program its first frame set."""

    dev_rx: int
    prog_id: int
    bulk: Bulk = field(default_factory=lambda: Bulk(DEV_MAP_BULK_SIZE))


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
        else:
            if not d.xdp_features & NDO_XMIT_SG:
                # A multi-buffer frame needs a target that transmits frags.
                err[sel & frames.has_frags] = -errno.EOPNOTSUPP
            if not d.up:
                err[sel & (err == 0)] = -errno.ENETDOWN
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
    # Each device's frames in frame order, the devices in the order they first come
    # (the order bq_enqueue puts their queues on the flush list).
    for t in _first_seen(t_ok).tolist() if len(conv) else []:
        sel = np.flatnonzero(t_ok == t)
        _bq_enqueue(host, dev, bq, int(t), int(p_ok[sel[0]]), conv.select(sel))
    return err


def _first_seen(values: I64) -> I64:
    """The distinct ``values`` in the order they first occur."""
    uniq, first = np.unique(values, return_index=True)
    return uniq[np.argsort(first)]


def _bq_enqueue(host: Host, dev: NetDevice, bq: BulkQueues, ifindex: int, prog_id: int,
                frames: Frames) -> None:
    """``bq_enqueue``: the device's one bulk queue of the poll; the first frame queued
    since the last flush sets its ``dev_rx`` and program (``prog_id``, that frame's
    entry's), which the whole bulk runs, whatever entry the later frames came
    through."""
    q = bq.dev.get(ifindex)
    if q is None:
        q = bq.dev[ifindex] = _DevBulk(dev.ifindex, prog_id)
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
            slot = m.slot_of(int(k))
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
            slot = m.slot_of(int.from_bytes(key, "little"))
            assert slot is not None
            out.append((int(m.entries[slot, 0]), int(m.entries[slot, 1])))
        return out
    raise TypeError("not a device map")


def _broadcast(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg,
               m: object, frames: Frames, flags: I64, bq: BulkQueues) -> I64:
    """``dev_map_enqueue_multi``: a copy to every entry valid for the frame
    (``is_valid_dst``: up, ``ndo_xdp_xmit``, the frame's full length within its MTU,
    ``NDO_XMIT_SG`` for a frags frame; not the ingress device with
    ``BPF_F_EXCLUDE_INGRESS``), clones for all but the last valid one. A clone's
    error (``-EOPNOTSUPP`` for a frags frame, ``-ENOMEM``) is the frame's: the
    walk stops, the frame is freed."""
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
        at_sel = sel  # the converted frames' rows
        if failed:
            st = _conversion_status(host, f, conv)
            err[sel[st != 0]] = -errno.EOVERFLOW
            at_sel = sel[st == 0]
        # is_valid_dst per frame and target: the MTU on the frame's full length,
        # NDO_XMIT_SG for a frags frame.
        valid = np.zeros((len(targets), len(conv)), bool)
        for k, (ifindex, _) in enumerate(targets):
            valid[k] = conv.length <= host.devices[ifindex].mtu + FWD_OVERHEAD
            if not host.devices[ifindex].xdp_features & NDO_XMIT_SG:
                valid[k] &= ~conv.has_frags
        # The last valid target gets the frame itself, each earlier one a clone
        # (dev_map_enqueue_clone); a clone's error stops the frame's walk there:
        # the copies queued stay, the frame is not queued, xdp_do_redirect fails.
        later = np.flip(np.cumsum(np.flip(valid, 0), 0), 0) - valid
        active, dead = np.ones(len(conv), bool), np.zeros(len(conv), bool)
        copies: list[tuple[int, int, Frames, I64]] = []
        pos = np.arange(len(conv), dtype=np.int64)
        for k, (ifindex, prog_id) in enumerate(targets):
            want = valid[k] & active & (later[k] > 0)
            at = pos[want]
            pfns, status = xdpf_clones(conv.pfn[want], memmap=host.memmap)
            bad = status != 0
            if bad.any():
                err[at_sel[at[bad]]] = status[bad]
            good = ~bad
            last = valid[k] & active & (later[k] == 0)
            out = Frames.concat([Frames(pfns[good], conv.data[want][good],
                                        conv.length[want][good], conv.meta[want][good],
                                        conv.kind[want][good]), conv.select(last)])
            key = np.concatenate([at[good], pos[last]])
            order = np.argsort(key, kind="stable")
            copies.append((ifindex, prog_id, out.select(order),
                           key[order] * len(targets) + k))
            active &= ~last
            active[at[bad]] = False
            dead[at[bad]] = True
        # Failed frames and those with no valid target: freed (the latter a success).
        if (active | dead).any():
            xdp_return_frames_rx_napi(conv.pfn[active | dead], memmap=host.memmap)
        # One bulk queue per device, as bq_enqueue keeps them: two entries naming one
        # device put their copies into it in walk order.
        for ifindex in _first_seen(np.array([c[0] for c in copies], np.int64)).tolist():
            mine = [c for c in copies if c[0] == ifindex and len(c[2])]
            if not mine:
                continue
            order = np.argsort(np.concatenate([c[3] for c in mine]))
            progs = np.concatenate([np.full(len(c[2]), c[1], np.int64) for c in mine])
            _bq_enqueue(host, dev, bq, ifindex, int(progs[order[0]]),
                        Frames.concat([c[2] for c in mine]).select(order))
    return err


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
        # xdp_update_frame_from_buff: the program may have moved the edges; a
        # multi-buffer frame's are its head's (its frags and flag stay), whether the
        # entry program is frags-aware or not (a devmap_hash's entries need not agree
        # with the redirecting program).
        status = np.zeros(len(out), np.int32)
        for mem, pos, _rows in host.memmap.split(out.pfn):
            status[pos] = buffs_to_frames(host, out, pos, mem.kind)
        if (status != 0).any():
            xdp_return_frames_rx_napi(out.pfn[status != 0], memmap=host.memmap)
            out = out.select(status == 0)
    return out, len(frames) - len(out)


def dev_map_flush(host: Host, bq: BulkQueues) -> None:
    """``__dev_flush``: every devmap bulk queue of the poll (last queued first)."""
    for ifindex, q in reversed(list(bq.dev.items())):
        if q.bulk.count:
            bq_xmit_all(host, ifindex, q, q.bulk.take())
    bq.dev.clear()  # off the flush list: the next frame sets dev_rx and the program again


def _devmap_op(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg,
               map_id: int, frames: Frames, idx: I64, flags: I64,
               bq: BulkQueues) -> tuple[I64, I64]:
    return _redirect_devmap(host, dev, rq, prog, map_by_id(map_id), frames, idx, flags, bq)


def _ifindex_op(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg,
                map_id: int, frames: Frames, idx: I64, flags: I64,
                bq: BulkQueues) -> tuple[I64, I64]:
    return _redirect_ifindex(host, dev, rq, prog, frames, idx, bq)


register_redirect(_DEVMAPS, _devmap_op)
register_redirect([int(BpfMapType.BPF_MAP_TYPE_UNSPEC)], _ifindex_op)  # map id INT_MAX
register_flush(0, dev_map_flush)
