"""``bpf_cgroup_read_xattr`` of ``fs/bpf_fs_kfuncs.c`` (Linux 6.18, ``bpf_fs_kfunc_set``,
which XDP programs may call).

``bpf_cgroup_read_xattr(cgroup, name__str, value_p)`` copies the extended attribute
``name`` of the cgroup's directory in cgroupfs into the dynptr and returns its
length. Only ``user.*`` names are read (any other is -EPERM, before anything else);
the dynptr must give its whole size as writable memory in one piece
(``__bpf_dynptr_data_rw``: -EINVAL for a null or read-only dynptr, or a packet
dynptr whose bytes span frags); then ``kernfs_xattr_get``: -ENODATA when the
directory has no such attribute, -ERANGE when the value is longer than the dynptr
(nothing written), else the value at the dynptr's start.

pyxdp's cgroups are the images of :mod:`pyxdp.vm.task_kfuncs`, each a directory of its
hierarchy's mount: the attribute is read from there with ``getxattr(2)`` when the
program runs (Python on both engines, as the other cgroup kfuncs).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

from pyxdp.net.xdp_dynptr import dynptr_direct
from pyxdp.vm.context import neg
from pyxdp.vm.dynptr import dynptr_load
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.task_kfuncs import kernel_objects

__all__ = ["FS_KFUNCS", "XATTR_NAME_MAX", "XATTR_USER_PREFIX"]

XATTR_USER_PREFIX = b"user."  # include/uapi/linux/xattr.h
XATTR_NAME_MAX = 255  # include/uapi/linux/limits.h: no attribute has a longer name


def _string(vm: Interpreter, addr: int) -> bytes:
    """The NUL-terminated string at ``addr`` (the verifier proved the NUL is there), read
    no further than one byte past the longest name an attribute may have."""
    out = bytearray()
    while len(out) <= XATTR_NAME_MAX and (b := vm.mem.load(addr + len(out), 1)) != 0:
        out.append(b)
    return bytes(out)


def cgroup_read_xattr(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_cgroup_read_xattr(cgroup, name__str, value_p)``: the value's length, or
    -EPERM, -EINVAL, -ENODATA, -ERANGE (see the module docstring)."""
    name = _string(vm, r2)
    if not name.startswith(XATTR_USER_PREFIX):
        return neg(errno.EPERM)
    size = dynptr_load(vm, r3).size  # __bpf_dynptr_size
    at = dynptr_direct(vm, r3, 0, size, True)
    if at is None:
        return neg(errno.EINVAL)
    ko = kernel_objects()
    with ko.locked():
        cg = ko.at(r1, "cgroup", "bpf_cgroup_read_xattr")
        mnt = ko.mounts().get(cg.hierarchy)
    if mnt is None or len(name) > XATTR_NAME_MAX:
        return neg(errno.ENODATA)
    try:
        value = os.getxattr(os.path.join(mnt, *cg.path), os.fsdecode(name),
                            follow_symlinks=False)
    except OSError:  # no such attribute (or the directory has gone meanwhile)
        return neg(errno.ENODATA)
    if len(value) > size:
        return neg(errno.ERANGE)
    where, off = at
    where.store_bytes(off, value)
    return len(value)


FS_KFUNCS: dict[str, Callable[..., int]] = {"bpf_cgroup_read_xattr": cgroup_read_xattr}
