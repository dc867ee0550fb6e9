"""XDP_PASS into the host stack: pyxdp's receive path against Linux's, frame by frame.

Each frame of :func:`pyxdp.testing.stacklab.stack_frames` (the packet corpus and
frames aimed at each check: packet type, VLAN tags, IPv4/IPv6 headers,
options, extension headers, UDP/TCP/ICMP lengths and checksums, broadcast and
multicast) goes through Linux's XDP_PASS path (live frames on a veth in a
namespace) and through pyxdp's, native and Python; the SNMP counters each
moved and the datagrams a bound socket received must be the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pyxdp.kernel.tracefs import TRACEFS
from pyxdp.testing.stacklab import kernel_stack, pyxdp_stack, stack_frames
from pyxdp.uapi.dropreason import SkbDropReason

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def frames() -> list[tuple[str, bytes]]:
    return stack_frames(seed=0)


@pytest.fixture(scope="module")
def linux(frames: list[tuple[str, bytes]]) -> dict:  # type: ignore[type-arg]
    return kernel_stack(frames)


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_stack_counters_match_linux(frames, linux, native: bool) -> None:  # type: ignore[no-untyped-def] # noqa: E501
    ours = pyxdp_stack(frames, native=native)
    differ = [name for name, _ in frames if ours[name] != linux[name]]
    if differ:
        # The namespace's counters are Linux's whole stack: a stray packet of its
        # own (a delayed multicast report) can land in one frame's window. Such
        # a frame is measured again; a real difference stays.
        again = kernel_stack([(n, f) for n, f in frames if n in differ])
        differ = [n for n in differ if ours[n] != again[n]]
    assert not differ, "\n".join(
        f"{n}: Linux {linux[n].counters} recv {linux[n].received}; "
        f"pyxdp {ours[n].counters} recv {ours[n].received}" for n in differ)


def test_drop_reason_values_are_the_kernels() -> None:
    fmt = Path(TRACEFS) / "events" / "skb" / "kfree_skb" / "format"
    if not fmt.exists():
        pytest.skip("no skb:kfree_skb tracepoint format in tracefs")
    text = fmt.read_text()
    for reason in SkbDropReason:
        assert f'{{ {int(reason)}, "{reason.name}" }}' in text, reason
