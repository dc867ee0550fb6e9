"""Lists and trees inside allocated objects (samples/graph_obj.o) on both engines: what
a bag's list and tree hold, and what the nbags on a value's list hold, is freed with
them (bpf_obj_drop, the value's update, the map going: bpf_obj_free_fields down every
level), and on the JIT the list and tree kfuncs stay native (only the drop of an
object holding a root runs in Python). tests/kernel/test_graph_obj_kernel.py compares
the sample with Linux, tests/test_verifier.py the verifier's verdicts."""

from __future__ import annotations

import gc
import random
from functools import partial
from pathlib import Path

import pytest

from pyxdp.collection import Collection, Program
from pyxdp.net.prog import jit_available
from pyxdp.testing.native import python_calls
from pyxdp.vm import bpf_list, bpf_rbtree, helpers
from pyxdp.vm.memalloc import arena

OBJ = Path(__file__).resolve().parents[1] / "samples" / "graph_obj.o"
DROP = 1


def _run(prog: Program, cmds: tuple[int, ...], seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(150):
        prog.test_run(bytes([rnd.choice(cmds), rnd.randrange(4), rnd.randrange(256)]) +
                      bytes(20))


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_objects_free_what_their_roots_hold(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    gc.collect()  # maps of earlier tests drop their objects now, not in the middle
    before = arena().live()
    with Collection.load(OBJ, engine=engine) as c:
        prog = c.programs["xdp_graph_obj"]
        kfuncs = [*bpf_list.LIST_KFUNCS.values(), *bpf_rbtree.RBTREE_KFUNCS.values(),
                  helpers._spin_lock, helpers._spin_unlock]
        py_calls = python_calls(kfuncs, partial(_run, prog, (0, 0, 1, 2, 2, 3, 5, 5, 6), 3))
        # the kfuncs ran natively on the JIT
        assert (py_calls == 0) == (engine == "jit")
        assert arena().live() > before
        _run(prog, (4,), 4)  # bpf_obj_drop of the bags, with what they hold
        while prog.test_run(b"\x06\x00\x00" + bytes(20)).retval != DROP:
            pass
        for k in range(1, 4):
            while prog.test_run(bytes([6, k, 0]) + bytes(20)).retval != DROP:
                pass
        assert arena().live() == before
        _run(prog, (0, 2, 5), 5)
        held = arena().live() - before
        # an update drops the value's bag (its items and tree items too)
        zero = dict(c.maps["slots"][0])
        c.maps["slots"][0] = zero
        assert 0 < arena().live() - before < held
        del prog
    del c
    gc.collect()  # the map went: its bags and nbags, and all they hold, are dropped
    assert arena().live() == before
