"""Two fresh network namespaces, the second known to the first by a netns id
(``ip netns set``, net/core/net_namespace.c's peer ids): what kfuncs taking a
``netns_id`` (the conntrack and xfrm lookups) reach across, for kernel tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pyxdp.testing.pytest_plugin import require_kernel

__all__ = ["peered_namespaces"]


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)


@contextmanager
def peered_namespaces(tag: str, peer_id: int) -> Iterator[tuple[str, str]]:
    """Namespaces ``pyxdp-<tag>-a-<pid>`` and ``-b-<pid>``, B being netns id ``peer_id``
    in A, deleted on exit. Skips without root, BPF or iproute2; fails instead under CI."""
    require_kernel()
    if shutil.which("ip") is None:
        if os.environ.get("CI"):
            pytest.fail("needs iproute2 to create network namespaces", pytrace=False)
        pytest.skip("needs iproute2 to create network namespaces")
    a, b = f"pyxdp-{tag}-a-{os.getpid()}", f"pyxdp-{tag}-b-{os.getpid()}"
    made = []
    try:
        for n in (a, b):
            res = _ip("netns", "add", n)
            assert res.returncode == 0, res.stderr
            made.append(n)
        res = _ip("-n", a, "netns", "set", b, str(peer_id))
        assert res.returncode == 0, res.stderr
        yield a, b
    finally:
        for n in made:
            _ip("netns", "del", n)
