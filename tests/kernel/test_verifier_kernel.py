"""pyxdp's verifier against Linux's: the same programs through BPF_PROG_LOAD.

Every corpus program (pyxdp.testing.verifier_cases) is loaded into the
running kernel; its verdict - accepted, or the last line of the verifier log
and the errno - must be the one recorded in the corpus, which
tests/test_verifier.py holds pyxdp's verifier to. Every committed object's
programs get the same accept/refuse from both, and the same line and errno
when refused (but xsk_redirect.o, whose pyxdp-only helper Linux lacks, and
ct_kptr.o, whose BTF Linux refuses).
Device-bound corpus programs (the XDP metadata kfuncs) are bound to a veth of
a network namespace of the test's own.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from errno import errorcode
from pathlib import Path

import pytest

from pyxdp.btf.vmlinux import kernel_lacks_kfuncs
from pyxdp.elf import load_collection_spec
from pyxdp.errors import VerifierError
from pyxdp.kernel import netlink
from pyxdp.kernel.backend import KernelBackend
from pyxdp.kernel.verifier_log import verifier_reason
from pyxdp.spec import ProgramSpec
from pyxdp.testing.verifier_cases import CASES, LOOPS2_WALKS, VerifierCase
from pyxdp.verifier import verify
from pyxdp.verifier.kfuncs import syscall_verified

pytestmark = pytest.mark.kernel


def modelled(prog: ProgramSpec) -> bool:
    """XDP programs, and syscall programs calling only the kfuncs pyxdp's verifier checks
    there (what it covers)."""
    return prog.prog_type == "xdp" or (prog.prog_type == "syscall" and all(
        syscall_verified(k.name) for k in prog.kfuncs))

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
# tests/verifier_objects: clang output of loops Linux verifies until they converge
OBJECTS_DIR = Path(__file__).resolve().parents[1] / "verifier_objects"
# Objects calling a kfunc this kernel's BTF lacks (flowtable.o without
# CONFIG_NF_FLOW_TABLE): libbpf refuses them before any verdict
# (tests/kernel/test_flowtable_kernel.py).
OBJECTS = [p for p in sorted(SAMPLES.glob("*.o")) + sorted((SAMPLES / "loader").glob("*.o"))
           if p.name != "xsk_redirect.o" and not kernel_lacks_kfuncs(
               k.name for prog in load_collection_spec(p).programs.values()
               for k in prog.kfuncs)] + \
    [p for p in sorted((Path(__file__).resolve().parents[1] / "verifier_objects").glob("*.o"))
     # whose BTF Linux refuses: the kernel backend refuses its map before any verdict,
     # where libbpf goes on to the verifier (tests/test_kptr_dtor.py)
     if p.name != "ct_kptr.o"]


def _kernel_verdicts(spec: object, errnos: dict[str, int] | None = None
                     ) -> dict[str, str | None]:
    """Linux's verdict on each XDP program of ``spec``; ``errnos`` gets each one's errno
    (0 when accepted)."""
    kb = KernelBackend(spec)  # type: ignore[arg-type]
    out: dict[str, str | None] = {}
    errs = {} if errnos is None else errnos
    try:
        handles: dict[str, object] = {}
        for name, ms in spec.maps.items():  # type: ignore[attr-defined]
            handles[name] = kb.create_map(ms, handles)  # type: ignore[arg-type]
        for name, ps in spec.programs.items():  # type: ignore[attr-defined]
            if not modelled(ps):
                continue
            try:
                kb.load_program(ps, handles)  # type: ignore[arg-type]
                out[name] = None
                errs[name] = 0
            except VerifierError as e:
                out[name] = verifier_reason(e.log)
                errs[name] = e.errno
    finally:
        kb.close()
    return out


@pytest.fixture(scope="module")
def veth_ns() -> Iterator[str]:
    """A network namespace of our own with a veth pair: device-bound cases bind to it."""
    ns = f"pyxdp-verif-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "add", "va", "type", "veth", "peer", "name",
                        "vb"], check=True)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def test_corpus_verdicts_are_linux(veth_ns: str) -> None:
    wrong = []
    for case in CASES:
        errs: dict[str, int] = {}
        if case.bound:
            with netlink.netns(veth_ns):
                got = _kernel_verdicts(case.spec(netlink.ifindex_of("va")), errs)
        else:
            got = _kernel_verdicts(case.spec(), errs)
        (verdict,) = got.values()
        (err,) = errs.values()
        if (verdict, err) != (case.linux, case.errno):
            wrong.append(f"{case.name}: Linux says {verdict!r} ({errorcode.get(err, err)}), "
                         f"corpus {case.linux!r} ({errorcode.get(case.errno, case.errno)})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("obj", OBJECTS, ids=[p.name for p in OBJECTS])
def test_objects_same_verdict_as_linux(obj: Path) -> None:
    spec = load_collection_spec(obj)
    errs: dict[str, int] = {}
    linux = _kernel_verdicts(spec, errs)
    for name, prog in spec.programs.items():
        if not modelled(prog):
            continue
        try:
            verify(prog, spec.maps, btf=spec.btf)
            mine, my_err = None, 0
        except VerifierError as e:
            mine, my_err = e.reason, e.errno
        assert (mine, my_err) == (linux[name], errs[name]), name


def test_corpus_pinned_walks_are_linux() -> None:
    # The processed counts the corpus pins (tests/test_verifier.py holds pyxdp to them).
    wrong = []
    for case in (c for c in CASES if c.processed):
        spec = case.spec()
        kb = KernelBackend(spec)
        try:
            handles: dict[str, object] = {}
            for name, ms in spec.maps.items():
                handles[name] = kb.create_map(ms, handles)  # type: ignore[arg-type]
            (prog,) = spec.programs.values()
            got = kb.load_program(prog, handles).info().verified_insns  # type: ignore[arg-type]
        finally:
            kb.close()
        if got != case.processed:
            wrong.append(f"{case.name}: Linux processed {got}, corpus {case.processed}")
    assert not wrong, "\n".join(wrong)


def test_loop_walks_as_linux() -> None:
    # tests/verifier_objects/loops.o: the program whose walk once differed walks as many
    # instructions in pyxdp as in Linux (tests/test_verifier.py pins the count).
    spec = load_collection_spec(OBJECTS_DIR / "loops.o")
    name = "xdp_loop_then_branches"
    prog = spec.programs[name]
    kb = KernelBackend(spec)
    try:
        handles: dict[str, object] = {}
        for mname, ms in spec.maps.items():
            handles[mname] = kb.create_map(ms, handles)  # type: ignore[arg-type]
        linux = kb.load_program(prog, handles).info().verified_insns  # type: ignore[arg-type]
    finally:
        kb.close()
    assert verify(prog, spec.maps, btf=spec.btf).insns_processed == linux


def test_clang19_loops_walk_as_recorded() -> None:
    # tests/verifier_objects/loops2.o: Linux's walked instruction counts (accepted) and
    # errnos (refused) are the ones tests/test_verifier.py holds pyxdp to.
    spec = load_collection_spec(OBJECTS_DIR / "loops2.o")
    kb = KernelBackend(spec)
    got: dict[str, object] = {}
    try:
        handles: dict[str, object] = {}
        for mname, ms in spec.maps.items():
            handles[mname] = kb.create_map(ms, handles)  # type: ignore[arg-type]
        for name, prog in spec.programs.items():
            try:
                h = kb.load_program(prog, handles)  # type: ignore[arg-type]
                got[name] = h.info().verified_insns
            except VerifierError as e:
                got[name] = (verifier_reason(e.log), e.errno)
    finally:
        kb.close()
    assert got == LOOPS2_WALKS


def test_corpus_case_checks_itself() -> None:
    # A case whose recorded verdict is wrong must be caught by the comparison above.
    bad = VerifierCase("x", "r0 = 0\nexit", "R0 !read_ok")
    assert _kernel_verdicts(bad.spec()) == {"x": None}


def test_random_programs_same_verdict_and_message_as_linux() -> None:
    """2,000 random programs with typical bugs (pyxdp.testing.verifier_fuzz): every
    accept/refuse as Linux's, Linux's line for at least 95% of the refusals and Linux's
    errno wherever the line is Linux's."""
    import random

    from pyxdp.testing.verifier_fuzz import random_case

    rnd = random.Random(20261201)
    n = refused = same_line = 0
    wrong = []
    for i in range(2000):
        case = random_case(rnd, f"f{i}")
        spec = case.spec()
        errs: dict[str, int] = {}
        (linux,) = _kernel_verdicts(spec, errs).values()
        (linux_err,) = errs.values()
        (prog,) = spec.programs.values()
        try:
            verify(prog, spec.maps)
            mine, my_err = None, 0
        except VerifierError as e:
            mine, my_err = e.reason, e.errno
        n += 1
        if (linux is None) != (mine is None) or (linux == mine and linux_err != my_err):
            wrong.append(f"{case.asm}\nLinux: {linux!r} ({linux_err})\n"
                         f"pyxdp: {mine!r} ({my_err})")
        elif linux is not None:
            refused += 1
            same_line += linux == mine
    assert not wrong, "\n\n".join(wrong[:5])
    assert refused > 500 and n - refused > 100
    assert same_line >= 0.95 * refused, f"{same_line}/{refused} refusals with Linux's line"
