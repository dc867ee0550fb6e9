"""Multi-buffer XDP (frags) lab scenarios: :mod:`pyxdp.testing.vethlab` scenarios on
9000-MTU veth pairs, where frames above 3520 bytes reach XDP as a head buffer
plus frags (``veth_convert_skb_to_xdp_buff``/``skb_pp_cow_data`` on Linux,
:meth:`pyxdp.net.netdevice.NetDevice._dma_frags` on pyxdp).

* :func:`frags_veth`: ``samples/frags.o`` on veth0 (PASS, DROP, TX with a
  store into the last frag, ``adjust_tail`` shrink and grow, devmap
  redirect to veth2), a frags-aware XDP_PASS on the other three ends (a
  program that is not frags-aware cannot be attached there: the peer's
  MTU needs frags, ERANGE);
* :func:`frags_cpumap`: ``samples/redirect_cpu.o`` loaded frags-aware,
  frames through cpumap entries and their programs to the stack.

* :func:`frags_broadcast`: ``samples/redirect_bcast.o`` loaded frags-aware on
  veth0, ``BPF_F_BROADCAST`` over a devmap of veth2 and veth4: a frags frame
  goes whole to its one valid target (``is_valid_dst``: MTU, ``NDO_XMIT_SG``),
  and with two the redirect fails, -EOPNOTSUPP (``dev_map_enqueue_clone``).

* :func:`frags_devmap_hash_entry`: a frags-aware program on veth0 redirecting
  through a devmap_hash whose entry (veth2) runs a program that is not
  frags-aware: the one map type whose loads Linux does not check against its
  entries' programs (``bpf_prog_map_compatible``).

* :func:`frags_generic`: ``samples/frags.o`` attached in generic (skb) mode,
  frags-aware or loaded as a plain ``SEC("xdp")`` program: skbs above 3520
  bytes meet ``netif_skb_check_for_xdp`` (a head and frags from
  ``skb_cow_data_for_xdp``, or the skb linearised).

``tests/kernel/test_frags_kernel.py`` compares both backends;
``tests/test_frags.py`` the native poll loop with the Python path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyxdp.asm.assembler import assemble
from pyxdp.collection import Collection
from pyxdp.net import packets as pk
from pyxdp.spec import BPF_F_XDP_HAS_FRAGS, CollectionSpec, MapRef, MapSpec, ProgramSpec
from pyxdp.testing import vethlab
from pyxdp.testing.vethlab import Attach, LinkSpec, Scenario
from pyxdp.uapi.bpf import BpfAttachType, BpfMapType

__all__ = ["DEVS", "PASS_FRAGS", "PORTS", "SIZES", "SLOT0", "frags_broadcast", "frags_cpumap",
           "frags_devmap_hash_entry", "frags_generic", "frags_veth", "ops_program"]

DEVS = ("veth0", "veth1", "veth2", "veth3")
PAIRS = (("veth0", "veth1"), ("veth2", "veth3"))
SIZES = (1000, 5000, 9014)
PORTS = range(9001, 9007)
SLOT0 = 64  # ops_program's results go into the packet head from here
PASS_FRAGS = CollectionSpec(
    programs={"xdp_pass": ProgramSpec(name="xdp_pass", section="xdp.frags",
                                      insns=assemble("r0 = 2\nexit"), license="GPL",
                                      flags=BPF_F_XDP_HAS_FRAGS)},
    maps={}, license="GPL", name="xdp_pass_frags")


def ops_program(ops: Sequence[tuple[Any, ...]]) -> CollectionSpec:
    """A frags-aware XDP program (``xdp_ops``) calling the packet helpers as ``ops`` say,
    in order - ``("len",)``, ``("load", off, n)``, ``("store", off, n)`` (bytes
    0x61..0x5a, 0x78..0x71), ``("tail", delta)``, ``("pull", n)`` (helper 7: a test
    stands a Python ``bpf_xdp_pull_data`` in for it) - then XDP_PASS. Op k's return
    value lands at head offset SLOT0 + 16k and what a load read (its first 8 bytes)
    at SLOT0 + 16k + 8, when the head holds them. The kernel's verifier takes it for
    loads and stores of 1..16 bytes."""
    lines = ["r6 = r1"]

    def result(k: int, reg: str = "r0") -> None:
        lines.extend([f"r7 = {reg}", "r2 = *(u32 *)(r6 + 0)", "r3 = *(u32 *)(r6 + 4)",
                      "r1 = r2", f"r1 += {SLOT0 + 16 * k + 16}",
                      f"if r1 > r3 goto skip{k}_{reg}",
                      f"*(u64 *)(r2 + {SLOT0 + 16 * k}) = r7"])
        if reg == "r0":
            lines.extend(["r1 = *(u64 *)(r10 - 32)", f"*(u64 *)(r2 + {SLOT0 + 16 * k + 8}) = r1"])
        lines.append(f"skip{k}_{reg}:")

    for k, (name, *args) in enumerate(ops):
        lines.extend(["r1 = 0", "*(u64 *)(r10 - 32) = r1", "*(u64 *)(r10 - 24) = r1"])
        if name == "len":
            lines.extend(["r1 = r6", "call bpf_xdp_get_buff_len"])
        elif name == "load":
            off, n = args
            lines.extend(["r1 = r6", f"r2 = {off}", "r3 = r10", "r3 += -32", f"r4 = {n}",
                          "call bpf_xdp_load_bytes"])
        elif name == "store":
            off, n = args
            lines.extend(["r1 = 0x5a5b5c5d5e5f6061 ll", "*(u64 *)(r10 - 32) = r1",
                          "r1 = 0x7172737475767778 ll", "*(u64 *)(r10 - 24) = r1",
                          "r1 = r6", f"r2 = {off}", "r3 = r10", "r3 += -32", f"r4 = {n}",
                          "call bpf_xdp_store_bytes"])
        elif name == "pull":  # helper 7 stands in for the kfunc (test_pull_data_...)
            lines.extend(["r1 = r6", f"r2 = {args[0]}", "call 7"])
        elif name == "tail":
            lines.extend(["r1 = r6", f"r2 = {args[0]}", "call bpf_xdp_adjust_tail"])
        result(k)
    lines.extend(["r0 = 2", "exit"])
    prog = ProgramSpec(name="xdp_ops", section="xdp.frags", insns=assemble("\n".join(lines)),
                       license="GPL", flags=BPF_F_XDP_HAS_FRAGS)
    return CollectionSpec(programs={"xdp_ops": prog}, maps={}, license="GPL", name="fragsjit")


def _tx_port(colls: Mapping[str, Collection], ifindex_of: Callable[[str], int]) -> None:
    colls["frags.o"].maps["tx_port"][0] = ifindex_of("veth2")


def frags_veth() -> Scenario:
    """samples/frags.o on veth0: frames of 1000, 5000 and 9014 bytes to each port."""
    mac = {d: vethlab.lab_mac(PAIRS, d) for d in DEVS}
    frames = tuple(("veth0", pk.udp_packet(b"frags", sport=2000 + i, dport=port, size=size,
                                           src_mac=mac["veth1"], dst_mac=mac["veth0"]))
                   for port in PORTS for i, size in enumerate(SIZES))
    return Scenario(
        "frags", pairs=PAIRS,
        attach=(Attach("veth0", "frags.o", "xdp_frags"),
                *(Attach(d, PASS_FRAGS, "xdp_pass", collection=f"pass@{d}")
                  for d in DEVS[1:])),
        traffic=frames, setup=_tx_port, maps=("stats",), pass_unattached=False,
        links=tuple(LinkSpec(d, mtu=9000) for d in DEVS))


def _frags_aware(spec: CollectionSpec) -> CollectionSpec:
    """Every program of ``spec`` loaded frags-aware (``SEC("xdp.frags")``): Linux 6.18
    refuses (EINVAL) to load programs that share a map unless they agree on frags."""
    return dataclasses.replace(spec, programs={
        n: dataclasses.replace(p, section=p.section.replace("xdp", "xdp.frags", 1),
                               flags=p.flags | BPF_F_XDP_HAS_FRAGS)
        for n, p in spec.programs.items()})


BCAST_DEVS = ("veth0", "veth1", "veth2", "veth3", "veth4", "veth5")


def frags_broadcast(mtu4: int = 9000) -> Scenario:
    """``xdp_redirect_bcast`` (frags-aware) on veth0 broadcasting frames of 1000,
    3000, 5000 and 9014 bytes to devmap slots veth2 and veth4 (``mtu4``: veth4's
    MTU, the others 9000). Linux 6.18, measured: with both valid the single-buffer
    frames go to both and each frags frame fails (-EOPNOTSUPP, veth0's
    ``rx_dropped``); with veth4 at 1500 veth2 is the frags frames' one valid target
    and gets every frame whole, veth4 the 1000-byte one."""
    pairs = vethlab.P3
    mac = {d: vethlab.lab_mac(pairs, d) for d in BCAST_DEVS}
    frames = tuple(("veth0", pk.udp_packet(b"bc", sport=2000 + i, dport=9000, size=size,
                                          src_mac=mac["veth1"], dst_mac=mac["veth0"]))
                   for i, size in enumerate((1000, 3000, 5000, 9014)))

    def setup(colls: Mapping[str, Collection], ifindex_of: Callable[[str], int]) -> None:
        for slot, d in enumerate(("veth2", "veth4")):
            colls["bcast"].maps["ports"][slot] = {"ifindex": ifindex_of(d)}

    return Scenario(
        f"frags_broadcast_{mtu4}", pairs=pairs,
        attach=(Attach("veth0", _frags_aware(vethlab.load_spec("redirect_bcast.o")),
                       "xdp_redirect_bcast", collection="bcast"),
                *(Attach(d, PASS_FRAGS, "xdp_pass", collection=f"pass@{d}")
                  for d in BCAST_DEVS[1:])),
        traffic=frames, setup=setup, maps=("rxcnt",), pass_unattached=False,
        links=tuple(LinkSpec(d, mtu=mtu4 if d == "veth4" else 9000) for d in BCAST_DEVS))


def _cpumap_setup(colls: Mapping[str, Collection], ifindex_of: Callable[[str], int]) -> None:
    coll = colls["redirect_cpu"]
    fd = vethlab.prog_fd(coll.programs["xdp_cpumap_filter"])
    for slot, cpu in enumerate((0, 1)):
        coll.maps["cpu_map"][cpu] = {"qsize": 64, "bpf_prog": {"fd": fd}}
        coll.maps["cpus_available"][slot] = cpu
    coll.maps["cpus_count"][0] = 2


def frags_cpumap() -> Scenario:
    """samples/redirect_cpu.o's ``xdp_redirect_cpu_proto`` loaded frags-aware on a 9000-MTU
    veth0: UDP to the CPU 1 entry, TCP to CPU 0, both entries running
    ``xdp_cpumap_filter``, which drops UDP to port 9. The xdp_frames keep their
    frags through the ring and the kthread's ``xdp_build_skb_from_frame``: veth0's
    stack gets them whole."""
    spec = _frags_aware(vethlab.load_spec("redirect_cpu.o"))
    mac = {d: vethlab.lab_mac(PAIRS[:1], d) for d in DEVS[:2]}
    kw: dict[str, Any] = {"src_mac": mac["veth1"], "dst_mac": mac["veth0"]}
    frames = tuple(("veth0", f) for size in SIZES for f in (
        pk.udp_packet(b"cpu", sport=3000, dport=53, size=size, **kw),
        pk.udp_packet(b"cpu", sport=3001, dport=9, size=size, **kw),
        pk.tcp_packet(b"cpu", sport=3002, size=size, **kw)))
    return Scenario(
        "frags_cpumap", pairs=PAIRS[:1],
        attach=(Attach("veth0", spec, "xdp_redirect_cpu_proto", collection="redirect_cpu"),
                Attach("veth1", PASS_FRAGS, "xdp_pass", collection="pass@veth1")),
        traffic=frames, setup=_cpumap_setup, maps=("rx_cnt",), pass_unattached=False,
        ordered=False, links=tuple(LinkSpec(d, mtu=9000) for d in DEVS[:2]))


DEVMAP_HASH_KEY = 7  # the devmap_hash key frags_devmap_hash_entry redirects to
# The entry program (not frags-aware): bpf_xdp_get_buff_len into bytes 10..11 and the
# head's length (data_end - data) into bytes 6..9 of the frame, then XDP_PASS.
_ENTRY_STAMP = """
r6 = r1
call bpf_xdp_get_buff_len
r2 = *(u32 *)(r6 + 0)
r3 = *(u32 *)(r6 + 4)
r4 = r2
r4 += 16
if r4 > r3 goto out
r5 = r3
r5 -= r2
*(u32 *)(r2 + 6) = r5
*(u16 *)(r2 + 10) = r0
out:
r0 = 2
exit
"""


def frags_devmap_hash_entry() -> Scenario:
    """A frags-aware program on a 9000-MTU veth0 redirecting every frame (1000, 5000,
    9014 bytes) through devmap_hash key 7 to veth2, whose entry program is not
    frags-aware and stamps the frame with its head's length and
    ``bpf_xdp_get_buff_len``. Linux 6.18 loads both (a devmap_hash's loads are not
    checked against its entries' programs) and, measured, runs the entry program
    on the multi-buffer frames' 3520-byte head (``bpf_xdp_get_buff_len`` the whole
    length), then sends them whole: veth3's stack gets every frame, 9014 bytes too."""
    ports = MapSpec("ports", int(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH), 4, 8, 4)
    red = ProgramSpec(name="red", section="xdp.frags", license="GPL",
                      insns=assemble(f"r1 = map[fd:0]\nr2 = {DEVMAP_HASH_KEY}\nr3 = 0\n"
                                     f"call bpf_redirect_map\nexit"),
                      flags=BPF_F_XDP_HAS_FRAGS, map_refs=(MapRef(0, "ports", "fd"),))
    entry = ProgramSpec(name="stamp", section="xdp/devmap", insns=assemble(_ENTRY_STAMP),
                        license="GPL", expected_attach_type=int(BpfAttachType.BPF_XDP_DEVMAP))
    spec = CollectionSpec(programs={"red": red, "stamp": entry}, maps={"ports": ports},
                          license="GPL", name="devmap_hash_entry")

    def setup(colls: Mapping[str, Collection], ifindex_of: Callable[[str], int]) -> None:
        c = colls["dh"]
        fd = vethlab.prog_fd(c.programs["stamp"])
        c.maps["ports"].handle.update(DEVMAP_HASH_KEY.to_bytes(4, "little"),
                                      ifindex_of("veth2").to_bytes(4, "little")
                                      + fd.to_bytes(4, "little", signed=True))

    mac = {d: vethlab.lab_mac(PAIRS, d) for d in DEVS}
    frames = tuple(("veth0", pk.udp_packet(b"dh", sport=2000 + i, dport=9000, size=size,
                                          src_mac=mac["veth1"], dst_mac=mac["veth0"]))
                   for i, size in enumerate(SIZES))
    return Scenario(
        "frags_devmap_hash_entry", pairs=PAIRS,
        attach=(Attach("veth0", spec, "red", collection="dh"),
                *(Attach(d, PASS_FRAGS, "xdp_pass", collection=f"pass@{d}")
                  for d in DEVS[1:])),
        traffic=frames, setup=setup, pass_unattached=False,
        links=tuple(LinkSpec(d, mtu=9000) for d in DEVS))


def frags_generic(frags: bool) -> Scenario:
    """samples/frags.o in generic mode on a 9000-MTU veth0 (no program elsewhere):
    frames of 1000, 5000 and 9014 bytes to each port. ``frags``: loaded as built
    (``xdp.frags``): a 9014-byte skb reaches it as a 3520-byte head and frags;
    else loaded as a plain ``xdp`` program: the skb linearised, the program sees
    every byte between ``data`` and ``data_end``. TX goes back out of veth0
    (``generic_xdp_tx``: veth1's stack), the devmap redirect out of veth2
    (veth3's stack)."""
    spec = vethlab.load_spec("frags.o")
    if not frags:
        spec = dataclasses.replace(spec, programs={
            n: dataclasses.replace(p, section="xdp", flags=p.flags & ~BPF_F_XDP_HAS_FRAGS)
            for n, p in spec.programs.items()})
    mac = {d: vethlab.lab_mac(PAIRS, d) for d in DEVS}
    frames = tuple(("veth0", pk.udp_packet(b"frags", sport=2000 + i, dport=port, size=size,
                                           src_mac=mac["veth1"], dst_mac=mac["veth0"]))
                   for port in PORTS for i, size in enumerate(SIZES))
    return Scenario(
        f"frags_generic_{'frags' if frags else 'linear'}", pairs=PAIRS,
        attach=(Attach("veth0", spec, "xdp_frags", mode="generic", collection="frags.o"),),
        traffic=frames, setup=_tx_port, maps=("stats",), pass_unattached=False,
        links=tuple(LinkSpec(d, mtu=9000) for d in DEVS))
