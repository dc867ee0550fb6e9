"""BPF red-black trees (pyxdp.vm.bpf_rbtree): samples/rbtree.o on both engines against
Linux 6.18's BPF_PROG_TEST_RUN results (pinned here; tests/kernel/test_rbtree_kernel.py
compares Linux with both engines directly): the verdicts, the sums of what removes took
out and the shapes the walks found (bpf_rbtree_root/left/right hashed per slot), the
refcounted objects in a tree and a list at once; the JIT's tree kfuncs native (the add
calling the program's less from machine code, only a failing add on Python); and the
objects left in a tree freed when the value is updated and when the map goes.
tests/test_verifier.py holds the verifier's verdicts on the usual mistakes."""

from __future__ import annotations

import gc
import hashlib
import random
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.errors import HelperFault
from pyxdp.net.prog import jit_available
from pyxdp.testing.native import python_calls
from pyxdp.vm import bpf_rbtree
from pyxdp.vm.memalloc import arena

OBJ = Path(__file__).resolve().parents[1] / "samples" / "rbtree.o"

# Linux's results for the packets below: sha256 of the verdicts (first 16 hex digits),
# then each slot's value without its lock, root and list head.
LINUX_TREE = "09f3f1433cf79513", [
    {"added": 56, "sum": 225869, "shape": 18139577068396843123, "depth": 4},
    {"added": 62, "sum": 247212, "shape": 852591022628541730, "depth": 4}]
LINUX_GSUM = 332801685655
LINUX_REFCOUNT = "0e063fb64fa0dff6", [
    {"sum": 797, "fails": 903, "shape": 69397878809},
    {"sum": 1319, "fails": 1007, "shape": 1138192880498726}]


def _packets(n: int, cmds: tuple[int, ...], seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    return [bytes([rnd.choice(cmds), rnd.randrange(2), rnd.randrange(64)]) +
            bytes(rnd.randrange(12, 60)) for _ in range(n)]


def _plain(v: dict[str, object]) -> dict[str, object]:
    return {k: x for k, x in v.items() if k not in ("root", "head", "lock")}


_PY = (bpf_rbtree.rbtree_add, bpf_rbtree.rbtree_remove, bpf_rbtree.rbtree_first,
       bpf_rbtree.rbtree_root, *(bpf_rbtree.RBTREE_KFUNCS[f"bpf_rbtree_{k}"]
                                 for k in ("left", "right")))


def _run(prog: object, pkts: list[bytes]) -> tuple[str, int]:
    """The run's verdicts (sha256, first 16 hex digits) and how often the Python tree
    kfuncs ran."""
    out: list[int] = []
    calls = python_calls(_PY, lambda: out.extend(
        prog.test_run(p).retval for p in pkts))  # type: ignore[attr-defined]
    return hashlib.sha256(bytes(out)).hexdigest()[:16], calls


def _check(c: Collection, engine: str, before: int) -> None:
    prog = c.programs["xdp_rbtree"]
    digest, calls = _run(prog, _packets(300, (0, 0, 0, 0, 1, 2, 2, 3, 3, 4), 17))
    assert digest == LINUX_TREE[0]
    assert [_plain(c.maps["tslots"][i]) for i in range(2)] == LINUX_TREE[1]
    assert int.from_bytes(c.maps[".bss"][0], "little") == LINUX_GSUM
    assert c.maps["tslots"][0]["root"] == {"__opaque": [0, 0]}  # never shown to users
    # every tree kfunc natively on the JIT, less called from machine code
    assert (calls == 0) == (engine == "jit")
    held = arena().live() - before
    assert held > 0
    # an update drops what the value's tree held; the tree is empty after
    c.maps["tslots"][1] = {"lock": {"val": 0}, "root": {"__opaque": [0, 0]}, "added": 0,
                           "sum": 0, "shape": 0, "depth": 0}
    assert 0 < arena().live() - before < held
    assert prog.test_run(b"\x01\x01\x00" + bytes(14)).retval == 1  # XDP_DROP: empty
    digest, calls = _run(c.programs["xdp_rbtree_refcount"],
                         _packets(200, (0, 0, 0, 1, 2, 3, 4), 19))
    assert digest == LINUX_REFCOUNT[0]
    assert [_plain(c.maps["boths"][i]) for i in range(2)] == LINUX_REFCOUNT[1]
    if engine == "jit":  # only the adds of an object in the tree already (-EINVAL)
        assert calls == sum(c.maps["boths"][i]["fails"] // 100 for i in range(2))


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_trees_as_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    gc.collect()  # maps of earlier tests drop their objects now, not in the middle
    before = arena().live()
    with Collection.load(OBJ, engine=engine) as c:
        _check(c, engine, before)
    del c
    gc.collect()  # the maps went: their trees' objects are dropped (bpf_rb_root_free)
    assert arena().live() == before


class _Words:
    """Memory of 8-byte words by address (what _Tree reads and writes)."""

    def __init__(self, words: dict[int, int]) -> None:
        self.words = words

    def load(self, addr: int, size: int) -> int:
        return self.words.get(addr, 0)

    def store(self, addr: int, size: int, value: int) -> None:
        self.words[addr] = value


def test_a_corrupt_tree_faults_instead_of_looping() -> None:
    # only an unverified program can write a node's words: one whose right child is
    # its own left child loops the successor walk, which gives up with a fault
    a, b = 0x1000, 0x2000
    t = bpf_rbtree._Tree(_Words({a + 8: b, b + 16: b}), 0x100)
    with pytest.raises(HelperFault, match="corrupt"):
        t.next(a)
