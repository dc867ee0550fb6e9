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
(:func:`pyxdp.net.xdp_metadata.bind_kfuncs`); on the JIT both are native twins
over the same states (the table's buffer and lookup order,
:data:`~pyxdp.net.xfrm_state.XFRM_DESC`, handed to them as the run context's
``xfrm`` word), giving Python the call (before changing anything) only for a
peer namespace's states or a pointer that is not a listed state of the run's.
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable

from pyxdp.errors import HelperFault
from pyxdp.net.fib import dev_net
from pyxdp.net.xfrm_state import (
    AF_INET,
    MAX_STATES,
    XFRM_DESC,
    XFRM_LISTED,
    XFRM_SLOT,
    XFRM_STATE_LAYOUT,
    XFRM_TABLES,
    XfrmState,
    XfrmStateTable,
)
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.jit.abi import NF_XDP, SLOW, Natives
from pyxdp.vm.jit.ir import Text, c64, ret_if
from pyxdp.vm.jit.natives import HelperNative, register_kfunc
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


# -- native twins (the JIT) ---------------------------------------------------------------

_L = XFRM_STATE_LAYOUT


def _desc(f: Text) -> str:
    """The run's states (XFRM_DESC words); SLOW when the run has none."""
    d = f.cget("%ctx", "xfrm")
    ret_if(f, f.ins(f"icmp eq i64 {d}, 0"), SLOW)
    return f.ins(f"inttoptr i64 {d} to ptr")


def _word(f: Text, dp: str, name: str) -> str:
    return f.word(dp, XFRM_DESC[name], "i64", "")


def _load(f: Text, p: str, off: int, ty: str) -> str:
    v = f.ins(f"load {ty}, ptr {f.gep(p, off)}, align 1")
    return v if ty == "i64" else f.ins(f"zext {ty} {v} to i64")


def _get_fn(kind: str) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """``bpf_xdp_get_xfrm_state``: the checks in the reference's order, the first
        listed state (newest first) that ``XfrmState.matches``, a reference taken."""
        f = Text()
        f.at("entry")
        ok = f.flag(NF_XDP)
        ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp eq i64 %r1, {c64(natives.ctx_base)}')}")
        ret_if(f, f.ins(f"xor i1 {ok}, true"), SLOW)
        dp = _desc(f)
        size = f.ins("and i64 %r3, 4294967295")
        ret_if(f, f.ins(f"icmp ult i64 {size}, 4"), 0)
        full = f.ins(f"icmp eq i64 {size}, {BPF_XFRM_STATE_OPTS_SZ}")
        span = f.ins(f"select i1 {full}, i64 {BPF_XFRM_STATE_OPTS_SZ}, i64 4")
        op = f.ins(f"call ptr @translate(ptr %ctx, i64 %r2, i64 {span}, i1 true)")
        ret_if(f, f.ins(f"icmp eq ptr {op}, null"), SLOW)

        def fail(cond: str, err: int) -> None:
            yes, no = f.label("err"), f.label("ok")
            f.cbr(cond, yes, no)
            f.at(yes)
            f.do(f"store i32 {-err}, ptr {op}, align 1")
            f.do("ret i64 0")
            f.at(no)

        fail(f.ins(f"xor i1 {full}, true"), errno.EINVAL)
        netns = f.ins(f"sext i32 {f.ins(f'load i32, ptr {f.gep(op, 4)}, align 1')} to i64")
        fail(f.ins(f"icmp slt i64 {netns}, {BPF_F_CURRENT_NETNS}"), errno.EINVAL)
        ret_if(f, f.ins(f"icmp sge i64 {netns}, 0"), SLOW)  # a peer's states
        mark = _load(f, op, 8, "i32")
        da, db = _load(f, op, 12, "i64"), _load(f, op, 20, "i64")
        spi = _load(f, op, 28, "i32")  # network order on both sides
        proto = _load(f, op, 32, "i8")
        family = _load(f, op, 34, "i16")
        v4 = f.ins(f"icmp eq i64 {family}, {AF_INET}")
        # the address bytes compared: 4 for AF_INET, else 16
        mask0 = f.ins(f"select i1 {v4}, i64 4294967295, i64 -1")
        mask1 = f.ins(f"select i1 {v4}, i64 0, i64 -1")
        buf = f.ins(f"inttoptr i64 {_word(f, dp, 'buf')} to ptr")
        order = f.ins(f"inttoptr i64 {_word(f, dp, 'order')} to ptr")
        n = _word(f, dp, "n")
        before = f.cur
        loop, body, step, miss, hit = (f.label(x) for x in ("walk", "state", "next", "miss",
                                                           "hit"))
        f.br(loop)
        f.at(loop)
        i = f.tmp()
        f.lines.append(f"  {i} = phi i64 [ 0, %{before} ], [ %NEXT, %{step} ]")
        at_phi = len(f.lines) - 1
        f.cbr(f.ins(f"icmp uge i64 {i}, {n}"), miss, body)
        f.at(body)
        slot = f.ins(f"zext i32 {f.at_index(order, i, 'i32', 4)} to i64")
        xp = f.gep(buf, f.ins(f"mul i64 {slot}, {XFRM_SLOT}"))
        xspi = _load(f, xp, _L["id.spi"], "i32")
        conds = [f.ins(f"icmp ne i64 {xspi}, 0"),
                 f.ins(f"icmp eq i64 {_load(f, xp, _L['props.family'], 'i16')}, {family}"),
                 f.ins(f"icmp eq i64 {xspi}, {spi}"),
                 f.ins(f"icmp eq i64 {_load(f, xp, _L['id.proto'], 'i8')}, {proto}")]
        for off, want, m in ((0, da, mask0), (8, db, mask1)):
            diff = f.ins(f"xor i64 {_load(f, xp, _L['id.daddr'] + off, 'i64')}, {want}")
            conds.append(f.ins(f"icmp eq i64 {f.ins(f'and i64 {diff}, {m}')}, 0"))
        mm = f.ins(f"and i64 {mark}, {_load(f, xp, _L['mark.m'], 'i32')}")
        conds.append(f.ins(f"icmp eq i64 {mm}, {_load(f, xp, _L['mark.v'], 'i32')}"))
        same = conds[0]
        for cnd in conds[1:]:
            same = f.ins(f"and i1 {same}, {cnd}")
        f.cbr(same, hit, step)
        f.at(step)
        nxt = f.ins(f"add i64 {i}, 1")
        f.lines[at_phi] = f.lines[at_phi].replace("%NEXT", nxt)
        f.br(loop)
        f.at(hit)
        rp = f.gep(xp, _L["refcnt"])
        ref = f.ins(f"load i32, ptr {rp}, align 4")
        f.do(f"store i32 {f.ins(f'add i32 {ref}, 1')}, ptr {rp}, align 4")
        at = f.ins(f"mul i64 {slot}, {XFRM_SLOT}")
        base = _word(f, dp, "base")
        f.do(f"ret i64 {f.ins(f'add i64 {base}, {at}')}")
        f.at(miss)
        f.do(f"store i32 {-errno.ENOENT}, ptr {op}, align 1")
        f.do("ret i64 0")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2, i64 %r3) "
                      "nounwind")
    return define


def _release_fn(kind: str) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """``xfrm_state_put`` of a listed state of the run's table (else SLOW)."""
        f = Text()
        f.at("entry")
        dp = _desc(f)
        off = f.ins(f"sub i64 %r1, {_word(f, dp, 'base')}")
        ret_if(f, f.ins(f"icmp uge i64 {off}, {MAX_STATES * XFRM_SLOT}"), SLOW)
        ret_if(f, f.ins(f"icmp ne i64 {f.ins(f'and i64 {off}, {XFRM_SLOT - 1}')}, 0"), SLOW)
        xp = f.gep(f.ins(f"inttoptr i64 {_word(f, dp, 'buf')} to ptr"), off)
        ret_if(f, f.ins(f"icmp eq i64 {_load(f, xp, XFRM_LISTED, 'i8')}, 0"), SLOW)
        rp = f.gep(xp, _L["refcnt"])
        ref = f.ins(f"load i32, ptr {rp}, align 4")
        less = f.ins(f"select i1 {f.ins(f'icmp eq i32 {ref}, 0')}, i32 0, i32 "
                     f"{f.ins(f'sub i32 {ref}, 1')}")
        f.do(f"store i32 {less}, ptr {rp}, align 4")
        f.do("ret i64 0")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1) nounwind")
    return define


register_kfunc("bpf_xdp_get_xfrm_state", xdp_get_xfrm_state,
               HelperNative("xfrm_get", 3, _get_fn("xfrm_get"), ("translate",),
                            serial=True))
register_kfunc("bpf_xdp_xfrm_state_release", xdp_xfrm_state_release,
               HelperNative("xfrm_release", 1, _release_fn("xfrm_release"), serial=True))

# The kfuncs by name (bound as private helpers, like the conntrack kfuncs).
XFRM_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_xdp_get_xfrm_state": xdp_get_xfrm_state,
    "bpf_xdp_xfrm_state_release": xdp_xfrm_state_release,
}
