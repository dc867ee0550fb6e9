"""CO-RE relocations kept in pyxdp's disk cache (pyxdp.btf.vmlinux.relocate): a process
loading the same object against the same target files takes the relocated program from
the cache without reading the kernel's BTF; anything else relocates again."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pyxdp.btf import vmlinux
from pyxdp.btf.core import apply_core_relos
from pyxdp.elf import load_collection_spec

CORE = Path(__file__).resolve().parents[1] / "samples" / "core.o"


def test_a_relocation_comes_back_from_the_cache(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYXDP_JIT_CACHE", str(tmp_path))
    spec = load_collection_spec(CORE)
    ps = next(iter(spec.programs.values()))
    target = vmlinux.core_target()
    want = apply_core_relos(ps, spec.btf, target, target_name=target.path, poison=False)
    assert want.insns != ps.insns and not want.core_relos
    opened: list[object] = []
    core_target = vmlinux.core_target

    def counted(path: object = None) -> vmlinux.BtfIndex:
        opened.append(path)
        return core_target(path)  # type: ignore[arg-type]

    monkeypatch.setattr(vmlinux, "core_target", counted)
    assert vmlinux.relocate(ps, spec.btf) == want and opened == [None]
    assert vmlinux.relocate(ps, spec.btf) == want and opened == [None]  # the cache's
    (entry,) = (tmp_path / "relocated").iterdir()
    entry.write_bytes(entry.read_bytes()[:-1] + b"!")  # damaged: relocated again
    assert vmlinux.relocate(ps, spec.btf) == want and opened == [None, None]
    # another target file: its own relocation
    other = tmp_path / "other.btf"
    shutil.copyfile(vmlinux.SHIPPED_BTF, other)
    shipped = vmlinux.core_target(vmlinux.SHIPPED_BTF)
    assert vmlinux.relocate(ps, spec.btf, other) == apply_core_relos(
        ps, spec.btf, shipped, target_name=str(other), poison=False)
    assert opened[-1] == other and len(list((tmp_path / "relocated").iterdir())) == 2


def test_without_a_disk_cache_it_relocates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYXDP_JIT_CACHE", "off")
    spec = load_collection_spec(CORE)
    ps = next(iter(spec.programs.values()))
    target = vmlinux.core_target()
    assert vmlinux.relocate(ps, spec.btf) == apply_core_relos(
        ps, spec.btf, target, target_name=target.path, poison=False)
