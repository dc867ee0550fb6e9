"""``pyxdp prog list|show`` and ``pyxdp map show|dump|lookup|update|delete`` on the kernel's
objects (by id, pin and name, bpftool's output), ``pyxdp features`` from the netdev
genetlink family, and one-line errors without root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyxdp.cli.main import main
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"


@pytest.fixture
def loaded() -> Iterator[Collection]:
    with Collection(load_collection_spec(SAMPLES / "xdp1.o"), "kernel") as coll:
        yield coll


@pytest.mark.kernel
def test_prog_list_and_show_by_id_pin_and_name(loaded: Collection, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from pyxdp.kernel.link import obj_pin
    prog = loaded.programs["xdp_prog1"].handle
    rxcnt = loaded.maps["rxcnt"].handle
    assert main(["prog", "list"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith(f"{prog.id}: "))
    assert line == f"{prog.id}: xdp  name xdp_prog1  tag {prog.tag}  gpl"
    assert main(["-j", "prog", "show", "id", str(prog.id)]) == 0
    [doc] = json.loads(capsys.readouterr().out)
    assert doc["id"] == prog.id and doc["type"] == "xdp" and doc["name"] == "xdp_prog1"
    assert doc["tag"] == prog.tag and doc["jited"] is True and doc["bytes_jited"] > 0
    assert doc["map_ids"] == [rxcnt.id]
    bpffs = tmp_path / "bpffs"  # a private bpf filesystem; the host's is left alone
    bpffs.mkdir()
    subprocess.run(["mount", "-t", "bpf", "bpf", str(bpffs)], check=True, timeout=60)
    try:
        obj_pin(prog.fd, str(bpffs / "prog"))
        obj_pin(rxcnt.fd, str(bpffs / "rxcnt"))
        assert main(["-j", "prog", "show", "pinned", str(bpffs / "prog")]) == 0
        assert json.loads(capsys.readouterr().out)[0]["id"] == prog.id
        assert main(["-j", "map", "show", "pinned", str(bpffs / "rxcnt")]) == 0
        assert json.loads(capsys.readouterr().out)[0]["id"] == rxcnt.id
        assert main(["map", "show", "pinned", str(bpffs / "prog")]) == 2  # not a map
        assert "is a pinned prog, not a map" in capsys.readouterr().err
    finally:
        subprocess.run(["umount", str(bpffs)], check=False, timeout=60)
    assert main(["-j", "prog", "show", "name", "xdp_prog1"]) == 0
    assert prog.id in [d["id"] for d in json.loads(capsys.readouterr().out)]


@pytest.mark.kernel
def test_map_lookup_update_dump_delete(loaded: Collection,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    from pyxdp.kernel import possible_cpus
    ncpu = possible_cpus()
    mid = str(loaded.maps["rxcnt"].handle.id)
    assert main(["map", "show", "id", mid]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{mid}: percpu_array  name rxcnt  flags 0x0",
        f"\tkey 4B  value 8B  max_entries 256  btf_id {loaded.maps['rxcnt'].handle.btf_id}"]
    assert main(["map", "update", "id", mid, "key", "17", "0", "0", "0", "value", "hex",
                 "05", "00", "00", "00", "00", "00", "00", "00"]) == 0
    assert main(["map", "lookup", "id", mid, "key", "0x11", "0", "0", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "key: 11 00 00 00"
    assert out[1] == "\tvalue (CPU 00): 05 00 00 00 00 00 00 00"
    fmt = json.loads(out[-1].split("formatted: ", 1)[1])  # BTF-typed: __u32 key, __u64 value
    assert fmt == {"key": 17, "values": [{"cpu": c, "value": 5} for c in range(ncpu)]}
    assert main(["-j", "map", "dump", "id", mid]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert len(entries) == 256
    assert entries[17]["key"] == ["0x11", "0x00", "0x00", "0x00"]
    assert entries[17]["values"][0]["value"][0] == "0x05"
    # An array element cannot be deleted: the kernel's EINVAL, in one line.
    assert main(["map", "delete", "id", mid, "key", "hex", "11000000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "EINVAL" in err
    assert main(["map", "lookup", "id", mid, "key", "1", "2"]) == 2
    assert "the key has 2 bytes; the map's key has 4" in capsys.readouterr().err


@pytest.mark.kernel
def test_map_by_name_and_object_files_keep_working(loaded: Collection,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-j", "map", "show", "name", "rxcnt"]) == 0
    ids = [d["id"] for d in json.loads(capsys.readouterr().out)]
    assert loaded.maps["rxcnt"].handle.id in ids
    assert main(["map", "dump", str(SAMPLES / "xdp1.o"), "rxcnt"]) == 0
    assert "rxcnt" in json.loads(capsys.readouterr().out)


@pytest.mark.kernel
def test_features_of_a_veth_from_netdev_genetlink(capsys: pytest.CaptureFixture[str]) -> None:
    from pyxdp.kernel.netlink import netns
    ns = f"pyxdp-feat-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "add", "va", "type", "veth", "peer", "name",
                        "vb"], check=True)
        with netns(ns):
            assert main(["features", "va"]) == 0
            text = capsys.readouterr().out
            assert main(["-j", "features", "va"]) == 0
            doc = json.loads(capsys.readouterr().out)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    # veth_set_xdp_features: no NDO_XMIT while the peer has no program nor GRO.
    assert "NETDEV_XDP_ACT_BASIC:" in text and "NETDEV_XDP_ACT_NDO_XMIT:" in text
    assert doc["source"] == "kernel" and doc["xdp_features"]["NETDEV_XDP_ACT_BASIC"]
    assert doc["xdp_features"]["NETDEV_XDP_ACT_REDIRECT"]
    assert not doc["xdp_features"]["NETDEV_XDP_ACT_NDO_XMIT"]
    assert not doc["xdp_features"]["NETDEV_XDP_ACT_HW_OFFLOAD"]
    # veth_xdp_metadata_ops implements all three RX metadata kfuncs.
    assert doc["xdp_rx_metadata_features"] == ["NETDEV_XDP_RX_METADATA_TIMESTAMP",
                                               "NETDEV_XDP_RX_METADATA_HASH",
                                               "NETDEV_XDP_RX_METADATA_VLAN_TAG"]
    # The same question about pyxdp's veth gives the same XDP flags.
    assert main(["-j", "features", "--pyxdp", "veth0"]) == 0
    mine = json.loads(capsys.readouterr().out)
    assert mine["source"] == "pyxdp"
    for flag in ("NETDEV_XDP_ACT_BASIC", "NETDEV_XDP_ACT_REDIRECT", "NETDEV_XDP_ACT_NDO_XMIT",
                 "NETDEV_XDP_ACT_HW_OFFLOAD"):
        assert mine["xdp_features"][flag] == doc["xdp_features"][flag], flag


def test_features_of_an_unknown_interface_is_one_line(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    assert main(["features", "nosuchif0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pyxdp: features: ") and "nosuchif0" in err
    assert main(["features", "--pyxdp", "eth9"]) == 2
    assert "no pyxdp device 'eth9'" in capsys.readouterr().err


def _as_nobody(argv: list[str]) -> tuple[int, str]:
    """``main(argv)`` in a child that dropped to nobody (as root), else as this user."""
    from pyxdp.cli.main import build_parser
    build_parser().format_help()  # lazy imports done while this interpreter is readable
    from pyxdp.cli import bpftool  # noqa: F401
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 70
        try:
            os.close(rfd)
            sys.stderr = open(wfd, "w", closefd=False)  # noqa: SIM115
            if os.geteuid() == 0:
                os.setgroups([])
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
            code = main(argv)
            sys.stderr.flush()
        finally:
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as r:
        err = r.read().decode()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), err


@pytest.mark.parametrize("argv", [["prog", "list"], ["map", "dump", "id", "1"],
                                  ["map", "show", "name", "rxcnt"]])
def test_without_root_the_kernel_commands_say_so_in_one_line(argv: list[str]) -> None:
    code, err = _as_nobody(argv)
    assert code == 2, err
    assert err.count("\n") == 1 and "needs root" in err, err
