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


def test_every_public_name_has_a_docstring() -> None:
    """Classes and functions carry their own docstring, and so do the public methods and
    properties of the classes; constants (``XDP_PASS``, ``__version__``) are named in the
    package docstring or are members of a documented enum."""
    missing = []
    for name in pyxdp.__all__:
        obj = getattr(pyxdp, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            if not (obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__):
                missing.append(name)
            for attr, member in vars(obj).items() if inspect.isclass(obj) else ():
                fn = member.fget if isinstance(member, property) else \
                    getattr(member, "__func__", member)
                if not attr.startswith("_") and (inspect.isfunction(fn) or
                                                 isinstance(member, property)):
                    if not (fn.__doc__ or "").strip():
                        missing.append(f"{name}.{attr}")
        elif isinstance(obj, pyxdp.XdpAction):
            assert pyxdp.XdpAction.__dict__.get("__doc__"), name
        else:
            assert name in (pyxdp.__doc__ or ""), f"{name} is not described in pyxdp's docstring"
    assert not missing, f"public names without a docstring: {', '.join(missing)}"


def test_xdp_actions_are_the_uapi_enum() -> None:
    from pyxdp.uapi.bpf import XdpAction
    assert pyxdp.XdpAction is XdpAction
    for action in XdpAction:
        assert getattr(pyxdp, action.name) is action
