"""cpumap redirects from NAPI polls on several CPUs without the host lock (threaded NAPI):
per-poll bulk queues of 8 flushed into each entry's ``ptr_ring`` under the ring's
producer lock, against the host-locked native path and the Python reference path:
the same deliveries, counters, tracepoint counts and page accounting."""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest

from pyxdp.net import napi
from pyxdp.net.netdevice import Host
from pyxdp.net.prog import jit_available
from pyxdp.net.source import TrafficGenerator
from pyxdp.net.trace import Tracer
from pyxdp.spec import MapSpec
from pyxdp.testing.programs import asm_collection, frames_by_payload, redirect_by_payload
from pyxdp.uapi.bpf import BpfMapType

pytestmark = pytest.mark.skipif(not jit_available(), reason="llvmlite is not installed: no JIT")

CPUMAP = MapSpec("cpu_map", int(BpfMapType.BPF_MAP_TYPE_CPUMAP), 4, 8, 4)
# Per slot (the payload's low 2 bits): CPU 0 and 1 rings that take everything, an empty
# slot 2 (-EINVAL: XDP_ABORTED), and a ring of 8 on CPU 3 that refuses most bulks.
QSIZE = {0: 2048, 1: 2048, 3: 8}


def _pool_balanced(pool: Any) -> None:
    """Every page the pool holds is in its alloc cache, its ring or in use, once."""
    cached, ringed, used = len(pool.cached_pages()), len(pool.ring_pages()), len(pool.in_use())
    assert (cached, ringed, used) == (pool.alloc_count, pool.ring_count, pool.nr_in_use)
    assert pool.inflight() == cached + ringed + used


def _run(mode: str, count: int, monkeypatch: pytest.MonkeyPatch, *,
         threads: bool = False) -> tuple[int, dict[str, Any]]:
    """A NIC's two rx queues (CPUs 0 and 1, threaded NAPI) redirect every frame by payload
    into :data:`QSIZE`'s cpumap entries; ``mode``: ``lockless`` (native polls without
    the host lock), ``locked`` (native polls under it) or ``python``. The frames
    handed to the Python dispatch, and what the run gave."""
    deferred = [0]
    orig = napi._dispatch_deferred

    def spy(host: Host, dev: Any, rq: Any, prog: Any, frames: Any, v: Any, bq: Any) -> None:
        deferred[0] += len(frames)
        orig(host, dev, rq, prog, frames, v, bq)

    monkeypatch.setattr(napi, "_dispatch_deferred", spy)
    if mode == "locked":
        monkeypatch.setattr(napi, "_parallel_ok", lambda prog: False)
    with Host(tracer=Tracer(), engine="jit", native=mode != "python", threaded_napi=True,
              cpumap_threads=threads, nr_cpus=4) as h:
        eth0 = h.add_device("eth0", rx_queues=2)
        coll = h.load(asm_collection(redirect_by_payload(0), [CPUMAP]))
        for cpu, qsize in QSIZE.items():
            coll.maps["cpu_map"][cpu] = struct.pack("<Ii", qsize, 0)
        eth0.attach_xdp(coll.programs["t"])
        assert napi._parallel_ok(coll.programs["t"].handle) == (mode != "locked")
        for rq in eth0.rx:
            rq.source = TrafficGenerator(packets=frames_by_payload(), count=count)
        h.run()
        assert {rq.ctx.cpu for rq in eth0.rx} == {0, 1}
        if mode != "python":  # both CPUs' first polls found one entry per slot, the host's
            for rq in eth0.rx:
                rts = rq.native.cpumap_args(h)[1]
                assert [h.cpumaps.get((rt.map.id, rt.cpu)) for rt in rts] == rts
        for rq in eth0.rx:
            _pool_balanced(rq.pool)
        system = h.memmap.system
        assert len(system.in_use()) == system.allocated - system.freed == 0
        h.check_memory()
        mid = coll.maps["cpu_map"].handle.id
        # xdp_cpumap_enqueue per (from CPU, to CPU): bulks and frames flushed; which
        # CPU's bulks the ring of 8 refused depends on the threads' order, their sum not.
        enq: dict[tuple[int, int], list[int]] = {}
        drops: dict[int, int] = {}
        for k, v in h.tracer.xdp_cpumap_enqueue.counters.items():
            assert k[0] == mid
            enq[k[1:]] = list(v)[:2]
            drops[k[2]] = drops.get(k[2], 0) + list(v)[2]
        out = {
            "stats": {d.name: d.stats.asdict() for d in h.devices.values()},
            "redirect": sorted((k[:2], list(v))
                               for k, v in h.tracer.xdp_redirect.counters.items()),
            "redirect_err": sorted((k[:2] + k[3:], list(v))
                                   for k, v in h.tracer.xdp_redirect_err.counters.items()),
            "enqueue": enq, "drops": drops,
            "kthread": sorted((k[1:], list(v)[1]) for k, v in
                              h.tracer.xdp_cpumap_kthread.counters.items()),
            "stack": (h.stack.per_device, h.stack.counters()),
            # Pages each pool holds: which CPU's bulk the ring of 8 took (and which
            # came straight back to its pool's cache) depends on the threads' order.
            "pools": sorted((rq.pool.alloc_count + rq.pool.ring_count + rq.pool.nr_in_use,
                             rq.pool.nr_in_use) for rq in eth0.rx),
        }
    monkeypatch.undo()
    return deferred[0], out


@pytest.mark.parametrize("count", [480])
def test_lockless_cpumap_redirects_native_is_python(count: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Two rx queues polled at once without the host lock redirect into cpumap entries
    natively (nothing handed to the Python dispatch): per-CPU bulk queues of 8, flushed
    into the entries' rings under their producer locks, xdp_cpumap_enqueue per CPU,
    the ring of 8's drops (returned to their pools), -EINVAL for the empty slot; the
    stack gets what the host-locked native path and the Python path deliver, every
    page pool and the system allocator balance exactly."""
    n_lockless, lockless = _run("lockless", count, monkeypatch)
    n_locked, locked = _run("locked", count, monkeypatch)
    _n_python, python = _run("python", count, monkeypatch)
    assert n_lockless == 0 and n_locked == 0
    assert lockless == locked == python
    enq, drops = lockless["enqueue"], lockless["drops"]
    # Both CPUs flushed bulks into the three live entries; the ring of 8 took 8 frames.
    assert {k[0] for k in enq} == {0, 1} and {k[1] for k in enq} == {0, 1, 3}
    assert sum(v[1] for k, v in enq.items() if k[1] == 3) - drops[3] == 8
    assert drops[0] == drops[1] == 0
    delivered = sum(lockless["stack"][0].values())
    assert delivered == 2 * count // 4 * 2 + 8


def test_lockless_cpumap_redirects_to_kthreads_keep_pages_exact(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same with the entries' kthreads on threads of their own (native, consuming
    while both polls produce, their freed pages coming back through the return rings,
    which both polls consume under the rings' consumer locks): every frame is
    delivered or dropped at a full ring, once; the pools balance exactly."""
    count = 2400
    n, out = _run("lockless", count, monkeypatch, threads=True)
    assert n == 0
    delivered = sum(out["stack"][0].values())
    assert delivered == 2 * count // 4 * 3 - sum(out["drops"].values())
    assert delivered >= 2 * count // 4 * 2


@pytest.mark.parametrize("native", [True, False], ids=["lockless", "python"])
def test_cpumap_entries_replaced_under_polls_deliver_what_they_took(native: bool) -> None:
    """A thread rewrites two cpumap entries (their qsize) while both queues' polls
    (lockless native ones, or the Python path's under the host lock) redirect into
    them and the kthreads run on threads of their own: each poll that sees the change
    remakes the entry once; the old kthread is told to stop and joined later, without
    the host lock held (it may be waiting for it: the Python path deadlocked here), as
    Linux frees a replaced entry after an RCU grace period; what a poll still queued
    on a replaced entry is delivered by the end of run(): the stack gets exactly what
    the rings took, every page comes back."""
    import threading
    import time

    with Host(tracer=Tracer(), engine="jit", native=native, threaded_napi=True,
              cpumap_threads=True, nr_cpus=4) as h:
        eth0 = h.add_device("eth0", rx_queues=2)
        coll = h.load(asm_collection(redirect_by_payload(0), [CPUMAP]))
        for cpu in (0, 1, 3):
            coll.maps["cpu_map"][cpu] = struct.pack("<Ii", 512, 0)
        eth0.attach_xdp(coll.programs["t"])
        for rq in eth0.rx:  # the entries made
            rq.source = TrafficGenerator(packets=frames_by_payload(), count=96)
        h.run()
        first = dict(h.cpumaps)
        for rq in eth0.rx:
            rq.source = TrafficGenerator(packets=frames_by_payload(), count=20000)
        stop = threading.Event()

        def rewrite() -> None:
            k = 1
            while not stop.is_set():
                k += 1  # slots 0, 1, 0, ...: each write a new qsize for its slot
                coll.maps["cpu_map"][k % 2] = struct.pack("<Ii", 256 + 256 * (k % 3), 0)
                time.sleep(0.001)

        t = threading.Thread(target=rewrite)
        t.start()
        try:
            h.run()
        finally:
            stop.set()
            t.join()
        h.run()
        assert any(h.cpumaps[k] is not rt for k, rt in first.items())  # entries replaced
        took = sum(v[1] - v[2] for v in h.tracer.xdp_cpumap_enqueue.counters.values())
        assert took > 0 and sum(h.stack.per_device.values()) == took
        for rq in eth0.rx:
            _pool_balanced(rq.pool)
        h.check_memory()


def test_run_waits_for_a_batch_the_kthread_took_on_the_python_path() -> None:
    """run() returns once every kthread delivered what it took. A batch the Python path
    takes from the ring counts as in flight from before the ring shows it gone (as the
    native path's does): else run() could look between the two, see the ring empty and
    nothing in flight, and return with up to 8 frames per entry undelivered - under
    load, the kthread waiting for the interpreter lock after its ring call, the
    replaced-entries test above saw the stack short of what the rings took. Here the
    kthread is held right after the take until run() has had ample time to return."""
    import threading

    with Host(tracer=Tracer(), engine="jit", native=True, threaded_napi=True,
              cpumap_threads=True, nr_cpus=4) as h:
        eth0 = h.add_device("eth0", rx_queues=1)
        coll = h.load(asm_collection(redirect_by_payload(0), [CPUMAP]))
        coll.maps["cpu_map"][0] = struct.pack("<Ii", 64, 0)
        eth0.attach_xdp(coll.programs["t"])
        got: list[int] = []
        h.stack.on_receive(lambda b: got.append(len(b)))  # the kthread's Python path
        slot0 = frames_by_payload()[0]
        eth0.rx[0].source = TrafficGenerator(packets=[slot0], count=1)
        h.run()  # the entry made
        assert got == [1]
        (rt,) = h.cpumaps.values()  # slot 0's, the only entry
        took, go = threading.Event(), threading.Event()
        consume = rt.queue.consume

        def held(n: int) -> Any:
            out = consume(n)
            if out.shape[1]:
                took.set()
                go.wait(10)
            return out

        def release() -> None:
            took.wait(10)
            time.sleep(0.3)
            go.set()

        rt.queue.consume = held  # type: ignore[method-assign]
        releaser = threading.Thread(target=release)
        releaser.start()
        try:
            eth0.rx[0].source = TrafficGenerator(packets=[slot0], count=5)
            h.run()
            assert took.is_set() and sum(got) == 1 + 5
        finally:
            go.set()
            releaser.join()


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_kthreads_of_one_cpu_deliver_one_list_at_a_time(native: bool) -> None:
    """A CPU's kthread context (its stack row: counters, route hint, key buffer) is one:
    the kernel never runs two kthreads of one CPU at once, pyxdp's are threads - a
    replaced entry draining beside its successor, entries of several maps. While
    another kthread of the CPU holds the context, an entry's kthread (native, or the
    Python path's list) waits with the batch it took, counting nothing; once the
    context is free it delivers all. Without the lock two kthreads of one CPU wrote
    its counters at once and lost increments (the replaced-entries test above saw
    the stack short of what the rings took)."""
    import threading

    from pyxdp.net.stack import context_lock, context_unlock

    with Host(tracer=Tracer(), engine="jit", native=True, nr_cpus=4) as h:
        eth0 = h.add_device("eth0", rx_queues=1)
        coll = h.load(asm_collection(redirect_by_payload(0), [CPUMAP]))
        coll.maps["cpu_map"][0] = struct.pack("<Ii", 64, 0)
        eth0.attach_xdp(coll.programs["t"])
        if not native:
            h.stack.on_receive(lambda b: None)  # lists to show: the Python path
        eth0.rx[0].source = TrafficGenerator(packets=[frames_by_payload()[0]], count=40)
        while eth0.rx[0].pending:
            h.poll()  # into the ring; inline kthreads run in run() only
        (rt,) = h.cpumaps.values()  # slot 0's, the only entry
        assert len(rt.queue) == 40 and rt._native_ok() == native
        route = h.stack.route[h.stack.row(0, kthread=True)]
        context_lock(route)  # another kthread of CPU 0, delivering
        t = threading.Thread(target=rt.drain)
        try:
            t.start()
            deadline = time.monotonic() + 10
            while rt.inflight != 8 and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(0.1)
            assert rt.inflight == 8 and len(rt.queue) == 32 and t.is_alive()
            assert h.stack.per_device == {}
        finally:
            context_unlock(route)
            t.join(10)
        assert h.stack.per_device == {eth0.ifindex: 40} and rt.inflight == 0 and not len(rt.queue)
