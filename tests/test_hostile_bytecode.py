"""Hostile instruction streams at the verifier's door: callbacks' addresses
(``BPF_PSEUDO_FUNC``) that point into an ld_imm64 or outside the program, and map
references on ld_imm64s whose source field says something else. Each is Linux's
verdict with Linux's words (a map reference is bound as libbpf binds it); before,
some walked past their function's end and raised IndexError in the stack liveness."""

from __future__ import annotations

import random

import pytest

from pyxdp.asm.insn import Instruction
from pyxdp.collection import Collection
from pyxdp.errors import VerifierError
from pyxdp.spec import CollectionSpec, MapRef, MapSpec, ProgramSpec
from pyxdp.uapi.bpf import BpfMapType

SEED = 0x45
EXIT = [Instruction(0xB7, 0, 0, 0, 0), Instruction(0x95, 0, 0, 0, 0)]
ARR = MapSpec("arr", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 1, 0)


def _ld(src: int, imm: int) -> list[Instruction]:
    return [Instruction(0x18, 1, src, 0, imm), Instruction(0, 0, 0, 0, 0)]


# program -> Linux 6.18's verdict (tests/kernel checks the same table against Linux)
CASES: dict[str, tuple[list[Instruction], str]] = {
    "callback-into-ld_imm64": (_ld(4, 0) + EXIT, "last insn is not an exit or jmp"),
    "callback-past-the-end": (_ld(4, 100) + EXIT, "call to invalid destination"),
    "callback-before-the-start": (_ld(4, -3) + EXIT, "call to invalid destination"),
    "call-into-ld_imm64": ([Instruction(0x85, 0, 1, 0, 1)] + _ld(0, 0) + EXIT,
                           "last insn is not an exit or jmp"),
    # check_cfg's last pass, in program order: an unreachable instruction first, then
    # a reached second half (pyxdp said "lands inside an ld_imm64" before either)
    "jump-into-ld_imm64": ([Instruction(0xB7, 0, 0, 0, 2), Instruction(0x15, 0, 0, 1, 1)]
                           + _ld(0, 5) + EXIT, "jump into the middle of ldimm64 insn 2"),
    "ja-over-ld_imm64-into-it": ([Instruction(0x05, 0, 0, 1, 0)] + _ld(0, 5) + EXIT,
                                 "unreachable insn 1"),
    "gotol-into-ld_imm64": ([Instruction(0x15, 1, 0, 1, 0), Instruction(0x06, 0, 0, 0, 1)]
                            + _ld(0, 5) + EXIT, "jump into the middle of ldimm64 insn 2"),
    # kfunc calls no extern names: add_kfunc_call's words (pyxdp said it has no kfuncs)
    "kfunc-btf_id-not-a-function": ([Instruction(0x85, 0, 2, 0, 1)] + EXIT,
                                    "kernel btf_id 1 is not a function"),
    "kfunc-btf_id-negative": ([Instruction(0x85, 0, 2, 0, -5)] + EXIT,
                              "kernel btf_id 4294967291 is not a function"),
    "kfunc-btf_id-0": ([Instruction(0x85, 0, 2, 0, 0)] + EXIT,
                       "invalid kernel function call not eliminated in verifier pass"),
    "kfunc-btf_id-0-then-r0-unread": ([Instruction(0x85, 0, 2, 0, 0), EXIT[1]],
                                      "R0 !read_ok"),
    "kfunc-module-offset": ([Instruction(0x85, 0, 2, 1, 7)] + EXIT,
                            "failed to find BTF for kernel function"),
    "kfunc-negative-offset": ([Instruction(0x85, 0, 2, -1, 7)] + EXIT,
                              "failed to find BTF for kernel function"),
}


def _spec(insns: list[Instruction], refs: tuple[MapRef, ...] = ()) -> CollectionSpec:
    return CollectionSpec({"t": ProgramSpec("t", "xdp", tuple(insns), license="GPL",
                                            map_refs=refs)}, {"arr": ARR}, license="GPL")


@pytest.mark.parametrize("name", sorted(CASES))
def test_callback_addresses_start_functions_as_in_linux(name: str) -> None:
    insns, want = CASES[name]
    with pytest.raises(VerifierError) as e:
        Collection(_spec(insns), engine="interp")
    assert e.value.reason == want


def test_a_map_reference_is_bound_whatever_its_source_field() -> None:
    """libbpf makes a relocated ld_imm64 a map load whatever src it had; a random
    source (a callback's among them) must not move function boundaries."""
    rng = random.Random(SEED)
    body = [Instruction(0x62, 10, 0, -4, 0), Instruction(0xBF, 2, 10, 0, 0),
            Instruction(0x07, 2, 0, 0, -4), *_ld(0, 0), Instruction(0x85, 0, 0, 0, 1),
            *EXIT]
    for src in rng.sample(range(7), 7):
        insns = list(body)
        insns[3] = Instruction(0x18, 1, src, 0, rng.choice([0, 1, -1]))
        with Collection(_spec(insns, (MapRef(3, "arr", "fd"),)), engine="interp") as c:
            assert c.programs["t"].test_run(bytes(64)).retval == 0


@pytest.mark.kernel
@pytest.mark.parametrize("name", sorted(CASES))
def test_linux_gives_the_same_verdicts(name: str) -> None:
    insns, want = CASES[name]
    with pytest.raises(VerifierError) as e:
        Collection(_spec(insns), "kernel")
    assert e.value.reason == want


@pytest.mark.kernel
@pytest.mark.parametrize("ctx_in", [b"", b"\0\0", bytes(20), bytes(24)], ids=len)
def test_a_short_ctx_in_gives_the_whole_context_on_both_backends(ctx_in: bytes) -> None:
    """ctx_size_out=0 with a ctx_in copies the whole xdp_md back; the kernel backend's
    buffer was ctx_in's size, and Linux answered ENOSPC for an xdp_md it could not hold."""
    from pyxdp.testing.programs import asm_collection
    spec = asm_collection("call 188\nexit")  # bpf_xdp_get_buff_len
    got = []
    for backend in ("userspace", "kernel"):
        with Collection(spec, backend) as c:
            r = c.programs["t"].test_run(bytes(1514), ctx_in=ctx_in)
            got.append((int(r.retval), r.ctx_out))
    assert got[0] == got[1] and got[0][1] is not None and len(got[0][1]) == 24


def _truncated_runs(backend: str) -> list[tuple[object, ...]]:
    import dataclasses
    import struct

    from pyxdp.errors import TestRunTruncated
    from pyxdp.testing.programs import asm_collection
    spec = asm_collection("r0 = 2\nexit")
    (prog,) = spec.programs.values()
    frags = dataclasses.replace(spec, programs={"t": dataclasses.replace(prog, flags=32)})
    data = bytes(range(256)) * 40
    md200 = struct.pack("<6I", 0, 200, 0, 0, 0, 0)
    # (data_size_out, ctx_in, ctx_size_out, input length)
    cases = [(2000, None, 0, 5000), (100, md200, 0, 200), (100, md200, 24, 200),
             (100, bytes(24), 24, 1000), (6000, None, 0, 10240), (10240, bytes(24), 4, 10240)]
    out: list[tuple[object, ...]] = []
    for sp in (spec, frags):
        with Collection(sp, backend) as c:
            for dso, ctx, cso, n in cases:
                with pytest.raises(TestRunTruncated) as e:
                    c.programs["t"].test_run(data[:n], ctx_in=ctx, data_size_out=dso,
                                             ctx_size_out=cso)
                r = e.value.result
                out.append((int(r.retval), r.data_out, r.ctx_out,  # type: ignore[attr-defined]
                            e.value.data_size, e.value.ctx_size))
    return out


def test_enospc_cuts_the_linear_part_and_leaves_the_context() -> None:
    """bpf_test_finish: a data_size_out below the output cuts the linear part (frags
    follow whole); below the frags alone nothing is written, retval included; data
    that did not fit leaves the context buffer as it was."""
    runs = _truncated_runs("userspace")
    data = bytes(range(256)) * 40
    assert runs[0][1] == data[:520] + data[3520:5000] and runs[0][3] == 5000
    assert runs[2][2] == bytes(24) and runs[2][3:] == (200, 24)
    assert runs[3] == (0, bytes(100), bytes(24), 100, 24)
    # Round 9: data_size is what Linux writes back to data_size_out - the full size
    # once the frags fit (5000), data_size_out itself below them (bpf_test_finish
    # returns first; measured on 6.18, test_enospc_copies_match_linux).
    assert runs[6][3] == 5000 and runs[10][3] == 6000 and runs[10][0] == 0


@pytest.mark.kernel
def test_enospc_copies_match_linux() -> None:
    assert _truncated_runs("userspace") == _truncated_runs("kernel")


def test_kernel_symbol_address_is_refused_by_the_engines_in_one_line() -> None:
    """ld_imm64 of a kernel function's BTF id passes the verifier as on Linux (read-only
    memory of no size); pyxdp's engines have no kernel addresses, so the load says that
    (it said "references a map but has no relocation")."""
    from pyxdp.btf.btf import BtfKind
    from pyxdp.btf.vmlinux import kernel_btf_index
    from pyxdp.errors import NotSupportedError
    from pyxdp.testing.programs import asm_collection

    kernel = kernel_btf_index()
    if kernel is None:
        pytest.skip("no kernel BTF here (/sys/kernel/btf/vmlinux)")
    tid = kernel.find("bpf_xdp_adjust_head", BtfKind.FUNC)
    assert tid is not None
    with pytest.raises(NotSupportedError, match=r"^program 't' loads the address of kernel "
                       rf"symbol BTF id {tid} \(ld_imm64 at pc 0\): pyxdp's engines have no "):
        Collection(asm_collection(f"r1 = btf_id[{tid}]\nr0 = 2\nexit", ()), "userspace")
