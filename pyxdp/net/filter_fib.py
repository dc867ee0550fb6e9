"""The routing helpers XDP gets from ``net/core/filter.c``: ``bpf_xdp_fib_lookup`` (#69)
and ``bpf_xdp_check_mtu`` (#163), over the run's network namespace
(:class:`pyxdp.net.fib.Fib`, ``RunContext.fib``).

They load with the first program calling one (:data:`pyxdp.net.filter.XDP_HELPERS`
lists their ids lazily): a program that routes nothing does not load the routing
model. Each has a native twin over the same rows (the namespace's
:meth:`~pyxdp.net.fib.Fib.rows` and :class:`~pyxdp.net.fib.DevTable`).
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from pyxdp.errors import HelperFault
from pyxdp.net import fib as _fib
from pyxdp.net.filter import M32, M64, s32, xdp_helper, xdp_of
from pyxdp.vm.helpers import RunContext, neg
from pyxdp.vm.jit.abi import SLOW, Natives
from pyxdp.vm.jit.ir import TBAA_CTX_VALUES, TBAA_MEM, Text, c64, ret_if
from pyxdp.vm.jit.natives import HelperNative, host_or_slow, xdp_guard

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Helper, Interpreter

__all__ = ["FIB_HELPERS", "check_mtu_fn", "fib_lookup_fn"]

FIB_HELPERS: dict[int, Helper] = {}


def _net(vm: Interpreter) -> _fib.Fib:
    """The run's network namespace (:func:`pyxdp.net.fib.run_net`)."""
    ctx = vm.context
    assert isinstance(ctx, RunContext)  # xdp_of() has checked it
    return _fib.run_net(ctx)


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


@xdp_helper(69, "fib_lookup", HelperNative("fib_lookup", 4, fib_lookup_fn, ("translate",)),
            FIB_HELPERS)
def _fib_lookup(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_xdp_fib_lookup``: the MTU is always checked (``tot_len`` against the route's)."""
    xdp_of(vm, r1)
    # "plen < sizeof(*params)" compares an int with a size_t: a negative
    # plen is huge there (the verifier never lets one through anyway).
    plen = s32(r3) & M64
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


@xdp_helper(163, "check_mtu", HelperNative("check_mtu", 5, check_mtu_fn, ("translate",)),
            FIB_HELPERS)
def _check_mtu(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_xdp_check_mtu``: ifindex 0 is the ingress device; ``*mtu_len`` gets its MTU."""
    xdp = xdp_of(vm, r1)
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
