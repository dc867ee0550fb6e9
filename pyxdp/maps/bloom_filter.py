"""Bloom filter maps, as ``kernel/bpf/bloom_filter.c``.

``BPF_MAP_TYPE_BLOOM_FILTER`` holds no elements, only a bitset: a push sets, and a peek
tests, ``nr_hash_funcs`` bits of the value, bit ``jhash(value, seed + i) & mask`` for
``i`` in ``0..nr_hash_funcs-1`` (``jhash2`` over u32 words when ``value_size`` is a
multiple of 4, which is the same function on a little-endian host). A peek answers 0
when every bit is set (maybe there), -ENOENT else (surely not).

Creation (``bloom_map_alloc``): ``key_size`` 0, ``value_size`` and ``max_entries``
non-zero, no flags but NUMA, ``BPF_F_ZERO_SEED`` and the access bits, ``map_extra``
<= 15 (the number of hash functions, 0 meaning 5), else EINVAL; ``value_size >
KMALLOC_MAX_SIZE`` is E2BIG. The bitset has ``max_entries * nr_hash_funcs / 5 * 7`` bits
rounded up to a power of two, at least 64 (2^32 when that overflows or passes 2^31). The
seed is random, 0 with ``BPF_F_ZERO_SEED`` (which makes the bits comparable with
Linux's).

Operations: push (``bpf_map_push_elem``, or BPF_MAP_UPDATE_ELEM with no key) takes only
``BPF_ANY`` (EINVAL); pop, delete and get_next_key are EOPNOTSUPP; a program's lookup or
update with a key is refused by the verifier. User space's BPF_MAP_LOOKUP_ELEM passes the
value to test in its value buffer: :meth:`BloomFilter.contains` is that; ``lookup(None)``
tests a zero value, as a zeroed buffer would.

Storage (numpy, for native code): ``bits`` ``uint64[nbits / 64]`` (the kernel's
``unsigned long`` bitset) and ``hdr`` ``uint32[3]`` = seed, mask, nr_hash_funcs.
"""

from __future__ import annotations

import errno as _errno
import random
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

from pyxdp.maps.base import (
    BPF_ANY,
    BPF_F_ACCESS_MASK,
    KMALLOC_MAX_SIZE,
    MAX_STORAGE_BYTES,
    Map,
    MapError,
    MapSpec,
    access_ok,
    einval,
)
from pyxdp.uapi.bpf import BpfMapType, MapFlag
from pyxdp.vm.jit.abi import MapInfo
from pyxdp.vm.jit.ir import Text
from pyxdp.vm.jit.natives import MapNative, map_desc, register_map

__all__ = ["BloomFilter", "jhash"]

BPF_F_ZERO_SEED = int(MapFlag.BPF_F_ZERO_SEED)
BLOOM_CREATE_FLAG_MASK = int(MapFlag.BPF_F_NUMA_NODE) | BPF_F_ZERO_SEED | BPF_F_ACCESS_MASK
JHASH_INITVAL = 0xDEADBEEF
U32 = 0xFFFF_FFFF
SEED, MASK, NR_HASH = 0, 1, 2
# __jhash_mix's and __jhash_final's rotations, in order
_MIX = (4, 6, 8, 16, 19, 4)
_FINAL = (14, 11, 25, 16, 4, 14, 24)


def _rol(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & U32


def jhash(data: bytes, initval: int) -> int:
    """Linux's ``jhash`` (Bob Jenkins' lookup3) of ``data``, the words read little-endian."""
    n = len(data)
    a = b = c = (JHASH_INITVAL + n + initval) & U32
    off = 0
    while n > 12:
        a = (a + int.from_bytes(data[off:off + 4], "little")) & U32
        b = (b + int.from_bytes(data[off + 4:off + 8], "little")) & U32
        c = (c + int.from_bytes(data[off + 8:off + 12], "little")) & U32
        a, b, c = _mix(a, b, c)
        n -= 12
        off += 12
    if n == 0:
        return c
    tail = data[off:off + n].ljust(12, b"\0")
    a = (a + int.from_bytes(tail[0:4], "little")) & U32
    b = (b + int.from_bytes(tail[4:8], "little")) & U32
    c = (c + int.from_bytes(tail[8:12], "little")) & U32
    return _final(a, b, c)


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    r = _MIX
    a = ((a - c) & U32) ^ _rol(c, r[0]); c = (c + b) & U32  # noqa: E702
    b = ((b - a) & U32) ^ _rol(a, r[1]); a = (a + c) & U32  # noqa: E702
    c = ((c - b) & U32) ^ _rol(b, r[2]); b = (b + a) & U32  # noqa: E702
    a = ((a - c) & U32) ^ _rol(c, r[3]); c = (c + b) & U32  # noqa: E702
    b = ((b - a) & U32) ^ _rol(a, r[4]); a = (a + c) & U32  # noqa: E702
    c = ((c - b) & U32) ^ _rol(b, r[5]); b = (b + a) & U32  # noqa: E702
    return a, b, c


def _final(a: int, b: int, c: int) -> int:
    r = _FINAL
    c ^= b; c = (c - _rol(b, r[0])) & U32  # noqa: E702
    a ^= c; a = (a - _rol(c, r[1])) & U32  # noqa: E702
    b ^= a; b = (b - _rol(a, r[2])) & U32  # noqa: E702
    c ^= b; c = (c - _rol(b, r[3])) & U32  # noqa: E702
    a ^= c; a = (a - _rol(c, r[4])) & U32  # noqa: E702
    b ^= a; b = (b - _rol(a, r[5])) & U32  # noqa: E702
    c ^= b; c = (c - _rol(b, r[6])) & U32  # noqa: E702
    return c


def bitset_bits(max_entries: int, nr_hash_funcs: int) -> int:
    """The bitset's size in bits (bloom_map_alloc): n*k*7/5 rounded up to a power of two."""
    nr_bits = max_entries * nr_hash_funcs
    if nr_bits > U32 or (nr_bits // 5) * 7 > U32 or (nr_bits // 5) * 7 > 1 << 31:
        return 1 << 32
    nr_bits = (nr_bits // 5) * 7
    if nr_bits <= 64:
        return 64
    return 1 << (nr_bits - 1).bit_length()


class BloomFilter(Map):
    """``BPF_MAP_TYPE_BLOOM_FILTER``: a set that may answer yes for a value never pushed."""

    map_type = int(BpfMapType.BPF_MAP_TYPE_BLOOM_FILTER)
    batch_ops: ClassVar[frozenset[str]] = frozenset()  # bloom_filter_map_ops: none

    def __init__(self, spec: MapSpec) -> None:
        op = "map_create"
        if (spec.key_size != 0 or spec.value_size == 0 or spec.max_entries == 0
                or spec.map_flags & ~BLOOM_CREATE_FLAG_MASK or not access_ok(spec.map_flags)
                or spec.map_extra & ~0xF):
            raise einval(op, "bloom filter: key_size 0, value_size and max_entries > 0, "
                             "map_extra (hash functions) 0..15")
        if spec.value_size > KMALLOC_MAX_SIZE:
            raise MapError(op, _errno.E2BIG, "value_size above KMALLOC_MAX_SIZE")
        nr_hash = spec.map_extra or 5  # the default of 5 hash functions
        nbits = bitset_bits(spec.max_entries, nr_hash)
        if nbits // 8 > MAX_STORAGE_BYTES:
            raise MapError(op, _errno.ENOMEM, "bloom filter bitset too large")
        super().__init__(spec)
        self.bits = np.zeros(nbits // 64, np.uint64)
        seed = 0 if spec.map_flags & BPF_F_ZERO_SEED else random.getrandbits(32)
        self.hdr = np.array([seed, nbits - 1, nr_hash], np.uint32)

    def _bits_of(self, value: bytes) -> Iterator[int]:
        seed, mask, k = (int(x) for x in self.hdr)
        for i in range(k):
            yield jhash(value, (seed + i) & U32) & mask

    # -- program-side operations --------------------------------------------------------
    def push(self, value: bytes, flags: int = BPF_ANY) -> None:
        """``bpf_map_push_elem``: set the value's bits (flags must be BPF_ANY)."""
        if flags != BPF_ANY:
            raise einval("push", f"flags {flags:#x}: BPF_ANY only")
        data = self._value(value, None, "push")
        for h in self._bits_of(data):
            self.bits[h >> 6] |= np.uint64(1 << (h & 63))

    def contains(self, value: bytes) -> bool:
        """``bpf_map_peek_elem``: whether every bit of ``value`` is set."""
        data = self._value(value, None, "peek")
        return all(int(self.bits[h >> 6]) >> (h & 63) & 1 for h in self._bits_of(data))

    def try_peek_value(self, value: bytes) -> int:
        """The helper's return: 0 (maybe there) or -ENOENT."""
        return 0 if self.contains(value) else -_errno.ENOENT

    def pop(self) -> bytes | None:
        raise MapError("pop", _errno.EOPNOTSUPP, "a bloom filter has nothing to pop")

    def peek(self) -> bytes | None:
        return self.lookup(None)

    # -- the bpf(2) view -------------------------------------------------------------------
    def _no_key(self, key: bytes | None, op: str) -> None:
        if key is not None and (not isinstance(key, bytes | bytearray | memoryview)
                                or len(key) != 0):
            raise einval(op, "bloom filters take no key")

    def lookup(self, key: bytes | None = None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        """BPF_MAP_LOOKUP_ELEM with a zeroed value buffer: the zero value if it may be
        there (use :meth:`contains` for any other value)."""
        self._no_key(key, "lookup")
        if flags:
            raise einval("lookup", f"unknown flags {flags:#x}")
        zero = bytes(self.value_size)
        return zero if self.contains(zero) else None

    def update(self, key: bytes | None, value: bytes, flags: int = BPF_ANY, *,
               cpu: int | None = None) -> None:
        self._no_key(key, "update")
        self.push(value, flags)

    def delete(self, key: bytes | None = None) -> None:
        raise MapError("delete", _errno.EOPNOTSUPP, "bloom filter bits are never cleared")

    def get_next_key(self, key: bytes | None) -> bytes | None:
        raise MapError("get_next_key", _errno.EOPNOTSUPP, "bloom filters have no keys")

    def lookup_and_delete(self, key: bytes | None = None, flags: int = 0) -> bytes | None:
        raise MapError("lookup_and_delete", _errno.EOPNOTSUPP, "bloom filters pop nothing")

    # -- Python API -----------------------------------------------------------------------
    def __contains__(self, value: object) -> bool:
        return self.contains(self.codec.encode_value(self, value))

    def __len__(self) -> int:
        """The bits set (a bloom filter cannot count its values)."""
        return int(sum(bin(int(w)).count("1") for w in self.bits))

    def clear(self) -> None:
        self.bits[:] = 0

    def add(self, value: object) -> None:
        """Push a Python value."""
        self.push(self.codec.encode_value(self, value))

    def items(self) -> list[tuple[Any, Any]]:
        raise MapError("items", _errno.EOPNOTSUPP, "bloom filters have no keys")


# --- native code: the JIT's twins of push and peek -------------------------------------
# BloomFilter is the reference path; native code hashes the value the same way and
# tests or sets the same bitset (value_data = bits, hdr = seed, mask, nr_hash_funcs).

def _emit_jhash(f: Text, p: str, n: int, initval: str) -> str:
    """jhash of the ``n`` bytes at ``p`` (n is the map's value_size, a constant)."""
    def op(o: str, x: str, y: str | int) -> str:
        return f.ins(f"{o} i32 {x}, {y}")

    def rol(x: str, k: int) -> str:
        return op("or", op("shl", x, k), op("lshr", x, 32 - k))

    def word(off: int, size: int) -> str:
        """The little-endian u32 of the ``size`` (1..4) bytes at ``off``."""
        if size == 4:
            return f.ins(f"load i32, ptr {f.gep(p, off)}, align 1")
        w = "0"
        for j in range(size):
            b = f.ins(f"zext i8 {f.ins(f'load i8, ptr {f.gep(p, off + j)}, align 1')} to i32")
            w = op("or", w, op("shl", b, 8 * j) if j else b)
        return w

    a = b = c = op("add", initval, (JHASH_INITVAL + n) & U32)
    off = 0
    while n - off > 12:
        a, b, c = op("add", a, word(off, 4)), op("add", b, word(off + 4, 4)), \
            op("add", c, word(off + 8, 4))
        r = _MIX
        a = op("xor", op("sub", a, c), rol(c, r[0])); c = op("add", c, b)  # noqa: E702
        b = op("xor", op("sub", b, a), rol(a, r[1])); a = op("add", a, c)  # noqa: E702
        c = op("xor", op("sub", c, b), rol(b, r[2])); b = op("add", b, a)  # noqa: E702
        a = op("xor", op("sub", a, c), rol(c, r[3])); c = op("add", c, b)  # noqa: E702
        b = op("xor", op("sub", b, a), rol(a, r[4])); a = op("add", a, c)  # noqa: E702
        c = op("xor", op("sub", c, b), rol(b, r[5])); b = op("add", b, a)  # noqa: E702
        off += 12
    rest = n - off
    if rest == 0:
        return c
    parts = [min(4, max(0, rest - 4 * j)) for j in range(3)]
    if parts[0]:
        a = op("add", a, word(off, parts[0]))
    if parts[1]:
        b = op("add", b, word(off + 4, parts[1]))
    if parts[2]:
        c = op("add", c, word(off + 8, parts[2]))
    q = _FINAL
    c = op("sub", op("xor", c, b), rol(b, q[0]))
    a = op("sub", op("xor", a, c), rol(c, q[1]))
    b = op("sub", op("xor", b, a), rol(a, q[2]))
    c = op("sub", op("xor", c, b), rol(b, q[3]))
    a = op("sub", op("xor", a, c), rol(c, q[4]))
    b = op("sub", op("xor", b, a), rol(a, q[5]))
    return op("sub", op("xor", c, b), rol(b, q[6]))


def _bits_fn(what: str) -> Any:
    """``peek`` (0 or -ENOENT) or ``push`` (0, or -EINVAL for flags) over the bitset."""
    def build(tag: str, m: MapInfo) -> str:
        f = Text()
        f.at("entry")
        val = "%dst" if what == "peek" else "%val"
        if what == "push":
            bad, ok = f.label("bad"), f.label("ok")
            f.cbr(f.ins("icmp ne i64 %flags, 0"), bad, ok)
            f.at(bad)
            f.do(f"ret i64 {-_errno.EINVAL}")
            f.at(ok)
        hdr = map_desc(f, m, "hdr")
        bits = map_desc(f, m, "value_data")
        seed = f.ins(f"load i32, ptr {hdr}, align 4")
        mask = f.ins(f"load i32, ptr {f.gep(hdr, 4)}, align 4")
        k = f.ins(f"load i32, ptr {f.gep(hdr, 8)}, align 4")
        pre = f.label("pre")
        f.br(pre)
        f.at(pre)
        loop, body, done, nxt = f.label("loop"), f.label("body"), f.label("done"), \
            f.label("next")
        f.br(loop)
        f.at(loop)
        i = f.tmp()
        f.do(f"{i} = phi i32 [ 0, %{pre} ], [ %inext, %{nxt} ]")
        f.cbr(f.ins(f"icmp ult i32 {i}, {k}"), body, done)
        f.at(body)
        h = f.ins(f"and i32 {_emit_jhash(f, val, m.value_size, f.ins(f'add i32 {seed}, {i}'))}"
                  f", {mask}")
        h64 = f.ins(f"zext i32 {h} to i64")
        wp = f.gep(bits, f.ins(f"shl i64 {f.ins(f'lshr i64 {h64}, 6')}, 3"))
        bit = f.ins(f"shl i64 1, {f.ins(f'and i64 {h64}, 63')}")
        if what == "push":
            f.do(f"atomicrmw or ptr {wp}, i64 {bit} monotonic, align 8")
            f.br(nxt)
        else:
            w = f.ins(f"load i64, ptr {wp}, align 8")
            miss = f.label("miss")
            f.cbr(f.ins(f"icmp eq i64 {f.ins(f'and i64 {w}, {bit}')}, 0"), miss, nxt)
            f.at(miss)
            f.do(f"ret i64 {-_errno.ENOENT}")
        f.at(nxt)
        f.do(f"%inext = add i32 {i}, 1")
        f.br(loop)
        f.at(done)
        f.do("ret i64 0")
        args = "ptr %ctx, ptr %dst" if what == "peek" else "ptr %ctx, ptr %val, i64 %flags"
        return f.text(f"define internal i64 @{tag}_{what}{m.slot}({args}) nounwind")
    return build


def _describe(m: Any) -> dict[str, int]:
    return {"value_data": int(m.bits.ctypes.data), "hdr": int(m.hdr.ctypes.data)}


register_map(BloomFilter.map_type, MapNative(
    "bloom", (BloomFilter,), _describe,
    functions={"push": _bits_fn("push"), "peek": _bits_fn("peek")}))
