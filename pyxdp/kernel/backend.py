"""The kernel backend: a :class:`~pyxdp.spec.CollectionSpec` loaded into Linux.

This is libbpf's ``bpf_object__load`` over bpf(2), without libbpf:

* ``bpf_object__sanitize_and_load_btf``: the object's BTF is loaded once
  (``BPF_BTF_LOAD``), from a *copy* fixed up for the kernel
  (:func:`kernel_btf`); when the kernel refuses it, maps are created and
  programs loaded without BTF, as libbpf does, and :attr:`KernelBackend.warnings`
  says so;
* ``bpf_object__create_map``: ``BPF_MAP_CREATE`` with the BTF key/value type
  ids (dropped for the map types whose kernel ops refuse BTF, and retried
  without BTF when the kernel refuses them, unless the map cannot work
  without it), an inner-map template for map-in-maps, global data written
  and ``.rodata`` frozen (``bpf_object__populate_internal_map``);
* ``bpf_object_load_prog``: each ``ld_imm64`` named by a
  :class:`~pyxdp.spec.MapRef` gets the map fd (``BPF_PSEUDO_MAP_FD``) or fd
  plus value offset (``BPF_PSEUDO_MAP_VALUE``), then ``BPF_PROG_LOAD`` with
  the expected attach type, ``prog_flags``, license and ``func_info`` /
  ``line_info`` against the loaded BTF;
* ``bpf_prog_test_run_opts``: ``BPF_PROG_TEST_RUN``.

Initial contents of prog arrays and map-in-maps are applied by the
collection once every map and program exists (:meth:`KernelBackend.set_prog_array`,
:meth:`KernelBackend.set_inner_map`), like libbpf's
``bpf_object_init_prog_arrays`` and ``init_slots``.
"""

from __future__ import annotations

import errno as _errno
import logging
import os
import struct
from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Final, Self

from pyxdp.asm.insn import Instruction
from pyxdp.asm.opcodes import PseudoSrc
from pyxdp.backend import MapHandle, ProgHandle, TestRunResult, syscall_test_run_args
from pyxdp.btf.btf import Btf, BtfKind
from pyxdp.btf.core import apply_core_relos, check_kfunc_proto
from pyxdp.btf.kcheck import kernel_fixup, map_needs_btf, no_btf_error
from pyxdp.btf.vmlinux import VMLINUX_BTF, core_target, kernel_btf_index, missing_ksym
from pyxdp.errors import (
    BPFUnavailable,
    InvalidProgram,
    KernelError,
    MapError,
    NotSupportedError,
    PyxdpError,
    program_closed,
)
from pyxdp.kernel.maps import KernelMap
from pyxdp.kernel.syscall import (
    Fd,
    FdObject,
    ProgInfo,
    TestRunOutputTruncated,
    btf_load,
    map_create,
    possible_cpus,
    prog_get_info,
    prog_load,
    prog_stream_read,
    prog_test_run,
    prog_test_run_syscall,
    require_bpf,
)
from pyxdp.spec import (
    BPF_F_RDONLY_PROG,
    CollectionSpec,
    MapSpec,
    ProgramSpec,
    libbpf_map_defaults,
)
from pyxdp.uapi.bpf import BPF_OBJ_NAME_LEN, BpfAttachType, BpfMapType, BpfProgType

if TYPE_CHECKING:
    from pyxdp.verifier.facts import MemAccess

__all__ = ["KernelBackend", "KernelProgram", "kernel_btf", "kernel_object_name"]

_log = logging.getLogger(__name__)

# Map types whose kernel ops answer BTF key/value ids with map_check_no_btf
# (ENOTSUPP): libbpf creates them without BTF, and so do we.
_NO_BTF_TYPES: Final = frozenset({
    BpfMapType.BPF_MAP_TYPE_PROG_ARRAY,
    BpfMapType.BPF_MAP_TYPE_PERF_EVENT_ARRAY,
    BpfMapType.BPF_MAP_TYPE_STACK_TRACE,
    BpfMapType.BPF_MAP_TYPE_CGROUP_ARRAY,
    BpfMapType.BPF_MAP_TYPE_ARRAY_OF_MAPS,
    BpfMapType.BPF_MAP_TYPE_HASH_OF_MAPS,
    BpfMapType.BPF_MAP_TYPE_DEVMAP,
    BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH,
    BpfMapType.BPF_MAP_TYPE_CPUMAP,
    BpfMapType.BPF_MAP_TYPE_XSKMAP,
    BpfMapType.BPF_MAP_TYPE_SOCKMAP,
    BpfMapType.BPF_MAP_TYPE_SOCKHASH,
    BpfMapType.BPF_MAP_TYPE_QUEUE,
    BpfMapType.BPF_MAP_TYPE_STACK,
    BpfMapType.BPF_MAP_TYPE_RINGBUF,
    BpfMapType.BPF_MAP_TYPE_USER_RINGBUF,
})
_PAGE_SIZE: Final = 4096
# Output room when the caller sets no data_size_out: what XDP can add to a
# packet (adjust_head headroom, adjust_tail into the tailroom or the last
# frag's page) stays well below two pages.
_TEST_RUN_SLACK: Final = 2 * _PAGE_SIZE

_FUNC_INFO: Final = struct.Struct("=II")  # struct bpf_func_info
_LINE_INFO: Final = struct.Struct("=IIII")  # struct bpf_line_info
_CORE_RELO: Final = struct.Struct("=IIII")  # struct bpf_core_relo
_U32: Final = struct.Struct("=I")


def kernel_object_name(name: str) -> str:
    """A name ``bpf_obj_name_cpy`` accepts: ``[A-Za-z0-9_.]``, at most 15 characters."""
    clean = "".join(c if (c.isascii() and c.isalnum()) or c in "_." else "_" for c in name)
    return clean[:BPF_OBJ_NAME_LEN - 1]


# --------------------------------------------------------------------------
# BTF for the kernel
# --------------------------------------------------------------------------

def kernel_btf(btf: Btf, maps: Iterable[MapSpec] = ()) -> tuple[Btf, tuple[str, ...]]:
    """A copy of ``btf`` the kernel's ``BPF_BTF_LOAD`` accepts, and the fix-ups made
    (:func:`pyxdp.btf.kcheck.kernel_fixup`, DATASECs sized as the global data maps of
    their names)."""
    return kernel_fixup(btf, {m.name: m.value_size for m in maps if m.is_global_data})


def _attach_btf_name(spec: ProgramSpec) -> tuple[str, BtfKind]:
    """The kernel BTF type a ``SEC_ATTACH_BTF`` program attaches to, named as libbpf's
    ``find_attach_btf_id`` names it (``btf_trace_`` typedefs for ``tp_btf``,
    ``bpf_lsm_``/``bpf_iter_`` functions for LSM and iterators)."""
    target = spec.attach_to
    if spec.prog_type == "tracing" and spec.expected_attach_type == BpfAttachType.BPF_TRACE_RAW_TP:
        return f"btf_trace_{target}", BtfKind.TYPEDEF
    if spec.prog_type == "lsm":
        return f"bpf_lsm_{target}", BtfKind.FUNC
    if spec.expected_attach_type == BpfAttachType.BPF_TRACE_ITER:
        return f"bpf_iter_{target}", BtfKind.FUNC
    return target, BtfKind.FUNC


def _needs_btf(spec: MapSpec, btf: Btf | None) -> str:
    """Why map ``spec`` cannot be created (or used) without BTF; "" when it can."""
    return map_needs_btf(spec.type, spec.type_name, spec.value_type, btf)


# --------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------

class KernelProgram(FdObject):
    """A program the verifier accepted, owned through its fd.

    ``name`` is the spec's name (the kernel keeps at most 15 characters of
    it, ``kernel_name``); ``id`` and ``tag`` are the kernel's.
    """

    def __init__(self, spec: ProgramSpec, fd: Fd) -> None:
        self.spec = spec
        self._fd = fd
        info = prog_get_info(fd)
        self.id: int = info.id
        self.tag: str = info.tag_hex
        self.kernel_name: str = info.name
        self.name = spec.name

    def info(self) -> ProgInfo:
        """``BPF_OBJ_GET_INFO_BY_FD`` now (run counts, map ids, verified insns...)."""
        return prog_get_info(self.fd)

    def _closed_error(self) -> PyxdpError:
        return program_closed(self.name)

    def __repr__(self) -> str:
        state = "closed" if self._fd.closed else f"fd={self._fd.fd}"
        return f"<KernelProgram {self.name!r} id={self.id} {state}>"


# --------------------------------------------------------------------------
# The backend
# --------------------------------------------------------------------------

class KernelBackend:
    """Maps and programs in the running kernel through bpf(2); needs root (or CAP_BPF).

    ``collection`` supplies the object's BTF (for map key/value types and
    program func/line info) and its map specs (for BTF fix-ups); ``btf``
    overrides the BTF. Everything created is owned by the backend and
    closed, in reverse order, by :meth:`close`.
    """

    name = "kernel"

    def __init__(self, collection: CollectionSpec | None = None, *, btf: Btf | None = None,
                 log_level: int = 1, core_btf: str | os.PathLike[str] | None = None,
                 core_in_kernel: bool = False) -> None:
        require_bpf()  # fail here, with the reason, rather than at the first map
        self.collection = collection
        self.btf = btf if btf is not None else (collection.btf if collection else None)
        self.log_level = log_level
        # CO-RE target: the running kernel's BTF unless the caller names a file;
        # core_in_kernel hands the relocations to BPF_PROG_LOAD instead, for the
        # kernel's own resolver to apply (as light skeletons do).
        self.core_btf = core_btf
        self.core_in_kernel = core_in_kernel
        self.nr_cpus = possible_cpus()
        self.warnings: list[str] = []
        self.btf_fixups: tuple[str, ...] = ()
        self.btf_error: PyxdpError | None = None
        self._btf_fd: Fd | None = None
        self._btf_tried = False
        self._maps: list[KernelMap] = []
        self._progs: list[KernelProgram] = []

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        _log.info("%s", message)

    # -- BTF -------------------------------------------------------------------------

    def btf_fd(self) -> Fd | None:
        """The object's BTF in the kernel (loaded on first use); None without it."""
        if self._btf_tried:
            return self._btf_fd
        self._btf_tried = True
        if self.btf is None:
            return None
        maps = self.collection.maps.values() if self.collection is not None else ()
        fixed, self.btf_fixups = kernel_btf(self.btf, maps)
        try:
            self._btf_fd = btf_load(fixed.raw)
        except BPFUnavailable:
            raise
        except KernelError as e:
            self.btf_error = e
            self._warn(f"the kernel refused the object's BTF ({e}): maps are created "
                       f"without BTF types and programs loaded without func/line info")
        return self._btf_fd

    # -- maps ------------------------------------------------------------------------

    def create_map(self, spec: MapSpec, maps: Mapping[str, MapHandle]) -> KernelMap:
        """BPF_MAP_CREATE for ``spec``, then its initial bytes, then freeze if asked."""
        template: KernelMap | None = None
        if spec.inner is not None:
            # The outer map copies the template's geometry at creation; the
            # template itself is not needed afterwards (libbpf destroys it too).
            template = self._create(spec.inner, spec.inner.name or f"{spec.name}.inner")
        try:
            km = self._create(spec, spec.name, inner=template)
        finally:
            if template is not None:
                template.close()
        self._maps.append(km)
        self._populate(km, spec)
        return km

    def _create(self, spec: MapSpec, name: str, *, inner: KernelMap | None = None
                ) -> KernelMap:
        flags = spec.flags
        if spec.frozen:
            # Frozen + BPF_F_RDONLY_PROG is what makes the verifier treat the
            # contents as constants (bpf_map_is_rdonly), e.g. for a
            # bpf_trace_printk format; libbpf sets the flag on .rodata.
            flags |= BPF_F_RDONLY_PROG
        # PERF_EVENT_ARRAY without max_entries: one slot per possible CPU, as
        # libbpf (the collection applies it too; this covers direct callers).
        max_entries = libbpf_map_defaults(spec, self.nr_cpus).max_entries
        kname = kernel_object_name(spec.kernel_name or name)
        key_id = spec.key_type or 0
        value_id = spec.value_type or 0
        need = _needs_btf(spec, self.btf)
        use_btf = bool(key_id or value_id) and spec.type not in _NO_BTF_TYPES
        btf = self.btf_fd() if use_btf else None
        if need and btf is None:
            raise no_btf_error(name, need, str(self.btf_error) if self.btf_error is not None
                               else "the object has no BTF")

        def create(with_btf: Fd | None) -> Fd:
            return map_create(spec.type, spec.key_size, spec.value_size, max_entries, flags,
                              kname, inner_map_fd=inner.fd if inner is not None else 0,
                              numa_node=spec.numa_node, map_extra=spec.map_extra,
                              btf_fd=with_btf or 0,
                              btf_key_type_id=key_id if with_btf else 0,
                              btf_value_type_id=value_id if with_btf else 0)

        try:
            try:
                fd = create(btf)
            except KernelError as e:
                if btf is None or need or isinstance(e, BPFUnavailable):
                    raise
                # libbpf's fallback: a map the kernel will not describe with
                # these types still works as plain bytes.
                self._warn(f"map {name!r}: BPF_MAP_CREATE refused its BTF types "
                           f"({e}); created without BTF")
                fd = create(None)
        except BPFUnavailable:
            raise
        except KernelError as e:
            raise MapError("create", e.errno, f"map {name!r} ({spec.type_name})") from None
        return KernelMap(fd, spec=spec, nr_cpus=self.nr_cpus)

    def _populate(self, km: KernelMap, spec: MapSpec) -> None:
        """Initial bytes (global data sections), then BPF_MAP_FREEZE for ``.rodata``.

        Symbolic values (programs, inner maps) wait for :meth:`set_prog_array`
        and :meth:`set_inner_map`.
        """
        arraylike = spec.type in (BpfMapType.BPF_MAP_TYPE_ARRAY,
                                  BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY)
        for key, value in spec.contents:
            if not isinstance(value, (bytes, bytearray)):
                continue
            data = bytes(value)[:km.value_size].ljust(km.value_size, b"\0")
            if arraylike and not any(data):
                continue  # arrays start zeroed (libbpf skips .bss alike)
            if km.percpu:
                data = data.ljust(km.elem_size, b"\0") * km.nr_cpus
            km.update(key, data)
        if spec.frozen:
            km.freeze()

    def set_prog_array(self, m: MapHandle, index: int, prog: ProgHandle) -> None:
        """Slot ``index`` of a prog_array gets ``prog`` (its fd, as bpf(2) wants)."""
        km = self._own_map(m, "update")
        kp = self._own_prog(prog)
        km.update(_U32.pack(index), _U32.pack(kp.fd))

    def set_inner_map(self, m: MapHandle, key: bytes, inner: MapHandle) -> None:
        """Entry ``key`` of a map-in-map gets map ``inner`` (its fd, as bpf(2) wants)."""
        km = self._own_map(m, "update")
        ki = self._own_map(inner, "update")
        km.update(key, _U32.pack(ki.fd))

    @staticmethod
    def _own_map(m: MapHandle | object, op: str) -> KernelMap:
        if not isinstance(m, KernelMap):
            raise MapError(op, _errno.EINVAL, f"{m!r} is not a kernel map")
        return m

    @staticmethod
    def _own_prog(p: ProgHandle | object) -> KernelProgram:
        if not isinstance(p, KernelProgram):
            raise PyxdpError(f"{p!r} was not loaded by the kernel backend")
        return p

    # -- programs ----------------------------------------------------------------------

    def _bind_maps(self, spec: ProgramSpec, maps: Mapping[str, MapHandle]
                   ) -> list[Instruction]:
        """A copy of the program with every MapRef's ld_imm64 pointing at a map fd."""
        insns = list(spec.insns)
        for ref in spec.map_refs:
            handle = maps.get(ref.map_name)
            if handle is None:
                raise PyxdpError(f"program {spec.name!r}: map {ref.map_name!r} was not created")
            km = self._own_map(handle, "bind")
            if not 0 <= ref.pc < len(insns) - 1 or not insns[ref.pc].is_ld_imm64():
                raise InvalidProgram(f"map reference to {ref.map_name!r} is not on an "
                                     f"ld_imm64", pc=ref.pc, rule="map-ref")
            if ref.kind == "fd":
                src, hi = PseudoSrc.BPF_PSEUDO_MAP_FD, 0
            else:
                src, hi = PseudoSrc.BPF_PSEUDO_MAP_VALUE, ref.offset
            insns[ref.pc] = replace(insns[ref.pc], src=int(src), imm=km.fd)
            insns[ref.pc + 1] = replace(insns[ref.pc + 1], imm=hi)
        return insns

    def cannot_load(self, spec: ProgramSpec) -> str:
        if spec.prog_type == "unspec":
            # libbpf fails here ("missing BPF prog type, check ELF section name").
            return f"libbpf 1.x knows no program type for section {spec.section!r}"
        return ""

    def _resolve_kernel_refs(self, spec: ProgramSpec, btf: Btf | None) -> tuple[
            ProgramSpec, int]:
        """CO-RE relocations, kfunc ids and the BTF attach target, as libbpf resolves
        them against the kernel's BTF before BPF_PROG_LOAD."""
        if not spec.core_relos and not spec.kfuncs and not spec.attach_to:
            return spec, 0
        vmlinux = core_target(self.core_btf) if spec.core_relos and not \
            self.core_in_kernel else None
        if vmlinux is not None:
            spec = apply_core_relos(spec, btf if btf is not None else self.btf, vmlinux,
                                    target_name=vmlinux.path, poison=True)
        kernel = kernel_btf_index()
        if kernel is None:
            raise NotSupportedError(f"program {spec.name!r} needs the kernel's BTF "
                                    f"({VMLINUX_BTF}), which this kernel does not have")
        insns = list(spec.insns)
        for k in spec.kfuncs:
            kid = kernel.find(k.name, BtfKind.FUNC)
            if kid is None:
                raise missing_ksym(spec.name, k.name)
            check_kfunc_proto(spec.name, k.name, btf if btf is not None else self.btf,
                              kernel, kid)
            insns[k.pc] = replace(insns[k.pc], imm=kid, off=0)
        attach_id = 0
        if spec.attach_to:
            name, kind = _attach_btf_name(spec)
            found = kernel.find(name, kind)
            if found is None:
                raise PyxdpError(f"program {spec.name!r}: attach target {spec.attach_to!r} "
                                 f"({kind.name} {name!r}) is not in the kernel's BTF")
            attach_id = found
        return spec.copy(insns=tuple(insns)), attach_id

    def load_program(self, spec: ProgramSpec, maps: Mapping[str, MapHandle],
                     btf: Btf | None = None, *, replace_func: tuple[Fd, int] | None = None,
                     facts: Mapping[int, MemAccess] | None = None) -> KernelProgram:
        """BPF_PROG_LOAD; a refusal raises VerifierError with the whole verifier log.
        (``facts`` are for pyxdp's JIT: the kernel verifies and JITs on its own.)

        ``replace_func`` (target program fd, BTF id of one of its global functions)
        loads the program as an extension (``BPF_PROG_TYPE_EXT``, freplace) of that
        function, as libbpf's ``bpf_program__set_attach_target`` does."""
        why = self.cannot_load(spec)
        if why:
            raise NotSupportedError(f"program {spec.name!r}: {why}")
        if replace_func is not None:
            spec = spec.copy(prog_type="ext", expected_attach_type=0)
        try:
            prog_type = BpfProgType["BPF_PROG_TYPE_" + spec.prog_type.upper()]
        except KeyError:
            raise NotSupportedError(f"program type {spec.prog_type!r}") from None
        if prog_type == BpfProgType.BPF_PROG_TYPE_EXT and replace_func is None:
            raise NotSupportedError(f"program {spec.name!r}: freplace programs need the "
                                    f"program they replace (replace_func=)")
        spec, attach_btf_id = self._resolve_kernel_refs(spec, btf)
        attach_prog: Fd | int = 0
        if replace_func is not None:
            attach_prog, attach_btf_id = replace_func
        insns = self._bind_maps(spec, maps)
        btf_fd = self.btf_fd() if spec.func_info or spec.line_info or spec.core_relos \
            else None
        func_info = line_info = b""
        if btf_fd is not None:
            # Both records count insn_off in instructions at the syscall
            # boundary (.BTF.ext counts bytes; the spec already holds slots).
            func_info = b"".join(_FUNC_INFO.pack(f.insn_off, f.type_id)
                                 for f in spec.func_info)
            line_info = b"".join(_LINE_INFO.pack(li.insn_off, li.file_name_off, li.line_off,
                                                 li.line_col) for li in spec.line_info)
        core_relos = b""
        if spec.core_relos:  # left for the kernel (core_in_kernel)
            if btf_fd is None:
                raise NotSupportedError(f"program {spec.name!r}: the kernel applies CO-RE "
                                        f"relocations only with the object's BTF loaded")
            core_relos = b"".join(_CORE_RELO.pack(r.pc * 8, r.type_id, r.access_off, r.kind)
                                  for r in spec.core_relos)
        license = spec.license or (self.collection.license if self.collection else "")
        fd = prog_load(
            prog_type, insns, license, name=kernel_object_name(spec.name),
            log_level=self.log_level, expected_attach_type=spec.expected_attach_type,
            prog_flags=spec.flags, prog_ifindex=spec.ifindex,
            kern_version=self.collection.kern_version if self.collection else 0,
            prog_btf_fd=btf_fd or 0, attach_btf_id=attach_btf_id, attach_prog_fd=attach_prog,
            func_info=func_info, func_info_rec_size=_FUNC_INFO.size if func_info else 0,
            line_info=line_info, line_info_rec_size=_LINE_INFO.size if line_info else 0,
            core_relos=core_relos, core_relo_rec_size=_CORE_RELO.size if core_relos else 0)
        try:
            prog = KernelProgram(spec, fd)
        except BaseException:
            fd.close()
            raise
        self._progs.append(prog)
        return prog

    # -- running ---------------------------------------------------------------------

    def stream_read(self, prog: ProgHandle, stream_id: int, size: int) -> bytes:
        return prog_stream_read(self._own_prog(prog).fd, stream_id, size)

    def test_run(self, prog: ProgHandle, data_in: bytes, *, ctx_in: bytes | None = None,
                 data_size_out: int = 0, ctx_size_out: int = 0, repeat: int = 1,
                 trace: bool = False) -> TestRunResult:
        """BPF_PROG_TEST_RUN; output that does not fit raises TestRunTruncated.

        ``data_size_out=0`` means "whatever the program produces" (a buffer
        with room for any growth XDP allows); ``ctx_size_out=0`` copies the
        context back when ``ctx_in`` is given.
        """
        if trace:
            raise NotSupportedError("per-instruction trace needs the userspace backend")
        kp = self._own_prog(prog)
        if kp.spec.prog_type == "syscall":
            syscall_test_run_args(kp.name, data_in, data_size_out, ctx_size_out, repeat)
            return prog_test_run_syscall(kp.fd, ctx_in)
        # ctx_size_out=0: room for the whole context the kernel copies back (an xdp_md
        # of 24 bytes from a shorter or empty ctx_in too), as the userspace backend
        # gives it, not ENOSPC for the bytes ctx_in lacked.
        room = None if ctx_in is None else max(len(ctx_in), _PAGE_SIZE)
        try:
            return prog_test_run(
                kp.fd, bytes(data_in), ctx_in=ctx_in,
                data_size_out=data_size_out or len(data_in) + _TEST_RUN_SLACK,
                ctx_size_out=ctx_size_out or room, repeat=repeat)
        except TestRunOutputTruncated as e:
            if not ctx_size_out and e.ctx_size == room and isinstance(e.result, TestRunResult):
                # the data did not fit, so the kernel left the context buffer we chose
                # as it was: nothing was copied back (ctx_size_out was 0)
                e.result = replace(e.result, ctx_out=None)
                e.ctx_size = 0
            raise

    # -- lifetime ----------------------------------------------------------------------

    @property
    def map_handles(self) -> dict[str, KernelMap]:
        """The maps created so far by their spec's name (what programs reference)."""
        return {km.spec.name: km for km in self._maps if km.spec is not None}

    @property
    def maps(self) -> tuple[KernelMap, ...]:
        return tuple(self._maps)

    @property
    def programs(self) -> tuple[KernelProgram, ...]:
        return tuple(self._progs)

    def close(self) -> None:
        """Close every program, map and the BTF object, newest first (idempotent)."""
        errors: list[BaseException] = []
        owned: list[KernelProgram | KernelMap | Fd] = [*reversed(self._progs),
                                                     *reversed(self._maps)]
        if self._btf_fd is not None:
            owned.append(self._btf_fd)
        self._progs, self._maps, self._btf_fd = [], [], None
        self._btf_tried = False
        for obj in owned:
            try:
                obj.close()
            except PyxdpError as e:  # keep closing the rest
                errors.append(e)
        if errors:
            raise errors[0]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
