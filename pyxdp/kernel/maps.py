"""A kernel BPF map behind its file descriptor, with the byte-level map operations.

:class:`KernelMap` is what libbpf's ``struct bpf_map`` is after
``bpf_object__load``: a map fd plus the geometry the kernel reports for it
(``BPF_OBJ_GET_INFO_BY_FD``), driven through the ``BPF_MAP_*_ELEM``,
``BPF_MAP_*_BATCH`` and ``BPF_MAP_FREEZE`` commands of bpf(2). It implements
:class:`pyxdp.backend.MapHandle`, so the same code handles kernel maps and
pyxdp's userspace maps.

Values cross the syscall boundary the kernel's way: per-CPU maps
(``PERCPU_ARRAY``, ``PERCPU_HASH``, ``LRU_PERCPU_HASH``,
``PERCPU_CGROUP_STORAGE``) read and write one ``round_up(value_size, 8)``
slot per *possible* CPU; ``cpu=n`` selects one CPU's ``value_size`` bytes of
that blob. Keyless maps (``QUEUE``, ``STACK``, ``BLOOM_FILTER``) pass a NULL
key, so ``update(None, v)`` is push, ``lookup_and_delete(None)`` pop and
``lookup(None)`` peek.

Every refusal raises :class:`~pyxdp.errors.MapError` carrying the kernel's
errno (ENOENT, EEXIST, E2BIG, EPERM...), never a bare ``KernelError``;
lookups of absent keys return ``None``, as the kernel's ENOENT means.
"""

from __future__ import annotations

import ctypes
import errno as _errno
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Final

from pyxdp.backend import batch_count, batch_rows, bytes_like, check_map_commands, handle_bytes
from pyxdp.errors import KernelError, MapError, map_closed
from pyxdp.kernel.syscall import (
    ClosedFdError,
    Fd,
    FdObject,
    MapInfo,
    _batch_attr,
    _copy_in,
    _get32,
    _raw,
    map_delete_elem,
    map_freeze,
    map_get_info,
    map_get_next_key,
    map_lookup_and_delete_elem,
    map_lookup_elem,
    map_update_elem,
    possible_cpus,
)
from pyxdp.spec import MapSpec
from pyxdp.uapi.bpf import BpfCmd, BpfMapType

__all__ = ["KEYLESS_MAP_TYPES", "PERCPU_MAP_TYPES", "KernelMap", "round_up"]

# Map types whose syscall values hold one slot per possible CPU
# (bpf_map_value_size() in kernel/bpf/syscall.c).
PERCPU_MAP_TYPES: Final = frozenset({
    BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY,
    BpfMapType.BPF_MAP_TYPE_PERCPU_HASH,
    BpfMapType.BPF_MAP_TYPE_LRU_PERCPU_HASH,
    BpfMapType.BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE,
})
# Map types created with key_size 0: their element commands take a NULL key.
KEYLESS_MAP_TYPES: Final = frozenset({
    BpfMapType.BPF_MAP_TYPE_QUEUE,
    BpfMapType.BPF_MAP_TYPE_STACK,
    BpfMapType.BPF_MAP_TYPE_BLOOM_FILTER,
})

_BATCH_START: Final = 64  # first batch size of a whole-map BPF_MAP_LOOKUP_BATCH


def round_up(x: int, align: int) -> int:
    return (x + align - 1) // align * align


def _token(cursor: object, size: int, op: str) -> bytes:
    """A batch cursor handed back: bytes-like, at most the ``size`` of this map's tokens."""
    raw = bytes_like(cursor, f"{op}: the cursor must be a bytes-like object of at most "
                             f"{size} bytes")
    if len(raw) > size:
        raise MapError(op, _errno.EINVAL, f"cursor is {len(raw)} bytes, this map's batch "
                                          f"tokens are {size}")
    return raw


def _done(reported: int, asked: int) -> int:
    """Elements a failed batch processed, from the ``count`` the kernel wrote back.

    Checks that fail before the element loop (flags, sizes) leave ``count``
    as we passed it in; a failed batch cannot have processed everything, so
    that value means none.
    """
    return 0 if reported >= asked else reported


class KernelMap(FdObject):
    """One kernel map, owned through its :class:`~pyxdp.kernel.syscall.Fd`.

    ``map_type``, ``key_size``, ``value_size``, ``max_entries``, ``map_flags``,
    ``name`` and ``id`` are what the kernel reports for the fd (so a map the
    kernel resized, e.g. a ``PERF_EVENT_ARRAY`` created with 0 entries, shows
    its real size). ``spec`` is the :class:`~pyxdp.spec.MapSpec` it was
    created from, when there is one. ``nr_cpus`` is the number of possible
    CPUs; ``percpu`` tells whether values carry one slot per CPU.
    """

    def __init__(self, fd: Fd, *, spec: MapSpec | None = None,
                 nr_cpus: int | None = None) -> None:
        self._fd = fd
        try:
            info = map_get_info(fd)
        except KernelError as e:
            raise MapError("info", e.errno, "not a BPF map descriptor") from None
        self.spec = spec
        self.id: int = info.id
        self.map_type: int = int(info.type)
        self.key_size: int = info.key_size
        self.value_size: int = info.value_size
        self.max_entries: int = info.max_entries
        self.map_flags: int = info.map_flags
        self.name: str = info.name
        self.btf_id: int = info.btf_id
        self.nr_cpus: int = nr_cpus if nr_cpus is not None else possible_cpus()
        self.percpu: bool = self.map_type in PERCPU_MAP_TYPES
        self.frozen = False

    # -- geometry --------------------------------------------------------------------

    @property
    def elem_size(self) -> int:
        """One per-CPU slot: ``round_up(value_size, 8)``."""
        return round_up(self.value_size, 8)

    @property
    def user_value_size(self) -> int:
        """Bytes of one value at the bpf(2) boundary (all CPUs for per-CPU maps)."""
        return self.elem_size * self.nr_cpus if self.percpu else self.value_size

    def info(self) -> MapInfo:
        """``BPF_OBJ_GET_INFO_BY_FD`` now (flags, ids, BTF ids...)."""
        try:
            with self._held("info") as fd:
                return map_get_info(fd)
        except KernelError as e:
            raise MapError("info", e.errno) from None

    # -- argument checks ---------------------------------------------------------------
    # The kernel reads exactly key_size / value-size bytes behind the pointers
    # it is given, so a wrong-sized buffer would be read past its end: refuse
    # it here with the EINVAL a userspace map gives.

    def _live(self, op: str) -> Fd:
        if self._fd.closed:
            raise map_closed(op, self.name)
        return self._fd

    @contextmanager
    def _held(self, op: str) -> Iterator[int]:
        """The map's fd number for one bpf(2) call, held against another thread's close
        (:meth:`Fd.held`): closed before or meanwhile, the map's EBADF."""
        try:
            with self._live(op).held() as fd:
                yield fd
        except ClosedFdError:
            raise map_closed(op, self.name) from None

    def _key(self, key: bytes | bytearray | memoryview | None, op: str) -> bytes:
        if self.key_size == 0:
            if key is not None and (not isinstance(key, bytes | bytearray | memoryview)
                                    or len(key)):
                raise MapError(op, _errno.EINVAL, f"map {self.name!r} takes no key")
            return b""  # passed as NULL
        if key is None:
            raise MapError(op, _errno.EINVAL, f"map {self.name!r} needs a key")
        return handle_bytes(key, self.key_size, "key", op)

    def _check_cpu(self, cpu: int | None, op: str) -> None:
        if cpu is not None and not 0 <= cpu < self.nr_cpus:
            raise MapError(op, _errno.EINVAL,
                           f"cpu {cpu} is not one of the {self.nr_cpus} possible CPUs")

    def _value(self, value: bytes | bytearray | memoryview, cpu: int | None, op: str) -> bytes:
        want = self.user_value_size if self.percpu and cpu is None else self.value_size
        return handle_bytes(value, want, "value", op)

    def _slot(self, blob: bytes, cpu: int) -> bytes:
        start = cpu * self.elem_size
        return blob[start:start + self.value_size]

    # -- element operations ------------------------------------------------------------

    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None:
        """BPF_MAP_LOOKUP_ELEM: the value (one CPU's with ``cpu=n``), None when absent.

        A keyless queue/stack answers with its head without removing it (peek).
        """
        self._check_cpu(cpu, "lookup")
        k = self._key(key, "lookup")
        try:
            with self._held("lookup") as fd:
                blob = map_lookup_elem(fd, k, self.user_value_size, flags)
        except KernelError as e:
            raise MapError("lookup", e.errno) from None
        if blob is None or cpu is None or not self.percpu:
            return blob
        return self._slot(blob, cpu)

    def update(self, key: bytes | None, value: bytes, flags: int = 0, *,
               cpu: int | None = None) -> None:
        """BPF_MAP_UPDATE_ELEM (``BPF_ANY``/``BPF_NOEXIST``/``BPF_EXIST``, ``BPF_F_LOCK``).

        On a per-CPU map ``cpu=n`` replaces that CPU's value and keeps the
        others (read, modify, write back: bpf(2) only writes whole blobs; an
        absent key starts from zeros). A keyless queue/stack pushes ``value``.
        """
        self._check_cpu(cpu, "update")
        k = self._key(key, "update")
        v = self._value(value, cpu, "update")
        if self.percpu and cpu is not None:
            blob = self.lookup(k) or bytes(self.user_value_size)
            start = cpu * self.elem_size
            v = blob[:start] + v.ljust(self.elem_size, b"\0") + blob[start + self.elem_size:]
        try:
            with self._held("update") as fd:
                map_update_elem(fd, k, v, flags)
        except KernelError as e:
            raise MapError("update", e.errno) from None

    def delete(self, key: bytes | None) -> None:
        """BPF_MAP_DELETE_ELEM; an absent key raises MapError(ENOENT)."""
        k = self._key(key, "delete")
        try:
            with self._held("delete") as fd:
                map_delete_elem(fd, k)
        except KernelError as e:
            raise MapError("delete", e.errno) from None

    def get_next_key(self, key: bytes | None) -> bytes | None:
        """BPF_MAP_GET_NEXT_KEY: the first key for None (or a missing key), None at the end."""
        k = None if key is None else self._key(key, "get_next_key")
        try:
            with self._held("get_next_key") as fd:
                return map_get_next_key(fd, k, self.key_size)
        except KernelError as e:
            raise MapError("get_next_key", e.errno) from None

    def lookup_and_delete(self, key: bytes | None, flags: int = 0) -> bytes | None:
        """BPF_MAP_LOOKUP_AND_DELETE_ELEM: the value removed, None when absent (pop)."""
        k = self._key(key, "lookup_and_delete")
        try:
            with self._held("lookup_and_delete") as fd:
                return map_lookup_and_delete_elem(fd, k, self.user_value_size, flags)
        except KernelError as e:
            raise MapError("lookup_and_delete", e.errno) from None

    def push(self, value: bytes, flags: int = 0) -> None:
        """Queue/stack push: BPF_MAP_UPDATE_ELEM with a NULL key (``BPF_EXIST`` evicts)."""
        self._keyless("push")
        self.update(None, value, flags)

    def pop(self) -> bytes | None:
        """Queue/stack pop: BPF_MAP_LOOKUP_AND_DELETE_ELEM with a NULL key; None when empty."""
        self._keyless("pop")
        return self.lookup_and_delete(None)

    def peek(self) -> bytes | None:
        """Queue/stack peek: BPF_MAP_LOOKUP_ELEM with a NULL key; None when empty."""
        self._keyless("peek")
        return self.lookup(None)

    def _keyless(self, op: str) -> None:
        if self.map_type not in (BpfMapType.BPF_MAP_TYPE_QUEUE, BpfMapType.BPF_MAP_TYPE_STACK):
            raise MapError(op, _errno.EINVAL, f"map {self.name!r} is not a queue or stack")

    def freeze(self) -> None:
        """BPF_MAP_FREEZE: no more writes from user space (programs are unaffected)."""
        try:
            with self._held("freeze") as fd:
                map_freeze(fd)
        except KernelError as e:
            raise MapError("freeze", e.errno) from None
        self.frozen = True

    # -- batch operations --------------------------------------------------------------
    # Built here from the batch attr helpers of the syscall layer because a
    # failure must report how many elements the kernel processed (attr.count),
    # which the plain syscall wrappers only put into a message.

    def _batch(self, cmd: BpfCmd, op: str, *, in_tok: ctypes.Array[ctypes.c_char] | None,
               out_tok: ctypes.Array[ctypes.c_char] | None,
               keys: ctypes.Array[ctypes.c_char] | None,
               values: ctypes.Array[ctypes.c_char] | None, count: int, flags: int
               ) -> tuple[int, int]:
        with self._held(op) as fd:
            attr = _batch_attr(fd, in_tok, out_tok, keys, values, count, flags)
            ret, err = _raw(cmd, attr)
        return (err if ret < 0 else 0), _get32(attr, 32)

    def _token_size(self) -> int:
        # The opaque batch token is a key for arrays and a u32 bucket index
        # for hash maps: room for either.
        return max(self.key_size, 8)

    def lookup_batch(self, cursor: bytes | None = None, count: int = 0
                     ) -> tuple[list[bytes], list[bytes], bytes | None]:
        """BPF_MAP_LOOKUP_BATCH: up to ``count`` (0: all) entries after ``cursor``.

        Returns ``(keys, values, cursor)``. The cursor is the kernel's opaque
        batch token, to pass back for the next batch; it is None once the map
        is exhausted (the kernel's ENOENT). A hash bucket holding more than
        ``count`` elements makes the kernel copy nothing (ENOSPC); the batch
        is then grown until the bucket fits, so a batch may exceed ``count``.
        """
        return self._lookup_batch(BpfCmd.BPF_MAP_LOOKUP_BATCH, "lookup_batch", cursor, count)

    def lookup_and_delete_batch(self, count: int = 0) -> tuple[list[bytes], list[bytes]]:
        """BPF_MAP_LOOKUP_AND_DELETE_BATCH from the start: entries returned and removed."""
        keys, values, _ = self._lookup_batch(BpfCmd.BPF_MAP_LOOKUP_AND_DELETE_BATCH,
                                             "lookup_and_delete_batch", None, count)
        return keys, values

    def _lookup_batch(self, cmd: BpfCmd, op: str, cursor: bytes | None, count: int
                      ) -> tuple[list[bytes], list[bytes], bytes | None]:
        count = batch_count(count, op)
        ksz, vsz = self.key_size, self.user_value_size
        tok = self._token_size()
        # the token this map's batches hand out: at most its size (a longer one would
        # overrun the kernel's read of in_batch)
        in_tok = None if cursor is None else \
            ctypes.create_string_buffer(_token(cursor, tok, op).ljust(tok, b"\0"), tok)
        out_keys: list[bytes] = []
        out_values: list[bytes] = []
        grow = 0
        while True:
            want = max(count - len(out_keys) if count else _BATCH_START, grow)
            out_tok = ctypes.create_string_buffer(tok)
            kbuf = ctypes.create_string_buffer(max(ksz * want, 1))
            vbuf = ctypes.create_string_buffer(max(vsz * want, 1))
            err, got = self._batch(cmd, op, in_tok=in_tok, out_tok=out_tok, keys=kbuf,
                                   values=vbuf, count=want, flags=0)
            if err == _errno.ENOSPC and got == 0 and want < max(self.max_entries, 1):
                grow = want * 2  # one hash bucket is bigger than the batch
                continue
            grow = 0
            if err and err != _errno.ENOENT:
                raise MapError(op, err, count=len(out_keys) + _done(got, want))
            kraw, vraw = kbuf.raw, vbuf.raw
            out_keys += [kraw[i * ksz:(i + 1) * ksz] for i in range(got)]
            out_values += [vraw[i * vsz:(i + 1) * vsz] for i in range(got)]
            if err == _errno.ENOENT:
                return out_keys, out_values, None
            in_tok = ctypes.create_string_buffer(out_tok.raw, tok)
            if count and len(out_keys) >= count:
                return out_keys, out_values, out_tok.raw

    def update_batch(self, keys: Sequence[bytes], values: Sequence[bytes],
                     flags: int = 0) -> int:
        """BPF_MAP_UPDATE_BATCH; a failure raises MapError with ``.count`` updated.

        ``flags`` is the batch's ``elem_flags``: the kernel takes only
        ``BPF_F_LOCK`` there (every element is written as ``BPF_ANY``).
        """
        keys = batch_rows(keys, "keys", "update_batch")
        values = batch_rows(values, "values", "update_batch")
        if len(keys) != len(values):
            raise MapError("update_batch", _errno.EINVAL, "as many keys as values are needed")
        # no keys still goes to the kernel: its flag checks (EINVAL) and a map without
        # the command (ENOTSUPP) come before it sees the count is 0
        kb = b"".join(self._key(k, "update_batch") for k in keys)
        vb = b"".join(self._value(v, None, "update_batch") for v in values)
        err, got = self._batch(BpfCmd.BPF_MAP_UPDATE_BATCH, "update_batch", in_tok=None,
                               out_tok=None, keys=_copy_in(kb), values=_copy_in(vb),
                               count=len(keys), flags=flags)
        if err:
            got = _done(got, len(keys))
            raise MapError("update_batch", err, f"{got} of {len(keys)} updated", count=got)
        return got

    def delete_batch(self, keys: Sequence[bytes]) -> int:
        """BPF_MAP_DELETE_BATCH; a failure raises MapError with ``.count`` deleted."""
        keys = batch_rows(keys, "keys", "delete_batch")
        # no keys still goes to the kernel: a map without the command says ENOTSUPP
        kb = b"".join(self._key(k, "delete_batch") for k in keys)
        err, got = self._batch(BpfCmd.BPF_MAP_DELETE_BATCH, "delete_batch", in_tok=None,
                               out_tok=None, keys=_copy_in(kb), values=None,
                               count=len(keys), flags=0)
        if err:
            got = _done(got, len(keys))
            raise MapError("delete_batch", err, f"{got} of {len(keys)} deleted", count=got)
        return got

    # -- lifetime ----------------------------------------------------------------------

    def _closed_error(self) -> MapError:
        return map_closed("fd", self.name)

    def __repr__(self) -> str:
        state = "closed" if self._fd.closed else f"fd={self._fd.fd}"
        return (f"<KernelMap {self.name!r} id={self.id} type={self.map_type} "
                f"key={self.key_size} value={self.value_size} "
                f"max_entries={self.max_entries} {state}>")


check_map_commands(KernelMap)
