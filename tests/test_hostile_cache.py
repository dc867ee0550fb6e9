"""Hostile on-disk cache entries (pyxdp.diskcache): each entry is sealed by its key, so a
truncated, flipped or swapped file (another program's image or facts under this key)
is compiled or verified again, never linked or trusted. Before the seal, a JIT image
swapped between keys crashed the process (SIGSEGV) or linked another program's symbols,
and swapped verifier facts changed a program's results."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pyxdp import diskcache

SEED = 0x44


def test_sealed_entries_read_back_only_under_their_key(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    a, b = tmp_path / "a", tmp_path / "b"
    diskcache.store_sealed(a, b"key-a", b"body of a")
    diskcache.store_sealed(b, b"key-b", b"body of b")
    assert diskcache.load_sealed(a, b"key-a") == b"body of a"
    assert diskcache.load_sealed(a, b"key-b") is None  # a's file under b's key
    b.write_bytes(a.read_bytes())  # swapped: intact, but written for another key
    assert diskcache.load_sealed(b, b"key-b") is None
    good = a.read_bytes()
    for _ in range(40):
        blob = bytearray(good)
        cut = rng.random() < 0.3
        if cut:
            blob = blob[:rng.randrange(len(blob))]
        else:
            blob[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
        a.write_bytes(bytes(blob))
        assert diskcache.load_sealed(a, b"key-a") is None
    assert diskcache.load_sealed(tmp_path / "none", b"key-a") is None
    assert diskcache.load_sealed(tmp_path, b"key-a") is None  # a directory


def test_a_swapped_jit_image_is_compiled_again(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("llvmlite")
    from pyxdp.vm.jit import engine

    llvm = engine._llvm()
    monkeypatch.setenv("PYXDP_JIT_CACHE", str(tmp_path))
    ir7 = "define i64 @pyxdp_swap_probe_a() {\n  ret i64 7\n}\n"
    ir9 = "define i64 @pyxdp_swap_probe_b() {\n  ret i64 9\n}\n"
    obj7, _ = llvm.compile(ir7, 2)
    before = set(tmp_path.glob("*.o"))
    obj9, _ = llvm.compile(ir9, 2)
    (img9,) = set(tmp_path.glob("*.o")) - before
    (img7,) = before
    img9.write_bytes(img7.read_bytes())  # ir9's key now holds ir7's (intact) image
    assert llvm.compile(ir9, 2) == (obj9, False)


def test_swapped_verifier_facts_are_verified_again(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """What the verifier proved lets the JIT drop checks: facts kept for another
    program (or damaged into other valid JSON) must never be used."""
    from pyxdp import collection
    from pyxdp.elf import load_collection_spec

    root = Path(__file__).resolve().parents[1] / "samples"
    monkeypatch.setenv("PYXDP_JIT_CACHE", str(tmp_path))
    monkeypatch.setattr(collection, "VERIFY_CACHE_INSNS", 1)
    specs = [load_collection_spec(root / n) for n in ("xdp1.o", "xdp2.o")]
    want = []
    for spec in specs:
        with collection.Collection(spec, engine="interp") as c:
            want.append({n: p.handle.facts for n, p in c.programs.items()})  # type: ignore[attr-defined]
    e1, e2 = sorted((tmp_path / "verified").iterdir(), key=lambda p: p.stat().st_mtime_ns)
    e1.write_bytes(e2.read_bytes())  # xdp1's key holds xdp2's facts
    e2.write_bytes(e2.read_bytes()[:32] + b'{"1": [["pkt"], null, Infinity, 1]}')
    for spec, facts in zip(specs, want, strict=True):
        with collection.Collection(spec, engine="interp") as c:
            assert {n: p.handle.facts for n, p in c.programs.items()} == facts  # type: ignore[attr-defined]
