"""The cpumap datapath: ``kernel/bpf/cpumap.c`` (the storage is :mod:`pyxdp.maps.cpumap`).

A frame redirected into a cpumap entry goes to a per-poll bulk queue of 8
(``bq_enqueue``); a full bulk and ``xdp_do_flush`` move it into the entry's
``ptr_ring`` of ``qsize`` frames (``bq_flush_to_queue``: what does not fit is
dropped and returned, ``xdp_cpumap_enqueue`` fires with processed/drops) and
wake the entry's kthread. The kthread (:meth:`CpuMapRuntime.run_once`, in a
thread of its own with ``Host(cpumap_threads=True)``) takes up to 8 frames
at a time (``CPUMAP_BATCH``), runs the entry's program on them - XDP_PASS
keeps the frame, XDP_REDIRECT calls ``xdp_do_redirect`` (flushed after the
batch; a failed one counts as a drop), XDP_DROP and anything else (after a
warning; as in the kernel, no ``xdp_exception`` here) free it - builds skbs
of what passed and delivers them to the stack as one list
(``netif_receive_skb_list``; ``list_delivery=False`` gives the old
one-skb-at-a-time path for comparison), then fires ``xdp_cpumap_kthread``
with the program's pass/drop/redirect counts (all 0 without a program;
``sched`` 1 for a batch taken after the ring ran empty, when the kthread
would have slept).

The ring is a :class:`~pyxdp.net.ptr_ring.PtrRing`: one record in memory
that the NAPI poll loop (native or Python) produces into and the kthread
consumes from. The kthread runs as machine code (:func:`cpu_map_kthread_run`,
no GIL) when the entry has no program and the stack needs nothing but its
counters: it takes frames 8 at a time, delivers each batch to the stack's
demux as one list on its own CPU's counter rows, and hands the freed pages
to the entry's return ring (``ret``), which the next native poll of a queue
(under the return ring's consumer lock) puts back into their page pools'
rings (``page_pool_put_page`` without direct recycling, under each pool's
lock). The Python path (:meth:`CpuMapRuntime.run_once`
with a program, a stack callback, a tracer listening, or frames of another
page region than the batch's) is the reference over the same ring.

Threads: a worker runs its program (on the JIT: native code without the
GIL) concurrently with NAPI polls; page memory and tracepoint counters are
shared, so the Python worker takes the host's lock around frame returns, and
the native one touches only its ring, its return ring and its stack rows.
Producers of an entry's ring - native polls with threaded NAPI on several
CPUs without the host lock (each with bulk queues and ``xdp_cpumap_enqueue``
sums of its own, as the kernel's are per CPU), native or Python polls under
it - take the ring's producer lock (:mod:`pyxdp.net.ptr_ring`).
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pyxdp.maps.base import map_by_id
from pyxdp.maps.cpumap import CpuMap
from pyxdp.net.atomic import cpu_relax, spin_lock, spin_unlock, store_release64
from pyxdp.net.filter import (
    BulkQueues,
    _to_frames,
    _Verdicts,
    register_flush,
    register_redirect,
    xdp_do_flush,
    xdp_do_redirect,
)
from pyxdp.net.frames import CPU_MAP_BULK_SIZE, KIND_FRAGS, KIND_FRAME, Bulk, Frames
from pyxdp.net.napi_native import _run, _to_frame
from pyxdp.net.native import njit
from pyxdp.net.page_pool import PAGE_SIZE
from pyxdp.net.prog import MAX_FAULT_REPORTS, XdpProg, _warned, run_xdp
from pyxdp.net.ptr_ring import IDX_CONS, IDX_PROD, PtrRing, ring_consume, ring_count
from pyxdp.net.skbuff_native import SH, buf_copy_bits, buf_head_len
from pyxdp.net.stack import Mib, Rt, stack_rcv_one
from pyxdp.net.xdp import MAX_SKB_FRAGS, XDP_FLAGS_HAS_FRAGS
from pyxdp.net.xdp_mem import (
    XDP_FRAME_OFF_DEV_RX,
    XDP_FRAME_OFF_FLAGS,
    return_frame_no_direct,
    xdp_frames_have_frags,
    xdp_frames_set_dev_rx,
    xdp_return_frames,
    xdp_return_frames_rx_napi,
)
from pyxdp.uapi.bpf import BpfMapType, XdpAction
from pyxdp.vm.helpers import RunContext
from pyxdp.vm.jit.xdp import DriverIO

if TYPE_CHECKING:
    from pyxdp.net.netdev_types import DpDevice as NetDevice
    from pyxdp.net.netdev_types import DpHost as Host
    from pyxdp.net.netdev_types import DpRxQueue as NetdevRxQueue

__all__ = ["CPUMAP_BATCH", "CPU_MAP_BULK_SIZE", "KC", "CpuMapRuntime", "cpu_map_flush",
           "cpu_map_kthread_run", "cpumap_runtime"]

log = logging.getLogger(__name__)

CPUMAP_BATCH = 8
I64 = npt.NDArray[np.int64]


class KC:
    """Columns of a kthread's record (:attr:`CpuMapRuntime.kc`): the first seven are
    ``xdp_cpumap_kthread``'s sums, which the tracer reads in place."""

    EVENTS, PROCESSED, DROPS, SCHED, PASS, DROP, REDIRECT = range(7)
    IDLE = 7  # the ring was found empty: the next batch follows a sleep
    INFLIGHT = 8  # frames taken and not yet delivered
    STALL = 9  # why the native run stopped: 1 a frame of another region, 2 ret full,
    #            3 redirects for the Python path (NDEFER of them in the defer rows)
    NDEFER = 10
    FAULTS, FAULT_WORD, FAULT_PC, FAULT_ADDR = 11, 12, 13, 14
    INVALID_ACT = 15  # the first verdict that is no XDP action (its value + 1)
    SIZE = 16


KC_EVENTS, KC_PROCESSED, KC_SCHED = KC.EVENTS, KC.PROCESSED, KC.SCHED
KC_PASS, KC_DROP = KC.PASS, KC.DROP
KC_IDLE, KC_INFLIGHT, KC_STALL, KC_NDEFER = KC.IDLE, KC.INFLIGHT, KC.STALL, KC.NDEFER
KC_FAULTS, KC_FAULT_WORD, KC_FAULT_PC, KC_FAULT_ADDR = (KC.FAULTS, KC.FAULT_WORD, KC.FAULT_PC,
                                                         KC.FAULT_ADDR)
KC_INVALID_ACT = KC.INVALID_ACT
M_BATCHES = Mib.BATCHES
RT_LIST, RT_HFAM, RT_LOCK = Rt.LIST, Rt.HFAM, Rt.LOCK
DEV_RX_WORD = XDP_FRAME_OFF_DEV_RX // 8
FLAGS_WORD = XDP_FRAME_OFF_FLAGS // 4
FRAME_SZ_WORD = 8  # xdp_frame.frame_sz, as a 32-bit word of the header
HAS_FRAGS = XDP_FLAGS_HAS_FRAGS
XDP_DROP, XDP_PASS, XDP_REDIRECT = int(XdpAction.XDP_DROP), int(XdpAction.XDP_PASS), \
    int(XdpAction.XDP_REDIRECT)
DEFER_COLS = 9  # pfn, data, len, meta, dev_rx, map_id, map_type, index, flags


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _freed(r_slots, rprod, rsize, nret, pfn):  # type: ignore[no-untyped-def]
    """A page into the return ring (published with the batch); the new count."""
    r_slots[0, (rprod + nret) % rsize] = pfn
    return nret + 1


def _frame_kinds(host: Any, pfns: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The ring keeps no kind: multi-buffer frames are told by their header's flags."""
    return KIND_FRAME | np.where(xdp_frames_have_frags(pfns, memmap=host.memmap),
                                 KIND_FRAGS, 0).astype(np.int64)


@njit(cache=True, nogil=True, _nrt=False)
def cpu_map_kthread_run(q_slots, q_idx, r_slots, r_idx, kc, scratch, lin, region, stk, jit,  # type: ignore[no-untyped-def] # noqa: E501
                        defer, max_batches, spins, per_skb):
    """``cpu_map_kthread_run``: up to ``max_batches`` batches of 8 frames from the ring.
    With a program (``jit``'s entry address nonzero: ``cpu_map_bpf_prog_run_xdp``)
    each frame's verdict decides: PASS converts it back to an xdp_frame (a
    failure is a drop), DROP and anything else free it, REDIRECT is handed to
    the Python path (``defer``; the run stops after that batch). What passed is
    delivered to the stack as one list (``netif_receive_skb_list``; with
    ``per_skb`` one skb at a time, as before list delivery) and every freed
    page goes to the return ring. A multi-buffer frame (without a program; with one,
    the Python path runs it over its frags) is read whole into ``lin``
    (``skb_copy_bits`` of head and frags) for the stack; its head goes to the return
    ring, whose consumers free its frags then it (``xdp_return_frame``). With
    ``spins`` > 0 an empty ring is polled that many times before giving up (a
    kthread on its own thread).
    Stops early (``kc[STALL]``) at a frame outside this page region (or a
    multi-buffer one it cannot read there) or when the return ring has no room
    for a batch's pages. Returns the frames taken."""
    pages, w32, q64, addr_base, pfn_base = region
    mib = stk[0]
    route = stk[7]
    (fn, ctx_addr, desc, rows, d_off, d_len, d_meta, act, off_out, len_out, meta_out, status,
     pc_out, addr_out, red, ifx) = jit
    qsize = q_slots.shape[1]
    rsize = r_slots.shape[1]
    npages = pages.shape[0]
    done = 0
    idle = 0
    b = 0
    while b < max_batches:
        avail = ring_count(q_idx)
        if avail == 0:
            kc[KC_IDLE] = 1
            if idle >= spins:
                break
            idle += 1
            cpu_relax()
            continue
        idle = 0
        if rsize - ring_count(r_idx) < CPUMAP_BATCH:
            kc[KC_STALL] = 2
            break
        k = min(avail, CPUMAP_BATCH)
        cons = q_idx[IDX_CONS]
        for j in range(k):
            at = (cons + j) % qsize
            loc = q_slots[0, at] - pfn_base
            if loc < 0 or loc >= npages:
                k = j  # another region's frame: Python's
                break
            if w32[loc, FLAGS_WORD] & HAS_FRAGS:
                # A multi-buffer frame: here without a program, its frags in this region.
                if (fn != 0 or w32[loc, FRAME_SZ_WORD] != PAGE_SIZE
                        or buf_head_len(pages, pfn_base, loc, q_slots[1, at], SH,
                                        q_slots[2, at], len(lin)) < 0):
                    k = j
                    break
        if k == 0:
            kc[KC_STALL] = 1
            break
        kc[KC_INFLIGHT] = k  # before the ring shows them gone: backlog never reads 0 early
        ring_consume(q_slots, q_idx, scratch, k)
        sched = kc[KC_IDLE]
        kc[KC_IDLE] = 0
        rprod = r_idx[IDX_PROD]
        nret = 0
        npass = 0
        ndrop = 0
        nd = 0
        if fn != 0:
            for j in range(k):
                loc = scratch[0, j] - pfn_base
                rows[j] = loc
                d_off[j] = scratch[1, j]
                d_len[j] = scratch[2, j]
                d_meta[j] = scratch[3, j]
                ifx[j] = q64[loc, DEV_RX_WORD]
            _run(fn, ctx_addr, desc, d_len, k)
        # The CPU's kthread context is this entry's alone while it delivers the batch
        # (another entry's kthread of this CPU may be delivering: stack.context_lock).
        spin_lock(route, RT_LOCK)
        # The batch is one list (ip_list_rcv's route hint), or (per_skb) lists of one.
        route[RT_LIST] = 0 if per_skb else 1
        route[RT_HFAM] = 0
        for j in range(k):
            pfn = scratch[0, j]
            loc = pfn - pfn_base
            dev_rx = q64[loc, DEV_RX_WORD]
            data, length, meta = scratch[1, j], scratch[2, j], scratch[3, j]
            if fn != 0:
                if status[j] != 0:
                    if kc[KC_FAULTS] == 0:
                        kc[KC_FAULT_WORD] = status[j]
                        kc[KC_FAULT_PC] = pc_out[j]
                        kc[KC_FAULT_ADDR] = np.int64(addr_out[j])
                    kc[KC_FAULTS] += 1
                a = np.int64(act[j])
                if a == XDP_REDIRECT:
                    defer[nd, 0] = pfn
                    defer[nd, 1] = np.int64(off_out[j])
                    defer[nd, 2] = np.int64(len_out[j])
                    defer[nd, 3] = np.int64(meta_out[j])
                    defer[nd, 4] = dev_rx
                    for c in range(4):
                        defer[nd, 5 + c] = np.int64(red[j, c])
                    nd += 1
                    continue
                if a != XDP_PASS:
                    if a != XDP_DROP and kc[KC_INVALID_ACT] == 0:
                        kc[KC_INVALID_ACT] = a + 1
                    ndrop += 1
                    nret = _freed(r_slots, rprod, rsize, nret, pfn)
                    continue
                data = np.int64(off_out[j])
                length = np.int64(len_out[j])
                meta = np.int64(meta_out[j])
                # The buff the program left back into an xdp_frame; none: a drop.
                if not _to_frame(w32, q64, loc, data, length, meta, addr_base):
                    ndrop += 1
                    nret = _freed(r_slots, rprod, rsize, nret, pfn)
                    continue
                npass += 1
            if w32[loc, FLAGS_WORD] & HAS_FRAGS:  # the skb with its frags, read whole
                buf_copy_bits(pages, pfn_base, loc, data, SH, length, lin.ctypes.data,
                              len(lin))
                stack_rcv_one(lin, 0, length, dev_rx, stk)
            else:
                stack_rcv_one(pages[loc], data, length, dev_rx, stk)
            nret = _freed(r_slots, rprod, rsize, nret, pfn)
        if nret:
            store_release64(r_idx, IDX_PROD, rprod + nret)
        if nret - ndrop > 0:  # one netif_receive_skb_list, or (per_skb) one call per skb
            mib[M_BATCHES] += nret - ndrop if per_skb else 1
        route[RT_LIST] = 0
        spin_unlock(route, RT_LOCK)
        kc[KC_EVENTS] += 1
        kc[KC_PROCESSED] += k
        kc[KC_SCHED] += sched
        kc[KC_PASS] += npass
        kc[KC_DROP] += ndrop
        done += k
        b += 1
        if nd:  # still in flight until the Python path has redirected them
            kc[KC_NDEFER] = nd
            kc[KC_STALL] = 3
            store_release64(kc, KC_INFLIGHT, nd)
            break
        store_release64(kc, KC_INFLIGHT, 0)
    return done


class CpuMapRuntime:
    """``struct bpf_cpu_map_entry``: the ring and kthread of one cpumap slot."""

    def __init__(self, host: Host, m: CpuMap, cpu: int) -> None:
        self.host = host
        self.map = m
        self.cpu = cpu
        self.qsize = m.qsize_at(cpu)
        self.prog_id = int(m.entries[cpu, 1])
        self.queue = PtrRing(self.qsize)
        # Pages the native kthread freed, for their pool's NAPI context to recycle:
        # room for a full ring twice over plus a poll's worth in flight.
        self.ret = PtrRing(2 * self.qsize + 256, cols=1)
        self.kc = np.zeros(KC.SIZE, np.int64)
        self.kc[KC.IDLE] = 1
        self._scratch = np.zeros((4, CPUMAP_BATCH), np.int64)
        self._lin = np.zeros(PAGE_SIZE * (1 + MAX_SKB_FRAGS), np.uint8)  # a frags skb, whole
        self._defer = np.zeros((CPUMAP_BATCH, DEFER_COLS), np.int64)
        self._io = DriverIO(CPUMAP_BATCH, 0, 0)
        self.list_delivery = True
        self.py_processed = 0  # frames the Python path processed (the native ones: kc)
        # The native kthread's xdp_cpumap_kthread sums stay in kc, read by the tracer.
        self._source = _KthreadCounts(self)
        host.tracer.xdp_cpumap_kthread.add_source(self._source)
        self._py_inflight = 0  # frames the Python path took and has not finished with
        self._wake = threading.Event()
        self._drain_lock = threading.Lock()
        self._stop = False
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.ctx = RunContext(cpu=cpu, fib=host.env.fib)
        self.faults: list[str] = []
        if host.cpumap_threads:
            self._thread = threading.Thread(target=self._kthread, daemon=True,
                                            name=f"cpumap/{cpu}/map:{m.id}")
            self._thread.start()

    @property
    def backlog(self) -> int:
        """Frames queued or still being processed by the kthread."""
        return len(self.queue) + int(self.kc[KC.INFLIGHT]) + self._py_inflight

    @property
    def threaded(self) -> bool:
        """Its kthread runs on a thread of its own (not yet joined)."""
        return self._thread is not None

    @property
    def freed(self) -> bool:
        """Freed (:meth:`stop`): no longer its map's entry, its kthread joined (so that
        a caller of :meth:`drain` is the ring's only consumer)."""
        return self._stop and self._thread is None

    @property
    def inflight(self) -> int:
        return int(self.kc[KC.INFLIGHT]) + self._py_inflight

    def matches(self) -> bool:
        """Still the map's entry (same qsize and program)?"""
        return (self.map.qsize_at(self.cpu) == self.qsize
                and int(self.map.entries[self.cpu, 1]) == self.prog_id)

    # -- producer side (NAPI) ----------------------------------------------------------
    def enqueue(self, frames: Frames, bq: BulkQueues) -> None:
        key = (self.map.id, self.cpu)
        bulk = bq.cpu.get(key)
        if bulk is None:
            bulk = bq.cpu[key] = Bulk(CPU_MAP_BULK_SIZE)
        bulk.add(frames, lambda full: self.flush_to_queue(full, bq.from_cpu))

    def flush_to_queue(self, frames: Frames, from_cpu: int = 0) -> None:
        """``bq_flush_to_queue``: into the ring; what does not fit is returned."""
        n = len(frames)
        if not n:
            return
        # Under the ring's producer lock, which native polls without the host lock take.
        taken = self.queue.produce(np.stack([frames.pfn, frames.data, frames.length,
                                             frames.meta]))
        drops = n - taken
        if drops:
            xdp_return_frames_rx_napi(frames.pfn[taken:], memmap=self.host.memmap)
        self.host.tracer.xdp_cpumap_enqueue.fire(self.map.id, n, drops, self.cpu, cpu=from_cpu)
        self._wake.set()

    def generic_enqueue(self, frames: Frames, from_cpu: int = 0) -> npt.NDArray[np.int64]:
        """``cpu_map_generic_redirect`` of skbs, one after the other: each straight into
        the ring (no bulk), one ``xdp_cpumap_enqueue`` each - processed 1, or drops 1
        and ``-ENOSPC`` once the ring is full (the frame then stays the caller's to
        free); 0 or -errno per frame."""
        n = len(frames)
        took = self.queue.produce(np.stack([frames.pfn, frames.data, frames.length,
                                            frames.meta]))
        ok = (np.arange(n) < took).astype(np.int64)
        self.host.tracer.xdp_cpumap_enqueue.fire_batch(
            map_id=self.map.id, processed=ok, drops=1 - ok, to_cpu=self.cpu, cpu=from_cpu)
        if took:
            self._wake.set()
        return np.where(ok == 1, 0, -errno.ENOSPC).astype(np.int64)

    # -- the kthread -------------------------------------------------------------------
    def run_once(self, spins: int = 0) -> int:
        """One kthread iteration: natively, as many batches as the ring holds (or, with
        ``spins``, keeps polling an empty ring that long); else one batch of up to 8
        frames on the Python path. Returns how many frames it took."""
        if self._native_ok():
            n = self._run_native(spins)
            if n or not self.kc[KC.STALL]:
                return n
        return self._run_python_once()

    def _native_ok(self) -> bool:
        host = self.host
        if not (host.native and not host.tracer.listening
                and host.stack.native_ok):
            return False
        prog = host.program_by_id(self.prog_id) if self.prog_id else None
        return prog is None or prog.engine == "jit"

    def _run_native(self, spins: int) -> int:
        """:func:`cpu_map_kthread_run` over the page region of the frame at the head
        (with the entry's program: its engine for this CPU, driven natively)."""
        q = self.queue
        kc = self.kc
        kc[KC.STALL] = 0
        if not len(q):
            if not spins:
                kc[KC.IDLE] = 1
                return 0
            region = self._region
        else:
            region = self.host.memmap.find(int(q.slots[0, int(q.idx[IDX_CONS]) % q.size]))
            self._region = region
        if region is None or not hasattr(region, "qwords"):
            kc[KC.STALL] = 1
            return 0
        if self.ret.size - len(self.ret) < CPUMAP_BATCH:
            self.reclaim()
        host = self.host
        stack = host.stack
        row = stack.row(self.cpu, kthread=True)
        stk = stack.records(row)
        reg = (region.pages, region.words, region.qwords, region.addr_base, region.pfn_base)
        prog = host.program_by_id(self.prog_id) if self.prog_id else None
        if prog is None:
            n = int(cpu_map_kthread_run(q.slots, q.idx, self.ret.slots, self.ret.idx, kc,
                                        self._scratch, self._lin, reg, stk, _NO_JIT, self._defer,
                                        1 << 30, spins, not self.list_delivery))
        else:
            # One run of an engine at a time (two entries on one CPU may share it).
            engine = prog.engine_for(self.cpu)
            with self._prog_lock(engine), engine.driver(self.ctx, region.pages, self._io) \
                    as (fn, ctx_addr):
                io = self._io
                jit = (fn, ctx_addr, io.desc, io.rows, io.data_off, io.data_len, io.meta_len,
                       io.action, io.off_out, io.len_out, io.meta_out, io.status, io.pc,
                       io.addr, io.redirect, io.ifindex)
                n = int(cpu_map_kthread_run(q.slots, q.idx, self.ret.slots, self.ret.idx, kc,
                                            self._scratch, self._lin, reg, stk, jit, self._defer,
                                            1 << 30, 0, not self.list_delivery))
            self._report(prog, engine)
        kc[KC.INFLIGHT] = 0  # deferred redirects done: nothing in flight
        return n

    def _report(self, prog: Any, engine: Any) -> None:
        """After a native run with a program: its first fault, an invalid verdict's
        warning, and the redirects it left to the Python path."""
        kc = self.kc
        host = self.host
        if kc[KC.FAULTS]:
            if len(self.faults) < MAX_FAULT_REPORTS:
                f = prog._with_source(engine.render_fault(int(kc[KC.FAULT_WORD]),
                                                          int(kc[KC.FAULT_PC]),
                                                          int(kc[KC.FAULT_ADDR])))
                self.faults.append(f"cpumap/{self.cpu}: {prog.spec.name}: {f} -> XDP_ABORTED")
                log.warning("%s", self.faults[-1])
            kc[KC.FAULTS] = 0
        if kc[KC.INVALID_ACT]:
            if prog not in _warned:
                _warned.add(prog)
                log.warning("cpumap program %s returned %d: treated as a drop "
                            "(bpf_warn_invalid_xdp_action)", prog.spec.name,
                            int(kc[KC.INVALID_ACT]) - 1)
            kc[KC.INVALID_ACT] = 0
        nd = int(kc[KC.NDEFER])
        if nd:
            d = self._defer[:nd].copy()
            kc[KC.NDEFER] = 0
            frames = Frames(d[:, 0], d[:, 1], d[:, 2], d[:, 3], _frame_kinds(host, d[:, 0]))
            v = _Verdicts(np.full(nd, XDP_REDIRECT, np.int64), d[:, 5], d[:, 6], d[:, 7],
                          d[:, 8])
            with host.lock, return_frame_no_direct():
                failed = cpumap_redirect(host, d[:, 4], prog, frames, v,
                                         np.ones(nd, np.bool_), self.cpu)
            kc[KC.REDIRECT] += nd - failed
            kc[KC.DROP] += failed

    _region: Any = None

    @property
    def processed(self) -> int:
        """Frames the kthread took from the ring, on either path."""
        return self.py_processed + int(self.kc[KC.PROCESSED])

    def reclaim(self) -> None:
        """Pages the native kthread freed, back to their page pools (not directly: this
        is not their NAPI context)."""
        if not len(self.ret):
            return
        with self.host.lock:
            pfns = self.ret.consume(self.ret.size)[0]
            if len(pfns):
                with return_frame_no_direct():
                    xdp_return_frames(pfns, memmap=self.host.memmap)

    def _run_python_once(self) -> int:
        host = self.host
        with host.lock:
            # In flight before the ring shows the frames gone (as the native path's
            # kc[INFLIGHT]): run() reads backlog without the lock, and between the
            # take and this count it would see the entry idle and return early.
            self._py_inflight = CPUMAP_BATCH
            cols = self.queue.consume(CPUMAP_BATCH)
            n = int(cols.shape[1])
            self._py_inflight = n
        if not n:
            self.kc[KC.IDLE] = 1
            return 0
        frames = Frames(cols[0], cols[1], cols[2], cols[3], _frame_kinds(host, cols[0]))
        sched = int(self.kc[KC.IDLE])
        self.kc[KC.IDLE] = 0
        try:
            self._run(frames, sched)
        finally:
            self._py_inflight = 0
        return n

    def _run(self, frames: Frames, sched: int) -> None:
        host = self.host
        n = len(frames)
        passes = drops = redirects = 0
        prog = host.program_by_id(self.prog_id) if self.prog_id else None
        with host.lock:
            dev_rx = _dev_rx(host, frames)
        if prog is not None:
            # The program runs outside the lock (on the JIT, without the GIL too):
            # this is where a worker runs concurrently with the NAPI polls.
            with self._prog_lock(prog.vm):
                v = run_xdp(prog, host, frames, ifindex=dev_rx, queue=0, ctx=self.ctx,
                            faults=self.faults, where=f"cpumap/{self.cpu}")
            with host.lock, return_frame_no_direct():
                frames, passes, drops, redirects = dispatch_cpumap(host, dev_rx, prog,
                                                                   frames, v, self.cpu)
                dev_rx = _dev_rx(host, frames)
        # Without a program the kernel's stats stay zero (xdp_pass 0 too).
        if len(frames):
            with host.lock, return_frame_no_direct():
                batch = host.frames_to_skbs(frames, 0)
                batch.ifindex[:] = dev_rx
                from pyxdp.net.xdp_mem import xdp_return_frames
                xdp_return_frames(frames.pfn, memmap=host.memmap)
            if self.list_delivery:
                host.stack.netif_receive_skb_list(batch, self.cpu, kthread=True)
            else:
                host.stack.netif_receive_skb(batch, self.cpu, kthread=True)
        with host.lock:
            host.tracer.xdp_cpumap_kthread.fire(self.map.id, n, 0, sched, passes, drops,
                                                redirects, cpu=self.cpu)
            self.py_processed += n

    @staticmethod
    def _prog_lock(engine: object) -> threading.Lock:
        """One run of an engine at a time (two entries may share a program)."""
        with _LOCKS_GUARD:
            return _RUN_LOCKS.setdefault(id(engine), threading.Lock())

    def _kthread(self) -> None:
        try:
            while not self._stop:
                self._wake.clear()  # before looking: a wakeup from now on is kept
                # Natively, an empty ring is polled a while before sleeping (the
                # NAPI loop cannot wake a sleeper until its native call returns).
                if not self.run_once(spins=20000):
                    if self.kc[KC.STALL] == 2:  # the return ring is full: NAPI reclaims
                        time.sleep(0.0002)
                        continue
                    self._wake.wait(0.05)
        except BaseException as e:  # reported by stop(); a worker must not die silently
            self.error = e
            log.error("cpumap kthread %d of map %d failed: %s", self.cpu, self.map.id, e)

    def drain(self) -> None:
        """Deliver what is queued (one caller at a time: the ring's only consumer)."""
        with self._drain_lock:
            while self.run_once():
                self.reclaim()
            self.reclaim()

    def retire(self) -> None:
        """``__cpu_map_entry_replace``: no longer its map's entry, its kthread told to
        stop. It is joined and its ring drained later (:meth:`Host.reap_cpumaps
        <pyxdp.net.netdevice.Host.reap_cpumaps>`), as Linux frees the entry after an RCU
        grace period: the replacing caller may hold the host lock, which the kthread
        may be waiting for."""
        self._stop = True
        self._wake.set()

    def stop(self) -> None:
        """``__cpu_map_entry_free``: stop the kthread, deliver what is queued."""
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.drain()
        self.host.tracer.xdp_cpumap_kthread.remove_source(self._source)
        if self.error is not None:
            err, self.error = self.error, None
            raise err


class _KthreadCounts:
    """The tracer's view of a native kthread's ``xdp_cpumap_kthread`` sums in ``kc``
    (a :class:`~pyxdp.net.trace.CounterSource`)."""

    def __init__(self, rt: CpuMapRuntime) -> None:
        self.rt = rt

    def rows(self) -> list[tuple[tuple[int, ...], list[int]]]:
        sums = self.rt.kc[:KC.IDLE].tolist()
        return [((self.rt.map.id, self.rt.cpu), sums)] if sums[0] else []

    def reset(self) -> None:
        self.rt.py_processed += int(self.rt.kc[KC.PROCESSED])  # processed keeps counting
        self.rt.kc[:KC.IDLE] = 0


_RUN_LOCKS: dict[int, threading.Lock] = {}  # per engine (by id()), while it lives
_LOCKS_GUARD = threading.Lock()

# The jit tuple of a run without a program (entry address 0).
_NO_JIT = (0, 0, *(np.zeros(1, t) for t in (np.uint64, np.int64, np.uint32, np.uint32,
                                             np.uint32, np.uint32, np.uint32, np.uint32,
                                             np.uint32, np.uint32, np.uint32, np.uint64)),
           np.zeros((1, 4), np.uint64), np.zeros(1, np.uint32))


def _dev_rx(host: Host, frames: Frames) -> np.ndarray:
    """``xdpf->dev_rx`` of each frame (the device the skb will arrive on), read from the
    headers with one gather per page region."""
    from pyxdp.net.xdp_mem import XDP_FRAME_OFF_DEV_RX
    out = np.zeros(len(frames), np.int64)
    for mem, pos, rows in host.memmap.split(frames.pfn):
        out[pos] = mem.qwords[rows, XDP_FRAME_OFF_DEV_RX // 8]
    return out


def cpumap_runtime(host: Host, m: CpuMap, cpu: int) -> CpuMapRuntime:
    """The live entry for slot ``cpu`` (made, or remade after an update, on demand).
    Polls on several CPUs may ask at once: one of them makes it, under a lock of
    its own (not the host's, which the replaced entry's kthread may need to finish)."""
    key = (m.id, cpu)
    rt: CpuMapRuntime | None = host.cpumaps.get(key)
    if rt is not None and rt.matches():
        return rt
    with _ENTRIES_LOCK:
        rt = host.cpumaps.get(key)
        if rt is not None and not rt.matches():
            if rt.threaded:
                rt.retire()
                host.retire_cpumap(rt)
            else:
                rt.stop()
            rt = None
        if rt is None:
            rt = host.cpumaps[key] = CpuMapRuntime(host, m, cpu)
        return rt


_ENTRIES_LOCK = threading.Lock()


def cpu_map_flush(host: Host, bq: BulkQueues) -> None:
    """``__cpu_map_flush``: every partly filled cpumap bulk into its ring (the flush
    list's order: last queued first)."""
    for (map_id, cpu), bulk in reversed(list(bq.cpu.items())):
        if bulk.count:
            rt = host.cpumaps.get((map_id, cpu))
            frames = bulk.take()
            if rt is not None:
                rt.flush_to_queue(frames, bq.from_cpu)
    bq.cpu.clear()


# -----------------------------------------------------------------------------------
# The producer side (xdp_do_redirect's cpu_map_enqueue) and a cpumap program's verdicts
# -----------------------------------------------------------------------------------

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
        xdp_do_flush(host, bq)
    return failed


def _redirect_cpumap(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg,
                     m: object, frames: Frames, idx: I64, bq: BulkQueues) -> I64:
    """``cpu_map_enqueue``: to the entry's bulk queue of 8 (``bq_enqueue``)."""
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


def _cpumap_op(host: Host, dev: NetDevice, rq: NetdevRxQueue | None, prog: XdpProg,
               map_id: int, frames: Frames, idx: I64, flags: I64,
               bq: BulkQueues) -> tuple[I64, I64]:
    err = _redirect_cpumap(host, dev, rq, prog, map_by_id(map_id), frames, idx, bq)
    return err, np.zeros(len(frames), np.int64)


def _cpumap_flush_op(host: Host, bq: BulkQueues) -> None:
    if bq.cpu:
        cpu_map_flush(host, bq)


register_redirect([int(BpfMapType.BPF_MAP_TYPE_CPUMAP)], _cpumap_op)
register_flush(1, _cpumap_flush_op)
