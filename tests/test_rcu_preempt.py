"""bpf_rcu_read_lock/_unlock and bpf_preempt_disable/_enable (pyxdp/vm/rcu_preempt.py) on
both engines: samples/rcu_preempt.o runs, and the JIT calls no Python for them.
tests/kernel/test_rcu_preempt_kernel.py compares the sample with Linux; the pairing
rules are verifier corpus cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.testing.native import python_calls
from pyxdp.vm import rcu_preempt

OBJ = Path(__file__).resolve().parents[1] / "samples" / "rcu_preempt.o"


def _check_runs(c: Collection) -> None:
    assert _runs(c) == [2, 1, 16]


def _runs(c: Collection) -> list[int]:
    for pkt in (bytes([7]) * 60, bytes([9]) * 200):
        assert c.programs["xdp_rcu_preempt"].test_run(pkt).retval == 2
    return [c.maps["counts"][i] for i in range(3)]


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_rcu_preempt_runs(engine: str) -> None:
    with Collection(load_collection_spec(OBJ), "userspace", engine=engine) as c:
        calls = python_calls([rcu_preempt._nothing], lambda: _check_runs(c))
    assert calls == (0 if engine == "jit" else 2 * 8)  # 8 calls a run
