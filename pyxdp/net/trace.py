"""pyxdp's own XDP tracepoints: the events of ``include/trace/events/xdp.h``, fired in user space.

The kernel's XDP code calls ``trace_xdp_exception()``, ``trace_xdp_redirect()``
and friends at the points :mod:`pyxdp.uapi.xdp_trace` documents
(``net/core/dev.c``, ``net/core/filter.c``, ``kernel/bpf/devmap.c``,
``kernel/bpf/cpumap.c``, ``net/core/xdp.c``). pyxdp's datapath fires the same
events here, with the same fields, and a listener sees the same records and
the same trace_pipe text as :mod:`pyxdp.kernel.tracefs` reads from the kernel.

Firing must cost next to nothing when nobody listens (a kernel tracepoint
is a patched-out branch). So each event is a :class:`Tracepoint` that
always does only this: add to a few integer counters aggregated per key
(per ``(ifindex, act)``, per ``(map_id, cpu)``...), one dict lookup and a few
additions. Only when someone subscribed does firing build records, render
text and call back. Batches fire once: :meth:`Tracepoint.fire_batch` takes
numpy columns (one element per event) and :meth:`Tracepoint.fire_counts` a
histogram (e.g. how many packets of a batch got each action).

Typical use::

    from pyxdp.net import trace

    trace.xdp_exception.fire(prog_id=7, act=0, ifindex=2)        # counts only
    with trace.subscribe(["xdp_exception"], print):               # now also events
        trace.xdp_exception.fire_counts("act", counts, prog_id=7, ifindex=2)
    session = trace.TraceSession()
    ...                                                           # datapath runs
    print(session.sample().rate("xdp_exception"))               # events/s

The module-level tracepoints belong to the process-wide :data:`TRACER`; a
separate :class:`Tracer` keeps its own counters (the ``monitor`` command
feeds kernel events read from tracefs into one, through :meth:`Tracer.ingest`).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Generic, Protocol, Self, TypeVar

import numpy as np
import numpy.typing as npt

from pyxdp.args import checked, short
from pyxdp.errors import BadArgument
from pyxdp.smp import current_cpu
from pyxdp.uapi.bpf import BpfMapType, XdpAction
from pyxdp.uapi.xdp_trace import (
    DEFINITIONS,
    BpfXdpLinkAttachFailed,
    EventDef,
    MemConnect,
    MemDisconnect,
    TraceEvent,
    TraceRecord,
    XdpBulkTx,
    XdpCpumapEnqueue,
    XdpCpumapKthread,
    XdpDevmapXmit,
    XdpException,
    XdpRedirect,
    XdpRedirectErr,
    definition_of,
)

__all__ = [
    "TRACER",
    "EventQueue",
    "Interval",
    "Snapshot",
    "Subscription",
    "TraceEvent",
    "TraceSession",
    "Tracepoint",
    "Tracer",
    "bpf_xdp_link_attach_failed",
    "listen",
    "mem_connect",
    "mem_disconnect",
    "redirect_target",
    "subscribe",
    "xdp_bulk_tx",
    "xdp_cpumap_enqueue",
    "xdp_cpumap_kthread",
    "xdp_devmap_xmit",
    "xdp_exception",
    "xdp_redirect",
    "xdp_redirect_err",
]

R = TypeVar("R", bound=tuple[Any, ...])
Key = tuple[int, ...]
Callback = Callable[[TraceEvent], None]
IntOrArray = int | npt.NDArray[np.integer[Any]]

_XDP_TX: Final = int(XdpAction.XDP_TX)
_XDP_REDIRECT: Final = int(XdpAction.XDP_REDIRECT)
_INT_MAX: Final = 0x7FFF_FFFF
_KNOWN_ACTIONS: Final = tuple(int(a) for a in XdpAction)


# --------------------------------------------------------------------------
# Event context (only computed when someone listens)
# --------------------------------------------------------------------------

def _comm() -> str:
    # The task name the kernel would show: the thread's comm (15 bytes).
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm") as f:
            return f.read().strip()
    except OSError:
        return threading.current_thread().name[:15]


_COMMS: dict[int, str] = {}


def _context() -> tuple[int, int, int, str]:
    tid = threading.get_native_id()
    comm = _COMMS.get(tid)
    if comm is None:
        comm = _COMMS[tid] = _comm()
    return time.monotonic_ns(), current_cpu(), tid, comm


# --------------------------------------------------------------------------
# Subscriptions
# --------------------------------------------------------------------------

class Subscription:
    """A callback attached to some tracepoints; :meth:`close` (or ``with``) detaches it."""

    def __init__(self, tracepoints: Iterable[Tracepoint[Any]], callback: Callback) -> None:
        self.callback = callback
        self.error: Exception | None = None  # what the callback raised (then detached)
        self._tracepoints = list(tracepoints)
        for tp in self._tracepoints:
            tp._subs.append(self)

    @property
    def events(self) -> tuple[str, ...]:
        return tuple(tp.name for tp in self._tracepoints)

    def close(self) -> None:
        for tp in self._tracepoints:
            if self in tp._subs:
                tp._subs.remove(self)
        self._tracepoints = []

    def _failed(self, event: str, e: Exception) -> None:
        # A callback runs inside the datapath's poll (as a tracing program runs in the
        # kernel's softirq): its exception must not unwind a half-done batch and strand
        # its pages. The subscription is detached and keeps the error for its owner.
        self.error = e
        self.close()
        logging.getLogger("pyxdp.trace").warning(
            "tracepoint %s: callback %s raised %s: %s; unsubscribed", event,
            getattr(self.callback, "__qualname__", type(self.callback).__name__),
            type(e).__name__, e)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class EventQueue(Subscription):
    """A subscription that keeps events for a reader, like a bounded trace buffer.

    Iterating yields the events waiting now and stops (it does not block);
    :meth:`get` waits for one (from another thread's firing). When
    ``maxlen`` events are waiting the oldest is dropped and counted in
    :attr:`lost`, as the kernel's overwriting ring buffer does.
    """

    def __init__(self, tracepoints: Iterable[Tracepoint[Any]], maxlen: int = 1 << 16) -> None:
        self._events: collections.deque[TraceEvent] = collections.deque()
        self._maxlen = maxlen
        self._ready = threading.Condition()
        self.lost = 0
        super().__init__(tracepoints, self._put)

    def _put(self, event: TraceEvent) -> None:
        with self._ready:
            if len(self._events) >= self._maxlen:
                self._events.popleft()
                self.lost += 1
            self._events.append(event)
            self._ready.notify()

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[TraceEvent]:
        while True:
            try:
                yield self._events.popleft()
            except IndexError:
                return

    def drain(self) -> list[TraceEvent]:
        """Every waiting event, oldest first."""
        return list(self)

    def get(self, timeout: float | None = None) -> TraceEvent | None:
        """The next event, waiting up to ``timeout`` seconds (``None``: forever)."""
        with self._ready:
            if not self._ready.wait_for(lambda: bool(self._events), timeout):
                return None
            return self._events.popleft()


# --------------------------------------------------------------------------
# Tracepoints
# --------------------------------------------------------------------------

class CounterSource(Protocol):
    """Counters kept in place by machine code for one tracepoint: ``rows()`` gives
    ``(key, columns)`` pairs (``events`` first, then the tracepoint's value
    columns; keys may repeat, they add up) read from the records as they are
    now; ``reset()`` zeroes the records."""

    def rows(self) -> Iterable[tuple[Key, Sequence[int]]]: ...

    def reset(self) -> None: ...


class Tracepoint(Generic[R]):
    """One XDP event: its counters, its listeners and the ways to fire it.

    ``counters`` maps a key (the values of :attr:`key_fields`) to a list of
    integers named by :attr:`columns`: ``events`` (times fired), then sums
    of some fields (``sent``, ``drops``...) or counts of events where a
    field is non-zero (``errors``: events with ``err != 0``). Subclasses
    add a ``fire()`` with the kernel tracepoint's arguments.

    Machine code counts in records of its own (like the kernel's per-CPU
    counters): a :class:`CounterSource` registered with :meth:`add_source`
    is read when the counters are, so nothing is folded in after a native
    call.
    """

    key_fields: tuple[str, ...] = ()
    #: (column, mode, field) after "events"; mode is "sum" or "nonzero".
    value_spec: tuple[tuple[str, str, str], ...] = ()
    #: Fields the kernel's TP_fast_assign fixes (``act = XDP_REDIRECT``...).
    fixed: Mapping[str, int] = {}

    def __init__(self, definition: EventDef) -> None:
        self.definition = definition
        self.name = definition.name
        self._counts: dict[Key, list[int]] = {}
        self._sources: list[CounterSource] = []
        self._subs: list[Subscription] = []
        self.columns: tuple[str, ...] = ("events", *(c for c, _, _ in self.value_spec))
        names = definition.field_names
        self._key_idx = tuple(names.index(f) for f in self.key_fields)
        self._val_idx = tuple((mode == "sum", names.index(f)) for _, mode, f in self.value_spec)

    @property
    def listening(self) -> bool:
        """True when someone subscribed: firing then also produces events."""
        return bool(self._subs)

    def _row(self, key: Key) -> list[int]:
        row = self._counts[key] = [0] * len(self.columns)
        return row

    @property
    def counters(self) -> dict[Key, list[int]]:
        """Every key's columns: what Python fired plus what the sources hold (a copy)."""
        # list() copies in one C call: safe against a firing thread adding a key.
        out = {k: list(v) for k, v in list(self._counts.items())}
        width = len(self.columns)
        for src in list(self._sources):
            for key, vals in src.rows():
                row = out.get(key)
                if row is None:
                    row = out[key] = [0] * width
                for i, v in enumerate(vals):
                    row[i] += v
        return out

    def add_source(self, source: CounterSource) -> None:
        """Count what ``source`` holds as this tracepoint's (see :class:`CounterSource`)."""
        self._sources.append(source)

    def remove_source(self, source: CounterSource) -> None:
        """Stop counting ``source``, folding what it holds into the counters first
        (events fired stay fired)."""
        if source in self._sources:
            for key, vals in source.rows():
                row = self._counts.get(key) or self._row(key)
                for i, v in enumerate(vals):
                    row[i] += v
            self._sources.remove(source)

    def reset(self) -> None:
        self._counts.clear()
        for src in list(self._sources):
            src.reset()

    def total(self, column: str = "events") -> int:
        """Sum of one column over every key."""
        i = self.columns.index(column)
        return sum(row[i] for row in self.counters.values())

    # ---------------------------------------------------------------- emitting

    def _emit(self, record: tuple[Any, ...], n: int = 1,
              context: tuple[int, int, int, str] | None = None) -> None:
        rec: TraceRecord = self.definition.normalize(record)  # type: ignore[assignment]
        ts, cpu, pid, comm = context if context is not None else _context()
        event = TraceEvent(self.name, rec, ts, cpu, pid, comm)
        for _ in range(n):
            for sub in list(self._subs):
                try:
                    sub.callback(event)
                except Exception as e:  # noqa: BLE001 - the listener's bug, not the datapath's
                    sub._failed(self.name, e)

    # ---------------------------------------------------------------- generic firing

    def fire_record(self, record: tuple[Any, ...], n: int = 1) -> None:
        """Fire ``n`` events with this record (every field given, ``act`` included)."""
        if n <= 0:
            return
        key = tuple(record[i] for i in self._key_idx)
        row = self._counts.get(key) or self._row(key)
        row[0] += n
        for col, (is_sum, i) in enumerate(self._val_idx, start=1):
            v = record[i]
            row[col] += v * n if is_sum else (n if v else 0)
        if self._subs:
            self._emit(record, n)

    def ingest(self, event: TraceEvent) -> None:
        """Count an event fired elsewhere (e.g. read from the kernel) and pass it on."""
        record: tuple[Any, ...] = event.record
        key = tuple(record[i] for i in self._key_idx)
        row = self._counts.get(key) or self._row(key)
        row[0] += 1
        for col, (is_sum, i) in enumerate(self._val_idx, start=1):
            v = record[i]
            row[col] += v if is_sum else (1 if v else 0)
        for sub in list(self._subs):
            sub.callback(event)

    def _full(self, values: Mapping[str, Any]) -> dict[str, Any]:
        merged = {**self.fixed, **values}
        names = self.definition.field_names
        unknown = set(merged) - set(names)
        if unknown:
            raise TypeError(f"{self.name} has no field(s) {sorted(unknown)}")
        missing = [f for f in names if f not in merged]
        if missing:
            raise TypeError(f"{self.name}: missing field(s) {missing}")
        return merged

    def _add(self, key: Key, count: int, sums: Iterable[int]) -> None:
        row = self._counts.get(key) or self._row(key)
        row[0] += count
        for col, v in enumerate(sums, start=1):
            row[col] += v

    def fire_batch(self, **fields: IntOrArray) -> int:
        """Fire one event per element of the array fields; returns how many fired.

        Every field of the event is given (``act`` and the like may be left
        out where the kernel fixes them), each as an ``int`` (the same for
        every event) or a 1-D integer array (one element per event; all
        arrays the same length). The counters are updated per distinct key
        with a few numpy passes over the batch, not per event: numpy's fixed
        cost makes it pay from about 150 events on (8x at 4096); smaller
        batches are cheaper with ``fire(..., n=)`` or :meth:`fire_counts`.
        """
        values: dict[str, Any] = {k: (int(v) if np.ndim(v) == 0 else np.asarray(v))
                                  for k, v in self._full(fields).items()}
        shapes = {v.shape for v in values.values() if not isinstance(v, int)}
        names = self.definition.field_names
        if not shapes:
            self.fire_record(self.definition.make(values[f] for f in names))
            return 1
        if len(shapes) != 1 or len(next(iter(shapes))) != 1:
            raise ValueError(f"{self.name}: array fields must be 1-D and of one length")
        n = int(next(iter(shapes))[0])
        if n == 0:
            return 0
        keys = [values[names[i]] for i in self._key_idx]
        cols = [(is_sum, values[names[i]]) for is_sum, i in self._val_idx]
        varying = [j for j, k in enumerate(keys) if not isinstance(k, int)]
        if not varying:
            self._add(tuple(keys), n, [
                (v * n if is_sum else (n if v else 0)) if isinstance(v, int)
                else (int(v.sum()) if is_sum else int(np.count_nonzero(v)))
                for is_sum, v in cols])
        else:
            if len(varying) == 1:  # the common case: one key column varies
                uniq, inverse = np.unique(keys[varying[0]], return_inverse=True)
                uniq = uniq.reshape(-1, 1)
            else:
                uniq, inverse = np.unique(np.stack([keys[j] for j in varying], axis=1),
                                          axis=0, return_inverse=True)
            inverse = inverse.reshape(-1)
            groups = len(uniq)
            counts = np.bincount(inverse, minlength=groups)
            per_col: list[list[int]] = []
            for is_sum, v in cols:
                if isinstance(v, int):
                    per_col.append((counts * v if is_sum else counts * (1 if v else 0)).tolist())
                else:
                    acc = np.zeros(groups, dtype=np.int64)  # exact integer sums
                    np.add.at(acc, inverse, v if is_sum else (v != 0))
                    per_col.append(acc.tolist())
            key = list(keys)
            for g, (u, c) in enumerate(zip(uniq.tolist(), counts.tolist(), strict=True)):
                for j, x in zip(varying, u, strict=True):
                    key[j] = x
                self._add(tuple(key), c, [pc[g] for pc in per_col])
        if self._subs:
            context = _context()
            columns = [values[f] for f in names]
            for j in range(n):
                rec = self.definition.make(c if isinstance(c, int) else int(c[j])
                                           for c in columns)
                self._emit(rec, 1, context)
        return n

    def fire_counts(self, field: str, counts: npt.ArrayLike, **fields: int) -> int:
        """Fire ``counts[v]`` events with ``field == v`` for every ``v``; returns how many.

        The batch form of a histogram: e.g.
        ``xdp_exception.fire_counts("act", np.bincount(verdicts), prog_id=p, ifindex=i)``.
        The other fields are the same for every event.
        """
        hist = np.asarray(counts).tolist()
        values = self._full({**fields, field: 0})
        names = self.definition.field_names
        pos = names.index(field)
        key_at = [names[i] for i in self._key_idx]
        total = 0
        for v, n in enumerate(hist):
            if n <= 0:
                continue
            values[field] = v
            self._add(tuple(values[f] for f in key_at), n, [
                (values[names[i]] * n if is_sum else (n if values[names[i]] else 0))
                for is_sum, i in self._val_idx])
            if self._subs:
                rec = [values[f] for f in names]
                rec[pos] = v
                self._emit(self.definition.make(rec), n)
            total += n
        return total


class XdpExceptionTracepoint(Tracepoint[XdpException]):
    """``trace_xdp_exception(dev, prog, act)``; counted per ``(ifindex, act)``."""

    key_fields = ("ifindex", "act")

    def fire(self, prog_id: int, act: int, ifindex: int, n: int = 1) -> None:
        key = (ifindex, act)
        row = self._counts.get(key) or self._row(key)
        row[0] += n
        if self._subs:
            self._emit(XdpException(prog_id, act, ifindex), n)

    def fire_actions(self, actions: npt.ArrayLike, *, prog_id: int, ifindex: int) -> int:
        """Fire one exception per verdict that is ``XDP_ABORTED`` or not an XDP action.

        ``actions`` holds the verdicts of a batch; those are the ones the
        kernel's receive paths report through this tracepoint (an invalid
        verdict is warned about and then handled as an exception).
        """
        verdicts = np.asarray(actions)
        aborted = verdicts == 0
        invalid = (verdicts > _KNOWN_ACTIONS[-1]) | (verdicts < 0)
        n_aborted = int(np.count_nonzero(aborted))
        if not invalid.any():  # the usual batches: no exception, or only aborts
            if n_aborted:
                self.fire(prog_id, 0, ifindex, n_aborted)
            return n_aborted
        bad = verdicts[aborted | invalid]
        if self._subs:  # listeners see the events in packet order, as the kernel fires them
            for v in bad.tolist():
                self.fire(prog_id, int(v) & 0xFFFF_FFFF, ifindex)
            return int(bad.size)
        values, counts = np.unique(bad, return_counts=True)
        for v, c in zip(values.tolist(), counts.tolist(), strict=True):
            self.fire(prog_id, int(v) & 0xFFFF_FFFF, ifindex, int(c))
        return int(bad.size)


class XdpBulkTxTracepoint(Tracepoint[XdpBulkTx]):
    """``trace_xdp_bulk_tx(dev, sent, drops, err)``; per ifindex: sent, drops, errors."""

    key_fields = ("ifindex",)
    value_spec = (("sent", "sum", "sent"), ("drops", "sum", "drops"),
                  ("errors", "nonzero", "err"))
    fixed = {"act": _XDP_TX}

    def fire(self, ifindex: int, sent: int, drops: int, err: int = 0) -> None:
        key = (ifindex,)
        row = self._counts.get(key) or self._row(key)
        row[0] += 1
        row[1] += sent
        row[2] += drops
        if err:
            row[3] += 1
        if self._subs:
            self._emit(XdpBulkTx(ifindex, _XDP_TX, drops, sent, err))


def redirect_target(map_type: int, map_id: int, index: int,
                    tgt_ifindex: int | None = None) -> tuple[int, int]:
    """``(to_ifindex, map_index)`` as ``xdp_redirect_template``'s TP_fast_assign sets them.

    Devmaps report the target device (0 for a broadcast, where there is no
    single target) and the map index; an ifindex redirect (``map_type``
    UNSPEC with ``map_id`` INT_MAX) reports the ifindex and map_index 0;
    cpumap and xskmap report to_ifindex 0 and the index.
    """
    if map_type in (BpfMapType.BPF_MAP_TYPE_DEVMAP, BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH):
        return (tgt_ifindex or 0), index
    if map_type == BpfMapType.BPF_MAP_TYPE_UNSPEC and map_id == _INT_MAX:
        return index, 0
    return 0, index


class XdpRedirectTracepoint(Tracepoint[XdpRedirect]):
    """``trace_xdp_redirect(...)``; counted per ``(ifindex, to_ifindex, map_id)``."""

    key_fields = ("ifindex", "to_ifindex", "map_id")
    fixed = {"act": _XDP_REDIRECT}

    def fire(self, prog_id: int, ifindex: int, to_ifindex: int, map_id: int, map_index: int,
             err: int = 0, n: int = 1) -> None:
        key = (ifindex, to_ifindex, map_id)
        row = self._counts.get(key) or self._row(key)
        row[0] += n
        if self._subs:
            self._emit(XdpRedirect(prog_id, _XDP_REDIRECT, ifindex, err, to_ifindex, map_id,
                                   map_index), n)


class XdpRedirectErrTracepoint(Tracepoint[XdpRedirectErr]):
    """``trace_xdp_redirect_err(...)``; counted per ``(ifindex, err)``."""

    key_fields = ("ifindex", "err")
    fixed = {"act": _XDP_REDIRECT}

    def fire(self, prog_id: int, ifindex: int, to_ifindex: int, map_id: int, map_index: int,
             err: int, n: int = 1) -> None:
        key = (ifindex, err)
        row = self._counts.get(key) or self._row(key)
        row[0] += n
        if self._subs:
            self._emit(XdpRedirectErr(prog_id, _XDP_REDIRECT, ifindex, err, to_ifindex, map_id,
                                      map_index), n)


class XdpCpumapKthreadTracepoint(Tracepoint[XdpCpumapKthread]):
    """``trace_xdp_cpumap_kthread(map_id, processed, drops, sched, stats)``; per (map_id, cpu)."""

    key_fields = ("map_id", "cpu")
    value_spec = (("processed", "sum", "processed"), ("drops", "sum", "drops"),
                  ("sched", "nonzero", "sched"), ("xdp_pass", "sum", "xdp_pass"),
                  ("xdp_drop", "sum", "xdp_drop"), ("xdp_redirect", "sum", "xdp_redirect"))
    fixed = {"act": _XDP_REDIRECT}

    def fire(self, map_id: int, processed: int, drops: int, sched: int, xdp_pass: int = 0,
             xdp_drop: int = 0, xdp_redirect: int = 0, *, cpu: int = 0) -> None:
        """``cpu`` is the CPU the kthread runs on (the kernel's smp_processor_id())."""
        key = (map_id, cpu)
        row = self._counts.get(key) or self._row(key)
        row[0] += 1
        row[1] += processed
        row[2] += drops
        if sched:
            row[3] += 1
        row[4] += xdp_pass
        row[5] += xdp_drop
        row[6] += xdp_redirect
        if self._subs:
            self._emit(XdpCpumapKthread(map_id, _XDP_REDIRECT, cpu, drops, processed, sched,
                                        xdp_pass, xdp_drop, xdp_redirect))


class XdpCpumapEnqueueTracepoint(Tracepoint[XdpCpumapEnqueue]):
    """``trace_xdp_cpumap_enqueue(map_id, processed, drops, to_cpu)``; per (map_id, cpu, to_cpu)."""

    key_fields = ("map_id", "cpu", "to_cpu")
    value_spec = (("processed", "sum", "processed"), ("drops", "sum", "drops"))
    fixed = {"act": _XDP_REDIRECT}

    def fire(self, map_id: int, processed: int, drops: int, to_cpu: int, *,
             cpu: int = 0) -> None:
        """``cpu`` is the producing CPU (the kernel's smp_processor_id())."""
        key = (map_id, cpu, to_cpu)
        row = self._counts.get(key) or self._row(key)
        row[0] += 1
        row[1] += processed
        row[2] += drops
        if self._subs:
            self._emit(XdpCpumapEnqueue(map_id, _XDP_REDIRECT, cpu, drops, processed, to_cpu))


class XdpDevmapXmitTracepoint(Tracepoint[XdpDevmapXmit]):
    """``trace_xdp_devmap_xmit(from_dev, to_dev, sent, drops, err)``; per device pair."""

    key_fields = ("from_ifindex", "to_ifindex")
    value_spec = (("sent", "sum", "sent"), ("drops", "sum", "drops"),
                  ("errors", "nonzero", "err"))
    fixed = {"act": _XDP_REDIRECT}

    def fire(self, from_ifindex: int, to_ifindex: int, sent: int, drops: int,
             err: int = 0) -> None:
        key = (from_ifindex, to_ifindex)
        row = self._counts.get(key) or self._row(key)
        row[0] += 1
        row[1] += sent
        row[2] += drops
        if err:
            row[3] += 1
        if self._subs:
            self._emit(XdpDevmapXmit(from_ifindex, _XDP_REDIRECT, to_ifindex, drops, sent, err))


class MemConnectTracepoint(Tracepoint[MemConnect]):
    """``trace_mem_connect(xa, rxq)``; per (mem_type, ifindex)."""

    key_fields = ("mem_type", "ifindex")

    def fire(self, mem_id: int, mem_type: int, ifindex: int, *, xa: int = 0,
             allocator: int = 0, rxq: int = 0) -> None:
        key = (mem_type, ifindex)
        row = self._counts.get(key) or self._row(key)
        row[0] += 1
        if self._subs:
            self._emit(MemConnect(xa, mem_id, mem_type, allocator, rxq, ifindex))


class MemDisconnectTracepoint(Tracepoint[MemDisconnect]):
    """``trace_mem_disconnect(xa)``; per mem_type."""

    key_fields = ("mem_type",)

    def fire(self, mem_id: int, mem_type: int, *, xa: int = 0, allocator: int = 0) -> None:
        key = (mem_type,)
        row = self._counts.get(key) or self._row(key)
        row[0] += 1
        if self._subs:
            self._emit(MemDisconnect(xa, mem_id, mem_type, allocator))


class LinkAttachFailedTracepoint(Tracepoint[BpfXdpLinkAttachFailed]):
    """``trace_bpf_xdp_link_attach_failed(msg)``; one counter."""

    def fire(self, msg: str) -> None:
        row = self._counts.get(()) or self._row(())
        row[0] += 1
        if self._subs:
            self._emit(BpfXdpLinkAttachFailed(msg))

    def fire_batch(self, **fields: IntOrArray) -> int:
        raise TypeError("bpf_xdp_link_attach_failed carries a string: use fire(msg)")


# --------------------------------------------------------------------------
# The registry, snapshots and rates
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Snapshot:
    """Every counter of a :class:`Tracer` at one moment (``time`` in seconds)."""

    time: float
    counters: Mapping[str, Mapping[Key, tuple[int, ...]]]
    columns: Mapping[str, tuple[str, ...]]

    def count(self, event: str, column: str = "events", key: Key | None = None) -> int:
        i = self.columns[event].index(column)
        rows = self.counters[event]
        if key is not None:
            row = rows.get(key)
            return row[i] if row is not None else 0
        return sum(r[i] for r in rows.values())


@dataclass(frozen=True)
class Interval:
    """What changed between two snapshots: counts and per-second rates."""

    start: Snapshot
    end: Snapshot

    @property
    def elapsed(self) -> float:
        return self.end.time - self.start.time

    def deltas(self, event: str) -> dict[Key, tuple[int, ...]]:
        """Per key, how much each column grew (keys that did not change are left out)."""
        before = self.start.counters.get(event, {})
        width = len(self.end.columns[event])
        out: dict[Key, tuple[int, ...]] = {}
        for key, row in self.end.counters[event].items():
            old = before.get(key, (0,) * width)
            d = tuple(a - b for a, b in zip(row, old, strict=True))
            if any(d):
                out[key] = d
        return out

    def count(self, event: str, column: str = "events", key: Key | None = None) -> int:
        return self.end.count(event, column, key) - (
            self.start.count(event, column, key) if event in self.start.counters else 0)

    def rate(self, event: str, column: str = "events", key: Key | None = None) -> float:
        """Per-second rate of one column (of one key, or summed over every key)."""
        t = self.elapsed
        return self.count(event, column, key) / t if t > 0 else 0.0

    def rates(self, event: str) -> dict[Key, tuple[float, ...]]:
        """Per key, the per-second rate of every column."""
        t = self.elapsed
        return {k: tuple((x / t if t > 0 else 0.0) for x in d)
                for k, d in self.deltas(event).items()}


class Tracer:
    """A set of the XDP tracepoints with their own counters and listeners.

    ``tracer.xdp_exception`` and so on are the :class:`Tracepoint` objects;
    ``tracer["xdp_exception"]`` finds one by name.
    """

    def __init__(self) -> None:
        d = DEFINITIONS
        self.xdp_exception = XdpExceptionTracepoint(d["xdp_exception"])
        self.xdp_bulk_tx = XdpBulkTxTracepoint(d["xdp_bulk_tx"])
        self.xdp_redirect = XdpRedirectTracepoint(d["xdp_redirect"])
        self.xdp_redirect_err = XdpRedirectErrTracepoint(d["xdp_redirect_err"])
        self.xdp_cpumap_kthread = XdpCpumapKthreadTracepoint(d["xdp_cpumap_kthread"])
        self.xdp_cpumap_enqueue = XdpCpumapEnqueueTracepoint(d["xdp_cpumap_enqueue"])
        self.xdp_devmap_xmit = XdpDevmapXmitTracepoint(d["xdp_devmap_xmit"])
        self.mem_connect = MemConnectTracepoint(d["mem_connect"])
        self.mem_disconnect = MemDisconnectTracepoint(d["mem_disconnect"])
        self.bpf_xdp_link_attach_failed = LinkAttachFailedTracepoint(
            d["bpf_xdp_link_attach_failed"])
        self.tracepoints: dict[str, Tracepoint[Any]] = {
            tp.name: tp for tp in (
                self.xdp_exception, self.xdp_bulk_tx, self.xdp_redirect,
                self.xdp_redirect_err, self.xdp_cpumap_kthread, self.xdp_cpumap_enqueue,
                self.xdp_devmap_xmit, self.mem_connect, self.mem_disconnect,
                self.bpf_xdp_link_attach_failed)}

    def __getitem__(self, name: str) -> Tracepoint[Any]:
        try:
            return self.tracepoints[name]
        except KeyError:
            raise KeyError(f"no XDP tracepoint {name!r} (known: "
                           f"{', '.join(self.tracepoints)})") from None

    def _select(self, op: str, events: str | Iterable[str] | None) -> list[Tracepoint[Any]]:
        if events is None:
            return list(self.tracepoints.values())
        if isinstance(events, str):
            events = [events]
        names = list(events) if isinstance(events, Iterable) else [events]
        for e in names:
            if not isinstance(e, str):  # checked here: a list would meet the dict as unhashable
                raise BadArgument(f"Tracer.{op}: events must be a tracepoint name, a list of "
                                  f"them or None, not {short(e)}")
        return [self[e] for e in names]

    def subscribe(self, events: str | Iterable[str] | None, callback: Callback) -> Subscription:
        """Call ``callback(event)`` for every firing of ``events`` (``None``: all of them)."""
        if not callable(callback):  # else it would fail at the first firing, in the poll
            raise BadArgument(f"Tracer.subscribe: callback must be callable, not "
                              f"{short(callback)}")
        return Subscription(self._select("subscribe", events), callback)

    @checked(maxlen=(1, 1 << 32), events=None)
    def listen(self, events: str | Iterable[str] | None = None, *,
               maxlen: int = 1 << 16) -> EventQueue:
        """An :class:`EventQueue` collecting the events of ``events`` (``None``: all)."""
        return EventQueue(self._select("listen", events), maxlen)

    @property
    def listening(self) -> bool:
        return any(tp.listening for tp in self.tracepoints.values())

    def ingest(self, event: TraceEvent | TraceRecord) -> None:
        """Count (and pass to listeners) an event fired elsewhere, e.g. by the kernel."""
        if not isinstance(event, TraceEvent):
            event = TraceEvent(definition_of(event).name, event)
        self[event.name].ingest(event)

    def snapshot(self, now: float | None = None) -> Snapshot:
        """A copy of every counter, stamped ``now`` (default: ``time.monotonic()``)."""
        t = time.monotonic() if now is None else now
        # list() copies each dict in one C call: safe against a firing thread
        # adding a key meanwhile.
        counters = {name: {k: tuple(v) for k, v in tp.counters.items()}
                    for name, tp in self.tracepoints.items()}
        return Snapshot(t, counters, {n: tp.columns for n, tp in self.tracepoints.items()})

    def reset(self) -> None:
        for tp in self.tracepoints.values():
            tp.reset()


class TraceSession:
    """Counter snapshots over time: :meth:`sample` gives the :class:`Interval` since the last."""

    def __init__(self, tracer: Tracer | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.tracer = tracer if tracer is not None else TRACER
        self.clock = clock
        self.first = self.last = self.tracer.snapshot(clock())

    def sample(self) -> Interval:
        """Rates and counts since the previous sample (or the start)."""
        now = self.tracer.snapshot(self.clock())
        interval = Interval(self.last, now)
        self.last = now
        return interval

    def total(self) -> Interval:
        """Everything since the session started (up to the last sample)."""
        return Interval(self.first, self.last)


#: The process-wide tracer pyxdp's datapath fires.
TRACER: Final = Tracer()

xdp_exception: Final = TRACER.xdp_exception
xdp_bulk_tx: Final = TRACER.xdp_bulk_tx
xdp_redirect: Final = TRACER.xdp_redirect
xdp_redirect_err: Final = TRACER.xdp_redirect_err
xdp_cpumap_kthread: Final = TRACER.xdp_cpumap_kthread
xdp_cpumap_enqueue: Final = TRACER.xdp_cpumap_enqueue
xdp_devmap_xmit: Final = TRACER.xdp_devmap_xmit
mem_connect: Final = TRACER.mem_connect
mem_disconnect: Final = TRACER.mem_disconnect
bpf_xdp_link_attach_failed: Final = TRACER.bpf_xdp_link_attach_failed


def subscribe(events: str | Iterable[str] | None, callback: Callback) -> Subscription:
    """Subscribe to events of the process-wide :data:`TRACER`."""
    return TRACER.subscribe(events, callback)


def listen(events: str | Iterable[str] | None = None, *, maxlen: int = 1 << 16) -> EventQueue:
    """An :class:`EventQueue` on the process-wide :data:`TRACER`."""
    return TRACER.listen(events, maxlen=maxlen)
