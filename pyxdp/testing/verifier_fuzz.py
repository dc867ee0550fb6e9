"""Random XDP programs with the bugs people write, for the verifier's differential test.

:func:`random_case` builds a small program from blocks an XDP parser is made
of - packet bounds checks and reads and writes, map lookups, stack buffers,
context reads, pointer arithmetic, helper calls, bounded loops - each drawn
correct or with a typical bug: a missing, short or off-by-one bounds check,
the wrong branch, an unchecked lookup, an index without (or with a wrong)
bound, a stack access out of the frame or misaligned, a narrow or out-of-range
context read or a context write, arithmetic on the wrong pointer type, a
32-bit operation on a pointer, a helper argument of the wrong type or size, a
ringbuf record never submitted, a register read after a call clobbered it, a
packet dynptr misplaced or overwritten and its slice unchecked or overrun.
Linux gives the verdict (tests/kernel/test_verifier_kernel.py): the case's
``linux`` is ``None`` here.
"""

from __future__ import annotations

import random

from pyxdp.testing.verifier_cases import VerifierCase

__all__ = ["random_case"]

_RELOAD = "r2 = *(u32 *)(r6 +0)\nr3 = *(u32 *)(r6 +4)\n"
_SIZES = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}


def _size(rnd: random.Random) -> tuple[int, str]:
    n = rnd.choice((1, 2, 4, 8))
    return n, _SIZES[n]


def _pkt(rnd: random.Random) -> str:
    n = rnd.randrange(0, 48)
    size, ty = _size(rnd)
    off = max(0, n - size + rnd.choice((0, 0, 0, 1, -1, -2, 2)))
    check = rnd.choice(("r4 > r3", "r4 >= r3", "r3 < r4", "r3 <= r4", "r4 > r3", None))
    text = f"r4 = r2\nr4 += {n}\n"
    if check is not None:
        text += f"if {check} goto drop\n"
    base = rnd.choice(("r2", "r2", "r4"))
    o = off if base == "r2" else off - n
    if rnd.random() < 0.3:
        return text + f"*({ty} *)({base} {o:+d}) = {rnd.randrange(256)}\n"
    return text + f"r5 = *({ty} *)({base} {o:+d})\n"


def _map(rnd: random.Random) -> str:
    m, vs = rnd.choice((("hash", 8), ("arr", 16)))
    text = ""
    if rnd.random() < 0.8:
        text += "r1 = 0\n*(u32 *)(r10 -4) = r1\n"
    text += f"r2 = r10\nr2 += {rnd.choice((-4, -4, -4, -2, -8))}\nr1 = MAP({m})\ncall 1\n"
    if rnd.random() < 0.8:
        text += "if r0 == 0 goto drop\n"
    size, ty = _size(rnd)
    if rnd.random() < 0.4:
        bound = rnd.choice((vs // 4 - 1, vs // 4, vs // 4 - 2))
        text += "r1 = *(u32 *)(r0 +0)\n"
        if rnd.random() < 0.8:
            text += f"if r1 > {bound} goto drop\n"
        text += "r1 <<= 2\nr0 += r1\n"
        size, ty = 4, "u32"
    off = rnd.choice((0, vs - size, vs - size + rnd.choice((1, 4, 8)), -1))
    if rnd.random() < 0.3:
        return text + f"*({ty} *)(r0 {off:+d}) = 1\n"
    return text + f"r5 = *({ty} *)(r0 {off:+d})\n"


def _stack(rnd: random.Random) -> str:
    size, ty = _size(rnd)
    off = rnd.choice((-8, -16, -size, -512, -520, 0, -6, -3, -504))
    if rnd.random() < 0.5:
        return f"r5 = 3\n*({ty} *)(r10 {off:+d}) = r5\nr5 = *({ty} *)(r10 {off:+d})\n"
    return f"r5 = *({ty} *)(r10 {off:+d})\n"


def _ctx(rnd: random.Random) -> str:
    size, ty = rnd.choice(((4, "u32"), (4, "u32"), (1, "u8"), (2, "u16"), (8, "u64")))
    off = rnd.choice((0, 4, 8, 12, 16, 20, 24, 2, 13))
    if rnd.random() < 0.15:
        return f"r5 = 1\n*({ty} *)(r6 {off:+d}) = r5\n"
    return f"r5 = *({ty} *)(r6 {off:+d})\n"


def _ptr_alu(rnd: random.Random) -> str:
    reg = rnd.choice(("r2", "r3", "r6", "r10"))
    opr = rnd.choice(("+=", "-=", "*=", "&=", "|=", "<<="))
    w = rnd.random() < 0.2
    dst = reg.replace("r", "w") if w else reg
    src = rnd.choice((str(rnd.choice((1, 4, -4, 14))), "r7" if not w else "w7"))
    text = "r7 = *(u32 *)(r6 +12)\nr7 &= 15\n" if "r7" in src or "w7" in src else ""
    use = f"r5 = *(u8 *)({reg} +0)\n" if reg != "r10" else ""
    return text + f"{dst} {opr} {src}\n" + use


def _helper(rnd: random.Random) -> str:
    k = rnd.randrange(5)
    if k == 0:
        n = rnd.choice((0, 8, 16, 24, 4))
        return (f"r1 = r6\nr2 = 0\nr3 = r10\nr3 += -16\nr4 = {n}\ncall 189\n")
    if k == 1:
        m = rnd.choice(("dev", "hash", "cpus"))
        return f"r1 = MAP({m})\nr2 = 0\nr3 = 0\ncall 51\n"
    if k == 2:
        size = rnd.choice((8, 16))
        text = f"r1 = MAP(rb)\nr2 = {size}\nr3 = 0\ncall 131\n"
        if rnd.random() < 0.8:
            text += "if r0 == 0 goto drop\n"
        off = rnd.choice((0, size - 8, size))
        text += f"r1 = 1\n*(u64 *)(r0 {off:+d}) = r1\n"
        if rnd.random() < 0.8:
            text += "r1 = r0\nr2 = 0\ncall 132\n"
        return text
    if k == 3:
        return "r1 = r6\nr2 = 0\ncall 44\n"
    return f"r1 = r{rnd.choice((2, 10, 6))}\nr2 = 4\nr3 = 0\nr4 = 0\nr5 = 0\ncall 28\n"


def _loop(rnd: random.Random) -> str:
    n = rnd.randrange(1, 12)
    return f"r7 = 0\nr7 += 1\nif r7 < {n} goto -2\n"


def _arr0(rnd: random.Random) -> str:
    """r0 = &arr[0] (a constant key: never NULL)."""
    return "r1 = 0\n*(u32 *)(r10 -4) = r1\nr2 = r10\nr2 += -4\nr1 = MAP(arr)\ncall 1\n"


def _bounds32(rnd: random.Random) -> str:
    cond = rnd.choice(("w1 > 3", "w1 >= 4", "w1 s> 3", "w1 > 4", "r1 > 3", "w1 != 3"))
    text = _arr0(rnd) + "w1 = *(u32 *)(r6 +16)\n"
    text += f"if {cond} goto drop\n"
    return text + "r1 <<= 2\nr0 += r1\nr5 = *(u32 *)(r0 +0)\n"


def _memsx(rnd: random.Random) -> str:
    ty = rnd.choice(("s8", "s16", "u8"))
    text = "r4 = r2\nr4 += 2\nif r4 > r3 goto drop\n" + f"r7 = *({ty} *)(r2 +0)\n"
    if rnd.random() < 0.5:
        text += "if r7 s< 0 goto drop\n"
    text += "if r7 > 12 goto drop\n"
    return text + _arr0(rnd) + "r0 += r7\nr5 = *(u8 *)(r0 +0)\n"


def _stack_var(rnd: random.Random) -> str:
    mask = rnd.choice((7, 15, 31))
    base = rnd.choice((-16, -32, -8))
    text = f"r7 = *(u32 *)(r6 +12)\nr7 &= {mask}\nr8 = r10\nr8 += {base}\nr8 += r7\n"
    if rnd.random() < 0.5:
        text += "r5 = 1\n*(u8 *)(r8 +0) = r5\n"
    return text + "r5 = *(u8 *)(r8 +0)\n"


def _spill(rnd: random.Random) -> str:
    text = "r4 = r2\nr4 += 8\nif r4 > r3 goto drop\n*(u64 *)(r10 -24) = r2\n"
    if rnd.random() < 0.4:
        text += f"r5 = 0\n*({rnd.choice(('u32', 'u8'))} *)(r10 -24) = r5\n"
    return text + "r7 = *(u64 *)(r10 -24)\nr5 = *(u32 *)(r7 +4)\n"


def _atomic(rnd: random.Random) -> str:
    base = rnd.choice(("r0", "r0", "r2"))
    op_ = rnd.choice(("lock *(u64 *)({b} +{o}) += r1",
                      "r1 = atomic64_fetch_add((u64 *)({b} +{o}), r1)",
                      "lock *(u32 *)({b} +{o}) |= w1",
                      "r1 = load_acquire((u64 *)({b} +{o}))",
                      "w1 = load_acquire((u16 *)({b} +{o}))",
                      "store_release((u32 *)({b} +{o}), w1)"))
    off = rnd.choice((0, 8, 12))
    return _arr0(rnd) + "r1 = 1\n" + op_.format(b=base, o=off) + "\n"


def _call(rnd: random.Random) -> str:
    arg = rnd.choice(("r1 = r2\n", "r1 = r10\nr1 += -8\nr5 = 0\n*(u64 *)(r10 -8) = r5\n",
                      "r1 = r6\n", "r4 = r2\nr4 += 4\nif r4 > r3 goto drop\nr1 = r2\n"))
    return arg + "call sub\nr5 = r0\n"


def _dynptr(rnd: random.Random) -> str:
    """A packet dynptr and a slice of it (the slot misplaced, the slice unchecked or read
    past its size, the dynptr overwritten or never made)."""
    at = rnd.choice((-16, -16, -32, -24, -12, -8))
    text = ""
    if rnd.random() < 0.9:
        text += f"r1 = r6\nr2 = 0\nr3 = r10\nr3 += {at}\ncall KFUNC(bpf_dynptr_from_xdp)\n"
    if rnd.random() < 0.15:
        text += f"r5 = 0\n*(u64 *)(r10 {at + rnd.choice((0, 8)):+d}) = r5\n"
    size = rnd.choice((4, 14, 20))
    rdwr = rnd.random() < 0.4
    buf = rnd.choice(("r3 = 0", "r3 = 0", "r3 = r10\nr3 += -48"))
    text += (f"r1 = r10\nr1 += {at}\nr2 = {rnd.choice((0, 0, 2))}\n{buf}\nr4 = {size}\n"
             f"call KFUNC(bpf_dynptr_slice{'_rdwr' if rdwr else ''})\n")
    if rnd.random() < 0.8:
        text += "if r0 == 0 goto drop\n"
    off = rnd.choice((0, size - 2, size - 1))
    if rnd.random() < 0.3:
        return text + f"r5 = 1\n*(u16 *)(r0 {off:+d}) = r5\n"
    return text + f"r5 = *(u16 *)(r0 {off:+d})\n"


_BLOCKS = (_pkt, _pkt, _pkt, _map, _map, _stack, _ctx, _ptr_alu, _helper, _loop, _bounds32,
           _memsx, _stack_var, _spill, _atomic, _call, _dynptr)


def random_case(rnd: random.Random, name: str = "fuzz") -> VerifierCase:
    """One random program (its verdict is Linux's to give)."""
    text = "r6 = r1\n" + _RELOAD
    for _ in range(rnd.randrange(1, 5)):
        if rnd.random() < 0.85:
            text += _RELOAD
        text += rnd.choice(_BLOCKS)(rnd)
    ret = rnd.choice(("r0 = 2\n", "r0 = 2\n", "r0 = r5\n", "r0 = r2\n", ""))
    text += f"{ret}exit\ndrop:\nr0 = 1\nexit"
    if "call sub" in text:
        text += "\nsub:\nr0 = *(u8 *)(r1 +0)\nexit"
    return VerifierCase(name, text, None)
