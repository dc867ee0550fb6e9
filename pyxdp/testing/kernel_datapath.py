"""Linux's XDP datapath, path by path, as the column ``pyxdp bench datapath --vs-kernel``
compares pyxdp with.

Everything happens in a network namespace this module creates
(``pyxdp-kdp-<pid>``) with one veth pair, and is deleted on exit, also on
error; no frame leaves it. ``veth0`` carries the address and MAC the
benchmark frame is sent to, so frames passed to the stack are local UDP
datagrams to a port without a socket (counted as ``Udp: NoPorts``), which is
also what pyxdp's host stack does with them.

How each path is driven and counted (no Python per packet anywhere):

* ``drop``, ``tx``, ``redirect``, ``pass``: ``BPF_PROG_TEST_RUN`` with
  ``BPF_F_TEST_XDP_LIVE_FRAMES`` (``bpf_test_run_xdp_live`` in
  net/bpf/test_run.c): real xdp_frames from a page_pool, the verdict
  executed. XDP_TX leaves through ``ingress_ifindex`` (veth0, whose peer
  drops natively); redirect goes through a devmap to veth0; XDP_PASS frames
  become skbs handed to ``netif_receive_skb_list`` on veth0 in the same
  call. Mpps: frames over the wall time of the call (the CPU time of the
  calling thread is kept too);
* ``cpumap``: the same live frames, the program ``bpf_redirect_map`` into a
  cpumap entry for another CPU (qsize 2048, no cpumap program) while the
  calling thread is pinned to this CPU. ``cpu_map_kthreadfn`` on the remote
  CPU turns the frames into skbs and delivers them as lists to the stack;
  what it delivered is the namespace's ``Udp: NoPorts`` growth (frames the
  ptr_ring refused at enqueue never get there). Mpps: delivered over the
  wall time from the call's start until the counter stops moving;
* ``generic``: veth1 runs ``XDP_DROP`` in skb mode (``do_xdp_generic`` in
  net/core/dev.c), counting every frame in a per-CPU array. Frames enter
  veth0 from the driver :data:`GENERIC_DRIVER` names (see
  :func:`measure_generic`); Mpps: the counter's growth over the wall time of
  the driving until the counter stops moving;
* ``xsk``: veth1 runs ``bpf_redirect_map`` into an XSKMAP holding an AF_XDP
  socket bound to veth1 queue 0 in copy mode (``XDP_COPY``: ``xsk_rcv``
  copies each frame into a UMEM chunk); the user side is xdpsock's rxdrop
  loop in machine code (:class:`pyxdp.xsk.native.RxdropThread`) on a
  thread of its own. Traffic: live frames redirected out of veth0 to veth1.
  Mpps: frames the socket received over the wall time from the traffic's
  start to the last one received.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyxdp.collection import Collection
from pyxdp.errors import PyxdpError
from pyxdp.kernel import prog_test_run
from pyxdp.kernel.link import XdpLink
from pyxdp.kernel.netlink import ifindex_of, netns
from pyxdp.net.packets import udp_packet
from pyxdp.spec import CollectionSpec, MapSpec
from pyxdp.testing.kernel_live import DROP, LIVE, REDIRECT_DEVMAP, TX, asm_spec, xdp_md
from pyxdp.testing.programs import REDIRECT_XSK, asm_collection
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.uapi.if_packet import PACKET_QDISC_BYPASS, SOL_PACKET

if TYPE_CHECKING:
    from pyxdp.xsk.linux import LinuxXskSocket

__all__ = ["GENERIC_DRIVER", "KernelRun", "LinuxPaths", "PATHS", "linux_paths"]

BATCH = 64  # live frames per batch (the kernel's default, NAPI_POLL_WEIGHT)
VETH0_MAC = "02:00:00:00:b0:00"
VETH1_MAC = "02:00:00:00:b0:01"
SRC_IP, DST_IP = "192.0.2.1", "198.51.100.2"  # udp_packet's defaults
DPORT = 9  # discard: no socket listens, the stack counts NoPorts
CPUMAP_QSIZE = 2048
RING = 4096  # AF_XDP ring sizes
PACKET = udp_packet(size=64, dport=DPORT, src_mac=VETH1_MAC, dst_mac=VETH0_MAC)

PATHS = ("drop", "tx", "redirect", "pass", "cpumap", "generic", "xsk")

PASS = asm_spec("xdp_pass", "r0 = 2\nexit")

# return bpf_redirect_map(&cpu_map, <remote cpu>, 0): the cpu index is patched per run.
def _redirect_cpu(cpu: int, nr_cpus: int) -> CollectionSpec:
    cpu_map = MapSpec("cpu_map", BpfMapType.BPF_MAP_TYPE_CPUMAP, 4, 4, nr_cpus)
    return asm_collection(f"r1 = map[fd:0]\nr2 = {cpu}\nr3 = 0\ncall 51\nexit", [cpu_map])


# XDP_DROP counting each frame in a per-CPU array (no atomics: one writer per CPU).
COUNTS = MapSpec("counts", BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 1)
COUNT_DROP = asm_collection("""
*(u32 *)(r10 -4) = 0
r1 = map[fd:0]
r2 = r10
r2 += -4
call 1
if r0 == 0 goto +3
r1 = *(u64 *)(r0 +0)
r1 += 1
*(u64 *)(r0 +0) = r1
r0 = 1
exit
""", [COUNTS])


# How the generic row's frames enter veth0 (see measure_generic):
# "live": live-frames redirect out of veth0 (veth_ndo_xdp_xmit) into veth1's
#         NAPI, which GRO (turned on for veth1) keeps in place without a native
#         program: xdp_frames become skbs there and reach do_xdp_generic;
# "packet": an AF_PACKET socket on veth0 sending batches of sendmmsg(2).
GENERIC_DRIVER = "live"


@dataclass(frozen=True, slots=True)
class KernelRun:
    """One measurement: ``frames`` offered, ``delivered`` where the path counts them
    (all of them for the synchronous live-frames paths), over ``seconds`` of wall
    time; ``cpu_seconds`` is the calling thread's CPU time where it is the whole cost."""

    frames: int
    delivered: int
    seconds: float
    cpu_seconds: float | None = None

    @property
    def mpps(self) -> float:
        return self.delivered / self.seconds / 1e6 if self.seconds > 0 else 0.0


def _ip(*args: str) -> None:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        raise PyxdpError(f"ip {' '.join(args)}: {res.stderr.strip()}")


def _snmp(table: str, field: str) -> int:
    """A counter of this thread's network namespace (``/proc/net/snmp``)."""
    with open("/proc/thread-self/net/snmp") as f:
        rows = [ln.split() for ln in f if ln.startswith(table + ":")]
    return int(rows[1][rows[0].index(field)])


def udp_noports() -> int:
    """``UDP_MIB_NOPORTS``: datagrams the stack delivered to a port nobody listens on."""
    return _snmp("Udp", "NoPorts")


def _settle(counter: Callable[[], int], quiet: float = 0.005, limit: float = 2.0
            ) -> tuple[int, float]:
    """Poll ``counter`` until it has not moved for ``quiet`` seconds; (value, time of
    its last change). What a queue on another CPU still held gets counted."""
    last_v, last_t = counter(), time.perf_counter()
    end = last_t + limit
    while True:
        time.sleep(quiet / 5)
        v, t = counter(), time.perf_counter()
        if v != last_v:
            last_v, last_t = v, t
        elif t - last_t >= quiet or t > end:
            return last_v, last_t


@contextmanager
def _pinned(cpu: int) -> Iterator[None]:
    """The calling thread on ``cpu`` only (sched_setaffinity(0) is per thread)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class LinuxPaths:
    """The namespace, veth pair and programs of every path; one method per path
    returning a :class:`KernelRun` for ``frames`` frames. Use :func:`linux_paths`."""

    def __init__(self, name: str, stack: ExitStack) -> None:
        self.netns = name
        self._stack = stack
        self.veth0 = ifindex_of("veth0")
        self.veth1 = ifindex_of("veth1")
        self._veth1_prog: str | None = None
        self._veth1_link: XdpLink | None = None  # a bpf_link: gone with this process
        self._colls: dict[str, Collection] = {}
        self._xsk: LinuxXskSocket | None = None
        self.gro_error = ""  # why veth1's NAPI could not be kept on without XDP

    # -- plumbing ----------------------------------------------------------------------
    def _detach_veth1(self) -> None:
        if self._veth1_link is not None:
            self._veth1_link.close()  # the last reference: the kernel detaches now
        self._veth1_link = self._veth1_prog = None

    def _coll(self, key: str, spec: CollectionSpec) -> Collection:
        c = self._colls.get(key)
        if c is None:
            c = self._colls[key] = self._stack.enter_context(Collection(spec, "kernel"))
        return c

    def _veth1(self, key: str, spec: CollectionSpec, mode: str) -> Collection:
        """``spec`` attached to veth1 in ``mode`` (the previous program detached first:
        native and skb mode cannot be on one device at once)."""
        coll = self._coll(key, spec)
        if self._veth1_prog != key:
            self._detach_veth1()
            self._veth1_link = XdpLink.attach("veth1", coll.program(), mode=mode)
            self._veth1_prog = key
        return coll

    def _live(self, coll: Collection, frames: int, ingress: int) -> KernelRun:
        ctx = xdp_md(PACKET, ingress)
        fd = coll.program().fd
        t0, c0 = time.perf_counter(), time.thread_time()
        prog_test_run(fd, PACKET, ctx_in=ctx, repeat=frames, flags=LIVE, batch_size=BATCH)
        c1, t1 = time.thread_time(), time.perf_counter()
        return KernelRun(frames, frames, t1 - t0, c1 - c0)

    def _sink(self) -> None:
        """veth1 drops natively: where XDP_TX and the devmap send frames (and its
        native program is what lets veth1 take frames from ndo_xdp_xmit)."""
        self._veth1("drop", DROP, "native")

    # -- the paths ---------------------------------------------------------------------
    def drop(self, frames: int) -> KernelRun:
        return self._live(self._coll("drop", DROP), frames, self.veth0)

    def tx(self, frames: int) -> KernelRun:
        self._sink()
        return self._live(self._coll("tx", TX), frames, self.veth0)

    def redirect(self, frames: int) -> KernelRun:
        self._sink()
        coll = self._coll("redirect", REDIRECT_DEVMAP)
        coll.maps["tx_port"][0] = self.veth0
        return self._live(coll, frames, self.veth0)

    def pass_(self, frames: int) -> KernelRun:
        before = udp_noports()
        run = self._live(self._coll("pass", PASS), frames, self.veth0)
        got = udp_noports() - before
        if got < frames:  # every frame must have reached UDP: else the figure is not PASS's
            raise PyxdpError(f"XDP_PASS: {got} of {frames} frames reached UDP")
        return run

    def cpumap(self, frames: int) -> KernelRun:
        here, there = _two_cpus()
        nr = os.cpu_count() or 1
        coll = self._coll(f"cpumap{there}", _redirect_cpu(there, nr))
        if there not in coll.maps["cpu_map"]:
            coll.maps["cpu_map"][there] = CPUMAP_QSIZE  # struct bpf_cpumap_val.qsize
        with _pinned(here):
            before = udp_noports()
            t0 = time.perf_counter()
            self._live(coll, frames, self.veth0)
            got, t1 = _settle(udp_noports)
        return KernelRun(frames, got - before, t1 - t0)

    def generic(self, frames: int, driver: str = GENERIC_DRIVER) -> KernelRun:
        return measure_generic(self, frames, driver)

    def xsk(self, frames: int) -> KernelRun:
        from pyxdp.xsk.linux import LinuxXskSocket  # noqa: F811 (the runtime import)
        from pyxdp.xsk.native import RxdropThread, rxdrop_drain
        from pyxdp.xsk.umem import Umem
        coll = self._veth1("xsk", REDIRECT_XSK, "native")
        sock = self._xsk
        if sock is None:
            umem = self._stack.enter_context(Umem(2 * RING, 2048))
            sock = self._xsk = self._stack.enter_context(LinuxXskSocket(
                "veth1", 0, umem, mode="copy", fill_size=RING, comp_size=64, rx_size=RING,
                tx_size=0))
            coll.maps["xsks"][0] = sock.fd
            sock.fill()
            rxdrop_drain(sock)  # compiles the user loop now, not while frames arrive
        gen = self._coll("redirect", REDIRECT_DEVMAP)
        gen.maps["tx_port"][0] = self.veth0
        user = RxdropThread(sock)  # xdpsock's rx_drop, machine code, its own thread
        try:
            base = user.packets
            t0 = time.perf_counter()
            self._live(gen, frames, self.veth0)
            got, t1 = _settle(lambda: user.packets)
        finally:
            user.stop()
        return KernelRun(frames, got - base, t1 - t0)



def _two_cpus() -> tuple[int, int]:
    """(the CPU the sender runs on, the remote CPU whose kthread delivers)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise PyxdpError("cpumap to a remote CPU needs two CPUs; this process may use "
                         f"{len(cpus)}")
    return cpus[0], cpus[1]


# -----------------------------------------------------------------------------------------
# Generic XDP on veth, driven as fast as this machine can
# -----------------------------------------------------------------------------------------

def measure_generic(lp: LinuxPaths, frames: int, driver: str = GENERIC_DRIVER, *,
                    mode: str = "generic") -> KernelRun:
    """``frames`` sent into veth0 by ``driver``; what veth1's skb-mode program counted
    (``mode="native"``: the same program attached natively, on the same driver: what
    Linux's own native/generic ratio is measured with).

    ``"live"``: live-frames ``bpf_redirect_map`` through a devmap out of veth0.
    veth's ``ndo_xdp_xmit`` needs the peer's NAPI, which exists without a
    native program when GRO is on (``veth_gro_requested``): the frames sit in
    veth1's ptr_ring, its NAPI builds skbs (``veth_xdp_rcv``), GRO hands them
    to ``__netif_receive_skb``, and ``do_xdp_generic`` runs the program.
    ``"packet"``: ``sendmmsg(2)`` batches of 1024 on an AF_PACKET socket on
    veth0 with ``PACKET_QDISC_BYPASS``: ``veth_xmit`` -> ``netif_rx`` -> the
    backlog -> ``do_xdp_generic``. Frames a full ring or backlog refused are
    not counted.
    """
    if driver == "live" and lp.gro_error:
        raise PyxdpError(f"the live driver needs veth1's NAPI: {lp.gro_error}")
    if mode not in ("generic", "native"):
        raise ValueError(f"mode {mode!r}: 'generic' or 'native'")
    coll = lp._veth1(mode, COUNT_DROP, mode)
    counts = coll.maps["counts"]

    def counted() -> int:
        return int(sum(counts[0]))

    before = counted()
    t0 = time.perf_counter()
    if driver == "live":
        gen = lp._coll("redirect", REDIRECT_DEVMAP)
        gen.maps["tx_port"][0] = lp.veth0
        lp._live(gen, frames, lp.veth0)
    elif driver == "packet":
        _packet_send(lp, frames)
    else:
        raise ValueError(f"generic driver {driver!r}: 'live' or 'packet'")
    got, t1 = _settle(counted)
    return KernelRun(frames, got - before, t1 - t0)




def _packet_send(lp: LinuxPaths, frames: int, batch: int = 1024) -> None:
    """``frames`` copies of :data:`PACKET` out of veth0, ``batch`` per sendmmsg(2)
    (the message vector is built once; Python runs once per batch)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)

    class Iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    class Msghdr(ctypes.Structure):
        _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32),
                    ("iov", ctypes.POINTER(Iovec)), ("iovlen", ctypes.c_size_t),
                    ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                    ("flags", ctypes.c_int)]

    class Mmsghdr(ctypes.Structure):
        _fields_ = [("hdr", Msghdr), ("len", ctypes.c_uint32)]

    buf = ctypes.create_string_buffer(PACKET, len(PACKET))
    iov = Iovec(ctypes.cast(buf, ctypes.c_void_p), len(PACKET))
    msgs = (Mmsghdr * batch)()
    for m in msgs:
        m.hdr.iov = ctypes.pointer(iov)
        m.hdr.iovlen = 1
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as s:
        s.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
        s.bind(("veth0", 0))
        fd = s.fileno()
        sent = 0
        while sent < frames:
            n = libc.sendmmsg(fd, msgs, min(batch, frames - sent), 0)
            if n < 0:
                err = ctypes.get_errno()
                if err in (105, 11):  # ENOBUFS, EAGAIN: the backlog is full, go on
                    continue
                raise OSError(err, os.strerror(err), "sendmmsg")
            sent += n


# -----------------------------------------------------------------------------------------
# The namespace
# -----------------------------------------------------------------------------------------

_SIOCETHTOOL, _ETHTOOL_SGRO = 0x8946, 0x0000002C


def _set_gro(dev: str, on: bool = True) -> None:
    """``ethtool -K dev gro on``: the legacy ``ETHTOOL_SGRO`` ioctl (struct ethtool_value)."""
    import array
    import fcntl
    val = array.array("I", [_ETHTOOL_SGRO, int(on)])
    addr, _ = val.buffer_info()
    ifr = struct.pack("16sP", dev.encode(), addr).ljust(40, b"\0")  # struct ifreq, ifr_data
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s.fileno(), _SIOCETHTOOL, ifr)


# -----------------------------------------------------------------------------------------
# Entering it
# -----------------------------------------------------------------------------------------

@contextmanager
def linux_paths() -> Iterator[LinuxPaths]:
    """A fresh namespace with veth0 <-> veth1, entered by the calling thread for the body.

    veth0 holds the benchmark frame's destination address and MAC; veth1 has
    GRO on (its NAPI then takes ``ndo_xdp_xmit`` frames without a native
    program, see :func:`measure_generic`). Deleted on the way out, also on error.
    """
    name = f"pyxdp-kdp-{os.getpid()}"
    _ip("netns", "add", name)
    try:
        _ip("-n", name, "link", "add", "veth0", "address", VETH0_MAC, "type", "veth",
            "peer", "name", "veth1", "address", VETH1_MAC)
        _ip("-n", name, "addr", "add", f"{DST_IP}/24", "dev", "veth0")
        # No IPv6 on the pair: no MLD or router solicitation of the namespace's own for a
        # program that counts every frame (the generic row) to count with the benchmark's.
        subprocess.run(["ip", "netns", "exec", name, "sysctl", "-qw",
                        "net.ipv6.conf.veth0.disable_ipv6=1",
                        "net.ipv6.conf.veth1.disable_ipv6=1"],
                       check=True, capture_output=True, timeout=60)
        for dev in ("veth0", "veth1"):
            _ip("-n", name, "link", "set", dev, "up")
        with netns(name), ExitStack() as stack:
            lp = LinuxPaths(name, stack)
            try:
                _set_gro("veth1")
            except OSError as e:  # only the generic row's driver needs it
                lp.gro_error = f"GRO on veth1: {e.strerror or e}"
            try:
                yield lp
            finally:
                lp._detach_veth1()
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=60)
