"""Busy polling NAPI instances named by id, through an io_uring (``io_uring/napi.c``).

A socket busy-polls the NAPI instance its ``sk_napi_id`` names; an AF_XDP socket
gets one only when bound zero-copy (``xsk_bind``, Linux 6.13: "xsk: Bring back
busy polling support" resolves it from the queue's NAPI at bind), so a
copy-mode socket - a veth's only mode - has none, and its ``recvfrom`` with
``SO_BUSY_POLL`` polls nothing (measured on Linux 6.18: ``SO_INCOMING_NAPI_ID``
0, ``BusyPollRxPackets`` 0). An io_uring can name the instances itself
(``IORING_REGISTER_NAPI``, the static tracking of Linux 6.13:
``IO_URING_NAPI_TRACKING_STATIC`` then ``IO_URING_NAPI_STATIC_ADD_ID``); a wait
for completions on it (``io_uring_enter`` with ``IORING_ENTER_GETEVENTS`` and a
timeout) first busy-polls them (``io_napi_busy_loop``: ``napi_busy_loop_rcu``,
``BUSY_POLL_BUDGET`` frames a poll, ``prefer_busy_poll`` as
``SO_PREFER_BUSY_POLL``) for up to the registered ``busy_poll_to`` microseconds
or the timeout, on the caller's CPU. Nothing is ever submitted: no ring is
mapped. The ring is a descriptor of this process: it goes with it.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import os
import struct
from typing import Final

from pyxdp.errors import KernelError

__all__ = ["NapiBusyPoller", "busy_poll_rx_packets"]

# x86-64 and arm64 numbers alike (io_uring came after the unified syscall table)
SYS_IO_URING_SETUP: Final = 425
SYS_IO_URING_ENTER: Final = 426
SYS_IO_URING_REGISTER: Final = 427
IORING_ENTER_GETEVENTS: Final = 1 << 0
IORING_ENTER_EXT_ARG: Final = 1 << 3
IORING_REGISTER_NAPI: Final = 27
IO_URING_NAPI_REGISTER_OP: Final = 0
IO_URING_NAPI_STATIC_ADD_ID: Final = 1
IO_URING_NAPI_TRACKING_STATIC: Final = 1
_PARAMS_SIZE: Final = 120  # struct io_uring_params
_NAPI: Final = struct.Struct("=IBBxxII")  # struct io_uring_napi
_GETEVENTS_ARG: Final = struct.Struct("=QIIQ")  # struct io_uring_getevents_arg
_TIMESPEC: Final = struct.Struct("=qq")  # struct __kernel_timespec

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long

_HINTS: Final = {
    _errno.ENOSYS: "kernel without io_uring",
    _errno.EPERM: "io_uring is disabled for this process (kernel.io_uring_disabled)",
    _errno.EINVAL: "kernel without io_uring's static NAPI tracking (Linux 6.13)",
}


def _fail(op: str) -> KernelError:
    err = ctypes.get_errno() or _errno.EINVAL
    return KernelError(op, err, _HINTS.get(err, ""))


def busy_poll_rx_packets() -> int:
    """``BusyPollRxPackets`` of the calling thread's network namespace (``/proc/net/netstat``,
    ``LINUX_MIB_BUSYPOLLRXPACKETS``): the frames NAPI polls took inside busy polls
    (``napi_busy_loop``), whoever asked for them."""
    with open("/proc/thread-self/net/netstat") as f:
        lines = f.read().split("\n")
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            got = dict(zip(names.split(), values.split(), strict=True))
            if "BusyPollRxPackets" in got:
                return int(got["BusyPollRxPackets"])
    raise KernelError("read /proc/net/netstat", _errno.ENOENT, "no BusyPollRxPackets")


class NapiBusyPoller:
    """An io_uring that busy-polls the NAPI instances ``napi_ids`` while it waits
    (:meth:`wait`), up to ``busy_poll_usecs`` a wait; ``prefer`` as
    ``SO_PREFER_BUSY_POLL`` (the instance stays masked after a busy poll, for its
    ``defer-hard-irqs`` and ``gro-flush-timeout``)."""

    def __init__(self, napi_ids: list[int], busy_poll_usecs: int, prefer: bool = True) -> None:
        if not napi_ids:
            raise ValueError("name at least one NAPI instance")
        params = ctypes.create_string_buffer(_PARAMS_SIZE)
        fd = _syscall(SYS_IO_URING_SETUP, ctypes.c_uint(1), params)
        if fd < 0:
            raise _fail("io_uring_setup")
        self.fd = int(fd)
        try:
            self._register(_NAPI.pack(busy_poll_usecs, int(prefer), IO_URING_NAPI_REGISTER_OP,
                                      IO_URING_NAPI_TRACKING_STATIC, 0), "napi register")
            for nid in napi_ids:
                self._register(_NAPI.pack(busy_poll_usecs, int(prefer),
                                          IO_URING_NAPI_STATIC_ADD_ID, nid, 0),
                               f"napi add {nid}")
        except BaseException:
            os.close(self.fd)
            raise
        self._ts = ctypes.create_string_buffer(_TIMESPEC.size)
        self._arg = ctypes.create_string_buffer(
            _GETEVENTS_ARG.pack(0, 8, 0, ctypes.addressof(self._ts)))

    def _register(self, raw: bytes, what: str) -> None:
        buf = ctypes.create_string_buffer(raw)
        if _syscall(SYS_IO_URING_REGISTER, ctypes.c_int(self.fd),
                    ctypes.c_uint(IORING_REGISTER_NAPI), buf, ctypes.c_uint(1)) < 0:
            raise _fail(f"io_uring_register(IORING_REGISTER_NAPI, {what})")

    def wait(self, seconds: float) -> None:
        """Busy-poll the instances on this CPU for ``seconds`` (at most the registered
        microseconds), then sleep out the rest: a wait for a completion that never
        comes (``ETIME``)."""
        ns = max(int(seconds * 1e9), 1)
        _TIMESPEC.pack_into(self._ts, 0, ns // 1_000_000_000, ns % 1_000_000_000)
        if _syscall(SYS_IO_URING_ENTER, ctypes.c_int(self.fd), ctypes.c_uint(0),
                    ctypes.c_uint(1), ctypes.c_uint(IORING_ENTER_GETEVENTS
                                                    | IORING_ENTER_EXT_ARG),
                    self._arg, ctypes.c_size_t(_GETEVENTS_ARG.size)) < 0:
            err = ctypes.get_errno()
            if err not in (_errno.ETIME, _errno.EINTR, _errno.EAGAIN):
                raise _fail("io_uring_enter")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
