"""Page-backed skbs in machine code (``net/core/skbuff.c``): an skb another device's
transmit builds in order-0 pages of the system allocator, and ``skb_pp_cow_data``,
the copy of such an skb into page-pool pages that veth's NAPI makes before its
program runs (``veth_convert_skb_to_xdp_buff``).

An skb longer than a page's packet room (:data:`HEAD_ROOM`: a page less
``XDP_PACKET_HEADROOM`` and ``skb_shared_info``) is a linear head of that many
bytes and page frags of up to a page each, at most ``MAX_SKB_FRAGS``, listed in
the head page's ``skb_shared_info`` (``nr_frags``, ``xdp_frags_size``,
``xdp_frags_truesize``, ``frags[]`` as :func:`pyxdp.net.xdp_mem.xdp_buff_set_frags`
writes them): the layout of :func:`pyxdp.net.xdp_mem.xdp_buff_copy_in`, which
the sender's skb (head at ``NET_SKB_PAD``) and the receiver's ``xdp_buff``
(head at ``XDP_PACKET_HEADROOM``) both have. The frag list is written as the
pages are allocated and read back to free them, so no scratch memory is needed.

The sender's pages come from the system allocator under its lock
(``alloc_page``/``put_page``); the receiver's from its queue's page pool,
which only that queue's poll allocates from (its alloc cache unlocked, its
ring and free list under the pool's lock), as :mod:`pyxdp.net.napi_native`'s
loop and :func:`pyxdp.net.napi._skbs_to_buffs` (the Python poll's) both call
:func:`skb_pp_cow_data`. A NIC's DMA of a frame past a page's packet room builds
the same ``xdp_buff`` in its queue's pool (:func:`bufs_dma`, through the same
:func:`pp_buff_alloc`), and an skb made from a multi-buffer buffer or frame reads
it back whole (:func:`bufs_copy_bits`, ``skb_copy_bits``). Generic XDP's copies
of the skbs it runs on are :func:`skbs_build` 's too, at ``XDP_PACKET_HEADROOM``
(``skb_cow_data_for_xdp``; the room around them zeroed, :func:`skb_heads_clear`),
and its linearised skbs go into and out of their frames through
:func:`rows_copy`. No program runs
here: the native poll loop (:mod:`pyxdp.net.napi_native`) and the reference path
(:func:`pyxdp.net.prog.run_xdp`) run the frags program over these buffers.
"""

from __future__ import annotations

from pyxdp.net.atomic import memcpy
from pyxdp.net.native import njit
from pyxdp.net.page_pool import PAGE_SIZE
from pyxdp.net.page_pool_lock import alloc_page_ir, put_page_ir
from pyxdp.net.page_pool_native import _alloc, _put_ring, _recycle
from pyxdp.net.xdp import MAX_SKB_FRAGS, SKB_SHARED_INFO_SIZE
from pyxdp.net.xdp_mem import (
    SHINFO_OFF_FRAGS,
    SHINFO_OFF_NR_FRAGS,
    SHINFO_OFF_XDP_FRAGS_SIZE,
    SHINFO_OFF_XDP_FRAGS_TRUESIZE,
    SKB_FRAG_SIZE,
)
from pyxdp.uapi.bpf import XDP_PACKET_HEADROOM

__all__ = ["BAD_SKB", "HEAD_ROOM", "buf_copy_bits", "buf_dma", "buf_head_len", "bufs_copy_bits",
           "bufs_dma", "nr_frags_for", "pp_buff_alloc", "rows_copy", "skb_alloc", "skb_frags_alloc",
           "skb_heads_clear", "skb_pp_cow_data", "skb_write", "skbs_build", "skbs_to_buffs"]

HEAD_ROOM = PAGE_SIZE - XDP_PACKET_HEADROOM - SKB_SHARED_INFO_SIZE  # the linear head's bytes
SH = PAGE_SIZE - SKB_SHARED_INFO_SIZE  # skb_shared_info in a page (frame_sz a page)
FRAG0 = SH + SHINFO_OFF_FRAGS
BAD_SKB = -3  # skb_pp_cow_data: the skb's pages are not what its sender built


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _ld(pages, row, off, size):  # type: ignore[no-untyped-def]
    """A little-endian word of ``size`` bytes at ``off`` of page ``row``."""
    v = 0
    for i in range(size - 1, -1, -1):
        v = (v << 8) | pages[row, off + i]
    return v


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _st(pages, row, off, size, v):  # type: ignore[no-untyped-def]
    for i in range(size):
        pages[row, off + i] = (v >> (8 * i)) & 0xFF


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def nr_frags_for(length):  # type: ignore[no-untyped-def]
    """The page frags an skb of ``length`` bytes needs beside its head."""
    return (length - HEAD_ROOM + PAGE_SIZE - 1) // PAGE_SIZE if length > HEAD_ROOM else 0


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _set_frag(pages, row, j, pfn, length):  # type: ignore[no-untyped-def]
    """``frags[j]`` of page ``row``'s ``skb_shared_info``: page ``pfn`` (``netmem``),
    ``length`` bytes (``len``) at offset 0 (``offset``)."""
    at = FRAG0 + SKB_FRAG_SIZE * j
    _st(pages, row, at, 8, pfn)
    _st(pages, row, at + 8, 4, length)
    _st(pages, row, at + 12, 4, 0)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _set_shinfo(pages, row, nf, length):  # type: ignore[no-untyped-def]
    """``nr_frags``, ``xdp_frags_size`` and ``xdp_frags_truesize`` (a page per frag) of
    an skb of ``length`` bytes with ``nf`` frags."""
    pages[row, SH + SHINFO_OFF_NR_FRAGS] = nf
    _st(pages, row, SH + SHINFO_OFF_XDP_FRAGS_SIZE, 4, length - HEAD_ROOM)
    _st(pages, row, SH + SHINFO_OFF_XDP_FRAGS_TRUESIZE, 4, nf * PAGE_SIZE)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def skb_write(pages, base, row, off, pos, src, n):  # type: ignore[no-untyped-def]
    """``n`` bytes from address ``src`` at byte ``pos`` of the skb whose head is page
    ``row`` of ``pages`` (pfns from ``base``) with its data at ``off``: the head's
    :data:`HEAD_ROOM` bytes, then the page frags its ``skb_shared_info`` lists."""
    addr = pages.ctypes.data
    stride = pages.strides[0]
    while n > 0:
        if pos < HEAD_ROOM:
            k = min(n, HEAD_ROOM - pos)
            dst = addr + row * stride + off + pos
        else:
            j = (pos - HEAD_ROOM) // PAGE_SIZE
            o = pos - HEAD_ROOM - j * PAGE_SIZE
            k = min(n, PAGE_SIZE - o)
            dst = addr + (_ld(pages, row, FRAG0 + SKB_FRAG_SIZE * j, 8) - base) * stride + o
        memcpy(dst, src, k)
        src += k
        pos += k
        n -= k


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def skb_frags_alloc(spages, spfn, alloc, head, length):  # type: ignore[no-untyped-def]
    """The page frags an skb of ``length`` bytes needs beyond its head (page ``head``
    of ``spages``, pfns from ``spfn``), from the system allocator (``alloc``: its
    state words, free stack and reference counts) under its lock, listed in the
    head's ``skb_shared_info``. False when memory ran out (those taken given back)."""
    ast, afree, aref = alloc
    nf = nr_frags_for(length)
    for j in range(nf):
        fr = alloc_page_ir(ast, afree, aref)
        if fr < 0:
            for i in range(j):
                put_page_ir(ast, afree, aref, _ld(spages, head, FRAG0 + SKB_FRAG_SIZE * i, 8)
                            - spfn)
            return False
        _set_frag(spages, head, j, fr + spfn, min(PAGE_SIZE, length - HEAD_ROOM - PAGE_SIZE * j))
    if nf:
        _set_shinfo(spages, head, nf, length)
    return True


@njit(cache=True, nogil=True, _nrt=False)
def skb_alloc(sysm, length):  # type: ignore[no-untyped-def]
    """The pages of an skb of ``length`` bytes from the system allocator ``sysm``
    (:func:`pyxdp.net.napi._system_args`), under its lock: the head and, past
    :data:`HEAD_ROOM`, its page frags (:func:`skb_frags_alloc`). The head's row;
    -1 when memory ran out (the pages taken given back), -2 when it needs more
    than ``MAX_SKB_FRAGS`` frags."""
    spages, _w32, _q64, _base, ast, afree, aref, spfn = sysm
    if nr_frags_for(length) > MAX_SKB_FRAGS:
        return -2
    head = alloc_page_ir(ast, afree, aref)
    if head < 0 or skb_frags_alloc(spages, spfn, (ast, afree, aref), head, length):
        return head
    put_page_ir(ast, afree, aref, head)
    return -1


@njit(cache=True, nogil=True, _nrt=False)
def skbs_build(sysm, data, lens, off, out):  # type: ignore[no-untyped-def]
    """Skbs for the packets of ``data`` (a row each, ``lens`` bytes long) in pages of
    the system allocator, each at byte ``off`` of its head (:func:`skb_alloc`):
    their heads' pfns into ``out``, -1 for those that got no pages. ``off`` is
    ``NET_SKB_PAD`` for an skb a device sends, ``XDP_PACKET_HEADROOM`` for
    generic XDP's ``skb_cow_data_for_xdp`` copy (the head's :data:`HEAD_ROOM`
    bytes and its frags are the same either way)."""
    spages = sysm[0]
    spfn = sysm[7]
    width = data.shape[1]
    for i in range(len(lens)):
        row = skb_alloc(sysm, lens[i])
        if row < 0:
            out[i] = -1
            continue
        skb_write(spages, spfn, row, off, 0, data.ctypes.data + i * data.strides[0],
                  min(lens[i], width))
        out[i] = row + spfn


@njit(cache=True, nogil=True, _nrt=False)
def skb_heads_clear(pages, rows, off, lens):  # type: ignore[no-untyped-def]
    """The room around each skb's bytes in its head page (row ``rows[i]``, the data at
    ``off``, ``lens[i]`` bytes long, :data:`HEAD_ROOM` of them in the head) zeroed:
    the headroom and the tailroom up to ``skb_shared_info``."""
    for i in range(len(rows)):
        r = rows[i]
        for j in range(off):
            pages[r, j] = 0
        for j in range(off + min(lens[i], HEAD_ROOM), SH):
            pages[r, j] = 0


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def _pool_put(pool, row):  # type: ignore[no-untyped-def]
    _pages, _pfn_base, psc, _cache, ring, free, state = pool
    _put_ring(psc, ring, free, state, row)


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def pp_buff_alloc(pool, length):  # type: ignore[no-untyped-def]
    """The pages of an ``xdp_buff`` of ``length`` bytes from the page pool ``pool``
    (pages, pfn base, then :attr:`~pyxdp.net.page_pool.PagePool.native_arrays`): the
    head, then one page per frag, each listed in the head's ``skb_shared_info`` as it
    is taken (``nr_frags`` and the sizes once all are there). Returns (head row,
    frags taken): head -1 when not even the head was left; fewer frags than
    :func:`nr_frags_for` when the pool ran dry (the caller gives them back, read
    from the list)."""
    pages, pfn_base, psc, cache, ring, free, state = pool
    head = _alloc(psc, cache, ring, free, state)
    if head < 0:
        return head, 0
    nf = nr_frags_for(length)
    for j in range(nf):
        fr = _alloc(psc, cache, ring, free, state)
        if fr < 0:
            return head, j
        _set_frag(pages, head, j, fr + pfn_base, min(PAGE_SIZE, length - HEAD_ROOM - PAGE_SIZE * j))
    if nf:
        _set_shinfo(pages, head, nf, length)
    return head, nf


@njit(cache=True, nogil=True, _nrt=False)
def skb_pp_cow_data(pool, sysm, pfn, data, length, frags):  # type: ignore[no-untyped-def]
    """``veth_convert_skb_to_xdp_buff``'s ``skb_pp_cow_data`` of the skb whose head is
    page ``pfn`` of the system allocator ``sysm`` (``length`` bytes, its data at
    ``data``; ``frags``: it has page frags): copied into pages of the queue's page
    pool ``pool`` (pages, pfn base, then :attr:`~pyxdp.net.page_pool.PagePool.native_arrays`)
    as an ``xdp_buff``, the head's data at ``XDP_PACKET_HEADROOM`` and, past
    :data:`HEAD_ROOM`, page frags in its ``skb_shared_info``; then the skb's
    pages freed (``consume_skb``). Returns the new head's row; -1 when the pool
    has too few pages (those taken go back to its ring, the skb is dropped), or
    :data:`BAD_SKB` (nothing touched) when the skb's pages are not what a sender
    built."""
    spages, _w32, _q64, _base, ast, afree, aref, spfn = sysm
    pages, pfn_base, psc, cache, ring, free, state = pool
    srow = pfn - spfn
    n_sys = len(aref)
    if srow < 0 or srow >= n_sys or aref[srow] <= 0 or data < 0:
        return BAD_SKB
    # The skb as its sender built it: every page its own, the bytes adding up.
    snr = 0
    shead = length
    if frags:
        snr = spages[srow, SH + SHINFO_OFF_NR_FRAGS]
        if snr == 0 or snr > MAX_SKB_FRAGS:
            return BAD_SKB
        for j in range(snr):
            at = FRAG0 + SKB_FRAG_SIZE * j
            frow = _ld(spages, srow, at, 8) - spfn
            flen = _ld(spages, srow, at + 8, 4)
            foff = _ld(spages, srow, at + 12, 4)
            if frow < 0 or frow >= n_sys or aref[frow] <= 0 or foff + flen > PAGE_SIZE:
                return BAD_SKB
            shead -= flen
    if shead < 0 or data + shead > SH or nr_frags_for(length) > MAX_SKB_FRAGS:
        return BAD_SKB
    nf = nr_frags_for(length)
    head, got = pp_buff_alloc(pool, length)
    if head >= 0 and got < nf:  # frags first, then the head, into the pool's ring
        for i in range(got):
            _pool_put(pool, _ld(pages, head, FRAG0 + SKB_FRAG_SIZE * i, 8) - pfn_base)
        _pool_put(pool, head)
        head = -1
    if head >= 0:
        saddr = spages.ctypes.data
        stride = spages.strides[0]
        skb_write(pages, pfn_base, head, XDP_PACKET_HEADROOM, 0, saddr + srow * stride + data,
                  shead)
        pos = shead
        for j in range(snr):
            at = FRAG0 + SKB_FRAG_SIZE * j
            flen = _ld(spages, srow, at + 8, 4)
            skb_write(pages, pfn_base, head, XDP_PACKET_HEADROOM, pos,
                      saddr + (_ld(spages, srow, at, 8) - spfn) * stride
                      + _ld(spages, srow, at + 12, 4), flen)
            pos += flen
    for j in range(snr):
        put_page_ir(ast, afree, aref, _ld(spages, srow, FRAG0 + SKB_FRAG_SIZE * j, 8) - spfn)
    put_page_ir(ast, afree, aref, srow)
    return head


@njit(cache=True, nogil=True, _nrt=False)
def skbs_to_buffs(pool, sysm, pfn, data, length, frags, out):  # type: ignore[no-untyped-def]
    """:func:`skb_pp_cow_data` of each skb (``frags[i]``: it has frags) in order: the
    new heads' pfns into ``out`` (-1: dropped, no pages). Returns the index of the
    first skb that is not what a sender built (nothing done from it on), or -1."""
    base = pool[1]
    for i in range(len(pfn)):
        row = skb_pp_cow_data(pool, sysm, pfn[i], data[i], length[i], frags[i] != 0)
        if row == BAD_SKB:
            return i
        out[i] = row + base if row >= 0 else -1
    return -1


@njit(cache=True, nogil=True, _nrt=False)
def buf_dma(pool, src, width, length, direct):  # type: ignore[no-untyped-def]
    """A NIC's DMA of one frame (``length`` bytes, of which the first ``width`` are at
    host address ``src``) into an ``xdp_buff`` of its rx queue's page pool ``pool`` (as
    :func:`skb_pp_cow_data`): the data at ``XDP_PACKET_HEADROOM`` of a head page and,
    past :data:`HEAD_ROOM`, page frags (:func:`pp_buff_alloc`). Returns the head's row;
    -1 when the pool has too few pages (those it took given back, head first, as
    ``page_pool_put_page`` does: ``direct``, the pool's alloc cache - the caller runs
    its NAPI - else its ring), -2 when it needs more than ``MAX_SKB_FRAGS`` frags
    (nothing taken)."""
    pages, pfn_base, psc, cache, ring, free, state = pool
    nf = nr_frags_for(length)
    if nf > MAX_SKB_FRAGS:
        return -2
    head, got = pp_buff_alloc(pool, length)
    if head < 0:
        return -1
    if got < nf:
        for k in range(got + 1):
            row = head if k == 0 else _ld(pages, head, FRAG0 + SKB_FRAG_SIZE * (k - 1), 8) \
                - pfn_base
            if direct:
                _recycle(psc, cache, ring, free, state, row)
            else:
                _put_ring(psc, ring, free, state, row)
        return -1
    skb_write(pages, pfn_base, head, XDP_PACKET_HEADROOM, 0, src, min(length, width))
    return head


@njit(cache=True, nogil=True, _nrt=False)
def bufs_dma(pool, data, lens, direct, out):  # type: ignore[no-untyped-def]
    """:func:`buf_dma` of the frames of ``data`` (a row each, ``lens`` bytes long):
    heads' pfns into ``out``, or its negative answer. The reference is
    :func:`pyxdp.net.xdp_mem.xdp_buff_copy_in`."""
    width = data.shape[1]
    addr = data.ctypes.data
    for i in range(len(lens)):
        head = buf_dma(pool, addr + i * data.strides[0], width, lens[i], direct)
        out[i] = head + pool[1] if head >= 0 else head


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def buf_head_len(pages, pfn_base, row, data, at, length, room):  # type: ignore[no-untyped-def]
    """The head's bytes of a multi-buffer packet whose frags lie in the same pages as its
    head (``length`` bytes in all, its head at offset ``data`` of page ``row``, its
    ``skb_shared_info`` at offset ``at`` there); -1 when its frags or lengths are not
    all in those pages or it is longer than ``room``."""
    npages, psize = pages.shape
    if at < 0 or at + SHINFO_OFF_FRAGS > psize or length > room:
        return -1
    nr = pages[row, at + SHINFO_OFF_NR_FRAGS]
    if at + SHINFO_OFF_FRAGS + SKB_FRAG_SIZE * nr > psize:
        return -1
    rest = 0
    for j in range(nr):
        fa = at + SHINFO_OFF_FRAGS + SKB_FRAG_SIZE * j
        frow = _ld(pages, row, fa, 8) - pfn_base
        flen = _ld(pages, row, fa + 8, 4)
        if frow < 0 or frow >= npages or _ld(pages, row, fa + 12, 4) + flen > psize:
            return -1
        rest += flen
    head = length - rest
    if head < 0 or data < 0 or data + head > psize:
        return -1
    return head


@njit(cache=True, nogil=True, inline="always", _nrt=False)
def buf_copy_bits(pages, pfn_base, row, data, at, length, dst, room):  # type: ignore[no-untyped-def] # noqa: E501
    """``skb_copy_bits`` of such a packet (:func:`buf_head_len`) to host address ``dst``
    (``room`` bytes there), the head's bytes then each frag's. False (nothing copied)
    when :func:`buf_head_len` refuses it."""
    head = buf_head_len(pages, pfn_base, row, data, at, length, room)
    if head < 0:
        return False
    addr = pages.ctypes.data
    stride = pages.strides[0]
    memcpy(dst, addr + row * stride + data, head)
    pos = head
    for j in range(pages[row, at + SHINFO_OFF_NR_FRAGS]):
        fa = at + SHINFO_OFF_FRAGS + SKB_FRAG_SIZE * j
        flen = _ld(pages, row, fa + 8, 4)
        memcpy(dst + pos, addr + (_ld(pages, row, fa, 8) - pfn_base) * stride
               + _ld(pages, row, fa + 12, 4), flen)
        pos += flen
    return True


@njit(cache=True, nogil=True, _nrt=False)
def bufs_copy_bits(pages, pfn_base, rows, data, sh, length, out, out_rows, done):  # type: ignore[no-untyped-def] # noqa: E501
    """:func:`buf_copy_bits` of packet ``i`` (``length[i]`` bytes in all; its head at
    offset ``data[i]`` of page ``rows[i]``, its ``skb_shared_info`` at offset ``sh[i]``
    there) into ``out[out_rows[i]]``; ``done[i]`` set. A packet whose frags or lengths
    are not all in those pages and that row is left alone."""
    oaddr = out.ctypes.data
    for i in range(len(rows)):
        if buf_copy_bits(pages, pfn_base, rows[i], data[i], sh[i], length[i],
                         oaddr + out_rows[i] * out.strides[0], out.shape[1]):
            done[i] = 1


@njit(cache=True, nogil=True, _nrt=False)
def rows_copy(src, soff, dst, doff, lens):  # type: ignore[no-untyped-def]
    """Linear skbs copied row to row (``skb_copy_bits`` of a linear buffer; generic XDP's
    linearised skbs in and out of their frames): ``lens[i]`` bytes from byte
    ``soff[i]`` of row i of ``src`` to byte ``doff[i]`` of row i of ``dst`` (2-D
    uint8 arrays), cut to what both rows hold."""
    sa = src.ctypes.data
    da = dst.ctypes.data
    for i in range(len(lens)):
        so = soff[i]
        do = doff[i]
        n = min(lens[i], src.shape[1] - so, dst.shape[1] - do)
        if so >= 0 and do >= 0 and n > 0:
            memcpy(da + i * dst.strides[0] + do, sa + i * src.strides[0] + so, n)
