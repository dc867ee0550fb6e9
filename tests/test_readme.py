"""README.md runs: every command of its ```sh blocks and every ```python (and ```py) snippet
is executed, in the README's order, in one empty directory.

README.md is read when the tests are collected, so the test follows its edits. Inputs come
from the README's own recipes; ``samples/NAME.o`` finds the shipped samples from that
directory (:mod:`pyxdp.samples`). ``pyxdp`` commands run in this process
(``pyxdp.cli.main.main``: the import and the machine code are paid once); any other command
in a subprocess. The commands that run for a duration or until Ctrl-C (``bench``,
``monitor``, ``xsk``) are interrupted as Ctrl-C would after :data:`LIVE_SECONDS`: they pass
when they ran that long without failing. A command or snippet whose text says ``(root)``
runs only as root (and fails under CI=true without it), inside a network namespace of its
own where ``eth0`` and ``eth1`` are a veth pair, so no interface of the machine is touched.
The first block's two install commands are .ci/run's own (run there verbatim, in a fresh
clone): they are checked, not run again.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import pytest

# The steps run in order in one directory, so on one xdist worker: the kernel tests' one
# (the (root) steps build namespaces and read machine-wide tracefs, as those do).
pytestmark = pytest.mark.xdist_group("kernel")

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
INSTALL = ["pip install -e . && pyxdp bench xdp",
           "pip install -e '.[test]' && python -m pytest"]
LIVE = frozenset({"bench", "monitor", "xsk"})
"""``pyxdp`` commands that run for a duration or until Ctrl-C."""
LIVE_SECONDS = 1.0
"""How long a live command runs before the test's Ctrl-C."""

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)


@dataclass(frozen=True)
class Step:
    """One command line of a ```sh block, or one whole ```python block."""

    line: int
    kind: str
    text: str

    @property
    def root(self) -> bool:
        return "(root)" in self.text

    @property
    def id(self) -> str:
        head = self.text.strip().splitlines()[0] if self.kind == "sh" else self.kind
        return f"README.md:{self.line}:{head[:50]}"


def blocks(text: str) -> list[tuple[int, str, str]]:
    """(line of the fence, language, body) for every fenced block."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2))
            for m in _FENCE.finditer(text)]


def steps(text: str) -> list[Step]:
    """Everything to run, in order: the install block (the first) left out."""
    out: list[Step] = []
    found = [b for b in blocks(text) if b[1] in ("sh", "python", "py")]
    for line, lang, body in found[1:]:
        if lang == "sh":
            for i, cmd in enumerate(body.splitlines()):
                if cmd.strip() and not cmd.lstrip().startswith("#"):
                    out.append(Step(line + 1 + i, "sh", cmd))
        else:
            out.append(Step(line + 1, "python", body))
    return out


TEXT = README.read_text()
STEPS = steps(TEXT)


def test_readme_opens_with_the_two_commands() -> None:
    """.ci/run runs these verbatim in a fresh clone; the steps below skip them."""
    first = next(b for b in blocks(TEXT) if b[1] == "sh")
    assert first[2].strip().splitlines() == INSTALL
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -q -e . && pyxdp bench xdp" in ci
    assert "pip install -q -e '.[test]' && python -m pytest" in ci


def _touches_interfaces(step: Step) -> bool:
    """Whether a step acts on an interface (a replay of a capture only borrows the name)."""
    touches = r"--iface|\s-i\s|LiveDataplane\(|pyxdp (load|unload|status)\b"
    return "--pcap" not in step.text and re.search(touches, step.text) is not None


def test_readme_has_what_the_steps_need() -> None:
    """The recipes exist for every input a step reads, and nothing runs twice by mistake."""
    assert len(STEPS) >= 20
    made = "\n".join(s.text for s in STEPS if s.kind == "python")
    written = "\n".join(s.text for s in STEPS if s.kind != "python")  # pyxdp packet -o F
    for name in re.findall(r"(?:--data-in|--maps|--pcap|--topology|conformance) (\S+\.\w+)", TEXT):
        assert f'"{name}"' in made or f"-o {name}" in written, \
            f"README reads {name} but no snippet makes it"
    # A step that names an interface runs in a namespace of its own ((root)), never on
    # the machine's interfaces (a replay of a capture only borrows the name).
    for s in STEPS:
        if _touches_interfaces(s):
            assert s.root, f"README.md:{s.line} acts on an interface: mark it (root)"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readme")


@contextmanager
def _veth_namespace() -> Iterator[None]:
    """A network namespace of our own, with eth0 and eth1 a veth pair, entered by this
    thread (threads it starts are born in it)."""
    from pyxdp.kernel.netlink import netns
    name = f"pyxdp-readme-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
    try:
        for cmd in (["link", "add", "eth0", "type", "veth", "peer", "name", "eth1"],
                    ["link", "set", "eth0", "up"], ["link", "set", "eth1", "up"]):
            subprocess.run(["ip", "-n", name, *cmd], check=True, timeout=30)
        with netns(name):
            yield
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, timeout=30)


class _CtrlC(KeyboardInterrupt):
    """The test's Ctrl-C to a live command."""


@contextmanager
def _ctrl_c_after(seconds: float | None) -> Iterator[list[bool]]:
    """Raises KeyboardInterrupt in this thread after ``seconds``, as Ctrl-C would; the list
    yielded holds True once it did."""
    fired: list[bool] = []
    if seconds is None:
        yield fired
        return

    def fire(signum: int, frame: FrameType | None) -> None:
        fired.append(True)
        raise _CtrlC

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _run_command(argv: list[str], where: Path) -> None:
    if argv[0] != "pyxdp":
        res = subprocess.run(argv, cwd=where, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, f"{shlex.join(argv)}: {res.stderr.strip()[-500:]}"
        return
    from pyxdp.cli.main import main
    live = argv[1] in LIVE
    start = time.monotonic()
    fired: list[bool] = []
    try:
        with _ctrl_c_after(LIVE_SECONDS if live else None) as fired:
            rc = main(argv[1:])
    except _CtrlC:
        return  # ran until the test's Ctrl-C
    except SystemError:
        if not fired:
            raise
        # The Ctrl-C landed inside compile() (a module imported on first use, its AST
        # being built), which reports an interrupt as "AST constructor recursion depth
        # mismatch": interrupted all the same.
        return
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    ran = time.monotonic() - start
    if fired and rc == 130:
        return  # the command's own Ctrl-C handling: interrupted, exit status 130
    assert rc in (0, None), f"{shlex.join(argv)} exited {rc} after {ran:.1f} s"


def _run(step: Step, where: Path) -> None:
    if step.kind == "python":
        exec(compile(step.text, f"README.md:{step.line}", "exec"), {"__name__": "__readme__"})
        return
    tokens = shlex.split(step.text, comments=True)
    while tokens:
        cut = tokens.index("&&") if "&&" in tokens else len(tokens)
        _run_command(tokens[:cut], where)
        tokens = tokens[cut + 1:]


@pytest.mark.parametrize("step", STEPS, ids=[s.id for s in STEPS])
def test_readme_step_runs(step: Step, workdir: Path, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
    if step.root and os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"README.md:{step.line} needs root, and CI runs as root")
        pytest.skip(f"README.md:{step.line} needs root")
    if not step.root and _touches_interfaces(step):  # never on the machine's interfaces
        pytest.fail(f"README.md:{step.line} acts on an interface but is not marked (root): "
                    "it would run outside a namespace of its own")
    monkeypatch.chdir(workdir)
    monkeypatch.setattr(sys, "argv", ["pyxdp"])
    if step.root:
        with _veth_namespace():
            _run(step, workdir)
    else:
        _run(step, workdir)
    capsys.readouterr()
