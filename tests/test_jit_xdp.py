"""Every sample XDP program on the JIT (native helpers and maps, single runs and batches)
against the reference interpreter, over pyxdp.net.packets.corpus().

* single runs: BPF_PROG_TEST_RUN (a batch of one frame natively) on two collections of
  the same object with the same map contents, one per engine, packet after packet (maps
  carry over): retval, data_out, ctx_out, redirect, fault report (with the C source
  line), trace lines, and at the end every map;
* batches: the corpus laid out in one frames array (some frames with metadata), run by
  :meth:`XdpProg.run_batch` in one native call and by the interpreter frame by frame:
  verdicts, buffer edges, frames' bytes, fault reports, redirect records and maps;
* a few targeted cases: faults in the middle of a batch, LRU eviction and map-full
  fallbacks, tail calls, the GIL, unchecked mode.

The clock is the only thing the engines may disagree on: bpf_ktime_get_ns reads
CLOCK_MONOTONIC natively and through time.monotonic_ns in Python, at different
instants, so bytes a program fills from it are masked in single runs; batches run with
a counting clock (which the native code hands to Python) and compare everything.
"""

from __future__ import annotations

import itertools
import random
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("llvmlite")

from pyxdp.asm import opcodes as op  # noqa: E402
from pyxdp.asm.assembler import assemble  # noqa: E402
from pyxdp.asm.insn import Instruction  # noqa: E402
from pyxdp.collection import Collection  # noqa: E402
from pyxdp.elf import load_collection_spec  # noqa: E402
from pyxdp.errors import MemoryFault, ProgramFault, TestRunTruncated  # noqa: E402
from pyxdp.maps import create_map  # noqa: E402
from pyxdp.net.packets import DEFAULT_DST_IP4, corpus, ip4, udp_packet  # noqa: E402
from pyxdp.net.prog import XdpBatchResult, XdpProg  # noqa: E402
from pyxdp.net.test_run import TestRunEnv  # noqa: E402
from pyxdp.net.xdp import XdpBuff  # noqa: E402
from pyxdp.net.xdp_jit import XdpJit  # noqa: E402
from pyxdp.spec import CollectionSpec, MapRef, ProgramSpec  # noqa: E402
from pyxdp.testing.conformance import vector_files  # noqa: E402
from pyxdp.testing.fuzz_maps import snapshot  # noqa: E402
from pyxdp.uapi.bpf import BpfAttachType, BpfMapType, XdpAction  # noqa: E402
from pyxdp.userspace import UserspaceBackend  # noqa: E402
from pyxdp.vm.helpers import RunContext  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
OBJECTS = sorted(p.stem for p in SAMPLES.glob("*.o"))
SEED = 3

Populate = Callable[[Collection, random.Random], None]


def _counters(name: str, n: int) -> Populate:
    def populate(coll: Collection, rng: random.Random) -> None:
        m = coll.maps[name]
        for k in rng.sample(range(n), min(n, 8)):
            m.update(k, [rng.randrange(1 << 20) for _ in range(m.nr_cpus)] if m.percpu
                     else rng.randrange(1 << 20))
    return populate


def _redirect_map(coll: Collection, rng: random.Random) -> None:
    _counters("rxcnt", 1)(coll, rng)
    coll.maps["tx_port"].update(0, struct.pack("<Ii", 1, 0))


def _redirect_cpu(coll: Collection, rng: random.Random) -> None:
    for i, cpu in enumerate((0, 1)):
        coll.maps["cpus_available"].update(i, cpu)
        if rng.random() < 0.8:
            coll.maps["cpu_map"].update(cpu, struct.pack("<Ii", 192, 0))
    coll.maps["cpus_count"].update(0, 2)


def _lb(coll: Collection, rng: random.Random) -> None:
    vips, backends = coll.maps["vips"], coll.maps["backends"]
    for n in range(4):
        backends.update(n, ip4(f"10.1.0.{n + 1}") + bytes([2, 0, 0, 0, 0, n + 1]) + b"\0\0")
    # The corpus sends to DEFAULT_DST_IP4 (UDP 5678 / TCP 80) and ICMP.
    for port, proto in ((5678, 17), (80, 6), (0, 1)):
        vips.update(ip4(DEFAULT_DST_IP4) + struct.pack(">H", port) + bytes([proto, 0]),
                    struct.pack("<II", rng.randrange(2), rng.randrange(1, 3)))


def _nothing(coll: Collection, rng: random.Random) -> None:
    del coll, rng


POPULATE: dict[str, Populate] = {
    "xdp1": _counters("rxcnt", 256), "xdp2": _counters("rxcnt", 256),
    "redirect_map": _redirect_map, "redirect_cpu": _redirect_cpu, "lb": _lb,
}
# Bytes a program fills with bpf_ktime_get_ns(): (map name, value offset, length).
TIME_FIELDS = {"lb": [("conns", 8, 8)], "meta": [("last_meta", 8, 8)]}
# Program arrays hold programs; perf event arrays without rings attached hold nothing.
_UNCOMPARABLE = {int(BpfMapType.BPF_MAP_TYPE_PROG_ARRAY),
                 int(BpfMapType.BPF_MAP_TYPE_PERF_EVENT_ARRAY),
                 int(BpfMapType.BPF_MAP_TYPE_XSKMAP)}  # (no readable values)


def _programs(spec: CollectionSpec, test_run: bool) -> list[str]:
    egress = (BpfAttachType.BPF_XDP_DEVMAP, BpfAttachType.BPF_XDP_CPUMAP)
    # Programs calling metadata kfuncs run only bound to a device: test_xdp_metadata.py.
    return [n for n, p in spec.programs.items() if p.userspace and p.autoload and not p.kfuncs
            and (not test_run or p.expected_attach_type not in egress)]


CASES = [(s, p) for s in OBJECTS for p in _programs(load_collection_spec(SAMPLES / f"{s}.o"),
                                                     True)]
BATCH_CASES = [(s, p) for s in OBJECTS
               for p in _programs(load_collection_spec(SAMPLES / f"{s}.o"), False)]


def _dump(coll: Collection, sample: str, mask: bool) -> dict[str, Any]:
    masks = TIME_FIELDS.get(sample, []) if mask else []
    out: dict[str, Any] = {}
    for name, m in coll.maps.items():
        h: Any = m.handle
        if m.spec.type in _UNCOMPARABLE:
            continue
        if m.spec.type == BpfMapType.BPF_MAP_TYPE_RINGBUF:
            recs = [bytes(r) if isinstance(r, (bytes, bytearray, memoryview)) else r
                    for r in h.records()]
            if mask and sample == "sampler":
                recs = [r[:8] + bytes(8) + r[16:] if isinstance(r, bytes) else r for r in recs]
            out[name] = recs
            continue
        entries = {}
        for key in m.raw_keys():
            raw = h.lookup(key)
            if raw is None:
                continue
            value = bytearray(raw)
            for mname, off, length in masks:
                if mname == name:
                    value[off:off + length] = bytes(length)
            entries[key] = bytes(value)
        out[name] = entries
        # The storage layout too: slots, hashes, LRU stamps, free lists.
        for (_, attr), a in snapshot({name: h}).items():
            if attr != "value_data" and attr != "entries":
                out[f"{name}.{attr}"] = a.tobytes()
    return out


def _named(coll: Collection, redirect: dict[str, Any] | None) -> dict[str, Any] | None:
    """A redirect record with the map's name for its id (ids differ between collections)."""
    if redirect is None:
        return None
    names = {getattr(m.handle, "id", None): name for name, m in coll.maps.items()}
    return {**redirect, "map_id": names.get(redirect["map_id"], redirect["map_id"])}


def _xdp_md(size: int, meta: int = 0) -> bytes:
    return struct.pack("<6I", meta, size, 0, 0, 0, 0)


def _test_run(coll: Collection, prog: str, pkt: bytes, n: int) -> tuple[Any, ...]:
    ctx = n % 3 == 1
    meta = 8 if n % 6 == 4 else 0
    data = bytes(range(meta)) + pkt
    try:
        r = coll.programs[prog].test_run(data, ctx_in=_xdp_md(len(data), meta) if ctx or meta
                                         else None, ctx_size_out=24 if ctx or meta else 0)
    except TestRunTruncated as e:
        return ("ENOSPC", e.data_size)
    except Exception as e:  # a refused input must be refused the same way
        return (type(e).__name__, getattr(e, "errno", None), str(e))
    out = r.data_out
    if prog == "xdp_meta_producer" and r.retval == XdpAction.XDP_PASS and \
            len(out) >= 16 + len(pkt):
        out = out[:8] + bytes(8) + out[16:]  # struct pkt_meta's rx_time_ns
    return (r.retval, out, r.ctx_out, _named(coll, r.redirect), r.fault, r.trace)


@pytest.mark.parametrize(("sample", "prog"), CASES, ids=[f"{s}-{p}" for s, p in CASES])
def test_single_runs_match_interpreter(sample: str, prog: str) -> None:
    spec = load_collection_spec(SAMPLES / f"{sample}.o")
    packets = corpus(SEED)
    verify = sample != "unchecked"  # the engines must agree on refused programs too
    # Both on CPU 0: test_run otherwise runs on the caller's CPU, which may change between
    # the two runs of a packet (per-CPU maps, round-robin programs would then differ).
    with Collection(spec, UserspaceBackend(engine="interp", env=TestRunEnv(cpu=0)),
                    verify=verify) as ref, \
            Collection(spec, UserspaceBackend(engine="jit", env=TestRunEnv(cpu=0)),
                       verify=verify) as jit:
        for coll in (ref, jit):
            POPULATE.get(sample, _nothing)(coll, random.Random(SEED))
        assert _dump(jit, sample, True) == _dump(ref, sample, True)
        for n, (name, pkt) in enumerate(packets):
            want = _test_run(ref, prog, pkt, n)
            got = _test_run(jit, prog, pkt, n)
            assert got == want, f"packet {name!r} ({len(pkt)} bytes)"
        assert _dump(jit, sample, True) == _dump(ref, sample, True)


FRAME = 4096
HEADROOM = 256


def _batch_frames(packets: list[tuple[str, bytes]]) -> tuple[np.ndarray, list[int], list[int],
                                                             list[int], list[int]]:
    fits = [p for _, p in packets if len(p) <= FRAME - HEADROOM - 320]
    frames = np.zeros((len(fits), FRAME), np.uint8)
    off, ln, meta, rxq = [], [], [], []
    for i, p in enumerate(fits):
        m = 8 if i % 5 == 3 else 0
        frames[i, HEADROOM - m:HEADROOM] = np.arange(m, dtype=np.uint8) + 0x40
        frames[i, HEADROOM:HEADROOM + len(p)] = np.frombuffer(p, np.uint8)
        off.append(HEADROOM)
        ln.append(len(p))
        meta.append(m)
        rxq.append(i % 2 if i % 7 else 0)
    return frames, off, ln, meta, rxq


def _counting_clock() -> Callable[[], int]:
    ticks = itertools.count(5_000_000_000, 1234)
    return lambda: next(ticks)


def _batch_outcome(coll: Collection, res: XdpBatchResult, frames: np.ndarray
                   ) -> tuple[Any, ...]:
    faults = []
    for i in range(len(res)):
        e = res.fault(i)
        faults.append(None if e is None else (type(e).__name__, e.pc, str(e)))
    return (res.action.tolist(), res.data_off.tolist(), res.data_len.tolist(),
            res.meta_len.tolist(), faults,
            [_named(coll, res.redirect(i)) for i in range(len(res))], frames.tobytes(), res.done)


@pytest.mark.parametrize(("sample", "prog"), BATCH_CASES,
                         ids=[f"{s}-{p}" for s, p in BATCH_CASES])
def test_batches_match_interpreter(sample: str, prog: str) -> None:
    spec = load_collection_spec(SAMPLES / f"{sample}.o")
    frames, off, ln, meta, rxq = _batch_frames(corpus(SEED))
    results = []
    for engine in ("interp", "jit"):
        with Collection(spec, "userspace", engine=engine,
                        verify=sample != "unchecked") as coll:
            POPULATE.get(sample, _nothing)(coll, random.Random(SEED))
            p = coll.programs[prog].handle
            assert isinstance(p, XdpProg)
            mine = frames.copy()
            ctx = RunContext(cpu=1, clock_ns=_counting_clock())
            res = p.run_batch(mine, off, ln, meta, rxq, 1, ctx=ctx, egress_ifindex=1)
            # Twice: the second batch sees what the first left in the maps.
            res2 = p.run_batch(mine, res.data_off, res.data_len, res.meta_len, rxq, 1, ctx=ctx,
                               egress_ifindex=1)
            results.append((_batch_outcome(coll, res, mine), _batch_outcome(coll, res2, mine),
                            _dump(coll, sample, False),
                            _named(coll, ctx.ri.describe()) if ctx.ri is not None else None))
    want, got = results
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"field {k}"


@pytest.mark.parametrize(("sample", "prog"), [("xdp2", "xdp_prog2"),
                                             ("redirect_map", "xdp_redirect_map_prog")])
def test_a_program_called_from_its_batch_loop_matches_the_interpreter(
        sample: str, prog: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A large program is called from its batch loop, not inlined into it (entry.py):
    the same outcomes, maps and redirects (small ones stand in, lowered fresh)."""
    from pyxdp.vm.jit import entry
    from pyxdp.vm.jit.engine import cache_clear

    monkeypatch.setenv("PYXDP_JIT_CACHE", str(tmp_path))
    monkeypatch.setattr(entry, "CALL_FROM_LOOP_INSNS", 1)
    cache_clear()
    try:
        test_batches_match_interpreter(sample, prog)
        with Collection(load_collection_spec(SAMPLES / f"{sample}.o"), "userspace",
                        engine="jit") as coll:
            vm = coll.programs[prog].handle.vm  # type: ignore[attr-defined]
            loop = vm.code.ir_text().split(f"define void @{vm.code._lowered.xdp_entry}(")[1]
            assert f"@{vm.code._lowered.xdp_entry[:-4]}_f0(" in loop.split("\n}")[0]
            assert ") #1" in loop.split("\n}")[0]
    finally:
        cache_clear()


# -- targeted -------------------------------------------------------------------------

def _asm_prog(text: str, maps: dict[str, Any], refs: tuple[MapRef, ...] = (),
              engine: str = "jit", budget: int = 1_000_000) -> XdpProg:
    insns = list(assemble(text))
    for ref in refs:  # the ld_imm64s that load a map
        i = insns[ref.pc]
        insns[ref.pc] = Instruction(i.code, i.dst, op.PseudoSrc.BPF_PSEUDO_MAP_FD, i.off, 0)
    spec = ProgramSpec("t", "xdp", tuple(insns), license="GPL", map_refs=refs)
    return XdpProg(spec, maps, engine=engine, budget=budget)


def test_faults_mid_batch_are_per_frame_with_source_lines() -> None:
    spec = load_collection_spec(SAMPLES / "unchecked.o")
    with Collection(spec, "userspace", engine="jit", verify=False) as jit, \
            Collection(spec, "userspace", engine="interp", verify=False) as ref:
        frames = np.zeros((6, 512), np.uint8)
        pkt = udp_packet(b"x")
        frames[:, 64:64 + len(pkt)] = np.frombuffer(pkt, np.uint8)
        lens = [len(pkt), 14, len(pkt), 3, len(pkt), 0]
        out = []
        for coll in (jit, ref):
            p = coll.programs["xdp_unchecked"].handle
            res = p.run_batch(frames.copy(), 64, lens)
            out.append(([str(res.fault(i)) for i in range(6)], res.action.tolist()))
        assert out[0] == out[1]
        faults, actions = out[0]
        assert actions == [1, 0, 1, 0, 1, 0]
        assert "unchecked.c:20" in faults[1] and "out-of-bounds read" in faults[1]
        assert faults[0] == "None"


def _lru_program() -> tuple[str, dict[str, Any], tuple[MapRef, ...]]:
    """Update key = packet byte 0 (value = byte 1) in a 4-entry LRU map, then look key 0
    up; r0 = update result << 8 | found."""
    text = """
r6 = r1
r2 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r4 = r2
r4 += 2
if r4 > r3 goto out
r7 = *(u8 *)(r2 +0)
r8 = *(u8 *)(r2 +1)
*(u64 *)(r10 -8) = r7
*(u64 *)(r10 -16) = r8
r1 = 0 ll
r2 = r10
r2 += -8
r3 = r10
r3 += -16
r4 = 0
call bpf_map_update_elem
r9 = r0
*(u64 *)(r10 -8) = 0
r1 = 0 ll
r2 = r10
r2 += -8
call bpf_map_lookup_elem
r1 = r0
r0 = r9
r0 <<= 8
if r1 == 0 goto done
r0 |= 1
done:
exit
out:
r0 = 2
exit
"""
    refs = (MapRef(10, "m", "fd"), MapRef(20, "m", "fd"))
    return text, {}, refs


@pytest.mark.parametrize("map_type", [BpfMapType.BPF_MAP_TYPE_LRU_HASH,
                                      BpfMapType.BPF_MAP_TYPE_HASH,
                                      BpfMapType.BPF_MAP_TYPE_LRU_PERCPU_HASH])
def test_full_maps_evict_or_refuse_like_python(map_type: int) -> None:
    text, _, refs = _lru_program()
    rng = random.Random(7)
    frames = np.zeros((300, 128), np.uint8)
    frames[:, 32] = [rng.randrange(12) for _ in range(300)]
    frames[:, 33] = np.arange(300) & 0xFF
    out = []
    for engine in ("interp", "jit"):
        m = create_map(map_type, 8, 8, 4, nr_cpus=2)
        p = _asm_prog(text, {"m": m}, refs, engine)
        res = p.run_batch(frames.copy(), 32, 20, ctx=RunContext(cpu=1))
        out.append((res.action.tolist(), snapshot({"m": m}).__repr__()))
    assert out[0] == out[1]
    results = {a >> 8 for a in out[0][0]}
    if map_type == BpfMapType.BPF_MAP_TYPE_HASH:
        assert results == {0, (-7 << 8 & 0xFFFF_FFFF) >> 8}  # some updates: E2BIG
    else:
        assert results == {0}  # LRU maps evict instead


def test_native_paths_are_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """lb's VIP path (hash lookup, LRU lookup and update, array lookups, the clock,
    adjust_head, csum_diff, per-CPU counters) runs without calling into Python."""
    from pyxdp.vm.jit.runtime import JitProgram
    entered: list[int] = []
    orig = JitProgram._helper_enter

    def counting(self: JitProgram) -> Any:
        entered.append(1)
        return orig(self)

    monkeypatch.setattr(JitProgram, "_helper_enter", counting)
    spec = load_collection_spec(SAMPLES / "lb.o")
    with Collection(spec, "userspace", engine="jit") as coll:
        _lb(coll, random.Random(1))
        p = coll.programs["lb_ingress"].handle
        assert isinstance(p, XdpProg) and isinstance(p.vm, XdpJit)
        frames = np.zeros((64, 2048), np.uint8)
        for i in range(64):  # 64 flows: new connections, then known ones
            pkt = udp_packet(b"payload", sport=1000 + i % 16, dport=5678)
            frames[i, 256:256 + len(pkt)] = np.frombuffer(pkt, np.uint8)
        res = p.run_batch(frames, 256, len(pkt), ctx=RunContext(cpu=0))
        assert set(res.action.tolist()) == {XdpAction.XDP_TX}
        assert (res.data_off == 236).all()
        assert len(coll.maps["conns"]) == 16
    assert entered == []


def test_tail_call_in_a_batch_goes_through_python() -> None:
    spec = load_collection_spec(SAMPLES / "lb.o")
    from pyxdp.net.packets import icmp_packet
    pkt = icmp_packet(b"ping", dst_ip=DEFAULT_DST_IP4)
    frames = np.zeros((8, 1024), np.uint8)
    frames[:, 128:128 + len(pkt)] = np.frombuffer(pkt, np.uint8)
    out = []
    for engine in ("interp", "jit"):
        with Collection(spec, "userspace", engine=engine) as coll:
            _lb(coll, random.Random(2))
            res = coll.programs["lb_ingress"].handle.run_batch(frames.copy(), 128, len(pkt))
            out.append((res.action.tolist(), _dump(coll, "lb", False)))
    assert out[0] == out[1]
    assert out[0][0] == [XdpAction.XDP_TX] * 8  # echo replies from lb_non_vip


def test_gil_is_released_during_a_batch() -> None:
    """A batch long enough (about 0.1 s of machine code) that the calling thread runs
    many times meanwhile if, and only if, the batch does not hold the GIL - however
    the machine's load delays either thread."""
    spin = """
r0 = 0
r1 = 30000000 ll
loop:
r0 += 1
if r0 < r1 goto loop
r0 = 2
exit
"""
    p = _asm_prog(spin, {}, budget=1 << 40)
    frames = np.zeros((4, 256), np.uint8)
    result: list[XdpBatchResult] = []
    t = threading.Thread(target=lambda: result.append(p.run_batch(frames, 64, 20)))
    ticks = 0
    t.start()
    while t.is_alive():
        ticks += 1
    t.join()
    assert result[0].action.tolist() == [2] * 4
    assert ticks > 1000


def test_unchecked_mode_is_internal_and_agrees_on_good_programs() -> None:
    spec = load_collection_spec(SAMPLES / "xdp2.o")
    with Collection(spec, "userspace", engine="jit") as coll:
        p = coll.programs["xdp_prog2"].handle
        assert isinstance(p, XdpProg)
        fast = XdpJit(p.spec.insns, maps=list(p.maps.values()), helpers=p._helpers,
                      ld_imm64=p._resolve, ctx_loads=p.ctx_loads, _unchecked=True)
        assert p.vm._code is not fast._code  # a different compilation
        pkt = udp_packet(b"abc")
        frames = np.zeros((16, 1024), np.uint8)
        frames[:, 256:256 + len(pkt)] = np.frombuffer(pkt, np.uint8)
        a = p.run_batch(frames.copy(), 256, len(pkt))
        f2 = frames.copy()
        b = fast.run_batch_xdp(f2, 256, len(pkt))
        assert a.action.tolist() == b.action.tolist() == [XdpAction.XDP_TX] * 16


def test_bad_batch_arguments_are_refused() -> None:
    p = _asm_prog("r0 = 2\nexit", {})
    frames = np.zeros((2, 128), np.uint8)
    with pytest.raises(ValueError):
        p.run_batch(frames, 100, 40)  # data past the frame
    with pytest.raises(ValueError):
        p.run_batch(frames, 10, 4, 20)  # metadata before the frame
    with pytest.raises(ValueError):
        p.run_batch(frames[:, ::2], 0, 4)  # not contiguous
    with pytest.raises(ValueError):
        p.run_batch(frames, [0, 1, 2], 4)
    assert p.run_batch(np.zeros((0, 64), np.uint8), 0, 0).done == 0


def test_a_helper_exception_in_a_batch_names_the_frame() -> None:
    p = _asm_prog("r1 = 0\nr2 = 0\ncall bpf_xdp_adjust_head\nr0 = 2\nexit", {})
    res = p.run_batch(np.zeros((3, 512), np.uint8), 256, 40)
    fault = res.fault(1)
    assert res.action.tolist() == [0, 0, 0] and fault is not None
    assert "not the xdp_md context" in str(fault) and fault.pc == 2


def test_memory_fault_message_in_a_batch_names_the_packet_region() -> None:
    p = _asm_prog("r2 = *(u32 *)(r1 +0)\nr0 = *(u8 *)(r2 +50)\nexit", {})
    ref = _asm_prog("r2 = *(u32 *)(r1 +0)\nr0 = *(u8 *)(r2 +50)\nexit", {}, engine="interp")
    frames = np.zeros((2, 512), np.uint8)
    a, b = (q.run_batch(frames.copy(), 256, [60, 30], [0, 8]) for q in (p, ref))
    assert isinstance(a.fault(1), MemoryFault)
    assert str(a.fault(1)) == str(b.fault(1)) and a.fault(0) is None


def _tail_pair(engine: str, target_text: str, slots: tuple[int, ...] = (0,)
               ) -> tuple[XdpProg, Any]:
    """A caller that tail-calls slot ``r = packet byte 0`` of a prog array holding the
    target in ``slots``; falls through with r0 = 7 << 8 | (the call's r0 & 0xff)."""
    jt = create_map(BpfMapType.BPF_MAP_TYPE_PROG_ARRAY, 4, 4, 4)
    caller = """
r6 = r1
r2 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r4 = r2
r4 += 1
if r4 > r3 goto out
r3 = *(u8 *)(r2 +0)
r1 = r6
r2 = 0 ll
call bpf_tail_call
r0 &= 255
r0 |= 1792
exit
out:
r0 = 2
exit
"""
    maps = {"jt": jt}
    prog = _asm_prog(caller, maps, (MapRef(8, "jt", "fd"),), engine)
    target = _asm_prog(target_text, maps, (), engine)
    for s in slots:
        jt.set(s, target, 1)  # type: ignore[attr-defined]
    return prog, target


def test_native_tail_calls_match_the_interpreter_and_report_the_targets_faults() -> None:
    target = """
r6 = r1
r2 = *(u32 *)(r1 +0)
r0 = *(u8 *)(r2 +40)
r1 = r6
r2 = -2
call bpf_xdp_adjust_head
r0 += 3
exit
"""
    frames = np.zeros((6, 512), np.uint8)
    frames[:, 100] = [0, 1, 0, 2, 0, 3]
    lens = [60, 60, 30, 60, 20, 60]
    out = []
    for engine in ("interp", "jit"):
        prog, _ = _tail_pair(engine, target, (0, 2))
        res = prog.run_batch(frames.copy(), 100, lens, ctx=RunContext(cpu=0))
        out.append((res.action.tolist(), res.data_off.tolist(),
                    [None if res.fault(i) is None else str(res.fault(i)) for i in range(6)]))
        single = []
        for i in range(6):
            buf = XdpBuff.prepare(bytes(frames[i, 100:100 + lens[i]]))
            try:
                single.append(prog.run(buf, RunContext(cpu=0)))
            except ProgramFault as e:
                single.append(str(e))
        out[-1] += (single,)
    assert out[0] == out[1]
    acts, offs, faults, _ = out[0]
    assert acts[0] == 3 and offs[0] == 98  # the target ran (and moved the head)
    assert acts[1] == 1792 | (-2 & 0xFF)  # empty slot: -ENOENT, fall through
    assert faults[2] is not None and faults[4] is not None  # short packets fault in the target


def test_tail_call_into_an_empty_slot_falls_through_natively() -> None:
    """An empty slot or an index past the end: -ENOENT and on, as the Python hook, without
    it (the slot holding a program still runs it)."""
    from pyxdp.net.prog import XdpProg
    from pyxdp.testing.native import python_calls
    frames = np.zeros((6, 512), np.uint8)
    frames[:, 100] = [1, 3, 200, 0, 1, 255]
    out = []
    for engine in ("interp", "jit"):
        prog, _ = _tail_pair(engine, "r0 = 3\nexit", (0, 2))
        res = prog.run_batch(frames.copy(), 100, 60, ctx=RunContext(cpu=0))
        out.append(res.action.tolist())
        if engine == "jit":
            frames[:, 100] = [1, 3, 200, 1, 1, 255]
            assert python_calls([XdpProg._tail_call], lambda p=prog: p.run_batch(
                frames.copy(), 100, 60, ctx=RunContext(cpu=0))) == 0
    assert out[0] == out[1] == [1792 | 0xFE] * 3 + [3] + [1792 | 0xFE] * 2


def test_tail_call_limit_and_self_tail_calls() -> None:
    # A program that tail-calls itself through slot 0 until the limit, counting in r7...
    # it restarts each time, so it counts in the packet: byte 1 += 1 per run.
    text = """
r6 = r1
r2 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r4 = r2
r4 += 2
if r4 > r3 goto out
r5 = *(u8 *)(r2 +1)
r5 += 1
*(u8 *)(r2 +1) = r5
r1 = r6
r2 = 0 ll
r3 = 0
call bpf_tail_call
r0 = 5
exit
out:
r0 = 2
exit
"""
    out = []
    for engine in ("interp", "jit"):
        jt = create_map(BpfMapType.BPF_MAP_TYPE_PROG_ARRAY, 4, 4, 1)
        prog = _asm_prog(text, {"jt": jt}, (MapRef(10, "jt", "fd"),), engine)
        jt.set(0, prog, 1)  # type: ignore[attr-defined]
        frames = np.zeros((2, 256), np.uint8)
        res = prog.run_batch(frames, 64, 20, ctx=RunContext())
        out.append((res.action.tolist(), frames[:, 65].tolist()))
    assert out[0] == out[1]
    assert out[0][1] == [34, 34]  # 1 + MAX_TAIL_CALL_CNT runs


def test_cli_bench_prog_and_conformance_on_the_jit(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from pyxdp.cli.main import main
    pkt = tmp_path / "pkt.bin"
    pkt.write_bytes(udp_packet(b"hello"))
    assert main(["bench", "prog", str(SAMPLES / "xdp2.o"), "--data-in", str(pkt),
                 "--repeat", "20000", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "pyxdp jit:" in out and "ns/packet (XDP_TX)" in out
    assert main(["bench", "prog", str(SAMPLES / "lb.o"), "-s", "lb_ingress", "--data-in",
                 str(pkt), "--engine", "interp", "--repeat", "20", "--runs", "1"]) == 0
    assert "pyxdp interp:" in capsys.readouterr().out
    vectors = vector_files()[:25]
    assert main(["conformance", "--engine", "jit", *map(str, vectors)]) == 0
    assert capsys.readouterr().out.strip().endswith("25 passed, 0 failed, 0 skipped")


@pytest.mark.kernel
def test_cli_bench_prog_vs_kernel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pyxdp.cli.main import main
    pkt = tmp_path / "pkt.bin"
    pkt.write_bytes(udp_packet(b"hello"))
    assert main(["bench", "prog", str(SAMPLES / "xdp1.o"), "--data-in", str(pkt),
                 "--repeat", "100000", "--runs", "1", "--vs-kernel"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-2].startswith("kernel: ") and lines[-1].startswith("ratio pyxdp/kernel: ")
    assert float(lines[-1].split(": ")[1]) > 0


def test_a_helper_that_moves_the_buffer_outside_its_frame_stops_the_run() -> None:
    """Native code addresses the frame with the edges helpers leave: a (custom) helper
    that puts them outside the frame stops the run instead of letting native code
    follow them."""
    from pyxdp.net.filter import XDP_HELPERS
    from pyxdp.vm.interpreter import Helper

    def evil(vm: Any, *args: int) -> int:
        vm.context.xdp.data_end = 1 << 20
        return 0

    helpers = dict(XDP_HELPERS)
    helpers[7] = Helper(7, "get_prandom_u32", evil)
    text = "r6 = r1\ncall bpf_get_prandom_u32\nr1 = r6\nr2 = 8\ncall bpf_xdp_adjust_tail\n" \
           "r0 = 2\nexit"
    spec = ProgramSpec("t", "xdp", assemble(text), license="GPL")
    prog = XdpProg(spec, {}, helpers=helpers, engine="jit")
    res = prog.run_batch(np.zeros((2, 512), np.uint8), 64, 40, repeat=3)
    assert res.action.tolist() == [0, 0]
    assert "outside its frame" in str(res.fault(0))
    with pytest.raises(ProgramFault, match="outside its frame"):
        prog.run(XdpBuff.prepare(bytes(60)), RunContext())
