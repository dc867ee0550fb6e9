"""pyxdp's machine code: the one ``njit`` its native datapath modules compile with, and
numba's on-disk cache keyed by every source that machine code is built from.

numba caches a compiled function by its own file's time stamp only; a function
that inlines code of another module (the poll loop inlines the stack's demux,
the ptr_ring and page pool operations) would keep running stale machine code
after that other module changed. So the cache lives in a directory named by a
hash of all of pyxdp's native sources (and numba's version): any change
selects a fresh directory. Import this module before decorating (it sets
``numba.config.CACHE_DIR`` unless the user set ``NUMBA_CACHE_DIR``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numba
from numba import njit as _njit

__all__ = ["CACHE_DIR", "njit"]

# Native code reads arrays its caller owns and never allocates: without NRT's
# reference counting around every helper call (measured: 3x slower) and without
# the interpreter lock.
njit: Any = _njit


def _cache_dir() -> str:
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(numba.__version__.encode())
    for sub in ("net", "xsk"):
        for f in sorted((root / sub).glob("*.py")):
            text = f.read_bytes()
            if b"numba" in text:
                h.update(f.name.encode() + b"\0" + text)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pyxdp", f"numba-{h.hexdigest()[:16]}")


CACHE_DIR = os.environ.get("NUMBA_CACHE_DIR") or _cache_dir()
if not os.environ.get("NUMBA_CACHE_DIR"):
    numba.config.CACHE_DIR = CACHE_DIR  # type: ignore[attr-defined]
