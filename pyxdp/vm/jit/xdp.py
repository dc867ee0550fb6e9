"""The XDP batch entry's descriptors as Python holds them.

``<tag>_xdp`` (see :func:`pyxdp.vm.jit.entry.xdp_fn`) reads one descriptor of
:data:`~pyxdp.vm.jit.abi.XDP_FIELDS` per call: :class:`XdpDesc` is its
ctypes mirror, :class:`DriverIO` the per-frame arrays a natively driven poll
loop fills and reads (the XDP program runtime of the network layer,
``XdpJit``, points the descriptor at them).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import numpy.typing as npt

from pyxdp.vm.jit import abi

__all__ = ["DriverIO", "XdpDesc"]

U64 = npt.NDArray[np.uint64]


class DriverIO:
    """The arrays a natively driven batch of up to ``n`` frames reads and writes
    (see :meth:`XdpJit.driver`); fixed addresses, reused batch after batch."""

    def __init__(self, n: int, ifindex: int, rxq: int) -> None:
        self.desc = np.zeros(len(abi.XDP_FIELDS), np.uint64)
        self.rows = np.zeros(n, np.int64)
        self.data_off = np.zeros(n, np.uint32)
        self.data_len = np.zeros(n, np.uint32)
        self.meta_len = np.zeros(n, np.uint32)
        self.rxq = np.full(n, rxq, np.uint32)
        self.ifindex = np.full(n, ifindex, np.uint32)
        self.action = np.zeros(n, np.uint32)
        self.off_out = np.zeros(n, np.uint32)
        self.len_out = np.zeros(n, np.uint32)
        self.meta_out = np.zeros(n, np.uint32)
        self.status = np.zeros(n, np.uint32)
        self.pc = np.zeros(n, np.uint32)
        self.addr = np.zeros(n, np.uint64)
        self.redirect = np.zeros((n, 4), np.uint64)
        # The descriptor words :meth:`XdpJit.driver` writes, for the last frames array
        # (addresses are costly to ask numpy for; these arrays never move).
        self.words: tuple[npt.NDArray[np.uint8], U64] | None = None
        # A multi-buffer batch's frag table (pyxdp.net.xdp.FragTable, of the layer
        # above), rows by position: the caller points the descriptor's frags word at
        # its rows for such a batch; Python helpers' frags views come from it.
        self.frags: Any = None


class XdpDesc(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in abi.XDP_FIELDS]
