"""The system-keyring kfuncs of ``kernel/bpf/helpers.c`` (Linux 6.18, ``generic_btf_ids``).

``bpf_lookup_system_key(id)`` gives a referenced ``struct bpf_key *`` naming one of the
kernel's built-in keyrings by its ``include/linux/verification.h`` id (0 the builtin
keyring, 1 ``VERIFY_USE_SECONDARY_KEYRING``, 2 ``VERIFY_USE_PLATFORM_KEYRING``;
``system_keyring_id_check`` refuses any other id, and the kfunc gives NULL).
The key is not looked up: Linux stores the id itself in ``key`` and ``has_ref`` false
(no reference to drop), and ``bpf_key_put(bkey)`` frees the struct. Its sleepable
sibling ``bpf_lookup_user_key`` is refused by the verifier (an XDP program never sleeps).

Linux takes the 16 bytes from kmalloc; pyxdp takes them from the object arena of
:mod:`pyxdp.vm.memalloc` (pyxdp's slab: ``bpf_get_kmem_cache`` answers for it), laid
out at the kernel BTF's offsets. Both kfuncs run in Python on both engines.
"""

from __future__ import annotations

from collections.abc import Callable

from pyxdp.btf.btf import BtfKind
from pyxdp.btf.struct_access import member_offset
from pyxdp.btf.vmlinux import core_target
from pyxdp.errors import HelperFault
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.memalloc import map_arena

__all__ = ["KEY_KFUNCS", "VERIFY_USE_PLATFORM_KEYRING"]

# include/linux/verification.h: the highest system keyring id
VERIFY_USE_PLATFORM_KEYRING = 2
_LAYOUT: dict[str, tuple[int, int]] = {}


def _layout() -> dict[str, tuple[int, int]]:
    """struct bpf_key's size and its members' offsets and sizes, from the kernel BTF."""
    if not _LAYOUT:
        btf = core_target()
        tid = btf.find("bpf_key", BtfKind.STRUCT)
        got = {n: member_offset(btf, tid, n) for n in ("key", "has_ref")} if tid else {}
        if tid is None or any(v is None for v in got.values()):
            raise HelperFault(f"the kernel BTF ({btf.path}) has no struct bpf_key with key "
                              "and has_ref: pyxdp cannot lay it out")
        _LAYOUT.update({n: v for n, v in got.items() if v is not None})
        _LAYOUT["size"] = (0, btf.type_by_id(tid).size_type)
    return _LAYOUT


def lookup_system_key(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_lookup_system_key(id)``: a new struct bpf_key holding ``id``, NULL for an id
    that names no system keyring (or when the arena is full, as kmalloc failing)."""
    if r1 > VERIFY_USE_PLATFORM_KEYRING:
        return 0
    lay = _layout()
    arena = map_arena(vm)
    addr = arena.alloc(lay["size"][1])
    if addr:  # the arena zeroes it: has_ref is false
        off, size = lay["key"]
        vm.mem.store(addr + off, size, r1)
    return addr


def key_put(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_key_put(bkey)``: a system key holds no reference; the struct is freed."""
    map_arena(vm).free(r1)
    return 0


KEY_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_lookup_system_key": lookup_system_key,
    "bpf_key_put": key_put,
}
