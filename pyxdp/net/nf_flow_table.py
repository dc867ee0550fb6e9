"""Netfilter flowtables (``net/netfilter/nf_flow_table_core.c``, ``nf_flow_table_xdp.c``)
as ``bpf_xdp_flow_lookup`` sees them.

``nft add flowtable inet t ft { hook ingress priority 0; devices = { a, b } }``
makes a flowtable bound to devices (``nf_flowtable_by_dev`` finds the first
table a device was bound to); a ``flow add @ft`` rule then offloads a
confirmed connection: ``flow_offload_alloc`` copies both conntrack tuples
(``flow_offload_fill_dir``: addresses, ports, layer 3 and 4 protocol, the
direction), sets ``NF_FLOW_SNAT``/``NF_FLOW_DNAT`` from the entry's NAT
status, ``flow_offload_route_init`` adds each direction's route (input
ifindex, VLAN/PPPoE encapsulation, MTU, the transmit type: ``direct`` with the
output device and both MAC addresses, or ``neigh``/``xfrm`` with a cached dst),
``nft_flow_offload_eval`` sets ``NF_FLOW_HW_BIDIRECTIONAL`` and the entry's
``IPS_OFFLOAD``, and ``flow_offload_add`` hashes both tuples with the timeout
30 s ahead (``offload_timeout``) and extends the entry's timeout to a day.

``flow_offload_lookup`` compares a tuple's bytes up to ``__hash`` (addresses,
ports, input ifindex, protocols, encapsulation) and refuses a flow with
``NF_FLOW_TEARDOWN`` or whose entry is dying (``IPS_DYING``);
``flow_offload_refresh`` moves the timeout when it gained more than HZ.
Flows leave through :meth:`NfFlowtable.gc` (``nf_flow_offload_gc_step``:
expired or dying flows are torn down, torn-down ones freed) or
:meth:`NfFlowtable.remove`; :meth:`Flow.teardown` is ``flow_offload_teardown``.

Each flow lives in a slot of its namespace's flat buffer laid out as Linux
6.18 lays out ``struct flow_offload`` on x86-64 (:data:`FLOW_OFFLOAD_LAYOUT`:
both ``flow_offload_tuple_rhash``, ``ct``, ``flags``, ``type``, ``timeout``),
so a program reads what its CO-RE relocations resolve to; the buffer is mapped
read-only into a run that gets a tuple from the kfunc. Beside it the namespace
keeps :class:`FlowIndex`, the hash table's mirror the kfunc's native twin
probes (``nf_flowtable_by_dev``'s answers and every tuple's key), rebuilt
after flows or tables came or went when the kfunc next maps it.

Simplified: the hash node (``node.next``) reads 0 and a ``neigh``/``xfrm``
route's ``dst_cache`` is a fake, unmapped address (its ``dst_cookie`` 0);
``in_vlan_ingress`` (bridge VLAN filtering) is 0; ``flow_offload_teardown``'s
fix-up of the conntrack entry's TCP state and timeout is not modelled; there is
no hardware offload (``NF_FLOW_HW``) and pyxdp's host stack does not forward
through flowtables (only programs look flows up).
"""

from __future__ import annotations

import builtins
import errno
import heapq
import itertools
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum, IntFlag

from pyxdp.errors import PyxdpError
from pyxdp.net.nf_conntrack import (
    AF_INET,
    AF_INET6,
    IP_CT_DIR_ORIGINAL,
    IP_CT_DIR_REPLY,
    IPPROTO_TCP,
    IPPROTO_UDP,
    IpsStatus,
    NfConn,
)
from pyxdp.vm.jiffies import HZ, jiffies64

__all__ = ["FLOW_OFFLOAD_LAYOUT", "FT_BASE", "FT_INDEX", "FT_SLOT", "Flow", "FlowFlag",
           "FlowIndex", "FlowRoute", "FlowXmit", "FlowtableError", "NfFlowtable",
           "NfFlowtables"]

FLOW_OFFLOAD_DIR_ORIGINAL, FLOW_OFFLOAD_DIR_REPLY = IP_CT_DIR_ORIGINAL, IP_CT_DIR_REPLY
NF_FLOW_TIMEOUT = 30 * HZ  # nf_{tcp,udp}_net.offload_timeout's default
NF_CT_DAY = 86400 * HZ
M32 = 0xFFFF_FFFF
M64 = 0xFFFF_FFFF_FFFF_FFFF


class FlowFlag(IntFlag):
    """``enum nf_flow_flags`` (include/net/netfilter/nf_flow_table.h) as bits of
    ``flow->flags``."""

    SNAT = 1 << 0
    DNAT = 1 << 1
    CLOSING = 1 << 2
    TEARDOWN = 1 << 3
    HW = 1 << 4
    HW_DYING = 1 << 5
    HW_DEAD = 1 << 6
    HW_PENDING = 1 << 7
    HW_BIDIRECTIONAL = 1 << 8


class FlowXmit(IntEnum):
    """``enum flow_offload_xmit_type``."""

    UNSPEC = 0
    NEIGH = 1
    XFRM = 2
    DIRECT = 3


# Offsets in struct flow_offload (Linux 6.18, x86-64; the kernel's BTF), the tuple's
# within struct flow_offload_tuple_rhash (node first). tests/test_nf_flow_table.py
# holds them to /sys/kernel/btf/vmlinux.
FLOW_OFFLOAD_LAYOUT = {"size": 216, "tuplehash_size": 88, "tuple": 8, "ct": 176,
                       "flags": 184, "type": 192, "timeout": 196,
                       # struct flow_offload_tuple
                       "tuple_size": 80, "src": 0, "dst": 16, "src_port": 32,
                       "dst_port": 34, "iifidx": 36, "l3proto": 40, "l4proto": 41,
                       "encap": 42, "hash": 50, "bits": 50,
                       "mtu": 52, "dst_cache": 56, "dst_cookie": 64, "out.ifidx": 56,
                       "out.hw_ifidx": 60, "out.h_source": 64, "out.h_dest": 70}
_L = FLOW_OFFLOAD_LAYOUT
FT_SLOT = 256  # bytes per flow in a namespace's buffer
MAX_FLOWS = 4096  # per namespace
# Fake addresses of the namespaces' flow buffers: namespace k's at FT_BASE + (k << 32);
# a neigh route's dst_cache points at an unmapped address. The index a run sees is at
# FT_INDEX, whatever its namespace (a run has one).
FT_BASE = 0x0000_6C00_0000_0000
FT_INDEX = 0x0000_6F00_0000_0000
_DST_BASE = 0x0000_6E00_0000_0000
_KEY = _L["hash"]  # memcmp(&x->tuple, tuple, offsetof(struct flow_offload_tuple, __hash))
ROUND = 0x9E37_79B9_7F4A_7C15

_namespace_numbers = itertools.count()


class FlowtableError(PyxdpError):
    """A flowtable operation the kernel refuses; ``errno`` says how."""

    def __init__(self, err: int, message: str) -> None:
        self.errno = err
        super().__init__(f"{message} ({errno.errorcode.get(err, err)})")


def _mac(m: bytes | str) -> bytes:
    raw = bytes.fromhex(m.replace(":", "")) if isinstance(m, str) else bytes(m)
    if len(raw) != 6:
        raise FlowtableError(errno.EINVAL, f"{m!r} is not a 6-byte MAC address")
    return raw


@dataclass(frozen=True)
class FlowRoute:
    """One direction's route (``struct nf_flow_route``'s ``tuple[dir]``): packets of
    that direction arrive on ``iifidx`` (inside ``encap``: up to two (id, ethertype)
    VLAN or PPPoE tags, in the tuple's order) and leave by ``xmit``: ``DIRECT`` on
    ``oifidx`` (``hw_oifidx``, default the same) from ``h_source`` to ``h_dest``,
    or ``NEIGH``/``XFRM`` through a cached dst; ``mtu`` is the route's."""

    iifidx: int
    oifidx: int = 0
    h_source: bytes | str = bytes(6)
    h_dest: bytes | str = bytes(6)
    xmit: FlowXmit = FlowXmit.DIRECT
    mtu: int = 1500
    hw_oifidx: int | None = None
    encap: tuple[tuple[int, int], ...] = ()

    def check(self) -> None:
        if len(self.encap) > 2:
            raise FlowtableError(errno.EINVAL, "at most 2 encapsulation tags "
                                 "(NF_FLOW_TABLE_ENCAP_MAX)")
        if self.xmit not in (FlowXmit.DIRECT, FlowXmit.NEIGH, FlowXmit.XFRM):
            raise FlowtableError(errno.EINVAL, f"transmit type {self.xmit!r} is not a route's")
        for v, bits in ((self.iifidx, 31), (self.oifidx, 32), (self.mtu, 16)):
            if not 0 <= v < 1 << bits:
                raise FlowtableError(errno.EINVAL, f"{v} is out of range")
        _mac(self.h_source)
        _mac(self.h_dest)


class Flow:
    """One offloaded connection (``struct flow_offload``): a view of its slot."""

    def __init__(self, table: NfFlowtable, slot: int, ct: NfConn) -> None:
        self.table = table
        self.buf = table.owner.buf
        self.slot = slot
        self.ct = ct

    @property
    def addr(self) -> int:
        """The fake address of the ``struct flow_offload``."""
        return self.table.owner.base + self.slot * FT_SLOT

    def tuple_addr(self, direction: int) -> int:
        """The address of ``tuplehash[direction]`` (what the kfunc returns)."""
        return self.addr + direction * _L["tuplehash_size"]

    def _off(self, name: str, direction: int | None = None) -> int:
        base = self.slot * FT_SLOT
        if direction is None:
            return base + _L[name]
        return base + direction * _L["tuplehash_size"] + _L["tuple"] + _L[name]

    @property
    def flags(self) -> FlowFlag:
        """``flow->flags``: the ``NF_FLOW_*`` bits."""
        return FlowFlag(struct.unpack_from("<Q", self.buf, self._off("flags"))[0])

    @flags.setter
    def flags(self, v: int) -> None:
        struct.pack_into("<Q", self.buf, self._off("flags"), int(v) & M64)

    @property
    def timeout(self) -> int:
        """``flow->timeout``: the u32 jiffies it expires at."""
        return int(struct.unpack_from("<I", self.buf, self._off("timeout"))[0])

    @timeout.setter
    def timeout(self, v: int) -> None:
        struct.pack_into("<I", self.buf, self._off("timeout"), v & M32)

    def key(self, direction: int) -> bytes:
        """The tuple's bytes the hash compares (up to ``__hash``)."""
        o = self._off("src", direction)
        return bytes(self.buf[o:o + _KEY])

    def expired(self) -> bool:
        """``nf_flow_has_expired``: ``nf_flow_timeout_delta(flow->timeout) <= 0``."""
        d = (self.timeout - jiffies64()) & M32
        return d == 0 or d >= 1 << 31

    def teardown(self) -> None:
        """``flow_offload_teardown``: lookups stop finding it, its entry loses
        ``IPS_OFFLOAD``; the next :meth:`NfFlowtable.gc` frees it."""
        self.ct.status &= ~IpsStatus.OFFLOAD
        self.flags |= FlowFlag.TEARDOWN

    def _fill(self, direction: int, route: FlowRoute) -> None:
        """flow_offload_fill_dir and flow_offload_fill_route for one direction."""
        t = self.ct.tuple(direction)
        b = self.buf
        o = self._off("src", direction)
        n = 4 if t.l3num == AF_INET else 16
        b[o:o + _L["tuple_size"]] = bytes(_L["tuple_size"])
        b[o:o + n] = t.src[:n]
        b[o + _L["dst"]:o + _L["dst"] + n] = t.dst[:n]
        struct.pack_into(">HH", b, o + _L["src_port"], t.sport, t.dport)
        struct.pack_into("<iBB", b, o + _L["iifidx"], route.iifidx, t.l3num, t.protonum)
        for j, (tag_id, proto) in enumerate(route.encap):
            struct.pack_into("<H", b, o + _L["encap"] + 4 * j, tag_id & 0xFFFF)
            struct.pack_into(">H", b, o + _L["encap"] + 4 * j + 2, proto & 0xFFFF)
        b[o + _L["bits"]] = direction | int(route.xmit) << 2 | len(route.encap) << 5
        struct.pack_into("<H", b, o + _L["mtu"], route.mtu)
        if route.xmit == FlowXmit.DIRECT:
            hw = route.oifidx if route.hw_oifidx is None else route.hw_oifidx
            struct.pack_into("<II6s6s", b, o + _L["out.ifidx"], route.oifidx, hw,
                             _mac(route.h_source), _mac(route.h_dest))
        else:  # a dst reference the program can only compare
            struct.pack_into("<Q", b, o + _L["dst_cache"],
                             _DST_BASE + self.addr - FT_BASE + direction * 128)

    def __repr__(self) -> str:
        return f"Flow({self.ct.orig} flags={self.flags!r} timeout={self.timeout})"


class NfFlowtable:
    """One flowtable (``struct nf_flowtable``) of namespace ``owner``, bound to
    ``devices`` (ifindexes); its flows live in the namespace's buffer."""

    def __init__(self, owner: NfFlowtables, name: str, devices: tuple[int, ...], tag: int
                 ) -> None:
        self.owner = owner
        self.name = name
        self.devices = devices
        self.tag = tag  # how the index names it
        self.flows: dict[int, Flow] = {}  # by slot
        # the rhashtable: a tuple's key -> (flow, direction)
        self.hash: dict[bytes, tuple[Flow, int]] = {}

    def offload(self, ct: NfConn, orig: FlowRoute, reply: FlowRoute) -> Flow:
        """``flow add @ft`` for a connection's packet: the flow of ``ct`` with a route
        per direction. EINVAL for an unconfirmed or dying entry or a protocol
        other than TCP or UDP; EEXIST when ``ct`` is offloaded already (``IPS_OFFLOAD``)
        or a tuple is in the table; ENOBUFS when the namespace's buffer is full;
        ENOENT for a deleted table."""
        for r in (orig, reply):
            r.check()
        if self.owner.tables.get(self.name) is not self:
            raise FlowtableError(errno.ENOENT, f"flowtable {self.name!r} is deleted")
        if not ct.confirmed or ct.status & IpsStatus.DYING:
            raise FlowtableError(errno.EINVAL, "the conntrack entry is unconfirmed or dying")
        if ct.orig.protonum not in (IPPROTO_TCP, IPPROTO_UDP):
            raise FlowtableError(errno.EINVAL, "only TCP and UDP flows are offloaded")
        if ct.orig.l3num not in (AF_INET, AF_INET6):
            raise FlowtableError(errno.EINVAL, "only IPv4 and IPv6 flows are offloaded")
        if ct.status & IpsStatus.OFFLOAD:
            raise FlowtableError(errno.EEXIST, "the connection is offloaded already")
        slot = self.owner.free_slot()
        flow = Flow(self, slot, ct)
        o = slot * FT_SLOT
        flow.buf[o:o + FT_SLOT] = bytes(FT_SLOT)
        flow._fill(FLOW_OFFLOAD_DIR_ORIGINAL, orig)
        flow._fill(FLOW_OFFLOAD_DIR_REPLY, reply)
        keys = [flow.key(d) for d in (0, 1)]
        if any(k in self.hash for k in keys) or keys[0] == keys[1]:
            self.owner.release(slot)
            raise FlowtableError(errno.EEXIST, "a tuple of the flow is in the table")
        struct.pack_into("<Q", flow.buf, o + _L["ct"], ct.addr)
        flags = FlowFlag.HW_BIDIRECTIONAL
        if ct.status & IpsStatus.SRC_NAT:
            flags |= FlowFlag.SNAT
        if ct.status & IpsStatus.DST_NAT:
            flags |= FlowFlag.DNAT
        flow.flags = flags
        flow.timeout = jiffies64() + NF_FLOW_TIMEOUT
        ct.status |= IpsStatus.OFFLOAD
        ct.timeout = ct.table.stamp() + NF_CT_DAY  # nf_ct_refresh(ct, NF_CT_DAY)
        self.flows[slot] = flow
        for d, k in enumerate(keys):
            self.hash[k] = (flow, d)
        self.owner.reindex()
        return flow

    def lookup_key(self, key: bytes) -> tuple[Flow, int] | None:
        """``flow_offload_lookup``: the flow and direction of a tuple's key, None
        when nothing matches or the flow is torn down or its entry dying."""
        got = self.hash.get(key)
        if got is None:
            return None
        flow = got[0]
        if flow.flags & FlowFlag.TEARDOWN or flow.ct.status & IpsStatus.DYING:
            return None
        return got

    @staticmethod
    def refresh(flow: Flow) -> None:
        """``flow_offload_refresh(..., false)``: a timeout that gains more than HZ moves."""
        timeout = (jiffies64() + NF_FLOW_TIMEOUT) & M32
        if (timeout - flow.timeout) & M32 > HZ:
            flow.timeout = timeout

    def remove(self, flow: Flow) -> None:
        """``flow_offload_del``: both tuples leave the table (ENOENT: not in it)."""
        if self.flows.get(flow.slot) is not flow:
            raise FlowtableError(errno.ENOENT, "the flow is not in this table")
        for d in (0, 1):
            self.hash.pop(flow.key(d), None)
        del self.flows[flow.slot]
        self.owner.release(flow.slot)
        flow.ct.status &= ~IpsStatus.OFFLOAD
        self.owner.reindex()

    def gc(self) -> None:
        """``nf_flow_offload_gc_step`` over every flow: an expired flow or one whose
        entry is dying is torn down; torn-down flows are freed."""
        for flow in list(self.flows.values()):
            if flow.expired() or flow.ct.status & IpsStatus.DYING:
                flow.teardown()
            if flow.flags & FlowFlag.TEARDOWN:
                self.remove(flow)

    def list(self) -> builtins.list[Flow]:
        """The flows, by slot."""
        return [self.flows[s] for s in sorted(self.flows)]

    def __len__(self) -> int:
        return len(self.flows)


def key_words(key: bytes) -> tuple[int, ...]:
    """A tuple's key as the index holds it: 7 little-endian words (zero-padded)."""
    return struct.unpack("<7Q", key.ljust(56, b"\0"))


def index_hash(words: tuple[int, ...], tag: int) -> int:
    """The index's hash of a key in table ``tag`` (the native twin computes the same)."""
    h = tag
    for w in words:
        h = ((h ^ w) * ROUND) & M64
    return h ^ (h >> 29)


class FlowIndex:
    """The namespace's lookup structure as native code reads it, a mirror of the
    tables (rebuilt after a change when next asked for; the tables' dicts are the
    reference).

    Little-endian words: ``flows`` (the fake address of the flow buffer), the bucket
    mask, the number of device entries; from :data:`DEVS` (byte offset) up to
    :data:`MAX_DEVS` pairs (ifindex, table tag) in ``nf_flowtable_by_dev``'s order; from
    :data:`BUCKETS` the open-addressed buckets of 8 words: the key's 7, then
    ``tag << 32 | (offset of the tuplehash in the flow buffer + 1)`` (0: empty).
    """

    DEVS = 64
    MAX_DEVS = 128
    BUCKETS = DEVS + 16 * MAX_DEVS
    NBUCKETS = 4 * MAX_FLOWS  # two tuples a flow: at most half full
    SIZE = BUCKETS + 64 * NBUCKETS

    def __init__(self) -> None:
        self.buf = bytearray(self.SIZE)

    def build(self, flows_base: int, tables: Iterable[NfFlowtable]) -> None:
        b = self.buf
        b[:] = bytes(self.SIZE)
        tables = builtins.list(tables)
        devs = [(d, t.tag) for t in tables for d in t.devices]
        if len(devs) > self.MAX_DEVS:
            raise FlowtableError(errno.ENOSPC, f"at most {self.MAX_DEVS} device bindings")
        struct.pack_into("<QQQ", b, 0, flows_base, self.NBUCKETS - 1, len(devs))
        for i, (d, tag) in enumerate(devs):
            struct.pack_into("<QQ", b, self.DEVS + 16 * i, d, tag)
        mask = self.NBUCKETS - 1
        for t in tables:
            for key, (flow, d) in t.hash.items():
                words = key_words(key)
                i = index_hash(words, t.tag) & mask
                while struct.unpack_from("<Q", b, self.BUCKETS + 64 * i + 56)[0]:
                    i = (i + 1) & mask
                off = flow.slot * FT_SLOT + d * _L["tuplehash_size"]
                struct.pack_into("<8Q", b, self.BUCKETS + 64 * i, *words,
                                 t.tag << 32 | (off + 1))


class NfFlowtables:
    """A namespace's flowtables by name (``Fib.flowtables``); a device belongs to the
    first table it was bound to, as ``nf_flowtable_by_dev`` answers. The namespace's
    flows share one buffer (``buf`` at fake address ``base``) and one :class:`FlowIndex`,
    allocated with the first table."""

    def __init__(self) -> None:
        self.tables: dict[str, NfFlowtable] = {}
        self.base = FT_BASE + (next(_namespace_numbers) << 32)
        self._buf: bytearray | None = None
        self._index: FlowIndex | None = None
        self._stale = True
        self._tags = itertools.count(1)
        self._free = list(range(MAX_FLOWS))  # a heap: the lowest slot first

    @property
    def buf(self) -> bytearray:
        if self._buf is None:
            self._buf = bytearray(MAX_FLOWS * FT_SLOT)
        return self._buf

    @property
    def index(self) -> FlowIndex:
        """The index, up to date (rebuilt here after changes: the kfunc asks for it at
        a batch's first lookup, before native code reads it)."""
        if self._index is None:
            self._index = FlowIndex()
            self._stale = True
        if self._stale:
            self._index.build(self.base, self.tables.values())
            self._stale = False
        return self._index

    def reindex(self) -> None:
        """The tables changed: the index is rebuilt when next asked for."""
        self._stale = True

    def free_slot(self) -> int:
        """The lowest free slot of the buffer (taken until :meth:`release`)."""
        if not self._free:
            raise FlowtableError(errno.ENOBUFS, f"no room for another flow (at most "
                                 f"{MAX_FLOWS} in a namespace)")
        return heapq.heappop(self._free)

    def release(self, slot: int) -> None:
        heapq.heappush(self._free, slot)

    def add(self, name: str, devices: Iterable[int]) -> NfFlowtable:
        """``nft add flowtable ... { devices = ... }`` (EEXIST: the name is taken)."""
        if name in self.tables:
            raise FlowtableError(errno.EEXIST, f"flowtable {name!r} exists")
        devs = tuple(devices)
        if any(not 0 < d < 1 << 31 for d in devs):
            raise FlowtableError(errno.EINVAL, "a device is a positive ifindex")
        bound = sum(len(t.devices) for t in self.tables.values())
        if bound + len(devs) > FlowIndex.MAX_DEVS:
            raise FlowtableError(errno.ENOSPC, f"at most {FlowIndex.MAX_DEVS} device "
                                 "bindings in a namespace")
        t = self.tables[name] = NfFlowtable(self, name, devs, next(self._tags))
        self.reindex()
        return t

    def delete(self, name: str) -> None:
        """``nft delete flowtable``: its devices unbound, every flow torn down and
        freed (``nf_flow_table_free``). ENOENT: no such table."""
        t = self.tables.get(name)
        if t is None:
            raise FlowtableError(errno.ENOENT, f"no flowtable {name!r}")
        for flow in t.list():
            flow.teardown()
        t.gc()
        del self.tables[name]
        self.reindex()

    def by_dev(self, ifindex: int) -> NfFlowtable | None:
        """``nf_flowtable_by_dev``: the first table bound to ``ifindex``."""
        return next((t for t in self.tables.values() if ifindex in t.devices), None)

    def list(self) -> builtins.list[NfFlowtable]:
        return list(self.tables.values())
