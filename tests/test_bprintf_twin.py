"""bpf_snprintf's, bpf_trace_printk's and bpf_trace_vprintk's native twins on the JIT
against the Python reference (the interpreter): the same return codes, the same bytes
and trace lines over random formats and arguments (errors, faulting strings,
truncation, widths and flags included), and no Python call of the helpers for the
conversions the twins format."""

from __future__ import annotations

import random
import struct

import pytest

from pyxdp.collection import Collection
from pyxdp.net.prog import jit_available
from pyxdp.spec import MapSpec
from pyxdp.testing.native import python_calls
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.userspace import UserspaceBackend
from pyxdp.vm import helpers_more

pytestmark = pytest.mark.skipif(not jit_available(), reason="llvmlite is not installed: no JIT")

# bpf_snprintf(out, ctl.size, fmt, args, ctl.data_len): every argument from a map value.
PROG = """
r6 = map[fd:4][0]+0
r2 = *(u32 *)(r6 +0)
r5 = *(u32 *)(r6 +4)
r1 = map[fd:3][0]+0
r3 = map[fd:0][0]+0
r4 = map[fd:1][0]+0
call bpf_snprintf
exit
"""
# bpf_trace_printk(fmt, ctl.size, args[0], args[1], args[2]).
TRACE = """
r6 = map[fd:4][0]+0
r2 = *(u32 *)(r6 +0)
r1 = map[fd:0][0]+0
r7 = map[fd:1][0]+0
r3 = *(u64 *)(r7 +0)
r4 = *(u64 *)(r7 +8)
r5 = *(u64 *)(r7 +16)
call 6
exit
"""
# bpf_trace_vprintk(fmt, ctl.size, args, ctl.data_len).
VTRACE = """
r6 = map[fd:4][0]+0
r2 = *(u32 *)(r6 +0)
r4 = *(u32 *)(r6 +4)
r1 = map[fd:0][0]+0
r3 = map[fd:1][0]+0
call 177
exit
"""
ARRAY = int(BpfMapType.BPF_MAP_TYPE_ARRAY)
MAPS = [MapSpec("fmt", ARRAY, 4, 1100, 1), MapSpec("args", ARRAY, 4, 96, 1),
        MapSpec("strs", ARRAY, 4, 256, 1), MapSpec("out", ARRAY, 4, 128, 1),
        MapSpec("ctl", ARRAY, 4, 8, 1)]
K = bytes(4)
# Strings: short ones, an empty one, and one running to the value's end (no NUL: the
# string then runs off mapped memory and faults).
STRS = b"abc\0hello world\0\0x\0" + bytes(range(0x80, 0xA0)) + b"\0"
STRS = STRS + b"s" * (256 - len(STRS))

IPS = ["pI4", "pi4", "pI6", "pi6"]
SUPPORTED = ["d", "i", "u", "x", "X", "ld", "lld", "lu", "llx", "lX", "c", "s", "p", "pK", "px",
             *IPS]
WIDTHS = ["", "", "", "1", "5", "17", "0", "120", "99999999999"]
OTHER = ["pB", "pks", "pus", "ps", "pS", "hd", "q", "lc", "pz", "", "%", "s7", "pI4x", "pI5",
         "pi"]


def _conv(rng: random.Random, kinds: list[str], widths: list[str]) -> tuple[str, str]:
    kind = rng.choice(kinds)
    flags = "".join(rng.choice("0+- ") for _ in range(rng.choice((0, 0, 1, 2))))
    width = rng.choice(widths)
    return "%" + flags + width + kind, kind


def _literal(rng: random.Random) -> bytes:
    return rng.choice([b"", b"a", b"ab1", b" ", b"-", b"=", b"%%", b"x9:", b"\xe9t\xe9",
                       b"\t", b"\x01", b"\x7f", b"Z"])


def _arg(rng: random.Random, kind: str, strs: int) -> int:
    """A number, or for a string conversion an address: into the strings, past their
    value's end, or unmapped (strings' addresses differ between collections, so they
    are never printed as numbers)."""
    if kind in ("s", "pks", "pI4", "pi4", "pI6", "pi6"):
        return rng.choice([strs + rng.choice((0, 4, 16, 17, 19, 30, 52)), strs + 200, 0x10,
                           rng.getrandbits(64)])
    return rng.choice([rng.getrandbits(64), rng.getrandbits(32), rng.randint(0, 300),
                       -rng.randint(1, 99) & (2**64 - 1)])


def _case(rng: random.Random, supported: bool, strs: int, native: bool
          ) -> tuple[bytes, bytes, bytes]:
    """(format, arguments, ctl) of one call; ``native``: only what the twins format
    themselves (an address conversion not met with the output full)."""
    kinds = SUPPORTED if supported else SUPPORTED + OTHER
    widths = WIDTHS
    if native and rng.random() < 0.5:
        kinds, widths = [k for k in SUPPORTED if k not in IPS], WIDTHS
    elif native:
        kinds, widths = ["d", "x", "s", *IPS], [""]
    fmt = b""
    args = []
    for _ in range(rng.randint(0, 6 if widths is WIDTHS else 3)):
        fmt += _literal(rng) if not supported else rng.choice([b"", b"a", b" x", b"%%", b"=9"])
        text, kind = _conv(rng, kinds, widths)
        fmt += text.encode()
        args.append(_arg(rng, kind, strs))
    fmt += _literal(rng) if not supported else b"."
    if not supported and rng.random() < 0.05:
        fmt = b"x" * rng.choice((1023, 1024, 1050))
    if not supported:
        args = args[:rng.choice((len(args), len(args), max(0, len(args) - 1)))]
        args += [rng.getrandbits(8)] * rng.choice((0, 0, 1))
    args = args[:12]
    data_len = 8 * len(args)
    if not supported and rng.random() < 0.1:
        data_len = rng.choice((12, 104, data_len + 8))
    size = rng.choice((0, 1, 2, 7, 16, 64, 128)) if widths is WIDTHS else 128
    return fmt + b"\0", struct.pack(f"<{len(args)}Q", *args).ljust(96, b"\0"), \
        struct.pack("<II", size, data_len)


def _runs(engine: str, supported: bool, n: int = 300, prog_text: str = PROG,
          native: bool = False) -> list[object]:
    rng = random.Random(1)
    out: list[object] = []
    backend = UserspaceBackend(nr_cpus=1, engine=engine)
    with Collection(asm_collection(prog_text, MAPS), backend, verify=False) as c:
        m = {name: c.maps[name].handle for name in ("fmt", "args", "strs", "out", "ctl")}
        m["strs"].update(K, STRS)
        strs = m["strs"].lookup_addr(K)
        prog = c.programs["t"]
        for _ in range(n):
            fmt, args, ctl = _case(rng, supported, strs, native)
            if prog_text in (TRACE, VTRACE):  # the format's size: to its NUL, past it, or short
                size = len(fmt) + rng.choice((0, 0, 5, -1 if supported else -2))
                ctl = struct.pack("<II", max(size, 0),
                                  struct.unpack_from("<I", ctl, 4)[0] if prog_text is VTRACE else 0)
            m["fmt"].update(K, fmt.ljust(1100, b"\0"))
            m["args"].update(K, args)
            m["ctl"].update(K, ctl)
            m["out"].update(K, b"\xaa" * 128)
            r = prog.test_run(bytes(64))
            out.append((fmt, ctl, r.retval, str(r.fault), m["out"].lookup(K), r.trace))
    return out


@pytest.mark.parametrize("supported", [True, False])
def test_snprintf_twin_agrees_with_python(supported: bool) -> None:
    """The same return code, fault and output buffer as the interpreter, call for call."""
    jit, interp = _runs("jit", supported), _runs("interp", supported)
    for a, b in zip(jit, interp, strict=True):
        assert a == b


def test_snprintf_twin_calls_no_python() -> None:
    """Formats of numbers, characters, strings, pointers and IP addresses stay in machine
    code."""
    assert python_calls([helpers_more._snprintf, helpers_more.bpf_bprintf],
                        lambda: _runs("jit", True, 100, native=True)) == 0


@pytest.mark.parametrize("supported", [True, False])
@pytest.mark.parametrize("calls", ["trace_printk", "trace_vprintk"])
def test_trace_printk_twins_agree_with_python(calls: str, supported: bool) -> None:
    """bpf_trace_printk and bpf_trace_vprintk: the same return codes (for vprintk,
    -EINVAL for a data_len not a multiple of 8 or past 96 included) and trace lines as
    the interpreter, call for call."""
    prog = TRACE if calls == "trace_printk" else VTRACE
    jit, interp = _runs("jit", supported, 200, prog), _runs("interp", supported, 200, prog)
    for a, b in zip(jit, interp, strict=True):
        assert a == b


@pytest.mark.parametrize("calls", ["trace_printk", "trace_vprintk"])
def test_trace_printk_twins_call_no_python(calls: str) -> None:
    from pyxdp.vm import helpers as vm_helpers
    prog = TRACE if calls == "trace_printk" else VTRACE
    ref = getattr(vm_helpers, "_" + calls)
    assert python_calls([ref, helpers_more.bpf_bprintf],
                        lambda: _runs("jit", True, 100, prog, native=True)) == 0
