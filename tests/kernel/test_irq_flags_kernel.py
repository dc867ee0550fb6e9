"""bpf_local_irq_save/_restore against Linux: samples/irq_flags.o over the packet corpus
under BPF_PROG_TEST_RUN on Linux and on pyxdp's interpreter and JIT (the same verdicts,
frames and counts); the verifier's rules for the IRQ flag slot are corpus cases
(pyxdp.testing.verifier_cases, irq_*)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.packets import corpus
from pyxdp.net.prog import jit_available

pytestmark = pytest.mark.kernel

OBJ = Path(__file__).resolve().parents[2] / "samples" / "irq_flags.o"


def _run(coll: Collection, pkt: bytes) -> tuple[object, ...]:
    try:
        r = coll.programs["xdp_irq_flags"].test_run(pkt)
    except Exception as e:  # the kernel refusing an input must be matched by pyxdp
        return (type(e).__name__, getattr(e, "errno", None))
    return (r.retval, r.data_out)


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_irq_flags_match_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = load_collection_spec(OBJ)
    pkts = [*corpus(1), ("ff", bytes([0xFF]) * 64)]
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        verdicts = set()
        for name, pkt in pkts:
            k, u = _run(kern, pkt), _run(user, pkt)
            assert u == k, name
            verdicts.add(k[0])
        counts = [kern.maps["counts"][i] for i in range(3)]
        assert [user.maps["counts"][i] for i in range(3)] == counts
        assert {1, 2} <= verdicts and counts[0] > 0 and counts[1] > 0
