"""Names of the Linux BPF helper functions, by id (``enum bpf_func_id``).

The kernel builds this table from ``___BPF_FUNC_MAPPER`` in
``include/uapi/linux/bpf.h``; its disassembler prints a helper call as
``call bpf_<name>#<id>``. Upstream stopped adding helpers after id 211
(``cgrp_storage_delete``); newer kernel functionality arrives as kfuncs,
which are called by BTF id rather than through this table.

pyxdp's own extension helpers (:data:`PYXDP_HELPER_NAMES`) take ids far
above the kernel's range, so no Linux helper can ever collide with them;
the kernel's verifier refuses them (``invalid func unknown#<id>``).
"""

from __future__ import annotations

from pyxdp.uapi.bpf import BpfFuncId

__all__ = ["HELPER_NAMES", "PYXDP_FUNC_REDIRECT_XSK", "PYXDP_HELPER_NAMES", "helper_id",
           "helper_name"]

# Index = helper id. Names without the ``bpf_`` prefix the disassembler adds;
# the table is the uapi enum's, so there is one list of helper ids.
HELPER_NAMES: tuple[str, ...] = tuple(
    f.name.removeprefix("BPF_FUNC_") for f in sorted(BpfFuncId, key=int))

PYXDP_FUNC_REDIRECT_XSK = 1024
"""``bpf_redirect_xsk(ctx, flags)``: to the AF_XDP socket registered on the packet's rx
queue (the unmerged bpf-next series of January 2021; see :mod:`pyxdp.net.xsk`)."""
PYXDP_HELPER_NAMES: dict[int, str] = {PYXDP_FUNC_REDIRECT_XSK: "redirect_xsk"}

_BY_NAME: dict[str, int] = {name: i for i, name in enumerate(HELPER_NAMES)}
_BY_NAME.update({name: i for i, name in PYXDP_HELPER_NAMES.items()})


def helper_name(func_id: int) -> str | None:
    """``bpf_<name>`` for a known helper id, as the kernel prints it (pyxdp's extension
    helpers included); else ``None``."""
    if 0 <= func_id < len(HELPER_NAMES):
        return "bpf_" + HELPER_NAMES[func_id]
    ext = PYXDP_HELPER_NAMES.get(func_id)
    return "bpf_" + ext if ext is not None else None


def helper_id(name: str) -> int | None:
    """The id of helper ``name`` (with or without the ``bpf_`` prefix); else ``None``."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    if name.startswith("bpf_"):
        return _BY_NAME.get(name[4:])
    return None
