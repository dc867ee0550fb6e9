"""Live objects over any backend: :class:`Collection`, :class:`Program`, :class:`Map`.

The same code loads an object into pyxdp's own engines (no root) or into
Linux, like cilium/ebpf's ``NewCollection`` over a ``CollectionSpec``::

    coll = Collection.load("samples/xdp1.o")                 # userspace
    coll = Collection.load("samples/xdp1.o", backend="kernel")
    coll.maps["rxcnt"].sum(17)
    coll.programs["xdp_prog1"].test_run(packet).retval

Maps are dict-like with keys and values typed from BTF (ints for scalars,
dicts for structs, bytes for char arrays, addresses for ``__be32`` and
``struct in6_addr``, see :mod:`pyxdp.btf.codec`); per-CPU maps give a list
with one value per CPU and ``sum()``. ``keys()``, ``values()`` and ``items()``
are views, as a dict's: ``len``, iteration and ``in``, read live from the map.
An XDP program's ``test_run`` result carries its verdict as
:class:`~pyxdp.uapi.bpf.XdpAction` (an ``int``).
"""

from __future__ import annotations

import dataclasses
import errno
import ipaddress
import os
from collections.abc import ItemsView, Iterator, KeysView, ValuesView
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import logging

from pyxdp.args import NR_CPUS_MAX, checked, short
from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction, encode
from pyxdp.backend import (
    Backend,
    MapHandle,
    ProgHandle,
    TestRunResult,
    check_sys_perms,
    handle_bytes,
    int_bytes,
    test_run_args,
)
from pyxdp.btf.btf import SPECIAL_FIELDS, Btf, FieldError
from pyxdp.btf.codec import BtfCodec, address_bytes
from pyxdp.btf.kcheck import kernel_error, map_needs_btf, no_btf_error
from pyxdp.diskcache import remember_verified, verified, verified_key
from pyxdp.errors import (
    BadArgument,
    InvalidProgram,
    MapError,
    NotSupportedError,
    PyxdpError,
    map_closed,
    program_closed,
)
from pyxdp.spec import (
    CollectionSpec,
    InnerMapRef,
    MapSpec,
    ProgramRef,
    ProgramSpec,
    XdpRunConfig,
    libbpf_map_defaults,
)
from pyxdp.uapi.bpf import BpfMapType, MapUpdateFlag, XdpAction
from pyxdp.verifier.facts import MemAccess, decode_facts, encode_facts

__all__ = ["Collection", "Map", "MapItems", "MapKeys", "MapValues", "Program"]



def _log() -> logging.Logger:
    """This module's logger (logging loads when there is something to say)."""
    import logging

    return logging.getLogger(__name__)

_PERCPU = frozenset({BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY, BpfMapType.BPF_MAP_TYPE_PERCPU_HASH,
                     BpfMapType.BPF_MAP_TYPE_LRU_PERCPU_HASH})
# A program this long has its verdict looked up in the disk cache first: verifying it
# takes a large share of a load (0.03-0.12 s for 3,000 instructions, 12 ms for lb.o's
# 380), a hit 1-3 ms (the digest of pyxdp's sources read back by the files' identity).
VERIFY_CACHE_INSNS = 100
_ACTIONS = frozenset(int(a) for a in XdpAction)
_NO_KEY = frozenset({BpfMapType.BPF_MAP_TYPE_QUEUE, BpfMapType.BPF_MAP_TYPE_STACK,
                     BpfMapType.BPF_MAP_TYPE_RINGBUF})


class MapKeys(KeysView[Any]):
    """``Map.keys()``: a live view of a map's keys (``len``, iteration, ``in``, set operations)."""

    _mapping: Map

    def __iter__(self) -> Iterator[Any]:
        return self._mapping._iter_keys()


class MapValues(ValuesView[Any]):
    """``Map.values()``: a live view of a map's values (``len``, iteration, ``in``)."""

    _mapping: Map

    def __iter__(self) -> Iterator[Any]:
        return (v for _, v in self._mapping._iter_items())

    def __contains__(self, value: object) -> bool:
        return any(v is value or v == value for v in self)


class MapItems(ItemsView[Any, Any]):
    """``Map.items()``: a live view of a map's ``(key, value)`` pairs (``len``, iteration, ``in``).

    An entry deleted while iterating (the program runs meanwhile on Linux) is left out.
    """

    _mapping: Map

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return self._mapping._iter_items()


class Map:
    """A map of a loaded collection; the same API over both backends.

    Dict-like: ``m[key]``, ``m[key] = value``, ``del m[key]``, ``key in m``,
    ``len(m)``, ``keys()``/``values()``/``items()`` views; keys and values typed
    from the program's BTF (:mod:`pyxdp.btf.codec`).
    """

    def __init__(self, name: str, spec: MapSpec, handle: MapHandle, codec: BtfCodec | None,
                 nr_cpus: int) -> None:
        self.name = name
        self.spec = spec
        self.handle = handle
        self.codec = codec
        self.nr_cpus = nr_cpus
        self.percpu = spec.type in _PERCPU
        self.closed = False  # set by Collection.close(): uses fail as on a closed fd

    def __repr__(self) -> str:
        return (f"<Map {self.name} {self.spec.type_name} key={self.spec.key_size} "
                f"value={self.spec.value_size} max_entries={self.spec.max_entries}>")

    def _live(self, op: str) -> MapHandle:
        if self.closed:
            raise map_closed(op, self.name)
        return self.handle

    def _readable(self, op: str) -> MapHandle:
        """The handle for a syscall-side read (``map_get_sys_perms``: EPERM for a map
        created ``BPF_F_WRONLY``; its programs still read it). Checked here too, not
        only by the handle, so both backends answer with the same words."""
        h = self._live(op)
        check_sys_perms(op, self.name, self.spec.flags, False, read=True)
        return h

    def _writable(self, op: str) -> MapHandle:
        """The handle for a syscall-side write: EPERM for a map created ``BPF_F_RDONLY``
        and for a frozen one (``.rodata``), as Linux answers."""
        h = self._live(op)
        check_sys_perms(op, self.name, self.spec.flags,
                        self.spec.frozen or getattr(self.handle, "frozen", False), write=True)
        return h

    # -- codec -----------------------------------------------------------------------
    def key_bytes(self, key: object) -> bytes:
        """``key`` as the bytes the map stores (encoded from any form it accepts)."""
        return self._enc_key(key)

    def _enc_key(self, key: object) -> bytes:
        if self.codec is not None:
            return self.codec.encode_key(self.handle, key)
        return _raw(key, self.spec.key_size, "key")

    def _enc_value(self, value: object) -> bytes:
        if self.codec is not None:
            return self.codec.encode_value(self.handle, value)
        return _raw(value, self.spec.value_size, "value")

    def _dec_key(self, raw: bytes) -> Any:
        return self.codec.decode_key(self.handle, raw) if self.codec else _plain(raw)

    def _dec_one(self, raw: bytes) -> Any:
        return self.codec.decode_value(self.handle, raw) if self.codec else _plain(raw)

    def _dec_value(self, raw: bytes) -> Any:
        if not self.percpu:
            return self._dec_one(raw)
        stride = (self.spec.value_size + 7) // 8 * 8
        return [self._dec_one(raw[c * stride:c * stride + self.spec.value_size])
                for c in range(len(raw) // stride)]

    # -- dict-like API -----------------------------------------------------------------
    def lookup(self, key: object, default: Any = None) -> Any:
        """The value at ``key`` (a list, one per CPU, for per-CPU maps), or ``default``."""
        raw = self._readable("lookup").lookup(self._enc_key(key))
        return default if raw is None else self._dec_value(raw)

    get = lookup

    def __getitem__(self, key: object) -> Any:
        raw = self._readable("lookup").lookup(self._enc_key(key))
        if raw is None:
            raise KeyError(key)
        return self._dec_value(raw)

    def update(self, key: object, value: object, flags: int = MapUpdateFlag.BPF_ANY) -> None:
        """Set ``key``; per-CPU maps take one value for every CPU or a list of them."""
        if self.percpu:
            vals = value if isinstance(value, (list, tuple)) else [value] * self.nr_cpus
            if len(vals) != self.nr_cpus:
                raise MapError("update", 22, f"per-CPU map needs {self.nr_cpus} values")
            stride = (self.spec.value_size + 7) // 8 * 8
            raw = b"".join(self._enc_value(v).ljust(stride, b"\0") for v in vals)
        else:
            raw = self._enc_value(value)
        # flags as given: the backend's map checks them (pyxdp.backend.check_map_commands)
        self._writable("update").update(self._enc_key(key), raw, flags)

    def __setitem__(self, key: object, value: object) -> None:
        self.update(key, value)

    def delete(self, key: object) -> None:
        """Delete ``key``; an absent key is the kernel's ENOENT as :class:`MapError`."""
        self._writable("delete").delete(self._enc_key(key))

    def __delitem__(self, key: object) -> None:
        try:
            self.delete(key)
        except MapError as e:
            if e.errno == 2:
                raise KeyError(key) from None
            raise

    def __contains__(self, key: object) -> bool:
        return self._readable("lookup").lookup(self._enc_key(key)) is not None

    def raw_keys(self) -> Iterator[bytes]:
        """Every key as the map holds it, bytes (``BPF_MAP_GET_NEXT_KEY`` order)."""
        if self.spec.type in _NO_KEY:
            return
        key = self._readable("get_next_key").get_next_key(None)
        seen = 0
        while key is not None and seen <= max(self.spec.max_entries, 1):
            yield key
            seen += 1
            key = self._live("get_next_key").get_next_key(key)

    def _iter_keys(self) -> Iterator[Any]:
        return (self._dec_key(k) for k in self.raw_keys())

    def _iter_items(self) -> Iterator[tuple[Any, Any]]:
        for k in self.raw_keys():
            raw = self._readable("lookup").lookup(k)
            if raw is not None:
                yield self._dec_key(k), self._dec_value(raw)

    def keys(self) -> MapKeys:
        """The keys, typed from BTF: a view with ``len``, iteration and ``in``."""
        return MapKeys(self)  # a Mapping by duck typing

    def values(self) -> MapValues:
        """The values, typed from BTF (lists for per-CPU maps): a view."""
        return MapValues(self)

    def items(self) -> MapItems:
        """The ``(key, value)`` pairs, typed from BTF: a view."""
        return MapItems(self)

    def __iter__(self) -> Iterator[Any]:
        return self._iter_keys()

    def __len__(self) -> int:
        return sum(1 for _ in self.raw_keys())

    def sum(self, key: object) -> Any:
        """A per-CPU value summed over all CPUs: an int, or a dict of summed struct fields.

        0 when the key is absent.
        """
        vals = self.lookup(key)
        if vals is None:
            return 0
        vals = vals if self.percpu else [vals]
        if vals and isinstance(vals[0], bytes):
            raise PyxdpError(f"sum: the values of map {self.name!r} are "
                             f"{self.spec.value_size}-byte blobs, not numbers")
        return _summed(self.name, "value", vals)

    def dump(self) -> list[dict[str, Any]]:
        """Every entry as ``{"key": ..., "value": ...}`` (what ``pyxdp map dump`` prints):
        the typed values with addresses as their strings (``"10.0.0.1"``), which the
        map takes back."""
        return [{"key": _printable(k), "value": _printable(v)} for k, v in self.items()]


def _summed(name: str, where: str, vals: list[Any]) -> Any:
    """One CPU's decoded values added up: ints summed, struct members and array items
    summed each (nested as the type nests); a byte blob has no sum."""
    first = vals[0] if vals else 0
    if isinstance(first, dict):
        return {f: _summed(name, f"{where}.{f}", [v[f] for v in vals]) for f in first}
    if isinstance(first, list):
        return [_summed(name, f"{where}[{i}]", [v[i] for v in vals]) for i in range(len(first))]
    if not isinstance(first, bytes):
        return sum(int(v) for v in vals)  # ints, and __be32 fields' addresses as before
    raise PyxdpError(f"sum: {where} of map {name!r} is a {type(first).__name__}, not a number")


def _printable(value: Any) -> Any:
    if isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return str(value)
    if isinstance(value, dict):
        return {k: _printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable(v) for v in value]
    return value


def _raw(value: object, size: int, what: str) -> bytes:
    if isinstance(value, int) and not isinstance(value, bool):
        return int_bytes(value, size, what, "encode")
    addr = address_bytes(value, size)
    if addr is not None:
        return addr
    return handle_bytes(value, size, what, "encode")


def _plain(raw: bytes) -> Any:
    return int.from_bytes(raw, "little") if len(raw) in (1, 2, 4, 8) else raw


class Program:
    """A loaded program: ``test_run`` with BPF_PROG_TEST_RUN's rules on its backend."""

    def __init__(self, name: str, spec: ProgramSpec, handle: ProgHandle, backend: Backend,
                 run_config: XdpRunConfig | None = None) -> None:
        self.name = name
        self.spec = spec
        self.handle = handle
        self._backend = backend
        # libxdp's XDP_RUN_CONFIG(prog) when the object declares one (the dispatcher's
        # priority and chain-call actions; libxdp's defaults otherwise).
        self.run_config = run_config
        self.closed = False  # set by Collection.close(): uses fail as on a closed fd

    def _live(self) -> ProgHandle:
        if self.closed:
            raise program_closed(self.name)
        return self.handle

    @property
    def backend(self) -> Backend:
        """The backend that loaded the program."""
        return self._backend

    def __repr__(self) -> str:
        return f"<Program {self.name} section={self.spec.section} on {self._backend.name}>"

    @property
    def section(self) -> str:
        """The ELF section the program came from (``"xdp"``, ``"xdp.frags"``...)."""
        return self.spec.section

    @property
    def fd(self) -> int:
        """What a devmap/cpumap value's ``bpf_prog.fd`` takes: the program fd on the
        kernel, the program id on pyxdp's userspace backend (which has no fds)."""
        fd = getattr(self._live(), "fd", None)
        if isinstance(fd, int):
            return fd
        prog_id = getattr(self.handle, "id", None)
        if isinstance(prog_id, int):
            return prog_id
        raise TypeError(f"{self.name}: its backend gives programs no fd")

    def test_run(self, data_in: bytes, *, ctx_in: bytes | None = None, data_size_out: int = 0,
                 ctx_size_out: int = 0, repeat: int = 1, trace: bool = False) -> TestRunResult:
        """BPF_PROG_TEST_RUN: run once (or ``repeat`` times) on ``data_in``.

        An XDP program's ``retval`` is an :class:`~pyxdp.uapi.bpf.XdpAction` when it is
        one of the five actions (an ``int`` still; any other value stays a plain int,
        as Linux reports it). A ``SEC("syscall")`` program runs once on ``ctx_in``
        alone (``bpf_prog_test_run_syscall``, on either backend); ``ctx_out`` is that
        context as the program left it."""
        data_in, ctx_in = test_run_args(data_in, ctx_in, {
            "data_size_out": data_size_out, "ctx_size_out": ctx_size_out, "repeat": repeat})
        res = self._backend.test_run(self._live(), data_in, ctx_in=ctx_in,
                                     data_size_out=data_size_out, ctx_size_out=ctx_size_out,
                                     repeat=repeat, trace=trace)
        if self.spec.prog_type == "xdp" and res.retval in _ACTIONS:
            res = dataclasses.replace(res, retval=XdpAction(res.retval))
        return res


    @checked(stream=(-(1 << 31), (1 << 31) - 1), size=(0, 0x7FFF_FFFF))
    def stream_read(self, stream: int = 1, size: int = 1 << 17) -> bytes:
        """Up to ``size`` bytes of the program's BPF stream ``stream`` (``BPF_STDOUT`` 1,
        ``BPF_STDERR`` 2: what ``bpf_stream_printk`` wrote, :mod:`pyxdp.vm.stream`),
        consumed as ``BPF_PROG_STREAM_READ_BY_FD`` consumes them; b"" when nothing
        is left. Another stream id raises KernelError (ENOENT)."""
        return self._backend.stream_read(self._live(), stream, size)


def _verify(ps: ProgramSpec, maps: dict[str, MapSpec], btf: Btf | None,
            core_btf: str | os.PathLike[str] | None) -> dict[int, MemAccess]:
    """:func:`pyxdp.verifier.verify`'s access facts, or those of its acceptance of the
    same inputs found in the disk cache (:mod:`pyxdp.diskcache`) for a long program."""
    key = None
    # (a CO-RE or kfunc program's walk looks kernel types up: worth a look-up at any length)
    kernel = bool(ps.core_relos) or any(_kfunc_call(i) for i in ps.insns)
    if (len(ps.insns) >= VERIFY_CACHE_INSNS or kernel) and ps.prog_type == "xdp" \
            and not any(_typed_ksym(i) for i in ps.insns):
        rest = {f.name: getattr(ps, f.name) for f in dataclasses.fields(ps) if f.name != "insns"}
        # the BTF by its bytes: the object also holds caches its queries fill in
        kernel_inputs = _kernel_inputs(ps, core_btf)
        key = verified_key(encode(ps.insns), rest, list(maps.items()),
                           btf.raw if btf is not None else None, kernel_inputs) \
            if kernel_inputs is not None else None
        data = verified(key) if key is not None else None
        facts = decode_facts(data) if data is not None else None
        if facts is not None:
            return facts
    from pyxdp.verifier import verify
    mem = verify(ps, maps, btf=btf, core_btf=core_btf).mem
    if key is not None:
        remember_verified(key, encode_facts(mem))
    return mem


def _kernel_inputs(ps: ProgramSpec, core_btf: str | os.PathLike[str] | None) -> object:
    """What else the verdict depends on: the kernel's BTF, where CO-RE relocations
    resolve, kfuncs and the kernel structs of BTF pointers (a kptr, a trusted argument,
    a helper's socket cast) are looked up (:func:`pyxdp.btf.vmlinux.core_target`: the
    file ``core_btf``, the running kernel's, the one pyxdp ships), each by its bytes'
    digest; and for a program calling kfuncs the verifier's kfunc table (open:
    :func:`pyxdp.verifier.kfuncs.register_kfunc`). None when ``core_btf`` is no regular
    file (no key: verified every time)."""
    from pyxdp.btf.vmlinux import target_digests
    kfuncs = None
    if ps.kfuncs or any(_kfunc_call(i) for i in ps.insns):
        from pyxdp.verifier.kfuncs import KFUNCS
        kfuncs = sorted(KFUNCS.items())
    digests = target_digests(core_btf)
    return None if digests is None else (digests, kfuncs)


def _kfunc_call(i: Instruction) -> bool:
    return i.code == op.OP_CALL and i.src == op.CallSrc.BPF_PSEUDO_KFUNC_CALL


def _typed_ksym(i: Instruction) -> bool:
    """An ld_imm64 of a kernel symbol by BTF id: the verdict on it also reads
    /proc/kallsyms (the symbol must have an address), which no key holds."""
    return i.code == op.OP_LD_IMM64 and i.src == op.PseudoSrc.BPF_PSEUDO_BTF_ID


_ASYNC_MAPS = frozenset({BpfMapType.BPF_MAP_TYPE_HASH, BpfMapType.BPF_MAP_TYPE_LRU_HASH,
                         BpfMapType.BPF_MAP_TYPE_ARRAY})
_ASYNC_FIELDS = ("bpf_timer", "bpf_wq", "bpf_task_work")


# map_check_btf: the map types whose values may hold each special field (a lock: the
# hash and array maps and the local storages; a kptr: those, their per-CPU and LRU
# kinds; a list head: hash, LRU hash and array maps). pyxdp models kptrs in hash, LRU
# hash and array maps only.
_LOCK_MAPS = frozenset({BpfMapType.BPF_MAP_TYPE_HASH, BpfMapType.BPF_MAP_TYPE_ARRAY,
                        BpfMapType.BPF_MAP_TYPE_CGROUP_STORAGE,
                        BpfMapType.BPF_MAP_TYPE_SK_STORAGE,
                        BpfMapType.BPF_MAP_TYPE_INODE_STORAGE,
                        BpfMapType.BPF_MAP_TYPE_TASK_STORAGE,
                        BpfMapType.BPF_MAP_TYPE_CGRP_STORAGE})
_KPTR_MAPS = frozenset({BpfMapType.BPF_MAP_TYPE_HASH, BpfMapType.BPF_MAP_TYPE_LRU_HASH,
                        BpfMapType.BPF_MAP_TYPE_ARRAY})
_LINUX_KPTR_MAPS = _KPTR_MAPS | {
    BpfMapType.BPF_MAP_TYPE_PERCPU_HASH, BpfMapType.BPF_MAP_TYPE_LRU_PERCPU_HASH,
    BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY, BpfMapType.BPF_MAP_TYPE_SK_STORAGE,
    BpfMapType.BPF_MAP_TYPE_INODE_STORAGE, BpfMapType.BPF_MAP_TYPE_TASK_STORAGE,
    BpfMapType.BPF_MAP_TYPE_CGRP_STORAGE}
_FIELD_MAPS = {"bpf_timer": _ASYNC_MAPS, "bpf_wq": _ASYNC_MAPS, "bpf_task_work": _ASYNC_MAPS,
               "bpf_spin_lock": _LOCK_MAPS, "bpf_res_spin_lock": _LOCK_MAPS,
               "kptr": _LINUX_KPTR_MAPS, "bpf_list_head": _KPTR_MAPS, "bpf_rb_root": _KPTR_MAPS,
               "percpu_kptr": _LINUX_KPTR_MAPS, "kptr_untrusted": _LINUX_KPTR_MAPS}


def _place_fields(h: MapHandle, ms: MapSpec, btf: Btf) -> None:
    """Tell a userspace map where its value holds special fields (map_check_btf: a
    field the map type may not hold fails the map's creation; a record btf_parse_fields
    refuses is kept as an error, which holds no field): a struct bpf_timer's or
    bpf_wq's (the last one's, the record's ``timer_off``/``wq_off``) through
    ``place_async``, the referenced __kptr fields through ``set_kptr_fields`` and the
    list heads and tree roots through ``set_list_heads`` and ``set_rb_roots`` (an
    update or delete drops their objects),
    every other's bytes as a span updates leave out."""
    assert ms.value_type is not None
    try:
        fields = btf.special_fields(ms.value_type)
    except FieldError:
        return
    for name, _off in fields:
        if ms.type not in _FIELD_MAPS.get(name, frozenset()):
            raise MapError("create", errno.EOPNOTSUPP,
                           f"map {ms.name}: a {name} in a {BpfMapType(ms.type).name} value")
    # a __percpu_kptr's object is an arena object too (pyxdp.vm.memalloc_percpu)
    kptrs = tuple(off for name, off in fields if name in ("kptr", "percpu_kptr"))
    if kptrs and ms.type not in _KPTR_MAPS:
        raise NotSupportedError(f"map {ms.name}: __kptr fields in a "
                                f"{BpfMapType(ms.type).name} value are not modelled by pyxdp")
    last = dict(fields)
    for name in _ASYNC_FIELDS:
        if name in last:
            h.place_async(name, last[name])  # type: ignore[attr-defined]
    if kptrs:
        from pyxdp.vm.task_kfuncs import KPTR_STRUCTS
        structs = {btf.types[tid].name for tid in btf.kptr_fields(ms.value_type).values()}
        h.set_kptr_fields(kptrs, bool(structs & KPTR_STRUCTS))  # type: ignore[attr-defined]
    heads = btf.graph_roots(ms.value_type, "bpf_list_head")
    if heads:
        h.set_list_heads(tuple((off, node) for off, (_, node) in heads.items()))  # type: ignore[attr-defined]
    roots = btf.graph_roots(ms.value_type, "bpf_rb_root")
    if roots:
        h.set_rb_roots(tuple((off, node) for off, (_, node) in roots.items()))  # type: ignore[attr-defined]
    h.field_spans = tuple((off, SPECIAL_FIELDS[name].size)  # type: ignore[attr-defined]
                          for name, off in fields if name not in ("kptr", "percpu_kptr") and (
                              last.get(name) != off or name not in _ASYNC_FIELDS))


def _make_backend(backend: str | Backend, spec: CollectionSpec, nr_cpus: int | None,
                  engine: str, core_btf: str | os.PathLike[str] | None) -> Backend:
    if not isinstance(backend, str):
        if not all(hasattr(backend, a) for a in ("load_program", "create_map", "test_run")):
            raise BadArgument(f"Collection: backend must be 'userspace', 'kernel' or a "
                              f"Backend, not {short(backend)}")
        return backend
    if backend == "userspace":
        from pyxdp.userspace import UserspaceBackend
        return UserspaceBackend(nr_cpus=nr_cpus, engine=engine, core_btf=core_btf)
    if backend == "kernel":
        from pyxdp.kernel.backend import KernelBackend
        return KernelBackend(spec, core_btf=core_btf)
    raise PyxdpError(f"unknown backend {backend!r} (userspace or kernel)")


class Collection:
    """Every map and program of one object, loaded into one backend."""

    @checked(nr_cpus=(1, NR_CPUS_MAX), spec=None)
    def __init__(self, spec: CollectionSpec, backend: str | Backend = "userspace", *,
                 nr_cpus: int | None = None, engine: str = "auto",
                 core_btf: str | os.PathLike[str] | None = None, verify: bool = True) -> None:
        """``engine`` (userspace backend): ``"jit"``, ``"interp"``, ``"auto"`` (the JIT
        when llvmlite is installed) or ``"tiered"`` (the interpreter at once, the JIT
        code, built on a thread, from the first run after it is ready). ``core_btf``: a
        BTF file CO-RE relocations resolve against instead of the running kernel's
        (libbpf's ``btf_custom_path``).

        ``verify`` (userspace backend): run :mod:`pyxdp.verifier` on every program first,
        so a program Linux 6.18 would refuse raises :class:`~pyxdp.errors.VerifierError`
        with Linux's message; ``False`` loads it anyway (the engines' run-time checks
        stop a bad access instead). The kernel backend always has Linux's verifier."""
        if not isinstance(spec, CollectionSpec):
            raise BadArgument(f"Collection: spec must be a CollectionSpec (Collection.load "
                              f"reads an object file), not {short(spec)}")
        self.spec = spec
        self.verify = verify
        self.backend = _make_backend(backend, spec, nr_cpus, engine, core_btf)
        self.maps: dict[str, Map] = {}
        self.programs: dict[str, Program] = {}
        # Programs of the object left unloaded, as libbpf's autoload=false leaves
        # them, and why (a type the backend cannot run, or SEC("?...")).
        self.skipped: dict[str, str] = {}
        try:
            self._load()
        except BaseException:
            self.close()
            raise

    @classmethod
    @checked(nr_cpus=(1, NR_CPUS_MAX))
    def load(cls, path: str | os.PathLike[str], backend: str | Backend = "userspace", *,
             nr_cpus: int | None = None, engine: str = "auto",
             core_btf: str | os.PathLike[str] | None = None, verify: bool = True,
             kconfig: str | None = None) -> Collection:
        """Read the clang object at ``path`` and load it into ``backend`` (``"userspace"``,
        ``"kernel"`` or a :class:`~pyxdp.backend.Backend`); ``kconfig`` is Kconfig text
        for ``__kconfig`` externs (before the system's); the other options are the
        constructor's."""
        from pyxdp.elf import load_collection_spec
        return cls(load_collection_spec(Path(path), kconfig=kconfig), backend,
                   nr_cpus=nr_cpus, engine=engine, core_btf=core_btf, verify=verify)

    def _load(self) -> None:
        handles: dict[str, MapHandle] = {}
        btf = self.spec.btf
        nr_cpus = int(getattr(self.backend, "nr_cpus", 1) or 1)
        # Without a kernel, pyxdp asks Linux's BTF rules what BPF_BTF_LOAD would answer
        # (the kernel backend asks the kernel): BTF Linux refuses is gone on without, as
        # libbpf does, unless a map needs it.
        refused = kernel_error(btf) if btf is not None and self.backend.name == "userspace" \
            else None
        if refused is None and btf is not None and self.backend.name == "userspace" \
                and btf.struct_meta_kptrs():
            # and btf_parse_kptr's, which looks the kptrs' structs up in the kernel's BTF
            from pyxdp.verifier.verifier import btf_load_refusal
            refused = btf_load_refusal(btf, getattr(self.backend, "core_btf", None))
        if refused is not None:
            _log().info("the kernel would refuse the object's BTF (%s): maps are created "
                      "without BTF types and programs loaded without func/line info", refused)
        for name, ms in self.spec.maps.items():
            ms = libbpf_map_defaults(ms, nr_cpus)
            if refused is not None:
                need = map_needs_btf(ms.type, ms.type_name, ms.value_type, btf)
                if need:
                    raise no_btf_error(name, need, f"BTF refused: {refused}")
            h = self.backend.create_map(ms, handles)
            handles[name] = h
            codec = BtfCodec(btf, ms.key_type, ms.value_type) if btf is not None and (
                ms.key_type or ms.value_type) else None
            cpus = int(getattr(h, "nr_cpus", 1) or 1)
            if btf is not None and refused is None and ms.value_type is not None and \
                    hasattr(h, "place_async"):
                _place_fields(h, ms, btf)
            view = getattr(self.backend, "syscall_handle", None)  # the fd's mode applies
            self.maps[name] = Map(name, ms, view(h, ms) if view else h, codec, cpus)
        check = self.verify and self.backend.name == "userspace"
        for name, ps in self.spec.programs.items():
            why = "autoload is off (SEC(\"?...\"))" if not ps.autoload else \
                self.backend.cannot_load(ps)
            if why:
                self.skipped[name] = why
                continue
            if ps.userspace:
                ps = ps.with_map_loads()
            facts = None
            if check:  # as relocated (CO-RE), kfunc calls included
                from pyxdp.userspace import resolve_ksyms
                resolve_ksyms(ps, getattr(self.backend, "core_btf", None), self.spec.btf)
                facts = _verify(ps, self.spec.maps, self.spec.btf,
                                getattr(self.backend, "core_btf", None))
            try:
                handle = self.backend.load_program(ps, handles, self.spec.btf, facts=facts)
            except InvalidProgram:
                if not check:
                    raise
                # Verified: Linux loads a program whose dead code holds encodings its walk
                # never checks (reserved fields) and whose exits have an offset, and no
                # such instruction runs; pyxdp's engines get it with those fields cleared.
                from pyxdp.verifier.fields import linux_fields
                loaded = linux_fields(ps.insns).insns
                if loaded == tuple(ps.insns):
                    raise
                ps = dataclasses.replace(ps, insns=loaded)
                handle = self.backend.load_program(ps, handles, self.spec.btf, facts=facts)
            self.programs[name] = Program(name, ps, handle, self.backend,
                                          self.spec.xdp_run_config.get(name))
        for name, ms in self.spec.maps.items():
            for key, value in ms.contents:
                if isinstance(value, ProgramRef):
                    prog = self.programs.get(value.name)
                    if prog is None and value.name in self.skipped:
                        continue  # the slot stays empty, as for a program never loaded
                    if prog is None:
                        raise PyxdpError(f"map {name}: initial value names program "
                                         f"{value.name!r}, which is not loaded")
                    self.backend.set_prog_array(handles[name],
                                                int.from_bytes(key[:4], "little"), prog.handle)
                elif isinstance(value, InnerMapRef):
                    set_inner = self.backend.set_inner_map  # type: ignore[attr-defined]
                    set_inner(handles[name], key, handles[value.name])

    def __getitem__(self, name: str) -> Program:
        if not isinstance(name, str):  # a list would meet the dict as "unhashable"
            raise KeyError(short(name))  # (an array's repr spans lines)
        if name not in self.programs and name in self.skipped:
            raise self._not_loaded(name)
        return self.programs[name]

    def _not_loaded(self, name: str) -> NotSupportedError:
        ps = self.spec.programs[name]
        return NotSupportedError(f"program {name!r} (section {ps.section!r}, {ps.prog_type}) "
                                 f"is not loaded on the {self.backend.name} backend: "
                                 f"{self.skipped[name]}")

    @checked
    def program(self, name_or_section: str | None = None) -> Program:
        """A program by name or section; the only program when there is one."""
        if name_or_section is None:
            if len(self.programs) != 1:
                raise PyxdpError(f"the object has {len(self.programs)} programs "
                                 f"({', '.join(self.programs)}): name one")
            return next(iter(self.programs.values()))
        if name_or_section in self.programs:
            return self.programs[name_or_section]
        found = [p for p in self.programs.values() if p.section == name_or_section]
        if len(found) == 1:
            return found[0]
        if not found:
            skipped = [n for n, p in self.spec.programs.items() if n in self.skipped
                       and name_or_section in (n, p.section)]
            if skipped:
                raise self._not_loaded(skipped[0])
        raise PyxdpError(f"no program named {name_or_section!r} "
                         f"(programs: {', '.join(self.programs)})")

    def run_timers(self) -> int:
        """Run the callbacks of the bpf_timers due now (:data:`pyxdp.vm.bpf_timer.TIMERS`,
        the process's queue, read against its clock: ``TIMERS.using(VirtualClock())``
        makes time move only when a test says so); returns how many ran. A pyxdp
        ``Host.run`` does this between NAPI polls. On the kernel backend Linux runs its
        timers itself (hrtimer softirqs) and this returns 0."""
        if self.backend.name != "userspace":
            return 0
        from pyxdp.vm.bpf_timer import TIMERS
        return TIMERS.run()

    def run_work(self) -> int:
        """Run the bpf_wq callbacks queued now (:data:`pyxdp.vm.bpf_wq.WORKQUEUE`, the
        process's system workqueue); returns how many ran. Work a callback queues
        waits for the next call. A pyxdp ``Host.run`` does this between NAPI polls. On
        the kernel backend Linux runs the work itself (kworkers) and this returns 0."""
        if self.backend.name != "userspace":
            return 0
        from pyxdp.vm.bpf_wq import WORKQUEUE
        return WORKQUEUE.run()

    def close(self) -> None:
        """Release every map and program (the kernel's fds); also on leaving ``with``.
        User space letting go of a map frees its bpf_timers and bpf_wqs
        (``map_release_uref``)."""
        for m in self.maps.values():
            release = getattr(m.handle, "release_uref", None)
            if release is not None:
                release()
        self.backend.close()
        for m in self.maps.values():
            m.closed = True
        for p in self.programs.values():
            p.closed = True

    def __enter__(self) -> Collection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()



