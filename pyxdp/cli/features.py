"""``pyxdp features IFACE``: what an interface's XDP supports, like ``xdp-loader features``.

For a Linux interface the answer is the kernel's, through the ``netdev``
generic netlink family (:func:`pyxdp.kernel.netdev_genl.dev_get`): the
``NETDEV_XDP_ACT_*`` flags of ``xdp_features``, the zero-copy maximum number
of segments, the XDP RX metadata kfuncs the driver implements and its AF_XDP
TX metadata features. With ``--pyxdp`` the device is one of pyxdp's default
host (NICs ``eth0``/``eth1``, a veth pair ``veth0``/``veth1``, as ``pyxdp
explain`` builds it) and the same fields come from the model: the device's
``xdp_features``, one zero-copy segment when it has zero-copy (the kernel's
default ``xdp_zc_max_segs``), the ops of its ``xdp_metadata_ops``.
"""

from __future__ import annotations

from typing import Any

from pyxdp.cli.options import STYLE, CliError, emit
from pyxdp.errors import KernelError
from pyxdp.uapi.if_link import NetdevXdpAct

__all__ = ["cmd_features", "pyxdp_features"]


def pyxdp_features(ifname: str) -> dict[str, Any]:
    """The fields ``dev-get`` would report for a device of pyxdp's default host."""
    from pyxdp.kernel.netdev_genl import NetdevXdpRxMetadata
    from pyxdp.net.netdevice import Host
    with Host() as host:
        host.add_device("eth0")
        host.add_device("eth1")
        host.veth("veth0", "veth1")
        try:
            dev = host.dev(ifname)
        except (KernelError, LookupError, ValueError):
            raise CliError(f"features: no pyxdp device {ifname!r} (the default host has eth0, "
                           f"eth1, veth0, veth1)") from None
        act = NetdevXdpAct(int(dev.xdp_features))
        ops = dev.xdp_metadata_ops
        meta = NetdevXdpRxMetadata(0)
        if ops is not None:
            for flag, op in ((NetdevXdpRxMetadata.NETDEV_XDP_RX_METADATA_TIMESTAMP,
                              ops.rx_timestamp),
                             (NetdevXdpRxMetadata.NETDEV_XDP_RX_METADATA_HASH, ops.rx_hash),
                             (NetdevXdpRxMetadata.NETDEV_XDP_RX_METADATA_VLAN_TAG,
                              ops.rx_vlan_tag)):
                if op is not None:
                    meta |= flag
        zc = 1 if act & NetdevXdpAct.NETDEV_XDP_ACT_XSK_ZEROCOPY else 0
        return _doc(ifname, dev.ifindex, int(act), zc, int(meta), 0, "pyxdp")


def _names(enum: Any, value: int) -> list[str]:
    return [str(f.name) for f in enum if value & f.value]


def _doc(ifname: str, ifindex: int, act: int, zc: int, meta: int, xsk: int,
         source: str) -> dict[str, Any]:
    from pyxdp.kernel.netdev_genl import NetdevXdpRxMetadata, NetdevXskFlags
    return {"ifname": ifname, "ifindex": ifindex, "source": source,
            "xdp_features": {str(f.name): bool(act & f.value) for f in NetdevXdpAct},
            "xdp_zc_max_segs": zc,
            "xdp_rx_metadata_features": _names(NetdevXdpRxMetadata, meta),
            "xsk_features": _names(NetdevXskFlags, xsk)}


def _linux(ifname: str) -> dict[str, Any]:
    from pyxdp.kernel.netdev_genl import dev_get
    from pyxdp.kernel.netlink import InterfaceNotFound
    try:
        info = dev_get(ifname)
    except InterfaceNotFound as e:  # its text names the interface already
        raise CliError(f"features: {e}") from None
    except KernelError as e:
        raise CliError(f"features: {ifname}: {e}") from None
    return _doc(ifname, info.ifindex, int(info.xdp_features), info.xdp_zc_max_segs,
                int(info.xdp_rx_metadata_features), int(info.xsk_features), "kernel")


def cmd_features(ifname: str, *, pyxdp: bool = False) -> int:
    doc = pyxdp_features(ifname) if pyxdp else _linux(ifname)
    if STYLE.json:
        emit(doc)
        return 0
    width = max(len(k) for k in doc["xdp_features"]) + 2
    for name, on in doc["xdp_features"].items():
        print(f"{name + ':':<{width}}{'yes' if on else 'no'}")
    print(f"{'XDP_ZC_MAX_SEGS:':<{width}}{doc['xdp_zc_max_segs']}")
    print(f"{'XDP_RX_METADATA:':<{width}}"
          + (", ".join(n.removeprefix("NETDEV_XDP_RX_METADATA_").lower()
                       for n in doc["xdp_rx_metadata_features"]) or "none"))
    print(f"{'XSK_FEATURES:':<{width}}"
          + (", ".join(n.removeprefix("NETDEV_XSK_FLAGS_").lower()
                       for n in doc["xsk_features"]) or "none"))
    return 0
