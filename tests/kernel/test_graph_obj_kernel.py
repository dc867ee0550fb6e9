"""Lists and trees inside allocated objects against Linux: samples/graph_obj.o (a
bpf_list_head and a bpf_rb_root beside the object's own bpf_spin_lock, the object kept
in a map value's __kptr between runs; objects holding a list on a map value's list)
over random commands under BPF_PROG_TEST_RUN on Linux and on pyxdp's interpreter and
JIT: the same verdicts and the same map contents (but the kptrs, locks and list heads,
which user space reads as zeros on Linux); after a user-space update of a value whose
bag holds objects, the bag is gone on both. The verifier's verdicts on the usual
mistakes are tests/verifier_objects/graph_obj.o's (tests/kernel/test_verifier_kernel.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.prog import jit_available

pytestmark = pytest.mark.kernel

OBJ = Path(__file__).resolve().parents[2] / "samples" / "graph_obj.o"
TX, REDIRECT = 3, 4


def _packets(n: int, seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    return [bytes([rnd.choice((0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 5, 5, 6)), rnd.randrange(4),
                   rnd.randrange(256)]) + bytes(rnd.randrange(12, 60)) for _ in range(n)]


def _slot(v: dict[str, object]) -> dict[str, object]:
    return {k: v[k] for k in ("sum", "made")}


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_graph_obj_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = load_collection_spec(OBJ)
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        kp, up = kern.programs["xdp_graph_obj"], user.programs["xdp_graph_obj"]
        verdicts = []
        for pkt in _packets(300, 17):
            k = kp.test_run(pkt).retval
            assert up.test_run(pkt).retval == k, pkt[:3].hex()
            verdicts.append(k)
        assert {1, 2, TX, REDIRECT} <= set(verdicts)
        for i in range(4):
            assert _slot(user.maps["slots"][i]) == _slot(kern.maps["slots"][i])
        # an update drops the bag the value held (and what its list and tree held)
        zero = dict(user.maps["slots"][0])
        for key in ("sum", "made"):
            zero[key] = 0
        for c in (kern, user):
            c.maps["slots"][0] = zero
        for pkt in (b"\x01\x00\x00", b"\x03\x00\x00"):
            assert kp.test_run(pkt + bytes(14)).retval == \
                up.test_run(pkt + bytes(14)).retval == TX
