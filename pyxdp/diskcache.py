"""pyxdp's on-disk caches: where they live, what keys them, how entries are written.

Two caches share one directory: the JIT's object images (:mod:`pyxdp.vm.jit.engine`)
and the verifier's acceptances with what it found (:func:`verified`). Both are keyed by a digest of
pyxdp's Python sources (:func:`sources_digest`) besides their inputs, so an edited or
upgraded pyxdp never reads what another version wrote; that digest is kept there too,
under the source files' identity, so a process need not hash them again.

``PYXDP_JIT_CACHE`` names the directory (default ``$XDG_CACHE_HOME/pyxdp/jit``, else
``~/.cache/pyxdp/jit``); ``off`` turns both caches off. A cache directory pyxdp cannot
write is replaced, with one warning, by a private one (:func:`usable_dir`).

The verifier's cache holds only acceptances: a file named by the digest of
everything the verdict depends on (the program, the collection's maps, the object's
BTF, the instruction limit, pyxdp's sources) holding what the verifier proved about
the program's memory accesses (JSON, :func:`pyxdp.verifier.facts.encode_facts`),
which the JIT needs as much as the verdict. A program it has no entry for is
verified, so a refusal is always the verifier's own, with its message.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import pickle
import shutil
import stat
import tempfile
import warnings
from pathlib import Path

from pyxdp.errors import PyxdpWarning

__all__ = ["cache_home", "disk_cache_dir", "file_digest", "load_sealed", "remember_verified",
           "sources_digest", "store", "store_sealed", "usable_dir", "verified", "verified_key"]

_VERIFIED = "verified"  # the subdirectory of acceptances
_SOURCES = "sources"  # the subdirectory of source digests, by the files' identity
_SOURCES_FORMAT = b"pyxdp-sources-1"
_FILES = "files"  # the subdirectory of other files' digests, by their identity
_FILES_FORMAT = b"pyxdp-file-1"
_VERIFIED_FORMAT = b"pyxdp-verified-3"  # 2: the accepted program's access facts kept; 3: sealed


def disk_cache_dir() -> Path | None:
    """Where compiled objects persist (``PYXDP_JIT_CACHE``; None when it is ``off``), or
    the private stand-in of :func:`usable_dir` when that cannot be written."""
    env = os.environ.get("PYXDP_JIT_CACHE", "")
    if env.lower() in ("off", "0", "no"):
        return None
    if env:
        return Path(usable_dir(env, "jit"))
    return Path(usable_dir(os.path.join(cache_home(), "pyxdp", "jit"), "jit"))


def cache_home() -> str:
    """``$XDG_CACHE_HOME``, else ``~/.cache``: the base of pyxdp's caches."""
    return os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")


def _writable(path: str) -> str:
    """Why ``path`` cannot be a cache directory ("" when it can: made, and written to)."""
    try:
        os.makedirs(path, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path, prefix=".probe-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        return e.strerror or type(e).__name__
    return ""


def _private_root() -> str | None:
    """``pyxdp-UID`` in the system's temporary directory: this user's alone (made 0700,
    owned by the user, not a link), so later runs and child processes share it."""
    root = os.path.join(tempfile.gettempdir(), f"pyxdp-{os.getuid()}")
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)
        st = os.lstat(root)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022:
        return root
    return None


_warned: list[str] = []


@functools.cache
def usable_dir(path: str, name: str) -> str:
    """``path`` when it is a directory pyxdp can write (made if need be); else, said once
    per process as a :class:`~pyxdp.errors.PyxdpWarning`, ``name`` in a private
    directory: a cache that cannot be written would make every run compile everything
    again (minutes for the native datapath's functions)."""
    why = _writable(path)
    if not why:
        return path
    root = _private_root()
    alt = os.path.join(root, name) if root is not None else ""
    if not alt or _writable(alt):
        alt = tempfile.mkdtemp(prefix=f"pyxdp-{name}-")  # this process's alone
        atexit.register(shutil.rmtree, alt, True)
    if not _warned:
        _warned.append(path)
        warnings.warn(PyxdpWarning(f"cannot write the cache directory {path} ({why}); "
                                   f"caching in {alt} instead"), stacklevel=2)
    return alt


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


_FILE_DIGESTS: dict[bytes, bytes | None] = {}


def file_digest(path: str | os.PathLike[str]) -> bytes | None:
    """sha256 of the regular file at ``path`` (None when it is none or cannot be read: a
    device or a FIFO has no identity for its bytes), kept in the cache directory under
    the file's identity as :func:`sources_digest` keeps its digest: what the kernel's
    BTF (5 MB) is, in a stat and a 32-byte read. A sysfs file's identity holds the
    boot's time, so another kernel's BTF is another identity."""
    try:
        full = os.path.realpath(path)
        st = os.stat(full)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    ident = hashlib.sha256(_FILES_FORMAT + f"{full}\0{st.st_size}\0{st.st_mtime_ns}\0"
                           f"{st.st_ctime_ns}\0{st.st_ino}\0{st.st_dev}".encode()).digest()
    if ident in _FILE_DIGESTS:
        return _FILE_DIGESTS[ident]
    where = disk_cache_dir()
    memo = where / _FILES / ident.hex() if where is not None else None
    known = b""
    if memo is not None:
        try:
            known = memo.read_bytes()
        except OSError:
            known = b""
    digest: bytes | None = known if len(known) == 32 else None
    if digest is None:
        try:
            with open(full, "rb") as f:
                digest = hashlib.file_digest(f, "sha256").digest()
        except OSError:
            digest = None
        if digest is not None and memo is not None:
            store(memo, digest)
    _FILE_DIGESTS[ident] = digest
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
