"""Load-acquire and store-release (BPF_STX | BPF_ATOMIC, imm BPF_LOAD_ACQ / BPF_STORE_REL,
Linux 6.15) against Linux 6.18: the same program through BPF_PROG_TEST_RUN on the kernel
(its JIT passes them through) and on pyxdp's interpreter and JIT, all four sizes on a map
value and on the stack, with the same return value and the same map value after each
packet; and encodings the assembler has no words for, refused as Linux refuses them.
(The verifier corpus' ``acq_*``/``rel_*`` cases are re-measured on the kernel with every
other case by tests/kernel/test_verifier_kernel.py.)"""

from __future__ import annotations

import struct

import pytest

from pyxdp.asm.insn import Instruction as I
from pyxdp.collection import Collection
from pyxdp.errors import VerifierError
from pyxdp.kernel.backend import KernelBackend
from pyxdp.kernel.verifier_log import verifier_reason
from pyxdp.net.prog import jit_available
from pyxdp.spec import MapSpec
from pyxdp.testing.programs import asm_collection
from pyxdp.testing.verifier_cases import VerifierCase
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.verifier import verify

pytestmark = pytest.mark.kernel

VAL = MapSpec("val", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 32, 1)
# The packet's first 15 bytes store-released into the value at 0 (u8), 2 (u16), 4 (u32)
# and 8 (u64), after the old ones were load-acquired; the old ones go to the value's
# second half through the stack (a release and an acquire there), and r0 is their sum
# (narrow loads zero-extend: -1 in r0 before each shows it).
PROGRAM = asm_collection("""
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 16
if r4 > r3 goto out
r6 = r2
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = map[fd:0]
call 1
if r0 == 0 goto out
r7 = r0
r0 = -1
w0 = load_acquire((u8 *)(r7 + 0))
r1 = -1
w1 = load_acquire((u16 *)(r7 + 2))
r2 = -1
w2 = load_acquire((u32 *)(r7 + 4))
r3 = load_acquire((u64 *)(r7 + 8))
r4 = *(u8 *)(r6 +0)
store_release((u8 *)(r7 + 0), w4)
r4 = *(u16 *)(r6 +1)
store_release((u16 *)(r7 + 2), w4)
r4 = *(u32 *)(r6 +3)
store_release((u32 *)(r7 + 4), w4)
r4 = *(u64 *)(r6 +7)
store_release((u64 *)(r7 + 8), r4)
store_release((u64 *)(r10 - 16), r3)
store_release((u32 *)(r10 - 20), w2)
store_release((u16 *)(r10 - 22), w1)
store_release((u8 *)(r10 - 23), w0)
r5 = 0x77
store_release((u8 *)(r10 - 24), w5)
r5 = load_acquire((u64 *)(r10 - 24))
store_release((u64 *)(r7 + 16), r5)
r5 = load_acquire((u64 *)(r10 - 16))
store_release((u64 *)(r7 + 24), r5)
r0 += r1
r0 += r2
r0 += r3
exit
out:
r0 = 1
exit
""", [VAL])
PACKETS = [bytes(range(1, 65)), bytes(range(200, 256)) + bytes(8), b"\xff" * 16,
           bytes(64)]


def _runs(c: Collection) -> list[tuple[int, bytes]]:
    c.maps["val"].update(bytes(4), bytes(range(0xA0, 0xC0)))
    out = []
    for data in PACKETS:
        r = c.programs["t"].test_run(data)
        out.append((r.retval, bytes(c.maps["val"].lookup(bytes(4)))))
    return out


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_acquire_and_release_run_as_on_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    with Collection(PROGRAM, "kernel") as k, \
            Collection(PROGRAM, "userspace", engine=engine) as u:
        linux = _runs(k)
        assert _runs(u) == linux
    first_val = bytes(range(0xA0, 0xC0))
    # the first run loaded the value's initial words: 0xa0 + 0xa3a2 + 0xa7a6a5a4 + ...
    (word,) = struct.unpack_from("<Q", first_val, 8)
    expect = 0xA0 + 0xA3A2 + 0xA7A6A5A4 + word
    assert linux[0][0] == expect & 0xFFFF_FFFF
    assert linux[0][1][:16] == bytes([1, 0xA1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15])


_SPILL = (I(0xB7, 2, 0, 0, 0), I(0x7B, 10, 2, -8, 0))  # r2 = 0; *(u64 *)(r10 -8) = r2
# BPF_ATOMIC imms and sizes the assembler has no words for: check_atomic refuses them where
# the walk reaches them (an unreachable one is only unreachable).
RAW = {
    "imm 0x120": (_SPILL + (I(0xDB, 10, 2, -8, 0x120), I(0xB7), I(0x95)),
                  "BPF_ATOMIC uses invalid atomic opcode 120"),
    "imm -1": (_SPILL + (I(0xDB, 10, 2, -8, -1), I(0xB7), I(0x95)),
               "BPF_ATOMIC uses invalid atomic opcode ffffffff"),
    "acquire|fetch": (_SPILL + (I(0xDB, 0, 10, -8, 0x101), I(0x95)),
                      "BPF_ATOMIC uses invalid atomic opcode 101"),
    "half add": (_SPILL + (I(0xCB, 10, 2, -8, 0), I(0xB7), I(0x95)),
                 "invalid atomic operand size"),
    "unreachable": ((I(0xB7), I(0x95), I(0xDB, 0, 10, -8, 0x120), I(0x95)),
                    "unreachable insn 2"),
}


@pytest.mark.parametrize("name", list(RAW))
def test_bad_atomic_encodings_refused_as_linux(name: str) -> None:
    insns, line = RAW[name]
    spec = VerifierCase("raw", "r0 = 0\nexit", None).spec()
    (prog,) = spec.programs.values()
    prog = prog.copy(insns=insns)
    with pytest.raises(VerifierError) as mine:
        verify(prog, spec.maps)
    kb = KernelBackend(spec)
    try:
        with pytest.raises(VerifierError) as linux:
            kb.load_program(prog, {})
    finally:
        kb.close()
    assert (mine.value.reason, mine.value.errno) == (verifier_reason(linux.value.log),
                                                     linux.value.errno) == (line, 22)
