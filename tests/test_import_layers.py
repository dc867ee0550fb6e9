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


# What a first packet on the userspace backend must not load: the models of features a
# plain XDP program does not use load when something uses them (issue 13, load time).
_FIRST_PACKET = """
import json, sys
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.packets import udp_packet
with Collection(load_collection_spec(sys.argv[1]), "userspace", engine=sys.argv[2]) as c:
    prog = next(iter(c.programs.values()))
    prog.test_run(udp_packet(b"x" * 64))
    print(json.dumps([sorted(sys.modules), getattr(prog.handle.vm, "code", None) is not None
                      and prog.handle.vm.code.from_disk]))
"""
_LAZY = ("logging", "llvmlite", "pyxdp.kernel", "pyxdp.net.trace", "pyxdp.uapi.xdp_trace",
         "pyxdp.net.xdp_metadata", "pyxdp.net.xdp_dynptr", "pyxdp.vm.bpf_crypto",
         "pyxdp.net.xdp_mem", "pyxdp.net.page_pool", "pyxdp.net.nf_conntrack",
         "pyxdp.net.nf_flow_table", "pyxdp.net.xfrm_state", "pyxdp.vm.task_kfuncs",
         "pyxdp.vm.bpf_list", "pyxdp.vm.bpf_rbtree", "pyxdp.maps.hashtab",
         "pyxdp.maps.devmap", "pyxdp.maps.cpumap", "pyxdp.maps.lpm_trie",
         "pyxdp.maps.perf_event_array",  # (XDP's perf_event_output loads it with the array)
         # helpers a program loads by calling them (XDP_HELPERS and BASE_HELPERS defer them)
         "pyxdp.net.filter_fib", "pyxdp.net.fib", "pyxdp.net.filter_sk",
         "pyxdp.net.inet_hashtables", "pyxdp.net.syncookies", "pyxdp.vm.bpf_timer",
         "pyxdp.vm.bpf_async", "pyxdp.vm.bpf_task_work",
         "pyxdp.vm.stream")  # a program's streams: made when first written or read


def _first_packet(obj: str, engine: str, cache: Path) -> tuple[set[str], bool]:
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYXDP_JIT_CACHE=str(cache))
    out = subprocess.run([sys.executable, "-c", _FIRST_PACKET, str(ROOT / "samples" / obj),
                          engine], capture_output=True, text=True, check=True, cwd=ROOT,
                         env=env)
    mods, from_disk = json.loads(out.stdout)
    return set(mods), from_disk


def test_a_first_packet_loads_only_what_it_uses(tmp_path: Path) -> None:
    mods, _ = _first_packet("xdp1.o", "interp", tmp_path)
    assert "pyxdp.net.prog" in mods and "pyxdp.maps.arraymap" in mods  # it did run
    loaded = sorted(m for m in mods if any(m == n or m.startswith(n + ".") for n in _LAZY))
    assert loaded == []


def test_a_program_from_the_disk_cache_is_not_lowered(tmp_path: Path) -> None:
    """A JIT program whose machine code the disk cache holds never loads the lowering."""
    cold, from_disk = _first_packet("xdp1.o", "jit", tmp_path)
    assert "pyxdp.vm.jit.lower" in cold and not from_disk
    warm, from_disk = _first_packet("xdp1.o", "jit", tmp_path)
    assert from_disk and "pyxdp.vm.jit.engine" in warm
    assert "pyxdp.vm.jit.lower" not in warm


def test_a_warm_jit_load_loads_only_the_helpers_it_calls(tmp_path: Path) -> None:
    """A JIT program from the disk cache loads the helpers its calls name and their
    native twins, as the interpreter does: xdp1.o calls no deferred helper, so neither
    those helpers' modules (the routing and socket helpers, bpf_timer) nor anything
    else a first packet leaves unloaded (llvmlite apart) loads with it."""
    _first_packet("xdp1.o", "jit", tmp_path)
    warm, from_disk = _first_packet("xdp1.o", "jit", tmp_path)
    assert from_disk and "pyxdp.net.xdp_jit" in warm
    loaded = sorted(m for m in warm if any(m == n or m.startswith(n + ".") for n in _LAZY)
                    and m.split(".")[0] != "llvmlite")
    assert loaded == []


_DEFERRED = """
import importlib, json
from pyxdp.net.filter import XDP_HELPERS
from pyxdp.vm.context import BASE_HELPERS
out = {}
for name, table in (("xdp", XDP_HELPERS), ("base", BASE_HELPERS)):
    deferred = table.deferred()
    by_module = {}
    for hid, module in deferred.items():
        by_module.setdefault(module, []).append(hid)
    out[name] = {m: sorted(ids) for m, ids in by_module.items()}
tables = {"pyxdp.net.filter_fib": "FIB_HELPERS", "pyxdp.net.filter_sk": "SK_HELPERS",
          "pyxdp.vm.bpf_timer": "TIMER_HELPERS"}
out["own"] = {m: sorted(getattr(importlib.import_module(m), t)) for m, t in tables.items()}
print(json.dumps(out))
"""


def test_deferred_helpers_are_their_modules_own() -> None:
    """The ids a helper table defers to a module are exactly those the module defines
    (a fresh process: nothing has looked them up yet)."""
    import json
    import subprocess
    import sys
    out = json.loads(subprocess.run([sys.executable, "-c", _DEFERRED], capture_output=True,
                                    text=True, check=True, cwd=ROOT).stdout)
    own = out["own"]
    assert out["base"] == {"pyxdp.vm.bpf_timer": own["pyxdp.vm.bpf_timer"]}
    assert out["xdp"] == own  # XDP's table defers the base's too
    assert own["pyxdp.net.filter_fib"] == [69, 163]
    assert own["pyxdp.vm.bpf_timer"] == [169, 170, 171, 172]
