"""XDP through a bpf_link, and pinning BPF objects in bpffs.

The kernel side modelled:

* ``kernel/bpf/syscall.c``: ``link_create`` (``BPF_LINK_CREATE`` with
  ``attach_type`` ``BPF_XDP``, ``target_ifindex`` and ``flags``),
  ``link_update`` (``BPF_LINK_UPDATE``, ``BPF_F_REPLACE`` with
  ``old_prog_fd``), ``link_detach`` (``BPF_LINK_DETACH``), the
  ``BPF_LINK_GET_NEXT_ID`` / ``BPF_LINK_GET_FD_BY_ID`` walk and
  ``bpf_link_get_info_by_fd``; ``bpf_obj_pin`` / ``bpf_obj_get``
  (``BPF_OBJ_PIN``, ``BPF_OBJ_GET``, ``kernel/bpf/inode.c``);
* ``net/core/dev.c``: ``bpf_xdp_link_attach`` (only mode bits in the link's
  flags; EBUSY over a program attached through netlink), ``bpf_xdp_link_update``
  (EPERM when ``old_prog`` is not the attached one), ``bpf_xdp_link_detach``.

A link owns the attachment: while it exists netlink cannot replace the
program in that mode, and closing the last descriptor of an unpinned link
detaches the program (unlike a netlink attachment, which outlives the
process). :class:`XdpLink` is that descriptor.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import os
from dataclasses import dataclass
from typing import Final

from pyxdp.errors import BPFUnavailable, KernelError, PyxdpError
from pyxdp.kernel.netlink import FdLike, fd_of, ifindex_of, mode_flag
from pyxdp.kernel.syscall import Fd, FdObject, _attr, _error, _get32, _put32, _put64, _raw
from pyxdp.uapi.bpf import AttachFlag, BpfAttachType, BpfCmd, BpfLinkType

__all__ = [
    "LinkInfo",
    "XdpLink",
    "link_get_fd_by_id",
    "link_get_info",
    "freplace_link",
    "link_get_next_id",
    "obj_get",
    "obj_pin",
    "xdp_link_attach",
    "xdp_links",
]

# union bpf_attr prefixes (include/uapi/linux/bpf.h), rounded up to 8.
_LINK_CREATE_SIZE: Final = 48  # prog_fd @0, target_ifindex @4, attach_type @8, flags @12
_LINK_UPDATE_SIZE: Final = 16  # link_fd @0, new_prog_fd @4, flags @8, old_prog_fd @12
_LINK_DETACH_SIZE: Final = 8  # link_fd @0
_OBJ_SIZE: Final = 24  # pathname @0, bpf_fd @8, file_flags @12, path_fd @16
_GET_ID_SIZE: Final = 16  # start_id/link_id @0, next_id @4, open_flags @8
_INFO_SIZE: Final = 16  # bpf_fd @0, info_len @4, info @8
# struct bpf_link_info: type @0, id @4, prog_id @8, then a union aligned to 8
# whose xdp member is { __u32 ifindex; } at @16.
_LINK_INFO_SIZE: Final = 64


def _fail(cmd: BpfCmd, err: int, detail: str = "") -> KernelError:
    if err == _errno.EPERM and os.geteuid() != 0:
        return BPFUnavailable(cmd.name, err, detail or "not root")
    return _error(cmd, err, detail)


def _call(cmd: BpfCmd, attr: ctypes.Array[ctypes.c_char], detail: str = "") -> int:
    ret, err = _raw(cmd, attr)
    if ret < 0:
        raise _fail(cmd, err, detail)
    return ret


# --------------------------------------------------------------------------
# Link ids and info
# --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class LinkInfo:
    """``struct bpf_link_info`` for the fields XDP uses (``ifindex`` 0: auto-detached)."""

    type: int
    id: int
    prog_id: int
    ifindex: int

    @property
    def is_xdp(self) -> bool:
        return self.type == BpfLinkType.BPF_LINK_TYPE_XDP


def link_get_info(fd: FdLike) -> LinkInfo:
    """BPF_OBJ_GET_INFO_BY_FD on a link."""
    info = ctypes.create_string_buffer(_LINK_INFO_SIZE)
    attr = _attr(_INFO_SIZE)
    _put32(attr, 0, fd_of(fd))
    _put32(attr, 4, len(info))
    _put64(attr, 8, ctypes.addressof(info))
    _call(BpfCmd.BPF_OBJ_GET_INFO_BY_FD, attr)
    kind = _get32(info, 0)
    # The union member is only XDP's for XDP links; other types keep other data there.
    ifindex = _get32(info, 16) if kind == BpfLinkType.BPF_LINK_TYPE_XDP else 0
    return LinkInfo(type=kind, id=_get32(info, 4), prog_id=_get32(info, 8), ifindex=ifindex)


def link_get_next_id(start_id: int = 0) -> int | None:
    """BPF_LINK_GET_NEXT_ID: the smallest link id above ``start_id``; None past the last."""
    attr = _attr(_GET_ID_SIZE)
    _put32(attr, 0, start_id)
    ret, err = _raw(BpfCmd.BPF_LINK_GET_NEXT_ID, attr)
    if ret < 0:
        if err == _errno.ENOENT:
            return None
        raise _fail(BpfCmd.BPF_LINK_GET_NEXT_ID, err)
    return _get32(attr, 4)


def link_get_fd_by_id(link_id: int) -> Fd:
    """BPF_LINK_GET_FD_BY_ID: a new descriptor for an existing link."""
    attr = _attr(_GET_ID_SIZE)
    _put32(attr, 0, link_id)
    return Fd(_call(BpfCmd.BPF_LINK_GET_FD_BY_ID, attr), "link")


def xdp_links(iface: str | int | None = None) -> list[LinkInfo]:
    """Every XDP link of the system (or of one interface of this netns)."""
    ifindex = None if iface is None else ifindex_of(iface)
    found: list[LinkInfo] = []
    link_id = link_get_next_id(0)
    while link_id is not None:
        try:
            with link_get_fd_by_id(link_id) as fd:
                info = link_get_info(fd)
        except KernelError as e:
            if e.errno != _errno.ENOENT:  # released between the two calls
                raise
        else:
            # An ifindex alone is ambiguous across namespaces; callers that
            # filter by interface run in the namespace they mean.
            if info.is_xdp and (ifindex is None or info.ifindex == ifindex):
                found.append(info)
        link_id = link_get_next_id(link_id)
    return found


# --------------------------------------------------------------------------
# bpffs
# --------------------------------------------------------------------------

def _path_attr(path: str, fd: int, flags: int) -> tuple[ctypes.Array[ctypes.c_char],
                                                         ctypes.Array[ctypes.c_char]]:
    name = ctypes.create_string_buffer(os.fsencode(path))
    attr = _attr(_OBJ_SIZE)
    _put64(attr, 0, ctypes.addressof(name))
    _put32(attr, 8, fd)
    _put32(attr, 12, flags)
    return attr, name  # keep the name buffer alive with the attr


def obj_pin(fd: FdLike, path: str) -> None:
    """BPF_OBJ_PIN: give a program, map or link a name in a bpf filesystem."""
    attr, _name = _path_attr(path, fd_of(fd), 0)
    ret, err = _raw(BpfCmd.BPF_OBJ_PIN, attr)
    if ret >= 0:
        return
    if err == _errno.EPERM and os.geteuid() == 0:
        # bpf_obj_do_pin refuses a directory that is not bpffs with EPERM.
        raise KernelError(BpfCmd.BPF_OBJ_PIN.name, err,
                          f"{path}: not on a bpf filesystem (mount -t bpf bpf DIR)")
    raise _fail(BpfCmd.BPF_OBJ_PIN, err, path)


def obj_get(path: str, flags: int = 0) -> Fd:
    """BPF_OBJ_GET: a new descriptor for a pinned object (``flags``: BPF_F_RDONLY...)."""
    attr, _name = _path_attr(path, 0, flags)
    ret, err = _raw(BpfCmd.BPF_OBJ_GET, attr)
    if ret < 0:
        raise _fail(BpfCmd.BPF_OBJ_GET, err, path)
    target = os.readlink(f"/proc/self/fd/{ret}")
    # A link's anon inode is "bpf_link" from BPF_LINK_CREATE (bpf_link_prime)
    # but "bpf-link" from BPF_OBJ_GET and GET_FD_BY_ID (bpf_link_new_fd).
    kind = {"anon_inode:bpf-prog": "prog", "anon_inode:bpf-map": "map",
            "anon_inode:bpf_link": "link", "anon_inode:bpf-link": "link"}.get(target, "")
    return Fd(ret, kind)


# --------------------------------------------------------------------------
# The XDP link
# --------------------------------------------------------------------------

class XdpLink(FdObject):
    """An XDP program attached through a bpf_link; owns the link's descriptor.

    :meth:`update` swaps the program atomically (``BPF_LINK_UPDATE``);
    :meth:`detach` uninstalls it while the descriptor stays valid (the link
    is then defunct, as after its device disappears); :meth:`close` drops
    the descriptor, which detaches the program unless the link is pinned or
    another descriptor of it exists.
    """

    def __init__(self, fd: Fd, ifindex: int = 0) -> None:
        self._fd = fd
        info = link_get_info(fd)
        if not info.is_xdp:
            fd.close()
            raise PyxdpError(f"link {info.id} is not an XDP link (type {info.type})")
        self.id: int = info.id
        self.ifindex: int = ifindex or info.ifindex

    @classmethod
    def attach(cls, iface: str | int, prog: FdLike, *, mode: str | None = None,
               flags: int = 0) -> XdpLink:
        """BPF_LINK_CREATE with attach type BPF_XDP on ``iface``.

        ``mode`` as for :func:`~pyxdp.kernel.netlink.xdp_attach`; the kernel
        accepts only mode bits in a link's flags ("Invalid XDP flags for BPF
        link attachment", EINVAL) and answers EBUSY when a program is already
        attached through netlink in that mode.
        """
        ifindex = ifindex_of(iface)
        attr = _attr(_LINK_CREATE_SIZE)
        _put32(attr, 0, fd_of(prog))
        _put32(attr, 4, ifindex)
        _put32(attr, 8, BpfAttachType.BPF_XDP)
        _put32(attr, 12, int(flags) | mode_flag(mode))
        fd = Fd(_call(BpfCmd.BPF_LINK_CREATE, attr), "link")
        try:
            return cls(fd, ifindex)
        except BaseException:
            fd.close()
            raise

    @classmethod
    def from_id(cls, link_id: int) -> XdpLink:
        """A new descriptor for an existing XDP link."""
        return cls(link_get_fd_by_id(link_id))

    @classmethod
    def from_pinned(cls, path: str) -> XdpLink:
        """The XDP link pinned at ``path``."""
        fd = obj_get(path)
        if fd.kind != "link":
            fd.close()
            raise PyxdpError(f"{path} is a pinned {fd.kind or 'object'}, not a link")
        return cls(fd)

    def info(self) -> LinkInfo:
        """The link now: ``prog_id`` attached, ``ifindex`` (0 once detached)."""
        return link_get_info(self.fd)

    @property
    def prog_id(self) -> int:
        return self.info().prog_id

    def update(self, prog: FdLike, *, old_prog: FdLike | None = None
               ) -> None:
        """BPF_LINK_UPDATE: attach ``prog`` instead, atomically.

        With ``old_prog`` the swap happens only if that program is the one
        attached now (``BPF_F_REPLACE``; EPERM otherwise). A detached link
        answers ENOLINK.
        """
        attr = _attr(_LINK_UPDATE_SIZE)
        _put32(attr, 0, self.fd)
        _put32(attr, 4, fd_of(prog))
        if old_prog is not None:
            _put32(attr, 8, AttachFlag.BPF_F_REPLACE)
            _put32(attr, 12, fd_of(old_prog))
        _call(BpfCmd.BPF_LINK_UPDATE, attr)

    def detach(self) -> None:
        """BPF_LINK_DETACH: uninstall the program now; the descriptor stays open."""
        attr = _attr(_LINK_DETACH_SIZE)
        _put32(attr, 0, self.fd)
        _call(BpfCmd.BPF_LINK_DETACH, attr)

    def pin(self, path: str) -> None:
        """BPF_OBJ_PIN: the link (and so the attachment) outlives this process."""
        obj_pin(self.fd, path)

    def _closed_error(self) -> PyxdpError:
        return PyxdpError(f"XDP link {self.id} is closed")

    def __repr__(self) -> str:
        state = "closed" if self._fd.closed else f"fd={self._fd.fd}"
        return f"<XdpLink id={self.id} ifindex={self.ifindex} {state}>"


def xdp_link_attach(iface: str | int, prog: FdLike, *, mode: str | None = None,
                    flags: int = 0) -> XdpLink:
    """Attach ``prog`` to ``iface`` through a new bpf_link (:meth:`XdpLink.attach`)."""
    return XdpLink.attach(iface, prog, mode=mode, flags=flags)


def freplace_link(prog: FdLike, target: FdLike, target_btf_id: int) -> Fd:
    """BPF_LINK_CREATE of an extension (``BPF_PROG_TYPE_EXT``) over function
    ``target_btf_id`` of program ``target`` (``bpf_tracing_prog_attach``): the
    function runs the extension's code until the link is released."""
    attr = _attr(_LINK_CREATE_SIZE)
    _put32(attr, 0, fd_of(prog))
    _put32(attr, 4, fd_of(target))
    _put32(attr, 8, 0)
    _put32(attr, 16, target_btf_id)  # link_create.tracing.target_btf_id
    return Fd(_call(BpfCmd.BPF_LINK_CREATE, attr, "freplace"), "link")
