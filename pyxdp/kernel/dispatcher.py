"""libxdp's dispatcher on Linux: the dispatcher program and freplace extensions.

What libxdp's ``xdp_multiprog__generate`` and ``xdp_multiprog__link_prog`` do,
through bpf(2) only (libxdp is not needed):

* the dispatcher program of :mod:`pyxdp.dispatcher` is loaded with the BTF
  of its functions (``BPF_BTF_LOAD``, ``func_info``) so that its global
  functions ``prog0``.. can be replaced;
* each component is loaded again from its object as ``BPF_PROG_TYPE_EXT``
  against its slot (``attach_prog_fd`` and the slot's BTF id: ``kernel/bpf/
  verifier.c``'s ``bpf_check_attach_target`` checks the prototypes), over the
  maps its collection created, then linked into it with ``BPF_LINK_CREATE``
  (``bpf_tracing_prog_attach``); with one program the extension replaces
  ``xdp_dispatcher`` itself, as libxdp does;
* :meth:`KernelDispatcher.pin` leaves each extension and its link in bpffs
  under ``dispatch-IFINDEX-PROGID/progN-{prog,link}``, libxdp's layout, so
  that the chain outlives the loading process (the dispatcher itself stays
  attached through netlink).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyxdp.dispatcher import (
    DISPATCHER_NAME,
    ChainEntry,
    DispatcherProgram,
    build_dispatcher,
    chain_order,
    link_chain,
)
from pyxdp.errors import BPFUnavailable, KernelError, PyxdpError
from pyxdp.kernel.backend import KernelBackend, KernelProgram
from pyxdp.kernel.link import freplace_link, obj_get, obj_pin
from pyxdp.kernel.syscall import (
    Fd,
    TestRunResult,
    btf_load,
    prog_get_info,
    prog_load,
    prog_test_run,
)
from pyxdp.spec import ProgramSpec, XdpRunConfig
from pyxdp.uapi.bpf import BpfProgType

if TYPE_CHECKING:
    from pyxdp.collection import Program

__all__ = ["ChainedProgram", "KernelDispatcher", "bpffs_xdp_dir", "pinned_chain", "unpin_chain"]



def bpffs_xdp_dir() -> str:
    """libxdp's pin directory: ``xdp`` in the bpffs mount (``LIBXDP_BPFFS``, default
    ``/sys/fs/bpf``)."""
    return os.path.join(os.environ.get("LIBXDP_BPFFS", "/sys/fs/bpf"), "xdp")

_FUNC_INFO = struct.Struct("<II")


@dataclass(frozen=True)
class ChainedProgram:
    """One component in the kernel: its extension program and the link holding it."""

    slot: int
    name: str
    run_config: XdpRunConfig
    ext: KernelProgram
    link: Fd


class KernelDispatcher:
    """The dispatcher for kernel-backend ``programs``, loaded, with every component in
    libxdp's order. Owns the descriptors; :meth:`close` releases them.

    ``mode``: ``"freplace"`` is libxdp's scheme (an extension per slot);
    ``"linked"`` loads the chain linked into one program as :func:`~pyxdp.dispatcher.
    link_chain` builds it for pyxdp's engines (the dispatcher's code calling each
    component's code: what freplace does to the program, for kernels that refuse
    ``BPF_PROG_TYPE_EXT``); ``"auto"`` tries freplace and links when the kernel
    answers EPERM. :attr:`mode` says which one ran.
    """

    def __init__(self, programs: Sequence[Program], *, mode: str = "auto") -> None:
        if mode not in ("auto", "freplace", "linked"):
            raise PyxdpError(f"unknown dispatcher mode {mode!r} (auto, freplace or linked)")
        for p in programs:
            if not isinstance(p.backend, KernelBackend):
                raise PyxdpError(f"{p.name}: not loaded into the kernel (backend='kernel')")
        self.programs = chain_order(list(programs),
                                    lambda p: ChainEntry.of(p.spec, p.run_config))
        self.layout: DispatcherProgram = build_dispatcher(
            [ChainEntry.of(p.spec, p.run_config) for p in self.programs])
        self.chain: list[ChainedProgram] = []
        self.fd: Fd | None = None
        self._btf: Fd | None = None
        self.mode = mode
        try:
            if mode == "linked":
                self._load_linked()
                return
            try:
                self._load_freplace()
            except BPFUnavailable:
                if mode == "freplace":
                    raise
                self._release()
                self.mode = "linked"
                self._load_linked()
            else:
                self.mode = "freplace"
        except BaseException:
            self.close()
            raise

    def _load(self, spec: ProgramSpec, btf: Fd | None) -> None:
        self.fd = prog_load(
            BpfProgType.BPF_PROG_TYPE_XDP, spec.insns, spec.license, name=DISPATCHER_NAME,
            prog_flags=spec.flags, prog_btf_fd=btf or 0,
            func_info=b"".join(_FUNC_INFO.pack(f.insn_off, f.type_id)
                               for f in spec.func_info) if btf is not None else b"",
            func_info_rec_size=_FUNC_INFO.size if btf is not None else 0)
        info = prog_get_info(self.fd)
        self.id: int = info.id
        self.tag: str = info.tag_hex

    def _load_freplace(self) -> None:
        self._btf = btf_load(self.layout.btf.encode())
        self._load(self.layout.spec, self._btf)
        assert self.fd is not None
        for slot, p in enumerate(self.programs):
            backend = p.backend
            assert isinstance(backend, KernelBackend)
            target = self.layout.target_btf_id(slot)
            ext = backend.load_program(p.spec, backend.map_handles, backend.btf,
                                       replace_func=(self.fd, target))
            self.chain.append(ChainedProgram(slot, p.name, p.run_config or XdpRunConfig(),
                                             ext, freplace_link(ext, self.fd, target)))

    def _load_linked(self) -> None:
        comps: list[tuple[ProgramSpec, dict[str, object], dict[int, object]]] = []
        for p in self.programs:
            backend = p.backend
            assert isinstance(backend, KernelBackend)
            # The kernel resolves the component's kfuncs and CO-RE as for a load of its own.
            spec, _ = backend._resolve_kernel_refs(p.spec, backend.btf)
            bound = backend._bind_maps(spec, backend.map_handles)
            comps.append((spec.copy(insns=tuple(bound), map_refs=()), {}, {}))
        linked, _, _ = link_chain(self.layout, comps)
        # One program from several objects: no single BTF describes its functions,
        # so it loads without func/line info (its functions verified as static ones).
        self._load(linked.copy(func_info=(), line_info=()), None)

    def _release(self) -> None:
        for c in reversed(self.chain):
            c.link.close()
            c.ext.close()
        self.chain = []
        for fd in (self.fd, self._btf):
            if fd is not None:
                fd.close()
        self.fd = self._btf = None

    @property
    def frags(self) -> bool:
        """Whether the dispatcher was loaded frags-aware (every component is)."""
        return self.layout.frags

    def test_run(self, data_in: bytes, **kw: object) -> TestRunResult:
        """BPF_PROG_TEST_RUN of the dispatcher: the whole chain on one packet."""
        if self.fd is None:
            raise PyxdpError("the dispatcher is closed")
        return prog_test_run(self.fd, data_in, **kw)  # type: ignore[arg-type]

    def pin(self, ifindex: int, bpffs_dir: str | None = None) -> str:
        """Pin the chain as libxdp does (``progN-link`` and ``progN-prog`` under
        ``dispatch-IFINDEX-ID``) so that it outlives this process; returns the directory.
        A linked dispatcher holds its components' code and maps itself: only
        ``progN-prog`` is pinned, the component loaded on its own, for ``status``."""
        path = os.path.join(bpffs_dir or bpffs_xdp_dir(), f"dispatch-{ifindex}-{self.id}")
        made: list[str] = []  # what makedirs creates, removed again when pinning fails
        d = os.path.abspath(path)
        while not os.path.lexists(d):
            made.append(d)
            d = os.path.dirname(d)
        os.makedirs(path, exist_ok=True)
        objs: list[tuple[str, int]] = []
        if self.mode == "freplace":
            for c in self.chain:
                objs += [(f"prog{c.slot}-link", c.link.fd), (f"prog{c.slot}-prog", c.ext.fd)]
        else:
            for slot, p in enumerate(self.programs):
                objs.append((f"prog{slot}-prog", p.handle.fd))  # type: ignore[attr-defined]
        done: list[str] = []
        try:
            for name, fd in objs:
                obj_pin(fd, os.path.join(path, name))
                done.append(os.path.join(path, name))
        except BaseException:
            for f in done:
                os.unlink(f)
            for d in made:  # deepest first: a LIBXDP_BPFFS that is no bpffs keeps no litter
                os.rmdir(d)
            raise
        return path

    def close(self) -> None:
        self._release()

    def __enter__(self) -> KernelDispatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pinned_chain(ifindex: int, prog_id: int, bpffs_dir: str | None = None
                 ) -> list[tuple[int, int, str, str]] | None:
    """The components libxdp's layout pinned for dispatcher ``prog_id`` on ``ifindex``:
    ``(slot, prog id, name, tag)`` in slot order; None when nothing is pinned there."""
    path = os.path.join(bpffs_dir or bpffs_xdp_dir(), f"dispatch-{ifindex}-{prog_id}")
    if not os.path.isdir(path):
        return None
    out = []
    slots = sorted(int(n[4:-5]) for n in os.listdir(path)
                   if n.startswith("prog") and n.endswith("-prog") and n[4:-5].isdigit())
    for slot in slots:
        try:
            with obj_get(os.path.join(path, f"prog{slot}-prog")) as fd:
                info = prog_get_info(fd)
        except KernelError:
            continue
        out.append((slot, info.id, info.name, info.tag_hex))
    return out


def unpin_chain(ifindex: int, prog_id: int, bpffs_dir: str | None = None) -> None:
    """Remove what :meth:`KernelDispatcher.pin` left (the links go with their last pin)."""
    path = os.path.join(bpffs_dir or bpffs_xdp_dir(), f"dispatch-{ifindex}-{prog_id}")
    if not os.path.isdir(path):
        return
    for n in os.listdir(path):
        os.unlink(os.path.join(path, n))
    os.rmdir(path)
