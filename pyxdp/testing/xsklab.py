"""An AF_XDP lab: socket scenarios written once, run on Linux and on pyxdp's datapath.

The topology is the same on both backends: a veth pair ``veth0``/``veth1``
(MTU 3000) with an XDP program attached natively to ``veth0`` that redirects
every frame to the AF_XDP socket of its rx queue, and a second pair
``vq0``/``vq1`` with four queues and no program. Frames are sent from
``veth1`` (one ``send()`` per frame: on Linux each is its own NAPI poll of
``veth0``, so its ``xdp_do_flush`` publishes the rx ring at once; pyxdp
runs its host until idle after each), and what ``veth0``'s sockets transmit
is captured at ``veth1``'s stack. The sockets are
:class:`~pyxdp.xsk.linux.LinuxXskSocket` on Linux (copy mode: veth has no
zero-copy) and :class:`~pyxdp.xsk.datapath.PyxdpXskSocket` on pyxdp, driven
through the API they share.

A :class:`Scenario` is a function of an :class:`XskLab` returning its
observations (a dict of plain values: packets, descriptor offsets,
``XDP_STATISTICS``, chunk accounting, ``xdp_redirect``/``xdp_redirect_err``
events with their errno, completions, errnos of failed calls); the
differential test runs it with :func:`run_kernel` and :func:`run_pyxdp` and
compares the dicts. Programs: ``"xsk"`` is ``samples/xsk.o``
(``bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)``), ``"meta"`` an
assembled one that adds 8 bytes of metadata and moves ``data`` 4 bytes on
before the same redirect.

The kernel facts each scenario pins are in its docstring.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Final

import numpy as np

from pyxdp import samples
from pyxdp.collection import Collection
from pyxdp.errors import PyxdpError
from pyxdp.net.xdp_umem import XskError, extract_offset
from pyxdp.spec import BPF_F_XDP_HAS_FRAGS, CollectionSpec, MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.uapi.if_xdp import XDP_PKT_CONTD, XdpBindFlag
from pyxdp.xsk.umem import Umem
from pyxdp.xsk.xsk import XskSocket

__all__ = ["MAC0", "MAC1", "SCENARIOS", "Scenario", "XskLab", "frame", "run_kernel",
           "run_pyxdp"]

MAC0: Final = bytes.fromhex("020000000c00")
MAC1: Final = bytes.fromhex("020000000c01")
ETH_P_TEST: Final = 0x88B5  # IEEE local experimental ethertype
PACKET_OUTGOING: Final = 4
MTU: Final = 3000
FRAGS_MTU: Final = 9000  # the lab's MTU for the frags program (frames get frags)


def _mtu(program: str) -> int:
    return FRAGS_MTU if program == "xsk_frags" else MTU
SAMPLES: Final = str(samples.DIR)
Obs = dict[str, Any]

_XSKS = MapSpec("xsks", BpfMapType.BPF_MAP_TYPE_XSKMAP, 4, 4, 64)
_META_SRC = """
r6 = r1
r2 = -8
call 54
r1 = r6
r2 = 4
call 44
r2 = *(u32 *)(r6 +8)
r3 = *(u32 *)(r6 +0)
r4 = r2
r4 += 8
if r4 > r3 goto out
r5 = 0x1122334455667788 ll
*(u64 *)(r2 +0) = r5
out:
r2 = *(u32 *)(r6 +16)
r1 = map[fd:0]
r3 = 2
call 51
exit
"""


def frame(seq: int, size: int = 64, dst: bytes = MAC0, src: bytes = MAC1) -> bytes:
    """A test frame: Ethernet header, ``seq`` in 4 bytes, then a pattern."""
    head = dst + src + ETH_P_TEST.to_bytes(2, "big") + seq.to_bytes(4, "big")
    return head + bytes((seq + i) & 0xFF for i in range(size - len(head)))


def _program(name: str) -> tuple[CollectionSpec, str]:
    if name in ("xsk", "xsk_frags"):
        from pyxdp.elf import load_collection_spec
        spec = load_collection_spec(os.path.join(SAMPLES, "xsk.o"))
        if name == "xsk_frags":  # the same program loaded as SEC("xdp.frags") is
            p = spec.programs["xdp_sock_prog"]
            spec = replace(spec, programs={"xdp_sock_prog": replace(
                p, section="xdp.frags", flags=p.flags | BPF_F_XDP_HAS_FRAGS)})
        return spec, "xdp_sock_prog"
    if name == "meta":
        return asm_collection(_META_SRC, [_XSKS]), "t"
    raise ValueError(f"unknown lab program {name!r}")


class XskLab(ABC):
    """What a scenario drives: sockets, UMEMs, the XSKMAP, traffic, observations."""

    backend = ""

    def __init__(self) -> None:
        self.stack = ExitStack()
        self.coll: Collection | None = None

    # -- the backend's part ------------------------------------------------------------
    @abstractmethod
    def _socket(self, dev: str | None, queue: int, umem: Umem | None,
                shared: XskSocket | None, kw: dict[str, Any]) -> XskSocket:
        """A socket of this backend, bound to ``dev`` (None: unbound)."""

    @abstractmethod
    def _send1(self, data: bytes) -> None:
        """``veth1`` sends one frame."""

    @abstractmethod
    def settle(self) -> None:
        """Let the datapath finish what the last calls started."""

    @abstractmethod
    def captured(self) -> list[bytes]:
        """Frames ``veth1`` received since the last call."""

    @abstractmethod
    def events(self) -> list[tuple[str, int, int]]:
        """``(event, err, map_index)`` of ``veth0``'s redirects since the last call."""

    @abstractmethod
    def set_link(self, dev: str, up: bool) -> None:
        """Bring ``dev`` up or down."""

    # -- common --------------------------------------------------------------------------
    def umem(self, nchunks: int, chunk_size: int = 2048, headroom: int = 0,
             **kw: Any) -> Umem:
        u = Umem(nchunks, chunk_size, headroom, **kw)
        self.stack.callback(u.close)
        return u

    def socket(self, umem: Umem | None = None, dev: str | None = "veth0", queue: int = 0, *,
               shared: XskSocket | None = None, **kw: Any) -> XskSocket:
        """A copy-mode socket (ring sizes default to 64) bound to ``dev`` queue ``queue``
        (``dev=None``: unbound)."""
        sizes: dict[str, Any] = {"fill_size": 64, "comp_size": 64, "rx_size": 64,
                                 "tx_size": 64}
        sizes.update(kw)
        s = self._socket(dev, queue, umem, shared, sizes)
        self.stack.callback(s.close)
        return s

    def set_slot(self, slot: int, sock: XskSocket | None) -> None:
        """``xsks[slot] = sock`` (None: delete the slot)."""
        assert self.coll is not None
        m = self.coll.maps["xsks"]
        if sock is None:
            del m[slot]
        else:
            m[slot] = sock.fd  # type: ignore[attr-defined]

    def send(self, frames: list[bytes]) -> None:
        """``veth1`` sends each frame to ``veth0`` (one poll of ``veth0`` per frame)."""
        for f in frames:
            self._send1(f)
        self.settle()

    def recv(self, sock: XskSocket, n: int, *, refill: bool = True,
             timeout: float = 2.0) -> tuple[list[bytes], list[int]]:
        """Up to ``n`` packets and their descriptor addresses (released after)."""
        pkts: list[bytes] = []
        addrs: list[int] = []
        deadline = time.monotonic() + timeout
        while len(pkts) < n:
            batch = sock.recv(n - len(pkts))
            if len(batch):
                pkts.extend(batch.packets())
                addrs.extend(batch.addr.tolist())
                sock.release(batch, refill=refill)
                continue
            if time.monotonic() > deadline:
                break
            self.settle()
            time.sleep(0.002)
        return pkts, addrs

    def close(self) -> None:
        self.stack.close()


def _errno_of(fn: Callable[[], object]) -> int:
    try:
        fn()
    except XskError as e:
        return e.errno
    return 0


def _stats(sock: XskSocket) -> tuple[int, ...]:
    st = sock.statistics()
    return (st.rx_dropped, st.rx_invalid_descs, st.tx_invalid_descs, st.rx_ring_full,
            st.rx_fill_ring_empty_descs, st.tx_ring_empty_descs)


def _acct(sock: XskSocket) -> dict[str, int]:
    return sock.check_accounting()


# --------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Scenario:
    """A named scenario on lab program ``program``."""

    name: str
    body: Callable[[XskLab], Obs]
    program: str = "xsk"


def rx_copy(lab: XskLab) -> Obs:
    """Copy-mode receive, exact bytes: data at chunk + headroom (0) + 256, frames of
    60..1400 bytes, 64 buffers in flight at most; one ``xdp_redirect`` per frame."""
    u = lab.umem(128, 2048)
    s = lab.socket(u)
    lab.set_slot(0, s)
    s.fill(64)
    sent = [frame(i, 60 + (i * 37) % 1340) for i in range(60)]
    got: list[bytes] = []
    addrs: list[int] = []
    for lump in range(0, len(sent), 30):
        lab.send(sent[lump:lump + 30])
        g, a = lab.recv(s, 30)
        got += g
        addrs += a
    evs = lab.events()
    return {"same": got == sent, "n": len(got), "offsets": sorted({a % 2048 for a in addrs}),
            "stats": _stats(s), "acct": _acct(s),
            "events": sorted({e for e in evs}), "nevents": len(evs)}


def rx_unaligned_headroom(lab: XskLab) -> Obs:
    """Unaligned UMEM (chunk 3000) with 64 bytes of headroom: the handle is the fill
    address with headroom + 256 in its top 16 bits."""
    u = lab.umem(32, 3000, 64, unaligned=True)
    s = lab.socket(u)
    lab.set_slot(0, s)
    s.fill(16)
    sent = [frame(i, 100 + i) for i in range(10)]
    lab.send(sent)
    got, addrs = lab.recv(s, 10)
    a = np.array(addrs, np.uint64)
    return {"same": got == sent, "offset": sorted(set(extract_offset(a).tolist())),
            "bases": sorted(set(((a & np.uint64(2**48 - 1)) % np.uint64(3000)).tolist())),
            "stats": _stats(s), "acct": _acct(s)}


def fill_ring_empty(lab: XskLab) -> Obs:
    """No fill buffer: -ENOMEM, counted in rx_dropped *and* rx_fill_ring_empty_descs
    per frame; once filled, frames come through."""
    u = lab.umem(64, 2048)
    s = lab.socket(u)
    lab.set_slot(0, s)
    lab.send([frame(i) for i in range(3)])
    out: Obs = {"stats0": _stats(s), "events0": lab.events(), "acct0": _acct(s)}
    s.fill(8)
    lab.send([frame(99)])
    got, _ = lab.recv(s, 1)
    out.update(got=got == [frame(99)], stats1=_stats(s), events1=lab.events())
    return out


def rx_ring_full(lab: XskLab) -> Obs:
    """rx ring of 8, 32 fill buffers, 12 frames: 4 get -ENOBUFS (rx_ring_full) and take
    no fill buffer (6.18); after the user reads 3, 3 more fit."""
    u = lab.umem(64, 2048)
    s = lab.socket(u, rx_size=8, fill_size=32)
    lab.set_slot(0, s)
    s.fill(32)
    lab.send([frame(i) for i in range(12)])
    out: Obs = {"stats0": _stats(s), "acct0": _acct(s), "events0": lab.events()}
    b = s.recv(3)
    out["first"] = b.packets()
    s.release(b)
    lab.send([frame(100 + i) for i in range(5)])
    out.update(stats1=_stats(s), acct1=_acct(s), events1=lab.events())
    got, _ = lab.recv(s, 16)
    out.update(rest=got, acct2=_acct(s))
    return out


def fill_and_rx_exhausted(lab: XskLab) -> Obs:
    """rx ring and fill ring both exhausted: the buffer is looked for first (-ENOMEM)."""
    u = lab.umem(64, 2048)
    s = lab.socket(u, rx_size=8)
    lab.set_slot(0, s)
    s.fill(8)
    lab.send([frame(i) for i in range(10)])
    return {"stats": _stats(s), "acct": _acct(s), "events": lab.events()}


def frame_too_big(lab: XskLab) -> Obs:
    """A frame longer than chunk - headroom - 256 (1792 here): -ENOSPC, rx_dropped."""
    u = lab.umem(64, 2048)
    s = lab.socket(u)
    lab.set_slot(0, s)
    s.fill()
    lab.send([frame(1, 1792), frame(2, 1793), frame(3, 2000)])
    got, _ = lab.recv(s, 1)
    return {"lens": [len(p) for p in got], "stats": _stats(s), "events": lab.events(),
            "acct": _acct(s)}


def wrong_socket(lab: XskLab) -> Obs:
    """The slot holds a socket bound elsewhere (-EINVAL) or not bound (-ENXIO): frames
    dropped, no socket counter moves."""
    u = lab.umem(64, 2048)
    other = lab.socket(u, "vq0", 1)
    other.fill()
    lab.set_slot(0, other)
    lab.send([frame(1)])
    out: Obs = {"elsewhere": lab.events(), "stats0": _stats(other)}
    u2 = lab.umem(16, 2048)
    unbound = lab.socket(u2, None)
    lab.set_slot(0, unbound)
    lab.send([frame(2)])
    out.update(unbound=lab.events(), stats1=_stats(unbound))
    lab.set_slot(0, None)
    lab.send([frame(3)])  # empty slot: XDP_PASS, no redirect at all
    out["empty"] = lab.events()
    return out


def metadata_and_head(lab: XskLab) -> Obs:
    """Copy mode copies the metadata just before the data and puts the data at chunk +
    headroom + 256 whatever ``adjust_head`` did (+4 here: the first 4 bytes are gone)."""
    u = lab.umem(64, 2048, 64)
    s = lab.socket(u)
    lab.set_slot(0, s)
    s.fill()
    f = frame(7, 80)
    lab.send([f])
    b = s.recv(1)
    a = int(b.addr[0])
    out = {"addr": a % 2048, "len": int(b.len[0]), "data": bytes(b.packets()[0]) == f[4:],
           "meta": u.buf[a - 8:a].tobytes().hex(), "stats": _stats(s)}
    s.release(b)
    return out


def tx_completions(lab: XskLab) -> Obs:
    """150 frames queued, then kicks: 32 per sendto (EAGAIN while more wait), frames on
    the wire in order, every address completed; the drain that empties the ring counts
    one tx_ring_empty_descs."""
    u = lab.umem(256, 2048)
    s = lab.socket(u, tx_size=256, comp_size=256)
    assert s.tx is not None and s.comp_ring is not None
    sent = [frame(i, 60 + i % 500, dst=MAC1, src=MAC0) for i in range(150)]
    assert s.send(sent, kick=False) == 150
    idx = (s.tx.producer - 150) & 0xFFFF_FFFF
    tx_addrs = sorted(s.tx.read(idx, 150)["addr"].tolist())
    kicks = 0
    while s.kick():
        kicks += 1
    lab.settle()
    wire = lab.captured()
    ci, k = s.comp_ring.peek(256)
    done = sorted(s.comp_ring.read_addrs(ci, k).tolist())
    s.comp_ring.cancel(k)
    out = {"kicks": kicks, "wire": wire == sent, "nwire": len(wire), "done": done == tx_addrs,
           "stats": _stats(s)}
    out["completed"] = s.complete()
    out["acct"] = _acct(s)
    s.kick()  # an empty kick: one more tx_ring_empty_descs
    out["stats_after"] = _stats(s)
    return out


def tx_completion_ring_full(lab: XskLab) -> Obs:
    """A completion ring of 8: 8 sent, then -EAGAIN until the user reaps."""
    u = lab.umem(64, 2048)
    s = lab.socket(u, fill_size=8, comp_size=8, rx_size=8)
    assert s.tx is not None and s.comp_ring is not None
    s.send([frame(i, dst=MAC1, src=MAC0) for i in range(12)], kick=False)
    out: Obs = {"k1": s.kick(), "c1": s.comp_ring.producer, "t1": s.tx.consumer}
    out.update(k2=s.kick(), c2=s.comp_ring.producer, t2=s.tx.consumer, s2=_stats(s))
    out["reaped"] = s.complete()
    out.update(k3=s.kick(), c3=s.comp_ring.producer, t3=s.tx.consumer, s3=_stats(s))
    lab.settle()
    out["wire"] = len(lab.captured())
    s.complete()
    out["acct"] = _acct(s)
    return out


_INVALID_CASES = [(0, 60, 0), (4096 + 1000, 1048, 0), (4096 + 1000, 1049, 0), (2048, 0, 0),
                  (64 * 2048, 60, 0), (64 * 2048 - 60, 60, 0), (6144, 60, 0x4),
                  (6144, 60, 0x10000), (8192, 2048, 0), (8192, 2049, 0)]


def tx_invalid_descs(lab: XskLab) -> Obs:
    """Each descriptor alone, then [valid, invalid, valid] and an invalid one with the
    completion ring full. 6.18: an invalid descriptor takes a completion slot, is
    counted in tx_invalid_descs, its address *is* completed, and it ends the sendto."""
    u = lab.umem(64, 2048)
    s = lab.socket(u, fill_size=8, comp_size=8, rx_size=8)
    assert s.tx is not None and s.comp_ring is not None
    for c in range(64):
        u.buf[c * 2048:c * 2048 + 14] = np.frombuffer(MAC1 + MAC0 + b"\x88\xb5", np.uint8)

    def put(descs: list[tuple[int, int, int]]) -> None:
        assert s.tx is not None
        idx, k = s.tx.reserve(len(descs))
        s.tx.write_descs(idx, [d[0] for d in descs], [d[1] for d in descs],
                         [d[2] for d in descs])
        s.tx.submit(k)

    def step(tag: str, reap: bool = True) -> None:
        assert s.tx is not None and s.comp_ring is not None
        more = s.kick()
        lab.settle()
        comp = s.comp_ring.consume(64).tolist() if reap else []
        out[tag] = (more, comp, _stats(s)[2], _stats(s)[5], s.tx.consumer,
                    s.comp_ring.producer)

    out: Obs = {}
    for n, case in enumerate(_INVALID_CASES):
        put([case])
        step(f"case{n}")
    put([(0, 60, 0), (2048 + 1000, 1049, 0), (4096, 60, 0)])
    step("mid1")
    step("mid2")
    put([(c * 2048, 60, 0) for c in range(8)])
    step("full1", reap=False)
    put([(2048, 0, 0)])
    step("full2", reap=False)  # the completion ring is full: EAGAIN, nothing consumed
    step("full3")
    step("full4")
    out["wire"] = len(lab.captured())
    return out


def tx_budget(lab: XskLab) -> Obs:
    """``XDP_MAX_TX_SKB_BUDGET``: [32, tx ring size] or EACCES; 128 sends 100 at once."""
    u = lab.umem(256, 2048)
    s = lab.socket(u, tx_size=128, comp_size=256)
    setb: Callable[[int], None] = s.set_tx_budget  # type: ignore[attr-defined]
    out: Obs = {"bad": [_errno_of(partial(setb, b)) for b in (31, 129, 0)]}
    setb(128)
    sent = [frame(i, dst=MAC1, src=MAC0) for i in range(100)]
    s.send(sent, kick=False)
    out["more"] = s.kick()
    lab.settle()
    out["wire"] = lab.captured() == sent
    s.complete()
    out["stats"] = _stats(s)
    return out


def shared_umem(lab: XskLab) -> Obs:
    """``XDP_SHARED_UMEM``: on the same queue, one fill ring for both; on another
    device, rings of its own over the same UMEM."""
    u = lab.umem(64, 2048)
    a = lab.socket(u)
    b = lab.socket(None, "veth0", 0, shared=a, rx_size=64, tx_size=64, fill_size=0,
                   comp_size=0)
    c = lab.socket(None, "vq0", 0, shared=a, fill_size=8, comp_size=8, rx_size=8,
                   tx_size=8)
    lab.set_slot(0, b)
    a.fill(16)
    lab.send([frame(i) for i in range(5)])
    got, _ = lab.recv(b, 5, refill=False)
    return {"same_fill": b.fill_ring is a.fill_ring, "own_fill_c": c.fill_ring is not a.fill_ring,
            "got": got == [frame(i) for i in range(5)], "a_rx": len(a.recv()),
            "stats_a": _stats(a), "stats_b": _stats(b), "acct": _acct(a),
            "flags": [int(x.bind_flags()) for x in (a, b, c)]}  # type: ignore[attr-defined]


def bind_errnos(lab: XskLab) -> Obs:
    """``xsk_bind``'s errnos in order (veth: no zero-copy)."""
    copy = int(XdpBindFlag.XDP_COPY)
    zc = int(XdpBindFlag.XDP_ZEROCOPY)
    u1, u2 = lab.umem(16, 2048), lab.umem(16, 2048)
    a = lab.socket(u1, None, fill_size=8, comp_size=8, rx_size=8, tx_size=8)
    b = lab.socket(u2, None, fill_size=8, comp_size=8, rx_size=8, tx_size=8)
    bind: Callable[..., None] = a.bind  # type: ignore[attr-defined]
    bindb: Callable[..., None] = b.bind  # type: ignore[attr-defined]
    out = [_errno_of(lambda: bind("veth0", 1, copy)),
           _errno_of(lambda: bind("vq0", 4, copy)),
           _errno_of(lambda: bind("vq0", 0, copy | zc)),
           _errno_of(lambda: bind("vq0", 0, 1 << 5)),
           _errno_of(lambda: bind("vq0", 0, zc)),
           _errno_of(lambda: bind("vq0", 3, copy)),
           _errno_of(lambda: bind("vq0", 2, copy)),
           _errno_of(lambda: bindb("vq0", 3, copy)),
           _errno_of(lambda: bindb("vq0", 2, 0))]
    c = lab.socket(u1, None, fill_size=8, comp_size=8, rx_size=0, tx_size=0)
    d = lab.socket(u1, None, fill_size=0, comp_size=8, rx_size=8, tx_size=8)
    e = lab.socket(u1, None, fill_size=8, comp_size=8, rx_size=8, tx_size=8)
    out += [_errno_of(lambda: c.bind("vq0", 1, copy)),  # type: ignore[attr-defined]
            _errno_of(lambda: d.bind("vq0", 1, copy)),  # type: ignore[attr-defined]
            _errno_of(lambda: e.bind("vq0", 1, int(XdpBindFlag.XDP_SHARED_UMEM)))]  # type: ignore[attr-defined]
    return {"errnos": out, "options": [a.options(), b.options()]}


def poll_events(lab: XskLab) -> Obs:
    """``poll``: POLLOUT while the tx ring is at most half full, POLLIN with rx entries;
    in copy mode a poll transmits like sendto."""
    u = lab.umem(64, 2048)
    s = lab.socket(u, tx_size=8)
    lab.set_slot(0, s)
    s.fill(16)
    out: Obs = {"idle": s.poll(0)}
    lab.send([frame(1)])
    out["rx"] = s.poll(0)
    got, _ = lab.recv(s, 1)
    s.send([frame(i, dst=MAC1, src=MAC0) for i in range(6)], kick=False)
    out["tx_full"] = s.poll(0)  # poll drives tx: they go
    lab.settle()
    out["wire"] = len(lab.captured())
    out["after"] = s.poll(0)
    s.complete()
    return out


def l2fwd(lab: XskLab) -> Obs:
    """xdpsock l2fwd: received buffers go straight back out with the MACs swapped
    (rx descriptor addresses reused as tx descriptors)."""
    u = lab.umem(128, 2048)
    s = lab.socket(u)
    lab.set_slot(0, s)
    s.fill(64)
    sent = [frame(i, 64 + 10 * i) for i in range(40)]
    lab.send(sent)
    fwd = 0
    deadline = time.monotonic() + 2
    while fwd < len(sent) and time.monotonic() < deadline:
        b = s.recv(64)
        if not len(b):
            lab.settle()
            continue
        for i in range(len(b)):
            v = b.view(i)
            mac = v[:6].copy()
            v[:6] = v[6:12]
            v[6:12] = mac
        fwd += s.forward(b)
    lab.settle()
    s.complete()
    wire = lab.captured()
    want = [f[6:12] + f[:6] + f[12:] for f in sent]
    return {"fwd": fwd, "wire": wire == want, "stats": _stats(s), "acct": _acct(s)}


def link_down(lab: XskLab) -> Obs:
    """sendto on a device that is down: ENETDOWN; poll: nothing. The peer down: the
    packet is dropped by veth (EBUSY), its address completed."""
    u = lab.umem(64, 2048)
    s = lab.socket(u)
    s.send([frame(1, dst=MAC1, src=MAC0), frame(2, dst=MAC1, src=MAC0)], kick=False)
    lab.set_link("veth0", False)
    out: Obs = {"down": _errno_of(s.kick), "poll": s.poll(0)}
    lab.set_link("veth0", True)
    lab.set_link("veth1", False)
    assert s.comp_ring is not None and s.tx is not None
    out["peer_down"] = s.kick()
    lab.settle()
    out["comp"] = len(s.comp_ring.consume(64))
    out["tx_cons"] = s.tx.consumer
    out["stats"] = _stats(s)
    out["again"] = s.kick()
    out["comp2"] = len(s.comp_ring.consume(64))
    out["stats2"] = _stats(s)
    lab.set_link("veth1", True)
    return out


def _recv_descs(lab: XskLab, sock: XskSocket, n: int) -> list[tuple[bytes, int, int, int]]:
    """Up to ``n`` rx descriptors: (bytes, len, options, offset in the chunk)."""
    out: list[tuple[bytes, int, int, int]] = []
    deadline = time.monotonic() + 2.0
    while len(out) < n:
        b = sock.recv(n - len(out))
        if len(b):
            out += zip(b.packets(), b.len.tolist(), b.options.tolist(),
                       (b.addr % np.uint64(sock.umem.chunk_size)).tolist(), strict=True)
            sock.release(b, refill=True)
            continue
        if time.monotonic() > deadline:
            break
        lab.settle()
        time.sleep(0.002)
    return out


def _packets(descs: list[tuple[bytes, int, int, int]]) -> list[bytes]:
    """Descriptors joined into packets (``XDP_PKT_CONTD`` chains)."""
    out: list[bytes] = []
    cur = b""
    for data, _, opts, _ in descs:
        cur += data
        if not opts & XDP_PKT_CONTD:
            out.append(cur)
            cur = b""
    return out


FRAG_SIZES: Final = (1000, 3840, 3841, 5000, 9014)


def rx_sg_frags(lab: XskLab) -> Obs:
    """``XDP_USE_SG`` on a 9000-MTU veth whose program is frags-aware: frames above
    3520 bytes reach the program as head + frags, and the socket gets each cut
    into buffers of ``chunk - 256`` (3840) bytes, ``XDP_PKT_CONTD`` on all but the
    last (``__xsk_rcv`` copies across the frags); one ``xdp_redirect`` per frame."""
    u = lab.umem(64, 4096)
    s = lab.socket(u, sg=True)
    lab.set_slot(0, s)
    s.fill(64)
    sent = [frame(i, n) for i, n in enumerate(FRAG_SIZES)]
    lab.send(sent)
    descs = _recv_descs(lab, s, 9)
    evs = lab.events()
    return {"same": _packets(descs) == sent, "descs": [d[1:] for d in descs],
            "stats": _stats(s), "acct": _acct(s), "events": sorted(set(evs)),
            "nevents": len(evs)}


def rx_frags_without_sg(lab: XskLab) -> Obs:
    """Without ``XDP_USE_SG`` a frame longer than a buffer (3840) is refused whether or
    not it has frags (-ENOSPC, ``rx_dropped``); a 3840-byte frame with frags (head
    3520 + 320) fits one buffer and comes through."""
    u = lab.umem(64, 4096)
    s = lab.socket(u)
    lab.set_slot(0, s)
    s.fill(64)
    sent = [frame(i, n) for i, n in enumerate(FRAG_SIZES)]
    lab.send(sent)
    descs = _recv_descs(lab, s, 2)
    return {"got": _packets(descs) == [sent[0], sent[1]], "descs": [d[1:] for d in descs],
            "stats": _stats(s), "acct": _acct(s), "events": lab.events()}


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("rx_copy", rx_copy),
    Scenario("rx_unaligned_headroom", rx_unaligned_headroom),
    Scenario("fill_ring_empty", fill_ring_empty),
    Scenario("rx_ring_full", rx_ring_full),
    Scenario("fill_and_rx_exhausted", fill_and_rx_exhausted),
    Scenario("frame_too_big", frame_too_big),
    Scenario("wrong_socket", wrong_socket),
    Scenario("metadata_and_head", metadata_and_head, "meta"),
    Scenario("tx_completions", tx_completions),
    Scenario("tx_completion_ring_full", tx_completion_ring_full),
    Scenario("tx_invalid_descs", tx_invalid_descs),
    Scenario("tx_budget", tx_budget),
    Scenario("shared_umem", shared_umem),
    Scenario("bind_errnos", bind_errnos),
    Scenario("poll_events", poll_events),
    Scenario("l2fwd", l2fwd),
    Scenario("link_down", link_down),
    Scenario("rx_sg_frags", rx_sg_frags, "xsk_frags"),
    Scenario("rx_frags_without_sg", rx_frags_without_sg, "xsk_frags"),
)}


# --------------------------------------------------------------------------
# Linux
# --------------------------------------------------------------------------

def _ip(*args: str) -> None:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        raise PyxdpError(f"ip {' '.join(args)}: {res.stderr.strip()}")


class _KernelLab(XskLab):
    backend = "kernel"

    def __init__(self, ns: str, base: int) -> None:
        super().__init__()
        self.ns = ns
        self.ifindex = {"veth0": base, "veth1": base + 1, "vq0": base + 2, "vq1": base + 3}
        self.trace: Any = None
        self.sender: socket.socket | None = None
        self.cap: socket.socket | None = None

    def _socket(self, dev: str | None, queue: int, umem: Umem | None,
                shared: XskSocket | None, kw: dict[str, Any]) -> XskSocket:
        from pyxdp.xsk.linux import LinuxXskSocket
        assert shared is None or isinstance(shared, LinuxXskSocket)
        return LinuxXskSocket(dev, queue, umem, shared=shared, **kw)

    def _send1(self, data: bytes) -> None:
        assert self.sender is not None
        if self.sender.send(data) != len(data):
            raise PyxdpError("short send")

    def settle(self) -> None:
        time.sleep(0.002)

    def captured(self) -> list[bytes]:
        assert self.cap is not None
        out: list[bytes] = []
        time.sleep(0.01)
        while True:
            try:
                data, addr = self.cap.recvfrom(1 << 16)
            except BlockingIOError:
                return out
            if addr[2] != PACKET_OUTGOING:
                out.append(data)

    def events(self) -> list[tuple[str, int, int]]:
        time.sleep(0.01)
        out = []
        for ev in self.trace.read(0.05):
            rec: Any = ev.record
            if rec.ifindex == self.ifindex["veth0"]:
                out.append((ev.name, int(rec.err), int(rec.map_index)))
        return out

    def set_link(self, dev: str, up: bool) -> None:
        _ip("-n", self.ns, "link", "set", dev, "up" if up else "down")


@contextmanager
def _kernel_lab(program: str) -> Iterator[_KernelLab]:
    from pyxdp.kernel.link import XdpLink
    from pyxdp.kernel.netlink import netns
    from pyxdp.kernel.tracefs import TraceInstance
    from pyxdp.testing.vethlab import _ifindex_base
    ns = f"pyxdp-xsklab-{os.getpid()}"
    base = _ifindex_base()
    lab = _KernelLab(ns, base)
    _ip("netns", "add", ns)
    try:
        _ip("-n", ns, "link", "add", "veth0", "index", str(base), "address", MAC0.hex(":"),
            "mtu", str(_mtu(program)), "type", "veth", "peer", "name", "veth1", "index",
            str(base + 1), "address", MAC1.hex(":"), "mtu", str(_mtu(program)))
        _ip("-n", ns, "link", "add", "vq0", "index", str(base + 2), "numtxqueues", "4",
            "numrxqueues", "4", "type", "veth", "peer", "name", "vq1", "index", str(base + 3),
            "numtxqueues", "4", "numrxqueues", "4")
        with netns(ns), lab.stack:
            for conf in ("all", "default"):
                with open(f"/proc/sys/net/ipv6/conf/{conf}/disable_ipv6", "w") as f:
                    f.write("1")
            for d in ("veth0", "veth1", "vq0", "vq1"):
                _ip("-n", ns, "link", "set", d, "up")
            spec, prog = _program(program)
            lab.coll = lab.stack.enter_context(Collection(spec, "kernel"))
            # A bpf_link: detached with the stack, or when this process dies.
            lab.stack.enter_context(XdpLink.attach("veth0", lab.coll.programs[prog],
                                                   mode="native"))
            lab.trace = lab.stack.enter_context(
                TraceInstance(["xdp_redirect", "xdp_redirect_err"]))
            lab.sender = lab.stack.enter_context(
                socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
            lab.sender.bind(("veth1", 0))
            lab.cap = lab.stack.enter_context(
                socket.socket(socket.AF_PACKET, socket.SOCK_RAW | socket.SOCK_NONBLOCK,
                              socket.htons(ETH_P_TEST)))
            lab.cap.bind(("veth1", ETH_P_TEST))
            yield lab
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=60)


def run_kernel(scenario: Scenario) -> Obs:
    """Run ``scenario`` on Linux (root): a fresh namespace, LinuxXskSocket, copy mode."""
    with _kernel_lab(scenario.program) as lab:
        return scenario.body(lab)


# --------------------------------------------------------------------------
# pyxdp
# --------------------------------------------------------------------------

class _PyxdpLab(XskLab):
    backend = "pyxdp"

    def __init__(self, engine: str, native: bool, listen: bool = True, mtu: int = MTU) -> None:
        from pyxdp.net.netdevice import Host
        from pyxdp.net.trace import Tracer
        super().__init__()
        self.tracer = Tracer()
        self.host = Host("xsklab", engine=engine, tracer=self.tracer, native=native)
        h = self.host
        v0, v1 = h.veth("veth0", "veth1", mtu=mtu)
        v0.mac, v1.mac = MAC0, MAC1
        q0, q1 = h.veth("vq0", "vq1", queues=4)
        self.devs = {"veth0": v0, "veth1": v1, "vq0": q0, "vq1": q1}
        self._wire: list[bytes] = []
        # A listener makes the datapath fire every event (and keeps the native poll
        # loop out); without one, events() reports the counters' growth instead.
        self._queue = self.tracer.listen(["xdp_redirect", "xdp_redirect_err"]) \
            if listen else None
        self._counted: dict[tuple[str, int], int] = {}
        h.stack.on_receive(self._seen)

    def _seen(self, batch: Any) -> None:
        for i, p in zip(batch.ifindex.tolist(), batch.packets(), strict=True):
            if i == self.devs["veth1"].ifindex and p[12:14] == ETH_P_TEST.to_bytes(2, "big"):
                self._wire.append(p)

    def _socket(self, dev: str | None, queue: int, umem: Umem | None,
                shared: XskSocket | None, kw: dict[str, Any]) -> XskSocket:
        from pyxdp.xsk.datapath import PyxdpXskSocket
        assert shared is None or isinstance(shared, PyxdpXskSocket)
        return PyxdpXskSocket(self.devs[dev] if dev is not None else None, queue, umem,
                              host=self.host, shared=shared, **kw)

    def _send1(self, data: bytes) -> None:
        self.devs["veth1"].transmit([data])
        self.host.run()

    def settle(self) -> None:
        self.host.run()

    def captured(self) -> list[bytes]:
        out, self._wire = self._wire, []
        return out

    def events(self) -> list[tuple[str, int, int]]:
        v0 = self.devs["veth0"].ifindex
        out = []
        if self._queue is None:
            # (name, err, count) per kind since the last call, counted on veth0.
            now: dict[tuple[str, int], int] = {}
            for name in ("xdp_redirect", "xdp_redirect_err"):
                for key, row in self.tracer[name].counters.items():
                    if key[0] == v0:
                        k = (name, int(key[1]) if name == "xdp_redirect_err" else 0)
                        now[k] = now.get(k, 0) + int(row[0])
            for k, n in sorted(now.items()):
                if n != self._counted.get(k, 0):
                    out.append((k[0], k[1], n - self._counted.get(k, 0)))
            self._counted = now
            return out
        for ev in self._queue.drain():
            rec: Any = ev.record
            if rec.ifindex == v0:
                out.append((ev.name, int(rec.err), int(rec.map_index)))
        return out

    def set_link(self, dev: str, up: bool) -> None:
        self.devs[dev].up = up

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self._queue is not None:
                self._queue.close()
            self.host.close()


def run_pyxdp(scenario: Scenario, *, engine: str = "auto", native: bool = True,
              listen: bool = True) -> Obs:
    """Run ``scenario`` on pyxdp's datapath (the host's page accounting is checked at
    the end: a leak raises). ``listen=False``: no event listener, so the native
    poll loop runs (with one, every frame takes the Python path to fire its
    events), and the events observed are the trace counters' growth."""
    lab = _PyxdpLab(engine, native, listen, _mtu(scenario.program))
    try:
        spec, prog = _program(scenario.program)
        lab.coll = lab.host.load(spec)
        lab.devs["veth0"].attach_xdp(lab.coll.programs[prog])
        return scenario.body(lab)
    finally:
        lab.close()

