"""libbpf's object conventions and CO-RE against Linux.

``samples/mixed.o`` loads whole into the kernel (tc, tp_btf with its BTF attach
target and a CO-RE read of struct net_device, a tracepoint), with libbpf's map
sizes; ``samples/core.o`` gives the same verdicts and map contents on Linux as
on pyxdp with the BTF pyxdp ships (the per-packet comparison with the running
kernel's BTF is in test_samples_differential.py).
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pyxdp.btf.btf import Btf, BtfKind
from pyxdp.btf.vmlinux import SHIPPED_BTF
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import KernelError, PyxdpError, VerifierError
from pyxdp.kernel import netlink, possible_cpus, prog_get_info
from pyxdp.kernel.backend import KernelBackend
from pyxdp.net.packets import corpus, udp_packet
from pyxdp.spec import KfuncRef

pytestmark = pytest.mark.kernel

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
MIXED = SAMPLES / "mixed.o"
CORE = SAMPLES / "core.o"


def test_mixed_object_loads_whole_into_linux() -> None:
    with Collection.load(MIXED, "kernel") as coll:
        assert list(coll.programs) == ["xdp_count", "xdp_legacy", "tc_count", "tp_exception",
                                       "tp_redirect"]
        assert set(coll.skipped) == {"xdp_off", "unknown"}
        assert coll.maps["events_perf"].handle.max_entries == possible_cpus()
        assert coll.maps["events_rb"].handle.max_entries == 8192
        types = {n: prog_get_info(p.handle.fd).type for n, p in coll.programs.items()}
        # tp_exception loaded: its attach_btf_id named the btf_trace_xdp_exception typedef
        # (the verifier refuses tp_btf programs whose id names anything else).
        assert types == {"xdp_count": 6, "xdp_legacy": 6, "tc_count": 3, "tp_exception": 26,
                         "tp_redirect": 5}
        # The tc program runs under BPF_PROG_TEST_RUN too, on an skb.
        assert coll.programs["tc_count"].test_run(udp_packet(b"x" * 20)).retval == 0
        assert coll.programs["xdp_count"].test_run(udp_packet(b"x")).retval == 2
        c = coll.maps["counters"][0]
        assert (c["tc_packets"], c["xdp_packets"]) == (1, 1)


def _run(coll: Collection, pkt: bytes) -> tuple[object, ...]:
    try:
        r = coll.programs["xdp_core"].test_run(pkt)
    except PyxdpError as e:  # an input the kernel refuses must be refused alike
        return (type(e).__name__, getattr(e, "errno", None))
    return (r.retval, r.data_out)


def test_core_sample_with_the_shipped_btf_matches_linux() -> None:
    packets = corpus(3)
    random.Random(3).shuffle(packets)
    with Collection.load(CORE, "kernel") as kern, \
            Collection.load(CORE, core_btf=SHIPPED_BTF) as user:
        for name, pkt in packets[:200]:
            k = _run(kern, pkt)
            assert _run(user, pkt) == k, name
        assert user.maps["core_stats"][0] == kern.maps["core_stats"][0]


def test_kernel_backend_names_a_missing_kfunc() -> None:
    with Collection.load(MIXED, "kernel") as coll:
        backend = coll.backend
        assert isinstance(backend, KernelBackend)
        spec = coll.programs["xdp_count"].spec
        bad = spec.copy(kfuncs=(KfuncRef(0, "pyxdp_no_such_kfunc"),))
        with pytest.raises(PyxdpError, match="extern \\(func ksym\\) 'pyxdp_no_such_kfunc': "
                           "not found in kernel BTF"):
            backend.load_program(bad, {n: m.handle for n, m in coll.maps.items()})


def test_a_kfunc_nobody_has_fails_as_on_linux() -> None:
    """An extern kfunc that is in neither the kernel's BTF nor pyxdp (an undeclared
    function clang took for one: a kernel-tree macro such as unlikely() missing from a
    sample's headers) fails the load with libbpf's line on both backends."""
    spec = load_collection_spec(MIXED)
    calls = spec.programs.copy()
    calls["xdp_count"] = spec.programs["xdp_count"].copy(kfuncs=(KfuncRef(3, "unlikely"),))
    said = []
    for backend in ("kernel", "userspace"):
        with pytest.raises(PyxdpError) as e:
            Collection(replace(spec, programs=calls), backend)
        said.append(str(e.value))
    assert said[0] == said[1] == ("program 'xdp_count': extern (func ksym) 'unlikely': "
                                  "not found in kernel BTF")


def test_a_kfunc_declared_with_another_prototype_fails_as_on_linux() -> None:
    """libbpf refuses a kfunc extern whose declared prototype is incompatible with the
    kernel's (bpf_core_types_are_compat; here one parameter where the kernel's has
    three), before BPF_PROG_LOAD, whose verifier would take the call: both backends
    with the same line, against the running kernel's BTF."""
    spec = load_collection_spec(SAMPLES / "bits_iter.o")
    assert spec.btf is not None
    btf = spec.btf
    fid = btf.find("bpf_iter_bits_new", BtfKind.FUNC) or 0
    types = list(btf.types)
    types[fid] = replace(types[fid], size_type=types[btf.find("bpf_iter_bits_destroy",
                                                               BtfKind.FUNC) or 0].size_type)
    bad = replace(spec, btf=Btf(types=tuple(types), strings=btf.strings))
    said = []
    for backend in ("kernel", "userspace"):
        with pytest.raises(PyxdpError) as e:
            Collection(bad, backend)
        said.append(str(e.value))
    assert said[0] == said[1]
    assert said[0].startswith("program 'xdp_bits': extern (func ksym) 'bpf_iter_bits_new': "
                              "func_proto [")
    assert "incompatible with vmlinux [" in said[0]


def _tags(path: Path, **backend: object) -> dict[str, str]:
    spec = load_collection_spec(path)
    with Collection(spec, KernelBackend(spec, **backend)) as coll:  # type: ignore[arg-type]
        return {n: p.handle.tag for n, p in coll.programs.items() if p.spec.core_relos}


@pytest.mark.parametrize("path", [CORE, MIXED], ids=lambda p: p.name)
def test_core_relocations_equal_the_kernels_own(path: Path) -> None:
    """The kernel applies CO-RE itself when BPF_PROG_LOAD carries the records: the
    program tag (a hash of the instructions after relocation, map fds masked) of
    pyxdp's relocation equals the kernel's."""
    ours, kernels = _tags(path), _tags(path, core_in_kernel=True)
    assert ours and ours == kernels


def test_a_different_layout_gives_a_different_tag(tmp_path: Path) -> None:
    btf = Btf.parse(SHIPPED_BTF.read_bytes())
    tid = btf.find("iphdr", BtfKind.STRUCT)
    assert tid is not None
    t = btf.types[tid]
    moved = tuple(replace(m, bit_offset=m.bit_offset + 8) if m.name == "ttl" else m
                  for m in t.members)
    target = tmp_path / "moved_ttl.btf"
    target.write_bytes(btf.with_types({tid: replace(t, members=moved)}).encode())
    assert _tags(CORE, core_btf=target) != _tags(CORE, core_in_kernel=True)


RX_META = SAMPLES / "rx_meta.o"


def test_linux_wants_metadata_kfuncs_in_a_device_bound_program() -> None:
    with pytest.raises(VerifierError, match="metadata kfuncs require device-bound program"):
        Collection.load(RX_META, "kernel")


def test_veth_metadata_as_measured() -> None:
    """A program bound to a veth: test_run refused; frames from the peer get the skb's
    hash, a zero timestamp and no VLAN tag (the tag stays in the data)."""
    ns = f"pyxdp-meta-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        # No IPv6: the devices would send router solicitations and MLD reports of their own.
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                        "net.ipv6.conf.all.disable_ipv6=1",
                        "net.ipv6.conf.default.disable_ipv6=1"], check=True)
        ip = ["ip", "-n", ns, "link"]
        subprocess.run([*ip, "add", "va", "type", "veth", "peer", "name", "vb"], check=True)
        for dev in ("va", "vb"):
            subprocess.run([*ip, "set", dev, "up"], check=True)
        with netlink.netns(ns):
            spec = load_collection_spec(RX_META)
            ifindex = netlink.ifindex_of("va")
            spec.programs["xdp_rx_meta"] = spec.programs["xdp_rx_meta"].bound_to(ifindex)
            with Collection(spec, "kernel") as coll:
                prog = coll.programs["xdp_rx_meta"]
                with pytest.raises(KernelError, match="EINVAL"):
                    prog.test_run(udp_packet(b"x"))
                netlink.xdp_attach("va", prog.handle, mode="native")
                try:
                    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
                        s.bind(("vb", 0))
                        s.send(udp_packet(b"hello"))
                        r = coll.maps["results"][0]
                        for _ in range(100):
                            if r["packets"]:
                                break
                            time.sleep(0.01)
                            r = coll.maps["results"][0]
                finally:
                    netlink.xdp_detach("va", mode="native")
        assert (r["packets"], r["ts_ret"], r["timestamp"]) == (1, 0, 0)
        assert (r["hash_ret"], r["rss_type"], r["vlan_ret"]) == (0, 8, -61)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
