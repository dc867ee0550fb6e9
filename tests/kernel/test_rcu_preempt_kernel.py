"""bpf_rcu_read_lock/_unlock and bpf_preempt_disable/_enable against Linux:
samples/rcu_preempt.o over the packet corpus under BPF_PROG_TEST_RUN on Linux and on
pyxdp's interpreter and JIT (the same verdicts, frames and counts); the verifier's
pairing rules are corpus cases (pyxdp.testing.verifier_cases, rcu_* and preempt_*)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.packets import corpus
from pyxdp.net.prog import jit_available

pytestmark = pytest.mark.kernel

OBJ = Path(__file__).resolve().parents[2] / "samples" / "rcu_preempt.o"


def _run(coll: Collection, pkt: bytes) -> tuple[object, ...]:
    try:
        r = coll.programs["xdp_rcu_preempt"].test_run(pkt)
    except Exception as e:  # the kernel refusing an input must be matched by pyxdp
        return (type(e).__name__, getattr(e, "errno", None))
    return (r.retval, r.data_out)


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_rcu_preempt_match_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = load_collection_spec(OBJ)
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        n = 0
        for name, pkt in corpus(1):
            k, u = _run(kern, pkt), _run(user, pkt)
            assert u == k, name
            n += k[0] == 2
        counts = [kern.maps["counts"][i] for i in range(3)]
        assert [user.maps["counts"][i] for i in range(3)] == counts
        assert counts[0] == n > 0 and counts[1] > 0
