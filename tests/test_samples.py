"""The committed sample objects under samples/ match their sources.

(a) Every object listed in samples/MANIFEST.sha256 exists, and the sha256 of
    its sources recorded there matches the sources as they are now (every
    sample source has an entry).
(b) A rebuild from the sources into a temporary directory gives the committed
    bytes. This needs make, clang-16 and, for the -mcpu=v4 loader objects,
    clang-19: without them the checks are skipped with a reason, or fail
    when CI is set.

    The debug info (DWARF 5) records the line numbers and MD5 sums of the
    system's UAPI headers (<linux/bpf.h>...). When those headers, or the
    compiler builds, differ from the ones recorded in the manifest's
    "toolchain" lines, identical bytes cannot be expected: the rebuild is
    then compared section by section, all sections except the DWARF ones
    (.debug_* and their relocations) and .comment (the compiler's version
    string): code, relocations, BTF, maps and data must still be identical.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
MANIFEST = SAMPLES / "MANIFEST.sha256"

REBUILD_HINT = "run make -C samples"


@dataclass(frozen=True)
class Entry:
    digest: str
    obj: str  # relative to samples/
    sources: tuple[str, ...]  # relative to samples/

    @property
    def needs_v4_compiler(self) -> bool:
        return self.obj.endswith(".v4.o")


def _parse_manifest() -> tuple[dict[str, str], list[Entry]]:
    toolchain: dict[str, str] = {}
    entries: list[Entry] = []
    if not MANIFEST.exists():
        return toolchain, entries
    for line in MANIFEST.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("toolchain "):
            key, _, value = line[len("toolchain ") :].partition(": ")
            toolchain[key] = value
            continue
        fields = line.split()
        entries.append(Entry(fields[0], fields[1], tuple(fields[2:])))
    return toolchain, entries


TOOLCHAIN, ENTRIES = _parse_manifest()


def _sources_digest(sources: tuple[str, ...]) -> str:
    """sha256 of what `sha256sum SOURCES...` prints when run in samples/."""
    listing = "".join(
        f"{hashlib.sha256((SAMPLES / src).read_bytes()).hexdigest()}  {src}\n" for src in sources
    )
    return hashlib.sha256(listing.encode()).hexdigest()


# --------------------------------------------------------------------------
# (a) manifest against sources
# --------------------------------------------------------------------------


def test_manifest_covers_every_sample() -> None:
    assert MANIFEST.exists(), f"samples/MANIFEST.sha256 is missing: {REBUILD_HINT}"
    listed = {src for e in ENTRIES for src in e.sources if src.endswith(".c")}
    present = {p.relative_to(SAMPLES).as_posix() for p in SAMPLES.glob("*.c")}
    present |= {p.relative_to(SAMPLES).as_posix() for p in SAMPLES.glob("loader/*.c")}
    missing = sorted(present - listed)
    assert not missing, f"no object in samples/MANIFEST.sha256 for {missing}: {REBUILD_HINT}"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.obj for e in ENTRIES])
def test_object_matches_sources(entry: Entry) -> None:
    assert (SAMPLES / entry.obj).is_file(), f"samples/{entry.obj} is missing: {REBUILD_HINT}"
    gone = [src for src in entry.sources if not (SAMPLES / src).is_file()]
    assert not gone, f"samples/{entry.obj} is out of date ({gone} gone): {REBUILD_HINT}"
    assert _sources_digest(entry.sources) == entry.digest, (
        f"samples/{entry.obj} is out of date: {REBUILD_HINT}"
    )


# --------------------------------------------------------------------------
# (b) rebuild and compare
# --------------------------------------------------------------------------


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (required when CI is set)")
    pytest.skip(reason)


def _tool(name: str) -> bool:
    return shutil.which(name) is not None


@dataclass
class Rebuild:
    out: Path
    toolchain: dict[str, str]
    v4_available: bool

    def same_toolchain(self, entry: Entry) -> bool:
        """Whether entry was committed from the toolchain found here."""
        keys = ("clang", "system-headers") + (("clang-v4",) if entry.needs_v4_compiler else ())
        return all(self.toolchain.get(k) == TOOLCHAIN.get(k) for k in keys)


@pytest.fixture(scope="module")
def rebuild(tmp_path_factory: pytest.TempPathFactory) -> Rebuild:
    for tool in ("make", "clang-16"):
        if not _tool(tool):
            _unavailable(f"{tool} not found: cannot rebuild the samples")
    v4 = _tool("clang-19")
    out = tmp_path_factory.mktemp("samples-rebuild")
    targets = [str(out / e.obj) for e in ENTRIES if v4 or not e.needs_v4_compiler]
    make = ["make", "-s", "--no-print-directory", "-C", str(SAMPLES)]
    env = {k: v for k, v in os.environ.items() if k not in ("CLANG", "CLANG_V4", "MAKEFLAGS")}
    built = subprocess.run(
        [*make, "-j2", f"O={out}", *targets], capture_output=True, text=True, env=env, timeout=300
    )
    assert built.returncode == 0, f"rebuilding the samples failed:\n{built.stdout}{built.stderr}"

    ident = subprocess.run(
        [*make, "toolchain-id"], capture_output=True, text=True, env=env, timeout=120
    )
    assert ident.returncode == 0, ident.stderr
    toolchain: dict[str, str] = {}
    for line in ident.stdout.splitlines():
        key, _, value = line.removeprefix("toolchain ").partition(": ")
        toolchain[key] = value
    return Rebuild(out, toolchain, v4)


def _sections(data: bytes) -> dict[str, bytes]:
    elf = ELFFile(io.BytesIO(data))
    return {
        s.name: (s.data() if s["sh_type"] != "SHT_NOBITS" else s["sh_size"].to_bytes(8, "little"))
        for s in elf.iter_sections()
        if s.name
    }


def _is_debug_section(name: str) -> bool:
    return name.startswith((".debug", ".rel.debug")) or name == ".comment"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.obj for e in ENTRIES])
def test_rebuild_is_identical(entry: Entry, rebuild: Rebuild) -> None:
    if entry.needs_v4_compiler and not rebuild.v4_available:
        _unavailable("clang-19 not found: cannot rebuild the -mcpu=v4 loader objects")
    committed = (SAMPLES / entry.obj).read_bytes()
    fresh = (rebuild.out / entry.obj).read_bytes()
    if rebuild.same_toolchain(entry):
        assert fresh == committed, (
            f"samples/{entry.obj} differs from a fresh build with the same toolchain: "
            f"{REBUILD_HINT} (and check that the build is deterministic)"
        )
        return

    # Other system headers or compiler builds: all but the debug info must match.
    old, new = _sections(committed), _sections(fresh)
    old = {k: v for k, v in old.items() if not _is_debug_section(k)}
    new = {k: v for k, v in new.items() if not _is_debug_section(k)}
    differing = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    assert not differing, (
        f"samples/{entry.obj}: sections {differing} differ from a fresh build "
        f"(built with {TOOLCHAIN}, here {rebuild.toolchain}): {REBUILD_HINT}"
    )
