"""The userspace backend: programs on pyxdp's engines, maps in pyxdp's flat memory.

Implements :class:`pyxdp.backend.Backend` with no kernel at all: maps come
from :mod:`pyxdp.maps`, programs become :class:`pyxdp.net.prog.XdpProg`
(context accesses proven and rewritten, helpers bound at load), and
``test_run`` is :func:`pyxdp.net.test_run.bpf_prog_test_run_xdp`. It lives
above ``vm``, ``maps`` and ``net`` because it is the glue of the three.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pyxdp.args import NR_CPUS_MAX, checked
from pyxdp.backend import MapHandle, ProgHandle, TestRunResult, syscall_test_run_args
from pyxdp.btf.btf import Btf, BtfKind
from pyxdp.btf.core import check_kfunc_proto
from pyxdp.btf.vmlinux import core_target, missing_ksym, relocate
from pyxdp.errors import InvalidProgram, KernelError, MapError, NotSupportedError, PyxdpError
from pyxdp.maps import create_map
from pyxdp.maps.base import (
    Map,
    SyscallView,
    bad_fd,
    default_nr_cpus,
    live_program,
    register_object,
    registered,
    release_object,
)
from pyxdp.maps.bpf_local_storage import LOCAL_STORAGE_TYPES
from pyxdp.net.prog import XdpProg
from pyxdp.net.test_run import TestRunEnv, bpf_prog_test_run_syscall, bpf_prog_test_run_xdp
from pyxdp.spec import (
    BPF_F_XDP_HAS_FRAGS,
    ExceptionCallbackError,
    MapSpec,
    ProgramSpec,
    exception_callback,
)
from pyxdp.uapi.bpf import BpfAttachType, BpfMapType, MapFlag
from pyxdp.verifier.kfuncs import KFUNCS, SYSCALL_KFUNCS

if TYPE_CHECKING:
    from pyxdp.verifier.facts import MemAccess

__all__ = ["UserspaceBackend"]



def resolve_ksyms(spec: ProgramSpec, core_btf: str | os.PathLike[str] | None,
                  btf: Btf | None = None) -> None:
    """libbpf's extern resolution, before CO-RE and the verifier: a kfunc extern that
    neither the kernel's BTF (the CO-RE target) nor pyxdp's engines know, or that the
    object (``btf``) declares with a prototype incompatible with the kernel's, fails
    the load with libbpf's line, as on the kernel backend. One pyxdp provides loads
    even where the kernel's BTF lacks it (a kfunc of a module this kernel has not
    loaded)."""
    if not spec.kfuncs:
        return
    target = core_target(core_btf)
    for k in spec.kfuncs:
        found = target.find(k.name, BtfKind.FUNC)
        if found is not None:
            check_kfunc_proto(spec.name, k.name, btf, target, found)
        elif k.name not in KFUNCS:
            raise missing_ksym(spec.name, k.name)

class UserspaceBackend:
    """pyxdp's own engines and maps; no root, no kernel."""

    name = "userspace"

    @checked(nr_cpus=(1, NR_CPUS_MAX))
    def __init__(self, *, nr_cpus: int | None = None, env: TestRunEnv | None = None,
                 engine: str = "auto", core_btf: str | os.PathLike[str] | None = None) -> None:
        """``core_btf``: the BTF file CO-RE relocations resolve against (default: the
        running kernel's, else the one pyxdp ships; :func:`pyxdp.btf.vmlinux.core_target`)."""
        self.engine = engine
        self.core_btf = core_btf
        self.nr_cpus = nr_cpus or default_nr_cpus()
        # test_run runs on the caller's CPU, as Linux's does; with a made-up CPU count
        # (fewer than the host's, where that CPU may not exist) on CPU 0.
        self.env = env or TestRunEnv(cpu=None if self.nr_cpus >= default_nr_cpus() else 0)
        self._maps: dict[str, Map] = {}
        # Loaded programs by id. User space has no fds: a program's "fd" in a devmap
        # or cpumap value is its id (Program.fd), resolved here.
        self.programs: dict[int, XdpProg] = {}
        # AF_XDP sockets of pyxdp's datapath by "fd" (PyxdpXskSocket.fd), for XSKMAPs.
        self.xsks: dict[int, object] = {}

    def create_map(self, spec: MapSpec, maps: Mapping[str, MapHandle]) -> MapHandle:
        if spec.type in LOCAL_STORAGE_TYPES and (spec.key_type is None
                                                 or spec.value_type is None):
            # bpf_local_storage_map_alloc_check: BTF for key and value
            raise MapError("map_create", errno.EINVAL,
                           f"map {spec.name!r}: a local storage map needs BTF key and value "
                           f"types")
        inner = None
        if spec.inner is not None:
            inner = self._create(spec.inner, spec.inner.name or f"{spec.name}.inner")
        flags = spec.flags | (int(MapFlag.BPF_F_RDONLY_PROG) if spec.frozen else 0)
        m = self._create(spec, spec.name, flags=flags, inner=inner)
        if hasattr(m, "ifindex_ok"):  # devmaps name devices of this backend, not the host's
            m.ifindex_ok = lambda ifindex: ifindex in self.env.netdevs
        if hasattr(m, "resolve_prog"):
            m.resolve_prog = self._entry_prog(m)
        if spec.type == BpfMapType.BPF_MAP_TYPE_PROG_ARRAY:
            m.resolve_fd = lambda fd: self._tail_call_by_fd(m, fd)  # type: ignore[attr-defined]
        elif hasattr(m, "resolve_fd"):
            m.resolve_fd = self._xsk_by_fd
        for key, value in spec.contents:
            if isinstance(value, (bytes, bytearray)):
                m.update(key, bytes(value).ljust(m.value_size, b"\0")[:m.value_size])
        self._maps[spec.name] = m
        return m  # type: ignore[return-value]

    def syscall_handle(self, m: MapHandle, spec: MapSpec) -> MapHandle:
        """``m`` as bpf(2) reaches it (what :attr:`pyxdp.collection.Map.handle` is): the
        descriptor's BPF_F_RDONLY/WRONLY and freezing apply; programs keep ``m``."""
        if not isinstance(m, Map):
            return m
        return SyscallView(m, spec.flags, spec.frozen)

    def _create(self, spec: MapSpec, name: str, *, flags: int | None = None,
                inner: Map | None = None) -> Map:
        return create_map(spec.type, spec.key_size, spec.value_size, spec.max_entries,
                          spec.flags if flags is None else flags, name=_kname(name),
                          inner=inner, nr_cpus=self.nr_cpus, map_extra=spec.map_extra)

    def cannot_load(self, spec: ProgramSpec) -> str:
        if spec.prog_type == "unspec":
            return f"libbpf 1.x knows no program type for section {spec.section!r}"
        if not spec.userspace:
            return ("pyxdp runs only XDP and syscall programs in user space; the kernel "
                    "backend loads it (backend='kernel')")
        other = [k.name for k in spec.kfuncs if k.name not in SYSCALL_KFUNCS] \
            if spec.prog_type == "syscall" else []
        if other:
            return (f"pyxdp's engines run no kfunc but the crypto context's in syscall "
                    f"programs ({other[0]}); the kernel backend loads it (backend='kernel')")
        return ""

    def load_program(self, spec: ProgramSpec, maps: Mapping[str, MapHandle],
                     btf: Btf | None = None, *,
                     facts: Mapping[int, MemAccess] | None = None) -> ProgHandle:
        why = self.cannot_load(spec)
        if why:
            raise NotSupportedError(f"program {spec.name!r} (section {spec.section!r}): {why}")
        resolve_ksyms(spec, self.core_btf, btf)
        spec = relocate(spec, btf, self.core_btf)  # (CO-RE; the disk cache keeps the result)
        ops = None
        if spec.ifindex:
            dev = self.env.netdevs.get(spec.ifindex)
            if dev is None:  # bpf_prog_dev_bound_init: no such device
                raise MapError("prog_load", errno.ENODEV,
                               f"program {spec.name!r} is bound to ifindex {spec.ifindex}, "
                               f"which names no device here")
            ops = dev.xdp_metadata_ops
        try:  # (the verifier refuses these first, with the same line)
            exception_cb = exception_callback(spec, btf)
        except ExceptionCallbackError as e:
            raise InvalidProgram(f"{spec.name}: {e.message}", rule="exception-callback"
                                 ) from None
        helpers = None
        if spec.kfuncs:  # the kfuncs' models load with the first program calling one
            from pyxdp.net.xdp_metadata import bind_kfuncs

            spec, helpers = bind_kfuncs(spec, ops, btf, self.nr_cpus)
        prog = XdpProg(spec, dict(maps), engine=self.engine,  # type: ignore[arg-type]
                       helpers=helpers, facts=facts, exception_cb=exception_cb)
        # bpf_check_tail_call (bpf_prog_select_runtime): each prog_array, devmap and
        # cpumap the program names must hold or serve its kind of program.
        for ref in dict.fromkeys(r.map_name for r in spec.map_refs):
            m = maps.get(ref)
            if getattr(m, "map_type", None) in _OWNED_BY_LOADS and \
                    not _owner_compatible(m, prog):
                raise KernelError("BPF_PROG_LOAD", errno.EINVAL,
                                  f"{spec.name}: {_owner_mismatch(m, prog)}")
        return self.register(prog)

    def register(self, prog: XdpProg) -> XdpProg:
        """Give a program built outside :meth:`load_program` (a libxdp dispatcher) its id."""
        prog.id = register_object(prog, "program")
        self.programs[prog.id] = prog
        return prog

    def _entry_prog(self, m: Any) -> Callable[[int], int | None]:
        """A devmap/cpumap entry's program "fd" (a program id here) -> its id, if it is
        a program of the expected attach type that suits the map's owner
        (``bpf_prog_map_compatible``; the kernel refuses others: EINVAL, for a cpumap
        ENOMEM). Any backend's program is one (fds are the process's,
        bpf_prog_get_type_dev takes any) while its fd is open; the entry then holds it
        (pyxdp.maps.devmap.EntryProgs)."""
        cpumap = m.map_type == BpfMapType.BPF_MAP_TYPE_CPUMAP
        want = BpfAttachType.BPF_XDP_CPUMAP if cpumap else BpfAttachType.BPF_XDP_DEVMAP

        def resolve(fd: int) -> int | None:
            prog = registered(fd, "program")
            if not isinstance(prog, XdpProg) or prog.syscall \
                    or prog.spec.expected_attach_type != want:
                return None
            if not prog_map_compatible(m, prog):
                raise _owner_error(m, prog, errno.ENOMEM if cpumap else errno.EINVAL)
            return prog.id

        return resolve

    def program_by_id(self, prog_id: int) -> XdpProg | None:
        """A program the datapath runs by id while it lives: its fd open or a
        devmap/cpumap entry holding it, whichever backend loaded it (ids are the
        process's; BPF_PROG_GET_FD_BY_ID's rule)."""
        found = live_program(prog_id)
        return found if isinstance(found, XdpProg) else None

    def xsk_register(self, sock: object) -> int:
        """A new AF_XDP socket: its "fd", the number an XSKMAP update takes."""
        fd = register_object(sock, "xsk")
        self.xsks[fd] = sock
        return fd

    def xsk_unregister(self, fd: int) -> None:
        self.xsks.pop(fd, None)
        release_object(fd)

    def _tail_call_by_fd(self, m: Any, fd: int) -> tuple[object, int]:
        """A prog_array update's program "fd" (its id here) -> (program, id); the kernel's
        answers for what names no program (bad_fd) or a syscall program (EINVAL) or one
        that does not suit the array's owner (``bpf_prog_map_compatible``: EINVAL). A
        program another Collection or Host loaded is one too: fds are the process's."""
        prog = registered(fd, "program")
        if not isinstance(prog, XdpProg):
            raise bad_fd("update", fd, errno.EINVAL, "program")
        _check_tail_target(m, prog)
        return prog, prog.id

    def _xsk_by_fd(self, fd: int) -> object:
        """An XSKMAP update's socket "fd" -> the socket, whichever Host made it: fds
        are the process's and xsk_map_update_elem takes any AF_XDP socket; a redirect
        to one bound to another device or queue (another Host's: another namespace's
        device) fails there (xsk_rcv_check: -EINVAL, the frame dropped)."""
        sock = registered(fd, "xsk")
        if sock is None:  # no AF_XDP socket: the kernel's sockfd_lookup fails
            raise bad_fd("update", fd, errno.ENOTSOCK, "AF_XDP socket")
        return sock

    def set_prog_array(self, m: MapHandle, index: int, prog: ProgHandle) -> None:
        set_prog: Any = getattr(m, "set", None)
        if set_prog is None:
            raise MapError("update", 22, "not a prog_array")
        if isinstance(prog, XdpProg):
            _check_tail_target(m, prog)
        set_prog(index, prog, getattr(prog, "id", 1))

    def set_inner_map(self, m: MapHandle, key: bytes, inner: MapHandle) -> None:
        inner_id: int = inner.id  # type: ignore[attr-defined]
        m.update(key, inner_id.to_bytes(4, "little"))

    def test_run(self, prog: ProgHandle, data_in: bytes, *, ctx_in: bytes | None = None,
                 data_size_out: int = 0, ctx_size_out: int = 0, repeat: int = 1,
                 trace: bool = False) -> TestRunResult:
        if not isinstance(prog, XdpProg):
            raise PyxdpError("test_run needs a program loaded by this backend")
        if prog.syscall:
            syscall_test_run_args(prog.spec.name, data_in, data_size_out, ctx_size_out, repeat)
            return bpf_prog_test_run_syscall(prog, ctx_in, env=self.env, trace=trace)
        if prog.spec.ifindex:  # measured on Linux 6.18: device-bound programs are refused
            raise KernelError("BPF_PROG_TEST_RUN", errno.EINVAL,
                              "a device-bound program cannot be test-run")
        return bpf_prog_test_run_xdp(prog, data_in, ctx_in=ctx_in, data_size_out=data_size_out,
                                     ctx_size_out=ctx_size_out, repeat=repeat, env=self.env,
                                     trace=trace)

    def stream_read(self, prog: ProgHandle, stream_id: int, size: int) -> bytes:
        if not isinstance(prog, XdpProg):
            raise PyxdpError("stream_read needs a program loaded by this backend")
        stream = prog.streams.get(stream_id)
        if stream is None:  # bpf_prog_stream_read: neither stdout nor stderr
            raise KernelError("BPF_PROG_STREAM_READ_BY_FD", errno.ENOENT,
                              f"stream {stream_id} is neither stdout (1) nor stderr (2)")
        return stream.read(size)

    def close(self) -> None:
        self._maps.clear()
        for prog_id in self.programs:  # their "fds" are closed (bad_fd: EBADF again)
            release_object(prog_id)


# map_type_contains_progs: the maps a program's load is checked against (a devmap_hash
# is not: only its entries' programs are).
_OWNED_BY_LOADS = frozenset({int(BpfMapType.BPF_MAP_TYPE_PROG_ARRAY),
                             int(BpfMapType.BPF_MAP_TYPE_DEVMAP),
                             int(BpfMapType.BPF_MAP_TYPE_CPUMAP)})
_owner_lock = threading.Lock()  # map->owner_lock


def _owner_key(m: Any, prog: XdpProg) -> tuple[str, bool, int]:
    """What ``map->owner`` keeps of a program and compares: its type, its
    ``xdp_has_frags`` and, for a prog_array only, its expected attach type."""
    attach = prog.spec.expected_attach_type \
        if m.map_type == BpfMapType.BPF_MAP_TYPE_PROG_ARRAY else -1
    return ("syscall" if prog.syscall else "xdp",
            bool(prog.spec.flags & BPF_F_XDP_HAS_FRAGS), attach)


def _owner_compatible(m: Any, prog: XdpProg) -> bool:
    """``__bpf_prog_map_compatible``: the first program checked against ``m`` becomes its
    owner for the map's life (its fd may close); later ones must be of the same kind."""
    key = _owner_key(m, prog)
    with _owner_lock:
        if m.prog_owner is None:
            m.prog_owner = key
            return True
        return bool(m.prog_owner == key)


def prog_map_compatible(m: Any, prog: XdpProg) -> bool:
    """``bpf_prog_map_compatible`` (a prog_array, devmap or cpumap update's program): a
    device-bound program never goes into a map (it could run on another device), else
    :func:`_owner_compatible`. Measured on Linux 6.18: a devmap or cpumap whose owner
    is a program without ``xdp.frags`` refuses a frags entry program and the reverse
    (EINVAL, a cpumap ENOMEM), and a program loaded against such a map is refused
    (BPF_PROG_LOAD: EINVAL) - a devmap_hash's loads are not checked."""
    if prog.spec.ifindex:
        return False
    return _owner_compatible(m, prog)


def _check_tail_target(m: Any, prog: XdpProg) -> None:
    """A prog_array update's program, as ``bpf_prog_map_compatible`` takes it: not a
    syscall program (the array belongs to XDP programs here), and one that suits the
    array's owner (EINVAL)."""
    if prog.syscall:
        raise MapError("update", errno.EINVAL, f"{prog.spec.name}: a syscall program "
                       "cannot be a tail call target of XDP programs")
    if not prog_map_compatible(m, prog):
        raise _owner_error(m, prog, errno.EINVAL)


def _owner_error(m: Any, prog: XdpProg, err: int) -> MapError:
    """The update's error for a program that does not suit ``m``'s owner."""
    return MapError("update", err, f"{prog.spec.name}: {_owner_mismatch(m, prog)}")


def _owner_mismatch(m: Any, prog: XdpProg) -> str:
    """Why ``prog`` does not suit ``m``'s owner, in one line."""
    if prog.spec.ifindex:
        return "a device-bound program cannot go into a map"
    owner = m.prog_owner
    key = _owner_key(m, prog)
    what = "programs"
    if owner is not None and owner[1] != key[1]:
        what = "xdp.frags programs" if owner[1] else "programs without xdp.frags"
    elif owner is not None and owner[0] != key[0]:
        what = f"{owner[0]} programs"
    elif owner is not None:
        what = f"programs of expected attach type {owner[2]}"
    return f"map {m.name!r} holds or serves {what} (bpf_prog_map_compatible)"


def _kname(name: str) -> str:
    """Map names as the kernel keeps them: 15 characters of ``[A-Za-z0-9_.]``."""
    return "".join(c if c.isalnum() or c in "_." else "_" for c in name)[:15]
