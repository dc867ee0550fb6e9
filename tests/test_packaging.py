"""What pyxdp ships: the wheel carries the samples (objects, C sources, headers), the
built-in conformance vectors, py.typed and the LICENSE; installed from it (not editable),
pyxdp runs from any directory with ``samples/NAME.o``, and README.md runs there step by
step; an editable install is one mypy follows (a plain path entry, not an import hook)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def _building(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One build from the checkout at a time across test workers: setuptools writes its
    build/ and egg-info directories into the checkout, and two at once break each other."""
    shared = tmp_path_factory.getbasetemp().parent  # the same for every xdist worker
    with open(shared / "pyxdp-build.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    with _building(tmp_path_factory):
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                        "--no-build-isolation", "-w", str(out), str(ROOT)],
                       check=True, timeout=300, capture_output=True)
    (whl,) = out.glob("pyxdp-*.whl")
    return whl


def _source_files(top: Path) -> set[str]:
    return {p.relative_to(top).as_posix() for p in top.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_wheel_carries_samples_vectors_typing_and_license(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    samples = {n.removeprefix("pyxdp/_samples/") for n in names
               if n.startswith("pyxdp/_samples/")}
    assert samples == _source_files(ROOT / "samples")  # every object, source and header
    assert {"xdp1.o", "xdp1.c", "include/pyxdp_bpf.h", "include/asm/types.h",
            "loader/globals.v4.o"} <= samples
    vectors = {n for n in names if n.startswith("pyxdp/testing/vectors/")}
    assert vectors == {f"pyxdp/testing/vectors/{n}"
                       for n in _source_files(ROOT / "pyxdp/testing/vectors")}
    assert {"pyxdp/py.typed", "pyxdp/btf/xdp_types.btf", "pyxdp/samples.py"} <= names
    (lic,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    text = zipfile.ZipFile(wheel).read(lic).decode()
    assert text.startswith("MIT License") and "the pyxdp authors" in text
    assert not [n for n in names if n.startswith(("tests/", "bench/", "examples/"))]


def _install(wheel: Path, target: Path) -> dict[str, str]:
    """The wheel installed (not editable) into ``target``: the environment that runs it
    ahead of any other pyxdp."""
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--target", str(target), str(wheel)],
                   check=True, timeout=300, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "PYXDP_CONFORMANCE_DIR"}
    env["PYTHONPATH"] = str(target)
    return env


_FROM_ELSEWHERE = textwrap.dedent("""
    import pathlib, sys
    import pyxdp
    from pyxdp import samples
    from pyxdp.cli.main import main
    from pyxdp.collection import Collection
    from pyxdp.net.packets import udp_packet

    where = pathlib.Path(pyxdp.__file__).resolve()
    assert where.is_relative_to(pathlib.Path(sys.argv[1]).resolve()), where
    assert not pathlib.Path("samples").exists()
    assert samples.path("xdp1.o").read_bytes()[:4] == b"\\x7fELF"
    assert (samples.include_dir() / "pyxdp_bpf.h").is_file()
    with Collection.load("samples/xdp1.o") as xdp1:         # as README writes it
        assert xdp1.programs["xdp_prog1"].test_run(udp_packet(b"x")).retval == 1
    assert main(["prog", "show", "samples/xdp2.o"]) == 0
    assert main(["conformance"]) == 0                       # the vectors in the package
    print("ok")
""")


def test_installed_wheel_runs_from_another_directory(wheel: Path, tmp_path: Path) -> None:
    target, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = _install(wheel, target)
    assert (target / "bin" / "pyxdp").is_file()
    assert (target / "bin" / "pyxdp-conformance-plugin").is_file()
    res = subprocess.run([sys.executable, "-c", _FROM_ELSEWHERE, str(target)], cwd=elsewhere,
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.rstrip().endswith("ok") and "passed" in res.stdout


# README.md's steps as tests/test_readme.py runs them (its parsing, its (root) namespaces,
# its Ctrl-C of live commands), in one process of the installed wheel: the steps share
# that process's imports and machine code, as that test's do, and the native code comes
# from the numba cache, which is filed by content, not by install location
# (pyxdp.net.native), so the wheel reuses what the checkout's tests compiled.
_README_FROM_ELSEWHERE = textwrap.dedent("""
    import importlib.util, os, pathlib, sys, time
    target, readme_test, work = (pathlib.Path(a) for a in sys.argv[1:4])
    import pyxdp
    where = pathlib.Path(pyxdp.__file__).resolve()
    assert where.is_relative_to(target.resolve()), where
    spec = importlib.util.spec_from_file_location("readme_steps", readme_test)
    steps = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = steps
    spec.loader.exec_module(steps)
    os.chdir(work)
    sys.argv = ["pyxdp"]
    assert not pathlib.Path("samples").exists()
    root = os.geteuid() == 0
    ran = 0
    for step in steps.STEPS:
        if step.root and not root:
            print(f"not root: {step.id}", file=sys.stderr)
            continue
        t0 = time.monotonic()
        try:
            if step.root:
                with steps._veth_namespace():
                    steps._run(step, work)
            else:
                steps._run(step, work)
        except BaseException as e:
            print(f"FAILED {step.id}: {type(e).__name__}: {e}", file=sys.stderr)
            sys.exit(1)
        ran += 1
        print(f"{time.monotonic() - t0:7.1f} s  {step.id}", file=sys.stderr, flush=True)
    print(f"ran {ran} of {len(steps.STEPS)}", file=sys.stderr)
""")


@pytest.mark.xdist_group("kernel")  # (root) steps build namespaces and read tracefs
def test_installed_wheel_runs_the_readme(wheel: Path, tmp_path: Path) -> None:
    """``pip install .`` (not editable), then README.md from another directory: every
    command and snippet, the console script's own entry point included."""
    if os.geteuid() != 0 and os.environ.get("CI") == "true":
        pytest.fail("README's (root) steps need root, and CI runs as root")
    target, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = _install(wheel, target)
    env["PATH"] = f"{target / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    res = subprocess.run([str(target / "bin" / "pyxdp"), "--version"], cwd=elsewhere,
                         env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "pyxdp" in res.stdout, res.stderr[-2000:]
    res = subprocess.run([sys.executable, "-c", _README_FROM_ELSEWHERE, str(target),
                          str(ROOT / "tests" / "test_readme.py"), str(elsewhere)],
                         cwd=elsewhere, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    ran, total = map(int, res.stderr.splitlines()[-1].split()[1::2])
    assert total >= 20 and (ran == total or os.geteuid() != 0), res.stderr[-3000:]


def test_mypy_strict_sees_an_editable_install(tmp_path: Path,
                                              tmp_path_factory: pytest.TempPathFactory
                                              ) -> None:
    """A user's script type-checks against an editable install: setuptools writes a path
    entry (package-dir in pyproject.toml), not the import hook mypy cannot follow."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages",
                    str(venv)], check=True, timeout=120)
    # pip of this interpreter builds the editable wheel and installs it into the venv;
    # --ignore-installed, else pip first uninstalls the pyxdp this interpreter has (the
    # suite's own install: later tests starting Python elsewhere could not import it).
    with _building(tmp_path_factory):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                        "--no-build-isolation", "--ignore-installed", "--prefix", str(venv),
                        "-e", str(ROOT)],
                       check=True, timeout=300, capture_output=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (pth,) = site.glob("__editable__*pyxdp*.pth")
    assert pth.read_text().strip() == str(ROOT)
    assert not list(site.glob("__editable__*finder*.py"))
    user = tmp_path / "user.py"
    user.write_text(textwrap.dedent("""
        from pyxdp.collection import Collection
        from pyxdp.samples import path


        def verdict(packet: bytes) -> int:
            with Collection.load(path("xdp1.o")) as c:
                return c.programs["xdp_prog1"].test_run(packet).retval
    """))
    res = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                          "--python-executable", str(venv / "bin" / "python"), str(user)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:]
    # Without the install mypy cannot see pyxdp: the check above is not vacuous.
    pth.unlink()
    res = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                          "--no-site-packages", str(user)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and "pyxdp" in res.stdout
