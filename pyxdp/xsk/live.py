"""pyxdp's datapath on real Linux interfaces: a NIC whose queues are AF_XDP sockets.

What a userspace XDP dataplane over AF_XDP does (``xdp-tools``' ``xsk`` +
``libxdp`` redirect program, ``samples/bpf/xdpsock``): per rx queue of the
Linux interface an AF_XDP socket (``xsk_bind``: zero-copy where the driver
allows, copy mode otherwise), and in the kernel a small program,
``bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)``, attached through a
bpf_link, which hands every frame to the queue's socket. pyxdp then runs the
user's object on those frames in its own datapath:

- :class:`LiveNic` is a :class:`~pyxdp.net.netdevice.NetDevice` with the
  interface's ifindex, name, MAC and MTU; each rx queue is fed by a
  :class:`_XskPort` whose UMEM is the queue's page pool (the pool's memory
  registered with ``XDP_UMEM_REG``: chunk i is page i), so frames reach the
  program in the pages the kernel wrote, without a copy: one native call per
  round queues the rx ring's descriptors as they are and refills the fill
  ring from the pool's allocator, as a driver's rx refill does; the pages
  the kernel holds are marked lent) and polled
  by its own worker thread (one per queue, :class:`LiveDataplane`), which
  sleeps in ``poll`` while the rx ring is empty (the kernel's ``sk_data_ready``
  wakes it) and, while traffic flows, lets frames gather between rounds as a
  NIC's interrupt coalescing does (``LiveOptions.rx_usecs``) instead of
  spinning: it takes no CPU it does not use;
- XDP_TX and redirects to a :class:`LiveNic` leave by its transmit wire
  (:mod:`pyxdp.net.xsk_wire`, ``NetDevice.xmit_wires``): the native poll loop
  copies each frame of a bulk into a free chunk of the wire (pool pages it
  holds while the socket lives) and writes the tx
  descriptor itself, the completion ring gives the chunks back; the worker
  kicks (``sendto``) once per round: out of the interface as AF_XDP
  transmits. The Python path (``ndo_xdp_xmit``) writes the same ring;
- XDP_PASS: the skbs the program passed are written to a TAP device that
  pyxdp creates per interface (``<if>-pass``, the interface's MAC, no IPv6
  link-local of its own, ``rp_filter`` off): ``tun_get_user`` hands them to
  the kernel's receive path, whose sockets get them as they would have from
  the interface (addresses are host-wide); what the kernel sends back out of
  the TAP (ARP replies, ICMP errors) is transmitted on the interface;
- where AF_XDP is not there (``socket(AF_XDP)`` refused) or not wanted
  (``backend="packet"``), :mod:`pyxdp.net.af_packet`'s TPACKET_V3 ring feeds
  the queue and a TPACKET_V2 ring transmits; the kernel keeps its own copy of
  every frame then, so PASS needs no reinjection and DROP cannot take a frame
  away from the stack (docs/SEMANTICS.md).

Everything pyxdp puts into the kernel is owned by descriptors of this process
(the bpf_link, the sockets, the TAP's file): a clean exit or SIGKILL leaves
nothing attached and no TAP behind.

On a veth the kernel half of the receive (the redirect program, AF_XDP's copy
into the UMEM) runs in the veth's NAPI, which the peer's transmit schedules in
its own softirq: the sender pays for it. ``LiveOptions.threaded_napi`` puts each
NAPI instance of the interface in threaded mode while pyxdp runs (a kthread
polls it, as on a NIC whose interrupts another CPU takes), and back at close; a
veth's NAPI goes with the detach, so after SIGKILL nothing stays threaded either
(a hardware NIC's NAPI outlives the detach: there it stays threaded).
``LiveOptions.busy_poll`` keeps the kernel half on the worker's CPU instead, with
no third thread: each worker polls the interface's NAPI instances itself
whenever it would wait (an io_uring that names them,
:mod:`pyxdp.kernel.io_uring_napi`: a copy-mode AF_XDP socket has no NAPI id of
its own to busy-poll), preferring those polls to the instance's "interrupt",
and the instances its attach created get ``defer-hard-irqs`` and
``gro-flush-timeout`` (``BUSY_POLL_DEFER``) so that they stay masked between
polls; the io_uring goes with the process and a veth's NAPI with the detach,
so after SIGKILL nothing is left changed.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import fcntl
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pyxdp.asm.assembler import assemble
from pyxdp.collection import Collection, Program
from pyxdp.errors import KernelError, PyxdpError
from pyxdp.kernel.io_uring_napi import NapiBusyPoller
from pyxdp.kernel.link import XdpLink
from pyxdp.kernel.netdev_genl import (
    NapiIrqDefer,
    defer_napis,
    napi_get,
    restore_napis,
    thread_napis,
    unthread_napis,
)
from pyxdp.kernel.netlink import ifindex_of
from pyxdp.net.af_packet import (
    PacketRxRing,
    PacketTxRing,
    gather_rows,
    gather_rows_vlan,
    scatter_rows,
)
from pyxdp.net.atomic import (
    i64_view,
    load_acquire32_at,
    store_release32_at,
)
from pyxdp.net.frame_ring import ring_lock, ring_unlock
from pyxdp.net.frames import Frames, RingCursor
from pyxdp.net.napi_native import _recycle
from pyxdp.net.native import njit
from pyxdp.net.netdevice import Host, NetDevice, NetdevStats
from pyxdp.net.page_pool import PAGE_SIZE, PageAccountingError
from pyxdp.net.page_pool_native import _alloc
from pyxdp.net.stack import SkbBatch
from pyxdp.net.xdp import XDP_PACKET_HEADROOM
from pyxdp.net.xdp_umem import XskError
from pyxdp.net.xsk_queue import Q_CC, Q_CONS, Q_CP, Q_MASK, Q_PROD, Q_PUB, Q_RING
from pyxdp.net.xsk_wire import XskWireState, wire_reap, wire_xmit_rows
from pyxdp.spec import CollectionSpec, MapRef, MapSpec, ProgramSpec
from pyxdp.uapi.bpf import BpfAttachType, BpfMapType
from pyxdp.xsk.linux import LinuxXskSocket
from pyxdp.xsk.umem import Umem

__all__ = ["LiveDataplane", "LiveError", "LiveNic", "add_live_device", "redirect_spec"]

MAX_FRAME = PAGE_SIZE - XDP_PACKET_HEADROOM - 320  # what one pyxdp page holds
RING = 4096  # AF_XDP ring sizes (fill, rx, tx, completion)
BATCH = 2048  # frames taken from a socket per round: the Python around each round is paid
# once per batch, so batches are large (the rx ring queue holds two)
RX_RING = 2 * BATCH
TX_CHUNKS = RING  # pages a queue's transmit wire holds
# A queue's page pool is its socket's UMEM: pages for a full fill ring and a full rx
# ring (the kernel's), a full device rx ring (the program's) and the wire's.
POOL_PAGES = 2 * RING + RX_RING + TX_CHUNKS
GATHER = BATCH // 2  # frames a round aims at while traffic flows (a quarter of the fill
# ring: a rate four times the last round's still finds fill descriptors)
IDLE_POLL_MS = 20  # an idle worker's poll timeout: how soon it sees stop()
# Busy polling (LiveOptions.busy_poll): how long the NAPI stays masked - its interrupt,
# on a veth the peer's transmit, not scheduling it - after a busy poll: up to
# BUSY_POLL_DEFER's defer-hard-irqs empty timer polls, gro-flush-timeout apart, on the
# worker's CPU; the longest busy wait in microseconds (a gather wait is one, rx_usecs).
BUSY_POLL_MAX_WAIT = 1000
BUSY_POLL_USECS = 50  # --busy-poll without a value
BUSY_POLL_DEFER = NapiIrqDefer(defer_hard_irqs=2, gro_flush_timeout=200_000)


class LiveError(PyxdpError):
    """A live interface could not be set up (no such interface, no AF_XDP...)."""


def redirect_spec(max_queues: int = 64) -> CollectionSpec:
    """The kernel side: ``return bpf_redirect_map(&xsks, ctx->rx_queue_index,
    XDP_PASS);`` - a queue without a socket passes its frames to the stack."""
    insns = assemble("r2 = *(u32 *)(r1 + 16)\nr1 = 0 ll\nr3 = 2\ncall 51\nexit")
    prog = ProgramSpec(name="pyxdp_xsk_redir", section="xdp", insns=insns, license="GPL",
                       map_refs=(MapRef(1, "xsks", "fd"),))
    xsks = MapSpec("xsks", BpfMapType.BPF_MAP_TYPE_XSKMAP, 4, 4, max_queues)
    return CollectionSpec(programs={prog.name: prog}, maps={"xsks": xsks}, license="GPL",
                          name="pyxdp_live")


# -----------------------------------------------------------------------------------
# Interface facts through ioctls (they answer in the caller's network namespace)
# -----------------------------------------------------------------------------------

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
SIOCGIFMTU = 0x8921
SIOCSIFHWADDR = 0x8924
SIOCGIFHWADDR = 0x8927
SIOCETHTOOL = 0x8946
ETHTOOL_GCHANNELS = 0x3C
IFF_UP = 0x1
TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000


def _ifreq(name: str, data: bytes = b"") -> bytearray:
    b = bytearray(40)
    raw = name.encode()
    b[:len(raw)] = raw
    b[16:16 + len(data)] = data
    return b


def _ioctl(name: str, req: int, data: bytes = b"") -> bytearray:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        buf = _ifreq(name, data)
        try:
            fcntl.ioctl(s.fileno(), req, buf)
        except OSError as e:
            raise KernelError(f"ioctl {req:#x}", e.errno or _errno.ENODEV, name) from None
        return buf


def if_mac(name: str) -> bytes:
    return bytes(_ioctl(name, SIOCGIFHWADDR)[18:24])


def if_mtu(name: str) -> int:
    return int(struct.unpack_from("=i", _ioctl(name, SIOCGIFMTU), 16)[0])


def if_rx_queues(name: str) -> int:
    """The interface's rx queues (``ethtool -l``: rx or combined channels; 1 when the
    driver does not say)."""
    ch = ctypes.create_string_buffer(struct.pack("=9I", ETHTOOL_GCHANNELS, *([0] * 8)))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        buf = _ifreq(name, struct.pack("=Q", ctypes.addressof(ch)))
        try:
            fcntl.ioctl(s.fileno(), SIOCETHTOOL, buf)
        except OSError:
            return 1
    f = struct.unpack("=9I", ch.raw[:36])
    return int(max(f[5], f[8], 1))  # rx_count, combined_count


def _set_up(name: str) -> None:
    flags = struct.unpack_from("=H", _ioctl(name, SIOCGIFFLAGS), 16)[0]
    _ioctl(name, SIOCSIFFLAGS, struct.pack("=H", flags | IFF_UP))


def _sysctl(path: str, value: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError:
        pass  # a kernel without that knob (no IPv6): nothing to turn off


# -----------------------------------------------------------------------------------
# The TAP device XDP_PASS goes through
# -----------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_write = _libc.write
_write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
_write.restype = ctypes.c_ssize_t
_read = _libc.read
_read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
_read.restype = ctypes.c_ssize_t


@njit(nogil=True)  # not cached: it calls libc through ctypes pointers
def _write_rows(fd, data, lens):  # type: ignore[no-untyped-def]
    """One ``write()`` per row (a TAP takes one frame per write); returns the
    frames written (stops at the first refusal)."""
    base = data.ctypes.data
    stride = data.shape[1]
    for i in range(len(lens)):
        if _write(fd, base + i * stride, lens[i]) < 0:
            return i
    return len(lens)


@njit(nogil=True)  # not cached: it calls libc through ctypes pointers
def _read_rows(fd, out, lens):  # type: ignore[no-untyped-def]
    """``read()`` frames into the rows of ``out`` until none waits (non-blocking fd)."""
    base = out.ctypes.data
    stride = out.shape[1]
    for i in range(out.shape[0]):
        r = _read(fd, base + i * stride, stride)
        if r <= 0:
            return i
        lens[i] = r
    return out.shape[0]


class PassTap:
    """A TAP device standing for ``ifname`` on the kernel's side: frames written to it
    are received by the kernel's stack (``tun_get_user``)."""

    def __init__(self, ifname: str, mac: bytes, mtu: int) -> None:
        self.name = f"{ifname[:10]}-pass"
        try:
            self.fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as e:
            raise LiveError(f"{ifname}: no TAP device for XDP_PASS: /dev/net/tun: "
                            f"{e.strerror}") from None
        try:
            fcntl.ioctl(self.fd, TUNSETIFF, _ifreq(self.name,
                                                   struct.pack("=H", IFF_TAP | IFF_NO_PI)))
            _ioctl(self.name, SIOCSIFHWADDR, struct.pack("=H6s", 1, mac))  # ARPHRD_ETHER
            # No addresses of its own: no IPv6 link-local (it would be the interface's,
            # found duplicate), no reverse-path check against routes via the interface.
            _sysctl(f"/proc/sys/net/ipv6/conf/{self.name}/addr_gen_mode", "1")
            _sysctl(f"/proc/sys/net/ipv4/conf/{self.name}/rp_filter", "0")
            _set_up(self.name)
        except BaseException as e:
            os.close(self.fd)
            if isinstance(e, OSError):
                raise LiveError(f"{ifname}: TAP {self.name}: {e.strerror}") from None
            raise
        self._out = np.zeros((64, max(mtu + 18, 64)), np.uint8)
        self._out_len = np.zeros(64, np.int64)
        self.written = 0
        self.refused = 0

    def inject(self, batch: SkbBatch) -> None:
        n = len(batch)
        if not n:
            return
        data = np.ascontiguousarray(batch.data)
        done = int(_write_rows(self.fd, data, batch.length))
        self.written += done
        self.refused += n - done

    def replies(self) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
        """What the kernel sent out of the TAP since the last call (rows, lengths)."""
        n = int(_read_rows(self.fd, self._out, self._out_len))
        return self._out[:n], self._out_len[:n]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # not persistent: the device goes with its last file
            self.fd = -1


# -----------------------------------------------------------------------------------
# Ports: where a queue's frames come from and go to
# -----------------------------------------------------------------------------------

_R_HEAD = RingCursor.index("head")
_R_COUNT = RingCursor.index("count")
_D_RX_DROPPED = NetdevStats.index("rx_dropped")
_HEADROOM = XDP_PACKET_HEADROOM
_MAX_FRAME = MAX_FRAME
_PAGE = PAGE_SIZE
_U32 = 0xFFFF_FFFF


@njit(cache=True, nogil=True, _nrt=False)
def _rx_zc(rxq, fq, umem_size, pfn_base, psc, cache, ring, free, state, lent, qcols, qcur,  # type: ignore[no-untyped-def] # noqa: E501
           ds, budget):
    """Up to ``budget`` descriptors of the socket's rx ring (the user's consumer, in its
    ring record) queued on the device's rx ring as they are: each chunk is a page of
    the queue's page pool, whose memory is the UMEM, lent to the kernel when it went
    into the fill ring (``lent``) and the queue's again now. A descriptor naming no
    chunk lent, or a frame past a page's tailroom: dropped as a NIC drops
    (``rx_dropped``; a lent page goes back to the pool). Then every free fill slot
    gets a page from the pool's allocator (``page_pool_alloc``, as a driver's rx
    refill): a page the program dropped is the kernel's again one round later.
    Returns the frames queued."""
    prod = load_acquire32_at(rxq[Q_PROD])
    cons = rxq[Q_CC]
    qsize = qcols.shape[1]
    # The device's rx ring is emptied by its NAPI poll on another thread (threaded
    # NAPI): its count changes under the ring's lock, once for the whole bulk.
    ring_lock(qcur)
    head = qcur[_R_HEAD]
    count = qcur[_R_COUNT]
    n = min((prod - cons) & _U32, budget, qsize - count)
    rmask = rxq[Q_MASK]
    desc = i64_view(rxq[Q_RING], rmask + 1, 2)
    got = 0
    for k in range(n):
        d = desc[(cons + k) & rmask]
        addr = d[0]
        ln = d[1] & _U32
        loc = addr // _PAGE
        if addr < 0 or addr >= umem_size or lent[loc] == 0:
            ds[_D_RX_DROPPED] += 1  # no chunk the kernel had from us: nothing to take back
            continue
        lent[loc] = 0
        off = addr - loc * _PAGE
        if 0 < ln and off + ln <= _HEADROOM + _MAX_FRAME:
            slot = (head + count) % qsize
            qcols[0, slot] = pfn_base + loc
            qcols[1, slot] = off
            qcols[2, slot] = ln
            qcols[3, slot] = 0
            qcols[4, slot] = 0  # KIND_BUFF
            count += 1
            got += 1
        else:  # multi-buffer or bogus: pyxdp's pages hold one buffer
            _recycle(psc, cache, ring, free, state, loc)
            ds[_D_RX_DROPPED] += 1
    cons = (cons + n) & _U32
    rxq[Q_CC] = cons
    rxq[Q_PUB] = cons
    rxq[Q_CP] = prod
    store_release32_at(rxq[Q_CONS], cons)
    qcur[_R_COUNT] = count
    ring_unlock(qcur)
    fmask = fq[Q_MASK]
    fring = i64_view(fq[Q_RING], 1, fmask + 1)[0]
    fcp = fq[Q_CP]
    fcc = load_acquire32_at(fq[Q_CONS])
    fq[Q_CC] = fcc
    for _k in range(fmask + 1 - ((fcp - fcc) & _U32)):
        loc = _alloc(psc, cache, ring, free, state)
        if loc < 0:
            break  # the pool is dry: the kernel counts what finds no fill entry
        lent[loc] = 1
        fring[fcp & fmask] = loc * _PAGE
        fcp = (fcp + 1) & _U32
    if fcp != fq[Q_PUB]:
        fq[Q_CP] = fcp
        fq[Q_PUB] = fcp
        store_release32_at(fq[Q_PROD], fcp)
    return got


class _XskPort:
    """One AF_XDP socket on (interface, queue) whose UMEM is the queue's page pool: its
    fill and rx rings feed the queue with the pool's own pages, no copy
    (:func:`_rx_zc`); its tx and completion rings are the device's transmit wire
    (:mod:`pyxdp.net.xsk_wire`: the native poll loop writes XDP_TX and redirected
    frames there itself, copied into the wire's chunks, pages the wire holds).

    Where each page of the pool is: the pool's states say which pages are in use;
    of those, ``lent`` marks the ones the kernel has (in the fill ring, being
    written, in the rx ring), ``_tx_pfns`` are the wire's for as long as the
    socket lives; the rest are frames of the queue. Closing the socket gives the
    pool back every page lent and the wire's."""

    kind = "af_xdp"

    def __init__(self, ifname: str, rq: Any, mode: str | None) -> None:
        pool = rq.pool
        self.pool = pool
        queue = int(rq.index)
        # The pool's memory registered as the UMEM: chunk i is page row i.
        umem = Umem(pool.npages, PAGE_SIZE, memory=pool.raw)
        try:
            self.sock = LinuxXskSocket(ifname, queue, umem, mode=mode, fill_size=RING,
                                       comp_size=RING, rx_size=RING, tx_size=RING)
        except XskError as e:
            if mode is not None or e.errno not in (_errno.EOPNOTSUPP, _errno.EINVAL):
                raise
            self.sock = LinuxXskSocket(ifname, queue, umem, mode="copy", fill_size=RING,
                                       comp_size=RING, rx_size=RING, tx_size=RING)
        s = self.sock
        assert s.tx is not None and s.rx is not None and s.fill_ring is not None \
            and s.comp_ring is not None
        self.zerocopy = s.zerocopy
        try:  # one sendto sends a whole round in copy mode (default: 32 descriptors)
            s.set_tx_budget(RING)
        except XskError:
            pass  # an older kernel: kick() loops instead
        self.lent = np.zeros(pool.npages, np.uint8)
        # The transmit set: pages of the pool the wire holds while the socket lives.
        self._tx_pfns = pool.alloc_bulk(TX_CHUNKS)
        self._free = ((self._tx_pfns - pool.pfn_base) * PAGE_SIZE).astype(np.int64)
        self.wire = XskWireState(
            txq_at=s.tx.q.words.ctypes.data, cq_at=s.comp_ring.q.words.ctypes.data,
            umem_at=s.umem.address, umem_size=s.umem.size, chunk_size=s.umem.chunk_size,
            free_at=self._free.ctypes.data, nfree=len(self._free), cap=len(self._free),
            kicked=s.tx.q.cached_prod)
        self.wire_addr = int(self.wire.words.ctypes.data)
        self._rxq = s.rx.q.words
        self._fq = s.fill_ring.q.words
        self._refill(rq)

    def kick(self) -> None:
        """``sendto`` for the descriptors written since the last kick (copy mode sends in
        the call; EAGAIN: budget or completion ring, so again)."""
        s = self.sock
        assert s.tx is not None
        prod = s.tx.q.cached_prod
        if prod == self.wire.kicked:
            return
        for _ in range(16):
            if not s.kick() and not s.tx.window()[1]:
                break
            wire_reap(self.wire.words)
        self.wire.kicked = prod

    def fileno(self) -> int:
        return self.sock.fd

    def receive(self, dev: LiveNic, rq: Any, budget: int) -> int:
        """Frames of the rx ring queued for ``rq``'s poll in the pages they arrived in,
        and the fill ring refilled from its pool: one native call."""
        pool = self.pool
        got = int(_rx_zc(self._rxq, self._fq, self.sock.umem.size, pool.pfn_base,
                         *pool.native_arrays, self.lent, rq.ring.cols, rq.ring.cur.words,
                         rq.stats.words, budget))
        if pool.state.error:  # a lent page the pool did not have in use: a bug of ours
            row = int(pool.state.error) - 1
            pool.state.error = 0
            raise PageAccountingError(f"{pool.name}: page row {row} came back from the "
                                      "kernel twice", pages=[pool.pfn_base + row],
                                      owner=pool.name)
        # XDP_USE_NEED_WAKEUP: a driver that ran out of fill descriptors stopped its
        # NAPI and waits for a wakeup now that the ring is refilled (copy mode never
        # sets the flag); the worker may sleep next without calling poll.
        if self.sock.fill_ring is not None and self.sock.fill_ring.needs_wakeup():
            self.sock._wakeup_rx()
        return got

    def transmit(self, pages: npt.NDArray[np.uint8], rows: npt.NDArray[np.int64],
                 offs: npt.NDArray[np.int64], lens: npt.NDArray[np.int64]) -> int:
        """Copy frames onto the wire (in order, until one finds no room); how many."""
        return int(wire_xmit_rows(self.wire.words, pages, rows, offs, lens))

    def warm_up(self, dev: LiveNic, rq: Any) -> None:
        """Compile the ring code before a worker runs it (a worker compiling while the
        process forks would leave the child waiting for numba's lock)."""
        z = np.zeros(0, np.int64)
        u8 = np.zeros((0, 64), np.uint8)
        wire_xmit_rows(self.wire.words, u8, z, z, z)
        wire_reap(self.wire.words)
        self.receive(dev, rq, 0)

    def reap(self) -> None:
        wire_reap(self.wire.words)

    def _refill(self, rq: Any) -> None:
        self.receive(rq.dev, rq, 0)

    def close(self) -> None:
        """Close the socket, then take back the pages the kernel and the wire had."""
        self.sock.close()
        self.sock.umem.close()  # the pool's memory stays mapped: it is the pool's
        self.pool.put_pages(np.concatenate((np.flatnonzero(self.lent) + self.pool.pfn_base,
                                            self._tx_pfns)))
        self.lent[:] = 0
        self._tx_pfns = self._tx_pfns[:0]


class _PacketPort:
    """The AF_PACKET fallback: a TPACKET_V3 rx ring and a TPACKET_V2 tx ring."""

    kind = "af_packet"
    zerocopy = False

    def __init__(self, ifindex: int) -> None:
        self.rx = PacketRxRing(ifindex)
        try:
            self.tx = PacketTxRing(ifindex)
        except BaseException:
            self.rx.close()
            raise

    def kick(self) -> None:
        self.tx.flush()

    def fileno(self) -> int:
        return self.rx.fileno()

    def receive(self, dev: LiveNic, rq: Any, budget: int) -> int:
        off, lens, vlan = self.rx.peek(budget)
        n = len(lens)
        if not n:
            return 0
        ok = lens + 4 * (vlan >= 0) <= MAX_FRAME
        pfns = rq.pool.alloc_bulk(int(ok.sum()))
        sel = np.flatnonzero(ok)[:len(pfns)]
        dev.stats.rx_dropped += n - len(sel)
        if len(sel):
            lens = lens[sel].copy()
            rows = rq.pool.local(pfns)
            # As on the wire: the tag the stack took off goes back in.
            gather_rows_vlan(self.rx.ring, off[sel], lens, vlan[sel], rq.pool.pages, rows,
                             XDP_PACKET_HEADROOM)
            rq.ring.produce(Frames.make(pfns, XDP_PACKET_HEADROOM, lens))
        self.rx.release()
        return len(sel)

    def transmit(self, pages: npt.NDArray[np.uint8], rows: npt.NDArray[np.int64],
                 offs: npt.NDArray[np.int64], lens: npt.NDArray[np.int64]) -> int:
        ok = lens <= self.tx.max_len
        if not ok.all():
            sel = np.flatnonzero(ok)
            return self.tx.queue(pages, rows[sel], offs[sel], lens[sel])
        return self.tx.queue(pages, rows, offs, lens)

    def reap(self) -> None:
        return None

    def warm_up(self, dev: LiveNic, rq: Any) -> None:
        """Compile the ring walks and copies (nothing is received or sent)."""
        z = np.zeros(0, np.int64)
        self.rx.warm_up()
        gather_rows_vlan(self.rx.ring, z, z, z, np.zeros((0, 64), np.uint8), z, 0)
        self.tx.queue(np.zeros((0, 64), np.uint8), z, z, z)

    def close(self) -> None:
        self.rx.close()
        self.tx.close()


# -----------------------------------------------------------------------------------
# The device
# -----------------------------------------------------------------------------------

class LiveNic(NetDevice):
    """A pyxdp NIC backed by a Linux interface (use :func:`add_live_device`)."""

    kind = "live"  # the native loop leaves its TX and redirects to ndo_xdp_xmit below

    def __init__(self, host: Host, ifname: str, *, queues: int | None = None,
                 backend: str = "auto", mode: str | None = None,
                 kernel_mode: str | None = None, threaded_napi: bool = False,
                 busy_poll: int = 0) -> None:
        if backend not in ("auto", "af_xdp", "af_packet"):
            raise ValueError(f"backend {backend!r}: 'auto', 'af_xdp' or 'af_packet'")
        try:
            ifindex = ifindex_of(ifname)
        except (KernelError, OSError):
            raise LiveError(f"no interface {ifname!r} in this network namespace") from None
        if ifindex in host.devices:
            raise LiveError(f"{ifname}: ifindex {ifindex} is taken on this host")
        nq = queues if queues is not None else if_rx_queues(ifname)
        if nq < 1:
            raise ValueError("a live device needs at least one queue")
        mtu = if_mtu(ifname)
        host.stack.ensure_ifindex(ifindex)
        super().__init__(host, ifindex, ifname, mac=if_mac(ifname), mtu=mtu, rx_queues=nq,
                         tx_queues=nq, ring_size=RX_RING, pool_pages=POOL_PAGES)
        host._next_ifindex = max(host._next_ifindex, ifindex + 1)
        self.ports: list[_XskPort | _PacketPort] = []
        self.link: XdpLink | None = None
        self.tap: PassTap | None = None
        self._redir: Collection | None = None
        self._local = threading.local()
        self._threaded: list[int] = []  # NAPI ids this device switched to threaded
        self._deferred: list[tuple[int, NapiIrqDefer]] = []  # NAPIs busy polling changed
        self.pollers: list[NapiBusyPoller] = []  # busy polling: one per queue
        self.busy_poll_usecs = 0
        try:
            had = self._napi_ids(ifname) if busy_poll else set()
            if backend in ("auto", "af_xdp"):
                try:
                    self._open_xsk(ifname, nq, mode, kernel_mode)
                except XskError as e:
                    if backend == "af_xdp" or e.errno not in (_errno.EAFNOSUPPORT,
                                                              _errno.EPERM):
                        raise LiveError(f"{ifname}: AF_XDP: {e}") from None
                    self._close_ports()
            if not self.ports:
                self.ports = [_PacketPort(ifindex) for _ in range(1)]
                if nq > 1:  # one AF_PACKET ring sees every queue's frames
                    self.rx = self.rx[:1]
            if threaded_napi:
                self._thread_napis(ifname)
            if busy_poll:
                self._busy_poll(ifname, busy_poll, had)
        except BaseException:
            self.close_live()
            raise
        self.backend = self.ports[0].kind
        # XDP_TX and redirects here leave by the native loop's transmit rings.
        self.xmit_wires = tuple(p.wire_addr for p in self.ports if isinstance(p, _XskPort))

    def _thread_napis(self, ifname: str) -> None:
        """Threaded NAPI (``LiveOptions.threaded_napi``) on each of the interface's NAPI
        instances: the kernel half of the receive (the redirect program, AF_XDP's copy
        into the UMEM) runs in a kthread, off the CPU that scheduled the poll."""
        try:
            if not napi_get(ifname):
                raise LiveError(f"{ifname}: no NAPI instance to run threaded (a veth has "
                                "one only while an XDP program or GRO is on)")
            self._threaded = thread_napis(ifname)
        except KernelError as e:
            raise LiveError(f"{ifname}: threaded NAPI: {e}") from None

    @staticmethod
    def _napi_ids(ifname: str) -> set[int]:
        try:
            return {n.id for n in napi_get(ifname)}
        except KernelError as e:
            raise LiveError(f"{ifname}: busy polling: {e}") from None

    def _busy_poll(self, ifname: str, usecs: int, had: set[int]) -> None:
        """Preferred busy polling (``LiveOptions.busy_poll``): each queue's worker polls
        the interface's NAPI instances itself while it waits (an io_uring naming them:
        :mod:`pyxdp.kernel.io_uring_napi` - a copy-mode AF_XDP socket has no NAPI id to
        busy-poll), and the instances the redirect program's attach created (a
        veth's) stay masked between those polls (``BUSY_POLL_DEFER``). Instances
        there before the attach (a NIC's) keep their settings: they would outlive a
        SIGKILL, where the veth's go with the detach."""
        try:
            napis = napi_get(ifname)
            if not napis:
                raise LiveError(f"{ifname}: busy polling: no NAPI instance to poll")
            self._deferred = defer_napis([n for n in napis if n.id not in had],
                                         BUSY_POLL_DEFER)
            wait = max(usecs, BUSY_POLL_MAX_WAIT)
            for _ in self.rx:
                self.pollers.append(NapiBusyPoller([n.id for n in napis], wait))
        except KernelError as e:
            raise LiveError(f"{ifname}: busy polling: {e}") from None
        self.busy_poll_usecs = usecs

    def _unthread_napis(self) -> None:
        """Back to softirq polling, before the detach (a NIC's NAPI outlives it)."""
        unthread_napis(self._threaded)
        self._threaded = []

    def _open_xsk(self, ifname: str, nq: int, mode: str | None,
                  kernel_mode: str | None) -> None:
        for q in range(nq):
            self.ports.append(_XskPort(ifname, self.rx[q], mode))
        self._redir = Collection(redirect_spec(max(nq, 1)), "kernel")
        xsks = self._redir.maps["xsks"]
        for q, p in enumerate(self.ports):
            assert isinstance(p, _XskPort)
            xsks[q] = p.sock.fd
        handle = self._redir.programs["pyxdp_xsk_redir"].handle
        modes = [kernel_mode] if kernel_mode is not None else ["native", "generic"]
        err: KernelError | None = None
        for m in modes:
            try:
                self.link = XdpLink.attach(ifname, handle, mode=m)  # type: ignore[arg-type]
                self.kernel_mode = m
                break
            except KernelError as e:
                err = e
        if self.link is None:
            assert err is not None
            raise LiveError(f"{ifname}: attaching the AF_XDP redirect program: {err}")
        self.tap = PassTap(ifname, self.mac, self.mtu)

    @property
    def zerocopy(self) -> bool:
        return all(p.zerocopy for p in self.ports)

    def _port(self) -> _XskPort | _PacketPort:
        """The port of the worker's queue (XDP_TX leaves by the queue it came in on)."""
        q = getattr(self._local, "queue", 0)
        return self.ports[q % len(self.ports)]

    def ndo_xdp_xmit(self, frames: Frames) -> int:
        """Frames onto the worker's port at once (the Python path's transmit; the native
        loop writes to the AF_XDP tx ring itself): copied, so complete - every page
        comes back now; frames the ring has no room for are the device's drops
        (``tx_dropped``). They leave at the round's :meth:`flush_tx` (one kick)."""
        if not self.up:
            return -_errno.ENETDOWN
        from pyxdp.net.xdp_mem import xdp_return_frames_rx_napi
        port = self._port()
        sent = 0
        for mem, pos, rows in self.host.memmap.split(frames.pfn):
            sent += port.transmit(mem.pages, rows, frames.data[pos], frames.length[pos])
        self.stats.tx_packets += sent
        self.stats.tx_bytes += int(frames.length[:sent].sum())  # lengths alike: close enough
        self.stats.tx_dropped += len(frames) - sent
        xdp_return_frames_rx_napi(frames.pfn, memmap=self.host.memmap)
        return len(frames)

    def flush_tx(self) -> None:
        """Kick every port whose ring got frames since the last kick."""
        for port in self.ports:
            port.kick()

    def xmit_skbs(self, batch: SkbBatch) -> None:
        """``dev_queue_xmit`` from pyxdp's side (the generic path's TX): to the wire."""
        if not self.up or not len(batch):
            self._transmitted(batch, False)
            return
        data = np.ascontiguousarray(batch.data)
        rows = np.arange(len(batch), dtype=np.int64)
        port = self._port()
        got = port.transmit(data, rows, np.zeros(len(batch), np.int64), batch.length)
        port.kick()
        self.stats.tx_packets += got
        self.stats.tx_bytes += int(batch.length[:got].sum())
        self.stats.tx_dropped += len(batch) - got

    def _close_ports(self) -> None:
        self.xmit_wires = ()
        for p in self.ports:
            p.close()
        self.ports = []

    def close_live(self) -> None:
        """Detach the redirect program, close the sockets and the TAP."""
        self._unthread_napis()
        restore_napis(self._deferred)
        self._deferred = []
        for p in self.pollers:
            p.close()
        self.pollers = []
        if self.link is not None:
            self.link.close()
            self.link = None
        if self._redir is not None:
            self._redir.close()
            self._redir = None
        self._close_ports()
        if self.tap is not None:
            self.tap.close()
            self.tap = None

    def _close(self) -> None:  # Host.close's teardown: the live side first
        self.close_live()
        super()._close()


def add_live_device(host: Host, ifname: str, **kw: Any) -> LiveNic:
    """Add the Linux interface ``ifname`` (of the caller's network namespace) to ``host``
    as a :class:`LiveNic` (keywords as :class:`LiveNic`)."""
    dev = LiveNic(host, ifname, **kw)
    host.devices[dev.ifindex] = dev
    host.fwd.stale = True
    return dev


# -----------------------------------------------------------------------------------
# Running: one worker per queue
# -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class LiveOptions:
    """How :class:`LiveDataplane` sets its interfaces up."""

    backend: str = "auto"  # "auto", "af_xdp" or "af_packet"
    mode: str | None = None  # AF_XDP bind: "zerocopy", "copy", None (try zero-copy)
    kernel_mode: str | None = None  # the redirect program's XDP mode (None: native, else generic)
    queues: int | None = None  # rx queues per interface (None: all the driver has)
    # ethtool's rx-usecs for the workers: the most a worker lets frames gather between
    # rounds while traffic flows (it sleeps in poll while none does).
    rx_usecs: int = 1000
    # Each interface's NAPI polled by a kthread while pyxdp runs (Linux 6.17's per-NAPI
    # threaded mode): on a veth the receive's kernel half then leaves the sender's CPU.
    threaded_napi: bool = False
    # Preferred busy polling, in microseconds (0: off): each worker polls the interface's
    # NAPI itself while it waits for frames to gather, and for this long after the last
    # frame before it sleeps; on a veth the receive's kernel half then runs on the
    # worker's CPU, not in the sender's transmit (LiveNic._busy_poll).
    busy_poll: int = 0


def _pick(coll: Collection, section: str | None) -> Program:
    """``section``'s program, or the object's first one a device can run (not a devmap
    or cpumap program)."""
    if section is not None:
        return coll.program(section)
    for p in coll.programs.values():
        if p.spec.expected_attach_type not in (BpfAttachType.BPF_XDP_DEVMAP,
                                               BpfAttachType.BPF_XDP_CPUMAP):
            return p
    raise LiveError("the object has no XDP program a device can run")


def _gather_wait(got: int, since_last: float, spent: float, cap: float) -> float:
    """Seconds to sleep before the next round: long enough for ``GATHER`` frames at the
    rate of the last round (``got`` frames arrived in ``since_last`` seconds), less
    the ``spent`` seconds the round took, at most ``cap``."""
    return max(0.0, min(since_last * GATHER / got - spent, cap))


class LiveDataplane:
    """``obj``'s program (``section``) run by pyxdp on Linux interfaces ``ifaces``.

    The program's maps are ``self.collection.maps`` (live while it runs);
    :meth:`start` starts a worker per queue, :meth:`stop` joins them,
    :meth:`close` (or the ``with`` block's end) takes everything out of the kernel.
    """

    def __init__(self, obj: str | Path | CollectionSpec, ifaces: Sequence[str], *,
                 section: str | None = None, options: LiveOptions = LiveOptions(),
                 engine: str = "auto", verify: bool = True) -> None:
        if not ifaces:
            raise ValueError("name at least one interface")
        if len(set(ifaces)) != len(ifaces):
            raise ValueError("an interface is named twice")
        if options.rx_usecs < 0:
            raise ValueError("rx_usecs must be >= 0")
        if options.busy_poll < 0:
            raise ValueError("busy_poll must be >= 0 (microseconds; 0: off)")
        self.options = options
        self.host = Host("live", engine=engine)
        self.devices: list[LiveNic] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self._failed = False  # a worker's error was raised: skip the page check at close
        try:
            self.collection = self.host.load(obj, verify=verify)
            self.program: Program = _pick(self.collection, section)
            for name in ifaces:
                self.devices.append(add_live_device(
                    self.host, name, queues=options.queues, backend=options.backend,
                    mode=options.mode, kernel_mode=options.kernel_mode,
                    threaded_napi=options.threaded_napi, busy_poll=options.busy_poll))
            self.host.stack.on_receive(self._passed)
            for d in self.devices:
                d.attach_xdp(self.program)
        except BaseException:
            self.close()
            raise

    @property
    def maps(self) -> Any:
        return self.collection.maps

    def _passed(self, batch: SkbBatch) -> None:
        """XDP_PASS: the skbs to the kernel's stack through each device's TAP (the
        AF_PACKET fallback needs none: the kernel has its own copy)."""
        for d in self.devices:
            if d.tap is None:
                continue
            mine = batch.ifindex == d.ifindex
            if mine.all():
                d.tap.inject(batch)
            elif mine.any():
                sel = np.flatnonzero(mine)
                d.tap.inject(SkbBatch(batch.data[sel], batch.length[sel], batch.ifindex[sel],
                                      batch.queue[sel]))

    def _warm_up(self) -> None:
        """Compile what the workers run before frames wait for it: the copy and TAP
        loops, and a poll of each (empty) queue - the program's JIT and the native
        poll loop, with no frame to act on."""
        from pyxdp.net.napi import napi_poll
        z = np.zeros(0, np.int64)
        u8 = np.zeros((0, 64), np.uint8)
        gather_rows(np.zeros(1, np.uint8), z, z, u8, z, 0)
        scatter_rows(u8, z, z, z, np.zeros(1, np.uint8), z)
        _write_rows(-1, u8, z)
        _read_rows(-1, u8, z)
        for d in self.devices:
            for q, p in enumerate(d.ports):
                p.warm_up(d, d.rx[min(q, len(d.rx) - 1)])
            for rq in d.rx:
                napi_poll(rq, BATCH)

    def start(self) -> None:
        """A worker thread per (device, queue), started once the code they run is compiled."""
        if self._threads:
            return
        self._warm_up()
        self._stop.clear()
        for d in self.devices:
            for q in range(len(d.rx)):
                t = threading.Thread(target=self._work, args=(d, q), daemon=True,
                                     name=f"pyxdp-{d.name}-rx{q}")
                self._threads.append(t)
        for t in self._threads:
            t.start()

    def _work(self, dev: LiveNic, q: int) -> None:
        from pyxdp.net.napi import napi_poll
        rq = dev.rx[q]
        port = dev.ports[min(q, len(dev.ports) - 1)]
        for d in self.devices:  # XDP_TX and redirects from here leave by queue q
            d._local.queue = q
        poller = select.poll()
        poller.register(port.fileno(), select.POLLIN)
        tap = dev.tap if q == 0 else None
        if tap is not None:  # what the kernel sends out of the TAP wakes the worker too
            poller.register(tap.fd, select.POLLIN)
        coalesce = self.options.rx_usecs * 1e-6
        busy = dev.busy_poll_usecs * 1e-6
        # Busy polling: the worker's waits poll the NAPI (the receive's kernel half) here.
        napi_wait = dev.pollers[q].wait if dev.pollers else None
        t_rx = time.monotonic()  # when the last round took the rx ring
        t_frame = t_rx  # when a round last had frames
        try:
            while not self._stop.is_set():
                got = 0
                if rq.ring.free >= BATCH:
                    t_prev, t_rx = t_rx, time.monotonic()
                    with self.host.lock:
                        got = port.receive(dev, rq, BATCH)
                while len(rq.ring):
                    # One native call per batch: XDP_TX and redirects to live devices are
                    # written to their AF_XDP tx rings inside it.
                    napi_poll(rq, BATCH)
                with self.host.lock:
                    for d in self.devices:
                        d.flush_tx()
                    if tap is not None:
                        rows, lens = tap.replies()
                        if len(lens):
                            port.transmit(rows, np.arange(len(lens), dtype=np.int64),
                                          np.zeros(len(lens), np.int64), lens)
                            port.kick()
                if got:
                    t_frame = t_rx
                elif napi_wait is not None and t_rx - t_frame < busy:
                    napi_wait(busy - (t_rx - t_frame))  # until busy_poll has passed
                    continue
                if not got:
                    # The rx ring is empty: sleep until the kernel queues a frame (its
                    # flush wakes the socket's sleeper) or the TAP has a reply.
                    poller.poll(IDLE_POLL_MS)
                    t_rx = t_frame = time.monotonic()
                elif got < GATHER:
                    # Traffic flows: let about GATHER frames gather (at the rate the
                    # last round saw), at most rx_usecs - a round per frame or a
                    # spinning worker would cost a CPU, and the kernel's wakeup per
                    # flush the sender's time.
                    wait = _gather_wait(got, t_rx - t_prev, time.monotonic() - t_rx, coalesce)
                    if napi_wait is None:
                        time.sleep(wait)
                    elif wait > 0:
                        napi_wait(wait)
        except BaseException as e:  # reported by stop()
            self.errors.append(e)

    def stats(self) -> dict[str, NetdevStats]:
        return {d.name: d.stats.copy() for d in self.devices}

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        self._threads = []
        if self.errors:
            err = self.errors[0]
            self.errors = []
            self._failed = True
            raise err

    def close(self) -> None:
        try:
            if self._threads:
                self.stop()
        finally:
            clean = not self.errors and not self._failed
            for d in self.devices:
                d.close_live()
            # Every page back exactly once (unless a worker failed: its error goes first).
            self.host.close(check=clean)

    def __enter__(self) -> LiveDataplane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

