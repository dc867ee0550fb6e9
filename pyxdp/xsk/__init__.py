"""AF_XDP in Python, the user's side: rings, UMEM and the socket API, over the kernel or
pyxdp's datapath.

* :mod:`pyxdp.xsk.queue`: libxdp's producer/consumer of the rings (the ring
  layout and the kernel's side are :mod:`pyxdp.net.xsk_queue`,
  ``net/xdp/xsk_queue.h``), over any shared buffer;
* :mod:`pyxdp.xsk.umem`: the UMEM's memory and its address arithmetic (the
  ``XDP_UMEM_REG`` checks, address handles and ``xp_validate_desc`` are
  :mod:`pyxdp.net.xdp_umem`, ``net/xdp/xdp_umem.c``);
* :mod:`pyxdp.xsk.xsk`: the backend-independent socket (:class:`XskSocket`):
  fill, recv, release, send, complete, chunk accounting;
* :mod:`pyxdp.xsk.linux`: :class:`~pyxdp.xsk.linux.LinuxXskSocket`, the same
  API over the kernel's AF_XDP (imported on demand: it loads libc);
* :mod:`pyxdp.xsk.datapath`: :class:`~pyxdp.xsk.datapath.PyxdpXskSocket`, the
  same API over pyxdp's datapath (copy and zero-copy, XSKMAP,
  ``bpf_redirect_xsk``; imported on demand: it loads the datapath, whose
  kernel side of AF_XDP is :mod:`pyxdp.net.xsk`, :mod:`pyxdp.net.xsk_buff_pool`
  and :mod:`pyxdp.net.xsk_native`);
* :mod:`pyxdp.xsk.native`: xdpsock's rxdrop loop in machine code (numba)
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
