"""Multi-buffer XDP (frags) on veth: pyxdp's datapath against Linux's.

Two veth pairs with a 9000-byte MTU; ``samples/frags.o`` (``SEC("xdp.frags")``)
on veth0 and a frags-aware XDP_PASS program on the three other ends (a
program that is not frags-aware cannot be attached there: the peer's MTU
needs frags, ERANGE). Frames of 1000, 5000 and 9014 bytes to each of the
sample's ports: PASS, DROP, TX with a store into the last frag, a shrinking
``adjust_tail``, a growing one (-EOPNOTSUPP on veth frags), a devmap
redirect. What must agree with Linux: the frames each device's stack got
(bytes, order), the sample's stats (``bpf_xdp_get_buff_len``, the head
length ``data_end - data``, ``bpf_xdp_load_bytes`` past the head, helper
errors) and the tracepoint counts - on the native loop's host, the Python
reference path and the interpreter.
"""

from __future__ import annotations

import dataclasses
import errno
import struct
from collections.abc import Callable, Mapping
from functools import cache

import pytest

from pyxdp.asm.assembler import assemble
from pyxdp.collection import Collection
from pyxdp.net import packets as pk
from pyxdp.spec import BPF_F_XDP_HAS_FRAGS, CollectionSpec, ProgramSpec
from pyxdp.testing import vethlab
from pyxdp.testing.vethlab import Attach, LinkSpec, Scenario

pytestmark = pytest.mark.kernel

DEVS = ("veth0", "veth1", "veth2", "veth3")
PAIRS = (("veth0", "veth1"), ("veth2", "veth3"))
SIZES = (1000, 5000, 9014)
PORTS = range(9001, 9007)
PASS_FRAGS = CollectionSpec(
    programs={"xdp_pass": ProgramSpec(name="xdp_pass", section="xdp.frags",
                                      insns=assemble("r0 = 2\nexit"), license="GPL",
                                      flags=BPF_F_XDP_HAS_FRAGS)},
    maps={}, license="GPL", name="xdp_pass_frags")


def _tx_port(colls: Mapping[str, Collection], ifindex_of: Callable[[str], int]) -> None:
    colls["frags.o"].maps["tx_port"][0] = ifindex_of("veth2")


def scenario() -> Scenario:
    mac = {d: vethlab.lab_mac(PAIRS, d) for d in DEVS}
    frames = tuple(("veth0", pk.udp_packet(b"frags", sport=2000 + i, dport=port, size=size,
                                           src_mac=mac["veth1"], dst_mac=mac["veth0"]))
                   for port in PORTS for i, size in enumerate(SIZES))
    return Scenario(
        "frags", pairs=PAIRS,
        attach=(Attach("veth0", "frags.o", "xdp_frags"),
                *(Attach(d, PASS_FRAGS, "xdp_pass", collection=f"pass@{d}")
                  for d in DEVS[1:])),
        traffic=frames, setup=_tx_port, maps=("stats",), pass_unattached=False,
        links=tuple(LinkSpec(d, mtu=9000) for d in DEVS))


@cache
def _kernel() -> vethlab.LabResult:
    return vethlab.run_kernel(scenario())


def _stats(res: vethlab.LabResult) -> dict[int, tuple[int, ...]]:
    raw = res.maps["stats"]
    return {struct.unpack("<I", k)[0]: struct.unpack("<QQQQq", v) for k, v in raw.items()}


# veth0's stack gets 9 frames: PASS (3), the shrink (3: 1000 bytes cannot shrink by
# 1000, -EINVAL), the failed grow on frags (1000 grows). Positions 4 and 5 are the
# shrunk frags frames.
SHRUNK = (4, 5)


def _without_shrunk(res: vethlab.LabResult) -> vethlab.LabResult:
    rx = dict(res.rx)
    rx["veth0"] = tuple(f for i, f in enumerate(rx["veth0"]) if i not in SHRUNK)
    return dataclasses.replace(res, rx=rx)


def test_linux_builds_frags_as_documented() -> None:
    """The facts the datapath models, read off Linux: a 9014-byte frame's head is
    3520 bytes, the program sees the whole length, the tail of a veth frags frame
    cannot grow, the stack and a TX/redirect target get the whole frame."""
    k = _kernel()
    st = _stats(k)
    # Slot = port - 9000; each holds the last (9014-byte) frame's values.
    assert st[1][1:3] == (9014, 3520)
    assert st[4][1] == 8014 and st[4][4] == 0
    assert st[5][4] == -errno.EOPNOTSUPP
    assert st[3][4] == 0
    assert [len(f) for f in k.rx["veth1"]] == list(SIZES)  # XDP_TX'd back
    assert all(f.endswith(b"FRAGSTX!") for f in k.rx["veth1"])
    assert [len(f) for f in k.rx["veth3"]] == list(SIZES)  # the devmap redirect
    assert [len(f) for f in k.rx["veth0"]] == [1000, 5000, 9014, 1000, 5000, 9014,
                                               1016, 5000, 9014]


def test_linux_veth_pass_after_a_frags_shrink_keeps_the_length() -> None:
    """Linux 6.18's veth (``veth_xdp_rcv_skb``) sets ``skb->data_len`` from the
    shrunk frags but leaves ``skb->len``: the stack gets a frame of the original
    length whose linear part runs past the head - the ``skb_shared_info`` bytes
    (``nr_frags`` at +2) where the packet's byte 3520 was. pyxdp delivers the
    frame the program left (4000 and 8014 bytes, the original's prefix)."""
    k = _kernel()
    sent = [f for _, f in scenario().traffic]
    for i, orig, nr_frags in zip(SHRUNK, sent[10:12], (1, 2), strict=True):
        got = k.rx["veth0"][i]
        assert len(got) == len(orig) and got[:3520] == orig[:3520]
        assert got[3520:3524] == bytes([0, 0, nr_frags, 0])
    mine = vethlab.run_pyxdp(scenario(), events=False)
    assert [mine.rx["veth0"][i] for i in SHRUNK] == [f[:len(f) - 1000] for f in sent[10:12]]


@pytest.mark.parametrize("mode", ["native", "python", "interp"])
def test_pyxdp_frags_match_linux(mode: str) -> None:
    sc = scenario()
    want = _kernel()
    got = vethlab.run_pyxdp(sc, events=mode == "python",
                            engine="interp" if mode == "interp" else "auto",
                            native=mode != "python")
    diffs = vethlab.lab_differences(_without_shrunk(want), _without_shrunk(got), sc)
    if mode != "python":
        diffs = [d for d in diffs if not d.startswith("events differ")]
    assert not diffs, "\n".join(diffs)
    assert _stats(got) == _stats(want)


def _cpumap_setup(colls: Mapping[str, Collection], ifindex_of: Callable[[str], int]) -> None:
    coll = colls["redirect_cpu"]
    fd = vethlab.prog_fd(coll.programs["xdp_cpumap_filter"])
    for slot, cpu in enumerate((0, 1)):
        coll.maps["cpu_map"][cpu] = {"qsize": 64, "bpf_prog": {"fd": fd}}
        coll.maps["cpus_available"][slot] = cpu
    coll.maps["cpus_count"][0] = 2


def cpumap_scenario() -> Scenario:
    """samples/redirect_cpu.o's ``xdp_redirect_cpu_proto`` loaded frags-aware on a 9000-MTU
    veth0: UDP to the CPU 1 entry, TCP to CPU 0, both entries running
    ``xdp_cpumap_filter``, which drops UDP to port 9. The xdp_frames keep their frags through the ring and the
    kthread's ``xdp_build_skb_from_frame``: veth0's stack gets them whole."""
    spec = vethlab.load_spec("redirect_cpu.o")
    # Linux 6.18 refuses (EINVAL) to load programs that share a map unless they
    # agree on frags: every program of the object is loaded frags-aware.
    spec = dataclasses.replace(spec, programs={
        n: dataclasses.replace(p, section=p.section.replace("xdp", "xdp.frags", 1),
                               flags=p.flags | BPF_F_XDP_HAS_FRAGS)
        for n, p in spec.programs.items()})
    mac = {d: vethlab.lab_mac(PAIRS[:1], d) for d in DEVS[:2]}
    kw = {"src_mac": mac["veth1"], "dst_mac": mac["veth0"]}
    frames = tuple(("veth0", f) for size in SIZES for f in (
        pk.udp_packet(b"cpu", sport=3000, dport=53, size=size, **kw),
        pk.udp_packet(b"cpu", sport=3001, dport=9, size=size, **kw),
        pk.tcp_packet(b"cpu", sport=3002, size=size, **kw)))
    return Scenario(
        "frags_cpumap", pairs=PAIRS[:1],
        attach=(Attach("veth0", spec, "xdp_redirect_cpu_proto", collection="redirect_cpu"),
                Attach("veth1", PASS_FRAGS, "xdp_pass", collection="pass@veth1")),
        traffic=frames, setup=_cpumap_setup, maps=("rx_cnt",), pass_unattached=False,
        ordered=False, links=tuple(LinkSpec(d, mtu=9000) for d in DEVS[:2]))


@pytest.mark.parametrize("mode", ["native", "python"])
def test_pyxdp_frags_through_cpumap_match_linux(mode: str) -> None:
    sc = cpumap_scenario()
    want = vethlab.run_kernel(sc)
    # Every frame but UDP/9 reaches veth0's stack, whole.
    kept = sorted(f for _, f in sc.traffic if f[36:38] != b"\0\x09")
    assert sorted(want.rx["veth0"]) == kept
    got = vethlab.run_pyxdp(sc, events=False, native=mode == "native")
    diffs = [d for d in vethlab.lab_differences(want, got, sc)
             if not d.startswith("events differ")]
    assert not diffs, "\n".join(diffs)
