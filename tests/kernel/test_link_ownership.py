"""Kernel objects owned as libxdp owns them: what a short-lived process attaches goes
through a bpf_link, so the kernel detaches it when the process dies, even by SIGKILL.

Each test runs a ``pyxdp`` process in a network namespace of its own with a veth
pair, kills or ends it, and reads the interface's XDP state over netlink.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyxdp.kernel.netlink import netns, xdp_query

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]
NS = f"pyxdp-own-{os.getpid()}"
ETH_P_TEST = 0x88B5


def _ip(*args: str) -> None:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


@pytest.fixture(scope="module")
def ns() -> Iterator[str]:
    if shutil.which("ip") is None:
        pytest.skip("needs iproute2 to create a network namespace")
    _ip("netns", "add", NS)
    try:
        _ip("-n", NS, "link", "add", "veth0", "type", "veth", "peer", "name", "veth1")
        _ip("-n", NS, "link", "set", "veth0", "up")
        _ip("-n", NS, "link", "set", "veth1", "up")
        yield NS
    finally:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True, timeout=60)


def _attached(ns: str, dev: str = "veth0") -> dict[str, int]:
    with netns(ns):
        return xdp_query(dev).programs


def _wait_detached(ns: str, timeout: float = 5.0) -> dict[str, int]:
    # The kernel releases a link from the dying process's file table, then RCU.
    deadline = time.monotonic() + timeout
    progs = _attached(ns)
    while progs and time.monotonic() < deadline:
        time.sleep(0.05)
        progs = _attached(ns)
    return progs


def _spawn(ns: str, args: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, *args], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_xsk_cli_killed_leaves_nothing_attached(ns: str) -> None:
    p = _spawn(ns, ["-m", "pyxdp.cli.main", "xsk", "rxdrop", "--dev", "veth0",
                    "--duration", "60"])
    try:
        assert p.stdout is not None
        first = p.stdout.readline()  # printed once the program is attached
        assert first.startswith("pyxdp xsk rxdrop on veth0:0"), first + p.stderr.read()
        assert _attached(ns), "the program is attached while pyxdp xsk runs"
        os.kill(p.pid, signal.SIGKILL)
        p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)
    assert _wait_detached(ns) == {}


def test_readme_linux_af_xdp_example_blocks_then_detaches(ns: str) -> None:
    # README's Linux AF_XDP block, on veth0 of the namespace, with a shorter idle timeout.
    text = (ROOT / "README.md").read_text()
    block = next(b for b in re.findall(r"```py\n(.*?)```", text, re.S)
                 if "LinuxXskSocket" in b and "xdp_link_attach" in b)
    code = block.replace('"eth0"', '"veth0"')
    p = _spawn(ns, ["-c", code])
    frame = bytes(6 * [0xFF]) + bytes.fromhex("020000000001") + ETH_P_TEST.to_bytes(2, "big")
    frame += bytes(range(50))
    stop = threading.Event()

    def send() -> None:
        with netns(ns):
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        with s:
            s.bind(("veth1", 0))
            while not stop.wait(0.05):
                s.send(frame)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        assert p.stdout is not None
        # The loop woke up for packets: our 64-byte frames (the kernel's own, an IPv6
        # router solicitation on a veth coming up, may come first).
        seen = [p.stdout.readline() for _ in range(1)]
        while not seen[-1].strip().startswith("[64") and seen[-1] and len(seen) < 20:
            seen.append(p.stdout.readline())
        stop.set()
        out, err = p.communicate(timeout=30)  # then ends after 1 s without packets
    finally:
        stop.set()
        if p.poll() is None:
            p.kill()
            p.wait(30)
        sender.join(5)
    assert p.returncode == 0, err
    lines = [*seen, *out.splitlines()]
    assert seen[-1].strip().startswith("[64"), lines
    # Blocking: a line per batch of frames sent 50 ms apart, not a line per empty poll.
    assert len(lines) < 100, len(lines)
    assert _attached(ns) == {}
