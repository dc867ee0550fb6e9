"""Every kfunc of the running kernel's BTF called from XDP: pyxdp's verdict is Linux's.

Each kernel function the kernel's BTF tags ``bpf_kfunc`` is called from a tiny XDP
program three times - with every argument register 0, with R1 the context, and with R1
a pointer to 24 zeroed stack bytes and R2 8 - and loaded into Linux and into pyxdp's
verifier. Both must give the same verdict (accepted, or the same last line of the log),
the same errno and the same count of instructions processed: the kfuncs of other program types
refused at the call, the others by their arguments' checks. The exceptions are the
kfuncs Linux allows for XDP that pyxdp does not model (docs/SEMANTICS.md, "kfuncs
outside the table"): pyxdp refuses those with UnsupportedHelper, which must name
the kfunc; the list below is that documented set, so a kfunc that becomes modelled
must leave it.
"""

from __future__ import annotations

import pytest

from pyxdp.btf.btf import BtfKind
from pyxdp.btf.vmlinux import kernel_btf_index
from pyxdp.errors import UnsupportedHelper, VerifierError
from pyxdp.kernel.backend import KernelBackend
from pyxdp.kernel.verifier_log import verifier_reason
from pyxdp.testing.verifier_cases import VerifierCase
from pyxdp.verifier import verify

pytestmark = pytest.mark.kernel

# Allowed for XDP on Linux 6.18, not modelled by pyxdp (docs/SEMANTICS.md).
UNMODELLED: frozenset[str] = frozenset()
ARGS = {"zero": "r1 = 0\nr2 = 0\nr3 = 0\nr4 = 0\nr5 = 0\n",
        "ctx": "r2 = 0\nr3 = 0\nr4 = 0\nr5 = 0\n",
        "stack": "*(u64 *)(r10 - 8) = 0\n*(u64 *)(r10 - 16) = 0\n*(u64 *)(r10 - 24) = 0\n"
                 "r1 = r10\nr1 += -24\nr2 = 8\nr3 = 0\nr4 = 0\nr5 = 0\n"}
Verdict = tuple[str | None, int, int]  # the reason (None: accepted), errno, processed


def _kfuncs() -> list[str]:
    ix = kernel_btf_index()
    if ix is None:
        pytest.skip("no kernel BTF")
    names = set()
    for i in ix.find_all("bpf_kfunc"):
        tag = ix.type_by_id(i)
        if tag.kind is BtfKind.DECL_TAG and tag.component_idx == -1:
            names.add(ix.type_by_id(tag.size_type).name)
    return sorted(names)


def _processed(log: str) -> int:
    return int(log.rsplit("processed ", 1)[1].split()[0])


def _linux(case: VerifierCase) -> Verdict:
    spec = case.spec()
    (prog,) = spec.programs.values()
    kb = KernelBackend(spec)
    try:
        return None, 0, kb.load_program(prog, {}).info().verified_insns
    except VerifierError as e:
        return verifier_reason(e.log), e.errno, _processed(e.log)
    finally:
        kb.close()


def _pyxdp(case: VerifierCase) -> Verdict:
    spec = case.spec()
    (prog,) = spec.programs.values()
    try:
        return None, 0, verify(prog, spec.maps, btf=spec.btf).insns_processed
    except VerifierError as e:
        return e.reason, e.errno, _processed(e.log)


def test_every_kfunc_call_gets_linux_verdict() -> None:
    kfuncs = _kfuncs()
    assert len(kfuncs) > 100
    wrong, unmodelled = [], set()
    for name in kfuncs:
        for how, regs in ARGS.items():
            case = VerifierCase(f"{name}_{how}", f"{regs}call KFUNC({name})\nr0 = 2\nexit", None)
            linux = _linux(case)
            try:
                got = _pyxdp(case)
            except UnsupportedHelper as e:
                assert name in str(e)
                unmodelled.add(name)
                continue
            if got != linux:
                wrong.append(f"{name} ({how} arguments): Linux {linux!r}, pyxdp {got!r}")
    assert not wrong, "\n".join(wrong)
    assert unmodelled <= UNMODELLED, sorted(unmodelled - UNMODELLED)
    # a kfunc pyxdp models now (or this kernel lacks) leaves the documented list
    assert unmodelled == UNMODELLED & set(kfuncs), sorted(UNMODELLED & set(kfuncs) - unmodelled)
