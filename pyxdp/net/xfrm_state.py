"""A network namespace's IPsec security associations (``net/xfrm/xfrm_state.c``).

What ``bpf_xdp_get_xfrm_state`` asks the kernel: ``xfrm_state_lookup(net,
mark, daddr, spi, proto, family)``, which walks the namespace's states by SPI
(``__xfrm_state_lookup``) and takes the first - the newest, as states join
the head of their hash chain - whose family, SPI, protocol and destination
address (4 bytes for ``AF_INET``, 16 for ``AF_INET6``) are the asked ones and
whose mark matches (``(mark & x->mark.m) == x->mark.v``), holding a reference
(``xfrm_state_hold_rcu``). A state with SPI 0 is in no SPI chain: lookups do
not find it.

From Python (as ``ip xfrm state add/delete/flush`` do through the XFRM netlink
family): :meth:`XfrmStateTable.add` (EEXIST for a state a lookup with its own
mark would find), :meth:`delete`, :meth:`flush`, :meth:`list`. Each state
lives in a slot of one flat buffer laid out as Linux 6.18 lays out ``struct
xfrm_state`` on x86-64 (:data:`XFRM_STATE_LAYOUT`: the reference count,
``id``, ``mark``, ``if_id`` and ``props``' ``reqid``, ``mode``, ``family``
and ``saddr``; every other member, pointers included, reads 0), so a program
reads the fields its CO-RE relocations resolve to. The buffer is mapped
read-only into a run that gets a state from the kfunc.

Simplified: no algorithms, keys, lifetimes, replay state or encapsulation
(pyxdp does not process IPsec packets); the state's identity and selectors
are what the lookup and a program see.
"""

from __future__ import annotations

import builtins
import errno
import ipaddress
import itertools
import struct
import weakref
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["AF_INET", "MAX_STATES", "XFRM_BASE", "XFRM_DESC", "XFRM_LISTED", "XFRM_SLOT",
           "XFRM_STATE_LAYOUT", "XfrmError", "XfrmState", "XfrmStateTable", "XFRM_TABLES"]

AF_INET, AF_INET6 = 2, 10
# Offsets in struct xfrm_state (Linux 6.18, x86-64; pahole/BTF of this kernel).
XFRM_STATE_LAYOUT = {"refcnt": 104, "id.daddr": 116, "id.spi": 132, "id.proto": 136,
                     "mark.v": 196, "mark.m": 200, "if_id": 204, "props.reqid": 248,
                     "props.mode": 252, "props.family": 258, "props.saddr": 260,
                     "size": 816}
XFRM_SLOT = 1024  # bytes per state in the table's buffer
# pyxdp's own byte past struct xfrm_state in each slot: 1 while the state is listed.
XFRM_LISTED = 816
# The words a table describes itself with to native code (``XfrmStateTable.desc``): the
# host addresses of the states and of the lookup order (slots, u32, newest first), the
# fake base and the listed states' number.
XFRM_DESC = {name: i for i, name in enumerate(("buf", "base", "order", "n"))}
MAX_STATES = 4096
# Fake addresses of the tables' buffers: table k at XFRM_BASE + (k << 32).
XFRM_BASE = 0x0000_6400_0000_0000
_L = XFRM_STATE_LAYOUT

_table_numbers = itertools.count()
XFRM_TABLES: weakref.WeakValueDictionary[int, XfrmStateTable] = weakref.WeakValueDictionary()


class XfrmError(OSError):
    """A state table operation failed with the kernel's errno."""


def _addr(a: str | bytes, family: int | None = None) -> tuple[int, bytes]:
    """(family, 16-byte xfrm_address_t) of an address (an IPv4 one in the first 4)."""
    if isinstance(a, bytes):
        if len(a) not in (4, 16):
            raise XfrmError(errno.EINVAL, f"a packed address is 4 or 16 bytes, not {len(a)}")
        raw = a
    else:
        raw = ipaddress.ip_address(a).packed
    fam = AF_INET if len(raw) == 4 else AF_INET6
    if family is not None and family != fam:
        raise XfrmError(errno.EINVAL, "the addresses are of different families")
    return fam, raw.ljust(16, b"\0")


@dataclass(eq=False)
class XfrmState:
    """One security association: ``id`` (destination, SPI in host order, protocol),
    ``mark`` (value, mask), the source address and the ``props`` a program reads."""

    table: XfrmStateTable
    slot: int
    family: int
    daddr: bytes  # xfrm_address_t: 16 bytes, an IPv4 address in the first 4
    spi: int
    proto: int
    saddr: bytes
    mark_v: int = 0
    mark_m: int = 0
    reqid: int = 0
    mode: int = 0
    if_id: int = 0

    @property
    def addr(self) -> int:
        """The address a program holds for this state (its ``struct xfrm_state``)."""
        return self.table.base + self.slot * XFRM_SLOT

    @property
    def refcnt(self) -> int:
        off = self.slot * XFRM_SLOT + _L["refcnt"]
        return int.from_bytes(self.table.buf[off:off + 4], "little")

    @refcnt.setter
    def refcnt(self, v: int) -> None:
        off = self.slot * XFRM_SLOT + _L["refcnt"]
        self.table.buf[off:off + 4] = v.to_bytes(4, "little")

    def matches(self, mark: int, daddr: bytes, spi: int, proto: int, family: int) -> bool:
        """``__xfrm_state_lookup``'s test of one state of the SPI's chain."""
        alen = 4 if family == AF_INET else 16
        return (self.spi != 0 and self.family == family and self.spi == spi
                and self.proto == proto and self.daddr[:alen] == daddr[:alen]
                and mark & self.mark_m == self.mark_v)

    def _write(self) -> None:
        b, o = self.table.buf, self.slot * XFRM_SLOT
        b[o:o + XFRM_SLOT] = bytes(XFRM_SLOT)
        b[o + _L["id.daddr"]:o + _L["id.daddr"] + 16] = self.daddr
        struct.pack_into(">I", b, o + _L["id.spi"], self.spi)
        b[o + _L["id.proto"]] = self.proto
        struct.pack_into("<III", b, o + _L["mark.v"], self.mark_v, self.mark_m, self.if_id)
        struct.pack_into("<IBxxxxxH", b, o + _L["props.reqid"], self.reqid, self.mode,
                         self.family)
        b[o + _L["props.saddr"]:o + _L["props.saddr"] + 16] = self.saddr
        self.refcnt = 1  # xfrm_state_alloc: the table's reference


class XfrmStateTable:
    """One namespace's states (``net->xfrm``). ``peers`` maps the netns ids this
    namespace has given others (``ip netns set``) to their tables, for
    ``bpf_xfrm_state_opts.netns_id``.

    Typical use, through a test run's environment::

        env.fib.xfrm.add("10.0.0.1", "10.0.0.2", spi=0x100, proto=50)  # IPPROTO_ESP
    """

    def __init__(self) -> None:
        self.base = XFRM_BASE + (next(_table_numbers) << 32)
        self._buf: bytearray | None = None
        # the listed states' slots, newest first (the hash chains' order), and their
        # Python views by slot; with desc (XFRM_DESC), made with the buffer, what the
        # kfuncs' native twins read and write too
        self._order: npt.NDArray[np.uint32] = np.zeros(MAX_STATES, np.uint32)
        self._objs: dict[int, XfrmState] = {}
        self.desc: npt.NDArray[np.uint64] = np.zeros(len(XFRM_DESC), np.uint64)
        self.peers: dict[int, XfrmStateTable] = {}
        XFRM_TABLES[self.base] = self

    @property
    def buf(self) -> bytearray:
        """The states' memory (allocated on first use)."""
        if self._buf is None:
            buf = bytearray(MAX_STATES * XFRM_SLOT)
            self._view = np.frombuffer(buf, np.uint8)  # pins it (it never resizes)
            self.desc[XFRM_DESC["buf"]] = self._view.ctypes.data
            self.desc[XFRM_DESC["base"]] = self.base
            self.desc[XFRM_DESC["order"]] = self._order.ctypes.data
            self._buf = buf
        return self._buf

    @property
    def states(self) -> builtins.list[XfrmState]:
        """The listed states, newest first."""
        n = int(self.desc[XFRM_DESC["n"]])
        return [self._objs[s] for s in self._order[:n].tolist()]

    def native_desc(self) -> int:
        """The host address of ``desc`` for native code (the buffer made first)."""
        self._listed(0)
        return int(self.desc.ctypes.data)

    def _listed(self, slot: int) -> bool:
        return bool(self.buf[slot * XFRM_SLOT + XFRM_LISTED])

    def lookup(self, mark: int, daddr: bytes, spi: int, proto: int, family: int
               ) -> XfrmState | None:
        """``xfrm_state_lookup`` without the reference: the state, or None."""
        return next((x for x in self.states if x.matches(mark, daddr, spi, proto, family)),
                    None)

    def add(self, src: str | bytes, dst: str | bytes, spi: int, proto: int, *,
            mark: tuple[int, int] = (0, 0), reqid: int = 0, mode: int = 0,
            if_id: int = 0) -> XfrmState:
        """``xfrm_state_add``: a state from ``src`` to ``dst`` (``spi`` host order).
        EEXIST when a lookup with the state's own mark finds one already."""
        family, saddr = _addr(src)
        _, daddr = _addr(dst, family)
        if not 0 <= spi <= 0xFFFF_FFFF or not 0 <= proto <= 255:
            raise XfrmError(errno.EINVAL, "spi is a u32 and proto a u8")
        v, m = mark
        if self.lookup(v & m, daddr, spi, proto, family) is not None:
            raise XfrmError(errno.EEXIST, "the state exists")
        slot = next((i for i in range(MAX_STATES) if not self._listed(i)), None)
        if slot is None:
            raise XfrmError(errno.ENOBUFS, f"no room for another state (at most {MAX_STATES})")
        x = XfrmState(self, slot, family, daddr, spi, proto, saddr, v & 0xFFFF_FFFF,
                      m & 0xFFFF_FFFF, reqid, mode, if_id)
        x._write()
        n = int(self.desc[XFRM_DESC["n"]])
        self._order[1:n + 1] = self._order[:n].copy()
        self._order[0] = slot
        self.desc[XFRM_DESC["n"]] = n + 1
        self.buf[slot * XFRM_SLOT + XFRM_LISTED] = 1
        self._objs[slot] = x
        return x

    def delete(self, x: XfrmState) -> None:
        """``xfrm_state_delete``: lookups no longer find it (references held by a
        program stay valid until released)."""
        states = self.states
        if x not in states:
            raise XfrmError(errno.ESRCH, "the state is not in this table")
        i, n = states.index(x), len(states)
        self._order[i:n - 1] = self._order[i + 1:n].copy()
        self.desc[XFRM_DESC["n"]] = n - 1
        self.buf[x.slot * XFRM_SLOT + XFRM_LISTED] = 0
        x.refcnt = max(x.refcnt - 1, 0)

    def flush(self) -> None:
        for x in list(self.states):
            self.delete(x)

    def list(self) -> builtins.list[XfrmState]:
        return list(self.states)

    def at(self, addr: int) -> XfrmState | None:
        """The listed state whose ``struct xfrm_state`` is at ``addr``."""
        off = addr - self.base
        if off < 0 or off % XFRM_SLOT or off // XFRM_SLOT >= MAX_STATES or \
                not self._listed(off // XFRM_SLOT):
            return None
        return self._objs[off // XFRM_SLOT]
