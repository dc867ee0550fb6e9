"""bpf_local_irq_save/_restore (pyxdp/vm/rcu_preempt.py) on both engines:
samples/irq_flags.o runs, and the JIT calls no Python for them.
tests/kernel/test_irq_flags_kernel.py compares the sample with Linux; the verifier's
rules for them are corpus cases (pyxdp.testing.verifier_cases, irq_*)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.prog import jit_available
from pyxdp.vm import rcu_preempt

OBJ = Path(__file__).resolve().parents[1] / "samples" / "irq_flags.o"


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_irq_flags_runs(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    calls = 0
    code = rcu_preempt._nothing.__code__

    def prof(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call" and frame.f_code is code:
            calls += 1
    with Collection(load_collection_spec(OBJ), "userspace", engine=engine) as c:
        prog = c.programs["xdp_irq_flags"]
        sys.setprofile(prof)
        try:
            verdicts = [prog.test_run(pkt).retval
                        for pkt in (bytes([7]) * 60, bytes([9]) * 200, bytes([255]) * 60)]
        finally:
            sys.setprofile(None)
        assert verdicts == [2, 2, 1]
        assert [c.maps["counts"][i] for i in range(3)] == [3, 1, 7 + 9 + 255]
    assert calls == (0 if engine == "jit" else 3 * 6)  # 6 calls a run
