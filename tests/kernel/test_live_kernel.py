"""pyxdp's datapath on real interfaces (pyxdp.xsk.live) against Linux on the same topology.

Each case of :mod:`pyxdp.testing.livelab` sends the same frames into a veth, once
with Linux running the object natively on it and once with pyxdp running it in user
space behind AF_XDP: what comes out of the veth's peer (XDP_TX), out of the second
pair (devmap redirect), what a UDP socket of the kernel receives (XDP_PASS through
the TAP) and the program's counters must be the same. Then the AF_PACKET fallback,
and ``pyxdp run --iface`` killed with SIGKILL leaving nothing behind.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from pyxdp.kernel.netlink import xdp_query
from pyxdp.net.packets import udp_packet
from pyxdp.testing.livelab import CASES, IP0, MACS, PEER_IP, LiveResult, live_netns, run_case
from pyxdp.testing.vethlab import mixed_frames

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lab() -> Iterator[str]:
    with live_netns() as ns:
        yield ns


def _frames() -> list[bytes]:
    """The lab's mix (IPv4/IPv6, VLAN, ARP, a runt...) and UDP to veth0's address."""
    out = mixed_frames(MACS["veth1"], MACS["veth0"])
    out += [udp_packet(b"to-the-stack-%d" % i, dst_ip=IP0, src_ip=PEER_IP, dport=5678,
                       src_mac=MACS["veth1"], dst_mac=MACS["veth0"], size=size)
            for i, size in enumerate((60, 64, 200, 1000, 1514))]
    return out


@cache
def _kernel(case: str) -> LiveResult:
    return run_case(CASES[case], _frames(), "kernel")


def _nothing_left() -> None:
    """veth0 has no XDP program and its TAP is gone."""
    assert xdp_query("veth0").prog_id == 0
    with pytest.raises(OSError):
        socket.if_nametoindex("veth0-pass")


def _same(want: LiveResult, got: LiveResult) -> None:
    for dev in ("veth1", "veth3"):
        assert sorted(got.rx[dev]) == sorted(want.rx[dev]), dev
    assert got.udp == want.udp
    assert got.maps == want.maps


@pytest.mark.parametrize("case", ["tx", "redirect", "pass", "drop"])
def test_live_matches_linux(lab: str, case: str) -> None:
    frames = _frames()
    want = _kernel(case)
    got = run_case(CASES[case], frames, "pyxdp")
    _same(want, got)
    # The frames went through pyxdp (not past it: the kernel side passes on a miss).
    st = got.stats["veth0"]
    assert st.rx_packets == len(frames)
    expect = {"tx": ("veth1", st.xdp_tx), "redirect": ("veth3", st.xdp_redirect),
              "pass": (None, st.xdp_pass), "drop": (None, st.xdp_drops)}[case]
    dev, count = expect
    assert count > 0
    if dev is not None:
        assert len(got.rx[dev]) == count
    if case == "pass":
        assert len(got.udp) == 5 and got.udp[0].startswith(b"to-the-stack-")
    _nothing_left()


def test_af_packet_fallback(lab: str) -> None:
    """AF_XDP forced off: TPACKET_V3 receive, TPACKET_V2 transmit, the same TX out."""
    frames = _frames()
    got = run_case(CASES["tx"], frames, "pyxdp", live_backend="af_packet")
    want = _kernel("tx")
    assert sorted(got.rx["veth1"]) == sorted(want.rx["veth1"])
    assert got.maps == want.maps
    assert got.stats["veth0"].rx_packets == len(frames)
    _nothing_left()


def test_threaded_napi(lab: str) -> None:
    """``threaded_napi``: veth0's NAPI polled by a kthread while pyxdp runs, the frames
    handled as Linux handles them, and no threaded NAPI left after (a veth's NAPI
    goes with the detach)."""
    from pyxdp.kernel.netdev_genl import napi_get
    from pyxdp.xsk.live import LiveDataplane, LiveOptions
    with LiveDataplane(ROOT / "samples" / "xdp1.o", ["veth0"],
                       options=LiveOptions(threaded_napi=True)):
        napis = napi_get("veth0")
        assert napis and all(n.threaded and n.pid for n in napis), napis
    assert not napi_get("veth0")
    frames = _frames()
    got = run_case(CASES["tx"], frames, "pyxdp", threaded_napi=True)
    _same(_kernel("tx"), got)
    assert got.stats["veth0"].rx_packets == len(frames)
    assert not any(n.threaded for n in napi_get("veth0"))
    _nothing_left()


def test_napi_busy_poller_polls_a_veth(lab: str) -> None:
    """The mechanism under ``busy_poll``: a veth's NAPI masked after a poll (defer-hard-irqs
    with a long gro-flush-timeout) leaves the frames its peer sends in its ring, and an
    io_uring naming the NAPI polls them in the caller's wait - where a copy-mode AF_XDP
    socket's own busy poll has no NAPI id (``SO_INCOMING_NAPI_ID`` 0)."""
    from pyxdp.collection import Collection
    from pyxdp.kernel.io_uring_napi import NapiBusyPoller, busy_poll_rx_packets
    from pyxdp.kernel.link import XdpLink
    from pyxdp.kernel.netdev_genl import NapiIrqDefer, defer_napis, napi_get, restore_napis
    from pyxdp.testing.livelab import send_frames
    frame = udp_packet(b"b", src_mac=MACS["veth1"], dst_mac=MACS["veth0"])
    with Collection.load(str(ROOT / "samples" / "xdp1.o"), backend="kernel") as coll, \
            XdpLink.attach("veth0", coll.program().handle, mode="native"):  # type: ignore[arg-type]
        (napi,) = napi_get("veth0")
        saved = defer_napis([napi], NapiIrqDefer(defer_hard_irqs=100,
                                                 gro_flush_timeout=2_000_000_000))
        poller = NapiBusyPoller([napi.id], 1000)
        try:
            assert napi_get("veth0")[0].irq_defer == NapiIrqDefer(100, 2_000_000_000)
            send_frames("veth1", [frame])  # polled in this thread's softirq, then masked
            before = busy_poll_rx_packets()
            send_frames("veth1", [frame] * 20)  # stay in the veth's ring
            poller.wait(0.005)
            assert busy_poll_rx_packets() - before == 20
            assert coll.maps["rxcnt"].sum(17) == 21
        finally:
            poller.close()
            restore_napis(saved)
        assert napi_get("veth0")[0].irq_defer == napi.irq_defer
    _nothing_left()


def test_busy_poll(lab: str) -> None:
    """``busy_poll``: an io_uring per queue polling veth0's NAPI, the NAPI's defer-hard-irqs
    and gro-flush-timeout set while pyxdp runs (and gone with the NAPI after), the
    frames handled as Linux handles them."""
    from pyxdp.kernel.netdev_genl import napi_get
    from pyxdp.xsk.live import BUSY_POLL_DEFER, LiveDataplane, LiveError, LiveOptions
    with LiveDataplane(ROOT / "samples" / "xdp1.o", ["veth0"],
                       options=LiveOptions(busy_poll=50)) as dp:
        napis = napi_get("veth0")
        assert napis and all(n.irq_defer == BUSY_POLL_DEFER for n in napis), napis
        assert len(dp.devices[0].pollers) == 1 and dp.devices[0].busy_poll_usecs == 50
    assert not napi_get("veth0")
    with pytest.raises(LiveError, match="^veth0: busy polling: no NAPI instance to poll$"):
        LiveDataplane(ROOT / "samples" / "xdp1.o", ["veth0"],
                      options=LiveOptions(backend="af_packet", busy_poll=50))
    frames = _frames()
    got = run_case(CASES["tx"], frames, "pyxdp", busy_poll=50)
    _same(_kernel("tx"), got)
    assert got.stats["veth0"].rx_packets == len(frames)
    assert not napi_get("veth0")
    _nothing_left()


def _cli(lab: str, *args: str) -> str:
    """``pyxdp ARGS`` in the lab's namespace (where the run's abstract socket is)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    got = subprocess.run(["ip", "netns", "exec", lab, sys.executable, "-m", "pyxdp.cli.main",
                          *args], capture_output=True, text=True, env=env, timeout=120)
    assert got.returncode == 0, got.stderr
    return got.stdout


def test_run_iface_maps_and_sigkill(lab: str) -> None:
    """``pyxdp run --iface``: its maps reachable from another process while it runs
    (``pyxdp map ... run PID``), and after SIGKILL no program, no TAP, no threaded or
    deferred NAPI (``--threaded-napi``, ``--busy-poll``) and no map socket left."""
    from pyxdp.kernel.netdev_genl import napi_get
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        ["ip", "netns", "exec", lab, sys.executable, "-m", "pyxdp.cli.main", "run",
         str(ROOT / "samples" / "xdp1.o"), "--iface", "veth0", "--interval", "0.2",
         "--threaded-napi", "--busy-poll"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        lines: list[bytes] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(lines) < 3:
            r, _, _ = select.select([proc.stdout], [], [], 1.0)
            if r:
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line)
        assert len(lines) == 3, (lines, proc.stderr.read() if proc.poll() is not None else "")
        assert lines[0].startswith(b"pyxdp run: xdp_prog1 (xdp1.o) on veth0")
        assert lines[1].startswith(b"maps: pyxdp map show run ")
        pid = int(lines[1].split()[-1])
        assert lines[2].startswith(b"veth0 rx ") and b"Mpps" in lines[2]
        assert xdp_query("veth0").prog_id != 0
        socket.if_nametoindex("veth0-pass")
        napis = napi_get("veth0")
        assert napis and all(n.threaded and n.defer_hard_irqs for n in napis), napis
        # the maps, from another process
        shown = _cli(lab, "map", "show", "run")
        assert f"pyxdp run {pid}: xdp_prog1 on veth0" in shown and "name rxcnt" in shown
        frame = udp_packet(b"m", src_mac=MACS["veth1"], dst_mac=MACS["veth0"])
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as s:
            s.bind(("veth1", 0))
            for _ in range(5):
                s.send(frame)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            doc = json.loads(_cli(lab, "map", "lookup", "run", str(pid), "rxcnt", "key",
                                  "17", "0", "0", "0", "--json"))
            if sum(int.from_bytes(bytes(int(b, 16) for b in v["value"]), "little")
                   for v in doc["values"]) >= 5:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"rxcnt[17] did not count the frames: {doc}")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    for _ in range(100):  # the kernel releases the link and the TAP as the files close
        if xdp_query("veth0").prog_id == 0:
            break
        time.sleep(0.05)
    _nothing_left()
    assert not any(n.threaded or n.defer_hard_irqs for n in napi_get("veth0"))
    assert f"pyxdp run {pid}:" not in _cli(lab, "map", "show", "run")


def test_one_worker_per_queue(lab: str) -> None:
    """A two-queue veth: a socket and a worker on each queue, each receiving what the
    peer's sends from its CPU put on that queue."""
    from pyxdp.testing.livelab import send_frames
    from pyxdp.xsk.live import LiveDataplane
    subprocess.run(["ip", "link", "add", "mq0", "numtxqueues", "2", "numrxqueues", "2",
                    "type", "veth", "peer", "name", "mq1", "numtxqueues", "2",
                    "numrxqueues", "2"], check=True, timeout=60)
    try:
        for d in ("mq0", "mq1"):
            subprocess.run(["ip", "link", "set", d, "up"], check=True, timeout=60)
        old = os.sched_getaffinity(0)
        with LiveDataplane(ROOT / "samples" / "xdp1.o", ["mq0"]) as dp:
            dev = dp.devices[0]
            assert len(dev.rx) == 2 and len(dp._threads) == 2
            try:
                for cpu in sorted(old)[:2]:  # the peer's tx queue follows the sending CPU
                    os.sched_setaffinity(0, {cpu})
                    send_frames("mq1", [udp_packet(b"q", sport=2000 + i) for i in range(40)])
            finally:
                os.sched_setaffinity(0, old)
            deadline = time.monotonic() + 10
            while dev.stats.rx_packets < 80 and time.monotonic() < deadline:
                time.sleep(0.01)
            per_queue = [rq.stats.rx_packets for rq in dev.rx]
            assert sum(per_queue) == 80 and dev.stats.xdp_drops == 80
            if len(old) > 1:
                assert all(per_queue), per_queue
    finally:
        subprocess.run(["ip", "link", "del", "mq0"], capture_output=True, timeout=60)


def _thread_cpu(tid: int) -> float:
    """Seconds of CPU (user + system) the thread ``tid`` of this process has used."""
    with open(f"/proc/self/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_worker_sleeps_between_frames(lab: str) -> None:
    """A trickle of frames (one per 5 ms): the worker takes each in a round and sleeps
    between them (poll, or the gather wait) instead of spinning on the rx ring."""
    from pyxdp.xsk.live import LiveDataplane
    frame = udp_packet(b"t", src_mac=MACS["veth1"], dst_mac=MACS["veth0"])
    with LiveDataplane(ROOT / "samples" / "xdp1.o", ["veth0"]) as dp, \
            socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as s:
        s.bind(("veth1", 0))
        tid = dp._threads[0].native_id
        assert tid is not None
        time.sleep(0.1)
        cpu0, t0 = _thread_cpu(tid), time.monotonic()
        sent = 0
        while time.monotonic() - t0 < 0.6:
            s.send(frame)
            sent += 1
            time.sleep(0.005)
        cpu, wall = _thread_cpu(tid) - cpu0, time.monotonic() - t0
        deadline = time.monotonic() + 5
        while dp.devices[0].stats.rx_packets < sent and time.monotonic() < deadline:
            time.sleep(0.01)
        assert dp.devices[0].stats.xdp_drops == sent
    assert cpu < 0.5 * wall, (cpu, wall)


def test_pages_are_the_umem(lab: str) -> None:
    """The queue's page pool is the socket's UMEM: frames reach the program in the pages
    the kernel wrote (no copy), the pages the program dropped go back into the fill
    ring (more frames than the pool has pages all arrive), and every page is where
    the accounting says (the kernel's lent ones, the wire's, the queue's)."""
    import numpy as np

    from pyxdp.xsk.live import POOL_PAGES, LiveDataplane
    frame = udp_packet(b"z", src_mac=MACS["veth1"], dst_mac=MACS["veth0"])
    with LiveDataplane(ROOT / "samples" / "xdp1.o", ["veth0"]) as dp, \
            socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as s:
        s.bind(("veth1", 0))
        dev = dp.devices[0]
        port, pool = dev.ports[0], dev.rx[0].pool
        assert port.sock.umem.address == pool.buf.ctypes.data
        sent = 0
        while sent < POOL_PAGES + 2000:
            for _ in range(1000):  # in steps the rings hold, however late the worker runs
                s.send(frame)
            sent += 1000
            deadline = time.monotonic() + 10
            while dev.stats.rx_packets < sent and time.monotonic() < deadline:
                time.sleep(0.002)
        assert dev.stats.xdp_drops == sent
        dp.stop()
        lent = int(port.lent.sum())
        assert lent == 4096  # a full fill ring, nothing left in the rx ring
        assert pool.nr_in_use == lent + len(port._tx_pfns) + len(dev.rx[0].ring)
        assert not np.intersect1d(np.flatnonzero(port.lent) + pool.pfn_base,
                                  port._tx_pfns).size
