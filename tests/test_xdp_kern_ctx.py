"""bpf_cast_to_kern_ctx and bpf_rdonly_cast on pyxdp (samples/kern_ctx.c records what
the program read); tests/kernel/test_kern_ctx_kernel.py holds the same runs to Linux."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyxdp.btf import vmlinux
from pyxdp.btf.btf import BtfKind
from pyxdp.btf.struct_access import StructWalkError, member_offset, struct_access
from pyxdp.collection import Collection
from pyxdp.errors import MemoryFault, UnsupportedHelper
from pyxdp.net import xdp_kern_ctx
from pyxdp.net.fib import PROC_NET_INIT_INO
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.net.xdp import PKT_BASE, RxQueue, XdpBuff
from pyxdp.net.xdp_kern_ctx import KERN_BASE, KernCtx
from pyxdp.testing.verifier_cases import VerifierCase
from pyxdp.vm.memory import Memory

KERN_CTX = Path(__file__).resolve().parents[1] / "samples" / "kern_ctx.o"
ENGINES = ["interp", "jit"] if jit_available() else ["interp"]


def _expected(pkt: bytes) -> list[int]:
    # test_run: lo (ifindex 1) queue 0, a 4096-byte frame with 256 bytes of headroom
    return [1, 0, 4096, len(pkt), 256, 1, 1, 1, pkt[0], int.from_bytes(pkt[12:14], "big"),
            0, pkt[13], 258, 1, 65536, int.from_bytes(b"lo", "little"), PROC_NET_INIT_INO]


@pytest.fixture
def shipped_btf(monkeypatch: pytest.MonkeyPatch) -> None:
    """No kernel BTF: the BTF pyxdp ships lays the structs out and types the loads."""
    monkeypatch.setattr(vmlinux, "kernel_btf_index", lambda: None)
    monkeypatch.setattr(xdp_kern_ctx, "_LAYOUT", [])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("btf", ["kernel", "shipped"])
def test_sample_reads_the_kernel_structs(engine: str, btf: str,
                                         request: pytest.FixtureRequest) -> None:
    if btf == "shipped":
        request.getfixturevalue("shipped_btf")
    elif vmlinux.kernel_btf_index() is None:
        pytest.skip("no kernel BTF here (the shipped case covers it)")
    with Collection.load(KERN_CTX, engine=engine) as c:
        for size in (0, 300):
            pkt = udp_packet(bytes(i & 0xFF for i in range(size)))
            r = c.programs["xdp_kern_ctx"].test_run(pkt)
            assert r.fault is None and r.retval == 2
            assert [c.maps["out"][i] for i in range(17)] == _expected(pkt)


def test_unverified_program_faults_where_linux_reads_zero() -> None:
    """Without the verifier no load is known to be a probe load: the read at the bad
    address faults instead of giving 0 (the kernel structs' own fields still read)."""
    with Collection.load(KERN_CTX, engine="interp", verify=False) as c:
        r = c.programs["xdp_kern_ctx"].test_run(udp_packet(b"x" * 20))
        assert r.fault is not None and "out-of-bounds read of 1 bytes at 0x24" in r.fault
        assert c.maps["out"][0] == 1 and c.maps["out"][9] == 0x0800


# rxq->reg_state: a field Linux has a value for and pyxdp has not - a probe load, 0
_REG_STATE = """call KFUNC(bpf_cast_to_kern_ctx)
r0 = *(u64 *)(r0 +32)
r0 = *(u32 *)(r0 +12)
exit"""


@pytest.mark.parametrize("engine", ENGINES)
def test_unmapped_kernel_field_reads_zero(engine: str) -> None:
    spec = VerifierCase("reg_state", _REG_STATE, None).spec()
    with Collection(spec, engine=engine) as c:
        r = c.programs["reg_state"].test_run(udp_packet(b""))
        assert r.fault is None and r.retval == 0


def test_image_follows_the_buffer_and_the_egress_device() -> None:
    xdp = XdpBuff.prepare(udp_packet(b"abc"), rxq=RxQueue(7, 3))
    xdp.egress_ifindex = 9
    kern = KernCtx(xdp)
    xdp.kern = kern
    mem = Memory()
    mem.reset(list(kern.regions))
    btf = vmlinux.core_target()
    buff = btf.find("xdp_buff", BtfKind.STRUCT)
    rxq = btf.find("xdp_rxq_info", BtfKind.STRUCT)
    txq = btf.find("xdp_txq_info", BtfKind.STRUCT)
    dev = btf.find("net_device", BtfKind.STRUCT)
    assert buff and rxq and txq and dev

    def field(tid: int, name: str, base: int) -> int:
        at = member_offset(btf, tid, name)
        assert at is not None
        return mem.load(base + at[0], at[1])

    assert field(buff, "data", KERN_BASE) == PKT_BASE + 256
    assert xdp.adjust_head(4) == 0
    assert field(buff, "data", KERN_BASE) == PKT_BASE + 260  # kept in step
    rxq_at = field(buff, "rxq", KERN_BASE)
    assert field(rxq, "queue_index", rxq_at) == 3
    assert field(dev, "ifindex", field(rxq, "dev", rxq_at)) == 7
    assert field(dev, "ifindex", field(txq, "dev", field(buff, "txq", KERN_BASE))) == 9
    with pytest.raises(MemoryFault):  # not a field pyxdp has a value for
        mem.load(rxq_at + 12, 4)


def test_struct_walk_through_the_shipped_btf() -> None:
    btf = vmlinux.BtfIndex.open(vmlinux.SHIPPED_BTF)
    dev = btf.find("net_device", BtfKind.STRUCT)
    buff = btf.find("xdp_buff", BtfKind.STRUCT)
    assert dev and buff
    assert struct_access(btf, buff, 32, 8).name == "xdp_rxq_info"
    assert struct_access(btf, buff, 0, 8).kind == "mem"
    with pytest.raises(StructWalkError, match="access beyond struct xdp_buff at off 56"):
        struct_access(btf, buff, 56, 4)
    # a struct the shipped BTF only declares: a clear load error, no guessed verdict
    assert struct_access(btf, dev, 8, 8).kind == "fwd"


def test_walk_into_a_declared_struct_is_a_load_error(shipped_btf: None) -> None:
    spec = VerifierCase("ndo", """call KFUNC(bpf_cast_to_kern_ctx)
r0 = *(u64 *)(r0 +32)
r0 = *(u64 *)(r0 +0)
r0 = *(u64 *)(r0 +8)
r0 = 2
exit""", None).spec()
    with pytest.raises(UnsupportedHelper, match="struct net_device_ops"):
        Collection(spec, engine="interp")


@pytest.mark.parametrize("engine", ENGINES)
def test_on_a_pyxdp_device(engine: str) -> None:
    """On a pyxdp NIC (NAPI polls; the JIT's native batches too): the receiving device's
    ifindex and queue, and (a Host's devices are in its namespace's Fib) its name, MTU
    and namespace."""
    from pyxdp.net.netdevice import Host

    with Host(engine=engine) as h:
        a, b = h.veth("veth0", "veth1")
        coll = h.load(KERN_CTX)
        a.attach_xdp(coll.programs["xdp_kern_ctx"])
        pkt = udp_packet(b"y" * 60)
        b.transmit([pkt] * 3)
        assert h.run() == 3 and not a.faults
        out = [coll.maps["out"][i] for i in range(17)]
        # the host's namespace has the device: its MTU, name and namespace show
        assert (out[0], out[1], out[14], out[15], out[16]) == (
            a.ifindex, 0, a.mtu, int.from_bytes(b"veth0", "little"), PROC_NET_INIT_INO)
        assert out[3] == len(pkt) and out[6] == out[13] == 1 and out[12] == out[4] + 2


@pytest.mark.skipif(not jit_available(), reason="the JIT needs llvmlite")
def test_jit_batch_runs_no_python_per_packet() -> None:
    """On the JIT the image is built once per batch (per device, queue and egress device)
    and written per packet by native code, after a native bpf_xdp_adjust_head too: the
    Python kfuncs and XdpBuff's edge moves run at most once in a batch, and the records
    equal the interpreter's - for frames of one device and of alternating ones."""
    import sys
    from types import FrameType

    import numpy as np

    from pyxdp.net.xdp import XdpBuff as Buff

    watched = {xdp_kern_ctx._cast_to_kern_ctx.__code__, xdp_kern_ctx._rdonly_cast.__code__,
               Buff.adjust_head.__code__, KernCtx.sync.__code__}
    pkt = udp_packet(bytes(range(90)))
    n = 64
    frames = np.zeros((n, 4096), np.uint8)
    frames[:, 256:256 + len(pkt)] = np.frombuffer(pkt, np.uint8)
    for ifindex, queue in ((1, 0), (np.array([1, 5] * (n // 2)), np.arange(n) % 3)):
        got = {}
        for engine in ENGINES:
            with Collection.load(KERN_CTX, engine=engine) as c:
                prog = c.programs["xdp_kern_ctx"].handle
                calls = 0

                def prof(frame: FrameType, event: str, arg: object) -> None:
                    nonlocal calls
                    if event == "call" and frame.f_code in watched:
                        calls += 1
                f = frames.copy()
                sys.setprofile(prof)
                try:
                    out = prog.run_batch(f, 256, len(pkt), rx_queue=queue,
                                         ingress_ifindex=ifindex)
                finally:
                    sys.setprofile(None)
                got[engine] = ([c.maps["out"][i] for i in range(17)], out.action.tolist(),
                               out.data_off.tolist(), f.tobytes() == frames.tobytes())
                if engine == "jit" and isinstance(ifindex, int):
                    # a batch of 8 calls as much Python as one of 64: none per packet
                    once, calls = calls, 0
                    sys.setprofile(prof)
                    try:
                        prog.run_batch(frames[:8].copy(), 256, len(pkt))
                    finally:
                        sys.setprofile(None)
                    assert calls == once <= 4
        assert got.get("jit", got["interp"]) == got["interp"]
        assert got["interp"][0][12] == 258 and set(got["interp"][1]) == {2}


@pytest.mark.parametrize("engine", ENGINES)
def test_image_kept_across_batches_follows_the_namespace(engine: str) -> None:
    """Batches sharing a namespace: the JIT keeps its image between them, and builds it
    again when the device's MTU or name changed (both engines read the new ones)."""
    import numpy as np

    from pyxdp.net.fib import Fib
    from pyxdp.vm.helpers import RunContext

    pkt = udp_packet(b"z" * 30)
    frames = np.zeros((4, 4096), np.uint8)
    frames[:, 256:256 + len(pkt)] = np.frombuffer(pkt, np.uint8)
    ctx = RunContext()
    ctx.fib = Fib()
    with Collection.load(KERN_CTX, engine=engine) as c:
        prog = c.programs["xdp_kern_ctx"].handle
        seen = []
        for mtu, name in ((None, None), (1500, None), (1500, "lo9")):
            if mtu is not None:
                ctx.fib.devices[1].mtu = mtu
            if name is not None:
                ctx.fib.devices[1].name = name
            prog.run_batch(frames.copy(), 256, len(pkt), ctx=ctx)
            seen.append((c.maps["out"][14], c.maps["out"][15]))
        assert seen == [(65536, int.from_bytes(b"lo", "little")),
                        (1500, int.from_bytes(b"lo", "little")),
                        (1500, int.from_bytes(b"lo9", "little"))]
