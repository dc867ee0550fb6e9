"""eBPF arithmetic on Python integers, as ``kernel/bpf/core.c: ___bpf_prog_run`` does it.

Registers hold unsigned 64-bit values; these give the signed views, the signed
division and modulo the kernel's ``do_misc_fixups`` makes total (``x / 0 == 0``,
``x % 0 == x``, ``INT_MIN / -1 == INT_MIN``, ``INT_MIN % -1 == 0``, truncating
toward zero), sign extension (``movsx``) and the byte swap of ``BPF_END``. The
interpreter's operations (:mod:`pyxdp.vm.interp_ops`) call them by these names.
"""

from __future__ import annotations

__all__ = ["M32", "M64", "s32", "s64", "sdiv32", "sdiv64", "smod32", "smod64", "swap", "sx"]

M64 = 0xFFFF_FFFF_FFFF_FFFF
M32 = 0xFFFF_FFFF


def s64(x: int) -> int:
    return x - (1 << 64) if x >> 63 else x


def s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def sdiv64(a: int, b: int) -> int:
    if b == 0:
        return 0
    a, b = s64(a), s64(b)
    q = abs(a) // abs(b)
    return (-q if (a < 0) != (b < 0) else q) & M64


def smod64(a: int, b: int) -> int:
    if b == 0:
        return a
    a, b = s64(a), s64(b)
    r = abs(a) % abs(b)
    return (-r if a < 0 else r) & M64


def sdiv32(a: int, b: int) -> int:
    a, b = s32(a), s32(b)
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return (-q if (a < 0) != (b < 0) else q) & M32


def smod32(a: int, b: int) -> int:
    a32, b = s32(a), s32(b)
    if b == 0:
        return a & M32
    r = abs(a32) % abs(b)
    return (-r if a32 < 0 else r) & M32


def sx(x: int, bits: int) -> int:
    """The low ``bits`` of ``x`` sign-extended (a signed Python int)."""
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


def swap(x: int, nbytes: int) -> int:
    """The low ``nbytes`` of ``x`` in the other byte order."""
    return int.from_bytes((x & ((1 << (8 * nbytes)) - 1)).to_bytes(nbytes, "little"), "big")
