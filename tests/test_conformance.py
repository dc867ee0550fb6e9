"""The built-in vectors and the 313 bpf_conformance vectors (where ``PYXDP_CONFORMANCE_DIR``
names them) on the interpreter, and interpreter == kernel on each vector the kernel's
verifier accepts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyxdp.testing.conformance import (
    MEM_BASE,
    KernelEngine,
    Vector,
    find_vectors,
    run_interp,
    vector_files,
)
from pyxdp.testing.vectorgen import BUILTIN_DIR

_FILES = vector_files()


def test_all_313_vectors_present(vector_dir: Path) -> None:
    assert len(list(vector_dir.glob("*.data"))) == 313, f"expected 313 vectors in {vector_dir}"


def _ids(files: list[Path]) -> list[str]:
    return [("builtin/" if p.parent == BUILTIN_DIR else "") + p.stem for p in files]


def _vector(path: Path) -> Vector:
    return next(find_vectors([path]))


@pytest.mark.parametrize("path", _FILES, ids=_ids(_FILES))
def test_interpreter(path: Path) -> None:
    o = run_interp(_vector(path))
    assert o.status == "passed", o.detail


@pytest.fixture(scope="module")
def kernel_engine() -> Iterator[KernelEngine]:
    with KernelEngine() as k:
        yield k


@pytest.mark.kernel
@pytest.mark.parametrize("path", _FILES, ids=_ids(_FILES))
def test_interpreter_equals_kernel(path: Path, kernel_engine: KernelEngine) -> None:
    v = _vector(path)
    k = kernel_engine.run(v)
    if k.status == "skipped":
        pytest.skip(f"kernel verifier rejects {v.name}: {k.detail}")
    i = run_interp(v)
    assert k.got == i.got, f"kernel r0={k.got:#x} interp r0={i.got!r} ({i.detail})"
    assert k.status == "passed", k.detail


def test_memory_is_at_mem_base() -> None:
    # r1 points at the vector memory, r2 holds its length (mem-len-in-r2.data relies on it).
    v = _vector(BUILTIN_DIR / "mem-len-in-r2.data")
    assert v.mem and run_interp(v).got == len(v.mem)
    assert MEM_BASE % 4096 == 0


@pytest.mark.kernel
def test_builtin_vectors_are_linuxs_results() -> None:
    # The committed files are exactly what the generator writes from the kernel's runs.
    from pyxdp.testing.vectorgen import generate
    files = generate()
    assert sorted(files) == sorted(p.name for p in BUILTIN_DIR.glob("*.data"))
    for name, text in files.items():
        assert (BUILTIN_DIR / name).read_text() == text, name


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_error_vector_needs_the_runners_error_text(engine: str) -> None:
    # As bpf_conformance compares the plugin's error line with '-- error': any other
    # error, or a result, fails the vector.
    from pyxdp.testing.conformance import parse_vector, run_jit
    run = run_jit if engine == "jit" else run_interp
    asm = "ldxb %r0, [%r1+4]\nexit"
    text = "-- asm\n{}\n-- mem\n00 00 00 00\n-- error\n{}\n"
    right = run(parse_vector(text.format(asm, "verifier: R1 offset is outside of the packet")))
    assert right.status == "passed", right.detail
    wrong = run(parse_vector(text.format(asm, "verifier: invalid mem access 'scalar'")))
    assert wrong.status == "failed"
    assert "R1 offset is outside of the packet" in wrong.detail
    loads = run(parse_vector(text.format("mov %r0, 1\nexit", "verifier: anything")))
    assert loads.status == "failed" and "got r0=0x1" in loads.detail
