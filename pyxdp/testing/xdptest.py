"""Testing one's own XDP program: an object loaded for tests, packets, and assertions.

What a user's test asks of an XDP program is what BPF_PROG_TEST_RUN
answers (``net/bpf/test_run.c``): the verdict, the bytes that came out, and
the maps afterwards. This module is that vocabulary for any test runner;
:mod:`pyxdp.testing.pytest_plugin` wires it into pytest fixtures.

* :class:`XdpObject`: one object loaded on one backend (``"userspace"``,
  pyxdp's engines, or ``"kernel"``, Linux through bpf(2)) with
  :meth:`~XdpObject.run` and :meth:`~XdpObject.assert_run`.
* Packets are ``bytes``-like, or anything ``bytes()`` turns into a frame:
  pyxdp's builders (:mod:`pyxdp.net.packets`) return bytes, a scapy packet
  converts itself (:func:`packet_bytes`).
* :func:`assert_action`, :func:`assert_output` and :func:`assert_map` raise
  ``AssertionError`` with a message naming what differs: the verdict and the
  fault or ``bpf_printk`` lines, the first differing byte with both sides in
  hex, each map key missing, different or (with ``exact``) unexpected.
  Keys and values are compared typed, as :class:`~pyxdp.collection.Map`
  decodes them from BTF (addresses for ``__be32``, dicts for structs), and an
  expected key may be written in any form the map accepts (``"10.0.0.1"``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, SupportsBytes

from pyxdp.args import checked
from pyxdp.backend import TestRunResult
from pyxdp.collection import Collection, Map, Program
from pyxdp.errors import BadArgument, PyxdpError
from pyxdp.uapi.bpf import BpfMapType, XdpAction

__all__ = ["Expected", "Packet", "XdpObject", "assert_action", "assert_map", "assert_output",
           "kernel_unavailable", "packet_bytes"]

Packet = bytes | bytearray | memoryview | SupportsBytes
"""A frame: bytes-like, or an object ``bytes()`` converts (a scapy packet)."""

_ARRAYS = frozenset({BpfMapType.BPF_MAP_TYPE_ARRAY, BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY})
_HEX_CONTEXT = 16


def packet_bytes(packet: Packet) -> bytes:
    """``packet`` as the frame's bytes: bytes-like as is, else ``bytes(packet)`` (scapy's
    ``Ether()/IP()/UDP()`` builds itself that way); anything else is a TypeError."""
    if isinstance(packet, bytes | bytearray | memoryview):
        return bytes(packet)
    if isinstance(packet, str | int) or not hasattr(packet, "__bytes__"):
        raise TypeError(f"a packet is bytes or converts to bytes (a scapy packet), "
                        f"not {type(packet).__name__}")
    return bytes(packet)


def kernel_unavailable() -> str | None:
    """Why Linux cannot load programs here (not root, no bpf(2)...), or None when it can."""
    try:
        from pyxdp.kernel import bpf_available
    except ImportError as e:
        return f"pyxdp.kernel does not import: {e}"
    ok, reason = bpf_available()
    return None if ok else reason


def _action_name(value: int) -> str:
    try:
        return XdpAction(value).name
    except ValueError:
        return f"{value} (not an XDP action)"


@checked
def assert_action(result: TestRunResult, expected: int, *, what: str = "the program") -> None:
    """The run returned the verdict ``expected`` (an :class:`XdpAction` or its int)."""
    __tracebackhide__ = True  # pytest shows the caller's line
    if result.retval == expected:
        return
    lines = [f"{what} returned {_action_name(result.retval)}, expected "
             f"{_action_name(expected)}"]
    if result.fault:
        lines.append(f"  fault: {result.fault}")
    lines.extend(f"  bpf_printk: {t}" for t in result.trace)
    raise AssertionError("\n".join(lines))


def _hex_window(data: bytes, at: int) -> str:
    lo = max(0, at - _HEX_CONTEXT // 2)
    chunk = data[lo:lo + _HEX_CONTEXT]
    return f"[{lo}:{lo + len(chunk)}] {chunk.hex(' ') or '(nothing)'}"


def assert_output(result: TestRunResult, expected: Packet, *,
                  what: str = "the program") -> None:
    """The frame that came out (``data_out``) is exactly ``expected``."""
    __tracebackhide__ = True  # pytest shows the caller's line
    want, got = packet_bytes(expected), bytes(result.data_out)
    if want == got:
        return
    at = next((i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
              min(len(want), len(got)))
    raise AssertionError(
        f"{what}'s output differs from byte {at} ({len(got)} bytes out, {len(want)} "
        f"expected):\n  expected {_hex_window(want, at)}\n  got      {_hex_window(got, at)}")


def _summed(value: Any) -> Any:
    """A per-CPU value summed as :meth:`Map.sum` sums (ints, or struct fields)."""
    if value and isinstance(value[0], dict):
        return {f: sum(v[f] for v in value) for f in value[0]}
    return sum(int(v) for v in value)


def _zero(value: Any) -> bool:
    if isinstance(value, list):
        return all(_zero(v) for v in value)
    if isinstance(value, dict):
        return all(_zero(v) for v in value.values())
    if isinstance(value, bytes):
        return not any(value)
    return bool(value == 0)


Expected = Mapping[Any, Any] | Iterable[tuple[Any, Any]]
"""What a map should hold: a dict, or ``(key, value)`` pairs (struct keys are dicts,
which cannot be dict keys)."""


@checked
def assert_map(m: Map, expected: Expected, *, exact: bool = False) -> None:
    """The map holds ``expected`` (key -> value, typed as the map decodes them; a dict or
    ``(key, value)`` pairs).

    Per-CPU maps: an expected list is compared CPU by CPU, anything else with the
    sum over CPUs (:meth:`Map.sum`). With ``exact`` the map holds nothing else
    (array slots that are all zero count as empty, as they start)."""
    __tracebackhide__ = True  # pytest shows the caller's line
    problems: list[str] = []
    seen: set[bytes] = set()
    pairs = list(expected.items() if isinstance(expected, Mapping) else expected)
    if isinstance(expected, str | bytes) or not all(isinstance(p, tuple) and len(p) == 2
                                                     for p in pairs):
        raise BadArgument("assert_map: expected must be a dict or (key, value) pairs")
    for key, want in pairs:
        seen.add(m.key_bytes(key))
        got = m.lookup(key)
        if got is None:
            problems.append(f"key {key!r}: missing, expected {want!r}")
            continue
        if m.percpu and not isinstance(want, list):
            total = _summed(got)
            if total != want:
                problems.append(f"key {key!r}: {total!r} (summed over CPUs {got!r}), "
                                f"expected {want!r}")
        elif got != want:
            problems.append(f"key {key!r}: {got!r}, expected {want!r}")
    if exact:
        for key, value in m.items():
            if m.key_bytes(key) in seen or (m.spec.type in _ARRAYS and _zero(value)):
                continue
            problems.append(f"key {key!r}: {value!r}, not expected")
    if problems:
        body = "\n".join(f"  {p}" for p in problems)
        raise AssertionError(f"map {m.name}: {len(problems)} "
                             f"entr{'y differs' if len(problems) == 1 else 'ies differ'}:\n"
                             f"{body}")


class XdpObject:
    """An object loaded on one backend for tests: its maps, programs, runs and assertions.

    ``program`` names the default program of :meth:`run` (by name or section);
    without it an object with one program runs that one."""

    @checked
    def __init__(self, path: str | os.PathLike[str], backend: str = "userspace", *,
                 program: str | None = None, engine: str = "auto") -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise PyxdpError(f"{self.path}: no such object file")
        self.backend = backend
        self.collection = Collection.load(self.path, backend, engine=engine)
        try:
            self.default = self.collection.program(program)
        except BaseException:
            self.collection.close()
            raise

    def __repr__(self) -> str:
        return f"<XdpObject {self.path.name} on {self.backend}>"

    @property
    def maps(self) -> dict[str, Map]:
        """The object's maps by name (BTF-typed, see :class:`~pyxdp.collection.Map`)."""
        return self.collection.maps

    @property
    def programs(self) -> dict[str, Program]:
        """The loaded programs by name."""
        return self.collection.programs

    def program(self, name: str | None = None) -> Program:
        """A program by name or section; the default one without a name."""
        return self.default if name is None else self.collection.program(name)

    @checked
    def run(self, packet: Packet, *, program: str | None = None, repeat: int = 1
            ) -> TestRunResult:
        """BPF_PROG_TEST_RUN of one frame; ``retval`` is the :class:`XdpAction`."""
        return self.program(program).test_run(packet_bytes(packet), repeat=repeat)

    @checked
    def assert_run(self, packet: Packet, action: int, *, output: Packet | None = None,
                   program: str | None = None) -> TestRunResult:
        """Run ``packet``, assert the verdict (and the frame out, when given); the result."""
        __tracebackhide__ = True  # pytest shows the caller's line
        prog = self.program(program)
        res = prog.test_run(packet_bytes(packet))
        what = f"{prog.name} ({self.backend})"
        assert_action(res, action, what=what)
        if output is not None:
            assert_output(res, output, what=what)
        return res

    @checked
    def assert_map(self, name: str, expected: Expected, *, exact: bool = False) -> None:
        """:func:`assert_map` on the map called ``name``."""
        __tracebackhide__ = True  # pytest shows the caller's line
        if name not in self.maps:
            raise AssertionError(f"{self.path.name} has no map {name!r} "
                                 f"(maps: {', '.join(self.maps) or 'none'})")
        assert_map(self.maps[name], expected, exact=exact)

    def close(self) -> None:
        """Release the object's maps and programs."""
        self.collection.close()

    def __enter__(self) -> XdpObject:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
