"""Netfilter flowtables (pyxdp.net.nf_flow_table) and bpf_xdp_flow_lookup
(nf_flow_table_bpf) on both engines, through ``samples/flowtable.o``: a source-NATed
TCP flow forwarded both ways with the flow's MAC addresses and output device, an
IPv6 flow over a neigh route (bpf_fib_lookup's MACs), misses, torn-down flows and
dying entries, a flow inside a VLAN the kfunc never finds, the opts_len and family
errors, the timeout refresh; the layout held to the kernel's BTF; the verifier's
rules for the kfunc. (This kernel has no flowtable kfunc: Linux refuses the object,
tests/kernel/test_flowtable_kernel.py.)"""

from __future__ import annotations

import errno
import struct
from pathlib import Path
from typing import Any

import pytest

from pyxdp.btf.btf import BtfKind
from pyxdp.btf.struct_access import member_offset
from pyxdp.btf.vmlinux import SHIPPED_BTF, kernel_btf_index
from pyxdp.collection import Collection
from pyxdp.net import fib as F
from pyxdp.net.nf_conntrack import CtTuple, IpsStatus
from pyxdp.net.nf_flow_table import (
    FLOW_OFFLOAD_LAYOUT,
    FlowFlag,
    FlowRoute,
    FlowtableError,
    FlowXmit,
)
from pyxdp.net.packets import ether, ipv4, ipv6
from pyxdp.net.prog import jit_available
from pyxdp.net.test_run import NetdevInfo, TestRunEnv
from pyxdp.uapi.bpf import XdpAction
from pyxdp.userspace import UserspaceBackend
from pyxdp.vm.jiffies import HZ, jiffies64

FLOWTABLE = Path(__file__).resolve().parents[1] / "samples" / "flowtable.o"
LAN_MAC, WAN_MAC = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
CLIENT_MAC, SERVER_MAC = "02:00:00:00:00:c1", "02:00:00:00:00:5e"
CFG = {"sz_sel": 0, "error_init": 77, "family": 0, "pad": [0, 0, 0]}
ENGINES = ["interp", pytest.param("jit", marks=pytest.mark.skipif(
    not jit_available(), reason="the JIT needs llvmlite"))]
needs_btf = pytest.mark.skipif(kernel_btf_index() is None, reason="needs the kernel's BTF")


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def _tcp(sport: int, dport: int, flags: int = 0x10) -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, flags, 512, 0, 0)


def _tcp4(src: str, dst: str, sport: int, dport: int, dmac: str, smac: str) -> bytes:
    seg = _tcp(sport, dport) + b"payload!"
    pseudo = (bytes(map(int, src.split("."))) + bytes(map(int, dst.split(".")))
              + struct.pack("!BBH", 0, 6, len(seg)))
    seg = seg[:16] + struct.pack("!H", 0xFFFF - _csum(pseudo + seg)) + seg[18:]
    return ether(dmac, smac, 0x0800, ipv4(src, dst, 6, seg))


def _valid4(frame: bytes) -> bool:
    """Both IPv4 checksums of a frame add up."""
    ip = frame[14:34]
    seg = frame[34:]
    pseudo = ip[12:20] + struct.pack("!BBH", 0, 6, len(seg))
    return _csum(ip) == 0xFFFF and _csum(pseudo + seg) == 0xFFFF


def _env() -> TestRunEnv:
    fib = F.Fib()
    fib.add_device(2, "lan", mac=LAN_MAC, addresses=["192.168.1.1/24", "fd00:1::1/64"])
    fib.add_device(3, "wan", mac=WAN_MAC, addresses=["203.0.113.1/24", "fd00:2::1/64"])
    fib.add_device(4, "dmz", addresses=["10.9.0.1/24"])
    fib.set_forwarding(True)
    fib.add_neighbour("fd00:2::9", SERVER_MAC, dev="wan")
    netdevs = {i: NetdevInfo(i, n) for i, n in ((1, "lo"), (2, "lan"), (3, "wan"), (4, "dmz"))}
    return TestRunEnv(netdevs=netdevs, fib=fib)


def _ctx(pkt: bytes, ifindex: int) -> bytes:
    return struct.pack("<6I", 0, len(pkt), 0, ifindex, 0, 0)


def _snat_flow(env: TestRunEnv) -> Any:
    """192.168.1.5:40000 -> 203.0.113.9:80 (TCP), source NAT to 203.0.113.1:50000."""
    ct = env.fib.conntrack.add(
        CtTuple.of("192.168.1.5", 40000, "203.0.113.9", 80, "tcp"),
        CtTuple.of("203.0.113.9", 80, "203.0.113.1", 50000, "tcp"),
        status=IpsStatus.SEEN_REPLY | IpsStatus.ASSURED | IpsStatus.SRC_NAT |
        IpsStatus.SRC_NAT_DONE)
    ft = env.fib.flowtables.add("ft", devices=(2, 3))
    flow = ft.offload(ct, FlowRoute(2, 3, WAN_MAC, SERVER_MAC),
                      FlowRoute(3, 2, LAN_MAC, CLIENT_MAC))
    return ct, ft, flow


@pytest.mark.parametrize("engine,core_btf", [
    pytest.param("interp", None, marks=needs_btf),
    pytest.param("jit", None, marks=[needs_btf, pytest.mark.skipif(
        not jit_available(), reason="the JIT needs llvmlite")]),
    pytest.param("interp", SHIPPED_BTF)], ids=["interp", "jit", "interp-shipped-btf"])
def test_flows_forward_and_miss(engine: str, core_btf: Path | None) -> None:
    """CO-RE (and the verifier's struct walks) against the running kernel's BTF, and
    against the BTF pyxdp ships (which holds struct flow_offload)."""
    env = _env()
    ct, ft, flow = _snat_flow(env)
    assert ct.status & IpsStatus.OFFLOAD
    assert flow.flags == FlowFlag.SNAT | FlowFlag.HW_BIDIRECTIONAL
    # an IPv6 flow routed through a neighbour: bpf_fib_lookup gives the MACs
    ct6 = env.fib.conntrack.add(CtTuple.of("fd00:1::5", 5000, "fd00:2::9", 53, "udp"))
    ft.offload(ct6, FlowRoute(2, xmit=FlowXmit.NEIGH, mtu=1400),
               FlowRoute(3, xmit=FlowXmit.NEIGH))
    # a flow arriving inside a VLAN: its tuple holds the tag, the kfunc's none
    ct_vlan = env.fib.conntrack.add(CtTuple.of("192.168.1.6", 1, "203.0.113.9", 2, "udp"))
    ft.offload(ct_vlan, FlowRoute(2, 3, encap=((10, 0x8100),)), FlowRoute(3, 2))
    with Collection.load(FLOWTABLE, UserspaceBackend(env=env, engine=engine,
                                                     core_btf=core_btf)) as c:
        ports = c.maps["tx_ports"]
        ports.handle.ifindex_ok = lambda i: i in env.fib.devices  # type: ignore[attr-defined]
        ports.update(2, 2)
        ports.update(3, 3)
        prog = c.programs["xdp_flowtable"]

        def run(pkt: bytes, ifindex: int, **cfg: Any) -> tuple[Any, dict[str, Any]]:
            c.maps["cfg"][0] = {**CFG, **cfg}
            r = prog.test_run(pkt, ctx_in=_ctx(pkt, ifindex))
            assert r.fault is None, r.fault
            return r, c.maps["out"][0]

        # original direction: source NAT, the reply route's MACs, out of wan
        r, o = run(_tcp4("192.168.1.5", "203.0.113.9", 40000, 80, LAN_MAC, CLIENT_MAC), 2)
        assert r.retval == XdpAction.XDP_REDIRECT and r.redirect["tgt_index"] == 3
        assert (o["found"], o["error"], o["dir"], o["xmit"]) == (1, 77, 0, FlowXmit.DIRECT)
        assert (o["iifidx"], o["mtu"], o["oifidx"]) == (2, 1500, 3)
        assert o["flags"] == FlowFlag.SNAT | FlowFlag.HW_BIDIRECTIONAL
        out = r.data_out
        assert out[:12] == bytes.fromhex(SERVER_MAC.replace(":", "") + WAN_MAC.replace(":", ""))
        assert out[26:30] == bytes([203, 0, 113, 1]) and out[34:36] == (50000).to_bytes(2, "big")
        assert out[22] == 63 and _valid4(out)
        # the reply: back to the client's address and port, out of lan
        r, o = run(_tcp4("203.0.113.9", "203.0.113.1", 80, 50000, WAN_MAC, SERVER_MAC), 3)
        assert r.retval == XdpAction.XDP_REDIRECT and r.redirect["tgt_index"] == 2
        assert (o["dir"], o["iifidx"], o["oifidx"]) == (1, 3, 2)
        out = r.data_out
        assert out[30:34] == bytes([192, 168, 1, 5]) and out[36:38] == (40000).to_bytes(2, "big")
        assert out[:6] == bytes.fromhex(CLIENT_MAC.replace(":", "")) and _valid4(out)
        # IPv6 over a neigh route
        pkt6 = ether(LAN_MAC, CLIENT_MAC, 0x86DD, ipv6("fd00:1::5", "fd00:2::9", 17,
                                                      struct.pack("!HHHH", 5000, 53, 8, 0)))
        r, o = run(pkt6, 2)
        assert r.retval == XdpAction.XDP_REDIRECT and r.redirect["tgt_index"] == 3
        assert (o["xmit"], o["mtu"], o["fib_rc"]) == (FlowXmit.NEIGH, 1400, 0)
        assert r.data_out[:6] == bytes.fromhex(SERVER_MAC.replace(":", ""))
        assert r.data_out[21] == 63  # hop limit
        # misses: another port, a device no flowtable holds, the VLAN flow
        pkt = _tcp4("192.168.1.5", "203.0.113.9", 40001, 80, LAN_MAC, CLIENT_MAC)
        assert run(pkt, 2)[1]["error"] == -errno.ENOENT
        pkt = _tcp4("192.168.1.5", "203.0.113.9", 40000, 80, LAN_MAC, CLIENT_MAC)
        r, o = run(pkt, 4)
        assert (r.retval, o["found"], o["error"]) == (XdpAction.XDP_PASS, 0, -errno.ENOENT)
        vlan = ether(LAN_MAC, CLIENT_MAC, 0x0800, ipv4("192.168.1.6", "203.0.113.9", 17,
                                                       struct.pack("!HHHH", 1, 2, 8, 0)))
        assert run(vlan, 2)[1]["error"] == -errno.ENOENT
        # opts_len other than 4 and an unknown family
        assert run(pkt, 2, sz_sel=1)[1]["error"] == -errno.EINVAL
        assert run(pkt, 2, sz_sel=2)[1]["error"] == -errno.EINVAL
        assert run(pkt, 2, family=7)[1]["error"] == -errno.EAFNOSUPPORT
        # a hit moves a timeout more than HZ behind; a fresh one stays
        flow.timeout = jiffies64() + 5 * HZ
        run(pkt, 2)
        assert flow.timeout - jiffies64() > 25 * HZ
        # a dying entry, then a torn-down flow, are not found
        ct.status |= IpsStatus.DYING
        assert run(pkt, 2)[1]["error"] == -errno.ENOENT
        ct.status &= ~IpsStatus.DYING
        assert run(pkt, 2)[1]["found"] == 1
        flow.teardown()
        assert not ct.status & IpsStatus.OFFLOAD
        r, o = run(pkt, 2)
        assert (r.retval, o["error"]) == (XdpAction.XDP_PASS, -errno.ENOENT)
    ft.gc()
    assert flow not in ft.list() and len(ft) == 2


@needs_btf
@pytest.mark.skipif(not jit_available(), reason="the JIT needs llvmlite")
def test_jit_batches_look_flows_up_natively() -> None:
    """A batch's first lookup maps the namespace's index (Python); the native twin
    answers every other packet: hits both ways, misses, an IPv6 neigh flow, then the
    same batch with the flow torn down; frames, verdicts and records equal the
    interpreter's, and the twin refreshes a timeout as the Python kfunc does."""
    import numpy as np

    from pyxdp.net import nf_flow_table_bpf
    from pyxdp.testing.native import python_calls
    from pyxdp.vm.helpers import RunContext

    env = _env()
    ct, ft, flow = _snat_flow(env)
    ct6 = env.fib.conntrack.add(CtTuple.of("fd00:1::5", 5000, "fd00:2::9", 53, "udp"))
    ft.offload(ct6, FlowRoute(2, xmit=FlowXmit.NEIGH), FlowRoute(3, xmit=FlowXmit.NEIGH))
    # a miss first: the Python kfunc maps the index, the twin does the rest (the refresh too)
    pkts = [(_tcp4("192.168.1.5", "203.0.113.9", 40001, 80, LAN_MAC, CLIENT_MAC), 2),
            (_tcp4("192.168.1.5", "203.0.113.9", 40000, 80, LAN_MAC, CLIENT_MAC), 2),
            (_tcp4("203.0.113.9", "203.0.113.1", 80, 50000, WAN_MAC, SERVER_MAC), 3),
            (ether(LAN_MAC, CLIENT_MAC, 0x86DD, ipv6("fd00:1::5", "fd00:2::9", 17,
                                                     struct.pack("!HHHH", 5000, 53, 8, 0))), 2)]
    n = 32
    frames = np.zeros((n, 2048), np.uint8)
    lens = np.zeros(n, np.int64)
    ifindex = np.zeros(n, np.int64)
    for i in range(n):
        pkt, dev = pkts[i % len(pkts)]
        frames[i, 256:256 + len(pkt)] = np.frombuffer(pkt, np.uint8)
        lens[i], ifindex[i] = len(pkt), dev

    def batches(engine: str) -> list[Any]:
        ctx = RunContext()
        ctx.fib = env.fib
        got = []
        with Collection.load(FLOWTABLE, UserspaceBackend(env=env, engine=engine)) as c:
            ports = c.maps["tx_ports"]
            ports.handle.ifindex_ok = lambda i: i in env.fib.devices  # type: ignore
            ports.update(2, 2)
            ports.update(3, 3)
            c.maps["cfg"][0] = CFG
            prog = c.programs["xdp_flowtable"].handle
            for teardown in (False, True):
                if teardown:
                    flow.teardown()
                f = frames.copy()
                flow.timeout = jiffies64() + 5 * HZ

                res: list[Any] = []

                def run(f: Any = f, res: list[Any] = res) -> None:
                    res.append(prog.run_batch(f, 256, lens, ingress_ifindex=ifindex, ctx=ctx))
                calls = python_calls([nf_flow_table_bpf.xdp_flow_lookup], run)
                if engine == "jit":
                    assert calls == 1, calls  # the batch's first lookup only
                out = res[0]
                # the record of the last frame (its timeout is the clock's: left out)
                rec = {k: v for k, v in c.maps["out"][0].items() if k not in ("runs", "timeout")}
                got.append((out.action.tolist(), f.tobytes(), rec,
                            flow.timeout - jiffies64() > 25 * HZ or teardown))
            flow.flags &= ~FlowFlag.TEARDOWN
            ct.status |= IpsStatus.OFFLOAD
        return got

    interp, jit = batches("interp"), batches("jit")
    assert jit == interp
    actions = interp[0][0]
    assert actions[:4] == [XdpAction.XDP_PASS, XdpAction.XDP_REDIRECT, XdpAction.XDP_REDIRECT,
                           XdpAction.XDP_REDIRECT]
    assert interp[1][0][:3] == [XdpAction.XDP_PASS] * 3  # torn down
    assert all(g[3] for g in interp + jit)


def test_flowtable_api_rules() -> None:
    env = _env()
    ct, ft, flow = _snat_flow(env)
    with pytest.raises(FlowtableError, match="EEXIST"):
        ft.offload(ct, FlowRoute(2), FlowRoute(3))  # IPS_OFFLOAD already
    with pytest.raises(FlowtableError, match="EEXIST"):
        env.fib.flowtables.add("ft", devices=(4,))
    with pytest.raises(FlowtableError, match="EINVAL"):
        FlowRoute(2, encap=((1, 0x8100),) * 3).check()
    # a second table on a device: the first bound keeps it (nf_flowtable_by_dev)
    other = env.fib.flowtables.add("ft2", devices=(3, 4))
    assert env.fib.flowtables.by_dev(3) is ft and env.fib.flowtables.by_dev(4) is other
    # the gc tears expired flows down and frees them
    flow.timeout = jiffies64() - 1
    ft.gc()
    assert len(ft) == 0 and not ct.status & IpsStatus.OFFLOAD
    ft.offload(ct, FlowRoute(2), FlowRoute(3))  # offloaded again
    env.fib.flowtables.delete("ft")
    assert not ct.status & IpsStatus.OFFLOAD and env.fib.flowtables.by_dev(2) is None
    with pytest.raises(FlowtableError, match="ENOENT"):
        env.fib.flowtables.delete("ft")


@needs_btf
def test_flow_offload_layout_is_the_kernels() -> None:
    btf = kernel_btf_index()
    assert btf is not None

    def struct_id(name: str) -> int:
        tid = btf.find(name, BtfKind.STRUCT)
        assert tid is not None
        return tid

    flow, rhash, tup = (struct_id(n) for n in ("flow_offload", "flow_offload_tuple_rhash",
                                               "flow_offload_tuple"))
    L = FLOW_OFFLOAD_LAYOUT
    assert btf.type_by_id(flow).size_type == L["size"]
    assert btf.type_by_id(rhash).size_type == L["tuplehash_size"]
    assert btf.type_by_id(tup).size_type == L["tuple_size"]
    assert member_offset(btf, rhash, "tuple") == (L["tuple"], L["tuple_size"])
    for name in ("ct", "flags", "type", "timeout"):
        got = member_offset(btf, flow, name)
        assert got is not None and got[0] == L[name], name
    for name in ("src_v4", "dst_v4", "src_port", "dst_port", "iifidx", "l3proto", "l4proto",
                 "encap", "mtu", "dst_cache", "dst_cookie"):
        key = {"src_v4": "src", "dst_v4": "dst"}.get(name, name)
        got = member_offset(btf, tup, name)
        assert got is not None and got[0] == L[key], name
    bits = {m.name: (m.bit_offset, m.bitfield_size) for m in btf.type_by_id(tup).members
            if m.bitfield_size}
    assert bits["dir"] == (8 * L["bits"], 2) and bits["xmit_type"] == (8 * L["bits"] + 2, 3)
    assert bits["encap_num"] == (8 * L["bits"] + 5, 2)


# -- the verifier: bpf_xdp_flow_lookup's prototype and the result's access rules, with the
# messages of Linux 6.18's source (no kernel here has the kfunc to measure) --------------
# r0 = bpf_xdp_flow_lookup(ctx, fib tuple at fp-72 (64 bytes, zeroed), opts at fp-8, 4)
_PRE = "".join(f"*(u64 *)(r10 -{o}) = 0\n" for o in range(8, 80, 8)) + """r2 = r10
r2 += -72
r3 = r10
r3 += -8
r4 = 4
call KFUNC(bpf_xdp_flow_lookup)
"""
_CHECKED = _PRE + "if r0 == 0 goto +1\n{}\nr0 = 2\nexit"
VERIFIER_CASES = [
    # tuple.iifidx, the byte of dir/xmit_type/encap_num, node.next->next (untrusted)
    ("read", _CHECKED.format("r1 = *(u32 *)(r0 +44)"), None, 0),
    ("bitfields", _CHECKED.format("r1 = *(u8 *)(r0 +58)"), None, 0),
    ("node", _PRE + "if r0 == 0 goto +2\nr1 = *(u64 *)(r0 +0)\nr1 = *(u64 *)(r1 +0)\n"
     "r0 = 2\nexit", None, 0),
    # the union after mtu starts with struct { dst_cache; dst_cookie }, which has no name
    # (btf_struct_walk names it "(anon)"): out.ifidx is
    # refused (the sample reads it through bpf_rdonly_cast(, 0))
    ("union", _CHECKED.format("r1 = *(u32 *)(r0 +64)"),
     "cannot access ptr member dst_cache with moff 0 in struct (anon) with off 0 size 4",
     errno.EACCES),
    ("rdonly_cast", _PRE + "if r0 == 0 goto +4\nr1 = r0\nr2 = 0\n"
     "call KFUNC(bpf_rdonly_cast)\nr1 = *(u32 *)(r0 +64)\nr0 = 2\nexit", None, 0),
    ("unchecked", _PRE + "r1 = *(u32 *)(r0 +44)\nr0 = 2\nexit",
     "R0 invalid mem access 'ptr_or_null_'", errno.EACCES),
    ("write", _CHECKED.format("*(u32 *)(r0 +44) = 1"), "only read is supported", errno.EACCES),
    ("beyond", _CHECKED.format("r1 = *(u64 *)(r0 +88)"),
     "access beyond struct flow_offload_tuple_rhash at off 88 size 8", errno.EACCES),
    ("negative", _CHECKED.format("r1 = *(u64 *)(r0 -8)"),
     "R0 is ptr_flow_offload_tuple_rhash invalid negative access: off=-8", errno.EACCES),
    # KF_TRUSTED_ARGS: no NULL pointer argument; the result is neither referenced nor
    # trusted, so a trusted-argument kfunc refuses it
    ("opts_null", _PRE.replace("r3 = r10\nr3 += -8\n", "r3 = 0\n") + "r0 = 2\nexit",
     "Possibly NULL pointer passed to trusted arg2", errno.EACCES),
    ("to_trusted", _PRE + "if r0 == 0 goto +3\nr1 = r0\nr2 = 1000\n"
     "call KFUNC(bpf_ct_change_timeout)\nr0 = 2\nexit",
     "R1 must be referenced or trusted", errno.EINVAL),
    # fib_tuple is 64 bytes of memory
    ("tuple_small", _PRE.replace("r2 += -72", "r2 += -32") + "r0 = 2\nexit",
     "invalid read from stack R2 off=-32 size=64", errno.EINVAL),
    ("ctx", "r1 = r10\nr1 += -80\n" + _PRE + "r0 = 2\nexit",
     "arg#0 expected pointer to ctx, but got fp", errno.EINVAL),
]


@pytest.mark.parametrize("name,asm,msg,err", VERIFIER_CASES, ids=[c[0] for c in VERIFIER_CASES])
def test_verifier_rules(name: str, asm: str, msg: str | None, err: int) -> None:
    from pyxdp.errors import VerifierError
    from pyxdp.testing.verifier_cases import VerifierCase
    from pyxdp.verifier import verify

    spec = VerifierCase("ft_" + name, asm, msg).spec()
    (prog,) = spec.programs.values()
    if msg is None:
        verify(prog, spec.maps, btf=spec.btf)
        return
    with pytest.raises(VerifierError) as e:
        verify(prog, spec.maps, btf=spec.btf)
    assert (e.value.reason, e.value.errno) == (msg, err)


def test_non_gpl_program_may_not_call_it() -> None:
    from pyxdp.errors import VerifierError
    from pyxdp.testing.verifier_cases import VerifierCase
    from pyxdp.verifier import verify

    spec = VerifierCase("ft_mit", _CHECKED.format("r1 = 0"), None, license="MIT").spec()
    (prog,) = spec.programs.values()
    with pytest.raises(VerifierError, match="cannot call kernel function from non-GPL "
                       "compatible program"):
        verify(prog, spec.maps, btf=spec.btf)
