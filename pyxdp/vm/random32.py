"""``lib/random32.c``: the Tausworthe generator (lfsr113) behind ``bpf_get_prandom_u32``.

Linux draws a program's random numbers with ``prandom_u32_state`` from a
per-CPU ``struct rnd_state`` (``bpf_user_rnd_state``, kernel/bpf/core.c).
pyxdp keeps one such state per run context (:class:`pyxdp.vm.context.RunContext`,
one per CPU of a datapath) in a numpy array of four u32 words: the Python
helper steps it here and the JIT's twin (:func:`prandom_u32_ir`) steps the same
words in place, so both engines draw one sequence.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pyxdp.vm.jit.ir import Text

__all__ = ["RndState", "prandom_u32_ir"]

M32 = 0xFFFF_FFFF
# (shift a, shift b, mask c, shift d) per word: TAUSWORTHE(s, a, b, c, d) of random32.c.
_TAPS = ((6, 13, 4294967294, 18), (2, 27, 4294967288, 2),
         (13, 21, 4294967280, 7), (3, 12, 4294967168, 13))
# prandom_seed_state's lower bounds per word (__seed: a word below its bound gets it added).
_MINS = (2, 8, 16, 128)


class RndState:
    """A ``struct rnd_state`` (s1..s4) in ``words``, a uint32 array native code steps too."""

    def __init__(self, seed: int = 0) -> None:
        self.words: npt.NDArray[np.uint32] = np.zeros(4, np.uint32)
        self.seed(seed)

    def seed(self, seed: int) -> None:
        """``prandom_seed_state`` then ``prandom_warmup`` (ten draws), as
        ``prandom_seed_full_state`` leaves a state before first use."""
        seed &= (1 << 64) - 1
        i = ((seed >> 32) ^ (seed << 10) ^ seed) & M32
        self.words[:] = [i + m if i < m else i for m in _MINS]
        for _ in range(10):
            self.u32()

    def u32(self) -> int:
        """``prandom_u32_state``: step the four words, return their xor."""
        out = 0
        words = self.words.tolist()
        for n, (a, b, c, d) in enumerate(_TAPS):
            s = words[n]
            s = (((s & c) << d) & M32) ^ ((((s << a) & M32) ^ s) >> b)
            words[n] = s
            out ^= s
        self.words[:] = words
        return out

    @property
    def address(self) -> int:
        """The host address of the four words (for native code)."""
        return int(self.words.ctypes.data)


def prandom_u32_ir(f: Text, state: str) -> str:
    """Emit ``prandom_u32_state`` over the four u32 words at ``state`` (a ptr): the
    words stepped in place, the xor returned as an i64."""
    out = ""
    for n, (a, b, c, d) in enumerate(_TAPS):
        p = f.gep(state, 4 * n)
        s = f.ins(f"load i32, ptr {p}, align 4")
        hi = f.ins(f"shl i32 {f.ins(f'and i32 {s}, {c - (1 << 32)}')}, {d}")
        sa = f.ins(f"shl i32 {s}, {a}")
        lo = f.ins(f"lshr i32 {f.ins(f'xor i32 {sa}, {s}')}, {b}")
        s1 = f.ins(f"xor i32 {hi}, {lo}")
        f.do(f"store i32 {s1}, ptr {p}, align 4")
        out = s1 if not out else f.ins(f"xor i32 {out}, {s1}")
    return f.ins(f"zext i32 {out} to i64")
