"""Builds pyxdp's API reference from its docstrings (pdoc): ``python docs/api.py OUTDIR``.

Every module of the package is documented, subpackages included (pdoc alone stops at the
names a package's ``__all__`` lists). Any warning pdoc raises - a module that fails to
import, a reference it cannot resolve - fails the build, so the reference never silently
loses a module.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings
from pathlib import Path


def modules() -> list[str]:
    """Every importable module of pyxdp, sorted; ``__main__`` modules are scripts, not API."""
    import pyxdp
    names = ["pyxdp"] + [m.name for m in pkgutil.walk_packages(pyxdp.__path__, "pyxdp.")]
    return sorted(n for n in names if not n.endswith("__main__"))


def build(out: Path) -> list[Path]:
    """Writes the reference into ``out``; returns the HTML pages written. Raises
    ``RuntimeError`` naming the modules that got no page."""
    import pdoc
    import pdoc.render
    # No highlighted source beside each function, no search index: each would add a
    # third to the build's time.
    pdoc.render.configure(docformat="restructuredtext", footer_text="pyxdp API reference",
                          search=False, show_source=False)
    every = modules()
    for name in every:  # names a package exports lazily (PEP 562 __getattr__), resolved now
        mod = importlib.import_module(name)
        for attr in getattr(mod, "__all__", ()):
            getattr(mod, attr, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # Functions that NamedTuple and hypothesis's @composite generate carry string
        # annotations outside their module's namespace: pdoc prints those as written.
        warnings.filterwarnings("ignore", r"Error parsing type annotation .*ForwardRef\(",
                                UserWarning)
        # Every module is named (a package's __all__ hides its submodules from pdoc's own
        # walk), so those pdoc's walk also reaches are named twice: one page each all the same.
        warnings.filterwarnings("ignore", r"The module specification .* has already been added",
                                UserWarning)
        pdoc.pdoc(*every, output_directory=out)
    pages = sorted(out.rglob("*.html"))
    made = {".".join(p.relative_to(out).with_suffix("").parts) for p in pages}
    missing = [m for m in every if m not in made]
    if missing:
        raise RuntimeError(f"no page for {', '.join(missing)}")
    return pages


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python docs/api.py OUTDIR\n")
        return 2
    pages = build(Path(argv[0]))
    print(f"{len(pages)} pages in {argv[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
