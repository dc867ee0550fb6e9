"""The XFRM state kfuncs of ``net/xfrm/xfrm_state_bpf.c``.

``bpf_xdp_get_xfrm_state(ctx, opts, opts__sz)`` (``KF_ACQUIRE |
KF_RET_NULL``) and ``bpf_xdp_xfrm_state_release(x)`` (``KF_RELEASE``) over
the run's namespace's states (:class:`pyxdp.net.xfrm_state.XfrmStateTable`,
``RunContext.fib.xfrm``), with Linux 6.18's checks in its order:

* ``opts__sz`` below 4 (``sizeof(opts->error)``): NULL, nothing written;
* ``opts__sz`` not 36 (``BPF_XFRM_STATE_OPTS_SZ``): ``opts->error`` -EINVAL;
* ``netns_id`` below -1: -EINVAL; an id the namespace has not given another
  (``peers``): -ENONET; -1 the receiving device's namespace;
* no state for ``mark``, ``daddr``, ``spi``, ``proto`` and ``family``:
  -ENOENT. A found state leaves ``opts->error`` as it was.

``struct bpf_xfrm_state_opts``: ``error`` (s32) at 0, ``netns_id`` (s32) 4,
``mark`` 8, ``daddr`` (16 bytes) 12, ``spi`` (network order) 28, ``proto``
32, ``family`` (u16) 34. A found state's reference count goes up until the
release. pyxdp's engines call these as helpers of the program's own
(:func:`pyxdp.net.xdp_metadata.bind_kfuncs`).
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable

from pyxdp.errors import HelperFault
from pyxdp.net.fib import dev_net
from pyxdp.net.xfrm_state import XFRM_TABLES, XfrmState, XfrmStateTable
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.memory import Region

__all__ = ["BPF_XFRM_STATE_OPTS_SZ", "XFRM_KFUNCS"]

BPF_XFRM_STATE_OPTS_SZ = 36
BPF_F_CURRENT_NETNS = -1
M32 = 0xFFFF_FFFF
_OPTS = struct.Struct("<iiI16s4sBxH")  # error, netns_id, mark, daddr, spi, proto, family


def _state(addr: int) -> XfrmState:
    """The state a ``struct xfrm_state *`` argument points at."""
    table = XFRM_TABLES.get(addr & ~M32)
    x = table.at(addr) if table is not None else None
    if x is None:
        raise HelperFault(f"{addr:#x} is not a struct xfrm_state pointer of this run")
    return x


def _lookup(vm: Interpreter, net: XfrmStateTable, opts: int, size: int) -> XfrmState | int:
    """The state, or -errno for ``opts->error``."""
    if size != BPF_XFRM_STATE_OPTS_SZ:
        return -errno.EINVAL
    _, netns_id, mark, daddr, spi, proto, family = _OPTS.unpack(vm.mem.read(opts, _OPTS.size))
    if netns_id < BPF_F_CURRENT_NETNS:
        return -errno.EINVAL
    if netns_id >= 0:
        peer = net.peers.get(netns_id)
        if peer is None:
            return -errno.ENONET
        net = peer
    x = net.lookup(mark, daddr, int.from_bytes(spi, "big"), proto, family)
    return x if x is not None else -errno.ENOENT


def xdp_get_xfrm_state(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int
                       ) -> int:
    """``bpf_xdp_get_xfrm_state``: the state's address (a reference), or NULL."""
    net = dev_net(vm.context, r1, "bpf_xdp_get_xfrm_state")[0].xfrm
    size = r3 & M32
    if size < 4:
        return 0
    got = _lookup(vm, net, r2, size)
    if isinstance(got, int):
        vm.mem.store(r2, 4, got & M32)
        return 0
    got.refcnt += 1
    table = got.table
    if not any(r.base == table.base for r in vm.mem.regions):
        vm.mem.add(Region("xfrm states", table.base, table.buf, writable=False))
    return got.addr


def xdp_xfrm_state_release(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int
                           ) -> int:
    """``bpf_xdp_xfrm_state_release``: ``xfrm_state_put``."""
    x = _state(r1)
    x.refcnt = max(x.refcnt - 1, 0)
    return 0


# The kfuncs by name (bound as private helpers, like the conntrack kfuncs).
XFRM_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_xdp_get_xfrm_state": xdp_get_xfrm_state,
    "bpf_xdp_xfrm_state_release": xdp_xfrm_state_release,
}
