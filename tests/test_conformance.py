"""The 313 bpf_conformance vectors on the interpreter, and interpreter == kernel on each
vector the kernel's verifier accepts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyxdp.testing.conformance import (
    MEM_BASE,
    KernelEngine,
    Vector,
    default_vector_dir,
    find_vectors,
    run_interp,
)

_DIR = default_vector_dir()
_FILES = sorted(_DIR.glob("*.data")) if _DIR.is_dir() else []


def test_all_313_vectors_present() -> None:
    assert len(_FILES) == 313, f"expected 313 vectors in {_DIR}"


def _vector(path: Path) -> Vector:
    return next(find_vectors([path]))


@pytest.mark.parametrize("path", _FILES, ids=[p.stem for p in _FILES])
def test_interpreter(path: Path) -> None:
    o = run_interp(_vector(path))
    assert o.status == "passed", o.detail


@pytest.fixture(scope="module")
def kernel_engine() -> Iterator[KernelEngine]:
    with KernelEngine() as k:
        yield k


@pytest.mark.kernel
@pytest.mark.parametrize("path", _FILES, ids=[p.stem for p in _FILES])
def test_interpreter_equals_kernel(path: Path, kernel_engine: KernelEngine) -> None:
    v = _vector(path)
    k = kernel_engine.run(v)
    if k.status == "skipped":
        pytest.skip(f"kernel verifier rejects {v.name}: {k.detail}")
    i = run_interp(v)
    assert k.got == i.got, f"kernel r0={k.got:#x} interp r0={i.got!r} ({i.detail})"
    assert k.status == "passed", k.detail


def test_memory_is_at_mem_base() -> None:
    # r1 points at the vector memory, r2 holds its length (mem-len.data relies on it).
    v = _vector(_DIR / "mem-len.data")
    assert v.mem and run_interp(v).got == len(v.mem)
    assert MEM_BASE % 4096 == 0
