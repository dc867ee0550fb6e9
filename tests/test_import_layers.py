"""Imports point one way: no module of pyxdp imports one that (through any chain) imports
it back, and the layers stand in order uapi/asm -> vm -> maps -> net -> xsk -> cli.

Every import statement counts, wherever it stands: module level, inside a function
(a lazy import is still a dependency) or under ``if TYPE_CHECKING:`` (a type is one
too: those layers see what is above them through protocols)."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "pyxdp"
# Lower layers first; a module may import from its own layer and the ones before it.
LAYERS = (("pyxdp.uapi", "pyxdp.asm"), ("pyxdp.vm",), ("pyxdp.maps",), ("pyxdp.net",),
          ("pyxdp.xsk",), ("pyxdp.cli",))


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


@cache
def _graph() -> dict[str, set[str]]:
    """Module -> the pyxdp modules it imports (``from pkg import mod`` names ``pkg.mod``)."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in mods)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for a in node.names:
                    full = f"{base}.{a.name}"
                    if full in mods:
                        deps.add(full)
                    elif base in mods:
                        deps.add(base)
        deps.discard(name)
        graph[name] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _layer(module: str) -> int | None:
    for i, names in enumerate(LAYERS):
        if any(module == n or module.startswith(n + ".") for n in names):
            return i
    return None


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_cycles() -> None:
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": {"e"}}
    assert sorted(_cycles(g)) == [["a", "b", "c"], ["e", "e2"]]


def test_layers_import_downwards() -> None:
    graph = _graph()
    assert {"pyxdp.net.napi", "pyxdp.net.filter", "pyxdp.vm.jit.entry"} <= set(graph)
    up = [f"{a} -> {b}" for a, deps in sorted(graph.items()) for b in sorted(deps)
          if (la := _layer(a)) is not None and (lb := _layer(b)) is not None and lb > la]
    assert up == []
