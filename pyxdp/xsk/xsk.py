"""The AF_XDP socket as its user drives it, over any backend: libxdp's ``xsk.c`` usage pattern.

:class:`XskSocket` holds a :class:`~pyxdp.xsk.umem.Umem`, the user's side of
the four rings (:class:`~pyxdp.xsk.queue.RingProd` for fill and tx,
:class:`~pyxdp.xsk.queue.RingCons` for rx and completion) and a
:class:`ChunkPool`, and offers the batch operations every AF_XDP program
is made of: :meth:`~XskSocket.fill`, :meth:`~XskSocket.recv`,
:meth:`~XskSocket.release`, :meth:`~XskSocket.send`,
:meth:`~XskSocket.forward` (received buffers straight back out),
:meth:`~XskSocket.complete`. What talks to the datapath (wakeups, kicks,
statistics, options) is left to a backend subclass:
:class:`pyxdp.xsk.linux.LinuxXskSocket` issues the syscalls of the kernel's
AF_XDP; a userspace datapath provides the same hooks.

Chunk accounting: the pool records where each chunk is, one state per chunk
(free, given to the fill ring, held by the user after recv, given to the tx
ring), and every transition checks the chunk came from where it should
(a chunk received twice, released twice or completed without being sent
raises :class:`ChunkAccountingError`). :meth:`XskSocket.check_accounting`
also checks the rings' published windows against those states.
"""

from __future__ import annotations

import errno as _errno
import select
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import IntEnum
from types import TracebackType
from typing import Final, Self

import numpy as np
import numpy.typing as npt

from pyxdp.args import Array, checked, short
from pyxdp.errors import BadArgument, PyxdpError
from pyxdp.net.xdp_umem import XskError
from pyxdp.net.xsk_queue import Ring
from pyxdp.uapi.if_xdp import XdpBindFlag, XdpStatistics
from pyxdp.xsk.queue import RingCons, RingProd
from pyxdp.xsk.umem import Umem

__all__ = [
    "POLL_RX_TX",
    "RING_SIZES",
    "ChunkAccountingError",
    "ChunkPool",
    "ChunkState",
    "RxBatch",
    "XskSocket",
]

POLL_RX_TX: Final = select.POLLIN | select.POLLOUT
"""``poll``'s default events: either ring ready."""

U64Array = npt.NDArray[np.uint64]
U32Array = npt.NDArray[np.uint32]

DEFAULT_BATCH: Final = 64


RING_SIZES: dict[str, tuple[int, int]] = {
    k: (-(1 << 31), (1 << 32) - 1) for k in ("fill_size", "comp_size", "rx_size", "tx_size")}
"""The range of a socket's ring sizes (``checked`` rules): the C int of the setsockopt;
a negative one reaches the ring code as its u32 (EINVAL: no power of two)."""


class ChunkAccountingError(PyxdpError):
    """A UMEM chunk turned up where it cannot be: received, released or completed
    twice, or never handed out. ``chunks`` holds the chunk indices concerned."""

    def __init__(self, message: str, chunks: npt.ArrayLike = ()) -> None:
        self.chunks = tuple(int(c) for c in np.asarray(chunks).ravel()[:16])
        more = f" (chunks {list(self.chunks)})" if self.chunks else ""
        super().__init__(f"{message}{more}")


class ChunkState(IntEnum):
    """Where a chunk is, as its user knows it."""

    FREE = 0  # on the free stack
    FILL = 1  # handed to the fill ring: in the ring, in the kernel, or in the rx ring
    RX = 2  # received, held by the user until release
    TX = 3  # handed to the tx ring: in the ring, in flight, or in the completion ring


_FREE: Final = int(ChunkState.FREE)
_FILL: Final = int(ChunkState.FILL)
_RX: Final = int(ChunkState.RX)
_TX: Final = int(ChunkState.TX)


class ChunkPool:
    """The free-chunk stack of one UMEM and the state of every chunk.

    Sockets sharing a UMEM share its pool. The stack holds chunk indices;
    ``state[i]`` is a :class:`ChunkState` and ``count`` the number of chunks
    in each state as the transitions moved them. Every transition checks the
    chunks were in the state it moves them from (one gather, one compare);
    a chunk named twice in one batch leaves ``state`` and ``count``
    disagreeing, which :meth:`check` reports.
    """

    def __init__(self, umem: Umem) -> None:
        self.umem = umem
        n = umem.nchunks
        self.state = np.zeros(n, np.uint8)
        # Top of stack at the end; lowest chunks handed out first.
        self._stack: U64Array = np.arange(n, dtype=np.uint64)[::-1].copy()
        self._top = n
        self.count = [n, 0, 0, 0]
        self.held = 0  # chunks recv handed out and release has not taken back

    @property
    def nfree(self) -> int:
        return self._top

    def free_addrs(self) -> U64Array:
        """The base addresses of the free chunks (bottom of the stack first)."""
        return self.umem.chunk_base(self._stack[:self._top])

    @checked(idx=Array(scalar=False), frm=(0, 3), to=(0, 3))
    def move(self, idx: U64Array, frm: int, to: int, what: str) -> None:
        """Chunks ``idx`` go from state ``frm`` to ``to``; any other state raises."""
        if not len(idx):
            return
        try:
            st = self.state[idx]
        except IndexError:
            bad = idx[idx >= np.uint64(self.umem.nchunks)]
            raise ChunkAccountingError(f"{what}: address outside the UMEM", bad) from None
        if (st != frm).any():
            wrong = st != frm
            names = {ChunkState(x).name for x in st[wrong].tolist()}
            raise ChunkAccountingError(
                f"{what}: chunks expected {ChunkState(frm).name}, found "
                f"{'/'.join(sorted(names))}", idx[wrong])
        self.state[idx] = to
        self.count[frm] -= len(idx)
        self.count[to] += len(idx)

    @checked(n=(0, 1 << 32), to=(0, 3))
    def alloc(self, n: int, to: int) -> U64Array:
        """Pop up to ``n`` free chunks (their indices), now in state ``to``."""
        k = min(n, self._top)
        idx = self._stack[self._top - k:self._top][::-1].copy()
        self._top -= k
        self.move(idx, _FREE, to, "alloc")
        return idx

    @checked(idx=Array(scalar=False), frm=(0, 3))
    def free(self, idx: U64Array, frm: int, what: str) -> None:
        """Chunks ``idx`` go back on the stack."""
        k = len(idx)
        if k > len(self._stack) - self._top:  # more than were out: some named twice
            raise ChunkAccountingError(f"{what}: {k} chunks back, only "
                                       f"{len(self._stack) - self._top} are out", idx)
        self.move(idx, frm, _FREE, what)
        self._stack[self._top:self._top + k] = idx
        self._top += k

    def counts(self) -> dict[str, int]:
        c = np.bincount(self.state, minlength=len(ChunkState))
        return {s.name.lower(): int(c[s]) for s in ChunkState}

    def check(self) -> None:
        """States agree with the transitions; the stack holds exactly the FREE chunks."""
        c = np.bincount(self.state, minlength=len(ChunkState)).tolist()
        if c != self.count:
            raise ChunkAccountingError(f"chunks per state {c} but transitions moved "
                                       f"{self.count}: a chunk was named twice in a batch")
        idx = self._stack[:self._top]
        if len(np.unique(idx)) != len(idx):
            raise ChunkAccountingError("a chunk is twice on the free stack")
        if (self.state[idx] != _FREE).any():
            raise ChunkAccountingError("a non-free chunk is on the free stack",
                                       idx[self.state[idx] != _FREE])
        if c[_FREE] != self._top:
            raise ChunkAccountingError(f"{c[_FREE]} chunks are FREE but {self._top} are "
                                       "stacked")


@dataclass(eq=False)
class RxBatch:
    """Packets :meth:`XskSocket.recv` returned: descriptors, and the data in the UMEM.

    ``addr``/``len``/``options`` are the descriptors as received;
    ``data_addr`` is where each packet starts in the UMEM. The chunks stay
    the user's until :meth:`XskSocket.release`.
    """

    umem: Umem
    addr: U64Array
    len: U32Array
    options: U32Array
    chunks: U64Array  # the chunk index of each descriptor
    released: bool = field(default=False)

    def __len__(self) -> int:
        return len(self.addr)

    @property
    def data_addr(self) -> U64Array:
        return self.umem.data_addr(self.addr)

    def packets(self) -> list[bytes]:
        """Each packet's bytes."""
        return self.umem.packets(self.data_addr, self.len)

    def array(self, maxlen: int | None = None) -> npt.NDArray[np.uint8]:
        """An ``(n, maxlen)`` uint8 copy of the packets, zero-padded."""
        return self.umem.gather(self.data_addr, self.len, maxlen)

    def view(self, i: int) -> npt.NDArray[np.uint8]:
        """Packet ``i`` in place in the UMEM (no copy; valid until released)."""
        a = int(self.data_addr[i])
        return self.umem.buf[a:a + int(self.len[i])]


def _empty_batch(umem: Umem) -> RxBatch:
    return RxBatch(umem, np.zeros(0, np.uint64), np.zeros(0, np.uint32), np.zeros(0, np.uint32),
                   np.zeros(0, np.uint64))


def bind_flags(shared: bool, mode: str | None, need_wakeup: bool, sg: bool) -> XdpBindFlag:
    """The ``sxdp_flags`` a socket with these settings binds with (either backend)."""
    if shared:
        return XdpBindFlag.XDP_SHARED_UMEM
    flags = XdpBindFlag(0)
    if mode == "copy":
        flags |= XdpBindFlag.XDP_COPY
    elif mode == "zerocopy":
        flags |= XdpBindFlag.XDP_ZEROCOPY
    if need_wakeup:
        flags |= XdpBindFlag.XDP_USE_NEED_WAKEUP
    if sg:
        flags |= XdpBindFlag.XDP_USE_SG
    return flags


def _tx_packets(packets: object) -> list[bytes] | npt.NDArray[np.uint8]:
    """What :meth:`XskSocket.send` takes: a list of bytes-like objects or a 2-d uint8
    array; anything else is a BadArgument."""
    if isinstance(packets, np.ndarray):
        if packets.ndim != 2 or packets.dtype != np.uint8:
            raise BadArgument(f"XskSocket.send: packets must be a 2-d uint8 array, not "
                              f"{short(packets)}")
        return packets
    if isinstance(packets, list | tuple) and all(
            isinstance(p, bytes | bytearray | memoryview) for p in packets):
        return list(packets)
    raise BadArgument(f"XskSocket.send: packets must be a list of bytes-like objects or a "
                      f"2-d uint8 array, not {short(packets)}")


class XskSocket(ABC):
    """One AF_XDP socket's user side: UMEM, the four rings, chunk pool, batch API.

    A backend builds the rings over its memory and implements the hooks
    (:meth:`_kick_tx`, :meth:`_wakeup_rx`, :meth:`poll`, :meth:`statistics`,
    :meth:`options`, :meth:`_close_backend`). ``fill_ring``/``comp_ring`` are
    shared with other sockets when the UMEM is shared on the same queue;
    ``rx``/``tx`` may be None for a socket without that direction.
    ``need_wakeup``: the socket was bound with ``XDP_USE_NEED_WAKEUP``, so the
    datapath is kicked only when a ring's flag asks for it.
    """

    def __init__(self, umem: Umem, pool: ChunkPool, fill_ring: RingProd | None,
                 comp_ring: RingCons | None, rx: RingCons | None, tx: RingProd | None, *,
                 need_wakeup: bool) -> None:
        umem.get("XDP_UMEM_REG")
        self._umem_held = True
        self.umem = umem
        self.pool = pool
        self.fill_ring = fill_ring
        self.comp_ring = comp_ring
        self.rx = rx
        self.tx = tx
        self.need_wakeup = need_wakeup
        self._closed = False

    # -- backend hooks ------------------------------------------------------------

    @abstractmethod
    def _kick_tx(self) -> bool:
        """Make the datapath drain the tx ring; True when it stopped with work left."""

    @abstractmethod
    def _wakeup_rx(self) -> None:
        """Wake the receive side up (the fill ring asked for it)."""

    @abstractmethod
    def poll(self, timeout_ms: int = 0, events: int = POLL_RX_TX) -> int:
        """Wait up to ``timeout_ms`` for ``events`` (``POLLIN``: rx ready, ``POLLOUT``: tx
        room); those ready, 0 on timeout."""

    @abstractmethod
    def statistics(self) -> XdpStatistics:
        """``XDP_STATISTICS``."""

    @abstractmethod
    def options(self) -> int:
        """``XDP_OPTIONS`` flags (``XDP_OPTIONS_ZEROCOPY``)."""

    @abstractmethod
    def _close_backend(self) -> None:
        """Release what the backend holds (rings' memory, descriptors)."""

    # -- receive ------------------------------------------------------------------

    def _fill(self) -> RingProd:
        if self.fill_ring is None:
            raise PyxdpError("this socket has no fill ring")
        return self.fill_ring

    @checked(n=(0, 1 << 32))
    def fill(self, n: int | None = None) -> int:
        """Hand up to ``n`` free chunks (default: as many as fit) to the fill ring."""
        self._live("fill")
        ring = self._fill()
        want = ring.size if n is None else n
        k = min(want, ring.nb_free(want), self.pool.nfree)
        if k <= 0:
            return 0
        chunks = self.pool.alloc(k, _FILL)
        idx, got = ring.reserve(k)
        ring.write(idx, self.umem.chunk_base(chunks))
        ring.submit(got)
        return got

    @checked(max_packets=(0, 1 << 32))
    def recv(self, max_packets: int = DEFAULT_BATCH) -> RxBatch:
        """Up to ``max_packets`` received packets (an empty batch when none wait)."""
        self._live("recv")
        if self.rx is None:
            raise PyxdpError("this socket has no rx ring")
        idx, k = self.rx.peek(max_packets)
        if k == 0:
            if self.fill_ring is not None and (not self.need_wakeup
                                               or self.fill_ring.needs_wakeup()):
                self._wakeup_rx()
                idx, k = self.rx.peek(max_packets)
            if k == 0:
                return _empty_batch(self.umem)
        d = self.rx.read(idx, k)
        self.rx.release(k)
        addr = d["addr"]
        chunks = self.umem.chunk_index(addr)
        self.pool.move(chunks, _FILL, _RX, "recv")
        self.pool.held += k
        return RxBatch(self.umem, addr, d["len"], d["options"], chunks)

    @checked
    def release(self, batch: RxBatch, *, refill: bool = False) -> None:
        """Give a batch's chunks back: to the free stack, or straight to the fill ring."""
        self._live("release")
        if batch.released:
            raise ChunkAccountingError("batch released twice")
        batch.released = True
        k = len(batch)
        if not k:
            return
        self.pool.held -= k
        if not refill:
            self.pool.free(batch.chunks, _RX, "release")
            return
        ring = self._fill()
        self.pool.move(batch.chunks, _RX, _FILL, "release")
        idx, got = ring.reserve(k)
        ring.write(idx, self.umem.chunk_base(batch.chunks[:got]))
        ring.submit(got)
        if got < k:  # the fill ring is full: the rest wait on the free stack
            self.pool.free(batch.chunks[got:], _FILL, "release")

    # -- transmit -----------------------------------------------------------------

    @checked(packets=None, lengths=None)  # both checked below, as their forms want
    def send(self, packets: list[bytes] | npt.NDArray[np.uint8], *,
             lengths: npt.ArrayLike | None = None, kick: bool = True) -> int:
        """Copy packets into free chunks, queue them on the tx ring, kick; how many queued.

        ``packets``: a list of bytes-like objects or an ``(n, L)`` uint8 array
        (``lengths`` gives each row's length when not all ``L``). Packets that
        find no free chunk or tx slot are not queued (send them again);
        completions are reaped first when free chunks run short.
        """
        self._live("send")
        if self.tx is None:
            raise PyxdpError("this socket has no tx ring")
        packets = _tx_packets(packets)
        if lengths is not None:
            lengths = Array(np.uint32, scalar=False)("XskSocket.send: lengths", lengths)
            if len(lengths) < len(packets):  # type: ignore[arg-type]
                raise BadArgument(f"XskSocket.send: {len(lengths)} lengths for "  # type: ignore[arg-type]
                                  f"{len(packets)} packets")
        n = len(packets)
        k = min(n, self.tx.nb_free(n))
        if self.pool.nfree < k:
            self.complete()
        k = min(k, self.pool.nfree)
        if k <= 0:
            if kick:
                self.flush()
            return 0
        pk = packets[:k]
        if lengths is not None:
            ln = np.asarray(lengths, np.int64)[:k]
        elif isinstance(pk, np.ndarray):
            ln = np.full(k, pk.shape[1] if pk.ndim == 2 else 0, np.int64)
        else:
            ln = np.fromiter((len(p) for p in pk), np.int64, k)
        room = self.umem.chunk_size - self.umem.tx_metadata_len
        if (ln > room).any():  # checked before writing: a long packet would spill over
            raise ValueError(f"a packet is longer than a chunk can send ({room} bytes)")
        if isinstance(pk, np.ndarray) and (ln > (pk.shape[1] if pk.ndim == 2 else 0)).any():
            raise ValueError("a length is longer than its row")
        chunks = self.pool.alloc(k, _TX)
        data = self.umem.chunk_base(chunks) + np.uint64(self.umem.tx_metadata_len)
        wrote = self.umem.write_packets(data, pk, None if lengths is None else ln)
        idx, got = self.tx.reserve(k)
        self.tx.write_descs(idx, data, wrote, 0)
        self.tx.submit(got)
        if kick:
            self.flush()
        return got

    @checked
    def forward(self, batch: RxBatch, *, kick: bool = True) -> int:
        """Queue a received batch's buffers on the tx ring as they are (xdpsock's
        l2fwd: the rx descriptors become tx descriptors, no copy); how many.

        The chunks go from RX to TX and come back through :meth:`complete`;
        those the tx ring has no room for go back to the free stack.
        """
        self._live("forward")
        if self.tx is None:
            raise PyxdpError("this socket has no tx ring")
        if batch.released:
            raise ChunkAccountingError("batch released twice")
        batch.released = True
        k = len(batch)
        if not k:
            return 0
        self.pool.held -= k
        idx, got = self.tx.reserve(k)
        self.pool.move(batch.chunks[:got], _RX, _TX, "forward")
        self.tx.write_descs(idx, batch.addr[:got], batch.len[:got], 0)
        self.tx.submit(got)
        if got < k:
            self.pool.free(batch.chunks[got:], _RX, "forward")
        if kick:
            self.flush()
        return got

    def kick(self) -> bool:
        """Wake the tx side once if it needs it; True when the datapath has work left."""
        self._live("kick")
        if self.tx is None:
            return False
        if self.need_wakeup and not self.tx.needs_wakeup():
            return False
        return self._kick_tx()

    @checked(rounds=(0, 1 << 32))
    def flush(self, rounds: int = 64) -> None:
        """Kick and reap completions until the tx ring is drained (or ``rounds`` passes)."""
        self._live("flush")
        if self.tx is None:
            return
        for _ in range(rounds):
            more = self.kick()
            if self.comp_ring is not None:
                self.complete()
            if not more and self.tx.window()[1] == 0:
                return

    @checked(max_entries=(0, 1 << 32))
    def complete(self, max_entries: int | None = None) -> int:
        """Reap the completion ring: sent chunks go back to the free stack; how many."""
        self._live("complete")
        if self.comp_ring is None:
            raise PyxdpError("this socket has no completion ring")
        n = self.comp_ring.size if max_entries is None else max_entries
        idx, k = self.comp_ring.peek(n)
        if not k:
            return 0
        addrs = self.comp_ring.read_addrs(idx, k)
        self.comp_ring.release(k)
        self.pool.free(self.umem.chunk_index(addrs), _TX, "complete")
        return k

    # -- accounting ---------------------------------------------------------------

    def _window_chunks(self, ring: Ring | None, start_cons: int | None = None) -> U64Array:
        if ring is None:
            return np.zeros(0, np.uint64)
        cons, count = ring.window()
        if start_cons is not None:  # our unread part of a ring we consume
            count -= (start_cons - cons) & 0xFFFF_FFFF
            cons = start_cons
        if count <= 0:
            return np.zeros(0, np.uint64)
        if ring.kind == "desc":
            return self.umem.chunk_index(ring.read(cons, count)["addr"])
        return self.umem.chunk_index(ring.read_addrs(cons, count))

    def check_accounting(self) -> dict[str, int]:
        """Check every chunk is in exactly one place; the counts per place.

        The pool's states partition the chunks; the free stack holds exactly
        the FREE ones; the user holds exactly the RX ones handed out by
        :meth:`recv`; the published windows of fill and (unread) rx hold only
        FILL chunks, each once per ring, and those of tx and completion only
        TX chunks. ``kernel_rx``/``kernel_tx`` are the FILL/TX chunks in none
        of the windows (inside the datapath, or counted in a ring whose index
        the datapath has not published yet).
        """
        self.pool.check()
        counts = self.pool.counts()
        if counts["rx"] != self.pool.held:
            raise ChunkAccountingError(f"{counts['rx']} chunks are RX but recv handed out "
                                       f"{self.pool.held} not yet released")
        out = dict(counts)
        rx_start = self.rx.cached_cons if self.rx is not None else None
        for name, ring, state, start in (
                ("fill_ring", self.fill_ring, ChunkState.FILL, None),
                ("rx_ring", self.rx, ChunkState.FILL, rx_start),
                ("tx_ring", self.tx, ChunkState.TX, None),
                ("comp_ring", self.comp_ring, ChunkState.TX, None)):
            idx = self._window_chunks(ring, start)
            if len(np.unique(idx)) != len(idx):
                raise ChunkAccountingError(f"a chunk is twice in the {name}")
            bad = self.pool.state[idx] != state
            if bad.any():
                raise ChunkAccountingError(f"{name} holds chunks not in state {state.name}",
                                           idx[bad])
            out[name] = len(idx)
        out["kernel_rx"] = counts["fill"] - out["fill_ring"] - out["rx_ring"]
        out["kernel_tx"] = counts["tx"] - out["tx_ring"] - out["comp_ring"]
        return out

    # -- lifetime -----------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def _live(self, op: str) -> None:
        """A closed socket's descriptor is gone: EBADF, as the syscalls answer."""
        if self._closed:
            raise XskError(op, _errno.EBADF, "the socket is closed")

    def _umem_put(self) -> None:
        """This socket no longer uses its UMEM (once; before closing a UMEM it owns)."""
        if getattr(self, "_umem_held", False):
            self._umem_held = False
            self.umem.put()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._umem_put()
        self._close_backend()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
