"""BPF red-black trees against Linux: samples/rbtree.o (add with the program's less,
remove of the leftmost and of a node searched down from the root, the shape walked
with bpf_rbtree_root/left/right, under a map value's and a global variable's
bpf_spin_lock; refcounted objects in a tree and a list at once, removed through an
owned reference) over random commands under BPF_PROG_TEST_RUN on Linux and on pyxdp's
interpreter and JIT: the same verdicts, the same map contents (but the roots and
heads, whose pointers Linux shows user space as ones into its own copy) and so the
same shapes, folded into each slot's hash as the walks find them; and after a
user-space update of a value whose tree holds objects, the same empty tree on both.
The verifier walks tests/verifier_objects/rbtree.o's programs (the usual mistakes) as
Linux does: the same verdicts (tests/kernel/test_verifier_kernel.py) and instructions
processed."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import VerifierError
from pyxdp.kernel.backend import KernelBackend
from pyxdp.net.prog import jit_available
from pyxdp.verifier import verify

pytestmark = pytest.mark.kernel

OBJ = Path(__file__).resolve().parents[2] / "samples" / "rbtree.o"
MISTAKES = Path(__file__).resolve().parents[1] / "verifier_objects" / "rbtree.o"


def _processed(log: str) -> int:
    m = re.search(r"processed (\d+) insns", log)
    assert m, log[-500:]
    return int(m.group(1))


def test_rbtree_mistakes_walk_as_linux() -> None:
    spec = load_collection_spec(MISTAKES)
    kb = KernelBackend(spec)
    linux: dict[str, int] = {}
    try:
        handles: dict[str, object] = {}
        for name, ms in spec.maps.items():
            handles[name] = kb.create_map(ms, handles)  # type: ignore[arg-type]
        for name, prog in spec.programs.items():
            try:
                linux[name] = kb.load_program(prog, handles).info().verified_insns  # type: ignore[arg-type]
            except VerifierError as e:
                linux[name] = _processed(e.log)
    finally:
        kb.close()
    mine: dict[str, int] = {}
    for name, prog in spec.programs.items():
        try:
            mine[name] = verify(prog, spec.maps, btf=spec.btf).insns_processed
        except VerifierError as e:
            mine[name] = int(e.log.rsplit("processed ", 1)[1].split()[0])
    assert mine == linux


def _packets(n: int, cmds: tuple[int, ...], seed: int, keys: int = 64) -> list[bytes]:
    rnd = random.Random(seed)
    return [bytes([rnd.choice(cmds), rnd.randrange(2), rnd.randrange(keys)]) +
            bytes(rnd.randrange(12, 60)) for _ in range(n)]


def _plain(v: dict[str, object]) -> dict[str, object]:
    return {k: x for k, x in v.items() if k not in ("root", "head", "lock")}


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_rbtree_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = load_collection_spec(OBJ)
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        kp, up = kern.programs["xdp_rbtree"], user.programs["xdp_rbtree"]
        verdicts = []
        # trees of up to some 150 nodes: every insert and erase case, walks 6 deep
        for pkt in _packets(800, (0, 0, 0, 0, 0, 0, 1, 2, 2, 3, 3, 4), 17, 256):
            k = kp.test_run(pkt).retval
            assert up.test_run(pkt).retval == k, pkt[:3].hex()
            verdicts.append(k)
        assert {1, 2, 3} <= set(verdicts)
        for i in range(2):
            assert _plain(user.maps["tslots"][i]) == _plain(kern.maps["tslots"][i])
            assert user.maps["tslots"][i]["depth"] == 6  # the walks went deep
        assert user.maps[".bss"][0] == kern.maps[".bss"][0]
        # an update frees the value's tree: removing finds it empty on both
        empty = {"lock": {"val": 0}, "root": {"__opaque": [0, 0]}, "added": 0, "sum": 0,
                 "shape": 0, "depth": 0}
        for c in (kern, user):
            c.maps["tslots"][1] = empty
        first = b"\x01\x01\x00" + bytes(14)
        assert kp.test_run(first).retval == up.test_run(first).retval == 1
        # refcounted objects in a tree and a list
        kp, up = kern.programs["xdp_rbtree_refcount"], user.programs["xdp_rbtree_refcount"]
        verdicts = []
        for pkt in _packets(200, (0, 0, 0, 1, 2, 3, 4), 19):
            k = kp.test_run(pkt).retval
            assert up.test_run(pkt).retval == k, pkt[:3].hex()
            verdicts.append(k)
        assert {1, 2, 3} <= set(verdicts)
        for i in range(2):
            assert _plain(user.maps["boths"][i]) == _plain(kern.maps["boths"][i])
        fails = [kern.maps["boths"][i]["fails"] for i in range(2)]
        assert any(f % 100 for f in fails) and any(f >= 100 for f in fails)
