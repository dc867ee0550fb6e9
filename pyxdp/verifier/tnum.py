"""Tristate numbers: ``kernel/bpf/tnum.c``.

A tnum is ``(value, mask)``: bits set in ``mask`` are unknown, the others are
the bits of ``value``. It tracks what the verifier knows about each bit of a
64-bit scalar. Functions take and return ``(value, mask)`` tuples of Python
ints kept in ``[0, 2**64)``.
"""

from __future__ import annotations

__all__ = ["Tnum", "U64", "t_add", "t_and", "t_arshift", "t_cast", "t_const", "t_in",
           "t_intersect", "t_is_const", "t_lshift", "t_mul", "t_or", "t_range", "t_rshift",
           "t_step", "t_sub", "t_subreg", "t_union", "t_unknown", "t_xor", "tnum_str"]

U64 = (1 << 64) - 1
Tnum = tuple[int, int]
t_unknown: Tnum = (0, U64)


def t_const(v: int) -> Tnum:
    return (v & U64, 0)


def t_is_const(t: Tnum) -> bool:
    return t[1] == 0


def t_range(lo: int, hi: int) -> Tnum:
    """The tnum of every value in the unsigned range [lo, hi] (tnum_range)."""
    chi = lo ^ hi
    bits = chi.bit_length()
    if bits > 63:
        return t_unknown
    delta = (1 << bits) - 1
    return (lo & ~delta & U64, delta)


def t_step(a: Tnum, z: int) -> int:
    """The smallest value of ``a`` above ``z`` (tnum_step): its minimum below it, its
    maximum from it on."""
    v, m = a
    tmax = v | m
    if z >= tmax:
        return tmax
    if z < v:
        return v
    y = z + 1  # the least value of a from y on: y's bits as far as a's known bits allow
    diff = (y ^ v) & ~m & U64
    if not diff:
        return y
    bit = 1 << (diff.bit_length() - 1)  # the highest known bit of a that y lacks or has
    low = (bit << 1) - 1
    if v & bit:  # a's known 1 above y's 0: y's higher bits, then a's least
        return (y & ~low) | (v & low)
    # a's known 0 under y's 1: the lowest unknown bit above that y lacks set, a's least below
    free = m & ~y & ~low & U64
    j = free & -free
    return (y & ~((j << 1) - 1)) | j | (v & (j - 1))


def t_lshift(a: Tnum, s: int) -> Tnum:
    return ((a[0] << s) & U64, (a[1] << s) & U64)


def t_rshift(a: Tnum, s: int) -> Tnum:
    return (a[0] >> s, a[1] >> s)


def _s(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) else v


def t_arshift(a: Tnum, s: int, bits: int) -> Tnum:
    m = (1 << bits) - 1
    return ((_s(a[0], bits) >> s) & m, (_s(a[1], bits) >> s) & m)


def t_add(a: Tnum, b: Tnum) -> Tnum:
    sm = (a[1] + b[1]) & U64
    sv = (a[0] + b[0]) & U64
    sigma = (sm + sv) & U64
    chi = sigma ^ sv
    mu = chi | a[1] | b[1]
    return (sv & ~mu & U64, mu)


def t_sub(a: Tnum, b: Tnum) -> Tnum:
    dv = (a[0] - b[0]) & U64
    alpha = (dv + a[1]) & U64
    beta = (dv - b[1]) & U64
    chi = alpha ^ beta
    mu = chi | a[1] | b[1]
    return (dv & ~mu & U64, mu)


def t_and(a: Tnum, b: Tnum) -> Tnum:
    alpha = a[0] | a[1]
    beta = b[0] | b[1]
    v = a[0] & b[0]
    return (v, alpha & beta & ~v & U64)


def t_or(a: Tnum, b: Tnum) -> Tnum:
    v = a[0] | b[0]
    mu = a[1] | b[1]
    return (v, mu & ~v & U64)


def t_xor(a: Tnum, b: Tnum) -> Tnum:
    v = a[0] ^ b[0]
    mu = a[1] | b[1]
    return (v & ~mu & U64, mu)


def t_mul(a: Tnum, b: Tnum) -> Tnum:
    """Long multiplication over the bits of ``a`` (Linux 6.17+): a known 1 adds ``b``
    shifted, an unknown bit takes the union of adding it and not."""
    av, am = a
    bv, bm = b
    v = m = 0  # the accumulator; t_add and t_union inline on plain ints
    while (av or am) and (bv or bm):  # once b is all known zeros nothing changes
        if av & 1 or am & 1:
            sv = (v + bv) & U64
            mu = ((((m + bm) & U64) + sv) & U64) ^ sv | m | bm
            if av & 1:
                v, m = sv & ~mu & U64, mu
            else:  # the union of acc and acc + b
                sv &= ~mu & U64
                mu |= (v ^ sv) | m
                v, m = v & sv & ~mu & U64, mu
        av >>= 1
        am >>= 1
        bv = (bv << 1) & U64
        bm = (bm << 1) & U64
    return (v, m)


def t_union(a: Tnum, b: Tnum) -> Tnum:
    """Every value of ``a`` or of ``b`` (bits they disagree on become unknown)."""
    mu = (a[0] ^ b[0]) | a[1] | b[1]
    return (a[0] & b[0] & ~mu & U64, mu)


def t_intersect(a: Tnum, b: Tnum) -> Tnum:
    v = a[0] | b[0]
    mu = a[1] & b[1]
    return (v & ~mu & U64, mu)


def _swab(v: int, bits: int) -> int:
    return int.from_bytes((v & ((1 << bits) - 1)).to_bytes(bits // 8, "little"), "big")


def t_bswap(a: Tnum, bits: int) -> Tnum:
    """Swap the low ``bits`` bits' bytes, the rest cleared (tnum_bswap16/32/64): every
    known bit moves with its byte."""
    return (_swab(a[0], bits), _swab(a[1], bits))


def t_cast(a: Tnum, size: int) -> Tnum:
    """Truncate to ``size`` bytes (tnum_cast)."""
    m = (1 << (8 * size)) - 1
    return (a[0] & m, a[1] & m)


def t_subreg(a: Tnum) -> Tnum:
    return t_cast(a, 4)


def t_in(a: Tnum, b: Tnum) -> bool:
    """Every value of ``b`` is a value of ``a``."""
    if b[1] & ~a[1] & U64:
        return False
    return a[0] == b[0] & ~a[1] & U64


def tnum_str(a: Tnum) -> str:
    return f"(0x{a[0]:x}; 0x{a[1]:x})"
