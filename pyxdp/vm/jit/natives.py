"""Native twins of helpers: IR functions that do a helper's common case in machine code.

Each returns the helper's r0, or ``SLOW`` when the Python helper must decide
(it then gives the reference answer, before the native path changed anything).

Map helpers are specialised per map type by lowerings the maps' own modules
register here (:func:`register_map`): ``pyxdp.maps.hashtab`` (the hash probe),
``pyxdp.maps.arraymap`` (array lookup and update) and the redirect maps
(devmap, cpumap, xskmap: :func:`redirect_map_fn` over their entries table).
The vm layer imports neither maps nor net; it looks the lowerings up by map type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyxdp.vm.jit.abi import MAPDESC, MAPDESC_FIELDS, NF_RUNCTX, NF_XDP, SLOW, MapInfo
from pyxdp.vm.jit.ir import LIKELY, TBAA_CTX_VALUES, TBAA_MEM, Text, c64, ret_if, s32

# XDP constants of net/core/filter.c (kept here so the vm layer does not import net).
_XDP_FRAME_SIZE = 40
_ETH_HLEN = 14
_SKB_SHARED_INFO = 320
_EINVAL, _EFAULT, _EACCES, _E2BIG, _ENOENT, _EEXIST, _ENOTSUPP = 22, 14, 13, 7, 2, 17, 524
_INT_MAX = 0x7FFF_FFFF
_BPF_F_BROADCAST = 1 << 3
_XSKMAP = 17  # BPF_MAP_TYPE_XSKMAP: bpf_redirect_xsk's redirect state


def _xdp_guard(f: Text, ctx_base: int, frags_slow: bool) -> None:
    """Continue only for the run's own xdp_md (``_xdp`` of pyxdp.net.filter); else SLOW."""
    ok = f.flag(NF_XDP)
    ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp eq i64 %r1, {c64(ctx_base)}')}")
    if frags_slow:
        frags = f.cget("%ctx", "x_frags")
        ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp eq i64 {frags}, 0')}")
    f.cbr(ok, "go", "slow", LIKELY)
    f.at("slow")
    f.do(f"ret i64 {c64(SLOW)}")
    f.at("go")


def adjust_head_fn(ctx_base: int) -> str:
    """``bpf_xdp_adjust_head`` (XdpBuff.adjust_head), SLOW outside a native XDP run."""
    f = Text()
    f.at("entry")
    _xdp_guard(f, ctx_base, False)
    off = s32(f, "%r2")
    data, end, meta = (f.cget("%ctx", n) for n in ("x_data", "x_data_end", "x_data_meta"))
    sup = f.ins(f"icmp ule i64 {meta}, {data}")
    metalen = f.ins(f"select i1 {sup}, i64 {f.ins(f'sub i64 {data}, {meta}')}, i64 0")
    new = f.ins(f"add i64 {data}, {off}")
    low = f.ins(f"icmp slt i64 {new}, {f.ins(f'add i64 {metalen}, {_XDP_FRAME_SIZE}')}")
    high = f.ins(f"icmp sgt i64 {new}, {f.ins(f'sub i64 {end}, {_ETH_HLEN}')}")
    ret_if(f, f.ins(f"or i1 {low}, {high}"), -_EINVAL)
    frame = f.cget("%ctx", "x_frame", "ptr")
    newmeta = f.ins(f"add i64 {meta}, {off}")
    f.memmove(f.gep(frame, newmeta), f.gep(frame, meta), metalen)
    f.cset("%ctx", "x_data_meta", newmeta)
    f.cset("%ctx", "x_data", new)
    f.do("call void @pkt(ptr %ctx)")
    f.do("ret i64 0")
    return f.text("define internal i64 @adjust_head(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def adjust_meta_fn(ctx_base: int) -> str:
    """``bpf_xdp_adjust_meta`` (XdpBuff.adjust_meta)."""
    f = Text()
    f.at("entry")
    _xdp_guard(f, ctx_base, False)
    data, meta = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_meta")
    ret_if(f, f.ins(f"icmp ugt i64 {meta}, {data}"), -_ENOTSUPP)
    m = f.ins(f"add i64 {meta}, {s32(f, '%r2')}")
    low = f.ins(f"icmp slt i64 {m}, {_XDP_FRAME_SIZE}")
    ret_if(f, f.ins(f"or i1 {low}, {f.ins(f'icmp sgt i64 {m}, {data}')}"), -_EINVAL)
    mlen = f.ins(f"sub i64 {data}, {m}")
    odd = f.ins(f"icmp ne i64 {f.ins(f'and i64 {mlen}, 3')}, 0")
    ret_if(f, f.ins(f"or i1 {odd}, {f.ins(f'icmp sgt i64 {mlen}, 255')}"), -_EACCES)
    f.cset("%ctx", "x_data_meta", m)
    f.do("call void @pkt(ptr %ctx)")
    f.do("ret i64 0")
    return f.text("define internal i64 @adjust_meta(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def adjust_tail_fn(ctx_base: int) -> str:
    """``bpf_xdp_adjust_tail`` without frags (XdpBuff.adjust_tail)."""
    f = Text()
    f.at("entry")
    _xdp_guard(f, ctx_base, True)
    off = s32(f, "%r2")
    data, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
    new = f.ins(f"add i64 {end}, {off}")
    hard = f.ins(f"sub i64 {f.cget('%ctx', 'x_frame_sz')}, {_SKB_SHARED_INFO}")
    high = f.ins(f"icmp sgt i64 {new}, {hard}")
    low = f.ins(f"icmp slt i64 {new}, {f.ins(f'add i64 {data}, {_ETH_HLEN}')}")
    ret_if(f, f.ins(f"or i1 {high}, {low}"), -_EINVAL)
    grow, done = f.label("grow"), f.label("done")
    f.cbr(f.ins(f"icmp sgt i64 {off}, 0"), grow, done)
    f.at(grow)
    f.memset(f.gep(f.cget("%ctx", "x_frame", "ptr"), end), off)
    f.br(done)
    f.at(done)
    f.cset("%ctx", "x_data_end", new)
    f.do("call void @pkt(ptr %ctx)")
    f.do("ret i64 0")
    return f.text("define internal i64 @adjust_tail(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def buff_len_fn(ctx_base: int) -> str:
    f = Text()
    f.at("entry")
    _xdp_guard(f, ctx_base, True)
    end, data = f.cget("%ctx", "x_data_end"), f.cget("%ctx", "x_data")
    f.do(f"ret i64 {f.ins(f'sub i64 {end}, {data}')}")
    return f.text("define internal i64 @buff_len(ptr %ctx, i64 %r1) nounwind")


def load_bytes_fn(ctx_base: int) -> str:
    """``bpf_xdp_load_bytes`` from the linear part (XdpBuff.load_bytes + vm.mem.write)."""
    f = Text()
    f.at("entry")
    _xdp_guard(f, ctx_base, True)
    off = f.ins("and i64 %r2, 4294967295")
    n = f.ins("and i64 %r4, 4294967295")
    big = f.ins(f"or i1 {f.ins(f'icmp ugt i64 {off}, 65535')}, {f.ins(f'icmp ugt i64 {n}, 65535')}")
    ret_if(f, big, -_EFAULT)
    data, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
    over = f.ins(f"icmp ugt i64 {f.ins(f'add i64 {off}, {n}')}, {f.ins(f'sub i64 {end}, {data}')}")
    ret_if(f, over, -_EINVAL)
    ret_if(f, f.ins(f"icmp eq i64 {n}, 0"), 0)
    dst = f.ins(f"call ptr @translate(ptr %ctx, i64 %r3, i64 {n}, i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {dst}, null"), SLOW)
    f.cset("%ctx", "stack_dirty", "-1")  # the bytes may land in a stack frame
    src = f.gep(f.cget("%ctx", "x_frame", "ptr"), f.ins(f"add i64 {data}, {off}"))
    f.memmove(dst, src, n)
    f.do("ret i64 0")
    return f.text("define internal i64 @load_bytes(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                  "i64 %r4) nounwind")


def store_bytes_fn(ctx_base: int) -> str:
    """``bpf_xdp_store_bytes`` into the linear part (vm.mem.read + XdpBuff.store_bytes)."""
    f = Text()
    f.at("entry")
    _xdp_guard(f, ctx_base, True)
    off = f.ins("and i64 %r2, 4294967295")
    n = f.ins("and i64 %r4, 4294967295")
    big = f.ins(f"or i1 {f.ins(f'icmp ugt i64 {n}, 65535')}, {f.ins(f'icmp ugt i64 {off}, 65535')}")
    ret_if(f, big, -_EFAULT)
    read, have = f.label("read"), f.label("have")
    nz = f.ins(f"icmp ne i64 {n}, 0")
    before = f.cur
    f.cbr(nz, read, have)
    f.at(read)
    src0 = f.ins(f"call ptr @translate(ptr %ctx, i64 %r3, i64 {n}, i1 false)")
    ret_if(f, f.ins(f"icmp eq ptr {src0}, null"), SLOW)
    last = f.cur
    f.br(have)
    f.at(have)
    src = f.ins(f"phi ptr [ null, %{before} ], [ {src0}, %{last} ]")
    data, end = f.cget("%ctx", "x_data"), f.cget("%ctx", "x_data_end")
    over = f.ins(f"icmp ugt i64 {f.ins(f'add i64 {off}, {n}')}, {f.ins(f'sub i64 {end}, {data}')}")
    ret_if(f, over, -_EINVAL)
    dst = f.gep(f.cget("%ctx", "x_frame", "ptr"), f.ins(f"add i64 {data}, {off}"))
    f.memmove(dst, src, n)
    f.do("ret i64 0")
    return f.text("define internal i64 @store_bytes(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                  "i64 %r4) nounwind")


def _adc(f: Text, res: str, p: str, nwords: int) -> str:
    """``addq w0; adcq w1; ...; adcq $0`` over ``nwords`` little-endian words at ``p``: the
    sum with carries, the last carry-out dropped (filter._adc_chain)."""
    carry = "0"
    for k in range(nwords):
        w = f.ins(f"load i64, ptr {f.gep(p, 8 * k)}, align 1{TBAA_MEM}")
        res, carry = _adc_step(f, res, w, carry)
    return f.ins(f"add i64 {res}, {carry}")


def _adc_step(f: Text, res: str, w: str, carry: str) -> tuple[str, str]:
    wide = f.ins(f"add i128 {f.ins(f'zext i64 {res} to i128')}, {f.ins(f'zext i64 {w} to i128')}")
    wide = f.ins(f"add i128 {wide}, {f.ins(f'zext i64 {carry} to i128')}")
    return (f.ins(f"trunc i128 {wide} to i64"),
            f.ins(f"trunc i128 {f.ins(f'lshr i128 {wide}, 64')} to i64"))


def _csum_partial_fn() -> str:
    """x86-64 ``csum_partial`` exactly as filter._csum_partial models it: add-with-carry
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
    f.do(f"%tmpn = add i64 {_adc(f, '%tmp', at, 5)}, 0")
    f.do(f"%tmp2n = add i64 {_adc(f, '%tmp2', f.gep(at, 40), 5)}, 0")
    f.do("%offn = add i64 %off, 80")
    f.do("%leftn = sub i64 %left, 80")
    f.cbr(f.ins("icmp uge i64 %leftn, 80"), "l80", "f80")
    f.at("f80")
    r, c = _adc_step(f, "%tmpn", "%tmp2n", "0")
    f.do(f"%tmpf = add i64 {r}, {c}")
    f.br("a80")
    f.at("a80")
    f.do("%ta = phi i64 [ " + t0 + ", %entry ], [ %tmpf, %f80 ]")
    f.do("%oa = phi i64 [ 0, %entry ], [ %offn, %f80 ]")
    f.do("%la = phi i64 [ %n, %entry ], [ %leftn, %f80 ]")
    f.cbr(f.ins("icmp uge i64 %la, 40"), "d40", "ch")
    f.at("d40")
    f.do(f"%tb = add i64 {_adc(f, '%ta', f.gep('%p', '%oa'), 5)}, 0")
    f.do("%ob = add i64 %oa, 40")
    f.do("%lb = sub i64 %la, 40")
    f.cbr(f.ins("icmp eq i64 %lb, 0"), "fin40", "ch")
    f.at("fin40")
    f.do(f"ret i64 {_finalize(f, '%tb')}")
    f.at("ch")
    temp = f.ins("phi i64 [ %ta, %a80 ], [ %tb, %d40 ]")
    off = f.ins("phi i64 [ %oa, %a80 ], [ %ob, %d40 ]")
    left = f.ins("phi i64 [ %la, %a80 ], [ %lb, %d40 ]")
    for chunk in (32, 16, 8):
        yes, join = f"c{chunk}", f"j{chunk}"
        before = f.cur
        f.cbr(f.ins(f"icmp ne i64 {f.ins(f'and i64 {left}, {chunk}')}, 0"), yes, join)
        f.at(yes)
        t1 = _adc(f, temp, f.gep("%p", off), chunk // 8)
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
    r, c = _adc_step(f, temp, "%acc1", "0")
    tt = f.ins(f"add i64 {r}, {c}")
    f.br("done")
    f.at("done")
    fin = f.ins(f"phi i64 [ {temp}, %{before} ], [ {tt}, %tj ]")
    f.do(f"ret i64 {_finalize(f, fin)}")
    return f.text("define internal i64 @csum_partial(ptr %p, i64 %n, i64 %seed) nounwind")


def _finalize(f: Text, t: str) -> str:
    """``csum_finalize_sum``: ``(t + ror64(t, 32)) >> 32``."""
    ror = f.ins(f"or i64 {f.ins(f'lshr i64 {t}, 32')}, {f.ins(f'shl i64 {t}, 32')}")
    return f.ins(f"lshr i64 {f.ins(f'add i64 {t}, {ror}')}, 32")


def csum_fn() -> str:
    """``bpf_csum_diff`` (pyxdp.net.filter.csum_diff): no size checks, always folded to 16
    bits; pointers the regions refuse are SLOW (the Python helper faults)."""
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


def _ri_init(f: Text) -> None:
    """``_ri()``: a fresh RedirectInfo (all zero) the first time one is needed."""
    present = f.cget("%ctx", "ri_present")
    mk, have = f.label("ri"), f.label("rihave")
    f.cbr(f.ins(f"icmp eq i64 {present}, 0"), mk, have)
    f.at(mk)
    for name in ("ri_tgt_index", "ri_map_id", "ri_map_type", "ri_flags", "ri_map", "ri_tv_set",
                 "ri_tv"):
        f.cset("%ctx", name, "0")
    f.cset("%ctx", "ri_present", "1")
    f.br(have)
    f.at(have)


def _runctx_guard(f: Text) -> None:
    ok = f.flag(NF_RUNCTX)
    f.cbr(ok, "go", "slow", LIKELY)
    f.at("slow")
    f.do(f"ret i64 {c64(SLOW)}")
    f.at("go")


def redirect_fn() -> str:
    """``bpf_redirect``: records the ifindex in the redirect state."""
    f = Text()
    f.at("entry")
    _runctx_guard(f)
    _ri_init(f)
    ret_if(f, f.ins("icmp ne i64 %r2, 0"), 0)
    f.cset("%ctx", "ri_tgt_index", f.ins("and i64 %r1, 4294967295"))
    f.cset("%ctx", "ri_map_id", str(_INT_MAX))
    f.cset("%ctx", "ri_map_type", "0")
    f.do("ret i64 4")
    return f.text("define internal i64 @redirect(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def redirect_xsk_fn(ctx_base: int) -> str:
    """``bpf_redirect_xsk`` (pyxdp extension): the queue's bit in the registration table;
    SLOW where the table does not tell (no table, ifindex past it, queue >= 64)."""
    f = Text()
    f.at("entry")
    _xdp_guard(f, ctx_base, False)
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
    _ri_init(f)
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
    f.cset("%ctx", "ri_map_type", str(_XSKMAP))
    f.cset("%ctx", "ri_map", "0")
    f.cset("%ctx", "ri_flags", "0")
    f.do("ret i64 4")
    return f.text("define internal i64 @redirect_xsk(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def map_desc(f: Text, m: MapInfo, name: str, ty: str = "ptr") -> str:
    table = f.cget("%ctx", "maps", "ptr")
    return f.word(table, m.slot * len(MAPDESC_FIELDS) + MAPDESC[name], ty, "")


def redirect_map_fn(tag: str, m: MapInfo) -> str:
    """``__bpf_xdp_redirect_map`` for a DEVMAP or CPUMAP (``entries[key][0]``, 0 = empty)."""
    f = Text()
    f.at("entry")
    _runctx_guard(f)
    _ri_init(f)
    ret_if(f, f.ins(f"icmp ne i64 {f.ins(f'and i64 %r3, {c64(~(3 | m.flag_mask))}')}, 0"), 0)
    key = f.ins("and i64 %r2, 4294967295")
    inside, join = f.label("in"), f.label("v")
    inrange = f.ins(f"icmp ult i64 {key}, {m.max_entries}")
    before = f.cur
    f.cbr(inrange, inside, join)
    f.at(inside)
    v0 = f.ins(f"zext i32 {f.at_index(map_desc(f, m, 'entries'), key, 'i32', 8)} to i64")
    last = f.cur
    f.br(join)
    f.at(join)
    value = f.ins(f"phi i64 [ 0, %{before} ], [ {v0}, %{last} ]")
    f.cset("%ctx", "ri_tv_set", "1")
    f.cset("%ctx", "ri_tv", value)
    bc = f.ins(f"icmp ne i64 {f.ins(f'and i64 %r3, {_BPF_F_BROADCAST}')}, 0")
    missing = f.ins(f"and i1 {f.ins(f'icmp eq i64 {value}, 0')}, {f.ins(f'xor i1 {bc}, true')}")
    miss, hit = f.label("miss"), f.label("hit")
    f.cbr(missing, miss, hit)
    f.at(miss)
    f.cset("%ctx", "ri_map_id", str(_INT_MAX))
    f.cset("%ctx", "ri_map_type", "0")
    f.do(f"ret i64 {f.ins('and i64 %r3, 3')}")
    f.at(hit)
    f.cset("%ctx", "ri_tgt_index", key)
    f.cset("%ctx", "ri_map_id", str(m.map_id))
    f.cset("%ctx", "ri_map_type", str(m.map_type))
    f.cset("%ctx", "ri_map", f.ins(f"select i1 {bc}, i64 {c64(m.addr)}, i64 0"))
    f.cset("%ctx", "ri_flags", f.ins(f"select i1 {bc}, i64 %r3, i64 0"))
    f.do("ret i64 4")
    text = f.text(f"define internal i64 @{tag}_redir{m.slot}(ptr %ctx, i64 %r2, i64 %r3) "
                  "nounwind")
    return text


# --- the registry: native map operations, registered by the maps' own modules ----------

MapFunction = Callable[[str, MapInfo], str]
InlineLookup = Callable[[Text, MapInfo, str], str]


@dataclass(frozen=True)
class MapNative:
    """How native code does a map type's helpers, registered by the module that holds the
    map type's Python implementation (the reference path over the same storage).

    ``kind`` is what :class:`~pyxdp.vm.jit.abi.MapInfo` says of such a map
    (``array``, ``hash``, ``entries``); ``classes`` the exact classes it covers
    (a subclass may change the semantics: it takes the Python helper);
    ``max_key`` the longest key native code handles (0: any); ``describe`` the
    map's :data:`~pyxdp.vm.jit.abi.MAPDESC_FIELDS` words (host addresses of its
    storage). ``lookup_inline`` emits ``bpf_map_lookup_elem`` at the call site
    (key pointer -> value address, 0 or SLOW); ``functions`` build per-map IR
    functions: ``lookup`` ``@<tag>_lookup<slot>(ctx, key)``, ``update``
    ``@<tag>_update<slot>(ctx, key, value, flags)``, ``redirect``
    ``@<tag>_redir<slot>(ctx, key, flags)``.
    """

    kind: str
    classes: tuple[type, ...]
    describe: Callable[[Any], dict[str, int]]
    max_key: int = 0
    lookup_inline: InlineLookup | None = None
    functions: Mapping[str, MapFunction] = field(default_factory=dict)


_MAPS: dict[int, MapNative] = {}


def register_map(map_type: int, native: MapNative) -> None:
    """Make ``map_type``'s helpers native (called when the map's module is imported)."""
    _MAPS[int(map_type)] = native


def map_native(map_type: int) -> MapNative | None:
    """The registered native operations of ``map_type`` (None: Python helpers only)."""
    return _MAPS.get(int(map_type))
