"""Dynptrs over XDP frames: ``bpf_dynptr_from_xdp`` (``net/core/filter.c``), the
``bpf_dynptr_slice``/``_rdwr``, ``_size``, ``_is_null``, ``_is_rdonly``,
``_adjust``, ``_clone``, ``_copy`` and ``_memset`` kfuncs and the
``bpf_dynptr_read``/``write`` helpers (``kernel/bpf/helpers.c``) for
``BPF_DYNPTR_TYPE_XDP``.

A dynptr is 16 bytes of the program's stack (``struct bpf_dynptr_kern``):
``data`` (here the ``xdp_md`` context's address: the frame of the current
run), ``size`` (bits 0-23; the type in bits 28-30; bit 31 read-only) and
``offset``. As in Linux the size is the frame's length (linear part and
frags) when the dynptr is made and does not follow later ``adjust_*`` calls;
``offset`` and length are checked against it (-E2BIG) before the frame's own
rules (``bpf_xdp_load_bytes``: -EFAULT past 0xffff, -EINVAL past the end).

``bpf_dynptr_slice`` returns a pointer into the frame when the range lies in
one piece of it - the linear part or one frag - as ``bpf_xdp_pointer`` does
(a frag is mapped as a region of its own for the program), else copies the
range into the caller's buffer and returns that (NULL without a buffer).
``bpf_dynptr_copy`` and ``_memset`` work in place where that pointer exists and
otherwise through 256-byte chunks of read and write, as Linux does: a failure
midway leaves the earlier chunks written. ``_adjust`` narrows the window
(``offset`` grows, the size shrinks; -ERANGE past it).

``bpf_probe_read_{kernel,user}{,_str}_dynptr`` (``kernel/trace/bpf_trace.c``'s
``__bpf_dynptr_copy`` and ``_str``) write into a dynptr of any type the same way:
straight through ``bpf_dynptr_slice_rdwr``'s pointer, else in 256-byte chunks, the
bytes read as :mod:`pyxdp.vm.maccess` reads kernel memory; from XDP the user
variants read nothing (-EFAULT). Their twins serve local and ring buffer dynptrs
and the frame's linear part.
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable

from pyxdp.errors import HelperFault, MemoryFault
from pyxdp.net.xdp import CTX_BASE, XdpBuff
from pyxdp.vm.bpf_crypto import CRYPTO_CTX_KFUNCS, Mem, make_crypt
from pyxdp.vm.bpf_trace import strncpy_nofault_ir
from pyxdp.vm.dynptr import (
    BPF_DYNPTR_TYPE_XDP,
    DYNPTR_RDONLY,
    DYNPTR_SIZE_MASK,
    DYNPTR_TYPE_SHIFT,
    KERN,
    MEMORY_TYPES,
    MemBytes,
    check_off_len,
    dynptr_load,
)
from pyxdp.vm.helpers import RunContext, neg
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.jit.abi import NF_XDP, SLOW, Natives
from pyxdp.vm.jit.ir import Text, c64, ret_if
from pyxdp.vm.jit.natives import HelperNative, register_kfunc
from pyxdp.vm.maccess import nofault_allowed, nofault_allowed_ir, read_byte_nofault
from pyxdp.vm.memory import Region

__all__ = ["BPF_DYNPTR_TYPE_XDP", "CRYPTO_KFUNCS", "DYNPTR_KFUNCS", "PROBE_READ_KFUNCS",
           "dynptr_direct", "dynptr_mem", "dynptr_read", "dynptr_write"]

_TYPE_SHIFT = DYNPTR_TYPE_SHIFT
_SIZE_MASK = DYNPTR_SIZE_MASK
_RDONLY = DYNPTR_RDONLY
_KERN = KERN
# Fake addresses of frag pages a slice points into (frag i at FRAG_BASE + i * 64 KiB).
FRAG_BASE = 0x0000_3800_0000_0000
M32 = 0xFFFF_FFFF
M64 = 0xFFFF_FFFF_FFFF_FFFF


def _xdp(vm: Interpreter) -> XdpBuff:
    ctx = vm.context
    if not isinstance(ctx, RunContext) or ctx.xdp is None:
        raise HelperFault("XDP dynptr function called outside an XDP run")
    xdp: XdpBuff = ctx.xdp
    return xdp


def _load(vm: Interpreter, addr: int) -> tuple[int, int, int, int]:
    """``data``, size, type and offset of the dynptr at ``addr`` (data 0: a null dynptr)."""
    d = dynptr_load(vm, addr)
    return d.data, d.size, d.kind, d.offset


_check_off_len = check_off_len


def _frame(vm: Interpreter, data: int, kind: int) -> XdpBuff | MemBytes:
    """What the dynptr's bytes are: this run's frame, or memory (a ringbuf sample)."""
    if kind in MEMORY_TYPES:
        return MemBytes(vm, data)
    if kind != BPF_DYNPTR_TYPE_XDP or data != CTX_BASE:
        raise HelperFault(f"dynptr of type {kind} (data {data:#x}) is not an XDP dynptr of "
                          f"this run")
    return _xdp(vm)


def dynptr_from_xdp(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_dynptr_from_xdp(xdp_md, flags, ptr__uninit)``."""
    if r1 != CTX_BASE:
        raise HelperFault(f"first argument {r1:#x} is not the xdp_md context")
    xdp = _xdp(vm)
    if r2:
        vm.mem.write(r3, bytes(_KERN.size))  # bpf_dynptr_set_null
        return neg(errno.EINVAL)
    size = (xdp.buff_len() & _SIZE_MASK) | BPF_DYNPTR_TYPE_XDP << _TYPE_SHIFT
    vm.mem.write(r3, _KERN.pack(CTX_BASE, size, 0))
    return 0


def dynptr_read(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_dynptr_read(dst, len, src, offset, flags)``."""
    dst, length, offset = r1, r2 & M32, r4 & M32
    data, size, kind, base = _load(vm, r3)
    if not data or r5:
        return neg(errno.EINVAL)
    err = _check_off_len(size, offset, length)
    if err:
        return err
    got = _frame(vm, data, kind).load_bytes(base + offset, length)
    if isinstance(got, int):
        return got & M64
    vm.mem.write(dst, got)
    return 0


def dynptr_write(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_dynptr_write(dst, offset, src, len, flags)``."""
    offset, length = r2 & M32, r4 & M32
    data, size, kind, base = _load(vm, r1)
    rdonly = int.from_bytes(vm.mem.read(r1 + 8, 4), "little") & _RDONLY
    if not data or rdonly:
        return neg(errno.EINVAL)
    err = _check_off_len(size, offset, length)
    if err:
        return err
    if r5:
        return neg(errno.EINVAL)
    return _frame(vm, data, kind).store_bytes(base + offset, vm.mem.read(r3, length)) & M64


def _frag_region(vm: Interpreter, xdp: XdpBuff, i: int) -> int:
    """Map frag ``i`` for the program (once per run and frag); its base address."""
    base = FRAG_BASE + (i << 16)
    frag = xdp.frags[i]
    for r in list(vm.mem.regions):
        if r.base != base:
            continue
        if isinstance(r.buf, memoryview) and (r.buf is frag or r.buf.obj is frag):
            return base
        vm.mem.remove(r)  # another frame's (or a cut) frag i
    # A frag may itself be a view of its page (a JIT batch's frame).
    view = frag if isinstance(frag, memoryview) else memoryview(frag)
    vm.mem.add(Region(f"packet frag {i}", base, view))
    return base


def _pointer(xdp: XdpBuff, off: int, length: int) -> tuple[int, int] | None:
    """``bpf_xdp_pointer``: the piece of the frame (-1: the linear part, else a frag)
    and the offset in it where ``[off, off + length)`` lies whole, or None."""
    if off > 0xFFFF or length > 0xFFFF or off + length > xdp.buff_len():
        return None
    linear = xdp.data_end - xdp.data
    if off < linear:
        return (-1, off) if off + length <= linear else None
    rest = off - linear
    for i, frag in enumerate(xdp.frags):
        if rest < len(frag):
            return (i, rest) if rest + length <= len(frag) else None
        rest -= len(frag)
    # Past every frag (off at the end, length 0): the kernel falls back on the
    # linear part with what is left of the offset.
    return (-1, rest) if rest + length <= linear else None


def dynptr_direct(vm: Interpreter, r1: int, offset: int, length: int, rdwr: bool
            ) -> tuple[XdpBuff | MemBytes, int] | None:
    """Where ``bpf_dynptr_slice(_rdwr)(r1, offset, NULL, length)`` points: the dynptr's
    bytes and the offset in them, or None when it returns NULL."""
    data, size, kind, base = _load(vm, r1)
    rdonly = int.from_bytes(vm.mem.read(r1 + 8, 4), "little") & _RDONLY
    if not data or (rdwr and rdonly) or _check_off_len(size, offset, length):
        return None
    where = _frame(vm, data, kind)
    if isinstance(where, MemBytes) or _pointer(where, base + offset, length):
        return where, base + offset
    return None


def _slice(rdwr: bool) -> Callable[..., int]:
    def call(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        """``bpf_dynptr_slice(_rdwr)(ptr, offset, buffer__opt, buffer__szk)``."""
        offset, length = r2 & M32, r4 & M32
        data, size, kind, base = _load(vm, r1)
        rdonly = int.from_bytes(vm.mem.read(r1 + 8, 4), "little") & _RDONLY
        if not data or (rdwr and rdonly) or _check_off_len(size, offset, length):
            return 0
        xdp = _frame(vm, data, kind)
        off = base + offset
        if isinstance(xdp, MemBytes):  # LOCAL, RINGBUF: the memory itself
            return xdp.pointer(off) & M64
        at = _pointer(xdp, off, length)
        if at is not None:
            piece, rel = at
            if piece < 0:
                return xdp.ctx_pointers()[0] + rel
            return _frag_region(vm, xdp, piece) + rel
        if not r3:
            return 0
        got = xdp.packet()[off:off + length]  # bpf_xdp_copy_buf
        vm.mem.write(r3, got.ljust(length, b"\0"))
        return r3
    return call


def dynptr_size(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_dynptr_size(p)``: a ``__u32``, ``-EINVAL`` truncated for a null dynptr."""
    data, size, _, _ = _load(vm, r1)
    return size if data else neg(errno.EINVAL) & M32


def dynptr_is_null(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_dynptr_is_null(p)``."""
    return int(not _load(vm, r1)[0])


def dynptr_is_rdonly(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_dynptr_is_rdonly(p)``: false for a null dynptr."""
    if not _load(vm, r1)[0]:
        return 0
    return int(bool(int.from_bytes(vm.mem.read(r1 + 8, 4), "little") & _RDONLY))


def dynptr_adjust(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_dynptr_adjust(p, start, end)``: the window becomes ``[start, end)`` of the
    current one; the type and read-only bits stay."""
    start, end = r2 & M32, r3 & M32
    data, size, _, base = _load(vm, r1)
    if not data or start > end:
        return neg(errno.EINVAL)
    if start > size or end > size:
        return neg(errno.ERANGE)
    meta = int.from_bytes(vm.mem.read(r1 + 8, 4), "little") & ~_SIZE_MASK & M32
    vm.mem.write(r1 + 8, struct.pack("<II", (end - start) | meta, (base + start) & M32))
    return 0


def dynptr_clone(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_dynptr_clone(p, clone__uninit)``: a copy of the 16 bytes (null and -EINVAL
    from a null one)."""
    if not _load(vm, r1)[0]:
        vm.mem.write(r2, bytes(_KERN.size))
        return neg(errno.EINVAL)
    vm.mem.write(r2, vm.mem.read(r1, _KERN.size))
    return 0


def _write_bytes(vm: Interpreter, r1: int, offset: int, data_: bytes) -> int:
    """``__bpf_dynptr_write(dst, offset, data_, len, 0)`` (negative errno or 0)."""
    data, size, kind, base = _load(vm, r1)
    rdonly = int.from_bytes(vm.mem.read(r1 + 8, 4), "little") & _RDONLY
    if not data or rdonly:
        return neg(errno.EINVAL)
    err = _check_off_len(size, offset, len(data_))
    if err:
        return err
    return _frame(vm, data, kind).store_bytes(base + offset, data_)


def _read_bytes(vm: Interpreter, r1: int, offset: int, length: int) -> bytes | int:
    """``__bpf_dynptr_read(dst, length, src, offset, 0)``: the bytes or a negative errno."""
    data, size, kind, base = _load(vm, r1)
    if not data:
        return neg(errno.EINVAL)
    err = _check_off_len(size, offset, length)
    if err:
        return err
    return _frame(vm, data, kind).load_bytes(base + offset, length)


_CHUNK = 256  # the on-stack bounce buffer of bpf_dynptr_copy and _memset


def dynptr_copy(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_dynptr_copy(dst, dst_off, src, src_off, size)``: through direct pointers
    where the frame has the ranges in one piece, else in 256-byte chunks (a failure
    midway leaves the chunks before it written)."""
    dst_off, src_off, size = r2 & M32, r4 & M32, r5 & M32
    src_at = dynptr_direct(vm, r3, src_off, size, False)
    dst_at = dynptr_direct(vm, r1, dst_off, size, True)
    if src_at is not None and dst_at is not None:  # memmove
        got = src_at[0].load_bytes(src_at[1], size)
        assert isinstance(got, bytes)
        return dst_at[0].store_bytes(dst_at[1], got) & M64
    if src_at is not None:
        got = src_at[0].load_bytes(src_at[1], size)
        assert isinstance(got, bytes)
        return _write_bytes(vm, r1, dst_off, got) & M64
    if dst_at is not None:
        got = _read_bytes(vm, r3, src_off, size)
        if isinstance(got, int):
            return got & M64
        return dst_at[0].store_bytes(dst_at[1], got) & M64
    for ptr, off in ((r1, dst_off), (r3, src_off)):
        if _check_off_len(_load(vm, ptr)[1], off, size):
            return neg(errno.E2BIG)
    done = 0
    while done < size:
        n = min(_CHUNK, size - done)
        got = _read_bytes(vm, r3, src_off + done, n)
        if isinstance(got, int):
            return got & M64
        err = _write_bytes(vm, r1, dst_off + done, got)
        if err:
            return err & M64
        done += n
    return 0


def dynptr_memset(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_dynptr_memset(p, offset, size, val)``: directly where the range is in one
    piece of the frame, else 256-byte writes."""
    offset, size, val = r2 & M32, r3 & M32, r4 & 0xFF
    at = dynptr_direct(vm, r1, offset, size, True)
    if at is not None:
        return at[0].store_bytes(at[1], bytes([val]) * size) & M64
    data, dsize, _, _ = _load(vm, r1)
    if data and int.from_bytes(vm.mem.read(r1 + 8, 4), "little") & _RDONLY:
        return neg(errno.EINVAL)
    err = _check_off_len(dsize, offset, size)
    if err:
        return err
    done = 0
    while done < size:
        n = min(_CHUNK, size - done)
        err = _write_bytes(vm, r1, offset + done, bytes([val]) * n)
        if err:
            return err & M64
        done += n
    return 0


# The kfuncs by name (bound as private helpers, like the RX metadata kfuncs).
DYNPTR_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_dynptr_from_xdp": dynptr_from_xdp,
    "bpf_dynptr_slice": _slice(False),
    "bpf_dynptr_slice_rdwr": _slice(True),
    "bpf_dynptr_size": dynptr_size,
    "bpf_dynptr_is_null": dynptr_is_null,
    "bpf_dynptr_is_rdonly": dynptr_is_rdonly,
    "bpf_dynptr_adjust": dynptr_adjust,
    "bpf_dynptr_clone": dynptr_clone,
    "bpf_dynptr_copy": dynptr_copy,
    "bpf_dynptr_memset": dynptr_memset,
}


def dynptr_mem(vm: Interpreter, addr: int, length: int, rw: bool) -> Mem | None:
    """``__bpf_dynptr_data(_rw)(p, length)`` (``bpf_dynptr_slice(_rdwr)(p, 0, NULL,
    length)``) as a buffer and the offset in it: a memory dynptr's bytes, or the piece
    of the frame holding the range whole; None where the slice would be NULL."""
    got = dynptr_direct(vm, addr, 0, length, rw)
    if got is None:
        return None
    where, off = got
    if isinstance(where, MemBytes):
        r, at = vm.mem.find(where.pointer(off), length, rw)
        return r.buf, at
    piece = _pointer(where, off, length)
    if piece is None:
        return None
    i, at = piece
    return (where.frame, where.data + at) if i < 0 else (where.frags[i], at)


# kernel/bpf/crypto.c's kfuncs (pyxdp.vm.bpf_crypto) with any dynptr's memory
CRYPTO_KFUNCS: dict[str, Callable[..., int]] = {
    **CRYPTO_CTX_KFUNCS,
    "bpf_crypto_encrypt": make_crypt(dynptr_mem, False),
    "bpf_crypto_decrypt": make_crypt(dynptr_mem, True),
}


# -- kernel/trace/bpf_trace.c: bpf_probe_read_{kernel,user}{,_str}_dynptr ---------------------
# Each copy function gives what lands at the destination and the return value, as
# copy_from_kernel_nofault, strncpy_from_kernel_nofault and their user twins leave them.
_CopyFn = Callable[[Interpreter, int, int], tuple[bytes, int]]


def _kernel_data(vm: Interpreter, src: int, size: int) -> tuple[bytes, int]:
    """``copy_from_kernel_nofault``: -ERANGE for a refused start; a read running past
    its region faults there (-EFAULT), leaving the whole 8-, 4-, 2- and 1-byte units it
    copied before, as the kernel's word loop does."""
    if not nofault_allowed(vm.mem, src):
        return b"", -errno.ERANGE
    src &= M64
    try:
        return vm.mem.read(src, size), 0
    except MemoryFault:
        pass
    try:
        r, off = vm.mem.find(src, 1, False)
        avail = r.size - off
    except MemoryFault:
        avail = 0
    done = 0
    for unit in (8, 4, 2, 1):
        while size - done >= unit:
            if done + unit > avail:
                return (vm.mem.read(src, done) if done else b""), -errno.EFAULT
            done += unit
    raise AssertionError("a read that faults stops before its end")


def _kernel_str(vm: Interpreter, src: int, size: int) -> tuple[bytes, int]:
    """``strncpy_from_kernel_nofault``: 0 for size 0; -ERANGE; the bytes up to and
    including the NUL, or ``size`` of them with the last made NUL, and their count; a
    fault NUL-terminates what was copied and is -EFAULT."""
    if not size:
        return b"", 0
    if not nofault_allowed(vm.mem, src):
        return b"", -errno.ERANGE
    out = bytearray()
    while True:
        b = read_byte_nofault(vm.mem, src + len(out))
        if b < 0:
            return bytes(out) + b"\0", -errno.EFAULT
        out.append(b)
        if not b or len(out) == size:
            break
    out[-1] = 0
    return bytes(out), len(out)


# x86-64's USER_PTR_MAX: the last address valid_user_address takes
USER_PTR_MAX = 0x7FFF_FFFF_F000


def _user_data(vm: Interpreter, src: int, size: int) -> tuple[bytes, int]:
    """``copy_from_user_nofault`` from XDP: pyxdp's memory is kernel memory to Linux
    (``__access_ok`` fails, even for size 0) and an XDP run has no user memory of its
    own, so any byte is -EFAULT, nothing copied; size 0 at a user address is 0."""
    if size or not _user_address(vm, src):
        return b"", -errno.EFAULT
    return b"", 0


def _user_address(vm: Interpreter, src: int) -> bool:
    """``valid_user_address``: not one of pyxdp's regions, at most USER_PTR_MAX."""
    try:
        vm.mem.find(src & M64, 1, False)
    except MemoryFault:
        return src & M64 <= USER_PTR_MAX
    return False


def _user_str(vm: Interpreter, src: int, size: int) -> tuple[bytes, int]:
    """``strncpy_from_user_nofault`` from XDP: 0 for size 0, else -EFAULT (as above)."""
    return b"", -errno.EFAULT if size else 0


def _dynptr_copy_in(fn: _CopyFn, string: bool) -> Callable[..., int]:
    def call(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        """``__bpf_dynptr_copy`` (``_str``)``(dptr, off, size, unsafe_ptr)``: straight into
        ``bpf_dynptr_slice_rdwr``'s pointer when there is one, else -E2BIG past the
        dynptr or through 256-byte chunks (-EINVAL for a read-only or null dynptr, at
        the first write); a string stops at its NUL."""
        doff, size = r2 & M32, r3 & M32
        at = dynptr_direct(vm, r1, doff, size, True)
        if at is not None:
            data, ret = fn(vm, r4, size)
            if data:
                at[0].store_bytes(at[1], data)
            return ret & M64
        if _check_off_len(_load(vm, r1)[1], doff, size):
            return neg(errno.E2BIG)
        off = 0
        while off < size:
            chunk = min(_CHUNK, size - off)
            data, cnt = fn(vm, r4 + off, chunk)
            if cnt < 0:
                return cnt & M64
            err = _write_bytes(vm, r1, doff + off, data[:cnt] if string else data)
            if err:
                return err & M64
            if not string:
                off += chunk
            elif cnt < chunk or chunk == 1:
                return off + cnt
            else:
                off += chunk - 1  # the next chunk overwrites the NUL
        return off if string else 0
    return call


def _probe_fn(kind: str, source: str) -> Callable[[Natives], str]:
    """The twin where ``bpf_dynptr_slice_rdwr`` gives a pointer into memory (a LOCAL or
    RINGBUF dynptr) or into the frame's linear part (``source``: ``kernel``,
    ``kernel_str``, ``user`` or ``user_str``); SLOW for the rest (a range in or across
    frags, a null or read-only dynptr, -E2BIG) and for a kernel read that faults
    midway."""
    def define(natives: Natives) -> str:
        f = Text()
        f.at("entry")
        kp = f.ins("call ptr @translate(ptr %ctx, i64 %r1, i64 16, i1 false)")
        ret_if(f, f.ins(f"icmp eq ptr {kp}, null"), SLOW)
        data = f.ins(f"load i64, ptr {kp}, align 1")
        word = f.ins(f"zext i32 {f.ins(f'load i32, ptr {f.gep(kp, 8)}, align 1')} to i64")
        base = f.ins(f"zext i32 {f.ins(f'load i32, ptr {f.gep(kp, 12)}, align 1')} to i64")
        kind_ = f.ins(f"and i64 {f.ins(f'lshr i64 {word}, {_TYPE_SHIFT}')}, 15")  # rdonly too
        mem = f.ins(f"or i1 {f.ins(f'icmp eq i64 {kind_}, {MEMORY_TYPES[0]}')}, "
                    f"{f.ins(f'icmp eq i64 {kind_}, {MEMORY_TYPES[1]}')}")
        # this run's frame (an XDP dynptr's data is the context's address)
        ours = f.ins(f"icmp eq i64 {data}, {c64(CTX_BASE)}")
        frame = f.ins(f"and i1 {f.flag(NF_XDP)}, {ours}")
        xdp = f.ins(f"and i1 {frame}, "
                    f"{f.ins(f'icmp eq i64 {kind_}, {BPF_DYNPTR_TYPE_XDP}')}")
        known = f.ins(f"or i1 {mem}, {xdp}")
        ret_if(f, f.ins(f"or i1 {f.ins(f'icmp eq i64 {data}, 0')}, "
                        f"{f.ins(f'xor i1 {known}, true')}"), SLOW)
        dsize = f.ins(f"and i64 {word}, {_SIZE_MASK}")
        off, size = f.ins("and i64 %r2, 4294967295"), f.ins("and i64 %r3, 4294967295")
        room = f.ins(f"sub i64 {dsize}, {size}")
        past = f.ins(f"or i1 {f.ins(f'icmp ugt i64 {size}, {dsize}')}, "
                     f"{f.ins(f'icmp ugt i64 {off}, {room}')}")
        ret_if(f, past, SLOW)
        # a frame's range: bpf_xdp_pointer's pointer when it lies in the linear part
        data0, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
        rel = f.ins(f"add i64 {base}, {off}")
        spans = f.ins(f"icmp ugt i64 {f.ins(f'add i64 {rel}, {size}')}, "
                      f"{f.ins(f'sub i64 {end}, {data0}')}")
        ret_if(f, f.ins(f"and i1 {xdp}, {spans}"), SLOW)
        if source.startswith("user"):
            ok = f.ins(f"icmp eq i64 {size}, 0")
            if source == "user":  # size 0 at a user address: __access_ok holds
                p = f.ins("call ptr @translate(ptr %ctx, i64 %r4, i64 1, i1 false)")
                user = f.ins(f"and i1 {f.ins(f'icmp eq ptr {p}, null')}, "
                             f"{f.ins(f'icmp ule i64 %r4, {USER_PTR_MAX}')}")
                ok = f.ins(f"and i1 {ok}, {user}")
            f.do(f"ret i64 {f.ins(f'select i1 {ok}, i64 0, i64 {c64(neg(errno.EFAULT))}')}")
            return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2, "
                          "i64 %r3, i64 %r4) nounwind")
        empty, work = f.label("empty"), f.label("work")
        f.cbr(f.ins(f"icmp eq i64 {size}, 0"), empty, work)
        f.at(empty)
        if source == "kernel":  # the address check alone
            ok = nofault_allowed_ir(f, "%r4")
            f.do(f"ret i64 {f.ins(f'select i1 {ok}, i64 0, i64 {c64(neg(errno.ERANGE))}')}")
        else:
            f.do("ret i64 0")
        f.at(work)
        inframe, inmem, have = f.label("inframe"), f.label("inmem"), f.label("have")
        f.cbr(xdp, inframe, inmem)
        f.at(inframe)
        dx = f.gep(f.cget("%ctx", "x_frame", "ptr"), f.ins(f"add i64 {data0}, {rel}"))
        f.br(have)
        f.at(inmem)
        at = f.ins(f"add i64 {data}, {rel}")
        dm = f.ins(f"call ptr @translate(ptr %ctx, i64 {at}, i64 {size}, i1 true)")
        ret_if(f, f.ins(f"icmp eq ptr {dm}, null"), SLOW)
        last = f.cur
        f.br(have)
        f.at(have)
        dst = f.ins(f"phi ptr [ {dx}, %{inframe} ], [ {dm}, %{last} ]")
        refused, go = f.label("refused"), f.label("go")
        f.cbr(nofault_allowed_ir(f, "%r4"), go, refused)
        f.at(refused)
        f.do(f"ret i64 {c64(neg(errno.ERANGE))}")
        f.at(go)
        f.cset("%ctx", "stack_dirty", "-1")  # the memory may be a stack frame's
        if source == "kernel":
            src = f.ins(f"call ptr @translate(ptr %ctx, i64 %r4, i64 {size}, i1 false)")
            ret_if(f, f.ins(f"icmp eq ptr {src}, null"), SLOW)  # a fault midway
            f.memmove(dst, src, size)
            f.do("ret i64 0")
        else:
            fault, done, i, nxt = strncpy_nofault_ir(f, dst, "%r4", size, go)
            f.at(fault)  # what was copied stays, NUL-terminated
            f.do(f"store i8 0, ptr {f.gep(dst, i)}, align 1")
            f.do(f"ret i64 {c64(neg(errno.EFAULT))}")
            f.at(done)
            f.do(f"store i8 0, ptr {f.gep(dst, f.ins(f'sub i64 {nxt}, 1'))}, align 1")
            f.do(f"ret i64 {nxt}")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                      "i64 %r4) nounwind")
    return define


PROBE_READ_KFUNCS: dict[str, Callable[..., int]] = {}
for _src, _fn, _string in (("kernel", _kernel_data, False), ("kernel_str", _kernel_str, True),
                           ("user", _user_data, False), ("user_str", _user_str, True)):
    _name = f"bpf_probe_read_{_src}_dynptr"
    PROBE_READ_KFUNCS[_name] = _dynptr_copy_in(_fn, _string)
    register_kfunc(_name, PROBE_READ_KFUNCS[_name],
                   HelperNative(f"probe_read_{_src}_dynptr", 4,
                                _probe_fn(f"probe_read_{_src}_dynptr", _src), ("translate",)))
DYNPTR_KFUNCS.update(PROBE_READ_KFUNCS)
