"""bpf(2), the BPF system call, driven through ctypes without libbpf.

Each command takes a ``union bpf_attr``. We build the part of the union a
command reads as a zeroed byte buffer and pack the fields at the offsets of
``include/uapi/linux/bpf.h`` (x86_64 and aarch64 share them: every member is
naturally aligned and pointers travel as ``__aligned_u64``). The kernel
accepts an attr shorter than its own ``union bpf_attr`` and treats the
missing tail as zero, so each command passes only the bytes up to the last
field we know about.

Failures become :class:`~pyxdp.errors.KernelError` (errno kept), or
:class:`~pyxdp.errors.BPFUnavailable` when the cause is privilege or a
kernel without bpf(2), or :class:`~pyxdp.errors.VerifierError` (whole log
kept) when BPF_PROG_LOAD refuses a program. No raw ``OSError`` escapes.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import os
import platform
import struct
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Self

from pyxdp.asm.insn import INSN_SIZE, Instruction
from pyxdp.backend import TestRunResult  # the one result type of every backend
from pyxdp.errors import (
    BPFUnavailable,
    InvalidProgram,
    KernelError,
    NotSupportedError,
    PyxdpError,
    TestRunTruncated,
    VerifierError,
)
from pyxdp.smp import possible_cpus  # (re-exported: the bpf(2) layer's face)
from pyxdp.uapi.bpf import (
    BPF_OBJ_NAME_LEN,
    BPF_TAG_SIZE,
    BpfCmd,
    BpfMapType,
    BpfProgType,
    MapUpdateFlag,
    TestRunFlag,
)

__all__ = [
    "BpfMap",
    "Fd",
    "MapInfo",
    "ProgInfo",
    "TestRunOutputTruncated",
    "TestRunResult",
    "bpf_available",
    "btf_get_data",
    "btf_get_fd_by_id",
    "btf_load",
    "map_create",
    "prog_stream_read",
    "map_delete_batch",
    "map_delete_elem",
    "map_freeze",
    "map_get_fd_by_id",
    "map_get_info",
    "map_get_next_id",
    "map_get_next_key",
    "map_keys",
    "map_lookup_and_delete_elem",
    "map_lookup_batch",
    "map_lookup_elem",
    "map_update_batch",
    "map_update_elem",
    "obj_get_info_by_fd",
    "possible_cpus",
    "prog_get_fd_by_id",
    "prog_get_info",
    "prog_get_next_id",
    "prog_load",
    "prog_test_run",
    "require_bpf",
    "sys_bpf_number",
]

# __NR_bpf per architecture (arch/*/include/uapi/asm/unistd*.h and the
# generic table that arm64, riscv and loongarch use).
_SYS_BPF_BY_MACHINE: Final[dict[str, int]] = {
    "x86_64": 321,
    "amd64": 321,
    "aarch64": 280,
    "arm64": 280,
    "riscv64": 280,
    "loongarch64": 280,
    "i386": 357,
    "i686": 357,
    "armv7l": 386,
    "armv6l": 386,
    "ppc64le": 361,
    "ppc64": 361,
    "s390x": 351,
}


def sys_bpf_number(machine: str | None = None) -> int | None:
    """``__NR_bpf`` for ``machine`` (default: this one), or None when unknown."""
    return _SYS_BPF_BY_MACHINE.get((machine or platform.machine()).lower())


_SYS_BPF: Final[int | None] = sys_bpf_number() if sys.platform == "linux" else None


def _load_syscall() -> ctypes._NamedFuncPointer | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.syscall
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_long
    fn.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_ulong]
    return fn


_syscall: Final = _load_syscall()

_Buf = ctypes.Array[ctypes.c_char]

_U32: Final = struct.Struct("=I")
_S32: Final = struct.Struct("=i")
_U64: Final = struct.Struct("=Q")

# Sizes of the ``union bpf_attr`` prefix each command uses (offsetofend of
# the last field we fill, rounded up to 8 like the union's alignment).
_MAP_CREATE_SIZE: Final = 80  # ... value_type_btf_obj_fd @72, map_token_fd @76
_MAP_ELEM_SIZE: Final = 32  # map_fd @0, key @8, value/next_key @16, flags @24
_MAP_BATCH_SIZE: Final = 56  # in_batch @0 ... elem_flags @40, flags @48
_PROG_LOAD_SIZE: Final = 152  # ... log_true_size @140, prog_token_fd @144, fd_array_cnt @148
_TEST_RUN_SIZE: Final = 80  # ... flags @64, cpu @68, batch_size @72
_GET_ID_SIZE: Final = 16  # start_id @0, next_id @4, open_flags @8, token_fd @12
_INFO_SIZE: Final = 16  # bpf_fd @0, info_len @4, info @8
_BTF_LOAD_SIZE: Final = 40  # btf @0, log_buf @8, size @16, log_size @20, level @24,
#                             log_true_size @28, btf_flags @32, btf_token_fd @36

_PROG_INFO_SIZE: Final = 232  # sizeof(struct bpf_prog_info) up to attach_btf_id
_MAP_INFO_SIZE: Final = 88  # sizeof(struct bpf_map_info) up to map_extra

# The kernel refuses log_size below 128 and above UINT_MAX >> 2.
_LOG_MIN: Final = 128
_LOG_MAX: Final = (0xFFFF_FFFF >> 2) - 1

# Commands whose EPERM means "you may not use BPF here", not "this object
# refuses the operation" (a frozen or read-only map also answers EPERM).
_CREATE_CMDS: Final = frozenset({BpfCmd.BPF_MAP_CREATE, BpfCmd.BPF_PROG_LOAD,
                                 BpfCmd.BPF_BTF_LOAD})


# --------------------------------------------------------------------------
# Raw call and buffers
# --------------------------------------------------------------------------

def _attr(size: int) -> _Buf:
    return ctypes.create_string_buffer(size)


def _value_out(cmd: BpfCmd, size: int) -> _Buf:
    """This process's buffer for a value the kernel writes; no memory for it is the
    ENOMEM bpf(2) answers when its own copy fails (a value may be INT_MAX bytes)."""
    try:
        return ctypes.create_string_buffer(max(size, 1))
    except MemoryError:
        raise _error(cmd, _errno.ENOMEM, f"no memory in this process for a {size}-byte "
                     "value") from None


def _value_in(cmd: BpfCmd, buf: _Buf, size: int) -> bytes:
    """The first ``size`` bytes of ``buf``, copied once (see :func:`_value_out`)."""
    try:
        return ctypes.string_at(buf, size)
    except MemoryError:
        raise _error(cmd, _errno.ENOMEM, f"no memory in this process for a {size}-byte "
                     "value") from None


def _put32(buf: _Buf, off: int, value: int) -> None:
    _U32.pack_into(buf, off, value & 0xFFFF_FFFF)


def _put64(buf: _Buf, off: int, value: int) -> None:
    _U64.pack_into(buf, off, value & 0xFFFF_FFFF_FFFF_FFFF)


def _get32(buf: _Buf, off: int) -> int:
    value: int = _U32.unpack_from(buf, off)[0]
    return value


def _get64(buf: _Buf, off: int) -> int:
    value: int = _U64.unpack_from(buf, off)[0]
    return value


def _copy_in(data: bytes | bytearray | memoryview) -> _Buf | None:
    """A kernel-readable copy of ``data`` (None for empty: passed as NULL), made once:
    a map value may be INT_MAX bytes; no memory for it is ENOMEM, as for the kernel's
    own copy (kvmemdup_bpfptr)."""
    if not len(data):
        return None
    raw = data if isinstance(data, (bytes, bytearray)) else bytes(data)
    try:
        return (ctypes.c_char * len(raw)).from_buffer_copy(raw)
    except MemoryError:
        raise KernelError("bpf", _errno.ENOMEM, f"no memory in this process to copy a "
                          f"{len(raw)}-byte argument") from None


def _addr(buf: _Buf | None) -> int:
    return ctypes.addressof(buf) if buf is not None else 0


def _name_bytes(name: str) -> bytes:
    # The kernel stores BPF_OBJ_NAME_LEN bytes including the NUL, so 15 chars
    # survive; truncate like libbpf rather than fail on long names.
    return name.encode()[: BPF_OBJ_NAME_LEN - 1]


def _raw(cmd: BpfCmd, attr: _Buf) -> tuple[int, int]:
    """One bpf(2) call: ``(result, 0)`` on success, ``(-1, errno)`` on failure."""
    if _SYS_BPF is None or _syscall is None:
        return -1, _errno.ENOSYS
    ret = int(_syscall(_SYS_BPF, int(cmd), ctypes.addressof(attr), len(attr)))
    if ret < 0:
        return -1, ctypes.get_errno()
    return ret, 0


def _privilege_detail(err: int) -> str:
    if err == _errno.ENOSYS:
        if sys.platform != "linux":
            return f"not Linux ({sys.platform})"
        if _SYS_BPF is None:
            return f"no known bpf(2) syscall number for {platform.machine()}"
        return "kernel has no bpf(2) (CONFIG_BPF_SYSCALL off)"
    if os.geteuid() != 0:
        return "not root"
    return "missing CAP_BPF/CAP_SYS_ADMIN, or BPF locked down"


def _error(cmd: BpfCmd, err: int, detail: str = "") -> KernelError:
    op = cmd.name
    if err == _errno.ENOSYS or (err == _errno.EPERM and cmd in _CREATE_CMDS):
        return BPFUnavailable(op, err, detail or _privilege_detail(err))
    return KernelError(op, err, detail)


def _call(cmd: BpfCmd, attr: _Buf) -> int:
    ret, err = _raw(cmd, attr)
    if ret < 0:
        raise _error(cmd, err)
    return ret


# --------------------------------------------------------------------------
# File descriptors
# --------------------------------------------------------------------------

class ClosedFdError(KernelError, ValueError):
    """An :class:`Fd` used after its close: EBADF, the kernel's answer to a closed
    descriptor (a ValueError too, as Python's files raise). Another thread closing the
    object between its liveness check and the system call lands here."""


# Guards every Fd's holder count (held() and close() take it for a few instructions).
_HOLD: Final = threading.Lock()


class Fd:
    """Owns one file descriptor (a map, program, BTF object...).

    ``close()`` is idempotent; the object is a context manager; ``__del__``
    closes a forgotten descriptor as a last resort. ``kind`` records what the
    kernel object is ("map", "prog", "btf") when pyxdp created it.
    """

    __slots__ = ("__weakref__", "_doomed", "_users", "fd", "kind")

    def __init__(self, fd: int, kind: str = "") -> None:
        if fd < 0:
            raise ValueError(f"invalid file descriptor {fd}")
        self.fd = fd
        self.kind = kind
        self._users = 0  # threads inside held()
        self._doomed = -1  # the number close() left to the last of them

    @contextmanager
    def held(self) -> Iterator[int]:
        """The descriptor's number, kept open until the block ends: a close() from
        another thread meanwhile leaves the os.close to the last holder, so the number
        cannot be reused for another object under a bpf(2) call still using it (the
        kernel's fdget holds the file the same way). Closed already: EBADF."""
        with _HOLD:
            if self.fd < 0:
                raise ClosedFdError("bpf", _errno.EBADF,
                                    f"the {self.kind or 'descriptor'} is closed")
            self._users += 1
            fd = self.fd
        try:
            yield fd
        finally:
            with _HOLD:
                self._users -= 1
                doomed = self._doomed if self._users == 0 else -1
                if doomed >= 0:
                    self._doomed = -1
            if doomed >= 0:
                try:
                    os.close(doomed)
                except OSError:
                    pass

    @property
    def closed(self) -> bool:
        return self.fd < 0

    def fileno(self) -> int:
        if self.fd < 0:
            raise ClosedFdError("bpf", _errno.EBADF, f"the {self.kind or 'descriptor'} is closed")
        return self.fd

    def close(self) -> None:
        with _HOLD:
            fd, self.fd = self.fd, -1
            if fd >= 0 and self._users:  # a bpf(2) call is using it: its holder closes
                self._doomed = fd
                return
        if fd >= 0:
            try:
                os.close(fd)
            except OSError as exc:  # EBADF means someone closed it behind us
                raise KernelError("close", exc.errno or _errno.EBADF) from None

    def detach(self) -> int:
        """Give up ownership and return the raw descriptor."""
        fd, self.fd = self.fd, -1
        return fd

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        fd = getattr(self, "fd", -1)
        if fd >= 0:
            self.fd = -1
            try:
                os.close(fd)
            except OSError:
                pass

    def __repr__(self) -> str:
        state = "closed" if self.fd < 0 else f"fd={self.fd}"
        return f"Fd({self.kind or 'bpf'}, {state})"


class FdObject:
    """A kernel object (program, map, link) owned through one :class:`Fd`.

    ``fd`` raises once closed; ``close()`` is idempotent; a context manager.
    Subclasses set ``_fd`` and say what a use after close raises (:meth:`_closed_error`).
    """

    _fd: Fd

    def _closed_error(self) -> PyxdpError:
        return PyxdpError(f"{type(self).__name__} is closed")

    @property
    def fd(self) -> int:
        """The raw descriptor (still owned by this object)."""
        if self._fd.closed:
            raise self._closed_error()
        return self._fd.fd

    @property
    def closed(self) -> bool:
        return self._fd.closed

    def close(self) -> None:
        """Drop the descriptor (idempotent); the kernel frees the object with its last user."""
        self._fd.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _fdnum(fd: Fd | int) -> int:
    return fd.fileno() if isinstance(fd, Fd) else int(fd)


# --------------------------------------------------------------------------
# Availability
# --------------------------------------------------------------------------

def _probe() -> tuple[bool, str, int]:
    try:
        fd = map_create(BpfMapType.BPF_MAP_TYPE_ARRAY, 4, 8, 1, name="pyxdp_probe")
    except KernelError as exc:
        name = _errno.errorcode.get(exc.errno, str(exc.errno))
        why = f"bpf(2) returned {name}"
        if exc.errno == _errno.ENOSYS:
            why = _privilege_detail(exc.errno)
        elif exc.errno == _errno.EPERM:
            why = f"{_privilege_detail(exc.errno)} (bpf(2) returned EPERM)"
        return False, why, exc.errno
    fd.close()
    return True, "bpf(2) available", 0


def bpf_available() -> tuple[bool, str]:
    """Whether bpf(2) works here: creates and closes a 1-entry array map.

    Returns ``(True, "bpf(2) available")`` or ``(False, reason)`` where the
    reason is short, e.g. ``"not root (bpf(2) returned EPERM)"``.
    """
    ok, why, _ = _probe()
    return ok, why


def require_bpf() -> None:
    """Raise :class:`BPFUnavailable` with a one-line reason unless bpf(2) works."""
    ok, why, err = _probe()
    if not ok:
        raise BPFUnavailable("bpf", err or _errno.ENOSYS, why)


# --------------------------------------------------------------------------
# Maps
# --------------------------------------------------------------------------

def map_create(map_type: int, key_size: int, value_size: int, max_entries: int,
               map_flags: int = 0, name: str = "", *, inner_map_fd: Fd | int = 0,
               numa_node: int = 0, map_ifindex: int = 0, btf_fd: Fd | int = 0,
               btf_key_type_id: int = 0, btf_value_type_id: int = 0,
               btf_vmlinux_value_type_id: int = 0, map_extra: int = 0) -> Fd:
    """BPF_MAP_CREATE: a new map, returned as an owned :class:`Fd`."""
    attr = _attr(_MAP_CREATE_SIZE)
    _put32(attr, 0, map_type)
    _put32(attr, 4, key_size)
    _put32(attr, 8, value_size)
    _put32(attr, 12, max_entries)
    _put32(attr, 16, map_flags)
    _put32(attr, 20, _fdnum(inner_map_fd))
    _put32(attr, 24, numa_node)
    struct.pack_into(f"{BPF_OBJ_NAME_LEN}s", attr, 28, _name_bytes(name))
    _put32(attr, 44, map_ifindex)
    _put32(attr, 48, _fdnum(btf_fd))
    _put32(attr, 52, btf_key_type_id)
    _put32(attr, 56, btf_value_type_id)
    _put32(attr, 60, btf_vmlinux_value_type_id)
    _put64(attr, 64, map_extra)
    return Fd(_call(BpfCmd.BPF_MAP_CREATE, attr), "map")


def _elem_attr(fd: Fd | int, key: _Buf | None, value: _Buf | None, flags: int) -> _Buf:
    attr = _attr(_MAP_ELEM_SIZE)
    _put32(attr, 0, _fdnum(fd))
    _put64(attr, 8, _addr(key))
    _put64(attr, 16, _addr(value))
    _put64(attr, 24, flags)
    return attr


def map_lookup_elem(fd: Fd | int, key: bytes, value_size: int, flags: int = 0) -> bytes | None:
    """BPF_MAP_LOOKUP_ELEM: the value stored at ``key``, or None when absent (ENOENT).

    ``key`` must be exactly the map's key_size; ``value_size`` is the size
    of the value as user space sees it (per-CPU maps: one slot per CPU).
    """
    kbuf = _copy_in(key)
    vbuf = _value_out(BpfCmd.BPF_MAP_LOOKUP_ELEM, value_size)
    ret, err = _raw(BpfCmd.BPF_MAP_LOOKUP_ELEM, _elem_attr(fd, kbuf, vbuf, flags))
    if ret < 0:
        if err == _errno.ENOENT:
            return None
        raise _error(BpfCmd.BPF_MAP_LOOKUP_ELEM, err)
    return _value_in(BpfCmd.BPF_MAP_LOOKUP_ELEM, vbuf, value_size)


def map_update_elem(fd: Fd | int, key: bytes, value: bytes,
                    flags: int = MapUpdateFlag.BPF_ANY) -> None:
    """BPF_MAP_UPDATE_ELEM with ``BPF_ANY``/``BPF_NOEXIST``/``BPF_EXIST`` (+``BPF_F_LOCK``)."""
    kbuf, vbuf = _copy_in(key), _copy_in(value)
    _call(BpfCmd.BPF_MAP_UPDATE_ELEM, _elem_attr(fd, kbuf, vbuf, flags))


def map_delete_elem(fd: Fd | int, key: bytes) -> None:
    """BPF_MAP_DELETE_ELEM; a missing key raises KernelError(ENOENT)."""
    kbuf = _copy_in(key)
    _call(BpfCmd.BPF_MAP_DELETE_ELEM, _elem_attr(fd, kbuf, None, 0))


def map_lookup_and_delete_elem(fd: Fd | int, key: bytes, value_size: int,
                               flags: int = 0) -> bytes | None:
    """BPF_MAP_LOOKUP_AND_DELETE_ELEM (pop for queue/stack maps: ``key=b""``)."""
    kbuf = _copy_in(key)
    vbuf = _value_out(BpfCmd.BPF_MAP_LOOKUP_AND_DELETE_ELEM, value_size)
    ret, err = _raw(BpfCmd.BPF_MAP_LOOKUP_AND_DELETE_ELEM, _elem_attr(fd, kbuf, vbuf, flags))
    if ret < 0:
        if err == _errno.ENOENT:
            return None
        raise _error(BpfCmd.BPF_MAP_LOOKUP_AND_DELETE_ELEM, err)
    return _value_in(BpfCmd.BPF_MAP_LOOKUP_AND_DELETE_ELEM, vbuf, value_size)


def map_get_next_key(fd: Fd | int, key: bytes | None, key_size: int) -> bytes | None:
    """BPF_MAP_GET_NEXT_KEY: the key after ``key`` (the first key for None); None at the end."""
    kbuf = _copy_in(key) if key is not None else None
    nbuf = ctypes.create_string_buffer(max(key_size, 1))
    attr = _elem_attr(fd, kbuf, nbuf, 0)
    ret, err = _raw(BpfCmd.BPF_MAP_GET_NEXT_KEY, attr)
    if ret < 0:
        if err == _errno.ENOENT:
            return None
        raise _error(BpfCmd.BPF_MAP_GET_NEXT_KEY, err)
    return nbuf.raw[:key_size]


def map_keys(fd: Fd | int, key_size: int) -> Iterator[bytes]:
    """Every key of the map, by repeated BPF_MAP_GET_NEXT_KEY."""
    key = map_get_next_key(fd, None, key_size)
    while key is not None:
        yield key
        key = map_get_next_key(fd, key, key_size)


def map_freeze(fd: Fd | int) -> None:
    """BPF_MAP_FREEZE: the map becomes read-only for user space."""
    _call(BpfCmd.BPF_MAP_FREEZE, _elem_attr(fd, None, None, 0))


def prog_stream_read(fd: Fd | int, stream_id: int, size: int) -> bytes:
    """BPF_PROG_STREAM_READ_BY_FD: up to ``size`` bytes of the program's stream
    ``stream_id`` (1 stdout, 2 stderr), consumed; -ENOENT for another stream. One call
    reads at most 1 MiB (a stream holds less than 100,000 bytes)."""
    size = min(size, 1 << 20)  # the buffer is ours: no more than a stream can hold
    buf = ctypes.create_string_buffer(max(size, 1))
    attr = _attr(20)  # prog_stream_read: stream_buf, stream_buf_len, stream_id, prog_fd
    _put64(attr, 0, ctypes.addressof(buf))
    _put32(attr, 8, size)
    _put32(attr, 12, stream_id)
    _put32(attr, 16, _fdnum(fd))
    got = _call(BpfCmd.BPF_PROG_STREAM_READ_BY_FD, attr)
    return buf.raw[:got]


def _batch_attr(fd: Fd | int, in_batch: _Buf | None, out_batch: _Buf | None,
                keys: _Buf | None, values: _Buf | None, count: int,
                elem_flags: int) -> _Buf:
    attr = _attr(_MAP_BATCH_SIZE)
    _put64(attr, 0, _addr(in_batch))
    _put64(attr, 8, _addr(out_batch))
    _put64(attr, 16, _addr(keys))
    _put64(attr, 24, _addr(values))
    _put32(attr, 32, count)
    _put32(attr, 36, _fdnum(fd))
    _put64(attr, 40, elem_flags)
    return attr


def map_lookup_batch(fd: Fd | int, key_size: int, value_size: int, *,
                     batch: int = 256, elem_flags: int = 0) -> list[tuple[bytes, bytes]]:
    """Every ``(key, value)`` pair, by repeated BPF_MAP_LOOKUP_BATCH.

    The kernel reports the end of the map with ENOENT, possibly together
    with a last partial batch; both are handled here.
    """
    # The opaque batch token is a key for arrays and a bucket index (u32)
    # for hash maps; give it room for either.
    token_size = max(key_size, 8)
    out_tok = ctypes.create_string_buffer(token_size)
    in_tok: _Buf | None = None
    result: list[tuple[bytes, bytes]] = []
    while True:
        keys = ctypes.create_string_buffer(max(key_size * batch, 1))
        values = ctypes.create_string_buffer(max(value_size * batch, 1))
        attr = _batch_attr(fd, in_tok, out_tok, keys, values, batch, elem_flags)
        ret, err = _raw(BpfCmd.BPF_MAP_LOOKUP_BATCH, attr)
        got = _get32(attr, 32)
        if ret < 0 and err == _errno.ENOSPC and got == 0:
            # A hash bucket holds more elements than ``batch``: the kernel
            # copies nothing and wants a bigger batch for the same token.
            batch *= 2
            continue
        if ret < 0 and err != _errno.ENOENT:
            raise _error(BpfCmd.BPF_MAP_LOOKUP_BATCH, err)
        kraw, vraw = keys.raw, values.raw
        for i in range(got):
            result.append((kraw[i * key_size:(i + 1) * key_size],
                           vraw[i * value_size:(i + 1) * value_size]))
        if ret < 0:  # ENOENT: no more elements
            return result
        in_tok = ctypes.create_string_buffer(out_tok.raw, token_size)


def map_update_batch(fd: Fd | int, keys: Sequence[bytes], values: Sequence[bytes], *,
                     elem_flags: int = 0) -> int:
    """BPF_MAP_UPDATE_BATCH; returns how many elements the kernel updated."""
    if len(keys) != len(values):
        raise ValueError("map_update_batch: keys and values differ in length")
    if not keys:
        return 0
    kbuf, vbuf = _copy_in(b"".join(keys)), _copy_in(b"".join(values))
    attr = _batch_attr(fd, None, None, kbuf, vbuf, len(keys), elem_flags)
    ret, err = _raw(BpfCmd.BPF_MAP_UPDATE_BATCH, attr)
    if ret < 0:
        raise _error(BpfCmd.BPF_MAP_UPDATE_BATCH, err,
                     f"{_get32(attr, 32)} of {len(keys)} elements updated")
    return _get32(attr, 32)


def map_delete_batch(fd: Fd | int, keys: Sequence[bytes], *, elem_flags: int = 0) -> int:
    """BPF_MAP_DELETE_BATCH; returns how many elements the kernel deleted."""
    if not keys:
        return 0
    kbuf = _copy_in(b"".join(keys))
    attr = _batch_attr(fd, None, None, kbuf, None, len(keys), elem_flags)
    ret, err = _raw(BpfCmd.BPF_MAP_DELETE_BATCH, attr)
    if ret < 0:
        raise _error(BpfCmd.BPF_MAP_DELETE_BATCH, err,
                     f"{_get32(attr, 32)} of {len(keys)} elements deleted")
    return _get32(attr, 32)


class BpfMap:
    """A map together with its geometry, so keys and values are size-checked.

    The raw ``map_*`` functions trust the caller's buffer sizes (the kernel
    reads exactly key_size/value_size bytes behind the pointers it gets);
    this wrapper refuses mismatched sizes before the syscall.
    """

    def __init__(self, map_type: int, key_size: int, value_size: int, max_entries: int,
                 map_flags: int = 0, name: str = "") -> None:
        self.fd = map_create(map_type, key_size, value_size, max_entries, map_flags, name)
        self.map_type = map_type
        self.key_size = key_size
        self.value_size = value_size
        self.max_entries = max_entries
        percpu = map_type in (BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY,
                              BpfMapType.BPF_MAP_TYPE_PERCPU_HASH,
                              BpfMapType.BPF_MAP_TYPE_LRU_PERCPU_HASH,
                              BpfMapType.BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE)
        # What a syscall value buffer holds: one 8-byte-rounded slot per CPU.
        self.user_value_size = ((value_size + 7) & ~7) * possible_cpus() if percpu \
            else value_size

    def _key(self, key: bytes) -> bytes:
        if len(key) != self.key_size:
            raise ValueError(f"key is {len(key)} bytes, map key_size is {self.key_size}")
        return key

    def lookup(self, key: bytes) -> bytes | None:
        return map_lookup_elem(self.fd, self._key(key), self.user_value_size)

    def update(self, key: bytes, value: bytes, flags: int = MapUpdateFlag.BPF_ANY) -> None:
        if len(value) != self.user_value_size:
            raise ValueError(f"value is {len(value)} bytes, expected {self.user_value_size}")
        map_update_elem(self.fd, self._key(key), value, flags)

    def delete(self, key: bytes) -> None:
        map_delete_elem(self.fd, self._key(key))

    def keys(self) -> Iterator[bytes]:
        return map_keys(self.fd, self.key_size)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        for key in self.keys():
            value = self.lookup(key)
            if value is not None:  # deleted between the two calls
                yield key, value

    def close(self) -> None:
        self.fd.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


# --------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------

def _insn_bytes(insns: bytes | bytearray | memoryview | Sequence[Instruction]) -> bytes:
    if isinstance(insns, (bytes, bytearray, memoryview)):
        raw = bytes(insns)
    else:
        raw = b"".join(i.encode() for i in insns)
    if len(raw) % INSN_SIZE:
        raise InvalidProgram(f"program length {len(raw)} is not a multiple of {INSN_SIZE}",
                             rule="length")
    if not raw:
        raise InvalidProgram("empty program", rule="length")
    return raw


def prog_load(prog_type: int,
              insns: bytes | bytearray | memoryview | Sequence[Instruction],
              license: str = "GPL", *, name: str = "", log_level: int = 1,
              log_size: int = 1 << 20, max_log_size: int = 1 << 28,
              expected_attach_type: int = 0, prog_flags: int = 0, kern_version: int = 0,
              prog_ifindex: int = 0, prog_btf_fd: Fd | int = 0,
              func_info: bytes = b"", func_info_rec_size: int = 0,
              line_info: bytes = b"", line_info_rec_size: int = 0,
              attach_btf_id: int = 0, attach_prog_fd: Fd | int = 0,
              fd_array: Sequence[int] = (), core_relos: bytes = b"",
              core_relo_rec_size: int = 0) -> Fd:
    """BPF_PROG_LOAD: verify and load a program; returns its owned :class:`Fd`.

    The first attempt runs without a verifier log (logging slows the verifier
    down a lot). If it fails and ``log_level`` is non-zero the load is
    repeated with a ``log_size`` buffer, grown to the size the kernel asks for
    (``log_true_size``) or doubled while the kernel answers ENOSPC, up to
    ``max_log_size``. The failure is raised as :class:`VerifierError` holding
    the whole log; privilege problems raise :class:`BPFUnavailable`.
    """
    code = _copy_in(_insn_bytes(insns))
    lic = ctypes.create_string_buffer(license.encode())
    finfo, linfo = _copy_in(func_info), _copy_in(line_info)
    fds = _copy_in(b"".join(_S32.pack(f) for f in fd_array))
    # struct bpf_core_relo records the kernel applies itself (insn_off in bytes,
    # type ids and access strings in prog_btf_fd's BTF), as light skeletons ask.
    relos = _copy_in(core_relos)

    attr = _attr(_PROG_LOAD_SIZE)
    _put32(attr, 0, prog_type)
    _put32(attr, 4, len(code) // INSN_SIZE if code is not None else 0)
    _put64(attr, 8, _addr(code))
    _put64(attr, 16, _addr(lic))
    _put32(attr, 40, kern_version)
    _put32(attr, 44, prog_flags)
    struct.pack_into(f"{BPF_OBJ_NAME_LEN}s", attr, 48, _name_bytes(name))
    _put32(attr, 64, prog_ifindex)
    _put32(attr, 68, expected_attach_type)
    _put32(attr, 72, _fdnum(prog_btf_fd))
    _put32(attr, 76, func_info_rec_size)
    _put64(attr, 80, _addr(finfo))
    _put32(attr, 88, len(func_info) // func_info_rec_size if func_info_rec_size else 0)
    _put32(attr, 92, line_info_rec_size)
    _put64(attr, 96, _addr(linfo))
    _put32(attr, 104, len(line_info) // line_info_rec_size if line_info_rec_size else 0)
    _put32(attr, 108, attach_btf_id)
    _put32(attr, 112, _fdnum(attach_prog_fd))
    _put64(attr, 120, _addr(fds))
    if core_relo_rec_size:
        _put32(attr, 116, len(core_relos) // core_relo_rec_size)
        _put64(attr, 128, _addr(relos))
        _put32(attr, 136, core_relo_rec_size)

    cmd = BpfCmd.BPF_PROG_LOAD
    ret, err = _load_once(attr)
    if ret >= 0:
        return Fd(ret, "prog")
    if err == _errno.ENOSYS or (err == _errno.EPERM and not log_level):
        raise _error(cmd, err)
    if not log_level:
        raise VerifierError(cmd.name, err, "")

    cap = min(max(max_log_size, _LOG_MIN), _LOG_MAX)
    size = min(max(log_size, _LOG_MIN), cap)
    while True:
        log = ctypes.create_string_buffer(size)
        _put32(attr, 24, log_level)
        _put32(attr, 28, size)
        _put64(attr, 32, ctypes.addressof(log))
        _put32(attr, 140, 0)
        ret, err = _load_once(attr)
        if ret >= 0:  # passed on the retry: keep the program
            return Fd(ret, "prog")
        text = log.value.decode("utf-8", errors="replace")
        if err == _errno.ENOSPC and size < cap:
            # A log that did not fit turns any verifier error into ENOSPC, so
            # grow and retry to learn the real errno. log_true_size (Linux
            # 6.4+) says exactly how much was needed; otherwise double.
            wanted = _get32(attr, 140)
            size = min(max(wanted + 1, size * 2), cap)
            continue
        if err == _errno.EPERM and not text.strip():
            raise _error(cmd, err)
        raise VerifierError(cmd.name, err, text)


def _load_once(attr: _Buf) -> tuple[int, int]:
    # The kernel may answer EAGAIN when verification was interrupted; libbpf
    # retries a few times too.
    for _ in range(5):
        ret, err = _raw(BpfCmd.BPF_PROG_LOAD, attr)
        if ret >= 0 or err != _errno.EAGAIN:
            return ret, err
    return ret, err


class TestRunOutputTruncated(KernelError, TestRunTruncated):
    """BPF_PROG_TEST_RUN answered ENOSPC: the output did not fit the buffer.

    The program did run; ``result`` holds what the kernel copied (retval,
    duration and the leading part of the data), and ``data_size`` /
    ``ctx_size`` what it wrote back to ``data_size_out``/``ctx_size_out`` (the
    full sizes, or ``data_size_out`` itself when that is below the frags alone:
    see :class:`~pyxdp.errors.TestRunTruncated`). It is both a
    :class:`KernelError` (the syscall failed with ENOSPC) and the
    backend-neutral :class:`~pyxdp.errors.TestRunTruncated`, so callers of
    either backend catch it the same way.
    """

    __test__ = False

    def __init__(self, result: TestRunResult, data_size: int, ctx_size: int) -> None:
        # KernelError.__init__ would hand its message on to the next class of
        # the MRO (TestRunTruncated), whose signature differs: set KernelError's
        # fields here and let TestRunTruncated build the exception.
        op = BpfCmd.BPF_PROG_TEST_RUN.name
        self.op = op
        self.errno = _errno.ENOSPC
        TestRunTruncated.__init__(
            self, result, data_size, ctx_size,
            f"{op} failed: ENOSPC ({os.strerror(_errno.ENOSPC)}): output needs "
            f"{data_size} data / {ctx_size} ctx bytes")


def prog_test_run(prog_fd: Fd | int, data_in: bytes = b"", *, ctx_in: bytes | None = None,
                  data_size_out: int | None = None, ctx_size_out: int | None = None,
                  repeat: int = 1, flags: int = 0, cpu: int = 0,
                  batch_size: int = 0) -> TestRunResult:
    """BPF_PROG_TEST_RUN (net/bpf/test_run.c): run a loaded program on ``data_in``.

    ``data_size_out`` is the size of the output buffer (default: the input
    size plus 4096, room for ``bpf_xdp_adjust_tail`` growth). A bigger output
    makes the kernel copy what fits and answer ENOSPC, raised here as
    :class:`TestRunOutputTruncated` carrying the partial result. A context is
    copied back when ``ctx_in`` or ``ctx_size_out`` is given.
    """
    din = _copy_in(data_in)
    cin = _copy_in(ctx_in) if ctx_in is not None else None
    if flags & TestRunFlag.BPF_F_TEST_XDP_LIVE_FRAMES:
        # Live frames are transmitted/redirected for real; the kernel
        # refuses output buffers in that mode.
        data_size_out, ctx_size_out = 0, 0
    if data_size_out is None:
        data_size_out = len(data_in) + 4096
    if ctx_size_out is None and ctx_in is not None:
        ctx_size_out = len(ctx_in)
    # A zero data_size_out with a buffer means "copy everything" to the
    # kernel (old behaviour), so never pass a buffer without its size.
    dout = ctypes.create_string_buffer(data_size_out) if data_size_out > 0 else None
    cout = ctypes.create_string_buffer(ctx_size_out) if ctx_size_out else None

    attr = _attr(_TEST_RUN_SIZE)
    _put32(attr, 0, _fdnum(prog_fd))
    _put32(attr, 8, len(data_in))
    _put32(attr, 12, data_size_out if dout is not None else 0)
    _put64(attr, 16, _addr(din))
    _put64(attr, 24, _addr(dout))
    _put32(attr, 32, repeat)
    _put32(attr, 40, len(ctx_in) if ctx_in is not None else 0)
    _put32(attr, 44, ctx_size_out or 0)
    _put64(attr, 48, _addr(cin))
    _put64(attr, 56, _addr(cout))
    _put32(attr, 64, flags)
    _put32(attr, 68, cpu)
    _put32(attr, 72, batch_size)

    ret, err = _raw(BpfCmd.BPF_PROG_TEST_RUN, attr)
    if ret < 0 and err != _errno.ENOSPC:
        raise _error(BpfCmd.BPF_PROG_TEST_RUN, err)
    data_len = _get32(attr, 12)
    ctx_len = _get32(attr, 44)
    got_data = dout.raw[:min(data_len, data_size_out)] if dout is not None else b""
    got_ctx = cout.raw[:min(ctx_len, len(cout))] if cout is not None else None
    result = TestRunResult(retval=_get32(attr, 4), data_out=got_data, ctx_out=got_ctx,
                           duration_ns=_get32(attr, 36))
    if ret < 0:
        raise TestRunOutputTruncated(result, data_len, ctx_len)
    return result


def prog_test_run_syscall(prog_fd: Fd | int, ctx_in: bytes | None = None) -> TestRunResult:
    """BPF_PROG_TEST_RUN of a ``BPF_PROG_TYPE_SYSCALL`` program (net/bpf/test_run.c's
    bpf_prog_test_run_syscall): one run on a copy of ``ctx_in``, which the kernel
    writes back into the caller's buffer (it takes no data, output buffers, repeat
    or flags); ``ctx_out`` is that buffer after the run (None without a context)."""
    cin = _copy_in(ctx_in) if ctx_in is not None else None
    attr = _attr(_TEST_RUN_SIZE)
    _put32(attr, 0, _fdnum(prog_fd))
    _put32(attr, 40, len(ctx_in) if ctx_in is not None else 0)
    _put64(attr, 48, _addr(cin))
    ret, err = _raw(BpfCmd.BPF_PROG_TEST_RUN, attr)
    if ret < 0:
        raise _error(BpfCmd.BPF_PROG_TEST_RUN, err)
    out = cin.raw[:len(ctx_in)] if cin is not None and ctx_in is not None else None
    return TestRunResult(retval=_get32(attr, 4), data_out=b"", ctx_out=out, duration_ns=0)


# --------------------------------------------------------------------------
# BTF
# --------------------------------------------------------------------------

def btf_load(btf: bytes, *, log_level: int = 1, log_size: int = 1 << 16) -> Fd:
    """BPF_BTF_LOAD: load raw BTF; a refusal raises KernelError with the BTF log line."""
    data = _copy_in(btf)
    attr = _attr(_BTF_LOAD_SIZE)
    _put64(attr, 0, _addr(data))
    _put32(attr, 16, len(btf))
    ret, err = _raw(BpfCmd.BPF_BTF_LOAD, attr)
    if ret >= 0:
        return Fd(ret, "btf")
    if err in (_errno.ENOSYS, _errno.EPERM) or not log_level:
        raise _error(BpfCmd.BPF_BTF_LOAD, err)
    log = ctypes.create_string_buffer(max(log_size, _LOG_MIN))
    _put64(attr, 8, ctypes.addressof(log))
    _put32(attr, 20, len(log))
    _put32(attr, 24, log_level)
    ret, err = _raw(BpfCmd.BPF_BTF_LOAD, attr)
    if ret >= 0:
        return Fd(ret, "btf")
    lines = [ln for ln in log.value.decode("utf-8", "replace").splitlines() if ln.strip()]
    raise _error(BpfCmd.BPF_BTF_LOAD, err, lines[-1] if lines else "")


# --------------------------------------------------------------------------
# Ids and object info
# --------------------------------------------------------------------------

def _next_id(cmd: BpfCmd, start_id: int) -> int | None:
    attr = _attr(_GET_ID_SIZE)
    _put32(attr, 0, start_id)
    ret, err = _raw(cmd, attr)
    if ret < 0:
        if err == _errno.ENOENT:
            return None
        raise _error(cmd, err)
    return _get32(attr, 4)


def prog_get_next_id(start_id: int = 0) -> int | None:
    """BPF_PROG_GET_NEXT_ID: the smallest program id above ``start_id``, None past the last."""
    return _next_id(BpfCmd.BPF_PROG_GET_NEXT_ID, start_id)


def map_get_next_id(start_id: int = 0) -> int | None:
    """BPF_MAP_GET_NEXT_ID: the smallest map id above ``start_id``, None past the last."""
    return _next_id(BpfCmd.BPF_MAP_GET_NEXT_ID, start_id)


def _fd_by_id(cmd: BpfCmd, obj_id: int, open_flags: int, kind: str) -> Fd:
    attr = _attr(_GET_ID_SIZE)
    _put32(attr, 0, obj_id)
    _put32(attr, 8, open_flags)
    return Fd(_call(cmd, attr), kind)


_BTF_INFO_SIZE: Final = 40  # struct bpf_btf_info: btf, btf_size, id, name, name_len, kernel_btf


def prog_get_fd_by_id(prog_id: int) -> Fd:
    """BPF_PROG_GET_FD_BY_ID: a new descriptor for a loaded program."""
    return _fd_by_id(BpfCmd.BPF_PROG_GET_FD_BY_ID, prog_id, 0, "prog")


def map_get_fd_by_id(map_id: int, open_flags: int = 0) -> Fd:
    """BPF_MAP_GET_FD_BY_ID (``open_flags``: BPF_F_RDONLY / BPF_F_WRONLY)."""
    return _fd_by_id(BpfCmd.BPF_MAP_GET_FD_BY_ID, map_id, open_flags, "map")


def btf_get_fd_by_id(btf_id: int) -> Fd:
    """BPF_BTF_GET_FD_BY_ID: a descriptor for a loaded BTF object (a map's or program's)."""
    return _fd_by_id(BpfCmd.BPF_BTF_GET_FD_BY_ID, btf_id, 0, "btf")


def btf_get_data(fd: Fd | int) -> bytes:
    """The raw BTF blob behind a BTF descriptor: ``struct bpf_btf_info`` asked once for
    its size (``btf_size``), then with a buffer that large (``btf``), as bpftool does."""
    info = ctypes.create_string_buffer(_BTF_INFO_SIZE)
    _get_info(fd, info)
    size = _get32(info, 8)
    data = ctypes.create_string_buffer(max(size, 1))
    info = ctypes.create_string_buffer(_BTF_INFO_SIZE)
    _put64(info, 0, ctypes.addressof(data))
    _put32(info, 8, size)
    _get_info(fd, info)
    return data.raw[:min(size, _get32(info, 8))]


def _get_info(fd: Fd | int, info: _Buf) -> int:
    attr = _attr(_INFO_SIZE)
    _put32(attr, 0, _fdnum(fd))
    _put32(attr, 4, len(info))
    _put64(attr, 8, ctypes.addressof(info))
    _call(BpfCmd.BPF_OBJ_GET_INFO_BY_FD, attr)
    return _get32(attr, 4)  # bytes the kernel filled


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace")


def _enum_or_int(enum: type[BpfProgType] | type[BpfMapType], value: int) -> int:
    try:
        return enum(value)
    except ValueError:
        return value


@dataclass(frozen=True, slots=True)
class ProgInfo:
    """``struct bpf_prog_info`` (the fields pyxdp uses)."""

    type: int
    id: int
    tag: bytes
    jited_prog_len: int
    xlated_prog_len: int
    load_time: int
    created_by_uid: int
    nr_map_ids: int
    map_ids: tuple[int, ...]
    name: str
    ifindex: int
    gpl_compatible: bool
    btf_id: int
    run_time_ns: int
    run_cnt: int
    recursion_misses: int
    verified_insns: int

    @property
    def tag_hex(self) -> str:
        """The tag as ``bpftool prog`` prints it."""
        return self.tag.hex()


@dataclass(frozen=True, slots=True)
class MapInfo:
    """``struct bpf_map_info``."""

    type: int
    id: int
    key_size: int
    value_size: int
    max_entries: int
    map_flags: int
    name: str
    ifindex: int
    btf_id: int
    btf_key_type_id: int
    btf_value_type_id: int
    map_extra: int


def prog_get_info(fd: Fd | int) -> ProgInfo:
    """BPF_OBJ_GET_INFO_BY_FD on a program, including its map ids."""
    info = ctypes.create_string_buffer(_PROG_INFO_SIZE)
    _get_info(fd, info)
    nr_maps = _get32(info, 52)
    map_ids: tuple[int, ...] = ()
    if nr_maps:
        # Second call: the kernel fills map_ids only when given an array
        # (and never more than nr_map_ids entries).
        ids = ctypes.create_string_buffer(4 * nr_maps)
        info = ctypes.create_string_buffer(_PROG_INFO_SIZE)
        _put32(info, 52, nr_maps)
        _put64(info, 56, ctypes.addressof(ids))
        _get_info(fd, info)
        n = min(nr_maps, _get32(info, 52))
        map_ids = struct.unpack_from(f"={n}I", ids, 0)
    return ProgInfo(
        type=_enum_or_int(BpfProgType, _get32(info, 0)),
        id=_get32(info, 4),
        tag=info.raw[8:8 + BPF_TAG_SIZE],
        jited_prog_len=_get32(info, 16),
        xlated_prog_len=_get32(info, 20),
        load_time=_get64(info, 40),
        created_by_uid=_get32(info, 48),
        nr_map_ids=_get32(info, 52),
        map_ids=map_ids,
        name=_cstr(info.raw[64:64 + BPF_OBJ_NAME_LEN]),
        ifindex=_get32(info, 80),
        gpl_compatible=bool(_get32(info, 84) & 1),
        btf_id=_get32(info, 128),
        run_time_ns=_get64(info, 192),
        run_cnt=_get64(info, 200),
        recursion_misses=_get64(info, 208),
        verified_insns=_get32(info, 216),
    )


def map_get_info(fd: Fd | int) -> MapInfo:
    """BPF_OBJ_GET_INFO_BY_FD on a map."""
    info = ctypes.create_string_buffer(_MAP_INFO_SIZE)
    _get_info(fd, info)
    return MapInfo(
        type=_enum_or_int(BpfMapType, _get32(info, 0)),
        id=_get32(info, 4),
        key_size=_get32(info, 8),
        value_size=_get32(info, 12),
        max_entries=_get32(info, 16),
        map_flags=_get32(info, 20),
        name=_cstr(info.raw[24:24 + BPF_OBJ_NAME_LEN]),
        ifindex=_get32(info, 40),
        btf_id=_get32(info, 64),
        btf_key_type_id=_get32(info, 68),
        btf_value_type_id=_get32(info, 72),
        map_extra=_get64(info, 80),
    )


def _fd_kind(fd: Fd | int) -> str:
    if isinstance(fd, Fd) and fd.kind:
        return fd.kind
    # The anon-inode name tells what a bare descriptor refers to.
    try:
        target = os.readlink(f"/proc/self/fd/{_fdnum(fd)}")
    except OSError as exc:
        raise KernelError("readlink", exc.errno or _errno.EBADF,
                          "cannot tell what kind of BPF object this fd is") from None
    return {"anon_inode:bpf-prog": "prog", "anon_inode:bpf-map": "map",
            "anon_inode:btf": "btf", "anon_inode:bpf_link": "link",
            "anon_inode:bpf-link": "link"}.get(target, target)


def obj_get_info_by_fd(fd: Fd | int) -> ProgInfo | MapInfo:
    """BPF_OBJ_GET_INFO_BY_FD: :class:`ProgInfo` for a program, :class:`MapInfo` for a map."""
    kind = _fd_kind(fd)
    if kind == "prog":
        return prog_get_info(fd)
    if kind == "map":
        return map_get_info(fd)
    raise NotSupportedError(f"object info for a {kind!r} descriptor")
