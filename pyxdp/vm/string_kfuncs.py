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
(:func:`pyxdp.net.xdp_metadata.bind_kfuncs`). On the JIT each has a native twin
(each byte translated as a program load is, every error path included), so calling
them costs no Python.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyxdp.errors import MemoryFault
from pyxdp.vm.jit.abi import Natives
from pyxdp.vm.jit.ir import Text, ret_if
from pyxdp.vm.jit.natives import HelperNative, register_kfunc
from pyxdp.vm.maccess import nofault_allowed, nofault_allowed_ir
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


# -- native twins -------------------------------------------------------------------------

class _Loop:
    """A loop over i64 variables: phis at its head, filled in when it is closed."""

    def __init__(self, f: Text, init: dict[str, str]) -> None:
        self.f, self.init, self.pre = f, init, f.cur
        self.v = {k: f.tmp() for k in init}
        self.head = f.label("loop")
        self.back: list[tuple[str, dict[str, str]]] = []
        f.br(self.head)
        f.at(self.head)
        self.at = len(f.lines)

    def again(self, vals: dict[str, str]) -> None:
        self.back.append((self.f.cur, vals))
        self.f.br(self.head)

    def close(self) -> None:
        self.f.lines[self.at:self.at] = [
            f"  {v} = phi i64 [ {self.init[k]}, %{self.pre} ]" +
            "".join(f", [ {vals[k]}, %{blk} ]" for blk, vals in self.back)
            for k, v in self.v.items()]


def _ret(f: Text, v: str) -> None:
    """Return the ``int`` in ``v`` (an i64 holding a signed value) zero-extended."""
    f.do(f"ret i64 {f.ins(f'and i64 {v}, {M32}')}")


def _allowed(f: Text, addr: str) -> None:
    """-ERANGE unless ``copy_from_kernel_nofault_allowed(addr, 1)``."""
    ok = nofault_allowed_ir(f, addr)
    ret_if(f, f.ins(f"xor i1 {ok}, true"), ERANGE & M32)


def _byte(f: Text, addr: str) -> str:
    """The byte at ``addr`` (i64 0..255); -EFAULT returned when it cannot be read."""
    p = f.ins(f"call ptr @translate(ptr %ctx, i64 {addr}, i64 1, i1 false)")
    ret_if(f, f.ins(f"icmp eq ptr {p}, null"), EFAULT & M32)
    return f.ins(f"zext i8 {f.ins(f'load i8, ptr {p}, align 1')} to i64")


def _nlen_fn(kind: str, counted: bool) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        f = Text()
        f.at("entry")
        _allowed(f, "%r1")
        count = "%r2" if counted else str(XATTR_SIZE_MAX)
        loop = _Loop(f, {"i": "0"})
        i = loop.v["i"]
        body, out = f.label("body"), f.label("out")
        more = f.ins(f"and i1 {f.ins(f'icmp ult i64 {i}, {count}')}, "
                     f"{f.ins(f'icmp ult i64 {i}, {XATTR_SIZE_MAX}')}")
        f.cbr(more, body, out)
        f.at(body)
        c = _byte(f, f.ins(f"add i64 %r1, {i}"))
        ret_nul = f.label("nul")
        nxt = f.label("next")
        f.cbr(f.ins(f"icmp eq i64 {c}, 0"), ret_nul, nxt)
        f.at(ret_nul)
        _ret(f, i)
        f.at(nxt)
        loop.again({"i": f.ins(f"add i64 {i}, 1")})
        f.at(out)
        big = f.ins(f"icmp eq i64 {i}, {XATTR_SIZE_MAX}")
        _ret(f, f.ins(f"select i1 {big}, i64 {E2BIG}, i64 {i}"))
        loop.close()
        args = "ptr %ctx, i64 %r1" + (", i64 %r2" if counted else "")
        return f.text(f"define internal i64 @{kind}({args}) nounwind")
    return define


def _chr_fn(kind: str, mode: str, nargs: int) -> Callable[[Natives], str]:
    """The character scans: ``nchr`` (strchr with no count argument, strnchr with one),
    ``chrnul`` and ``rchr`` (its ``int`` compared whole)."""
    def define(natives: Natives) -> str:
        f = Text()
        f.at("entry")
        _allowed(f, "%r1")
        count = "%r2" if nargs == 3 else str(XATTR_SIZE_MAX)
        creg = "%r3" if nargs == 3 else "%r2"
        want = f.ins(f"and i64 {creg}, {M32 if mode == 'rchr' else 0xFF}")
        loop = _Loop(f, {"i": "0", "last": str(ENOENT)})
        i, last = loop.v["i"], loop.v["last"]
        body, out = f.label("body"), f.label("out")
        more = f.ins(f"and i1 {f.ins(f'icmp ult i64 {i}, {count}')}, "
                     f"{f.ins(f'icmp ult i64 {i}, {XATTR_SIZE_MAX}')}")
        f.cbr(more, body, out)
        f.at(body)
        c = _byte(f, f.ins(f"add i64 %r1, {i}"))
        hit = f.ins(f"icmp eq i64 {c}, {want}")
        nul = f.ins(f"icmp eq i64 {c}, 0")
        nxt = f.label("next")
        if mode == "rchr":
            last = f.ins(f"select i1 {hit}, i64 {i}, i64 {last}")
            done = f.label("done")
            f.cbr(nul, done, nxt)
            f.at(done)
            _ret(f, last)
        else:
            found, end = f.label("found"), f.label("end")
            f.cbr(f.ins(f"or i1 {hit}, {nul}" if mode == "chrnul" else f"or i1 {hit}, false"),
                  found, end)
            f.at(found)
            _ret(f, i)
            f.at(end)
            if mode == "nchr":
                stop = f.label("stop")
                f.cbr(nul, stop, nxt)
                f.at(stop)
                _ret(f, str(ENOENT))
            else:
                f.br(nxt)
        f.at(nxt)
        loop.again({"i": f.ins(f"add i64 {i}, 1"), "last": last})
        f.at(out)
        big = f.ins(f"icmp eq i64 {i}, {XATTR_SIZE_MAX}")
        _ret(f, f.ins(f"select i1 {big}, i64 {E2BIG}, i64 {ENOENT}"))
        loop.close()
        args = "ptr %ctx" + "".join(f", i64 %r{k}" for k in range(1, nargs + 1))
        return f.text(f"define internal i64 @{kind}({args}) nounwind")
    return define


def _fold(f: Text, c: str) -> str:
    """``tolower`` of lib/ctype.c (Latin-1) on a byte in an i64."""
    ascii_up = f.ins(f"icmp ult i64 {f.ins(f'sub i64 {c}, 65')}, 26")
    latin = f.ins(f"icmp ult i64 {f.ins(f'sub i64 {c}, 192')}, 31")
    times = f.ins(f"icmp ne i64 {c}, 215")  # 0xD7, the multiplication sign
    up = f.ins(f"or i1 {ascii_up}, {f.ins(f'and i1 {latin}, {times}')}")
    return f.ins(f"select i1 {up}, i64 {f.ins(f'add i64 {c}, 32')}, i64 {c}")


def _cmp_fn(kind: str, fold: bool) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        f = Text()
        f.at("entry")
        _allowed(f, "%r1")
        _allowed(f, "%r2")
        loop = _Loop(f, {"i": "0"})
        i = loop.v["i"]
        body, out = f.label("body"), f.label("out")
        f.cbr(f.ins(f"icmp ult i64 {i}, {XATTR_SIZE_MAX}"), body, out)
        f.at(body)
        c1 = _byte(f, f.ins(f"add i64 %r1, {i}"))
        c2 = _byte(f, f.ins(f"add i64 %r2, {i}"))
        if fold:
            c1, c2 = _fold(f, c1), _fold(f, c2)
        diff, same, end, nxt = f.label("diff"), f.label("same"), f.label("end"), f.label("next")
        f.cbr(f.ins(f"icmp ne i64 {c1}, {c2}"), diff, same)
        f.at(diff)
        _ret(f, f.ins(f"select i1 {f.ins(f'icmp ult i64 {c1}, {c2}')}, i64 -1, i64 1"))
        f.at(same)
        f.cbr(f.ins(f"icmp eq i64 {c1}, 0"), end, nxt)
        f.at(end)
        f.do("ret i64 0")
        f.at(nxt)
        loop.again({"i": f.ins(f"add i64 {i}, 1")})
        f.at(out)
        _ret(f, str(E2BIG))
        loop.close()
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2) nounwind")
    return define


def _span_fn(kind: str, reject: bool) -> Callable[[Natives], str]:
    """strspn (``reject`` False) and strcspn: for each byte of s, a walk over the set."""
    def define(natives: Natives) -> str:
        f = Text()
        f.at("entry")
        _allowed(f, "%r1")
        _allowed(f, "%r2")
        outer = _Loop(f, {"i": "0"})
        i = outer.v["i"]
        body, big = f.label("body"), f.label("big")
        f.cbr(f.ins(f"icmp ult i64 {i}, {XATTR_SIZE_MAX}"), body, big)
        f.at(body)
        cs = _byte(f, f.ins(f"add i64 %r1, {i}"))
        end, scan = f.label("end"), f.label("scan")
        f.cbr(f.ins(f"icmp eq i64 {cs}, 0"), end, scan)
        f.at(end)
        _ret(f, i)
        f.at(scan)
        inner = _Loop(f, {"j": "0"})
        j = inner.v["j"]
        jbody, jbig = f.label("jbody"), f.label("jbig")
        f.cbr(f.ins(f"icmp ult i64 {j}, {XATTR_SIZE_MAX}"), jbody, jbig)
        f.at(jbody)
        ca = _byte(f, f.ins(f"add i64 %r2, {j}"))
        hit, nul = f.ins(f"icmp eq i64 {cs}, {ca}"), f.ins(f"icmp eq i64 {ca}, 0")
        stop, jnext = f.label("stop"), f.label("jnext")
        f.cbr(f.ins(f"or i1 {hit}, {nul}"), stop, jnext)
        f.at(jnext)
        inner.again({"j": f.ins(f"add i64 {j}, 1")})
        f.at(jbig)
        _ret(f, str(E2BIG))
        f.at(stop)
        # strspn stops at a byte not in the set (the set's NUL reached), strcspn at one in it
        quit_ = f.ins(f"xor i1 {nul}, true") if reject else nul
        done, nxt = f.label("done"), f.label("next")
        f.cbr(quit_, done, nxt)
        f.at(done)
        _ret(f, i)
        f.at(nxt)
        outer.again({"i": f.ins(f"add i64 {i}, 1")})
        f.at(big)
        _ret(f, str(E2BIG))
        inner.close()
        outer.close()
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2) nounwind")
    return define


def _nstr_fn(kind: str, counted: bool) -> Callable[[Natives], str]:
    """``__bpf_strnstr``: strstr (no length argument) and strnstr."""
    def define(natives: Natives) -> str:
        f = Text()
        f.at("entry")
        _allowed(f, "%r1")
        _allowed(f, "%r2")
        n = "%r3" if counted else str(XATTR_SIZE_MAX)
        outer = _Loop(f, {"i": "0"})
        i = outer.v["i"]
        body, big = f.label("body"), f.label("big")
        f.cbr(f.ins(f"icmp ult i64 {i}, {XATTR_SIZE_MAX}"), body, big)
        f.at(body)
        inner = _Loop(f, {"j": "0"})
        j = inner.v["j"]
        ij = f.ins(f"add i64 {i}, {j}")
        jbody, jout = f.label("jbody"), f.label("jout")
        more = f.ins(f"and i1 {f.ins(f'icmp ule i64 {ij}, {n}')}, "
                     f"{f.ins(f'icmp ult i64 {j}, {XATTR_SIZE_MAX}')}")
        f.cbr(more, jbody, jout)
        f.at(jbody)
        c2 = _byte(f, f.ins(f"add i64 %r2, {j}"))
        found, cont = f.label("found"), f.label("cont")
        f.cbr(f.ins(f"icmp eq i64 {c2}, 0"), found, cont)
        f.at(found)
        _ret(f, i)
        f.at(cont)
        read = f.label("read")
        f.cbr(f.ins(f"icmp eq i64 {ij}, {n}"), jout, read)  # the needle ends at the length
        f.at(read)
        c1 = _byte(f, f.ins(f"add i64 %r1, {ij}"))
        gone, cmp_ = f.label("gone"), f.label("cmp")
        f.cbr(f.ins(f"icmp eq i64 {c1}, 0"), gone, cmp_)
        f.at(gone)
        _ret(f, str(ENOENT))
        f.at(cmp_)
        jnext = f.label("jnext")
        f.cbr(f.ins(f"icmp ne i64 {c1}, {c2}"), jout, jnext)
        f.at(jnext)
        inner.again({"j": f.ins(f"add i64 {j}, 1")})
        f.at(jout)
        # every way out of the inner loop leaves from its head: j and i + j are its own
        ret_if(f, f.ins(f"icmp eq i64 {j}, {XATTR_SIZE_MAX}"), E2BIG & M32)
        ret_if(f, f.ins(f"icmp eq i64 {ij}, {n}"), ENOENT & M32)
        outer.again({"i": f.ins(f"add i64 {i}, 1")})
        f.at(big)
        _ret(f, str(E2BIG))
        inner.close()
        outer.close()
        args = "ptr %ctx, i64 %r1, i64 %r2" + (", i64 %r3" if counted else "")
        return f.text(f"define internal i64 @{kind}({args}) nounwind")
    return define


for _name, _fn, _kind, _nargs, _define in (
        ("bpf_strlen", strlen, "str_len", 1, _nlen_fn("str_len", False)),
        ("bpf_strnlen", strnlen, "str_nlen", 2, _nlen_fn("str_nlen", True)),
        ("bpf_strcmp", strcmp, "str_cmp", 2, _cmp_fn("str_cmp", False)),
        ("bpf_strcasecmp", strcasecmp, "str_casecmp", 2, _cmp_fn("str_casecmp", True)),
        ("bpf_strchr", strchr, "str_chr", 2, _chr_fn("str_chr", "nchr", 2)),
        ("bpf_strnchr", strnchr, "str_nchr", 3, _chr_fn("str_nchr", "nchr", 3)),
        ("bpf_strchrnul", strchrnul, "str_chrnul", 2, _chr_fn("str_chrnul", "chrnul", 2)),
        ("bpf_strrchr", strrchr, "str_rchr", 2, _chr_fn("str_rchr", "rchr", 2)),
        ("bpf_strspn", strspn, "str_spn", 2, _span_fn("str_spn", False)),
        ("bpf_strcspn", strcspn, "str_cspn", 2, _span_fn("str_cspn", True)),
        ("bpf_strstr", strstr, "str_str", 2, _nstr_fn("str_str", False)),
        ("bpf_strnstr", strnstr, "str_nstr", 3, _nstr_fn("str_nstr", True))):
    register_kfunc(_name, _fn, HelperNative(_kind, _nargs, _define, ("translate",)))
