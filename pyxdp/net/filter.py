"""The XDP helpers of ``net/core/filter.c`` and ``struct bpf_redirect_info``.

``xdp_adjust_head``/``meta``/``tail``, ``xdp_get_buff_len``,
``xdp_load_bytes``/``store_bytes``, ``csum_diff``, ``redirect`` and
``redirect_map`` with the kernel's argument checks and return codes, and
pyxdp's extension ``bpf_redirect_xsk`` (id
:data:`~pyxdp.asm.helpers_names.PYXDP_FUNC_REDIRECT_XSK`, outside Linux's
range: the kernel refuses programs calling it). The
redirect helpers only *record* where the packet should go, in
:class:`RedirectInfo`, exactly as the kernel's ``bpf_redirect_info`` does;
acting on it is ``xdp_do_redirect`` in the datapath.

``XDP_HELPERS`` is the full table an XDP program may call: the base helpers
of :mod:`pyxdp.vm.helpers` plus these.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyxdp.asm.helpers_names import PYXDP_FUNC_REDIRECT_XSK
from pyxdp.errors import HelperFault
from pyxdp.net.xdp import CTX_BASE, XdpBuff
from pyxdp.uapi.bpf import BpfMapType, XdpAction
from pyxdp.vm.helpers import BASE_HELPERS, RunContext, helper, neg
from pyxdp.vm.interpreter import Helper, HelperFn

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["BPF_FUNC_REDIRECT_XSK", "XDP_HELPERS", "RedirectInfo", "csum_diff"]

M64 = 0xFFFF_FFFF_FFFF_FFFF
M32 = 0xFFFF_FFFF
INT_MAX = 0x7FFF_FFFF
BPF_F_BROADCAST = 1 << 3
BPF_F_EXCLUDE_INGRESS = 1 << 4
_ACTION_MASK = int(XdpAction.XDP_ABORTED | XdpAction.XDP_DROP | XdpAction.XDP_PASS
                   | XdpAction.XDP_TX)

XDP_HELPERS: dict[int, Helper] = dict(BASE_HELPERS)
BPF_FUNC_REDIRECT_XSK = PYXDP_FUNC_REDIRECT_XSK


@dataclass
class RedirectInfo:
    """``struct bpf_redirect_info``: persists across packets of one poll.

    ``tgt_index``/``tgt_value`` are never cleared by the kernel; ``map_id``,
    ``map_type`` and ``flags`` are cleared when a redirect is carried out.
    """

    tgt_index: int = 0
    tgt_value: Any = None
    map: Any = None
    flags: int = 0
    map_id: int = 0
    map_type: int = int(BpfMapType.BPF_MAP_TYPE_UNSPEC)

    def describe(self) -> dict[str, Any]:
        return {"tgt_index": self.tgt_index, "map_id": self.map_id,
                "map_type": BpfMapType(self.map_type).name if self.map_type in
                BpfMapType._value2member_map_ else self.map_type,
                "flags": self.flags}


def _xdp(vm: Interpreter, r1: int) -> XdpBuff:
    ctx = vm.context
    if not isinstance(ctx, RunContext) or ctx.xdp is None:
        raise HelperFault("XDP helper called outside an XDP run")
    if r1 != CTX_BASE:
        raise HelperFault(f"first argument {r1:#x} is not the xdp_md context")
    xdp: XdpBuff = ctx.xdp
    return xdp


def _s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def _after_change(vm: Interpreter, xdp: XdpBuff) -> None:
    """Refresh what the program sees of data/data_end/data_meta after a helper moved them."""
    data, data_end, data_meta = xdp.ctx_pointers()
    cv = vm.ctx_values
    cv[0], cv[1], cv[2] = data, data_end, data_meta


def _xh(helper_id: int, name: str) -> Callable[[HelperFn], HelperFn]:
    return helper(helper_id, name, XDP_HELPERS)


@_xh(44, "xdp_adjust_head")
def _adjust_head(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = _xdp(vm, r1)
    ret = xdp.adjust_head(_s32(r2))
    _after_change(vm, xdp)
    return ret & M64


@_xh(54, "xdp_adjust_meta")
def _adjust_meta(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = _xdp(vm, r1)
    ret = xdp.adjust_meta(_s32(r2))
    _after_change(vm, xdp)
    return ret & M64


@_xh(65, "xdp_adjust_tail")
def _adjust_tail(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = _xdp(vm, r1)
    ret = xdp.adjust_tail(_s32(r2))
    _after_change(vm, xdp)
    return ret & M64


@_xh(188, "xdp_get_buff_len")
def _get_buff_len(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _xdp(vm, r1).buff_len()


@_xh(189, "xdp_load_bytes")
def _load_bytes(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = _xdp(vm, r1)
    got = xdp.load_bytes(r2 & M32, r4 & M32)
    if isinstance(got, int):
        return got & M64
    vm.mem.write(r3, got)
    return 0


@_xh(190, "xdp_store_bytes")
def _store_bytes(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = _xdp(vm, r1)
    length = r4 & M32
    if length > 0xFFFF or (r2 & M32) > 0xFFFF:
        return neg(errno.EFAULT)
    return xdp.store_bytes(r2 & M32, vm.mem.read(r3, length)) & M64


# -- checksums ----------------------------------------------------------------------------

M64_ = 0xFFFF_FFFF_FFFF_FFFF


def _adc_chain(res: int, words: list[int]) -> int:
    """``addq w0; adcq w1; ...; adcq $0``: add with carry; the last carry-out is lost."""
    carry = 0
    for w in words:
        t = res + w + carry
        res, carry = t & M64_, t >> 64
    return (res + carry) & M64_


def _words(buf: bytes, off: int, n: int) -> list[int]:
    return [int.from_bytes(buf[off + 8 * k:off + 8 * k + 8], "little") for k in range(n)]


def _csum_partial(buf: bytes, seed: int) -> int:
    """x86-64 ``csum_partial`` exactly (arch/x86/lib/csum-partial_64.c): 64-bit add-with-carry
    chains over 40-byte blocks (two interleaved above 80 bytes), then 32/16/8 bytes and a
    zero-padded tail, folded to a 32-bit ``__wsum``. The chain structure matters: where a
    chain's final carry is dropped decides between the two encodings of zero."""
    temp = seed & M32
    off, n = 0, len(buf)
    if n >= 80:
        temp2 = 0
        while n >= 80:
            temp = _adc_chain(temp, _words(buf, off, 5))
            temp2 = _adc_chain(temp2, _words(buf, off + 40, 5))
            off += 80
            n -= 80
        temp = _adc_chain(temp, [temp2])
    if n >= 40:
        temp = _adc_chain(temp, _words(buf, off, 5))
        n -= 40
        off += 40
        if not n:
            return _finalize(temp)
    for chunk in (32, 16, 8):
        if n & chunk:
            temp = _adc_chain(temp, _words(buf, off, chunk // 8))
            off += chunk
    if n & 7:
        trail = int.from_bytes(buf[off:off + (n & 7)], "little")
        temp = _adc_chain(temp, [trail])
    return _finalize(temp)


def _finalize(temp: int) -> int:
    """``csum_finalize_sum``: ``(t + ror64(t, 32)) >> 32``."""
    ror = ((temp >> 32) | (temp << 32)) & M64_
    return ((temp + ror) & M64_) >> 32


def _csum_add(a: int, b: int) -> int:
    res = ((a & M32) + (b & M32)) & M32
    return (res + (res < (b & M32))) & M32


def _from32to16(x: int) -> int:
    """``csum_from32to16``: ``sum += ror32(sum, 16); return sum >> 16`` (16 bits)."""
    x &= M32
    x = (x + (((x >> 16) | (x << 16)) & M32)) & M32
    return x >> 16


def csum_diff(frm: bytes, to: bytes, seed: int) -> int:
    """``bpf_csum_diff`` as Linux 6.13+ computes it (no size checks; always folded)."""
    seed &= M32
    if frm and to:
        return _from32to16(_csum_add(_csum_partial(to, seed), ~_csum_partial(frm, 0) & M32))
    if to:
        return _from32to16(_csum_partial(to, seed))
    if frm:
        return _from32to16(~_csum_partial(frm, ~seed & M32) & M32)
    return _from32to16(seed)


@_xh(28, "csum_diff")
def _csum_diff(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    from_size, to_size = r2 & M32, r4 & M32
    frm = vm.mem.read(r1, from_size) if from_size else b""
    to = vm.mem.read(r3, to_size) if to_size else b""
    return csum_diff(frm, to, r5)


# -- redirect -----------------------------------------------------------------------------

def _ri(vm: Interpreter) -> RedirectInfo:
    ctx = vm.context
    if not isinstance(ctx, RunContext):
        raise HelperFault("redirect helper needs a program run context")
    if ctx.ri is None:
        ctx.ri = RedirectInfo()
    ri: RedirectInfo = ctx.ri
    return ri


@_xh(23, "redirect")
def _redirect(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    ri = _ri(vm)
    if r2:
        return int(XdpAction.XDP_ABORTED)
    ri.tgt_index = r1 & M32
    ri.map_id = INT_MAX
    ri.map_type = int(BpfMapType.BPF_MAP_TYPE_UNSPEC)
    return int(XdpAction.XDP_REDIRECT)


_FLAG_MASK = {
    int(BpfMapType.BPF_MAP_TYPE_DEVMAP): BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS,
    int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH): BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS,
    int(BpfMapType.BPF_MAP_TYPE_CPUMAP): 0,
    int(BpfMapType.BPF_MAP_TYPE_XSKMAP): 0,
}


def _redirect_lookup(m: Any, key: int) -> Any:
    """The map type's ``__*_map_lookup_elem`` as ``map_redirect`` uses it (None: no entry)."""
    if m.map_type == BpfMapType.BPF_MAP_TYPE_XSKMAP:
        return m.socket_at(key)
    if m.map_type in (BpfMapType.BPF_MAP_TYPE_DEVMAP, BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH):
        return m.ifindex_at(key) or None
    if m.map_type == BpfMapType.BPF_MAP_TYPE_CPUMAP:
        return m.qsize_at(key) or None
    return m.lookup(key.to_bytes(m.key_size, "little"))


@_xh(51, "redirect_map")
def _redirect_map(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``__bpf_xdp_redirect_map``: the map type's lookup decides, the flags' low bits
    are the action when the key has no entry."""
    from pyxdp.maps.base import map_by_addr
    m = map_by_addr(r1)
    if m is None:
        raise HelperFault(f"{r1:#x} is not a map")
    flag_mask = _FLAG_MASK.get(m.map_type)
    if flag_mask is None:
        raise HelperFault(f"bpf_redirect_map on a map of type {m.map_type} (the verifier "
                          "allows only devmap, devmap_hash, cpumap and xskmap)")
    ri = _ri(vm)
    if r3 & ~(_ACTION_MASK | flag_mask):
        return int(XdpAction.XDP_ABORTED)
    key = r2 & M32
    value = _redirect_lookup(m, key)
    ri.tgt_value = value
    if value is None and not r3 & BPF_F_BROADCAST:
        ri.map_id = INT_MAX
        ri.map_type = int(BpfMapType.BPF_MAP_TYPE_UNSPEC)
        return r3 & _ACTION_MASK
    ri.tgt_index = key
    ri.map_id = m.id
    ri.map_type = m.map_type
    if r3 & BPF_F_BROADCAST:
        ri.map, ri.flags = m, r3
    else:
        ri.map, ri.flags = None, 0
    return int(XdpAction.XDP_REDIRECT)


@_xh(BPF_FUNC_REDIRECT_XSK, "redirect_xsk")
def _redirect_xsk(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_redirect_xsk(ctx, flags)`` (pyxdp extension): to the AF_XDP socket ``bind()``
    registered on the packet's own rx queue, else the action in ``flags``' low bits.

    Checked like ``__bpf_xdp_redirect_map`` with no flag allowed: other bits give
    XDP_ABORTED. The redirect state is an XSKMAP one with map id 0 and the queue as
    index (what ``xdp_do_redirect`` hands to :func:`pyxdp.xsk.datapath.xsk_map_redirect`).
    """
    xdp = _xdp(vm, r1)
    ri = _ri(vm)
    if r2 & ~_ACTION_MASK:
        return int(XdpAction.XDP_ABORTED)
    ctx = vm.context
    assert isinstance(ctx, RunContext)
    queue = xdp.rxq.queue_index
    xs = ctx.xsk_lookup(xdp.rxq.ifindex, queue) if ctx.xsk_lookup is not None else None
    if xs is None:
        return r2 & _ACTION_MASK
    ri.tgt_index = queue
    ri.tgt_value = xs
    ri.map_id = 0
    ri.map_type = int(BpfMapType.BPF_MAP_TYPE_XSKMAP)
    ri.map, ri.flags = None, 0
    return int(XdpAction.XDP_REDIRECT)


# -- bpf_fib_lookup, bpf_check_mtu, bpf_xdp_event_output ------------------------------------

from pyxdp.net import fib as _fib  # noqa: E402  (the routing model these helpers consult)


def _net(vm: Interpreter) -> _fib.Fib:
    """The run's network namespace; a fresh one (loopback only) when none was given."""
    ctx = vm.context
    assert isinstance(ctx, RunContext)  # _xdp() has checked it
    if ctx.fib is None:
        ctx.fib = _fib.Fib()
    net: _fib.Fib = ctx.fib
    return net


@_xh(69, "fib_lookup")
def _fib_lookup(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_xdp_fib_lookup``: the MTU is always checked (``tot_len`` against the route's)."""
    _xdp(vm, r1)
    # "plen < sizeof(*params)" compares an int with a size_t: a negative
    # plen is huge there (the verifier never lets one through anyway).
    plen = (_s32(r3)) & M64
    if plen < _fib.FIB_LOOKUP_SIZE:
        return neg(errno.EINVAL)
    before = vm.mem.read(r2, _fib.FIB_LOOKUP_SIZE)
    params = _fib.FibLookup(before)
    ret = _net(vm).bpf_fib_lookup(params, r4 & M32)
    if bytes(params.raw) != before:
        vm.mem.write(r2, bytes(params.raw))
    return ret & M64


@_xh(163, "check_mtu")
def _check_mtu(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_xdp_check_mtu``: ifindex 0 is the ingress device; ``*mtu_len`` gets its MTU."""
    xdp = _xdp(vm, r1)
    net = _net(vm)
    ifindex = r2 & M32
    if ifindex == 0 and xdp.rxq.ifindex not in net.devices:
        raise HelperFault(f"bpf_check_mtu: the ingress device (ifindex {xdp.rxq.ifindex}) is "
                          "not in the network model (add it with env.fib.add_device)")
    mtu_len = vm.mem.load(r3, 4)
    ret, new = net.check_mtu(xdp.rxq.ifindex, ifindex, mtu_len, r4 & M32, r5,
                             xdp.data_end - xdp.data)
    if new is not None:
        vm.mem.store(r3, 4, new)
    return ret & M64


BPF_F_INDEX_MASK = 0xFFFF_FFFF
BPF_F_CTXLEN_MASK = 0xFFFFF << 32


@_xh(25, "perf_event_output")
def _xdp_event_output(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_xdp_event_output``: ``size`` bytes at ``data`` then ``(flags >> 32) & 0xfffff``
    packet bytes (frags included) into the perf event array slot ``flags & 0xffffffff``."""
    from pyxdp.maps.base import map_by_addr
    xdp = _xdp(vm, r1)
    m = map_by_addr(r2)
    output = getattr(m, "try_output", None)
    if m is None or m.map_type != BpfMapType.BPF_MAP_TYPE_PERF_EVENT_ARRAY or output is None:
        raise HelperFault(f"bpf_perf_event_output: {r2:#x} is not a perf event array")
    if r3 & ~(BPF_F_INDEX_MASK | BPF_F_CTXLEN_MASK):
        return neg(errno.EINVAL)
    ctx_len = (r3 & BPF_F_CTXLEN_MASK) >> 32
    if ctx_len > xdp.buff_len():
        return neg(errno.EFAULT)
    data = vm.mem.read(r4, r5)
    ctx = vm.context
    assert isinstance(ctx, RunContext)
    ret: int = output(data, cpu=ctx.cpu, flags=r3, ctx=xdp.packet()[:ctx_len])
    return ret & M64
