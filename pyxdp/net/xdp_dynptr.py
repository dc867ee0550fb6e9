"""Dynptrs over XDP frames: ``bpf_dynptr_from_xdp`` (``net/core/filter.c``), the
``bpf_dynptr_slice``/``_rdwr`` kfuncs and the ``bpf_dynptr_read``/``write``
helpers (``kernel/bpf/helpers.c``) for ``BPF_DYNPTR_TYPE_XDP``.

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
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable

from pyxdp.errors import HelperFault
from pyxdp.net.xdp import CTX_BASE, XdpBuff
from pyxdp.vm.helpers import RunContext, neg
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.memory import Region

__all__ = ["BPF_DYNPTR_TYPE_XDP", "DYNPTR_KFUNCS", "dynptr_read", "dynptr_write"]

BPF_DYNPTR_TYPE_XDP = 4
_TYPE_SHIFT = 28
_TYPE_MASK = 0x7
_SIZE_MASK = 0xFF_FFFF
_RDONLY = 1 << 31
_KERN = struct.Struct("<QII")  # data, size (with type and rdonly bits), offset
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
    data, size, offset = _KERN.unpack(vm.mem.read(addr, _KERN.size))
    return data, size & _SIZE_MASK, (size >> _TYPE_SHIFT) & _TYPE_MASK, offset


def _check_off_len(size: int, offset: int, length: int) -> int:
    """``bpf_dynptr_check_off_len``."""
    return neg(errno.E2BIG) if length > size or offset > size - length else 0


def _frame(vm: Interpreter, data: int, kind: int) -> XdpBuff:
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
    for r in vm.mem.regions:
        if r.base == base and isinstance(r.buf, memoryview) and r.buf.obj is frag:
            return base
    vm.mem.add(Region(f"packet frag {i}", base, memoryview(frag)))
    return base


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
        # bpf_xdp_pointer: one piece of the frame holds the whole range.
        if off <= 0xFFFF and length <= 0xFFFF and off + length <= xdp.buff_len():
            linear = xdp.data_end - xdp.data
            if off < linear:
                if off + length <= linear:
                    return xdp.ctx_pointers()[0] + off
            else:
                rest = off - linear
                for i, frag in enumerate(xdp.frags):
                    if rest < len(frag):
                        if rest + length <= len(frag):
                            return _frag_region(vm, xdp, i) + rest
                        break
                    rest -= len(frag)
        if not r3:
            return 0
        got = xdp.packet()[off:off + length]  # bpf_xdp_copy_buf
        vm.mem.write(r3, got.ljust(length, b"\0"))
        return r3
    return call


# The kfuncs by name (bound as private helpers, like the RX metadata kfuncs).
DYNPTR_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_dynptr_from_xdp": dynptr_from_xdp,
    "bpf_dynptr_slice": _slice(False),
    "bpf_dynptr_slice_rdwr": _slice(True),
}
