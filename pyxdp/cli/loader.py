"""``pyxdp load|unload|status``: xdp-loader's commands, on the kernel's real interfaces.

* ``load [-m native|skb|hw] [-s SECTION] [-n NAME] [-p PIN] [-F] IFNAME OBJ``
  loads the object into the kernel (:class:`~pyxdp.collection.Collection`
  over the kernel backend) and attaches one of its programs through
  rtnetlink (``RTM_SETLINK``/``IFLA_XDP``, net/core/rtnetlink.c). That
  attachment holds a reference on the program, so the program (and the maps
  it uses) stays in the kernel after this process exits. ``-p`` also pins the
  program and the object's maps in a bpf filesystem directory, so user space
  can find the maps later. Without ``-F`` the attach sets
  ``XDP_FLAGS_UPDATE_IF_NOEXIST``: an attached program is never replaced by
  accident.
* ``load ... IFNAME OBJ OBJ...`` attaches one program of each object as
  libxdp does: its dispatcher (:mod:`pyxdp.dispatcher`) runs them in
  ``XDP_RUN_CONFIG`` order with their chain-call actions, and the chain is
  pinned in libxdp's bpffs layout (``$LIBXDP_BPFFS/xdp/dispatch-IFINDEX-ID``,
  :mod:`pyxdp.kernel.dispatcher`) so that it outlives this process.
* ``unload IFNAME (-a | -i ID)`` detaches every program of the interface,
  or the one with that id (with ``XDP_FLAGS_REPLACE`` and the program as
  the expected one, so a program swapped in meanwhile is left alone). A mode
  held by a bpf_link is released with ``BPF_LINK_DETACH``.
* ``status [IFNAME]`` prints every interface with its XDP programs: mode, id,
  name and tag (``BPF_PROG_GET_FD_BY_ID`` + ``BPF_OBJ_GET_INFO_BY_FD``), and
  whether a bpf_link holds it; a dispatcher's pinned chain is listed under it.

Every command goes through a :class:`KernelInterfaces` target; a userspace
pyxdp device (``--host``) can later be another target with the same three
operations, and the argument shapes stay.

Errors are one line, prefixed by the command: ``pyxdp: load: eth9: no such
interface``, ``pyxdp: load: needs root: ...``.
"""

from __future__ import annotations

import errno as _errno
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyxdp.cli.options import MODES as _MODES
from pyxdp.cli.options import normalise_mode
from pyxdp.errors import BPFUnavailable, KernelError, PyxdpError

if TYPE_CHECKING:
    from pyxdp.collection import Map
    from pyxdp.kernel.backend import KernelProgram
    from pyxdp.kernel.link import LinkInfo
    from pyxdp.kernel.netlink import XdpQuery
    from pyxdp.spec import CollectionSpec, ProgramSpec

__all__ = ["KernelInterfaces", "LoaderError", "cmd_load", "cmd_status", "cmd_unload"]

# xdp-loader's mode names for -m and in the status table (pyxdp.cli.options's).
MODES = _MODES
_SHOWN = {"native": "native", "generic": "skb", "hw": "hw"}


class LoaderError(PyxdpError):
    """A load/unload/status failure, already phrased for the command line."""


@contextmanager
def _errors(command: str) -> Iterator[None]:
    """Prefix every pyxdp error with the command; privilege errors say "needs root"."""
    try:
        yield
    except LoaderError as e:
        raise LoaderError(f"{command}: {e}") from e
    except BPFUnavailable as e:
        raise LoaderError(f"{command}: needs root: {e}") from e
    except PyxdpError as e:
        raise LoaderError(f"{command}: {e}") from e


# --------------------------------------------------------------------------
# The target: the running kernel's interfaces (this network namespace)
# --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class AttachedProgram:
    """One program attached to an interface, as ``status`` prints it."""

    ifname: str
    mode: str  # native, generic or hw
    prog_id: int
    name: str = ""
    tag: str = ""
    link_id: int = 0  # the bpf_link holding it; 0: netlink; -1: unknown (not root);
    # -2: a component of the libxdp dispatcher listed before it, in slot ``slot``
    slot: int = -1


class KernelInterfaces:
    """The kernel's interfaces as a load/unload/status target."""

    def ifindex(self, ifname: str) -> int:
        from pyxdp.kernel.netlink import ifindex_of
        return ifindex_of(ifname)

    def load(self, ifname: str, spec: CollectionSpec, prog: ProgramSpec, *, mode: str,
             pin: str | None, force: bool) -> AttachedProgram:
        from pyxdp.collection import Collection
        from pyxdp.kernel.backend import KernelProgram
        from pyxdp.kernel.netlink import NetlinkError, XdpFlag, xdp_attach, xdp_query

        ifindex = self.ifindex(ifname)
        with Collection(spec, "kernel") as coll:
            handle = coll.programs[prog.name].handle
            if not isinstance(handle, KernelProgram):  # the kernel backend's own type
                raise LoaderError(f"{prog.name}: not a kernel program")
            flags = 0 if force else XdpFlag.XDP_FLAGS_UPDATE_IF_NOEXIST
            kmode = "generic" if mode == "skb" else mode
            pinned = _pin_all(coll.maps, handle, pin) if pin is not None else []
            try:
                xdp_attach(ifindex, handle, mode=kmode, flags=flags)
            except BaseException as e:
                _unpin(pinned)
                if not isinstance(e, NetlinkError):
                    raise
                if e.errno == _errno.EBUSY and not force:
                    now = xdp_query(ifindex).programs
                    held = ", ".join(f"{_SHOWN[m]} id {i}" for m, i in now.items())
                    raise LoaderError(f"{ifname}: {e} ({held}); unload it first or use "
                                      f"--force") from None
                raise LoaderError(f"{ifname}: {e}") from None
            # Closing the collection now drops our descriptors; the
            # attachment keeps the program and its maps alive.
            return AttachedProgram(ifname, kmode, handle.id, handle.kernel_name, handle.tag)

    def load_multi(self, ifname: str, chosen: list[tuple[CollectionSpec, ProgramSpec]], *,
                   mode: str, force: bool) -> tuple[AttachedProgram, list[AttachedProgram]]:
        """Several programs as libxdp attaches them: the dispatcher on the interface,
        the chain pinned in bpffs (:mod:`pyxdp.kernel.dispatcher`). Returns the
        dispatcher and its components in order."""
        from contextlib import ExitStack

        from pyxdp.collection import Collection
        from pyxdp.kernel.dispatcher import KernelDispatcher, unpin_chain
        from pyxdp.kernel.netlink import NetlinkError, XdpFlag, xdp_attach

        ifindex = self.ifindex(ifname)
        with ExitStack() as stack:
            colls = [stack.enter_context(Collection(spec, "kernel")) for spec, _ in chosen]
            disp = stack.enter_context(KernelDispatcher(
                [c.programs[p.name] for c, (_, p) in zip(colls, chosen, strict=True)]))
            try:
                path = disp.pin(ifindex)
            except OSError as e:
                raise LoaderError(f"cannot pin the chain in bpffs ({e.strerror}); mount bpffs "
                                  f"or set LIBXDP_BPFFS") from None
            flags = 0 if force else XdpFlag.XDP_FLAGS_UPDATE_IF_NOEXIST
            kmode = "generic" if mode == "skb" else mode
            try:
                xdp_attach(ifindex, disp.fd, mode=kmode, flags=flags)  # type: ignore[arg-type]
            except NetlinkError as e:
                unpin_chain(ifindex, disp.id)
                raise LoaderError(f"{ifname}: {e}") from None
            del path
            comps = [AttachedProgram(ifname, kmode, p.handle.id,  # type: ignore[attr-defined]
                                     p.name, p.handle.tag)  # type: ignore[attr-defined]
                     for p in disp.programs]
            return AttachedProgram(ifname, kmode, disp.id, "xdp_dispatcher", disp.tag), comps

    def unload(self, ifname: str, prog_id: int | None) -> list[AttachedProgram]:
        from pyxdp.kernel.netlink import NetlinkError, xdp_detach, xdp_query
        from pyxdp.kernel.syscall import prog_get_fd_by_id

        ifindex = self.ifindex(ifname)
        attached = xdp_query(ifindex).programs
        if not attached:
            raise LoaderError(f"{ifname}: no XDP program attached")
        if prog_id is not None:
            attached = {m: i for m, i in attached.items() if i == prog_id}
            if not attached:
                now = ", ".join(f"{_SHOWN[m]} id {i}"
                                for m, i in xdp_query(ifindex).programs.items())
                raise LoaderError(f"{ifname}: program {prog_id} is not attached ({now})")
        done: list[AttachedProgram] = []
        for mode, pid in attached.items():
            try:
                if prog_id is not None:
                    with prog_get_fd_by_id(pid) as fd:
                        xdp_detach(ifindex, mode=mode, expected_fd=fd.fd)
                else:
                    xdp_detach(ifindex, mode=mode)
            except NetlinkError as e:
                if e.errno != _errno.EBUSY or not _detach_link(ifindex, pid):
                    raise LoaderError(f"{ifname}: {e}") from None
            from pyxdp.kernel.dispatcher import unpin_chain
            unpin_chain(ifindex, pid)  # a libxdp dispatcher's pinned chain goes with it
            done.append(AttachedProgram(ifname, mode, pid))
        return done

    def status(self, ifname: str | None) -> list[tuple[XdpQuery, list[AttachedProgram]]]:
        from pyxdp.kernel.netlink import xdp_query, xdp_query_all

        queries = [xdp_query(self.ifindex(ifname))] if ifname else xdp_query_all()
        links = _xdp_links_or_none() if any(q.programs for q in queries) else []
        out: list[tuple[XdpQuery, list[AttachedProgram]]] = []
        for q in queries:
            progs = []
            for mode, pid in q.programs.items():
                name, tag = _prog_name_tag(pid)
                link_id = -1 if links is None else next(
                    (li.id for li in links if li.ifindex == q.ifindex and li.prog_id == pid), 0)
                progs.append(AttachedProgram(q.ifname or ifname or "", mode, pid, name, tag,
                                             link_id))
                progs += _chain_of(q.ifname or ifname or "", q.ifindex, mode, pid)
            out.append((q, progs))
        return out


def _chain_of(ifname: str, ifindex: int, mode: str, prog_id: int) -> list[AttachedProgram]:
    """The components libxdp's layout pinned for dispatcher ``prog_id``, as status rows
    (``link_id`` -2 marks a component)."""
    from pyxdp.kernel.dispatcher import pinned_chain
    try:
        chain = pinned_chain(ifindex, prog_id)
    except OSError:
        return []
    return [AttachedProgram(ifname, mode, pid, name, tag, -2, slot)
            for slot, pid, name, tag in chain or ()]


def _pin_all(maps: Mapping[str, Map], prog: KernelProgram, pin: str) -> list[str]:
    """Pin the program and the object's maps (not global data) under directory ``pin``.

    Returns what it created (files, then the directory if it made it), for
    :func:`_unpin` to undo when the load fails later; a failure here undoes
    its own partial work.
    """
    from pyxdp.kernel.link import obj_pin
    from pyxdp.kernel.maps import KernelMap

    created: list[str] = []
    if not os.path.isdir(pin):
        if os.path.lexists(pin):
            raise LoaderError(f"{pin}: not a directory")
        d = os.path.abspath(pin)
        while not os.path.lexists(d):  # every directory makedirs makes, deepest first
            created.append(d)
            d = os.path.dirname(d)
        try:
            os.makedirs(pin)
        except OSError as e:
            raise LoaderError(f"{pin}: {e.strerror}") from None
    try:
        objs: list[tuple[str, int]] = [(prog.name, prog.fd)]
        objs += [(mname, m.handle.fd) for mname, m in maps.items()
                 # libbpf does not pin internal (global data) maps either
                 if not m.spec.is_global_data and isinstance(m.handle, KernelMap)]
        for oname, fd in objs:
            path = os.path.join(pin, oname)
            obj_pin(fd, path)
            created.insert(0, path)  # files before the directory holding them
    except BaseException:
        _unpin(created)
        raise
    return created


def _unpin(paths: list[str]) -> None:
    for path in paths:
        try:
            if os.path.isdir(path):
                os.rmdir(path)
            else:
                os.unlink(path)
        except OSError:
            pass  # best effort: the load error is what the user needs to see


def _detach_link(ifindex: int, prog_id: int) -> bool:
    """BPF_LINK_DETACH the XDP link holding ``prog_id`` on ``ifindex``; False if none does."""
    from pyxdp.kernel.link import XdpLink, xdp_links

    # A link reports an ifindex without its namespace, so match the program too.
    for info in xdp_links():
        if info.ifindex == ifindex and info.prog_id == prog_id:
            with XdpLink.from_id(info.id) as link:
                link.detach()
            return True
    return False


def _xdp_links_or_none() -> list[LinkInfo] | None:
    from pyxdp.kernel.link import xdp_links
    try:
        return xdp_links()
    except KernelError:  # walking link ids needs CAP_SYS_ADMIN; status works without
        return None


def _prog_name_tag(prog_id: int) -> tuple[str, str]:
    from pyxdp.kernel.syscall import prog_get_fd_by_id, prog_get_info
    try:
        with prog_get_fd_by_id(prog_id) as fd:
            info = prog_get_info(fd)
    except KernelError:  # not root, or the program went away meanwhile
        return "", ""
    return info.name, info.tag_hex


# --------------------------------------------------------------------------
# Program choice
# --------------------------------------------------------------------------

def _choose(spec: CollectionSpec, obj: str, section: str | None, name: str | None
            ) -> ProgramSpec:
    """The program to attach: by name (-n), by section (-s), else the first plain XDP one."""
    from pyxdp.spec import BPF_XDP

    progs = list(spec.programs.values())
    if name is not None:
        found = [p for p in progs if p.name == name]
        if not found:
            raise LoaderError(f"{obj}: no program named {name!r} "
                              f"(programs: {', '.join(p.name for p in progs)})")
        progs = found
    if section is not None:
        found = [p for p in progs if p.section == section]
        if not found:
            raise LoaderError(f"{obj}: no program in section {section!r} "
                              f"(sections: {', '.join(sorted({p.section for p in progs}))})")
        if len(found) > 1:
            raise LoaderError(f"{obj}: section {section!r} holds {len(found)} programs "
                              f"({', '.join(p.name for p in found)}): name one with -n")
        progs = found
    # Devmap/cpumap programs (SEC("xdp/devmap")...) cannot go on an interface.
    usable = [p for p in progs if p.prog_type == "xdp" and p.expected_attach_type == BPF_XDP]
    if not usable and (name is not None or section is not None):
        p = progs[0]
        if p.prog_type != "xdp":
            raise LoaderError(f"{obj}: program {p.name} (section {p.section}) is a "
                              f"{p.prog_type} program, not XDP")
        raise LoaderError(f"{obj}: program {p.name} (section {p.section}) runs from a "
                          f"device or CPU map; it cannot be attached to an interface")
    if not usable:
        raise LoaderError(f"{obj}: no XDP program to attach to an interface")
    return usable[0]


# --------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------

def cmd_load(ifname: str, obj: str | Sequence[str], *, mode: str = "native",
             section: str | None = None, name: str | None = None, pin: str | None = None,
             force: bool = False, target: KernelInterfaces | None = None) -> int:
    """``pyxdp load``: attach a program of ``obj`` to ``ifname``; prints what was attached.
    Several objects (one program of each, chosen by the same -s/-n) go through libxdp's
    dispatcher, in their XDP_RUN_CONFIG order."""
    from pyxdp.cli.prog import _object
    from pyxdp.elf import load_collection_spec

    objs = [obj] if isinstance(obj, str) else list(obj)
    where = target or KernelInterfaces()
    with _errors("load"):
        where.ifindex(ifname)  # an unknown interface is reported before any loading
        mode = normalise_mode(mode)
        if mode not in MODES:
            raise LoaderError(f"unknown mode {mode!r} ({', '.join(MODES)})")
        chosen = []
        for o in objs:
            spec = load_collection_spec(_object(o))
            chosen.append((spec, _choose(spec, o, section, name)))
        if len(chosen) > 1:
            if pin is not None:
                raise LoaderError("-p pins one program's maps; several programs are pinned "
                                  "by the dispatcher in libxdp's bpffs layout")
            disp, comps = where.load_multi(ifname, chosen, mode=mode, force=force)
        else:
            got = where.load(ifname, chosen[0][0], chosen[0][1], mode=mode, pin=pin,
                             force=force)
    from pyxdp.cli.options import STYLE, emit
    if len(chosen) == 1:
        prog = chosen[0][1]
        if STYLE.json:
            emit({"ifname": ifname, "name": got.name or prog.name, "id": got.prog_id,
                  "tag": got.tag, "mode": _SHOWN[got.mode], "pinned": pin})
            return 0
        print(f"{ifname}: {got.name or prog.name} (id {got.prog_id}, tag {got.tag}) "
              f"attached in {_SHOWN[got.mode]} mode")
        return 0
    if STYLE.json:
        emit({"ifname": ifname, "name": "xdp_dispatcher", "id": disp.prog_id, "tag": disp.tag,
              "mode": _SHOWN[disp.mode],
              "programs": [{"name": c.name, "id": c.prog_id, "tag": c.tag} for c in comps]})
        return 0
    print(f"{ifname}: xdp_dispatcher (id {disp.prog_id}, tag {disp.tag}) attached in "
          f"{_SHOWN[disp.mode]} mode with {len(comps)} programs:")
    for k, c in enumerate(comps):
        print(f"  prog{k}: {c.name} (id {c.prog_id}, tag {c.tag})")
    return 0


def cmd_unload(ifname: str, *, all_modes: bool = False, prog_id: int | None = None,
               target: KernelInterfaces | None = None) -> int:
    """``pyxdp unload``: detach every program (-a) or the one with id ``prog_id`` (-i)."""
    where = target or KernelInterfaces()
    with _errors("unload"):
        if all_modes == (prog_id is not None):
            raise LoaderError("give exactly one of -a and -i ID")
        done = where.unload(ifname, prog_id)
    from pyxdp.cli.options import STYLE, emit
    if STYLE.json:
        emit([{"ifname": ifname, "id": d.prog_id, "mode": _SHOWN[d.mode]} for d in done])
        return 0
    for d in done:
        print(f"{ifname}: program {d.prog_id} detached ({_SHOWN[d.mode]} mode)")
    return 0


def cmd_status(ifname: str | None = None, *, target: KernelInterfaces | None = None) -> int:
    """``pyxdp status``: a table of interfaces and their XDP programs."""
    where = target or KernelInterfaces()
    with _errors("status"):
        rows = where.status(ifname)
    from pyxdp.cli.options import STYLE, emit
    if STYLE.json:
        emit([{"ifname": q.ifname or ifname or str(q.ifindex), "ifindex": q.ifindex,
               "programs": [{"mode": _SHOWN[p.mode], "id": p.prog_id, "name": p.name,
                             "tag": p.tag, "link_id": p.link_id if p.link_id > 0 else None}
                            for p in progs]} for q, progs in rows])
        return 0
    out = sys.stdout
    out.write("CURRENT XDP PROGRAM STATUS:\n\n")
    out.write(f"{'Interface':<17}{'Mode':<8}{'ID':>8}  {'Name':<16}{'Tag':<18}Attached by\n")
    out.write("-" * 78 + "\n")
    for q, progs in rows:
        name = q.ifname or ifname or str(q.ifindex)
        if not progs:
            out.write(f"{name:<17}<No XDP program loaded!>\n")
            continue
        for p in progs:
            if p.link_id == -2:  # a dispatcher's component, under it
                out.write(f"{' ':<17}{'=> ' + str(p.slot):<8}{p.prog_id:>8}  "
                          f"{p.name or '-':<16}{p.tag or '-':<18}dispatcher\n")
                continue
            by = {0: "netlink", -1: "-"}.get(p.link_id, f"bpf_link {p.link_id}")
            out.write(f"{name:<17}{_SHOWN[p.mode]:<8}{p.prog_id:>8}  {p.name or '-':<16}"
                      f"{p.tag or '-':<18}{by}\n")
    return 0
