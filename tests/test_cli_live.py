"""``pyxdp run --iface`` and ``pyxdp bench live``: what is checked before any kernel call,
and the kernel side's program as pyxdp runs it (the kernel tests are in
tests/kernel/test_live_kernel.py)."""

from __future__ import annotations

import pytest

from pyxdp.cli.main import main
from pyxdp.collection import Collection
from pyxdp.net.packets import udp_packet
from pyxdp.xsk.live import redirect_spec


@pytest.mark.parametrize(("argv", "message"), [
    (["run", "samples/xdp1.o"], "run needs --pcap IN or --iface IF"),
    (["run", "samples/xdp1.o", "--iface", "veth0", "--pcap", "in.pcap"],
     "--pcap and --iface: one input at a time"),
    (["run", "samples/xdp1.o", "--iface", "veth0", "--backend", "kernel"],
     "--backend kernel does not apply"),
    (["run", "samples/xdp1.o", "--iface", "veth0", "--rx-usecs", "-1"],
     "--rx-usecs must be >= 0"),
    (["run", "samples/xdp1.o", "--iface", "veth0", "--busy-poll=-5"],
     "--busy-poll must be >= 0 (microseconds)"),
    (["bench", "live", "--busy-poll", "-1"], "--busy-poll must be >= 0 (microseconds)"),
    (["bench", "live", "--cases", "drop,nope"], "--cases: nope: not one of drop, tx, redirect"),
    (["bench", "live", "--duration", "0"], "--duration must be > 0"),
])
def test_bad_input_is_one_line(argv: list[str], message: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_redirect_program_passes_without_a_socket() -> None:
    """The kernel side: a queue whose XSKMAP slot is empty passes the frame to the stack."""
    with Collection(redirect_spec(4), "userspace") as coll:
        res = coll.programs["pyxdp_xsk_redir"].test_run(udp_packet(b"x"))
        assert res.retval == 2  # XDP_PASS
        assert coll.maps["xsks"].spec.max_entries == 4
