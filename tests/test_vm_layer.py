"""The vm layer stands below maps and net: imports point one way (uapi/asm -> vm -> maps ->
net), and what the JIT does natively for maps and XDP helpers is registered from above."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VM = ROOT / "pyxdp" / "vm"
ABOVE = ("pyxdp.maps", "pyxdp.net", "pyxdp.xsk", "pyxdp.kernel", "pyxdp.cli")


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module an import statement names, wherever it stands (functions,
    ``if TYPE_CHECKING:``), relative imports resolved."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            out.append((node.lineno, base))
            out.extend((node.lineno, f"{base}.{a.name}") for a in node.names)
    return out


def test_vm_sources_import_nothing_above_the_vm() -> None:
    bad = [f"{p.relative_to(ROOT)}:{line}: {name}"
           for p in sorted(VM.rglob("*.py")) for line, name in _imports(p)
           if name.startswith(ABOVE)]
    assert bad == []


def test_importing_the_vm_and_its_jit_loads_nothing_above_it() -> None:
    pytest.importorskip("llvmlite")
    code = ("import sys\n"
            "import pyxdp.vm.interpreter, pyxdp.vm.helpers, pyxdp.vm.jit.lower, "
            "pyxdp.vm.jit.runtime\n"
            f"print(sorted(m for m in sys.modules if m.startswith({ABOVE!r})))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_native_xdp_helpers_are_the_registered_twins() -> None:
    pytest.importorskip("llvmlite")
    from pyxdp.net.filter import XDP_HELPERS
    from pyxdp.net.xdp_jit import NATIVE_XDP_HELPERS
    from pyxdp.vm.jit.natives import native_helpers

    native = dict(NATIVE_XDP_HELPERS)  # (iterating loads every deferred helper's twin)
    twins = native_helpers()
    assert native == {hid: t.kind for hid, t in twins.items()}
    # Every twin stands for a helper an XDP program may call, under the same id.
    assert set(twins) <= set(XDP_HELPERS)
    # Twins that define an IR function name it after their kind, once.
    kinds = [t.kind for t in twins.values() if t.define is not None]
    assert len(kinds) == len(set(kinds))
    assert {"adjust_head", "csum_diff", "redirect", "redirect_xsk"} <= set(kinds)
