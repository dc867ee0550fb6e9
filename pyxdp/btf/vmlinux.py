"""The kernel's own BTF (``/sys/kernel/btf/vmlinux``), read lazily, and where CO-RE looks.

vmlinux BTF holds some 130,000 types; decoding all of them in Python takes
seconds, yet a loader asks about a handful (the structs a CO-RE relocation
names, a kfunc, a tracepoint). :class:`BtfIndex` finds where every record
starts and its name in one quick pass and decodes a record when asked.

CO-RE's target BTF (:func:`core_target`), as libbpf picks it: a file the user
names (``btf_custom_path``), else the running kernel's BTF, else the BTF of the
kernel types XDP programs use that pyxdp ships (``xdp_types.btf``, made from a
6.18 kernel by ``python -m pyxdp.btf.vmlinux``), so CO-RE objects run without root and
without Linux.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
from array import array
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pyxdp.asm.insn import decode, encode
from pyxdp.btf import btf as btf_source
from pyxdp.btf.btf import (
    Btf,
    BtfKind,
    BtfType,
    parse_type,
    record_offsets,
    split_blob,
)
from pyxdp.btf.core import apply_core_relos
from pyxdp.diskcache import disk_cache_dir, file_digest, load_sealed, sources_digest, store_sealed
from pyxdp.errors import ObjectError, PyxdpError
from pyxdp.spec import ProgramSpec

__all__ = ["SHIPPED_BTF", "VMLINUX_BTF", "BtfIndex", "core_target", "kernel_btf_index",
           "missing_ksym", "relocate", "target_digests",
           "kernel_lacks_kfuncs", "subset"]

VMLINUX_BTF = Path("/sys/kernel/btf/vmlinux")
SHIPPED_BTF = Path(__file__).with_name("xdp_types.btf")


#: The largest BTF file read (all of vmlinux is a few MiB): past it a path is an endless
#: or wrong file (/dev/zero), refused in one line.
MAX_BTF_SIZE = 64 << 20


class BtfIndex:
    """A BTF blob whose records are decoded on first use (same queries as :class:`Btf`)."""

    def __init__(self, data: bytes, path: str = "") -> None:
        self.path = path
        self._types, self.strings = split_blob(data, path, ".BTF")
        self._offsets, self._name_offs = _record_offsets(self._types)
        self._cache: dict[int, BtfType] = {}
        self._names: npt.NDArray[np.uint32] | None = None  # name_off by type id
        self._found: dict[str, tuple[int, ...]] = {}  # names already searched for

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> BtfIndex:
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_BTF_SIZE + 1)  # /dev/zero ends here, not in MemoryError
        except (OSError, ValueError) as e:  # ValueError: a NUL in the path
            raise ObjectError(f"cannot read BTF: {getattr(e, 'strerror', None) or e}",
                              path=str(path)) from None
        if len(data) > MAX_BTF_SIZE:
            raise ObjectError(f"larger than {MAX_BTF_SIZE >> 20} MiB: not a BTF file",
                              path=str(path))
        return cls(data, str(path))

    def __len__(self) -> int:
        return len(self._offsets)

    def type_by_id(self, type_id: int) -> BtfType:
        t = self._cache.get(type_id)
        if t is not None:
            return t
        if not 0 < type_id < len(self._offsets):
            if type_id == 0:
                return BtfType(id=0, kind=BtfKind.UNKN, name="", name_off=0)
            raise ObjectError(f"bad BTF: no type [{type_id}]", path=self.path, section=".BTF")
        t, _ = parse_type(self._types, self._offsets[type_id], type_id, self.strings,
                          self.path, ".BTF")
        self._cache[type_id] = t
        return t

    def find_all(self, name: str) -> tuple[int, ...]:
        """Every type id named ``name``."""
        if not name:
            return ()
        hit = self._found.get(name)
        if hit is not None:
            return hit
        if self._names is None:  # a vector compare per name, not a dict of 130,000 entries
            self._names = np.array(self._name_offs, dtype=np.uint32)
        needle = b"\0" + name.encode() + b"\0"
        out: list[int] = []
        pos = self.strings.find(needle)
        while pos >= 0:
            out.extend(np.flatnonzero(self._names == pos + 1).tolist())
            pos = self.strings.find(needle, pos + 1)
        found = self._found[name] = tuple(sorted(out))
        return found

    def find_flavours(self, name: str) -> tuple[int, ...]:
        """Every type id named ``name`` or ``name___<flavour>`` (CO-RE's candidates)."""
        out = list(self.find_all(name))
        needle = b"\0" + name.encode() + b"___"
        pos = self.strings.find(needle)
        while pos >= 0:
            end = self.strings.find(b"\0", pos + 1)
            out.extend(self.find_all(self.strings[pos + 1:end].decode()))
            pos = self.strings.find(needle, pos + 1)
        return tuple(sorted(set(out)))

    def find(self, name: str, kind: BtfKind | None = None) -> int | None:
        for tid in self.find_all(name):
            if kind is None or self.type_by_id(tid).kind is kind:
                return tid
        return None


# Type sections above this size have their record offsets kept in the disk cache.
_CACHED_ABOVE = 1 << 20
_OFFSETS_FORMAT = b"pyxdp-btf-offsets-2"  # 2: sealed


def _record_offsets(types: bytes) -> tuple[list[int], list[int]]:
    """:func:`~pyxdp.btf.btf.record_offsets`, kept in pyxdp's disk cache
    (:mod:`pyxdp.diskcache`) for a large section: walking vmlinux's 130,000 records
    takes about 0.1 s, hashing and reading them back 10 ms. The key is the section's
    bytes and the source of the module that walks them."""
    if len(types) < _CACHED_ABOVE:
        return record_offsets(types)
    where = disk_cache_dir()
    walker = Path(btf_source.__file__).read_bytes()
    key = hashlib.sha256(_OFFSETS_FORMAT + hashlib.sha256(walker).digest() + types).digest()
    path = where / "btf" / key.hex() if where is not None else None
    if path is not None:
        body = load_sealed(path, key)
        if body is not None and len(body) % 8 == 0:
            both = array("I")
            both.frombytes(body)
            half = len(both) // 2
            return both[:half].tolist(), both[half:].tolist()
    offsets, names = record_offsets(types)
    if path is not None:
        store_sealed(path, key, array("I", offsets + names).tobytes())
    return offsets, names


@cache
def kernel_btf_index() -> BtfIndex | None:
    """The running kernel's BTF (one index per process), or None where there is none."""
    try:
        return BtfIndex.open(VMLINUX_BTF) if os.access(VMLINUX_BTF, os.R_OK) else None
    except ObjectError:
        return None


def kernel_lacks_kfuncs(names: Iterable[str]) -> list[str]:
    """Of kfuncs ``names``, those the running kernel's BTF has no function of (all of
    them where there is no kernel BTF): libbpf refuses an object calling one."""
    kernel = kernel_btf_index()
    return [n for n in names if kernel is None or kernel.find(n, BtfKind.FUNC) is None]


@cache
def _index_of(path: str) -> BtfIndex:
    return BtfIndex.open(path)


def missing_ksym(prog: str, name: str) -> PyxdpError:
    """libbpf's failure for a kfunc extern the kernel's BTF does not have
    (``bpf_object__resolve_ksyms_btf_id``): the object does not load, before any verifier."""
    return PyxdpError(f"program {prog!r}: extern (func ksym) {name!r}: not found in kernel BTF")


def core_target(path: str | os.PathLike[str] | None = None) -> BtfIndex:
    """The BTF CO-RE relocations resolve against (see the module doc for the order)."""
    if path is not None:
        return _index_of(os.fspath(path))
    return kernel_btf_index() or _index_of(str(SHIPPED_BTF))


def target_digests(path: str | os.PathLike[str] | None = None) -> list[bytes | None] | None:
    """The digests of every file :func:`core_target` may read for ``path`` (``path``
    itself, the running kernel's BTF, the shipped one; None: absent or unreadable), each
    kept by its file identity (:func:`pyxdp.diskcache.file_digest`): what a result found
    in the target depends on, known without reading the kernel's 5 MB. None when
    ``path`` has no digest (not a regular file: nothing found in it may be kept)."""
    own = file_digest(path) if path is not None else b""
    if own is None:
        return None
    return [own, file_digest(VMLINUX_BTF), file_digest(SHIPPED_BTF)]


_RELOCATED_FORMAT = b"pyxdp-core-relocated-1"


def relocate(spec: ProgramSpec, btf: Btf | None, path: str | os.PathLike[str] | None = None
             ) -> ProgramSpec:
    """``spec`` with its CO-RE relocations applied against :func:`core_target` of ``path``
    (an unresolved one raises), the relocated instructions kept in pyxdp's disk cache:
    a process loading the same object against the same target files does not read the
    kernel's BTF (30 ms, and its first type look-ups as many). The key is the program,
    the object's BTF, :func:`target_digests` and pyxdp's sources."""
    if not spec.core_relos:
        return spec
    where = disk_cache_dir()
    entry = key = None
    digests = target_digests(path) if where is not None else None
    if digests is not None:
        assert where is not None
        try:
            blob = pickle.dumps((spec, btf.raw if btf is not None else None, digests),
                                protocol=5)
        except (pickle.PicklingError, TypeError, AttributeError, ValueError):
            blob = None
        if blob is not None:
            key = hashlib.sha256(_RELOCATED_FORMAT + sources_digest() + blob).digest()
            entry = where / "relocated" / key.hex()
            raw = load_sealed(entry, key)
            if raw is not None and len(raw) == 8 * len(spec.insns):
                return dataclasses.replace(spec, insns=decode(raw), core_relos=())
    target = core_target(path)
    out = apply_core_relos(spec, btf, target, target_name=target.path, poison=False)
    if entry is not None and key is not None:
        store_sealed(entry, key, encode(out.insns))
    return out


def _by_value(source: BtfIndex | Btf, roots: list[int]) -> set[int]:
    """The types ``roots`` hold by value: every type they reach without crossing a pointer."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        tid = stack.pop()
        if tid == 0 or tid in seen:
            continue
        seen.add(tid)
        t = source.type_by_id(tid)
        if t.kind is not BtfKind.PTR:
            stack.extend(t.references())
    return seen


def subset(source: BtfIndex | Btf, roots: list[tuple[str, BtfKind]],
           shallow: list[tuple[str, BtfKind]] | None = None) -> Btf:
    """A self-contained BTF of the ``roots`` (name, kind) and every type they reach,
    renumbered in the order first reached, with its own string section. The
    ``shallow`` roots (large kernel structs) come whole with what they hold by value;
    a named struct or union they reach only through a pointer is a forward
    declaration (``BTF_KIND_FWD``) of that name."""
    order: list[int] = []
    seen: set[int] = set()
    stack: list[int] = []
    fwd: set[int] = set()  # emitted as forward declarations
    shallow_ids: list[int] = []
    for name, kind in [*roots, *(shallow or [])]:
        tid = source.find(name, kind)
        if tid is None:
            raise ObjectError(f"no {kind.name} {name!r} in the source BTF", section=".BTF")
        stack.append(tid)
    shallow_ids = stack[len(roots):]
    whole = _by_value(source, shallow_ids) if shallow_ids else set()
    deep = _by_value(source, stack[:len(roots)])
    stack.reverse()
    while stack:
        tid = stack.pop()
        if tid == 0 or tid in seen:
            continue
        seen.add(tid)
        order.append(tid)
        t = source.type_by_id(tid)
        if shallow_ids and t.kind in (BtfKind.STRUCT, BtfKind.UNION) and t.name and \
                tid not in whole and tid not in deep:
            fwd.add(tid)  # reached through a pointer only
            continue
        stack.extend(reversed(list(t.references())))
    new_id = {old: i + 1 for i, old in enumerate(order)}
    new_id[0] = 0
    strings = bytearray(b"\0")
    offsets: dict[str, int] = {"": 0}

    def s(name: str) -> int:
        if name not in offsets:
            offsets[name] = len(strings)
            strings.extend(name.encode() + b"\0")
        return offsets[name]

    from dataclasses import replace
    types = [Btf.parse(_EMPTY).types[0]]
    for old in order:
        t = source.type_by_id(old)
        if old in fwd:
            types.append(BtfType(id=new_id[old], kind=BtfKind.FWD, name=t.name,
                                 name_off=s(t.name), kind_flag=t.kind is BtfKind.UNION))
            continue
        kw: dict[str, object] = {"id": new_id[old], "name_off": s(t.name)}
        if t.kind not in _SIZED_KINDS and t.kind is not BtfKind.FWD:
            kw["size_type"] = new_id[t.size_type]
        if t.array is not None:
            kw["array"] = replace(t.array, type=new_id[t.array.type],
                                  index_type=new_id[t.array.index_type])
        if t.members:
            kw["members"] = tuple(replace(m, name_off=s(m.name), type=new_id[m.type])
                                  for m in t.members)
        if t.enum_values:
            kw["enum_values"] = tuple(replace(v, name_off=s(v.name)) for v in t.enum_values)
        if t.params:
            kw["params"] = tuple(replace(p, name_off=s(p.name), type=new_id[p.type])
                                 for p in t.params)
        types.append(replace(t, **kw))  # type: ignore[arg-type]
    return Btf(types=tuple(types), strings=bytes(strings))


_SIZED_KINDS = frozenset({BtfKind.INT, BtfKind.STRUCT, BtfKind.UNION, BtfKind.ENUM,
                          BtfKind.ENUM64, BtfKind.DATASEC, BtfKind.FLOAT})
# A valid BTF blob with no types (header + the empty string).
_EMPTY = (b"\x9f\xeb\x01\x00\x18\x00\x00\x00" + b"\x00" * 8 + b"\x00\x00\x00\x00"
          + b"\x01\x00\x00\x00" + b"\x00")


# The kernel types pyxdp ships for CO-RE without a kernel: what XDP programs built
# against vmlinux.h read (headers, the context, the XDP uapi structs and enums).
XDP_TYPE_ROOTS: tuple[tuple[str, BtfKind], ...] = (
    ("xdp_md", BtfKind.STRUCT), ("xdp_action", BtfKind.ENUM),
    ("ethhdr", BtfKind.STRUCT), ("vlan_hdr", BtfKind.STRUCT), ("arphdr", BtfKind.STRUCT),
    ("iphdr", BtfKind.STRUCT), ("ipv6hdr", BtfKind.STRUCT), ("ipv6_opt_hdr", BtfKind.STRUCT),
    ("frag_hdr", BtfKind.STRUCT), ("tcphdr", BtfKind.STRUCT), ("udphdr", BtfKind.STRUCT),
    ("icmphdr", BtfKind.STRUCT), ("icmp6hdr", BtfKind.STRUCT), ("gre_base_hdr", BtfKind.STRUCT),
    ("bpf_fib_lookup", BtfKind.STRUCT), ("bpf_devmap_val", BtfKind.STRUCT),
    ("bpf_cpumap_val", BtfKind.STRUCT), ("bpf_sock_tuple", BtfKind.STRUCT),
    ("bpf_map_type", BtfKind.ENUM), ("bpf_func_id", BtfKind.ENUM),
)
# The kernel structs behind the XDP context (bpf_cast_to_kern_ctx), a flowtable's
# flows (bpf_xdp_flow_lookup), the task and cgroup kfuncs' objects (a task's VMAs too),
# the struct bpf_key of bpf_lookup_system_key, bpf_get_kmem_cache's struct
# kmem_cache and a device's struct net (dev->nd_net.net->ns.inum): whole, with the
# structs they point to as forward declarations.
XDP_KERN_ROOTS: tuple[tuple[str, BtfKind], ...] = (
    ("xdp_buff", BtfKind.STRUCT), ("xdp_rxq_info", BtfKind.STRUCT),
    ("xdp_txq_info", BtfKind.STRUCT), ("net_device", BtfKind.STRUCT),
    ("flow_offload", BtfKind.STRUCT), ("task_struct", BtfKind.STRUCT),
    ("css_set", BtfKind.STRUCT), ("cgroup", BtfKind.STRUCT),
    ("kernfs_node", BtfKind.STRUCT), ("bpf_key", BtfKind.STRUCT),
    ("kmem_cache", BtfKind.STRUCT), ("vm_area_struct", BtfKind.STRUCT),
    ("net", BtfKind.STRUCT),
)


def write_shipped(source: BtfIndex | None = None, path: Path = SHIPPED_BTF) -> int:
    """Write ``xdp_types.btf`` from the running kernel's BTF; returns its size."""
    src = source or kernel_btf_index()
    if src is None:
        raise ObjectError("no kernel BTF to take the XDP types from", path=str(VMLINUX_BTF))
    blob = subset(src, list(XDP_TYPE_ROOTS), list(XDP_KERN_ROOTS)).encode()
    path.write_bytes(blob)
    return len(blob)


if __name__ == "__main__":  # python -m pyxdp.btf.vmlinux: regenerate xdp_types.btf
    print(f"{SHIPPED_BTF.name}: {write_shipped()} bytes from {VMLINUX_BTF}")
