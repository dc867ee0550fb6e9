"""The kernel's XDP tracepoints read back through a private tracefs instance.

Real events are generated on this machine's kernel and parsed into pyxdp's
records:

* ``BPF_PROG_TEST_RUN`` in live-frames mode: a redirect to a missing ifindex
  fires ``xdp_redirect_err`` (-EINVAL); ``XDP_TX`` becomes a redirect to the
  loopback device, which has no ``ndo_xdp_xmit`` (-EOPNOTSUPP). Live-mode
  ``XDP_ABORTED`` fires *no* ``xdp_exception`` on 6.18 (test_run's batch loop
  sends it to ``bpf_warn_invalid_xdp_action`` and drops it);
* generic XDP on ``lo`` of a private network namespace: ``XDP_ABORTED`` and
  an invalid verdict fire ``xdp_exception``;
* a veth pair and a cpumap in a private namespace: ``xdp_redirect``,
  ``xdp_devmap_xmit``, ``xdp_bulk_tx``, ``xdp_cpumap_enqueue``,
  ``xdp_cpumap_kthread``.

Tracing instances are global (every namespace's events land in them), so
events are picked by the ids of our own programs and maps or by our pid.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from pyxdp.asm.assembler import assemble
from pyxdp.cli.monitor import run as monitor_run
from pyxdp.kernel import bpf_available, prog_get_info, prog_load, prog_test_run
from pyxdp.kernel.tracefs import (
    TraceInstance,
    check_definitions,
    kernel_xdp_events,
    read_format,
    tracefs_root,
)
from pyxdp.net.trace import Tracer
from pyxdp.uapi.bpf import BpfProgType, TestRunFlag
from pyxdp.uapi.xdp_trace import (
    DEFINITIONS,
    TraceEvent,
    XdpCpumapEnqueue,
    XdpDevmapXmit,
    XdpException,
    XdpRedirect,
    XdpRedirectErr,
)

pytestmark = pytest.mark.kernel

_OK, _WHY = bpf_available()
if not _OK and not os.environ.get("CI"):
    pytest.skip(f"needs root and BPF: {_WHY}", allow_module_level=True)

LIVE = TestRunFlag.BPF_F_TEST_XDP_LIVE_FRAMES
INT_MAX = 0x7FFF_FFFF
PACKET = bytes(range(64))


@pytest.fixture(scope="module")
def root() -> str:
    return tracefs_root()  # mounts tracefs when it is missing


def _our_instances(root: str, pid: int) -> list[str]:
    stem = f"pyxdp-{pid}"
    return [n for n in os.listdir(os.path.join(root, "instances"))
            if n == stem or n.startswith(stem + "-")]


@pytest.fixture(autouse=True)
def no_leftover_instances(root: str) -> Iterator[None]:
    yield
    left = _our_instances(root, os.getpid())
    for name in left:  # never leave ring buffers allocated behind a failed test
        try:
            os.rmdir(os.path.join(root, "instances", name))
        except OSError:
            pass
    assert left == [], f"tracefs instances left behind: {left}"


def xdp_prog(text: str, name: str) -> tuple[object, int]:
    fd = prog_load(BpfProgType.BPF_PROG_TYPE_XDP, assemble(text), name=name)
    return fd, prog_get_info(fd).id


def collect(inst: TraceInstance, keep: Callable[[TraceEvent], bool], want: int,
            timeout: float = 5.0) -> list[TraceEvent]:
    got: list[TraceEvent] = []
    end = time.monotonic() + timeout
    while len(got) < want and (left := end - time.monotonic()) > 0:
        got += [e for e in inst.read(left) if keep(e)]
    return got


def missing_ifindex() -> int:
    present = {i for i, _ in socket.if_nameindex()}
    return next(i for i in range(900_000, 901_000) if i not in present)


# --------------------------------------------------------------------------- formats

def test_live_formats_equal_pyxdp_definitions(root: str) -> None:
    assert set(kernel_xdp_events(root)) == set(DEFINITIONS)
    for name, d in DEFINITIONS.items():
        live = read_format(name, root)
        assert [(f.name, f.ctype, f.offset, f.size, f.signed) for f in live.fields] == [
            (f.name, f.ctype, f.offset, f.size, f.signed) for f in d.fields], name
        assert live.print_format == d.print_format, name
    assert check_definitions(root) == {}


def test_cpumap_kthread_has_drops_between_cpu_and_processed(root: str) -> None:
    names = [f.name for f in read_format("xdp_cpumap_kthread", root).fields]
    assert names[names.index("cpu") + 1:names.index("processed")] == ["drops"]


# --------------------------------------------------------------------------- the instance

def _global_settings(root: str) -> dict[str, str]:
    files = ["tracing_on", "buffer_size_kb", "set_event", "current_tracer",
             "events/xdp/enable", "events/xdp/xdp_exception/enable", "buffer_percent"]
    out = {}
    for f in files:
        p = os.path.join(root, f)
        if os.path.exists(p):
            with open(p) as fh:
                out[f] = fh.read()
    return out


def test_instance_is_private_and_removed(root: str) -> None:
    before = _global_settings(root)
    with TraceInstance(["xdp_exception"], buffer_size_kb=256) as a, TraceInstance([]) as b:
        assert a.name == f"pyxdp-{os.getpid()}" and b.name == f"pyxdp-{os.getpid()}-2"
        assert os.path.isdir(a.path) and a.enabled == ["xdp_exception"]
        with open(os.path.join(a.path, "events/xdp/xdp_exception/enable")) as f:
            assert f.read().strip() == "1"
        with open(os.path.join(a.path, "buffer_percent")) as f:
            assert f.read().strip() == "0"
        assert a.mismatches == {}
        # A line of an enabled event that does not parse is counted, not fatal.
        a._parse(b"   x-1 [000] ..... 1.000000: xdp_exception: prog_id=zz\n", [])
        assert a.unparsed == 1 and "prog_id=zz" in a.last_unparsed
        assert _global_settings(root) == before
        a.read(0.0)  # trace_pipe opens (it may hold other processes' events)
        path = a.path
    assert not os.path.exists(path) and a.closed
    assert _global_settings(root) == before


def test_instance_removed_when_collected(root: str) -> None:
    inst = TraceInstance(["xdp_redirect_err"])
    inst.read(0.0)  # with trace_pipe open
    path = inst.path
    del inst
    import gc
    gc.collect()
    assert not os.path.exists(path)


# --------------------------------------------------------------------------- live frames

def test_redirect_to_missing_ifindex_fires_redirect_err(root: str) -> None:
    ifx = missing_ifindex()
    with TraceInstance(["xdp_redirect_err", "xdp_redirect"]) as inst:
        prog, pid = xdp_prog(f"r1 = {ifx}\nr2 = 0\ncall bpf_redirect\nexit", "trc_redir")
        prog_test_run(prog, PACKET, repeat=5, flags=LIVE)  # type: ignore[arg-type]
        got = collect(inst, lambda e: getattr(e.record, "prog_id", None) == pid, 5)
    assert len(got) == 5
    for ev in got:
        assert ev.name == "xdp_redirect_err"
        # ifindex 1: test_run's frames arrive on the loopback device's rxq.
        assert ev.record == XdpRedirectErr(pid, 4, 1, -22, ifx, INT_MAX, 0)
        assert ev.text == (f"prog_id={pid} action=REDIRECT ifindex=1 to_ifindex={ifx} "
                           f"err=-22 map_id=2147483647 map_index=0")
        assert ev.pid == threading.get_native_id()  # fired in our task's context


def test_live_xdp_tx_is_a_redirect_to_lo_refused(root: str) -> None:
    with TraceInstance(["xdp_redirect_err"]) as inst:
        prog, pid = xdp_prog("r0 = 3\nexit", "trc_tx")
        prog_test_run(prog, PACKET, repeat=2, flags=LIVE)  # type: ignore[arg-type]
        got = collect(inst, lambda e: getattr(e.record, "prog_id", None) == pid, 2)
    assert [e.record for e in got] == [XdpRedirectErr(pid, 4, 1, -95, 1, INT_MAX, 0)] * 2


def test_live_aborted_fires_no_exception(root: str) -> None:
    with TraceInstance(["xdp_exception"]) as inst:
        prog, pid = xdp_prog("r0 = 0\nexit", "trc_abort")
        prog_test_run(prog, PACKET, repeat=3, flags=LIVE)  # type: ignore[arg-type]
        got = collect(inst, lambda e: getattr(e.record, "prog_id", None) == pid, 1,
                      timeout=0.5)
    assert got == []


# --------------------------------------------------------------------------- private netns

CHILD = r'''
import ctypes, fcntl, json, os, socket, struct, subprocess, sys, time

libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(0x40000000) != 0:  # CLONE_NEWNET: a namespace of our own
    raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")

def up(name):
    s = socket.socket()
    req = struct.pack("16sH22x", name.encode(), 0)
    flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, req))[1]  # SIOCGIFFLAGS
    fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", name.encode(), flags | 1))  # IFF_UP
    s.close()

from pyxdp.asm.assembler import assemble
from pyxdp.asm.insn import ld_imm64
from pyxdp.asm.opcodes import PseudoSrc
from pyxdp.kernel import (map_create, map_get_info, map_update_elem, prog_get_info,
                          prog_load, prog_test_run)
from pyxdp.kernel.syscall import _attr, _put32, _raw
from pyxdp.uapi.bpf import BpfAttachType, BpfCmd, TestRunFlag

LIVE = TestRunFlag.BPF_F_TEST_XDP_LIVE_FRAMES
SKB_MODE, DRV_MODE = 1 << 1, 1 << 2

def link(prog, ifindex, mode):
    a = _attr(64)
    _put32(a, 0, prog.fileno()); _put32(a, 4, ifindex)
    _put32(a, 8, BpfAttachType.BPF_XDP); _put32(a, 12, mode)
    fd, err = _raw(BpfCmd.BPF_LINK_CREATE, a)
    if fd < 0:
        raise OSError(err, "BPF_LINK_CREATE")
    return fd

def prog(text, name):
    p = prog_load(6, assemble(text) if isinstance(text, str) else text, name=name)
    return p, prog_get_info(p).id

up("lo")
out = {"pid": os.getpid()}
if sys.argv[1] == "exception":
    ids = []
    for verdict in (0, 7):  # XDP_ABORTED and an invalid action
        p, pid = prog(f"r0 = {verdict}\nexit", "trc_exc")
        fd = link(p, 1, SKB_MODE)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(2):
            s.sendto(b"x" * 20, ("127.0.0.1", 9))
        s.close()
        os.close(fd)
        ids.append(pid)
    out["ids"] = ids
else:
    subprocess.run(["ip", "link", "add", "trca", "type", "veth", "peer", "name", "trcb"],
                   check=True)
    up("trca"); up("trcb")
    a, b = socket.if_nametoindex("trca"), socket.if_nametoindex("trcb")
    tx, _ = prog("r0 = 3\nexit", "trc_tx")
    pas, _ = prog("r0 = 2\nexit", "trc_pass")
    links = [link(tx, b, DRV_MODE), link(pas, a, DRV_MODE)]
    red, red_id = prog(f"r1 = {a}\nr2 = 0\ncall bpf_redirect\nexit", "trc_redir")
    prog_test_run(red, bytes(64), repeat=4, flags=LIVE)
    cm = map_create(16, 4, 4, 1)  # BPF_MAP_TYPE_CPUMAP, one entry: CPU 0
    map_update_elem(cm, struct.pack("I", 0), struct.pack("I", 64))
    insns = [*ld_imm64(1, cm.fileno(), src=PseudoSrc.BPF_PSEUDO_MAP_FD),
             *assemble("r2 = 0\nr3 = 0\ncall bpf_redirect_map\nexit")]
    cp, cp_id = prog(insns, "trc_cpu")
    prog_test_run(cp, bytes(64), repeat=5, flags=LIVE)
    time.sleep(0.3)  # let the cpumap kthread and the veth NAPI run
    for fd in links:
        os.close(fd)
    out.update(a=a, b=b, redir=red_id, cpu_prog=cp_id, cpumap=map_get_info(cm).id)
print(json.dumps(out))
'''


def in_private_netns(mode: str) -> dict[str, object]:
    res = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    out: dict[str, object] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def test_generic_xdp_aborted_and_invalid_fire_exception(root: str) -> None:
    with TraceInstance(["xdp_exception"]) as inst:
        info = in_private_netns("exception")
        ids = info["ids"]
        assert isinstance(ids, list)
        got = collect(inst, lambda e: getattr(e.record, "prog_id", None) in ids, 4)
    assert sorted(e.record for e in got) == sorted(  # type: ignore[type-var]
        [XdpException(ids[0], 0, 1)] * 2 + [XdpException(ids[1], 7, 1)] * 2)
    texts = {e.text for e in got}
    assert texts == {f"prog_id={ids[0]} action=ABORTED ifindex=1",
                     f"prog_id={ids[1]} action=0x7 ifindex=1"}
    # The counters a monitor keeps, from the kernel's events.
    t = Tracer()
    for e in got:
        t.ingest(e)
    assert t.xdp_exception.counters == {(1, 0): [2], (1, 7): [2]}


@pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2 to create a veth pair")
def test_redirect_devmap_xmit_bulk_tx_and_cpumap(root: str) -> None:
    events = ["xdp_redirect", "xdp_devmap_xmit", "xdp_bulk_tx", "xdp_cpumap_enqueue",
              "xdp_cpumap_kthread"]
    with TraceInstance(events) as inst:
        info = in_private_netns("datapath")
        got = collect(inst, lambda e: True, 10_000, timeout=1.5)
    a, redir, cpu_prog, cpumap, child = (info["a"], info["redir"], info["cpu_prog"],
                                         info["cpumap"], info["pid"])
    mine = [e for e in got if getattr(e.record, "prog_id", None) in (redir, cpu_prog)
            or getattr(e.record, "map_id", None) == cpumap or e.pid == child]
    by = {n: [e.record for e in mine if e.name == n] for n in events}
    # bpf_redirect(ifindex): to_ifindex is the target, map_id INT_MAX.
    assert by["xdp_redirect"].count(XdpRedirect(redir, 4, 1, 0, a, INT_MAX, 0)) == 4
    # The flush hands the bulk to the veth's ndo_xdp_xmit.
    assert XdpDevmapXmit(1, 4, a, 0, 4, 0) in by["xdp_devmap_xmit"]
    # The peer's XDP_TX bulk (its first bulk may predate the peer's XDP and fail).
    assert any(r.sent == 4 for r in by["xdp_bulk_tx"])  # type: ignore[union-attr]
    # cpumap: the redirects name the map, the flush enqueues 5 frames to CPU 0,
    # whose kthread processes them.
    assert by["xdp_redirect"].count(XdpRedirect(cpu_prog, 4, 1, 0, 0, cpumap, 0)) == 5
    enq = by["xdp_cpumap_enqueue"]
    assert len(enq) == 1 and enq[0] == XdpCpumapEnqueue(cpumap, 4, enq[0].cpu, 0, 5, 0)
    kth = [r for r in by["xdp_cpumap_kthread"] if r.processed]  # type: ignore[union-attr]
    assert sum(r.processed for r in kth) == 5  # type: ignore[union-attr]
    assert all(r.cpu == 0 for r in kth)  # type: ignore[union-attr]


# --------------------------------------------------------------------------- monitor

def _cells(line: str) -> list[str]:
    """A monitor row's label and cells: the sparkline left out, split where the layout
    puts two spaces or more."""
    return re.split(r"\s{2,}", re.sub("[\u2581-\u2588]+", "", line).strip())


def test_monitor_cli_kernel_prints_a_table(root: str) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "pyxdp.cli.main", "monitor", "--kernel",
                             "--count", "1", "-i", "0.5", "-v"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("pyxdp monitor (kernel) interval 1: 0.5")
    labels = [_cells(ln)[0] for ln in lines[1:]]
    for row in ("Summary", "redirect_err total", "xdp_exception total",
                "xdp_bulk_tx (XDP_TX)", "cpumap enqueue", "cpumap kthread", "devmap_xmit"):
        assert row in labels
    assert f"instances/pyxdp-{proc.pid}" in err
    assert _our_instances(root, proc.pid) == []  # removed on exit


def test_monitor_counts_kernel_events(root: str) -> None:
    ifx = missing_ifindex()
    prog, _ = xdp_prog(f"r1 = {ifx}\nr2 = 0\ncall bpf_redirect\nexit", "trc_mon")
    buf = io.StringIO()
    th = threading.Thread(target=monitor_run, kwargs=dict(
        kernel=True, count=1, interval=1.0, extended=True, out=buf))
    th.start()
    while th.is_alive():  # traffic for the whole interval
        prog_test_run(prog, PACKET, repeat=8, flags=LIVE)  # type: ignore[arg-type]
        time.sleep(0.05)
    th.join()
    table = {c[0]: " ".join(c[1:]).split()
             for c in map(_cells, buf.getvalue().splitlines()[1:])}
    assert float(table["redirect_err total"][0].replace(",", "")) > 0
    assert any(k.startswith("ifindex 1 EINVAL") for k in table)
