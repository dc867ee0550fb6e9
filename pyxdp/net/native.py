"""pyxdp's machine code: the one ``njit`` its native datapath modules compile with, and
numba's on-disk cache for it, keyed by the content of every source that machine code is
built from - not by where pyxdp is installed.

numba caches a compiled function by its own file only; a function that inlines code
of another module (the poll loop inlines the stack's demux, the ptr_ring and page pool
operations) would keep running stale machine code after that other module changed.
So the cache lives in a directory named by a hash of all of pyxdp's native sources
(and numba's version): any change selects a fresh directory. numba would also file
each module's entries under a hash of its absolute path, so that every new install
location (a wheel in a venv, a reinstall, the checkout beside it) started cold and
compiled everything again, minutes on a small machine; pyxdp's functions are filed
under their package path instead (``pyxdp.net``), their index stamped with the file's
content, so identical sources share one cache wherever they are installed.

The directory is ``$XDG_CACHE_HOME/pyxdp/numba-HASH`` (``~/.cache``), or under
``NUMBA_CACHE_DIR`` when the user set one; one pyxdp cannot write is replaced, with a
warning, by ``pyxdp-UID/numba-HASH`` in the system's temporary directory (or one of the
process's own). numba's own configuration is left alone:
other numba code of the process caches where it would without pyxdp. Directories of
other sources that nothing wrote to for 30 days are removed when pyxdp starts.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
from numba import njit as _njit
from numba.core import types
from numba.core.caching import (
    CompileResultCacheImpl,
    FunctionCache,
    UserProvidedCacheLocator,
)
from numba.core.registry import CPUDispatcher

from pyxdp.diskcache import cache_home, usable_dir

__all__ = ["CACHE_DIR", "STALE_AFTER", "njit", "prune_stale"]

_PACKAGE = Path(__file__).resolve().parents[1]  # .../pyxdp


def _sources_hash() -> str:
    h = hashlib.sha256(numba.__version__.encode())
    for sub in ("net", "xsk"):
        for f in sorted((_PACKAGE / sub).glob("*.py")):
            text = f.read_bytes()
            if b"numba" in text:
                h.update(f.name.encode() + b"\0" + text)
    return h.hexdigest()[:16]


def _cache_root() -> str:
    user = os.environ.get("NUMBA_CACHE_DIR")
    if user:
        return os.path.join(user, "pyxdp")
    return os.path.join(cache_home(), "pyxdp")


_NAME = f"numba-{_sources_hash()}"
CACHE_DIR = usable_dir(os.path.join(_cache_root(), _NAME), _NAME)
"""Where pyxdp's compiled native functions persist (a private stand-in, said once, when
that directory cannot be written: :func:`pyxdp.diskcache.usable_dir`)."""

STALE_AFTER = 30 * 86400.0
"""A cache directory of other sources untouched this long (seconds) is removed."""


def prune_stale(root: str, keep: str, now: float | None = None) -> list[str]:
    """Remove ``root``'s ``numba-*`` directories other than ``keep`` that nothing wrote
    to for :data:`STALE_AFTER`: every edit of a native source selects a new directory,
    and the old ones would pile up. Returns what was removed; errors are ignored (a
    cache)."""
    now = time.time() if now is None else now
    gone: list[str] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return gone
    for e in entries:
        if not e.name.startswith("numba-") or e.path == keep or not e.is_dir():
            continue
        try:
            if now - e.stat().st_mtime > STALE_AFTER:
                shutil.rmtree(e.path, ignore_errors=True)
                gone.append(e.path)
        except OSError:
            continue
    return gone


prune_stale(os.path.dirname(CACHE_DIR), CACHE_DIR)


@functools.cache
def _content_stamp(path: str, mtime: float, size: int) -> bytes:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).digest()


class _PackageLocator(UserProvidedCacheLocator):
    """A pyxdp function's cache entries: ``CACHE_DIR/pyxdp.net`` for pyxdp/net/*.py,
    wherever the package is; the index is valid while the file's content is the same
    (numba before 0.61 would compare its time stamp, new at every install)."""

    def __init__(self, py_func: Callable[..., Any], py_file: str) -> None:
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        rel = Path(py_file).resolve().parent.relative_to(_PACKAGE.parent)
        self._cache_path = os.path.join(CACHE_DIR, ".".join(rel.parts))

    def get_source_stamp(self) -> bytes:
        st = os.stat(self._py_file)
        return _content_stamp(self._py_file, st.st_mtime, st.st_size)

    @classmethod
    def from_function(cls, py_func: Callable[..., Any], py_file: str) -> Any:
        if not Path(py_file).resolve().is_relative_to(_PACKAGE):
            return None
        self = cls(py_func, py_file)
        try:
            self.ensure_cache_path()  # type: ignore[no-untyped-call]
        except OSError:
            return None  # not writable: numba's own places, or no cache
        return self


class _CacheImpl(CompileResultCacheImpl):
    _locator_classes = [_PackageLocator, *CompileResultCacheImpl._locator_classes]


class _FunctionCache(FunctionCache):
    _impl_class = _CacheImpl


class _Dispatcher(CPUDispatcher):
    """A native function called from another one compiles for the arguments' plain
    types: a constant argument (``cached = 0`` before the variable unifies to int64)
    would otherwise cost a second specialisation of the callee, compiled and cached
    beside the int64 one, at every first run."""

    def get_call_template(self, args: Any, kws: Any) -> Any:
        plain: Callable[[Any], Any] = types.unliteral
        return super().get_call_template(tuple(plain(a) for a in args),
                                         {k: plain(v) for k, v in kws.items()})


def njit(*args: Any, **kwargs: Any) -> Any:
    """numba's ``njit``, with ``cache=True`` caching in :data:`CACHE_DIR`;
    ``inline="always"`` inlines the machine code (LLVM), ``inline="numba"`` the
    Python IR (numba's ``inline="always"``).

    Native code reads arrays its caller owns and never allocates: the modules pass
    ``_nrt=False`` (no NRT reference counting around every helper call, measured 3x
    slower) and ``nogil=True``."""
    cache = bool(kwargs.pop("cache", False))
    if kwargs.get("inline") == "numba":
        # numba's own inlining, for a function returning an array it makes (a view of
        # an address): without NRT numba returns only arrays passed in.
        kwargs["inline"] = "always"
        kwargs.setdefault("forceinline", False)
    elif kwargs.get("inline") == "always":
        # Inlined by LLVM, not numba: numba's inline="always" retypes and relowers the
        # callee's Python IR at every call site, nested callees again inside each
        # copy (measured: 73% of the stack demux's compile time, its machine code
        # built four times over); forceinline compiles it once per signature, cached
        # on its own, and marks it alwaysinline, so the machine code is inlined as before.
        del kwargs["inline"]
        kwargs["forceinline"] = True
    else:
        # Set, so that a callee first compiled from inside an inlined function does not
        # inherit its forceinline (numba passes an unset flag down to callees).
        kwargs.setdefault("forceinline", False)

    def decorate(fn: Callable[..., Any]) -> Any:
        made = _njit(**kwargs)(fn)  # numba's options, validated and completed
        disp = _Dispatcher(py_func=fn, locals=made.locals, targetoptions=made.targetoptions)
        if cache:
            disp._cache = _FunctionCache(disp.py_func)  # type: ignore[attr-defined,no-untyped-call]
        return disp

    if args and callable(args[0]) and len(args) == 1:
        return decorate(args[0])
    if args:
        raise TypeError("pyxdp.net.native.njit takes no signatures: types come from the calls")
    return decorate
