"""Names of the Linux BPF helper functions, by id (``enum bpf_func_id``).

The kernel builds this table from ``___BPF_FUNC_MAPPER`` in
``include/uapi/linux/bpf.h``; its disassembler prints a helper call as
``call bpf_<name>#<id>``. Upstream stopped adding helpers after id 211
(``cgrp_storage_delete``); newer kernel functionality arrives as kfuncs,
which are called by BTF id rather than through this table.
"""

from __future__ import annotations

from pyxdp.uapi.bpf import BpfFuncId

__all__ = ["HELPER_NAMES", "helper_id", "helper_name"]

# Index = helper id. Names without the ``bpf_`` prefix the disassembler adds;
# the table is the uapi enum's, so there is one list of helper ids.
HELPER_NAMES: tuple[str, ...] = tuple(
    f.name.removeprefix("BPF_FUNC_") for f in sorted(BpfFuncId, key=int))

_BY_NAME: dict[str, int] = {name: i for i, name in enumerate(HELPER_NAMES)}


def helper_name(func_id: int) -> str | None:
    """``bpf_<name>`` for a known helper id, as the kernel prints it; else ``None``."""
    if 0 <= func_id < len(HELPER_NAMES):
        return "bpf_" + HELPER_NAMES[func_id]
    return None


def helper_id(name: str) -> int | None:
    """The id of helper ``name`` (with or without the ``bpf_`` prefix); else ``None``."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    if name.startswith("bpf_"):
        return _BY_NAME.get(name[4:])
    return None
