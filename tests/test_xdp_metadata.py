"""XDP RX metadata kfuncs on pyxdp's devices (samples/rx_meta.o; Linux's side is in
tests/kernel/test_objects_kernel.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import InvalidProgram, KernelError, VerifierError
from pyxdp.net.netdevice import Host
from pyxdp.net.packets import udp_packet
from pyxdp.net.xdp import XdpBuff
from pyxdp.net.xdp_metadata import XdpMetadataOps

RX_META = Path(__file__).resolve().parents[1] / "samples" / "rx_meta.o"
EOPNOTSUPP, ENODATA = -95, -61


def test_metadata_kfuncs_need_a_device_bound_program() -> None:
    # Linux's verifier refuses it (add_kfunc_call); unverified, the loader does.
    with pytest.raises(VerifierError, match="metadata kfuncs require device-bound program"):
        Collection.load(RX_META)
    with pytest.raises(InvalidProgram, match="metadata kfuncs require device-bound program"):
        Collection.load(RX_META, verify=False)


def _length(xdp: XdpBuff) -> int:
    return xdp.data_end - xdp.data


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_device_supplies_metadata_per_frame(engine: str) -> None:
    spec = load_collection_spec(RX_META)
    with Host() as host:
        eth0 = host.add_device("eth0")
        # A driver with a hash for every frame and a timestamp for long ones only,
        # and no VLAN op at all.
        eth0.xdp_metadata_ops = XdpMetadataOps(
            rx_timestamp=lambda xdp: 10**9 + _length(xdp) if _length(xdp) > 50 else None,
            rx_hash=lambda xdp: (0xABCD0000 + _length(xdp), 0x29))
        bound = spec.copy()
        bound.programs["xdp_rx_meta"] = spec.programs["xdp_rx_meta"].bound_to(eth0.ifindex)
        host.backend.engine = engine
        coll = host.load(bound)
        prog = coll.programs["xdp_rx_meta"]
        with pytest.raises(KernelError, match="EINVAL"):  # as Linux: no test_run
            prog.test_run(udp_packet(b"x"))
        eth0.attach_xdp(prog)
        got = []
        for frame in (udp_packet(b"x" * 20), udp_packet(b"x")):
            eth0.receive([frame])
            host.run()
            r = coll.maps["results"][0]
            got.append((r["ts_ret"], r["timestamp"], r["hash_ret"], r["hash"], r["rss_type"],
                        r["vlan_ret"]))
        assert got == [(0, 10**9 + 62, 0, 0xABCD0000 + 62, 0x29, EOPNOTSUPP),
                       (ENODATA, 0, 0, 0xABCD0000 + 43, 0x29, EOPNOTSUPP)]
        assert eth0.stats.rx_packets == 2 and not eth0.faults


def test_vlan_tag_is_stored_as_the_kernel_stores_it() -> None:
    spec = load_collection_spec(RX_META)
    with Host() as host:
        eth0 = host.add_device("eth0")
        eth0.xdp_metadata_ops = XdpMetadataOps(rx_vlan_tag=lambda xdp: (0x88A8, 42))
        bound = spec.copy()
        bound.programs["xdp_rx_meta"] = spec.programs["xdp_rx_meta"].bound_to(eth0.ifindex)
        coll = host.load(bound)
        eth0.attach_xdp(coll.programs["xdp_rx_meta"])
        eth0.receive([udp_packet(b"x")])
        host.run()
        r = coll.maps["results"][0]
        # __be16 vlan_proto: network order in memory, decoded by its BTF type to 0x88a8.
        assert (r["vlan_ret"], r["vlan_proto"], r["vlan_tci"]) == (0, 0x88A8, 42)
        assert (r["ts_ret"], r["hash_ret"]) == (EOPNOTSUPP, EOPNOTSUPP)
