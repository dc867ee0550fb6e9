"""pyxdp.net.nf_conntrack and the conntrack kfuncs without Linux: the table's Python API
(add, list, lookup, delete, flush, expiry, /proc text), NAT tuple choice, the
``struct nf_conn`` layout against the kernel's BTF, and ``samples/ct.o`` on both engines
over a namespace's table. tests/kernel/test_nf_conntrack_kernel.py holds it to Linux."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from pyxdp.btf.btf import BtfKind
from pyxdp.btf.vmlinux import kernel_btf_index
from pyxdp.collection import Collection
from pyxdp.net.nf_conntrack import (
    NF_CONN_LAYOUT,
    ConntrackError,
    CtTuple,
    IpsStatus,
    NfConntrack,
    Zone,
)
from pyxdp.net.packets import tcp_packet, udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.net.test_run import TestRunEnv
from pyxdp.userspace import UserspaceBackend
from pyxdp.vm.jiffies import HZ

CT = Path(__file__).resolve().parents[1] / "samples" / "ct.o"
FLOW = CtTuple.of("10.0.0.1", 1000, "10.0.0.2", 2000)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def test_add_list_lookup_delete_flush() -> None:
    t = NfConntrack()
    ct = t.add(FLOW, timeout=5, status=IpsStatus.ASSURED, mark=7, zone=3)
    assert t.list() == [ct] and len(t) == 1
    assert ct.status == IpsStatus.ASSURED | IpsStatus.CONFIRMED and ct.mark == 7
    assert ct.reply == FLOW.invert() and ct.zone == Zone(3)
    assert t.lookup(FLOW.invert(), zone=3) is ct and t.lookup(FLOW) is None  # zone 0
    with pytest.raises(ConntrackError, match="already tracked") as e:
        t.add(FLOW.invert(), zone=3)
    assert e.value.errno == errno.EEXIST
    t.add(FLOW)  # another zone: no clash
    t.delete(FLOW, zone=3)
    with pytest.raises(ConntrackError) as e:
        t.delete(FLOW, zone=3)
    assert e.value.errno == errno.ENOENT
    t.flush()
    assert t.list() == []
    with pytest.raises(ConntrackError) as e:
        t.add(CtTuple.of("10.0.0.1", 0, "10.0.0.2", 0, proto=1))
    assert e.value.errno == errno.EPROTO
    with pytest.raises(ConntrackError, match="different families"):
        CtTuple.of("10.0.0.1", 1, "::1", 2)


def test_entries_expire_and_the_table_fills() -> None:
    clock = Clock()
    t = NfConntrack(max_entries=2, clock=clock)
    ct = t.add(FLOW, timeout=2)
    assert ct.expires() == 2 * HZ
    clock.now += 2 * HZ - 1
    assert t.lookup(FLOW) is ct
    clock.now += 1
    assert t.lookup(FLOW) is None and t.list() == []
    t.add(FLOW)
    t.add(FLOW.invert().__class__.of("10.0.0.3", 1, "10.0.0.4", 2))
    with pytest.raises(ConntrackError) as e:
        t.add(CtTuple.of("10.0.0.5", 1, "10.0.0.6", 2))
    assert e.value.errno == errno.ENOMEM


def test_timeouts_and_status_changes() -> None:
    clock = Clock()
    t = NfConntrack(clock=clock)
    ct = t.alloc(FLOW, FLOW.invert(), timeout=10 * HZ)
    t.set_timeout(ct, 1 << 40)
    assert ct.timeout == 0x7FFF_FFFF  # INT_MAX, relative until confirmed
    assert t.change_status(ct, IpsStatus.CONFIRMED) == -errno.EBUSY
    assert t.change_status(ct, IpsStatus.FIXED_TIMEOUT | IpsStatus.SRC_NAT | 1 << 20) == 0
    assert ct.status == IpsStatus.FIXED_TIMEOUT  # unchangeable bits ignored
    assert t.change_timeout(ct, 5) == -errno.EPERM
    ct.status = IpsStatus.CONFIRMED | IpsStatus.ASSURED
    assert t.change_status(ct, IpsStatus.CONFIRMED) == -errno.EBUSY  # ASSURED is sticky
    assert t.change_timeout(ct, 5) == 0 and ct.timeout == clock.now + 5


def test_nat_choices() -> None:
    t = NfConntrack()
    snat = CtTuple.of("192.0.2.1", 0, "192.0.2.1", 0).src
    first = t.alloc(FLOW, FLOW.invert())
    assert t.nat_setup(first, snat, 4000, 0) == 0
    assert t.nat_setup(first, snat, 4000, 0) == -errno.ENOMEM  # SRC NAT already set up
    assert first.status == IpsStatus.SRC_NAT | IpsStatus.SRC_NAT_DONE
    assert first.reply == CtTuple.of("10.0.0.2", 2000, "192.0.2.1", 4000)
    first.status |= IpsStatus.CONFIRMED
    first.timeout = t.stamp() + 10 * HZ
    t.insert(first)
    # Another flow onto the taken reply tuple without a port: the next free port of the
    # range (Linux starts at a random offset).
    other = CtTuple.of("10.0.0.9", 4000, "10.0.0.2", 2000)
    ct = t.alloc(other, other.invert())
    assert t.nat_setup(ct, snat, None, 0) == 0
    assert ct.reply.dport == 1024 and ct.reply.dst == snat


@pytest.mark.skipif(kernel_btf_index() is None, reason="needs the kernel's BTF")
def test_nf_conn_layout_is_the_kernels() -> None:
    btf = kernel_btf_index()
    assert btf is not None
    tid = btf.find("nf_conn", BtfKind.STRUCT)
    assert tid is not None
    nf_conn = btf.type_by_id(tid)
    offsets = {m.name: m.bit_offset // 8 for m in nf_conn.members}
    assert nf_conn.size == NF_CONN_LAYOUT["size"]
    for field in ("timeout", "zone", "tuplehash", "status", "mark", "secmark", "proto"):
        assert offsets[field] == NF_CONN_LAYOUT[field], field


ENGINES = ["interp", pytest.param("jit", marks=pytest.mark.skipif(
    not jit_available(), reason="the JIT needs llvmlite"))]


@pytest.mark.parametrize("engine", ENGINES)
def test_kfuncs_over_the_namespace_table(engine: str) -> None:
    env = TestRunEnv()
    table = env.fib.conntrack
    peer = table.peers[3] = NfConntrack()
    with Collection.load(CT, UserspaceBackend(env=env, engine=engine)) as c:
        prog = c.programs["xdp_ct"]

        def run(pkt: bytes, **cfg: int) -> tuple[int, dict]:  # type: ignore[type-arg]
            v6 = pkt[12:14] == b"\x86\xdd"
            c.maps["cfg"][0] = {"netns_id": -1, "tuple_sz": 36 if v6 else 12, "opts_sz": 16,
                                "l4proto": pkt[20] if v6 else pkt[23], **cfg}
            r = prog.test_run(pkt)
            assert r.fault is None, r.fault
            return r.retval, c.maps["out"][0]

        pkt = udp_packet(b"x", src_ip="10.0.0.1", dst_ip="10.0.0.2", sport=1000, dport=2000)
        ret, out = run(pkt, op=0)
        assert (ret, out["error"], out["zone_dir"]) == (1, -errno.ENOENT, 3)  # written back
        ret, out = run(pkt, op=1, timeout_ms=4000, status=IpsStatus.ASSURED)
        assert ret == 2 and out["before"]["timeout"] == 1000 and out["before"]["use"] == 0
        assert out["after"]["status"] == IpsStatus.ASSURED | IpsStatus.CONFIRMED
        assert out["after"]["use"] == 2
        (ct,) = table.list()
        assert ct.orig == FLOW and ct.use == 1 and ct.status & IpsStatus.ASSURED
        _, out = run(pkt, op=0, reverse=1)
        assert out["dir"] == 1 and out["after"]["orig_sport"] == 1000
        assert run(pkt, op=0, netns_id=3)[1]["error"] == -errno.ENOENT
        peer.add(FLOW, mark=42)
        assert run(pkt, op=0, netns_id=3)[1]["after"]["mark"] == 42
        assert run(pkt, op=0, netns_id=4)[1]["error"] == -errno.ENONET
        assert run(pkt, op=0, opts_sz=8)[1]["error"] == -errno.EINVAL
        assert run(pkt, op=0, l4proto=1)[1]["error"] == -errno.EPROTO
        assert run(pkt, op=0, tuple_sz=20)[1]["error"] == -errno.EAFNOSUPPORT
        assert run(pkt, op=1)[1]["found"] == 0  # taken: freed, NULL
        v6 = tcp_packet(b"", src_ip="2001:db8::1", dst_ip="2001:db8::2")
        table.add(CtTuple.of("2001:db8::1", 1234, "2001:db8::2", 80, proto="tcp"), zone=5)
        assert run(v6, op=0)[1]["error"] == -errno.ENOENT
        assert run(v6, op=0, zone_id=5)[1]["after"]["zone_id"] == 5
        assert "ipv6     10 tcp      6 " in table.proc()
        table.flush()
        assert run(pkt, op=0)[0] == 1


def test_tracking_on_the_datapath() -> None:
    """xdp_ct_track on a pyxdp NIC (NAPI polls; the interpreter: the JIT's native batches
    need a compilation of their own, too slow for this suite): the host's namespace's
    table tracks the flows."""
    from pyxdp.net.netdevice import Host

    with Host(engine="interp") as h:
        a, b = h.veth("veth0", "veth1")
        coll = h.load(CT)
        a.attach_xdp(coll.programs["xdp_ct_track"])
        b.transmit([udp_packet(b"a", src_ip=f"10.3.0.{i % 5}", dst_ip="10.4.0.1",
                               sport=100 + i % 5, dport=53) for i in range(100)])
        assert h.run() == 100 and not a.faults
        assert [coll.maps["stats"][i] for i in range(5)] == [5, 95, 0, 0, 0]
        table = h.env.fib.conntrack
        assert len(table) == 5
        ct = table.lookup(CtTuple.of("10.4.0.1", 53, "10.3.0.1", 101))
        assert ct is not None and ct.status == IpsStatus.CONFIRMED and ct.use == 1
        assert 20 * HZ < ct.expires() <= 30 * HZ
