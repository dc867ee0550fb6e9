"""The NAPI poll loop in native code: the fast path of :mod:`pyxdp.net.napi`.

A driver's receive loop is the hottest code of XDP: in the kernel a poll of
64 frames costs a few microseconds. Driving it from Python costs far more
than the programs themselves, so the common path runs as machine code
(numba, on the same LLVM as the JIT) without the interpreter lock: poll
after poll, it takes frames from the rx ring or the NIC's generator (pages
from the queue's page pool, packet copied in, as DMA would), calls the JIT's
XDP batch entry on them, and acts on the verdicts:

- ``XDP_DROP``, ``XDP_ABORTED`` and unknown verdicts: the page goes straight
  back into the pool's alloc cache (``page_pool_recycle_direct``); the
  exceptions are counted per verdict for ``xdp_exception``;
- ``XDP_TX`` on a NIC: ``xdp_convert_buff_to_frame`` (the header written in
  the headroom), the TX bulk queue of 16, ``ndo_xdp_xmit``, and, at tx
  completion, the page back to the pool; one ``xdp_bulk_tx`` per bulk. A
  device with native transmit rings (``NetDevice.xmit_wires``: an AF_XDP
  socket of the host kernel, :mod:`pyxdp.net.xsk_wire`) gets each frame
  copied onto its tx ring at the bulk's flush, under the ring's tx lock
  (polls on several CPUs send there), for XDP_TX and for redirects
  to it alike; frames its ring has no room for count as ``xdp_tx_errors``
  (XDP_TX) or as the flush's drops (redirects); on a veth whose peer has
  NAPI, XDP_TX is ``veth_xdp_tx``: the bulk goes to the veth's own
  ``veth_xdp_xmit``, onto the peer's ``xdp_ring`` (:func:`_tx_flush`);
- ``XDP_REDIRECT`` through a devmap slot or a devmap_hash key (the map's
  index probed by :mod:`pyxdp.maps.hashtab`'s probe in machine code), or to
  an ifindex (``bpf_redirect``), to a NIC or a veth: the same conversion,
  the target's one bulk queue of 16 (its program the one of the entry that
  queued its first frame since the poll's flush) flushed when full and at the
  poll's end (``bq_xmit_all``: that program first, with ``egress_ifindex`` set -
  ``dev_map_bpf_prog_run``, its JIT entry driven from here as the cpumap
  kthread drives its program - then ``ndo_xdp_xmit``; ``xdp_devmap_xmit``
  per flush, ``xdp_redirect`` per frame); a veth's ``ndo_xdp_xmit``
  (``veth_xdp_xmit``) queues the frames on its peer's ``xdp_ring`` in place,
  under the ring's lock (:func:`pyxdp.net.frame_ring.ring_lock`, which this loop
  also takes around each poll's take from its own ring: with threaded NAPI
  other threads fill it meanwhile) (-ENXIO when the peer has no NAPI; it
  stops at the first frame too long for the peer or refused by the full
  ring), and a poll that left frames there ends the call, so that the
  peer's NAPI runs next; a broadcast (``BPF_F_BROADCAST``,
  ``BPF_F_EXCLUDE_INGRESS``) clones the frame into order-0 pages of the
  system allocator for every target valid for it (its MTU) but the last valid
  one, in the map's walk order;
  an entry program runs over a bulk's clones in a batch of their own (the
  driver's descriptor pointed at those pages).

- ``XDP_PASS``: the skb built around the page goes through the stack's
  demultiplexing (:func:`pyxdp.net.stack.stack_rcv_one`, the one
  implementation the Python path calls too) on this CPU's counter rows, one
  ``netif_receive_skb_list`` per poll, and the page comes back as the skb's
  free recycles it;
- ``XDP_REDIRECT`` into a cpumap entry: ``xdp_convert_buff_to_frame`` with
  ``dev_rx``, the entry's bulk queue of 8 (``bq_enqueue``), flushed into
  its ``ptr_ring`` (:mod:`pyxdp.net.ptr_ring`) when full and at the poll's
  end, what does not fit returned; the pages the entry's kthread freed come
  back through its return ring at the start of each poll;
- ``XDP_REDIRECT`` to the queue's AF_XDP socket (its XSKMAP slot, or
  ``bpf_redirect_xsk``) when exactly one socket is bound there
  (:mod:`pyxdp.net.xsk_native`): copy mode takes a buffer from the pool, copies
  metadata and frame into the UMEM and writes the rx descriptor; zero-copy
  queues run :func:`native_polls_zc`, whose buffers *are* UMEM chunks from
  the fill ring, handed over as they are (XDP_PASS there copies the chunk
  into the stack's skb, XDP_TX and redirects to devices into an order-0
  page, ``xdp_convert_zc_to_xdp_frame``, all freeing it). Their
  error paths (fill ring empty, rx ring full, frame too long) are taken here
  too, with the kernel's counters; the rx ring and the fill ring's consumer
  are published at the end of each poll (``xsk_flush``).

A device's generic program runs in the same loop (``generic``: the driver's
skb expanded by ``pskb_expand_head`` first) and its verdicts are acted on as
``do_xdp_generic`` does, per skb: XDP_TX is ``generic_xdp_tx`` (the skb
transmitted on the device, a NIC whose transmit is a sink, and freed; no
bulk; on ``lo``, ``loopback_xmit`` queues a copy on its own backlog, the ring
being polled, in an skb's order-0 page; on a veth, ``veth_xmit`` hands it
to its peer as for a generic redirect to the veth, below), a redirect through a
devmap entry or to an ifindex is ``xdp_do_generic_redirect`` (``xdp_ok_fwd_dev``,
``xdp_redirect``, the entry's program on a copy of the skb - ``dev_map_bpf_prog_run_skb`` -, then
``generic_xdp_tx`` on the target: a NIC whose transmit is a sink, ``lo``
without a generic program (``loopback_xmit``: its own stack receives the skb),
or a veth whose peer has no program and receives the skb in its stack, or whose
peer has a native or generic one and gets it queued, in an order-0 page of the
system allocator, on its ``xdp_ring`` - for a generic one its backlog, whose
poll runs that program - and
``lo`` with a generic program likewise onto its backlog,
:attr:`pyxdp.net.devmap.FwdTable.generic`), a broadcast
``dev_map_redirect_multi`` (the same for a clone per target),
one into a cpumap entry ``cpu_map_generic_redirect`` (the skb as an order-0
``xdp_frame`` of the system allocator, straight into the entry's ring), one
into the queue's copy-mode AF_XDP socket ``xsk_generic_rcv`` (the skb copied
into the UMEM and published at once); their errors are taken here (below);
other targets go to :mod:`pyxdp.net.dev` (acted on per target, in a batch).

A redirect that fails in either mode is failed here as the Python path fails
it, with its errno and its order of checks: no device at the ifindex or an
empty entry (-EINVAL), no ``ndo_xdp_xmit`` (-EOPNOTSUPP), down (-ENETDOWN),
too short (-EMSGSIZE; a generic broadcast's clones before that target sent,
as ``dev_map_redirect_multi``), no room for the ``xdp_frame`` or no page for
a zero-copy copy (-EOVERFLOW), a full cpumap ring or no page for a generic
skb's copy (-ENOSPC, -ENOMEM); the frame goes back to its memory, the
device's ``xdp_redirect`` counts it and ``xdp_redirect_err`` counts it per
errno (:data:`K` ``ERR``).

A ring may also hold skbs other devices' transmits queued there
(:data:`~pyxdp.net.frames.KIND_SKB`: ``veth_xdp_rx``, ``netif_rx``), each in an
order-0 page of the system allocator (with page frags past a page's packet
room): the loop copies each into pages of its own pool as it takes it
(``veth_convert_skb_to_xdp_buff``'s ``skb_pp_cow_data``,
:func:`pyxdp.net.skbuff_native.skb_pp_cow_data`: a head and page frags for a long
one; too few pages: dropped, ``rx_dropped``) and frees the skb's pages, so a
queue's pool is only ever allocated from by its own poll, whichever threads
send to it.

A veth's ring also holds ``xdp_frame`` s other devices queued there
(``ndo_xdp_xmit``; ``veth_xdp_rcv_one`` runs the veth's program on them):
in the queue's own pool, in another device's page pool (the host's pools in
a table, :data:`PT_COLS`) or in the system allocator (clones, order-0
copies). A poll holding frames of other memories runs one batch per memory
(:func:`_run_mems`, the driver's frames word pointed at that memory's
pages); DROP, ABORTED and unknown verdicts return them (``xdp_return_frame``:
the owning pool's ring, or ``put_page``), XDP_PASS hands them to the stack's
demux first, XDP_TX (``veth_xdp_tx``) converts them in their memory and puts
them in the TX bulk beside the queue's own frames, in verdict order (the peer
refusing one: back to its memory); XDP_REDIRECT converts them in their memory
into a device's bulk queue beside the queue's own frames, the entry tagged with
its memory (:func:`_bq_enqueue`; the flush returns each frame to that memory,
``xdp_return_frame_rx_napi``), or copies them into the queue's copy-mode AF_XDP
socket; broadcasts clone them for all targets but the last, which gets the
frame itself (its bulk entry tagged), and entry programs run over them in their
memory (:func:`_bq_xmit_all`); a cpumap entry takes them into its bulk in their
memory (``dev_rx`` set in their header; :func:`_cpu_flush` returns what the ring
refuses there).

Multi-buffer (frags) buffers of the queue's pool (a NIC's DMA, an skb's copy, the
generator's long frames, built by ``skbuff_native.buf_dma`` as a NIC's DMA) run
in the loop: each poll's frags are listed in a frag table (:func:`_frags_row`, the
layout of :class:`~pyxdp.net.xdp.FragTable`) whose address the JIT's descriptor
carries for that batch, written back after the run (:func:`_frags_back`: released
frags recycled first, then ``nr_frags``, ``xdp_frags_size`` and the frag records,
as :meth:`pyxdp.net.prog._Frags.write_back`), and DROP/ABORTED free each frame's
frags then its head. XDP_TX on a NIC whose transmit is a sink or on a veth
(``veth_xdp_tx``) takes them into the TX bulk, and a redirect through a devmap entry
without a program or to an ifindex (no broadcast, the call running no devmap
program) that is such a NIC or a veth into its bulk queue or refuses them
(:func:`_frags_red_ok`; -EOPNOTSUPP from a target without ``NDO_XMIT_SG``): the
frags flag in the ``xdp_frame``, the whole length checked and counted (a veth's
peer's ``xdp_ring`` holds it with :data:`KIND_FRAGS`), completion or refusal
freeing frags then head; a broadcast over targets the loop sends to gives it whole
to its one valid target (MTU, ``NDO_XMIT_SG``), and with two or more fails,
-EOPNOTSUPP (``dev_map_enqueue_clone`` refuses a frame with frags). XDP_PASS reads such
a frame whole (``skb_copy_bits``, :func:`pyxdp.net.skbuff_native.buf_copy_bits`,
into a scratch of the call) for the
stack's demux in the poll's list, then frees its frags and head; a redirect into
a cpumap entry converts its head with the frags flag and puts its whole length in
the ring (the entry's kthread reads the frags; the return ring's pages free them
first). A poll where a frame kept frags and is to be passed where the stack is
not native, redirected or sent
elsewhere hands all its PASS, TX and REDIRECT frames (frags frames with
``KIND_FRAGS`` and their whole length) to the Python dispatch and ends the call, so
that they get the Python poll's one stack list, bulks and flush. Generic XDP and a
poll holding xdp_frames of other memories stop at a frags frame, which the Python
poll takes (``docs/SEMANTICS.md``, sizes and frags); a multi-buffer xdp_frame another
device queued (a veth's peer's) ends the call before the poll it falls in
(:func:`_frame_frags_ahead`), so the Python poll takes that poll's entries whole.

Everything else - wire sinks to feed, a veth whose peer's ring is the one
polled, a devmap program the loop cannot drive (the polling program itself,
an interpreted one), PASS with a stack callback or a socket keeping payloads,
other sockets, and the errors of targets only the Python path sends to - is
*deferred*: the frame and its verdict
are handed back, the loop stops after that poll, and
:func:`pyxdp.net.napi.napi_poll`'s Python code finishes it
with the same functions as every other frame. Polls whose only deferred
frames are XDP_PASS or AF_XDP redirects do not stop the loop until the
defer buffer is nearly full. So the native loop is an accelerator of the
one datapath, not a second one: it only takes the paths whose outcome it can
produce exactly (same pages recycled, same counters), and the tests run the
same scenarios with and without it.

State is the objects' own records, used in place: the page pool's
:class:`~pyxdp.net.page_pool.PoolState` and arrays (the same algorithm as
:class:`~pyxdp.net.page_pool.PagePool`), the rx ring's cursor, the
generator's position, the queue's :class:`~pyxdp.net.stats.NetdevStats`, the
stack's and the cpumap entries' records, the AF_XDP pool's, rings' and
socket's records (:mod:`pyxdp.net.xsk_native`) and the host's page allocator.
A call's own outputs (polls, the first fault, deferred frames, sums for the
tracer) come back in ``out``.
"""

from __future__ import annotations

import errno

import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba import types
from numba.extending import intrinsic

from pyxdp.maps.devmap import DEVMAP_HASH_NO_SLOT
from pyxdp.net import page_pool as _pp
from pyxdp.net.atomic import (
    call_by_address,
    i64_view,
    load_acquire64,
    memcpy,
    spin_lock,
    spin_unlock,
    store_release64,
    u8_view,
    u32_view,
)
from pyxdp.net.frame_ring import ring_lock, ring_put, ring_unlock
from pyxdp.net.frames import (
    CPU_MAP_BULK_SIZE,
    DEV_MAP_BULK_SIZE,
    KIND_FRAGS,
    KIND_FRAME,
    KIND_SKB,
    NET_SKB_PAD,
    XDP_TX_BULK_SIZE,
    RingCursor,
)
from pyxdp.net.native import njit
from pyxdp.net.page_pool import (
    PAGE_SIZE,
    PP_ALLOC_CACHE_REFILL,
    PP_ALLOC_CACHE_SIZE,
    PoolState,
)
from pyxdp.net.page_pool_lock import alloc_page_ir, put_page_ir
from pyxdp.net.page_pool_native import _alloc, _put_ring
from pyxdp.net.page_pool_native import _recycle as _recycle  # pyxdp.xsk.live imports it here
from pyxdp.net.ptr_ring import IDX_CONS, IDX_CONS_LOCK, ring_count, ring_produce_locked
from pyxdp.net.skbuff_native import (
    BAD_SKB,
    FRAG0,
    SH,
    _ld,
    _st,
    buf_copy_bits,
    buf_dma,
    skb_pp_cow_data,
)
from pyxdp.net.source import GenState
from pyxdp.net.stack import Mib, Rt, stack_rcv_one
from pyxdp.net.stats import NetdevStats
from pyxdp.net.xdp import (
    MAX_SKB_FRAGS,
    SKB_SHARED_INFO_SIZE,
    XDP_FLAGS_HAS_FRAGS,
    XDP_FRAME_SIZE,
)
from pyxdp.net.xdp_mem import (
    SHINFO_OFF_NR_FRAGS,
    SHINFO_OFF_XDP_FRAGS_SIZE,
    SKB_FRAG_SIZE,
    XDP_FRAME_OFF_DEV_RX,
    XdpMemType,
)
from pyxdp.net.xsk_native import (
    T_SLOT,
    T_TX_ERR,
    XP_HELD,
    XP_OFF,
    XP_PFN_BASE,
    ld8,
    ld32,
    page_put,
    rcv_copy,
    rcv_zc,
    xsk_flush,
    xsk_slot,
    zc_alloc,
    zc_alloc_done,
    zc_free,
    zc_to_frame,
)
from pyxdp.net.xsk_native_tx import MAX_DMA, veth_rx_page, veth_rx_queue
from pyxdp.net.xsk_wire import W_SIZE, wire_lock, wire_publish, wire_unlock, wire_xmit
from pyxdp.uapi.bpf import ETH_HLEN, XDP_PACKET_HEADROOM, BpfMapType, RedirectFlag
from pyxdp.vm.jit.abi import (
    FRAG_ENTRY,
    FRAG_FRAG_SIZE,
    FRAG_HEAD,
    FRAG_NR,
    FRAG_SIZE,
    XDP_FIELDS,
)

__all__ = ["C", "DEFER_COLS", "DM_HASH_COLS", "FX_COLS", "K", "MAX_MEMS", "PT_COLS",
           "native_polls", "native_polls_zc"]


class C:
    """Indices of a call's control array: what the call reports beyond the records."""

    ERROR = 0  # the rx ring holds a frame that is no buffer of the queue in use (-1)
    NDEFER = 1  # frames handed back to the Python dispatch
    FAULTS, FAULT_WORD, FAULT_PC, FAULT_ADDR = 2, 3, 4, 5
    INVALID_ACT = 6  # the first unknown verdict seen (its value + 1)
    POLLS, FRAMES = 7, 8
    SIZE = 16


class K:
    """Indices of a queue's trace counts (kept over calls; the tracer reads them in place)."""

    ACT = 0  # 0: XDP_ABORTED, 5: unknown verdicts (xdp_exception)
    TX_EVENTS, TX_SENT, TX_DROPS = 6, 7, 8  # xdp_bulk_tx of XDP_TX
    ERR = 9  # xdp_redirect_err by errno: ERR + errno (below ERR_N)
    ERR_N = 128
    SIZE = ERR + ERR_N


# numba reads module-level integers as constants (not class attributes).
C_ERROR = C.ERROR
C_NDEFER = C.NDEFER
C_FAULTS = C.FAULTS
C_FAULT_WORD = C.FAULT_WORD
C_FAULT_PC = C.FAULT_PC
C_FAULT_ADDR = C.FAULT_ADDR
C_INVALID_ACT = C.INVALID_ACT
C_POLLS = C.POLLS
C_FRAMES = C.FRAMES
K_ACT = K.ACT
K_TX_EVENTS = K.TX_EVENTS
K_TX_SENT = K.TX_SENT
K_TX_DROPS = K.TX_DROPS
K_ERR = K.ERR
P_COUNT = PoolState.index("count")
P_RHEAD = PoolState.index("ring_head")
P_RLEN = PoolState.index("ring_len")
P_NFREE = PoolState.index("nr_free")
P_NUSE = PoolState.index("nr_in_use")
P_HOLD = PoolState.index("hold_cnt")
P_RELEASE = PoolState.index("release_cnt")
P_FAST = PoolState.index("fast")
P_SLOW = PoolState.index("slow")
P_EMPTY = PoolState.index("empty")
P_REFILL = PoolState.index("refill")
P_CACHED = PoolState.index("cached")
P_CACHE_FULL = PoolState.index("cache_full")
P_RING = PoolState.index("ring")
P_RING_FULL = PoolState.index("ring_full")
P_ERROR = PoolState.index("error")
Q_HEAD = RingCursor.index("head")
Q_COUNT = RingCursor.index("count")
R_COUNT = Q_COUNT  # another ring's cursor (a veth peer's xdp_ring)
CUR_WORDS = len(RingCursor.FIELDS)  # a cursor's words, its lock among them
# A veth target's row of pyxdp.net.devmap.FwdTable's veth table: its peer's xdp_ring
# (columns, cursor, size), the longest frame the peer takes (-1: no NAPI there), and
# from VETH_PT the page pool of the peer's queue as a row of the pool table (PT_*).
VETH_RING, VETH_CUR, VETH_SIZE, VETH_MAX, VETH_PT = range(5)
G_POS = GenState.index("pos")
G_PRODUCED = GenState.index("produced")
G_LIMIT = GenState.index("limit")
D_SIZE = len(NetdevStats.FIELDS)
D_RX_PACKETS = NetdevStats.index("rx_packets")
D_RX_BYTES = NetdevStats.index("rx_bytes")
D_RX_DROPPED = NetdevStats.index("rx_dropped")
D_TX_PACKETS = NetdevStats.index("tx_packets")
D_TX_BYTES = NetdevStats.index("tx_bytes")
D_XDP_PACKETS = NetdevStats.index("xdp_packets")
D_XDP_DROPS = NetdevStats.index("xdp_drops")
D_XDP_TX = NetdevStats.index("xdp_tx")
D_XDP_TX_ERRORS = NetdevStats.index("xdp_tx_errors")
D_XDP_REDIRECT = NetdevStats.index("xdp_redirect")
D_XDP_ABORTED = NetdevStats.index("xdp_aborted")
D_XDP_PASS = NetdevStats.index("xdp_pass")
# row, data, len, meta, action, map_id, map_type, index, flags, kind (KIND_FRAME: an
# xdp_frame another device queued; its row counted from the queue's pool's pfn base).
DEFER_COLS = 10
# A poll's frames when some came as xdp_frames (FX_KIND) or lie in another memory
# (FX_MEM: 0 the queue's pool, 1 the system allocator, 2 + k page pool k of the
# call's pool table, PT_*): the
# memory, the kind, the program's inputs and outputs at each frame's position while
# the memories run in batches of their own (_run_mems), and a batch's positions.
FX_MEM, FX_KIND, FX_ROW, FX_OFF, FX_LEN, FX_META, FX_ACT, FX_OFFO, FX_LENO, FX_METAO = range(10)
FX_STATUS, FX_PC, FX_ADDR, FX_RED, FX_POS = 10, 11, 12, 13, 17
FX_COLS = 18
# A row of the pool table: another page pool's pfn base and pages, its pages' address
# and size, the addresses and lengths of its state words, alloc cache, ring, free
# list and page states (pyxdp.net.page_pool.PagePool.native_arrays, used in place),
# and the kernel address of its first page (xdp_frame.data pointers).
(PT_PFN, PT_N, PT_PAGES, PT_PSIZE, PT_PSC, PT_PSCN, PT_CACHE, PT_CACHEN, PT_RING, PT_RINGN,
 PT_FREE, PT_FREEN, PT_STATE, PT_ABASE) = range(14)
PT_COLS = 14
VETH_COLS = VETH_PT + PT_COLS
MAX_MEMS = 64  # memories a poll can hold frames of (_run_mems' bit set)
# The one definition of each constant, as module-level integers numba reads as constants.
_FREE, _CACHE, _RING, _INUSE = _pp._FREE, _pp._CACHE, _pp._RING, _pp._INUSE


def pool_row(pool: _pp.PagePool) -> tuple[int, ...]:
    """``pool``'s row of a pool table (``PT_*``): what native code reads of another
    device's page pool, in place."""
    psc, cache, ring, free, state = pool.native_arrays
    return (pool.pfn_base, pool.npages, pool.pages.ctypes.data, pool.pages.shape[1],
            psc.ctypes.data, len(psc), cache.ctypes.data, len(cache), ring.ctypes.data,
            len(ring), free.ctypes.data, len(free), state.ctypes.data, pool.addr_base)
CACHE_SIZE = PP_ALLOC_CACHE_SIZE
REFILL = PP_ALLOC_CACHE_REFILL
HEADROOM = XDP_PACKET_HEADROOM
FRAME_SZ = PAGE_SIZE
TAILROOM = SKB_SHARED_INFO_SIZE
MEM_TYPE_PAGE_POOL = int(XdpMemType.MEM_TYPE_PAGE_POOL)
BULK = DEV_MAP_BULK_SIZE  # XDP_TX's bulk is as large (checked below)
# A device's devmap bulk queue (pyxdp.net.napi._Tables: bq[t] its frames' columns, bq_n[t]
# these words): the frames queued, and the program its first frame set (egress row + 2,
# 1 none, 0 not set since __dev_flush).
BQ_COUNT, BQ_PROG = 0, 1
BQ_WORDS = 2
# A bulk queue's columns: entry, data, length, metadata length, and the memory tag
# (_bq_enqueue).
BQ_TAG = 4
BQ_COLS = 5
INT_MAX = 0x7FFF_FFFF  # bpf_redirect's map id: an ifindex, no map
DEVMAP = int(BpfMapType.BPF_MAP_TYPE_DEVMAP)
DEVMAP_HASH = int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH)
# A devmap row's hash columns (DM_HASH_COLS; all 0 for a DEVMAP): the probe's address,
# the index's arrays, its capacity, the walk array (pyxdp.maps.devmap.DevMapHash).
DH_FIND, DH_INDEX, DH_HASHES, DH_KEYS, DH_CAPACITY, DH_WALK = range(6)
DM_HASH_COLS = 6
NO_SLOT = DEVMAP_HASH_NO_SLOT
U32_MAX = 0xFFFF_FFFF
XSKMAP = int(BpfMapType.BPF_MAP_TYPE_XSKMAP)
BPF_F_BROADCAST = int(RedirectFlag.BPF_F_BROADCAST)
BPF_F_EXCLUDE_INGRESS = int(RedirectFlag.BPF_F_EXCLUDE_INGRESS)
MEM_TYPE_PAGE_ORDER0 = int(XdpMemType.MEM_TYPE_PAGE_ORDER0)
assert XDP_TX_BULK_SIZE == DEV_MAP_BULK_SIZE
ENOMEM = errno.ENOMEM  # a copy-mode socket found no fill buffer
ENOSPC = errno.ENOSPC  # ... or the frame is too long for its buffers
# Redirect errors the loop reports itself (xdp_redirect_err, K.ERR + errno).
EINVAL = errno.EINVAL
EMSGSIZE = errno.EMSGSIZE
EOVERFLOW = errno.EOVERFLOW
EOPNOTSUPP = errno.EOPNOTSUPP
M_BATCHES = Mib.BATCHES
RT_LIST, RT_HFAM = Rt.LIST, Rt.HFAM
CPUMAP = int(BpfMapType.BPF_MAP_TYPE_CPUMAP)
CPU_MAP_BULK = CPU_MAP_BULK_SIZE
DEV_RX_WORD = XDP_FRAME_OFF_DEV_RX // 8
XDP_EGRESS = XDP_FIELDS.index("egress")  # the descriptor word of egress_ifindex
DESC_FRAMES = XDP_FIELDS.index("frames")  # ... and of the frames array's address
DESC_FRAGS = XDP_FIELDS.index("frags")  # ... and of a multi-buffer poll's frag table


@intrinsic
def _call(typingctx, fn, ctx, desc):  # type: ignore[no-untyped-def]
    """``fn(ctx, desc)``: the JIT's XDP batch entry, called through its address."""
    sig = types.void(types.uint64, types.uint64, types.uint64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        p8 = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [p8, p8])
        f = builder.inttoptr(args[0], fnty.as_pointer())
        builder.call(f, [builder.inttoptr(args[1], p8), builder.inttoptr(args[2], p8)])
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, nogil=True, _nrt=False)
def _to_frame_mem(w32, q64, loc, data, length, meta, addr_base, mem_type):  # type: ignore[no-untyped-def] # noqa: E501
    """``xdp_convert_buff_to_frame`` in place, in page ``loc`` of the memory whose words
    ``w32``/``q64`` are; False where the kernel returns NULL."""
    if data - meta < XDP_FRAME_SIZE or data + length > FRAME_SZ - TAILROOM:
        return False
    q64[loc, 0] = addr_base + loc * FRAME_SZ + data
    w32[loc, 2] = length
    w32[loc, 3] = data - XDP_FRAME_SIZE
    w32[loc, 4] = meta
    w32[loc, 5] = mem_type
    w32[loc, 8] = FRAME_SZ
    w32[loc, 9] = 0
    return True


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _to_frame(w32, q64, loc, data, length, meta, addr_base):  # type: ignore[no-untyped-def]
    """``xdp_convert_buff_to_frame`` of a page pool's buffer."""
    return _to_frame_mem(w32, q64, loc, data, length, meta, addr_base, MEM_TYPE_PAGE_POOL)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _take(psc, cache, ring, free, state, c, nuse, fast):  # type: ignore[no-untyped-def]
    """Allocation with the pool's hot fields in registers: (row, c, nuse, fast).
    Only an empty alloc cache goes through the arrays (:func:`_alloc`)."""
    if c > 0:
        c -= 1
        loc = cache[c]
        state[loc] = _INUSE
        return loc, c, nuse + 1, fast + 1
    psc[P_COUNT] = c
    psc[P_NUSE] = nuse
    loc = _alloc(psc, cache, ring, free, state)
    return loc, psc[P_COUNT], psc[P_NUSE], fast


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _give(psc, cache, ring, free, state, loc, c, nuse, cached):  # type: ignore[no-untyped-def]
    """Direct recycling with the hot fields in registers: (c, nuse, cached)."""
    if c < CACHE_SIZE and state[loc] == _INUSE:
        cache[c] = loc
        state[loc] = _CACHE
        return c + 1, nuse - 1, cached + 1
    psc[P_COUNT] = c
    psc[P_NUSE] = nuse
    _recycle(psc, cache, ring, free, state, loc)
    return psc[P_COUNT], psc[P_NUSE], cached


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _from_ring(qcols, qhead, loc, rows, d_off, d_len, d_meta, n):  # type: ignore[no-untyped-def]
    """Frame ``n`` of the poll is the rx ring's head (buffer ``loc``); the new head."""
    rows[n] = loc
    d_off[n] = qcols[1, qhead]
    d_len[n] = qcols[2, qhead]
    d_meta[n] = qcols[3, qhead]
    return (qhead + 1) % qcols.shape[1]


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _dma(pages, loc, off, tpl, tpl_len, gpos, gleft, rows, d_off, d_len, d_meta, n):  # type: ignore[no-untyped-def] # noqa: E501
    """The generator's next frame DMA'd into buffer ``loc`` at ``off`` as frame ``n``
    of the poll; the generator's new (position, frames left)."""
    ln = tpl_len[gpos]
    memcpy(pages.ctypes.data + loc * pages.strides[0] + off,
           tpl.ctypes.data + gpos * tpl.strides[0], ln)
    rows[n] = loc
    d_off[n] = off
    d_len[n] = ln
    d_meta[n] = 0
    gpos += 1
    if gpos == len(tpl_len):
        gpos = 0
    return gpos, gleft - 1 if gleft > 0 else gleft


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _gen_left(gst):  # type: ignore[no-untyped-def]
    """Frames the generator has left to make (-1: endless)."""
    lim = gst[G_LIMIT]
    return -1 if lim < 0 else lim - gst[G_PRODUCED]


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _totals(gst, ctl, ds, cnt, gpos, gmade, polls, total, nbytes, n_ab, n_drop, n_bad):  # type: ignore[no-untyped-def] # noqa: E501
    """A call's generator position and what it counted into the records
    (the device's counters; exceptions also as trace sums)."""
    gst[G_POS] = gpos
    gst[G_PRODUCED] += gmade
    ctl[C_POLLS] += polls
    ctl[C_FRAMES] += total
    ds[D_RX_PACKETS] += total
    ds[D_RX_BYTES] += nbytes
    ds[D_XDP_PACKETS] += total - ctl[C_NDEFER]  # deferred ones: counted by the dispatch
    ds[D_XDP_DROPS] += n_drop
    ds[D_XDP_ABORTED] += n_ab + n_bad
    cnt[K_ACT + 0] += n_ab
    cnt[K_ACT + 5] += n_bad


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _run(fn, ctx_addr, desc, d_len, n):  # type: ignore[no-untyped-def]
    """The JIT's batch entry over the poll's ``n`` frames; returns their bytes."""
    nbytes = 0
    for i in range(n):
        nbytes += d_len[i]
    desc[0] = n
    _call(fn, ctx_addr, desc.ctypes.data)  # type: ignore[call-arg]
    desc[0] = 0
    return nbytes


@njit(cache=True, nogil=True, _nrt=False)
def _run_mems(fn, ctx_addr, desc, io, fx, n, addr):  # type: ignore[no-untyped-def]
    """The JIT's batch entry over a poll whose frames lie in several memories
    (``fx[i, FX_MEM]``): one batch per memory in first-seen order, each frame in
    arrival order within it (as :func:`pyxdp.net.prog.run_xdp` groups a batch by page
    region), the descriptor's frames word pointed at that memory's pages (``addr``;
    the driver's Python helpers follow it); the inputs and outputs are left at each
    frame's position in the poll. Returns the frames' bytes."""
    (rows, d_off, d_len, d_meta, act, off_out, len_out, meta_out, status, pc_out, addr_out,
     red) = io
    own = desc[DESC_FRAMES]
    m0 = fx[0, FX_MEM]
    one = True
    for i in range(1, n):
        if fx[i, FX_MEM] != m0:
            one = False
            break
    if one:  # the common case: every frame from one other device's memory
        if m0 != 0:
            desc[DESC_FRAMES] = np.uint64(addr[m0])
        nbytes = _run(fn, ctx_addr, desc, d_len, n)
        desc[DESC_FRAMES] = own
        return nbytes
    for i in range(n):
        fx[i, FX_ROW] = rows[i]
        fx[i, FX_OFF] = d_off[i]
        fx[i, FX_LEN] = d_len[i]
        fx[i, FX_META] = d_meta[i]
    nbytes = 0
    done = 0  # the memories run (bit per memory)
    for i0 in range(n):
        g = fx[i0, FX_MEM]
        if (done >> g) & 1:
            continue
        done |= 1 << g
        m = 0
        for i in range(i0, n):
            if fx[i, FX_MEM] == g:
                rows[m] = fx[i, FX_ROW]
                d_off[m] = fx[i, FX_OFF]
                d_len[m] = fx[i, FX_LEN]
                d_meta[m] = fx[i, FX_META]
                fx[m, FX_POS] = i
                m += 1
        desc[DESC_FRAMES] = own if g == 0 else np.uint64(addr[g])
        nbytes += _run(fn, ctx_addr, desc, d_len, m)
        for j in range(m):
            i = fx[j, FX_POS]
            fx[i, FX_ACT] = np.int64(act[j])
            fx[i, FX_OFFO] = np.int64(off_out[j])
            fx[i, FX_LENO] = np.int64(len_out[j])
            fx[i, FX_METAO] = np.int64(meta_out[j])
            fx[i, FX_STATUS] = np.int64(status[j])
            fx[i, FX_PC] = np.int64(pc_out[j])
            fx[i, FX_ADDR] = np.int64(addr_out[j])
            for k in range(4):
                fx[i, FX_RED + k] = np.int64(red[j, k])
    desc[DESC_FRAMES] = own
    for i in range(n):
        rows[i] = fx[i, FX_ROW]
        d_off[i] = fx[i, FX_OFF]
        d_len[i] = fx[i, FX_LEN]
        d_meta[i] = fx[i, FX_META]
        act[i] = fx[i, FX_ACT]
        off_out[i] = fx[i, FX_OFFO]
        len_out[i] = fx[i, FX_LENO]
        meta_out[i] = fx[i, FX_METAO]
        status[i] = fx[i, FX_STATUS]
        pc_out[i] = fx[i, FX_PC]
        addr_out[i] = fx[i, FX_ADDR]
        for k in range(4):
            red[i, k] = fx[i, FX_RED + k]
    return nbytes


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _pool_of(ptab, k):  # type: ignore[no-untyped-def]
    """Page pool ``k`` of the pool table as native code runs a pool: (state words,
    alloc cache, ring, free list, page states), in place."""
    return (i64_view(ptab[k, PT_PSC], 1, ptab[k, PT_PSCN])[0],
            i64_view(ptab[k, PT_CACHE], 1, ptab[k, PT_CACHEN])[0],
            i64_view(ptab[k, PT_RING], 1, ptab[k, PT_RINGN])[0],
            i64_view(ptab[k, PT_FREE], 1, ptab[k, PT_FREEN])[0],
            u8_view(ptab[k, PT_STATE], 1, ptab[k, PT_N])[0])


@njit(cache=True, nogil=True, _nrt=False)
def _mem_of(sysm, ptab, pfn):  # type: ignore[no-untyped-def]
    """Where an xdp_frame another device queued lives, beyond the queue's own pool:
    (1, row) in the system allocator (a clone, an order-0 copy), (2 + k, row) in page
    pool ``k`` of the pool table, (-1, 0) elsewhere or not a page in use there."""
    aref = sysm[6]
    row = pfn - sysm[7]
    if 0 <= row < len(aref):
        return (1, row) if aref[row] > 0 else (-1, 0)
    for k in range(len(ptab)):
        row = pfn - ptab[k, PT_PFN]
        if 0 <= row < ptab[k, PT_N]:
            if u8_view(ptab[k, PT_STATE], 1, ptab[k, PT_N])[0][row] == _INUSE:
                return 2 + k, row
            return -1, 0
    return -1, 0


@njit(cache=True, nogil=True, _nrt=False)
def _frame_pfn_base(sysm, ptab, mi):  # type: ignore[no-untyped-def]
    """The pfn base of memory ``mi`` (:func:`_mem_of`)."""
    return np.int64(sysm[7]) if mi == 1 else ptab[mi - 2, PT_PFN]


@njit(cache=True, nogil=True, _nrt=False)
def _frame_pass(sysm, ptab, mi, row, data, length, ifindex, srec):  # type: ignore[no-untyped-def] # noqa: E501
    """XDP_PASS of an xdp_frame in memory ``mi``: the stack's demux of its packet."""
    if mi == 1:
        stack_rcv_one(sysm[0][row], data, length, ifindex, srec)
    else:
        k = mi - 2
        pages = u8_view(ptab[k, PT_PAGES], ptab[k, PT_N], ptab[k, PT_PSIZE])
        stack_rcv_one(pages[row], data, length, ifindex, srec)


@njit(cache=True, nogil=True, _nrt=False)
def _return_frame(sysm, ptab, mi, row):  # type: ignore[no-untyped-def]
    """``xdp_return_frame`` of an xdp_frame in memory ``mi`` (:func:`_mem_of`), as
    veth_xdp_rcv_one frees one it drops (and the stack frees a passed one's skb):
    ``put_page`` of an order-0 page, or into the ring of the page pool that owns it -
    ``napi_direct`` false, and that pool's NAPI is not the one polling
    (``page_pool_napi_local``)."""
    if mi == 1:
        _put_page(sysm, row)
        return
    _psc, _cache, ring, free, state = _pool_of(ptab, mi - 2)
    _put_ring(_psc, ring, free, state, row)


@njit(cache=True, nogil=True, _nrt=False)
def _return_frame_napi(sysm, ptab, mi, row):  # type: ignore[no-untyped-def]
    """``xdp_return_frame_rx_napi`` of an xdp_frame in memory ``mi`` (:func:`_mem_of`),
    as a redirect's failure, a bulk's drops and a NIC's tx completion free one:
    ``put_page`` of an order-0 page, or into the ring of the page pool that owns it:
    such frames are only met in a veth's poll, which runs with
    ``xdp_set_return_frame_no_direct`` (``veth_poll``), and that pool's NAPI is not
    the one polling."""
    if mi == 1:
        _put_page(sysm, row)
        return
    _psc, _cache, ring, free, state = _pool_of(ptab, mi - 2)
    _put_ring(_psc, ring, free, state, row)


@njit(cache=True, nogil=True, _nrt=False)
def _frame_to_mem(sysm, ptab, mi, row, data, length, meta):  # type: ignore[no-untyped-def]
    """``xdp_convert_buff_to_frame`` of a buffer in memory ``mi`` (:func:`_mem_of`), as
    ``veth_xdp_tx`` converts an xdp_frame the veth's program sends back (the memory
    type the frame came with); False where the kernel returns NULL."""
    if mi == 1:
        return _to_frame_mem(sysm[1], sysm[2], row, data, length, meta, sysm[3],
                             MEM_TYPE_PAGE_ORDER0)
    k = mi - 2
    n = ptab[k, PT_N]
    psize = ptab[k, PT_PSIZE]
    return _to_frame_mem(u32_view(ptab[k, PT_PAGES], n, psize // 4),
                         i64_view(ptab[k, PT_PAGES], n, psize // 8), row, data, length, meta,
                         ptab[k, PT_ABASE], MEM_TYPE_PAGE_POOL)


@njit(cache=True, nogil=True, _nrt=False)
def _mem_set_dev_rx(sysm, ptab, mi, row, ifindex):  # type: ignore[no-untyped-def]
    """``xdpf->dev_rx`` of the xdp_frame in page ``row`` of memory ``mi``, as
    ``cpu_map_enqueue`` sets it."""
    if mi == 1:
        sysm[2][row, DEV_RX_WORD] = ifindex
        return
    k = mi - 2
    i64_view(ptab[k, PT_PAGES], ptab[k, PT_N], ptab[k, PT_PSIZE] // 8)[row, DEV_RX_WORD] = \
        ifindex


@njit(cache=True, nogil=True, _nrt=False)
def _mem_frame(sysm, ptab, mi, row):  # type: ignore[no-untyped-def]
    """The xdp_frame in page ``row`` of memory ``mi``: (pfn, data offset, length,
    metadata length), from its header."""
    if mi == 1:
        w32, q64 = sysm[1], sysm[2]
        return (np.int64(sysm[7]) + row, np.int64(q64[row, 0]) - sysm[3] - row * FRAME_SZ,
                np.int64(w32[row, 2]), np.int64(w32[row, 4]))
    k = mi - 2
    n = ptab[k, PT_N]
    psize = ptab[k, PT_PSIZE]
    w = u32_view(ptab[k, PT_PAGES], n, psize // 4)
    q = i64_view(ptab[k, PT_PAGES], n, psize // 8)
    return (ptab[k, PT_PFN] + row, np.int64(q[row, 0]) - ptab[k, PT_ABASE] - row * psize,
            np.int64(w[row, 2]), np.int64(w[row, 4]))


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _frags_row(pages, pfn_base, state, loc, ft, fb, n):  # type: ignore[no-untyped-def]
    """Row ``n`` of the poll's frag table (:class:`~pyxdp.net.xdp.FragTable`, as
    :class:`pyxdp.net.prog._Frags` builds it with numpy) for the multi-buffer buffer
    whose head is page ``loc`` of the queue's pool: ``nr_frags``, the frags' bytes and
    per frag its host address, length and index, with its page's bounds. Returns the
    frags' bytes, or -1 when the head's ``skb_shared_info`` lists a frag that is no
    page of this pool in use (the Python path takes that frame)."""
    nr = np.int64(pages[loc, SH + SHINFO_OFF_NR_FRAGS])
    if nr == 0 or nr > MAX_SKB_FRAGS:
        return -1
    base = pages.ctypes.data
    stride = pages.strides[0]
    size = 0
    for k in range(nr):
        at = FRAG0 + SKB_FRAG_SIZE * k
        frow = _ld(pages, loc, at, 8) - pfn_base
        flen = _ld(pages, loc, at + 8, 4)
        foff = _ld(pages, loc, at + 12, 4)
        if frow < 0 or frow >= len(state) or state[frow] != _INUSE or foff + flen > PAGE_SIZE:
            return -1
        page = base + frow * stride
        e = FRAG_HEAD + FRAG_ENTRY * k
        ft[n, e] = np.uint64(page + foff)
        ft[n, e + 1] = np.uint64(flen)
        ft[n, e + 2] = np.uint64(k)
        fb[n, k, 0] = np.uint64(page)
        fb[n, k, 1] = np.uint64(page + PAGE_SIZE)
        size += flen
    ft[n, FRAG_NR] = np.uint64(nr)
    ft[n, FRAG_SIZE] = np.uint64(size)
    ft[n, FRAG_FRAG_SIZE] = 0  # pyxdp's rx queues register no frag_size (as veth)
    return size


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _frags_back(pages, pfn_base, ft, i, loc, psc, cache, ring, free, state, c, nuse, cached):  # type: ignore[no-untyped-def] # noqa: E501
    """Frame ``i``'s frags as the run left them (row ``i`` of the frag table) written
    back into its head's ``skb_shared_info`` (page ``loc``), as
    :meth:`pyxdp.net.prog._Frags.write_back` does: frags the run released
    (``adjust_tail``, ``bpf_xdp_pull_data``) go back to the pool first, in order
    (``__xdp_return``: not direct, but this poll is the pool's NAPI -
    ``page_pool_napi_local`` - so into its alloc cache), then ``nr_frags``,
    ``xdp_frags_size`` and the frag records. Returns (frags left, c, nuse, cached)."""
    nr0 = np.int64(pages[loc, SH + SHINFO_OFF_NR_FRAGS])
    nr = np.int64(ft[i, FRAG_NR])
    changed = nr != nr0
    for k in range(nr):
        e = FRAG_HEAD + FRAG_ENTRY * k
        if (np.int64(ft[i, e + 2]) != k
                or np.int64(ft[i, e + 1]) != _ld(pages, loc, FRAG0 + SKB_FRAG_SIZE * k + 8, 4)):
            changed = True
    if not changed:
        return nr, c, nuse, cached
    first = np.int64(ft[i, FRAG_HEAD + 2]) if nr > 0 else nr0
    for k in range(nr0):
        if k < first or k >= first + nr:
            frow = _ld(pages, loc, FRAG0 + SKB_FRAG_SIZE * k, 8) - pfn_base
            c, nuse, cached = _give(psc, cache, ring, free, state, frow, c, nuse, cached)
    base = pages.ctypes.data
    stride = pages.strides[0]
    size = np.int64(0)
    for k in range(nr):  # each frag left comes from index src >= k: not yet rewritten
        e = FRAG_HEAD + FRAG_ENTRY * k
        src = np.int64(ft[i, e + 2])
        pfn = _ld(pages, loc, FRAG0 + SKB_FRAG_SIZE * src, 8)
        ln = np.int64(ft[i, e + 1])
        off = np.int64(ft[i, e]) - (base + (pfn - pfn_base) * stride)
        at = FRAG0 + SKB_FRAG_SIZE * k
        _st(pages, loc, at, 8, pfn)
        _st(pages, loc, at + 8, 4, ln)
        _st(pages, loc, at + 12, 4, off)
        size += ln
    pages[loc, SH + SHINFO_OFF_NR_FRAGS] = nr
    _st(pages, loc, SH + SHINFO_OFF_XDP_FRAGS_SIZE, 4, size)
    return nr, c, nuse, cached


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _frags_free(pages, pfn_base, loc, psc, cache, ring, free, state, c, nuse, cached):  # type: ignore[no-untyped-def] # noqa: E501
    """A dropped multi-buffer buffer's frags recycled directly, in order (its head
    next, by the caller), as the Python path's ``xdp_buffs_pages`` lists them."""
    for k in range(np.int64(pages[loc, SH + SHINFO_OFF_NR_FRAGS])):
        frow = _ld(pages, loc, FRAG0 + SKB_FRAG_SIZE * k, 8) - pfn_base
        c, nuse, cached = _give(psc, cache, ring, free, state, frow, c, nuse, cached)
    return c, nuse, cached


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _frags_red_ok(dm_ids, dmt, eg_ids, red, i, tgt_ok, tgt_err, tgt_wire, tgt_veth, own_t):  # type: ignore[no-untyped-def] # noqa: E501
    """Whether the loop redirects multi-buffer frame ``i`` itself: a devmap entry without
    a program or an ifindex (no broadcast) that is a NIC whose transmit is a sink or
    a veth other than the one polled (``veth_xdp_xmit`` onto its peer's ``xdp_ring``)
    - either refusing it when it lacks ``NDO_XMIT_SG`` (its ``tgt_err``, EOPNOTSUPP) -
    or a refusal whose errno does not depend on the target's SG support (no device,
    no ``ndo_xdp_xmit``); the caller has no devmap programs to run. Else the Python
    dispatch takes the poll's frames."""
    if len(tgt_err) == 0 or (np.int64(red[i, 3]) & BPF_F_BROADCAST) != 0:
        return False
    slot, ifx, kk = _dev_target(dm_ids, dmt, eg_ids, red, i)
    if slot < 0 or kk != 0 or ifx == own_t:
        return False
    if ifx <= 0 or ifx >= len(tgt_ok):
        return True  # -EINVAL
    ok = tgt_ok[ifx]
    if ok == 0:
        return tgt_err[ifx] == EINVAL or tgt_err[ifx] == EOPNOTSUPP
    return ok == 1 and tgt_wire[ifx] == 0


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _frags_bcast_ok(dm_ids, dmt, eg_ids, red, i, tgt_ok, self_ifindex, own_t):  # type: ignore[no-untyped-def] # noqa: E501
    """Whether the loop broadcasts multi-buffer frame ``i`` itself (``BPF_F_BROADCAST``
    through a devmap the loop knows, every target one it sends to:
    :func:`_bcast_check`); the caller has no devmap programs to run."""
    m = np.int64(red[i, 1])
    if (np.int64(red[i, 3]) & BPF_F_BROADCAST) == 0 or (m != DEVMAP and m != DEVMAP_HASH):
        return False
    return _bcast_check(dm_ids, dmt, eg_ids, tgt_ok, self_ifindex, own_t,
                        np.int64(red[i, 0]), np.int64(red[i, 2]), np.int64(red[i, 3]))[1] >= 0


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _count_drop(ctl, a, n_drop, n_ab, n_bad):  # type: ignore[no-untyped-def]
    """XDP_DROP, XDP_ABORTED or an unknown verdict (the first one kept for the warning)."""
    if a == 1:
        return n_drop + 1, n_ab, n_bad
    if a == 0:
        return n_drop, n_ab + 1, n_bad
    if ctl[C_INVALID_ACT] == 0:
        ctl[C_INVALID_ACT] = a + 1
    return n_drop, n_ab, n_bad + 1


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _fault(ctl, status, pc_out, addr_out, i):  # type: ignore[no-untyped-def]
    """A frame whose run faulted: the first fault kept for the report."""
    if ctl[C_FAULTS] == 0:
        ctl[C_FAULT_WORD] = status[i]
        ctl[C_FAULT_PC] = pc_out[i]
        ctl[C_FAULT_ADDR] = np.int64(addr_out[i])
    ctl[C_FAULTS] += 1


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _defer(ctl, defer, red, i, loc, data, length, meta, a, kind):  # type: ignore[no-untyped-def] # noqa: E501
    """Hand a frame and its verdict back to the Python dispatch."""
    d = ctl[C_NDEFER]
    defer[d, 9] = kind
    defer[d, 0] = loc
    defer[d, 1] = data
    defer[d, 2] = length
    defer[d, 3] = meta
    defer[d, 4] = a
    defer[d, 5] = np.int64(red[i, 0])
    defer[d, 6] = np.int64(red[i, 1])
    defer[d, 7] = np.int64(red[i, 2])
    defer[d, 8] = np.int64(red[i, 3])
    ctl[C_NDEFER] = d + 1


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _cpu_flush(cq_tab, cbq, cbq_n, cq_cnt, r, pfn_base, psc, cache, ring, free, state, c,  # type: ignore[no-untyped-def] # noqa: E501
               nuse, cached, fmem):
    """``bq_flush_to_queue``: entry ``r``'s bulk (this call's, as the kernel's is this
    CPU's) into its ring under the ring's producer lock, which polls on other CPUs
    and the Python path take too; what does not fit is returned
    (``xdp_return_frame_rx_napi``: direct recycling) to its memory - the queue's
    pool (a multi-buffer frame's frags, then its head: ``fmem``'s pages and frame
    headers), or (``fmem``'s memories) the memory of an xdp_frame another device
    queued. The sums are this call's row. Returns the pool's hot fields (c, nuse,
    cached)."""
    # The entry's ring, from its row of addresses.
    q_slots = i64_view(cq_tab[r, 0], 4, cq_tab[r, 1])
    q_idx = i64_view(cq_tab[r, 2], 1, 16)[0]
    b = cbq_n[r]
    taken = ring_produce_locked(q_slots, q_idx, cbq[r], b)
    for j in range(taken, b):
        loc = cbq[r, 0, j] - pfn_base
        if 0 <= loc < len(state):
            if (fmem[3][loc, 9] & XDP_FLAGS_HAS_FRAGS) != 0:
                c, nuse, cached = _frags_free(fmem[2], pfn_base, loc, psc, cache, ring, free,
                                              state, c, nuse, cached)
            c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
        else:
            mi, row = _mem_of(fmem[0], fmem[1], cbq[r, 0, j])
            _return_frame_napi(fmem[0], fmem[1], mi, row)
    cq_cnt[r, 0] += 1
    cq_cnt[r, 1] += b
    cq_cnt[r, 2] += b - taken
    cbq_n[r] = 0
    return c, nuse, cached


@njit(cache=True, nogil=True, _nrt=False)
def _cpu_generic(cq_tab, cbq, cq_cnt, r, sysm, pages, loc, data, length, ifindex):  # type: ignore[no-untyped-def] # noqa: E501
    """``cpu_map_generic_redirect`` of the skb in pool page ``loc`` to entry ``r``: the
    skb as an order-0 ``xdp_frame`` (a page of the system allocator, the packet at
    ``XDP_PACKET_HEADROOM``, no metadata, ``dev_rx`` set) straight into the entry's
    ring, no bulk; one ``xdp_cpumap_enqueue`` of one frame. Returns 0, or the
    errno of the redirect's failure, in the Python path's order: no page
    (``ENOMEM``), a packet too long for the frame (``EOVERFLOW``, the page back),
    the ring full (``ENOSPC``: the page back, the enqueue event counting one
    drop)."""
    row = _sys_alloc(sysm)
    if row < 0:
        return ENOMEM
    if HEADROOM + length > FRAME_SZ - TAILROOM:
        _put_page(sysm, row)
        return EOVERFLOW
    q_slots = i64_view(cq_tab[r, 0], 4, cq_tab[r, 1])
    q_idx = i64_view(cq_tab[r, 2], 1, 16)[0]
    spages, sw32, sq64, sbase, _ast, _afree, _aref, spfn = sysm
    memcpy(spages.ctypes.data + row * spages.strides[0] + HEADROOM,
           pages.ctypes.data + loc * pages.strides[0] + data, length)
    sq64[row, 0] = sbase + row * FRAME_SZ + HEADROOM
    sw32[row, 2] = length
    sw32[row, 3] = HEADROOM - XDP_FRAME_SIZE
    sw32[row, 4] = 0
    sw32[row, 5] = MEM_TYPE_PAGE_ORDER0
    sw32[row, 8] = FRAME_SZ
    sw32[row, 9] = 0
    sq64[row, DEV_RX_WORD] = ifindex
    # The entry's bulk queue is unused in generic mode: its first column is the slot.
    one = cbq[r]
    one[0, 0] = spfn + row
    one[1, 0] = HEADROOM
    one[2, 0] = length
    one[3, 0] = 0
    if ring_produce_locked(q_slots, q_idx, one, 1) != 1:  # the ring is full
        _put_page(sysm, row)
        cq_cnt[r, 0] += 1
        cq_cnt[r, 2] += 1
        return ENOSPC
    cq_cnt[r, 0] += 1
    cq_cnt[r, 1] += 1
    return 0


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _cpu_lookup(cm_ids, cm_off, cm_n, cm_ent, map_id, idx):  # type: ignore[no-untyped-def]
    """(map row, entry row) of a cpumap slot; entry row -1 when the native loop does
    not know it (an empty slot: the Python path reports the error)."""
    for k in range(len(cm_ids)):
        if cm_ids[k] == map_id:
            if 0 <= idx < cm_n[k]:
                return k, cm_ent[cm_off[k] + idx]
            return k, -1
    return -1, -1


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _egress_row(eg_ids, prog_id):  # type: ignore[no-untyped-def]
    """The egress table's row of a devmap entry's program; -1 when the native loop
    does not run it (the frame then goes to the Python path)."""
    for k in range(len(eg_ids)):
        if eg_ids[k] == prog_id:
            return k
    return -1


# -- a device whose wire is an AF_XDP socket of the host kernel (pyxdp.net.xsk_wire) --

@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _wire_out(wa, pages, sysm, loc, data, length):  # type: ignore[no-untyped-def]
    """``ndo_xdp_xmit`` of one frame onto wire ``wa`` (its record's address): pool page
    ``loc`` or, below 0, a broadcast clone's order-0 page; True when it went."""
    if loc >= 0:
        src = pages.ctypes.data + loc * pages.strides[0] + data
    else:
        spages = sysm[0]
        src = spages.ctypes.data + (-1 - loc) * spages.strides[0] + data
    return wire_xmit(i64_view(wa, 1, W_SIZE)[0], src, length)


@njit(cache=True, nogil=True, _nrt=False)
def _wire_tx_bulk(wa, pages, w32, q64, addr_base, tx_rows, ntx):  # type: ignore[no-untyped-def]
    """The XDP_TX bulk onto wire ``wa`` (each frame's data and length from its
    ``xdp_frame``), published, under the wire's tx lock; returns how many went."""
    w = i64_view(wa, 1, W_SIZE)[0]
    sent = 0
    wire_lock(w)
    for j in range(ntx):
        loc = tx_rows[j]
        src = pages.ctypes.data + q64[loc, 0] - addr_base
        if wire_xmit(w, src, np.int64(w32[loc, 2])):
            sent += 1
    wire_publish(w)
    wire_unlock(w)
    return sent


@njit(cache=True, nogil=True, _nrt=False)
def _tx_flush(tx_rows, ntx, tx_wire, tx_veth, tgt_veth, pages, w32, q64, addr_base, pfn_base,  # type: ignore[no-untyped-def] # noqa: E501
              psc, cache, ring, free, state, c, nuse, cached, fmem):
    """The driver's XDP_TX bulk flush (``ndo_xdp_xmit`` of the bulk): a NIC's transmit
    (a sink, or wire ``tx_wire``'s tx ring, :func:`_wire_tx_bulk`), whose
    completion gives every page back; for a veth (``tx_veth``: its ifindex, else
    -1) ``veth_xdp_flush_bq``'s ``veth_xdp_xmit`` onto its peer's ``xdp_ring``
    (:func:`_veth_put`: in order, stopping at the first frame the peer refuses),
    the frames not handed on given back. A veth's bulk also holds xdp_frames
    other devices queued (``tx_rows`` below 0: ``-1 - (row * MAX_MEMS + memory)``,
    ``fmem`` the system allocator's and the pool table's records), given back to
    their memory (``xdp_return_frame``). Returns (sent, the bytes a veth sent,
    and the pool's hot fields)."""
    if tx_veth < 0:
        went = ntx if tx_wire == 0 else _wire_tx_bulk(tx_wire, pages, w32, q64, addr_base,
                                                      tx_rows, ntx)
        for j in range(ntx):  # sent, then completed: back to the pool (frags, then head)
            loc = tx_rows[j]
            if (w32[loc, 9] & XDP_FLAGS_HAS_FRAGS) != 0:
                c, nuse, cached = _frags_free(pages, pfn_base, loc, psc, cache, ring, free,
                                              state, c, nuse, cached)
            c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
        return went, np.int64(0), c, nuse, cached
    went = 0
    vbytes = np.int64(0)
    sysm, ptab = fmem
    _veth_lock(tgt_veth, tx_veth)  # veth_xdp_xmit's producer lock over the bulk
    for j in range(ntx):
        loc = tx_rows[j]
        if loc < 0:
            mi = (-1 - loc) % MAX_MEMS
            row = (-1 - loc) // MAX_MEMS
            pfn, fdata, ln, fmeta = _mem_frame(sysm, ptab, mi, row)
            if went == j and _veth_put(tgt_veth, tx_veth, pfn, fdata, ln, fmeta):
                went += 1
                vbytes += ln
                continue
            _return_frame(sysm, ptab, mi, row)
            continue
        ln = np.int64(w32[loc, 2])
        kind = KIND_FRAME
        mb = (w32[loc, 9] & XDP_FLAGS_HAS_FRAGS) != 0
        if mb:  # a multi-buffer frame goes whole (xdp_get_frame_len), its frags with it
            ln += _ld(pages, loc, SH + SHINFO_OFF_XDP_FRAGS_SIZE, 4)
            kind = KIND_FRAME | KIND_FRAGS
        if went == j and _veth_put(tgt_veth, tx_veth, pfn_base + loc,
                                   q64[loc, 0] - addr_base - loc * FRAME_SZ, ln,
                                   np.int64(w32[loc, 4]), kind):
            went += 1
            vbytes += ln
            continue  # the peer's ring holds it now
        if mb:
            c, nuse, cached = _frags_free(pages, pfn_base, loc, psc, cache, ring, free,
                                          state, c, nuse, cached)
        c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
    _veth_unlock(tgt_veth, tx_veth)
    return went, vbytes, c, nuse, cached


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _veth_lock(tgt_veth, t):  # type: ignore[no-untyped-def]
    """``spin_lock(&rq->xdp_ring.producer_lock)`` of veth ``t``'s peer's ``xdp_ring``."""
    ring_lock(i64_view(tgt_veth[t, VETH_CUR], 1, CUR_WORDS)[0])


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _veth_unlock(tgt_veth, t):  # type: ignore[no-untyped-def]
    ring_unlock(i64_view(tgt_veth[t, VETH_CUR], 1, CUR_WORDS)[0])


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _veth_put(tgt_veth, t, pfn, data, length, meta, kind=KIND_FRAME):  # type: ignore[no-untyped-def] # noqa: E501
    """``veth_xdp_xmit`` of one frame to veth ``t``: into its peer's ``xdp_ring`` (the
    ring's columns and cursor, in place) as an ``xdp_frame`` from another device
    (``kind``: with :data:`KIND_FRAGS` a multi-buffer one, ``length`` its whole
    length, ``xdp_get_frame_len``), the caller holding the ring's lock
    (``producer_lock``, taken once per bulk); False when the peer has no NAPI
    (-ENXIO), the frame is too long for the peer or the ring is full - the kernel's
    loop stops there, the caller frees the rest."""
    if length > tgt_veth[t, VETH_MAX]:  # -1: no NAPI, nothing goes
        return False
    return ring_put(i64_view(tgt_veth[t, VETH_RING], 5, tgt_veth[t, VETH_SIZE]),
                    i64_view(tgt_veth[t, VETH_CUR], 1, CUR_WORDS)[0], pfn, data, length,
                    meta, kind)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _eg_fault(eg, k, t, s):  # type: ignore[no-untyped-def]
    """Egress program ``k``'s run of position ``s`` toward device ``t``: a fault
    counted, the first kept for the report (:meth:`DevmapEgress.account`)."""
    eg_status, eg_pc, eg_addr, eg_fault = eg[12], eg[13], eg[14], eg[16]
    if eg_status[k, s] != 0:
        if eg_fault[k, t, 0] == 0:
            eg_fault[k, t, 1] = eg_status[k, s]
            eg_fault[k, t, 2] = eg_pc[k, s]
            eg_fault[k, t, 3] = np.int64(eg_addr[k, s])
        eg_fault[k, t, 0] += 1


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _eg_exception(eg, k, t, a):  # type: ignore[no-untyped-def]
    """Egress program ``k``'s verdict ``a`` toward device ``t``, neither PASS nor
    DROP unless DROP (1, nothing counted): an ``xdp_exception`` on ``t`` (a
    verdict that is no action: counted in row 5, the first one kept)."""
    if a != 1:
        eg_exc, eg_fault = eg[15], eg[16]
        eg_exc[k, t, min(a, 5)] += 1
        if a > 4 and eg_fault[k, t, 4] == 0:
            eg_fault[k, t, 4] = a + 1


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _bq_mem(bq, t, j):  # type: ignore[no-untyped-def]
    """Bulk entry ``j`` of device ``t`` as (memory, row) in :func:`_mem_of`'s terms, with
    0 the queue's own pool: its tag (:func:`_bq_enqueue`) names another pool, else
    its entry is a row of the queue's pool or (below 0) of the system allocator."""
    loc = bq[t, 0, j]
    tag = bq[t, BQ_TAG, j]
    if tag:
        return 1 + tag, loc
    if loc < 0:
        return np.int64(1), -1 - loc
    return np.int64(0), loc


@njit(cache=True, nogil=True, _nrt=False)
def _bq_xmit_all(bq, bq_n, t, eg, sysm, w32, q64, addr_base, tgt_stats, xmit_cnt, psc,  # type: ignore[no-untyped-def] # noqa: E501
                 cache, ring, free, state, c, nuse, cached, pages, xmit):
    """``bq_xmit_all`` of device ``t``'s bulk queue: with a program (the one its first
    frame set, :func:`_bq_enqueue`; ``kk`` > 0: egress row ``kk - 1``)
    ``dev_map_bpf_prog_run`` first - the entry's program
    over the bulk with ``egress_ifindex`` = ``t``; PASS rewrites the frame from
    the buffer (``xdp_update_frame_from_buff``, a failure is a drop), DROP
    drops, anything else (ABORTED, TX, REDIRECT, unknown) counts an
    ``xdp_exception`` on the egress device and drops - then ``ndo_xdp_xmit``:
    to a NIC, whose tx completion gives the pages back, or to a veth
    (``veth_xdp_xmit``, :func:`_veth_put`), whose peer's ring takes the frames
    it sends (-ENXIO for the whole bulk when the peer has no NAPI). Dropped
    frames go back first (``xdp_return_frame_rx_napi``), then the sent ones.
    ``xmit``: the targets' wires and veth rows, the pool's pfn base. Returns the
    pool's hot fields (c, nuse, cached)."""
    b = bq_n[t, BQ_COUNT]
    kk = bq_n[t, BQ_PROG] - 1
    sent = 0
    nbytes = np.int64(0)
    tgt_wire, tgt_veth, pfn_base, ptab = xmit
    wa = tgt_wire[t]  # 0: a NIC whose transmit is a sink
    veth = tgt_veth[t, VETH_CUR] != 0
    vstop = False  # veth_xdp_xmit stopped: the rest of the bulk is dropped
    tried = 0  # frames handed to ndo_xdp_xmit
    if kk == 0:
        tried = b
        if veth:  # veth_xdp_xmit: spin_lock(&rq->xdp_ring.producer_lock) over the bulk
            _veth_lock(tgt_veth, t)
        elif wa != 0:  # the driver's tx lock over the bulk (__netif_tx_lock)
            wire_lock(i64_view(wa, 1, W_SIZE)[0])
        for j in range(b):
            loc = bq[t, 0, j]
            tag = bq[t, BQ_TAG, j]
            if veth:
                if not vstop:
                    pfn = (ptab[tag - 1, PT_PFN] + loc if tag else pfn_base + loc
                           if loc >= 0 else sysm[7] + (-1 - loc))
                    # A multi-buffer frame of the pool goes whole, with its frags flag.
                    kind = (KIND_FRAME | KIND_FRAGS if not tag and loc >= 0
                            and (w32[loc, 9] & XDP_FLAGS_HAS_FRAGS) != 0 else KIND_FRAME)
                    if _veth_put(tgt_veth, t, pfn, bq[t, 1, j], bq[t, 2, j],
                                 bq[t, 3, j], kind):
                        nbytes += bq[t, 2, j]
                        sent += 1
                        continue  # the peer's ring holds it now
                    vstop = True
            elif wa == 0 or (
                    wire_xmit(i64_view(wa, 1, W_SIZE)[0], ptab[tag - 1, PT_PAGES]
                              + loc * ptab[tag - 1, PT_PSIZE] + bq[t, 1, j], bq[t, 2, j])
                    if tag else _wire_out(wa, pages, sysm, loc, bq[t, 1, j], bq[t, 2, j])):
                nbytes += bq[t, 2, j]
                sent += 1
            if tag:  # an xdp_frame of another pool: back to it
                _return_frame_napi(sysm, ptab, 1 + tag, loc)
            elif loc < 0:  # a broadcast's clone: an order-0 page (put_page)
                _put_page(sysm, -1 - loc)
            else:
                if (w32[loc, 9] & XDP_FLAGS_HAS_FRAGS) != 0:  # a NIC's: frags, then head
                    c, nuse, cached = _frags_free(pages, pfn_base, loc, psc, cache, ring,
                                                  free, state, c, nuse, cached)
                c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
    else:
        (_ids, eg_fn, eg_ctx, eg_desc, eg_rows, eg_off, eg_len, eg_meta, eg_act, eg_offo,
         eg_leno, eg_metao, eg_status, eg_pc, eg_addr, eg_exc, eg_fault, eg_sent, eg_res) = eg
        k = kk - 1
        eg_desc[k, XDP_EGRESS] = t
        pool_frames = eg_desc[k, DESC_FRAMES]
        # The program over the bulk: one batch per memory - the page pool's pages, the
        # order-0 pages of clones, another device's pool - in the order the bulk first
        # shows them, as the Python path runs a batch per region; results kept per
        # bulk position.
        done = 0  # the memories run (bit per memory, _bq_mem)
        for j0 in range(b):
            g, _r = _bq_mem(bq, t, j0)
            if (done >> g) & 1:
                continue
            done |= 1 << g
            m = 0
            for j in range(j0, b):
                mi, row = _bq_mem(bq, t, j)
                if mi == g:
                    eg_rows[k, m] = row
                    eg_off[k, m] = bq[t, 1, j]
                    eg_len[k, m] = bq[t, 2, j]
                    eg_meta[k, m] = bq[t, 3, j]
                    eg_sent[k, m] = j
                    m += 1
            # The driver knows the other memories' pages too (DevmapEgress.driven).
            if g == 1:
                eg_desc[k, DESC_FRAMES] = np.uint64(sysm[0].ctypes.data)
            elif g > 1:
                eg_desc[k, DESC_FRAMES] = np.uint64(ptab[g - 2, PT_PAGES])
            _run(eg_fn[k], eg_ctx[k], eg_desc[k], eg_len[k], m)
            eg_desc[k, DESC_FRAMES] = pool_frames
            for s in range(m):
                _eg_fault(eg, k, t, s)
                j = eg_sent[k, s]
                eg_res[k, j, 0] = eg_act[k, s]
                eg_res[k, j, 1] = eg_offo[k, s]
                eg_res[k, j, 2] = eg_leno[k, s]
                eg_res[k, j, 3] = eg_metao[k, s]
        for j in range(b):
            mi, row = _bq_mem(bq, t, j)
            a = eg_res[k, j, 0]
            if a == 2:
                ln = eg_res[k, j, 2]
                if mi == 0:
                    ok = _to_frame(w32, q64, row, eg_res[k, j, 1], ln, eg_res[k, j, 3],
                                   addr_base)
                else:
                    ok = _frame_to_mem(sysm, ptab, mi, row, eg_res[k, j, 1], ln,
                                       eg_res[k, j, 3])
                if ok:
                    eg_sent[k, sent] = j  # its bulk position
                    sent += 1
                    nbytes += ln
                    continue
            else:
                _eg_exception(eg, k, t, a)
            if mi == 0:
                c, nuse, cached = _give(psc, cache, ring, free, state, row, c, nuse, cached)
            else:
                _return_frame_napi(sysm, ptab, mi, row)
        went = 0
        tried = sent
        if veth:  # the program ran; now ndo_xdp_xmit under the producer lock
            _veth_lock(tgt_veth, t)
        elif wa != 0:
            wire_lock(i64_view(wa, 1, W_SIZE)[0])
        for s in range(sent):  # sent, then completed: back to its memory
            mi, row = _bq_mem(bq, t, eg_sent[k, s])
            if mi == 0:
                fdata = q64[row, 0] - addr_base
                ln = np.int64(w32[row, 2])
                fmeta = np.int64(w32[row, 4])
                pfn = pfn_base + row
                src = pages.ctypes.data + fdata
                fdata -= row * FRAME_SZ
            else:  # its header in its own page (a clone's: the system allocator's)
                pfn, fdata, ln, fmeta = _mem_frame(sysm, ptab, mi, row)
                src = _mem_addr(sysm, ptab, mi, row) + fdata
            if veth:
                if not vstop and _veth_put(tgt_veth, t, pfn, fdata, ln, fmeta):
                    went += 1
                    continue  # the peer's ring holds it now
                vstop = True
                nbytes -= ln
            elif wa != 0:
                if wire_xmit(i64_view(wa, 1, W_SIZE)[0], src, ln):
                    went += 1
                else:
                    nbytes -= ln
            if mi == 0:
                c, nuse, cached = _give(psc, cache, ring, free, state, row, c, nuse, cached)
            else:
                _return_frame_napi(sysm, ptab, mi, row)
        if wa != 0 or veth:
            sent = went
    if veth:
        _veth_unlock(tgt_veth, t)
    if wa != 0 and not veth:
        wire_publish(i64_view(wa, 1, W_SIZE)[0])
        wire_unlock(i64_view(wa, 1, W_SIZE)[0])
    xmit_cnt[t, 0] += 1
    xmit_cnt[t, 1] += sent
    xmit_cnt[t, 2] += b - sent
    if veth and tried > 0 and tgt_veth[t, VETH_MAX] < 0:
        xmit_cnt[t, 3] += 1  # -ENXIO
    ts = i64_view(tgt_stats[t], 1, D_SIZE)[0]
    ts[D_TX_PACKETS] += sent
    ts[D_TX_BYTES] += nbytes
    bq_n[t, BQ_COUNT] = 0  # the program stays the bulk queue's until __dev_flush
    return c, nuse, cached


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _bq_enqueue(bq, bq_n, t, kk, ent, data, length, meta, tag):  # type: ignore[no-untyped-def] # noqa: E501
    """``bq_enqueue`` onto device ``t``'s one bulk queue of the poll: the first frame
    since ``__dev_flush`` sets its program (``kk``: 0 none, else egress row + 1),
    which the whole bulk runs whichever entry later frames came through; True
    when the bulk is full (the caller runs :func:`_bq_xmit_all`). Each entry
    keeps its frame's memory (``tag``, :data:`BQ_TAG`): 0 for a page of the
    queue's pool (``ent`` its row) or an order-0 page of the system allocator
    (``ent`` ``-1 - row``), ``1 + k`` for page pool ``k`` of the pool table
    (``ent`` the row there: an xdp_frame another device queued)."""
    if bq_n[t, BQ_PROG] == 0:
        bq_n[t, BQ_PROG] = kk + 1
    b = bq_n[t, BQ_COUNT]
    bq[t, 0, b] = ent
    bq[t, 1, b] = data
    bq[t, 2, b] = length
    bq[t, 3, b] = meta
    bq[t, BQ_TAG, b] = tag
    bq_n[t, BQ_COUNT] = b + 1
    return b + 1 == BULK


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _put_page(sysm, row):  # type: ignore[no-untyped-def]
    """``put_page`` of an order-0 page of the system allocator (under its lock)."""
    _pages, _w32, _q64, _base, ast, afree, aref, _pfn = sysm
    put_page_ir(ast, afree, aref, row)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _free_frame(sysm, psc, cache, ring, free, state, loc, c, nuse, cached):  # type: ignore[no-untyped-def] # noqa: E501
    """``xdp_return_frame_rx_napi`` of a pool page (direct recycling) or, ``loc`` below
    0, of an order-0 page (``put_page``); the pool's hot fields."""
    if loc < 0:
        _put_page(sysm, -1 - loc)
        return c, nuse, cached
    return _give(psc, cache, ring, free, state, loc, c, nuse, cached)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _sys_alloc(sysm):  # type: ignore[no-untyped-def]
    """``alloc_page`` from the system allocator (under its lock): a row with one
    reference, or -1 when memory ran out."""
    _pages, _w32, _q64, _base, ast, afree, aref, _pfn = sysm
    return alloc_page_ir(ast, afree, aref)


@njit(cache=True, nogil=True, _nrt=False)
def _xdpf_clone(sysm, src, data, length):  # type: ignore[no-untyped-def]
    """``xdpf_clone`` of the frame in the page at address ``src`` (a pool page, an
    order-0 page of the system allocator): an order-0 page with the header,
    headroom and packet copied and the header pointed at the copy; its row, or -1
    when it does not fit a page (header, headroom and packet) or memory ran out
    (``dev_map_enqueue_clone``'s -ENOMEM)."""
    spages, sw32, sq64, sbase, _ast, _afree, _aref, _pfn = sysm
    if data + length > FRAME_SZ:
        return -1
    row = _sys_alloc(sysm)
    if row < 0:
        return -1
    memcpy(spages.ctypes.data + row * spages.strides[0], src, data + length)
    sq64[row, 0] = sbase + row * FRAME_SZ + data
    sw32[row, 5] = MEM_TYPE_PAGE_ORDER0
    sw32[row, 8] = FRAME_SZ
    return row


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _dm_slot(dm_ids, map_id):  # type: ignore[no-untyped-def]
    """The devmap's row among the call's devmaps (-1: none the loop knows)."""
    for k in range(len(dm_ids)):
        if dm_ids[k] == map_id:
            return k
    return -1


@njit(cache=True, nogil=True, inline="numba", _nrt=False)  # returns a view it makes
def _dm_entries(dm_addr, dm_n, slot):  # type: ignore[no-untyped-def]
    """Devmap row ``slot``'s entries (ifindex, program id per slot), where the map keeps
    them: an update from user space shows at once, as in the kernel."""
    return u32_view(dm_addr[slot], dm_n[slot], 2)


@intrinsic
def _htab_find(typingctx, fn, index, hashes, keys, capacity, max_entries, key):  # type: ignore[no-untyped-def] # noqa: E501
    """``fn(index, hashes, keys, capacity, max_entries, key)``: the maps' hash probe in
    machine code (:func:`pyxdp.maps.hashtab.find_u32_fn`), called through its address."""
    return call_by_address("pppiii")


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _dm_elem(dmt, slot, idx):  # type: ignore[no-untyped-def]
    """The entry row of key ``idx`` in devmap row ``slot`` (-1: none): a devmap's slot
    itself; a devmap_hash's element by the maps' one hash probe, over the map's
    index in place."""
    _addr, dm_n, dm_hash = dmt
    fn = dm_hash[slot, DH_FIND]
    if fn == 0:
        return idx if 0 <= idx < dm_n[slot] else -1
    if idx < 0 or idx > U32_MAX:
        return -1
    e = _htab_find(fn, dm_hash[slot, DH_INDEX], dm_hash[slot, DH_HASHES],  # type: ignore[call-arg,var-annotated] # noqa: E501
                   dm_hash[slot, DH_KEYS], dm_hash[slot, DH_CAPACITY], dm_n[slot], idx)
    return e if e >= 0 else -1


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _dm_walk(dmt, slot, w):  # type: ignore[no-untyped-def]
    """The entry row at position ``w`` of the kernel's walk of devmap row ``slot`` (-1:
    past the last): a devmap's slots in order, a devmap_hash's buckets (its ``walk``
    array, in place)."""
    _addr, dm_n, dm_hash = dmt
    wa = dm_hash[slot, DH_WALK]
    if wa == 0:
        return np.int64(w)
    e = np.int64(u32_view(wa, 1, dm_n[slot])[0, w])
    return -1 if e == NO_SLOT else e


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _slot_ifindex(dmt, slot, idx):  # type: ignore[no-untyped-def]
    """The ifindex under key ``idx`` of devmap row ``slot`` (0: none): a broadcast's
    ``to_ifindex`` in ``xdp_redirect`` (the helper looked the key up)."""
    e = _dm_elem(dmt, slot, idx)
    if e >= 0:
        return np.int64(_dm_entries(dmt[0], dmt[1], slot)[e, 0])
    return 0


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _own_veth(tgt_veth, qcur):  # type: ignore[no-untyped-def]
    """The veth whose peer's ring is the one this call polls (-1: none): its frames
    would be this call's own input, so redirects to it take the Python path."""
    own_t = -1
    for t in range(len(tgt_veth)):
        if tgt_veth[t, VETH_CUR] == np.int64(qcur.ctypes.data):
            own_t = t
    return own_t


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _veth_fed(tgt_veth):  # type: ignore[no-untyped-def]
    """Whether a veth's peer with NAPI holds frames in its ``xdp_ring``: veth_xdp_xmit
    scheduled that NAPI, which the kernel polls right after this one."""
    for t in range(len(tgt_veth)):
        if tgt_veth[t, VETH_CUR] != 0 and tgt_veth[t, VETH_MAX] >= 0:
            if load_acquire64(i64_view(tgt_veth[t, VETH_CUR], 1, CUR_WORDS)[0], R_COUNT) != 0:
                return True
    return False


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _frame_frags_ahead(qcols, qhead, qcount, budget):  # type: ignore[no-untyped-def]
    """Whether the ring's next poll (its first ``budget`` entries) holds a multi-buffer
    ``xdp_frame`` another device queued (``ndo_xdp_xmit``), which the Python poll
    takes: this call then ends before that poll, so that the Python poll takes the
    same entries as the reference poll does."""
    size = qcols.shape[1]
    for k in range(min(qcount, budget)):
        kind = qcols[4, (qhead + k) % size]
        if (kind & KIND_FRAME) != 0 and (kind & KIND_FRAGS) != 0:
            return True
    return False


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _dev_target(dm_ids, dmt, eg_ids, red, i):  # type: ignore[no-untyped-def]
    """The device frame ``i``'s redirect names (``dev_map_enqueue`` of a devmap or
    devmap_hash entry, ``dev_xdp_enqueue`` of ``bpf_redirect``): (map row - the
    devmaps' count for an ifindex -, ifindex, bulk queue: 0 without a program,
    else its egress row + 1, -1 for a program the native loop does not run);
    map row -1 when the native loop does not know the map (or a broadcast),
    ifindex 0 for an empty entry or a key not in the map."""
    map_id = np.int64(red[i, 0])
    map_type = np.int64(red[i, 1])
    idx = np.int64(red[i, 2])
    slot = -1
    ifx = np.int64(0)
    kk = 0
    if ((map_type == DEVMAP or map_type == DEVMAP_HASH)
            and (np.int64(red[i, 3]) & BPF_F_BROADCAST) == 0):
        slot = _dm_slot(dm_ids, map_id)
        e = _dm_elem(dmt, slot, idx) if slot >= 0 else -1
        if e >= 0:
            ent = _dm_entries(dmt[0], dmt[1], slot)
            ifx = np.int64(ent[e, 0])
            pid = np.int64(ent[e, 1])
            if pid != 0:
                kk = _egress_row(eg_ids, pid) + 1
                if kk == 0:  # a program the native loop does not run
                    kk = -1
    elif map_type == 0 and map_id == INT_MAX:
        slot = len(dm_ids)
        ifx = idx
    return slot, ifx, kk


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _fwd_err(tgt_ok, tgt_err, tgt_mtu, ifx, length):  # type: ignore[no-untyped-def]
    """How ``__xdp_enqueue``/``xdp_ok_fwd_dev`` judge a frame of ``length`` bytes
    for device ``ifx`` of the native targets: 0 it goes, an errno (positive) the
    redirect fails with (no device, no ``ndo_xdp_xmit``, down, too long), -1 the
    Python path judges it (a target only it sends to; every device of a call
    without targets, ``FwdTable.none``, whose ``err`` is 0)."""
    if len(tgt_err) == 0:
        return -1
    if ifx <= 0 or ifx >= len(tgt_ok):
        return EINVAL
    ok = tgt_ok[ifx]
    if ok == 0:
        e = tgt_err[ifx]
        return e if e != 0 else -1
    if ok != 1:
        return -1
    return EMSGSIZE if length > tgt_mtu[ifx] else 0


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _gfwd_err(g_ok, g_err, g_mtu, stack_ok, ifx, length):  # type: ignore[no-untyped-def]
    """:func:`_fwd_err` for an skb (``xdp_do_generic_redirect``'s ``xdp_ok_fwd_dev``
    over the generic targets): no device, down, too long; -1 also for a target
    :func:`_generic_xmit` does not send to (:func:`_generic_ok`)."""
    if len(g_err) == 0:
        return -1
    if ifx <= 0 or ifx >= len(g_ok):
        return EINVAL
    ok = g_ok[ifx]
    if ok == 0:
        e = g_err[ifx]
        return e if e != 0 else -1
    if length > g_mtu[ifx]:
        return EMSGSIZE
    return 0 if _generic_ok(ok, stack_ok, length) else -1


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _xsk_gone(xm, map_id, idx):  # type: ignore[no-untyped-def]
    """Whether XSKMAP ``map_id`` (a row of ``xm``) has no socket at ``idx`` any more
    (deleted after the helper ran): ``__xsk_map_redirect`` fails with -EINVAL."""
    for k in range(len(xm)):
        if xm[k, 0] == map_id:
            return not (0 <= idx < xm[k, 1]) or ld32(xm[k, 2], 2 * idx) == 0
    return False


@njit(cache=True, nogil=True, _nrt=False)
def _mem_addr(sysm, ptab, mi, row):  # type: ignore[no-untyped-def]
    """The address of page ``row`` of memory ``mi`` (:func:`_mem_of`)."""
    if mi == 1:
        spages = sysm[0]
        return np.int64(spages.ctypes.data) + row * spages.strides[0]
    return ptab[mi - 2, PT_PAGES] + row * ptab[mi - 2, PT_PSIZE]


@njit(cache=True, nogil=True, _nrt=False)
def _frame_redirect(fmem, dmt, dm_ids, eg_ids, red, i, tgt_ok, tgt_err, tgt_mtu, own_t,  # type: ignore[no-untyped-def] # noqa: E501
                    mi, loc, data, length, meta):
    """How the native loop redirects frame ``i``, an xdp_frame in memory ``mi``
    (:func:`_mem_of`) another device queued, to one device: 0 it goes (converted in
    its memory here, ``xdp_update_frame_from_buff``; into the device's bulk queue,
    whose program - the entry's or the one the bulk already runs - runs over it
    in its memory at the flush), an errno the redirect fails with, -1 the Python
    dispatch takes it (a target only Python sends to, an entry program not on the
    JIT). Not for broadcasts, cpumaps and XSKMAP redirects (the caller's)."""
    sysm, ptab = fmem
    slot, ifx, kk = _dev_target(dm_ids, dmt, eg_ids, red, i)
    if slot < 0 or ifx == own_t or kk < 0:
        return -1
    e = _fwd_err(tgt_ok, tgt_err, tgt_mtu, ifx, length)
    if e != 0:
        return e
    if not _frame_to_mem(sysm, ptab, mi, loc, data, length, meta):
        return EOVERFLOW
    return 0


@njit(cache=True, nogil=True, _nrt=False)
def _bcast_check(dm_ids, dmt, eg_ids, tgt_ok, self_ifindex, own_t, map_id, idx, flags):  # type: ignore[no-untyped-def] # noqa: E501
    """Whether the native loop can broadcast this frame: (devmap row, last target's
    ifindex); ``len(tgt_ok)`` when there is no target, -1 when the Python path
    must (a target the loop does not send to, ``own_t`` - the veth whose peer's ring
    this call polls -, an entry program the loop does not run, a slot naming an
    unknown device)."""
    slot = _dm_slot(dm_ids, map_id)
    nif = len(tgt_ok)
    if slot < 0 or _slot_ifindex(dmt, slot, idx) >= nif:
        return slot, -1
    ent = _dm_entries(dmt[0], dmt[1], slot)
    last = np.int64(nif)
    for w in range(dmt[1][slot]):
        e = _dm_walk(dmt, slot, w)
        if e < 0:
            break
        t = np.int64(ent[e, 0])
        if t == 0:
            continue
        if t >= nif:
            return slot, -1
        ok = tgt_ok[t]
        if ok == 0 or ((flags & BPF_F_EXCLUDE_INGRESS) != 0 and t == self_ifindex):
            continue
        if ok != 1 or t == own_t:
            return slot, -1
        if ent[e, 1] != 0 and _egress_row(eg_ids, np.int64(ent[e, 1])) < 0:
            return slot, -1
        last = t
    return slot, last


@njit(cache=True, nogil=True, _nrt=False)
def _bcast(dmt, eg_ids, tgt_ok, tgt_mtu, self_ifindex, slot, flags, loc, data,  # type: ignore[no-untyped-def] # noqa: E501
           length, none, tag, pages, sysm, bq, bq_n, eg, w32, q64, addr_base, tgt_stats,
           xmit_cnt, psc, cache, ring, free, state, c, nuse, cached, xmit, fsz, tgt_err):
    """``dev_map_enqueue_multi`` of a checked frame (:func:`_bcast_check`): a clone
    to every target valid for it (:func:`_bcast_valid`) but the last (entry order;
    none when memory ran out), the frame itself to the last valid one, each into
    its bulk queue; no valid target: freed. ``none``: no target, the frame is
    consumed. ``loc``: a
    pool page, or below 0 an order-0 page (a zero-copy frame's copy, an xdp_frame
    another device queued); with ``tag`` > 0 a page of pool ``tag - 1`` of the pool
    table (an xdp_frame another device queued: it goes back there, and its bulk
    entry keeps the tag). ``fsz`` > 0: a multi-buffer frame of the pool with that
    many bytes of frags (its frags flag set): ``dev_map_enqueue_clone`` refuses to
    clone it, so it goes whole to its one valid target; with none or two or more
    (-EOPNOTSUPP) it is freed, frags then head. A clone that finds no page
    (-ENOMEM) stops the walk, the frame freed. Returns the pool's hot fields and
    0 or the redirect's error (positive)."""
    ptab = xmit[3]
    whole = length + fsz
    nv, last_w = np.int64(0), np.int64(-1)  # valid targets, the last one's walk position
    if not none:
        nv, last_w = _bcast_valid_n(dmt, tgt_ok, tgt_mtu, tgt_err, self_ifindex, slot, flags,
                                    whole, fsz > 0)
    if tag:
        mi = 1 + tag
        if none:
            _return_frame_napi(sysm, ptab, mi, loc)
            return c, nuse, cached, 0
        src = ptab[tag - 1, PT_PAGES] + loc * ptab[tag - 1, PT_PSIZE]
        meta = _mem_frame(sysm, ptab, mi, loc)[3]
    else:
        if fsz > 0 and nv != 1:
            # Nothing to send to, or a clone refused (-EOPNOTSUPP): freed, frags first.
            c, nuse, cached = _frags_free(pages, xmit[2], loc, psc, cache, ring, free, state,
                                          c, nuse, cached)
            c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
            return c, nuse, cached, EOPNOTSUPP if nv >= 2 else 0
        if none:
            c, nuse, cached = _free_frame(sysm, psc, cache, ring, free, state, loc, c, nuse,
                                          cached)
            return c, nuse, cached, 0
        src = pages.ctypes.data + loc * pages.strides[0] if loc >= 0 else \
            sysm[0].ctypes.data + (-1 - loc) * sysm[0].strides[0]
        meta = np.int64(w32[loc, 4] if loc >= 0 else sysm[1][-1 - loc, 4])
    excl = (flags & BPF_F_EXCLUDE_INGRESS) != 0
    slots = _dm_entries(dmt[0], dmt[1], slot)
    end = dmt[1][slot]
    w = 0
    while w < end:
        e0 = _dm_walk(dmt, slot, w)
        if e0 < 0:
            break
        t = np.int64(slots[e0, 0])
        w += 1
        if not _bcast_valid(tgt_ok, tgt_mtu, tgt_err, t, excl, self_ifindex, whole, fsz > 0):
            continue
        nxt = w - 1 != last_w  # the last valid target gets the frame, the others clones
        pid = np.int64(slots[e0, 1])
        kk = 0 if pid == 0 else _egress_row(eg_ids, pid) + 1
        etag = 0
        if nxt:
            row = _xdpf_clone(sysm, src, data, length)
            if row < 0:
                # -ENOMEM: the walk stops, the clones queued stay, the frame is freed.
                if tag:
                    _return_frame_napi(sysm, ptab, 1 + tag, loc)
                    return c, nuse, cached, ENOMEM
                c, nuse, cached = _free_frame(sysm, psc, cache, ring, free, state, loc, c,
                                              nuse, cached)
                return c, nuse, cached, ENOMEM
            ent = -1 - row
        else:
            ent = loc
            etag = tag
        if _bq_enqueue(bq, bq_n, t, kk, ent, data, length + (0 if nxt else fsz), meta, etag):
            c, nuse, cached = _bq_xmit_all(bq, bq_n, t, eg, sysm, w32, q64, addr_base,
                                           tgt_stats, xmit_cnt, psc, cache, ring, free, state,
                                           c, nuse, cached, pages, xmit)
        if not nxt:
            return c, nuse, cached, 0
    # No target valid for this frame (is_valid_dst): freed.
    if tag:
        _return_frame_napi(sysm, ptab, 1 + tag, loc)
        return c, nuse, cached, 0
    c, nuse, cached = _free_frame(sysm, psc, cache, ring, free, state, loc, c, nuse, cached)
    return c, nuse, cached, 0


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _bcast_valid(tgt_ok, tgt_mtu, tgt_err, t, excl, self_ifindex, whole, frags):  # type: ignore[no-untyped-def] # noqa: E501
    """``is_valid_dst`` of a broadcast target for a frame of ``whole`` bytes: sent
    to by the loop, not the excluded ingress, its MTU (``xdp_ok_fwd_dev``), and
    ``NDO_XMIT_SG`` (``tgt_err`` 0) for a multi-buffer frame."""
    return (t != 0 and tgt_ok[t] == 1 and not (excl and t == self_ifindex)
            and whole <= tgt_mtu[t] and (not frags or tgt_err[t] == 0))


@njit(cache=True, nogil=True, _nrt=False)
def _bcast_valid_n(dmt, tgt_ok, tgt_mtu, tgt_err, self_ifindex, slot, flags, whole, frags):  # type: ignore[no-untyped-def] # noqa: E501
    """How many targets of a broadcast (:func:`_bcast`'s walk) are valid for a frame
    of ``whole`` bytes (a frags frame with two or more fails, its clone refused), and
    the walk position of the last one (-1: none), which gets the frame itself."""
    excl = (flags & BPF_F_EXCLUDE_INGRESS) != 0
    slots = _dm_entries(dmt[0], dmt[1], slot)
    n, last = 0, np.int64(-1)
    for w in range(dmt[1][slot]):
        e = _dm_walk(dmt, slot, w)
        if e < 0:
            break
        if _bcast_valid(tgt_ok, tgt_mtu, tgt_err, np.int64(slots[e, 0]), excl, self_ifindex,
                        whole, frags):
            n += 1
            last = np.int64(w)
    return n, last


@njit(cache=True, nogil=True, _nrt=False)
def _generic_xmit(gt, sysm, t, page, data, length):  # type: ignore[no-untyped-def]
    """``generic_xdp_tx`` of an skb on device ``t`` of the generic targets ``gt``
    (:attr:`pyxdp.net.devmap.FwdTable.generic`'s ok, stats, peers and veth rows,
    and CPU 0's stack records): counted as sent; a veth's ``veth_xmit`` hands it
    to its peer: without an XDP program the peer's stack receives it, a list of
    one, on CPU 0's records as on the Python path; with a native or generic one
    ``veth_xdp_rx`` (lo with a generic program: ``netif_rx``) queues a copy, in an
    order-0 page of the system allocator ``sysm``, on the peer queue's ring (a full
    ring or no page: the peer's ``rx_dropped``), for the peer's NAPI to copy into
    its pool (:data:`~pyxdp.net.frames.KIND_SKB`): no page of a pool another
    thread may be polling is taken here."""
    g_ok, g_stats, g_peer, g_veth, srec0 = gt
    ts = i64_view(g_stats[t], 1, D_SIZE)[0]
    ts[D_TX_PACKETS] += 1
    ts[D_TX_BYTES] += length
    ok = g_ok[t]
    if ok == 2 or ok == 4:
        peer = g_peer[t]
        ps = i64_view(g_stats[peer], 1, D_SIZE)[0]
        if ok == 2:
            ps[D_RX_PACKETS] += 1
            ps[D_RX_BYTES] += length
            srec0[0][M_BATCHES] += 1
            stack_rcv_one(page, data, length, peer, srec0)
            return
        size = g_veth[t, VETH_SIZE]
        qcols = i64_view(g_veth[t, VETH_RING], 5, size)
        qcur = i64_view(g_veth[t, VETH_CUR], 1, CUR_WORDS)[0]
        spages, _w32, _q64, _base, ast, afree, aref, spfn = sysm
        row = veth_rx_page(ps, (ast, afree, aref), qcols, qcur, False)
        if row >= 0:
            memcpy(spages.ctypes.data + row * spages.strides[0] + NET_SKB_PAD,
                   page.ctypes.data + data, length)
            veth_rx_queue(qcols, qcur, spfn + row, length)


@njit(cache=True, nogil=True, _nrt=False)
def _generic_dev_xmit(gt, eg, sysm, t, kk, page, data, length):  # type: ignore[no-untyped-def] # noqa: E501
    """``dev_map_generic_redirect`` past ``xdp_ok_fwd_dev``: without an entry program
    (``kk`` 0) the skb is sent (:func:`_generic_xmit`); with one (egress row ``kk -
    1``) ``dev_map_bpf_prog_run_skb`` first - the program over a copy of the skb
    at ``XDP_PACKET_HEADROOM`` in an order-0 page of the system allocator (as the
    Python path runs it; none left: the skb is dropped), ``egress_ifindex`` =
    ``t`` - then PASS sends what it left, DROP drops, anything else counts an
    ``xdp_exception`` on ``t`` and drops. ``gt``: the generic targets
    (:func:`_generic_xmit`)."""
    if kk == 0:
        _generic_xmit(gt, sysm, t, page, data, length)
        return
    row = _sys_alloc(sysm)
    if row < 0:
        return
    spages = sysm[0]
    memcpy(spages.ctypes.data + row * spages.strides[0] + HEADROOM, page.ctypes.data + data,
           length)
    eg_fn, eg_ctx, eg_desc, eg_rows, eg_off, eg_len, eg_meta = eg[1:8]
    eg_act, eg_offo, eg_leno = eg[8], eg[9], eg[10]
    k = kk - 1
    eg_desc[k, XDP_EGRESS] = t
    pool_frames = eg_desc[k, DESC_FRAMES]
    eg_desc[k, DESC_FRAMES] = np.uint64(spages.ctypes.data)
    eg_rows[k, 0] = row
    eg_off[k, 0] = HEADROOM
    eg_len[k, 0] = length
    eg_meta[k, 0] = 0
    _run(eg_fn[k], eg_ctx[k], eg_desc[k], eg_len[k], 1)
    eg_desc[k, DESC_FRAMES] = pool_frames
    _eg_fault(eg, k, t, 0)
    a = np.int64(eg_act[k, 0])
    if a == 2:
        _generic_xmit(gt, sysm, t, spages[row], np.int64(eg_offo[k, 0]),
                      np.int64(eg_leno[k, 0]))
    else:
        _eg_exception(eg, k, t, a)
    _put_page(sysm, row)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _generic_ok(ok, stack_ok, length):  # type: ignore[no-untyped-def]
    """Whether :func:`_generic_xmit` sends an skb of ``length`` bytes to a target of
    :attr:`pyxdp.net.devmap.FwdTable.generic` kind ``ok``, or one down (0, which
    refuses it): not when the Python path must - kind 3, a peer's stack the call
    cannot reach, a packet a veth peer's page cannot hold (multi-buffer there)."""
    return ok == 0 or ok == 1 or (ok == 2 and stack_ok) or (ok == 4 and length <= MAX_DMA)


@njit(cache=True, nogil=True, _nrt=False)
def _gbcast_check(dm_ids, dmt, eg_ids, g_ok, g_err, g_mtu, stack_ok, self_ifindex, map_id,  # type: ignore[no-untyped-def] # noqa: E501
                  idx, flags, length):
    """Whether the native loop can broadcast this generic skb
    (``dev_map_redirect_multi``): (devmap row, ``to_ifindex`` of the trace - the
    device under key ``idx``, 0 for none -, the errno of the first target
    ``xdp_ok_fwd_dev`` refuses - gone, down, shorter than ``length`` - which ends
    the broadcast, and the walk position it ends at); ``to_ifindex`` -1 when the
    Python path must: a target before that end it does not transmit on
    (:func:`_generic_ok`) or whose entry program it does not run."""
    slot = _dm_slot(dm_ids, map_id)
    nif = len(g_ok)
    if slot < 0 or len(g_err) == 0:
        return slot, -1, 0, 0
    to = _slot_ifindex(dmt, slot, idx)
    if to >= nif:
        return slot, -1, 0, 0
    ent = _dm_entries(dmt[0], dmt[1], slot)
    end = dmt[1][slot]
    for w in range(end):
        e = _dm_walk(dmt, slot, w)
        if e < 0:
            break
        t = np.int64(ent[e, 0])
        if t == 0 or ((flags & BPF_F_EXCLUDE_INGRESS) != 0 and t == self_ifindex):
            continue
        err = _gfwd_err(g_ok, g_err, g_mtu, stack_ok, t, length)
        if err > 0:
            return slot, to, err, w
        if err < 0 or (ent[e, 1] != 0 and _egress_row(eg_ids, np.int64(ent[e, 1])) < 0):
            return slot, -1, 0, 0
    return slot, to, 0, end


@njit(cache=True, nogil=True, _nrt=False)
def _gbcast(dmt, gt, eg, sysm, slot, self_ifindex, flags, page, data, length, wend):  # type: ignore[no-untyped-def] # noqa: E501
    """``dev_map_redirect_multi`` of a checked skb (:func:`_gbcast_check`: every
    target before walk position ``wend`` takes it): in the map's walk order, a
    clone (the same bytes) to each, through its entry's program and sent by
    :func:`_generic_dev_xmit`; the skb itself is the caller's to free."""
    eg_ids = eg[0]
    ent = _dm_entries(dmt[0], dmt[1], slot)
    for w in range(wend):
        e = _dm_walk(dmt, slot, w)
        if e < 0:
            break
        t = np.int64(ent[e, 0])
        if t == 0 or ((flags & BPF_F_EXCLUDE_INGRESS) != 0 and t == self_ifindex):
            continue
        pid = np.int64(ent[e, 1])
        kk = 0 if pid == 0 else _egress_row(eg_ids, pid) + 1
        _generic_dev_xmit(gt, eg, sysm, t, kk, page, data, length)


@njit(cache=True, nogil=True, _nrt=False)
def native_polls(max_polls, budget, jit, pool, rxq, gen, dev, tgt, dm, xsk, stk, cm, out):  # type: ignore[no-untyped-def] # noqa: E501
    """Up to ``max_polls`` NAPI polls of ``budget`` frames; stops early when the
    ring and generator are dry, when a poll deferred frames to Python, when the
    queue's copy-mode AF_XDP socket ran out of fill buffers, or on an
    accounting error. Returns the frames processed.

    Arguments are the objects' own records, grouped (see :mod:`pyxdp.net.napi`,
    which builds them): ``jit`` the JIT batch entry and its I/O arrays, ``pool``
    the page pool (state record, cache, ring, free list, page states), ``rxq``
    the rx ring (slots, cursor), ``gen`` the generator (templates, state),
    ``dev`` the device (ifindex, XDP_TX allowed, counters, TX bulk), ``tgt``
    redirect targets, ``dm`` devmaps, ``xsk`` the queue's AF_XDP socket, ``stk``
    the stack, ``cm`` cpumap entries, ``out`` what the call reports (control,
    trace sums, deferred frames).

    The pool's hot fields and the per-frame counters live in local variables
    for the whole call (written back at the end): kept in the arrays, every
    update would be a load and a store the compiler cannot hoist, since the
    arrays might alias."""
    (fn, ctx_addr, desc, rows, d_off, d_len, d_meta, act, off_out, len_out, meta_out, status,
     pc_out, addr_out, red) = jit
    pages, w32, q64, addr_base, pfn_base, psc, cache, ring, free, state = pool
    # fon: xdp_frames other devices queued are taken (in the queue's pool, the system
    # allocator or a pool of the table ptab); fx their scratch (FX_COLS), faddr the
    # memories' pages addresses (by FX_MEM). A multi-buffer poll's frag table (ft rows,
    # fb their frags' page bounds, fl per frame: it has frags) when fr_on; the
    # generator's frames past a page's packet room are built there too; lin: a
    # multi-buffer skb's bytes for the stack (skb_copy_bits of head and frags).
    qcols, qcur, fon, ptab, fx, faddr, fr_on, ft, fb, fl, lin = rxq
    tpl, tpl_len, gst = gen
    self_ifindex, tx_ok, ds, tx_rows, generic, tx_wire = dev
    # Without a native program a driver gives its skbs NET_SKB_PAD of headroom.
    dma_off = NET_SKB_PAD if generic else HEADROOM
    tgt_ok, tgt_mtu, tgt_stats, tgt_wire, tgt_veth, tgt_err, bq, bq_n, xmit_cnt = tgt
    xmit = (tgt_wire, tgt_veth, pfn_base, ptab)
    own_t = _own_veth(tgt_veth, qcur)
    # A veth's XDP_TX (veth_xdp_tx): the bulk goes to its own ndo_xdp_xmit, its
    # peer's xdp_ring (its row of the veth table; -1: not a veth, or the Python path's).
    tx_veth = -1
    if (tx_ok and not generic and self_ifindex < len(tgt_veth)
            and tgt_veth[self_ifindex, VETH_CUR] != 0):
        tx_veth = self_ifindex
    # A veth's generic XDP_TX onto its peer's xdp_ring (veth_xdp_rx) schedules the
    # peer's NAPI as a redirect there does (lo's own backlog is the ring polled here).
    g_txv = (generic and tx_ok == 2 and self_ifindex < len(tgt_ok)
             and tgt_ok[self_ifindex] == 4 and tgt_wire[self_ifindex] != self_ifindex)
    dm_ids, dm_addr, dm_n, dm_hash, red_cnt, eg, sysm = dm
    dmt = (dm_addr, dm_n, dm_hash)
    eg_ids = eg[0]
    fmem = (sysm, ptab)  # the memories of xdp_frames other devices queued
    cfm = (sysm, ptab, pages, w32)  # ... and the pool's frames, for a cpumap's refusals
    xon, xp, xfq, xrx, xsk_sk, xm, xt = xsk
    ctl, cnt, defer = out
    nif = len(tgt_ok)
    npages = len(state)
    ntpl = len(tpl_len)
    total = 0
    c = psc[P_COUNT]
    nuse = psc[P_NUSE]
    fast = 0
    cached = 0
    qcount = 0
    gpos = gst[G_POS]
    gleft = _gen_left(gst)
    gmade = 0
    nbytes = 0
    polls = 0
    n_ab = 0
    n_drop = 0
    n_tx = 0
    n_tx_err = 0  # XDP_TX frames a wire had no room for (ndo_xdp_xmit's drops)
    n_red = 0
    n_bad = 0
    tx_events = 0
    tx_sent = 0
    tx_seen = 0
    tx_bytes = np.int64(0)
    g_sent = 0  # skbs generic_xdp_tx sent (counted as the device's transmits)
    xtouched = False
    # XDP_PASS delivered here: the stack's records of this CPU (stack_ok == 0: deferred);
    # s_list: a poll's skbs are one list (netif_receive_skb_list: ip_list_rcv's route
    # hint), else each one its own (process_backlog).
    stack_ok, srec, srec0, s_list = stk
    mib = srec[0]
    route = srec[7]
    # A generic call's targets (pyxdp.net.devmap.FwdTable.generic: the wires' column
    # holds a veth's peer) and the stack records a veth's peer receives on.
    gt = (tgt_ok, tgt_stats, tgt_wire, tgt_veth, srec0)
    n_pass = 0
    # cpumap: maps (ids, slot offsets, sizes, slot -> entry row), the entries' rings by
    # address, their bulk queues of 8 (pfn, data, len, meta), enqueue sums, redirects.
    cm_ids, cm_off, cm_n, cm_ent, cq_tab, cbq, cbq_n, cq_cnt, cm_red, cm_inline = cm
    ncq = len(cq_tab)
    sys_pfn = sysm[7]
    sys_ref = sysm[6]
    n_sys = len(sys_ref)
    cow = (pages, pfn_base, psc, cache, ring, free, state)  # the pool skbs are copied into
    red_seen = 0  # n_red at the last look at the veth rings
    # XDP_TX of a multi-buffer frame natively: to a NIC's transmit that is a sink, or a
    # veth's (veth_xdp_tx, onto its peer's xdp_ring);
    # redirects of them where no devmap program runs (_frags_red_ok).
    ftx = tx_ok != 0 and not generic and tx_wire == 0
    fred = not generic and len(eg_ids) == 0
    for _poll in range(max_polls):
        n = 0
        nfr = 0  # multi-buffer frames in this poll (fl, and their rows of ft)
        nsd = 0  # skbs the poll took and dropped (no pages): they count against the budget
        fbytes = 0  # ... their frags' bytes
        nfx = 0  # xdp_frames in this poll (fx holds every frame's memory and kind)
        nfor = 0  # ... of them in memories other than the queue's pool
        # Pages the cpumap kthreads freed come back (not directly: ring or release);
        # a generic skb's order-0 copy goes back to the system allocator (put_page).
        # Polls on other CPUs and Python's reclaim consume the same return rings:
        # under each ring's consumer lock.
        for r in range(ncq):
            r_slots = i64_view(cq_tab[r, 3], 1, cq_tab[r, 4])
            r_idx = i64_view(cq_tab[r, 5], 1, 16)[0]
            if ring_count(r_idx) == 0:
                continue
            spin_lock(r_idx, IDX_CONS_LOCK)
            avail = ring_count(r_idx)
            if avail:
                rsize = r_slots.shape[1]
                cons = r_idx[IDX_CONS]
                j = 0
                while j < avail:
                    pfn = r_slots[0, (cons + j) % rsize]
                    loc = pfn - pfn_base
                    if 0 <= loc < npages and state[loc] == _INUSE:
                        if (w32[loc, 9] & XDP_FLAGS_HAS_FRAGS) != 0:  # its frags first
                            for f in range(np.int64(pages[loc, SH + SHINFO_OFF_NR_FRAGS])):
                                _put_ring(psc, ring, free, state,
                                          _ld(pages, loc, FRAG0 + SKB_FRAG_SIZE * f, 8)
                                          - pfn_base)
                        _put_ring(psc, ring, free, state, loc)
                    elif generic and 0 <= pfn - sys_pfn < n_sys and sys_ref[pfn - sys_pfn] > 0:
                        _put_page(sysm, pfn - sys_pfn)
                    elif fon:
                        # An xdp_frame another device queued here: back to its memory
                        # (that pool's ring, not directly; an order-0 page: put_page).
                        mi, row = _mem_of(sysm, ptab, pfn)
                        if mi < 0:
                            break  # a memory this call does not know: Python returns it
                        _return_frame(sysm, ptab, mi, row)
                    else:
                        break  # another region's page: Python returns it
                    j += 1
                store_release64(r_idx, IDX_CONS, cons + j)
            spin_unlock(r_idx, IDX_CONS_LOCK)
        # The rx ring first (frames a NIC received or veth copied), pool pages only,
        # taken under its lock (producers on other threads: veth_xdp_xmit).
        ring_lock(qcur)
        qhead = qcur[Q_HEAD]
        qcount = qcur[Q_COUNT]
        # A multi-buffer xdp_frame another device queued is the Python poll's, and so
        # is the whole poll it falls in (the entries veth_xdp_rcv takes at once).
        ahead = fon != 0 and _frame_frags_ahead(qcols, qhead, qcount, budget)
        while not ahead and n + nsd < budget and qcount > 0:
            kind = qcols[4, qhead]
            if kind & KIND_SKB:
                # An skb another device's transmit queued (veth_xdp_rx, netif_rx): this
                # NAPI copies it into pages of its pool (veth_convert_skb_to_xdp_buff's
                # skb_pp_cow_data: past a page's packet room a head and page frags,
                # which the Python path's program run takes), the skb's pages freed;
                # too few pages: dropped (rx_dropped).
                psc[P_COUNT] = c
                psc[P_NUSE] = nuse
                loc = skb_pp_cow_data(cow, sysm, qcols[0, qhead], qcols[1, qhead],
                                      qcols[2, qhead], kind & KIND_FRAGS)
                c = psc[P_COUNT]
                nuse = psc[P_NUSE]
                if loc == BAD_SKB:
                    ctl[C_ERROR] = -1
                    break
                if not generic:
                    # veth_xdp_rcv counts the skb's length after eth_type_trans (the
                    # Ethernet header pulled); an skb it drops is counted all the same.
                    ds[D_RX_BYTES] -= ETH_HLEN
                if loc < 0:
                    # veth_xdp_rcv's loop counts the entry it consumed (Python's poll
                    # consumes a budget of entries, then converts them).
                    ds[D_RX_DROPPED] += 1
                    if not generic:
                        ds[D_RX_PACKETS] += 1
                        ds[D_RX_BYTES] += qcols[2, qhead]
                    nsd += 1
                    qhead = (qhead + 1) % qcols.shape[1]
                    qcount -= 1
                    continue
                # Frags past a page's packet room, whatever the skb had
                # (skb_pp_cow_data splits at max_head_size).
                kind = KIND_FRAGS if qcols[2, qhead] > MAX_DMA else 0
                qcols[0, qhead] = loc + pfn_base
                qcols[1, qhead] = HEADROOM
                qcols[3, qhead] = 0
                qcols[4, qhead] = kind
            loc = qcols[0, qhead] - pfn_base
            mi = 0
            fsz = 0
            if kind == KIND_FRAGS and fr_on:
                # A multi-buffer buffer of this pool (a NIC's DMA, an skb's copy): its
                # frags listed in the poll's frag table. A poll holding xdp_frames
                # leaves it to the next poll (one table per batch, rows by position).
                if nfx:
                    break
                if loc < 0 or loc >= npages or state[loc] != _INUSE:
                    ctl[C_ERROR] = -1
                    break
                fsz = _frags_row(pages, pfn_base, state, loc, ft, fb, n)
                if fsz < 0:
                    break  # a frag in memory this call does not know: Python's
            elif kind != 0:
                # An xdp_frame another device queued (ndo_xdp_xmit): taken when its
                # memory is one the call knows, in a poll without multi-buffer frames
                # (those of other memories and generic XDP's are the Python path's).
                if kind != KIND_FRAME or fon == 0 or nfr:
                    break
                if loc < 0 or loc >= npages:
                    mi, loc = _mem_of(sysm, ptab, qcols[0, qhead])
                    if mi < 0:
                        break  # a memory this call does not know: the next call's
                if nfx == 0:
                    for j in range(n):
                        fx[j, FX_MEM] = 0
                        fx[j, FX_KIND] = 0
                nfx += 1
                if mi != 0:
                    nfor += 1
            if mi == 0 and (loc < 0 or loc >= npages or state[loc] != _INUSE):
                # Not a page this pool handed out: stop before touching it.
                ctl[C_ERROR] = -1
                break
            if nfx:
                fx[n, FX_MEM] = mi
                fx[n, FX_KIND] = kind
            qhead = _from_ring(qcols, qhead, loc, rows, d_off, d_len, d_meta, n)
            if fr_on:
                fl[n] = fsz > 0
                if fsz > 0:
                    d_len[n] -= fsz  # the program's linear part: the head's bytes
                    nfr += 1
                    fbytes += fsz
                else:
                    ft[n, FRAG_NR] = 0
            qcount -= 1
            n += 1
        qcur[Q_HEAD] = qhead
        qcur[Q_COUNT] = qcount
        ring_unlock(qcur)
        # Then the generator: a pool page per frame, the template copied in (DMA).
        while n + nsd < budget and ntpl > 0 and gleft != 0 and qcount == 0:
            if tpl_len[gpos] > MAX_DMA:
                # Past a page's packet room (fr_on: not generic, no xdp_frames in the
                # poll): the NIC's DMA into a head and page frags of the pool
                # (skbuff_native.buf_dma); too few pages drops the frame, those taken
                # back into the pool's ring (the Python path's fill runs outside the
                # pool's NAPI).
                if not fr_on or nfx:
                    break
                ln = tpl_len[gpos]
                psc[P_COUNT] = c
                psc[P_NUSE] = nuse
                loc = buf_dma(cow, tpl.ctypes.data + gpos * tpl.strides[0], tpl.shape[1], ln,
                              False)
                c = psc[P_COUNT]
                nuse = psc[P_NUSE]
                if loc < 0:
                    ds[D_RX_DROPPED] += 1
                    break
                fsz = _frags_row(pages, pfn_base, state, loc, ft, fb, n)
                rows[n] = loc
                d_off[n] = HEADROOM
                d_len[n] = ln - fsz
                d_meta[n] = 0
                fl[n] = 1
                nfr += 1
                fbytes += fsz
                gpos += 1
                if gpos == ntpl:
                    gpos = 0
                if gleft > 0:
                    gleft -= 1
                gmade += 1
                n += 1
                continue
            loc, c, nuse, fast = _take(psc, cache, ring, free, state, c, nuse, fast)
            if loc < 0:
                ds[D_RX_DROPPED] += 1
                break
            gpos, gleft = _dma(pages, loc, dma_off, tpl, tpl_len, gpos, gleft, rows, d_off,
                               d_len, d_meta, n)
            if nfx:
                fx[n, FX_MEM] = 0
                fx[n, FX_KIND] = 0
            if fr_on:
                fl[n] = 0
                ft[n, FRAG_NR] = 0
            gmade += 1
            n += 1
        if n == 0 or ctl[C_ERROR] != 0 or psc[P_ERROR] != 0:
            break
        polls += 1
        total += n
        if generic:
            # netif_receive_generic_xdp: an skb with less than XDP_PACKET_HEADROOM gets a
            # new head (pskb_expand_head: another buffer, the packet copied, the old one
            # freed); no buffer: the skb is dropped.
            j = 0
            for i in range(n):
                loc = rows[i]
                off = np.int64(d_off[i])
                ln = np.int64(d_len[i])
                if off < HEADROOM:
                    loc2, c, nuse, fast = _take(psc, cache, ring, free, state, c, nuse, fast)
                    if loc2 >= 0:
                        memcpy(pages.ctypes.data + loc2 * pages.strides[0] + HEADROOM,
                               pages.ctypes.data + loc * pages.strides[0] + off, ln)
                    else:
                        ds[D_RX_DROPPED] += 1
                        nbytes += ln  # type: ignore[assignment]
                    c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
                    if loc2 < 0:
                        continue
                    loc = loc2
                    off = HEADROOM  # type: ignore[assignment]
                rows[j] = loc
                d_off[j] = off
                d_len[j] = ln
                d_meta[j] = 0
                j += 1
            n = j
            if n == 0:
                continue
        if nfor:
            nbytes += _run_mems(fn, ctx_addr, desc, (rows, d_off, d_len, d_meta, act, off_out,
                                                     len_out, meta_out, status, pc_out,
                                                     addr_out, red), fx, n, faddr)
        elif nfr:
            # The frag table for the JIT's frags twins (x_frags: a frame's row while
            # it has frags), then the frags as the run left them written back.
            desc[DESC_FRAGS] = np.uint64(ft.ctypes.data)
            nbytes += _run(fn, ctx_addr, desc, d_len, n) + fbytes
            desc[DESC_FRAGS] = 0
            for i in range(n):
                if fl[i]:
                    left, c, nuse, cached = _frags_back(pages, pfn_base, ft, i, rows[i], psc,
                                                        cache, ring, free, state, c, nuse,
                                                        cached)
                    fl[i] = left > 0
        else:
            nbytes += _run(fn, ctx_addr, desc, d_len, n)
        # A multi-buffer frame left to pass, send or redirect: this poll's PASS, TX
        # and REDIRECT frames all go to the Python dispatch, in order, and its flush
        # (one stack list, bulks and flushes as the Python poll makes them).
        fdefer = False
        if nfr:
            for i in range(n):
                if fl[i] and ((np.int64(act[i]) == 2 and not stack_ok)
                              or (np.int64(act[i]) == 3 and not ftx)
                              or (np.int64(act[i]) == 4 and not (
                                  (np.int64(red[i, 1]) == CPUMAP and ncq > 0
                                   and _cpu_lookup(cm_ids, cm_off, cm_n, cm_ent,
                                                   np.int64(red[i, 0]),
                                                   np.int64(red[i, 2]))[0] >= 0)
                                  or (fred and _frags_red_ok(dm_ids, dmt, eg_ids, red, i,
                                                             tgt_ok, tgt_err, tgt_wire,
                                                             tgt_veth, own_t))
                                  or (fred and _frags_bcast_ok(dm_ids, dmt, eg_ids, red, i,
                                                               tgt_ok, self_ifindex,
                                                               own_t))))):
                    fdefer = True
        ntx = 0
        deferred = 0
        backed_up = False
        # Deferred frames other than XDP_PASS and AF_XDP redirects need this poll's
        # flush before the next poll; those two only need delivering (the stack has
        # no per-poll flush; an AF_XDP rx ring is published at the end of the call).
        flushy = 0
        passed = 0
        route[RT_LIST] = s_list  # the poll's list starts without a route hint
        route[RT_HFAM] = 0
        for i in range(n):
            loc = rows[i]
            a = np.int64(act[i])
            if status[i] != 0:
                _fault(ctl, status, pc_out, addr_out, i)
            if nfor and fx[i, FX_MEM] != 0:
                # An xdp_frame in another device's memory (veth_xdp_rcv_one): dropped
                # or passed here, the memory it came from taking its page back, or
                # sent back (veth_xdp_tx: converted in its memory, into the TX bulk
                # with the queue's own frames), or redirected (xdp_do_redirect:
                # converted in its memory into a device's bulk queue with its memory
                # tag, broadcast, into a cpumap entry's bulk, or copied into the
                # queue's AF_XDP socket, or failed); a target only Python sends to:
                # the Python dispatch.
                mi = fx[i, FX_MEM]
                data = np.int64(off_out[i])
                if a == 4 and np.int64(red[i, 1]) == XSKMAP:
                    if xon == 1:
                        xs = xsk_slot(xm, xsk_sk, np.int64(red[i, 0]), np.int64(red[i, 2]))
                        if xs >= 0:  # copied into the socket's buffer, then freed
                            e = rcv_copy(xp, xfq, xrx, xsk_sk, xt,
                                         _mem_addr(sysm, ptab, mi, loc) + data,
                                         np.int64(len_out[i]), np.int64(meta_out[i]))
                            if e == 0:
                                xt[T_SLOT + xs] += 1
                                xtouched = True
                            elif e == ENOMEM:
                                backed_up = True
                            n_red += 1
                            _return_frame_napi(sysm, ptab, mi, loc)
                            continue
                        if _xsk_gone(xm, np.int64(red[i, 0]), np.int64(red[i, 2])):
                            n_red += 1
                            cnt[K_ERR + EINVAL] += 1
                            _return_frame_napi(sysm, ptab, mi, loc)
                            continue
                elif (a == 4 and (np.int64(red[i, 3]) & BPF_F_BROADCAST) != 0
                      and (np.int64(red[i, 1]) == DEVMAP or np.int64(red[i, 1]) == DEVMAP_HASH)):
                    # dev_map_enqueue_multi of it: clones for all targets but the last,
                    # which gets the frame itself in its memory (its bulk entry tagged).
                    slot, to = _bcast_check(dm_ids, dmt, eg_ids, tgt_ok, self_ifindex, own_t,
                                            np.int64(red[i, 0]), np.int64(red[i, 2]),
                                            np.int64(red[i, 3]))
                    if to >= 0:
                        n_red += 1
                        ln = np.int64(len_out[i])
                        if to == nif or _frame_to_mem(sysm, ptab, mi, loc, data, ln,
                                                      np.int64(meta_out[i])):
                            ent, tag = (-1 - loc, 0) if mi == 1 else (loc, mi - 1)
                            c, nuse, cached, e = _bcast(
                                dmt, eg_ids, tgt_ok, tgt_mtu, self_ifindex, slot,
                                np.int64(red[i, 3]), ent, data, ln, to == nif, tag, pages,
                                sysm, bq, bq_n, eg, w32, q64, addr_base, tgt_stats, xmit_cnt,
                                psc, cache, ring, free, state, c, nuse, cached, xmit, 0,
                                tgt_err)
                            if e:
                                cnt[K_ERR + e] += 1
                            else:
                                red_cnt[slot, _slot_ifindex(dmt, slot,
                                                            np.int64(red[i, 2]))] += 1
                        else:  # no room for the xdp_frame: -EOVERFLOW, back to its memory
                            cnt[K_ERR + EOVERFLOW] += 1
                            _return_frame_napi(sysm, ptab, mi, loc)
                        continue
                elif a == 4 and np.int64(red[i, 1]) == CPUMAP and ncq > 0:
                    # cpu_map_enqueue of it, converted in its memory (the ring holds
                    # pfns: the kthread runs it over that memory's region); an entry
                    # the loop has no row for: the Python dispatch.
                    k, r = _cpu_lookup(cm_ids, cm_off, cm_n, cm_ent, np.int64(red[i, 0]),
                                       np.int64(red[i, 2]))
                    if k >= 0:
                        n_red += 1
                        ln = np.int64(len_out[i])
                        mt = np.int64(meta_out[i])
                        if r < 0 or not _frame_to_mem(sysm, ptab, mi, loc, data, ln, mt):
                            # An empty slot (-EINVAL), no room for the xdp_frame (-EOVERFLOW).
                            cnt[K_ERR + (EINVAL if r < 0 else EOVERFLOW)] += 1
                            _return_frame_napi(sysm, ptab, mi, loc)
                            continue
                        _mem_set_dev_rx(sysm, ptab, mi, loc, self_ifindex)
                        b = cbq_n[r]
                        cbq[r, 0, b] = loc + _frame_pfn_base(sysm, ptab, mi)
                        cbq[r, 1, b] = data
                        cbq[r, 2, b] = ln
                        cbq[r, 3, b] = mt
                        cbq_n[r] = b + 1
                        if b + 1 == CPU_MAP_BULK:
                            c, nuse, cached = _cpu_flush(cq_tab, cbq, cbq_n, cq_cnt, r,
                                                         pfn_base, psc, cache, ring, free,
                                                         state, c, nuse, cached, cfm)
                        cm_red[k] += 1
                        continue
                elif a == 4:
                    e = _frame_redirect(fmem, dmt, dm_ids, eg_ids, red, i, tgt_ok, tgt_err,
                                        tgt_mtu, own_t, mi, loc, data,
                                        np.int64(len_out[i]), np.int64(meta_out[i]))
                    if e > 0:  # refused: back to its memory
                        n_red += 1
                        cnt[K_ERR + e] += 1
                        _return_frame_napi(sysm, ptab, mi, loc)
                        continue
                    if e == 0:
                        n_red += 1
                        slot, ifx, kk = _dev_target(dm_ids, dmt, eg_ids, red, i)
                        red_cnt[slot, ifx] += 1
                        ent, tag = (-1 - loc, 0) if mi == 1 else (loc, mi - 1)
                        if _bq_enqueue(bq, bq_n, ifx, kk, ent, data, np.int64(len_out[i]),
                                       np.int64(meta_out[i]), tag):
                            c, nuse, cached = _bq_xmit_all(bq, bq_n, ifx, eg, sysm, w32, q64,
                                                           addr_base, tgt_stats, xmit_cnt,
                                                           psc, cache, ring, free, state, c,
                                                           nuse, cached, pages, xmit)
                        continue
                if a == 1 or a == 0 or a > 4:
                    n_drop, n_ab, n_bad = _count_drop(ctl, a, n_drop, n_ab, n_bad)
                    _return_frame(sysm, ptab, mi, loc)
                elif a == 2 and stack_ok:
                    _frame_pass(sysm, ptab, mi, loc, data, np.int64(len_out[i]), self_ifindex,
                                srec)
                    passed += 1
                    _return_frame(sysm, ptab, mi, loc)
                elif a == 3 and tx_veth >= 0 and _frame_to_mem(sysm, ptab, mi, loc, data,
                                                               np.int64(len_out[i]),
                                                               np.int64(meta_out[i])):
                    n_tx += 1
                    tx_rows[ntx] = -1 - (loc * MAX_MEMS + mi)
                    ntx += 1
                    if ntx == BULK:
                        tx_events += 1
                        went, vbytes, c, nuse, cached = _tx_flush(
                            tx_rows, ntx, tx_wire, tx_veth, tgt_veth, pages, w32, q64,
                            addr_base, pfn_base, psc, cache, ring, free, state, c, nuse,
                            cached, fmem)
                        tx_sent += went
                        tx_bytes += vbytes
                        n_tx_err += ntx - went
                        ntx = 0
                else:
                    if a != 2 and not (a == 4 and np.int64(red[i, 1]) == XSKMAP):
                        flushy += 1
                    pfn = loc + _frame_pfn_base(sysm, ptab, mi)
                    _defer(ctl, defer, red, i, pfn - pfn_base, data, np.int64(len_out[i]),
                           np.int64(meta_out[i]), a, KIND_FRAME)
                    deferred += 1
                continue
            if a == 1 or a == 0 or a > 4:
                n_drop, n_ab, n_bad = _count_drop(ctl, a, n_drop, n_ab, n_bad)
                if nfr and fl[i]:  # each buffer's frags, then its head
                    c, nuse, cached = _frags_free(pages, pfn_base, loc, psc, cache, ring,
                                                  free, state, c, nuse, cached)
                c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
                continue
            data = np.int64(off_out[i])
            length = np.int64(len_out[i])
            meta = np.int64(meta_out[i])
            if fdefer:
                flushy += 1
                if fl[i]:
                    _defer(ctl, defer, red, i, loc, data, length + np.int64(ft[i, FRAG_SIZE]),
                           meta, a, KIND_FRAGS)
                else:
                    _defer(ctl, defer, red, i, loc, data, length, meta, a, 0)
                deferred += 1
                continue
            done = False
            if a == 2 and stack_ok:
                # The skb built around the page goes through the stack's demux and is
                # consumed there; its page comes back as the skb's free recycles it.
                if nfr and fl[i]:
                    # A multi-buffer one: the skb with its frags attached, read whole
                    # (skb_copy_bits), then freed - its frags, then its head.
                    whole = length + np.int64(ft[i, FRAG_SIZE])
                    if buf_copy_bits(pages, pfn_base, loc, data, SH, whole, lin.ctypes.data,
                                     len(lin)):
                        stack_rcv_one(lin, 0, whole, self_ifindex, srec)
                    else:
                        ctl[C_ERROR] = -1  # frags _frags_row took: never
                    c, nuse, cached = _frags_free(pages, pfn_base, loc, psc, cache, ring,
                                                  free, state, c, nuse, cached)
                else:
                    stack_rcv_one(pages[loc], data, length, self_ifindex, srec)
                passed += 1
                c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
                done = True
            elif a == 3 and tx_ok == 1 and generic:
                # generic_xdp_tx: the skb transmitted on this NIC (its wire a sink),
                # then freed; no bulk, no xdp_bulk_tx.
                n_tx += 1
                g_sent += 1
                tx_bytes += length
                c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
                done = True
            elif (a == 3 and tx_ok == 2 and generic
                  and _generic_ok(tgt_ok[self_ifindex], stack_ok, length)):
                # generic_xdp_tx on lo: loopback_xmit's netif_rx queues the skb on lo's
                # own backlog - the ring this call polls, a copy in an skb's order-0
                # page; on a veth: veth_xmit, the peer's stack or xdp_ring (backlog)
                # receives it.
                n_tx += 1
                _generic_xmit(gt, sysm, self_ifindex, pages[loc], data, length)
                c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
                done = True
            elif (generic and a == 4 and np.int64(red[i, 1]) != XSKMAP
                  and np.int64(red[i, 1]) != CPUMAP):
                # xdp_do_generic_redirect to a devmap entry or an ifindex
                # (bpf_redirect): xdp_ok_fwd_dev, xdp_redirect, then the skb
                # transmitted on that NIC (generic_xdp_tx), after the entry's program if
                # it has one; a broadcast (dev_map_redirect_multi) a clone to every
                # target that takes it, up to one xdp_ok_fwd_dev refuses (its error
                # ends the broadcast). Other targets: the Python path.
                mt = np.int64(red[i, 1])
                if ((mt == DEVMAP or mt == DEVMAP_HASH)
                        and (np.int64(red[i, 3]) & BPF_F_BROADCAST) != 0):
                    slot, to, e, wend = _gbcast_check(dm_ids, dmt, eg_ids, tgt_ok, tgt_err,
                                                      tgt_mtu, stack_ok, self_ifindex,
                                                      np.int64(red[i, 0]), np.int64(red[i, 2]),
                                                      np.int64(red[i, 3]), length)
                    if to >= 0:
                        # The targets before one xdp_ok_fwd_dev refuses get their clone;
                        # that one ends the broadcast with its error.
                        _gbcast(dmt, gt, eg, sysm, slot, self_ifindex,
                                np.int64(red[i, 3]), pages[loc], data, length, wend)
                        n_red += 1
                        if e:
                            cnt[K_ERR + e] += 1
                        else:
                            red_cnt[slot, to] += 1
                        c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse,
                                                cached)
                        done = True
                else:
                    slot, ifx, kk = _dev_target(dm_ids, dmt, eg_ids, red, i)
                    e = _gfwd_err(tgt_ok, tgt_err, tgt_mtu, stack_ok, ifx, length) \
                        if slot >= 0 else -1
                    if e > 0 or (e == 0 and kk >= 0):
                        n_red += 1
                        if e:  # xdp_ok_fwd_dev refused it: the skb freed
                            cnt[K_ERR + e] += 1
                        else:
                            red_cnt[slot, ifx] += 1
                            _generic_dev_xmit(gt, eg, sysm, ifx, kk, pages[loc], data, length)
                        c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse,
                                                cached)
                        done = True
            elif a == 3 and tx_ok and not generic:  # a generic TX left: Python's
                if _to_frame(w32, q64, loc, data, length, meta, addr_base):
                    n_tx += 1
                    if nfr and fl[i]:
                        # A multi-buffer frame (a NIC sink or a veth, ftx): the frags
                        # flag in its header, its whole length sent.
                        w32[loc, 9] = XDP_FLAGS_HAS_FRAGS
                        length += np.int64(ft[i, FRAG_SIZE])
                    if tx_veth < 0:
                        tx_bytes += length
                    tx_rows[ntx] = loc
                    ntx += 1
                    if ntx == BULK:
                        tx_events += 1
                        went, vbytes, c, nuse, cached = _tx_flush(
                            tx_rows, ntx, tx_wire, tx_veth, tgt_veth, pages, w32, q64,
                            addr_base, pfn_base, psc, cache, ring, free, state, c, nuse,
                            cached, fmem)
                        tx_sent += went
                        tx_bytes += vbytes
                        n_tx_err += ntx - went
                        ntx = 0
                    done = True
            elif a == 4 and xon == 1 and np.int64(red[i, 1]) == XSKMAP:
                xs = xsk_slot(xm, xsk_sk, np.int64(red[i, 0]), np.int64(red[i, 2]))
                if xs >= 0:
                    e = rcv_copy(xp, xfq, xrx, xsk_sk, xt,
                                 pages.ctypes.data + loc * pages.strides[0] + data, length, meta)
                    if e == 0:
                        xt[T_SLOT + xs] += 1
                    elif e == ENOMEM:
                        backed_up = True
                    if generic:
                        # xsk_generic_rcv publishes each packet it got past the checks.
                        if e != ENOSPC:
                            xsk_flush(xrx, xfq)
                    elif e == 0:
                        xtouched = True  # on the flush list only when received
                    n_red += 1
                    c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
                    done = True
                elif _xsk_gone(xm, np.int64(red[i, 0]), np.int64(red[i, 2])):
                    n_red += 1
                    cnt[K_ERR + EINVAL] += 1
                    c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
                    done = True
            elif a == 4 and np.int64(red[i, 1]) == CPUMAP and ncq > 0 and generic:
                k, r = _cpu_lookup(cm_ids, cm_off, cm_n, cm_ent, np.int64(red[i, 0]),
                                   np.int64(red[i, 2]))
                if k >= 0:
                    # An empty slot: -EINVAL; else the entry's ring takes it or fails.
                    e = _cpu_generic(cq_tab, cbq, cq_cnt, r, sysm, pages, loc, data, length,
                                     self_ifindex) if r >= 0 else EINVAL
                    n_red += 1
                    if e:
                        cnt[K_ERR + e] += 1
                    else:
                        cm_red[k] += 1
                    c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
                    done = True
            elif a == 4 and np.int64(red[i, 1]) == CPUMAP and ncq > 0:
                k, r = _cpu_lookup(cm_ids, cm_off, cm_n, cm_ent, np.int64(red[i, 0]),
                                   np.int64(red[i, 2]))
                # A multi-buffer frame: its head converted, the frags flag in its
                # xdp_frame, its whole length in the ring (the kthread reads the frags).
                mb = nfr and fl[i]
                if k >= 0 and (r < 0 or not _to_frame(w32, q64, loc, data, length, meta,
                                                      addr_base)):
                    # An empty slot (-EINVAL) or no room for the xdp_frame (-EOVERFLOW).
                    n_red += 1
                    cnt[K_ERR + (EINVAL if r < 0 else EOVERFLOW)] += 1
                    if mb:
                        c, nuse, cached = _frags_free(pages, pfn_base, loc, psc, cache, ring,
                                                      free, state, c, nuse, cached)
                    c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
                    done = True
                elif r >= 0:
                    # cpu_map_enqueue: xdpf->dev_rx, then bq_enqueue (flushed when full).
                    q64[loc, DEV_RX_WORD] = self_ifindex
                    if mb:
                        w32[loc, 9] = XDP_FLAGS_HAS_FRAGS
                        length += np.int64(ft[i, FRAG_SIZE])
                    b = cbq_n[r]
                    cbq[r, 0, b] = loc + pfn_base
                    cbq[r, 1, b] = data
                    cbq[r, 2, b] = length
                    cbq[r, 3, b] = meta
                    cbq_n[r] = b + 1
                    if b + 1 == CPU_MAP_BULK:
                        c, nuse, cached = _cpu_flush(cq_tab, cbq, cbq_n, cq_cnt, r, pfn_base,
                                                     psc, cache, ring, free, state, c, nuse,
                                                     cached, cfm)
                    n_red += 1
                    cm_red[k] += 1
                    done = True
            elif (a == 4 and not generic
                  and (np.int64(red[i, 1]) == DEVMAP or np.int64(red[i, 1]) == DEVMAP_HASH)
                  and (np.int64(red[i, 3]) & BPF_F_BROADCAST) != 0):
                slot, to = _bcast_check(dm_ids, dmt, eg_ids, tgt_ok, self_ifindex, own_t,
                                        np.int64(red[i, 0]), np.int64(red[i, 2]),
                                        np.int64(red[i, 3]))
                # A multi-buffer frame (fred): the frags flag in its xdp_frame.
                fsz = int(ft[i, FRAG_SIZE]) if nfr and fl[i] else 0
                if to >= 0 and (to == nif or _to_frame(w32, q64, loc, data, length, meta,
                                                       addr_base)):
                    if fsz > 0 and to != nif:
                        w32[loc, 9] = XDP_FLAGS_HAS_FRAGS
                    # dev_map_enqueue_multi: nothing to send to (to == nif) consumes it.
                    c, nuse, cached, e = _bcast(dmt, eg_ids, tgt_ok, tgt_mtu,
                                                self_ifindex, slot, np.int64(red[i, 3]), loc,
                                                data, length, to == nif, 0, pages, sysm, bq,
                                                bq_n,
                                                eg, w32, q64, addr_base, tgt_stats, xmit_cnt,
                                                psc, cache, ring, free, state, c, nuse,
                                                cached, xmit, fsz, tgt_err)
                    n_red += 1
                    if e:  # a clone refused or failed: the frame freed (_bcast)
                        cnt[K_ERR + e] += 1
                    else:
                        red_cnt[slot, _slot_ifindex(dmt, slot, np.int64(red[i, 2]))] += 1
                    done = True
                elif to >= 0:  # no room for the xdp_frame: -EOVERFLOW, the frame freed
                    n_red += 1
                    cnt[K_ERR + EOVERFLOW] += 1
                    if fsz > 0:
                        c, nuse, cached = _frags_free(pages, pfn_base, loc, psc, cache, ring,
                                                      free, state, c, nuse, cached)
                    c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
                    done = True
            elif a == 4 and not generic:
                slot, ifx, kk = _dev_target(dm_ids, dmt, eg_ids, red, i)
                # A multi-buffer frame (_frags_red_ok): xdp_ok_fwd_dev of its whole
                # length, the frags flag in its xdp_frame, its frags freed with it.
                mb = nfr and fl[i]
                flen = length + np.int64(ft[i, FRAG_SIZE]) if mb else length
                e = _fwd_err(tgt_ok, tgt_err, tgt_mtu, ifx, flen) \
                    if slot >= 0 and ifx != own_t else -1
                if mb and (e == 0 or e == EMSGSIZE) and tgt_err[ifx] != 0:
                    e = tgt_err[ifx]  # __xdp_enqueue: no NDO_XMIT_SG, before the MTU
                if e == 0 and kk >= 0 and not _to_frame(w32, q64, loc, data, length, meta,
                                                        addr_base):
                    e = EOVERFLOW
                if e > 0:  # __xdp_enqueue refused it: the frame freed
                    n_red += 1
                    cnt[K_ERR + e] += 1
                    if mb:
                        c, nuse, cached = _frags_free(pages, pfn_base, loc, psc, cache, ring,
                                                      free, state, c, nuse, cached)
                    c, nuse, cached = _give(psc, cache, ring, free, state, loc, c, nuse, cached)
                    done = True
                elif e == 0 and kk >= 0:
                    n_red += 1
                    red_cnt[slot, ifx] += 1
                    if mb:
                        w32[loc, 9] = XDP_FLAGS_HAS_FRAGS
                    # bq_enqueue: the target's bulk queue for this program, sent when full.
                    if _bq_enqueue(bq, bq_n, ifx, kk, loc, data, flen, meta, 0):
                        c, nuse, cached = _bq_xmit_all(bq, bq_n, ifx, eg, sysm, w32, q64,
                                                       addr_base, tgt_stats, xmit_cnt, psc,
                                                       cache, ring, free, state, c, nuse,
                                                       cached, pages, xmit)
                    done = True
            if not done:  # XDP_PASS and every path the native loop does not take
                if a != 2 and not (a == 4 and np.int64(red[i, 1]) == XSKMAP):
                    flushy += 1
                _defer(ctl, defer, red, i, loc, data, length, meta, a,
                       fx[i, FX_KIND] if nfx else 0)
                deferred += 1
        route[RT_LIST] = 0
        if passed:  # the poll's list of skbs (netif_receive_skb_list)
            n_pass += passed
            mib[M_BATCHES] += 1 if s_list else passed
        # xdp_do_flush and the driver's TX flush at the end of the poll.
        if xtouched:
            xsk_flush(xrx, xfq)
            xtouched = False
        if ntx:
            tx_events += 1
            went, vbytes, c, nuse, cached = _tx_flush(tx_rows, ntx, tx_wire, tx_veth, tgt_veth,
                                                      pages, w32, q64, addr_base, pfn_base,
                                                      psc, cache, ring, free, state, c, nuse,
                                                      cached, fmem)
            tx_sent += went
            tx_bytes += vbytes
            n_tx_err += ntx - went
        for r in range(ncq):  # __cpu_map_flush
            if cbq_n[r]:
                c, nuse, cached = _cpu_flush(cq_tab, cbq, cbq_n, cq_cnt, r, pfn_base, psc,
                                             cache, ring, free, state, c, nuse, cached, cfm)
        for t in range(nif):  # __dev_flush
            if bq_n[t, BQ_COUNT]:
                c, nuse, cached = _bq_xmit_all(bq, bq_n, t, eg, sysm, w32, q64, addr_base,
                                               tgt_stats, xmit_cnt, psc, cache, ring, free,
                                               state, c, nuse, cached, pages, xmit)
            bq_n[t, BQ_PROG] = 0
        # veth_xdp_xmit scheduled the peer's NAPI, which the kernel polls right after
        # this one: a poll that left frames in a peer's xdp_ring ends the call.
        if (n_red != red_seen or (tx_veth >= 0 and tx_sent != tx_seen)
                or (g_txv and n_tx != tx_seen)):
            red_seen = n_red
            tx_seen = n_tx if g_txv else tx_sent
            if _veth_fed(tgt_veth):
                break
        # Deferred XDP_PASS frames only need the stack, which has no per-poll flush:
        # keep polling while the defer buffer has room for another poll. Anything
        # else deferred must be finished (and flushed) before the next poll.
        # A copy-mode socket out of fill buffers: the rest of the call would only drop
        # frames at it (the page pool keeps the NIC receiving); let the caller - its
        # user, on one CPU - refill first. (A zero-copy NIC stops by itself: no
        # buffer, no frame.)
        if (flushy or backed_up or ctl[C_ERROR] != 0 or psc[P_ERROR] != 0
                or (deferred and ctl[C_NDEFER] + budget > len(defer))):
            break
        # cpumap kthreads run inline (after the polls, not beside them): stop while
        # every entry's ring can still take a whole poll, so that they keep up.
        if cm_inline:
            full = False
            for r in range(ncq):
                q_idx = i64_view(cq_tab[r, 2], 1, 16)[0]
                if cq_tab[r, 1] - ring_count(q_idx) < budget:
                    full = True
            if full:
                break
    psc[P_COUNT] = c
    psc[P_NUSE] = nuse
    psc[P_FAST] += fast
    psc[P_CACHED] += cached
    _totals(gst, ctl, ds, cnt, gpos, gmade, polls, total, nbytes, n_ab, n_drop, n_bad)
    ds[D_XDP_PASS] += n_pass
    ds[D_XDP_TX] += n_tx - n_tx_err
    ds[D_XDP_TX_ERRORS] += n_tx_err
    ds[D_XDP_REDIRECT] += n_red
    ds[D_TX_PACKETS] += tx_sent + g_sent
    ds[D_TX_BYTES] += tx_bytes
    cnt[K_TX_EVENTS] += tx_events
    cnt[K_TX_SENT] += tx_sent
    cnt[K_TX_DROPS] += n_tx_err
    return total


@njit(cache=True, nogil=True, _nrt=False)
def native_polls_zc(max_polls, budget, jit, umem, rxq, gen, dev, tgt, dm, xsk, stk, out):  # type: ignore[no-untyped-def] # noqa: E501
    """:func:`native_polls` for a zero-copy AF_XDP queue (``MEM_TYPE_XSK_BUFF_POOL``):
    its buffers are UMEM chunks (``umem`` is the UMEM, one row per chunk) from
    the socket's pool; the generator DMAs into them as ``xsk_zc_dma`` does, a
    redirect to the socket hands the chunk over (``xsk_rcv_zc``), XDP_DROP
    frees it (``xsk_buff_free``), XDP_PASS copies it into an skb for the
    stack's demux and frees it (the driver's ``xsk_construct_skb``), XDP_TX
    on a NIC copies it into an order-0 page (``xdp_convert_zc_to_xdp_frame``,
    the chunk freed) for the TX bulk of 16, the page freed at tx completion;
    a redirect to a device (a devmap or devmap_hash entry, ``bpf_redirect``) is
    checked as :func:`native_polls` checks it, then converted the same way and
    queued in the device's bulk queue as an order-0 page (:func:`_bq_xmit_all`,
    whose entry programs run over those pages); a broadcast without metadata
    clones that page (:func:`_bcast`). Other redirects, and frames whose
    conversion failed, are deferred. ``dev``: (ifindex, counters, XDP_TX allowed, TX bulk
    rows, the host's page allocator, the queue's page pool - whose pages no
    frame here is, its records only typing the bulk queues' calls); ``tgt``
    and ``dm`` as for :func:`native_polls`."""
    (fn, ctx_addr, desc, rows, d_off, d_len, d_meta, act, off_out, len_out, meta_out, status,
     pc_out, addr_out, red) = jit
    pages = umem
    qcols, qcur, ptab = rxq  # ptab: no pool's frames come here (its bulk tags are 0)
    tpl, tpl_len, gst = gen
    self_ifindex, ds, tx_ok, tx_rows, sysa, pool = dev
    ppages, w32, q64, addr_base, pfn_pp, psc, cache, ring, free, state = pool
    tgt_ok, tgt_mtu, tgt_stats, tgt_wire, tgt_veth, tgt_err, bq, bq_n, xmit_cnt = tgt
    xmit = (tgt_wire, tgt_veth, pfn_pp, ptab)
    dm_ids, dm_addr, dm_n, dm_hash, red_cnt, eg, sysm = dm
    dmt = (dm_addr, dm_n, dm_hash)
    eg_ids = eg[0]
    nif = len(tgt_ok)
    own_t = _own_veth(tgt_veth, qcur)
    # Every frame queued here is an order-0 page: the pool's hot fields pass through.
    pc, pnuse = psc[P_COUNT], psc[P_NUSE]
    xon, xp, xfq, xrx, xsk_sk, xm, xt = xsk
    stack_ok, srec = stk
    mib = srec[0]
    ctl, cnt, defer = out
    nchunks = len(pages)
    ntpl = len(tpl_len)
    off = xp[XP_OFF]
    pfn_base = xp[XP_PFN_BASE]
    total = 0
    qcount = 0
    gpos = gst[G_POS]
    gleft = _gen_left(gst)
    gmade = 0
    nbytes = 0
    polls = 0
    n_ab = 0
    n_drop = 0
    n_red = 0
    n_bad = 0
    n_pass = 0
    tx_events = 0
    tx_sent = 0
    tx_bytes = np.int64(0)
    xtouched = False
    red_seen = 0
    for _poll in range(max_polls):
        n = 0
        ntx = 0
        ring_lock(qcur)
        qhead = qcur[Q_HEAD]
        qcount = qcur[Q_COUNT]
        while n < budget and qcount > 0:
            if qcols[4, qhead] != 0:
                break
            loc = qcols[0, qhead] - pfn_base
            if loc < 0 or loc >= nchunks or ld8(xp[XP_HELD], loc) == 0:
                ctl[C_ERROR] = -1
                break
            qhead = _from_ring(qcols, qhead, loc, rows, d_off, d_len, d_meta, n)
            qcount -= 1
            n += 1
        qcur[Q_HEAD] = qhead
        qcur[Q_COUNT] = qcount
        ring_unlock(qcur)
        if n < budget and ntpl > 0 and gleft != 0 and qcount == 0:
            # xsk_zc_dma: a buffer per frame (xsk_buff_alloc_batch), the rest dropped.
            want = budget - n if gleft < 0 else min(budget - n, gleft)
            got = 0
            while got < want:
                loc = zc_alloc(xp, xfq, xrx)
                if loc < 0:
                    break
                gpos, gleft = _dma(pages, loc, off, tpl, tpl_len, gpos, gleft, rows, d_off,
                                   d_len, d_meta, n)
                gmade += 1
                got += 1
                n += 1
            if got < want:
                ds[D_RX_DROPPED] += want - got
            zc_alloc_done(xp, xfq, got < want)
        if n == 0 or ctl[C_ERROR] != 0:
            break
        polls += 1
        total += n
        nbytes += _run(fn, ctx_addr, desc, d_len, n)
        deferred = 0
        flushy = 0
        passed = 0
        for i in range(n):
            loc = rows[i]
            a = np.int64(act[i])
            if status[i] != 0:
                _fault(ctl, status, pc_out, addr_out, i)
            if a == 1 or a == 0 or a > 4:
                n_drop, n_ab, n_bad = _count_drop(ctl, a, n_drop, n_ab, n_bad)
                zc_free(xp, loc)
                continue
            data = np.int64(off_out[i])
            length = np.int64(len_out[i])
            meta = np.int64(meta_out[i])
            if a == 2 and stack_ok:
                # The driver copies the buffer into an skb (xsk_construct_skb) and frees
                # it; the skb goes through the stack's demux and is consumed there.
                stack_rcv_one(pages[loc], data, length, self_ifindex, srec)
                passed += 1
                zc_free(xp, loc)
                continue
            if a == 3 and tx_ok:
                row = zc_to_frame(xp, sysa, loc, data, length, meta, self_ifindex)
                if row < 0:  # not converted: an exception, and the buffer dropped
                    xt[T_TX_ERR] += 1
                    ds[D_XDP_TX_ERRORS] += 1
                    zc_free(xp, loc)
                    continue
                tx_bytes += length
                tx_rows[ntx] = row
                ntx += 1
                if ntx == BULK:  # ndo_xdp_xmit, then tx completion: the pages freed
                    tx_events += 1
                    tx_sent += ntx
                    for j in range(ntx):
                        page_put(sysa, tx_rows[j])
                    ntx = 0
                continue
            if a == 4 and np.int64(red[i, 1]) == XSKMAP:
                xs = xsk_slot(xm, xsk_sk, np.int64(red[i, 0]), np.int64(red[i, 2]))
                if xs >= 0:
                    if rcv_zc(xp, xrx, xsk_sk, xt, loc, data, length) == 0:
                        xt[T_SLOT + xs] += 1
                        xtouched = True
                    else:
                        zc_free(xp, loc)
                    n_red += 1
                    continue
                if _xsk_gone(xm, np.int64(red[i, 0]), np.int64(red[i, 2])):
                    cnt[K_ERR + EINVAL] += 1
                    zc_free(xp, loc)
                    n_red += 1
                    continue
            if (a == 4 and meta <= 0 and (np.int64(red[i, 3]) & BPF_F_BROADCAST) != 0
                    and (np.int64(red[i, 1]) == DEVMAP or np.int64(red[i, 1]) == DEVMAP_HASH)):
                # dev_map_enqueue_multi: no target consumes the buffer; else it is
                # converted (the clones are made from the order-0 copy). With metadata
                # the copy has headroom 0 before it, which xdpf_clone and the Python
                # path's clone read differently: left to the reference path.
                slot, to = _bcast_check(dm_ids, dmt, eg_ids, tgt_ok, self_ifindex, own_t,
                                        np.int64(red[i, 0]), np.int64(red[i, 2]),
                                        np.int64(red[i, 3]))
                row = -1
                if to >= 0 and to != nif:
                    row = zc_to_frame(xp, sysa, loc, data, length, meta, self_ifindex)
                if to == nif or row >= 0:
                    e = 0
                    if to == nif:
                        zc_free(xp, loc)
                    else:
                        e = _bcast(dmt, eg_ids, tgt_ok, tgt_mtu, self_ifindex, slot,
                                   np.int64(red[i, 3]), -1 - row, XDP_FRAME_SIZE, length,
                                   False, 0, ppages, sysm, bq, bq_n, eg, w32, q64, addr_base,
                                   tgt_stats, xmit_cnt, psc, cache, ring, free, state, pc,
                                   pnuse, 0, xmit, 0, tgt_err)[3]
                    n_red += 1
                    if e:  # a clone failed (-ENOMEM): the copy freed
                        cnt[K_ERR + e] += 1
                    else:
                        red_cnt[slot, _slot_ifindex(dmt, slot, np.int64(red[i, 2]))] += 1
                    continue
                if to >= 0:  # no order-0 page took the copy: -EOVERFLOW, the chunk freed
                    cnt[K_ERR + EOVERFLOW] += 1
                    zc_free(xp, loc)
                    n_red += 1
                    continue
            if a == 4:
                slot, ifx, kk = _dev_target(dm_ids, dmt, eg_ids, red, i)
                e = _fwd_err(tgt_ok, tgt_err, tgt_mtu, ifx, length) \
                    if slot >= 0 and ifx != own_t else -1
                if e > 0:  # __xdp_enqueue refused it: the chunk freed
                    cnt[K_ERR + e] += 1
                    zc_free(xp, loc)
                    n_red += 1
                    continue
                if e == 0 and kk >= 0:
                    # __xdp_enqueue: xdp_convert_zc_to_xdp_frame (the chunk freed), then
                    # bq_enqueue of the order-0 page, sent when the bulk is full.
                    row = zc_to_frame(xp, sysa, loc, data, length, meta, self_ifindex)
                    if row < 0:  # no order-0 page: -EOVERFLOW, the chunk freed
                        cnt[K_ERR + EOVERFLOW] += 1
                        zc_free(xp, loc)
                        n_red += 1
                        continue
                    if row >= 0:
                        n_red += 1
                        red_cnt[slot, ifx] += 1
                        mlen = meta if meta > 0 else 0  # the copy's data follows its header
                        if _bq_enqueue(bq, bq_n, ifx, kk, -1 - row, XDP_FRAME_SIZE + mlen,
                                       length, mlen, 0):
                            _bq_xmit_all(bq, bq_n, ifx, eg, sysm, w32, q64, addr_base,
                                         tgt_stats, xmit_cnt, psc, cache, ring, free, state,
                                         pc, pnuse, 0, ppages, xmit)
                        continue
            if a != 2 and not (a == 4 and np.int64(red[i, 1]) == XSKMAP):
                flushy += 1
            _defer(ctl, defer, red, i, loc, data, length, meta, a, 0)
            deferred += 1
        if passed:  # the poll's list of skbs (netif_receive_skb_list)
            n_pass += passed
            mib[M_BATCHES] += 1
        if xtouched:
            xsk_flush(xrx, xfq)
            xtouched = False
        if ntx:
            tx_events += 1
            tx_sent += ntx
            for j in range(ntx):
                page_put(sysa, tx_rows[j])
        for t in range(nif):  # __dev_flush
            if bq_n[t, BQ_COUNT]:
                _bq_xmit_all(bq, bq_n, t, eg, sysm, w32, q64, addr_base, tgt_stats, xmit_cnt,
                             psc, cache, ring, free, state, pc, pnuse, 0, ppages, xmit)
            bq_n[t, BQ_PROG] = 0
        if flushy or ctl[C_ERROR] != 0 or (deferred and ctl[C_NDEFER] + budget > len(defer)):
            break
        if n_red != red_seen:  # a peer's NAPI runs next (see native_polls)
            red_seen = n_red
            if _veth_fed(tgt_veth):
                break
    _totals(gst, ctl, ds, cnt, gpos, gmade, polls, total, nbytes, n_ab, n_drop, n_bad)
    ds[D_XDP_PASS] += n_pass
    ds[D_XDP_REDIRECT] += n_red
    ds[D_XDP_TX] += tx_sent
    ds[D_TX_PACKETS] += tx_sent
    ds[D_TX_BYTES] += tx_bytes
    cnt[K_TX_EVENTS] += tx_events
    cnt[K_TX_SENT] += tx_sent
    return total
