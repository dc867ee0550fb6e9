"""AF_XDP sockets on pyxdp's datapath (pyxdp.xsk.datapath), no root needed.

The kernel half of every scenario of :mod:`pyxdp.testing.xsklab` runs in
``tests/kernel/test_xsk_datapath_kernel.py`` and must give the same
observations; here each runs on pyxdp alone and the values Linux 6.18 gave
(measured with the lab) are pinned. Then what only pyxdp has: zero-copy on
its NICs, ``bpf_redirect_xsk`` (interpreter, JIT, native twin), the XSKMAP
resolving pyxdp sockets, generic XDP into a socket, XDP_USE_SG, tx
metadata. Every test ends with ``Host.close()`` checking the page accounting
and, where a socket was used, ``check_accounting()`` checking the chunks.
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyxdp.collection import Collection
from pyxdp.errors import MapError
from pyxdp.net.netdevice import Host, NetDevice, XdpFeatures
from pyxdp.net.prog import jit_available
from pyxdp.net.source import Collector, TrafficGenerator
from pyxdp.net.trace import Tracer
from pyxdp.net.xdp_umem import XskError
from pyxdp.spec import MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.testing.xsklab import MAC0, MAC1, SCENARIOS, frame, run_pyxdp
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.uapi.if_xdp import XDP_OPTIONS_ZEROCOPY, XdpBindFlag, XdpDescOption, XdpTxmdFlag
from pyxdp.xsk.datapath import PyxdpXskSocket
from pyxdp.xsk.umem import Umem
from pyxdp.xsk.xsk import ChunkState

# A closed fd: past any process's fd table, and no number of pyxdp's (they count up
# from 1 per process, so a small one like 999 may name a live object late in a run).
NOT_OPEN = 0x7FFF_FFF0

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
ENGINES = ["interp", pytest.param("jit", marks=pytest.mark.skipif(
    not jit_available(), reason="llvmlite is not installed: no JIT"))]
ENOMEM, ENOBUFS, ENOSPC = -errno.ENOMEM, -errno.ENOBUFS, -errno.ENOSPC
REDIRECT_XSK = asm_collection("""
r2 = 2
call 1024
exit
""", [])
XSKS = MapSpec("xsks", BpfMapType.BPF_MAP_TYPE_XSKMAP, 4, 4, 8)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
def host(engine: str) -> Iterator[Host]:
    h = Host(tracer=Tracer(), engine=engine)
    try:
        yield h
    finally:
        h.close()


def _sock(dev: NetDevice, queue: int = 0, umem: Umem | None = None, **kw: object
          ) -> PyxdpXskSocket:
    sizes: dict[str, object] = {"fill_size": 64, "comp_size": 64, "rx_size": 64, "tx_size": 64}
    sizes.update(kw)
    return PyxdpXskSocket(dev, queue, umem, **sizes)  # type: ignore[arg-type]


def _errno(fn: object) -> int:
    try:
        fn()  # type: ignore[operator]
    except XskError as e:
        return e.errno
    return 0


# --------------------------------------------------------------------------
# The lab scenarios on pyxdp, with the values Linux gave
# --------------------------------------------------------------------------

@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_lab_scenarios_run_clean(engine: str, native: bool) -> None:
    for sc in SCENARIOS.values():
        run_pyxdp(sc, engine=engine, native=native)  # a leak or double free raises


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_lab_scenarios_native_is_python(name: str) -> None:
    """Without a listener the veth scenarios run the native poll loop (AF_XDP receive in
    machine code): everything observed is what the Python path gives."""
    sc = SCENARIOS[name]
    assert run_pyxdp(sc, engine="jit", native=True, listen=False) == \
        run_pyxdp(sc, engine="jit", native=False, listen=False)


def test_rx_copy_as_linux(engine: str) -> None:
    out = run_pyxdp(SCENARIOS["rx_copy"], engine=engine)
    assert out["same"] and out["n"] == 60 and out["offsets"] == [256]
    assert out["events"] == [("xdp_redirect", 0, 0)] and out["nevents"] == 60
    assert out["stats"] == (0, 0, 0, 0, 0, 0)
    assert out["acct"]["fill_ring"] == 64 and out["acct"]["free"] == 64


def test_fill_ring_empty_as_linux(engine: str) -> None:
    out = run_pyxdp(SCENARIOS["fill_ring_empty"], engine=engine)
    assert out["events0"] == [("xdp_redirect_err", ENOMEM, 0)] * 3
    assert out["stats0"] == (3, 0, 0, 0, 3, 0)  # rx_dropped and fill_ring_empty, each
    assert out["got"] and out["events1"] == [("xdp_redirect", 0, 0)]


def test_rx_ring_full_as_linux(engine: str) -> None:
    out = run_pyxdp(SCENARIOS["rx_ring_full"], engine=engine)
    assert out["stats0"] == (0, 0, 0, 4, 0, 0)
    assert out["events0"] == [("xdp_redirect", 0, 0)] * 8 + [("xdp_redirect_err", ENOBUFS, 0)] * 4
    # No fill entry consumed for the refused frames (Linux 6.18).
    a0 = out["acct0"]
    assert (a0["fill_ring"], a0["rx_ring"], a0["kernel_rx"]) == (24, 8, 0)
    assert out["stats1"] == (0, 0, 0, 6, 0, 0)
    assert [p[14:18] for p in out["first"]] == [i.to_bytes(4, "big") for i in range(3)]
    assert [p[14:18] for p in out["rest"]] == [i.to_bytes(4, "big") for i in
                                               (3, 4, 5, 6, 7, 100, 101, 102)]


def test_both_exhausted_is_enomem(engine: str) -> None:
    out = run_pyxdp(SCENARIOS["fill_and_rx_exhausted"], engine=engine)
    assert out["stats"] == (2, 0, 0, 0, 2, 0)
    assert out["events"][-2:] == [("xdp_redirect_err", ENOMEM, 0)] * 2


def test_frame_too_big(engine: str) -> None:
    out = run_pyxdp(SCENARIOS["frame_too_big"], engine=engine)
    assert out["lens"] == [1792] and out["stats"][0] == 2
    assert [e[1] for e in out["events"]] == [0, ENOSPC, ENOSPC]


def test_wrong_socket(engine: str) -> None:
    out = run_pyxdp(SCENARIOS["wrong_socket"], engine=engine)
    assert out["elsewhere"] == [("xdp_redirect_err", -errno.EINVAL, 0)]
    assert out["unbound"] == [("xdp_redirect_err", -errno.ENXIO, 0)]
    assert out["empty"] == []


def test_metadata_and_adjust_head(engine: str) -> None:
    out = run_pyxdp(SCENARIOS["metadata_and_head"], engine=engine)
    assert out == {"addr": 320, "len": 76, "data": True, "meta": "8877665544332211",
                   "stats": (0, 0, 0, 0, 0, 0)}


def test_tx_as_linux(engine: str) -> None:
    out = run_pyxdp(SCENARIOS["tx_completions"], engine=engine)
    assert out["kicks"] == 4 and out["wire"] and out["done"] and out["completed"] == 150
    assert out["stats"][5] == 1 and out["stats_after"][5] == 2
    assert out["acct"]["free"] == 256
    full = run_pyxdp(SCENARIOS["tx_completion_ring_full"], engine=engine)
    assert (full["k1"], full["c1"], full["t1"]) == (True, 8, 8)
    assert (full["k2"], full["c2"], full["t2"]) == (True, 8, 8)
    assert (full["k3"], full["c3"], full["t3"], full["wire"]) == (False, 12, 12, 12)


def test_invalid_tx_descs_complete(engine: str) -> None:
    out = run_pyxdp(SCENARIOS["tx_invalid_descs"], engine=engine)
    assert out["case0"] == (False, [0], 0, 1, 1, 1)
    assert out["case2"] == (False, [5096], 1, 2, 3, 3)  # invalid, yet completed
    assert out["mid1"] == (False, [0, 3048], 7, 4, 12, 12)  # stops after the invalid one
    assert out["full2"] == (True, [], 7, 6, 21, 21)  # no completion slot: EAGAIN
    assert out["full4"] == (False, [2048], 8, 6, 22, 22)
    assert out["wire"] == 12


def test_bind_rules(engine: str) -> None:
    out = run_pyxdp(SCENARIOS["bind_errnos"], engine=engine)
    e = errno
    assert out["errnos"] == [e.EINVAL, e.EINVAL, e.EINVAL, e.EINVAL, e.EOPNOTSUPP, 0, e.EBUSY,
                             e.EBUSY, 0, e.EINVAL, e.EINVAL, e.EINVAL]


def test_shared_umem_poll_l2fwd_link(engine: str) -> None:
    sh = run_pyxdp(SCENARIOS["shared_umem"], engine=engine)
    assert sh["same_fill"] and sh["own_fill_c"] and sh["got"] and sh["a_rx"] == 0
    assert sh["flags"] == [int(XdpBindFlag.XDP_COPY | XdpBindFlag.XDP_USE_NEED_WAKEUP), 1, 1]
    po = run_pyxdp(SCENARIOS["poll_events"], engine=engine)
    assert po == {"idle": 4, "rx": 5, "tx_full": 4, "wire": 6, "after": 4}
    fw = run_pyxdp(SCENARIOS["l2fwd"], engine=engine)
    assert fw["fwd"] == 40 and fw["wire"]
    ld = run_pyxdp(SCENARIOS["link_down"], engine=engine)
    assert ld["down"] == errno.ENETDOWN and ld["poll"] == 0
    assert ld["peer_down"] is True and ld["comp"] == 1 and ld["tx_cons"] == 1


# --------------------------------------------------------------------------
# Sockets, XSKMAP, registration
# --------------------------------------------------------------------------

def test_xskmap_resolves_pyxdp_sockets(host: Host) -> None:
    v0, _ = host.veth("veth0", "veth1")
    coll = host.load(SAMPLES / "xsk.o")
    m = coll.maps["xsks"]
    with Umem(16, 2048) as u, _sock(v0, 0, u) as s:
        with pytest.raises(MapError) as e:
            m[0] = NOT_OPEN
        assert e.value.errno == errno.EBADF
        m[0] = s.fd
        m[1] = s.fd  # one socket in two slots
        xm = m.handle
        assert xm.socket_at(0) is s and xm.socket_at(1) is s  # type: ignore[attr-defined]
        assert xm.entries[0, 0] == s.fd  # type: ignore[attr-defined]
    # Closed: out of every slot (xsk_delete_from_maps), its fd gone.
    assert len(m.handle) == 0  # type: ignore[arg-type]
    with pytest.raises(MapError):
        m[0] = s.fd


def test_wrong_queue_is_einval(host: Host) -> None:
    """xsk_rcv_check: the socket in the slot is bound to queue 1; a frame of queue 0
    redirected to it is dropped with -EINVAL (the queue must match exactly)."""
    nic = host.add_device("eth0", rx_queues=2)
    prog = asm_collection("""
    r2 = 0
    r1 = map[fd:0]
    r3 = 2
    call 51
    exit
    """, [XSKS])
    coll = host.load(prog)
    nic.attach_xdp(coll.programs["t"])
    q = host.tracer.listen(["xdp_redirect", "xdp_redirect_err"])
    with Umem(64, 2048) as u, _sock(nic, 1, u) as s:
        s.fill()
        coll.maps["xsks"][0] = s.fd
        nic.receive([frame(1), frame(2)], queue=0)
        nic.receive([frame(3)], queue=1)
        host.run()
        errs = [e.record.err for e in q.drain()]  # type: ignore[union-attr]
        assert sorted(errs) == [-errno.EINVAL, -errno.EINVAL, 0]
        assert s.recv().packets() == [frame(3)]
        assert s.statistics().rx_dropped == 0
    q.close()


def test_a_socket_of_another_host_is_taken_and_the_redirect_fails(engine: str) -> None:
    """Linux's XSKMAP takes any AF_XDP socket (xsk_map_update_elem looks at no device);
    one bound to another namespace's device fails each redirect in xsk_rcv_check:
    -EINVAL, the frame dropped, no counter of the socket moves (measured on 6.18:
    tests/kernel/test_xsk_linux.py). pyxdp refused another Host's socket (ENOTSOCK)."""
    h = Host(tracer=Tracer(), engine=engine)
    other = Host(engine=engine)
    try:
        v0, v1 = h.veth("veth0", "veth1")
        coll = h.load(SAMPLES / "xsk.o")
        v0.attach_xdp(coll.programs["xdp_sock_prog"])
        seen: list[bytes] = []
        h.stack.on_receive(lambda batch: seen.extend(batch.packets()))
        q = h.tracer.listen(["xdp_redirect", "xdp_redirect_err"])
        with Umem(64, 2048) as u, _sock(other.add_device("eth0"), 0, u) as s:
            s.fill()
            coll.maps["xsks"][0] = s.fd
            v1.transmit([frame(1), frame(2)])
            h.run()
            other.run()
            errs = [e.record.err for e in q.drain()]  # type: ignore[union-attr]
            assert errs == [-errno.EINVAL, -errno.EINVAL]
            assert len(s.recv()) == 0 and seen == []
            q.close()  # no listener: the native poll loop's way, counted
            v1.transmit([frame(3), frame(4)])
            h.run()
            other.run()
            errs_row = h.tracer["xdp_redirect_err"].counters.get((v0.ifindex, -errno.EINVAL))
            assert errs_row is not None and int(errs_row[0]) == 4
            assert len(s.recv()) == 0 and seen == []
            st = s.statistics()
            assert st.rx_dropped == st.rx_ring_full == st.rx_fill_ring_empty_descs == 0
        assert len(coll.maps["xsks"].handle) == 0  # closed: out of the other host's map
    finally:
        h.close()
        other.close()


def test_program_lookup_gives_bpf_xdp_sock(host: Host) -> None:
    # r0 = lookup(xsks, &2); return r0 ? r0->queue_id + 10 : 1
    prog = asm_collection("""
    r6 = r1
    r1 = 2
    *(u32 *)(r10 -4) = r1
    r2 = r10
    r2 += -4
    r1 = map[fd:0]
    call 1
    if r0 == 0 goto none
    r0 = *(u32 *)(r0 +0)
    r0 += 10
    exit
    none:
    r0 = 1
    exit
    """, [XSKS])
    nic = host.add_device("eth0", rx_queues=4)
    coll = host.load(prog)
    p = coll.programs["t"]
    assert p.test_run(bytes(64)).retval == 1
    with Umem(16, 2048) as u, _sock(nic, 3, u) as s:
        coll.maps["xsks"][2] = s.fd
        assert p.test_run(bytes(64)).retval == 13  # queue_id 3


def test_registration_first_socket_only(host: Host) -> None:
    nic = host.add_device("eth0", rx_queues=2)
    with Umem(64, 2048) as u:
        a = _sock(nic, 1, u)
        b = PyxdpXskSocket(nic, 1, shared=a, rx_size=64, tx_size=64, fill_size=0,
                           comp_size=0)
        assert host.xsk_lookup(nic.ifindex, 1) is a
        assert host.xsk_table[nic.ifindex] == 1 << 1
        a.close()
        assert host.xsk_lookup(nic.ifindex, 1) is None  # the first one only: b was not
        assert host.xsk_table[nic.ifindex] == 0
        b.close()
        # tx-only sockets are not registered: nothing to receive with
        c = _sock(nic, 0, u, rx_size=0)
        assert host.xsk_lookup(nic.ifindex, 0) is None
        c.close()


def test_bpf_redirect_xsk(host: Host) -> None:
    v0, v1 = host.veth("veth0", "veth1")
    v0.mac = MAC0
    coll = host.load(REDIRECT_XSK)
    v0.attach_xdp(coll.programs["t"])
    seen: list[bytes] = []
    host.stack.on_receive(lambda b: seen.extend(b.packets()))
    q = host.tracer.listen(["xdp_redirect", "xdp_redirect_err"])
    v1.transmit([frame(1)])
    host.run()
    assert len(seen) == 1  # no socket on the queue: the flags' action, XDP_PASS
    with Umem(64, 2048) as u, _sock(v0, 0, u) as s:
        s.fill()
        sent = [frame(i, 60 + i) for i in range(20)]
        for f in sent:
            v1.transmit([f])
            host.run()
        got = s.recv(64)
        assert got.packets() == sent
        s.release(got)
        evs = q.drain()
        recs: list[Any] = [e.record for e in evs]
        assert len(recs) == 20 and {(r.map_id, r.map_index, r.err) for r in recs} == {(0, 0, 0)}
        s.check_accounting()
    q.close()


def test_bpf_redirect_xsk_flags_and_native_twin(engine: str) -> None:
    """flags beyond the action bits: XDP_ABORTED; the JIT's native twin agrees with the
    Python helper on every queue and registration state."""
    src = """
    r2 = *(u32 *)(r1 +4)
    r3 = *(u32 *)(r1 +0)
    r3 += 1
    if r3 > r2 goto out
    r2 = *(u8 *)(r3 -1)
    call 1024
    exit
    out:
    r0 = 1
    exit
    """
    prog = asm_collection(src, [])
    with Host(tracer=Tracer(), engine=engine) as h:
        nic = h.add_device("eth0", rx_queues=4)
        coll = h.load(prog)
        p = coll.programs["t"].handle
        with Umem(64, 2048) as u, _sock(nic, 2, u) as s:
            s.fill()
            data = np.zeros((8, 128), np.uint8)
            flags = [0, 1, 2, 3, 4, 0x10, 2, 3]
            data[:, 0] = flags
            for queue, want in ((2, [4, 4, 4, 4, 0, 0, 4, 4]), (1, [0, 1, 2, 3, 0, 0, 2, 3])):
                res = p.run_batch(data.copy(), 0, 64, None, queue, nic.ifindex,  # type: ignore[attr-defined]
                                  ctx=nic.rx[0].ctx)
                assert res.action.tolist() == want
                red = res.redirect_map_type[res.action == 4]
                assert (red == BpfMapType.BPF_MAP_TYPE_XSKMAP).all()
                assert (res.redirect_index[res.action == 4] == queue).all()
                assert (res.redirect_map_id == 0).all()


def test_bpf_redirect_xsk_sample_and_header() -> None:
    coll = Collection.load(SAMPLES / "xsk_redirect.o")
    prog = coll.programs["xdp_sock_redirect_xsk"]
    assert prog.test_run(bytes(64)).retval == 2  # no socket in test_run: XDP_PASS
    header = (SAMPLES / "include" / "pyxdp_ext.h").read_text()
    assert "(void *) 1024" in header
    from pyxdp.asm.disasm import disassemble
    assert "call bpf_redirect_xsk#1024" in disassemble(prog.handle.spec.insns)
    coll.close()


def test_sample_program_on_nic_queues(host: Host) -> None:
    """samples/xsk_redirect.o on a 2-queue NIC: queue 1 has a socket, queue 0 passes."""
    nic = host.add_device("eth0", rx_queues=2)
    coll = host.load(SAMPLES / "xsk_redirect.o")
    nic.attach_xdp(coll.programs["xdp_sock_redirect_xsk"])
    with Umem(128, 2048) as u, _sock(nic, 1, u) as s:
        s.fill()
        nic.receive([frame(i) for i in range(10)], queue=1)
        nic.receive([frame(i) for i in range(3)], queue=0)
        host.run()
        got = s.recv(64)
        assert got.packets() == [frame(i) for i in range(10)]
        s.release(got)
        assert host.stack.stats.received == 3
        assert coll.maps["rx_redirected"].sum(0) == 10
        s.check_accounting()


def test_generic_xdp_into_socket(host: Host) -> None:
    v0, v1 = host.veth("veth0", "veth1")
    coll = host.load(SAMPLES / "xsk.o")
    v0.attach_xdp(coll.programs["xdp_sock_prog"], mode="generic")
    with Umem(64, 2048) as u, _sock(v0, 0, u, rx_size=4) as s:
        coll.maps["xsks"][0] = s.fd
        v1.transmit([frame(0)])
        host.run()
        assert s.statistics().rx_fill_ring_empty_descs == 1
        s.fill(8)
        v1.transmit([frame(i) for i in range(6)])
        host.run()
        got = s.recv(64)
        assert [p[14:18] for p in got.packets()] == [i.to_bytes(4, "big") for i in range(4)]
        assert s.statistics().rx_ring_full == 2  # published per packet: the ring filled up
        s.release(got)
        s.check_accounting()


def test_use_sg_splits_long_frames(host: Host) -> None:
    v0, v1 = host.veth("veth0", "veth1", mtu=3000)
    coll = host.load(SAMPLES / "xsk.o")
    v0.attach_xdp(coll.programs["xdp_sock_prog"])
    with Umem(64, 2048) as u, _sock(v0, 0, u, sg=True) as s:
        coll.maps["xsks"][0] = s.fd
        s.fill()
        f = frame(1, 2500)
        v1.transmit([frame(0), f])
        host.run()
        b = s.recv(64)
        assert b.len.tolist() == [64, 1792, 708]
        assert b.options.tolist() == [0, int(XdpDescOption.XDP_PKT_CONTD), 0]
        assert b"".join(b.packets()[1:]) == f
        s.release(b)
        s.check_accounting()


def test_use_sg_takes_multi_buffer_frames_whole(host: Host) -> None:
    """Frames above a page's packet room on a 9000-MTU veth reach a frags-aware program
    as a head and page frags; redirected into an XDP_USE_SG socket each is read across
    head and frags and cut at the buffers' room, metadata-free, in order."""
    from dataclasses import replace

    from pyxdp.spec import BPF_F_XDP_HAS_FRAGS
    v0, v1 = host.veth("veth0", "veth1", mtu=9000)
    t = REDIRECT_XSK.programs["t"]
    spec = replace(REDIRECT_XSK, programs={"t": replace(
        t, section="xdp.frags", flags=t.flags | BPF_F_XDP_HAS_FRAGS)})
    v0.attach_xdp(host.load(spec).programs["t"])
    with Umem(64, 2048) as u, _sock(v0, 0, u, sg=True) as s:
        s.fill()
        sent = [frame(0), frame(1, 9014), frame(2, 5000), frame(3, 3521)]
        v1.transmit(sent)
        host.run()
        b = s.recv(64)
        contd = int(XdpDescOption.XDP_PKT_CONTD)
        got: list[bytes] = []
        part = b""
        for pkt, opt in zip(b.packets(), b.options.tolist(), strict=True):
            part += pkt
            if not opt & contd:
                got.append(part)
                part = b""
        assert got == sent
        assert b.len.tolist()[1:7] == [1792] * 5 + [9014 - 5 * 1792]
        s.release(b)
        s.check_accounting()


def test_close_and_reuse_queue(host: Host) -> None:
    v0, _ = host.veth("veth0", "veth1")
    with Umem(16, 2048) as u:
        a = _sock(v0, 0, u)
        assert _errno(lambda: _sock(v0, 0, Umem(16, 2048))) == errno.EBUSY
        a.close()
        b = _sock(v0, 0, u)  # freed at once (Linux defers it ~15 ms)
        assert b.bound
        b.close()
    with pytest.raises(ValueError, match="host="):
        PyxdpXskSocket(None)


def test_tx_metadata(host: Host) -> None:
    v0, v1 = host.veth("veth0", "veth1")
    seen: list[bytes] = []
    host.stack.on_receive(lambda b: seen.extend(b.packets()))
    with Umem(32, 2048, tx_metadata_len=24) as u, _sock(v0, 0, u) as s:
        assert s.tx is not None
        pkt = bytearray(frame(1, 64, dst=MAC1, src=MAC0))
        pkt[24:26] = b"\0\0"  # the field holds the pseudo-header sum: none here
        base = int(s.pool.alloc(1, int(ChunkState.TX))[0]) * 2048  # a chunk to send from
        data = base + 24
        u.buf[data:data + 64] = np.frombuffer(bytes(pkt), np.uint8)
        flags = int(XdpTxmdFlag.XDP_TXMD_FLAGS_CHECKSUM | XdpTxmdFlag.XDP_TXMD_FLAGS_TIMESTAMP)
        u.buf[base:base + 12] = np.frombuffer(struct.pack("<QHH", flags, 20, 4), np.uint8)
        idx, _ = s.tx.reserve(1)
        s.tx.write_descs(idx, [data], [64], [int(XdpDescOption.XDP_TX_METADATA)])
        s.tx.submit(1)
        s.kick()
        assert len(seen) == 1
        body = seen[0][20:]
        total = sum(struct.unpack(f">{len(body) // 2}H", body))
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        assert total == 0xFFFF  # the checksum field makes the sum all ones
        assert struct.unpack_from("<Q", u.buf.data, base + 8)[0] > 0  # completion time
        assert s.complete() == 1
        s.check_accounting()
    # Without tx_metadata_len the kernel cannot build it: EINVAL, the ring stuck on it.
    with Umem(32, 2048) as u, _sock(v0, 0, u) as s:
        assert s.tx is not None
        c = int(s.pool.alloc(1, int(ChunkState.TX))[0]) * 2048
        idx, _ = s.tx.reserve(1)
        s.tx.write_descs(idx, [c], [60], [int(XdpDescOption.XDP_TX_METADATA)])
        s.tx.submit(1)
        assert _errno(s.kick) == errno.EINVAL
        assert s.tx.window()[1] == 1
    del v1


# --------------------------------------------------------------------------
# Zero-copy (pyxdp NICs)
# --------------------------------------------------------------------------

def test_zero_copy_bind_rules(host: Host) -> None:
    nic = host.add_device("eth0", rx_queues=2, tx_queues=2)
    v0, _ = host.veth("veth0", "veth1")
    assert nic.xdp_features & XdpFeatures.NETDEV_XDP_ACT_XSK_ZEROCOPY
    assert not v0.xdp_features & XdpFeatures.NETDEV_XDP_ACT_XSK_ZEROCOPY
    with Umem(64, 2048) as u:
        assert _errno(lambda: _sock(v0, 0, u, mode="zerocopy")) == errno.EOPNOTSUPP
        s = _sock(v0, 0, u, mode=None)  # falls back to copy
        assert s.options() == 0
        s.close()
        assert _errno(lambda: _sock(nic, 0, u, mode="zerocopy", sg=True)) == errno.EOPNOTSUPP
        with Umem(32, 3000, unaligned=True) as ua:
            assert _errno(lambda: _sock(nic, 0, ua, mode="zerocopy")) == errno.EOPNOTSUPP
        z = _sock(nic, 1, u, mode=None)
        assert z.options() == XDP_OPTIONS_ZEROCOPY and z.zerocopy
        # sharing the UMEM on another queue inherits zero-copy
        other = PyxdpXskSocket(nic, 0, shared=z, fill_size=8, comp_size=8, rx_size=8,
                               tx_size=8)
        assert other.zerocopy and other.xpool is not z.xpool
        other.close()
        z.close()


def _zc_host(engine: str, prog: str = "xsk") -> tuple[Host, NetDevice, Collection]:
    h = Host(tracer=Tracer(), engine=engine)
    nic = h.add_device("eth0", rx_queues=2, tx_queues=2)
    coll = h.load(SAMPLES / f"{prog}.o")
    return h, nic, coll


def test_zero_copy_rx_in_place(engine: str) -> None:
    h, nic, coll = _zc_host(engine)
    nic.attach_xdp(coll.programs["xdp_sock_prog"])
    with h, Umem(256, 2048) as u:
        s = _sock(nic, 1, u, mode="zerocopy", fill_size=128, comp_size=128)
        coll.maps["xsks"][1] = s.fd
        s.fill(128)
        sent = [frame(i, 60 + i) for i in range(20)]
        nic.receive(sent, queue=1)
        nic.receive([frame(99)], queue=0)  # queue 0: no socket, XDP_PASS from its pool
        h.run()
        b = s.recv(64)
        assert b.packets() == sent
        assert (b.addr % np.uint64(2048) == 256).all()  # in the chunk the NIC wrote
        s.release(b, refill=True)
        assert h.stack.stats.received == 1
        acct = s.check_accounting()
        assert acct["fill_ring"] == 128 and acct["kernel_rx"] == 0
        s.close()


def test_zero_copy_fill_ring_empty_and_need_wakeup(engine: str) -> None:
    h, nic, coll = _zc_host(engine)
    nic.attach_xdp(coll.programs["xdp_sock_prog"])
    with h, Umem(64, 2048) as u:
        s = _sock(nic, 1, u, mode="zerocopy", rx_size=16, fill_size=32, comp_size=32)
        coll.maps["xsks"][1] = s.fd
        assert s.fill_ring is not None and not s.fill_ring.needs_wakeup()
        s.fill(8)
        nic.receive([frame(i) for i in range(12)], queue=1)
        h.run()
        # 8 DMA'd, 4 dropped by the NIC for lack of buffers; the flag asks for a wakeup
        assert nic.stats.rx_dropped == 4
        assert s.statistics().rx_fill_ring_empty_descs == 1
        assert s.fill_ring.needs_wakeup()
        b = s.recv(64)
        assert len(b) == 8
        s.release(b, refill=True)  # recv found the flag: the wakeup cleared it
        assert len(s.recv(64)) == 0 and not s.fill_ring.needs_wakeup()
        # rx ring full in zero-copy: the buffer goes back to the pool's free list
        nic.receive([frame(i) for i in range(8)], queue=1)
        s.fill()
        nic.receive([frame(i) for i in range(20)], queue=1)
        h.run()
        st = s.statistics()
        assert st.rx_ring_full == 12
        assert s.check_accounting()["kernel_rx"] == 12  # in the pool, not lost
        b = s.recv(64)
        s.release(b, refill=True)
        s.close()


@pytest.mark.parametrize("verdict", ["drop", "pass", "tx", "redirect"])
def test_zero_copy_other_verdicts(engine: str, verdict: str) -> None:
    """XDP_DROP recycles the buffer in the pool; PASS copies into an skb; TX and a
    devmap redirect copy into order-0 pages (xdp_convert_zc_to_xdp_frame)."""
    h = Host(tracer=Tracer(), engine=engine)
    nic = h.add_device("eth0", rx_queues=1)
    out = h.add_device("eth1")
    col = Collector()
    nic.wire.append(col)
    out.wire.append(col)
    if verdict == "redirect":
        coll = h.load(SAMPLES / "redirect_map.o")
        coll.maps["tx_port"][0] = {"ifindex": out.ifindex, "bpf_prog": {"fd": 0}}
        prog = coll.programs["xdp_redirect_map_prog"]
    else:
        action = {"drop": 1, "pass": 2, "tx": 3}[verdict]
        coll = h.load(asm_collection(f"r0 = {action}\nexit", []))
        prog = coll.programs["t"]
    nic.attach_xdp(prog)
    with h, Umem(64, 2048) as u:
        s = _sock(nic, 0, u, mode="zerocopy")
        s.fill(32)
        sent = [frame(i, 60 + i) for i in range(40)]
        for lump in range(0, 40, 10):
            nic.receive(sent[lump:lump + 10])
            h.run()
        acct = s.check_accounting()
        assert acct["fill"] == 32 and len(s.recv(64)) == 0
        if verdict == "pass":
            assert h.stack.stats.received == 40
        elif verdict in ("tx", "redirect"):
            assert len(col.frames.get("eth1" if verdict == "redirect" else "eth0", [])) == 40
        # every buffer is back in the pool or the fill ring: the NIC keeps taking them
        assert nic.stats.rx_dropped == 0
        s.close()


def test_zero_copy_tx_and_l2fwd(engine: str) -> None:
    h, nic, coll = _zc_host(engine)
    nic.attach_xdp(coll.programs["xdp_sock_prog"])
    col = Collector()
    nic.wire.append(col)
    with h, Umem(256, 2048) as u:
        s = _sock(nic, 1, u, mode="zerocopy", fill_size=128, comp_size=128, tx_size=128)
        coll.maps["xsks"][1] = s.fd
        assert s.tx is not None and s.tx.needs_wakeup()
        sent = [frame(i, dst=MAC1, src=MAC0) for i in range(50)]
        assert s.send(sent) == 50
        assert col.frames["eth0"] == sent
        s.complete()
        # l2fwd: received chunks straight back out
        s.fill(64)
        nic.receive([frame(i, 70) for i in range(30)], queue=1)
        h.run()
        b = s.recv(64)
        assert s.forward(b) == 30
        s.complete()
        assert col.frames["eth0"][50:] == [frame(i, 70) for i in range(30)]
        # an invalid descriptor in zero-copy is skipped, never completed
        idx, _ = s.tx.reserve(1)
        s.tx.write_descs(idx, [256 * 2048], [60], 0)
        s.tx.submit(1)
        s.kick()
        assert s.statistics().tx_invalid_descs == 1 and s.complete() == 0
        acct = s.check_accounting()
        assert acct["tx"] == 0 and acct["kernel_tx"] == 0
        s.close()


def test_zero_copy_queue_reset_and_close(engine: str) -> None:
    """Binding resets the queue (page-pool frames back); closing gives the NIC its
    page pool back; the UMEM region leaves the host's memory map."""
    h, nic, coll = _zc_host(engine)
    del coll
    with h, Umem(64, 2048) as u:
        nic.receive([frame(i) for i in range(5)], queue=1)  # queued, not polled
        regions = len(h.memmap.regions)
        s = _sock(nic, 1, u, mode="zerocopy")
        assert len(h.memmap.regions) == regions + 1 and nic.rx[1].xsk is not None
        s.fill(16)
        nic.receive([frame(i) for i in range(5)], queue=1)  # in UMEM chunks, not polled
        s.close()
        assert nic.rx[1].xsk is None and len(h.memmap.regions) == regions
        nic.receive([frame(1)], queue=1)
        h.run()
        assert h.stack.stats.received == 1


def test_generator_feeds_zero_copy_queue(engine: str) -> None:
    h, nic, coll = _zc_host(engine, "xsk_redirect")
    nic.attach_xdp(coll.programs["xdp_sock_redirect_xsk"])
    nic.rx[0].source = TrafficGenerator(flows=4, count=500)
    with h, Umem(512, 2048) as u:
        s = _sock(nic, 0, u, mode="zerocopy", fill_size=256, comp_size=256, rx_size=256)
        s.fill(256)
        got = 0
        for _ in range(100):
            h.poll()
            b = s.recv(256)
            got += len(b)
            s.release(b, refill=True)
            if got == 500:
                break
        assert got == 500
        s.check_accounting()
        s.close()
