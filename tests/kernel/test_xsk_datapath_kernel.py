"""AF_XDP on pyxdp's datapath against Linux: every pyxdp.testing.xsklab scenario, both sides.

Each scenario runs on real veth pairs in a network namespace of its own
(``LinuxXskSocket``, copy mode: veth has no zero-copy) and on pyxdp
(``PyxdpXskSocket`` on the interpreter, and on the JIT with its native poll
loop), and the observations must be equal: packets and descriptor offsets,
``XDP_STATISTICS``, chunk accounting, every ``xdp_redirect``/``_err`` with
its errno, completions, what reached the peer, errnos of refused calls.

What Linux 6.18 showed (and pyxdp now does): no fill buffer -ENOMEM with
``rx_dropped`` and ``rx_fill_ring_empty_descs`` per frame; a full rx ring
-ENOBUFS (``rx_ring_full``) without taking a fill entry; the buffer is
looked for before the rx slot; a frame over ``chunk - headroom - 256`` bytes
-ENOSPC (``rx_dropped``); a socket bound elsewhere -EINVAL, an unbound one
-ENXIO (XSKMAP takes unbound sockets and sockets without an rx ring); copy
mode puts data at ``chunk + headroom + 256`` whatever ``adjust_head`` did and
the metadata right before; tx: 32 descriptors per sendto then EAGAIN, a full
completion ring EAGAIN, one ``tx_ring_empty_descs`` per drain that empties
the ring (also for an empty kick), an invalid descriptor needs a completion
slot, is counted, completed, and ends the call; a down device ENETDOWN, a
down peer: the packet dropped and completed, sendto EAGAIN-like (EBUSY);
``poll`` drives copy-mode tx; ``XDP_MAX_TX_SKB_BUDGET`` EACCES outside
``[32, tx ring]``; bind errnos in ``xsk_bind``'s order.

The kernel refuses ``bpf_redirect_xsk`` (pyxdp's extension helper).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.errors import KernelError
from pyxdp.net.prog import jit_available
from pyxdp.testing.xsklab import SCENARIOS, run_kernel, run_pyxdp

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
BACKENDS = [("interp", False)] + ([("jit", True)] if jit_available() else [])


@pytest.fixture(autouse=True)
def _needs_ip() -> None:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 to create a network namespace")


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_matches_linux(name: str) -> None:
    scenario = SCENARIOS[name]
    want = run_kernel(scenario)
    for engine, native in BACKENDS:
        got = run_pyxdp(scenario, engine=engine, native=native)
        diff = {k: (want.get(k), got.get(k)) for k in want.keys() | got.keys()
                if want.get(k) != got.get(k)}
        assert not diff, f"{name} on pyxdp ({engine}): {diff}"


def test_kernel_refuses_bpf_redirect_xsk() -> None:
    with pytest.raises(KernelError) as e:
        Collection.load(SAMPLES / "xsk_redirect.o", backend="kernel")
    assert e.value.errno == errno.EINVAL
    assert "invalid func unknown#1024" in str(e.value)


def test_cli_on_a_real_interface() -> None:
    """``pyxdp xsk`` on a veth of a namespace of ours: txonly reaches the peer, the
    program is attached for the run and gone after it."""
    ns = f"pyxdp-xskcli-{os.getpid()}"

    def ip(*args: str) -> str:
        res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        return res.stdout

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-m",
                               "pyxdp.cli.main", "xsk", *args], capture_output=True,
                              text=True, timeout=120, cwd=ROOT)

    ip("netns", "add", ns)
    try:
        ip("-n", ns, "link", "add", "veth0", "type", "veth", "peer", "name", "veth1")
        ip("-n", ns, "link", "set", "veth0", "up")
        ip("-n", ns, "link", "set", "veth1", "up")
        res = cli("txonly", "--dev", "veth0", "--duration", "1", "--copy", "--json")
        assert res.returncode == 0, res.stderr
        sent = json.loads(res.stdout.splitlines()[-1])["tx_total"]
        assert sent > 0
        link = json.loads(ip("-n", ns, "-s", "-j", "link", "show", "veth1"))[0]
        assert link["stats64"]["rx"]["packets"] >= sent
        assert "xdp" not in json.loads(ip("-n", ns, "-j", "link", "show", "veth0"))[0]
        res = cli("rxdrop", "--dev", "veth0", "--duration", "0.5")
        assert res.returncode == 0, res.stderr
        assert res.stdout.splitlines()[0].startswith("pyxdp xsk rxdrop on veth0:0 (xdp-drv")
        res = cli("rxdrop", "--dev", "veth0", "--zero-copy", "--duration", "0.5")
        assert res.returncode == 2 and "Operation not supported" in res.stderr  # no zc on veth
        assert len(res.stderr.strip().splitlines()) == 1
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=60)
