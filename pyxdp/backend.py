"""The one seam between pyxdp's live objects and where they run.

A :class:`Backend` creates maps and loads programs from a
:class:`~pyxdp.spec.CollectionSpec` and runs BPF_PROG_TEST_RUN on them. Two
implement it: the userspace backend (:mod:`pyxdp.userspace`: pyxdp's own
engines and maps, no root) and the kernel backend (:mod:`pyxdp.kernel.backend`:
bpf(2)). :class:`~pyxdp.collection.Collection` sits on top and gives both the
same Python API, the way httpx puts one client over interchangeable transports.

What a backend hands back are *handles* with byte-level operations, the
subset of ``bpf(2)`` that both sides share (:class:`MapHandle`,
:class:`ProgHandle`).
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pyxdp.args import U64_MAX, checked, short
from pyxdp.btf.btf import Btf
from pyxdp.errors import BadArgument, KernelError, MapError, NotSupportedError
from pyxdp.spec import MapSpec, ProgramSpec
from pyxdp.uapi.bpf import MapFlag

if TYPE_CHECKING:
    from pyxdp.verifier.facts import MemAccess

__all__ = ["Backend", "MapHandle", "ProgHandle", "TestRunResult", "batch_count", "batch_rows",
           "bytes_like", "check_sys_perms", "handle_bytes", "int_bytes", "syscall_test_run_args",
           "test_run_args"]

_U32_MAX = 0xFFFF_FFFF


def bytes_like(obj: object, must: str) -> bytes:
    """``obj``'s bytes if it is a bytes-like object (not an int or str, which ``bytes()``
    would also take); else a TypeError: ``must``, and what ``obj`` is."""
    if isinstance(obj, bytes | bytearray):
        return bytes(obj)
    try:
        if isinstance(obj, int | str):
            raise TypeError
        return memoryview(obj).tobytes()  # type: ignore[arg-type]
    except TypeError:
        raise BadArgument(f"{must}, not {type(obj).__name__}") from None


def handle_bytes(obj: object, size: int, what: str, op: str) -> bytes:
    """A key or value for a handle: a bytes-like object of exactly ``size`` bytes.

    Anything else is a TypeError naming the size (``bytes(4)`` of an int would
    silently be the all-zero key); a bytes-like object of another size is the
    kernel's EINVAL.
    """
    raw = bytes_like(obj, f"{op}: the {what} must be a bytes-like object of {size} bytes")
    if len(raw) != size:
        raise MapError(op, errno.EINVAL, f"{what} is {len(raw)} bytes, {what}_size is {size}")
    return raw


def batch_rows(rows: object, what: str, op: str) -> list[Any]:
    """A batch operation's keys or values: a sequence of bytes-like objects, or a numpy
    array taken row by row (``rows[i].tobytes()``); each is checked by :func:`handle_bytes`
    later. Anything else (a lone bytes object, None, a number) is a TypeError."""
    if hasattr(rows, "ndim") and hasattr(rows, "tobytes") \
            and not isinstance(rows, memoryview):  # a numpy array, without numpy
        if not rows.ndim:
            raise TypeError(f"{op}: the {what} must be a sequence (or an array of rows), "
                            f"not a 0-d array")
        # an object array's items are what they hold: each is checked as a key later
        return [r.tobytes() if hasattr(r, "tobytes") else r
                for r in rows]  # type: ignore[attr-defined]
    if not isinstance(rows, list | tuple):
        raise TypeError(f"{op}: the {what} must be a list of bytes-like objects (or an array "
                        f"of rows), not {type(rows).__name__}")
    return list(rows)


def test_run_args(data_in: object, ctx_in: object, sizes: dict[str, object]
                  ) -> tuple[bytes, bytes | None]:
    """BPF_PROG_TEST_RUN's inputs as ``union bpf_attr`` holds them: ``data_in`` and
    ``ctx_in`` bytes-like (an int would be that many zero bytes), and each of ``sizes``
    (``data_size_out``, ``ctx_size_out``, ``repeat``) a __u32."""
    raw: list[bytes | None] = []
    for what, obj in (("data_in", data_in), ("ctx_in", ctx_in)):
        if obj is None and what == "ctx_in":
            raw.append(None)
            continue
        try:
            if isinstance(obj, int | str) or obj is None:
                raise TypeError
            raw.append(obj if isinstance(obj, bytes)
                       else memoryview(obj).tobytes())  # type: ignore[arg-type]
        except TypeError:
            raise BadArgument(f"test_run: {what} must be a bytes-like object, not "
                            f"{type(obj).__name__}") from None
    for what, n in sizes.items():
        if isinstance(n, bool) or not isinstance(n, int):
            raise BadArgument(f"test_run: {what} must be an int, not {type(n).__name__}")
        if not 0 <= n <= _U32_MAX:
            raise KernelError("BPF_PROG_TEST_RUN", errno.EINVAL,
                              f"{what} {n} is outside 0..{_U32_MAX} (a __u32)")
    data = raw[0]
    assert data is not None
    return data, raw[1]


def syscall_test_run_args(name: str, data_in: bytes, data_size_out: int, ctx_size_out: int,
                          repeat: int) -> None:
    """bpf_prog_test_run_syscall takes a context alone: data, output sizes or a repeat
    count for a SEC("syscall") program are refused (both backends, one line)."""
    if data_in or data_size_out or ctx_size_out or repeat != 1:
        raise NotSupportedError(f"{name}: a syscall program runs once on ctx_in alone (no "
                                "data, output sizes or repeat)")


def int_bytes(value: int, size: int, what: str, op: str) -> bytes:
    """An int key or value of a 1, 2, 4 or 8-byte field, little-endian; signed or
    unsigned, but it must fit (no silent wrap to another key)."""
    if size not in (1, 2, 4, 8):
        raise BadArgument(f"{op}: the {what} is {size} bytes: give a bytes-like object of "
                        f"{size} bytes, not an int")
    if not -(1 << (8 * size - 1)) <= value < (1 << (8 * size)):
        raise MapError(op, errno.EINVAL, f"{what} {value} does not fit {size} bytes")
    return (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


#: The bpf(2) map commands, whose flags (and CPU) are checked at the door on both
#: backends; keys, values and counts have the kernel's own checks, with its errno.
MAP_COMMANDS = ("lookup", "update", "delete", "get_next_key", "lookup_and_delete", "push",
                "lookup_batch", "update_batch", "delete_batch", "lookup_and_delete_batch")
_COMMAND_RULES: dict[str, object] = {"flags": (0, U64_MAX), "key": None, "value": None,
                                     "keys": None, "values": None, "cursor": None,
                                     "count": None}


_BPF_F_RDONLY, _BPF_F_WRONLY = int(MapFlag.BPF_F_RDONLY), int(MapFlag.BPF_F_WRONLY)


def check_sys_perms(op: str, name: str, flags: int, frozen: bool, *, read: bool = False,
                    write: bool = False) -> None:
    """``map_get_sys_perms``: EPERM for a bpf(2) read of a map created ``BPF_F_WRONLY``,
    a write of one created ``BPF_F_RDONLY`` or a write of a frozen one, before the
    command looks at anything else. Programs are not subject to it (``BPF_F_*_PROG``)."""
    if read and flags & _BPF_F_WRONLY:
        raise MapError(op, errno.EPERM, f"map {name!r} was created BPF_F_WRONLY")
    if write and flags & _BPF_F_RDONLY:
        raise MapError(op, errno.EPERM, f"map {name!r} was created BPF_F_RDONLY")
    if write and frozen:
        raise MapError(op, errno.EPERM, f"map {name!r} is frozen")


def check_map_commands(cls: type) -> None:
    """Wrap the :data:`MAP_COMMANDS` a map class defines in :func:`pyxdp.args.checked`."""
    for name in MAP_COMMANDS:
        f = cls.__dict__.get(name)
        if f is not None and not getattr(f, "__wrapped_checked__", False):
            setattr(cls, name, checked(**_COMMAND_RULES)(f))


def batch_count(count: int, op: str) -> int:
    """A batch operation's ``count``, a __u32 in ``union bpf_attr`` (0: no limit here)."""
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= _U32_MAX:
        raise MapError(op, errno.EINVAL,
                       f"count must be an int in 0..{_U32_MAX}, not {short(count)}")
    return count


@dataclass(frozen=True)
class TestRunResult:
    """What a BPF_PROG_TEST_RUN reports, plus what only pyxdp can tell.

    ``retval`` (an :class:`~pyxdp.uapi.bpf.XdpAction` when an XDP program's run through
    :meth:`pyxdp.collection.Program.test_run` returns one of the five), ``data_out``
    (metadata included, as the kernel copies it),
    ``ctx_out`` and ``duration_ns`` (mean per repetition) are the kernel's.
    The userspace backend adds ``redirect`` (where a redirect pointed: the
    ``bpf_redirect_info`` fields), ``trace`` (trace_printk lines), ``fault``
    (why the run was aborted, with pc and C source line) and ``insn_trace``
    (per-instruction trace, when asked for).
    """

    __test__ = False  # not a pytest test class despite its name

    retval: int
    data_out: bytes
    ctx_out: bytes | None
    duration_ns: int
    redirect: Mapping[str, Any] | None = None
    trace: tuple[str, ...] = ()
    fault: str | None = None
    insn_trace: tuple[str, ...] = field(default=(), repr=False)


@runtime_checkable
class MapHandle(Protocol):
    """Byte-level map operations both backends provide (kernel errnos as MapError)."""

    key_size: int
    value_size: int
    max_entries: int
    map_type: int

    def lookup(self, key: bytes | None, flags: int = 0, *, cpu: int | None = None
               ) -> bytes | None: ...

    def update(self, key: bytes | None, value: bytes, flags: int = 0, *,
               cpu: int | None = None) -> None: ...

    def delete(self, key: bytes | None) -> None: ...

    def get_next_key(self, key: bytes | None) -> bytes | None: ...


@runtime_checkable
class ProgHandle(Protocol):
    """A loaded program."""

    spec: ProgramSpec


class Backend(Protocol):
    """Where programs and maps live: ``"userspace"`` or ``"kernel"``."""

    name: str

    def create_map(self, spec: MapSpec, maps: Mapping[str, MapHandle]) -> MapHandle:
        """Create one map; ``maps`` are those already created (for inner maps)."""
        ...

    def cannot_load(self, spec: ProgramSpec) -> str:
        """Why this backend leaves ``spec`` unloaded (as libbpf's autoload=false would);
        "" when it loads it."""
        ...

    def load_program(self, spec: ProgramSpec, maps: Mapping[str, MapHandle],
                     btf: Btf | None = None, *,
                     facts: Mapping[int, MemAccess] | None = None) -> ProgHandle:
        """Load one program with its map references bound to ``maps``; ``btf`` is the
        object's, for CO-RE relocations; ``facts`` what pyxdp's verifier proved of its
        memory accesses (the userspace JIT drops the checks they make redundant)."""
        ...

    def set_prog_array(self, m: MapHandle, index: int, prog: ProgHandle) -> None:
        """Put ``prog`` in slot ``index`` of a prog_array map."""
        ...

    def test_run(self, prog: ProgHandle, data_in: bytes, *, ctx_in: bytes | None = None,
                 data_size_out: int = 0, ctx_size_out: int = 0, repeat: int = 1,
                 trace: bool = False) -> TestRunResult:
        """BPF_PROG_TEST_RUN with the kernel's rules."""
        ...

    def stream_read(self, prog: ProgHandle, stream_id: int, size: int) -> bytes:
        """BPF_PROG_STREAM_READ_BY_FD: up to ``size`` bytes of the program's stream
        ``stream_id`` (1 stdout, 2 stderr), consumed."""
        ...

    def close(self) -> None:
        ...
