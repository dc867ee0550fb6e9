"""The JIT engine's use of LLVM across threads (pyxdp.vm.jit.engine): what each build
leaves behind and what runs while a program's parts build on two threads."""

from __future__ import annotations

import gc
from typing import Any

import pytest

pytest.importorskip("llvmlite")

# Parses, fails verification (a return of the wrong type): a build that raises.
BAD = "define i64 @pyxdp_engine_probe() {\n  ret i32 0\n}\n"
GOOD = "define i64 @pyxdp_engine_probe_{k}() {{\n  ret i64 {k}\n}}\n"


def test_a_failed_build_disposes_its_module_and_context_itself(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The module goes before its context inside the build: left to the collector (the
    failure's traceback keeps the frame in a cycle) the two could go in either order."""
    from pyxdp.vm.jit import engine

    made: list[Any] = []
    create = engine.llvm.create_context

    def counted() -> Any:
        made.append(create())
        return made[-1]

    llvm = engine._llvm()
    monkeypatch.setenv("PYXDP_JIT_CACHE", "off")
    monkeypatch.setattr(engine.llvm, "create_context", counted)
    for texts in ([BAD], [BAD, GOOD.format(k=1)]):
        with pytest.raises(RuntimeError):
            llvm.compile_modules(texts, 2)
    assert len(made) == 3 and all(c.closed for c in made)


def test_parts_build_with_no_cyclic_collection_and_one_build_at_a_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A program's parts build past llvmlite's lock, so no collection may dispose other
    threads' LLVM objects meanwhile; a lone module builds under that lock as ever."""
    from pyxdp.vm.jit import engine

    llvm = engine._llvm()
    monkeypatch.setenv("PYXDP_JIT_CACHE", "off")
    seen: list[tuple[bool, bool, bool]] = []
    build = engine._Llvm._build

    def watched(self: Any, *args: Any) -> Any:
        seen.append((gc.isenabled(), engine._COMPILE.locked(),
                     getattr(engine._OWN, "on", False)))
        return build(self, *args)

    monkeypatch.setattr(engine._Llvm, "_build", watched)
    assert gc.isenabled()
    objs, _ = llvm.compile_modules([GOOD.format(k=2), GOOD.format(k=3)], 2)
    assert len(objs) == 2 and seen == [(False, True, True)] * 2 and gc.isenabled()
    seen.clear()
    llvm.compile_modules([GOOD.format(k=4)], 2)
    assert seen == [(True, True, False)]
