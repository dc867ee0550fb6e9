"""Longest-prefix-match tries, as ``kernel/bpf/lpm_trie.c`` (``BPF_MAP_TYPE_LPM_TRIE``).

The same binary Patricia trie as the kernel, node for node: real nodes and
intermediate (``LPM_TREE_NODE_FLAG_IM``) nodes that have exactly two
children, the same insertion, deletion and post-order ``get_next_key``
(more specific prefixes before less specific ones; a missing key restarts at
the leftmost node). So iteration order equals the kernel's exactly.

Checks (``trie_alloc``, all EINVAL): ``BPF_F_NO_PREALLOC`` is required,
``key_size`` is 4 (``prefixlen``) + 1..256 data bytes, ``1 <= value_size <=
KMALLOC_MAX_SIZE - 256 - 24``. Errnos of ``trie_update_elem`` (6.18):
EINVAL for flags above ``BPF_EXIST`` or a prefixlen above ``8 * data_size``,
EEXIST for ``BPF_NOEXIST`` on a present prefix, ENOENT for ``BPF_EXIST`` on
a missing one, ENOSPC for a new prefix when ``max_entries`` are present
(replacing a present one is fine). ``trie_delete_elem``: ENOENT unless the
exact prefix is present. The key's data bits past its prefixlen are kept as
given by the latest update (the kernel copies the whole key and reports it
back from ``get_next_key``; measured).

Storage (numpy, for native code): a node pool of ``2 * max_entries`` nodes
(entries plus at most one intermediate node per entry): ``plen``
``uint32[P]``, ``flags`` ``uint8[P]`` (bit 0 intermediate, bit 1 in use),
``child`` ``int32[P, 2]`` (-1 = none), ``data`` ``uint8[P * data_size]``,
``value_data`` ``uint8[P * elem_size]`` (``elem_size = round_up(value_size,
8)``; the program-visible region), ``hdr`` ``int64[3]`` = root node (-1:
empty), entries, free-stack top; ``free`` ``int32[P]``. A lookup walks from
``hdr[0]``: the bits of node data and key are compared most significant
bit of byte 0 first, as the kernel's ``extract_bit``. The JIT's twins of lookup,
update and delete work on these arrays in place, step for step as the methods
below (the same nodes off and onto the free stack).

Simplified: the pool is reserved up front (the kernel allocates nodes lazily),
zero-filled so that only the nodes used take memory (``free`` holds each entry
XOR ``pool - 1 - position``, so zeros mean every node free); past
``MAX_STORAGE_BYTES`` of reservation (2^28 entries of 8-byte keys and values)
the pool is capped: creation succeeds for any ``max_entries`` up to 2^32 - 1 as on
Linux, and an insertion the capped pool has no nodes for is ENOMEM (the kernel's
answer to a failed node allocation; the machine could not hold so many); a replaced
prefix keeps its node (the kernel swaps in a new node, so a program's stale
pointer sees the old value there).
"""

from __future__ import annotations

import errno as _errno
import ipaddress
from typing import Any, ClassVar

import numpy as np

from pyxdp.maps.base import (
    BPF_ANY,
    BPF_EXIST,
    BPF_F_ACCESS_MASK,
    BPF_NOEXIST,
    ENOTSUPP,
    KMALLOC_MAX_SIZE,
    MAX_STORAGE_BYTES,
    Map,
    MapError,
    MapSpec,
    U8Array,
    access_ok,
    einval,
    round_up,
)
from pyxdp.uapi.bpf import BpfMapType, MapFlag
from pyxdp.vm.jit.abi import SLOW, MapInfo
from pyxdp.vm.jit.ir import Text, c64, ret_if
from pyxdp.vm.jit.natives import MapNative, map_desc, register_map

__all__ = ["LPM_DATA_SIZE_MAX", "LpmTrie", "lpm_key"]

LPM_DATA_SIZE_MAX = 256
LPM_DATA_SIZE_MIN = 1
LPM_NODE_SIZE = 24  # sizeof(struct lpm_trie_node), measured through the value limit
LPM_VAL_SIZE_MAX = KMALLOC_MAX_SIZE - LPM_DATA_SIZE_MAX - LPM_NODE_SIZE
LPM_CREATE_FLAG_MASK = int(MapFlag.BPF_F_NO_PREALLOC | MapFlag.BPF_F_NUMA_NODE) \
    | BPF_F_ACCESS_MASK
FLAG_IM = 1
FLAG_USED = 2
ROOT = (-1, 0)


def lpm_key(prefixlen: int, data: bytes) -> bytes:
    """``struct bpf_lpm_trie_key_u8``: u32 prefixlen (host order) + data.

    Any u32 prefix is a key (the map answers EINVAL past its data's bits)."""
    raw = memoryview(data).tobytes()  # TypeError for an int, not bytes(n) zeros
    if not 0 <= prefixlen <= 0xFFFF_FFFF:
        raise MapError("lpm_key", _errno.EINVAL, f"prefix length {prefixlen} is not a u32")
    return prefixlen.to_bytes(4, "little") + raw


def node_pool(max_entries: int, key_size: int, value_size: int) -> int:
    """Nodes reserved: two per entry (itself and at most one intermediate node), capped
    at ``MAX_STORAGE_BYTES`` of reservation (2^28 entries of 8-byte keys and values)."""
    node_bytes = key_size + round_up(value_size, 8) + 16
    return min(2 * max_entries, MAX_STORAGE_BYTES // node_bytes)


class LpmTrie(Map):
    """``BPF_MAP_TYPE_LPM_TRIE``.

    The Python API also takes ``ipaddress`` networks and strings such as
    ``"10.0.0.0/8"`` or ``"2001:db8::/32"`` as keys when ``data_size`` is 4
    or 16.
    """
    # trie_map_ops has no lookup-and-delete batch (ENOTSUPP, measured on 6.18)
    batch_ops: ClassVar[frozenset[str]] = frozenset(
        {"lookup_batch", "update_batch", "delete_batch"})

    map_type = int(BpfMapType.BPF_MAP_TYPE_LPM_TRIE)

    def __init__(self, spec: MapSpec) -> None:
        op = "map_create"
        if (spec.max_entries == 0 or not spec.map_flags & MapFlag.BPF_F_NO_PREALLOC
                or spec.map_flags & ~LPM_CREATE_FLAG_MASK or not access_ok(spec.map_flags)
                or not 4 + LPM_DATA_SIZE_MIN <= spec.key_size <= 4 + LPM_DATA_SIZE_MAX
                or not 1 <= spec.value_size <= LPM_VAL_SIZE_MAX):
            raise einval(op, "lpm_trie: BPF_F_NO_PREALLOC, key 4 + 1..256 bytes, value > 0")
        self.pool = pool = node_pool(spec.max_entries, spec.key_size, spec.value_size)
        super().__init__(spec)
        self.data_size = self.key_size - 4
        self.max_prefixlen = 8 * self.data_size
        self.plen = np.zeros(pool, np.uint32)
        self.flags = np.zeros(pool, np.uint8)
        # zeros the OS backs lazily: a node's children are set when it is taken, and the
        # free stack holds each entry XOR its initial node (pool - 1 - position), so an
        # untouched stack reads as all nodes free and a trie of 2^28 entries (Linux
        # allocates nodes per element) costs only what it holds
        self.child = np.zeros((pool, 2), np.int32)
        self.data: U8Array = np.zeros(pool * self.data_size, np.uint8)
        self.value_data: U8Array = np.zeros(pool * self.elem_size, np.uint8)
        self.free = np.zeros(pool, np.int32)
        self.hdr = np.array([-1, 0, pool], np.int64)
        self._make_regions([self.value_data])

    def _storage_bytes(self) -> int:
        return self.pool * round_up(self.value_size, 8)

    # -- node primitives ---------------------------------------------------------------
    def _get(self, slot: tuple[int, int]) -> int:
        parent, bit = slot
        return int(self.hdr[0]) if parent < 0 else int(self.child[parent, bit])

    def _set(self, slot: tuple[int, int], node: int) -> None:
        parent, bit = slot
        if parent < 0:
            self.hdr[0] = node
        else:
            self.child[parent, bit] = node

    def _alloc(self, plen: int, data: int, flags: int) -> int:
        top = int(self.hdr[2]) - 1
        n = int(self.free[top]) ^ (self.pool - 1 - top)
        self.hdr[2] = top
        self.plen[n] = plen
        self.flags[n] = flags | FLAG_USED
        self.child[n] = -1
        self._set_data(n, data)
        return n

    def _set_data(self, n: int, data: int) -> None:
        ds = self.data_size
        self.data[n * ds:(n + 1) * ds] = np.frombuffer(data.to_bytes(ds, "big"), np.uint8)

    def _data(self, n: int) -> int:
        """Node ``n``'s data as a big-endian int (the walk compares prefixes with one XOR)."""
        ds = self.data_size
        return int.from_bytes(self.data[n * ds:(n + 1) * ds].tobytes(), "big")

    def _release(self, n: int) -> None:
        self.flags[n] = 0
        top = int(self.hdr[2])
        self.free[top] = n ^ (self.pool - 1 - top)
        self.hdr[2] = top + 1

    def _lpm(self, n: int, data: int, plen: int) -> int:
        """``longest_prefix_match``: matching leading bits, at most min(node, key) prefixlen."""
        limit = min(int(self.plen[n]), plen)
        x = self._data(n) ^ data
        same = self.max_prefixlen - x.bit_length()
        return min(same, limit)

    def _bit(self, data: int, index: int) -> int:
        """``extract_bit``: bit ``index`` counted from the MSB of byte 0."""
        return (data >> (self.max_prefixlen - 1 - index)) & 1

    def _split(self, key: bytes | None, op: str) -> tuple[int, int]:
        k = self._key(key, op)
        return int.from_bytes(k[:4], "little"), int.from_bytes(k[4:], "big")

    def _write_value(self, n: int, value: bytes) -> None:
        off = n * self.elem_size
        self.value_data[off:off + self.value_size] = np.frombuffer(value, np.uint8)
        self.value_data[off + self.value_size:off + self.elem_size] = 0

    def _is_im(self, n: int) -> bool:
        return bool(self.flags[n] & FLAG_IM)

    # -- lookup ---------------------------------------------------------------------------
    def _lookup_node(self, plen: int, data: int) -> int:
        """``trie_lookup_elem``: the longest present prefix covering the key, or -1."""
        if plen > self.max_prefixlen:
            return -1  # measured: such a lookup answers ENOENT
        found = -1
        node = int(self.hdr[0])
        while node >= 0:
            matchlen = self._lpm(node, data, plen)
            if matchlen == self.max_prefixlen:
                return node
            if matchlen < int(self.plen[node]):
                break
            if not self._is_im(node):
                found = node
            node = int(self.child[node, self._bit(data, int(self.plen[node]))])
        return found

    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        self._lookup_flags(flags)
        n = self._lookup_node(*self._split(key, "lookup"))
        if n < 0:
            return None
        off = n * self.elem_size
        return self.value_data[off:off + self.value_size].tobytes()

    def lookup_addr(self, key: bytes, cpu: int = 0) -> int:
        if len(key) != self.key_size:
            return 0
        n = self._lookup_node(*self._split(key, "lookup"))
        return 0 if n < 0 else self.value_region().base + n * self.elem_size

    # -- update -------------------------------------------------------------------------
    def _check_add(self, flags: int, need: int) -> None:
        """``trie_check_add_elem``, then ENOMEM (the kernel's failed node allocation)
        when the pool lacks the ``need`` nodes the insertion takes (a capped pool only)."""
        if flags == BPF_EXIST:
            raise MapError("update", _errno.ENOENT)
        if int(self.hdr[1]) == self.max_entries:
            raise MapError("update", _errno.ENOSPC, "lpm_trie is full")
        if int(self.hdr[2]) < need:
            raise MapError("update", _errno.ENOMEM,
                           f"lpm_trie: pyxdp's pool of {self.pool} nodes is used up")
        self.hdr[1] += 1

    def update(self, key: bytes | None, value: bytes, flags: int = BPF_ANY, *,
               cpu: int | None = None) -> None:
        if flags > BPF_EXIST:
            raise einval("update", f"unknown flags {flags:#x}")
        plen, data = self._split(key, "update")
        value = self._value(value, cpu, "update")
        if plen > self.max_prefixlen:
            raise einval("update", f"prefixlen {plen} > {self.max_prefixlen}")
        slot = ROOT
        node = self._get(slot)
        matchlen = 0
        while node >= 0:
            matchlen = self._lpm(node, data, plen)
            nplen = int(self.plen[node])
            if nplen != matchlen or nplen == plen:
                break
            slot = (node, self._bit(data, nplen))
            node = self._get(slot)
        if node < 0:
            self._check_add(flags, 1)
            new = self._alloc(plen, data, 0)
            self._write_value(new, value)
            self._set(slot, new)
            return
        if int(self.plen[node]) == matchlen:
            # The exact prefix: replace a real node, or turn an intermediate one real.
            if not self._is_im(node):
                if flags == BPF_NOEXIST:
                    raise MapError("update", _errno.EEXIST)
            else:
                self._check_add(flags, 0)
            self.flags[node] = FLAG_USED
            self._set_data(node, data)
            self._write_value(node, value)
            return
        self._check_add(flags, 1 if matchlen == plen else 2)
        new = self._alloc(plen, data, 0)
        self._write_value(new, value)
        if matchlen == plen:
            # The new prefix covers ``node``: insert it above.
            self.child[new, self._bit(self._data(node), matchlen)] = node
            self._set(slot, new)
            return
        im = self._alloc(matchlen, self._data(node), FLAG_IM)
        if self._bit(data, matchlen):
            self.child[im] = (node, new)
        else:
            self.child[im] = (new, node)
        self._set(slot, im)

    # -- delete -------------------------------------------------------------------------
    def delete(self, key: bytes | None) -> None:
        plen, data = self._split(key, "delete")
        if plen > self.max_prefixlen:
            raise einval("delete", f"prefixlen {plen} > {self.max_prefixlen}")
        trim = trim2 = ROOT
        parent = -1
        node = self._get(trim)
        matchlen = 0
        while node >= 0:
            matchlen = self._lpm(node, data, plen)
            nplen = int(self.plen[node])
            if nplen != matchlen or nplen == plen:
                break
            parent = node
            trim2 = trim
            trim = (node, self._bit(data, nplen))
            node = self._get(trim)
        if (node < 0 or int(self.plen[node]) != plen or int(self.plen[node]) != matchlen
                or self._is_im(node)):
            raise MapError("delete", _errno.ENOENT)
        self.hdr[1] -= 1
        c0, c1 = int(self.child[node, 0]), int(self.child[node, 1])
        if c0 >= 0 and c1 >= 0:
            self.flags[node] |= FLAG_IM
            return
        if parent >= 0 and self._is_im(parent) and c0 < 0 and c1 < 0:
            # Drop the intermediate parent too and promote the sibling.
            p0, p1 = int(self.child[parent, 0]), int(self.child[parent, 1])
            self._set(trim2, p1 if node == p0 else p0)
            self._release(parent)
            self._release(node)
            return
        self._set(trim, c0 if c0 >= 0 else c1)
        self._release(node)

    def lookup_and_delete(self, key: bytes | None, flags: int = 0) -> bytes | None:
        raise MapError("lookup_and_delete", ENOTSUPP)

    # -- iteration ----------------------------------------------------------------------
    def _leftmost(self, node: int) -> int:
        nxt = -1
        while node >= 0:
            if self._is_im(node):
                node = int(self.child[node, 0])
            else:
                nxt = node
                node = int(self.child[node, 0])
                if node < 0:
                    node = int(self.child[nxt, 1])
        return nxt

    def _key_of(self, n: int) -> bytes:
        ds = self.data_size
        return lpm_key(int(self.plen[n]), self.data[n * ds:(n + 1) * ds].tobytes())

    def get_next_key(self, key: bytes | None) -> bytes | None:
        root = int(self.hdr[0])
        if root < 0:
            return None
        if key is None:
            return self._key_of(self._leftmost(root))
        plen, data = self._split(key, "get_next_key")
        if plen > self.max_prefixlen:
            return self._key_of(self._leftmost(root))
        stack: list[int] = []
        node = root
        matchlen = 0
        while node >= 0:
            stack.append(node)
            matchlen = self._lpm(node, data, plen)
            nplen = int(self.plen[node])
            if nplen != matchlen or nplen == plen:
                break
            node = int(self.child[node, self._bit(data, nplen)])
        if node < 0 or int(self.plen[node]) != matchlen or self._is_im(node):
            return self._key_of(self._leftmost(root))
        # Post-order successor of the exact match.
        node = stack[-1]
        sp = len(stack) - 1
        while sp > 0:
            parent = stack[sp - 1]
            if int(self.child[parent, 0]) == node:
                right = int(self.child[parent, 1])
                if right >= 0:
                    return self._key_of(self._leftmost(right))
            if not self._is_im(parent):
                return self._key_of(parent)
            node = parent
            sp -= 1
        return None

    # -- Python API -----------------------------------------------------------------------
    def _enc_key(self, key: object) -> bytes:
        if isinstance(key, str):
            try:
                key = ipaddress.ip_network(key, strict=False)
            except ValueError as e:  # not a prefix: as a key of the wrong form
                raise einval("encode", str(e)) from None
        if isinstance(key, (ipaddress.IPv4Network, ipaddress.IPv6Network)):
            packed = key.network_address.packed
            if len(packed) != self.data_size:
                raise einval("encode", f"{key} does not fit {self.data_size} data bytes")
            return lpm_key(key.prefixlen, packed)
        return super()._enc_key(key)

    def __len__(self) -> int:
        return int(self.hdr[1])

    def clear(self) -> None:
        self.hdr[:] = (-1, 0, self.pool)
        for a in (self.flags, self.free):  # only what was written: untouched pages stay so
            a[np.flatnonzero(a)] = 0

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d.update(max_prefixlen=self.max_prefixlen, count=len(self))
        return d


# --- native code: the JIT's twin of lookup_addr (trie_lookup_elem) ------------------------
# LpmTrie is the reference path; native code walks the same node pool (its descriptor's
# key_data = node data, node_plen, node_flags, node_child and hdr words) in place.

def _lpm_fn(f: Text, m: MapInfo, node: str, plen: str, limit: str) -> str:
    """``longest_prefix_match`` of node ``node`` and the key at ``%key``: the leading
    bits of their data that agree, at most ``limit``."""
    ds = m.key_size - 4
    nd = f.gep(map_desc(f, m, "key_data"), f.ins(f"mul i64 {node}, {ds}"))
    pre, head, diff, nxt, done = (f.cur, f.label("lh"), f.label("ld"), f.label("ln"),
                                  f.label("lj"))
    f.br(head)
    f.at(head)
    i, i1 = f.tmp(), f.tmp()
    f.lines.append(f"  {i} = phi i64 [ 0, %{pre} ], [ {i1}, %{nxt} ]")
    bitpos = f.ins(f"shl i64 {i}, 3")
    f.cbr(f.ins(f"icmp uge i64 {bitpos}, {limit}"), done, diff)
    f.at(diff)
    a = f.ins(f"load i8, ptr {f.gep(nd, i)}, align 1")
    b = f.ins(f"load i8, ptr {f.gep('%key', f.ins(f'add i64 {i}, 4'))}, align 1")
    x = f.ins(f"zext i8 {f.ins(f'xor i8 {a}, {b}')} to i64")
    lead = f.ins(f"sub i64 {f.ins(f'call i64 @llvm.ctlz.i64(i64 {x}, i1 false)')}, 56")
    same = f.ins(f"add i64 {bitpos}, {lead}")
    capped = f.ins(f"select i1 {f.ins(f'icmp ult i64 {same}, {limit}')}, i64 {same}, "
                   f"i64 {limit}")
    at_diff = f.cur
    f.cbr(f.ins(f"icmp ne i64 {x}, 0"), done, nxt)
    f.at(nxt)
    f.lines.append(f"  {i1} = add i64 {i}, 1")
    f.br(head)
    f.at(done)
    del plen
    return f.ins(f"phi i64 [ {limit}, %{head} ], [ {capped}, %{at_diff} ]")


def _walk_step(f: Text, m: MapInfo, node: str, cnt: str, plen: str, pool: int,
               end: str) -> tuple[str, str]:
    """One step of a walk down the trie at ``node`` (the caller's phi, ``cnt`` nodes
    seen): to ``end`` past a leaf (a negative index), to ``slow`` at an index outside the
    pool or a walk longer than the pool (a trie user space damaged); then the node's
    prefix length and how many bits to compare (the shorter of it and the key's)."""
    f.cbr(f.ins(f"icmp slt i64 {node}, 0"), end, "chk")
    f.at("chk")
    bad = f.ins(f"or i1 {f.ins(f'icmp sge i64 {node}, {pool}')}, "
                f"{f.ins(f'icmp ugt i64 {cnt}, {pool}')}")
    f.cbr(bad, "slow", "node")
    f.at("node")
    nplen = f.ins(f"zext i32 {f.at_index(map_desc(f, m, 'node_plen'), node, 'i32', 4)} to i64")
    limit = f.ins(f"select i1 {f.ins(f'icmp ult i64 {nplen}, {plen}')}, i64 {nplen}, "
                  f"i64 {plen}")
    return nplen, limit


def _value_addr(f: Text, m: MapInfo, node: str) -> str:
    return f.ins(f"add i64 {c64(m.value_base)}, {f.ins(f'mul i64 {node}, {m.elem_size}')}")


def _lookup_fn(tag: str, m: MapInfo) -> str:
    """LpmTrie.lookup_addr (``trie_lookup_elem``): the longest present prefix's value
    address, 0, or SLOW (a node number out of the pool, a walk longer than the pool:
    only a trie changed meanwhile)."""
    max_plen = 8 * (m.key_size - 4)
    pool = _pool(m)
    f = Text()
    f.at("entry")
    plen = f.ins("zext i32 " + f.ins("load i32, ptr %key, align 1") + " to i64")
    ret_if(f, f.ins(f"icmp ugt i64 {plen}, {max_plen}"), 0)
    root = f.word(map_desc(f, m, "hdr"), 0, "i64", "")
    pre = f.cur
    f.br("walk")
    f.at("walk")
    node, found, cnt = f.tmp(), f.tmp(), f.tmp()
    phi_at = len(f.lines)
    f.lines.append("")
    nplen, limit = _walk_step(f, m, node, cnt, plen, pool, "miss")
    matchlen = _lpm_fn(f, m, node, plen, limit)
    f.cbr(f.ins(f"icmp eq i64 {matchlen}, {max_plen}"), "exact", "partial")
    f.at("exact")
    f.do(f"ret i64 {_value_addr(f, m, node)}")
    f.at("partial")
    f.cbr(f.ins(f"icmp ult i64 {matchlen}, {nplen}"), "miss", "down")
    f.at("down")
    flags = f.at_index(map_desc(f, m, "node_flags"), node, "i8", 1)
    im = f.ins(f"icmp ne i8 {f.ins(f'and i8 {flags}, 1')}, 0")
    found1 = f.ins(f"select i1 {im}, i64 {found}, i64 {node}")
    # extract_bit(key data, node's prefixlen): MSB of byte 0 first
    at = f.ins(f"add i64 {f.ins(f'lshr i64 {nplen}, 3')}, 4")
    kp = f.gep("%key", at)
    byte = f.ins(f"zext i8 {f.ins(f'load i8, ptr {kp}, align 1')} to i64")
    shift = f.ins(f"sub i64 7, {f.ins(f'and i64 {nplen}, 7')}")
    bit = f.ins(f"and i64 {f.ins(f'lshr i64 {byte}, {shift}')}, 1")
    slot = f.ins(f"add i64 {f.ins(f'shl i64 {node}, 1')}, {bit}")
    nxt = f.ins(f"sext i32 {f.at_index(map_desc(f, m, 'node_child'), slot, 'i32', 4)} to i64")
    cnt1 = f.ins(f"add i64 {cnt}, 1")
    down_end = f.cur
    f.br("walk")
    f.lines[phi_at] = (f"  {node} = phi i64 [ {root}, %{pre} ], [ {nxt}, %{down_end} ]\n"
                       f"  {found} = phi i64 [ -1, %{pre} ], [ {found1}, %{down_end} ]\n"
                       f"  {cnt} = phi i64 [ 0, %{pre} ], [ {cnt1}, %{down_end} ]")
    f.at("miss")
    f.cbr(f.ins(f"icmp slt i64 {found}, 0"), "none", "some")
    f.at("none")
    f.do("ret i64 0")
    f.at("some")
    f.do(f"ret i64 {_value_addr(f, m, found)}")
    f.at("slow")
    f.do(f"ret i64 {c64(SLOW)}")
    return f.text(f"define internal i64 @{tag}_lookup{m.slot}(ptr %ctx, ptr %key) nounwind")


# --- native code: the twins of update and delete (trie_update_elem, trie_delete_elem) ----
# Over the same pool, free stack and hdr words as LpmTrie.update/delete, step for step
# (the same nodes taken from and given back to the free stack, so later allocations agree).

def _child_ptr(f: Text, m: MapInfo, node: str, bit: str) -> str:
    slot = f.ins(f"add i64 {f.ins(f'shl i64 {node}, 1')}, {bit}")
    return f.gep(map_desc(f, m, "node_child"), f.ins(f"shl i64 {slot}, 2"))


def _child(f: Text, m: MapInfo, node: str, bit: str) -> str:
    p = _child_ptr(f, m, node, bit)
    return f.ins(f"sext i32 {f.ins(f'load i32, ptr {p}, align 4')} to i64")


def _key_bit(f: Text, base: str, index: str) -> str:
    """``extract_bit`` of the data at ``base``: bit ``index`` from the MSB of byte 0."""
    p = f.gep(base, f.ins(f"lshr i64 {index}, 3"))
    byte = f.ins(f"zext i8 {f.ins(f'load i8, ptr {p}, align 1')} to i64")
    shift = f.ins(f"sub i64 7, {f.ins(f'and i64 {index}, 7')}")
    return f.ins(f"and i64 {f.ins(f'lshr i64 {byte}, {shift}')}, 1")


def _node_data(f: Text, m: MapInfo, node: str) -> str:
    return f.gep(map_desc(f, m, "key_data"), f.ins(f"mul i64 {node}, {m.key_size - 4}"))


def _set_slot(f: Text, m: MapInfo, parent: str, bit: str, node: str) -> None:
    """``_set``: the root word (parent -1) or the parent's child slot takes ``node``."""
    root, child, join = f.label("sr"), f.label("sc"), f.label("sj")
    f.cbr(f.ins(f"icmp slt i64 {parent}, 0"), root, child)
    f.at(root)
    f.set_word(map_desc(f, m, "hdr"), 0, node, "i64", "")
    f.br(join)
    f.at(child)
    f.do(f"store i32 {f.ins(f'trunc i64 {node} to i32')}, ptr {_child_ptr(f, m, parent, bit)}, "
         "align 4")
    f.br(join)
    f.at(join)


def _pool(m: MapInfo) -> int:
    return node_pool(m.max_entries, m.key_size, m.value_size)


def _alloc_ir(f: Text, m: MapInfo, plen: str, flags: int, data: str) -> str:
    """``_alloc``: the free stack's top node, set up (the caller checked one is there)."""
    hdr = map_desc(f, m, "hdr")
    top = f.ins(f"sub i64 {f.word(hdr, 2, 'i64', '')}, 1")
    enc = f.ins(f"sext i32 {f.at_index(map_desc(f, m, 'free'), top, 'i32', 4)} to i64")
    n = f.ins(f"xor i64 {enc}, {f.ins(f'sub i64 {_pool(m) - 1}, {top}')}")
    f.set_word(hdr, 2, top, "i64", "")
    f.put_index(map_desc(f, m, "node_plen"), n, f.ins(f"trunc i64 {plen} to i32"), "i32", 4)
    f.put_index(map_desc(f, m, "node_flags"), n, str(flags | FLAG_USED), "i8", 1)
    f.do(f"store i64 -1, ptr {_child_ptr(f, m, n, '0')}, align 4")
    f.memmove(_node_data(f, m, n), data, m.key_size - 4)
    return n


def _write_value_ir(f: Text, m: MapInfo, node: str) -> None:
    dst = f.gep(map_desc(f, m, "value_data"), f.ins(f"mul i64 {node}, {m.elem_size}"))
    f.memmove(dst, "%val", m.value_size)
    if m.elem_size > m.value_size:
        f.memset(f.gep(dst, m.value_size), m.elem_size - m.value_size)


def _walk(f: Text, m: MapInfo, plen: str) -> dict[str, str]:
    """The walk ``update`` and ``delete`` share: down while the node's prefix is a proper
    prefix of the key's. Ends in block ``none`` (an empty slot) or ``at`` (a node), with
    the slot ``(sp, sb)`` it was found in and the one before it ``(t2p, t2b)``; SLOW
    (block ``slow``) on a node number out of the pool or a walk longer than it."""
    pool = _pool(m)
    root = f.word(map_desc(f, m, "hdr"), 0, "i64", "")
    pre = f.cur
    f.br("walk")
    f.at("walk")
    v = {k: f.tmp() for k in ("node", "sp", "sb", "t2p", "t2b", "cnt")}
    node, cnt = v["node"], v["cnt"]
    phi_at = len(f.lines)
    f.lines.append("")
    nplen, limit = _walk_step(f, m, node, cnt, plen, pool, "none")
    matchlen = _lpm_fn(f, m, node, plen, limit)
    stop = f.ins(f"or i1 {f.ins(f'icmp ne i64 {nplen}, {matchlen}')}, "
                 f"{f.ins(f'icmp eq i64 {nplen}, {plen}')}")
    f.cbr(stop, "at", "down")
    f.at("down")
    bit = _key_bit(f, f.gep("%key", 4), nplen)
    nxt = _child(f, m, node, bit)
    cnt1 = f.ins(f"add i64 {cnt}, 1")
    end = f.cur
    f.br("walk")
    f.lines[phi_at] = "\n".join(
        f"  {v[k]} = phi i64 [ {a}, %{pre} ], [ {b}, %{end} ]" for k, a, b in (
            ("node", root, nxt), ("sp", "-1", v["node"]), ("sb", "0", bit),
            ("t2p", "-1", v["sp"]), ("t2b", "0", v["sb"]), ("cnt", "0", cnt1)))
    f.at("at")
    return {**v, "nplen": nplen, "matchlen": matchlen}


def _check_add_ir(f: Text, m: MapInfo, mode: str, need: str) -> None:
    """``trie_check_add_elem``: ENOENT for BPF_EXIST, ENOSPC when full, else one more
    entry; SLOW (nothing changed yet) when the free stack lacks the ``need`` nodes the
    insertion takes or holds more than the pool (only a map changed meanwhile)."""
    ret_if(f, f.ins(f"icmp eq i64 {mode}, {BPF_EXIST}"), -_errno.ENOENT)
    hdr = map_desc(f, m, "hdr")
    count = f.word(hdr, 1, "i64", "")
    ret_if(f, f.ins(f"icmp eq i64 {count}, {m.max_entries}"), -_errno.ENOSPC)
    nfree = f.word(hdr, 2, "i64", "")
    ret_if(f, f.ins(f"or i1 {f.ins(f'icmp slt i64 {nfree}, {need}')}, "
                    f"{f.ins(f'icmp sgt i64 {nfree}, {_pool(m)}')}"), SLOW)
    f.set_word(hdr, 1, f.ins(f"add i64 {count}, 1"), "i64", "")


def _update_fn(tag: str, m: MapInfo) -> str:
    """LpmTrie.update (``trie_update_elem``) for a program: 0, -errno, or SLOW (the walk
    leaving the pool, a free stack short of the nodes it takes)."""
    max_plen = 8 * (m.key_size - 4)
    f = Text()
    f.at("entry")
    ret_if(f, f.ins(f"icmp ugt i64 %flags, {BPF_EXIST}"), -_errno.EINVAL)
    plen = f.ins("zext i32 " + f.ins("load i32, ptr %key, align 1") + " to i64")
    ret_if(f, f.ins(f"icmp ugt i64 {plen}, {max_plen}"), -_errno.EINVAL)
    data = f.gep("%key", 4)
    w = _walk(f, m, plen)
    node, matchlen, nplen = w["node"], w["matchlen"], w["nplen"]
    f.cbr(f.ins(f"icmp eq i64 {nplen}, {matchlen}"), "exact", "split")
    f.at("exact")  # the exact prefix: replace a real node, or turn an intermediate one real
    flags = f.at_index(map_desc(f, m, "node_flags"), node, "i8", 1)
    im = f.ins(f"icmp ne i8 {f.ins(f'and i8 {flags}, {FLAG_IM}')}, 0")
    f.cbr(im, "was_im", "real")
    f.at("real")
    ret_if(f, f.ins(f"icmp eq i64 %flags, {BPF_NOEXIST}"), -_errno.EEXIST)
    f.br("replace")
    f.at("was_im")
    _check_add_ir(f, m, "%flags", "0")
    f.br("replace")
    f.at("replace")
    f.put_index(map_desc(f, m, "node_flags"), node, str(FLAG_USED), "i8", 1)
    f.memmove(_node_data(f, m, node), data, m.key_size - 4)
    _write_value_ir(f, m, node)
    f.do("ret i64 0")
    f.at("split")
    covers = f.ins(f"icmp eq i64 {matchlen}, {plen}")
    _check_add_ir(f, m, "%flags", f.ins(f"select i1 {covers}, i64 1, i64 2"))
    new = _alloc_ir(f, m, plen, 0, data)
    _write_value_ir(f, m, new)
    f.cbr(covers, "above", "fork")
    f.at("above")  # the new prefix covers the node: insert it above
    under = _child_ptr(f, m, new, _key_bit(f, _node_data(f, m, node), matchlen))
    f.do(f"store i32 {f.ins(f'trunc i64 {node} to i32')}, ptr {under}, align 4")
    _set_slot(f, m, w["sp"], w["sb"], new)
    f.do("ret i64 0")
    f.at("fork")  # an intermediate node over both
    imn = _alloc_ir(f, m, matchlen, FLAG_IM, _node_data(f, m, node))
    one = f.ins(f"icmp ne i64 {_key_bit(f, data, matchlen)}, 0")
    left = f.ins(f"select i1 {one}, i64 {node}, i64 {new}")
    right = f.ins(f"select i1 {one}, i64 {new}, i64 {node}")
    for bit, child in (("0", left), ("1", right)):
        p = _child_ptr(f, m, imn, bit)
        f.do(f"store i32 {f.ins(f'trunc i64 {child} to i32')}, ptr {p}, align 4")
    _set_slot(f, m, w["sp"], w["sb"], imn)
    f.do("ret i64 0")
    f.at("none")  # an empty slot: the new node goes there
    _check_add_ir(f, m, "%flags", "1")
    new0 = _alloc_ir(f, m, plen, 0, data)
    _write_value_ir(f, m, new0)
    _set_slot(f, m, w["sp"], w["sb"], new0)
    f.do("ret i64 0")
    f.at("slow")
    f.do(f"ret i64 {c64(SLOW)}")
    return f.text(f"define internal i64 @{tag}_update{m.slot}(ptr %ctx, ptr %key, ptr %val, "
                  "i64 %flags) nounwind")


def _release_ir(f: Text, m: MapInfo, node: str) -> None:
    """``_release``: the node back on the free stack (the caller checked there is room)."""
    hdr = map_desc(f, m, "hdr")
    f.put_index(map_desc(f, m, "node_flags"), node, "0", "i8", 1)
    top = f.word(hdr, 2, "i64", "")
    enc = f.ins(f"xor i64 {node}, {f.ins(f'sub i64 {_pool(m) - 1}, {top}')}")
    f.put_index(map_desc(f, m, "free"), top, f.ins(f"trunc i64 {enc} to i32"), "i32", 4)
    f.set_word(hdr, 2, f.ins(f"add i64 {top}, 1"), "i64", "")


def _delete_fn(tag: str, m: MapInfo) -> str:
    """LpmTrie.delete (``trie_delete_elem``) for a program: 0, -errno, or SLOW (the walk
    leaving the pool, a free stack with no room for the nodes it gives back)."""
    max_plen = 8 * (m.key_size - 4)
    f = Text()
    f.at("entry")
    plen = f.ins("zext i32 " + f.ins("load i32, ptr %key, align 1") + " to i64")
    ret_if(f, f.ins(f"icmp ugt i64 {plen}, {max_plen}"), -_errno.EINVAL)
    # room on the free stack for the nodes a delete gives back (1, or 2 with an
    # intermediate parent): there always is, unless the map changed meanwhile
    nfree = f.word(map_desc(f, m, "hdr"), 2, "i64", "")
    w = _walk(f, m, plen)
    node, nplen = w["node"], w["nplen"]
    flags = f.at_index(map_desc(f, m, "node_flags"), node, "i8", 1)
    im = f.ins(f"icmp ne i8 {f.ins(f'and i8 {flags}, {FLAG_IM}')}, 0")
    matchlen = w["matchlen"]
    other = f.ins(f"or i1 {f.ins(f'icmp ne i64 {nplen}, {plen}')}, "
                  f"{f.ins(f'icmp ne i64 {nplen}, {matchlen}')}")
    ret_if(f, f.ins(f"or i1 {other}, {im}"), -_errno.ENOENT)
    hdr = map_desc(f, m, "hdr")

    def one_less() -> None:  # hdr[1]: the entry is gone (each path, after its checks)
        f.set_word(hdr, 1, f.ins(f"sub i64 {f.word(hdr, 1, 'i64', '')}, 1"), "i64", "")

    c0, c1 = _child(f, m, node, "0"), _child(f, m, node, "1")
    has0, has1 = f.ins(f"icmp sge i64 {c0}, 0"), f.ins(f"icmp sge i64 {c1}, 0")
    f.cbr(f.ins(f"and i1 {has0}, {has1}"), "two", "fewer")
    f.at("two")  # two children: the node turns intermediate
    one_less()
    f.put_index(map_desc(f, m, "node_flags"), node, f.ins(f"or i8 {flags}, {FLAG_IM}"), "i8", 1)
    f.do("ret i64 0")
    f.at("fewer")
    parent = w["sp"]
    leaf = f.ins(f"and i1 {f.ins(f'xor i1 {has0}, true')}, {f.ins(f'xor i1 {has1}, true')}")
    f.cbr(f.ins(f"icmp sge i64 {parent}, 0"), "par", "lift")
    f.at("par")
    pflags = f.at_index(map_desc(f, m, "node_flags"), parent, "i8", 1)
    pim = f.ins(f"icmp ne i8 {f.ins(f'and i8 {pflags}, {FLAG_IM}')}, 0")
    f.cbr(f.ins(f"and i1 {pim}, {leaf}"), "collapse", "lift")
    f.at("collapse")  # drop the intermediate parent too and promote the sibling
    ret_if(f, f.ins(f"icmp ugt i64 {nfree}, {_pool(m) - 2}"), SLOW)
    one_less()
    p0, p1 = _child(f, m, parent, "0"), _child(f, m, parent, "1")
    sib = f.ins(f"select i1 {f.ins(f'icmp eq i64 {node}, {p0}')}, i64 {p1}, i64 {p0}")
    _set_slot(f, m, w["t2p"], w["t2b"], sib)
    _release_ir(f, m, parent)
    _release_ir(f, m, node)
    f.do("ret i64 0")
    f.at("lift")  # the only child (or none) takes the node's place
    ret_if(f, f.ins(f"icmp ugt i64 {nfree}, {_pool(m) - 1}"), SLOW)
    one_less()
    _set_slot(f, m, parent, w["sb"], f.ins(f"select i1 {has0}, i64 {c0}, i64 {c1}"))
    _release_ir(f, m, node)
    f.do("ret i64 0")
    f.at("none")
    f.do(f"ret i64 {-_errno.ENOENT}")
    f.at("slow")
    f.do(f"ret i64 {c64(SLOW)}")
    return f.text(f"define internal i64 @{tag}_delete{m.slot}(ptr %ctx, ptr %key) nounwind")


def _describe(m: Any) -> dict[str, int]:
    return {"key_data": int(m.data.ctypes.data), "node_plen": int(m.plen.ctypes.data),
            "node_flags": int(m.flags.ctypes.data), "node_child": int(m.child.ctypes.data),
            "hdr": int(m.hdr.ctypes.data), "value_data": int(m.value_data.ctypes.data),
            "free": int(m.free.ctypes.data)}


register_map(BpfMapType.BPF_MAP_TYPE_LPM_TRIE, MapNative(
    "lpm", (LpmTrie,), _describe, max_key=4 + LPM_DATA_SIZE_MAX,
    functions={"lookup": _lookup_fn, "update": _update_fn, "delete": _delete_fn}))
