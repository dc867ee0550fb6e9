"""BPF linked lists (pyxdp.vm.bpf_list): samples/graph_list.o on both engines against a
model of the sample in Python (the lists' order, the values read through owning and
non-owning references), the JIT's list kfuncs native, and the objects left on a list
freed when the value is updated and when the map goes; tests/kernel/
test_graph_list_kernel.py compares the sample with Linux, tests/test_verifier.py the
verifier's verdicts on the usual mistakes."""

from __future__ import annotations

import gc
import random
from collections import deque
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.net.prog import jit_available
from pyxdp.vm import bpf_list
from pyxdp.vm.memalloc import arena

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


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_lists_keep_order_and_free_what_they_hold(engine: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    gc.collect()  # maps of earlier tests drop their objects now, not in the middle
    before = arena().live()
    py_calls = []
    real = bpf_list.map_arena
    monkeypatch.setattr(bpf_list, "map_arena", lambda vm: py_calls.append(1) or real(vm))
    model = Model()
    with Collection.load(OBJ, engine=engine) as c:
        prog = c.programs["xdp_graph_list"]
        for pkt in _packets(200):
            assert prog.test_run(pkt).retval == model.run(pkt), pkt[:2].hex()
        for k in range(4):
            v = c.maps["slots"][k]
            assert {n: v[n] for n in ("pushed", "popped", "peek")} == model.slots[k]
            assert v["head"] == {"__opaque": [0, 0]}  # user space never sees the pointers
        assert int.from_bytes(c.maps[".bss"][0], "little") == model.gsum
        held = sum(map(len, model.lists)) + len(model.glist)
        assert arena().live() - before == held > 0
        # the list kfuncs ran natively on the JIT (Python's twin maps the arena)
        assert (len(py_calls) == 0) == (engine == "jit")
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
