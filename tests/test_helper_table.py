"""HelperTable: helpers by id whose rarer ones load with their first look-up (issue 13).

A deferred id is a member before its module loads (so "is there a helper #n" and the
engines' unknown-helper errors do not change), loads on its first look-up, and stays
deferred in a copy; a program loads the helpers it calls."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pyxdp.errors import UnsupportedHelper
from pyxdp.vm.interpreter import Helper, HelperTable, Interpreter

ROOT = Path(__file__).resolve().parents[1]


def _fn(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return 7


def test_a_deferred_id_is_a_member_before_its_module_loads() -> None:
    t = HelperTable({1: Helper(1, "one", _fn)})
    t.defer("pyxdp.vm.bpf_timer", "TIMER_HELPERS", (169, 170))
    assert 169 in t and 171 not in t and len(t) == 3 and sorted(t) == [1, 169, 170]
    assert t.deferred() == {169: "pyxdp.vm.bpf_timer", 170: "pyxdp.vm.bpf_timer"}
    c = t.copy()
    assert t[169].name == "timer_init"  # the look-up loads it
    assert t.deferred() == {170: "pyxdp.vm.bpf_timer"}
    assert c.deferred() == {169: "pyxdp.vm.bpf_timer", 170: "pyxdp.vm.bpf_timer"}
    assert c[169] is t[169] and c.get(171) is None
    c[170] = Helper(170, "mine", _fn)  # a program's own binding replaces the deferred one
    assert c[170].name == "mine" and c.deferred() == {}
    del t[170]
    assert 170 not in t and len(t) == 2
    with pytest.raises(KeyError):
        del t[170]


def test_a_wrong_deferral_is_a_bug_not_a_missing_helper() -> None:
    t = HelperTable()
    t.defer("pyxdp.vm.bpf_timer", "TIMER_HELPERS", (12345,))
    with pytest.raises(LookupError, match="has no helper #12345"):
        t.get(12345)


def test_the_interpreter_says_the_same_of_a_helper_no_table_has() -> None:
    from pyxdp.asm.insn import Instruction
    from pyxdp.asm.macros import exit_insn, mov64_imm
    from pyxdp.asm.opcodes import OP_CALL
    t = HelperTable()
    t.defer("pyxdp.vm.bpf_timer", "TIMER_HELPERS", (169,))
    insns = [Instruction(OP_CALL, 0, 0, 0, 170), mov64_imm(0, 0), exit_insn()]
    with pytest.raises(UnsupportedHelper, match=r"#170\), which this engine does not "):
        Interpreter(insns, helpers=t)


_CALLS = """
import sys
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.packets import udp_packet
with Collection(load_collection_spec(sys.argv[1]), "userspace", engine="interp") as c:
    prog = next(iter(c.programs.values()))
    prog.test_run(udp_packet(b"x" * 64))
    print("pyxdp.net.filter_sk" in sys.modules, 84 in prog.handle.helpers)
"""


@pytest.mark.parametrize(("obj", "loads"), [("xdp1.o", False), ("sk.o", True)])
def test_a_program_loads_the_helpers_it_calls(obj: str, loads: bool) -> None:
    """sk.o calls bpf_sk_lookup_tcp: the socket helpers load with it; xdp1.o's do not."""
    out = subprocess.run([sys.executable, "-c", _CALLS, str(ROOT / "samples" / obj)],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    assert out == [str(loads), "True"]


def test_a_test_run_namespace_is_made_once_under_threads() -> None:
    """``TestRunEnv.fib`` is made on its first read; readers racing to it share one."""
    import threading

    from pyxdp.net.test_run import TestRunEnv

    for _ in range(20):
        env = TestRunEnv()
        seen: list[object] = []
        start = threading.Barrier(4)

        def read(env: TestRunEnv = env, start: threading.Barrier = start,
                 seen: list[object] = seen) -> None:
            start.wait()
            seen.append(env.fib)

        threads = [threading.Thread(target=read) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(seen) == 4 and all(f is seen[0] for f in seen)
        env.fib = None  # a namespace set to None is made again on the next read
        assert env.fib is not None and env.fib is not seen[0]
