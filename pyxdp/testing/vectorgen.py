"""pyxdp's own conformance vectors, with expected results taken from Linux.

The bpf_conformance ``.data`` format (see :mod:`pyxdp.testing.conformance`)
for a set written by this project: each vector's program and memory are
below; its ``-- result`` (or ``-- error``, where the verifier refuses the
program) is what the kernel returns under BPF_PROG_TEST_RUN through
:class:`pyxdp.testing.kernel_runner.KernelRunner`, never a value written by
hand. ``python -m pyxdp.testing.vectorgen`` (root, bpf(2)) regenerates the
committed files in ``pyxdp/testing/vectors``, which ``pyxdp conformance``
runs when given no path, so the command works after a plain install.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pyxdp.errors import VerifierError

__all__ = ["BUILTIN_DIR", "SOURCES", "Source", "generate", "main", "render"]

BUILTIN_DIR: Final = Path(__file__).resolve().parent / "vectors"
"""Where the generated vectors live inside the package."""


@dataclass(frozen=True)
class Source:
    """A vector before the kernel ran it: name, what it checks, program, memory."""

    name: str
    about: str
    asm: str
    mem: bytes = b""


def _s(name: str, about: str, asm: str, mem: bytes = b"") -> Source:
    return Source(name, about, "\n".join(ln.strip() for ln in asm.strip().splitlines()), mem)


SOURCES: Final[tuple[Source, ...]] = (
    _s("alu32-wraps", "32-bit add wraps and zero-extends into the upper half", """
        lddw %r0, 0xffffffffffffffff
        add32 %r0, 2
        exit"""),
    _s("alu64-sub-borrow", "64-bit sub borrows across the word", """
        mov %r0, 0
        sub %r0, 1
        exit"""),
    _s("mul32-truncates", "32-bit mul keeps the low word of the product", """
        mov32 %r0, 0x10001
        mov32 %r1, 0x10001
        mul32 %r0, %r1
        exit"""),
    _s("div64-by-zero", "unsigned 64-bit division by a zero register gives 0", """
        mov %r0, 77
        mov %r1, 0
        div %r0, %r1
        exit"""),
    _s("mod64-by-zero", "unsigned 64-bit modulo by zero leaves the dividend", """
        mov %r0, 77
        mov %r1, 0
        mod %r0, %r1
        exit"""),
    _s("mod32-by-zero-truncates", "32-bit modulo by zero keeps the dividend's low word", """
        lddw %r0, 0x1122334455667788
        mov %r1, 0
        mod32 %r0, %r1
        exit"""),
    _s("sdiv64-negative", "signed division truncates toward zero", """
        mov %r0, -7
        sdiv %r0, 2
        exit"""),
    _s("smod32-negative-dividend", "signed modulo takes the dividend's sign", """
        mov32 %r0, -7
        mov32 %r1, 3
        smod32 %r0, %r1
        exit"""),
    _s("sdiv64-intmin-by-minus-one", "INT64_MIN / -1 wraps to INT64_MIN", """
        lddw %r0, 0x8000000000000000
        mov %r1, -1
        sdiv %r0, %r1
        exit"""),
    _s("neg32-zero-extends", "32-bit negation clears the upper word", """
        lddw %r0, 0xffffffff00000005
        neg32 %r0
        exit"""),
    _s("lsh64-reg-masked", "a 64-bit shift by a register uses its low six bits at run time", """
        mov %r0, 1
        ldxb %r1, [%r1]
        lsh %r0, %r1
        exit""", bytes([65])),
    _s("rsh32-reg-masked", "a 32-bit shift by a register uses its low five bits at run time", """
        mov32 %r0, 0x80000000
        ldxb %r1, [%r1]
        rsh32 %r0, %r1
        exit""", bytes([33])),
    _s("arsh32-sign", "32-bit arithmetic shift fills with the sign and zero-extends", """
        mov32 %r0, 0x80000000
        arsh32 %r0, 4
        exit"""),
    _s("arsh64-sign", "64-bit arithmetic shift fills with the sign", """
        lddw %r0, 0x8000000000000000
        arsh %r0, 63
        exit"""),
    _s("be16-from-memory", "to big endian from a little-endian load", """
        ldxh %r0, [%r1]
        be16 %r0
        exit""", bytes([0x12, 0x34])),
    _s("le32-truncates", "le32 on a little-endian host keeps the low word", """
        lddw %r0, 0x1122334455667788
        le32 %r0
        exit"""),
    _s("bswap64", "unconditional byte swap", """
        lddw %r0, 0x0102030405060708
        bswap64 %r0
        exit"""),
    _s("movsx16-64", "sign-extending move from 16 bits", """
        mov %r1, 0x8001
        movsx1664 %r0, %r1
        exit"""),
    _s("ldxsw", "sign-extending word load", """
        ldxsw %r0, [%r1+4]
        exit""", bytes([0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff])),
    _s("ldxdw-unaligned", "an unaligned doubleword load from the packet", """
        ldxdw %r0, [%r1+1]
        exit""", bytes(range(1, 10))),
    _s("stx-then-ld-memory", "stores land in the vector memory", """
        mov %r2, 0x5a
        stxb [%r1+3], %r2
        sth [%r1+0], 0x1234
        ldxw %r0, [%r1]
        exit""", bytes(4)),
    _s("stack-spill-fill", "a spilled 64-bit register fills back whole", """
        lddw %r2, 0xdeadbeefcafef00d
        stxdw [%r10-16], %r2
        ldxdw %r0, [%r10-16]
        exit"""),
    _s("stack-narrow-fill", "a narrow fill reads the low bytes of a spill", """
        lddw %r2, 0xdeadbeefcafef00d
        stxdw [%r10-8], %r2
        ldxh %r0, [%r10-6]
        exit"""),
    _s("jset32-upper-ignored", "jset32 tests only the low word", """
        lddw %r1, 0x100000000
        mov %r0, 1
        jset32 %r1, -1, done
        mov %r0, 2
        done:
        exit"""),
    _s("jslt-signed", "signed compare sees -1 below 1", """
        mov %r1, -1
        mov %r0, 0
        jslt %r1, 1, yes
        exit
        yes:
        mov %r0, 1
        exit"""),
    _s("jlt-unsigned", "unsigned compare sees -1 above 1", """
        mov %r1, -1
        mov %r0, 0
        jlt %r1, 1, yes
        exit
        yes:
        mov %r0, 1
        exit"""),
    _s("jeq32-imm-sign", "a 32-bit compare with a negative immediate", """
        mov32 %r1, -2
        mov %r0, 0
        jeq32 %r1, -2, yes
        exit
        yes:
        mov %r0, 1
        exit"""),
    _s("bounded-loop", "a counted loop the verifier can prove terminates", """
        mov %r0, 0
        mov %r1, 10
        loop:
        add %r0, %r1
        sub %r1, 1
        jne %r1, 0, loop
        exit"""),
    _s("memory-sum", "a loop over eight bytes of the vector memory", """
        mov %r0, 0
        mov %r3, 0
        loop:
        jge %r3, 8, done
        mov %r4, %r1
        add %r4, %r3
        ldxb %r5, [%r4]
        add %r0, %r5
        add %r3, 1
        ja loop
        done:
        exit""", bytes([1, 2, 3, 4, 5, 6, 7, 250])),
    _s("call-local-args", "a subprogram gets r1-r5 and returns in r0", """
        mov %r1, 3
        mov %r2, 4
        call local mul
        add %r0, 1
        exit
        mul:
        mov %r0, %r1
        mul %r0, %r2
        exit"""),
    _s("call-local-callee-stack", "each call frame has its own stack", """
        mov %r6, 11
        stxdw [%r10-8], %r6
        call local f
        ldxdw %r1, [%r10-8]
        add %r0, %r1
        exit
        f:
        mov %r2, 100
        stxdw [%r10-8], %r2
        ldxdw %r0, [%r10-8]
        exit"""),
    _s("lock-fetch-add64", "fetch-add returns the old value and stores the sum", """
        mov %r2, 5
        stxdw [%r10-8], %r2
        mov %r3, 7
        lock fetch add [%r10-8], %r3
        ldxdw %r0, [%r10-8]
        lsh %r0, 8
        add %r0, %r3
        exit"""),
    _s("lock-xchg32", "xchg32 swaps a word and zero-extends the old value", """
        mov32 %r2, -1
        stxw [%r10-4], %r2
        mov %r3, 9
        lock xchg32 [%r10-4], %r3
        ldxw %r0, [%r10-4]
        lsh %r0, 32
        or %r0, %r3
        exit"""),
    _s("load-acquire8-zero-extends", "a byte load-acquire replaces all 64 bits of its "
       "register", """
        lddw %r2, 0x8899aabbccddeeff
        stxdw [%r10-8], %r2
        mov %r0, -1
        w0 = load_acquire((u8 *)(r10 - 1))
        exit"""),
    _s("load-acquire-widths", "load-acquires of 2, 4 and 8 bytes read the little-endian "
       "words of a spill", """
        lddw %r2, 0x8899aabbccddeeff
        stxdw [%r10-8], %r2
        w3 = load_acquire((u16 *)(r10 - 6))
        w4 = load_acquire((u32 *)(r10 - 4))
        r0 = load_acquire((u64 *)(r10 - 8))
        xor %r0, %r4
        lsh %r3, 48
        xor %r0, %r3
        exit"""),
    _s("store-release-narrow", "a 2-byte store-release writes only its two bytes", """
        mov %r2, -1
        stxdw [%r10-8], %r2
        mov32 %r3, 0x12345678
        store_release((u16 *)(r10 - 6), w3)
        ldxdw %r0, [%r10-8]
        exit"""),
    _s("store-release64-acquire32", "a load-acquire reads what a store-release wrote", """
        lddw %r3, 0x0123456789abcdef
        store_release((u64 *)(r10 - 16), r3)
        mov %r4, 1
        store_release((u8 *)(r10 - 1), w4)
        w0 = load_acquire((u32 *)(r10 - 12))
        r5 = load_acquire((u8 *)(r10 - 1))
        add %r0, %r5
        exit"""),
    _s("lock-cmpxchg32-miss", "a failed cmpxchg32 loads the old word into r0", """
        mov32 %r2, 40
        stxw [%r10-4], %r2
        mov %r0, 41
        mov %r3, 99
        lock cmpxchg32 [%r10-4], %r3
        ldxw %r1, [%r10-4]
        lsh %r1, 16
        add %r0, %r1
        exit"""),
    _s("lock-or32-from-memory", "an atomic or of a loaded word into a stack word", """
        ldxw %r2, [%r1]
        stw [%r10-4], 0xf0
        lock or32 [%r10-4], %r2
        ldxw %r0, [%r10-4]
        exit""", bytes([0x0f, 0, 0, 0x80])),
    _s("lddw-negative", "a 64-bit immediate with the sign bit", """
        lddw %r0, 0xfffffffffffffffe
        exit"""),
    _s("ja32-over-exit", "the 32-bit unconditional jump", """
        mov %r0, 3
        ja32 out
        back:
        exit
        out:
        add %r0, 4
        ja back"""),
    _s("mem-len-in-r2", "r2 holds the memory's length", """
        mov %r0, %r2
        exit""", bytes(13)),
    _s("error-load-past-end", "reading past the memory is refused", """
        ldxb %r0, [%r1+4]
        exit""", bytes(4)),
    _s("error-stack-above-frame", "a read above the frame pointer is refused", """
        ldxdw %r0, [%r10]
        exit"""),
)


def render(src: Source, result: int | None, error: str | None) -> str:
    """The ``.data`` text of ``src`` with the kernel's outcome."""
    lines = ["# Written for pyxdp; the result is Linux's (python -m pyxdp.testing.vectorgen).",
             f"# {src.about}", "-- asm", src.asm]
    if src.mem:
        lines += ["-- mem", " ".join(f"{b:02x}" for b in src.mem)]
    if error is not None:
        lines += ["-- error", error]
    else:
        assert result is not None
        lines += ["-- result", f"{result:#x}"]
    return "\n".join(lines) + "\n"


def generate(sources: Sequence[Source] = SOURCES) -> dict[str, str]:
    """Run every source on the kernel: file name -> ``.data`` text."""
    from pyxdp.asm.assembler import assemble
    from pyxdp.testing.kernel_runner import KernelRunner, short_reason
    out: dict[str, str] = {}
    with KernelRunner() as runner:
        for src in sources:
            try:
                res = runner.run(assemble(src.asm), src.mem)
            except VerifierError as e:
                out[f"{src.name}.data"] = render(src, None, f"verifier: {short_reason(e.log)}")
                continue
            out[f"{src.name}.data"] = render(src, res.r0, None)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pyxdp.testing.vectorgen",
                                 description="regenerate pyxdp's vectors from Linux (root)")
    ap.add_argument("--out", type=Path, default=BUILTIN_DIR, help="output directory")
    ap.add_argument("--check", action="store_true",
                    help="compare with the files in --out instead of writing")
    args = ap.parse_args(argv)
    files = generate()
    if args.check:
        stale = sorted(n for n, t in files.items()
                       if not (args.out / n).is_file() or (args.out / n).read_text() != t)
        extra = sorted(p.name for p in args.out.glob("*.data") if p.name not in files)
        for n in stale + extra:
            print(f"{args.out / n}: differs from Linux's run", file=sys.stderr)
        return 1 if stale or extra else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for n, t in files.items():
        (args.out / n).write_text(t)
    print(f"{len(files)} vectors written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
