"""Program-allocated objects (pyxdp.vm.memalloc): samples/local_kptr.o on both engines
keeps one object per slot in the arena, frees the one it replaces (natively on the JIT)
and the one a map update overwrites; tests/kernel/test_local_kptr_kernel.py compares the
sample with Linux, tests/test_verifier.py the verifier's verdicts on the usual mistakes."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import UnsupportedHelper
from pyxdp.net.prog import jit_available
from pyxdp.verifier import verify
from pyxdp.vm import memalloc
from pyxdp.vm.memalloc import ObjArena, arena

OBJ = Path(__file__).resolve().parents[1] / "samples" / "local_kptr.o"


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_objects_live_in_the_arena_until_dropped(engine: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    gc.collect()  # maps of earlier tests drop their objects now, not in the middle
    frees: list[int] = []
    free = ObjArena.free

    def counted(self: ObjArena, addr: int) -> None:
        frees.append(addr)
        free(self, addr)

    monkeypatch.setattr(ObjArena, "free", counted)
    with Collection.load(OBJ, engine=engine) as c:
        prog = c.programs["xdp_local_kptr"]
        before = arena().live()
        for first in (0, 1, 1, 2, 2, 2):
            assert prog.test_run(bytes([first]) * 50).retval == 2
        assert arena().live() - before == 3  # one object per slot used
        s = c.maps["slots"]
        assert s[2]["replaced"] == 2 and s[2]["bytes"] == 100 and s[2]["flow"] == 0
        assert prog.test_run(bytes([0xFF]) * 50).retval == 2  # slot 3 is empty: PASS
        # the objects program runs dropped were freed natively on the JIT
        assert len(frees) == (0 if engine == "jit" else 3)
        s[1] = {"replaced": 0, "bytes": 0, "peeked": 0, "flow": 0}  # frees slot 1's
        assert arena().live() - before == 2 and len(frees) == (1 if engine == "jit" else 4)
        del prog, s
    del c
    gc.collect()  # the map went: the objects its values held are dropped (bpf_map_free)
    assert arena().live() == before


def test_allocator_classes_and_reuse() -> None:
    a = ObjArena(1 << 16)
    x = a.alloc(8)
    y = a.alloc(4088)
    assert a.alloc(4089) == 0 and a.alloc(0) == 0  # no size class holds it
    a.buf[x - memalloc.ARENA_BASE] = 7
    a.free(x)
    assert a.alloc(1) == x and a.buf[x - memalloc.ARENA_BASE] == 0  # reused, zeroed
    with pytest.raises(Exception, match="not a live object"):
        a.free(y)
        a.free(y)
    assert a.live() == 1


def test_rbtree_stays_unsupported() -> None:
    # Linux 6.18 accepts both programs; pyxdp models lists and refcounted objects
    # (tests/test_graph_list.py) but not the red-black tree, and says so.
    spec = load_collection_spec(Path(__file__).parent / "verifier_objects" / "unmodelled" /
                                "graph.o")
    for name, what in (("xdp_obj_with_rb_node", "struct tnode, which holds bpf_rb_node"),
                       ("xdp_rbtree_first", "kfunc bpf_rbtree_first is not modelled")):
        with pytest.raises(UnsupportedHelper, match=what):
            verify(spec.programs[name], spec.maps, btf=spec.btf)
