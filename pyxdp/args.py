"""The public API's argument checks, in one place.

A documented function called with a wrong type or an out-of-range number fails at its
door with one line naming the function and the parameter
(:class:`~pyxdp.errors.BadArgument`), instead of an error from deep inside (a numpy
broadcast, a comparison of a str with an int, a silent wrap of -1 to the last slot).

:func:`checked` reads the parameters' annotations (``int``, ``float``, ``str``, ``bool``,
classes, ``X | None``, ``list[...]``) and takes explicit rules for what annotations do
not say: an ``(lo, hi)`` range for an int, or :class:`Array` for an array-like of
unsigned integers. ``int`` accepts what has ``__index__`` (numpy integers) and passes
a plain ``int`` on; without a rule it must fit 64 bits, as every number the kernel takes.
A ``bool`` takes any value with a truth (an array of several items has none).
Annotations it cannot check (protocols, ``Any``, names only imported for type checking)
leave that parameter to the function.
"""

from __future__ import annotations

import functools
import operator
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from pyxdp.errors import BadArgument

__all__ = ["I64_MIN", "NR_CPUS_MAX", "U32_MAX", "U64_MAX", "Array", "checked", "short"]

I64_MIN = -(1 << 63)
U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1
# CONFIG_NR_CPUS's ceiling (x86-64 MAXSMP): a CPU count past it is no machine's, and
# per-CPU storage sized by it would be gigabytes (nr_cpus=10**6 once was).
NR_CPUS_MAX = 8192

F = TypeVar("F", bound=Callable[..., Any])
Check = Callable[[str, object], object]


def short(value: object) -> str:
    """A value as an error message shows it: its type, with the value when it is short
    (never a multi-line numpy repr)."""
    if isinstance(value, bool | int | float) and len(repr(value)) <= 24:
        return f"{value!r}"
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"a str of {len(value)} characters"
    return type(value).__name__


class Array:
    """Rule for an array-like of integers (or one integer, when ``scalar``; or None, when
    ``none_ok``): every item in ``0..hi`` (default: what ``dtype`` holds), at most one
    dimension; converted to ``dtype``."""

    def __init__(self, dtype: npt.DTypeLike = np.uint64, *, hi: int | None = None,
                 scalar: bool = True, none_ok: bool = False) -> None:
        self.dtype = np.dtype(dtype)
        self.hi = int(np.iinfo(self.dtype).max) if hi is None else hi
        self.scalar = scalar
        self.none_ok = none_ok

    def __call__(self, where: str, value: object) -> npt.NDArray[Any] | None:
        if value is None and self.none_ok:
            return None
        try:
            a = np.asarray(value)
        except (TypeError, ValueError, OverflowError):
            raise BadArgument(f"{where} must be integers, not {short(value)}") from None
        if a.dtype.kind not in "iu" and not (a.size == 0 and a.dtype.kind in "fO"):
            raise BadArgument(f"{where} must be integers, not {short(value)}")
        if a.ndim > 1 or (a.ndim == 0 and not self.scalar):
            what = "an integer or a 1-d array" if self.scalar else "a 1-d array"
            raise BadArgument(f"{where} must be {what}, not {short(value)}")
        if a.size and a.dtype.kind in "iu" and (int(a.min()) < 0 or int(a.max()) > self.hi):
            raise BadArgument(f"{where} must be in 0..{self.hi}, not {short(value)} holding "
                              f"{int(a.min()) if int(a.min()) < 0 else int(a.max())}")
        return a.astype(self.dtype)


def _int_check(lo: int, hi: int, none_ok: bool, bool_ok: bool) -> Check:
    def check(where: str, value: object) -> object:
        if value is None and none_ok:
            return None
        if isinstance(value, bool) and not bool_ok:
            raise BadArgument(f"{where} must be an int, not bool")
        try:
            n = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            raise BadArgument(f"{where} must be an int, not {short(value)}") from None
        if not lo <= n <= hi:
            raise BadArgument(f"{where} must be in {lo}..{hi}, not {n}")
        return n
    return check


def _truth(where: str, value: object) -> object:
    try:
        return bool(value)
    except (TypeError, ValueError):  # a numpy array of several items has no truth
        raise BadArgument(f"{where} must be a bool, not {short(value)}") from None


def _class_check(classes: tuple[type, ...], none_ok: bool, number: bool) -> Check:
    names = " or ".join([c.__name__ for c in classes] + (["a number"] if number else []))

    def check(where: str, value: object) -> object:
        if value is None and none_ok:
            return None
        if number and isinstance(value, int | float | np.integer | np.floating) \
                and not isinstance(value, bool):
            return float(value)
        if isinstance(value, classes):
            return value
        raise BadArgument(f"{where} must be {names}{' or None' if none_ok else ''}, not "
                          f"{short(value)}")
    return check


def _from_annotation(ann: object, rule: object) -> Check | None:
    """The check of one annotation (with an explicit int range), None if it cannot be
    checked at run time."""
    if isinstance(rule, Array):
        return rule
    parts = typing.get_args(ann) if isinstance(ann, types.UnionType) or \
        typing.get_origin(ann) is typing.Union else (ann,)
    none_ok = type(None) in parts
    parts = tuple(p for p in parts if p is not type(None))
    if parts == (int,) or parts == (int, bool) or parts == (bool, int):
        lo, hi = rule if isinstance(rule, tuple) else (I64_MIN, U64_MAX)
        return _int_check(lo, hi, none_ok, bool in parts)
    classes: list[type] = []
    number = False
    for p in parts:
        if p is float:
            number = True
            continue
        origin = typing.get_origin(p) or p
        if p is typing.Any or origin is object or not isinstance(origin, type) \
                or getattr(origin, "_is_protocol", False) and not \
                getattr(origin, "_is_runtime_protocol", False):
            return None
        if origin is bool:
            return _truth  # a flag: any value's truth, when it has one
        if isinstance(origin, type) and issubclass(origin, int) and len(parts) == 1:
            lo, hi = rule if isinstance(rule, tuple) else (I64_MIN, U64_MAX)
            return _int_check(lo, hi, none_ok, False)  # an IntEnum/IntFlag: any int
        if origin is int:
            return None  # an int among other types: the function sorts them out
        classes.append(origin)
    return _class_check(tuple(classes), none_ok, number)


def _compile(fn: Callable[..., Any], rules: dict[str, object]
             ) -> tuple[list[tuple[int, str, Check]], dict[str, tuple[str, Check]]]:
    """The checked positional parameters (position, where a failure says it was -
    ``Class.method: param``, formatted once here, not per call - and the check) and the
    same per name, for keyword arguments."""
    import inspect
    sig = inspect.signature(fn)
    glb = getattr(fn, "__globals__", {})
    qual = fn.__qualname__
    by_pos: list[tuple[int, str, Check]] = []
    pos = 0
    by_name: dict[str, tuple[str, Check]] = {}
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        check: Check | None = None
        ann = p.annotation
        if isinstance(ann, str):
            try:
                ann = eval(ann, glb, {})  # noqa: S307 - the function's own annotation
            except Exception:  # a name imported only for type checking
                ann = p.empty
        if p.name in rules and rules[p.name] is None:
            check = None  # the function checks it itself
        elif p.name in rules and isinstance(rules[p.name], Array):
            check = rules[p.name]  # type: ignore[assignment]
        elif ann is not p.empty:
            check = _from_annotation(ann, rules.get(p.name))
        where = f"{qual}: {p.name}"
        if check is not None:
            by_name[p.name] = (where, check)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            if check is not None:
                by_pos.append((pos, where, check))
            pos += 1
    return by_pos, by_name


@typing.overload
def checked(fn: F, /) -> F: ...
@typing.overload
def checked(**rules: object) -> Callable[[F], F]: ...
def checked(fn: F | None = None, /, **rules: object) -> F | Callable[[F], F]:
    """Decorator: check the arguments of a public function or method against its
    annotations and ``rules`` (``name=(lo, hi)`` for an int, ``name=Array(...)``,
    ``name=None``: the function checks it itself); a failure is a
    :class:`~pyxdp.errors.BadArgument` naming ``Class.method: param``."""
    def wrap(f: F) -> F:
        compiled: list[tuple[list[tuple[int, str, Check]],
                             dict[str, tuple[str, Check]]]] = []

        @functools.wraps(f)
        def inner(*args: Any, **kwargs: Any) -> Any:
            if not compiled:
                compiled.append(_compile(f, rules))
            by_pos, by_name = compiled[0]
            # Only the checked positions are visited (most parameters are not).
            n = len(args)
            new = None
            for i, where, check in by_pos:
                if i >= n:
                    break
                v = args[i]
                w = check(where, v)
                if w is not v:
                    if new is None:
                        new = list(args)
                    new[i] = w
            if new is not None:
                args = tuple(new)
            if kwargs:
                for k, v in kwargs.items():
                    c2 = by_name.get(k)
                    if c2 is not None:
                        kwargs[k] = c2[1](c2[0], v)
            return f(*args, **kwargs)
        inner.__wrapped_checked__ = True  # type: ignore[attr-defined]
        return typing.cast(F, inner)
    return wrap(fn) if fn is not None else wrap
