"""Array maps, as ``kernel/bpf/arraymap.c`` (+ the fd-array half of ``kernel/bpf/map_in_map.c``).

``BPF_MAP_TYPE_ARRAY``, ``PERCPU_ARRAY``, ``PROG_ARRAY`` and ``ARRAY_OF_MAPS``
with ``array_map_alloc_check`` / ``fd_array_map_alloc_check`` and the
errnos of ``array_map_update_elem`` (E2BIG past the end, EEXIST for
``BPF_NOEXIST`` always), ``array_map_delete_elem`` (EINVAL) and
``array_map_get_next_key`` (index order; a missing or out-of-range key
restarts at 0).

Storage for native code (``ArrayMap.value_data``, numpy ``uint8``, C order):

* ``ARRAY``: ``max_entries * elem_size`` bytes, ``elem_size =
  round_up(value_size, 8)`` as the kernel's ``array->elem_size``; value ``i``
  is at byte ``i * elem_size``. One region; the address of value ``i`` is
  ``value_region().base + i * elem_size``.
* ``PERCPU_ARRAY``: shape ``(nr_cpus, max_entries * elem_size)``; row ``c``
  is CPU ``c``'s copy, exposed as its own region (``value_region(c)``).

``PROG_ARRAY`` and ``ARRAY_OF_MAPS`` hold objects, not bytes: ``ids``
(``uint32[max_entries]``, 0 = empty) keeps the id the kernel reports on
lookup and a Python list keeps the object. Their "fds" are resolved by
pluggable hooks (programs) or the map-id registry (maps): pyxdp has no file
descriptors of its own. Simplified: no ``BPF_F_MMAPABLE`` mapping (the flag
is accepted and kept), no NUMA, no ``index_mask`` speculation hardening.
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from pyxdp.backend import batch_count, batch_rows, handle_bytes
from pyxdp.maps.base import (
    BPF_ANY,
    BPF_F_ACCESS_MASK,
    BPF_NOEXIST,
    ENOTSUPP,
    INT_MAX,
    MAX_STORAGE_BYTES,
    PCPU_MIN_UNIT_SIZE,
    Map,
    MapError,
    MapSpec,
    U8Array,
    access_ok,
    bad_fd,
    einval,
    map_by_id,
    next_index,
    round_up,
)
from pyxdp.uapi.bpf import BpfMapType, MapFlag
from pyxdp.vm.jit.abi import SLOW, MapInfo
from pyxdp.vm.jit.ir import TBAA_MEM, Text, c64, ret_if
from pyxdp.vm.jit.natives import MapNative, map_desc, register_map

__all__ = ["ArrayMap", "ArrayOfMaps", "FdArrayMap", "PercpuArrayMap", "ProgArrayMap",
           "array_alloc_check", "fd_array_alloc_check"]

_T = BpfMapType
ARRAY_CREATE_FLAG_MASK = int(MapFlag.BPF_F_NUMA_NODE | MapFlag.BPF_F_MMAPABLE
                             | MapFlag.BPF_F_PRESERVE_ELEMS | MapFlag.BPF_F_INNER_MAP) \
    | BPF_F_ACCESS_MASK


def array_alloc_check(spec: MapSpec) -> None:
    """``array_map_alloc_check`` (also run for every fd array)."""
    op = "map_create"
    percpu = spec.map_type == _T.BPF_MAP_TYPE_PERCPU_ARRAY
    # pyxdp takes no numa_node: BPF_F_NUMA_NODE stands for "a node was given".
    numa = bool(spec.map_flags & MapFlag.BPF_F_NUMA_NODE)
    if (spec.max_entries == 0 or spec.key_size != 4 or spec.value_size == 0
            or spec.map_flags & ~ARRAY_CREATE_FLAG_MASK or not access_ok(spec.map_flags)
            or (percpu and numa)):
        raise einval(op, "array: key_size 4, value_size and max_entries > 0, known flags")
    if (spec.map_type != _T.BPF_MAP_TYPE_ARRAY
            and spec.map_flags & (MapFlag.BPF_F_MMAPABLE | MapFlag.BPF_F_INNER_MAP)):
        raise einval(op, "BPF_F_MMAPABLE / BPF_F_INNER_MAP are for BPF_MAP_TYPE_ARRAY only")
    if (spec.map_type != _T.BPF_MAP_TYPE_PERF_EVENT_ARRAY
            and spec.map_flags & MapFlag.BPF_F_PRESERVE_ELEMS):
        raise einval(op, "BPF_F_PRESERVE_ELEMS is for perf event arrays only")
    if spec.value_size > INT_MAX:
        raise MapError(op, _errno.E2BIG, "value_size above INT_MAX")
    if percpu and round_up(spec.value_size, 8) > PCPU_MIN_UNIT_SIZE:
        raise MapError(op, _errno.E2BIG, "per-CPU value above PCPU_MIN_UNIT_SIZE (32 KiB)")
    cpus = spec.nr_cpus if percpu else 1
    if spec.max_entries * round_up(spec.value_size, 8) * cpus > MAX_STORAGE_BYTES:
        raise MapError(op, _errno.ENOMEM, "array storage too large")


def fd_array_alloc_check(spec: MapSpec) -> None:
    """``fd_array_map_alloc_check``: values are u32 fds, not writable by programs."""
    if spec.value_size != 4 or spec.map_flags & (MapFlag.BPF_F_RDONLY_PROG
                                                 | MapFlag.BPF_F_WRONLY_PROG):
        raise einval("map_create", "fd array: value_size 4, no BPF_F_{RDONLY,WRONLY}_PROG")
    array_alloc_check(spec)


def _index(key: bytes) -> int:
    return int.from_bytes(key, "little")


class _ArrayOrder(Map):
    """``array_map_get_next_key``: index order; None/out-of-range restarts at 0."""

    def get_next_key(self, key: bytes | None) -> bytes | None:
        i = None if key is None else _index(self._key(key, "get_next_key"))
        return next_index(i, self.max_entries)
    # array_map_ops and the fd arrays' have no delete batches (measured on Linux 6.18)
    batch_ops = frozenset({"lookup_batch", "update_batch"})


class ArrayMap(_ArrayOrder):
    """``BPF_MAP_TYPE_ARRAY``: preallocated, zero-filled values indexed by a u32 key."""

    map_type = int(_T.BPF_MAP_TYPE_ARRAY)

    def __init__(self, spec: MapSpec) -> None:
        array_alloc_check(spec)
        super().__init__(spec)
        rows = spec.nr_cpus if self.percpu else 1
        size = self.max_entries * self.elem_size
        self.value_data: U8Array = np.zeros((rows, size) if self.percpu else size, np.uint8)
        writable = not self.map_flags & MapFlag.BPF_F_RDONLY_PROG
        self._make_regions(list(self.value_data) if self.percpu else [self.value_data], writable)

    def _storage_bytes(self) -> int:
        return self.max_entries * round_up(self.value_size, 8)

    def view(self) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """The values as ``(max_entries, value_size)`` (per-CPU: ``(nr_cpus, max_entries,
        value_size)``), a writable view of the storage."""
        if self.percpu:
            v = self.value_data.reshape(self.nr_cpus, self.max_entries, self.elem_size)
            return v[:, :, :self.value_size]
        return self.value_data.reshape(self.max_entries, self.elem_size)[:, :self.value_size]

    # -- operations -------------------------------------------------------------------
    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        self._lookup_flags(flags)
        self._check_cpu(cpu, "lookup")
        i = _index(self._key(key, "lookup"))
        if i >= self.max_entries:
            return None
        off = i * self.elem_size
        if not self.percpu:
            return self._skip_fields(self.value_data[off:off + self.value_size].tobytes())
        if cpu is not None:
            return self.value_data[cpu, off:off + self.value_size].tobytes()
        return self.value_data[:, off:off + self.elem_size].tobytes()

    def lookup_addr(self, key: bytes, cpu: int = 0) -> int:
        i = _index(key)
        if i >= self.max_entries or not 0 <= cpu < self.nr_cpus:
            return 0
        return self.value_region(cpu).base + i * self.elem_size

    def update(self, key: bytes | None, value: bytes, flags: int = BPF_ANY, *,
               cpu: int | None = None) -> None:
        self._check_cpu(cpu, "update")
        if self.percpu and cpu is None:
            # bpf_percpu_array_update: BPF_F_LOCK is simply an unknown flag here.
            if flags > 2:
                raise einval("update", f"unknown flags {flags:#x}")
        else:
            self._update_flags(flags)
        i = _index(self._key(key, "update"))
        data = self._value(value, cpu, "update")
        if i >= self.max_entries:
            raise MapError("update", _errno.E2BIG, f"index {i} >= max_entries")
        if flags & BPF_NOEXIST:
            raise MapError("update", _errno.EEXIST, "array elements always exist")
        off = i * self.elem_size
        vs = self.value_size
        if self.has_fields:  # array_map_update_elem: copy, then free the fields
            self._free_fields(self.value_region().base + off)
            data = self._skip_fields(data)
        src = np.frombuffer(data, np.uint8)
        if not self.percpu:
            self.value_data[off:off + vs] = src
        elif cpu is not None:
            self.value_data[cpu, off:off + vs] = src
        else:
            # bpf_percpu_array_update copies whole 8-byte-rounded slots
            # (copy_map_value_long): the padding comes from user space too.
            self.value_data[:, off:off + self.elem_size] = src.reshape(self.nr_cpus,
                                                                      self.elem_size)

    def key_at(self, value_addr: int) -> bytes:
        """The key of the element whose value is at ``value_addr`` (its index)."""
        return ((value_addr - self.value_region().base) // self.elem_size).to_bytes(4, "little")

    def delete(self, key: bytes | None) -> None:
        self._key(key, "delete")
        raise einval("delete", "array elements cannot be deleted")

    def lookup_and_delete(self, key: bytes | None, flags: int = 0) -> bytes | None:
        raise MapError("lookup_and_delete", ENOTSUPP)

    # -- bulk ---------------------------------------------------------------------------
    def lookup_batch(self, cursor: bytes | None = None, count: int = 0
                     ) -> tuple[list[bytes], list[bytes], bytes | None]:
        count = batch_count(count, "lookup_batch")
        if self.key_size + self.value_size > INT_MAX:
            # generic_map_lookup_batch's one key+value buffer: kvmalloc refuses above
            # INT_MAX (measured on 6.18: a value of INT_MAX bytes, lookup works, batch not)
            raise MapError("lookup_batch", _errno.ENOMEM, "key and value above INT_MAX bytes")
        start = 0 if cursor is None else _index(self._key(cursor, "lookup_batch")) + 1
        start = min(start, self.max_entries)
        stop = self.max_entries if count == 0 else min(self.max_entries, start + count)
        idx = np.arange(start, stop, dtype="<u4")
        if self.percpu:
            block = self.value_data.reshape(self.nr_cpus, self.max_entries, self.elem_size)
            rows = np.ascontiguousarray(block[:, start:stop, :].transpose(1, 0, 2))
            vals = [r.tobytes() for r in rows]
        else:
            rows = self.value_data.reshape(self.max_entries, self.elem_size)[start:stop,
                                                                          :self.value_size]
            vals = [r.tobytes() for r in rows]
        keys = [k.tobytes() for k in idx]
        nxt = keys[-1] if keys and stop < self.max_entries else None
        return keys, vals, nxt

    def update_batch(self, keys: Sequence[bytes] | np.ndarray[Any, Any],
                     values: Sequence[bytes] | np.ndarray[Any, Any],
                     flags: int = BPF_ANY) -> int:
        """Vectorized BPF_MAP_UPDATE_BATCH; ``keys``/``value_data`` may be numpy arrays.

        Like the kernel, elements are applied in order up to the first failing
        one, whose errno is raised with ``.count`` = elements done.
        """
        self._batch_op("update_batch")
        self._lookup_flags(flags, "update_batch")  # BPF_F_LOCK alone, as Map.update_batch
        if self.percpu or self.has_fields:  # one by one: each frees its fields
            return super().update_batch(keys, values, flags)
        # Index and value arrays of integers take the vectorized path; anything else is
        # checked row by row (a list of bytes-like objects).
        if not isinstance(keys, np.ndarray) or keys.dtype.kind not in "iu":
            keys = batch_rows(keys, "keys", "update_batch")
        if not isinstance(values, np.ndarray) or values.dtype.kind not in "iu":
            values = batch_rows(values, "values", "update_batch")
        idx = (np.frombuffer(b"".join(self._key(k, "update_batch") for k in keys), "<u4")
               if not isinstance(keys, np.ndarray) else keys.astype("<u4").ravel())
        vals = (np.frombuffer(b"".join(handle_bytes(v, self.value_size, "value", "update_batch")
                                       for v in values), np.uint8)
                if not isinstance(values, np.ndarray) else
                np.ascontiguousarray(values).view(np.uint8).ravel())
        if vals.size != idx.size * self.value_size:
            raise einval("update_batch", "values do not match keys * value_size")
        vals2 = vals.reshape(idx.size, self.value_size)
        bad = np.flatnonzero(idx >= self.max_entries)
        done = int(bad[0]) if bad.size else idx.size
        err = _errno.E2BIG if bad.size else 0
        # Duplicate indices: numpy fancy assignment keeps the last, as sequential updates do.
        self.value_data.reshape(self.max_entries, self.elem_size)[
            idx[:done], :self.value_size] = vals2[:done]
        if err:
            raise MapError("update_batch", err, count=done)
        return done

    def __len__(self) -> int:
        return self.max_entries

    def clear(self) -> None:
        """Zero every value (array elements cannot be deleted)."""
        if self.async_offs:  # (the async model loads with a map holding such fields)
            from pyxdp.vm.bpf_async import ASYNC

            ASYNC.free_map(self)
        self.value_data.fill(0)


class PercpuArrayMap(ArrayMap):
    """``BPF_MAP_TYPE_PERCPU_ARRAY``: one value per CPU and index."""

    map_type = int(_T.BPF_MAP_TYPE_PERCPU_ARRAY)
    percpu = True


class FdArrayMap(_ArrayOrder):
    """An array of kernel objects referenced by fd (the ``fd_array_map_*`` functions).

    ``ids[i]`` is what a user-space lookup reports (the object's id), 0 when
    empty; ``objects[i]`` is the object itself. ``_resolve`` turns the u32
    written by user space into ``(object, id)`` or raises the kernel's errno.
    """

    def __init__(self, spec: MapSpec) -> None:
        fd_array_alloc_check(spec)
        super().__init__(spec)
        self.ids = np.zeros(self.max_entries, np.uint32)
        # The object of each set slot: a dict, not a list of max_entries, so an array
        # of 2^31 slots costs what its set slots do (ids is lazy zero pages).
        self.objects: dict[int, object] = {}

    def _resolve(self, fd: int) -> tuple[object, int]:
        raise MapError("update", _errno.EBADF, f"fd {fd} is not an object pyxdp knows")

    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        self._lookup_flags(flags)
        i = _index(self._key(key, "lookup"))
        if i >= self.max_entries or i not in self.objects:
            return None
        return int(self.ids[i]).to_bytes(4, "little")

    def update(self, key: bytes | None, value: bytes, flags: int = BPF_ANY, *,
               cpu: int | None = None) -> None:
        i = _index(self._key(key, "update"))
        data = self._value(value, None, "update")
        if flags != BPF_ANY:
            raise einval("update", "fd arrays take BPF_ANY only")
        if i >= self.max_entries:
            raise MapError("update", _errno.E2BIG, f"index {i} >= max_entries")
        obj, oid = self._resolve(int.from_bytes(data, "little"))
        self._put(i, obj, oid)

    def delete(self, key: bytes | None) -> None:
        i = _index(self._key(key, "delete"))
        if i >= self.max_entries:
            raise MapError("delete", _errno.E2BIG, f"index {i} >= max_entries")
        if i not in self.objects:
            raise MapError("delete", _errno.ENOENT)
        self._put(i, None, 0)

    def _put(self, i: int, obj: object | None, oid: int) -> None:
        """Slot ``i`` now holds ``obj`` (None: empty), reported as ``oid``."""
        if obj is None:
            self.objects.pop(i, None)
        else:
            self.objects[i] = obj
        self.ids[i] = oid

    def object_at(self, index: int) -> object | None:
        """The object at ``index`` (None when empty or out of range)."""
        return self.objects.get(index)

    def raw_keys(self) -> Iterator[bytes]:
        # get_next_key walks every index; the Python API lists only the set
        # ones (ids are never 0 for a set entry).
        return iter([i.tobytes() for i in np.flatnonzero(self.ids).astype("<u4")])

    def __len__(self) -> int:
        return int(np.count_nonzero(self.ids))

    def clear(self) -> None:
        for i in list(self.objects):
            self._put(i, None, 0)


class ProgArrayMap(FdArrayMap):
    """``BPF_MAP_TYPE_PROG_ARRAY``: tail-call targets.

    pyxdp programs have no fds: set :attr:`resolve_fd` (``fd -> (program,
    prog_id)``, raising :class:`MapError` for a bad fd) or use :meth:`set`.
    Without a resolver every fd is EBADF, as an fd that is not open.
    Programs cannot look a prog array up (``lookup_addr`` is NULL, as the
    kernel's ``prog_fd_array`` lookup op returns NULL).
    """

    map_type = int(_T.BPF_MAP_TYPE_PROG_ARRAY)
    batch_ops: ClassVar[frozenset[str]] = frozenset()  # prog_array_map_ops has none

    def __init__(self, spec: MapSpec) -> None:
        super().__init__(spec)
        self.resolve_fd: Callable[[int], tuple[object, int]] | None = None

    def _resolve(self, fd: int) -> tuple[object, int]:
        if self.resolve_fd is None:
            raise bad_fd("update", fd, _errno.EINVAL, "program")
        return self.resolve_fd(fd)

    def set(self, index: int, prog: object, prog_id: int) -> None:
        """Install ``prog`` (reported as ``prog_id`` on lookup) at ``index``."""
        if not 0 <= index < self.max_entries:
            raise MapError("update", _errno.E2BIG, f"index {index} >= max_entries")
        if not 0 < prog_id <= 0xFFFF_FFFF:
            raise einval("update", "a program id is a non-zero u32")
        self.objects[index] = prog
        self.ids[index] = prog_id

    def prog_at(self, index: int) -> object | None:
        """The tail-call target at ``index`` (``bpf_tail_call``), None when empty."""
        return self.object_at(index)


def inner_meta_check(spec: MapSpec) -> Map:
    """``bpf_map_meta_alloc``: the template map every inner map must match."""
    inner = spec.inner
    if inner is None:
        # inner_map_fd 0 is not a map fd: the kernel answers EINVAL (measured).
        raise einval("map_create", "a map-in-map needs an inner map template")
    if getattr(inner, "is_map_in_map", False):
        raise einval("map_create", "map-in-map nests one level only")
    if inner.map_type == _T.BPF_MAP_TYPE_PROG_ARRAY:
        raise MapError("map_create", ENOTSUPP, "a prog array cannot be an inner map")
    return inner


def meta_equal(meta: Map, other: Map) -> bool:
    """``bpf_map_meta_equal`` (+ ``array_map_meta_equal``'s max_entries rule)."""
    same = (meta.map_type == other.map_type and meta.key_size == other.key_size
            and meta.value_size == other.value_size and meta.map_flags == other.map_flags)
    if same and meta.map_type in (_T.BPF_MAP_TYPE_ARRAY, _T.BPF_MAP_TYPE_PERCPU_ARRAY):
        return bool(meta.map_flags & MapFlag.BPF_F_INNER_MAP) or \
            meta.max_entries == other.max_entries
    return same


def resolve_inner(meta: Map, map_id: int) -> Map:
    """``bpf_map_fd_get_ptr``: a map id (pyxdp's map fd) -> the inner map."""
    inner = map_by_id(map_id) if map_id else None
    if inner is None:
        raise bad_fd("update", map_id, _errno.EINVAL, "map")
    if not meta_equal(meta, inner):
        raise einval("update", "inner map does not match the template (type, sizes, flags)")
    return inner


class InnerMapValues(Map):
    """The Python API of a map-in-map's values: a :class:`Map` written as its id, an
    id read back as the inner map (the raw id when that map is gone)."""

    def _enc_value(self, value: object) -> bytes:
        if isinstance(value, Map):
            return value.id.to_bytes(4, "little")
        return super()._enc_value(value)

    def _dec_value(self, raw: bytes) -> Any:
        m = map_by_id(int.from_bytes(raw, "little"))
        return m if m is not None else int.from_bytes(raw, "little")


class ArrayOfMaps(InnerMapValues, FdArrayMap):
    """``BPF_MAP_TYPE_ARRAY_OF_MAPS``: values are maps matching :attr:`inner_meta`.

    A value written from user space is a map id (:attr:`Map.id`); the Python
    API also takes a :class:`Map`. A user-space lookup reports the inner map's
    id; a program lookup returns the inner map's handle (:attr:`Map.addr`).
    """

    map_type = int(_T.BPF_MAP_TYPE_ARRAY_OF_MAPS)
    is_map_in_map = True

    def __init__(self, spec: MapSpec) -> None:
        fd_array_alloc_check(spec)
        self.inner_meta = inner_meta_check(spec)
        super().__init__(spec)
        # Per slot the inner map's handle (0: empty): what a program's lookup returns,
        # read here and by the JIT's twin.
        self.handles = np.zeros(self.max_entries, np.uint64)

    def _resolve(self, fd: int) -> tuple[object, int]:
        inner = resolve_inner(self.inner_meta, fd)
        return inner, inner.id

    def _put(self, i: int, obj: object | None, oid: int) -> None:
        super()._put(i, obj, oid)
        self.handles[i] = obj.addr if isinstance(obj, Map) else 0

    def lookup_addr(self, key: bytes, cpu: int = 0) -> int:
        """``array_of_map_lookup_elem``: the inner map's handle, 0 empty or past the end."""
        i = _index(key)
        return int(self.handles[i]) if i < self.max_entries else 0



# --- native code: the JIT's twin of lookup_addr and try_update ------------------------
# ArrayMap is the reference path; native code reads and writes the same value_data
# rows (its descriptor's value_data/value_row words), so the two never diverge in
# layout. Registered with pyxdp.vm.jit.natives when this module is imported.

def _lookup_inline(f: Text, m: MapInfo, key: str) -> str:
    """ArrayMap.lookup_addr at the call site: the value's fake address, or 0."""
    return _lookup_at(f, m, key, f.cget("%ctx", "cpu"))


def _lookup_at(f: Text, m: MapInfo, key: str, cpu: str) -> str:
    """ArrayMap.lookup_addr(key, cpu): the value's fake address, or 0."""
    idx = f.ins(f"zext i32 {f.ins(f'load i32, ptr {key}, align 1{TBAA_MEM}')} to i64")
    ok = f.ins(f"and i1 {f.ins(f'icmp ult i64 {idx}, {m.max_entries}')}, "
               f"{f.ins(f'icmp ult i64 {cpu}, {m.nr_cpus}')}")
    addr = f.ins(f"add i64 {c64(m.value_base)}, {f.ins(f'mul i64 {idx}, {m.elem_size}')}")
    if m.percpu:
        addr = f.ins(f"add i64 {addr}, {f.ins(f'mul i64 {cpu}, {m.cpu_stride}')}")
    return f.ins(f"select i1 {ok}, i64 {addr}, i64 0")


def _lookup_cpu_fn(tag: str, m: MapInfo) -> str:
    """ArrayMap.lookup_addr for one map on CPU ``%cpu`` (bpf_map_lookup_percpu_elem)."""
    f = Text()
    f.at("entry")
    f.do(f"ret i64 {_lookup_at(f, m, '%key', '%cpu')}")
    return f.text(f"define internal i64 @{tag}_lookup_cpu{m.slot}(ptr %ctx, ptr %key, "
                  "i64 %cpu) nounwind")


def write_value(f: Text, m: MapInfo, e: str, cpu: str, val: str, new: bool) -> None:
    """HashMap._write_value / ArrayMap.update for a program (one CPU's value).

    Python reads the source bytes before it writes anything, so the copy is a
    memmove and comes first; the zeroing of a new element follows it."""
    vd = map_desc(f, m, "value_data")
    off = f.ins(f"mul i64 {e}, {m.elem_size}")
    vrow = map_desc(f, m, "value_row", "i64") if m.percpu else "0"
    mine = f.gep(vd, f.ins(f"add i64 {off}, {f.ins(f'mul i64 {cpu}, {vrow}')}")
                 if m.percpu else off)
    f.memmove(mine, val, m.value_size)
    if not new:
        return
    if m.elem_size > m.value_size:
        f.memset(f.gep(mine, m.value_size), m.elem_size - m.value_size)
    if not m.percpu:
        return
    # A program's update of a new per-CPU element zeroes the other CPUs' copies.
    pre, head, body, zero, nxt, done = (f.cur, f.label("zh"), f.label("zb"), f.label("zz"),
                                        f.label("zn"), f.label("zd"))
    f.br(head)
    f.at(head)
    c, c1 = f.tmp(), f.tmp()
    f.do(f"{c} = phi i64 [ 0, %{pre} ], [ {c1}, %{nxt} ]")
    f.cbr(f.ins(f"icmp ult i64 {c}, {m.nr_cpus}"), body, done)
    f.at(body)
    f.cbr(f.ins(f"icmp eq i64 {c}, {cpu}"), nxt, zero)
    f.at(zero)
    f.memset(f.gep(vd, f.ins(f"add i64 {off}, {f.ins(f'mul i64 {c}, {vrow}')}")), m.elem_size)
    f.br(nxt)
    f.at(nxt)
    f.do(f"{c1} = add i64 {c}, 1")
    f.br(head)
    f.at(done)


def update_prologue(f: Text, m: MapInfo) -> tuple[str, str]:
    """The checks every native map update starts with (the program's CPU, the flags;
    BPF_F_LOCK goes to the Python path); returns the registers of the CPU and of the
    update mode (the flags without BPF_F_LOCK)."""
    f.at("entry")
    cpu = f.cget("%ctx", "cpu")
    ret_if(f, f.ins(f"icmp uge i64 {cpu}, {m.nr_cpus}"), -_errno.EINVAL)
    mode = f.ins("and i64 %flags, -5")
    ret_if(f, f.ins(f"icmp ugt i64 {mode}, 2"), -_errno.EINVAL)
    ret_if(f, f.ins(f"icmp ne i64 {f.ins('and i64 %flags, 4')}, 0"), SLOW)
    return cpu, mode


def _update_fn(tag: str, m: MapInfo) -> str:
    """ArrayMap.try_update for a program on ``ctx.cpu``."""
    f = Text()
    cpu, _ = update_prologue(f, m)
    idx = f.ins(f"zext i32 {f.ins(f'load i32, ptr %key, align 1{TBAA_MEM}')} to i64")
    ret_if(f, f.ins(f"icmp uge i64 {idx}, {m.max_entries}"), -_errno.E2BIG)
    ret_if(f, f.ins(f"icmp ne i64 {f.ins('and i64 %flags, 1')}, 0"), -_errno.EEXIST)
    write_value(f, m, idx, cpu, "%val", False)
    f.do("ret i64 0")
    return f.text(f"define internal i64 @{tag}_update{m.slot}(ptr %ctx, ptr %key, ptr %val, "
                  "i64 %flags) nounwind")


def describe_values(m: Any) -> dict[str, int]:
    """The value storage words of a map's native descriptor (arrays and hash maps)."""
    values: U8Array = m.value_data
    return {"value_data": int(values.ctypes.data),
            "value_row": int(values.strides[0]) if values.ndim == 2 else 0}


_ARRAY_NATIVE = MapNative("array", (ArrayMap, PercpuArrayMap), describe_values,
                          lookup_inline=_lookup_inline,
                          functions={"update": _update_fn, "lookup_cpu": _lookup_cpu_fn})
register_map(BpfMapType.BPF_MAP_TYPE_ARRAY, _ARRAY_NATIVE)
register_map(BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY, _ARRAY_NATIVE)


def _inner_lookup_fn(tag: str, m: MapInfo) -> str:
    """ArrayOfMaps.lookup_addr: ``handles[key]`` (0 past the end)."""
    f = Text()
    f.at("entry")
    idx = f.ins(f"zext i32 {f.ins(f'load i32, ptr %key, align 1{TBAA_MEM}')} to i64")
    ret_if(f, f.ins(f"icmp uge i64 {idx}, {m.max_entries}"), 0)
    f.do(f"ret i64 {f.at_index(map_desc(f, m, 'inner'), idx, 'i64', 8)}")
    return f.text(f"define internal i64 @{tag}_lookup{m.slot}(ptr %ctx, ptr %key) nounwind")


register_map(BpfMapType.BPF_MAP_TYPE_ARRAY_OF_MAPS, MapNative(
    "inner_array", (ArrayOfMaps,), lambda m: {"inner": int(m.handles.ctypes.data)},
    functions={"lookup": _inner_lookup_fn}))
