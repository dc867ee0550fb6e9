"""BPF linked lists (pyxdp.vm.bpf_list) and refcounted objects: samples/graph_list.o on
both engines against a model of the sample in Python (the lists' order, the values read
through owning and non-owning references, objects on two lists at once, a push of an
object on a list already failing), the JIT's list and refcount kfuncs native, and the
objects left on a list freed when the value is updated and when the map goes; tests/kernel/
test_graph_list_kernel.py compares the sample with Linux, tests/test_verifier.py the
verifier's verdicts on the usual mistakes."""

from __future__ import annotations

import gc
import random
from collections import deque
from functools import partial
from pathlib import Path

import pytest

from pyxdp.collection import Collection, Program
from pyxdp.net.prog import jit_available
from pyxdp.testing.native import python_calls
from pyxdp.vm import bpf_list, helpers
from pyxdp.vm.memalloc import ObjArena, arena

OBJ = Path(__file__).resolve().parents[1] / "samples" / "graph_list.o"
PASS, DROP, TX = 2, 1, 3


class Model:
    """What samples/graph_list.c does, in Python."""

    def __init__(self) -> None:
        self.lists: list[deque[list[int]]] = [deque() for _ in range(4)]
        self.slots = [{"pushed": 0, "popped": 0, "peek": 0} for _ in range(4)]
        self.glist: deque[int] = deque()
        self.gsum = 0

    def run(self, pkt: bytes) -> int:
        cmd, k = pkt[0], pkt[1] % 4
        s, lst = self.slots[k], self.lists[k]
        if cmd in (0, 1):
            e = [len(pkt) + 1000, s["pushed"]]
            s["pushed"] += 1
            lst.append(e) if cmd else lst.appendleft(e)
            return TX
        if cmd in (2, 3):
            if not lst:
                return DROP
            v, seq = lst.pop() if cmd == 3 else lst.popleft()
            s["popped"] += v * 16 + seq
            return PASS
        if cmd == 4:
            s["peek"] += (lst[0][0] - 3 * lst[-1][0]) if lst else 0
            return PASS
        if cmd == 5:
            self.glist.append(len(pkt))
            if len(self.glist) <= 3:
                return PASS
            self.gsum += self.glist.popleft()
            return TX
        return PASS


def _packets(n: int) -> list[bytes]:
    rnd = random.Random(7)
    return [bytes([rnd.choice((0, 0, 1, 1, 2, 3, 4, 5, 6)), rnd.randrange(8)]) +
            bytes(rnd.randrange(12, 60)) for _ in range(n)]


def _run_against(prog: Program, model: Model) -> None:
    for pkt in _packets(200):
        assert prog.test_run(pkt).retval == model.run(pkt), pkt[:2].hex()


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_lists_keep_order_and_free_what_they_hold(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    gc.collect()  # maps of earlier tests drop their objects now, not in the middle
    before = arena().live()
    model = Model()
    with Collection.load(OBJ, engine=engine) as c:
        prog = c.programs["xdp_graph_list"]

        py_calls = python_calls([bpf_list, helpers._spin_lock, helpers._spin_unlock],
                                partial(_run_against, prog, model))
        for k in range(4):
            v = c.maps["slots"][k]
            assert {n: v[n] for n in ("pushed", "popped", "peek")} == model.slots[k]
            assert v["head"] == {"__opaque": [0, 0]}  # user space never sees the pointers
        assert int.from_bytes(c.maps[".bss"][0], "little") == model.gsum
        held = sum(map(len, model.lists)) + len(model.glist)
        assert arena().live() - before == held > 0
        # the list kfuncs and the spin locks ran natively on the JIT
        assert (py_calls == 0) == (engine == "jit")
        # an update drops what the value's list held; the list is empty after
        c.maps["slots"][1] = {"pushed": 0, "lock": {"val": 0}, "head": {"__opaque": [0, 0]},
                              "popped": 0, "peek": 0}
        held -= len(model.lists[1])
        assert arena().live() - before == held
        assert prog.test_run(b"\x02\x01" + bytes(14)).retval == DROP
        del prog
    del c
    gc.collect()  # the maps went: their lists' objects are dropped (bpf_list_head_free)
    assert arena().live() == before


class RefcountModel:
    """What samples/graph_list.c's xdp_graph_refcount does: (list a, list b, sum, fails)
    per value, the objects as [value] lists (one object on both lists is one list)."""

    def __init__(self) -> None:
        self.pairs: list[tuple[deque[list[int]], deque[list[int]], list[int]]] = [
            (deque(), deque(), [0, 0]) for _ in range(2)]

    def run(self, pkt: bytes) -> int:
        cmd = pkt[0]
        a, b, acc = self.pairs[pkt[1] % 2]
        if cmd == 0:
            obj = [len(pkt)]
            a.appendleft(obj)
            b.append(obj)
            return TX
        if cmd in (1, 2):
            lst = a if cmd == 1 else b
            if not lst:
                return DROP
            obj = lst.popleft() if cmd == 1 else lst.pop()
            acc[0] += obj[0] * (1 if cmd == 1 else 3)
            return PASS
        if cmd == 3:
            if not a:
                return DROP
            if any(x is a[0] for x in b):
                acc[1] += 1
                return DROP
            b.append(a[0])
            return TX
        return PASS

    def live(self) -> int:
        return len({id(x) for a, b, _ in self.pairs for x in (*a, *b)})


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_refcounted_objects_on_two_lists(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    gc.collect()
    before = arena().live()
    acquires = []
    real = ObjArena.acquire
    monkeypatch.setattr(ObjArena, "acquire",
                        lambda self, addr: acquires.append(addr) or real(self, addr))
    model = RefcountModel()
    rnd = random.Random(5)
    with Collection.load(OBJ, engine=engine) as c:
        prog = c.programs["xdp_graph_refcount"]
        for _ in range(200):
            pkt = bytes([rnd.choice((0, 0, 0, 1, 2, 3, 3)), rnd.randrange(2)]) + \
                bytes(rnd.randrange(12, 60))
            assert prog.test_run(pkt).retval == model.run(pkt), pkt[:2].hex()
        for k in range(2):
            v = c.maps["pairs"][k]
            assert [v["sum"], v["fails"]] == model.pairs[k][2]
        assert model.pairs[0][2][1] > 0 and arena().live() - before == model.live() > 0
        # bpf_refcount_acquire ran natively on the JIT
        assert (len(acquires) == 0) == (engine == "jit")
        del prog
    del c
    gc.collect()  # both lists of each value drop their references: every object is freed
    assert arena().live() == before
