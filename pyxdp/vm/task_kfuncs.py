"""The task and cgroup kfuncs of ``kernel/bpf/helpers.c`` (Linux 6.18) over the host's tasks
and cgroups.

``bpf_task_from_pid(pid)`` and ``bpf_task_from_vpid(vpid)`` give a referenced
``struct task_struct *`` (or NULL), ``bpf_task_acquire``/``bpf_task_release`` take and
drop references; ``bpf_cgroup_from_id(id)`` gives the default (v2) hierarchy's cgroup of
that id, ``bpf_cgroup_ancestor(cgrp, level)`` its ancestor at ``level``,
``bpf_task_get_cgroup1(task, hierarchy_id)`` the task's cgroup of a v1 hierarchy,
``bpf_cgroup_acquire``/``bpf_cgroup_release`` the references, and
``bpf_task_under_cgroup(task, ancestor)`` whether the task's default-hierarchy cgroup
is ``ancestor`` or below it (``cgroup_is_descendant``: same hierarchy, and
``ancestors[ancestor->level]`` is it).
The task iterator of ``kernel/bpf/task_iter.c`` (``bpf_iter_task_new(it, task, flags)``,
``_next``, ``_destroy``) walks procfs in pid and tid order (Linux: creation order):
``ALL_PROCS`` the idle task then every process, ``ALL_THREADS`` each process's threads,
``PROC_THREADS`` the given thread and those after it; its state is the program's 24
stack bytes. The task VMA iterator (``bpf_iter_task_vma_new(it, task, addr)``, ``_next``,
``_destroy``) gives the task's VMAs from the one holding ``addr`` (or the first above it)
as ``/proc/PID/smaps`` shows them when ``_new`` runs (Linux holds the mmap read lock for
the walk: one layout); -ENOENT for a task without an mm. The css iterator
(``bpf_iter_css_new(it, start, flags)``, ``_next``, ``_destroy``) walks cgroupfs:
descendants pre- or post-order (children oldest first) or ancestors up; a css is the
cgroup image's ``self``, at its start. ``bpf_send_signal_task``
(``kernel/trace/bpf_trace.c``) signals the real thread or process after Linux's checks, but
for pyxdp's own process, which no program may stop: that signal goes to ``HOST_SIGNALS``.

The objects are images of the host's real state, laid out at the offsets of the
kernel BTF pyxdp uses (the running kernel's, or the one it ships) in one read-only
region of fake addresses from :data:`TASK_BASE`, a 4 KiB slot per object:

* a task (``/proc/PID/stat``, ``status``): ``pid`` (the global pid), ``tgid``, ``comm``,
  ``flags`` (``PF_*``), ``prio``, ``static_prio``, ``normal_prio``, ``rt_priority``,
  ``real_parent`` (the parent process's thread-group leader: procfs names no thread),
  ``parent`` (the tracer while ptraced), ``group_leader`` and ``cgroups``, a ``struct
  css_set`` in the task's slot whose ``dfl_cgrp`` is its cgroup v2 cgroup. PID 1's and
  kthreadd's real parent is the idle task (pid 0, ``swapper/0``, its own real parent);
* a VMA (``/proc/PID/smaps``): ``vm_start``, ``vm_end``, ``vm_flags`` (the VmFlags
  mnemonics' bits), ``vm_pgoff`` (a file mapping's offset in pages; for anonymous
  memory the address's page, as mmap sets it) and ``vm_file``, for a file mapping a
  zeroed ``struct file`` image of its own per device and inode (``vm_mm`` reads 0);
* a cgroup (a directory of the hierarchy's mount): ``level``, ``self.cgroup``,
  ``ancestors[]`` and ``kn``, a ``struct kernfs_node`` in the cgroup's slot with ``id``
  (the directory's inode number: the cgroup id Linux gives), ``name`` and ``__parent``.

Every other byte reads 0 (pointers included: a probe load through one reads 0).
An object is refreshed from the host whenever a lookup reaches it; a reference count
per object (``refs``) follows acquire and release, and a map value's ``__kptr`` field
holding a task or cgroup (``bpf_kptr_xchg``) holds one reference, which the element's
update or delete and the map's freeing drop (Linux's destructor kfuncs). Lookups read
procfs and cgroupfs: they run in Python on both engines (the JIT calls them as
helpers); pyxdp holds at most :data:`MAX_OBJECTS` objects (tasks, cgroups, VMAs, files)
per process. The pid namespace and cgroup namespace are the host process's; cgroup
mounts are taken to show their whole hierarchy (as in the initial cgroup namespace).
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pyxdp.btf.btf import BtfKind
from pyxdp.btf.struct_access import member_offset
from pyxdp.btf.vmlinux import core_target
from pyxdp.errors import HelperFault
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.memalloc import register_kernel_kptrs
from pyxdp.vm.memory import Region

__all__ = ["KPTR_STRUCTS", "MAX_OBJECTS", "TASK_BASE", "TASK_KFUNCS", "KernelObjects",
           "cgroup_mounts", "kernel_objects"]

TASK_BASE = 0x0000_7200_0000_0000
SLOT = 4096
MAX_OBJECTS = 4096
M32 = 0xFFFF_FFFF
PROC = "/proc"
# include/linux/sched.h: the idle task's flags (init_task's PF_KTHREAD, init_idle's
# PF_IDLE and PF_NO_SETAFFINITY)
_IDLE_FLAGS = 0x0020_0000 | 0x0000_0002 | 0x0400_0000
_TASK_FIELDS = ("pid", "tgid", "comm", "flags", "prio", "static_prio", "normal_prio",
                "rt_priority", "real_parent", "parent", "group_leader", "cgroups")
_VMA_FIELDS = ("vm_start", "vm_end", "vm_flags", "vm_pgoff", "vm_file")


class _Layout:
    """Offsets and sizes of the members the images hold, from the kernel BTF."""

    def __init__(self) -> None:
        btf = core_target()

        def struct(name: str) -> tuple[int, int]:
            tid = btf.find(name, BtfKind.STRUCT)
            if tid is None:
                raise HelperFault(f"the kernel BTF ({btf.path}) has no struct {name}: "
                                  "pyxdp cannot lay out tasks and cgroups")
            return tid, btf.type_by_id(tid).size_type

        def members(tid: int, names: tuple[str, ...]) -> dict[str, tuple[int, int]]:
            out = {}
            for n in names:
                got = member_offset(btf, tid, n)
                if got is None:
                    raise HelperFault(f"the kernel BTF ({btf.path}) has no member {n} of "
                                      f"struct {btf.type_by_id(tid).name}")
                out[n] = got
            return out

        task, self.task_size = struct("task_struct")
        self.task = members(task, _TASK_FIELDS)
        css_set, css_set_size = struct("css_set")
        self.dfl_cgrp = members(css_set, ("dfl_cgrp",))["dfl_cgrp"]
        cgrp, self.cgrp_size = struct("cgroup")
        self.cgrp = members(cgrp, ("level", "kn", "ancestors", "self"))
        css, _ = struct("cgroup_subsys_state")
        self.css_cgroup = members(css, ("cgroup",))["cgroup"]
        kn, kn_size = struct("kernfs_node")
        self.kn = members(kn, ("id", "name", "__parent"))
        vma, _ = struct("vm_area_struct")
        self.vma = members(vma, _VMA_FIELDS)
        self.css_set_at = -(-self.task_size // 64) * 64  # the task's css_set, in its slot
        if self.css_set_at + css_set_size > SLOT:
            raise HelperFault(f"struct task_struct and css_set ({self.task_size} and "
                              f"{css_set_size} bytes) exceed pyxdp's {SLOT}-byte slot")
        self.kn_size = kn_size


_LAYOUT: list[_Layout] = []


def _layout() -> _Layout:
    if not _LAYOUT:
        _LAYOUT.append(_Layout())
    return _LAYOUT[0]


@dataclass
class _Obj:
    kind: str          # "task", "cgroup", "vma" or "file"
    slot: int
    refs: int = 0
    level: int = 0     # a cgroup's
    hierarchy: int = 0  # a cgroup's: 0 the default one, else the v1 hierarchy id
    path: tuple[str, ...] = ()  # a cgroup's directories below its hierarchy's root


@dataclass
class _Task:
    """What procfs says of one task."""

    pid: int
    tgid: int
    comm: bytes
    flags: int
    prio: int
    static_prio: int
    normal_prio: int
    rt_priority: int
    ppid: int
    tracer: int
    cgroups: dict[int, str] = field(default_factory=dict)  # hierarchy id -> path


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return f.read()
    except OSError:
        return None


def _proc_task(procpid: int) -> _Task | None:
    """The task procfs (the host process's pid namespace) shows as ``procpid``."""
    stat = _read(f"{PROC}/{procpid}/stat")
    status = _read(f"{PROC}/{procpid}/status")
    cgroup = _read(f"{PROC}/{procpid}/cgroup")
    if stat is None or status is None or cgroup is None:
        return None
    lp, rp = stat.index("("), stat.rindex(")")
    comm = stat[lp + 1:rp].encode("utf-8", "surrogateescape")[:15]
    rest = stat[rp + 2:].split()
    info = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    nspid = info["NSpid"].split()
    policy, rt = int(rest[38]), int(rest[37])
    prio = int(rest[15]) + 100  # /proc shows prio - MAX_RT_PRIO
    static_prio = 120 + int(rest[16])
    normal = 99 - rt if policy in (1, 2) else -1 if policy == 6 else static_prio
    cgroups = {}
    for line in cgroup.splitlines():
        hid, _, path = line.split(":", 2)
        cgroups[int(hid)] = path
    return _Task(pid=int(nspid[0]), tgid=int(info["Tgid"]), comm=comm, flags=int(rest[6]),
                 prio=prio, static_prio=static_prio, normal_prio=normal,
                 rt_priority=rt, ppid=int(rest[1]), tracer=int(info["TracerPid"]),
                 cgroups=cgroups)


def _in_init_pid_ns() -> bool:
    status = _read(f"{PROC}/self/status") or ""
    return next((len(line.split()) == 2 for line in status.splitlines()
                 if line.startswith("NSpid:")), True)


def cgroup_mounts() -> dict[int, str]:
    """Each cgroup hierarchy's mount point: 0 the v2 (default) one, else the v1 id."""
    own = _read(f"{PROC}/self/cgroup") or ""
    v1 = {}
    for line in own.splitlines():
        hid, ctrls, _ = line.split(":", 2)
        if int(hid):
            v1[frozenset(c for c in ctrls.split(",") if c)] = int(hid)
    out: dict[int, str] = {}
    for line in (_read(f"{PROC}/self/mountinfo") or "").splitlines():
        pre, _, post = line.partition(" - ")
        fstype, _, opts = (post.split() + ["", ""])[:3]
        where = pre.split()[4]
        if fstype == "cgroup2":
            out.setdefault(0, where)
        elif fstype == "cgroup":
            names = frozenset(o for o in opts.split(",") if o not in ("rw", "ro"))
            # the hierarchy whose controllers (or name=) the mount's options hold
            got = max(((len(c), h) for c, h in v1.items() if c and c <= names), default=None)
            if got is not None:
                out.setdefault(got[1], where)
    return out


class KernelObjects:
    """The process's task and cgroup images (see the module docstring)."""

    def __init__(self) -> None:
        self.buf = bytearray(MAX_OBJECTS * SLOT)
        self.region = Region("tasks and cgroups", TASK_BASE, self.buf, writable=False)
        self.objs: dict[tuple[str, int, int], _Obj] = {}  # (kind, hierarchy, id) -> object
        self.by_slot: dict[int, _Obj] = {}
        self.procpids: dict[int, int] = {}  # a task's slot -> its pid in procfs
        self.lock = threading.Lock()
        # References a map's __kptr field let go of while the lock was held (a map freed
        # by the garbage collector in the middle of a kfunc call): dropped at its release
        self.puts: list[int] = []
        self._mounts: dict[int, str] | None = None  # during one kfunc call (locked)
        self._init_ns = _in_init_pid_ns()  # a process's pid namespace never changes

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The lock, and the cgroup mounts read once for what the call looks up."""
        with self.lock:
            try:
                yield
            finally:
                self._mounts = None
                self.drop_puts()

    def drop_puts(self) -> None:
        """The references of :attr:`puts` dropped (the lock held)."""
        while self.puts:
            addr = self.puts.pop()
            off = addr - TASK_BASE
            o = self.by_slot.get(off // SLOT) if off % SLOT == 0 else None
            if o is None or o.kind not in ("task", "cgroup"):
                raise HelperFault(f"a __kptr field held {addr:#x}: no task or cgroup of "
                                  "pyxdp's")
            o.refs = max(o.refs - 1, 0)

    def mounts(self) -> dict[int, str]:
        if self._mounts is None:
            self._mounts = cgroup_mounts()
        return self._mounts

    def _slot(self, kind: str, hierarchy: int, key: int) -> _Obj:
        o = self.objs.get((kind, hierarchy, key))
        if o is None:
            if len(self.by_slot) >= MAX_OBJECTS:
                raise HelperFault(f"pyxdp holds at most {MAX_OBJECTS} tasks, cgroups, VMAs "
                                  "and files")
            o = _Obj(kind, len(self.by_slot), hierarchy=hierarchy)
            self.objs[(kind, hierarchy, key)] = o
            self.by_slot[o.slot] = o
        return o

    def procpid(self, task: _Obj) -> int:
        """The pid procfs shows a task image's task as."""
        return self.procpids.get(task.slot, 0)

    def addr(self, o: _Obj) -> int:
        return TASK_BASE + o.slot * SLOT

    def at(self, addr: int, kind: str, what: str) -> _Obj:
        """The object a pointer argument names (the start of one of kind ``kind``)."""
        off = addr - TASK_BASE
        o = self.by_slot.get(off // SLOT) if 0 <= off and off % SLOT == 0 else None
        if o is None or o.kind != kind:
            raise HelperFault(f"{what}: {addr:#x} is not a struct "
                              f"{'task_struct' if kind == 'task' else 'cgroup'} of pyxdp's")
        return o

    def _put(self, o: _Obj, at: tuple[int, int], value: int | bytes, base: int = 0) -> None:
        off = o.slot * SLOT + base + at[0]
        if isinstance(value, bytes):
            self.buf[off:off + at[1]] = value[:at[1]].ljust(at[1], b"\0")
        else:
            self.buf[off:off + at[1]] = (value & ((1 << 8 * at[1]) - 1)).to_bytes(at[1],
                                                                                 "little")

    # -- tasks ---------------------------------------------------------------------------
    def task(self, pid: int, vpid: bool = False) -> _Obj | None:
        """``find_task_by_pid_ns(pid, &init_pid_ns)`` (``vpid``: the caller's namespace),
        the image refreshed with its parents and cgroup."""
        if pid <= 0:
            return None
        procpid: int | None = pid
        if not vpid and not self._init_ns:
            procpid = self._by_global_pid(pid)
        t = _proc_task(procpid) if procpid is not None else None
        return self.fill_task(procpid, t, set()) if t is not None and procpid else None

    @staticmethod
    def _by_global_pid(pid: int) -> int | None:
        for d in os.listdir(PROC):
            if d.isdigit():
                for tid in os.listdir(f"{PROC}/{d}/task") if os.path.isdir(
                        f"{PROC}/{d}/task") else ():
                    status = _read(f"{PROC}/{d}/task/{tid}/status") or ""
                    for line in status.splitlines():
                        if line.startswith("NSpid:") and line.split()[1] == str(pid):
                            return int(tid)
        return None

    def idle(self) -> _Obj:
        lay = _layout()
        o = self._slot("task", 0, 0)
        self.buf[o.slot * SLOT:(o.slot + 1) * SLOT] = bytes(SLOT)
        me = self.addr(o)
        t = lay.task
        self._put(o, t["comm"], b"swapper/0")
        self._put(o, t["flags"], _IDLE_FLAGS)
        for n in ("prio", "static_prio", "normal_prio"):
            self._put(o, t[n], 120)
        for n in ("real_parent", "parent", "group_leader"):
            self._put(o, t[n], me)
        return o

    def fill_task(self, procpid: int, t: _Task, seen: set[int] | None = None) -> _Obj:
        """The image of task ``t`` (procfs's ``procpid``), with its parents and cgroup."""
        if seen is None:
            seen = set()
        lay = _layout()
        o = self._slot("task", 0, t.pid)
        self.procpids[o.slot] = procpid
        if t.pid in seen:
            return o
        seen.add(t.pid)
        self.buf[o.slot * SLOT:(o.slot + 1) * SLOT] = bytes(SLOT)
        f = lay.task
        for n in ("pid", "tgid", "comm", "flags", "prio", "static_prio", "normal_prio",
                  "rt_priority"):
            self._put(o, f[n], getattr(t, n))

        def other(pid: int) -> int:
            if pid == 0:
                return self.addr(self.idle())
            got = _proc_task(pid)
            return self.addr(self.fill_task(pid, got, seen)) if got is not None else 0

        real_parent = other(t.ppid)
        self._put(o, f["real_parent"], real_parent)
        self._put(o, f["parent"], other(t.tracer) if t.tracer else real_parent)
        self._put(o, f["group_leader"], self.addr(o) if t.tgid == t.pid else other(t.tgid))
        css_set = self.addr(o) + lay.css_set_at
        self._put(o, f["cgroups"], css_set)
        dfl = self.cgroup_at(0, t.cgroups.get(0, "/"))
        self._put(o, lay.dfl_cgrp, self.addr(dfl) if dfl is not None else 0,
                  lay.css_set_at)
        return o

    # -- cgroups -------------------------------------------------------------------------
    def cgroup_at(self, hierarchy: int, path: str) -> _Obj | None:
        """The cgroup at ``path`` of a hierarchy (0 the default one), with its ancestors."""
        mnt = self.mounts().get(hierarchy)
        if mnt is None:
            return None
        parts = [p for p in path.split("/") if p and p != "."]
        chain: list[_Obj] = []
        for level in range(len(parts) + 1):
            d = os.path.join(mnt, *parts[:level])
            try:
                cid = os.stat(d).st_ino
            except OSError:
                return None
            o = self._slot("cgroup", hierarchy, cid)
            o.level, o.path = level, tuple(parts[:level])
            chain.append(o)
            self._fill_cgroup(o, cid, parts[level - 1] if level else "", chain)
        return chain[-1]

    def _fill_cgroup(self, o: _Obj, cid: int, name: str, chain: list[_Obj]) -> None:
        lay = _layout()
        self.buf[o.slot * SLOT:(o.slot + 1) * SLOT] = bytes(SLOT)
        me = self.addr(o)
        c = lay.cgrp
        kn_at = -(-(lay.cgrp_size + 8 * len(chain)) // 8) * 8
        name_b = name.encode("utf-8", "surrogateescape") + b"\0"
        if kn_at + lay.kn_size + len(name_b) > SLOT:
            raise HelperFault(f"cgroup {name!r} at level {o.level} does not fit pyxdp's "
                              f"{SLOT}-byte slot")
        self._put(o, c["level"], o.level)
        self._put(o, (c["self"][0] + lay.css_cgroup[0], 8), me)
        for i, a in enumerate(chain):
            self._put(o, (c["ancestors"][0] + 8 * i, 8), self.addr(a))
        self._put(o, c["kn"], me + kn_at)
        self._put(o, lay.kn["id"], cid, kn_at)
        name_at = kn_at + lay.kn_size
        self._put(o, (name_at, len(name_b)), name_b)
        self._put(o, lay.kn["name"], me + name_at, kn_at)
        if len(chain) > 1:
            parent_kn = int.from_bytes(self._get(chain[-2], c["kn"]), "little")
            self._put(o, lay.kn["__parent"], parent_kn, kn_at)

    def _get(self, o: _Obj, at: tuple[int, int], base: int = 0) -> bytes:
        off = o.slot * SLOT + base + at[0]
        return bytes(self.buf[off:off + at[1]])

    def cgroup_by_id(self, cid: int) -> _Obj | None:
        """``cgroup_get_from_id``: the default hierarchy's cgroup whose id is ``cid``."""
        mnt = self.mounts().get(0)
        if mnt is None or cid <= 0:
            return None
        for d, _dirs, _files in os.walk(mnt):
            try:
                if os.stat(d).st_ino == cid:
                    return self.cgroup_at(0, os.path.relpath(d, mnt))
            except OSError:
                continue
        return None

    def fill_vma(self, pid: int, v: _Vma) -> _Obj:
        """The image of task ``pid``'s VMA ``v``; a mapped file's ``vm_file`` is a zeroed
        struct file image of its own (one per device and inode)."""
        lay = _layout()
        o = self._slot("vma", pid, v.start)
        self.buf[o.slot * SLOT:(o.slot + 1) * SLOT] = bytes(SLOT)
        f = lay.vma
        for n, value in (("vm_start", v.start), ("vm_end", v.end), ("vm_flags", v.flags),
                         ("vm_pgoff", v.pgoff)):
            self._put(o, f[n], value)
        if v.file is not None:
            self._put(o, f["vm_file"], self.addr(self._slot("file", *v.file)))
        return o

    def ancestor(self, o: _Obj, level: int) -> _Obj | None:
        if level > o.level:
            return None
        at = _layout().cgrp["ancestors"][0] + 8 * level
        return self.by_slot[(int.from_bytes(self._get(o, (at, 8)), "little") - TASK_BASE)
                            // SLOT]

    def children(self, o: _Obj) -> list[tuple[str, ...]]:
        """A cgroup's children's paths, oldest first (by id: ids are handed out in turn)."""
        mnt = self.mounts().get(o.hierarchy)
        if mnt is None:
            return []
        try:
            with os.scandir(os.path.join(mnt, *o.path)) as it:
                kids = [(e.inode(), e.name) for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            return []
        return [(*o.path, name) for _, name in sorted(kids)]

    def cgroup_path(self, o: _Obj, path: tuple[str, ...]) -> _Obj | None:
        return self.cgroup_at(o.hierarchy, "/".join(path))

    def dfl_cgroup(self, task: _Obj) -> _Obj | None:
        lay = _layout()
        a = int.from_bytes(self._get(task, lay.dfl_cgrp, lay.css_set_at), "little")
        return self.by_slot.get((a - TASK_BASE) // SLOT) if a else None

    def task_cgroup1(self, task: _Obj, hierarchy: int) -> _Obj | None:
        """``task_get_cgroup1``: the task's cgroup of v1 hierarchy ``hierarchy``."""
        if hierarchy <= 0:
            return None
        pid = self.procpid(task)
        t = _proc_task(pid) if pid else None
        path = t.cgroups.get(hierarchy) if t is not None else None
        return self.cgroup_at(hierarchy, path) if path is not None else None


_OBJECTS: list[KernelObjects] = []
_MADE = threading.Lock()


def kernel_objects() -> KernelObjects:
    """The process's images (made on first use)."""
    with _MADE:
        if not _OBJECTS:
            _OBJECTS.append(KernelObjects())
        return _OBJECTS[0]


def _give(vm: Interpreter, ko: KernelObjects, o: _Obj | None) -> int:
    """A referenced pointer to ``o`` (its region mapped into the run), or NULL."""
    if o is None:
        return 0
    o.refs += 1
    if not any(r is ko.region for r in vm.mem.regions):
        vm.mem.add(ko.region)
    return ko.addr(o)


def _lookup(fn: Callable[[KernelObjects, int, int], _Obj | None]
            ) -> Callable[..., int]:
    def kfunc(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        ko = kernel_objects()
        with ko.locked():
            return _give(vm, ko, fn(ko, r1, r2))
    kfunc.__name__ = fn.__name__
    return kfunc


def _release(kind: str, what: str) -> Callable[..., int]:
    def kfunc(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        ko = kernel_objects()
        with ko.locked():
            o = ko.at(r1, kind, what)
            o.refs = max(o.refs - 1, 0)
        return 0
    kfunc.__name__ = what
    return kfunc


def task_from_pid(ko: KernelObjects, r1: int, r2: int) -> _Obj | None:
    return ko.task(_s32(r1))


def task_from_vpid(ko: KernelObjects, r1: int, r2: int) -> _Obj | None:
    return ko.task(_s32(r1), vpid=True)


def task_acquire(ko: KernelObjects, r1: int, r2: int) -> _Obj | None:
    return ko.at(r1, "task", "bpf_task_acquire")


def cgroup_acquire(ko: KernelObjects, r1: int, r2: int) -> _Obj | None:
    return ko.at(r1, "cgroup", "bpf_cgroup_acquire")


def cgroup_from_id(ko: KernelObjects, r1: int, r2: int) -> _Obj | None:
    return ko.cgroup_by_id(r1)


def cgroup_ancestor(ko: KernelObjects, r1: int, r2: int) -> _Obj | None:
    return ko.ancestor(ko.at(r1, "cgroup", "bpf_cgroup_ancestor"), _s32(r2))


def task_get_cgroup1(ko: KernelObjects, r1: int, r2: int) -> _Obj | None:
    return ko.task_cgroup1(ko.at(r1, "task", "bpf_task_get_cgroup1"), _s32(r2))


def task_under_cgroup(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_task_under_cgroup``: 1 when the task's default-hierarchy cgroup is
    ``ancestor`` or a descendant of it, else 0."""
    ko = kernel_objects()
    with ko.locked():
        task = ko.at(r1, "task", "bpf_task_under_cgroup")
        anc = ko.at(r2, "cgroup", "bpf_task_under_cgroup")
        cg = ko.dfl_cgroup(task)
        if cg is None or cg.hierarchy != anc.hierarchy or cg.level < anc.level:
            return 0
        return int(ko.ancestor(cg, anc.level) is anc)


# -- the task iterator (kernel/bpf/task_iter.c) -----------------------------------------------
BPF_TASK_ITER_ALL_PROCS, BPF_TASK_ITER_ALL_THREADS, BPF_TASK_ITER_PROC_THREADS = 0, 1, 2
# struct bpf_iter_task's 24 bytes here: the flags and the state (0 ended, 1 made, 2 giving
# tasks); for PROC_THREADS the thread group and the thread it started at; the cursor (the
# process and the thread last given).
_IT_ENDED, _IT_MADE, _IT_GIVING = 0, 1, 2


def _ids(path: str) -> list[int]:
    try:
        return sorted(int(d) for d in os.listdir(path) if d.isdigit())
    except OSError:
        return []


def _it_set(vm: Interpreter, it: int, flags: int, state: int, a: int, b: int) -> None:
    vm.mem.store(it, 8, flags | state << 32)
    vm.mem.store(it + 8, 8, a)
    vm.mem.store(it + 16, 8, b)


def iter_task_new(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_iter_task_new(it, task__nullable, flags)``: -EINVAL for unknown flags and
    for PROC_THREADS without a task (the iterator then gives nothing)."""
    flags = r3 & M32
    if flags not in (BPF_TASK_ITER_ALL_PROCS, BPF_TASK_ITER_ALL_THREADS,
                     BPF_TASK_ITER_PROC_THREADS) or \
            flags == BPF_TASK_ITER_PROC_THREADS and not r2:
        _it_set(vm, r1, 0, _IT_ENDED, 0, 0)
        return -errno.EINVAL & M32
    start = 0
    if flags == BPF_TASK_ITER_PROC_THREADS:
        ko = kernel_objects()
        with ko.locked():
            task = ko.at(r2, "task", "bpf_iter_task_new")
            start = ko.procpid(task)
    _it_set(vm, r1, flags, _IT_MADE, start, 0)
    return 0


def _advance(flags: int, state: int, a: int, b: int) -> tuple[int | None, int, int]:
    """The next task's pid in procfs (None: no more) and the cursor after it."""
    if flags == BPF_TASK_ITER_PROC_THREADS:  # the given thread and those after it
        got = a if state == _IT_MADE else next(
            (t for t in _ids(f"{PROC}/{a}/task") if t > b), None)
        return got, a, got or 0
    if flags == BPF_TASK_ITER_ALL_THREADS and a:
        tid = next((t for t in _ids(f"{PROC}/{a}/task") if t > b), None)
        if tid is not None:
            return tid, a, tid
    proc = next((p for p in _ids(PROC) if p > a), None)
    return proc, proc or 0, proc or 0


def iter_task_next(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_iter_task_next(it)``: the next task (an RCU pointer, no reference), or NULL."""
    word = vm.mem.load(r1, 8)
    flags, state = word & M32, word >> 32
    a, b = vm.mem.load(r1 + 8, 8), vm.mem.load(r1 + 16, 8)
    if state == _IT_ENDED:
        return 0
    ko = kernel_objects()
    with ko.locked():
        if state == _IT_MADE and flags != BPF_TASK_ITER_PROC_THREADS:
            _it_set(vm, r1, flags, _IT_GIVING, 0, 0)  # Linux starts at init_task
            return _give_rcu(vm, ko, ko.idle())
        while True:
            got, a, b = _advance(flags, state, a, b)
            state = _IT_GIVING
            if got is None:
                _it_set(vm, r1, 0, _IT_ENDED, 0, 0)
                return 0
            _it_set(vm, r1, flags, state, a, b)
            t = _proc_task(got)
            if t is not None:  # a task gone meanwhile is passed over
                return _give_rcu(vm, ko, ko.fill_task(got, t))


def iter_task_destroy(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    _it_set(vm, r1, 0, _IT_ENDED, 0, 0)
    return 0


# -- the task VMA iterator (kernel/bpf/task_iter.c) ------------------------------------------
# struct bpf_iter_task_vma's 8 bytes here: bit 63 set while it gives VMAs (Linux: kit->data),
# the task's pid in procfs (22 bits: pids stay below PID_MAX_LIMIT, 2**22) and the cursor's
# page (40 bits): the next VMA is the first that ends above it (vma_iter_init, vma_next).
_VMA_LIVE, _VMA_PID_SHIFT, _VMA_PAGES = 1 << 63, 40, (1 << 40) - 1
PAGE_SHIFT = 12
# fs/proc/task_mmu.c show_smap_vma_flags: the VmFlags mnemonics and their vm_flags bits
_VM_FLAGS = {"rd": 0, "wr": 1, "ex": 2, "sh": 3, "mr": 4, "mw": 5, "me": 6, "ms": 7, "gd": 8,
             "pf": 10, "lo": 13, "io": 14, "sr": 15, "rr": 16, "dc": 17, "de": 18, "lf": 19,
             "ac": 20, "nr": 21, "ht": 22, "sf": 23, "ar": 24, "wf": 25, "dd": 26, "sd": 27,
             "mm": 28, "hg": 29, "nh": 30, "mg": 31}
_GATE_VMA = "[vsyscall]"  # shown by procfs, but no VMA of the task's mm (get_gate_vma)
# The VMAs each task's latest bpf_iter_task_vma_new read (by pid): Linux's iterator holds
# the mmap read lock, so a walk sees one layout; at most _SNAPSHOTS_MAX tasks are kept.
_SNAPSHOTS: dict[int, list[_Vma]] = {}
_SNAPSHOTS_MAX = 64


@dataclass
class _Vma:
    start: int
    end: int
    flags: int
    pgoff: int
    file: tuple[int, int] | None  # the mapped file's (device, inode)


def _vmas(procpid: int) -> list[_Vma] | None:
    """The task's VMAs in address order from ``/proc/PID/smaps`` (None: no mm to read)."""
    text = _read(f"{PROC}/{procpid}/smaps")
    if text is None:
        return None
    out: list[_Vma] = []
    gate = False
    for line in text.splitlines():
        head = line.split(None, 5)
        if "-" in head[0] and len(head) >= 5:  # a VMA's first line: as in /proc/PID/maps
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            inode = int(head[4])
            gate = len(head) > 5 and head[5].strip() == _GATE_VMA
            if gate:
                continue
            major, minor = (int(x, 16) for x in head[3].split(":"))
            # show_map_vma prints a file mapping's offset, 0 for anonymous memory, whose
            # vm_pgoff mmap sets to its address's page
            out.append(_Vma(lo, hi, 0, int(head[2], 16) >> PAGE_SHIFT if inode else
                            lo >> PAGE_SHIFT, (major << 20 | minor, inode) if inode else None))
        elif line.startswith("VmFlags:") and out and not gate:
            out[-1].flags = sum(1 << _VM_FLAGS[m] for m in line.split()[1:] if m in _VM_FLAGS)
    return out


def iter_task_vma_new(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_iter_task_vma_new(it, task, addr)``: -ENOENT for a task without an mm (a
    kernel thread, the idle task, one that has exited); else the VMAs from the one
    holding ``addr`` or the first above it."""
    ko = kernel_objects()
    with ko.locked():
        task = ko.at(r2, "task", "bpf_iter_task_vma_new")
        flags = int.from_bytes(ko._get(task, _layout().task["flags"]), "little")
        pid = ko.procpid(task)
    vmas = _vmas(pid) if pid and not flags & PF_KTHREAD else None
    if not vmas:
        vm.mem.store(r1, 8, 0)
        return -errno.ENOENT & M32
    with ko.locked():
        _SNAPSHOTS.pop(pid, None)
        if len(_SNAPSHOTS) >= _SNAPSHOTS_MAX:
            del _SNAPSHOTS[next(iter(_SNAPSHOTS))]
        _SNAPSHOTS[pid] = vmas
    vm.mem.store(r1, 8, _VMA_LIVE | pid << _VMA_PID_SHIFT |
                 min(r3 >> PAGE_SHIFT, _VMA_PAGES))
    return 0


def iter_task_vma_next(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_iter_task_vma_next(it)``: the next VMA (a trusted pointer), or NULL."""
    word = vm.mem.load(r1, 8)
    if not word & _VMA_LIVE:
        return 0
    pid, page = word >> _VMA_PID_SHIFT & ((1 << 22) - 1), word & _VMA_PAGES
    ko = kernel_objects()
    with ko.locked():
        vmas = _SNAPSHOTS.get(pid)
        if vmas is None:  # dropped for newer walks of other tasks: read again
            vmas = _SNAPSHOTS[pid] = _vmas(pid) or []
        at = bisect_right([v.end >> PAGE_SHIFT for v in vmas], page)
        if at == len(vmas):
            vm.mem.store(r1, 8, word | _VMA_PAGES)  # past every VMA
            return 0
        vm.mem.store(r1, 8, word & ~_VMA_PAGES | vmas[at].end >> PAGE_SHIFT)
        return _give_rcu(vm, ko, ko.fill_vma(pid, vmas[at]))


def iter_task_vma_destroy(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int
                          ) -> int:
    vm.mem.store(r1, 8, 0)
    return 0


# -- the css iterator (kernel/bpf/task_iter.c) ------------------------------------------------
BPF_CGROUP_ITER_DESCENDANTS_PRE, BPF_CGROUP_ITER_DESCENDANTS_POST, \
    BPF_CGROUP_ITER_ANCESTORS_UP = 2, 3, 4
# struct bpf_iter_css's 24 bytes here: the start cgroup (its css: offset 0), the position
# (NULL before the first and after the last: a next then starts again, as in Linux), the
# flags.


def iter_css_new(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_iter_css_new(it, start, flags)``: -EINVAL (and no walk) for other flags."""
    flags = r3 & M32
    ok = flags in (BPF_CGROUP_ITER_DESCENDANTS_PRE, BPF_CGROUP_ITER_DESCENDANTS_POST,
                   BPF_CGROUP_ITER_ANCESTORS_UP)
    if ok:
        ko = kernel_objects()
        with ko.locked():
            ko.at(r2, "cgroup", "bpf_iter_css_new")
    vm.mem.store(r1, 8, r2 if ok else 0)
    vm.mem.store(r1 + 8, 8, 0)
    vm.mem.store(r1 + 16, 8, flags)
    return 0 if ok else -errno.EINVAL & M32


def _leftmost(ko: KernelObjects, o: _Obj) -> _Obj:
    """css_leftmost_descendant: down the oldest children."""
    while (kids := ko.children(o)) and (c := ko.cgroup_path(o, kids[0])) is not None:
        o = c
    return o


def _next_sibling(ko: KernelObjects, o: _Obj) -> _Obj | None:
    if not o.level:
        return None
    parent = ko.ancestor(o, o.level - 1)
    assert parent is not None
    kids = ko.children(parent)
    later = kids[kids.index(o.path) + 1:] if o.path in kids else \
        [k for k in kids if k > o.path]
    return next((c for k in later if (c := ko.cgroup_path(o, k)) is not None), None)


def _css_next(ko: KernelObjects, flags: int, pos: _Obj | None, start: _Obj) -> _Obj | None:
    """css_next_descendant_pre/_post, or the parent (ANCESTORS_UP), after ``pos``."""
    if flags == BPF_CGROUP_ITER_ANCESTORS_UP:
        if pos is None:
            return start
        return ko.ancestor(pos, pos.level - 1) if pos.level else None
    if flags == BPF_CGROUP_ITER_DESCENDANTS_PRE:
        if pos is None:
            return start
        kids = ko.children(pos)
        first = next((c for k in kids if (c := ko.cgroup_path(pos, k)) is not None), None)
        if first is not None:
            return first
        while pos is not start and pos is not None:
            sib = _next_sibling(ko, pos)
            if sib is not None:
                return sib
            pos = ko.ancestor(pos, pos.level - 1) if pos.level else None
        return None
    if pos is None:
        return _leftmost(ko, start)
    if pos is start:
        return None
    sib = _next_sibling(ko, pos)
    if sib is not None:
        return _leftmost(ko, sib)
    return ko.ancestor(pos, pos.level - 1) if pos.level else None


def iter_css_next(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_iter_css_next(it)``: the next cgroup's css (an RCU pointer), or NULL."""
    start_at, pos_at, flags = (vm.mem.load(r1 + k, 8) for k in (0, 8, 16))
    if not start_at:
        return 0
    ko = kernel_objects()
    with ko.locked():
        start = ko.at(start_at, "cgroup", "bpf_iter_css_next")
        pos = ko.at(pos_at, "cgroup", "bpf_iter_css_next") if pos_at else None
        nxt = _css_next(ko, flags, pos, start)
        addr = _give_rcu(vm, ko, nxt) if nxt is not None else 0
    vm.mem.store(r1 + 8, 8, addr)
    return addr


def iter_css_destroy(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    for k in (0, 8, 16):
        vm.mem.store(r1 + k, 8, 0)
    return 0


def _give_rcu(vm: Interpreter, ko: KernelObjects, o: _Obj) -> int:
    """An RCU pointer to ``o`` (no reference taken), its region mapped into the run."""
    if not any(r is ko.region for r in vm.mem.regions):
        vm.mem.add(ko.region)
    return ko.addr(o)


# -- bpf_send_signal_task (kernel/trace/bpf_trace.c) ------------------------------------------
PIDTYPE_PID, PIDTYPE_TGID = 0, 1
PF_EXITING, PF_KTHREAD = 0x0000_0004, 0x0020_0000
_NSIG = 64
# Signals programs sent to pyxdp's own process: (pid or tid, signal, pid type), in order.
HOST_SIGNALS: list[tuple[int, int, int]] = []
# tgkill(2): a signal to one thread of another process (Python has no call for it)
_SYS_TGKILL = {"x86_64": 234, "aarch64": 131}


def _tgkill(tgid: int, tid: int, sig: int) -> None:
    nr = _SYS_TGKILL.get(os.uname().machine)
    if nr is None:
        raise HelperFault(f"bpf_send_signal_task: no tgkill syscall number for "
                          f"{os.uname().machine}")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(nr, tgid, tid, sig) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def send_signal_task(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_send_signal_task(task, sig, type, value)``: -EINVAL for a type but
    PIDTYPE_PID or _TGID; -EPERM for a kernel thread, an exiting task or the global init;
    -EINVAL for a signal above 64; else the signal goes to the thread (PID) or its process
    (TGID) - signal 0 only checks it may - and the kernel's answer comes back."""
    sig, ptype = r2 & M32, r3 & M32
    if ptype not in (PIDTYPE_PID, PIDTYPE_TGID):
        return -errno.EINVAL & M32
    ko = kernel_objects()
    with ko.locked():
        task = ko.at(r1, "task", "bpf_send_signal_task")
        lay = _layout()
        flags, tgid = (int.from_bytes(ko._get(task, lay.task[n]), "little")
                       for n in ("flags", "tgid"))
        tid = ko.procpid(task)
    if flags & (PF_KTHREAD | PF_EXITING) or tgid == 1 or not tid:
        return -errno.EPERM & M32
    if sig > _NSIG:
        return -errno.EINVAL & M32
    if tgid == os.getpid() and sig:
        # pyxdp's own process is the host of every program it runs: no program may stop
        # or kill it, so the signal Linux would deliver is kept in HOST_SIGNALS instead
        HOST_SIGNALS.append((tid if ptype == PIDTYPE_PID else tgid, sig, ptype))
        return 0
    try:
        if ptype == PIDTYPE_TGID:
            os.kill(tgid, sig)
        else:
            _tgkill(tgid, tid, sig)
    except OSError as e:
        return -(e.errno or errno.EPERM) & M32
    return 0


def _s32(v: int) -> int:
    v &= M32
    return v - (1 << 32) if v >> 31 else v


# -- referenced kptrs (bpf_kptr_xchg into a map value's __kptr field) ---------------------
# The structs whose objects this module makes: a map value's field holds one reference,
# which the element's update or delete and the map's freeing drop (bpf_obj_free_fields
# calling the struct's destructor kfunc, bpf_task_release_dtor or bpf_cgroup_release_dtor).
KPTR_STRUCTS = frozenset({"task_struct", "cgroup"})


def _put_kptr(addr: int) -> None:
    # never waits for the lock: a map's finalizer may run inside a locked kfunc call of
    # this very thread, whose release drops the reference then
    ko = kernel_objects()
    ko.puts.append(addr)
    if ko.lock.acquire(blocking=False):
        try:
            ko.drop_puts()
        finally:
            ko.lock.release()


register_kernel_kptrs(TASK_BASE, MAX_OBJECTS * SLOT, _put_kptr,
                      lambda: kernel_objects().region)

TASK_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_task_from_pid": _lookup(task_from_pid),
    "bpf_task_from_vpid": _lookup(task_from_vpid),
    "bpf_task_acquire": _lookup(task_acquire),
    "bpf_task_release": _release("task", "bpf_task_release"),
    "bpf_cgroup_from_id": _lookup(cgroup_from_id),
    "bpf_cgroup_acquire": _lookup(cgroup_acquire),
    "bpf_cgroup_release": _release("cgroup", "bpf_cgroup_release"),
    "bpf_cgroup_ancestor": _lookup(cgroup_ancestor),
    "bpf_task_under_cgroup": task_under_cgroup,
    "bpf_task_get_cgroup1": _lookup(task_get_cgroup1),
    "bpf_iter_task_new": iter_task_new,
    "bpf_iter_task_next": iter_task_next,
    "bpf_iter_task_destroy": iter_task_destroy,
    "bpf_send_signal_task": send_signal_task,
    "bpf_iter_task_vma_new": iter_task_vma_new,
    "bpf_iter_task_vma_next": iter_task_vma_next,
    "bpf_iter_task_vma_destroy": iter_task_vma_destroy,
    "bpf_iter_css_new": iter_css_new,
    "bpf_iter_css_next": iter_css_next,
    "bpf_iter_css_destroy": iter_css_destroy,
}
