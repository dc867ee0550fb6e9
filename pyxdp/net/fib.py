"""A network namespace's routing state for ``bpf_fib_lookup`` and ``bpf_check_mtu``.

What the two XDP helpers of ``net/core/filter.c`` ask the kernel
(``bpf_xdp_fib_lookup`` -> ``bpf_ipv4_fib_lookup`` / ``bpf_ipv6_fib_lookup``,
``bpf_xdp_check_mtu``), modelled on a user-configured namespace:

* devices (:class:`FibDevice`: ifindex, name, MAC, MTU, up, addresses and the
  per-device ``forwarding`` sysctls of ``net/ipv4/devinet.c`` and
  ``net/ipv6/addrconf.c``; a new namespace has forwarding *off*, so a lookup
  answers ``BPF_FIB_LKUP_RET_FWD_DISABLED`` until :meth:`Fib.set_forwarding`);
* a FIB per family: :class:`Route` s in numbered tables, the routes the
  kernel derives from addresses (``fib_add_ifaddr`` of ``net/ipv4/fib_frontend.c``:
  ``local``/``broadcast`` in table local, the prefix route in main;
  ``addrconf_prefix_route``: ``local`` /128 in local, the prefix in main with
  metric 256), longest-prefix match with the kernel's backtracking rules
  (``fib_table_lookup`` of ``net/ipv4/fib_trie.c``: a reject route answers at
  once, a next hop on another device than the output one is skipped;
  ``fib6_table_lookup``/``rt6_select`` of ``net/ipv6/route.c``: lowest metric
  first, a next hop on the output device preferred but not required);
* policy rules (``net/core/fib_rules.c``, ``fib4_rules``/``fib6_rules``): the
  default ``local``/``main``/``default`` rules, and ``fwmark`` rules. As the
  kernel does, IPv4 tables local and main are one trie until a rule is added
  (``fib_unmerge``), so a ``BPF_FIB_LOOKUP_DIRECT`` lookup sees local routes;
* the neighbour table (``net/core/neighbour.c``): IP -> MAC per device with
  its NUD state; only ``NUD_VALID`` states resolve;
* the MTU of a route (``ip_mtu_from_fib_result`` of ``net/ipv4/route.c``,
  ``ip6_mtu_from_fib6`` of ``net/ipv6/route.c``): the device MTU, or the
  route's ``mtu`` only when it is locked (``mtu lock``);
* source address selection for ``BPF_FIB_LOOKUP_SRC``: ``inet_select_addr``
  (``net/ipv4/devinet.c``) and a subset of RFC 6724 for IPv6
  (``ipv6_dev_get_saddr``: same address, scope, outgoing interface, label,
  longest prefix).

Simplified: no multipath routes, no TOS/DSCP-specific routes, no route
``src``/``iif``/``oif`` rule selectors, no lightweight tunnels (so never
``UNSUPP_LWT``), no VRFs, no PMTU exceptions, no DAD (every IPv6 address is
usable at once: configure the kernel with ``nodad`` to compare), no automatic
IPv6 link-local addresses. A device that is down carries
no routes (the kernel deletes them; here they are skipped while it is down).

:class:`FibDevice` is deliberately small: the full network devices of the
datapath feed it (``ifindex``, ``name``, ``mac``, ``mtu``, ``up``,
``addresses``).

Lookups read flat rows, as the kernel's read its tries rather than the netlink
requests that built them: the devices' fields live in a :class:`DevTable`, and
:meth:`Fib.rows` builds the routes (in the order a lookup tries them), neighbours
and table ids from the configuration after each change. The Python helpers and
their native twins (:mod:`pyxdp.net.filter`) read the same rows in place.
"""

from __future__ import annotations

import errno
import ipaddress
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from pyxdp.errors import HelperFault
from pyxdp.net.inet_hashtables import SockTable
from pyxdp.net.xdp import CTX_BASE
from pyxdp.vm.context import RunContext

if TYPE_CHECKING:
    from pyxdp.net.nf_conntrack import NfConntrack
    from pyxdp.net.nf_flow_table import NfFlowtables
    from pyxdp.net.xfrm_state import XfrmStateTable

__all__ = [
    "AF_INET",
    "AF_INET6",
    "BPF_FIB_LOOKUP_DIRECT",
    "BPF_FIB_LOOKUP_MARK",
    "BPF_FIB_LOOKUP_OUTPUT",
    "BPF_FIB_LOOKUP_SKIP_NEIGH",
    "BPF_FIB_LOOKUP_SRC",
    "BPF_FIB_LOOKUP_TBID",
    "BPF_MTU_CHK_RET_FRAG_NEEDED",
    "BPF_MTU_CHK_RET_SUCCESS",
    "FIB_LOOKUP_SIZE",
    "Fib",
    "FibDevice",
    "FibError",
    "FibLookup",
    "FibRet",
    "Neighbour",
    "Nud",
    "Route",
    "RouteType",
    "Rule",
    "RT_TABLE_DEFAULT",
    "RT_TABLE_LOCAL",
    "RT_TABLE_MAIN",
    "run_net",
]

AF_INET = 2
AF_INET6 = 10

RT_TABLE_DEFAULT = 253
RT_TABLE_MAIN = 254
RT_TABLE_LOCAL = 255

BPF_FIB_LOOKUP_DIRECT = 1 << 0
BPF_FIB_LOOKUP_OUTPUT = 1 << 1
BPF_FIB_LOOKUP_SKIP_NEIGH = 1 << 2
BPF_FIB_LOOKUP_TBID = 1 << 3
BPF_FIB_LOOKUP_SRC = 1 << 4
BPF_FIB_LOOKUP_MARK = 1 << 5
# Every flag this kernel knows (measured on 6.18: 1 << 6 is EINVAL).
_FIB_FLAGS = (BPF_FIB_LOOKUP_DIRECT | BPF_FIB_LOOKUP_OUTPUT | BPF_FIB_LOOKUP_SKIP_NEIGH
              | BPF_FIB_LOOKUP_TBID | BPF_FIB_LOOKUP_SRC | BPF_FIB_LOOKUP_MARK)

BPF_MTU_CHK_RET_SUCCESS = 0
BPF_MTU_CHK_RET_FRAG_NEEDED = 1

FIB_LOOKUP_SIZE = 64  # sizeof(struct bpf_fib_lookup)
IP_MAX_MTU = 0xFFFF
IPV6_MIN_MTU = 1280
IP6_MAX_MTU = 0xFFFF + 40  # payload limit plus the IPv6 header
LOOPBACK_IFINDEX = 1
ETH_HLEN = 14
# The metric "ip -6 route add" and addrconf prefix routes get.
IP6_RT_PRIO_USER = 1024
IP6_RT_PRIO_ADDRCONF = 256

# Route scopes (rtnetlink.h): what inet_select_addr compares.
RT_SCOPE_UNIVERSE = 0
RT_SCOPE_LINK = 253
RT_SCOPE_HOST = 254

# Errors fib_table_lookup answers (fib_props[type].error), as negative errnos.
_EAGAIN = -errno.EAGAIN

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPInterface = ipaddress.IPv4Interface | ipaddress.IPv6Interface


class FibRet(IntEnum):
    """``BPF_FIB_LKUP_RET_*``: the non-negative answers of ``bpf_fib_lookup``."""

    SUCCESS = 0
    BLACKHOLE = 1
    UNREACHABLE = 2
    PROHIBIT = 3
    NOT_FWDED = 4
    FWD_DISABLED = 5
    UNSUPP_LWT = 6
    NO_NEIGH = 7
    FRAG_NEEDED = 8
    NO_SRC_ADDR = 9


class RouteType(IntEnum):
    """``enum rtn_type`` (the types a model route can have)."""

    UNICAST = 1
    LOCAL = 2
    BROADCAST = 3
    ANYCAST = 4
    MULTICAST = 5
    BLACKHOLE = 6
    UNREACHABLE = 7
    PROHIBIT = 8
    THROW = 9


# fib_props[type].error of net/ipv4/fib_semantics.c.
_REJECT_ERROR = {RouteType.BLACKHOLE: -errno.EINVAL, RouteType.UNREACHABLE: -errno.EHOSTUNREACH,
                 RouteType.PROHIBIT: -errno.EACCES, RouteType.THROW: _EAGAIN}
_REJECT = frozenset({RouteType.BLACKHOLE, RouteType.UNREACHABLE, RouteType.PROHIBIT,
                     RouteType.THROW})


class Nud(IntFlag):
    """Neighbour states (``NUD_*`` of ``include/uapi/linux/neighbour.h``)."""

    NONE = 0
    INCOMPLETE = 0x01
    REACHABLE = 0x02
    STALE = 0x04
    DELAY = 0x08
    PROBE = 0x10
    FAILED = 0x20
    NOARP = 0x40
    PERMANENT = 0x80


NUD_VALID = Nud.PERMANENT | Nud.NOARP | Nud.REACHABLE | Nud.PROBE | Nud.STALE | Nud.DELAY


class FibError(ValueError):
    """A configuration the kernel would refuse; ``errno`` says how (EEXIST, ENODEV...)."""

    def __init__(self, err: int, message: str) -> None:
        self.errno = err
        super().__init__(f"{message} ({errno.errorcode.get(err, err)})")


def parse_mac(mac: bytes | str) -> bytes:
    """``"02:00:00:00:00:01"`` or 6 bytes -> 6 bytes."""
    if isinstance(mac, bytes):
        raw = mac
    else:
        raw = bytes(int(part, 16) for part in mac.replace("-", ":").split(":"))
    if len(raw) != 6:
        raise FibError(errno.EINVAL, f"MAC address {mac!r} is not 6 bytes")
    return raw


def _addr(value: str | IPAddress | int | bytes) -> IPAddress:
    return ipaddress.ip_address(value)


# DevTable row words (uint32): ifindex, MTU, hard_header_len, DF_* flags, the MAC (6 bytes,
# then 2 of padding). Native code reads them at these byte offsets.
DEV_ROW_WORDS = 6
DEV_ROW_BYTES = 4 * DEV_ROW_WORDS
DEV_MTU, DEV_HHL, DEV_FLAGS, DEV_MAC = 4, 8, 12, 16
DF_UP, DF_FORWARDING, DF_FORWARDING6, DF_LOOPBACK = 1, 2, 4, 8


class DevTable:
    """The namespace's devices as ``bpf_check_mtu`` and ``bpf_fib_lookup`` read them:
    per device a row of :data:`DEV_ROW_WORDS` uint32 (ifindex, MTU, ``hard_header_len``,
    up/forwarding/loopback bits, MAC), in the order the devices were added.
    :class:`FibDevice` keeps those fields here, so the Python helpers and their native
    twins (:mod:`pyxdp.net.filter`) read one state. ``desc`` is what native code is
    given: the rows' host address, their count (the rows move when the table grows)
    and the address of the namespace's route tables' words (:data:`FIB_DESC`).
    ``changed`` runs when a field the routes derive from changes (up, MTU, forwarding6).
    """

    def __init__(self) -> None:
        self.rows: npt.NDArray[np.uint32] = np.zeros((4, DEV_ROW_WORDS), np.uint32)
        self.count = 0
        self.desc: npt.NDArray[np.uint64] = np.zeros(3, np.uint64)
        self.desc[0] = self.rows.ctypes.data
        self.changed: Callable[[], None] = _nothing

    def add(self, ifindex: int, mtu: int, hard_header_len: int) -> int:
        """A new device's row (its index)."""
        if self.count == len(self.rows):
            rows = np.zeros((2 * len(self.rows), DEV_ROW_WORDS), np.uint32)
            rows[:self.count] = self.rows
            self.rows = rows
            self.desc[0] = rows.ctypes.data
        self.rows[self.count, :3] = (ifindex, mtu, hard_header_len)
        self.count += 1
        self.desc[1] = self.count
        return self.count - 1

    def mac(self, row: int) -> bytes:
        return bytes(self.rows[row].view(np.uint8)[DEV_MAC:DEV_MAC + 6])


def _nothing() -> None:
    pass


class FibDevice:
    """The part of a network device routing needs.

    ``forwarding``/``forwarding6`` are ``net.ipv4.conf.<dev>.forwarding`` and
    ``net.ipv6.conf.<dev>.forwarding``. ``hard_header_len`` is the L2 header
    ``bpf_check_mtu`` adds to the MTU (14 for Ethernet and loopback). The MTU,
    ``hard_header_len``, MAC and the up/forwarding/loopback bits live in the
    namespace's :class:`DevTable` (row ``row``); ``addresses`` change through
    :meth:`Fib.add_address`.
    """

    def __init__(self, ifindex: int, name: str, mac: bytes = bytes(6), mtu: int = 1500,
                 up: bool = True, addresses: list[IPInterface] | None = None,
                 forwarding: bool = False, forwarding6: bool = False,
                 hard_header_len: int = ETH_HLEN, loopback: bool = False,
                 table: DevTable | None = None) -> None:
        self.ifindex = ifindex
        self.name = name
        self._addresses: list[IPInterface] = [] if addresses is None else list(addresses)
        self._table = DevTable() if table is None else table
        self.row = self._table.add(ifindex, mtu, hard_header_len)
        self.mac = mac
        self.up = up
        self.forwarding = forwarding
        self.forwarding6 = forwarding6
        self.loopback = loopback

    def _bit(self, bit: int) -> bool:
        return bool(self._table.rows[self.row, 3] & bit)

    def _set_bit(self, bit: int, on: bool) -> None:
        flags = int(self._table.rows[self.row, 3])
        self._table.rows[self.row, 3] = flags | bit if on else flags & ~bit

    @property
    def addresses(self) -> tuple[IPInterface, ...]:
        return tuple(self._addresses)

    def add_address(self, iface: IPInterface) -> None:
        self._addresses.append(iface)
        self._table.changed()

    @property
    def mtu(self) -> int:
        return int(self._table.rows[self.row, 1])

    @mtu.setter
    def mtu(self, value: int) -> None:
        self._table.rows[self.row, 1] = value
        self._table.changed()  # IPv6 comes and goes with an MTU of 1280

    @property
    def hard_header_len(self) -> int:
        return int(self._table.rows[self.row, 2])

    @hard_header_len.setter
    def hard_header_len(self, value: int) -> None:
        self._table.rows[self.row, 2] = value

    @property
    def mac(self) -> bytes:
        return self._table.mac(self.row)

    @mac.setter
    def mac(self, value: bytes) -> None:
        self._table.rows[self.row].view(np.uint8)[DEV_MAC:DEV_MAC + 6] = \
            np.frombuffer(bytes(value), np.uint8)

    @property
    def up(self) -> bool:
        return self._bit(DF_UP)

    @up.setter
    def up(self, value: bool) -> None:
        self._set_bit(DF_UP, value)
        self._table.changed()  # a device that is down carries no routes

    @property
    def forwarding(self) -> bool:
        return self._bit(DF_FORWARDING)

    @forwarding.setter
    def forwarding(self, value: bool) -> None:
        self._set_bit(DF_FORWARDING, value)

    @property
    def forwarding6(self) -> bool:
        return self._bit(DF_FORWARDING6)

    @forwarding6.setter
    def forwarding6(self, value: bool) -> None:
        self._set_bit(DF_FORWARDING6, value)
        self._table.changed()  # a router's subnet-router anycast routes

    @property
    def loopback(self) -> bool:
        return self._bit(DF_LOOPBACK)

    @loopback.setter
    def loopback(self, value: bool) -> None:
        self._set_bit(DF_LOOPBACK, value)
        self._table.changed()

    def __repr__(self) -> str:
        return (f"FibDevice(ifindex={self.ifindex}, name={self.name!r}, mtu={self.mtu}, "
                f"up={self.up}, addresses={list(self.addresses)})")

    def addresses_of(self, family: int) -> list[IPInterface]:
        version = 4 if family == AF_INET else 6
        return [a for a in self.addresses if a.version == version]

    @property
    def has_ipv6(self) -> bool:
        """An ``inet6_dev`` exists: IPv6 is torn down on a device whose MTU is below 1280."""
        return self.mtu >= IPV6_MIN_MTU


@dataclass(eq=False, frozen=True)
class Route:
    """One FIB entry (``ip route``): ``dev`` is the next hop's ifindex (0: none)."""

    prefix: IPNetwork
    type: RouteType = RouteType.UNICAST
    gateway: IPAddress | None = None
    dev: int = 0
    metric: int = 0
    table: int = RT_TABLE_MAIN
    mtu: int = 0
    mtu_lock: bool = False
    prefsrc: IPAddress | None = None
    scope: int = RT_SCOPE_UNIVERSE
    kernel: bool = False  # derived from an address ("proto kernel")

    @property
    def family(self) -> int:
        return AF_INET if self.prefix.version == 4 else AF_INET6

    def __str__(self) -> str:
        kind = "" if self.type == RouteType.UNICAST else self.type.name.lower() + " "
        via = f" via {self.gateway}" if self.gateway is not None else ""
        dev = f" dev {self.dev}" if self.dev else ""
        table = "" if self.table == RT_TABLE_MAIN else f" table {self.table}"
        return f"{kind}{self.prefix}{via}{dev} metric {self.metric}{table}"


@dataclass(eq=False, frozen=True)
class Neighbour:
    """A neighbour table entry (``ip neigh``)."""

    address: IPAddress
    dev: int
    mac: bytes
    state: Nud = Nud.PERMANENT


@dataclass(frozen=True)
class Rule:
    """A policy routing rule (``ip rule``): packets whose mark matches look up ``table``."""

    priority: int
    table: int
    fwmark: int = 0
    fwmask: int = 0

    def matches(self, mark: int) -> bool:
        return ((self.fwmark ^ mark) & self.fwmask) == 0


_DEFAULT_RULES4 = (Rule(0, RT_TABLE_LOCAL), Rule(32766, RT_TABLE_MAIN),
                   Rule(32767, RT_TABLE_DEFAULT))
_DEFAULT_RULES6 = (Rule(0, RT_TABLE_LOCAL), Rule(32766, RT_TABLE_MAIN))


# -- struct bpf_fib_lookup ----------------------------------------------------------------

class FibLookup:
    """``struct bpf_fib_lookup`` (64 bytes) over a bytearray, field by field.

    Offsets: family 0, l4_protocol 1, sport 2, dport 4, tot_len/mtu_result 6
    (u16), ifindex 8, tos/flowinfo/rt_metric 12, src 16, dst 32,
    h_vlan_proto/h_vlan_TCI/tbid 48, mark/smac 52, dmac 58.
    """

    def __init__(self, raw: bytes | bytearray | None = None) -> None:
        self.raw = bytearray(raw if raw is not None else bytes(FIB_LOOKUP_SIZE))
        if len(self.raw) < FIB_LOOKUP_SIZE:
            self.raw.extend(bytes(FIB_LOOKUP_SIZE - len(self.raw)))

    def _u(self, fmt: str, off: int) -> int:
        value: int = struct.unpack_from(fmt, self.raw, off)[0]
        return value

    @property
    def family(self) -> int:
        return self.raw[0]

    @family.setter
    def family(self, v: int) -> None:
        self.raw[0] = v & 0xFF

    @property
    def tot_len(self) -> int:
        return self._u("<H", 6)

    @tot_len.setter
    def tot_len(self, v: int) -> None:
        # mtu_result shares tot_len's u16: an MTU of 65536 reads back as 0.
        struct.pack_into("<H", self.raw, 6, v & 0xFFFF)

    mtu_result = tot_len

    @property
    def ifindex(self) -> int:
        return self._u("<I", 8)

    @ifindex.setter
    def ifindex(self, v: int) -> None:
        struct.pack_into("<I", self.raw, 8, v & 0xFFFF_FFFF)

    @property
    def tos(self) -> int:
        return self.raw[12]

    @property
    def rt_metric(self) -> int:
        return self._u("<I", 12)

    @rt_metric.setter
    def rt_metric(self, v: int) -> None:
        struct.pack_into("<I", self.raw, 12, v & 0xFFFF_FFFF)

    def src(self, family: int) -> IPAddress:
        n = 4 if family == AF_INET else 16
        return _addr(bytes(self.raw[16:16 + n]))

    def set_src(self, a: IPAddress) -> None:
        self.raw[16:16 + len(a.packed)] = a.packed

    def dst(self, family: int) -> IPAddress:
        n = 4 if family == AF_INET else 16
        return _addr(bytes(self.raw[32:32 + n]))

    def set_dst(self, a: IPAddress) -> None:
        self.raw[32:32 + len(a.packed)] = a.packed

    @property
    def tbid(self) -> int:
        return self._u("<I", 48)

    @tbid.setter
    def tbid(self, v: int) -> None:
        struct.pack_into("<I", self.raw, 48, v & 0xFFFF_FFFF)

    def clear_vlan(self) -> None:
        self.raw[48:52] = bytes(4)

    @property
    def mark(self) -> int:
        return self._u("<I", 52)

    @property
    def smac(self) -> bytes:
        return bytes(self.raw[52:58])

    @smac.setter
    def smac(self, v: bytes) -> None:
        self.raw[52:58] = v

    @property
    def dmac(self) -> bytes:
        return bytes(self.raw[58:64])

    @dmac.setter
    def dmac(self, v: bytes) -> None:
        self.raw[58:64] = v


# -- IPv6 address classes (ipv6_addr_type, addrlabel) ------------------------------------

_LL = ipaddress.IPv6Network("fe80::/10")
_MC = ipaddress.IPv6Network("ff00::/8")
_LOOP6 = ipaddress.IPv6Address("::1")
_SITE = ipaddress.IPv6Network("fec0::/10")

# The default address label table of net/ipv6/addrlabel.c (RFC 6724).
_LABELS6: tuple[tuple[ipaddress.IPv6Network, int], ...] = tuple(
    (ipaddress.IPv6Network(p), label) for p, label in (
        ("::1/128", 0), ("::/96", 3), ("::ffff:0:0/96", 4), ("2001::/32", 6),
        ("2001:10::/28", 7), ("2002::/16", 2), ("3ffe::/16", 12), ("fc00::/7", 5),
        ("fec0::/10", 11), ("::/0", 1)))


def _rt6_need_strict(a: ipaddress.IPv6Address) -> bool:
    """``rt6_need_strict``: multicast, link-local and loopback are never forwarded."""
    return a in _MC or a in _LL or a == _LOOP6


def _scope6(a: ipaddress.IPv6Address) -> int:
    """``__ipv6_addr_src_scope`` of ``ipv6_addr_type``: 1 node, 2 link, 5 site, 14 global."""
    if a in _MC:
        return a.packed[1] & 0x0F
    if a == _LOOP6:
        return 1
    if a in _LL:
        return 2
    if a in _SITE:
        return 5
    return 14


def _label6(a: ipaddress.IPv6Address) -> int:
    best = max((p for p, _ in _LABELS6 if a in p), key=lambda p: p.prefixlen)
    return dict(_LABELS6)[best]


def _common_prefix(a: IPAddress, b: IPAddress) -> int:
    x = int(a) ^ int(b)
    return a.max_prefixlen - x.bit_length()


# -- the FIB as lookups read it: route, neighbour and table rows ------------------------------

# A route row (native code reads these fields at their dtype offsets). ``pfx``/``mask``
# are the prefix and its netmask as four uint32 of the address bytes (16 bytes; an IPv4
# one in the first word), so a match is ``key & mask == pfx`` word by word; ``src`` is
# the source BPF_FIB_LOOKUP_SRC writes (IPv4: the route's preferred source or
# ``inet_select_addr``'s; IPv6: the preferred source when RF_SRC); ``devrow`` the
# output device's DevTable row; ``gwfam`` the gateway's family (0: none).
ROUTE_ROW = np.dtype([("pfx", "<u4", (4,)), ("mask", "<u4", (4,)), ("gw", "u1", (16,)),
                      ("src", "u1", (16,)), ("table", "<u4"), ("dev", "<u4"),
                      ("devrow", "<u4"), ("metric", "<u4"), ("mtu", "<u4"), ("plen", "u1"),
                      ("type", "u1"), ("gwfam", "u1"), ("flags", "u1")])
RF_USABLE, RF_MTU_LOCK, RF_SRC = 1, 2, 4
# A neighbour row: its address (as a route's key words), device, family, NUD_VALID, MAC.
NEIGH_ROW = np.dtype([("addr", "<u4", (4,)), ("dev", "<u4"), ("fam", "u1"), ("valid", "u1"),
                      ("mac", "u1", (6,))])
# The words native code finds the rows by (DevTable.desc[2] points at them): ``stale``,
# the configuration changed since the last build (the next lookup builds anew, in
# Python); ``build``, the address of the current build's BUILD_WORDS (one load gives a
# consistent set); ``flags``, FD_USE_PMTU.
FIB_DESC = ("stale", "build", "flags")
FD = {name: i for i, name in enumerate(FIB_DESC)}
BUILD_WORDS = ("routes4", "nroutes4", "routes6", "nroutes6", "neigh", "nneigh", "tables4",
               "ntables4", "tables6", "ntables6", "rules")
BW = {name: i for i, name in enumerate(BUILD_WORDS)}
FD_USE_PMTU = 4
# BUILD_WORDS "rules": policy rules beyond the defaults exist (per family).
BR_CUSTOM4, BR_CUSTOM6 = 1, 2


def field_offsets(dtype: np.dtype) -> dict[str, int]:
    """A row type's field byte offsets (what native code reads the rows at)."""
    assert dtype.fields is not None
    return {name: int(spec[1]) for name, spec in dtype.fields.items()}


def _key(a: IPAddress) -> npt.NDArray[np.uint32]:
    """An address as the four key words rows compare (zero-padded)."""
    return np.frombuffer(a.packed.ljust(16, b"\0"), "<u4")


@dataclass
class FibRows:
    """One build of the lookup rows from the configuration (``routes4``/``routes6`` in
    the order lookups try them, with the :class:`Route` each row was made from)."""

    routes4: npt.NDArray[np.void]
    routes6: npt.NDArray[np.void]
    neigh: npt.NDArray[np.void]
    tables4: npt.NDArray[np.uint32]
    tables6: npt.NDArray[np.uint32]
    objs4: list[Route]
    objs6: list[Route]
    words: npt.NDArray[np.uint64]

    def matches(self, rows: npt.NDArray[np.void], table: Iterable[int], dst: IPAddress
                ) -> npt.NDArray[np.intp]:
        """Indices of the usable rows of ``table`` whose prefix holds ``dst``, in order."""
        hit = np.isin(rows["table"], list(table)) & ((rows["flags"] & RF_USABLE) != 0)
        hit &= ((_key(dst) & rows["mask"]) == rows["pfx"]).all(axis=1)
        return np.flatnonzero(hit)


# -- native scans of the rows ------------------------------------------------------------

def rows_ir() -> str:
    """LLVM IR of the table scans native lookups call (``bpf_fib_lookup``'s twin in
    :mod:`pyxdp.net.filter`, the stack's input route in :mod:`pyxdp.net.route`), over
    the rows of :meth:`Fib.rows` (the ones the Python lookups read)."""
    rs, ns, db = ROUTE_ROW.itemsize, NEIGH_ROW.itemsize, DEV_ROW_BYTES
    ro = field_offsets(ROUTE_ROW)
    no = field_offsets(NEIGH_ROW)
    bw = {k: 8 * v for k, v in BW.items()}

    def words_eq(row: str, field: int, key: str, masked: bool, tag: str) -> str:
        """IR: %<tag> = the 4 key words equal the row's (under its mask when ``masked``)."""
        lines, prev = [], "true"
        for w in range(4):
            lines += [f"  %{tag}k{w}p = getelementptr i8, ptr {key}, i64 {4 * w}",
                      f"  %{tag}k{w} = load i32, ptr %{tag}k{w}p, align 4",
                      f"  %{tag}p{w}p = getelementptr i8, ptr {row}, i64 {field + 4 * w}",
                      f"  %{tag}p{w} = load i32, ptr %{tag}p{w}p, align 1"]
            k = f"%{tag}k{w}"
            if masked:
                lines += [f"  %{tag}m{w}p = getelementptr i8, ptr {row}, i64 {ro['mask'] + 4 * w}",
                          f"  %{tag}m{w} = load i32, ptr %{tag}m{w}p, align 1",
                          f"  %{tag}a{w} = and i32 %{tag}k{w}, %{tag}m{w}"]
                k = f"%{tag}a{w}"
            lines += [f"  %{tag}e{w} = icmp eq i32 {k}, %{tag}p{w}",
                      f"  %{tag}c{w} = and i1 {prev}, %{tag}e{w}"]
            prev = f"%{tag}c{w}"
        lines.append(f"  %{tag} = and i1 {prev}, true")
        return "\n".join(lines)

    def row_at(words: str, rows_word: str, n_word: str) -> str:
        return (f"  %rp = getelementptr i8, ptr {words}, i64 {bw[rows_word]}\n"
                f"  %rows = load ptr, ptr %rp, align 8\n"
                f"  %np = getelementptr i8, ptr {words}, i64 {bw[n_word]}\n"
                f"  %n = load i64, ptr %np, align 8\n")

    def scan(stride: str) -> str:
        """The head of a walk over the rows ``row_at`` loaded: ``%row`` is row ``%i``
        (``stride`` bytes apart) in block body, block none when they are done; the
        walk's block next increments ``%i1``."""
        return ("  br label %head\n"
                "head:\n"
                "  %i = phi i64 [ 0, %entry ], [ %i1, %next ]\n"
                "  %more = icmp ult i64 %i, %n\n"
                "  br i1 %more, label %body, label %none\n"
                "body:\n"
                f"  %off = mul i64 %i, {stride}\n"
                "  %row = getelementptr i8, ptr %rows, i64 %off\n")

    usable = (f"  %tp = getelementptr i8, ptr %row, i64 {ro['table']}\n"
              f"  %tab = load i32, ptr %tp, align 1\n"
              f"  %fp = getelementptr i8, ptr %row, i64 {ro['flags']}\n"
              f"  %fl = load i8, ptr %fp, align 1\n"
              f"  %u = and i8 %fl, {RF_USABLE}\n"
              f"  %us = icmp ne i8 %u, 0\n")
    dev = (f"  %dvp = getelementptr i8, ptr %row, i64 {ro['dev']}\n"
           f"  %dev = load i32, ptr %dvp, align 1\n"
           f"  %hasoif = icmp ne i32 %oif, 0\n"
           f"  %other = icmp ne i32 %dev, %oif\n"
           f"  %skipdev = and i1 %hasoif, %other\n")
    return f"""
; The index of the row whose first u32 is %x in the table %tab points at (its rows'
; address, then their count; rows %stride bytes apart), or -1.
define internal i64 @fib_find(ptr %tab, i64 %stride, i32 %x) nounwind {{
entry:
  %rows = load ptr, ptr %tab, align 8
  %np = getelementptr i8, ptr %tab, i64 8
  %n = load i64, ptr %np, align 8
{scan('%stride')}
  %y = load i32, ptr %row, align 4
  %eq = icmp eq i32 %y, %x
  br i1 %eq, label %found, label %next
next:
  %i1 = add i64 %i, 1
  br label %head
found:
  ret i64 %i
none:
  ret i64 -1
}}

define internal i64 @fib_dev(ptr %devs, i32 %ifx) nounwind {{
  %r = call i64 @fib_find(ptr %devs, i64 {db}, i32 %ifx)
  ret i64 %r
}}

define internal i1 @fib_has_table(ptr %words, i64 %which, i32 %t) nounwind {{
  %wp = getelementptr i8, ptr %words, i64 %which
  %r = call i64 @fib_find(ptr %wp, i64 4, i32 %t)
  %has = icmp sge i64 %r, 0
  ret i1 %has
}}

; fib_table_lookup over the IPv4 rows of tables t1/t2: the row, or -1..-3 for a
; blackhole/unreachable/prohibit route, -4 for a throw route or no match (-EAGAIN).
define internal i64 @fib_scan4(ptr %words, ptr %key, i32 %t1, i32 %t2, i32 %oif) nounwind {{
entry:
{row_at("%words", "routes4", "nroutes4")}{scan(str(rs))}{usable}
  %a = icmp eq i32 %tab, %t1
  %b = icmp eq i32 %tab, %t2
  %ab = or i1 %a, %b
  %ok = and i1 %ab, %us
  br i1 %ok, label %mt, label %next
mt:
{words_eq("%row", ro["pfx"], "%key", True, "m")}
  br i1 %m, label %cand, label %next
cand:
  %typ = getelementptr i8, ptr %row, i64 {ro['type']}
  %ty = load i8, ptr %typ, align 1
  %rj = sub i8 %ty, {int(RouteType.BLACKHOLE)}
  %isrj = icmp ult i8 %rj, 4
  br i1 %isrj, label %rej, label %chk
rej:
  %code = zext i8 %rj to i64
  %neg = sub i64 -1, %code
  ret i64 %neg
chk:
{dev}  br i1 %skipdev, label %next, label %hit
hit:
  ret i64 %i
next:
  %i1 = add i64 %i, 1
  br label %head
none:
  ret i64 -4
}}

; fib6_table_lookup over the IPv6 rows of table t: the row, or -1 (the null entry).
define internal i64 @fib_scan6(ptr %words, ptr %key, i32 %t, i32 %oif) nounwind {{
entry:
{row_at("%words", "routes6", "nroutes6")}  br label %head
head:
  %i = phi i64 [ 0, %entry ], [ %i1, %next ]
  %best = phi i64 [ -1, %entry ], [ %best2, %next ]
  %grp = phi i64 [ -1, %entry ], [ %grp2, %next ]
  %more = icmp ult i64 %i, %n
  br i1 %more, label %body, label %done
body:
  %off = mul i64 %i, {rs}
  %row = getelementptr i8, ptr %rows, i64 %off
{usable}  %a = icmp eq i32 %tab, %t
  %ok = and i1 %a, %us
  br i1 %ok, label %mt, label %skip
mt:
{words_eq("%row", ro["pfx"], "%key", True, "m")}
  br i1 %m, label %cand, label %skip
cand:
  %plp = getelementptr i8, ptr %row, i64 {ro['plen']}
  %pl8 = load i8, ptr %plp, align 1
  %pl = zext i8 %pl8 to i64
  %mep = getelementptr i8, ptr %row, i64 {ro['metric']}
  %me32 = load i32, ptr %mep, align 1
  %me = zext i32 %me32 to i64
  %plh = shl i64 %pl, 32
  %g = or i64 %plh, %me
  %hb = icmp sge i64 %best, 0
  %gd = icmp ne i64 %g, %grp
  %end = and i1 %hb, %gd
  br i1 %end, label %done, label %pick
pick:
{dev}  br i1 %skipdev, label %keep, label %hit
keep:
  %nb = select i1 %hb, i64 %best, i64 %i
  %ng = select i1 %hb, i64 %grp, i64 %g
  br label %next
skip:
  br label %next
next:
  %best2 = phi i64 [ %best, %skip ], [ %nb, %keep ]
  %grp2 = phi i64 [ %grp, %skip ], [ %ng, %keep ]
  %i1 = add i64 %i, 1
  br label %head
hit:
  ret i64 %i
done:
  ret i64 %best
}}

; The neighbour row of (dev, family, address), or null.
define internal ptr @fib_neigh(ptr %words, ptr %key, i32 %dev, i8 %fam) nounwind {{
entry:
{row_at("%words", "neigh", "nneigh")}{scan(str(ns))}
  %dp = getelementptr i8, ptr %row, i64 {no['dev']}
  %d = load i32, ptr %dp, align 1
  %fp = getelementptr i8, ptr %row, i64 {no['fam']}
  %f = load i8, ptr %fp, align 1
  %de = icmp eq i32 %d, %dev
  %fe = icmp eq i8 %f, %fam
  %ok = and i1 %de, %fe
  br i1 %ok, label %mt, label %next
mt:
{words_eq("%row", no["addr"], "%key", False, "m")}
  br i1 %m, label %found, label %next
found:
  ret ptr %row
next:
  %i1 = add i64 %i, 1
  br label %head
none:
  ret ptr null
}}
"""



# -- the model ---------------------------------------------------------------------------

# include/linux/proc_ns.h: init_net's ns.inum (other namespaces get dynamic ones).
PROC_NET_INIT_INO = 0xEFFFFFF9


class Fib:
    """Devices, routes, rules and neighbours of one network namespace.

    A new :class:`Fib` is a fresh namespace with its loopback device up
    (``lo``, ifindex 1, 127.0.0.1/8 and ::1/128) and forwarding disabled,
    as a new Linux network namespace has it (``net.ipv4.conf.all.forwarding
    = 0``). Typical use, through a test run's environment::

        env.fib.add_device(2, "eth0", mac="02:00:00:00:00:01",
                           addresses=["10.0.0.1/24", "2001:db8::1/64"])
        env.fib.set_forwarding(True)
        env.fib.add_route("10.1.0.0/16", via="10.0.0.254")
        env.fib.add_route("10.9.0.0/16", type="blackhole")
        env.fib.add_neighbour("10.0.0.254", "02:00:00:00:00:fe", dev=2)
    """

    def __init__(self, *, loopback: bool = True) -> None:
        self.devices: dict[int, FibDevice] = {}
        # The devices' MTUs and header lengths (bpf_check_mtu's, Python and native).
        self.l2 = DevTable()
        self.routes: list[Route] = []
        self.neighbours: dict[tuple[int, IPAddress], Neighbour] = {}
        self.rules4: list[Rule] = list(_DEFAULT_RULES4)
        self.rules6: list[Rule] = list(_DEFAULT_RULES6)
        self.custom_rules4 = False
        self.custom_rules6 = False
        # net.ipv4.conf.default.forwarding / net.ipv6.conf.default.forwarding.
        self.default_forwarding = False
        self.default_forwarding6 = False
        # The lookup rows' words (native code's view, through l2.desc[2]) and the rows.
        self.fib_desc: npt.NDArray[np.uint64] = np.zeros(len(FIB_DESC), np.uint64)
        self.fib_desc[FD["stale"]] = 1
        self.l2.desc[2] = self.fib_desc.ctypes.data
        self.l2.changed = self._changed
        self._rows: FibRows | None = None
        self._generation = 0  # configuration changes so far (a build outrun stays stale)
        # Every build stays alive: native code on another CPU may still read an old one.
        self._built: list[FibRows] = []
        # Its sockets (what bpf_sk_lookup_* find; a Host's stack adds its UDP sockets).
        self.sockets = SockTable()
        # struct net's ns.inum (/proc/self/ns/net's number): the initial namespace's
        # fixed one, as a program run in the loading process's namespace reads it.
        self.inum = PROC_NET_INIT_INO
        # Tables that exist (the kernel creates one with its first route and
        # never frees it); local and main always exist.
        self._tables = {AF_INET: {RT_TABLE_MAIN, RT_TABLE_LOCAL},
                        AF_INET6: {RT_TABLE_MAIN, RT_TABLE_LOCAL}}
        if loopback:
            self.add_device(LOOPBACK_IFINDEX, "lo", mtu=65536, loopback=True,
                            addresses=["127.0.0.1/8", "::1/128"])

    # The tables below are made on first use: most namespaces never see a conntrack,
    # IPsec or flowtable lookup, and their models' modules are not loaded until one does.
    @cached_property
    def conntrack(self) -> NfConntrack:
        """The namespace's connection tracking table (the conntrack kfuncs' and
        conntrack -L's): the namespace a run sees is its Fib."""
        from pyxdp.net.nf_conntrack import NfConntrack

        return NfConntrack()

    @cached_property
    def xfrm(self) -> XfrmStateTable:
        """Its IPsec states (what bpf_xdp_get_xfrm_state finds)."""
        from pyxdp.net.xfrm_state import XfrmStateTable

        return XfrmStateTable()

    @cached_property
    def flowtables(self) -> NfFlowtables:
        """Its netfilter flowtables (what bpf_xdp_flow_lookup finds, by receiving device)."""
        from pyxdp.net.nf_flow_table import NfFlowtables

        return NfFlowtables()

    @property
    def ip_forward_use_pmtu(self) -> bool:
        """``net.ipv4.ip_forward_use_pmtu``: route MTUs count even when not locked."""
        return bool(int(self.fib_desc[FD["flags"]]) & FD_USE_PMTU)

    @ip_forward_use_pmtu.setter
    def ip_forward_use_pmtu(self, value: bool) -> None:
        flags = int(self.fib_desc[FD["flags"]])
        self.fib_desc[FD["flags"]] = flags | FD_USE_PMTU if value else flags & ~FD_USE_PMTU

    def _changed(self) -> None:
        """The configuration changed: the lookup rows are made anew before the next lookup."""
        self._generation += 1
        self.fib_desc[FD["stale"]] = 1

    # -- configuration ------------------------------------------------------------------
    def add_device(self, ifindex: int | None = None, name: str = "", *,
                   mac: bytes | str = bytes(6), mtu: int = 1500, up: bool = True,
                   addresses: Iterable[str | IPInterface] = (),
                   forwarding: bool | None = None, forwarding6: bool | None = None,
                   hard_header_len: int = ETH_HLEN, loopback: bool = False) -> FibDevice:
        """A new device; ``forwarding`` defaults to ``net.ipv{4,6}.conf.default.forwarding``."""
        if ifindex is None:
            ifindex = max(self.devices, default=0) + 1
        if ifindex <= 0 or ifindex in self.devices:
            raise FibError(errno.EEXIST, f"ifindex {ifindex} is taken or invalid")
        name = name or f"dev{ifindex}"
        if any(d.name == name for d in self.devices.values()):
            raise FibError(errno.EEXIST, f"a device is already named {name!r}")
        dev = FibDevice(ifindex, name, parse_mac(mac), mtu, up, [],
                        self.default_forwarding if forwarding is None else forwarding,
                        self.default_forwarding6 if forwarding6 is None else forwarding6,
                        hard_header_len, loopback, self.l2)
        self.devices[ifindex] = dev
        self._changed()
        for a in addresses:
            self.add_address(ifindex, a)
        return dev

    def device(self, dev: int | str) -> FibDevice:
        """A device by ifindex or name; :class:`FibError` (ENODEV) when there is none."""
        if isinstance(dev, int):
            found = self.devices.get(dev)
        else:
            found = next((d for d in self.devices.values() if d.name == dev), None)
        if found is None:
            raise FibError(errno.ENODEV, f"no device {dev!r}")
        return found

    def add_address(self, dev: int | str, address: str | IPInterface) -> None:
        """``ip addr add``: the address, and (device up) its local and prefix routes."""
        d = self.device(dev)
        iface = ipaddress.ip_interface(address)
        if any(a.ip == iface.ip for a in d.addresses):
            raise FibError(errno.EEXIST, f"{iface.ip} is already on {d.name}")
        d.add_address(iface)

    def set_forwarding(self, enabled: bool = True, family: int | None = None) -> None:
        """Write ``net.ipv4.conf.all.forwarding`` (and/or IPv6's): every device and the default.

        ``family`` is ``AF_INET``, ``AF_INET6`` or None for both.
        """
        for d in self.devices.values():
            if family in (None, AF_INET):
                d.forwarding = enabled
            if family in (None, AF_INET6):
                d.forwarding6 = enabled
        if family in (None, AF_INET):
            self.default_forwarding = enabled
        if family in (None, AF_INET6):
            self.default_forwarding6 = enabled

    def add_route(self, prefix: str | IPNetwork, *, dev: int | str | None = None,
                  via: str | IPAddress | None = None, type: str | RouteType = "unicast",
                  metric: int | None = None, table: int = RT_TABLE_MAIN, mtu: int = 0,
                  mtu_lock: bool = False, src: str | IPAddress | None = None,
                  onlink: bool = False) -> Route:
        """``ip route add``: the route, with the kernel's checks.

        ``via`` without ``dev`` takes the device of the connected route that
        reaches the gateway (an IPv4 route may have an IPv6 gateway, the
        kernel's ``via inet6``). The metric defaults to 0 for IPv4 and 1024
        for IPv6, as ``ip route`` leaves it. Reject types (``blackhole``,
        ``unreachable``, ``prohibit``, ``throw``) take no device.
        """
        net = ipaddress.ip_network(prefix, strict=False)
        family = AF_INET if net.version == 4 else AF_INET6
        rtype = RouteType[type.upper()] if isinstance(type, str) else RouteType(type)
        gw = _addr(via) if via is not None else None
        ifindex = self.device(dev).ifindex if dev is not None else 0
        if rtype in _REJECT:
            if gw is not None:
                raise FibError(errno.EINVAL, f"a {rtype.name.lower()} route has no gateway")
            # IPv6 hangs reject routes on the loopback device.
            ifindex = LOOPBACK_IFINDEX if family == AF_INET6 else 0
        else:
            if gw is not None and not ifindex:
                ifindex = self._connected_dev(gw)
            if not ifindex:
                raise FibError(errno.ENODEV, f"route {net}: no device (give dev= or a "
                                             "gateway a connected route reaches)")
            d = self.device(ifindex)
            if not d.up:
                raise FibError(errno.ENETDOWN, f"route {net}: device {d.name} is down")
            if (gw is not None and not onlink and gw.version == net.version
                    and self._connected_dev(gw, ifindex) != ifindex):
                raise FibError(errno.ENETUNREACH, f"route {net}: gateway {gw} is not on "
                                                  f"{d.name}'s networks (onlink=True skips this)")
        if metric is None:
            metric = IP6_RT_PRIO_USER if family == AF_INET6 else 0
        scope = RT_SCOPE_UNIVERSE if gw is not None or rtype in _REJECT else RT_SCOPE_LINK
        route = Route(net, rtype, gw, ifindex, metric, table, mtu, mtu_lock,
                      _addr(src) if src is not None else None, scope)
        for r in self.routes:
            # "ip route add" is NLM_F_EXCL: no second route of this prefix and metric
            # in the table (no multipath here).
            if r.prefix == net and r.table == table and r.metric == metric:
                raise FibError(errno.EEXIST, f"route {route} exists")
        self.routes.append(route)
        self._tables[family].add(table)
        self._changed()
        return route

    def delete_route(self, prefix: str | IPNetwork, *, table: int = RT_TABLE_MAIN,
                     metric: int | None = None) -> None:
        """``ip route del``: the first route with this prefix (and metric) in ``table``."""
        net = ipaddress.ip_network(prefix, strict=False)
        for r in self.routes:
            if r.prefix == net and r.table == table and metric in (None, r.metric):
                self.routes.remove(r)
                self._changed()
                return
        raise FibError(errno.ESRCH, f"no route {net} in table {table}")

    def add_neighbour(self, address: str | IPAddress, mac: bytes | str, *, dev: int | str,
                      state: str | Nud = Nud.PERMANENT) -> Neighbour:
        """``ip neigh replace``: ``state`` by name (``"stale"``) or :class:`Nud` value."""
        d = self.device(dev)
        nud = Nud[state.upper()] if isinstance(state, str) else Nud(state)
        n = Neighbour(_addr(address), d.ifindex, parse_mac(mac), nud)
        self.neighbours[(d.ifindex, n.address)] = n
        self._changed()
        return n

    def add_rule(self, table: int, *, priority: int | None = None, fwmark: int | None = None,
                 fwmask: int = 0xFFFF_FFFF, family: int = AF_INET) -> Rule:
        """``ip rule add [fwmark M[/MASK]] table T [priority P]``.

        Without a priority the rule goes just before the first rule after
        priority 0 (32765 first), as the kernel numbers it. Adding a rule
        splits IPv4's merged local/main trie, as ``fib_unmerge`` does.
        """
        rules = self.rules4 if family == AF_INET else self.rules6
        if priority is None:
            later = [r.priority for r in rules if r.priority > 0]
            priority = min(later) - 1 if later else 0
        rule = Rule(priority, table, fwmark or 0, fwmask if fwmark is not None else 0)
        pos = next((i for i, r in enumerate(rules) if r.priority > priority), len(rules))
        rules.insert(pos, rule)
        if family == AF_INET:
            self.custom_rules4 = True
        else:
            self.custom_rules6 = True
        self._changed()
        return rule

    # -- derived state -----------------------------------------------------------------------
    def _connected_dev(self, gw: IPAddress, prefer: int = 0) -> int:
        """The device of a connected (address) route reaching ``gw``; 0 when none."""
        found = 0
        for d in self.devices.values():
            if not d.up:
                continue
            for a in d.addresses:
                if a.version == gw.version and gw in a.network and a.network.prefixlen < \
                        a.max_prefixlen:
                    if d.ifindex == prefer:
                        return prefer
                    found = found or d.ifindex
        return found

    def kernel_routes(self, family: int) -> Iterator[Route]:
        """The routes the kernel derives from the addresses of the devices that are up."""
        seen: set[tuple[int, IPNetwork, RouteType]] = set()

        def once(r: Route) -> Iterator[Route]:
            key = (r.table, r.prefix, r.type)
            if key not in seen:
                seen.add(key)
                yield r

        for d in self.devices.values():
            if not d.up or (family == AF_INET6 and not d.has_ipv6):
                continue
            for a in d.addresses_of(family):
                host = ipaddress.ip_network(a.ip)
                if family == AF_INET:
                    yield from once(Route(host, RouteType.LOCAL, None, d.ifindex, 0,
                                          RT_TABLE_LOCAL, prefsrc=a.ip, scope=RT_SCOPE_HOST,
                                          kernel=True))
                    if a.network.prefixlen < 32:
                        if d.loopback:
                            yield from once(Route(a.network, RouteType.LOCAL, None, d.ifindex,
                                                  0, RT_TABLE_LOCAL, prefsrc=a.ip,
                                                  scope=RT_SCOPE_HOST, kernel=True))
                        else:
                            yield from once(Route(a.network, RouteType.UNICAST, None,
                                                  d.ifindex, 0, RT_TABLE_MAIN, prefsrc=a.ip,
                                                  scope=RT_SCOPE_LINK, kernel=True))
                    if a.network.prefixlen < 31:
                        bcast = ipaddress.ip_network(a.network.broadcast_address)
                        yield from once(Route(bcast, RouteType.BROADCAST, None, d.ifindex, 0,
                                              RT_TABLE_LOCAL, prefsrc=a.ip,
                                              scope=RT_SCOPE_LINK, kernel=True))
                else:
                    yield from once(Route(host, RouteType.LOCAL, None, d.ifindex, 0,
                                          RT_TABLE_LOCAL, kernel=True))
                    if d.loopback:
                        continue  # lo's ::1 gets no prefix route (init_loopback)
                    yield from once(Route(a.network, RouteType.UNICAST, None, d.ifindex,
                                          IP6_RT_PRIO_ADDRCONF, RT_TABLE_MAIN,
                                          scope=RT_SCOPE_LINK, kernel=True))
                    if d.forwarding6 and a.network.prefixlen < 127:
                        # A router joins its subnet-router anycast address
                        # (addrconf_join_anycast): type anycast, not forwarded.
                        anycast = ipaddress.ip_network(a.network.network_address)
                        yield from once(Route(anycast, RouteType.ANYCAST, None, d.ifindex, 0,
                                              RT_TABLE_LOCAL, kernel=True))

    def all_routes(self, family: int) -> list[Route]:
        """Derived routes first, then configured ones (the order ties are broken in)."""
        version = 4 if family == AF_INET else 6
        return list(self.kernel_routes(family)) + [r for r in self.routes
                                                   if r.prefix.version == version]

    def _usable(self, r: Route) -> bool:
        if r.type in _REJECT:
            return True
        d = self.devices.get(r.dev)
        return d is not None and d.up

    # -- the lookup rows ----------------------------------------------------------------
    def rows(self) -> FibRows:
        """The lookup rows, made anew when the configuration changed since the last build."""
        if self._rows is not None and not self.fib_desc[FD["stale"]]:
            return self._rows
        generation = self._generation
        # IPv4: longest prefix, then table local before main (the merged trie's alias
        # list), then metric; IPv6: longest prefix, then metric. Ties: derived routes
        # first, then in the order they were added.
        objs4 = sorted(self.all_routes(AF_INET),
                       key=lambda r: (-r.prefix.prefixlen, -r.table, r.metric))
        objs6 = sorted(self.all_routes(AF_INET6), key=lambda r: (-r.prefix.prefixlen, r.metric))
        neigh = np.zeros(len(self.neighbours), NEIGH_ROW)
        for i, n in enumerate(self.neighbours.values()):
            neigh[i] = (_key(n.address), n.dev, AF_INET if n.address.version == 4 else AF_INET6,
                        bool(n.state & NUD_VALID), np.frombuffer(n.mac, np.uint8))
        rows = FibRows(self._route_rows(objs4), self._route_rows(objs6), neigh,
                       np.array(sorted(self._tables[AF_INET]), np.uint32),
                       np.array(sorted(self._tables[AF_INET6]), np.uint32), objs4, objs6,
                       np.zeros(len(BUILD_WORDS), np.uint64))
        for name, arr in (("routes4", rows.routes4), ("routes6", rows.routes6),
                          ("neigh", rows.neigh), ("tables4", rows.tables4),
                          ("tables6", rows.tables6)):
            rows.words[BW[name]] = arr.ctypes.data
            rows.words[BW["n" + name]] = len(arr)
        rows.words[BW["rules"]] = (BR_CUSTOM4 if self.custom_rules4 else 0) | (
            BR_CUSTOM6 if self.custom_rules6 else 0)
        self._rows = rows
        self._built.append(rows)
        self.fib_desc[FD["build"]] = rows.words.ctypes.data
        if generation == self._generation:
            self.fib_desc[FD["stale"]] = 0
        return rows

    def native_desc(self) -> int:
        """The address of the DevTable's ``desc`` words native twins are given, the
        lookup rows behind them built (a run's set-up calls this, not a helper)."""
        if self.fib_desc[FD["stale"]]:
            self.rows()
        return int(self.l2.desc.ctypes.data)

    def _route_rows(self, routes: list[Route]) -> npt.NDArray[np.void]:
        out = np.zeros(max(len(routes), 1), ROUTE_ROW)[:len(routes)]
        for i, r in enumerate(routes):
            row = out[i]
            row["pfx"] = _key(r.prefix.network_address)
            row["mask"] = _key(r.prefix.netmask)
            if r.gateway is not None:
                row["gw"] = np.frombuffer(r.gateway.packed.ljust(16, b"\0"), np.uint8)
                row["gwfam"] = AF_INET if r.gateway.version == 4 else AF_INET6
            d = self.devices.get(r.dev)
            src: IPAddress | None = None
            if r.family == AF_INET and d is not None and r.type == RouteType.UNICAST:
                src = self.select_src4(r)
            elif r.family == AF_INET6:
                src = r.prefsrc
            if src is not None:
                row["src"] = np.frombuffer(src.packed.ljust(16, b"\0"), np.uint8)
            row["table"], row["dev"], row["metric"], row["mtu"] = r.table, r.dev, r.metric, r.mtu
            row["devrow"] = d.row if d is not None else 0xFFFF_FFFF
            row["plen"], row["type"] = r.prefix.prefixlen, int(r.type)
            row["flags"] = (RF_USABLE if self._usable(r) else 0) | (
                RF_MTU_LOCK if r.mtu_lock else 0) | (RF_SRC if src is not None else 0)
        return out

    # -- IPv4 lookup (net/ipv4/fib_trie.c, fib_rules.c) ------------------------------------
    def _table4(self, tables: set[int], dst: ipaddress.IPv4Address, oif: int
                ) -> tuple[int, int]:
        """``fib_table_lookup``: 0 and the route's row, or a negative errno (-EAGAIN: no
        match) and the row of the reject route that answered (-1: none)."""
        rows = self.rows()
        for i in rows.matches(rows.routes4, tables, dst):
            r = rows.routes4[i]
            err = _REJECT_ERROR.get(RouteType(int(r["type"])))
            if err is not None:
                return err, int(i)
            if oif and int(r["dev"]) != oif:
                continue  # fib_lookup_good_nhc: wrong output device, try on
            return 0, int(i)
        return _EAGAIN, -1

    def _merged(self, table: int) -> set[int]:
        if not self.custom_rules4 and table in (RT_TABLE_MAIN, RT_TABLE_LOCAL):
            return {RT_TABLE_MAIN, RT_TABLE_LOCAL}
        return {table}

    def lookup4(self, dst: ipaddress.IPv4Address, *, oif: int = 0, mark: int = 0,
                table: int | None = None) -> tuple[int, Route | None]:
        """``fib_lookup`` (``table=None``: through the rules) or ``fib_table_lookup``."""
        err, i = self._lookup4(dst, oif, mark, table)
        return err, self.rows().objs4[i] if i >= 0 else None

    def _lookup4(self, dst: ipaddress.IPv4Address, oif: int, mark: int, table: int | None
                 ) -> tuple[int, int]:
        tables = self.rows().tables4
        if table is not None:
            if table not in tables:
                return -errno.ENOENT, -1
            return self._table4(self._merged(table), dst, oif)
        if not self.custom_rules4:
            err, i = self._table4(self._merged(RT_TABLE_MAIN), dst, oif)
            if err and RT_TABLE_DEFAULT in tables:
                err, i = self._table4({RT_TABLE_DEFAULT}, dst, oif)
            return (-errno.ENETUNREACH if err == _EAGAIN else err), i
        for rule in self.rules4:
            if not rule.matches(mark):
                continue
            err, i = _EAGAIN, -1
            if rule.table in tables:
                err, i = self._table4({rule.table}, dst, oif)
            if err != _EAGAIN:
                return err, i
        return -errno.ESRCH, -1

    # -- IPv6 lookup (net/ipv6/route.c, fib6_rules.c) --------------------------------------
    def _table6(self, table: int, dst: ipaddress.IPv6Address, oif: int) -> int:
        """``fib6_table_lookup``: the route's row, or -1 for the null entry.

        Per prefix length and then metric, ``rt6_score_route`` prefers a next hop on the
        output device but excludes nothing: the first route of the first group
        with a usable one, unless a later one of that group is on ``oif``."""
        rows = self.rows()
        r6 = rows.routes6
        best, group = -1, (-1, -1)
        for i in rows.matches(r6, (table,), dst):
            key = (int(r6["plen"][i]), int(r6["metric"][i]))
            if best >= 0 and key != group:
                break
            if not oif or int(r6["dev"][i]) == oif:
                return int(i)
            if best < 0:
                best, group = int(i), key
        return best

    def lookup6(self, dst: ipaddress.IPv6Address, *, oif: int = 0, mark: int = 0,
                table: int | None = None) -> Route | None:
        """``fib6_lookup`` (``table=None``) or ``fib6_table_lookup`` of one table."""
        i = self._lookup6(dst, oif, mark, table)
        return self.rows().objs6[i] if i >= 0 else None

    def _lookup6(self, dst: ipaddress.IPv6Address, oif: int, mark: int, table: int | None
                 ) -> int:
        if table is not None:
            return self._table6(table, dst, oif)
        if not self.custom_rules6:
            i = self._table6(RT_TABLE_LOCAL, dst, oif)
            return i if i >= 0 else self._table6(RT_TABLE_MAIN, dst, oif)
        tables = self.rows().tables6
        for rule in self.rules6:
            if rule.matches(mark) and rule.table in tables:
                i = self._table6(rule.table, dst, oif)
                if i >= 0:
                    return i
        return -1

    # -- MTU, source address, neighbours ------------------------------------------------
    def route_mtu(self, r: Route) -> int:
        """``ip_mtu_from_fib_result`` / ``ip6_mtu_from_fib6``."""
        return self._mtu(self.devices[r.dev].mtu, r.family, r.mtu, r.mtu_lock)

    def _mtu(self, dev_mtu: int, family: int, mtu: int, lock: bool) -> int:
        if family == AF_INET:
            if (self.ip_forward_use_pmtu or lock) and mtu:
                return mtu
            return min(dev_mtu, IP_MAX_MTU)
        if lock and mtu:
            return mtu
        return min(max(IPV6_MIN_MTU, dev_mtu), IP6_MAX_MTU)

    def _row_mtu(self, r: np.void, family: int) -> int:
        dev_mtu = int(self.l2.rows[int(r["devrow"]), 1])
        return self._mtu(dev_mtu, family, int(r["mtu"]), bool(r["flags"] & RF_MTU_LOCK))

    def select_src4(self, r: Route) -> ipaddress.IPv4Address:
        """``fib_result_prefsrc``: the route's ``src``, else ``inet_select_addr``."""
        if isinstance(r.prefsrc, ipaddress.IPv4Address):
            return r.prefsrc
        gw = r.gateway if isinstance(r.gateway, ipaddress.IPv4Address) else None
        d = self.devices[r.dev]
        first: ipaddress.IPv4Address | None = None
        for a in self._primaries4(d):
            if min(self._scope4(a), RT_SCOPE_HOST) > r.scope:
                continue
            if gw is None or gw in a.network:
                return a.ip
            first = first or a.ip
        if first is not None:
            return first
        for other in self.devices.values():  # in_dev_select_addr over every device
            for a in self._primaries4(other):
                if self._scope4(a) != RT_SCOPE_LINK and self._scope4(a) <= r.scope:
                    return a.ip
        return ipaddress.IPv4Address(0)

    @staticmethod
    def _scope4(a: IPInterface) -> int:
        return RT_SCOPE_HOST if a.ip.is_loopback else RT_SCOPE_UNIVERSE

    @staticmethod
    def _primaries4(d: FibDevice) -> list[ipaddress.IPv4Interface]:
        """Addresses not inside the subnet of an earlier one (those are secondaries)."""
        out: list[ipaddress.IPv4Interface] = []
        for a in d.addresses:
            if isinstance(a, ipaddress.IPv4Interface) and not any(
                    p.network == a.network for p in out):
                out.append(a)
        return out

    def select_src6(self, r: Route, dst: ipaddress.IPv6Address) -> ipaddress.IPv6Address | None:
        """The route's ``src``, else ``ipv6_dev_get_saddr`` (a subset of its rules)."""
        if isinstance(r.prefsrc, ipaddress.IPv6Address):
            return r.prefsrc
        dst_scope = _scope6(dst)
        out = self.devices[r.dev]
        devices = [out] if dst_scope <= 2 else [d for _, d in sorted(self.devices.items())]
        best: tuple[int, ...] | None = None
        chosen: ipaddress.IPv6Address | None = None
        for d in devices:
            if not d.up or not d.has_ipv6:
                continue
            for a in self._addr_list6(d):
                if a.ip in _MC or int(a.ip) == 0:
                    continue
                scope = _scope6(a.ip)
                score = (
                    a.ip == dst,                                         # rule 1
                    -scope if scope >= dst_scope else scope - 128,       # rule 2
                    d.ifindex == out.ifindex,                            # rule 5
                    _label6(a.ip) == _label6(dst),                       # rule 6
                    min(_common_prefix(a.ip, dst), a.network.prefixlen),  # rule 8
                )
                if best is None or score > best:
                    best, chosen = score, a.ip
        return chosen

    @staticmethod
    def _addr_list6(d: FibDevice) -> list[ipaddress.IPv6Interface]:
        """``idev->addr_list``: by scope, global first, and newest first within a scope
        (``ipv6_link_dev_addr`` inserts before the first address of no larger scope)."""
        newest_first = [a for a in reversed(d.addresses) if isinstance(a, ipaddress.IPv6Interface)]
        return sorted(newest_first, key=lambda a: -_scope6(a.ip))

    def neighbour(self, dev: int, address: IPAddress) -> Neighbour | None:
        return self.neighbours.get((dev, address))

    # -- the helpers ---------------------------------------------------------------------
    def bpf_fib_lookup(self, params: FibLookup, flags: int) -> int:
        """``bpf_xdp_fib_lookup`` after its ``plen`` check: updates ``params``; returns r0.

        The return is a :class:`FibRet` value or a negative errno (-EINVAL
        for unknown flags, -EAFNOSUPPORT, -ENODEV); the fields the kernel
        writes are written on the same paths (``ifindex``, ``rt_metric``,
        the gateway into ``dst``, ``src`` with BPF_FIB_LOOKUP_SRC,
        ``smac``/``dmac``, the VLAN fields cleared, ``mtu_result``). It reads the
        lookup rows (:meth:`rows`) and the DevTable as the native twin does.
        """
        if flags & ~_FIB_FLAGS:
            return -errno.EINVAL
        if params.family == AF_INET:
            return self._fib4(params, flags)
        if params.family == AF_INET6:
            return self._fib6(params, flags)
        return -errno.EAFNOSUPPORT

    def _fib4(self, p: FibLookup, flags: int) -> int:
        dev = self.devices.get(p.ifindex)
        if dev is None:
            return -errno.ENODEV
        if not dev.forwarding:
            return FibRet.FWD_DISABLED
        oif = p.ifindex if flags & BPF_FIB_LOOKUP_OUTPUT else 0
        dst = p.dst(AF_INET)
        assert isinstance(dst, ipaddress.IPv4Address)
        if flags & BPF_FIB_LOOKUP_DIRECT:
            tbid = RT_TABLE_MAIN
            if flags & BPF_FIB_LOOKUP_TBID:
                tbid = p.tbid
                p.tbid = 0  # the kernel zeroes it (it shares the VLAN output fields)
            err, i = self._lookup4(dst, oif, 0, tbid)
        else:
            mark = p.mark if flags & BPF_FIB_LOOKUP_MARK else 0
            err, i = self._lookup4(dst, oif, mark, None)
        if err:
            return {-errno.EINVAL: FibRet.BLACKHOLE, -errno.EHOSTUNREACH: FibRet.UNREACHABLE,
                    -errno.EACCES: FibRet.PROHIBIT}.get(err, FibRet.NOT_FWDED)
        r = self.rows().routes4[i]
        if int(r["type"]) != RouteType.UNICAST:
            return FibRet.NOT_FWDED
        mtu = self._row_mtu(r, AF_INET)
        if p.tot_len > mtu:
            p.mtu_result = mtu
            return FibRet.FRAG_NEEDED
        p.rt_metric = int(r["metric"])
        p.ifindex = int(r["dev"])
        if flags & BPF_FIB_LOOKUP_SRC:
            p.raw[16:20] = r["src"][:4].tobytes()
        nexthop = _key(dst)
        fam = AF_INET
        if r["gwfam"]:
            fam = int(r["gwfam"])
            n = 4 if fam == AF_INET else 16
            p.family = fam
            p.raw[32:32 + n] = r["gw"][:n].tobytes()
            nexthop = r["gw"].view("<u4")
        return self._finish(p, flags, r, nexthop, fam, mtu)

    def _fib6(self, p: FibLookup, flags: int) -> int:
        dst, src = p.dst(AF_INET6), p.src(AF_INET6)
        assert isinstance(dst, ipaddress.IPv6Address) and isinstance(src, ipaddress.IPv6Address)
        if _rt6_need_strict(dst) or _rt6_need_strict(src):
            return FibRet.NOT_FWDED
        dev = self.devices.get(p.ifindex)
        if dev is None:
            return -errno.ENODEV
        if not dev.has_ipv6 or not dev.forwarding6:
            return FibRet.FWD_DISABLED
        oif = p.ifindex if flags & BPF_FIB_LOOKUP_OUTPUT else 0
        if flags & BPF_FIB_LOOKUP_DIRECT:
            tbid = RT_TABLE_MAIN
            if flags & BPF_FIB_LOOKUP_TBID:
                tbid = p.tbid
                p.tbid = 0
            if tbid not in self.rows().tables6:
                return FibRet.NOT_FWDED
            i = self._lookup6(dst, oif, 0, tbid)
        else:
            mark = p.mark if flags & BPF_FIB_LOOKUP_MARK else 0
            i = self._lookup6(dst, oif, mark, None)
        if i < 0:
            return FibRet.NOT_FWDED
        rows = self.rows()
        r = rows.routes6[i]
        rtype = RouteType(int(r["type"]))
        if rtype != RouteType.UNICAST:
            return {RouteType.BLACKHOLE: FibRet.BLACKHOLE,
                    RouteType.UNREACHABLE: FibRet.UNREACHABLE,
                    RouteType.PROHIBIT: FibRet.PROHIBIT}.get(rtype, FibRet.NOT_FWDED)
        mtu = self._row_mtu(r, AF_INET6)
        if p.tot_len > mtu:
            p.mtu_result = mtu
            return FibRet.FRAG_NEEDED
        nexthop = _key(dst)
        fam = AF_INET6
        if r["gwfam"]:
            fam = int(r["gwfam"])
            n = 4 if fam == AF_INET else 16
            p.raw[32:32 + n] = r["gw"][:n].tobytes()
            nexthop = r["gw"].view("<u4")
        p.rt_metric = int(r["metric"])
        p.ifindex = int(r["dev"])
        if flags & BPF_FIB_LOOKUP_SRC:
            if r["flags"] & RF_SRC:
                p.raw[16:32] = r["src"].tobytes()
            else:
                chosen = self.select_src6(rows.objs6[i], dst)
                if chosen is None:
                    return FibRet.NO_SRC_ADDR
                p.set_src(chosen)
        return self._finish(p, flags, r, nexthop, fam, mtu)

    def _finish(self, p: FibLookup, flags: int, r: np.void, nexthop: npt.NDArray[np.uint32],
                fam: int, mtu: int) -> int:
        """The neighbour step and ``bpf_fib_set_fwd_params``."""
        if not flags & BPF_FIB_LOOKUP_SKIP_NEIGH:
            devrow = int(r["devrow"])
            key = np.array(nexthop, np.uint32)
            if fam == AF_INET:
                key[1:] = 0
                if self.l2.rows[devrow, 3] & DF_LOOPBACK:
                    key[0] = 0  # __ipv4_neigh_lookup_noref on loopback
            ns = self.rows().neigh
            hit = np.flatnonzero((ns["dev"] == r["dev"]) & (ns["fam"] == fam)
                                 & (ns["addr"] == key).all(axis=1))
            if not len(hit) or not ns["valid"][hit[0]]:
                return FibRet.NO_NEIGH
            p.dmac = ns["mac"][hit[0]].tobytes()
            p.smac = self.l2.mac(devrow)
        p.clear_vlan()
        if mtu:
            p.mtu_result = mtu
        return FibRet.SUCCESS

    def check_mtu(self, ingress_ifindex: int, ifindex: int, mtu_len: int, len_diff: int,
                  flags: int, xdp_len: int) -> tuple[int, int | None]:
        """``bpf_xdp_check_mtu``: (r0, the new ``*mtu_len`` or None when it is not written).

        ``xdp_len`` is ``data_end - data`` (the linear part only: the XDP
        variant does not look at frags). An ``ifindex`` of 0 means the
        ingress device.
        """
        if flags:
            return -errno.EINVAL, None
        dev = self.devices.get(ingress_ifindex if ifindex == 0 else ifindex)
        if dev is None:
            return -errno.ENODEV, None
        mtu = dev.mtu
        dev_len = _s32(mtu + dev.hard_header_len)
        length = xdp_len
        if mtu_len:
            length = _s32((mtu_len + dev.hard_header_len) & 0xFFFF_FFFF)
        length = _s32(length + _s32(len_diff))
        ret = BPF_MTU_CHK_RET_FRAG_NEEDED if length > dev_len else BPF_MTU_CHK_RET_SUCCESS
        return ret, mtu & 0xFFFF_FFFF


def _s32(x: int) -> int:
    x &= 0xFFFF_FFFF
    return x - (1 << 32) if x >> 31 else x


def dev_net(context: object, r1: int, what: str) -> tuple[Fib, int]:
    """``dev_net(ctx->rxq->dev)`` for a helper or kfunc ``what`` an XDP program called
    with its context in ``r1``: the receiving device's namespace (a bare run gets one of
    its own) and the device's ifindex."""
    if not isinstance(context, RunContext) or context.xdp is None:
        raise HelperFault(f"{what} called outside an XDP run")
    if r1 != CTX_BASE:
        raise HelperFault(f"first argument {r1:#x} is not the xdp_md context")
    return run_net(context), int(context.xdp.rxq.ifindex)


def run_net(context: RunContext) -> Fib:
    """The run's namespace: its own, else its environment's (made now if need be), else
    a fresh one (loopback only), kept for the rest of the run."""
    if context.fib is None:
        context.fib = context.net_of.fib if context.net_of is not None else Fib()
    net: Fib = context.fib
    return net
