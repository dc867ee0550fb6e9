"""Native twins of helpers on the JIT against the Python reference (the interpreter):
bpf_get_prandom_u32 (the same values and the same state left behind), bpf_check_mtu,
bpf_map_lookup_elem on ARRAY_OF_MAPS, HASH_OF_MAPS and XSKMAP - and no Python per packet
on the JIT."""

from __future__ import annotations

import ipaddress
import random
import struct
from types import SimpleNamespace

import numpy as np
import pytest

from pyxdp.collection import Collection
from pyxdp.errors import MapError
from pyxdp.maps.arraymap import ArrayOfMaps
from pyxdp.maps.hashtab import HashOfMaps
from pyxdp.maps.xskmap import XskMap
from pyxdp.net import filter_fib
from pyxdp.net.fib import Fib
from pyxdp.net.prog import jit_available
from pyxdp.spec import MapSpec
from pyxdp.testing.native import agree_natively, python_calls
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.vm import helpers as vm_helpers
from pyxdp.vm import random32
from pyxdp.vm.helpers import RunContext

pytestmark = pytest.mark.skipif(not jit_available(), reason="llvmlite is not installed: no JIT")


# -- bpf_get_prandom_u32 ---------------------------------------------------------------------

# The packet's first two u32 get two draws.
PRANDOM = """
r6 = r1
call 7
r7 = r0
call 7
r2 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r4 = r2
r4 += 8
if r4 > r3 goto out
*(u32 *)(r2 +0) = r7
*(u32 *)(r2 +4) = r0
out:
r0 = 2
exit
"""


def _prandom(seed: int, engine: str) -> list[object]:
    spec = asm_collection(PRANDOM, [])
    out: list[object] = []
    with Collection(spec, "userspace", engine=engine) as c:
        prog = c.programs["t"].handle
        ctx = RunContext()
        ctx.rnd.seed(seed)
        for _round in range(3):
            frames = np.zeros((40, 512), np.uint8)
            prog.run_batch(frames, 256, 64, ctx=ctx)
            out.append(frames[:, 256:264].tobytes())
            out.append(ctx.rnd.u32())  # Python draws on from where the run left the state
        out.append(RunContext().rnd.words.tolist())  # a fresh context starts the same
    return out


def test_prandom_twin_is_python() -> None:
    """One stream: the JIT's draws, Python's draws between batches, the state left."""
    agree_natively(_prandom, [vm_helpers._get_prandom_u32])


def test_prandom_is_lfsr113() -> None:
    """prandom_u32_state's recurrence (lib/random32.c), stepped by hand from a state."""
    r = random32.RndState()
    r.words[:] = [2, 8, 16, 128]
    s1, s2, s3, s4 = 2, 8, 16, 128
    for _ in range(5):
        s1 = ((s1 & 0xFFFFFFFE) << 18 & 0xFFFFFFFF) ^ (((s1 << 6 & 0xFFFFFFFF) ^ s1) >> 13)
        s2 = ((s2 & 0xFFFFFFF8) << 2 & 0xFFFFFFFF) ^ (((s2 << 2 & 0xFFFFFFFF) ^ s2) >> 27)
        s3 = ((s3 & 0xFFFFFFF0) << 7 & 0xFFFFFFFF) ^ (((s3 << 13 & 0xFFFFFFFF) ^ s3) >> 21)
        s4 = ((s4 & 0xFFFFFF80) << 13 & 0xFFFFFFFF) ^ (((s4 << 3 & 0xFFFFFFFF) ^ s4) >> 12)
        assert r.u32() == s1 ^ s2 ^ s3 ^ s4


# -- bpf_map_lookup_elem on map-in-maps and XSKMAPs ------------------------------------------

# The packet's first u32 is the key.
_KEY = """
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 4
if r4 > r3 goto short
r6 = *(u32 *)(r2 +0)
*(u32 *)(r10 -4) = r6
r1 = map[fd:0]
r2 = r10
r2 += -4
call 1
if r0 == 0 goto short
"""
# The inner map's value at key 0 (its lookup is the Python helper: the map is not constant).
INNER = _KEY + """
r1 = r0
*(u32 *)(r10 -8) = 0
r2 = r10
r2 += -8
call 1
if r0 == 0 goto short
r0 = *(u64 *)(r0 +0)
exit
short:
r0 = 2
exit
"""
# The socket's bpf_xdp_sock.queue_id.
XSK = _KEY + """
r0 = *(u32 *)(r0 +0)
exit
short:
r0 = 2
exit
"""
OUTER = {"array_of_maps": int(BpfMapType.BPF_MAP_TYPE_ARRAY_OF_MAPS),
         "hash_of_maps": int(BpfMapType.BPF_MAP_TYPE_HASH_OF_MAPS)}


def _frames(keys: list[int]) -> np.ndarray:
    frames = np.zeros((len(keys), 512), np.uint8)
    for i, key in enumerate(keys):
        frames[i, 256:260] = np.frombuffer(struct.pack("<I", key), np.uint8)
    return frames


def _map_in_map(kind: str, seed: int, engine: str) -> list[object]:
    rng = random.Random(seed)
    array = kind == "array_of_maps"
    template = MapSpec("tmpl", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 1)
    inners = [MapSpec(f"i{n}", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 1) for n in range(4)]
    spec = asm_collection(INNER, [MapSpec("outer", OUTER[kind], 4, 4, 8, inner=template),
                                  *inners])
    pool = list(range(10)) if array else [*rng.sample(range(1 << 32), 10), 0, 0xFFFF_FFFF]
    out: list[object] = []
    with Collection(spec, "userspace", engine=engine) as c:
        outer = c.maps["outer"]
        for n in range(4):
            c.maps[f"i{n}"].update(0, 100 + n)
        prog = c.programs["t"].handle
        for _round in range(3):
            for k in rng.sample(pool, 6):  # new and replaced entries, some past the end
                try:
                    outer.update(k, c.maps[f"i{rng.randrange(4)}"].handle.id)
                except MapError:  # E2BIG: past the array's end, or the hash is full
                    pass
            for k in rng.sample(pool, 3):
                try:
                    del outer[k]
                except (KeyError, MapError):
                    pass
            keys = [rng.choice(pool) if rng.random() < 0.9 else rng.randrange(1 << 32)
                    for _ in range(48)]
            r = prog.run_batch(_frames(keys), 256, 64, ctx=RunContext())
            out.append(r.action.tolist())
    return out


@pytest.mark.parametrize("kind", sorted(OUTER))
def test_map_in_map_lookup_twin_is_python(kind: str) -> None:
    """The inner map of present, replaced and deleted keys, NULL for absent ones and past
    the end; the outer lookup without Python (the inner map's lookup is Python)."""
    agree_natively(lambda seed, engine: _map_in_map(kind, seed, engine),
                    [ArrayOfMaps.lookup_addr, HashOfMaps.lookup_addr])


def _xskmap(seed: int, engine: str) -> list[object]:
    rng = random.Random(seed)
    spec = asm_collection(XSK, [MapSpec("m", int(BpfMapType.BPF_MAP_TYPE_XSKMAP), 4, 4, 8)])
    out: list[object] = []
    with Collection(spec, "userspace", engine=engine) as c:
        h = c.maps["m"].handle
        sockets = {fd: SimpleNamespace(queue_id=rng.randrange(64)) for fd in range(1, 6)}
        h.resolve_fd = sockets.__getitem__
        prog = c.programs["t"].handle
        for _round in range(3):
            for k in rng.sample(range(8), 5):
                h.update(struct.pack("<I", k), struct.pack("<I", rng.randrange(1, 6)))
            for k in rng.sample(range(8), 2):
                h.delete(struct.pack("<I", k))
            keys = [rng.randrange(10) if rng.random() < 0.9 else rng.randrange(1 << 32)
                    for _ in range(48)]
            r = prog.run_batch(_frames(keys), 256, 64, ctx=RunContext())
            out.append(r.action.tolist())
    return out


def test_xskmap_lookup_twin_is_python() -> None:
    """The socket's bpf_xdp_sock of occupied slots, NULL for empty ones and past the end."""
    agree_natively(_xskmap, [XskMap.lookup_addr])


# -- bpf_check_mtu ---------------------------------------------------------------------------

# bpf_check_mtu(ctx, ifindex, &mtu_len, len_diff, flags) with the arguments from the
# packet's first four u32; *mtu_len goes back into the packet's fifth.
CHECK_MTU = """
r6 = r1
r7 = *(u32 *)(r6 +0)
r2 = *(u32 *)(r6 +4)
r4 = r7
r4 += 20
if r4 > r2 goto short
r2 = *(u32 *)(r7 +4)
*(u32 *)(r10 -4) = r2
r1 = r6
r2 = *(u32 *)(r7 +0)
r3 = r10
r3 += -4
r4 = *(s32 *)(r7 +8)
r5 = *(u32 *)(r7 +12)
call 163
r1 = *(u32 *)(r10 -4)
*(u32 *)(r7 +16) = r1
exit
short:
r0 = 2
exit
"""


def _check_mtu(seed: int, engine: str) -> list[object]:
    rng = random.Random(seed)
    out: list[object] = []
    with Collection(asm_collection(CHECK_MTU, []), "userspace", engine=engine) as c:
        prog = c.programs["t"].handle
        for _round in range(2):
            net = Fib()
            for ifindex in rng.sample(range(2, 12), 6):  # grows the table past its 4 rows
                net.add_device(ifindex, mtu=rng.choice((68, 1280, 1500, 9000, 65535)),
                               hard_header_len=rng.choice((0, 14, 18)))
            net.devices[1].mtu = rng.choice((1500, 65536))  # a changed MTU is seen
            n = 64
            frames = np.zeros((n, 9300), np.uint8)
            lengths = np.array([rng.choice((20, 64, 1200, 1514, 1515, 9014, 9020))
                                for _ in range(n)], np.uint32)
            for i in range(n):
                args = (rng.choice((0, 0, 1, 99, *net.devices)),
                        rng.choice((0, 0, 1400, 1501, 1 << 31, 0xFFFF_FFFF)),
                        rng.choice((0, 0, 1, -1, -100, 1 << 20)) & 0xFFFF_FFFF,
                        rng.choice((0, 0, 0, 1, 2)))
                frames[i, 256:272] = np.frombuffer(struct.pack("<4I", *args), np.uint8)
            ingress = np.array([rng.choice((1, 1, *net.devices)) for _ in range(n)], np.uint32)
            r = prog.run_batch(frames, 256, lengths, ingress_ifindex=ingress,
                               ctx=RunContext(fib=net))
            out += [r.action.tolist(), frames[:, 256:276].tobytes()]
    return out


def test_check_mtu_twin_is_python() -> None:
    """Ingress and other devices, absent ones, mtu_len given or not, len_diff both ways,
    flags; the MTU written back."""
    agree_natively(_check_mtu, [filter_fib._check_mtu])


def test_check_mtu_without_the_ingress_device() -> None:
    """The Python helper's fault (the twin leaves it the call), on both engines."""
    faults = []
    for engine in ("jit", "interp"):
        with Collection(asm_collection(CHECK_MTU, []), "userspace", engine=engine) as c:
            frames = np.zeros((2, 512), np.uint8)
            frames[:, 256:272] = np.frombuffer(struct.pack("<4I", 0, 0, 0, 0), np.uint8)
            r = c.programs["t"].handle.run_batch(frames, 256, 64, ingress_ifindex=7,
                                                 ctx=RunContext(fib=Fib()))
            faults.append([str(r.fault(i)) for i in range(2)])
    assert faults[0] == faults[1]
    assert "env.fib.add_device" in faults[0][0]


# -- bpf_fib_lookup --------------------------------------------------------------------------

# struct bpf_fib_lookup (packet bytes 0-63) copied to the stack, flags from bytes 64-67, a
# plen of 63 (too short) when byte 68 is set; the params go back into the packet and r0
# into bytes 72-79.
_COPY_IN = "\n".join(f"r1 = *(u64 *)(r7 +{o})\n*(u64 *)(r10 {o - 64}) = r1"
                     for o in range(0, 64, 8))
_COPY_OUT = "\n".join(f"r1 = *(u64 *)(r10 {o - 64})\n*(u64 *)(r7 +{o}) = r1"
                      for o in range(0, 64, 8))
FIB_LOOKUP = f"""
r6 = r1
r7 = *(u32 *)(r6 +0)
r2 = *(u32 *)(r6 +4)
r4 = r7
r4 += 80
if r4 > r2 goto short
{_COPY_IN}
r1 = r6
r2 = r10
r2 += -64
r3 = 64
r4 = *(u8 *)(r7 +68)
if r4 == 0 goto full
r3 = 63
full:
r4 = *(u32 *)(r7 +64)
call 69
r6 = r0
{_COPY_OUT}
*(u64 *)(r7 +72) = r6
r0 = 2
exit
short:
r0 = 2
exit
"""


def _fib_net(rng: random.Random) -> Fib:
    """A namespace with every kind of route the lookups tell apart (as the kernel test's)."""
    net = Fib()
    mac = "02:00:00:00:00:{:02x}".format
    for ifindex, name, mtu in ((2, "va", 1500), (3, "vb", 1500), (4, "dm", 1400),
                               (5, "ds", 1000), (6, "dd", 1500)):
        net.add_device(ifindex, name, mac=mac(ifindex), mtu=mtu, up=name != "dd")
    for dev, a in (("va", "10.0.0.1/24"), ("va", "2001:db8::1/64"), ("vb", "10.0.1.1/24"),
                   ("vb", "2001:db8:1::1/64"), ("dm", "10.0.2.1/24"), ("dm", "2001:db8:2::1/64"),
                   ("va", "10.0.0.9/24"), ("ds", "10.0.3.1/24"), ("dd", "10.0.4.1/24")):
        net.add_address(dev, a)
    net.set_forwarding(True)
    net.device("dm").forwarding = rng.random() < 0.5
    net.device("vb").forwarding6 = rng.random() < 0.5
    net.ip_forward_use_pmtu = rng.random() < 0.3
    for prefix, kw in (
            ("10.1.0.0/16", {"via": "10.0.0.2"}), ("10.1.5.0/24", {"via": "10.0.1.2"}),
            ("10.1.5.7/32", {"via": "10.0.0.3"}), ("10.6.0.0/16", {"dev": "dm"}),
            ("10.2.0.0/16", {"type": "blackhole"}), ("10.3.0.0/16", {"type": "unreachable"}),
            ("10.4.0.0/16", {"type": "prohibit"}), ("10.12.0.0/16", {"type": "throw"}),
            ("10.5.0.0/16", {"via": "10.0.0.2", "mtu": 1200, "mtu_lock": True}),
            ("10.7.0.0/16", {"via": "10.0.0.2", "mtu": 1000}),
            ("10.8.0.0/16", {"via": "2001:db8::2", "dev": "va"}),
            ("10.9.0.0/16", {"via": "10.0.1.2", "table": 100}),
            ("0.0.0.0/0", {"via": "10.0.1.2", "table": rng.choice((100, 253))}),
            ("10.11.0.0/16", {"via": "10.0.0.2", "metric": 10}),
            ("10.11.0.0/16", {"via": "10.0.1.2", "metric": 5}),
            ("10.13.0.0/16", {"via": "10.0.2.2", "src": "10.0.0.1"}),
            ("10.14.0.0/16", {"via": "10.0.0.4"}),
            ("2001:db8:100::/48", {"via": "2001:db8::2"}),
            ("2001:db8:100:5::/64", {"via": "2001:db8:1::2"}),
            ("2001:db8:106::/48", {"dev": "dm"}),
            ("2001:db8:dead::/48", {"type": "blackhole"}),
            ("2001:db8:beef::/48", {"type": "unreachable"}),
            ("2001:db8:f00d::/48", {"type": "prohibit"}),
            ("2001:db8:105::/48", {"via": "2001:db8::2", "mtu": 1300, "mtu_lock": True}),
            ("2001:db8:109::/48", {"via": "2001:db8:1::2", "table": 100}),
            ("2001:db8:111::/48", {"via": "2001:db8::2", "metric": 10}),
            ("2001:db8:111::/48", {"via": "2001:db8:1::2", "metric": 5}),
            ("2001:db8:113::/48", {"via": "2001:db8::2", "src": "2001:db8:2::1"})):
        net.add_route(prefix, **kw)  # type: ignore[arg-type]
    for addr, dev, state in (("10.0.0.2", "va", "permanent"), ("10.0.1.2", "vb", "stale"),
                             ("10.0.2.2", "dm", "reachable"), ("10.0.0.3", "va", "failed"),
                             ("10.0.0.4", "va", "incomplete"), ("10.6.0.9", "dm", "permanent"),
                             ("0.0.0.0", "lo", "noarp"), ("2001:db8::2", "va", "permanent"),
                             ("2001:db8:1::2", "vb", "stale"), ("2001:db8:106::9", "dm", "failed")):
        net.add_neighbour(addr, mac(0xA0 + len(addr)), dev=dev, state=state)
    return net


_V4 = ["10.1.2.3", "10.1.5.9", "10.1.5.7", "10.6.0.9", "10.6.0.10", "10.2.0.1", "10.3.0.1",
       "10.4.0.1", "10.12.0.1", "10.5.0.1", "10.7.0.1", "10.8.0.1", "10.9.0.1", "10.11.0.1",
       "10.13.0.1", "10.14.0.1", "10.0.0.2", "10.0.0.1", "10.0.0.255", "10.0.4.7",
       "127.0.0.1", "224.0.0.5", "192.0.2.1", "10.0.3.9"]
_V6 = ["2001:db8:100::1", "2001:db8:100:5::1", "2001:db8:106::9", "2001:db8:dead::1",
       "2001:db8:beef::1", "2001:db8:f00d::1", "2001:db8:105::1", "2001:db8:109::1",
       "2001:db8:111::1", "2001:db8:113::1", "2001:db8::2", "2001:db8::1",
       "2001:db8::", "fe80::1", "ff02::1", "::1", "2001:db8:77::1"]


def _fib_params(rng: random.Random, python_cases: bool) -> bytes:
    from pyxdp.net import fib as F
    p = F.FibLookup()
    six = rng.random() < 0.45
    p.family = rng.choice((F.AF_INET6 if six else F.AF_INET,) * 12 + (0, 7))
    p.raw[1:6] = rng.randbytes(5)
    p.tot_len = rng.choice((0, 100, 1200, 1201, 1300, 1301, 1400, 1401, 1500, 1501, 65535))
    p.ifindex = rng.choice((1, 2, 2, 2, 3, 4, 5, 6, 99))
    p.raw[12:16] = rng.randbytes(4)
    if six:
        p.set_src(ipaddress.IPv6Address(rng.choice(("2001:db8::1", "fe80::5", "::", "::1"))))
        p.set_dst(ipaddress.IPv6Address(rng.choice(_V6)))
    else:
        p.set_src(ipaddress.IPv4Address(rng.choice(("10.0.0.1", "0.0.0.0"))))
        p.set_dst(ipaddress.IPv4Address(rng.choice(_V4)))
        p.raw[36:48] = rng.randbytes(12)  # past an IPv4 dst: ignored
    p.tbid = rng.choice((100, 254, 255, 55, 253))
    p.raw[52:64] = rng.randbytes(12)
    flags = 0
    for bit in range(6):
        flags |= (rng.random() < 0.3) << bit
    flags |= (rng.random() < 0.03) << 6  # an unknown flag: EINVAL
    if six and not python_cases:
        flags &= ~F.BPF_FIB_LOOKUP_SRC  # RFC 6724 source selection: the Python helper's
    return bytes(p.raw) + struct.pack("<II", flags, rng.random() < 0.04)


def _fib_lookup(seed: int, engine: str, python_cases: bool = True) -> list[object]:
    rng = random.Random(seed)
    out: list[object] = []
    with Collection(asm_collection(FIB_LOOKUP, []), "userspace", engine=engine) as c:
        prog = c.programs["t"].handle
        for _round in range(3):
            net = _fib_net(rng)
            if _round == 2:  # configuration changes between lookups are seen
                net.device("va").mtu = 1280
                net.delete_route("10.1.5.0/24")
                net.add_neighbour("10.0.0.3", "02:00:00:00:00:33", dev="va", state="reachable")
            n = 300
            frames = np.zeros((n, 512), np.uint8)
            for i in range(n):
                frames[i, 256:328] = np.frombuffer(_fib_params(rng, python_cases), np.uint8)
            ingress = np.array([rng.choice((1, 2, 3)) for _ in range(n)], np.uint32)
            r = prog.run_batch(frames, 256, 80, ingress_ifindex=ingress, ctx=RunContext(fib=net))
            out += [r.action.tolist(), frames[:, 256:336].tobytes()]
    return out


def test_fib_lookup_twin_is_python() -> None:
    """IPv4 and IPv6 through every flag, return code and MTU case of the namespace above
    (3 x 900 lookups),
    bad flags, families, devices and plen; a configuration change seen. Only IPv6
    source selection is left to the Python helper."""
    for seed in range(3):
        assert _fib_lookup(seed, "jit") == _fib_lookup(seed, "interp")
    helpers = [filter_fib._fib_lookup, Fib.bpf_fib_lookup]
    assert python_calls(helpers, lambda: _fib_lookup(0, "jit", python_cases=False)) == 0
    assert python_calls(helpers, lambda: _fib_lookup(0, "jit")) > 0
