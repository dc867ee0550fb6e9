"""AF_XDP receive in the native poll loop (``pyxdp.net.xsk_native``) against the Python path,
and the rxdrop loop of ``pyxdp.xsk.native``.

The same NIC, generator, program and socket, once with the host's native
loop and once without: every descriptor, every received byte, the socket's
and the device's statistics, the trace counters, the rings' indices and the
pool's free list must come out the same - copy mode and zero-copy, XSKMAP
and ``bpf_redirect_xsk``, and the error paths (fill ring empty, rx ring
full, frames too long, a slot naming another queue's socket). Then the
machine-code user loop: nothing lost, every chunk back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyxdp.maps.xskmap import XskMap
from pyxdp.net.napi import native_available
from pyxdp.net.netdevice import Host
from pyxdp.net.packets import udp_packet
from pyxdp.net.source import TrafficGenerator
from pyxdp.net.trace import Tracer
from pyxdp.net.xdp_umem import XskError
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.if_xdp import XdpDescOption
from pyxdp.xsk.datapath import PyxdpXskSocket
from pyxdp.xsk.native import Rxdrop, RxdropThread, rxdrop_drain
from pyxdp.xsk.umem import Umem

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
pytestmark = pytest.mark.skipif(not native_available(), reason="numba is not importable")


def _packets(n: int, size: int) -> list[bytes]:
    return [udp_packet(bytes([i % 251]) * 8, sport=1000 + i, size=size) for i in range(n)]


def _run(native: bool, *, mode: str = "copy", redirect: str = "map", count: int = 300,
         fill: int = 256, rx_size: int = 512, size: int = 64, unaligned: bool = False,
         headroom: int = 0, other_queue: bool = False, generic: bool = False
         ) -> dict[str, Any]:
    tracer = Tracer()
    host = Host(engine="jit", tracer=tracer, native=native)
    try:
        nic = host.add_device("eth0", rx_queues=2, tx_queues=2)
        coll = host.load(SAMPLES / ("xsk_redirect.o" if redirect == "xsk" else "xsk.o"))
        nic.attach_xdp(next(iter(coll.programs.values())),
                       mode="generic" if generic else "native")
        umem = Umem(1024, 2048, headroom, unaligned=unaligned)
        sock = PyxdpXskSocket(nic, 0, umem, mode=mode, fill_size=1024, comp_size=1024,
                              rx_size=rx_size, tx_size=64)
        other = None
        if redirect == "map":
            if other_queue:  # slot 0 names a socket bound to queue 1: -EINVAL
                other = PyxdpXskSocket(nic, 1, Umem(64, 2048), mode="copy")
                coll.maps["xsks"][0] = other.fd
            else:
                coll.maps["xsks"][0] = sock.fd
        sock.fill(fill)
        prog = nic.xdp_generic if generic else nic.xdp_prog
        assert prog is not None
        mid = next((m.id for m in prog.maps.values() if isinstance(m, XskMap)), -1)
        nic.rx[0].source = TrafficGenerator(packets=_packets(7, size), count=count)
        host.run()
        rx = sock.rx
        assert rx is not None
        n = (rx.producer - rx.cached_cons) & 0xFFFF_FFFF
        b = sock.recv(n)
        out = {
            "addr": b.addr.tolist(), "len": b.len.tolist(), "options": b.options.tolist(),
            "data": b.packets(), "stats": sock.statistics(), "dev": nic.stats,
            "fill_cons": sock.fill_ring.consumer if sock.fill_ring else None,
            # Map ids count up across hosts: named by role instead.
            "trace": {name: {tuple("xsks" if name == "xdp_redirect" and i == 2 and x == mid
                                   else x for i, x in enumerate(k)): [int(x) for x in row]
                             for k, row in tracer[name].counters.items()}
                      for name in ("xdp_redirect", "xdp_redirect_err", "xdp_exception")},
            "free": sock.xpool.free_list_cnt if sock.xpool else None,
        }
        sock.release(b)
        sock.close()
        if other is not None:
            other.close()
        umem.close()
        return out
    finally:
        host.close()


CASES = {
    "copy": {},
    "copy_redirect_xsk": {"redirect": "xsk"},
    "copy_fill_ring_empty": {"fill": 100},
    "copy_rx_ring_full": {"rx_size": 64, "fill": 512},
    "copy_too_long": {"size": 1900, "count": 40},
    "copy_unaligned_headroom": {"unaligned": True, "headroom": 128},
    "copy_other_queue": {"other_queue": True, "count": 50},
    "zc": {"mode": "zerocopy", "fill": 512},
    "zc_redirect_xsk": {"mode": "zerocopy", "redirect": "xsk", "fill": 512},
    "zc_fill_ring_empty": {"mode": "zerocopy", "fill": 100},
    "zc_rx_ring_full": {"mode": "zerocopy", "rx_size": 64, "fill": 512},
    # Generic XDP on the NIC (xsk_generic_rcv: copied, published per packet).
    "generic": {"generic": True},
    "generic_redirect_xsk": {"generic": True, "redirect": "xsk"},
    "generic_fill_ring_empty": {"generic": True, "fill": 100},
    "generic_rx_ring_full": {"generic": True, "rx_size": 64, "fill": 512},
    "generic_too_long": {"generic": True, "size": 1900, "count": 40},
    "generic_other_queue": {"generic": True, "other_queue": True, "count": 50},
}


@pytest.mark.parametrize("case", list(CASES))
def test_native_receive_is_the_python_path(case: str) -> None:
    kw = CASES[case]
    native = _run(True, **kw)
    python = _run(False, **kw)
    if case == "zc_fill_ring_empty":
        # A zero-copy NIC meets the empty fill ring once per poll that tries, and the
        # generator offers the same frames again each time: how often depends on how
        # many polls run, which the native loop batches. Both met it; the rest agrees.
        for out in (native, python):
            assert out["stats"].rx_fill_ring_empty_descs > 0 and out["dev"].rx_dropped > 0
            out["stats"] = dataclasses.replace(out["stats"], rx_fill_ring_empty_descs=0)
            out["dev"].rx_dropped = 0
    assert native == python
    assert native["len"] or native["trace"]["xdp_redirect_err"]  # something happened


def test_generic_redirects_to_the_socket_run_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    """Generic XDP's redirects into the queue's socket no longer reach the Python
    dispatch (pyxdp.net.dev) from the native loop; a slot naming another queue's
    socket (-EINVAL) still does."""
    from pyxdp.net import dev

    seen: list[int] = []
    orig = dev.generic_xdp_act

    def spy(d: Any, prog: Any, out: Any, act: Any, *rest: Any) -> None:
        seen.append(len(out))
        orig(d, prog, out, act, *rest)

    monkeypatch.setattr(dev, "generic_xdp_act", spy)
    got = _run(True, generic=True, rx_size=64, fill=512)
    assert sum(seen) == 0 and len(got["len"]) == 64
    _run(True, generic=True, other_queue=True, count=50)
    assert sum(seen) == 50


def test_native_receive_counts_what_linux_counts() -> None:
    """The error paths are taken natively with the kernel's counters and errnos."""
    full = _run(True, rx_size=64, fill=512, count=300)
    assert len(full["len"]) == 64 and full["stats"].rx_ring_full == 300 - 64
    empty = _run(True, fill=100, count=300)
    assert len(empty["len"]) == 100 and empty["stats"].rx_fill_ring_empty_descs == 200
    assert empty["stats"].rx_dropped == 200
    big = _run(True, size=1900, count=40)
    assert big["len"] == [] and big["stats"].rx_dropped == 40
    zc = _run(True, mode="zerocopy", fill=100, count=300)
    assert len(zc["len"]) == 100 and zc["dev"].rx_dropped > 0


PASS = asm_collection("r0 = 2\nexit\n")
# XDP_PASS for even source ports, XDP_TX for odd ones (udp_packet: eth + ip + udp).
PASS_OR_TX = asm_collection("""
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 42
r0 = 1
if r4 > r3 goto +5
r5 = *(u8 *)(r2 +35)
r5 &= 1
r0 = 2
if r5 == 0 goto +1
r0 = 3
exit
""")


def _zc_verdicts(native: bool, prog: str, *, count: int = 300) -> dict[str, Any]:
    """A zero-copy queue whose program passes frames to the stack or sends them back
    (XDP_TX: each copied into an order-0 page first): what every record says after."""
    tracer = Tracer()
    host = Host(engine="jit", tracer=tracer, native=native)
    try:
        nic = host.add_device("eth0")
        nic.add_address("198.51.100.2/24")  # the frames' destination: delivered
        coll = host.load(SAMPLES / prog if prog.endswith(".o") else
                         {"pass": PASS, "pass_or_tx": PASS_OR_TX}[prog])
        nic.attach_xdp(next(iter(coll.programs.values())))
        sink = host.stack.udp_socket(5678)
        umem = Umem(512, 2048)
        sock = PyxdpXskSocket(nic, 0, umem, mode="zerocopy", fill_size=512, comp_size=512,
                              rx_size=512, tx_size=64)
        sock.fill(256)
        system = host.memmap.system
        before = system.state.copy()
        nic.rx[0].source = TrafficGenerator(packets=_packets(7, 64), count=count)
        host.run()
        pool = sock.xpool
        assert pool is not None
        pool.check()
        st = system.state
        fq = sock.fill_ring
        assert fq is not None
        out = {
            "dev": nic.stats, "stack": host.stack.stats, "sink": sink.packets,
            "stats": sock.statistics(), "free": pool.free_list_cnt,
            "free_list": sorted(pool._free[:pool.free_list_cnt].tolist()),
            # The kernel's cached consumer: it publishes the shared one lazily.
            "fill_left": (fq.producer - pool.fq.cached_cons) & 0xFFFF_FFFF,
            "pages": (st.nr_free - before.nr_free, st.allocated - before.allocated,
                      st.freed - before.freed),
            "trace": {name: {k: [int(x) for x in row]
                             for k, row in tracer[name].counters.items()}
                      for name in ("xdp_bulk_tx", "xdp_exception")},
        }
        sock.close()
        umem.close()
        return out
    finally:
        host.close()


@pytest.mark.parametrize("prog", ["pass", "xdp2.o", "pass_or_tx"])
def test_native_zero_copy_pass_and_tx_are_the_python_path(
        prog: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """XDP_PASS (the driver's skb copy to the stack) and XDP_TX (a copy into an order-0
    page, sent and completed) from a zero-copy queue, natively and in Python: the
    same counters, stack deliveries, chunk and page accounting, trace events; the
    native loop hands nothing back to the Python dispatch."""
    import pyxdp.net.napi as napi
    deferred: list[int] = []
    monkeypatch.setattr(napi, "_dispatch_deferred", lambda *a: deferred.append(len(a[4])))
    native = _zc_verdicts(True, prog)
    assert deferred == []
    monkeypatch.undo()
    python = _zc_verdicts(False, prog)
    assert native == python
    dev = native["dev"]
    # Every chunk is back: on the pool's free list or still in the fill ring.
    assert dev.xdp_pass + dev.xdp_tx == 300 and native["free"] + native["fill_left"] == 256
    assert native["sink"] == dev.xdp_pass
    assert native["pages"][0] == 0 and native["pages"][1] == native["pages"][2] == dev.xdp_tx


@contextmanager
def _nic(obj: str) -> Iterator[tuple[Host, Any, Any]]:
    """A host with eth0 running ``samples/obj``'s program natively: (host, nic, coll)."""
    host = Host(engine="jit", tracer=Tracer())
    try:
        nic = host.add_device("eth0")
        coll = host.load(SAMPLES / obj)
        nic.attach_xdp(next(iter(coll.programs.values())))
        yield host, nic, coll
    finally:
        host.close()


def _socket(nic: Any, nchunks: int, ring: int, mode: str, *, rx: bool = True,
            count: int | None = None, npackets: int = 3) -> tuple[PyxdpXskSocket, Umem]:
    """A socket on eth0's queue 0 with ``nchunks`` chunks, its fill ring filled, and the
    queue's generator making ``count`` 64-byte frames."""
    umem = Umem(nchunks, 2048)
    sock = PyxdpXskSocket(nic, 0, umem, mode=mode, fill_size=ring, comp_size=ring,
                          rx_size=ring if rx else 0, tx_size=64)
    sock.fill()
    nic.rx[0].source = TrafficGenerator(packets=_packets(npackets, 64), count=count)
    return sock, umem


def test_rxdrop_drain_loses_nothing() -> None:
    with _nic("xsk.o") as (host, nic, coll):
        sock, umem = _socket(nic, 512, 256, "zerocopy", count=20_000)
        coll.maps["xsks"][0] = sock.fd
        got = 0
        with Rxdrop(sock) as user:
            while nic.rx[0].pending:
                host.poll()
                got += user.drain()
        with pytest.raises(ValueError, match="closed"):
            user.drain()
        assert got == 20_000 and rxdrop_drain(sock) == 0
        assert sock.statistics().rx_ring_full == 0
        # Every chunk is back in the fill ring or the pool's free list, none held.
        fq = sock.fill_ring
        assert fq is not None
        in_fill = (fq.producer - fq.consumer) & 0xFFFF_FFFF
        assert sock.xpool is not None
        assert in_fill + sock.xpool.free_list_cnt == 256
        assert sock.recv(64).addr.size == 0
        sock.close()
        umem.close()


def test_rxdrop_thread_loses_nothing() -> None:
    with _nic("xsk_redirect.o") as (host, nic, _):
        sock, umem = _socket(nic, 512, 256, "zerocopy", count=50_000)
        th = RxdropThread(sock)
        try:
            while nic.rx[0].pending:
                host.poll()
            # Every frame reached the program; those the rx ring had no room for
            # were dropped (rx_ring_full), as Linux does when the user falls behind.
            full = sock.statistics().rx_ring_full
            for _ in range(10**8):
                if th.packets + full >= 50_000:
                    break
        finally:
            th.stop()
        assert nic.stats.xdp_redirect == 50_000
        assert th.packets + sock.statistics().rx_ring_full == 50_000
        assert sock.recv(64).addr.size == 0
        sock.close()
        umem.close()


def test_rxdrop_needs_rings() -> None:
    host = Host()
    try:
        umem = Umem(64, 2048)
        sock = PyxdpXskSocket(None, 0, umem, host=host, rx_size=0, tx_size=64)
        with pytest.raises(ValueError, match="needs an rx ring"):
            rxdrop_drain(sock)
        sock.close()
        umem.close()
    finally:
        host.close()


def test_native_state_lets_the_socket_close() -> None:
    """The queue's cached native state holds ring views; unbinding drops it."""
    with _nic("xsk.o") as (host, nic, coll):
        for _ in range(2):
            sock, umem = _socket(nic, 256, 128, "copy", count=50, npackets=2)
            coll.maps["xsks"][0] = sock.fd
            host.poll()
            assert len(sock.recv(64)) == 50
            sock.close()  # BufferError if views were still exported
            umem.close()


def test_zero_copy_queue_of_a_tx_only_socket() -> None:
    """No rx ring to receive into: the queue's polls take the Python path, and a
    program's XDP_DROP still frees the UMEM buffers."""
    with _nic("xdp1.o") as (host, nic, _):
        sock, umem = _socket(nic, 256, 128, "zerocopy", rx=False, count=100, npackets=2)
        host.run()
        assert nic.stats.xdp_drops == 100 and nic.stats.rx_dropped == 0
        sock.close()
        umem.close()


def _tx_run(native: bool, mode: str) -> list[Any]:
    """Raw tx descriptors kicked with ``sendto`` on a NIC's socket, or (``veth``, copy
    mode) a veth's whose peer runs xdp1 (its queue's page pool takes the packets):
    per kick the answer, the completions, the socket's statistics, the device's
    counters and the peer's counters and pool."""
    host = Host(engine="jit", native=native)
    try:
        peer = None
        if mode == "veth":
            dev, peer = host.veth("veth0", "veth1")
            peer.attach_xdp(next(iter(host.load(SAMPLES / "xdp1.o").programs.values())))
        else:
            dev = host.add_device("eth0")
        umem = Umem(256, 2048)
        sock = PyxdpXskSocket(dev, 0, umem, mode="zerocopy" if mode == "zerocopy" else "copy",
                              fill_size=64, comp_size=32, rx_size=64, tx_size=128)
        tx, comp = sock.tx, sock.comp_ring
        assert tx is not None and comp is not None
        log: list[Any] = []

        def post(descs: list[tuple[int, int, int]]) -> None:
            idx, k = tx.reserve(len(descs))
            assert k == len(descs)
            a, ln, opt = zip(*descs, strict=True)
            tx.write_descs(idx, np.array(a, np.uint64), np.array(ln, np.uint32),
                           np.array(opt, np.uint32))
            tx.submit(k)

        def kick(reap: int) -> None:
            try:
                r: Any = sock.sendmsg()
            except XskError as e:
                r = -e.errno
            seen = None
            if peer is not None:
                host.run()
                seen = (peer.stats.asdict(), peer.rx[0].pool.get_stats())
            log.append((r, comp.consume(reap).tolist(), sock.statistics(), dev.stats.asdict(),
                        tx.consumer, seen))

        contd = int(XdpDescOption.XDP_PKT_CONTD)
        post([(i * 2048, 60 + i, 0) for i in range(40)])  # more than the budget of 32
        kick(0)
        kick(32)  # the completion ring is full: nothing sent
        kick(32)
        # A chain of 3, one with an invalid descriptor inside, a chain of 20 (too many
        # fragments), descriptors outside the UMEM or with unknown options, then more.
        post([(50 * 2048, 100, contd), (51 * 2048, 100, contd), (52 * 2048, 40, 0),
              (53 * 2048, 100, contd), (54 * 2048, 0, 0), (55 * 2048, 60, 0)]
             + [((60 + i) * 2048, 64, contd if i < 19 else 0) for i in range(20)]
             + [(300 * 2048, 64, 0), (90 * 2048, 64, 1 << 7), (91 * 2048 + 2000, 64, 0),
                (92 * 2048 + 10, 64, 0), (1 << 63, 64, 0)])
        for _ in range(4):
            kick(32)
        if peer is not None:  # frames the peer refuses: too long, then the peer down
            peer.mtu = 100
            post([(100 * 2048, 60, 0), (101 * 2048, 400, 0), (102 * 2048, 60, 0)])
            kick(32)
            kick(32)
            peer.up = False
            post([(103 * 2048, 60, 0)])
            kick(32)
            peer.up = True
        kick(32)  # an empty ring
        sock.close()
        umem.close()
        return log
    finally:
        host.close()


@pytest.mark.parametrize("mode", ["copy", "zerocopy", "veth"])
def test_native_tx_is_the_python_path(mode: str) -> None:
    """AF_XDP transmit in machine code (``__xsk_generic_xmit`` to a NIC or to a veth
    whose peer runs a program, the zero-copy driver's batch) and in Python: the
    same answers, completions, invalid and empty counts, device counters and (veth)
    the peer's reception and page pool, kick after kick."""
    native = _tx_run(True, mode)
    python = _tx_run(False, mode)
    assert native == python
    last = native[-1]
    assert last[2].tx_invalid_descs > 0 and last[3]["tx_packets"] > 40
    if mode == "veth":
        assert last[5][0]["xdp_drops"] == last[3]["tx_packets"]
        assert last[3]["tx_dropped"] == 2  # each ended its kick (EBUSY: sendto goes on)




def _tx_long(native: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[int, tuple[Any, ...]]:
    """A copy-mode socket on a 9000-MTU veth sends packets of 60 to 9014 bytes, each in
    2048-byte descriptors chained with XDP_PKT_CONTD, to a peer running a frags-aware
    XDP_PASS: how many packets the Python transmit built, and the answer, the
    completions, the socket's statistics, both ends' counters and the frames the
    peer's stack got, the page accounting checked exactly."""
    from pyxdp.net.xsk import XdpSock
    from pyxdp.testing.fragslab import PASS_FRAGS
    built = [0]
    orig = XdpSock._build_packets

    def counted(self: XdpSock, body: Any, start: Any, end: Any) -> Any:
        built[0] += len(end)
        return orig(self, body, start, end)
    monkeypatch.setattr(XdpSock, "_build_packets", counted)
    with Host(engine="jit", native=native) as host:
        dev, peer = host.veth("veth0", "veth1", mtu=9000)
        peer.attach_xdp(host.load(PASS_FRAGS).programs["xdp_pass"])
        seen: list[bytes] = []
        host.stack.on_receive(lambda s: seen.extend(s.packets()))
        umem = Umem(256, 2048)
        sock = PyxdpXskSocket(dev, 0, umem, mode="copy", sg=True, fill_size=64,
                              comp_size=64, rx_size=64, tx_size=128)
        tx, comp = sock.tx, sock.comp_ring
        assert tx is not None and comp is not None
        contd = int(XdpDescOption.XDP_PKT_CONTD)
        descs: list[tuple[int, int, int]] = []
        for i, size in enumerate((6000, 60, 9014, 3521, 3520, 4096, 6000)):
            pkt = udp_packet(b"sg", sport=3000 + i, size=size)
            segs = [pkt[o:o + 2048] for o in range(0, size, 2048)]
            for j, seg in enumerate(segs):
                at = len(descs) * 2048
                umem.buf[at:at + len(seg)] = np.frombuffer(seg, np.uint8)
                descs.append((at, len(seg), contd if j < len(segs) - 1 else 0))
        idx, k = tx.reserve(len(descs))
        a, ln, opt = zip(*descs, strict=True)
        tx.write_descs(idx, np.array(a, np.uint64), np.array(ln, np.uint32),
                       np.array(opt, np.uint32))
        tx.submit(k)
        r = sock.sendmsg()
        host.run()
        out = (r, comp.consume(64).tolist(), sock.statistics(), dev.stats.asdict(),
               peer.stats.asdict(), seen)
        system = host.memmap.system
        assert len(system.in_use()) == system.allocated - system.freed == 0
        assert peer.rx[0].pool.nr_in_use == 0
        sock.close()
        umem.close()
    monkeypatch.undo()
    return built[0], out


def test_native_tx_of_long_packets_to_a_frags_peer_is_the_python_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``__xsk_generic_xmit`` to a veth of packets longer than a page in machine code:
    each skb built in a head and page frags of the system allocator and queued on
    the peer's ring, which converts it into its pool - the Python transmit not
    called - with what the Python path gives, every packet whole at the peer."""
    n_native, native = _tx_long(True, monkeypatch)
    n_python, python = _tx_long(False, monkeypatch)
    assert (n_native, n_python) == (0, 7)
    assert native == python
    assert [len(f) for f in native[-1]] == [6000, 60, 9014, 3521, 3520, 4096, 6000]
    assert native[4]["xdp_pass"] == 7
