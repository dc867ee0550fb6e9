"""Resilient spin locks (bpf_res_spin_lock and the _irqsave pair) and special fields in
nested structs against Linux: samples/res_lock.o under BPF_PROG_TEST_RUN on Linux and on
pyxdp's interpreter and JIT (the same verdicts, return codes and counts: -EDEADLK for a
lock the run holds; the numbers iterator under a lock), and every program of
samples/res_lock_bad.o refused by both verifiers with the same first error and errno."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import VerifierError
from pyxdp.kernel.verifier_log import verifier_reason
from pyxdp.net.prog import jit_available

pytestmark = [pytest.mark.kernel, pytest.mark.xdist_group("kernel")]

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _run(coll: Collection, pkt: bytes) -> tuple[object, ...]:
    r = coll.programs["xdp_res_lock"].test_run(pkt)
    more = tuple(coll.programs[p].test_run(pkt).retval
                 for p in ("xdp_res_lock_iter", "xdp_res_lock_neg", "xdp_res_lock_global"))
    return (r.retval, tuple(coll.maps["out"][i] for i in range(4)), more)


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_res_lock_match_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = load_collection_spec(SAMPLES / "res_lock.o")
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        seen = []
        for first in (0, 1, 2, 3, 4, 7, 0):
            pkt = bytes([first]) * 64
            k = _run(kern, pkt)
            assert _run(user, pkt) == k, first
            seen.append(k)
        counts = [kern.maps["locks"][i] for i in range(4)]
        assert [user.maps["locks"][i] for i in range(4)] == counts
        assert kern.maps["deep"][0] == user.maps["deep"][0]
        assert kern.maps["plain"][0] == user.maps["plain"][0]
    # the AA case is -EDEADLK and XDP_DROP, the others take both locks
    assert seen[0] == (1, (0, -35, 0, 0), (2, 2, 2)) and \
        seen[1] == (2, (0, 0, 0, 0), (2, 2, 2))


def _reason(spec: object, backend: str) -> tuple[int, str]:
    with pytest.raises(VerifierError) as e:
        Collection(spec, backend).close()  # type: ignore[arg-type]
    err = e.value
    if backend == "kernel":
        return err.errno, verifier_reason(err.log)
    return err.errno, str(err).split("): ", 1)[-1].split(" at pc ")[0]


def test_res_lock_refusals_match_linux() -> None:
    spec = load_collection_spec(SAMPLES / "res_lock_bad.o")
    assert len(spec.programs) >= 18
    for name, ps in spec.programs.items():
        one = dataclasses.replace(spec, programs={name: dataclasses.replace(ps, autoload=True)})
        assert _reason(one, "userspace") == _reason(one, "kernel"), name
