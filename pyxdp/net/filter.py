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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from pyxdp.asm.helpers_names import PYXDP_FUNC_REDIRECT_XSK
from pyxdp.errors import HelperFault
from pyxdp.maps.perf_event_array import BPF_F_CTXLEN_MASK, BPF_F_INDEX_MASK
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
from pyxdp.vm.interpreter import Helper, HelperFn
from pyxdp.vm.jit.abi import NF_RUNCTX, SLOW, Natives
from pyxdp.vm.jit.ir import LIKELY, TBAA_CTX_VALUES, TBAA_MEM, Text, c64, ret_if
from pyxdp.vm.jit.natives import (
    INT_MAX,
    HelperNative,
    host_or_slow,
    register_helper,
    ri_init,
    runctx_guard,
    xdp_guard,
)

if TYPE_CHECKING:
    from pyxdp.net.xsk_buff_pool import XskHost, XskNetDevice, XskRxQueue
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["BPF_FUNC_REDIRECT_XSK", "FILTER_KFUNCS", "XDP_HELPERS", "RedirectInfo", "csum_diff",
           "csum_diff_fn", "redirect_fn", "redirect_xsk_fn"]

M64 = 0xFFFF_FFFF_FFFF_FFFF
M32 = 0xFFFF_FFFF
BPF_F_BROADCAST = int(RedirectFlag.BPF_F_BROADCAST)
BPF_F_EXCLUDE_INGRESS = int(RedirectFlag.BPF_F_EXCLUDE_INGRESS)
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


def _xh(helper_id: int, name: str,
        native: HelperNative | None = None) -> Callable[[HelperFn], HelperFn]:
    """An XDP helper, and with ``native`` its twin for the JIT (under the same id)."""
    if native is not None:
        register_helper(helper_id, native)
    return helper(helper_id, name, XDP_HELPERS)


@_xh(44, "xdp_adjust_head", HelperNative("adjust_head", 2, adjust_head_fn, ("pkt",)))
def _adjust_head(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = _xdp(vm, r1)
    ret = xdp.adjust_head(_s32(r2))
    _after_change(vm, xdp)
    return ret & M64


@_xh(54, "xdp_adjust_meta", HelperNative("adjust_meta", 2, adjust_meta_fn, ("pkt",)))
def _adjust_meta(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = _xdp(vm, r1)
    ret = xdp.adjust_meta(_s32(r2))
    _after_change(vm, xdp)
    return ret & M64


@_xh(65, "xdp_adjust_tail", HelperNative("adjust_tail", 2, adjust_tail_fn, ("pkt",)))
def _adjust_tail(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = _xdp(vm, r1)
    ret = xdp.adjust_tail(_s32(r2))
    _after_change(vm, xdp)
    return ret & M64


@_xh(188, "xdp_get_buff_len", HelperNative("buff_len", 1, buff_len_fn))
def _get_buff_len(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _xdp(vm, r1).buff_len()


@_xh(189, "xdp_load_bytes",
     HelperNative("load_bytes", 4, load_bytes_fn, ("translate", "xdp_copy")))
def _load_bytes(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = _xdp(vm, r1)
    got = xdp.load_bytes(r2 & M32, r4 & M32)
    if isinstance(got, int):
        return got & M64
    vm.mem.write(r3, got)
    return 0


@_xh(190, "xdp_store_bytes",
     HelperNative("store_bytes", 4, store_bytes_fn, ("translate", "xdp_copy")))
def _store_bytes(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    xdp = _xdp(vm, r1)
    length = r4 & M32
    if length > 0xFFFF or (r2 & M32) > 0xFFFF:
        return neg(errno.EFAULT)
    return xdp.store_bytes(r2 & M32, vm.mem.read(r3, length)) & M64


def _pull_data(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_xdp_pull_data(xdp_md, len)`` (a kfunc): frags it shrinks or drops are
    mapped afresh if a later slice points into them."""
    xdp = _xdp(vm, r1)
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
from pyxdp.net.filter_sk import SK_HELPERS  # noqa: E402  (socket lookups, syncookies)

XDP_HELPERS.update(SK_HELPERS)


def _net(vm: Interpreter) -> _fib.Fib:
    """The run's network namespace; a fresh one (loopback only) when none was given."""
    ctx = vm.context
    assert isinstance(ctx, RunContext)  # _xdp() has checked it
    if ctx.fib is None:
        ctx.fib = _fib.Fib()
    net: _fib.Fib = ctx.fib
    return net


def fib_lookup_fn(natives: Natives) -> str:
    """``bpf_xdp_fib_lookup``'s twin (reference: :func:`_fib_lookup` over
    :meth:`~pyxdp.net.fib.Fib.bpf_fib_lookup`): the same lookup over the same rows
    (the namespace's :meth:`~pyxdp.net.fib.Fib.rows`, found through its DevTable's
    ``desc``) and DevTable, writing the params in place on the same paths.

    SLOW where Python decides: no namespace yet or its rows out of date (Python builds
    them), params not writable program memory, policy rules beyond the defaults
    (``ip rule``: the rule walk is Python's), and an IPv6 route that needs
    ``BPF_FIB_LOOKUP_SRC``'s source address selection (no preferred source on the
    route) or has an IPv4 gateway."""
    ro = _fib.field_offsets(_fib.ROUTE_ROW)
    no = _fib.field_offsets(_fib.NEIGH_ROW)
    bw = {k: 8 * v for k, v in _fib.BW.items()}
    rs, db = _fib.ROUTE_ROW.itemsize, _fib.DEV_ROW_BYTES
    main, local, dflt = _fib.RT_TABLE_MAIN, _fib.RT_TABLE_LOCAL, _fib.RT_TABLE_DEFAULT
    ret = _fib.FibRet
    f = Text()
    f.at("entry")
    f.do("%key = alloca [16 x i8], align 4")
    xdp_guard(f, natives.ctx_base, False)
    devs = f.cget("%ctx", "devs", "ptr")
    mm = "call void @llvm.memmove.p0.p0.i64(ptr {}, ptr {}, i64 {}, i1 false)"

    def gep(name: str, base: str, off: int | str) -> str:
        return f"  %{name} = getelementptr i8, ptr {base}, i64 {off}"

    def mtu_of(tag: str, row: str) -> list[str]:
        """%<tag>dp: the route's device row; %<tag>dmtu its MTU, %<tag>rmtu the route's,
        %<tag>lk whether it is locked."""
        return [gep(f"{tag}drp", row, ro["devrow"]),
                f"  %{tag}dr32 = load i32, ptr %{tag}drp, align 1",
                f"  %{tag}dr = zext i32 %{tag}dr32 to i64",
                f"  %{tag}doff = mul i64 %{tag}dr, {db}",
                gep(f"{tag}dp", "%devrows", f"%{tag}doff"),
                gep(f"{tag}dmp", f"%{tag}dp", _fib.DEV_MTU),
                f"  %{tag}dmtu = load i32, ptr %{tag}dmp, align 4",
                gep(f"{tag}rmp", row, ro["mtu"]),
                f"  %{tag}rmtu = load i32, ptr %{tag}rmp, align 1",
                gep(f"{tag}rfp", row, ro["flags"]),
                f"  %{tag}rfl = load i8, ptr %{tag}rfp, align 1",
                f"  %{tag}lk8 = and i8 %{tag}rfl, {_fib.RF_MTU_LOCK}",
                f"  %{tag}lk = icmp ne i8 %{tag}lk8, 0",
                f"  %{tag}nz = icmp ne i32 %{tag}rmtu, 0"]

    def frag(tag: str, mtu: str, fail: str, go: str) -> list[str]:
        return [f"  %{tag}tot16 = load i16, ptr %totp, align 1",
                f"  %{tag}tot = zext i16 %{tag}tot16 to i32",
                f"  %{tag}big = icmp ugt i32 %{tag}tot, {mtu}",
                f"  br i1 %{tag}big, label %{fail}, label %{go}",
                f"{fail}:",
                f"  %{tag}m16 = trunc i32 {mtu} to i16",
                f"  store i16 %{tag}m16, ptr %totp, align 1",
                f"  ret i64 {int(ret.FRAG_NEEDED)}"]

    def store_route(tag: str, row: str) -> list[str]:
        return [gep(f"{tag}mep", row, ro["metric"]),
                f"  %{tag}me = load i32, ptr %{tag}mep, align 1",
                f"  store i32 %{tag}me, ptr %metp, align 1",
                gep(f"{tag}dvp", row, ro["dev"]),
                f"  %{tag}dev = load i32, ptr %{tag}dvp, align 1",
                f"  store i32 %{tag}dev, ptr %ifxp, align 1"]

    lines = [
        f"  %nodevs = icmp eq ptr {devs}, null",
        "  br i1 %nodevs, label %f_slow, label %f_have",
        "f_slow:",
        f"  ret i64 {c64(SLOW)}",
        "f_have:",
        gep("fdescp", devs, 16),
        "  %fd = load ptr, ptr %fdescp, align 8",
        "  %nofd = icmp eq ptr %fd, null",
        "  br i1 %nofd, label %f_slow, label %f_fd",
        "f_fd:",
        "  %stale = load i64, ptr %fd, align 8",
        "  %isstale = icmp ne i64 %stale, 0",
        "  br i1 %isstale, label %f_slow, label %f_fresh",
        "f_fresh:",
        gep("wp", "%fd", 8 * _fib.FD["build"]),
        "  %w = load ptr, ptr %wp, align 8",
        gep("fflp", "%fd", 8 * _fib.FD["flags"]),
        "  %fdflags = load i64, ptr %fflp, align 8",
        gep("rulp", "%w", bw["rules"]),
        "  %rules = load i64, ptr %rulp, align 8",
        # "plen < sizeof(*params)" compares an int with a size_t
        "  %r3t = trunc i64 %r3 to i32",
        "  %plen = sext i32 %r3t to i64",
        f"  %short = icmp ult i64 %plen, {_fib.FIB_LOOKUP_SIZE}",
        "  br i1 %short, label %f_einval, label %f_plok",
        "f_einval:",
        f"  ret i64 {-errno.EINVAL}",
        "f_plok:",
        f"  %p = call ptr @translate(ptr %ctx, i64 %r2, i64 {_fib.FIB_LOOKUP_SIZE}, i1 true)",
        "  %pnull = icmp eq ptr %p, null",
        "  br i1 %pnull, label %f_slow, label %f_pok",
        "f_pok:",
        "  %flags = and i64 %r4, 4294967295",
        f"  %badf = and i64 %flags, {c64(~_fib._FIB_FLAGS & 0xFFFF_FFFF)}",
        "  %isbad = icmp ne i64 %badf, 0",
        "  br i1 %isbad, label %f_einval, label %f_fl",
        "f_fl:",
        "  %devrows = load ptr, ptr " + devs + ", align 8",
        "  %fam = load i8, ptr %p, align 1",
        gep("totp", "%p", 6), gep("ifxp", "%p", 8), gep("metp", "%p", 12),
        gep("srcp", "%p", 16), gep("dst", "%p", 32), gep("tbp", "%p", 48),
        gep("smacp", "%p", 52), gep("dmacp", "%p", 58),
        "  %ifx = load i32, ptr %ifxp, align 1",
    ]
    for name, bit in (("direct", _fib.BPF_FIB_LOOKUP_DIRECT), ("out", _fib.BPF_FIB_LOOKUP_OUTPUT),
                      ("skipn", _fib.BPF_FIB_LOOKUP_SKIP_NEIGH),
                      ("tbidf", _fib.BPF_FIB_LOOKUP_TBID), ("srcf", _fib.BPF_FIB_LOOKUP_SRC)):
        lines += [f"  %{name}b = and i64 %flags, {bit}", f"  %{name} = icmp ne i64 %{name}b, 0"]
    lines += [
        "  %oif = select i1 %out, i32 %ifx, i32 0",
        "  %ztb = and i1 %direct, %tbidf",  # the kernel zeroes tbid (VLAN output fields)
        "  %tbv = load i32, ptr %tbp, align 1",
        f"  %tb = select i1 %tbidf, i32 %tbv, i32 {main}",
        f"  %is4 = icmp eq i8 %fam, {_fib.AF_INET}",
        "  br i1 %is4, label %f_v4, label %f_n4",
        "f_n4:",
        f"  %is6 = icmp eq i8 %fam, {_fib.AF_INET6}",
        "  br i1 %is6, label %f_v6, label %f_afno",
        "f_afno:",
        f"  ret i64 {-errno.EAFNOSUPPORT}",
        "f_enodev:",
        f"  ret i64 {-errno.ENODEV}",
        "f_fwdoff:",
        f"  ret i64 {int(ret.FWD_DISABLED)}",
        "f_nf:",
        f"  ret i64 {int(ret.NOT_FWDED)}",
        # -- IPv4: _fib4 ----------------------------------------------------------------
        "f_v4:",
        f"  %c4 = and i64 %rules, {_fib.BR_CUSTOM4}",
        "  %hc4 = icmp ne i64 %c4, 0",
        "  br i1 %hc4, label %f_slow, label %f_v4a",
        "f_v4a:",
        "  %drow = call i64 @fib_dev(ptr " + devs + ", i32 %ifx)",
        "  %nodev = icmp slt i64 %drow, 0",
        "  br i1 %nodev, label %f_enodev, label %f_v4b",
        "f_v4b:",
        f"  %drowo = mul i64 %drow, {db}",
        gep("drp", "%devrows", "%drowo"),
        gep("dflp", "%drp", _fib.DEV_FLAGS),
        "  %dfl = load i32, ptr %dflp, align 4",
        f"  %fwd = and i32 %dfl, {_fib.DF_FORWARDING}",
        "  %nofwd = icmp eq i32 %fwd, 0",
        "  br i1 %nofwd, label %f_fwdoff, label %f_v4c",
        "f_v4c:",
        "  br i1 %direct, label %f_v4d, label %f_v4r",
        "f_v4d:",
        "  br i1 %tbidf, label %f_v4z, label %f_v4t",
        "f_v4z:",
        "  store i32 0, ptr %tbp, align 1",
        "  br label %f_v4t",
        "f_v4t:",
        f"  %has4 = call i1 @fib_has_table(ptr %w, i64 {bw['tables4']}, i32 %tb)",
        "  br i1 %has4, label %f_v4h, label %f_nf",
        "f_v4h:",  # tables main and local are one trie while there are no rules
        f"  %ism = icmp eq i32 %tb, {main}",
        f"  %isl = icmp eq i32 %tb, {local}",
        "  %ml = or i1 %ism, %isl",
        f"  %ta = select i1 %ml, i32 {main}, i32 %tb",
        f"  %tbb = select i1 %ml, i32 {local}, i32 %tb",
        "  %rd = call i64 @fib_scan4(ptr %w, ptr %dst, i32 %ta, i32 %tbb, i32 %oif)",
        "  br label %f_v4res",
        "f_v4r:",
        f"  %rr = call i64 @fib_scan4(ptr %w, ptr %dst, i32 {main}, i32 {local}, i32 %oif)",
        "  %miss = icmp slt i64 %rr, 0",
        "  br i1 %miss, label %f_v4def, label %f_v4res",
        "f_v4def:",
        f"  %hasd = call i1 @fib_has_table(ptr %w, i64 {bw['tables4']}, i32 {dflt})",
        "  br i1 %hasd, label %f_v4dl, label %f_v4res",
        "f_v4dl:",
        f"  %rdl = call i64 @fib_scan4(ptr %w, ptr %dst, i32 {dflt}, i32 {dflt}, i32 %oif)",
        "  br label %f_v4res",
        "f_v4res:",
        "  %res = phi i64 [ %rd, %f_v4h ], [ %rr, %f_v4r ], [ %rr, %f_v4def ], "
        "[ %rdl, %f_v4dl ]",
        "  %neg = icmp slt i64 %res, 0",
        "  br i1 %neg, label %f_v4err, label %f_v4ok",
        "f_v4err:",  # -1..-3: blackhole, unreachable, prohibit; else not forwarded
        "  %code = sub i64 0, %res",
        "  %isrej = icmp ult i64 %code, 4",
        f"  %rcode = select i1 %isrej, i64 %code, i64 {int(ret.NOT_FWDED)}",
        "  ret i64 %rcode",
        "f_v4ok:",
        gep("r4p", "%w", bw["routes4"]),
        "  %r4rows = load ptr, ptr %r4p, align 8",
        f"  %roff = mul i64 %res, {rs}",
        gep("row", "%r4rows", "%roff"),
        gep("typ", "%row", ro["type"]),
        "  %ty = load i8, ptr %typ, align 1",
        f"  %uni = icmp eq i8 %ty, {int(_fib.RouteType.UNICAST)}",
        "  br i1 %uni, label %f_v4u, label %f_nf",
        "f_v4u:",
        *mtu_of("a", "%row"),
        f"  %pm = and i64 %fdflags, {_fib.FD_USE_PMTU}",
        "  %pmb = icmp ne i64 %pm, 0",
        "  %either = or i1 %alk, %pmb",
        "  %use = and i1 %either, %anz",
        f"  %dsmall = icmp ult i32 %admtu, {_fib.IP_MAX_MTU}",
        f"  %dcap = select i1 %dsmall, i32 %admtu, i32 {_fib.IP_MAX_MTU}",
        "  %mtu4 = select i1 %use, i32 %armtu, i32 %dcap",
        *frag("a", "%mtu4", "f_v4frag", "f_v4w"),
        "f_v4w:",
        *store_route("a", "%row"),
        "  br i1 %srcf, label %f_v4s, label %f_v4g",
        "f_v4s:",
        gep("rsrcp", "%row", ro["src"]),
        "  %rsrc = load i32, ptr %rsrcp, align 1",
        "  store i32 %rsrc, ptr %srcp, align 1",
        "  br label %f_v4g",
        "f_v4g:",
        gep("gfp", "%row", ro["gwfam"]),
        "  %gf = load i8, ptr %gfp, align 1",
        gep("gwp", "%row", ro["gw"]),
        f"  switch i8 %gf, label %f_v4g0 [ i8 {_fib.AF_INET}, label %f_v4g4 "
        f"i8 {_fib.AF_INET6}, label %f_v4g6 ]",
        "f_v4g0:",  # the next hop is the destination
        "  %dw = load i32, ptr %dst, align 1",
        "  br label %f_v4k",
        "f_v4g4:",
        "  %gw4 = load i32, ptr %gwp, align 1",
        "  store i32 %gw4, ptr %dst, align 1",
        "  br label %f_v4k",
        "f_v4k:",
        "  %nh = phi i32 [ %dw, %f_v4g0 ], [ %gw4, %f_v4g4 ]",
        "  store i32 %nh, ptr %key, align 4",
        gep("key4", "%key", 4),
        "  call void @llvm.memset.p0.i64(ptr %key4, i8 0, i64 12, i1 false)",
        "  br label %f_fin",
        "f_v4g6:",  # "via inet6": the params turn IPv6
        f"  store i8 {_fib.AF_INET6}, ptr %p, align 1",
        "  " + mm.format("%dst", "%gwp", 16),
        "  " + mm.format("%key", "%gwp", 16),
        "  br label %f_fin",
        # -- IPv6: _fib6 ----------------------------------------------------------------
        "f_v6:",
        f"  %c6 = and i64 %rules, {_fib.BR_CUSTOM6}",
        "  %hc6 = icmp ne i64 %c6, 0",
        "  br i1 %hc6, label %f_slow, label %f_v6a",
        "f_v6a:",
    ]
    # rt6_need_strict of dst and src: multicast, link-local, loopback
    strict = []
    for tag, ptr in (("d", "%dst"), ("s", "%srcp")):
        lines += [f"  %{tag}b0 = load i8, ptr {ptr}, align 1",
                  gep(f"{tag}b1p", ptr, 1),
                  f"  %{tag}b1 = load i8, ptr %{tag}b1p, align 1",
                  f"  %{tag}mc = icmp eq i8 %{tag}b0, -1",
                  f"  %{tag}fe = icmp eq i8 %{tag}b0, -2",
                  f"  %{tag}b1m = and i8 %{tag}b1, -64",
                  f"  %{tag}b1l = icmp eq i8 %{tag}b1m, -128",
                  f"  %{tag}ll = and i1 %{tag}fe, %{tag}b1l",
                  f"  %{tag}lo = load i128, ptr {ptr}, align 1",
                  f"  %{tag}lp = icmp eq i128 %{tag}lo, {1 << 120}",
                  f"  %{tag}x1 = or i1 %{tag}mc, %{tag}ll",
                  f"  %{tag}x = or i1 %{tag}x1, %{tag}lp"]
        strict.append(f"%{tag}x")
    lines += [
        f"  %strict = or i1 {strict[0]}, {strict[1]}",
        "  br i1 %strict, label %f_nf, label %f_v6b",
        "f_v6b:",
        "  %drow6 = call i64 @fib_dev(ptr " + devs + ", i32 %ifx)",
        "  %nodev6 = icmp slt i64 %drow6, 0",
        "  br i1 %nodev6, label %f_enodev, label %f_v6c",
        "f_v6c:",
        f"  %drowo6 = mul i64 %drow6, {db}",
        gep("drp6", "%devrows", "%drowo6"),
        gep("dflp6", "%drp6", _fib.DEV_FLAGS),
        "  %dfl6 = load i32, ptr %dflp6, align 4",
        f"  %fwd6 = and i32 %dfl6, {_fib.DF_FORWARDING6}",
        "  %fwd6b = icmp ne i32 %fwd6, 0",
        gep("dmtp6", "%drp6", _fib.DEV_MTU),
        "  %dmtu6 = load i32, ptr %dmtp6, align 4",
        f"  %has6 = icmp uge i32 %dmtu6, {_fib.IPV6_MIN_MTU}",
        "  %on6 = and i1 %has6, %fwd6b",
        "  br i1 %on6, label %f_v6d0, label %f_fwdoff",
        "f_v6d0:",
        "  br i1 %direct, label %f_v6d, label %f_v6r",
        "f_v6d:",
        f"  %hast = call i1 @fib_has_table(ptr %w, i64 {bw['tables6']}, i32 %tb)",
        "  br i1 %hast, label %f_v6dl, label %f_v6miss",
        "f_v6dl:",
        "  %rd6 = call i64 @fib_scan6(ptr %w, ptr %dst, i32 %tb, i32 %oif)",
        "  br label %f_v6res",
        "f_v6r:",
        f"  %rl = call i64 @fib_scan6(ptr %w, ptr %dst, i32 {local}, i32 %oif)",
        "  %lmiss = icmp slt i64 %rl, 0",
        "  br i1 %lmiss, label %f_v6m, label %f_v6res",
        "f_v6m:",
        f"  %rm = call i64 @fib_scan6(ptr %w, ptr %dst, i32 {main}, i32 %oif)",
        "  br label %f_v6res",
        "f_v6res:",
        "  %res6 = phi i64 [ %rd6, %f_v6dl ], [ %rl, %f_v6r ], [ %rm, %f_v6m ]",
        "  %miss6 = icmp slt i64 %res6, 0",
        "  br i1 %miss6, label %f_v6miss, label %f_v6ok",
        "f_v6miss:",
        "  br i1 %ztb, label %f_v6missz, label %f_nf",
        "f_v6missz:",
        "  store i32 0, ptr %tbp, align 1",
        f"  ret i64 {int(ret.NOT_FWDED)}",
        "f_v6ok:",
        gep("r6p", "%w", bw["routes6"]),
        "  %r6rows = load ptr, ptr %r6p, align 8",
        f"  %roff6 = mul i64 %res6, {rs}",
        gep("row6", "%r6rows", "%roff6"),
        gep("typ6", "%row6", ro["type"]),
        "  %ty6 = load i8, ptr %typ6, align 1",
        f"  %uni6 = icmp eq i8 %ty6, {int(_fib.RouteType.UNICAST)}",
        gep("gfp6", "%row6", ro["gwfam"]),
        "  %gf6 = load i8, ptr %gfp6, align 1",
        gep("rfp6", "%row6", ro["flags"]),
        "  %rfl6 = load i8, ptr %rfp6, align 1",
        f"  %hsrc8 = and i8 %rfl6, {_fib.RF_SRC}",
        "  %nosrc = icmp eq i8 %hsrc8, 0",
        "  %needsel = and i1 %srcf, %nosrc",
        f"  %gwv4 = icmp eq i8 %gf6, {_fib.AF_INET}",
        "  %py = or i1 %needsel, %gwv4",
        "  %py6 = and i1 %py, %uni6",
        "  br i1 %py6, label %f_slow, label %f_v6z",  # nothing written yet
        "f_v6z:",
        "  br i1 %ztb, label %f_v6zz, label %f_v6t",
        "f_v6zz:",
        "  store i32 0, ptr %tbp, align 1",
        "  br label %f_v6t",
        "f_v6t:",
        "  br i1 %uni6, label %f_v6u, label %f_v6rej",
        "f_v6rej:",  # blackhole, unreachable, prohibit answer themselves
        f"  %rj6 = sub i8 %ty6, {int(_fib.RouteType.BLACKHOLE)}",
        "  %isr6 = icmp ult i8 %rj6, 3",
        "  %rj6z = zext i8 %rj6 to i64",
        "  %rc6a = add i64 %rj6z, 1",
        f"  %rc6 = select i1 %isr6, i64 %rc6a, i64 {int(ret.NOT_FWDED)}",
        "  ret i64 %rc6",
        "f_v6u:",
        *mtu_of("b", "%row6"),
        "  %use6 = and i1 %blk, %bnz",
        f"  %lo6 = icmp ult i32 %bdmtu, {_fib.IPV6_MIN_MTU}",
        f"  %atl = select i1 %lo6, i32 {_fib.IPV6_MIN_MTU}, i32 %bdmtu",
        f"  %hi6 = icmp ugt i32 %atl, {_fib.IP6_MAX_MTU}",
        f"  %cap6 = select i1 %hi6, i32 {_fib.IP6_MAX_MTU}, i32 %atl",
        "  %mtu6 = select i1 %use6, i32 %brmtu, i32 %cap6",
        *frag("b", "%mtu6", "f_v6frag", "f_v6w"),
        "f_v6w:",
        f"  %gw6 = icmp eq i8 %gf6, {_fib.AF_INET6}",
        "  br i1 %gw6, label %f_v6gw, label %f_v6k",
        "f_v6gw:",
        gep("gwp6", "%row6", ro["gw"]),
        "  " + mm.format("%dst", "%gwp6", 16),
        "  br label %f_v6k",
        "f_v6k:",
        "  " + mm.format("%key", "%dst", 16),
        *store_route("b", "%row6"),
        "  br i1 %srcf, label %f_v6s, label %f_fin",
        "f_v6s:",
        gep("rsrcp6", "%row6", ro["src"]),
        "  " + mm.format("%srcp", "%rsrcp6", 16),
        "  br label %f_fin",
        # -- _finish: the neighbour, bpf_fib_set_fwd_params ------------------------------
        "f_fin:",
        "  %fmtu = phi i32 [ %mtu4, %f_v4k ], [ %mtu4, %f_v4g6 ], [ %mtu6, %f_v6k ], "
        "[ %mtu6, %f_v6s ]",
        "  %fdev = phi i32 [ %adev, %f_v4k ], [ %adev, %f_v4g6 ], [ %bdev, %f_v6k ], "
        "[ %bdev, %f_v6s ]",
        "  %fdp = phi ptr [ %adp, %f_v4k ], [ %adp, %f_v4g6 ], [ %bdp, %f_v6k ], "
        "[ %bdp, %f_v6s ]",
        f"  %ffam = phi i8 [ {_fib.AF_INET}, %f_v4k ], [ {_fib.AF_INET6}, %f_v4g6 ], "
        f"[ {_fib.AF_INET6}, %f_v6k ], [ {_fib.AF_INET6}, %f_v6s ]",
        "  br i1 %skipn, label %f_done, label %f_ng",
        "f_ng:",
        gep("fdflp", "%fdp", _fib.DEV_FLAGS),
        "  %fdfl = load i32, ptr %fdflp, align 4",
        f"  %lo = and i32 %fdfl, {_fib.DF_LOOPBACK}",
        "  %islo = icmp ne i32 %lo, 0",
        f"  %k4 = icmp eq i8 %ffam, {_fib.AF_INET}",
        "  %kz = and i1 %islo, %k4",
        "  br i1 %kz, label %f_kz, label %f_nl",
        "f_kz:",  # __ipv4_neigh_lookup_noref on loopback looks up 0.0.0.0
        "  store i32 0, ptr %key, align 4",
        "  br label %f_nl",
        "f_nl:",
        "  %n = call ptr @fib_neigh(ptr %w, ptr %key, i32 %fdev, i8 %ffam)",
        "  %nn = icmp eq ptr %n, null",
        "  br i1 %nn, label %f_noneigh, label %f_nv",
        "f_nv:",
        gep("nvp", "%n", no["valid"]),
        "  %nval = load i8, ptr %nvp, align 1",
        "  %inval = icmp eq i8 %nval, 0",
        "  br i1 %inval, label %f_noneigh, label %f_nm",
        "f_noneigh:",
        f"  ret i64 {int(ret.NO_NEIGH)}",
        "f_nm:",
        gep("nmacp", "%n", no["mac"]),
        "  " + mm.format("%dmacp", "%nmacp", 6),
        gep("dmac", "%fdp", _fib.DEV_MAC),
        "  " + mm.format("%smacp", "%dmac", 6),
        "  br label %f_done",
        "f_done:",
        "  store i32 0, ptr %tbp, align 1",
        "  %mnz = icmp ne i32 %fmtu, 0",
        "  br i1 %mnz, label %f_wm, label %f_ok",
        "f_wm:",
        "  %fm16 = trunc i32 %fmtu to i16",
        "  store i16 %fm16, ptr %totp, align 1",
        "  br label %f_ok",
        "f_ok:",
        f"  ret i64 {int(ret.SUCCESS)}",
    ]
    f.lines += lines
    return _fib.rows_ir() + f.text(
        "define internal i64 @fib_lookup(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, i64 %r4) "
        "nounwind")


@_xh(69, "fib_lookup", HelperNative("fib_lookup", 4, fib_lookup_fn, ("translate",)))
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


def check_mtu_fn(natives: Natives) -> str:
    """``bpf_xdp_check_mtu``'s twin (reference: :func:`_check_mtu` over
    :meth:`~pyxdp.net.fib.Fib.check_mtu`): the device's row in the namespace's
    :class:`~pyxdp.net.fib.DevTable` (run context word ``devs``), the same 32-bit sums.
    SLOW where Python decides: no namespace yet, the ingress device not in it (a fault),
    ``mtu_len`` not writable program memory."""
    f = Text()
    f.at("entry")
    xdp_guard(f, natives.ctx_base, False)
    desc = f.cget("%ctx", "devs", "ptr")
    ret_if(f, f.ins(f"icmp eq ptr {desc}, null"), SLOW)
    rows = f.word(desc, 0, "ptr", "")
    n = f.word(desc, 1, "i64", "")
    ifx = f.ins("and i64 %r2, 4294967295")
    ingress = f.word(f.cget("%ctx", "ctx_values", "ptr"), 3, "i64", TBAA_CTX_VALUES)
    zero = f.ins(f"icmp eq i64 {ifx}, 0")
    want = f.ins(f"trunc i64 {f.ins(f'select i1 {zero}, i64 {ingress}, i64 {ifx}')} to i32")
    pre = f.cur
    f.br("head")
    f.at("head")
    f.do(f"%i = phi i64 [ 0, %{pre} ], [ %i1, %next ]")
    f.cbr(f.ins("icmp ult i64 %i, " + n), "body", "scanned")
    f.at("body")
    row = f.gep(rows, f.ins(f"mul i64 %i, {_fib.DEV_ROW_BYTES}"))
    f.cbr(f.ins(f"icmp eq i32 {f.ins(f'load i32, ptr {row}, align 4')}, {want}"), "found", "next")
    f.at("next")
    f.do("%i1 = add i64 %i, 1")
    f.br("head")
    f.at("scanned")  # no such device: the ingress one is a fault (Python raises it)
    ret_if(f, zero, SLOW)
    host_or_slow(f, "%r3", 4)
    ret_if(f, f.ins("icmp ne i64 %r5, 0"), -errno.EINVAL)
    f.do(f"ret i64 {c64(-errno.ENODEV)}")
    f.at("found")
    p = host_or_slow(f, "%r3", 4)
    ret_if(f, f.ins("icmp ne i64 %r5, 0"), -errno.EINVAL)
    mtu = f.ins(f"load i32, ptr {f.gep(row, _fib.DEV_MTU)}, align 4")
    hhl = f.ins(f"load i32, ptr {f.gep(row, _fib.DEV_HHL)}, align 4")
    dev_len = f.ins(f"add i32 {mtu}, {hhl}")
    mtu_len = f.ins(f"load i32, ptr {p}, align 1{TBAA_MEM}")
    end, data = f.cget("%ctx", "x_data_end"), f.cget("%ctx", "x_data")
    xdp_len = f.ins(f"trunc i64 {f.ins(f'sub i64 {end}, {data}')} to i32")
    given = f.ins(f"add i32 {mtu_len}, {hhl}")
    length = f.ins(f"select i1 {f.ins(f'icmp ne i32 {mtu_len}, 0')}, i32 {given}, i32 {xdp_len}")
    length = f.ins(f"add i32 {length}, {f.ins('trunc i64 %r4 to i32')}")
    f.do(f"store i32 {mtu}, ptr {p}, align 1{TBAA_MEM}")
    frag = f.ins(f"icmp sgt i32 {length}, {dev_len}")
    f.do(f"ret i64 {f.ins(f'zext i1 {frag} to i64')}")
    return f.text("define internal i64 @check_mtu(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                  "i64 %r4, i64 %r5) nounwind")


@_xh(163, "check_mtu", HelperNative("check_mtu", 5, check_mtu_fn, ("translate",)))
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


# The twin is the perf event array's own (pyxdp.maps.perf_event_array), on an array the
# program names.
@_xh(25, "perf_event_output", HelperNative("perf_output"))
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


def _to_frames(host: XskHost, dev: XskNetDevice, rq: XskRxQueue | None, prog: _Prog | None,
               frames: Frames) -> tuple[Frames, int]:
    """``xdp_convert_buff_to_frame`` for a batch: the converted frames, and how many
    could not be (they were dropped; with ``prog``, after an ``xdp_exception``).
    Frames that already are xdp_frames get their header rewritten from the edges
    the program left (``xdp_update_frame_from_buff``)."""
    if not len(frames):
        return frames, 0
    # xdp_frame memory: loaded with the first conversion (test_run never makes one)
    from pyxdp.net.xdp_mem import (
        MEM_TYPE_PAGE_ORDER0,
        MEM_TYPE_PAGE_POOL,
        xdp_convert_buff_to_frame,
        xdp_frags_head_len,
        xdp_frames_set_dev_rx,
    )

    status = np.zeros(len(frames), np.int32)
    for mem, pos, _rows in host.memmap.split(frames.pfn):
        if mem.kind == "xsk_umem":  # zero-copy AF_XDP buffers: copied to order-0 pages
            # AF_XDP's buffer pool loads with the first socket's buffers, not the backend
            from pyxdp.net.xsk_buff_pool import xsk_zc_to_frames
            status[pos] = xsk_zc_to_frames(host, rq, mem, frames, pos)
            continue
        mtype = MEM_TYPE_PAGE_POOL if mem.kind == "page_pool" else MEM_TYPE_PAGE_ORDER0
        ln = frames.length[pos]
        flags: I64 | int = 0
        multi = frames.has_frags[pos]
        if multi.any():  # the frame's len is the head; the frags stay in skb_shared_info
            flags = multi.astype(np.int64) * XDP_FLAGS_HAS_FRAGS
            ln = ln.copy()
            ln[multi] = xdp_frags_head_len(frames.pfn[pos][multi], ln[multi],
                                           (frames.kind[pos][multi] & KIND_FRAME) != 0,
                                           memmap=host.memmap)
        status[pos] = xdp_convert_buff_to_frame(frames.pfn[pos], frames.data[pos], ln,
                                                frames.meta[pos], mem_type=mtype,
                                                flags=flags, memmap=host.memmap)
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
