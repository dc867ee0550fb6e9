"""ns/packet of one-helper XDP programs on the JIT: a native twin against the Python helper.

    python bench/bench_helper_twins.py [--batch N] [--runs R] [--only NAME]

Each case is a small XDP program calling one helper per packet
(``get_prandom_u32`` twice, ``check_mtu`` of the ingress device,
``bpf_map_lookup_elem`` on an ARRAY_OF_MAPS, a HASH_OF_MAPS or an XSKMAP with the
entry present, an LPM trie update and delete of one prefix,
``bpf_for_each_map_elem`` over an ARRAY's and a HASH's 16 elements, ``bpf_fib_lookup`` of an
IPv4 and an IPv6 destination a route and a neighbour resolve, ``bpf_snprintf`` of a
number, a zero-padded hex number and a string into a stack buffer and of an IPv4 and an
IPv6 address, ``bpf_trace_printk``
of the same), run on the JIT
through :meth:`XdpProg.run_batch` over ``--batch`` fresh 64-byte frames; the figure is
the best of ``--runs`` batches, ns per packet, with the Python calls a batch made in
pyxdp's code beside it. Run it on two checkouts (with and without a twin) to compare.
"""

from __future__ import annotations

import argparse
import ipaddress
import struct
import sys
import time
from types import SimpleNamespace

import numpy as np

from pyxdp.collection import Collection
from pyxdp.maps.lpm_trie import lpm_key
from pyxdp.net.fib import AF_INET, AF_INET6, Fib, FibLookup
from pyxdp.spec import MapSpec
from pyxdp.testing.native import python_calls
from pyxdp.testing.programs import asm_collection, with_callback
from pyxdp.uapi.bpf import BpfMapType as T
from pyxdp.uapi.bpf import MapFlag
from pyxdp.vm.helpers import RunContext

KEY = "*(u32 *)(r10 -4) = 1\nr2 = r10\nr2 += -4\nr1 = map[fd:0]\ncall 1\n"
PASS = "r0 = 2\nexit\n"
INNER = MapSpec("inner", int(T.BPF_MAP_TYPE_ARRAY), 4, 8, 1)
# bpf_fib_lookup(ctx, &params, 64, 0) with a struct bpf_fib_lookup built on the stack:
# ingress on eth0 (ifindex 2), to a destination a route via a resolved neighbour reaches.
def _fib_prog(family: int, dst: str) -> str:
    p = FibLookup()
    p.family, p.ifindex = family, 2
    p.set_dst(ipaddress.ip_address(dst))
    words = struct.unpack("<16i", bytes(p.raw))
    stores = "".join(f"*(u32 *)(r10 {4 * i - 64}) = {w}\n" for i, w in enumerate(words))
    return stores + "r2 = r10\nr2 += -64\nr3 = 64\nr4 = 0\ncall 69\n" + PASS


# bpf_map_update_elem then bpf_map_delete_elem of 10.1.2.0/24 in an LPM trie of 8
# other prefixes (the key and value on the stack).
LPM = ("*(u32 *)(r10 -8) = 24\n*(u32 *)(r10 -4) = 0x0002010a\n*(u64 *)(r10 -16) = 7\n"
       "r1 = map[fd:0]\nr2 = r10\nr2 += -8\nr3 = r10\nr3 += -16\nr4 = 0\ncall 2\n"
       "r1 = map[fd:0]\nr2 = r10\nr2 += -8\ncall 3\n")
# bpf_for_each_map_elem over every element, a callback reading the key and the value.
FOR_EACH = ("r1 = map[fd:0]\nr2 = subprog[cb]\nr3 = 0\nr4 = 0\ncall 164\n" + PASS
            + "cb:\nr0 = *(u32 *)(r2 +0)\nr0 = *(u64 *)(r3 +0)\nr0 = 0\nexit\n")
# bpf_snprintf(&buf, 64, "n=%d x=%08x %s", {len, 0xbeef, "abc"}, 24): the format and the
# string in a frozen array's value, the arguments and the output on the stack.
SNPRINTF = ("r6 = *(u32 *)(r1 +4)\nr7 = *(u32 *)(r1 +0)\nr6 -= r7\n*(u64 *)(r10 -88) = r6\n"
            "r6 = 0xbeef\n*(u64 *)(r10 -80) = r6\nr6 = map[fd:0][0]+32\n"
            "*(u64 *)(r10 -72) = r6\nr1 = r10\nr1 += -64\nr2 = 64\nr3 = map[fd:0][0]+0\n"
            "r4 = r10\nr4 += -88\nr5 = 24\ncall 165\n" + PASS)
FMT = MapSpec("fmt", int(T.BPF_MAP_TYPE_ARRAY), 4, 64, 1, frozen=True,
              contents=((bytes(4), b"n=%d x=%08x %s".ljust(32, b"\0") + b"abc".ljust(32, b"\0")),))
# bpf_snprintf(&buf, 64, "%pI4 > %pI6", {&v4, &v6}, 16): addresses in the format's map.
SNPRINTF_IP = ("r6 = map[fd:0][0]+32\n*(u64 *)(r10 -88) = r6\nr6 = map[fd:0][0]+48\n"
               "*(u64 *)(r10 -80) = r6\nr1 = r10\nr1 += -64\nr2 = 64\nr3 = map[fd:0][0]+0\n"
               "r4 = r10\nr4 += -88\nr5 = 16\ncall 165\n" + PASS)
FMT_IP = MapSpec("fmt", int(T.BPF_MAP_TYPE_ARRAY), 4, 64, 1, frozen=True, contents=((
    bytes(4), b"%pI4 > %pI6".ljust(32, b"\0") + bytes([10, 1, 2, 3]).ljust(16, b"\0")
    + ipaddress.ip_address("2001:db8::1").packed),))
# bpf_trace_printk(fmt, 15, len, 0xbeef, "abc") with the same format map.
TRACE_PRINTK = ("r3 = *(u32 *)(r1 +4)\nr7 = *(u32 *)(r1 +0)\nr3 -= r7\nr4 = 0xbeef\n"
                "r5 = map[fd:0][0]+32\nr1 = map[fd:0][0]+0\nr2 = 15\ncall 6\n" + PASS)
CASES = {
    "get_prandom_u32 x2": ("call 7\ncall 7\n" + PASS, []),
    "check_mtu (ingress device)": ("*(u32 *)(r10 -4) = 0\nr2 = 0\nr3 = r10\nr3 += -4\nr4 = 0\n"
                                   "r5 = 0\ncall 163\n" + PASS, []),
    "map_lookup_elem/array_of_maps": (KEY + PASS, [MapSpec(
        "m", int(T.BPF_MAP_TYPE_ARRAY_OF_MAPS), 4, 4, 4, inner=INNER), INNER]),
    "map_lookup_elem/hash_of_maps": (KEY + PASS, [MapSpec(
        "m", int(T.BPF_MAP_TYPE_HASH_OF_MAPS), 4, 4, 4, inner=INNER), INNER]),
    "map_lookup_elem/xskmap": (KEY + PASS, [MapSpec("m", int(T.BPF_MAP_TYPE_XSKMAP), 4, 4, 4)]),
    "lpm_trie update + delete": (LPM + PASS, [MapSpec(
        "m", int(T.BPF_MAP_TYPE_LPM_TRIE), 8, 8, 64, int(MapFlag.BPF_F_NO_PREALLOC))]),
    "for_each_map_elem/array (16 entries)": (FOR_EACH, [MapSpec(
        "m", int(T.BPF_MAP_TYPE_ARRAY), 4, 8, 16)]),
    "for_each_map_elem/hash (16 elements)": (FOR_EACH, [MapSpec(
        "m", int(T.BPF_MAP_TYPE_HASH), 4, 8, 16)]),
    "fib_lookup ipv4 (route + neighbour)": (_fib_prog(AF_INET, "10.1.2.3"), []),
    "fib_lookup ipv6 (route + neighbour)": (_fib_prog(AF_INET6, "2001:db8:100::1"), []),
    'snprintf "n=%d x=%08x %s"': (SNPRINTF, [FMT]),
    'snprintf "%pI4 > %pI6"': (SNPRINTF_IP, [FMT_IP]),
    'trace_printk "n=%d x=%08x %s"': (TRACE_PRINTK, [FMT]),
}


def _net(name: str) -> Fib:
    """A namespace: its lo (the ingress device of the others), and for the fib_lookup
    cases an eth0 forwarding to 10.1.0.0/16 and 2001:db8:100::/48 via resolved gateways."""
    net = Fib()
    if name.startswith("fib_lookup"):
        net.add_device(2, "eth0", mac="02:00:00:00:00:01",
                       addresses=["10.0.0.1/24", "2001:db8::1/64"])
        net.set_forwarding(True)
        net.add_route("10.1.0.0/16", via="10.0.0.2")
        net.add_route("2001:db8:100::/48", via="2001:db8::2")
        net.add_neighbour("10.0.0.2", "02:00:00:00:00:02", dev=2)
        net.add_neighbour("2001:db8::2", "02:00:00:00:00:02", dev=2)
    return net


def _fill(c: Collection, name: str) -> None:
    m = c.maps["m"] if "m" in c.maps else None
    if "xskmap" in name and m is not None:
        m.handle.resolve_fd = lambda fd: SimpleNamespace(queue_id=3)
        m.handle.update((1).to_bytes(4, "little"), (7).to_bytes(4, "little"))
    elif "_of_maps" in name and m is not None:
        m.update(1, c.maps["inner"].handle.id)
    elif "for_each" in name and m is not None:
        for i in range(16):
            m.update(i if "array" in name else 1000 + 7 * i, i)
    elif "lpm" in name and m is not None:
        for i in range(8):
            m.handle.update(lpm_key(8 + 2 * i, bytes([10, 4 * i, 0, 0])), bytes(8))


def measure(name: str, batch: int, runs: int) -> tuple[float, int]:
    text, maps = CASES[name]
    mods = [m for n, m in sys.modules.items()
            if (n == "pyxdp" or n.startswith("pyxdp.")) and getattr(m, "__file__", None)]
    spec = asm_collection(text, maps)
    with Collection(with_callback(spec) if "cb:" in text else spec, "userspace",
                    engine="jit") as c:
        _fill(c, name)
        prog = c.programs["t"].handle
        frames = np.zeros((batch, 512), np.uint8)
        ctx = RunContext(fib=_net(name))
        prog.run_batch(frames.copy(), 256, 64, ctx=ctx)  # compiled, warm
        best = float("inf")
        for _ in range(runs):
            ctx.trace.lines.clear()  # the trace pipe read between batches (not timed)
            f = frames.copy()
            t0 = time.perf_counter_ns()
            prog.run_batch(f, 256, 64, ctx=ctx)
            best = min(best, (time.perf_counter_ns() - t0) / batch)
        ctx.trace.lines.clear()
        calls = python_calls(mods, lambda: prog.run_batch(frames.copy(), 256, 64, ctx=ctx))
    return best, calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="", help="cases whose name contains this")
    a = ap.parse_args()
    for name in CASES:
        if a.only in name:
            ns, calls = measure(name, a.batch, a.runs)
            print(f"{name:38s} {ns:10.0f} ns/packet {calls:8d} Python calls a batch")


if __name__ == "__main__":
    main()
