"""AF_XDP's datapath side against a hostile user: whatever the user writes into the
rings it shares with the datapath (fill and tx descriptors, producer and consumer
indices) is checked before it is used, on the native loop and on the Python path.

The reproductions of issue 11 (the same UMEM chunk posted 64 times into the fill
ring; the fill producer moved far ahead of the consumer) corrupted the heap of a
native host. They run in a subprocess, so that a regression fails the test
instead of killing pytest, and end with counted invalid descriptors, exact
chunk accounting and the same counters on both paths. Then a seeded fuzz test:
a second process writes random ring contents and indices while the host polls.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyxdp.net.napi import native_available
from pyxdp.net.netdevice import Host
from pyxdp.net.packets import udp_packet
from pyxdp.net.source import TrafficGenerator
from pyxdp.net.xdp_umem import XskError
from pyxdp.xsk.datapath import PyxdpXskSocket
from pyxdp.xsk.umem import Umem

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
pytestmark = pytest.mark.skipif(not native_available(), reason="numba is not importable")

# One host per (path, case): a socket on eth0's queue 0 over 32 chunks, rings of 64,
# 200 frames. ``dup``: chunk 5 posted 64 times; ``ahead``: 64 chunks posted (32
# distinct, twice each), then the producer moved 10,000 entries past them.
_REPRO = r"""
import json, sys
import numpy as np
from pyxdp.net.netdevice import Host
from pyxdp.net.packets import udp_packet
from pyxdp.net.source import TrafficGenerator
from pyxdp.xsk.datapath import PyxdpXskSocket
from pyxdp.xsk.umem import Umem

def run(native, mode, case, prog):
    host = Host(engine="jit", native=native)
    nic = host.add_device("eth0")
    coll = host.load(sys.argv[1] + "/" + prog)
    nic.attach_xdp(next(iter(coll.programs.values())))
    umem = Umem(32, 2048)
    sock = PyxdpXskSocket(nic, 0, umem, mode=mode, fill_size=64, comp_size=64,
                          rx_size=64, tx_size=64)
    if "xsks" in coll.maps:
        coll.maps["xsks"][0] = sock.fd
    fq = sock.fill_ring
    idx, k = fq.reserve(64)
    chunks = np.full(64, 5) if case == "dup" else np.arange(64) % 32
    fq.write(idx, chunks.astype(np.uint64) * 2048)
    fq.submit(64)
    if case == "ahead":
        fq._producer[0] = (fq.producer + 10_000) & 0xFFFF_FFFF
    nic.rx[0].source = TrafficGenerator(packets=[udp_packet(b"x" * 8, size=64)], count=200)
    host.run()
    pool = sock.xpool
    pool.check()
    rx = sock.krx
    st = sock.statistics()
    out = {"stats": [st.rx_dropped, st.rx_invalid_descs, st.tx_invalid_descs, st.rx_ring_full,
                     st.rx_fill_ring_empty_descs, st.tx_ring_empty_descs],
           "fq_invalid": pool.fq.invalid_descs, "fill_cons": fq.consumer,
           "rx": rx.read_addrs(rx.consumer, (rx.producer - rx.consumer) & 0xFFFF_FFFF).tolist(),
           "dev_dropped": nic.stats.rx_dropped, "redirect": nic.stats.xdp_redirect,
           "drops": nic.stats.xdp_drops, "free": pool.free_list_cnt}
    sock.close()
    umem.close()
    host.close()  # raises if a page or UMEM chunk is unaccounted for
    return out

mode = sys.argv[2]
res = {}
for case in ("dup", "ahead"):
    for prog in (("xsk.o",) if mode == "copy" else ("xdp1.o", "xsk.o")):
        for native in (True, False):
            res[f"{case} {prog} {'native' if native else 'python'}"] = run(native, mode, case, prog)
print(json.dumps(res))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


@pytest.mark.parametrize("mode", ["copy", "zerocopy"])
def test_issue11_reproductions_end_counted(mode: str) -> None:
    proc = subprocess.run([sys.executable, "-c", _REPRO, str(SAMPLES), mode],
                          capture_output=True, text=True, timeout=300, env=_env())
    assert proc.returncode == 0, (f"the host process died (exit {proc.returncode}):\n"
                                  f"{proc.stderr[-3000:]}")
    res: dict[str, dict[str, Any]] = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in {k.rsplit(" ", 1)[0] for k in res}:
        native, python = res[f"{key} native"], res[f"{key} python"]
        assert native["fq_invalid"] > 0, key
        if key.startswith("dup"):
            assert native["fq_invalid"] == 63, key  # chunk 5 taken once, refused 63 times
        if mode == "zerocopy" and key.endswith("xsk.o"):
            # A zero-copy NIC without buffers tries again at every poll, and the native
            # loop runs more polls per call (docs/SEMANTICS.md): the counters of those
            # tries (the device's drops, fill ring empty and, with the fill producer
            # far ahead, the entries each try refuses) count attempts. The rest agrees.
            for out in (native, python):
                assert out["dev_dropped"] > 0 and out["stats"][4] > 0
                out["dev_dropped"] = out["stats"][4] = 0
                if key.startswith("ahead"):
                    out["fq_invalid"] = 0
                    out["fill_cons"] = 0
        assert native == python, key
    if mode == "copy":
        dup = res["dup xsk.o native"]
        assert len(dup["rx"]) == 1 and dup["stats"][0] == 199  # one buffer, 199 -ENOMEM
        ahead = res["ahead xsk.o native"]
        assert len(ahead["rx"]) == 32 and ahead["stats"][0] == 168


# --------------------------------------------------------------------------
# Fuzz: a second process writes the user's side of the rings at random
# --------------------------------------------------------------------------

FUZZ_SECONDS = 2.5  # per path and mode: four runs, well under 20 s with start-up


def _hostile_user(seed: int, fill: Any, tx: Any, rx: Any, comp: Any, nchunks: int,
                  chunk: int, stop: Any) -> None:
    """Random fill and tx entries and random indices, as fast as it goes (forked: the
    rings and the UMEM are shared memory)."""
    rng = random.Random(seed)
    size = nchunks * chunk
    choices = [lambda: rng.randrange(nchunks) * chunk,  # a valid chunk, often again
               lambda: rng.randrange(nchunks) * chunk + rng.randrange(chunk),
               lambda: rng.randrange(size, size + 8 * chunk),
               lambda: rng.getrandbits(64),
               lambda: (rng.randrange(1 << 16) << 48) | rng.randrange(size)]
    while not stop.is_set():
        r = rng.random()
        if r < 0.15:  # now and then a well-behaved round: rx and completions consumed,
            # their chunks posted back to the fill ring at its producer
            # (the user's own consumer index lost: the last ring's worth taken)
            prod = int(rx._producer[0])
            addrs = rx.read_addrs(prod - rx.size, rx.size) & np.uint64(-chunk & (2**64 - 1))
            rx._consumer[0] = prod
            fill.write(int(fill._producer[0]), addrs)
            fill._producer[0] = (int(fill._producer[0]) + rx.size) & 0xFFFF_FFFF
            comp._consumer[0] = comp._producer[0]
        elif r < 0.4:
            n = rng.randrange(1, fill.size + 1)
            fill.write(rng.getrandbits(32), np.array([rng.choice(choices)() for _ in range(n)],
                                                      np.uint64))
        elif r < 0.6:
            n = rng.randrange(1, tx.size + 1)
            tx.write_descs(rng.getrandbits(32),
                           np.array([rng.choice(choices)() for _ in range(n)], np.uint64),
                           np.array([rng.choice((0, 1, 60, chunk, rng.getrandbits(32)))
                                     for _ in range(n)], np.uint32),
                           np.array([rng.choice((0, 0, 1, 2, rng.getrandbits(32)))
                                     for _ in range(n)], np.uint32))
        else:
            ring = rng.choice((fill, fill, tx, tx, rx, comp))
            word = ring._consumer if ring in (rx, comp) else ring._producer
            base = int(word[0])
            word[0] = rng.choice((base + rng.randrange(1, 2 * ring.size), base - 1,
                                  base + ring.size + 1, base + (1 << 31),
                                  rng.getrandbits(32))) & 0xFFFF_FFFF
        if rng.random() < 0.01:
            time.sleep(0.0005)


def _fuzz_once(seed: int, native: bool, mode: str) -> dict[str, int]:
    host = Host(engine="jit", native=native)
    try:
        nic = host.add_device("eth0")
        coll = host.load(SAMPLES / "xsk.o")
        nic.attach_xdp(next(iter(coll.programs.values())))
        umem = Umem(64, 2048, tx_metadata_len=24, shared=True)  # tx metadata read too
        umem.unlink()  # the name is not needed (the child is forked): nothing to leak
        sock = PyxdpXskSocket(nic, 0, umem, mode=mode, fill_size=32, comp_size=32,
                              rx_size=32, tx_size=32)
        coll.maps["xsks"][0] = sock.fd
        sock.fill(32)
        nic.rx[0].source = TrafficGenerator(
            packets=[udp_packet(bytes([i]) * 8, sport=i, size=64 + 40 * i) for i in range(5)],
            count=None)
        assert sock.fill_ring and sock.tx and sock.rx and sock.comp_ring
        # Compiled before the timed window (a cold machine-code cache can take it all).
        host.poll()
        try:
            sock.kick()
        except XskError:
            pass
        sock.poll()
        stop = mp.get_context("fork").Event()
        child = mp.get_context("fork").Process(
            target=_hostile_user, args=(seed, sock.fill_ring, sock.tx, sock.rx,
                                        sock.comp_ring, umem.nchunks, umem.chunk_size, stop),
            daemon=True)
        child.start()
        polls = kicks = 0
        try:
            end = time.monotonic() + FUZZ_SECONDS
            while time.monotonic() < end:
                host.poll()
                polls += 1
                if polls % 4 == 0:
                    try:
                        sock.kick()
                        kicks += 1
                    except XskError:
                        pass  # sendto's errno for a ring stuck on a descriptor
                    sock.poll()
        finally:
            stop.set()
            child.join(10)
            if child.is_alive():
                child.kill()
        assert child.exitcode == 0, f"the user process failed (exit {child.exitcode})"
        nic.rx[0].source = None
        host.run()  # what the queue still holds
        pool = sock.xpool
        assert pool is not None and sock.ktx is not None
        pool.check()
        st = sock.statistics()
        out = {"polls": polls, "kicks": kicks, "fq_invalid": pool.fq.invalid_descs,
               "tx_invalid": st.tx_invalid_descs, "redirect": nic.stats.xdp_redirect,
               "rx_dropped": st.rx_dropped, "rx_full": st.rx_ring_full}
        # Every frame redirected was placed, or counted where it was dropped; every tx
        # descriptor consumed was completed (copy mode: the invalid ones too, as 6.18).
        krx, ktx, cq = sock.krx, sock.ktx, pool.cq
        assert krx is not None
        assert out["redirect"] == krx.cached_prod + st.rx_dropped + st.rx_ring_full, out
        assert st.rx_invalid_descs == 0 and st.tx_invalid_descs == ktx.invalid_descs
        done = ktx.cached_cons - (0 if mode == "copy" else ktx.invalid_descs)
        assert cq.cached_prod == done & 0xFFFF_FFFF, (cq, ktx)
        sock.close()
        umem.close()
        return out
    finally:
        host.close()  # raises if a page or UMEM chunk is unaccounted for


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
@pytest.mark.parametrize("mode", ["copy", "zerocopy"])
def test_fuzz_user_side_of_the_rings(mode: str, native: bool) -> None:
    seed = int(os.environ.get("PYXDP_FUZZ_SEED", random.randrange(1 << 32)))
    try:
        out = _fuzz_once(seed, native, mode)
    except BaseException as e:
        raise AssertionError(f"seed {seed} (PYXDP_FUZZ_SEED={seed} reproduces it): "
                             f"{type(e).__name__}: {e}") from e
    assert out["polls"] > 10 and out["fq_invalid"] > 0, (seed, out)


def test_a_shared_umem_never_closed_exits_quietly() -> None:
    """SharedMemory's own __del__ raised BufferError at exit (printed as a traceback)
    when a shared UMEM was left open with views of it alive."""
    code = ("from pyxdp.xsk.umem import Umem\n"
            "u = Umem(8, 2048, shared=True)\nu.buf[:4] = 1\nv = u.buf[:8]\nu.unlink()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=_env())
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_closed_sockets_and_hosts_refuse_bind() -> None:
    """Found by using AF_XDP sockets after close (round 7): bind on a closed socket was
    EBUSY ("already bound"; Linux: the fd is gone, EBADF), a socket bound to a device
    of a closed host (ENODEV now, as a deleted namespace's device), and a closed
    socket's fd in an XSKMAP is EBADF while a live one's number given to a prog_array
    is EINVAL and to a sockmap or sockhash EOPNOTSUPP, as Linux answers an AF_XDP socket's
    fd (the fds' shared number space)."""
    import errno

    from pyxdp.errors import MapError
    host = Host(native=False, engine="interp")
    dev = host.add_device("eth0", rx_queues=2)
    umem = Umem(64, 2048)
    sock = PyxdpXskSocket(dev, 1, umem, fill_size=32, comp_size=32, rx_size=32, tx_size=32)
    spare = PyxdpXskSocket(None, 0, Umem(64, 2048), host=host, fill_size=32, comp_size=32,
                           rx_size=32, tx_size=32)
    coll = host.load(Path(__file__).resolve().parents[1] / "samples" / "xsk.o")
    xsks = coll.maps["xsks"].handle
    from pyxdp.spec import MapSpec
    from pyxdp.testing.programs import asm_collection
    from pyxdp.uapi.bpf import BpfMapType
    with pytest.raises(MapError) as m:
        with host.load(asm_collection("r0 = 2\nexit", (MapSpec(
                "pa", int(BpfMapType.BPF_MAP_TYPE_PROG_ARRAY), 4, 4, 1, 0),))) as c:
            c.maps["pa"].handle.update(bytes(4), sock.fd.to_bytes(4, "little"))
    assert m.value.errno == errno.EINVAL
    for t in (BpfMapType.BPF_MAP_TYPE_SOCKMAP, BpfMapType.BPF_MAP_TYPE_SOCKHASH):
        with pytest.raises(MapError) as m:  # Linux: sock_map_sk_is_suitable refuses it
            with host.load(asm_collection("r0 = 2\nexit", (MapSpec(
                    "sm", int(t), 4, 4, 1, 0),))) as c:
                c.maps["sm"].handle.update(bytes(4), sock.fd.to_bytes(4, "little"))
        assert m.value.errno == errno.EOPNOTSUPP
    sock.close()
    with pytest.raises(XskError) as e:
        sock.bind(dev, 0)
    assert e.value.errno == errno.EBADF
    with pytest.raises(MapError) as m:
        xsks.update(bytes(4), sock.fd.to_bytes(4, "little"))
    assert m.value.errno == errno.EBADF
    host.close()
    with pytest.raises(XskError) as e:
        spare.bind(dev, 0)
    assert e.value.errno == errno.ENODEV and "is closed" in str(e.value)
    spare.close()
    umem.close()


def test_closed_sockets_poll_and_getsockopt_are_ebadf() -> None:
    """Round 8: a closed socket's poll returned 0 and its statistics/options answered
    (Linux: POLLNVAL for the gone fd, getsockopt EBADF); now each is EBADF, as the
    socket's other calls after close and LinuxXskSocket's."""
    import errno
    host = Host(native=False, engine="interp")
    dev = host.add_device("eth0")
    sock = PyxdpXskSocket(dev, 0, fill_size=32, comp_size=32, rx_size=32, tx_size=32)
    assert sock.poll(0) != 0 and sock.options() == 0  # the tx ring has room
    sock.close()
    for call in (lambda: sock.poll(0), sock.statistics, sock.options):
        with pytest.raises(XskError) as e:
            call()
        assert e.value.errno == errno.EBADF and "closed" in str(e.value)
    host.close()


@pytest.mark.parametrize("native", [False, True])
def test_a_umem_in_use_refuses_close(native: bool) -> None:
    """Round 8: closing a UMEM its sockets still used dropped the memory under the
    datapath (copy-mode receive into it: an IndexError traceback on the Python path, a
    segfault natively). Now close is EBUSY while sockets hold it (libxdp's
    xsk_umem__delete), a closed UMEM is EBADF to a new socket, and a with-block left by
    an exception closes it with its last socket instead of hiding the exception."""
    import errno
    host = Host(native=native, engine="jit" if native else "interp")
    dev = host.add_device("eth0")
    coll = host.load(SAMPLES / "xsk.o")
    dev.attach_xdp(coll.programs["xdp_sock_prog"])
    umem = Umem(64, 2048)
    sock = PyxdpXskSocket(dev, 0, umem, fill_size=32, comp_size=32, rx_size=32, tx_size=32)
    coll.maps["xsks"].update(0, sock.fd)
    sock.fill(16)
    with pytest.raises(XskError) as e:
        umem.close()
    assert e.value.errno == errno.EBUSY and "in use by 1 socket" in str(e.value)
    dev.receive([udp_packet(b"x" * 200)] * 8)
    host.run()
    batch = sock.recv(8)
    assert len(batch) == 8 and all(len(p) > 200 for p in batch.packets())
    sock.close()
    umem.close()
    with pytest.raises(XskError) as e:
        PyxdpXskSocket(None, 0, umem, host=host)
    assert e.value.errno == errno.EBADF and "UMEM is closed" in str(e.value)
    with pytest.raises(RuntimeError, match="boom"):
        with Umem(64, 2048) as u2:
            s2 = PyxdpXskSocket(None, 0, u2, host=host, fill_size=32, comp_size=32,
                                rx_size=32, tx_size=32)
            raise RuntimeError("boom")
    assert not u2.closed
    s2.close()
    assert u2.closed
    host.close()


def test_a_closed_host_refuses_polls_and_unbinds_its_sockets() -> None:
    """Round 8: Host.run() and poll() after close returned 0 as if idle (its other
    calls are ENODEV), and sockets bound to its devices stayed bound (sendto queued
    frames for a device that was gone). Closing the host is now the devices'
    NETDEV_UNREGISTER: sockets are unbound (xsk_notifier), so sendto is ENXIO and poll
    has nothing ready, as on Linux when a namespace's device goes."""
    import errno

    from pyxdp.net.netdevice import LinkError
    host = Host(native=False, engine="interp")
    dev = host.add_device("eth0")
    sock = PyxdpXskSocket(dev, 0, fill_size=32, comp_size=32, rx_size=32, tx_size=32)
    host.close()
    for call in (host.run, host.poll):
        with pytest.raises(LinkError) as le:
            call()
        assert le.value.errno == errno.ENODEV and "is closed" in str(le.value)
    assert sock.poll(10) == 0
    with pytest.raises(XskError) as e:
        sock.send([udp_packet(b"x")])
    assert e.value.errno == errno.ENXIO
    sock.close()


def test_objects_of_another_host_are_taken() -> None:
    """Round 8 read "fd N is no AF_XDP socket" for a socket of another Host given to
    this host's XSKMAP, then named it; Linux's XSKMAP takes any AF_XDP socket (the
    redirect checks the device: test_xsk_datapath), and so does pyxdp's now."""
    h1, h2 = Host(native=False, engine="interp"), Host(native=False, engine="interp")
    sock = PyxdpXskSocket(h2.add_device("eth0"), 0, fill_size=32, comp_size=32,
                          rx_size=32, tx_size=32)
    xsks = h1.load(SAMPLES / "xsk.o").maps["xsks"]
    xsks.update(0, sock.fd)
    assert xsks.handle.socket_at(0) is sock  # type: ignore[attr-defined]
    sock.close()
    assert xsks.handle.socket_at(0) is None  # type: ignore[attr-defined]
    h1.close()
    h2.close()


def test_closing_a_zero_copy_socket_while_frames_arrive() -> None:
    """Round 8: a zero-copy socket closed by one thread while another fed its queue
    (NetDevice.receive, the NIC's DMA into fill-ring chunks) raised TypeError from the
    pool's rings, which the close had just let go: the DMA now takes the host lock, as
    the NAPI poll and the unbind do, and finds the queue's pool either whole or gone."""
    import threading
    errors: list[BaseException] = []
    for trial in range(12):
        host = Host(native=False, engine="interp")
        dev = host.add_device("eth0")
        sock = PyxdpXskSocket(dev, 0, mode="zerocopy", fill_size=64, comp_size=64,
                              rx_size=64, tx_size=64)
        sock.fill(32)

        def feed(host: Host = host, dev: Any = dev) -> None:
            try:
                for _ in range(300):
                    dev.receive([udp_packet(b"x" * 100)] * 8)
                    host.poll()
            except XskError:
                pass
            except BaseException as e:  # pragma: no cover - the regression
                errors.append(e)

        t = threading.Thread(target=feed)
        t.start()
        time.sleep(0.001 * (trial % 6))
        sock.close()
        t.join()
        host.close(check=False)
    assert not errors, repr(errors[0])


def test_a_socket_made_on_one_host_refuses_another_hosts_device() -> None:
    """Round 8: PyxdpXskSocket(dev_of_h2, host=h1) ignored host= and bound on h2; the
    socket now belongs to host= and the device of another host is ENODEV at bind, as
    an ifindex of another network namespace is (the UMEM is left unused)."""
    import errno
    h1, h2 = Host(native=False, engine="interp"), Host(native=False, engine="interp")
    h1.add_device("eth0")
    other = h2.add_device("eth1")
    umem = Umem(64, 2048)
    with pytest.raises(XskError) as e:
        PyxdpXskSocket(other, 0, umem, host=h1, fill_size=32, comp_size=32, rx_size=32,
                       tx_size=32)
    assert e.value.errno == errno.ENODEV and "not a device of host" in str(e.value)
    umem.close()  # no socket holds it
    h1.close()
    h2.close()
