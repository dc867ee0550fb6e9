"""Typed map keys and values from BTF, the way ``bpftool map dump`` prints them.

Integers and enums become Python ints (signed where BTF says so), structs and
unions dicts of their members (bitfields included), ``char``/``u8`` arrays
bytes, other arrays lists, pointers ints. Encoding takes the same shapes back
(missing struct members are zero) or raw bytes of the right size.

Network byte order is in the types the program was written with: a member
declared ``__be16``/``__be64`` (a typedef BTF keeps) is a host-order int both
ways, ``__be32`` an :class:`ipaddress.IPv4Address` (what a ``__be32`` holds in
XDP programs: ``iph->saddr``), ``struct in6_addr`` an
:class:`ipaddress.IPv6Address`. Any 4-byte field (``__u32``, ``__u8[4]``) also
takes an IPv4 address, as an ``IPv4Address`` or a dotted string, and any 16-byte
field an IPv6 one: stored in network order, the bytes the packet carries, since
that is what a program copies from ``iph->saddr`` into its key.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import Any

from pyxdp.args import short
from pyxdp.btf.btf import Btf, BtfKind, BtfType
from pyxdp.errors import PyxdpError

__all__ = ["BtfCodec", "CodecError", "TypeCodec", "address_bytes"]

_INT_SIGNED = 0x1
# Typedefs of the kernel's uapi/linux/types.h whose values are big-endian.
_BIG_ENDIAN = frozenset({"__be16", "__be32", "__be64"})


class CodecError(PyxdpError, ValueError):
    """A Python value that does not fit the map's BTF type."""


def address_bytes(value: object, size: int) -> bytes | None:
    """``value`` as the ``size`` network-order bytes of an IP address, or None when it is
    no address (an :mod:`ipaddress` object, or a string that parses as one: dotted IPv4,
    IPv6; any other string is left to the caller's type error).

    Only 4-byte fields take IPv4 and only 16-byte fields IPv6: another pairing is a
    :class:`CodecError` naming both.
    """
    if isinstance(value, str):
        try:
            value = ipaddress.ip_address(value)
        except ValueError:
            return None
    if not isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return None
    packed = value.packed
    if len(packed) != size:
        raise CodecError(f"IPv{value.version} address {value} in a {size}-byte field "
                         f"(IPv4 needs 4 bytes, IPv6 16)")
    return packed


class TypeCodec:
    """Converts between bytes and Python values of one BTF type."""

    def __init__(self, btf: Btf, type_id: int) -> None:
        self.btf = btf
        self.type_id = type_id
        self.size = btf.resolve_size(type_id)

    def _t(self, type_id: int) -> BtfType:
        return self.btf.resolved(type_id)

    def _network_order(self, type_id: int) -> bool:
        """Whether a typedef on the way to the integer names it big-endian (``__be32``)."""
        for _ in range(16):  # Btf.resolve has already bounded the chain
            t = self.btf.type_by_id(type_id)
            if t.kind is BtfKind.TYPEDEF and t.name in _BIG_ENDIAN:
                return True
            if t.kind not in (BtfKind.TYPEDEF, BtfKind.CONST, BtfKind.VOLATILE,
                              BtfKind.RESTRICT, BtfKind.TYPE_TAG):
                return False
            type_id = t.size_type
        return False

    def decode(self, raw: bytes) -> Any:
        return self._decode(self.type_id, raw)

    def _decode(self, type_id: int, raw: bytes) -> Any:
        t = self._t(type_id)
        if t.kind is BtfKind.INT:
            if self._network_order(type_id):
                if t.size == 4:
                    return ipaddress.IPv4Address(bytes(raw[:4]))
                return int.from_bytes(raw[:t.size], "big")
            return int.from_bytes(raw[:t.size], "little",
                                  signed=bool(t.int_encoding & _INT_SIGNED))
        if t.kind in (BtfKind.ENUM, BtfKind.ENUM64):
            return int.from_bytes(raw[:t.size], "little", signed=t.kind_flag)
        if t.kind is BtfKind.PTR:
            return int.from_bytes(raw[:8], "little")
        if t.kind is BtfKind.FLOAT:
            return struct.unpack("<d" if t.size == 8 else "<f", raw[:t.size])[0]
        if t.kind is BtfKind.ARRAY and t.array is not None:
            elem = self._t(t.array.type)
            esize = self.btf.resolve_size(t.array.type)
            if elem.kind is BtfKind.INT and esize == 1:
                return bytes(raw[:esize * t.array.nelems])
            return [self._decode(t.array.type, raw[k * esize:(k + 1) * esize])
                    for k in range(t.array.nelems)]
        if t.kind is BtfKind.STRUCT and t.name == "in6_addr" and t.size == 16:
            return ipaddress.IPv6Address(bytes(raw[:16]))
        if t.kind in (BtfKind.STRUCT, BtfKind.UNION):
            out: dict[str, Any] = {}
            for k, m in enumerate(t.members):
                name = m.name or f"_{k}"
                if m.bitfield_size:
                    whole = int.from_bytes(raw[:t.size], "little")
                    out[name] = (whole >> m.bit_offset) & ((1 << m.bitfield_size) - 1)
                    continue
                off = m.bit_offset // 8
                msize = self.btf.resolve_size(m.type)
                out[name] = self._decode(m.type, raw[off:off + msize])
            return out
        return bytes(raw[:self.btf.resolve_size(type_id)])

    def encode(self, value: object) -> bytes:
        if isinstance(value, (bytes, bytearray, memoryview)):
            if len(value) != self.size:  # whole keys and values: exactly their size
                raise CodecError(f"{len(value)} bytes for a {self.size}-byte "
                                 f"{self.btf.describe(self.type_id)}")
            return bytes(value)
        addr = address_bytes(value, self.size)
        if addr is not None:
            return addr
        buf = bytearray(self.size)
        self._encode(self.type_id, value, buf, 0)
        return bytes(buf)

    def _encode(self, type_id: int, value: object, buf: bytearray, off: int) -> None:
        t = self._t(type_id)
        size = self.btf.resolve_size(type_id)
        if isinstance(value, (bytes, bytearray, memoryview)):
            if len(value) > size:
                raise CodecError(f"{len(value)} bytes do not fit a {size}-byte "
                                 f"{self.btf.describe(type_id)}")
            buf[off:off + len(value)] = value
            return
        addr = address_bytes(value, size)
        if addr is not None:
            buf[off:off + size] = addr
            return
        if t.kind in (BtfKind.INT, BtfKind.ENUM, BtfKind.ENUM64, BtfKind.PTR):
            if not isinstance(value, int):
                hint = " (or an IP address)" if size in (4, 16) else ""
                got = f"{type(value).__name__} {value!r:.40}"
                raise CodecError(f"{self.btf.describe(type_id)} needs an int{hint}, got "
                                 f"{short(value) if chr(10) in got else got}")
            if not -(1 << (8 * size - 1)) <= value < (1 << (8 * size)):
                raise CodecError(f"{value} does not fit the {size}-byte "
                                 f"{self.btf.describe(type_id)}")
            big = t.kind is BtfKind.INT and self._network_order(type_id)
            buf[off:off + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(
                size, "big" if big else "little")
            return
        if t.kind is BtfKind.FLOAT and isinstance(value, (int, float)):
            buf[off:off + size] = struct.pack("<d" if size == 8 else "<f", value)
            return
        if t.kind is BtfKind.ARRAY and t.array is not None and isinstance(value, (list, tuple)):
            esize = self.btf.resolve_size(t.array.type)
            if len(value) > t.array.nelems:
                raise CodecError(f"{len(value)} elements for an array of {t.array.nelems}")
            for k, v in enumerate(value):
                self._encode(t.array.type, v, buf, off + k * esize)
            return
        if t.kind in (BtfKind.STRUCT, BtfKind.UNION) and isinstance(value, dict):
            names = {m.name: m for m in t.members}
            for name, v in value.items():
                m = names.get(name)
                if m is None:
                    raise CodecError(f"{self.btf.describe(type_id)} has no member {name!r}")
                if m.bitfield_size:
                    if isinstance(v, bool) or not isinstance(v, int):
                        raise CodecError(f"bitfield {name} of {self.btf.describe(type_id)} "
                                         f"needs an int, got {short(v)}")
                    whole = int.from_bytes(buf[off:off + size], "little")
                    mask = ((1 << m.bitfield_size) - 1) << m.bit_offset
                    whole = (whole & ~mask) | ((int(v) << m.bit_offset) & mask)
                    buf[off:off + size] = whole.to_bytes(size, "little")
                else:
                    self._encode(m.type, v, buf, off + m.bit_offset // 8)
            return
        raise CodecError(f"cannot store {type(value).__name__} in {self.btf.describe(type_id)}")


class BtfCodec:
    """A map codec (see :class:`pyxdp.maps.base.Codec`) from the map's BTF key/value types."""

    def __init__(self, btf: Btf, key_type: int | None, value_type: int | None) -> None:
        self.key = TypeCodec(btf, key_type) if key_type else None
        self.value = TypeCodec(btf, value_type) if value_type else None

    def encode_key(self, m: Any, key: object) -> bytes:
        return _enc(self.key, key, m.key_size)

    def encode_value(self, m: Any, value: object) -> bytes:
        return _enc(self.value, value, m.value_size)

    def decode_key(self, m: Any, raw: bytes) -> object:
        return self.key.decode(raw) if self.key else _dec(raw)

    def decode_value(self, m: Any, raw: bytes) -> object:
        return self.value.decode(raw) if self.value else _dec(raw)


def _enc(codec: TypeCodec | None, value: object, size: int) -> bytes:
    if codec is not None:
        return codec.encode(value)
    addr = address_bytes(value, size)
    if addr is not None:
        return addr
    if isinstance(value, int) and size in (1, 2, 4, 8):
        if not -(1 << (8 * size - 1)) <= value < (1 << (8 * size)):
            raise CodecError(f"{value} does not fit {size} bytes")
        return (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    if isinstance(value, (bytes, bytearray, memoryview)) and len(value) == size:
        return bytes(value)
    raise CodecError(f"need {size} bytes or an int, got {type(value).__name__}")


def _dec(raw: bytes) -> object:
    return int.from_bytes(raw, "little") if len(raw) in (1, 2, 4, 8) else raw
