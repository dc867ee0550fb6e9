"""More base helpers: ``bpf_snprintf``, ``bpf_for_each_map_elem`` and the ring buffer helpers.

Registered into :data:`pyxdp.vm.context.BASE_HELPERS` when :mod:`pyxdp.vm.helpers`
is imported (it imports this one last), so every program type gets them:

* ``bpf_snprintf`` (165) as ``kernel/bpf/helpers.c``: ``bpf_bprintf_prepare``
  checks the format and packs the arguments into a 512-byte binary buffer
  (strings and ``%pI4``/``%pI6`` addresses are copied or pre-formatted
  there), then ``bstr_printf`` of ``lib/vsprintf.c`` prints from it. Both
  steps are modelled byte for byte, quirks included: a pre-formatted
  pointer conversion (``%pI4``, ``%pks``, ``%pB``...) ignores its width,
  swallows the letters and digits that follow it, and is not counted at all
  once the output buffer is full (nor stepped over: later conversions then
  read its bytes as their arguments; where that reaches alignment padding
  the kernel reads stale bytes of earlier calls, pyxdp zeros).
  :func:`bpf_bprintf` is the pure function. On the JIT a native twin (the shared
  IR formatter ``@bprintf``) does both steps for numbers, ``%c``, ``%s``, ``%p``,
  ``%pK``, ``%px``, ``%pI4``/``%pi4``/``%pI6``/``%pi6`` and every refusal, leaving
  ``%pB``/``%pks``/``%pus``/``%ps``/``%pS``, an address met with the output full, a
  string or address cut at the binary buffer's end and over-long formats or output
  buffers to this Python path.
* ``bpf_for_each_map_elem`` (164), as the ``map_for_each_callback`` of
  ``kernel/bpf/arraymap.c`` (array, per-CPU array) and ``kernel/bpf/hashtab.c``
  (hash, per-CPU hash, LRU hash, LRU per-CPU hash): the callback gets
  ``(map, &key, &value, ctx)``, returns 0 to go on and 1 to stop; the helper
  returns the number of elements visited (the stopping one included).
* ``bpf_ringbuf_output``/``reserve``/``submit``/``discard``/``query``
  (130-134) of ``kernel/bpf/ringbuf.c`` over a ring buffer map
  (:class:`~pyxdp.vm.map_space.RingBufMap`), which owns the record format
  and, for the JIT, their native twins on a ring the program names (registered
  here by kind, lowered through the map's functions).

Simplified: ``%p`` and ``%pK`` print the raw value like ``%px`` (the kernel
prints a hash of it, except for NULL and error pointers); ``%ps``/``%pS``/``%pB``
print ``0x<hex>`` (what the kernel prints for an address that is no
symbol); ``%pus`` always prints an empty string (there is no user memory);
a ``%s`` string or ``%pI6`` address that runs off the end of program memory
reads as a fault (empty string, zero address), where the kernel reads on
into whatever kernel memory follows.
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from pyxdp.asm.opcodes import MAX_CALL_FRAMES
from pyxdp.errors import HelperFault, MapError, MemoryFault
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.vm.context import SCRATCH_BASE, RunContext, helper, neg
from pyxdp.vm.dynptr import (
    BPF_DYNPTR_TYPE_RINGBUF,
    DYNPTR_MAX_SIZE,
    dynptr_init,
    dynptr_load,
    dynptr_set_null,
)
from pyxdp.vm.jit.abi import CTX, MAPDESC, MAPDESC_FIELDS, NF_RUNCTX, SLOW, Natives
from pyxdp.vm.jit.ir import TBAA_CTX, Text, c64, ret_if
from pyxdp.vm.jit.natives import HelperNative, map_native, register_helper, register_shared
from pyxdp.vm.map_space import (
    MAP_SPACE_BASE,
    MAP_WINDOW,
    ProgramMap,
    RingBufMap,
    is_ringbuf,
    map_at,
    map_by_addr,
)
from pyxdp.vm.memory import Region

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["MAX_BPRINTF_BIN_ARGS", "MAX_BPRINTF_VARARGS", "MemoryReader", "bpf_bprintf",
           "memory_reader", "read_cstring"]

M64 = 0xFFFF_FFFF_FFFF_FFFF
MAX_BPRINTF_VARARGS = 12
MAX_BPRINTF_BIN_ARGS = 512
MAX_BPRINTF_BUF = 1024  # bstr_printf buffer of bpf_trace_printk
FIELD_WIDTH_MAX = (1 << 23) - 1  # lib/vsprintf.c clamps widths to this

# -- bpf_bprintf_prepare + bstr_printf ---------------------------------------------------

# Reads program memory: exactly ``size`` bytes at ``addr``, or None when that faults.
MemoryReader = Callable[[int, int], "bytes | None"]

# The kernel's ctype (lib/ctype.c) is Latin-1: 0xa0 is a space, 0xa1-0xbf, 0xd7 and
# 0xf7 are punctuation, 0xc0-0xff otherwise letters. It decides what may follow
# %p and %s, and which characters a pre-formatted %p conversion swallows.
_SPACE = frozenset(b" \t\n\v\f\r\xa0")
_PUNCT = frozenset(b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") | frozenset(range(0xA1, 0xC0)) \
    | {0xD7, 0xF7}
_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") \
    | (frozenset(range(0xC0, 0x100)) - {0xD7, 0xF7})

_LEFT, _PLUS, _SPACEF, _ZEROPAD = 1, 2, 4, 8


class _Conv:
    """One conversion as ``bstr_printf`` will read it back from the binary buffer.

    ``kind``: ``num`` (``size`` 4 or 8 bytes, ``conv`` one of ``diuxX``),
    ``chr``, ``str`` (a copied string, printed with its width), ``pre`` (a
    string pre-formatted by prepare: printed without width, and it swallows
    following letters/digits), ``ptr`` (an 8-byte pointer value printed at
    print time: ``conv`` is ``p``, ``K``, ``x``, ``s`` or ``S``).

    A plain class, not a dataclass: this module loads with every program's helpers,
    and a dataclass's methods are compiled from source when its class is made.
    """

    __slots__ = ("kind", "flags", "width", "size", "conv")

    def __init__(self, kind: str, flags: int = 0, width: int = -1, size: int = 0,
                 conv: str = "") -> None:
        self.kind, self.flags, self.width, self.size, self.conv = kind, flags, width, size, conv


class _Bad(Exception):
    def __init__(self, err: int) -> None:
        self.err = err


def _is_end(c: int) -> bool:
    """``fmt[i + 1] == 0 || isspace(..) || ispunct(..)``: what may follow ``%p``/``%s``."""
    return c == 0 or c in _SPACE or c in _PUNCT


def _prepare(fmt: bytes, args: Sequence[int], read: MemoryReader
             ) -> tuple[list[bytes | _Conv], bytearray]:
    """``bpf_bprintf_prepare``: the parsed format and the filled binary buffer."""
    buf = bytearray(MAX_BPRINTF_BIN_ARGS + 64)
    end = MAX_BPRINTF_BIN_ARGS
    tmp = 0
    out: list[bytes | _Conv] = []
    lit = bytearray()
    f = fmt + b"\0\0\0"  # the kernel may look up to two bytes past the NUL's index
    n = len(fmt)
    num_spec = 0
    i = 0

    def put(data: bytes, at: int) -> None:
        # A write past the buffer (the kernel's pre-formatted IPs can overrun
        # it) keeps what fits; the position still moves by the full length.
        if at < len(buf):
            buf[at:at + len(data)] = data[:max(0, len(buf) - at)]

    def copy_string(addr: int, room: int) -> int:
        """``strncpy_from_kernel_nofault``: bytes taken (NUL included); 1 on a fault."""
        limit = room if room > 0 else 1 << 16
        got = read_cstring(read, addr, limit)
        if got is None:
            put(b"\0", tmp)
            return 1
        if len(got) >= limit:  # no NUL within the room: truncated, NUL-terminated
            put(got[:limit - 1] + b"\0", tmp)
            return limit
        put(got + b"\0", tmp)
        return len(got) + 1

    while i < n:
        c = f[i]
        # Control characters and DEL are refused; bytes from 0x80 pass (UTF-8
        # text is allowed since 6.x; measured on 6.18).
        if (c < 0x20 and c not in _SPACE) or c == 0x7F:
            raise _Bad(errno.EINVAL)
        if c != 0x25:  # '%'
            lit.append(c)
            i += 1
            continue
        if f[i + 1] == 0x25:
            lit.append(0x25)
            i += 2
            continue
        if num_spec >= len(args):
            raise _Bad(errno.EINVAL)
        if lit:
            out.append(bytes(lit))
            lit.clear()
        i += 1
        flags = 0
        while f[i] in b"0+- ":
            flags |= {0x30: _ZEROPAD, 0x2B: _PLUS, 0x2D: _LEFT, 0x20: _SPACEF}[f[i]]
            i += 1
        width = -1
        if 0x31 <= f[i] <= 0x39:
            j = i
            while 0x30 <= f[i] <= 0x39:
                i += 1
            width = min(int(f[j:i]), FIELD_WIDTH_MAX)
        arg = args[num_spec] & M64
        c = f[i]
        if c == 0x70:  # 'p'
            nxt = f[i + 1]
            if _is_end(nxt):
                conv = _Conv("ptr", flags, width, 8, "p")
            elif nxt in b"ku" and f[i + 2] == 0x73:
                i += 2
                if not _is_end(f[i + 1]):
                    raise _Bad(errno.EINVAL)
                if tmp == end:
                    raise _Bad(errno.ENOSPC)
                if nxt == 0x6B:
                    tmp += copy_string(arg, end - tmp)
                else:
                    # %pus reads user memory, which a program run here never has:
                    # the kernel's failed copy leaves an empty string.
                    put(b"\0", tmp)
                    tmp += 1
                out.append(_Conv("pre"))
                num_spec += 1
                i += 1
                continue
            elif nxt in b"KxsS":
                i += 1
                conv = _Conv("ptr", flags, width, 8, chr(nxt))
            elif nxt == 0x42:  # 'B': printed now, as the kernel's snprintf("%pB")
                text = b"0x%x" % arg
                room = end - tmp
                if room > 0:
                    put(text[:room - 1] + b"\0", tmp)
                tmp += len(text) + 1
                out.append(_Conv("pre"))
                num_spec += 1
                i += 2
                continue
            elif nxt in b"iI" and f[i + 2] in b"46":
                i += 2
                size = 4 if f[i] == 0x34 else 16
                if end - tmp < size:
                    raise _Bad(errno.ENOSPC)
                raw = read(arg, size) or bytes(size)
                text = _format_ip(raw, upper=nxt == 0x49)
                put(text[:max(0, end - tmp - 1)] + b"\0", tmp)
                tmp += len(text) + 1
                out.append(_Conv("pre"))
                num_spec += 1
                i += 1
                continue
            else:
                raise _Bad(errno.EINVAL)
        elif c == 0x73:  # 's'
            if not _is_end(f[i + 1]):
                raise _Bad(errno.EINVAL)
            if tmp == end:
                raise _Bad(errno.ENOSPC)
            tmp += copy_string(arg, end - tmp)
            out.append(_Conv("str", flags, width))
            num_spec += 1
            i += 1
            continue
        elif c == 0x63:  # 'c'
            if tmp == end:
                raise _Bad(errno.ENOSPC)
            put(bytes([arg & 0xFF]), tmp)
            tmp += 1
            out.append(_Conv("chr", flags, width))
            num_spec += 1
            i += 1
            continue
        else:
            size = 4
            if f[i] == 0x6C:  # 'l'
                size = 8
                i += 1
            if f[i] == 0x6C:
                i += 1
            if f[i] not in b"iduxX":
                raise _Bad(errno.EINVAL)
            conv = _Conv("num", flags, width, size, chr(f[i]))
        # nocopy_fmt: the value itself, 4-byte aligned.
        tmp = (tmp + 3) & ~3
        if end - tmp < conv.size:
            raise _Bad(errno.ENOSPC)
        put((arg & ((1 << (8 * conv.size)) - 1)).to_bytes(conv.size, "little"), tmp)
        tmp += conv.size
        out.append(conv)
        num_spec += 1
        i += 1
    if lit:
        out.append(bytes(lit))
    return out, buf


def read_cstring(read: MemoryReader, addr: int, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of the C string at ``addr`` (without its NUL); None on a fault."""
    out = bytearray()
    while len(out) < limit:
        chunk = min(64, limit - len(out))
        got = read(addr + len(out), chunk)
        if got is None:
            # The chunk may cross the end of memory: go byte by byte.
            for _ in range(chunk):
                b = read(addr + len(out), 1)
                if b is None:
                    return None
                if b == b"\0":
                    return bytes(out)
                out += b
            continue
        nul = got.find(b"\0")
        if nul >= 0:
            return bytes(out + got[:nul])
        out += got
    return bytes(out)


def _format_ip(raw: bytes, upper: bool) -> bytes:
    """``%pI4`` ``1.2.3.4``, ``%pi4`` ``001.002.003.004``, ``%pI6`` full groups, ``%pi6`` hex."""
    if len(raw) == 4:
        return (".".join(str(b) if upper else f"{b:03d}" for b in raw)).encode()
    groups = [raw[k:k + 2].hex() for k in range(0, 16, 2)]
    return (":".join(groups) if upper else "".join(groups)).encode()


class _Out:
    """``bstr_printf``'s output: bytes kept up to ``size``, every byte counted."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data = bytearray()
        self.count = 0

    def add(self, b: bytes) -> None:
        room = self.size - len(self.data)
        if room > 0:
            self.data += b[:room]
        self.count += len(b)

    def pad(self, n: int, ch: bytes = b" ") -> None:
        if n <= 0:
            return
        room = self.size - len(self.data)
        if room > 0:
            self.data += ch * min(n, room)
        self.count += n


def _number(out: _Out, num: int, signed: bool, base: int, upper: bool, flags: int,
            width: int) -> None:
    """``number()`` of ``lib/vsprintf.c`` without precision or ``#``."""
    if flags & _LEFT:
        flags &= ~_ZEROPAD
    sign = b""
    if signed:
        if num < 0:
            sign, num = b"-", -num
        elif flags & _PLUS:
            sign = b"+"
        elif flags & _SPACEF:
            sign = b" "
    if base == 16:
        digits = (b"%X" if upper else b"%x") % num
    else:
        digits = b"%d" % num
    field = width - len(sign) - len(digits)
    if not flags & (_ZEROPAD | _LEFT):
        out.pad(field)
        field = 0
    out.add(sign)
    if not flags & _LEFT:
        out.pad(field, b"0" if flags & _ZEROPAD else b" ")
        field = 0
    out.add(digits)
    out.pad(field)


def _string(out: _Out, s: bytes, flags: int, width: int) -> None:
    """``string()``: spaces pad (zero padding is for numbers only)."""
    if not flags & _LEFT:
        out.pad(width - len(s))
    out.add(s)
    if flags & _LEFT:
        out.pad(width - len(s))


def _bstr_printf(parts: list[bytes | _Conv], buf: bytearray, size: int) -> _Out:
    out = _Out(size)
    a = 0
    swallow = False
    for part in parts:
        if isinstance(part, bytes):
            if swallow:
                k = 0
                while k < len(part) and part[k] in _ALNUM:
                    k += 1
                part = part[k:]
            swallow = False
            out.add(part)
            continue
        swallow = False
        if part.kind == "num":
            a = (a + 3) & ~3
            v = int.from_bytes(buf[a:a + part.size], "little")
            a += part.size
            signed = part.conv in "di"
            if signed and v >> (8 * part.size - 1):
                v -= 1 << (8 * part.size)
            _number(out, v, signed, 16 if part.conv in "xX" else 10, part.conv == "X",
                    part.flags, part.width)
        elif part.kind == "chr":
            c = bytes(buf[a:a + 1])
            a += 1
            _string(out, c, part.flags, part.width)
        elif part.kind == "str":
            s = _cstr(buf, a)
            a += len(s) + 1
            _string(out, s, part.flags, part.width)
        elif part.kind == "pre":
            swallow = True
            # lib/vsprintf.c copies a pre-formatted string only while there is
            # room, and only then moves past it in the argument buffer.
            if out.count < size:
                s = _cstr(buf, a)
                out.add(s)
                a += len(s) + 1
        else:  # ptr: the 8-byte value, 4-byte aligned
            swallow = True
            a = (a + 3) & ~3
            v = int.from_bytes(buf[a:a + 8], "little")
            a += 8
            if part.conv in "sS":
                _string(out, b"0x%x" % v, part.flags, part.width)
            elif part.width < 0:
                _number(out, v, False, 16, False, _ZEROPAD, 16)
            else:
                _number(out, v, False, 16, False, part.flags, part.width)
    return out


def _cstr(buf: bytearray, at: int) -> bytes:
    nul = buf.find(b"\0", at)
    return bytes(buf[at:nul if nul >= 0 else len(buf)])


def bpf_bprintf(fmt: bytes, args: Sequence[int], read: MemoryReader, size: int
                ) -> tuple[int, bytes]:
    """Format as ``bpf_snprintf`` does: ``(needed length without NUL or -errno, bytes)``.

    ``fmt`` ends at its first NUL; ``args`` are the u64 arguments; ``read``
    reads program memory for ``%s``/``%pks``/``%pI4``/``%pI6``; ``size`` is
    the output buffer's. The bytes are what the kernel writes into it: the
    output cut to ``size - 1`` bytes and a NUL (nothing when ``size`` is 0).
    """
    fmt = fmt.split(b"\0", 1)[0]
    try:
        parts, buf = _prepare(fmt, args, read)
    except _Bad as e:
        return -e.err, b""
    out = _bstr_printf(parts, buf, size)
    if size <= 0:
        return out.count, b""
    return out.count, bytes(out.data[:size - 1]) + b"\0"


def memory_reader(vm: Interpreter) -> MemoryReader:
    """Program memory for the formatters: None where nothing is mapped."""
    def read(addr: int, size: int) -> bytes | None:
        try:
            return vm.mem.read(addr & M64, size)
        except MemoryFault:
            return None
    return read


@helper(165, "snprintf")
def _snprintf(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    str_size, data_len = r2 & 0xFFFF_FFFF, r5 & 0xFFFF_FFFF
    if data_len % 8 or data_len > MAX_BPRINTF_VARARGS * 8 or (data_len and not r4):
        return neg(errno.EINVAL)
    raw = vm.mem.read(r4, data_len) if data_len else b""
    args = list(struct.unpack(f"<{data_len // 8}Q", raw))
    fmt = read_cstring(memory_reader(vm), r3, 1 << 16)
    if fmt is None:
        raise HelperFault(f"bpf_snprintf: format at {r3:#x} is not readable")
    count, written = bpf_bprintf(fmt, args, memory_reader(vm), str_size)
    if count < 0:
        return neg(-count)
    if written:
        vm.mem.write(r1, written)
    return (count + 1) & M64


def _class_table() -> str:
    """``@bprintf_cls``: per byte, 1 space, 2 punctuation, 4 letter or digit (lib/ctype.c)."""
    cells = []
    for c in range(256):
        bits = (1 if c in _SPACE else 0) | (2 if c in _PUNCT else 0) | (4 if c in _ALNUM else 0)
        cells.append(f"\\{bits:02X}")
    return f"@bprintf_cls = internal constant [256 x i8] c\"{''.join(cells)}\"\n"


# ``bprintf(ctx, fmt, args, nargs, out, limit, size)``: bpf_bprintf_prepare and
# bstr_printf (into ``size`` bytes) for the conversions of numbers (%d %i %u %x %X, l
# and ll), %c, %s, %p, %pK and %px with their flags and widths, and the pre-formatted
# addresses %pI4 %pi4 %pI6 %pi6: the output kept in ``out`` up to ``limit`` bytes, the
# count (every byte, as bstr_printf's return) returned, or -EINVAL/-ENOSPC as the
# Python reference, or SLOW for what only it models (%pB %pks %pus %ps %pS, an address
# met with the output full, a string or address cut at the binary buffer's end, a
# format past 1023 bytes or unreadable).
_BPRINTF_IR_T = """
define internal void @bprintf_put(ptr %st, i8 %c) nounwind alwaysinline {
entry:
  %n = load i64, ptr %st
  %lp = getelementptr i8, ptr %st, i64 8
  %lim = load i64, ptr %lp
  %room = icmp ult i64 %n, %lim
  br i1 %room, label %keep, label %done
keep:
  %op = getelementptr i8, ptr %st, i64 16
  %o = load ptr, ptr %op
  %at = getelementptr i8, ptr %o, i64 %n
  store i8 %c, ptr %at
  br label %done
done:
  %n1 = add i64 %n, 1
  store i64 %n1, ptr %st
  ret void
}

define internal void @bprintf_pad(ptr %st, i64 %k, i8 %c) nounwind {
entry:
  %pos = icmp sgt i64 %k, 0
  br i1 %pos, label %go, label %done
go:
  %n = load i64, ptr %st
  %lp = getelementptr i8, ptr %st, i64 8
  %lim = load i64, ptr %lp
  %op = getelementptr i8, ptr %st, i64 16
  %o = load ptr, ptr %op
  %has = icmp ult i64 %n, %lim
  %room = sub i64 %lim, %n
  %room0 = select i1 %has, i64 %room, i64 0
  %few = icmp ult i64 %k, %room0
  %fill = select i1 %few, i64 %k, i64 %room0
  %at = getelementptr i8, ptr %o, i64 %n
  call void @llvm.memset.p0.i64(ptr %at, i8 %c, i64 %fill, i1 false)
  %n1 = add i64 %n, %k
  store i64 %n1, ptr %st
  br label %done
done:
  ret void
}

; number() of lib/vsprintf.c without precision or '#': magnitude, sign byte (0: none)
define internal void @bprintf_num(ptr %st, i64 %mag, i8 %sign, i64 %base, i1 %upper,
                                  i64 %flags0, i64 %width) nounwind {
entry:
  %buf = alloca [24 x i8]
  %a = select i1 %upper, i8 55, i8 87
  br label %dig
dig:
  %v = phi i64 [ %mag, %entry ], [ %q, %dig ]
  %nd = phi i64 [ 0, %entry ], [ %nd1, %dig ]
  %q = udiv i64 %v, %base
  %r = urem i64 %v, %base
  %r8 = trunc i64 %r to i8
  %small = icmp ult i64 %r, 10
  %d0 = add i8 %r8, 48
  %d1 = add i8 %r8, %a
  %d = select i1 %small, i8 %d0, i8 %d1
  %at = getelementptr i8, ptr %buf, i64 %nd
  store i8 %d, ptr %at
  %nd1 = add i64 %nd, 1
  %more = icmp ne i64 %q, 0
  br i1 %more, label %dig, label %lay
lay:
  %left = and i64 %flags0, 1
  %isleft = icmp ne i64 %left, 0
  %nozero = and i64 %flags0, -9
  %flags = select i1 %isleft, i64 %nozero, i64 %flags0
  %hassign = icmp ne i8 %sign, 0
  %slen = zext i1 %hassign to i64
  %w1 = sub i64 %width, %slen
  %field0 = sub i64 %w1, %nd1
  %zl = and i64 %flags, 9
  %plain = icmp eq i64 %zl, 0
  br i1 %plain, label %lpad, label %sgn
lpad:
  call void @bprintf_pad(ptr %st, i64 %field0, i8 32)
  br label %sgn
sgn:
  %field1 = phi i64 [ %field0, %lay ], [ 0, %lpad ]
  br i1 %hassign, label %psign, label %mid
psign:
  call void @bprintf_put(ptr %st, i8 %sign)
  br label %mid
mid:
  br i1 %isleft, label %digits, label %zpad
zpad:
  %z = and i64 %flags, 8
  %isz = icmp ne i64 %z, 0
  %zc = select i1 %isz, i8 48, i8 32
  call void @bprintf_pad(ptr %st, i64 %field1, i8 %zc)
  br label %digits
digits:
  %field2 = phi i64 [ %field1, %mid ], [ 0, %zpad ]
  br label %emit
emit:
  %k = phi i64 [ %nd1, %digits ], [ %k1, %emit ]
  %k1 = sub i64 %k, 1
  %dp = getelementptr i8, ptr %buf, i64 %k1
  %dc = load i8, ptr %dp
  call void @bprintf_put(ptr %st, i8 %dc)
  %last = icmp eq i64 %k1, 0
  br i1 %last, label %tail, label %emit
tail:
  call void @bprintf_pad(ptr %st, i64 %field2, i8 32)
  ret void
}

; One byte of program memory (-1: a fault), through a cache of the last window read.
define internal i32 @bprintf_byte(ptr %ctx, ptr %cache, i64 %addr) nounwind {
entry:
  %base = load i64, ptr %cache
  %ep = getelementptr i8, ptr %cache, i64 8
  %end = load i64, ptr %ep
  %hp = getelementptr i8, ptr %cache, i64 16
  %ge = icmp uge i64 %addr, %base
  %lt = icmp ult i64 %addr, %end
  %in = and i1 %ge, %lt
  br i1 %in, label %hit, label %miss
hit:
  %host = load ptr, ptr %hp
  %off = sub i64 %addr, %base
  %p = getelementptr i8, ptr %host, i64 %off
  %b = load i8, ptr %p
  %bz = zext i8 %b to i32
  ret i32 %bz
miss:
  %w = call ptr @translate(ptr %ctx, i64 %addr, i64 64, i1 false)
  %wok = icmp ne ptr %w, null
  br i1 %wok, label %fill64, label %one
fill64:
  %e64 = add i64 %addr, 64
  br label %fill
one:
  %w1 = call ptr @translate(ptr %ctx, i64 %addr, i64 1, i1 false)
  %ok1 = icmp ne ptr %w1, null
  br i1 %ok1, label %fill1, label %fault
fill1:
  %e1 = add i64 %addr, 1
  br label %fill
fill:
  %hw = phi ptr [ %w, %fill64 ], [ %w1, %fill1 ]
  %he = phi i64 [ %e64, %fill64 ], [ %e1, %fill1 ]
  store i64 %addr, ptr %cache
  store i64 %he, ptr %ep
  store ptr %hw, ptr %hp
  %fb = load i8, ptr %hw
  %fz = zext i8 %fb to i32
  ret i32 %fz
fault:
  ret i32 -1
}

define internal i64 @bprintf(ptr %ctx, i64 %fmt, ptr %args, i64 %nargs, ptr %out,
                             i64 %limit, i64 %outsize) nounwind {
entry:
  %fb = alloca [1028 x i8]
  %ipb = alloca [16 x i8]
  %cache = alloca [3 x i64]
  %st = alloca [3 x i64]
  %iv = alloca i64
  %specv = alloca i64
  %tmpv = alloca i64
  %swv = alloca i1
  %flv = alloca i64
  %wv = alloca i64
  call void @llvm.memset.p0.i64(ptr %fb, i8 0, i64 1028, i1 false)
  store i64 1, ptr %cache
  %ce = getelementptr i8, ptr %cache, i64 8
  store i64 0, ptr %ce
  store i64 0, ptr %st
  %sl = getelementptr i8, ptr %st, i64 8
  store i64 %limit, ptr %sl
  %so = getelementptr i8, ptr %st, i64 16
  store ptr %out, ptr %so
  br label %fhead
fhead:
  %k = phi i64 [ 0, %entry ], [ %k1, %fstore ]
  %fa = add i64 %fmt, %k
  %fc = call i32 @bprintf_byte(ptr %ctx, ptr %cache, i64 %fa)
  %ffault = icmp slt i32 %fc, 0
  br i1 %ffault, label %slow, label %fnul
fnul:
  %fend = icmp eq i32 %fc, 0
  br i1 %fend, label %parse, label %flong
flong:
  %long = icmp uge i64 %k, 1023
  br i1 %long, label %slow, label %fstore
fstore:
  %fc8 = trunc i32 %fc to i8
  %fp = getelementptr i8, ptr %fb, i64 %k
  store i8 %fc8, ptr %fp
  %k1 = add i64 %k, 1
  br label %fhead
parse:
  store i64 0, ptr %iv
  store i64 0, ptr %specv
  store i64 0, ptr %tmpv
  store i1 false, ptr %swv
  br label %top
top:
  %i = load i64, ptr %iv
  %more = icmp ult i64 %i, %k
  br i1 %more, label %char, label %done
char:
  %cp = getelementptr i8, ptr %fb, i64 %i
  %c = load i8, ptr %cp
  %ctl = icmp ult i8 %c, 32
  %c9 = sub i8 %c, 9
  %sp = icmp ult i8 %c9, 5
  %nsp = xor i1 %sp, true
  %badc = and i1 %ctl, %nsp
  %del = icmp eq i8 %c, 127
  %bad = or i1 %badc, %del
  br i1 %bad, label %einval, label %pct
pct:
  %isp = icmp eq i8 %c, 37
  br i1 %isp, label %pct2, label %lit
lit:
  %sw = load i1, ptr %swv
  %cz = zext i8 %c to i64
  %clp = getelementptr i8, ptr @bprintf_cls, i64 %cz
  %cls = load i8, ptr %clp
  %al = and i8 %cls, 4
  %isal = icmp ne i8 %al, 0
  %skip = and i1 %sw, %isal
  %i1 = add i64 %i, 1
  store i64 %i1, ptr %iv
  br i1 %skip, label %top, label %litput
litput:
  store i1 false, ptr %swv
  call void @bprintf_put(ptr %st, i8 %c)
  br label %top
pct2:
  %i1b = add i64 %i, 1
  %np = getelementptr i8, ptr %fb, i64 %i1b
  %nc = load i8, ptr %np
  %dbl = icmp eq i8 %nc, 37
  br i1 %dbl, label %percent, label %conv
percent:
  store i1 false, ptr %swv
  call void @bprintf_put(ptr %st, i8 37)
  %i2 = add i64 %i, 2
  store i64 %i2, ptr %iv
  br label %top
conv:
  %spec = load i64, ptr %specv
  %noarg = icmp uge i64 %spec, %nargs
  br i1 %noarg, label %einval, label %conv1
conv1:
  store i1 false, ptr %swv
  store i64 %i1b, ptr %iv
  store i64 0, ptr %flv
  br label %flag
flag:
  %fi = load i64, ptr %iv
  %fgp = getelementptr i8, ptr %fb, i64 %fi
  %fg = load i8, ptr %fgp
  switch i8 %fg, label %widthq [ i8 48, label %f0  i8 43, label %fplus
                                  i8 45, label %fminus  i8 32, label %fspace ]
f0:
  br label %fset
fplus:
  br label %fset
fminus:
  br label %fset
fspace:
  br label %fset
fset:
  %bit = phi i64 [ 8, %f0 ], [ 2, %fplus ], [ 1, %fminus ], [ 4, %fspace ]
  %fl0 = load i64, ptr %flv
  %fl1 = or i64 %fl0, %bit
  store i64 %fl1, ptr %flv
  %fi1 = add i64 %fi, 1
  store i64 %fi1, ptr %iv
  br label %flag
widthq:
  store i64 -1, ptr %wv
  %w0c = sub i8 %fg, 49
  %wd = icmp ult i8 %w0c, 9
  br i1 %wd, label %wloop, label %spec0
wloop:
  %wi = phi i64 [ %fi, %widthq ], [ %wi1, %wnext ]
  %wacc = phi i64 [ 0, %widthq ], [ %wacc2, %wnext ]
  %wp = getelementptr i8, ptr %fb, i64 %wi
  %wc = load i8, ptr %wp
  %wdc = sub i8 %wc, 48
  %isd = icmp ult i8 %wdc, 10
  br i1 %isd, label %wnext, label %wend
wnext:
  %wdz = zext i8 %wdc to i64
  %wm = mul i64 %wacc, 10
  %wacc1 = add i64 %wm, %wdz
  %wbig = icmp ugt i64 %wacc1, 1099511627776
  %wacc2 = select i1 %wbig, i64 1099511627776, i64 %wacc1
  %wi1 = add i64 %wi, 1
  br label %wloop
wend:
  %wcap = icmp ugt i64 %wacc, {fwmax}
  %wfin = select i1 %wcap, i64 {fwmax}, i64 %wacc
  store i64 %wfin, ptr %wv
  store i64 %wi, ptr %iv
  br label %spec0
spec0:
  %si = load i64, ptr %iv
  %argp = getelementptr i64, ptr %args, i64 %spec
  %arg = load i64, ptr %argp, align 1
  %flags = load i64, ptr %flv
  %width = load i64, ptr %wv
  %scp = getelementptr i8, ptr %fb, i64 %si
  %sc = load i8, ptr %scp
  %si1 = add i64 %si, 1
  %nxp = getelementptr i8, ptr %fb, i64 %si1
  %nx = load i8, ptr %nxp
  %nxz = zext i8 %nx to i64
  %nxclp = getelementptr i8, ptr @bprintf_cls, i64 %nxz
  %nxcl = load i8, ptr %nxclp
  %nxsp = and i8 %nxcl, 3
  %nxe0 = icmp ne i8 %nxsp, 0
  %nxnul = icmp eq i8 %nx, 0
  %nxend = or i1 %nxe0, %nxnul
  switch i8 %sc, label %numeric [ i8 112, label %ptr  i8 115, label %str  i8 99, label %chr ]
ptr:
  br i1 %nxend, label %ptrfmt, label %ptrk
ptrk:
  %isK = icmp eq i8 %nx, 75
  %isx = icmp eq i8 %nx, 120
  %kx = or i1 %isK, %isx
  br i1 %kx, label %ptrkx, label %ptrother
ptrother:
  switch i8 %nx, label %einval [ i8 107, label %slow  i8 117, label %slow  i8 115, label %slow
                                 i8 83, label %slow  i8 66, label %slow  i8 105, label %ip
                                 i8 73, label %ip ]
ip:
  %ipu = icmp eq i8 %nx, 73
  %si2 = add i64 %si, 2
  %i4p = getelementptr i8, ptr %fb, i64 %si2
  %i4c = load i8, ptr %i4p
  %is4 = icmp eq i8 %i4c, 52
  %is6 = icmp eq i8 %i4c, 54
  %is46 = or i1 %is4, %is6
  br i1 %is46, label %ip1, label %einval
ip1:
  %ipsz = select i1 %is4, i64 4, i64 16
  %it0 = load i64, ptr %tmpv
  %iroom = sub i64 512, %it0
  %ifull = icmp slt i64 %iroom, %ipsz
  br i1 %ifull, label %enospc, label %ip2
ip2:
  %icnt = load i64, ptr %st
  %iprint = icmp ult i64 %icnt, %outsize
  br i1 %iprint, label %ip3, label %slow
ip3:
  call void @llvm.memset.p0.i64(ptr %ipb, i8 0, i64 16, i1 false)
  %ihost = call ptr @translate(ptr %ctx, i64 %arg, i64 %ipsz, i1 false)
  %ihas = icmp ne ptr %ihost, null
  br i1 %ihas, label %ipcopy, label %ipfmt
ipcopy:
  call void @llvm.memmove.p0.p0.i64(ptr %ipb, ptr %ihost, i64 %ipsz, i1 false)
  br label %ipfmt
ipfmt:
  %ifl = select i1 %ipu, i64 0, i64 8
  %iw = select i1 %ipu, i64 -1, i64 3
  br i1 %is4, label %v4h, label %v6h
v4h:
  %j = phi i64 [ 0, %ipfmt ], [ %j1, %v4d ]
  %jz = icmp eq i64 %j, 0
  br i1 %jz, label %v4d, label %v4dot
v4dot:
  call void @bprintf_put(ptr %st, i8 46)
  br label %v4d
v4d:
  %v4p = getelementptr i8, ptr %ipb, i64 %j
  %v4b = load i8, ptr %v4p
  %v4z = zext i8 %v4b to i64
  call void @bprintf_num(ptr %st, i64 %v4z, i8 0, i64 10, i1 false, i64 %ifl, i64 %iw)
  %j1 = add i64 %j, 1
  %v4end = icmp eq i64 %j1, 4
  br i1 %v4end, label %ipend, label %v4h
v6h:
  %h = phi i64 [ 0, %ipfmt ], [ %h1, %v6d ]
  %hodd = and i64 %h, 1
  %heven = icmp eq i64 %hodd, 0
  %hnz = icmp ne i64 %h, 0
  %hc0 = and i1 %heven, %hnz
  %hcolon = and i1 %hc0, %ipu
  br i1 %hcolon, label %v6col, label %v6d
v6col:
  call void @bprintf_put(ptr %st, i8 58)
  br label %v6d
v6d:
  %v6p = getelementptr i8, ptr %ipb, i64 %h
  %v6b = load i8, ptr %v6p
  %v6z = zext i8 %v6b to i64
  call void @bprintf_num(ptr %st, i64 %v6z, i8 0, i64 16, i1 false, i64 8, i64 2)
  %h1 = add i64 %h, 1
  %v6end = icmp eq i64 %h1, 16
  br i1 %v6end, label %ipend, label %v6h
ipend:
  %icnt2 = load i64, ptr %st
  %ilen = sub i64 %icnt2, %icnt
  %it1 = add i64 %it0, %ilen
  %it2 = add i64 %it1, 1
  %icut = icmp ugt i64 %it2, 512
  br i1 %icut, label %slow, label %ip4
ip4:
  store i64 %it2, ptr %tmpv
  store i1 true, ptr %swv
  %si3 = add i64 %si, 3
  store i64 %si3, ptr %iv
  br label %next
ptrkx:
  br label %ptrfmt
ptrfmt:
  %pi = phi i64 [ %si, %ptr ], [ %si1, %ptrkx ]
  %pt0 = load i64, ptr %tmpv
  %pt1 = add i64 %pt0, 3
  %pt2 = and i64 %pt1, -4
  %pfull = icmp ugt i64 %pt2, 504
  br i1 %pfull, label %enospc, label %pput
pput:
  %pt3 = add i64 %pt2, 8
  store i64 %pt3, ptr %tmpv
  %pnow = icmp slt i64 %width, 0
  %pfl = select i1 %pnow, i64 8, i64 %flags
  %pw = select i1 %pnow, i64 16, i64 %width
  call void @bprintf_num(ptr %st, i64 %arg, i8 0, i64 16, i1 false, i64 %pfl, i64 %pw)
  store i1 true, ptr %swv
  %pi1 = add i64 %pi, 1
  store i64 %pi1, ptr %iv
  br label %next
str:
  br i1 %nxend, label %str1, label %einval
str1:
  %st0 = load i64, ptr %tmpv
  %sfull = icmp eq i64 %st0, 512
  br i1 %sfull, label %enospc, label %slen
slen:
  %sroom = sub i64 512, %st0
  br label %shead
shead:
  %sk = phi i64 [ 0, %slen ], [ %sk1, %sgo ]
  %scut = icmp eq i64 %sk, %sroom
  br i1 %scut, label %slow, label %sread
sread:
  %sa = add i64 %arg, %sk
  %sb = call i32 @bprintf_byte(ptr %ctx, ptr %cache, i64 %sa)
  %sflt = icmp slt i32 %sb, 0
  br i1 %sflt, label %sgot, label %snul
snul:
  %send = icmp eq i32 %sb, 0
  br i1 %send, label %sgot, label %sgo
sgo:
  %sk1 = add i64 %sk, 1
  br label %shead
sgot:
  %slen0 = phi i64 [ 0, %sread ], [ %sk, %snul ]
  %st1 = add i64 %st0, %slen0
  %st2 = add i64 %st1, 1
  store i64 %st2, ptr %tmpv
  %sfield = sub i64 %width, %slen0
  %sleft = and i64 %flags, 1
  %sisl = icmp ne i64 %sleft, 0
  br i1 %sisl, label %scopy, label %slpad
slpad:
  call void @bprintf_pad(ptr %st, i64 %sfield, i8 32)
  br label %scopy
scopy:
  %sj = phi i64 [ 0, %sgot ], [ 0, %slpad ], [ %sj1, %sc1 ]
  %sdone = icmp eq i64 %sj, %slen0
  br i1 %sdone, label %srpad, label %sc1
sc1:
  %sja = add i64 %arg, %sj
  %sjb = call i32 @bprintf_byte(ptr %ctx, ptr %cache, i64 %sja)
  %sjc = trunc i32 %sjb to i8
  call void @bprintf_put(ptr %st, i8 %sjc)
  %sj1 = add i64 %sj, 1
  br label %scopy
srpad:
  %srp = select i1 %sisl, i64 %sfield, i64 0
  call void @bprintf_pad(ptr %st, i64 %srp, i8 32)
  store i64 %si1, ptr %iv
  br label %next
chr:
  %ct0 = load i64, ptr %tmpv
  %cfull = icmp eq i64 %ct0, 512
  br i1 %cfull, label %enospc, label %chr1
chr1:
  %ct1 = add i64 %ct0, 1
  store i64 %ct1, ptr %tmpv
  %cfield = sub i64 %width, 1
  %cleft = and i64 %flags, 1
  %cisl = icmp ne i64 %cleft, 0
  %clp2 = select i1 %cisl, i64 0, i64 %cfield
  call void @bprintf_pad(ptr %st, i64 %clp2, i8 32)
  %cb = trunc i64 %arg to i8
  call void @bprintf_put(ptr %st, i8 %cb)
  %crp = select i1 %cisl, i64 %cfield, i64 0
  call void @bprintf_pad(ptr %st, i64 %crp, i8 32)
  store i64 %si1, ptr %iv
  br label %next
numeric:
  %l1 = icmp eq i8 %sc, 108
  %ni1 = select i1 %l1, i64 %si1, i64 %si
  %n1p = getelementptr i8, ptr %fb, i64 %ni1
  %n1c = load i8, ptr %n1p
  %l2 = icmp eq i8 %n1c, 108
  %ni2a = add i64 %ni1, 1
  %ni2 = select i1 %l2, i64 %ni2a, i64 %ni1
  %n2p = getelementptr i8, ptr %fb, i64 %ni2
  %cv = load i8, ptr %n2p
  %size = select i1 %l1, i64 8, i64 4
  switch i8 %cv, label %einval [ i8 105, label %sdec  i8 100, label %sdec
                                 i8 117, label %udec  i8 120, label %hex  i8 88, label %hex ]
sdec:
  br label %nspace
udec:
  br label %nspace
hex:
  br label %nspace
nspace:
  %signed = phi i1 [ true, %sdec ], [ false, %udec ], [ false, %hex ]
  %nbase = phi i64 [ 10, %sdec ], [ 10, %udec ], [ 16, %hex ]
  %nt0 = load i64, ptr %tmpv
  %nt1 = add i64 %nt0, 3
  %nt2 = and i64 %nt1, -4
  %nroom = sub i64 512, %nt2
  %nfull = icmp slt i64 %nroom, %size
  br i1 %nfull, label %enospc, label %nput
nput:
  %nt3 = add i64 %nt2, %size
  store i64 %nt3, ptr %tmpv
  %a32 = trunc i64 %arg to i32
  %az = zext i32 %a32 to i64
  %as = sext i32 %a32 to i64
  %is8 = icmp eq i64 %size, 8
  %uv = select i1 %is8, i64 %arg, i64 %az
  %sv = select i1 %is8, i64 %arg, i64 %as
  %neg0 = icmp slt i64 %sv, 0
  %neg = and i1 %signed, %neg0
  %negv = sub i64 0, %sv
  %mag = select i1 %neg, i64 %negv, i64 %uv
  %fp2 = and i64 %flags, 2
  %fs4 = and i64 %flags, 4
  %hp2 = icmp ne i64 %fp2, 0
  %hs4 = icmp ne i64 %fs4, 0
  %s1 = select i1 %hs4, i8 32, i8 0
  %s2 = select i1 %hp2, i8 43, i8 %s1
  %s3 = select i1 %neg, i8 45, i8 %s2
  %sign = select i1 %signed, i8 %s3, i8 0
  %upper = icmp eq i8 %cv, 88
  call void @bprintf_num(ptr %st, i64 %mag, i8 %sign, i64 %nbase, i1 %upper, i64 %flags, i64 %width)
  %ni3 = add i64 %ni2, 1
  store i64 %ni3, ptr %iv
  br label %next
next:
  %sp1 = add i64 %spec, 1
  store i64 %sp1, ptr %specv
  br label %top
done:
  %count = load i64, ptr %st
  ret i64 %count
einval:
  ret i64 -22
enospc:
  ret i64 -28
slow:
  ret i64 {slow}
}
"""

def _bprintf_fn(natives: Natives) -> str:
    """The shared formatter ``@bprintf`` (see :data:`_BPRINTF_IR_T`) and its class table."""
    return _class_table() + _BPRINTF_IR_T.replace("{fwmax}", str(FIELD_WIDTH_MAX)).replace(
        "{slow}", c64(SLOW))


def bprintf_varargs(f: Text, array: str, data_len: str) -> tuple[str, str]:
    """The u64 argument array of ``bpf_snprintf`` and ``bpf_trace_vprintk`` in a twin:
    -EINVAL for a ``data_len`` that is no multiple of 8, above
    :data:`MAX_BPRINTF_VARARGS` words, or not 0 with a NULL array (the helpers' first
    checks); then the array's address (null when empty; SLOW when unreadable).
    Returns ``data_len`` (zero-extended) and the address."""
    dlen = f.ins(f"and i64 {data_len}, 4294967295")
    some = f.ins(f"icmp ne i64 {dlen}, 0")
    odd = f.ins(f"icmp ne i64 {f.ins(f'and i64 {dlen}, 7')}, 0")
    many = f.ins(f"icmp ugt i64 {dlen}, {MAX_BPRINTF_VARARGS * 8}")
    null = f.ins(f"and i1 {some}, {f.ins(f'icmp eq i64 {array}, 0')}")
    ret_if(f, f.ins(f"or i1 {odd}, {f.ins(f'or i1 {many}, {null}')}"), (-errno.EINVAL) & M64)
    before = f.cur
    f.cbr(some, "vargs", "vargs_ok")
    f.at("vargs")
    ap = f.ins(f"call ptr @translate(ptr %ctx, i64 {array}, i64 {dlen}, i1 false)")
    ret_if(f, f.ins(f"icmp eq ptr {ap}, null"), SLOW)
    have = f.cur
    f.br("vargs_ok")
    f.at("vargs_ok")
    return dlen, f.ins(f"phi ptr [ null, %{before} ], [ {ap}, %{have} ]")


def _snprintf_fn(natives: Natives) -> str:
    """``bpf_snprintf``'s twin (reference: :func:`_snprintf`): the arguments checked, the
    output formatted by ``@bprintf`` into a local buffer, then written with its NUL.
    SLOW (the Python helper, which then decides everything) for an output buffer over
    1024 bytes, unreadable arguments and what ``@bprintf`` leaves to Python."""
    f = Text()
    f.at("entry")
    ob = f.ins("alloca [1024 x i8]")
    size = f.ins("and i64 %r2, 4294967295")
    dlen, argp = bprintf_varargs(f, "%r4", "%r5")
    ret_if(f, f.ins(f"icmp ugt i64 {size}, 1024"), SLOW)
    empty = f.ins(f"icmp eq i64 {size}, 0")
    lim = f.ins(f"select i1 {empty}, i64 0, i64 {f.ins(f'sub i64 {size}, 1')}")
    n = f.ins(f"call i64 @bprintf(ptr %ctx, i64 %r3, ptr {argp}, "
              f"i64 {f.ins(f'lshr i64 {dlen}, 3')}, ptr {ob}, i64 {lim}, i64 {size})")
    ret_if(f, f.ins(f"icmp eq i64 {n}, {c64(SLOW)}"), SLOW)
    f.cbr(f.ins(f"icmp slt i64 {n}, 0"), "err", "ok")
    f.at("err")
    f.do(f"ret i64 {n}")
    f.at("ok")
    total = f.ins(f"add i64 {n}, 1")
    f.cbr(empty, "none", "write")
    f.at("none")
    f.do(f"ret i64 {total}")
    f.at("write")
    m = f.ins(f"select i1 {f.ins(f'icmp ult i64 {n}, {lim}')}, i64 {n}, i64 {lim}")
    dst = f.ins(f"call ptr @translate(ptr %ctx, i64 %r1, i64 {f.ins(f'add i64 {m}, 1')}, "
                "i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {dst}, null"), SLOW)
    f.memmove(dst, ob, m)
    f.do(f"store i8 0, ptr {f.gep(dst, m)}")
    f.cset("%ctx", "stack_dirty", "-1")  # the output may be a stack frame's
    f.do(f"ret i64 {total}")
    return f.text("define internal i64 @bpf_snprintf(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                  "i64 %r4, i64 %r5) nounwind")


register_shared("bprintf", _bprintf_fn)
register_helper(165, HelperNative("bpf_snprintf", 5, _snprintf_fn, ("translate", "bprintf")))


# -- bpf_for_each_map_elem -------------------------------------------------------------------

_FOR_EACH_TYPES = frozenset(int(t) for t in (
    BpfMapType.BPF_MAP_TYPE_ARRAY, BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY,
    BpfMapType.BPF_MAP_TYPE_HASH, BpfMapType.BPF_MAP_TYPE_PERCPU_HASH,
    BpfMapType.BPF_MAP_TYPE_LRU_HASH, BpfMapType.BPF_MAP_TYPE_LRU_PERCPU_HASH))
_ARRAYS = frozenset({int(BpfMapType.BPF_MAP_TYPE_ARRAY),
                     int(BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY)})
# Each nesting level of for_each gets its own key window in the scratch space.
_SCRATCH_STRIDE = 1 << 32


def _cpu(vm: Interpreter) -> int:
    ctx = vm.context
    return ctx.cpu if isinstance(ctx, RunContext) else 0


def _value_addr(m: ProgramMap, key: bytes, cpu: int) -> int:
    """The value's address without touching LRU state (the kernel's walk sets no reference bit)."""
    elem_of = getattr(m, "_elem_of", None)
    if getattr(m, "lru", False) and callable(elem_of):
        e = int(elem_of(key))
        return 0 if e < 0 else m.value_region(cpu).base + e * m.elem_size
    return m.lookup_addr(key, cpu)


# The twin's keys: a read-only region every run of a program calling it maps (the
# nesting level in its first word, then one window per level).
FOR_EACH_KEYS = SCRATCH_BASE + (0xFE << 32)
_FE_WINDOW = 64
_FE_LEVELS = MAX_CALL_FRAMES
# After the windows: the hash maps' key snapshots, a stack over the nesting levels (the
# second word is its top).
_FE_SNAP = _FE_WINDOW * (1 + _FE_LEVELS)
_FE_SNAP_BYTES = 1 << 16
_FE_SIZE = _FE_SNAP + _FE_SNAP_BYTES


def _for_each_fn(natives: Natives) -> str:
    """``bpf_for_each_map_elem``'s twin (reference: :func:`_for_each_map_elem`) for the
    ARRAY, PERCPU_ARRAY, HASH and PERCPU_HASH maps the program names: the callback
    (entry ``%cb``, frame ``%depth``) called natively with (map, key, value, ctx) until it
    returns non-zero, the key written into the level's window of the
    :data:`FOR_EACH_KEYS` region. Arrays: every index in order. Hash maps: the keys of
    the live elements in index order copied first (the snapshot the Python helper takes,
    into the region's snapshot stack), each then looked up again (the maps' own
    ``lookup_cpu`` twin) so elements the callback deleted are skipped. SLOW (the Python
    helper) for other maps (LRU hashes: a lookup there is not free of side effects),
    calls nested past the windows, keys over a window, a snapshot past its stack."""
    maps = [m for m in natives.maps if (m.kind == "array" and m.map_type in _ARRAYS) or (
        m.kind == "hash" and not m.lru and m.map_type in _FOR_EACH_TYPES
        and m.key_size <= _FE_WINDOW and (n := map_native(m.map_type)) is not None
        and "lookup_cpu" in n.functions)]
    cases = " ".join(f"i64 {c64(m.addr)}, label %m{m.slot}" for m in maps)
    out = [f"  switch i64 %r1, label %slow [ {cases} ]",
           "slow:", f"  ret i64 {c64(SLOW)}"]
    extra = []
    for m in maps:
        k = f"m{m.slot}"
        out += [
            f"{k}:",
            f"  %{k}a = icmp ne i64 %r4, 0",
            f"  br i1 %{k}a, label %einval, label %{k}b",
            f"{k}b:",
            f"  %{k}deep = icmp uge i64 %depth, {MAX_CALL_FRAMES}",
            f"  br i1 %{k}deep, label %slow, label %{k}c",
            f"{k}c:",
            f"  %{k}hdr = call ptr @translate(ptr %ctx, i64 {c64(FOR_EACH_KEYS)}, "
            f"i64 {_FE_SIZE}, i1 false)",
            f"  %{k}nohdr = icmp eq ptr %{k}hdr, null",
            f"  br i1 %{k}nohdr, label %slow, label %{k}d",
            f"{k}d:",
            f"  %{k}lvl = load i64, ptr %{k}hdr, align 8",
            f"  %{k}topp = getelementptr i8, ptr %{k}hdr, i64 8",
            f"  %{k}top = load i64, ptr %{k}topp, align 8",
            f"  %{k}full = icmp uge i64 %{k}lvl, {_FE_LEVELS}",
            f"  br i1 %{k}full, label %slow, label %{k}e",
            f"{k}e:",  # the run's CPU (0 outside a RunContext, as _cpu)
            *_ctx_load(f"%{k}nf", "nflags"),
            f"  %{k}rc0 = and i64 %{k}nf, {NF_RUNCTX}",
            f"  %{k}rc = icmp ne i64 %{k}rc0, 0",
            *_ctx_load(f"%{k}cpu0", "cpu"),
            f"  %{k}cpu = select i1 %{k}rc, i64 %{k}cpu0, i64 0",
            f"  %{k}ko = mul i64 %{k}lvl, {_FE_WINDOW}",
            f"  %{k}ko1 = add i64 %{k}ko, {_FE_WINDOW}",
            f"  %{k}key = getelementptr i8, ptr %{k}hdr, i64 %{k}ko1",
            f"  %{k}kf = add i64 %{k}ko1, {c64(FOR_EACH_KEYS)}",
        ]
        if m.kind == "array":
            pre = f"{k}f"
            out += [
                f"  %{k}badcpu = icmp uge i64 %{k}cpu, {m.nr_cpus}",
                f"  br i1 %{k}badcpu, label %slow, label %{k}f",
                f"{k}f:",
                f"  %{k}coff = mul i64 %{k}cpu, {m.cpu_stride if m.percpu else 0}",
                f"  %{k}vb = add i64 %{k}coff, {c64(m.value_base)}",
                f"  %{k}n = add i64 0, {m.max_entries}",
            ]
        else:
            ks = m.key_size
            extra.append(map_native(m.map_type).functions["lookup_cpu"]("for_each", m))  # type: ignore[union-attr]
            pre = f"{k}sd"
            out += [
                f"  %{k}mt = getelementptr i8, ptr %ctx, i64 {8 * CTX['maps']}",
                f"  %{k}maps = load ptr, ptr %{k}mt, align 8",
            ]
            for w in ("hdr", "index", "key_data"):
                out += [f"  %{k}{w}q = getelementptr i8, ptr %{k}maps, i64 "
                        f"{8 * (m.slot * len(MAPDESC_FIELDS) + MAPDESC[w])}",
                        f"  %{k}m{w} = load ptr, ptr %{k}{w}q, align 8"]
            out += [
                f"  %{k}cnt = load i64, ptr %{k}mhdr, align 8",
                f"  %{k}need = mul i64 %{k}cnt, {ks}",
                f"  %{k}end = add i64 %{k}top, %{k}need",
                f"  %{k}over = icmp ugt i64 %{k}end, {_FE_SNAP_BYTES}",
                f"  br i1 %{k}over, label %slow, label %{k}s0",
                f"{k}s0:",
                f"  %{k}so = add i64 %{k}top, {_FE_SNAP}",
                f"  %{k}snap = getelementptr i8, ptr %{k}hdr, i64 %{k}so",
                f"  br label %{k}sh",
                f"{k}sh:",  # the keys of the live elements, in index order
                f"  %{k}s = phi i64 [ 0, %{k}s0 ], [ %{k}s1, %{k}sn ]",
                f"  %{k}cn = phi i64 [ 0, %{k}s0 ], [ %{k}c2, %{k}sn ]",
                f"  %{k}smore = icmp ult i64 %{k}s, {m.capacity}",
                f"  br i1 %{k}smore, label %{k}sb, label %{k}sd",
                f"{k}sb:",
                f"  %{k}io = shl i64 %{k}s, 2",
                f"  %{k}ip = getelementptr i8, ptr %{k}mindex, i64 %{k}io",
                f"  %{k}e32 = load i32, ptr %{k}ip, align 4",
                f"  %{k}live = icmp sge i32 %{k}e32, 0",
                f"  br i1 %{k}live, label %{k}sc, label %{k}sn",
                f"{k}sc:",
                f"  %{k}room = icmp ult i64 %{k}cn, %{k}cnt",
                f"  br i1 %{k}room, label %{k}sk, label %slow",
                f"{k}sk:",
                f"  %{k}el = sext i32 %{k}e32 to i64",
                f"  %{k}eo = mul i64 %{k}el, {m.key_stride}",
                f"  %{k}src = getelementptr i8, ptr %{k}mkey_data, i64 %{k}eo",
                f"  %{k}do = mul i64 %{k}cn, {ks}",
                f"  %{k}dst = getelementptr i8, ptr %{k}snap, i64 %{k}do",
                f"  call void @llvm.memmove.p0.p0.i64(ptr %{k}dst, ptr %{k}src, i64 {ks}, "
                "i1 false)",
                f"  %{k}c1 = add i64 %{k}cn, 1",
                f"  br label %{k}sn",
                f"{k}sn:",
                f"  %{k}c2 = phi i64 [ %{k}cn, %{k}sb ], [ %{k}c1, %{k}sk ]",
                f"  %{k}s1 = add i64 %{k}s, 1",
                f"  br label %{k}sh",
                f"{k}sd:",
                f"  %{k}n = add i64 %{k}cn, 0",
                f"  %{k}sz = mul i64 %{k}cn, {ks}",
                f"  %{k}top1 = add i64 %{k}top, %{k}sz",
                f"  store i64 %{k}top1, ptr %{k}topp, align 8",
            ]
        out += [
            f"  %{k}lvl1 = add i64 %{k}lvl, 1",
            f"  store i64 %{k}lvl1, ptr %{k}hdr, align 8",
            f"  br label %{k}head",
            f"{k}head:",
            f"  %{k}i = phi i64 [ 0, %{pre} ], [ %{k}i1, %{k}next ], [ %{k}i1, %{k}skip ]",
            f"  %{k}vis = phi i64 [ 0, %{pre} ], [ %{k}vis1, %{k}next ], [ %{k}vis, %{k}skip ]",
            f"  %{k}more = icmp ult i64 %{k}i, %{k}n",
            f"  %{k}i1 = add i64 %{k}i, 1",
            f"  br i1 %{k}more, label %{k}body, label %{k}done",
            f"{k}body:",
        ]
        if m.kind == "array":
            out += [
                f"  %{k}i32 = trunc i64 %{k}i to i32",
                f"  store i32 %{k}i32, ptr %{k}key, align 4",
                f"  %{k}vo = mul i64 %{k}i, {m.elem_size}",
                f"  %{k}v = add i64 %{k}vb, %{k}vo",
                f"  br label %{k}call",
                f"{k}skip:",
                f"  br label %{k}head",
            ]
        else:  # looked up again: the callback may have deleted it meanwhile
            out += [
                f"  %{k}ko2 = mul i64 %{k}i, {m.key_size}",
                f"  %{k}sk2 = getelementptr i8, ptr %{k}snap, i64 %{k}ko2",
                f"  %{k}v = call i64 @for_each_lookup_cpu{m.slot}(ptr %ctx, ptr %{k}sk2, "
                f"i64 %{k}cpu)",
                f"  %{k}gone = icmp eq i64 %{k}v, 0",
                f"  %{k}odd = icmp eq i64 %{k}v, {c64(SLOW)}",  # only a table changed meanwhile
                f"  %{k}no = or i1 %{k}gone, %{k}odd",
                f"  br i1 %{k}no, label %{k}skip, label %{k}cp",
                f"{k}skip:",
                f"  br label %{k}head",
                f"{k}cp:",
                f"  call void @llvm.memmove.p0.p0.i64(ptr %{k}key, ptr %{k}sk2, "
                f"i64 {m.key_size}, i1 false)",
                f"  br label %{k}call",
            ]
        restore = [f"  store i64 %{k}lvl, ptr %{k}hdr, align 8",
                   f"  store i64 %{k}top, ptr %{k}topp, align 8"]
        out += [
            f"{k}call:",
            f"  %{k}vis1 = add i64 %{k}vis, 1",
            f"  %{k}r0 = call i64 %cb(ptr %ctx, i64 %depth, i64 %r1, i64 %{k}kf, i64 %{k}v, "
            "i64 %r3, i64 0)",
            *_ctx_load(f"%{k}st", "status"),
            f"  %{k}stop = icmp ne i64 %{k}st, 0",
            f"  br i1 %{k}stop, label %{k}stopped, label %{k}went",
            f"{k}stopped:",  # the callback faulted or threw: the call site unwinds
            *restore,
            "  ret i64 0",
            f"{k}went:",
            f"  %{k}brk = icmp ne i64 %{k}r0, 0",
            f"  br i1 %{k}brk, label %{k}done, label %{k}next",
            f"{k}next:",
            f"  br label %{k}head",
            f"{k}done:",
            f"  %{k}cnt2 = phi i64 [ %{k}vis, %{k}head ], [ %{k}vis1, %{k}went ]",
            *restore,
            f"  ret i64 %{k}cnt2",
        ]
    out += ["einval:", f"  ret i64 {c64(neg(errno.EINVAL))}"]
    return "".join(extra) + (
        "define internal i64 @for_each(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, i64 %r4, "
        "ptr %cb, i64 %depth) nounwind {\nentry:\n" + "\n".join(out) + "\n}\n")


def _ctx_load(value: str, name: str) -> list[str]:
    """IR: ``value`` = the run context word ``name``."""
    return [f"  {value}p = getelementptr i8, ptr %ctx, i64 {8 * CTX[name]}",
            f"  {value} = load i64, ptr {value}p, align 8{TBAA_CTX}"]


@helper(164, "for_each_map_elem")
def _for_each_map_elem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    m = map_at(r1)
    if m.map_type not in _FOR_EACH_TYPES:
        raise HelperFault(f"bpf_for_each_map_elem on a map of type {m.map_type} (the "
                          "verifier allows arrays and hash maps only)")
    if r4:
        return neg(errno.EINVAL)
    cpu = _cpu(vm)
    ctx = vm.context if isinstance(vm.context, RunContext) else None
    depth = len(ctx.scratch) if ctx is not None else 0
    key_region = Region(f"for_each key of map {m.name or m.id}",
                        SCRATCH_BASE + depth * _SCRATCH_STRIDE, bytearray(m.key_size),
                        writable=False)
    vm.mem.add(key_region)  # engines publish vm.mem before running a callback
    if ctx is not None:
        ctx.scratch.append(key_region)
    visited = 0
    try:
        keys: Iterable[bytes]
        if m.map_type in _ARRAYS:
            keys = (i.to_bytes(4, "little") for i in range(m.max_entries))
        else:
            # A snapshot: elements the callback deletes are skipped when reached.
            keys = list(m.raw_keys())
        for key in keys:
            value = _value_addr(m, key, cpu)
            if not value:
                continue
            key_region.buf[:] = key
            visited += 1
            if vm.call_function(r2, r1, key_region.base, value, r3):
                break
    finally:
        vm.mem.remove(key_region)
        if ctx is not None:
            ctx.scratch.remove(key_region)
    return visited


register_helper(164, HelperNative("for_each", 4, _for_each_fn, ("translate",), callback=2,
                                  region=("for_each keys", FOR_EACH_KEYS, _FE_SIZE)))


# -- ring buffers ------------------------------------------------------------------------

def _ringbuf(addr: int) -> RingBufMap:
    m = map_at(addr)
    if not is_ringbuf(m):
        raise HelperFault(f"map {m.name or m.id} is not a ring buffer")
    return m


def _ringbuf_of_sample(addr: int) -> RingBufMap:
    """The ring buffer whose data area holds ``addr`` (the kernel finds it from the header)."""
    if addr >= MAP_SPACE_BASE:
        window = MAP_SPACE_BASE + (addr - MAP_SPACE_BASE) // MAP_WINDOW * MAP_WINDOW
        for k in range(4):  # a ring of up to 3 windows before the sample's
            m = map_by_addr(window - k * MAP_WINDOW)
            if m is not None and is_ringbuf(m):
                r = m.value_region()
                if r.base <= addr < r.end:
                    return m
    raise HelperFault(f"{addr:#x} is not a reserved ring buffer sample")


@helper(130, "ringbuf_output")
def _ringbuf_output(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    rb = _ringbuf(r1)
    if r4 & ~3:  # only BPF_RB_NO_WAKEUP / BPF_RB_FORCE_WAKEUP; checked before the copy
        return neg(errno.EINVAL)
    return rb.try_output(vm.mem.read(r2, r3), r4) & M64


@helper(131, "ringbuf_reserve")
def _ringbuf_reserve(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _ringbuf(r1).reserve(r2, r3)


def _commit(addr: int, discard: bool, flags: int) -> int:
    rb = _ringbuf_of_sample(addr)
    try:
        # Flags only choose wakeups, which nothing here waits for.
        (rb.discard if discard else rb.submit)(addr, flags)
    except MapError as e:
        raise HelperFault(f"ring buffer commit: {e}") from None
    return 0


@helper(132, "ringbuf_submit")
def _ringbuf_submit(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _commit(r1, False, r2)


@helper(133, "ringbuf_discard")
def _ringbuf_discard(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _commit(r1, True, r2)


@helper(198, "ringbuf_reserve_dynptr")
def _ringbuf_reserve_dynptr(vm: Interpreter, r1: int, r2: int, r3: int, r4: int,
                            r5: int) -> int:
    """``bpf_ringbuf_reserve_dynptr(map, size, flags, ptr)``: a null dynptr and an
    error when it fails (the program must still submit or discard it)."""
    rb = _ringbuf(r1)
    size = r2 & 0xFFFF_FFFF
    if r3:
        dynptr_set_null(vm, r4)
        return neg(errno.EINVAL)
    if size > DYNPTR_MAX_SIZE:  # bpf_dynptr_check_size
        dynptr_set_null(vm, r4)
        return neg(errno.E2BIG)
    sample = rb.reserve(size, 0)
    if not sample:
        dynptr_set_null(vm, r4)
        return neg(errno.EINVAL)
    dynptr_init(vm, r4, sample, BPF_DYNPTR_TYPE_RINGBUF, 0, size)
    return 0


def _commit_dynptr(vm: Interpreter, addr: int, discard: bool, flags: int) -> int:
    """``bpf_ringbuf_submit_dynptr``/``_discard_dynptr``: nothing for a null dynptr."""
    d = dynptr_load(vm, addr)
    if not d.data:
        return 0
    if d.kind != BPF_DYNPTR_TYPE_RINGBUF:
        raise HelperFault(f"dynptr at {addr:#x} (type {d.kind}) is not a ring buffer dynptr")
    _commit(d.data, discard, flags)
    dynptr_set_null(vm, addr)
    return 0


@helper(199, "ringbuf_submit_dynptr")
def _ringbuf_submit_dynptr(vm: Interpreter, r1: int, r2: int, r3: int, r4: int,
                           r5: int) -> int:
    return _commit_dynptr(vm, r1, False, r2)


@helper(200, "ringbuf_discard_dynptr")
def _ringbuf_discard_dynptr(vm: Interpreter, r1: int, r2: int, r3: int, r4: int,
                            r5: int) -> int:
    return _commit_dynptr(vm, r1, True, r2)


@helper(134, "ringbuf_query")
def _ringbuf_query(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _ringbuf(r1).query(r2) & M64


# The twins: the lowering calls the ring's own functions (pyxdp.maps.ringbuf's); a
# ring is shared by every CPU and its twins take no lock, so callers run on one at a time.
for _hid, _kind in ((130, "ringbuf_output"), (131, "ringbuf_reserve"), (132, "ringbuf_submit"),
                    (133, "ringbuf_discard"), (134, "ringbuf_query")):
    register_helper(_hid, HelperNative(_kind, serial=_hid != 134))

