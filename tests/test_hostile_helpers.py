"""Hostile helper calls: arguments a program controls never crash pyxdp or leave it with
an untyped error. A ring buffer's record headers stay out of the program's reach (as the
verifier keeps them in Linux), any failure inside a helper is a ProgramFault naming the
helper, on both engines, through test_run and on the datapath with exact page accounting.
"""

from __future__ import annotations

import random
import re
import struct
from collections.abc import Iterator

import pytest

from pyxdp.collection import Collection
from pyxdp.errors import PyxdpError
from pyxdp.maps import RingBuf
from pyxdp.net.filter import XDP_HELPERS
from pyxdp.net.netdevice import Host
from pyxdp.net.packets import traffic
from pyxdp.net.trace import Tracer
from pyxdp.spec import MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType, XdpAction
from pyxdp.userspace import UserspaceBackend

SEED = 0x14
RINGBUF = MapSpec("rb", int(BpfMapType.BPF_MAP_TYPE_RINGBUF), 0, 0, 4096, 0)
ARRAY = MapSpec("arr", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 4, 0)


@pytest.fixture(params=["interp", "auto"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _load(text: str, engine: str, maps: tuple[MapSpec, ...] = (RINGBUF,)) -> Collection:
    # hostile programs Linux would refuse: their run-time faults are the subject
    return Collection(asm_collection(text, maps), UserspaceBackend(engine=engine), verify=False)


def _reserve_then(body: str) -> str:
    """Reserve 64 bytes into r6 (XDP_PASS when the ring is full), then ``body``."""
    return f"""r1 = map[fd:0]
r2 = 64
r3 = 0
call bpf_ringbuf_reserve
if r0 == 0 goto out
r6 = r0
{body}
out:
r0 = 2
exit"""


# A busy header forged 8 bytes before sample + 16, then that address submitted.
FORGE_AND_SUBMIT_INSIDE = _reserve_then("""r2 = 0xfffffff0
*(u32 *)(r6 +8) = r2
r1 = r6
r1 += 16
r2 = 0
call bpf_ringbuf_submit""")


@pytest.mark.parametrize("body", [
    FORGE_AND_SUBMIT_INSIDE.split("r6 = r0\n", 1)[1].rsplit("out:", 1)[0],
    "r1 = r10\nr1 += -64\nr2 = 0\ncall bpf_ringbuf_submit",           # the stack
    "r1 = r6\nr2 = 0\ncall bpf_ringbuf_submit\nr1 = r6\nr2 = 0\ncall bpf_ringbuf_discard",
    "r1 = r6\nr1 += 4096\nr2 = 0\ncall bpf_ringbuf_submit",           # the mirror half
], ids=["forged-header", "stack", "twice", "mirror"])
def test_commit_of_anything_but_a_reservation_faults(body: str, engine: str) -> None:
    with _load(_reserve_then(body), engine) as coll:
        r = coll.programs["t"].test_run(bytes(64))
        assert r.retval == XdpAction.XDP_ABORTED and r.fault is not None
        assert "call bpf_ringbuf_" in r.fault and re.search("not (a )?reserved", r.fault)


def test_forged_own_header_changes_nothing(engine: str) -> None:
    # The program rewrites its record's header (busy, huge length) and submits properly:
    # the consumer sees the 64-byte sample, as Linux's would.
    body = """r2 = 0xfffffff0
*(u32 *)(r6 -8) = r2
*(u32 *)(r6 -4) = r2
r2 = 0x55
""" + "".join(f"*(u64 *)(r6 +{8 * k}) = r2\n" for k in range(8)) + """r1 = r6
r2 = 0
call bpf_ringbuf_submit"""
    with _load(_reserve_then(body), engine) as coll:
        for _ in range(70):  # laps the 4096-byte ring
            r = coll.programs["t"].test_run(bytes(64))
            assert r.fault is None and r.retval == XdpAction.XDP_PASS
            rb = coll.maps["rb"].handle
            assert isinstance(rb, RingBuf)
            assert list(rb.records()) == [struct.pack("<Q", 0x55) * 8]


@pytest.mark.parametrize("tracer", [False, True], ids=["native", "python"])
def test_forging_on_the_datapath_is_counted_with_exact_pages(tracer: bool) -> None:
    with Host(tracer=Tracer() if tracer else None) as host:
        eth0 = host.add_device("eth0")
        coll = host.load(asm_collection(FORGE_AND_SUBMIT_INSIDE, (RINGBUF,)), verify=False)
        eth0.attach_xdp(coll.programs["t"])
        eth0.receive(list(traffic(flows=4, count=50)))
        host.run()
        assert eth0.stats.xdp_aborted == 50
        assert eth0.stats.rx_packets == 50
    # leaving the block checked that every page came back exactly once


# -- random arguments to every XDP helper ---------------------------------------------------

# Each argument r1..r5 comes from the packet: a kind byte, then a 64-bit value. Kind 0 is
# the value itself, 1 the packet's data + value, 2 the frame pointer + value, 3 the map.
_ARG = """r7 = *(u8 *)(r6 +{k})
r{n} = *(u64 *)(r6 +{v})
if r7 != 1 goto a{n}_2
r8 = *(u32 *)(r9 +0)
r{n} += r8
goto a{n}_end
a{n}_2:
if r7 != 2 goto a{n}_3
r{n} += r10
goto a{n}_end
a{n}_3:
if r7 != 3 goto a{n}_end
r{n} = map[fd:0]
a{n}_end:"""


def _hostile_program(helper_id: int) -> str:
    # r9 = ctx, r6 = data (the packet holds 5 x (kind, value) = 45 bytes at least).
    lines = ["r9 = r1", "r6 = *(u32 *)(r1 +0)", "r7 = *(u32 *)(r1 +4)", "r8 = r6",
             "r8 += 48", "if r8 > r7 goto out"]
    for n in range(1, 6):
        lines.append(_ARG.format(k=(n - 1) * 9, v=(n - 1) * 9 + 1, n=n))
    lines += [f"call {helper_id}", "out:", "r0 = 2", "exit"]
    return "\n".join(lines)


_VALUES = [0, 1, 4, 8, 14, 63, 64, 255, 4095, 4096, 1 << 31, (1 << 32) - 1, 1 << 32,
           (1 << 63), (1 << 64) - 1, (1 << 64) - 8, (1 << 64) - 512, (1 << 64) - 4096]


def _packets(rng: random.Random, n: int) -> Iterator[bytes]:
    for _ in range(n):
        args = b"".join(bytes([rng.randrange(4)])
                        + struct.pack("<Q", rng.choice(_VALUES) if rng.random() < 0.8
                                      else rng.getrandbits(64)) for _ in range(5))
        yield args + bytes(rng.randrange(3, 200))


# Helpers that take no argument a program can turn hostile, or that end the program.
_SKIP = {5, 7, 8, 12, 42, 118, 125, 160, 208}


def test_random_arguments_end_in_a_result_or_a_fault(engine: str) -> None:
    from pyxdp.vm.jit.engine import compile_together
    ids = sorted(set(XDP_HELPERS) - _SKIP)
    with compile_together(0):  # one LLVM module for all of them
        colls = [_load(_hostile_program(h), engine, (ARRAY,)) for h in ids]
    for helper_id, coll in zip(ids, colls, strict=True):
        rng = random.Random(SEED * 1000 + helper_id)
        with coll:
            prog = coll.programs["t"]
            for pkt in _packets(rng, 10):
                try:
                    r = prog.test_run(pkt)
                except PyxdpError:
                    continue  # a typed refusal (BPF_PROG_TEST_RUN's own errors)
                assert r.fault is None or "pc " in r.fault, r.fault
