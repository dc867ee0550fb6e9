"""The common base of pyxdp's user-space BPF maps (``kernel/bpf/syscall.c`` + ``map_create``).

Every map type of :mod:`pyxdp.maps` derives from :class:`Map`. This module
holds what the kernel does for all types in ``kernel/bpf/syscall.c``: the
generic ``BPF_MAP_CREATE`` checks (name characters, ``BPF_F_RDONLY`` with
``BPF_F_WRONLY``, flags kept in ``map_flags``), the errno convention
(:class:`MapError` carrying ``.errno``), the byte-level operations with their
defaults (a type without an operation answers the kernel's errno, often
``ENOTSUPP`` = 524, which the kernel leaks to user space), the dict-like
Python API built on top of them, and the codec hook through which typed keys
and values (from BTF, later) are plugged in.

Program memory. A map is given a window of the fake 64-bit address space
from the vm's allocator (:mod:`pyxdp.vm.map_space`): ``MAP_SPACE_BASE + n *
2**32`` (more than one 4 GiB window when the storage is bigger), and
publishes itself there so the vm's helpers find it from its handle. The window base is the map's
*handle* (``Map.addr``), the value a program sees for ``ld_imm64`` of the map
(the kernel's ``struct bpf_map *``). Program-visible storage (the value
regions) starts one page above the handle, one region per CPU for per-CPU
maps, each page-aligned. :meth:`Map.lookup_addr` returns the address of a
value inside those regions (0 for NULL), so a helper can hand it to the
program and stores through it land in the map's numpy storage.

Simplified: no BTF (``BPF_F_LOCK`` needs a ``bpf_spin_lock`` in the value;
pyxdp knows of none until the loader sets :attr:`Map.spin_lock_off`), no NUMA,
no memory-cgroup accounting (storage is allocated with ``numpy.zeros``,
which the OS backs lazily). The descriptor's side (``BPF_F_RDONLY``/``WRONLY``,
``BPF_MAP_FREEZE``) is :class:`SyscallView`, which the programs never see. Bounds
are checked per region, not per value: a program overrunning one value into its
neighbour is not caught here (the kernel's verifier rejects such a program at load time).
"""

from __future__ import annotations

import errno as _errno
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from pyxdp.backend import (
    batch_count,
    batch_rows,
    check_map_commands,
    check_sys_perms,
    handle_bytes,
)
from pyxdp.errors import MapError
from pyxdp.smp import possible_cpus
from pyxdp.uapi.bpf import BpfMapType, MapFlag, MapUpdateFlag
from pyxdp.vm import map_space
from pyxdp.vm.map_space import MAP_SPACE_BASE, MAP_WINDOW, allocate_window
from pyxdp.vm.memalloc import drop_kptr
from pyxdp.vm.memory import Region

__all__ = [
    "BPF_ANY",
    "BPF_EXIST",
    "BPF_F_LOCK",
    "BPF_NOEXIST",
    "ENOTSUPP",
    "KMALLOC_MAX_SIZE",
    "MAP_SPACE_BASE",
    "MAP_WINDOW",
    "PAGE_SIZE",
    "PCPU_MIN_UNIT_SIZE",
    "Codec",
    "Map",
    "MapError",
    "MapSpec",
    "RawCodec",
    "SyscallView",
    "allocate_window",
    "bad_fd",
    "number_in_use",
    "number_kind",
    "hold_program",
    "live_program",
    "put_program",
    "register_object",
    "registered",
    "release_object",
    "default_nr_cpus",
    "map_by_addr",
    "map_by_id",
    "round_up",
]

BPF_ANY = int(MapUpdateFlag.BPF_ANY)
BPF_NOEXIST = int(MapUpdateFlag.BPF_NOEXIST)
BPF_EXIST = int(MapUpdateFlag.BPF_EXIST)
BPF_F_LOCK = int(MapUpdateFlag.BPF_F_LOCK)

ENOTSUPP = 524
"""The kernel-internal ``ENOTSUPP``; bpf(2) returns it as is (measured: array
``LOOKUP_AND_DELETE``, every ringbuf element operation, ``lru_hash`` with
``BPF_F_NO_PREALLOC``)."""

PAGE_SIZE = 4096
KMALLOC_MAX_SIZE = 4 << 20
"""``KMALLOC_MAX_SIZE`` on x86-64 (``1 << (MAX_PAGE_ORDER + PAGE_SHIFT)``);
measured: a queue value of 4 MiB is accepted, 4 MiB + 1 is E2BIG."""
PCPU_MIN_UNIT_SIZE = 32 << 10
"""Per-CPU values are bounded by it (``round_up(value_size, 8) > 32 KiB`` is E2BIG)."""
U32_MAX = 0xFFFF_FFFF
INT_MAX = 0x7FFF_FFFF
# Program-visible storage starts one page above the handle so the handle
# (the "struct bpf_map *" a program holds) never aliases a value.
VALUES_OFFSET = PAGE_SIZE

# The flags of BPF_MAP_CREATE that only set the fd's access mode; the kernel
# clears them from map_flags (bpf_map_flags_retain_permanent).
_FILE_FLAGS = int(MapFlag.BPF_F_RDONLY | MapFlag.BPF_F_WRONLY)
BPF_F_ACCESS_MASK = int(MapFlag.BPF_F_RDONLY | MapFlag.BPF_F_WRONLY
                        | MapFlag.BPF_F_RDONLY_PROG | MapFlag.BPF_F_WRONLY_PROG)

# bpf_obj_name_cpy accepts only these characters in map names.
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
BPF_OBJ_NAME_LEN = 16

# A sanity cap on one map's storage (values of all CPUs plus keys): past it
# creation fails with ENOMEM, as the kernel's allocation would.
MAX_STORAGE_BYTES = 1 << 34

U8Array = npt.NDArray[np.uint8]


def _as_view(buf: U8Array) -> memoryview:
    """A writable byte view of a contiguous numpy array (what a Region's buf is)."""
    return memoryview(buf.data).cast("B")


def round_up(x: int, align: int) -> int:
    return (x + align - 1) // align * align


def default_nr_cpus() -> int:
    """The number of *possible* CPUs (what per-CPU kernel maps are sized by):
    :func:`pyxdp.smp.possible_cpus` (the kernel's possible-CPU mask, which can
    exceed the online CPUs)."""
    return max(1, possible_cpus())


# -- the registries of live maps (windows: pyxdp.vm.map_space) ------------------------

_lock = threading.Lock()
_next_id = 1
_by_id: weakref.WeakValueDictionary[int, Map] = weakref.WeakValueDictionary()
_objects: weakref.WeakValueDictionary[int, object] = weakref.WeakValueDictionary()
_kinds: dict[int, str] = {}  # register_object's kind of each number


def _register(m: Map) -> int:
    global _next_id
    with _lock:
        map_id = _next_id
        _next_id += 1
        _by_id[map_id] = m
    map_space.publish(m)
    return map_id


def register_object(obj: object, kind: str) -> int:
    """A number for a program or AF_XDP socket of the userspace backend, from the counter
    map ids come from: user space has no descriptors, these numbers stand for them, and
    as fds in one process they never collide, so an fd of one kind given where another
    is wanted is recognised (bad_fd: the kernel's EINVAL/ENOTSOCK, not EBADF)."""
    global _next_id
    with _lock:
        num = _next_id
        _next_id += 1
        _objects[num] = obj
        _kinds[num] = kind
    return num


def release_object(num: int) -> None:
    """The program or socket behind ``num`` was closed: its number is not open any more."""
    with _lock:
        _objects.pop(num, None)
        _kinds.pop(num, None)


# Programs that map entries (devmap/cpumap values) hold, by id: [program, references].
# A program lives while its fd is open (``_objects``) or an entry holds it, as the
# kernel's bpf_prog refcount: closing the fd leaves it to the entries, the last entry's
# delete, replacement or map free ends it (its id resolves no more).
_held: dict[int, list[Any]] = {}


def hold_program(num: int) -> None:
    """A map entry takes a reference on program ``num`` (``bpf_prog_get``), which its
    map's resolver found open just before (a resolver of no backend, as a bare map's
    in tests, may name ids of no program: counted, nothing to keep)."""
    with _lock:
        prog = _objects.get(num) if _kinds.get(num) == "program" else None
        held = _held.setdefault(num, [prog, 0])
        held[0] = held[0] if prog is None else prog
        held[1] += 1


def put_program(num: int) -> None:
    """A map entry drops its reference on program ``num`` (``bpf_prog_put``)."""
    with _lock:
        held = _held.get(num)
        if held is not None:
            held[1] -= 1
            if held[1] <= 0:
                del _held[num]


def live_program(num: int) -> object | None:
    """The program with id ``num`` while it lives: its fd open or a map entry holding
    it (``BPF_PROG_GET_FD_BY_ID`` finds it then, and only then)."""
    with _lock:
        prog = _objects.get(num) if _kinds.get(num) == "program" else None
        if prog is None:
            held = _held.get(num)
            prog = held[0] if held is not None else None
    return prog


def number_in_use(num: int) -> bool:
    """Whether ``num`` stands for a live map, program or AF_XDP socket."""
    return num in _by_id or num in _objects


def registered(num: int, kind: str) -> object | None:
    """The live object of ``kind`` ("program", "xsk") ``num`` stands for, whichever
    backend registered it (fds are the process's), or None."""
    obj = _objects.get(num)
    return obj if obj is not None and _kinds.get(num) == kind else None


def number_kind(num: int) -> str | None:
    """What a live number stands for: "map", or the kind it was registered with
    ("program", "xsk"); None when it is not open."""
    if num in _by_id:
        return "map"
    return _kinds.get(num) if num in _objects else None


def map_by_id(map_id: int) -> Map | None:
    """The live map with this id (ids play the part of map fds for map-in-map values)."""
    return _by_id.get(map_id)


def map_by_addr(addr: int) -> Map | None:
    """The live map whose handle is ``addr`` (what ``ld_imm64`` of a map gives a program)."""
    m = map_space.map_by_addr(addr)
    return m if isinstance(m, Map) else None  # only maps publish handles


# -- codecs -------------------------------------------------------------------------------

@runtime_checkable
class Codec(Protocol):
    """Turns Python keys/values into the map's bytes and back.

    The loader plugs in a BTF-typed codec (``m.codec = ...``); the default
    :class:`RawCodec` takes bytes, ints and numpy values and gives bytes.
    Sizes are checked by the map after encoding.
    """

    def encode_key(self, m: Map, key: object) -> bytes: ...

    def encode_value(self, m: Map, value: object) -> bytes: ...

    def decode_key(self, m: Map, raw: bytes) -> object: ...

    def decode_value(self, m: Map, raw: bytes) -> object: ...


def to_bytes(obj: object, size: int, what: str) -> bytes:
    """bytes-like, int (little-endian, for 1/2/4/8-byte fields) or numpy value -> bytes."""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj)
    if isinstance(obj, (np.ndarray, np.generic)):
        return obj.tobytes()
    if isinstance(obj, int):
        if size not in (1, 2, 4, 8):
            raise MapError("encode", _errno.EINVAL,
                           f"an int {what} needs a 1, 2, 4 or 8 byte field, not {size}")
        if not -(1 << (8 * size - 1)) <= obj < (1 << (8 * size)):
            raise MapError("encode", _errno.EINVAL, f"{what} {obj} does not fit {size} bytes")
        return (obj & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    raise MapError("encode", _errno.EINVAL, f"cannot encode {type(obj).__name__} as a {what}")


class RawCodec:
    """The default codec: bytes in (or ints / numpy values), bytes out."""

    def encode_key(self, m: Map, key: object) -> bytes:
        return to_bytes(key, m.key_size, "key")

    def encode_value(self, m: Map, value: object) -> bytes:
        return to_bytes(value, m.value_size, "value")

    def decode_key(self, m: Map, raw: bytes) -> object:
        return raw

    def decode_value(self, m: Map, raw: bytes) -> object:
        return raw


# -- parameters ---------------------------------------------------------------------------

class MapSpec:
    """The parameters of BPF_MAP_CREATE (libbpf's ``bpf_map_def`` / BTF map definition)."""

    __slots__ = ("inner", "key_size", "map_extra", "map_flags", "map_type", "max_entries",
                 "name", "nr_cpus", "value_size")

    def __init__(self, map_type: int, key_size: int, value_size: int, max_entries: int,
                 map_flags: int = 0, *, name: str = "", inner: Map | None = None,
                 nr_cpus: int | None = None, map_extra: int = 0) -> None:
        self.map_type = int(map_type)
        self.key_size = int(key_size)
        self.value_size = int(value_size)
        self.max_entries = int(max_entries)
        self.map_flags = int(map_flags)
        self.name = name
        self.inner = inner
        self.nr_cpus = default_nr_cpus() if nr_cpus is None else int(nr_cpus)
        self.map_extra = int(map_extra)  # a bloom filter's number of hash functions

    def __repr__(self) -> str:
        return (f"MapSpec({_type_name(self.map_type)}, key_size={self.key_size}, "
                f"value_size={self.value_size}, max_entries={self.max_entries}, "
                f"map_flags={self.map_flags:#x}, name={self.name!r})")


def _drop_held(buf: Any, stride: int, offs: tuple[int, ...]) -> None:
    """Drop every object a __kptr field of the values in ``buf`` holds (a kernel
    object, a task or cgroup, loses the field's reference)."""
    for at in range(0, len(buf) - stride + 1, stride):
        for off in offs:
            obj = int.from_bytes(buf[at + off:at + off + 8], "little")
            if obj:
                buf[at + off:at + off + 8] = bytes(8)
                drop_kptr(obj)


def _type_name(map_type: int) -> str:
    try:
        return BpfMapType(map_type).name
    except ValueError:
        return f"map type {map_type}"


# The map types map_create lets set attr->map_extra.
_MAP_EXTRA_TYPES = frozenset({int(BpfMapType.BPF_MAP_TYPE_BLOOM_FILTER),
                              int(BpfMapType.BPF_MAP_TYPE_ARENA)})


def check_common(spec: MapSpec) -> None:
    """The type-independent checks of ``map_create`` (kernel/bpf/syscall.c)."""
    for field in ("key_size", "value_size", "max_entries", "map_flags"):
        v = getattr(spec, field)
        if not 0 <= v <= U32_MAX:
            raise MapError("map_create", _errno.EINVAL, f"{field} {v} is not a u32")
    if (spec.map_flags & _FILE_FLAGS) == _FILE_FLAGS:
        raise MapError("map_create", _errno.EINVAL, "BPF_F_RDONLY together with BPF_F_WRONLY")
    name = spec.name
    if len(name.encode()) >= BPF_OBJ_NAME_LEN or any(c not in _NAME_CHARS for c in name):
        raise MapError("map_create", _errno.EINVAL,
                       f"map name {name!r}: at most 15 of [A-Za-z0-9_.]")
    if spec.nr_cpus < 1:
        raise MapError("map_create", _errno.EINVAL, "nr_cpus must be at least 1")
    if spec.map_extra and spec.map_type not in _MAP_EXTRA_TYPES:
        raise MapError("map_create", _errno.EINVAL,
                       "map_extra is only for bloom filter and arena maps")


def access_ok(map_flags: int) -> bool:
    """``bpf_map_flags_access_ok``: a map cannot be both read-only and write-only for programs."""
    both = int(MapFlag.BPF_F_RDONLY_PROG | MapFlag.BPF_F_WRONLY_PROG)
    return (map_flags & both) != both


def next_index(i: int | None, max_entries: int) -> bytes | None:
    """The key after index ``i`` in index order (``array_map_get_next_key``, and
    sock_map's and reuseport_array's alike): None or an index out of range starts
    at 0, the last index has none."""
    if i is None or i >= max_entries:
        return (0).to_bytes(4, "little")
    if i == max_entries - 1:
        return None
    return (i + 1).to_bytes(4, "little")


def einval(op: str, detail: str = "") -> MapError:
    return MapError(op, _errno.EINVAL, detail)


_KIND_OF: Final = {"program": "program", "AF_XDP socket": "xsk", "map": "map"}


def bad_fd(op: str, fd: int, not_it: int, wanted: str) -> MapError:
    """An fd value that names no ``wanted`` of pyxdp. pyxdp has no descriptors, but 0
    is the process's stdin and a live map's, program's or socket's number is open: no
    ``wanted`` (``not_it`` is the kernel's answer then: EINVAL from bpf_prog_get/
    bpf_map_get, ENOTSOCK from sockfd_lookup, measured); any other number is not open
    (EBADF)."""
    if fd == 0:
        return MapError(op, not_it, f"fd 0 (stdin) is no {wanted}")
    if number_in_use(fd):
        if number_kind(fd) == _KIND_OF.get(wanted):  # the right kind, another backend's
            article = "an" if wanted[0] in "AEIOUaeiou" else "a"
            return MapError(op, not_it, f"fd {fd} is {article} {wanted} of another Host "
                                        "or Collection, not of this map's")
        return MapError(op, not_it, f"fd {fd} is no {wanted}")
    return MapError(op, _errno.EBADF, f"fd {fd} is not open (no {wanted} of pyxdp)")


# -- the base class -------------------------------------------------------------------

class Map:
    """A BPF map in user space: byte-level kernel operations plus a dict-like API.

    Byte-level operations (what helpers and the syscall layer use):

    * :meth:`lookup` -> value bytes or None (the kernel's ENOENT);
    * :meth:`update`, :meth:`delete`, :meth:`get_next_key`, :meth:`lookup_and_delete`;
    * :meth:`lookup_addr` -> address of the value for a program (0 = NULL);
    * batch forms and queue/stack ``push``/``pop``/``peek``.

    ``cpu=None`` means "from user space" (the bpf(2) semantics: per-CPU values
    are ``nr_cpus`` slots of ``round_up(value_size, 8)`` bytes); ``cpu=n``
    means "from a program running on CPU n" (the helper semantics: one CPU's
    value). Failures raise :class:`MapError` with the kernel's errno; the
    ``try_*`` forms return ``-errno`` instead, as helpers do.
    """

    map_type: ClassVar[int] = int(BpfMapType.BPF_MAP_TYPE_UNSPEC)
    percpu: ClassVar[bool] = False
    #: The batch commands the map's ops have (bpf_map_do_batch answers ENOTSUPP for
    #: the others before it looks at their arguments).
    batch_ops: ClassVar[frozenset[str]] = frozenset(
        {"lookup_batch", "update_batch", "delete_batch", "lookup_and_delete_batch"})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_map_commands(cls)

    def __init__(self, spec: MapSpec) -> None:
        self.spec = spec
        self.key_size = spec.key_size
        self.value_size = spec.value_size
        self.max_entries = spec.max_entries
        # What BPF_OBJ_GET_INFO_BY_FD reports: the access-mode bits are not kept.
        self.map_flags = spec.map_flags & ~_FILE_FLAGS
        self.name = spec.name
        self.nr_cpus = spec.nr_cpus
        # map->owner (bpf_prog_map_compatible): the kind of program a prog_array, devmap
        # or cpumap holds or serves, set by the first program checked against it.
        self.prog_owner: tuple[str, bool, int] | None = None
        self.codec: Codec = RawCodec()
        # Offset of a struct bpf_spin_lock in the value, set from BTF by the
        # loader; BPF_F_LOCK is EINVAL without one, as in the kernel.
        self.spin_lock_off: int | None = None
        # Offsets of a struct bpf_timer and a struct bpf_wq in the value, set from BTF by
        # the loader: updates and deletes free the element's timer and work item
        # (pyxdp.vm.bpf_async), and so does release_uref for all of them.
        self.timer_off: int | None = None
        self.wq_off: int | None = None
        self.task_work_off: int | None = None  # a struct bpf_task_work's, the same way
        self.async_offs: tuple[int, ...] = ()  # all three, where present (place_async)
        # Offsets of the value's referenced __kptr fields, set from BTF by the loader: an
        # update or delete drops the object the old value held (pyxdp.vm.memalloc), and
        # user space reads them as zero.
        self.kptr_offs: tuple[int, ...] = ()
        # Whether one of them holds tasks or cgroups (pyxdp.vm.task_kfuncs): every run of
        # a program using the map sees their memory (a plain load of the field reads one).
        self.kernel_kptrs = False
        # The value's struct bpf_list_head fields as (offset, offset of the node in the
        # objects the list holds), set from BTF by the loader: an update or delete, and
        # the map going, drop the objects still on the list (bpf_list_head_free).
        self.list_heads: tuple[tuple[int, int], ...] = ()
        # The same of its struct bpf_rb_root fields (bpf_rb_root_free).
        self.rb_roots: tuple[tuple[int, int], ...] = ()
        # Every other special field of the value as (offset, size), set from BTF by the
        # loader: updates leave them out (copy_map_value), so they read as zero after.
        self.field_spans: tuple[tuple[int, int], ...] = ()
        # User space let go of the map (map_release_uref): bpf_timer_init and
        # bpf_wq_init are -EPERM now.
        self.uref_released = False
        self._regions: list[Region] = []
        self.addr = allocate_window(self._window_size())
        self.id = _register(self)

    # -- special fields (bpf_timer, bpf_wq) ---------------------------------------------
    def place_async(self, field: str, off: int) -> None:
        """The loader found ``struct field`` (``bpf_timer``, ``bpf_wq``: 16 bytes each;
        ``bpf_task_work``: 8) at ``off`` in the value."""
        if field == "bpf_timer":
            self.timer_off = off
        elif field == "bpf_wq":
            self.wq_off = off
        elif field == "bpf_task_work":
            self.task_work_off = off
        else:
            raise ValueError(f"{field} is not an async special field")
        self.async_offs = tuple(o for o in (self.timer_off, self.wq_off, self.task_work_off)
                                if o is not None)

    def set_kptr_fields(self, offs: tuple[int, ...], kernel: bool = False) -> None:
        """The value's referenced __kptr fields (from BTF, by the loader; ``kernel``: one
        of them holds tasks or cgroups). When the map goes, the objects its values still
        hold are dropped (``bpf_map_free`` -> ``bpf_obj_free_fields``)."""
        self.kptr_offs = offs
        self.kernel_kptrs = kernel
        region = self.value_region()
        weakref.finalize(self, _drop_held, region.buf, self.elem_size, offs)

    def set_list_heads(self, heads: tuple[tuple[int, int], ...]) -> None:
        """The value's list heads (from BTF, by the loader): (offset, node offset)."""
        from pyxdp.vm.bpf_list import free_lists  # (the list model: with the first such map)

        self.list_heads = heads
        region = self.value_region()
        weakref.finalize(self, free_lists, region.buf, region.base, self.elem_size, heads)

    def set_rb_roots(self, roots: tuple[tuple[int, int], ...]) -> None:
        """The value's red-black tree roots (from BTF, by the loader): (offset, node
        offset)."""
        from pyxdp.vm.bpf_rbtree import free_trees  # (the rbtree model: likewise)

        self.rb_roots = roots
        region = self.value_region()
        weakref.finalize(self, free_trees, region.buf, region.base, self.elem_size, roots)

    @property
    def has_fields(self) -> bool:
        """Whether the value holds special fields (an update leaves them out, an update
        or delete frees them)."""
        return bool(self.async_offs or self.field_spans or self.kptr_offs or self.list_heads
                    or self.rb_roots)

    def release_uref(self) -> None:
        """``map_release_uref``: the last user reference is gone; its timers and work
        items are freed."""
        self.uref_released = True
        if self.async_offs:  # (the async model loads with a map holding such fields)
            from pyxdp.vm.bpf_async import ASYNC

            ASYNC.free_map(self)

    def _free_fields(self, value_addr: int) -> None:
        """``bpf_obj_free_fields`` of the value at ``value_addr``: its timer and work
        item are cancelled and freed, the objects its __kptr fields and lists hold
        dropped."""
        if self.async_offs:
            from pyxdp.vm.bpf_async import ASYNC

            for off in self.async_offs:
                ASYNC.cancel_and_free(value_addr + off)
        if self.kptr_offs or self.list_heads or self.rb_roots:
            from pyxdp.vm.bpf_list import free_lists
            from pyxdp.vm.bpf_rbtree import free_trees

            region = self.value_region()
            at = value_addr - region.base
            value = region.buf[at:at + self.elem_size]
            _drop_held(value, self.elem_size, self.kptr_offs)
            free_lists(value, value_addr, self.elem_size, self.list_heads)
            free_trees(value, value_addr, self.elem_size, self.rb_roots)

    def _skip_fields(self, data: bytes) -> bytes:
        """``data`` with its special fields zero (what the element holds after an update:
        ``copy_map_value`` leaves them out; and what user space reads:
        ``check_and_init_map_value``; between runs a lock is free, its word 0)."""
        spans = ((self.timer_off, 16), (self.wq_off, 16), (self.task_work_off, 8))
        fields = (*((o, n) for o, n in spans if o is not None), *self.field_spans,
                  *((o, 8) for o in self.kptr_offs))
        if not fields:  # no copy: a value may be 2 GiB (INT_MAX), as Linux's
            return data
        out = bytearray(data)
        for off, size in fields:
            out[off:off + size] = bytes(size)
        return bytes(out)

    # -- storage hooks -------------------------------------------------------------------
    def _storage_bytes(self) -> int:
        """Bytes of program-visible storage per CPU (0: the type has none)."""
        return 0

    def _cpu_stride(self) -> int:
        return round_up(max(self._storage_bytes(), 1), PAGE_SIZE)

    def _window_size(self) -> int:
        cpus = self.nr_cpus if self.percpu else 1
        return VALUES_OFFSET + cpus * self._cpu_stride()

    def _make_regions(self, buffers: Sequence[U8Array], writable: bool = True) -> None:
        stride = self._cpu_stride()
        self._regions = [
            Region(f"map {self.name or self.id} values" + (f" cpu {n}" if self.percpu else ""),
                   self.addr + VALUES_OFFSET + n * stride, _as_view(buf),
                   writable)
            for n, buf in enumerate(buffers)]

    def regions(self) -> list[Region]:
        """Every program-visible region of this map (add them all to a run's Memory)."""
        return list(self._regions)

    def value_region(self, cpu: int = 0) -> Region:
        """The region holding the values a program on ``cpu`` sees."""
        if not self._regions:
            raise MapError("value_region", ENOTSUPP,
                           f"{_type_name(self.map_type)} has no program-visible values")
        return self._regions[cpu if self.percpu else 0]

    # -- sizes ------------------------------------------------------------------------
    @property
    def elem_size(self) -> int:
        """``round_up(value_size, 8)``: a per-CPU slot and the array element stride."""
        return round_up(self.value_size, 8)

    @property
    def user_value_size(self) -> int:
        """Size of a value at the bpf(2) boundary (``nr_cpus`` slots for per-CPU maps)."""
        return self.elem_size * self.nr_cpus if self.percpu else self.value_size

    def _key(self, key: bytes | bytearray | memoryview | None, op: str) -> bytes:
        if key is None:
            raise einval(op, "this map needs a key")
        return handle_bytes(key, self.key_size, "key", op)

    def _value(self, value: bytes | bytearray | memoryview, cpu: int | None, op: str) -> bytes:
        want = self.value_size if cpu is not None or not self.percpu else self.user_value_size
        return handle_bytes(value, want, "value", op)

    def _check_cpu(self, cpu: int | None, op: str) -> None:
        if cpu is not None and not 0 <= cpu < self.nr_cpus:
            raise einval(op, f"cpu {cpu} is not one of the map's {self.nr_cpus} CPUs")

    def _lookup_flags(self, flags: int, op: str = "lookup") -> None:
        """``map_lookup_elem`` (syscall.c): only BPF_F_LOCK, and only with a lock."""
        if flags & ~BPF_F_LOCK:
            raise einval(op, f"unknown flags {flags:#x}")
        if flags & BPF_F_LOCK and self.spin_lock_off is None:
            raise einval(op, "BPF_F_LOCK on a value without a bpf_spin_lock")

    def _update_flags(self, flags: int, op: str = "update") -> None:
        """The common check: ``(flags & ~BPF_F_LOCK) > BPF_EXIST``, BPF_F_LOCK needs a lock."""
        if (flags & ~BPF_F_LOCK) > BPF_EXIST:
            raise einval(op, f"unknown flags {flags:#x}")
        if flags & BPF_F_LOCK and self.spin_lock_off is None:
            raise einval(op, "BPF_F_LOCK on a value without a bpf_spin_lock")

    # -- byte-level operations (kernel defaults) --------------------------------------------
    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        """BPF_MAP_LOOKUP_ELEM: the value, or None where the kernel answers ENOENT."""
        raise MapError("lookup", ENOTSUPP)

    def update(self, key: bytes | None, value: bytes, flags: int = BPF_ANY, *,
               cpu: int | None = None) -> None:
        """BPF_MAP_UPDATE_ELEM / ``bpf_map_update_elem``."""
        raise MapError("update", ENOTSUPP)

    def delete(self, key: bytes | None) -> None:
        """BPF_MAP_DELETE_ELEM / ``bpf_map_delete_elem``."""
        raise MapError("delete", ENOTSUPP)

    def get_next_key(self, key: bytes | None) -> bytes | None:
        """BPF_MAP_GET_NEXT_KEY: the key after ``key``; None at the end.

        None or a missing key gives the first key (for most types).
        """
        raise MapError("get_next_key", ENOTSUPP)

    def lookup_and_delete(self, key: bytes | None, flags: int = 0) -> bytes | None:
        """BPF_MAP_LOOKUP_AND_DELETE_ELEM; None where the kernel answers ENOENT."""
        raise MapError("lookup_and_delete", ENOTSUPP)

    def lookup_addr(self, key: bytes, cpu: int = 0) -> int:
        """``bpf_map_lookup_elem`` from a program on ``cpu``: the value's address, 0 for NULL."""
        return 0

    def push(self, value: bytes, flags: int = BPF_ANY) -> None:
        raise MapError("push", _errno.EINVAL)

    def pop(self) -> bytes | None:
        raise MapError("pop", _errno.EINVAL)

    def peek(self) -> bytes | None:
        raise MapError("peek", _errno.EINVAL)

    # -- helper-style return codes ---------------------------------------------------------
    def try_update(self, key: bytes | None, value: bytes, flags: int = BPF_ANY, *,
                   cpu: int | None = None) -> int:
        """:meth:`update` returning 0 or ``-errno`` (``bpf_map_update_elem``'s r0)."""
        try:
            self.update(key, value, flags, cpu=cpu)
        except MapError as e:
            return -e.errno
        return 0

    def try_delete(self, key: bytes | None) -> int:
        try:
            self.delete(key)
        except MapError as e:
            return -e.errno
        return 0

    def try_push(self, value: bytes, flags: int = BPF_ANY) -> int:
        try:
            self.push(value, flags)
        except MapError as e:
            return -e.errno
        return 0

    # -- batch operations --------------------------------------------------------------
    def _batch_op(self, op: str) -> None:
        if op not in self.batch_ops:
            raise MapError(op, ENOTSUPP)

    def lookup_batch(self, cursor: bytes | None = None, count: int = 0
                     ) -> tuple[list[bytes], list[bytes], bytes | None]:
        """BPF_MAP_LOOKUP_BATCH: up to ``count`` (0: all) keys and values after ``cursor``.

        Returns ``(keys, values, cursor)``; the cursor is None once the map is
        exhausted (the kernel's ENOENT). Keys come in :meth:`get_next_key` order.
        """
        self._batch_op("lookup_batch")
        count = batch_count(count, "lookup_batch")
        keys: list[bytes] = []
        values: list[bytes] = []
        key = self.get_next_key(cursor) if cursor is not None else self.get_next_key(None)
        while key is not None and (count == 0 or len(keys) < count):
            value = self.lookup(key)
            if value is not None:
                keys.append(key)
                values.append(value)
            key = self.get_next_key(key)
        return keys, values, (keys[-1] if keys and key is not None else None)

    def update_batch(self, keys: Sequence[bytes] | npt.NDArray[Any],
                     values: Sequence[bytes] | npt.NDArray[Any], flags: int = BPF_ANY) -> int:
        """BPF_MAP_UPDATE_BATCH: updates in order; a failure raises with ``.count`` done.

        numpy arrays are taken row by row (``keys[i].tobytes()``).
        """
        self._batch_op("update_batch")
        # generic_map_update_batch: elem_flags takes BPF_F_LOCK alone (every element is
        # written BPF_ANY), checked before the count, so for an empty batch too
        self._lookup_flags(flags, "update_batch")
        keys = batch_rows(keys, "keys", "update_batch")
        values = batch_rows(values, "values", "update_batch")
        if len(keys) != len(values):
            raise einval("update_batch", "as many keys as values are needed")
        for n, (k, v) in enumerate(zip(keys, values, strict=True)):
            try:
                self.update(k, v, flags)
            except MapError as e:
                e.count = n
                raise
        return len(keys)

    def delete_batch(self, keys: Sequence[bytes]) -> int:
        """BPF_MAP_DELETE_BATCH: deletes in order; a failure raises with ``.count`` done."""
        self._batch_op("delete_batch")
        for n, k in enumerate(batch_rows(keys, "keys", "delete_batch")):
            try:
                self.delete(k)
            except MapError as e:
                e.count = n
                raise
        return len(keys)

    def lookup_and_delete_batch(self, count: int = 0) -> tuple[list[bytes], list[bytes]]:
        """BPF_MAP_LOOKUP_AND_DELETE_BATCH from the start of the map."""
        self._batch_op("lookup_and_delete_batch")
        keys, values, _ = self.lookup_batch(None, count)
        self.delete_batch(keys)
        return keys, values

    # -- Python API ---------------------------------------------------------------------
    def _enc_key(self, key: object) -> bytes:
        return self.codec.encode_key(self, key)

    def _enc_value(self, value: object) -> bytes:
        """One Python value -> the bytes :meth:`update` takes with ``cpu=None``."""
        if not self.percpu:
            return self.codec.encode_value(self, value)
        if isinstance(value, (list, tuple)):
            if len(value) != self.nr_cpus:
                raise einval("encode", f"{len(value)} per-CPU values for {self.nr_cpus} CPUs")
            parts = [self.codec.encode_value(self, v) for v in value]
        else:
            parts = [self.codec.encode_value(self, value)] * self.nr_cpus
        pad = bytes(self.elem_size - self.value_size)
        return b"".join(p + pad for p in parts)

    def _dec_value(self, raw: bytes) -> Any:
        if not self.percpu:
            return self.codec.decode_value(self, raw)
        es = self.elem_size
        return [self.codec.decode_value(self, raw[n * es:n * es + self.value_size])
                for n in range(self.nr_cpus)]

    def __getitem__(self, key: object) -> Any:
        raw = self.lookup(self._enc_key(key))
        if raw is None:
            raise KeyError(key)
        return self._dec_value(raw)

    def __setitem__(self, key: object, value: object) -> None:
        self.update(self._enc_key(key), self._enc_value(value), BPF_ANY)

    def __delitem__(self, key: object) -> None:
        try:
            self.delete(self._enc_key(key))
        except MapError as e:
            if e.errno == _errno.ENOENT:
                raise KeyError(key) from None
            raise

    def __contains__(self, key: object) -> bool:
        return self.lookup(self._enc_key(key)) is not None

    def get(self, key: object, default: Any = None) -> Any:
        raw = self.lookup(self._enc_key(key))
        return default if raw is None else self._dec_value(raw)

    def raw_keys(self) -> Iterator[bytes]:
        """Keys as bytes, in get_next_key order."""
        key = self.get_next_key(None)
        while key is not None:
            yield key
            key = self.get_next_key(key)

    def __iter__(self) -> Iterator[Any]:
        for k in self.raw_keys():
            yield self.codec.decode_key(self, k)

    def keys(self) -> list[Any]:
        return list(self)

    def items(self) -> list[tuple[Any, Any]]:
        out = []
        for k in self.raw_keys():
            raw = self.lookup(k)
            if raw is not None:
                out.append((self.codec.decode_key(self, k), self._dec_value(raw)))
        return out

    def values(self) -> list[Any]:
        return [v for _, v in self.items()]

    def __len__(self) -> int:
        return sum(1 for _ in self.raw_keys())

    def clear(self) -> None:
        """Delete every element (arrays: zero every value)."""
        for k in list(self.raw_keys()):
            self.delete(k)

    def sum(self, key: object, *, signed: bool = False) -> int:
        """The value at ``key`` as an integer, summed over CPUs for per-CPU maps."""
        if self.value_size not in (1, 2, 4, 8):
            raise einval("sum", f"value_size {self.value_size} is not an integer size")
        raw = self.lookup(self._enc_key(key))
        if raw is None:
            raise KeyError(key)
        dt = np.dtype(f"<{'i' if signed else 'u'}{self.value_size}")
        if not self.percpu:
            return int(np.frombuffer(raw, dt)[0])
        slots = np.frombuffer(raw, np.uint8).reshape(self.nr_cpus, self.elem_size)
        per_cpu = slots[:, :self.value_size].copy().view(dt).reshape(self.nr_cpus)
        return int(per_cpu.astype(np.int64 if signed else np.uint64).sum(dtype=object))

    def describe(self) -> dict[str, Any]:
        """Type, sizes, flags and entries, like ``bpftool map show``."""
        return {
            "id": self.id,
            "type": _type_name(self.map_type).removeprefix("BPF_MAP_TYPE_").lower(),
            "map_type": self.map_type,
            "name": self.name,
            "key_size": self.key_size,
            "value_size": self.value_size,
            "max_entries": self.max_entries,
            "map_flags": self.map_flags,
            "nr_cpus": self.nr_cpus if self.percpu else None,
            "addr": self.addr,
        }

    def __repr__(self) -> str:
        d = self.describe()
        return (f"<{type(self).__name__} id={d['id']} {d['type']} name={d['name']!r} "
                f"key={d['key_size']} value={d['value_size']} max={d['max_entries']} "
                f"flags={d['map_flags']:#x}>")

    def __bool__(self) -> bool:  # a map is never falsy, even when empty
        return True


check_map_commands(Map)


# -- the syscall side ----------------------------------------------------------------

_READ_OPS = ("lookup", "get_next_key", "lookup_batch", "peek", "get", "raw_keys", "keys",
             "items", "values", "sum", "__getitem__", "__contains__", "__iter__", "__len__")
_WRITE_OPS = ("update", "delete", "update_batch", "delete_batch", "push", "__setitem__",
              "__delitem__")
_READ_WRITE_OPS = ("lookup_and_delete", "lookup_and_delete_batch", "pop", "clear")


# the dict-like forms report the bpf(2) command they first issue
_DUNDER_OPS = {"__getitem__": "lookup", "__contains__": "lookup", "get": "lookup",
               "sum": "lookup", "__iter__": "get_next_key", "__len__": "get_next_key",
               "raw_keys": "get_next_key", "keys": "get_next_key", "items": "get_next_key",
               "values": "get_next_key", "clear": "get_next_key", "__setitem__": "update",
               "__delitem__": "delete"}


def _sys_op(name: str, read: bool, write: bool) -> Any:
    cmd = _DUNDER_OPS.get(name, name)

    def op(self: SyscallView, *args: Any, **kwargs: Any) -> Any:
        self.check(cmd, read=read, write=write)
        try:
            return getattr(self.map, name)(*args, **kwargs)
        except MemoryError:  # bpf(2)'s kvmalloc of the value or batch buffer failed
            raise MapError(cmd, _errno.ENOMEM, f"map {self.map.name!r}: no memory for the "
                           f"{cmd} buffer") from None
    op.__name__ = name
    return op


class SyscallView:
    """A user-space map as bpf(2) reaches it through its descriptor (``map_get_sys_perms``).

    ``BPF_F_RDONLY``/``BPF_F_WRONLY`` at creation set the descriptor's mode and
    ``BPF_MAP_FREEZE`` takes its write permission away: the syscall side then answers
    EPERM before looking at keys or the operation (measured on 6.18: even an array's
    delete, EINVAL otherwise, and a second freeze). Programs keep the raw :class:`Map`,
    which these leave alone (``BPF_F_*_PROG`` govern that side). Everything else is the
    map's own attribute.
    """

    __slots__ = ("file_flags", "frozen", "map")

    def __init__(self, m: Map, file_flags: int, frozen: bool = False) -> None:
        self.map = m
        self.file_flags = file_flags & _FILE_FLAGS
        self.frozen = frozen

    def check(self, op: str, *, read: bool = False, write: bool = False) -> None:
        """EPERM as map_get_sys_perms answers it for ``op``."""
        check_sys_perms(op, self.map.name, self.file_flags, self.frozen, read=read, write=write)

    def freeze(self) -> None:
        """BPF_MAP_FREEZE: no more writes through bpf(2); programs are unaffected."""
        self.check("freeze", write=True)
        self.frozen = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.map, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in SyscallView.__slots__:
            object.__setattr__(self, name, value)
        else:  # a hook set through the handle (devmap.ifindex_ok, ...) is the map's
            setattr(self.map, name, value)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(handle, RingBuf) holds, as for the map
        return type(self.map)

    def __repr__(self) -> str:
        return repr(self.map)

    def __bool__(self) -> bool:
        return True

    for _n in _READ_OPS:
        locals()[_n] = _sys_op(_n, True, False)
    for _n in _WRITE_OPS:
        locals()[_n] = _sys_op(_n, False, True)
    for _n in _READ_WRITE_OPS:
        locals()[_n] = _sys_op(_n, True, True)
    del _n
