"""BPF exceptions against Linux: tests/verifier_objects/exceptions.o's xdp_throw (bpf_throw
from the main program, a static and a global function) under BPF_PROG_TEST_RUN returns
on Linux what tests/test_verifier.py pins for pyxdp's interpreter and JIT (the cookie,
its low 32 bits); the verdicts on the mistakes are tests/kernel/test_verifier_kernel.py's.
tests/verifier_objects/exception_cb.o, whose xdp_throw_cb has an exception callback of
its own that pyxdp's loader appends as libbpf does, loads into Linux and returns what
tests/test_verifier.py pins (the callback's value for the cookie)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec

pytestmark = pytest.mark.kernel

OBJ = Path(__file__).resolve().parents[1] / "verifier_objects" / "exceptions.o"
# as tests/test_verifier.py's EXCEPTION_RUNS
RUNS = ((bytes(15), 1), (bytes([0xFF]) * 20, 3), (bytes([7]) * 20, 1),
        (bytes([8]) * 21, 2), (bytes([7]) * 1200, 0), (bytes([0xFF]) * 1200, 3))


def test_throw_returns_the_cookie_on_linux() -> None:
    spec = load_collection_spec(OBJ)
    with Collection(replace(spec, programs={"xdp_throw": spec.programs["xdp_throw"]}),
                    "kernel") as c:
        prog = c.programs["xdp_throw"]
        assert [(pkt, prog.test_run(pkt).retval) for pkt, _ in RUNS] == list(RUNS)


CB_OBJ = Path(__file__).resolve().parents[1] / "verifier_objects" / "exception_cb.o"
# as tests/test_verifier.py's EXCEPTION_CB_RUNS
CB_RUNS = {"xdp_throw_cb": ((15, 3), (30, 2), (1200, 1)),
           "xdp_throw_plain": ((15, 3), (30, 2), (1200, 2))}


def test_exception_callback_of_its_own_on_linux() -> None:
    spec = load_collection_spec(CB_OBJ)
    runs = {name: spec.programs[name] for name in CB_RUNS}  # (the others Linux refuses)
    with Collection(replace(spec, programs=runs), "kernel") as c:
        got = {name: tuple((n, c.programs[name].test_run(bytes(n)).retval) for n, _ in runs)
               for name, runs in CB_RUNS.items()}
    assert got == CB_RUNS
