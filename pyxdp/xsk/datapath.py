"""AF_XDP sockets on pyxdp's datapath, the user's side: the socket API's pyxdp backend.

:class:`PyxdpXskSocket` is an :class:`~pyxdp.xsk.xsk.XskSocket` (the same
batch API as :class:`~pyxdp.xsk.linux.LinuxXskSocket`) bound to a queue of a
pyxdp device (:class:`~pyxdp.net.netdevice.NetDevice`). Its four rings live
in anonymous shared memory: the user drives its side with the libxdp-style
producer/consumer of :mod:`pyxdp.xsk.queue`, the datapath the kernel's lazy
side of the same bytes.

The kernel's side of the socket is :class:`pyxdp.net.xsk.XdpSock`
(``net/xdp/xsk.c``: bind, receive, transmit, poll, statistics, release; the
rules it models and the errnos are documented there), and a
:class:`PyxdpXskSocket` is one, so XSKMAPs and ``bpf_redirect_xsk`` hold the
object the user holds. Buffer pools and zero-copy are
:mod:`pyxdp.net.xsk_buff_pool`; receive in the native poll loop is
:mod:`pyxdp.net.xsk_native`. This module adds what the user sees: the
constructor's defaults (libxdp's ring sizes, a UMEM of its own), the bind
flags its settings mean, the :class:`~pyxdp.xsk.xsk.XskSocket` hooks and
the chunk pool.

pyxdp has no file descriptors: a socket gets an ``fd``, a number its
host's userspace backend resolves in XSKMAP updates (as a program's id is
its "fd" in a devmap). Closing a socket removes it from every XSKMAP
(``xsk_delete_from_maps``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pyxdp.args import U32_MAX, checked
from pyxdp.net.xsk import BOUND, XdpSock
from pyxdp.net.xsk_buff_pool import XskNetDevice
from pyxdp.net.xsk_queue import ring_view
from pyxdp.uapi.if_xdp import XdpBindFlag, XdpStatistics
from pyxdp.xsk.queue import RingCons, RingProd
from pyxdp.xsk.umem import Umem
from pyxdp.xsk.xsk import POLL_RX_TX, RING_SIZES, ChunkPool, XskSocket, bind_flags

if TYPE_CHECKING:
    from pyxdp.net.netdevice import Host, NetDevice

__all__ = ["DEFAULT_RING_SIZE", "PyxdpXskSocket"]

DEFAULT_RING_SIZE: Final = 2048  # XSK_RING_{PROD,CONS}__DEFAULT_NUM_DESCS


class PyxdpXskSocket(XdpSock, XskSocket):
    """An AF_XDP socket of pyxdp's datapath, with its UMEM and rings.

    ``dev``/``queue_id``: the device (a :class:`~pyxdp.net.netdevice.NetDevice`)
    and queue to bind to right away (``dev=None``: unbound, then ``host`` is
    required; call :meth:`bind`). ``umem``: the UMEM to register (default: a
    new one of ``fill_size + comp_size`` chunks, owned and closed by the
    socket). ``mode``: ``"copy"`` (``XDP_COPY``), ``"zerocopy"``
    (``XDP_ZEROCOPY``) or None (zero-copy where the device can, else copy).
    ``need_wakeup`` binds with ``XDP_USE_NEED_WAKEUP``, ``sg`` with
    ``XDP_USE_SG``. A ring size of 0 leaves that ring out. ``shared``: a bound
    socket whose UMEM this one shares (``XDP_SHARED_UMEM``): on the same
    device and queue it shares the fill and completion rings too.
    """

    host: Host
    umem: Umem

    @checked(queue_id=(0, U32_MAX), **RING_SIZES)
    def __init__(self, dev: NetDevice | None = None, queue_id: int = 0,
                 umem: Umem | None = None, *, host: Host | None = None,
                 mode: str | None = "copy", need_wakeup: bool = True, sg: bool = False,
                 fill_size: int = DEFAULT_RING_SIZE, comp_size: int = DEFAULT_RING_SIZE,
                 rx_size: int = DEFAULT_RING_SIZE, tx_size: int = DEFAULT_RING_SIZE,
                 shared: PyxdpXskSocket | None = None) -> None:
        if mode not in ("copy", "zerocopy", None):
            raise ValueError(f"mode {mode!r}: 'copy', 'zerocopy' or None")
        # The socket's host is the namespace it is created in: host= when given (a
        # device of another host is then ENODEV at bind, as an ifindex of another
        # network namespace), else the device's or the shared socket's.
        h = host if host is not None else dev.host if dev is not None else \
            shared.host if shared is not None else None
        if h is None:
            raise ValueError("an unbound socket needs host=")
        self.mode = mode
        self._owned_umem: Umem | None = None
        if shared is not None:
            # XdpSock refuses (EBADF) a socket to share with that is not bound.
            umem, cpool = shared.umem, shared.pool
            need_wakeup = shared.need_wakeup
            share_rings = (dev is not None and dev is shared.dev
                           and queue_id == shared.queue_id)
        else:
            if umem is None:
                umem = self._owned_umem = Umem(max(fill_size + comp_size, 1))
            cpool = ChunkPool(umem)
            share_rings = False
        XdpSock.__init__(self, h, umem, sg=sg, fill_size=fill_size, comp_size=comp_size,
                         rx_size=rx_size, tx_size=tx_size, shared=shared,
                         share_rings=share_rings, user_rings=(RingProd, RingCons))
        XskSocket.__init__(self, umem, cpool, ring_view(self._fq_mem, "user", RingProd),
                           ring_view(self._cq_mem, "user", RingCons),
                           ring_view(self._rx_mem, "user", RingCons),
                           ring_view(self._tx_mem, "user", RingProd), need_wakeup=need_wakeup)
        self.fd = self.host.backend.xsk_register(self)
        if dev is not None:
            try:
                self.bind(dev, queue_id)
            except BaseException:
                self.close()
                raise

    # -- bind -----------------------------------------------------------------------
    def bind_flags(self) -> XdpBindFlag:
        """The ``sxdp_flags`` :meth:`bind` passes for this socket's settings."""
        return bind_flags(self.shared_with is not None, self.mode, self.need_wakeup, self.sg)

    @checked(queue_id=(0, U32_MAX), flags=(0, 0xFFFF))
    def bind(self, dev: XskNetDevice | str | int, queue_id: int = 0,
             flags: int | None = None) -> None:
        """``bind(sockaddr_xdp)`` to queue ``queue_id`` of ``dev`` (a device of this
        socket's host, or its name or ifindex); raises
        :class:`~pyxdp.net.xdp_umem.XskError` with the kernel's errno. ``flags``
        overrides :meth:`bind_flags`."""
        self._live("bind")  # a closed socket's fd is gone: EBADF before anything else
        XdpSock.bind(self, dev, queue_id, int(self.bind_flags() if flags is None else flags))

    # -- the XskSocket hooks: the syscalls of net/xdp/xsk.c ----------------------------
    def _kick_tx(self) -> bool:
        return self.sendmsg()

    def _wakeup_rx(self) -> None:
        self.recvmsg()

    @checked(timeout_ms=(-1, (1 << 31) - 1), events=(0, 0xFFFF))
    def poll(self, timeout_ms: int = 0, events: int = POLL_RX_TX) -> int:
        """``xsk_poll``: ``POLLIN`` (rx entries), ``POLLOUT`` (tx ring at most half full).

        Copy-mode tx is driven as by ``sendto``. With a timeout and nothing
        ready, the host runs one softirq round first (its NAPI runs here).
        A closed socket is EBADF, as Linux's ``poll`` answers ``POLLNVAL`` for it.
        """
        self._live("poll")
        return self.xsk_poll(timeout_ms) & events

    def statistics(self) -> XdpStatistics:
        """``getsockopt(XDP_STATISTICS)``; EBADF once closed (the fd is gone)."""
        self._live("getsockopt(XDP_STATISTICS)")
        return XdpSock.statistics(self)

    def options(self) -> int:
        """``getsockopt(XDP_OPTIONS)``; EBADF once closed (the fd is gone)."""
        self._live("getsockopt(XDP_OPTIONS)")
        return XdpSock.options(self)

    def _close_backend(self) -> None:
        """``close``: the kernel's ``xsk_release``, then the UMEM this socket made."""
        self.xsk_release()
        if self._owned_umem is not None:
            self._owned_umem.close()

    def __repr__(self) -> str:
        where = (f"{self.dev.name} queue {self.queue_id}" if self.state == BOUND
                 and self.dev is not None else "unbound")
        mode = "zero-copy" if self.zc else "copy"
        return f"PyxdpXskSocket(fd {self.fd}, {where}, {mode}, {self.umem!r})"
