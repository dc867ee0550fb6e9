"""The API reference builds from the docstrings (docs/api.py, pdoc): a page for every module
of pyxdp, and no warning (a module that fails to import, an unresolvable reference)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _api() -> object:
    spec = importlib.util.spec_from_file_location("pyxdp_docs_api", ROOT / "docs" / "api.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_api_reference_builds_every_module(tmp_path: Path) -> None:
    api = _api()
    pages = api.build(tmp_path)  # type: ignore[attr-defined]
    modules = api.modules()  # type: ignore[attr-defined]
    assert {"pyxdp", "pyxdp.samples", "pyxdp.collection", "pyxdp.net.netdevice",
            "pyxdp.testing.plugin"} <= set(modules)
    assert len(pages) == len(modules) + 1  # and the index
    page = (tmp_path / "pyxdp" / "samples.html").read_text()
    assert "The shipped sample" in page and "def path" not in page.split("<body")[0]
