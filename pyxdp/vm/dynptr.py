"""``struct bpf_dynptr_kern`` and the dynptrs over memory (``kernel/bpf/helpers.c``):
the layout every dynptr type shares, ``BPF_DYNPTR_TYPE_LOCAL`` dynptrs
(``bpf_dynptr_from_mem``: a map value, as Linux's verifier requires),
``BPF_DYNPTR_TYPE_RINGBUF`` dynptrs (made by ``bpf_ringbuf_reserve_dynptr``,
:mod:`pyxdp.vm.helpers_more`) and ``bpf_dynptr_data``.

A dynptr is 16 bytes of the program's stack: ``data`` (a pointer; 0 for a null
dynptr), ``size`` (bits 0-23; the type in bits 28-30; bit 31 read-only) and
``offset``. A local dynptr's ``data`` is the memory's address, a ringbuf dynptr's
its sample's address in the ring buffer's data region: their bytes are program
memory: reads, writes and
slices go straight to ``data + offset + off`` after ``bpf_dynptr_check_off_len``.
Packet dynptrs (``BPF_DYNPTR_TYPE_XDP``) are :mod:`pyxdp.net.xdp_dynptr`'s.
"""

from __future__ import annotations

import errno
import struct
from typing import TYPE_CHECKING, NamedTuple

from pyxdp.vm.context import helper, neg

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["BPF_DYNPTR_TYPE_LOCAL", "BPF_DYNPTR_TYPE_RINGBUF", "BPF_DYNPTR_TYPE_XDP",
           "DYNPTR_MAX_SIZE", "DYNPTR_RDONLY", "DYNPTR_SIZE_MASK", "Dynptr", "MemBytes",
           "check_off_len", "dynptr_init", "dynptr_load", "dynptr_set_null"]

# enum bpf_dynptr_type
BPF_DYNPTR_TYPE_LOCAL, BPF_DYNPTR_TYPE_RINGBUF, BPF_DYNPTR_TYPE_XDP = 1, 2, 4
DYNPTR_TYPE_SHIFT = 28
DYNPTR_TYPE_MASK = 0x7
DYNPTR_SIZE_MASK = 0xFF_FFFF
DYNPTR_MAX_SIZE = DYNPTR_SIZE_MASK  # bpf_dynptr_check_size: larger is -E2BIG
DYNPTR_RDONLY = 1 << 31
KERN = struct.Struct("<QII")  # data, size (with type and rdonly bits), offset
M32 = 0xFFFF_FFFF
M64 = 0xFFFF_FFFF_FFFF_FFFF


class Dynptr(NamedTuple):
    """The 16 bytes decoded."""

    data: int
    size: int
    kind: int
    offset: int
    rdonly: bool


def dynptr_load(vm: Interpreter, addr: int) -> Dynptr:
    """The dynptr at ``addr`` (``data`` 0: a null dynptr)."""
    data, size, offset = KERN.unpack(vm.mem.read(addr, KERN.size))
    return Dynptr(data, size & DYNPTR_SIZE_MASK, (size >> DYNPTR_TYPE_SHIFT) & DYNPTR_TYPE_MASK,
                  offset, bool(size & DYNPTR_RDONLY))


def dynptr_init(vm: Interpreter, addr: int, data: int, kind: int, offset: int,
                size: int) -> None:
    """``bpf_dynptr_init``."""
    vm.mem.write(addr, KERN.pack(data, size | kind << DYNPTR_TYPE_SHIFT, offset))


def dynptr_set_null(vm: Interpreter, addr: int) -> None:
    """``bpf_dynptr_set_null``."""
    vm.mem.write(addr, bytes(KERN.size))


def check_off_len(size: int, offset: int, length: int) -> int:
    """``bpf_dynptr_check_off_len``: 0 or -E2BIG."""
    return neg(errno.E2BIG) if length > size or offset > size - length else 0


class MemBytes:
    """The bytes behind a memory dynptr (LOCAL, RINGBUF), addressed from its ``data``
    as :class:`pyxdp.net.xdp.XdpBuff`'s ``load_bytes``/``store_bytes`` address the
    packet; the offset and length are already checked against the dynptr."""

    __slots__ = ("data", "vm")

    def __init__(self, vm: Interpreter, data: int) -> None:
        self.vm, self.data = vm, data

    def load_bytes(self, offset: int, length: int) -> bytes:
        return self.vm.mem.read(self.data + offset, length)

    def store_bytes(self, offset: int, data: bytes) -> int:
        self.vm.mem.write(self.data + offset, data)  # memmove
        return 0

    def pointer(self, offset: int) -> int:
        return self.data + offset


MEMORY_TYPES = (BPF_DYNPTR_TYPE_LOCAL, BPF_DYNPTR_TYPE_RINGBUF)


@helper(197, "dynptr_from_mem")
def _dynptr_from_mem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_dynptr_from_mem(data, size, flags, ptr)``: a LOCAL dynptr over the memory."""
    size = r2 & M32
    if size > DYNPTR_MAX_SIZE:  # bpf_dynptr_check_size
        dynptr_set_null(vm, r4)
        return neg(errno.E2BIG)
    if r3:
        dynptr_set_null(vm, r4)
        return neg(errno.EINVAL)
    dynptr_init(vm, r4, r1, BPF_DYNPTR_TYPE_LOCAL, 0, size)
    return 0


@helper(203, "dynptr_data")
def _dynptr_data(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_dynptr_data(ptr, offset, len)``: a pointer into a memory dynptr; NULL for a
    null, read-only or packet dynptr (those take ``bpf_dynptr_slice``) or a bad range."""
    d = dynptr_load(vm, r1)
    offset, length = r2 & M32, r3 & M32
    if not d.data or check_off_len(d.size, offset, length) or d.rdonly:
        return 0
    if d.kind not in MEMORY_TYPES:
        return 0
    return (d.data + d.offset + offset) & M64
