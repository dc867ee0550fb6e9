"""A pytest plugin for testing one's own XDP program on pyxdp and on Linux.

Installed with pyxdp (entry point ``pytest11``, name ``pyxdp``); without the
entry point, ``pytest -p pyxdp.testing.pytest_plugin`` or
``pytest_plugins = ["pyxdp.testing.pytest_plugin"]`` in a conftest. A test
names its object with a marker and takes the ``xdp`` fixture::

    pytestmark = pytest.mark.xdp_object("build/prog.o")

    def test_drops_udp(xdp):
        xdp.assert_run(udp_packet(), XDP_DROP)

Fixtures (docs/TESTING.md has the whole story):

* ``xdp``: the marked object loaded (:class:`~pyxdp.testing.xdptest.XdpObject`),
  once per backend: ``userspace`` (pyxdp's engines) and ``kernel`` (Linux,
  through bpf(2)). The kernel variant needs root and BPF: without them it is
  skipped with the reason, and fails instead when ``CI`` is set (a CI runner
  that should test on Linux must not pass by skipping). The marker's
  ``backends=`` or the ini option ``xdp_backends`` narrow the list, its
  ``program=`` names the program :meth:`~pyxdp.testing.xdptest.XdpObject.run`
  runs by default.
* ``xdp_object_path``: the marker's path resolved (absolute; else from the test
  file's directory; else from pytest's rootdir). Override the fixture in a
  ``conftest.py`` to give every test one object without markers.
* ``xdp_load``: a factory, ``xdp_load(path, backend="userspace", program=None)``,
  for tests of several objects; everything it loaded is closed afterwards.
* ``xdp_host``: a :class:`~pyxdp.net.netdevice.Host` (pyxdp's datapath) with a
  NIC ``eth0`` and a veth pair ``veth0``/``veth1``; closing it at teardown
  checks that every page came back (a leak fails the test).
* ``xdp_packets``: :mod:`pyxdp.net.packets`, the frame builders.
* ``xdp_lab``: :func:`pyxdp.testing.vethlab.compare`, the same
  :class:`~pyxdp.testing.vethlab.Scenario` on Linux veth pairs and on pyxdp
  with the differences listed (root; skipped or failed as the kernel variant).

The ini option ``xdp_engine`` picks pyxdp's engine (``auto``, ``jit``, ``interp``,
``tiered``); a bad value, a backend named twice or not a name is a usage error.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pyxdp.testing.xdptest import XdpObject, kernel_unavailable

__all__ = ["xdp", "xdp_backend", "xdp_host", "xdp_lab", "xdp_load", "xdp_object_path",
           "xdp_packets"]

BACKENDS = ("userspace", "kernel")
ENGINES = ("auto", "jit", "interp", "tiered")
_MARKER = "xdp_object"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("xdp_backends", "backends the xdp fixture loads the object on "
                  "(userspace kernel)", type="args", default=list(BACKENDS))
    parser.addini("xdp_engine", "pyxdp's engine for the userspace backend: "
                  f"{', '.join(ENGINES)}", default="auto")


def pytest_configure(config: pytest.Config) -> None:
    engine = config.getini("xdp_engine")
    if engine not in ENGINES:  # once, here, rather than as every test's error
        raise pytest.UsageError(f"ini option xdp_engine: {engine!r} is none of "
                                f"{', '.join(ENGINES)}")
    config.addinivalue_line(
        "markers", f"{_MARKER}(path, program=None, backends=None): the XDP object the xdp "
        "fixture loads, on each of backends (default: the xdp_backends ini option)")


def _backends(config: pytest.Config, marker: pytest.Mark | None) -> list[str]:
    chosen = marker.kwargs.get("backends") if marker is not None else None
    if isinstance(chosen, str):  # one name, or several as the ini option spells them
        chosen = chosen.split()
    if chosen is not None and not (isinstance(chosen, list | tuple)
                                   and all(isinstance(b, str) for b in chosen)):
        raise pytest.UsageError(f"@pytest.mark.{_MARKER}(backends=...) takes names among "
                                f"{', '.join(BACKENDS)}, not {chosen!r}")
    names = list(chosen) if chosen else list(config.getini("xdp_backends"))
    bad = [b for b in names if b not in BACKENDS]
    if bad or not names:
        raise pytest.UsageError(f"xdp backends must be among {', '.join(BACKENDS)}, "
                                f"not {bad or 'none'}")
    twice = sorted({b for b in names if names.count(b) > 1})
    if twice:  # each would run every test again under the same id
        raise pytest.UsageError(f"xdp backends name {', '.join(twice)} twice")
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "xdp_backend" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker(_MARKER)
        metafunc.parametrize("xdp_backend", _backends(metafunc.config, marker))


def require_kernel() -> None:
    """Skip the calling test when Linux cannot load programs here; fail under ``CI``."""
    reason = kernel_unavailable()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"the kernel backend cannot run under CI: {reason}", pytrace=False)
    pytest.skip(f"the kernel backend needs root and BPF: {reason}")


def _resolve(request: pytest.FixtureRequest, path: str | os.PathLike[str]) -> Path:
    if not isinstance(path, str | os.PathLike) or not str(path):
        raise pytest.UsageError(f"XDP object: a path is a non-empty str or os.PathLike, "
                                f"not {path!r}")
    p = Path(path)
    if p.is_absolute():
        return p
    dirs = list(dict.fromkeys([Path(request.path).parent, Path(request.config.rootpath)]))
    for d in dirs:
        if (d / p).is_file():
            return d / p
    raise pytest.UsageError(f"XDP object {str(path)!r} is no file in "
                            f"{' or '.join(str(d) for d in dirs)}")


@pytest.fixture
def xdp_backend() -> str:
    """The backend of this run of the ``xdp`` fixture (parametrised per test)."""
    return BACKENDS[0]


@pytest.fixture
def xdp_object_path(request: pytest.FixtureRequest) -> Path:
    """The object named by ``@pytest.mark.xdp_object(path)``, resolved."""
    marker = request.node.get_closest_marker(_MARKER)
    if marker is None or not marker.args:
        raise pytest.UsageError(f"{request.node.nodeid}: name the object with "
                                f"@pytest.mark.{_MARKER}('prog.o') (or override the "
                                "xdp_object_path fixture)")
    return _resolve(request, marker.args[0])


@pytest.fixture
def xdp(request: pytest.FixtureRequest, xdp_object_path: Path, xdp_backend: str
        ) -> Iterator[XdpObject]:
    """The marked object loaded on ``xdp_backend``; closed after the test."""
    if xdp_backend == "kernel":
        require_kernel()
    marker = request.node.get_closest_marker(_MARKER)
    program = marker.kwargs.get("program") if marker is not None else None
    with XdpObject(xdp_object_path, xdp_backend, program=program,
                   engine=request.config.getini("xdp_engine")) as obj:
        yield obj


@pytest.fixture
def xdp_load(request: pytest.FixtureRequest) -> Iterator[Callable[..., XdpObject]]:
    """``xdp_load(path, backend="userspace", program=None)``: load more objects."""
    opened: list[XdpObject] = []

    def load(path: str | os.PathLike[str], backend: str = "userspace", *,
             program: str | None = None) -> XdpObject:
        if backend not in BACKENDS:
            raise pytest.UsageError(f"backend {backend!r}: {' or '.join(BACKENDS)}")
        if backend == "kernel":
            require_kernel()
        obj = XdpObject(_resolve(request, path), backend, program=program,
                        engine=request.config.getini("xdp_engine"))
        opened.append(obj)
        return obj

    yield load
    for obj in opened:
        obj.close()


@pytest.fixture
def xdp_host(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A pyxdp datapath host with NIC ``eth0`` and veth pair ``veth0``/``veth1``."""
    from pyxdp.net.netdevice import Host

    host = Host("pytest", engine=request.config.getini("xdp_engine"))
    try:
        host.add_device("eth0")
        host.veth("veth0", "veth1")
        yield host
    except BaseException:
        host.close(check=False)
        raise
    host.close()


@pytest.fixture
def xdp_packets() -> ModuleType:
    """:mod:`pyxdp.net.packets`: ``udp_packet``, ``tcp_packet``, ``icmp_packet``..."""
    from pyxdp.net import packets

    return packets


@pytest.fixture
def xdp_lab() -> Callable[..., Any]:
    """:func:`pyxdp.testing.vethlab.compare` (Linux veth pairs beside pyxdp; root)."""
    require_kernel()
    from pyxdp.testing.vethlab import compare

    return compare
