"""The devmap datapath: ``kernel/bpf/devmap.c`` (the storage is :mod:`pyxdp.maps.devmap`).

This module holds what the native poll loop needs of devmap entries with a
program (``dev_map_bpf_prog_run``): :class:`DevmapEgress` is the table of
those programs' JIT entries and their I/O rows, which
:func:`pyxdp.net.napi_native._bq_xmit_all` drives at ``bq_xmit_all`` time,
one bulk queue at a time, with ``egress_ifindex`` written into the entry's
descriptor before each run; :meth:`DevmapEgress.account` folds what the
runs counted (exceptions per egress device and verdict, the first fault and
invalid verdict) into the tracer, the warnings and the target's fault log
as the Python path (:func:`pyxdp.net.napi.devmap_prog_run`) reports them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from pyxdp.net.frames import DEV_MAP_BULK_SIZE
from pyxdp.vm.helpers import RunContext
from pyxdp.vm.jit.abi import XDP_FIELDS
from pyxdp.vm.jit.xdp import DriverIO

__all__ = ["DevmapEgress"]

log = logging.getLogger(__name__)

I64 = npt.NDArray[np.int64]


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


class DevmapEgress:
    """The devmap programs one native call may run: a row per program with its JIT
    entry and context addresses, the descriptor and per-frame I/O of a bulk of
    ``DEV_MAP_BULK_SIZE`` (a :class:`~pyxdp.vm.jit.xdp.DriverIO` whose arrays are
    this table's rows), and what the runs count per program and egress device:
    ``exc[k, ifindex, act]`` (act 5: verdicts that are no XDP action) and
    ``fault[k, ifindex]`` = (faults, the first one's status word, pc and
    address, the first invalid verdict + 1)."""

    def __init__(self, progs: Sequence[_Prog], ifindex: int) -> None:
        k, n = len(progs), DEV_MAP_BULK_SIZE
        self.progs = list(progs)
        self.ids = np.array([p.id for p in progs], np.int64)
        self.fn = np.zeros(k, np.int64)
        self.ctx = np.zeros(k, np.int64)
        self.desc = np.zeros((k, len(XDP_FIELDS)), np.uint64)
        self.rows = np.zeros((k, n), np.int64)
        u32 = {name: np.zeros((k, n), np.uint32)
               for name in ("data_off", "data_len", "meta_len", "action", "off_out", "len_out",
                            "meta_out", "status", "pc")}
        self.u32 = u32
        self.addr = np.zeros((k, n), np.uint64)
        self.redirect = np.zeros((k, n, 4), np.uint64)
        self.sent = np.zeros((k, n), np.int64)  # scratch: the rows a bulk sends
        self.fault = np.zeros((k, 1, 5), np.int64)
        self.exc = np.zeros((k, 1, 6), np.int64)
        self.ios: list[DriverIO] = []
        for i in range(k):
            # ingress_ifindex is xdpf->dev_rx (this device), rx_queue_index 0.
            io = DriverIO(n, ifindex, 0)
            io.desc, io.rows, io.addr, io.redirect = (self.desc[i], self.rows[i], self.addr[i],
                                                      self.redirect[i])
            for name, arr in u32.items():
                setattr(io, name, arr[i])
            self.ios.append(io)

    def args(self, nif: int) -> tuple[Any, ...]:
        """The table for :func:`~pyxdp.net.napi_native.native_polls` (counters cleared)."""
        if self.exc.shape[1] != nif:
            self.exc = np.zeros((len(self.progs), nif, 6), np.int64)
            self.fault = np.zeros((len(self.progs), nif, 5), np.int64)
        else:
            self.exc[:] = 0
            self.fault[:] = 0
        u = self.u32
        return (self.ids, self.fn, self.ctx, self.desc, self.rows, u["data_off"],
                u["data_len"], u["meta_len"], u["action"], u["off_out"], u["len_out"],
                u["meta_out"], u["status"], u["pc"], self.addr, self.exc, self.fault, self.sent)

    @contextmanager
    def driven(self, ctx: RunContext, pages: npt.NDArray[np.uint8]) -> Iterator[None]:
        """Every program's engine driven over ``pages`` (the queue's page pool) for the
        body of a native call (:meth:`XdpJit.driver`)."""
        with ExitStack() as stack:
            for i, p in enumerate(self.progs):
                fn, ctx_addr = stack.enter_context(p.vm.driver(ctx, pages, self.ios[i]))
                self.fn[i], self.ctx[i] = fn, ctx_addr
            yield

    def account(self, tracer: Any, devices: Mapping[int, _Target], warned: Any,
                max_faults: int) -> None:
        """What the call's egress runs counted, into the tracer, warnings and faults."""
        if not len(self.progs):
            return
        for k, ifx in zip(*np.nonzero(self.exc.any(axis=2) | (self.fault[:, :, 0] > 0)),
                          strict=True):
            p = self.progs[k]
            exc = self.exc[k, ifx]
            f = self.fault[k, ifx]
            bad = int(f[4]) - 1
            for act in np.flatnonzero(exc).tolist():
                value = bad if act == 5 else act
                tracer.xdp_exception.fire(p.id, value & 0xFFFF_FFFF, int(ifx), int(exc[act]))
            first = next((a for a in (3, 4) if exc[a]), bad if bad >= 0 else None)
            if first is not None and p not in warned:
                warned.add(p)
                log.warning("devmap program %s returned %d: only XDP_PASS and XDP_DROP are "
                            "allowed there (bpf_warn_invalid_xdp_action)", p.spec.name, first)
            target = devices.get(int(ifx))
            if f[0] and target is not None and len(target.faults) < max_faults:
                fault = p._with_source(p.vm.render_fault(int(f[1]), int(f[2]), int(f[3])))
                target.faults.append(f"{target.name} devmap egress: {p.spec.name}: {fault} "
                                     f"-> XDP_ABORTED")
                log.warning("%s", target.faults[-1])
