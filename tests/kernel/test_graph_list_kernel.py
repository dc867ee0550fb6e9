"""BPF linked lists against Linux: samples/graph_list.o (push, pop, front and back under a
map value's and a global variable's bpf_spin_lock; refcounted objects on two lists,
bpf_refcount_acquire, a push of an object on a list already) over random commands
under BPF_PROG_TEST_RUN on Linux and on pyxdp's interpreter and JIT: the same verdicts
and the same map contents (but the list heads, whose pointers Linux shows user space
as ones into its own copy); and after a user-space update of a value whose list holds
objects, the same empty list on both. The verifier's verdicts on the usual mistakes are
tests/verifier_objects/graph_list.o's (tests/kernel/test_verifier_kernel.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.prog import jit_available

pytestmark = pytest.mark.kernel

OBJ = Path(__file__).resolve().parents[2] / "samples" / "graph_list.o"


def _packets(n: int, cmds: tuple[int, ...], seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    return [bytes([rnd.choice(cmds), rnd.randrange(4)]) + bytes(rnd.randrange(12, 60))
            for _ in range(n)]


def _slot(v: dict[str, object]) -> dict[str, object]:
    return {k: x for k, x in v.items() if k not in ("head", "ha", "hb", "lock")}


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_graph_list_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = load_collection_spec(OBJ)
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        kp, up = kern.programs["xdp_graph_list"], user.programs["xdp_graph_list"]
        verdicts = []
        for pkt in _packets(250, (0, 0, 1, 1, 2, 3, 4, 5, 5), 11):
            k = kp.test_run(pkt).retval
            assert up.test_run(pkt).retval == k, pkt[:2].hex()
            verdicts.append(k)
        assert {1, 2, 3} <= set(verdicts)
        for i in range(4):
            assert _slot(user.maps["slots"][i]) == _slot(kern.maps["slots"][i])
        assert user.maps[".bss"][0] == kern.maps[".bss"][0]
        # an update frees the value's list: popping finds it empty on both
        empty = {"pushed": 0, "lock": {"val": 0}, "head": {"__opaque": [0, 0]}, "popped": 0,
                 "peek": 0}
        for c in (kern, user):
            c.maps["slots"][2] = empty
        pop = b"\x03\x02" + bytes(14)
        assert kp.test_run(pop).retval == up.test_run(pop).retval == 1
        # refcounted objects on two lists
        kp, up = kern.programs["xdp_graph_refcount"], user.programs["xdp_graph_refcount"]
        verdicts = []
        for pkt in _packets(200, (0, 0, 0, 1, 2, 3, 3), 13):
            k = kp.test_run(pkt).retval
            assert up.test_run(pkt).retval == k, pkt[:2].hex()
            verdicts.append(k)
        assert {1, 2, 3} <= set(verdicts)
        for i in range(2):
            assert _slot(user.maps["pairs"][i]) == _slot(kern.maps["pairs"][i])
        assert sum(kern.maps["pairs"][i]["fails"] for i in range(2)) > 0
