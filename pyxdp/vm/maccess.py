"""Reading memory a program names by any address, without faulting: ``mm/maccess.c``'s
``copy_from_kernel_nofault`` and x86-64's ``copy_from_kernel_nofault_allowed``.

Kfuncs with ``__ign`` pointer arguments (the string kfuncs, ``bpf_iter_bits_new``)
take whatever the program passes - a pointer or any number - and read through it
with fault handling. Linux on x86-64 (4-level paging, 48-bit virtual addresses):

* an address below ``TASK_SIZE_MAX + PAGE_SIZE`` (1 << 47: user space and its guard
  page), a non-canonical one or one in the vsyscall page is refused: -ERANGE;
* any other address is read; a fault gives -EFAULT.

pyxdp's program-visible memory (stack, packet, map values, ...) sits at fake
addresses below 1 << 47, so an address inside one of its regions is read from the
region, whatever its value; an address in no region is classified as above, and
every kernel address outside pyxdp's regions reads as unmapped (-EFAULT: Linux
would read mapped kernel memory there). A read that starts in a region and runs
past its end faults there (Linux reads on into whatever kernel memory follows).
"""

from __future__ import annotations

import errno

from pyxdp.errors import MemoryFault
from pyxdp.vm.jit.ir import Text, c64
from pyxdp.vm.memory import Memory

__all__ = ["CANONICAL_HIGH", "VSYSCALL_PAGE", "nofault_allowed", "nofault_allowed_ir",
           "read_byte_nofault", "read_nofault"]

# user space ends at TASK_SIZE_MAX + PAGE_SIZE (1 << 47); up to here addresses are
# not canonical
CANONICAL_HIGH = 0xFFFF_8000_0000_0000
VSYSCALL_PAGE = 0xFFFF_FFFF_FF60_0000
M64 = 0xFFFF_FFFF_FFFF_FFFF


def nofault_allowed(mem: Memory, addr: int) -> bool:
    """``copy_from_kernel_nofault_allowed(addr, 1)``: False means -ERANGE."""
    addr &= M64
    try:
        mem.find(addr, 1, False)
        return True
    except MemoryFault:
        pass
    return addr >= CANONICAL_HIGH and addr & ~0xFFF != VSYSCALL_PAGE


def read_nofault(mem: Memory, addr: int, size: int) -> bytes | int:
    """``copy_from_kernel_nofault(dst, addr, size)``: the bytes, or -ERANGE / -EFAULT."""
    if not nofault_allowed(mem, addr):
        return -errno.ERANGE
    try:
        return mem.read(addr & M64, size)
    except MemoryFault:
        return -errno.EFAULT


def read_byte_nofault(mem: Memory, addr: int) -> int:
    """``__get_kernel_nofault`` of one byte: 0..255, or -1 on a fault."""
    try:
        return mem.load(addr & M64, 1)
    except MemoryFault:
        return -1


def nofault_allowed_ir(f: Text, addr: str) -> str:
    """:func:`nofault_allowed` in native code (an i1; ``translate`` is the region lookup)."""
    p = f.ins(f"call ptr @translate(ptr %ctx, i64 {addr}, i64 1, i1 false)")
    mapped = f.ins(f"icmp ne ptr {p}, null")
    kernel = f.ins(f"icmp uge i64 {addr}, {c64(CANONICAL_HIGH)}")
    page = f.ins(f"and i64 {addr}, {c64(~0xFFF)}")
    vsys = f.ins(f"icmp eq i64 {page}, {c64(VSYSCALL_PAGE)}")
    novsys = f.ins(f"xor i1 {vsys}, true")
    return f.ins(f"or i1 {mapped}, {f.ins(f'and i1 {kernel}, {novsys}')}")
