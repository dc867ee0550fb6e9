"""Loops against Linux: the programs of tests/verifier_objects/loops.o that Linux accepts
(bpf_for, can_loop, bpf_loop as clang emits them) and assembled iterator cases
(bpf_iter_num_new's -EINVAL and -E2BIG, ranges at INT_MIN and INT_MAX) under
BPF_PROG_TEST_RUN, on pyxdp's interpreter and JIT: the same verdicts, frames and maps.

Linux 6.18 on x86-64 ends a may_goto loop by time (a 250 ms slice, see
docs/SEMANTICS.md) where pyxdp counts: results that do not depend on how many
times such a loop ran agree, so only one run here spends its budget."""

from __future__ import annotations

import errno
from dataclasses import replace
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.packets import corpus
from pyxdp.net.prog import jit_available
from pyxdp.spec import CollectionSpec
from pyxdp.testing.programs import iter_case, run_iter

pytestmark = pytest.mark.kernel

LOOPS = Path(__file__).resolve().parents[1] / "verifier_objects" / "loops.o"
RUNS = ("xdp_iter_sum", "xdp_can_loop_sum", "xdp_loop_count")
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1


def _loops_spec() -> CollectionSpec:
    spec = load_collection_spec(LOOPS)
    for name in ("xdp_iter_off_by_one", "xdp_loop_walk"):  # Linux refuses them
        spec.programs[name] = replace(spec.programs[name], autoload=False)
    return spec


def _run(coll: Collection, prog: str, pkt: bytes) -> tuple[object, ...]:
    try:
        r = coll.programs[prog].test_run(pkt)
    except Exception as e:  # the kernel refusing an input must be matched by pyxdp
        return (type(e).__name__, getattr(e, "errno", None))
    return (r.retval, r.data_out)


def _sums(coll: Collection) -> list[int]:
    return [coll.maps["sums"][i] for i in range(16)]


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_clang_loops_match_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = _loops_spec()
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        pkt = bytes(range(1, 61))
        # can_loop over an all-zero map: the loop ends when may_goto's budget is spent.
        assert _run(user, "xdp_can_loop_sum", pkt) == _run(kern, "xdp_can_loop_sum", pkt)
        for coll in (kern, user):  # from here on the sum passes 1000 before the budget ends
            coll.maps["sums"].update(7, 1001)
        for name, pkt in corpus(1):
            for prog in RUNS:
                k, u = _run(kern, prog, pkt), _run(user, prog, pkt)
                assert u == k, f"{prog} on {name!r}: kernel {k!r:.200} pyxdp {u!r:.200}"
            assert _sums(user) == _sums(kern), name


RANGES = [(0, 10), (5, 5), (10, 5), (-3, 2), (0, 8 << 20), (-1, 8 << 20),
          (INT_MIN, INT_MIN + 3), (INT_MAX - 2, INT_MAX), (INT_MIN, INT_MAX)]


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_iter_num_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    got = {}
    for start, end in RANGES:
        spec = iter_case(start, end)
        with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                            engine=engine) as user:
            k = run_iter(kern)
            assert run_iter(user) == k, (start, end)
            got[start, end] = k[0]
    # the error paths were taken on Linux too
    assert got[10, 5] == -errno.EINVAL and got[-1, 8 << 20] == got[INT_MIN, INT_MAX] == \
        -errno.E2BIG and got[0, 8 << 20] == 0
