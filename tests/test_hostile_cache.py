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


def test_unwritable_cache_directories_fall_back_with_one_warning(tmp_path: Path) -> None:
    """A cache home pyxdp cannot write (a file here; a read-only directory or a user
    without a home alike) made every native function compile again at every run: a
    64-byte 'pyxdp bench xdp' took 2 min 44 s instead of 7 s. The caches now go to a
    private directory, said once, on one line, and the next run finds them there."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYXDP_JIT_CACHE")}
    env.update(XDG_CACHE_HOME=str(blocker), TMPDIR=str(tmp), PYTHONPATH=str(root))
    code = ("import warnings, pyxdp.net.native as n, pyxdp.diskcache as d\n"
            "print(n.CACHE_DIR); print(d.disk_cache_dir())\n"
            "from pyxdp.cli.main import main\n"
            "with warnings.catch_warnings():\n"
            "    warnings.simplefilter('error')\n"  # the CLI prints its own line
            "    d.usable_dir(str(d.Path(n.CACHE_DIR).parent / 'x' / 'y'), 'z')\n")
    private = tmp / f"pyxdp-{os.getuid()}"
    for _ in range(2):  # the second process finds the same private directory
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120, check=True)
        native, jit = r.stdout.splitlines()
        assert Path(native).parent == private and Path(native).name.startswith("numba-")
        assert Path(jit) == private / "jit"
        assert r.stderr.count("cannot write the cache directory") == 1
        assert f"{blocker}/pyxdp/numba-" in r.stderr and "(Not a directory)" in r.stderr
    assert (private.stat().st_mode & 0o777) == 0o700
    packet = tmp_path / "packet"
    packet.write_bytes(bytes(64))
    env["TMPDIR"] = str(tmp_path)  # a private directory not made yet
    cli = subprocess.run([sys.executable, "-c", "import sys; from pyxdp.cli.main import main; "
                          "sys.exit(main(sys.argv[1:]))", "prog", "run",
                          str(root / "samples" / "xdp1.o"), "--data-in", str(packet)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert cli.stderr.startswith("pyxdp: warning: cannot write the cache directory ")
    assert cli.stderr.count("\n") == 1 and "Return value: 1" in cli.stdout
