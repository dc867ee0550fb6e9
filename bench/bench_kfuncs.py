"""ns/packet of XDP programs calling kfuncs with native twins, on the JIT in one batch.

    python bench/bench_kfuncs.py [--batch B] [--runs N]

* ``kern_ctx``: ``samples/kern_ctx.o`` (``bpf_cast_to_kern_ctx``, probe loads through
  ``rxq->dev``, ``bpf_rdonly_cast``, ``bpf_xdp_adjust_head``) on ``--batch`` fresh
  copies of a 142-byte UDP frame (4096-byte frames, 256 bytes of headroom);
* ``bits_iter/W``: ``samples/bits_iter.o`` walking ``W`` words of a map value with the
  bits iterator (words alternately ``0x10`` and ``1 << 63 | 1``: 1.5 set bits a word);
* ``graph_list``: ``samples/graph_list.o`` alternately pushing a new object onto a
  map value's list (``bpf_obj_new``, ``bpf_spin_lock``, ``bpf_list_push_front``, a
  write through the non-owning reference) and popping it (``bpf_list_pop_front``,
  ``bpf_obj_drop``): ``bpf_obj_new`` is the one Python call, every other packet;
* ``rbtree``: ``samples/rbtree.o`` on a map value's tree of 64 objects, in turn adding
  a node (``bpf_obj_new``, ``bpf_rbtree_add`` calling the program's ``less`` at each
  level), removing the node of that key (a search down from ``bpf_rbtree_root`` with
  ``bpf_rbtree_left``/``_right``, ``bpf_rbtree_remove``, ``bpf_obj_drop``) and walking
  6 levels down: ``bpf_obj_new`` is the one Python call, every third packet.
* ``flowtable/hit``: ``samples/flowtable.o`` forwarding a source-NATed TCP flow
  (``bpf_xdp_flow_lookup`` hit, NAT with checksums, the flow's MACs, the
  ``DEVMAP_HASH`` lookup and ``bpf_redirect_map``, both native) on fresh
  copies of one frame; ``flowtable/miss``: the same with a port no flow has
  (the lookup's -ENOENT, then ``XDP_PASS``).
* ``ct_track``: ``samples/ct.o``'s ``xdp_ct_track`` on UDP frames of 4 flows the
  namespace's conntrack table tracks, both directions (``bpf_xdp_ct_lookup`` that
  finds the entry, ``bpf_ct_release``, a stats counter);
* ``ct_new``: the same program on ``--batch`` new UDP flows, a fresh table per batch
  (its memory made and touched before the clock starts): per packet a lookup that
  misses, ``bpf_xdp_ct_alloc``, ``bpf_ct_set_timeout``, ``bpf_ct_insert_entry``,
  ``bpf_ct_release``;
* ``xfrm``: ``samples/xfrm.o`` on ESP frames to 4 destinations of the namespace's 16
  IPsec states (``bpf_xdp_get_xfrm_state`` finds one, its fields read,
  ``bpf_xdp_xfrm_state_release``).
* ``sk_lookup/tcp``, ``/udp``, ``/miss``: ``samples/sk.o``'s ``xdp_sk`` on frames to
  the namespace's 32 sockets (TCP listeners and established connections, UDP
  sockets; IPv4 and IPv6): ``bpf_sk_lookup_tcp`` or ``_udp`` that finds one, its
  ``struct bpf_sock`` fields read, ``bpf_sk_release``; ``/miss`` asks for a port no
  socket has.

Each figure is the best of ``--runs`` batches (time per packet including the call), with
the number of Python function calls one batch made (0 but a few per batch: no Python per
packet). Run it under another checkout's PYTHONPATH for a before/after comparison.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from pyxdp.collection import Collection
from pyxdp.net.fib import Fib
from pyxdp.net.nf_conntrack import CtTuple
from pyxdp.net.packets import udp_packet
from pyxdp.vm.helpers import RunContext

M32 = 0xFFFF_FFFF
SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def _measure(prog: Any, frames: np.ndarray, off: int, ln: int, runs: int,
             fib: Fib | None = None, ifindex: int = 1) -> tuple[float, int]:
    """Best ns/packet over ``runs`` batches, and the Python calls of one batch; the runs
    share one namespace (``fib``, default a new one), as a device's polls do."""
    ctx = RunContext()
    ctx.fib = fib if fib is not None else Fib()
    calls = 0

    def prof(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        calls += event == "call"
    prog.run_batch(frames.copy(), off, ln, ctx=ctx, ingress_ifindex=ifindex)  # warm
    sys.setprofile(prof)
    try:
        prog.run_batch(frames.copy(), off, ln, ctx=ctx, ingress_ifindex=ifindex)
    finally:
        sys.setprofile(None)
    best = float("inf")
    for _ in range(runs):
        f = frames.copy()
        t = time.perf_counter()
        prog.run_batch(f, off, ln, ctx=ctx, ingress_ifindex=ifindex)
        best = min(best, time.perf_counter() - t)
    return best / len(frames) * 1e9, calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    pkt = udp_packet(bytes(range(100)))
    frames = np.zeros((a.batch, 4096), np.uint8)
    frames[:, 256:256 + len(pkt)] = np.frombuffer(pkt, np.uint8)
    with Collection.load(SAMPLES / "kern_ctx.o", engine="jit") as c:
        ns, calls = _measure(c.programs["xdp_kern_ctx"].handle, frames, 256, len(pkt), a.runs)
        print(f"kern_ctx        {ns:10.0f} ns/packet  {calls:8d} Python calls a batch")
    words = [1 << 63 | 1 if k % 2 else 0x10 for k in range(520)]
    bits = np.zeros((a.batch, 1024), np.uint8)
    for nr in (1, 4, 64):
        with Collection.load(SAMPLES / "bits_iter.o", engine="jit") as c:
            c.maps["cfg"].handle.update(bytes(4), struct.pack("<IIIIQ", 0, nr, 0, 0, 0))
            c.maps["src"].handle.update(bytes(4), struct.pack("<520Q", *words))
            ns, calls = _measure(c.programs["xdp_bits"].handle, bits, 256, 64, a.runs)
            print(f"bits_iter/{nr:<5d} {ns:10.0f} ns/packet  {calls:8d} Python calls a batch")
    cmds = np.zeros((a.batch, 1024), np.uint8)
    cmds[1::2, 256] = 2  # push (0), pop (2), ...
    cmds[:, 257] = 1
    with Collection.load(SAMPLES / "graph_list.o", engine="jit") as c:
        ns, calls = _measure(c.programs["xdp_graph_list"].handle, cmds, 256, 64, a.runs)
        print(f"graph_list      {ns:10.0f} ns/packet  {calls:8d} Python calls a batch")
    fill = np.zeros((64, 1024), np.uint8)
    fill[:, 258] = np.arange(64) * 4 + 1  # keys 1, 5, ...: odd, none removed below
    ops = np.zeros((a.batch, 1024), np.uint8)
    ops[:, 256] = np.tile([0, 3, 2], a.batch // 3 + 1)[:a.batch]  # add, remove, walk
    ops[:, 258] = (np.arange(a.batch) // 3 * 38) % 256  # even keys
    with Collection.load(SAMPLES / "rbtree.o", engine="jit") as c:
        h = c.programs["xdp_rbtree"].handle
        h.run_batch(fill, 256, 64, ctx=RunContext())
        ns, calls = _measure(h, ops, 256, 64, a.runs)
        print(f"rbtree          {ns:10.0f} ns/packet  {calls:8d} Python calls a batch")
    fib = Fib()
    flows = [(f"10.1.0.{k}", 1000 + k, "10.2.0.1", 53) for k in range(4)]
    for src, sport, dst, dport in flows:
        fib.conntrack.add(CtTuple.of(src, sport, dst, dport), timeout=3600)
    ct = np.zeros((a.batch, 4096), np.uint8)
    for i in range(a.batch):
        src, sport, dst, dport = flows[i % 4]
        if i % 8 >= 4:
            src, sport, dst, dport = dst, dport, src, sport
        p = udp_packet(b"x" * 18, src_ip=src, dst_ip=dst, sport=sport, dport=dport)
        ct[i, 256:256 + len(p)] = np.frombuffer(p, np.uint8)
    with Collection.load(SAMPLES / "ct.o", engine="jit") as c:
        ns, calls = _measure(c.programs["xdp_ct_track"].handle, ct, 256, len(p), a.runs, fib)
        print(f"ct_track        {ns:10.0f} ns/packet  {calls:8d} Python calls a batch")
        print(f"ct_new          {_new_flows(c.programs['xdp_ct_track'].handle, a):10.0f} "
              "ns/packet")
    fib = Fib()
    for k in range(16):
        fib.xfrm.add(f"10.5.0.{k}", f"10.6.0.{k % 4}", 0x100 + k // 4, 50, reqid=k)
    esp = np.zeros((a.batch, 4096), np.uint8)
    for i in range(a.batch):
        p = udp_packet(b"", src_ip="10.5.0.1", dst_ip=f"10.6.0.{i % 4}")
        p = p[:23] + b"\x32" + p[24:34] + (0x100 + i % 4).to_bytes(4, "big") + bytes(12)
        esp[i, 256:256 + len(p)] = np.frombuffer(p, np.uint8)
    with Collection.load(SAMPLES / "xfrm.o", engine="jit") as c:
        c.maps["cfg"][0] = {"netns_id": -1, "sz_sel": 0, "mark": 0, "error_init": 0,
                            "proto": 0, "pad": 0, "family": 0}
        ns, calls = _measure(c.programs["xdp_xfrm"].handle, esp, 256, len(p), a.runs, fib)
        assert c.maps["out"][0]["found"] == 1
        print(f"xfrm            {ns:10.0f} ns/packet  {calls:8d} Python calls a batch")

    _flowtable(a.batch, a.runs)
    _sockets(a.batch, a.runs)


def _flowtable(batch: int, runs: int) -> None:
    from pyxdp.net.nf_conntrack import CtTuple, IpsStatus
    from pyxdp.net.nf_flow_table import FlowRoute
    from pyxdp.net.packets import ether, ipv4
    from pyxdp.net.test_run import NetdevInfo, TestRunEnv
    from pyxdp.userspace import UserspaceBackend

    fib = Fib()
    fib.add_device(2, "lan", addresses=["192.168.1.1/24"])
    fib.add_device(3, "wan", addresses=["203.0.113.1/24"])
    ct = fib.conntrack.add(CtTuple.of("192.168.1.5", 40000, "203.0.113.9", 80, "tcp"),
                           CtTuple.of("203.0.113.9", 80, "203.0.113.1", 50000, "tcp"),
                           status=IpsStatus.SEEN_REPLY | IpsStatus.SRC_NAT)
    ft = fib.flowtables.add("ft", devices=(2, 3))
    ft.offload(ct, FlowRoute(2, 3, "02:00:00:00:00:0b", "02:00:00:00:00:5e"),
               FlowRoute(3, 2, "02:00:00:00:00:0a", "02:00:00:00:00:c1"))
    env = TestRunEnv(netdevs={i: NetdevInfo(i, f"d{i}") for i in (1, 2, 3)}, fib=fib)
    with Collection.load(SAMPLES / "flowtable.o", UserspaceBackend(env=env, engine="jit")) as c:
        ports = c.maps["tx_ports"]
        ports.handle.ifindex_ok = lambda i: i in fib.devices  # type: ignore[attr-defined]
        ports.update(3, 3)
        c.maps["cfg"][0] = {"sz_sel": 0, "error_init": 0, "family": 0, "pad": [0, 0, 0]}
        for what, sport in (("hit", 40000), ("miss", 40001)):
            tcp = struct.pack("!HHIIBBHHH", sport, 80, 1, 0, 5 << 4, 0x10, 512, 0, 0)
            pkt = ether("02:00:00:00:00:0a", "02:00:00:00:00:c1", 0x0800,
                        ipv4("192.168.1.5", "203.0.113.9", 6, tcp + bytes(32)))
            frames = np.zeros((batch, 4096), np.uint8)
            frames[:, 256:256 + len(pkt)] = np.frombuffer(pkt, np.uint8)
            ns, calls = _measure(c.programs["xdp_flowtable"].handle, frames, 256, len(pkt),
                                 runs, fib, 2)
            assert c.maps["out"][0]["found"] == (what == "hit")
            print(f"flowtable/{what:<5s} {ns:10.0f} ns/packet  {calls:8d} Python calls a batch")


def _sockets(batch: int, runs: int) -> None:
    from pyxdp.net.packets import tcp_packet

    fib = Fib()
    socks = fib.sockets
    for k in range(8):
        socks.tcp_listen(f"10.0.0.{k + 1}", 80 + k)
        socks.tcp_established("10.0.1.1", 1000 + k, "10.0.2.1", 40000 + k)
        socks.udp_bind("0.0.0.0", 5000 + k)
        socks.udp_bind("2001:db8::1", 6000 + k)
    cases = {"tcp": (0, [tcp_packet(b"", src_ip="10.0.9.9", dst_ip=f"10.0.0.{k + 1}",
                                    sport=30000, dport=80 + k) for k in range(4)]
                     + [tcp_packet(b"", src_ip="10.0.2.1", dst_ip="10.0.1.1", sport=40000 + k,
                                   dport=1000 + k) for k in range(4)]),
             "udp": (1, [udp_packet(bytes(20), src_ip="10.0.9.9", dst_ip="10.0.0.1", sport=30000,
                                    dport=5000 + k) for k in range(4)]
                     + [udp_packet(b"", src_ip="2001:db8::9", dst_ip="2001:db8::1",
                                   sport=30000, dport=6000 + k) for k in range(4)]),
             "miss": (0, [tcp_packet(b"", src_ip="10.0.9.9", dst_ip="10.0.0.1", sport=30000,
                                     dport=9999)])}
    with Collection.load(SAMPLES / "sk.o", engine="jit") as c:
        for what, (op, pkts) in cases.items():
            c.maps["cfg"][0] = {"op": op, "tuple_sz": 0, "netns_id": M32, "pad": 0,
                                "flags": 0}
            ln = max(len(p) for p in pkts)
            frames = np.zeros((batch, 4096), np.uint8)
            for i in range(batch):
                p = pkts[i % len(pkts)]
                frames[i, 256:256 + len(p)] = np.frombuffer(p, np.uint8)
            if any(len(p) != ln for p in pkts):
                raise SystemExit("the sk_lookup frames must be of one length")
            ns, calls = _measure(c.programs["xdp_sk"].handle, frames, 256, ln, runs, fib)
            assert c.maps["out"][0]["found"] == (what != "miss")
            print(f"sk_lookup/{what:<5s} {ns:10.0f} ns/packet  {calls:8d} Python calls a batch")
        socks.tcp_syncookies = 2
        syn = [tcp_packet(b"", src_ip="10.0.9.9", dst_ip=f"10.0.0.{k + 1}", sport=30000 + k,
                          dport=80 + k, options=b"\x02\x04\x05\xb4") for k in range(8)]
        frames = np.zeros((batch, 4096), np.uint8)
        for i in range(batch):
            frames[i, 256:256 + len(syn[0])] = np.frombuffer(syn[i % 8], np.uint8)
        ns, calls = _measure(c.programs["xdp_syncookie"].handle, frames, 256, len(syn[0]),
                             runs, fib)
        o = c.maps["cookies"][0]
        assert o["gen"] > 0 and o["check"] == 0 and o["raw_check"] == 0
        print(f"syncookie       {ns:10.0f} ns/packet  {calls:8d} Python calls a batch")


def _new_flows(prog: Any, a: argparse.Namespace) -> float:
    """Best ns/packet of ``a.runs`` batches of new flows, each into a fresh table."""
    frames = np.zeros((a.batch, 4096), np.uint8)
    for i in range(a.batch):
        p = udp_packet(b"x" * 18, src_ip=f"10.1.{i // 200}.{i % 200 + 1}", dst_ip="10.2.0.1",
                       sport=1000 + i % 50000, dport=53)
        frames[i, 256:256 + len(p)] = np.frombuffer(p, np.uint8)
    best = float("inf")
    for _ in range(a.runs + 1):  # the first compiles
        ctx = RunContext()
        ctx.fib = Fib()
        buf = ctx.fib.conntrack.buf
        buf[::4096] = bytes(len(buf[::4096]))  # its pages touched
        f = frames.copy()
        t = time.perf_counter()
        prog.run_batch(f, 256, len(p), ctx=ctx)
        best = min(best, time.perf_counter() - t)
    return best / a.batch * 1e9


if __name__ == "__main__":
    main()
