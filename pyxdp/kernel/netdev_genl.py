"""A netdev's XDP features through the ``netdev`` generic netlink family
(``net/core/netdev-genl.c``), what ``xdp-loader features`` and ``ynl --family
netdev --do dev-get`` print.

``NETDEV_CMD_DEV_GET`` with ``NETDEV_A_DEV_IFINDEX`` answers with the device's
``xdp_features`` (``enum netdev_xdp_act``), ``xdp_zc_max_segs`` (the largest
number of buffers an AF_XDP zero-copy frame may span), the XDP RX metadata
kfuncs its driver implements (``enum netdev_xdp_rx_metadata``, from
``xdp_metadata_ops``) and its AF_XDP TX metadata features (``enum
netdev_xsk_flags``). The family id is looked up once per query through
``nlctrl`` (``CTRL_CMD_GETFAMILY``). No privilege is needed.

The same family lists a device's NAPI instances (``NETDEV_CMD_NAPI_GET``, a dump
filtered by ifindex) and sets one to threaded polling (``NETDEV_CMD_NAPI_SET``
with ``NETDEV_A_NAPI_THREADED``, Linux 6.17): its poll then runs in a kthread of
its own instead of the softirq of whoever scheduled it - on a veth, the sender's
``send``. Per instance, unlike the device's sysfs ``threaded``: the setting goes
with the instance, so a veth's NAPI that a detach deletes takes it along.
The same command sets an instance's ``defer-hard-irqs`` and
``gro-flush-timeout`` (Linux 6.13; before, only the device's sysfs values):
after a busy poll that prefers busy polling (``SO_PREFER_BUSY_POLL``) the
instance stays masked - not scheduled by its "interrupt" (on a veth, the
peer's transmit) - for up to ``defer-hard-irqs`` timer periods of
``gro-flush-timeout`` nanoseconds while its polls find nothing, the timer's
poll running on the CPU that armed it. Setting needs CAP_NET_ADMIN.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntFlag
from typing import Final

from pyxdp.errors import KernelError
from pyxdp.kernel.netlink import _attrs, _nla, _Rtnl, ifindex_of
from pyxdp.uapi.if_link import NetdevXdpAct

__all__ = ["Napi", "NapiIrqDefer", "NetdevInfo", "NetdevXdpRxMetadata", "NetdevXskFlags",
           "defer_napis", "dev_get", "napi_get", "napi_set_irq_defer", "napi_set_threaded",
           "restore_napis", "thread_napis", "unthread_napis"]

NETLINK_GENERIC: Final = 16
GENL_ID_CTRL: Final = 0x10
CTRL_CMD_GETFAMILY: Final = 3
CTRL_ATTR_FAMILY_ID: Final = 1
CTRL_ATTR_FAMILY_NAME: Final = 2
NETDEV_FAMILY_NAME: Final = "netdev"
NETDEV_CMD_DEV_GET: Final = 1
NETDEV_A_DEV_IFINDEX: Final = 1
NETDEV_A_DEV_XDP_FEATURES: Final = 3
NETDEV_A_DEV_XDP_ZC_MAX_SEGS: Final = 4
NETDEV_A_DEV_XDP_RX_METADATA_FEATURES: Final = 5
NETDEV_A_DEV_XSK_FEATURES: Final = 6
NETDEV_CMD_NAPI_GET: Final = 11
NETDEV_CMD_NAPI_SET: Final = 14
NETDEV_A_NAPI_IFINDEX: Final = 1
NETDEV_A_NAPI_ID: Final = 2
NETDEV_A_NAPI_PID: Final = 4
NETDEV_A_NAPI_DEFER_HARD_IRQS: Final = 5
NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT: Final = 6
NETDEV_A_NAPI_THREADED: Final = 8
NLM_F_ACK: Final = 0x4
NLM_F_DUMP: Final = 0x300
_GENLMSGHDR: Final = struct.Struct("=BBH")


class NetdevXdpRxMetadata(IntFlag):
    """``enum netdev_xdp_rx_metadata``: the RX metadata kfuncs a driver implements."""

    NETDEV_XDP_RX_METADATA_TIMESTAMP = 1 << 0
    NETDEV_XDP_RX_METADATA_HASH = 1 << 1
    NETDEV_XDP_RX_METADATA_VLAN_TAG = 1 << 2


class NetdevXskFlags(IntFlag):
    """``enum netdev_xsk_flags``: AF_XDP TX metadata a driver honours."""

    NETDEV_XSK_FLAGS_TX_TIMESTAMP = 1 << 0
    NETDEV_XSK_FLAGS_TX_CHECKSUM = 1 << 1
    NETDEV_XSK_FLAGS_TX_LAUNCH_TIME_FIFO = 1 << 2


@dataclass(frozen=True, slots=True)
class NetdevInfo:
    """One ``dev-get`` answer."""

    ifindex: int
    xdp_features: NetdevXdpAct
    xdp_zc_max_segs: int
    xdp_rx_metadata_features: NetdevXdpRxMetadata
    xsk_features: NetdevXskFlags


def _int(payload: memoryview) -> int:
    return int.from_bytes(bytes(payload), "little")


def _genl(nl: _Rtnl, op: str, family: int, cmd: int, attrs: bytes) -> memoryview:
    replies = nl.request(op, family, 0, _GENLMSGHDR.pack(cmd, 1, 0) + attrs)
    if not replies:
        raise KernelError(op, 61, "no answer")  # ENODATA
    return replies[0][1][_GENLMSGHDR.size:]


def _family_id(nl: _Rtnl, name: str) -> int:
    op = f"genl getfamily {name}"
    try:
        body = _genl(nl, op, GENL_ID_CTRL, CTRL_CMD_GETFAMILY,
                     _nla(CTRL_ATTR_FAMILY_NAME, name.encode() + b"\0"))
    except KernelError as e:
        if e.errno == 2:  # ENOENT: a kernel before 6.3 has no netdev family
            raise KernelError(op, e.errno, "this kernel has no netdev netlink family "
                                           "(Linux 6.3 added xdp-features)") from None
        raise
    for kind, payload in _attrs(body):
        if kind == CTRL_ATTR_FAMILY_ID:
            return _int(payload)
    raise KernelError(op, 61, "no family id in the answer")


def dev_get(iface: str | int) -> NetdevInfo:
    """``NETDEV_CMD_DEV_GET``: the XDP features of one interface (name or ifindex)."""
    ifindex = ifindex_of(iface)
    with _Rtnl(NETLINK_GENERIC) as nl:
        family = _family_id(nl, NETDEV_FAMILY_NAME)
        body = _genl(nl, f"netdev dev-get {iface}", family, NETDEV_CMD_DEV_GET,
                     _nla(NETDEV_A_DEV_IFINDEX, struct.pack("=I", ifindex)))
    got = {kind: _int(payload) for kind, payload in _attrs(body)}
    return NetdevInfo(
        ifindex=got.get(NETDEV_A_DEV_IFINDEX, ifindex),
        xdp_features=NetdevXdpAct(got.get(NETDEV_A_DEV_XDP_FEATURES, 0)),
        xdp_zc_max_segs=got.get(NETDEV_A_DEV_XDP_ZC_MAX_SEGS, 0),
        xdp_rx_metadata_features=NetdevXdpRxMetadata(
            got.get(NETDEV_A_DEV_XDP_RX_METADATA_FEATURES, 0)),
        xsk_features=NetdevXskFlags(got.get(NETDEV_A_DEV_XSK_FEATURES, 0)))


@dataclass(frozen=True, slots=True)
class Napi:
    """One ``napi-get`` answer: a NAPI instance of a device."""

    id: int
    ifindex: int
    threaded: bool
    pid: int  # its kthread's, 0 when it has none
    # None: a kernel whose napi-get does not report them (before 6.13)
    defer_hard_irqs: int | None = None
    gro_flush_timeout: int | None = None  # nanoseconds

    @property
    def irq_defer(self) -> NapiIrqDefer | None:
        """Its interrupt deferral, when the kernel reports (and so can set) it."""
        if self.defer_hard_irqs is None or self.gro_flush_timeout is None:
            return None
        return NapiIrqDefer(self.defer_hard_irqs, self.gro_flush_timeout)


@dataclass(frozen=True, slots=True)
class NapiIrqDefer:
    """A NAPI instance's ``defer-hard-irqs`` and ``gro-flush-timeout`` (ns)."""

    defer_hard_irqs: int
    gro_flush_timeout: int


def napi_get(iface: str | int) -> list[Napi]:
    """``NETDEV_CMD_NAPI_GET`` (dump): the NAPI instances of one interface now (a veth
    has one per queue only while an XDP program or GRO is on)."""
    ifindex = ifindex_of(iface)
    with _Rtnl(NETLINK_GENERIC) as nl:
        family = _family_id(nl, NETDEV_FAMILY_NAME)
        replies = nl.request(f"netdev napi-get {iface}", family, NLM_F_DUMP,
                             _GENLMSGHDR.pack(NETDEV_CMD_NAPI_GET, 1, 0)
                             + _nla(NETDEV_A_NAPI_IFINDEX, struct.pack("=I", ifindex)))
    out = []
    for _, body in replies:
        got = {kind: _int(payload) for kind, payload in _attrs(body[_GENLMSGHDR.size:])}
        if got.get(NETDEV_A_NAPI_IFINDEX) == ifindex and NETDEV_A_NAPI_ID in got:
            out.append(Napi(got[NETDEV_A_NAPI_ID], ifindex,
                            bool(got.get(NETDEV_A_NAPI_THREADED, 0)),
                            got.get(NETDEV_A_NAPI_PID, 0),
                            got.get(NETDEV_A_NAPI_DEFER_HARD_IRQS),
                            got.get(NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT)))
    return out


def napi_set_threaded(napi_id: int, threaded: bool) -> None:
    """``NETDEV_CMD_NAPI_SET``: NAPI ``napi_id`` polled by a kthread of its own, or not."""
    op = f"netdev napi-set {napi_id} threaded {int(threaded)}"
    with _Rtnl(NETLINK_GENERIC) as nl:
        family = _family_id(nl, NETDEV_FAMILY_NAME)
        nl.request(op, family, NLM_F_ACK,
                   _GENLMSGHDR.pack(NETDEV_CMD_NAPI_SET, 1, 0)
                   + _nla(NETDEV_A_NAPI_ID, struct.pack("=I", napi_id))
                   + _nla(NETDEV_A_NAPI_THREADED, struct.pack("=I", int(threaded))))


def napi_set_irq_defer(napi_id: int, irq_defer: NapiIrqDefer) -> None:
    """``NETDEV_CMD_NAPI_SET``: NAPI ``napi_id``'s ``defer-hard-irqs`` and
    ``gro-flush-timeout`` (Linux 6.13)."""
    op = (f"netdev napi-set {napi_id} defer-hard-irqs {irq_defer.defer_hard_irqs} "
          f"gro-flush-timeout {irq_defer.gro_flush_timeout}")
    with _Rtnl(NETLINK_GENERIC) as nl:
        family = _family_id(nl, NETDEV_FAMILY_NAME)
        nl.request(op, family, NLM_F_ACK,
                   _GENLMSGHDR.pack(NETDEV_CMD_NAPI_SET, 1, 0)
                   + _nla(NETDEV_A_NAPI_ID, struct.pack("=I", napi_id))
                   + _nla(NETDEV_A_NAPI_DEFER_HARD_IRQS,
                          struct.pack("=I", irq_defer.defer_hard_irqs))
                   + _nla(NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT,
                          struct.pack("=Q", irq_defer.gro_flush_timeout)))


def defer_napis(napis: list[Napi], irq_defer: NapiIrqDefer) -> list[tuple[int, NapiIrqDefer]]:
    """``irq_defer`` on each of ``napis``: (id, the value it had) of those this changed,
    for :func:`restore_napis`. A kernel that does not report the values (before 6.13)
    cannot set them per instance: KernelError (EOPNOTSUPP)."""
    saved: list[tuple[int, NapiIrqDefer]] = []
    try:
        for n in napis:
            old = n.irq_defer
            if old is None:
                raise KernelError(f"netdev napi-set {n.id}", 95,  # EOPNOTSUPP
                                  "no per-NAPI defer-hard-irqs (Linux 6.13)")
            if old != irq_defer:
                napi_set_irq_defer(n.id, irq_defer)
                saved.append((n.id, old))
    except BaseException:
        restore_napis(saved)
        raise
    return saved


def restore_napis(saved: list[tuple[int, NapiIrqDefer]]) -> None:
    """The values :func:`defer_napis` replaced, back; an instance gone meanwhile (a
    veth's, with its detach) has nothing to restore."""
    for nid, old in saved:
        try:
            napi_set_irq_defer(nid, old)
        except KernelError:
            pass


def thread_napis(iface: str | int) -> list[int]:
    """Every NAPI instance of ``iface`` threaded: the ids of those this switched (the
    ones already threaded stay as they are, and are not :func:`unthread_napis`' to undo)."""
    ids = [n.id for n in napi_get(iface) if not n.threaded]
    for nid in ids:
        napi_set_threaded(nid, True)
    return ids


def unthread_napis(ids: list[int]) -> None:
    """Back to softirq polling; an instance gone meanwhile (a veth's, with its detach)
    has nothing to restore."""
    for nid in ids:
        try:
            napi_set_threaded(nid, False)
        except KernelError:
            pass
