"""The host a packet's journey runs on: devices (``ip link``), XDP attachments
(``ip link set DEV xdp``), map contents, AF_XDP sockets and UDP listeners.

A :class:`Topology` is pure data, read from a small JSON or TOML file
(:meth:`Topology.load`, by the file's suffix; the same keys in both)::

    {
      "devices": [
        {"name": "eth0", "kind": "nic", "queues": 1, "mtu": 1500},
        {"name": "eth1", "kind": "nic"},
        {"name": "veth0", "kind": "veth", "peer": "veth1", "gro": false}
      ],
      "programs": [
        {"dev": "eth0", "program": "xdp_redirect_map_prog", "mode": "native"},
        {"dev": "veth1", "object": "builtin:xdp_pass"}
      ],
      "ingress": {"dev": "eth0", "queue": 0},
      "addresses": {"eth0": ["198.51.100.2/24", "2001:db8::2/64"]},
      "maps": {"tx_port": [{"key": 0, "value": {"ifindex": "@eth1"}}]},
      "xsk": [{"dev": "eth0", "queue": 0, "mode": "copy", "map": "xsks", "key": 0,
               "fill": 64, "rx_size": 2048, "consume": true}],
      "udp": [9]
    }

``devices``: a NIC (``kind`` "nic", the default) or a veth pair (``kind``
"veth" and the ``peer``'s name; the peer is made with it). Devices are made in
order, after ``lo`` (ifindex 1), a veth's peer right after it. ``programs``:
a program of the object being explained (``program``, by default the one
``-s`` picks) or of another ``object`` (a path, or ``builtin:xdp_pass``, the
trivial XDP_PASS program) on ``dev`` in ``mode`` "native" or "generic";
without a ``programs`` key the explained program sits on the ingress device.
``ingress``: the device and rx queue the packet arrives on (default the first
device, queue 0). ``addresses``: IP addresses by device (a veth's peer too),
as ``ip addr add`` gives them: the stack delivers to the host's addresses (a
frame to another one is not delivered, as in Linux with forwarding off).
``maps``: entries of the explained object's maps, ``key`` and ``value`` as
ints, hex byte strings or objects by BTF member name, with two references
resolved on the host: ``"@DEV"`` is DEV's ifindex and ``"prog:NAME"`` the id
of the object's program NAME (what ``bpf_prog.fd`` of a devmap/cpumap value
takes). ``xsk``: AF_XDP sockets
bound to ``dev``/``queue`` (``mode`` "copy" or "zerocopy"), given ``fill``
buffers (default all the fill ring holds) and put into the XSKMAP ``map`` at
``key`` when a map is named; after each packet the explainer reads the socket's
rx ring and gives the buffers back to the fill ring, as a live application
would, unless ``consume`` is false (then the ring fills up). ``udp``: ports UDP sockets listen on.

:func:`default_topology` is the one used without a file: two NICs (eth0,
ifindex 2, with the default packet's destinations 198.51.100.2/24 and
2001:db8::2/64, and eth1, 3) and a veth pair (veth0 4, veth1 5), the program
on eth0 in native mode.
"""

from __future__ import annotations

import ipaddress
import json
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyxdp.errors import PyxdpError

__all__ = ["BUILTIN_PASS", "DeviceSpec", "Ingress", "ProgramAttach", "Topology", "TopologyError",
           "XskSpec", "default_topology", "resolve_value"]

BUILTIN_PASS = "builtin:xdp_pass"
# The default topology's eth0 owns the default packet's destinations (and its MAC).
DEFAULT_ADDRESSES = ("198.51.100.2/24", "2001:db8::2/64")


MAX_TOPOLOGY_SIZE = 64 << 20
"""Bytes read at most from a topology file: /dev/zero or a FIFO must not eat memory."""


class TopologyError(PyxdpError):
    """A topology description that cannot be built (unknown key, device, value)."""


@dataclass(frozen=True)
class DeviceSpec:
    """A NIC, or a veth pair (``peer`` set)."""

    name: str
    kind: str = "nic"
    peer: str | None = None
    mtu: int = 1500
    queues: int = 1
    gro: bool = False


@dataclass(frozen=True)
class ProgramAttach:
    """``program`` (None: the explained one) of ``obj`` (None: the explained object) on ``dev``."""

    dev: str
    program: str | None = None
    obj: str | None = None
    mode: str = "native"


@dataclass(frozen=True)
class XskSpec:
    """An AF_XDP socket bound to ``dev``/``queue``, optionally in XSKMAP ``map`` at ``key``."""

    dev: str
    queue: int = 0
    mode: str = "copy"
    map: str | None = None
    key: int = 0
    fill: int | None = None
    rx_size: int = 2048
    consume: bool = True


@dataclass(frozen=True)
class Ingress:
    dev: str
    queue: int = 0


@dataclass(frozen=True)
class Topology:
    """A host to explain a packet on (module doc for the file format)."""

    devices: tuple[DeviceSpec, ...]
    ingress: Ingress
    programs: tuple[ProgramAttach, ...] | None = None
    maps: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    xsk: tuple[XskSpec, ...] = ()
    udp: tuple[int, ...] = ()
    addresses: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = self.device_names
        if len(set(names)) != len(names):
            raise TopologyError("a device name is used twice")
        for dev in self.addresses:
            if dev not in names:
                raise TopologyError(f"addresses of unknown device {dev!r}")
        if self.ingress.dev not in names:
            raise TopologyError(f"ingress device {self.ingress.dev!r} is not in devices")
        for p in self.programs or ():
            if p.dev not in names:
                raise TopologyError(f"program on unknown device {p.dev!r}")
            if p.mode not in ("native", "generic"):
                raise TopologyError(f"program mode {p.mode!r}: native or generic")
        for x in self.xsk:
            if x.dev not in names:
                raise TopologyError(f"AF_XDP socket on unknown device {x.dev!r}")
            if x.mode not in ("copy", "zerocopy"):
                raise TopologyError(f"AF_XDP mode {x.mode!r}: copy or zerocopy")
        for port in self.udp:
            if not 0 < port < 65536:
                raise TopologyError(f"UDP port {port} is not 1..65535")

    @property
    def device_names(self) -> list[str]:
        out: list[str] = []
        for d in self.devices:
            out.append(d.name)
            if d.peer is not None:
                out.append(d.peer)
        return out

    def attachments(self, program: str) -> tuple[ProgramAttach, ...]:
        """The programs to attach, ``program`` standing for the explained one."""
        if self.programs is None:
            return (ProgramAttach(self.ingress.dev, program),)
        return tuple(p if p.program is not None or p.obj is not None
                     else ProgramAttach(p.dev, program, None, p.mode) for p in self.programs)

    @classmethod
    def load(cls, path: str | Path) -> Topology:
        """Read a topology file (``.toml``: TOML, anything else: JSON)."""
        p = Path(path)
        try:
            with open(p, "rb") as fh:
                text = fh.read(MAX_TOPOLOGY_SIZE + 1)  # /dev/zero ends here
        except (OSError, ValueError) as e:  # ValueError: a NUL in the path
            raise TopologyError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}"
                                ) from None
        if len(text) > MAX_TOPOLOGY_SIZE:
            raise TopologyError(f"{path}: larger than the {MAX_TOPOLOGY_SIZE >> 20} MiB "
                                "topology file limit")
        try:
            doc = tomllib.loads(text.decode()) if p.suffix == ".toml" else json.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise TopologyError(f"{path}: {e}") from None
        return cls.from_dict(doc, where=str(path))

    @classmethod
    def from_dict(cls, doc: Any, *, where: str = "topology") -> Topology:
        if not isinstance(doc, dict):
            raise TopologyError(f"{where}: expected an object")
        _known(doc, ("devices", "programs", "ingress", "maps", "xsk", "udp", "addresses"), where)
        raw_devs = doc.get("devices")
        if not isinstance(raw_devs, list) or not raw_devs:
            raise TopologyError(f"{where}: 'devices' must be a non-empty list")
        devices = []
        for d in raw_devs:
            _known(d, ("name", "kind", "peer", "mtu", "queues", "gro"), f"{where}: device")
            kind = d.get("kind", "nic")
            if kind not in ("nic", "veth"):
                raise TopologyError(f"{where}: device kind {kind!r}: nic or veth")
            if (kind == "veth") != ("peer" in d):
                raise TopologyError(f"{where}: a veth needs a 'peer' (and only a veth has one)")
            devices.append(DeviceSpec(_str(d, "name", where), kind, d.get("peer"),
                                      _int(d, "mtu", 1500, where), _int(d, "queues", 1, where),
                                      bool(d.get("gro", False))))
        programs = None
        if "programs" in doc:
            programs = tuple(_program(p, where) for p in _list(doc, "programs", where))
        ing = doc.get("ingress", {"dev": devices[0].name})
        _known(ing, ("dev", "queue"), f"{where}: ingress")
        ingress = Ingress(_str(ing, "dev", where), _int(ing, "queue", 0, where))
        maps = doc.get("maps", {})
        if not isinstance(maps, dict) or not all(isinstance(v, list) for v in maps.values()):
            raise TopologyError(f"{where}: 'maps' must map map names to entry lists")
        xsk = []
        for x in _list(doc, "xsk", where):
            _known(x, ("dev", "queue", "mode", "map", "key", "fill", "rx_size", "consume"),
                   f"{where}: xsk")
            fill = x.get("fill")
            xsk.append(XskSpec(_str(x, "dev", where), _int(x, "queue", 0, where),
                               x.get("mode", "copy"), x.get("map"), _int(x, "key", 0, where),
                               None if fill is None else _int(x, "fill", 0, where),
                               _int(x, "rx_size", 2048, where), bool(x.get("consume", True))))
        udp = tuple(_port(p, where) for p in _list(doc, "udp", where))
        return cls(tuple(devices), ingress, programs, maps, tuple(xsk), udp,
                   _addresses(doc.get("addresses", {}), where))


def _program(p: Any, where: str) -> ProgramAttach:
    _known(p, ("dev", "program", "object", "mode"), f"{where}: program")
    return ProgramAttach(_str(p, "dev", where), p.get("program"), p.get("object"),
                         p.get("mode", "native"))


def _known(d: Any, keys: Sequence[str], where: str) -> None:
    if not isinstance(d, dict):
        raise TopologyError(f"{where}: expected an object, not {type(d).__name__}")
    extra = sorted(set(d) - set(keys))
    if extra:
        raise TopologyError(f"{where}: unknown key(s) {extra} (known: {', '.join(keys)})")


def _str(d: Mapping[str, Any], key: str, where: str) -> str:
    v = d.get(key)
    if not isinstance(v, str) or not v:
        raise TopologyError(f"{where}: {key!r} must be a non-empty string")
    return v


def _addresses(v: Any, where: str) -> dict[str, tuple[str, ...]]:
    """``addresses``: device name -> "198.51.100.2/24"-style addresses."""
    if not isinstance(v, dict) or not all(
            isinstance(a, list) and all(isinstance(x, str) for x in a) for a in v.values()):
        raise TopologyError(f"{where}: 'addresses' must map device names to lists of "
                            "addresses like \"198.51.100.2/24\"")
    for a in (x for xs in v.values() for x in xs):
        try:
            ipaddress.ip_interface(a)
        except ValueError:
            raise TopologyError(f"{where}: {a!r} is not an address/prefix length") from None
    return {str(dev): tuple(xs) for dev, xs in v.items()}


def _int(d: Mapping[str, Any], key: str, default: int, where: str) -> int:
    v = d.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise TopologyError(f"{where}: {key!r} must be a non-negative integer")
    return v


def _port(v: object, where: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 0xFFFF:
        raise TopologyError(f"{where}: 'udp' lists ports (0..65535), not {v!r:.40}")
    return v


def _list(d: Mapping[str, Any], key: str, where: str) -> list[Any]:
    v = d.get(key, [])
    if not isinstance(v, list):
        raise TopologyError(f"{where}: {key!r} must be a list")
    return v


def resolve_value(v: Any, ifindex_of: Callable[[str], int | None],
                  prog_id_of: Callable[[str], int | None]) -> Any:
    """A map file's key or value for ``Map.update``: ``"@DEV"`` becomes DEV's ifindex,
    ``"prog:NAME"`` what ``bpf_prog.fd`` takes for program NAME, other strings hex
    bytes; objects and lists member by member."""
    if isinstance(v, str):
        if v.startswith("@"):
            i = ifindex_of(v[1:])
            if i is None:
                raise TopologyError(f"no device {v[1:]!r} for {v!r}")
            return i
        if v.startswith("prog:"):
            p = prog_id_of(v[5:])
            if p is None:
                raise TopologyError(f"no program {v[5:]!r} for {v!r}")
            return p
        try:
            return bytes.fromhex(v.replace("0x", "").replace(":", " "))
        except ValueError:
            raise TopologyError(f"{v!r} is not a hex byte string, @DEV or prog:NAME") from None
    if isinstance(v, dict):
        return {k: resolve_value(x, ifindex_of, prog_id_of) for k, x in v.items()}
    if isinstance(v, list):
        return [resolve_value(x, ifindex_of, prog_id_of) for x in v]
    return v


def default_topology() -> Topology:
    """Two NICs and a veth pair; the program on eth0 (native), the packet on eth0 queue 0."""
    return Topology((DeviceSpec("eth0"), DeviceSpec("eth1"),
                     DeviceSpec("veth0", "veth", "veth1")), Ingress("eth0"),
                    addresses={"eth0": DEFAULT_ADDRESSES})
