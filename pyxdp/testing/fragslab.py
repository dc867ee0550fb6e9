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

* :func:`frags_generic`: ``samples/frags.o`` attached in generic (skb) mode,
  frags-aware or loaded as a plain ``SEC("xdp")`` program: skbs above 3520
  bytes meet ``netif_skb_check_for_xdp`` (a head and frags from
  ``skb_cow_data_for_xdp``, or the skb linearised).

``tests/kernel/test_frags_kernel.py`` compares both backends;
``tests/test_frags.py`` the native poll loop with the Python path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from pyxdp.asm.assembler import assemble
from pyxdp.collection import Collection
from pyxdp.net import packets as pk
from pyxdp.spec import BPF_F_XDP_HAS_FRAGS, CollectionSpec, ProgramSpec
from pyxdp.testing import vethlab
from pyxdp.testing.vethlab import Attach, LinkSpec, Scenario

__all__ = ["DEVS", "PASS_FRAGS", "PORTS", "SIZES", "frags_cpumap", "frags_generic",
           "frags_veth"]

DEVS = ("veth0", "veth1", "veth2", "veth3")
PAIRS = (("veth0", "veth1"), ("veth2", "veth3"))
SIZES = (1000, 5000, 9014)
PORTS = range(9001, 9007)
PASS_FRAGS = CollectionSpec(
    programs={"xdp_pass": ProgramSpec(name="xdp_pass", section="xdp.frags",
                                      insns=assemble("r0 = 2\nexit"), license="GPL",
                                      flags=BPF_F_XDP_HAS_FRAGS)},
    maps={}, license="GPL", name="xdp_pass_frags")


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
    spec = vethlab.load_spec("redirect_cpu.o")
    # Linux 6.18 refuses (EINVAL) to load programs that share a map unless they
    # agree on frags: every program of the object is loaded frags-aware.
    spec = dataclasses.replace(spec, programs={
        n: dataclasses.replace(p, section=p.section.replace("xdp", "xdp.frags", 1),
                               flags=p.flags | BPF_F_XDP_HAS_FRAGS)
        for n, p in spec.programs.items()})
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
