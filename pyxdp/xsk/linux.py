"""The AF_XDP socket over the Linux kernel: ``net/xdp/xsk.c`` driven from Python, no libxdp.

:class:`LinuxXskSocket` does what libxdp's ``xsk_socket__create`` and
``xsk_umem__create`` do, with the ``socket`` module, ``mmap`` and a few libc
calls through ctypes:

1. ``socket(AF_XDP, SOCK_RAW, 0)``;
2. ``setsockopt(SOL_XDP, XDP_UMEM_REG)`` with the ``struct xdp_umem_reg`` of
   a page-aligned :class:`~pyxdp.xsk.umem.Umem` (skipped when sharing a UMEM);
3. ``setsockopt`` of the ring sizes (``XDP_UMEM_FILL_RING``,
   ``XDP_UMEM_COMPLETION_RING``, ``XDP_RX_RING``, ``XDP_TX_RING``);
4. ``getsockopt(XDP_MMAP_OFFSETS)`` and one ``mmap`` per ring at its
   ``XDP_PGOFF_*`` offset, wrapped in :mod:`pyxdp.xsk.queue` rings;
5. ``bind(struct sockaddr_xdp)`` through libc (Python's ``socket.bind``
   does not know AF_XDP addresses) with ``XDP_COPY``/``XDP_ZEROCOPY``,
   ``XDP_USE_NEED_WAKEUP``, ``XDP_USE_SG`` or ``XDP_SHARED_UMEM``.

The batch API (fill, recv, release, send, complete, chunk accounting) is
:class:`~pyxdp.xsk.xsk.XskSocket`'s; this module adds the kernel hooks:
``sendto(fd, NULL, 0, MSG_DONTWAIT)`` to kick TX (copy mode transmits at
most 32 descriptors per call, or ``XDP_MAX_TX_SKB_BUDGET``, and answers
EAGAIN when more are left), ``recvfrom(MSG_DONTWAIT)`` to wake RX,
``poll``, ``XDP_STATISTICS`` and ``XDP_OPTIONS``. Every failure is an
:class:`~pyxdp.net.xdp_umem.XskError` (a ``KernelError``) naming the operation,
the errno and a hint; missing privilege or a kernel without AF_XDP is
:class:`XskUnavailable` (also a ``BPFUnavailable``).

The rings are shared with the kernel through plain loads and stores, which
is only correct on a TSO machine (see :mod:`pyxdp.net.xsk_queue`): other CPUs
are refused with NotSupportedError.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import mmap
import platform
import select
import socket
import struct
import time
from typing import Final, TypeVar

from pyxdp.args import U32_MAX, checked
from pyxdp.errors import BPFUnavailable, NotSupportedError
from pyxdp.kernel.netlink import ifindex_of
from pyxdp.net.xdp_umem import XskError
from pyxdp.net.xsk_queue import Ring, RingKind, ring_bytes
from pyxdp.uapi.if_xdp import (
    AF_XDP,
    SOCKADDR_XDP_STRUCT,
    SOL_XDP,
    XDP_MMAP_OFFSETS_SIZE,
    XDP_OPTIONS_ZEROCOPY,
    XDP_STATISTICS_SIZE,
    XdpBindFlag,
    XdpMmapOffsets,
    XdpPgoff,
    XdpRingOffset,
    XdpSockopt,
    XdpStatistics,
)
from pyxdp.xsk.queue import RingCons, RingProd
from pyxdp.xsk.umem import Umem
from pyxdp.xsk.xsk import POLL_RX_TX, RING_SIZES, ChunkPool, XskSocket, bind_flags

__all__ = ["DEFAULT_RING_SIZE", "LinuxXskSocket", "XskUnavailable"]

DEFAULT_RING_SIZE: Final = 2048  # XSK_RING_{PROD,CONS}__DEFAULT_NUM_DESCS
_R = TypeVar("_R", bound=Ring)
_TSO_MACHINES: Final = frozenset({"x86_64", "amd64", "i386", "i686"})


class XskUnavailable(BPFUnavailable, XskError):
    """AF_XDP cannot be used here: no CAP_NET_RAW, or a kernel without AF_XDP."""


# --------------------------------------------------------------------------
# libc
# --------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_bind = _libc.bind
_bind.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
_bind.restype = ctypes.c_int
_sendto = _libc.sendto
_sendto.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                    ctypes.c_void_p, ctypes.c_uint32]
_sendto.restype = ctypes.c_ssize_t
_recvfrom = _libc.recvfrom
_recvfrom.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                      ctypes.c_void_p, ctypes.c_void_p]
_recvfrom.restype = ctypes.c_ssize_t
_MSG_DONTWAIT: Final = socket.MSG_DONTWAIT

# Hints for the errnos each operation answers (net/xdp/xsk.c, xdp_umem.c).
_HINTS: Final[dict[tuple[str, int], str]] = {
    ("socket", _errno.EPERM): "needs CAP_NET_RAW",
    ("socket", _errno.EAFNOSUPPORT): "kernel without AF_XDP (CONFIG_XDP_SOCKETS)",
    ("umem", _errno.EBUSY): "a UMEM is already registered, or the socket is bound",
    ("umem", _errno.EINVAL): "bad UMEM geometry (chunk size, headroom, alignment, flags)",
    ("umem", _errno.ENOBUFS): "over RLIMIT_MEMLOCK: raise it or have CAP_IPC_LOCK",
    ("umem", _errno.EFAULT): "the UMEM address range is not mapped",
    ("umem", _errno.ENOMEM): "the kernel could not pin the UMEM pages",
    ("ring", _errno.EINVAL): "size not a power of two, or the ring exists already",
    ("ring", _errno.EBUSY): "the socket is already bound",
    ("ring", _errno.ENOMEM): "the kernel could not allocate the ring",
    ("mmap", _errno.EINVAL): "the ring was not created, or the size exceeds it",
    ("bind", _errno.EBUSY): "a socket is already bound to that queue (or the socket is bound)",
    ("bind", _errno.EINVAL): "bad flags (XDP_COPY with XDP_ZEROCOPY, flags with "
                             "XDP_SHARED_UMEM), queue id past the device's queues, "
                             "or missing rings/UMEM",
    ("bind", _errno.ENODEV): "no such interface",
    ("bind", _errno.EOPNOTSUPP): "the driver cannot do zero-copy: bind with XDP_COPY",
    ("bind", _errno.EBADF): "shared_umem_fd is not an open descriptor",
    ("bind", _errno.ENOTSOCK): "shared_umem_fd is not a socket",
    ("bind", _errno.EPERM): "needs CAP_NET_RAW",
    ("sendto", _errno.ENETDOWN): "the interface is down",
    ("sendto", _errno.ENXIO): "the socket is not bound",
    ("sendto", _errno.ENOBUFS): "the socket has no tx ring",
    ("sendto", _errno.EOPNOTSUPP): "sendmsg without MSG_DONTWAIT",
    ("recvfrom", _errno.ENXIO): "the socket is not bound",
    ("budget", _errno.ENOPROTOOPT): "kernel without XDP_MAX_TX_SKB_BUDGET (Linux 6.17+)",
    ("budget", _errno.EACCES): "budget outside [32, tx ring size] (6.18 answers EACCES)",
    ("sendto", _errno.EINVAL): "the kernel cannot build the next tx descriptor (e.g. "
                               "XDP_TX_METADATA on a UMEM without tx_metadata_len): "
                               "the tx ring is stuck on it",
}


def _error(op: str, kind: str, err: int, detail: str = "") -> XskError:
    hint = detail or _HINTS.get((kind, err), "")
    if kind == "socket" and err in (_errno.EPERM, _errno.EACCES, _errno.EAFNOSUPPORT):
        return XskUnavailable(op, err, hint)
    return XskError(op, err, hint)


class _Mapped:
    """One mmap'd ring and how many sockets use it (shared fill/completion rings)."""

    def __init__(self, ring: Ring, mm: mmap.mmap) -> None:
        self.ring = ring
        self.mm = mm
        self.users = 1

    def put(self) -> None:
        self.users -= 1
        if self.users == 0:
            self.ring.close()
            self.mm.close()


# --------------------------------------------------------------------------
# The socket
# --------------------------------------------------------------------------

class LinuxXskSocket(XskSocket):
    """An AF_XDP socket of the running kernel, with its UMEM and rings.

    ``umem``: the UMEM to register (default: a new one of ``fill_size +
    comp_size`` chunks, owned and closed by the socket). ``ifname`` and
    ``queue_id``: bind right away (else call :meth:`bind`). ``mode``:
    ``"copy"`` (``XDP_COPY``), ``"zerocopy"`` (``XDP_ZEROCOPY``) or None (the
    kernel tries zero-copy and falls back to copy). ``need_wakeup`` binds with
    ``XDP_USE_NEED_WAKEUP``; ``sg`` with ``XDP_USE_SG``. A ring size of 0
    leaves that ring out. ``shared``: an already bound socket whose UMEM this
    one shares (``XDP_SHARED_UMEM``); on the same device and queue it also
    shares its fill and completion rings, elsewhere it gets its own.
    """

    @checked(queue_id=(0, U32_MAX), **RING_SIZES)
    def __init__(self, ifname: str | int | None = None, queue_id: int = 0,
                 umem: Umem | None = None, *, mode: str | None = "copy",
                 need_wakeup: bool = True, sg: bool = False,
                 fill_size: int = DEFAULT_RING_SIZE, comp_size: int = DEFAULT_RING_SIZE,
                 rx_size: int = DEFAULT_RING_SIZE, tx_size: int = DEFAULT_RING_SIZE,
                 shared: LinuxXskSocket | None = None) -> None:
        if platform.machine().lower() not in _TSO_MACHINES:
            raise NotSupportedError(f"AF_XDP rings on {platform.machine()}: pyxdp's ring "
                                    "code relies on x86 (TSO) memory ordering")
        if mode not in ("copy", "zerocopy", None):
            raise ValueError(f"mode {mode!r}: 'copy', 'zerocopy' or None")
        self.mode = mode
        self.sg = sg
        self.ifindex = 0
        self.queue_id = 0
        self.bound = False
        self._maps: list[_Mapped] = []
        self._owned_umem: Umem | None = None
        try:
            self.sock = socket.socket(AF_XDP, socket.SOCK_RAW | socket.SOCK_CLOEXEC, 0)
        except OSError as e:
            raise _error("socket(AF_XDP)", "socket", e.errno or _errno.EINVAL) from None
        try:
            self._setup(ifname, queue_id, umem, need_wakeup, fill_size, comp_size,
                        rx_size, tx_size, shared)
        except BaseException:
            self._release()
            raise

    def _setup(self, ifname: str | int | None, queue_id: int, umem: Umem | None,
               need_wakeup: bool, fill_size: int, comp_size: int, rx_size: int,
               tx_size: int, shared: LinuxXskSocket | None) -> None:
        self.shared_with = shared
        share_rings = False
        if shared is not None:
            if shared.closed:  # its fd is gone: the bind's sockfd_lookup fails
                raise XskError("bind", _errno.EBADF, "the socket to share a UMEM with is "
                                                     "closed")
            if not shared.bound:
                raise XskError("bind", _errno.EINVAL, "the socket to share a UMEM with is "
                                                     "not bound")
            umem, pool = shared.umem, shared.pool
            need_wakeup = shared.need_wakeup  # the pool's setting; XDP_SHARED_UMEM allows no flags
            share_rings = (ifname is not None and ifindex_of(ifname) == shared.ifindex
                           and queue_id == shared.queue_id)
        else:
            if umem is None:
                umem = self._owned_umem = Umem(max(fill_size + comp_size, 1))
            self._setsockopt("setsockopt(XDP_UMEM_REG)", "umem", XdpSockopt.XDP_UMEM_REG,
                             umem.reg_bytes())
            pool = ChunkPool(umem)
        want = {XdpSockopt.XDP_RX_RING: rx_size, XdpSockopt.XDP_TX_RING: tx_size}
        if not share_rings:
            want[XdpSockopt.XDP_UMEM_FILL_RING] = fill_size
            want[XdpSockopt.XDP_UMEM_COMPLETION_RING] = comp_size
        for opt, n in want.items():
            if n:
                self._setsockopt(f"setsockopt({opt.name})", "ring", opt,
                                 struct.pack("=I", n & U32_MAX))
        self.mmap_offsets = self._mmap_offsets()
        off = self.mmap_offsets
        rx = self._map(RingCons, XdpPgoff.XDP_PGOFF_RX_RING, rx_size, "desc", off.rx)
        tx = self._map(RingProd, XdpPgoff.XDP_PGOFF_TX_RING, tx_size, "desc", off.tx)
        if share_rings:
            assert shared is not None
            fill, comp = shared.fill_ring, shared.comp_ring
            for m in shared._maps:
                if m.ring is fill or m.ring is comp:
                    m.users += 1
                    self._maps.append(m)
        else:
            fill = self._map(RingProd, XdpPgoff.XDP_UMEM_PGOFF_FILL_RING, fill_size, "addr",
                             off.fr)
            comp = self._map(RingCons, XdpPgoff.XDP_UMEM_PGOFF_COMPLETION_RING, comp_size,
                             "addr", off.cr)
        super().__init__(umem, pool, fill, comp, rx, tx, need_wakeup=need_wakeup)
        if ifname is not None:
            self.bind(ifname, queue_id)

    # -- syscalls -----------------------------------------------------------------

    @property
    def fd(self) -> int:
        """The socket's descriptor (the value an XSKMAP slot takes)."""
        return self.sock.fileno()

    def _setsockopt(self, op: str, kind: str, opt: int, value: bytes) -> None:
        try:
            self.sock.setsockopt(SOL_XDP, opt, value)
        except OSError as e:
            raise _error(op, kind, e.errno or _errno.EINVAL) from None

    def _getsockopt(self, op: str, opt: int, size: int) -> bytes:
        try:
            return self.sock.getsockopt(SOL_XDP, opt, size)
        except OSError as e:
            raise _error(op, "getsockopt", e.errno or _errno.EINVAL) from None

    def _mmap_offsets(self) -> XdpMmapOffsets:
        raw = self._getsockopt("getsockopt(XDP_MMAP_OFFSETS)", XdpSockopt.XDP_MMAP_OFFSETS,
                               XDP_MMAP_OFFSETS_SIZE)
        if len(raw) < XDP_MMAP_OFFSETS_SIZE:
            raise XskError("getsockopt(XDP_MMAP_OFFSETS)", _errno.EINVAL,
                           f"{len(raw)}-byte answer: a kernel without ring flags (< 5.4)")
        return XdpMmapOffsets.unpack(raw)

    def _map(self, cls: type[_R], pgoff: int, entries: int, kind: RingKind,
             off: XdpRingOffset) -> _R | None:
        if not entries:
            return None
        size = ring_bytes(entries, kind, off)
        try:
            mm = mmap.mmap(self.fd, size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE,
                           prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=pgoff)
        except OSError as e:
            raise _error(f"mmap({XdpPgoff(pgoff).name})", "mmap",
                         e.errno or _errno.EINVAL) from None
        ring = cls(mm, entries, kind, offsets=off)
        self._maps.append(_Mapped(ring, mm))
        return ring

    def bind_flags(self) -> XdpBindFlag:
        """The ``sxdp_flags`` :meth:`bind` passes for this socket's settings."""
        return bind_flags(self.shared_with is not None, self.mode, self.need_wakeup, self.sg)

    @checked(queue_id=(0, U32_MAX), flags=(0, 0xFFFF))
    def bind(self, ifname: str | int, queue_id: int = 0, flags: int | None = None, *,
             busy_timeout: float = 0.5) -> None:
        """``bind(sockaddr_xdp)`` to queue ``queue_id`` of ``ifname`` (this netns).

        ``flags`` overrides :meth:`bind_flags` (raw ``XdpBindFlag`` bits).
        EBUSY is retried for ``busy_timeout`` seconds: a socket closed a
        moment ago keeps its queue until the kernel's deferred pool release
        has run (measured: ~15 ms).
        """
        self._live("bind")  # (the closed fd would read as a bad shared_umem_fd)
        ifindex = ifindex_of(ifname)
        fl = int(self.bind_flags() if flags is None else flags)
        share_fd = self.shared_with.fd if self.shared_with is not None else 0
        addr = SOCKADDR_XDP_STRUCT.pack(AF_XDP, fl, ifindex, queue_id, share_fd)
        deadline = time.monotonic() + busy_timeout
        while _bind(self.fd, addr, len(addr)) != 0:
            err = ctypes.get_errno()
            if err == _errno.EBUSY and not self.bound and time.monotonic() < deadline:
                time.sleep(0.002)
                continue
            raise _error(f"bind(AF_XDP {ifname} queue {queue_id})", "bind", err,
                         self._bind_einval(fl, queue_id) if err == _errno.EINVAL else "")
        self.ifindex = ifindex
        self.queue_id = queue_id
        self.bound = True

    def _bind_einval(self, fl: int, queue_id: int) -> str:
        """Which of xsk_bind's EINVAL rules our side can tell was broken."""
        if fl & ~int(XdpBindFlag.XDP_SHARED_UMEM | XdpBindFlag.XDP_COPY
                     | XdpBindFlag.XDP_ZEROCOPY | XdpBindFlag.XDP_USE_NEED_WAKEUP
                     | XdpBindFlag.XDP_USE_SG):
            return f"unknown flags {fl:#x}"
        if fl & XdpBindFlag.XDP_COPY and fl & XdpBindFlag.XDP_ZEROCOPY:
            return "XDP_COPY and XDP_ZEROCOPY together"
        if fl & XdpBindFlag.XDP_SHARED_UMEM and fl != int(XdpBindFlag.XDP_SHARED_UMEM):
            return "XDP_SHARED_UMEM takes no other flag"
        if fl & XdpBindFlag.XDP_SHARED_UMEM and self.shared_with is None:
            return "XDP_SHARED_UMEM on a socket that registered its own UMEM"
        if self.rx is None and self.tx is None:
            return "the socket has neither an rx nor a tx ring"
        if self.shared_with is None and (self.fill_ring is None or self.comp_ring is None):
            return "a socket with its own UMEM needs fill and completion rings"
        return f"queue id {queue_id} is past the device's queues"

    def _kick_tx(self) -> bool:
        if _sendto(self.fd, None, 0, _MSG_DONTWAIT, None, 0) >= 0:
            return False
        err = ctypes.get_errno()
        if err in (_errno.EAGAIN, _errno.EBUSY):
            # EAGAIN: the budget ran out or the completion ring is full;
            # EBUSY: the device dropped a frame (NET_XMIT_DROP). Both: retry.
            return True
        raise _error("sendto(AF_XDP)", "sendto", err)

    def _wakeup_rx(self) -> None:
        if _recvfrom(self.fd, None, 0, _MSG_DONTWAIT, None, None) < 0:
            err = ctypes.get_errno()
            if err == _errno.ENXIO:
                raise _error("recvfrom(AF_XDP)", "recvfrom", err)

    @checked(timeout_ms=(-1, (1 << 31) - 1), events=(0, 0xFFFF))
    def poll(self, timeout_ms: int = 0, events: int = POLL_RX_TX) -> int:
        """poll(2) for ``events``; returns those ready (0 on timeout).

        In copy mode a poll with a tx ring also transmits, as ``sendto``. A
        receive loop asks for ``POLLIN`` alone: the tx ring has room at once,
        so ``POLLOUT`` would end every wait immediately.
        """
        self._live("poll")
        p = select.poll()
        p.register(self.fd, events)
        ready = p.poll(timeout_ms)
        return ready[0][1] if ready else 0

    def statistics(self) -> XdpStatistics:
        """``getsockopt(XDP_STATISTICS)``, the 48-byte form."""
        return XdpStatistics.unpack(self._getsockopt("getsockopt(XDP_STATISTICS)",
                                                     XdpSockopt.XDP_STATISTICS,
                                                     XDP_STATISTICS_SIZE))

    def options(self) -> int:
        """``getsockopt(XDP_OPTIONS)``: ``XDP_OPTIONS_ZEROCOPY`` when bound zero-copy."""
        raw = self._getsockopt("getsockopt(XDP_OPTIONS)", XdpSockopt.XDP_OPTIONS, 4)
        value: int = struct.unpack("=I", raw[:4].ljust(4, b"\0"))[0]
        return value

    @property
    def zerocopy(self) -> bool:
        return bool(self.options() & XDP_OPTIONS_ZEROCOPY)

    @checked(budget=(-(1 << 31), (1 << 31) - 1))  # the option's int
    def set_tx_budget(self, budget: int) -> None:
        """``XDP_MAX_TX_SKB_BUDGET``: descriptors one copy-mode ``sendto`` may send."""
        self._setsockopt("setsockopt(XDP_MAX_TX_SKB_BUDGET)", "budget",
                         XdpSockopt.XDP_MAX_TX_SKB_BUDGET, struct.pack("=i", budget))

    # -- lifetime -----------------------------------------------------------------

    def _release(self) -> None:
        for m in self._maps:
            m.put()
        self._maps = []
        self.sock.close()
        self._umem_put()  # a constructor that failed after registering
        if self._owned_umem is not None:
            self._owned_umem.close()

    def _close_backend(self) -> None:
        self._release()

    def __repr__(self) -> str:
        where = f"ifindex {self.ifindex} queue {self.queue_id}" if self.bound else "unbound"
        return f"LinuxXskSocket(fd {self.sock.fileno()}, {where}, {self.umem!r})"
