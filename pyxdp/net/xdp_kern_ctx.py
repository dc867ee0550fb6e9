"""The kernel's structs behind an XDP context, for ``bpf_cast_to_kern_ctx`` and
``bpf_rdonly_cast`` (``kernel/bpf/helpers.c``).

In Linux an XDP program's ``struct xdp_md *`` is the kernel's ``struct xdp_buff``:
``bpf_cast_to_kern_ctx(ctx)`` hands it back typed, and the program reads
``kctx->data``, ``kctx->frame_sz``, ``kctx->rxq->queue_index``,
``kctx->rxq->dev->ifindex``... through BTF (every such load a ``BPF_PROBE_MEM``
load: one that faults reads 0). ``bpf_rdonly_cast(ptr, btf_id)`` is the pointer
itself, typed for the verifier.

pyxdp lays out a :class:`KernCtx` image of the structs at the offsets of the
kernel's BTF (or the BTF pyxdp ships) at fake addresses from :data:`KERN_BASE`,
read-only, holding what Linux holds: the packet pointers as the program's own
addresses (``data_hard_start`` is the frame's start), ``frame_sz``, the frags
flag, ``rxq`` and (for a devmap egress program) ``txq``. Only members pyxdp has
a value for are mapped: ``xdp_rxq_info.dev`` and ``queue_index``,
``xdp_txq_info.dev``, ``net_device.ifindex``, and a device's ``name`` and ``mtu``
where the run's namespace (:class:`pyxdp.net.fib.Fib`) has the device. Every other
byte of those structs is unmapped, so a probe load of it reads 0 and an unverified program faults
(docs/SEMANTICS.md). The image follows the buffer: :meth:`XdpBuff.sync_region`
rewrites the packet pointers whenever they move.

On the JIT the engine keeps one image (:class:`KernImage`), built by the Python
kfunc the first time a run needs it (and again when the receiving device, queue or
egress device changes, or a batch starts with the devices' names or MTUs changed),
and described to native code by the run context's ``kern`` words: the kfunc's
native twin writes the per-packet fields (the packet pointers, ``data_hard_start``,
``frame_sz``, the frags flag, ``rxq`` and ``txq``), and every native move of the
edges (``pkt`` after ``bpf_xdp_adjust_head``/``_meta``/``_tail``) mirrors the
packet pointers into it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pyxdp.btf.btf import BtfKind
from pyxdp.btf.struct_access import member_offset
from pyxdp.btf.vmlinux import core_target
from pyxdp.errors import HelperFault
from pyxdp.net.fib import Fib, dev_net
from pyxdp.net.xdp import PKT_BASE, XdpBuff
from pyxdp.vm.context import RunContext
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.jit.abi import KERN, KERN_FIELDS, SLOW, Natives
from pyxdp.vm.jit.ir import Text, c64, ret_if
from pyxdp.vm.jit.natives import HelperNative, register_kfunc, xdp_guard
from pyxdp.vm.memory import Region

__all__ = ["KERN_BASE", "KERN_CTX_KFUNCS", "KernCtx", "KernImage", "native_layout"]

# Fake addresses of the image: struct xdp_buff, its xdp_rxq_info, the receiving
# net_device, the xdp_txq_info, the egress net_device and the devices' struct net, a
# page apart.
KERN_BASE = 0x0000_7000_0000_0000
_RXQ, _DEV, _TXQ, _EGRESS_DEV, _NET, _KERN_END = (KERN_BASE + k * 0x1000 for k in range(1, 7))
XDP_FLAGS_HAS_FRAGS = 1 << 0


class _Layout:
    """Offsets (and sizes) of the members the image holds, from a kernel BTF."""

    def __init__(self) -> None:
        btf = core_target()

        def struct(name: str) -> int:
            tid = btf.find(name, BtfKind.STRUCT)
            if tid is None:
                raise HelperFault(f"the kernel BTF ({btf.path}) has no struct {name}: "
                                  "bpf_cast_to_kern_ctx cannot lay it out")
            return tid

        def member(tid: int, name: str) -> tuple[int, int]:
            got = member_offset(btf, tid, name)
            if got is None:
                raise HelperFault(f"the kernel BTF ({btf.path}) has no member {name} of "
                                  f"struct {btf.type_by_id(tid).name}")
            return got

        buff = struct("xdp_buff")
        self.buff_size = btf.type_by_id(buff).size_type
        self.buff = {n: member(buff, n) for n in ("data", "data_end", "data_meta",
                                                   "data_hard_start", "rxq", "txq",
                                                   "frame_sz", "flags")}
        rxq = struct("xdp_rxq_info")
        self.rxq = {n: member(rxq, n) for n in ("dev", "queue_index")}
        self.txq_dev = member(struct("xdp_txq_info"), "dev")
        dev = struct("net_device")
        self.ifindex = member(dev, "ifindex")
        self.name = member(dev, "name")
        self.mtu = member(dev, "mtu")
        # dev->nd_net.net->ns.inum, where the BTF has struct net (a BTF without it
        # leaves the namespace unmapped: a probe read of it gives 0).
        self.nd_net: tuple[int, int] | None = None
        self.inum: tuple[int, int] | None = None
        net = btf.find("net", BtfKind.STRUCT)
        ns = member_offset(btf, net, "ns") if net is not None else None
        common = btf.find("ns_common", BtfKind.STRUCT)
        inum = member_offset(btf, common, "inum") if common is not None else None
        if ns is not None and inum is not None:
            self.nd_net = member_offset(btf, dev, "nd_net")
            self.inum = (ns[0] + inum[0], inum[1])


_LAYOUT: list[_Layout] = []


def _layout() -> _Layout:
    if not _LAYOUT:
        _LAYOUT.append(_Layout())
    return _LAYOUT[0]


def _put(buf: bytearray, at: tuple[int, int], value: int) -> None:
    off, size = at
    buf[off:off + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


class KernCtx:
    """The image of one buffer's kernel structs (see the module docstring)."""

    def __init__(self, xdp: XdpBuff, fib: Fib | None = None) -> None:
        lay = _layout()
        self.buff = bytearray(lay.buff_size)
        self.regions = [Region("struct xdp_buff", KERN_BASE, self.buff, writable=False)]

        def field(name: str, base: int, at: tuple[int, int], value: int) -> None:
            buf = bytearray(at[1])
            _put(buf, (0, at[1]), value)
            self.regions.append(Region(name, base + at[0], buf, writable=False))

        rxq = xdp.rxq
        field("xdp_rxq_info.dev", _RXQ, lay.rxq["dev"], _DEV)
        field("xdp_rxq_info.queue_index", _RXQ, lay.rxq["queue_index"], rxq.queue_index)
        def device(base: int, ifindex: int, what: str) -> None:
            field(f"net_device.ifindex{what}", base, lay.ifindex, ifindex)
            known = fib.devices.get(ifindex) if fib is not None else None
            if known is not None:
                name = known.name.encode()[:lay.name[1] - 1]
                field(f"net_device.name{what}", base, lay.name,
                      int.from_bytes(name, "little"))
                field(f"net_device.mtu{what}", base, lay.mtu, known.mtu)
                if lay.nd_net is not None:
                    field(f"net_device.nd_net{what}", base, lay.nd_net, _NET)

        if fib is not None and lay.inum is not None:
            field("net.ns.inum", _NET, lay.inum, fib.inum)

        device(_DEV, rxq.ifindex, "")
        if xdp.egress_ifindex:
            field("xdp_txq_info.dev", _TXQ, lay.txq_dev, _EGRESS_DEV)
            device(_EGRESS_DEV, xdp.egress_ifindex, " (egress)")
        self.sync(xdp)

    def sync(self, xdp: XdpBuff) -> None:
        """Write the buffer's current edges (and the rest of struct xdp_buff)."""
        b, at = self.buff, _layout().buff
        _put(b, at["data"], PKT_BASE + xdp.data)
        _put(b, at["data_end"], PKT_BASE + xdp.data_end)
        _put(b, at["data_meta"], PKT_BASE + xdp.data_meta)
        _put(b, at["data_hard_start"], PKT_BASE)
        _put(b, at["rxq"], _RXQ)
        _put(b, at["txq"], _TXQ if xdp.egress_ifindex else 0)
        _put(b, at["frame_sz"], xdp.frame_sz)
        _put(b, at["flags"], XDP_FLAGS_HAS_FRAGS if xdp.frags else 0)


# The members of struct xdp_buff native code writes, in KERN_FIELDS order, and their
# sizes (the others are pointers).
_MEMBERS = ("data", "data_end", "data_meta", "data_hard_start", "rxq", "txq", "frame_sz",
            "flags")
_NATIVE_SIZES = {"frame_sz": 4, "flags": 4}
assert KERN_FIELDS[4:] == tuple(f"off_{n}" for n in _MEMBERS)


def _devices(fib: Fib, ifindexes: tuple[int, ...]) -> tuple[tuple[str, int] | None, ...]:
    """What an image shows of these devices: their name and MTU, None when the namespace
    does not have one."""
    return tuple((d.name, d.mtu) if (d := fib.devices.get(i)) is not None else None
                 for i in ifindexes)


def native_layout() -> bool:
    """Whether the kernel BTF's struct xdp_buff has the member sizes the native twin
    writes (else a JIT engine leaves the image, and the packet edges, to Python)."""
    try:
        at = _layout().buff
    except HelperFault:
        return False
    return all(at[n][1] == _NATIVE_SIZES.get(n, 8) for n in _MEMBERS)


class KernImage:
    """A JIT engine's image: the :class:`KernCtx` its native code writes, and the run
    context's ``kern`` words describing it (``desc``, :data:`KERN_FIELDS`)."""

    def __init__(self) -> None:
        self.desc = np.zeros(len(KERN_FIELDS), np.uint64)
        self.kern: KernCtx | None = None
        self._keep: object = None
        # The devices the image shows (ingress, egress ifindex) and what it shows of them.
        self._ifaces: tuple[int, int] = (0, 0)
        self._seen: tuple[tuple[str, int] | None, ...] = ()

    @property
    def regions(self) -> list[Region]:
        return self.kern.regions if self.kern is not None else []

    def invalidate(self) -> None:
        """Make the next cast rebuild the image."""
        self.desc[KERN["host"]] = 0

    def begin(self, context: object) -> None:
        """A batch starts: keep the image only if the run's namespace still shows its
        devices as it was built with (a run without a namespace of its own gets a new
        one from the kfunc: the image is rebuilt)."""
        fib = context.fib if isinstance(context, RunContext) else None
        if self.kern is None or fib is None or _devices(fib, self._ifaces) != self._seen:
            self.invalidate()

    def build(self, xdp: XdpBuff, fib: Fib) -> KernCtx:
        """The image of ``xdp``'s device, queue and egress device, for native code."""
        kern = KernCtx(xdp, fib)
        self.kern = kern
        self._ifaces = (xdp.rxq.ifindex, xdp.egress_ifindex)
        self._seen = _devices(fib, self._ifaces)
        # The JIT runtime (and LLVM with it) loads when native code first needs it:
        # importing the network layer must not (an interpreted first packet waits for it).
        from pyxdp.vm.jit.runtime import _pin
        at = _layout().buff
        self._keep, host = _pin(kern.buff, True, "struct xdp_buff image")
        self.desc[:] = (host, xdp.rxq.ifindex & 0xFFFF_FFFF, xdp.rxq.queue_index & 0xFFFF_FFFF,
                        xdp.egress_ifindex & 0xFFFF_FFFF_FFFF_FFFF,
                        *(at[n][0] for n in _MEMBERS))
        return kern

    def sync(self, xdp: XdpBuff) -> None:
        """Python moved ``xdp``'s edges (a Python helper): the image follows."""
        if self.kern is not None and self.desc[KERN["host"]]:
            self.kern.sync(xdp)


def _cast_to_kern_ctx(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    fib, _ = dev_net(vm.context, r1, "bpf_cast_to_kern_ctx")
    ctx = vm.context
    assert isinstance(ctx, RunContext)
    xdp: XdpBuff = ctx.xdp
    image: Any = getattr(vm, "kern_image", None)
    if isinstance(image, KernImage):  # a JIT engine's: the one native code writes
        xdp.kern = image.build(xdp, fib)
    elif xdp.kern is None:
        xdp.kern = KernCtx(xdp, fib)
    else:
        xdp.kern.sync(xdp)
    mine = {id(r) for r in xdp.kern.regions}
    for r in list(vm.mem.regions):  # an earlier frame's image (a batch keeps its regions)
        if KERN_BASE <= r.base < _KERN_END and id(r) not in mine:
            vm.mem.remove(r)
    have = {id(r) for r in vm.mem.regions}
    for r in xdp.kern.regions:
        if id(r) not in have:
            vm.mem.add(r)
    return KERN_BASE


def _rdonly_cast(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return r1  # a type for the verifier; the pointer itself at run time


def _cast_fn(natives: Natives) -> str:
    """``bpf_cast_to_kern_ctx``'s native twin: the per-packet fields of the engine's
    image written as :meth:`KernCtx.sync` writes them, at the offsets the ``kern``
    words give; SLOW (the Python kfunc builds the image) when there is none yet or it
    is another device's, queue's or egress device's."""
    f = Text()
    f.at("entry")
    xdp_guard(f, natives.ctx_base, False)
    k = f.cget("%ctx", "kern", "ptr")
    ret_if(f, f.ins(f"icmp eq ptr {k}, null"), SLOW)
    host = f.word(k, KERN["host"], "ptr", "")
    ret_if(f, f.ins(f"icmp eq ptr {host}, null"), SLOW)
    cv = f.cget("%ctx", "ctx_values", "ptr")
    # ctx_values 3, 4, 5: the frame's ingress ifindex, rx queue and egress ifindex
    same = [f.ins(f"icmp eq i64 {f.word(k, KERN[name], 'i64', '')}, "
                  f"{f.word(cv, n, 'i64', '')}")
            for name, n in (("ifindex", 3), ("queue", 4), ("egress", 5))]
    ok = f.ins(f"and i1 {same[0]}, {f.ins(f'and i1 {same[1]}, {same[2]}')}")
    ret_if(f, f.ins(f"xor i1 {ok}, true"), SLOW)
    egress = f.word(cv, 5, "i64", "")
    values = {
        "data": f.ins(f"add i64 {f.cget('%ctx', 'x_data')}, {c64(PKT_BASE)}"),
        "data_end": f.ins(f"add i64 {f.cget('%ctx', 'x_data_end')}, {c64(PKT_BASE)}"),
        "data_meta": f.ins(f"add i64 {f.cget('%ctx', 'x_data_meta')}, {c64(PKT_BASE)}"),
        "data_hard_start": c64(PKT_BASE), "rxq": c64(_RXQ),
        "txq": f.ins(f"select i1 {f.ins(f'icmp ne i64 {egress}, 0')}, i64 {c64(_TXQ)}, "
                     "i64 0"),
        "frame_sz": f.cget("%ctx", "x_frame_sz"),
        "flags": f.ins(f"select i1 {f.ins('icmp ne i64 ' + f.cget('%ctx', 'x_frags') + ', 0')}"
                       f", i64 {XDP_FLAGS_HAS_FRAGS}, i64 0"),
    }
    for name in _MEMBERS:
        size = _NATIVE_SIZES.get(name, 8)
        ty = f"i{8 * size}"
        v = values[name]
        val = v if size == 8 else f.ins(f"trunc i64 {v} to {ty}")
        off = f.word(k, KERN[f"off_{name}"], "i64", "")
        f.do(f"store {ty} {val}, ptr {f.gep(host, off)}, align 1")
    f.do(f"ret i64 {c64(KERN_BASE)}")
    return f.text("define internal i64 @cast_to_kern_ctx(ptr %ctx, i64 %r1) nounwind")


def _rdonly_fn(natives: Natives) -> str:
    """``bpf_rdonly_cast``'s native twin: the pointer itself."""
    f = Text()
    f.at("entry")
    f.do("ret i64 %r1")
    return f.text("define internal i64 @rdonly_cast(ptr %ctx, i64 %r1) nounwind")


KERN_CTX_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_cast_to_kern_ctx": _cast_to_kern_ctx,
    "bpf_rdonly_cast": _rdonly_cast,
}
register_kfunc("bpf_cast_to_kern_ctx", _cast_to_kern_ctx,
               HelperNative("cast_to_kern_ctx", 1, _cast_fn))
register_kfunc("bpf_rdonly_cast", _rdonly_cast,
               HelperNative("rdonly_cast", 1, _rdonly_fn))
