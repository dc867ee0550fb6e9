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
from functools import cache

import pytest

from pyxdp.net import packets as pk
from pyxdp.testing import vethlab
from pyxdp.testing.fragslab import (
    PASS_FRAGS,
    SIZES,
    frags_broadcast,
    frags_cpumap,
    frags_devmap_hash_entry,
    frags_generic,
    frags_veth,
    ops_program,
)

pytestmark = pytest.mark.kernel


@cache
def _kernel() -> vethlab.LabResult:
    return vethlab.run_kernel(frags_veth())


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
    sent = [f for _, f in frags_veth().traffic]
    for i, orig, nr_frags in zip(SHRUNK, sent[10:12], (1, 2), strict=True):
        got = k.rx["veth0"][i]
        assert len(got) == len(orig) and got[:3520] == orig[:3520]
        assert got[3520:3524] == bytes([0, 0, nr_frags, 0])
    mine = vethlab.run_pyxdp(frags_veth(), events=False)
    assert [mine.rx["veth0"][i] for i in SHRUNK] == [f[:len(f) - 1000] for f in sent[10:12]]


@pytest.mark.parametrize("mode", ["native", "native-burst", "python", "interp"])
def test_pyxdp_frags_match_linux(mode: str) -> None:
    """``native-burst``: the frames go to veth0 as one list, so its native loop meets
    long skbs behind short ones and copies them into its pool itself
    (``skb_pp_cow_data``) before the Python poll runs the program on them."""
    sc = frags_veth()
    want = _kernel()
    got = vethlab.run_pyxdp(sc, events=mode == "python",
                            engine="interp" if mode == "interp" else "auto",
                            native=mode != "python", burst=mode == "native-burst")
    diffs = vethlab.lab_differences(_without_shrunk(want), _without_shrunk(got), sc)
    if mode != "python":
        diffs = [d for d in diffs if not d.startswith("events differ")]
    if mode == "native-burst":  # the flushes: Linux's lab polls per frame, pyxdp per list
        flushes = ("xdp_bulk_tx", "xdp_devmap_xmit")
        diffs = [d for d in diffs if not d.startswith(tuple(f"trace {f}:" for f in flushes))]
        assert [got.trace[f].sums for f in flushes] == [want.trace[f].sums for f in flushes]
    assert not diffs, "\n".join(diffs)
    assert _stats(got) == _stats(want)


@pytest.mark.parametrize("mode", ["native", "python"])
def test_pyxdp_frags_through_cpumap_match_linux(mode: str) -> None:
    sc = frags_cpumap()
    want = vethlab.run_kernel(sc)
    # Every frame but UDP/9 reaches veth0's stack, whole.
    kept = sorted(f for _, f in sc.traffic if f[36:38] != b"\0\x09")
    assert sorted(want.rx["veth0"]) == kept
    got = vethlab.run_pyxdp(sc, events=False, native=mode == "native")
    diffs = [d for d in vethlab.lab_differences(want, got, sc)
             if not d.startswith("events differ")]
    assert not diffs, "\n".join(diffs)


@pytest.mark.parametrize("mode", ["native", "python"])
@pytest.mark.parametrize("mtu4", [9000, 1500])
def test_pyxdp_frags_broadcast_matches_linux(mtu4: int, mode: str) -> None:
    """``BPF_F_BROADCAST`` of frags frames to veth2 and veth4 (``mtu4``): Linux's
    ``dev_map_enqueue_multi`` clones for every valid target but the last, and a
    frags frame with two valid targets fails (-EOPNOTSUPP): the same frames, events
    and trace counts on pyxdp."""
    sc = frags_broadcast(mtu4)
    want = vethlab.run_kernel(sc)
    assert len(want.events_named("xdp_redirect_err")) == (2 if mtu4 == 9000 else 0)
    got = vethlab.run_pyxdp(sc, native=mode == "native")
    diffs = vethlab.lab_differences(want, got, sc)
    assert not diffs, "\n".join(diffs)


@pytest.mark.parametrize("mode", ["native", "python"])
def test_pyxdp_frags_to_a_devmap_hash_entry_without_frags_match_linux(mode: str) -> None:
    """A devmap_hash entry whose program is not frags-aware, under a frags-aware
    redirecting program: Linux runs it on the multi-buffer frames' head and sends them
    whole (pyxdp dropped them: its conversion after the entry program took the whole
    length for the head's); the same frames, stamps, tracepoints and counters."""
    sc = frags_devmap_hash_entry()
    want = vethlab.run_kernel(sc)
    stamps = [(len(f), struct.unpack_from("<IH", f, 6)) for f in want.rx["veth3"]]
    assert stamps == [(1000, (1000, 1000)), (5000, (3520, 5000)), (9014, (3520, 9014))]
    got = vethlab.run_pyxdp(sc, events=mode == "python", native=mode == "native")
    diffs = [d for d in vethlab.lab_differences(want, got, sc, links=True)
             if not (mode == "native" and d.startswith("events differ"))]
    assert not diffs, "\n".join(diffs)


@cache
def _kernel_generic(frags: bool) -> vethlab.LabResult:
    return vethlab.run_kernel(frags_generic(frags))


@pytest.mark.parametrize(("frags", "engine"), [(True, "auto"), (False, "interp"),
                                               (False, "auto"), (True, "interp")],
                         ids=["frags-jit", "linear-interp", "linear-jit", "frags-interp"])
def test_pyxdp_generic_jumbo_skbs_match_linux(frags: bool, engine: str) -> None:
    """Generic XDP with skbs up to 9014 bytes (``netif_skb_check_for_xdp``): a frags-aware
    program sees a 3520-byte head and frags (a shrink, a grow refused with
    -EOPNOTSUPP, TX and a devmap redirect of the whole skb), any other program the
    skb linearised (every byte in ``data``..``data_end``, the tail able to grow).
    Frames, stats and tracepoints as Linux's."""
    sc = frags_generic(frags)
    want = _kernel_generic(frags)
    head = 3520 if frags else 9014
    assert all(v[2] == head for v in _stats(want).values())  # the last, 9014-byte frame's
    got = vethlab.run_pyxdp(sc, engine=engine)
    diffs = vethlab.lab_differences(want, got, sc)
    assert not diffs, "\n".join(diffs)
    assert _stats(got) == _stats(want)


# The packet helpers' offsets against Linux: each op's return value (and a load's bytes)
# written into the head, which the stack then gets (the program passes every frame).
# Across the head's end (3520), frag 0's end (7616) and the frame's; -EFAULT past
# 0xffff, -EINVAL past the end; a frags frame's tail cannot grow on veth (-EOPNOTSUPP).
HELPER_OPS = [("len",), ("load", 3516, 8), ("load", 3512, 16), ("load", 7610, 12),
              ("load", 9010, 4), ("load", 9012, 4), ("load", 65536, 1),
              ("store", 3515, 10), ("store", 7612, 8), ("store", 9006, 8), ("store", 65536, 1),
              ("load", 3510, 16), ("load", 7608, 16), ("tail", 16), ("len",)]
HELPER_SIZES = (1000, 3520, 3521, 3536, 5000, 7616, 7617, 8000, 9014)


def _helpers_scenario() -> vethlab.Scenario:
    pairs = (("veth0", "veth1"),)
    mac = {d: vethlab.lab_mac(pairs, d) for d in ("veth0", "veth1")}
    spec = ops_program(HELPER_OPS)  # tests/test_frags_jit.py's program
    frames = tuple(("veth0", pk.udp_packet(b"ops", sport=3000 + i, dport=9, size=n,
                                           src_mac=mac["veth1"], dst_mac=mac["veth0"]))
                   for i, n in enumerate(HELPER_SIZES))
    return vethlab.Scenario(
        "frags-helpers", pairs=pairs,
        attach=(vethlab.Attach("veth0", spec, "xdp_ops", collection="ops"),
                vethlab.Attach("veth1", PASS_FRAGS, "xdp_pass", collection="pass@veth1")),
        traffic=frames, pass_unattached=False,
        links=tuple(vethlab.LinkSpec(d, mtu=9000) for d in ("veth0", "veth1")))


@pytest.mark.parametrize("engine", ["auto", "interp"])
def test_packet_helpers_on_frags_match_linux(engine: str) -> None:
    """bpf_xdp_get_buff_len, _load_bytes, _store_bytes and _adjust_tail on frames of one
    page and of a head and frags, at offsets across every boundary: the frames veth0's
    stack gets (every result in them) as Linux's - on the JIT's native twins over the
    frag table and on the interpreter."""
    sc = _helpers_scenario()
    want = vethlab.run_kernel(sc)
    assert [len(f) for f in want.rx["veth0"]] == [1016] + list(HELPER_SIZES[1:])
    got = vethlab.run_pyxdp(sc, events=False, engine=engine)
    diffs = [d for d in vethlab.lab_differences(want, got, sc)
             if not d.startswith("events differ")]
    assert not diffs, "\n".join(diffs)


# Under BPF_PROG_TEST_RUN a frags frame's tail may grow: test_run's rx queue has a page
# of frag_size (the last frag grows into it, -EINVAL past it).
TEST_RUN_OPS = [("len",), ("load", 3516, 8), ("load", 7610, 12), ("load", 8990, 16),
                ("store", 3515, 10), ("store", 7612, 8), ("load", 3510, 16), ("tail", 100),
                ("len",), ("tail", -300), ("len",), ("tail", 4000), ("tail", -5000), ("len",),
                ("load", 3500, 16), ("tail", 20), ("len",)]


@pytest.mark.parametrize("engine", ["jit", "interp"])
def test_packet_helpers_under_test_run_with_frags_match_linux(engine: str) -> None:
    """The same helpers through BPF_PROG_TEST_RUN with inputs up to three pages of frags
    (Linux builds a 3520-byte head and page frags for an xdp.frags program): the
    verdict and the output frame (every result in it) as Linux's - on the JIT its
    native twins over a frag table of the run's own frags."""
    from pyxdp.collection import Collection

    spec = ops_program(TEST_RUN_OPS)
    with Collection(spec, "kernel") as k, Collection(spec, "userspace", engine=engine) as u:
        for n in (1000, 3520, 3600, 7616, 8000, 9000, 12000):
            data = pk.udp_packet(b"tr", sport=4000, dport=9, size=n)
            got, want = (c.programs["xdp_ops"].test_run(data, data_size_out=n + 8192)
                         for c in (u, k))
            assert (got.retval, got.data_out) == (want.retval, want.data_out), n
