"""A received packet's input route: the FIB step of ``ip_route_input_slow``
(``net/ipv4/route.c``) and ``ip6_route_input`` (``net/ipv6/route.c``).

What ``ip_rcv_finish``/``ip6_rcv_finish`` ask the namespace's FIB for each
unicast destination is the type of its route: ``local`` (or an IPv6 anycast
address: delivered), ``broadcast`` (a subnet's broadcast address: delivered as
a broadcast), anything else - a route that forwards, a reject route, none -
is the forwarding path, an error while forwarding is off (``ip_error``,
``ip6_forward``, ``ip6_pkt_drop``: the stack counts it).

The lookup exists once in machine code: :func:`input_route_address` is a
compiled function over the table scans ``bpf_fib_lookup``'s twin calls too
(:func:`pyxdp.net.fib.rows_ir`, over the rows of :meth:`Fib.rows
<pyxdp.net.fib.Fib.rows>`), which the stack's native code calls through its
address. :func:`input_route` is its Python reference, over
:meth:`~pyxdp.net.fib.Fib.lookup4` and :meth:`~pyxdp.net.fib.Fib.lookup6`.

Simplified: the tables are those the default rules consult (local, main and
default; IPv6 local and main) even after rules were added, where Linux walks
the rules (a rule without ``fwmark`` matches every received packet).
"""

from __future__ import annotations

import functools
import ipaddress

from pyxdp.net.fib import (
    AF_INET,
    BR_CUSTOM4,
    BW,
    FD,
    ROUTE_ROW,
    RT_TABLE_DEFAULT,
    RT_TABLE_LOCAL,
    RT_TABLE_MAIN,
    Fib,
    RouteType,
    field_offsets,
    rows_ir,
)

__all__ = ["INPUT_ROUTE", "input_route", "input_route_address", "input_route_ir"]

INPUT_ROUTE = "pyxdp_fib_input_route"


def input_route(fib: Fib, dst: ipaddress.IPv4Address | ipaddress.IPv6Address) -> int:
    """The type (:class:`~pyxdp.net.fib.RouteType`) of ``dst``'s input route; 0: none."""
    if isinstance(dst, ipaddress.IPv4Address):
        if fib.custom_rules4:  # fib_unmerge: local, then main, then default
            for table in (RT_TABLE_LOCAL, RT_TABLE_MAIN, RT_TABLE_DEFAULT):
                _, r = fib.lookup4(dst, table=table)
                if r is not None:
                    break
        else:
            _, r = fib.lookup4(dst)
        # A throw route answers "no match here" (fib_table_lookup's -EAGAIN).
        return 0 if r is None or r.type == RouteType.THROW else int(r.type)
    for table in (RT_TABLE_LOCAL, RT_TABLE_MAIN):
        r6 = fib.lookup6(dst, table=table)
        if r6 is not None:
            return int(r6.type)
    return 0


def input_route_ir() -> str:
    """LLVM IR of ``i64 INPUT_ROUTE(ptr fib_desc, ptr key, i64 family)``: the route type
    of the 16 key bytes (the address, zero-padded) in the build ``fib_desc``'s words
    name (:data:`pyxdp.net.fib.FIB_DESC`), 0 when there is none (or no build yet)."""
    bw = {k: 8 * v for k, v in BW.items()}
    rs, ty = ROUTE_ROW.itemsize, field_offsets(ROUTE_ROW)["type"]
    main, local, dflt = RT_TABLE_MAIN, RT_TABLE_LOCAL, RT_TABLE_DEFAULT

    def row_type(tag: str, rows: str, r: str) -> str:
        return (f"  %{tag}rp = getelementptr i8, ptr %w, i64 {bw[rows]}\n"
                f"  %{tag}rows = load ptr, ptr %{tag}rp, align 8\n"
                f"  %{tag}off = mul i64 {r}, {rs}\n"
                f"  %{tag}o = add i64 %{tag}off, {ty}\n"
                f"  %{tag}tp = getelementptr i8, ptr %{tag}rows, i64 %{tag}o\n"
                f"  %{tag}t8 = load i8, ptr %{tag}tp, align 1\n"
                f"  %{tag}t = zext i8 %{tag}t8 to i64\n"
                f"  ret i64 %{tag}t\n")

    return rows_ir() + f"""
define i64 @{INPUT_ROUTE}(ptr %fd, ptr %key, i64 %fam) nounwind {{
entry:
  %wp = getelementptr i8, ptr %fd, i64 {8 * FD['build']}
  %w = load ptr, ptr %wp, align 8
  %nob = icmp eq ptr %w, null
  br i1 %nob, label %none, label %built
built:
  %is4 = icmp eq i64 %fam, {AF_INET}
  br i1 %is4, label %v4, label %v6
v4:
  %rulp = getelementptr i8, ptr %w, i64 {bw['rules']}
  %rules = load i64, ptr %rulp, align 8
  %c4 = and i64 %rules, {BR_CUSTOM4}
  %split = icmp ne i64 %c4, 0
  br i1 %split, label %v4l, label %v4m
v4m:
  ; tables local and main are one trie until a rule is added
  %rm = call i64 @fib_scan4(ptr %w, ptr %key, i32 {main}, i32 {local}, i32 0)
  br label %v4r1
v4l:
  %rl = call i64 @fib_scan4(ptr %w, ptr %key, i32 {local}, i32 {local}, i32 0)
  %lmiss = icmp eq i64 %rl, -4
  br i1 %lmiss, label %v4lm, label %v4r1
v4lm:
  %rlm = call i64 @fib_scan4(ptr %w, ptr %key, i32 {main}, i32 {main}, i32 0)
  br label %v4r1
v4r1:
  %r1 = phi i64 [ %rm, %v4m ], [ %rl, %v4l ], [ %rlm, %v4lm ]
  ; fib_lookup tries table default after any error of main; the rules' walk
  ; only after no match
  %neg1 = icmp slt i64 %r1, 0
  %miss1 = icmp eq i64 %r1, -4
  %trydef = select i1 %split, i1 %miss1, i1 %neg1
  br i1 %trydef, label %v4d, label %v4res
v4d:
  %hasd = call i1 @fib_has_table(ptr %w, i64 {bw['tables4']}, i32 {dflt})
  br i1 %hasd, label %v4dl, label %v4res
v4dl:
  %rd = call i64 @fib_scan4(ptr %w, ptr %key, i32 {dflt}, i32 {dflt}, i32 0)
  br label %v4res
v4res:
  %r4 = phi i64 [ %r1, %v4r1 ], [ %r1, %v4d ], [ %rd, %v4dl ]
  %rej = icmp slt i64 %r4, 0
  br i1 %rej, label %v4rej, label %v4row
v4rej:
  ; -1..-3: a blackhole, unreachable or prohibit route answered; -4: no match
  %none4 = icmp eq i64 %r4, -4
  %rt = sub i64 {int(RouteType.BLACKHOLE) - 1}, %r4
  %rt4 = select i1 %none4, i64 0, i64 %rt
  ret i64 %rt4
v4row:
{row_type("a", "routes4", "%r4")}v6:
  %r6l = call i64 @fib_scan6(ptr %w, ptr %key, i32 {local}, i32 0)
  %l6miss = icmp slt i64 %r6l, 0
  br i1 %l6miss, label %v6m, label %v6res
v6m:
  %r6m = call i64 @fib_scan6(ptr %w, ptr %key, i32 {main}, i32 0)
  br label %v6res
v6res:
  %r6 = phi i64 [ %r6l, %v6 ], [ %r6m, %v6m ]
  %miss6 = icmp slt i64 %r6, 0
  br i1 %miss6, label %none, label %v6row
v6row:
{row_type("b", "routes6", "%r6")}none:
  ret i64 0
}}
"""


@functools.cache
def input_route_address() -> int:
    """Where :func:`input_route_ir`'s function is in machine code (compiled on first use)."""
    from pyxdp.vm.jit.engine import native_function
    return native_function(input_route_ir(), INPUT_ROUTE)

