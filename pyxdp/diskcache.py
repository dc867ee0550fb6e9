"""pyxdp's on-disk caches: where they live, what keys them, how entries are written.

Two caches share one directory: the JIT's object images (:mod:`pyxdp.vm.jit.engine`)
and the verifier's acceptances with what it found (:func:`verified`). Both are keyed by a digest of
pyxdp's Python sources (:func:`sources_digest`) besides their inputs, so an edited or
upgraded pyxdp never reads what another version wrote; that digest is kept there too,
under the source files' identity, so a process need not hash them again.

``PYXDP_JIT_CACHE`` names the directory (default ``$XDG_CACHE_HOME/pyxdp/jit``, else
``~/.cache/pyxdp/jit``); ``off`` turns both caches off.

The verifier's cache holds only acceptances: a file named by the digest of
everything the verdict depends on (the program, the collection's maps, the object's
BTF, the instruction limit, pyxdp's sources) holding what the verifier proved about
the program's memory accesses (JSON, :func:`pyxdp.verifier.facts.encode_facts`),
which the JIT needs as much as the verdict. A program it has no entry for is
verified, so a refusal is always the verifier's own, with its message.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
from pathlib import Path

__all__ = ["disk_cache_dir", "load_sealed", "remember_verified", "sources_digest", "store",
           "store_sealed", "verified", "verified_key"]

_VERIFIED = "verified"  # the subdirectory of acceptances
_SOURCES = "sources"  # the subdirectory of source digests, by the files' identity
_SOURCES_FORMAT = b"pyxdp-sources-1"
_VERIFIED_FORMAT = b"pyxdp-verified-3"  # 2: the accepted program's access facts kept; 3: sealed


def disk_cache_dir() -> Path | None:
    """Where compiled objects persist (``PYXDP_JIT_CACHE``; None when it is ``off``)."""
    env = os.environ.get("PYXDP_JIT_CACHE", "")
    if env.lower() in ("off", "0", "no"):
        return None
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pyxdp" / "jit"


@functools.cache
def sources_digest() -> bytes:
    """sha256 of pyxdp's Python sources: what lowers programs to IR (the JIT, and the
    native twins maps and net register) and what verifies them.

    Hashing 3 MB of sources takes 8-11 ms of every load; the digest is kept in the
    cache directory under the files' identity (path, size, mtime, ctime, inode: any
    write to a file changes its ctime), which takes 1-2 ms to read back. A memo that
    is not 32 bytes is ignored and rewritten."""
    root = os.path.dirname(os.path.realpath(__file__))
    files: list[tuple[str, str]] = []
    for top, _dirs, names in os.walk(root):
        rel_top = os.path.relpath(top, root).replace(os.sep, "/")
        for name in names:
            if name.endswith(".py"):
                files.append((name if rel_top == "." else f"{rel_top}/{name}",
                              os.path.join(top, name)))
    files.sort()
    ident = hashlib.sha256(_SOURCES_FORMAT)
    for rel, full in files:
        try:
            st = os.stat(full)
        except OSError:
            continue
        ident.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0"
                     f"{st.st_ino}\0{st.st_dev}\n".encode())
    where = disk_cache_dir()
    memo = where / _SOURCES / ident.hexdigest() if where is not None else None
    if memo is not None:
        try:
            known = memo.read_bytes()
        except OSError:
            known = b""
        if len(known) == 32:
            return known
    h = hashlib.sha256()
    for rel, full in files:
        h.update(rel.encode() + b"\0")
        try:
            with open(full, "rb") as f:
                h.update(f.read())
        except OSError:
            continue
    digest = h.digest()
    if memo is not None:
        store(memo, digest)
    return digest


def store(path: Path, data: bytes) -> None:
    """Write ``data`` where another process may be reading: a whole file or none (a
    cache that cannot be written is only slower)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        return


def store_sealed(path: Path, key: bytes, body: bytes) -> None:
    """:func:`store` ``body`` under a seal: the sha256 of ``key`` and ``body`` first."""
    store(path, hashlib.sha256(key + body).digest() + body)


def load_sealed(path: Path, key: bytes) -> bytes | None:
    """The body :func:`store_sealed` kept at ``path`` for ``key``; None when absent, or
    when damaged or written for another key (a truncated, flipped or swapped entry:
    what the JIT or the verifier reads back must be what they wrote, for this input)."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    body = blob[32:]
    if len(blob) < 32 or hashlib.sha256(key + body).digest() != blob[:32]:
        return None
    return body


def verified_key(*inputs: object) -> bytes | None:
    """The key of a verdict on ``inputs`` (values holding everything the verdict
    depends on: pickling keeps every field, so two inputs that differ in any of them
    never share a key); None when something in them does not pickle (no caching)."""
    try:
        blob = pickle.dumps(inputs, protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError, ValueError):
        return None
    return hashlib.sha256(_VERIFIED_FORMAT + sources_digest() + blob).digest()


def verified(key: bytes) -> bytes | None:
    """What was recorded when the verifier accepted the inputs of ``key`` (in any
    process), or None when it has not."""
    where = disk_cache_dir()
    return load_sealed(where / _VERIFIED / key.hex(), key) if where is not None else None


def remember_verified(key: bytes, data: bytes) -> None:
    """Record that the verifier accepted the inputs of ``key``, with ``data`` (what it
    found: the facts the JIT uses)."""
    where = disk_cache_dir()
    if where is not None:
        store_sealed(where / _VERIFIED / key.hex(), key, data)
