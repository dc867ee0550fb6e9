"""``pyxdp xsk rxdrop|txonly|l2fwd``: an AF_XDP socket under load, like the kernel's xdpsock.

On a real interface (root): the redirect program (``samples/xsk.o``:
``bpf_redirect_map`` into an XSKMAP at the rx queue's index) is loaded
through the kernel backend and attached natively through a bpf_link
(:class:`pyxdp.kernel.link.XdpLink`: the kernel detaches it when the process
dies, even by SIGKILL; generic mode when the driver has no native XDP), a
:class:`~pyxdp.xsk.linux.LinuxXskSocket` is bound to the queue and put in
the map. With ``--pyxdp``: a host with a NIC named as ``--dev``, fed on that
queue by the traffic generator (64-byte UDP), the program attached natively,
a :class:`~pyxdp.xsk.datapath.PyxdpXskSocket` (``--redirect-xsk`` uses
``samples/xsk_redirect.o`` and pyxdp's
``bpf_redirect_xsk`` instead of the XSKMAP: pyxdp only, the kernel has no
such helper).

* ``rxdrop``: receive and give the buffers straight back to the fill ring;
* ``txonly``: send 64-byte UDP frames as fast as the socket takes them;
* ``l2fwd``: receive, swap the MAC addresses in place, send the same buffers
  back out (no copy).

Every second (``--interval``) a line with the receive and transmit rates,
as xdpsock prints them; batches of ``--batch`` descriptors, numpy all the
way (no per-packet Python). :func:`xsk_pps` is the measurement
``bench/bench_xsk.py`` and ``pyxdp bench seeds`` use.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import cache
from typing import TYPE_CHECKING, Final

from pyxdp import samples
from pyxdp.cli.options import CliError, seconds
from pyxdp.errors import PyxdpError

if TYPE_CHECKING:
    from pyxdp.net.netdevice import Host, NetDevice
    from pyxdp.xsk.xsk import XskSocket

__all__ = ["DESCRIPTION", "add_arguments", "cmd_xsk", "xsk_pps"]

SAMPLES: Final = samples.DIR


@cache
def packet() -> bytes:
    """The frame every generator sends: 64-byte UDP to the discard port."""
    from pyxdp.net.packets import udp_packet
    return udp_packet(size=64, dport=9)


MODES: Final = ("rxdrop", "txonly", "l2fwd")
DESCRIPTION: Final = (
    "An AF_XDP socket under load, like the kernel's xdpsock sample: rxdrop, txonly or "
    "l2fwd on one queue of a real interface (root; the XSKMAP redirect program is "
    "attached for the run) or, with --pyxdp, of a pyxdp NIC fed by the traffic generator.")
NFRAMES: Final = 4096  # UMEM chunks (XSK_RING_*__DEFAULT_NUM_DESCS * 2)
RING: Final = 2048


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("xsk_mode", choices=MODES, metavar="MODE",
                   help="rxdrop, txonly or l2fwd")
    p.add_argument("--dev", required=True, metavar="D", help="the interface (pyxdp: the NIC's "
                                                             "name)")
    p.add_argument("--queue", type=int, default=0, metavar="Q", help="the queue (default: 0)")
    zc = p.add_mutually_exclusive_group()
    zc.add_argument("--copy", action="store_true", help="bind with XDP_COPY")
    zc.add_argument("--zero-copy", action="store_true", help="bind with XDP_ZEROCOPY")
    p.add_argument("--batch", type=int, default=64, metavar="N",
                   help="descriptors per ring operation (default: 64)")
    red = p.add_mutually_exclusive_group()
    red.add_argument("--redirect-map", action="store_true",
                     help="bpf_redirect_map into an XSKMAP (the default)")
    red.add_argument("--redirect-xsk", action="store_true",
                     help="pyxdp's bpf_redirect_xsk: no XSKMAP (--pyxdp only)")
    p.add_argument("--duration", type=seconds, default=5.0, metavar="S",
                   help="seconds to run (default: 5)")
    p.add_argument("--interval", type=seconds, default=1.0, metavar="S",
                   help="seconds between lines (default: 1)")
    p.add_argument("--pyxdp", action="store_true",
                   help="on pyxdp's datapath (a NIC fed by the traffic generator; no root)")


# -----------------------------------------------------------------------------------
# The socket's work (one step: one batch each way)
# -----------------------------------------------------------------------------------

class _Loop:
    """xdpsock's rx_drop / tx_only / l2fwd on one socket; ``rx`` counts packets received,
    :attr:`tx` packets sent and completed."""

    def __init__(self, sock: XskSocket, mode: str, batch: int,
                 datapath: Callable[[], object] | None = None) -> None:
        self.sock = sock
        self.mode = mode
        self.batch = batch
        self.datapath = datapath  # pyxdp: one softirq round of the host per step
        self.rx = 0
        self.queued = 0  # packets put on the tx ring
        import numpy as np
        self.frames = np.tile(np.frombuffer(packet(), np.uint8), (batch, 1))
        if mode != "txonly":
            sock.fill()

    @property
    def tx(self) -> int:
        """Packets sent and completed: queued, less the chunks still in flight."""
        from pyxdp.xsk.xsk import ChunkState
        return self.queued - self.sock.pool.count[int(ChunkState.TX)]

    def step(self) -> None:
        s = self.sock
        if self.datapath is not None:
            self.datapath()
        if self.mode == "txonly":
            self.queued += s.send(self.frames, kick=True)
            s.complete()
            return
        got = 0
        # The user side drains what the round delivered, ``batch`` descriptors at a
        # time, as xdpsock's loop does while the kernel keeps receiving.
        while len(b := s.recv(self.batch)):
            got += len(b)
            self.rx += len(b)
            if self.mode == "rxdrop":
                s.release(b, refill=True)
                continue
            import numpy as np  # loaded by the socket already: a dict lookup
            a = b.data_addr.astype(np.int64)[:, None]
            buf = s.umem.buf
            dst, src = a + np.arange(6), a + 6 + np.arange(6)
            mac = buf[dst]
            buf[dst] = buf[src]
            buf[src] = mac
            self.queued += s.forward(b, kick=True)
            s.fill()
            if self.datapath is None:
                break  # a real interface: back to poll() between batches
        if not got:
            if self.datapath is None:
                s.poll(1)
            if self.mode == "l2fwd":
                s.flush()


# -----------------------------------------------------------------------------------
# pyxdp
# -----------------------------------------------------------------------------------

def _pyxdp_setup(stack: ExitStack, dev: str, queue: int, mode: str, redirect: str,
                 bind_mode: str | None, count: int | None
                 ) -> tuple[Host, NetDevice, XskSocket]:
    from pyxdp.net.netdevice import Host
    from pyxdp.net.source import TrafficGenerator
    from pyxdp.net.trace import Tracer
    from pyxdp.xsk.datapath import PyxdpXskSocket
    from pyxdp.xsk.umem import Umem
    host = Host(tracer=Tracer())
    stack.callback(host.close)
    nic = host.add_device(dev, rx_queues=queue + 1, tx_queues=queue + 1)
    nic.wire.append(lambda _dev, _batch: None)  # the wire takes what is sent
    obj = "xsk_redirect.o" if redirect == "xsk" else "xsk.o"
    coll = host.load(SAMPLES / obj)
    nic.attach_xdp(next(iter(coll.programs.values())))
    umem = Umem(NFRAMES, 2048)
    stack.callback(umem.close)
    sock = PyxdpXskSocket(nic, queue, umem, mode=bind_mode, fill_size=RING, comp_size=RING,
                          rx_size=RING, tx_size=RING)
    stack.callback(sock.close)
    if redirect == "map":
        coll.maps["xsks"][queue] = sock.fd
    if mode != "txonly":
        nic.rx[queue].source = TrafficGenerator(packets=[packet()], count=count)
    return host, nic, sock


def xsk_pps(mode: str, frames: int, *, redirect: str = "map", zero_copy: bool = False,
            batch: int = 64, queue: int = 0) -> float:
    """Packets per second of ``mode`` on pyxdp: ``frames`` generated frames through the
    redirect program into a socket (rxdrop, l2fwd), or ``frames`` sent (txonly)."""
    with ExitStack() as stack:
        host, nic, sock = _pyxdp_setup(stack, "eth0", queue, mode, redirect,
                                       "zerocopy" if zero_copy else "copy",
                                       None if mode == "txonly" else frames)
        loop = _Loop(sock, mode, batch, host.poll)  # NAPI polls of 64, as the kernel
        t0 = time.perf_counter()
        while (loop.tx if mode == "txonly" else loop.rx) < frames:
            before = loop.rx + loop.tx
            loop.step()
            if loop.rx + loop.tx == before and mode != "txonly" \
                    and not nic.rx[queue].pending:
                break
        if mode == "l2fwd":
            sock.flush()
        dt = time.perf_counter() - t0
        done = loop.tx if mode == "txonly" else loop.rx
    return done / dt


def rxdrop_native_pps(redirect: str, frames: int, *, zero_copy: bool = True,
                      cores: int = 1) -> float:
    """rxdrop as the seed measured it: the user side in machine code
    (:mod:`pyxdp.xsk.native`, xdpsock's loop) so that the datapath's cost shows.
    ``cores=1``: one thread alternating a softirq round of the host and the
    user loop (application and NAPI on one CPU); ``cores=2``: the user loop
    spinning on a thread of its own while this one runs the softirq. Returns
    packets received per second after a warm-up round."""
    from pyxdp.xsk.native import Rxdrop, RxdropThread
    if cores not in (1, 2):
        raise ValueError(f"cores must be 1 or 2, not {cores}")
    with ExitStack() as stack:
        host, _, sock = _pyxdp_setup(stack, "eth0", 0, "rxdrop", redirect,
                                     "zerocopy" if zero_copy else "copy", None)
        sock.fill()
        user = stack.enter_context(Rxdrop(sock))
        host.poll()  # warm-up: the program compiled, the rings and UMEM touched
        user.drain()
        if cores == 2:
            th = RxdropThread(sock)
            stack.callback(th.stop)
            base = th.packets
            t0 = time.perf_counter()
            while th.packets - base < frames:
                host.poll()
            got = th.packets - base
        else:
            got = 0
            t0 = time.perf_counter()
            while got < frames:
                host.poll()
                got += user.drain()
        return got / (time.perf_counter() - t0)


# -----------------------------------------------------------------------------------
# A real interface
# -----------------------------------------------------------------------------------

def _kernel_setup(stack: ExitStack, dev: str, queue: int, bind_mode: str | None
                  ) -> tuple[XskSocket, str]:
    from pyxdp.collection import Collection
    from pyxdp.kernel import bpf_available
    from pyxdp.kernel.link import XdpLink
    from pyxdp.kernel.netlink import InterfaceNotFound
    from pyxdp.xsk.linux import LinuxXskSocket
    from pyxdp.xsk.umem import Umem
    ok, why = bpf_available()
    if not ok:
        raise CliError(f"a real interface needs root and BPF ({why}); --pyxdp runs on "
                       "pyxdp's datapath")
    coll = stack.enter_context(Collection.load(SAMPLES / "xsk.o", backend="kernel"))
    prog = coll.programs["xdp_sock_prog"]
    # Through a bpf_link, as libxdp: the kernel detaches when this process ends, however.
    try:
        link = XdpLink.attach(dev, prog, mode="native")
        where = "xdp-drv"
    except PyxdpError as native:
        try:  # a driver without native XDP: skb mode, as xdpsock -S
            link = XdpLink.attach(dev, prog, mode="generic")
            where = "xdp-skb"
        except PyxdpError:
            if isinstance(native, InterfaceNotFound):  # "DEV: no such interface" already
                raise CliError(str(native)) from None
            raise CliError(f"cannot attach the program to {dev}: {native}") from None
    stack.callback(link.close)
    umem = Umem(NFRAMES, 2048)
    stack.callback(umem.close)
    sock = LinuxXskSocket(dev, queue, umem, mode=bind_mode, fill_size=RING, comp_size=RING,
                          rx_size=RING, tx_size=RING)
    stack.callback(sock.close)
    coll.maps["xsks"][queue] = sock.fd
    return sock, where


# -----------------------------------------------------------------------------------
# The command
# -----------------------------------------------------------------------------------

def cmd_xsk(args: argparse.Namespace) -> int:
    mode: str = args.xsk_mode
    if args.batch <= 0 or args.batch > RING:
        raise CliError(f"--batch must be in 1..{RING}, not {args.batch}")
    if args.duration <= 0 or args.interval <= 0:
        raise CliError("--duration and --interval must be > 0")
    if args.queue < 0:
        raise CliError(f"--queue must be >= 0, not {args.queue}")
    if not args.pyxdp and args.redirect_xsk:
        raise CliError("bpf_redirect_xsk is a pyxdp extension the kernel refuses: use "
                       "--redirect-map, or --pyxdp")
    if args.pyxdp and args.queue > 63:
        raise CliError(f"--queue {args.queue}: pyxdp NICs here have at most 64 queues")
    bind_mode = "copy" if args.copy else "zerocopy" if args.zero_copy else None
    redirect = "xsk" if args.redirect_xsk else "map"
    with ExitStack() as stack:
        if args.pyxdp:
            host, _, sock = _pyxdp_setup(stack, args.dev, args.queue, mode, redirect,
                                         bind_mode, None)
            loop = _Loop(sock, mode, args.batch, host.poll)
            loop.step()  # warm-up: the program's JIT compiled before the first interval
            where = f"pyxdp {'zero-copy' if sock.options() else 'copy'}"
        else:
            ksock, where = _kernel_setup(stack, args.dev, args.queue, bind_mode)
            loop = _Loop(ksock, mode, args.batch)
            where += " zero-copy" if ksock.options() else " copy"
        name = f"{args.dev}:{args.queue}"
        if not args.json:
            print(f"pyxdp xsk {mode} on {name} ({where}, redirect_{redirect}, batch "
                  f"{args.batch})", flush=True)
        end = time.monotonic() + args.duration
        try:
            _intervals(loop, args, name, mode, end)
        except KeyboardInterrupt:  # Ctrl-C: the totals so far, then stop
            st = loop.sock.statistics()
            print(f"{name} interrupted: totals rx {loop.rx} tx {loop.tx}, rx_dropped "
                  f"{st.rx_dropped}, ring_full {st.rx_ring_full}", flush=True)
            return 130
    return 0


def _intervals(loop: _Loop, args: argparse.Namespace, name: str, mode: str,
               end: float) -> None:
    """A line of rates per ``--interval`` until ``end``."""
    while time.monotonic() < end:
        rx0, tx0, t0 = loop.rx, loop.tx, time.monotonic()
        stop = min(t0 + args.interval, end)
        while time.monotonic() < stop:
            loop.step()
        dt = time.monotonic() - t0
        rx, tx = (loop.rx - rx0) / dt, (loop.tx - tx0) / dt
        st = loop.sock.statistics()
        if args.json:
            from pyxdp.cli.options import emit
            emit({"dev": name, "mode": mode, "rx_pps": round(rx), "tx_pps": round(tx),
                  "rx_total": loop.rx, "tx_total": loop.tx, "rx_dropped": st.rx_dropped,
                  "rx_ring_full": st.rx_ring_full,
                  "fill_ring_empty": st.rx_fill_ring_empty_descs})
        else:
            print(f"{name} {mode:6}  rx {rx / 1e6:7.3f} Mpps  tx {tx / 1e6:7.3f} Mpps  "
                  f"(totals rx {loop.rx} tx {loop.tx}, rx_dropped {st.rx_dropped}, "
                  f"ring_full {st.rx_ring_full})", flush=True)
