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
  :func:`bpf_bprintf` is the pure function.
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
from dataclasses import dataclass
from typing import TYPE_CHECKING

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
from pyxdp.vm.jit.natives import HelperNative, register_helper
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


@dataclass(frozen=True)
class _Conv:
    """One conversion as ``bstr_printf`` will read it back from the binary buffer.

    ``kind``: ``num`` (``size`` 4 or 8 bytes, ``conv`` one of ``diuxX``),
    ``chr``, ``str`` (a copied string, printed with its width), ``pre`` (a
    string pre-formatted by prepare: printed without width, and it swallows
    following letters/digits), ``ptr`` (an 8-byte pointer value printed at
    print time: ``conv`` is ``p``, ``K``, ``x``, ``s`` or ``S``).
    """

    kind: str
    flags: int = 0
    width: int = -1
    size: int = 0
    conv: str = ""


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

