"""libbpf's object conventions and CO-RE on pyxdp's userspace backend (no root).

``samples/mixed.o`` holds XDP programs beside tc and tracing programs, a legacy
section name, an unknown one and maps libbpf sizes; ``samples/core.o`` reads
packets through struct layouts that are only right after CO-RE relocation.
tests/kernel/test_objects_kernel.py loads both into Linux.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pyxdp.btf.btf import Btf, BtfKind
from pyxdp.btf.core import CoreRelocationError, essential_name
from pyxdp.btf.vmlinux import SHIPPED_BTF, XDP_TYPE_ROOTS, BtfIndex, core_target
from pyxdp.cli.main import main
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import NotSupportedError, PyxdpError
from pyxdp.net.packets import tcp_packet, udp_packet
from pyxdp.spec import BPF_XDP, KfuncRef, MapSpec, libbpf_map_defaults, ringbuf_size
from pyxdp.uapi.bpf import BpfMapType, XdpAction

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
MIXED = SAMPLES / "mixed.o"
CORE = SAMPLES / "core.o"


def test_every_program_is_parsed_with_its_libbpf_type() -> None:
    spec = load_collection_spec(MIXED)
    got = {n: (p.prog_type, p.section, p.attach_to, p.autoload)
           for n, p in spec.programs.items()}
    assert got == {
        "xdp_count": ("xdp", "xdp", "", True),
        "xdp_legacy": ("xdp", "xdp_devmap/legacy", "", True),
        "xdp_off": ("xdp", "xdp", "", False),
        "tc_count": ("sched_cls", "tc", "", True),
        "tp_exception": ("tracing", "tp_btf/xdp_exception", "xdp_exception", True),
        "tp_redirect": ("tracepoint", "tracepoint/xdp/xdp_redirect", "", True),
        "unknown": ("unspec", "pyxdp_unknown", "", True),
    }
    # libbpf 1.x reads no "xdp_devmap/" prefix: a plain XDP program.
    assert spec.programs["xdp_legacy"].expected_attach_type == BPF_XDP
    # The tracing program's CO-RE read of net_device->ifindex is kept for the kernel.
    assert [r.access for r in spec.programs["tp_exception"].core_relos] == ["0:0"]


def test_userspace_skips_what_it_cannot_run_like_autoload_false() -> None:
    with Collection.load(MIXED, nr_cpus=3) as coll:
        assert list(coll.programs) == ["xdp_count", "xdp_legacy"]
        assert set(coll.skipped) == {"xdp_off", "tc_count", "tp_exception", "tp_redirect",
                                     "unknown"}
        # libbpf's map defaults: a perf event array slot per CPU, ring buffers rounded.
        assert coll.maps["events_perf"].handle.max_entries == 3
        assert coll.maps["events_rb"].spec.max_entries == 8192
        res = coll.programs["xdp_count"].test_run(udp_packet(b"abc"))
        assert res.retval == XdpAction.XDP_PASS and res.fault is None
        assert coll.maps["counters"][0]["xdp_packets"] == 1
        assert coll.programs["xdp_legacy"].test_run(udp_packet()).retval == XdpAction.XDP_DROP
        with pytest.raises(NotSupportedError, match=r"^program 'tc_count' \(section 'tc', "
                           r"sched_cls\) is not loaded on the userspace backend: .*kernel"):
            coll["tc_count"]
        with pytest.raises(NotSupportedError, match="tp_btf/xdp_exception"):
            coll.program("tp_btf/xdp_exception")
        with pytest.raises(NotSupportedError, match="knows no program type"):
            coll.program("unknown")


def test_userspace_refuses_a_kfunc_call_by_name() -> None:
    """A kfunc extern neither the kernel's BTF nor pyxdp has fails as libbpf fails it,
    before the verifier (verified or not)."""
    spec = load_collection_spec(MIXED)
    prog = spec.programs["xdp_count"]
    calls = spec.programs.copy()
    calls["xdp_count"] = prog.copy(kfuncs=(KfuncRef(3, "bpf_no_such_kfunc"),))
    for verify in (True, False):
        with pytest.raises(PyxdpError, match="program 'xdp_count': extern \\(func ksym\\) "
                           "'bpf_no_such_kfunc': not found in kernel BTF"):
            Collection(replace(spec, programs=calls), verify=verify)


def _retyped(btf: Btf, func: str, like: str) -> Btf:
    """``btf`` with kfunc extern ``func`` declared with ``like``'s prototype."""
    proto = btf.types[btf.find(like, BtfKind.FUNC) or 0].size_type
    fid = btf.find(func, BtfKind.FUNC) or 0
    types = list(btf.types)
    types[fid] = replace(types[fid], size_type=proto)
    return Btf(types=tuple(types), strings=btf.strings)


def test_a_kfunc_declared_with_another_prototype_fails_as_libbpf_fails_it(
        tmp_path: Path) -> None:
    """libbpf compares a kfunc extern's declared prototype with the kernel's
    (bpf_core_types_are_compat) and refuses the object when they differ (here in the
    number of parameters), though the verifier, which checks the call against the
    kernel's own prototype, would take it. The object's own BTF stands for the
    kernel's."""
    spec = load_collection_spec(SAMPLES / "bits_iter.o")
    assert spec.btf is not None
    kernel = tmp_path / "kernel.btf"
    kernel.write_bytes(spec.btf.encode())
    with Collection(spec, core_btf=kernel) as coll:  # as declared: compatible
        assert coll.programs["xdp_bits"].test_run(udp_packet()).fault is None
    bad = replace(spec, btf=_retyped(spec.btf, "bpf_iter_bits_destroy", "bpf_iter_bits_new"))
    for verify in (True, False):
        with pytest.raises(PyxdpError, match=r"^program 'xdp_bits': extern \(func ksym\) "
                           r"'bpf_iter_bits_destroy': func_proto \[\d+\] incompatible with "
                           r"vmlinux \[\d+\]$"):
            Collection(bad, core_btf=kernel, verify=verify)


def test_loader_picks_an_xdp_program_and_names_the_type_of_others() -> None:
    from pyxdp.cli.loader import LoaderError, _choose

    spec = load_collection_spec(MIXED)
    assert _choose(spec, "mixed.o", None, None).name == "xdp_count"
    with pytest.raises(LoaderError, match="tc_count .* is a sched_cls program, not XDP"):
        _choose(spec, "mixed.o", None, "tc_count")


def test_libbpf_map_defaults() -> None:
    assert [ringbuf_size(n) for n in (0, 1, 4096, 5000, 8192, 12288)] == \
        [0, 4096, 4096, 8192, 8192, 16384]
    perf = MapSpec("p", int(BpfMapType.BPF_MAP_TYPE_PERF_EVENT_ARRAY), 4, 4, 0)
    assert libbpf_map_defaults(perf, 6).max_entries == 6
    assert libbpf_map_defaults(perf.copy(max_entries=2), 6).max_entries == 2
    outer = MapSpec("o", int(BpfMapType.BPF_MAP_TYPE_ARRAY_OF_MAPS), 4, 4, 1, inner=perf)
    inner = libbpf_map_defaults(outer, 6).inner
    assert inner is not None and inner.max_entries == 6


def test_cli_lists_every_program_and_refuses_one_it_cannot_run(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prog", "show", str(MIXED)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "tc_count: section tc  type sched_cls  insns 12  license GPL  maps counters  " \
           "(kernel only)" in out
    assert any(line.startswith("xdp_off: section xdp  type xdp") and "(autoload off)" in line
               for line in out)
    assert "map events_perf: perf_event_array  key 4B  value 4B  max_entries 0 " \
           "(possible CPUs)" in out
    assert main(["prog", "run", str(MIXED), "-s", "tc_count", "--data-in", "/dev/null"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "program 'tc_count'" in err


# -- CO-RE ---------------------------------------------------------------------------------

PKT = udp_packet(b"x", dport=53)
CORE_EXPECTED = {"saddr": int.from_bytes(PKT[26:30], "little"),
                 "daddr": int.from_bytes(PKT[30:34], "little"), "version": 4, "ihl": 5,
                 "ttl": 64, "has_no_such_member": 0, "iphdr_size": 20,
                 "has_no_such_type": 0, "has_no_such_action": 0, "daddr_size": 4,
                 "mac_src_first": 2}


@pytest.mark.parametrize("target", ["shipped", "default"])
def test_core_sample_reads_the_kernel_layout(target: str) -> None:
    btf = SHIPPED_BTF if target == "shipped" else None
    with Collection.load(CORE, core_btf=btf) as coll:
        prog = coll.programs["xdp_core"]
        assert prog.test_run(udp_packet(b"x", dport=9)).retval == XdpAction.XDP_DROP
        assert prog.test_run(PKT).retval == XdpAction.XDP_PASS
        assert prog.test_run(tcp_packet(b"x")).retval == XdpAction.XDP_PASS
        st = coll.maps["core_stats"][0]
    assert (st["packets"], st["udp"], st["sport"], st["dport"]) == (3, 2, 1234, 53)
    assert {k: st[k] for k in CORE_EXPECTED} == CORE_EXPECTED


def _shipped_without(struct_name: str, member: str) -> Btf:
    btf = Btf.parse(SHIPPED_BTF.read_bytes())
    tid = btf.find(struct_name, BtfKind.STRUCT)
    assert tid is not None
    t = btf.types[tid]
    members = tuple(m for m in t.members if m.name != member)
    return btf.with_types({tid: replace(t, members=members, vlen=len(members))})


def test_core_mismatch_names_the_relocation_and_type(tmp_path: Path) -> None:
    target = tmp_path / "no_ttl.btf"
    target.write_bytes(_shipped_without("iphdr", "ttl").encode())
    with pytest.raises(CoreRelocationError) as e:
        Collection.load(CORE, core_btf=target)
    msg = str(e.value)
    assert "prog 'xdp_core': relo #" in msg and "<byte_off>" in msg
    assert "struct iphdr___core.ttl (0:1 @ offset 1)" in msg
    assert "no match for struct iphdr___core" in msg and str(target) in msg


def test_essential_names() -> None:
    assert essential_name("xdp_md___core") == "xdp_md"
    assert essential_name("a___b___c") == "a___b"
    assert essential_name("xdp_md") == "xdp_md"
    assert essential_name("x____y") == "x____y"  # four underscores are no flavor


def test_lazy_index_agrees_with_a_full_parse() -> None:
    blob = SHIPPED_BTF.read_bytes()
    full, lazy = Btf.parse(blob), BtfIndex(blob, str(SHIPPED_BTF))
    assert len(lazy) == len(full)
    for t in full.types[1:]:
        assert lazy.type_by_id(t.id) == t
        if t.name:
            assert lazy.find_all(t.name) == full.find_all(t.name)
    for name, kind in XDP_TYPE_ROOTS:
        assert lazy.find(name, kind) is not None
    assert core_target(SHIPPED_BTF).path == str(SHIPPED_BTF)
