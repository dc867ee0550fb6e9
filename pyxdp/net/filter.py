"""The XDP helpers of ``net/core/filter.c`` and ``struct bpf_redirect_info``.

``xdp_adjust_head``/``meta``/``tail``, ``xdp_get_buff_len``,
``xdp_load_bytes``/``store_bytes``, ``dynptr_read``/``write`` over XDP
dynptrs (:mod:`pyxdp.net.xdp_dynptr`), ``csum_diff``, ``redirect`` and
``redirect_map`` with the kernel's argument checks and return codes, and
pyxdp's extension ``bpf_redirect_xsk`` (id
:data:`~pyxdp.asm.helpers_names.PYXDP_FUNC_REDIRECT_XSK`, outside Linux's
range: the kernel refuses programs calling it). The
redirect helpers only *record* where the packet should go, in
:class:`RedirectInfo`, exactly as the kernel's ``bpf_redirect_info`` does;
acting on it is ``xdp_do_redirect`` in the datapath.

``XDP_HELPERS`` is the full table an XDP program may call: the base helpers
of :mod:`pyxdp.vm.helpers` plus these and the socket and syncookie helpers of
:mod:`pyxdp.net.filter_sk`.

The helpers here are the reference path. Where the common case is worth
doing in machine code, the helper's native twin (LLVM IR the JIT inlines) is
registered with it under the same id (:func:`_xh`'s ``native``), over the
same memory: the packet helpers' twins are :mod:`pyxdp.net.xdp`'s, beside
the ``XdpBuff`` methods; ``csum_diff``'s and the redirects' are here, the
redirects writing the run context's ``ri_*`` words that mirror
:class:`RedirectInfo`; ``redirect_map`` dispatches to the map type's own
(:func:`pyxdp.vm.jit.natives.register_map`).
"""

from __future__ import annotations

import errno
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from pyxdp.asm.helpers_names import PYXDP_FUNC_REDIRECT_XSK
from pyxdp.errors import HelperFault
from pyxdp.maps.sock_map import SocketMapBase
from pyxdp.net.frames import KIND_FRAGS, KIND_FRAME, XDP_TX_BULK_SIZE, Bulk, Frames
from pyxdp.net.xdp import (
    CTX_BASE,
    XDP_FLAGS_HAS_FRAGS,
    XdpBuff,
    adjust_head_fn,
    adjust_meta_fn,
    adjust_tail_fn,
    buff_len_fn,
    load_bytes_fn,
    store_bytes_fn,
)
from pyxdp.uapi.bpf import BpfMapType, RedirectFlag, XdpAction
from pyxdp.vm.helpers import BASE_HELPERS, RunContext, helper, neg
from pyxdp.vm.interpreter import Helper, HelperFn, HelperTable
from pyxdp.vm.jit.abi import NF_RUNCTX, SLOW, Natives
from pyxdp.vm.jit.ir import LIKELY, TBAA_CTX_VALUES, TBAA_MEM, Text, ret_if
from pyxdp.vm.jit.natives import (
    INT_MAX,
    HelperNative,
    register_helper,
    ri_init,
    runctx_guard,
    xdp_guard,
)
from pyxdp.vm.map_space import map_at

if TYPE_CHECKING:
    from pyxdp.net.xsk_buff_pool import XskHost, XskNetDevice, XskRxQueue
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["BPF_FUNC_REDIRECT_XSK", "FILTER_KFUNCS", "XDP_HELPERS", "RedirectInfo", "csum_diff",
           "csum_diff_fn", "redirect_fn", "redirect_xsk_fn", "s32", "xdp_helper", "xdp_of"]

M64 = 0xFFFF_FFFF_FFFF_FFFF
M32 = 0xFFFF_FFFF
BPF_F_BROADCAST = int(RedirectFlag.BPF_F_BROADCAST)
BPF_F_EXCLUDE_INGRESS = int(RedirectFlag.BPF_F_EXCLUDE_INGRESS)
_ACTION_MASK = int(XdpAction.XDP_ABORTED | XdpAction.XDP_DROP | XdpAction.XDP_PASS
                   | XdpAction.XDP_TX)

# The full table: the base helpers, this module's, and - loaded with the first program
# calling one - the routing helpers (pyxdp.net.filter_fib) and the socket lookups and
# SYN cookies (pyxdp.net.filter_sk) with the models they need.
XDP_HELPERS: HelperTable = BASE_HELPERS.copy()
XDP_HELPERS.defer("pyxdp.net.filter_fib", "FIB_HELPERS", (69, 163))
XDP_HELPERS.defer("pyxdp.net.filter_sk", "SK_HELPERS",
                  (84, 85, 86, 99, 100, 110, 204, 205, 206, 207))
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


def xdp_of(vm: Interpreter, r1: int) -> XdpBuff:
    """The run's xdp_buff, for an XDP helper called with its context in ``r1``."""
    ctx = vm.context
    if not isinstance(ctx, RunContext) or ctx.xdp is None:
        raise HelperFault("XDP helper called outside an XDP run")
    if r1 != CTX_BASE:
        raise HelperFault(f"first argument {r1:#x} is not the xdp_md context")
    xdp: XdpBuff = ctx.xdp
    return xdp


def s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def _after_change(vm: Interpreter, xdp: XdpBuff) -> None:
    """Refresh what the program sees of data/data_end/data_meta after a helper moved them."""
    data, data_end, data_meta = xdp.ctx_pointers()
    cv = vm.ctx_values
    cv[0], cv[1], cv[2] = data, data_end, data_meta


def xdp_helper(helper_id: int, name: str, native: HelperNative | None = None,
               table: MutableMapping[int, Helper] = XDP_HELPERS
               ) -> Callable[[HelperFn], HelperFn]:
    """An XDP helper, and with ``native`` its twin for the JIT (under the same id);
    ``table``: a lazily loaded module's own (see :data:`XDP_HELPERS`)."""
    if native is not None:
        register_helper(helper_id, native)
    return helper(helper_id, name, table)


_xh = xdp_helper


_BASE_LOOKUP, _BASE_UPDATE = BASE_HELPERS[1].fn, BASE_HELPERS[2].fn


# On a sockmap or sockhash XDP's map helpers take and give sockets (pyxdp.net.filter_sk);
# on any other map they are the base helpers.
@_xh(1, "map_lookup_elem")
def _map_lookup_elem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    m = map_at(r1)
    if not isinstance(m, SocketMapBase):
        return _BASE_LOOKUP(vm, r1, r2, r3, r4, r5)
    from pyxdp.net.filter_sk import sockmap_lookup  # sockets load with their first use
    return sockmap_lookup(vm, m, r2)


@_xh(2, "map_update_elem")
def _map_update_elem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    m = map_at(r1)
    if not isinstance(m, SocketMapBase):
        return _BASE_UPDATE(vm, r1, r2, r3, r4, r5)
    from pyxdp.net.filter_sk import sockmap_update
    return sockmap_update(vm, m, r2, r3, r4)


@_xh(44, "xdp_adjust_head", HelperNative("adjust_head", 2, adjust_head_fn, ("pkt",)))
def _adjust_head(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = xdp_of(vm, r1)
    ret = xdp.adjust_head(s32(r2))
    _after_change(vm, xdp)
    return ret & M64


@_xh(54, "xdp_adjust_meta", HelperNative("adjust_meta", 2, adjust_meta_fn, ("pkt",)))
def _adjust_meta(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = xdp_of(vm, r1)
    ret = xdp.adjust_meta(s32(r2))
    _after_change(vm, xdp)
    return ret & M64


@_xh(65, "xdp_adjust_tail", HelperNative("adjust_tail", 2, adjust_tail_fn, ("pkt",)))
def _adjust_tail(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = xdp_of(vm, r1)
    ret = xdp.adjust_tail(s32(r2))
    _after_change(vm, xdp)
    return ret & M64


@_xh(188, "xdp_get_buff_len", HelperNative("buff_len", 1, buff_len_fn))
def _get_buff_len(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return xdp_of(vm, r1).buff_len()


@_xh(189, "xdp_load_bytes",
     HelperNative("load_bytes", 4, load_bytes_fn, ("translate", "xdp_copy")))
def _load_bytes(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = xdp_of(vm, r1)
    got = xdp.load_bytes(r2 & M32, r4 & M32)
    if isinstance(got, int):
        return got & M64
    vm.mem.write(r3, got)
    return 0


@_xh(190, "xdp_store_bytes",
     HelperNative("store_bytes", 4, store_bytes_fn, ("translate", "xdp_copy")))
def _store_bytes(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = xdp_of(vm, r1)
    length = r4 & M32
    if length > 0xFFFF or (r2 & M32) > 0xFFFF:
        return neg(errno.EFAULT)
    return xdp.store_bytes(r2 & M32, vm.mem.read(r3, length)) & M64


def _pull_data(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_xdp_pull_data(xdp_md, len)`` (a kfunc): frags it shrinks or drops are
    mapped afresh if a later slice points into them."""
    xdp = xdp_of(vm, r1)
    ret = xdp.pull_data(r2 & M32)
    if not ret:
        for r in [r for r in vm.mem.regions if r.name.startswith("packet frag ")]:
            vm.mem.remove(r)
    _after_change(vm, xdp)
    return ret & M32  # an int, zero-extended in r0 (measured on Linux 6.18's x86 JIT)


# The kfuncs of this file that XDP programs may call, by name (bound as private helpers).
FILTER_KFUNCS: dict[str, HelperFn] = {"bpf_xdp_pull_data": _pull_data}


# The dynptr model (and the crypto one under it) loads with the first call: a program
# without dynptrs never needs it.
@_xh(201, "dynptr_read")
def _dynptr_read(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    from pyxdp.net.xdp_dynptr import dynptr_read

    return dynptr_read(vm, r1, r2, r3, r4, r5)


@_xh(202, "dynptr_write")
def _dynptr_write(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    from pyxdp.net.xdp_dynptr import dynptr_write

    return dynptr_write(vm, r1, r2, r3, r4, r5)


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


def _emit_adc(f: Text, res: str, p: str, nwords: int) -> str:
    """``addq w0; adcq w1; ...; adcq $0`` over ``nwords`` little-endian words at ``p``: the
    sum with carries, the last carry-out dropped (native form of :func:`_adc_chain`)."""
    carry = "0"
    for k in range(nwords):
        w = f.ins(f"load i64, ptr {f.gep(p, 8 * k)}, align 1{TBAA_MEM}")
        res, carry = _emit_adc_step(f, res, w, carry)
    return f.ins(f"add i64 {res}, {carry}")


def _emit_adc_step(f: Text, res: str, w: str, carry: str) -> tuple[str, str]:
    wide = f.ins(f"add i128 {f.ins(f'zext i64 {res} to i128')}, {f.ins(f'zext i64 {w} to i128')}")
    wide = f.ins(f"add i128 {wide}, {f.ins(f'zext i64 {carry} to i128')}")
    return (f.ins(f"trunc i128 {wide} to i64"),
            f.ins(f"trunc i128 {f.ins(f'lshr i128 {wide}, 64')} to i64"))


def _csum_partial_fn() -> str:
    """x86-64 ``csum_partial`` exactly as :func:`_csum_partial` models it: add-with-carry
    chains over 80-byte steps (two interleaved), a 40-byte block, 32/16/8-byte chunks and
    a zero-padded tail (read byte by byte: nothing past the buffer is touched)."""
    f = Text()
    f.at("entry")
    t0 = f.ins("and i64 %seed, 4294967295")
    f.cbr(f.ins("icmp uge i64 %n, 80"), "l80", "a80")
    f.at("l80")
    f.do("%tmp = phi i64 [ " + t0 + ", %entry ], [ %tmpn, %l80 ]")
    f.do("%tmp2 = phi i64 [ 0, %entry ], [ %tmp2n, %l80 ]")
    f.do("%off = phi i64 [ 0, %entry ], [ %offn, %l80 ]")
    f.do("%left = phi i64 [ %n, %entry ], [ %leftn, %l80 ]")
    at = f.gep("%p", "%off")
    f.do(f"%tmpn = add i64 {_emit_adc(f, '%tmp', at, 5)}, 0")
    f.do(f"%tmp2n = add i64 {_emit_adc(f, '%tmp2', f.gep(at, 40), 5)}, 0")
    f.do("%offn = add i64 %off, 80")
    f.do("%leftn = sub i64 %left, 80")
    f.cbr(f.ins("icmp uge i64 %leftn, 80"), "l80", "f80")
    f.at("f80")
    r, c = _emit_adc_step(f, "%tmpn", "%tmp2n", "0")
    f.do(f"%tmpf = add i64 {r}, {c}")
    f.br("a80")
    f.at("a80")
    f.do("%ta = phi i64 [ " + t0 + ", %entry ], [ %tmpf, %f80 ]")
    f.do("%oa = phi i64 [ 0, %entry ], [ %offn, %f80 ]")
    f.do("%la = phi i64 [ %n, %entry ], [ %leftn, %f80 ]")
    f.cbr(f.ins("icmp uge i64 %la, 40"), "d40", "ch")
    f.at("d40")
    f.do(f"%tb = add i64 {_emit_adc(f, '%ta', f.gep('%p', '%oa'), 5)}, 0")
    f.do("%ob = add i64 %oa, 40")
    f.do("%lb = sub i64 %la, 40")
    f.cbr(f.ins("icmp eq i64 %lb, 0"), "fin40", "ch")
    f.at("fin40")
    f.do(f"ret i64 {_emit_finalize(f, '%tb')}")
    f.at("ch")
    temp = f.ins("phi i64 [ %ta, %a80 ], [ %tb, %d40 ]")
    off = f.ins("phi i64 [ %oa, %a80 ], [ %ob, %d40 ]")
    left = f.ins("phi i64 [ %la, %a80 ], [ %lb, %d40 ]")
    for chunk in (32, 16, 8):
        yes, join = f"c{chunk}", f"j{chunk}"
        before = f.cur
        f.cbr(f.ins(f"icmp ne i64 {f.ins(f'and i64 {left}, {chunk}')}, 0"), yes, join)
        f.at(yes)
        t1 = _emit_adc(f, temp, f.gep("%p", off), chunk // 8)
        o1 = f.ins(f"add i64 {off}, {chunk}")
        f.br(join)
        f.at(join)
        temp = f.ins(f"phi i64 [ {temp}, %{before} ], [ {t1}, %{yes} ]")
        off = f.ins(f"phi i64 [ {off}, %{before} ], [ {o1}, %{yes} ]")
    tail = f.ins(f"and i64 {left}, 7")
    before = f.cur
    f.cbr(f.ins(f"icmp ne i64 {tail}, 0"), "tl", "done")
    f.at("tl")
    f.do("%k = phi i64 [ 0, %" + before + " ], [ %k1, %tl ]")
    f.do("%acc = phi i64 [ 0, %" + before + " ], [ %acc1, %tl ]")
    byte = f.ins(f"load i8, ptr {f.gep('%p', f.ins(f'add i64 {off}, %k'))}, align 1{TBAA_MEM}")
    sh = f.ins(f"shl i64 {f.ins(f'zext i8 {byte} to i64')}, {f.ins('shl i64 %k, 3')}")
    f.do(f"%acc1 = or i64 %acc, {sh}")
    f.do("%k1 = add i64 %k, 1")
    f.cbr(f.ins(f"icmp ult i64 %k1, {tail}"), "tl", "tj")
    f.at("tj")
    r, c = _emit_adc_step(f, temp, "%acc1", "0")
    tt = f.ins(f"add i64 {r}, {c}")
    f.br("done")
    f.at("done")
    fin = f.ins(f"phi i64 [ {temp}, %{before} ], [ {tt}, %tj ]")
    f.do(f"ret i64 {_emit_finalize(f, fin)}")
    return f.text("define internal i64 @csum_partial(ptr %p, i64 %n, i64 %seed) nounwind")


def _emit_finalize(f: Text, t: str) -> str:
    """``csum_finalize_sum``: ``(t + ror64(t, 32)) >> 32`` (as :func:`_finalize`)."""
    ror = f.ins(f"or i64 {f.ins(f'lshr i64 {t}, 32')}, {f.ins(f'shl i64 {t}, 32')}")
    return f.ins(f"lshr i64 {f.ins(f'add i64 {t}, {ror}')}, 32")


def csum_diff_fn(natives: Natives) -> str:
    """``bpf_csum_diff``'s native twin: :func:`csum_diff` is the reference path, reading the
    same bytes the program's regions hold. No size checks, always folded to 16 bits;
    pointers the regions refuse are SLOW (the Python helper faults)."""
    f = Text()
    f.at("entry")
    fs = f.ins("and i64 %r2, 4294967295")
    ts = f.ins("and i64 %r4, 4294967295")
    ptrs = []
    for name, addr, size in (("from", "%r1", fs), ("to", "%r3", ts)):
        yes, join = f.label(name), f.label(name + "j")
        before = f.cur
        f.cbr(f.ins(f"icmp ne i64 {size}, 0"), yes, join)
        f.at(yes)
        p = f.ins(f"call ptr @translate(ptr %ctx, i64 {addr}, i64 {size}, i1 false)")
        ret_if(f, f.ins(f"icmp eq ptr {p}, null"), SLOW)
        last = f.cur
        f.br(join)
        f.at(join)
        ptrs.append(f.ins(f"phi ptr [ null, %{before} ], [ {p}, %{last} ]"))
    seed = f.ins("and i64 %r5, 4294967295")
    fp, tp = ptrs
    hf = f.ins(f"icmp ne i64 {fs}, 0")
    ht = f.ins(f"icmp ne i64 {ts}, 0")
    # partial(to, seed) and partial(from, 0 or ~seed) cover all four cases.
    tsum = f.ins(f"call i64 @csum_partial(ptr {tp}, i64 {ts}, i64 {seed})")
    fseed = f.ins(f"select i1 {ht}, i64 0, i64 {f.ins(f'xor i64 {seed}, 4294967295')}")
    fsum = f.ins(f"call i64 @csum_partial(ptr {fp}, i64 {fs}, i64 {fseed})")
    nf = f.ins(f"xor i64 {fsum}, 4294967295")
    res = f.ins(f"and i64 {f.ins(f'add i64 {tsum}, {nf}')}, 4294967295")
    wrapped = f.ins(f"icmp ult i64 {res}, {nf}")
    added = f.ins(f"add i64 {res}, {f.ins(f'zext i1 {wrapped} to i64')}")
    added = f.ins(f"and i64 {added}, 4294967295")
    r = f.ins(f"select i1 {hf}, i64 {nf}, i64 {seed}")
    r = f.ins(f"select i1 {ht}, i64 {tsum}, i64 {r}")
    r = f.ins(f"select i1 {f.ins(f'and i1 {hf}, {ht}')}, i64 {added}, i64 {r}")
    f.do(f"ret i64 {f.ins(f'call i64 @fold16(i64 {r})')}")
    h = Text()
    h.at("entry")
    x = h.ins("and i64 %x, 4294967295")
    hi, lo = h.ins(f"lshr i64 {x}, 16"), h.ins(f"shl i64 {x}, 16")
    ror = h.ins(f"and i64 {h.ins(f'or i64 {hi}, {lo}')}, 4294967295")
    x = h.ins(f"and i64 {h.ins(f'add i64 {x}, {ror}')}, 4294967295")
    h.do(f"ret i64 {h.ins(f'lshr i64 {x}, 16')}")
    return (f.text("define internal i64 @csum_diff(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                   "i64 %r4, i64 %r5) nounwind")
            + _csum_partial_fn()
            + h.text("define internal i64 @fold16(i64 %x) nounwind"))


@_xh(28, "csum_diff", HelperNative("csum_diff", 5, csum_diff_fn, ("translate",)))
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


def redirect_fn(natives: Natives) -> str:
    """``bpf_redirect``'s native twin: records the ifindex in the run context's
    ``ri_*`` words, the native layout of the :class:`RedirectInfo` the reference
    path (:func:`_redirect`) fills."""
    f = Text()
    f.at("entry")
    runctx_guard(f)
    ri_init(f)
    ret_if(f, f.ins("icmp ne i64 %r2, 0"), 0)
    f.cset("%ctx", "ri_tgt_index", f.ins("and i64 %r1, 4294967295"))
    f.cset("%ctx", "ri_map_id", str(INT_MAX))
    f.cset("%ctx", "ri_map_type", "0")
    f.do("ret i64 4")
    return f.text("define internal i64 @redirect(ptr %ctx, i64 %r1, i64 %r2) nounwind")


@_xh(23, "redirect", HelperNative("redirect", 2, redirect_fn))
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


# Native: the call site dispatches to the map type's registered redirect function.
@_xh(51, "redirect_map", HelperNative("redirect_map"))
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


def redirect_xsk_fn(natives: Natives) -> str:
    """``bpf_redirect_xsk``'s native twin (reference path: :func:`_redirect_xsk`, same
    redirect state): the queue's bit in the registration table; SLOW where the table
    does not tell (no table, ifindex past it, queue >= 64)."""
    f = Text()
    f.at("entry")
    xdp_guard(f, natives.ctx_base, False)
    ok = f.flag(NF_RUNCTX)
    yes = f.label("rc")
    f.cbr(ok, yes, "slow", LIKELY)
    f.at(yes)
    cv = f.cget("%ctx", "ctx_values", "ptr")
    ifx = f.word(cv, 3, "i64", TBAA_CTX_VALUES)
    q = f.word(cv, 4, "i64", TBAA_CTX_VALUES)
    ntable = f.cget("%ctx", "xsk_ntable")
    in_table = f.ins(f"icmp ult i64 {ifx}, {ntable}")
    known = f.ins(f"and i1 {in_table}, {f.ins(f'icmp ult i64 {q}, 64')}")
    ret_if(f, f.ins(f"xor i1 {known}, true"), SLOW)
    ri_init(f)
    ret_if(f, f.ins(f"icmp ne i64 {f.ins('and i64 %r2, -4')}, 0"), 0)
    mask = f.at_index(f.cget("%ctx", "xsk_table", "ptr"), ifx, "i64", 8)
    bit = f.ins(f"and i64 {f.ins(f'lshr i64 {mask}, {q}')}, 1")
    miss, hit = f.label("miss"), f.label("hit")
    f.cbr(f.ins(f"icmp eq i64 {bit}, 0"), miss, hit)
    f.at(miss)
    f.do(f"ret i64 {f.ins('and i64 %r2, 3')}")
    f.at(hit)
    f.cset("%ctx", "ri_tgt_index", q)
    f.cset("%ctx", "ri_map_id", "0")
    f.cset("%ctx", "ri_map_type", str(int(BpfMapType.BPF_MAP_TYPE_XSKMAP)))
    f.cset("%ctx", "ri_map", "0")
    f.cset("%ctx", "ri_flags", "0")
    f.do("ret i64 4")
    return f.text("define internal i64 @redirect_xsk(ptr %ctx, i64 %r1, i64 %r2) nounwind")


@_xh(BPF_FUNC_REDIRECT_XSK, "redirect_xsk", HelperNative("redirect_xsk", 2, redirect_xsk_fn))
def _redirect_xsk(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_redirect_xsk(ctx, flags)`` (pyxdp extension): to the AF_XDP socket ``bind()``
    registered on the packet's own rx queue, else the action in ``flags``' low bits.

    Checked like ``__bpf_xdp_redirect_map`` with no flag allowed: other bits give
    XDP_ABORTED. The redirect state is an XSKMAP one with map id 0 and the queue as
    index (what ``xdp_do_redirect`` hands to :func:`pyxdp.net.xsk.xsk_map_redirect`).
    """
    xdp = xdp_of(vm, r1)
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


# -- bpf_xdp_event_output ------------------------------------------------------------

# The twin is the perf event array's own (pyxdp.maps.perf_event_array), on an array the
# program names.
@_xh(25, "perf_event_output", HelperNative("perf_output"))
def _xdp_event_output(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_xdp_event_output``: ``size`` bytes at ``data`` then ``(flags >> 32) & 0xfffff``
    packet bytes (frags included) into the perf event array slot ``flags & 0xffffffff``."""
    from pyxdp.maps.base import map_by_addr
    xdp = xdp_of(vm, r1)
    m = map_by_addr(r2)
    output = getattr(m, "try_output", None)
    if m is None or m.map_type != BpfMapType.BPF_MAP_TYPE_PERF_EVENT_ARRAY or output is None:
        raise HelperFault(f"bpf_perf_event_output: {r2:#x} is not a perf event array")
    # (the array's module: loaded with the array, not with XDP's helpers)
    from pyxdp.maps.perf_event_array import BPF_F_CTXLEN_MASK, BPF_F_INDEX_MASK
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


# -----------------------------------------------------------------------------------
# xdp_do_redirect and xdp_do_flush: acting on the redirect info in the datapath
# -----------------------------------------------------------------------------------
#
# A poll's frames with XDP_REDIRECT verdicts go through xdp_do_redirect, which hands
# each group to its map type's enqueue operation: devmap and devmap_hash, and
# bpf_redirect's ifindex (UNSPEC with map id INT_MAX), register theirs in
# pyxdp.net.devmap, cpumap in pyxdp.net.cpumap, XSKMAP in pyxdp.net.xsk; each
# queues into the poll's flush lists (BulkQueues), which xdp_do_flush empties
# through the flush operations the same modules register, in the kernel's order.

_UNSPEC = int(BpfMapType.BPF_MAP_TYPE_UNSPEC)
I64 = npt.NDArray[np.int64]


@dataclass
class _Verdicts:
    action: I64
    map_id: I64
    map_type: I64
    index: I64
    flags: I64


class _Prog(Protocol):
    @property
    def id(self) -> int: ...


# (host, dev, rq, prog, map_id, frames, index, flags, bq) -> (err, to_ifindex) per frame
RedirectOp = Callable[..., tuple[I64, I64]]
FlushOp = Callable[[Any, "BulkQueues"], None]
_REDIRECT_OPS: dict[int, RedirectOp] = {}
_FLUSH_OPS: list[tuple[int, FlushOp]] = []


def register_redirect(map_types: Sequence[int], op: RedirectOp) -> None:
    """The enqueue operation of a redirect target type (``map->ops->map_redirect``'s
    datapath side: ``dev_map_enqueue``, ``cpu_map_enqueue``, ``__xsk_map_redirect``)."""
    for t in map_types:
        _REDIRECT_OPS[int(t)] = op


def register_flush(order: int, op: FlushOp) -> None:
    """A flush list of ``xdp_do_flush``, run in ``order`` (devmap 0, cpumap 1, xsk 2)."""
    _FLUSH_OPS.append((order, op))
    _FLUSH_OPS.sort(key=lambda e: e[0])


@dataclass
class BulkQueues:
    """Per-poll (per-CPU) flush lists: devmap bulk queues per device,
    the XDP_TX bulk, cpumap bulks per entry."""

    dev: dict[int, Any] = field(default_factory=dict)  # devmap._DevBulk per ifindex
    tx: Bulk = field(default_factory=lambda: Bulk(XDP_TX_BULK_SIZE))
    cpu: dict[tuple[int, int], Bulk] = field(default_factory=dict)
    from_cpu: int = 0  # the CPU of the poll (xdp_cpumap_enqueue's ``cpu``)
    xsk: list[object] = field(default_factory=list)  # AF_XDP sockets to flush (xsk_flush)


def xdp_do_redirect(host: XskHost, dev: XskNetDevice, rq: XskRxQueue | None, prog: _Prog,
                    frames: Frames, v: _Verdicts, bq: BulkQueues) -> int:
    """``xdp_do_redirect`` for every frame of a batch (all verdicts XDP_REDIRECT);
    returns how many failed (those frames were freed)."""
    tr = host.tracer
    n = len(frames)
    dev.stats.xdp_redirect += n
    err = np.zeros(n, np.int64)
    to_ifindex = np.zeros(n, np.int64)
    # Group by target map (map_id, type): one pass per map (a poll usually has one).
    if (v.map_id == v.map_id[0]).all() and (v.map_type == v.map_type[0]).all():
        groups = [[int(v.map_id[0]), int(v.map_type[0])]]
    else:
        groups = np.unique(np.stack([v.map_id, v.map_type], axis=1), axis=0).tolist()
    for map_id, map_type in groups:
        sel = np.flatnonzero((v.map_id == map_id) & (v.map_type == map_type))
        f = frames.select(sel)
        idx = v.index[sel]
        flags = v.flags[sel]
        op = _REDIRECT_OPS.get(map_type)
        if op is None or (map_type == _UNSPEC and map_id != INT_MAX):
            # XDP_REDIRECT without a redirect helper: -EBADRQC, the frame dropped
            e, to = np.full(len(sel), -errno.EBADRQC), np.zeros(len(sel), np.int64)
            host.drop_frames(f, rq, direct=True)
        else:
            e, to = op(host, dev, rq, prog, map_id, f, idx, flags, bq)
        err[sel] = e
        to_ifindex[sel] = to
    ok = err == 0
    map_id_col = np.where(v.map_type == _UNSPEC, np.where(v.map_id == INT_MAX, INT_MAX, 0),
                          v.map_id)
    index_col = np.where((v.map_type == _UNSPEC) & (v.map_id == INT_MAX), 0, v.index)
    to_col = np.where((v.map_type == _UNSPEC) & (v.map_id == INT_MAX), v.index, to_ifindex)
    # Key columns alike for the whole batch count as one key (fire_batch's fast path);
    # map_index stays an array: it is what makes one event per frame.
    ids_c, to_c = _same(map_id_col), _same(to_col)
    idx_c: I64 = index_col
    if ok.any():
        if ok.all():
            tr.xdp_redirect.fire_batch(prog_id=prog.id, ifindex=dev.ifindex, err=0,
                                       to_ifindex=to_c, map_id=ids_c, map_index=idx_c)
        else:
            tr.xdp_redirect.fire_batch(prog_id=prog.id, ifindex=dev.ifindex, err=0,
                                       to_ifindex=_pick(to_c, ok), map_id=_pick(ids_c, ok),
                                       map_index=idx_c[ok])
    if not ok.all():
        bad = ~ok
        tr.xdp_redirect_err.fire_batch(prog_id=prog.id, ifindex=dev.ifindex,
                                       err=_same(err[bad]), to_ifindex=_pick(to_c, bad),
                                       map_id=_pick(ids_c, bad), map_index=idx_c[bad])
    return int((~ok).sum())


def _same(col: I64) -> I64 | int:
    """``col``'s value when every element has it, else ``col``."""
    return int(col[0]) if len(col) and (col == col[0]).all() else col


def _pick(col: I64 | int, sel: npt.NDArray[np.bool_]) -> I64 | int:
    return col if isinstance(col, int) else col[sel]


def buffs_to_frames(host: XskHost, frames: Frames, pos: npt.NDArray[np.intp],
                    mem_kind: str) -> npt.NDArray[np.int32]:
    """``xdp_convert_buff_to_frame`` (``xdp_update_frame_from_buff``) of frames ``pos``,
    all of one memory of kind ``mem_kind``: each one's status. A multi-buffer frame's
    length is its linear part (``data_end - data``; its frags stay in its
    ``skb_shared_info``) and its flags have ``XDP_FLAGS_HAS_FRAGS``."""
    from pyxdp.net.xdp_mem import (
        MEM_TYPE_PAGE_ORDER0,
        MEM_TYPE_PAGE_POOL,
        xdp_convert_buff_to_frame,
        xdp_frags_head_len,
    )
    ln = frames.length[pos]
    flags: I64 | int = 0
    multi = frames.has_frags[pos]
    if multi.any():
        flags = multi.astype(np.int64) * XDP_FLAGS_HAS_FRAGS
        ln = ln.copy()
        ln[multi] = xdp_frags_head_len(frames.pfn[pos][multi], ln[multi],
                                       (frames.kind[pos][multi] & KIND_FRAME) != 0,
                                       memmap=host.memmap)
    mtype = MEM_TYPE_PAGE_POOL if mem_kind == "page_pool" else MEM_TYPE_PAGE_ORDER0
    status: npt.NDArray[np.int32] = xdp_convert_buff_to_frame(
        frames.pfn[pos], frames.data[pos], ln, frames.meta[pos], mem_type=mtype,
        flags=flags, memmap=host.memmap)
    return status


def _to_frames(host: XskHost, dev: XskNetDevice, rq: XskRxQueue | None, prog: _Prog | None,
               frames: Frames) -> tuple[Frames, int]:
    """``xdp_convert_buff_to_frame`` for a batch: the converted frames, and how many
    could not be (they were dropped; with ``prog``, after an ``xdp_exception``).
    Frames that already are xdp_frames get their header rewritten from the edges
    the program left (``xdp_update_frame_from_buff``)."""
    if not len(frames):
        return frames, 0
    # xdp_frame memory: loaded with the first conversion (test_run never makes one)
    from pyxdp.net.xdp_mem import xdp_frames_set_dev_rx

    status = np.zeros(len(frames), np.int32)
    for mem, pos, _rows in host.memmap.split(frames.pfn):
        if mem.kind == "xsk_umem":  # zero-copy AF_XDP buffers: copied to order-0 pages
            # AF_XDP's buffer pool loads with the first socket's buffers, not the backend
            from pyxdp.net.xsk_buff_pool import xsk_zc_to_frames
            status[pos] = xsk_zc_to_frames(host, rq, mem, frames, pos)
            continue
        status[pos] = buffs_to_frames(host, frames, pos, mem.kind)
    bad = status != 0
    if bad.any():
        if prog is not None:
            host.tracer.xdp_exception.fire(prog.id, int(XdpAction.XDP_TX), dev.ifindex,
                                           int(bad.sum()))
        host.drop_frames(frames.select(bad), rq, direct=rq is not None)
        frames = frames.select(~bad)
    out = Frames(frames.pfn, frames.data, frames.length, frames.meta,
                 KIND_FRAME | (frames.kind & KIND_FRAGS))
    if len(out):
        xdp_frames_set_dev_rx(out.pfn, dev.ifindex, memmap=host.memmap)
    return out, int(bad.sum())


def _conversion_status(host: XskHost, before: Frames, after: Frames) -> I64:
    st = np.full(len(before), -1, np.int64)
    st[np.isin(before.pfn, after.pfn)] = 0
    return st


def xdp_do_flush(host: Any, bq: BulkQueues) -> None:
    """``xdp_do_flush``: devmap bulks, then cpumap bulks, then AF_XDP sockets - each
    flush list in the kernel's order, last queued first (``bq_enqueue`` does
    ``list_add``)."""
    for _order, op in _FLUSH_OPS:
        op(host, bq)
