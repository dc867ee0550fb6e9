"""The helpers of pyxdp.vm.helpers_more and pyxdp.net.fib on the userspace backend.

bpf_snprintf's formatter (pure and through a program), bpf_for_each_map_elem,
the ring buffer helpers, bpf_perf_event_output, bpf_fib_lookup over a
configured :class:`~pyxdp.net.fib.Fib`, and bpf_check_mtu: return codes and
effects as the kernel has them (tests/kernel/test_helpers_kernel.py compares
the same helpers with Linux).
"""

from __future__ import annotations

import errno
import ipaddress
import struct
from collections.abc import Sequence
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.maps import PerfBuffer, PerfEventArray, RingBuf
from pyxdp.net import fib as F
from pyxdp.net.packets import udp_packet
from pyxdp.net.test_run import NetdevInfo, TestRunEnv
from pyxdp.spec import MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType, XdpAction
from pyxdp.userspace import UserspaceBackend
from pyxdp.vm.helpers_more import bpf_bprintf

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
M32 = 0xFFFF_FFFF


def neg(err: int) -> int:
    return (-err) & M32


# -- running small programs ---------------------------------------------------------------

ENGINE = "auto"


@pytest.fixture(autouse=True, params=["auto", "interp"])
def engine(request: pytest.FixtureRequest) -> str:
    """Every program test runs on the default engine (the JIT when llvmlite is there)
    and on the interpreter."""
    global ENGINE
    ENGINE = str(request.param)
    return ENGINE


def load(text: str, maps: Sequence[MapSpec] = (), env: TestRunEnv | None = None) -> Collection:
    # Helpers' run-time answers to every argument, some of which Linux's verifier
    # (and pyxdp's) would refuse at load: unverified. The runs land on CPU 0 (not the
    # caller's CPU, as by default), where per-CPU slots and perf rings are read.
    return Collection(asm_collection(text, maps),
                      UserspaceBackend(nr_cpus=2, env=env or TestRunEnv(cpu=0), engine=ENGINE),
                      verify=False)


def run(coll: Collection, data: bytes = bytes(64), ingress: int = 0) -> tuple[int, bytes]:
    ctx = struct.pack("<6I", 0, len(data), 0, ingress, 0, 0) if ingress else None
    r = coll.programs["t"].test_run(data, ctx_in=ctx)
    assert r.fault is None, r.fault
    return r.retval, r.data_out


def array(name: str, value_size: int = 8, entries: int = 4, flags: int = 0,
          contents: tuple[tuple[bytes, bytes], ...] = (), frozen: bool = False,
          kind: BpfMapType = BpfMapType.BPF_MAP_TYPE_ARRAY) -> MapSpec:
    return MapSpec(name, int(kind), 4, value_size, entries, flags, contents=contents,
                   frozen=frozen)


# -- bpf_snprintf: the formatter -------------------------------------------------------------

MEM = {0x1000: b"hello\0", 0x2000: bytes([10, 1, 2, 3]),
       0x3000: bytes.fromhex("20010db8000000000000000000000001"), 0x4000: b"x" * 600 + b"\0"}


def read(addr: int, size: int) -> bytes | None:
    for base, data in MEM.items():
        if base <= addr and addr + size <= base + len(data):
            return data[addr - base:addr - base + size]
    return None


def fmt(f: str, *args: int, size: int = 256) -> tuple[int, bytes]:
    n, out = bpf_bprintf(f.encode(), list(args), read, size)
    return n, out.rstrip(b"\0") if n >= 0 else out


@pytest.mark.parametrize(("f", "args", "want"), [
    ("%d %u %x %X", (M32, M32, 255, 255), "-1 4294967295 ff FF"),
    ("%ld %lu %llx %lli", (2**64 - 1, 2**64 - 1, 2**64 - 1, 2**63), "-1 18446744073709551615 "
     "ffffffffffffffff -9223372036854775808"),
    ("%d", (0x1_0000_0005,), "5"),  # an int conversion takes the low 32 bits
    ("[%5d][%-5d][%05d][%+d][% d][%-05d]", (42, 42, -42, 7, 7, 3),
     "[   42][42   ][-0042][+7][ 7][3    ]"),
    ("%+u % x %+x", (5, 255, 1), "5 ff 1"),  # sign flags are for signed conversions only
    ("[%c][%3c][%-3c]", (65, 66, 67), "[A][  B][C  ]"),
    ("%s|%8s|%-8s|", (0x1000, 0x1000, 0x1000), "hello|   hello|hello   |"),
    ("%05s", (0x1000,), "hello"),  # zero padding is for numbers only
    ("%pks %pus.", (0x1000, 0x1000), "hello ."),  # no user memory: %pus prints nothing
    ("%pI4 %pi4", (0x2000, 0x2000), "10.1.2.3 010.001.002.003"),
    ("%pI6", (0x3000,), "2001:0db8:0000:0000:0000:0000:0000:0001"),
    ("%pi6", (0x3000,), "20010db8000000000000000000000001"),
    ("%px %20px", (0x1234, 0x1234), "0000000000001234                 1234"),
    ("%s%%", (0x9999,), "%"),  # an unreadable string prints empty
    ("%pI4", (0x9999,), "0.0.0.0"),  # an unreadable address prints zeros
    ("%ps", (0xffffffff81000000,), "0xffffffff81000000"),
    ("%pI4abc:", (0x2000,), "10.1.2.3:"),  # letters after %pI4 are swallowed
    ("%12pI4|", (0x2000,), "10.1.2.3|"),  # and pre-formatted conversions ignore widths
    ("é%d", (1,), "é1"),  # UTF-8 passes
])
def test_snprintf_formats(f: str, args: tuple[int, ...], want: str) -> None:
    n, out = fmt(f, *args)
    assert out.decode() == want and n == len(want.encode())


def test_snprintf_truncates_and_counts() -> None:
    assert bpf_bprintf(b"%d-%s", [12345, 0x1000], read, 5) == (11, b"1234\0")
    assert bpf_bprintf(b"abc", [], read, 0) == (3, b"")
    assert bpf_bprintf(b"abc", [], read, 1) == (3, b"\0")
    # A pre-formatted conversion is not even counted once the buffer is full
    # (lib/vsprintf.c copies it only while there is room).
    assert bpf_bprintf(b"%d%pI4", [1234, 0x2000], read, 3) == (4, b"12\0")
    assert bpf_bprintf(b"%d%pI4", [1, 0x2000], read, 3)[0] == 9


@pytest.mark.parametrize("f", ["%hd", "%#x", "%.2d", "%*d", "%5%", "abc%", "%z", "%sa",
                               "%p5", "%pI5", "%pkss", "a\x01", "a\x7f", "%lf", "%sé"])
def test_snprintf_bad_formats_are_einval(f: str) -> None:
    assert fmt(f, 0x1000, 0x1000)[0] == -errno.EINVAL


def test_snprintf_needs_an_argument_per_conversion() -> None:
    assert fmt("%d %d", 1)[0] == -errno.EINVAL
    assert fmt("%d", 1, 2)[0] == 1  # extra arguments are fine
    assert fmt("100%%")[1] == b"100%"


def test_snprintf_binary_buffer_overflow_is_enospc() -> None:
    # Strings are copied into a 512-byte argument buffer: the 600-byte one is
    # cut to 511 bytes, and the next conversion finds no room.
    n, out = fmt("%s", 0x4000, size=1024)
    assert n == 511
    assert fmt("%s%d", 0x4000, 1)[0] == -errno.ENOSPC


SNPRINTF = """
r1 = r10
r1 += -64
r2 = {size}
r3 = map[fd:0][0]+0
r4 = r10
r4 += -80
*(u64 *)(r10 -80) = r6
r6 = 77
*(u64 *)(r10 -80) = r6
r6 = map[fd:0][0]+32
*(u64 *)(r10 -72) = r6
r5 = {data_len}
{null}
call bpf_snprintf
r6 = r0
r1 = map[fd:1][0]+0
r2 = *(u64 *)(r10 -64)
*(u64 *)(r1 +0) = r2
r2 = *(u64 *)(r10 -56)
*(u64 *)(r1 +8) = r2
r0 = r6
exit
"""


@pytest.mark.parametrize(("size", "data_len", "null", "want", "text"), [
    (16, 16, "", 9, b"n=77 abc"),
    (4, 16, "", 9, b"n=7"),
    (16, 12, "", neg(errno.EINVAL), b""),  # data_len must be a multiple of 8
    (16, 104, "", neg(errno.EINVAL), b""),  # at most 12 arguments
    (16, 16, "r4 = 0", neg(errno.EINVAL), b""),  # arguments but no array
    (16, 8, "", neg(errno.EINVAL), b""),  # two conversions, one argument
])
def test_snprintf_helper(size: int, data_len: int, null: str, want: int, text: bytes) -> None:
    fmt_value = b"n=%d %s".ljust(32, b"\0") + b"abc\0"
    maps = [array("fmt", 64, 1, contents=((bytes(4), fmt_value),), frozen=True),
            array("out", 16, 1)]
    text_ = SNPRINTF.format(size=size, data_len=data_len, null=null)
    with load(text_, maps) as coll:
        ret, _ = run(coll)
        assert ret == want
        out = coll.maps["out"].handle.lookup(bytes(4)) or b""
        assert out.split(b"\0")[0] == text


# -- bpf_for_each_map_elem ---------------------------------------------------------------

FOR_EACH = """
*(u64 *)(r10 -8) = 0
*(u64 *)(r10 -16) = 0
r1 = map[fd:0]
r2 = subprog[cb]
r3 = r10
r3 += -16
r4 = {flags}
call bpf_for_each_map_elem
r1 = map[fd:1][0]+0
*(u64 *)(r1 +0) = r0
r2 = *(u64 *)(r10 -16)
*(u64 *)(r1 +8) = r2
r2 = *(u64 *)(r10 -8)
*(u64 *)(r1 +16) = r2
r0 = 2
exit
cb:
r0 = *(u64 *)(r4 +0)
r5 = *(u64 *)(r3 +0)
r0 += r5
*(u64 *)(r4 +0) = r0
r0 = *(u64 *)(r4 +8)
r0 += 1
*(u64 *)(r4 +8) = r0
r0 = 0
r5 = *(u32 *)(r2 +0)
if r5 != {stop_key} goto out
r0 = 1
out:
{delete}
exit
"""


def _for_each(kind: BpfMapType, entries: dict[int, int], *, flags: int = 0,
              stop_key: int = 0xFFFF, delete: str = "") -> tuple[int, int, int]:
    """Runs FOR_EACH; returns (r0 of the helper, sum of the values, callback calls)."""
    key_size = 4
    m = MapSpec("m", int(kind), key_size, 8, 8)
    out = array("out", 24, 1)
    text = FOR_EACH.format(flags=flags, stop_key=stop_key, delete=delete)
    with load(text, [m, out]) as coll:
        handle = coll.maps["m"]
        for k, v in entries.items():
            handle.update(k, v)
        run(coll)
        raw = coll.maps["out"].handle.lookup(bytes(4)) or bytes(24)
        ret, total, calls = struct.unpack("<qQQ", raw)
    return ret, total, calls


def test_for_each_array_visits_every_index() -> None:
    assert _for_each(BpfMapType.BPF_MAP_TYPE_ARRAY, {0: 1, 3: 10}) == (8, 11, 8)


def test_for_each_stops_when_the_callback_returns_1() -> None:
    # The stopping element is counted in the helper's return value.
    assert _for_each(BpfMapType.BPF_MAP_TYPE_ARRAY, {1: 5, 2: 7}, stop_key=2) == (3, 12, 3)


def test_for_each_flags_are_einval() -> None:
    assert _for_each(BpfMapType.BPF_MAP_TYPE_ARRAY, {}, flags=1) == (-errno.EINVAL, 0, 0)


@pytest.mark.parametrize("kind", [BpfMapType.BPF_MAP_TYPE_HASH,
                                  BpfMapType.BPF_MAP_TYPE_LRU_HASH])
def test_for_each_hash_visits_present_keys(kind: BpfMapType) -> None:
    assert _for_each(kind, {5: 1, 9: 2, 11: 4}) == (3, 7, 3)


def test_for_each_percpu_array_sees_this_cpus_values() -> None:
    m = MapSpec("m", int(BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY), 4, 8, 2)
    out = array("out", 24, 1)
    with load(FOR_EACH.format(flags=0, stop_key=99, delete=""), [m, out]) as coll:
        coll.maps["m"].update(0, [3, 100])  # cpu 0 sees 3, cpu 1 sees 100
        coll.maps["m"].update(1, [4, 200])
        run(coll)
        raw = coll.maps["out"].handle.lookup(bytes(4)) or bytes(24)
        assert struct.unpack("<qQQ", raw) == (2, 7, 2)


def test_for_each_callback_may_delete_from_a_hash() -> None:
    # Deleting the current key from the callback: the walk goes on with the others.
    delete = ("r6 = r0\nr1 = map[fd:0]\ncall bpf_map_delete_elem\nr0 = r6")
    kind = BpfMapType.BPF_MAP_TYPE_HASH
    assert _for_each(kind, {1: 1, 2: 2, 3: 3}, delete=delete) == (3, 6, 3)


def test_for_each_key_is_read_only() -> None:
    text = """r1 = map[fd:0]
r2 = subprog[cb]
r3 = 0
r4 = 0
call bpf_for_each_map_elem
exit
cb:
*(u32 *)(r2 +0) = 1
r0 = 0
exit"""
    with load(text, [array("m")]) as coll:
        r = coll.programs["t"].test_run(bytes(64))
        assert r.fault is not None and "read-only" in r.fault


def test_for_each_in_the_multi_prog_sample() -> None:
    backend = UserspaceBackend(engine=ENGINE)
    with Collection.load(SAMPLES / "loader" / "multi_prog.v3.o", backend) as coll:
        assert coll.programs["multi_loop"].test_run(bytes(64)).retval == XdpAction.XDP_PASS
        assert coll.maps["counters"][5] == 45 + 10  # the counters bpf_loop filled in


# -- ring buffers ----------------------------------------------------------------------------

RINGBUF = MapSpec("rb", int(BpfMapType.BPF_MAP_TYPE_RINGBUF), 0, 0, 4096)


def _ring_prog(body: str) -> str:
    return f"""*(u64 *)(r10 -8) = 0
r6 = 0x1122334455667788 ll
*(u64 *)(r10 -8) = r6
{body}
exit"""


def test_ringbuf_reserve_submit_and_discard() -> None:
    body = """r1 = map[fd:0]
r2 = 8
r3 = 0
call bpf_ringbuf_reserve
if r0 == 0 goto fail
r6 = 0x55
*(u64 *)(r0 +0) = r6
r1 = r0
r2 = 1
call bpf_ringbuf_submit
r1 = map[fd:0]
r2 = 16
r3 = 0
call bpf_ringbuf_reserve
if r0 == 0 goto fail
r1 = r0
r2 = 0
call bpf_ringbuf_discard
r0 = 2
exit
fail:
r0 = 0"""
    with load(_ring_prog(body), [RINGBUF]) as coll:
        assert run(coll)[0] == XdpAction.XDP_PASS
        rb = coll.maps["rb"].handle
        assert isinstance(rb, RingBuf)
        assert list(rb.records()) == [struct.pack("<Q", 0x55)]  # the discarded one is skipped
        assert rb.query(3) == 16 + 24  # producer position: both records with headers


@pytest.mark.parametrize(("size", "flags", "null"), [
    (8, 1, True),         # reserve takes no flags
    (4096, 0, True),      # header + sample must fit the ring
    (4088, 0, True),      # and stay a byte short of a full lap
    (4080, 0, False),     # the largest record: 4088 bytes with its header
])
def test_ringbuf_reserve_null(size: int, flags: int, null: bool) -> None:
    body = f"""r1 = map[fd:0]
r2 = {size}
r3 = {flags}
call bpf_ringbuf_reserve
if r0 == 0 goto out
r1 = r0
r2 = 0
call bpf_ringbuf_discard
r0 = 1
out:"""
    with load(_ring_prog(body), [RINGBUF]) as coll:
        assert run(coll)[0] == (0 if null else 1)


def test_ringbuf_output_and_query() -> None:
    body = """r1 = map[fd:0]
r2 = r10
r2 += -8
r3 = 8
r4 = {flags}
call bpf_ringbuf_output
r7 = r0
r1 = map[fd:0]
r2 = {query}
call bpf_ringbuf_query
r1 = map[fd:1][0]+0
*(u64 *)(r1 +0) = r7
*(u64 *)(r1 +8) = r0
r0 = 2"""
    cases = [(0, 0, 0, 16), (2, 1, 0, 4096), (1, 2, 0, 0), (0, 3, 0, 16), (0, 9, 0, 0),
             (4, 0, -errno.EINVAL, 0)]
    for flags, query, want_ret, want_query in cases:
        with load(_ring_prog(body.format(flags=flags, query=query)),
                  [RINGBUF, array("out", 16, 1)]) as coll:
            run(coll)
            raw = coll.maps["out"].handle.lookup(bytes(4)) or bytes(16)
            assert struct.unpack("<qQ", raw) == (want_ret, want_query), (flags, query)


def test_ringbuf_output_when_full_is_eagain() -> None:
    body = """r1 = map[fd:0]
r2 = r10
r2 += -8
r3 = 8
r4 = 0
call bpf_ringbuf_output"""
    with load(_ring_prog(body), [RINGBUF]) as coll:
        results = [run(coll)[0] for _ in range(256)]
        # 4096 bytes hold 255 records of 16 (the producer stays 8 bytes short of a lap).
        assert results[:255] == [0] * 255 and results[255] == neg(errno.EAGAIN)


# -- bpf_perf_event_output -------------------------------------------------------------------

PERF = MapSpec("perf", int(BpfMapType.BPF_MAP_TYPE_PERF_EVENT_ARRAY), 4, 4, 4)
PERF_PROG = """r6 = 0x1122334455667788 ll
*(u64 *)(r10 -8) = r6
r2 = map[fd:0]
r3 = {flags} ll
r4 = r10
r4 += -8
r5 = 8
call bpf_perf_event_output
exit"""


@pytest.mark.parametrize(("flags", "want"), [
    (0xFFFF_FFFF, neg(errno.ENOENT)),  # BPF_F_CURRENT_CPU, no event open there
    (4, neg(errno.E2BIG)),
    (1 << 52, neg(errno.EINVAL)),       # past BPF_F_CTXLEN_MASK
    (65 << 32, neg(errno.EFAULT)),      # more packet bytes than the packet has
])
def test_perf_event_output_errors(flags: int, want: int) -> None:
    with load(PERF_PROG.format(flags=flags), [PERF]) as coll:
        assert run(coll)[0] == want


def test_perf_event_output_appends_packet_bytes() -> None:
    with load(PERF_PROG.format(flags=(5 << 32) | 0xFFFF_FFFF), [PERF]) as coll:
        handle = coll.maps["perf"].handle
        assert isinstance(handle, PerfEventArray)
        buf = PerfBuffer(handle, cpus=[0])
        assert run(coll, bytes(range(64)))[0] == 0
        # 8 bytes of data + 5 of packet, zero-padded so that 4 + length is 8-aligned.
        assert list(buf.records()) == [(0, struct.pack("<Q", 0x1122334455667788)
                                        + bytes(range(5)) + bytes(7))]
        with load(PERF_PROG.format(flags=1), [PERF]) as other:  # slot 1: an event of cpu 1
            h = other.maps["perf"].handle
            assert isinstance(h, PerfEventArray)
            h.attach(1, h.new_ring(1, 1))
            assert run(other)[0] == neg(errno.EOPNOTSUPP)


def test_perf_event_output_reads_frags() -> None:
    with load(PERF_PROG.format(flags=(5000 << 32) | 0xFFFF_FFFF), [PERF]) as coll:
        handle = coll.maps["perf"].handle
        assert isinstance(handle, PerfEventArray)
        buf = PerfBuffer(handle, cpus=[0], page_cnt=4)
        pkt = bytes(i & 0xFF for i in range(6000))
        assert run(coll, pkt)[0] == 0
        (_, raw), = buf.records()
        assert raw[8:8 + 5000] == pkt[:5000]


def test_sampler_sample_uses_both_channels() -> None:
    with Collection.load(SAMPLES / "sampler.o",
                         UserspaceBackend(engine=ENGINE, env=TestRunEnv(cpu=0))) as coll:
        handle = coll.maps["samples_perf"].handle
        assert isinstance(handle, PerfEventArray)
        perf = PerfBuffer(handle, cpus=[0])
        r = coll.programs["xdp_sampler"].test_run(bytes(range(100)))
        assert r.retval == XdpAction.XDP_PASS and r.fault is None
        rb = coll.maps["samples_rb"].handle
        assert isinstance(rb, RingBuf)
        (rec,) = list(rb.records())
        assert struct.unpack_from("<5I", rec, 16)[3:] == (100, 64)  # pkt_len, cap_len
        assert rec[40:104] == bytes(range(64))
        ((cpu, raw),) = list(perf.records())
        assert cpu == 0 and raw[24:24 + 64] == bytes(range(64))
        assert r.trace == ("pyxdp sampler: first sample, ifindex 1, 100 bytes",)


# -- bpf_fib_lookup ------------------------------------------------------------------------

def net() -> F.Fib:
    """va (2) 10.0.0.1/24 + 2001:db8::1/64, vb (3) 10.0.1.1/24, and routes of every type."""
    fib = F.Fib()
    fib.add_device(2, "va", mac="02:00:00:00:00:0a", addresses=["10.0.0.1/24", "2001:db8::1/64"])
    fib.add_device(3, "vb", mac="02:00:00:00:00:0b", mtu=1400, addresses=["10.0.1.1/24"])
    fib.add_device(4, "small", mtu=1000, addresses=["10.0.3.1/24"])
    fib.set_forwarding(True)
    fib.add_route("10.1.0.0/16", via="10.0.0.2", metric=7)
    fib.add_route("10.1.5.0/24", via="10.0.1.2")
    fib.add_route("10.2.0.0/16", type="blackhole")
    fib.add_route("10.3.0.0/16", type="unreachable")
    fib.add_route("10.4.0.0/16", type="prohibit")
    fib.add_route("10.5.0.0/16", via="10.0.0.2", mtu=1200, mtu_lock=True)
    fib.add_route("10.6.0.0/16", via="10.0.0.2", mtu=1200)
    fib.add_route("10.8.0.0/16", via="2001:db8::2", dev="va")
    fib.add_route("10.9.0.0/16", via="10.0.1.2", table=100)
    fib.add_route("2001:db8:100::/48", via="2001:db8::2")
    fib.add_route("2001:db8:dead::/48", type="blackhole")
    fib.add_neighbour("10.0.0.2", "02:00:00:00:00:a2", dev="va")
    fib.add_neighbour("10.0.1.2", "02:00:00:00:00:b2", dev="vb", state="stale")
    fib.add_neighbour("10.0.0.3", "02:00:00:00:00:a3", dev="va", state="failed")
    fib.add_neighbour("2001:db8::2", "02:00:00:00:00:a6", dev="va")
    return fib


def lookup(fib: F.Fib, dst: str, *, ifindex: int = 2, flags: int = 0, tot_len: int = 0,
           src: str | None = None, tbid: int = 0, mark: int = 0) -> tuple[int, F.FibLookup]:
    p = F.FibLookup()
    a = ipaddress.ip_address(dst)
    p.family = F.AF_INET if a.version == 4 else F.AF_INET6
    p.ifindex = ifindex
    p.tot_len = tot_len
    p.set_dst(a)
    if src is not None:
        p.set_src(ipaddress.ip_address(src))
    p.tbid = tbid
    if mark:
        p.raw[52:56] = struct.pack("<I", mark)
    return fib.bpf_fib_lookup(p, flags), p


def test_fib_success_writes_the_forwarding_params() -> None:
    p = F.FibLookup()
    ret, p = lookup(net(), "10.1.2.3", tot_len=100, tbid=0xAAAA_BBBB)
    assert ret == F.FibRet.SUCCESS
    assert (p.ifindex, p.rt_metric, str(p.dst(F.AF_INET))) == (2, 7, "10.0.0.2")
    assert p.smac == bytes.fromhex("02000000000a") and p.dmac == bytes.fromhex("0200000000a2")
    assert p.mtu_result == 1500 and p.tbid == 0  # VLAN fields cleared, MTU reported
    ret, p = lookup(net(), "10.1.5.9")  # longest prefix, a stale neighbour is valid
    assert ret == F.FibRet.SUCCESS and p.ifindex == 3 and p.mtu_result == 1400


@pytest.mark.parametrize(("dst", "want"), [
    ("10.2.0.1", F.FibRet.BLACKHOLE), ("10.3.0.1", F.FibRet.UNREACHABLE),
    ("10.4.0.1", F.FibRet.PROHIBIT), ("10.77.0.1", F.FibRet.NOT_FWDED),
    ("10.0.0.1", F.FibRet.NOT_FWDED),  # local
    ("10.0.0.255", F.FibRet.NOT_FWDED),  # broadcast
    ("10.0.0.3", F.FibRet.NO_NEIGH),  # neighbour FAILED
    ("10.0.0.4", F.FibRet.NO_NEIGH),  # no neighbour
    ("2001:db8:dead::1", F.FibRet.BLACKHOLE), ("2001:db8:100::1", F.FibRet.SUCCESS),
    ("fe80::1", F.FibRet.NOT_FWDED), ("ff02::1", F.FibRet.NOT_FWDED),
])
def test_fib_return_codes(dst: str, want: int) -> None:
    assert lookup(net(), dst)[0] == want


def test_fib_errors_and_forwarding() -> None:
    fib = net()
    assert lookup(fib, "10.1.2.3", ifindex=99)[0] == -errno.ENODEV
    assert lookup(fib, "10.1.2.3", flags=1 << 6)[0] == -errno.EINVAL
    p = F.FibLookup()
    p.family = 7
    assert fib.bpf_fib_lookup(p, 0) == -errno.EAFNOSUPPORT
    # Link-local/multicast are refused before the device is even looked up.
    assert lookup(fib, "fe80::1", ifindex=99)[0] == F.FibRet.NOT_FWDED
    assert lookup(fib, "2001:db8:100::1", ifindex=4)[0] == F.FibRet.FWD_DISABLED  # no IPv6
    fib.device("vb").forwarding = False
    assert lookup(fib, "10.1.2.3", ifindex=3)[0] == F.FibRet.FWD_DISABLED
    assert lookup(F.Fib(), "127.0.0.1", ifindex=1)[0] == F.FibRet.FWD_DISABLED  # the default


def test_fib_mtu() -> None:
    fib = net()
    ret, p = lookup(fib, "10.1.2.3", tot_len=1501)
    assert ret == F.FibRet.FRAG_NEEDED and p.mtu_result == 1500 and p.ifindex == 2
    assert lookup(fib, "10.5.0.1", tot_len=1201)[0] == F.FibRet.FRAG_NEEDED  # "mtu lock 1200"
    assert lookup(fib, "10.6.0.1", tot_len=1201)[0] == F.FibRet.SUCCESS  # unlocked: ignored
    fib.ip_forward_use_pmtu = True
    assert lookup(fib, "10.6.0.1", tot_len=1201)[0] == F.FibRet.FRAG_NEEDED


def test_fib_flags() -> None:
    fib = net()
    ret, p = lookup(fib, "10.1.2.3", flags=F.BPF_FIB_LOOKUP_SKIP_NEIGH)
    assert ret == F.FibRet.SUCCESS and p.dmac == bytes(6)
    assert lookup(fib, "10.0.0.4", flags=F.BPF_FIB_LOOKUP_SKIP_NEIGH)[0] == F.FibRet.SUCCESS
    ret, p = lookup(fib, "10.1.5.9", flags=F.BPF_FIB_LOOKUP_SRC, src="9.9.9.9")
    assert str(p.src(F.AF_INET)) == "10.0.1.1"
    # OUTPUT: only next hops on the given device; 10.1.5.0/24 is on vb, so the /16 on va.
    ret, p = lookup(fib, "10.1.5.9", flags=F.BPF_FIB_LOOKUP_OUTPUT, ifindex=2)
    assert ret == F.FibRet.SUCCESS and p.ifindex == 2
    # DIRECT sees local routes too while local and main are one trie.
    assert lookup(fib, "10.0.0.1", flags=F.BPF_FIB_LOOKUP_DIRECT)[0] == F.FibRet.NOT_FWDED
    direct_tbid = F.BPF_FIB_LOOKUP_DIRECT | F.BPF_FIB_LOOKUP_TBID
    ret, p = lookup(fib, "10.9.0.1", flags=direct_tbid, tbid=100)
    assert ret == F.FibRet.SUCCESS and p.ifindex == 3
    assert lookup(fib, "10.9.0.1", flags=direct_tbid, tbid=55)[0] == F.FibRet.NOT_FWDED
    assert lookup(fib, "10.9.0.1")[0] == F.FibRet.NOT_FWDED
    fib.add_rule(100, fwmark=7)
    assert lookup(fib, "10.9.0.1", flags=F.BPF_FIB_LOOKUP_MARK, mark=7)[0] == F.FibRet.SUCCESS
    assert lookup(fib, "10.9.0.1", flags=F.BPF_FIB_LOOKUP_MARK, mark=8)[0] == \
        F.FibRet.NOT_FWDED
    # With a rule, local and main are separate: DIRECT no longer sees 10.0.0.1 as local.
    assert lookup(fib, "10.0.0.1", flags=F.BPF_FIB_LOOKUP_DIRECT)[0] == F.FibRet.NO_NEIGH


def test_fib_ipv4_route_with_ipv6_gateway() -> None:
    ret, p = lookup(net(), "10.8.0.1")
    assert ret == F.FibRet.SUCCESS and p.family == F.AF_INET6
    assert str(p.dst(F.AF_INET6)) == "2001:db8::2" and p.dmac == bytes.fromhex("0200000000a6")


def test_fib_ipv6_source_selection() -> None:
    fib = net()
    ret, p = lookup(fib, "2001:db8:100::1", flags=F.BPF_FIB_LOOKUP_SRC)
    assert ret == F.FibRet.SUCCESS and str(p.src(F.AF_INET6)) == "2001:db8::1"
    bare = F.Fib(loopback=False)
    bare.add_device(2, "va", addresses=["10.0.0.1/24"], forwarding6=True)
    bare.add_route("2001:db8:1::/64", dev="va")
    assert lookup(bare, "2001:db8:1::1", flags=F.BPF_FIB_LOOKUP_SRC)[0] == F.FibRet.NO_SRC_ADDR


def test_fib_configuration_errors() -> None:
    fib = net()
    with pytest.raises(F.FibError) as e:
        fib.add_route("10.1.0.0/16", via="10.0.0.2", metric=7)
    assert e.value.errno == errno.EEXIST
    with pytest.raises(F.FibError) as e:
        fib.add_route("10.50.0.0/16", via="192.0.2.1")
    assert e.value.errno == errno.ENODEV
    with pytest.raises(F.FibError) as e:
        fib.add_route("10.50.0.0/16", via="10.0.1.9", dev="va")
    assert e.value.errno == errno.ENETUNREACH
    fib.add_device(9, "down", up=False)
    with pytest.raises(F.FibError) as e:
        fib.add_route("10.50.0.0/16", dev="down")
    assert e.value.errno == errno.ENETDOWN
    with pytest.raises(F.FibError):
        fib.add_device(2, "again")


FIB_PROG = """r6 = r1
r2 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r4 = r2
r4 += 64
if r4 > r3 goto bad
r1 = r6
r3 = {plen}
r4 = {flags}
r7 = r2
r2 = map[fd:0][0]+0
r5 = 0
*(u64 *)(r10 -8) = r5
r0 = *(u64 *)(r7 +0)
*(u64 *)(r2 +0) = r0
r0 = *(u64 *)(r7 +8)
*(u64 *)(r2 +8) = r0
r0 = *(u64 *)(r7 +16)
*(u64 *)(r2 +16) = r0
r0 = *(u64 *)(r7 +32)
*(u64 *)(r2 +32) = r0
call bpf_fib_lookup
exit
bad:
r0 = 0x7fffffff
exit"""


def test_fib_lookup_helper_through_test_run() -> None:
    env = TestRunEnv(fib=net())
    p = F.FibLookup()
    p.family = F.AF_INET
    p.ifindex = 2
    p.set_dst(ipaddress.IPv4Address("10.1.2.3"))
    params = array("params", 64, 1)
    with load(FIB_PROG.format(plen=64, flags=0), [params], env) as coll:
        assert run(coll, bytes(p.raw))[0] == F.FibRet.SUCCESS
        out = F.FibLookup(coll.maps["params"].handle.lookup(bytes(4)))
        assert out.ifindex == 2 and out.dmac == bytes.fromhex("0200000000a2")
    with load(FIB_PROG.format(plen=63, flags=0), [params], env) as coll:
        assert run(coll, bytes(p.raw))[0] == neg(errno.EINVAL)


def test_fwd_sample_forwards_through_the_model() -> None:
    env = TestRunEnv(netdevs={1: NetdevInfo(1, "lo"), 2: NetdevInfo(2, "va"),
                              3: NetdevInfo(3, "vb")}, fib=net())
    with Collection.load(SAMPLES / "fwd.o", UserspaceBackend(env=env, engine=ENGINE)) as coll:
        ports = coll.maps["tx_ports"]
        ports.handle.ifindex_ok = lambda i: i in env.fib.devices  # type: ignore[attr-defined]
        ports.update(2, 2)
        ports.update(3, 3)
        pkt = udp_packet(b"x" * 8, src_ip="10.0.1.7", dst_ip="10.1.2.3", ttl=64)
        ctx = struct.pack("<6I", 0, len(pkt), 0, 3, 0, 0)
        r = coll.programs["xdp_fwd"].test_run(pkt, ctx_in=ctx)
        assert r.retval == XdpAction.XDP_REDIRECT, r.fault
        assert r.data_out[:12] == bytes.fromhex("0200000000a2" "02000000000a")
        assert r.data_out[22] == 63  # TTL decremented
        assert r.redirect is not None and r.redirect["tgt_index"] == 2
        blackholed = udp_packet(b"x", src_ip="10.0.1.7", dst_ip="10.2.0.1")
        ctx = struct.pack("<6I", 0, len(blackholed), 0, 3, 0, 0)
        assert coll.programs["xdp_fwd"].test_run(blackholed, ctx_in=ctx).retval == \
            XdpAction.XDP_PASS
        assert coll.maps["fib_results"].sum(F.FibRet.SUCCESS) == 1
        assert coll.maps["fib_results"].sum(F.FibRet.BLACKHOLE) == 1


# -- bpf_check_mtu -------------------------------------------------------------------------

MTU_PROG = """r6 = r1
*(u32 *)(r10 -4) = {mtu_len}
r1 = r6
r2 = {ifindex}
r3 = r10
r3 += -4
r4 = {diff}
r5 = {flags}
call bpf_check_mtu
r1 = map[fd:0][0]+0
r2 = *(u32 *)(r10 -4)
*(u32 *)(r1 +0) = r2
exit"""


@pytest.mark.parametrize(("ifindex", "mtu_len", "diff", "size", "flags", "want", "mtu"), [
    (0, 0, 0, 1514, 0, 0, 1500),          # the ingress device; its whole frame fits
    (0, 0, 0, 1515, 0, 1, 1500),          # one byte over: FRAG_NEEDED, MTU reported
    (0, 0, -1, 1515, 0, 0, 1500),         # len_diff is added
    (0, 1501, 0, 64, 0, 1, 1500),         # mtu_len given: an L3 length
    (3, 1400, 0, 64, 0, 0, 1400),         # another device
    (99, 0, 0, 64, 0, neg(errno.ENODEV), 0),
    (0, 0, 0, 64, 1, neg(errno.EINVAL), 0),  # BPF_MTU_CHK_SEGS is tc only
])
def test_check_mtu(ifindex: int, mtu_len: int, diff: int, size: int, flags: int, want: int,
                   mtu: int) -> None:
    env = TestRunEnv(netdevs={1: NetdevInfo(1, "lo"), 2: NetdevInfo(2, "va")}, fib=net())
    text = MTU_PROG.format(mtu_len=mtu_len, ifindex=ifindex, diff=diff, flags=flags)
    with load(text, [array("out", 4, 1)], env) as coll:
        assert run(coll, bytes(size), ingress=2)[0] == want
        assert coll.maps["out"].handle.lookup(bytes(4)) == struct.pack("<I", mtu or mtu_len)


def test_check_mtu_without_the_ingress_device_in_the_model() -> None:
    env = TestRunEnv(netdevs={1: NetdevInfo(1, "lo"), 2: NetdevInfo(2, "va")}, fib=F.Fib())
    text = MTU_PROG.format(mtu_len=0, ifindex=0, diff=0, flags=0)
    with load(text, [array("out", 4, 1)], env) as coll:
        ctx = struct.pack("<6I", 0, 64, 0, 2, 0, 0)
        r = coll.programs["t"].test_run(bytes(64), ctx_in=ctx)
        assert r.fault is not None and "env.fib.add_device" in r.fault
        # Without ingress_ifindex test_run uses lo, which every model has (MTU 65536).
        assert run(coll, bytes(64))[0] == 0
        assert coll.maps["out"].handle.lookup(bytes(4)) == struct.pack("<I", 65536)


def test_trace_printk_formats_like_bpf_bprintf() -> None:
    """bpf_trace_printk goes through the same formatter as bpf_snprintf (3 arguments)."""
    from pyxdp.vm.helpers_more import MAX_BPRINTF_BUF, bpf_bprintf

    count, text = bpf_bprintf(b"x=%d y=%x\0", [(-5) & (2**64 - 1), 255, 0],
                              lambda a, n: None, MAX_BPRINTF_BUF)
    assert (count, text) == (9, b"x=-5 y=ff\0")  # the count leaves out the NUL
