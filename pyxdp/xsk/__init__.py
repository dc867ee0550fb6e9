"""AF_XDP in Python: rings, UMEM and the socket API, over the kernel or a userspace datapath.

* :mod:`pyxdp.xsk.queue`: the rings of ``net/xdp/xsk_queue.h``, both sides
  (libxdp's producer/consumer for the user, the kernel's lazy variants for a
  datapath), over any shared buffer;
* :mod:`pyxdp.xsk.umem`: the UMEM (``net/xdp/xdp_umem.c``), its
  ``XDP_UMEM_REG`` checks, address handles and ``xp_validate_desc``;
* :mod:`pyxdp.xsk.xsk`: the backend-independent socket (:class:`XskSocket`):
  fill, recv, release, send, complete, chunk accounting;
* :mod:`pyxdp.xsk.linux`: :class:`~pyxdp.xsk.linux.LinuxXskSocket`, the same
  API over the kernel's AF_XDP (imported on demand: it loads libc);
* :mod:`pyxdp.xsk.datapath`: :class:`~pyxdp.xsk.datapath.PyxdpXskSocket`, the
  same API over pyxdp's datapath (copy and zero-copy, XSKMAP,
  ``bpf_redirect_xsk``; imported on demand: it loads the datapath);
* :mod:`pyxdp.xsk.native`: both sides in machine code (numba): the
  datapath's receive for the native poll loop, and xdpsock's rxdrop loop
  for either socket (imported on demand).
"""

from pyxdp.net.xdp_umem import XskError, validate_desc, validate_umem_reg
from pyxdp.net.xsk_queue import KernelRingCons, KernelRingProd, Ring, ring_bytes
from pyxdp.xsk.queue import RingCons, RingProd
from pyxdp.xsk.umem import Umem
from pyxdp.xsk.xsk import ChunkAccountingError, ChunkPool, ChunkState, RxBatch, XskSocket

__all__ = [
    "ChunkAccountingError",
    "ChunkPool",
    "ChunkState",
    "KernelRingCons",
    "KernelRingProd",
    "Ring",
    "RingCons",
    "RingProd",
    "RxBatch",
    "Umem",
    "XskError",
    "XskSocket",
    "ring_bytes",
    "validate_desc",
    "validate_umem_reg",
]
