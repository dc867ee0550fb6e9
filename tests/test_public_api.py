"""The curated public API: every name in ``pyxdp.__all__`` exists, nothing private leaks,
and every exception class of pyxdp.errors is exported and drawn in its docstring."""

from __future__ import annotations

import inspect

import pyxdp
import pyxdp.errors


def test_all_names_exist_and_are_public() -> None:
    assert sorted(pyxdp.__all__) == sorted(set(pyxdp.__all__))
    for name in pyxdp.__all__:
        assert hasattr(pyxdp, name), name
        assert not name.startswith("_") or name == "__version__"


def test_every_error_is_exported_and_in_the_tree() -> None:
    classes = [c for _, c in inspect.getmembers(pyxdp.errors, inspect.isclass)
               if issubclass(c, pyxdp.errors.PyxdpError)]
    doc = pyxdp.errors.__doc__ or ""
    for cls in classes:
        assert cls.__name__ in pyxdp.errors.__all__, cls
        assert cls.__name__ in doc, f"{cls.__name__} is not drawn in the errors docstring"
        assert getattr(pyxdp, cls.__name__, None) is cls, f"{cls.__name__} not in pyxdp"
