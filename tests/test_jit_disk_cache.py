"""The JIT's object code persists across processes (pyxdp.vm.jit.engine's disk cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llvmlite")

ROOT = Path(__file__).resolve().parents[1]
LOAD = """
import json, sys
from pyxdp.collection import Collection
from pyxdp.net.packets import udp_packet
with Collection.load(sys.argv[1], engine="jit") as c:
    out = {n: [p.handle.vm.code.from_disk, p.test_run(udp_packet(b"x")).retval,
               "define" in p.handle.vm.ir] for n, p in c.programs.items()}
    out["rxcnt"] = c.maps["rxcnt"].sum(17)
print(json.dumps(out))
"""


def _load(cache: str) -> dict[str, object]:
    env = dict(os.environ, PYXDP_JIT_CACHE=cache, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", LOAD, str(ROOT / "samples" / "xdp1.o")],
                         capture_output=True, text=True, timeout=120, env=env, check=True)
    loaded: dict[str, object] = json.loads(res.stdout)
    return loaded


def test_a_second_process_links_the_cached_object(tmp_path: Path) -> None:
    """The second process finds the image by the program's inputs: no lowering, no
    LLVM passes, only the link (and the IR is lowered on demand)."""
    cache = tmp_path / "jit"
    first = _load(str(cache))
    images = sorted(cache.glob("*.o"))
    # The runtime module, and the program under its IR and under its inputs.
    assert first == {"xdp_prog1": [False, 1, True], "rxcnt": 1} and len(images) == 3
    assert _load(str(cache)) == {"xdp_prog1": [True, 1, True], "rxcnt": 1}


def test_damaged_images_are_compiled_again_and_off_means_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyxdp.vm.jit import engine

    ir = "define i64 @pyxdp_disk_cache_probe() {\n  ret i64 7\n}\n"
    llvm = engine._llvm()  # the runtime module stays out of this directory
    monkeypatch.setenv("PYXDP_JIT_CACHE", str(tmp_path))
    obj, hit = llvm.compile(ir, 2)
    assert not hit and llvm.compile(ir, 2) == (obj, True)
    (image,) = tmp_path.glob("*.o")
    image.write_bytes(image.read_bytes()[:-1])  # never handed to LLVM: compiled again
    assert llvm.compile(ir, 2) == (obj, False)
    monkeypatch.setenv("PYXDP_JIT_CACHE", "off")
    assert engine.disk_cache_dir() is None
    assert llvm.compile(ir, 2) == (obj, False)


def test_the_cache_is_trimmed_by_a_writer_not_a_reader(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing a large cache takes a while: a process trims it on its first write (and
    then keeps it under DISK_CACHE_MAX, oldest first), never when it only reads."""
    from pyxdp.vm.jit import engine

    llvm = engine._llvm()
    monkeypatch.setenv("PYXDP_JIT_CACHE", str(tmp_path))
    old = tmp_path / ("0" * 64 + ".o")
    old.write_bytes(bytes(1 << 20))
    os.utime(old, (1, 1))
    ir = "define i64 @pyxdp_trim_probe() {\n  ret i64 3\n}\n"
    obj, _ = llvm.compile(ir, 2)
    monkeypatch.setattr(engine, "_TRIMMED", False)
    # Room for the two probes' images, not for the old one too.
    monkeypatch.setattr(engine, "DISK_CACHE_MAX", 3 * len(obj) + 1000)
    assert llvm.compile(ir, 2) == (obj, True) and old.exists()  # a read: no trim
    llvm.compile(ir.replace("3", "4"), 2)  # a write: the oldest image goes
    assert not old.exists() and engine._TRIMMED and len(list(tmp_path.glob("*.o"))) == 2


def test_large_modules_get_the_bpf_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above LARGE_MODULE_LINES the BPF pipeline optimises the module instead of LLVM's
    default one; the code must compute what the interpreter computes."""
    from pyxdp.collection import Collection
    from pyxdp.net.packets import corpus
    from pyxdp.vm.jit import engine

    monkeypatch.setenv("PYXDP_JIT_CACHE", "off")
    monkeypatch.setattr(engine, "LARGE_MODULE_LINES", 0)
    engine.cache_clear()
    packets = [pkt for _, pkt in corpus(5) if len(pkt) >= 14][:60]
    verdicts = []
    for kind in ("jit", "interp"):
        with Collection.load(ROOT / "samples" / "xdp2.o", engine=kind) as coll:
            prog = coll.programs["xdp_prog2"]
            verdicts.append([(r.retval, r.data_out) for r in map(prog.test_run, packets)])
            verdicts.append(coll.maps["rxcnt"].sum(17))
    engine.cache_clear()
    assert verdicts[0] == verdicts[2] and verdicts[1] == verdicts[3]


def test_quick_code_is_kept_apart_from_the_levels(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The QUICK pipeline's image has a key of its own (the -O0..-O3 keys are as
    before, so existing caches stay valid) and computes what -O2's does."""
    import ctypes

    from pyxdp.vm.jit import engine

    ir = ("define i64 @pyxdp_quick_probe(i64 %x) {\n  %a = add i64 %x, 3\n"
          "  %b = mul i64 %a, 2\n  ret i64 %b\n}\n")
    llvm = engine._llvm()
    monkeypatch.setenv("PYXDP_JIT_CACHE", str(tmp_path))
    quick, hit = llvm.compile(ir, engine.QUICK)
    assert not hit and llvm.compile(ir, engine.QUICK) == (quick, True)
    assert not llvm.compile(ir, 2)[1] and len(list(tmp_path.glob("*.o"))) == 2
    assert engine._level_byte(2) == bytes([2]) and engine._level_byte(engine.QUICK) == b"\xff"
    for obj in (quick, llvm.compile(ir, 2)[0]):
        lib = llvm.link_object(obj, ["pyxdp_quick_probe"])
        fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(int(lib["pyxdp_quick_probe"]))
        assert fn(4) == 14
