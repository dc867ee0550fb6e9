"""XDP attachment through rtnetlink: ``RTM_SETLINK`` with a nested ``IFLA_XDP``, and its dump.

This is what ``ip link set dev X xdp obj ...`` and libbpf's ``bpf_xdp_attach`` /
``bpf_xdp_query`` do, over a plain ``AF_NETLINK`` socket (no pyroute2, no
libbpf). The kernel side modelled:

* ``net/core/rtnetlink.c``: ``do_setlink`` parses ``IFLA_XDP`` (``FD``,
  ``FLAGS``, ``EXPECTED_FD``; ``ATTACHED`` and ``PROG_ID`` are dump-only and
  refused) and calls ``dev_change_xdp_fd``; ``rtnl_xdp_fill`` reports
  ``IFLA_XDP_ATTACHED`` and the ``*_PROG_ID`` of each mode on a dump;
* ``net/core/dev.c``: ``dev_xdp_attach`` applies the flag rules
  (``XDP_FLAGS_UPDATE_IF_NOEXIST`` -> EBUSY, native and generic mutually
  exclusive -> EEXIST, ``XDP_FLAGS_REPLACE`` with the wrong expected program
  -> EEXIST, an active bpf_link in the mode -> EBUSY...). Those rules stay in
  the kernel: this module only builds the request and reports the answer.

Errors come back as :class:`NetlinkError` (a :class:`~pyxdp.errors.KernelError`)
carrying the errno and the kernel's extended-ack text
(``NLMSGERR_ATTR_MSG``, e.g. "Native and generic XDP can't be active at the
same time."); a missing ``CAP_NET_ADMIN`` raises
:class:`~pyxdp.errors.BPFUnavailable`, an unknown interface name
:class:`InterfaceNotFound`.

Also here, because every caller of these functions needs it to test safely:
:func:`netns`, which moves the calling thread into a network namespace (a
name under ``/run/netns``, as iproute2 keeps them) and back.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import os
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, Protocol

from pyxdp.errors import BPFUnavailable, KernelError
from pyxdp.uapi.if_link import XdpFlag

__all__ = [
    "InterfaceNotFound",
    "NetlinkError",
    "FdLike",
    "SupportsFd",
    "SupportsHandle",
    "XdpAttached",
    "XdpFlag",
    "XdpQuery",
    "fd_of",
    "ifindex_of",
    "ifname_of",
    "mode_flag",
    "mode_name",
    "netns",
    "xdp_attach",
    "xdp_detach",
    "xdp_query",
    "xdp_query_all",
]

# --------------------------------------------------------------------------
# include/uapi/linux/netlink.h, rtnetlink.h, if_link.h
# --------------------------------------------------------------------------

NETLINK_ROUTE: Final = 0
SOL_NETLINK: Final = 270
NETLINK_CAP_ACK: Final = 10  # errors do not echo our request back
NETLINK_EXT_ACK: Final = 11  # errors carry the extack message

NLMSG_ERROR: Final = 2
NLMSG_DONE: Final = 3
RTM_NEWLINK: Final = 16
RTM_GETLINK: Final = 18
RTM_SETLINK: Final = 19

NLM_F_REQUEST: Final = 0x1
NLM_F_ACK: Final = 0x4
NLM_F_DUMP: Final = 0x300
NLM_F_CAPPED: Final = 0x100  # on an error: the request was not echoed
NLM_F_ACK_TLVS: Final = 0x200  # on an error: extack attributes follow

NLMSGERR_ATTR_MSG: Final = 1
NLA_F_NESTED: Final = 1 << 15
_NLA_TYPE_MASK: Final = 0x3FFF  # without NLA_F_NESTED / NLA_F_NET_BYTEORDER

IFLA_IFNAME: Final = 3
IFLA_EXT_MASK: Final = 29
IFLA_XDP: Final = 43
RTEXT_FILTER_SKIP_STATS: Final = 1 << 3  # dumps without the big stats blocks

IFLA_XDP_FD: Final = 1
IFLA_XDP_ATTACHED: Final = 2
IFLA_XDP_FLAGS: Final = 3
IFLA_XDP_PROG_ID: Final = 4
IFLA_XDP_DRV_PROG_ID: Final = 5
IFLA_XDP_SKB_PROG_ID: Final = 6
IFLA_XDP_HW_PROG_ID: Final = 7
IFLA_XDP_EXPECTED_FD: Final = 8

_NLMSGHDR: Final = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_IFINFOMSG: Final = struct.Struct("=BxHiII")  # family, type, index, flags, change
_NLATTR: Final = struct.Struct("=HH")  # len, type
_I32: Final = struct.Struct("=i")
_U32: Final = struct.Struct("=I")



XDP_FLAGS_MODES: Final = (XdpFlag.XDP_FLAGS_SKB_MODE | XdpFlag.XDP_FLAGS_DRV_MODE
                          | XdpFlag.XDP_FLAGS_HW_MODE)


class XdpAttached(IntEnum):
    """``IFLA_XDP_ATTACHED``: which modes hold a program (``MULTI``: more than one)."""

    XDP_ATTACHED_NONE = 0
    XDP_ATTACHED_DRV = 1
    XDP_ATTACHED_SKB = 2
    XDP_ATTACHED_HW = 3
    XDP_ATTACHED_MULTI = 4


# Mode names as the tools spell them: xdp-loader's native/skb/hw, iproute2's
# xdpdrv/xdpgeneric/xdpoffload, libbpf's drv. The canonical names are the
# first three.
_MODE_FLAGS: Final[dict[str, XdpFlag]] = {
    "native": XdpFlag.XDP_FLAGS_DRV_MODE,
    "generic": XdpFlag.XDP_FLAGS_SKB_MODE,
    "hw": XdpFlag.XDP_FLAGS_HW_MODE,
    "drv": XdpFlag.XDP_FLAGS_DRV_MODE,
    "skb": XdpFlag.XDP_FLAGS_SKB_MODE,
    "offload": XdpFlag.XDP_FLAGS_HW_MODE,
}
_MODE_ORDER: Final = ("generic", "native", "hw")  # rtnl_xdp_fill reports SKB, DRV, HW


def mode_flag(mode: str | None) -> XdpFlag:
    """The ``XDP_FLAGS_*_MODE`` bit of a mode name; no bit for None (the kernel chooses)."""
    if mode is None:
        return XdpFlag(0)
    try:
        return _MODE_FLAGS[mode.lower()]
    except KeyError:
        raise ValueError(f"unknown XDP mode {mode!r} (native, generic/skb or hw)") from None


def mode_name(mode: str) -> str:
    """The canonical name (``native``, ``generic``, ``hw``) of any accepted spelling."""
    flag = mode_flag(mode)
    return {XdpFlag.XDP_FLAGS_DRV_MODE: "native", XdpFlag.XDP_FLAGS_SKB_MODE: "generic",
            XdpFlag.XDP_FLAGS_HW_MODE: "hw"}[flag]


# --------------------------------------------------------------------------
# Errors and argument helpers
# --------------------------------------------------------------------------

class NetlinkError(KernelError):
    """rtnetlink refused a request; ``extack`` is the kernel's message ("" when none)."""

    def __init__(self, op: str, err: int, extack: str = "") -> None:
        self.extack = extack
        super().__init__(op, err, extack)


class InterfaceNotFound(KernelError):
    """An interface name (or index) that does not exist in this network namespace."""

    def __init__(self, name: str) -> None:
        # Not KernelError's "op failed: ..." text: the CLI prints this as is
        # ("pyxdp: load: eth9: no such interface").
        self.op = "if_nametoindex"
        self.errno = _errno.ENODEV
        self.name = name
        Exception.__init__(self, f"{name}: no such interface")


class SupportsFd(Protocol):
    """Anything owning a BPF object descriptor: :class:`~pyxdp.kernel.syscall.Fd`,
    :class:`~pyxdp.kernel.backend.KernelProgram`..."""

    @property
    def fd(self) -> int: ...


class SupportsHandle(Protocol):
    """A collection's program: its ``handle`` is the backend's program (with ``.fd``)."""

    @property
    def handle(self) -> object: ...


FdLike = int | SupportsFd | SupportsHandle
"""What attach functions take for a program: an fd, an object with ``.fd``, or a
collection's program."""


def fd_of(obj: FdLike) -> int:
    """The descriptor number of ``obj`` (an int is taken as is).

    A collection's program (``coll.programs[name]``, whose kernel handle has
    the fd) is accepted too, so callers need not reach for ``.handle``.
    """
    if isinstance(obj, int):
        return obj
    fd = getattr(obj, "fd", None)
    if fd is None:
        fd = getattr(getattr(obj, "handle", None), "fd", None)
    if not isinstance(fd, int):
        raise TypeError(f"{obj!r} is not a file descriptor nor has an fd")
    return fd


def ifindex_of(iface: str | int) -> int:
    """The ifindex of an interface name (or an ifindex, checked to exist) in this netns."""
    if isinstance(iface, int):
        ifname_of(iface)  # an ifindex must name a device too
        return iface
    try:
        return socket.if_nametoindex(iface)
    except OSError:
        raise InterfaceNotFound(iface) from None


def ifname_of(ifindex: int) -> str:
    """The name of interface ``ifindex`` in this netns."""
    try:
        return socket.if_indextoname(ifindex)
    except (OSError, OverflowError, ValueError):
        raise InterfaceNotFound(f"ifindex {ifindex}") from None


# --------------------------------------------------------------------------
# The netlink socket
# --------------------------------------------------------------------------

def _nla(kind: int, payload: bytes) -> bytes:
    raw = _NLATTR.pack(_NLATTR.size + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def _attrs(data: bytes | memoryview, offset: int = 0) -> Iterator[tuple[int, memoryview]]:
    """``(type, payload)`` of each netlink attribute in ``data[offset:]``."""
    view = memoryview(data)
    while offset + _NLATTR.size <= len(view):
        length, kind = _NLATTR.unpack_from(view, offset)
        if length < _NLATTR.size or offset + length > len(view):
            break  # malformed tail: stop rather than read garbage
        yield kind & _NLA_TYPE_MASK, view[offset + _NLATTR.size:offset + length]
        offset += (length + 3) & ~3


def _u32(payload: memoryview) -> int:
    value: int = _U32.unpack_from(payload)[0]
    return value


def _extack(body: memoryview, flags: int) -> str:
    """The ``NLMSGERR_ATTR_MSG`` text of an NLMSG_ERROR body, "" when there is none."""
    if not flags & NLM_F_ACK_TLVS or len(body) < 4 + _NLMSGHDR.size:
        return ""
    offset = 4 + _NLMSGHDR.size
    if not flags & NLM_F_CAPPED:
        # The kernel echoed our whole request after struct nlmsgerr.
        orig_len = _NLMSGHDR.unpack_from(body, 4)[0]
        offset = 4 + ((orig_len + 3) & ~3)
    for kind, payload in _attrs(body, offset):
        if kind == NLMSGERR_ATTR_MSG:
            return bytes(payload).split(b"\0", 1)[0].decode("utf-8", "replace").strip()
    return ""


class _Rtnl:
    """One netlink socket (NETLINK_ROUTE unless told): send a request, collect the
    replies until ACK or DONE. :mod:`pyxdp.kernel.netdev_genl` uses it for generic
    netlink."""

    def __init__(self, protocol: int = 0) -> None:
        try:
            self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC,
                                      protocol or NETLINK_ROUTE)
        except OSError as e:
            raise KernelError("socket(AF_NETLINK)", e.errno or _errno.EAFNOSUPPORT) from None
        try:
            # Both options only shape error replies; kernels without them
            # (before 4.12) still work, without the message text.
            for opt in (NETLINK_EXT_ACK, NETLINK_CAP_ACK):
                try:
                    self.sock.setsockopt(SOL_NETLINK, opt, 1)
                except OSError:
                    pass
            self.sock.bind((0, 0))
        except OSError as e:
            self.sock.close()
            raise KernelError("bind(AF_NETLINK)", e.errno or _errno.EINVAL) from None
        self.seq = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> _Rtnl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv(self) -> bytes:
        # Peek first for the datagram's true size: a dump message can be
        # bigger than any fixed buffer we would guess.
        size = self.sock.recv_into(bytearray(16), 16, socket.MSG_PEEK | socket.MSG_TRUNC)
        return self.sock.recv(max(size, 16))

    def request(self, op: str, msg_type: int, flags: int, body: bytes
                ) -> list[tuple[int, memoryview]]:
        """Send one message; the ``(type, body)`` replies (dump parts or nothing)."""
        self.seq += 1
        seq = self.seq
        msg = _NLMSGHDR.pack(_NLMSGHDR.size + len(body), msg_type,
                             NLM_F_REQUEST | flags, seq, 0) + body
        try:
            self.sock.send(msg)
        except OSError as e:
            raise KernelError(op, e.errno or _errno.EIO) from None
        out: list[tuple[int, memoryview]] = []
        while True:
            try:
                data = memoryview(self._recv())
            except OSError as e:
                raise KernelError(op, e.errno or _errno.EIO) from None
            offset = 0
            while offset + _NLMSGHDR.size <= len(data):
                length, kind, mflags, mseq, _ = _NLMSGHDR.unpack_from(data, offset)
                if length < _NLMSGHDR.size:
                    raise KernelError(op, _errno.EBADMSG, "truncated netlink message")
                payload = data[offset + _NLMSGHDR.size:offset + length]
                offset += (length + 3) & ~3
                if mseq != seq:
                    continue  # a stale reply to an earlier request
                if kind in (NLMSG_ERROR, NLMSG_DONE):
                    err = -_I32.unpack_from(payload)[0] if len(payload) >= 4 else 0
                    if err:
                        raise _error(op, err, _extack(payload, mflags))
                    return out  # an ACK, or the end of a dump
                out.append((kind, payload))
            if not flags & NLM_F_DUMP and out:
                return out  # a plain GET answers with one message and no ACK


def _error(op: str, err: int, extack: str) -> KernelError:
    if err == _errno.EPERM:
        # rtnetlink_rcv_msg checks CAP_NET_ADMIN before anything else, so
        # EPERM on these requests always means privilege.
        who = "not root" if os.geteuid() != 0 else "missing CAP_NET_ADMIN"
        return BPFUnavailable(op, err, extack or who)
    return NetlinkError(op, err, extack)


# --------------------------------------------------------------------------
# Attach / detach / query
# --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class XdpQuery:
    """What ``rtnl_xdp_fill`` reports for one interface.

    ``attached`` is ``IFLA_XDP_ATTACHED``; ``prog_id`` is ``IFLA_XDP_PROG_ID``
    (the one program's id; 0 when none or when several modes hold one, the
    kernel leaves it out then); ``drv/skb/hw_prog_id`` are the per-mode ids.
    """

    ifindex: int
    attached: XdpAttached
    prog_id: int = 0
    drv_prog_id: int = 0
    skb_prog_id: int = 0
    hw_prog_id: int = 0
    ifname: str = ""

    @property
    def mode(self) -> str | None:
        """``native``, ``generic``, ``hw``, ``multi``, or None when nothing is attached."""
        return {XdpAttached.XDP_ATTACHED_DRV: "native", XdpAttached.XDP_ATTACHED_SKB: "generic",
                XdpAttached.XDP_ATTACHED_HW: "hw",
                XdpAttached.XDP_ATTACHED_MULTI: "multi"}.get(self.attached)

    @property
    def programs(self) -> dict[str, int]:
        """``{mode: prog_id}`` for every mode holding a program (generic, native, hw order)."""
        ids = {"generic": self.skb_prog_id, "native": self.drv_prog_id, "hw": self.hw_prog_id}
        return {m: ids[m] for m in _MODE_ORDER if ids[m]}

    def prog_id_in(self, mode: str) -> int:
        """The id of the program attached in ``mode`` (any spelling), 0 when none."""
        return self.programs.get(mode_name(mode), 0)


def _ifinfomsg(ifindex: int) -> bytes:
    return _IFINFOMSG.pack(socket.AF_UNSPEC, 0, ifindex, 0, 0)


def _set_xdp(ifindex: int, fd: int, flags: int, expected_fd: int | None, op: str) -> None:
    nested = _nla(IFLA_XDP_FD, _I32.pack(fd))
    if flags:
        nested += _nla(IFLA_XDP_FLAGS, _U32.pack(flags & 0xFFFF_FFFF))
    if expected_fd is not None:
        nested += _nla(IFLA_XDP_EXPECTED_FD, _I32.pack(expected_fd))
    body = _ifinfomsg(ifindex) + _nla(IFLA_XDP | NLA_F_NESTED, nested)
    with _Rtnl() as nl:
        nl.request(op, RTM_SETLINK, NLM_F_ACK, body)


def xdp_attach(iface: str | int, prog: FdLike, *, mode: str | None = None,
               flags: int = 0, expected_fd: FdLike | None = None) -> None:
    """Attach XDP program ``prog`` (an fd or an object with ``.fd``) to ``iface``.

    ``mode``: ``"native"`` (``XDP_FLAGS_DRV_MODE``), ``"generic"``/``"skb"``
    (``XDP_FLAGS_SKB_MODE``), ``"hw"``, or None to let the kernel choose
    (native when the driver has ``ndo_bpf``, else generic). ``flags`` adds
    ``XdpFlag`` bits, e.g. ``XDP_FLAGS_UPDATE_IF_NOEXIST`` (EBUSY when a
    program is already attached). ``expected_fd`` sets ``XDP_FLAGS_REPLACE``
    and ``IFLA_XDP_EXPECTED_FD``: the swap happens only if the program
    attached now is that one (-1: only if none is), else EEXIST.

    The attachment holds a reference on the program: it stays attached after
    every descriptor of it is closed, until detached or the device goes.
    """
    ifindex = ifindex_of(iface)
    fl = int(flags) | mode_flag(mode)
    exp = None if expected_fd is None else fd_of(expected_fd)
    if exp is not None:
        fl |= XdpFlag.XDP_FLAGS_REPLACE
    _set_xdp(ifindex, fd_of(prog), fl, exp, "RTM_SETLINK(IFLA_XDP)")


def xdp_detach(iface: str | int, *, mode: str | None = None, flags: int = 0,
               expected_fd: FdLike | None = None) -> list[str]:
    """Detach the XDP program of ``iface`` (``IFLA_XDP_FD`` = -1); returns the modes asked.

    With ``mode`` (or a mode bit in ``flags``) exactly that mode is
    detached, as the kernel does (nothing happens when it holds no
    program). With neither, every mode that holds a program is detached: the
    kernel itself would pick its default mode and silently leave a program in
    the other one. ``expected_fd`` detaches only if that program is the
    attached one (``XDP_FLAGS_REPLACE``; EEXIST otherwise). A mode held by a
    bpf_link answers EBUSY ("Can't replace active BPF XDP link").
    """
    ifindex = ifindex_of(iface)
    exp = None if expected_fd is None else fd_of(expected_fd)
    base = int(flags) | (XdpFlag.XDP_FLAGS_REPLACE if exp is not None else 0)
    if mode is not None or base & XDP_FLAGS_MODES:
        fl = base | mode_flag(mode)
        modes = [m for m in _MODE_ORDER if mode_flag(m) & fl] or ["default"]
        _set_xdp(ifindex, -1, fl, exp, "RTM_SETLINK(IFLA_XDP)")
        return modes
    done: list[str] = []
    for m in xdp_query(ifindex).programs:
        _set_xdp(ifindex, -1, base | mode_flag(m), exp, "RTM_SETLINK(IFLA_XDP)")
        done.append(m)
    return done


def _parse_link(body: memoryview) -> XdpQuery:
    _, _, ifindex, _, _ = _IFINFOMSG.unpack_from(body)
    name = ""
    fields = {IFLA_XDP_ATTACHED: 0, IFLA_XDP_PROG_ID: 0, IFLA_XDP_DRV_PROG_ID: 0,
              IFLA_XDP_SKB_PROG_ID: 0, IFLA_XDP_HW_PROG_ID: 0}
    for kind, payload in _attrs(body, _IFINFOMSG.size):
        if kind == IFLA_IFNAME:
            name = bytes(payload).split(b"\0", 1)[0].decode("utf-8", "replace")
        elif kind == IFLA_XDP:
            for sub, val in _attrs(payload):
                if sub == IFLA_XDP_ATTACHED and len(val) >= 1:
                    fields[sub] = val[0]
                elif sub in fields and len(val) >= 4:
                    fields[sub] = _u32(val)
    try:
        attached = XdpAttached(fields[IFLA_XDP_ATTACHED])
    except ValueError:  # a future mode: report it as several
        attached = XdpAttached.XDP_ATTACHED_MULTI
    return XdpQuery(ifindex=ifindex, attached=attached, prog_id=fields[IFLA_XDP_PROG_ID],
                    drv_prog_id=fields[IFLA_XDP_DRV_PROG_ID],
                    skb_prog_id=fields[IFLA_XDP_SKB_PROG_ID],
                    hw_prog_id=fields[IFLA_XDP_HW_PROG_ID], ifname=name)


def _getlink_body(ifindex: int) -> bytes:
    return _ifinfomsg(ifindex) + _nla(IFLA_EXT_MASK, _U32.pack(RTEXT_FILTER_SKIP_STATS))


def xdp_query(iface: str | int) -> XdpQuery:
    """``RTM_GETLINK`` for one interface: its ``IFLA_XDP`` report."""
    ifindex = ifindex_of(iface)
    with _Rtnl() as nl:
        try:
            replies = nl.request("RTM_GETLINK", RTM_GETLINK, 0, _getlink_body(ifindex))
        except NetlinkError as e:
            if e.errno == _errno.ENODEV:  # gone between the name lookup and now
                raise InterfaceNotFound(str(iface)) from None
            raise
    for kind, body in replies:
        if kind == RTM_NEWLINK:
            return _parse_link(body)
    raise KernelError("RTM_GETLINK", _errno.EBADMSG, "no RTM_NEWLINK in the reply")


def xdp_query_all() -> list[XdpQuery]:
    """``RTM_GETLINK`` dump: the ``IFLA_XDP`` report of every interface of this netns."""
    with _Rtnl() as nl:
        replies = nl.request("RTM_GETLINK", RTM_GETLINK, NLM_F_DUMP, _getlink_body(0))
    return sorted((_parse_link(body) for kind, body in replies if kind == RTM_NEWLINK),
                  key=lambda q: q.ifindex)


# --------------------------------------------------------------------------
# Network namespaces
# --------------------------------------------------------------------------

CLONE_NEWNET: Final = 0x4000_0000
NETNS_RUN_DIR: Final = "/run/netns"  # where iproute2 bind-mounts named namespaces


def _setns(fd: int, what: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        if err == _errno.EPERM:
            raise BPFUnavailable("setns", err, f"{what}: needs CAP_SYS_ADMIN")
        raise KernelError("setns", err, what)


@contextmanager
def netns(name: str) -> Iterator[None]:
    """Run the body in network namespace ``name`` and come back afterwards.

    ``name`` is an iproute2 name (``ip netns add NAME``) or a path to a
    namespace file. Only the calling thread moves (setns(2) on a network
    namespace); sockets opened inside stay in that namespace after leaving.
    """
    path = name if "/" in name else os.path.join(NETNS_RUN_DIR, name)
    try:
        target = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise KernelError("open netns", e.errno or _errno.ENOENT, path) from None
    try:
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        os.close(target)
        raise KernelError("open netns", e.errno or _errno.ENOENT, "this thread's") from None
    try:
        _setns(target, path)
        try:
            yield
        finally:
            _setns(home, "back to the original namespace")
    finally:
        os.close(target)
        os.close(home)
