"""Typed map keys and values from BTF, the way ``bpftool map dump`` prints them.

Integers and enums become Python ints (signed where BTF says so), structs and
unions dicts of their members (bitfields included), ``char``/``u8`` arrays
bytes, other arrays lists, pointers ints. Encoding takes the same shapes back
(missing struct members are zero) or raw bytes of the right size.
"""

from __future__ import annotations

import struct
from typing import Any

from pyxdp.btf.btf import Btf, BtfKind, BtfType
from pyxdp.errors import PyxdpError

__all__ = ["BtfCodec", "TypeCodec"]

_INT_SIGNED = 0x1


class CodecError(PyxdpError, ValueError):
    """A Python value that does not fit the map's BTF type."""


class TypeCodec:
    """Converts between bytes and Python values of one BTF type."""

    def __init__(self, btf: Btf, type_id: int) -> None:
        self.btf = btf
        self.type_id = type_id
        self.size = btf.resolve_size(type_id)

    def _t(self, type_id: int) -> BtfType:
        return self.btf.resolved(type_id)

    def decode(self, raw: bytes) -> Any:
        return self._decode(self.type_id, raw)

    def _decode(self, type_id: int, raw: bytes) -> Any:
        t = self._t(type_id)
        if t.kind is BtfKind.INT:
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
        if t.kind in (BtfKind.INT, BtfKind.ENUM, BtfKind.ENUM64, BtfKind.PTR):
            if not isinstance(value, int):
                raise CodecError(f"{self.btf.describe(type_id)} needs an int, got "
                                 f"{type(value).__name__}")
            if not -(1 << (8 * size - 1)) <= value < (1 << (8 * size)):
                raise CodecError(f"{value} does not fit the {size}-byte "
                                 f"{self.btf.describe(type_id)}")
            buf[off:off + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
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
    if isinstance(value, int) and size in (1, 2, 4, 8):
        if not -(1 << (8 * size - 1)) <= value < (1 << (8 * size)):
            raise CodecError(f"{value} does not fit {size} bytes")
        return (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    if isinstance(value, (bytes, bytearray, memoryview)) and len(value) == size:
        return bytes(value)
    raise CodecError(f"need {size} bytes or an int, got {type(value).__name__}")


def _dec(raw: bytes) -> object:
    return int.from_bytes(raw, "little") if len(raw) in (1, 2, 4, 8) else raw
