"""The verifier's acceptances persist beside the JIT's images (pyxdp.diskcache): a
long program loaded again skips verification only when the verifier accepted exactly
the same inputs; refusals are never cached."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

import pyxdp.verifier
from pyxdp import collection
from pyxdp.asm.macros import exit_insn, ldx_mem, mov64_imm
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import NotSupportedError, VerifierError
from pyxdp.net.packets import udp_packet
from pyxdp.spec import CollectionSpec, ProgramSpec

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYXDP_JIT_CACHE", str(tmp_path))
    monkeypatch.setattr(collection, "VERIFY_CACHE_INSNS", 1)  # small programs stand in
    return tmp_path / "verified"


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    verify = pyxdp.verifier.verify

    def counted(spec: ProgramSpec, *args: object, **kw: object) -> object:
        calls.append(spec.name)
        return verify(spec, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(pyxdp.verifier, "verify", counted)
    return calls


def test_an_accepted_program_is_not_verified_again(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    spec = load_collection_spec(SAMPLES / "xdp1.o")
    for _ in range(2):
        with Collection(spec, engine="interp") as coll:
            assert coll.programs["xdp_prog1"].test_run(udp_packet(b"x")).retval == 1
    assert calls == ["xdp_prog1"] and len(list(cache.iterdir())) == 1
    # Another map size is another input: verified again, and remembered apart.
    bigger = dataclasses.replace(spec.maps["rxcnt"], max_entries=512)
    with Collection(dataclasses.replace(spec, maps={"rxcnt": bigger}), engine="interp"):
        pass
    assert calls == ["xdp_prog1"] * 2 and len(list(cache.iterdir())) == 2
    monkeypatch.setenv("PYXDP_JIT_CACHE", "off")
    with Collection(spec, engine="interp"):
        pass
    assert calls == ["xdp_prog1"] * 3


def test_a_refusal_is_never_cached(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    # r0 = *(u8 *)ctx->data with no bounds check: Linux refuses it.
    insns = (ldx_mem(4, 2, 1, 0), ldx_mem(1, 0, 2, 0), exit_insn())
    bad = CollectionSpec(programs={"bad": ProgramSpec("bad", "xdp", insns, license="GPL")},
                         maps={}, license="GPL", name="bad")
    errors = []
    for _ in range(2):
        with pytest.raises(VerifierError) as e:
            Collection(bad, engine="interp")
        errors.append(str(e.value))
    assert calls == ["bad", "bad"] and errors[0] == errors[1] and not cache.exists()


def test_short_programs_are_always_verified(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    ok = ProgramSpec("ok", "xdp", (mov64_imm(0, 2), exit_insn()), license="GPL")
    spec = CollectionSpec(programs={"ok": ok}, maps={}, license="GPL", name="ok")
    monkeypatch.setattr(collection, "VERIFY_CACHE_INSNS", 3)
    for _ in range(2):
        with Collection(spec, engine="interp"):
            pass
    assert calls == ["ok", "ok"] and not cache.exists()


def test_a_core_program_is_cached_by_its_target_btf(
        cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """CO-RE relocations resolve against the target BTF: its bytes are in the key, so
    another target (or the same file rewritten) is verified again."""
    import shutil

    from pyxdp.btf.vmlinux import SHIPPED_BTF, VMLINUX_BTF
    calls = _counting(monkeypatch)
    core = load_collection_spec(SAMPLES / "core.o")
    assert all(p.core_relos for p in core.programs.values())
    for _ in range(2):
        with Collection(core, engine="interp"):
            pass
    assert calls == ["xdp_core"]
    target = tmp_path / "target.btf"
    shutil.copyfile(SHIPPED_BTF, target)
    for _ in range(2):
        with Collection(core, engine="interp", core_btf=target):
            pass
    assert calls == ["xdp_core"] * 2
    if not os.access(VMLINUX_BTF, os.R_OK):
        return
    shutil.copyfile(VMLINUX_BTF, target)  # other bytes under the same name
    with Collection(core, engine="interp", core_btf=target):
        pass
    assert calls == ["xdp_core"] * 3


def test_a_kfunc_program_is_cached_by_the_kfunc_table(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The verifier's kfunc table is open (register_kfunc): what it holds is in the key."""
    from pyxdp.verifier import kfuncs
    calls = _counting(monkeypatch)
    spec = load_collection_spec(SAMPLES / "bits_iter.o")
    assert all(p.kfuncs for p in spec.programs.values())
    for _ in range(2):
        with Collection(spec, engine="interp"):
            pass
    assert sorted(calls) == ["xdp_bits", "xdp_bits_nested"]
    monkeypatch.setitem(kfuncs.KFUNCS, "pyxdp_test_kfunc", kfuncs.KfuncProto(()))
    with Collection(spec, engine="interp"):
        pass
    assert len(calls) == 4


def test_a_typed_ksym_program_is_always_verified(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel symbol's ld_imm64 is refused when /proc/kallsyms lacks the symbol: no key
    holds that, so such a program is verified at every load."""
    from pyxdp.btf.vmlinux import core_target
    from pyxdp.testing.verifier_cases import CASES

    case = next(c for c in CASES if c.name == "vc4_ksym_func")
    assert case.linux is None  # Linux accepts it
    if core_target().find("bpf_xdp_adjust_head") is None:
        pytest.skip("the kernel BTF at hand has no bpf_xdp_adjust_head")
    calls = _counting(monkeypatch)
    for _ in range(2):  # verified, then refused by the engines (no kernel addresses)
        with pytest.raises(NotSupportedError, match="kernel symbol"):
            Collection(case.spec(), engine="interp")
    assert len(calls) == 2 and not cache.exists()


def test_inputs_that_do_not_pickle_are_verified_every_time(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyxdp import diskcache

    assert diskcache.verified_key(b"x") is not None
    assert diskcache.verified_key(b"x", lambda: 0) is None  # no key, no caching
    calls = _counting(monkeypatch)
    monkeypatch.setattr(collection, "verified_key", lambda *inputs: None)
    spec = load_collection_spec(SAMPLES / "xdp1.o")
    for _ in range(2):
        with Collection(spec, engine="interp"):
            pass
    assert calls == ["xdp_prog1"] * 2 and not cache.exists()


def test_a_cache_hit_gives_the_verifiers_own_access_facts(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The JIT drops the checks of proven accesses: a program whose acceptance comes
    from the cache must get the same facts as one verified now."""
    calls = _counting(monkeypatch)
    spec = load_collection_spec(SAMPLES / "xdp2.o")
    fresh = pyxdp.verifier.verify(spec.programs["xdp_prog2"], spec.maps, btf=spec.btf).mem
    assert fresh  # xdp2 reads and writes the packet
    got = []
    for _ in range(2):
        with Collection(spec, engine="interp") as coll:
            got.append(coll.programs["xdp_prog2"].handle.facts)  # type: ignore[attr-defined]
    assert calls.count("xdp_prog2") == 2  # the direct call above, then the first load
    assert got[0] == got[1] == fresh
    # A damaged entry is verified again, not trusted.
    (entry,) = cache.iterdir()
    entry.write_bytes(b"not json")
    with Collection(spec, engine="interp") as coll:
        assert coll.programs["xdp_prog2"].handle.facts == fresh  # type: ignore[attr-defined]
    assert calls.count("xdp_prog2") == 3


def test_the_sources_digest_memo_is_checked_not_trusted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The digest of pyxdp's sources (in every key) is kept by the files' identity; a
    damaged memo is recomputed from the sources, never used."""
    from pyxdp import diskcache

    monkeypatch.setenv("PYXDP_JIT_CACHE", "off")
    diskcache.sources_digest.cache_clear()
    truth = diskcache.sources_digest()  # hashed from the files, nothing kept
    monkeypatch.setenv("PYXDP_JIT_CACHE", str(tmp_path))
    try:
        diskcache.sources_digest.cache_clear()
        assert diskcache.sources_digest() == truth
        (memo,) = (tmp_path / "sources").iterdir()
        assert memo.read_bytes() == truth
        for damaged in (b"", b"short", truth + b"!"):
            memo.write_bytes(damaged)
            diskcache.sources_digest.cache_clear()
            assert diskcache.sources_digest() == truth
            assert memo.read_bytes() == truth  # rewritten
    finally:
        diskcache.sources_digest.cache_clear()
