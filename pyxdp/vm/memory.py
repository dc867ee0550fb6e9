"""Memory regions and the one bounds check every engine shares.

The kernel trusts its verifier to keep loads and stores inside known objects
(context, packet, stack, map values). pyxdp has no such verifier, so every
access is checked at run time against a small set of *regions*: a base
address in a fake 64-bit address space, a byte buffer and write permission.
An access that fits no region stops the program with a :class:`MemoryFault`
naming the address, the size and the nearest region, the way uBPF's
``bounds_check`` does.

Addresses are fake on purpose: a program can never reach host memory, and
pointer values stay deterministic from run to run.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from pyxdp.errors import MemoryFault

__all__ = ["STACK_BASE", "STACK_FRAME_GAP", "STACK_SIZE", "Memory", "Region"]

STACK_SIZE = 512
# Each call frame gets its own 512-byte stack; the gap between frames makes
# an overrun of one frame fault instead of landing in the next.
STACK_BASE = 0x0000_7FF0_0000_0000
STACK_FRAME_GAP = 0x1_0000

_U = {1: struct.Struct("<B"), 2: struct.Struct("<H"), 4: struct.Struct("<I"),
      8: struct.Struct("<Q")}
_S = {1: struct.Struct("<b"), 2: struct.Struct("<h"), 4: struct.Struct("<i")}
_MASK = {1: 0xFF, 2: 0xFFFF, 4: 0xFFFF_FFFF, 8: 0xFFFF_FFFF_FFFF_FFFF}
M64 = 0xFFFF_FFFF_FFFF_FFFF


@dataclass(eq=False)
class Region:
    """A contiguous piece of program-visible memory."""

    name: str
    base: int
    buf: bytearray | memoryview
    writable: bool = True
    size: int = field(init=False)

    def __post_init__(self) -> None:
        self.size = len(self.buf)

    @property
    def end(self) -> int:
        return self.base + self.size


class Memory:
    """The regions visible to one program run, with checked access."""

    def __init__(self) -> None:
        self.regions: list[Region] = []
        self._last: Region | None = None

    def reset(self, regions: list[Region]) -> None:
        self.regions = regions
        self._last = regions[0] if regions else None

    def add(self, region: Region) -> None:
        self.regions.append(region)
        if self._last is None:
            self._last = region

    def remove(self, region: Region) -> None:
        self.regions.remove(region)
        if self._last is region:
            self._last = self.regions[0] if self.regions else None

    def find(self, addr: int, size: int, write: bool) -> tuple[Region, int]:
        """The region holding ``[addr, addr+size)`` and the offset in it."""
        r = self._last
        if r is not None:
            off = addr - r.base
            if 0 <= off and off + size <= r.size and (r.writable or not write):
                return r, off
        for r in self.regions:
            off = addr - r.base
            if 0 <= off and off + size <= r.size:
                if write and not r.writable:
                    raise MemoryFault(
                        f"write of {size} bytes to read-only {r.name} at {addr:#x}",
                        address=addr, size=size, region=r.name)
                self._last = r
                return r, off
        raise self._fault(addr, size, write)

    def _fault(self, addr: int, size: int, write: bool) -> MemoryFault:
        kind = "write" if write else "read"
        near = self.nearest(addr)
        if near is None:
            where = "no memory is mapped"
            region = ""
        else:
            region = near.name
            if addr < near.base:
                where = f"{near.base - addr} bytes before {near.name} " \
                        f"[{near.base:#x}, {near.end:#x})"
            elif addr >= near.end:
                where = f"{addr - near.end} bytes past the end of {near.name} " \
                        f"[{near.base:#x}, {near.end:#x})"
            else:
                where = f"crosses the end of {near.name} [{near.base:#x}, {near.end:#x})"
        return MemoryFault(f"out-of-bounds {kind} of {size} bytes at {addr:#x}: {where}",
                           address=addr, size=size, region=region)

    def nearest(self, addr: int) -> Region | None:
        best: Region | None = None
        dist = None
        for r in self.regions:
            d = 0 if r.base <= addr < r.end else min(abs(addr - r.base), abs(addr - r.end))
            if dist is None or d < dist:
                best, dist = r, d
        return best

    # Hot paths: the common case (same region as last time) is inlined.
    def load(self, addr: int, size: int) -> int:
        r = self._last
        if r is not None:
            off = addr - r.base
            if 0 <= off and off + size <= r.size:
                return _U[size].unpack_from(r.buf, off)[0]  # type: ignore[no-any-return]
        r, off = self.find(addr, size, False)
        return _U[size].unpack_from(r.buf, off)[0]  # type: ignore[no-any-return]

    def load_signed(self, addr: int, size: int) -> int:
        r, off = self.find(addr, size, False)
        return _S[size].unpack_from(r.buf, off)[0] & M64  # type: ignore[no-any-return]

    def store(self, addr: int, size: int, value: int) -> None:
        r = self._last
        if r is not None and r.writable:
            off = addr - r.base
            if 0 <= off and off + size <= r.size:
                _U[size].pack_into(r.buf, off, value & _MASK[size])
                return
        r, off = self.find(addr, size, True)
        _U[size].pack_into(r.buf, off, value & _MASK[size])

    def read(self, addr: int, size: int) -> bytes:
        """Bytes for helpers; ``size`` 0 is a valid empty read."""
        if size == 0:
            return b""
        if size < 0:
            raise MemoryFault(f"negative size {size}", address=addr, size=size)
        r, off = self.find(addr, size, False)
        return bytes(r.buf[off:off + size])

    def write(self, addr: int, data: bytes) -> None:
        if not data:
            return
        r, off = self.find(addr, len(data), True)
        r.buf[off:off + len(data)] = data
