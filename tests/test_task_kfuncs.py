"""The task and cgroup kfuncs (pyxdp/vm/task_kfuncs.py) called directly: lookups of this
process and its cgroups as procfs and cgroupfs show them, the NULL paths, references,
and a pointer that is no object of pyxdp's. tests/kernel/test_task_kfuncs_kernel.py
holds them to Linux."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pyxdp.asm.assembler import assemble
from pyxdp.btf.btf import BtfKind
from pyxdp.btf.struct_access import member_offset
from pyxdp.btf.vmlinux import core_target
from pyxdp.errors import HelperFault
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.memory import Region
from pyxdp.vm.task_kfuncs import TASK_BASE, TASK_KFUNCS, cgroup_mounts, kernel_objects


def _call(vm: Interpreter, name: str, *args: int) -> int:
    regs = (list(args) + [0] * 5)[:5]
    return TASK_KFUNCS[name](vm, *regs)


def _member(vm: Interpreter, addr: int, struct_name: str, member: str) -> bytes:
    btf = core_target()
    tid = btf.find(struct_name, BtfKind.STRUCT)
    assert tid is not None
    got = member_offset(btf, tid, member)
    assert got is not None
    return vm.mem.read(addr + got[0], got[1])


def _read(vm: Interpreter, addr: int, struct_name: str, member: str) -> int:
    return int.from_bytes(_member(vm, addr, struct_name, member), "little")


def test_task_from_pid_reads_procfs() -> None:
    vm = Interpreter(assemble("r0 = 0\nexit"))
    me = _call(vm, "bpf_task_from_pid", os.getpid())
    assert me >= TASK_BASE
    assert _read(vm, me, "task_struct", "pid") == os.getpid()
    assert _read(vm, me, "task_struct", "tgid") == os.getpid()
    comm = Path(f"/proc/{os.getpid()}/comm").read_text().strip().encode()[:15]
    assert _member(vm, me, "task_struct", "comm").rstrip(b"\0") == comm
    parent = _read(vm, me, "task_struct", "real_parent")
    assert _read(vm, parent, "task_struct", "pid") == os.getppid()
    assert _read(vm, me, "task_struct", "group_leader") == me
    init = _call(vm, "bpf_task_from_pid", 1)
    idle = _read(vm, init, "task_struct", "real_parent")
    assert _read(vm, idle, "task_struct", "pid") == 0  # swapper/0, its own real parent
    assert _read(vm, idle, "task_struct", "real_parent") == idle
    ko = kernel_objects()
    obj = ko.at(me, "task", "test")
    assert obj.refs >= 1
    before = obj.refs
    _call(vm, "bpf_task_release", me)
    assert obj.refs == before - 1


@pytest.mark.parametrize("pid", [0, -1, 0x7FFF_FFFF])
def test_task_from_pid_null(pid: int) -> None:
    vm = Interpreter(assemble("r0 = 0\nexit"))
    assert _call(vm, "bpf_task_from_pid", pid & 0xFFFF_FFFF) == 0
    assert _call(vm, "bpf_task_from_vpid", pid & 0xFFFF_FFFF) == 0


def test_cgroups_by_id_ancestor_and_task_under() -> None:
    mnt = cgroup_mounts().get(0)
    if mnt is None:
        pytest.skip("no cgroup v2 hierarchy mounted")
    vm = Interpreter(assemble("r0 = 0\nexit"))
    root = _call(vm, "bpf_cgroup_from_id", os.stat(mnt).st_ino)
    assert root and _read(vm, root, "cgroup", "level") == 0
    kn = _read(vm, root, "cgroup", "kn")
    assert _read(vm, kn, "kernfs_node", "id") == os.stat(mnt).st_ino
    assert _call(vm, "bpf_cgroup_ancestor", root, 0) == root
    assert _call(vm, "bpf_cgroup_ancestor", root, 1) == 0  # above its level
    assert _call(vm, "bpf_cgroup_from_id", 0) == 0
    assert _call(vm, "bpf_cgroup_from_id", 1 << 62) == 0
    me = _call(vm, "bpf_task_from_pid", os.getpid())
    assert _call(vm, "bpf_task_under_cgroup", me, root) == 1
    assert _call(vm, "bpf_task_get_cgroup1", me, 0) == 0  # the v2 hierarchy is not v1
    v1 = [int(h) for h, _, _ in (ln.split(":", 2) for ln in
                                 Path("/proc/self/cgroup").read_text().splitlines()) if int(h)]
    for h in v1:
        cg = _call(vm, "bpf_task_get_cgroup1", me, h)
        if cg:  # a v1 cgroup is never the v2 task's ancestor
            assert _call(vm, "bpf_task_under_cgroup", me, cg) == 0


def test_not_an_object_is_a_fault() -> None:
    vm = Interpreter(assemble("r0 = 0\nexit"))
    for name, addr in (("bpf_task_release", TASK_BASE + 8), ("bpf_cgroup_acquire", 0),
                       ("bpf_task_acquire", 0x1234)):
        with pytest.raises(HelperFault, match="is not a struct"):
            _call(vm, name, addr)
    me = _call(vm, "bpf_task_from_pid", os.getpid())
    with pytest.raises(HelperFault, match="struct cgroup"):
        _call(vm, "bpf_cgroup_release", me)


def _walk(vm: Interpreter, it: int, task: int, flags: int, most: int = 4) -> list[int]:
    assert _call(vm, "bpf_iter_task_new", it, task, flags) == 0
    out = []
    while len(out) < most and (t := _call(vm, "bpf_iter_task_next", it)):
        out.append(_read(vm, t, "task_struct", "pid"))
    _call(vm, "bpf_iter_task_destroy", it)
    return out


def test_task_iterator() -> None:
    vm = Interpreter(assemble("r0 = 0\nexit"))
    it = 0x1000
    vm.mem.add(Region("iterator", it, bytearray(24)))
    procs = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    assert _walk(vm, it, 0, 0) == [0, *procs[:3]]  # the idle task, then pid order
    assert _walk(vm, it, 0, 1)[:2] == [0, procs[0]]
    me = _call(vm, "bpf_task_from_pid", os.getpid())
    tids = sorted(int(t) for t in os.listdir(f"/proc/{os.getpid()}/task"))
    assert _walk(vm, it, me, 2, 64) == tids
    for task, flags in ((0, 2), (me, 3), (0, -1 & 0xFFFF_FFFF)):
        assert _call(vm, "bpf_iter_task_new", it, task, flags) == -22 & 0xFFFF_FFFF
        assert _call(vm, "bpf_iter_task_next", it) == 0  # a failed new gives nothing


def test_send_signal_task_refusals() -> None:
    """What bpf_send_signal_task refuses before it signals: a pid type but PID and TGID,
    the global init, a kernel thread (kthreadd), a signal above 64; signal 0 only checks."""
    vm = Interpreter(assemble("r0 = 0\nexit"))
    me = _call(vm, "bpf_task_from_pid", os.getpid())
    init = _call(vm, "bpf_task_from_pid", 1)
    kthreadd = _call(vm, "bpf_task_from_pid", 2)
    m32 = 0xFFFF_FFFF
    assert _call(vm, "bpf_send_signal_task", me, 0, 2, 0) == -errno.EINVAL & m32
    assert _call(vm, "bpf_send_signal_task", init, 0, 0, 0) == -errno.EPERM & m32
    if kthreadd and _read(vm, kthreadd, "task_struct", "flags") & 0x0020_0000:
        assert _call(vm, "bpf_send_signal_task", kthreadd, 0, 0, 0) == -errno.EPERM & m32
    assert _call(vm, "bpf_send_signal_task", me, 65, 1, 0) == -errno.EINVAL & m32
    assert _call(vm, "bpf_send_signal_task", me, 0, 0, 0) == 0
    assert _call(vm, "bpf_send_signal_task", me, 0, 1, 0) == 0
    # pyxdp's own process (the host) is never signalled: the signal is kept instead
    from pyxdp.vm.task_kfuncs import HOST_SIGNALS
    before = len(HOST_SIGNALS)
    assert _call(vm, "bpf_send_signal_task", me, 9, 1, 0) == 0
    assert HOST_SIGNALS[before:] == [(os.getpid(), 9, 1)]
