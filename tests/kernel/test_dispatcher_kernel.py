"""libxdp's dispatcher: pyxdp's chain against Linux's.

The same chains of ``samples/chain.o`` (see chain.c: program k returns payload
byte k) run on the same packets under BPF_PROG_TEST_RUN in Linux and on
pyxdp: verdicts, output frames and the per-program run counts must agree.
Linux 6.18 here refuses ``BPF_PROG_TYPE_EXT`` with EPERM (as it refuses
fentry), so :class:`KernelDispatcher` runs the chain linked into one program
there (``mode == "linked"``; libxdp would fall back to a single program);
the frags rule is checked where Linux enforces it, attaching to a veth whose
peer's MTU is above a page, on Linux and on pyxdp's veth. ``pyxdp load IFACE
a.o b.o`` / ``status`` / ``unload`` run in a namespace of their own with a
bpffs of their own.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyxdp.cli.loader import cmd_load, cmd_status, cmd_unload
from pyxdp.collection import Collection
from pyxdp.errors import KernelError
from pyxdp.kernel.dispatcher import KernelDispatcher
from pyxdp.kernel.netlink import NetlinkError, netns, xdp_attach, xdp_detach, xdp_query
from pyxdp.net.netdevice import Host
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import xdp_dispatcher
from pyxdp.spec import BPF_F_XDP_HAS_FRAGS

pytestmark = pytest.mark.kernel

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CHAIN = SAMPLES / "chain.o"
NS = f"pyxdp-disp-{os.getpid()}"
CHAINS = [
    ["chain_last", "chain_frags", "chain_mod", "chain_b", "chain_first"],
    ["chain_last", "chain_first"],
    ["chain_b", "chain_mod"],
    ["chain_first"],
]


def _packets(n: int, seed: int) -> list[bytes]:
    """Payloads whose first bytes are the programs' verdicts: actions, no actions, shifts
    that wrap; byte 8 is incremented by chain_mod, byte 9 0xAA makes chain_b shrink."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        size = rnd.choice([0, 1, 3, 5, 10, 12, 30])
        payload = bytearray(rnd.choice([0, 1, 2, 2, 2, 3, 4, 5, 31, 33, 34, 66])
                            for _ in range(size))
        if size > 9 and rnd.random() < 0.5:
            payload[9] = 0xAA
        out.append(udp_packet(bytes(payload)))
    return out


@pytest.mark.parametrize("names", CHAINS, ids=lambda n: "+".join(n))
def test_chain_matches_linux(names: list[str]) -> None:
    with Collection.load(CHAIN, "kernel") as kc, Collection.load(CHAIN, engine="interp") as uc:
        with KernelDispatcher([kc.programs[n] for n in names]) as kd:
            assert kd.mode in ("freplace", "linked")
            ud = uc.backend.register(  # type: ignore[attr-defined]
                xdp_dispatcher([(uc.programs[n].handle, uc.programs[n].run_config)  # type: ignore[misc]
                                for n in names]))
            assert [p.name for p in kd.programs] == [p.spec.name for p, _ in ud.chain]
            assert kd.frags == bool(ud.spec.flags & BPF_F_XDP_HAS_FRAGS)
            for pkt in _packets(120, seed=len(names)):
                k = kd.test_run(pkt)
                u = uc.backend.test_run(ud, pkt)
                assert (u.retval, u.data_out) == (k.retval, k.data_out), pkt.hex()
            assert [uc.maps["hits"][i] for i in range(8)] == \
                [kc.maps["hits"][i] for i in range(8)]


@pytest.fixture(scope="module")
def ns() -> Iterator[str]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 to create a network namespace")
    res = subprocess.run(["ip", "netns", "add", NS], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot create a network namespace: {res.stderr.strip()}")
    try:
        for cmd in (["link", "add", "veth0", "type", "veth", "peer", "name", "veth1"],
                    ["link", "set", "veth0", "up"], ["link", "set", "veth1", "up"]):
            subprocess.run(["ip", "-n", NS, *cmd], check=True, capture_output=True)
        yield NS
    finally:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)


def test_frags_rule_where_linux_enforces_it(ns: str) -> None:
    # veth refuses a program that is not frags-aware while its peer's MTU is above
    # what one page holds (ERANGE, "Peer MTU is too large to set XDP"); pyxdp's veth too.
    subprocess.run(["ip", "-n", ns, "link", "set", "veth1", "mtu", "9000"], check=True)
    try:
        with netns(ns), Collection.load(CHAIN, "kernel") as kc, Host(engine="interp") as host:
            v0, v1 = host.veth("veth0", "veth1")
            v1.mtu = 9000
            uc = host.load(CHAIN)
            for names, frags in ((["chain_frags", "chain_last"], True),
                                 (["chain_frags", "chain_b"], False)):
                with KernelDispatcher([kc.programs[n] for n in names]) as kd:
                    assert kd.frags is frags
                    if frags:
                        xdp_attach("veth0", kd.fd)  # type: ignore[arg-type]
                        assert xdp_query("veth0").programs["native"] == kd.id
                        xdp_detach("veth0")
                        v0.attach_xdp_multi([uc.programs[n] for n in names])
                        v0.detach_xdp()
                    else:
                        with pytest.raises(NetlinkError) as ei:
                            xdp_attach("veth0", kd.fd)  # type: ignore[arg-type]
                        assert ei.value.errno == errno.ERANGE
                        with pytest.raises(KernelError) as ue:
                            v0.attach_xdp_multi([uc.programs[n] for n in names])
                        assert ue.value.errno == errno.ERANGE
                        assert v0.xdp_query()["mode"] == "none"
    finally:
        subprocess.run(["ip", "-n", ns, "link", "set", "veth1", "mtu", "1500"], check=True)


def test_cli_load_status_unload_a_chain(ns: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    bpffs = tmp_path / "bpffs"
    bpffs.mkdir()
    if subprocess.run(["mount", "-t", "bpf", "bpf", str(bpffs)]).returncode != 0:
        pytest.skip("cannot mount a bpf filesystem")
    monkeypatch.setenv("LIBXDP_BPFFS", str(bpffs))
    try:
        with netns(ns):
            assert cmd_load("veth0", [str(CHAIN), str(SAMPLES / "xdp1.o")]) == 0
            out = capsys.readouterr().out
            assert "xdp_dispatcher" in out and "prog0: chain_first" in out
            assert "prog1: xdp_prog1" in out
            disp = xdp_query("veth0").programs["native"]
            assert sorted(os.listdir(bpffs / "xdp" / f"dispatch-{_ifindex()}-{disp}")) >= \
                ["prog0-prog", "prog1-prog"]
            assert cmd_status("veth0") == 0
            rows = capsys.readouterr().out.splitlines()
            assert any("xdp_dispatcher" in r for r in rows)
            # each component under the dispatcher: "=> SLOT ID NAME TAG dispatcher"
            assert [r.split()[1:4:2] for r in rows if r.strip().startswith("=>")] == \
                [["0", "chain_first"], ["1", "xdp_prog1"]]
            assert cmd_unload("veth0", all_modes=True) == 0
            assert xdp_query("veth0").programs == {}
            assert os.listdir(bpffs / "xdp") == []
    finally:
        subprocess.run(["umount", str(bpffs)])


def _ifindex() -> int:
    from pyxdp.kernel.netlink import ifindex_of
    return ifindex_of("veth0")


def test_pinning_outside_bpffs_leaves_no_directories(tmp_path: Path) -> None:
    """Found with LIBXDP_BPFFS pointing at no bpffs (round 7): the refused pin (EPERM,
    as bpf_obj_do_pin answers outside a bpf filesystem) left the directories it had made
    (``DIR/xdp``, even ``/nonexistent/xdp``) behind."""
    with Collection.load(CHAIN, "kernel") as kc, \
            KernelDispatcher([kc.programs["chain_first"], kc.programs["chain_b"]]) as kd:
        with pytest.raises(KernelError) as e:
            kd.pin(1, str(tmp_path / "no" / "bpffs" / "xdp"))
        assert e.value.errno == errno.EPERM and "not on a bpf filesystem" in str(e.value)
        assert list(tmp_path.iterdir()) == []


def test_load_pin_path_outside_bpffs_leaves_no_directories(tmp_path: Path) -> None:
    """``pyxdp load -p DIR``: a refused pin removed DIR but not the parents it had made
    (``-p /tmp/x/a/b`` left ``/tmp/x/a``), and a DIR that is a file said "File exists"."""
    from pyxdp.cli.loader import LoaderError, _pin_all
    with Collection.load(SAMPLES / "xdp1.o", "kernel") as kc:
        prog = kc.programs["xdp_prog1"].handle
        with pytest.raises(KernelError, match="not on a bpf filesystem"):
            _pin_all(kc.maps, prog, str(tmp_path / "x" / "a" / "b"))  # type: ignore[arg-type]
        assert list(tmp_path.iterdir()) == []
        (tmp_path / "f").write_bytes(b"")
        with pytest.raises(LoaderError, match="f: not a directory"):
            _pin_all(kc.maps, prog, str(tmp_path / "f"))  # type: ignore[arg-type]
