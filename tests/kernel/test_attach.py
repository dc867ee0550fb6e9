"""XDP on real interfaces: netlink attach/query/detach, bpf_link, traffic, live frames, CLI.

Everything happens in a network namespace this module creates
(``pyxdp-attach-<pid>``, deleted in a finalizer) holding one veth pair,
veth0 <-> veth1. Tests switch into it with setns for their duration; the
CLI runs in it through ``ip netns exec``. No packet leaves that namespace
and no interface of the host is touched.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pyxdp.asm.assembler import assemble
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import KernelError, PyxdpError
from pyxdp.kernel import prog_get_fd_by_id, prog_get_info, prog_load, prog_test_run
from pyxdp.kernel.backend import KernelProgram
from pyxdp.kernel.link import (
    XdpLink,
    obj_get,
    obj_pin,
    xdp_link_attach,
    xdp_links,
)
from pyxdp.kernel.netlink import (
    InterfaceNotFound,
    NetlinkError,
    XdpAttached,
    XdpFlag,
    ifindex_of,
    netns,
    xdp_attach,
    xdp_detach,
    xdp_query,
    xdp_query_all,
)
from pyxdp.net.packets import udp_packet
from pyxdp.uapi.bpf import BpfLinkType, BpfMapType, BpfProgType, TestRunFlag

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
NS = f"pyxdp-attach-{os.getpid()}"
MAC0 = "02:00:00:00:a0:00"
MAC1 = "02:00:00:00:a0:01"
IPPROTO_UDP = 17
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)


# --------------------------------------------------------------------------
# Fixtures: our namespace, the programs, a clean slate per test
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ns() -> Iterator[str]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 to create a network namespace")
    res = ip("netns", "add", NS)
    if res.returncode != 0:
        pytest.skip(f"cannot create a network namespace: {res.stderr.strip()}")
    try:
        for cmd in (("link", "add", "veth0", "address", MAC0, "type", "veth",
                     "peer", "name", "veth1", "address", MAC1),
                    ("link", "set", "veth0", "up"), ("link", "set", "veth1", "up")):
            res = ip("-n", NS, *cmd)
            assert res.returncode == 0, res.stderr
        # No IPv6 autoconfiguration chatter on the pair: only our frames.
        for dev in ("veth0", "veth1"):
            subprocess.run(["ip", "netns", "exec", NS, "sysctl", "-qw",
                            f"net.ipv6.conf.{dev}.disable_ipv6=1"], capture_output=True,
                           timeout=60)
        yield NS
    finally:
        ip("netns", "del", NS)


@pytest.fixture
def inns(ns: str) -> Iterator[None]:
    """The test body runs inside our namespace; every XDP program is gone afterwards."""
    with netns(ns):
        try:
            yield
        finally:
            for dev in ("veth0", "veth1"):
                # A link names its device by ifindex only, which other namespaces
                # reuse: release only links holding a program attached here.
                held = set(xdp_query(dev).programs.values())
                for info in xdp_links(dev):
                    if info.prog_id in held:
                        with XdpLink.from_id(info.id) as link:
                            link.detach()
                xdp_detach(dev)


@pytest.fixture(scope="module")
def xdp1() -> Iterator[Collection]:
    with Collection(load_collection_spec(SAMPLES / "xdp1.o"), "kernel") as coll:
        yield coll


@pytest.fixture(scope="module")
def xdp2() -> Iterator[Collection]:
    with Collection(load_collection_spec(SAMPLES / "xdp2.o"), "kernel") as coll:
        yield coll


def kprog(coll: Collection, name: str) -> KernelProgram:
    handle = coll.programs[name].handle
    assert isinstance(handle, KernelProgram)
    return handle


@pytest.fixture
def p1(xdp1: Collection) -> KernelProgram:
    return kprog(xdp1, "xdp_prog1")


@pytest.fixture
def p2(xdp2: Collection) -> KernelProgram:
    return kprog(xdp2, "xdp_prog2")


# --------------------------------------------------------------------------
# Netlink attach / query / detach
# --------------------------------------------------------------------------

def ip_link_show(dev: str) -> str:
    res = ip("-n", NS, "link", "show", "dev", dev)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize(("mode", "attached", "ip_word"), [
    ("generic", XdpAttached.XDP_ATTACHED_SKB, "xdpgeneric"),
    ("skb", XdpAttached.XDP_ATTACHED_SKB, "xdpgeneric"),
    ("native", XdpAttached.XDP_ATTACHED_DRV, "xdp"),
])
def test_attach_query_detach(inns: None, p1: KernelProgram, mode: str,
                             attached: XdpAttached, ip_word: str) -> None:
    assert xdp_query("veth1").attached == XdpAttached.XDP_ATTACHED_NONE
    xdp_attach("veth1", p1, mode=mode)
    q = xdp_query("veth1")
    assert q.attached == attached
    assert q.prog_id == p1.id
    assert q.ifname == "veth1" and q.ifindex == ifindex_of("veth1")
    assert q.programs == {"native" if mode == "native" else "generic": p1.id}
    assert q.prog_id_in(mode) == p1.id
    # iproute2 reads the same dump independently.
    shown = ip_link_show("veth1")
    assert f" {ip_word} " in shown and f"prog/xdp id {p1.id} " in shown
    # The dump of every interface agrees; veth0 has nothing.
    by_name = {x.ifname: x for x in xdp_query_all()}
    assert by_name["veth1"] == q and by_name["veth0"].mode is None
    assert xdp_detach("veth1") == [q.mode]
    assert xdp_query("veth1").attached == XdpAttached.XDP_ATTACHED_NONE
    assert "prog/xdp" not in ip_link_show("veth1")


def test_ifindex_accepted_and_kernel_default_mode(inns: None, xdp1: Collection,
                                                  p1: KernelProgram) -> None:
    # No mode flag: the kernel picks native for a driver with ndo_bpf (veth has it).
    xdp_attach(ifindex_of("veth1"), p1.fd)
    assert xdp_query("veth1").mode == "native"
    # A collection's Program stands for its kernel program.
    xdp_attach("veth1", xdp1.programs["xdp_prog1"], mode="native", expected_fd=p1)
    assert xdp_query("veth1").prog_id == p1.id


def test_update_if_noexist_gives_ebusy(inns: None, p1: KernelProgram,
                                       p2: KernelProgram) -> None:
    xdp_attach("veth1", p1, mode="native")
    with pytest.raises(NetlinkError) as ei:
        xdp_attach("veth1", p2, mode="native", flags=XdpFlag.XDP_FLAGS_UPDATE_IF_NOEXIST)
    assert ei.value.errno == errno.EBUSY
    assert ei.value.extack == "XDP program already attached"
    assert "XDP program already attached" in str(ei.value)
    # Without the flag the program is replaced in place.
    xdp_attach("veth1", p2, mode="native")
    assert xdp_query("veth1").drv_prog_id == p2.id


@pytest.mark.parametrize(("first", "second"), [("generic", "native"), ("native", "generic")])
def test_native_and_generic_are_exclusive(inns: None, p1: KernelProgram, first: str,
                                          second: str) -> None:
    xdp_attach("veth1", p1, mode=first)
    with pytest.raises(NetlinkError) as ei:
        xdp_attach("veth1", p1, mode=second)
    assert ei.value.errno == errno.EEXIST
    assert ei.value.extack == "Native and generic XDP can't be active at the same time"
    assert xdp_query("veth1").programs == {first: p1.id}


def test_replace_checks_the_expected_program(inns: None, p1: KernelProgram,
                                             p2: KernelProgram) -> None:
    # Expecting "no program" (-1) while none is attached: the attach goes through.
    xdp_attach("veth1", p1, mode="native", expected_fd=-1)
    for wrong in (p2.fd, -1):
        with pytest.raises(NetlinkError) as ei:
            xdp_attach("veth1", p2, mode="native", expected_fd=wrong)
        assert ei.value.errno == errno.EEXIST
        assert ei.value.extack == "Active program does not match expected"
    assert xdp_query("veth1").prog_id == p1.id
    xdp_attach("veth1", p2, mode="native", expected_fd=p1)
    assert xdp_query("veth1").prog_id == p2.id
    # Detach guarded the same way.
    with pytest.raises(NetlinkError) as ei:
        xdp_detach("veth1", mode="native", expected_fd=p1)
    assert ei.value.errno == errno.EEXIST
    xdp_detach("veth1", mode="native", expected_fd=p2)
    assert xdp_query("veth1").mode is None


@pytest.mark.parametrize("flags", [
    XdpFlag.XDP_FLAGS_REPLACE,  # REPLACE without IFLA_XDP_EXPECTED_FD
    XdpFlag.XDP_FLAGS_SKB_MODE | XdpFlag.XDP_FLAGS_DRV_MODE,  # two modes
    1 << 5,  # a bit outside XDP_FLAGS_MASK
])
def test_bad_flags_give_einval(inns: None, p1: KernelProgram, flags: int) -> None:
    with pytest.raises(NetlinkError) as ei:
        xdp_attach("veth1", p1, flags=flags)
    assert ei.value.errno == errno.EINVAL


def test_detach_one_mode_and_empty_mode(inns: None, p1: KernelProgram) -> None:
    xdp_attach("veth1", p1, mode="generic")
    # The kernel's own rule: detaching a mode with no program is a no-op.
    assert xdp_detach("veth1", mode="native") == ["native"]
    assert xdp_query("veth1").programs == {"generic": p1.id}
    assert xdp_detach("veth1", mode="skb") == ["generic"]
    assert xdp_detach("veth1") == []


def test_attachment_outlives_every_descriptor(inns: None) -> None:
    with Collection(load_collection_spec(SAMPLES / "xdp1.o"), "kernel") as coll:
        prog = kprog(coll, "xdp_prog1")
        prog_id = prog.id
        xdp_attach("veth0", prog, mode="native")
    assert prog.closed
    assert xdp_query("veth0").prog_id == prog_id
    with prog_get_fd_by_id(prog_id) as fd:  # still loaded: the attachment holds it
        assert fd.fd >= 0
    xdp_detach("veth0")


def test_interface_names_resolve_or_fail_clearly(inns: None, p1: KernelProgram) -> None:
    assert ifindex_of("veth0") == socket.if_nametoindex("veth0")
    with pytest.raises(InterfaceNotFound) as ei:
        xdp_attach("pyxdp-nope0", p1)
    assert str(ei.value) == "pyxdp-nope0: no such interface"
    assert isinstance(ei.value, KernelError) and ei.value.errno == errno.ENODEV
    with pytest.raises(InterfaceNotFound):
        xdp_query(1_000_000)


def test_not_an_xdp_program_is_refused(inns: None) -> None:
    insns = assemble("r0 = 0\nexit")
    with prog_load(BpfProgType.BPF_PROG_TYPE_SOCKET_FILTER, insns, "GPL") as fd:
        with pytest.raises(NetlinkError) as ei:
            xdp_attach("veth1", fd, mode="generic")
    assert ei.value.errno == errno.EINVAL


# --------------------------------------------------------------------------
# bpf_link
# --------------------------------------------------------------------------

def test_link_attach_update_detach(inns: None, p1: KernelProgram, p2: KernelProgram) -> None:
    with xdp_link_attach("veth1", p1, mode="native") as link:
        info = link.info()
        assert info.type == BpfLinkType.BPF_LINK_TYPE_XDP
        assert (info.prog_id, info.ifindex) == (p1.id, ifindex_of("veth1"))
        assert link.ifindex == ifindex_of("veth1")
        assert xdp_query("veth1").drv_prog_id == p1.id
        assert [x.id for x in xdp_links("veth1") if x.prog_id == p1.id] == [link.id]
        # The link owns the mode: netlink can neither replace nor detach it.
        for op in (lambda: xdp_attach("veth1", p2, mode="native"),
                   lambda: xdp_detach("veth1", mode="native")):
            with pytest.raises(NetlinkError) as ei:
                op()
            assert ei.value.errno == errno.EBUSY
            assert ei.value.extack == "Can't replace active BPF XDP link"
        # A second link on the same mode is refused too.
        with pytest.raises(KernelError) as ki:
            xdp_link_attach("veth1", p2, mode="native")
        assert ki.value.errno == errno.EBUSY
        # BPF_LINK_UPDATE: the old program must match when given.
        with pytest.raises(KernelError) as ki:
            link.update(p2, old_prog=p2)
        assert ki.value.errno == errno.EPERM
        link.update(p2, old_prog=p1)
        assert link.prog_id == p2.id and xdp_query("veth1").prog_id == p2.id
        link.update(p1)
        assert xdp_query("veth1").prog_id == p1.id
        # BPF_LINK_DETACH: the program goes, the descriptor stays, defunct.
        link.detach()
        assert xdp_query("veth1").mode is None
        assert link.info().ifindex == 0
        with pytest.raises(KernelError) as ki:
            link.update(p2)
        assert ki.value.errno == errno.ENOLINK
    assert link.closed


def test_closing_an_unpinned_link_detaches(inns: None, p1: KernelProgram) -> None:
    link = xdp_link_attach("veth1", p1, mode="generic")
    assert xdp_query("veth1").skb_prog_id == p1.id
    other = XdpLink.from_id(link.id)  # a second descriptor keeps it alive
    link.close()
    assert xdp_query("veth1").skb_prog_id == p1.id
    other.close()
    assert xdp_query("veth1").mode is None


def test_link_refuses_netlink_attached_mode_and_bad_flags(inns: None, p1: KernelProgram,
                                                          p2: KernelProgram) -> None:
    xdp_attach("veth1", p1, mode="native")
    with pytest.raises(KernelError) as ki:
        xdp_link_attach("veth1", p2, mode="native")
    assert ki.value.errno == errno.EBUSY
    xdp_detach("veth1")
    # Only mode bits may be set in a link's flags.
    with pytest.raises(KernelError) as ki:
        xdp_link_attach("veth1", p1, flags=XdpFlag.XDP_FLAGS_UPDATE_IF_NOEXIST)
    assert ki.value.errno == errno.EINVAL


@pytest.fixture
def bpffs(tmp_path: Path) -> Iterator[Path]:
    """A private bpf filesystem mounted for one test (the host's /sys/fs/bpf is left alone)."""
    where = tmp_path / "bpffs"
    where.mkdir()
    res = subprocess.run(["mount", "-t", "bpf", "bpf", str(where)], capture_output=True,
                         text=True, timeout=60)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a bpf filesystem: {res.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True, timeout=60)


def test_pinned_link_survives_close(inns: None, p1: KernelProgram, bpffs: Path) -> None:
    path = str(bpffs / "link")
    with xdp_link_attach("veth1", p1, mode="native") as link:
        link.pin(path)
    assert xdp_query("veth1").prog_id == p1.id  # the pin holds the link
    with XdpLink.from_pinned(path) as again:
        assert again.prog_id == p1.id
        again.detach()
    os.unlink(path)
    assert xdp_query("veth1").mode is None
    # A program pinned and fetched back is the same program, and not a link.
    obj_pin(p1, str(bpffs / "prog"))
    with obj_get(str(bpffs / "prog")) as fd:
        assert fd.kind == "prog"
        assert prog_get_info(fd).id == p1.id
    with pytest.raises(PyxdpError, match="not a link"):
        XdpLink.from_pinned(str(bpffs / "prog"))


# --------------------------------------------------------------------------
# Traffic through the veth pair
# --------------------------------------------------------------------------

def _frame(marker: bytes) -> bytes:
    return udp_packet(marker, src_mac=MAC0, dst_mac=MAC1, src_ip="10.77.0.1",
                      dst_ip="10.77.0.2", sport=4000, dport=4001, pad=True)


def _send(frames: list[bytes]) -> None:
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as tx:
        tx.bind(("veth0", 0))
        for f in frames:
            tx.send(f)


def _received(rx: socket.socket, marker: bytes, wait: float, expect: int | None = None) -> int:
    """Frames carrying ``marker`` that reached veth1's taps within ``wait`` seconds
    (stops early once ``expect`` arrived)."""
    got = 0
    deadline = time.monotonic() + wait
    while (left := deadline - time.monotonic()) > 0 and got != expect:
        rx.settimeout(left)
        try:
            data, addr = rx.recvfrom(65535)
        except TimeoutError:
            break
        if addr[2] != PACKET_OUTGOING and marker in data:
            got += 1
    return got


def _wait_for(pred: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


@pytest.mark.parametrize("mode", ["generic", "native"])
def test_traffic_is_counted_and_dropped(inns: None, xdp1: Collection, mode: str) -> None:
    rxcnt = xdp1.maps["rxcnt"]
    assert rxcnt.spec.type == BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY
    n = 7
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL)) as rx:
        rx.bind(("veth1", 0))
        # XDP runs before the packet taps: with xdp1 attached nothing reaches rx.
        before = rxcnt.sum(IPPROTO_UDP)
        xdp_attach("veth1", kprog(xdp1, "xdp_prog1"), mode=mode)
        marker = f"pyxdp-{mode}-{os.getpid()}".encode()
        _send([_frame(marker)] * n)
        assert _wait_for(lambda: rxcnt.sum(IPPROTO_UDP) == before + n), \
            (rxcnt.sum(IPPROTO_UDP), before)
        assert _received(rx, marker, 0.3) == 0
        # Detached: the same frames are delivered and no longer counted.
        xdp_detach("veth1")
        marker2 = marker + b"-after"
        _send([_frame(marker2)] * n)
        assert _received(rx, marker2, 5.0, expect=n) == n
        assert rxcnt.sum(IPPROTO_UDP) == before + n


# --------------------------------------------------------------------------
# BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES
# --------------------------------------------------------------------------

def _xdp_md(ingress_ifindex: int) -> bytes:
    # struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
    # egress_ifindex; data_end must equal the packet size.
    return struct.pack("=6I", 0, 0, 0, ingress_ifindex, 0, 0)


def test_live_frames_tx_reach_the_peer(inns: None, xdp1: Collection) -> None:
    """XDP_TX in live mode transmits on the ingress veth; xdp1 on the peer counts them."""
    rxcnt = xdp1.maps["rxcnt"]
    xdp_attach("veth1", kprog(xdp1, "xdp_prog1"), mode="native")
    frame = _frame(b"live")
    ctx = bytearray(_xdp_md(ifindex_of("veth0")))
    struct.pack_into("=I", ctx, 4, len(frame))
    before = rxcnt.sum(IPPROTO_UDP)
    frames = 100
    with prog_load(BpfProgType.BPF_PROG_TYPE_XDP, assemble("r0 = 3\nexit"), "GPL",
                   name="tx") as tx:
        res = prog_test_run(tx, frame, ctx_in=bytes(ctx), repeat=frames,
                            flags=TestRunFlag.BPF_F_TEST_XDP_LIVE_FRAMES, batch_size=16)
    assert res.retval == 0 and res.data_out == b"" and res.ctx_out is None
    assert _wait_for(lambda: rxcnt.sum(IPPROTO_UDP) == before + frames), \
        (rxcnt.sum(IPPROTO_UDP) - before, frames)


def test_live_frames_argument_rules(inns: None) -> None:
    frame = _frame(b"rules")
    with prog_load(BpfProgType.BPF_PROG_TYPE_XDP, assemble("r0 = 1\nexit"), "GPL",
                   name="drop") as drop:
        live = TestRunFlag.BPF_F_TEST_XDP_LIVE_FRAMES
        # repeat counts frames; the default batch (0 -> 64) and the 256 maximum run.
        for batch in (0, 1, 256):
            res = prog_test_run(drop, frame, repeat=1000, flags=live, batch_size=batch)
            assert res.retval == 0 and res.data_out == b""
        with pytest.raises(KernelError) as ki:
            prog_test_run(drop, frame, repeat=10, flags=live, batch_size=257)
        assert ki.value.errno == errno.E2BIG
        with pytest.raises(KernelError) as ki:  # batch_size without live mode
            prog_test_run(drop, frame, repeat=10, batch_size=64)
        assert ki.value.errno == errno.EINVAL
        # A data_size_out asked for in live mode is not passed on (the kernel
        # refuses output buffers there).
        res = prog_test_run(drop, frame, repeat=10, flags=live, data_size_out=4096,
                            ctx_size_out=24)
        assert res.data_out == b"" and res.ctx_out is None


# --------------------------------------------------------------------------
# The CLI: pyxdp load | unload | status, run inside the namespace
# --------------------------------------------------------------------------

def pyxdp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", NS, sys.executable, "-m", "pyxdp.cli.main",
                           *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


def _one_error_line(res: subprocess.CompletedProcess[str], prefix: str) -> str:
    assert res.returncode == 2, res
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]


def _status_rows(text: str) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in text.splitlines()[4:]:
        parts = line.split()
        if parts:
            rows[parts[0]] = parts[1:]
    return rows


def test_cli_load_status_unload(inns: None) -> None:
    xdp1 = str(SAMPLES / "xdp1.o")
    res = pyxdp("load", "veth1", xdp1)
    assert res.returncode == 0, res.stderr
    q = xdp_query("veth1")
    assert q.mode == "native"  # xdp-loader's default mode
    assert res.stdout.strip() == (f"veth1: xdp_prog1 (id {q.prog_id}, tag "
                                  f"{_tag(q.prog_id)}) attached in native mode")

    res = pyxdp("status")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("CURRENT XDP PROGRAM STATUS:")
    rows = _status_rows(res.stdout)
    assert rows["veth1"] == ["native", str(q.prog_id), "xdp_prog1", _tag(q.prog_id), "netlink"]
    assert rows["veth0"] == ["<No", "XDP", "program", "loaded!>"]
    assert "lo" in rows
    res = pyxdp("status", "veth1")
    assert list(_status_rows(res.stdout)) == ["veth1"]

    # Never replaces by accident; -F does.
    line = _one_error_line(pyxdp("load", "veth1", str(SAMPLES / "xdp2.o")),
                           "pyxdp: load: veth1: ")
    assert "EBUSY" in line and f"native id {q.prog_id}" in line and "--force" in line
    line = _one_error_line(pyxdp("load", "-m", "skb", "veth1", xdp1), "pyxdp: load: veth1: ")
    assert "Native and generic XDP can't be active at the same time" in line
    res = pyxdp("load", "-F", "veth1", str(SAMPLES / "xdp2.o"))
    assert res.returncode == 0, res.stderr
    new = xdp_query("veth1").prog_id
    assert new != q.prog_id and "xdp_prog2" in res.stdout

    _one_error_line(pyxdp("unload", "veth1", "-i", str(q.prog_id)),
                    f"pyxdp: unload: veth1: program {q.prog_id} is not attached")
    res = pyxdp("unload", "veth1", "-i", str(new))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"veth1: program {new} detached (native mode)"
    assert xdp_query("veth1").mode is None
    _one_error_line(pyxdp("unload", "veth1", "-a"),
                    "pyxdp: unload: veth1: no XDP program attached")


def _tag(prog_id: int) -> str:
    with prog_get_fd_by_id(prog_id) as fd:
        return prog_get_info(fd).tag_hex


def test_cli_skb_mode_and_unload_all(inns: None) -> None:
    res = pyxdp("load", "-m", "skb", "-s", "xdp", "veth0", str(SAMPLES / "xdp2.o"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.rstrip().endswith("attached in skb mode")
    assert xdp_query("veth0").mode == "generic"
    assert _status_rows(pyxdp("status", "veth0").stdout)["veth0"][0] == "skb"
    res = pyxdp("unload", "veth0", "-a")
    assert res.returncode == 0, res.stderr
    assert xdp_query("veth0").mode is None


@pytest.mark.parametrize(("args", "prefix"), [
    (("load", "pyxdp-nope0", "samples/xdp1.o"), "pyxdp: load: pyxdp-nope0: no such interface"),
    (("unload", "pyxdp-nope0", "-a"), "pyxdp: unload: pyxdp-nope0: no such interface"),
    (("status", "pyxdp-nope0"), "pyxdp: status: pyxdp-nope0: no such interface"),
    (("load", "veth1", "samples/nonexistent.o"), "pyxdp: load: "),
    (("load", "-n", "nope", "veth1", "samples/xdp1.o"),
     "pyxdp: load: samples/xdp1.o: no program named 'nope'"),
    (("load", "-s", "xdp/devmap", "veth1", "samples/redirect_map.o"),
     "pyxdp: load: samples/redirect_map.o: program xdp_redirect_map_egress"),
    (("unload", "veth1"), "pyxdp: one of the arguments -a/--all -i/--id is required"),
])
def test_cli_errors_are_one_line(inns: None, args: tuple[str, ...], prefix: str) -> None:
    _one_error_line(pyxdp(*args), prefix)


def test_cli_status_shows_links_and_unload_detaches_them(inns: None,
                                                        p1: KernelProgram) -> None:
    with xdp_link_attach("veth1", p1, mode="native") as link:
        rows = _status_rows(pyxdp("status", "veth1").stdout)
        assert rows["veth1"][:3] == ["native", str(p1.id), "xdp_prog1"]
        assert rows["veth1"][-2:] == ["bpf_link", str(link.id)]
        res = pyxdp("unload", "veth1", "-a")
        assert res.returncode == 0, res.stderr
        assert link.info().ifindex == 0  # BPF_LINK_DETACH went through
        assert xdp_query("veth1").mode is None


def test_cli_pin_path(inns: None, bpffs: Path) -> None:
    pins = bpffs / "xdp1"
    res = pyxdp("load", "-p", str(pins), "veth1", str(SAMPLES / "xdp1.o"))
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in pins.iterdir()) == ["rxcnt", "xdp_prog1"]
    with obj_get(str(pins / "rxcnt")) as m:
        assert m.kind == "map"
    # Pins outside a bpf filesystem are refused, and nothing is left attached.
    xdp_detach("veth1")
    line = _one_error_line(pyxdp("load", "-p", str(bpffs.parent / "plain"), "veth1",
                                 str(SAMPLES / "xdp1.o")), "pyxdp: load: ")
    assert "not on a bpf filesystem" in line
    assert xdp_query("veth1").mode is None
    assert not (bpffs.parent / "plain").exists()


def test_cli_needs_root(inns: None) -> None:
    """Without privileges ``load`` says so in one line (the child drops to nobody)."""
    from pyxdp.cli.main import build_parser, main

    # Once as root: the modules the parser imports lazily (and argparse's gettext,
    # locale) are loaded, since nobody cannot read this interpreter's library.
    build_parser().format_help()

    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 70
        try:
            os.close(rfd)
            # pytest has replaced sys.stderr; the CLI writes there.
            sys.stderr = open(wfd, "w", closefd=False)
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            code = main(["load", "veth1", str(SAMPLES / "xdp1.o")])
            sys.stderr.flush()
        finally:
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as r:
        err = r.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 2, err
    assert err.startswith("pyxdp: load: needs root: ") and err.count("\n") == 1, err
    assert xdp_query("veth1").mode is None


def test_netns_switches_the_thread_and_back(ns: str) -> None:
    def here() -> int:
        return os.stat("/proc/thread-self/ns/net").st_ino

    home = here()
    with netns(ns):
        assert here() == os.stat(f"/run/netns/{ns}").st_ino != home
        assert socket.if_nametoindex("veth1") > 0
    assert here() == home
    with pytest.raises(KernelError) as ki:
        with netns("pyxdp-no-such-netns"):
            pass
    assert ki.value.errno == errno.ENOENT
