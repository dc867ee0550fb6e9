"""The sample XDP programs that ship with pyxdp: their objects, C sources and headers.

The samples are ordinary clang-compiled XDP objects (``samples/`` in the
repository, described in its README). The wheel installs them inside the
package, so an installed pyxdp finds them wherever it runs::

    from pyxdp import samples
    from pyxdp.collection import Collection

    with Collection.load(samples.path("xdp1.o")) as xdp1: ...

Paths written as in the repository, ``samples/xdp1.o``, also work from any
directory: where no such file exists relative to the working directory,
:func:`resolve` gives the shipped one (the CLI and ``Collection.load`` read
object paths through it, as the README's examples rely on). ``include/``
holds the headers the samples compile with (``-I`` :func:`include_dir`).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath
from typing import Final

from pyxdp.errors import ObjectError

__all__ = ["DIR", "include_dir", "names", "path", "resolve"]

DIR: Final = Path(__file__).resolve().parent / "_samples"
"""The samples' directory: ``samples/`` of the checkout (a link), or its copy in the wheel."""

_PREFIX: Final = "samples"


def path(name: str | os.PathLike[str]) -> Path:
    """The shipped sample ``name`` (``"xdp1.o"``, ``"xdp1.c"``, ``"loader/globals.v3.o"``).

    Raises :class:`pyxdp.ObjectError` naming the samples that exist when there is no such file.
    """
    rel = PurePath(name)
    if rel.is_absolute() or ".." in rel.parts:
        raise ObjectError("a sample is named relative to the samples directory", path=str(name))
    p = DIR / rel
    if not p.is_file():
        raise ObjectError(f"no such sample (there are: {', '.join(names())})", path=str(name))
    return p


def names() -> list[str]:
    """The sample objects at the top of the samples directory (``xdp1.o``, ...), sorted."""
    return sorted(p.name for p in DIR.glob("*.o"))


def include_dir() -> Path:
    """The headers the samples are compiled with (``pyxdp_bpf.h``, ``pyxdp_ext.h``, ...)."""
    return DIR / "include"


def resolve(p: str | os.PathLike[str]) -> str | os.PathLike[str]:
    """``p`` itself, unless it is a missing relative ``samples/...`` path that names a shipped
    sample: then the shipped file. Any other path is returned unchanged for its reader to
    report."""
    if os.path.exists(p):
        return p
    parts = PurePath(p).parts
    if len(parts) < 2 or parts[0] != _PREFIX or ".." in parts:
        return p
    shipped = DIR.joinpath(*parts[1:])
    return shipped if shipped.is_file() else p
