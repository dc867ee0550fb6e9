"""Native twins of helpers: IR functions that do a helper's common case in machine code.

Each returns the helper's r0, or ``SLOW`` when the Python helper must decide
(it then gives the reference answer, before the native path changed anything).
The kernel has no such pairs - its helpers are C the JIT calls - but pyxdp's
Python helpers are too slow to call per packet, so the module that holds a
helper's Python implementation (the reference path) also holds its twin and
registers it here; both work on the same memory (packet buffer, run context,
map storage).

Three registries, filled at import by the modules holding the Python implementations
(the layers above the vm, and :mod:`pyxdp.vm.bpf_iter`):

* :func:`register_map`: per map type, the map helpers' lowerings - the hash
  probe (maps' ``hashtab``), array lookup and update (``arraymap``), the
  redirect maps' entries tables (``devmap``, ``cpumap``, ``xskmap``, over
  :func:`redirect_map_fn`);
* :func:`register_helper`: per helper id, an IR function standing for the
  helper (the XDP packet helpers, ``csum_diff``, the redirects: the network
  layer's ``filter`` module registers them), or a kind the lowering
  specialises at the call site (the map helpers, the clock, the CPU id);
* :func:`register_kfunc`: per kfunc name, with the Python function the loader
  binds it to, an IR function standing for it (the numbers iterator,
  :mod:`pyxdp.vm.bpf_iter`); the runtime finds them in a program's helper
  table with :func:`kfunc_kinds`.

The vm layer imports neither maps nor net; it looks the lowerings up by map
type and by helper id. The building blocks here (:func:`xdp_guard`,
:func:`host_or_slow`, :func:`runctx_guard`, :func:`ri_init`, :func:`map_desc`) are the
run context's ABI (:mod:`pyxdp.vm.jit.abi`) that registered twins share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyxdp.uapi.bpf import BpfFuncId, RedirectFlag
from pyxdp.vm.jit.abi import (
    FRAGS_PYTHON,
    MAPDESC,
    MAPDESC_FIELDS,
    NF_RUNCTX,
    NF_XDP,
    SLOW,
    MapInfo,
    Natives,
)
from pyxdp.vm.jit.ir import LIKELY, Text, c64, ret_if

# ``ri->map_id`` of a redirect without a map (C's INT_MAX, as net/core/filter.c sets it).
INT_MAX = 0x7FFF_FFFF


def xdp_guard(f: Text, ctx_base: int, frags_slow: bool) -> None:
    """Continue only for the run's own xdp_md (the XDP helpers' check of their first
    argument); else SLOW. With ``frags_slow`` a multi-buffer packet whose frags only
    Python holds (``x_frags`` FRAGS_PYTHON: no frag table) is SLOW too."""
    ok = f.flag(NF_XDP)
    ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp eq i64 %r1, {c64(ctx_base)}')}")
    if frags_slow:
        frags = f.cget("%ctx", "x_frags")
        ok = f.ins(f"and i1 {ok}, {f.ins(f'icmp ne i64 {frags}, {FRAGS_PYTHON}')}")
    f.cbr(ok, "go", "slow", LIKELY)
    f.at("slow")
    f.do(f"ret i64 {c64(SLOW)}")
    f.at("go")


def host_or_slow(f: Text, addr: str, size: int) -> str:
    """A host pointer to ``size`` bytes at fake address ``addr`` (the shared
    ``translate``); SLOW when unmapped."""
    p = f.ins(f"call ptr @translate(ptr %ctx, i64 {addr}, i64 {size}, i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {p}, null"), SLOW)
    return p


def ri_init(f: Text) -> None:
    """A fresh ``struct bpf_redirect_info`` (all zero) the first time a run needs one,
    as the redirect helpers' Python path creates its RedirectInfo."""
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


def runctx_guard(f: Text) -> None:
    """Continue only when the run has a program run context (else SLOW: Python decides)."""
    ok = f.flag(NF_RUNCTX)
    f.cbr(ok, "go", "slow", LIKELY)
    f.at("slow")
    f.do(f"ret i64 {c64(SLOW)}")
    f.at("go")


def map_desc(f: Text, m: MapInfo, name: str, ty: str = "ptr") -> str:
    table = f.cget("%ctx", "maps", "ptr")
    return f.word(table, m.slot * len(MAPDESC_FIELDS) + MAPDESC[name], ty, "")


# Emits the redirect target's value of ``key`` (an i64 operand; 0: no entry) for a map.
RedirectValue = Callable[[Text, MapInfo, str], str]


def entries_value(f: Text, m: MapInfo, key: str) -> str:
    """A DEVMAP, CPUMAP or XSKMAP target: ``entries[key][0]`` (0 past the end or empty)."""
    inside, join = f.label("in"), f.label("v")
    inrange = f.ins(f"icmp ult i64 {key}, {m.max_entries}")
    before = f.cur
    f.cbr(inrange, inside, join)
    f.at(inside)
    v0 = f.ins(f"zext i32 {f.at_index(map_desc(f, m, 'entries'), key, 'i32', 8)} to i64")
    last = f.cur
    f.br(join)
    f.at(join)
    return f.ins(f"phi i64 [ 0, %{before} ], [ {v0}, %{last} ]")


def redirect_with(tag: str, m: MapInfo, value_of: RedirectValue) -> str:
    """``__bpf_xdp_redirect_map`` for one map whose target ``value_of`` finds (0: none),
    filling the run context's ``ri_*`` words as the Python helper fills its
    RedirectInfo; ``value_of`` may leave through block ``slow`` (SLOW: Python decides)."""
    f = Text()
    f.at("entry")
    runctx_guard(f)
    ri_init(f)
    ret_if(f, f.ins(f"icmp ne i64 {f.ins(f'and i64 %r3, {c64(~(3 | m.flag_mask))}')}, 0"), 0)
    key = f.ins("and i64 %r2, 4294967295")
    value = value_of(f, m, key)
    f.cset("%ctx", "ri_tv_set", "1")
    f.cset("%ctx", "ri_tv", value)
    bc = f.ins(f"icmp ne i64 {f.ins(f'and i64 %r3, {int(RedirectFlag.BPF_F_BROADCAST)}')}, 0")
    missing = f.ins(f"and i1 {f.ins(f'icmp eq i64 {value}, 0')}, {f.ins(f'xor i1 {bc}, true')}")
    miss, hit = f.label("miss"), f.label("hit")
    f.cbr(missing, miss, hit)
    f.at(miss)
    f.cset("%ctx", "ri_map_id", str(INT_MAX))
    f.cset("%ctx", "ri_map_type", "0")
    f.do(f"ret i64 {f.ins('and i64 %r3, 3')}")
    f.at(hit)
    f.cset("%ctx", "ri_tgt_index", key)
    f.cset("%ctx", "ri_map_id", str(m.map_id))
    f.cset("%ctx", "ri_map_type", str(m.map_type))
    f.cset("%ctx", "ri_map", f.ins(f"select i1 {bc}, i64 {c64(m.addr)}, i64 0"))
    f.cset("%ctx", "ri_flags", f.ins(f"select i1 {bc}, i64 %r3, i64 0"))
    f.do("ret i64 4")
    return f.text(f"define internal i64 @{tag}_redir{m.slot}(ptr %ctx, i64 %r2, i64 %r3) "
                  "nounwind")


def redirect_map_fn(tag: str, m: MapInfo) -> str:
    """``__bpf_xdp_redirect_map`` for a DEVMAP, CPUMAP or XSKMAP (``entries[key][0]``)."""
    return redirect_with(tag, m, entries_value)


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
    functions: ``lookup`` ``@<tag>_lookup<slot>(ctx, key)``, ``lookup_cpu``
    ``@<tag>_lookup_cpu<slot>(ctx, key, cpu)`` (a per-CPU map's value of any CPU), ``update``
    ``@<tag>_update<slot>(ctx, key, value, flags)``, ``redirect``
    ``@<tag>_redir<slot>(ctx, key, flags)``; helpers checking their own arguments take
    the call's registers, ``@<tag>_<what><slot>(ctx, r1, ..., r5)``: ``output``,
    ``reserve``, ``query`` (a ring buffer's), ``perf_output`` (a perf event array's);
    ``commit`` ``@<tag>_commit<slot>(ctx, sample, discard)`` takes a ring buffer sample.
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


# --- the registry: native helpers, registered by the modules holding their Python ------


@dataclass(frozen=True)
class HelperNative:
    """A helper's native twin, registered under its helper id by the module that holds
    the helper's Python implementation (the reference path, over the same memory).

    ``kind`` names it (what :attr:`~pyxdp.vm.jit.abi.Natives.helpers` lists). With
    ``define`` the call becomes ``call i64 @<kind>(ptr %ctx, i64 %r1, ..., i64 %r<nargs>)``
    and ``define(natives)`` gives the IR defining ``@<kind>`` (and any internal
    function only it calls), emitted once per module; ``needs`` names the shared
    functions it calls (``pkt``: recompute the packet region, ``translate``: a
    fake address to a host pointer, or one :func:`register_shared` added);
    ``scratch`` is the bytes of run context scratch memory it keeps state in.
    Without ``define`` the lowering specialises
    the call itself: ``map_lookup``, ``map_lookup_percpu``, ``map_update``, ``map_delete``,
    ``map_push``, ``map_pop``, ``map_peek``, ``redirect_map``, ``ringbuf_output``,
    ``ringbuf_reserve``, ``ringbuf_submit``, ``ringbuf_discard``, ``ringbuf_query`` and
    ``perf_output`` through the map registry (:func:`map_native`), ``ktime`` and
    ``smp_id`` inline.
    """

    kind: str
    nargs: int = 0
    define: Callable[[Natives], str] | None = None
    needs: tuple[str, ...] = ()
    # Bytes of the run context's scratch memory (``scratch``) the twin keeps state in:
    # the runtime gives an engine the most any of its twins asks for.
    scratch: int = 0
    # The argument register holding a callback the twin calls (0: none): the call site
    # passes the callback's entry (``ptr @<tag>_cb<pc>``, the function the verifier
    # knows the argument is) and the depth of its frame after the arguments, and reads
    # the budget and the run's status back (the callback may stop the run). A call
    # whose callback is not a known constant takes the Python helper.
    callback: int = 0
    # The twin changes state runs on other CPUs share (a namespace's table) without
    # atomics or locks: a program calling it must not run on several CPUs at once
    # (its Python helper was serialized by the interpreter lock).
    serial: bool = False
    # (name, fake address, bytes): read-only memory every run of a program calling the
    # twin maps, so the program and Python helpers read what the twin writes there
    # (through ``translate``), e.g. the keys bpf_for_each_map_elem hands its callback.
    region: tuple[str, int, int] | None = None


_HELPERS: dict[int, HelperNative] = {}
# Shared IR functions registered twins name in ``needs`` (beside the lowering's own).
_SHARED: dict[str, Callable[[Natives], str]] = {}


def register_shared(name: str, define: Callable[[Natives], str]) -> None:
    """A shared function ``@<name>`` twins may call (defined once per module)."""
    _SHARED[name] = define


def shared_functions() -> dict[str, Callable[[Natives], str]]:
    """The registered shared functions by name (a copy)."""
    return dict(_SHARED)


def register_helper(helper_id: int, native: HelperNative) -> None:
    """Give helper ``helper_id`` a native twin (called when its module is imported)."""
    _HELPERS[int(helper_id)] = native


def helper_native(helper_id: int) -> HelperNative | None:
    """The registered native twin of ``helper_id`` (None: the Python helper only)."""
    return _HELPERS.get(int(helper_id))


def native_helpers() -> dict[int, HelperNative]:
    """Every registered twin by helper id (a copy)."""
    return dict(_HELPERS)


# kfuncs get a helper id of their own per program when the loader binds them, so their
# twins are registered by name, with the Python function they stand for.
_KFUNCS: dict[str, tuple[Callable[..., int], HelperNative]] = {}


def register_kfunc(name: str, fn: Callable[..., int], native: HelperNative) -> None:
    """Give kfunc ``name``, bound to the Python function ``fn``, a native twin."""
    assert native.define is not None
    _KFUNCS[name] = (fn, native)


def kfunc_kinds(helpers: Mapping[int, Any], ids: Iterable[int] | None = None
                ) -> tuple[tuple[int, str], ...]:
    """``(helper id, kind)`` of the bound kfuncs in ``helpers`` (a program's helper table)
    whose function is still the registered reference one; of ``ids`` only when given
    (the ids the program calls: a lazy table then loads no other helper)."""
    out = []
    for hid in helpers if ids is None else ids:
        h = helpers.get(hid)
        reg = _KFUNCS.get(getattr(h, "name", ""))
        if reg is not None and getattr(h, "fn", None) is reg[0]:
            out.append((int(hid), reg[1].kind))
    return tuple(sorted(out))


def serial_kfuncs(helpers: Mapping[int, Any], ids: Iterable[int] | None = None) -> bool:
    """Whether a program's helper table binds a kfunc whose twin is ``serial`` (of
    ``ids`` only, when given)."""
    return any(native.serial for _hid, kind in kfunc_kinds(helpers, ids)
               for _fn, native in _KFUNCS.values() if native.kind == kind)


def serial_helpers(helpers: Mapping[int, Any], called: Iterable[int]) -> bool:
    """Whether a program (its helper table, the helper ids its calls name) calls a
    helper or a kfunc whose twin is ``serial``."""
    called = set(called)
    return serial_kfuncs(helpers, called) or any(
        twin.serial for hid in called if (twin := _HELPERS.get(int(hid))) is not None)


def native_by_kind(helper_id: int, kind: str) -> HelperNative | None:
    """The twin the lowering uses for a call of ``helper_id`` that :class:`Natives` names
    ``kind``: the helper's own, else the kfunc twin of that kind."""
    twin = _HELPERS.get(int(helper_id))
    if twin is not None and twin.kind == kind:
        return twin
    for _fn, native in _KFUNCS.values():
        if native.kind == kind:
            return native
    return None


# The base helpers' twins (their Python implementations are pyxdp.vm.helpers'):
# lowered at the call site.
register_helper(BpfFuncId.BPF_FUNC_map_lookup_elem, HelperNative("map_lookup"))
register_helper(BpfFuncId.BPF_FUNC_map_update_elem, HelperNative("map_update"))
register_helper(BpfFuncId.BPF_FUNC_map_delete_elem, HelperNative("map_delete"))
register_helper(BpfFuncId.BPF_FUNC_map_lookup_percpu_elem, HelperNative("map_lookup_percpu"))
register_helper(BpfFuncId.BPF_FUNC_map_push_elem, HelperNative("map_push"))
register_helper(BpfFuncId.BPF_FUNC_map_pop_elem, HelperNative("map_pop"))
register_helper(BpfFuncId.BPF_FUNC_map_peek_elem, HelperNative("map_peek"))
register_helper(BpfFuncId.BPF_FUNC_ktime_get_ns, HelperNative("ktime"))
register_helper(BpfFuncId.BPF_FUNC_get_smp_processor_id, HelperNative("smp_id"))
