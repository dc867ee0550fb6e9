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

Threads: a worker runs its program (on the JIT: native code without the
GIL) concurrently with NAPI polls; page memory and tracepoint counters are
shared, so the worker takes the host's lock around frame returns and ring
operations, as the kernel's ``ptr_ring`` and page pool ring take theirs.
"""

from __future__ import annotations

import errno
import logging
import threading
from typing import TYPE_CHECKING

import numpy as np

from pyxdp.maps.cpumap import CpuMap
from pyxdp.net.frames import Bulk, FrameRing, Frames
from pyxdp.net.xdp_mem import return_frame_no_direct, xdp_return_frames_rx_napi
from pyxdp.vm.helpers import RunContext

if TYPE_CHECKING:
    from pyxdp.net.napi import BulkQueues
    from pyxdp.net.netdevice import Host

__all__ = ["CPUMAP_BATCH", "CPU_MAP_BULK_SIZE", "CpuMapRuntime", "cpu_map_flush",
           "cpumap_runtime"]

log = logging.getLogger(__name__)

CPU_MAP_BULK_SIZE = 8
CPUMAP_BATCH = 8
_RUN_LOCKS: dict[int, threading.Lock] = {}  # per program (by id()), while it lives
_LOCKS_GUARD = threading.Lock()


class CpuMapRuntime:
    """``struct bpf_cpu_map_entry``: the ring and kthread of one cpumap slot."""

    def __init__(self, host: Host, m: CpuMap, cpu: int) -> None:
        self.host = host
        self.map = m
        self.cpu = cpu
        self.qsize = m.qsize_at(cpu)
        self.prog_id = int(m.entries[cpu, 1])
        self.queue = FrameRing(self.qsize)
        self.list_delivery = True
        self.processed = 0
        self.inflight = 0  # frames a run_once took and has not finished with
        self._idle = True  # the ring was found empty: the next batch follows a sleep
        self._wake = threading.Event()
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
        return len(self.queue) + self.inflight

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
        with self.host.lock:
            taken = self.queue.produce(frames)
        drops = n - taken
        if drops:
            xdp_return_frames_rx_napi(frames.pfn[taken:], memmap=self.host.memmap)
        self.host.tracer.xdp_cpumap_enqueue.fire(self.map.id, n, drops, self.cpu, cpu=from_cpu)
        self._wake.set()

    def generic_enqueue(self, frames: Frames, from_cpu: int = 0) -> int:
        """``cpu_map_generic_redirect``: one skb straight into the ring (no bulk);
        ``xdp_cpumap_enqueue`` with processed 1, or drops 1 and ``-ENOSPC`` when the
        ring is full (the frame then stays the caller's to free)."""
        with self.host.lock:
            ok = self.queue.produce(frames) == len(frames)
        self.host.tracer.xdp_cpumap_enqueue.fire(self.map.id, int(ok), int(not ok), self.cpu,
                                                 cpu=from_cpu)
        if not ok:
            return -errno.ENOSPC
        self._wake.set()
        return 0

    # -- the kthread -------------------------------------------------------------------
    def run_once(self) -> int:
        """One kthread iteration: up to 8 frames; returns how many it took."""
        host = self.host
        with host.lock:
            frames = self.queue.consume(CPUMAP_BATCH)
            n = len(frames)
            self.inflight = n
        if not n:
            self._idle = True
            return 0
        sched = int(self._idle)
        self._idle = False
        try:
            self._run(frames, sched)
        finally:
            self.inflight = 0
        return n

    def _run(self, frames: Frames, sched: int) -> None:
        host = self.host
        n = len(frames)
        passes = drops = redirects = 0
        prog = host.program_by_id(self.prog_id) if self.prog_id else None
        with host.lock:
            dev_rx = _dev_rx(host, frames)
        if prog is not None:
            from pyxdp.net.napi import dispatch_cpumap, run_xdp
            # The program runs outside the lock (on the JIT, without the GIL too):
            # this is where a worker runs concurrently with the NAPI polls.
            with self._prog_lock(prog):
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
                host.stack.netif_receive_skb_list(batch, self.cpu)
            else:
                host.stack.netif_receive_skb(batch, self.cpu)
        with host.lock:
            host.tracer.xdp_cpumap_kthread.fire(self.map.id, n, 0, sched, passes, drops,
                                                redirects, cpu=self.cpu)
            self.processed += n

    @staticmethod
    def _prog_lock(prog: object) -> threading.Lock:
        """One run of a program at a time (two entries may share a program)."""
        with _LOCKS_GUARD:
            return _RUN_LOCKS.setdefault(id(prog), threading.Lock())

    def _kthread(self) -> None:
        try:
            while not self._stop:
                self._wake.clear()  # before looking: a wakeup from now on is kept
                if not self.run_once():
                    self._wake.wait(0.05)
        except BaseException as e:  # reported by stop(); a worker must not die silently
            self.error = e
            log.error("cpumap kthread %d of map %d failed: %s", self.cpu, self.map.id, e)

    def drain(self) -> None:
        while self.run_once():
            pass

    def stop(self) -> None:
        """``__cpu_map_entry_free``: stop the kthread, deliver what is queued."""
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.drain()
        if self.error is not None:
            err, self.error = self.error, None
            raise err


def _dev_rx(host: Host, frames: Frames) -> np.ndarray:
    """``xdpf->dev_rx`` of each frame (the device the skb will arrive on), read from the
    headers with one gather per page region."""
    from pyxdp.net.xdp_mem import XDP_FRAME_OFF_DEV_RX
    out = np.zeros(len(frames), np.int64)
    for mem, pos, rows in host.memmap.split(frames.pfn):
        out[pos] = mem.qwords[rows, XDP_FRAME_OFF_DEV_RX // 8]
    return out


def cpumap_runtime(host: Host, m: CpuMap, cpu: int) -> CpuMapRuntime:
    """The live entry for slot ``cpu`` (made, or remade after an update, on demand)."""
    key = (m.id, cpu)
    rt = host.cpumaps.get(key)
    if rt is not None and not rt.matches():
        rt.stop()
        rt = None
    if rt is None:
        rt = host.cpumaps[key] = CpuMapRuntime(host, m, cpu)
    return rt


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

