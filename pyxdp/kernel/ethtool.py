"""Device offload flags through the ethtool ioctl (``net/ethtool/ioctl.c``).

Only GRO: ``SIOCETHTOOL`` with ``ETHTOOL_GGRO``/``ETHTOOL_SGRO`` and a
``struct ethtool_value`` (what ``ethtool -K DEV gro on|off`` sends through
the legacy interface). On a veth, GRO asked for by the user gives the device
NAPI without an XDP program (``veth_set_features``), so it takes
``ndo_xdp_xmit`` frames. The device is looked up in the calling thread's
network namespace.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import fcntl
import socket
import struct
from typing import Final

from pyxdp.errors import BPFUnavailable, KernelError

__all__ = ["gro", "set_gro"]

SIOCETHTOOL: Final = 0x8946
ETHTOOL_GGRO: Final = 0x2B
ETHTOOL_SGRO: Final = 0x2C
IFNAMSIZ: Final = 16


class _EthtoolValue(ctypes.Structure):
    _fields_ = (("cmd", ctypes.c_uint32), ("data", ctypes.c_uint32))


def _ioctl(ifname: str, cmd: int, data: int) -> int:
    if not 0 < len(ifname.encode()) < IFNAMSIZ:
        raise KernelError("ethtool", _errno.EINVAL, f"bad interface name {ifname!r}")
    value = _EthtoolValue(cmd, data)
    # struct ifreq: the name, then (a union holding) ifr_data, a pointer.
    req = struct.pack(f"{IFNAMSIZ}sP{40 - IFNAMSIZ - 8}x", ifname.encode(),
                      ctypes.addressof(value))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            fcntl.ioctl(s.fileno(), SIOCETHTOOL, req)
        except PermissionError as e:
            raise BPFUnavailable("ethtool", e.errno or _errno.EPERM,
                                 "setting offloads needs CAP_NET_ADMIN") from None
        except OSError as e:
            raise KernelError("ethtool", e.errno or _errno.EIO, ifname) from None
    return int(value.data)


def gro(ifname: str) -> bool:
    """Whether GRO is on for ``ifname``."""
    return bool(_ioctl(ifname, ETHTOOL_GGRO, 0))


def set_gro(ifname: str, on: bool) -> None:
    """``ethtool -K IFNAME gro on|off``."""
    _ioctl(ifname, ETHTOOL_SGRO, int(on))
