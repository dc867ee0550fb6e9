"""AF_PACKET with mapped rings (``net/packet/af_packet.c``): a TPACKET_V3 receive
ring and a TPACKET_V2 transmit ring on a Linux interface, driven in batches.

pyxdp uses them where AF_XDP is not there: :class:`PacketRxRing` takes every
frame the interface receives (``PACKET_IGNORE_OUTGOING``: not what it sends),
block by block as the kernel retires them (``tpacket_rcv`` fills a block,
``prb_retire_current_block`` hands it to user space with ``TP_STATUS_USER``);
:class:`PacketTxRing` queues frames in ``TP_STATUS_SEND_REQUEST`` slots and one
``send()`` makes ``tpacket_snd`` transmit them all (``PACKET_QDISC_BYPASS``:
straight to the driver, as a packet generator wants).

AF_PACKET sees a copy: the frames the rx ring gets still go up the kernel's
own stack, so a program fed from it observes traffic and cannot take it away
(see docs/SEMANTICS.md). The ring walks and copies run in machine code
(native): no Python per frame.
"""

from __future__ import annotations

import errno as _errno
import mmap
import socket
import struct

import numpy as np
import numpy.typing as npt

from pyxdp.errors import KernelError
from pyxdp.net.native import njit
from pyxdp.uapi.if_packet import (
    ETH_P_ALL,
    PACKET_IGNORE_OUTGOING,
    PACKET_LOSS,
    PACKET_QDISC_BYPASS,
    PACKET_RX_RING,
    PACKET_TX_RING,
    PACKET_VERSION,
    SOL_PACKET,
    TP_STATUS_AVAILABLE,
    TP_STATUS_SEND_REQUEST,
    TP_STATUS_USER,
    TP_STATUS_VLAN_TPID_VALID,
    TP_STATUS_VLAN_VALID,
    TP_STATUS_WRONG_FORMAT,
    TPACKET_V2,
    TPACKET_V3,
)

__all__ = ["PacketRxRing", "PacketTxRing", "packet_socket"]

TPACKET2_DATA = 32  # TPACKET2_HDRLEN - sizeof(struct sockaddr_ll): where tx data goes

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]


def packet_socket(ifindex: int, *, rx: bool) -> socket.socket:
    """An ``AF_PACKET``/``SOCK_RAW`` socket bound to ``ifindex`` (all protocols when
    ``rx``; none, for sending only, otherwise)."""
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW | socket.SOCK_CLOEXEC,
                          socket.htons(ETH_P_ALL) if rx else 0)
    except OSError as e:
        raise KernelError("socket(AF_PACKET)", e.errno or _errno.EPERM, "") from None
    try:
        s.bind((socket.if_indextoname(ifindex), ETH_P_ALL if rx else 0))
    except OSError as e:
        s.close()
        raise KernelError("bind(AF_PACKET)", e.errno or _errno.ENODEV,
                          f"ifindex {ifindex}") from None
    return s


def _opt(s: socket.socket, opt: int, value: bytes, what: str) -> None:
    try:
        s.setsockopt(SOL_PACKET, opt, value)
    except OSError as e:
        raise KernelError(f"setsockopt({what})", e.errno or _errno.EINVAL, "") from None


# -- machine code ---------------------------------------------------------------------

@njit(nogil=True, cache=True)
def _v3_scan(ring, bsize, bnr, cur, max_pkts, off_out, len_out, vlan_out):  # type: ignore[no-untyped-def]
    """The packets of the user-owned blocks from block ``cur`` on, whole blocks only,
    at most ``max_pkts``: their data offsets, lengths and VLAN tags (``tpid << 16 |
    tci``, -1 for none); returns (packets, blocks)."""
    got = 0
    nb = 0
    b = cur
    while nb < bnr:
        base = b * bsize
        st = ring[base + 8] | (ring[base + 9] << 8) | (ring[base + 10] << 16) \
            | (ring[base + 11] << 24)
        if not (st & TP_STATUS_USER):
            break
        num = ring[base + 12] | (ring[base + 13] << 8) | (ring[base + 14] << 16) \
            | (ring[base + 15] << 24)
        if got + num > max_pkts:
            break
        off = base + (ring[base + 16] | (ring[base + 17] << 8) | (ring[base + 18] << 16)
                      | (ring[base + 19] << 24))
        for _ in range(num):
            nxt = ring[off] | (ring[off + 1] << 8) | (ring[off + 2] << 16) \
                | (ring[off + 3] << 24)
            snap = ring[off + 12] | (ring[off + 13] << 8) | (ring[off + 14] << 16) \
                | (ring[off + 15] << 24)
            mac = ring[off + 24] | (ring[off + 25] << 8)
            status = ring[off + 20]
            off_out[got] = off + mac
            len_out[got] = snap
            # The tag the stack took off (skb vlan offload), to put back: TCI and TPID.
            vlan_out[got] = -1
            if status & TP_STATUS_VLAN_VALID:
                tci = np.int64(ring[off + 32]) | (np.int64(ring[off + 33]) << 8)
                tpid = np.int64(0x8100)
                if status & TP_STATUS_VLAN_TPID_VALID:
                    tpid = np.int64(ring[off + 36]) | (np.int64(ring[off + 37]) << 8)
                vlan_out[got] = (tpid << 16) | tci
            got += 1
            off += nxt
        nb += 1
        b = (b + 1) % bnr
    return got, nb


@njit(nogil=True, cache=True)
def _v3_release(ring, bsize, bnr, cur, nblocks):  # type: ignore[no-untyped-def]
    b = cur
    for _ in range(nblocks):
        base = b * bsize
        ring[base + 8] = 0
        ring[base + 9] = 0
        ring[base + 10] = 0
        ring[base + 11] = 0
        b = (b + 1) % bnr
    return b


@njit(nogil=True, cache=True)
def gather_rows(src, src_off, lens, dst, dst_rows, dst_off):  # type: ignore[no-untyped-def]
    """Copy ``lens[i]`` bytes from flat ``src`` at ``src_off[i]`` into row
    ``dst_rows[i]`` of ``dst`` at column ``dst_off``."""
    for i in range(len(lens)):
        s = src_off[i]
        n = lens[i]
        dst[dst_rows[i], dst_off:dst_off + n] = src[s:s + n]  # slices: a vector copy


@njit(nogil=True, cache=True)
def gather_rows_vlan(src, src_off, lens, vlan, dst, dst_rows, dst_off):  # type: ignore[no-untyped-def] # noqa: E501
    """:func:`gather_rows`, putting back the 802.1Q/802.1ad tag ``vlan[i]`` (when not
    -1) after the MAC addresses; ``lens`` grows by the 4 bytes inserted."""
    for i in range(len(lens)):
        s = src_off[i]
        r = dst_rows[i]
        n = lens[i]
        v = vlan[i]
        if v < 0 or n < 12:
            dst[r, dst_off:dst_off + n] = src[s:s + n]
            continue
        dst[r, dst_off:dst_off + 12] = src[s:s + 12]
        dst[r, dst_off + 12] = (v >> 24) & 0xFF
        dst[r, dst_off + 13] = (v >> 16) & 0xFF
        dst[r, dst_off + 14] = (v >> 8) & 0xFF
        dst[r, dst_off + 15] = v & 0xFF
        dst[r, dst_off + 16:dst_off + 4 + n] = src[s + 12:s + n]
        lens[i] = n + 4


@njit(nogil=True, cache=True)
def scatter_rows(src, src_rows, src_off, lens, dst, dst_off):  # type: ignore[no-untyped-def]
    """Copy ``lens[i]`` bytes from row ``src_rows[i]`` of ``src`` at column
    ``src_off[i]`` into flat ``dst`` at ``dst_off[i]``."""
    for i in range(len(lens)):
        s = src_off[i]
        d = dst_off[i]
        n = lens[i]
        dst[d:d + n] = src[src_rows[i], s:s + n]


@njit(nogil=True, cache=True)
def _v2_tx(ring, fsize, fnr, cur, src, src_rows, src_off, lens):  # type: ignore[no-untyped-def]
    """Queue frames into available TPACKET_V2 slots from ``cur`` on; returns how many
    were queued (stops at a slot the kernel still holds)."""
    n = 0
    f = cur[0]
    for i in range(len(lens)):
        base = f * fsize
        st = ring[base] | (ring[base + 1] << 8) | (ring[base + 2] << 16) \
            | (ring[base + 3] << 24)
        if st != TP_STATUS_AVAILABLE and st != TP_STATUS_WRONG_FORMAT:
            break  # still the kernel's (PACKET_LOSS: a refused frame is given back)
        ln = lens[i]
        r = src_rows[i]
        s = src_off[i]
        d = base + TPACKET2_DATA
        ring[d:d + ln] = src[r, s:s + ln]
        ring[base + 4] = ln & 0xFF
        ring[base + 5] = (ln >> 8) & 0xFF
        ring[base + 6] = (ln >> 16) & 0xFF
        ring[base + 7] = 0
        ring[base] = TP_STATUS_SEND_REQUEST  # last: the slot is the kernel's from here
        n += 1
        f = (f + 1) % fnr
    cur[0] = f
    return n


# -- the rings ------------------------------------------------------------------------

def _unmap(mm: mmap.mmap) -> None:
    """Unmap now, or - while an array still views the ring - when the last view goes."""
    try:
        mm.close()
    except BufferError:
        pass


class PacketRxRing:
    """A TPACKET_V3 receive ring on ``ifindex``: ``block_nr`` blocks of ``block_size``
    bytes, a block retired to user space when full or after ``retire_ms``."""

    def __init__(self, ifindex: int, *, block_size: int = 1 << 16, block_nr: int = 64,
                 frame_size: int = 2048, retire_ms: int = 1) -> None:
        self.sock = packet_socket(ifindex, rx=True)
        try:
            _opt(self.sock, PACKET_VERSION, struct.pack("=i", TPACKET_V3), "PACKET_VERSION")
            _opt(self.sock, PACKET_IGNORE_OUTGOING, struct.pack("=i", 1),
                 "PACKET_IGNORE_OUTGOING")
            _opt(self.sock, PACKET_RX_RING,
                 struct.pack("=7I", block_size, block_nr, frame_size,
                             block_size * block_nr // frame_size, retire_ms, 0, 0),
                 "PACKET_RX_RING")
            self._mm = mmap.mmap(self.sock.fileno(), block_size * block_nr)
        except BaseException:
            self.sock.close()
            raise
        self.ring: U8 = np.frombuffer(self._mm, np.uint8)
        self.block_size = block_size
        self.block_nr = block_nr
        self._cur = 0
        self._pending = 0  # blocks scanned, not yet released
        cap = block_size // 64 + 1  # more than one block can hold
        self.off: I64 = np.zeros(cap * 2, np.int64)
        self.len: I64 = np.zeros(cap * 2, np.int64)
        self.vlan: I64 = np.zeros(cap * 2, np.int64)

    def fileno(self) -> int:
        return self.sock.fileno()

    def peek(self, max_pkts: int) -> tuple[I64, I64, I64]:
        """The frames of whole retired blocks, at most ``max_pkts``: offsets into
        :attr:`ring`, lengths and the VLAN tag the stack took off each (``tpid << 16 |
        tci``, -1: none); valid until :meth:`release`."""
        cap = min(max_pkts, len(self.off))
        n, nb = _v3_scan(self.ring, self.block_size, self.block_nr, self._cur, cap,
                         self.off, self.len, self.vlan)
        self._pending = int(nb)
        return self.off[:n], self.len[:n], self.vlan[:n]

    def warm_up(self) -> None:
        """Compile the walks (no block is read or released)."""
        self.peek(0)
        _v3_release(self.ring, self.block_size, self.block_nr, self._cur, 0)

    def release(self) -> None:
        """Give the blocks of the last :meth:`peek` back to the kernel."""
        if self._pending:
            self._cur = int(_v3_release(self.ring, self.block_size, self.block_nr, self._cur,
                                        self._pending))
            self._pending = 0

    def close(self) -> None:
        del self.ring
        _unmap(self._mm)
        self.sock.close()


class PacketTxRing:
    """A TPACKET_V2 transmit ring on ``ifindex`` (``PACKET_QDISC_BYPASS``):
    :meth:`send` queues rows of a page array and flushes them with one ``send()``."""

    def __init__(self, ifindex: int, *, frame_size: int = 2048, frame_nr: int = 1024,
                 qdisc_bypass: bool = True) -> None:
        self.sock = packet_socket(ifindex, rx=False)
        try:
            _opt(self.sock, PACKET_VERSION, struct.pack("=i", TPACKET_V2), "PACKET_VERSION")
            # A frame the device refuses (too long) is skipped, not the whole send.
            _opt(self.sock, PACKET_LOSS, struct.pack("=i", 1), "PACKET_LOSS")
            if qdisc_bypass:
                _opt(self.sock, PACKET_QDISC_BYPASS, struct.pack("=i", 1),
                     "PACKET_QDISC_BYPASS")
            block = max(frame_size, mmap.PAGESIZE)
            per_block = block // frame_size
            _opt(self.sock, PACKET_TX_RING,
                 struct.pack("=4I", block, frame_nr // per_block, frame_size, frame_nr),
                 "PACKET_TX_RING")
            self._mm = mmap.mmap(self.sock.fileno(), block * (frame_nr // per_block))
        except BaseException:
            self.sock.close()
            raise
        self.sock.setblocking(False)
        self.ring: U8 = np.frombuffer(self._mm, np.uint8)
        self.frame_size = frame_size
        self.frame_nr = frame_nr
        self.max_len = frame_size - TPACKET2_DATA
        self._cur = np.zeros(1, np.int64)

    def queue(self, src: U8, rows: I64, offs: I64, lens: I64) -> int:
        """Queue rows' bytes (``src[rows[i], offs[i]:offs[i] + lens[i]]``); how many fit."""
        return int(_v2_tx(self.ring, self.frame_size, self.frame_nr, self._cur, src, rows,
                          offs, lens))

    def flush(self) -> None:
        """``send()``: the kernel transmits every queued slot."""
        try:
            self.sock.send(b"", socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as e:
            if e.errno not in (_errno.ENOBUFS, _errno.EAGAIN):
                raise KernelError("send(PACKET_TX_RING)", e.errno or _errno.EIO, "") from None

    def send(self, src: U8, rows: I64, offs: I64, lens: I64) -> int:
        n = self.queue(src, rows, offs, lens)
        if n:
            self.flush()
        return n

    def close(self) -> None:
        del self.ring
        _unmap(self._mm)
        self.sock.close()

