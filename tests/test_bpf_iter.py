"""may_goto and the numbers iterator kfuncs on both engines (kernel/bpf/verifier.c's
may_goto rewrite, kernel/bpf/bpf_iter.c's bpf_iter_num_*); tests/kernel/test_loops_kernel.py
holds the same programs to Linux."""

from __future__ import annotations

import errno
import struct
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from pyxdp.asm.assembler import assemble
from pyxdp.asm.insn import Instruction
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import InvalidProgram
from pyxdp.spec import CollectionSpec
from pyxdp.testing.programs import iter_case, run_iter
from pyxdp.vm import bpf_iter
from pyxdp.vm.interpreter import MAY_GOTO_LOOPS, Interpreter
from pyxdp.vm.jit import JitProgram
from pyxdp.vm.memory import Region

LOOPS = Path(__file__).parent / "verifier_objects" / "loops.o"
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1

# Counts may_goto fall-throughs in two calls of a function (each call gets its own budget)
# and in the main program after them.
MAY_GOTO_CALLS = """
r6 = 0
call count
r6 += r0
call count
r6 += r0
r7 = 0
main_loop:
may_goto main_out
r7 += 1
goto main_loop
main_out:
r0 = r7
r0 <<= 32
r0 |= r6
exit
count:
r0 = 0
loop:
may_goto out
r0 += 1
goto loop
out:
exit
"""


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_may_goto_budget_is_per_function_call(engine: str) -> None:
    insns = assemble(MAY_GOTO_CALLS)
    vm = Interpreter(insns, budget=10_000_000) if engine == "interp" else \
        JitProgram(insns, budget=10_000_000)
    r0 = vm.run()
    assert (r0 & 0xFFFF_FFFF, r0 >> 32) == (2 * MAY_GOTO_LOOPS, MAY_GOTO_LOOPS)
    assert vm.run() == r0  # set again at the next run's entry


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_may_goto_to_the_next_instruction_and_backwards(engine: str) -> None:
    # may_goto +0 spends one of the budget; the backward one is taken once it is spent.
    insns = assemble("""
r1 = 0
may_goto +0
goto start
done:
r0 = r1
exit
start:
r1 += 1
may_goto done
goto start
""")
    vm = Interpreter(insns, budget=10_000_000) if engine == "interp" else \
        JitProgram(insns, budget=10_000_000)
    assert vm.run() == MAY_GOTO_LOOPS


@pytest.mark.parametrize(("insn", "rule"), [
    (Instruction(0xE5, 0, 1, 0, 0), "opcode"),  # src_reg 1 is no BPF_JCOND
    (Instruction(0xE5, 0, 0, 0, 1), "reserved-field"),  # imm
    (Instruction(0xE5, 1, 0, 0, 0), "reserved-field"),  # dst_reg
    (Instruction(0xE6, 0, 0, 0, 0), "opcode"),  # JMP32
    (Instruction(0xED, 0, 0, 0, 0), "opcode"),  # BPF_X
])
def test_malformed_may_goto_is_refused(insn: Instruction, rule: str) -> None:
    with pytest.raises(InvalidProgram) as e:
        Interpreter((insn, *assemble("r0 = 0\nexit")))
    assert e.value.rule == rule and e.value.pc == 0


# -- the numbers iterator -------------------------------------------------------------------

# (start, end) -> (new's return, values seen (at most 16), first, last): bpf_iter.c's rules.
ITER_CASES = {
    (0, 10): (0, 10, 0, 9),
    (5, 5): (0, 0, 0, 0),
    (10, 5): (-errno.EINVAL, 0, 0, 0),
    (-3, 2): (0, 5, -3, 1),
    (0, bpf_iter.BPF_MAX_LOOPS): (0, 16, 0, 15),
    (-1, bpf_iter.BPF_MAX_LOOPS): (-errno.E2BIG, 0, 0, 0),
    (INT_MIN, INT_MIN + 3): (0, 3, INT_MIN, INT_MIN + 2),
    (INT_MAX - 2, INT_MAX): (0, 2, INT_MAX - 2, INT_MAX - 1),
    (INT_MIN, INT_MAX): (-errno.E2BIG, 0, 0, 0),
}


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_iter_num_returns(engine: str) -> None:
    for (start, end), want in ITER_CASES.items():
        with Collection(iter_case(start, end), "userspace", engine=engine) as c:
            assert run_iter(c) == want, (start, end)


def test_iter_num_state_words() -> None:
    """The 8 bytes after each call: {cur, end}, zeroed when done, refused or destroyed."""
    vm = Interpreter(assemble("r0 = 0\nexit"))
    buf = bytearray(8)
    vm.mem.reset([Region("it", 0x1000, buf)])

    def words() -> tuple[int, int]:
        cur, end = struct.unpack("<ii", buf)
        return cur, end
    assert bpf_iter.iter_num_new(vm, 0x1000, 3, 5, 0, 0) == 0 and words() == (2, 5)
    assert bpf_iter.iter_num_next(vm, 0x1000, 0, 0, 0, 0) == 0x1000 and words() == (3, 5)
    assert bpf_iter.iter_num_next(vm, 0x1000, 0, 0, 0, 0) == 0x1000 and words() == (4, 5)
    assert bpf_iter.iter_num_next(vm, 0x1000, 0, 0, 0, 0) == 0 and words() == (0, 0)
    assert bpf_iter.iter_num_next(vm, 0x1000, 0, 0, 0, 0) == 0  # drained stays drained
    bpf_iter.iter_num_new(vm, 0x1000, 1, 9, 0, 0)
    assert bpf_iter.iter_num_destroy(vm, 0x1000, 0, 0, 0, 0) == 0 and words() == (0, 0)
    buf[:] = struct.pack("<ii", 7, 9)
    assert bpf_iter.iter_num_new(vm, 0x1000, 9, 1, 0, 0) == -errno.EINVAL & 0xFFFF_FFFF
    assert words() == (0, 0)


def _python_calls(fn: Any, run: Any) -> int:
    """How often ``fn``'s code runs in Python during ``run()``."""
    calls = 0
    code = fn.__code__

    def prof(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call" and frame.f_code is code:
            calls += 1
    sys.setprofile(prof)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


def test_iter_runs_without_python_on_the_jit() -> None:
    with Collection(iter_case(0, 10), "userspace", engine="jit") as c:
        assert _python_calls(bpf_iter.iter_num_next, lambda: run_iter(c)) == 0
        assert run_iter(c) == (0, 10, 0, 9)
    with Collection(iter_case(0, 10), "userspace", engine="interp") as c:
        assert _python_calls(bpf_iter.iter_num_next, lambda: run_iter(c)) == 11


def _loops_spec() -> CollectionSpec:
    """loops.o with the programs Linux refuses left out (as libbpf's autoload=false)."""
    from dataclasses import replace
    spec = load_collection_spec(LOOPS)
    for name in ("xdp_iter_off_by_one", "xdp_loop_walk"):
        spec.programs[name] = replace(spec.programs[name], autoload=False)
    return spec


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_clang_loops_run(engine: str) -> None:
    """bpf_for, can_loop and bpf_loop as clang emits them (tests/verifier_objects/loops.c)."""
    pkt = bytes(range(1, 61))
    with Collection(_loops_spec(), "userspace", engine=engine) as c:
        # can_loop over an all-zero map never passes 1000: may_goto ends it.
        assert c.programs["xdp_can_loop_sum"].test_run(pkt).retval == 1
        assert c.programs["xdp_iter_sum"].test_run(pkt).retval == 2
        assert c.maps["sums"][0] == sum(pkt)
        assert c.programs["xdp_can_loop_sum"].test_run(pkt).retval == 1  # 1830: even
        assert c.programs["xdp_loop_count"].test_run(pkt).retval == 1  # 0+..+999 is even


# -- the bits iterator ----------------------------------------------------------------------

BITS = Path(__file__).resolve().parents[1] / "samples" / "bits_iter.o"


def _bits_run(c: Collection, words: list[int], nr_words: int, mutate: int = 0
              ) -> tuple[int, ...]:
    c.maps["cfg"].handle.update(bytes(4), struct.pack("<IIIIQ", 0, nr_words, 0, mutate, 0))
    c.maps["src"].handle.update(bytes(4), struct.pack("<520Q", *words, *[0] * (520 - len(words))))
    assert c.programs["xdp_bits"].test_run(bytes(64)).retval == 2
    return tuple(struct.unpack("<q", c.maps["out"].handle.lookup(struct.pack("<I", i)) or b"")[0]
                 for i in range(3))


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_iter_bits_returns(engine: str) -> None:
    with Collection(load_collection_spec(BITS), "userspace", engine=engine) as c:
        # bits 4, 8, 9, 12..15 and 16..19 of 0xf7310; 64 + 0 and 64 + 63 in the next word
        assert _bits_run(c, [0xF7310], 1) == (0, 10, 130)
        assert _bits_run(c, [0xF7310, 1 << 63 | 1], 2) == (0, 12, 130 + 64 + 127)
        assert _bits_run(c, [1], 0) == (-errno.EINVAL, 0, 0)
        assert _bits_run(c, [1], 512) == (-errno.E2BIG, 0, 0)
        # the loop sets all bits of the source: the copy new() took does not change
        assert _bits_run(c, [1 << 5], 1, mutate=1) == (0, 1, 5)
        assert _bits_run(c, [0, 1 << 5, 0], 3, mutate=1) == (0, 1, 69)


def test_iter_bits_state_words() -> None:
    """{bits_copy, nr_bits, bit} after each call; a forged iterator never reads outside."""
    vm = Interpreter(assemble("r0 = 0\nexit"))
    it, src = bytearray(16), bytearray(struct.pack("<QQ", 0b1010, 1 << 63))
    vm.mem.reset([Region("it", 0x1000, it), Region("src", 0x2000, src)])

    def words() -> tuple[int, int, int]:
        w, nr, bit = struct.unpack("<Qii", it)
        return w, nr, bit
    assert bpf_iter.iter_bits_new(vm, 0x1000, 0x2000, 1, 0, 0) == 0
    assert words() == (0b1010, 64, -1)
    assert bpf_iter.iter_bits_next(vm, 0x1000, 0, 0, 0, 0) == 0x100C and words()[2] == 1
    assert bpf_iter.iter_bits_next(vm, 0x1000, 0, 0, 0, 0) == 0x100C and words()[2] == 3
    assert bpf_iter.iter_bits_next(vm, 0x1000, 0, 0, 0, 0) == 0 and words()[2] == 64
    assert bpf_iter.iter_bits_next(vm, 0x1000, 0, 0, 0, 0) == 0
    assert bpf_iter.iter_bits_new(vm, 0x1000, 0x2000, 2, 0, 0) == 0 and words()[1] == 128
    src[:] = bytes(16)  # the copy is what the iterator walks
    assert bpf_iter.iter_bits_next(vm, 0x1000, 0, 0, 0, 0) == 0x100C and words()[2] == 1
    bpf_iter.iter_bits_destroy(vm, 0x1000, 0, 0, 0, 0)
    assert bpf_iter.iter_bits_next(vm, 0x1000, 0, 0, 0, 0) == 0  # freed: nothing to walk
    it[:] = struct.pack("<Qii", 0, 1 << 20, -7)  # forged: no array behind it
    assert bpf_iter.iter_bits_next(vm, 0x1000, 0, 0, 0, 0) == 0
    assert bpf_iter.iter_bits_new(vm, 0x1000, 0x2008, 2, 0, 0) == -errno.EFAULT & 0xFFFF_FFFF
    assert words() == (0, 0, -1)
    assert bpf_iter.iter_bits_new(vm, 0x1000, 0x10, 2, 0, 0) == -errno.ERANGE & 0xFFFF_FFFF
    assert bpf_iter.iter_bits_new(vm, 0x1000, 0x10, 1, 0, 0) == -errno.EFAULT & 0xFFFF_FFFF


def test_iter_bits_runs_without_python_on_the_jit() -> None:
    """One word and many (the copy in the run context's scratch slots): no Python."""
    with Collection(load_collection_spec(BITS), "userspace", engine="jit") as c:
        for fn in (bpf_iter.iter_bits_new, bpf_iter.iter_bits_next,
                   bpf_iter.iter_bits_destroy):
            assert _python_calls(fn, lambda: _bits_run(c, [0xF7310], 1)) == 0
            assert _python_calls(fn, lambda: _bits_run(c, [3, 1], 2)) == 0
            assert _python_calls(fn, lambda: _bits_run(c, [1 << 63] * 511, 511)) == 0


def test_iter_bits_slots_run_out_as_bpf_mem_alloc_fails() -> None:
    """BITS_SLOTS live multi-word iterators at distinct addresses; one more gets -ENOMEM
    (before its source is read) until one is destroyed; one address reuses its slot."""
    vm = Interpreter(assemble("r0 = 0\nexit"))
    its, src = bytearray(16 * (bpf_iter.BITS_SLOTS + 1)), bytearray(16)
    vm.mem.reset([Region("it", 0x1000, its), Region("src", 0x2000, src)])
    for k in range(bpf_iter.BITS_SLOTS):
        assert bpf_iter.iter_bits_new(vm, 0x1000 + 16 * k, 0x2000, 2, 0, 0) == 0
    assert bpf_iter.iter_bits_new(vm, 0x1000, 0x2000, 2, 0, 0) == 0  # its own slot again
    last = 0x1000 + 16 * bpf_iter.BITS_SLOTS
    assert bpf_iter.iter_bits_new(vm, last, 0x10, 2, 0, 0) == -errno.ENOMEM & 0xFFFF_FFFF
    bpf_iter.iter_bits_destroy(vm, 0x1010, 0, 0, 0, 0)
    assert bpf_iter.iter_bits_new(vm, last, 0x10, 2, 0, 0) == -errno.ERANGE & 0xFFFF_FFFF
    assert bpf_iter.iter_bits_new(vm, last, 0x2000, 2, 0, 0) == 0


def test_iter_bits_native_agrees_with_python_on_any_source() -> None:
    """The JIT's twins and the Python kfuncs on the same runs: map, stack, packet and raw
    sources of 1..511 words, in bounds and running past their region (-EFAULT), user and
    non-canonical addresses (-ERANGE), kernel ones (-EFAULT), a source changed meanwhile."""
    import random

    from pyxdp.vm.maccess import CANONICAL_HIGH, VSYSCALL_PAGE
    from pyxdp.vm.memory import STACK_BASE, STACK_SIZE

    rng = random.Random(11)
    top = STACK_BASE + STACK_SIZE
    raws = [0x10, 1 << 47, CANONICAL_HIGH, VSYSCALL_PAGE + 8, (1 << 64) - 8, top - 16,
            top - 8, top - 200, top + 8]
    words = [rng.getrandbits(64) & rng.getrandbits(64) for _ in range(520)]
    words[3] = 0
    runs = []
    for _ in range(60):
        nr = rng.choice([1, 2, 3, 8, 63, 64, 65, 200, 511, 512, 0])
        runs.append(struct.pack("<IIIIQ", rng.randrange(4), nr, rng.choice(
            [0, 1, 3, 7, 300, 519, 520 - nr if nr < 520 else 0, 1499 - 8 * nr]) & 0xFFFF_FFFF,
            rng.randrange(2), rng.choice(raws)))
    got = {}
    for engine in ("interp", "jit"):
        with Collection(load_collection_spec(BITS), "userspace", engine=engine) as c:
            outs = []
            for cfg in runs:
                c.maps["cfg"].handle.update(bytes(4), cfg)
                c.maps["src"].handle.update(bytes(4), struct.pack("<520Q", *words))
                pkt = struct.pack("<188Q", *words[:188])
                assert c.programs["xdp_bits"].test_run(pkt).retval == 2
                outs.append(tuple(c.maps["out"].handle.lookup(struct.pack("<I", i))
                                  for i in range(4)))
            got[engine] = outs
    assert got["jit"] == got["interp"]
    rets = {struct.unpack("<q", o[0] or b"")[0] for o in got["jit"]}
    assert {0, -errno.EINVAL, -errno.E2BIG, -errno.EFAULT, -errno.ERANGE} <= rets


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_iter_bits_slots_run_out_on_both_engines(engine: str) -> None:
    """17 live two-word iterators: the 17th gets -ENOMEM; after one is destroyed a new
    one gets its slot (r0 = the 17th's return + the last one's), natively on the JIT."""
    from pyxdp.net.packets import udp_packet
    from pyxdp.testing.verifier_cases import VerifierCase

    lines = ["*(u64 *)(r10 -8) = 3", "*(u64 *)(r10 -16) = 5"]
    for k in range(bpf_iter.BITS_SLOTS + 1):
        lines += ["r1 = r10", f"r1 += {-32 - 16 * k}", "r2 = r10", "r2 += -16", "r3 = 2",
                  "call KFUNC(bpf_iter_bits_new)"]
    lines += ["r6 = r0", "r1 = r10", "r1 += -32", "call KFUNC(bpf_iter_bits_destroy)",
              "r1 = r10", f"r1 += {-32 - 16 * bpf_iter.BITS_SLOTS}", "r2 = r10", "r2 += -16",
              "r3 = 2", "call KFUNC(bpf_iter_bits_new)", "r0 += r6", "exit"]
    spec = VerifierCase("enomem", "\n".join(lines), None).spec()
    with Collection(spec, engine=engine, verify=False) as c:
        prog = c.programs["enomem"]
        got = []
        calls = _python_calls(bpf_iter.iter_bits_new,
                              lambda: got.append(prog.test_run(udp_packet(b"")).retval))
        assert got == [-errno.ENOMEM & 0xFFFF_FFFF]
        assert calls == (0 if engine == "jit" else bpf_iter.BITS_SLOTS + 2)
        # The leaked iterators keep their slots (keyed by address) into the next run:
        # the first new then finds none free, as the interpreter's store does.
        assert prog.test_run(udp_packet(b"")).retval == 0
