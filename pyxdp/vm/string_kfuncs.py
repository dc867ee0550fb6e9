"""The string kfuncs of ``kernel/bpf/helpers.c`` (Linux 6.18, every program type):
``bpf_strcmp``, ``bpf_strcasecmp``, ``bpf_strchr``, ``bpf_strchrnul``, ``bpf_strnchr``,
``bpf_strrchr``, ``bpf_strlen``, ``bpf_strnlen``, ``bpf_strspn``, ``bpf_strcspn``,
``bpf_strstr`` and ``bpf_strnstr``.

Their string arguments are ``__ign``: the verifier does not look at them, so a
program may pass any pointer or number. The kfuncs check only that each string
starts at an address ``copy_from_kernel_nofault`` may read (-ERANGE otherwise, see
:mod:`pyxdp.vm.maccess`), then read byte by byte with ``__get_kernel_nofault``
(-EFAULT at the first unreadable byte) and stop after ``XATTR_SIZE_MAX`` (65,536)
bytes (-E2BIG). They return indexes, lengths or -1/0/1, never pointers; "not found"
is -ENOENT. Linux builds with ``-funsigned-char``: bytes compare as unsigned, a
``char`` argument is the register's low byte and ``bpf_strrchr``'s ``int`` its low
32 bits (a value above 255 never matches). ``bpf_strcasecmp`` folds case with the
kernel's ``tolower`` (``lib/ctype.c``: Latin-1, so 0xC0-0xDE but 0xD7 fold too).
Every ``int`` return is zero-extended in r0, as Linux 6.18's x86 JIT leaves it.

pyxdp's engines call them as helpers of the program's own
(:func:`pyxdp.net.xdp_metadata.bind_kfuncs`), on the JIT through the Python
trampoline.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyxdp.errors import MemoryFault
from pyxdp.vm.maccess import nofault_allowed
from pyxdp.vm.memory import Memory

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["STRING_KFUNCS", "XATTR_SIZE_MAX"]

XATTR_SIZE_MAX = 65536
M32 = 0xFFFF_FFFF
M64 = 0xFFFF_FFFF_FFFF_FFFF
ENOENT, EFAULT, E2BIG, ERANGE = -errno.ENOENT, -errno.EFAULT, -errno.E2BIG, -errno.ERANGE
# lib/ctype.c: the upper-case letters of Latin-1
_UPPER = frozenset(range(0x41, 0x5B)) | frozenset(range(0xC0, 0xDF)) - {0xD7}


class _Fault(Exception):
    """``__get_kernel_nofault`` failed: the kfunc returns -EFAULT."""


class _Str:
    """The bytes from ``addr`` on, read as the program's memory allows (a region's rest
    at a time, then the next region if one starts there)."""

    __slots__ = ("addr", "buf", "mem")

    def __init__(self, mem: Memory, addr: int) -> None:
        self.mem, self.addr, self.buf = mem, addr & M64, b""

    def __getitem__(self, i: int) -> int:
        while i >= len(self.buf):
            at = (self.addr + len(self.buf)) & M64
            try:
                r, off = self.mem.find(at, 1, False)
            except MemoryFault:
                raise _Fault from None
            self.buf += bytes(r.buf[off:off + min(r.size - off, XATTR_SIZE_MAX + 1)])
        return self.buf[i]


def _lower(c: int) -> int:
    return c + 0x20 if c in _UPPER else c


def _run(vm: Interpreter, addrs: tuple[int, ...], body: Callable[..., int]) -> int:
    """-ERANGE unless every string starts at a readable address; else ``body`` over
    them, -EFAULT when it reads an unreadable byte; the ``int`` zero-extended."""
    if not all(nofault_allowed(vm.mem, a) for a in addrs):
        return ERANGE & M32
    try:
        return body(*(_Str(vm.mem, a) for a in addrs)) & M32
    except _Fault:
        return EFAULT & M32


def _cmp(s1: _Str, s2: _Str, fold: bool) -> int:
    for i in range(XATTR_SIZE_MAX):
        c1, c2 = s1[i], s2[i]
        if fold:
            c1, c2 = _lower(c1), _lower(c2)
        if c1 != c2:
            return -1 if c1 < c2 else 1
        if not c1:
            return 0
    return E2BIG


def _nchr(s: _Str, count: int, c: int) -> int:
    i = 0
    while i < count and i < XATTR_SIZE_MAX:
        sc = s[i]
        if sc == c:
            return i
        if not sc:
            return ENOENT
        i += 1
    return E2BIG if i == XATTR_SIZE_MAX else ENOENT


def _chrnul(s: _Str, c: int) -> int:
    for i in range(XATTR_SIZE_MAX):
        sc = s[i]
        if not sc or sc == c:
            return i
    return E2BIG


def _rchr(s: _Str, c: int) -> int:
    last = ENOENT
    for i in range(XATTR_SIZE_MAX):
        sc = s[i]
        if sc == c:
            last = i
        if not sc:
            return last
    return E2BIG


def _nlen(s: _Str, count: int) -> int:
    i = 0
    while i < count and i < XATTR_SIZE_MAX:
        if not s[i]:
            return i
        i += 1
    return E2BIG if i == XATTR_SIZE_MAX else i


def _span(s: _Str, accept: _Str, reject: bool) -> int:
    """strspn (``reject`` False) and strcspn: the inner walk over the set is bounded too."""
    for i in range(XATTR_SIZE_MAX):
        cs = s[i]
        if not cs:
            return i
        j = 0
        while j < XATTR_SIZE_MAX:
            ca = accept[j]
            if cs == ca or not ca:
                break
            j += 1
        if j == XATTR_SIZE_MAX:
            return E2BIG
        if (accept[j] != 0) == reject:
            return i
    return E2BIG


def _nstr(s1: _Str, s2: _Str, n: int) -> int:
    """``__bpf_strnstr``: s2 in the first ``n`` bytes of s1 (s2's NUL may come at n)."""
    for i in range(XATTR_SIZE_MAX):
        j = 0
        while i + j <= n and j < XATTR_SIZE_MAX:
            if not s2[j]:
                return i
            if i + j == n:
                break
            c1 = s1[i + j]
            if not c1:
                return ENOENT
            if c1 != s2[j]:
                break
            j += 1
        if j == XATTR_SIZE_MAX:
            return E2BIG
        if i + j == n:
            return ENOENT
    return E2BIG


def strcmp(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _run(vm, (r1, r2), lambda a, b: _cmp(a, b, False))


def strcasecmp(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _run(vm, (r1, r2), lambda a, b: _cmp(a, b, True))


def strnchr(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _run(vm, (r1,), lambda s: _nchr(s, r2 & M64, r3 & 0xFF))


def strchr(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _run(vm, (r1,), lambda s: _nchr(s, XATTR_SIZE_MAX, r2 & 0xFF))


def strchrnul(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _run(vm, (r1,), lambda s: _chrnul(s, r2 & 0xFF))


def strrchr(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    c = r2 & M32  # an int: compared with each (unsigned) char, so only 0..255 match
    return _run(vm, (r1,), lambda s: _rchr(s, c))


def strnlen(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _run(vm, (r1,), lambda s: _nlen(s, r2 & M64))


def strlen(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _run(vm, (r1,), lambda s: _nlen(s, XATTR_SIZE_MAX))


def strspn(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _run(vm, (r1, r2), lambda s, a: _span(s, a, False))


def strcspn(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _run(vm, (r1, r2), lambda s, a: _span(s, a, True))


def strnstr(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _run(vm, (r1, r2), lambda a, b: _nstr(a, b, r3 & M64))


def strstr(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _run(vm, (r1, r2), lambda a, b: _nstr(a, b, XATTR_SIZE_MAX))


# The kfuncs by name (bound as private helpers, like the iterator kfuncs).
STRING_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_strcmp": strcmp, "bpf_strcasecmp": strcasecmp, "bpf_strchr": strchr,
    "bpf_strchrnul": strchrnul, "bpf_strnchr": strnchr, "bpf_strrchr": strrchr,
    "bpf_strlen": strlen, "bpf_strnlen": strnlen, "bpf_strspn": strspn,
    "bpf_strcspn": strcspn, "bpf_strstr": strstr, "bpf_strnstr": strnstr,
}
