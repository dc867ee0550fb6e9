"""Shared fixtures: the ``kernel`` marker's skip-or-fail rule (and one xdist worker for
all kernel tests) and the external vector directory.

Tests marked ``kernel`` need root and bpf(2). On a machine without them they
skip with the probe's reason; when ``CI`` is set (CI here runs as root) a
missing kernel is a failure, never a silent skip.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pytest

from pyxdp.testing.conformance import external_vector_dir


@cache
def _bpf_probe() -> tuple[bool, str]:
    try:
        from pyxdp.kernel import bpf_available
    except ImportError as e:  # the kernel layer itself failed to import
        return False, f"pyxdp.kernel does not import: {e}"
    return bpf_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # With pytest-xdist (``-n``), kernel tests share one worker: they build network
    # namespaces and read tracefs, which is machine-wide; the rest spread over the CPUs.
    for item in items:
        if item.get_closest_marker("kernel") is not None:
            item.add_marker(pytest.mark.xdist_group("kernel"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("kernel") is None:
        return
    ok, reason = _bpf_probe()
    if ok:
        return
    if os.environ.get("CI"):
        pytest.fail(f"kernel test cannot run under CI: {reason}", pytrace=False)
    pytest.skip(f"needs root and BPF: {reason}")


@pytest.fixture(scope="session")
def vector_dir() -> Path:
    """The external bpf_conformance vectors (.ci/run points ``PYXDP_CONFORMANCE_DIR`` at
    them); without them the test skips, or fails under CI."""
    d = external_vector_dir()
    if d is not None and d.is_dir():
        return d
    reason = (f"PYXDP_CONFORMANCE_DIR={d} is not a directory" if d is not None
              else "the bpf_conformance vectors are not here (set PYXDP_CONFORMANCE_DIR)")
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)
