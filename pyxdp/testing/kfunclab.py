"""What the kfunc differential tests share: a program reports what it saw by storing
registers into a ``BPF_MAP_TYPE_HASH`` named ``hash`` (u32 key, u64 value), and the test
reads that map back from Linux and from pyxdp alike. Kernel objects' member offsets come
from the BTF pyxdp lays those objects out by (the running kernel's, else the shipped one).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from pyxdp.btf.btf import BtfKind
from pyxdp.btf.struct_access import member_offset
from pyxdp.btf.vmlinux import core_target
from pyxdp.collection import Collection

__all__ = ["hash_put", "hash_values", "member_off"]


def member_off(struct_name: str, member: str) -> int:
    """The byte offset of ``struct_name.member`` in the kernel BTF."""
    btf = core_target()
    tid = btf.find(struct_name, BtfKind.STRUCT)
    if tid is None:
        raise LookupError(f"the kernel BTF ({btf.path}) has no struct {struct_name}")
    got = member_offset(btf, tid, member)
    if got is None:
        raise LookupError(f"struct {struct_name} has no member {member}")
    return got[0]


def hash_put(key: int, reg: str) -> str:
    """Assembly for ``hash[key] = reg`` (a u64; clobbers r1-r4 and fp-16..fp-1)."""
    return (f"*(u32 *)(r10 - 4) = {key}\n*(u64 *)(r10 - 16) = {reg}\nr1 = MAP(hash)\n"
            "r2 = r10\nr2 += -4\nr3 = r10\nr3 += -16\nr4 = 0\ncall 2\n")


def hash_values(coll: Collection, keys: Iterable[int], mask: int = (1 << 64) - 1
                ) -> dict[int, int | None]:
    """``hash[key] & mask`` for each key, None where the program stored nothing."""
    h = coll.maps["hash"].handle
    out: dict[int, int | None] = {}
    for k in keys:
        v = h.lookup(struct.pack("<I", k))
        out[k] = struct.unpack("<Q", v)[0] & mask if v is not None else None
    return out
