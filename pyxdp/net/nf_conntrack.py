"""A network namespace's connection tracking table, ``nf_conntrack``, as BPF programs see it.

Models what ``net/netfilter/nf_conntrack_core.c`` and ``nf_nat_core.c`` do for
the conntrack kfuncs (:mod:`pyxdp.net.nf_conntrack_bpf`) and what
``/proc/net/nf_conntrack`` shows:

* entries (``struct nf_conn``) with an original and a reply tuple
  (``struct nf_conntrack_tuple``: layer 3 and 4 protocol, addresses, ports),
  a zone (``struct nf_conntrack_zone``: id and the directions it applies to),
  ``status`` bits (``enum ip_conntrack_status``), ``mark``, a timeout in
  jiffies and a reference count;
* lookup by tuple in either direction, zone-aware as ``nf_ct_key_equal``
  (``nf_ct_zone_equal`` compares a zone's id only in the directions it
  covers), finding neither unconfirmed nor expired entries;
* allocation (``nf_conntrack_alloc``: counted against ``max_entries``,
  ``nf_conntrack_max``), insertion (``nf_conntrack_hash_check_insert``:
  -EEXIST when either tuple is already tracked in the zone), timeouts
  (``__nf_ct_set_timeout``, ``__nf_ct_change_timeout``: relative jiffies
  before confirmation, absolute after, capped at ``INT_MAX``; -EPERM for a
  fixed timeout), status changes (``nf_ct_change_status_common``: -EBUSY for
  the bits that cannot change, set-only bits; ``IPS_UNCHANGEABLE_MASK`` bits
  ignored), and NAT set-up (``nf_nat_setup_info`` with one address and an
  optional port: the reply tuple rewritten, ``IPS_{SRC,DST}_NAT`` and
  ``_DONE`` bits, ``get_unique_tuple``'s rules for a taken tuple).

Each entry lives in a 256-byte slot of one flat buffer laid out as Linux 6.18
lays out ``struct nf_conn`` on x86-64, so a program reads ``ct->status``,
``ct->mark``, ``ct->timeout`` or ``ct->tuplehash[dir].tuple`` at the offsets
its CO-RE relocations resolve to. The buffer is mapped read-only into a run
that gets an entry from a kfunc (pointer members read 0).

The rest of the table's state lives in memory the JIT's native kfunc twins
(:mod:`pyxdp.net.nf_conntrack_bpf`) use in place too: each slot's state bits
and allocation number past the struct (:data:`CT_FLAGS`, :data:`CT_SEQ`), the
hash as numpy buckets and chain links, the free slots' stack and the counters
(:data:`CT_DESC`, ``NfConntrack.desc``); the Python objects are views.

The table belongs to a namespace: :class:`pyxdp.net.fib.Fib` (the namespace a
run sees, ``RunContext.fib``) has one as ``conntrack``; from Python,
:meth:`NfConntrack.add`, :meth:`list`, :meth:`delete`, :meth:`flush` and
:meth:`proc` (the ``/proc/net/nf_conntrack`` text) manage it, as
``conntrack -I/-L/-D/-F`` do through ctnetlink.
"""

from __future__ import annotations

import builtins
import errno
import ipaddress
import itertools
import struct
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from enum import IntFlag

import numpy as np
import numpy.typing as npt

from pyxdp.errors import PyxdpError
from pyxdp.vm.jiffies import HZ, jiffies64

__all__ = ["CT_BASE", "CT_DESC", "CT_FLAGS", "CT_KEY", "CT_SEQ", "CT_SLOT", "ConntrackError",
           "CtTuple", "IpsStatus", "NfConn", "NfConntrack", "Zone", "NF_CONN_LAYOUT"]

AF_INET, AF_INET6 = 2, 10
IPPROTO_TCP, IPPROTO_UDP = 6, 17
IP_CT_DIR_ORIGINAL, IP_CT_DIR_REPLY = 0, 1
NF_CT_ZONE_DIR_ORIG, NF_CT_ZONE_DIR_REPL = 1, 2
NF_CT_DEFAULT_ZONE_DIR = NF_CT_ZONE_DIR_ORIG | NF_CT_ZONE_DIR_REPL
NF_NAT_MANIP_SRC, NF_NAT_MANIP_DST = 0, 1
INT_MAX = 0x7FFF_FFFF
M32 = 0xFFFF_FFFF


class IpsStatus(IntFlag):
    """``enum ip_conntrack_status`` (include/uapi/linux/netfilter/nf_conntrack_common.h)."""

    EXPECTED = 1 << 0
    SEEN_REPLY = 1 << 1
    ASSURED = 1 << 2
    CONFIRMED = 1 << 3
    SRC_NAT = 1 << 4
    DST_NAT = 1 << 5
    SEQ_ADJUST = 1 << 6
    SRC_NAT_DONE = 1 << 7
    DST_NAT_DONE = 1 << 8
    DYING = 1 << 9
    FIXED_TIMEOUT = 1 << 10
    TEMPLATE = 1 << 11
    UNTRACKED = 1 << 12
    HELPER = 1 << 13
    OFFLOAD = 1 << 14
    HW_OFFLOAD = 1 << 15


IPS_NAT_DONE_MASK = IpsStatus.SRC_NAT_DONE | IpsStatus.DST_NAT_DONE
IPS_UNCHANGEABLE_MASK = 0xDBF9  # nf_conntrack_common.h: what ctnetlink/BPF may not set
IPS_MAX_BIT = 16

# Offsets in struct nf_conn (Linux 6.18, x86-64, CONFIG_NF_CONNTRACK_{ZONES,MARK,SECMARK}):
# ct_general.use, timeout, zone, tuplehash[2] (56 bytes each, the tuple 16 bytes in),
# status, mark, secmark, the proto union; its size.
NF_CONN_LAYOUT = {"use": 0, "timeout": 8, "zone": 12, "tuplehash": 16, "tuplehash_size": 56,
                  "tuple": 16, "status": 128, "mark": 168, "secmark": 172, "proto": 184,
                  "size": 248}
CT_SLOT = 256  # bytes per entry in the table's buffer
# pyxdp's own byte past struct nf_conn in each slot (no program reads it: BTF ends at
# 248): the entry's state bits, read by the kfuncs' native twins too.
CT_FLAGS = 248
CTF_ALLOCATED, CTF_IN_TABLE, CTF_BYSOURCE = 1, 2, 4
CT_SEQ = 252  # u32: when the entry was allocated (the table's entries in that order)
# The hash key of a tuple: its packed bytes but the last (``dst.dir``), 5 u64 words.
CT_KEY = 39
_HASH_MUL = 0x9E37_79B9_7F4A_7C15
# The words a table describes itself with to native code (``NfConntrack.desc``): the
# host addresses of the entries, the buckets and the chain links, the fake base, the
# slots, the bucket mask, the hashed entries, the earliest expiry among them (a lower
# bound: a lookup at or past it runs the gc first) and 1 when the clock is jiffies64.
CT_DESC = {name: i for i, name in enumerate(
    ("buf", "base", "nslots", "buckets", "mask", "next", "live", "earliest", "clock",
     # allocation: entries allocated, the free slots' stack (host address, depth; last
     # freed first), the slots never used from next_slot on, the next allocation's seq
     "count", "free", "nfree", "next_slot", "seq"))}
# Fake addresses of the tables' buffers: table k at CT_BASE + (k << 32).
CT_BASE = 0x0000_6000_0000_0000
_TUPLE = struct.Struct("<16s2sH16s2sBB")  # src.u3, src.u (be), l3num, dst.u3, dst.u, protonum, dir
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_ZONE = struct.Struct("<HBB")
_L4 = {IPPROTO_TCP: "tcp", IPPROTO_UDP: "udp"}


class ConntrackError(PyxdpError):
    """An operation the kernel refuses; ``errno`` says how (EEXIST, ENOMEM, ENOENT...)."""

    def __init__(self, err: int, message: str) -> None:
        self.errno = err
        super().__init__(f"{message} ({errno.errorcode.get(err, err)})")


def msecs_to_jiffies(ms: int) -> int:
    """``msecs_to_jiffies`` for HZ=250; "negative" (>= 2^31) is MAX_JIFFY_OFFSET."""
    ms &= M32
    if ms >= 1 << 31:
        return (1 << 62) - 2
    step = 1000 // HZ
    return (ms + step - 1) // step


@dataclass(frozen=True)
class CtTuple:
    """``struct nf_conntrack_tuple`` without its ``dst.dir``: addresses as 16 raw bytes
    (an IPv4 address in the first 4), ports as numbers."""

    l3num: int
    protonum: int
    src: bytes
    sport: int
    dst: bytes
    dport: int

    @classmethod
    def of(cls, src: str, sport: int, dst: str, dport: int, proto: str | int = "udp"
           ) -> CtTuple:
        """A tuple from addresses in text: ``CtTuple.of("10.0.0.1", 1234, "10.0.0.2", 80)``."""
        a, b = ipaddress.ip_address(src), ipaddress.ip_address(dst)
        if a.version != b.version:
            raise ConntrackError(errno.EINVAL, f"{src} and {dst} are of different families")
        p = {"tcp": IPPROTO_TCP, "udp": IPPROTO_UDP}.get(proto, proto) \
            if isinstance(proto, str) else proto
        if not isinstance(p, int):
            raise ConntrackError(errno.EPROTO, f"unknown protocol {proto!r}")
        for port in (sport, dport):
            if not 0 <= port <= 0xFFFF:
                raise ConntrackError(errno.EINVAL, f"port {port} is not a 16-bit number")
        return cls(AF_INET if a.version == 4 else AF_INET6, p, a.packed.ljust(16, b"\0"),
                   sport, b.packed.ljust(16, b"\0"), dport)

    def invert(self) -> CtTuple:
        """``nf_ct_invert_tuple``: IPv4 keeps only the first 4 address bytes."""
        n = 4 if self.l3num == AF_INET else 16
        return CtTuple(self.l3num, self.protonum, self.dst[:n].ljust(16, b"\0"), self.dport,
                       self.src[:n].ljust(16, b"\0"), self.sport)

    def pack(self, direction: int) -> bytes:
        return _TUPLE.pack(self.src, self.sport.to_bytes(2, "big"), self.l3num, self.dst,
                           self.dport.to_bytes(2, "big"), self.protonum, direction)

    @classmethod
    def unpack(cls, raw: bytes | bytearray | memoryview) -> CtTuple:
        src, sp, l3, dst, dp, proto, _dir = _TUPLE.unpack(raw)
        return cls(l3, proto, src, int.from_bytes(sp, "big"), dst, int.from_bytes(dp, "big"))

    def _addr(self, raw: bytes) -> str:
        """As ``%pI4`` / ``%pI6`` print it (IPv6 in full, not compressed)."""
        if self.l3num == AF_INET:
            return str(ipaddress.IPv4Address(raw[:4]))
        return ipaddress.IPv6Address(raw).exploded

    def __str__(self) -> str:
        return (f"src={self._addr(self.src)} dst={self._addr(self.dst)} sport={self.sport} "
                f"dport={self.dport}")


@dataclass(frozen=True)
class Zone:
    """``struct nf_conntrack_zone``: ``id`` counts in the directions ``dir`` names."""

    id: int = 0
    dir: int = NF_CT_DEFAULT_ZONE_DIR
    flags: int = 0

    def id_for(self, direction: int) -> int:
        """``nf_ct_zone_id``: the id in ``direction``, the default zone's (0) elsewhere."""
        return self.id if self.dir & (1 << direction) else 0


DEFAULT_ZONE = Zone()


class _Field:
    """An integer field of ``struct nf_conn``, read and written in the entry's slot of
    the table's buffer (where the programs read it)."""

    def __init__(self, name: str, fmt: struct.Struct, doc: str) -> None:
        self.name, self.fmt, self.__doc__ = name, fmt, doc
        self.mask = (1 << (8 * fmt.size)) - 1

    def __get__(self, conn: NfConn, owner: type | None = None) -> int:
        return int(self.fmt.unpack_from(conn.table.buf, conn._off(self.name))[0])

    def __set__(self, conn: NfConn, v: int) -> None:
        self.fmt.pack_into(conn.table.buf, conn._off(self.name), v & self.mask)


class _Timeout(_Field):
    """``ct->timeout``; a hashed entry's new expiry may be the table's earliest."""

    def __set__(self, conn: NfConn, v: int) -> None:
        super().__set__(conn, v)
        if conn.in_table:
            conn.table._note_expiry(v & M32)


class _Flag:
    """A state bit of the entry, in its slot's flags byte (:data:`CT_FLAGS`)."""

    def __init__(self, bit: int, doc: str) -> None:
        self.bit, self.__doc__ = bit, doc

    def __get__(self, conn: NfConn, owner: type | None = None) -> bool:
        return bool(conn.table.buf[conn.slot * CT_SLOT + CT_FLAGS] & self.bit)

    def __set__(self, conn: NfConn, on: bool) -> None:
        at = conn.slot * CT_SLOT + CT_FLAGS
        buf = conn.table.buf
        buf[at] = buf[at] | self.bit if on else buf[at] & ~self.bit


class NfConn:
    """One entry (``struct nf_conn``): a view of its slot in the table's buffer."""

    def __init__(self, table: NfConntrack, slot: int) -> None:
        self.table = table
        self.slot = slot

    allocated = _Flag(CTF_ALLOCATED, "The slot holds an entry (nf_conntrack_alloc'd).")
    in_table = _Flag(CTF_IN_TABLE, "Confirmed and hashed (nf_conntrack_hash_check_insert).")
    bysource = _Flag(CTF_BYSOURCE, "In nf_nat_bysource (SRC NAT set up).")

    @property
    def addr(self) -> int:
        """The fake address a program sees for ``struct nf_conn *``."""
        return self.table.base + self.slot * CT_SLOT

    def _off(self, field: str) -> int:
        return self.slot * CT_SLOT + NF_CONN_LAYOUT[field]

    use = _Field("use", _U32, "``ct_general.use``: the table's reference (once inserted) "
                 "and programs'.")
    timeout = _Timeout("timeout", _U32, "``ct->timeout``: jiffies left before "
                     "confirmation, the u32 expiry after.")
    mark = _Field("mark", _U32, "``ct->mark``.")
    status = _Field("status", _U64, "``ct->status``: the ``IPS_*`` bits.")

    @property
    def zone(self) -> Zone:
        zid, flags, zdir = _ZONE.unpack_from(self.table.buf, self._off("zone"))
        return Zone(zid, zdir, flags)

    @zone.setter
    def zone(self, z: Zone) -> None:
        _ZONE.pack_into(self.table.buf, self._off("zone"), z.id, z.flags, z.dir)

    def tuple(self, direction: int) -> CtTuple:
        """``ct->tuplehash[direction].tuple``."""
        off = self._tuple_off(direction)
        return CtTuple.unpack(self.table.buf[off:off + _TUPLE.size])

    def _tuple_off(self, direction: int) -> int:
        return (self._off("tuplehash") + direction * NF_CONN_LAYOUT["tuplehash_size"]
                + NF_CONN_LAYOUT["tuple"])

    def set_tuple(self, direction: int, t: CtTuple) -> None:
        off = self._tuple_off(direction)
        self.table.buf[off:off + _TUPLE.size] = t.pack(direction)

    @property
    def orig(self) -> CtTuple:
        return self.tuple(IP_CT_DIR_ORIGINAL)

    @property
    def reply(self) -> CtTuple:
        return self.tuple(IP_CT_DIR_REPLY)

    @property
    def confirmed(self) -> bool:
        return bool(self.status & IpsStatus.CONFIRMED)

    def expires(self) -> int:
        """Jiffies until expiry (``nf_ct_expires``; 0 once expired)."""
        if not self.confirmed:
            return self.timeout
        return max(_s32(self.timeout - self.table.stamp()), 0)

    def __repr__(self) -> str:
        return (f"NfConn({_L4.get(self.orig.protonum, self.orig.protonum)} {self.orig} "
                f"reply {self.reply} status={IpsStatus(self.status & 0xFFFF)!r} "
                f"mark={self.mark} zone={self.zone.id})")


def _s32(v: int) -> int:
    v &= M32
    return v - (1 << 32) if v & (1 << 31) else v


_table_numbers = itertools.count()
# Live tables by base address, for the kfuncs that get an nf_conn pointer.
TABLES: weakref.WeakValueDictionary[int, NfConntrack] = weakref.WeakValueDictionary()


class NfConntrack:
    """One namespace's conntrack table (``net->ct``, ``nf_conntrack_hash``).

    ``max_entries`` is ``net.netfilter.nf_conntrack_max``; ``clock`` gives
    jiffies (default: the clock ``bpf_jiffies64`` reads). ``peers`` maps the
    netns ids this namespace has given other namespaces (``ip netns set``) to
    their tables, for ``bpf_ct_opts.netns_id``.
    """

    def __init__(self, *, max_entries: int = 65536,
                 clock: Callable[[], int] = jiffies64) -> None:
        if not 0 < max_entries <= 1 << 24:
            raise ConntrackError(errno.EINVAL, f"max_entries {max_entries} is not in "
                                               f"[1, {1 << 24}]")
        self.max_entries = max_entries
        self.desc: npt.NDArray[np.uint64] = np.zeros(len(CT_DESC), np.uint64)
        self.clock = clock
        self.base = CT_BASE + (next(_table_numbers) << 32)
        self._buf: bytearray | None = None
        self._objs: dict[int, NfConn] = {}  # the Python views of slots, made on demand
        # nf_conntrack_hash: bucket -> first node + 1 (node 2 * slot + direction), and
        # per node the next one + 1, in insertion order; with ``desc`` (CT_DESC), made
        # with the buffer, the memory the kfuncs' native twins read and write too.
        self._buckets: npt.NDArray[np.uint32] = np.zeros(0, np.uint32)
        self._next: npt.NDArray[np.uint32] = np.zeros(0, np.uint32)
        self.peers: dict[int, NfConntrack] = {}
        TABLES[self.base] = self

    @property
    def buf(self) -> bytearray:
        """The entries' memory (allocated on first use; untouched pages cost nothing)."""
        return self._buf if self._buf is not None else self._make()

    def _make(self) -> bytearray:
        """The entries' buffer, the hash's arrays and ``desc``'s words for them."""
        buf = bytearray(self.max_entries * CT_SLOT)
        nb = 1 << max(self.max_entries - 1, 15).bit_length()
        self._buckets = np.zeros(nb, np.uint32)
        self._next = np.zeros(2 * self.max_entries, np.uint32)
        self._free = np.zeros(self.max_entries, np.uint32)
        # the view pins the bytearray (it never resizes) and gives its address
        self._view = np.frombuffer(buf, np.uint8)
        d = self.desc
        d[CT_DESC["buf"]] = self._view.ctypes.data
        d[CT_DESC["base"]] = self.base
        d[CT_DESC["nslots"]] = self.max_entries
        d[CT_DESC["buckets"]] = self._buckets.ctypes.data
        d[CT_DESC["mask"]] = nb - 1
        d[CT_DESC["next"]] = self._next.ctypes.data
        d[CT_DESC["free"]] = self._free.ctypes.data
        self._buf = buf
        return buf

    @property
    def clock(self) -> Callable[[], int]:
        """The jiffies clock (the twins read it themselves only when it is ``jiffies64``)."""
        return self._clock

    @clock.setter
    def clock(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        self.desc[CT_DESC["clock"]] = int(clock is jiffies64)

    def conn_at(self, slot: int) -> NfConn | None:
        """The entry in ``slot`` (None: the slot is free)."""
        if self._buf is None or not 0 <= slot < self.max_entries or \
                not self._buf[slot * CT_SLOT + CT_FLAGS] & CTF_ALLOCATED:
            return None
        ct = self._objs.get(slot)
        if ct is None:
            ct = self._objs[slot] = NfConn(self, slot)
        return ct

    @property
    def conns(self) -> dict[int, NfConn]:
        """Slot -> entry, every allocated one (tracked or not), oldest allocation first."""
        if self._buf is None:
            return {}
        flags = self._view[CT_FLAGS::CT_SLOT]
        slots = np.flatnonzero(flags & CTF_ALLOCATED)
        seq = self._view.view(np.uint32)[CT_SEQ // 4::CT_SLOT // 4][slots]
        # the u32 seq wraps: order by distance back from the next one
        age = (np.uint32(self.desc[CT_DESC["seq"]] & M32) - seq).astype(np.uint32)
        out = {}
        for slot in slots[np.argsort(-age.astype(np.int64), kind="stable")].tolist():
            ct = self.conn_at(slot)
            assert ct is not None
            out[slot] = ct
        return out

    def native_desc(self) -> int:
        """The host address of ``desc`` for native code (the buffer made first)."""
        if self._buf is None:
            self._make()
        return int(self.desc.ctypes.data)

    # -- the hash (nf_conntrack_hash) ---------------------------------------------------
    def _bucket(self, key: bytes) -> int:
        """The bucket of a tuple's key (:data:`CT_KEY` bytes), as the twins hash it."""
        h = 0
        for i in range(0, 40, 8):
            h = ((h ^ int.from_bytes(key[i:i + 8], "little")) * _HASH_MUL) & ((1 << 64) - 1)
        h ^= h >> 32
        return h & (len(self._buckets) - 1)

    def _key_at(self, node: int) -> bytes:
        off = (node >> 1) * CT_SLOT + NF_CONN_LAYOUT["tuplehash"] + \
            (node & 1) * NF_CONN_LAYOUT["tuplehash_size"] + NF_CONN_LAYOUT["tuple"]
        return bytes(self.buf[off:off + CT_KEY])

    def _chain(self, key: bytes) -> Iterator[int]:
        """The nodes of ``key``'s bucket, oldest first."""
        if self._buf is None:
            return
        node = int(self._buckets[self._bucket(key)])
        while node:
            yield node - 1
            node = int(self._next[node - 1])

    def _hash_in(self, ct: NfConn) -> None:
        for d in (IP_CT_DIR_ORIGINAL, IP_CT_DIR_REPLY):
            n = 2 * ct.slot + d
            b = self._bucket(self._key_at(n))
            self._next[n] = 0
            last = -1
            node = int(self._buckets[b])
            while node:
                last, node = node - 1, int(self._next[node - 1])
            if last < 0:
                self._buckets[b] = n + 1
            else:
                self._next[last] = n + 1
        ct.in_table = True
        self.desc[CT_DESC["live"]] += 1
        self._note_expiry(ct.timeout)

    def _note_expiry(self, timeout: int) -> None:
        """A hashed entry expires at ``timeout``: keep ``earliest`` at or below it."""
        d = self.desc
        e = int(d[CT_DESC["earliest"]])
        if int(d[CT_DESC["live"]]) <= 1 or _s32(timeout - e) < 0:
            d[CT_DESC["earliest"]] = timeout & M32

    def stamp(self) -> int:
        """``nfct_time_stamp``: jiffies as u32."""
        return self.clock() & M32

    def close(self) -> None:
        TABLES.pop(self.base, None)

    # -- entries ----------------------------------------------------------------------
    def alloc(self, orig: CtTuple, reply: CtTuple, zone: Zone = DEFAULT_ZONE,
              timeout: int = 0) -> NfConn:
        """``nf_conntrack_alloc``: a new unconfirmed entry (-ENOMEM past max_entries;
        Linux would first try ``early_drop``)."""
        self._expire()
        d = self.desc
        if int(d[CT_DESC["count"]]) >= self.max_entries:
            raise ConntrackError(errno.ENOMEM, f"table full ({self.max_entries} entries)")
        if d[CT_DESC["nfree"]]:
            d[CT_DESC["nfree"]] -= 1
            slot = int(self._free[int(d[CT_DESC["nfree"]])])
        else:
            slot = int(d[CT_DESC["next_slot"]])
            d[CT_DESC["next_slot"]] += 1
        off = slot * CT_SLOT
        self.buf[off:off + CT_SLOT] = bytes(CT_SLOT)
        self.buf[off + CT_FLAGS] = CTF_ALLOCATED
        _U32.pack_into(self.buf, off + CT_SEQ, int(d[CT_DESC["seq"]]) & M32)
        d[CT_DESC["seq"]] = (int(d[CT_DESC["seq"]]) + 1) & M32
        d[CT_DESC["count"]] += 1
        ct = self.conn_at(slot)
        assert ct is not None
        ct.set_tuple(IP_CT_DIR_ORIGINAL, orig)
        ct.set_tuple(IP_CT_DIR_REPLY, reply)
        ct.zone = zone
        ct.timeout = min(timeout, INT_MAX)
        return ct

    def free(self, ct: NfConn) -> None:
        """``nf_conntrack_free`` / the last ``nf_ct_put``: the entry and its slot go."""
        if self.conn_at(ct.slot) is not ct:
            return
        if ct.in_table:
            self._unhash(ct)
        ct.in_table = ct.bysource = ct.allocated = False
        d = self.desc
        self._free[int(d[CT_DESC["nfree"]])] = ct.slot
        d[CT_DESC["nfree"]] += 1
        d[CT_DESC["count"]] -= 1

    def _unhash(self, ct: NfConn) -> None:
        """The entry's nodes leave their chains (the others keep their order)."""
        for d in (IP_CT_DIR_ORIGINAL, IP_CT_DIR_REPLY):
            n = 2 * ct.slot + d
            b = self._bucket(self._key_at(n))
            prev = -1
            node = int(self._buckets[b])
            while node and node - 1 != n:
                prev, node = node - 1, int(self._next[node - 1])
            if not node:
                continue
            if prev < 0:
                self._buckets[b] = self._next[n]
            else:
                self._next[prev] = self._next[n]
            self._next[n] = 0
        ct.in_table = False
        self.desc[CT_DESC["live"]] -= 1

    def _expired(self, ct: NfConn) -> bool:
        return _s32(ct.timeout - self.stamp()) <= 0

    def _expire(self) -> None:
        """The gc worker, at once: expired entries leave the table (and go when unused)."""
        stamp = self.stamp()
        earliest = None
        for ct in [c for c in self.conns.values() if c.in_table]:
            if _s32(ct.timeout - stamp) <= 0:
                self._unhash(ct)
                ct.status |= IpsStatus.DYING
                ct.use = max(ct.use - 1, 0)
                if ct.use == 0:
                    self.free(ct)
            elif earliest is None or _s32(ct.timeout - earliest) < 0:
                earliest = ct.timeout
        self.desc[CT_DESC["earliest"]] = earliest or 0

    def _matches(self, t: CtTuple, zone: Zone, bucket_zone: int | None
                 ) -> Iterator[tuple[NfConn, int]]:
        """Entries with tuple ``t`` in a direction d where ``nf_ct_key_equal`` holds
        (the zone ids of d equal) and, when given, whose hash bucket used zone id
        ``bucket_zone``."""
        key = t.pack(0)[:CT_KEY]
        for node in self._chain(key):
            if self._key_at(node) != key:
                continue
            ct, d = self.conn_at(node >> 1), node & 1
            assert ct is not None
            cz = ct.zone.id_for(d)
            if cz == zone.id_for(d) and (bucket_zone is None or cz == bucket_zone):
                yield ct, d

    def find(self, t: CtTuple, zone: Zone = DEFAULT_ZONE) -> tuple[NfConn, int] | None:
        """``nf_conntrack_find_get`` without the reference: the entry tracking ``t`` in
        ``zone`` and the direction it matched."""
        self._expire()
        return next(self._matches(t, zone, None), None)

    def insert(self, ct: NfConn) -> None:
        """``nf_conntrack_hash_check_insert``: -EEXIST when a tuple is already tracked."""
        self._expire()
        zone = ct.zone
        for d in (IP_CT_DIR_ORIGINAL, IP_CT_DIR_REPLY):
            if next(self._matches(ct.tuple(d), zone, zone.id_for(d)), None) is not None:
                raise ConntrackError(errno.EEXIST, f"{ct.tuple(d)} is already tracked")
        self._hash_in(ct)

    def tuple_taken(self, t: CtTuple, ignored: NfConn) -> bool:
        """``nf_conntrack_tuple_taken``: another entry tracks ``t`` (same flow excepted)."""
        self._expire()
        zone = ignored.zone
        for ct, _d in self._matches(t, zone, zone.id_for(IP_CT_DIR_REPLY)):
            if ct is ignored:
                continue
            if ct.orig == ignored.orig and \
                    ct.zone.id_for(IP_CT_DIR_ORIGINAL) == zone.id_for(IP_CT_DIR_ORIGINAL):
                continue  # the same flow twice: nf_ct_resolve_clash's business
            return True
        return False

    # -- timeouts and status ----------------------------------------------------------
    def set_timeout(self, ct: NfConn, jiffies: int) -> None:
        """``__nf_ct_set_timeout``."""
        jiffies = min(jiffies, INT_MAX)
        ct.timeout = self.stamp() + jiffies if ct.confirmed else jiffies

    def change_timeout(self, ct: NfConn, jiffies: int) -> int:
        """``__nf_ct_change_timeout``: 0, -EPERM (fixed timeout) or -ETIME (dying)."""
        if ct.status & IpsStatus.FIXED_TIMEOUT:
            return -errno.EPERM
        self.set_timeout(ct, jiffies)
        if ct.status & IpsStatus.DYING:
            return -errno.ETIME
        return 0

    @staticmethod
    def change_status(ct: NfConn, status: int) -> int:
        """``nf_ct_change_status_common``: 0 or -EBUSY."""
        status &= M32
        d = ct.status ^ status
        if d & (IpsStatus.EXPECTED | IpsStatus.CONFIRMED | IpsStatus.DYING):
            return -errno.EBUSY
        if d & IpsStatus.SEEN_REPLY and not status & IpsStatus.SEEN_REPLY:
            return -errno.EBUSY
        if d & IpsStatus.ASSURED and not status & IpsStatus.ASSURED:
            return -errno.EBUSY
        on = status & ~IPS_UNCHANGEABLE_MASK & ((1 << IPS_MAX_BIT) - 1)
        ct.status = ct.status | on  # __nf_ct_change_status(ct, status, 0): set only
        return 0

    # -- NAT (nf_nat_core.c) -------------------------------------------------------------
    def nat_setup(self, ct: NfConn, addr: bytes, port: int | None, manip: int) -> int:
        """``bpf_ct_set_nat_info`` -> ``nf_nat_setup_info`` with the range ``addr``
        (16 raw bytes) and ``port`` (None: no port range): 0 or -ENOMEM (NF_DROP:
        NAT of that kind already set up). A ``manip`` other than SRC (0) is DST."""
        done = IpsStatus.SRC_NAT_DONE if manip == NF_NAT_MANIP_SRC else IpsStatus.DST_NAT_DONE
        if ct.confirmed:
            return 0
        if ct.status & done:
            return -errno.ENOMEM
        curr = ct.reply.invert()
        new = self._unique_tuple(curr, addr, port, ct, manip)
        if new != curr:
            ct.set_tuple(IP_CT_DIR_REPLY, new.invert())
            ct.status |= IpsStatus.SRC_NAT if manip == NF_NAT_MANIP_SRC else IpsStatus.DST_NAT
        if manip == NF_NAT_MANIP_SRC:
            ct.bysource = True
        ct.status |= done
        return 0

    def _used(self, t: CtTuple, ct: NfConn) -> bool:
        """``nf_nat_used_tuple``: is the reply of ``t`` tracked already?"""
        return self.tuple_taken(t.invert(), ct)

    @staticmethod
    def _in_range(t: CtTuple, addr: bytes, port: int | None, manip: int) -> bool:
        """``nf_in_range`` for a one-address range (and one port unless None)."""
        a = t.src if manip == NF_NAT_MANIP_SRC else t.dst
        n = 4 if t.l3num == AF_INET else 16
        if a[:n] != addr[:n]:
            return False
        if port is None:
            return True
        return (t.sport if manip == NF_NAT_MANIP_SRC else t.dport) == port

    def _unique_tuple(self, orig: CtTuple, addr: bytes, port: int | None, ct: NfConn,
                      manip: int) -> CtTuple:
        """``get_unique_tuple`` for a range of one address and at most one port."""
        if manip == NF_NAT_MANIP_SRC:
            if self._in_range(orig, addr, port, manip):
                if not self._used(orig, ct):
                    return orig
            else:
                found = self._appropriate_src(orig, addr, port, ct)
                if found is not None and not self._used(found, ct):
                    return found
        # find_best_ips_proto: one choice, the whole 16 bytes of the range's address.
        t = replace(orig, src=addr) if manip == NF_NAT_MANIP_SRC else replace(orig, dst=addr)
        if port is not None:
            # nf_nat_l4proto_unique_tuple over a one-port range: that port, taken or not.
            return replace(t, sport=port) if manip == NF_NAT_MANIP_SRC else \
                replace(t, dport=port)
        if not self._used(t, ct) or manip == NF_NAT_MANIP_DST:
            return t
        key = t.sport
        lo, size = (1, 511) if key < 512 else (600, 424) if key < 1024 else (1024, 64512)
        # Linux starts at a random offset; pyxdp searches from the bottom of the range.
        for i in range(min(size, 128)):
            cand = replace(t, sport=lo + i % size)
            if not self._used(cand, ct):
                return cand
        return cand

    def _appropriate_src(self, orig: CtTuple, addr: bytes, port: int | None, ct: NfConn
                         ) -> CtTuple | None:
        """``find_appropriate_src``: reuse the mapping of a flow from the same source."""
        zone = ct.zone
        for other in self.conns.values():
            if not other.bysource or other is ct:
                continue
            o = other.orig
            if (o.l3num, o.protonum, o.src, o.sport) != (orig.l3num, orig.protonum, orig.src,
                                                         orig.sport):
                continue
            if other.zone.id_for(IP_CT_DIR_ORIGINAL) != zone.id_for(IP_CT_DIR_ORIGINAL):
                continue
            r = other.reply.invert()
            result = replace(r, dst=orig.dst, dport=orig.dport)
            if self._in_range(result, addr, port, NF_NAT_MANIP_SRC):
                return result
        return None

    # -- the Python API (ctnetlink's part) -----------------------------------------------
    def add(self, orig: CtTuple, reply: CtTuple | None = None, *, timeout: float = 30.0,
            status: int = 0, mark: int = 0, zone: Zone | int = 0) -> NfConn:
        """Track a connection (``conntrack -I``): ``reply`` defaults to the inverse of
        ``orig``; ``timeout`` in seconds; ``status`` bits besides CONFIRMED. -EEXIST
        when a tuple is already tracked in the zone."""
        if orig.protonum not in _L4 or (reply is not None and reply.protonum not in _L4):
            raise ConntrackError(errno.EPROTO, "only TCP and UDP connections are modelled")
        if not 0 <= timeout <= INT_MAX / HZ:
            raise ConntrackError(errno.EINVAL, f"timeout {timeout} s is out of range")
        z = Zone(zone) if isinstance(zone, int) else zone
        ct = self.alloc(orig, reply if reply is not None else orig.invert(), z,
                        round(timeout * HZ))
        ct.status = (status & ~IpsStatus.CONFIRMED) & ((1 << 64) - 1)
        ct.mark = mark
        ct.timeout = self.stamp() + ct.timeout
        ct.status |= IpsStatus.CONFIRMED
        try:
            self.insert(ct)
        except ConntrackError:
            self.free(ct)
            raise
        ct.use = 1
        return ct

    def list(self) -> builtins.list[NfConn]:
        """The tracked entries (``conntrack -L``), oldest slot first."""
        self._expire()
        return [c for c in self.conns.values() if c.in_table]

    def lookup(self, t: CtTuple, zone: Zone | int = 0) -> NfConn | None:
        """The entry tracking ``t`` (in either direction) in ``zone``, or None."""
        got = self.find(t, Zone(zone) if isinstance(zone, int) else zone)
        return got[0] if got else None

    def delete(self, t: CtTuple, zone: Zone | int = 0) -> None:
        """``conntrack -D``: the entry tracking ``t`` leaves the table (-ENOENT)."""
        ct = self.lookup(t, zone)
        if ct is None:
            raise ConntrackError(errno.ENOENT, f"no entry tracks {t}")
        self._kill(ct)

    def flush(self) -> None:
        """``conntrack -F``: every tracked entry leaves the table."""
        for ct in self.list():
            self._kill(ct)

    def _kill(self, ct: NfConn) -> None:
        self._unhash(ct)
        ct.status |= IpsStatus.DYING
        ct.use = max(ct.use - 1, 0)
        if ct.use == 0:
            self.free(ct)

    def __len__(self) -> int:
        return len(self.list())

    def proc(self) -> str:
        """``/proc/net/nf_conntrack`` as ``ct_seq_show`` prints it (TCP state NONE:
        entries made here carry no TCP tracking state)."""
        lines = []
        for ct in self.list():
            o, r = ct.orig, ct.reply
            fam = "ipv4" if o.l3num == AF_INET else "ipv6"
            parts = [f"{fam:<8} {o.l3num} {_L4.get(o.protonum, 'unknown'):<8} {o.protonum} "
                     f"{ct.expires() // HZ} "]
            if o.protonum == IPPROTO_TCP:
                parts.append("NONE ")
            z = ct.zone
            parts.append(f"{o} ")
            if z.dir == NF_CT_ZONE_DIR_ORIG:
                parts.append(f"zone-orig={z.id} ")
            if not ct.status & IpsStatus.SEEN_REPLY:
                parts.append("[UNREPLIED] ")
            parts.append(f"{r} ")
            if z.dir == NF_CT_ZONE_DIR_REPL:
                parts.append(f"zone-reply={z.id} ")
            if ct.status & IpsStatus.HW_OFFLOAD:
                parts.append("[HW_OFFLOAD] ")
            elif ct.status & IpsStatus.OFFLOAD:
                parts.append("[OFFLOAD] ")
            elif ct.status & IpsStatus.ASSURED:
                parts.append("[ASSURED] ")
            parts.append(f"mark={ct.mark} ")
            if z.dir == NF_CT_DEFAULT_ZONE_DIR:
                parts.append(f"zone={z.id} ")
            parts.append(f"use={ct.use + 1}")  # ct_seq_show holds a reference itself
            lines.append("".join(parts))
        return "".join(line + "\n" for line in lines)
