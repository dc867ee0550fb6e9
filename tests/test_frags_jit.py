"""Multi-buffer frames on the JIT: the datapath runs frags frames in the same native
batches as single-buffer ones, the frags in a frag table; the native twins of
``bpf_xdp_get_buff_len``, ``bpf_xdp_load_bytes``, ``bpf_xdp_store_bytes`` and
``bpf_xdp_adjust_tail`` work across the head and the frags, and Python helpers called
from such a run see the frags as views of their pages. Every case runs on the
interpreter (the reference: ``XdpBuff`` over the same pages), on the JIT with its
twins (the Python helpers made to fail: the run must not need them) and on the JIT
with Python helpers only; the frames each stack gets must be the same, and each
host's page accounting is checked when it closes (released frags back in their
pool). ``tests/kernel/test_frags_kernel.py`` compares the datapath with Linux."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

pytest.importorskip("llvmlite")

from pyxdp.net import packets as pk  # noqa: E402
from pyxdp.net import xdp_jit  # noqa: E402
from pyxdp.net.netdevice import Host  # noqa: E402
from pyxdp.net.trace import Tracer  # noqa: E402
from pyxdp.net.xdp import XdpBuff  # noqa: E402
from pyxdp.spec import CollectionSpec  # noqa: E402
from pyxdp.testing.fragslab import SLOT0, ops_program  # noqa: E402

# A 9000-MTU veth: a frame's head holds 3520 bytes, then frags of up to 4096.
SIZES = (60, 1000, 3520, 3521, 3536, 5000, 7616, 7617, 8000, 9014)


def _frames() -> list[bytes]:
    return [pk.udp_packet(b"f", sport=1000 + i, dport=7, size=n)
            for i, n in enumerate(SIZES)]


def _run(spec: CollectionSpec, engine: str, frames: list[bytes]) -> tuple[list[bytes], int]:
    with Host(engine=engine, tracer=Tracer()) as h:
        a, b = h.veth("fj0", "fj1", mtu=9000)
        coll = h.load(spec, verify=False)
        a.attach_xdp(coll.programs["xdp_ops"])
        got: list[bytes] = []
        h.stack.on_receive(lambda batch: got.extend(batch.packets()))
        b.transmit(frames)  # one batch: short and long frames mixed
        h.run()
        return got, a.stats.xdp_drops


CASES = {
    # offsets across the head's end (3520), frag 0's end (7616), the packet's end
    "load": [("len",), ("load", 3516, 8), ("load", 3512, 16), ("load", 7610, 12),
             ("load", 7616, 4), ("load", 0, 0), ("load", 9010, 4), ("load", 9012, 4),
             ("load", 65535, 1), ("load", 65536, 1), ("load", 4, 65536)],
    "store": [("store", 3515, 10), ("store", 7612, 8), ("store", 9006, 8),
              ("store", 65536, 1), ("store", 7000, 0), ("store", 4990, 16),
              ("load", 3510, 16), ("load", 7608, 16), ("len",)],
    "shrink": [("tail", -100), ("len",), ("tail", -1500), ("len",), ("load", 3500, 16),
               ("tail", 16), ("len",), ("tail", -9000), ("tail", -2000), ("len",),
               ("tail", 8), ("len",), ("load", 1400, 16)],
    "release-all": [("tail", -1480), ("len",), ("tail", 0), ("tail", 12), ("len",),
                    ("store", 3520, 12), ("load", 3512, 16)],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_jit_twins_on_frags_match_the_interpreter(case: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    spec = ops_program(CASES[case])
    frames = _frames()
    want = _run(spec, "interp", frames)
    assert len(want[0]) == len(SIZES)
    py = _run_python_helpers(spec, frames, monkeypatch)
    # The twins alone: a Python packet helper would raise.
    for name in ("buff_len", "load_bytes", "store_bytes", "adjust_tail"):
        monkeypatch.setattr(XdpBuff, name, _refuse)
    native = _run(spec, "jit", frames)
    assert native == want
    assert py == want


def _res(pkt: bytes, k: int) -> int:
    """Op k's return value as the program left it in the packet."""
    return int.from_bytes(pkt[SLOT0 + 16 * k:SLOT0 + 16 * k + 8], "little", signed=True)


def _refuse(*args: object) -> int:
    raise AssertionError("a Python packet helper ran on the JIT")


def _run_python_helpers(spec: CollectionSpec, frames: list[bytes],
                        monkeypatch: pytest.MonkeyPatch) -> tuple[list[bytes], int]:
    """The JIT with no native helper: every helper is the Python one, over the views of
    the frame's frags the run made."""
    with monkeypatch.context() as m:
        m.setattr(xdp_jit, "NATIVE_XDP_HELPERS", {})
        return _run(spec, "jit", frames)


def test_results_are_the_kernel_rules() -> None:
    """A few of the values the cases above compare, spelled out (filter.c): the whole
    length, -EFAULT past 0xffff, -EINVAL past the end, -EOPNOTSUPP growing frags."""
    spec = ops_program([("len",), ("load", 65536, 1), ("load", 9012, 4), ("tail", 16),
                     ("load", 3516, 8)])
    got, _ = _run(spec, "jit", _frames())
    by_len = dict(zip(SIZES, got, strict=True))
    big = by_len[9014]

    assert _res(big, 0) == 9014 and len(big) == 9014
    assert _res(big, 1) == -errno.EFAULT
    assert _res(big, 2) == -errno.EINVAL
    assert _res(big, 3) == -errno.EOPNOTSUPP
    assert big[SLOT0 + 16 * 4 + 8:SLOT0 + 16 * 4 + 16] == _frames()[-1][3516:3524]
    small = by_len[1000]
    assert _res(small, 3) == 0 and len(small) == 1016  # linear: the tail grows


DYNPTR = Path(__file__).resolve().parents[1] / "samples" / "dynptr.o"


def _run_dynptr(engine: str, prog: str, args: tuple[int, ...] = ()
                ) -> tuple[list[bytes], list[int]]:
    with Host(engine=engine, tracer=Tracer()) as h:
        a, b = h.veth("fj0", "fj1", mtu=9000)
        coll = h.load(DYNPTR)
        for k, v in enumerate(args):
            coll.maps["args"][k] = v
        a.attach_xdp(coll.programs[prog])
        got: list[bytes] = []
        h.stack.on_receive(lambda batch: got.extend(batch.packets()))
        b.transmit(_frames()[1:])
        h.run()
        out = "out" if prog == "xdp_dynptr" else "ops_out"
        m = coll.maps[out]
        return got, [m[i] for i in range(12 if out == "out" else 24)]


@pytest.mark.parametrize(("prog", "args"), [
    ("xdp_dynptr", ()),
    # a window over the head's end, fills and copies across frags, then a shrink
    ("xdp_dynptr_ops", (3000, 9000, 500, 3510, 4200, 7, 0)),
    ("xdp_dynptr_ops", (100, 8000, 3000, 4000, 3700, 9, 1500)),
], ids=["slices", "ops", "ops-shrunk"])
def test_dynptrs_on_frags_in_a_jit_batch_match_the_interpreter(
        prog: str, args: tuple[int, ...]) -> None:
    """samples/dynptr.o's kfuncs (Python: slices map the frag a range lies in, reads and
    writes cross frags) in one JIT batch of short and long frames: the frames and the
    last frame's records as on the interpreter."""
    want = _run_dynptr("interp", prog, args)
    got = _run_dynptr("jit", prog, args)
    assert got == want
    assert len(got[0]) == len(SIZES) - 1


def test_pull_data_in_a_jit_batch_moves_frag_fronts_and_releases_emptied_frags(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``bpf_xdp_pull_data`` (Python; here behind helper 7) takes bytes off the front of
    the first frags and releases the ones it empties: the frag table gets each frag's
    new address, the write-back its new page offset, the emptied frag's page goes back
    to its pool; the frames as on the interpreter."""
    from pyxdp.net import filter as xfilter
    from pyxdp.vm.interpreter import Helper

    monkeypatch.setitem(xfilter.XDP_HELPERS, 7,
                        Helper(7, "get_prandom_u32", xfilter._pull_data))
    monkeypatch.setattr(xdp_jit, "NATIVE_XDP_HELPERS",
                        {k: v for k, v in xdp_jit.NATIVE_XDP_HELPERS.items() if k != 7})
    spec = ops_program([("pull", 3521), ("len",), ("load", 3516, 16), ("pull", 3600),
                     ("load", 3590, 16), ("tail", -10), ("pull", 3700), ("len",),
                     ("store", 7600, 16), ("load", 7598, 16)])
    frames = _frames()
    want = _run(spec, "interp", frames)
    got = _run(spec, "jit", frames)
    assert got == want
    assert [len(f) for f in got[0]] == [n - 10 for n in SIZES]  # every tail -10 took
    small = got[0][1]  # 1000 bytes, linear: every pull past it -EINVAL
    einval = -errno.EINVAL & 0xFFFF_FFFF  # the kfunc's int, zero-extended in r0
    assert [_res(small, k) for k in (0, 1, 3, 6, 7)] == [einval, 1000, einval, einval, 990]
    big = got[0][-1]  # 9014: 1, then 79, then 100 bytes pulled out of frag 0
    assert [_res(big, k) for k in (0, 1, 2, 3, 4, 5, 6, 7)] == [0, 9014, 0, 0, 0, 0, 0, 9004]
    assert big[SLOT0 + 16 * 2 + 8:SLOT0 + 16 * 2 + 16] == frames[-1][3516:3524]
    assert big[SLOT0 + 16 * 4 + 8:SLOT0 + 16 * 4 + 16] == frames[-1][3590:3598]
    one = got[0][3]  # 3521: its one-byte frag pulled, released, the frame linear
    assert [_res(one, k) for k in (0, 1, 7)] == [0, 3521, 3511]


@pytest.mark.parametrize("engine", ["jit", "interp"])
def test_a_frag_table_pointing_outside_its_pages_is_refused(engine: str) -> None:
    """The frag table gives native code (and the views Python helpers get) host
    addresses: a row whose frag lies outside the page range beside it is refused."""
    import numpy as np

    from pyxdp.net.prog import XdpProg
    from pyxdp.net.xdp import FragTable
    from pyxdp.vm.jit import abi

    spec = ops_program([("len",)])
    prog = XdpProg(spec.programs["xdp_ops"], {}, engine=engine)
    page = np.zeros((1, 4096), np.uint8)
    rows = np.zeros((1, abi.FRAG_WORDS), np.uint64)
    bounds = np.zeros((1, abi.MAX_FRAGS, 2), np.uint64)
    base = int(page.ctypes.data)
    rows[0, abi.FRAG_NR], rows[0, abi.FRAG_HEAD:abi.FRAG_HEAD + 2] = 1, (base + 4000, 200)
    bounds[0, 0] = (base, base + 4096)
    with pytest.raises(ValueError, match="frag"):
        prog.run_batch(np.zeros((1, 4096), np.uint8), 256, 100, frags=FragTable(rows, bounds))
    rows[0, abi.FRAG_HEAD + 1] = 96  # inside: runs
    res = prog.run_batch(np.zeros((1, 4096), np.uint8), 256, 100, frags=FragTable(rows, bounds))
    assert res.action.tolist() == [2]


def test_test_run_frags_on_the_jit_take_the_twins(monkeypatch: pytest.MonkeyPatch) -> None:
    """BPF_PROG_TEST_RUN of a frags frame on the JIT: a one-row frag table over copies of
    the run's frags (room for test_run's page of frag_size after each), the twins over
    it - growing the last frag too - and the frags as the run left them afterwards; the
    interpreter's output (tests/kernel/test_frags_kernel.py holds both to Linux)."""
    from pyxdp.collection import Collection

    ops = [("len",), ("load", 7610, 12), ("store", 3515, 10), ("tail", 100), ("len",),
           ("tail", -4500), ("len",), ("tail", 4000), ("load", 3500, 16)]
    spec = ops_program(ops)
    frames = [pk.udp_packet(b"tr", sport=4000, dport=9, size=n) for n in (1000, 9000, 12000)]
    with Collection(spec, "userspace", engine="interp") as c:
        want = [c.programs["xdp_ops"].test_run(f, data_size_out=20000) for f in frames]
    for name in ("buff_len", "load_bytes", "store_bytes", "adjust_tail"):
        monkeypatch.setattr(XdpBuff, name, _refuse)
    with Collection(spec, "userspace", engine="jit") as c:
        got = [c.programs["xdp_ops"].test_run(f, data_size_out=20000) for f in frames]
    assert [(g.retval, g.data_out) for g in got] == [(w.retval, w.data_out) for w in want]
    big = got[1].data_out
    assert [_res(big, k) for k in (0, 3, 4, 5, 6)] == [9000, 0, 9100, 0, 4600]


@pytest.mark.parametrize("mode", ["native", "generic"])
@pytest.mark.parametrize("size", [200, 9000])
def test_tail_calls_from_frags_frames_stay_native(mode: str, size: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """bpf_tail_call from an xdp.frags program into another on the JIT, over multi-buffer
    frames (a NIC's page frags, generic XDP's skb copies) and short ones, is the JIT's
    own tail call: the Python hook never runs, and the target's verdict (after its
    bpf_xdp_get_buff_len) is each frame's."""
    import dataclasses
    import struct

    from pyxdp.net import prog as progmod
    from pyxdp.net.source import TrafficGenerator
    from pyxdp.spec import BPF_F_XDP_HAS_FRAGS, MapSpec
    from pyxdp.testing.programs import asm_collection
    from pyxdp.uapi.bpf import BpfMapType
    maps = [MapSpec("jmp", int(BpfMapType.BPF_MAP_TYPE_PROG_ARRAY), 4, 4, 1)]

    def frags_prog(text: str, name: str) -> object:
        t = asm_collection(text, maps).programs["t"]
        return dataclasses.replace(t, name=name, section="xdp.frags",
                                   flags=BPF_F_XDP_HAS_FRAGS)
    spec = CollectionSpec({"a": frags_prog("r2 = map[fd:0]\nr3 = 0\ncall bpf_tail_call\n"
                                           "r0 = 2\nexit", "a"),
                           "b": frags_prog("call bpf_xdp_get_buff_len\nr0 = 1\nexit", "b")},
                          {m.name: m for m in maps}, license="GPL")  # type: ignore[dict-item]
    hooks: list[int] = []
    real = progmod.XdpProg._tail_call

    def hook(vm: object, map_addr: int, index: int) -> int | None:
        hooks.append(index)
        return real(vm, map_addr, index)  # type: ignore[arg-type]
    monkeypatch.setattr(progmod.XdpProg, "_tail_call", staticmethod(hook))
    with Host(tracer=Tracer(), engine="jit") as h:
        nic = h.add_device("eth0", mtu=9000)
        coll = h.load(spec)
        coll.maps["jmp"][0] = struct.pack("<I", coll.programs["b"].fd)
        nic.attach_xdp(coll.programs["a"], mode=mode)
        nic.rx[0].source = TrafficGenerator(packets=[pk.udp_packet(b"mb", size=size)],
                                            count=320)
        h.run()
        assert (nic.stats.xdp_drops, nic.stats.xdp_pass, hooks) == (320, 0, [])
