"""Every sample program x a packet corpus x random map contents: pyxdp == Linux.

Each sample object is loaded twice from the same CollectionSpec, into the
kernel and into pyxdp's userspace backend; both get the same random map
contents; then every packet of the corpus goes through BPF_PROG_TEST_RUN on
both, in the same order (maps persist from packet to packet). retval,
data_out, ctx_out and, at the end, every map's contents must be identical.
The process is pinned to CPU 0 so per-CPU slots line up. Time stamps that a
program stores (bpf_ktime_get_ns) are the only bytes masked out.
"""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import TestRunTruncated
from pyxdp.net.packets import corpus
from pyxdp.spec import CollectionSpec
from pyxdp.uapi.bpf import BpfAttachType, BpfMapType

pytestmark = pytest.mark.kernel

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
SEED = int(os.environ.get("PYXDP_DIFF_SEED", "1"))

Populate = Callable[[Collection, random.Random], None]


def _nothing(coll: Collection, rng: random.Random) -> None:
    del coll, rng


def _counters(name: str, n: int) -> Populate:
    def populate(coll: Collection, rng: random.Random) -> None:
        m = coll.maps[name]
        for k in rng.sample(range(n), min(n, 8)):
            m.update(k, [rng.randrange(1 << 20) for _ in range(m.nr_cpus)] if m.percpu
                     else rng.randrange(1 << 20))
    return populate


def _redirect_map(coll: Collection, rng: random.Random) -> None:
    _counters("rxcnt", 1)(coll, rng)
    if rng.random() < 0.7:
        coll.maps["tx_port"].update(0, struct.pack("<Ii", 1, 0))


def _redirect_cpu(coll: Collection, rng: random.Random) -> None:
    cpus = list(range(min(2, os.cpu_count() or 1)))
    for i, cpu in enumerate(cpus):
        coll.maps["cpus_available"].update(i, cpu)
        if rng.random() < 0.8:
            coll.maps["cpu_map"].update(cpu, struct.pack("<Ii", 192, 0))
    coll.maps["cpus_count"].update(0, len(cpus))


def _lb(coll: Collection, rng: random.Random) -> None:
    from pyxdp.net.packets import DEFAULT_DST_IP4, ip4
    vips, backends = coll.maps["vips"], coll.maps["backends"]
    for n in range(4):
        backends.update(n, ip4(f"10.1.0.{n + 1}") + bytes([2, 0, 0, 0, 0, n + 1]) + b"\0\0")
    # The corpus sends to DEFAULT_DST_IP4 (UDP 5678 / TCP 80) and ICMP.
    for port, proto in ((5678, 17), (80, 6), (0, 1)):
        if rng.random() < 0.8:
            vips.update(ip4(DEFAULT_DST_IP4) + struct.pack(">H", port) + bytes([proto, 0]),
                        struct.pack("<II", rng.randrange(2), rng.randrange(1, 3)))


POPULATE: dict[str, Populate] = {
    "xdp1": _counters("rxcnt", 256),
    "xdp2": _counters("rxcnt", 256),
    "adjust_tail": _nothing,
    "redirect_map": _redirect_map,
    "redirect_cpu": _redirect_cpu,
    "xsk": _nothing,
    "lb": _lb,
    "meta": _nothing,
    "sampler": _nothing,
    "core": _nothing,
    "mixed": _nothing,
}
# Bytes a program fills with bpf_ktime_get_ns(): (map name, value offset, length).
TIME_FIELDS = {"lb": [("conns", 8, 8)], "meta": [("last_meta", 8, 8)]}
# Maps whose contents are not comparable element by element (ring and perf buffers).
_UNDUMPABLE = {int(BpfMapType.BPF_MAP_TYPE_RINGBUF), int(BpfMapType.BPF_MAP_TYPE_PERF_EVENT_ARRAY),
               int(BpfMapType.BPF_MAP_TYPE_PROG_ARRAY), int(BpfMapType.BPF_MAP_TYPE_DEVMAP),
               int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH), int(BpfMapType.BPF_MAP_TYPE_CPUMAP),
               int(BpfMapType.BPF_MAP_TYPE_XSKMAP)}


@pytest.fixture(autouse=True)
def _pin_cpu0() -> Iterator[None]:
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _dump(coll: Collection, sample: str) -> dict[str, dict[bytes, bytes]]:
    masks = TIME_FIELDS.get(sample, [])
    out: dict[str, dict[bytes, bytes]] = {}
    for name, m in coll.maps.items():
        if m.spec.type in _UNDUMPABLE:
            continue
        entries = {}
        for key in m.raw_keys():
            raw = m.handle.lookup(key)
            if raw is None:
                continue
            value = bytearray(raw)
            for mname, off, length in masks:
                if mname == name:
                    value[off:off + length] = bytes(length)
            entries[key] = bytes(value)
        out[name] = entries
    return out


def _xdp_md(size: int, meta: int = 0) -> bytes:
    return struct.pack("<6I", meta, size, 0, 0, 0, 0)


def _run(coll: Collection, prog: str, pkt: bytes, ctx: bool) -> tuple[object, ...]:
    try:
        r = coll.programs[prog].test_run(pkt, ctx_in=_xdp_md(len(pkt)) if ctx else None,
                                         ctx_size_out=24 if ctx else 0)
    except TestRunTruncated as e:
        return ("ENOSPC", e.data_size)
    except Exception as e:  # the kernel refusing an input must be matched by pyxdp
        return (type(e).__name__, getattr(e, "errno", None))
    data = r.data_out
    if prog == "xdp_meta_producer" and r.retval == 2 and len(data) >= 16 + len(pkt):
        data = data[:8] + bytes(8) + data[16:]  # struct meta's rx_time_ns
    return (r.retval, data, r.ctx_out)


def _programs(spec: CollectionSpec) -> list[str]:
    return [n for n, p in spec.programs.items()
            if p.userspace and p.autoload
            and p.expected_attach_type not in (BpfAttachType.BPF_XDP_DEVMAP,
                                               BpfAttachType.BPF_XDP_CPUMAP)]


CASES = [(s, p) for s in POPULATE for p in _programs(load_collection_spec(SAMPLES / f"{s}.o"))]


@pytest.mark.parametrize("engine", ["interp", "jit"])
@pytest.mark.parametrize(("sample", "prog"), CASES, ids=[f"{s}-{p}" for s, p in CASES])
def test_sample_matches_kernel(sample: str, prog: str, engine: str) -> None:
    spec = load_collection_spec(SAMPLES / f"{sample}.o")
    packets = corpus(SEED)
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        for coll in (kern, user):
            POPULATE[sample](coll, random.Random(SEED))
        assert _dump(user, sample) == _dump(kern, sample), "maps differ after populating"
        for n, (name, pkt) in enumerate(packets):
            k = _run(kern, prog, pkt, ctx=n % 2 == 1)
            u = _run(user, prog, pkt, ctx=n % 2 == 1)
            assert u == k, f"packet {name!r} ({len(pkt)} bytes): kernel {k!r:.300} pyxdp {u!r:.300}"
        assert _dump(user, sample) == _dump(kern, sample), "maps differ after the corpus"
